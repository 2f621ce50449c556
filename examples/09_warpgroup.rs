//! Stage 9, the Hopper stage: f16 and bf16 GEMM (f32 accumulation), f32 on
//! TF32 tensor cores (`Gemm::allow_tf32`), i8 GEMM (i32 accumulation) and
//! FP8 e4m3 GEMM (f32 accumulation, promoted every 128 of k) on
//! warpgroup MMA (`wgmma.mma_async`) fed by TMA in a warp-specialized
//! pipeline. Needs a compute capability 9.0 GPU (H100, H200).
//!
//! For each size and each product (f16 -> f32, f16 -> f16, bf16 -> f32,
//! bf16 -> bf16, tf32 -> f32, i8 -> i32; with `e4m3` in `--products`, e4m3
//! -> bf16 and e4m3 -> f32): random inputs (in [-1, 1); i8 in
//! [-128, 127]), a poisoned C (NaN; i32::MIN) checked against cuBLAS
//! `cublasGemmEx` (same types; compute type `CUBLAS_COMPUTE_32F`,
//! `_32F_FAST_TF32`, `_32I`; for e4m3 cuBLASLt's `cublasLtMatmul`,
//! `CUBLAS_COMPUTE_32F`, per-tensor scales 1, which reads FP8 only with B
//! column-major: with B row-major it gets a column-major copy of the same
//! values, made outside its timing) by relative Frobenius error (the i8 product
//! must match exactly), then both timed with CUDA events in 5 interleaved
//! passes (order alternating), the median pass of each kept; prints ms,
//! TFLOP/s (TOP/s for i8) and the ratio to cuBLAS. Exits 1 on a wrong
//! result.
//!
//! With `--csv PATH`, appends one row per product and one for the reference
//! to PATH in the ladder's columns (`benches/results/latest.csv`) and a
//! `scaling` column (`benches/results/warpgroup.csv`; precision
//! `f16`, `bf16`, `tf32`, `i8` or `e4m3`, the operands' type; C's type in the
//! configuration; scaling `tensor` for e4m3, `none` for the others).
//! `--products f16,bf16,tf32,i8,e4m3` picks the products (default
//! f16, bf16, tf32, i8). `--b-col-major` stores B column-major (both operands K-major: the
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
use gemm::cublas_lt::CublasLt;
use gemm::float8::F8E4M3;
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

/// The ladder CSV's header and the scaling column (`warpgroup.csv`'s).
const CSV_HEAD: &str = "device,date,commit,precision,stage,stage_name,configuration,m,n,k,ms,gflops,pct_fma_peak,\
cublas_gflops,ratio_to_cublas,check,intensity,kernel,ops,layout,batch,batch_kind,path,split_k,pack,scaling";

/// A library's `C <- A B` on A, B and C.
type Call<'a, T, C> = &'a dyn Fn(&DeviceMatrix<T>, &DeviceMatrix<T>, &mut DeviceMatrix<C>) -> Result<(), gemm::Error>;

/// The library a product is compared with: `C <- A B` on A, B (column-major
/// for cuBLASLt's FP8) and C.
struct Reference<'a, T: Scalar, C: Scalar> {
    /// `cublasGemmEx` or `cublasLtMatmul`.
    name: &'static str,
    /// The library: `cuBLAS` or `cuBLASLt`.
    library: &'static str,
    /// Whether it reads B only column-major (cuBLASLt's FP8).
    b_col_major: bool,
    call: Call<'a, T, C>,
}

/// [`run`] against cuBLAS's `cublasGemmEx`.
#[allow(clippy::too_many_arguments)]
fn run_cublas<T: Product<C>, C: Scalar>(
    mma_sync: bool,
    precision: &str,
    b_layout: Layout,
    device: &Arc<gemm::Device>,
    cublas: &Cublas,
    s: (usize, usize, usize),
    budget_ms: f64,
    csv: &mut Vec<String>,
) -> bool {
    let call = |a: &DeviceMatrix<T>, b: &DeviceMatrix<T>, r: &mut DeviceMatrix<C>| {
        cublas.gemm_ex(gemm::Op::N, gemm::Op::N, 1.0, a, b, 0.0, r)
    };
    let reference = Reference { name: "cublasGemmEx", library: "cuBLAS", b_col_major: false, call: &call };
    run::<T, C>(mma_sync, precision, b_layout, device, &reference, s, budget_ms, csv)
}

/// [`run`] for e4m3 against cuBLASLt's FP8 `cublasLtMatmul`.
#[allow(clippy::too_many_arguments)]
fn run_e4m3<C: Scalar>(
    mma_sync: bool,
    b_layout: Layout,
    device: &Arc<gemm::Device>,
    lt: &CublasLt,
    s: (usize, usize, usize),
    budget_ms: f64,
    csv: &mut Vec<String>,
) -> bool
where
    F8E4M3: Product<C>,
{
    let call =
        |a: &DeviceMatrix<F8E4M3>, b: &DeviceMatrix<F8E4M3>, r: &mut DeviceMatrix<C>| lt.matmul_fp8(1.0, a, b, 0.0, r);
    let reference = Reference { name: "cublasLtMatmul", library: "cuBLASLt", b_col_major: true, call: &call };
    run::<F8E4M3, C>(mma_sync, "e4m3", b_layout, device, &reference, s, budget_ms, csv)
}

