//! FP8 (e4m3) products beside cuBLASLt: for each shape m x n x k and each
//! C type, the time of our `Gemm::new().run_device` on
//! `DeviceMatrix<F8E4M3>` operands and of cuBLASLt's FP8 matmul
//! ([`gemm::cublas_lt::CublasLt::matmul_fp8`]: `CUBLAS_COMPUTE_32F`,
//! per-tensor scales all 1) on the same operands, C = A * B (alpha 1,
//! beta 0).
//!
//! Operands are uniform random values in [-1, 1) rounded to e4m3, A
//! row-major and B column-major (both K-major: the layout both sides read
//! without a copy). Each side is timed with CUDA events on the device's
//! stream (`gemm::bench::time_kernel`: a warm-up, a probe, then `--reps`
//! timed runs, at least 10) and reported as the median; TFLOP/s is
//! 2mnk / s / 1e12, and the ratio is cuBLASLt ms / ours ms (above 1: ours is
//! faster). The difference is max |ours - cuBLASLt| / max |cuBLASLt| over C
//! (both copied back, compared as f64): the two accumulate in f32 in
//! different orders and each rounds to C's type.
//!
//! ```sh
//! cargo run --release --example fp8
//! cargo run --release --example fp8 -- --shapes 4096x4096x4096,8192x8192x8192 --out bf16,f32 --csv benches/results
//! ```
//!
//! `--csv DIR` writes `DIR/fp8.csv` (replacing it):
//! `device,date,commit,precision,scaling,m,n,k,c_type,ms,tflops,cublaslt_ms,cublaslt_tflops,ratio`
//! (precision `e4m3`, scaling `tensor`).

use gemm::bench::{commit, time_kernel, today_utc};
use gemm::cublas_lt::CublasLt;
use gemm::float8::F8E4M3;
use gemm::half::bf16;
use gemm::half::f16;
use gemm::{Device, DeviceMatrix, Error, Gemm, Matrix, Product, Scalar};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::exit;
use std::sync::Arc;

const USAGE: &str = "usage: fp8 [--shapes MxNxK,...] [--out bf16,f16,f32] [--reps N (>= 10)] [--csv DIR]";
const CSV_HEAD: &str = "device,date,commit,precision,scaling,m,n,k,c_type,ms,tflops,cublaslt_ms,cublaslt_tflops,ratio";

struct Options {
    shapes: Vec<(usize, usize, usize)>,
    outs: Vec<String>,
    reps: usize,
    csv: Option<PathBuf>,
}

fn options() -> Options {
    let mut o = Options {
        shapes: shapes("4096x4096x4096,8192x8192x4096,8192x8192x8192"),
        outs: vec!["bf16".into()],
        reps: 20,
        csv: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--shapes" => o.shapes = shapes(&value()),
            "--out" => o.outs = value().split(',').map(str::to_string).collect(),
            "--reps" => o.reps = value().parse().ok().filter(|&r| r >= 10).unwrap_or_else(|| usage()),
            "--csv" => o.csv = Some(PathBuf::from(value())),
            "--help" | "-h" => {
                println!("{USAGE}");
                exit(0)
            }
            _ => usage(),
        }
    }
    if o.outs.iter().any(|t| !["bf16", "f16", "f32"].contains(&t.as_str())) {
        usage()
    }
    o
}

fn shapes(list: &str) -> Vec<(usize, usize, usize)> {
    let shape = |s: &str| match s.split('x').map(str::parse).collect::<Result<Vec<usize>, _>>().as_deref() {
        Ok(&[m, n, k]) if m > 0 && n > 0 && k > 0 => (m, n, k),
        _ => usage(),
    };
    list.split(',').map(shape).collect()
}

fn usage() -> ! {
    eprintln!("{USAGE}");
    exit(2)
}

/// One shape's result.
struct Row {
    shape: (usize, usize, usize),
    c_type: &'static str,
    ms: f64,
    cublaslt_ms: f64,
}

