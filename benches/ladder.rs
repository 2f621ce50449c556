//! The ladder benchmark: every stage's best configuration beside cuBLAS, in one
//! run, f64 and f32, over squares 256-8192, 1000, 1023, 3000 and 4096x4096x256;
//! and the default path in every op and layout combination beside cuBLAS.
//!
//! 1. Sweep: every configuration of each stage at N = 1024 (`registry::stage_configs`;
//!    the naive stages over all power-of-two Bx x By with 32..=1024 threads:
//!    seed 000's heat map).
//! 2. Ladder: at each shape, every configuration of the tiled stages and the
//!    fastest block shapes of each naive stage (3, or 1 above 2^30 flops/2);
//!    the fastest of each stage is reported beside cuBLAS on the same inputs.
//!    Results are checked against cuBLAS ((k+2) eps |A||B|): every candidate
//!    at small shapes, the reported one at large shapes; a wrong one fails the
//!    run.
//! 3. Combinations: at 1024³ and 4096³ (`--combo-shapes`), the default path
//!    (`Gemm::new()` with the op flags: the measured default choice) for each
//!    (op(A), op(B)) in NN, NT, TN, TT and each storage order of A, B and C
//!    (row, col), beside cuBLAS on the same operands with the same flags. Each
//!    combination is checked against cuBLAS before it is timed; the same
//!    budgets as the ladder.
//!
//! Times are CUDA-event medians of kernel time only (`gemm::bench::time_kernel`),
//! random inputs in [-1, 1), rotated between sets when they would fit in L2.
//! Writes to `--out DIR` (default `bench-out/`): `latest.csv` (one row per
//! precision, stage and shape, then one per precision, combination and shape
//! of step 3; the columns `ops` and `layout` tell them apart: the ladder's
//! rows are `NN,row`), `sweep.csv` (every timing), `stage4.csv`
//! (seed 000's outputs-per-thread table at N = 4096), `device.csv` (peaks),
//! and `BENCHMARKS.md`. Commit the CSVs under `benches/results/` and
//! BENCHMARKS.md at the top; then `cargo xtask tuning`, `cargo xtask plots`,
//! `cargo xtask readme` regenerate the default-choice table, the plots and
//! the README's stage table from them.
//!
//! Step 3's rows follow all of the ladder's rows. Its `NN,row` row is a
//! second row of the default configuration's stage at that shape (the
//! default path's own timing), so a consumer that wants each stage's best
//! takes, per precision, stage and shape, the first `NN,row` row (as
//! `cargo xtask tuning`, `readme` and `plots` do).
//!
//! `cargo bench --bench ladder -- [--out DIR] [--shapes 1024,4096,4096x4096x256] [--combo-shapes 1024,4096|none]
//! [--precision f64|f32]`

use gemm::bench::{commit, measure, measure_cublas, measure_with, today_utc, Problem};
use gemm::check::Comparison;
use gemm::cublas::Cublas;
use gemm::tuning::registry::{entry_point, stage_configs};
use gemm::tuning::{GemmDims, KernelConfig, KernelLayouts, Stage};
use gemm::{Device, Element, Error, Layout, Op, Precision};
use indicatif::{ProgressBar, ProgressStyle};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

const SWEEP_N: usize = 1024;
/// Above this many flops (2 m n k) only the reported configuration is checked
/// and the naive stages keep one finalist.
const LARGE_FLOPS: f64 = 2.0 * 2048.0 * 2048.0 * 2048.0;
/// Time spent timing cuBLAS at one shape, in milliseconds.
const CUBLAS_BUDGET_MS: f64 = 300.0;
/// The op flags of step 3, in the order of the results.
/// Interleaved passes over the configurations of the layout sweep (median kept).
const SWEEP_PASSES: usize = 3;
const OPS: [(Op, Op); 4] = [(Op::N, Op::N), (Op::N, Op::T), (Op::T, Op::N), (Op::T, Op::T)];
/// The storage orders of step 3 (of A, B and C alike).
const LAYOUTS: [Layout; 2] = [Layout::RowMajor, Layout::ColMajor];

type Shape = (usize, usize, usize);

