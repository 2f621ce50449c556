//! GPU tests of the batched products: strided batches on the device
//! (`run_strided_device`) and on the host (`run_strided`), pointer-array
//! batches (`run_batched_device`) and grouped batches
//! (`run_grouped_device`), f64 and f32, against a CPU reference.
//!
//! - Strided: every op(A)/op(B) and layout combination of A, B and C, odd
//!   shapes (m, n, k from {1, 7, 33, 65, 130}), A or B shared by every
//!   product (stride 0), padded leading dimensions and gaps between the
//!   matrices (stride larger than a matrix) holding guard NaNs that must come
//!   back bit for bit, C poisoned with NaN for beta = 0 and finite for
//!   beta = 1.3, alpha = 0.7; batches of 0, 1, 3 and 65537 (2 x 3 x 4
//!   products: more than the grid's z limit of 65535) with every product
//!   checked; the default kernel and the stages Naive, SmemTiled,
//!   Pipelined and TensorCore (f64).
//! - Pointer-array and grouped: lists of separate allocations, C poisoned
//!   with NaN (beta = 0) or finite (beta = 1.3), grouped m from
//!   {1, 17, 100, 257} with varying n and k (k = 0 and empty problems too).
//! - Misuse: typed errors (BatchCount, BatchOverlap, BatchStorage,
//!   ShapeVaries, MixedLayouts, Problem, Overlap), C untouched.
//! - Bitwise determinism; 4 host threads at once on the default device.
//!
//! Bound: the reference is computed in f64 on the CPU; each element must
//! satisfy `|C - C_ref| <= (k + 2) eps (|alpha| |A||B| + |beta| |C0|)`
//! (eps = 2^-52 for f64, 2^-23 for f32; alpha and beta as the element type
//! rounds them), as gemm::check's; alpha = 0 must give beta * C0 rounded
//! once, exactly; products of small integers (exact in both types) must be
//! exact. Storage outside C's elements must come back bit for bit.
//!
//! They need an NVIDIA GPU: ignored by default, run with
//! `--include-ignored`; without a GPU they fail, never pass.

mod common;

use common::{device, ld_with_pad, offset, required_len, same_bits, seed, store, Bits, Rng, Variant};
use gemm::check::{random_matrix, Reference};
use gemm::cudarc::driver::DevicePtr;
use gemm::tuning::Stage;
use gemm::{
    Device, DeviceMatrix, DeviceView, DeviceViewMut, Element, Error, Gemm, Layout, MatMut, MatRef, Matrix, MatrixDims,
    Op, Operand, ShapeError, Strided,
};
use std::sync::Arc;

const R: Layout = Layout::RowMajor;
const C: Layout = Layout::ColMajor;

/// The odd sizes every dimension is drawn from.
const SIZES: [usize; 5] = [1, 7, 33, 65, 130];

// ---------------------------------------------------------------------------
// Reference and batches in one buffer
// ---------------------------------------------------------------------------

/// The CPU reference of `alpha * A * B + beta * C0` in f64 with the bound of
/// the module docs, as a [`Reference`] (so `compare` is gemm::check's).
/// BLAS semantics: A and B are not read when alpha = 0, C0 not when beta = 0.
fn reference<T: Element>(alpha: f64, a: MatRef<'_, T>, b: MatRef<'_, T>, beta: f64, c0: MatRef<'_, T>) -> Reference {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    assert_eq!((b.rows(), c0.rows(), c0.cols()), (k, m, n), "reference: shapes");
    let scale = (k as f64 + 2.0) * T::EPSILON;
    let mut value = vec![0.0; m * n];
    let mut bound = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut sum, mut abs) = (0.0f64, 0.0f64);
            if alpha != 0.0 {
                for p in 0..k {
                    let x = a.get(i, p).unwrap().as_f64() * b.get(p, j).unwrap().as_f64();
                    sum += x;
                    abs += x.abs();
                }
            }
            let c = if beta != 0.0 { c0.get(i, j).unwrap().as_f64() } else { 0.0 };
            value[i * n + j] = alpha * sum + beta * c;
            bound[i * n + j] = scale * (alpha.abs() * abs + beta.abs() * c.abs());
        }
    }
    Reference { m, n, value, bound }
}

