//! Batched mixed-precision products beside cuBLAS: grouped batches (a
//! mixture-of-experts layer, each problem its own m) and pointer-array
//! batches (same-shaped problems, every matrix its own buffer) of f16, bf16
//! and i8 operands, run by `Gemm::run_grouped_device` and
//! `Gemm::run_batched_device` (the default path, `Gemm::new()`) and by
//! cuBLAS on the same inputs in the same run.
//!
//! **Jobs.**
//! - Grouped, bf16 x bf16 -> f32 and bf16 x bf16 -> bf16: a layer of E
//!   experts (E in 8, 64, 128) over T = 4096 tokens, each token routed to
//!   one expert with probability proportional to 1/(e+1) (Zipf-like, a
//!   fixed seed), the last expert given weight 0 so that at least one
//!   expert is idle (its problem is empty). The tokens are sorted by
//!   expert: expert e's A is its m_e rows of one row-major T x k activation
//!   matrix (a view, no copy), its B its own k x n weight, row-major or
//!   stored column-major (the n x k row-major weight of many frameworks,
//!   layout column `b-col`), its C its own m_e x n row-major buffer. (n, k)
//!   in (4096, 1024), (1024, 4096), (14336, 4096). The cuBLAS reference is
//!   one `cublasGemmGroupedBatchedEx` call (consecutive experts with equal
//!   m_e share a group; empty ones are left out); where the installed
//!   cuBLAS refuses the type pair (the type combinations its documentation
//!   lists for that call are fewer than for `cublasGemmEx`; an f32 C with
//!   bf16 operands may be missing), `cublasGemmEx` once per non-empty
//!   problem, said so in the configuration column.
//! - Pointer-array, f16 -> f32, f16 -> f16, bf16 -> f32, bf16 -> bf16 and
//!   i8 -> i32: batches of 8 and 64 products of 256^3, 1024^3, 2048^3 and
//!   128 x 4096 x 2048, beside `cublasGemmBatchedEx`. B is row-major for
//!   f16 and bf16; for i8 it is stored column-major (both operands K-major:
//!   the layout cuBLAS's INT8 kernels take, op(A) = T, op(B) = N in its
//!   column-major terms, with leading dimensions multiples of 4; the
//!   library's i8 kernels read B only K-major too, so neither side copies).
//!   `cublasGemmGroupedBatchedEx` takes no integer types, so there is no
//!   grouped i8 job.
//!
//! `--quick` (the default) runs E = 8 with (n, k) = (4096, 1024) (B
//! row-major, both C types, and B column-major with an f32 C) and batches of
//! 8 products of 1024^3 for every type pair: well under a minute on an H100.
//! `--full` runs every job above (a few minutes, about 16 GB of device
//! memory at most).
//!
//! **Checks.** Inputs are random small integers (in [-4, 4] for f16 and
//! bf16, all of [-128, 127] for i8; fixed seeds), so for f16 and bf16
//! every product and partial sum is an integer below 2^24 (k <= 4096: |sum|
//! <= 16 k) and the f32 accumulation of either side is exact whatever its
//! order or split of k (the i8 products are exact in i32 anyway). So an f32
//! or i32 C must equal cuBLAS's bit for bit, and a 16-bit C
//! (one rounding of the exact value) may differ from cuBLAS's by at most
//! one unit in the last place of C's type at cuBLAS's value. Every element
//! of every product is compared (C poisoned first, NaN or i32::MIN, so an
//! unwritten element fails); four elements of each product (corners and
//! centre) are also compared with the exact value computed on the CPU, so
//! a reference wrong there is reported as such. A wrong result makes the run
//! exit 1 after the table and the CSV; a job that fails to run is reported,
//! the others still run, and the run exits 2.
//!
//! **Timing.** CUDA events on the device's stream (`gemm::bench::time_kernel`:
//! one warm-up call, one probe, then repeats filling `--budget-ms`, 25 ms by
//! default, median kept), in interleaved passes (3 quick, 5 full; ours
//! first in even passes, cuBLAS first in odd ones), the median pass of each
//! side kept. Each timed call is one whole batch as a caller would enqueue
//! it: the library's grouped and pointer-array paths for these types launch
//! once per non-empty problem; cuBLAS's time includes uploading its arrays
//! of matrix pointers. Prints ms, TFLOP/s (TOP/s for i8; flops are 2 m_i n k
//! summed over the problems) and the ratio cuBLAS ms / ours ms (above 1:
//! ours is faster). Small-integer inputs draw less power than random
//! mantissas, which can flatter both sides alike at the largest shapes.
//!
//! On a GPU of compute capability other than 9.0 the mixed-precision
//! batches run stage 8's `mma.sync` kernels (the run says so and goes on);
//! below 8.0 they do not run.
//!
//! **CSV.** With `--out DIR`, writes `DIR/batched_mixed.csv` (replacing
//! it) in the columns of `benches/results/warpgroup.csv` and `latest.csv`:
//! `device, date, commit, precision, stage, stage_name, configuration, m, n,
//! k, ms, gflops, pct_fma_peak, cublas_gflops, ratio_to_cublas, check,
//! intensity, kernel, ops, layout, batch, batch_kind, path, split_k, pack`.
//! Per job two rows: cuBLAS's (stage 0, stage_name `cublas`, path `cublas`,
//! configuration e.g. `cublasGemmGroupedBatchedEx; C f32`, check
//! `reference`) and ours (stage 9 `warpgroup-mma` or 8 `tensor-core-mixed`
//! as `Gemm::plan_for` reports, path `default`). `precision` is the
//! operands' type (`f16`, `bf16`, `i8`), C's type ends the configuration.
//! `batch` is the number of problems (experts, empty ones included),
//! `batch_kind` `grouped` or `pointer-array`. `m` is the largest problem's
//! m (for a grouped job the busiest expert's rows; the total, T = 4096, is
//! in the configuration, with E and the routing), `n` and `k` those of
//! every problem. `ms`, `gflops` and `cublas_gflops` are of the whole
//! batch; `intensity` is its flops over the bytes of the A, B and C of its
//! non-empty problems; `pct_fma_peak` is empty. On our row, `configuration`,
//! `kernel` and `split_k` describe the plan of the largest problem (each
//! problem of a grouped batch runs its own plan); `ops` is `NN`, `layout`
//! `row` or `b-col`, `pack` 0. A job cuBLAS could not run at all has our row
//! only, marked unchecked.
//!
//! `cargo run --release -p gemm-host --example batched_mixed -- [--quick | --full] [--out DIR] [--budget-ms MS]`
//!
//! Sources: NVIDIA, *cuBLAS Library* (CUDA Toolkit documentation),
//! sections `cublasGemmGroupedBatchedEx()` and `cublasGemmBatchedEx()`
//! (supported type combinations, host and device arrays) and
//! `cublasGemmEx()` (INT8 requirements).

