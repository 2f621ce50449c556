//! GPU tests of the bounds of every product: no path writes outside C, and
//! A and B are never written.
//!
//! Guarded against: stage 9's TMA-store epilogue writing whole 16-byte
//! chunks, which changed the padding after each line of C whose bytes are
//! not a multiple of 16 (seen with a column-major f32 C of 129 rows and ld
//! 132: elements 129..131 of each column changed).
//!
//! Every case stores A, B and C in buffers of their own, each matrix (or
//! batch of matrices) at an offset into its buffer, with a guard value (a
//! NaN with a payload no arithmetic produces; for i8 and i32 a sentinel) in
//! every position that is not an element: before the first element, in the
//! padding between lines (`ld` > line), between the matrices of a batch and
//! after the last element. After the product every guard must come back
//! bit for bit, A's and B's whole buffers must be unchanged, and every
//! element of C must equal the CPU reference exactly: the operands and C0
//! are small integers in [-4, 4] and alpha, beta small dyadic numbers (i8:
//! integers), so every product's exact value is an f32 (|value| < 2^24), and
//! the result is that value rounded once to C's type (f16 and bf16 C round;
//! the others are exact). With beta = 0, C's elements start as NaN (i32:
//! i32::MIN): a product that read C would leave NaN behind.
//!
//! Covered:
//! - Every type pair: f64, f32, f32 on TF32 (`allow_tf32`), f16 -> f32,
//!   f16 -> f16, bf16 -> f32, bf16 -> bf16, i8 -> i32 (stage 9 on compute
//!   capability 9.0, stage 8's `mma.sync` kernels on 8.x, and asked for with
//!   `.stage(Stage::TensorCore)`).
//! - C row-major and column-major; leading dimensions equal to the line,
//!   with lines not on 16 bytes, on 16 bytes (not 128) and on 128 bytes;
//!   shapes whose lines in kernel form (n for a row-major C, m for a
//!   column-major one) are and are not a multiple of 16 bytes (m, n in 129,
//!   333, 17, 68, 36, 200, ...); C at the start of its buffer and at offsets
//!   that are and are not 16-byte aligned.
//! - Host path: C as the caller's slice at an offset (`MatMut::from_slice`),
//!   as a block of a larger `Matrix` (`view_mut`), as a block of a
//!   page-locked `Matrix` (`to_pinned`), and as a whole `Matrix` (the
//!   reported call); f64 and f32 also out of core (`memory_budget`) over
//!   several streams. Device path: every buffer uploaded whole with its
//!   guards, C a `view_mut` of it, `run_device`, every buffer downloaded
//!   whole.
//! - Split-K: `.split_k(4)` (f64, f32); stage 9's planner split for a small
//!   C with a long k (asserted on compute capability 9.0).
//! - Every stage 1-8 (f64, f32) on the device path, where each kernel writes
//!   C itself.
//! - alpha and beta: beta = 0 (C poisoned), beta != 0, alpha = 0.
//! - Strided batches (`run_strided`, `run_strided_device`): gaps between the
//!   matrices holding guards, interleaved matrices (a (row, batch, col)
//!   tensor, the other matrices in each one's padding), a shared B (stride 0).
//!
//! A failure names the case and the first storage element touched: its
//! index, where it lies relative to C, and its bits before and after.
//!
//! `GEMM_TEST_SIZES` (set for compute-sanitizer runs) shrinks the shapes.
//! They need an NVIDIA GPU: ignored by default, run with `--include-ignored`;
//! without a GPU they fail (`Error::NoDriver` / `Error::NoDevice`), never pass.

mod common;

use common::{device, offset, required_len, Rng};
use gemm::half::{bf16, f16};
use gemm::tuning::{warpgroup_plan, Stage, WgmmaTypes};
use gemm::{Device, DeviceMatrix, Error, Gemm, Layout, MatMut, MatRef, Matrix, Precision, Product, Scalar, Strided};
use std::sync::Arc;

const R: Layout = Layout::RowMajor;
const C: Layout = Layout::ColMajor;

// ---------------------------------------------------------------------------
// Element types: guards and bits
// ---------------------------------------------------------------------------

/// Element types with a guard value (written wherever a buffer holds no
/// element; must come back bit for bit) and access to their bits; the
/// buffers go up and come back whole through cudarc (`DeviceRepr` for f16
/// and bf16: cudarc's `f16` feature, a dev-dependency).
trait Guard: Scalar + gemm::cudarc::driver::DeviceRepr {
    const GUARD: Self;
    fn bits(self) -> u64;
}

impl Guard for f64 {
    const GUARD: f64 = f64::from_bits(0x7FF8_DEAD_BEEF_CAFE);
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

impl Guard for f32 {
    const GUARD: f32 = f32::from_bits(0x7FC0_BEEF);
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}

impl Guard for f16 {
    // A quiet NaN with payload 0x5A.
    const GUARD: f16 = f16::from_bits(0x7E5A);
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}

impl Guard for bf16 {
    // A quiet NaN with payload 0x1A.
    const GUARD: bf16 = bf16::from_bits(0x7FDA);
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}

impl Guard for i8 {
    const GUARD: i8 = 0x5A;
    fn bits(self) -> u64 {
        self as u8 as u64
    }
}

impl Guard for i32 {
    const GUARD: i32 = 0x5A5A_A5A5;
    fn bits(self) -> u64 {
        self as u32 as u64
    }
}

// ---------------------------------------------------------------------------
// Type pairs
// ---------------------------------------------------------------------------

/// The products: operand type -> C type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pair {
    F64,
    F32,
    Tf32,
    F16F32,
    F16,
    Bf16F32,
    Bf16,
    I8,
}

impl Pair {
    const ALL: [Pair; 8] =
        [Pair::F64, Pair::F32, Pair::Tf32, Pair::F16F32, Pair::F16, Pair::Bf16F32, Pair::Bf16, Pair::I8];
    /// The pairs of stage 9 (stage 8's `mma.sync` kernels below 9.0).
    const MIXED: [Pair; 6] = [Pair::Tf32, Pair::F16F32, Pair::F16, Pair::Bf16F32, Pair::Bf16, Pair::I8];

