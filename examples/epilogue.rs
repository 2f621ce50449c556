//! Fused epilogues and FP8 block scales beside cuBLASLt, in one run:
//!
//! - bf16 (`--shapes`, default 4096x4096x4096,8192x8192x8192): our plain
//!   product (`Gemm::new().run_device`) and our fused `C = GELU(A B + bias)`
//!   (`Gemm::new().epilogue(&Epilogue::new().bias(Along::Columns, ..)
//!   .activation(Activation::Gelu)).run_device`, an f32 bias per column of
//!   C), beside cuBLASLt's plain matmul and its `CUBLASLT_EPILOGUE_GELU_BIAS`
//!   ([`gemm::cublas_lt::CublasLt::matmul_bf16`] and
//!   [`gemm::cublas_lt::CublasLt::matmul_bf16_bias_gelu`], a bf16 bias of
//!   the same values: the f32 bias is rounded to bf16 first). Each line
//!   gives both libraries' times, and each library's fused overhead
//!   (fused ms / plain ms - 1) follows; then the unfused alternative, our
//!   plain product followed by a separate pass `C <- GELU(C + bias)` (the
//!   fused kernel with alpha = 0 and beta = 1: C read and written once),
//!   and that pass's bandwidth.
//! - f64 and f32 (`--ladder`, default 4096x4096x4096): our plain product
//!   and our fused bias + GELU on the ladder's fused kernels (stage 8 for
//!   f64, 7 for f32), ours only, printed (not in the CSV).
//! - e4m3 -> bf16 with DeepGEMM's block scales (`--block`, default m in
//!   {64, 128, 4096} by (n, k) in {(2112, 7168), (24576, 1536), (32768,
//!   512), (7168, 16384), (4096, 7168), (7168, 2048)}): ours
//!   (`Epilogue::new().block_scales(BlockScales::new(..))`, 1 x 128 blocks
//!   of A, 128 x 128 of B) beside cuBLASLt's 128-element / 128 x 128 block
//!   scaling ([`gemm::cublas_lt::CublasLt::matmul_fp8_block_scaled`]; its
//!   B scales converted with [`gemm::cublas_lt::cublaslt_block_scales`]
//!   where its layout differs from ours, i.e. when ceil(k / 128) is not a
//!   multiple of 4). Scales are uniform in [0.5, 2).
//! - A mixture-of-experts layer (`--moe`, default E x TOTAL x N x K in
//!   {8x8192x4096x7168, 64x16384x2048x7168}): E experts, TOTAL rows in
//!   all, skewed: expert e gets TOTAL (1 / (e + 1)) / (sum of 1 / (f + 1))
//!   rows rounded down, expert 0 the remainder (and, where every expert
//!   would get 128 rows or more, the last keeps its rows mod 128, or 64,
//!   the rest going to expert 0: some expert fills part of one tile).
//!   e4m3 -> bf16 with block scales as above, the contiguous layout: one A
//!   (TOTAL x K, row-major) holding every expert's rows, in turn, with one
//!   set of A scales (column-major over all TOTAL rows), each expert its
//!   own B (K x N, column-major) and B scales, and its own C (m_e x N).
//!   The grouped launch
//!   (`Gemm::new().run_grouped_fused_device(&a, &b, &mut c, &epilogues)`,
//!   one block-scaled epilogue per expert) is timed beside one dense
//!   block-scaled product of TOTAL x N x K (the same A and A scales,
//!   expert 0's B): the rate a dense layer of the same size gets. Both
//!   count 2 TOTAL N K flops; the ratio is dense ms / grouped ms (target:
//!   0.9 or more), and beside the experts' own dense products launched one
//!   after another (each planned by itself, the builders made before the
//!   timing; the per-expert rate a grouped launch replaces: per-expert ms /
//!   grouped ms). The difference is max |grouped - alone| / max |alone|
//!   over every expert's C, "alone" being the expert's product run by
//!   itself (`Fused::run_device` on its rows of A, with its epilogue):
//!   another launch, perhaps another tile, so not bit-equal; expect below
//!   1e-2. Then the masked layout of the same experts
//!   (`Gemm::new().run_masked_device(&a, &b, &mut c, &counts, &epilogues)`):
//!   each expert a slot of S rows (the most rows an expert has, rounded up
//!   to 128) in `[E, S, K]` A, `[E, K / 128, S]` A scales and `[E, S, N]`
//!   C, its row count on the device; its ratio is dense ms / masked ms, its
//!   difference max |masked - grouped| / max |grouped| over the counted
//!   rows, and it counts the elements written past the counts (must be 0).
//!
//! Operands are uniform random values in [-1, 1) rounded to the operand
//! type, A row-major and B column-major (both K-major, the "TN" form
//! cuBLASLt's FP8 needs), C row-major. Each side is timed with CUDA events
//! on the device's stream (`gemm::bench::time_kernel`: a warm-up, a probe,
//! then `--reps` timed runs, at least 10) and reported as the median;
//! TFLOP/s is 2mnk / s / 1e12 (the epilogue not counted), and the ratio is
//! cuBLASLt ms / ours ms (above 1: ours is faster). The difference is
//! max |ours - cuBLASLt| / max |cuBLASLt| over C (both copied back,
//! compared as f64); both round to bf16, so expect a few 1e-3. Where
//! cuBLASLt has no algorithm (`Error::Unsupported`: no block scaling
//! before cuBLAS 12.9, m or n not a multiple of 4...), its columns read
//! "n/a" and the reason follows the line.
//!
//! ```sh
//! cargo run --release --example epilogue
//! cargo run --release --example epilogue -- --shapes 4096x4096x4096 --block 128x7168x2048,4096x4096x7168 --csv benches/results
//! cargo run --release --example epilogue -- --shapes none --moe none   # the block-scaled products only
//! cargo run --release --example epilogue -- --shapes none --block none --moe 8x8192x4096x7168   # one MoE layer
//! ```
//!
//! `--csv DIR` writes `DIR/epilogue.csv` (replacing it):
//! `device,date,commit,precision,scaling,epilogue,m,n,k,c_type,ms,tflops,cublaslt_ms,cublaslt_tflops,ratio`
//! (precision `bf16` with scaling `none` and epilogue `none` or
//! `bias_gelu`; precision `e4m3` with scaling `block` and epilogue `none`;
//! cuBLASLt's columns empty where it has no algorithm). Each MoE layer
//! writes four e4m3 `block` rows with m = TOTAL and cuBLASLt's columns
//! empty: epilogue `grouped_E` (E the expert count) for the grouped launch,
//! `masked_E` for the masked one, `experts_E` for the experts' products
//! launched one after another (each planned alone; timed together) and
//! `none` for the dense product.

