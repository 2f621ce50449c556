//! FP8 products beside cuBLASLt: for each shape m x n x k, each pair of
//! FP8 formats (`--pairs`: e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3), each
//! scaling (`--scaling`) and each C type, the time of ours and of
//! cuBLASLt's FP8 matmul on the same operands (`CUBLAS_COMPUTE_32F`):
//!
//! - `tensor`: C = A * B (per-tensor scales 1, alpha 1, beta 0): our
//!   `Gemm::new().run_fp8_device` beside
//!   [`gemm::cublas_lt::CublasLt::matmul_fp8`];
//! - `channel`: C(i, j) = rs(i) cs(j) (A * B)(i, j), a scale per row of A
//!   and per column of B (uniform in [0.5, 2)): our
//!   `Gemm::new().epilogue(&Epilogue::new().row_scales(..).col_scales(..))
//!   .run_fp8_device` beside
//!   [`gemm::cublas_lt::CublasLt::matmul_fp8_channel_scaled`] (cuBLASLt's
//!   outer-vector scaling).
//!
//! Operands are uniform random values in [-1, 1) rounded to their FP8
//! format, A row-major and B column-major (both K-major: the layout both
//! sides read without a copy); with `--b-layout row` (or `col,row`) also B
//! row-major: ours reads it through a K-major copy made in the call (wgmma
//! reads FP8 K-major only), timed with the product; cuBLASLt, which takes
//! FP8 only in that form too ("TN"), gets the column-major B of the same
//! values, so its time has no copy. Each side is timed with CUDA events on the device's
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
//! cargo run --release --example fp8 -- --pairs e4m3,e4m3xe5m2,e5m2xe4m3 --scaling tensor,channel
//! cargo run --release --example fp8 -- --b-layout col,row
//! ```
//!
//! `--csv DIR` writes `DIR/fp8.csv` (replacing it):
//! `device,date,commit,precision,scaling,m,n,k,c_type,ms,tflops,cublaslt_ms,cublaslt_tflops,ratio,layout`
//! (precision `e4m3`, `e4m3xe5m2` or `e5m2xe4m3`: A's format, then B's;
//! scaling `tensor` or `channel`; layout `b-col` or `row`, B's).

use gemm::bench::{commit, time_kernel, today_utc};
use gemm::cublas_lt::CublasLt;
use gemm::cudarc::driver::CudaSlice;
use gemm::float8::{F8E4M3, F8E5M2};
use gemm::half::bf16;
use gemm::half::f16;
use gemm::{Device, DeviceMatrix, Epilogue, Error, Fp8, Gemm, Layout, Matrix, Product, Scalar};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::exit;
use std::sync::Arc;

const USAGE: &str = "usage: fp8 [--shapes MxNxK,...] [--pairs e4m3,e4m3xe5m2,e5m2xe4m3] [--scaling tensor,channel] \
                     [--out bf16,f16,f32] [--b-layout col,row] [--reps N (>= 10)] [--csv DIR]";
const CSV_HEAD: &str =
    "device,date,commit,precision,scaling,m,n,k,c_type,ms,tflops,cublaslt_ms,cublaslt_tflops,ratio,layout";
const PAIRS: [&str; 3] = ["e4m3", "e4m3xe5m2", "e5m2xe4m3"];
const SCALINGS: [&str; 2] = ["tensor", "channel"];

struct Options {
    shapes: Vec<(usize, usize, usize)>,
    pairs: Vec<String>,
    scalings: Vec<String>,
    outs: Vec<String>,
    b_layouts: Vec<String>,
    reps: usize,
    csv: Option<PathBuf>,
}

