//! Cold start: how long a user waits, in a fresh process, for the first
//! result of each kind of product, beside cuBLAS.
//!
//! Each step is one product on host matrices (64 x 64 x 64 unless named),
//! timed to the return of the call (C copied back), and printed as
//! `step,seconds`, the seconds counted from the creation of the process:
//! on Linux from the kernel's record of the process start (`starttime` in
//! /proc/self/stat against /proc/uptime, both in 10 ms ticks), so that exec,
//! dynamic loading and all else before `main` is included (to about 10 ms);
//! without /proc, from the start of `main`. The steps, in order:
//!
//! | step | what |
//! |---|---|
//! | `main` | process start to `main` (the binary's loading) |
//! | `context` | `gemm::default_device()`: the CUDA context (cuBLAS: context and handle) |
//! | `dgemm` | `gemm::dgemm`, f64 |
//! | `sgemm_col_major` | f32, A and B column-major |
//! | `tf32` | f32 on TF32 tensor cores, `Gemm::new().allow_tf32(true)` |
//! | `f16_f32`, `bf16_bf16`, `i8_i32` | operand and C types |
//! | `strided_batch` | 8 f32 products in one call, `Gemm::run_strided` |
//! | `largest_kernel` | f16 x f16 -> f32 at 4096 x 4096 x 4096: the default path's largest kernel (on Hopper stage 9's 128 x 256 tile) |
//! | `largest_dgemm` | `gemm::dgemm` at 4096 x 4096 x 4096 |
//!
//! The kernels of the two largest steps, as the planner chose them, are
//! printed after the steps. Device memory (`cuMemGetInfo`, after freeing
//! every buffer and trimming the driver's memory pool; it counts the whole
//! GPU, so run alone): `kernel_memory_mib` (cuBLAS: `cublas_memory_mib`) is
//! the memory in use after the 64 x 64 x 64 steps beyond what it was right
//! after the context opened: the loaded kernels, and the small working
//! memory kept between calls (ours: the host path's device workspace;
//! cuBLAS: its handle's workspace). `memory_after_all_mib` is the same after
//! all steps, with the workspace kept for the 4096 products.
//!
//! Inputs are small random integers, so every product is exact: each result
//! is compared with the CPU's after all steps (the checks are not timed),
//! and a wrong one exits non-zero.
//!
//! ```sh
//! CUDA_CACHE_DISABLE=1 cargo run --release --example cold_start               # ours
//! CUDA_CACHE_DISABLE=1 cargo run --release --example cold_start -- --cublas   # cuBLAS (through cudarc)
//! cargo run --release --example cold_start -- --csv benches/results/cold_start.csv
//! ```
//!
//! `--csv PATH` runs both as fresh child processes with the driver's JIT
//! cache off (`CUDA_CACHE_DISABLE=1`), prints the table with the ratio, and
//! appends to PATH (`device,date,commit,step,ours_s,cublas_s`; the memory
//! rows hold MiB). Without `CUDA_CACHE_DISABLE=1`, a PTX kernel compiled by
//! an earlier run may come from the driver's cache: a warm start.

use gemm::check::Reference;
use gemm::cudarc::cublas::result::CublasError;
use gemm::cudarc::cublas::sys::{cublasComputeType_t as Compute, cublasOperation_t as BlasOp, cudaDataType};
use gemm::cudarc::cublas::{CudaBlas, Gemm as BlasGemm, GemmConfig, StridedBatchedConfig};
use gemm::cudarc::driver::{result, sys, CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr};
use gemm::half::{bf16, f16};
use gemm::tuning::{mma_kernel, warpgroup_plan, WgmmaTypes};
use gemm::{Device, Gemm, Layout, MatRef, Matrix, Precision, Scalar, Strided};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::error::Error;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

type Result<T = (), E = Box<dyn Error>> = std::result::Result<T, E>;

/// The small products' size, the largest's, and the batch's count.
const N: usize = 64;
const BIG: usize = 4096;
const BATCH: usize = 8;