/// Times both sides on one shape with a C of type `C` and prints the line.
fn run<C: Scalar>(
    device: &Arc<Device>,
    lt: &CublasLt,
    (a, b): (&DeviceMatrix<F8E4M3>, &DeviceMatrix<F8E4M3>),
    reps: usize,
) -> Result<Row, Error>
where
    F8E4M3: Product<C>,
{
    let (m, n, k) = (a.rows(), b.cols(), a.cols());
    let mut ours = DeviceMatrix::<C>::zeros(device, m, n)?;
    let mut theirs = DeviceMatrix::<C>::zeros(device, m, n)?;
    let gemm = Gemm::new();
    // An infinite budget: exactly `reps` timed runs after the warm-up and probe.
    let t_ours = time_kernel(device, f64::INFINITY, reps, |_| gemm.run_device(a, b, &mut ours))?;
    let t_lt = time_kernel(device, f64::INFINITY, reps, |_| lt.matmul_fp8(1.0, a, b, 0.0, &mut theirs))?;
    let (ours, theirs) = (ours.to_host()?, theirs.to_host()?);
    let (mut diff, mut scale) = (0.0f64, 0.0f64);
    for i in 0..m {
        for j in 0..n {
            let (x, y) = (ours[(i, j)].as_f64(), theirs[(i, j)].as_f64());
            diff = diff.max((x - y).abs());
            scale = scale.max(y.abs());
        }
    }
    let row = Row { shape: (m, n, k), c_type: C::NAME, ms: t_ours.median_ms, cublaslt_ms: t_lt.median_ms };
    println!(
        "{m:>6} x {n:>6} x {k:>6}  C {:<4}  ours {:>8.3} ms {:>7.1} TFLOP/s  cuBLASLt {:>8.3} ms {:>7.1} TFLOP/s  \
         ratio {:.3}  max|diff|/max|C| {:.2e}",
        C::NAME,
        row.ms,
        tflops(row.shape, row.ms),
        row.cublaslt_ms,
        tflops(row.shape, row.cublaslt_ms),
        row.cublaslt_ms / row.ms,
        diff / scale.max(f64::MIN_POSITIVE),
    );
    Ok(row)
}

fn tflops((m, n, k): (usize, usize, usize), ms: f64) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64 / (ms * 1e-3) / 1e12
}

/// A `rows x cols` matrix of uniform values in [-1, 1) rounded to e4m3.
fn random(rows: usize, cols: usize, col_major: bool, rng: &mut StdRng) -> Matrix<F8E4M3> {
    let mut f = |_: usize, _: usize| F8E4M3::from_f64(rng.random_range(-1.0..1.0));
    if col_major {
        Matrix::from_fn_col_major(rows, cols, &mut f)
    } else {
        Matrix::from_fn(rows, cols, &mut f)
    }
}

fn main() -> Result<(), Error> {
    let o = options();
    let device = gemm::default_device()?;
    let lt = CublasLt::new(&device)?;
    let (major, minor) = device.compute_capability();
    println!("device: {} (sm_{major}{minor}, {} SMs), {}", device.name(), device.sm_count(), today_utc());
    println!("e4m3 x e4m3, A row-major, B column-major; median of {} runs; ratio: cuBLASLt ms / ours ms", o.reps);
    let mut rng = StdRng::seed_from_u64(8);
    let mut rows = Vec::new();
    for &(m, n, k) in &o.shapes {
        let a = DeviceMatrix::from_host(&device, &random(m, k, false, &mut rng))?;
        let b = DeviceMatrix::from_host(&device, &random(k, n, true, &mut rng))?;
        for out in &o.outs {
            rows.push(match out.as_str() {
                "bf16" => run::<bf16>(&device, &lt, (&a, &b), o.reps)?,
                "f16" => run::<f16>(&device, &lt, (&a, &b), o.reps)?,
                _ => run::<f32>(&device, &lt, (&a, &b), o.reps)?,
            });
        }
    }
    if let Some(dir) = &o.csv {
        let (dev, date, commit) = (device.name().replace([',', '\n'], ";"), today_utc(), commit());
        let mut text = format!("{CSV_HEAD}\n");
        for r in &rows {
            let (m, n, k) = r.shape;
            writeln!(
                text,
                "{dev},{date},{commit},e4m3,tensor,{m},{n},{k},{},{:.4},{:.1},{:.4},{:.1},{:.4}",
                r.c_type,
                r.ms,
                tflops(r.shape, r.ms),
                r.cublaslt_ms,
                tflops(r.shape, r.cublaslt_ms),
                r.cublaslt_ms / r.ms
            )
            .expect("writing to a String");
        }
        let path = dir.join("fp8.csv");
        match std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, text)) {
            Ok(()) => println!("wrote {}", path.display()),
            Err(e) => {
                eprintln!("fp8: {}: {e}", path.display());
                exit(2)
            }
        }
    }
    Ok(())
}
