//! FP8 (e4m3) products on stage 9: `F8E4M3 x F8E4M3 -> bf16, f16, f32`
//! against a CPU reference computed in f64 from the e4m3 values (which are
//! exact in f64), on odd and rectangular sizes, every layout of A and B
//! (wgmma reads FP8 K-major only: the others go through a transposed copy),
//! leading dimensions with padding (guard values must come back bit for
//! bit), NaN-poisoned C with beta = 0, alpha and beta, k beyond one k-tile
//! of 128 (the promotion to the full-precision f32 accumulator) and NaN
//! inputs. GPU tests: `--include-ignored`.
//!
//! Bound per element, random inputs: |C - C_ref| <= |alpha| 2^-9 (|A||B|)_ij
//! plus u_C |C_ref| plus |beta| u_C |C_ij| (u_C: C's unit roundoff): within
//! a k-tile of 128 the tensor cores accumulate FP8 products with fewer bits
//! than f32, each k-tile's partial is then added in f32, and C is rounded
//! once. Integer-valued inputs whose sums stay below 2^11 are exact in any
//! of these accumulators: there the result must be the exact value rounded
//! once to C's type.

mod common;

use common::{device, dots, store, Rng};
use gemm::float8::F8E4M3;
use gemm::half::{bf16, f16};
use gemm::{DeviceMatrix, Error, Gemm, Layout, Matrix, Op, Product, Scalar};

/// A `rows x cols` matrix in `layout` with `pad` elements of padding per
/// line, holding `f(i, j)`, its padding `pad_value`.
fn stored<T: Scalar>(
    (rows, cols): (usize, usize),
    layout: Layout,
    pad: usize,
    pad_value: T,
    f: impl FnMut(usize, usize) -> T,
) -> Matrix<T> {
    store(&Matrix::from_fn(rows, cols, f), Op::N, layout, pad, pad_value)
}

/// Whether storage index `at` of a matrix is padding (outside its elements).
fn is_padding<T: Scalar>(m: &Matrix<T>, at: usize) -> bool {
    let (lines, line) = if m.layout() == Layout::RowMajor { (m.rows(), m.cols()) } else { (m.cols(), m.rows()) };
    at / m.ld() >= lines || at % m.ld() >= line
}

/// One product `C <- alpha A B + beta C` of e4m3 into `C` checked against
/// the f64 reference: `exact` demands the exact value rounded once (integer
/// inputs), else the bound of the module docs. Padding of every operand
/// (guards) must be unchanged.
#[allow(clippy::too_many_arguments)]
fn check<C: Scalar>(
    (m, n, k): (usize, usize, usize),
    (la, lb, lc): (Layout, Layout, Layout),
    pad: usize,
    (alpha, beta): (f64, f64),
    exact: bool,
    seed: u64,
) where
    F8E4M3: Product<C>,
{
    let what =
        format!("e4m3 -> {} {m}x{n}x{k} layouts {la:?}/{lb:?}/{lc:?} pad {pad} alpha {alpha} beta {beta}", C::NAME);
    let mut r = Rng::new(seed);
    let value = |r: &mut Rng| {
        if exact {
            F8E4M3::from_f64(r.below(9) as f64 - 4.0)
        } else {
            F8E4M3::from_f64(2.0 * r.uniform())
        }
    };
    let guard8 = F8E4M3::from_bits(0x7f); // NaN: never read
    let a = stored((m, k), la, pad, guard8, |_, _| value(&mut r));
    let b = stored((k, n), lb, pad, guard8, |_, _| value(&mut r));
    let c_guard = C::POISON;
    let c0 = stored((m, n), lc, pad, c_guard, |_, _| {
        if beta == 0.0 {
            C::POISON
        } else {
            C::from_f64((r.below(9) as f64 - 4.0) / 4.0)
        }
    });
    let dev = device();
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut dc = DeviceMatrix::from_host(&dev, &c0).unwrap();
    Gemm::new().alpha(alpha).beta(beta).run_device(&da, &db, &mut dc).unwrap_or_else(|e| panic!("{what}: {e}"));
    let c = dc.to_host().unwrap();
    // Guards: the padding comes back bit for bit.
    for (at, (x, y)) in c.as_slice().iter().zip(c0.as_slice()).enumerate() {
        if is_padding(&c, at) {
            assert!(x.as_f64().is_nan() && y.as_f64().is_nan(), "{what}: C's padding at {at} changed to {x:?}");
        }
    }
    let u_c = C::EPSILON / 2.0;
    let mut worst = 0f64;
    let (dots, sums_abs) = dots(&a, &b);
    for i in 0..m {
        for j in 0..n {
            let (dot, abs) = (dots[i * n + j], sums_abs[i * n + j]);
            let old = if beta == 0.0 { 0.0 } else { c0[(i, j)].as_f64() };
            let want = alpha * dot + beta * old;
            let got = c[(i, j)].as_f64();
            if exact {
                let rounded = C::from_f64(want).as_f64();
                assert_eq!(got, rounded, "{what}: C({i}, {j}) = {got}, want {want} rounded to {rounded}");
            } else {
                let tol = alpha.abs() * 2f64.powi(-9) * abs + u_c * want.abs() + beta.abs() * u_c * old.abs() + 1e-30;
                assert!(
                    (got - want).abs() <= tol,
                    "{what}: C({i}, {j}) = {got}, want {want} (|A||B| {abs}, tolerance {tol})"
                );
                if abs > 0.0 {
                    worst = worst.max((got - want).abs() / (alpha.abs() * abs));
                }
            }
        }
    }
    if !exact {
        println!("{what}: max |C - C_ref| / (|alpha| |A||B|) = {worst:.3e}");
    }
}