fn main() {
    let clock = Clock::start();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let done = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => ours(&clock),
        ["--cublas"] => cublas(&clock),
        ["--csv", path] => both(path),
        _ => Err("usage: cold_start [--cublas | --csv PATH]".into()),
    };
    if let Err(e) = done {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// Seconds since the process was created.
struct Clock {
    main: Instant,
    before_main: f64,
}

impl Clock {
    fn start() -> Self {
        Clock { main: Instant::now(), before_main: before_main().unwrap_or(0.0) }
    }

    /// Prints `step,seconds since the process was created`.
    fn step(&self, step: &str) {
        println!("{step},{:.3}", self.before_main + self.main.elapsed().as_secs_f64());
    }
}

/// Seconds from the creation of this process to now, from Linux's /proc:
/// field 22 of /proc/self/stat (`starttime`, in clock ticks since boot,
/// 100 a second on Linux) against /proc/uptime.
fn before_main() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which ends with the last ')': state is 3, starttime 22.
    let ticks: f64 = stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()?;
    let uptime: f64 = std::fs::read_to_string("/proc/uptime").ok()?.split_whitespace().next()?.parse().ok()?;
    Some((uptime - ticks / 100.0).max(0.0))
}

/// A `rows x cols` matrix in `layout` of random integers in [-2, 2]: every
/// product below is exact (|C| <= 4k: 256 at k = 64, within bf16's exact
/// integers; 16384 at k = 4096, within f32's).
fn ints<T: Scalar>(rows: usize, cols: usize, layout: Layout, seed: u64) -> Matrix<T> {
    let mut rng = StdRng::seed_from_u64(seed);
    Matrix::from_fn_in(rows, cols, layout, |_, _| T::from_f64(rng.random_range(-2i32..=2) as f64))
}

/// Ok when C = A B exactly, A B computed on the CPU in f64.
fn exact<'a, 'b, 'c, T: Scalar, C: Scalar>(
    a: impl Into<MatRef<'a, T>>,
    b: impl Into<MatRef<'b, T>>,
    c: impl Into<MatRef<'c, C>>,
) -> Result {
    let (a, b, c) = (a.into(), b.into(), c.into());
    let want = Reference::new_mixed(1.0, a, b, 0.0, c);
    for i in 0..c.rows() {
        for j in 0..c.cols() {
            let (got, want) = (c.get(i, j).map_or(f64::NAN, Scalar::as_f64), want.value[i * want.n + j]);
            if got != want {
                return Err(format!("C[{i}, {j}] = {got}, expected {want}").into());
            }
        }
    }
    Ok(())
}

/// [`exact`] for each product of packed batches of N x N matrices in `layout`.
fn exact_batch<T: Scalar>(a: &[T], b: &[T], c: &[T], layout: Layout) -> Result {
    let n2 = N * N;
    (0..BATCH).try_for_each(|i| {
        let [a, b, c] = [a, b, c].map(|x| MatRef::from_slice(&x[i * n2..(i + 1) * n2], N, N, layout, N));
        exact(a?, b?, c?)
    })
}

/// A step's check of its result.
type Check = Box<dyn FnOnce() -> Result>;

/// The checks of the steps, run after all steps so that checking is not timed.
#[derive(Default)]
struct Checks(Vec<(&'static str, Check)>);

impl Checks {
    fn later(&mut self, step: &'static str, check: impl FnOnce() -> Result + 'static) {
        self.0.push((step, Box::new(check)));
    }

    fn run(self) -> Result {
        let count = self.0.len();
        for (step, check) in self.0 {
            check().map_err(|e| format!("{step}: wrong result: {e}"))?;
        }
        println!("checked: all {count} results equal the CPU's");
        Ok(())
    }
}

/// MiB of device memory in use, once the work is done and the driver's
/// memory pool has returned what no allocation holds.
fn used_mib(ctx: &CudaContext) -> Result<f64> {
    ctx.synchronize()?;
    let mut pool = std::ptr::null_mut();
    // SAFETY: the default memory pool of the device of the current context
    // (bound by `synchronize`); trimming releases only unused memory.
    unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()).result()?;
        sys::cuMemPoolTrimTo(pool, 0).result()?;
    }
    let (free, total) = result::mem_get_info()?;
    Ok((total - free) as f64 / (1 << 20) as f64)
}

fn print_jit_cache() {
    let off = std::env::var("CUDA_CACHE_DISABLE").is_ok_and(|v| v == "1");
    println!(
        "JIT cache: {}",
        if off { "off (CUDA_CACHE_DISABLE=1)" } else { "on: set CUDA_CACHE_DISABLE=1 for a cold start" }
    );
}

