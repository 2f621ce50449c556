//! Host-side element types: f64 (DGEMM) and f32 (SGEMM).

use cudarc::cublas::result::CublasError;
use cudarc::cublas::{CudaBlas, GemmConfig};
use cudarc::driver::{DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};
use gemm_core::Precision;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
}

/// An element type the library has kernels for: `f64` or `f32` (sealed; a
/// [`num_traits::Float`]).
pub trait Element:
    sealed::Sealed
    + num_traits::Float
    + Copy
    + Default
    + PartialEq
    + PartialOrd
    + core::fmt::Debug
    + Send
    + Sync
    + DeviceRepr
    + ValidAsZeroBits
    + 'static
{
    /// Which kernels serve it.
    const PRECISION: Precision;
    /// Machine epsilon (distance from 1 to the next value), as f64.
    const EPSILON: f64;
    /// Converts (rounding to nearest for f32).
    fn from_f64(x: f64) -> Self;
    /// Converts exactly.
    fn as_f64(self) -> f64;
    /// Quiet NaN (to poison outputs in checks).
    const NAN: Self;
    /// cuBLAS `?gemm` for this type (used by [`crate::cublas::Cublas`]).
    ///
    /// # Safety
    /// `cfg` must describe matrices that fit in the buffers.
    #[doc(hidden)]
    unsafe fn cublas_gemm<A: DevicePtr<Self>, B: DevicePtr<Self>, C: DevicePtrMut<Self>>(
        blas: &CudaBlas,
        cfg: GemmConfig<Self>,
        a: &A,
        b: &B,
        c: &mut C,
    ) -> Result<(), CublasError>;
}

macro_rules! impl_element {
    ($t:ty, $precision:expr) => {
        impl Element for $t {
            const PRECISION: Precision = $precision;
            const EPSILON: f64 = <$t>::EPSILON as f64;
            const NAN: Self = <$t>::NAN;
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            fn as_f64(self) -> f64 {
                self as f64
            }
            unsafe fn cublas_gemm<A: DevicePtr<Self>, B: DevicePtr<Self>, C: DevicePtrMut<Self>>(
                blas: &CudaBlas,
                cfg: GemmConfig<Self>,
                a: &A,
                b: &B,
                c: &mut C,
            ) -> Result<(), CublasError> {
                // SAFETY: forwarded from the caller.
                unsafe { cudarc::cublas::Gemm::gemm(blas, cfg, a, b, c) }
            }
        }
    };
}

impl_element!(f64, Precision::F64);
impl_element!(f32, Precision::F32);
