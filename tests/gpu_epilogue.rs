//! Fused epilogues and scales ([`gemm::Epilogue`]): row and column scales,
//! a bias by row or column (f32 or C's type), ReLU and GELU, per-tensor
//! scales, and FP8 block scales, for bf16, f16, TF32 and e4m3 operands on
//! stage 9 and f64 and f32 on the ladder's fused kernels, against a CPU
//! reference in f64; odd and rectangular sizes,
//! every layout of A, B and C, padded leading dimensions (guards come back
//! bit for bit; unaligned ones take the threads' stores instead of TMA's),
//! NaN-poisoned C with beta = 0, the host door against the device door, and
//! typed errors that leave C untouched. GPU tests: `--include-ignored`.
//!
//! Inputs are multiples of 1/4 in [-1, 1] (exact in every operand type), so
//! each product over k is exact in the f32 accumulator (k <= 1024); what
//! remains is the epilogue's few f32 roundings, the activation (GELU within
//! 2^-20 |v|; on a 16-bit C, whose GELU takes the SFU's tanh, 2^-12 |v|),
//! and C's rounding: per element |C - C_ref| <= 1.2 (2^-21
//! (|alpha s dot| + |beta C0| + |bias|) + g |v| + e8) + u_C |C_ref| +
//! 2^-30 with g = 2^-20 (2^-11 for GELU on a 16-bit C: twice its bound)
//! (for an f64 C: 2^-50, 2^-49 and 2^-60 in place of 2^-21, 2^-20
//! and 2^-30), v the value before the activation, e8 = 2^-9 |alpha s rs cs|
//! (|A||B|) for e4m3 (FP8's accumulation within a k-tile) and 0 otherwise.
//! Block-scaled products add the FP8 accumulation term 2^-9 sum_kb |sa sb|
//! (|A||B|)_kb (none here: the inputs keep each k-tile exact).

mod common;

use common::{block_dots, device, dots, store, Rng};
use gemm::float8::F8E4M3;
use gemm::half::{bf16, f16};
use gemm::{
    Activation, Along, Bias, BlockScales, DeviceMatrix, Epilogue, Error, Gemm, Layout, Matrix, Op, Product, Scalar,
};

const R: Layout = Layout::RowMajor;
const C: Layout = Layout::ColMajor;

/// Whether storage index `at` of a matrix is padding (outside its elements).
fn is_padding<T: Scalar>(m: &Matrix<T>, at: usize) -> bool {
    let (lines, line) = if m.layout() == R { (m.rows(), m.cols()) } else { (m.cols(), m.rows()) };
    at / m.ld() >= lines || at % m.ld() >= line
}

/// An element's bits (any Scalar: 1 to 8 bytes), for bit-for-bit checks.
fn bits<T: Scalar>(x: T) -> u64 {
    let mut out = 0u64;
    // SAFETY: copies size_of::<T>() <= 8 bytes of a plain value.
    unsafe {
        std::ptr::copy_nonoverlapping(&x as *const T as *const u8, &mut out as *mut u64 as *mut u8, size_of::<T>())
    };
    out
}

/// GELU's error bound relative to |v| that the checks allow on a 16-bit C
/// (stage 9's GELU there uses the SFU's `tanh.approx.f32`, relative error
/// about 2^-11: within 2^-12 |v|; twice that).
const GELU_16: f64 = 1.0 / 2048.0;

/// GELU, tanh approximation, in f64.
fn gelu(v: f64) -> f64 {
    0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh())
}

fn act(a: Activation, v: f64) -> f64 {
    match a {
        Activation::None => v,
        Activation::Relu => {
            if v < 0.0 {
                0.0
            } else {
                v
            }
        }
        Activation::Gelu => gelu(v),
    }
}

/// What one case fuses (host values; the device door gets them as cudarc
/// buffers when `device_inputs`).
#[derive(Clone, Debug)]
struct Case {
    dims: (usize, usize, usize),
    layouts: (Layout, Layout, Layout),
    pad: usize,
    alpha_beta: (f64, f64),
    /// Per-tensor scales of A and B.
    tensor: Option<(f32, f32)>,
    row_scales: bool,
    col_scales: bool,
    bias: Option<(Along, bool)>, // (along, in C's type)
    activation: Activation,
    device_inputs: bool,
}

impl Case {
    fn new(dims: (usize, usize, usize)) -> Case {
        Case {
            dims,
            layouts: (R, R, R),
            pad: 0,
            alpha_beta: (1.0, 0.0),
            tensor: None,
            row_scales: false,
            col_scales: false,
            bias: None,
            activation: Activation::None,
            device_inputs: false,
        }
    }
}

