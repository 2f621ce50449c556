//! The `Gemm` builder and the one-call functions `dgemm` and `sgemm`.

use crate::describe::{ProductDesc, Target};
use crate::device::registry::entry_point;
use crate::device::{default_device, Device};
use crate::element::{product_name, Product, Scalar, Types};
use crate::error::Error;
use crate::exec::host_path::HostCall;
use crate::exec::tensor_core::SECTOR_BYTES;
use crate::exec::warpgroup::{read_in_layout, WarpgroupLaunch};
use crate::operands::device_matrix::{DeviceView, DeviceViewMut};
use crate::operands::matrix::{MatMut, MatRef};
use crate::plan::product_plan::{mma_launch, warpgroup_launch, KernelFamily, ProductPlan};
use crate::plan::tuning_plan::{model_tail_for, plan_split, stage_default};
use crate::tuning::{PackReason, Plan, PlanSource, SplitReason};
use cudarc::driver::CudaStream;
use gemm_core::shape::{Layout, Op};
use gemm_core::warpgroup::WgmmaTypes;
use gemm_core::{
    BlockDim, BlockTile, ConfigError, GemmDims, KernelConfig, KernelLayouts, Precision, Stage, ThreadTile, WarpTile,
};
use std::sync::Arc;

/// Why `.split_k(n)` fails on a batch.
pub(crate) const BATCHES_NOT_SPLIT: &str = "batches are not split; each product runs whole";
/// Why `.pack(true)` fails on a batch.
pub(crate) const BATCHES_NOT_PACKED: &str = "batches are not packed; each product reads its operands in place";

/// `C = op(A) * op(B)` in f64 on the default device with the default kernel:
/// the BLAS `dgemm` with alpha = 1, beta = 0 (C is not read). A (m x k),
/// B (k x n) and C (m x n) are any host matrices or views: [`Matrix`](crate::Matrix)
/// (`&a`, `&mut c`), sub-matrices ([`crate::Matrix::view`]), transposes
/// ([`crate::Matrix::t`]), or a caller's slices ([`MatRef::from_slice`]),
/// row- or column-major. Blocks until C holds the result; C's padding is
/// left as it was. For alpha, beta, op flags, a device or a stream, use
/// [`Gemm`].
///
/// ```no_run
/// use gemm::Matrix;
/// # fn main() -> Result<(), gemm::Error> {
/// let a = Matrix::<f64>::from_fn(200, 300, |i, j| (i as f64 - j as f64) / 9.0);
/// let b = Matrix::<f64>::from_fn_col_major(200, 100, |i, j| ((i + j) % 7) as f64);
/// let mut c = Matrix::<f64>::zeros(300, 100);
/// gemm::dgemm(a.t(), &b, &mut c)?; // C = A^T B, no copy of A
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::Shape`] for mismatched shapes or leading dimensions;
/// [`Error::NoDriver`] / [`Error::NoDevice`] without a GPU;
/// [`Error::OutOfMemory`]; [`Error::Driver`] on driver failure. C is
/// untouched on error.
pub fn dgemm<'a, 'b, 'c>(
    a: impl Into<MatRef<'a, f64>>,
    b: impl Into<MatRef<'b, f64>>,
    c: impl Into<MatMut<'c, f64>>,
) -> Result<(), Error> {
    Gemm::new().run(a, b, c)
}

/// `C = op(A) * op(B)` in f32 on the default device with the default kernel
/// (FFMA on the CUDA cores, no TF32). Operands, blocking and errors as
/// [`dgemm`].
///
/// ```no_run
/// use gemm::{Layout, MatMut, MatRef};
/// # fn main() -> Result<(), gemm::Error> {
/// let x = vec![0.5f32; 64 * 48];
/// let y = vec![0.25f32; 48 * 32];
/// let mut z = vec![0.0f32; 64 * 32];
/// gemm::sgemm(
///     MatRef::from_slice(&x, 64, 48, Layout::RowMajor, 48)?,
///     MatRef::from_slice(&y, 48, 32, Layout::ColMajor, 48)?,
///     MatMut::from_slice(&mut z, 64, 32, Layout::ColMajor, 64)?,
/// )?;
/// assert_eq!(z[0], 6.0);
/// # Ok(()) }
/// ```
///
/// # Errors
/// As [`dgemm`].
pub fn sgemm<'a, 'b, 'c>(
    a: impl Into<MatRef<'a, f32>>,
    b: impl Into<MatRef<'b, f32>>,
    c: impl Into<MatMut<'c, f32>>,
) -> Result<(), Error> {
    Gemm::new().run(a, b, c)
}

/// Builds and runs one GEMM, `C <- alpha * op(A) * op(B) + beta * C`, the
/// BLAS xGEMM contract: defaults alpha = 1, beta = 0, op = N, so `C = A * B`.
///
/// | option | meaning | BLAS / cuBLAS |
/// |---|---|---|
/// | `.op_a(Op::T)`, `.op_b(..)` | op(A) = A^T (as passing `a.t()`) | `TRANSA`, `TRANSB` |
/// | `.alpha(x)`, `.beta(y)` | scales; alpha = 0 reads neither A nor B, beta = 0 never reads C | `ALPHA`, `BETA` |
/// | operands' layouts and `ld` | row- or column-major, any leading dimension | `LDA`, `LDB`, `LDC` (column-major) |
/// | `.stream(&s)` | run on the caller's cudarc stream | `cublasSetStream` |
/// | `.device(&d)` | run on this device (host operands) | the current device |
/// | `.devices(&[d0, d1])` | spread a host product over these GPUs (C in blocks) | `cublasXtDeviceSelect` |
///
/// Semantics as the reference BLAS: k = 0 gives C = beta C; m = 0 or n = 0
/// touches nothing; every shape, leading dimension and overlap is checked
/// before the GPU is touched, and C is untouched on any error.
///
/// Choosing the kernel (the teaching and tuning surface, [`crate::tuning`]):
/// without kernel options the measured default for the problem
/// ([`Gemm::plan`]). Otherwise:
/// - `.stage(s)` picks a [`Stage`] (its other options default to
///   [`stage_default`]); without it the stage follows from the options given:
///   `outputs_per_thread` means stage 4, `tile_size` stage 3, `block_dim`
///   stage 2, `warp_tile` without `thread_tile` stage 8, `warp_tile` or
///   `pipeline_depth` stage 7, `block_tile` or `thread_tile` stage 5.
/// - `.block_dim(x, y)` (stages 1, 2): any x * y <= 1024.
/// - `.tile_size(t)` (stage 3: 8, 16, 32; stage 4: 32).
/// - `.outputs_per_thread(o)` (stage 4: 1, 2, 4, 8, 16).
/// - `.block_tile(bm, bn, bk)` (stages 5-8), `.thread_tile(tm, tn)` (5-7),
///   `.warp_tile(wm, wn)`, `.pipeline_depth(d)` (7, 8): a configuration of
///   the compiled menu (`gemm::tuning::registry::stage_configs`); options not
///   given take the stage default, and an error names those defaults.
/// - `.kernel(config)`: exactly this configuration.
///
/// Every stage serves every op and layout combination (stages 1-4 read
/// transposed operands with strides, uncoalesced; stages 5-8 have a kernel
/// per storage order of A and B).
///
/// Which calls block: [`Gemm::run`] (host operands) returns when C holds the
/// result; [`Gemm::run_device`] only enqueues the work on the stream and
/// returns (as cuBLAS does): synchronize the stream, or copy C to the host,
/// to see the result and any error from the kernel.
///
/// ```no_run
/// use gemm::{Gemm, Matrix, Op};
/// # fn main() -> Result<(), gemm::Error> {
/// let a = Matrix::<f64>::from_fn(200, 300, |i, j| (i + j) as f64);
/// let b = Matrix::<f64>::from_fn(200, 100, |i, j| (i * j % 7) as f64);
/// let mut c = Matrix::<f64>::zeros(300, 100);
/// Gemm::new().op_a(Op::T).alpha(2.0).beta(0.5).run(&a, &b, &mut c)?; // C = 2 A^T B + C / 2
/// Gemm::new().tile_size(32).outputs_per_thread(8).run(a.t(), &b, &mut c)?; // stage 4
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Gemm {
    stage: Option<Stage>,
    kernel: Option<KernelConfig>,
    block: Option<BlockDim>,
    tile: Option<u32>,
    outputs: Option<u32>,
    block_tile: Option<BlockTile>,
    warp_tile: Option<WarpTile>,
    thread_tile: Option<ThreadTile>,
    pipeline_depth: Option<u32>,
    split_k: Option<u32>,
    pack: Option<bool>,
    /// op(A), op(B), alpha, beta: what the product is.
    pub(crate) desc: ProductDesc,
    device: Option<Arc<Device>>,
    /// The GPUs host products are spread over ([`Gemm::devices`]).
    pub(crate) devices: Option<Vec<Arc<Device>>>,
    stream: Option<Arc<CudaStream>>,
    pub(crate) host_streams: Option<usize>,
    pub(crate) memory_budget: Option<usize>,
    pub(crate) tf32: bool,
    /// Stage 9's split of k (slices, k-tiles per slice) forced on every
    /// product: the host path's tiles take the whole product's (not a user
    /// option).
    pub(crate) warpgroup_split: Option<(u32, u32)>,
    /// Whether the token-sized kernels run where they apply (None: the
    /// planner decides); the host path's tiles take the whole product's
    /// answer: `Some(None)` not, `Some(Some(launch))` as `launch` (not a
    /// user option).
    pub(crate) skinny: Option<Option<crate::exec::skinny::SkinnyLaunch>>,
    /// Whether a single product may balance its last wave of block tiles
    /// ([`Gemm::balance_last_wave`]).
    pub(crate) balance_last_wave: bool,
    /// f64 or f32 emulated on INT8 tensor cores ([`Gemm::emulation`]).
    pub(crate) emulation: Option<crate::emulation::Emulation>,
}

