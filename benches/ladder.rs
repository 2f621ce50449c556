//! The ladder benchmark: every stage's best configuration beside cuBLAS, in one
//! run, f64 and f32, over squares 256-8192, 1000, 1023, 3000 and 4096x4096x256;
//! the default path in every op and layout combination beside cuBLAS; and
//! batched products (strided and grouped) beside cuBLAS's batched calls.
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
//! 4. Batched (after steps 1-3 of each precision; `--batched-only` runs only
//!    this step, `--no-batched` skips it):
//!    - strided (`Gemm::run_strided_device` beside cuBLAS's
//!      `?gemmStridedBatched`, A, B and C each a (batch, row, col) row-major
//!      tensor): 100 x 1000³ (seed 004's job), 10000 x 32³ and 1000 x 128³.
//!      Every configuration of the default stage (stage 8, tensor cores, for
//!      f64; stage 7, pipelined, for f32) is checked, then timed in
//!      `SWEEP_PASSES` interleaved passes (median kept), so that `cargo xtask
//!      tuning` can pick the fastest for batches; then the default path
//!      (`Gemm::new()`) is checked and timed.
//!    - grouped (`Gemm::run_grouped_device` beside cuBLAS's
//!      `cublasGemmGroupedBatchedEx`): 64 problems m x 1024 x 1024, m drawn
//!      from 100..=2000 (fixed seed), each with its own A, B and C; the
//!      default path only.
//!
//!    Each batched timing is one launch over the whole batch (CUDA events,
//!    median of repeats; the inputs exceed L2, so they are not rotated).
//!    Checks are against cuBLAS with the bound (k+2) eps |A||B|: every product
//!    of a strided batch whose C has at most 2^24 elements, else the first,
//!    middle and last; of the grouped batch the first, middle, last and
//!    largest problem (a WRONG verdict names the element in the checked
//!    products stacked one under the other). A job that fails to run is
//!    reported and fails the run; the other jobs still run. The whole step
//!    should take well under a minute (about 6 s of it drawing the random
//!    inputs on the host).
//!
//! 5. The public shape suite (`ladder_steps/suite.rs`), for every product
//!    type (`--suite-types f64,f32,tf32,f16,f16f32,bf16,bf16f32,i8`, default
//!    all, or the one `--precision` given; `f16` is f16 -> f16, `f16f32` f16
//!    -> f32, likewise bf16; tf32 is f32 with `Gemm::allow_tf32`): 191
//!    entries, one list for every type: squares 256-16384 (with 1000, 1023,
//!    1536, 2047, 2056, 4095, 6144 and every 500 from 2500 to 6000), small k
//!    (4096x4096x64, x256), long k (256x256x16384, 128x128x65536,
//!    1024x1024x32768), skinny (8192x16x8192, 16x8192x8192,
//!    65536x32x1024, 32x32x262144), and token-sized products, m in 1, 2, 4,
//!    ..., 128 times (n, k) in (4096, 4096), (11008, 4096), (4096, 11008),
//!    (14336, 4096), (4096, 14336), and their transposed forms (n small),
//!    each with B row-major (ops `NN`) and B column-major (ops `NT`: a
//!    model's weight). At each, cuBLAS (`?gemm`, or `cublasGemmEx` with the
//!    same types) and the default path, checked against cuBLAS, timed in
//!    five interleaved passes of at most 10 runs (median pass kept); rows
//!    with m or n at most 128 get a memory bound (`bound_ms`) from the
//!    device's copy bandwidth measured in the same run. BENCHMARKS.md gives
//!    one table per type with the geometric mean of the ratios, the lowest,
//!    and the token-sized rows' bound_ms / ms (`--no-suite` skips the step;
//!    `--suite-only all|LIST` runs it alone; the module docs of
//!    `ladder_steps/suite.rs` estimate the runtime: 4-7.5 minutes for all
//!    eight types). `--suite-sweep` is a run of its own: every
//!    configuration of the default stage at the 26 shapes the default
//!    table was tuned at (`SWEEP_SHAPES`, f64 and f32; `--sweep-shapes`
//!    for some), with k whole and
//!    split around the wave model's split, into `suite_sweep.csv`, from
//!    which `cargo xtask tuning` takes the default choice (kernel and split)
//!    at those shapes.
//!
//! Times are CUDA-event medians of kernel time only (`gemm::bench::time_kernel`),
//! random inputs in [-1, 1), rotated between sets when they would fit in L2.
//! Writes to `--out DIR` (default `bench-out/`): `latest.csv` (one row per
//! precision, stage and shape, then one per precision, combination and shape
//! of step 3, then step 4's rows; the columns `ops` and `layout` tell step
//! 3's apart: the ladder's rows are `NN,row`; `batch` tells step 4's apart),
//! `sweep.csv` (every timing of steps 1-2), `stage4.csv` (seed 000's
//! outputs-per-thread table at N = 4096), `device.csv` (peaks),
//! `shapes.csv` (step 5's rows of every type: `latest.csv`'s columns plus
//! `bound_ms`, empty but where m or n is at most 128, and `copy_gbs`, the
//! copy bandwidth it was computed from; per entry cuBLAS's row, where
//! cuBLAS ran it, then the default path's; the tensor-core types'
//! `precision` is the operands' type, `tf32` for TF32, and their
//! configuration ends with C's type, as in `warpgroup.csv`), and
//! `BENCHMARKS.md`. `latest.csv` holds step 5's f64 and f32 rows with ops
//! `NN` only (path `suite`; a `--suite-only` run of other types alone
//! writes no `latest.csv`). Calls split by `--suite-types` each write their
//! own `shapes.csv`: concatenate them (one header). A `--batched-only` run writes `latest.csv` (step 4's rows
//! only), `device.csv` and `BENCHMARKS.md`. Commit the CSVs of a whole run
//! under `benches/results/` and BENCHMARKS.md at the top, first moving the
//! `latest.csv` it replaces to `benches/results/runs/<its commit>.csv` (the
//! tuning ranks each configuration by its lower-median timing over all of
//! these runs); then `cargo xtask tuning`, `cargo xtask plots`, `cargo xtask
//! readme` regenerate the default-choice table, the plots and the README's
//! tables from them.
//!
//! Step 3's rows follow all of the ladder's rows. Its `NN,row` row is a
//! second row of the default configuration's stage at that shape (the
//! default path's own timing), so a consumer that wants each stage's best
//! takes, per precision, stage and shape, the first `NN,row` row with
//! `batch` 1 (as `cargo xtask tuning`, `readme` and `plots` do).
//!
//! `latest.csv`'s columns: `device, date, commit, precision, stage (0:
//! cuBLAS), stage_name, configuration, m, n, k, ms, gflops, pct_fma_peak,
//! cublas_gflops, ratio_to_cublas, check, intensity, kernel, ops, layout,
//! batch, batch_kind, path, split_k, pack`; consumers find them by name (the
//! last five were added later: a file without them has single products
//! only, `batch` 1, k not split, operands not packed).
//! - `batch`: products in the launch; 1 for every row of steps 1-3.
//! - `batch_kind`: `single` (steps 1-3), `strided` or `grouped` (step 4).
//! - `path`: what the row times: `cublas` (stage 0), `stage-best` (step 2: a
//!   stage's fastest configuration at the shape), `config` (one named
//!   configuration: step 3's layout sweep, step 4's strided sweep) or
//!   `default` (`Gemm::new()`, the measured default choice; `configuration`
//!   and `kernel` name the configuration it ran), `suite` (the default path
//!   in step 5).
//! - `split_k`: the slices of k the row ran with (1: not split).
//! - `pack`: 1 when the row packed its operands first (`Gemm::pack`, the
//!   copies counted in its time), else 0.
//! - Step 4's `ms`, `gflops` and `cublas_gflops` are of the whole batch
//!   (flops: the sum of 2 m n k over its products); `intensity` is the
//!   configuration's modeled intensity for one product.
//! - Grouped rows (`batch_kind` = `grouped`): `batch` is the number of
//!   problems, `m` the largest problem's m (the one whose measured choice
//!   the launch runs), `n` and `k` those of every problem; the problems' m
//!   are drawn from 100..=2000 with a fixed seed, so the row is one fixed
//!   job. `cargo xtask tuning` leaves grouped rows out of the table.
//!
//! Per strided job the rows are: cuBLAS, every configuration (`path` =
//! `config`), the default path; per grouped job: cuBLAS, the default path.
//! `cargo xtask tuning` takes of each strided job the fastest correct
//! configuration, counting each configuration's first row only (the default
//! path's row repeats one), into the table with its `batch`.
//!
//! `cargo bench --bench ladder -- [--out DIR] [--shapes 1024,4096,4096x4096x256] [--combo-shapes 1024,4096|none]
//! [--precision f64|f32] [--batched-only | --no-batched] [--no-suite | --suite-only all|LIST | --suite-sweep]
//! [--suite-types LIST]` (`--help` prints the usage). The shape suite alone, per type:
//! `bench-ladder --out DIR --suite-only all --suite-types f64,f32,tf32`.

