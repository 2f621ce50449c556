//! Host-side element types: f64 (DGEMM) and f32 (SGEMM).

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use gemm_core::Precision;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
}

/// An element type the library has kernels for: `f64` or `f32` (sealed).
pub trait Element:
    sealed::Sealed + Copy + Default + PartialEq + PartialOrd + core::fmt::Debug + Send + Sync + DeviceRepr + ValidAsZeroBits + 'static
{
    /// Which kernels serve it.
    const PRECISION: Precision;
    /// Machine epsilon (distance from 1 to the next value), as f64.
    const EPSILON: f64;
    /// Converts (rounding to nearest for f32).
    fn from_f64(x: f64) -> Self;
    /// Converts exactly.
    fn to_f64(self) -> f64;
    /// Quiet NaN (to poison outputs in checks).
    const NAN: Self;
}

impl Element for f64 {
    const PRECISION: Precision = Precision::F64;
    const EPSILON: f64 = f64::EPSILON;
    const NAN: Self = f64::NAN;
    fn from_f64(x: f64) -> Self {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
}

impl Element for f32 {
    const PRECISION: Precision = Precision::F32;
    const EPSILON: f64 = f32::EPSILON as f64;
    const NAN: Self = f32::NAN;
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}