use gemm::bench::{commit, time_kernel, today_utc};
use gemm::cublas_lt::{cublaslt_block_scales, CublasLt};
use gemm::cudarc::driver::CudaSlice;
use gemm::float8::F8E4M3;
use gemm::half::bf16;
use gemm::{Activation, Along, BlockScales, Device, DeviceMatrix, Epilogue, Error, Gemm, Layout, Matrix, Op, Scalar};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::exit;
use std::sync::Arc;

const USAGE: &str = "usage: epilogue [--shapes MxNxK,...|none] [--ladder MxNxK,...|none] [--block MxNxK,...|none] \
                     [--moe EXPERTSxTOTALxNxK,...|none] [--reps N (>= 10)] [--csv DIR]";
const CSV_HEAD: &str =
    "device,date,commit,precision,scaling,epilogue,m,n,k,c_type,ms,tflops,cublaslt_ms,cublaslt_tflops,ratio";

/// DeepGEMM's (n, k) of its normal-GEMM benchmark, each with m in 64, 128, 4096.
const DEEPGEMM_NK: [(usize, usize); 6] =
    [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)];

type Shape = (usize, usize, usize);

/// A mixture-of-experts layer: experts, rows in all, n, k.
type Moe = (usize, usize, usize, usize);

struct Options {
    shapes: Vec<Shape>,
    ladder: Vec<Shape>,
    block: Vec<Shape>,
    moe: Vec<Moe>,
    reps: usize,
    csv: Option<PathBuf>,
}

fn options() -> Options {
    let block = [64, 128, 4096].iter().flat_map(|&m| DEEPGEMM_NK.iter().map(move |&(n, k)| (m, n, k))).collect();
    let mut o = Options {
        shapes: shapes("4096x4096x4096,8192x8192x8192"),
        ladder: shapes("4096x4096x4096"),
        block,
        moe: moes("8x8192x4096x7168,64x16384x2048x7168"),
        reps: 20,
        csv: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--shapes" => o.shapes = shapes(&value()),
            "--ladder" => o.ladder = shapes(&value()),
            "--block" => o.block = shapes(&value()),
            "--moe" => o.moe = moes(&value()),
            "--reps" => o.reps = value().parse().ok().filter(|&r| r >= 10).unwrap_or_else(|| usage()),
            "--csv" => o.csv = Some(PathBuf::from(value())),
            "--help" | "-h" => {
                println!("{USAGE}");
                exit(0)
            }
            _ => usage(),
        }
    }
    o
}

/// `MxNxK,...`, or `none` for no shapes.
fn shapes(list: &str) -> Vec<Shape> {
    if list == "none" {
        return Vec::new();
    }
    let shape = |s: &str| match s.split('x').map(str::parse).collect::<Result<Vec<usize>, _>>().as_deref() {
        Ok(&[m, n, k]) if m > 0 && n > 0 && k > 0 => (m, n, k),
        _ => usage(),
    };
    list.split(',').map(shape).collect()
}

