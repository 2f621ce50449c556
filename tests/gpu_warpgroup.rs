//! GPU tests of stage 9 (Hopper warpgroup MMA and TMA): f16 and bf16
//! operands with f32 accumulation, C in f16, bf16 or f32; f32 operands on
//! TF32 tensor cores (`Gemm::allow_tf32`); i8 operands with i32
//! accumulation and C.
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
//! - TF32: random operands against `Reference::new_tf32` (the bound above
//!   plus 2^-9 + 2^-20 of |alpha| |A||B| for the inputs' reduction to TF32)
//!   in every layout, every route of an MN-major operand (A through
//!   registers; B by the transposed product; both: B's K-major copy), and
//!   a product that tells TF32 from f32 apart: TF32 only when asked.
//! - i8: every layout, integer alpha and beta, exactly equal to the
//!   reference (full-range inputs, no overflow at these k); non-integer
//!   alpha refused.
//! - Split-K (a product with few block tiles and a long k: slices into a
//!   workspace, summed in order) is exercised by the long-k shapes above
//!   and checked for the bound and run-to-run bits.
//! - Device matrices, run to run determinism, k = 0 and alpha = 0, errors.
//! - No stage-9 kernel uses local memory after the driver's JIT.
//!
//! They need an NVIDIA GPU of compute capability 9.0: ignored by default,
//! run with `--include-ignored`; elsewhere they fail, never pass.

mod common;

use common::{device, op_view, seed, store, Variant};
use gemm::check::{random_int_matrix, random_matrix, Reference};
use gemm::float8::F8E4M3;
use gemm::half::{bf16, f16};
use gemm::tuning::{warpgroup_plan, Flavour, WgmmaTypes};
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

/// The stored A and B of `v` (pad 3 holding NaN) and C before the call
/// (pad 2 holding NaN; all NaN when beta = 0, which never reads it).
fn stored<T: Scalar, C: Scalar>(
    (a, b, c0): (&Matrix<T>, &Matrix<T>, &Matrix<C>),
    v: Variant,
    beta: f64,
) -> (Matrix<T>, Matrix<T>, Matrix<C>) {
    let (m, n) = (c0.rows(), c0.cols());
    let (sa, sb) = (store(a, v.op_a, v.a, 3, T::POISON), store(b, v.op_b, v.b, 3, T::POISON));
    let before = if beta == 0.0 {
        store(&Matrix::from_fn(m, n, |_, _| C::POISON), Op::N, v.c, 2, C::POISON)
    } else {
        store(c0, Op::N, v.c, 2, C::POISON)
    };
    (sa, sb, before)
}

/// The CPU reference of `alpha A B + beta C0`: mixed precision, or TF32's
/// for f32 operands (T and C are then f32: the same values, as f32).
fn reference<T: Scalar, C: Scalar>(
    alpha: f64,
    (a, b): (&Matrix<T>, &Matrix<T>),
    beta: f64,
    c0: &Matrix<C>,
) -> Reference {
    if T::NAME == "f32" {
        let f = |x: &Matrix<T>| Matrix::<f32>::from_fn(x.rows(), x.cols(), |i, j| x[(i, j)].as_f64() as f32);
        let h = |x: &Matrix<C>| Matrix::<f32>::from_fn(x.rows(), x.cols(), |i, j| x[(i, j)].as_f64() as f32);
        Reference::new_tf32(alpha, &f(a), &f(b), beta, &h(c0))
    } else {
        Reference::new_mixed(alpha, a, b, beta, c0)
    }
}

/// C's padding (outside its m x n, stored as `v.c` says) bit for bit as
/// `before`.
fn padding_unchanged<C: Scalar>(before: &Matrix<C>, c: &Matrix<C>, v: Variant, (m, n): (usize, usize), what: &str) {
    let outside = before.as_slice().iter().zip(c.as_slice()).enumerate().find(|(o, (x, y))| {
        let (i, j) = match v.c {
            Layout::RowMajor => (o / c.ld(), o % c.ld()),
            Layout::ColMajor => (o % c.ld(), o / c.ld()),
        };
        (i >= m || j >= n) && bits(**x) != bits(**y)
    });
    assert!(outside.is_none(), "{what}: C's padding changed at storage index {:?}", outside.map(|o| o.0));
}

/// Runs one product of `v`'s layouts on host matrices stored with padding
/// (A, B pad 3 holding NaN; C pad 2 holding NaN) and checks it.
fn check<T: Product<C>, C: Scalar>((m, n, k): (usize, usize, usize), v: Variant, alpha: f64, beta: f64, ints: bool) {
    check_with::<T, C>(Gemm::new(), (m, n, k), v, alpha, beta, ints)
}