impl Default for Gemm {
    fn default() -> Self {
        Self::new()
    }
}

impl Gemm {
    /// Whether a split of k or packing was asked of the ladder.
    pub(crate) fn ladder_options_set(&self) -> bool {
        self.split_k.is_some() || self.pack.is_some()
    }

    /// The default GEMM: `C = A * B` with the default kernel on the default device.
    pub fn new() -> Self {
        Gemm {
            stage: None,
            kernel: None,
            block: None,
            tile: None,
            outputs: None,
            block_tile: None,
            warp_tile: None,
            thread_tile: None,
            pipeline_depth: None,
            split_k: None,
            pack: None,
            desc: ProductDesc::default(),
            device: None,
            devices: None,
            stream: None,
            host_streams: None,
            memory_budget: None,
            tf32: false,
            warpgroup_split: None,
            skinny: None,
            balance_last_wave: true,
            emulation: None,
        }
    }

    /// op(A): [`Op::T`] multiplies by the transpose of the A passed (which is
    /// then k x m), as BLAS's `TRANSA`. The same as passing `a.t()`.
    pub fn op_a(mut self, op: Op) -> Self {
        self.desc.op_a = op;
        self
    }

    /// op(B): [`Op::T`] multiplies by the transpose of the B passed (n x k),
    /// as BLAS's `TRANSB`.
    pub fn op_b(mut self, op: Op) -> Self {
        self.desc.op_b = op;
        self
    }

    /// Scale of op(A) * op(B) (default 1). For f32 it is rounded to f32.
    /// With alpha = 0, A and B are not read.
    pub fn alpha(mut self, alpha: f64) -> Self {
        self.desc.alpha = alpha;
        self
    }

    /// Scale of C's old value (default 0: C is then not read, so it may hold NaN).
    pub fn beta(mut self, beta: f64) -> Self {
        self.desc.beta = beta;
        self
    }

    /// Runs on `device` instead of the default device (host operands; device
    /// operands run on their own device).
    pub fn device(mut self, device: &Arc<Device>) -> Self {
        self.device = Some(device.clone());
        self
    }

    /// Runs the device work on the caller's cudarc stream instead of the
    /// device's own (it must belong to the device's context). With
    /// [`Gemm::run_device`] nothing is synchronized: the product is ordered
    /// on `stream` after the work already there.
    pub fn stream(mut self, stream: &Arc<CudaStream>) -> Self {
        self.stream = Some(stream.clone());
        self
    }

    /// Streams the host path ([`Gemm::run`] and [`Gemm::run_strided`] on
    /// host matrices, every element type) spreads its tiles over, so
    /// uploads, kernels and downloads of different tiles overlap (default:
    /// by problem size, from measurement: 2 up to 2048^3, 4 above). A call
    /// on device matrices with it set is an [`Error::Unsupported`].
    pub fn host_streams(mut self, streams: usize) -> Self {
        self.host_streams = Some(streams.max(1));
        self
    }

    /// Device memory, in bytes, the host path may use for one product
    /// (default: 90% of the device's free memory), every element type. A
    /// product whose operands need more streams through it in tiles of C
    /// (out of core) instead of failing: with k in chunks too when C is
    /// f64, f32 or i32, and with k whole when C is f16 or bf16 (a partial
    /// sum rounded to 16 bits between chunks would lose accuracy), so such
    /// a product needs at least a row of A and a column of B per stream,
    /// else [`Error::MemoryBudget`]. Besides that, the workspace may exceed
    /// a budget of a few KiB by its 256-byte alignment. A call on device
    /// matrices with it set is an [`Error::Unsupported`].
    pub fn memory_budget(mut self, bytes: usize) -> Self {
        self.memory_budget = Some(bytes);
        self
    }

    /// Lets f32 products run on TF32 tensor cores (stage 9 on compute
    /// capability 9.0, stage 8's `mma.sync` kernels on 8.x or with
    /// `.stage(Stage::TensorCore)`; on older GPUs, or with another option of
    /// stages 1-8 set, the f32 kernels run as before, and
    /// [`Gemm::plan_for`] says which). On an f64 product it is an
    /// [`Error::Unsupported`], found before the device is opened. Default false: TF32 keeps 10 of f32's 23
    /// mantissa bits of each input (relative error up to 2^-10 per input, the
    /// products accumulated in f32), so it is not an f32-accurate product
    /// and is never chosen silently (as cuBLAS's `CUBLAS_TF32_TENSOR_OP_MATH`).
    ///
    /// ```no_run
    /// use gemm::{Gemm, Matrix};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let a = Matrix::<f32>::from_fn(1024, 1024, |i, j| (i + j) as f32 / 1024.0);
    /// let mut c = Matrix::<f32>::zeros(1024, 1024);
    /// Gemm::new().allow_tf32(true).run(&a, &a, &mut c)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Source
    /// PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
    /// Instructions" (`.tf32` operands).
    pub fn allow_tf32(mut self, allow: bool) -> Self {
        self.tf32 = allow;
        self
    }