/// Runs `case` with `T` operands into a `C` (through `gemm`, which may
/// allow TF32) and checks every element and guard.
fn check<T: Product<Cc>, Cc: Scalar>(gemm: &Gemm, case: &Case, seed: u64) {
    let what = format!("{} -> {} {case:?}", T::NAME, Cc::NAME);
    let (m, n, k) = case.dims;
    let (la, lb, lc) = case.layouts;
    let (alpha, beta) = case.alpha_beta;
    let mut r = Rng::new(seed);
    let quarter = |r: &mut Rng| (r.below(9) as f64 - 4.0) / 4.0;
    let a = store(&Matrix::from_fn(m, k, |_, _| T::from_f64(quarter(&mut r))), Op::N, la, case.pad, T::POISON);
    let b = store(&Matrix::from_fn(k, n, |_, _| T::from_f64(quarter(&mut r))), Op::N, lb, case.pad, T::POISON);
    let c0 = store(
        &Matrix::from_fn(m, n, |_, _| if beta == 0.0 { Cc::POISON } else { Cc::from_f64(quarter(&mut r)) }),
        Op::N,
        lc,
        case.pad,
        Cc::POISON,
    );
    let mut vec_of = |len: usize, lo: f64| -> Vec<f32> { (0..len).map(|_| (lo + r.uniform().abs()) as f32).collect() };
    let rows = vec_of(m, 0.5);
    let cols = vec_of(n, 0.5);
    let bias_len = match case.bias {
        Some((Along::Rows, _)) => m,
        _ => n,
    };
    let bias32: Vec<f32> = vec_of(bias_len, -1.0);
    // A bias in C's type: the f32 values rounded to it (the reference uses
    // the rounded ones).
    let bias_c: Vec<Cc> = bias32.iter().map(|&x| Cc::from_f64(x as f64)).collect();
    let bias_value = |i: usize| -> f64 {
        match case.bias {
            Some((_, true)) => bias_c[i].as_f64(),
            Some((_, false)) => bias32[i] as f64,
            None => 0.0,
        }
    };
    let dev = device();
    let stream = dev.stream();
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut dc = DeviceMatrix::from_host(&dev, &c0).unwrap();
    let d_rows = stream.clone_htod(&rows).unwrap();
    let d_cols = stream.clone_htod(&cols).unwrap();
    let d_bias32 = stream.clone_htod(&bias32).unwrap();
    // Bias in C's type as f16 / bf16 values (C is one of them then).
    let bias_f16: Vec<f16> = bias_c.iter().map(|x| f16::from_f64(x.as_f64())).collect();
    let bias_bf16: Vec<bf16> = bias_c.iter().map(|x| bf16::from_f64(x.as_f64())).collect();
    let d_bias_f16 = stream.clone_htod(&bias_f16).unwrap();
    let d_bias_bf16 = stream.clone_htod(&bias_bf16).unwrap();
    let bias_f64: Vec<f64> = bias_c.iter().map(|x| x.as_f64()).collect();
    let d_bias_f64 = stream.clone_htod(&bias_f64).unwrap();
    let mut e = Epilogue::new().activation(case.activation);
    if let Some((sa, sb)) = case.tensor {
        e = e.scale_a(sa).scale_b(sb);
    }
    if case.row_scales {
        e = if case.device_inputs { e.row_scales(&d_rows) } else { e.row_scales(&rows) };
    }
    if case.col_scales {
        e = if case.device_inputs { e.col_scales(&d_cols) } else { e.col_scales(&cols) };
    }
    if let Some((along, c_type)) = case.bias {
        let bias: Bias = match (c_type, Cc::NAME, case.device_inputs) {
            (false, _, true) => (&d_bias32).into(),
            (false, _, false) => (&bias32).into(),
            (true, "f16", true) => Bias::f16(&d_bias_f16),
            (true, "f16", false) => Bias::f16(&bias_f16),
            (true, "bf16", true) => Bias::bf16(&d_bias_bf16),
            (true, "bf16", false) => Bias::bf16(&bias_bf16),
            (true, "f64", true) => Bias::f64(&d_bias_f64),
            (true, "f64", false) => Bias::f64(&bias_f64),
            // f32's own type is f32.
            (true, "f32", true) => (&d_bias32).into(),
            (true, "f32", false) => (&bias32).into(),
            (true, other, _) => panic!("no bias of C's type {other}"),
        };
        e = e.bias(along, bias);
    }
    let g = gemm.clone().alpha(alpha).beta(beta);
    // A split k (scales alone: each slice scales its own sum) rounds each
    // slice's scaled sum and their sum in f32.
    let slices = g.epilogue(&e).plan_for::<T, Cc>(m, n, k).map_or(1, |p| p.split_k) as f64;
    g.epilogue(&e).run_device(&da, &db, &mut dc).unwrap_or_else(|err| panic!("{what}: {err}"));
    let c = dc.to_host().unwrap();
    // The host door: the same bits.
    let mut hc = c0.clone();
    g.epilogue(&e).run(&a, &b, &mut hc).unwrap_or_else(|err| panic!("{what} (host door): {err}"));
    for (at, (x, y)) in hc.as_slice().iter().zip(c.as_slice()).enumerate() {
        assert!(bits(*x) == bits(*y), "{what}: the host door's C at {at} is {x:?}, the device door's {y:?}");
    }
    for (at, (x, y)) in c.as_slice().iter().zip(c0.as_slice()).enumerate() {
        if is_padding(&c, at) {
            assert!(bits(*x) == bits(*y), "{what}: C's padding at {at} changed to {x:?}");
        }
    }
    let s = case.tensor.map_or(1.0, |(sa, sb)| sa as f64 * sb as f64);
    let u_c = Cc::EPSILON / 2.0;
    let (dots, sums_abs) = dots(&a, &b);
    for i in 0..m {
        for j in 0..n {
            let (dot, abs) = (dots[i * n + j], sums_abs[i * n + j]);
            let rs = if case.row_scales { rows[i] as f64 } else { 1.0 };
            let cs = if case.col_scales { cols[j] as f64 } else { 1.0 };
            let old = if beta == 0.0 { 0.0 } else { c0[(i, j)].as_f64() };
            let bias = match case.bias {
                Some((Along::Rows, _)) => bias_value(i),
                Some((Along::Columns, _)) => bias_value(j),
                None => 0.0,
            };
            let t1 = alpha * s * rs * cs * dot;
            let v = t1 + beta * old + bias;
            let want = act(case.activation, v);
            let got = c[(i, j)].as_f64();
            // FP8's accumulation within a k-tile keeps fewer bits than f32.
            let fp8 = if T::NAME == "e4m3" { 2f64.powi(-9) * (alpha * s * rs * cs).abs() * abs } else { 0.0 };
            // f64 computes the epilogue in f64 (GELU within a few ulps).
            let (e1, e2, floor) = if Cc::NAME == "f64" {
                (2f64.powi(-50), 2f64.powi(-49), 2f64.powi(-60))
            } else if size_of::<Cc>() == 2 && case.activation == Activation::Gelu {
                (2f64.powi(-21), GELU_16, 2f64.powi(-30))
            } else {
                (2f64.powi(-21), 2f64.powi(-20), 2f64.powi(-30))
            };
            let split =
                if slices > 1.0 { (slices + 1.0) * 2f64.powi(-24) * (alpha * s * rs * cs).abs() * abs } else { 0.0 };
            let tol = 1.2 * (e1 * (t1.abs() + (beta * old).abs() + bias.abs()) + e2 * v.abs() + fp8 + split)
                + u_c * want.abs()
                + floor;
            assert!(
                (got - want).abs() <= tol,
                "{what}: C({i}, {j}) = {got}, want {want} (before the activation {v}, tolerance {tol})"
            );
        }
    }
}

/// The epilogue variants every type runs: each input alone and together,
/// every activation, host and device inputs.
fn variants(base: &Case, c_type_bias: bool) -> Vec<Case> {
    let mut out = Vec::new();
    for activation in [Activation::None, Activation::Relu, Activation::Gelu] {
        out.push(Case { activation, bias: Some((Along::Columns, false)), ..base.clone() });
    }
    out.push(Case { bias: Some((Along::Rows, false)), row_scales: true, device_inputs: true, ..base.clone() });
    out.push(Case { col_scales: true, tensor: Some((0.5, 3.0)), activation: Activation::Relu, ..base.clone() });
    out.push(Case {
        row_scales: true,
        col_scales: true,
        bias: Some((Along::Columns, c_type_bias)),
        activation: Activation::Gelu,
        alpha_beta: (0.75, -0.5),
        device_inputs: true,
        ..base.clone()
    });
    out
}

fn shapes_and_layouts() -> Vec<Case> {
    let mut out = Vec::new();
    for dims in [(1, 1, 1), (7, 33, 31), (129, 65, 257), (200, 136, 64)] {
        for (layouts, pad) in [((R, R, R), 0), ((C, R, C), 0), ((R, C, R), 3), ((C, C, C), 1)] {
            out.push(Case { layouts, pad, ..Case::new(dims) });
        }
    }
    // A token-sized product (its own route) and a multi-wave one.
    out.push(Case { layouts: (R, C, R), ..Case::new((16, 1024, 256)) });
    out.push(Case { layouts: (R, R, R), ..Case::new((1000, 520, 136)) });
    out
}

#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn bf16_and_f16_epilogues_every_shape_and_layout() {
    let g = Gemm::new();
    for (at, base) in shapes_and_layouts().iter().enumerate() {
        for (v, case) in variants(base, true).iter().enumerate() {
            let seed = (at * 16 + v) as u64;
            check::<bf16, bf16>(&g, case, seed);
            check::<f16, f32>(&g, &Case { bias: case.bias.map(|(a, _)| (a, false)), ..case.clone() }, seed);
        }
    }
    let base = Case { layouts: (R, C, R), ..Case::new((129, 65, 257)) };
    for case in variants(&base, true) {
        check::<f16, f16>(&g, &case, 3);
        check::<bf16, f32>(&g, &Case { bias: case.bias.map(|(a, _)| (a, false)), ..case.clone() }, 4);
    }
}

/// The 128 x 256 tile's fused kernels (the plain product's tile at this
/// size, `Fused::plan_for` says so): the richest variant (row and column
/// scales, a bias of C's type, GELU, alpha and beta) in every layout, C
/// stored by TMA (row-major, unpadded) and by the threads (padded, or
/// column-major), bf16 -> bf16 and f16 -> f32.
#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn wide_tiles_fuse_every_layout() {
    let g = Gemm::new();
    let (m, n, k) = (1535, 2560, 136);
    let plan = g.epilogue(&Epilogue::new().activation(Activation::Gelu)).plan_for::<bf16, bf16>(m, n, k).unwrap();
    assert!(plan.to_string().contains("b128x256"), "{plan}");
    for (at, (layouts, pad)) in [((R, R, R), 0), ((C, R, C), 0), ((R, C, R), 3), ((C, C, C), 1)].into_iter().enumerate()
    {
        let base = Case { layouts, pad, ..Case::new((m, n, k)) };
        let case = variants(&base, true).pop().expect("the richest variant");
        check::<bf16, bf16>(&g, &case, 60 + at as u64);
        check::<f16, f32>(&g, &Case { bias: case.bias.map(|(a, _)| (a, false)), ..case.clone() }, 70 + at as u64);
    }
}

