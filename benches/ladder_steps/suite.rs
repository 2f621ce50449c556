//! Step 5: the public shape suite (issue "every shape fast"): squares,
//! token-sized products, small k, long k and skinny products, for every
//! product type, the default path beside cuBLAS.
//!
//! - In every full run, and alone with `--suite-only all|LIST`: for each
//!   type of `--suite-types` (default all: f64, f32, tf32, f16, f16f32,
//!   bf16, bf16f32, i8; see [`SuiteType`]) and each entry of [`suite`]
//!   (or of the list), cuBLAS and the default path (`Gemm::new()` with
//!   the entry's op flags, TF32 allowed for tf32: the committed
//!   default-choice table and planner) on the same operands, the default
//!   path checked against cuBLAS ([`Reference::from_cublas_product`]: `?gemm`
//!   for f64 and f32, `cublasGemmEx` with the same types and compute type
//!   otherwise; the elementwise bound of [`gemm::check::ProductBound`]),
//!   then both timed in [`SUITE_PASSES`] interleaved passes (which goes
//!   first alternating; the median pass of each kept), each pass at most
//!   [`PASS_REPS`] timed runs (CUDA events, `gemm::bench::time_kernel`),
//!   fewer (at least 3) where those would take more than
//!   [`PASS_BUDGET_MS`]. Rows: `shapes.csv` (every type; `latest.csv`'s
//!   columns plus `bound_ms` and `copy_gbs`), `latest.csv` (f64 and f32 with
//!   op flags NN only, `path` = `suite`, as before: the README's tables and
//!   `cargo xtask tuning` read them there), and one table per type in
//!   BENCHMARKS.md ([`markdown`]).
//! - `--suite-sweep` (a run of its own, f64 and f32): at each shape of
//!   [`SWEEP_SHAPES`] (the suite as it was before the token-sized products
//!   and the other types, which the default-choice table was measured
//!   at), every configuration of the default stage (8 for f64, 7 for f32)
//!   with k whole and split as the wave model says, half and twice that
//!   (`gemm::tuning::model_split_for`), each with the operands in place and
//!   packed first (`Gemm::pack`), each checked against cuBLAS, then timed.
//!   Writes `suite_sweep.csv` (the columns of `latest.csv`), from which
//!   `cargo xtask tuning` takes the fastest configuration and split of each
//!   shape into the default-choice table.
//!
//! **Operands.** A, B and C row-major; op(A) = N; op(B) = N, or T for the
//! entries marked `NT` (B stored n x k row-major, i.e. B column-major: the
//! layout of a language model's weight, which the token-sized products
//! also run in). Random values ([-1, 1), i8 [-128, 127]), drawn fresh for
//! each entry and type (in parallel blocks of rows, each from its own
//! seed), as many (A, B) sets as it takes to exceed twice the L2 (at most
//! 8, as `gemm::bench::Problem`), rotated between timed runs so a small
//! product is not flattered by the cache; C poisoned (NaN, i32::MIN)
//! before the checked run. alpha = 1, beta = 0. Every entry's operands are
//! freed before the next entry's are drawn (16384³ f64 holds about 11 GB
//! of device memory at its peak, while its reference is computed).
//!
//! **Where cuBLAS refuses an entry** (INT8 at leading dimensions that are
//! not multiples of 4: 1023³, 2047³, 4095³, and the NT entries with n = 1
//! or 2): ours is timed alone, and checked against the CPU
//! (`Reference::new_mixed`, exact for i8) when 2 m n k is at most
//! [`CPU_CHECK_FLOPS`], else marked unchecked; no cuBLAS row, the ratio
//! empty.
//!
//! **Where ours and cuBLAS's results differ by more than the bound**
//! (products of at most [`CPU_CHECK_FLOPS`]): both are compared with the
//! CPU's f64 sums of the same inputs (`Reference::new_mixed`), and the row
//! passes when ours is within the bound there; its check says both (bf16
//! -> bf16 at 1023³: cuBLAS's result differs from ours at 81 elements).
//!
//! **The memory bound** (`bound_ms`, rows with m or n at most
//! [`BOUND_MAX_MN`]): the bytes the product must move, A and B read once
//! and C written once in their element sizes (beta = 0, so C is not read;
//! a product with beta != 0 would read it too: add m n bytes of C again),
//! over the device's copy bandwidth measured at the start of the step in
//! the same run ([`copy_bandwidth`]: a device-to-device copy of 1 GiB,
//! CUDA events, median of 20, 2 x bytes / time as a copy reads and writes
//! each byte). `of bound` = bound_ms / ms (1: as fast as copying the
//! operands; printed for every row that has a bound, in BENCHMARKS.md for
//! the token-sized rows, m or n at most [`TOKEN_MAX_MN`]).
//!
//! **Runtime**, estimated (not yet measured) for one H100 SXM with 16
//! host cores, from a model of each entry: drawing the inputs (about 7 ns
//! an element on one core, in parallel here) and uploading them (5-10
//! GB/s); the reference (two cuBLAS products, copies back, 10-20 ns of host
//! work per element of C); and 2 x 5 passes of up to 12 runs (warm-up,
//! probe, at most 10 timed) of each side, each at least 25-40 us (events
//! and synchronization), the kernel at 55 (f64), 45 (f32), 350 (TF32), 600
//! (f16, bf16) TFLOP/s or 1100 TOP/s (i8), or at 2.6-2.8 TB/s where it is
//! memory-bound. Per type over the 191 entries: f64 50-80 s (16384³ alone
//! 14-18 s), f32 45-65 s, tf32 30-50 s, each f16 and bf16 type 25-50 s, i8
//! 25-55 s; host work is most of it (the timing itself is about 15 s for
//! f64 and f32, a few seconds for the others). All eight types: 4-7.5
//! minutes, plus a few seconds for the process, cuBLAS and the copy
//! bandwidth. To stay well under 8 minutes a call, split it in two:
//! `--suite-types f64,f32,tf32` (2-3.5 min) and `--suite-types
//! f16,f16f32,bf16,bf16f32,i8` (2.5-4 min). The progress bar and a line
//! per type (`suite: f64 -> f64 done in N s`) give the measured times.