    /// Emulates an f64 or f32 product on the INT8 tensor cores (Ozaki
    /// scheme II, fast mode) with the given number of moduli: each row of
    /// op(A) and column of op(B) scaled by a power of two and truncated to
    /// an integer, its residues modulo N small coprime moduli multiplied
    /// exactly on INT8 tensor cores (one batched launch of stage 9), and
    /// each element of C rebuilt by the Chinese remainder theorem and scaled
    /// back, fused with alpha and beta. Opt-in, never chosen by default;
    /// the plan states it ([`Gemm::plan_for`]).
    ///
    /// - Every door (host and device operands, views, op and layout,
    ///   alpha, beta, the caller's stream, strided, pointer-array and
    ///   grouped batches: those run product by product); compute capability
    ///   9.0 only ([`Error::Unsupported`] elsewhere).
    /// - Accuracy: error per element below about
    ///   `u |C_ij| + 4 sqrt(2k/P) ||a_i|| ||b_j||` (`P` the product of the
    ///   moduli; [`crate::emulation`] has the exact bound), so relative to
    ///   the row's and column's norms, not to `|C_ij|`: an element that
    ///   cancels loses more than in a native product.
    ///   [`Emulation::f64_accuracy`](crate::emulation::Emulation::f64_accuracy)
    ///   (15 moduli) and
    ///   [`f32_accuracy`](crate::emulation::Emulation::f32_accuracy) (8) have
    ///   a median error below the native product's for inputs of moderate
    ///   exponent spread.
    /// - Inf and NaN: an element of C whose row of op(A) or column of op(B)
    ///   holds one is computed as a plain dot product (fused multiply-adds
    ///   in ascending k) instead, so they propagate as IEEE says; the
    ///   others are emulated. Same inputs, same bits, on every door.
    /// - Memory: the workspace (residues and i32 products of the moduli)
    ///   comes from the library's pool: about `N (k (m + n) + 4 m n)` bytes,
    ///   C taken in panels of rows beyond 2 GiB
    ///   ([`Emulation::workspace_limit`](crate::emulation::Emulation::workspace_limit);
    ///   the plan says how much).
    ///
    /// ```no_run
    /// use gemm::emulation::Emulation;
    /// use gemm::{Gemm, Matrix};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let a = Matrix::<f64>::from_fn(4096, 4096, |i, j| ((i * 7 + j) % 13) as f64 - 6.0);
    /// let mut c = Matrix::<f64>::zeros(4096, 4096);
    /// Gemm::new().emulation(Emulation::f64_accuracy()).run(&a, &a, &mut c)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Source
    /// K. Ozaki, Y. Uchino, T. Imamura, "Ozaki Scheme II: A GEMM-oriented
    /// emulation of floating-point matrix multiplication using an integer
    /// modular technique", 2025.
    pub fn emulation(mut self, emulation: crate::emulation::Emulation) -> Self {
        self.emulation = Some(emulation);
        self
    }

    /// Runs a chosen stage.
    pub fn stage(mut self, stage: Stage) -> Self {
        self.stage = Some(stage);
        self
    }

    /// Threads per block (x, y) of the naive stages 1 and 2.
    pub fn block_dim(mut self, x: u32, y: u32) -> Self {
        self.block = Some(BlockDim::new(x, y));
        self
    }

    /// Tile size T (T x T tiles) of stages 3 and 4.
    pub fn tile_size(mut self, tile: u32) -> Self {
        self.tile = Some(tile);
        self
    }

    /// Outputs per thread of stage 4.
    pub fn outputs_per_thread(mut self, outputs: u32) -> Self {
        self.outputs = Some(outputs);
        self
    }

    /// Block tile BM x BN x BK of stages 5-8.
    pub fn block_tile(mut self, bm: u32, bn: u32, bk: u32) -> Self {
        self.block_tile = Some(BlockTile::new(bm, bn, bk));
        self
    }

    /// Thread tile TM x TN of stages 5-7.
    pub fn thread_tile(mut self, tm: u32, tn: u32) -> Self {
        self.thread_tile = Some(ThreadTile::new(tm, tn));
        self
    }

    /// Warp tile WM x WN of stages 7 and 8.
    pub fn warp_tile(mut self, wm: u32, wn: u32) -> Self {
        self.warp_tile = Some(WarpTile::new(wm, wn));
        self
    }

    /// Pipeline depth (shared-memory buffers filled by cp.async) of stages 7 and 8.
    pub fn pipeline_depth(mut self, depth: u32) -> Self {
        self.pipeline_depth = Some(depth);
        self
    }

    /// Split-K: computes a single product as `slices` partial products over
    /// consecutive ranges of k (each a multiple of BK long; fewer slices when
    /// k is short), then sums them in slice order with a second kernel into
    /// C (`C <- alpha * sum + beta * C`): bitwise the same on every run. For a
    /// small C with a long k, whose few tiles would leave most SMs idle. The
    /// partials need `slices * m * n` elements of device memory, allocated
    /// on the call's stream from the library's memory pool on the device and
    /// freed after.
    /// `1` never splits; without this option the default kernel splits when
    /// [`Gemm::plan`] finds it faster, a kernel chosen with the options never.
    ///
    /// ```no_run
    /// use gemm::{Gemm, Matrix};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let a = Matrix::<f64>::from_fn(64, 100_000, |i, j| ((i + j) % 5) as f64);
    /// let b = Matrix::<f64>::from_fn(100_000, 64, |i, j| ((i * j) % 3) as f64);
    /// let mut c = Matrix::<f64>::zeros(64, 64);
    /// Gemm::new().split_k(32).run(&a, &b, &mut c)?;
    /// # Ok(()) }
    /// ```
    ///
    /// Errors ([`Error::SplitK`]): `slices` = 0; a split asked of a batch
    /// (batches are not split).
    pub fn split_k(mut self, slices: u32) -> Self {
        self.split_k = Some(slices);
        self
    }

    /// Packing ([`gemm_core::pack`]): `true` first copies each operand whose
    /// lines run along k (in the kernel's form, C row-major: a row-major A, a
    /// column-major B) into a workspace, transposed, so that the kernel reads
    /// A column-major and B row-major, the layouts the FFMA kernels run
    /// fastest in (stage 7 at 4096³ on an H200: 0.97 of cuBLAS against 0.89
    /// for a row-major A, 2026-11-24). The copies read and write each packed
    /// operand once (memory-bound) and need as many elements of device
    /// memory, allocated on the call's stream from the library's memory pool on
    /// the device and freed after; their leading dimension is padded to 128 bytes, so
    /// an odd `lda` or `ldb` no longer forces element-wise copies. `false`
    /// never packs. Without this option the default kernel packs where the
    /// measured plan did ([`Gemm::plan`]), a kernel chosen with the options
    /// never. The result is the same, bit for bit, as the unpacked product
    /// with the same kernel on the packed layouts.
    ///
    /// ```no_run
    /// use gemm::{Gemm, Matrix};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let a = Matrix::<f32>::from_fn(1000, 3000, |i, j| ((i + j) % 5) as f32);
    /// let b = Matrix::<f32>::from_fn(3000, 2000, |i, j| ((i * j) % 3) as f32);
    /// let mut c = Matrix::<f32>::zeros(1000, 2000);
    /// Gemm::new().pack(true).run(&a, &b, &mut c)?;
    /// # Ok(()) }
    /// ```
    ///
    /// Errors ([`Error::Pack`]): packing asked of a batch (batches are not
    /// packed).
    pub fn pack(mut self, pack: bool) -> Self {
        self.pack = Some(pack);
        self
    }