struct Options {
    out: PathBuf,
    shapes: Vec<Shape>,
    /// Shapes of step 3 (every op and layout of the default path).
    combo_shapes: Vec<Shape>,
    precisions: Vec<Precision>,
}

fn parse_shape(s: &str) -> Shape {
    let p: Vec<usize> = s.split('x').map(|x| x.parse().expect("shape: N or MxNxK")).collect();
    match p[..] {
        [n] => (n, n, n),
        [m, n, k] => (m, n, k),
        _ => panic!("shape: N or MxNxK, got {s}"),
    }
}

fn options() -> Options {
    let mut shapes: Vec<Shape> =
        [256, 512, 1000, 1023, 1024, 2048, 3000, 4096, 8192].iter().map(|&n| (n, n, n)).collect();
    shapes.push((4096, 4096, 256));
    let mut o = Options {
        out: PathBuf::from("bench-out"),
        shapes,
        combo_shapes: vec![(1024, 1024, 1024), (4096, 4096, 4096)],
        precisions: vec![Precision::F64, Precision::F32],
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => o.out = it.next().map(PathBuf::from).expect("--out DIR"),
            "--shapes" => o.shapes = it.next().expect("--shapes N,MxNxK").split(',').map(parse_shape).collect(),
            "--combo-shapes" => {
                let s = it.next().expect("--combo-shapes N,MxNxK|none");
                o.combo_shapes = if s == "none" { Vec::new() } else { s.split(',').map(parse_shape).collect() };
            }
            "--precision" => {
                o.precisions = match it.next().as_deref() {
                    Some("f64") => vec![Precision::F64],
                    Some("f32") => vec![Precision::F32],
                    _ => panic!("--precision f64|f32"),
                }
            }
            _ => {} // cargo bench passes --bench
        }
    }
    o
}

/// One line of `latest.csv`: a stage's fastest configuration at one shape
/// (op flags NN, row-major), or the default path in one combination of op
/// flags and layout (step 3).
struct LadderRow {
    precision: Precision,
    stage: Option<Stage>, // None: cuBLAS
    config: Option<KernelConfig>,
    shape: Shape,
    /// op(A), op(B).
    ops: (Op, Op),
    /// Storage order of A, B and C.
    layout: Layout,
    ms: f64,
    gflops: f64,
    cublas_gflops: f64,
    check: String,
}

struct SweepRow {
    precision: Precision,
    config: KernelConfig,
    shape: Shape,
    gflops: f64,
    check: &'static str,
}

struct Results {
    ladder: Vec<LadderRow>,
    /// Step 3: the default path, every op and layout.
    combos: Vec<LadderRow>,
    /// Step 3, before the default path: every configuration of the default
    /// stage for the kernels that read A or B column-major (ops NT, TN, TT
    /// on row-major operands), from which the default choice for those
    /// layouts is made (`cargo xtask tuning`).
    layout_sweep: Vec<LadderRow>,
    sweep: Vec<SweepRow>,
    failed: bool,
}

fn flops((m, n, k): Shape) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64
}