fn every_output(dims: (usize, usize, usize), layouts: (Layout, Layout, Layout), pad: usize, exact: bool) {
    for (alpha, beta) in [(1.0, 0.0), (0.75, -0.5)] {
        check::<bf16>(dims, layouts, pad, (alpha, beta), exact, 11);
        check::<f16>(dims, layouts, pad, (alpha, beta), exact, 12);
        check::<f32>(dims, layouts, pad, (alpha, beta), exact, 13);
    }
}

const R: Layout = Layout::RowMajor;
const C: Layout = Layout::ColMajor;

#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn e4m3_integer_inputs_are_exact_every_shape_and_layout() {
    for dims in [(1, 1, 1), (7, 33, 31), (129, 65, 257), (256, 128, 1000)] {
        for la in [R, C] {
            for lb in [R, C] {
                every_output(dims, (la, lb, R), 0, true);
            }
        }
    }
    // A column-major C, and padded lines everywhere (unaligned leading
    // dimensions: C's epilogue stores by thread).
    every_output((100, 70, 300), (R, C, C), 3, true);
    every_output((128, 128, 256), (R, C, R), 8, true);
    // The planner's 192 x 128 and 128 x 192 tiles (C of 260 and 390 rows,
    // 6000 columns: fewer block tiles than 128 x 128's), C stored by TMA
    // and (padded) by the threads.
    every_output((260, 6000, 128), (R, C, R), 0, true);
    every_output((390, 6000, 128), (R, C, R), 0, true);
    every_output((260, 6000, 200), (R, C, R), 5, true);
    // The 128 x 256 tile (each k-tile multiplied and promoted in two
    // halves of 128 columns; k = 200: a whole k-tile and a partial one):
    // n = 3000 leaves the last column of tiles 184 columns (its second half
    // partly past n), n = 2900 84 (wholly past n); C by TMA and (padded,
    // alpha and beta) by the threads. (A few checks: the CPU reference of
    // these sizes is what the test's time is made of.)
    for dims in [(1100, 3000, 200), (1100, 2900, 200)] {
        let plan = Gemm::new().plan_for::<F8E4M3, bf16>(dims.0, dims.1, dims.2).unwrap().to_string();
        assert!(plan.contains("_b128x256_d4_"), "{plan}");
        check::<bf16>(dims, (R, C, R), 0, (1.0, 0.0), true, 14);
    }
    check::<f32>((1100, 3000, 200), (R, C, R), 5, (0.75, -0.5), true, 15);
    check::<f16>((1100, 2900, 200), (R, C, R), 3, (1.0, 0.0), true, 16);
    // MN-major operands, each copied K-major by the byte transpose: whole
    // 128 x 128 tiles by words (leading dimensions multiples of 4) and by
    // bytes (padded by 3), and the partial tiles at the edges.
    every_output((300, 260, 384), (C, R, R), 0, true);
    every_output((300, 260, 384), (C, R, R), 3, true);
}