    /// Whether a single product on device matrices whose block tiles would
    /// leave the last wave partly empty may run in two parts (default
    /// `true`; stage 9, and the ladder's block tiles of at least 128 x
    /// 128): its first rows of block tiles whole, in full waves, and the
    /// other rows with k split into slices, summed in a fixed order
    /// (Osama, Merrill, Cecka, Garland and Owens, "Stream-K", 2023, on
    /// such hybrids). The planner takes it where its wave model says it
    /// pays ([`Gemm::plan_for`] and [`Gemm::plan`] say so: "last wave
    /// balanced"; 1536³ f64 on an H200: 0.88x cuBLAS against 0.73x whole).
    /// The bits are the same every run, but those rows' sums are grouped
    /// by slice: `false` gives the bits of the whole product, which the
    /// host path (host matrices) always computes.
    ///
    /// ```
    /// use gemm::half::f16;
    /// let whole = gemm::Gemm::new().balance_last_wave(false).plan_for::<f16, f16>(3000, 3000, 3000)?;
    /// assert!(!whole.why.contains("last wave balanced"));
    /// # Ok::<(), gemm::Error>(())
    /// ```
    pub fn balance_last_wave(mut self, on: bool) -> Self {
        self.balance_last_wave = on;
        self
    }

    /// Runs exactly `config` (any [`KernelConfig`]; other kernel options are
    /// then an error).
    pub fn kernel(mut self, config: KernelConfig) -> Self {
        self.kernel = Some(config);
        self
    }