use gemm::bench::{commit, gemm_for, gflops, measure, measure_cublas, measure_with, time_kernel, today_utc, Problem};
use gemm::check::{random_matrix, Comparison, Reference};
use gemm::cublas::Cublas;
use gemm::tuning::registry::{entry_point, stage_configs};
use gemm::tuning::{
    choose_batched, model_split_for, GemmDims, KernelConfig, KernelLayouts, Stage, MAX_SPLIT_WORKSPACE,
};
use gemm::{
    Device, DeviceMatrix, DeviceView, DeviceViewMut, Element, Error, Gemm, Layout, MatRef, Matrix, Op, Precision,
    Scalar, Strided,
};
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

#[path = "ladder_steps/suite.rs"]
mod suite;

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
    /// Run steps 1-3 (`--batched-only` clears it).
    single: bool,
    /// Run step 4 (`--no-batched` clears it).
    batched: bool,
    /// Run step 5's default path (`--no-suite` clears it).
    suite: bool,
    /// Run only step 5's sweep (`--suite-sweep`).
    suite_sweep: bool,
    /// Step 5's product types (`--suite-types`; default all, or the
    /// `--precision` given).
    suite_types: Vec<suite::SuiteType>,
}

const USAGE: &str = "usage: cargo bench --bench ladder -- [--out DIR] [--shapes 1024,4096,4096x4096x256] \
[--combo-shapes 1024,4096|none] [--precision f64|f32] [--batched-only | --no-batched] \
[--no-suite | --suite-only all|LIST | --suite-sweep | --sweep-shapes LIST] [--suite-types LIST]

  --out DIR          where the results go (default bench-out/)
  --shapes LIST      step 2's shapes, N or MxNxK, comma-separated
  --combo-shapes     step 3's shapes, or none to skip step 3
  --precision P      f64 or f32 only (default: both)
  --batched-only     step 4 only (the batched jobs): writes latest.csv, device.csv and BENCHMARKS.md
  --no-batched       skip step 4
  --no-suite         skip step 5 (the public shape suite's default path)
  --suite-only all|LIST
                     only step 5's default path, at every entry of the suite (all) or at these
                     (N, MxNxK, or MxNxK:NT for B column-major; comma-separated): writes shapes.csv,
                     latest.csv (f64, f32), device.csv and BENCHMARKS.md
  --suite-types LIST step 5's product types, comma-separated, of f64,f32,tf32,f16,f16f32,bf16,bf16f32,i8
                     (f16: f16 -> f16, f16f32: f16 -> f32, likewise bf16; default all, or --precision's)
  --suite-sweep      only step 5's sweep (every candidate kernel and split at the 26 shapes the default
                     table was tuned at, f64 and f32): writes suite_sweep.csv and device.csv
  --sweep-shapes LIST
                     the sweep at these shapes alone (N or MxNxK, comma-separated)";

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
        single: true,
        batched: true,
        suite: true,
        suite_sweep: false,
        suite_types: suite::SuiteType::ALL.to_vec(),
    };
    let mut types_given = false;
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
            "--batched-only" => (o.single, o.suite) = (false, false),
            "--no-batched" => o.batched = false,
            "--no-suite" => o.suite = false,
            "--suite-only" => {
                let list = it.next().expect("--suite-only all|N,MxNxK,MxNxK:NT");
                if list != "all" {
                    suite::only(list.split(',').map(suite::parse_entry).collect());
                }
                (o.single, o.batched, o.suite, o.suite_sweep) = (false, false, true, false);
            }
            "--suite-types" => {
                let list = it.next().expect("--suite-types f64,f32,tf32,f16,f16f32,bf16,bf16f32,i8");
                o.suite_types = suite::parse_types(&list).unwrap_or_else(|e| {
                    eprintln!("ladder: {e}\n{USAGE}");
                    std::process::exit(2)
                });
                types_given = true;
            }
            "--suite-sweep" => {
                (o.single, o.batched, o.suite, o.suite_sweep) = (false, false, false, true);
            }
            "--sweep-shapes" => {
                let list = it.next().expect("--sweep-shapes N,MxNxK");
                suite::sweep_only(list.split(',').map(parse_shape).collect());
                (o.single, o.batched, o.suite, o.suite_sweep) = (false, false, false, true);
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            _ => {} // cargo bench passes --bench
        }
    }
    if !types_given && o.precisions.len() == 1 {
        // `--precision f64` alone: the suite of that type only.
        let p = o.precisions[0];
        o.suite_types.retain(|t| t.ladder_precision() == Some(p));
    }
    if !(o.single || o.batched || o.suite || o.suite_sweep) {
        eprintln!("ladder: --batched-only and --no-batched leave nothing to run\n{USAGE}");
        std::process::exit(2)
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
    /// Products in the launch (the `batch` column): 1 but in step 4.
    batch: usize,
    /// The `batch_kind` column.
    kind: BatchKind,
    /// The `path` column.
    path: RowPath,
    /// Slices of k (the `split_k` column): 1 but in step 5.
    split_k: u32,
    /// Whether the operands were packed first (the `pack` column, 0 or 1):
    /// false but in step 5.
    pack: bool,
}

