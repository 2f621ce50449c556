//! cuBLAS, the reference every stage is measured against in the same run.

use crate::device::Device;
use crate::device_matrix::{DeviceView, DeviceViewMut};
use crate::element::Element;
use crate::error::Error;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, GemmConfig};
use gemm_core::shape::{Layout, Op};
use gemm_core::GemmDims;
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
