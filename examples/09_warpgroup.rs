//! Stage 9, the Hopper stage: f16 and bf16 GEMM (f32 accumulation), f32 on
//! TF32 tensor cores (`Gemm::allow_tf32`) and i8 GEMM (i32 accumulation) on
//! warpgroup MMA (`wgmma.mma_async`) fed by TMA in a warp-specialized
//! pipeline. Needs a compute capability 9.0 GPU (H100, H200).
//!
//! For each size and each product (f16 -> f32, f16 -> f16, bf16 -> f32,
//! bf16 -> bf16, tf32 -> f32, i8 -> i32): random inputs (in [-1, 1); i8 in
//! [-128, 127]), a poisoned C (NaN; i32::MIN) checked against cuBLAS
//! `cublasGemmEx` (same types; compute type `CUBLAS_COMPUTE_32F`,
//! `_32F_FAST_TF32`, `_32I`) by relative Frobenius error (the i8 product
//! must match exactly), then both timed with CUDA events in 5 interleaved
//! passes (order alternating), the median pass of each kept; prints ms,
//! TFLOP/s (TOP/s for i8) and the ratio to cuBLAS. Exits 1 on a wrong
//! result.
//!
//! With `--csv PATH`, appends one row per product and one for cuBLAS to
//! PATH in the ladder's columns (`benches/results/latest.csv`; precision
//! `f16`, `bf16`, `tf32` or `i8`, the operands' type; C's type in the
//! configuration). `--products f16,bf16,tf32,i8` picks the products (default
//! all). `--b-col-major` stores B column-major (both operands K-major: the
//! layout wgmma reads i8 in without a transposed copy, tf32 without the
//! transposed product, and the one cuBLAS's fast INT8 kernels want; layout
//! column `b-col`). `--stage 8`
//! times stage 8's mixed-precision kernels instead (`mma.sync` with
//! ldmatrix and cp.async, `.stage(Stage::TensorCore)`: the path of compute
//! capability 8.x GPUs; stage column 8, stage name `tensor-core-mixed`).
//! Where cuBLAS
//! refuses a shape (INT8 with leading dimensions not multiples of 4), ours is
//! timed alone and marked unchecked.
//!
//! `cargo run --release --example 09_warpgroup [N | MxNxK ...] [--budget-ms MS] [--csv PATH] [--products LIST] [--b-col-major] [--stage 8]`

use gemm::bench::time_kernel;
use gemm::check::{random_matrix, random_matrix_in};
use gemm::cublas::Cublas;
use gemm::half::{bf16, f16};
use gemm::{DeviceMatrix, Gemm, Layout, Product, Scalar};
use std::process::exit;
use std::sync::Arc;