use gemm::bench::{commit, gflops, time_kernel, today_utc};
use gemm::cublas::Cublas;
use gemm::half::{bf16, f16};
use gemm::{
    Device, DeviceMatrix, DeviceView, DeviceViewMut, Error, Gemm, KernelFamily, Layout, MatRef, Matrix, Op, Product,
    Scalar,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::exit;
use std::sync::Arc;

/// Tokens of the mixture-of-experts layer (rows of all experts together).
const TOKENS: usize = 4096;
/// The routing's seed.
const ROUTING_SEED: u64 = 7;
/// Elements between consecutive matrices' starts in a host pool of random
/// values (so the matrices differ; odd, so their alignments differ too).
const POOL_SHIFT: usize = 1031;
/// The CSV's header.
const CSV_HEAD: &str = "device,date,commit,precision,stage,stage_name,configuration,m,n,k,ms,gflops,pct_fma_peak,\
cublas_gflops,ratio_to_cublas,check,intensity,kernel,ops,layout,batch,batch_kind,path,split_k,pack";
const USAGE: &str =
    "usage: batched_mixed [--quick | --full] [--out DIR] [--budget-ms MS] [--host-time] [--no-event-tracking]";

struct Options {
    full: bool,
    out: Option<PathBuf>,
    budget_ms: f64,
    host_time: bool,
    no_event_tracking: bool,
}

fn options() -> Options {
    let mut o = Options { full: false, out: None, budget_ms: 25.0, host_time: false, no_event_tracking: false };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => o.full = false,
            "--full" => o.full = true,
            "--host-time" => o.host_time = true,
            "--no-event-tracking" => o.no_event_tracking = true,
            "--out" => o.out = Some(it.next().map(PathBuf::from).unwrap_or_else(|| usage())),
            "--budget-ms" => {
                o.budget_ms =
                    it.next().and_then(|v| v.parse().ok()).filter(|&v: &f64| v > 0.0).unwrap_or_else(|| usage())
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                exit(0)
            }
            _ => usage(),
        }
    }
    o
}

fn usage() -> ! {
    eprintln!("{USAGE}");
    exit(2)
}

/// The device, cuBLAS, the timing settings and what the run has found.
struct Ctx {
    device: Arc<Device>,
    cublas: Cublas,
    budget_ms: f64,
    passes: usize,
    host_time: bool,
    rows: Vec<Row>,
    wrong: bool,
    failed: bool,
}

/// How a batch is launched (the `batch_kind` column).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Problems of any m (`run_grouped_device`, `cublasGemmGroupedBatchedEx`).
    Grouped,
    /// Same-shaped problems (`run_batched_device`, `cublasGemmBatchedEx`).
    PointerArray,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Grouped => "grouped",
            Kind::PointerArray => "pointer-array",
        }
    }

    fn cublas_call(self) -> &'static str {
        match self {
            Kind::Grouped => "cublasGemmGroupedBatchedEx",
            Kind::PointerArray => "cublasGemmBatchedEx",
        }
    }
}

/// What one job is, for the table and the CSV.
struct JobSpec {
    kind: Kind,
    /// The configuration column's start: the batch and its routing.
    label: String,
    /// `row` or `b-col` (the `layout` column).
    layout: &'static str,
}

/// What the cuBLAS side of a job runs.
enum Reference {
    /// The batched call (`cublasGemmGroupedBatchedEx` / `cublasGemmBatchedEx`).
    Batched,
    /// `cublasGemmEx` once per problem: the batched call refused (why).
    PerProblem(String),
    /// cuBLAS ran neither (why): ours is timed alone, unchecked.
    Refused(String),
}