use super::*;
use gemm::bench::Timing;
use gemm::half::{bf16, f16};
use gemm::{KernelFamily, Product, Scalar};

/// A product type of the suite: the operands' type, C's type, and which
/// cuBLAS call stands beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuiteType {
    /// f64 x f64 -> f64 (`dgemm`; cuBLAS `cublasDgemm`).
    F64,
    /// f32 x f32 -> f32 on the f32 ladder (`sgemm`; cuBLAS `cublasSgemm`, no TF32).
    F32,
    /// f32 x f32 -> f32 on TF32 tensor cores (`Gemm::allow_tf32`; cuBLAS
    /// `cublasGemmEx` with `CUBLAS_COMPUTE_32F_FAST_TF32`).
    Tf32,
    /// f16 x f16 -> f16, f32 accumulation (cuBLAS `cublasGemmEx`, `_32F`).
    F16,
    /// f16 x f16 -> f32.
    F16F32,
    /// bf16 x bf16 -> bf16, f32 accumulation.
    Bf16,
    /// bf16 x bf16 -> f32.
    Bf16F32,
    /// i8 x i8 -> i32 (cuBLAS `cublasGemmEx`, `_32I`).
    I8,
}

impl SuiteType {
    /// Every type, in the order they run.
    pub const ALL: [SuiteType; 8] = [
        SuiteType::F64,
        SuiteType::F32,
        SuiteType::Tf32,
        SuiteType::F16,
        SuiteType::F16F32,
        SuiteType::Bf16,
        SuiteType::Bf16F32,
        SuiteType::I8,
    ];

    /// The name `--suite-types` takes: `f64`, `f32`, `tf32`, `f16` (f16 ->
    /// f16), `f16f32`, `bf16` (bf16 -> bf16), `bf16f32`, `i8`.
    pub fn flag(self) -> &'static str {
        match self {
            SuiteType::F64 => "f64",
            SuiteType::F32 => "f32",
            SuiteType::Tf32 => "tf32",
            SuiteType::F16 => "f16",
            SuiteType::F16F32 => "f16f32",
            SuiteType::Bf16 => "bf16",
            SuiteType::Bf16F32 => "bf16f32",
            SuiteType::I8 => "i8",
        }
    }

    /// The type of a `--suite-types` name.
    pub fn parse(name: &str) -> Option<Self> {
        SuiteType::ALL.into_iter().find(|t| t.flag() == name)
    }

    /// The `precision` column: the operands' type, `tf32` for TF32 (as in
    /// `warpgroup.csv`; C's type ends the configuration of those rows).
    pub fn precision(self) -> &'static str {
        match self {
            SuiteType::F64 => "f64",
            SuiteType::F32 => "f32",
            SuiteType::Tf32 => "tf32",
            SuiteType::F16 | SuiteType::F16F32 => "f16",
            SuiteType::Bf16 | SuiteType::Bf16F32 => "bf16",
            SuiteType::I8 => "i8",
        }
    }

    /// C's type.
    pub fn c_type(self) -> &'static str {
        match self {
            SuiteType::F64 => "f64",
            SuiteType::F16 => "f16",
            SuiteType::Bf16 => "bf16",
            SuiteType::I8 => "i32",
            SuiteType::F32 | SuiteType::Tf32 | SuiteType::F16F32 | SuiteType::Bf16F32 => "f32",
        }
    }

    /// "f16 -> f32", "tf32 -> f32" (TF32: f32 operands on TF32 tensor cores).
    pub fn title(self) -> String {
        format!("{} -> {}", self.precision(), self.c_type())
    }

    /// Bytes of an element of A and B, and of C.
    pub fn element_bytes(self) -> (usize, usize) {
        let of = |name: &str| match name {
            "f64" => 8,
            "f32" | "tf32" | "i32" => 4,
            "f16" | "bf16" => 2,
            _ => 1,
        };
        (of(self.precision()), of(self.c_type()))
    }

    /// The ladder's precision (f64, f32 without TF32): their rows also go
    /// to `latest.csv`; `None` for the tensor-core types.
    pub fn ladder_precision(self) -> Option<Precision> {
        match self {
            SuiteType::F64 => Some(Precision::F64),
            SuiteType::F32 => Some(Precision::F32),
            _ => None,
        }
    }

    /// "TFLOP/s", or "TOP/s" for i8.
    fn unit(self) -> &'static str {
        if self == SuiteType::I8 {
            "TOP/s"
        } else {
            "TFLOP/s"
        }
    }
}

/// Parses `--suite-types`: comma-separated [`SuiteType::flag`] names.
pub fn parse_types(list: &str) -> Result<Vec<SuiteType>, String> {
    let mut types = Vec::new();
    for name in list.split(',').filter(|s| !s.is_empty()) {
        let t = SuiteType::parse(name).ok_or_else(|| {
            let all: Vec<&str> = SuiteType::ALL.iter().map(|t| t.flag()).collect();
            format!("--suite-types: unknown type {name} (one of {})", all.join(", "))
        })?;
        if !types.contains(&t) {
            types.push(t);
        }
    }
    if types.is_empty() {
        return Err("--suite-types: no type given".to_string());
    }
    Ok(types)
}

/// One product of the suite: m, n, k and op(A), op(B) (A, B and C
/// row-major; op(B) = T: B stored n x k, B column-major).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// m, n, k.
    pub shape: Shape,
    /// op(A), op(B).
    pub ops: (Op, Op),
}

impl Entry {
    /// op(A) = op(B) = N.
    const fn nn(shape: Shape) -> Self {
        Entry { shape, ops: (Op::N, Op::N) }
    }

