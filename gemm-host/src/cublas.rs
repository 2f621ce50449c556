//! cuBLAS, the reference every stage is measured against in the same run.

use crate::device::Device;
use crate::element::Element;
use crate::error::Error;
use crate::matrix::DeviceMatrix;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, GemmConfig};
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

    /// Enqueues `C <- alpha * A * B + beta * C` (row-major, as the rest of the
    /// library) through cuBLAS `?gemm`: a row-major C is a column-major C^T,
    /// and C^T = B^T * A^T, so cuBLAS gets (n, m, k, B, ldb, A, lda, C, ldc).
    ///
    /// # Errors
    /// [`Error::Shape`] on mismatched shapes; [`Error::Cublas`].
    pub fn gemm<T: Element>(
        &self,
        alpha: f64,
        a: &DeviceMatrix<T>,
        b: &DeviceMatrix<T>,
        beta: f64,
        c: &mut DeviceMatrix<T>,
    ) -> Result<(), Error> {
        let dims = GemmDims::from_operands(
            a.dims(),
            a.buffer().len(),
            b.dims(),
            b.buffer().len(),
            c.dims(),
            c.buffer().len(),
        )?;
        if !Arc::ptr_eq(a.device(), &self.device)
            || !Arc::ptr_eq(b.device(), &self.device)
            || !Arc::ptr_eq(c.device(), &self.device)
        {
            return Err(Error::DeviceMismatch(a.device().name().into(), self.device.name().into()));
        }
        if dims.is_empty() {
            return Ok(());
        }
        let cfg = GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_N,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: dims.n as i32,
            n: dims.m as i32,
            k: dims.k as i32,
            alpha: T::from_f64(alpha),
            lda: dims.ldb as i32,
            ldb: dims.lda as i32,
            beta: T::from_f64(beta),
            ldc: dims.ldc as i32,
        };
        // SAFETY: the shapes were validated against the buffers' lengths, so
        // cuBLAS reads and writes inside them.
        unsafe { T::cublas_gemm(&self.blas, cfg, b.buffer(), a.buffer(), c.buffer_mut()) }
            .map_err(|source| Error::Cublas { call: "cublas?gemm", source })
    }
}