#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn e4m3_random_inputs_within_the_bound() {
    // k across many k-tiles (promotion every 128), odd and aligned shapes.
    for dims in [(257, 131, 4096), (512, 512, 2048), (64, 1000, 1025), (1000, 64, 129)] {
        every_output(dims, (R, C, R), 0, false);
    }
    every_output((300, 200, 777), (C, R, R), 0, false);
}

#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn e4m3_nan_inputs_propagate_and_the_host_door_agrees() {
    let dev = device();
    let (m, n, k) = (70, 90, 300);
    let mut r = Rng::new(5);
    let mut a = Matrix::from_fn(m, k, |_, _| F8E4M3::from_f64(r.uniform()));
    let b = Matrix::from_fn(k, n, |_, _| F8E4M3::from_f64(r.uniform()));
    a.as_mut().set(3, 17, F8E4M3::NAN);
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut dc = DeviceMatrix::<f32>::zeros(&dev, m, n).unwrap();
    Gemm::new().run_device(&da, &db, &mut dc).unwrap();
    let c = dc.to_host().unwrap();
    for i in 0..m {
        for j in 0..n {
            assert_eq!(c[(i, j)].is_nan(), i == 3, "C({i}, {j}) = {}", c[(i, j)]);
        }
    }
    // The host door: the same bits as the device product.
    let mut hc = Matrix::<f32>::zeros(m, n);
    Gemm::new().run(&a, &b, &mut hc).unwrap();
    for (x, y) in hc.as_slice().iter().zip(c.as_slice()) {
        assert!(x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()), "host {x} vs device {y}");
    }
}

#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn e4m3_options_of_other_stages_are_typed_errors() {
    let dev = device();
    let a = DeviceMatrix::<F8E4M3>::zeros(&dev, 64, 64).unwrap();
    let b = DeviceMatrix::<F8E4M3>::zeros(&dev, 64, 64).unwrap();
    let mut c = DeviceMatrix::<bf16>::zeros(&dev, 64, 64).unwrap();
    let e = Gemm::new().stage(gemm::tuning::Stage::TensorCore).run_device(&a, &b, &mut c).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    // op(A) = T reads A as it is stored (a K-major copy where needed).
    Gemm::new().op_a(Op::T).run_device(&a, &b, &mut c).unwrap();
}

#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn e4m3_strided_and_grouped_batches_have_each_products_bits() {
    let dev = device();
    let (m, n, k, count) = (96, 80, 300, 3);
    let mut r = Rng::new(21);
    let a = Matrix::from_fn(count * m, k, |_, _| F8E4M3::from_f64(r.uniform()));
    let b = Matrix::from_fn(count * k, n, |_, _| F8E4M3::from_f64(r.uniform()));
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    // Each product alone.
    let mut alone = Vec::new();
    for i in 0..count {
        let mut c = DeviceMatrix::<bf16>::zeros(&dev, m, n).unwrap();
        let (ai, bi) = (da.view(i * m, 0, m, k).unwrap(), db.view(i * k, 0, k, n).unwrap());
        Gemm::new().alpha(0.5).run_device(ai, bi, &mut c).unwrap();
        alone.push(c.to_host().unwrap());
    }
    let same = |x: &Matrix<bf16>, y: &Matrix<bf16>, what: &str| {
        for i in 0..m {
            for j in 0..n {
                assert_eq!(x[(i, j)].to_bits(), y[(i, j)].to_bits(), "{what}: C({i}, {j})");
            }
        }
    };
    // A strided batch, one launch.
    let mut dc = DeviceMatrix::<bf16>::zeros(&dev, count * m, n).unwrap();
    Gemm::new()
        .alpha(0.5)
        .run_strided_device(
            gemm::Strided::new(da.view(0, 0, m, k).unwrap(), count, m * k).unwrap(),
            gemm::Strided::new(db.view(0, 0, k, n).unwrap(), count, k * n).unwrap(),
            gemm::Strided::new(dc.view_mut(0, 0, m, n).unwrap(), count, m * n).unwrap(),
        )
        .unwrap();
    let all = dc.to_host().unwrap();
    for (i, want) in alone.iter().enumerate() {
        let got = Matrix::from_fn(m, n, |r, c| all[(i * m + r, c)]);
        same(&got, want, &format!("strided product {i}"));
    }
    // A grouped batch, one launch.
    let mut cs: Vec<DeviceMatrix<bf16>> = (0..count).map(|_| DeviceMatrix::zeros(&dev, m, n).unwrap()).collect();
    let av: Vec<_> = (0..count).map(|i| da.view(i * m, 0, m, k).unwrap()).collect();
    let bv: Vec<_> = (0..count).map(|i| db.view(i * k, 0, k, n).unwrap()).collect();
    let mut cv: Vec<_> = cs.iter_mut().map(|c| c.as_view_mut()).collect();
    Gemm::new().alpha(0.5).run_grouped_device(&av, &bv, &mut cv).unwrap();
    drop(cv);
    for (i, (c, want)) in cs.iter().zip(&alone).enumerate() {
        same(&c.to_host().unwrap(), want, &format!("grouped product {i}"));
    }
}

