//! Helpers shared by the test files (each includes this file with `mod common;`):
//! the GPU or a panic, seeds, a small deterministic generator, guard values
//! and bit comparisons, operands stored in any layout with padded leading
//! dimensions, and the op/layout combinations of a product.
#![allow(dead_code)] // each test file uses a part

use gemm::check::{random_matrix, Reference};
use gemm::tuning::KernelLayouts;
use gemm::{Element, Gemm, Layout, MatRef, Matrix, Op, Scalar};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The default GPU; GPU tests fail (never pass silently) without one.
pub fn device() -> Arc<gemm::Device> {
    gemm::default_device().unwrap_or_else(|e| panic!("GPU tests need an NVIDIA GPU: {e}"))
}

/// A fresh seed for every matrix drawn.
pub fn seed() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0x5eed);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// SplitMix64: a small deterministic generator, so a failing case can be
/// replayed from its seed alone.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1), a multiple of 2^-52.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 52) as f64) - 1.0
    }

    /// Uniform in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Element types with a guard value (a quiet NaN with a payload no
/// arithmetic produces) and access to their bits.
pub trait Bits: Element {
    /// Written into padding and around views: must come back bit for bit.
    const GUARD: Self;
    fn bits(self) -> u64;
}

impl Bits for f64 {
    const GUARD: f64 = f64::from_bits(0x7FF8_DEAD_BEEF_CAFE);
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

impl Bits for f32 {
    const GUARD: f32 = f32::from_bits(0x7FC0_BEEF);
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}

/// Same length and the same bits everywhere.
pub fn same_bits<T: Bits>(x: &[T], y: &[T]) -> bool {
    x.len() == y.len() && x.iter().zip(y).all(|(a, b)| a.bits() == b.bits())
}

/// The first storage index where `x` and `y` differ in bits.
pub fn first_changed<T: Bits>(x: &[T], y: &[T]) -> Option<usize> {
    if x.len() != y.len() {
        return Some(x.len().min(y.len()));
    }
    x.iter().zip(y).position(|(a, b)| a.bits() != b.bits())
}

/// Leading dimension of a `rows x cols` matrix in `layout`, `pad` elements
/// longer than the smallest valid one (`max(1, line)`).
pub fn ld_with_pad(rows: usize, cols: usize, layout: Layout, pad: usize) -> usize {
    let line = match layout {
        Layout::RowMajor => cols,
        Layout::ColMajor => rows,
    };
    line.max(1) + pad
}

/// Elements of storage a `rows x cols` matrix in `layout` with leading dimension `ld` needs.
pub fn required_len(rows: usize, cols: usize, layout: Layout, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        return 0;
    }
    match layout {
        Layout::RowMajor => (rows - 1) * ld + cols,
        Layout::ColMajor => (cols - 1) * ld + rows,
    }
}

/// Offset of element (i, j).
pub fn offset(layout: Layout, ld: usize, i: usize, j: usize) -> usize {
    match layout {
        Layout::RowMajor => i * ld + j,
        Layout::ColMajor => j * ld + i,
    }
}

/// The storage of an operand whose op is `logical` (the m x k value of
/// op(X)): `op(stored) == logical`, stored in `layout` with leading dimension
/// `line + pad`, every non-element position (padding) holding `fill`.
pub fn store<T: Scalar>(logical: &Matrix<T>, op: Op, layout: Layout, pad: usize, fill: T) -> Matrix<T> {
    let (rows, cols) = match op {
        Op::N => (logical.rows(), logical.cols()),
        Op::T => (logical.cols(), logical.rows()),
    };
    let ld = ld_with_pad(rows, cols, layout, pad);
    let mut data = vec![fill; required_len(rows, cols, layout, ld)];
    for i in 0..rows {
        for j in 0..cols {
            data[offset(layout, ld, i, j)] = match op {
                Op::N => logical[(i, j)],
                Op::T => logical[(j, i)],
            };
        }
    }
    Matrix::from_vec_in(rows, cols, layout, ld, data).expect("store: a valid shape")
}

/// op(X) of a stored matrix, as a view (X itself, or its transpose).
pub fn op_view<T: Scalar>(x: &Matrix<T>, op: Op) -> MatRef<'_, T> {
    match op {
        Op::N => x.as_ref(),
        Op::T => x.t(),
    }
}

/// A copy of `after` with the elements (i, j) of the `rows x cols` view at
/// `(row, col)` of `parent_dims` taken from `before`: equal to `before` bit
/// for bit exactly when nothing outside the view changed.
pub fn outside_view_unchanged<T: Bits>(
    before: &Matrix<T>,
    after: &Matrix<T>,
    (row, col): (usize, usize),
    (rows, cols): (usize, usize),
) -> Result<(), String> {
    let mut expect = after.clone();
    for i in row..row + rows {
        for j in col..col + cols {
            expect[(i, j)] = before[(i, j)];
        }
    }
    match first_changed(expect.as_slice(), before.as_slice()) {
        None => Ok(()),
        Some(o) => Err(format!(
            "storage index {o} (outside the {rows}x{cols} view at ({row}, {col}) of a {}x{} {} matrix, ld {}) \
             changed: {:?} -> {:?}",
            before.rows(),
            before.cols(),
            before.layout(),
            before.ld(),
            before.as_slice().get(o),
            after.as_slice().get(o)
        )),
    }
}

/// How a product's operands are given: op flags and the storage order of
/// the stored A, B and C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub op_a: Op,
    pub op_b: Op,
    pub a: Layout,
    pub b: Layout,
    pub c: Layout,
}

const R: Layout = Layout::RowMajor;
const C: Layout = Layout::ColMajor;

impl Variant {
    /// op = N, everything row-major: the layouts the kernels were first written for.
    pub const NN: Variant = Variant { op_a: Op::N, op_b: Op::N, a: R, b: R, c: R };