/// `EXPERTSxTOTALxNxK,...`, or `none` for no layers.
fn moes(list: &str) -> Vec<Moe> {
    if list == "none" {
        return Vec::new();
    }
    let moe = |s: &str| match s.split('x').map(str::parse).collect::<Result<Vec<usize>, _>>().as_deref() {
        Ok(&[e, total, n, k]) if e > 0 && total > 0 && n > 0 && k > 0 => (e, total, n, k),
        _ => usage(),
    };
    list.split(',').map(moe).collect()
}

fn usage() -> ! {
    eprintln!("{USAGE}");
    exit(2)
}

/// One measured pair: ours and cuBLASLt's (`None`: it has no algorithm).
struct Row {
    precision: &'static str,
    scaling: &'static str,
    epilogue: String,
    shape: Shape,
    ms: f64,
    cublaslt_ms: Option<f64>,
}

fn tflops((m, n, k): Shape, ms: f64) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64 / (ms * 1e-3) / 1e12
}

/// Times `f` as `time_kernel` does; `None` (with the reason, to print)
/// when cuBLASLt answers [`Error::Unsupported`].
fn time_cublaslt(
    device: &Device,
    reps: usize,
    f: impl FnMut(usize) -> Result<(), Error>,
) -> Result<Result<f64, String>, Error> {
    match time_kernel(device, f64::INFINITY, reps, f) {
        Ok(t) => Ok(Ok(t.median_ms)),
        Err(e @ Error::Unsupported { .. }) => Ok(Err(e.to_string())),
        Err(e) => Err(e),
    }
}

/// max |ours - theirs| / max |theirs| over C, both copied back.
fn difference<C: Scalar>(ours: &DeviceMatrix<C>, theirs: &DeviceMatrix<C>) -> Result<f64, Error> {
    let (diff, scale) = diff_and_scale(ours, theirs)?;
    Ok(diff / scale.max(f64::MIN_POSITIVE))
}

/// (max |ours - theirs|, max |theirs|) over C, both copied back.
fn diff_and_scale<C: Scalar>(ours: &DeviceMatrix<C>, theirs: &DeviceMatrix<C>) -> Result<(f64, f64), Error> {
    let (ours, theirs) = (ours.to_host()?, theirs.to_host()?);
    let (mut diff, mut scale) = (0.0f64, 0.0f64);
    for i in 0..ours.rows() {
        for j in 0..ours.cols() {
            let (x, y) = (ours[(i, j)].as_f64(), theirs[(i, j)].as_f64());
            diff = diff.max((x - y).abs());
            scale = scale.max(y.abs());
        }
    }
    Ok((diff, scale))
}