/// One product: check, then time ours and the reference; CSV rows into `csv`.
/// Returns false on a wrong result.
#[allow(clippy::too_many_arguments)]
fn run<T: Product<C>, C: Scalar>(
    mma_sync: bool,
    precision: &str,
    b_layout: Layout,
    device: &Arc<gemm::Device>,
    reference: &Reference<'_, T, C>,
    (m, n, k): (usize, usize, usize),
    budget_ms: f64,
    csv: &mut Vec<String>,
) -> bool {
    let fail = |e: gemm::Error| -> ! {
        eprintln!("error: {e}");
        exit(2)
    };
    let a = DeviceMatrix::from_host(device, &random_matrix::<T>(m, k, 1)).unwrap_or_else(|e| fail(e));
    let bh = random_matrix_in::<T>(k, n, b_layout, 2);
    let b = DeviceMatrix::from_host(device, &bh).unwrap_or_else(|e| fail(e));
    // The reference's B: the same values, column-major where it reads no other.
    let b_ref = if reference.b_col_major && b_layout != Layout::ColMajor {
        let col = gemm::Matrix::from_fn_in(k, n, Layout::ColMajor, |p, j| bh[(p, j)]);
        Some(DeviceMatrix::from_host(device, &col).unwrap_or_else(|e| fail(e)))
    } else {
        None
    };
    let b_ref = b_ref.as_ref().unwrap_or(&b);
    let poison = gemm::Matrix::<C>::filled(m, n, C::POISON);
    let mut c = DeviceMatrix::from_host(device, &poison).unwrap_or_else(|e| fail(e));
    let mut r = DeviceMatrix::from_host(device, &poison).unwrap_or_else(|e| fail(e));
    let g = Gemm::new().allow_tf32(precision == "tf32");
    let g = if mma_sync { g.stage(gemm::tuning::Stage::TensorCore) } else { g };
    g.run_device(&a, &b, &mut c).unwrap_or_else(|e| fail(e));
    // cuBLAS refuses some shapes (INT8 with leading dimensions not
    // multiples of 4): ours is then timed alone, unchecked here (the GPU
    // tests check such shapes against the CPU).
    let refused = match (reference.call)(&a, b_ref, &mut r) {
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
        let mut time_cublas = || time_kernel(device, budget_ms / 10.0, 1000, |_| (reference.call)(&a, b_ref, &mut r));
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
        ("e4m3", "bf16") => gemm::tuning::WgmmaTypes::E4m3Bf16,
        ("e4m3", "f16") => gemm::tuning::WgmmaTypes::E4m3F16,
        ("e4m3", _) => gemm::tuning::WgmmaTypes::E4m3F32,
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
    let library = reference.library;
    let check = match &refused {
        Some(_) => format!("unchecked ({library} refused the shape)"),
        None if ok => format!("ok (rel. error {err:.1e} to {library})"),
        None => format!("WRONG (rel. error {err:.1e})"),
    };
    let layout = if b_layout == Layout::ColMajor { "b-col" } else { "row" };
    // FP8: per-tensor scales (of 1); the other types have none.
    let scaling = if T::NAME == "e4m3" { "tensor" } else { "none" };
    let cublas_row = refused.is_none();
    for (stage, stage_name, cfg, ms, kname, ratio, check) in [
        (
            0,
            "cublas",
            format!("{}; C {}", reference.name, C::NAME),
            theirs,
            reference.name.to_string(),
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
            "{},{date},{commit},{},{stage},{stage_name},{cfg},{m},{n},{k},{ms:.4},{:.1},,{cublas_gflops},{ratio},{check},{intensity:.1},{kname},NN,{layout},1,single,stage-best,{split},0,{scaling}",
            device.name(),
            precision,
            tflops(ms) * 1e3,
        ));
    }
    println!(
        "{:>5} -> {:<4} {m:>6}x{n}x{k}  {:<32} {:>8.3} ms {:>7.1} TFLOP/s | {library} {:>8.3} ms {:>7.1} TFLOP/s | ratio {:.3} | rel. error {err:.1e} {}",
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
    let mut lt = None;
    for &s in &sizes {
        for p in &products {
            match p.as_str() {
                "f16" => {
                    ok &= run_cublas::<f16, f32>(mma_sync, "f16", b_layout, &device, &cublas, s, budget_ms, &mut csv);
                    ok &= run_cublas::<f16, f16>(mma_sync, "f16", b_layout, &device, &cublas, s, budget_ms, &mut csv);
                }
                "bf16" => {
                    ok &= run_cublas::<bf16, f32>(mma_sync, "bf16", b_layout, &device, &cublas, s, budget_ms, &mut csv);
                    ok &=
                        run_cublas::<bf16, bf16>(mma_sync, "bf16", b_layout, &device, &cublas, s, budget_ms, &mut csv);
                }
                "tf32" => {
                    ok &= run_cublas::<f32, f32>(mma_sync, "tf32", b_layout, &device, &cublas, s, budget_ms, &mut csv)
                }
                "i8" => ok &= run_cublas::<i8, i32>(mma_sync, "i8", b_layout, &device, &cublas, s, budget_ms, &mut csv),
                "e4m3" if mma_sync => {
                    eprintln!("stage 8 has no FP8 kernels (e4m3 runs on stage 9 only)");
                    exit(2)
                }
                "e4m3" => {
                    let lt = lt.get_or_insert_with(|| {
                        CublasLt::new(&device).unwrap_or_else(|e| {
                            eprintln!("error: {e}");
                            exit(2)
                        })
                    });
                    ok &= run_e4m3::<bf16>(mma_sync, b_layout, &device, lt, s, budget_ms, &mut csv);
                    ok &= run_e4m3::<f32>(mma_sync, b_layout, &device, lt, s, budget_ms, &mut csv);
                }
                other => {
                    eprintln!("unknown product {other} (f16, bf16, tf32, i8, e4m3)");
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