/// How the products of a row were launched (the `batch_kind` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BatchKind {
    /// One product (steps 1-3).
    Single,
    /// A strided batch of one shape (`Gemm::run_strided_device`, cuBLAS's
    /// `?gemmStridedBatched`).
    Strided,
    /// A grouped batch of several shapes (`Gemm::run_grouped_device`,
    /// cuBLAS's `cublasGemmGroupedBatchedEx`).
    Grouped,
}

impl BatchKind {
    fn name(self) -> &'static str {
        match self {
            BatchKind::Single => "single",
            BatchKind::Strided => "strided",
            BatchKind::Grouped => "grouped",
        }
    }
}

/// What a row times (the `path` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RowPath {
    /// cuBLAS on the same operands (stage 0).
    Cublas,
    /// A stage's fastest configuration at the shape (step 2).
    StageBest,
    /// One configuration given by name (step 3's layout sweep, step 4's
    /// strided sweep).
    Config,
    /// The default path: `Gemm::new()`, the measured default choice.
    Default,
    /// The default path at a shape of the public suite (step 5).
    Suite,
}

impl RowPath {
    fn name(self) -> &'static str {
        match self {
            RowPath::Cublas => "cublas",
            RowPath::StageBest => "stage-best",
            RowPath::Config => "config",
            RowPath::Default => "default",
            RowPath::Suite => "suite",
        }
    }
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
    /// Step 4: the batched jobs, per job cuBLAS's row first, then (strided)
    /// every configuration of the default stage, then the default path.
    batched: Vec<LadderRow>,
    /// Step 5: the public shape suite's rows for `latest.csv` (f64 and f32,
    /// op flags NN: per shape cuBLAS's row, then the default path's; a
    /// `--suite-sweep` run: cuBLAS's, then every candidate).
    suite: Vec<LadderRow>,
    /// Step 5: every type's rows, for `shapes.csv` and BENCHMARKS.md.
    shapes: Vec<suite::ShapeRow>,
    /// Step 5: the device's copy bandwidth measured in this run, GB/s.
    copy_gbs: Option<f64>,
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
            batch: 1,
            kind: BatchKind::Single,
            path: RowPath::Cublas,
            split_k: 1,
            pack: false,
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
                batch: 1,
                kind: BatchKind::Single,
                path: RowPath::StageBest,
                split_k: 1,
                pack: false,
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
                    // Each configuration in place and, where it changes
                    // anything (not `tn`), with the operands packed first.
                    let packs: &[bool] =
                        if dims.layouts() == KernelLayouts::PACKED { &[false] } else { &[false, true] };
                    let candidates: Vec<(KernelConfig, bool)> =
                        stage_configs(stage, p).into_iter().flat_map(|c| packs.iter().map(move |&q| (c, q))).collect();
                    let mut samples: Vec<Vec<(f64, f64)>> = vec![Vec::new(); candidates.len()];
                    let mut checks = Vec::with_capacity(candidates.len());
                    for &(config, pack) in &candidates {
                        let cmp = problem.check_with(&reference, &problem.gemm(config).pack(pack))?;
                        out.failed |= !cmp.passed();
                        checks.push(verdict(&cmp));
                    }
                    for _ in 0..SWEEP_PASSES {
                        for (i, &(config, pack)) in candidates.iter().enumerate() {
                            let packed = if pack { " packed" } else { "" };
                            bar.set_message(format!("{m}x{n}x{k} {} {config}{packed} {ops_name}", p.name()));
                            let ours = if pack {
                                let packed_gemm = problem.gemm(config).pack(true);
                                measure_with(&mut problem, &packed_gemm, budget_ms(shape))?
                            } else {
                                measure(&mut problem, config, budget_ms(shape))?
                            };
                            samples[i].push((ours.gflops, ours.timing.median_ms));
                        }
                    }
                    for ((&(config, pack), mut runs), check) in candidates.iter().zip(samples).zip(checks) {
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
                            batch: 1,
                            kind: BatchKind::Single,
                            path: RowPath::Config,
                            split_k: 1,
                            pack,
                        });
                    }
                }
                let plan = gemm.plan_for_layouts(p, dims.m, dims.n, dims.k, dims.layouts())?;
                let config = plan.config;
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
                    batch: 1,
                    kind: BatchKind::Single,
                    path: RowPath::Default,
                    split_k: 1,
                    pack: plan.pack,
                });
            }
        }
    }
    Ok(())
}