    /// The configuration chosen with the builder's options for `precision`,
    /// checked against the compiled menu (not yet against a device or a
    /// problem size); `Ok(None)` when no kernel option was given, so the
    /// kernel is chosen per problem by [`Gemm::plan`].
    ///
    /// ```
    /// use gemm::{Gemm, Precision};
    /// let e = Gemm::new().block_tile(96, 96, 16).chosen_config(Precision::F64).unwrap_err();
    /// assert_eq!(
    ///     e.to_string(),
    ///     "invalid configuration: stage 5 (register-tiled): the tiles need 144 threads per block; a block must \
    ///      have a multiple of 32 threads, at most 1024 (thread tile 8x8 (`.thread_tile(..)`) not set, so the \
    ///      stage default; set it with the builder to change it)"
    /// );
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when an option does not apply to the stage or the
    /// configuration is not compiled; [`Error::ConfigWithDefaults`] when the
    /// configuration that fails includes stage defaults the options did not
    /// set (the message names them); [`Error::NoKernel`] when it is compiled
    /// only for the other precision.
    pub fn chosen_config(&self, precision: Precision) -> Result<Option<KernelConfig>, Error> {
        let stage = match (self.stage, self.kernel) {
            (_, Some(config)) => {
                let any_option = self.stage.is_some_and(|s| s != config.stage())
                    || self.block.is_some()
                    || self.tile.is_some()
                    || self.outputs.is_some()
                    || self.block_tile.is_some()
                    || self.warp_tile.is_some()
                    || self.thread_tile.is_some()
                    || self.pipeline_depth.is_some();
                if any_option {
                    return Err(Error::Config(ConfigError::OptionNotForStage {
                        option: "kernel",
                        stage: config.stage(),
                    }));
                }
                entry_point(precision, config)?;
                return Ok(Some(config));
            }
            (Some(s), None) => s,
            (None, None) if self.outputs.is_some() => Stage::OutputsPerThread,
            (None, None) if self.tile.is_some() => Stage::SmemTiled,
            (None, None) if self.block.is_some() => Stage::Coalesced,
            (None, None) if self.warp_tile.is_some() && self.thread_tile.is_none() => Stage::TensorCore,
            (None, None) if self.warp_tile.is_some() || self.pipeline_depth.is_some() => Stage::Pipelined,
            (None, None) if self.block_tile.is_some() || self.thread_tile.is_some() => Stage::RegisterTiled,
            (None, None) => return Ok(None),
        };
        let reject = |option: &'static str| Err(Error::Config(ConfigError::OptionNotForStage { option, stage }));
        let takes = |option: &'static str| match option {
            "block_dim" => matches!(stage, Stage::Naive | Stage::Coalesced),
            "tile_size" => matches!(stage, Stage::SmemTiled | Stage::OutputsPerThread),
            "outputs_per_thread" => stage == Stage::OutputsPerThread,
            "block_tile" => stage.number() >= 5,
            "thread_tile" => (5..=7).contains(&stage.number()),
            _ => matches!(stage, Stage::Pipelined | Stage::TensorCore), // warp_tile, pipeline_depth
        };
        for (option, given) in [
            ("block_dim", self.block.is_some()),
            ("tile_size", self.tile.is_some()),
            ("outputs_per_thread", self.outputs.is_some()),
            ("block_tile", self.block_tile.is_some()),
            ("thread_tile", self.thread_tile.is_some()),
            ("warp_tile", self.warp_tile.is_some()),
            ("pipeline_depth", self.pipeline_depth.is_some()),
        ] {
            if given && !takes(option) {
                return reject(option);
            }
        }
        // The options given, the stage's defaults for the rest; remember
        // which defaults were used, to name them if the result is invalid.
        let mut defaults: Vec<String> = Vec::new();
        let mut pick = |given: Option<String>, default: String, what: &str, option: &str| {
            if given.is_none() {
                defaults.push(format!("{what} {default} (`.{option}(..)`)"));
            }
        };
        let config = match stage_default(stage, precision) {
            KernelConfig::Naive { block } | KernelConfig::Coalesced { block } => {
                pick(self.block.map(|b| b.to_string()), block.to_string(), "block", "block_dim");
                let block = self.block.unwrap_or(block);
                if stage == Stage::Naive {
                    KernelConfig::Naive { block }
                } else {
                    KernelConfig::Coalesced { block }
                }
            }
            KernelConfig::SmemTiled { tile } => {
                pick(self.tile.map(|t| t.to_string()), tile.to_string(), "tile size", "tile_size");
                KernelConfig::SmemTiled { tile: self.tile.unwrap_or(tile) }
            }
            KernelConfig::OutputsPerThread { tile, outputs } => {
                pick(self.tile.map(|t| t.to_string()), tile.to_string(), "tile size", "tile_size");
                pick(
                    self.outputs.map(|o| o.to_string()),
                    outputs.to_string(),
                    "outputs per thread",
                    "outputs_per_thread",
                );
                KernelConfig::OutputsPerThread {
                    tile: self.tile.unwrap_or(tile),
                    outputs: self.outputs.unwrap_or(outputs),
                }
            }
            KernelConfig::RegisterTiled { block, thread } | KernelConfig::Vectorized { block, thread } => {
                pick(self.block_tile.map(|b| b.to_string()), block.to_string(), "block tile", "block_tile");
                pick(self.thread_tile.map(|t| t.to_string()), thread.to_string(), "thread tile", "thread_tile");
                let (block, thread) = (self.block_tile.unwrap_or(block), self.thread_tile.unwrap_or(thread));
                if stage == Stage::RegisterTiled {
                    KernelConfig::RegisterTiled { block, thread }
                } else {
                    KernelConfig::Vectorized { block, thread }
                }
            }
            KernelConfig::Pipelined { block, warp, thread, depth } => {
                pick(self.block_tile.map(|b| b.to_string()), block.to_string(), "block tile", "block_tile");
                pick(self.warp_tile.map(|w| w.to_string()), warp.to_string(), "warp tile", "warp_tile");
                pick(self.thread_tile.map(|t| t.to_string()), thread.to_string(), "thread tile", "thread_tile");
                pick(self.pipeline_depth.map(|d| d.to_string()), depth.to_string(), "pipeline depth", "pipeline_depth");
                KernelConfig::Pipelined {
                    block: self.block_tile.unwrap_or(block),
                    warp: self.warp_tile.unwrap_or(warp),
                    thread: self.thread_tile.unwrap_or(thread),
                    depth: self.pipeline_depth.unwrap_or(depth),
                }
            }
            KernelConfig::TensorCore { block, warp, depth } => {
                pick(self.block_tile.map(|b| b.to_string()), block.to_string(), "block tile", "block_tile");
                pick(self.warp_tile.map(|w| w.to_string()), warp.to_string(), "warp tile", "warp_tile");
                pick(self.pipeline_depth.map(|d| d.to_string()), depth.to_string(), "pipeline depth", "pipeline_depth");
                KernelConfig::TensorCore {
                    block: self.block_tile.unwrap_or(block),
                    warp: self.warp_tile.unwrap_or(warp),
                    depth: self.pipeline_depth.unwrap_or(depth),
                }
            }
            other => other,
        };
        match entry_point(precision, config) {
            Ok(_) => Ok(Some(config)),
            // Only when the user chose some of it: a bare `.stage(s)` is the
            // stage default itself, whose failure (another precision) says so.
            Err(Error::Config(error)) if !defaults.is_empty() && self.any_kernel_option() => {
                Err(Error::ConfigWithDefaults { error, defaults: defaults.join(", ") })
            }
            Err(e) => Err(e),
        }
    }

    fn any_kernel_option(&self) -> bool {
        self.block.is_some()
            || self.tile.is_some()
            || self.outputs.is_some()
            || self.block_tile.is_some()
            || self.warp_tile.is_some()
            || self.thread_tile.is_some()
            || self.pipeline_depth.is_some()
    }

    /// The configuration this builder runs for an m x n x k product in
    /// `precision` (C row-major; see [`Gemm::plan`] for the reason too).
    ///
    /// # Errors
    /// As [`Gemm::chosen_config`].
    pub fn config_for(&self, precision: Precision, m: usize, n: usize, k: usize) -> Result<KernelConfig, Error> {
        Ok(self.plan(precision, m, n, k)?.config)
    }

    /// The kernel this builder runs for an m x n x k product in `precision`
    /// and why: the configuration given with the options, or else the
    /// fastest configuration the ladder benchmark measured for the nearest
    /// shape on this device (or on the device it was measured on, when this
    /// one is not in the table); and the slices of k it splits the product
    /// into ([`Plan::split_k`], [`crate::tuning::SplitReason`]: `.split_k(n)`,
    /// the split measured at this very shape, or the wave model's); see
    /// [`Plan`]. For a column-major C the kernel computes C^T: plan for
    /// (n, m, k).
    ///
    /// Uses the builder's device, else the default device when one is
    /// present; without a GPU it plans as for the measured device.
    ///
    /// This is the ladder's plan. On compute capability 9.0 a product with
    /// few rows or columns of C runs the token-sized kernels instead, unless
    /// an option chose a kernel; [`Gemm::plan_for`] says what a call runs.
    ///
    /// ```
    /// let plan = gemm::Gemm::new().plan(gemm::Precision::F64, 4096, 4096, 4096)?;
    /// println!("{plan}"); // e.g. "stage 8 (tensor-core), block 128x64x16, ... (fastest measured at ...)"
    /// # Ok::<(), gemm::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Gemm::chosen_config`].
    pub fn plan(&self, precision: Precision, m: usize, n: usize, k: usize) -> Result<Plan, Error> {
        // Row-major operands: op = T makes the kernel read that operand column-major.
        let of = |op: Op| if op == Op::N { Layout::RowMajor } else { Layout::ColMajor };
        self.plan_for_layouts(precision, m, n, k, KernelLayouts { a: of(self.desc.op_a), b: of(self.desc.op_b) })
    }

    /// [`Gemm::plan`] for a kernel that reads A and B in `layouts` (C
    /// row-major): what a call runs whose kernel form
    /// ([`GemmDims::kernel_form`]) has these dimensions and layouts.
    ///
    /// # Errors
    /// As [`Gemm::chosen_config`].
    pub fn plan_for_layouts(
        &self,
        precision: Precision,
        m: usize,
        n: usize,
        k: usize,
        layouts: KernelLayouts,
    ) -> Result<Plan, Error> {
        let device = match &self.device {
            Some(d) => Some(d.clone()),
            None => default_device().ok(),
        };
        self.plan_on(device.as_deref(), precision, (m, n, k), layouts, 1)
    }

    /// The plan of `count` products (kernel form) on `device` (None: as on
    /// the measured device): the configuration, and for a single product
    /// the split of k.
    pub(crate) fn plan_on(
        &self,
        device: Option<&Device>,
        precision: Precision,
        (m, n, k): (usize, usize, usize),
        layouts: KernelLayouts,
        count: usize,
    ) -> Result<Plan, Error> {
        let chosen = self.chosen_config(precision)?;
        let mut plan = match chosen {
            Some(config) => Plan {
                config,
                source: PlanSource::Chosen,
                split_k: 1,
                split: SplitReason::NotConsidered,
                pack: false,
                pack_reason: PackReason::NotConsidered,
                tail: None,
            },
            None => crate::tuning::choose_batched(device.map(Device::name), precision, m, n, k, layouts, count),
        };
        // A split or packing asked of a batch, `.split_k(0)`: the call's errors.
        self.check_options(precision, count > 1)?;
        match self.pack {
            Some(p) => (plan.pack, plan.pack_reason) = (p && layouts != KernelLayouts::PACKED, PackReason::Chosen),
            None if count > 1 || k == 0 => (plan.pack, plan.pack_reason) = (false, PackReason::NotConsidered),
            None => {}
        }
        match self.split_k {
            Some(s) => (plan.split_k, plan.split) = (s, SplitReason::Chosen),
            None if chosen.is_none() && count == 1 => {
                let kernel_layouts = plan.kernel_layouts(layouts);
                (plan.split_k, plan.split) =
                    plan_split(device, precision, plan.config, (m, n, k), (layouts, kernel_layouts), &plan.source)?;
                if matches!(plan.split, SplitReason::Model { .. }) && self.balance_last_wave {
                    plan.tail = model_tail_for(device, precision, plan.config, (m, n, k), plan.split_k)?;
                    if plan.tail.is_some() {
                        plan.split_k = 1;
                    }
                }
                // A row's packing was measured with its own split: where
                // the model splits all of k, read the operands in place
                // (`PackReason::Split`) and split for those layouts - unless
                // in place it would not split, where the packed plan stands.
                let modeled = matches!(plan.split, SplitReason::Model { .. });
                if modeled && plan.split_k > 1 && plan.pack && plan.pack_reason == PackReason::Measured {
                    let in_place = Plan { pack: false, pack_reason: PackReason::Split, ..plan };
                    let kernel_layouts = in_place.kernel_layouts(layouts);
                    let (split_k, split) =
                        plan_split(device, precision, plan.config, (m, n, k), (layouts, kernel_layouts), &plan.source)?;
                    if split_k > 1 {
                        plan = Plan { split_k, split, ..in_place };
                    }
                }
            }
            None => {}
        }
        Ok(plan)
    }

    /// The stream of a call on `device`: the builder's, else the device's.
    pub(crate) fn stream_on(&self, device: &Device) -> Result<Arc<CudaStream>, Error> {
        device.stream_or(self.stream.as_ref())
    }

    /// Where this call runs, as the builder says (its device and stream).
    pub(crate) fn target(&self) -> Target<'_> {
        Target { device: self.device.as_ref(), stream: self.stream.as_ref() }
    }

    /// Runs `C <- alpha * op(A) * op(B) + beta * C` on host matrices or
    /// views: uploads what the product reads (A and B unless alpha = 0 or
    /// k = 0, C when beta != 0), runs the kernel, and writes C's elements
    /// back (its padding is left as it was). Blocks until C holds the result.
    ///
    /// # Errors
    /// [`Error::Config`], [`Error::Shape`] (checked before the GPU is
    /// touched), [`Error::DeviceLimit`], [`Error::NoDriver`],
    /// [`Error::NoDevice`], [`Error::OutOfMemory`], [`Error::Driver`]. C is
    /// untouched on error.
    ///
    /// The element types are any [`Product`]: f64 or f32 throughout (f32 on
    /// TF32 tensor cores with [`Gemm::allow_tf32`]), f16 / bf16 operands with
    /// a C of the same type or f32, or i8 operands with an i32 C (stage 9 on
    /// compute capability 9.0, stage 8's `mma.sync` kernels on 8.x;
    /// [`Error::Unsupported`] on older GPUs).
    pub fn run<'a, 'b, 'c, T: Product<C>, C: Scalar>(
        &self,
        a: impl Into<MatRef<'a, T>>,
        b: impl Into<MatRef<'b, T>>,
        c: impl Into<MatMut<'c, C>>,
    ) -> Result<(), Error> {
        let kernels = self.kernels::<T, C>(false, None)?;
        self.run_on(kernels, a.into(), b.into(), c.into())
    }

    /// Enqueues `C <- alpha * op(A) * op(B) + beta * C` on matrices already on
    /// the GPU (a [`crate::DeviceMatrix`] as `&a`, `&mut c`, or views of one:
    /// sub-matrices, transposes), on the builder's stream or else the
    /// device's, and returns without waiting (as cuBLAS does): synchronize
    /// the stream, or copy C back, to see the result and any error from the
    /// kernel.
    ///
    /// ```no_run
    /// use gemm::{DeviceMatrix, Gemm, Layout, Op};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let dev = gemm::default_device()?;
    /// let stream = dev.context().new_stream()?;
    /// let a = DeviceMatrix::from_cuda_slice(&dev, stream.alloc_zeros::<f64>(200 * 300)?, 200, 300, Layout::RowMajor, 300)?;
    /// let b = DeviceMatrix::<f64>::zeros_in(&dev, 200, 100, Layout::ColMajor)?;
    /// let mut c = DeviceMatrix::<f64>::zeros(&dev, 300, 100)?;
    /// Gemm::new().op_a(Op::T).stream(&stream).run_device(&a, &b, &mut c)?;
    /// stream.synchronize()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Gemm::run`], plus [`Error::DeviceMismatch`] when the operands live
    /// on different devices (or not on the device set with [`Gemm::device`]),
    /// [`Error::ContextMismatch`] for a stream of another context, and
    /// [`ShapeError::Overlap`](crate::ShapeError::Overlap) when C shares memory with A or B.
    pub fn run_device<'a, 'b, 'c, T: Product<C>, C: Scalar>(
        &self,
        a: impl Into<DeviceView<'a, T>>,
        b: impl Into<DeviceView<'b, T>>,
        c: impl Into<DeviceViewMut<'c, C>>,
    ) -> Result<(), Error> {
        let (a, b, c) = (a.into(), b.into(), c.into());
        let kernels = self.kernels::<T, C>(false, Some(c.device))?;
        self.run_device_on(kernels, a, b, c)
    }

    /// The options a call of `precision` (a batch when `batch`) cannot take,
    /// found before the device is opened: `.split_k(0)`; a split or packing
    /// asked of a batch; `.allow_tf32(true)` on an f64 product.
    pub(crate) fn check_options(&self, precision: Precision, batch: bool) -> Result<(), Error> {
        match self.split_k {
            Some(0) => return Err(Error::SplitK { slices: 0, why: "a product needs at least one slice of k" }),
            Some(s) if s > 1 && batch => return Err(Error::SplitK { slices: s, why: BATCHES_NOT_SPLIT }),
            _ => {}
        }
        if batch && self.pack == Some(true) {
            return Err(Error::Pack { why: BATCHES_NOT_PACKED });
        }
        if self.tf32 && precision == Precision::F64 {
            return Err(Error::Unsupported {
                product: "f64 x f64 -> f64".into(),
                why: ".allow_tf32(true) applies to f32 products; an f64 product never runs on TF32 tensor cores".into(),
            });
        }
        Ok(())
    }

    /// What the host path takes of this call.
    pub(crate) fn host_call(&self) -> HostCall {
        HostCall {
            alpha: self.desc.alpha,
            beta: self.desc.beta,
            streams: self.host_streams,
            budget: self.memory_budget,
        }
    }

    /// The host path's options ([`Gemm::host_streams`],
    /// [`Gemm::memory_budget`]) on a call with device operands, which they
    /// cannot apply to: an error rather than ignored.
    pub(crate) fn check_device_call(&self) -> Result<(), Error> {
        self.check_no_group("device matrices (their device decides; see DistMatrix for matrices over several GPUs)")?;
        let set =
            [(self.host_streams.is_some(), ".host_streams(..)"), (self.memory_budget.is_some(), ".memory_budget(..)")];
        match set.into_iter().find_map(|(set, name)| set.then_some(name)) {
            Some(option) => Err(Error::Unsupported {
                product: "device-matrix".into(),
                why: format!(
                    "{option} applies to products of host matrices (the host path); device matrices are not streamed"
                ),
            }),
            None => Ok(()),
        }
    }

    /// The first of the options that choose or tune a kernel of stages 1-8
    /// that is set, by its builder method's name.
    pub(crate) fn tuning_option_set(&self) -> Option<&'static str> {
        [
            (self.stage.is_some(), ".stage(..)"),
            (self.kernel.is_some(), ".kernel(..)"),
            (self.block.is_some(), ".block_dim(..)"),
            (self.tile.is_some(), ".tile_size(..)"),
            (self.outputs.is_some(), ".outputs_per_thread(..)"),
            (self.block_tile.is_some(), ".block_tile(..)"),
            (self.warp_tile.is_some(), ".warp_tile(..)"),
            (self.thread_tile.is_some(), ".thread_tile(..)"),
            (self.pipeline_depth.is_some(), ".pipeline_depth(..)"),
            (self.split_k.is_some(), ".split_k(..)"),
            (self.pack == Some(true), ".pack(true)"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }

    /// The stage asked for with [`Gemm::stage`], if any.
    pub(crate) fn stage_option(&self) -> Option<Stage> {
        self.stage
    }

    /// Forgets the stage asked for (to see which other options are set).
    pub(crate) fn clear_stage(&mut self) {
        self.stage = None;
    }

    /// The builder's device, if set (else the first of its group,
    /// [`Gemm::devices`]).
    pub(crate) fn device_option(&self) -> Option<&Arc<Device>> {
        self.device.as_ref().or_else(|| self.devices.as_ref().and_then(|g| g.first()))
    }

    /// Whether [`Gemm::device`] is set.
    pub(crate) fn has_device(&self) -> bool {
        self.device.is_some()
    }

    /// Whether [`Gemm::stream`] is set.
    pub(crate) fn has_stream(&self) -> bool {
        self.stream.is_some()
    }
}