/// One line of the CSV.
struct Row {
    precision: &'static str,
    stage: u32,
    stage_name: String,
    configuration: String,
    shape: (usize, usize, usize),
    ms: f64,
    gflops: f64,
    cublas_gflops: Option<f64>,
    ratio: Option<f64>,
    check: String,
    intensity: f64,
    kernel: String,
    layout: &'static str,
    batch: usize,
    kind: Kind,
    path: &'static str,
    split_k: u32,
}

/// `len` random small integers of `T` from `seed`: [-4, 4] for the
/// floating-point types (exact products and sums), i8's whole range for i8.
fn int_values<T: Scalar>(len: usize, seed: u64) -> Vec<T> {
    let mut rng = StdRng::seed_from_u64(seed);
    let range = if T::EPSILON == 0.0 { -128i32..=127 } else { -4i32..=4 };
    (0..len).map(|_| T::from_f64(rng.random_range(range.clone()) as f64)).collect()
}

/// `count` `rows x cols` matrices in `layout` (densely packed), each in its
/// own device buffer, and their host values: matrix i is the pool of
/// random values from element `i * POOL_SHIFT` on.
struct Operands<T> {
    pool: Vec<T>,
    dev: Vec<DeviceMatrix<T>>,
    rows: usize,
    cols: usize,
    layout: Layout,
}

impl<T: Scalar> Operands<T> {
    fn new(
        device: &Arc<Device>,
        count: usize,
        (rows, cols): (usize, usize),
        layout: Layout,
        seed: u64,
    ) -> Result<Self, Error> {
        let pool = int_values::<T>(rows * cols + count.saturating_sub(1) * POOL_SHIFT, seed);
        let mut o = Operands { pool, dev: Vec::with_capacity(count), rows, cols, layout };
        for i in 0..count {
            let d = DeviceMatrix::from_host(device, o.host(i)?)?;
            o.dev.push(d);
        }
        Ok(o)
    }

    /// Matrix i's host values.
    fn host(&self, i: usize) -> Result<MatRef<'_, T>, Error> {
        let ld = if self.layout == Layout::RowMajor { self.cols } else { self.rows };
        MatRef::from_slice(&self.pool[i * POOL_SHIFT..], self.rows, self.cols, self.layout, ld.max(1))
    }

    /// Every matrix whole, as operands.
    fn blocks(&self) -> Result<Vec<Block<'_, T>>, Error> {
        (0..self.dev.len())
            .map(|i| Ok(Block { dev: &self.dev[i], host: self.host(i)?, row: 0, rows: self.rows }))
            .collect()
    }
}

/// One operand of one problem: rows `row..row + rows` of a device matrix
/// (all of it for a matrix of its own), and the same values on the host.
struct Block<'m, T> {
    dev: &'m DeviceMatrix<T>,
    host: MatRef<'m, T>,
    row: usize,
    rows: usize,
}

impl<'m, T: Scalar> Block<'m, T> {
    fn view(&self) -> Result<DeviceView<'m, T>, Error> {
        self.dev.view(self.row, 0, self.rows, self.dev.cols())
    }
}

fn views<'m, T: Scalar>(blocks: &[Block<'m, T>]) -> Result<Vec<DeviceView<'m, T>>, Error> {
    blocks.iter().map(Block::view).collect()
}

/// A `rows x cols` row-major C filled with `C::POISON`.
fn poisoned<C: Scalar>(device: &Arc<Device>, rows: usize, cols: usize) -> Result<DeviceMatrix<C>, Error> {
    DeviceMatrix::from_host(device, &Matrix::filled(rows, cols, C::POISON))
}