/// Step 4's strided jobs: (products, m x n x k), A, B and C each a (batch,
/// row, col) row-major tensor (seed 004's 100 x 1000³ first).
const STRIDED_JOBS: [(usize, Shape); 3] = [(100, (1000, 1000, 1000)), (10_000, (32, 32, 32)), (1000, (128, 128, 128))];
/// Step 4's grouped job: problems, the range m is drawn from, n = k, and the seed of the draw.
const GROUPED_COUNT: usize = 64;
const GROUPED_M: std::ops::RangeInclusive<usize> = 100..=2000;
const GROUPED_NK: usize = 1024;
const GROUPED_SEED: u64 = 4;
/// Time spent timing one batched launch (per pass for the strided sweep), in milliseconds.
const BATCH_BUDGET_MS: f64 = 40.0;
/// Every product of a strided batch is checked when C has at most this many
/// elements; else the first, middle and last.
const CHECK_ALL_ELEMENTS: usize = 1 << 24;

/// The stage whose every configuration step 4 times on the strided jobs:
/// the stage the default choice runs at large shapes.
fn batch_stage(p: Precision) -> Stage {
    if p == Precision::F64 {
        Stage::TensorCore
    } else {
        Stage::Pipelined
    }
}

/// Which products of a strided batch of `count` with `len` elements each are checked.
fn strided_picks(count: usize, len: usize) -> Vec<usize> {
    if count * len <= CHECK_ALL_ELEMENTS {
        (0..count).collect()
    } else {
        let mut picks = vec![0, count / 2, count - 1];
        picks.dedup();
        picks
    }
}

/// The picked products of a packed strided batch on the device, `len`
/// elements each, one after the other (one copy when all are picked).
fn picked<T: Element>(c: &DeviceMatrix<T>, picks: &[usize], len: usize) -> Result<Vec<T>, Error> {
    let s = c.buffer().stream();
    let all = picks.len() * len == c.buffer().len();
    let mut out = Vec::with_capacity(picks.len() * len);
    if all {
        out = s.clone_dtoh(c.buffer())?;
    } else {
        for &i in picks {
            out.extend(s.clone_dtoh(&c.buffer().slice(i * len..(i + 1) * len))?);
        }
    }
    s.synchronize()?;
    Ok(out)
}

/// Fills the picked products of a packed strided batch with NaN (so a product
/// left unwritten fails the check).
fn poison<T: Element>(c: &mut DeviceMatrix<T>, picks: &[usize], len: usize) -> Result<(), Error> {
    let s = c.buffer().stream().clone();
    if picks.len() * len == c.buffer().len() {
        let nan = vec![T::POISON; c.buffer().len()];
        s.memcpy_htod(&nan, c.buffer_mut())?;
    } else {
        let nan = vec![T::POISON; len];
        for &i in picks {
            s.memcpy_htod(&nan, &mut c.buffer_mut().slice_mut(i * len..(i + 1) * len))?;
        }
    }
    Ok(())
}

/// A host matrix's elements in absolute value (in parallel: the shape
/// suite's operands reach 2^28 elements).
fn abs<T: Scalar>(mut m: Matrix<T>) -> Matrix<T> {
    m.as_mut_slice().par_iter_mut().for_each(|v| *v = T::from_f64(v.as_f64().abs()));
    m
}

/// cuBLAS's `?gemmStridedBatched` on packed (batch, row, col) row-major tensors.
fn cublas_strided<T: Element>(
    cublas: &Cublas,
    a: &DeviceMatrix<T>,
    b: &DeviceMatrix<T>,
    c: &mut DeviceMatrix<T>,
    count: usize,
    (m, n, k): Shape,
) -> Result<(), Error> {
    cublas.gemm_strided_batched(
        Op::N,
        Op::N,
        1.0,
        (a.view(0, 0, m, k)?, m * k),
        (b.view(0, 0, k, n)?, k * n),
        0.0,
        (c.view_mut(0, 0, m, n)?, m * n),
        count,
    )
}