/// The SMs and compute capability planned for without a device: an H100
/// SXM's (132 SMs, 9.0), the device the tables were measured on.
pub(crate) const ASSUMED: (u32, (i32, i32), &str) =
    (132, (9, 0), "no device: planned as for compute capability 9.0, 132 SMs");

impl Gemm {
    /// What a product of `T` operands into a `C` runs with this builder's
    /// options, and why, for every type pair of [`Product`]: the kernel
    /// family and stage, the kernel and its tile, the slices of k, the route
    /// (TMA, A through registers, the transposed product, TMA or per-thread
    /// stores of C), the copies made first, and the device it planned for
    /// (the builder's, else the default device, else an assumed compute
    /// capability 9.0 with 132 SMs, said so). Operands are taken row-major
    /// with the builder's op flags (op = T: that operand read
    /// column-major), leading dimensions packed, C row-major. f64 and f32
    /// (without TF32) give [`Gemm::plan`]'s answer.
    ///
    /// ```
    /// use gemm::half::bf16;
    /// let plan = gemm::Gemm::new().plan_for::<bf16, f32>(4096, 1024, 4096)?;
    /// println!("{plan}"); // "bf16 x bf16 -> f32: stage 9 (warpgroup MMA), wgmma_bf16_f32_b128x256_d4_nt ..."
    /// let tf32 = gemm::Gemm::new().allow_tf32(true).plan_for::<f32, f32>(4096, 4096, 4096)?;
    /// assert!(tf32.product.contains("TF32"));
    /// # Ok::<(), gemm::Error>(())
    /// ```
    ///
    /// # Errors
    /// The options' errors a call would give before it opens the device
    /// ([`Error::Unsupported`] for an option that does not apply to the
    /// type, [`Error::SplitK`], [`Error::Config`], ...).
    pub fn plan_for<T: Product<C>, C: Scalar>(&self, m: usize, n: usize, k: usize) -> Result<ProductPlan, Error> {
        let mut plan = self.plan_for_batch::<T, C>(m, n, k, 1)?;
        if self.devices.is_some() {
            let group = self.device_group()?;
            let whole_c = self.kernels::<T, C>(false, None)?.host_policy(size_of::<C>()).whole_c;
            if group.len() > 1 {
                plan.devices = Some(self.device_split(&group, (m, n, k), whole_c));
            }
        }
        Ok(plan)
    }