    fn name(self) -> &'static str {
        match self {
            Pair::F64 => "f64",
            Pair::F32 => "f32",
            Pair::Tf32 => "f32 on TF32",
            Pair::F16F32 => "f16 -> f32",
            Pair::F16 => "f16 -> f16",
            Pair::Bf16F32 => "bf16 -> f32",
            Pair::Bf16 => "bf16 -> bf16",
            Pair::I8 => "i8 -> i32",
        }
    }

    /// Bytes of an operand element.
    fn ab_bytes(self) -> usize {
        match self {
            Pair::F64 => 8,
            Pair::F32 | Pair::Tf32 => 4,
            Pair::F16F32 | Pair::F16 | Pair::Bf16F32 | Pair::Bf16 => 2,
            Pair::I8 => 1,
        }
    }

    /// Bytes of an element of C.
    fn c_bytes(self) -> usize {
        match self {
            Pair::F64 => 8,
            Pair::F16 | Pair::Bf16 => 2,
            _ => 4,
        }
    }

    /// Stage 9's types of the pair.
    fn wgmma(self) -> Option<WgmmaTypes> {
        match self {
            Pair::F64 | Pair::F32 => None,
            Pair::Tf32 => Some(WgmmaTypes::Tf32),
            Pair::F16F32 => Some(WgmmaTypes::F16F32),
            Pair::F16 => Some(WgmmaTypes::F16),
            Pair::Bf16F32 => Some(WgmmaTypes::Bf16F32),
            Pair::Bf16 => Some(WgmmaTypes::Bf16),
            Pair::I8 => Some(WgmmaTypes::S8),
        }
    }

    /// The builder of the pair's default kernels.
    fn base(self) -> Gemm {
        match self {
            Pair::Tf32 => Gemm::new().allow_tf32(true),
            _ => Gemm::new(),
        }
    }

    /// (alpha, beta) of case `i`: beta = 0 (C poisoned), beta != 0, alpha =
    /// 0; integers for i8 (its alpha and beta are i32). The first five have
    /// alpha != 0.
    fn scalars(self, i: usize) -> (f64, f64) {
        const FLOAT: [(f64, f64); 6] = [(1.0, 0.0), (-1.5, 0.5), (0.5, -2.0), (2.0, 1.0), (-1.0, 0.0), (0.0, -0.5)];
        const INT: [(f64, f64); 6] = [(1.0, 0.0), (-3.0, 2.0), (2.0, -1.0), (1.0, 1.0), (-1.0, 0.0), (0.0, 3.0)];
        if self == Pair::I8 {
            INT[i % 6]
        } else {
            FLOAT[i % 6]
        }
    }
}

/// Calls `$f::<T, C>(args)` with the element types of `$pair`.
macro_rules! per_pair {
    ($pair:expr, $f:ident($($arg:expr),* $(,)?)) => {
        match $pair {
            Pair::F64 => $f::<f64, f64>($($arg),*),
            Pair::F32 | Pair::Tf32 => $f::<f32, f32>($($arg),*),
            Pair::F16F32 => $f::<f16, f32>($($arg),*),
            Pair::F16 => $f::<f16, f16>($($arg),*),
            Pair::Bf16F32 => $f::<bf16, f32>($($arg),*),
            Pair::Bf16 => $f::<bf16, bf16>($($arg),*),
            Pair::I8 => $f::<i8, i32>($($arg),*),
        }
    };
}

// ---------------------------------------------------------------------------
// Where a matrix (or batch) lies in its buffer
// ---------------------------------------------------------------------------

/// `count` matrices of `rows x cols` in `layout` with leading dimension
/// `ld`, `stride` elements apart, the first `lead.0` whole lines (of `ld`)
/// plus `lead.1` elements into a buffer that runs on `tail` elements after
/// the last one (and at least to the end of the last line, so the buffer
/// is also a matrix of lines of `ld` elements whose block is the first
/// matrix: [`Place::parent`], [`Place::view_at`]).
#[derive(Clone, Copy, Debug)]
struct Place {
    rows: usize,
    cols: usize,
    layout: Layout,
    ld: usize,
    lead: (usize, usize),
    count: usize,
    stride: usize,
    tail: usize,
    /// Bytes of an element (for the descriptions).
    bytes: usize,
}

impl Place {
    /// One matrix; `lead.1` is clamped so the first line fits in its line of the buffer.
    fn new(rows: usize, cols: usize, layout: Layout, ld: usize, lead: (usize, usize), bytes: usize) -> Place {
        let line = match layout {
            Layout::RowMajor => cols,
            Layout::ColMajor => rows,
        };
        assert!(ld >= line.max(1), "test bug: ld {ld} below the line {line}");
        Place { rows, cols, layout, ld, lead: (lead.0, lead.1.min(ld - line)), count: 1, stride: 0, tail: 5, bytes }
    }

    /// `count` matrices `stride` apart.
    fn batch(self, count: usize, stride: usize) -> Place {
        Place { count, stride, ..self }
    }

    /// Elements in a line (a row of a row-major matrix, a column of a column-major one).
    fn line(&self) -> usize {
        match self.layout {
            Layout::RowMajor => self.cols,
            Layout::ColMajor => self.rows,
        }
    }

    /// Lines of one matrix.
    fn outer(&self) -> usize {
        match self.layout {
            Layout::RowMajor => self.rows,
            Layout::ColMajor => self.cols,
        }
    }

    /// Elements of one matrix from its first element to its last.
    fn one(&self) -> usize {
        required_len(self.rows, self.cols, self.layout, self.ld)
    }

    /// The first element's index in the buffer.
    fn off(&self) -> usize {
        self.lead.0 * self.ld + self.lead.1
    }

    /// Index of element (i, j) of matrix z.
    fn at(&self, z: usize, i: usize, j: usize) -> usize {
        self.off() + z * self.stride + offset(self.layout, self.ld, i, j)
    }

    /// Elements from the first element of the first matrix to the last of the last.
    fn extent(&self) -> usize {
        (self.count - 1) * self.stride + self.one()
    }

    fn len(&self) -> usize {
        (self.off() + self.extent() + self.tail).max((self.lead.0 + self.outer()) * self.ld)
    }

    /// The buffer as a matrix of whole lines of `ld` elements: (rows, cols).
    fn parent(&self) -> (usize, usize) {
        let lines = self.len() / self.ld;
        match self.layout {
            Layout::RowMajor => (lines, self.ld),
            Layout::ColMajor => (self.ld, lines),
        }
    }

    /// The first matrix's (row, col) in [`Place::parent`].
    fn view_at(&self) -> (usize, usize) {
        match self.layout {
            Layout::RowMajor => (self.lead.0, self.lead.1),
            Layout::ColMajor => (self.lead.1, self.lead.0),
        }
    }

    /// The buffer: `value(z, i, j)` at the elements, the guard elsewhere.
    fn fill<T: Guard>(&self, mut value: impl FnMut(usize, usize, usize) -> T) -> Vec<T> {
        let mut data = vec![T::GUARD; self.len()];
        for z in 0..self.count {
            for i in 0..self.rows {
                for j in 0..self.cols {
                    data[self.at(z, i, j)] = value(z, i, j);
                }
            }
        }
        data
    }

    /// Where buffer index `o` lies, in words.
    fn locate(&self, o: usize) -> String {
        let off = self.off();
        if o < off {
            return format!("{} elements before the first element", off - o);
        }
        let r = o - off;
        if r >= self.extent() {
            return format!("{} elements after the last element", r + 1 - self.extent());
        }
        let (z, r) = if self.count > 1 && self.stride >= self.one() {
            ((r / self.stride).min(self.count - 1), r - (r / self.stride).min(self.count - 1) * self.stride)
        } else {
            (0, r)
        };
        let word = match self.layout {
            Layout::RowMajor => "row",
            Layout::ColMajor => "column",
        };
        let (line, pos) = (r / self.ld, r % self.ld);
        let what = if line >= self.outer() {
            "past the last line: a gap between matrices".to_string()
        } else if pos >= self.line() {
            format!("padding, {} past the end of the line", pos - self.line() + 1)
        } else {
            "an element's position".to_string()
        };
        let of = if self.count > 1 { format!(" of matrix {z}") } else { String::new() };
        format!("{word} {line}{of}, position {pos} ({what}; lines of {} elements, ld {})", self.line(), self.ld)
    }
}

