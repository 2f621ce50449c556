//! Host-side element types: [`Scalar`], what a matrix may hold (f64, f32,
//! f16, bf16, i8, i32), [`Product`], which products of them exist (a marker:
//! the doors dispatch on its [`Types`]), and [`Element`], the types with the
//! whole ladder of kernels (f64 for DGEMM, f32 for SGEMM); [`Recast`], the
//! one conversion of a generic view to the concrete type it is.

use cudarc::cublas::result::CublasError;
use cudarc::cublas::{CudaBlas, GemmConfig};
use cudarc::driver::{CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};
use float8::{F8E4M3, F8E5M2};
use gemm_core::warpgroup::WgmmaTypes;
use gemm_core::Precision;
use std::any::TypeId;
use std::mem::ManuallyDrop;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for i8 {}
    impl Sealed for i32 {}
    impl Sealed for float8::F8E4M3 {}
    impl Sealed for float8::F8E5M2 {}
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
impl_scalar!(F8E4M3, u8, "e4m3", 0.125, F8E4M3::NAN, F8E4M3::from_f64, |x: F8E4M3| x.to_f64());
impl_scalar!(F8E5M2, u8, "e5m2", 0.25, F8E5M2::NAN, F8E5M2::from_f64, |x: F8E5M2| x.to_f64());
impl_scalar!(
    i32,
    i32,
    "i32",
    0.0,
    i32::MIN,
    |x: f64| x.round().clamp(i32::MIN as f64, i32::MAX as f64) as i32,
    |x: i32| x as f64
);

mod product_sealed {
    pub trait Sealed<C> {}
    impl Sealed<f64> for f64 {}
    impl Sealed<f32> for f32 {}
    impl Sealed<half::f16> for half::f16 {}
    impl Sealed<f32> for half::f16 {}
    impl Sealed<half::bf16> for half::bf16 {}
    impl Sealed<f32> for half::bf16 {}
    impl Sealed<i32> for i8 {}
    impl Sealed<half::bf16> for float8::F8E4M3 {}
    impl Sealed<half::f16> for float8::F8E4M3 {}
    impl Sealed<f32> for float8::F8E4M3 {}
}

/// Which product a [`Product`] is, as the doors of [`crate::Gemm`] dispatch
/// on it: the f64 or f32 ladder, or the mixed-precision kernels (stage 9,
/// stage 8's `mma.sync`) of these operand and result types. An f32 product
/// is [`Types::F32`] whether or not it runs on TF32 tensor cores: the
/// builder's options decide that ([`crate::Gemm::allow_tf32`]).
#[doc(hidden)]
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Types {
    /// f64 x f64 -> f64, stages 1-8.
    F64,
    /// f32 x f32 -> f32, stages 1-8, or TF32 when allowed.
    F32,
    /// f16, bf16 or i8 operands (`WgmmaTypes::Tf32` is not used here).
    Mixed(WgmmaTypes),
}

/// A product `C <- alpha * op(A) * op(B) + beta * C` the library computes:
/// operands of type `Self`, C of type `C` (sealed). Implemented for
///
/// | A, B | C | accumulation | kernels |
/// | --- | --- | --- | --- |
/// | `f64` | `f64` | f64 | stages 1-8 ([`crate::dgemm`]) |
/// | `f32` | `f32` | f32 | stages 1-7 ([`crate::sgemm`]); TF32 tensor cores with [`Gemm::allow_tf32`](crate::Gemm::allow_tf32) (as f16) |
/// | [`half::f16`] | `f16` or `f32` | f32 | stage 9 on compute capability 9.0, stage 8's `mma.sync` kernels on 8.x or with `.stage(Stage::TensorCore)` ([`crate::hgemm`]) |
/// | [`half::bf16`] | `bf16` or `f32` | f32 | as f16 |
/// | `i8` | `i32` | i32 (wrapping) | as f16 ([`crate::igemm`]) |
///
/// [`Gemm::run`](crate::Gemm::run) and
/// [`Gemm::run_device`](crate::Gemm::run_device) take any of these; alpha
/// and beta are given in f64 and used in the accumulation's type (f32 for
/// the half-precision and TF32 products; i32 for the i8 product, so they
/// must be integers there).
pub trait Product<C: Scalar>: Scalar + product_sealed::Sealed<C> {
    /// Which product this is: the doors of [`crate::Gemm`] dispatch on it.
    #[doc(hidden)]
    const TYPES: Types;
}