/// f64 on stage 8's fused kernels and f32 (without TF32) on stage 7's,
/// which run on any device: every variant at every shape and layout (C
/// padded, column-major, NaN-poisoned with beta = 0), and products large
/// enough for the 128 x 128 tiles (whose f64 GELU runs eight elements at a
/// time from local memory) and for f32's packed operands (a column-major B
/// with padded leading dimensions).
#[test]
#[ignore = "needs a GPU"]
fn f64_and_f32_epilogues_on_the_ladder() {
    let g = Gemm::new();
    let mut kernels = std::collections::BTreeSet::new();
    let mut shapes = shapes_and_layouts();
    shapes.push(Case { layouts: (C, R, R), pad: 1, ..Case::new((1100, 1030, 300)) });
    shapes.push(Case { layouts: (R, C, C), ..Case::new((2048, 1536, 64)) });
    shapes.push(Case { layouts: (R, C, R), pad: 1, ..Case::new((1030, 1100, 520)) });
    let mut packed = 0;
    for (at, base) in shapes.iter().enumerate() {
        for (v, case) in variants(base, true).iter().enumerate() {
            let seed = 500 + (at * 16 + v) as u64;
            check::<f64, f64>(&g, case, seed);
            check::<f32, f32>(&g, case, seed + 1);
        }
        // The plans of A's and B's layouts (a column-major operand is a
        // transposed row-major one), C row-major.
        let e = Epilogue::new().activation(Activation::Gelu);
        let op = |l: Layout| if l == C { Op::T } else { Op::N };
        let g = Gemm::new().op_a(op(base.layouts.0)).op_b(op(base.layouts.1));
        for plan in [
            g.epilogue(&e).plan_for::<f64, f64>(base.dims.0, base.dims.1, base.dims.2).unwrap(),
            g.epilogue(&e).plan_for::<f32, f32>(base.dims.0, base.dims.1, base.dims.2).unwrap(),
        ] {
            let kernel = plan.why.split(['(', ':']).find(|w| w.ends_with("_fused")).map(str::trim).map(String::from);
            kernels.insert(kernel.unwrap_or_else(|| panic!("no fused kernel in {plan}")));
            packed += !plan.copies.is_empty() as usize;
        }
    }
    println!("fused ladder kernels run: {kernels:?}; {packed} products on packed operands");
    assert!(kernels.iter().any(|k| k.starts_with("dgemm_mma_")) && kernels.iter().any(|k| k.starts_with("sgemm_")));
    assert!(packed > 0, "no fused product read packed operands");
}

#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn tf32_and_e4m3_epilogues() {
    let tf32 = Gemm::new().allow_tf32(true);
    for base in shapes_and_layouts() {
        for case in variants(&base, false) {
            check::<f32, f32>(&tf32, &case, 5);
        }
    }
    let g = Gemm::new();
    for base in shapes_and_layouts() {
        for case in variants(&base, true) {
            check::<F8E4M3, bf16>(&g, &case, 6);
            check::<F8E4M3, f32>(&g, &Case { bias: case.bias.map(|(a, _)| (a, false)), ..case.clone() }, 7);
        }
    }
}

/// One block-scaled e4m3 product against the reference: A's scales per
/// `a_rows` rows (1 or 128) and 128 of k, B's per 128 x 128, in the
/// default layouts or transposed ones (`row_major_scales`).
fn check_block_scaled(
    dims: (usize, usize, usize),
    layouts: (Layout, Layout, Layout),
    a_rows: usize,
    row_major_scales: bool,
    seed: u64,
) {
    check_block_scaled_at(dims, layouts, a_rows, row_major_scales, seed, None);
}

/// The plan of a block-scaled e4m3 -> f32 product of these dimensions
/// (A's scales one a row).
fn block_scaled_plan((m, n, k): (usize, usize, usize)) -> gemm::ProductPlan {
    let (sa, sb) = (vec![1f32; m * k.div_ceil(128)], vec![1f32; n.div_ceil(128) * k.div_ceil(128)]);
    Gemm::new()
        .epilogue(&Epilogue::new().block_scales(BlockScales::new(&sa, &sb)))
        .plan_for::<F8E4M3, f32>(m, n, k)
        .unwrap()
}

/// [`check_block_scaled`], A's scales passed from host memory (`None`) or
/// from a device buffer at an offset of `a_offset` elements (a view).
fn check_block_scaled_at(
    (m, n, k): (usize, usize, usize),
    (la, lb, lc): (Layout, Layout, Layout),
    a_rows: usize,
    row_major_scales: bool,
    seed: u64,
    a_offset: Option<usize>,
) {
    let what = format!(
        "block-scaled e4m3 -> f32 {m}x{n}x{k} {la:?}/{lb:?}/{lc:?} a_rows {a_rows} {row_major_scales} A's scales at {a_offset:?}"
    );
    let mut r = Rng::new(seed);
    // Random e4m3 values: each k-tile's sum is then not exact in FP8's
    // accumulation, whose bound the check uses.
    let a = store(&Matrix::from_fn(m, k, |_, _| F8E4M3::from_f64(2.0 * r.uniform())), Op::N, la, 0, F8E4M3::POISON);
    let b = store(&Matrix::from_fn(k, n, |_, _| F8E4M3::from_f64(2.0 * r.uniform())), Op::N, lb, 0, F8E4M3::POISON);
    let c0 = store(&Matrix::from_fn(m, n, |_, _| f32::NAN), Op::N, lc, 2, f32::NAN);
    let (mb, nb, kb) = (m.div_ceil(a_rows), n.div_ceil(128), k.div_ceil(128));
    let sa: Vec<f32> = (0..mb * kb).map(|_| (1.25 + 0.75 * r.uniform()) as f32).collect();
    let sb: Vec<f32> = (0..nb * kb).map(|_| (1.25 + 0.75 * r.uniform()) as f32).collect();
    // Element (ib, kb) of A's scales and (jb, kb) of B's in the layout used.
    let a_at = |i: usize, q: usize| if row_major_scales { i * kb + q } else { q * mb + i };
    let b_at = |j: usize, q: usize| if row_major_scales { q * nb + j } else { j * kb + q };
    let dev = device();
    let d_sa = a_offset.map(|o| {
        let padded: Vec<f32> = std::iter::repeat_n(f32::NAN, o).chain(sa.iter().copied()).collect();
        (dev.stream().clone_htod(&padded).unwrap(), o)
    });
    let mut scales = match &d_sa {
        Some((d, o)) => BlockScales::new(d.slice(*o..), &sb),
        None => BlockScales::new(&sa, &sb),
    }
    .a_rows(a_rows);
    if row_major_scales {
        scales = scales.a_strides(kb, 1).b_strides(1, nb);
    }
    let e = Epilogue::new().block_scales(scales);
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut dc = DeviceMatrix::from_host(&dev, &c0).unwrap();
    Gemm::new().epilogue(&e).run_device(&da, &db, &mut dc).unwrap_or_else(|err| panic!("{what}: {err}"));
    let c = dc.to_host().unwrap();
    for (at, (x, y)) in c.as_slice().iter().zip(c0.as_slice()).enumerate() {
        if is_padding(&c, at) {
            assert!(bits(*x) == bits(*y), "{what}: C's padding at {at} changed");
        }
    }
    let mut worst = 0f64;
    let blocks = block_dots(&a, &b, 128);
    for i in 0..m {
        for j in 0..n {
            let (mut want, mut bound) = (0f64, 0f64);
            for (q, (dots, sums_abs)) in blocks.iter().enumerate() {
                let s = sa[a_at(i / a_rows, q)] as f64 * sb[b_at(j / 128, q)] as f64;
                let (dot, abs) = (dots[i * n + j], sums_abs[i * n + j]);
                want += s * dot;
                bound += s * abs;
            }
            let got = c[(i, j)] as f64;
            // FP8 accumulation within a k-tile, then an f32 rounding per
            // promotion and, split along k, per slice summed (at most kb).
            let tol = 2f64.powi(-9) * bound + 2f64.powi(-23) * (2.0 * kb as f64 + 1.0) * bound + 1e-30;
            assert!((got - want).abs() <= tol, "{what}: C({i}, {j}) = {got}, want {want} (tolerance {tol})");
            if bound > 0.0 {
                worst = worst.max((got - want).abs() / bound);
            }
        }
    }
    println!("{what}: max |C - C_ref| / sum |sa sb| |A||B| = {worst:.3e}");
}

