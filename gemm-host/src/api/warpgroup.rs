//! The tensor-core types' options (f16 and bf16 products with f32
//! accumulation, f32 products on TF32 tensor cores when asked for
//! ([`Gemm::allow_tf32`]), the i8 product with i32 accumulation): which
//! builder options apply to them, whether an f32 product runs on TF32, and
//! which stage runs them on a device; and the BLAS-style `hgemm` and
//! `igemm`. Their launches are the execution layer's (`exec::warpgroup`,
//! `exec::mma_sync`), reached through the one dispatch (`api::dispatch`).

use crate::api::gemm::Gemm;
use crate::device::{default_device, Device};
use crate::element::product_name;
use crate::error::Error;
use crate::exec::TensorCoreStage;
use crate::operands::matrix::{MatMut, MatRef};
use gemm_core::warpgroup::WgmmaTypes;
use gemm_core::Stage;
use half::f16;
use std::sync::Arc;

impl Gemm {
    /// The mixed-precision products' options check: the tuning options of
    /// stages 1-8 do not apply to them, but for `.stage(Stage::TensorCore)`
    /// alone, which asks for stage 8's `mma.sync` kernels (returns true);
    /// the i8 product's alpha and beta are i32.
    pub(crate) fn mixed_options(&self, types: WgmmaTypes) -> Result<bool, Error> {
        let mma_sync = self.stage_option() == Some(Stage::TensorCore) && {
            let mut rest = self.clone();
            rest.clear_stage();
            rest.tuning_option_set().is_none()
        };
        if let (Some(option), false) = (self.tuning_option_set(), mma_sync) {
            return Err(Error::Unsupported {
                product: product_name(types),
                why: format!(
                    "{option} does not apply: these products run stage 9's kernels, or stage 8's with .stage(Stage::TensorCore) alone"
                ),
            });
        }
        if types == WgmmaTypes::S8 {
            for (name, v) in [("alpha", self.desc.alpha), ("beta", self.desc.beta)] {
                if v.fract() != 0.0 || !(i32::MIN as f64..=i32::MAX as f64).contains(&v) {
                    return Err(Error::Unsupported {
                        product: product_name(types),
                        why: format!(
                            "{name} = {v}: it computes in i32, so alpha and beta must be integers in i32's range"
                        ),
                    });
                }
            }
        }
        Ok(mma_sync)
    }

    /// Whether the options let an f32 product run on TF32 tensor cores:
    /// [`Gemm::allow_tf32`], and no option of stages 1-8 set but
    /// `.stage(Stage::TensorCore)` alone (stage 8's TF32 kernels).
    pub(crate) fn tf32_by_options(&self) -> bool {
        self.tf32 && (self.tuning_option_set().is_none() || matches!(self.mixed_options(WgmmaTypes::Tf32), Ok(true)))
    }

    /// Whether an f32 product runs on TF32 tensor cores: only when
    /// [`Gemm::allow_tf32`] asked for it, no option of stages 1-8 is set
    /// (but `.stage(Stage::TensorCore)`, which picks stage 8's TF32 kernels),
    /// and the device (`device`, else the builder's, else the default) has
    /// compute capability 8.0 or newer.
    pub(crate) fn uses_tf32(&self, device: Option<&Arc<Device>>) -> Result<bool, Error> {
        if !self.tf32 {
            return Ok(false);
        }
        if !self.tf32_by_options() {
            return Ok(false);
        }
        // Without a device the f32 path runs and reports it, after the
        // shape checks.
        let device = match device.or(self.device_option()) {
            Some(d) => d.clone(),
            None => match default_device() {
                Ok(d) => d,
                Err(_) => return Ok(false),
            },
        };
        Ok(device.compute_capability() >= (8, 0))
    }