/// `gemm.run_strided_device` on packed (batch, row, col) row-major tensors
/// (views of the first matrix run on to the end of the buffer: the whole batch).
fn ours_strided<T: Element>(
    gemm: &Gemm,
    a: &DeviceMatrix<T>,
    b: &DeviceMatrix<T>,
    c: &mut DeviceMatrix<T>,
    count: usize,
    (m, n, k): Shape,
) -> Result<(), Error> {
    gemm.run_strided_device(
        Strided::new(a.view(0, 0, m, k)?, count, m * k)?,
        Strided::new(b.view(0, 0, k, n)?, count, k * n)?,
        Strided::new(c.view_mut(0, 0, m, n)?, count, m * n)?,
    )
}

/// Step 4: the batched jobs of `T`; a job that fails to run is reported and
/// marks the run failed, and the others still run.
fn bench_batched<T: Element>(device: &Arc<Device>, cublas: &Cublas, bar: &ProgressBar, out: &mut Results) {
    let p = T::PRECISION;
    for (count, shape) in STRIDED_JOBS {
        if let Err(e) = bench_strided::<T>(device, cublas, count, shape, bar, out) {
            bar.println(format!("ladder: {} strided {count} x {}: {e}", p.name(), shape_name(shape)));
            out.failed = true;
        }
    }
    if let Err(e) = bench_grouped::<T>(device, cublas, bar, out) {
        bar.println(format!("ladder: {} grouped: {e}", p.name()));
        out.failed = true;
    }
}

