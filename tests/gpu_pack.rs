//! GPU tests of packing (`Gemm::pack`, `gemm::tuning::pack`): odd, skinny
//! and tiny shapes in every op/layout combination against the CPU
//! reference, with NaN-poisoned C (beta = 0), NaN in the operands' padding
//! (an odd leading dimension: the copy must read no element outside the
//! matrix) and C's padding coming back bit for bit; packing with split-K
//! and with each stage; the packed product bit for bit the unpacked one of
//! the same kernel on A and B stored as the packed copies are; bitwise
//! determinism run to run; typed errors for packing a batch.
//!
//! Bound: each element within `(k + 2) eps (|alpha| |A||B| + |beta| |C0|)`
//! of the f64 CPU reference (eps = 2^-52 for f64, 2^-23 for f32): packing
//! copies the operands exactly, so the kernel's bound holds unchanged.
//!
//! They need an NVIDIA GPU: ignored by default, run with
//! `--include-ignored`; without a GPU they fail, never pass.

mod common;

use common::{check_product, device, same_bits, seed, store, Bits, Variant};
use gemm::check::{random_matrix, Reference};
use gemm::tuning::{BlockTile, KernelConfig, Stage, ThreadTile, WarpTile};
use gemm::{DeviceMatrix, Error, Gemm, Layout, Matrix, Op, Precision, Strided};