/// [`check`] with the builder `g` (op flags, alpha and beta set here); f32
/// operands are checked as a TF32 product.
fn check_with<T: Product<C>, C: Scalar>(
    g: Gemm,
    (m, n, k): (usize, usize, usize),
    v: Variant,
    alpha: f64,
    beta: f64,
    ints: bool,
) {
    let (a, b) = if ints {
        (random_int_matrix::<T>(m, k, seed()), random_int_matrix::<T>(k, n, seed()))
    } else {
        (random_matrix::<T>(m, k, seed()), random_matrix::<T>(k, n, seed()))
    };
    let c0 = random_matrix::<C>(m, n, seed());
    let (sa, sb, before) = stored::<T, C>((&a, &b, &c0), v, beta);
    let mut c = before.clone();
    let what = format!("{} x {} -> {} {m}x{n}x{k} {v} alpha {alpha} beta {beta}", T::NAME, T::NAME, C::NAME);
    g.op_a(v.op_a).op_b(v.op_b).alpha(alpha).beta(beta).run(&sa, &sb, &mut c).unwrap_or_else(|e| panic!("{what}: {e}"));
    let r = reference::<T, C>(alpha, (&a, &b), beta, &c0);
    let cmp = r.compare(&c);
    if ints && alpha == 1.0 && beta == 0.0 {
        assert!(cmp.passed() && cmp.max_abs_error == 0.0, "{what}: exact products expected: {cmp}");
    } else {
        assert!(cmp.passed(), "{what}: {cmp}");
    }
    padding_unchanged(&before, &c, v, (m, n), &what);
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
    // The 128 x 256 tile (a shape the planner gives it) in every layout.
    let sms = device().sm_count();
    let big = (700, 128 * 31 + 7, 200);
    assert_eq!(warpgroup_plan(WgmmaTypes::F16F32, big.0, big.1, big.2, 1, sms).kernel.tile.bn, 256);
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

/// Every tile family of the menu (128 x 256, 128 x 128, 128 x 64, 64 x 256)
/// on a shape the planner gives it, for each type pair with that tile: the
/// first of a list of shapes, skinny to square, whose plan picks the tile.
#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn every_tile_family_is_within_the_bound() {
    let sms = device().sm_count();
    let mut candidates = Vec::new();
    for m in [16, 40, 130, 700, 2048, 3000] {
        for n in [24, 72, 700, 2048, 4000, 3000] {
            for k in [128, 700, 3000] {
                if m * n * k <= 1 << 31 {
                    candidates.push((m, n, k));
                }
            }
        }
    }
    let variants = Variant::all();
    for (i, family) in gemm::tuning::WARPGROUP_KERNELS.iter().enumerate() {
        // A family with fused kernels only (a `fused_only` line) serves
        // fused products only: gpu_epilogue's.
        if family.names.iter().all(Option::is_none) {
            continue;
        }
        let shape = candidates.iter().copied().find(|&(m, n, k)| {
            let p = warpgroup_plan(family.types, m, n, k, 1, sms);
            p.kernel.tile == family.tile && p.kernel.types == family.types
        });
        let Some(shape) = shape else {
            panic!("no candidate shape picks {:?} for {:?}: extend the list", family.tile, family.types);
        };
        let v = variants[(7 * i) % variants.len()];
        let (alpha, beta) = [(1.0, 0.0), (-1.5, 0.5), (0.7, 1.0)][i % 3];
        match family.types {
            WgmmaTypes::F16 => check::<f16, f16>(shape, v, alpha, beta, false),
            WgmmaTypes::F16F32 => check::<f16, f32>(shape, v, alpha, beta, false),
            WgmmaTypes::Bf16 => check::<bf16, bf16>(shape, v, alpha, beta, false),
            WgmmaTypes::Bf16F32 => check::<bf16, f32>(shape, v, alpha, beta, false),
            WgmmaTypes::Tf32 => check_with::<f32, f32>(Gemm::new().allow_tf32(true), shape, v, alpha, beta, false),
            WgmmaTypes::S8 => check::<i8, i32>(shape, v, -2.0, 3.0, false),
            WgmmaTypes::E4m3Bf16 => check::<F8E4M3, bf16>(shape, v, alpha, beta, false),
            WgmmaTypes::E4m3F16 => check::<F8E4M3, f16>(shape, v, alpha, beta, false),
            WgmmaTypes::E4m3F32 => check::<F8E4M3, f32>(shape, v, alpha, beta, false),
            // The e4m3 x e5m2 pairs (one tile): gpu_fp8's mixed-format test,
            // every layout, both ways.
            _ => {}
        }
    }
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
    // Split-K (few block tiles, long k): within the bound, the same bits every run.
    let (m2, n2, k2) = (200, 250, 12000);
    assert!(warpgroup_plan(WgmmaTypes::F16, m2, n2, k2, 1, dev.sm_count()).split.0 > 1);
    let a2 = random_matrix::<f16>(m2, k2, seed());
    let b2 = random_matrix::<f16>(k2, n2, seed());
    let c2 = random_matrix::<f16>(m2, n2, seed());
    let mut runs = Vec::new();
    for _ in 0..3 {
        let mut c = c2.clone();
        Gemm::new().alpha(0.5).beta(-2.0).run(&a2, &b2, &mut c).unwrap();
        runs.push(c);
    }
    let cmp = Reference::new_mixed(0.5, &a2, &b2, -2.0, &c2).compare(&runs[0]);
    assert!(cmp.passed(), "split-K f16: {cmp}");
    assert!(
        runs.iter().all(|r| r.as_slice().iter().zip(runs[0].as_slice()).all(|(x, y)| x.to_bits() == y.to_bits())),
        "split-K not deterministic"
    );

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

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn tf32_products_are_within_the_bound_in_every_layout() {
    let _ = device();
    let tf32 = || Gemm::new().allow_tf32(true);
    for (i, v) in Variant::all().into_iter().enumerate() {
        let shape = SHAPES[i % SHAPES.len()];
        let (alpha, beta) = [(1.0, 0.0), (-1.5, 0.5), (0.7, 1.0)][i % 3];
        check_with::<f32, f32>(tf32(), shape, v, alpha, beta, false);
    }
    // The 128 x 256 tile, an MN-major B (the transposed product) and a long k.
    check_with::<f32, f32>(tf32(), (1024, 128 * 33 + 7, 300), Variant::NN, 1.0, 0.0, false);
    check_with::<f32, f32>(tf32(), (200, 300, 5000), Variant::all()[5], 1.0, 0.0, false);

    // TF32 only when asked: 1 + 2^-20 has no TF32 form (10 mantissa bits),
    // so the TF32 product of it and 1 is 1 (truncated or rounded), the f32
    // product 1 + 2^-20.
    let x = 1.0f32 + 2f32.powi(-20);
    let a = Matrix::<f32>::filled(64, 64, x);
    let b = Matrix::<f32>::from_fn(64, 64, |i, j| if i == j { 1.0 } else { 0.0 });
    let mut c = Matrix::<f32>::zeros(64, 64);
    Gemm::new().run(&a, &b, &mut c).unwrap();
    assert!(c.as_slice().iter().all(|&y| y == x), "f32 by default: the exact product");
    tf32().run(&a, &b, &mut c).unwrap();
    assert!(c.as_slice().iter().all(|&y| y == 1.0), "allow_tf32: the TF32 product");
    // An option of stages 1-8 keeps the f32 kernels.
    tf32().stage(gemm::tuning::Stage::Pipelined).run(&a, &b, &mut c).unwrap();
    assert!(c.as_slice().iter().all(|&y| y == x), "allow_tf32 with .stage(..): the f32 kernels");
}

/// The three routes of an MN-major tf32 operand on stage 9, by kernel
/// layouts: A MN-major (read through registers in place), B MN-major with A
/// K-major (the transposed product, C written transposed), both MN-major
/// (B's K-major copy, A through registers); each with odd sizes, with beta,
/// with split-K (few block tiles, a long k) and in a batch whose A is
/// shared (stride 0).
#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn tf32_mn_major_operands_in_every_route() {
    let _ = device();
    let tf32 = || Gemm::new().allow_tf32(true);
    // Few block tiles and k of 4000: split-K (checked below).
    let split = (64, 96, 4000);
    assert!(warpgroup_plan(WgmmaTypes::Tf32, split.1, split.0, split.2, 1, 132).split.0 > 1);
    for v in Variant::all() {
        let kl = v.kernel_layouts();
        if kl.a == Layout::RowMajor && kl.b == Layout::ColMajor {
            continue; // both K-major: the other tests
        }
        for (shape, alpha, beta) in [((129, 257, 100), 1.0, 0.0), ((67, 33, 45), -1.5, 0.5), (split, 0.7, 1.0)] {
            check_with::<f32, f32>(tf32(), shape, v, alpha, beta, false);
        }
    }
    for b_layout in [Layout::RowMajor, Layout::ColMajor] {
        check_strided::<f32, f32>(tf32(), 4, (100, 70, 130), true, b_layout, 1.0, 0.0);
        check_strided::<f32, f32>(tf32(), 3, (33, 200, 64), false, b_layout, -1.0, 2.0);
    }
}

