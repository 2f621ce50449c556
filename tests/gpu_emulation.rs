//! GPU tests of f64 and f32 products emulated on INT8 tensor cores
//! (`Gemm::emulation`, Ozaki scheme II).
//!
//! The GPU must give the bits of the CPU reference
//! (`gemm::emulation::emulate_dgemm_cpu`, which follows the kernels' order
//! of operations), followed by the kernels' epilogue in f64 (`alpha * z`,
//! or `fma(beta, c, alpha * z)`, then rounded to C's type): every element,
//! on every door, for every op and layout, with C's padding and every guard
//! unchanged. With beta = 0, C starts as NaN.
//!
//! Covered: the 32 combinations of op(A), op(B) and the layouts of A, B and
//! C at odd and rectangular shapes; f64 (15 and 8 moduli) and f32 (7);
//! alpha and beta; the device path, a strided batch and a view of a larger
//! matrix (same bits as the host path); panels of C's rows (a small memory
//! budget); k cut in two blocks (k > 131,008); Inf and NaN inputs (the
//! elements they touch are plain dot products in ascending k, the others
//! emulated); extreme exponent spreads; the accurate mode on the same doors
//! (its bound pass over panels and k blocks, a shared B in a batch); misuse
//! (typed errors before the device is touched).
//!
//! They need an NVIDIA GPU of compute capability 9.0: ignored by default,
//! run with `--include-ignored`; without one they fail, never pass.

mod common;

use common::{device, outside_view_unchanged, seed, store, Bits, Rng, Variant};
use gemm::emulation::{emulate_dgemm_cpu_mode, Emulation, Mode};
use gemm::half::f16;
use gemm::{DeviceMatrix, Error, Gemm, Layout, Matrix, Op, Strided};

