//! GPU tests: every stage and configuration against the CPU reference at odd,
//! square and rectangular sizes, f64 and f32, with C poisoned by NaN before
//! each run; each configuration runs with op = N and row-major operands
//! (kernel module `nn`) and with a rotating other combination of op flags
//! and layouts ([`VARIANTS`], which reach the `nt`, `tn` and `tt` modules and
//! a column-major C). Bound: |C - C_ref| <= (k + 2) * eps * (|alpha| |A||B| +
//! |beta| |C0|) elementwise (gemm::check). They need an NVIDIA GPU: ignored
//! by default, run with `--include-ignored`; without a GPU they fail, never pass.
//!
//! `GEMM_TEST_SIZES=1,7,33` restricts the sizes (for compute-sanitizer runs,
//! which skip the `prop` tests).

mod common;

use common::{device, outside_view_unchanged, same_bits, seed, store, Bits, Variant};
use gemm::check::{random_int_matrix, random_matrix, Reference};
use gemm::tuning::registry::stage_configs;
use gemm::tuning::{BlockDim, KernelConfig, KernelLayouts, LimitError, Stage};
use gemm::{DeviceMatrix, Element, Error, Gemm, Layout, Matrix, Op, Precision};
use std::collections::BTreeSet;

const R: Layout = Layout::RowMajor;
const C: Layout = Layout::ColMajor;

/// The combinations of op flags and layouts each configuration also runs
/// with, in rotation (besides [`Variant::NN`]); the kernel module each
/// reaches is in the comment.
const VARIANTS: [Variant; 6] = [
    Variant { op_a: Op::T, op_b: Op::N, a: R, b: R, c: C }, // tn: op(A) = A^T, column-major C
    Variant { op_a: Op::N, op_b: Op::T, a: R, b: R, c: R }, // nt
    Variant { op_a: Op::N, op_b: Op::N, a: C, b: C, c: R }, // tt
    Variant { op_a: Op::N, op_b: Op::N, a: R, b: C, c: C }, // nt through the swap for a column-major C
    Variant { op_a: Op::N, op_b: Op::N, a: C, b: R, c: R }, // tn
    Variant { op_a: Op::T, op_b: Op::T, a: C, b: C, c: R }, // nn, through two transposed column-major operands
];

/// The rotation reaches every kernel module, so every module of every stage is exercised.
#[test]
fn variants_reach_every_kernel_module() {
    let reached: BTreeSet<&str> = VARIANTS.iter().chain([&Variant::NN]).map(|v| v.kernel_layouts().suffix()).collect();
    let all: BTreeSet<&str> = KernelLayouts::ALL.iter().map(|l| l.suffix()).collect();
    assert_eq!(reached, all);
    assert!(VARIANTS.iter().any(|v| v.c == C) && VARIANTS.iter().any(|v| v.op_a == Op::T));
}

fn restricted_sizes() -> Option<Vec<usize>> {
    std::env::var("GEMM_TEST_SIZES").ok().map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
}

/// (m, n, k) shapes: the odd squares from DESIGN.md plus rectangles.
fn shapes() -> Vec<(usize, usize, usize)> {
    if let Some(sizes) = restricted_sizes() {
        let mut s: Vec<_> = sizes.iter().map(|&n| (n, n, n)).collect();
        s.extend([(7, 33, 1), (33, 7, 65), (65, 1, 33)]);
        return s;
    }
    let mut s: Vec<_> = [1, 7, 31, 32, 33, 100, 257, 1000, 1023, 1025].iter().map(|&n| (n, n, n)).collect();
    s.extend([
        (300, 200, 100),
        (1, 1025, 7),
        (1025, 1, 33),
        (33, 65, 1),
        (127, 1023, 65),
        (1000, 31, 257),
        (65, 7, 1000),
        (2, 3, 4000),
    ]);
    s
}

