//! What the stage examples share: arguments, opening the GPU and cuBLAS,
//! and the table each example prints. Measurement itself is `gemm::bench`.
#![allow(dead_code)] // each example uses a subset

use gemm::bench::{measure, measure_cublas, Measurement, Problem};
use gemm::cublas::Cublas;
use gemm::tuning::registry::stage_configs;
use gemm::tuning::{KernelConfig, Stage};
use gemm::{Device, Element, Precision};
use std::process::exit;
use std::sync::Arc;

/// Command line: `[N | MxNxK] [--f32] [--sweep] [--budget-ms MS]`.
pub struct Args {
    /// m, n, k.
    pub dims: (usize, usize, usize),
    /// f64 unless `--f32`.
    pub precision: Precision,
    /// `--sweep`: every configuration (stage 1: the block-size heat map).
    pub sweep: bool,
    /// Time spent timing each configuration.
    pub budget_ms: f64,
}

pub fn args(default_n: usize) -> Args {
    let mut a =
        Args { dims: (default_n, default_n, default_n), precision: Precision::F64, sweep: false, budget_ms: 300.0 };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--f32" => a.precision = Precision::F32,
            "--sweep" => a.sweep = true,
            "--budget-ms" => a.budget_ms = it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| usage()),
            s => {
                let parts: Vec<usize> = s.split('x').map(|p| p.parse().unwrap_or_else(|_| usage())).collect();
                a.dims = match parts[..] {
                    [n] => (n, n, n),
                    [m, n, k] => (m, n, k),
                    _ => usage(),
                };
            }
        }
    }
    a
}

fn usage() -> ! {
    eprintln!("usage: [N | MxNxK] [--f32] [--sweep] [--budget-ms MS]");
    exit(2)
}

/// The default device and a cuBLAS handle on it, or exit 2 with the reason.
pub fn open() -> (Arc<Device>, Cublas) {
    let device = gemm::default_device().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        exit(2)
    });
    let cublas = Cublas::new(&device).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        exit(2)
    });
    println!(
        "device: {} (sm_{}{}, {} SMs, {:.0} MHz, kernels: {}), {}",
        device.name(),
        device.compute_capability().0,
        device.compute_capability().1,
        device.sm_count(),
        device.clock_mhz(),
        device.kernel_code(),
        gemm::bench::today_utc()
    );
    (device, cublas)
}

/// One stage configuration's result.
pub struct Row {
    pub config: KernelConfig,
    pub measurement: Measurement,
    pub ok: bool,
}

/// Runs every configuration on one random problem: checks it against the
/// cuBLAS reference (NaN-poisoned C), times it and cuBLAS, and prints one
/// line each. Returns the rows and cuBLAS's measurement; exits 1 after the
/// table if any result was wrong.
pub fn run_table<T: Element>(
    device: &Arc<Device>,
    cublas: &Cublas,
    args: &Args,
    configs: &[KernelConfig],
) -> (Vec<Row>, Measurement) {
    let fail = |e: gemm::Error| -> ! {
        eprintln!("error: {e}");
        exit(2)
    };
    let (m, n, k) = args.dims;
    let mut problem = Problem::<T>::random(device, m, n, k, 42).unwrap_or_else(|e| fail(e));
    let reference = problem.reference(cublas).unwrap_or_else(|e| fail(e));
    let blas = measure_cublas(cublas, &mut problem, args.budget_ms).unwrap_or_else(|e| fail(e));
    let peak = device.peak_fma_gflops(T::PRECISION);
    let tensor = device.peak_fp64_tensor_gflops();
    println!(
        "{}gemm m={m} n={n} k={k}; peaks: FMA {peak:.0} GFLOP/s, FP64 tensor cores {tensor:.0} GFLOP/s",
        T::PRECISION.blas_prefix()
    );
    println!("(% peak is of the FMA peak for stages 1-7, of the tensor-core peak for stage 8)");
    println!("{:<52} {:>10} {:>10} {:>7} {:>9}  check", "stage / configuration", "ms", "GFLOP/s", "% peak", "x cuBLAS");
    let mut rows = Vec::new();
    let mut all_ok = true;
    for &config in configs {
        let peak = device.peak_gflops(T::PRECISION, config.stage());
        let cmp = problem.check(&reference, config).unwrap_or_else(|e| fail(e));
        let meas = measure(&mut problem, config, args.budget_ms).unwrap_or_else(|e| fail(e));
        println!(
            "{:<52} {:>10.3} {:>10.1} {:>6.1}% {:>9.3}  {}",
            format!("{} {}", config.stage().number(), config),
            meas.timing.median_ms,
            meas.gflops,
            100.0 * meas.gflops / peak,
            meas.gflops / blas.gflops,
            if cmp.passed() { "ok".to_string() } else { cmp.to_string() }
        );
        all_ok &= cmp.passed();
        rows.push(Row { config, measurement: meas, ok: cmp.passed() });
    }
    let blas_peak = if T::PRECISION == Precision::F64 { tensor } else { peak };
    println!(
        "{:<52} {:>10.3} {:>10.1} {:>6.1}% {:>9.3}",
        "cuBLAS",
        blas.timing.median_ms,
        blas.gflops,
        100.0 * blas.gflops / blas_peak,
        1.0
    );
    if !all_ok {
        eprintln!("FAILED: a result was outside the error bound (see above)");
        exit(1);
    }
    (rows, blas)
}

/// The example of one of stages 5-8: every compiled configuration of the
/// stage for the precision asked for, in one table.
pub fn run_stage<T: Element>(stage: Stage, args: &Args) {
    let (device, cublas) = open();
    let configs = stage_configs(stage, T::PRECISION);
    if configs.is_empty() {
        eprintln!("{stage} has no {} kernels", T::PRECISION.name());
        exit(2);
    }
    run_table::<T>(&device, &cublas, args, &configs);
}

/// Dispatches on the precision asked for.
#[macro_export]
macro_rules! by_precision {
    ($args:expr, $f:ident) => {
        match $args.precision {
            gemm::Precision::F64 => $f::<f64>(&$args),
            _ => $f::<f32>(&$args),
        }
    };
}
