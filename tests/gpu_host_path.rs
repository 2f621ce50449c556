//! The host path (`Gemm::run` on host matrices): tiles over several
//! streams, staging through the page-locked ring or copying page-locked
//! matrices directly, in core and out of core (a memory budget smaller than
//! the operands), against a CPU reference with integer-valued inputs (so the
//! products are exact in f64 and f32 at these sizes), with NaN guards in the
//! padding that must come back bit for bit; the mixed-precision products
//! (f16, bf16, TF32, i8) streamed give the bits of the same product on
//! device matrices. GPU tests: `--include-ignored`.

mod common;

use common::{device, same_bits, store, Rng, Variant};
use gemm::{DeviceMatrix, Gemm, Layout, Matrix, Op, Scalar};
use std::mem::size_of;

/// Small integers: every product below is exact.
fn ints(rows: usize, cols: usize, seed: u64) -> Matrix<f64> {
    let mut r = Rng::new(seed);
    Matrix::from_fn(rows, cols, |_, _| r.below(9) as f64 - 4.0)
}

fn reference(a: &Matrix<f64>, b: &Matrix<f64>, c: &Matrix<f64>, alpha: f64, beta: f64) -> Matrix<f64> {
    Matrix::from_fn(a.rows(), b.cols(), |i, j| {
        let dot: f64 = (0..a.cols()).map(|p| a[(i, p)] * b[(p, j)]).sum();
        alpha * dot + if beta == 0.0 { 0.0 } else { beta * c[(i, j)] }
    })
}

/// One product through the host path with the given builder, every element
/// compared exactly and C's padding unchanged.
fn check(g: &Gemm, v: Variant, (m, n, k): (usize, usize, usize), alpha: f64, beta: f64, what: &str) {
    let (a, b) = (ints(m, k, 1 + m as u64), ints(k, n, 2 + n as u64));
    let c0 = if beta == 0.0 { Matrix::filled(m, n, f64::NAN) } else { ints(m, n, 3) };
    let want = reference(&a, &b, &c0, alpha, beta);
    let (sa, sb) = (store(&a, v.op_a, v.a, 3, f64::NAN), store(&b, v.op_b, v.b, 1, f64::NAN));
    let guard = f64::from_bits(0x7ff8_dead_beef_0001);
    let mut sc = store(&c0, Op::N, v.c, 2, guard);
    let before = sc.clone();
    g.clone().op_a(v.op_a).op_b(v.op_b).alpha(alpha).beta(beta).run(&sa, &sb, &mut sc).unwrap();
    for i in 0..m {
        for j in 0..n {
            assert_eq!(sc[(i, j)], want[(i, j)], "{what} {v} {m}x{n}x{k}: C({i}, {j})");
        }
    }
    // Padding: every storage position that is not an element keeps its bits.
    let mut expect = sc.clone();
    for i in 0..m {
        for j in 0..n {
            expect[(i, j)] = before[(i, j)];
        }
    }
    assert!(same_bits(expect.as_slice(), before.as_slice()), "{what} {v}: C's padding changed");
}

#[test]
#[ignore = "needs a GPU"]
fn several_tiles_and_streams_in_every_layout() {
    let _ = device();
    for (i, v) in Variant::all().into_iter().enumerate() {
        let streams = 1 + i % 4;
        let g = Gemm::new().host_streams(streams);
        check(&g, v, (300, 257, 129), 1.0, 0.0, &format!("{streams} streams"));
        check(&g, v, (130, 70, 33), 0.5, 1.5, &format!("{streams} streams, beta"));
    }
}