    /// op(B) = T: B column-major.
    const fn nt(shape: Shape) -> Self {
        Entry { shape, ops: (Op::N, Op::T) }
    }

    /// "NN", "NT" (the `ops` column).
    pub fn ops_name(self) -> String {
        format!("{}{}", self.ops.0.as_char(), self.ops.1.as_char())
    }
}

/// The square sizes of the suite (m = n = k).
pub const SQUARES: [usize; 22] = [
    256, 512, 1000, 1023, 1024, 1536, 2047, 2048, 2056, 2500, 3000, 3500, 4000, 4095, 4096, 4500, 5000, 5500, 6000,
    6144, 8192, 16384,
];

/// Small k, long k and skinny products (m x n x k).
pub const LONG_AND_SKINNY: [Shape; 9] = [
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

/// The tokens of the token-sized products (their m; n in the transposed form).
pub const TOKENS: [usize; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// (n, k) of the token-sized products: a language model's projections
/// (hidden size 4096; MLP 11008, as Llama 2 7B, and 14336, as Llama 3 8B
/// and Mistral 7B), up and down.
pub const WEIGHTS: [(usize, usize); 5] = [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (4096, 14336)];

/// The public shape suite, one list for every type, in the order it runs:
/// the [`SQUARES`]; [`LONG_AND_SKINNY`]; for each of the [`WEIGHTS`] (n, k)
/// and each of the [`TOKENS`] t, t x n x k (`NN`, then `NT`); then the
/// transposed forms n x t x k (m and n swapped: n small), `NN` then `NT`.
/// 22 + 9 + 2 x 2 x 40 = 191 entries.
pub fn suite() -> Vec<Entry> {
    let mut out: Vec<Entry> = SQUARES.iter().map(|&s| Entry::nn((s, s, s))).collect();
    out.extend(LONG_AND_SKINNY.iter().map(|&s| Entry::nn(s)));
    for transposed in [false, true] {
        for (n, k) in WEIGHTS {
            for t in TOKENS {
                let shape = if transposed { (n, t, k) } else { (t, n, k) };
                out.push(Entry::nn(shape));
                out.push(Entry::nt(shape));
            }
        }
    }
    out
}

/// The shapes of `--suite-sweep` (op flags NN): the 26 shapes the
/// default-choice table was tuned at (squares; small k; long k; skinny; C
/// of 32, 64 and 128 rows or columns). `cargo xtask tuning` reads the sweep's `suite_sweep.csv`.
pub const SWEEP_SHAPES: [Shape; 26] = [
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
    // C of 32, 64 and 128 rows or columns: between the token-sized
    // products and the squares (the nearest rows above are 16 and 256
    // wide).
    (32, 8192, 8192),
    (8192, 32, 8192),
    (64, 8192, 8192),
    (8192, 64, 8192),
    (128, 8192, 8192),
    (8192, 128, 8192),
];

/// The shapes of `--sweep-shapes LIST` (the sweep at these alone).
static SWEEP_ONLY: std::sync::OnceLock<Vec<Shape>> = std::sync::OnceLock::new();

/// Runs the sweep at `shapes` instead of [`SWEEP_SHAPES`].
pub fn sweep_only(shapes: Vec<Shape>) {
    let _ = SWEEP_ONLY.set(shapes);
}

/// The shapes the sweep runs: `--sweep-shapes`'s, else [`SWEEP_SHAPES`].
pub fn sweep_shapes() -> Vec<Shape> {
    SWEEP_ONLY.get().cloned().unwrap_or_else(|| SWEEP_SHAPES.to_vec())
}

/// The entries of `--suite-only LIST` (the suite's step at these alone).
static ONLY: std::sync::OnceLock<Vec<Entry>> = std::sync::OnceLock::new();

/// Runs the suite's step at `entries` instead of [`suite`].
pub fn only(entries: Vec<Entry>) {
    let _ = ONLY.set(entries);
}

/// The entries the step runs: `--suite-only`'s, else [`suite`].
pub fn entries() -> Vec<Entry> {
    ONLY.get().cloned().unwrap_or_else(suite)
}

/// Parses one entry of `--suite-only`: `N`, `MxNxK` (op flags NN) or
/// `MxNxK:NT` (B column-major).
pub fn parse_entry(s: &str) -> Entry {
    match s.split_once(':') {
        None => Entry::nn(parse_shape(s)),
        Some((shape, ops)) if ops.eq_ignore_ascii_case("nt") => Entry::nt(parse_shape(shape)),
        Some((shape, ops)) if ops.eq_ignore_ascii_case("nn") => Entry::nn(parse_shape(shape)),
        Some(_) => panic!("--suite-only: N, MxNxK or MxNxK:NT, got {s}"),
    }
}

/// Interleaved passes of cuBLAS and the default path at each entry (the
/// median pass of each side kept).
pub const SUITE_PASSES: usize = 5;
/// Timed runs of one side in one pass, at most (after `time_kernel`'s
/// warm-up and probe runs).
pub const PASS_REPS: usize = 10;
/// Fewer runs (at least 3) where [`PASS_REPS`] would take longer than
/// this, in milliseconds: the large squares.
pub const PASS_BUDGET_MS: f64 = 20.0;
/// Rows with m or n at most this have a memory bound (`bound_ms`).
pub const BOUND_MAX_MN: usize = 128;
/// Rows with m or n at most this are token-sized: BENCHMARKS.md gives
/// their `bound_ms / ms`.
pub const TOKEN_MAX_MN: usize = 64;
/// Where cuBLAS refuses an entry, ours is checked on the CPU up to this
/// many flops (2 m n k), else left unchecked.
pub const CPU_CHECK_FLOPS: f64 = (1u64 << 34) as f64;
/// Bytes of the copy-bandwidth measurement: 1 GiB read and 1 GiB written.
const COPY_BYTES: usize = 1 << 30;
/// Timed copies of the copy-bandwidth measurement.
const COPY_REPS: usize = 20;

/// Time timing one candidate of `--suite-sweep` at `shape`, milliseconds.
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
/// shape of [`SWEEP_SHAPES`], into `out.suite` (path `config`).
pub fn sweep<T: Element>(
    device: &Arc<Device>,
    cublas: &Cublas,
    bar: &ProgressBar,
    out: &mut Results,
) -> Result<(), Error> {
    let p = T::PRECISION;
    let stage = batch_stage(p);
    for shape in sweep_shapes() {
        let (m, n, k) = shape;
        let mut problem = problem::<T>(device, shape)?;
        let reference = problem.reference(cublas)?;
        let blas = measure_cublas(cublas, &mut problem, CUBLAS_BUDGET_MS)?;
        let (cublas_row, blas_time) = ((p, None, shape, (Op::N, Op::N)), (blas.timing.median_ms, blas.gflops));
        out.suite.push(row(cublas_row, blas_time, blas.gflops, "reference".into(), (1, false), RowPath::Cublas));
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
                    let what = (p, Some(config), shape, (Op::N, Op::N));
                    let time = (ours.timing.median_ms, ours.gflops);
                    out.suite.push(row(what, time, blas.gflops, check, (split, pack), RowPath::Config));
                }
            }
        }
    }
    Ok(())
}