/// The line of one measured pair (with the difference where cuBLASLt ran),
/// and the reason where it did not.
fn print_row(label: &str, row: &Row, theirs: &Result<f64, String>, diff: Option<f64>) {
    let (m, n, k) = row.shape;
    let mut line = format!(
        "{m:>6} x {n:>6} x {k:>6}  {label:<9}  ours {:>8.3} ms {:>7.1} TFLOP/s  ",
        row.ms,
        tflops(row.shape, row.ms)
    );
    match (theirs, diff) {
        (Ok(ms), Some(diff)) => write!(
            line,
            "cuBLASLt {ms:>8.3} ms {:>7.1} TFLOP/s  ratio {:.3}  max|diff|/max|C| {diff:.2e}",
            tflops(row.shape, *ms),
            ms / row.ms
        ),
        _ => write!(line, "cuBLASLt {:>8} ms {:>7} TFLOP/s  ratio {:>5}", "n/a", "n/a", "n/a"),
    }
    .expect("writing to a String");
    println!("{line}");
    if let Err(why) = theirs {
        println!("{:24}cuBLASLt: {why}", "");
    }
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

/// As [`random`], densely packed, filled in parallel: chunks of 2^20
/// elements, each from its own generator seeded by `seed` and its index
/// (the same values whatever the thread count). For the MoE layers' large
/// operands.
fn random_par<T: Scalar + Send>(rows: usize, cols: usize, col_major: bool, seed: u64) -> Matrix<T> {
    let mut data = vec![T::from_f64(0.0); rows * cols];
    data.par_chunks_mut(1 << 20).enumerate().for_each(|(i, chunk)| {
        let mut rng = StdRng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        chunk.iter_mut().for_each(|x| *x = T::from_f64(rng.random_range(-1.0..1.0)));
    });
    let (layout, ld) = if col_major { (Layout::ColMajor, rows) } else { (Layout::RowMajor, cols) };
    Matrix::from_vec_in(rows, cols, layout, ld.max(1), data).expect("a packed matrix of its own size")
}

/// The f64 or f32 product of one shape on the ladder (ours only): plain,
/// and fused with a bias per column and GELU, and the fused overhead.
fn ladder_shape<T: Scalar + gemm::Product<T>>(
    device: &Arc<Device>,
    shape: Shape,
    reps: usize,
    rng: &mut StdRng,
) -> Result<(), Error> {
    let (m, n, k) = shape;
    let a = DeviceMatrix::from_host(device, &random::<T>(m, k, false, rng))?;
    let b = DeviceMatrix::from_host(device, &random::<T>(k, n, true, rng))?;
    let bias: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let bias_dev: CudaSlice<f32> = device.stream().clone_htod(&bias)?;
    let mut c = DeviceMatrix::<T>::zeros(device, m, n)?;
    let gemm = Gemm::new();
    let plain = time_kernel(device, f64::INFINITY, reps, |_| gemm.run_device(&a, &b, &mut c))?.median_ms;
    let e = Epilogue::new().bias(Along::Columns, &bias_dev).activation(Activation::Gelu);
    let fused = gemm.epilogue(&e);
    let fused_ms = time_kernel(device, f64::INFINITY, reps, |_| fused.run_device(&a, &b, &mut c))?.median_ms;
    // The fused kernel with an empty epilogue: its tile and operands (read
    // as the fused plan says) doing the plain product's work.
    let empty = Epilogue::new();
    let bare = gemm.epilogue(&empty);
    let bare_ms = time_kernel(device, f64::INFINITY, reps, |_| bare.run_device(&a, &b, &mut c))?.median_ms;
    let name = T::NAME;
    // The plans of these operands: B column-major is op(B) = B^T of a
    // row-major n x k matrix.
    let described = Gemm::new().op_b(Op::T);
    let fused_plan = described.epilogue(&e).plan_for::<T, T>(m, n, k);
    println!(
        "{name} {m}x{n}x{k}: plain {plain:.3} ms ({:.1} TFLOP/s; {}), the fused kernel with an empty epilogue \
         {bare_ms:.3} ms, bias+GELU fused {fused_ms:.3} ms ({:+.1}% over plain, {:+.1}% over the empty epilogue; {})",
        tflops(shape, plain),
        described.plan_for::<T, T>(m, n, k).map(|p| p.to_string()).unwrap_or_default(),
        (fused_ms / plain - 1.0) * 100.0,
        (fused_ms / bare_ms - 1.0) * 100.0,
        fused_plan.map(|p| p.why).unwrap_or_default()
    );
    Ok(())
}

/// The bf16 products of one shape: plain and with bias and GELU, ours and
/// cuBLASLt's.
fn bf16_shape(
    device: &Arc<Device>,
    lt: &CublasLt,
    shape: Shape,
    reps: usize,
    rng: &mut StdRng,
) -> Result<[Row; 3], Error> {
    let (m, n, k) = shape;
    let a = DeviceMatrix::from_host(device, &random::<bf16>(m, k, false, rng))?;
    let b = DeviceMatrix::from_host(device, &random::<bf16>(k, n, true, rng))?;
    // One bias for both: bf16 values (cuBLASLt's bias type), and the same
    // values in f32 for ours.
    let bias: Vec<bf16> = (0..n).map(|_| bf16::from_f64(rng.random_range(-1.0..1.0))).collect();
    let bias_f32: Vec<f32> = bias.iter().map(|x| x.to_f32()).collect();
    let bias_dev: CudaSlice<bf16> = device.stream().clone_htod(&bias)?;
    let bias_f32_dev: CudaSlice<f32> = device.stream().clone_htod(&bias_f32)?;
    let mut ours = DeviceMatrix::<bf16>::zeros(device, m, n)?;
    let mut theirs = DeviceMatrix::<bf16>::zeros(device, m, n)?;
    let gemm = Gemm::new();

    // An infinite budget: exactly `reps` timed runs after the warm-up and probe.
    let plain = time_kernel(device, f64::INFINITY, reps, |_| gemm.run_device(&a, &b, &mut ours))?.median_ms;
    let lt_plain = time_cublaslt(device, reps, |_| lt.matmul_bf16(&a, &b, &mut theirs))?;
    let plain_diff = if lt_plain.is_ok() { Some(difference(&ours, &theirs)?) } else { None };
    let plain_row = Row {
        precision: "bf16",
        scaling: "none",
        epilogue: "none".into(),
        shape,
        ms: plain,
        cublaslt_ms: lt_plain.clone().ok(),
    };
    print_row("plain", &plain_row, &lt_plain, plain_diff);

    let e = Epilogue::new().bias(Along::Columns, &bias_f32_dev).activation(Activation::Gelu);
    let fused = gemm.epilogue(&e);
    let fused_ms = time_kernel(device, f64::INFINITY, reps, |_| fused.run_device(&a, &b, &mut ours))?.median_ms;
    let lt_fused = time_cublaslt(device, reps, |_| lt.matmul_bf16_bias_gelu(&a, &b, &mut theirs, &bias_dev))?;
    let fused_diff = if lt_fused.is_ok() { Some(difference(&ours, &theirs)?) } else { None };
    let fused_row = Row {
        precision: "bf16",
        scaling: "none",
        epilogue: "bias_gelu".into(),
        shape,
        ms: fused_ms,
        cublaslt_ms: lt_fused.clone().ok(),
    };
    print_row("bias+GELU", &fused_row, &lt_fused, fused_diff);

    // The fused kernel with an empty epilogue: the fused product's tile
    // and kernel doing the plain product's work, to split the overhead
    // into the tile's share and the epilogue's.
    let empty = Epilogue::new();
    let bare = gemm.epilogue(&empty);
    let bare_ms = time_kernel(device, f64::INFINITY, reps, |_| bare.run_device(&a, &b, &mut ours))?.median_ms;
    println!(
        "{:24}the fused kernel with an empty epilogue: {bare_ms:.3} ms ({}: {:+.1}% over plain)",
        "",
        Gemm::new()
            .op_b(Op::T)
            .epilogue(&empty)
            .plan_for::<bf16, bf16>(m, n, k)
            .map(|p| p.to_string())
            .unwrap_or_default(),
        (bare_ms / plain - 1.0) * 100.0
    );
    let overhead = |fused: f64, plain: f64| format!("{:+.1}%", (fused / plain - 1.0) * 100.0);
    let theirs = match (&lt_fused, &lt_plain) {
        (Ok(f), Ok(p)) => overhead(*f, *p),
        _ => "n/a".into(),
    };
    println!(
        "{:24}fused overhead (fused ms / plain ms - 1): ours {}, cuBLASLt {theirs}",
        "",
        overhead(fused_ms, plain)
    );

    // The unfused alternative: the plain product, then a separate pass
    // C <- GELU(C + bias) (our fused kernel with alpha = 0 and beta = 1
    // reads no A or B: one read and one write of C).
    let pass = gemm.clone().alpha(0.0).beta(1.0);
    let pass = pass.epilogue(&e);
    let pass_ms = time_kernel(device, f64::INFINITY, reps, |_| pass.run_device(&a, &b, &mut ours))?.median_ms;
    let two_ms = time_kernel(device, f64::INFINITY, reps, |_| {
        gemm.run_device(&a, &b, &mut ours)?;
        pass.run_device(&a, &b, &mut ours)
    })?
    .median_ms;
    let c_bytes = 2.0 * (m * n * std::mem::size_of::<bf16>()) as f64;
    println!(
        "{:24}plain + separate bias+GELU pass: {two_ms:.3} ms (the pass alone {pass_ms:.3} ms, {:.0} GB/s of C \
         read and written); fused {fused_ms:.3} ms: {}",
        "",
        c_bytes / (pass_ms * 1e-3) / 1e9,
        if fused_ms < two_ms { "the fused product is faster" } else { "the fused product is slower" }
    );
    let two_row = Row {
        precision: "bf16",
        scaling: "none",
        epilogue: "plain_then_bias_gelu_pass".into(),
        shape,
        ms: two_ms,
        cublaslt_ms: None,
    };
    Ok([plain_row, fused_row, two_row])
}

/// The block-scaled e4m3 -> bf16 product of one shape, ours and cuBLASLt's.
fn block_shape(device: &Arc<Device>, lt: &CublasLt, shape: Shape, reps: usize, rng: &mut StdRng) -> Result<Row, Error> {
    let (m, n, k) = shape;
    let a = DeviceMatrix::from_host(device, &random::<F8E4M3>(m, k, false, rng))?;
    let b = DeviceMatrix::from_host(device, &random::<F8E4M3>(k, n, true, rng))?;
    // Our (DeepGEMM's) layouts: A's scale of row i and k block kb at
    // kb * m + i, B's of column block jb and k block kb at jb * ceil(k / 128) + kb.
    let (k_blocks, n_blocks) = (k.div_ceil(128), n.div_ceil(128));
    let mut scales = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.random_range(0.5..2.0)).collect() };
    let (a_scales, b_scales) = (scales(m * k_blocks), scales(n_blocks * k_blocks));
    let a_scales_dev: CudaSlice<f32> = device.stream().clone_htod(&a_scales)?;
    let b_scales_dev: CudaSlice<f32> = device.stream().clone_htod(&b_scales)?;
    // cuBLASLt reads A's scales as ours; B's with ceil(k / 128) padded to a
    // multiple of 4: the same buffer when it already is one.
    let (_, lt_b_scales) = cublaslt_block_scales(m, n, k, &a_scales, &b_scales)?;
    let lt_b_scales_dev = if lt_b_scales == b_scales { None } else { Some(device.stream().clone_htod(&lt_b_scales)?) };
    let lt_b_scales_dev = lt_b_scales_dev.as_ref().unwrap_or(&b_scales_dev);

    let mut ours = DeviceMatrix::<bf16>::zeros(device, m, n)?;
    let mut theirs = DeviceMatrix::<bf16>::zeros(device, m, n)?;
    let gemm = Gemm::new();
    let e = Epilogue::new().block_scales(BlockScales::new(&a_scales_dev, &b_scales_dev));
    let fused = gemm.epilogue(&e);
    let ms = time_kernel(device, f64::INFINITY, reps, |_| fused.run_device(&a, &b, &mut ours))?.median_ms;
    let lt_ms = time_cublaslt(device, reps, |_| {
        lt.matmul_fp8_block_scaled(&a, &b, &mut theirs, &a_scales_dev, lt_b_scales_dev)
    })?;
    let diff = if lt_ms.is_ok() { Some(difference(&ours, &theirs)?) } else { None };
    let row = Row {
        precision: "e4m3",
        scaling: "block",
        epilogue: "none".into(),
        shape,
        ms,
        cublaslt_ms: lt_ms.clone().ok(),
    };
    print_row("block", &row, &lt_ms, diff);
    Ok(row)
}