#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn e4m3_block_scales_every_layout() {
    for dims in [(1, 1, 1), (129, 200, 300), (256, 128, 1024), (64, 2112, 512)] {
        for layouts in [(R, C, R), (R, R, R), (C, C, C), (C, R, R)] {
            check_block_scaled(dims, layouts, 1, false, 21);
        }
        check_block_scaled(dims, (R, C, R), 128, false, 22);
        check_block_scaled(dims, (R, C, C), 128, true, 23);
        check_block_scaled(dims, (R, C, R), 1, true, 24);
    }
    // A product on the 128 x 128 tile (its producer stages the scales in
    // shared memory), the last tile row past m.
    let plan_of = |dims| block_scaled_plan(dims).to_string();
    let dims = (1000, 1900, 700);
    assert!(plan_of(dims).contains("_b128x128_d5_"), "{}", plan_of(dims));
    check_block_scaled(dims, (R, C, R), 1, false, 25);
    check_block_scaled(dims, (R, C, C), 128, true, 26);
    // The 128 x 256 tile: each k-tile multiplied and promoted in two halves
    // of 128 columns, B's two scales of a k-tile staged beside A's. Nine
    // tile rows (the last past m); n = 3000 leaves the last column of
    // tiles 184 columns (its second half partly past n), n = 2900 leaves
    // 84 (its second half wholly past n: no B scale is read for it).
    for (i, dims) in [(1100, 3000, 300), (1100, 2900, 300)].into_iter().enumerate() {
        assert!(plan_of(dims).contains("_b128x256_d4_"), "{}", plan_of(dims));
        let seed = 30 + 3 * i as u64;
        check_block_scaled(dims, (R, C, R), 1, false, seed);
        check_block_scaled(dims, (R, C, C), 128, true, seed + 1);
        check_block_scaled(dims, (R, R, R), 128, false, seed + 2);
    }
    // The 192 x 128 tile (three consumers; 1800 rows are 9.4 of its tiles,
    // so the last tile's rows run past m), and an odd shape with B
    // row-major (copied K-major).
    let dims = (1800, 2304, 384);
    assert!(plan_of(dims).contains("_b192x128_"), "{}", plan_of(dims));
    check_block_scaled(dims, (R, C, R), 1, false, 27);
    check_block_scaled(dims, (R, C, C), 128, true, 28);
    check_block_scaled((1850, 2300, 300), (R, R, R), 1, false, 29);
}

/// A's block scales (one a row, DeepGEMM's layout) in a device buffer at
/// an offset: 16-byte aligned, so each block tile's producer copies a
/// k-tile's scales of its rows in one bulk copy, and not (one `cp.async`
/// a scale), on the 128 x 128 and 128 x 256 tiles that stage them, every
/// tile row inside m but for the last (which takes the `cp.async` path).
#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn e4m3_block_scales_at_offsets() {
    for (dims, tile) in [((1024, 1900, 700), "_b128x128_d5_"), ((1100, 3000, 300), "_b128x256_d4_")] {
        let plan = block_scaled_plan(dims).to_string();
        assert!(plan.contains(tile), "{plan}");
        for (i, offset) in [0, 4, 1, 6].into_iter().enumerate() {
            check_block_scaled_at(dims, (R, C, R), 1, false, 50 + i as u64, Some(offset));
        }
    }
}

/// Block scales alone on few block tiles and a long k (DeepGEMM's m = 64
/// and 128 rows): the planner splits k (`plan_for` says so), each slice
/// applying its own k-tiles' scales into the f32 workspace, the reduction
/// summing them into C: on the 128 x 128 tile that stages the scales and
/// on 128 x 64, k a multiple of 128 or not, C by the threads into a padded
/// C (NaN-poisoned, beta 0) and transposed, B row-major (copied).
#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn e4m3_block_scales_split_k() {
    let split_of = |dims| {
        let plan = block_scaled_plan(dims);
        (plan.split_k, plan.to_string())
    };
    for (dims, tile) in
        [((100, 3000, 4096), "_b128x128_d5_"), ((64, 2112, 7168), "_b128x64_"), ((128, 1000, 4100), "_b128x64_")]
    {
        let (split, plan) = split_of(dims);
        assert!(split > 1 && plan.contains(tile) && plan.contains("_fused"), "{plan}");
    }
    check_block_scaled((100, 3000, 4096), (R, C, R), 1, false, 40);
    check_block_scaled((100, 3000, 4096), (R, C, C), 128, true, 41);
    check_block_scaled((64, 2112, 7168), (R, C, R), 1, false, 42);
    check_block_scaled((64, 2112, 7168), (R, R, R), 1, true, 43);
    check_block_scaled((128, 1000, 4100), (R, C, C), 128, false, 44);
    check_block_scaled((128, 1000, 4100), (C, C, R), 1, false, 45);
}

/// Row, column and per-tensor scales without a bias or an activation on
/// few block tiles and a long k: the planner splits k (`plan_for` says
/// so), each slice scaling its own sum into the f32 workspace (FP8 on the
/// staging 128 x 128 tile's `_epilogue` kernel and on 128 x 64; bf16 as
/// the transposed product), the reduction applying alpha and beta (C read
/// with beta 0.5, NaN-poisoned with beta 0, padded, transposed).
#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn scales_alone_split_k() {
    let g = Gemm::new();
    let scaled = |dims, layouts, pad, alpha_beta| Case {
        layouts,
        pad,
        alpha_beta,
        tensor: Some((0.5, 3.0)),
        row_scales: true,
        col_scales: true,
        ..Case::new(dims)
    };
    let (rows, cols) = (vec![1f32; 300], vec![1f32; 4096]);
    let e = Epilogue::new().row_scales(&rows).col_scales(&cols);
    let split = |(m, n, k): (usize, usize, usize), f32_c: bool| {
        let plan = if f32_c {
            g.epilogue(&e).plan_for::<bf16, f32>(m, n, k).unwrap()
        } else {
            g.epilogue(&e).plan_for::<F8E4M3, bf16>(m, n, k).unwrap()
        };
        assert!(plan.split_k > 1, "{plan}");
        plan.to_string()
    };
    assert!(split((64, 4096, 7168), false).contains("_b128x128_d5_nt_epilogue"));
    check::<F8E4M3, bf16>(&g, &scaled((64, 4096, 7168), (R, C, R), 0, (1.0, 0.5)), 90);
    assert!(split((100, 1000, 4100), false).contains("_b128x64_"));
    check::<F8E4M3, f32>(&g, &scaled((100, 1000, 4100), (R, C, C), 3, (1.0, 0.0)), 91);
    assert!(split((64, 2112, 7168), true).contains("transposed product"));
    check::<bf16, f32>(&g, &scaled((64, 2112, 7168), (R, R, R), 0, (2.0, 0.5)), 92);
    split((300, 500, 6000), true);
    let rows_only = Case { col_scales: false, tensor: None, ..scaled((300, 500, 6000), (C, C, R), 2, (1.0, 0.0)) };
    check::<bf16, bf16>(&g, &rows_only, 93);
}