#[test]
#[ignore = "needs a GPU"]
fn out_of_core_streams_through_a_small_budget() {
    let _ = device();
    // Budgets far below A + B + C (8 bytes per element): k in chunks, C in tiles.
    for (budget, v) in [(64 << 10, Variant::NN), (200 << 10, Variant::all()[13]), (1 << 20, Variant::all()[30])] {
        for streams in [1, 3] {
            let g = Gemm::new().memory_budget(budget).host_streams(streams);
            check(&g, v, (400, 300, 1000), 1.0, 0.0, &format!("budget {budget}"));
            check(&g, v, (333, 65, 777), -1.0, 2.0, &format!("budget {budget}, beta"));
        }
    }
    // alpha = 0: C <- beta C without reading A or B.
    check(&Gemm::new().memory_budget(32 << 10), Variant::NN, (200, 100, 50), 0.0, 3.0, "alpha 0");
}

#[test]
#[ignore = "needs a GPU"]
fn page_locked_matrices_are_copied_directly() {
    let dev = device();
    let (m, n, k) = (1000, 700, 300);
    let (a, b) = (ints(m, k, 11), ints(k, n, 12));
    let want = reference(&a, &b, &Matrix::zeros(m, n), 1.0, 0.0);
    let (pa, pb) = (a.to_pinned(&dev).unwrap(), b.to_pinned(&dev).unwrap());
    let mut pc = Matrix::<f64>::pinned(&dev, m, n, Layout::RowMajor).unwrap();
    assert!(pa.is_pinned() && pc.is_pinned() && !pa.clone().is_pinned());
    for streams in [1, 2, 8] {
        pc.fill(f64::NAN);
        Gemm::new().host_streams(streams).run(&pa, &pb, &mut pc).unwrap();
        assert!(same_bits(pc.as_slice(), want.as_slice()), "{streams} streams");
    }
    // Mixed: page-locked A, ordinary B and C; a budget that forces tiles.
    let mut c = Matrix::filled(m, n, f64::NAN);
    Gemm::new().memory_budget(2 << 20).run(&pa, &b, &mut c).unwrap();
    assert!(same_bits(c.as_slice(), want.as_slice()));
}

/// Page-locked operands with n >= 16384 go in core by column panels of B
/// uploaded interleaved with A's row panels (a narrow last panel here):
/// every op and layout, beta 0 and not, exact, C's padding unchanged.
#[test]
#[ignore = "needs a GPU"]
fn page_locked_wide_products_interleave_panels() {
    let dev = device();
    let (m, n, k) = (300, 16400, 24);
    let (a, b, c0) = (ints(m, k, 21), ints(k, n, 22), ints(m, n, 23));
    for (i, v) in Variant::all().into_iter().enumerate().filter(|(i, _)| i % 5 == 0) {
        let beta = if i % 10 == 0 { 0.0 } else { 1.5 };
        let want = reference(&a, &b, &c0, 1.0, beta);
        let pa = store(&a, v.op_a, v.a, 3, f64::NAN).to_pinned(&dev).unwrap();
        let pb = store(&b, v.op_b, v.b, 1, f64::NAN).to_pinned(&dev).unwrap();
        let guard = f64::from_bits(0x7ff8_dead_beef_0002);
        let mut pc = store(&c0, Op::N, v.c, 2, guard).to_pinned(&dev).unwrap();
        let before = pc.clone();
        Gemm::new().op_a(v.op_a).op_b(v.op_b).beta(beta).run(&pa, &pb, &mut pc).unwrap();
        let mut expect = pc.clone();
        for i in 0..m {
            for j in 0..n {
                assert_eq!(pc[(i, j)], want[(i, j)], "{v} beta {beta}: C({i}, {j})");
                expect[(i, j)] = before[(i, j)];
            }
        }
        assert!(same_bits(expect.as_slice(), before.as_slice()), "{v}: C's padding changed");
    }
}

#[test]
#[ignore = "needs a GPU"]
fn several_host_threads_at_once() {
    let _ = device();
    std::thread::scope(|s| {
        for t in 0..6usize {
            s.spawn(move || {
                let g = Gemm::new().host_streams(1 + t % 3).memory_budget(if t % 2 == 0 { 1 << 20 } else { 1 << 30 });
                check(&g, Variant::all()[t * 5], (150 + t, 90, 260), 1.0, 0.0, &format!("thread {t}"));
            });
        }
    });
}