/// A strided batch of each mixed pair (`run_strided_fp8_device`), one
/// launch: every product has the bits of that product run alone
/// (`run_fp8_device`), B shared by every product (stride 0), C's products
/// with gaps between them that must come back bit for bit; e5m2 x e5m2 is
/// refused before anything runs.
#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn mixed_pair_strided_batches_have_each_products_bits() {
    use gemm::float8::F8E5M2;
    fn pair<Ta: gemm::Fp8, Tb: gemm::Fp8>(seed: u64, what: &str) {
        let dev = device();
        let (m, n, k, count, gap) = (77, 72, 290, 3, 5);
        let mut r = Rng::new(seed);
        let a = Matrix::from_fn(count * m, k, |_, _| Ta::from_f64(2.0 * r.uniform() - 1.0));
        let b = Matrix::from_fn(k, n, |_, _| Tb::from_f64(2.0 * r.uniform() - 1.0));
        let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
        let g = Gemm::new().alpha(0.75);
        let mut alone = Vec::new();
        for i in 0..count {
            let mut c = DeviceMatrix::<bf16>::zeros(&dev, m, n).unwrap();
            g.run_fp8_device(da.view(i * m, 0, m, k).unwrap(), &db, &mut c).unwrap();
            alone.push(c.to_host().unwrap());
        }
        // C: products m * n + gap apart in one buffer, NaN everywhere first.
        let stride_c = m * n + gap;
        let before = vec![bf16::NAN; count * stride_c];
        let buffer = dev.stream().clone_htod(&before).unwrap();
        let mut dc = DeviceMatrix::from_cuda_slice(&dev, buffer, m, n, Layout::RowMajor, n).unwrap();
        g.run_strided_fp8_device(
            gemm::Strided::new(da.view(0, 0, m, k).unwrap(), count, m * k).unwrap(),
            gemm::Strided::new(db.as_view(), count, 0).unwrap(),
            gemm::Strided::new(dc.as_view_mut(), count, stride_c).unwrap(),
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        let after = dev.stream().clone_dtoh(dc.buffer()).unwrap();
        dev.stream().synchronize().unwrap();
        for (at, (x, y)) in after.iter().zip(&before).enumerate() {
            let (i, e) = (at / stride_c, at % stride_c);
            if e >= m * n {
                assert_eq!(x.to_bits(), y.to_bits(), "{what}: gap after product {i}, element {e}");
            } else {
                let want = alone[i][(e / n, e % n)];
                assert_eq!(x.to_bits(), want.to_bits(), "{what}: product {i} C({}, {})", e / n, e % n);
            }
        }
    }
    pair::<F8E5M2, F8E4M3>(31, "e5m2 x e4m3");
    pair::<F8E4M3, F8E5M2>(32, "e4m3 x e5m2");
    let dev = device();
    let a5 = DeviceMatrix::<F8E5M2>::zeros(&dev, 64, 64).unwrap();
    let mut c = DeviceMatrix::<bf16>::zeros(&dev, 64, 64).unwrap();
    let err = Gemm::new()
        .run_strided_fp8_device(
            gemm::Strided::new(a5.as_view(), 1, 0).unwrap(),
            gemm::Strided::new(a5.as_view(), 1, 0).unwrap(),
            gemm::Strided::new(c.as_view_mut(), 1, 0).unwrap(),
        )
        .map(|_| ())
        .expect_err("e5m2 x e5m2");
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
}