impl Product<f64> for f64 {
    const TYPES: Types = Types::F64;
}
/// f32: the f32 ladder, or TF32 tensor cores when the builder allows it
/// ([`Gemm::allow_tf32`](crate::Gemm::allow_tf32)) on a compute capability
/// 8.0 or newer device.
impl Product<f32> for f32 {
    const TYPES: Types = Types::F32;
}
impl Product<half::f16> for half::f16 {
    const TYPES: Types = Types::Mixed(WgmmaTypes::F16);
}
impl Product<f32> for half::f16 {
    const TYPES: Types = Types::Mixed(WgmmaTypes::F16F32);
}
impl Product<half::bf16> for half::bf16 {
    const TYPES: Types = Types::Mixed(WgmmaTypes::Bf16);
}
impl Product<f32> for half::bf16 {
    const TYPES: Types = Types::Mixed(WgmmaTypes::Bf16F32);
}
impl Product<i32> for i8 {
    const TYPES: Types = Types::Mixed(WgmmaTypes::S8);
}
impl Product<half::bf16> for F8E4M3 {
    const TYPES: Types = Types::Mixed(WgmmaTypes::E4m3Bf16);
}
impl Product<half::f16> for F8E4M3 {
    const TYPES: Types = Types::Mixed(WgmmaTypes::E4m3F16);
}
impl Product<f32> for F8E4M3 {
    const TYPES: Types = Types::Mixed(WgmmaTypes::E4m3F32);
}

/// A view generic over its element type ([`crate::MatRef`],
/// [`crate::DeviceView`], a [`crate::Strided`] batch of them, a slice of
/// device views...), converted to the same view written with the element
/// type `U` it has: how a door that dispatched on [`Product::TYPES`] (say
/// [`Types::F64`]) hands its `MatRef<'_, T>` to a function of
/// `MatRef<'_, f64>`.
///
/// # Safety
/// An implementation must make `With<U>` the type `Self` with `Elem`
/// written as `U`, and nothing else changed (lifetimes included): then,
/// when `Elem` and `U` are one type, `Self` and `With<U>` are one type, and
/// [`Recast::recast`] is the identity.
pub(crate) unsafe trait Recast: Sized {
    /// The element type the view is generic over.
    type Elem: Scalar;
    /// The same view of `U`.
    type With<U: Scalar>;
    /// `self`, whose element type is `U`, as the view of `U` it is.
    ///
    /// # Panics
    /// When `U` is not `Self::Elem` (a door dispatched wrongly).
    fn recast<U: Scalar>(self) -> Self::With<U> {
        assert!(
            TypeId::of::<Self::Elem>() == TypeId::of::<U>(),
            "recast of a view of {} as one of {}",
            Self::Elem::NAME,
            U::NAME
        );
        // SAFETY: `Elem` and `U` are one type (equal `TypeId`s; a `Scalar`
        // is 'static, so its `TypeId` names it exactly), so `With<U>` is
        // `Self` (the trait's contract): the same size, alignment and
        // layout, every value of one a valid value of the other.
        // `transmute_copy` reads `self`'s bits as that type (the generic
        // `transmute` cannot see the sizes are equal); `ManuallyDrop`
        // keeps `self` from being dropped as well, so the value moves, as a
        // plain conversion would.
        unsafe { std::mem::transmute_copy::<ManuallyDrop<Self>, Self::With<U>>(&ManuallyDrop::new(self)) }
    }
}