/// A matrix with elements `(u - 0.5) exp(phi z)` (u uniform in [0, 1), z
/// standard normal): the exponent spread of the Ozaki papers.
fn spread_matrix(rows: usize, cols: usize, phi: f64, seed: u64) -> Matrix<f64> {
    let mut rng = Rng::new(seed);
    Matrix::from_fn(rows, cols, |_, _| {
        let u = (rng.uniform() + 1.0) / 2.0;
        let (u1, u2) = (1.0 - (rng.uniform() + 1.0) / 2.0, (rng.uniform() + 1.0) / 2.0);
        let z = (-2.0 * u1.max(1e-300).ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        (u - 0.5) * (phi * z).exp()
    })
}

/// `f` of every element.
fn map<T: gemm::Scalar, U: gemm::Scalar>(x: &Matrix<T>, f: impl Fn(T) -> U) -> Matrix<U> {
    Matrix::from_fn(x.rows(), x.cols(), |i, j| f(x[(i, j)]))
}

/// Row-major data of a matrix.
fn row_major(x: &Matrix<f64>) -> Vec<f64> {
    (0..x.rows()).flat_map(|i| (0..x.cols()).map(move |j| x[(i, j)])).collect()
}

/// The CPU reference of `alpha * A B + beta * C0` in f64.
fn reference(a: &Matrix<f64>, b: &Matrix<f64>, e: &Emulation, (alpha, beta): (f64, f64), c0: &Matrix<f64>) -> Vec<f64> {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    let z =
        emulate_dgemm_cpu_mode(m, n, k, &row_major(a), &row_major(b), e.moduli(), e.scaling()).expect("finite inputs");
    z.iter()
        .enumerate()
        .map(|(idx, &z)| if beta == 0.0 { alpha * z } else { beta.mul_add(c0[(idx / n, idx % n)], alpha * z) })
        .collect()
}

/// The first element of C (m x n) whose bits differ from `expect` (row-major).
fn first_diff<T: Bits>(c: &Matrix<T>, expect: &[T]) -> Option<(usize, usize, T, T)> {
    let n = c.cols();
    expect.iter().enumerate().find_map(|(idx, &e)| {
        let (i, j) = (idx / n, idx % n);
        (c[(i, j)].bits() != e.bits()).then_some((i, j, c[(i, j)], e))
    })
}

/// `g` as a strided batch of `count` products on the device: A's matrices
/// (`da`, `count * m x k` row-major) m k apart, `db` shared, C's matrices m n
/// apart, NaN-poisoned; each product's C.
fn strided_on_device(
    g: &Gemm,
    (da, db): (&DeviceMatrix<f64>, &DeviceMatrix<f64>),
    (m, n, k, count): (usize, usize, usize, usize),
) -> Vec<Matrix<f64>> {
    let dev = device();
    let stream = dev.stream();
    let poisoned = vec![f64::NAN; count * m * n];
    let mut dc =
        DeviceMatrix::from_cuda_slice(&dev, stream.clone_htod(&poisoned).unwrap(), m, n, Layout::RowMajor, n).unwrap();
    let a0 = da.view(0, 0, m, k).unwrap();
    g.run_strided_device(Strided::new(a0, count, m * k).unwrap(), Strided::new(db, count, 0).unwrap(), {
        Strided::new(&mut dc, count, m * n).unwrap()
    })
    .unwrap();
    let got = stream.clone_dtoh(dc.buffer()).unwrap();
    stream.synchronize().unwrap();
    (0..count)
        .map(|i| Matrix::from_vec_in(m, n, Layout::RowMajor, n, got[i * m * n..(i + 1) * m * n].to_vec()).unwrap())
        .collect()
}

/// Runs the emulated product of `a` (m x k) and `b` (k x n) stored as `v`
/// says on host operands and checks every element's bits and C's padding.
fn check_f64(e: Emulation, a: &Matrix<f64>, b: &Matrix<f64>, v: Variant, (alpha, beta): (f64, f64), what: &str) {
    let (m, n) = (a.rows(), b.cols());
    let c0 = spread_matrix(m, n, 1.0, seed());
    let (sa, sb) = (store(a, v.op_a, v.a, 3, f64::GUARD), store(b, v.op_b, v.b, 3, f64::GUARD));
    let before = if beta == 0.0 {
        store(&Matrix::from_fn(m, n, |_, _| f64::NAN), Op::N, v.c, 2, f64::GUARD)
    } else {
        store(&c0, Op::N, v.c, 2, f64::GUARD)
    };
    let mut c = before.clone();
    let g = Gemm::new().emulation(e).op_a(v.op_a).op_b(v.op_b).alpha(alpha).beta(beta);
    g.run(&sa, &sb, &mut c).unwrap_or_else(|err| panic!("{what} {v}: {err}"));
    let expect = reference(a, b, &e, (alpha, beta), &c0);
    if let Some((i, j, got, want)) = first_diff(&c, &expect) {
        panic!("{what} {m}x{n}x{} {v} beta {beta}: C[{i},{j}] = {got:e}, the reference's {want:e}", a.cols());
    }
    outside_view_unchanged(&before, &c, (0, 0), (m, n)).unwrap_or_else(|err| panic!("{what} {v}: {err}"));
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn f64_bits_of_the_reference_every_op_and_layout() {
    device();
    let e15 = Emulation::f64_accuracy();
    for (m, n, k) in [(37, 29, 53), (130, 67, 300)] {
        let a = spread_matrix(m, k, 1.0, seed());
        let b = spread_matrix(k, n, 1.0, seed());
        for v in Variant::all() {
            for scalars in [(1.0, 0.0), (-1.5, 0.5)] {
                check_f64(e15, &a, &b, v, scalars, "f64, 15 moduli");
            }
        }
    }
    // Fewer moduli, a wider spread, rows of C below one wgmma tile and a
    // k not a multiple of the residue tile.
    let e8 = Emulation::new(8).unwrap();
    for (m, n, k) in [(1, 200, 1000), (300, 5, 129), (257, 129, 700)] {
        let a = spread_matrix(m, k, 2.0, seed());
        let b = spread_matrix(k, n, 2.0, seed());
        for v in [Variant::NN, Variant::all()[13], Variant::all()[30]] {
            check_f64(e8, &a, &b, v, (2.0, 0.0), "f64, 8 moduli");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn f32_bits_of_the_reference() {
    device();
    let e = Emulation::f32_accuracy();
    for (m, n, k) in [(45, 77, 91), (200, 130, 257)] {
        let a = map(&spread_matrix(m, k, 0.5, seed()), |x| x as f32);
        let b = map(&spread_matrix(k, n, 0.5, seed()), |x| x as f32);
        let c0 = map(&spread_matrix(m, n, 0.5, seed()), |x| x as f32);
        for v in [Variant::NN, Variant::all()[7], Variant::all()[21]] {
            for (alpha, beta) in [(1.0, 0.0), (0.75, -2.0)] {
                let (sa, sb) = (store(&a, v.op_a, v.a, 1, f32::GUARD), store(&b, v.op_b, v.b, 1, f32::GUARD));
                let before = if beta == 0.0 {
                    store(&Matrix::from_fn(m, n, |_, _| f32::NAN), Op::N, v.c, 3, f32::GUARD)
                } else {
                    store(&c0, Op::N, v.c, 3, f32::GUARD)
                };
                let mut c = before.clone();
                let g = Gemm::new().emulation(e).op_a(v.op_a).op_b(v.op_b).alpha(alpha).beta(beta);
                g.run(&sa, &sb, &mut c).unwrap_or_else(|err| panic!("f32 {v}: {err}"));
                let (a64, b64, c64) = (map(&a, |x| x as f64), map(&b, |x| x as f64), map(&c0, |x| x as f64));
                let expect: Vec<f32> =
                    reference(&a64, &b64, &e, (alpha, beta), &c64).iter().map(|&x| x as f32).collect();
                if let Some((i, j, got, want)) = first_diff(&c, &expect) {
                    panic!("f32 {m}x{n}x{k} {v} beta {beta}: C[{i},{j}] = {got:e}, the reference's {want:e}");
                }
                outside_view_unchanged(&before, &c, (0, 0), (m, n)).unwrap_or_else(|err| panic!("f32 {v}: {err}"));
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn device_path_batches_views_and_panels_give_the_host_bits() {
    let dev = device();
    let e = Emulation::f64_accuracy();
    let (m, n, k, count) = (300, 170, 400, 3);
    let a = spread_matrix(count * m, k, 1.0, seed()); // the batch's A matrices, one under the other
    let b = spread_matrix(k, n, 1.0, seed());
    let g = Gemm::new().emulation(e);
    // Host path, product by product.
    let mut host = Vec::new();
    for i in 0..count {
        let ai = a.view(i * m, 0, m, k).unwrap();
        let mut c = Matrix::<f64>::zeros(m, n);
        g.run(ai, &b, &mut c).unwrap();
        let expect = reference(&ai.to_matrix(), &b, &e, (1.0, 0.0), &c);
        assert!(first_diff(&c, &expect).is_none(), "host path, product {i}");
        host.push(c);
    }
    // Device path: a strided batch (A's matrices m k apart, B shared, C's m n apart).
    let da = DeviceMatrix::from_host(&dev, &a).unwrap();
    let db = DeviceMatrix::from_host(&dev, &b).unwrap();
    for (i, (gi, h)) in strided_on_device(&g, (&da, &db), (m, n, k, count)).iter().zip(&host).enumerate() {
        assert!(first_diff(gi, h.as_slice()).is_none(), "strided batch, product {i}");
    }
    // A view of C inside a larger device matrix, computed in panels of 128
    // rows (a workspace limit of 1 MiB: 3 panels) on the caller's stream.
    let s = dev.context().new_stream().unwrap();
    let mut big = DeviceMatrix::<f64>::zeros(&dev, m + 5, n + 7).unwrap();
    let small = Gemm::new().emulation(e.workspace_limit(1 << 20));
    let plan = small.plan_for::<f64, f64>(m, n, k).unwrap();
    assert!(plan.to_string().contains("panels of 128 rows"), "{plan}");
    let a1 = da.view(m, 0, m, k).unwrap();
    small.stream(&s).run_device(a1, &db, big.view_mut(2, 3, m, n).unwrap()).unwrap();
    s.synchronize().unwrap();
    let whole = big.to_host().unwrap();
    let inner = Matrix::from_fn(m, n, |i, j| whole[(i + 2, j + 3)]);
    assert!(first_diff(&inner, host[1].as_slice()).is_none(), "view in panels");
    let zero = Matrix::<f64>::zeros(m + 5, n + 7);
    outside_view_unchanged(&zero, &whole, (2, 3), (m, n)).unwrap();
    // Host operands with a workspace below one panel: the host path's tiles
    // (here of 128 rows and 2) each take panels of at most their own rows.
    let (m, n, k) = (130, 67, 128);
    let (a, b) = (spread_matrix(m, k, 1.0, seed()), spread_matrix(k, n, 1.0, seed()));
    let tiny = e.workspace_limit(1 << 10);
    let mut c = Matrix::<f64>::zeros(m, n);
    Gemm::new().emulation(tiny).host_streams(2).run(&a, &b, &mut c).unwrap();
    let expect = reference(&a, &b, &tiny, (1.0, 0.0), &Matrix::zeros(m, n));
    assert!(first_diff(&c, &expect).is_none(), "host path, tiny workspace");
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn k_past_one_int8_block() {
    device();
    // k = 140,000 > 131,008: two k blocks whose residues are added mod p.
    let (m, n, k) = (5, 3, 140_000);
    let a = spread_matrix(m, k, 0.5, seed());
    let b = spread_matrix(k, n, 0.5, seed());
    let e = Emulation::new(12).unwrap();
    let plan = Gemm::new().emulation(e).plan_for::<f64, f64>(m, n, k).unwrap();
    assert!(plan.to_string().contains("2 k block(s)"), "{plan}");
    for v in [Variant::NN, Variant::all()[31]] {
        check_f64(e, &a, &b, v, (1.0, 0.0), "two k blocks");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn inf_and_nan_propagate_and_extreme_spreads_stay_exact() {
    device();
    for e in [Emulation::f64_accuracy(), Emulation::new(14).unwrap().mode(Mode::Accurate)] {
        non_finite_and_spreads(e);
    }
}

/// The non-finite and extreme-spread check of one emulation (either mode).
fn non_finite_and_spreads(e: Emulation) {
    let (m, n, k) = (40, 33, 70);
    let mut a = spread_matrix(m, k, 1.0, seed());
    let mut b = spread_matrix(k, n, 1.0, seed());
    // Exponent spreads far beyond what 15 moduli carry in one line.
    for h in 0..k {
        a[(7, h)] = if h % 2 == 0 { 1e300 } else { 1e-300 };
        b[(h, 9)] = if h % 3 == 0 { 1e-250 } else { 3e-100 }; // products stay finite
    }
    a[(11, 0)] = 1e-310; // subnormal
    let (bad_rows, bad_cols) = ([3usize, 5], [2usize]);
    let (mut a_ok, mut b_ok) = (a.clone(), b.clone());
    a[(3, 10)] = f64::NAN;
    a[(5, 69)] = f64::INFINITY;
    b[(4, 2)] = f64::NEG_INFINITY;
    for &i in &bad_rows {
        (0..k).for_each(|h| a_ok[(i, h)] = 0.0);
    }
    for &j in &bad_cols {
        (0..k).for_each(|h| b_ok[(h, j)] = 0.0);
    }
    for v in [Variant::NN, Variant::all()[10], Variant::all()[25]] {
        let (sa, sb) = (store(&a, v.op_a, v.a, 2, f64::GUARD), store(&b, v.op_b, v.b, 2, f64::GUARD));
        let before = store(&Matrix::from_fn(m, n, |_, _| f64::NAN), Op::N, v.c, 1, f64::GUARD);
        let mut c = before.clone();
        let g = Gemm::new().emulation(e).op_a(v.op_a).op_b(v.op_b);
        g.run(&sa, &sb, &mut c).unwrap_or_else(|err| panic!("{v} {:?}: {err}", e.scaling()));
        let emulated = reference(&a_ok, &b_ok, &e, (1.0, 0.0), &c);
        for i in 0..m {
            for j in 0..n {
                let got = c[(i, j)];
                if bad_rows.contains(&i) || bad_cols.contains(&j) {
                    let dot = (0..k).fold(0.0f64, |s, h| a[(i, h)].mul_add(b[(h, j)], s));
                    let same = (dot.is_nan() && got.is_nan()) || dot.to_bits() == got.to_bits();
                    assert!(same, "{v}: C[{i},{j}] = {got:e}, the dot product's {dot:e}");
                } else {
                    let want = emulated[i * n + j];
                    assert!(got.to_bits() == want.to_bits(), "{v}: C[{i},{j}] = {got:e}, the reference's {want:e}");
                    assert!(got.is_finite(), "{v}: C[{i},{j}] = {got:e}");
                }
            }
        }
        outside_view_unchanged(&before, &c, (0, 0), (m, n)).unwrap_or_else(|err| panic!("{v}: {err}"));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn accurate_mode_bits_of_the_reference_on_every_door() {
    let dev = device();
    // Every op and layout, alpha and beta, f64.
    let e14 = Emulation::new(14).unwrap().mode(Mode::Accurate);
    let plan = Gemm::new().emulation(e14).plan_for::<f64, f64>(100, 100, 100).unwrap();
    assert!(plan.to_string().contains("accurate mode"), "{plan}");
    for (m, n, k) in [(37, 29, 53), (130, 67, 300)] {
        let a = spread_matrix(m, k, 2.0, seed());
        let b = spread_matrix(k, n, 2.0, seed());
        for v in Variant::all() {
            for scalars in [(1.0, 0.0), (-1.5, 0.5)] {
                check_f64(e14, &a, &b, v, scalars, "f64 accurate, 14 moduli");
            }
        }
    }
    // k in two INT8 blocks (the coarse product's maxima sum the blocks), a
    // zero row, and a huge row of A and a tiny column of B that meet no
    // nonzero term (no entry of C depends on their scales: the row's,
    // 2^-37 or so, keeps its integers in i64).
    let e9 = Emulation::new(9).unwrap().mode(Mode::Accurate);
    let k = 140_000;
    let mut a = spread_matrix(20, k, 1.0, seed());
    let mut b = spread_matrix(k, 6, 1.0, seed());
    for h in 0..k {
        a[(4, h)] = 0.0;
        a[(6, h)] = if h < 10 { 1e30 * (h as f64 + 1.0) } else { 0.0 };
        b[(h, 2)] = if (10..20).contains(&h) { 1e-200 * b[(h, 2)] } else { 0.0 };
        if h < 10 {
            (0..6).for_each(|j| b[(h, j)] = 0.0);
        } else if h < 20 {
            (0..20).for_each(|i| a[(i, h)] = 0.0);
        }
    }
    for v in [Variant::NN, Variant::all()[19]] {
        check_f64(e9, &a, &b, v, (1.0, 0.0), "f64 accurate, two k blocks");
    }
    // f32.
    let e7 = Emulation::new(7).unwrap().mode(Mode::Accurate);
    let (m, n, k) = (45, 77, 91);
    let a = map(&spread_matrix(m, k, 1.0, seed()), |x| x as f32);
    let b = map(&spread_matrix(k, n, 1.0, seed()), |x| x as f32);
    for v in [Variant::NN, Variant::all()[7], Variant::all()[21]] {
        let (sa, sb) = (store(&a, v.op_a, v.a, 1, f32::GUARD), store(&b, v.op_b, v.b, 1, f32::GUARD));
        let before = store(&Matrix::from_fn(m, n, |_, _| f32::NAN), Op::N, v.c, 3, f32::GUARD);
        let mut c = before.clone();
        Gemm::new().emulation(e7).op_a(v.op_a).op_b(v.op_b).run(&sa, &sb, &mut c).unwrap();
        let (a64, b64) = (map(&a, |x| x as f64), map(&b, |x| x as f64));
        let zero = Matrix::<f64>::zeros(m, n);
        let expect: Vec<f32> = reference(&a64, &b64, &e7, (1.0, 0.0), &zero).iter().map(|&x| x as f32).collect();
        if let Some((i, j, got, want)) = first_diff(&c, &expect) {
            panic!("f32 accurate {v}: C[{i},{j}] = {got:e}, the reference's {want:e}");
        }
        outside_view_unchanged(&before, &c, (0, 0), (m, n)).unwrap();
    }
    // Host operands: C whole in one tile (the scales depend on all of C),
    // whatever the host path's streams; a memory budget that cannot hold
    // A, B and C is a typed error that leaves C untouched.
    let (m, n, k) = (300, 140, 200);
    let a = spread_matrix(m, k, 2.0, seed());
    let b = spread_matrix(k, n, 2.0, seed());
    let mut c = Matrix::<f64>::zeros(m, n);
    Gemm::new().emulation(e14).host_streams(4).run(&a, &b, &mut c).unwrap();
    let expect = reference(&a, &b, &e14, (1.0, 0.0), &Matrix::zeros(m, n));
    assert!(first_diff(&c, &expect).is_none(), "accurate mode, host path, 4 streams");
    let mut y = Matrix::<f64>::from_fn(m, n, |_, _| 7.0);
    let err = Gemm::new().emulation(e14).memory_budget(1 << 16).run(&a, &b, &mut y).unwrap_err();
    assert!(matches!(err, Error::MemoryBudget { .. }), "{err}");
    assert!(y.as_slice().iter().all(|&x| x == 7.0));
    // Device path: a strided batch sharing B (B's exponents depend on each
    // A here, so they are made per product) in panels of 128 rows (the
    // column maxima gathered over the panels), against the host path.
    let (m, n, k, count) = (300, 170, 400, 2);
    let a = spread_matrix(count * m, k, 2.0, seed());
    let b = spread_matrix(k, n, 2.0, seed());
    let e = Emulation::new(13).unwrap().mode(Mode::Accurate).workspace_limit(1 << 20);
    let g = Gemm::new().emulation(e);
    assert!(g.plan_for::<f64, f64>(m, n, k).unwrap().to_string().contains("panels of 128 rows"));
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    for (i, gi) in strided_on_device(&g, (&da, &db), (m, n, k, count)).iter().enumerate() {
        let ai = a.view(i * m, 0, m, k).unwrap().to_matrix();
        let expect = reference(&ai, &b, &e, (1.0, 0.0), &Matrix::zeros(m, n));
        if let Some((r, c, x, want)) = first_diff(gi, &expect) {
            panic!("accurate strided batch, product {i}: C[{r},{c}] = {x:e}, the reference's {want:e}");
        }
    }
}

#[test]
fn misuse_is_a_typed_error_before_the_device() {
    let e = Emulation::f64_accuracy();
    let a = Matrix::<f16>::zeros(4, 4);
    let mut c = Matrix::<f32>::from_fn(4, 4, |_, _| 7.0);
    let err = Gemm::new().emulation(e).run(&a, &a, &mut c).unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    assert!(c.as_slice().iter().all(|&x| x == 7.0));
    let x = Matrix::<f64>::zeros(4, 4);
    let mut y = Matrix::<f64>::from_fn(4, 4, |_, _| 7.0);
    let err = Gemm::new().emulation(e).block_tile(64, 64, 8).run(&x, &x, &mut y).unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    let x32 = Matrix::<f32>::zeros(4, 4);
    let mut y32 = Matrix::<f32>::zeros(4, 4);
    let err = Gemm::new().emulation(e).allow_tf32(true).run(&x32, &x32, &mut y32).unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    assert!(y.as_slice().iter().all(|&x| x == 7.0));
}
