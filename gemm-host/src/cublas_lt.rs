//! cuBLASLt, the reference for the FP8 (e4m3) products: cuBLAS's FP8
//! matmul is only in cuBLASLt (`cublasGemmEx` refuses FP8).

use crate::device::Device;
use crate::element::Scalar;
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
use std::ffi::c_void;
use std::sync::Arc;

/// Bytes of the workspace each [`CublasLt`] hands to cuBLASLt's algorithm
/// search and matmul: 32 MiB, what NVIDIA recommends for Hopper.
const WORKSPACE_BYTES: usize = 32 << 20;

/// A cuBLASLt handle with its workspace, bound to a device's stream: the
/// FP8 reference beside [`crate::Gemm::run_device`] on
/// [`DeviceMatrix<F8E4M3>`] operands.
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

    /// Enqueues `C <- alpha * A * B + beta * C` through `cublasLtMatmul` on
    /// the device's stream (not synchronized): A is `m x k` row-major and B
    /// `k x n` column-major (both K-major, the one FP8 layout cuBLASLt takes
    /// on Ada and Hopper), both e4m3; C is `m x n` row-major of bf16, f16 or
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
    /// B or C row-major...), a C type other than bf16, f16 or f32, k = 0, a
    /// GPU below compute capability 8.9, or no cuBLASLt algorithm for the
    /// shape (FP8 wants leading dimensions that are multiples of 16);
    /// [`Error::Cublas`] when a cuBLASLt call fails.
    pub fn matmul_fp8<C: Scalar>(
        &self,
        alpha: f32,
        a: &DeviceMatrix<F8E4M3>,
        b: &DeviceMatrix<F8E4M3>,
        beta: f32,
        c: &mut DeviceMatrix<C>,
    ) -> Result<(), Error> {
        let product = || format!("e4m3 x e4m3 -> {} (cuBLASLt)", C::NAME);
        let unsupported = |why: String| Error::Unsupported { product: product(), why };
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
            return Ok(());
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

        // cuBLASLt's (column-major) product, its m x n x k our n x m x k:
        // D (lt_m x lt_n) = op(A') op(B') with A' = our B (k x n
        // column-major, op T) and B' = our A (row-major m x k, i.e.
        // column-major k x m, op N); D and C are our C over its storage.
        let (lt_m, lt_n, k) = (dims.n as u64, dims.m as u64, dims.k as u64);
        let e4m3 = sys::cudaDataType::CUDA_R_8F_E4M3;
        let call = |name: &'static str| move |e: lt::CublasError| cublas_error(name, e);
        let compute = sys::cublasComputeType_t::CUBLAS_COMPUTE_32F;
        let matmul =
            lt::create_matmul_desc(compute, sys::cudaDataType::CUDA_R_32F).map_err(call("cublasLtMatmulDescCreate"))?;
        // Each descriptor is destroyed with `desc`, on every return below.
        let mut desc = Descriptors { matmul, ..Descriptors::default() };
        let ops = [
            (sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA, cublasOperation_t::CUBLAS_OP_T as i32),
            (sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB, cublasOperation_t::CUBLAS_OP_N as i32),
        ];
        for (attr, op) in ops {
            // SAFETY: the descriptor is live; TRANSA and TRANSB are int32_t
            // (cublasOperation_t) attributes, read from `op` during the call.
            unsafe {
                lt::set_matmul_desc_attribute(desc.matmul, attr, &op as *const i32 as *const c_void, size_of::<i32>())
            }
            .map_err(call("cublasLtMatmulDescSetAttribute"))?;
        }
        let layout = call("cublasLtMatrixLayoutCreate");
        desc.a = lt::create_matrix_layout(e4m3, k, lt_m, dims.ldb as i64).map_err(layout)?;
        desc.b = lt::create_matrix_layout(e4m3, k, lt_n, dims.lda as i64).map_err(layout)?;
        desc.c = lt::create_matrix_layout(c_type, lt_m, lt_n, dims.ldc as i64).map_err(layout)?;
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
        unsafe {
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
            .result()
        }
        .map_err(call("cublasLtMatmulAlgoGetHeuristic"))?;
        if found == 0 {
            return Err(unsupported(format!(
                "cuBLASLt has no algorithm for {} x {} x {k} with leading dimensions A {}, B {}, C {} \
                 (FP8 wants multiples of 16)",
                dims.m, dims.n, dims.lda, dims.ldb, dims.ldc
            )));
        }
        // SAFETY: `found` is 1, so cuBLASLt wrote the first result.
        let heuristic = unsafe { heuristic.assume_init() };
        heuristic.state.result().map_err(call("cublasLtMatmulAlgoGetHeuristic"))?;

        let stream = self.device.stream();
        let (pa, _ra) = a.buffer().device_ptr(stream);
        let (pb, _rb) = b.buffer().device_ptr(stream);
        let (pc, _rc) = c.buffer_mut().device_ptr_mut(stream);
        // The workspace is only used on this stream, which orders its reuse.
        let (pw, _rw) = self.workspace.device_ptr(stream);
        // SAFETY: the shapes and leading dimensions were validated against
        // the buffers' lengths, so cuBLASLt reads A and B and reads and
        // writes C (also D) inside them; alpha and beta are f32, the scale
        // type; the algorithm came from the heuristic for these descriptors
        // and this workspace size; the workspace holds WORKSPACE_BYTES; the
        // stream is the device's, whose context is current.
        unsafe {
            lt::matmul(
                self.handle,
                desc.matmul,
                &alpha as *const f32 as *const c_void,
                &beta as *const f32 as *const c_void,
                pb as *const c_void,
                desc.a,
                pa as *const c_void,
                desc.b,
                pc as *const c_void,
                desc.c,
                pc as *mut c_void,
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
}