fn options() -> Options {
    let mut o = Options {
        shapes: shapes("4096x4096x4096,8192x8192x4096,8192x8192x8192"),
        pairs: vec!["e4m3".into()],
        scalings: vec!["tensor".into()],
        outs: vec!["bf16".into()],
        b_layouts: vec!["col".into()],
        reps: 20,
        csv: None,
    };
    let list = |v: String| v.split(',').map(str::to_string).collect::<Vec<_>>();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--shapes" => o.shapes = shapes(&value()),
            "--pairs" => o.pairs = list(value()),
            "--scaling" => o.scalings = list(value()),
            "--out" => o.outs = list(value()),
            "--b-layout" => o.b_layouts = list(value()),
            "--reps" => o.reps = value().parse().ok().filter(|&r| r >= 10).unwrap_or_else(|| usage()),
            "--csv" => o.csv = Some(PathBuf::from(value())),
            "--help" | "-h" => {
                println!("{USAGE}");
                exit(0)
            }
            _ => usage(),
        }
    }
    let known = |given: &[String], names: &[&str]| given.iter().all(|g| names.contains(&g.as_str()));
    if !known(&o.outs, &["bf16", "f16", "f32"])
        || !known(&o.pairs, &PAIRS)
        || !known(&o.scalings, &SCALINGS)
        || !known(&o.b_layouts, &["col", "row"])
    {
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

/// One measured line.
struct Row {
    pair: String,
    scaling: &'static str,
    shape: (usize, usize, usize),
    c_type: &'static str,
    ms: f64,
    cublaslt_ms: f64,
    /// B's layout: `b-col` or `row`.
    layout: &'static str,
}

/// Per-row and per-column scales (`channel` scaling), on the device.
struct Channels {
    rows: CudaSlice<f32>,
    cols: CudaSlice<f32>,
}

/// Times both sides on one product (`channels`: with per-row and
/// per-column scales, else per-tensor) with a C of type `C` and prints
/// the line. Ours reads `b`; cuBLASLt `b_lt`, the same values column-major.
fn run<A: Fp8, B: Fp8, C: Scalar>(
    device: &Arc<Device>,
    lt: &CublasLt,
    (a, b, b_lt): (&DeviceMatrix<A>, &DeviceMatrix<B>, &DeviceMatrix<B>),
    channels: Option<&Channels>,
    reps: usize,
) -> Result<Row, Error>
where
    F8E4M3: Product<C>,
{
    let (m, n, k) = (a.rows(), b.cols(), a.cols());
    let layout = if b.layout() == Layout::ColMajor { "b-col" } else { "row" };
    let mut ours = DeviceMatrix::<C>::zeros(device, m, n)?;
    let mut theirs = DeviceMatrix::<C>::zeros(device, m, n)?;
    let gemm = Gemm::new();
    // An infinite budget: exactly `reps` timed runs after the warm-up and probe.
    let (t_ours, t_lt) = match channels {
        None => (
            time_kernel(device, f64::INFINITY, reps, |_| gemm.run_fp8_device(a, b, &mut ours))?,
            time_kernel(device, f64::INFINITY, reps, |_| lt.matmul_fp8(1.0, a, b_lt, 0.0, &mut theirs))?,
        ),
        Some(s) => {
            let e = Epilogue::new().row_scales(&s.rows).col_scales(&s.cols);
            let fused = gemm.epilogue(&e);
            (
                time_kernel(device, f64::INFINITY, reps, |_| fused.run_fp8_device(a, b, &mut ours))?,
                time_kernel(device, f64::INFINITY, reps, |_| {
                    lt.matmul_fp8_channel_scaled(a, b_lt, &mut theirs, &s.rows, &s.cols)
                })?,
            )
        }
    };
    let (ours, theirs) = (ours.to_host()?, theirs.to_host()?);
    let (mut diff, mut scale) = (0.0f64, 0.0f64);
    for i in 0..m {
        for j in 0..n {
            let (x, y) = (ours[(i, j)].as_f64(), theirs[(i, j)].as_f64());
            diff = diff.max((x - y).abs());
            scale = scale.max(y.abs());
        }
    }
    let pair = if A::NAME == B::NAME { A::NAME.to_string() } else { format!("{}x{}", A::NAME, B::NAME) };
    let scaling = if channels.is_some() { "channel" } else { "tensor" };
    let row = Row {
        pair,
        scaling,
        shape: (m, n, k),
        c_type: C::NAME,
        ms: t_ours.median_ms,
        cublaslt_ms: t_lt.median_ms,
        layout,
    };
    println!(
        "{m:>6} x {n:>6} x {k:>6}  {:<9} {:<7} B {:<5} C {:<4}  ours {:>8.3} ms {:>7.1} TFLOP/s  cuBLASLt {:>8.3} ms \
         {:>7.1} TFLOP/s  ratio {:.3}  max|diff|/max|C| {:.2e}",
        row.pair,
        scaling,
        layout,
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

/// [`run`] for each C type of `outs`.
fn run_outs<A: Fp8, B: Fp8>(
    device: &Arc<Device>,
    lt: &CublasLt,
    (a, b): (&DeviceMatrix<A>, (&DeviceMatrix<B>, &DeviceMatrix<B>)),
    channels: Option<&Channels>,
    (outs, reps): (&[String], usize),
) -> Result<Vec<Row>, Error> {
    outs.iter()
        .map(|out| match out.as_str() {
            "bf16" => run::<A, B, bf16>(device, lt, (a, b.0, b.1), channels, reps),
            "f16" => run::<A, B, f16>(device, lt, (a, b.0, b.1), channels, reps),
            _ => run::<A, B, f32>(device, lt, (a, b.0, b.1), channels, reps),
        })
        .collect()
}

/// B as ours reads it in `layout`: the row-major copy for `row`, else the
/// column-major one (cuBLASLt's).
fn pick<'a, T: Scalar>(
    layout: &str,
    col: &'a DeviceMatrix<T>,
    row: &'a Option<DeviceMatrix<T>>,
) -> &'a DeviceMatrix<T> {
    match (layout, row) {
        ("row", Some(r)) => r,
        _ => col,
    }
}

fn tflops((m, n, k): (usize, usize, usize), ms: f64) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64 / (ms * 1e-3) / 1e12
}