fn bench_precision<T: Element>(
    device: &Arc<Device>,
    cublas: &Cublas,
    shapes: &[Shape],
    bar: &ProgressBar,
    out: &mut Results,
) -> Result<(), Error> {
    let p = T::PRECISION;
    // 1. Sweep every configuration at N = 1024.
    let mut problem = Problem::<T>::random(device, SWEEP_N, SWEEP_N, SWEEP_N, 7)?;
    let reference = problem.reference(cublas)?;
    let mut finalists: Vec<(Stage, Vec<KernelConfig>)> = Vec::new();
    for stage in Stage::ALL {
        let mut scored = Vec::new();
        for config in stage_configs(stage, p) {
            bar.set_message(format!("sweep {} {stage} {config}", p.name()));
            let ok = problem.check(&reference, config)?.passed();
            let m = measure(&mut problem, config, 60.0)?;
            bar.inc(1);
            let shape = (SWEEP_N, SWEEP_N, SWEEP_N);
            out.sweep.push(SweepRow {
                precision: p,
                config,
                shape,
                gflops: m.gflops,
                check: if ok { "ok" } else { "WRONG" },
            });
            out.failed |= !ok;
            if ok {
                scored.push((config, m.gflops));
            }
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        finalists.push((stage, scored.into_iter().map(|(c, _)| c).collect()));
    }
    drop(problem);
    // 2. At each shape: the finalists, the fastest reported beside cuBLAS.
    for &shape in shapes {
        let (m, n, k) = shape;
        let large = flops(shape) > LARGE_FLOPS;
        let mut problem = Problem::<T>::random(device, m, n, k, 11 + (m * 31 + n * 7 + k) as u64)?;
        let reference = problem.reference(cublas)?;
        let blas = measure_cublas(cublas, &mut problem, CUBLAS_BUDGET_MS)?;
        out.ladder.push(LadderRow {
            precision: p,
            stage: None,
            config: None,
            shape,
            ops: (Op::N, Op::N),
            layout: Layout::RowMajor,
            ms: blas.timing.median_ms,
            gflops: blas.gflops,
            cublas_gflops: blas.gflops,
            check: "reference".into(),
        });
        for (stage, configs) in &finalists {
            let keep = match stage {
                Stage::Naive | Stage::Coalesced if large => 1,
                Stage::Naive | Stage::Coalesced => 3,
                _ => configs.len(),
            };
            let mut timed = Vec::new();
            for &config in configs.iter().take(keep) {
                bar.set_message(format!("{m}x{n}x{k} {} {stage} {config}", p.name()));
                let check = if large { None } else { Some(problem.check(&reference, config)?) };
                let meas = measure(&mut problem, config, budget_ms(shape))?;
                bar.inc(1);
                let verdict = match &check {
                    None => "unchecked",
                    Some(c) if c.passed() => "ok",
                    Some(_) => "WRONG",
                };
                out.sweep.push(SweepRow { precision: p, config, shape, gflops: meas.gflops, check: verdict });
                out.failed |= verdict == "WRONG";
                if verdict != "WRONG" {
                    timed.push((config, meas, check));
                }
            }
            let Some((config, meas, check)) = timed.into_iter().max_by(|a, b| a.1.gflops.total_cmp(&b.1.gflops)) else {
                continue;
            };
            let cmp = match check {
                Some(c) => c,
                None => problem.check(&reference, config)?,
            };
            out.failed |= !cmp.passed();
            out.ladder.push(LadderRow {
                precision: p,
                stage: Some(*stage),
                config: Some(config),
                shape,
                ops: (Op::N, Op::N),
                layout: Layout::RowMajor,
                ms: meas.timing.median_ms,
                gflops: meas.gflops,
                cublas_gflops: blas.gflops,
                check: verdict(&cmp),
            });
        }
    }
    Ok(())
}

/// Time spent timing one of our configurations at `shape`, in milliseconds.
fn budget_ms(shape: Shape) -> f64 {
    if flops(shape) > LARGE_FLOPS {
        150.0
    } else {
        100.0
    }
}

/// The `check` column of a checked result.
fn verdict(cmp: &Comparison) -> String {
    if cmp.passed() {
        format!("ok ({:.3} of bound)", cmp.max_error_over_bound)
    } else {
        format!("WRONG: {cmp}")
    }
}

/// Step 3: at each shape, the default path (`Gemm::new()` with the op flags)
/// in every combination of op flags and storage order, beside cuBLAS on the
/// same operands; each checked against cuBLAS before it is timed.
fn bench_combos<T: Element>(
    device: &Arc<Device>,
    cublas: &Cublas,
    shapes: &[Shape],
    bar: &ProgressBar,
    out: &mut Results,
) -> Result<(), Error> {
    let p = T::PRECISION;
    for &shape in shapes {
        let (m, n, k) = shape;
        for (i, &ops) in OPS.iter().enumerate() {
            for (j, &layout) in LAYOUTS.iter().enumerate() {
                let seed = 101 + (m * 31 + n * 7 + k) as u64 + (2 * i + j) as u64;
                let mut problem = Problem::<T>::random_with(device, m, n, k, ops, layout, seed)?;
                let gemm = problem.default_gemm().device(device);
                // The plan of the kernel form: (n, m, k) for a column-major C
                // (computed as C^T), and the layouts the kernel reads.
                let (a, b) = (&problem.sets[0].0, &problem.sets[0].1);
                let dims = GemmDims::from_operands(
                    a.dims().op(ops.0),
                    a.buffer().len(),
                    b.dims().op(ops.1),
                    b.buffer().len(),
                    problem.c.dims(),
                    problem.c.buffer().len(),
                )
                .map_err(Error::from)?
                .kernel_form()
                .0;
                let (ops_name, layout_name) = (problem.ops_name(), layout.short_name());
                let reference = problem.reference(cublas)?;
                if layout == Layout::RowMajor && dims.layouts() != KernelLayouts::NN {
                    // Every configuration of the stage the NN plan runs, for
                    // these layouts. The configurations differ by less than
                    // one measurement's spread (the same kernel has measured
                    // 47 and 52 TFLOP/s minutes apart), so each is timed in
                    // SWEEP_PASSES interleaved passes and the median kept.
                    let stage = gemm.plan(p, m, n, k)?.config.stage();
                    let configs = stage_configs(stage, p);
                    let mut samples: Vec<Vec<(f64, f64)>> = vec![Vec::new(); configs.len()];
                    let mut checks = Vec::with_capacity(configs.len());
                    for &config in &configs {
                        let cmp = problem.check(&reference, config)?;
                        out.failed |= !cmp.passed();
                        checks.push(verdict(&cmp));
                    }
                    for _ in 0..SWEEP_PASSES {
                        for (i, &config) in configs.iter().enumerate() {
                            bar.set_message(format!("{m}x{n}x{k} {} {config} {ops_name}", p.name()));
                            let ours = measure(&mut problem, config, budget_ms(shape))?;
                            samples[i].push((ours.gflops, ours.timing.median_ms));
                        }
                    }
                    for ((config, mut runs), check) in configs.into_iter().zip(samples).zip(checks) {
                        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
                        let (gflops, ms) = runs[runs.len() / 2];
                        out.layout_sweep.push(LadderRow {
                            precision: p,
                            stage: Some(stage),
                            config: Some(config),
                            shape,
                            ops,
                            layout,
                            ms,
                            gflops,
                            cublas_gflops: f64::NAN, // filled in below, from the same problem
                            check,
                        });
                    }
                }
                let config = gemm.plan_for_layouts(p, dims.m, dims.n, dims.k, dims.layouts())?.config;
                bar.set_message(format!("{m}x{n}x{k} {} default {ops_name} {layout_name}", p.name()));
                let cmp = problem.check_with(&reference, &gemm)?;
                out.failed |= !cmp.passed();
                let ours = measure_with(&mut problem, &gemm, budget_ms(shape))?;
                bar.inc(1);
                let blas = measure_cublas(cublas, &mut problem, CUBLAS_BUDGET_MS)?;
                bar.inc(1);
                for row in out.layout_sweep.iter_mut().filter(|r| r.cublas_gflops.is_nan()) {
                    row.cublas_gflops = blas.gflops;
                }
                out.combos.push(LadderRow {
                    precision: p,
                    stage: Some(config.stage()),
                    config: Some(config),
                    shape,
                    ops,
                    layout,
                    ms: ours.timing.median_ms,
                    gflops: ours.gflops,
                    cublas_gflops: blas.gflops,
                    check: verdict(&cmp),
                });
            }
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
    let cublas = Cublas::new(&device).unwrap_or_else(|e| {
        eprintln!("ladder: {e}");
        std::process::exit(2)
    });
    let (date, commit) = (today_utc(), commit());
    let total: usize = o
        .precisions
        .iter()
        .map(|&p| {
            let per_stage: Vec<usize> = Stage::ALL.iter().map(|&s| stage_configs(s, p).len()).collect();
            let tiled: usize = per_stage[2..].iter().sum();
            let sweep: usize = per_stage.iter().sum();
            let ladder: usize = o.shapes.iter().map(|&s| tiled + if flops(s) > LARGE_FLOPS { 2 } else { 6 }).sum();
            sweep + ladder + o.combo_shapes.len() * OPS.len() * LAYOUTS.len() * 2
        })
        .sum();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .expect("progress template")
            .progress_chars("=> "),
    );
    let mut results =
        Results { ladder: Vec::new(), combos: Vec::new(), layout_sweep: Vec::new(), sweep: Vec::new(), failed: false };
    for &p in &o.precisions {
        let r = match p {
            Precision::F64 => bench_precision::<f64>(&device, &cublas, &o.shapes, &bar, &mut results)
                .and_then(|()| bench_combos::<f64>(&device, &cublas, &o.combo_shapes, &bar, &mut results)),
            _ => bench_precision::<f32>(&device, &cublas, &o.shapes, &bar, &mut results)
                .and_then(|()| bench_combos::<f32>(&device, &cublas, &o.combo_shapes, &bar, &mut results)),
        };
        if let Err(e) = r {
            bar.abandon();
            eprintln!("ladder: {e}");
            std::process::exit(2);
        }
    }
    bar.finish_with_message("done");
    std::fs::create_dir_all(&o.out).expect("--out");
    write_outputs(&o, &device, &date, commit, &results);
    if results.failed {
        eprintln!("ladder: some results were WRONG (see sweep.csv)");
        std::process::exit(1);
    }
}

fn write_outputs(o: &Options, device: &Device, date: &str, commit: &str, r: &Results) {
    let dev = device.name().replace(',', " ");
    let write = |name: &str, text: &str| std::fs::write(o.out.join(name), text).expect("write results");
    let mut csv = String::from(
        "device,date,commit,precision,stage,stage_name,configuration,m,n,k,ms,gflops,pct_fma_peak,\
         cublas_gflops,ratio_to_cublas,check,intensity,kernel,ops,layout\n",
    );
    // The ladder's rows first, then step 3's (see the module docs).
    for row in r.ladder.iter().chain(&r.combos).chain(&r.layout_sweep) {
        let (m, n, k) = row.shape;
        let peak = device.peak_gflops(row.precision, row.stage.unwrap_or(Stage::Naive));
        let kernel = row.config.and_then(|c| entry_point(row.precision, c).ok()).map_or("cublas", |e| e.name);
        writeln!(
            csv,
            "{dev},{date},{commit},{},{},{},{},{m},{n},{k},{:.4},{:.1},{:.1},{:.1},{:.4},{},{},{kernel},{}{},{}",
            row.precision.name(),
            row.stage.map_or(0, |s| s.number()),
            row.stage.map_or("cublas", |s| s.name()),
            row.config.map_or("cublas".to_string(), |c| c.to_string()).replace(',', ";"),
            row.ms,
            row.gflops,
            100.0 * row.gflops / peak,
            row.cublas_gflops,
            row.gflops / row.cublas_gflops,
            row.check.replace(',', ";"),
            row.config.map_or(String::new(), |c| format!("{:.3}", c.modeled_intensity(row.precision))),
            row.ops.0.as_char(),
            row.ops.1.as_char(),
            row.layout.short_name(),
        )
        .unwrap();
    }
    write("latest.csv", &csv);

    let mut sw = String::from("device,date,commit,precision,stage,stage_name,configuration,m,n,k,gflops,check\n");
    for s in &r.sweep {
        let (m, n, k) = s.shape;
        writeln!(
            sw,
            "{dev},{date},{commit},{},{},{},{},{m},{n},{k},{:.1},{}",
            s.precision.name(),
            s.config.stage().number(),
            s.config.stage().name(),
            s.config.to_string().replace(',', ";"),
            s.gflops,
            s.check
        )
        .unwrap();
    }
    write("sweep.csv", &sw);

    // Seed 000's table: stage 4 at N = 4096 with the driver's resource figures.
    let mut t4 = String::from(
        "device,date,commit,precision,outputs,gflops,registers,threads_per_block,blocks_per_sm,occupancy_pct\n",
    );
    for s in r.sweep.iter().filter(|s| s.shape == (4096, 4096, 4096)) {
        if let KernelConfig::OutputsPerThread { outputs, .. } = s.config {
            let info = device.kernel_info(s.precision, s.config, KernelLayouts::NN).expect("kernel info");
            writeln!(
                t4,
                "{dev},{date},{commit},{},{outputs},{:.1},{},{},{},{:.1}",
                s.precision.name(),
                s.gflops,
                info.registers,
                info.threads_per_block,
                info.blocks_per_sm,
                100.0 * info.occupancy
            )
            .unwrap();
        }
    }
    write("stage4.csv", &t4);

    let dv = format!(
        "device,date,commit,sm_count,clock_mhz,fp64_fma_gflops,fp64_tensor_gflops,fp32_fma_gflops,dram_gbs\n\
         {dev},{date},{commit},{},{:.0},{:.0},{:.0},{:.0},{:.0}\n",
        device.sm_count(),
        device.clock_mhz(),
        device.peak_fma_gflops(Precision::F64),
        device.peak_fp64_tensor_gflops(),
        device.peak_fma_gflops(Precision::F32),
        device.dram_gbs()
    );
    write("device.csv", &dv);

    let md = benchmarks_md(o, device, date, commit, r);
    write("BENCHMARKS.md", &md);
    print!("{md}");
}

fn shape_name((m, n, k): Shape) -> String {
    if m == n && n == k {
        format!("{m}³")
    } else {
        format!("{m}x{n}x{k}")
    }
}

fn benchmarks_md(o: &Options, device: &Device, date: &str, commit: &str, r: &Results) -> String {
    let mut md = String::new();
    let w = &mut md;
    writeln!(w, "# Benchmarks\n").unwrap();
    writeln!(w, "Written by `benches/ladder.rs` (`cargo bench --bench ladder`); do not edit by hand.\n").unwrap();
    writeln!(
        w,
        "- device: {} ({} SMs, {:.0} MHz, PTX {}); date: {date}; commit: {commit}",
        device.name(),
        device.sm_count(),
        device.clock_mhz(),
        device.ptx_arch()
    )
    .unwrap();
    writeln!(
        w,
        "- peaks: FP64 FMA {:.0}, FP64 tensor cores {:.0}, FP32 FMA {:.0} GFLOP/s; DRAM {:.0} GB/s",
        device.peak_fma_gflops(Precision::F64),
        device.peak_fp64_tensor_gflops(),
        device.peak_fma_gflops(Precision::F32),
        device.dram_gbs()
    )
    .unwrap();
    writeln!(
        w,
        "- kernel time only (CUDA events, median of repeats), random inputs in [-1, 1), rotated through several \
         sets when they fit in L2; each stage at its fastest configuration for the shape (candidates: every compiled \
         configuration; the naive stages: the fastest block shapes of the N = {SWEEP_N} sweep); every reported \
         result checked against cuBLAS within (k+2)·eps·|A||B|; all timings in benches/results/sweep.csv"
    )
    .unwrap();
    writeln!(
        w,
        "- cuBLAS DGEMM uses the FP64 tensor cores; cuBLAS SGEMM runs without TF32 (as our SGEMM stages). The \
         default choice of `dgemm`/`sgemm` at a measured shape is the fastest configuration measured there \
         (`cargo xtask tuning`), so its speed is the best stage's.\n"
    )
    .unwrap();
    for &p in &o.precisions {
        writeln!(w, "## {}gemm ({}): GFLOP/s (x cuBLAS)\n", p.blas_prefix(), p.name()).unwrap();
        write!(w, "| stage |").unwrap();
        for &s in &o.shapes {
            write!(w, " {} |", shape_name(s)).unwrap();
        }
        writeln!(w).unwrap();
        writeln!(w, "|---|{}", "---:|".repeat(o.shapes.len())).unwrap();
        let mut stages: Vec<Option<Stage>> = Stage::ALL.iter().copied().map(Some).collect();
        stages.push(None);
        for s in stages {
            if r.ladder.iter().all(|row| row.precision != p || row.stage != s) {
                continue;
            }
            let name = s.map_or("cuBLAS".to_string(), |s| format!("{} {}", s.number(), s.title()));
            write!(w, "| {name} |").unwrap();
            for &shape in &o.shapes {
                match r.ladder.iter().find(|row| row.precision == p && row.stage == s && row.shape == shape) {
                    Some(row) if s.is_some() => {
                        write!(w, " {:.0} ({:.2}) |", row.gflops, row.gflops / row.cublas_gflops).unwrap()
                    }
                    Some(row) => write!(w, " {:.0} |", row.gflops).unwrap(),
                    None => write!(w, " - |").unwrap(),
                }
            }
            writeln!(w).unwrap();
        }
        writeln!(w, "\nFastest configuration of each stage:\n").unwrap();
        writeln!(w, "| shape | stage | configuration | ms | check |").unwrap();
        writeln!(w, "|---|---|---|---:|---|").unwrap();
        for &shape in &o.shapes {
            for row in r.ladder.iter().filter(|row| row.precision == p && row.shape == shape) {
                if let (Some(s), Some(c)) = (row.stage, row.config) {
                    if s.number() >= 3 {
                        writeln!(w, "| {} | {} | {c} | {:.3} | {} |", shape_name(shape), s.number(), row.ms, row.check)
                            .unwrap();
                    }
                }
            }
        }
        writeln!(w).unwrap();
    }
    if !r.combos.is_empty() {
        combos_md(w, o, &r.combos);
    }
    md
}

/// BENCHMARKS.md's section of step 3: the default path in every op and layout.
fn combos_md(w: &mut String, o: &Options, combos: &[LadderRow]) {
    writeln!(w, "## Every op and layout (default path)\n").unwrap();
    writeln!(
        w,
        "`Gemm::new()` with op(A) and op(B) (`ops`: NN, NT, TN, TT) on A, B and C all stored in `layout` (row- or \
         column-major), beside cuBLAS with the same flags on the same operands; x our NN row-major: over the \
         default path's NN row-major speed at the same size in this run. Each result was checked against cuBLAS \
         before it was timed.\n"
    )
    .unwrap();
    writeln!(w, "| precision | size | ops | layout | GFLOP/s | x cuBLAS (same combo) | x our NN row-major |").unwrap();
    writeln!(w, "|---|---|---|---|---:|---:|---:|").unwrap();
    let nn_row = |row: &LadderRow| {
        combos.iter().find(|b| {
            (b.precision, b.shape, b.ops, b.layout) == (row.precision, row.shape, (Op::N, Op::N), Layout::RowMajor)
        })
    };
    for &p in &o.precisions {
        for row in combos.iter().filter(|row| row.precision == p) {
            let wrong = if row.check.starts_with("ok") { "" } else { " (WRONG)" };
            let to_nn = nn_row(row).map_or("-".to_string(), |b| format!("{:.2}", row.gflops / b.gflops));
            writeln!(
                w,
                "| {} | {} | {}{} | {} | {:.0}{wrong} | {:.2} | {to_nn} |",
                p.name(),
                shape_name(row.shape),
                row.ops.0.as_char(),
                row.ops.1.as_char(),
                row.layout.short_name(),
                row.gflops,
                row.gflops / row.cublas_gflops
            )
            .unwrap();
        }
    }
    writeln!(w, "\nThe default configuration it ran:\n").unwrap();
    let mut seen: Vec<(Precision, Shape)> = Vec::new();
    for first in combos {
        if seen.contains(&(first.precision, first.shape)) {
            continue;
        }
        seen.push((first.precision, first.shape));
        // Configurations in the order met, with the combinations that ran each.
        let mut configs: Vec<(Option<KernelConfig>, Vec<String>)> = Vec::new();
        for row in combos.iter().filter(|row| (row.precision, row.shape) == (first.precision, first.shape)) {
            let name = format!("{}{} {}", row.ops.0.as_char(), row.ops.1.as_char(), row.layout.short_name());
            match configs.iter_mut().find(|(c, _)| *c == row.config) {
                Some((_, names)) => names.push(name),
                None => configs.push((row.config, vec![name])),
            }
        }
        let all = configs.len() == 1;
        for (config, names) in &configs {
            let Some(c) = config else { continue };
            let which = if all { "every op and layout".to_string() } else { names.join(", ") };
            let (p, shape) = (first.precision.name(), shape_name(first.shape));
            writeln!(w, "- {p} {shape} ({which}): {}, {c}", c.stage()).unwrap();
        }
    }
    writeln!(w).unwrap();
}