/// The skewed row counts of `experts` experts, `total` in all: expert e
/// gets `total (1 / (e + 1)) / H` rows rounded down (H the sum of the
/// weights), expert 0 the remainder; where every expert would get 128 rows
/// or more, the last keeps its rows mod 128 (64 for a multiple of 128),
/// the rest going to expert 0, so that one fills part of a tile only.
fn expert_rows(experts: usize, total: usize) -> Vec<usize> {
    let h: f64 = (1..=experts).map(|e| 1.0 / e as f64).sum();
    let mut rows: Vec<usize> = (0..experts).map(|e| (total as f64 / ((e + 1) as f64 * h)).floor() as usize).collect();
    // Rounded down, the shares of experts 1.. sum to at most total.
    rows[0] = total - rows[1..].iter().sum::<usize>();
    if experts > 1 && rows.iter().all(|&m| m >= 128) {
        let last = rows[experts - 1];
        let keep = if last % 128 == 0 { 64 } else { last % 128 };
        rows[experts - 1] = keep;
        rows[0] += last - keep;
    }
    debug_assert_eq!(rows.iter().sum::<usize>(), total);
    rows
}

/// One mixture-of-experts layer, e4m3 -> bf16 with block scales: the
/// grouped launch over its experts and the dense product of the same total
/// size, with the grouped results checked against each expert's product
/// run alone.
fn moe_layer(device: &Arc<Device>, moe: Moe, reps: usize, rng: &mut StdRng) -> Result<[Row; 4], Error> {
    let (experts, total, n, k) = moe;
    let rows = expert_rows(experts, total);
    let first_rows: Vec<usize> = rows.iter().scan(0, |at, &m| Some(std::mem::replace(at, *at + m))).collect();
    let small = rows.iter().filter(|&&m| m < 128).count();
    println!(
        "{experts} experts, {total} rows: {} .. {} rows per expert, {small} below 128",
        rows.iter().max().unwrap_or(&0),
        rows.iter().min().unwrap_or(&0)
    );

    let (k_blocks, n_blocks) = (k.div_ceil(128), n.div_ceil(128));
    let ha = random_par::<F8E4M3>(total, k, false, rng.random());
    let da = DeviceMatrix::from_host(device, &ha)?;
    let mut dbs = Vec::with_capacity(experts);
    for _ in 0..experts {
        dbs.push(DeviceMatrix::from_host(device, &random_par::<F8E4M3>(k, n, true, rng.random()))?);
    }
    // A's scales column-major over all rows (row i, k block kb at kb * total
    // + i); each expert's B scales in the default layout.
    let mut scales = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.random_range(0.5..2.0)).collect() };
    let sa = scales(total * k_blocks);
    let d_sa: CudaSlice<f32> = device.stream().clone_htod(&sa)?;
    let mut d_sbs: Vec<CudaSlice<f32>> = Vec::with_capacity(experts);
    for _ in 0..experts {
        d_sbs.push(device.stream().clone_htod(&scales(n_blocks * k_blocks))?);
    }
    let mut dcs = Vec::with_capacity(experts);
    for &m in &rows {
        dcs.push(DeviceMatrix::<bf16>::zeros(device, m, n)?);
    }
    let epilogues: Vec<Epilogue> = first_rows
        .iter()
        .zip(&d_sbs)
        .map(|(&r0, sb)| Epilogue::new().block_scales(BlockScales::new(d_sa.slice(r0..), sb).a_strides(1, total)))
        .collect();

    let gemm = Gemm::new();
    let grouped_ms = {
        let av = rows.iter().zip(&first_rows).map(|(&m, &r0)| da.view(r0, 0, m, k)).collect::<Result<Vec<_>, _>>()?;
        let bv: Vec<_> = dbs.iter().map(DeviceMatrix::as_view).collect();
        let mut cv: Vec<_> = dcs.iter_mut().map(DeviceMatrix::as_view_mut).collect();
        time_kernel(device, f64::INFINITY, reps, |_| gemm.run_grouped_fused_device(&av, &bv, &mut cv, &epilogues))?
            .median_ms
    };

    // The masked layout of the same experts: a slot of `slot` rows each
    // (the most rows an expert has, rounded up to 128), A and its scales
    // `[experts, slot, k]` and `[experts, k / 128, slot]` (the rows past
    // an expert's count zero, scales one), C `[experts, slot, n]`, the
    // counts on the device.
    let slot = rows.iter().max().copied().unwrap_or(0).div_ceil(128).max(1) * 128;
    let mut a_slots = vec![F8E4M3::from_f64(0.0); experts * slot * k];
    let mut sa_slots = vec![1f32; experts * k_blocks * slot];
    for (e, (&m, &r0)) in rows.iter().zip(&first_rows).enumerate() {
        a_slots[e * slot * k..][..m * k].copy_from_slice(&ha.as_slice()[r0 * k..][..m * k]);
        for q in 0..k_blocks {
            sa_slots[(e * k_blocks + q) * slot..][..m].copy_from_slice(&sa[q * total + r0..][..m]);
        }
    }
    let a_slots = Matrix::from_vec_in(experts * slot, k, Layout::RowMajor, k, a_slots).expect("the slots' shape");
    let da_slots = DeviceMatrix::from_host(device, &a_slots)?;
    drop(a_slots);
    let d_sa_slots = device.stream().clone_htod(&sa_slots)?;
    let counts: Vec<u32> = rows.iter().map(|&m| m as u32).collect();
    let d_counts = device.stream().clone_htod(&counts)?;
    let mut c_slots = Vec::with_capacity(experts);
    for _ in 0..experts {
        c_slots.push(DeviceMatrix::<bf16>::zeros(device, slot, n)?);
    }
    let masked_epilogues: Vec<Epilogue> = (0..experts)
        .map(|e| {
            let sa_e = d_sa_slots.slice(e * k_blocks * slot..);
            Epilogue::new().block_scales(BlockScales::new(sa_e, &d_sbs[e]).a_strides(1, slot))
        })
        .collect();
    let masked_ms = {
        let av = (0..experts).map(|e| da_slots.view(e * slot, 0, slot, k)).collect::<Result<Vec<_>, _>>()?;
        let bv: Vec<_> = dbs.iter().map(DeviceMatrix::as_view).collect();
        let mut cv: Vec<_> = c_slots.iter_mut().map(DeviceMatrix::as_view_mut).collect();
        let counts = d_counts.as_view();
        time_kernel(device, f64::INFINITY, reps, |_| {
            gemm.run_masked_device(&av, &bv, &mut cv, &counts, &masked_epilogues)
        })?
        .median_ms
    };
    drop(da_slots);
    // The masked results against the grouped ones (the counted rows; the
    // rest of each slot must still be zero).
    let (mut masked_diff, mut masked_scale, mut written) = (0.0f64, 0.0f64, 0usize);
    for (e, &m) in rows.iter().enumerate() {
        let (x, y) = (c_slots[e].to_host()?, dcs[e].to_host()?);
        for i in 0..slot {
            for j in 0..n {
                if i < m {
                    masked_diff = masked_diff.max((x[(i, j)].as_f64() - y[(i, j)].as_f64()).abs());
                    masked_scale = masked_scale.max(y[(i, j)].as_f64().abs());
                } else {
                    written += (x[(i, j)].to_bits() != 0) as usize;
                }
            }
        }
    }
    drop(c_slots);
    let masked_diff = masked_diff / masked_scale.max(f64::MIN_POSITIVE);

    // The dense product of the same size: all of A, expert 0's B.
    let mut dense_c = DeviceMatrix::<bf16>::zeros(device, total, n)?;
    let dense_e = Epilogue::new().block_scales(BlockScales::new(&d_sa, &d_sbs[0]));
    let dense = gemm.epilogue(&dense_e);
    let dense_ms =
        time_kernel(device, f64::INFINITY, reps, |_| dense.run_device(&da, &dbs[0], &mut dense_c))?.median_ms;
    drop(dense_c);

    // Each expert alone, with its own epilogue, beside its grouped result;
    // then the experts' dense products one after another on the stream,
    // timed as one (the per-expert baseline a grouped launch replaces).
    let (mut diff, mut scale) = (0.0f64, 0.0f64);
    let mut alone = Vec::with_capacity(experts);
    for (e, (&m, &r0)) in rows.iter().zip(&first_rows).enumerate() {
        let mut c = DeviceMatrix::<bf16>::zeros(device, m, n)?;
        if m > 0 {
            gemm.epilogue(&epilogues[e]).run_device(da.view(r0, 0, m, k)?, &dbs[e], &mut c)?;
            let (d, s) = diff_and_scale(&dcs[e], &c)?;
            (diff, scale) = (diff.max(d), scale.max(s));
        }
        alone.push(c);
    }
    let diff = diff / scale.max(f64::MIN_POSITIVE);
    let per_expert_ms = {
        let builders: Vec<_> = epilogues.iter().map(|e| gemm.epilogue(e)).collect();
        time_kernel(device, f64::INFINITY, reps, |_| {
            for (e, (&m, &r0)) in rows.iter().zip(&first_rows).enumerate() {
                if m > 0 {
                    builders[e].run_device(da.view(r0, 0, m, k)?, &dbs[e], &mut alone[e])?;
                }
            }
            Ok(())
        })?
        .median_ms
    };
    drop(alone);

    let shape = (total, n, k);
    let label = format!("grouped_{experts}");
    println!(
        "{total:>6} x {n:>6} x {k:>6}  {label:<9}  ours {grouped_ms:>8.3} ms {:>7.1} TFLOP/s  dense {dense_ms:>8.3} ms \
         {:>7.1} TFLOP/s  ratio {:.3}  max|diff|/max|C| {diff:.2e}",
        tflops(shape, grouped_ms),
        tflops(shape, dense_ms),
        dense_ms / grouped_ms
    );
    let masked = format!("masked_{experts}");
    println!(
        "{total:>6} x {n:>6} x {k:>6}  {masked:<9}  ours {masked_ms:>8.3} ms {:>7.1} TFLOP/s  (slots of {slot} rows)  \
         ratio {:.3}  max|masked - grouped|/max|C| {masked_diff:.2e}  uncounted elements written: {written}",
        tflops(shape, masked_ms),
        dense_ms / masked_ms
    );
    let per_expert = format!("experts_{experts}");
    println!(
        "{total:>6} x {n:>6} x {k:>6}  {per_expert:<9}  ours {per_expert_ms:>8.3} ms {:>7.1} TFLOP/s  (each expert's \
         product alone, one after another)  grouped / per-expert rate {:.3}",
        tflops(shape, per_expert_ms),
        per_expert_ms / grouped_ms
    );
    let row =
        |epilogue: String, ms: f64| Row { precision: "e4m3", scaling: "block", epilogue, shape, ms, cublaslt_ms: None };
    Ok([row(label, grouped_ms), row(masked, masked_ms), row(per_expert, per_expert_ms), row("none".into(), dense_ms)])
}