/// The fused FP8 kernels without block scales (`<entry>_epilogue`) of the
/// tiles whose `_fused` kernels stage block scales, 192 x 128, 128 x 128
/// and 128 x 256 (the planner's tiles for these shapes, `plan_for` says so): the
/// richest epilogue variant (row and column scales, a bias, GELU, alpha
/// and beta, per-tensor scales of A and B) into bf16 and f32, C stored by
/// TMA (row-major, unpadded), by the threads (padded) and transposed
/// (column-major).
#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn e4m3_staging_tiles_fuse_every_epilogue() {
    let g = Gemm::new();
    let tiles =
        [((1000, 2304, 200), "_b192x128_"), ((900, 3000, 130), "_b192x128_"), ((1000, 1900, 700), "_b128x128_d5_")];
    let tiles = tiles.into_iter().chain([((1100, 2900, 200), "_b128x256_d4_")]);
    for (at, (dims, tile)) in tiles.into_iter().enumerate() {
        let (m, n, k) = dims;
        let plan = g.epilogue(&Epilogue::new().activation(Activation::Gelu)).plan_for::<F8E4M3, bf16>(m, n, k).unwrap();
        assert!(plan.to_string().contains(tile) && plan.to_string().contains("_epilogue"), "{plan}");
        for (v, (layouts, pad)) in [((R, C, R), 0), ((R, C, R), 3), ((R, C, C), 1)].into_iter().enumerate() {
            let base = Case { layouts, pad, ..Case::new(dims) };
            let case = Case { tensor: Some((0.5, 3.0)), ..variants(&base, false).pop().expect("the richest variant") };
            let seed = 80 + 4 * at as u64 + v as u64;
            check::<F8E4M3, bf16>(&g, &case, seed);
            check::<F8E4M3, f32>(&g, &case, seed + 1);
        }
    }
}

#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn epilogue_errors_leave_c_untouched() {
    let dev = device();
    let (m, n, k) = (64, 48, 32);
    let a = DeviceMatrix::from_host(&dev, &Matrix::from_fn(m, k, |_, _| bf16::from_f64(1.0))).unwrap();
    let b = DeviceMatrix::from_host(&dev, &Matrix::from_fn(k, n, |_, _| bf16::from_f64(1.0))).unwrap();
    let c0 = Matrix::from_fn(m, n, |i, j| bf16::from_f64((i * n + j) as f64));
    let mut c = DeviceMatrix::from_host(&dev, &c0).unwrap();
    let short = vec![1f32; n - 1];
    let cases: Vec<(Epilogue, Gemm, &str)> = vec![
        (Epilogue::new().bias(Along::Columns, &short), Gemm::new(), "a short bias"),
        (Epilogue::new().row_scales(&short), Gemm::new(), "short row scales"),
        (Epilogue::new().bias(Along::Rows, Bias::f16(&[f16::ONE; 64][..])), Gemm::new(), "an f16 bias into bf16"),
        (Epilogue::new().block_scales(BlockScales::new(&short, &short)), Gemm::new(), "block scales on bf16"),
        (Epilogue::new().activation(Activation::Relu), Gemm::new().split_k(2), "a split"),
    ];
    for (e, g, what) in cases {
        let err = g.epilogue(&e).run_device(&a, &b, &mut c).expect_err(what);
        assert!(matches!(err, Error::Epilogue { .. } | Error::Unsupported { .. }), "{what}: {err}");
        let now = c.to_host().unwrap();
        assert!(now.as_slice().iter().zip(c0.as_slice()).all(|(x, y)| bits(*x) == bits(*y)), "{what}: C changed");
    }
    // f64: an f32 bias of the wrong length, an f16 bias, block scales.
    let a64 = DeviceMatrix::from_host(&dev, &Matrix::from_fn(m, k, |_, _| 1.0f64)).unwrap();
    let b64 = DeviceMatrix::from_host(&dev, &Matrix::from_fn(k, n, |_, _| 1.0f64)).unwrap();
    let c64 = Matrix::from_fn(m, n, |i, j| (i * n + j) as f64);
    let mut d64 = DeviceMatrix::from_host(&dev, &c64).unwrap();
    for (e, what) in [
        (Epilogue::new().bias(Along::Columns, &short), "a short bias on f64"),
        (Epilogue::new().bias(Along::Rows, Bias::f16(&[f16::ONE; 64][..])), "an f16 bias into f64"),
        (Epilogue::new().block_scales(BlockScales::new(&short, &short)), "block scales on f64"),
    ] {
        let err = Gemm::new().epilogue(&e).run_device(&a64, &b64, &mut d64).expect_err(what);
        assert!(matches!(err, Error::Epilogue { .. } | Error::Unsupported { .. }), "{what}: {err}");
        let now = d64.to_host().unwrap();
        assert!(now.as_slice().iter().zip(c64.as_slice()).all(|(x, y)| x.to_bits() == y.to_bits()), "{what}");
    }
    // Integer products take no epilogue.
    let ai = DeviceMatrix::from_host(&dev, &Matrix::from_fn(m, k, |_, _| 1i8)).unwrap();
    let bi = DeviceMatrix::from_host(&dev, &Matrix::from_fn(k, n, |_, _| 1i8)).unwrap();
    let mut ci = DeviceMatrix::<i32>::zeros(&dev, m, n).unwrap();
    let e = Epilogue::new().activation(Activation::Relu);
    assert!(matches!(Gemm::new().epilogue(&e).run_device(&ai, &bi, &mut ci), Err(Error::Unsupported { .. })));
    // Block scales too short for the product.
    let a8 = DeviceMatrix::from_host(&dev, &Matrix::from_fn(m, 256, |_, _| F8E4M3::from_f64(1.0))).unwrap();
    let b8 = DeviceMatrix::from_host(&dev, &Matrix::from_fn(256, n, |_, _| F8E4M3::from_f64(1.0))).unwrap();
    let mut c8 = DeviceMatrix::<f32>::zeros(&dev, m, n).unwrap();
    let (sa, sb) = (vec![1f32; m * 2 - 1], vec![1f32; 2]);
    let e = Epilogue::new().block_scales(BlockScales::new(&sa, &sb));
    let err = Gemm::new().epilogue(&e).run_device(&a8, &b8, &mut c8).expect_err("short A scales");
    assert!(matches!(err, Error::Epilogue { .. }), "{err}");
}

