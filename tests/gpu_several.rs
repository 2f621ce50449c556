//! Host products over a group of GPUs (`Gemm::devices`): each GPU computes
//! its block of C with the whole product's plan, so the result has the
//! bits of the same product on one GPU of the group, for every type, op and
//! layout, split by rows or columns, in core and out of core, from pageable
//! and page-locked memory; C's padding comes back bit for bit; a bad group
//! is a typed error before any copy, with C untouched.
//!
//! Tests named `two_gpus_*` need 2 GPUs and `four_gpus_*` 4, and fail
//! (never pass) with fewer; the others need one. GPU tests:
//! `--include-ignored` (on a one-GPU machine add `--skip two_gpus --skip
//! four_gpus`).

mod common;

use common::{device, same_bits, seed, store, Variant};
use gemm::check::{random_matrix, Reference};
use gemm::emulation::{Emulation, Mode};
use gemm::half::{bf16, f16};
use gemm::{Device, Error, Gemm, Layout, Matrix, Op, Product, Scalar};
use std::sync::Arc;

/// GPUs 0 and 1, or a panic naming how many there are.
fn two_gpus() -> Vec<Arc<Device>> {
    let first = device();
    match Device::new(1) {
        Ok(second) => vec![first, second],
        Err(e) => panic!("this test needs 2 GPUs: {e}"),
    }
}

/// GPUs 0 to 3, or a panic naming how many there are.
fn four_gpus() -> Vec<Arc<Device>> {
    (0..4).map(|i| Device::new(i).unwrap_or_else(|e| panic!("this test needs 4 GPUs; GPU {i}: {e}"))).collect()
}

/// The bytes of a matrix's storage (the element types are plain data).
fn bytes<T: Scalar>(x: &Matrix<T>) -> &[u8] {
    let s = x.as_slice();
    // SAFETY: Scalar types are plain data without padding.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
}

/// The product of random `T` operands (stored as `v` says, padded, padding
/// NaN) on `group` and on its first GPU alone: the same bits in C, C's
/// padding (poisoned) unchanged. Returns the operands and both results.
#[allow(clippy::type_complexity)]
fn same_as_one_gpu<T: Product<C>, C: Scalar>(
    base: &Gemm,
    group: &[Arc<Device>],
    (m, n, k): (usize, usize, usize),
    v: Variant,
    beta: f64,
    what: &str,
) -> (Matrix<T>, Matrix<T>, Matrix<C>, Matrix<C>) {
    let (a, b, c0) =
        (random_matrix::<T>(m, k, seed()), random_matrix::<T>(k, n, seed()), random_matrix::<C>(m, n, seed()));
    let (sa, sb) = (store(&a, v.op_a, v.a, 3, T::POISON), store(&b, v.op_b, v.b, 1, T::POISON));
    let before = store(&c0, Op::N, v.c, 2, C::POISON);
    let g = base.clone().op_a(v.op_a).op_b(v.op_b).alpha(-2.0).beta(beta);
    let mut one = before.clone();
    g.clone().device(&group[0]).run(&sa, &sb, &mut one).unwrap_or_else(|e| panic!("{what} {v}, one GPU: {e}"));
    let mut several = before.clone();
    g.devices(group).run(&sa, &sb, &mut several).unwrap_or_else(|e| panic!("{what} {v}, {} GPUs: {e}", group.len()));
    assert!(bytes(&several) == bytes(&one), "{what} {m}x{n}x{k} {v} beta {beta}: {} GPUs differ from one", group.len());
    // Padding: every storage position that is not an element keeps its bits.
    let mut expect = several.clone();
    for i in 0..m {
        for j in 0..n {
            expect[(i, j)] = before[(i, j)];
        }
    }
    assert!(bytes(&expect) == bytes(&before), "{what} {v}: C's padding changed");
    (a, b, c0, several)
}

/// [`same_as_one_gpu`] for f64, also within the reference's bound.
fn f64_checked(base: &Gemm, group: &[Arc<Device>], shape: (usize, usize, usize), v: Variant, beta: f64, what: &str) {
    let (a, b, c0, c) = same_as_one_gpu::<f64, f64>(base, group, shape, v, beta, what);
    let cmp = Reference::new(-2.0, &a, &b, beta, &c0).compare(&c);
    assert!(cmp.passed(), "{what} {shape:?} {v} beta {beta}: {cmp}");
}