impl core::fmt::Display for Place {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (b, off) = (self.bytes, self.off());
        write!(
            f,
            "{}x{} {} ld {} (line {} B, ld {} B) at element {off} ({})",
            self.rows,
            self.cols,
            self.layout.short_name(),
            self.ld,
            self.line() * b,
            self.ld * b,
            if (off * b) % 16 == 0 { "16-byte aligned" } else { "not 16-byte aligned" }
        )?;
        if self.count > 1 {
            write!(f, ", {} matrices {} apart", self.count, self.stride)?;
        }
        Ok(())
    }
}

/// Leading dimensions for lines of `line` elements of `bytes` bytes: the
/// line itself, then the first longer ones whose lines are not on 16 bytes,
/// on 16 bytes but not 128, and on 128 bytes.
fn lds(line: usize, bytes: usize) -> [usize; 4] {
    let line = line.max(1);
    let first = |ok: &dyn Fn(usize) -> bool| (line + 1..).find(|&ld| ok(ld)).expect("some ld");
    [
        line,
        first(&|ld| (ld * bytes) % 16 != 0),
        first(&|ld| (ld * bytes) % 16 == 0 && (ld * bytes) % 128 != 0),
        first(&|ld| (ld * bytes) % 128 == 0),
    ]
}

/// Offsets of C in its buffer: at its start, one line and one element in
/// (not 16-byte aligned unless the line is), two lines and 16 bytes in.
fn leads(bytes: usize) -> [(usize, usize); 3] {
    [(0, 0), (1, 1), (2, 16 / bytes)]
}

fn restricted() -> bool {
    std::env::var_os("GEMM_TEST_SIZES").is_some()
}

/// Under `GEMM_TEST_SIZES` (compute-sanitizer, which slows every launch
/// down by orders of magnitude) one case in `n` (n prime to the tables'
/// rotations, so every leading dimension, offset and scalar still comes up);
/// else all.
fn thin(cases: Vec<Case>, n: usize) -> Vec<Case> {
    if !restricted() {
        return cases;
    }
    cases.into_iter().enumerate().filter(|(i, _)| i % n == 0).map(|(_, c)| c).collect()
}

/// (m, n, k) of the single products: lines in kernel form (n row-major, m
/// column-major) that are and are not a multiple of 16 bytes.
fn shapes() -> Vec<(usize, usize, usize)> {
    if restricted() {
        vec![(17, 20, 24), (9, 33, 16), (1, 7, 3)]
    } else {
        vec![(129, 68, 255), (333, 36, 70), (17, 129, 40), (64, 200, 96), (1, 7, 3)]
    }
}

// ---------------------------------------------------------------------------
// Operands, reference, one case
// ---------------------------------------------------------------------------

/// A small integer in [-4, 4].
fn small(rng: &mut Rng) -> f64 {
    rng.below(9) as f64 - 4.0
}

/// The operands of `count` m x n x k products (A_z, B_z as small integers,
/// row-major m x k and k x n; one A or B shared by all when its count is 1)
/// and their exact products A_z B_z (f64, row-major m x n).
struct Problem {
    m: usize,
    n: usize,
    k: usize,
    a: Vec<Vec<f64>>,
    b: Vec<Vec<f64>>,
    ab: Vec<Vec<f64>>,
}

impl Problem {
    fn new((m, n, k): (usize, usize, usize), (a_count, b_count, count): (usize, usize, usize), seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let mut draw = |len: usize| (0..len).map(|_| small(&mut rng)).collect::<Vec<f64>>();
        let a: Vec<Vec<f64>> = (0..a_count).map(|_| draw(m * k)).collect();
        let b: Vec<Vec<f64>> = (0..b_count).map(|_| draw(k * n)).collect();
        let ab = (0..count)
            .map(|z| {
                let (x, y) = (&a[if a_count == 1 { 0 } else { z }], &b[if b_count == 1 { 0 } else { z }]);
                let mut out = vec![0.0; m * n];
                // SAFETY: x is m x k, y k x n, out m x n, all packed row-major.
                unsafe {
                    matrixmultiply::dgemm(
                        m,
                        k,
                        n,
                        1.0,
                        x.as_ptr(),
                        k as isize,
                        1,
                        y.as_ptr(),
                        n as isize,
                        1,
                        0.0,
                        out.as_mut_ptr(),
                        n as isize,
                        1,
                    )
                };
                out
            })
            .collect();
        Problem { m, n, k, a, b, ab }
    }
}

/// How the operands are handed to the library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// Host: the caller's slices at their offsets (`MatRef::from_slice`, `MatMut::from_slice`).
    HostSlice,
    /// Host: blocks of larger `Matrix`es (`view`, `view_mut`).
    HostView,
    /// Host: blocks of page-locked `Matrix`es (`to_pinned`).
    HostPinned,
    /// Host: whole `Matrix`es (`from_vec_in` of the buffer; offset 0 only).
    HostMatrix,
    /// Device: each buffer uploaded whole, the matrices views of it; `run_device`.
    Device,
}

/// One product (or strided batch) with its operands' places.
#[derive(Clone, Debug)]
struct Case {
    pair: Pair,
    /// The builder without alpha and beta (kernel options, TF32).
    g: Gemm,
    /// What `g` asks for, in words.
    label: String,
    a: Place,
    b: Place,
    c: Place,
    /// `Some(count)`: a strided batch (`run_strided`), else one product.
    batch: Option<usize>,
    alpha: f64,
    beta: f64,
    seed: u64,
    path: Path,
    problem: usize,
}

impl core::fmt::Display for Case {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} {} {:?}{}: A {}; B {}; C {}; alpha {} beta {}",
            self.pair.name(),
            self.label,
            self.path,
            self.batch.map(|n| format!(" batch of {n}")).unwrap_or_default(),
            self.a,
            self.b,
            self.c,
            self.alpha,
            self.beta
        )
    }
}

/// The label of the cases that ask for stage 8 (`.stage(Stage::TensorCore)`).
const STAGE8: &str = "stage 8";

impl Case {
    /// Whether the device runs this case: the f16, bf16 and i8 products,
    /// and TF32 asked of stage 8, need compute capability 8.0 (on older
    /// devices TF32 alone falls back to the f32 kernels, which must be as
    /// careful).
    fn runs_on(&self, dev: &Device) -> bool {
        let tensor_cores = dev.compute_capability() >= (8, 0);
        match self.pair {
            Pair::F64 | Pair::F32 => true,
            Pair::Tf32 => tensor_cores || self.label != STAGE8,
            _ => tensor_cores,
        }
    }
}

fn err(e: impl core::fmt::Display) -> String {
    e.to_string()
}

fn derr(e: impl core::fmt::Debug) -> String {
    format!("{e:?}")
}

/// A case's buffers before the call (guards everywhere but at the
/// elements) and the exact values C's elements must end with.
struct Prepared<T, C> {
    a: Vec<T>,
    b: Vec<T>,
    c: Vec<C>,
    /// Per product, row-major m x n.
    expected: Vec<Vec<f64>>,
}