    /// All 32 combinations of op(A), op(B) and the layouts of A, B and C.
    pub fn all() -> Vec<Variant> {
        let mut out = Vec::with_capacity(32);
        for op_a in [Op::N, Op::T] {
            for op_b in [Op::N, Op::T] {
                for a in [R, C] {
                    for b in [R, C] {
                        for c in [R, C] {
                            out.push(Variant { op_a, op_b, a, b, c });
                        }
                    }
                }
            }
        }
        out
    }

    /// The kernel module (storage order of the kernel's A and B) the library
    /// runs this product with: C row-major as given, or a column-major C
    /// computed as the row-major C^T = op(B)^T op(A)^T.
    pub fn kernel_layouts(&self) -> KernelLayouts {
        let op_layout = |l: Layout, op: Op| if op == Op::N { l } else { l.transposed() };
        let (la, lb) = (op_layout(self.a, self.op_a), op_layout(self.b, self.op_b));
        match self.c {
            Layout::RowMajor => KernelLayouts { a: la, b: lb },
            Layout::ColMajor => KernelLayouts { a: lb.transposed(), b: la.transposed() },
        }
    }
}

impl core::fmt::Display for Variant {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let l = |l: Layout| l.short_name();
        write!(
            f,
            "op {}{} A {} B {} C {} (kernel {})",
            self.op_a.as_char(),
            self.op_b.as_char(),
            l(self.a),
            l(self.b),
            l(self.c),
            self.kernel_layouts().suffix()
        )
    }
}

/// Runs `g` on host operands stored as `v` says (A, B with a pad of 3, C
/// with a pad of 2, padding NaN) and checks C against the reference and its
/// padding bit for bit.
pub fn check_product<T: Bits>(g: &Gemm, (m, n, k): (usize, usize, usize), v: Variant, beta: f64, what: &str) {
    let a = random_matrix::<T>(m, k, seed());
    let b = random_matrix::<T>(k, n, seed());
    let c0 = random_matrix::<T>(m, n, seed());
    let (sa, sb) = (store(&a, v.op_a, v.a, 3, T::POISON), store(&b, v.op_b, v.b, 3, T::POISON));
    // beta = 0: C is never read, so it starts as NaN everywhere.
    let before = if beta == 0.0 {
        store(&Matrix::from_fn(m, n, |_, _| T::POISON), Op::N, v.c, 2, T::POISON)
    } else {
        store(&c0, Op::N, v.c, 2, T::POISON)
    };
    let mut c = before.clone();
    let alpha = -1.5;
    g.clone().op_a(v.op_a).op_b(v.op_b).alpha(alpha).beta(beta).run(&sa, &sb, &mut c).unwrap_or_else(|e| {
        panic!("{what} {m}x{n}x{k} {v}: {e}");
    });
    let r = Reference::new(alpha, &a, &b, beta, &c0);
    let cmp = r.compare(&c);
    assert!(cmp.passed(), "{what} {m}x{n}x{k} {v} beta {beta}: {cmp}");
    outside_view_unchanged(&before, &c, (0, 0), (m, n)).unwrap_or_else(|e| panic!("{what} {m}x{n}x{k} {v}: {e}"));
}

/// Per block of `kblock` along k (q = 0, 1, ...; the last may be short):
/// the f64 sums over the block of A(i, p) B(p, j) and of |A(i, p) B(p, j)|
/// for every element (i, j), each m x n row-major; A (m x k) and B (k x n)
/// in any layout, logical (not op-applied). matrixmultiply on all cores:
/// exact where the tests' inputs keep every partial sum exact in f64 (small
/// multiples of a power of two), within f64's rounding otherwise. The
/// element-by-element loops it replaces took minutes of the GPU tests.
pub fn block_dots<Ta: Scalar, Tb: Scalar>(a: &Matrix<Ta>, b: &Matrix<Tb>, kblock: usize) -> Vec<(Vec<f64>, Vec<f64>)> {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    assert_eq!(b.rows(), k, "block_dots: inner dimensions");
    let mut pa: Vec<f64> = (0..m * k).map(|x| a[(x / k, x % k)].as_f64()).collect();
    let mut pb: Vec<f64> = (0..k * n).map(|x| b[(x / n, x % n)].as_f64()).collect();
    let mut out: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    for abs in [false, true] {
        if abs {
            pa.iter_mut().chain(pb.iter_mut()).for_each(|x| *x = x.abs());
        }
        for (q, p0) in (0..k.max(1)).step_by(kblock.max(1)).enumerate() {
            let kb = kblock.min(k - p0);
            let mut c = vec![0f64; m * n];
            if m > 0 && n > 0 && kb > 0 {
                // SAFETY: A's block is m x kb at row stride k, B's kb x n at
                // row stride n, C m x n packed: all inside the vectors.
                unsafe {
                    matrixmultiply::dgemm(
                        m,
                        kb,
                        n,
                        1.0,
                        pa.as_ptr().add(p0),
                        k as isize,
                        1,
                        pb.as_ptr().add(p0 * n),
                        n as isize,
                        1,
                        0.0,
                        c.as_mut_ptr(),
                        n as isize,
                        1,
                    )
                };
            }
            if abs {
                out[q].1 = c;
            } else {
                out.push((c, Vec::new()));
            }
        }
    }
    out
}

/// [`block_dots`] over the whole of k: (sum A B, sum |A||B|), m x n row-major.
pub fn dots<Ta: Scalar, Tb: Scalar>(a: &Matrix<Ta>, b: &Matrix<Tb>) -> (Vec<f64>, Vec<f64>) {
    block_dots(a, b, a.cols().max(1)).pop().expect("one block")
}