#[test]
#[ignore = "needs a GPU"]
fn f32_through_the_host_path() {
    let _ = device();
    let (m, n, k) = (513, 129, 300);
    let a = Matrix::<f32>::from_fn(m, k, |i, j| ((i + 2 * j) % 7) as f32 - 3.0);
    let b = Matrix::<f32>::from_fn(k, n, |i, j| ((3 * i + j) % 5) as f32 - 2.0);
    let mut c = Matrix::<f32>::filled(m, n, f32::NAN);
    Gemm::new().memory_budget(256 << 10).host_streams(3).run(&a, &b, &mut c).unwrap();
    for i in 0..m {
        for j in 0..n {
            let want: f32 = (0..k).map(|p| a[(i, p)] * b[(p, j)]).sum();
            assert_eq!(c[(i, j)], want, "C({i}, {j})");
        }
    }
}

/// The mixed-precision products through the host path (several tiles over
/// 3 streams, from pageable and page-locked memory, and out of core under
/// a budget) give the bits of the same product on device matrices: each
/// tile takes the whole product's split of k, and k stays whole for a C of
/// 16 bits (out of core with an f32 C, k in chunks: within a bound). Random inputs (not integers), so any other order of the
/// sums would show; beta != 0 with C's old values uploaded by tiles.
fn streamed_matches_device<T: gemm::Product<C>, C: Scalar>(base: Gemm, what: &str) {
    let dev = device();
    let (m, n, k) = (700, 520, 900);
    let mut r = Rng::new(31);
    let mut value = |scale: f64| (r.uniform() - 0.5) * scale;
    let int = T::EPSILON == 0.0;
    let a = Matrix::<T>::from_fn(m, k, |_, _| T::from_f64(if int { (value(16.0)).round() } else { value(2.0) }));
    let b = Matrix::<T>::from_fn(k, n, |_, _| T::from_f64(if int { (value(16.0)).round() } else { value(2.0) }));
    let c0 = Matrix::<C>::from_fn(m, n, |_, _| C::from_f64(if int { (value(16.0)).round() } else { value(2.0) }));
    let (alpha, beta) = if int { (2.0, -1.0) } else { (0.75, 0.5) };
    let g = base.alpha(alpha).beta(beta);
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut dc = DeviceMatrix::from_host(&dev, &c0).unwrap();
    g.run_device(&da, &db, &mut dc).unwrap();
    let want = dc.to_host().unwrap();
    // Out of core: a budget of a third of A, B and C (bytes).
    let third = (m * k + k * n) * size_of::<T>() / 3 + m * n * size_of::<C>() / 3;
    for (label, g) in
        [("3 streams", g.clone().host_streams(3)), ("out of core", g.clone().host_streams(2).memory_budget(third))]
    {
        // Out of core with a C of f32, k is cut into chunks and each
        // chunk's sum rounded to f32 in C: the same terms summed in other
        // groups, so within a bound, not the same bits. Inputs lie in
        // [-3, 1): |alpha| sum |a||b| <= |alpha| k 9, and the two sums differ
        // by a few roundings of partial sums of that size (measured 1.5 eps
        // of it on an H100; the bound allows 16).
        let chunked = label == "out of core" && size_of::<C>() == 4 && !int;
        let tol = 16.0 * f32::EPSILON as f64 * alpha.abs() * k as f64 * 9.0;
        // The first element (storage index) that disagrees, with both values.
        let disagrees = |got: &[C]| {
            #[allow(clippy::neg_cmp_op_on_partial_ord)] // a NaN disagrees too
            let bad = |(x, y): (&C, &C)| {
                if chunked {
                    !((x.as_f64() - y.as_f64()).abs() <= tol)
                } else {
                    x.as_f64().to_bits() != y.as_f64().to_bits()
                }
            };
            got.iter().zip(want.as_slice()).position(bad).map(|i| {
                let count = got.iter().zip(want.as_slice()).filter(|&p| bad(p)).count();
                format!("{count} elements, the first at {i}: {:?}, the device gives {:?}", got[i], want.as_slice()[i])
            })
        };
        let mut c = c0.clone();
        g.run(&a, &b, &mut c).unwrap();
        if let Some(d) = disagrees(c.as_slice()) {
            panic!("{what}, {label}: not the device's result: {d}");
        }
        let (pa, pb) = (a.to_pinned(&dev).unwrap(), b.to_pinned(&dev).unwrap());
        let mut pc = c0.to_pinned(&dev).unwrap();
        g.run(&pa, &pb, &mut pc).unwrap();
        if let Some(d) = disagrees(pc.as_slice()) {
            panic!("{what}, {label}, page-locked: not the device's result: {d}");
        }
    }
}