fn op_of<T: Element>(x: MatRef<'_, T>, op: Op) -> MatRef<'_, T> {
    match op {
        Op::N => x,
        Op::T => x.t(),
    }
}

/// (rows, cols) of the stored operand whose op is `rows x cols`.
fn stored(op: Op, rows: usize, cols: usize) -> (usize, usize) {
    match op {
        Op::N => (rows, cols),
        Op::T => (cols, rows),
    }
}

/// `count` matrices in one buffer: matrix i (`rows x cols` in `layout`,
/// leading dimension `line + pad`) at element `i * stride`, where the
/// stride is 0 (`shared`: one matrix for all) or the lines of one matrix
/// plus `gap`. Every position that is no element of a matrix holds the
/// guard.
#[derive(Clone)]
struct Batch<T> {
    data: Vec<T>,
    dims: MatrixDims,
    count: usize,
    stride: usize,
}

impl<T: Bits> Batch<T> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        count: usize,
        (rows, cols): (usize, usize),
        layout: Layout,
        pad: usize,
        gap: usize,
        shared: bool,
        mut value: impl FnMut(usize, usize, usize) -> T,
    ) -> Self {
        let ld = ld_with_pad(rows, cols, layout, pad);
        let dims = MatrixDims::new(rows, cols, layout, ld);
        let one = required_len(rows, cols, layout, ld);
        let stride = if shared { 0 } else { dims.lines().0 * ld + gap };
        let held = if shared { count.min(1) } else { count };
        let len = (held.max(1) - 1) * stride + one;
        let mut data = vec![T::GUARD; len.max(1)];
        for i in 0..held {
            for r in 0..rows {
                for c in 0..cols {
                    data[i * stride + offset(layout, ld, r, c)] = value(i, r, c);
                }
            }
        }
        Batch { data, dims, count, stride }
    }

    fn matrix_in<'s>(&self, data: &'s [T], i: usize) -> MatRef<'s, T> {
        let d = self.dims;
        MatRef::from_slice(&data[i * self.stride..], d.rows, d.cols, d.layout, d.ld).unwrap()
    }

    fn matrix(&self, i: usize) -> MatRef<'_, T> {
        self.matrix_in(&self.data, i)
    }

    /// Whether each position of the buffer is an element of a matrix.
    fn elements(&self) -> Vec<bool> {
        let mut mask = vec![false; self.data.len()];
        let d = self.dims;
        for i in 0..self.count {
            for r in 0..d.rows {
                for c in 0..d.cols {
                    mask[i * self.stride + d.offset(r, c)] = true;
                }
            }
        }
        mask
    }

    fn host(&self) -> Strided<MatRef<'_, T>> {
        let d = self.dims;
        let first = MatRef::from_slice(&self.data, d.rows, d.cols, d.layout, d.ld).unwrap();
        Strided::new(first, self.count, self.stride).unwrap()
    }

    fn host_mut(&mut self) -> Strided<MatMut<'_, T>> {
        let d = self.dims;
        let first = MatMut::from_slice(&mut self.data, d.rows, d.cols, d.layout, d.ld).unwrap();
        Strided::new(first, self.count, self.stride).unwrap()
    }

    /// The whole buffer on the device, as a matrix shaped as the first
    /// (its view runs on to the end of the buffer).
    fn upload(&self, dev: &Arc<Device>) -> DeviceMatrix<T> {
        let d = self.dims;
        let buffer = dev.stream().clone_htod(&self.data).unwrap();
        DeviceMatrix::from_cuda_slice(dev, buffer, d.rows, d.cols, d.layout, d.ld).unwrap()
    }
}

/// The error of a call expected to fail (device views have no `Debug`, so
/// no `unwrap_err`).
fn error_of<V>(r: Result<V, Error>) -> Error {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

/// The whole buffer of a device matrix (all matrices of a batch), after
/// the work queued on its stream.
fn download<T: Element>(m: &DeviceMatrix<T>) -> Vec<T> {
    let s = m.buffer().stream().clone();
    s.synchronize().unwrap();
    let v = s.clone_dtoh(m.buffer()).unwrap();
    s.synchronize().unwrap();
    v
}

fn device_batch<'a, T: Element>(m: &'a DeviceMatrix<T>, count: usize, stride: usize) -> Strided<DeviceView<'a, T>> {
    Strided::new(m, count, stride).unwrap()
}

fn device_batch_mut<'a, T: Element>(
    m: &'a mut DeviceMatrix<T>,
    count: usize,
    stride: usize,
) -> Strided<DeviceViewMut<'a, T>> {
    Strided::new(m, count, stride).unwrap()
}

/// Checks every product of a strided batch (C's buffer after the run is
/// `after`) against the reference, and that every position of C's buffer
/// that is no element of a C came back bit for bit.
#[allow(clippy::too_many_arguments)]
fn check_products<T: Bits>(
    what: &str,
    v: Variant,
    alpha: f64,
    beta: f64,
    a: &Batch<T>,
    b: &Batch<T>,
    c0: &Batch<T>,
    after: &[T],
) {
    assert_eq!(after.len(), c0.data.len(), "{what}: C's buffer");
    let (alpha, beta) = (T::from_f64(alpha).as_f64(), T::from_f64(beta).as_f64());
    for i in 0..c0.count {
        let r = reference(alpha, op_of(a.matrix(i), v.op_a), op_of(b.matrix(i), v.op_b), beta, c0.matrix(i));
        let cmp = r.compare(c0.matrix_in(after, i));
        assert!(cmp.passed(), "{what}: product {i} of {}: {cmp}", c0.count);
    }
    for (o, is_element) in c0.elements().into_iter().enumerate() {
        assert!(
            is_element || after[o].bits() == c0.data[o].bits(),
            "{what}: C's storage index {o} (no element of a C; stride {}, {:?}) changed: {:?} -> {:?}",
            c0.stride,
            c0.dims,
            c0.data[o],
            after[o]
        );
    }
}

// ---------------------------------------------------------------------------
// Strided cases
// ---------------------------------------------------------------------------

/// Which operand every product shares (stride 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Share {
    None,
    A,
    B,
}

/// One strided batch: the op/layout variant, shape, count, shared operand,
/// padding of the lines (A, B, C), gaps between the matrices, scalars.
#[derive(Clone, Copy, Debug)]
struct Case {
    v: Variant,
    m: usize,
    n: usize,
    k: usize,
    count: usize,
    share: Share,
    pads: [usize; 3],
    gaps: [usize; 3],
    alpha: f64,
    beta: f64,
    seed: u64,
}

impl Case {
    /// A (stored), B (stored) and C0: uniform in [-1, 1) (small integers in
    /// [-4, 4] when `ints`); C0 all NaN when beta = 0.
    fn batches<T: Bits>(&self, ints: bool) -> (Batch<T>, Batch<T>, Batch<T>) {
        let v = self.v;
        let mut rng = Rng::new(self.seed);
        let mut draw = || {
            if ints {
                T::from_f64(rng.below(9) as f64 - 4.0)
            } else {
                T::from_f64(rng.uniform())
            }
        };
        let a = Batch::new(
            self.count,
            stored(v.op_a, self.m, self.k),
            v.a,
            self.pads[0],
            self.gaps[0],
            self.share == Share::A,
            |_, _, _| draw(),
        );
        let b = Batch::new(
            self.count,
            stored(v.op_b, self.k, self.n),
            v.b,
            self.pads[1],
            self.gaps[1],
            self.share == Share::B,
            |_, _, _| draw(),
        );
        let beta = self.beta;
        let c = Batch::new(self.count, (self.m, self.n), v.c, self.pads[2], self.gaps[2], false, |_, _, _| {
            if beta == 0.0 {
                T::POISON
            } else {
                draw()
            }
        });
        (a, b, c)
    }

