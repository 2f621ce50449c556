//! GPU tests of stage 9 (Hopper warpgroup MMA and TMA): f16 and bf16
//! operands with f32 accumulation, C in f16, bf16 or f32.
//!
//! - Exact: small-integer operands (|x| <= 4, exact in f16 and bf16) give
//!   integer products that f32 holds exactly (k * 16 < 2^24), so C must equal
//!   the reference bit for bit: every op/layout combination (32) at odd and
//!   tile-straddling shapes, both tiles (128 x 128 and 128 x 256).
//! - Bounded: random operands in [-1, 1) against the f64 CPU reference of
//!   the rounded inputs, `Reference::new_mixed`'s bound
//!   `(2k + 4) 2^-24 (|alpha| |A||B| + |beta| |C0|) + eps_C / 2 |C_ref|`,
//!   with alpha and beta, NaN-poisoned C when beta = 0, padded operands whose
//!   padding holds NaN (an odd leading dimension: the aligned-copy path), and
//!   C's padding coming back bit for bit.
//! - Device matrices, run to run determinism, k = 0 and alpha = 0, errors.
//!
//! They need an NVIDIA GPU of compute capability 9.0: ignored by default,
//! run with `--include-ignored`; elsewhere they fail, never pass.

mod common;

use common::{device, op_view, seed, store, Variant};
use gemm::check::{random_int_matrix, random_matrix, Reference};
use gemm::half::{bf16, f16};
use gemm::tuning::{warpgroup_kernel, WgmmaTypes};
use gemm::{DeviceMatrix, Error, Gemm, Layout, Matrix, Op, Product, Scalar};

/// Shapes around the tiles (BM = 128, BN = 128 or 256, BK = 64): one
/// element, odd sizes, one past a tile, k not a multiple of 64, skinny.
const SHAPES: [(usize, usize, usize); 8] = [
    (1, 1, 1),
    (7, 9, 13),
    (64, 64, 64),
    (129, 257, 100),
    (300, 200, 1000),
    (128, 256, 65),
    (1, 300, 200),
    (333, 1, 70),
];

fn bits<T: Scalar>(x: T) -> u64 {
    // Every Scalar is plain data of at most 8 bytes.
    let mut out = [0u8; 8];
    // SAFETY: reads size_of::<T>() bytes of a Copy value.
    unsafe { core::ptr::copy_nonoverlapping(&x as *const T as *const u8, out.as_mut_ptr(), size_of::<T>()) };
    u64::from_le_bytes(out)
}