/// One mixed-format product `C <- A B` (A of `Ta`, B of `Tb`, through
/// `Gemm::run_fp8_device`) with integer inputs in [-4, 4] (exact in both
/// formats, sums below 2^11): the exact value rounded once to C's type, in
/// every layout of A, B and C (a column-major C runs the product
/// transposed, whose kernel has the formats the other way round).
fn check_mixed<Ta: gemm::Fp8, Tb: gemm::Fp8, Cc: Scalar>((m, n, k): (usize, usize, usize), seed: u64)
where
    F8E4M3: Product<Cc>,
{
    let mut r = Rng::new(seed);
    let dev = device();
    for (la, lb, lc) in [(R, C, R), (R, R, R), (C, C, C), (C, R, C), (R, C, C)] {
        let what = format!("{} x {} -> {} {m}x{n}x{k} {la:?}/{lb:?}/{lc:?}", Ta::NAME, Tb::NAME, Cc::NAME);
        let a = stored((m, k), la, 1, Ta::POISON, |_, _| Ta::from_f64(r.below(9) as f64 - 4.0));
        let b = stored((k, n), lb, 0, Tb::POISON, |_, _| Tb::from_f64(r.below(9) as f64 - 4.0));
        let c0 = stored((m, n), lc, 2, Cc::POISON, |_, _| Cc::POISON);
        let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
        let mut dc = DeviceMatrix::from_host(&dev, &c0).unwrap();
        Gemm::new().run_fp8_device(&da, &db, &mut dc).unwrap_or_else(|e| panic!("{what}: {e}"));
        let c = dc.to_host().unwrap();
        for (at, (x, y)) in c.as_slice().iter().zip(c0.as_slice()).enumerate() {
            if is_padding(&c, at) {
                assert!(x.as_f64().is_nan() && y.as_f64().is_nan(), "{what}: C's padding at {at} changed");
            }
        }
        let (dots, _) = dots(&a, &b);
        for i in 0..m {
            for j in 0..n {
                let want = Cc::from_f64(dots[i * n + j]).as_f64();
                assert_eq!(c[(i, j)].as_f64(), want, "{what}: C({i}, {j})");
            }
        }
    }
}

#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn e4m3_with_e5m2_both_ways_exact_every_layout() {
    use gemm::float8::F8E5M2;
    for dims in [(1, 1, 1), (7, 33, 31), (129, 200, 257), (16, 1024, 128)] {
        check_mixed::<F8E4M3, F8E5M2, bf16>(dims, 41);
        check_mixed::<F8E5M2, F8E4M3, bf16>(dims, 42);
        check_mixed::<F8E4M3, F8E5M2, f16>(dims, 43);
        check_mixed::<F8E5M2, F8E4M3, f32>(dims, 44);
    }
    // The 192 x 128 and 128 x 192 tiles (in the row-major C's layouts).
    check_mixed::<F8E4M3, F8E5M2, bf16>((260, 6000, 128), 45);
    check_mixed::<F8E5M2, F8E4M3, f32>((390, 6000, 128), 46);
    // The 128 x 256 tile.
    check_mixed::<F8E5M2, F8E4M3, f16>((1100, 2900, 200), 47);
}