/// Relative Frobenius distance of two results.
fn rel_error<C: Scalar>(x: &[C], y: &[C]) -> f64 {
    let (mut d, mut n) = (0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (a, b) = (a.as_f64(), b.as_f64());
        if !a.is_finite() {
            return f64::INFINITY;
        }
        d += (a - b) * (a - b);
        n += b * b;
    }
    (d / n.max(f64::MIN_POSITIVE)).sqrt()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The ladder CSV's header.
const CSV_HEAD: &str = "device,date,commit,precision,stage,stage_name,configuration,m,n,k,ms,gflops,pct_fma_peak,\
cublas_gflops,ratio_to_cublas,check,intensity,kernel,ops,layout,batch,batch_kind,path,split_k,pack";

/// One product: check, then time ours and cuBLAS; CSV rows into `csv`.
/// Returns false on a wrong result.
#[allow(clippy::too_many_arguments)]
fn run<T: Product<C>, C: Scalar>(
    mma_sync: bool,
    precision: &str,
    b_layout: Layout,
    device: &Arc<gemm::Device>,
    cublas: &Cublas,
    (m, n, k): (usize, usize, usize),
    budget_ms: f64,
    csv: &mut Vec<String>,
) -> bool {
    let fail = |e: gemm::Error| -> ! {
        eprintln!("error: {e}");
        exit(2)
    };
    let a = DeviceMatrix::from_host(device, &random_matrix::<T>(m, k, 1)).unwrap_or_else(|e| fail(e));
    let b = DeviceMatrix::from_host(device, &random_matrix_in::<T>(k, n, b_layout, 2)).unwrap_or_else(|e| fail(e));
    let poison = gemm::Matrix::<C>::filled(m, n, C::POISON);
    let mut c = DeviceMatrix::from_host(device, &poison).unwrap_or_else(|e| fail(e));
    let mut r = DeviceMatrix::from_host(device, &poison).unwrap_or_else(|e| fail(e));
    let g = Gemm::new().allow_tf32(precision == "tf32");
    let g = if mma_sync { g.stage(gemm::tuning::Stage::TensorCore) } else { g };
    g.run_device(&a, &b, &mut c).unwrap_or_else(|e| fail(e));
    // cuBLAS refuses some shapes (INT8 with leading dimensions not
    // multiples of 4): ours is then timed alone, unchecked here (the GPU
    // tests check such shapes against the CPU).
    let refused = match cublas.gemm_ex(gemm::Op::N, gemm::Op::N, 1.0, &a, &b, 0.0, &mut r) {
        Ok(()) => None,
        Err(e @ gemm::Error::Cublas { .. }) => Some(e.to_string()),
        Err(e) => fail(e),
    };
    let (ch, rh) = (c.to_host().unwrap_or_else(|e| fail(e)), r.to_host().unwrap_or_else(|e| fail(e)));
    let err = if refused.is_some() { f64::NAN } else { rel_error(ch.as_slice(), rh.as_slice()) };
    // f32 accumulation of k products of inputs rounded alike: both results
    // are near the exact one, plus C's rounding. The tensor cores' f32 adds
    // truncate, so the difference to cuBLAS (which may split k) grows with
    // k: allowed up to a tenth of the worst case k 2^-24. TF32 inputs may be
    // rounded differently (2^-11 each, or truncated: 2^-10). The integer
    // product is exact.
    let accumulation = 1e-5 + 0.1 * k as f64 * 2f64.powi(-24);
    let ok = refused.is_some()
        || match precision {
            "i8" => err == 0.0,
            "tf32" => err < accumulation + 2.0f64.powi(-9),
            _ => err < accumulation + C::EPSILON,
        };
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for pass in 0..5 {
        let mut time_ours = || time_kernel(device, budget_ms / 10.0, 1000, |_| g.run_device(&a, &b, &mut c));
        let mut time_cublas = || {
            time_kernel(device, budget_ms / 10.0, 1000, |_| {
                cublas.gemm_ex(gemm::Op::N, gemm::Op::N, 1.0, &a, &b, 0.0, &mut r)
            })
        };
        if refused.is_some() {
            ours.push(time_ours().unwrap_or_else(|e| fail(e)).median_ms);
            theirs.push(f64::NAN);
        } else if pass % 2 == 0 {
            ours.push(time_ours().unwrap_or_else(|e| fail(e)).median_ms);
            theirs.push(time_cublas().unwrap_or_else(|e| fail(e)).median_ms);
        } else {
            theirs.push(time_cublas().unwrap_or_else(|e| fail(e)).median_ms);
            ours.push(time_ours().unwrap_or_else(|e| fail(e)).median_ms);
        }
    }
    let (ours, theirs) = (median(ours), median(theirs));
    let tflops = |ms: f64| 2.0 * m as f64 * n as f64 * k as f64 / (ms * 1e9);
    let types = match (T::NAME, C::NAME) {
        ("f16", "f16") => gemm::tuning::WgmmaTypes::F16,
        ("f16", _) => gemm::tuning::WgmmaTypes::F16F32,
        ("bf16", "bf16") => gemm::tuning::WgmmaTypes::Bf16,
        ("bf16", _) => gemm::tuning::WgmmaTypes::Bf16F32,
        ("f32", _) => gemm::tuning::WgmmaTypes::Tf32,
        _ => gemm::tuning::WgmmaTypes::S8,
    };
    let bytes = size_of::<T>() as u32;
    let (name, config, slices) = if mma_sync {
        let kernel = gemm::tuning::mma_kernel(types, m, n, device.sm_count(), device.limits().max_smem_per_block);
        let t = kernel.tile;
        let config = format!("block {}x{}x{}; pipeline depth {}; C {}", t.bm, t.bn, t.bk(bytes), t.depth, C::NAME);
        (kernel.name, config, 1)
    } else {
        let plan = gemm::tuning::warpgroup_plan(types, m, n, k, 1, device.sm_count());
        let (kernel, t, (slices, _)) = (plan.kernel, plan.kernel.tile, plan.split);
        // Every family has the K-major entry point `_nt`.
        let name = kernel.names[1].unwrap_or_default().trim_end_matches("_nt");
        let split = if slices > 1 { format!("; split-K {slices}") } else { String::new() };
        let config =
            format!("block {}x{}x{}; pipeline depth {}{split}; C {}", t.bm, t.bn, t.bk(bytes), t.depth, C::NAME);
        (name, config, slices)
    };
    let (stage_number, stage_label) = if mma_sync { (8, "tensor-core-mixed") } else { (9, "warpgroup-mma") };
    let intensity = 2.0 * (m * n * k) as f64
        / (size_of::<T>() as f64 * (m * k + k * n) as f64 + size_of::<C>() as f64 * (m * n) as f64);
    let (date, commit) = (gemm::bench::today_utc(), gemm::bench::commit());
    let check = match &refused {
        Some(_) => "unchecked (cuBLAS refused the shape)".to_string(),
        None if ok => format!("ok (rel. error {err:.1e} to cuBLAS)"),
        None => format!("WRONG (rel. error {err:.1e})"),
    };
    let layout = if b_layout == Layout::ColMajor { "b-col" } else { "row" };
    let cublas_row = refused.is_none();
    for (stage, stage_name, cfg, ms, kname, ratio, check) in [
        (
            0,
            "cublas",
            format!("cublasGemmEx; C {}", C::NAME),
            theirs,
            "cublasGemmEx".to_string(),
            1.0,
            "reference".to_string(),
        ),
        (stage_number, stage_label, config, ours, name.to_string(), theirs / ours, check),
    ] {
        if stage == 0 && !cublas_row {
            continue;
        }
        let split = if stage == 0 { 1 } else { slices };
        let (cublas_gflops, ratio) = if cublas_row {
            (format!("{:.1}", tflops(theirs) * 1e3), format!("{ratio:.4}"))
        } else {
            (String::new(), String::new())
        };
        csv.push(format!(
            "{},{date},{commit},{},{stage},{stage_name},{cfg},{m},{n},{k},{ms:.4},{:.1},,{cublas_gflops},{ratio},{check},{intensity:.1},{kname},NN,{layout},1,single,stage-best,{split},0",
            device.name(),
            precision,
            tflops(ms) * 1e3,
        ));
    }
    println!(
        "{:>5} -> {:<4} {m:>6}x{n}x{k}  {:<32} {:>8.3} ms {:>7.1} TFLOP/s | cuBLAS {:>8.3} ms {:>7.1} TFLOP/s | ratio {:.3} | rel. error {err:.1e} {}",
        precision,
        C::NAME,
        name,
        ours,
        tflops(ours),
        theirs,
        tflops(theirs),
        theirs / ours,
        match (&refused, ok) {
            (Some(e), _) => format!("unchecked: {e}"),
            (None, true) => "ok".to_string(),
            (None, false) => "WRONG".to_string(),
        }
    );
    ok
}

fn main() {
    let mut sizes = Vec::new();
    let mut budget_ms = 300.0;
    let mut csv_path = None;
    let mut products = vec!["f16".to_string(), "bf16".into(), "tf32".into(), "i8".into()];
    let mut b_layout = Layout::RowMajor;
    let mut mma_sync = false;
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        if x == "--budget-ms" {
            budget_ms = it.next().and_then(|v| v.parse().ok()).unwrap_or(budget_ms);
            continue;
        }
        if x == "--csv" {
            csv_path = it.next();
            continue;
        }
        if x == "--b-col-major" {
            b_layout = Layout::ColMajor;
            continue;
        }
        if x == "--stage" {
            mma_sync = match it.next().as_deref() {
                Some("8") => true,
                Some("9") => false,
                other => {
                    eprintln!("--stage takes 8 (mma.sync) or 9 (warpgroup MMA), not {other:?}");
                    exit(2)
                }
            };
            continue;
        }
        if x == "--products" {
            products = it.next().unwrap_or_default().split(',').map(String::from).collect();
            continue;
        }
        let p: Vec<usize> = x.split('x').filter_map(|p| p.parse().ok()).collect();
        match p[..] {
            [n] => sizes.push((n, n, n)),
            [m, n, k] => sizes.push((m, n, k)),
            _ => {
                eprintln!("usage: 09_warpgroup [N | MxNxK ...] [--budget-ms MS] [--csv PATH] [--products LIST] [--b-col-major] [--stage 8]");
                exit(2)
            }
        }
    }
    if sizes.is_empty() {
        sizes.push((4096, 4096, 4096));
    }
    let device = gemm::default_device().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        exit(2)
    });
    let cublas = Cublas::new(&device).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        exit(2)
    });
    println!("device: {} ({} SMs), {}", device.name(), device.sm_count(), gemm::bench::today_utc());
    let mut ok = true;
    let mut csv = Vec::new();
    for &s in &sizes {
        for p in &products {
            match p.as_str() {
                "f16" => {
                    ok &= run::<f16, f32>(mma_sync, "f16", b_layout, &device, &cublas, s, budget_ms, &mut csv);
                    ok &= run::<f16, f16>(mma_sync, "f16", b_layout, &device, &cublas, s, budget_ms, &mut csv);
                }
                "bf16" => {
                    ok &= run::<bf16, f32>(mma_sync, "bf16", b_layout, &device, &cublas, s, budget_ms, &mut csv);
                    ok &= run::<bf16, bf16>(mma_sync, "bf16", b_layout, &device, &cublas, s, budget_ms, &mut csv);
                }
                "tf32" => ok &= run::<f32, f32>(mma_sync, "tf32", b_layout, &device, &cublas, s, budget_ms, &mut csv),
                "i8" => ok &= run::<i8, i32>(mma_sync, "i8", b_layout, &device, &cublas, s, budget_ms, &mut csv),
                other => {
                    eprintln!("unknown product {other} (f16, bf16, tf32, i8)");
                    exit(2)
                }
            }
        }
    }
    if let Some(path) = csv_path {
        let new = !std::path::Path::new(&path).exists();
        let mut text = if new { format!("{CSV_HEAD}\n") } else { String::new() };
        for row in &csv {
            text += row;
            text += "\n";
        }
        use std::io::Write;
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = written {
            eprintln!("error: {path}: {e}");
            exit(2);
        }
    }
    if !ok {
        exit(1);
    }
}
