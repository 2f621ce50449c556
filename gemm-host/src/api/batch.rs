//! Batched products: strided batches ([`Strided`]), pointer-array batches
//! and grouped batches (lists of device matrices), each in one launch.
//!
//! - [`Gemm::run_strided`] / [`Gemm::run_strided_device`]: `count` products
//!   C_i <- alpha op(A_i) op(B_i) + beta C_i of one shape, operand i at
//!   `i * stride` elements from the first (cuBLAS's
//!   `cublasDgemmStridedBatched`); stride 0 shares one matrix among all.
//! - [`Gemm::run_batched_device`]: same-shaped matrices at unrelated
//!   addresses (cuBLAS's `cublasDgemmBatched`).
//! - [`Gemm::run_grouped_device`]: problems of any shapes (cuBLAS's
//!   `cublasGemmGroupedBatchedEx`, CUTLASS's grouped GEMM; the
//!   mixture-of-experts case), one launch over all of their tiles.
//!
//! The kernels are the single-product ones: a block finds its product from
//! the grid (`gemm_core::batch`).

use crate::api::dispatch::Kernels;
use crate::api::gemm::Gemm;
use crate::describe::check::layouts_name;
use crate::device::memory::{alloc_uninit, memcpy_htod};
use crate::device::staging::copy_elements;
use crate::device::Device;
use crate::element::{Product, Scalar};
use crate::error::{DriverContext, Error};
use crate::exec;
use crate::operands::device_matrix::{DeviceView, DeviceViewMut};
use crate::operands::matrix::{MatMut, MatRef};
use crate::operands::strided::Strided;
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DevicePtrMut};
use gemm_core::batch::batch_len;
use gemm_core::shape::MatrixDims;
use gemm_core::GemmDims;
use std::mem::size_of;