/// alpha = 0 and beta = 1 still applies the epilogue (no BLAS quick
/// return): C <- act(C + bias).
#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn alpha_zero_still_applies_the_epilogue() {
    let dev = device();
    let (m, n, k) = (33, 70, 16);
    let a = DeviceMatrix::from_host(&dev, &Matrix::from_fn(m, k, |_, _| f32::NAN)).unwrap();
    let b = DeviceMatrix::from_host(&dev, &Matrix::from_fn(k, n, |_, _| f32::NAN)).unwrap();
    let c0 = Matrix::from_fn(m, n, |i, j| (i as f32 - j as f32) / 8.0);
    let mut c = DeviceMatrix::from_host(&dev, &c0).unwrap();
    let bias: Vec<f32> = (0..n).map(|j| j as f32 / 16.0).collect();
    let e = Epilogue::new().bias(Along::Columns, &bias).activation(Activation::Relu);
    Gemm::new().allow_tf32(true).alpha(0.0).beta(1.0).epilogue(&e).run_device(&a, &b, &mut c).unwrap();
    let got = c.to_host().unwrap();
    for i in 0..m {
        for j in 0..n {
            let want = (c0[(i, j)] + bias[j]).max(0.0);
            assert_eq!(got[(i, j)], want, "C({i}, {j})");
        }
    }
    // The ladder's fused kernels (f64 and f32 without TF32) too: A and B,
    // all NaN, are not read.
    let a = DeviceMatrix::from_host(&dev, &Matrix::from_fn(m, k, |_, _| f64::NAN)).unwrap();
    let b = DeviceMatrix::from_host(&dev, &Matrix::from_fn(k, n, |_, _| f64::NAN)).unwrap();
    let c0 = Matrix::from_fn(m, n, |i, j| (i as f64 - j as f64) / 8.0);
    let mut c = DeviceMatrix::from_host(&dev, &c0).unwrap();
    let bias: Vec<f64> = (0..n).map(|j| j as f64 / 16.0).collect();
    let e = Epilogue::new().bias(Along::Columns, Bias::f64(&bias)).activation(Activation::Relu);
    Gemm::new().alpha(0.0).beta(1.0).epilogue(&e).run_device(&a, &b, &mut c).unwrap();
    let got = c.to_host().unwrap();
    for i in 0..m {
        for j in 0..n {
            assert_eq!(got[(i, j)], (c0[(i, j)] + bias[j]).max(0.0), "f64 C({i}, {j})");
        }
    }
}

/// A mixture-of-experts layer in one grouped launch
/// ([`Gemm::run_grouped_fused_device`]): the experts' rows contiguous in
/// one A (row-major) with DeepGEMM's column-major A scales over all rows,
/// each expert's own B (column-major) and B scales, skewed row counts (an
/// empty expert, one row, rows across block-tile edges); each expert's C
/// checked against the reference and the bound of the block-scaled test;
/// the same FP8 experts without block scales, with a bias and ReLU each.
/// Then bf16 experts with their own bias and GELU, and one launch of
/// experts with and without them (alpha and beta not 1 and 0).
#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn grouped_experts_with_their_own_epilogues() {
    let dev = device();
    let stream = dev.stream();
    let (n, k) = (200usize, 384usize);
    let rows = [0usize, 1, 130, 64, 300, 5, 17];
    let total: usize = rows.iter().sum();
    let kb = k.div_ceil(128);
    let nb = n.div_ceil(128);
    let mut r = Rng::new(31);
    let a = Matrix::from_fn(total, k, |_, _| F8E4M3::from_f64(2.0 * r.uniform()));
    let bs: Vec<Matrix<F8E4M3>> = rows
        .iter()
        .map(|_| store(&Matrix::from_fn(k, n, |_, _| F8E4M3::from_f64(2.0 * r.uniform())), Op::N, C, 0, F8E4M3::POISON))
        .collect();
    let sa: Vec<f32> = (0..total * kb).map(|_| (1.25 + 0.75 * r.uniform()) as f32).collect();
    let sbs: Vec<Vec<f32>> =
        rows.iter().map(|_| (0..nb * kb).map(|_| (1.25 + 0.75 * r.uniform()) as f32).collect()).collect();
    let da = DeviceMatrix::from_host(&dev, &a).unwrap();
    let dbs: Vec<DeviceMatrix<F8E4M3>> = bs.iter().map(|b| DeviceMatrix::from_host(&dev, b).unwrap()).collect();
    let mut dcs: Vec<DeviceMatrix<f32>> =
        rows.iter().map(|&m| DeviceMatrix::from_host(&dev, &Matrix::from_fn(m, n, |_, _| f32::NAN)).unwrap()).collect();
    let d_sa = stream.clone_htod(&sa).unwrap();
    let first_rows: Vec<usize> = rows.iter().scan(0, |at, &m| Some(std::mem::replace(at, *at + m))).collect();
    let av: Vec<_> = rows.iter().zip(&first_rows).map(|(&m, &r0)| da.view(r0, 0, m, k).unwrap()).collect();
    let bv: Vec<_> = dbs.iter().map(|b| b.as_view()).collect();
    let mut cv: Vec<_> = dcs.iter_mut().map(|c| c.as_view_mut()).collect();
    let epilogues: Vec<Epilogue> = first_rows
        .iter()
        .zip(&sbs)
        .map(|(&r0, sb)| Epilogue::new().block_scales(BlockScales::new(d_sa.slice(r0..), sb).a_strides(1, total)))
        .collect();
    Gemm::new().run_grouped_fused_device(&av, &bv, &mut cv, &epilogues).unwrap();
    drop(cv);
    // Each FP8 expert's C (f32) against the f64 reference: `scale(e, i, j,
    // q)` the product of k-tile q's block scales (1 without them),
    // `finish(e, j, v)` the epilogue on the scaled sum; within FP8's
    // accumulation (2^-9 of each k-tile's sum of |terms|) and f32's (the
    // promotions, and the epilogue's terms).
    type Scale<'a> = &'a dyn Fn(usize, usize, usize, usize) -> f64;
    let check_fp8 = |dcs: &[DeviceMatrix<f32>], what: &str, scale: Scale, finish: &dyn Fn(usize, usize, f64) -> f64| {
        for (e, (&m, &r0)) in rows.iter().zip(&first_rows).enumerate() {
            let c = dcs[e].to_host().unwrap();
            for i in 0..m {
                for j in 0..n {
                    let (mut sum, mut bound) = (0f64, 0f64);
                    for q in 0..kb {
                        let s = scale(e, i, j, q);
                        for p in q * 128..((q + 1) * 128).min(k) {
                            let x = a[(r0 + i, p)].as_f64() * bs[e][(p, j)].as_f64();
                            sum += s * x;
                            bound += s * x.abs();
                        }
                    }
                    let (got, want) = (c[(i, j)] as f64, finish(e, j, sum));
                    let tol = 2f64.powi(-9) * bound
                        + 2f64.powi(-23) * ((kb as f64 + 1.0) * bound + (want - sum).abs())
                        + 1e-30;
                    assert!((got - want).abs() <= tol, "{what} expert {e}: C({i}, {j}) = {got}, want {want} ({tol})");
                }
            }
        }
    };
    let block_scale = |e: usize, i: usize, j: usize, q: usize| {
        sa[q * total + first_rows[e] + i] as f64 * sbs[e][(j / 128) * kb + q] as f64
    };
    check_fp8(&dcs, "block-scaled", &block_scale, &|_, _, v| v);
    // The same FP8 experts without block scales, each with its own bias
    // (by column) and ReLU: the launch runs the `_epilogue` kernels (no
    // block scales to stage), C f32.
    let biases8: Vec<Vec<f32>> =
        rows.iter().enumerate().map(|(e, _)| (0..n).map(|j| ((j * 3 + e) % 17) as f32 / 4.0 - 2.0).collect()).collect();
    let mut dcs: Vec<DeviceMatrix<f32>> =
        rows.iter().map(|&m| DeviceMatrix::from_host(&dev, &Matrix::from_fn(m, n, |_, _| f32::NAN)).unwrap()).collect();
    let mut cv: Vec<_> = dcs.iter_mut().map(|c| c.as_view_mut()).collect();
    let epilogues: Vec<Epilogue> =
        biases8.iter().map(|b| Epilogue::new().bias(Along::Columns, b).activation(Activation::Relu)).collect();
    Gemm::new().run_grouped_fused_device(&av, &bv, &mut cv, &epilogues).unwrap();
    drop(cv);
    check_fp8(&dcs, "FP8 bias+ReLU", &|_, _, _, _| 1.0, &|e, j, v| (v + biases8[e][j] as f64).max(0.0));
    // bf16 experts, each with its own bias (by column) and GELU.
    let a16 = Matrix::from_fn(total, k, |i, p| bf16::from_f64(((i * 7 + p * 3) % 9) as f64 / 4.0 - 1.0));
    let b16: Vec<Matrix<bf16>> = rows
        .iter()
        .enumerate()
        .map(|(e, _)| Matrix::from_fn(k, n, |p, j| bf16::from_f64(((p * 5 + j + e) % 9) as f64 / 4.0 - 1.0)))
        .collect();
    let biases: Vec<Vec<f32>> =
        rows.iter().enumerate().map(|(e, _)| (0..n).map(|j| (j + e) as f32 / 64.0 - 1.0).collect()).collect();
    let da = DeviceMatrix::from_host(&dev, &a16).unwrap();
    let dbs: Vec<_> = b16.iter().map(|b| DeviceMatrix::from_host(&dev, b).unwrap()).collect();
    let mut dcs: Vec<DeviceMatrix<bf16>> = rows.iter().map(|&m| DeviceMatrix::zeros(&dev, m, n).unwrap()).collect();
    let av: Vec<_> = rows.iter().zip(&first_rows).map(|(&m, &r0)| da.view(r0, 0, m, k).unwrap()).collect();
    let bv: Vec<_> = dbs.iter().map(|b| b.as_view()).collect();
    let mut cv: Vec<_> = dcs.iter_mut().map(|c| c.as_view_mut()).collect();
    let epilogues: Vec<Epilogue> =
        biases.iter().map(|b| Epilogue::new().bias(Along::Columns, b).activation(Activation::Gelu)).collect();
    Gemm::new().run_grouped_fused_device(&av, &bv, &mut cv, &epilogues).unwrap();
    drop(cv);
    // Each bf16 expert's C against `expected(e, i, j, dot)`: the value
    // before the activation, its activation, and the f32 sum's share of
    // the bound.
    let check_bf16 =
        |dcs: &[DeviceMatrix<bf16>], what: &str, expected: &dyn Fn(usize, usize, usize, f64) -> [f64; 3]| {
            for (e, (&m, &r0)) in rows.iter().zip(&first_rows).enumerate() {
                let c = dcs[e].to_host().unwrap();
                for i in 0..m {
                    for j in 0..n {
                        let dot: f64 = (0..k).map(|p| a16[(r0 + i, p)].as_f64() * b16[e][(p, j)].as_f64()).sum();
                        let [v, want, sum] = expected(e, i, j, dot);
                        let tol = 1.2 * (2f64.powi(-21) * (sum + 1.0) + GELU_16 * v.abs())
                            + <bf16 as Scalar>::EPSILON / 2.0 * want.abs()
                            + 2f64.powi(-30);
                        let got = c[(i, j)].as_f64();
                        assert!((got - want).abs() <= tol, "{what} expert {e}: C({i}, {j}) = {got}, want {want}");
                    }
                }
            }
        };
    check_bf16(&dcs, "bf16", &|e, _, j, dot| {
        let v = dot + biases[e][j] as f64;
        [v, gelu(v), dot.abs()]
    });
    // One launch, experts with and without terms (bias + GELU on the even
    // ones, none on the odd), alpha 1.5 and beta 0.5 on a C read back: each
    // expert's epilogue is fused or applied by the stores as its own
    // description says.
    let c0 = |e: usize, i: usize, j: usize| bf16::from_f64(((i + 2 * j + e) % 7) as f64 / 4.0 - 0.75);
    let mut dcs: Vec<DeviceMatrix<bf16>> = rows
        .iter()
        .enumerate()
        .map(|(e, &m)| DeviceMatrix::from_host(&dev, &Matrix::from_fn(m, n, |i, j| c0(e, i, j))).unwrap())
        .collect();
    let mut cv: Vec<_> = dcs.iter_mut().map(|c| c.as_view_mut()).collect();
    let epilogues: Vec<Epilogue> = biases
        .iter()
        .enumerate()
        .map(|(e, b)| {
            if e % 2 == 0 {
                Epilogue::new().bias(Along::Columns, b).activation(Activation::Gelu)
            } else {
                Epilogue::new()
            }
        })
        .collect();
    Gemm::new().alpha(1.5).beta(0.5).run_grouped_fused_device(&av, &bv, &mut cv, &epilogues).unwrap();
    drop(cv);
    check_bf16(&dcs, "mixed bf16", &|e, i, j, dot| {
        let old = c0(e, i, j).as_f64();
        let v = 1.5 * dot + 0.5 * old + if e % 2 == 0 { biases[e][j] as f64 } else { 0.0 };
        [v, if e % 2 == 0 { gelu(v) } else { v }, 1.5 * dot.abs() + old.abs()]
    });
}