/// The configurations each stage is tested with: every compiled tile
/// configuration, and for the naive stages a spread of block shapes.
fn configs(stage: Stage, precision: Precision) -> Vec<KernelConfig> {
    match stage {
        Stage::Naive | Stage::Coalesced => [(32, 8), (16, 16), (1, 64), (7, 13), (1024, 1), (1, 1024), (33, 31)]
            .iter()
            .map(|&(x, y)| {
                let block = BlockDim::new(x, y);
                if stage == Stage::Naive {
                    KernelConfig::Naive { block }
                } else {
                    KernelConfig::Coalesced { block }
                }
            })
            .collect(),
        _ => stage_configs(stage, precision),
    }
}

/// The builder that runs `config`, set through the options a user would give.
fn builder(config: KernelConfig) -> Gemm {
    match config {
        KernelConfig::Naive { block } => Gemm::new().stage(Stage::Naive).block_dim(block.x, block.y),
        KernelConfig::Coalesced { block } => Gemm::new().stage(Stage::Coalesced).block_dim(block.x, block.y),
        KernelConfig::SmemTiled { tile } => Gemm::new().stage(Stage::SmemTiled).tile_size(tile),
        KernelConfig::OutputsPerThread { tile, outputs } => Gemm::new().tile_size(tile).outputs_per_thread(outputs),
        KernelConfig::RegisterTiled { block: b, thread: t } => {
            Gemm::new().block_tile(b.bm, b.bn, b.bk).thread_tile(t.tm, t.tn)
        }
        KernelConfig::Vectorized { block: b, thread: t } => {
            Gemm::new().stage(Stage::Vectorized).block_tile(b.bm, b.bn, b.bk).thread_tile(t.tm, t.tn)
        }
        KernelConfig::Pipelined { block: b, warp: w, thread: t, depth } => {
            Gemm::new().block_tile(b.bm, b.bn, b.bk).warp_tile(w.wm, w.wn).thread_tile(t.tm, t.tn).pipeline_depth(depth)
        }
        KernelConfig::TensorCore { block: b, warp: w, depth } => {
            Gemm::new().block_tile(b.bm, b.bn, b.bk).warp_tile(w.wm, w.wn).pipeline_depth(depth)
        }
        other => Gemm::new().kernel(other),
    }
}

/// Runs `g` on op(A) = `a` and op(B) = `b` (logical values) given as
/// `variant` says, into a NaN-poisoned C, and returns C.
fn run_variant<T: Element>(g: &Gemm, variant: Variant, a: &Matrix<T>, b: &Matrix<T>) -> Result<Matrix<T>, Error> {
    let sa = store(a, variant.op_a, variant.a, 0, T::POISON);
    let sb = store(b, variant.op_b, variant.b, 0, T::POISON);
    let mut c = Matrix::from_fn_in(a.rows(), b.cols(), variant.c, |_, _| T::POISON);
    g.clone().op_a(variant.op_a).op_b(variant.op_b).run(&sa, &sb, &mut c)?;
    Ok(c)
}

fn check_stage<T: Element>(stage: Stage) {
    let dev = device();
    for (si, (m, n, k)) in shapes().into_iter().enumerate() {
        let a = random_matrix::<T>(m, k, seed());
        let b = random_matrix::<T>(k, n, seed());
        let reference = Reference::new(1.0, &a, &b, 0.0, &Matrix::<T>::zeros(m, n));
        for (ci, config) in configs(stage, T::PRECISION).into_iter().enumerate() {
            let g = builder(config).device(&dev);
            assert_eq!(g.chosen_config(T::PRECISION).unwrap(), Some(config));
            for variant in [Variant::NN, VARIANTS[(si + ci) % VARIANTS.len()]] {
                let c = run_variant(&g, variant, &a, &b)
                    .unwrap_or_else(|e| panic!("{stage} {config} {variant} at {m}x{n}x{k}: {e}"));
                let cmp = reference.compare(&c);
                assert!(cmp.passed(), "{} {stage} {config} {variant} at m={m} n={n} k={k}: {cmp}", T::PRECISION.name());
            }
        }
    }
}