/// Candidates of [`sweep`] for the progress bar (an estimate: splits per
/// configuration vary).
pub fn sweep_count(p: Precision) -> usize {
    sweep_shapes().len() * stage_configs(batch_stage(p), p).len() * 4
}

/// A `latest.csv` row of step 5: (precision, configuration (None:
/// cuBLAS), shape, op flags) and what was measured: (median ms, GFLOP/s).
fn row(
    (precision, config, shape, ops): (Precision, Option<KernelConfig>, Shape, (Op, Op)),
    (ms, gflops): (f64, f64),
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
        ops,
        layout: Layout::RowMajor,
        ms,
        gflops,
        cublas_gflops,
        check,
        batch: 1,
        kind: BatchKind::Single,
        path,
        split_k,
        pack,
    }
}

/// The device's copy bandwidth in GB/s, measured in this run: a
/// device-to-device copy (`cuMemcpyDtoDAsync` on the device's stream) of a
/// 1 GiB buffer (a byte pattern, not zeros) into another, timed with CUDA
/// events (`time_kernel`: a warm-up, a probe, then [`COPY_REPS`] copies),
/// the median; 2 x 1 GiB / time, as a copy reads and writes each byte
/// once. Returns the bandwidth and the timing.
///
/// # Errors
/// [`Error::OutOfMemory`] (it holds 2 GiB), [`Error::Driver`].
pub fn copy_bandwidth(device: &Arc<Device>) -> Result<(f64, Timing), Error> {
    let stream = device.stream();
    let host: Vec<u8> =
        (0..COPY_BYTES).into_par_iter().map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8).collect();
    let src = stream.clone_htod(&host)?;
    drop(host);
    let mut dst = stream.alloc_zeros::<u8>(COPY_BYTES)?;
    let t = time_kernel(device, f64::INFINITY, COPY_REPS, |_| Ok(stream.memcpy_dtod(&src, &mut dst)?))?;
    Ok((2.0 * COPY_BYTES as f64 / (t.median_ms * 1e6), t))
}

/// The memory bound of an m x n x k product of `ty`, in milliseconds: the
/// bytes it must move, A (m x k) and B (k x n) read once and C (m x n)
/// written once, each in its element size, at `copy_gbs` GB/s. C is not
/// read: the suite runs beta = 0 (with beta != 0 the product reads C too,
/// m n more bytes of C).
pub fn bound_ms(ty: SuiteType, (m, n, k): Shape, copy_gbs: f64) -> f64 {
    let (in_bytes, out_bytes) = ty.element_bytes();
    let bytes = (in_bytes * (m * k + k * n) + out_bytes * m * n) as f64;
    bytes / (copy_gbs * 1e9) * 1e3
}

/// One line of `shapes.csv`: cuBLAS or the default path at one entry of
/// the suite for one type.
pub struct ShapeRow {
    /// The product type.
    pub ty: SuiteType,
    /// Shape and op flags.
    pub entry: Entry,
    /// `cublas` or `suite` (the `path` column).
    pub path: RowPath,
    /// Median kernel time of the median pass.
    pub ms: f64,
    /// GFLOP/s (GOP/s for i8) at `ms`.
    pub gflops: f64,
    /// cuBLAS's GFLOP/s at this entry; NaN where cuBLAS refused it.
    pub cublas_gflops: f64,
    /// The check's verdict (`reference` on cuBLAS's row).
    pub check: String,
    /// The kernel that ran (`cuBLAS` on cuBLAS's row).
    pub kernel: String,
    /// Slices of k.
    pub split_k: u32,
    /// Whether the operands were packed first.
    pub pack: bool,
    /// The memory bound ([`bound_ms`]) of rows with m or n at most [`BOUND_MAX_MN`].
    pub bound_ms: Option<f64>,
    /// `latest.csv`'s columns from `precision` to `pack`, as written.
    pub fields: String,
}

impl ShapeRow {
    /// The line of `shapes.csv`: `prefix` (device, date, commit), the
    /// fields, `bound_ms` (empty without a bound) and `copy_gbs`.
    pub fn csv_line(&self, prefix: &str, copy_gbs: f64) -> String {
        let bound = self.bound_ms.map_or(String::new(), |b| format!("{b:.5}"));
        format!("{prefix},{},{bound},{copy_gbs:.1}", self.fields)
    }

    /// bound_ms / ms, where there is a bound.
    pub fn of_bound(&self) -> Option<f64> {
        self.bound_ms.map(|b| b / self.ms)
    }
}