fn main() -> Result<(), Error> {
    let o = options();
    let device = gemm::default_device()?;
    let lt = CublasLt::new(&device)?;
    let (major, minor) = device.compute_capability();
    println!(
        "device: {} (sm_{major}{minor}, {} SMs), cuBLASLt {}, {}",
        device.name(),
        device.sm_count(),
        lt.version(),
        today_utc()
    );
    println!("A row-major, B column-major, C row-major bf16; median of {} runs; ratio: cuBLASLt ms / ours ms", o.reps);
    let mut rng = StdRng::seed_from_u64(9);
    let mut rows = Vec::new();
    if !o.shapes.is_empty() {
        println!("bf16 x bf16 -> bf16: plain, and GELU(A B + bias) with a bias per column of C");
    }
    for &shape in &o.shapes {
        rows.extend(bf16_shape(&device, &lt, shape, o.reps, &mut rng)?);
    }
    for &shape in &o.ladder {
        ladder_shape::<f64>(&device, shape, o.reps, &mut rng)?;
        ladder_shape::<f32>(&device, shape, o.reps, &mut rng)?;
    }
    if !o.block.is_empty() {
        println!("e4m3 x e4m3 -> bf16 with block scales: 1 x 128 of A, 128 x 128 of B");
    }
    for &shape in &o.block {
        rows.push(block_shape(&device, &lt, shape, o.reps, &mut rng)?);
    }
    if !o.moe.is_empty() {
        println!(
            "mixture of experts, e4m3 x e4m3 -> bf16 with block scales: the grouped launch (ours) beside one dense \
             product of the same total size (dense); ratio: dense ms / grouped ms"
        );
    }
    for &moe in &o.moe {
        rows.extend(moe_layer(&device, moe, o.reps, &mut rng)?);
    }
    if let Some(dir) = &o.csv {
        let (dev, date, commit) = (device.name().replace([',', '\n'], ";"), today_utc(), commit());
        let mut text = format!("{CSV_HEAD}\n");
        for r in &rows {
            let (m, n, k) = r.shape;
            let theirs = match r.cublaslt_ms {
                Some(ms) => format!("{ms:.4},{:.1},{:.4}", tflops(r.shape, ms), ms / r.ms),
                None => ",,".into(),
            };
            writeln!(
                text,
                "{dev},{date},{commit},{},{},{},{m},{n},{k},bf16,{:.4},{:.1},{theirs}",
                r.precision,
                r.scaling,
                r.epilogue,
                r.ms,
                tflops(r.shape, r.ms)
            )
            .expect("writing to a String");
        }
        let path = dir.join("epilogue.csv");
        match std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, text)) {
            Ok(()) => println!("wrote {}", path.display()),
            Err(e) => {
                eprintln!("epilogue: {}: {e}", path.display());
                exit(2)
            }
        }
    }
    Ok(())
}