macro_rules! stage_tests {
    ($($name:ident: $t:ty, $stage:expr;)*) => {$(
        #[test]
        #[ignore = "needs an NVIDIA GPU"]
        fn $name() {
            check_stage::<$t>($stage);
        }
    )*};
}

stage_tests! {
    stage1_naive_f64: f64, Stage::Naive;
    stage1_naive_f32: f32, Stage::Naive;
    stage2_coalesced_f64: f64, Stage::Coalesced;
    stage2_coalesced_f32: f32, Stage::Coalesced;
    stage3_smem_tiled_f64: f64, Stage::SmemTiled;
    stage3_smem_tiled_f32: f32, Stage::SmemTiled;
    stage4_outputs_per_thread_f64: f64, Stage::OutputsPerThread;
    stage4_outputs_per_thread_f32: f32, Stage::OutputsPerThread;
    stage5_register_tiled_f64: f64, Stage::RegisterTiled;
    stage5_register_tiled_f32: f32, Stage::RegisterTiled;
    stage6_vectorized_f64: f64, Stage::Vectorized;
    stage6_vectorized_f32: f32, Stage::Vectorized;
    stage7_pipelined_f64: f64, Stage::Pipelined;
    stage7_pipelined_f32: f32, Stage::Pipelined;
    stage8_tensor_core_f64: f64, Stage::TensorCore;
}

/// Small integers make every product exact (|sums| <= 16 k < 2^24): all
/// stages must agree bit for bit with the reference, in the `nn` layouts
/// and in a rotating other combination.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn exact_on_small_integers_every_stage() {
    let dev = device();
    // Smaller under the sanitizers (GEMM_TEST_SIZES), which slow kernels down a hundredfold.
    let (m, n, k) = if restricted_sizes().is_some() { (65, 33, 65) } else { (129, 65, 257) };
    fn run_all<T: Element>(dev: &std::sync::Arc<gemm::Device>, m: usize, n: usize, k: usize) {
        let a = random_int_matrix::<T>(m, k, seed());
        let b = random_int_matrix::<T>(k, n, seed());
        let r = Reference::new(1.0, &a, &b, 0.0, &Matrix::<T>::zeros(m, n));
        for stage in Stage::ALL {
            for (ci, config) in configs(stage, T::PRECISION).into_iter().enumerate() {
                for variant in [Variant::NN, VARIANTS[(ci + stage.number() as usize) % VARIANTS.len()]] {
                    let c = run_variant(&builder(config).device(dev), variant, &a, &b).unwrap();
                    for i in 0..m {
                        for j in 0..n {
                            assert_eq!(c[(i, j)].as_f64(), r.value[i * n + j], "{stage} {config} {variant} ({i}, {j})");
                        }
                    }
                }
            }
        }
    }
    run_all::<f64>(&dev, m, n, k);
    run_all::<f32>(&dev, m, n, k);
}

/// alpha, beta and leading dimensions larger than the lines: padding (a
/// guard NaN) comes back bit for bit, beta * C is added, for every stage.
/// Odd pads take the scalar paths of stages 6-8, pads that keep lines
/// 16-byte aligned the vector paths (with n odd, the last column of C is a
/// fringe). Each configuration runs in the `nn` layouts and in a rotating
/// other combination. Bound as the module's, with |beta| |C0|.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn alpha_beta_and_padded_leading_dimensions() {
    for pads in [[3, 5, 2], [2, 3, 1]] {
        alpha_beta_padded(pads);
    }
}