#[test]
#[ignore = "needs a GPU"]
fn f16_streams_with_the_device_bits() {
    use gemm::half::f16;
    streamed_matches_device::<f16, f32>(Gemm::new(), "f16 -> f32");
    streamed_matches_device::<f16, f16>(Gemm::new(), "f16 -> f16");
}

#[test]
#[ignore = "needs a GPU"]
fn bf16_streams_with_the_device_bits() {
    use gemm::half::bf16;
    streamed_matches_device::<bf16, f32>(Gemm::new(), "bf16 -> f32");
    streamed_matches_device::<bf16, bf16>(Gemm::new(), "bf16 -> bf16");
}

#[test]
#[ignore = "needs a GPU"]
fn i8_and_tf32_stream_with_the_device_bits() {
    streamed_matches_device::<i8, i32>(Gemm::new(), "i8 -> i32");
    streamed_matches_device::<f32, f32>(Gemm::new().allow_tf32(true), "f32 on TF32");
}

/// A budget that cannot hold a line of k for a C of 16 bits is a typed
/// error, C untouched; the host path's options on device matrices are too.
#[test]
#[ignore = "needs a GPU"]
fn budgets_too_small_and_host_options_on_device_calls_are_errors() {
    use gemm::half::f16;
    let dev = device();
    let (m, n, k) = (64, 64, 4096);
    let a = Matrix::<f16>::filled(m, k, f16::ONE);
    let b = Matrix::<f16>::filled(k, n, f16::ONE);
    let mut c = Matrix::<f16>::filled(m, n, f16::from_f32(7.0));
    let e = Gemm::new().memory_budget(4 << 10).run(&a, &b, &mut c).unwrap_err();
    assert!(matches!(e, gemm::Error::MemoryBudget { .. }), "{e}");
    assert!(c.as_slice().iter().all(|&v| v == f16::from_f32(7.0)));
    // The same budget runs a C of f32 (k in chunks).
    let mut c32 = Matrix::<f32>::filled(m, n, f32::NAN);
    Gemm::new().memory_budget(4 << 10).run(&a, &b, &mut c32).unwrap();
    assert!(c32.as_slice().iter().all(|&v| v == k as f32));
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut dc = DeviceMatrix::<f32>::zeros(&dev, m, n).unwrap();
    for g in [Gemm::new().memory_budget(1 << 30), Gemm::new().host_streams(2)] {
        let e = g.run_device(&da, &db, &mut dc).unwrap_err();
        assert!(matches!(e, gemm::Error::Unsupported { .. }), "{e}");
    }
    let x = DeviceMatrix::from_host(&dev, &Matrix::<f64>::filled(8, 8, 1.0)).unwrap();
    let mut y = DeviceMatrix::<f64>::zeros(&dev, 8, 8).unwrap();
    let e = Gemm::new().memory_budget(1 << 30).run_device(&x, &x, &mut y).unwrap_err();
    assert!(matches!(e, gemm::Error::Unsupported { .. }), "{e}");
}
