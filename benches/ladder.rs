//! The ladder benchmark: every stage's best configuration beside cuBLAS, in one
//! run, f64 and f32, at N = 1024, 2048, 4096 (square m = n = k).
//!
//! 1. Sweep: every configuration of each stage at N = 1024 (`registry::stage_configs`;
//!    the naive stages over all power-of-two Bx x By with 32..=1024 threads).
//! 2. Ladder: at each N, every configuration of the tiled stages and the five
//!    fastest block shapes of each naive stage; the fastest of each stage is
//!    reported beside cuBLAS on the same inputs. Every result is checked
//!    against cuBLAS ((k+2) eps |A||B|); a wrong one fails the run.
//!
//! Times are CUDA-event medians of kernel time only (`gemm::bench::time_kernel`),
//! random inputs in [-1, 1), rotated between sets when they would fit in L2.
//! Writes `ladder.csv`, `sweep.csv` and `BENCHMARKS.md` to `--out DIR`
//! (default `bench-out/`); commit them as `benches/results/latest.csv`,
//! `benches/results/sweep.csv` and `BENCHMARKS.md`.
//!
//! `cargo bench --bench ladder -- [--out DIR] [--sizes 1024,2048,4096]`

use gemm::bench::{commit, measure, measure_cublas, today_utc, Problem};
use gemm::cublas::Cublas;
use gemm::registry::stage_configs;
use gemm::{Device, Element, Error, KernelConfig, Precision, Stage};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

const SWEEP_N: usize = 1024;

struct Options {
    out: PathBuf,
    sizes: Vec<usize>,
}

fn options() -> Options {
    let mut o = Options { out: PathBuf::from("bench-out"), sizes: vec![1024, 2048, 4096] };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => o.out = it.next().map(PathBuf::from).expect("--out DIR"),
            "--sizes" => {
                o.sizes = it.next().expect("--sizes N,N").split(',').map(|s| s.parse().expect("size")).collect()
            }
            _ => {} // cargo bench passes --bench
        }
    }
    o
}

/// One line of `ladder.csv`.
struct LadderRow {
    precision: Precision,
    stage: Option<Stage>, // None: cuBLAS
    config: String,
    n: usize,
    ms: f64,
    gflops: f64,
    cublas_gflops: f64,
    check: String,
}

struct SweepRow {
    precision: Precision,
    stage: Stage,
    config: KernelConfig,
    n: usize,
    gflops: f64,
    ok: bool,
}

/// Configurations to try at every size: the tiled stages' whole menu; for the
/// naive stages (45 block shapes each) the five fastest of the N = 1024 sweep.
const NAIVE_FINALISTS: usize = 5;