/// The device, cuBLAS, the progress bar and the measured copy bandwidth.
struct Ctx<'a> {
    device: &'a Arc<Device>,
    cublas: &'a Cublas,
    bar: &'a ProgressBar,
    copy_gbs: f64,
}

/// Step 5 in a full run or `--suite-only`: measures the copy bandwidth
/// (into `out.copy_gbs`, printed), then each of `types` at every entry of
/// [`entries`]: cuBLAS's row and ours into `out.shapes`, and for f64 and
/// f32 with op flags NN into `out.suite` (`latest.csv`). An entry that
/// fails to run is reported and marks the run failed; the others still run.
///
/// # Errors
/// The copy-bandwidth measurement's.
pub fn run(
    device: &Arc<Device>,
    cublas: &Cublas,
    types: &[SuiteType],
    bar: &ProgressBar,
    out: &mut Results,
) -> Result<(), Error> {
    bar.set_message("suite: copy bandwidth");
    let (copy_gbs, t) = copy_bandwidth(device)?;
    out.copy_gbs = Some(copy_gbs);
    bar.println(format!(
        "suite: device copy bandwidth {copy_gbs:.0} GB/s (device-to-device copy of 1 GiB, median {:.3} ms of {} \
         copies, read + write; DRAM {:.0} GB/s in theory)",
        t.median_ms,
        t.reps,
        device.dram_gbs()
    ));
    let ctx = Ctx { device, cublas, bar, copy_gbs };
    for &ty in types {
        let started = std::time::Instant::now();
        for entry in entries() {
            let (m, n, k) = entry.shape;
            bar.set_message(format!("suite {} {m}x{n}x{k} {}", ty.title(), entry.ops_name()));
            let r = match ty {
                SuiteType::F64 => run_entry::<f64, f64>(&ctx, ty, entry, out),
                SuiteType::F32 | SuiteType::Tf32 => run_entry::<f32, f32>(&ctx, ty, entry, out),
                SuiteType::F16 => run_entry::<f16, f16>(&ctx, ty, entry, out),
                SuiteType::F16F32 => run_entry::<f16, f32>(&ctx, ty, entry, out),
                SuiteType::Bf16 => run_entry::<bf16, bf16>(&ctx, ty, entry, out),
                SuiteType::Bf16F32 => run_entry::<bf16, f32>(&ctx, ty, entry, out),
                SuiteType::I8 => run_entry::<i8, i32>(&ctx, ty, entry, out),
            };
            bar.inc(1);
            if let Err(e) = r {
                bar.println(format!("ladder: suite {} {m}x{n}x{k} {}: {e}", ty.title(), entry.ops_name()));
                out.failed = true;
            }
        }
        bar.println(format!("suite: {} done in {:.0} s", ty.title(), started.elapsed().as_secs_f64()));
    }
    Ok(())
}

/// Random operands of one entry on the device: (A, B) sets to rotate
/// through, set 0's absolute values (for the check's bound) and, for
/// products of at most [`CPU_CHECK_FLOPS`], set 0 on the host (for the CPU
/// check where cuBLAS refuses the shape, or where ours and cuBLAS's
/// results differ by more than the bound).
struct Operands<T> {
    /// (A, B) as stored (A m x k; B k x n, or n x k for op(B) = T;
    /// row-major); timed run i uses set i % len.
    sets: Vec<(DeviceMatrix<T>, DeviceMatrix<T>)>,
    /// |A| and |B| of set 0 (floating-point types).
    abs: Option<(DeviceMatrix<T>, DeviceMatrix<T>)>,
    /// Set 0 on the host (products of at most [`CPU_CHECK_FLOPS`]).
    host: Option<(Matrix<T>, Matrix<T>)>,
}

impl<T: Scalar> Operands<T> {
    /// Draws the operands of `entry` from `seed`: as many sets as it takes
    /// to exceed twice the device's L2, at most 8 (as `gemm::bench::Problem`).
    fn random(device: &Arc<Device>, Entry { shape: (m, n, k), ops }: Entry, seed: u64) -> Result<Self, Error> {
        let bytes = ((m * k + k * n) * size_of::<T>()).max(1);
        let count = (2 * device.l2_bytes()).div_ceil(bytes).clamp(1, 8);
        let stored = |op: Op, rows: usize, cols: usize| if op == Op::N { (rows, cols) } else { (cols, rows) };
        let (a_shape, b_shape) = (stored(ops.0, m, k), stored(ops.1, k, n));
        let mut sets = Vec::with_capacity(count);
        let (mut abs_set, mut host) = (None, None);
        for s in 0..count as u64 {
            let seed_a = seed.wrapping_mul(31).wrapping_add(2 * s);
            let a = random_rows::<T>(a_shape.0, a_shape.1, seed_a);
            let b = random_rows::<T>(b_shape.0, b_shape.1, seed_a + 1);
            sets.push((DeviceMatrix::from_host(device, &a)?, DeviceMatrix::from_host(device, &b)?));
            if s == 0 && flops((m, n, k)) <= CPU_CHECK_FLOPS {
                host = Some((a.clone(), b.clone()));
            }
            if s == 0 && T::EPSILON != 0.0 {
                let (a, b) = (abs(a), abs(b));
                abs_set = Some((DeviceMatrix::from_host(device, &a)?, DeviceMatrix::from_host(device, &b)?));
            }
        }
        Ok(Operands { sets, abs: abs_set, host })
    }
}

/// A `rows x cols` row-major matrix of random values as
/// `gemm::check::random_matrix` draws them ([-1, 1); integer types [-128,
/// 127]), drawn in parallel blocks of about 2^20 elements, each from its own
/// seed (one core takes about 7 ns an element: seconds for a large operand).
fn random_rows<T: Scalar>(rows: usize, cols: usize, seed: u64) -> Matrix<T> {
    let cols = cols.max(1);
    let block_rows = ((1 << 20) / cols).max(1);
    let mut data = vec![T::default(); rows * cols];
    data.par_chunks_mut(block_rows * cols).enumerate().for_each(|(i, chunk)| {
        let block_seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(i as u64);
        chunk.copy_from_slice(random_matrix::<T>(chunk.len() / cols, cols, block_seed).as_slice());
    });
    Matrix::from_vec_in(rows, cols, Layout::RowMajor, cols, data).expect("a packed row-major matrix")
}