fn alpha_beta_padded([pa, pb, pc]: [usize; 3]) {
    let dev = device();
    let (m, n, k) = (70, 45, 34);
    let a = random_matrix::<f64>(m, k, seed());
    let b = random_matrix::<f64>(k, n, seed());
    let c0 = random_matrix::<f64>(m, n, seed());
    let r = Reference::new(1.5, &a, &b, -0.75, &c0);
    for stage in Stage::ALL {
        for (ci, config) in configs(stage, Precision::F64).into_iter().enumerate() {
            for variant in [Variant::NN, VARIANTS[(ci + pa) % VARIANTS.len()]] {
                let sa = store(&a, variant.op_a, variant.a, pa, f64::GUARD);
                let sb = store(&b, variant.op_b, variant.b, pb, f64::GUARD);
                let before = store(&c0, Op::N, variant.c, pc, f64::GUARD);
                let mut c = before.clone();
                builder(config)
                    .op_a(variant.op_a)
                    .op_b(variant.op_b)
                    .alpha(1.5)
                    .beta(-0.75)
                    .device(&dev)
                    .run(&sa, &sb, &mut c)
                    .unwrap();
                let cmp = r.compare(&c);
                assert!(cmp.passed(), "{stage} {config} {variant}: {cmp}");
                if let Err(e) = outside_view_unchanged(&before, &c, (0, 0), (m, n)) {
                    panic!("{stage} {config} {variant}: padding written: {e}");
                }
            }
        }
    }
}

/// k = 0: C = beta * C, exactly (beta = 0 gives zeros and does not read
/// the NaN in C; beta = 0.5 halves 2.0); m = 0 or n = 0 touches nothing. In
/// every op/layout combination.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn k_zero_and_empty_shapes() {
    let dev = device();
    for v in Variant::all() {
        let a = Matrix::<f64>::zeros(5, 0);
        let b = Matrix::<f64>::zeros(0, 3);
        let (sa, sb) = (store(&a, v.op_a, v.a, 0, 0.0), store(&b, v.op_b, v.b, 0, 0.0));
        let g = Gemm::new().op_a(v.op_a).op_b(v.op_b).device(&dev);
        let mut c = Matrix::<f64>::from_fn_in(5, 3, v.c, |_, _| f64::NAN);
        g.clone().run(&sa, &sb, &mut c).unwrap();
        assert!(c.as_slice().iter().all(|&x| x == 0.0), "{v}: {:?}", c.as_slice());
        let mut c = Matrix::<f64>::from_fn_in(5, 3, v.c, |_, _| 2.0);
        g.clone().beta(0.5).run(&sa, &sb, &mut c).unwrap();
        assert!(c.as_slice().iter().all(|&x| x == 1.0), "{v}: {:?}", c.as_slice());
        let (ea, eb) =
            (store(&Matrix::zeros(0, 4), v.op_a, v.a, 0, 0.0), store(&Matrix::zeros(4, 3), v.op_b, v.b, 0, 0.0));
        let mut empty = Matrix::<f64>::zeros_in(0, 3, v.c);
        g.run(&ea, &eb, &mut empty).unwrap();
    }
}

/// The one-call functions and the builder program of the README.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn dgemm_sgemm_and_the_builder() {
    device();
    let a = Matrix::<f64>::from_fn(300, 200, |i, j| (i as f64 - j as f64) / 7.0);
    let b = Matrix::<f64>::from_fn(200, 100, |i, j| ((i * j) % 5) as f64);
    let r = Reference::new(1.0, &a, &b, 0.0, &Matrix::zeros(300, 100));
    let mut c = Matrix::<f64>::filled(300, 100, f64::NAN);
    gemm::dgemm(&a, &b, &mut c).unwrap();
    assert!(r.compare(&c).passed());
    let mut c = Matrix::<f64>::filled(300, 100, f64::NAN);
    Gemm::new().tile_size(32).outputs_per_thread(8).run(&a, &b, &mut c).unwrap();
    assert!(r.compare(&c).passed());
    // op(A) = A^T through the flag and through a transposed view.
    let at = Matrix::<f64>::from_fn_col_major(200, 300, |i, j| a[(j, i)]);
    let mut c = Matrix::<f64>::filled(300, 100, f64::NAN);
    Gemm::new().op_a(Op::T).run(&at, &b, &mut c).unwrap();
    assert!(r.compare(&c).passed());
    let mut c = Matrix::<f64>::filled(300, 100, f64::NAN);
    gemm::dgemm(at.t(), &b, &mut c).unwrap();
    assert!(r.compare(&c).passed());
    let x = random_matrix::<f32>(65, 33, seed());
    let y = random_matrix::<f32>(33, 17, seed());
    let mut z = Matrix::<f32>::filled(65, 17, f32::NAN);
    gemm::sgemm(&x, &y, &mut z).unwrap();
    assert!(Reference::new(1.0, &x, &y, 0.0, &Matrix::zeros(65, 17)).compare(&z).passed());
}