impl Gemm {
    /// Runs the strided batch C_i <- alpha op(A_i) op(B_i) + beta C_i,
    /// i < `a.count()`, on host batches and blocks until C holds the result
    /// (the padding between C's matrices is left as it was). The batch
    /// extents go up and C comes back whole when they fit the device's
    /// memory budget ([`Gemm::memory_budget`]); a larger batch runs product
    /// by product through the host path ([`Gemm::run`]).
    ///
    /// ```no_run
    /// use gemm::{Gemm, Layout, MatRef, Strided};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let (count, m, n, k) = (100, 64, 32, 48);
    /// let x = vec![1.0f64; count * m * k];
    /// let w = vec![0.5f64; k * n];
    /// let mut y = vec![0.0f64; count * m * n];
    /// Gemm::new().run_strided(
    ///     Strided::from_slice(&x, count, m, k, Layout::RowMajor)?,
    ///     Strided::new(MatRef::from_slice(&w, k, n, Layout::RowMajor, n)?, count, 0)?,
    ///     Strided::from_slice_mut(&mut y, count, m, n, Layout::RowMajor)?,
    /// )?;
    /// assert_eq!(y[0], 24.0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Gemm::run`], plus [`Error::BatchCount`] and [`Error::BatchStorage`].
    pub fn run_strided<'a, 'b, 'c, T: Product<C>, C: Scalar>(
        &self,
        a: Strided<MatRef<'a, T>>,
        b: Strided<MatRef<'b, T>>,
        mut c: Strided<MatMut<'c, C>>,
    ) -> Result<(), Error> {
        let kernels = self.kernels::<T, C>(true, None)?;
        let (dims, count) = self.desc.strided_problem(
            (a.first.dims(), a.count, a.stride, a.first.as_slice().len()),
            (b.first.dims(), b.count, b.stride, b.first.as_slice().len()),
            (c.first.dims(), c.count, c.stride, c.first.storage_len()),
        )?;
        self.check_no_group("host batches (run_strided)")?;
        if count == 0 || dims.is_empty() || self.desc.leaves_c_unchanged(&dims) {
            return Ok(());
        }
        let device = match self.device_option() {
            Some(d) => d.clone(),
            None => crate::device::default_device()?,
        };
        let launch = self.launch_on(kernels, &device, &dims, count)?;
        let stream = self.stream_on(&device)?;
        let extent = |d: &MatrixDims, stride: usize| batch_len(d, count, stride).unwrap_or(0);
        let (la, lb, lc) =
            (extent(&a.first.dims(), a.stride), extent(&b.first.dims(), b.stride), extent(&c.first.dims(), c.stride));
        device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let budget = match self.memory_budget {
            Some(x) => x,
            None => cudarc::driver::result::mem_get_info().map(|(free, _)| free / 10 * 9).unwrap_or(1 << 30),
        };
        if (la + lb) * size_of::<T>() + lc * size_of::<C>() > budget {
            // Product by product through the host path (tiles, out of core).
            for i in 0..count {
                let ci = c.first.rb_at(i * c.stride);
                self.run(a.matrix(i), b.matrix(i), ci)?;
            }
            return Ok(());
        }
        // A and B go up when the product reads them; C's matrices'
        // elements only, both ways (up only when beta reads them): the gaps
        // between matrices and the padding are neither read nor written.
        let reads_ab = self.desc.alpha != 0.0 && dims.k > 0;
        let up = |span: &[T]| -> Result<CudaSlice<T>, Error> {
            // SAFETY: filled by the copy before any read; not read when the
            // product does not read A and B.
            let mut d = unsafe { alloc_uninit::<T>(&stream, span.len().max(1)) }?;
            if reads_ab && !span.is_empty() {
                memcpy_htod(&stream, span, &mut d.slice_mut(..))?;
            }
            Ok(d)
        };
        let (da, db) = (up(&a.first.as_slice()[..la])?, up(&b.first.as_slice()[..lb])?);
        let (c_dims, c_stride) = (c.first.dims(), c.stride);
        let host = c.first.storage_mut()[..lc].as_mut_ptr();
        // SAFETY: every element of each C is uploaded below when beta != 0,
        // and otherwise written by the product before it is read back.
        let mut dc = unsafe { alloc_uninit::<C>(&stream, lc) }?;
        let dev = dc.device_ptr_mut(&stream).0;
        if self.desc.beta != 0.0 {
            // SAFETY: the batch (validated shapes, `count` matrices `c_stride`
            // apart) lies in C's storage; the device buffer has the same
            // layout and length; synchronized before return.
            unsafe { copy_elements(&stream, c_dims, (count, c_stride), host, dev, true) }?;
        }
        let operands = (&da.slice(..), &db.slice(..), &mut dc.slice_mut(..));
        let strides = [a.stride, b.stride, c.stride];
        exec::enqueue(&launch, &device, &stream, (self.desc.alpha, self.desc.beta), operands, (count, strides))?;
        // SAFETY: as above; C is exclusively borrowed until the synchronize.
        unsafe { copy_elements(&stream, c_dims, (count, c_stride), host, dev, false) }?;
        stream.synchronize().during("cuStreamSynchronize")
    }

    /// Enqueues the strided batch C_i <- alpha op(A_i) op(B_i) + beta C_i,
    /// i < `a.count()`, on device matrices, in one launch, on the builder's
    /// stream or else the device's; returns without waiting (as
    /// [`Gemm::run_device`]). Batches past the grid's z limit are laid out
    /// along x as well (`gemm_core::batch`).
    ///
    /// ```no_run
    /// use gemm::{DeviceMatrix, Gemm, Layout, Strided};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let dev = gemm::default_device()?;
    /// let s = dev.stream();
    /// let (count, m, n, k) = (100, 64, 32, 48);
    /// let a = DeviceMatrix::from_cuda_slice(&dev, s.alloc_zeros::<f32>(count * m * k)?, m, k, Layout::RowMajor, k)?;
    /// let w = DeviceMatrix::<f32>::zeros(&dev, k, n)?; // one B for every product
    /// let mut c = DeviceMatrix::from_cuda_slice(&dev, s.alloc_zeros::<f32>(count * m * n)?, m, n, Layout::RowMajor, n)?;
    /// Gemm::new().run_strided_device(
    ///     Strided::new(&a, count, m * k)?,
    ///     Strided::new(&w, count, 0)?,
    ///     Strided::new(&mut c, count, m * n)?,
    /// )?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Gemm::run_device`], plus [`Error::BatchCount`] when the counts
    /// differ and [`Error::BatchStorage`] when a buffer is shorter than its
    /// batch; [`ShapeError::Overlap`](crate::ShapeError::Overlap) when C's batch extent meets A's or B's.
    pub fn run_strided_device<'a, 'b, 'c, T: Product<C>, C: Scalar>(
        &self,
        a: Strided<DeviceView<'a, T>>,
        b: Strided<DeviceView<'b, T>>,
        c: Strided<DeviceViewMut<'c, C>>,
    ) -> Result<(), Error> {
        let kernels = self.kernels::<T, C>(true, Some(c.first.device))?;
        self.run_strided_device_on(kernels, a, b, c)
    }

    /// [`Gemm::run_strided_device`] on the kernels chosen (the FP8 door
    /// swaps in its type pair).
    pub(crate) fn run_strided_device_on<'a, 'b, 'c, T: Product<C>, C: Scalar>(
        &self,
        kernels: Kernels,
        a: Strided<DeviceView<'a, T>>,
        b: Strided<DeviceView<'b, T>>,
        mut c: Strided<DeviceViewMut<'c, C>>,
    ) -> Result<(), Error> {
        self.check_device_call()?;
        let Some((dims, count, device, stream)) = self.desc.strided_device_problem(&a, &b, &c, self.target())? else {
            return Ok(());
        };
        let launch = self.launch_on(kernels, &device, &dims, count)?;
        let operands = (&a.first.data, &b.first.data, &mut c.first.data);
        let strides = [a.stride, b.stride, c.stride];
        exec::enqueue(&launch, &device, &stream, (self.desc.alpha, self.desc.beta), operands, (count, strides))
    }

    /// Enqueues a pointer-array batch: C_i <- alpha op(A_i) op(B_i) + beta
    /// C_i for same-shaped device matrices at any addresses (cuBLAS's
    /// `cublas<t>gemmBatched`, `cublasGemmBatchedEx`); returns without
    /// waiting. Every type pair of [`crate::Product`]: f64 and f32 in one
    /// launch (the list of addresses is uploaded on the stream before it);
    /// the mixed-precision products (f16, bf16, TF32, i8) in one grouped
    /// launch of stage 9 on compute capability 9.0 (as
    /// [`Gemm::run_grouped_device`]), one launch per product on 8.x.
    ///
    /// # Errors
    /// [`Error::ShapeVaries`] when the products differ in m, n or k; else as
    /// [`Gemm::run_grouped_device`].
    pub fn run_batched_device<T: Product<C>, C: Scalar>(
        &self,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        c: &mut [DeviceViewMut<'_, C>],
    ) -> Result<(), Error> {
        self.run_list::<T, C>(a, b, c, true)
    }

    /// [`Gemm::run_batched_device`] (`same_shape`) and
    /// [`Gemm::run_grouped_device`]: every problem validated first (shapes
    /// and storage, devices, C apart from its A and B and from the other
    /// problems' C; on the ladder, one layout combination for all), then the
    /// list's launch on the call's stream.
    fn run_list<T: Product<C>, C: Scalar>(
        &self,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        c: &mut [DeviceViewMut<'_, C>],
        same_shape: bool,
    ) -> Result<(), Error> {
        let kernels = self.kernels::<T, C>(true, c.first().map(|c| c.device))?;
        self.check_device_call()?;
        if same_shape {
            self.desc.shape_varies(a, b, c)?;
        }
        // The ladder's one launch reads every problem in one layout combination.
        let ladder = matches!(kernels, Kernels::Ladder(_));
        let mut first: Option<GemmDims> = None;
        let same_layouts = |i: usize, dims: &GemmDims| {
            if let (true, Some(f)) = (ladder, first) {
                if f.kernel_form().0.layouts() != dims.kernel_form().0.layouts() {
                    return Err(Error::MixedLayouts {
                        index: i,
                        expected: layouts_name(&f),
                        found: layouts_name(dims),
                    });
                }
            }
            if first.is_none() && !(dims.is_empty() || self.desc.leaves_c_unchanged(dims)) {
                first = Some(*dims);
            }
            Ok(())
        };
        let Some((device, todo)) = self.desc.list_problems(a, b, c, self.target(), same_layouts, true)? else {
            return Ok(());
        };
        let stream = self.stream_on(&device)?;
        if todo.is_empty() {
            return Ok(());
        }
        let launch = self.list_launch(kernels, &device, &todo)?;
        let av: Vec<&CudaView<'_, T>> = a.iter().map(|v| &v.data).collect();
        let bv: Vec<&CudaView<'_, T>> = b.iter().map(|v| &v.data).collect();
        let mut cv: Vec<&mut CudaViewMut<'_, C>> = c.iter_mut().map(|v| &mut v.data).collect();
        exec::enqueue_list(&launch, &device, &stream, (self.desc.alpha, self.desc.beta), (&av, &bv, &mut cv))
    }

    /// Enqueues a grouped batch: C_i <- alpha op(A_i) op(B_i) + beta C_i for
    /// problems of any shapes (m_i x n_i x k_i), in one launch over the
    /// tiles of all of them (cuBLAS's `cublasGemmGroupedBatchedEx`,
    /// CUTLASS's grouped GEMM); returns without waiting. alpha, beta and
    /// op(A), op(B) are the builder's, for every problem; all problems must
    /// store their operands in one layout combination (after the kernel form
    /// of a column-major C). One configuration serves every problem: the
    /// builder's, or the one measured for the largest problem. Every type
    /// pair of [`crate::Product`]: f64 and f32 in one launch; the
    /// mixed-precision products (f16, bf16 with C in the same type or f32 -
    /// a mixture-of-experts layer - TF32, i8), all validated first, on
    /// compute capability 9.0 in one grouped launch of stage 9 (one per
    /// layout combination the operands are read in), whose block tiles are
    /// planned for the average problem and whose problems are not split
    /// along k; on 8.x one launch of stage 8 per non-empty problem.
    ///
    /// ```no_run
    /// use gemm::{DeviceMatrix, DeviceView, DeviceViewMut, Gemm};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let dev = gemm::default_device()?;
    /// let tokens = [300, 1200, 40]; // rows routed to each expert
    /// let x: Vec<_> = tokens.iter().map(|&m| DeviceMatrix::<f32>::zeros(&dev, m, 1024)).collect::<Result<_, _>>()?;
    /// let w: Vec<_> = tokens.iter().map(|_| DeviceMatrix::<f32>::zeros(&dev, 1024, 1024)).collect::<Result<_, _>>()?;
    /// let mut y: Vec<_> = tokens.iter().map(|&m| DeviceMatrix::<f32>::zeros(&dev, m, 1024)).collect::<Result<_, _>>()?;
    /// let a: Vec<DeviceView<f32>> = x.iter().map(|m| m.as_view()).collect();
    /// let b: Vec<DeviceView<f32>> = w.iter().map(|m| m.as_view()).collect();
    /// let mut c: Vec<DeviceViewMut<f32>> = y.iter_mut().map(|m| m.as_view_mut()).collect();
    /// Gemm::new().run_grouped_device(&a, &b, &mut c)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::BatchCount`] when the lists differ in length;
    /// [`Error::Problem`] naming the first invalid problem (shapes, storage,
    /// C overlapping its A or B, another device);
    /// [`Error::MixedLayouts`]; [`Error::BatchOverlap`] when two problems'
    /// C overlap; [`Error::DeviceLimit`] when the blocks of all problems
    /// exceed the grid; otherwise as [`Gemm::run_device`].
    pub fn run_grouped_device<T: Product<C>, C: Scalar>(
        &self,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        c: &mut [DeviceViewMut<'_, C>],
    ) -> Result<(), Error> {
        self.run_list::<T, C>(a, b, c, false)
    }

    /// The configuration of a grouped or pointer-array batch whose largest
    /// product is shaped as `kdims` (kernel form): the builder's, or the
    /// measured choice ([`Gemm::plan`]; such a batch is never split nor
    /// packed: [`Gemm::check_options`] refused `.split_k(n)` with n > 1 and
    /// `.pack(true)` at the call's start, even for one problem).
    pub(crate) fn batch_config(
        &self,
        device: &Device,
        precision: gemm_core::Precision,
        kdims: &GemmDims,
        count: usize,
    ) -> Result<gemm_core::KernelConfig, Error> {
        let dims = (kdims.m, kdims.n, kdims.k);
        Ok(self.plan_on(Some(device), precision, dims, kdims.layouts(), count)?.config)
    }
}
