//! cuBLAS, the reference every stage is measured against in the same run.

use crate::device::Device;
use crate::element::{Element, Product, Recast, Scalar, Types};
use crate::error::{DriverContext, Error};
use crate::operands::device_matrix::{DeviceView, DeviceViewMut};
use cudarc::cublas::sys::{self, cublasOperation_t};
use cudarc::cublas::{CudaBlas, GemmConfig};
use cudarc::driver::{DevicePtr, DevicePtrMut};
use gemm_core::batch::{batch_len, strided_disjoint};
use gemm_core::shape::{Layout, Op, Operand};
use gemm_core::{GemmDims, Precision, ShapeError};
use std::sync::Arc;

/// A cuBLAS handle bound to a device's stream.
pub struct Cublas {
    blas: CudaBlas,
    device: Arc<Device>,
}

impl Cublas {
    /// Creates a cuBLAS handle on `device`'s stream (default math mode: no TF32
    /// for SGEMM; DGEMM uses FP64 tensor cores where the GPU has them).
    ///
    /// # Errors
    /// [`Error::NoCublas`] when libcublas cannot be loaded; [`Error::Cublas`].
    pub fn new(device: &Arc<Device>) -> Result<Self, Error> {
        // SAFETY: only tries to dlopen libcublas (cudarc panics without it).
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(Error::NoCublas);
        }
        let blas =
            CudaBlas::new(device.stream().clone()).map_err(|source| Error::Cublas { call: "cublasCreate", source })?;
        Ok(Cublas { blas, device: device.clone() })
    }

    /// Enqueues `C <- alpha * A * B + beta * C` through cuBLAS `?gemm`
    /// ([`Cublas::gemm_op`] with op = N).
    ///
    /// # Errors
    /// As [`Cublas::gemm_op`].
    pub fn gemm<'a, 'b, 'c, T: Element>(
        &self,
        alpha: f64,
        a: impl Into<DeviceView<'a, T>>,
        b: impl Into<DeviceView<'b, T>>,
        beta: f64,
        c: impl Into<DeviceViewMut<'c, T>>,
    ) -> Result<(), Error> {
        self.gemm_op(Op::N, Op::N, alpha, a, b, beta, c)
    }

    /// Enqueues `C <- alpha * op(A) * op(B) + beta * C` through cuBLAS
    /// `?gemm`, for operands of any layout: the product is brought to the
    /// library's kernel form (C row-major, [`GemmDims::kernel_form`]), whose
    /// row-major C is cuBLAS's column-major C^T = op(B')^T op(A')^T; each
    /// operand's storage order gives cuBLAS's op flag.
    ///
    /// # Errors
    /// [`Error::Shape`] on mismatched shapes; [`Error::DeviceMismatch`];
    /// [`Error::Cublas`].
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_op<'a, 'b, 'c, T: Element>(
        &self,
        op_a: Op,
        op_b: Op,
        alpha: f64,
        a: impl Into<DeviceView<'a, T>>,
        b: impl Into<DeviceView<'b, T>>,
        beta: f64,
        c: impl Into<DeviceViewMut<'c, T>>,
    ) -> Result<(), Error> {
        let (a, b, mut c) = (a.into(), b.into(), c.into());
        let dims = GemmDims::from_operands(
            a.dims.op(op_a),
            a.data.len(),
            b.dims.op(op_b),
            b.data.len(),
            c.dims,
            c.data.len(),
        )?;
        for d in [a.device, b.device, c.device] {
            if !d.same_context(&self.device) {
                return Err(Error::DeviceMismatch(d.name().into(), self.device.name().into()));
            }
        }
        if dims.is_empty() {
            return Ok(());
        }
        let (kf, swapped) = dims.kernel_form();
        let flag = |l: Layout| match l {
            Layout::RowMajor => cublasOperation_t::CUBLAS_OP_N,
            Layout::ColMajor => cublasOperation_t::CUBLAS_OP_T,
        };
        let cfg = GemmConfig {
            transa: flag(kf.b_layout),
            transb: flag(kf.a_layout),
            m: kf.n as i32,
            n: kf.m as i32,
            k: kf.k as i32,
            alpha: T::from_f64(alpha),
            lda: kf.ldb as i32,
            ldb: kf.lda as i32,
            beta: T::from_f64(beta),
            ldc: kf.ldc as i32,
        };
        // The kernel form's A and B are the user's B and A when C is column-major.
        let (ka, kb) = if swapped { (&b.data, &a.data) } else { (&a.data, &b.data) };
        // SAFETY: the shapes were validated against the buffers' lengths, so
        // cuBLAS reads and writes inside them.
        unsafe { T::cublas_gemm(&self.blas, cfg, kb, ka, &mut c.data) }
            .map_err(|source| Error::Cublas { call: "cublas?gemm", source })
    }
}