/// Every stage-9 kernel (plain, fused, and fused without block scales), after the driver's JIT on this device: no local
/// memory (no spills), and resident (one block per SM at least). The fused FP8 kernels of
/// 128 x 256 (128 promoted sums and 64 wgmma accumulators a thread) may keep up to 96 bytes
/// (`_fused`; into f16, in the fused epilogue's paths) or 8 (`_epilogue`) in local memory, stored
/// before the k-loop or in the epilogue and reloaded in the epilogue; none in the k-loop (the
/// spills `cargo xtask ptxas` accepts, with their reason).
#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn no_warpgroup_kernel_uses_local_memory() {
    let dev = device();
    let mut offenders = Vec::new();
    let mut seen = 0;
    for kernel in gemm::tuning::WARPGROUP_KERNELS {
        for (layout, flavour) in
            (0..4).flat_map(|l| [Flavour::Plain, Flavour::Fused, Flavour::Epilogue].map(|f| (l, f)))
        {
            if let Some(info) = dev.warpgroup_flavour_info(kernel, layout, flavour).unwrap() {
                seen += 1;
                let wide = info.name.contains("_b128x256_d4_");
                let fp8 = info.name.starts_with("wgmma_e");
                let allowed = match flavour {
                    Flavour::Fused if wide && fp8 => 96,
                    Flavour::Epilogue if wide && fp8 => 8,
                    _ => 0,
                };
                if info.local_bytes > allowed || info.blocks_per_sm == 0 {
                    offenders.push(format!(
                        "{}: {} bytes of local memory, {} registers, {} blocks/SM",
                        info.name, info.local_bytes, info.registers, info.blocks_per_sm
                    ));
                }
            }
        }
    }
    assert!(seen >= gemm::tuning::WARPGROUP_KERNELS.len(), "{seen} kernels");
    assert!(offenders.is_empty(), "stage-9 kernels with local memory or no residency:\n{}", offenders.join("\n"));
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn i8_products_are_exact_in_every_layout() {
    let dev = device();
    for (i, v) in Variant::all().into_iter().enumerate() {
        let shape = SHAPES[i % SHAPES.len()];
        let (alpha, beta) = [(1.0, 0.0), (-3.0, 2.0), (2.0, 1.0)][i % 3];
        check::<i8, i32>(shape, v, alpha, beta, false);
    }
    check::<i8, i32>((1024, 128 * 33 + 7, 1000), Variant::NN, 1.0, 0.0, false);
    check::<i8, i32>((300, 200, 4099), Variant::all()[9], 1.0, 0.0, false);

    // igemm and device matrices, run twice: the same bits.
    let (m, n, k) = (517, 1030, 333);
    let a = random_matrix::<i8>(m, k, seed());
    let b = random_matrix::<i8>(k, n, seed());
    let mut c = Matrix::<i32>::filled(m, n, i32::MIN);
    gemm::igemm(&a, &b, &mut c).unwrap();
    let r = Reference::new_mixed(1.0, &a, &b, 0.0, &Matrix::<i32>::zeros(m, n));
    let cmp = r.compare(&c);
    assert!(cmp.passed() && cmp.max_abs_error == 0.0, "igemm: {cmp}");
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut dc = DeviceMatrix::<i32>::zeros(&dev, m, n).unwrap();
    Gemm::new().run_device(&da, &db, &mut dc).unwrap();
    assert_eq!(dc.to_host().unwrap(), c, "device i8 product");

    // alpha and beta are i32: a fraction is refused, C untouched.
    let c0 = c.clone();
    let e = Gemm::new().alpha(0.5).run(&a, &b, &mut c).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    assert_eq!(c, c0);
}