fn bench_precision<T: Element>(
    device: &Arc<Device>,
    cublas: &Cublas,
    sizes: &[usize],
    ladder: &mut Vec<LadderRow>,
    sweep: &mut Vec<SweepRow>,
) -> Result<(), Error> {
    let p = T::PRECISION;
    // 1. Sweep every configuration at N = 1024.
    let mut problem = Problem::<T>::random(device, SWEEP_N, SWEEP_N, SWEEP_N, 7)?;
    let reference = problem.reference(cublas)?;
    let mut finalists: Vec<(Stage, Vec<KernelConfig>)> = Vec::new();
    for stage in Stage::ALL {
        let mut scored = Vec::new();
        for config in stage_configs(stage) {
            let ok = problem.check(&reference, config)?.passed();
            let m = measure(&mut problem, config, 60.0)?;
            eprintln!("sweep {} {stage} {config}: {:.1} GFLOP/s{}", p.name(), m.gflops, if ok { "" } else { " WRONG" });
            sweep.push(SweepRow { precision: p, stage, config, n: SWEEP_N, gflops: m.gflops, ok });
            if ok {
                scored.push((config, m.gflops));
            }
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        let keep = if matches!(stage, Stage::Naive | Stage::Coalesced) { NAIVE_FINALISTS } else { scored.len() };
        finalists.push((stage, scored.into_iter().take(keep).map(|(c, _)| c).collect()));
    }
    drop(problem);
    // 2. At each size: every finalist, the fastest correct one reported, beside cuBLAS.
    for &n in sizes {
        let mut problem = Problem::<T>::random(device, n, n, n, 11 + n as u64)?;
        let reference = problem.reference(cublas)?;
        let blas = measure_cublas(cublas, &mut problem, 500.0)?;
        ladder.push(LadderRow {
            precision: p,
            stage: None,
            config: "cublas".into(),
            n,
            ms: blas.timing.median_ms,
            gflops: blas.gflops,
            cublas_gflops: blas.gflops,
            check: "reference".into(),
        });
        for (stage, configs) in &finalists {
            let mut best: Option<LadderRow> = None;
            for &config in configs {
                let cmp = problem.check(&reference, config)?;
                let m = measure(&mut problem, config, 300.0)?;
                eprintln!(
                    "n={n} {} {stage} {config}: {:.1} GFLOP/s ({:.3} of cuBLAS) {cmp}",
                    p.name(),
                    m.gflops,
                    m.gflops / blas.gflops
                );
                if n != SWEEP_N {
                    sweep.push(SweepRow { precision: p, stage: *stage, config, n, gflops: m.gflops, ok: cmp.passed() });
                }
                let row = LadderRow {
                    precision: p,
                    stage: Some(*stage),
                    config: config.to_string(),
                    n,
                    ms: m.timing.median_ms,
                    gflops: m.gflops,
                    cublas_gflops: blas.gflops,
                    check: if cmp.passed() {
                        format!("ok ({:.2} of bound)", cmp.max_error_over_bound)
                    } else {
                        "WRONG".into()
                    },
                };
                if !cmp.passed() {
                    ladder.push(row); // reported, and fails the run
                } else if best.as_ref().is_none_or(|b| row.gflops > b.gflops) {
                    best = Some(row);
                }
            }
            ladder.extend(best);
        }
    }
    Ok(())
}

fn main() {
    let o = options();
    let device = gemm::default_device().unwrap_or_else(|e| {
        eprintln!("ladder: {e}");
        std::process::exit(2)
    });
    let cublas = Cublas::new(&device).expect("cuBLAS");
    let (date, commit) = (today_utc(), commit());
    let mut ladder = Vec::new();
    let mut sweep = Vec::new();
    bench_precision::<f64>(&device, &cublas, &o.sizes, &mut ladder, &mut sweep).expect("f64 benchmark");
    bench_precision::<f32>(&device, &cublas, &o.sizes, &mut ladder, &mut sweep).expect("f32 benchmark");

    std::fs::create_dir_all(&o.out).expect("--out");
    let dev = device.name().replace(',', " ");
    let mut csv = String::from("device,date,commit,precision,stage,stage_name,configuration,m,n,k,ms,gflops,pct_fma_peak,cublas_gflops,ratio_to_cublas,check\n");
    for r in &ladder {
        let peak = device.peak_fma_gflops(r.precision);
        writeln!(
            csv,
            "{dev},{date},{commit},{},{},{},{},{n},{n},{n},{:.4},{:.1},{:.1},{:.1},{:.4},{}",
            r.precision.name(),
            r.stage.map_or(0, |s| s.number()),
            r.stage.map_or("cublas", |s| s.name()),
            r.config.replace(',', ";"),
            r.ms,
            r.gflops,
            100.0 * r.gflops / peak,
            r.cublas_gflops,
            r.gflops / r.cublas_gflops,
            r.check,
            n = r.n
        )
        .unwrap();
    }
    std::fs::write(o.out.join("ladder.csv"), &csv).expect("write ladder.csv");
    let mut sw = String::from("device,date,commit,precision,stage,stage_name,configuration,n,gflops,check\n");
    for r in &sweep {
        writeln!(
            sw,
            "{dev},{date},{commit},{},{},{},{},{},{:.1},{}",
            r.precision.name(),
            r.stage.number(),
            r.stage.name(),
            r.config.to_string().replace(',', ";"),
            r.n,
            r.gflops,
            if r.ok { "ok" } else { "WRONG" }
        )
        .unwrap();
    }
    std::fs::write(o.out.join("sweep.csv"), &sw).expect("write sweep.csv");

    // BENCHMARKS.md
    let mut md = String::new();
    writeln!(md, "# Benchmarks\n").unwrap();
    writeln!(md, "Written by `benches/ladder.rs` (`cargo bench --bench ladder`); do not edit by hand.\n").unwrap();
    writeln!(
        md,
        "- device: {} ({} SMs, {:.0} MHz, PTX {})",
        device.name(),
        device.sm_count(),
        device.clock_mhz(),
        device.ptx_arch()
    )
    .unwrap();
    writeln!(md, "- date: {date}; commit: {commit}").unwrap();
    writeln!(md, "- square m = n = k; kernel time only (CUDA events, median), random inputs in [-1, 1); every result checked against cuBLAS within (k+2)·eps·(|A||B|)").unwrap();
    writeln!(md, "- each stage at its fastest configuration at that N (candidates: every tile configuration; for the naive stages the 5 fastest block shapes of the sweep at N = {SWEEP_N}; all timings in sweep.csv); % of peak is of the FMA peak without tensor cores (f64 {:.0}, f32 {:.0} GFLOP/s); cuBLAS DGEMM uses the FP64 tensor cores, SGEMM runs without TF32\n", device.peak_fma_gflops(Precision::F64), device.peak_fma_gflops(Precision::F32)).unwrap();
    for p in [Precision::F64, Precision::F32] {
        writeln!(md, "## {}gemm ({})\n", p.blas_prefix(), p.name()).unwrap();
        write!(md, "| stage |").unwrap();
        for n in &o.sizes {
            write!(md, " N={n}: GFLOP/s (x cuBLAS), configuration |").unwrap();
        }
        writeln!(md).unwrap();
        writeln!(md, "|---|{}", "---|".repeat(o.sizes.len())).unwrap();
        let mut stages: Vec<Option<Stage>> = Stage::ALL.iter().copied().map(Some).collect();
        stages.push(None);
        for s in stages {
            let name = s.map_or("cuBLAS".to_string(), |s| format!("{} {}", s.number(), s.title()));
            write!(md, "| {name} |").unwrap();
            for &n in &o.sizes {
                match ladder.iter().find(|r| r.precision == p && r.stage == s && r.n == n) {
                    Some(r) if s.is_some() => {
                        write!(md, " {:.0} ({:.3}), {} |", r.gflops, r.gflops / r.cublas_gflops, r.config).unwrap()
                    }
                    Some(r) => write!(md, " {:.0} |", r.gflops).unwrap(),
                    None => write!(md, " - |").unwrap(),
                }
            }
            writeln!(md).unwrap();
        }
        writeln!(md).unwrap();
    }
    std::fs::write(o.out.join("BENCHMARKS.md"), &md).expect("write BENCHMARKS.md");
    print!("{md}");
    if ladder.iter().any(|r| r.check == "WRONG") || sweep.iter().any(|r| !r.ok) {
        eprintln!("ladder: some results were WRONG");
        std::process::exit(1);
    }
}