/// Odd, skinny and tiny shapes: 1-element products, m or n not a multiple
/// of 4 (the packed copy's lines then end mid-vector), more than one
/// 32 x 32 tile of the copy in each direction, and tiles cut at both edges.
const SHAPES: [(usize, usize, usize); 8] = [
    (1, 1, 1),
    (7, 33, 100),
    (65, 31, 257),
    (129, 130, 67),
    (300, 16, 203),
    (16, 300, 203),
    (1, 100, 500),
    (129, 1, 40),
];

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn packed_products_match_the_reference_in_every_layout() {
    fn run<T: Bits>() {
        let dev = device();
        let variants = Variant::all();
        for (i, &shape) in SHAPES.iter().enumerate() {
            for j in 0..4 {
                // A different op/layout combination for each (shape, j): all 32 over the test.
                let v = variants[(i * 4 + j) % variants.len()];
                let g = Gemm::new().pack(true).device(&dev);
                check_product::<T>(&g, shape, v, if j % 2 == 0 { 0.0 } else { 0.5 }, "packed");
            }
        }
    }
    run::<f64>();
    run::<f32>();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn every_stage_packs_and_packing_composes_with_split_k() {
    let dev = device();
    let mut builders: Vec<(String, Gemm)> =
        Stage::ALL.into_iter().map(|s| (s.to_string(), Gemm::new().stage(s).pack(true))).collect();
    builders.push(("split 5".into(), Gemm::new().pack(true).split_k(5)));
    for (name, g) in &builders {
        for (i, v) in [Variant::NN, Variant::all()[13], Variant::all()[22]].into_iter().enumerate() {
            let g = g.clone().device(&dev);
            let beta = if i == 1 { 0.25 } else { 0.0 };
            check_product::<f64>(&g, (97, 45, 1201), v, beta, name);
            // Stage 8 is f64 only.
            if g.chosen_config(Precision::F32).is_ok() {
                check_product::<f32>(&g, (97, 45, 1201), v, beta, name);
            }
        }
    }
}

/// The packed product of row-major A and column-major B equals, bit for
/// bit, the unpacked product of the same kernel on a column-major A and a
/// row-major B holding the same values (the layouts the copies make), and
/// every run of it is the same.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn packing_changes_no_bit_of_the_result() {
    fn run<T: Bits>(config: KernelConfig) {
        let dev = device();
        let (m, n, k) = (200, 136, 301);
        let a = random_matrix::<T>(m, k, seed());
        let b = random_matrix::<T>(k, n, seed());
        let c0 = random_matrix::<T>(m, n, seed());
        let upload = |x: &Matrix<T>, layout: Layout| {
            DeviceMatrix::from_host(&dev, &store(x, Op::N, layout, 0, T::POISON)).unwrap()
        };
        let (a_row, b_col) = (upload(&a, Layout::RowMajor), upload(&b, Layout::ColMajor));
        let (a_col, b_row) = (upload(&a, Layout::ColMajor), upload(&b, Layout::RowMajor));
        let g = Gemm::new().kernel(config).alpha(0.75).beta(-0.5).device(&dev);
        let product = |g: &Gemm, a: &DeviceMatrix<T>, b: &DeviceMatrix<T>| {
            let mut c = DeviceMatrix::from_host(&dev, &c0).unwrap();
            g.run_device(a, b, &mut c).unwrap();
            c.to_host().unwrap()
        };
        let unpacked = product(&g, &a_col, &b_row);
        let cmp = Reference::new(0.75, &a, &b, -0.5, &c0).compare(&unpacked);
        assert!(cmp.passed(), "{config}: {cmp}");
        for _ in 0..3 {
            let packed = product(&g.clone().pack(true), &a_row, &b_col);
            assert!(same_bits(packed.as_slice(), unpacked.as_slice()), "{config}: packed and unpacked differ");
        }
    }
    let pipelined = KernelConfig::Pipelined {
        block: BlockTile::new(128, 64, 16),
        warp: WarpTile::new(64, 32),
        thread: ThreadTile::new(8, 8),
        depth: 3,
    };
    run::<f32>(pipelined);
    run::<f64>(gemm::tuning::stage_default(Stage::Pipelined, Precision::F64));
    let mma = KernelConfig::TensorCore { block: BlockTile::new(64, 64, 16), warp: WarpTile::new(32, 32), depth: 3 };
    run::<f64>(mma);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn packing_a_batch_is_a_typed_error_and_leaves_c_untouched() {
    let dev = device();
    let a = random_matrix::<f64>(40, 30, seed());
    let b = random_matrix::<f64>(30, 20, seed());
    let before = random_matrix::<f64>(40, 20, seed());
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut dc = DeviceMatrix::from_host(&dev, &before).unwrap();
    let mut dc2 = DeviceMatrix::from_host(&dev, &before).unwrap();
    // Grouped, even of one problem.
    for count in [1, 2] {
        let a_list: Vec<gemm::DeviceView<'_, f64>> = (0..count).map(|_| (&da).into()).collect();
        let b_list: Vec<gemm::DeviceView<'_, f64>> = (0..count).map(|_| (&db).into()).collect();
        let mut c_list = vec![(&mut dc).into()];
        if count == 2 {
            c_list.push((&mut dc2).into());
        }
        let e = Gemm::new().pack(true).run_grouped_device(&a_list, &b_list, &mut c_list).unwrap_err();
        assert!(matches!(e, Error::Pack { .. }), "{e}");
    }
    // Strided, of two products (A and B broadcast, C two matrices apart).
    let twice: Vec<f64> = before.as_slice().iter().chain(before.as_slice()).copied().collect();
    let buffer = dev.stream().clone_htod(&twice).unwrap();
    let mut c2 = DeviceMatrix::from_cuda_slice(&dev, buffer, 40, 20, Layout::RowMajor, 20).unwrap();
    let strided_c = Strided::new(&mut c2, 2, 40 * 20).unwrap();
    let broadcast = |x| Strided::new(x, 2, 0).unwrap();
    let (sa, sb) = (broadcast(&da), broadcast(&db));
    let e = Gemm::new().pack(true).run_strided_device(sa, sb, strided_c).unwrap_err();
    assert!(matches!(e, Error::Pack { .. }), "{e}");
    for d in [&dc, &dc2] {
        assert!(same_bits(d.to_host().unwrap().as_slice(), before.as_slice()));
    }
    let mut c2_host = vec![0.0; 1600];
    dev.stream().memcpy_dtoh(c2.buffer(), &mut c2_host).unwrap();
    assert!(same_bits(&c2_host, &twice));
}
