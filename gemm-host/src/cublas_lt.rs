//! cuBLASLt, the reference for the FP8 products (e4m3 x e4m3, e4m3 x e5m2,
//! e5m2 x e4m3), tensor-scaled ([`CublasLt::matmul_fp8`]), scaled per row
//! of A and column of B ([`CublasLt::matmul_fp8_channel_scaled`]) and
//! block-scaled ([`CublasLt::matmul_fp8_block_scaled`], e4m3: DeepGEMM's
//! 1 x 128 and 128 x 128 blocks), and for bf16 products with a fused bias and GELU
//! ([`CublasLt::matmul_bf16_bias_gelu`]) beside the plain one
//! ([`CublasLt::matmul_bf16`]): cuBLAS's FP8 matmul and its epilogues are
//! only in cuBLASLt (`cublasGemmEx` refuses FP8).

use crate::device::Device;
use crate::element::{Fp8, Scalar};
use crate::error::{DriverContext, Error};
use crate::operands::device_matrix::DeviceMatrix;
use cudarc::cublas::result::CublasError;
use cudarc::cublas::sys::{cublasOperation_t, cublasStatus_t};
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use float8::F8E4M3;
use gemm_core::shape::Layout;
use gemm_core::GemmDims;
use half::bf16;
use std::ffi::c_void;
use std::sync::Arc;

/// Bytes of the workspace each [`CublasLt`] hands to cuBLASLt's algorithm
/// search and matmul: 32 MiB, what NVIDIA recommends for Hopper.
const WORKSPACE_BYTES: usize = 32 << 20;

/// Elements of k (and rows or columns) one block scale covers.
const SCALE_BLOCK: usize = 128;

/// The oldest cuBLASLt with the 128-element and 128 x 128 FP8 block
/// scaling (`CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F`,
/// `CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F`): 12.9, as
/// `cublasLtGetVersion` reports it (major * 10000 + minor * 100 + patch).
const BLOCK_SCALING_VERSION: usize = 12_09_00;

/// A cuBLASLt handle with its workspace, bound to a device's stream: the
/// FP8 and fused-epilogue reference beside [`crate::Gemm::run_device`] and
/// [`crate::Fused::run_device`].
pub struct CublasLt {
    handle: sys::cublasLtHandle_t,
    device: Arc<Device>,
    workspace: CudaSlice<u8>,
}