/// One strided job: cuBLAS, every configuration of [`batch_stage`] (each
/// checked, then timed in `SWEEP_PASSES` interleaved passes, median kept),
/// then the default path (checked and timed), in that order in `out.batched`.
fn bench_strided<T: Element>(
    device: &Arc<Device>,
    cublas: &Cublas,
    count: usize,
    shape: Shape,
    bar: &ProgressBar,
    out: &mut Results,
) -> Result<(), Error> {
    let p = T::PRECISION;
    let (m, n, k) = shape;
    let job = format!("{} strided {count} x {}", p.name(), shape_name(shape));
    bar.set_message(format!("{job}: inputs"));
    let seed = 301 + (count * 7 + m) as u64;
    // (batch, row, col) row-major tensors are (count * rows) x cols matrices.
    let a = random_matrix::<T>(count * m, k, seed);
    let da = DeviceMatrix::from_host(device, &a)?;
    let a_abs = DeviceMatrix::from_host(device, &abs(a))?;
    let b = random_matrix::<T>(count * k, n, seed + 1);
    let db = DeviceMatrix::from_host(device, &b)?;
    let b_abs = DeviceMatrix::from_host(device, &abs(b))?;
    let mut dc = DeviceMatrix::<T>::zeros(device, count * m, n)?;
    let mut dr = DeviceMatrix::<T>::zeros(device, count * m, n)?;

    // The reference of the checked products, stacked: cuBLAS's values, and
    // cuBLAS's |A||B| for the bound (k+2) eps |A||B| (as `Reference::from_cublas`).
    let len = m * n;
    let picks = strided_picks(count, len);
    cublas_strided(cublas, &da, &db, &mut dr, count, shape)?;
    let value: Vec<f64> = picked(&dr, &picks, len)?.into_iter().map(gemm::Scalar::as_f64).collect();
    cublas_strided(cublas, &a_abs, &b_abs, &mut dr, count, shape)?;
    let scale = (k as f64 + 2.0) * T::EPSILON;
    let bound: Vec<f64> = picked(&dr, &picks, len)?.into_iter().map(|x| scale * x.as_f64()).collect();
    drop((a_abs, b_abs));
    let reference = Reference { m: picks.len() * m, n, value, bound };
    let check = |gemm: &Gemm, dc: &mut DeviceMatrix<T>| -> Result<Comparison, Error> {
        poison(dc, &picks, len)?;
        ours_strided(gemm, &da, &db, dc, count, shape)?;
        let got = picked(dc, &picks, len)?;
        Ok(reference.compare(MatRef::from_slice(&got, picks.len() * m, n, Layout::RowMajor, n)?))
    };

    bar.set_message(format!("{job}: cuBLAS"));
    let blas = time_kernel(device, BATCH_BUDGET_MS, 50, |_| cublas_strided(cublas, &da, &db, &mut dr, count, shape))?;
    bar.inc(1);
    let flops = count as f64 * flops(shape);
    let blas_gflops = gflops(flops, blas.median_ms);
    let row =
        |stage: Option<Stage>, config: Option<KernelConfig>, path: RowPath, time_ms: f64, check: String| LadderRow {
            precision: p,
            stage,
            config,
            shape,
            ops: (Op::N, Op::N),
            layout: Layout::RowMajor,
            ms: time_ms,
            gflops: gflops(flops, time_ms),
            cublas_gflops: blas_gflops,
            check,
            batch: count,
            kind: BatchKind::Strided,
            path,
            split_k: 1,
            pack: false,
        };
    out.batched.push(row(None, None, RowPath::Cublas, blas.median_ms, "reference".into()));

    // Every configuration of the stage (and, for products no larger than
    // 128 x 128, of the shared-memory stages 3-6 as well: a small product
    // fits one of their tiles): checked, then timed in interleaved passes.
    let mut configs = stage_configs(batch_stage(p), p);
    if shape.0 * shape.1 <= 128 * 128 {
        for extra in [Stage::SmemTiled, Stage::OutputsPerThread, Stage::RegisterTiled, Stage::Vectorized] {
            configs.extend(stage_configs(extra, p));
        }
    }
    let mut candidates: Vec<(KernelConfig, String)> = Vec::new();
    for config in configs {
        bar.set_message(format!("{job}: check {config}"));
        match check(&gemm_for(config), &mut dc) {
            Ok(cmp) => {
                out.failed |= !cmp.passed();
                candidates.push((config, verdict(&cmp)));
            }
            Err(e) => {
                bar.println(format!("ladder: {job}: {config}: {e}"));
                out.failed = true;
            }
        }
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
    for _ in 0..SWEEP_PASSES {
        for (i, (config, _)) in candidates.iter().enumerate() {
            bar.set_message(format!("{job}: {config}"));
            let gemm = gemm_for(*config);
            let t = time_kernel(device, BATCH_BUDGET_MS, 50, |_| ours_strided(&gemm, &da, &db, &mut dc, count, shape))?;
            samples[i].push(t.median_ms);
            bar.inc(1);
        }
    }
    for ((config, check), mut runs) in candidates.into_iter().zip(samples) {
        runs.sort_by(f64::total_cmp);
        out.batched.push(row(Some(config.stage()), Some(config), RowPath::Config, runs[runs.len() / 2], check));
    }

    // The default path (the configuration it runs: the measured choice for batches).
    let gemm = Gemm::new();
    let config = choose_batched(Some(device.name()), p, m, n, k, KernelLayouts::NN, count).config;
    bar.set_message(format!("{job}: default ({config})"));
    let cmp = check(&gemm, &mut dc)?;
    out.failed |= !cmp.passed();
    let ours = time_kernel(device, BATCH_BUDGET_MS, 50, |_| ours_strided(&gemm, &da, &db, &mut dc, count, shape))?;
    bar.inc(1);
    out.batched.push(row(Some(config.stage()), Some(config), RowPath::Default, ours.median_ms, verdict(&cmp)));
    Ok(())
}

/// The grouped job: [`GROUPED_COUNT`] problems m x 1024 x 1024, m drawn from
/// [`GROUPED_M`] (seed [`GROUPED_SEED`]), each with its own A, B and C;
/// cuBLAS's grouped call, then the default path (checked on the first,
/// middle, last and largest problem, then timed).
fn bench_grouped<T: Element>(
    device: &Arc<Device>,
    cublas: &Cublas,
    bar: &ProgressBar,
    out: &mut Results,
) -> Result<(), Error> {
    let p = T::PRECISION;
    let (n, k) = (GROUPED_NK, GROUPED_NK);
    let mut rng = StdRng::seed_from_u64(GROUPED_SEED);
    let m_of: Vec<usize> = (0..GROUPED_COUNT).map(|_| rng.random_range(GROUPED_M)).collect();
    let max_m = m_of.iter().copied().max().unwrap_or(0);
    let job = format!("{} grouped {GROUPED_COUNT}, m <= {max_m}", p.name());
    bar.set_message(format!("{job}: inputs"));
    let upload =
        |rows: usize, cols: usize, seed: u64| DeviceMatrix::from_host(device, &random_matrix::<T>(rows, cols, seed));
    let da: Vec<DeviceMatrix<T>> =
        m_of.iter().enumerate().map(|(i, &m)| upload(m, k, 401 + 2 * i as u64)).collect::<Result<_, _>>()?;
    let db: Vec<DeviceMatrix<T>> =
        (0..GROUPED_COUNT).map(|i| upload(k, n, 402 + 2 * i as u64)).collect::<Result<_, _>>()?;
    let mut dc: Vec<DeviceMatrix<T>> =
        m_of.iter().map(|&m| DeviceMatrix::zeros(device, m, n)).collect::<Result<_, _>>()?;
    let mut dr: Vec<DeviceMatrix<T>> =
        m_of.iter().map(|&m| DeviceMatrix::zeros(device, m, n)).collect::<Result<_, _>>()?;
    let a: Vec<DeviceView<'_, T>> = da.iter().map(DeviceMatrix::as_view).collect();
    let b: Vec<DeviceView<'_, T>> = db.iter().map(DeviceMatrix::as_view).collect();

    // The reference of the checked problems (cuBLAS, one product each), stacked.
    let largest = m_of.iter().position(|&m| m == max_m).unwrap_or(0);
    let mut picks = vec![0, GROUPED_COUNT / 2, GROUPED_COUNT - 1, largest];
    picks.sort_unstable();
    picks.dedup();
    let mut reference = Reference { m: 0, n, value: Vec::new(), bound: Vec::new() };
    for &i in &picks {
        let r = Reference::from_cublas(cublas, (Op::N, &da[i]), (Op::N, &db[i]), Layout::RowMajor)?;
        reference.m += r.m;
        reference.value.extend(r.value);
        reference.bound.extend(r.bound);
    }

    let gemm = Gemm::new();
    let config = choose_batched(Some(device.name()), p, max_m, n, k, KernelLayouts::NN, GROUPED_COUNT).config;
    bar.set_message(format!("{job}: default ({config})"));
    for &i in &picks {
        let nan = vec![T::POISON; m_of[i] * n];
        let s = dc[i].buffer().stream().clone();
        s.memcpy_htod(&nan, dc[i].buffer_mut())?;
    }
    {
        let mut c: Vec<DeviceViewMut<'_, T>> = dc.iter_mut().map(DeviceMatrix::as_view_mut).collect();
        gemm.run_grouped_device(&a, &b, &mut c)?;
    }
    let mut got: Vec<T> = Vec::with_capacity(reference.value.len());
    for &i in &picks {
        got.extend_from_slice(dc[i].to_host()?.as_slice());
    }
    let cmp = reference.compare(MatRef::from_slice(&got, reference.m, n, Layout::RowMajor, n)?);
    out.failed |= !cmp.passed();
    let ours = {
        let mut c: Vec<DeviceViewMut<'_, T>> = dc.iter_mut().map(DeviceMatrix::as_view_mut).collect();
        time_kernel(device, BATCH_BUDGET_MS, 50, |_| gemm.run_grouped_device(&a, &b, &mut c))?
    };
    bar.inc(1);
    bar.set_message(format!("{job}: cuBLAS"));
    let blas = {
        let mut c: Vec<DeviceViewMut<'_, T>> = dr.iter_mut().map(DeviceMatrix::as_view_mut).collect();
        time_kernel(device, BATCH_BUDGET_MS, 50, |_| {
            cublas.gemm_grouped_batched(Op::N, Op::N, 1.0, &a, &b, 0.0, &mut c)
        })?
    };
    bar.inc(1);

    let flops: f64 = m_of.iter().map(|&m| flops((m, n, k))).sum();
    let blas_gflops = gflops(flops, blas.median_ms);
    let row =
        |stage: Option<Stage>, config: Option<KernelConfig>, path: RowPath, time_ms: f64, check: String| LadderRow {
            precision: p,
            stage,
            config,
            shape: (max_m, n, k),
            ops: (Op::N, Op::N),
            layout: Layout::RowMajor,
            ms: time_ms,
            gflops: gflops(flops, time_ms),
            cublas_gflops: blas_gflops,
            check,
            batch: GROUPED_COUNT,
            kind: BatchKind::Grouped,
            path,
            split_k: 1,
            pack: false,
        };
    out.batched.push(row(None, None, RowPath::Cublas, blas.median_ms, "reference".into()));
    out.batched.push(row(Some(config.stage()), Some(config), RowPath::Default, ours.median_ms, verdict(&cmp)));
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
            let single = sweep + ladder + o.combo_shapes.len() * OPS.len() * LAYOUTS.len() * 2;
            let strided = STRIDED_JOBS.len() * (SWEEP_PASSES * stage_configs(batch_stage(p), p).len() + 2);
            let batched = strided + 2;
            let sweep = usize::from(o.suite_sweep) * suite::sweep_count(p);
            usize::from(o.single) * single + usize::from(o.batched) * batched + sweep
        })
        .sum::<usize>()
        + usize::from(o.suite) * o.suite_types.len() * suite::entries().len();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .expect("progress template")
            .progress_chars("=> "),
    );
    let mut results = Results {
        ladder: Vec::new(),
        combos: Vec::new(),
        layout_sweep: Vec::new(),
        batched: Vec::new(),
        suite: Vec::new(),
        shapes: Vec::new(),
        copy_gbs: None,
        sweep: Vec::new(),
        failed: false,
    };
    for &p in &o.precisions {
        if o.single {
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
        if o.batched {
            match p {
                Precision::F64 => bench_batched::<f64>(&device, &cublas, &bar, &mut results),
                _ => bench_batched::<f32>(&device, &cublas, &bar, &mut results),
            }
        }
        let r = match (o.suite_sweep, p) {
            (true, Precision::F64) => suite::sweep::<f64>(&device, &cublas, &bar, &mut results),
            (true, _) => suite::sweep::<f32>(&device, &cublas, &bar, &mut results),
            _ => Ok(()),
        };
        if let Err(e) = r {
            eprintln!("ladder: step 5 (the shape suite's sweep): {e}");
            results.failed = true;
        }
    }
    // Step 5, every type of `--suite-types` (after steps 1-4 of every precision).
    if o.suite {
        if let Err(e) = suite::run(&device, &cublas, &o.suite_types, &bar, &mut results) {
            bar.println(format!("ladder: step 5 (the shape suite): {e}"));
            results.failed = true;
        }
    }
    bar.finish_with_message("done");
    std::fs::create_dir_all(&o.out).expect("--out");
    write_outputs(&o, &device, &date, commit, &results);
    if results.failed {
        eprintln!(
            "ladder: some results were WRONG or failed to run (see latest.csv, sweep.csv and the messages above)"
        );
        std::process::exit(1);
    }
}

