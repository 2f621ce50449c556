//! GPU tests of split-K (`Gemm::split_k`, `gemm::tuning::split_k`): odd,
//! skinny and long-k shapes in every op/layout combination against the CPU
//! reference, with NaN-poisoned C (beta = 0) and padding that must come back
//! bit for bit; the skinny and tiny-C kernels; splits longer than k allows;
//! bitwise determinism run to run; the default plan splitting a small C
//! with a long k, and balancing a last wave that its block tiles leave
//! partly empty (device matrices); typed errors for bad splits.
//!
//! Bound: each element within `(k + 2) eps (|alpha| |A||B| + |beta| |C0|)`
//! of the f64 CPU reference (eps = 2^-52 for f64, 2^-23 for f32): the
//! partial sums and their sum in slice order are a reordering of the k
//! products, whose error the bound already covers.
//!
//! They need an NVIDIA GPU: ignored by default, run with
//! `--include-ignored`; without a GPU they fail, never pass.

mod common;

use common::{check_product, device, outside_view_unchanged, same_bits, seed, store, Bits, Variant};
use gemm::check::{random_matrix, Reference};
use gemm::tuning::{BlockTile, KernelConfig, SplitReason, Stage, WarpTile};
use gemm::{DeviceMatrix, Error, Gemm, Matrix, Op, Precision};