#[test]
#[ignore = "needs a GPU"]
fn a_group_of_one_is_its_device() {
    let dev = device();
    for v in [Variant::NN, Variant::all()[21]] {
        f64_checked(&Gemm::new(), std::slice::from_ref(&dev), (333, 200, 129), v, 0.5, "f64");
        same_as_one_gpu::<bf16, f32>(&Gemm::new(), std::slice::from_ref(&dev), (300, 130, 64), v, 0.0, "bf16 -> f32");
    }
    let plan = Gemm::new().devices(std::slice::from_ref(&dev)).plan_for::<f64, f64>(4096, 4096, 4096).unwrap();
    assert!(plan.devices.is_none(), "a group of one is not split: {plan}");
}

#[test]
#[ignore = "needs a GPU"]
fn bad_groups_are_typed_errors_before_any_copy() {
    let dev = device();
    let (a, b) = (Matrix::<f64>::filled(64, 32, 1.0), Matrix::<f64>::filled(32, 48, 1.0));
    let before = Matrix::<f64>::filled(64, 48, f64::from_bits(0x7ff8_dead_beef_0003));
    let twice = [dev.clone(), dev.clone()];
    let stream = dev.context().new_stream().unwrap();
    let cases: [(&str, Gemm); 3] = [
        ("empty", Gemm::new().devices(&[])),
        ("listed twice", Gemm::new().devices(&twice)),
        ("with .device", Gemm::new().device(&dev).devices(std::slice::from_ref(&dev))),
    ];
    for (what, g) in cases {
        let mut c = before.clone();
        let e = g.clone().beta(1.0).run(&a, &b, &mut c).unwrap_err();
        assert!(matches!(e, Error::DeviceGroup { .. }), "{what}: {e}");
        assert!(same_bits(c.as_slice(), before.as_slice()), "{what}: C changed");
        assert!(matches!(g.plan_for::<f64, f64>(64, 48, 32), Err(Error::DeviceGroup { .. })), "{what}: plan_for");
    }
    // A stream with a group of one is that GPU's stream: allowed.
    let mut c = before.clone();
    Gemm::new().devices(std::slice::from_ref(&dev)).stream(&stream).run(&a, &b, &mut c).unwrap();
    assert!(c.as_slice().iter().all(|&x| x == 32.0));
    // A group does not apply to device matrices.
    let (da, db) = (gemm::DeviceMatrix::from_host(&dev, &a).unwrap(), gemm::DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut dc = gemm::DeviceMatrix::<f64>::zeros(&dev, 64, 48).unwrap();
    let e = Gemm::new().devices(&twice).run_device(&da, &db, &mut dc).unwrap_err();
    assert!(matches!(e, Error::DeviceGroup { .. }), "device matrices: {e}");
}

#[test]
#[ignore = "needs 2 GPUs"]
fn two_gpus_f64_every_op_and_layout_has_the_one_gpu_bits() {
    let gpus = two_gpus();
    for (i, v) in Variant::all().into_iter().enumerate() {
        let beta = if i % 3 == 0 { 0.0 } else { 0.75 };
        // Split by rows (m >= n), by columns (n > m), and C smaller than
        // one 128-row block (one GPU idle).
        f64_checked(&Gemm::new(), &gpus, (300, 257, 129), v, beta, "rows");
        f64_checked(&Gemm::new(), &gpus, (70, 700, 50), v, beta, "columns");
        if i % 8 == 0 {
            f64_checked(&Gemm::new(), &gpus, (100, 50, 33), v, beta, "one block");
        }
    }
}

#[test]
#[ignore = "needs 2 GPUs"]
fn two_gpus_every_type_has_the_one_gpu_bits() {
    let gpus = two_gpus();
    let g = Gemm::new();
    for (shape, v) in [((1000, 900, 700), Variant::NN), ((200, 3000, 300), Variant::all()[27])] {
        same_as_one_gpu::<f32, f32>(&g, &gpus, shape, v, 0.5, "f32");
        same_as_one_gpu::<f32, f32>(&g.clone().allow_tf32(true), &gpus, shape, v, 0.5, "TF32");
        same_as_one_gpu::<f16, f32>(&g, &gpus, shape, v, 0.5, "f16 -> f32");
        same_as_one_gpu::<f16, f16>(&g, &gpus, shape, v, 0.0, "f16 -> f16");
        same_as_one_gpu::<bf16, bf16>(&g, &gpus, shape, v, 0.5, "bf16 -> bf16");
        same_as_one_gpu::<bf16, f32>(&g, &gpus, shape, v, 0.0, "bf16 -> f32");
        same_as_one_gpu::<i8, i32>(&g, &gpus, shape, v, 1.0, "i8 -> i32");
        let fast = g.clone().emulation(Emulation::new(15).unwrap());
        same_as_one_gpu::<f64, f64>(&fast, &gpus, shape, v, 0.5, "f64 emulated");
        // The accurate mode's scales depend on all of C: it runs on the first GPU alone.
        let accurate = g.clone().emulation(Emulation::new(15).unwrap().mode(Mode::Accurate));
        same_as_one_gpu::<f64, f64>(&accurate, &gpus, shape, v, 0.5, "f64 emulated, accurate");
    }
}

#[test]
#[ignore = "needs 2 GPUs"]
fn two_gpus_out_of_core_and_page_locked() {
    let gpus = two_gpus();
    let (m, n, k) = (1200, 1000, 1500);
    // A budget (per GPU) far below its share of A, B and C: k in chunks.
    let budget = Gemm::new().memory_budget(2 << 20).host_streams(3);
    same_as_one_gpu::<f64, f64>(&budget, &gpus, (m, n, k), Variant::NN, 0.5, "out of core");
    same_as_one_gpu::<bf16, bf16>(&budget, &gpus, (m, n, k), Variant::all()[9], 0.0, "out of core bf16");
    let (a, b) = (random_matrix::<f64>(m, k, seed()), random_matrix::<f64>(k, n, seed()));
    let (pa, pb) = (a.to_pinned(&gpus[0]).unwrap(), b.to_pinned(&gpus[0]).unwrap());
    let mut one = Matrix::<f64>::pinned(&gpus[0], m, n, Layout::ColMajor).unwrap();
    one.fill(f64::NAN);
    let mut several = one.clone();
    Gemm::new().device(&gpus[0]).run(&pa, &pb, &mut one).unwrap();
    Gemm::new().devices(&gpus).run(&pa, &pb, &mut several).unwrap();
    assert!(same_bits(several.as_slice(), one.as_slice()), "page-locked");
}

#[test]
#[ignore = "needs 2 GPUs"]
fn two_gpus_plan_says_the_split() {
    let gpus = two_gpus();
    let g = Gemm::new().devices(&gpus);
    let tall = g.plan_for::<f64, f64>(16384, 16384, 16384).unwrap();
    let split = tall.devices.as_ref().expect("split over 2 GPUs");
    assert_eq!((split.grid.rows, split.grid.cols), (2, 1));
    assert_eq!((split.blocks[0].rows.clone(), split.blocks[1].rows.clone()), (0..8192, 8192..16384));
    assert!(tall.to_string().contains("C over 2 GPUs as a 2 x 1 grid"), "{tall}");
    let wide = g.plan_for::<bf16, f32>(256, 20000, 4096).unwrap();
    assert_eq!(wide.devices.as_ref().map(|s| (s.grid.rows, s.grid.cols)), Some((1, 2)), "{wide}");
    let accurate = g.clone().emulation(Emulation::new(14).unwrap().mode(Mode::Accurate));
    let whole = accurate.plan_for::<f64, f64>(4096, 4096, 4096).unwrap();
    assert_eq!(whole.devices.as_ref().map(|s| s.blocks.len()), Some(1), "{whole}");
}

#[test]
#[ignore = "needs 4 GPUs"]
fn four_gpus_every_type_has_the_one_gpu_bits() {
    let gpus = four_gpus();
    let g = Gemm::new();
    let plan = g.clone().devices(&gpus).plan_for::<f64, f64>(8192, 8192, 8192).unwrap();
    assert_eq!(plan.devices.as_ref().map(|s| (s.grid.rows, s.grid.cols)), Some((2, 2)), "{plan}");
    // A 2 x 2 grid (square C), 1 x 4 (wide C) and 4 x 1 (tall C).
    for (shape, v) in
        [((1000, 900, 700), Variant::NN), ((200, 3000, 300), Variant::all()[27]), ((3000, 130, 64), Variant::all()[6])]
    {
        for (i, v) in [v, Variant::all()[13]].into_iter().enumerate() {
            f64_checked(&g, &gpus, shape, v, if i == 0 { 0.0 } else { 0.5 }, "f64");
        }
        same_as_one_gpu::<f32, f32>(&g, &gpus, shape, v, 0.5, "f32");
        same_as_one_gpu::<bf16, bf16>(&g, &gpus, shape, v, 0.5, "bf16 -> bf16");
        same_as_one_gpu::<f16, f32>(&g, &gpus, shape, v, 0.0, "f16 -> f32");
        same_as_one_gpu::<i8, i32>(&g, &gpus, shape, v, 1.0, "i8 -> i32");
    }
}