/// The masked layout ([`Gemm::run_masked_device`]): each expert a slot of
/// `slot` rows of which the first `rows[e]` (a count on the device) are
/// computed - none, one, counts across 64-row and block-tile edges, the
/// whole slot, a count above it (taken as the slot) - and the rest of the
/// slot comes back bit for bit, as does the padding. Block-scaled e4m3
/// experts (DeepGEMM's per-expert column-major A scales) into a padded f32
/// C, row-major and column-major (stored transposed by the threads); bf16
/// experts with a bias and GELU into an unpadded bf16 C (TMA's stores into
/// a tensor map clipped at the count), and with none (alpha 1.5, beta 0.5),
/// each with two sets of counts one launch after the other; then the typed
/// errors, C untouched.
#[test]
#[ignore = "needs a GPU of compute capability 9.0"]
fn masked_experts_compute_their_counted_rows_only() {
    let dev = device();
    let stream = dev.stream();
    let (slot, n, k) = (300usize, 200usize, 384usize);
    let counts = [0u32, 1, 300, 64, 129, 500, 17, 191];
    // A second launch's counts (the same slots, other rows: the tables and
    // clipped tensor maps of one launch must not leak into the next).
    let counts2 = [255u32, 0, 63, 300, 2, 128, 299, 65];
    let experts = counts.len();
    let live = |e: usize| (counts[e] as usize).min(slot);
    let d_counts = stream.clone_htod(&counts).unwrap();
    let d_counts2 = stream.clone_htod(&counts2).unwrap();
    let (kb, nb) = (k.div_ceil(128), n.div_ceil(128));
    let mut r = Rng::new(41);
    let guard = -7.0f32;

    // e4m3, block-scaled: A's scales `[experts, k / 128, slot]`.
    let a = Matrix::from_fn(experts * slot, k, |_, _| F8E4M3::from_f64(2.0 * r.uniform()));
    let bs: Vec<Matrix<F8E4M3>> = (0..experts)
        .map(|_| store(&Matrix::from_fn(k, n, |_, _| F8E4M3::from_f64(2.0 * r.uniform())), Op::N, C, 0, F8E4M3::POISON))
        .collect();
    let sa: Vec<f32> = (0..experts * kb * slot).map(|_| (1.25 + 0.75 * r.uniform()) as f32).collect();
    let sbs: Vec<Vec<f32>> =
        (0..experts).map(|_| (0..nb * kb).map(|_| (1.25 + 0.75 * r.uniform()) as f32).collect()).collect();
    let da = DeviceMatrix::from_host(&dev, &a).unwrap();
    let dbs: Vec<_> = bs.iter().map(|b| DeviceMatrix::from_host(&dev, b).unwrap()).collect();
    let d_sa = stream.clone_htod(&sa).unwrap();
    for lc in [R, C] {
        // Counted rows poisoned (beta = 0 never reads them), the rest guards.
        let c0: Vec<Matrix<f32>> = (0..experts)
            .map(|e| {
                store(&Matrix::from_fn(slot, n, |i, _| if i < live(e) { f32::NAN } else { guard }), Op::N, lc, 3, guard)
            })
            .collect();
        let mut dcs: Vec<_> = c0.iter().map(|c| DeviceMatrix::from_host(&dev, c).unwrap()).collect();
        let av: Vec<_> = (0..experts).map(|e| da.view(e * slot, 0, slot, k).unwrap()).collect();
        let bv: Vec<_> = dbs.iter().map(|b| b.as_view()).collect();
        let mut cv: Vec<_> = dcs.iter_mut().map(|c| c.as_view_mut()).collect();
        let epilogues: Vec<Epilogue> = (0..experts)
            .map(|e| {
                let scales = BlockScales::new(d_sa.slice(e * kb * slot..), &sbs[e]).a_strides(1, slot);
                Epilogue::new().block_scales(scales)
            })
            .collect();
        Gemm::new().run_masked_device(&av, &bv, &mut cv, &d_counts.as_view(), &epilogues).unwrap();
        drop(cv);
        for e in 0..experts {
            let c = dcs[e].to_host().unwrap();
            for (at, (x, y)) in c.as_slice().iter().zip(c0[e].as_slice()).enumerate() {
                if is_padding(&c, at) {
                    assert_eq!(x.to_bits(), y.to_bits(), "e4m3 expert {e} {lc:?}: padding at {at}");
                }
            }
            for i in 0..slot {
                for j in 0..n {
                    let got = c[(i, j)] as f64;
                    if i >= live(e) {
                        assert_eq!(got, guard as f64, "e4m3 expert {e} {lc:?}: uncounted C({i}, {j}) written");
                        continue;
                    }
                    let (mut want, mut bound) = (0f64, 0f64);
                    for q in 0..kb {
                        let s = sa[e * kb * slot + q * slot + i] as f64 * sbs[e][(j / 128) * kb + q] as f64;
                        for p in q * 128..((q + 1) * 128).min(k) {
                            let x = a[(e * slot + i, p)].as_f64() * bs[e][(p, j)].as_f64();
                            want += s * x;
                            bound += s * x.abs();
                        }
                    }
                    // FP8 accumulation within a k-tile, then an f32 rounding per
                    // promotion and, split along k, per slice summed (at most kb).
                    let tol = 2f64.powi(-9) * bound + 2f64.powi(-23) * (2.0 * kb as f64 + 1.0) * bound + 1e-30;
                    assert!((got - want).abs() <= tol, "e4m3 expert {e} {lc:?}: C({i}, {j}) = {got}, want {want}");
                }
            }
        }
    }

    // bf16, unpadded row-major C: with a bias and GELU, then plain with
    // alpha 1.5 and beta 0.5.
    let a16 = Matrix::from_fn(experts * slot, k, |i, p| bf16::from_f64(((i * 7 + p * 3) % 9) as f64 / 4.0 - 1.0));
    let b16: Vec<Matrix<bf16>> = (0..experts)
        .map(|e| Matrix::from_fn(k, n, |p, j| bf16::from_f64(((p * 5 + j + e) % 9) as f64 / 4.0 - 1.0)))
        .collect();
    let biases: Vec<Vec<f32>> = (0..experts).map(|e| (0..n).map(|j| (j + e) as f32 / 64.0 - 1.0).collect()).collect();
    let c_at = |e: usize, i: usize, j: usize| bf16::from_f64(((e + 3 * i + j) % 5) as f64 / 2.0 - 1.0);
    let da = DeviceMatrix::from_host(&dev, &a16).unwrap();
    let dbs: Vec<_> = b16.iter().map(|b| DeviceMatrix::from_host(&dev, b).unwrap()).collect();
    for (fused, second) in [(true, false), (false, true), (true, true), (false, false)] {
        let (d_rows, set) = if second { (&d_counts2, &counts2) } else { (&d_counts, &counts) };
        let live = |e: usize| (set[e] as usize).min(slot);
        let c0: Vec<Matrix<bf16>> = (0..experts).map(|e| Matrix::from_fn(slot, n, |i, j| c_at(e, i, j))).collect();
        let mut dcs: Vec<_> = c0.iter().map(|c| DeviceMatrix::from_host(&dev, c).unwrap()).collect();
        let av: Vec<_> = (0..experts).map(|e| da.view(e * slot, 0, slot, k).unwrap()).collect();
        let bv: Vec<_> = dbs.iter().map(|b| b.as_view()).collect();
        let mut cv: Vec<_> = dcs.iter_mut().map(|c| c.as_view_mut()).collect();
        let (gemm, epilogues): (Gemm, Vec<Epilogue>) = if fused {
            let e = biases.iter().map(|b| Epilogue::new().bias(Along::Columns, b).activation(Activation::Gelu));
            (Gemm::new(), e.collect())
        } else {
            (Gemm::new().alpha(1.5).beta(0.5), Vec::new())
        };
        gemm.run_masked_device(&av, &bv, &mut cv, &d_rows.as_view(), &epilogues).unwrap();
        drop(cv);
        for e in 0..experts {
            let c = dcs[e].to_host().unwrap();
            for i in 0..slot {
                for j in 0..n {
                    let got = c[(i, j)];
                    if i >= live(e) {
                        assert_eq!(got.to_bits(), c0[e][(i, j)].to_bits(), "bf16 expert {e}: uncounted C({i}, {j})");
                        continue;
                    }
                    let dot: f64 = (0..k).map(|p| a16[(e * slot + i, p)].as_f64() * b16[e][(p, j)].as_f64()).sum();
                    let (want, tol) = if fused {
                        let v = dot + biases[e][j] as f64;
                        let want = gelu(v);
                        (want, 1.2 * (2f64.powi(-21) * (dot.abs() + 1.0) + GELU_16 * v.abs()) + want.abs() / 256.0)
                    } else {
                        let c_old = c0[e][(i, j)].as_f64();
                        let want = 1.5 * dot + 0.5 * c_old;
                        (want, 1.2 * 2f64.powi(-21) * (1.5 * dot.abs() + 0.5 * c_old.abs()) + want.abs() / 256.0)
                    };
                    let got = got.as_f64();
                    assert!(
                        (got - want).abs() <= tol + 2f64.powi(-30),
                        "bf16 {fused} expert {e}: C({i}, {j}) = {got}, want {want}"
                    );
                }
            }
        }
    }

    // Typed errors, C untouched: no count for the problem; two epilogues
    // for one problem.
    let c0 = Matrix::from_fn(slot, n, |_, _| bf16::from_f64(3.0));
    let mut dc = DeviceMatrix::from_host(&dev, &c0).unwrap();
    let (av, bv) = ([da.view(0, 0, slot, k).unwrap()], [dbs[0].as_view()]);
    let mut cv = [dc.as_view_mut()];
    let err = Gemm::new().run_masked_device(&av, &bv, &mut cv, &d_counts.slice(0..0), &[]).unwrap_err();
    assert!(matches!(err, Error::RowCounts { .. }), "{err}");
    let two = [Epilogue::new(), Epilogue::new()];
    let err = Gemm::new().run_masked_device(&av, &bv, &mut cv, &d_counts.as_view(), &two).unwrap_err();
    assert!(matches!(err, Error::Epilogue { what: "the epilogues", .. }), "{err}");
    let c = dc.to_host().unwrap();
    assert!(c.as_slice().iter().zip(c0.as_slice()).all(|(x, y)| x.to_bits() == y.to_bits()), "a refused call wrote C");
}