// SAFETY: `With<U>` is `Self` with `T` written as `U` (Recast's contract);
// so for the three below: the device buffers of one launch, as the
// execution layer takes them.
unsafe impl<'x, 'a, T: Scalar> Recast for &'x CudaView<'a, T> {
    type Elem = T;
    type With<U: Scalar> = &'x CudaView<'a, U>;
}

// SAFETY: as above.
unsafe impl<'x, 'a, T: Scalar> Recast for &'x mut CudaViewMut<'a, T> {
    type Elem = T;
    type With<U: Scalar> = &'x mut CudaViewMut<'a, U>;
}

// SAFETY: as above (a list batch's A or B).
unsafe impl<'s, 'x, 'a, T: Scalar> Recast for &'s [&'x CudaView<'a, T>] {
    type Elem = T;
    type With<U: Scalar> = &'s [&'x CudaView<'a, U>];
}

// SAFETY: as above (a list batch's C).
unsafe impl<'s, 'x, 'a, T: Scalar> Recast for &'s mut [&'x mut CudaViewMut<'a, T>] {
    type Elem = T;
    type With<U: Scalar> = &'s mut [&'x mut CudaViewMut<'a, U>];
}

/// A product of the tensor-core types as errors and plans name it, e.g.
/// "bf16 x bf16 -> f32".
pub(crate) fn product_name(types: WgmmaTypes) -> String {
    let (i, o) = match types {
        WgmmaTypes::F16 => ("f16", "f16"),
        WgmmaTypes::F16F32 => ("f16", "f32"),
        WgmmaTypes::Bf16 => ("bf16", "bf16"),
        WgmmaTypes::Bf16F32 => ("bf16", "f32"),
        WgmmaTypes::Tf32 => ("f32 (TF32)", "f32"),
        WgmmaTypes::S8 => ("i8", "i32"),
        WgmmaTypes::E4m3Bf16 => ("e4m3", "bf16"),
        WgmmaTypes::E4m3F16 => ("e4m3", "f16"),
        WgmmaTypes::E4m3F32 => ("e4m3", "f32"),
        WgmmaTypes::E4m3E5m2Bf16 => return "e4m3 x e5m2 -> bf16".into(),
        WgmmaTypes::E4m3E5m2F16 => return "e4m3 x e5m2 -> f16".into(),
        WgmmaTypes::E4m3E5m2F32 => return "e4m3 x e5m2 -> f32".into(),
        WgmmaTypes::E5m2E4m3Bf16 => return "e5m2 x e4m3 -> bf16".into(),
        WgmmaTypes::E5m2E4m3F16 => return "e5m2 x e4m3 -> f16".into(),
        WgmmaTypes::E5m2E4m3F32 => return "e5m2 x e4m3 -> f32".into(),
    };
    format!("{i} x {i} -> {o}")
}

/// An element type with the whole ladder of kernels (stages 1-8, split-K,
/// packing, the host path): `f64` or `f32` (sealed; a
/// [`num_traits::Float`]).
pub trait Element: Scalar + DeviceRepr + ValidAsZeroBits + num_traits::Float + Product<Self> {
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

/// An FP8 element type: [`float8::F8E4M3`] or [`float8::F8E5M2`] (sealed),
/// the operand types of [`crate::Gemm::run_fp8_device`], which pairs them
/// (e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3).
pub trait Fp8: Scalar + fp8_sealed::Sealed {
    /// Whether this is e5m2 (else e4m3).
    #[doc(hidden)]
    const E5M2: bool;
}

mod fp8_sealed {
    pub trait Sealed {}
    impl Sealed for float8::F8E4M3 {}
    impl Sealed for float8::F8E5M2 {}
}

impl Fp8 for F8E4M3 {
    const E5M2: bool = false;
}

impl Fp8 for F8E5M2 {
    const E5M2: bool = true;
}