fn prepare<T: Guard, C: Guard>(case: &Case, p: &Problem) -> Prepared<T, C> {
    let (m, n, k) = (p.m, p.n, p.k);
    assert_eq!((case.a.rows, case.a.cols, case.b.rows, case.b.cols, case.c.rows, case.c.cols), (m, k, k, n, m, n));
    assert!(case.a.count <= p.a.len() && case.b.count <= p.b.len() && case.c.count <= p.ab.len(), "test bug: counts");
    let a = case.a.fill(|z, i, j| T::from_f64(p.a[z][i * k + j]));
    let b = case.b.fill(|z, i, j| T::from_f64(p.b[z][i * n + j]));
    let mut rng = Rng::new(case.seed);
    let c0: Vec<Vec<f64>> = (0..case.c.count).map(|_| (0..m * n).map(|_| small(&mut rng)).collect()).collect();
    // beta = 0: C is not to be read, so its elements start as NaN (i32: MIN).
    let c = case.c.fill(|z, i, j| if case.beta == 0.0 { C::POISON } else { C::from_f64(c0[z][i * n + j]) });
    // Exact in f32 (small integers, dyadic scalars), rounded once to C's type.
    let expected = (0..case.c.count)
        .map(|z| {
            (0..m * n)
                .map(|e| {
                    let v = case.alpha * p.ab[z][e] + if case.beta != 0.0 { case.beta * c0[z][e] } else { 0.0 };
                    C::from_f64(v).as_f64()
                })
                .collect()
        })
        .collect();
    Prepared { a, b, c, expected }
}

/// Runs one case and checks C, its guards, and A's and B's buffers.
fn run_case<T: Product<C> + Guard, C: Guard>(dev: &Arc<Device>, case: &Case, p: &Problem) -> Result<(), String> {
    let x = prepare::<T, C>(case, p);
    let g = case.g.clone().alpha(case.alpha).beta(case.beta);
    let (a1, b1, c1) = match case.path {
        Path::Device => on_device(dev, &g, case, &x.a, &x.b, &x.c)?,
        _ => on_host(Some(dev), &g, case, &x.a, &x.b, &x.c)?,
    };
    unchanged("A", &case.a, &x.a, &a1)?;
    unchanged("B", &case.b, &x.b, &b1)?;
    check_c(&case.c, &x.c, &c1, &x.expected)
}

/// The call on host operands: one product, or a strided batch.
fn call_host<T: Product<C>, C: Scalar>(
    g: &Gemm,
    case: &Case,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: MatMut<'_, C>,
) -> Result<(), String> {
    match case.batch {
        None => g.run(a, b, c),
        Some(count) => (|| -> Result<(), Error> {
            let a = Strided::new(a, count, case.a.stride)?;
            let b = Strided::new(b, count, case.b.stride)?;
            let c = Strided::new(c, count, case.c.stride)?;
            g.run_strided(a, b, c)
        })(),
    }
    .map_err(|e| format!("the call failed: {e}"))
}

/// A buffer as the matrix of its whole lines ([`Place::parent`]).
fn parent_of<T: Scalar>(p: &Place, data: Vec<T>) -> Result<Matrix<T>, String> {
    let (rows, cols) = p.parent();
    Matrix::from_vec_in(rows, cols, p.layout, p.ld, data).map_err(err)
}

/// The case on host operands; the three buffers after the call.
#[allow(clippy::type_complexity)]
fn on_host<T: Product<C> + Guard, C: Guard>(
    dev: Option<&Arc<Device>>,
    g: &Gemm,
    case: &Case,
    a0: &[T],
    b0: &[T],
    c0: &[C],
) -> Result<(Vec<T>, Vec<T>, Vec<C>), String> {
    let (pa, pb, pc) = (&case.a, &case.b, &case.c);
    match case.path {
        Path::HostSlice => {
            let (a, b, mut c) = (a0.to_vec(), b0.to_vec(), c0.to_vec());
            {
                let ar = MatRef::from_slice(&a[pa.off()..], pa.rows, pa.cols, pa.layout, pa.ld).map_err(err)?;
                let br = MatRef::from_slice(&b[pb.off()..], pb.rows, pb.cols, pb.layout, pb.ld).map_err(err)?;
                let cm = MatMut::from_slice(&mut c[pc.off()..], pc.rows, pc.cols, pc.layout, pc.ld).map_err(err)?;
                call_host(g, case, ar, br, cm)?;
            }
            Ok((a, b, c))
        }
        Path::HostView | Path::HostPinned => {
            let (mut am, mut bm, mut cm) =
                (parent_of(pa, a0.to_vec())?, parent_of(pb, b0.to_vec())?, parent_of(pc, c0.to_vec())?);
            if let (Path::HostPinned, Some(dev)) = (case.path, dev) {
                am = am.to_pinned(dev).map_err(err)?;
                bm = bm.to_pinned(dev).map_err(err)?;
                cm = cm.to_pinned(dev).map_err(err)?;
                assert!(am.is_pinned() && bm.is_pinned() && cm.is_pinned());
            }
            {
                let ((ar, ac), (br, bc), (cr, cc)) = (pa.view_at(), pb.view_at(), pc.view_at());
                let av = am.view(ar, ac, pa.rows, pa.cols).map_err(err)?;
                let bv = bm.view(br, bc, pb.rows, pb.cols).map_err(err)?;
                let cv = cm.view_mut(cr, cc, pc.rows, pc.cols).map_err(err)?;
                call_host(g, case, av, bv, cv)?;
            }
            Ok((am.as_slice().to_vec(), bm.as_slice().to_vec(), cm.as_slice().to_vec()))
        }
        Path::HostMatrix => {
            assert!(pa.off() == 0 && pb.off() == 0 && pc.off() == 0 && case.batch.is_none(), "test bug");
            let am = Matrix::from_vec_in(pa.rows, pa.cols, pa.layout, pa.ld, a0.to_vec()).map_err(err)?;
            let bm = Matrix::from_vec_in(pb.rows, pb.cols, pb.layout, pb.ld, b0.to_vec()).map_err(err)?;
            let mut cm = Matrix::from_vec_in(pc.rows, pc.cols, pc.layout, pc.ld, c0.to_vec()).map_err(err)?;
            g.run(&am, &bm, &mut cm).map_err(|e| format!("the call failed: {e}"))?;
            Ok((am.as_slice().to_vec(), bm.as_slice().to_vec(), cm.as_slice().to_vec()))
        }
        Path::Device => unreachable!("device cases run on_device"),
    }
}

/// A whole buffer uploaded, as the matrix of its lines ([`Place::parent`]).
fn upload<T: Guard>(dev: &Arc<Device>, p: &Place, data: &[T]) -> Result<DeviceMatrix<T>, String> {
    let buffer = dev.stream().clone_htod(data).map_err(derr)?;
    let (rows, cols) = p.parent();
    DeviceMatrix::from_cuda_slice(dev, buffer, rows, cols, p.layout, p.ld).map_err(err)
}

/// A device matrix's whole buffer, after the work queued on its stream.
fn download<T: Guard>(m: &DeviceMatrix<T>) -> Result<Vec<T>, String> {
    let s = m.buffer().stream().clone();
    s.synchronize().map_err(|e| format!("the product failed on the device: {e:?}"))?;
    let v = s.clone_dtoh(m.buffer()).map_err(derr)?;
    s.synchronize().map_err(derr)?;
    Ok(v)
}