/// The C of every problem, poisoned.
fn outputs<T: Scalar, C: Scalar>(
    device: &Arc<Device>,
    a: &[Block<'_, T>],
    b: &[Block<'_, T>],
) -> Result<Vec<DeviceMatrix<C>>, Error> {
    a.iter().zip(b).map(|(a, b)| poisoned::<C>(device, a.rows, b.dev.cols())).collect()
}

/// The batched cuBLAS call of `kind` on the whole batch.
fn cublas_batched<T: Product<C>, C: Scalar>(
    cublas: &Cublas,
    kind: Kind,
    a: &[DeviceView<'_, T>],
    b: &[DeviceView<'_, T>],
    c: &mut [DeviceViewMut<'_, C>],
) -> Result<(), Error> {
    match kind {
        Kind::Grouped => cublas.gemm_grouped_batched_ex(Op::N, Op::N, 1.0, a, b, 0.0, c),
        Kind::PointerArray => cublas.gemm_batched_ex(Op::N, Op::N, 1.0, a, b, 0.0, c),
    }
}

/// `cublasGemmEx` on every non-empty problem.
fn cublas_each<T: Product<C>, C: Scalar>(
    cublas: &Cublas,
    a: &[Block<'_, T>],
    b: &[Block<'_, T>],
    c: &mut [DeviceMatrix<C>],
) -> Result<(), Error> {
    for ((a, b), c) in a.iter().zip(b).zip(c.iter_mut()) {
        if a.rows > 0 {
            cublas.gemm_ex(Op::N, Op::N, 1.0, a.view()?, b.view()?, 0.0, c)?;
        }
    }
    Ok(())
}

/// Ours on the whole batch (the default path).
fn ours<T: Product<C>, C: Scalar>(
    gemm: &Gemm,
    kind: Kind,
    a: &[DeviceView<'_, T>],
    b: &[DeviceView<'_, T>],
    c: &mut [DeviceViewMut<'_, C>],
) -> Result<(), Error> {
    match kind {
        Kind::Grouped => gemm.run_grouped_device(a, b, c),
        Kind::PointerArray => gemm.run_batched_device(a, b, c),
    }
}

/// One unit in the last place of a type of machine epsilon `eps` at `x`
/// (0 at zero and for the exact types).
fn ulp(x: f64, eps: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        0.0
    } else {
        eps * 2f64.powi(x.abs().log2().floor() as i32)
    }
}

/// The comparison of a whole batch.
#[derive(Default)]
struct Verdict {
    elements: usize,
    /// Elements 1 ulp from the reference (16-bit C only).
    off_by_ulp: usize,
    /// The first element out of bounds, in words.
    wrong: Option<String>,
    /// Elements out of bounds.
    wrong_count: usize,
}

impl Verdict {
    /// Compares `got` with `want` (element e of problem `index` at
    /// `position(e)`), allowing one ulp of C's type for a 16-bit C, none for
    /// an f32 or i32 C; `who` names what `want` is. A poisoned `want` (NaN,
    /// i32::MIN: no correct result here is either) fails.
    fn add<C: Scalar>(
        &mut self,
        index: usize,
        position: &dyn Fn(usize) -> (usize, usize),
        got: &[C],
        want: &[C],
        who: &str,
    ) {
        let eps = if size_of::<C>() == 2 { C::EPSILON } else { 0.0 };
        for (e, (&gc, &wc)) in got.iter().zip(want).enumerate() {
            let (g, w) = (gc.as_f64(), wc.as_f64());
            self.elements += 1;
            let unwritten = w.is_nan() || wc == C::POISON;
            if !unwritten && g == w {
                continue;
            }
            if !unwritten && w.is_finite() && g.is_finite() && (g - w).abs() <= ulp(w, eps) {
                self.off_by_ulp += 1;
                continue;
            }
            self.wrong_count += 1;
            if self.wrong.is_none() {
                let (i, j) = position(e);
                let at = format!("problem {index} element ({i}, {j})");
                self.wrong = Some(if unwritten {
                    format!("{at}: {who} left it unwritten")
                } else {
                    format!("{at}: {g} where {who} has {w}")
                });
            }
        }
    }

    fn passed(&self) -> bool {
        self.wrong.is_none()
    }

    fn describe(&self, who: &str) -> String {
        match &self.wrong {
            Some(w) => format!("WRONG ({} of {} elements; first: {w})", self.wrong_count, self.elements),
            None if self.off_by_ulp == 0 => format!("ok (equal to {who}; {} elements)", self.elements),
            None => format!("ok ({} of {} elements 1 ulp from {who})", self.off_by_ulp, self.elements),
        }
    }
}

/// The exact value of element (i, j) of A B on the CPU, in C's type.
fn exact<T: Scalar, C: Scalar>(a: &MatRef<'_, T>, b: &MatRef<'_, T>, i: usize, j: usize) -> C {
    let sum: f64 = (0..a.cols()).map(|l| a.get(i, l).unwrap().as_f64() * b.get(l, j).unwrap().as_f64()).sum();
    C::from_f64(sum)
}

/// The median.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs one job: the cuBLAS reference, ours, the checks, the timing, and
/// its rows. Returns whether ours passed (true when unchecked).
fn run_job<T: Product<C>, C: Scalar>(
    ctx: &mut Ctx,
    spec: &JobSpec,
    a: &[Block<'_, T>],
    b: &[Block<'_, T>],
) -> Result<bool, Error> {
    let device = ctx.device.clone();
    let count = a.len();
    let (n, k) = (b[0].dev.cols(), b[0].rows);
    let largest = a.iter().map(|x| x.rows).max().unwrap_or(0);

    // The reference: the batched call, else cuBLAS once per problem.
    let mut r = outputs::<T, C>(&device, a, b)?;
    let batched = {
        let (av, bv) = (views(a)?, views(b)?);
        let mut rv: Vec<DeviceViewMut<'_, C>> = r.iter_mut().map(DeviceMatrix::as_view_mut).collect();
        cublas_batched(&ctx.cublas, spec.kind, &av, &bv, &mut rv)
    };
    let reference = match batched {
        Ok(()) => Reference::Batched,
        Err(e @ (Error::Cublas { .. } | Error::Unsupported { .. })) => {
            r = outputs::<T, C>(&device, a, b)?;
            match cublas_each(&ctx.cublas, a, b, &mut r) {
                Ok(()) => Reference::PerProblem(e.to_string()),
                Err(e2 @ Error::Cublas { .. }) => Reference::Refused(format!("{e}; {e2}")),
                Err(e2) => return Err(e2),
            }
        }
        Err(e) => return Err(e),
    };

    // Ours, then every element against the reference and four of each
    // product against the exact value.
    let gemm = Gemm::new();
    let mut c = outputs::<T, C>(&device, a, b)?;
    {
        let (av, bv) = (views(a)?, views(b)?);
        let mut cv: Vec<DeviceViewMut<'_, C>> = c.iter_mut().map(DeviceMatrix::as_view_mut).collect();
        ours(&gemm, spec.kind, &av, &bv, &mut cv)?;
    }
    let checked = !matches!(reference, Reference::Refused(_));
    let (mut vs_cublas, mut vs_cpu_ours, mut vs_cpu_cublas) =
        (Verdict::default(), Verdict::default(), Verdict::default());
    for i in 0..count {
        let got = c[i].to_host()?;
        let m = a[i].rows;
        let picks = [(0, 0), (m.saturating_sub(1), n - 1), (m / 2, n / 2), (0, n - 1)];
        let want_cpu: Vec<C> =
            picks.iter().filter(|_| m > 0).map(|&(p, q)| exact(&a[i].host, &b[i].host, p, q)).collect();
        let at = |x: &Matrix<C>| -> Vec<C> {
            picks.iter().filter(|_| m > 0).map(|&(p, q)| x.get(p, q).unwrap_or(C::POISON)).collect()
        };
        let pick = |e: usize| picks[e];
        vs_cpu_ours.add(i, &pick, &at(&got), &want_cpu, "the exact value");
        if checked {
            let want = r[i].to_host()?;
            vs_cublas.add(i, &|e| (e / n, e % n), got.as_slice(), want.as_slice(), "cuBLAS");
            vs_cpu_cublas.add(i, &pick, &at(&want), &want_cpu, "the exact value");
        }
    }
    let passed = vs_cublas.passed() && vs_cpu_ours.passed() && vs_cpu_cublas.passed();
    let check = if let Reference::Refused(why) = &reference {
        format!("unchecked against cuBLAS ({why}); corners and centres {}", vs_cpu_ours.describe("exact"))
    } else if !vs_cpu_cublas.passed() {
        format!("REFERENCE WRONG against the exact values: {}", vs_cpu_cublas.describe("exact"))
    } else if !vs_cpu_ours.passed() {
        format!("{} against the exact values", vs_cpu_ours.describe("exact"))
    } else {
        vs_cublas.describe("cuBLAS")
    };

    // Timing: interleaved passes, the median pass of each side.
    let time_ours = |c: &mut [DeviceMatrix<C>]| -> Result<f64, Error> {
        let (av, bv) = (views(a)?, views(b)?);
        let mut cv: Vec<DeviceViewMut<'_, C>> = c.iter_mut().map(DeviceMatrix::as_view_mut).collect();
        Ok(time_kernel(&device, ctx.budget_ms, 50, |_| ours(&gemm, spec.kind, &av, &bv, &mut cv))?.median_ms)
    };
    let time_cublas = |r: &mut [DeviceMatrix<C>]| -> Result<f64, Error> {
        match &reference {
            Reference::Batched => {
                let (av, bv) = (views(a)?, views(b)?);
                let mut rv: Vec<DeviceViewMut<'_, C>> = r.iter_mut().map(DeviceMatrix::as_view_mut).collect();
                let t = time_kernel(&device, ctx.budget_ms, 50, |_| {
                    cublas_batched(&ctx.cublas, spec.kind, &av, &bv, &mut rv)
                })?;
                Ok(t.median_ms)
            }
            Reference::PerProblem(_) => {
                Ok(time_kernel(&device, ctx.budget_ms, 50, |_| cublas_each(&ctx.cublas, a, b, r))?.median_ms)
            }
            Reference::Refused(_) => Ok(f64::NAN),
        }
    };
    let (mut t_ours, mut t_cublas) = (Vec::new(), Vec::new());
    for pass in 0..ctx.passes {
        if pass % 2 == 0 {
            t_ours.push(time_ours(&mut c)?);
            t_cublas.push(time_cublas(&mut r)?);
        } else {
            t_cublas.push(time_cublas(&mut r)?);
            t_ours.push(time_ours(&mut c)?);
        }
    }
    let (ms, blas_ms) = (median(t_ours), median(t_cublas));
    if ctx.host_time {
        // What the host spends in one call (until it returns; the work it
        // queued is then waited for outside the timed part), median of 21.
        let host_us = |f: &mut dyn FnMut() -> Result<(), Error>| -> Result<f64, Error> {
            let mut v = Vec::new();
            for _ in 0..21 {
                let t = std::time::Instant::now();
                f()?;
                v.push(t.elapsed().as_secs_f64() * 1e6);
                device.synchronize()?;
            }
            Ok(median(v))
        };
        let (av, bv) = (views(a)?, views(b)?);
        let mut cv: Vec<DeviceViewMut<'_, C>> = c.iter_mut().map(DeviceMatrix::as_view_mut).collect();
        let ours_us = host_us(&mut || ours(&gemm, spec.kind, &av, &bv, &mut cv))?;
        let blas_us = match &reference {
            Reference::Batched => {
                let mut rv: Vec<DeviceViewMut<'_, C>> = r.iter_mut().map(DeviceMatrix::as_view_mut).collect();
                host_us(&mut || cublas_batched(&ctx.cublas, spec.kind, &av, &bv, &mut rv))?
            }
            Reference::PerProblem(_) => host_us(&mut || cublas_each(&ctx.cublas, a, b, &mut r))?,
            Reference::Refused(_) => f64::NAN,
        };
        println!("  host time of one call: ours {ours_us:.1} us, cuBLAS {blas_us:.1} us");
    }

    // What ours ran for the largest problem (each problem runs its own plan).
    let plan_gemm = if b[0].host.layout() == Layout::ColMajor { Gemm::new().op_b(Op::T) } else { Gemm::new() };
    let plan = plan_gemm.plan_for::<T, C>(largest, n, k)?;
    let in_bytes = size_of::<T>() as u32;
    let (stage, stage_name, kernel, tile) = match &plan.family {
        KernelFamily::Warpgroup { kernel, tile } => (
            9,
            "warpgroup-mma".to_string(),
            kernel.to_string(),
            format!("block {}x{}x{}; pipeline depth {}", tile.bm, tile.bn, tile.bk(in_bytes), tile.depth),
        ),
        KernelFamily::MmaSync { kernel, tile } => (
            8,
            "tensor-core-mixed".to_string(),
            kernel.to_string(),
            format!("block {}x{}x{}; pipeline depth {}", tile.bm, tile.bn, tile.bk(in_bytes), tile.depth),
        ),
        KernelFamily::Ladder(p) => {
            (p.config.stage().number(), p.config.stage().name().to_string(), p.config.to_string(), p.to_string())
        }
        KernelFamily::Skinny { kernel, rows, .. } => {
            (10, "token-sized".to_string(), kernel.to_string(), format!("S = {rows}"))
        }
        // Opt-in only: these products never plan it.
        KernelFamily::Emulated { kernel, moduli, .. } => {
            (11, "emulated-int8".to_string(), kernel.to_string(), format!("{moduli} moduli"))
        }
    };
    let split = if plan.split_k > 1 { format!("; split-K {}", plan.split_k) } else { String::new() };

    let flops: f64 = a.iter().map(|x| 2.0 * (x.rows * n * k) as f64).sum();
    let bytes: f64 = a
        .iter()
        .filter(|x| x.rows > 0)
        .map(|x| ((x.rows * k + k * n) * size_of::<T>() + x.rows * n * size_of::<C>()) as f64)
        .sum();
    let intensity = if bytes > 0.0 { flops / bytes } else { 0.0 };
    let (ours_gflops, blas_gflops) = (gflops(flops, ms), gflops(flops, blas_ms));
    let nonempty = a.iter().filter(|x| x.rows > 0).count();
    let (blas_config, blas_kernel, blas_name) = match &reference {
        Reference::Batched => {
            (spec.kind.cublas_call().to_string(), spec.kind.cublas_call(), spec.kind.cublas_call().to_string())
        }
        Reference::PerProblem(why) => (
            format!(
                "cublasGemmEx once per non-empty problem ({nonempty} calls; {} refused: {why})",
                spec.kind.cublas_call()
            ),
            "cublasGemmEx",
            format!("cublasGemmEx x {nonempty}"),
        ),
        Reference::Refused(why) => (why.clone(), "", "cuBLAS refused".to_string()),
    };
    let shape = (largest, n, k);
    let row = |stage, stage_name: String, configuration: String, ms, gflops, check: String, kernel: String, path| Row {
        precision: T::NAME,
        stage,
        stage_name,
        configuration,
        shape,
        ms,
        gflops,
        cublas_gflops: checked.then_some(blas_gflops),
        ratio: checked.then_some(blas_ms / ms),
        check,
        intensity,
        kernel,
        layout: spec.layout,
        batch: count,
        kind: spec.kind,
        path,
        split_k: if stage == 0 { 1 } else { plan.split_k },
    };
    if checked {
        ctx.rows.push(row(
            0,
            "cublas".to_string(),
            format!("{blas_config}; C {}", C::NAME),
            blas_ms,
            blas_gflops,
            "reference".to_string(),
            blas_kernel.to_string(),
            "cublas",
        ));
        ctx.rows.last_mut().unwrap().ratio = Some(1.0);
    }
    ctx.rows.push(row(
        stage,
        stage_name,
        format!("{}; largest problem: {tile}{split}; C {}", spec.label, C::NAME),
        ms,
        ours_gflops,
        check.clone(),
        kernel,
        "default",
    ));

    let unit = if T::NAME == "i8" { "TOP/s" } else { "TFLOP/s" };
    println!(
        "{:<13} {:>4} -> {:<4} {:<38} ours {:>8.3} ms {:>6.1} {unit} (stage {stage}) | {:<28} {:>8.3} ms {:>6.1} | x{:<6.3} {}",
        spec.kind.name(),
        T::NAME,
        C::NAME,
        format!("{} m<={largest} n={n} k={k} B {}", count, spec.layout),
        ms,
        ours_gflops / 1e3,
        blas_name,
        blas_ms,
        blas_gflops / 1e3,
        blas_ms / ms,
        if passed { check.split(" (").next().unwrap_or("ok").to_string() } else { check.clone() }
    );
    Ok(passed)
}

/// Records the result of one job: a wrong result or a failure to run.
fn record(ctx: &mut Ctx, what: &str, result: Result<bool, Error>) {
    match result {
        Ok(true) => {}
        Ok(false) => ctx.wrong = true,
        Err(e) => {
            eprintln!("batched_mixed: {what}: {e}");
            ctx.failed = true;
        }
    }
}

/// Rows routed to each of `experts` experts (at least 2): each of `tokens`
/// tokens picks one expert, with probability proportional to 1/(e+1) for
/// expert e but the last, whose weight is 0 (an idle expert), from `seed`.
fn route(experts: usize, tokens: usize, seed: u64) -> Vec<usize> {
    assert!(experts >= 2, "routing needs two experts");
    let weights: Vec<f64> = (0..experts).map(|e| if e + 1 == experts { 0.0 } else { 1.0 / (e + 1) as f64 }).collect();
    let total: f64 = weights.iter().sum();
    let mut cumulative = Vec::with_capacity(experts);
    let mut acc = 0.0;
    for w in &weights {
        acc += w / total;
        cumulative.push(acc);
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut rows = vec![0usize; experts];
    for _ in 0..tokens {
        let u: f64 = rng.random();
        let e = cumulative.iter().position(|&c| u < c).unwrap_or(experts - 2);
        rows[e] += 1;
    }
    rows
}

/// The grouped jobs: mixture-of-experts layers, bf16 operands, C f32 and bf16.
fn grouped_jobs(ctx: &mut Ctx, full: bool) -> Result<(), Error> {
    let device = ctx.device.clone();
    let experts_list: &[usize] = if full { &[8, 64, 128] } else { &[8] };
    let shapes: &[(usize, usize)] = if full { &[(4096, 1024), (1024, 4096), (14336, 4096)] } else { &[(4096, 1024)] };
    for &experts in experts_list {
        let m_of = route(experts, TOKENS, ROUTING_SEED);
        let empty = m_of.iter().filter(|&&m| m == 0).count();
        let label = format!(
            "E={experts} experts; T={TOKENS} tokens routed top-1 with weights 1/(e+1) (last expert 0; seed {ROUTING_SEED}); {empty} empty"
        );
        for &(n, k) in shapes {
            let x = Operands::<bf16>::new(&device, 1, (TOKENS, k), Layout::RowMajor, 1000 + k as u64)?;
            let x_host = x.host(0)?;
            let mut a = Vec::with_capacity(experts);
            let mut offset = 0;
            for &m in &m_of {
                a.push(Block { dev: &x.dev[0], host: x_host.view(offset, 0, m, k)?, row: offset, rows: m });
                offset += m;
            }
            for layout in [Layout::RowMajor, Layout::ColMajor] {
                // Quick: B column-major with an f32 C only.
                let both = full || layout == Layout::RowMajor;
                let seed = 2000 + (experts * 7 + n + k) as u64;
                let w = Operands::<bf16>::new(&device, experts, (k, n), layout, seed)?;
                let b = w.blocks()?;
                let spec = JobSpec {
                    kind: Kind::Grouped,
                    label: label.clone(),
                    layout: if layout == Layout::RowMajor { "row" } else { "b-col" },
                };
                let what = format!("grouped E={experts} n={n} k={k} B {}", spec.layout);
                let r = run_job::<bf16, f32>(ctx, &spec, &a, &b);
                record(ctx, &format!("{what}, C f32"), r);
                if both {
                    let r = run_job::<bf16, bf16>(ctx, &spec, &a, &b);
                    record(ctx, &format!("{what}, C bf16"), r);
                }
            }
        }
    }
    Ok(())
}

/// A pointer-array job's inputs: `count` A (m x k, row-major) and B (k x
/// n, in `b_layout`), each in its own buffer.
fn pointer_array_inputs<T: Scalar>(
    device: &Arc<Device>,
    count: usize,
    (m, n, k): (usize, usize, usize),
    b_layout: Layout,
) -> Result<(Operands<T>, Operands<T>), Error> {
    let seed = 3000 + (count * 13 + m + 3 * n + 7 * k) as u64;
    Ok((
        Operands::new(device, count, (m, k), Layout::RowMajor, seed)?,
        Operands::new(device, count, (k, n), b_layout, seed + 1)?,
    ))
}

/// Runs one pointer-array job of `T` operands into a C of `C` and records it.
fn pointer_array_job<T: Product<C>, C: Scalar>(ctx: &mut Ctx, ops: &(Operands<T>, Operands<T>)) {
    let (count, m, k, n) = (ops.0.dev.len(), ops.0.rows, ops.0.cols, ops.1.cols);
    let what = format!("pointer-array {count} x {m}x{n}x{k} {} -> {}", T::NAME, C::NAME);
    let spec = JobSpec {
        kind: Kind::PointerArray,
        label: format!("{count} products of {m}x{n}x{k}; every matrix its own buffer"),
        layout: if ops.1.layout == Layout::RowMajor { "row" } else { "b-col" },
    };
    let result = ops.0.blocks().and_then(|a| ops.1.blocks().and_then(|b| run_job::<T, C>(ctx, &spec, &a, &b)));
    record(ctx, &what, result);
}

/// The pointer-array jobs: every type pair, each count and shape.
fn pointer_array_jobs(ctx: &mut Ctx, full: bool) -> Result<(), Error> {
    let device = ctx.device.clone();
    let counts: &[usize] = if full { &[8, 64] } else { &[8] };
    let shapes: &[(usize, usize, usize)] = if full {
        &[(256, 256, 256), (1024, 1024, 1024), (2048, 2048, 2048), (128, 4096, 2048)]
    } else {
        &[(1024, 1024, 1024)]
    };
    for &count in counts {
        for &shape in shapes {
            let ops = pointer_array_inputs::<f16>(&device, count, shape, Layout::RowMajor)?;
            pointer_array_job::<f16, f32>(ctx, &ops);
            pointer_array_job::<f16, f16>(ctx, &ops);
            drop(ops);
            let ops = pointer_array_inputs::<bf16>(&device, count, shape, Layout::RowMajor)?;
            pointer_array_job::<bf16, f32>(ctx, &ops);
            pointer_array_job::<bf16, bf16>(ctx, &ops);
            drop(ops);
            // i8: B K-major (column-major), the layout cuBLAS's INT8 kernels take.
            let ops = pointer_array_inputs::<i8>(&device, count, shape, Layout::ColMajor)?;
            pointer_array_job::<i8, i32>(ctx, &ops);
        }
    }
    Ok(())
}

/// The CSV text of the rows.
fn csv(device: &Device, rows: &[Row]) -> String {
    let clean = |s: &str| s.replace([',', '\n'], ";");
    let (dev, date, commit) = (clean(device.name()), today_utc(), commit());
    let mut text = format!("{CSV_HEAD}\n");
    for r in rows {
        let (m, n, k) = r.shape;
        let opt = |x: Option<f64>, digits: usize| x.map_or(String::new(), |v| format!("{v:.digits$}"));
        writeln!(
            text,
            "{dev},{date},{commit},{},{},{},{},{m},{n},{k},{:.4},{:.1},,{},{},{},{:.1},{},NN,{},{},{},{},{},0",
            r.precision,
            r.stage,
            r.stage_name,
            clean(&r.configuration),
            r.ms,
            r.gflops,
            opt(r.cublas_gflops, 1),
            opt(r.ratio, 4),
            clean(&r.check),
            r.intensity,
            clean(&r.kernel),
            r.layout,
            r.batch,
            r.kind.name(),
            r.path,
            r.split_k,
        )
        .expect("writing to a String");
    }
    text
}

fn main() -> Result<(), Error> {
    let o = options();
    let device = gemm::default_device()?;
    if o.no_event_tracking {
        // A diagnosis: cudarc orders every use of a buffer across streams
        // with events (a driver call or two per buffer and call) unless
        // this is off; both sides then run without them.
        // SAFETY: this program uses one stream and synchronizes each call's
        // results before it reads them; no buffer is used on two streams.
        unsafe { device.context().disable_event_tracking() };
        println!("cudarc's event tracking off");
    }
    let cublas = Cublas::new(&device)?;
    let (major, minor) = device.compute_capability();
    println!(
        "device: {} (sm_{major}{minor}, {} SMs), {}; {} run",
        device.name(),
        device.sm_count(),
        today_utc(),
        if o.full { "full" } else { "quick" }
    );
    if (major, minor) != (9, 0) {
        println!(
            "note: compute capability {major}.{minor}: the mixed-precision batches run stage 8 (mma.sync) here; stage 9 needs 9.0"
        );
    }
    println!("ratio: cuBLAS ms / ours ms (above 1: ours is faster); TFLOP/s of the whole batch");
    let mut ctx = Ctx {
        device: device.clone(),
        cublas,
        budget_ms: o.budget_ms,
        passes: if o.full { 5 } else { 3 },
        host_time: o.host_time,
        rows: Vec::new(),
        wrong: false,
        failed: false,
    };
    let started = std::time::Instant::now();
    if let Err(e) = grouped_jobs(&mut ctx, o.full) {
        eprintln!("batched_mixed: grouped jobs: {e}");
        ctx.failed = true;
    }
    if let Err(e) = pointer_array_jobs(&mut ctx, o.full) {
        eprintln!("batched_mixed: pointer-array jobs: {e}");
        ctx.failed = true;
    }
    println!("{} rows in {:.1} s", ctx.rows.len(), started.elapsed().as_secs_f64());
    match &o.out {
        Some(dir) => {
            let path = dir.join("batched_mixed.csv");
            let written = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, csv(&device, &ctx.rows)));
            match written {
                Ok(()) => println!("wrote {}", path.display()),
                Err(e) => {
                    eprintln!("batched_mixed: {}: {e}", path.display());
                    exit(2)
                }
            }
        }
        None => println!("(no --out DIR: no CSV written)"),
    }
    if ctx.failed {
        eprintln!("batched_mixed: some jobs failed to run (see above)");
        exit(2);
    }
    if ctx.wrong {
        eprintln!("batched_mixed: FAILED: a result was outside its bound (see the check column)");
        exit(1);
    }
    Ok(())
}
