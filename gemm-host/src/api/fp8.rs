//! FP8 products of two FP8 types: e4m3 x e4m3 (also [`Gemm::run_device`]'s
//! `F8E4M3` product), e4m3 x e5m2 and e5m2 x e4m3 (training's backward
//! pass: gradients in e5m2 against weights or activations in e4m3), C in
//! bf16, f16 or f32, on stage 9 (compute capability 9.0). e5m2 x e5m2 is
//! not offered (wgmma has it, cuBLASLt does not; no model we know uses it).
//!
//! Source: PTX ISA, `wgmma.mma_async` with `.e4m3` / `.e5m2` operand types;
//! Micikevicius et al., "FP8 Formats for Deep Learning" (the two formats).

use crate::api::dispatch::Kernels;
use crate::api::epilogue::{Epilogue, Fused};
use crate::api::gemm::Gemm;
use crate::device::Device;
use crate::element::{Fp8, Product, Scalar, Types};
use crate::error::Error;
use crate::operands::device_matrix::{DeviceView, DeviceViewMut};
use crate::operands::matrix::{MatMut, MatRef};
use crate::operands::strided::Strided;
use cudarc::driver::CudaView;
use float8::F8E4M3;
use gemm_core::warpgroup::WgmmaTypes;
use std::sync::Arc;

/// The stage-9 types of an `A x B -> C` FP8 product.
fn fp8_types<A: Fp8, B: Fp8, C: Scalar>() -> Result<WgmmaTypes, Error>
where
    F8E4M3: Product<C>,
{
    let Types::Mixed(e4m3) = <F8E4M3 as Product<C>>::TYPES else { unreachable!("FP8 products are mixed") };
    let c = e4m3.c_name();
    Ok(match (A::E5M2, B::E5M2, c) {
        (false, false, _) => e4m3,
        (false, true, "bf16") => WgmmaTypes::E4m3E5m2Bf16,
        (false, true, "f16") => WgmmaTypes::E4m3E5m2F16,
        (false, true, _) => WgmmaTypes::E4m3E5m2F32,
        (true, false, "bf16") => WgmmaTypes::E5m2E4m3Bf16,
        (true, false, "f16") => WgmmaTypes::E5m2E4m3F16,
        (true, false, _) => WgmmaTypes::E5m2E4m3F32,
        (true, true, _) => {
            return Err(Error::Unsupported {
                product: format!("e5m2 x e5m2 -> {}", C::NAME),
                why: "FP8 products take e4m3 x e4m3, e4m3 x e5m2 or e5m2 x e4m3 (as cuBLASLt)".into(),
            })
        }
    })
}

/// An FP8 view as a view of e4m3 (the same bytes): the kernels read the
/// bits as the product's types say.
fn e4m3_of<'r, T: Fp8>(v: &'r DeviceView<'_, T>) -> DeviceView<'r, F8E4M3> {
    // SAFETY: both FP8 types are one byte of plain data (any bit pattern
    // valid); the length is the view's own.
    let data = unsafe { v.data.transmute::<F8E4M3>(v.data.len()) }.expect("one-byte elements: same length");
    DeviceView { data, dims: v.dims, device: v.device, address: v.address }
}

/// The kernels of an FP8 product (`batch`: a batch's), with its type pair.
fn fp8_kernels<A: Fp8, B: Fp8, C: Scalar>(
    gemm: &Gemm,
    batch: bool,
    device: Option<&Arc<Device>>,
) -> Result<Kernels, Error>
where
    F8E4M3: Product<C>,
{
    let types = fp8_types::<A, B, C>()?;
    Ok(match gemm.kernels::<F8E4M3, C>(batch, device)? {
        Kernels::TensorCores(_, mma_sync) => Kernels::TensorCores(types, mma_sync),
        other => other,
    })
}