/// A stored operand under its op flag (a view; `T`: its transpose).
fn op_view<T: Scalar>(m: &Matrix<T>, op: Op) -> MatRef<'_, T> {
    if op == Op::N {
        m.as_ref()
    } else {
        m.t()
    }
}

/// The median pass: the timing of median `median_ms` among the passes (at
/// least one).
fn median_pass(mut runs: Vec<Timing>) -> Timing {
    runs.sort_by(|a, b| a.median_ms.total_cmp(&b.median_ms));
    runs.swap_remove(runs.len() / 2)
}

/// One entry of one type: operands, the reference (cuBLAS; the CPU where
/// cuBLAS refuses and the product is small), the default path checked, then
/// both timed in [`SUITE_PASSES`] interleaved passes; the rows into `out`.
fn run_entry<T: Product<C>, C: Scalar>(
    ctx: &Ctx<'_>,
    ty: SuiteType,
    entry: Entry,
    out: &mut Results,
) -> Result<(), Error> {
    let Entry { shape: (m, n, k), ops } = entry;
    let (device, cublas) = (ctx.device, ctx.cublas);
    let tf32 = ty == SuiteType::Tf32;
    let seed = 211 + (m * 31 + n * 7 + k) as u64 + u64::from(ops.1 == Op::T) * 1_000_003;
    let mut operands = Operands::<T>::random(device, entry, seed)?;

    // The reference: cuBLAS with the same types; where it refuses the
    // shape, the CPU for small integer products, else none.
    let from_cublas = {
        let (a, b) = &operands.sets[0];
        let (a_abs, b_abs) = operands.abs.as_ref().map_or((a, b), |(x, y)| (x, y));
        Reference::from_cublas_product::<T, C>(cublas, (ops.0, a, a_abs), (ops.1, b, b_abs), Layout::RowMajor, tf32)
    };
    let (reference, refused) = match from_cublas {
        Ok(r) => (Some(r), None),
        Err(e @ Error::Cublas { .. }) => {
            let small = flops((m, n, k)) <= CPU_CHECK_FLOPS;
            let cpu = operands.host.as_ref().filter(|_| small).map(|(a, b)| {
                let c0 = Matrix::<C>::filled(m, n, C::default());
                Reference::new_mixed(1.0, op_view(a, ops.0), op_view(b, ops.1), 0.0, &c0)
            });
            (cpu, Some(e.to_string()))
        }
        Err(e) => return Err(e),
    };
    operands.abs = None;
    let host = operands.host.take();

    // The default path, checked on a poisoned C.
    let gemm = Gemm::new().op_a(ops.0).op_b(ops.1).allow_tf32(tf32).device(device);
    let mut c = DeviceMatrix::from_host(device, &Matrix::<C>::filled(m, n, C::POISON))?;
    gemm.run_device(&operands.sets[0].0, &operands.sets[0].1, &mut c)?;
    let check = match (&reference, &refused) {
        (Some(r), _) => {
            let cmp = r.compare(&c.to_host()?);
            let v = verdict(&cmp);
            if refused.is_some() {
                out.failed |= !cmp.passed();
                format!("{v} against the CPU (cuBLAS refused the shape)")
            } else if let (false, Some((a, b)), false) = (cmp.passed(), &host, tf32) {
                // Outside the bound of cuBLAS's result: which of the two is
                // off, against the CPU (f64 sums of the same inputs).
                let c0 = Matrix::<C>::filled(m, n, C::default());
                let cpu = Reference::new_mixed(1.0, op_view(a, ops.0), op_view(b, ops.1), 0.0, &c0);
                let ours = cpu.compare(&c.to_host()?);
                let mut theirs = DeviceMatrix::<C>::zeros_in(device, m, n, Layout::RowMajor)?;
                let (a0, b0) = &operands.sets[0];
                cublas.gemm_product(ops.0, ops.1, 1.0, a0, b0, 0.0, &mut theirs, tf32)?;
                let theirs = cpu.compare(&theirs.to_host()?);
                out.failed |= !ours.passed();
                format!(
                    "{} against the CPU; cuBLAS's result there: {} (against cuBLAS: {v})",
                    verdict(&ours),
                    verdict(&theirs)
                )
            } else {
                out.failed |= !cmp.passed();
                v
            }
        }
        (None, Some(why)) => format!("unchecked (cuBLAS refused the shape: {why})"),
        (None, None) => unreachable!("a reference or cuBLAS's refusal"),
    };
    drop(reference);

    // Timed: interleaved passes, which side goes first alternating, the
    // median pass of each kept (a dip of the GPU's speed then falls in one
    // pass of one side rather than deciding the ratio).
    let sets = &operands.sets;
    let time_ours = |c: &mut DeviceMatrix<C>| {
        time_kernel(device, PASS_BUDGET_MS, PASS_REPS, |i| {
            let (a, b) = &sets[i % sets.len()];
            gemm.run_device(a, b, &mut *c)
        })
    };
    let time_cublas = |c: &mut DeviceMatrix<C>| {
        time_kernel(device, PASS_BUDGET_MS, PASS_REPS, |i| {
            let (a, b) = &sets[i % sets.len()];
            cublas.gemm_product(ops.0, ops.1, 1.0, a, b, 0.0, &mut *c, tf32)
        })
    };
    let (mut ours_runs, mut blas_runs) = (Vec::new(), Vec::new());
    for pass in 0..SUITE_PASSES {
        if pass % 2 == 1 {
            ours_runs.push(time_ours(&mut c)?);
        }
        if refused.is_none() {
            blas_runs.push(time_cublas(&mut c)?);
        }
        if pass % 2 == 0 {
            ours_runs.push(time_ours(&mut c)?);
        }
    }
    drop((operands, c));
    let ours_ms = median_pass(ours_runs).median_ms;
    let blas_ms = if blas_runs.is_empty() { f64::NAN } else { median_pass(blas_runs).median_ms };
    let flops = flops((m, n, k));
    let (ours_gflops, blas_gflops) = (gflops(flops, ours_ms), gflops(flops, blas_ms));
    let bound = (m.min(n) <= BOUND_MAX_MN).then(|| bound_ms(ty, (m, n, k), ctx.copy_gbs));

    // The rows: cuBLAS's (where it ran), then ours.
    let plan = gemm.plan_for::<T, C>(m, n, k)?;
    let shape_row = |path: RowPath, kernel: &str, (ms, gflops): (f64, f64), (split_k, pack): (u32, bool), fields| {
        let check = if path == RowPath::Cublas { "reference".to_string() } else { check.clone() };
        let kernel = kernel.to_string();
        ShapeRow {
            ty,
            entry,
            path,
            ms,
            gflops,
            cublas_gflops: blas_gflops,
            check,
            kernel,
            split_k,
            pack,
            bound_ms: bound,
            fields,
        }
    };
    let ours_kernel = match (&plan.family, ty.ladder_precision()) {
        (KernelFamily::Ladder(p), Some(precision)) => {
            let config = p.config;
            let kernel = entry_point(precision, config).map_or_else(|_| config.to_string(), |e| e.name.to_string());
            let blas_row = row(
                (precision, None, (m, n, k), ops),
                (blas_ms, blas_gflops),
                blas_gflops,
                "reference".into(),
                (1, false),
                RowPath::Cublas,
            );
            let ours_row = row(
                (precision, Some(config), (m, n, k), ops),
                (ours_ms, ours_gflops),
                blas_gflops,
                check.clone(),
                (p.split_k, p.pack),
                RowPath::Suite,
            );
            if refused.is_none() {
                let fields = csv_fields(&blas_row, device);
                out.shapes.push(shape_row(RowPath::Cublas, "cuBLAS", (blas_ms, blas_gflops), (1, false), fields));
            }
            let fields = csv_fields(&ours_row, device);
            out.shapes.push(shape_row(RowPath::Suite, &kernel, (ours_ms, ours_gflops), (p.split_k, p.pack), fields));
            // latest.csv keeps the suite's rows of op flags NN (the README's
            // tables and the tuning read them there).
            if ops == (Op::N, Op::N) {
                if refused.is_none() {
                    out.suite.push(blas_row);
                }
                out.suite.push(ours_row);
            }
            kernel
        }
        (family, _) => {
            let in_bytes = size_of::<T>() as u32;
            let (stage, stage_name, kernel, tile) = match family {
                KernelFamily::Warpgroup { kernel, tile } => {
                    let (bk, depth) = (tile.bk(in_bytes), tile.depth);
                    (9, "warpgroup-mma", *kernel, format!("block {}x{}x{bk}; pipeline depth {depth}", tile.bm, tile.bn))
                }
                KernelFamily::MmaSync { kernel, tile } => {
                    let (bk, depth) = (tile.bk(in_bytes), tile.depth);
                    (
                        8,
                        "tensor-core-mixed",
                        *kernel,
                        format!("block {}x{}x{bk}; pipeline depth {depth}", tile.bm, tile.bn),
                    )
                }
                KernelFamily::Ladder(p) => {
                    (p.config.stage().number(), p.config.stage().name(), "", p.config.to_string())
                }
                // Not a stage of the ladder: stage column 10.
                KernelFamily::Skinny { kernel, rows, .. } => (10, "token-sized", *kernel, format!("S = {rows}")),
                // The suite never asks for it (opt-in).
                KernelFamily::Emulated { kernel, moduli, .. } => {
                    (11, "emulated-int8", *kernel, format!("{moduli} moduli"))
                }
            };
            let split = if plan.split_k > 1 { format!("; split-K {}", plan.split_k) } else { String::new() };
            let (in_size, out_size) = ty.element_bytes();
            let intensity = flops / (in_size * (m * k + k * n) + out_size * m * n) as f64;
            let ops_name = entry.ops_name();
            let (precision, c_type) = (ty.precision(), ty.c_type());
            // The configuration as in warpgroup.csv: cuBLAS's call, or our
            // tile; C's type last.
            if refused.is_none() {
                let fields = format!(
                    "{precision},0,cublas,cublasGemmEx; C {c_type},{m},{n},{k},{blas_ms:.4},{blas_gflops:.1},,\
                     {blas_gflops:.1},1.0000,reference,{intensity:.1},cublasGemmEx,{ops_name},row,1,single,cublas,1,0"
                );
                out.shapes.push(shape_row(RowPath::Cublas, "cuBLAS", (blas_ms, blas_gflops), (1, false), fields));
            }
            let (cublas_gflops, ratio) = if refused.is_none() {
                (format!("{blas_gflops:.1}"), format!("{:.4}", ours_gflops / blas_gflops))
            } else {
                (String::new(), String::new())
            };
            let fields = format!(
                "{precision},{stage},{stage_name},{tile}{split}; C {c_type},{m},{n},{k},{ours_ms:.4},{ours_gflops:.1},,\
                 {cublas_gflops},{ratio},{},{intensity:.1},{kernel},{ops_name},row,1,single,suite,{},0",
                check.replace(',', ";"),
                plan.split_k
            );
            out.shapes.push(shape_row(RowPath::Suite, kernel, (ours_ms, ours_gflops), (plan.split_k, false), fields));
            kernel.to_string()
        }
    };

    // One line per entry (ratio: ours over cuBLAS in speed, above 1 ours is faster).
    let of_bound = bound.map_or(String::new(), |b| format!(", {:.2} of bound", b / ours_ms));
    let ratio = if refused.is_none() { format!(" ({:.2} x cuBLAS)", blas_ms / ours_ms) } else { String::new() };
    let short = check.split(" (").next().unwrap_or("");
    ctx.bar.println(format!(
        "{:<14} {:>17} {}: {:8.4} ms {:7.1} {}{ratio}{of_bound}, {ours_kernel} split {}, {short}",
        ty.title(),
        format!("{m}x{n}x{k}"),
        entry.ops_name(),
        ours_ms,
        ours_gflops / 1e3,
        ty.unit(),
        plan.split_k,
    ));
    Ok(())
}