    /// [`Gemm::plan_for`] for a batch of `count` products of one shape: a
    /// strided batch ([`Gemm::run_strided`], [`Gemm::run_strided_device`])
    /// or a pointer-array batch ([`Gemm::run_batched_device`]), each one
    /// launch (a pointer-array batch on stage 8's mixed-precision kernels:
    /// one launch per product); the kernel is planned for the whole batch,
    /// and a batch's products are not split along k. `count` 0 or 1 plans
    /// one product. Where it answers with the token-sized kernels
    /// ([`KernelFamily::Skinny`]), that is a strided batch's plan: a
    /// pointer-array or grouped batch runs them on its other kernels.
    ///
    /// ```
    /// use gemm::half::f16;
    /// let plan = gemm::Gemm::new().plan_for_batch::<f16, f32>(256, 256, 4096, 64)?;
    /// assert_eq!(plan.split_k, 1);
    /// # Ok::<(), gemm::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Gemm::plan_for`], plus a split or packing asked of a batch
    /// ([`Error::SplitK`], [`Error::Pack`]).
    pub fn plan_for_batch<T: Product<C>, C: Scalar>(
        &self,
        m: usize,
        n: usize,
        k: usize,
        count: usize,
    ) -> Result<ProductPlan, Error> {
        let count = count.max(1);
        if self.emulation.is_some() {
            return self.plan_emulated::<T, C>((m, n, k), count);
        }
        if let Some(plan) = self.plan_skinny::<T, C>((m, n, k), count)? {
            return Ok(plan);
        }
        match T::TYPES {
            Types::F64 => self.plan_ladder(Precision::F64, (m, n, k), count),
            Types::F32 => self.plan_f32((m, n, k), count),
            Types::Mixed(types) => self.plan_mixed(types, (m, n, k), count),
        }
    }

    /// The device a plan is made for: the builder's, else the default one.
    pub(crate) fn plan_device(&self) -> Option<std::sync::Arc<Device>> {
        self.device_option().cloned().or_else(|| default_device().ok())
    }

    /// [`Gemm::plan_for`] for f32: on TF32 tensor cores when a call would
    /// run there (without a device: as on compute capability 9.0), else the
    /// f32 ladder.
    pub(crate) fn plan_f32(&self, dims: (usize, usize, usize), count: usize) -> Result<ProductPlan, Error> {
        // As a call: the host path's options with TF32 are an error.
        let tf32 = match self.plan_device() {
            Some(d) => self.uses_tf32(Some(&d))?,
            None => self.tf32_by_options(),
        };
        if tf32 {
            self.plan_mixed(WgmmaTypes::Tf32, dims, count)
        } else {
            self.plan_ladder(Precision::F32, dims, count)
        }
    }

    /// [`Gemm::plan_for`] for f64 and f32 on the ladder.
    pub(crate) fn plan_ladder(
        &self,
        precision: Precision,
        (m, n, k): (usize, usize, usize),
        count: usize,
    ) -> Result<ProductPlan, Error> {
        let dims = self.planned_dims((m, n, k));
        let plan = self.plan_on(self.plan_device().as_deref(), precision, (m, n, k), dims.layouts(), count)?;
        let name = precision.name();
        let device = self.plan_device().map_or_else(|| ASSUMED.2.to_string(), |d| d.name().to_string());
        let copies = ladder_copies(&plan, &dims, precision);
        Ok(ProductPlan {
            product: format!("{name} x {name} -> {name}"),
            split_k: plan.split_k,
            family: KernelFamily::Ladder(plan),
            route: String::new(),
            copies,
            why: String::new(),
            device,
            devices: None,
        })
    }

    /// The m x n x k product a plan is made for: op(A) and op(B) stored as
    /// the builder's op flags say, packed, into a packed row-major C.
    pub(crate) fn planned_dims(&self, (m, n, k): (usize, usize, usize)) -> GemmDims {
        let of = |op: Op| if op == Op::N { Layout::RowMajor } else { Layout::ColMajor };
        let (a_layout, b_layout) = (of(self.desc.op_a), of(self.desc.op_b));
        GemmDims {
            m,
            n,
            k,
            lda: if a_layout == Layout::RowMajor { k } else { m },
            ldb: if b_layout == Layout::RowMajor { n } else { k },
            ldc: n,
            a_layout,
            b_layout,
            c_layout: Layout::RowMajor,
        }
    }