/// A `rows x cols` matrix of uniform values in [-1, 1) rounded to `T`.
fn random<T: Scalar>(rows: usize, cols: usize, col_major: bool, rng: &mut StdRng) -> Matrix<T> {
    let mut f = |_: usize, _: usize| T::from_f64(rng.random_range(-1.0..1.0));
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
    println!(
        "A row-major, B column-major (b-col) or row-major (row: cuBLASLt reads the column-major copy); \
         median of {} runs; ratio: cuBLASLt ms / ours ms",
        o.reps
    );
    let mut rng = StdRng::seed_from_u64(8);
    let mut rows = Vec::new();
    for &(m, n, k) in &o.shapes {
        let a4 = DeviceMatrix::from_host(&device, &random::<F8E4M3>(m, k, false, &mut rng))?;
        let b4h = random::<F8E4M3>(k, n, true, &mut rng);
        let b4 = DeviceMatrix::from_host(&device, &b4h)?;
        let e5m2 = o.pairs.iter().any(|p| p != "e4m3");
        let (a5, b5h) = if e5m2 {
            (
                Some(DeviceMatrix::from_host(&device, &random::<F8E5M2>(m, k, false, &mut rng))?),
                Some(random::<F8E5M2>(k, n, true, &mut rng)),
            )
        } else {
            (None, None)
        };
        let b5 = b5h.as_ref().map(|b| DeviceMatrix::from_host(&device, b)).transpose()?;
        // B row-major: the same values.
        let row_major = o.b_layouts.iter().any(|l| l == "row");
        let b4r = match row_major {
            true => Some(DeviceMatrix::from_host(&device, &Matrix::from_fn(k, n, |p, j| b4h[(p, j)]))?),
            false => None,
        };
        let b5r = match (&b5h, row_major) {
            (Some(b), true) => Some(DeviceMatrix::from_host(&device, &Matrix::from_fn(k, n, |p, j| b[(p, j)]))?),
            _ => None,
        };
        let stream = device.stream();
        let mut scales = |len: usize| -> Result<CudaSlice<f32>, Error> {
            let v: Vec<f32> = (0..len).map(|_| rng.random_range(0.5..2.0)).collect();
            Ok(stream.clone_htod(&v)?)
        };
        let channels = Channels { rows: scales(m)?, cols: scales(n)? };
        for b_layout in &o.b_layouts {
            // Ours reads B in this layout; cuBLASLt the column-major one.
            for scaling in &o.scalings {
                let ch = (scaling == "channel").then_some(&channels);
                for pair in &o.pairs {
                    let at = (&o.outs[..], o.reps);
                    rows.extend(match (pair.as_str(), &a5, &b5) {
                        ("e4m3xe5m2", _, Some(b5)) => {
                            run_outs(&device, &lt, (&a4, (pick(b_layout, b5, &b5r), b5)), ch, at)?
                        }
                        ("e5m2xe4m3", Some(a5), _) => {
                            run_outs(&device, &lt, (a5, (pick(b_layout, &b4, &b4r), &b4)), ch, at)?
                        }
                        _ => run_outs(&device, &lt, (&a4, (pick(b_layout, &b4, &b4r), &b4)), ch, at)?,
                    });
                }
            }
        }
    }
    if let Some(dir) = &o.csv {
        let (dev, date, commit) = (device.name().replace([',', '\n'], ";"), today_utc(), commit());
        let mut text = format!("{CSV_HEAD}\n");
        for r in &rows {
            let (m, n, k) = r.shape;
            writeln!(
                text,
                "{dev},{date},{commit},{},{},{m},{n},{k},{},{:.4},{:.1},{:.4},{:.1},{:.4},{}",
                r.pair,
                r.scaling,
                r.c_type,
                r.ms,
                tflops(r.shape, r.ms),
                r.cublaslt_ms,
                tflops(r.shape, r.cublaslt_ms),
                r.cublaslt_ms / r.ms,
                r.layout
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