/// Odd, skinny and long-k shapes (1-row and 1-column products, k not a
/// multiple of any BK, k shorter than the split asks for).
const SHAPES: [(usize, usize, usize); 8] = [
    (1, 1, 777),
    (7, 33, 1000),
    (65, 31, 4097),
    (33, 129, 3001),
    (16, 300, 2003),
    (300, 16, 2003),
    (1, 100, 5000),
    (129, 1, 40),
];

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn split_k_matches_the_reference_at_odd_and_skinny_shapes() {
    fn run<T: Bits>() {
        let dev = device();
        let variants = Variant::all();
        for (i, &shape) in SHAPES.iter().enumerate() {
            for (j, split) in [2u32, 3, 7, 64].into_iter().enumerate() {
                // A different op/layout combination for each (shape, split): all 32 over the test.
                let v = variants[(i * 4 + j) % variants.len()];
                let g = Gemm::new().split_k(split).device(&dev);
                check_product::<T>(&g, shape, v, if j % 2 == 0 { 0.0 } else { 0.5 }, &format!("split {split}"));
            }
        }
    }
    run::<f64>();
    run::<f32>();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn every_stage_and_the_skinny_kernels_split() {
    let dev = device();
    let mma = |bm, bn, bk, depth| KernelConfig::TensorCore {
        block: BlockTile::new(bm, bn, bk),
        warp: WarpTile::new(32, 32),
        depth,
    };
    // The skinny (BM or BN 32) and tiny-C kernels of stage 8, then a stage-8
    // default and every other stage's default.
    let mut builders: Vec<(String, Gemm)> = [mma(128, 32, 16, 3), mma(32, 128, 16, 3), mma(32, 32, 16, 4)]
        .into_iter()
        .map(|c| (format!("{c}"), Gemm::new().kernel(c)))
        .collect();
    builders.extend(Stage::ALL.into_iter().map(|s| (s.to_string(), Gemm::new().stage(s))));
    for (name, g) in &builders {
        for (i, v) in [Variant::NN, Variant::all()[13], Variant::all()[22]].into_iter().enumerate() {
            let g = g.clone().split_k(5).device(&dev);
            let beta = if i == 1 { 0.25 } else { 0.0 };
            check_product::<f64>(&g, (97, 45, 1201), v, beta, name);
            // Stage 8 is f64 only.
            if g.chosen_config(Precision::F32).is_ok() {
                check_product::<f32>(&g, (97, 45, 1201), v, beta, name);
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn split_k_is_bitwise_deterministic() {
    fn run<T: Bits>() {
        let dev = device();
        let (m, n, k) = (64, 48, 20_000);
        let a = DeviceMatrix::from_host(&dev, &random_matrix::<T>(m, k, seed())).unwrap();
        let b = DeviceMatrix::from_host(&dev, &random_matrix::<T>(k, n, seed())).unwrap();
        let c0 = random_matrix::<T>(m, n, seed());
        for g in [Gemm::new(), Gemm::new().split_k(16), Gemm::new().split_k(3)] {
            let g = g.alpha(0.5).beta(2.0);
            let once = || {
                let mut c = DeviceMatrix::from_host(&dev, &c0).unwrap();
                g.run_device(&a, &b, &mut c).unwrap();
                c.to_host().unwrap()
            };
            let first = once();
            for _ in 0..3 {
                assert!(same_bits(first.as_slice(), once().as_slice()), "{g:?}: results differ run to run");
            }
        }
    }
    run::<f64>();
    run::<f32>();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_default_plan_splits_a_small_c_with_a_long_k() {
    let dev = device();
    for p in [Precision::F64, Precision::F32] {
        let plan = Gemm::new().device(&dev).plan(p, 64, 64, 65_536).unwrap();
        assert!(plan.split_k > 1, "{p:?}: {plan}");
        assert!(matches!(plan.split, SplitReason::Model { .. } | SplitReason::Measured), "{plan}");
        // A big square fills the GPU: not split.
        let plan = Gemm::new().device(&dev).plan(p, 8192, 8192, 8192).unwrap();
        assert_eq!(plan.split_k, 1, "{p:?}: {plan}");
        // A chosen kernel is not split unless asked.
        let plan = Gemm::new().stage(Stage::TensorCore).device(&dev).plan(p, 64, 64, 65_536);
        if let Ok(plan) = plan {
            assert_eq!((plan.split_k, plan.split), (1, SplitReason::NotConsidered), "{plan}");
        }
    }
    // And the default path's split product is right.
    check_product::<f64>(&Gemm::new().device(&dev), (64, 64, 65_536), Variant::NN, 0.0, "default");
    check_product::<f32>(&Gemm::new().device(&dev), (64, 64, 65_536), Variant::all()[31], 1.0, "default");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn bad_splits_are_typed_errors_and_leave_c_untouched() {
    let dev = device();
    let a = random_matrix::<f64>(40, 30, seed());
    let b = random_matrix::<f64>(30, 20, seed());
    let before = random_matrix::<f64>(40, 20, seed());
    let mut c = before.clone();
    let e = Gemm::new().split_k(0).device(&dev).run(&a, &b, &mut c).unwrap_err();
    assert!(matches!(e, Error::SplitK { slices: 0, .. }), "{e}");
    assert!(same_bits(c.as_slice(), before.as_slice()));
    // A batch is not split.
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut dc = DeviceMatrix::from_host(&dev, &before).unwrap();
    let mut dc2 = DeviceMatrix::from_host(&dev, &before).unwrap();
    for count in [1, 2] {
        let a_list: Vec<gemm::DeviceView<'_, f64>> = (0..count).map(|_| (&da).into()).collect();
        let b_list: Vec<gemm::DeviceView<'_, f64>> = (0..count).map(|_| (&db).into()).collect();
        let mut c_list = vec![(&mut dc).into()];
        if count == 2 {
            c_list.push((&mut dc2).into());
        }
        let e = Gemm::new().split_k(4).run_grouped_device(&a_list, &b_list, &mut c_list).unwrap_err();
        assert!(matches!(e, Error::SplitK { slices: 4, .. }), "{e}");
    }
    for d in [&dc, &dc2] {
        assert!(same_bits(d.to_host().unwrap().as_slice(), before.as_slice()));
    }
}

/// The default plan of a single product on device matrices whose block
/// tiles leave the last wave partly empty (1536^3 on 128 x 128 tiles: 144
/// for 132 SMs) balances it: C's first rows whole, the rest split along k
/// (`Plan::tail`). On device matrices of several op/layout variants with
/// padding (NaN), C within the bound, its padding bit for bit, the same
/// bits twice; `balance_last_wave(false)` plans it whole.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_default_plan_balances_the_last_wave() {
    fn run<T: Bits>(p: Precision) {
        let dev = device();
        let (m, n, k) = (1536, 1536, 1536);
        let plan = Gemm::new().device(&dev).plan(p, m, n, k).unwrap();
        assert!(plan.tail.is_some() && plan.split_k == 1, "{p:?}: {plan}");
        assert!(plan.to_string().contains("last wave balanced"), "{plan}");
        let whole = Gemm::new().device(&dev).balance_last_wave(false).plan(p, m, n, k).unwrap();
        assert!(whole.tail.is_none(), "{whole}");
        let variants = Variant::all();
        for (i, v) in [Variant::NN, variants[7], variants[22]].into_iter().enumerate() {
            let (a, b) = (random_matrix::<T>(m, k, seed()), random_matrix::<T>(k, n, seed()));
            let c0 = random_matrix::<T>(m, n, seed());
            let beta = if i == 1 { 0.0 } else { 0.5 };
            let (sa, sb) = (store(&a, v.op_a, v.a, 3, T::POISON), store(&b, v.op_b, v.b, 3, T::POISON));
            let before = if beta == 0.0 {
                store(&Matrix::from_fn(m, n, |_, _| T::POISON), Op::N, v.c, 2, T::POISON)
            } else {
                store(&c0, Op::N, v.c, 2, T::POISON)
            };
            let (da, db) = (DeviceMatrix::from_host(&dev, &sa).unwrap(), DeviceMatrix::from_host(&dev, &sb).unwrap());
            let g = Gemm::new().device(&dev).op_a(v.op_a).op_b(v.op_b).alpha(-1.5).beta(beta);
            let once = || {
                let mut dc = DeviceMatrix::from_host(&dev, &before).unwrap();
                g.run_device(&da, &db, &mut dc).unwrap();
                dc.to_host().unwrap()
            };
            let c = once();
            let cmp = Reference::new(-1.5, &a, &b, beta, &c0).compare(&c);
            assert!(cmp.passed(), "{p:?} {v} beta {beta}: {cmp}");
            outside_view_unchanged(&before, &c, (0, 0), (m, n)).unwrap_or_else(|e| panic!("{p:?} {v}: {e}"));
            assert!(same_bits(c.as_slice(), once().as_slice()), "{p:?} {v}: results differ run to run");
        }
    }
    run::<f64>(Precision::F64);
    run::<f32>(Precision::F32);
}