impl Cublas {
    /// Enqueues `C <- alpha * op(A) * op(B) + beta * C` through
    /// `cublasGemmEx`: the reference for stage 9's products, laid out as
    /// [`Cublas::gemm_op`] does. The compute type follows the operands:
    /// f16 or bf16 (C of the same type or f32) `CUBLAS_COMPUTE_32F`; f32
    /// `CUBLAS_COMPUTE_32F_FAST_TF32` (the reference for
    /// [`crate::Gemm::allow_tf32`]; an f32-accurate product is
    /// [`Cublas::gemm_op`]); i8 (C i32) `CUBLAS_COMPUTE_32I`, with alpha and
    /// beta rounded to i32.
    ///
    /// # Errors
    /// As [`Cublas::gemm_op`].
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_ex<'a, 'b, 'c, T: crate::Scalar, C: crate::Scalar>(
        &self,
        op_a: Op,
        op_b: Op,
        alpha: f32,
        a: impl Into<DeviceView<'a, T>>,
        b: impl Into<DeviceView<'b, T>>,
        beta: f32,
        c: impl Into<DeviceViewMut<'c, C>>,
    ) -> Result<(), Error> {
        let (a, b, mut c) = (a.into(), b.into(), c.into());
        let dims = GemmDims::from_operands(
            a.dims.op(op_a),
            a.data.len(),
            b.dims.op(op_b),
            b.data.len(),
            c.dims,
            c.data.len(),
        )?;
        for d in [a.device, b.device, c.device] {
            if !d.same_context(&self.device) {
                return Err(Error::DeviceMismatch(d.name().into(), self.device.name().into()));
            }
        }
        if dims.is_empty() {
            return Ok(());
        }
        let data_type = |name: &str| match name {
            "f16" => sys::cudaDataType::CUDA_R_16F,
            "bf16" => sys::cudaDataType::CUDA_R_16BF,
            "f32" => sys::cudaDataType::CUDA_R_32F,
            "i8" => sys::cudaDataType::CUDA_R_8I,
            "i32" => sys::cudaDataType::CUDA_R_32I,
            // cublasGemmEx has no FP8 (cuBLASLt has): cuBLAS refuses it
            // with a typed error.
            "e4m3" => sys::cudaDataType::CUDA_R_8F_E4M3,
            _ => sys::cudaDataType::CUDA_R_64F,
        };
        let compute = match T::NAME {
            "i8" => sys::cublasComputeType_t::CUBLAS_COMPUTE_32I,
            "f32" => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            _ => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        };
        // alpha and beta in the compute type: i32 or f32 (4 bytes either way).
        let (alpha, beta): ([u8; 4], [u8; 4]) = if T::NAME == "i8" {
            ((alpha as i32).to_ne_bytes(), (beta as i32).to_ne_bytes())
        } else {
            (alpha.to_ne_bytes(), beta.to_ne_bytes())
        };
        let (kf, swapped) = dims.kernel_form();
        let (ka, kb) = if swapped { (&b.data, &a.data) } else { (&a.data, &b.data) };
        let stream = self.device.stream();
        let (pa, _ra) = ka.device_ptr(stream);
        let (pb, _rb) = kb.device_ptr(stream);
        let (pc, _rc) = c.data.device_ptr_mut(stream);
        // SAFETY: the shapes were validated against the buffers' lengths, so
        // cuBLAS reads and writes inside them; alpha and beta are in the
        // compute type (i32 for COMPUTE_32I, else f32).
        unsafe {
            sys::cublasGemmEx(
                *self.blas.handle(),
                op_flag(kf.b_layout),
                op_flag(kf.a_layout),
                kf.n as i32,
                kf.m as i32,
                kf.k as i32,
                alpha.as_ptr() as *const _,
                pb as *const _,
                data_type(T::NAME),
                kf.ldb as i32,
                pa as *const _,
                data_type(T::NAME),
                kf.lda as i32,
                beta.as_ptr() as *const _,
                pc as *mut _,
                data_type(C::NAME),
                kf.ldc as i32,
                compute,
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
            .result()
        }
        .map_err(|source| Error::Cublas { call: "cublasGemmEx", source })
    }
}

impl Cublas {
    /// Enqueues `C <- alpha * op(A) * op(B) + beta * C` for any product the
    /// library computes ([`crate::Product`]), as cuBLAS computes it: the
    /// reference beside [`crate::Gemm::run_device`] with
    /// [`crate::Gemm::allow_tf32`] set to `tf32`. f64, and f32 without
    /// `tf32`: `?gemm` ([`Cublas::gemm_op`]); f32 with `tf32` (compute type
    /// `CUBLAS_COMPUTE_32F_FAST_TF32`), f16 and bf16 (`_32F`; C of the
    /// operands' type or f32) and i8 (C i32, `_32I`, alpha and beta rounded
    /// to i32): `cublasGemmEx` with the same types ([`Cublas::gemm_ex`]).
    /// `tf32` is not read for the other types. Operands of any layout, as
    /// [`Cublas::gemm_op`].
    ///
    /// # Errors
    /// As [`Cublas::gemm_op`] and [`Cublas::gemm_ex`]: [`Error::Cublas`]
    /// where cuBLAS refuses the shape (INT8 with leading dimensions that are
    /// not multiples of 4).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_product<'a, 'b, 'c, T: Product<C>, C: Scalar>(
        &self,
        op_a: Op,
        op_b: Op,
        alpha: f64,
        a: impl Into<DeviceView<'a, T>>,
        b: impl Into<DeviceView<'b, T>>,
        beta: f64,
        c: impl Into<DeviceViewMut<'c, C>>,
        tf32: bool,
    ) -> Result<(), Error> {
        let (a, b, c) = (a.into(), b.into(), c.into());
        match T::TYPES {
            Types::F64 => self.gemm_op::<f64>(op_a, op_b, alpha, a.recast(), b.recast(), beta, c.recast()),
            Types::F32 if !tf32 => self.gemm_op::<f32>(op_a, op_b, alpha, a.recast(), b.recast(), beta, c.recast()),
            _ => self.gemm_ex(op_a, op_b, alpha as f32, a, b, beta as f32, c),
        }
    }
}

/// cuBLAS's op flag for a kernel-form operand stored in `layout` (a
/// row-major matrix is cuBLAS's column-major transpose: no op).
fn op_flag(layout: Layout) -> cublasOperation_t {
    match layout {
        Layout::RowMajor => cublasOperation_t::CUBLAS_OP_N,
        Layout::ColMajor => cublasOperation_t::CUBLAS_OP_T,
    }
}