    /// [`Gemm::plan_for`] for the mixed-precision products (f16, bf16, TF32, i8).
    pub(crate) fn plan_mixed(
        &self,
        types: WgmmaTypes,
        (m, n, k): (usize, usize, usize),
        count: usize,
    ) -> Result<ProductPlan, Error> {
        let mma_sync = self.mixed_options(types)?;
        let device = self.plan_device();
        let (sm_count, cc, where_) = match &device {
            Some(d) => (d.sm_count(), d.compute_capability(), d.name().to_string()),
            None => (ASSUMED.0, ASSUMED.1, ASSUMED.2.to_string()),
        };
        if cc < (8, 0) {
            return Err(Error::Unsupported {
                product: product_name(types),
                why: format!("its kernels need compute capability 8.0 or newer; {where_} has {}.{}", cc.0, cc.1),
            });
        }
        let row_major_c = self.planned_dims((m, n, k));
        let (a_layout, b_layout) = (row_major_c.a_layout, row_major_c.b_layout);
        let reads_ab = self.desc.alpha != 0.0 && k > 0;
        let product = product_name(types);
        if cc != (9, 0) || mma_sync {
            let mut copies = Vec::new();
            let max_smem =
                device.as_ref().map_or(gemm_core::warpgroup::MAX_SMEM_BYTES, |d| d.limits().max_smem_per_block);
            let kernel = mma_launch(types, &row_major_c, sm_count, max_smem).kernel;
            // Stage 8 reads f16/bf16 in any layout (ldmatrix .trans); tf32
            // and i8 only K-major: others are transposed first.
            if !types.transposes() && reads_ab {
                if a_layout == Layout::ColMajor {
                    copies.push("A transposed to K-major".to_string());
                }
                if b_layout == Layout::RowMajor {
                    copies.push("B transposed to K-major".to_string());
                }
            }
            let why = if mma_sync {
                ".stage(Stage::TensorCore) asks for stage 8".to_string()
            } else {
                format!("compute capability {}.{}: stage 9 needs 9.0", cc.0, cc.1)
            };
            return Ok(ProductPlan {
                product,
                family: KernelFamily::MmaSync { kernel: kernel.name, tile: kernel.tile },
                split_k: 1,
                route: "cp.async into swizzled shared memory, ldmatrix".to_string(),
                copies,
                why: format!("{why}; the deepest pipeline that fits, the 128 x 256 tile where it fills the SMs"),
                device: where_,
                devices: None,
            });
        }
        // The launch a call of this product would run (C row-major: the
        // user's form is the kernel form).
        let launch =
            warpgroup_launch(types, &row_major_c, self.desc.alpha, (count, sm_count), None, self.balance_last_wave);
        let (route, family, (slices, _)) = (launch.route, launch.kernel, launch.split);
        let kd = route.dims;
        let (route_text, copies, layouts) = describe_warpgroup(types, &launch, None);
        let kernel =
            family.names[layouts].or(family.names[1]).expect("a kernel for the layouts the operands are brought to");
        let mut why = format!(
            "the tile with the least estimated time on {sm_count} SMs (whole waves of block tiles{}, bytes at HBM's rate)",
            if slices > 1 { ", k split where the tiles leave SMs idle" } else { "" }
        );
        if let Some((t, _)) = launch.tail {
            let (rows, tiles) = (kd.m - t.head_rows as usize, family.tile.tiles(kd.m as u32, kd.n as u32, 1));
            why.push_str(&format!(
                "; last wave balanced: C's first {} rows whole in full waves, the other {rows} rows with k in {} \
                 slices into an f32 (i32) workspace, summed in slice order ({tiles} block tiles for {sm_count} SMs; \
                 device matrices only: the host path's tiles run whole)",
                t.head_rows, t.split.0
            ));
        }
        Ok(ProductPlan {
            product,
            family: KernelFamily::Warpgroup { kernel, tile: family.tile },
            split_k: slices,
            route: route_text,
            copies,
            why,
            device: where_,
            devices: None,
        })
    }
}

/// What a plan says of the stage-9 `launch` of `types` (planned for a
/// row-major C, [`Gemm::planned_dims`]): its route (the transposed
/// product, how A and B are read, `epilogue` where a fused epilogue is
/// applied, and how C is stored), the copies made first, and the index
/// ([`KernelLayouts::index`]) of the layouts the kernel reads: the
/// operands' own or their K-major copies', `_nt` where A and B are not
/// read (as the launch picks).
pub(crate) fn describe_warpgroup(
    types: WgmmaTypes,
    launch: &WarpgroupLaunch,
    epilogue: Option<&str>,
) -> (String, Vec<String>, usize) {
    let (route, family, (slices, _)) = (launch.route, launch.kernel, launch.split);
    let kd = route.dims;
    let mut parts = Vec::new();
    let mut copies = Vec::new();
    if route.token {
        parts.push("the transposed product C^T = B^T A^T (C's few rows in wgmma's N), C stored transposed");
    } else if route.transposed_c && launch.swapped {
        parts.push("the transposed product C^T = B^T A^T (wgmma reads B only K-major in TF32), C stored transposed");
    } else if route.transposed_c {
        // A fused product whose A keeps its place (`warpgroup_fused_launch`).
        parts.push("C stored transposed by the threads");
    }
    let (a_k_major, b_k_major) = (kd.a_layout == Layout::RowMajor, kd.b_layout == Layout::ColMajor);
    let (mut read_a, mut read_b) = (kd.a_layout, kd.b_layout);
    if launch.reads_ab {
        let elem = types.input_bytes() as usize;
        let realign = launch.realign;
        // The user's names: the transposed product's A is op(B)^T.
        let (name_a, name_b) = if launch.swapped { ("B", "A") } else { ("A", "B") };
        for (i, (name, k_major, ld)) in
            [(name_a, a_k_major, kd.lda), (name_b, b_k_major, kd.ldb)].into_iter().enumerate()
        {
            if !read_in_layout(types, family.tile, i, k_major) {
                copies.push(if types.transposes() {
                    format!("{name} transposed to K-major (a narrow tile reads B only K-major)")
                } else {
                    format!("{name} transposed to K-major (wgmma reads {} only K-major)", short(types))
                });
                if i == 0 {
                    read_a = Layout::RowMajor;
                } else {
                    read_b = Layout::ColMajor;
                }
            } else if realign[i] && (ld * elem) % SECTOR_BYTES != 0 {
                copies.push(format!("{name} realigned to 128-byte lines (its lines are off 32-byte sectors)"));
            }
        }
        if types.register_a() && kd.a_layout == Layout::ColMajor {
            parts.push("A (MN-major) through registers");
        }
        parts.push("A and B by TMA into 128-byte-swizzled shared memory");
    } else {
        // With alpha = 0 or k = 0 the launch takes `_nt`, which every
        // family has (A and B are not read).
        (read_a, read_b) = (Layout::RowMajor, Layout::ColMajor);
    }
    if let Some(epilogue) = epilogue {
        parts.push(epilogue);
    }
    let c_bytes = types.output_bytes() as usize;
    if slices > 1 {
        parts.push("slices into an f32 (i32) workspace, summed in slice order");
    } else if !route.transposed_c && !family.tile.narrow() && (kd.n * c_bytes) % 16 == 0 {
        parts.push("C by TMA stores (lines on 16 bytes)");
    } else {
        parts.push("C by per-thread stores");
    }
    (parts.join(", "), copies, KernelLayouts { a: read_a, b: read_b }.index())
}

/// "TF32", "i8": the input type in words.
fn short(types: WgmmaTypes) -> &'static str {
    match types {
        WgmmaTypes::Tf32 => "TF32",
        WgmmaTypes::S8 => "i8",
        WgmmaTypes::F16 | WgmmaTypes::F16F32 => "f16",
        WgmmaTypes::Bf16 | WgmmaTypes::Bf16F32 => "bf16",
        WgmmaTypes::E4m3Bf16 | WgmmaTypes::E4m3F16 | WgmmaTypes::E4m3F32 => "e4m3",
        _ => "FP8",
    }
}

/// A ladder plan's copies of the product `kdims` (kernel form), as a
/// [`ProductPlan`] lists them: where the plan packs, the copies
/// [`gemm_core::pack::packed`] makes (of each operand whose lines run
/// along k).
pub(crate) fn ladder_copies(plan: &Plan, kdims: &GemmDims, precision: Precision) -> Vec<String> {
    if !plan.pack {
        return Vec::new();
    }
    let (_, copy_a, copy_b) = gemm_core::pack::packed(kdims, precision);
    let a = copy_a.map(|_| "A packed (its lines along m)".to_string());
    let b = copy_b.map(|_| "B packed (its lines along n)".to_string());
    a.into_iter().chain(b).collect()
}