/// Device matrices chain products without host copies: D = (A B) E.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn device_matrices_chain_products() {
    let dev = device();
    let a = random_matrix::<f64>(120, 70, seed());
    let b = random_matrix::<f64>(70, 90, seed());
    let e = random_matrix::<f64>(90, 33, seed());
    let (da, db, de) = (
        DeviceMatrix::from_host(&dev, &a).unwrap(),
        DeviceMatrix::from_host(&dev, &b).unwrap(),
        DeviceMatrix::from_host(&dev, &e).unwrap(),
    );
    let mut dab = DeviceMatrix::<f64>::zeros(&dev, 120, 90).unwrap();
    let mut dd = DeviceMatrix::<f64>::zeros(&dev, 120, 33).unwrap();
    Gemm::new().run_device(&da, &db, &mut dab).unwrap();
    Gemm::new().tile_size(16).run_device(&dab, &de, &mut dd).unwrap();
    let ab = dab.to_host().unwrap();
    assert!(Reference::new(1.0, &a, &b, 0.0, &Matrix::zeros(120, 90)).compare(&ab).passed());
    let d = dd.to_host().unwrap();
    let cmp = Reference::new(1.0, &ab, &e, 0.0, &Matrix::zeros(120, 33)).compare(&d);
    assert!(cmp.passed(), "{cmp}");
    // A mismatched shape on the device path is an error, before any launch.
    let err = Gemm::new().run_device(&da, &de, &mut dd).unwrap_err();
    assert!(matches!(err, Error::Shape(_)), "{err:?}");
    assert!(same_bits(dd.to_host().unwrap().as_slice(), d.as_slice()));
}

/// A grid the device cannot launch is a typed error naming the limit; C is untouched.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn grid_beyond_the_device_limit_is_a_typed_error() {
    let dev = device();
    let a = Matrix::<f32>::zeros(70_000, 1);
    let b = Matrix::<f32>::zeros(1, 1);
    let mut c = Matrix::<f32>::filled(70_000, 1, 3.0);
    let err = Gemm::new().stage(Stage::Coalesced).block_dim(1024, 1).device(&dev).run(&a, &b, &mut c).unwrap_err();
    assert!(
        matches!(err, Error::DeviceLimit { source: LimitError::GridDim { axis: 'y', requested: 70_000, .. }, .. }),
        "{err:?}"
    );
    assert!(c.as_slice().iter().all(|&x| x == 3.0));
}

/// Local memory kernels may have on the GPU after the driver's JIT (name,
/// most bytes over the four layout modules): none. The last ones, the tn
/// batched entry points of stage 8's block 128x128x16 (a 4-byte epilogue
/// value kept across the main loop), went with stage 8's branch-free copies
/// and its shared-memory stash of the epilogue's values (2026-11-24). The
/// test fails if any kernel uses local memory.
const JIT_SPILLS: &[(&str, u32)] = &[];