/// e5m2's infinities and NaNs pass through as IEEE says: inf times a
/// positive finite sum is inf, inf times 0 is NaN, a NaN gives NaN; the
/// other rows stay finite. e5m2 x e5m2 is a typed error.
#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn e5m2_infinities_and_nans_pass_through() {
    use gemm::float8::F8E5M2;
    let dev = device();
    let (m, n, k) = (4, 8, 160);
    // OCP's e5m2 infinity, 0x7C, what the tensor cores read (float8 0.7's
    // `F8E5M2::INFINITY` is 0x7B, the largest finite value 57344 there).
    let (inf, nan) = (F8E5M2::from_bits(0x7C), F8E5M2::from_bits(0x7E));
    let a = Matrix::from_fn(m, k, |i, p| match (i, p) {
        (0, 0) => inf,
        (1, 130) => nan,
        _ => F8E5M2::from_f64(1.0),
    });
    // B's row 0 is 1 except a 0 in column 3.
    let b = store(
        &Matrix::from_fn(k, n, |p, j| F8E4M3::from_f64(if p == 0 && j == 3 { 0.0 } else { 1.0 })),
        Op::N,
        C,
        0,
        F8E4M3::POISON,
    );
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut dc = DeviceMatrix::<f32>::zeros(&dev, m, n).unwrap();
    Gemm::new().run_fp8_device(&da, &db, &mut dc).unwrap();
    let c = dc.to_host().unwrap();
    for j in 0..n {
        if j == 3 {
            assert!(c[(0, j)].is_nan(), "inf x 0: C(0, 3) = {}", c[(0, j)]);
        } else {
            assert_eq!(c[(0, j)], f32::INFINITY, "C(0, {j})");
        }
        assert!(c[(1, j)].is_nan(), "NaN: C(1, {j}) = {}", c[(1, j)]);
        for i in 2..m {
            assert_eq!(c[(i, j)], if j == 3 { k as f32 - 1.0 } else { k as f32 }, "C({i}, {j})");
        }
    }
    let mut dc = DeviceMatrix::<f32>::zeros(&dev, m, n).unwrap();
    let b5 = DeviceMatrix::from_host(&dev, &Matrix::from_fn(k, n, |_, _| F8E5M2::from_f64(1.0))).unwrap();
    let err = Gemm::new().run_fp8_device(&da, &b5, &mut dc).expect_err("e5m2 x e5m2");
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
}