    fn gemm(&self, base: &Gemm) -> Gemm {
        base.clone().op_a(self.v.op_a).op_b(self.v.op_b).alpha(self.alpha).beta(self.beta)
    }

    fn name<T: Element>(&self, label: &str) -> String {
        format!(
            "{} {label} {} {}x{}x{} count {} share {:?} pads {:?} gaps {:?} alpha {} beta {} seed {}",
            T::PRECISION.name(),
            self.v,
            self.m,
            self.n,
            self.k,
            self.count,
            self.share,
            self.pads,
            self.gaps,
            self.alpha,
            self.beta,
            self.seed
        )
    }
}

/// Where a batch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Device,
    Host,
}

/// Runs `g` on the batches and returns C's buffer after the run.
fn run_batch<T: Bits>(g: &Gemm, path: Path, a: &Batch<T>, b: &Batch<T>, c: &Batch<T>) -> Result<Vec<T>, Error> {
    match path {
        Path::Device => {
            let dev = device();
            let (da, db) = (a.upload(&dev), b.upload(&dev));
            let mut dc = c.upload(&dev);
            g.run_strided_device(
                device_batch(&da, a.count, a.stride),
                device_batch(&db, b.count, b.stride),
                device_batch_mut(&mut dc, c.count, c.stride),
            )?;
            Ok(download(&dc))
        }
        Path::Host => {
            let mut out = c.clone();
            g.run_strided(a.host(), b.host(), out.host_mut())?;
            Ok(out.data)
        }
    }
}

/// Runs one case with `base` (a stage, or the default) and checks it.
fn check_case<T: Bits>(base: &Gemm, label: &str, path: Path, case: &Case) {
    let what = format!("{} {path:?}", case.name::<T>(label));
    let (a, b, c) = case.batches::<T>(false);
    let after = run_batch(&case.gemm(base), path, &a, &b, &c).unwrap_or_else(|e| panic!("{what}: {e}"));
    check_products(&what, case.v, case.alpha, case.beta, &a, &b, &c, &after);
}

/// Every op/layout combination twice (beta = 0 with a NaN C, beta = 1.3),
/// count 3, with the rest in rotation: (m, n) takes every pair of sizes and
/// k every size; A shared (stride 0), B shared and neither; padded and
/// packed lines; packed batches and gaps between the matrices.
fn rotation() -> Vec<Case> {
    let mut out = Vec::new();
    for (vi, v) in Variant::all().into_iter().enumerate() {
        for (bi, beta) in [0.0, 1.3].into_iter().enumerate() {
            let idx = 2 * vi + bi;
            out.push(Case {
                v,
                m: SIZES[idx % 5],
                n: SIZES[(idx / 5) % 5],
                k: SIZES[(idx / 25 + idx) % 5],
                count: 3,
                share: [Share::None, Share::A, Share::B][idx % 3],
                pads: [idx % 2, 3 * ((idx / 2) % 2), 2 * ((idx / 3) % 2)],
                gaps: [(idx % 3) * 2, (idx % 4) * 3, [0, 5, 1][idx % 3]],
                alpha: 0.7,
                beta,
                seed: seed(),
            });
        }
    }
    out
}

/// 65537 products of 2 x 3 x 4 (past the grid's z limit of 65535) in a few
/// combinations, both betas, shared operands and gaps in turn.
fn large_counts() -> Vec<Case> {
    let variants = [
        Variant::NN,
        Variant { op_a: Op::T, op_b: Op::N, a: R, b: R, c: C },
        Variant { op_a: Op::N, op_b: Op::T, a: C, b: C, c: R },
        Variant { op_a: Op::T, op_b: Op::T, a: C, b: R, c: C },
    ];
    variants
        .iter()
        .enumerate()
        .map(|(i, &v)| Case {
            v,
            m: 2,
            n: 3,
            k: 4,
            count: 65537,
            share: [Share::None, Share::A, Share::B, Share::None][i],
            pads: [i % 2, 0, 1],
            gaps: [0, 1, [0, 3][i % 2]],
            alpha: 0.7,
            beta: [0.0, 1.3][i % 2],
            seed: seed(),
        })
        .collect()
}