/// Runs one product of `v`'s layouts on host matrices stored with padding
/// (A, B pad 3 holding NaN; C pad 2 holding NaN) and checks it.
fn check<T: Product<C>, C: Scalar>((m, n, k): (usize, usize, usize), v: Variant, alpha: f64, beta: f64, ints: bool) {
    let (a, b) = if ints {
        (random_int_matrix::<T>(m, k, seed()), random_int_matrix::<T>(k, n, seed()))
    } else {
        (random_matrix::<T>(m, k, seed()), random_matrix::<T>(k, n, seed()))
    };
    let c0 = random_matrix::<C>(m, n, seed());
    let (sa, sb) = (store(&a, v.op_a, v.a, 3, T::NAN), store(&b, v.op_b, v.b, 3, T::NAN));
    let before = if beta == 0.0 {
        store(&Matrix::from_fn(m, n, |_, _| C::NAN), Op::N, v.c, 2, C::NAN)
    } else {
        store(&c0, Op::N, v.c, 2, C::NAN)
    };
    let mut c = before.clone();
    let what = format!("{} x {} -> {} {m}x{n}x{k} {v} alpha {alpha} beta {beta}", T::NAME, T::NAME, C::NAME);
    Gemm::new()
        .op_a(v.op_a)
        .op_b(v.op_b)
        .alpha(alpha)
        .beta(beta)
        .run(&sa, &sb, &mut c)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let r = Reference::new_mixed(alpha, &a, &b, beta, &c0);
    let cmp = r.compare(&c);
    if ints && alpha == 1.0 && beta == 0.0 {
        assert!(cmp.passed() && cmp.max_abs_error == 0.0, "{what}: exact products expected: {cmp}");
    } else {
        assert!(cmp.passed(), "{what}: {cmp}");
    }
    // Padding: bit for bit as before.
    let outside = before.as_slice().iter().zip(c.as_slice()).enumerate().find(|(o, (x, y))| {
        let (i, j) = match v.c {
            Layout::RowMajor => (o / c.ld(), o % c.ld()),
            Layout::ColMajor => (o % c.ld(), o / c.ld()),
        };
        (i >= m || j >= n) && bits(**x) != bits(**y)
    });
    assert!(outside.is_none(), "{what}: C's padding changed at storage index {:?}", outside.map(|o| o.0));
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn integer_products_are_exact_in_every_layout() {
    let _ = device();
    let variants = Variant::all();
    for (i, &shape) in SHAPES.iter().enumerate() {
        for j in 0..4 {
            let v = variants[(i * 4 + j) % variants.len()];
            check::<f16, f32>(shape, v, 1.0, 0.0, true);
            check::<bf16, f32>(shape, v, 1.0, 0.0, true);
        }
    }
    // The 128 x 256 tile (a C with at least one such block per SM) in every layout.
    let sms = device().sm_count();
    let big = (1024, 128 * 33 + 7, 200);
    assert_eq!(warpgroup_kernel(WgmmaTypes::F16F32, big.0, big.1, sms).tile.bn, 256);
    for v in variants.iter().step_by(3) {
        check::<f16, f32>(big, *v, 1.0, 0.0, true);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn random_products_are_within_the_bound_for_every_type_pair() {
    let _ = device();
    let variants = Variant::all();
    for (i, &shape) in SHAPES.iter().enumerate() {
        let v = variants[(7 * i + 3) % variants.len()];
        for (alpha, beta) in [(1.0, 0.0), (-1.5, 0.5), (0.7, 1.0)] {
            check::<f16, f16>(shape, v, alpha, beta, false);
            check::<f16, f32>(shape, v, alpha, beta, false);
            check::<bf16, bf16>(shape, v, alpha, beta, false);
            check::<bf16, f32>(shape, v, alpha, beta, false);
        }
    }
    check::<f16, f32>((1000, 1000, 4096), Variant::NN, 1.0, 0.0, false);
    check::<bf16, bf16>((513, 2000, 777), Variant::all()[13], 2.0, -1.0, false);
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn device_matrices_hgemm_and_determinism() {
    let dev = device();
    let (m, n, k) = (777, 1234, 999);
    let a = random_matrix::<f16>(m, k, seed());
    let b = random_matrix::<f16>(k, n, seed());
    let da = DeviceMatrix::from_host(&dev, &a).unwrap();
    let db = DeviceMatrix::from_host(&dev, &b).unwrap();
    let mut dc = DeviceMatrix::<f32>::zeros(&dev, m, n).unwrap();
    Gemm::new().run_device(&da, &db, &mut dc).unwrap();
    let first = dc.to_host().unwrap();
    let r = Reference::new_mixed(1.0, &a, &b, 0.0, &Matrix::<f32>::zeros(m, n));
    let cmp = r.compare(&first);
    assert!(cmp.passed(), "device f16 -> f32: {cmp}");
    for _ in 0..3 {
        Gemm::new().run_device(&da, &db, &mut dc).unwrap();
        let again = dc.to_host().unwrap();
        assert!(
            first.as_slice().iter().zip(again.as_slice()).all(|(x, y)| x.to_bits() == y.to_bits()),
            "not deterministic"
        );
    }
    // hgemm on host matrices: f16 C.
    let mut c = Matrix::<f16>::filled(m, n, f16::NAN);
    gemm::hgemm(&a, &b, &mut c).unwrap();
    let cmp = Reference::new_mixed(1.0, &a, &b, 0.0, &Matrix::<f16>::zeros(m, n)).compare(&c);
    assert!(cmp.passed(), "hgemm: {cmp}");
    // Transposed device views.
    let mut dct = DeviceMatrix::<f32>::zeros(&dev, n, m).unwrap();
    Gemm::new().run_device(db.as_view().t(), da.as_view().t(), &mut dct).unwrap();
    let ct = dct.to_host().unwrap();
    let cmp = Reference::new_mixed(1.0, b.t(), a.t(), 0.0, &Matrix::<f32>::zeros(n, m)).compare(&ct);
    assert!(cmp.passed(), "device transposed views: {cmp}");
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn k_zero_alpha_zero_and_errors() {
    let _ = device();
    let a = random_matrix::<bf16>(50, 0, seed());
    let b = random_matrix::<bf16>(0, 70, seed());
    let c0 = random_matrix::<f32>(50, 70, seed());
    let mut c = c0.clone();
    Gemm::new().beta(0.5).run(&a, &b, &mut c).unwrap();
    assert!(c.as_slice().iter().zip(c0.as_slice()).all(|(x, y)| *x == 0.5 * y), "k = 0: C = beta C");
    let a = random_matrix::<bf16>(50, 30, seed());
    let b = random_matrix::<bf16>(30, 70, seed());
    let mut c = Matrix::<f32>::filled(50, 70, f32::NAN);
    Gemm::new().alpha(0.0).run(&a, &b, &mut c).unwrap();
    assert!(c.as_slice().iter().all(|x| *x == 0.0), "alpha = 0, beta = 0: C = 0 without reading it");
    // Options of stages 1-8 are refused with a typed error, C untouched.
    let mut c = c0.clone();
    let e = Gemm::new().split_k(4).run(&a, &b, &mut c).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    assert_eq!(c, c0);
    let e = Gemm::new().run(&a, &random_matrix::<bf16>(31, 70, seed()), &mut c).unwrap_err();
    assert!(matches!(e, Error::Shape(_)), "{e}");
    // op views of a column-major operand.
    let at = store(&a, Op::T, Layout::ColMajor, 5, bf16::NAN);
    let mut c = Matrix::<f32>::zeros(50, 70);
    Gemm::new().op_a(Op::T).run(&at, &b, &mut c).unwrap();
    let cmp = Reference::new_mixed(1.0, op_view(&at, Op::T), &b, 0.0, &Matrix::<f32>::zeros(50, 70)).compare(&c);
    assert!(cmp.passed(), "op(A) = A^T, column-major: {cmp}");
}
