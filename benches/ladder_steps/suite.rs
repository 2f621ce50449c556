//! Step 5: the public shape suite (issue "every shape fast"): squares,
//! small k, long k and skinny products, the default path beside cuBLAS.
//!
//! - `--suite-sweep` (a run of its own): at each suite shape, every
//!   configuration of the default stage (8 for f64, 7 for f32) with k whole
//!   and split as the wave model says, half and twice that
//!   (`gemm::tuning::model_split_for`), each with the operands in place and
//!   packed first (`Gemm::pack`), each checked against cuBLAS, then
//!   timed. Writes `suite_sweep.csv` (the columns of `latest.csv`), from
//!   which `cargo xtask tuning` takes the fastest configuration and split of
//!   each shape into the default-choice table.
//! - In every full run: at each suite shape, cuBLAS and the default path
//!   (`Gemm::new()`, so the table as committed), checked, then timed in
//!   five passes interleaved with cuBLAS's (the median pass of each); rows
//!   with `path` = `suite` in `latest.csv` and the suite table of
//!   BENCHMARKS.md, with the geometric mean of the ratios.

use super::*;

/// The shapes of `--suite-only` (the default path's step at these alone).
static ONLY: std::sync::OnceLock<Vec<Shape>> = std::sync::OnceLock::new();

/// Runs the default path's step at `shapes` instead of [`SUITE`].
pub fn only(shapes: Vec<Shape>) {
    let _ = ONLY.set(shapes);
}

/// The default path's shapes: `--suite-only`'s, else [`SUITE`].
pub fn shapes() -> Vec<Shape> {
    ONLY.get().cloned().unwrap_or_else(|| SUITE.to_vec())
}

/// The public shape suite: squares; small k; long k; skinny.
pub const SUITE: [Shape; 20] = [
    (256, 256, 256),
    (512, 512, 512),
    (1000, 1000, 1000),
    (1023, 1023, 1023),
    (1024, 1024, 1024),
    (2047, 2047, 2047),
    (2048, 2048, 2048),
    (3000, 3000, 3000),
    (4095, 4095, 4095),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (4096, 4096, 64),
    (4096, 4096, 256),
    (256, 256, 16384),
    (128, 128, 65536),
    (1024, 1024, 32768),
    (8192, 16, 8192),
    (16, 8192, 8192),
    (65536, 32, 1024),
    (32, 32, 262144),
];

/// Time timing one candidate or the default path at `shape`, milliseconds.
fn budget(shape: Shape) -> f64 {
    if flops(shape) > LARGE_FLOPS {
        120.0
    } else {
        60.0
    }
}

fn problem<T: Element>(device: &Arc<Device>, (m, n, k): Shape) -> Result<Problem<T>, Error> {
    Problem::<T>::random(device, m, n, k, 211 + (m * 31 + n * 7 + k) as u64)
}

/// The splits tried for `config` at `shape` (`pack`: with the operands
/// packed, read as `tn`): 1, and the model's s with s / 2 and 2 s (those
/// above 1 whose workspace fits `MAX_SPLIT_WORKSPACE`).
fn splits(
    device: &Device,
    p: Precision,
    config: KernelConfig,
    (m, n, k): Shape,
    pack: bool,
) -> Result<Vec<u32>, Error> {
    let layouts = if pack { KernelLayouts::PACKED } else { KernelLayouts::NN };
    let (s, _) = model_split_for(Some(device), p, config, (m, n, k), layouts)?;
    let mut out = vec![1];
    for x in [s / 2, s, 2 * s] {
        let fits = (m * n) as u64 * x as u64 <= MAX_SPLIT_WORKSPACE;
        if x > 1 && fits && !out.contains(&x) {
            out.push(x);
        }
    }
    Ok(out)
}

/// The `--suite-sweep` run for one precision: every candidate at every
/// suite shape, into `out.suite` (path `config`).
pub fn sweep<T: Element>(
    device: &Arc<Device>,
    cublas: &Cublas,
    bar: &ProgressBar,
    out: &mut Results,
) -> Result<(), Error> {
    let p = T::PRECISION;
    let stage = batch_stage(p);
    for shape in SUITE {
        let (m, n, k) = shape;
        let mut problem = problem::<T>(device, shape)?;
        let reference = problem.reference(cublas)?;
        let blas = measure_cublas(cublas, &mut problem, CUBLAS_BUDGET_MS)?;
        out.suite.push(row(p, None, shape, &blas, blas.gflops, "reference".into(), (1, false), RowPath::Cublas));
        for config in stage_configs(stage, p) {
            for pack in [false, true] {
                for split in splits(device, p, config, shape, pack)? {
                    let packed = if pack { " packed" } else { "" };
                    bar.set_message(format!("suite {m}x{n}x{k} {} {config} split {split}{packed}", p.name()));
                    let gemm = problem.gemm(config).split_k(split).pack(pack);
                    let cmp = problem.check_with(&reference, &gemm)?;
                    out.failed |= !cmp.passed();
                    let ours = measure_with(&mut problem, &gemm, budget(shape))?;
                    bar.inc(1);
                    let check = verdict(&cmp);
                    let r = row(p, Some(config), shape, &ours, blas.gflops, check, (split, pack), RowPath::Config);
                    out.suite.push(r);
                }
            }
        }
    }
    Ok(())
}

/// Candidates of [`sweep`] for the progress bar (an estimate: splits per
/// configuration vary).
pub fn sweep_count(p: Precision) -> usize {
    SUITE.len() * stage_configs(batch_stage(p), p).len() * 4
}