/// The rotation, batches of 1 in eight combinations, and the large counts,
/// on the device with `base`.
fn strided_suite<T: Bits>(base: &Gemm, label: &str) {
    for case in rotation() {
        check_case::<T>(base, label, Path::Device, &case);
    }
    for mut case in rotation().into_iter().step_by(8) {
        case.count = 1;
        check_case::<T>(base, label, Path::Device, &case);
    }
    for case in large_counts() {
        check_case::<T>(base, label, Path::Device, &case);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn strided_device_every_combination_f64() {
    strided_suite::<f64>(&Gemm::new(), "default kernel");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn strided_device_every_combination_f32() {
    strided_suite::<f32>(&Gemm::new(), "default kernel");
}

/// The strided suite with the default configuration of several stages.
fn stages<T: Bits>() {
    for stage in [Stage::Naive, Stage::SmemTiled, Stage::Pipelined, Stage::TensorCore] {
        if stage == Stage::TensorCore && T::PRECISION != gemm::Precision::F64 {
            continue;
        }
        strided_suite::<T>(&Gemm::new().stage(stage), &stage.to_string());
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn strided_device_stages_f64() {
    stages::<f64>();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn strided_device_stages_f32() {
    stages::<f32>();
}

/// 65537 products of small integers (exact in f32 and f64): every element
/// of every product equals the reference exactly, through both layouts of C.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn large_count_is_exact() {
    fn exact<T: Bits>() {
        for mut case in large_counts() {
            case.alpha = 1.0;
            case.beta = if case.beta == 0.0 { 0.0 } else { -2.0 };
            let what = case.name::<T>("exact");
            let (a, b, c) = case.batches::<T>(true);
            let after =
                run_batch(&case.gemm(&Gemm::new()), Path::Device, &a, &b, &c).unwrap_or_else(|e| panic!("{what}: {e}"));
            for i in 0..case.count {
                let r = reference(
                    case.alpha,
                    op_of(a.matrix(i), case.v.op_a),
                    op_of(b.matrix(i), case.v.op_b),
                    case.beta,
                    c.matrix(i),
                );
                let got = c.matrix_in(&after, i);
                for p in 0..case.m {
                    for q in 0..case.n {
                        let x = got.get(p, q).unwrap().as_f64();
                        assert!(
                            x == r.value[p * case.n + q],
                            "{what}: product {i}, C({p}, {q}) = {x}, expected {}",
                            r.value[p * case.n + q]
                        );
                    }
                }
            }
        }
    }
    exact::<f64>();
    exact::<f32>();
}

/// Host batches through `run_strided` in a third of the combinations (both
/// betas, shared operands, padding), with NaN guards in the gaps between
/// the C's and in their padding that must come back bit for bit; plus a
/// batch of 65537.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn strided_host_batches() {
    fn host<T: Bits>() {
        for (i, mut case) in rotation().into_iter().enumerate().filter(|(i, _)| i % 3 == 0) {
            case.gaps[2] = [4, 1, 7][i % 3]; // always a gap between the C's
            check_case::<T>(&Gemm::new(), "run_strided", Path::Host, &case);
        }
        let mut case = large_counts()[1];
        case.gaps[2] = 2;
        check_case::<T>(&Gemm::new(), "run_strided", Path::Host, &case);
    }
    host::<f64>();
    host::<f32>();
}

/// Batches of 0 leave everything as it was (device and host, NaN
/// everywhere); alpha = 0 reads neither A nor B (all NaN) and gives
/// beta * C0 rounded once, exactly (zeros for beta = 0 over a NaN C0).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn empty_batches_and_alpha_zero() {
    fn run<T: Bits>() {
        let v = Variant { op_a: Op::T, op_b: Op::N, a: R, b: C, c: C };
        for path in [Path::Device, Path::Host] {
            let case = Case {
                v,
                m: 33,
                n: 7,
                k: 65,
                count: 0,
                share: Share::None,
                pads: [1, 0, 2],
                gaps: [0, 0, 3],
                alpha: 0.7,
                beta: 0.0,
                seed: seed(),
            };
            let (a, b, c) = case.batches::<T>(false);
            let after = run_batch(&case.gemm(&Gemm::new()), path, &a, &b, &c).unwrap();
            assert!(same_bits(&after, &c.data), "{path:?}: a batch of 0 changed C's buffer");

            for beta in [0.0, 1.3] {
                let case = Case { count: 5, alpha: 0.0, beta, share: Share::B, ..case };
                let (mut a, mut b, c) = case.batches::<T>(false);
                a.data.fill(T::POISON);
                b.data.fill(T::POISON);
                let after = run_batch(&case.gemm(&Gemm::new()), path, &a, &b, &c).unwrap();
                let beta_t = T::from_f64(beta);
                let what = format!("{} {path:?} alpha 0 beta {beta}", T::PRECISION.name());
                for i in 0..case.count {
                    let (c0, got) = (c.matrix(i), c.matrix_in(&after, i));
                    for p in 0..case.m {
                        for q in 0..case.n {
                            let want = if beta == 0.0 { T::from_f64(0.0) } else { beta_t * c0.get(p, q).unwrap() };
                            assert!(
                                got.get(p, q) == Some(want),
                                "{what}: product {i}, C({p}, {q}) = {:?}, expected {want:?}",
                                got.get(p, q)
                            );
                        }
                    }
                }
                for (o, is_element) in c.elements().into_iter().enumerate() {
                    assert!(is_element || after[o].bits() == c.data[o].bits(), "{what}: C's storage index {o} changed");
                }
            }
        }
    }
    run::<f64>();
    run::<f32>();
}

/// Read batches given as transposes (`Strided::t`) with op = N equal the
/// stored batches with op = T, bit for bit.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn transposed_batches_equal_op_t() {
    let dev = device();
    let case = Case {
        v: Variant { op_a: Op::T, op_b: Op::T, a: R, b: C, c: R },
        m: 65,
        n: 33,
        k: 130,
        count: 4,
        share: Share::None,
        pads: [0, 1, 0],
        gaps: [0, 0, 0],
        alpha: 0.7,
        beta: 1.3,
        seed: seed(),
    };
    let (a, b, c) = case.batches::<f64>(false);
    let with_ops = run_batch(&case.gemm(&Gemm::new()), Path::Device, &a, &b, &c).unwrap();
    let (da, db) = (a.upload(&dev), b.upload(&dev));
    let mut dc = c.upload(&dev);
    Gemm::new()
        .alpha(case.alpha)
        .beta(case.beta)
        .run_strided_device(
            device_batch(&da, a.count, a.stride).t(),
            device_batch(&db, b.count, b.stride).t(),
            device_batch_mut(&mut dc, c.count, c.stride),
        )
        .unwrap();
    assert!(same_bits(&download(&dc), &with_ops), "transposed device batches differ from op = T");
    let mut out = c.clone();
    Gemm::new().alpha(case.alpha).beta(case.beta).run_strided(a.host().t(), b.host().t(), out.host_mut()).unwrap();
    check_products("host transposes", case.v, case.alpha, case.beta, &a, &b, &c, &out.data);
}

/// The caller's stream: a batch queued on it (no synchronization in between)
/// after the upload of its operands, read back after `stream.synchronize()`.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn strided_on_the_callers_stream() {
    let dev = device();
    let s = dev.context().new_stream().unwrap();
    let case = rotation()[5];
    let (a, b, c) = case.batches::<f64>(false);
    let d = |x: &Batch<f64>| {
        let buffer = s.clone_htod(&x.data).unwrap();
        DeviceMatrix::from_cuda_slice(&dev, buffer, x.dims.rows, x.dims.cols, x.dims.layout, x.dims.ld).unwrap()
    };
    let (da, db, mut dc) = (d(&a), d(&b), d(&c));
    case.gemm(&Gemm::new())
        .stream(&s)
        .run_strided_device(
            device_batch(&da, a.count, a.stride),
            device_batch(&db, b.count, b.stride),
            device_batch_mut(&mut dc, c.count, c.stride),
        )
        .unwrap();
    s.synchronize().unwrap();
    let after = download(&dc); // on the buffer's stream, `s`
    check_products("the caller's stream", case.v, case.alpha, case.beta, &a, &b, &c, &after);
}

// ---------------------------------------------------------------------------
// Pointer-array and grouped batches
// ---------------------------------------------------------------------------

/// One product of a list: stored A, B and C0 (padded lines hold the guard).
struct Product<T> {
    a: Matrix<T>,
    b: Matrix<T>,
    c0: Matrix<T>,
}

/// A product of op(A) m x k, op(B) k x n in variant `v`, random inputs,
/// C0 NaN when beta = 0, each operand with `pad` elements of padding per line.
fn product<T: Bits>(v: Variant, (m, n, k): (usize, usize, usize), beta: f64, pad: usize, rng: &mut Rng) -> Product<T> {
    let mut random = |rows, cols| Matrix::<T>::from_fn(rows, cols, |_, _| T::from_f64(rng.uniform()));
    let a = store(&random(m, k), v.op_a, v.a, pad, T::GUARD);
    let b = store(&random(k, n), v.op_b, v.b, pad + 1, T::GUARD);
    let c0 = if beta == 0.0 { Matrix::<T>::from_fn(m, n, |_, _| T::POISON) } else { random(m, n) };
    let c0 = store(&c0, Op::N, v.c, pad, T::GUARD);
    Product { a, b, c0 }
}

/// Runs a list of products through `run_batched_device` (`pointer_array`)
/// or `run_grouped_device` with the op flags of `v`, and returns each C.
fn run_list<T: Bits>(g: &Gemm, pointer_array: bool, list: &[Product<T>]) -> Result<Vec<Matrix<T>>, Error> {
    let dev = device();
    let da: Vec<DeviceMatrix<T>> = list.iter().map(|p| DeviceMatrix::from_host(&dev, &p.a).unwrap()).collect();
    let db: Vec<DeviceMatrix<T>> = list.iter().map(|p| DeviceMatrix::from_host(&dev, &p.b).unwrap()).collect();
    let mut dc: Vec<DeviceMatrix<T>> = list.iter().map(|p| DeviceMatrix::from_host(&dev, &p.c0).unwrap()).collect();
    let a: Vec<DeviceView<'_, T>> = da.iter().map(|m| m.as_view()).collect();
    let b: Vec<DeviceView<'_, T>> = db.iter().map(|m| m.as_view()).collect();
    let mut c: Vec<DeviceViewMut<'_, T>> = dc.iter_mut().map(|m| m.as_view_mut()).collect();
    let result =
        if pointer_array { g.run_batched_device(&a, &b, &mut c) } else { g.run_grouped_device(&a, &b, &mut c) };
    drop(c);
    let after: Vec<Matrix<T>> = dc.iter().map(|m| m.to_host().unwrap()).collect();
    result.map(|()| after)
}

/// Checks each product of a list against the reference and its padding.
fn check_list<T: Bits>(what: &str, v: Variant, alpha: f64, beta: f64, list: &[Product<T>], after: &[Matrix<T>]) {
    let (alpha, beta) = (T::from_f64(alpha).as_f64(), T::from_f64(beta).as_f64());
    for (i, (p, got)) in list.iter().zip(after).enumerate() {
        let r = reference(alpha, op_of(p.a.as_ref(), v.op_a), op_of(p.b.as_ref(), v.op_b), beta, p.c0.as_ref());
        let cmp = r.compare(got);
        assert!(cmp.passed(), "{what}: problem {i} ({}x{}): {cmp}", p.c0.rows(), p.c0.cols());
        common::outside_view_unchanged(&p.c0, got, (0, 0), (p.c0.rows(), p.c0.cols()))
            .unwrap_or_else(|e| panic!("{what}: problem {i}: {e}"));
    }
}

/// Pointer-array batches: 6 separate allocations of one shape, in every
/// other op/layout combination, both betas, odd shapes.
fn pointer_array<T: Bits>() {
    let mut rng = Rng::new(seed());
    for (vi, v) in Variant::all().into_iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        for beta in [0.0, 1.3] {
            let dims = (SIZES[vi % 5], SIZES[(vi / 5 + 2) % 5], SIZES[(vi + 3) % 5]);
            let list: Vec<Product<T>> = (0..6).map(|i| product(v, dims, beta, i % 3, &mut rng)).collect();
            let g = Gemm::new().op_a(v.op_a).op_b(v.op_b).alpha(0.7).beta(beta);
            let what = format!("{} pointer-array {v} {dims:?} beta {beta}", T::PRECISION.name());
            let after = run_list(&g, true, &list).unwrap_or_else(|e| panic!("{what}: {e}"));
            check_list(&what, v, 0.7, beta, &list, &after);
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn pointer_array_batches_f64() {
    pointer_array::<f64>();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn pointer_array_batches_f32() {
    pointer_array::<f32>();
}

/// Grouped batches: 10 problems with m from {1, 17, 100, 257}, n and k
/// varying (k = 0 once, and an empty problem, m = 0), in every third
/// op/layout combination, both betas, the default kernel and two stages.
fn grouped<T: Bits>() {
    let mut rng = Rng::new(seed());
    let ms = [1, 17, 100, 257];
    let ns = [1, 9, 64, 130, 200, 31];
    let ks = [1, 5, 33, 128, 300, 70];
    let bases =
        [("default kernel".to_string(), Gemm::new()), ("stage 3".to_string(), Gemm::new().stage(Stage::SmemTiled))];
    for (vi, v) in Variant::all().into_iter().enumerate().filter(|(i, _)| i % 3 == 0) {
        for beta in [0.0, 1.3] {
            for (label, base) in &bases {
                let list: Vec<Product<T>> = (0..10)
                    .map(|i| {
                        let m = if i == 4 { 0 } else { ms[rng.below(ms.len())] };
                        let k = if i == 7 { 0 } else { ks[rng.below(ks.len())] };
                        product(v, (m, ns[rng.below(ns.len())], k), beta, (i + vi) % 2, &mut rng)
                    })
                    .collect();
                let g = base.clone().op_a(v.op_a).op_b(v.op_b).alpha(0.7).beta(beta);
                let what = format!("{} grouped {label} {v} beta {beta}", T::PRECISION.name());
                let after = run_list(&g, false, &list).unwrap_or_else(|e| panic!("{what}: {e}"));
                check_list(&what, v, 0.7, beta, &list, &after);
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn grouped_batches_f64() {
    grouped::<f64>();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn grouped_batches_f32() {
    grouped::<f32>();
}

/// A grouped batch may mix a row-major C with a column-major one when
/// their kernel forms agree: (A row, B row, C row) and (A col, B col,
/// C col) both run the `nn` module.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn grouped_mixes_c_layouts_with_one_kernel_form() {
    let mut rng = Rng::new(seed());
    let rows = Variant::NN;
    let cols = Variant { op_a: Op::N, op_b: Op::N, a: C, b: C, c: C };
    assert_eq!(rows.kernel_layouts(), cols.kernel_layouts());
    let list: Vec<Product<f64>> =
        [(rows, (17, 40, 33)), (cols, (100, 9, 5)), (rows, (257, 64, 128)), (cols, (1, 1, 1))]
            .into_iter()
            .map(|(v, dims)| product(v, dims, 0.0, 1, &mut rng))
            .collect();
    let after = run_list(&Gemm::new().alpha(0.7), false, &list).unwrap();
    // op = N throughout, so the variant only names the ops.
    check_list("mixed C layouts", rows, 0.7, 0.0, &list, &after);
}

// ---------------------------------------------------------------------------
// Misuse
// ---------------------------------------------------------------------------

/// Batch counts that differ, storage too short, a C stride too small, a
/// pointer-array batch of different shapes, a grouped batch of mixed kernel
/// forms or with an invalid problem: typed errors, C untouched.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn misuse_is_a_typed_error() {
    let dev = device();
    let (m, n, k) = (7, 5, 3);
    let case = Case {
        v: Variant::NN,
        m,
        n,
        k,
        count: 3,
        share: Share::None,
        pads: [0; 3],
        gaps: [0; 3],
        alpha: 1.0,
        beta: 0.0,
        seed: seed(),
    };
    let (a, b, c) = case.batches::<f64>(false);
    let (da, db) = (a.upload(&dev), b.upload(&dev));
    let mut dc = c.upload(&dev);

    // Counts that differ.
    let e = Gemm::new()
        .run_strided_device(
            device_batch(&da, 3, m * k),
            device_batch(&db, 3, k * n),
            device_batch_mut(&mut dc, 2, m * n),
        )
        .unwrap_err();
    assert!(matches!(e, Error::BatchCount { a: 3, b: 3, c: 2 }), "{e:?}");
    let e = Gemm::new()
        .run_strided_device(
            device_batch(&da, 2, m * k),
            device_batch(&db, 3, k * n),
            device_batch_mut(&mut dc, 3, m * n),
        )
        .unwrap_err();
    assert!(matches!(e, Error::BatchCount { a: 2, b: 3, c: 3 }), "{e:?}");

    // Storage too short: 4 matrices in a buffer of 3.
    let e = error_of(Strided::new(&da, 4, m * k));
    assert!(
        matches!(e, Error::BatchStorage { operand: Operand::Matrix, count: 4, needed, len, .. }
            if needed == 4 * m * k && len == 3 * m * k),
        "{e:?}"
    );
    let e = error_of(Strided::new(&mut dc, 3, m * n + 1));
    assert!(matches!(e, Error::BatchStorage { count: 3, .. }), "{e:?}");

    // A C stride too small: matrices 0 and 1 share elements (refused at construction).
    let e = error_of(Strided::new(&mut dc, 3, m * n - 1));
    assert!(matches!(e, Error::BatchOverlap { first: 0, second: 1 }), "{e:?}");
    let e = error_of(Strided::new(&mut dc, 2, 0));
    assert!(matches!(e, Error::BatchOverlap { first: 0, second: 1 }), "{e:?}");
    assert!(same_bits(&download(&dc), &c.data), "C changed by a refused strided batch");

    // Lists: three separate problems of one shape.
    let mut rng = Rng::new(seed());
    let list: Vec<Product<f64>> = (0..3).map(|_| product(Variant::NN, (m, n, k), 0.0, 0, &mut rng)).collect();
    let up = |x: &Matrix<f64>| DeviceMatrix::from_host(&dev, x).unwrap();
    let la: Vec<DeviceMatrix<f64>> = list.iter().map(|p| up(&p.a)).collect();
    let lb: Vec<DeviceMatrix<f64>> = list.iter().map(|p| up(&p.b)).collect();
    let mut lc: Vec<DeviceMatrix<f64>> = list.iter().map(|p| up(&p.c0)).collect();
    {
        let a: Vec<DeviceView<'_, f64>> = la.iter().map(|x| x.as_view()).collect();
        let b: Vec<DeviceView<'_, f64>> = lb.iter().map(|x| x.as_view()).collect();
        let mut c: Vec<DeviceViewMut<'_, f64>> = lc.iter_mut().map(|x| x.as_view_mut()).collect();
        let e = Gemm::new().run_grouped_device(&a, &b[..2], &mut c).unwrap_err();
        assert!(matches!(e, Error::BatchCount { a: 3, b: 2, c: 3 }), "{e:?}");
        let e = Gemm::new().run_batched_device(&a, &b, &mut c[..2]).unwrap_err();
        assert!(matches!(e, Error::BatchCount { a: 3, b: 3, c: 2 }), "{e:?}");
    }

    // A pointer-array batch whose second problem has another m (its own C's).
    let a2 = up(&random_matrix::<f64>(m + 1, k, seed()));
    let mut c_pair = [up(&list[0].c0), up(&Matrix::filled(m + 1, n, f64::NAN))];
    {
        let a: Vec<DeviceView<'_, f64>> = vec![la[0].as_view(), a2.as_view()];
        let b: Vec<DeviceView<'_, f64>> = vec![lb[0].as_view(), lb[1].as_view()];
        let mut c: Vec<DeviceViewMut<'_, f64>> = c_pair.iter_mut().map(|x| x.as_view_mut()).collect();
        let e = Gemm::new().run_batched_device(&a, &b, &mut c).unwrap_err();
        match &e {
            Error::ShapeVaries { index: 1, expected, found } => {
                assert_eq!((expected.as_str(), found.as_str()), ("7x5x3", "8x5x3"), "{e}");
            }
            _ => panic!("expected ShapeVaries, got {e:?}"),
        }
        // The same lists are a valid grouped batch.
        Gemm::new().run_grouped_device(&a, &b, &mut c).unwrap();
    }
    let grouped_c = c_pair[1].to_host().unwrap();
    let r = reference(1.0, a2.to_host().unwrap().as_ref(), list[1].b.as_ref(), 0.0, grouped_c.as_ref());
    assert!(r.compare(&grouped_c).passed(), "grouped after ShapeVaries: {}", r.compare(&grouped_c));

    // A grouped batch mixing kernel forms: problem 1 has a column-major C
    // over row-major A and B (kernel module `tt`; problem 0 runs `nn`).
    let mut c_col = DeviceMatrix::from_host(&dev, &Matrix::<f64>::from_fn_col_major(m, n, |_, _| f64::NAN)).unwrap();
    let c_col_before = download(&c_col);
    {
        let a: Vec<DeviceView<'_, f64>> = vec![la[0].as_view(), la[1].as_view()];
        let b: Vec<DeviceView<'_, f64>> = vec![lb[0].as_view(), lb[1].as_view()];
        let mut c: Vec<DeviceViewMut<'_, f64>> = vec![lc[0].as_view_mut(), c_col.as_view_mut()];
        let e = Gemm::new().run_grouped_device(&a, &b, &mut c).unwrap_err();
        assert!(matches!(e, Error::MixedLayouts { index: 1, .. }), "{e:?}");
    }
    assert!(same_bits(&download(&c_col), &c_col_before), "C changed by a refused grouped batch");

    // A grouped batch whose problem 2 does not fit (B^T is 5 x 3).
    {
        let a: Vec<DeviceView<'_, f64>> = la.iter().map(|x| x.as_view()).collect();
        let b: Vec<DeviceView<'_, f64>> = vec![lb[0].as_view(), lb[1].as_view(), lb[2].t()];
        let mut c: Vec<DeviceViewMut<'_, f64>> = lc.iter_mut().map(|x| x.as_view_mut()).collect();
        let e = Gemm::new().run_grouped_device(&a, &b, &mut c).unwrap_err();
        match &e {
            Error::Problem { index: 2, source } => {
                assert!(matches!(**source, Error::Shape(ShapeError::InnerDimension { .. })), "{e}");
            }
            _ => panic!("expected Problem {{ index: 2, .. }}, got {e:?}"),
        }
    }
    for (x, p) in lc.iter().zip(&list) {
        assert!(same_bits(x.to_host().unwrap().as_slice(), p.c0.as_slice()), "C changed by a refused grouped batch");
    }
}

/// C batches that overlap, made with two handles over one allocation
/// (cudarc's `upgrade_device_ptr`; the alias is leaked before it could free
/// the memory twice): two grouped problems whose C overlap are refused
/// (BatchOverlap), disjoint ones of the same allocation run; a strided C
/// whose batch meets A's is refused (Overlap), C untouched.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn overlapping_outputs_are_refused() {
    let dev = device();
    let s = dev.stream().clone();
    let (rows, cols) = (128, 64);
    let host = random_matrix::<f64>(rows, cols, seed());
    let owner = s.clone_htod(host.as_slice()).unwrap();
    let ptr = {
        let (ptr, _sync) = owner.device_ptr(&s);
        ptr
    };
    // SAFETY: `alias` is a second handle to `owner`'s allocation; it is
    // leaked below (never freed), and every use of it is ordered on `s`.
    let alias = unsafe { s.upgrade_device_ptr::<f64>(ptr, rows * cols) };
    let mut first = DeviceMatrix::from_cuda_slice(&dev, owner, rows, cols, R, cols).unwrap();
    let mut second = DeviceMatrix::from_cuda_slice(&dev, alias, rows, cols, R, cols).unwrap();
    let a = DeviceMatrix::from_host(&dev, &random_matrix::<f64>(64, 32, seed())).unwrap();
    let b = DeviceMatrix::from_host(&dev, &random_matrix::<f64>(32, 64, seed())).unwrap();

    // Rows 0..64 and 32..96: overlap.
    let overlapping = {
        let (va, vb) = (vec![a.as_view(), a.as_view()], vec![b.as_view(), b.as_view()]);
        let mut vc = vec![first.view_mut(0, 0, 64, 64).unwrap(), second.view_mut(32, 0, 64, 64).unwrap()];
        Gemm::new().run_grouped_device(&va, &vb, &mut vc)
    };
    let untouched = same_bits(&download(&first), host.as_slice());
    // Rows 0..64 and 64..128: disjoint.
    let disjoint = {
        let (va, vb) = (vec![a.as_view(), a.as_view()], vec![b.as_view(), b.as_view()]);
        let mut vc = vec![first.view_mut(0, 0, 64, 64).unwrap(), second.view_mut(64, 0, 64, 64).unwrap()];
        Gemm::new().alpha(2.0).run_grouped_device(&va, &vb, &mut vc)
    };
    let after_disjoint = download(&first);
    // A strided batch of 2 A's (rows 0..64 of `first` as two 32 x 64...)
    // would need another shape: use rows 0..32 and 32..64 as two 32 x 64
    // A's and rows 48..80, 80..112 of the alias as the two C's (32 x 64):
    // C's batch meets A's.
    let strided_overlap = {
        let sq = DeviceMatrix::from_host(&dev, &random_matrix::<f64>(64, 64, seed())).unwrap();
        let av = first.view(0, 0, 32, 64).unwrap();
        let cv = second.view_mut(48, 0, 32, 64).unwrap();
        Gemm::new().run_strided_device(
            Strided::new(av, 2, 32 * 64).unwrap(),
            Strided::new(&sq, 2, 0).unwrap(),
            Strided::new(cv, 2, 32 * 64).unwrap(),
        )
    };
    let after_strided = download(&first);
    let _ = second.into_cuda_slice().leak(); // the owner frees the allocation
    drop(first);

    assert!(matches!(overlapping, Err(Error::BatchOverlap { first: 0, second: 1 })), "{:?}", overlapping.err());
    assert!(untouched, "C changed by a refused grouped batch");
    disjoint.unwrap();
    let (ha, hb) = (a.to_host().unwrap(), b.to_host().unwrap());
    let r = reference(2.0, ha.as_ref(), hb.as_ref(), 0.0, host.view(0, 0, 64, 64).unwrap());
    let got = Matrix::from_vec(rows, cols, after_disjoint.clone()).unwrap();
    for (row, what) in [(0, "rows 0..64"), (64, "rows 64..128")] {
        let cmp = r.compare(got.view(row, 0, 64, 64).unwrap());
        assert!(cmp.passed(), "disjoint C's of one allocation, {what}: {cmp}");
    }
    assert!(
        matches!(strided_overlap, Err(Error::Shape(ShapeError::Overlap { operand: Operand::A }))),
        "{:?}",
        strided_overlap.err()
    );
    assert!(same_bits(&after_strided, &after_disjoint), "C changed by a refused strided batch");
}

// ---------------------------------------------------------------------------
// Determinism and threads
// ---------------------------------------------------------------------------

/// The same strided batch twice gives the same bits, on the device and
/// through the host path, f64 and f32, default kernel and stage 7.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn strided_batches_are_bitwise_deterministic() {
    fn twice<T: Bits>() {
        for base in [Gemm::new(), Gemm::new().stage(Stage::Pipelined)] {
            let bigger = |c: Case| Case { m: c.m.max(33), k: c.k.max(65), ..c };
            for case in [bigger(rotation()[9]), bigger(rotation()[42]), large_counts()[3]] {
                let what = case.name::<T>("determinism");
                let (a, b, c) = case.batches::<T>(false);
                let g = case.gemm(&base);
                let d1 = run_batch(&g, Path::Device, &a, &b, &c).unwrap();
                let d2 = run_batch(&g, Path::Device, &a, &b, &c).unwrap();
                let h1 = run_batch(&g, Path::Host, &a, &b, &c).unwrap();
                assert!(same_bits(&d1, &d2), "{what}: two device runs differ");
                assert!(same_bits(&d1, &h1), "{what}: host and device runs differ");
                check_products(&what, case.v, case.alpha, case.beta, &a, &b, &c, &d1);
            }
        }
    }
    twice::<f64>();
    twice::<f32>();
}

/// 4 host threads at once on the default device, each with its own data:
/// host strided batches (`run_strided`), device strided batches and single
/// products (`dgemm`), all correct.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn several_host_threads_at_once() {
    let _ = device();
    let cases = rotation();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let cases = &cases;
                scope.spawn(move || {
                    for round in 0..6 {
                        let case = Case { count: 4 + t, ..cases[(t * 13 + round * 5) % cases.len()] };
                        let path = if (t + round) % 2 == 0 { Path::Host } else { Path::Device };
                        check_case::<f64>(&Gemm::new(), &format!("thread {t} round {round}"), path, &case);
                        let (m, n, k) = (50 + t, 60 + round, 70);
                        let a = random_matrix::<f64>(m, k, seed());
                        let b = random_matrix::<f64>(k, n, seed());
                        let mut c = Matrix::<f64>::filled(m, n, f64::NAN);
                        gemm::dgemm(&a, &b, &mut c).unwrap();
                        let cmp = Reference::new(1.0, &a, &b, 0.0, &Matrix::zeros(m, n)).compare(&c);
                        assert!(cmp.passed(), "thread {t} round {round}: dgemm: {cmp}");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        }
    });
}