/// The case on device buffers; the three buffers after the call.
#[allow(clippy::type_complexity)]
fn on_device<T: Product<C> + Guard, C: Guard>(
    dev: &Arc<Device>,
    g: &Gemm,
    case: &Case,
    a0: &[T],
    b0: &[T],
    c0: &[C],
) -> Result<(Vec<T>, Vec<T>, Vec<C>), String> {
    let (pa, pb, pc) = (&case.a, &case.b, &case.c);
    let (da, db, mut dc) = (upload(dev, pa, a0)?, upload(dev, pb, b0)?, upload(dev, pc, c0)?);
    {
        let ((ar, ac), (br, bc), (cr, cc)) = (pa.view_at(), pb.view_at(), pc.view_at());
        let av = da.view(ar, ac, pa.rows, pa.cols).map_err(err)?;
        let bv = db.view(br, bc, pb.rows, pb.cols).map_err(err)?;
        let cv = dc.view_mut(cr, cc, pc.rows, pc.cols).map_err(err)?;
        match case.batch {
            None => g.run_device(av, bv, cv),
            Some(count) => (|| -> Result<(), Error> {
                let a = Strided::new(av, count, pa.stride)?;
                let b = Strided::new(bv, count, pb.stride)?;
                let c = Strided::new(cv, count, pc.stride)?;
                g.run_strided_device(a, b, c)
            })(),
        }
        .map_err(|e| format!("the call failed: {e}"))?;
    }
    Ok((download(&da)?, download(&db)?, download(&dc)?))
}

/// A's or B's whole buffer came back bit for bit.
fn unchanged<T: Guard>(what: &str, p: &Place, before: &[T], after: &[T]) -> Result<(), String> {
    if before.len() != after.len() {
        return Err(format!("{what}'s buffer changed length: {} -> {}", before.len(), after.len()));
    }
    let changed: Vec<usize> = (0..before.len()).filter(|&o| before[o].bits() != after[o].bits()).collect();
    match changed.first() {
        None => Ok(()),
        Some(&o) => Err(format!(
            "{what} was written: {} elements of its buffer changed; first at index {o} ({}): bits {:#x} -> {:#x} ({:?})",
            changed.len(),
            p.locate(o),
            before[o].bits(),
            after[o].bits(),
            after[o]
        )),
    }
}