impl CublasLt {
    /// Creates a cuBLASLt handle for `device` and its 32 MiB workspace
    /// (device memory, on the device's stream).
    ///
    /// # Errors
    /// [`Error::NoCublas`] when libcublasLt cannot be loaded;
    /// [`Error::OutOfMemory`] or [`Error::Driver`] from the workspace's
    /// allocation; [`Error::Cublas`] when `cublasLtCreate` fails.
    pub fn new(device: &Arc<Device>) -> Result<Self, Error> {
        // SAFETY: only tries to dlopen libcublasLt (cudarc panics without it).
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::NoCublas);
        }
        device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let workspace = device.stream().alloc_zeros::<u8>(WORKSPACE_BYTES).map_err(|e| {
            if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                Error::OutOfMemory { bytes: WORKSPACE_BYTES }
            } else {
                Error::Driver { call: "cuMemAllocAsync", source: e }
            }
        })?;
        let handle = lt::create_handle().map_err(|e| cublas_error("cublasLtCreate", e))?;
        Ok(CublasLt { handle, device: device.clone(), workspace })
    }

    /// The loaded cuBLASLt's version, as `cublasLtGetVersion` reports it:
    /// major * 10000 + minor * 100 + patch (12.9.0 is 120900).
    pub fn version(&self) -> usize {
        // SAFETY: takes no arguments; libcublasLt is loaded (checked in `new`).
        unsafe { sys::cublasLtGetVersion() }
    }

    /// Enqueues `C <- alpha * A * B + beta * C` through `cublasLtMatmul` on
    /// the device's stream (not synchronized): A is `m x k` row-major and B
    /// `k x n` column-major (both K-major, the one FP8 layout cuBLASLt takes
    /// on Ada and Hopper), e4m3 or e5m2 each (not both e5m2: cuBLASLt has no
    /// such matmul); C is `m x n` row-major of bf16, f16 or
    /// f32. Compute type `CUBLAS_COMPUTE_32F`, scale type f32 (alpha and
    /// beta), no per-tensor scales (all 1), the default epilogue and
    /// cuBLASLt's default accumulation (fast accumulation off); the
    /// algorithm is the first of `cublasLtMatmulAlgoGetHeuristic`'s, within
    /// the 32 MiB workspace.
    ///
    /// cuBLASLt is column-major: the row-major C is its `n x m` C^T (leading
    /// dimension C's), computed as `B^T * A^T` with the column-major B
    /// (`k x n`) as its first operand under op T and the row-major A (its
    /// column-major `k x m`) as its second under op N: the "TN" form.
    ///
    /// # Errors
    /// [`Error::Shape`] when A's columns are not B's rows or C is not
    /// `m x n`; [`Error::DeviceMismatch`] when an operand lives on another
    /// device; [`Error::Unsupported`] for another layout (A column-major,
    /// B or C row-major...), e5m2 x e5m2, a C type other than bf16, f16 or
    /// f32, k = 0, a GPU below compute capability 8.9, or no cuBLASLt
    /// algorithm for the
    /// shape (FP8 wants leading dimensions that are multiples of 16);
    /// [`Error::Cublas`] when a cuBLASLt call fails.
    pub fn matmul_fp8<A: Fp8, B: Fp8, C: Scalar>(
        &self,
        alpha: f32,
        a: &DeviceMatrix<A>,
        b: &DeviceMatrix<B>,
        beta: f32,
        c: &mut DeviceMatrix<C>,
    ) -> Result<(), Error> {
        let product = format!("{} x {} -> {} (cuBLASLt)", A::NAME, B::NAME, C::NAME);
        let Some((dims, c_type)) = self.fp8_problem(&product, a, b, c)? else {
            return Ok(());
        };
        let problem = LtMatmul::fp8_tn(&dims, c_type, None);
        let stream = self.device.stream();
        let (pa, _ra) = a.buffer().device_ptr(stream);
        let (pb, _rb) = b.buffer().device_ptr(stream);
        let (pc, _rc) = c.buffer_mut().device_ptr_mut(stream);
        // SAFETY: `fp8_problem` validated the shapes and leading dimensions
        // against the buffers' lengths, so cuBLASLt reads A and B and reads
        // and writes C (also D) inside them; the addresses are the
        // buffers', on the device's stream, and their records (`_ra`...)
        // live until the matmul is enqueued.
        unsafe { self.enqueue(&problem, (alpha, beta), (pb, pa, pc), || no_fp8_algorithm(&product, &dims)) }
    }

    /// Enqueues `C <- rs(i) cs(j) (A * B)(i, j)` through `cublasLtMatmul`
    /// on the device's stream (not synchronized): per-channel FP8 scaling,
    /// one f32 scale per row of A (`row_scales`, m values, A's "per-token"
    /// scales) and one per column of B (`col_scales`, n values, B's
    /// "per-channel" scales), alpha 1 and beta 0; cuBLASLt's
    /// `CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F` on both operands
    /// (cuBLAS 12.9 and newer, compute capability 9.0). Operands and C as
    /// [`CublasLt::matmul_fp8`] (A row-major, B column-major, e4m3 or e5m2
    /// but not both e5m2; C row-major bf16, f16 or f32). Each scale buffer
    /// must start on 16 bytes (a whole [`CudaSlice`] does); the scales are
    /// applied as they are. Ours is [`crate::Epilogue::row_scales`] with
    /// [`crate::Epilogue::col_scales`].
    ///
    /// # Errors
    /// As [`CublasLt::matmul_fp8`]; [`Error::Epilogue`] when a scale buffer
    /// is shorter than m (rows) or n (columns); [`Error::ContextMismatch`]
    /// when it belongs to another device's context; [`Error::Unsupported`]
    /// below compute capability 9.0, with a cuBLASLt older than 12.9, for a
    /// scale buffer not on 16 bytes, or no cuBLASLt algorithm for the
    /// shape.
    pub fn matmul_fp8_channel_scaled<A: Fp8, B: Fp8, C: Scalar>(
        &self,
        a: &DeviceMatrix<A>,
        b: &DeviceMatrix<B>,
        c: &mut DeviceMatrix<C>,
        row_scales: &CudaSlice<f32>,
        col_scales: &CudaSlice<f32>,
    ) -> Result<(), Error> {
        let product = format!("{} x {} -> {} channel-scaled (cuBLASLt)", A::NAME, B::NAME, C::NAME);
        let unsupported = |why: String| Error::Unsupported { product: product.clone(), why };
        let Some((dims, types)) = self.fp8_problem(&product, a, b, c)? else {
            return Ok(());
        };
        self.check_scaling(&product, "per-row and per-column scaling")?;
        self.check_buffers(
            &dims,
            [
                ("the row scales (cuBLASLt)", row_scales, dims.m, String::new()),
                ("the column scales (cuBLASLt)", col_scales, dims.n, String::new()),
            ],
        )?;
        let stream = self.device.stream();
        let (prs, _rrs) = row_scales.device_ptr(stream);
        let (pcs, _rcs) = col_scales.device_ptr(stream);
        if prs % 16 != 0 || pcs % 16 != 0 {
            return Err(unsupported(format!(
                "cuBLASLt's scale buffers start on 16 bytes; the row scales start at {prs:#x}, the column scales at \
                 {pcs:#x}"
            )));
        }
        // cuBLASLt's A' is our B (its m our n: the column scales), its B'
        // our A (its n our m: the row scales).
        let outer = sys::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        let problem = LtMatmul::fp8_tn(&dims, types, Some([(outer, pcs), (outer, prs)]));
        let (pa, _ra) = a.buffer().device_ptr(stream);
        let (pb, _rb) = b.buffer().device_ptr(stream);
        let (pc, _rc) = c.buffer_mut().device_ptr_mut(stream);
        // SAFETY: `fp8_problem` validated the shapes and leading dimensions
        // against the buffers' lengths, so cuBLASLt reads A and B and reads
        // and writes C (also D) inside them; the scale buffers hold n and m
        // values (checked above); the addresses are the buffers', on the
        // device's stream, and their records live until the matmul is
        // enqueued.
        unsafe { self.enqueue(&problem, (1.0, 0.0), (pb, pa, pc), || no_fp8_algorithm(&product, &dims)) }
    }

    /// Enqueues `C <- A * B` with DeepGEMM's FP8 block scales through
    /// `cublasLtMatmul` on the device's stream (not synchronized): each
    /// 128-long piece along k of the product is multiplied by the scale of
    /// its 1 x 128 block of A and that of its 128 x 128 block of B,
    ///
    /// ```text
    /// C[i, j] = sum over kb of a_scale(i, kb) b_scale(kb, j / 128) sum over p in [128 kb, 128 kb + 128) of A[i, p] B[p, j]
    /// ```
    ///
    /// (alpha 1, beta 0), accumulated in f32. A is `m x k` row-major and B
    /// `k x n` column-major, both e4m3; C is `m x n` row-major of bf16, f16
    /// or f32; the "TN" form of [`CublasLt::matmul_fp8`], with cuBLASLt's
    /// `CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F` scale mode on its A
    /// (our B) and `CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F` on its B (our
    /// A), a combination cuBLASLt supports (cuBLAS 12.9 and newer, compute
    /// capability 9.0; fast accumulation off, as block scaling requires).
    ///
    /// The scales are f32 in device memory, in the layouts cuBLASLt reads
    /// (its "Scaling factors layouts" for the 128-element 1D and 128 x 128
    /// 2D block scaling, with its A, B, M, N our B, A, n, m), with
    /// `L = ceil(k / 128)` k blocks and `L4` = L rounded up to a multiple
    /// of 4:
    ///
    /// - `a_scales`, A's: the scale of row i and k block kb (A[i, 128 kb ..
    ///   128 kb + 127]) at `a_scales[kb * m + i]`, a column-major `m x L`
    ///   matrix (cuBLASLt's "N-major N x L"), at least `m * L` values: the
    ///   default layout of [`crate::BlockScales::new`] for A.
    /// - `b_scales`, B's: the scale of the block of rows `128 kb ..` and
    ///   columns `128 jb ..` at `b_scales[jb * L4 + kb]`, a column-major
    ///   `L x ceil(n / 128)` matrix with leading dimension L4 (cuBLASLt's
    ///   "K-major L4 x ceil(M / 128)"), at least `ceil(n / 128) * L4`
    ///   values (entries `L..L4` of each column are not read). The default
    ///   layout of [`crate::BlockScales::new`] for B has leading dimension
    ///   L: the same when L is a multiple of 4 (`512 (q - 1) < k <= 512 q`);
    ///   otherwise convert it with [`cublaslt_block_scales`] (or hand the
    ///   padded layout to ours too, with `BlockScales::b_strides(L4, 1)`).
    ///
    /// Each scale buffer must start on 16 bytes (a whole [`CudaSlice`]
    /// does); the scales are applied as they are (a negative one too).
    ///
    /// # Errors
    /// As [`CublasLt::matmul_fp8`] (shapes, devices, layouts, C's type,
    /// k = 0); [`Error::Epilogue`] when a scale buffer is shorter than the
    /// layout above needs; [`Error::ContextMismatch`] when a scale buffer
    /// belongs to another device's context; [`Error::Unsupported`] on a GPU
    /// below compute capability 9.0, with a cuBLASLt older than 12.9 (it
    /// has no block scaling), when m or n is not a multiple of 4 (cuBLASLt
    /// wants the scale columns on 16 bytes), a scale buffer that does not
    /// start on 16 bytes, or no cuBLASLt algorithm for the shape (on newer
    /// GPUs, where cuBLASLt has no 128-element block scaling, too);
    /// [`Error::Cublas`] when a cuBLASLt call fails.
    pub fn matmul_fp8_block_scaled<C: Scalar>(
        &self,
        a: &DeviceMatrix<F8E4M3>,
        b: &DeviceMatrix<F8E4M3>,
        c: &mut DeviceMatrix<C>,
        a_scales: &CudaSlice<f32>,
        b_scales: &CudaSlice<f32>,
    ) -> Result<(), Error> {
        let product = format!("e4m3 x e4m3 -> {} block-scaled (cuBLASLt)", C::NAME);
        let unsupported = |why: String| Error::Unsupported { product: product.clone(), why };
        let Some((dims, c_type)) = self.fp8_problem(&product, a, b, c)? else {
            return Ok(());
        };
        let (m, n, k) = (dims.m, dims.n, dims.k);
        self.check_scaling(&product, "128-element and 128x128 block scaling")?;
        if m % 4 != 0 || n % 4 != 0 {
            return Err(unsupported(format!(
                "cuBLASLt's block scaling wants m and n multiples of 4 (its scale columns start on 16 bytes); \
                 the product is {m} x {n} x {k}"
            )));
        }
        let (a_len, b_len) = cublaslt_scale_lens(m, n, k);
        let k_blocks = k.div_ceil(SCALE_BLOCK);
        self.check_buffers(
            &dims,
            [
                ("A's block scales (cuBLASLt)", a_scales, a_len, format!(" (column-major {m} x {k_blocks})")),
                (
                    "B's block scales (cuBLASLt)",
                    b_scales,
                    b_len,
                    format!(
                        " (column-major {k_blocks} x {} with leading dimension {})",
                        n.div_ceil(SCALE_BLOCK),
                        k_blocks.next_multiple_of(4)
                    ),
                ),
            ],
        )?;
        let stream = self.device.stream();
        let (psa, _rsa) = a_scales.device_ptr(stream);
        let (psb, _rsb) = b_scales.device_ptr(stream);
        if psa % 16 != 0 || psb % 16 != 0 {
            return Err(unsupported(format!(
                "cuBLASLt's scale buffers start on 16 bytes; A's start at {psa:#x}, B's at {psb:#x}"
            )));
        }
        // cuBLASLt's A is our B (128 x 128 blocks), its B our A (1 x 128).
        let scales = [
            (sys::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, psb),
            (sys::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, psa),
        ];
        let problem = LtMatmul::fp8_tn(&dims, c_type, Some(scales));
        let (pa, _ra) = a.buffer().device_ptr(stream);
        let (pb, _rb) = b.buffer().device_ptr(stream);
        let (pc, _rc) = c.buffer_mut().device_ptr_mut(stream);
        // SAFETY: `fp8_problem` validated the shapes and leading dimensions
        // against the buffers' lengths, so cuBLASLt reads A and B and reads
        // and writes C (also D) inside them; the scale buffers hold what
        // the layouts above read (checked just above); the addresses are
        // the buffers', on the device's stream, and their records live
        // until the matmul is enqueued.
        unsafe { self.enqueue(&problem, (1.0, 0.0), (pb, pa, pc), || no_fp8_algorithm(&product, &dims)) }
    }

    /// Enqueues `C <- A * B` for bf16 operands and a bf16 C through
    /// `cublasLtMatmul` on the device's stream (not synchronized): the plain
    /// product beside [`CublasLt::matmul_bf16_bias_gelu`], with the same
    /// operands and settings (compute type `CUBLAS_COMPUTE_32F`, scale
    /// type f32, alpha 1, beta 0; the algorithm the first of
    /// `cublasLtMatmulAlgoGetHeuristic`'s within the 32 MiB workspace).
    ///
    /// A is `m x k` and B `k x n`, each row- or column-major (the layout of
    /// [`crate::Fused::run_device`]'s operands: A row-major and B
    /// column-major, the "TN" form of [`CublasLt::matmul_fp8`]); C is
    /// `m x n` row-major, cuBLASLt's column-major `n x m` D = op(B') op(A')
    /// over the same storage.
    ///
    /// # Errors
    /// [`Error::Shape`] when A's columns are not B's rows or C is not
    /// `m x n`; [`Error::DeviceMismatch`] when an operand lives on another
    /// device; [`Error::Unsupported`] for a column-major C, k = 0, or no
    /// cuBLASLt algorithm for the shape; [`Error::Cublas`] when a cuBLASLt
    /// call fails.
    pub fn matmul_bf16(
        &self,
        a: &DeviceMatrix<bf16>,
        b: &DeviceMatrix<bf16>,
        c: &mut DeviceMatrix<bf16>,
    ) -> Result<(), Error> {
        self.bf16_product(a, b, c, None)
    }

    /// Enqueues `C <- GELU(A * B + bias)` for bf16 operands, a bf16 C and a
    /// bf16 bias through `cublasLtMatmul` with its fused
    /// `CUBLASLT_EPILOGUE_GELU_BIAS` epilogue, on the device's stream (not
    /// synchronized): `bias[j]` is added to column j of C (n values), then
    /// GELU with the tanh approximation, `0.5 v (1 + tanh(sqrt(2 / pi) (v +
    /// 0.044715 v^3)))`, as [`crate::Activation::Gelu`]. Operands, layouts
    /// and settings as [`CublasLt::matmul_bf16`].
    ///
    /// cuBLASLt adds its bias per row of D (a vector as long as D's rows);
    /// D is the column-major `n x m` C^T, so its rows are C's columns: the
    /// bias is per column of C, as asked.
    ///
    /// # Errors
    /// As [`CublasLt::matmul_bf16`]; [`Error::Epilogue`] when the bias holds
    /// fewer than n values; [`Error::ContextMismatch`] when it belongs to
    /// another device's context.
    pub fn matmul_bf16_bias_gelu(
        &self,
        a: &DeviceMatrix<bf16>,
        b: &DeviceMatrix<bf16>,
        c: &mut DeviceMatrix<bf16>,
        bias: &CudaSlice<bf16>,
    ) -> Result<(), Error> {
        self.bf16_product(a, b, c, Some(bias))
    }

    /// [`CublasLt::matmul_bf16`], with the bias and GELU epilogue when
    /// `bias` is given.
    fn bf16_product(
        &self,
        a: &DeviceMatrix<bf16>,
        b: &DeviceMatrix<bf16>,
        c: &mut DeviceMatrix<bf16>,
        bias: Option<&CudaSlice<bf16>>,
    ) -> Result<(), Error> {
        let product = if bias.is_some() {
            "bf16 x bf16 -> bf16 with bias and GELU (cuBLASLt)"
        } else {
            "bf16 x bf16 -> bf16 (cuBLASLt)"
        };
        let unsupported = |why: String| Error::Unsupported { product: product.into(), why };
        let dims = self.checked_dims(a, b, c)?;
        if dims.c_layout != Layout::RowMajor {
            return Err(unsupported("C must be row-major (cuBLASLt's bias runs along its rows, our columns)".into()));
        }
        if dims.is_empty() {
            return Ok(());
        }
        if dims.k == 0 {
            return Err(unsupported("k = 0 (not passed to cuBLASLt)".into()));
        }
        let (m, n, k) = (dims.m, dims.n, dims.k);
        if let Some(bias) = bias {
            self.check_buffers(&dims, [("the bias (cuBLASLt)", bias, n, " (one per column of C)".to_string())])?;
        }
        self.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let stream = self.device.stream();
        let (pbias, _rbias) = match bias {
            Some(bias) => {
                let (address, record) = bias.device_ptr(stream);
                (address, Some(record))
            }
            None => (0, None),
        };
        let bf16_type = sys::cudaDataType::CUDA_R_16BF;
        let (lt_m, lt_n, kk) = (n as u64, m as u64, k as u64);
        // cuBLASLt's A' is our B: op(A') must be n x k. A column-major B
        // (k x n, ld ldb) is that under op T; a row-major one is the
        // column-major n x k itself.
        let lt_a = match dims.b_layout {
            Layout::ColMajor => (cublasOperation_t::CUBLAS_OP_T, kk, lt_m, dims.ldb as i64),
            Layout::RowMajor => (cublasOperation_t::CUBLAS_OP_N, lt_m, kk, dims.ldb as i64),
        };
        // Its B' is our A: op(B') must be k x m. A row-major A (m x k) is
        // the column-major k x m itself; a column-major one is that under op T.
        let lt_b = match dims.a_layout {
            Layout::RowMajor => (cublasOperation_t::CUBLAS_OP_N, kk, lt_n, dims.lda as i64),
            Layout::ColMajor => (cublasOperation_t::CUBLAS_OP_T, lt_n, kk, dims.lda as i64),
        };
        let problem = LtMatmul {
            operands: (bf16_type, bf16_type),
            output: bf16_type,
            a: lt_a,
            b: lt_b,
            d: (lt_m, lt_n, dims.ldc as i64),
            scales: None,
            epilogue: bias.map(|_| (sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS, pbias, bf16_type)),
        };
        let (pa, _ra) = a.buffer().device_ptr(stream);
        let (pb, _rb) = b.buffer().device_ptr(stream);
        let (pc, _rc) = c.buffer_mut().device_ptr_mut(stream);
        let no_algorithm = || {
            unsupported(format!(
                "cuBLASLt has no algorithm for {m} x {n} x {k} with A {} (leading dimension {}), B {} ({}), C {} ({})",
                dims.a_layout, dims.lda, dims.b_layout, dims.ldb, dims.c_layout, dims.ldc
            ))
        };
        // SAFETY: `checked_dims` validated the shapes and leading dimensions
        // against the buffers' lengths, so cuBLASLt reads A and B and reads
        // and writes C (also D) inside them; the bias holds at least n
        // (D's rows) values; the addresses are the buffers', on the
        // device's stream, and their records live until the matmul is
        // enqueued.
        unsafe { self.enqueue(&problem, (1.0, 0.0), (pb, pa, pc), no_algorithm) }
    }

    /// Checks that cuBLASLt offers `scaling` (FP8 scale modes of cuBLAS
    /// 12.9, on compute capability 9.0) here, as [`Error::Unsupported`] of
    /// `product`.
    fn check_scaling(&self, product: &str, scaling: &str) -> Result<(), Error> {
        let unsupported = |why: String| Error::Unsupported { product: product.into(), why };
        let (major, minor) = self.device.compute_capability();
        if major < 9 {
            return Err(unsupported(format!(
                "cuBLASLt's FP8 {scaling} needs compute capability 9.0; {} has {major}.{minor}",
                self.device.name()
            )));
        }
        let version = self.version();
        if version < BLOCK_SCALING_VERSION {
            return Err(unsupported(format!(
                "cuBLASLt {version} has no FP8 {scaling} (cuBLAS 12.9, 120900, added it)"
            )));
        }
        Ok(())
    }

    /// Checks each epilogue input `(what, buffer, values needed, its layout
    /// for the message)` of a `dims` product (scales, a bias): long enough
    /// ([`Error::Epilogue`]) and in the device's context
    /// ([`Error::ContextMismatch`]).
    #[allow(clippy::type_complexity)]
    fn check_buffers<T, const N: usize>(
        &self,
        dims: &GemmDims,
        buffers: [(&'static str, &CudaSlice<T>, usize, String); N],
    ) -> Result<(), Error> {
        let (m, n, k) = (dims.m, dims.n, dims.k);
        for (what, buffer, needed, layout) in buffers {
            if buffer.len() < needed {
                return Err(Error::Epilogue {
                    what,
                    why: format!("{} values; a {m} x {n} x {k} product reads {needed}{layout}", buffer.len()),
                });
            }
            if **buffer.context() != **self.device.context() {
                return Err(Error::ContextMismatch { what, device: self.device.name().into() });
            }
        }
        Ok(())
    }

    /// The dimensions of `C = A * B` (operands validated against their
    /// buffers), checked to live on this handle's device.
    fn checked_dims<A: Scalar, B: Scalar, C: Scalar>(
        &self,
        a: &DeviceMatrix<A>,
        b: &DeviceMatrix<B>,
        c: &DeviceMatrix<C>,
    ) -> Result<GemmDims, Error> {
        let dims = GemmDims::from_operands(
            a.dims(),
            a.buffer().len(),
            b.dims(),
            b.buffer().len(),
            c.dims(),
            c.buffer().len(),
        )?;
        for d in [a.device(), b.device(), c.device()] {
            if !d.same_context(&self.device) {
                return Err(Error::DeviceMismatch(d.name().into(), self.device.name().into()));
            }
        }
        Ok(dims)
    }

    /// Checks an FP8 product's operands as [`CublasLt::matmul_fp8`]
    /// documents and binds the device's context: the dimensions, C's
    /// cuBLASLt type and A's and B's, or `None` when C is empty (nothing to
    /// do).
    #[allow(clippy::type_complexity)]
    fn fp8_problem<A: Fp8, B: Fp8, C: Scalar>(
        &self,
        product: &str,
        a: &DeviceMatrix<A>,
        b: &DeviceMatrix<B>,
        c: &DeviceMatrix<C>,
    ) -> Result<Option<(GemmDims, (sys::cudaDataType, [sys::cudaDataType; 2]))>, Error> {
        let unsupported = |why: String| Error::Unsupported { product: product.into(), why };
        if A::E5M2 && B::E5M2 {
            return Err(unsupported("cuBLASLt has no e5m2 x e5m2 matmul".into()));
        }
        let fp8 = |e5m2: bool| if e5m2 { sys::cudaDataType::CUDA_R_8F_E5M2 } else { sys::cudaDataType::CUDA_R_8F_E4M3 };
        let dims = self.checked_dims(a, b, c)?;
        let layouts = (dims.a_layout, dims.b_layout, dims.c_layout);
        if layouts != (Layout::RowMajor, Layout::ColMajor, Layout::RowMajor) {
            return Err(unsupported(format!(
                "A must be row-major, B column-major and C row-major (K-major FP8 operands), found A {}, B {}, C {}",
                dims.a_layout, dims.b_layout, dims.c_layout
            )));
        }
        let c_type = match C::NAME {
            "bf16" => sys::cudaDataType::CUDA_R_16BF,
            "f16" => sys::cudaDataType::CUDA_R_16F,
            "f32" => sys::cudaDataType::CUDA_R_32F,
            other => return Err(unsupported(format!("C must be bf16, f16 or f32, not {other}"))),
        };
        if dims.is_empty() {
            return Ok(None);
        }
        if dims.k == 0 {
            return Err(unsupported("k = 0 (C would only be scaled by beta; not passed to cuBLASLt)".into()));
        }
        let (major, minor) = self.device.compute_capability();
        if (major, minor) < (8, 9) {
            return Err(unsupported(format!(
                "cuBLASLt's FP8 matmul needs compute capability 8.9 or newer; {} has {major}.{minor}",
                self.device.name()
            )));
        }
        self.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        Ok(Some((dims, (c_type, [fp8(A::E5M2), fp8(B::E5M2)]))))
    }

    /// Enqueues one `cublasLtMatmul` of `p` on the device's stream: compute
    /// type `CUBLAS_COMPUTE_32F`, scale type f32, host `alpha` and `beta`,
    /// the first algorithm of `cublasLtMatmulAlgoGetHeuristic` within the
    /// workspace. `addresses` are cuBLASLt's A, B and C (also D): our B, A
    /// and C. `no_algorithm` is the error when cuBLASLt has none.
    ///
    /// # Safety
    /// The addresses (operands, and the scales and bias in `p`) must be
    /// device memory of the device's context, ordered on its stream, that
    /// holds what `p`'s layouts read and write, until the enqueued matmul
    /// has run; the device's context must be current.
    unsafe fn enqueue(
        &self,
        p: &LtMatmul,
        (alpha, beta): (f32, f32),
        (pa, pb, pd): (u64, u64, u64),
        no_algorithm: impl FnOnce() -> Error,
    ) -> Result<(), Error> {
        use sys::cublasLtMatmulDescAttributes_t as Attr;
        let call = |name: &'static str| move |e: lt::CublasError| cublas_error(name, e);
        let compute = sys::cublasComputeType_t::CUBLAS_COMPUTE_32F;
        let matmul =
            lt::create_matmul_desc(compute, sys::cudaDataType::CUDA_R_32F).map_err(call("cublasLtMatmulDescCreate"))?;
        // Each descriptor is destroyed with `desc`, on every return below.
        let mut desc = Descriptors { matmul, ..Descriptors::default() };
        let set = call("cublasLtMatmulDescSetAttribute");
        // TRANSA and TRANSB are int32_t (cublasOperation_t) attributes.
        set_matmul_attribute(desc.matmul, Attr::CUBLASLT_MATMUL_DESC_TRANSA, &(p.a.0 as i32)).map_err(set)?;
        set_matmul_attribute(desc.matmul, Attr::CUBLASLT_MATMUL_DESC_TRANSB, &(p.b.0 as i32)).map_err(set)?;
        if let Some([(a_mode, a_scales), (b_mode, b_scales)]) = p.scales {
            // The scale modes are int32_t (cublasLtMatmulMatrixScale_t)
            // attributes, the scale pointers `const void *` (device).
            let modes =
                [(Attr::CUBLASLT_MATMUL_DESC_A_SCALE_MODE, a_mode), (Attr::CUBLASLT_MATMUL_DESC_B_SCALE_MODE, b_mode)];
            for (attr, mode) in modes {
                set_matmul_attribute(desc.matmul, attr, &(mode as i32)).map_err(set)?;
            }
            let pointers = [
                (Attr::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scales),
                (Attr::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scales),
            ];
            for (attr, address) in pointers {
                set_matmul_attribute(desc.matmul, attr, &(address as *const c_void)).map_err(set)?;
            }
        }
        if let Some((epilogue, bias, bias_type)) = p.epilogue {
            // EPILOGUE is a uint32_t (cublasLtEpilogue_t) attribute,
            // BIAS_POINTER a `const void *` (device), BIAS_DATA_TYPE an
            // int32_t (cudaDataType).
            set_matmul_attribute(desc.matmul, Attr::CUBLASLT_MATMUL_DESC_EPILOGUE, &(epilogue as u32)).map_err(set)?;
            set_matmul_attribute(desc.matmul, Attr::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &(bias as *const c_void))
                .map_err(set)?;
            set_matmul_attribute(desc.matmul, Attr::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &(bias_type as i32))
                .map_err(set)?;
        }
        let layout = call("cublasLtMatrixLayoutCreate");
        desc.a = lt::create_matrix_layout(p.operands.0, p.a.1, p.a.2, p.a.3).map_err(layout)?;
        desc.b = lt::create_matrix_layout(p.operands.1, p.b.1, p.b.2, p.b.3).map_err(layout)?;
        desc.c = lt::create_matrix_layout(p.output, p.d.0, p.d.1, p.d.2).map_err(layout)?;
        desc.pref = lt::create_matmul_pref().map_err(call("cublasLtMatmulPreferenceCreate"))?;
        let workspace_bytes: usize = WORKSPACE_BYTES;
        // SAFETY: the preference is live; MAX_WORKSPACE_BYTES is a uint64_t
        // attribute (usize is 64 bits on CUDA's platforms), read during the call.
        unsafe {
            lt::set_matmul_pref_attribute(
                desc.pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &workspace_bytes as *const usize as *const c_void,
                size_of::<usize>(),
            )
        }
        .map_err(call("cublasLtMatmulPreferenceSetAttribute"))?;

        let mut heuristic = core::mem::MaybeUninit::<sys::cublasLtMatmulHeuristicResult_t>::uninit();
        let mut found = 0;
        // SAFETY: every descriptor is live; cuBLASLt writes at most one
        // result (requested count 1) into `heuristic` and the count into `found`.
        let status = unsafe {
            sys::cublasLtMatmulAlgoGetHeuristic(
                self.handle,
                desc.matmul,
                desc.a,
                desc.b,
                desc.c,
                desc.c,
                desc.pref,
                1,
                heuristic.as_mut_ptr(),
                &mut found,
            )
        };
        match status {
            sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS if found > 0 => {}
            // No algorithm: none found, or the configuration refused as a whole.
            sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS | sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED => {
                return Err(no_algorithm())
            }
            other => return Err(cublas_error("cublasLtMatmulAlgoGetHeuristic", lt::CublasError(other))),
        }
        // SAFETY: `found` is 1, so cuBLASLt wrote the first result.
        let heuristic = unsafe { heuristic.assume_init() };
        heuristic.state.result().map_err(call("cublasLtMatmulAlgoGetHeuristic"))?;

        let stream = self.device.stream();
        // The workspace is only used on this stream, which orders its reuse.
        let (pw, _rw) = self.workspace.device_ptr(stream);
        // SAFETY: the caller guarantees the operands, scales and bias (see
        // `# Safety`); alpha and beta are f32, the scale type; the algorithm
        // came from the heuristic for these descriptors and this workspace
        // size; the workspace holds WORKSPACE_BYTES; the stream is the
        // device's, whose context is current.
        unsafe {
            lt::matmul(
                self.handle,
                desc.matmul,
                &alpha as *const f32 as *const c_void,
                &beta as *const f32 as *const c_void,
                pa as *const c_void,
                desc.a,
                pb as *const c_void,
                desc.b,
                pd as *const c_void,
                desc.c,
                pd as *mut c_void,
                desc.c,
                &heuristic.algo,
                pw as *mut c_void,
                WORKSPACE_BYTES,
                stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(call("cublasLtMatmul"))
    }
}

/// One `cublasLtMatmul` in cuBLASLt's column-major terms, D = op(A') op(B')
/// with D over C's storage: A' is our B and B' our A (the swapped form of
/// [`CublasLt::matmul_fp8`]).
struct LtMatmul {
    /// Element types of A' and B' (our B's and A's).
    operands: (sys::cudaDataType, sys::cudaDataType),
    /// Element type of C and D.
    output: sys::cudaDataType,
    /// A''s op and its stored (rows, columns, leading dimension).
    a: (cublasOperation_t, u64, u64, i64),
    /// B''s op and its stored (rows, columns, leading dimension).
    b: (cublasOperation_t, u64, u64, i64),
    /// D's (rows, columns, leading dimension).
    d: (u64, u64, i64),
    /// The scale modes and device addresses of A''s and B''s scales; none:
    /// cuBLASLt's defaults (tensor-wide, no scale pointer: 1).
    scales: Option<[(sys::cublasLtMatmulMatrixScale_t, u64); 2]>,
    /// A non-default epilogue with its bias's device address and type.
    epilogue: Option<(sys::cublasLtEpilogue_t, u64, sys::cudaDataType)>,
}

impl LtMatmul {
    /// The "TN" form of an FP8 product (A row-major, B column-major, C
    /// row-major: `dims` checked so) with C of type `c_type` and A's and
    /// B's FP8 types `types`.
    fn fp8_tn(
        dims: &GemmDims,
        (c_type, types): (sys::cudaDataType, [sys::cudaDataType; 2]),
        scales: Option<[(sys::cublasLtMatmulMatrixScale_t, u64); 2]>,
    ) -> Self {
        // cuBLASLt's (column-major) product, its m x n x k our n x m x k:
        // D (lt_m x lt_n) = op(A') op(B') with A' = our B (k x n
        // column-major, op T) and B' = our A (row-major m x k, i.e.
        // column-major k x m, op N); D and C are our C over its storage.
        let (lt_m, lt_n, k) = (dims.n as u64, dims.m as u64, dims.k as u64);
        LtMatmul {
            // cuBLASLt's A' is our B, its B' our A.
            operands: (types[1], types[0]),
            output: c_type,
            a: (cublasOperation_t::CUBLAS_OP_T, k, lt_m, dims.ldb as i64),
            b: (cublasOperation_t::CUBLAS_OP_N, k, lt_n, dims.lda as i64),
            d: (lt_m, lt_n, dims.ldc as i64),
            scales,
            epilogue: None,
        }
    }
}

/// The error of an FP8 product cuBLASLt has no algorithm for.
fn no_fp8_algorithm(product: &str, dims: &GemmDims) -> Error {
    Error::Unsupported {
        product: product.into(),
        why: format!(
            "cuBLASLt has no algorithm for {} x {} x {} with leading dimensions A {}, B {}, C {} \
             (FP8 wants multiples of 16)",
            dims.m, dims.n, dims.k, dims.lda, dims.ldb, dims.ldc
        ),
    }
}

/// Sets a matmul descriptor's attribute to `value`, whose type must be the
/// attribute's C type (cuBLASLt checks the size and refuses another with
/// `CUBLAS_STATUS_INVALID_VALUE`).
fn set_matmul_attribute<T: Copy>(
    desc: sys::cublasLtMatmulDesc_t,
    attr: sys::cublasLtMatmulDescAttributes_t,
    value: &T,
) -> Result<(), lt::CublasError> {
    // SAFETY: `desc` is live (created by the caller, destroyed after);
    // cuBLASLt copies `size_of::<T>()` bytes from `value`, a live
    // reference, during the call. A pointer value (a scale or bias
    // address) is only stored here; its use is the matmul's to justify.
    unsafe { lt::set_matmul_desc_attribute(desc, attr, value as *const T as *const c_void, size_of::<T>()) }
}

/// Values [`CublasLt::matmul_fp8_block_scaled`] reads of an `m x n x k`
/// product's scales: A's `m * L`, B's `ceil(n / 128) * L4` (L = ceil(k /
/// 128), L4 rounded up to a multiple of 4).
fn cublaslt_scale_lens(m: usize, n: usize, k: usize) -> (usize, usize) {
    let k_blocks = k.div_ceil(SCALE_BLOCK);
    (m * k_blocks, n.div_ceil(SCALE_BLOCK) * k_blocks.next_multiple_of(4))
}

/// An `m x n x k` product's block scales in the layouts of
/// [`CublasLt::matmul_fp8_block_scaled`], from the default layouts of
/// [`crate::BlockScales::new`] (DeepGEMM's), with `L = ceil(k / 128)`:
///
/// - A's, `a_scales[kb * m + i]` (column-major `m x L`, at least `m * L`
///   values): the layout cuBLASLt reads, copied as it is (`m * L` values).
/// - B's, `b_scales[jb * L + kb]` (column block jb, k block kb; at least
///   `ceil(n / 128) * L` values): cuBLASLt reads `jb * L4 + kb`, L4 = L
///   rounded up to a multiple of 4, so each column block's L values are
///   followed by `L4 - L` zeros (`ceil(n / 128) * L4` values; the same
///   values when L is a multiple of 4).
///
/// # Errors
/// [`Error::Epilogue`] when a slice is shorter than its layout needs.
pub fn cublaslt_block_scales(
    m: usize,
    n: usize,
    k: usize,
    a_scales: &[f32],
    b_scales: &[f32],
) -> Result<(Vec<f32>, Vec<f32>), Error> {
    let k_blocks = k.div_ceil(SCALE_BLOCK);
    let k_blocks4 = k_blocks.next_multiple_of(4);
    let n_blocks = n.div_ceil(SCALE_BLOCK);
    let (a_len, b_len) = (m * k_blocks, n_blocks * k_blocks);
    for (what, scales, needed) in [("A's block scales", a_scales, a_len), ("B's block scales", b_scales, b_len)] {
        if scales.len() < needed {
            return Err(Error::Epilogue {
                what,
                why: format!("{} values; a {m} x {n} x {k} product needs {needed}", scales.len()),
            });
        }
    }
    let mut b = vec![0.0; n_blocks * k_blocks4];
    if k_blocks > 0 {
        for (theirs, ours) in b.chunks_exact_mut(k_blocks4).zip(b_scales.chunks_exact(k_blocks)) {
            theirs[..k_blocks].copy_from_slice(ours);
        }
    }
    Ok((a_scales[..a_len].to_vec(), b))
}

impl Drop for CublasLt {
    fn drop(&mut self) {
        // SAFETY: the handle was created in `new` and is destroyed once;
        // cuBLASLt's work on the stream does not need the handle to live.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}

/// The descriptors of one matmul, destroyed when it is dropped (null ones
/// were never created). `a`, `b` and `c` are cuBLASLt's operands: our B,
/// our A, and C (also D).
struct Descriptors {
    matmul: sys::cublasLtMatmulDesc_t,
    a: sys::cublasLtMatrixLayout_t,
    b: sys::cublasLtMatrixLayout_t,
    c: sys::cublasLtMatrixLayout_t,
    pref: sys::cublasLtMatmulPreference_t,
}

impl Default for Descriptors {
    fn default() -> Self {
        use core::ptr::null_mut;
        Descriptors { matmul: null_mut(), a: null_mut(), b: null_mut(), c: null_mut(), pref: null_mut() }
    }
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        // SAFETY: each non-null descriptor was created by cuBLASLt and is
        // destroyed once, here; cublasLtMatmul has read them when it returns.
        unsafe {
            if !self.matmul.is_null() {
                let _ = lt::destroy_matmul_desc(self.matmul);
            }
            for layout in [self.a, self.b, self.c] {
                if !layout.is_null() {
                    let _ = lt::destroy_matrix_layout(layout);
                }
            }
            if !self.pref.is_null() {
                let _ = lt::destroy_matmul_pref(self.pref);
            }
        }
    }
}

/// A cuBLASLt status as [`Error::Cublas`] (cuBLASLt returns cuBLAS's
/// statuses; cudarc has a copy of the enum per library).
fn cublas_error(call: &'static str, e: lt::CublasError) -> Error {
    use sys::cublasStatus_t as Lt;
    let status = match e.0 {
        Lt::CUBLAS_STATUS_SUCCESS => cublasStatus_t::CUBLAS_STATUS_SUCCESS,
        Lt::CUBLAS_STATUS_NOT_INITIALIZED => cublasStatus_t::CUBLAS_STATUS_NOT_INITIALIZED,
        Lt::CUBLAS_STATUS_ALLOC_FAILED => cublasStatus_t::CUBLAS_STATUS_ALLOC_FAILED,
        Lt::CUBLAS_STATUS_INVALID_VALUE => cublasStatus_t::CUBLAS_STATUS_INVALID_VALUE,
        Lt::CUBLAS_STATUS_ARCH_MISMATCH => cublasStatus_t::CUBLAS_STATUS_ARCH_MISMATCH,
        Lt::CUBLAS_STATUS_MAPPING_ERROR => cublasStatus_t::CUBLAS_STATUS_MAPPING_ERROR,
        Lt::CUBLAS_STATUS_EXECUTION_FAILED => cublasStatus_t::CUBLAS_STATUS_EXECUTION_FAILED,
        Lt::CUBLAS_STATUS_INTERNAL_ERROR => cublasStatus_t::CUBLAS_STATUS_INTERNAL_ERROR,
        Lt::CUBLAS_STATUS_NOT_SUPPORTED => cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED,
        Lt::CUBLAS_STATUS_LICENSE_ERROR => cublasStatus_t::CUBLAS_STATUS_LICENSE_ERROR,
    };
    Error::Cublas { call, source: CublasError(status) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cublaslt_statuses_become_cublas_errors() {
        let e = cublas_error("cublasLtMatmul", lt::CublasError(sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED));
        assert!(matches!(
            e,
            Error::Cublas { call: "cublasLtMatmul", source: CublasError(cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED) }
        ));
        assert_eq!(e.to_string(), "cuBLAS call `cublasLtMatmul` failed: CublasError(CUBLAS_STATUS_NOT_SUPPORTED)");
    }

    /// Distinct scales for our layouts of an `m x n x k` product.
    fn our_scales(m: usize, n: usize, k: usize) -> (Vec<f32>, Vec<f32>) {
        let (kb, nb) = (k.div_ceil(SCALE_BLOCK), n.div_ceil(SCALE_BLOCK));
        let a = (0..m * kb).map(|x| 1.0 + x as f32).collect();
        let b = (0..nb * kb).map(|x| -1.0 - x as f32).collect();
        (a, b)
    }

    #[test]
    fn block_scales_convert_to_cublaslt_layouts() {
        // L = ceil(640 / 128) = 5 k blocks, padded to L4 = 8; 3 column blocks.
        let (m, n, k) = (8, 300, 640);
        let (a, b) = our_scales(m, n, k);
        let (lt_a, lt_b) = cublaslt_block_scales(m, n, k, &a, &b).unwrap();
        assert_eq!(lt_a, a);
        assert_eq!(lt_b.len(), 3 * 8);
        assert_eq!((lt_a.len(), lt_b.len()), cublaslt_scale_lens(m, n, k));
        for jb in 0..3 {
            for kb in 0..8 {
                let want = if kb < 5 { b[jb * 5 + kb] } else { 0.0 };
                assert_eq!(lt_b[jb * 8 + kb], want, "column block {jb}, k block {kb}");
            }
        }
        // With L a multiple of 4 (k = 1536: 12 blocks) both layouts agree;
        // longer inputs are cut to what the product reads.
        let (m, n, k) = (64, 24576, 1536);
        let (mut a, mut b) = our_scales(m, n, k);
        let (lt_a, lt_b) = cublaslt_block_scales(m, n, k, &a, &b).unwrap();
        assert_eq!((&lt_a, &lt_b), (&a, &b));
        a.push(7.0);
        b.push(7.0);
        assert_eq!(cublaslt_block_scales(m, n, k, &a, &b).unwrap(), (lt_a, lt_b));
    }

    #[test]
    fn short_block_scales_are_refused() {
        let (m, n, k) = (4, 256, 384);
        let (a, b) = our_scales(m, n, k);
        let e = cublaslt_block_scales(m, n, k, &a[1..], &b).unwrap_err();
        assert!(matches!(e, Error::Epilogue { what: "A's block scales", .. }), "{e}");
        assert!(e.to_string().contains("11 values; a 4 x 256 x 384 product needs 12"), "{e}");
        let e = cublaslt_block_scales(m, n, k, &a, &b[1..]).unwrap_err();
        assert!(matches!(e, Error::Epilogue { what: "B's block scales", .. }), "{e}");
    }

    /// The converted scales give, read as cuBLASLt documents its scaling
    /// (its A our B with 128 x 128 blocks of op(A') = B^T, its B our A with
    /// 1 x 128 blocks of B' = A^T), the product our layouts define.
    #[test]
    fn converted_block_scales_give_the_same_product() {
        let (m, n, k) = (4, 260, 300); // 3 k blocks (the last partial), 3 column blocks
        let (a_s, b_s) = our_scales(m, n, k);
        let (lt_a_s, lt_b_s) = cublaslt_block_scales(m, n, k, &a_s, &b_s).unwrap();
        let (kb, kb4) = (k.div_ceil(SCALE_BLOCK), k.div_ceil(SCALE_BLOCK).next_multiple_of(4));
        let a = |i: usize, p: usize| ((i * 7 + p * 3) % 11) as f64 - 5.0;
        let b = |p: usize, j: usize| ((p * 5 + j * 2) % 13) as f64 - 6.0;
        for i in 0..m {
            for j in 0..n {
                let (mut ours, mut theirs) = (0.0, 0.0);
                for p in 0..k {
                    let (block, jb) = (p / SCALE_BLOCK, j / SCALE_BLOCK);
                    let ab = a(i, p) * b(p, j);
                    ours += ab * a_s[block * m + i] as f64 * b_s[jb * kb + block] as f64;
                    // cuBLASLt: D (n x m) = op(A') op(B'), D[j, i]; op(A')
                    // row j's scales K-major, L4 apart per 128 rows; B'
                    // column i's scales N-major (N = m).
                    let lt_a = lt_b_s[(j / SCALE_BLOCK) * kb4 + block] as f64;
                    let lt_b = lt_a_s[block * m + i] as f64;
                    theirs += b(p, j) * a(i, p) * lt_a * lt_b;
                }
                assert_eq!(ours, theirs, "C[{i}, {j}]");
            }
        }
        assert_eq!(kb, 3);
    }
}