impl Gemm {
    /// Enqueues `C <- alpha * op(A) * op(B) + beta * C` on FP8 device
    /// matrices of either format (see the module docs): as
    /// [`Gemm::run_device`] (every layout and op; wgmma reads FP8 K-major,
    /// so the others are copied K-major first), f32 accumulation promoted
    /// every 128 of k. e4m3 x e4m3 runs exactly as `run_device` does.
    ///
    /// ```no_run
    /// use gemm::float8::{F8E4M3, F8E5M2};
    /// use gemm::half::bf16;
    /// use gemm::{DeviceMatrix, Gemm};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let dev = gemm::default_device()?;
    /// let grad = DeviceMatrix::<F8E5M2>::zeros(&dev, 256, 1024)?;
    /// let w = DeviceMatrix::<F8E4M3>::zeros(&dev, 1024, 512)?;
    /// let mut dx = DeviceMatrix::<bf16>::zeros(&dev, 256, 512)?;
    /// Gemm::new().run_fp8_device(&grad, &w, &mut dx)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Gemm::run_device`]; [`Error::Unsupported`] for e5m2 x e5m2.
    pub fn run_fp8_device<'a, 'b, 'c, A: Fp8, B: Fp8, C: Scalar>(
        &self,
        a: impl Into<DeviceView<'a, A>>,
        b: impl Into<DeviceView<'b, B>>,
        c: impl Into<DeviceViewMut<'c, C>>,
    ) -> Result<(), Error>
    where
        F8E4M3: Product<C>,
    {
        let (a, b, c) = (a.into(), b.into(), c.into());
        let (a, b) = (e4m3_of(&a), e4m3_of(&b));
        let kernels = fp8_kernels::<A, B, C>(self, false, Some(c.device))?;
        self.run_device_on(kernels, a, b, c)
    }

    /// The strided batch C_i <- alpha op(A_i) op(B_i) + beta C_i of
    /// [`Gemm::run_strided_device`] with FP8 operands of either format (as
    /// [`Gemm::run_fp8_device`]): one launch, every product on the same
    /// kernel, so each C_i has the bits the single product would give.
    ///
    /// ```no_run
    /// use gemm::float8::{F8E4M3, F8E5M2};
    /// use gemm::half::bf16;
    /// use gemm::{DeviceMatrix, Gemm, Strided};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let dev = gemm::default_device()?;
    /// let (count, m, n, k) = (8, 128, 256, 512);
    /// let grads = DeviceMatrix::<F8E5M2>::zeros(&dev, count * m, k)?; // row-major, one after the other
    /// let w = DeviceMatrix::<F8E4M3>::zeros(&dev, k, n)?; // one B for every product
    /// let mut dx = DeviceMatrix::<bf16>::zeros(&dev, count * m, n)?;
    /// Gemm::new().run_strided_fp8_device(
    ///     Strided::new(grads.view(0, 0, m, k)?, count, m * k)?,
    ///     Strided::new(&w, count, 0)?,
    ///     Strided::new(dx.view_mut(0, 0, m, n)?, count, m * n)?,
    /// )?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Gemm::run_strided_device`]; [`Error::Unsupported`] for e5m2 x e5m2.
    pub fn run_strided_fp8_device<'a, 'b, 'c, A: Fp8, B: Fp8, C: Scalar>(
        &self,
        a: Strided<DeviceView<'a, A>>,
        b: Strided<DeviceView<'b, B>>,
        c: Strided<DeviceViewMut<'c, C>>,
    ) -> Result<(), Error>
    where
        F8E4M3: Product<C>,
    {
        let kernels = fp8_kernels::<A, B, C>(self, true, Some(c.first.device))?;
        let (a, b) = (&a, &b);
        let a = Strided { first: e4m3_of(&a.first), count: a.count, stride: a.stride };
        let b = Strided { first: e4m3_of(&b.first), count: b.count, stride: b.stride };
        self.run_strided_device_on(kernels, a, b, c)
    }

    /// [`Gemm::run`] (host matrices or views, every layout and op, the
    /// streamed host path) with FP8 operands of either format (as
    /// [`Gemm::run_fp8_device`]). e4m3 x e4m3 runs exactly as `run` does.
    ///
    /// ```no_run
    /// use gemm::float8::{F8E4M3, F8E5M2};
    /// use gemm::{Gemm, Matrix};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let grad = Matrix::from_fn(256, 1024, |i, j| F8E5M2::from_f32(((i + j) % 7) as f32 - 3.0));
    /// let w = Matrix::from_fn(1024, 512, |i, j| F8E4M3::from_f32(((i * j) % 5) as f32 - 2.0));
    /// let mut dx = Matrix::<f32>::zeros(256, 512);
    /// Gemm::new().run_fp8(&grad, &w, &mut dx)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Gemm::run`]; [`Error::Unsupported`] for e5m2 x e5m2.
    pub fn run_fp8<'a, 'b, 'c, A: Fp8, B: Fp8, C: Scalar>(
        &self,
        a: impl Into<MatRef<'a, A>>,
        b: impl Into<MatRef<'b, B>>,
        c: impl Into<MatMut<'c, C>>,
    ) -> Result<(), Error>
    where
        F8E4M3: Product<C>,
    {
        let kernels = fp8_kernels::<A, B, C>(self, false, None)?;
        self.run_on(kernels, a.into().fp8_as_e4m3(), b.into().fp8_as_e4m3(), c.into())
    }

    /// The grouped batch of [`Gemm::run_grouped_fused_device`] (problems of
    /// their own shapes, one launch of stage 9; `epilogues` one per problem,
    /// or `&[]` for the plain product) with FP8 operands of either format
    /// (as [`Gemm::run_fp8_device`]): the mixture-of-experts layer's
    /// backward pass, e5m2 gradients against e4m3 weights. A pair of two
    /// formats runs every problem untransposed (one kernel, one order of
    /// the formats): a column-major C is stored transposed by the threads
    /// rather than by TMA. e4m3 x e4m3 runs as `run_grouped_fused_device`
    /// (`run_grouped_device` without epilogues).
    ///
    /// ```no_run
    /// use gemm::float8::{F8E4M3, F8E5M2};
    /// use gemm::half::bf16;
    /// use gemm::{DeviceMatrix, DeviceView, DeviceViewMut, Gemm};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let dev = gemm::default_device()?;
    /// let (rows, n, k) = ([96, 300, 17], 512, 1024);
    /// let grads: Vec<_> = rows.iter().map(|&m| DeviceMatrix::<F8E5M2>::zeros(&dev, m, k)).collect::<Result<_, _>>()?;
    /// let w: Vec<_> = rows.iter().map(|_| DeviceMatrix::<F8E4M3>::zeros(&dev, k, n)).collect::<Result<_, _>>()?;
    /// let mut dx: Vec<_> = rows.iter().map(|&m| DeviceMatrix::<bf16>::zeros(&dev, m, n)).collect::<Result<_, _>>()?;
    /// let a: Vec<DeviceView<F8E5M2>> = grads.iter().map(|m| m.as_view()).collect();
    /// let b: Vec<DeviceView<F8E4M3>> = w.iter().map(|m| m.as_view()).collect();
    /// let mut c: Vec<DeviceViewMut<bf16>> = dx.iter_mut().map(|m| m.as_view_mut()).collect();
    /// Gemm::new().run_grouped_fp8_device(&a, &b, &mut c, &[])?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Gemm::run_grouped_fused_device`]; [`Error::Unsupported`] for
    /// e5m2 x e5m2.
    pub fn run_grouped_fp8_device<A: Fp8, B: Fp8, C: Scalar>(
        &self,
        a: &[DeviceView<'_, A>],
        b: &[DeviceView<'_, B>],
        c: &mut [DeviceViewMut<'_, C>],
        epilogues: &[Epilogue<'_>],
    ) -> Result<(), Error>
    where
        F8E4M3: Product<C>,
    {
        self.run_list_fp8(a, b, c, epilogues, None)
    }

    /// The masked layout of [`Gemm::run_masked_device`] (each expert a slot
    /// of m rows, its row count on the GPU) with FP8 operands of either
    /// format, as [`Gemm::run_grouped_fp8_device`].
    ///
    /// # Errors
    /// As [`Gemm::run_masked_device`]; [`Error::Unsupported`] for e5m2 x
    /// e5m2.
    pub fn run_masked_fp8_device<A: Fp8, B: Fp8, C: Scalar>(
        &self,
        a: &[DeviceView<'_, A>],
        b: &[DeviceView<'_, B>],
        c: &mut [DeviceViewMut<'_, C>],
        rows: &CudaView<'_, u32>,
        epilogues: &[Epilogue<'_>],
    ) -> Result<(), Error>
    where
        F8E4M3: Product<C>,
    {
        self.run_list_fp8(a, b, c, epilogues, Some(rows))
    }

    /// A grouped (`rows` None) or masked list of FP8 products, the views as
    /// e4m3: e4m3 x e4m3 through the e4m3 doors, a pair of two formats on
    /// its own kernels (the fused ones, also without epilogues).
    fn run_list_fp8<A: Fp8, B: Fp8, C: Scalar>(
        &self,
        a: &[DeviceView<'_, A>],
        b: &[DeviceView<'_, B>],
        c: &mut [DeviceViewMut<'_, C>],
        epilogues: &[Epilogue<'_>],
        rows: Option<&CudaView<'_, u32>>,
    ) -> Result<(), Error>
    where
        F8E4M3: Product<C>,
    {
        let types = fp8_types::<A, B, C>()?;
        let a: Vec<_> = a.iter().map(e4m3_of).collect();
        let b: Vec<_> = b.iter().map(e4m3_of).collect();
        match rows {
            _ if A::E5M2 || B::E5M2 => {}
            None => return self.run_grouped_fused_device(&a, &b, c, epilogues),
            Some(rows) => return self.run_masked_device(&a, &b, c, rows, epilogues),
        }
        self.run_list_fused(&a, &b, c, epilogues, rows, Some(types))
    }
}

impl Fused<'_, '_> {
    /// [`Gemm::run_fp8_device`] with the epilogue fused (block scales
    /// included), as [`Fused::run_device`].
    ///
    /// # Errors
    /// As [`Fused::run_device`]; [`Error::Unsupported`] for e5m2 x e5m2.
    pub fn run_fp8_device<'a, 'b, 'c, A: Fp8, B: Fp8, C: Scalar>(
        &self,
        a: impl Into<DeviceView<'a, A>>,
        b: impl Into<DeviceView<'b, B>>,
        c: impl Into<DeviceViewMut<'c, C>>,
    ) -> Result<(), Error>
    where
        F8E4M3: Product<C>,
    {
        let (a, b, c) = (a.into(), b.into(), c.into());
        let (a, b) = (e4m3_of(&a), e4m3_of(&b));
        let types = fp8_types::<A, B, C>()?;
        // The options and the epilogue checked as for e4m3 (the same kernels' rules).
        self.types::<F8E4M3, C>(Some(c.device))?;
        self.run_device_as(types, a, b, c)
    }
}