/// C's elements equal `expected` exactly; every other element of its buffer
/// came back bit for bit.
fn check_c<C: Guard>(p: &Place, before: &[C], after: &[C], expected: &[Vec<f64>]) -> Result<(), String> {
    if before.len() != after.len() {
        return Err(format!("C's buffer changed length: {} -> {}", before.len(), after.len()));
    }
    let mut element = vec![false; before.len()];
    let mut wrong = 0usize;
    let mut first_wrong = None;
    for (z, want) in expected.iter().enumerate() {
        for i in 0..p.rows {
            for j in 0..p.cols {
                let o = p.at(z, i, j);
                element[o] = true;
                let (got, want) = (after[o].as_f64(), want[i * p.cols + j]);
                if got != want {
                    wrong += 1;
                    first_wrong.get_or_insert((z, i, j, o, got, want));
                }
            }
        }
    }
    let touched: Vec<usize> =
        (0..before.len()).filter(|&o| !element[o] && before[o].bits() != after[o].bits()).collect();
    if let Some(&o) = touched.first() {
        let more: Vec<String> = touched.iter().skip(1).take(5).map(|&o| format!("{o} ({})", p.locate(o))).collect();
        return Err(format!(
            "wrote outside C: {} elements of C's buffer that are no element of C changed; first at index {o} ({}): \
             bits {:#x} ({:?}) -> {:#x} ({:?}); next: [{}]",
            touched.len(),
            p.locate(o),
            before[o].bits(),
            before[o],
            after[o].bits(),
            after[o],
            more.join(", ")
        ));
    }
    if let Some((z, i, j, o, got, want)) = first_wrong {
        let of = if p.count > 1 { format!(" of product {z}") } else { String::new() };
        return Err(format!(
            "{wrong} elements of C wrong; first C({i}, {j}){of} at index {o}: got {got}, expected {want}{}",
            if got.is_nan() { " (NaN: C read with beta = 0, or never written)" } else { "" }
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Running tables of cases
// ---------------------------------------------------------------------------

/// Runs `cases` (skipping pairs the device has no kernels for); panics with
/// every failure, or when nothing ran.
fn run_all(dev: &Arc<Device>, what: &str, cases: &[Case], problems: &[Problem]) {
    let mut ran = 0;
    let mut skipped = 0;
    let mut failures = Vec::new();
    for case in cases {
        if !case.runs_on(dev) {
            skipped += 1;
            continue;
        }
        ran += 1;
        if let Err(e) = per_pair!(case.pair, run_case(dev, case, &problems[case.problem])) {
            failures.push(format!("{case}:\n    {e}"));
        }
    }
    if skipped > 0 {
        let (major, minor) = dev.compute_capability();
        eprintln!("{what}: {skipped} cases skipped: {} has compute capability {major}.{minor}", dev.name());
    }
    assert!(ran > 0, "{what}: no case ran");
    assert!(
        failures.is_empty(),
        "{what}: {} of {ran} cases failed on {}:\n{}",
        failures.len(),
        dev.name(),
        failures.iter().take(12).cloned().collect::<Vec<_>>().join("\n")
    );
    eprintln!("{what}: {ran} cases passed on {}", dev.name());
}

/// Places of A (m x k) and B (k x n) for case `i`: every storage order in
/// rotation, padded leading dimensions (0, 1 or 2 elements), at the start of
/// their buffers or one element in (not 16-byte aligned).
fn operand_places(pair: Pair, (m, n, k): (usize, usize, usize), i: usize) -> (Place, Place) {
    let layouts = [(R, R), (R, C), (C, R), (C, C)];
    let (la, lb) = layouts[i % 4];
    let bytes = pair.ab_bytes();
    let place = |rows: usize, cols: usize, layout: Layout, pad: usize, lead: usize| {
        let line = if layout == R { cols } else { rows };
        Place::new(rows, cols, layout, line.max(1) + pad, (0, lead), bytes)
    };
    (place(m, k, la, i % 3, (i / 4) % 2), place(k, n, lb, (i + 1) % 3, (i / 8) % 2))
}

/// Single products of every shape, storage order of C, leading dimension
/// ([`lds`]) and offset ([`leads`]) for `pairs`, each with the builder of
/// `g(pair)` (None: skip the pair), on `path(i)`.
fn single_cases(
    pairs: &[Pair],
    shapes: &[(usize, usize, usize)],
    problems_from: usize,
    g: impl Fn(Pair) -> Option<(Gemm, String)>,
    path: impl Fn(usize) -> Path,
) -> Vec<Case> {
    let mut cases = Vec::new();
    for &pair in pairs {
        let Some((builder, label)) = g(pair) else { continue };
        let cb = pair.c_bytes();
        for (si, &(m, n, k)) in shapes.iter().enumerate() {
            for layout in [R, C] {
                let line = if layout == R { n } else { m };
                for ld in lds(line, cb) {
                    for lead in leads(cb) {
                        let i = cases.len();
                        let (alpha, beta) = pair.scalars(i);
                        let (a, b) = operand_places(pair, (m, n, k), i);
                        cases.push(Case {
                            pair,
                            g: builder.clone(),
                            label: label.clone(),
                            a,
                            b,
                            c: Place::new(m, n, layout, ld, lead, cb),
                            batch: None,
                            alpha,
                            beta,
                            seed: 1000 + i as u64,
                            path: path(i),
                            problem: problems_from + si,
                        });
                    }
                }
            }
        }
    }
    cases
}

fn problems_for(shapes: &[(usize, usize, usize)]) -> Vec<Problem> {
    shapes.iter().enumerate().map(|(i, &s)| Problem::new(s, (1, 1, 1), 77 + i as u64)).collect()
}

/// Asserts that the table holds C lines in kernel form that are and are not
/// a multiple of 16 bytes (stage 9 stores the former with TMA), and C at
/// 16-byte aligned and unaligned addresses.
fn assert_variety(cases: &[Case]) {
    let rows16 = |c: &Case| (c.c.line() * c.c.bytes) % 16 == 0;
    let aligned = |c: &Case| (c.c.off() * c.c.bytes) % 16 == 0;
    assert!(cases.iter().any(rows16) && cases.iter().any(|c| !rows16(c)), "lines on and off 16 bytes");
    assert!(cases.iter().any(aligned) && cases.iter().any(|c| !aligned(c)), "aligned and unaligned C");
    assert!(cases.iter().any(|c| c.beta == 0.0) && cases.iter().any(|c| c.beta != 0.0), "beta = 0 and not");
}

// ---------------------------------------------------------------------------
// The tables
// ---------------------------------------------------------------------------

/// The tables' cases and their problems.
type Table = (Vec<Case>, Vec<Problem>);

/// (m, n, k).
type Shape = (usize, usize, usize);

/// The reported call and its relatives: A 129 x 255, B 255 x 68 (packed
/// row-major), C 129 x 68 column-major with ld 132 as a whole `Matrix`
/// (`from_vec_in`), `beta(0.5)`; the other (m, ld) seen changed, (333,
/// 336) and (17, 20); every type pair; C row-major too (68 x m with ld);
/// beta 0.5 (i8: 2) and 0; host and device. `GEMM_TEST_SIZES`: (17, 20) only.
fn reported_table() -> Table {
    let k = 255;
    let mut problems = Vec::new();
    let mut cases = Vec::new();
    let reported: &[(usize, usize)] = if restricted() { &[(17, 20)] } else { &[(129, 132), (333, 336), (17, 20)] };
    for &(m, ld) in reported {
        for layout in [C, R] {
            // The same lines of C: m x 68 column-major, or 68 x m row-major.
            let (rows, cols) = if layout == C { (m, 68) } else { (68, m) };
            let problem = problems.len();
            problems.push(Problem::new((rows, cols, k), (1, 1, 1), 5000 + problem as u64));
            for pair in Pair::ALL {
                // i8's alpha and beta are i32: 2 for 0.5.
                for beta in [if pair == Pair::I8 { 2.0 } else { 0.5 }, 0.0] {
                    for path in [Path::HostMatrix, Path::Device] {
                        let (ab, cb) = (pair.ab_bytes(), pair.c_bytes());
                        let packed =
                            |rows, cols, ld, bytes| Place { tail: 0, ..Place::new(rows, cols, R, ld, (0, 0), bytes) };
                        cases.push(Case {
                            pair,
                            g: pair.base(),
                            label: "reported".into(),
                            a: packed(rows, k, k, ab),
                            b: packed(k, cols, cols, ab),
                            c: Place { tail: 0, ..Place::new(rows, cols, layout, ld, (0, 0), cb) },
                            batch: None,
                            alpha: 1.0,
                            beta,
                            seed: 6000 + cases.len() as u64,
                            path,
                            problem,
                        });
                    }
                }
            }
        }
    }
    (cases, problems)
}

/// Every type pair, every shape, storage order of C, leading dimension and
/// offset, on the host path (C as the caller's slice at an offset, a block of
/// a larger `Matrix`, a block of a page-locked one) or the device path.
fn default_table(device: bool) -> Table {
    let shapes = shapes();
    let paths = [Path::HostSlice, Path::HostView, Path::HostSlice, Path::HostPinned];
    let path = |i: usize| if device { Path::Device } else { paths[i % 4] };
    let cases = single_cases(&Pair::ALL, &shapes, 0, |p| Some((p.base(), "default".into())), path);
    (thin(cases, 7), problems_for(&shapes))
}

/// Stage 8's kernels, asked for with `.stage(Stage::TensorCore)`: the
/// mixed-precision `mma.sync` kernels (what runs below compute capability
/// 9.0) and f64's; host and device.
fn stage8_table() -> Table {
    let shapes = shapes();
    let pairs = [Pair::F64, Pair::Tf32, Pair::F16F32, Pair::F16, Pair::Bf16F32, Pair::Bf16, Pair::I8];
    let g = |p: Pair| Some((p.base().stage(Stage::TensorCore), STAGE8.to_string()));
    let cases = single_cases(&pairs, &shapes, 0, g, |i| if i % 2 == 0 { Path::HostSlice } else { Path::Device });
    (thin(cases, 7), problems_for(&shapes))
}

/// Every stage 1-8 of f64 and f32 (stage 8: f64 only), mostly on the device
/// path, where each kernel writes C itself (vector stores included).
fn stages_table() -> Table {
    let shapes: Vec<_> = if restricted() { vec![(17, 20, 24)] } else { vec![(129, 68, 255), (33, 130, 40)] };
    let mut cases = Vec::new();
    for stage in Stage::ALL {
        let g = |p: Pair| {
            let runs = p == Pair::F64 || (p == Pair::F32 && stage != Stage::TensorCore);
            runs.then(|| (Gemm::new().stage(stage), format!("{stage:?}")))
        };
        let path = |i: usize| if i % 3 == 0 { Path::HostSlice } else { Path::Device };
        let all = single_cases(&[Pair::F64, Pair::F32], &shapes, 0, g, path);
        // A third of the leading dimensions and offsets per stage, in rotation.
        let pick = stage.number() as usize % 3;
        cases.extend(all.into_iter().enumerate().filter(|(i, _)| i % 3 == pick).map(|(_, c)| c));
    }
    (thin(cases, 5), problems_for(&shapes))
}

/// Shapes of the split-K table: f64 and f32 (`.split_k(4)`), and the
/// stage-9 types (few block tiles, a long k: the planner splits).
fn split_shapes() -> (Vec<Shape>, Vec<Shape>) {
    if restricted() {
        (vec![(17, 20, 64)], vec![(33, 40, 4096)])
    } else {
        (vec![(129, 68, 255), (333, 36, 70)], vec![(129, 130, 8192), (136, 144, 4096)])
    }
}

/// Split-K: f64 and f32 with `.split_k(4)` (partial products into a
/// workspace, the reduction writing C); the stage-9 types on the long-k
/// shapes; host and device.
fn split_table() -> Table {
    let (element, long) = split_shapes();
    let mut problems = problems_for(&element);
    let paths = [Path::HostSlice, Path::Device, Path::HostView, Path::Device];
    let g = |p: Pair| Some((p.base().split_k(4), "split_k(4)".to_string()));
    let mut cases = single_cases(&[Pair::F64, Pair::F32], &element, 0, g, |i| paths[i % 4]);
    let from = problems.len();
    problems.extend(long.iter().enumerate().map(|(i, &s)| Problem::new(s, (1, 1, 1), 7100 + i as u64)));
    let mut i = 0;
    for (si, &(m, n, k)) in long.iter().enumerate() {
        for pair in Pair::MIXED {
            let cb = pair.c_bytes();
            for layout in [R, C] {
                let line = if layout == R { n } else { m };
                let [_, off16, on16, _] = lds(line, cb);
                for (ld, lead) in [(off16, (1, 1)), (on16, (0, 0)), (line, (2, 16 / cb))] {
                    // alpha != 0: alpha = 0 reads neither A nor B and is not split.
                    let (alpha, beta) = pair.scalars(i % 5);
                    let (a, b) = operand_places(pair, (m, n, k), i);
                    cases.push(Case {
                        pair,
                        g: pair.base(),
                        label: "long k (the planner's split)".into(),
                        a,
                        b,
                        c: Place::new(m, n, layout, ld, lead, cb),
                        batch: None,
                        alpha,
                        beta,
                        seed: 7200 + i as u64,
                        path: if i % 2 == 0 { Path::HostSlice } else { Path::Device },
                        problem: from + si,
                    });
                    i += 1;
                }
            }
        }
    }
    (thin(cases, 5), problems)
}

/// The host path's tiles, every type pair: out of core (a `memory_budget`
/// of 8192 elements of C: C in small tiles, k in chunks, the chunks after
/// the first accumulated with beta = 1; 96 KiB for a 16-bit C, whose k
/// stays whole) and in core, over 3 streams, from pageable and page-locked
/// memory (whose copies go straight into C's lines).
fn tiles_table() -> Table {
    let shapes: Vec<_> = if restricted() { vec![(17, 20, 24)] } else { vec![(129, 68, 255), (333, 36, 70)] };
    let paths = [Path::HostSlice, Path::HostPinned, Path::HostView];
    // 32-bit and wider C: a budget of 8192 elements of C (k in chunks).
    // 16-bit C keeps k whole: 96 KiB holds a few rows of A by B's panel.
    let budget = |p: Pair| if p.c_bytes() == 2 { 96 << 10 } else { 8192 * p.c_bytes() };
    let out_of_core = |p: Pair| Some((p.base().memory_budget(budget(p)).host_streams(3), "out of core".into()));
    let mut cases = single_cases(&Pair::ALL, &shapes, 0, out_of_core, |i| paths[i % 3]);
    let in_core = |p: Pair| Some((p.base().host_streams(3), "3 streams".to_string()));
    cases.extend(single_cases(&Pair::ALL, &shapes, 0, in_core, |i| paths[(i + 1) % 3]));
    (thin(cases, 5), problems_for(&shapes))
}

/// How the matrices of a strided batch of C lie.
#[derive(Clone, Copy, Debug)]
enum BatchForm {
    /// One after the other, `gap` elements between (lines padded too).
    Gaps { gap: usize },
    /// Interleaved: matrix z starts `line + gap` elements after matrix z - 1,
    /// in the same lines (a (row, batch, col) tensor for a row-major C): the
    /// other matrices lie in each one's padding.
    Interleaved { gap: usize },
}

/// Strided batches of 3, every type pair: C's matrices with guards in the
/// gaps between them (strides that keep 16-byte alignment and not), or
/// interleaved; A with gaps; B with gaps or shared (stride 0); host and
/// device.
fn strided_table() -> Table {
    let shapes: Vec<_> =
        if restricted() { vec![(17, 20, 24)] } else { vec![(129, 68, 64), (17, 36, 40), (40, 33, 20)] };
    strided_cases(&shapes)
}

/// The strided batches of [`strided_table`] at `shapes`.
fn strided_cases(shapes: &[Shape]) -> Table {
    let count = 3;
    let mut problems = Vec::new();
    let mut cases = Vec::new();
    for (si, &(m, n, k)) in shapes.iter().enumerate() {
        let (own_b, shared_b) = (problems.len(), problems.len() + 1);
        problems.push(Problem::new((m, n, k), (count, count, count), 8000 + 2 * si as u64));
        problems.push(Problem::new((m, n, k), (count, 1, count), 8001 + 2 * si as u64));
        for pair in Pair::ALL {
            let cb = pair.c_bytes();
            let align = 16 / cb;
            for layout in [R, C] {
                let line = if layout == R { n } else { m };
                let [_, off16, on16, _] = lds(line, cb);
                let forms = [
                    BatchForm::Gaps { gap: align },
                    BatchForm::Gaps { gap: 1 },
                    BatchForm::Interleaved { gap: align },
                    BatchForm::Interleaved { gap: 1 },
                ];
                for (j, form) in forms.into_iter().enumerate() {
                    let i = cases.len();
                    let c = match form {
                        BatchForm::Gaps { gap } => {
                            let ld = if j % 2 == 0 { on16 } else { off16 };
                            let p = Place::new(m, n, layout, ld, (i % 2, i % 2), cb);
                            p.batch(count, p.outer() * ld + gap)
                        }
                        BatchForm::Interleaved { gap } => {
                            let stride = line + gap;
                            Place::new(m, n, layout, count * stride + j % 2, (0, 0), cb).batch(count, stride)
                        }
                    };
                    let shared = i % 3 == 2;
                    let (a, b) = operand_places(pair, (m, n, k), i);
                    let a = a.batch(count, a.outer() * a.ld + 3);
                    let b = if shared { b } else { b.batch(count, b.outer() * b.ld + 2) };
                    let (alpha, beta) = pair.scalars(i);
                    cases.push(Case {
                        pair,
                        g: pair.base(),
                        label: format!("{form:?}{}", if shared { ", B shared (stride 0)" } else { "" }),
                        a,
                        b,
                        c,
                        batch: Some(count),
                        alpha,
                        beta,
                        seed: 9000 + i as u64,
                        path: if i % 2 == 0 { Path::HostSlice } else { Path::Device },
                        problem: if shared { shared_b } else { own_b },
                    });
                }
            }
        }
    }
    (thin(cases, 5), problems)
}

/// Token-sized products (`gemm_core::skinny`): C with 1 to 64 rows or
/// columns (the CUDA-core kernels, the tensor-core form where the large
/// operand's k is contiguous, and the other kernels past their limits), k
/// short, odd and long enough for several tiles of k, the large side not a
/// multiple of the kernel's block.
fn token_shapes() -> Vec<Shape> {
    if restricted() {
        vec![(3, 40, 70), (33, 1, 24), (20, 40, 33)]
    } else {
        vec![
            (1, 333, 70),
            (3, 129, 255),
            (8, 200, 1031),
            (333, 5, 70),
            (129, 1, 255),
            (68, 8, 33),
            (16, 68, 40),
            (24, 129, 100),
            (150, 40, 2100),
            (64, 72, 64),
        ]
    }
}

/// Single products of [`token_shapes`] for every type pair, storage order
/// of C, leading dimension and offset, host and device paths.
fn token_table() -> Table {
    let shapes = token_shapes();
    let paths = [Path::HostSlice, Path::Device, Path::HostView, Path::Device];
    let cases = single_cases(&Pair::ALL, &shapes, 0, |p| Some((p.base(), "default".into())), |i| paths[i % 4]);
    (thin(cases, 7), problems_for(&shapes))
}

/// Asserts that the default plan of `pair` at `shape` is the token-sized
/// kernel on `dev` (compute capability 9.0) when its small side fits it:
/// the token-sized tables test that kernel, not another.
fn assert_token_sized<T: Product<C>, C: Scalar>(dev: &Arc<Device>, pair: Pair, (m, n, k): Shape) {
    if dev.compute_capability() != (9, 0) {
        return;
    }
    // Row-major A and B: m small reads B along n, n small reads A along k
    // with X = B^T strided: the CUDA-core kernels either way (8 rows, f64
    // 4 along k and none along n: stage 8 there), not the tensor-core
    // form, except i8's with n contiguous.
    // From 2 rows on, the tensor-core pairs may take stage 9's narrow tiles
    // instead (its transposed product, or a C of few columns; tested in
    // gpu_warpgroup), and f16 and bf16 from 1 row where W's N is
    // contiguous (m small here): the kernel is then the planner's, not
    // checked here.
    let rows = match pair {
        Pair::F64 if m <= n => 0,
        Pair::F64 => 4,
        _ => 8,
    };
    // i8 with m small (X = A, k contiguous) reads B along n on the tensor
    // cores up to 64 rows (`skinny_s8_s*_mma_wn`).
    let rows = if pair == Pair::I8 && m <= n { 64 } else { rows };
    let narrow = |plan: &gemm::ProductPlan, small: usize, w_n_contiguous: bool| {
        let tile = matches!(plan.family, gemm::KernelFamily::Warpgroup { tile, .. } if tile.bn < 64);
        tile && (small >= 2 || w_n_contiguous) && pair.wgmma().is_some()
    };
    let plan = pair.base().device(dev).plan_for::<T, C>(m, n, k).unwrap();
    let token = matches!(plan.family, gemm::KernelFamily::Skinny { .. });
    let sixteen_bit = matches!(pair, Pair::F16F32 | Pair::F16 | Pair::Bf16F32 | Pair::Bf16);
    if !narrow(&plan, m.min(n), m <= n && sixteen_bit) {
        assert_eq!(token, m.min(n) <= rows, "{} {m}x{n}x{k}: {plan}", pair.name());
    }
    // B column-major, m small: A and B both read along k, the tensor-core
    // form from 9 to 32 rows for f16, bf16 and i8.
    if m <= n {
        let rows = match pair {
            Pair::F64 => 4,
            Pair::F32 | Pair::Tf32 => 8,
            _ => 32,
        };
        let plan = pair.base().op_b(gemm::Op::T).device(dev).plan_for::<T, C>(m, n, k).unwrap();
        let mma = matches!(plan.family, gemm::KernelFamily::Skinny { kernel, .. } if kernel.ends_with("_mma"));
        if !narrow(&plan, m, false) {
            let token = matches!(plan.family, gemm::KernelFamily::Skinny { .. });
            assert_eq!(token, m <= rows, "{} {m}x{n}x{k}, B column-major: {plan}", pair.name());
            let has_mma = !matches!(pair, Pair::F32 | Pair::F64 | Pair::Tf32);
            assert_eq!(mma, has_mma && m > 8 && m <= rows, "{} {m}x{n}x{k}, B column-major: {plan}", pair.name());
        }
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn reported_case_column_major_c_with_padded_ld() {
    let dev = device();
    let (cases, problems) = reported_table();
    run_all(&dev, "reported case", &cases, &problems);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn host_path_writes_only_c_for_every_type_pair() {
    let dev = device();
    let (cases, problems) = default_table(false);
    assert_variety(&cases);
    run_all(&dev, "host path", &cases, &problems);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn device_path_writes_only_c_for_every_type_pair() {
    let dev = device();
    let (cases, problems) = default_table(true);
    assert_variety(&cases);
    run_all(&dev, "device path", &cases, &problems);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn stage8_kernels_write_only_c() {
    let dev = device();
    let (cases, problems) = stage8_table();
    assert_variety(&cases);
    run_all(&dev, "stage 8", &cases, &problems);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn every_stage_writes_only_c() {
    let dev = device();
    let (cases, problems) = stages_table();
    assert_variety(&cases);
    run_all(&dev, "every stage", &cases, &problems);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn split_k_writes_only_c() {
    let dev = device();
    // The splits the table means to exercise do happen.
    let (element, long) = split_shapes();
    for &(m, n, k) in &element {
        for precision in [Precision::F64, Precision::F32] {
            let plan = Gemm::new().split_k(4).device(&dev).plan(precision, m, n, k).unwrap();
            let slices = gemm::tuning::split_k::slices(k as u32, plan.split_k, plan.config.c_tile().bk).1;
            assert!(slices > 1, "{m}x{n}x{k} {precision:?}: split_k(4) gives {slices} slice");
        }
    }
    if dev.compute_capability() == (9, 0) {
        for &(m, n, k) in &long {
            for pair in Pair::MIXED {
                let t = pair.wgmma().expect("a stage-9 pair");
                // Either kernel form (a column-major C swaps m and n).
                for (x, y) in [(m, n), (n, m)] {
                    let p = warpgroup_plan(t, x, y, k, 1, dev.sm_count());
                    assert!(
                        p.split.0 > 1,
                        "{t:?} {x}x{y}x{k} on {} SMs is not split: pick another shape",
                        dev.sm_count()
                    );
                }
            }
        }
    }
    let (cases, problems) = split_table();
    assert_variety(&cases);
    run_all(&dev, "split-K", &cases, &problems);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn host_path_tiles_write_only_c() {
    let dev = device();
    let (cases, problems) = tiles_table();
    assert_variety(&cases);
    run_all(&dev, "host tiles", &cases, &problems);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn strided_batches_write_only_c() {
    let dev = device();
    let (cases, problems) = strided_table();
    assert_variety(&cases);
    run_all(&dev, "strided batches", &cases, &problems);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn token_sized_products_write_only_c() {
    let dev = device();
    for pair in Pair::ALL {
        for shape in token_shapes() {
            per_pair!(pair, assert_token_sized(&dev, pair, shape));
        }
    }
    let (cases, problems) = token_table();
    assert_variety(&cases);
    run_all(&dev, "token-sized products", &cases, &problems);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn token_sized_strided_batches_write_only_c() {
    let dev = device();
    let shapes: Vec<Shape> =
        if restricted() { vec![(3, 40, 24)] } else { vec![(4, 36, 40), (40, 3, 20), (1, 129, 77)] };
    let (cases, problems) = strided_cases(&shapes);
    assert_variety(&cases);
    run_all(&dev, "token-sized strided batches", &cases, &problems);
}