/// BENCHMARKS.md's suite section: per type a table of every entry (ours
/// in TFLOP/s, TOP/s for i8; the ratio to cuBLAS; the time; for the
/// token-sized rows, m or n at most [`TOKEN_MAX_MN`], bound_ms / ms; the
/// kernel and split), then the geometric mean of the ratios, the lowest,
/// and the token-sized rows' median and lowest bound_ms / ms.
pub fn markdown(w: &mut String, rows: &[ShapeRow], copy_gbs: Option<f64>) {
    let ours: Vec<&ShapeRow> = rows.iter().filter(|r| r.path == RowPath::Suite).collect();
    if ours.is_empty() {
        return;
    }
    writeln!(w, "## The public shape suite: the default path beside cuBLAS, every type\n").unwrap();
    let copy = copy_gbs.map_or("-".to_string(), |g| format!("{g:.0}"));
    writeln!(
        w,
        "`Gemm::new()` (TF32 allowed for tf32; the committed default-choice table and planner) at each entry of \
         the suite, A, B and C row-major (ops `NT`: B column-major, a language model's weight stored n x k), \
         checked against cuBLAS (`?gemm` for f64 and f32, `cublasGemmEx` with the same types and compute type \
         otherwise; the elementwise bound of `gemm::check::ProductBound`), then timed beside it in \
         {SUITE_PASSES} interleaved passes of at most {PASS_REPS} runs (the median pass of each kept). x cuBLAS: \
         cuBLAS's time over ours. of bound: bound_ms / ms for the token-sized rows (m or n at most \
         {TOKEN_MAX_MN}), bound_ms being A and B read and C written once at the device's copy bandwidth \
         measured in this run, {copy} GB/s (a device-to-device copy of 1 GiB). Every row, with the bound of \
         each row up to m or n = {BOUND_MAX_MN}: `shapes.csv`.\n"
    )
    .unwrap();
    for ty in SuiteType::ALL {
        let of_type: Vec<&&ShapeRow> = ours.iter().filter(|r| r.ty == ty).collect();
        if of_type.is_empty() {
            continue;
        }
        writeln!(w, "### {}\n", ty.title()).unwrap();
        writeln!(w, "| shape | ops | {} | x cuBLAS | ms | of bound | kernel, split |", ty.unit()).unwrap();
        writeln!(w, "|---|---|---:|---:|---:|---:|---|").unwrap();
        for r in &of_type {
            let (m, n, k) = r.entry.shape;
            let wrong = if r.check.starts_with("WRONG") {
                " (WRONG)"
            } else if r.check.starts_with("unchecked") {
                " (unchecked)"
            } else {
                ""
            };
            let ratio = r.gflops / r.cublas_gflops;
            let ratio = if ratio.is_finite() { format!("{ratio:.2}") } else { "-".to_string() };
            let of_bound = match r.of_bound() {
                Some(x) if m.min(n) <= TOKEN_MAX_MN => format!("{x:.2}"),
                _ => "-".to_string(),
            };
            let packed = if r.pack { ", packed" } else { "" };
            writeln!(
                w,
                "| {} | {} | {:.2}{wrong} | {ratio} | {:.4} | {of_bound} | {}, {}{packed} |",
                shape_name((m, n, k)),
                r.entry.ops_name(),
                r.gflops / 1e3,
                r.ms,
                r.kernel,
                r.split_k
            )
            .unwrap();
        }
        writeln!(w).unwrap();
        let ratios: Vec<(f64, &ShapeRow)> = of_type
            .iter()
            .map(|r| (r.gflops / r.cublas_gflops, **r))
            .filter(|(x, _)| x.is_finite() && *x > 0.0)
            .collect();
        let name = |r: &ShapeRow| format!("{} {}", shape_name(r.entry.shape), r.entry.ops_name());
        if let Some(low) = ratios.iter().min_by(|a, b| a.0.total_cmp(&b.0)) {
            let geomean = (ratios.iter().map(|r| r.0.ln()).sum::<f64>() / ratios.len() as f64).exp();
            let refused = of_type.len() - ratios.len();
            let without =
                if refused > 0 { format!(" ({refused} without cuBLAS: it refused them)") } else { String::new() };
            writeln!(
                w,
                "- {}: geometric mean of the ratios to cuBLAS {geomean:.2} over {} rows{without}; lowest {:.2} at {}",
                ty.title(),
                ratios.len(),
                low.0,
                name(low.1)
            )
            .unwrap();
        }
        let mut bounds: Vec<(f64, &ShapeRow)> = of_type
            .iter()
            .filter(|r| r.entry.shape.0.min(r.entry.shape.1) <= TOKEN_MAX_MN)
            .filter_map(|r| Some((r.of_bound()?, **r)))
            .collect();
        if !bounds.is_empty() {
            bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
            writeln!(
                w,
                "- token-sized rows (m or n at most {TOKEN_MAX_MN}): bound_ms / ms median {:.2} over {} rows; lowest \
                 {:.2} at {}",
                bounds[bounds.len() / 2].0,
                bounds.len(),
                bounds[0].0,
                name(bounds[0].1)
            )
            .unwrap();
        }
        writeln!(w).unwrap();
    }
}