/// `latest.csv`'s header (`shapes.csv` adds `bound_ms` and `copy_gbs`).
const CSV_HEADER: &str = "device,date,commit,precision,stage,stage_name,configuration,m,n,k,ms,gflops,pct_fma_peak,\
cublas_gflops,ratio_to_cublas,check,intensity,kernel,ops,layout,batch,batch_kind,path,split_k,pack";

/// The columns of `latest.csv` from `precision` to `pack` of one row,
/// comma-separated as written (`shapes.csv` shares them).
fn csv_fields(row: &LadderRow, device: &Device) -> String {
    let (m, n, k) = row.shape;
    let peak = device.peak_gflops(row.precision, row.stage.unwrap_or(Stage::Naive));
    let kernel = row.config.and_then(|c| entry_point(row.precision, c).ok()).map_or("cublas", |e| e.name);
    format!(
        "{},{},{},{},{m},{n},{k},{:.4},{:.1},{:.1},{:.1},{:.4},{},{},{kernel},{}{},{},{},{},{},{},{}",
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
        row.batch,
        row.kind.name(),
        row.path.name(),
        row.split_k,
        u8::from(row.pack),
    )
}

fn write_outputs(o: &Options, device: &Device, date: &str, commit: &str, r: &Results) {
    let dev = device.name().replace(',', " ");
    let write = |name: &str, text: &str| std::fs::write(o.out.join(name), text).expect("write results");
    let mut csv = format!("{CSV_HEADER}\n");
    // The ladder's rows first, then step 3's, then step 4's, then step 5's
    // (see the module docs); a `--suite-sweep` run has step 5's only.
    let rows: Vec<&LadderRow> =
        r.ladder.iter().chain(&r.combos).chain(&r.layout_sweep).chain(&r.batched).chain(&r.suite).collect();
    for row in &rows {
        writeln!(csv, "{dev},{date},{commit},{}", csv_fields(row, device)).unwrap();
    }
    if o.suite_sweep {
        write("suite_sweep.csv", &csv);
    } else if !rows.is_empty() {
        // (A `--suite-only` run of the tensor-core types alone has none.)
        write("latest.csv", &csv);
    }
    // Step 5's rows of every type, with the memory bound.
    if let Some(copy_gbs) = r.copy_gbs {
        let mut shapes = format!("{CSV_HEADER},bound_ms,copy_gbs\n");
        for row in &r.shapes {
            writeln!(shapes, "{}", row.csv_line(&format!("{dev},{date},{commit}"), copy_gbs)).unwrap();
        }
        write("shapes.csv", &shapes);
    }

    // Steps 1-3's files (not written by a `--batched-only` run).
    if o.single {
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
    }

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

    if o.suite_sweep {
        // No BENCHMARKS.md: the sweep only feeds the table. Print each shape's fastest candidate.
        for p in &o.precisions {
            for shape in suite::sweep_shapes() {
                let rows = r.suite.iter().filter(|x| x.precision == *p && x.shape == shape);
                let best = rows.filter(|x| x.path == RowPath::Config).max_by(|a, b| a.gflops.total_cmp(&b.gflops));
                if let Some(b) = best {
                    let c = b.config.map_or(String::new(), |c| c.to_string());
                    println!(
                        "{} {}: {:.1} TFLOP/s ({:.2} x cuBLAS) {c} split {}{}",
                        p.name(),
                        shape_name(shape),
                        b.gflops / 1e3,
                        b.gflops / b.cublas_gflops,
                        b.split_k,
                        if b.pack { " packed" } else { "" }
                    );
                }
            }
        }
        return;
    }
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
        "- device: {} ({} SMs, {:.0} MHz, kernels: {}); date: {date}; commit: {commit}",
        device.name(),
        device.sm_count(),
        device.clock_mhz(),
        device.kernel_code()
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
    for &p in o.precisions.iter().filter(|_| o.single) {
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
    if !r.batched.is_empty() {
        batched_md(w, &r.batched);
    }
    suite::markdown(w, &r.shapes, r.copy_gbs);
    md
}

/// A batched job in words: "100 x 1000³ strided", "64 grouped, m ≤ 1987, n = k = 1024".
fn job_name(row: &LadderRow) -> String {
    let (m, n, k) = row.shape;
    match row.kind {
        BatchKind::Grouped if n == k => format!("{} grouped, m ≤ {m}, n = k = {n}", row.batch),
        BatchKind::Grouped => format!("{} grouped, m ≤ {m}, n = {n}, k = {k}", row.batch),
        _ => format!("{} x {} {}", row.batch, shape_name(row.shape), row.kind.name()),
    }
}

/// BENCHMARKS.md's section of step 4: every batched row, by job.
fn batched_md(w: &mut String, rows: &[LadderRow]) {
    writeln!(w, "## Batched\n").unwrap();
    writeln!(
        w,
        "Strided: `Gemm::run_strided_device` on (batch, row, col) row-major tensors beside cuBLAS's \
         `?gemmStridedBatched`, every configuration of the default stage (stage 8 for f64, 7 for f32; the median \
         of {SWEEP_PASSES} interleaved passes) and the default path (`Gemm::new()`). Grouped: \
         `Gemm::run_grouped_device` (default path) beside cuBLAS's `cublasGemmGroupedBatchedEx` on \
         {GROUPED_COUNT} problems, m drawn from {}..={} (seed {GROUPED_SEED}), n = k = {GROUPED_NK}, each with \
         its own A, B and C. One launch per timing; GFLOP/s of all products together. Checked against cuBLAS \
         ((k+2) eps |A||B|) before timing: every product of a strided batch up to {CHECK_ALL_ELEMENTS} elements \
         of C, else the first, middle and last; of the grouped batch the first, middle, last and largest.\n",
        GROUPED_M.start(),
        GROUPED_M.end()
    )
    .unwrap();
    writeln!(w, "| job | precision | kernel | ms | GFLOP/s | x cuBLAS | check |").unwrap();
    writeln!(w, "|---|---|---|---:|---:|---:|---|").unwrap();
    for row in rows {
        let kernel = match (row.path, row.config) {
            (RowPath::Default, Some(c)) => format!("default: stage {}, {c}", c.stage().number()),
            (_, Some(c)) => c.to_string(),
            (_, None) => "cuBLAS".to_string(),
        };
        writeln!(
            w,
            "| {} | {} | {kernel} | {:.3} | {:.0} | {:.2} | {} |",
            job_name(row),
            row.precision.name(),
            row.ms,
            row.gflops,
            row.gflops / row.cublas_gflops,
            row.check
        )
        .unwrap();
    }
    writeln!(w).unwrap();
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