/// Grouped lists of each FP8 pair (`run_grouped_fp8_device`, one launch;
/// e4m3 x e4m3 as well) with integer inputs in [-4, 4] (each k-tile's
/// partial sum exact, see the module docs): problems of their own shapes
/// (one row, k below and above a k-tile, odd n), A and B in both layouts,
/// C row-major and column-major with NaN padding that must come back bit
/// for bit (C NaN-poisoned, beta 0); plain, then with a column bias and
/// ReLU. Then the masked layout of each pair (`run_masked_fp8_device`):
/// slots of 150 rows, counts 0, 1, 77, 150 and 300, the rows past a count
/// bit for bit. e5m2 x e5m2 is refused, C untouched.
#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn mixed_pair_grouped_and_masked_lists_are_exact() {
    use gemm::float8::F8E5M2;
    use gemm::{Activation, Along, DeviceView, DeviceViewMut, Epilogue};
    fn pair<Ta: gemm::Fp8, Tb: gemm::Fp8, Cc: Scalar>(seed: u64)
    where
        F8E4M3: Product<Cc>,
    {
        let dev = device();
        let mut r = Rng::new(seed);
        let name = format!("{} x {} -> {}", Ta::NAME, Tb::NAME, Cc::NAME);
        let dims = [(96, 80, 300), (1, 33, 129), (130, 200, 64), (17, 64, 257)];
        let layouts = [(R, C, R), (C, R, C), (R, R, C), (C, C, R)];
        let mut ints = |_: usize, _: usize| r.below(9) as f64 - 4.0;
        let a: Vec<Matrix<Ta>> = dims
            .iter()
            .zip(&layouts)
            .map(|(&(m, _, k), l)| stored((m, k), l.0, 1, Ta::POISON, |i, p| Ta::from_f64(ints(i, p))))
            .collect();
        let b: Vec<Matrix<Tb>> = dims
            .iter()
            .zip(&layouts)
            .map(|(&(_, n, k), l)| stored((k, n), l.1, 0, Tb::POISON, |p, j| Tb::from_f64(ints(p, j))))
            .collect();
        let biases: Vec<Vec<f32>> =
            dims.iter().map(|&(_, n, _)| (0..n).map(|j| (j % 7) as f32 - 3.0).collect()).collect();
        let da: Vec<_> = a.iter().map(|x| DeviceMatrix::from_host(&dev, x).unwrap()).collect();
        let db: Vec<_> = b.iter().map(|x| DeviceMatrix::from_host(&dev, x).unwrap()).collect();
        for fused in [false, true] {
            let what = format!("{name} grouped, fused {fused}");
            let c0: Vec<Matrix<Cc>> = dims
                .iter()
                .zip(&layouts)
                .map(|(&(m, n, _), l)| stored((m, n), l.2, 2, Cc::POISON, |_, _| Cc::POISON))
                .collect();
            let mut dc: Vec<_> = c0.iter().map(|x| DeviceMatrix::from_host(&dev, x).unwrap()).collect();
            let av: Vec<DeviceView<Ta>> = da.iter().map(|x| x.as_view()).collect();
            let bv: Vec<DeviceView<Tb>> = db.iter().map(|x| x.as_view()).collect();
            let mut cv: Vec<DeviceViewMut<Cc>> = dc.iter_mut().map(|x| x.as_view_mut()).collect();
            let epilogues: Vec<Epilogue> = if fused {
                biases.iter().map(|b| Epilogue::new().bias(Along::Columns, b).activation(Activation::Relu)).collect()
            } else {
                Vec::new()
            };
            Gemm::new().run_grouped_fp8_device(&av, &bv, &mut cv, &epilogues).unwrap_or_else(|e| panic!("{what}: {e}"));
            drop(cv);
            for (e, &(m, n, k)) in dims.iter().enumerate() {
                let c = dc[e].to_host().unwrap();
                for (at, x) in c.as_slice().iter().enumerate() {
                    if is_padding(&c, at) {
                        assert!(x.as_f64().is_nan(), "{what}: problem {e} C's padding at {at} changed");
                    }
                }
                for i in 0..m {
                    for j in 0..n {
                        let dot: f64 = (0..k).map(|p| a[e][(i, p)].as_f64() * b[e][(p, j)].as_f64()).sum();
                        let v = if fused { (dot + biases[e][j] as f64).max(0.0) } else { dot };
                        let want = Cc::from_f64(v).as_f64();
                        assert_eq!(c[(i, j)].as_f64(), want, "{what}: problem {e} C({i}, {j})");
                    }
                }
            }
        }

        // The masked layout: slots of 150 rows, A row-major, B column-major,
        // C row-major (n = 72: TMA's stores into a map clipped at the count).
        let (slot, n, k) = (150usize, 72usize, 200usize);
        let counts = [0u32, 1, 77, 150, 300];
        let experts = counts.len();
        let d_counts = dev.stream().clone_htod(&counts).unwrap();
        let a = Matrix::from_fn(experts * slot, k, |i, p| Ta::from_f64(ints(i, p)));
        let b: Vec<Matrix<Tb>> =
            (0..experts).map(|_| stored((k, n), C, 0, Tb::POISON, |p, j| Tb::from_f64(ints(p, j)))).collect();
        let guard = Cc::from_f64(-7.0);
        let c0 = Matrix::from_fn(slot, n, |_, _| guard);
        let da = DeviceMatrix::from_host(&dev, &a).unwrap();
        let db: Vec<_> = b.iter().map(|x| DeviceMatrix::from_host(&dev, x).unwrap()).collect();
        let mut dc: Vec<_> = (0..experts).map(|_| DeviceMatrix::from_host(&dev, &c0).unwrap()).collect();
        let av: Vec<_> = (0..experts).map(|e| da.view(e * slot, 0, slot, k).unwrap()).collect();
        let bv: Vec<_> = db.iter().map(|x| x.as_view()).collect();
        let mut cv: Vec<_> = dc.iter_mut().map(|x| x.as_view_mut()).collect();
        Gemm::new()
            .run_masked_fp8_device(&av, &bv, &mut cv, &d_counts.as_view(), &[])
            .unwrap_or_else(|e| panic!("{name} masked: {e}"));
        drop(cv);
        for e in 0..experts {
            let c = dc[e].to_host().unwrap();
            for i in 0..slot {
                for j in 0..n {
                    let got = c[(i, j)];
                    if i >= (counts[e] as usize).min(slot) {
                        assert_eq!(got.as_f64(), guard.as_f64(), "{name} masked: expert {e} uncounted C({i}, {j})");
                        continue;
                    }
                    let dot: f64 = (0..k).map(|p| a[(e * slot + i, p)].as_f64() * b[e][(p, j)].as_f64()).sum();
                    assert_eq!(got.as_f64(), Cc::from_f64(dot).as_f64(), "{name} masked: expert {e} C({i}, {j})");
                }
            }
        }
    }
    pair::<F8E5M2, F8E4M3, bf16>(51);
    pair::<F8E4M3, F8E5M2, f32>(52);
    pair::<F8E4M3, F8E5M2, f16>(53);
    pair::<F8E4M3, F8E4M3, bf16>(54);

    // e5m2 x e5m2: refused, C untouched.
    let dev = device();
    let a5 = DeviceMatrix::<F8E5M2>::zeros(&dev, 64, 64).unwrap();
    let c0 = Matrix::from_fn(64, 64, |_, _| bf16::from_f64(3.0));
    let mut dc = DeviceMatrix::from_host(&dev, &c0).unwrap();
    let mut cv = [dc.as_view_mut()];
    let err =
        Gemm::new().run_grouped_fp8_device(&[a5.as_view()], &[a5.as_view()], &mut cv, &[]).expect_err("e5m2 x e5m2");
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    let c = dc.to_host().unwrap();
    assert!(c.as_slice().iter().zip(c0.as_slice()).all(|(x, y)| x.to_bits() == y.to_bits()), "a refused call wrote C");
}