/// The kernel the default path runs for an m x n x k product with f16
/// operands and an f32 C, as its planner chooses it.
fn f16_kernel(dev: &Device, m: usize, n: usize, k: usize) -> String {
    let types = WgmmaTypes::F16F32;
    if dev.compute_capability() == (9, 0) {
        let plan = warpgroup_plan(types, m, n, k, 1, dev.sm_count());
        // Entry point `_nn`: A and B row-major.
        format!("stage 9, {} (k in {} slices)", plan.kernel.names[0].unwrap_or("-"), plan.split.0)
    } else {
        format!("stage 8, {}", mma_kernel(types, m, n, dev.sm_count(), dev.limits().max_smem_per_block).name)
    }
}

/// The steps on this library's default path.
fn ours(clock: &Clock) -> Result {
    clock.step("main");
    let dev = gemm::default_device()?;
    clock.step("context");
    let base = used_mib(dev.context())?;
    println!("device: {}", dev.name());
    println!("kernel code: {}", dev.kernel_code());
    print_jit_cache();
    let mut checks = Checks::default();
    let row = Layout::RowMajor;

    let (a, b) = (ints::<f64>(N, N, row, 1), ints::<f64>(N, N, row, 2));
    let mut c = Matrix::filled(N, N, f64::NAN);
    gemm::dgemm(&a, &b, &mut c)?;
    clock.step("dgemm");
    checks.later("dgemm", move || exact(&a, &b, &c));

    let (a, b) = (ints::<f32>(N, N, Layout::ColMajor, 3), ints::<f32>(N, N, Layout::ColMajor, 4));
    let mut c = Matrix::filled(N, N, f32::NAN);
    gemm::sgemm(&a, &b, &mut c)?;
    clock.step("sgemm_col_major");
    checks.later("sgemm_col_major", move || exact(&a, &b, &c));

    let (a, b) = (ints::<f32>(N, N, row, 5), ints::<f32>(N, N, row, 6));
    let mut c = Matrix::filled(N, N, f32::NAN);
    Gemm::new().allow_tf32(true).run(&a, &b, &mut c)?;
    clock.step("tf32");
    checks.later("tf32", move || exact(&a, &b, &c));

    let (a, b) = (ints::<f16>(N, N, row, 7), ints::<f16>(N, N, row, 8));
    let mut c = Matrix::filled(N, N, f32::NAN);
    Gemm::new().run(&a, &b, &mut c)?;
    clock.step("f16_f32");
    checks.later("f16_f32", move || exact(&a, &b, &c));

    let (a, b) = (ints::<bf16>(N, N, row, 9), ints::<bf16>(N, N, row, 10));
    let mut c = Matrix::filled(N, N, bf16::NAN);
    Gemm::new().run(&a, &b, &mut c)?;
    clock.step("bf16_bf16");
    checks.later("bf16_bf16", move || exact(&a, &b, &c));

    let (a, b) = (ints::<i8>(N, N, row, 11), ints::<i8>(N, N, row, 12));
    let mut c = Matrix::filled(N, N, i32::MIN);
    Gemm::new().run(&a, &b, &mut c)?;
    clock.step("i8_i32");
    checks.later("i8_i32", move || exact(&a, &b, &c));

    let x = ints::<f32>(BATCH * N, N, row, 13).as_slice().to_vec(); // packed (batch, row, col)
    let w = ints::<f32>(BATCH * N, N, row, 14).as_slice().to_vec();
    let mut y = vec![f32::NAN; BATCH * N * N];
    Gemm::new().run_strided(
        Strided::from_slice(&x, BATCH, N, N, row)?,
        Strided::from_slice(&w, BATCH, N, N, row)?,
        Strided::from_slice_mut(&mut y, BATCH, N, N, row)?,
    )?;
    clock.step("strided_batch");
    checks.later("strided_batch", move || exact_batch(&x, &w, &y, row));
    println!("kernel_memory_mib,{:.1}", used_mib(dev.context())? - base);

    let (a, b) = (ints::<f16>(BIG, BIG, row, 15), ints::<f16>(BIG, BIG, row, 16));
    let mut c = Matrix::filled(BIG, BIG, f32::NAN);
    Gemm::new().run(&a, &b, &mut c)?;
    clock.step("largest_kernel");
    checks.later("largest_kernel", move || exact(&a, &b, &c));

    let (a, b) = (ints::<f64>(BIG, BIG, row, 17), ints::<f64>(BIG, BIG, row, 18));
    let mut c = Matrix::filled(BIG, BIG, f64::NAN);
    gemm::dgemm(&a, &b, &mut c)?;
    clock.step("largest_dgemm");
    checks.later("largest_dgemm", move || exact(&a, &b, &c));

    println!("largest_kernel ran: {}", f16_kernel(&dev, BIG, BIG, BIG));
    println!("largest_dgemm ran: {}", Gemm::new().plan(Precision::F64, BIG, BIG, BIG)?);
    println!("memory_after_all_mib,{:.1}", used_mib(dev.context())? - base);
    checks.run()
}