/// Stage 8's mixed-precision kernels (`mma.sync`, the path of compute
/// capability 8.x), asked for with `.stage(Stage::TensorCore)`.
fn mma_sync() -> Gemm {
    Gemm::new().stage(gemm::tuning::Stage::TensorCore)
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn stage8_integer_products_are_exact_in_every_layout() {
    let _ = device();
    let variants = Variant::all();
    for (i, &shape) in SHAPES.iter().enumerate() {
        for j in 0..4 {
            let v = variants[(i * 4 + j) % variants.len()];
            check_with::<f16, f32>(mma_sync(), shape, v, 1.0, 0.0, true);
            check_with::<bf16, f32>(mma_sync(), shape, v, 1.0, 0.0, true);
        }
    }
    // The 128 x 256 tile (a C with at least one such block per SM) in every layout.
    let sms = device().sm_count();
    let big = (1024, 128 * 33 + 7, 200);
    assert_eq!(
        gemm::tuning::mma_kernel(WgmmaTypes::F16F32, big.0, big.1, sms, device().limits().max_smem_per_block).tile.bn,
        256
    );
    for v in variants.iter().step_by(3) {
        check_with::<f16, f32>(mma_sync(), big, *v, 1.0, 0.0, true);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn stage8_products_are_within_the_bound_for_every_type() {
    let dev = device();
    let variants = Variant::all();
    for (i, &shape) in SHAPES.iter().enumerate() {
        let v = variants[(7 * i + 3) % variants.len()];
        for (alpha, beta) in [(1.0, 0.0), (-1.5, 0.5), (0.7, 1.0)] {
            check_with::<f16, f16>(mma_sync(), shape, v, alpha, beta, false);
            check_with::<f16, f32>(mma_sync(), shape, v, alpha, beta, false);
            check_with::<bf16, bf16>(mma_sync(), shape, v, alpha, beta, false);
            check_with::<bf16, f32>(mma_sync(), shape, v, alpha, beta, false);
        }
    }
    check_with::<f16, f32>(mma_sync(), (1000, 1000, 4096), Variant::NN, 1.0, 0.0, false);
    // TF32 (asked for twice: allow_tf32, and stage 8) and i8, every layout
    // (MN-major operands through the K-major copy).
    for (i, v) in variants.iter().copied().enumerate() {
        let shape = SHAPES[i % SHAPES.len()];
        let (alpha, beta) = [(1.0, 0.0), (-1.5, 0.5), (0.7, 1.0)][i % 3];
        check_with::<f32, f32>(mma_sync().allow_tf32(true), shape, v, alpha, beta, false);
        let (alpha, beta) = [(1.0, 0.0), (-3.0, 2.0), (2.0, 1.0)][i % 3];
        check_with::<i8, i32>(mma_sync(), shape, v, alpha, beta, false);
    }
    check_with::<f32, f32>(mma_sync().allow_tf32(true), (1024, 128 * 33 + 7, 300), Variant::NN, 1.0, 0.0, false);
    check_with::<i8, i32>(mma_sync(), (300, 200, 4099), variants[9], 1.0, 0.0, false);

    // Device matrices, run to run: the same bits; k = 0: C = beta C.
    let (m, n, k) = (777, 1234, 999);
    let a = random_matrix::<bf16>(m, k, seed());
    let b = random_matrix::<bf16>(k, n, seed());
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut dc = DeviceMatrix::<bf16>::zeros(&dev, m, n).unwrap();
    mma_sync().run_device(&da, &db, &mut dc).unwrap();
    let first = dc.to_host().unwrap();
    let cmp = Reference::new_mixed(1.0, &a, &b, 0.0, &Matrix::<bf16>::zeros(m, n)).compare(&first);
    assert!(cmp.passed(), "stage 8 device bf16: {cmp}");
    mma_sync().run_device(&da, &db, &mut dc).unwrap();
    assert!(
        first.as_slice().iter().zip(dc.to_host().unwrap().as_slice()).all(|(x, y)| x.to_bits() == y.to_bits()),
        "stage 8 not deterministic"
    );
    let (a0, b0) = (random_matrix::<f16>(50, 0, seed()), random_matrix::<f16>(0, 70, seed()));
    let c0 = random_matrix::<f32>(50, 70, seed());
    let mut c = c0.clone();
    mma_sync().beta(0.5).run(&a0, &b0, &mut c).unwrap();
    assert!(c.as_slice().iter().zip(c0.as_slice()).all(|(x, y)| *x == 0.5 * y), "stage 8, k = 0: C = beta C");
    // Another option beside the stage is refused, C untouched.
    let e = mma_sync().pipeline_depth(3).run(&a, &b, &mut Matrix::<f32>::zeros(m, n)).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
}

/// One strided batch of `count` m x n x k products on host slices: A packed
/// row-major (or `a_stride` 0: one A for all), B in `b_layout`, C packed
/// row-major with one spare element between matrices (left as it was);
/// every product checked against the CPU reference.
#[allow(clippy::too_many_arguments)]
fn check_strided<T: Product<C>, C: Scalar>(
    g: Gemm,
    count: usize,
    (m, n, k): (usize, usize, usize),
    broadcast_a: bool,
    b_layout: Layout,
    alpha: f64,
    beta: f64,
) {
    use gemm::{MatMut, MatRef, Strided};
    let a_mats: Vec<Matrix<T>> =
        (0..if broadcast_a { 1 } else { count }).map(|_| random_matrix::<T>(m, k, seed())).collect();
    let b_mats: Vec<Matrix<T>> = (0..count).map(|_| random_matrix::<T>(k, n, seed())).collect();
    let c_mats: Vec<Matrix<C>> = (0..count).map(|_| random_matrix::<C>(m, n, seed())).collect();
    let a_data: Vec<T> = a_mats.iter().flat_map(|x| x.as_slice().to_vec()).collect();
    let b_data: Vec<T> = b_mats
        .iter()
        .flat_map(|x| match b_layout {
            Layout::RowMajor => x.as_slice().to_vec(),
            Layout::ColMajor => (0..n).flat_map(|j| (0..k).map(move |i| x[(i, j)])).collect(),
        })
        .collect();
    let c_stride = m * n + 1;
    let mut c_data = vec![C::POISON; count * c_stride];
    for (z, x) in c_mats.iter().enumerate() {
        if beta != 0.0 {
            c_data[z * c_stride..z * c_stride + m * n].copy_from_slice(x.as_slice());
        }
    }
    let before = c_data.clone();
    let a = if broadcast_a {
        Strided::new(MatRef::from_slice(&a_data, m, k, Layout::RowMajor, k).unwrap(), count, 0).unwrap()
    } else {
        Strided::from_slice(&a_data, count, m, k, Layout::RowMajor).unwrap()
    };
    let b = Strided::from_slice(&b_data, count, k, n, b_layout).unwrap();
    let c = Strided::new(MatMut::from_slice(&mut c_data, m, n, Layout::RowMajor, n).unwrap(), count, c_stride).unwrap();
    let what = format!("{} -> {} batch {count} of {m}x{n}x{k} B {b_layout:?}", T::NAME, C::NAME);
    g.alpha(alpha).beta(beta).run_strided(a, b, c).unwrap_or_else(|e| panic!("{what}: {e}"));
    for z in 0..count {
        let got = Matrix::<C>::from_vec(m, n, c_data[z * c_stride..z * c_stride + m * n].to_vec()).unwrap();
        let a = &a_mats[if broadcast_a { 0 } else { z }];
        let cmp = if T::NAME == "f32" {
            let f = |x: &Matrix<T>| Matrix::<f32>::from_fn(x.rows(), x.cols(), |i, j| x[(i, j)].as_f64() as f32);
            let h = |x: &Matrix<C>| Matrix::<f32>::from_fn(x.rows(), x.cols(), |i, j| x[(i, j)].as_f64() as f32);
            Reference::new_tf32(alpha, &f(a), &f(&b_mats[z]), beta, &h(&c_mats[z])).compare(&got)
        } else {
            Reference::new_mixed(alpha, a, &b_mats[z], beta, &c_mats[z]).compare(&got)
        };
        assert!(cmp.passed(), "{what}: product {z}: {cmp}");
        assert_eq!(bits(c_data[z * c_stride + m * n]), bits(before[z * c_stride + m * n]), "{what}: padding");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn strided_batches_of_every_type_on_both_stages() {
    let dev = device();
    for g in [Gemm::new(), mma_sync()] {
        check_strided::<f16, f32>(g.clone(), 5, (70, 130, 90), false, Layout::RowMajor, 1.0, 0.0);
        check_strided::<f16, f16>(g.clone(), 3, (129, 64, 200), true, Layout::ColMajor, -1.5, 0.5);
        check_strided::<bf16, bf16>(g.clone(), 4, (33, 257, 64), true, Layout::RowMajor, 0.7, 1.0);
        check_strided::<bf16, f32>(g.clone(), 2, (300, 300, 300), false, Layout::ColMajor, 1.0, 0.0);
        check_strided::<f32, f32>(g.clone().allow_tf32(true), 3, (65, 66, 67), false, Layout::RowMajor, 1.0, 0.0);
        check_strided::<i8, i32>(g.clone(), 6, (40, 48, 96), false, Layout::ColMajor, 2.0, -1.0);
        check_strided::<i8, i32>(g.clone(), 3, (17, 19, 23), true, Layout::RowMajor, 1.0, 0.0);
    }
    // Device batch: one call, the same as product by product.
    let (count, m, n, k) = (7, 100, 200, 300);
    let a = random_matrix::<f16>(count * m, k, seed());
    let b = random_matrix::<f16>(k, n, seed());
    // The first matrix of each batch viewed over the whole buffer.
    let s = dev.stream();
    let da =
        DeviceMatrix::from_cuda_slice(&dev, s.clone_htod(a.as_slice()).unwrap(), m, k, Layout::RowMajor, k).unwrap();
    let db = DeviceMatrix::from_host(&dev, &b).unwrap();
    let c_buf = s.alloc_zeros::<f32>(count * m * n).unwrap();
    let mut dc = DeviceMatrix::from_cuda_slice(&dev, c_buf, m, n, Layout::RowMajor, n).unwrap();
    {
        use gemm::Strided;
        let sa = Strided::new(&da, count, m * k).unwrap();
        let sb = Strided::new(&db, count, 0).unwrap();
        let sc = Strided::new(&mut dc, count, m * n).unwrap();
        Gemm::new().run_strided_device(sa, sb, sc).unwrap();
    }
    // (count m) x k times k x n is the same product stacked.
    let mut got = vec![0f32; count * m * n];
    s.memcpy_dtoh(&dc.into_cuda_slice(), &mut got).unwrap();
    let got = Matrix::from_vec(count * m, n, got).unwrap();
    let cmp = Reference::new_mixed(1.0, &a, &b, 0.0, &Matrix::<f32>::zeros(count * m, n)).compare(&got);
    assert!(cmp.passed(), "device strided f16 batch: {cmp}");
}

/// One list batch of the mixed types: every product within the bound
/// (exact where C's type holds the integer result) and, with `same_bits`,
/// bit for bit what a single `run_device` of it gives (a batch's products
/// are not split along k: compare only where a single run is not either).
fn check_list<T: Product<C>, C: Scalar>(shapes: &[(usize, usize, usize)], b_layout: Layout, pointer_array: bool) {
    check_list_in::<T, C>(shapes, b_layout, pointer_array, true)
}

fn check_list_in<T: Product<C>, C: Scalar>(
    shapes: &[(usize, usize, usize)],
    b_layout: Layout,
    pointer_array: bool,
    same_bits: bool,
) {
    let dev = device();
    let a: Vec<Matrix<T>> = shapes.iter().map(|&(m, _, k)| random_int_matrix::<T>(m, k, seed())).collect();
    let b: Vec<Matrix<T>> = shapes
        .iter()
        .map(|&(_, n, k)| {
            let x = random_int_matrix::<T>(k, n, seed());
            Matrix::from_fn_in(k, n, b_layout, |i, j| x.get(i, j).unwrap())
        })
        .collect();
    let da: Vec<_> = a.iter().map(|x| DeviceMatrix::from_host(&dev, x).unwrap()).collect();
    let db: Vec<_> = b.iter().map(|x| DeviceMatrix::from_host(&dev, x).unwrap()).collect();
    let poison = |m: usize, n: usize| Matrix::<C>::filled(m, n, C::from_f64(f64::NAN));
    let mut dc: Vec<_> =
        shapes.iter().map(|&(m, n, _)| DeviceMatrix::from_host(&dev, &poison(m, n)).unwrap()).collect();
    let av: Vec<_> = da.iter().map(|x| x.as_view()).collect();
    let bv: Vec<_> = db.iter().map(|x| x.as_view()).collect();
    let mut cv: Vec<_> = dc.iter_mut().map(|x| x.as_view_mut()).collect();
    let stream = dev.context().new_stream().unwrap();
    let g = Gemm::new().stream(&stream);
    if pointer_array { g.run_batched_device(&av, &bv, &mut cv) } else { g.run_grouped_device(&av, &bv, &mut cv) }
        .unwrap();
    stream.synchronize().unwrap();
    drop(cv);
    for (i, &(m, n, _)) in shapes.iter().enumerate() {
        let got = dc[i].to_host().unwrap();
        let want = Reference::new_mixed(1.0, &a[i], &b[i], 0.0, &Matrix::<C>::zeros(m, n));
        let cmp = want.compare(&got);
        assert!(cmp.passed(), "product {i} of {shapes:?}: {cmp}");
        if !same_bits {
            continue;
        }
        let mut one = DeviceMatrix::from_host(&dev, &poison(m, n)).unwrap();
        Gemm::new().run_device(&da[i], &db[i], &mut one).unwrap();
        let single = one.to_host().unwrap();
        assert!(
            got.as_slice().iter().zip(single.as_slice()).all(|(x, y)| bits(*x) == bits(*y)),
            "product {i}: the batch and a single run differ"
        );
    }
}

/// The mixed types through the list batches: a mixture-of-experts layer
/// in bf16 (8 experts, one with no rows, the weight in either layout) as
/// a grouped batch, into f32 and bf16; pointer-array f16 -> f16, i8 -> i32
/// and TF32.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn grouped_and_pointer_array_batches_of_every_type() {
    let experts: Vec<(usize, usize, usize)> =
        [37, 0, 128, 5, 300, 64, 1, 200].iter().map(|&rows| (rows, 96, 80)).collect();
    for b_layout in [Layout::RowMajor, Layout::ColMajor] {
        check_list::<bf16, f32>(&experts, b_layout, false);
        check_list::<bf16, bf16>(&experts, b_layout, false);
        check_list::<f16, f32>(&experts, b_layout, false);
    }
    // Many experts in one grouped launch: 70, rows 0..=300 (several empty),
    // k of 8 and more k-tiles (single runs of the small ones split k, a
    // batch does not: compared with the bound only).
    let mut r = 0x9e37_79b9_u64;
    let many: Vec<(usize, usize, usize)> = (0..70)
        .map(|e| {
            r = r.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let rows = if e % 9 == 4 { 0 } else { ((r >> 33) % 301) as usize };
            (rows, 136, 520)
        })
        .collect();
    check_list_in::<bf16, bf16>(&many, Layout::ColMajor, false, false);
    check_list_in::<f16, f32>(&many, Layout::RowMajor, false, false);
    let same = [(129, 68, 255); 4];
    check_list::<f16, f16>(&same, Layout::RowMajor, true);
    check_list::<i8, i32>(&same, Layout::ColMajor, true);
    check_list::<i8, i32>(&same, Layout::RowMajor, true);
    // Errors: lengths, shapes, before anything runs.
    let dev = device();
    let x = DeviceMatrix::from_host(&dev, &Matrix::<f16>::zeros(8, 8)).unwrap();
    let y = DeviceMatrix::from_host(&dev, &Matrix::<f16>::zeros(8, 4)).unwrap();
    let mut z: Vec<_> = (0..2).map(|_| DeviceMatrix::<f32>::zeros(&dev, 8, 8).unwrap()).collect();
    let mut zv: Vec<_> = z.iter_mut().map(|m| m.as_view_mut()).collect();
    let e = Gemm::new().run_batched_device(&[x.as_view()], &[x.as_view(), x.as_view()], &mut zv).unwrap_err();
    assert!(matches!(e, Error::BatchCount { .. }), "{e}");
    let e =
        Gemm::new().run_grouped_device(&[x.as_view(), y.as_view()], &[x.as_view(), x.as_view()], &mut zv).unwrap_err();
    assert!(matches!(e, Error::Problem { index: 1, .. }), "{e}");
}

/// A grouped launch on one stream orders its use of the caller's buffers
/// with work on other streams (cudarc's event tracking): right after the
/// call, another stream zeroes every A (it must wait until the kernel has
/// read them) and copies every C to the host (it must see the products).
/// With the use recorded before the launch, as it once was, nothing made the
/// other stream wait for the kernel. All-ones operands: every element of C
/// is k, exactly; C starts as NaN. On the NVIDIA H200 this was written on
/// (2026-11-26) the test passed with the old order too: that machine ran
/// the two streams' work one after the other, so there it cannot show the
/// race; it guards the order on GPUs that overlap the streams.
#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn grouped_launch_is_ordered_with_other_streams() {
    let dev = device();
    let ctx = dev.context();
    let (s1, s2) = (ctx.new_stream().unwrap(), ctx.new_stream().unwrap());
    // 32 experts of 1024 x 4096 x 4096: about a millisecond of kernel.
    let (experts, m, n, k) = (32, 1024, 4096, 4096);
    let one = bf16::from_f32(1.0);
    let mut a: Vec<_> =
        (0..experts).map(|_| DeviceMatrix::from_host(&dev, &Matrix::filled(m, k, one)).unwrap()).collect();
    let b = DeviceMatrix::from_host(&dev, &Matrix::filled(k, n, one)).unwrap();
    let mut c: Vec<_> =
        (0..experts).map(|_| DeviceMatrix::from_host(&dev, &Matrix::filled(m, n, f32::NAN)).unwrap()).collect();
    dev.synchronize().unwrap();
    {
        let av: Vec<_> = a.iter().map(|x| x.as_view()).collect();
        let bv: Vec<_> = (0..experts).map(|_| b.as_view()).collect();
        let mut cv: Vec<_> = c.iter_mut().map(|x| x.as_view_mut()).collect();
        Gemm::new().stream(&s1).run_grouped_device(&av, &bv, &mut cv).unwrap();
    }
    // Another stream, without waiting on the host.
    for x in a.iter_mut() {
        s2.memset_zeros(x.buffer_mut()).unwrap();
    }
    let got: Vec<Vec<f32>> = c.iter().map(|x| s2.clone_dtoh(x.buffer()).unwrap()).collect();
    s2.synchronize().unwrap();
    for (e, values) in got.iter().enumerate() {
        let wrong = values.iter().position(|&v| v != k as f32);
        assert!(wrong.is_none(), "expert {e}: C[{:?}] = {:?}, expected {k}", wrong, wrong.map(|i| values[i]));
    }
    // And C on its own stream: the same.
    for (e, x) in c.iter().enumerate() {
        let host = x.to_host().unwrap();
        assert!(host.as_slice().iter().all(|&v| v == k as f32), "expert {e} read back on the device's stream");
    }
}

/// A product whose block tiles leave the last wave partly empty, on device
/// matrices of `v`'s layouts with padding (A, B pad 3 holding NaN; C pad 2
/// holding NaN): the planner splits it in two (`warpgroup_tail`: the first
/// rows of C whole, the other rows' k in slices into a workspace); the
/// result within the bound, C's padding bit for bit, a NaN-poisoned C with
/// beta = 0 overwritten, the same bits on a second run. Takes the first of
/// `shapes` that the planner tail-splits in both orientations (m x n and
/// n x m: whichever the route runs) on this device, and fails when none
/// does (the test must exercise the split); `plan_for` must say so.
fn check_tail<T: Product<C>, C: Scalar>(
    types: WgmmaTypes,
    g: Gemm,
    shapes: &[(usize, usize, usize)],
    v: Variant,
    (alpha, beta): (f64, f64),
) {
    let dev = device();
    let g = g.op_a(v.op_a).op_b(v.op_b).alpha(alpha).beta(beta);
    let tail = |m, n, k| warpgroup_plan(types, m, n, k, 1, dev.sm_count()).tail.is_some();
    let &(m, n, k) = shapes
        .iter()
        .find(|&&(m, n, k)| tail(m, n, k) && tail(n, m, k))
        .unwrap_or_else(|| panic!("no tail split among {shapes:?}"));
    if v == Variant::NN && types != WgmmaTypes::Tf32 {
        let why = g.clone().plan_for::<T, C>(m, n, k).unwrap().why;
        assert!(why.contains("last wave balanced"), "{m}x{n}x{k}: plan_for says {why}");
    }
    let (a, b) = (random_matrix::<T>(m, k, seed()), random_matrix::<T>(k, n, seed()));
    let c0 = random_matrix::<C>(m, n, seed());
    let (sa, sb, before) = stored::<T, C>((&a, &b, &c0), v, beta);
    let what = format!("tail split {} -> {} {m}x{n}x{k} {v} alpha {alpha} beta {beta}", T::NAME, C::NAME);
    let (da, db) = (DeviceMatrix::from_host(&dev, &sa).unwrap(), DeviceMatrix::from_host(&dev, &sb).unwrap());
    let run = || {
        let mut dc = DeviceMatrix::from_host(&dev, &before).unwrap();
        g.run_device(&da, &db, &mut dc).unwrap_or_else(|e| panic!("{what}: {e}"));
        dc.to_host().unwrap()
    };
    let c = run();
    let r = reference::<T, C>(alpha, (&a, &b), beta, &c0);
    let cmp = r.compare(&c);
    assert!(cmp.passed(), "{what}: {cmp}");
    padding_unchanged(&before, &c, v, (m, n), &what);
    let again = run();
    assert!(c.as_slice().iter().zip(again.as_slice()).all(|(x, y)| bits(*x) == bits(*y)), "{what}: not deterministic");
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn last_wave_tail_splits_are_within_the_bound() {
    // More block tiles than SMs (140 of 128 x 128 on 132 SMs: one wave
    // and 8 tiles), a long k: the first rows in one full wave, the rest
    // split along k (the planner's choice on an H100 or H200; each type
    // takes the first it splits).
    let shapes = [(1160, 1680, 8192), (1160, 1760, 12288), (1360, 3080, 6144)];
    let all = Variant::all();
    check_tail::<f16, f16>(WgmmaTypes::F16, Gemm::new(), &shapes, Variant::NN, (1.0, 0.0));
    check_tail::<f16, f16>(WgmmaTypes::F16, Gemm::new(), &shapes, all[9], (0.5, -2.0));
    check_tail::<bf16, f32>(WgmmaTypes::Bf16F32, Gemm::new(), &shapes, all[30], (-1.5, 0.5));
    check_tail::<bf16, bf16>(WgmmaTypes::Bf16, Gemm::new(), &shapes, all[3], (1.0, 0.0));
    // TF32: the transposed product (both row-major), and a column-major C.
    let tf32 = || Gemm::new().allow_tf32(true);
    check_tail::<f32, f32>(WgmmaTypes::Tf32, tf32(), &shapes, Variant::NN, (0.7, 1.0));
    check_tail::<f32, f32>(WgmmaTypes::Tf32, tf32(), &shapes, all[1], (1.0, 0.0));
}

/// Runs the token-sized products `shapes` of one type pair as device
/// matrices (padding holding NaN, C NaN-poisoned when beta = 0) in the
/// variants given per shape, checks each against the reference and C's
/// padding bit for bit, twice for the same bits; and checks that a C with
/// row-major A and B (and A row-major, B column-major: a weight stored n x
/// k) of the first shape plans a narrow tile.
fn check_token<T: Product<C>, C: Scalar>(g: Gemm, shapes: &[(usize, usize, usize)], salt: usize) {
    let dev = device();
    let all = Variant::all();
    let nt = Variant { op_b: Op::T, ..Variant::NN };
    let (m, n, k) = shapes[0];
    for v in [Variant::NN, nt] {
        let plan = g.clone().op_a(v.op_a).op_b(v.op_b).plan_for::<T, C>(m, n, k).unwrap().to_string();
        let narrow = [8, 16, 32].iter().any(|bn| plan.contains(&format!("block 128x{bn},")));
        // wgmma reads i8 only K-major: a row-major B is copied first, so
        // the B-row-major variant may take any kernel.
        if T::NAME != "i8" || v == nt {
            assert!(narrow && plan.contains("C's few rows"), "{m}x{n}x{k} {v}: {plan}");
        }
    }
    // C of 8 columns with B row-major (MN-major; 16-bit types: tf32 and i8
    // copy any MN-major B): a narrow tile on a K-major copy of B.
    if T::NAME == "f16" || T::NAME == "bf16" {
        for &(m, n, k) in shapes.iter().filter(|s| s.1 == 8 && s.0 >= 1000) {
            let plan = g.clone().plan_for::<T, C>(m, n, k).unwrap();
            let text = plan.to_string();
            let narrow = [8, 16, 32].iter().any(|bn| text.contains(&format!("block 128x{bn},")));
            let copied = plan.copies.iter().any(|c| c.starts_with("B transposed to K-major"));
            assert!(narrow && copied, "{m}x{n}x{k} NN: {text}");
        }
    }
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        for (j, v) in [Variant::NN, nt, all[(7 * i + 3 * salt) % all.len()]].into_iter().enumerate() {
            let (alpha, beta): (f64, f64) = [(1.0, 0.0), (-1.5, 0.5), (0.7, 1.0), (2.0, -1.0)][(i + j + salt) % 4];
            let (alpha, beta) = if T::NAME == "i8" { (alpha.round(), beta.round()) } else { (alpha, beta) };
            let (a, b) = (random_matrix::<T>(m, k, seed()), random_matrix::<T>(k, n, seed()));
            let c0 = random_matrix::<C>(m, n, seed());
            let (sa, sb, before) = stored::<T, C>((&a, &b, &c0), v, beta);
            let what = format!("token-sized {} -> {} {m}x{n}x{k} {v} alpha {alpha} beta {beta}", T::NAME, C::NAME);
            let (da, db) = (DeviceMatrix::from_host(&dev, &sa).unwrap(), DeviceMatrix::from_host(&dev, &sb).unwrap());
            let g = g.clone().op_a(v.op_a).op_b(v.op_b).alpha(alpha).beta(beta);
            let run = || {
                let mut dc = DeviceMatrix::from_host(&dev, &before).unwrap();
                g.run_device(&da, &db, &mut dc).unwrap_or_else(|e| panic!("{what}: {e}"));
                dc.to_host().unwrap()
            };
            let c = run();
            let cmp = reference::<T, C>(alpha, (&a, &b), beta, &c0).compare(&c);
            assert!(cmp.passed(), "{what}: {cmp}");
            padding_unchanged(&before, &c, v, (m, n), &what);
            let again = run();
            let same = c.as_slice().iter().zip(again.as_slice()).all(|(x, y)| bits(*x) == bits(*y));
            assert!(same, "{what}: not deterministic");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn token_sized_products_on_narrow_tiles_are_within_the_bound() {
    // C with 1 to 64 rows (and, transposed, columns) and many columns:
    // stage 9's transposed product on the narrow tiles (8, 16, 32 columns)
    // or 128 x 64, k split where the tiles leave SMs idle (1536 columns,
    // k = 4100) or not (11008 columns); odd sizes everywhere.
    let shapes = [
        (16, 2056, 1030),
        (1, 1000, 777),
        (3, 4096, 300),
        (8, 11008, 512),
        (13, 1536, 4100),
        (29, 640, 2000),
        (32, 4100, 520),
        (48, 3000, 700),
        (64, 2048, 1024),
        (2056, 8, 1030),
        (1000, 24, 999),
    ];
    check_token::<f16, f16>(Gemm::new(), &shapes, 0);
    check_token::<f16, f32>(Gemm::new(), &shapes, 1);
    check_token::<bf16, bf16>(Gemm::new(), &shapes, 2);
    check_token::<bf16, f32>(Gemm::new(), &shapes, 3);
    check_token::<f32, f32>(Gemm::new().allow_tf32(true), &shapes, 4);
    check_token::<i8, i32>(Gemm::new(), &shapes, 5);
}

/// A large product whose B (kernel form) has lines off 32-byte sectors:
/// the plan copies B to lines on 128 bytes (`plan_for` must say so, else
/// the test would not exercise the copy), and the result is within the
/// bound with C's padding bit for bit, A and B read from device matrices
/// padded with NaN. f16 and bf16 (B row-major, 2072-element lines: 4144
/// bytes) and TF32 (run as the transposed product, whose B is A: lines of
/// 2060 f32, 8240 bytes).
fn check_realigned<T: Product<C>, C: Scalar>(g: Gemm, (m, n, k): (usize, usize, usize), pad: (usize, usize)) {
    let dev = device();
    let plan = g.clone().plan_for::<T, C>(m, n, k).unwrap().to_string();
    assert!(plan.contains("realigned"), "{m}x{n}x{k}: plan_for says {plan}");
    let (a, b) = (random_matrix::<T>(m, k, seed()), random_matrix::<T>(k, n, seed()));
    let c0 = random_matrix::<C>(m, n, seed());
    let (sa, sb) =
        (store(&a, Op::N, Layout::RowMajor, pad.0, T::POISON), store(&b, Op::N, Layout::RowMajor, pad.1, T::POISON));
    let before = store(&c0, Op::N, Layout::RowMajor, 3, C::POISON);
    let what = format!("realigned B {} -> {} {m}x{n}x{k} (pads {pad:?})", T::NAME, C::NAME);
    let (da, db) = (DeviceMatrix::from_host(&dev, &sa).unwrap(), DeviceMatrix::from_host(&dev, &sb).unwrap());
    let mut dc = DeviceMatrix::from_host(&dev, &before).unwrap();
    g.alpha(0.5).beta(-1.0).run_device(&da, &db, &mut dc).unwrap_or_else(|e| panic!("{what}: {e}"));
    let c = dc.to_host().unwrap();
    let cmp = reference::<T, C>(0.5, (&a, &b), -1.0, &c0).compare(&c);
    assert!(cmp.passed(), "{what}: {cmp}");
    padding_unchanged(&before, &c, Variant::NN, (m, n), &what);
}

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0"]
fn operands_off_32_byte_sectors_are_realigned_within_the_bound() {
    // 2100 x 2056 x 2048: 8.8e9 multiply-adds (over 2^33), B read by 17
    // block-tile rows; B stored with 16 elements of padding (lines of 2072).
    check_realigned::<f16, f16>(Gemm::new(), (2100, 2056, 2048), (0, 16));
    check_realigned::<bf16, f32>(Gemm::new(), (2100, 2056, 2048), (0, 16));
    // TF32 (both row-major: the transposed product, whose B is A): A's
    // lines of 2052 + 8 f32.
    check_realigned::<f32, f32>(Gemm::new().allow_tf32(true), (2052, 2052, 2052), (8, 0));
}