/// The host door of each FP8 pair (`Gemm::run_fp8`, host matrices with
/// padding) gives the device door's bits (`run_fp8_device`) in every
/// layout of A, B and C, with alpha and beta; C's padding comes back bit
/// for bit; e5m2 x e5m2 is refused, C untouched.
#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn mixed_pair_host_door_has_the_device_doors_bits() {
    use gemm::float8::F8E5M2;
    fn pair<Ta: gemm::Fp8, Tb: gemm::Fp8, Cc: Scalar>(seed: u64)
    where
        F8E4M3: Product<Cc>,
    {
        let dev = device();
        let mut r = Rng::new(seed);
        let (m, n, k) = (131, 77, 300);
        for (la, lb, lc) in [(R, C, R), (R, R, R), (C, C, C), (C, R, C)] {
            let what = format!("{} x {} -> {} {la:?}/{lb:?}/{lc:?}", Ta::NAME, Tb::NAME, Cc::NAME);
            let a = stored((m, k), la, 2, Ta::POISON, |_, _| Ta::from_f64(2.0 * r.uniform() - 1.0));
            let b = stored((k, n), lb, 1, Tb::POISON, |_, _| Tb::from_f64(2.0 * r.uniform() - 1.0));
            let c0 = stored((m, n), lc, 3, Cc::POISON, |_, _| Cc::from_f64(2.0 * r.uniform() - 1.0));
            let g = Gemm::new().alpha(0.75).beta(-0.5);
            let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
            let mut dc = DeviceMatrix::from_host(&dev, &c0).unwrap();
            g.run_fp8_device(&da, &db, &mut dc).unwrap_or_else(|e| panic!("{what} (device): {e}"));
            let want = dc.to_host().unwrap();
            let mut hc = c0.clone();
            g.run_fp8(&a, &b, &mut hc).unwrap_or_else(|e| panic!("{what} (host): {e}"));
            for (at, (x, y)) in hc.as_slice().iter().zip(c0.as_slice()).enumerate() {
                if is_padding(&hc, at) {
                    assert_eq!(x.as_f64().is_nan(), y.as_f64().is_nan(), "{what}: C's padding at {at} changed");
                }
            }
            for i in 0..m {
                for j in 0..n {
                    let (x, y) = (hc[(i, j)], want[(i, j)]);
                    assert!(
                        x.as_f64().to_bits() == y.as_f64().to_bits(),
                        "{what}: C({i}, {j}) host {x:?}, device {y:?}"
                    );
                }
            }
        }
    }
    pair::<F8E5M2, F8E4M3, bf16>(61);
    pair::<F8E4M3, F8E5M2, f32>(62);
    pair::<F8E4M3, F8E4M3, f16>(63);
    let a5 = Matrix::from_fn(8, 8, |_, _| F8E5M2::from_f64(1.0));
    let c0 = Matrix::from_fn(8, 8, |_, _| bf16::from_f64(3.0));
    let mut c = c0.clone();
    let err = Gemm::new().run_fp8(&a5, &a5, &mut c).expect_err("e5m2 x e5m2");
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    assert!(c.as_slice().iter().zip(c0.as_slice()).all(|(x, y)| x.to_bits() == y.to_bits()), "a refused call wrote C");
}