/// cuBLAS through cudarc, on one stream; every matrix column-major, as cuBLAS takes it.
struct Blas {
    blas: CudaBlas,
    stream: Arc<CudaStream>,
}

/// cuBLAS's name of an element type.
fn data_type(name: &str) -> cudaDataType {
    match name {
        "f16" => cudaDataType::CUDA_R_16F,
        "bf16" => cudaDataType::CUDA_R_16BF,
        "f32" => cudaDataType::CUDA_R_32F,
        "i8" => cudaDataType::CUDA_R_8I,
        "i32" => cudaDataType::CUDA_R_32I,
        _ => cudaDataType::CUDA_R_64F,
    }
}

impl Blas {
    /// Uploads A and B, runs `call` on them and a NaN-filled C of `c_len`
    /// elements, and copies C back.
    fn run<T: Scalar + DeviceRepr, C: Scalar + DeviceRepr>(
        &self,
        a: &[T],
        b: &[T],
        c_len: usize,
        call: impl FnOnce(&CudaSlice<T>, &CudaSlice<T>, &mut CudaSlice<C>) -> Result<(), CublasError>,
    ) -> Result<Vec<C>> {
        let (da, db) = (self.stream.clone_htod(a)?, self.stream.clone_htod(b)?);
        let mut dc = self.stream.clone_htod(&vec![C::POISON; c_len])?;
        call(&da, &db, &mut dc)?;
        let c = self.stream.clone_dtoh(&dc)?;
        self.stream.synchronize()?;
        Ok(c)
    }

    /// `cublas<t>gemm` (cublasDgemm, cublasSgemm): C = A B, all three n x n.
    fn gemm<T: Scalar + DeviceRepr>(&self, a: &Matrix<T>, b: &Matrix<T>) -> Result<Matrix<T>>
    where
        CudaBlas: BlasGemm<T>,
    {
        let n = a.rows() as i32;
        let (one, zero) = (T::from_f64(1.0), T::from_f64(0.0));
        let cfg = GemmConfig {
            transa: BlasOp::CUBLAS_OP_N,
            transb: BlasOp::CUBLAS_OP_N,
            m: n,
            n,
            k: n,
            alpha: one,
            lda: n,
            ldb: n,
            beta: zero,
            ldc: n,
        };
        // SAFETY: n x n column-major operands with leading dimension n, in buffers of n * n elements.
        let c = self
            .run(a.as_slice(), b.as_slice(), a.rows() * a.rows(), |a, b, c| unsafe { self.blas.gemm(cfg, a, b, c) })?;
        Ok(Matrix::from_vec_in(a.rows(), a.rows(), Layout::ColMajor, a.rows(), c)?)
    }

