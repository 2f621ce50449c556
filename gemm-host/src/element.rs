//! Host-side element types: [`Scalar`], what a matrix may hold (f64, f32,
//! f16, bf16, i8, i32), and [`Element`], the types with the whole ladder of kernels
//! (f64 for DGEMM, f32 for SGEMM).

use cudarc::cublas::result::CublasError;
use cudarc::cublas::{CudaBlas, GemmConfig};
use cudarc::driver::{DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};
use gemm_core::Precision;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for i8 {}
    impl Sealed for i32 {}
}

/// A type a [`crate::Matrix`] or [`crate::DeviceMatrix`] may hold: `f64`,
/// `f32`, [`half::f16`], [`half::bf16`], `i8` or `i32` (sealed). Which products exist for
/// which types: [`crate::Product`].
pub trait Scalar:
    sealed::Sealed + Copy + Default + PartialEq + PartialOrd + core::fmt::Debug + Send + Sync + 'static
{
    /// A plain integer or float of the same size and alignment, bit for bit
    /// the same values, which cudarc can copy, zero and pass to kernels:
    /// `u16` for f16 and bf16 (so the library needs no `half` support from
    /// cudarc), `Self` otherwise. The library's allocations, fills and
    /// copies of a generic `Scalar` go through it (`device_matrix.rs`).
    #[doc(hidden)]
    type Bits: DeviceRepr + ValidAsZeroBits + Copy + Send + Sync + 'static;
    /// "f64", "f32", "f16", "bf16", "i8", "i32".
    const NAME: &'static str;
    /// Machine epsilon (distance from 1 to the next value), as f64; 0 for
    /// the integer types (exact).
    const EPSILON: f64;
    /// A value to poison outputs with in checks, which no correct product
    /// leaves behind by chance: quiet NaN, or the integer type's MIN.
    const POISON: Self;
    /// Converts, rounding to nearest.
    fn from_f64(x: f64) -> Self;
    /// Converts exactly.
    fn as_f64(self) -> f64;
}

macro_rules! impl_scalar {
    ($t:ty, $bits:ty, $name:literal, $eps:expr, $nan:expr, $from:expr, $to:expr) => {
        // What makes reinterpreting `$t` as `Bits` sound (see
        // `crate::device::memory::host_bits`): same size and alignment; the
        // types are plain old data without padding, any bit pattern valid.
        const _: () = assert!(size_of::<$t>() == size_of::<$bits>() && align_of::<$t>() == align_of::<$bits>());
        impl Scalar for $t {
            type Bits = $bits;
            const NAME: &'static str = $name;
            const EPSILON: f64 = $eps;
            const POISON: Self = $nan;
            fn from_f64(x: f64) -> Self {
                $from(x)
            }
            fn as_f64(self) -> f64 {
                $to(self)
            }
        }
    };
}

impl_scalar!(f64, f64, "f64", f64::EPSILON, f64::NAN, |x| x, |x| x);
impl_scalar!(f32, f32, "f32", f32::EPSILON as f64, f32::NAN, |x| x as f32, |x: f32| x as f64);
impl_scalar!(half::f16, u16, "f16", 9.765625e-4, half::f16::NAN, half::f16::from_f64, half::f16::to_f64);
impl_scalar!(half::bf16, u16, "bf16", 7.8125e-3, half::bf16::NAN, half::bf16::from_f64, half::bf16::to_f64);
impl_scalar!(i8, i8, "i8", 0.0, i8::MIN, |x: f64| x.round().clamp(-128.0, 127.0) as i8, |x: i8| x as f64);
impl_scalar!(
    i32,
    i32,
    "i32",
    0.0,
    i32::MIN,
    |x: f64| x.round().clamp(i32::MIN as f64, i32::MAX as f64) as i32,
    |x: i32| x as f64
);

/// An element type with the whole ladder of kernels (stages 1-8, split-K,
/// packing, the host path): `f64` or `f32` (sealed; a
/// [`num_traits::Float`]).
pub trait Element: Scalar + DeviceRepr + ValidAsZeroBits + num_traits::Float + crate::Product<Self> {
    /// Which kernels serve it.
    const PRECISION: Precision;
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