/// No kernel (single-product and batched entry points) uses local memory
/// (no spills) on this device in any of the four layout modules, beyond the recorded JIT spills of [`JIT_SPILLS`],
/// and every kernel can be resident.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn no_kernel_uses_local_memory() {
    let dev = device();
    let mut offenders = Vec::new();
    for layouts in KernelLayouts::ALL {
        for precision in [Precision::F64, Precision::F32] {
            for stage in Stage::ALL {
                for config in configs(stage, precision) {
                    let plain = dev.kernel_info(precision, config, layouts).unwrap();
                    let batched = dev.batched_kernel_info(precision, config, layouts).unwrap();
                    for info in std::iter::once(plain).chain(batched) {
                        let allowed = JIT_SPILLS.iter().find(|(name, _)| *name == info.name).map_or(0, |&(_, b)| b);
                        if info.local_bytes > allowed || info.blocks_per_sm == 0 {
                            offenders.push(format!(
                                "{} ({}): {} bytes of local memory, {} registers, {} blocks/SM",
                                info.name,
                                layouts.suffix(),
                                info.local_bytes,
                                info.registers,
                                info.blocks_per_sm
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(offenders.is_empty(), "kernels with local memory or no residency:\n{}", offenders.join("\n"));
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    fn one<T: Element>(
        config: KernelConfig,
        variant: Variant,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(), TestCaseError> {
        let a = random_matrix::<T>(m, k, seed());
        let b = random_matrix::<T>(k, n, seed());
        let c = run_variant(&builder(config).device(&device()), variant, &a, &b).unwrap();
        let cmp = Reference::new(1.0, &a, &b, 0.0, &Matrix::zeros(m, n)).compare(&c);
        prop_assert!(cmp.passed(), "{} {} {} {}x{}x{}: {}", T::PRECISION.name(), config, variant, m, n, k, cmp);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
        /// Random shapes, stages, configurations and op/layout combinations, f64 and f32.
        #[test]
        #[ignore = "needs an NVIDIA GPU"]
        fn prop_random_shapes(m in 1usize..300, n in 1usize..300, k in 0usize..300,
                              stage in 0usize..8, pick in 0usize..64, variant in 0usize..32, double in any::<bool>()) {
            let precision = if double || Stage::ALL[stage] == Stage::TensorCore { Precision::F64 } else { Precision::F32 };
            let all = configs(Stage::ALL[stage], precision);
            let config = all[pick % all.len()];
            let variant = Variant::all()[variant];
            if precision == Precision::F64 { one::<f64>(config, variant, m, n, k)? } else { one::<f32>(config, variant, m, n, k)? }
        }
    }
}

/// Threads that ask a fresh `Device` for the same kernels at the same time
/// load each module once (machine code: the one module of row-major A and
/// B), and every result is right.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn concurrent_first_products_load_each_module_once() {
    let _ = device(); // fails without a GPU
    let dev = gemm::Device::new(0).expect("a second handle to GPU 0");
    assert_eq!(dev.modules_loaded(), 0);
    let n = 65;
    let a = random_int_matrix::<f64>(n, n, seed());
    let b = random_int_matrix::<f64>(n, n, seed());
    let want = Reference::new(1.0, &a, &b, 0.0, &Matrix::<f64>::zeros(n, n));
    let run = || {
        let mut c = Matrix::<f64>::filled(n, n, f64::NAN);
        Gemm::new().device(&dev).run(&a, &b, &mut c).expect("dgemm");
        for i in 0..n {
            for j in 0..n {
                assert_eq!(c.get(i, j).unwrap(), want.value[i * want.n + j], "C[{i}, {j}]");
            }
        }
    };
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(run);
        }
    });
    let loaded = dev.modules_loaded();
    match dev.kernel_code() {
        gemm::tuning::kernels::KernelCode::Cubin { .. } => assert_eq!(loaded, 1, "{}", dev.kernel_code()),
        gemm::tuning::kernels::KernelCode::Ptx { .. } => assert!(loaded >= 1),
    }
    run();
    assert_eq!(dev.modules_loaded(), loaded, "a second product loaded again");
}