/// The suite in a full run for one precision: cuBLAS and the default path
/// at every shape, into `out.suite` (path `cublas`, `suite`).
pub fn default_path<T: Element>(
    device: &Arc<Device>,
    cublas: &Cublas,
    bar: &ProgressBar,
    out: &mut Results,
) -> Result<(), Error> {
    let p = T::PRECISION;
    for shape in shapes() {
        let (m, n, k) = shape;
        bar.set_message(format!("suite {m}x{n}x{k} {} default", p.name()));
        let mut problem = problem::<T>(device, shape)?;
        let reference = problem.reference(cublas)?;
        let gemm = problem.default_gemm().device(device);
        let plan = gemm.plan(p, m, n, k)?;
        let cmp = problem.check_with(&reference, &gemm)?;
        out.failed |= !cmp.passed();
        // cuBLAS and ours interleaved in SUITE_PASSES passes, which goes
        // first alternating, and the median pass of each kept: this shared
        // H200's speed dips by 10-20% for a tenth of a second at a time
        // (cuBLAS and ours alike), and such a dip then falls in one pass of
        // one side rather than deciding the ratio.
        let (mut blas_runs, mut ours_runs) = (Vec::new(), Vec::new());
        for pass in 0..SUITE_PASSES {
            if pass % 2 == 1 {
                ours_runs.push(measure_with(&mut problem, &gemm, budget(shape))?);
            }
            blas_runs.push(measure_cublas(cublas, &mut problem, budget(shape))?);
            if pass % 2 == 0 {
                ours_runs.push(measure_with(&mut problem, &gemm, budget(shape))?);
            }
        }
        let (blas, ours) = (median_pass(blas_runs), median_pass(ours_runs));
        bar.inc(1);
        out.suite.push(row(p, None, shape, &blas, blas.gflops, "reference".into(), (1, false), RowPath::Cublas));
        let check = verdict(&cmp);
        let how = (plan.split_k, plan.pack);
        out.suite.push(row(p, Some(plan.config), shape, &ours, blas.gflops, check, how, RowPath::Suite));
    }
    Ok(())
}

/// Passes of cuBLAS and the default path at each suite shape.
const SUITE_PASSES: usize = 5;

/// The measurement of median speed among the passes (at least one).
fn median_pass(mut runs: Vec<Measurement>) -> Measurement {
    runs.sort_by(|a, b| a.gflops.total_cmp(&b.gflops));
    runs.swap_remove(runs.len() / 2)
}

#[allow(clippy::too_many_arguments)]
fn row(
    precision: Precision,
    config: Option<KernelConfig>,
    shape: Shape,
    m: &Measurement,
    cublas_gflops: f64,
    check: String,
    (split_k, pack): (u32, bool),
    path: RowPath,
) -> LadderRow {
    LadderRow {
        precision,
        stage: config.map(|c| c.stage()),
        config,
        shape,
        ops: (Op::N, Op::N),
        layout: Layout::RowMajor,
        ms: m.timing.median_ms,
        gflops: m.gflops,
        cublas_gflops,
        check,
        batch: 1,
        kind: BatchKind::Single,
        path,
        split_k,
        pack,
    }
}

/// BENCHMARKS.md's suite section: per shape and precision, ours and
/// cuBLAS in TFLOP/s, the ratio, the kernel and split; the geometric mean of
/// the ratios and the lowest ratio per precision.
pub fn markdown(w: &mut String, rows: &[LadderRow]) {
    let ours: Vec<&LadderRow> = rows.iter().filter(|r| r.path == RowPath::Suite).collect();
    if ours.is_empty() {
        return;
    }
    writeln!(w, "## The public shape suite: the default path beside cuBLAS\n").unwrap();
    writeln!(
        w,
        "`Gemm::new()` (the committed default-choice table: kernel, split-K, packing) at each shape of the suite, \
         checked against cuBLAS, then timed beside it in five interleaved passes (the median pass of each \
         kept). TFLOP/s (x cuBLAS).\n"
    )
    .unwrap();
    writeln!(w, "| shape | dgemm (f64) | kernel, split | sgemm (f32) | kernel, split |").unwrap();
    writeln!(w, "|---|---:|---|---:|---|").unwrap();
    for shape in shapes() {
        write!(w, "| {} |", shape_name(shape)).unwrap();
        for p in [Precision::F64, Precision::F32] {
            match ours.iter().find(|r| r.shape == shape && r.precision == p) {
                Some(r) => {
                    let kernel = r.config.and_then(|c| entry_point(p, c).ok()).map_or("-", |e| e.name);
                    let packed = if r.pack { ", packed" } else { "" };
                    let ratio = r.gflops / r.cublas_gflops;
                    write!(w, " {:.1} ({ratio:.2}) | {kernel}, {}{packed} |", r.gflops / 1e3, r.split_k).unwrap()
                }
                None => write!(w, " - | - |").unwrap(),
            }
        }
        writeln!(w).unwrap();
    }
    writeln!(w).unwrap();
    for p in [Precision::F64, Precision::F32] {
        let ratios: Vec<(f64, Shape)> =
            ours.iter().filter(|r| r.precision == p).map(|r| (r.gflops / r.cublas_gflops, r.shape)).collect();
        if ratios.is_empty() {
            continue;
        }
        let geomean = (ratios.iter().map(|r| r.0.ln()).sum::<f64>() / ratios.len() as f64).exp();
        let low = ratios.iter().min_by(|a, b| a.0.total_cmp(&b.0)).expect("non-empty");
        writeln!(
            w,
            "- {}gemm: geometric mean of the ratios {geomean:.2} over {} shapes; lowest {:.2} at {}",
            p.blas_prefix(),
            ratios.len(),
            low.0,
            shape_name(low.1)
        )
        .unwrap();
    }
    writeln!(w).unwrap();
}