/// A size as cuBLAS's `int`.
fn as_int(value: usize) -> Result<i32, Error> {
    i32::try_from(value)
        .map_err(|_| Error::Shape(ShapeError::TooLarge { operand: Operand::Matrix, value, max: i32::MAX as usize }))
}

/// One problem of [`Cublas::gemm_grouped_batched`] as cuBLAS takes it
/// (column-major C^T of the kernel form): the group parameters.
#[derive(Clone, Copy, PartialEq, Eq)]
struct GroupParams {
    transa: cublasOperation_t,
    transb: cublasOperation_t,
    m: i32,
    n: i32,
    k: i32,
    lda: i32,
    ldb: i32,
    ldc: i32,
}

impl Cublas {
    /// Enqueues the strided batch `C_i <- alpha * op(A_i) * op(B_i) + beta *
    /// C_i`, `i < count`, through cuBLAS `?gemmStridedBatched`, operand i
    /// at `i * stride` elements from the view given (a view of a
    /// [`crate::DeviceMatrix`] runs to the end of its buffer, so a `rows x
    /// cols` view of a packed (batch, row, col) tensor with stride `rows *
    /// cols` is the whole batch). Layouts as [`Cublas::gemm_op`]: the product
    /// is brought to the kernel form (C row-major), whose C is cuBLAS's
    /// column-major C^T; the strides are unchanged by that. Returns without
    /// waiting, as [`Cublas::gemm_op`]. Stride 0 for A or B repeats one matrix
    /// (the cuBLAS documentation asks for non-zero strides; it works in
    /// practice, but benchmark references should prefer real batches).
    ///
    /// # Errors
    /// [`Error::Shape`] on mismatched shapes (of the first product) or a
    /// count or size past cuBLAS's `int`; [`Error::BatchStorage`] when a
    /// buffer is shorter than its batch; [`Error::BatchOverlap`] when two
    /// matrices of C share an element; [`Error::DeviceMismatch`];
    /// [`Error::Cublas`].
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_strided_batched<'a, 'b, 'c, T: Element>(
        &self,
        op_a: Op,
        op_b: Op,
        alpha: f64,
        (a, stride_a): (impl Into<DeviceView<'a, T>>, usize),
        (b, stride_b): (impl Into<DeviceView<'b, T>>, usize),
        beta: f64,
        (c, stride_c): (impl Into<DeviceViewMut<'c, T>>, usize),
        count: usize,
    ) -> Result<(), Error> {
        let (a, b, mut c) = (a.into(), b.into(), c.into());
        let dims = GemmDims::from_operands(
            a.dims.op(op_a),
            a.data.len(),
            b.dims.op(op_b),
            b.data.len(),
            c.dims,
            c.data.len(),
        )?;
        for (operand, d, stride, len) in [
            (Operand::A, a.dims, stride_a, a.data.len()),
            (Operand::B, b.dims, stride_b, b.data.len()),
            (Operand::C, c.dims, stride_c, c.data.len()),
        ] {
            let needed = batch_len(&d, count, stride).ok_or(ShapeError::TooLarge {
                operand,
                value: count.max(stride),
                max: gemm_core::shape::MAX_DIM,
            })?;
            if needed > len {
                return Err(Error::BatchStorage { operand, count, stride, needed, len });
            }
        }
        if !strided_disjoint(&c.dims, count, stride_c) {
            let second = (1..count).find(|&q| !strided_disjoint(&c.dims, q + 1, stride_c)).unwrap_or(1);
            return Err(Error::BatchOverlap { first: 0, second });
        }
        for d in [a.device, b.device, c.device] {
            if !d.same_context(&self.device) {
                return Err(Error::DeviceMismatch(d.name().into(), self.device.name().into()));
            }
        }
        if count == 0 || dims.is_empty() {
            return Ok(());
        }
        let (kf, swapped) = dims.kernel_form();
        // The kernel form's A and B are the user's B and A when C is column-major.
        let (ka, kb, ska, skb) =
            if swapped { (&b.data, &a.data, stride_b, stride_a) } else { (&a.data, &b.data, stride_a, stride_b) };
        let (m, n, k) = (as_int(kf.n)?, as_int(kf.m)?, as_int(kf.k)?);
        let (lda, ldb, ldc) = (as_int(kf.ldb)?, as_int(kf.lda)?, as_int(kf.ldc)?);
        let batch = as_int(count)?;
        let (transa, transb) = (op_flag(kf.b_layout), op_flag(kf.a_layout));
        let stream = self.device.stream();
        // The guards record the call on each buffer when dropped (after it).
        let (pa, _ga) = kb.device_ptr(stream);
        let (pb, _gb) = ka.device_ptr(stream);
        let (pc, _gc) = c.data.device_ptr_mut(stream);
        let handle = *self.blas.handle();
        // SAFETY: the shapes and batch extents were validated against the
        // buffers' lengths, so cuBLAS reads and writes inside them; alpha and
        // beta are host scalars (the handle's default pointer mode).
        let status = unsafe {
            match T::PRECISION {
                Precision::F64 => sys::cublasDgemmStridedBatched(
                    handle,
                    transa,
                    transb,
                    m,
                    n,
                    k,
                    &alpha,
                    pa as *const f64,
                    lda,
                    skb as i64,
                    pb as *const f64,
                    ldb,
                    ska as i64,
                    &beta,
                    pc as *mut f64,
                    ldc,
                    stride_c as i64,
                    batch,
                ),
                _ => {
                    let (alpha, beta) = (alpha as f32, beta as f32);
                    sys::cublasSgemmStridedBatched(
                        handle,
                        transa,
                        transb,
                        m,
                        n,
                        k,
                        &alpha,
                        pa as *const f32,
                        lda,
                        skb as i64,
                        pb as *const f32,
                        ldb,
                        ska as i64,
                        &beta,
                        pc as *mut f32,
                        ldc,
                        stride_c as i64,
                        batch,
                    )
                }
            }
        };
        status.result().map_err(|source| Error::Cublas { call: "cublas?gemmStridedBatched", source })
    }

    /// Enqueues a grouped batch `C_i <- alpha * op(A_i) * op(B_i) + beta *
    /// C_i` over problems of any shapes and layouts through cuBLAS
    /// `?gemmGroupedBatched` (cuBLAS 12.5 or newer). Each problem is brought
    /// to the kernel form as in [`Cublas::gemm_op`]; consecutive problems
    /// with the same cuBLAS parameters share a group. As the cuBLAS
    /// documentation asks, the per-group arrays (op flags, m, n, k, leading
    /// dimensions, alpha, beta, group sizes) are passed in host memory and
    /// the arrays of matrix pointers in device memory: they are uploaded on
    /// the handle's stream before the call and freed in stream order after
    /// it. Returns without waiting. Empty problems (m or n zero) are skipped.
    ///
    /// # Errors
    /// [`Error::BatchCount`] when the lists differ in length;
    /// [`Error::Problem`] naming the first problem with mismatched shapes,
    /// a size past cuBLAS's `int` or another device; [`Error::Driver`] from
    /// the upload; [`Error::Cublas`].
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_grouped_batched<T: Element>(
        &self,
        op_a: Op,
        op_b: Op,
        alpha: f64,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        beta: f64,
        c: &mut [DeviceViewMut<'_, T>],
    ) -> Result<(), Error> {
        let problems: Vec<ExProblem> =
            self.ex_problems(op_a, op_b, a, b, c)?.into_iter().filter(|p| !p.dims.is_empty()).collect();
        if problems.is_empty() {
            return Ok(());
        }
        let g = GroupArrays::of(&problems)?;
        let handle = *self.blas.handle();
        let status = self.with_pointer_arrays(&problems, a, b, c, |pa, pb, pc| {
            // SAFETY: every problem was validated against its buffers'
            // lengths, so cuBLAS reads and writes inside them; the pointer
            // arrays live on the device until they are freed in stream order
            // after the call; the other arrays are host arrays of
            // `g.count` entries, alive during the call; the handle is in
            // host pointer mode (the default).
            unsafe {
                match T::PRECISION {
                    Precision::F64 => {
                        let alphas = vec![alpha; g.sizes.len()];
                        let betas = vec![beta; g.sizes.len()];
                        sys::cublasDgemmGroupedBatched(
                            handle,
                            g.transa.as_ptr(),
                            g.transb.as_ptr(),
                            g.m.as_ptr(),
                            g.n.as_ptr(),
                            g.k.as_ptr(),
                            alphas.as_ptr(),
                            pa as *const *const f64,
                            g.lda.as_ptr(),
                            pb as *const *const f64,
                            g.ldb.as_ptr(),
                            betas.as_ptr(),
                            pc as *const *mut f64,
                            g.ldc.as_ptr(),
                            g.count,
                            g.sizes.as_ptr(),
                        )
                    }
                    _ => {
                        let alphas = vec![alpha as f32; g.sizes.len()];
                        let betas = vec![beta as f32; g.sizes.len()];
                        sys::cublasSgemmGroupedBatched(
                            handle,
                            g.transa.as_ptr(),
                            g.transb.as_ptr(),
                            g.m.as_ptr(),
                            g.n.as_ptr(),
                            g.k.as_ptr(),
                            alphas.as_ptr(),
                            pa as *const *const f32,
                            g.lda.as_ptr(),
                            pb as *const *const f32,
                            g.ldb.as_ptr(),
                            betas.as_ptr(),
                            pc as *const *mut f32,
                            g.ldc.as_ptr(),
                            g.count,
                            g.sizes.as_ptr(),
                        )
                    }
                }
            }
        })?;
        status.result().map_err(|source| Error::Cublas { call: "cublas?gemmGroupedBatched", source })
    }

    /// Enqueues a grouped batch `C_i <- alpha * op(A_i) * op(B_i) + beta *
    /// C_i` over problems of any shapes through `cublasGemmGroupedBatchedEx`
    /// (cuBLAS 12.5 or newer): the cuBLAS reference for
    /// [`crate::Gemm::run_grouped_device`] on f16 and bf16 operands (a
    /// mixture-of-experts layer). `a`, `b` and `c` hold one matrix per
    /// problem: op(A_i) m_i x k_i, op(B_i) k_i x n_i, C_i m_i x n_i, any
    /// layouts. Each problem is brought to the kernel form (C row-major) and
    /// handed to cuBLAS as its column-major C^T = op(B)^T op(A)^T, as in
    /// [`Cublas::gemm_ex`]; consecutive problems with the same cuBLAS
    /// parameters share a group. The per-group arrays (op flags, m, n, k,
    /// leading dimensions, alpha, beta, group sizes) are passed in host
    /// memory and the arrays of matrix pointers in device memory, as the
    /// cuBLAS documentation asks: they are uploaded on the handle's stream
    /// before the call and freed in stream order after it. Returns without
    /// waiting. Empty problems (m or n zero) are skipped.
    ///
    /// Types and compute types as [`Cublas::gemm_ex`]: f16 or bf16 operands
    /// (C of the same type or f32) `CUBLAS_COMPUTE_32F`, f32
    /// `CUBLAS_COMPUTE_32F_FAST_TF32`, f64 `CUBLAS_COMPUTE_64F`; alpha and
    /// beta in the scale type (f32, f64 for f64). The cuBLAS documentation's
    /// table of types for this call is shorter than `cublasGemmEx`'s: the
    /// call is made as asked, and a combination the installed cuBLAS does
    /// not run (an f32 C with 16-bit operands may be one) comes back as
    /// [`Error::Cublas`] (`CUBLAS_STATUS_NOT_SUPPORTED` or
    /// `CUBLAS_STATUS_INVALID_VALUE`), C left as it was.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for i8 operands (the documentation lists no
    /// integer types for this call: use [`Cublas::gemm_batched_ex`] for
    /// same-shaped i8 problems, or [`Cublas::gemm_ex`] per problem) or a
    /// cuBLAS older than 12.5; [`Error::BatchCount`] when the lists differ
    /// in length; [`Error::Problem`] naming the first problem with
    /// mismatched shapes, a size past cuBLAS's `int` or another device;
    /// [`Error::Driver`] from the upload; [`Error::Cublas`].
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_grouped_batched_ex<T: crate::Product<C>, C: crate::Scalar>(
        &self,
        op_a: Op,
        op_b: Op,
        alpha: f64,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        beta: f64,
        c: &mut [DeviceViewMut<'_, C>],
    ) -> Result<(), Error> {
        if T::NAME == "i8" {
            return Err(Error::Unsupported {
                product: ex_product::<T, C>(),
                why: "cublasGemmGroupedBatchedEx takes no integer types (cuBLAS documentation); \
                      cublasGemmBatchedEx (Cublas::gemm_batched_ex) or cublasGemmEx per problem do"
                    .to_string(),
            });
        }
        let problems: Vec<ExProblem> =
            self.ex_problems(op_a, op_b, a, b, c)?.into_iter().filter(|p| !p.dims.is_empty()).collect();
        if problems.is_empty() {
            return Ok(());
        }
        self.require_version(120_500, ex_product::<T, C>(), "cublasGemmGroupedBatchedEx")?;
        let g = GroupArrays::of(&problems)?;
        let scale = ExScale::new(T::NAME, alpha, beta, g.sizes.len());
        let (ab_type, c_type, compute) = (ex_data_type(T::NAME), ex_data_type(C::NAME), ex_compute_type(T::NAME));
        let handle = *self.blas.handle();
        let status = self.with_pointer_arrays(&problems, a, b, c, |pa, pb, pc| {
            // SAFETY: every problem was validated against its buffers'
            // lengths, so cuBLAS reads and writes inside them; `pa`, `pb`
            // and `pc` are device arrays of one pointer per problem, alive
            // until they are freed in stream order after the call; the
            // other arrays are host arrays of `g.count` entries, alive
            // during the call, alpha and beta in the compute type's scale
            // type; the handle is in host pointer mode (the default).
            unsafe {
                sys::cublasGemmGroupedBatchedEx(
                    handle,
                    g.transa.as_ptr(),
                    g.transb.as_ptr(),
                    g.m.as_ptr(),
                    g.n.as_ptr(),
                    g.k.as_ptr(),
                    scale.alpha(),
                    pa as *const *const core::ffi::c_void,
                    ab_type,
                    g.lda.as_ptr(),
                    pb as *const *const core::ffi::c_void,
                    ab_type,
                    g.ldb.as_ptr(),
                    scale.beta(),
                    pc as *const *mut core::ffi::c_void,
                    c_type,
                    g.ldc.as_ptr(),
                    g.count,
                    g.sizes.as_ptr(),
                    compute,
                )
            }
        })?;
        status.result().map_err(|source| Error::Cublas { call: "cublasGemmGroupedBatchedEx", source })
    }

    /// Enqueues a pointer-array batch `C_i <- alpha * op(A_i) * op(B_i) +
    /// beta * C_i` of same-shaped problems at any addresses through
    /// `cublasGemmBatchedEx`: the cuBLAS reference for
    /// [`crate::Gemm::run_batched_device`] on the mixed-precision products.
    /// Every problem must have the same m, n, k, layouts and leading
    /// dimensions (one call takes one of each); each is brought to the
    /// kernel form and handed to cuBLAS as its column-major C^T = op(B)^T
    /// op(A)^T, as in [`Cublas::gemm_ex`]. The arrays of matrix pointers are
    /// uploaded to device memory on the handle's stream before the call and
    /// freed in stream order after it. Returns without waiting.
    ///
    /// Types and compute types as [`Cublas::gemm_ex`]: f16 or bf16 operands
    /// (C of the same type or f32) `CUBLAS_COMPUTE_32F`, alpha and beta f32;
    /// i8 operands (C i32) `CUBLAS_COMPUTE_32I`, alpha and beta rounded to
    /// i32; f32 `CUBLAS_COMPUTE_32F_FAST_TF32`; f64 `CUBLAS_COMPUTE_64F`.
    /// cuBLAS's INT8 kernels want both operands K-major (in cuBLAS's
    /// column-major terms op(A) = T and op(B) = N, which is here a row-major
    /// A and a column-major B) and leading dimensions that are multiples of
    /// 4; other i8 layouts may be refused (`CUBLAS_STATUS_NOT_SUPPORTED`,
    /// [`Error::Cublas`]).
    ///
    /// # Errors
    /// [`Error::BatchCount`] when the lists differ in length;
    /// [`Error::Problem`] naming the first problem with mismatched shapes, a
    /// size past cuBLAS's `int` or another device; [`Error::ShapeVaries`]
    /// naming the first problem whose shape, layouts or leading dimensions
    /// differ from problem 0's; [`Error::Driver`] from the upload;
    /// [`Error::Cublas`].
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_batched_ex<T: crate::Product<C>, C: crate::Scalar>(
        &self,
        op_a: Op,
        op_b: Op,
        alpha: f64,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        beta: f64,
        c: &mut [DeviceViewMut<'_, C>],
    ) -> Result<(), Error> {
        let problems = self.ex_problems(op_a, op_b, a, b, c)?;
        let Some(first) = problems.first() else { return Ok(()) };
        if let Some(p) = problems.iter().find(|p| p.params != first.params) {
            return Err(Error::ShapeVaries {
                index: p.index,
                expected: describe_dims(&first.dims),
                found: describe_dims(&p.dims),
            });
        }
        if first.dims.is_empty() {
            return Ok(());
        }
        let params = first.params;
        let count = as_int(problems.len())?;
        let scale = ExScale::new(T::NAME, alpha, beta, 1);
        let (ab_type, c_type, compute) = (ex_data_type(T::NAME), ex_data_type(C::NAME), ex_compute_type(T::NAME));
        let handle = *self.blas.handle();
        let status = self.with_pointer_arrays(&problems, a, b, c, |pa, pb, pc| {
            // SAFETY: every problem was validated against its buffers'
            // lengths and has these parameters, so cuBLAS reads and writes
            // inside them; `pa`, `pb` and `pc` are device arrays of `count`
            // pointers, alive until they are freed in stream order after
            // the call; alpha and beta are host scalars in the compute
            // type's scale type (the handle's default pointer mode).
            unsafe {
                sys::cublasGemmBatchedEx(
                    handle,
                    params.transa,
                    params.transb,
                    params.m,
                    params.n,
                    params.k,
                    scale.alpha(),
                    pa as *const *const core::ffi::c_void,
                    ab_type,
                    params.lda,
                    pb as *const *const core::ffi::c_void,
                    ab_type,
                    params.ldb,
                    scale.beta(),
                    pc as *const *mut core::ffi::c_void,
                    c_type,
                    params.ldc,
                    count,
                    compute,
                    sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
        })?;
        status.result().map_err(|source| Error::Cublas { call: "cublasGemmBatchedEx", source })
    }

    /// Every problem of a list (pointer-array or grouped) validated and in
    /// cuBLAS's terms, empty ones included, in list order.
    fn ex_problems<T: crate::Scalar, C: crate::Scalar>(
        &self,
        op_a: Op,
        op_b: Op,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        c: &[DeviceViewMut<'_, C>],
    ) -> Result<Vec<ExProblem>, Error> {
        if a.len() != c.len() || b.len() != c.len() {
            return Err(Error::BatchCount { a: a.len(), b: b.len(), c: c.len() });
        }
        let mut problems = Vec::with_capacity(c.len());
        for i in 0..c.len() {
            let wrap = |e: Error| Error::Problem { index: i, source: Box::new(e) };
            let dims = GemmDims::from_operands(
                a[i].dims.op(op_a),
                a[i].data.len(),
                b[i].dims.op(op_b),
                b[i].data.len(),
                c[i].dims,
                c[i].data.len(),
            )
            .map_err(|e| wrap(e.into()))?;
            for d in [a[i].device, b[i].device, c[i].device] {
                if !d.same_context(&self.device) {
                    return Err(wrap(Error::DeviceMismatch(d.name().into(), self.device.name().into())));
                }
            }
            let (kf, swapped) = dims.kernel_form();
            let int = |x: usize| as_int(x).map_err(wrap);
            let params = GroupParams {
                transa: op_flag(kf.b_layout),
                transb: op_flag(kf.a_layout),
                m: int(kf.n)?,
                n: int(kf.m)?,
                k: int(kf.k)?,
                lda: int(kf.ldb)?,
                ldb: int(kf.lda)?,
                ldc: int(kf.ldc)?,
            };
            problems.push(ExProblem { index: i, dims, params, swapped });
        }
        Ok(problems)
    }

    /// Uploads the device addresses of cuBLAS's A (the kernel form's B), B
    /// and C of `problems` (in their order; indices ascending) and runs
    /// `call` with the three device arrays; each buffer records the call
    /// when its guard is dropped, after it, and the arrays are freed in
    /// stream order after it.
    fn with_pointer_arrays<T: crate::Scalar, C: crate::Scalar>(
        &self,
        problems: &[ExProblem],
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        c: &mut [DeviceViewMut<'_, C>],
        call: impl FnOnce(u64, u64, u64) -> sys::cublasStatus_t,
    ) -> Result<sys::cublasStatus_t, Error> {
        let stream = self.device.stream();
        let mut a_ptrs = Vec::with_capacity(problems.len());
        let mut b_ptrs = Vec::with_capacity(problems.len());
        let mut guards = Vec::with_capacity(2 * problems.len());
        for p in problems {
            let i = p.index;
            let (ka, kb) = if p.swapped { (&b[i].data, &a[i].data) } else { (&a[i].data, &b[i].data) };
            let (pa, ga) = kb.device_ptr(stream);
            let (pb, gb) = ka.device_ptr(stream);
            a_ptrs.push(pa);
            b_ptrs.push(pb);
            guards.push(ga);
            guards.push(gb);
        }
        let mut c_ptrs = Vec::with_capacity(problems.len());
        let mut c_guards = Vec::with_capacity(problems.len());
        let mut wanted = problems.iter().map(|p| p.index).peekable();
        for (i, ci) in c.iter_mut().enumerate() {
            if wanted.peek() == Some(&i) {
                wanted.next();
                let (pc, gc) = ci.data.device_ptr_mut(stream);
                c_ptrs.push(pc);
                c_guards.push(gc);
            }
        }
        let upload = |ptrs: &[u64]| stream.clone_htod(ptrs).during("cuMemcpyHtoDAsync");
        let (da, db, dc) = (upload(&a_ptrs)?, upload(&b_ptrs)?, upload(&c_ptrs)?);
        let status = {
            let (pa, _ga) = da.device_ptr(stream);
            let (pb, _gb) = db.device_ptr(stream);
            let (pc, _gc) = dc.device_ptr(stream);
            call(pa, pb, pc)
        };
        drop((guards, c_guards));
        Ok(status)
    }

    /// [`Error::Unsupported`] when the loaded cuBLAS is older than
    /// `version` (`major * 10000 + minor * 100`), which `function` needs.
    fn require_version(&self, version: i32, product: String, function: &str) -> Result<(), Error> {
        let mut found = 0;
        // SAFETY: the handle is valid; cuBLAS writes one int.
        unsafe { sys::cublasGetVersion_v2(*self.blas.handle(), &mut found) }
            .result()
            .map_err(|source| Error::Cublas { call: "cublasGetVersion", source })?;
        if found < version {
            return Err(Error::Unsupported {
                product,
                why: format!(
                    "{function} needs cuBLAS {}.{} or newer; the loaded cuBLAS is {}.{}.{}",
                    version / 10_000,
                    version / 100 % 100,
                    found / 10_000,
                    found / 100 % 100,
                    found % 100
                ),
            });
        }
        Ok(())
    }
}

/// One problem of [`Cublas::gemm_grouped_batched_ex`] or
/// [`Cublas::gemm_batched_ex`]: its index in the lists, dimensions in the
/// user's form, cuBLAS's parameters, and whether the kernel form swapped A
/// and B.
struct ExProblem {
    index: usize,
    dims: GemmDims,
    params: GroupParams,
    swapped: bool,
}

/// The per-group host arrays of cuBLAS's grouped calls: runs of problems
/// with equal parameters form the groups (problems stay in order).
struct GroupArrays {
    count: i32,
    transa: Vec<cublasOperation_t>,
    transb: Vec<cublasOperation_t>,
    m: Vec<i32>,
    n: Vec<i32>,
    k: Vec<i32>,
    lda: Vec<i32>,
    ldb: Vec<i32>,
    ldc: Vec<i32>,
    sizes: Vec<i32>,
}

impl GroupArrays {
    fn of(problems: &[ExProblem]) -> Result<Self, Error> {
        let mut groups: Vec<(GroupParams, i32)> = Vec::new();
        for p in problems {
            match groups.last_mut() {
                Some((q, size)) if *q == p.params => *size += 1,
                _ => groups.push((p.params, 1)),
            }
        }
        let field = |f: fn(&GroupParams) -> i32| groups.iter().map(|(p, _)| f(p)).collect::<Vec<i32>>();
        Ok(GroupArrays {
            count: as_int(groups.len())?,
            transa: groups.iter().map(|(p, _)| p.transa).collect(),
            transb: groups.iter().map(|(p, _)| p.transb).collect(),
            m: field(|p| p.m),
            n: field(|p| p.n),
            k: field(|p| p.k),
            lda: field(|p| p.lda),
            ldb: field(|p| p.ldb),
            ldc: field(|p| p.ldc),
            sizes: groups.iter().map(|&(_, s)| s).collect(),
        })
    }
}

/// "f16 x f16 -> f32": a type pair in words.
fn ex_product<T: crate::Scalar, C: crate::Scalar>() -> String {
    format!("{} x {} -> {}", T::NAME, T::NAME, C::NAME)
}

/// A problem's shape, layouts and leading dimensions in words.
fn describe_dims(d: &GemmDims) -> String {
    format!(
        "{}x{}x{} (A {} lda {}, B {} ldb {}, C {} ldc {})",
        d.m,
        d.n,
        d.k,
        d.a_layout.short_name(),
        d.lda,
        d.b_layout.short_name(),
        d.ldb,
        d.c_layout.short_name(),
        d.ldc
    )
}

/// cuBLAS's data type for a [`crate::Scalar`]'s name.
fn ex_data_type(name: &str) -> sys::cudaDataType {
    match name {
        "f16" => sys::cudaDataType::CUDA_R_16F,
        "bf16" => sys::cudaDataType::CUDA_R_16BF,
        "f32" => sys::cudaDataType::CUDA_R_32F,
        "i8" => sys::cudaDataType::CUDA_R_8I,
        "i32" => sys::cudaDataType::CUDA_R_32I,
        _ => sys::cudaDataType::CUDA_R_64F,
    }
}

/// The compute type for operands of the type named (as [`Cublas::gemm_ex`]).
fn ex_compute_type(operands: &str) -> sys::cublasComputeType_t {
    match operands {
        "i8" => sys::cublasComputeType_t::CUBLAS_COMPUTE_32I,
        "f32" => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        "f64" => sys::cublasComputeType_t::CUBLAS_COMPUTE_64F,
        _ => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
    }
}

/// alpha and beta in the scale type of [`ex_compute_type`] (i32 for i8
/// operands, rounded; f64 for f64; else f32), `len` of each (one per group).
enum ExScale {
    F32(Vec<f32>, Vec<f32>),
    F64(Vec<f64>, Vec<f64>),
    I32(Vec<i32>, Vec<i32>),
}

impl ExScale {
    fn new(operands: &str, alpha: f64, beta: f64, len: usize) -> Self {
        match operands {
            "i8" => ExScale::I32(vec![alpha.round() as i32; len], vec![beta.round() as i32; len]),
            "f64" => ExScale::F64(vec![alpha; len], vec![beta; len]),
            _ => ExScale::F32(vec![alpha as f32; len], vec![beta as f32; len]),
        }
    }

    fn alpha(&self) -> *const core::ffi::c_void {
        match self {
            ExScale::F32(a, _) => a.as_ptr().cast(),
            ExScale::F64(a, _) => a.as_ptr().cast(),
            ExScale::I32(a, _) => a.as_ptr().cast(),
        }
    }

    fn beta(&self) -> *const core::ffi::c_void {
        match self {
            ExScale::F32(_, b) => b.as_ptr().cast(),
            ExScale::F64(_, b) => b.as_ptr().cast(),
            ExScale::I32(_, b) => b.as_ptr().cast(),
        }
    }
}

/// cuBLASXt's `cublasXtDgemm` on one GPU or several: cuBLAS's own host-memory GEMM,
/// which tiles the product and streams it through the GPU (the reference
/// for the host path). cudarc has no binding, so the four functions are
/// loaded from the cuBLAS library by name, as cudarc loads the rest.
pub struct CublasXt {
    _lib: libloading::Library,
    handle: *mut core::ffi::c_void,
    dgemm: XtDgemm,
    destroy: unsafe extern "C" fn(*mut core::ffi::c_void) -> i32,
}

type XtDgemm = unsafe extern "C" fn(
    *mut core::ffi::c_void,
    i32,
    i32,
    usize,
    usize,
    usize,
    *const f64,
    *const f64,
    usize,
    *const f64,
    usize,
    *const f64,
    *mut f64,
    usize,
) -> i32;

impl CublasXt {
    /// A cuBLASXt handle using the GPU of `device` (its ordinal) only.
    ///
    /// # Errors
    /// [`Error::NoCublas`] when no libcublas with cuBLASXt can be loaded or
    /// the handle cannot be made.
    pub fn new(device: &Arc<Device>) -> Result<Self, Error> {
        Self::with_devices(std::slice::from_ref(device))
    }

    /// A cuBLASXt handle spreading its products over the GPUs of `devices`
    /// (`cublasXtDeviceSelect` with their ordinals).
    ///
    /// # Errors
    /// As [`CublasXt::new`].
    pub fn with_devices(devices: &[Arc<Device>]) -> Result<Self, Error> {
        let names = ["libcublas.so.13", "libcublas.so.12", "libcublas.so"];
        // SAFETY: loading the system's cuBLAS, whose initializers are sound.
        let lib = names.iter().find_map(|&n| unsafe { libloading::Library::new(n) }.ok()).ok_or(Error::NoCublas)?;
        // SAFETY: the symbols have these C signatures (cublasXt.h).
        unsafe {
            let create: libloading::Symbol<unsafe extern "C" fn(*mut *mut core::ffi::c_void) -> i32> =
                lib.get(b"cublasXtCreate\0").map_err(|_| Error::NoCublas)?;
            let select: libloading::Symbol<unsafe extern "C" fn(*mut core::ffi::c_void, i32, *const i32) -> i32> =
                lib.get(b"cublasXtDeviceSelect\0").map_err(|_| Error::NoCublas)?;
            let dgemm: XtDgemm = *lib.get::<XtDgemm>(b"cublasXtDgemm\0").map_err(|_| Error::NoCublas)?;
            let destroy = *lib
                .get::<unsafe extern "C" fn(*mut core::ffi::c_void) -> i32>(b"cublasXtDestroy\0")
                .map_err(|_| Error::NoCublas)?;
            let mut handle = core::ptr::null_mut();
            if create(&mut handle) != 0 {
                return Err(Error::NoCublas);
            }
            let ordinals: Vec<i32> = devices.iter().map(|d| d.context().ordinal() as i32).collect();
            if select(handle, ordinals.len() as i32, ordinals.as_ptr()) != 0 {
                destroy(handle);
                return Err(Error::NoCublas);
            }
            Ok(CublasXt { _lib: lib, handle, dgemm, destroy })
        }
    }

    /// `C = A * B` for row-major host matrices (A m x k, B k x n, C m x n,
    /// densely packed), blocking: cuBLASXt is column-major, so it computes
    /// C^T = B^T A^T on the same storage.
    ///
    /// # Errors
    /// [`Error::Shape`] on mismatched or non-packed shapes; [`Error::NoCublas`]
    /// when cuBLASXt reports a failure.
    pub fn dgemm(
        &self,
        a: &crate::Matrix<f64>,
        b: &crate::Matrix<f64>,
        c: &mut crate::Matrix<f64>,
    ) -> Result<(), Error> {
        let (m, k, n) = (a.rows(), a.cols(), b.cols());
        let packed = |x: &crate::Matrix<f64>| x.layout() == gemm_core::Layout::RowMajor && x.ld() == x.cols().max(1);
        if b.rows() != k || c.rows() != m || c.cols() != n || !packed(a) || !packed(b) || !packed(c) {
            return Err(gemm_core::ShapeError::Output { m, n, c_rows: c.rows(), c_cols: c.cols() }.into());
        }
        let (alpha, beta) = (1.0f64, 0.0f64);
        // SAFETY: the pointers cover the packed matrices; the call blocks.
        let status = unsafe {
            (self.dgemm)(
                self.handle,
                0,
                0,
                n,
                m,
                k,
                &alpha,
                b.as_slice().as_ptr(),
                n.max(1),
                a.as_slice().as_ptr(),
                k.max(1),
                &beta,
                c.as_mut_slice().as_mut_ptr(),
                n.max(1),
            )
        };
        if status != 0 {
            return Err(Error::NoCublas);
        }
        Ok(())
    }
}

impl Drop for CublasXt {
    fn drop(&mut self) {
        // SAFETY: the handle was created by cublasXtCreate and is not used after.
        unsafe { (self.destroy)(self.handle) };
    }
}