    /// `cublasGemmEx`: C (m x n) = op(A) B, op(A) = A^T (A stored k x m)
    /// when `transpose_a`, computed in `compute`.
    fn gemm_ex<T: Scalar + DeviceRepr, C: Scalar + DeviceRepr>(
        &self,
        transpose_a: bool,
        a: &Matrix<T>,
        b: &Matrix<T>,
        compute: Compute,
    ) -> Result<Matrix<C>> {
        let (m, k, n) = if transpose_a { (a.cols(), a.rows(), b.cols()) } else { (a.rows(), a.cols(), b.cols()) };
        let op = if transpose_a { BlasOp::CUBLAS_OP_T } else { BlasOp::CUBLAS_OP_N };
        // alpha = 1 and beta = 0 in the compute type: i32 or f32.
        let (alpha, beta) = if compute == Compute::CUBLAS_COMPUTE_32I {
            (1i32.to_ne_bytes(), [0; 4])
        } else {
            (1f32.to_ne_bytes(), [0; 4])
        };
        let c = self.run(a.as_slice(), b.as_slice(), m * n, |da, db, dc: &mut CudaSlice<C>| {
            let ((pa, _ra), (pb, _rb), (pc, _rc)) =
                (da.device_ptr(&self.stream), db.device_ptr(&self.stream), dc.device_ptr_mut(&self.stream));
            // SAFETY: column-major A (lda = its rows), B (k x n) and C (m x n)
            // in buffers of their sizes; alpha and beta in the compute type.
            unsafe {
                gemm::cudarc::cublas::result::gemm_ex(
                    *self.blas.handle(),
                    op,
                    BlasOp::CUBLAS_OP_N,
                    m as i32,
                    n as i32,
                    k as i32,
                    alpha.as_ptr().cast(),
                    pa as *const _,
                    data_type(T::NAME),
                    a.rows() as i32,
                    pb as *const _,
                    data_type(T::NAME),
                    k as i32,
                    beta.as_ptr().cast(),
                    pc as *mut _,
                    data_type(C::NAME),
                    m as i32,
                    compute,
                    gemm::cudarc::cublas::sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
        })?;
        Ok(Matrix::from_vec_in(m, n, Layout::ColMajor, m, c)?)
    }
}

/// The same steps through cuBLAS (cudarc), none of this library's kernels.
fn cublas(clock: &Clock) -> Result {
    clock.step("main");
    // SAFETY: only try to load the libraries (cudarc panics without them).
    if !unsafe { sys::is_culib_present() && gemm::cudarc::cublas::sys::is_culib_present() } {
        return Err("no NVIDIA driver or no cuBLAS library".into());
    }
    let ctx = CudaContext::new(0)?;
    let stream = ctx.new_stream()?;
    let base = used_mib(&ctx)?;
    let blas = Blas { blas: CudaBlas::new(stream.clone())?, stream };
    clock.step("context");
    println!("device: {}", ctx.name()?);
    print_jit_cache();
    let mut checks = Checks::default();
    let col = Layout::ColMajor;

    let (a, b) = (ints::<f64>(N, N, col, 1), ints::<f64>(N, N, col, 2));
    let c = blas.gemm(&a, &b)?;
    clock.step("dgemm");
    checks.later("dgemm", move || exact(&a, &b, &c));

    let (a, b) = (ints::<f32>(N, N, col, 3), ints::<f32>(N, N, col, 4));
    let c = blas.gemm(&a, &b)?;
    clock.step("sgemm_col_major");
    checks.later("sgemm_col_major", move || exact(&a, &b, &c));

    let (a, b) = (ints::<f32>(N, N, col, 5), ints::<f32>(N, N, col, 6));
    let c: Matrix<f32> = blas.gemm_ex(false, &a, &b, Compute::CUBLAS_COMPUTE_32F_FAST_TF32)?;
    clock.step("tf32");
    checks.later("tf32", move || exact(&a, &b, &c));

    let (a, b) = (ints::<f16>(N, N, col, 7), ints::<f16>(N, N, col, 8));
    let c: Matrix<f32> = blas.gemm_ex(false, &a, &b, Compute::CUBLAS_COMPUTE_32F)?;
    clock.step("f16_f32");
    checks.later("f16_f32", move || exact(&a, &b, &c));

    let (a, b) = (ints::<bf16>(N, N, col, 9), ints::<bf16>(N, N, col, 10));
    let c: Matrix<bf16> = blas.gemm_ex(false, &a, &b, Compute::CUBLAS_COMPUTE_32F)?;
    clock.step("bf16_bf16");
    checks.later("bf16_bf16", move || exact(&a, &b, &c));

    // cuBLAS's i8 product wants A transposed ("TN").
    let (a, b) = (ints::<i8>(N, N, col, 11), ints::<i8>(N, N, col, 12));
    let c: Matrix<i32> = blas.gemm_ex(true, &a, &b, Compute::CUBLAS_COMPUTE_32I)?;
    clock.step("i8_i32");
    checks.later("i8_i32", move || exact(a.t(), &b, &c));

    let x = ints::<f32>(N, BATCH * N, col, 13).as_slice().to_vec(); // N x N matrices, one after the other
    let w = ints::<f32>(N, BATCH * N, col, 14).as_slice().to_vec();
    let (n, stride) = (N as i32, (N * N) as i64);
    let gemm = GemmConfig {
        transa: BlasOp::CUBLAS_OP_N,
        transb: BlasOp::CUBLAS_OP_N,
        m: n,
        n,
        k: n,
        alpha: 1.0,
        lda: n,
        ldb: n,
        beta: 0.0,
        ldc: n,
    };
    let cfg =
        StridedBatchedConfig { gemm, batch_size: BATCH as i32, stride_a: stride, stride_b: stride, stride_c: stride };
    // SAFETY: BATCH packed N x N column-major matrices in each buffer.
    let y = blas.run(&x, &w, BATCH * N * N, |a, b, c| unsafe { blas.blas.gemm_strided_batched(cfg, a, b, c) })?;
    clock.step("strided_batch");
    checks.later("strided_batch", move || exact_batch(&x, &w, &y, col));
    println!("cublas_memory_mib,{:.1}", used_mib(&ctx)? - base);

    let (a, b) = (ints::<f16>(BIG, BIG, col, 15), ints::<f16>(BIG, BIG, col, 16));
    let c: Matrix<f32> = blas.gemm_ex(false, &a, &b, Compute::CUBLAS_COMPUTE_32F)?;
    clock.step("largest_kernel");
    checks.later("largest_kernel", move || exact(&a, &b, &c));

    let (a, b) = (ints::<f64>(BIG, BIG, col, 17), ints::<f64>(BIG, BIG, col, 18));
    let c = blas.gemm(&a, &b)?;
    clock.step("largest_dgemm");
    checks.later("largest_dgemm", move || exact(&a, &b, &c));

    println!("memory_after_all_mib,{:.1}", used_mib(&ctx)? - base);
    checks.run()
}

/// Runs this program again as a fresh process with `args` and the JIT cache
/// off, echoes its output, and returns it.
fn child(args: &[&str]) -> Result<String> {
    let name = ["cold_start"].iter().chain(args).copied().collect::<Vec<_>>().join(" ");
    println!("== {name} (CUDA_CACHE_DISABLE=1)");
    let out = Command::new(std::env::current_exe()?)
        .args(args)
        .env("CUDA_CACHE_DISABLE", "1")
        .stderr(Stdio::inherit())
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    print!("{text}");
    if !out.status.success() {
        return Err(format!("{name} failed ({})", out.status).into());
    }
    Ok(text)
}

/// The `name,number` lines of a run, cuBLAS's memory line named as ours.
fn figures(output: &str) -> Vec<(String, f64)> {
    let figure = |line: &str| {
        let (name, value) = line.split_once(',')?;
        let name = if name == "cublas_memory_mib" { "kernel_memory_mib" } else { name };
        Some((name.to_string(), value.parse().ok()?)).filter(|(n, _)| !n.contains(' '))
    };
    output.lines().filter_map(figure).collect()
}

/// Both runs as fresh processes; the table, and rows appended to `path`.
fn both(path: &str) -> Result {
    let (ours, theirs) = (child(&[])?, child(&["--cublas"])?);
    let device = ours.lines().find_map(|l| l.strip_prefix("device: ")).unwrap_or("unknown").replace(',', " ");
    let (date, commit) = (gemm::bench::today_utc(), gemm::bench::commit());
    let theirs = figures(&theirs);
    let mut rows = String::new();
    println!("\n{device}, {date}, commit {commit}; seconds since process start (memory: MiB)");
    println!("{:<22} {:>10} {:>10} {:>12}", "step", "ours", "cuBLAS", "ours/cuBLAS");
    for (step, x) in figures(&ours) {
        let y = theirs.iter().find(|(s, _)| *s == step).map(|&(_, y)| y);
        let (y_cell, ratio) = match y {
            Some(y) if y > 0.0 => (format!("{y:.3}"), format!("{:.2}", x / y)),
            Some(y) => (format!("{y:.3}"), "-".into()),
            None => ("-".into(), "-".into()),
        };
        println!("{step:<22} {x:>10.3} {y_cell:>10} {ratio:>12}");
        rows += &format!("{device},{date},{commit},{step},{x},{}\n", y.map_or(String::new(), |y| y.to_string()));
    }
    const HEADER: &str = "device,date,commit,step,ours_s,cublas_s";
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let text = match old.lines().next() {
        None => format!("{HEADER}\n{rows}"),
        Some(HEADER) => format!("{old}{}{rows}", if old.ends_with('\n') { "" } else { "\n" }),
        Some(other) => return Err(format!("{path} has another header ({other}); not touched").into()),
    };
    if let Some(dir) = std::path::Path::new(path).parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)?;
    println!("appended to {path}");
    Ok(())
}