    /// Which kernels run a mixed-precision product on `device`: stage 9 on
    /// compute capability 9.0 (unless `mma_sync`: stage 8 was asked for),
    /// stage 8's `mma.sync` kernels on other devices from 8.0 on.
    pub(crate) fn mixed_stage(types: WgmmaTypes, device: &Device, mma_sync: bool) -> Result<TensorCoreStage, Error> {
        let (major, minor) = device.compute_capability();
        if (major, minor) == (9, 0) && !mma_sync {
            Ok(TensorCoreStage::Warpgroup)
        } else if types.fp8() {
            Err(Error::Unsupported {
                product: product_name(types),
                why: if mma_sync {
                    "FP8 runs on stage 9 (warpgroup MMA) only: .stage(Stage::TensorCore) does not apply".into()
                } else {
                    format!(
                        "FP8 runs on stage 9 (warpgroup MMA, compute capability 9.0); {} has {major}.{minor}",
                        device.name()
                    )
                },
            })
        } else if major >= 8 {
            Ok(TensorCoreStage::MmaSync)
        } else {
            Err(Error::Unsupported {
                product: product_name(types),
                why: format!(
                    "its kernels use the tensor cores' mma.sync of compute capability 8.0 and newer; {} has {major}.{minor}",
                    device.name()
                ),
            })
        }
    }
}

/// `C = op(A) * op(B)` with f16 operands, f32 accumulation and an f16 C, on
/// the default device: the BLAS-style `hgemm` (alpha = 1, beta = 0). Runs
/// stage 9 (Hopper warpgroup MMA) on compute capability 9.0 (H100, H200),
/// stage 8's `mma.sync` kernels on 8.x (A100, RTX 30xx/40xx, L4...). For an
/// f32 C, bf16, alpha, beta or op flags, use [`Gemm::run`].
///
/// ```no_run
/// use gemm::half::f16;
/// use gemm::Matrix;
/// # fn main() -> Result<(), gemm::Error> {
/// let a = Matrix::<f16>::from_fn(256, 512, |i, j| f16::from_f32(((i + j) % 5) as f32));
/// let b = Matrix::<f16>::from_fn(512, 128, |i, j| f16::from_f32(((i * j) % 3) as f32));
/// let mut c = Matrix::<f16>::zeros(256, 128);
/// gemm::hgemm(&a, &b, &mut c)?;
/// let mut c32 = Matrix::<f32>::zeros(256, 128); // f32 output
/// gemm::Gemm::new().run(&a, &b, &mut c32)?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::Shape`]; [`Error::Unsupported`] on a GPU older than compute
/// capability 8.0; [`Error::NoDriver`], [`Error::NoDevice`],
/// [`Error::OutOfMemory`], [`Error::Driver`]. C is untouched on error.
///
/// # Source
/// PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
/// Instructions" and "Tensor Copy Instructions".
pub fn hgemm<'a, 'b, 'c>(
    a: impl Into<MatRef<'a, f16>>,
    b: impl Into<MatRef<'b, f16>>,
    c: impl Into<MatMut<'c, f16>>,
) -> Result<(), Error> {
    Gemm::new().run(a, b, c)
}

/// `C = op(A) * op(B)` with i8 operands and an i32 C, accumulated exactly in
/// i32 (wrapping on overflow, as cuBLAS's `CUBLAS_COMPUTE_32I`), on the
/// default device (alpha = 1, beta = 0). Runs stage 9 (Hopper warpgroup
/// MMA) on compute capability 9.0, stage 8's `mma.sync` kernels on 8.x. For integer alpha and
/// beta, or op flags, use [`Gemm::run`].
///
/// ```no_run
/// use gemm::Matrix;
/// # fn main() -> Result<(), gemm::Error> {
/// let a = Matrix::<i8>::from_fn(256, 512, |i, j| ((i + j) % 7) as i8 - 3);
/// let b = Matrix::<i8>::from_fn(512, 128, |i, j| ((i * j) % 5) as i8 - 2);
/// let mut c = Matrix::<i32>::zeros(256, 128);
/// gemm::igemm(&a, &b, &mut c)?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// As [`hgemm`].
///
/// # Source
/// PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
/// Instructions" (`wgmma.mma_async` with `.s8` operands and `.s32`
/// accumulators).
pub fn igemm<'a, 'b, 'c>(
    a: impl Into<MatRef<'a, i8>>,
    b: impl Into<MatRef<'b, i8>>,
    c: impl Into<MatMut<'c, i32>>,
) -> Result<(), Error> {
    Gemm::new().run(a, b, c)
}
