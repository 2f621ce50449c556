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
use crate::device::memory::{alloc_uninit, memcpy_htod};
use crate::device::staging::copy_elements;
use crate::device::Device;
use crate::element::{Product, Recast, Scalar};
use crate::error::{DriverContext, Error};
use crate::exec;
use crate::operands::device_matrix::{DeviceMatrix, DeviceView, DeviceViewMut};
use crate::operands::matrix::{MatMut, MatRef, Matrix};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtrMut};
use gemm_core::batch::{batch_len, strided_disjoint};
use gemm_core::shape::{spans_overlap, Layout, MatrixDims, Operand};
use gemm_core::{GemmDims, ShapeError};
use std::mem::size_of;
use std::sync::Arc;

/// A strided batch of `count` matrices of one shape: matrix i is the matrix
/// `first` moved `i * stride` elements on in the same storage (a (batch,
/// row, col) tensor has stride rows x cols; stride 0 repeats one matrix, e.g.
/// a weight shared by every product). `V` is a host view ([`MatRef`],
/// [`MatMut`]) or a device view ([`DeviceView`], [`DeviceViewMut`]),
/// inferred from the constructor's arguments: [`Strided::new`] (any view,
/// or a borrowed matrix), [`Strided::from_slice`] and
/// [`Strided::from_slice_mut`] (packed host batches).
///
/// ```
/// use gemm::{Layout, MatRef, Strided};
/// let x = vec![0.0f64; 100 * 6 * 4]; // 100 row-major 6 x 4 matrices, packed
/// let a = Strided::from_slice(&x, 100, 6, 4, Layout::RowMajor)?;
/// assert_eq!((a.count(), a.stride()), (100, 24));
/// let w = vec![1.0f64; 4 * 5];
/// let b = Strided::new(MatRef::from_slice(&w, 4, 5, Layout::RowMajor, 5)?, 100, 0)?; // broadcast
/// assert_eq!(b.matrix(99).get(3, 4), Some(1.0));
/// let mut y = vec![0.0f64; 100 * 6 * 5];
/// let c = Strided::from_slice_mut(&mut y, 100, 6, 5, Layout::RowMajor)?;
/// assert_eq!(c.matrix(1).rows(), 6);
/// # Ok::<(), gemm::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Strided<V> {
    pub(crate) first: V,
    pub(crate) count: usize,
    pub(crate) stride: usize,
}

// SAFETY: `With<U>` is `Self` with the element type written as `U`, as
// `V::With<U>` is `V` so (Recast's contract for `V`).
unsafe impl<V: Recast> Recast for Strided<V> {
    type Elem = V::Elem;
    type With<U: Scalar> = Strided<V::With<U>>;
}

impl<V> Strided<V> {
    /// Matrices in the batch.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Elements from one matrix's first element to the next's.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The first matrix (its storage runs on to the end of the batch).
    pub fn first(&self) -> &V {
        &self.first
    }
}

fn batch_storage(operand: Operand, dims: &MatrixDims, count: usize, stride: usize, len: usize) -> Result<(), Error> {
    let needed = batch_len(dims, count, stride).ok_or(ShapeError::TooLarge {
        operand,
        value: count.max(stride),
        max: gemm_core::shape::MAX_DIM,
    })?;
    if needed > len {
        return Err(Error::BatchStorage { operand, count, stride, needed, len });
    }
    Ok(())
}

fn output_disjoint(dims: &MatrixDims, count: usize, stride: usize) -> Result<(), Error> {
    if strided_disjoint(dims, count, stride) {
        Ok(())
    } else {
        // The first pair that collides is 0 and some q; name 0 and 1 for stride 0.
        let second = (1..count).find(|&q| !strided_disjoint(dims, q + 1, stride)).unwrap_or(1);
        Err(Error::BatchOverlap { first: 0, second })
    }
}

/// What [`Strided::new`] takes as the first matrix of a batch: one of the
/// four views ([`MatRef`], [`MatMut`], [`DeviceView`], [`DeviceViewMut`]),
/// or a borrow of a matrix or view that names one (`&Matrix` and `&MatRef`
/// give a [`MatRef`], `&mut Matrix` and `&mut MatMut` a [`MatMut`],
/// `&DeviceMatrix` a [`DeviceView`], `&mut DeviceMatrix` a
/// [`DeviceViewMut`]), so the batch's type follows from the argument.
/// Sealed: implemented for these types only.
pub trait IntoBatchView: sealed::Sealed {
    /// The view a batch of these holds ([`Strided<Self::View>`]).
    type View: BatchView;

    /// The view.
    #[doc(hidden)]
    fn into_batch_view(self) -> Self::View;
}

/// The first matrix of a [`Strided`] batch: [`MatRef`], [`MatMut`]
/// (host) or [`DeviceView`], [`DeviceViewMut`] (device). Sealed.
pub trait BatchView: sealed::Sealed {
    /// Checks that `count` matrices shaped as this one, `stride` elements
    /// apart, fit its storage (and, for an output, do not overlap).
    #[doc(hidden)]
    fn check_batch(&self, count: usize, stride: usize) -> Result<(), Error>;
}

mod sealed {
    pub trait Sealed {}
}

impl<'a, T: Scalar> sealed::Sealed for MatRef<'a, T> {}
impl<'a, T: Scalar> BatchView for MatRef<'a, T> {
    fn check_batch(&self, count: usize, stride: usize) -> Result<(), Error> {
        batch_storage(Operand::Matrix, &self.dims(), count, stride, self.as_slice().len())
    }
}

impl<'a, T: Scalar> sealed::Sealed for MatMut<'a, T> {}
impl<'a, T: Scalar> BatchView for MatMut<'a, T> {
    fn check_batch(&self, count: usize, stride: usize) -> Result<(), Error> {
        batch_storage(Operand::Matrix, &self.dims(), count, stride, self.storage_len())?;
        output_disjoint(&self.dims(), count, stride)
    }
}

impl<'a, T: Scalar> sealed::Sealed for DeviceView<'a, T> {}
impl<'a, T: Scalar> BatchView for DeviceView<'a, T> {
    fn check_batch(&self, count: usize, stride: usize) -> Result<(), Error> {
        batch_storage(Operand::Matrix, &self.dims, count, stride, self.data.len())
    }
}

impl<'a, T: Scalar> sealed::Sealed for DeviceViewMut<'a, T> {}
impl<'a, T: Scalar> BatchView for DeviceViewMut<'a, T> {
    fn check_batch(&self, count: usize, stride: usize) -> Result<(), Error> {
        batch_storage(Operand::Matrix, &self.dims, count, stride, self.data.len())?;
        output_disjoint(&self.dims, count, stride)
    }
}

impl<V: BatchView> IntoBatchView for V {
    type View = V;
    fn into_batch_view(self) -> V {
        self
    }
}

/// The borrows that name a view, and the view each gives (by its `From`).
macro_rules! borrowed_batch_views {
    ($([$($lt:lifetime),*] $borrow:ty => $view:ty;)*) => {$(
        impl<$($lt,)* T: Scalar> sealed::Sealed for $borrow {}
        impl<$($lt,)* T: Scalar> IntoBatchView for $borrow {
            type View = $view;
            fn into_batch_view(self) -> $view {
                <$view>::from(self)
            }
        }
    )*};
}

borrowed_batch_views! {
    ['a] &'a Matrix<T> => MatRef<'a, T>;
    ['a, 'b] &'a MatRef<'b, T> => MatRef<'b, T>;
    ['a, 'b] &'a MatMut<'b, T> => MatRef<'a, T>;
    ['a] &'a mut Matrix<T> => MatMut<'a, T>;
    ['a, 'b] &'a mut MatMut<'b, T> => MatMut<'a, T>;
    ['a] &'a DeviceMatrix<T> => DeviceView<'a, T>;
    ['a] &'a mut DeviceMatrix<T> => DeviceViewMut<'a, T>;
}

impl<V: BatchView> Strided<V> {
    /// `count` matrices shaped as `first`, `stride` elements apart in its
    /// storage (a view runs on to the end of the storage it borrows: the
    /// rest of a host slice, or of a device buffer, so a buffer of `count *
    /// rows * cols` elements wrapped as one `rows x cols` matrix holds a
    /// packed batch). `first` is a host or device view, or a borrowed
    /// matrix, and sets the batch's type: `&Matrix`, `&MatRef`, `&MatMut` or
    /// a [`MatRef`] makes a batch of [`MatRef`]s; `&mut Matrix`, `&mut
    /// MatMut` or a [`MatMut`] of [`MatMut`]s; `&DeviceMatrix` or a
    /// [`DeviceView`] of [`DeviceView`]s; `&mut DeviceMatrix` or a
    /// [`DeviceViewMut`] of [`DeviceViewMut`]s (a borrow becomes its view;
    /// for another, pass the view, e.g. `m.as_ref()` of a `&mut Matrix`).
    ///
    /// ```
    /// use gemm::{Layout, MatRef, Matrix, Strided};
    /// let w = Matrix::<f32>::filled(4, 5, 1.0);
    /// let b = Strided::new(w.as_ref(), 8, 0)?; // one weight, 8 times
    /// assert_eq!((b.count(), b.matrix(7).get(3, 4)), (8, Some(1.0)));
    /// let x = vec![0.0f32; 2 * 9 + 8]; // 3 column-major 2 x 4 matrices, 9 elements apart
    /// let a = Strided::new(MatRef::from_slice(&x, 2, 4, Layout::ColMajor, 2)?, 3, 9)?;
    /// assert_eq!(a.stride(), 9);
    /// # Ok::<(), gemm::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BatchStorage`] when the storage behind `first` is shorter
    /// than the batch; for an output batch ([`MatMut`], [`DeviceViewMut`])
    /// also [`Error::BatchOverlap`] when two of its matrices share an
    /// element.
    pub fn new(first: impl IntoBatchView<View = V>, count: usize, stride: usize) -> Result<Self, Error> {
        let first = first.into_batch_view();
        first.check_batch(count, stride)?;
        Ok(Strided { first, count, stride })
    }
}

impl<'a, T: Scalar> Strided<MatRef<'a, T>> {
    /// `count` densely packed `rows x cols` matrices in `layout`, one after
    /// the other in `data` (a (batch, row, col) tensor when row-major).
    ///
    /// # Errors
    /// [`Error::Shape`] or [`Error::BatchStorage`] when `data` is too short.
    pub fn from_slice(data: &'a [T], count: usize, rows: usize, cols: usize, layout: Layout) -> Result<Self, Error> {
        let dims = MatrixDims::packed_in(rows, cols, layout);
        let first = MatRef::from_slice(data, rows, cols, layout, dims.ld)?;
        Self::new(first, count, rows * cols)
    }

    /// Matrix `i` (`i < count`).
    ///
    /// # Panics
    /// When `i >= count`.
    pub fn matrix(&self, i: usize) -> MatRef<'a, T> {
        assert!(i < self.count, "matrix {i} of a batch of {}", self.count);
        let data = self.first.as_slice();
        MatRef::from_slice(
            &data[(i * self.stride).min(data.len())..],
            self.first.rows(),
            self.first.cols(),
            self.first.layout(),
            self.first.ld(),
        )
        .expect("validated by the constructor")
    }

    /// The batch of transposes (no copy).
    pub fn t(self) -> Self {
        Strided { first: self.first.t(), ..self }
    }
}

impl<'a, T: Scalar> Strided<MatMut<'a, T>> {
    /// `count` densely packed `rows x cols` output matrices in `layout`, one
    /// after the other in `data` (the mutable [`Strided::from_slice`]).
    ///
    /// # Errors
    /// As [`Strided::from_slice`].
    pub fn from_slice_mut(
        data: &'a mut [T],
        count: usize,
        rows: usize,
        cols: usize,
        layout: Layout,
    ) -> Result<Self, Error> {
        let dims = MatrixDims::packed_in(rows, cols, layout);
        let first = MatMut::from_slice(data, rows, cols, layout, dims.ld)?;
        Self::new(first, count, rows * cols)
    }

    /// Matrix `i` (`i < count`), read-only.
    ///
    /// # Panics
    /// When `i >= count`.
    pub fn matrix(&self, i: usize) -> MatRef<'_, T> {
        assert!(i < self.count, "matrix {i} of a batch of {}", self.count);
        let r = self.first.as_ref();
        let data = r.as_slice();
        MatRef::from_slice(&data[(i * self.stride).min(data.len())..], r.rows(), r.cols(), r.layout(), r.ld())
            .expect("validated by the constructor")
    }

    /// Reborrows the batch.
    pub fn rb(&mut self) -> Strided<MatMut<'_, T>> {
        Strided { first: self.first.rb(), count: self.count, stride: self.stride }
    }
}

impl<'a, T: Scalar> Strided<DeviceView<'a, T>> {
    /// The batch of transposes (no copy).
    pub fn t(self) -> Self {
        Strided { first: self.first.t(), ..self }
    }
}

fn layouts_name(d: &GemmDims) -> String {
    format!("A {}, B {}, C {}", d.a_layout.short_name(), d.b_layout.short_name(), d.c_layout.short_name())
}

/// A list batch's device and the problems that change C: (index in the
/// lists, dimensions in the user's form).
pub(crate) type ListProblems = (Arc<Device>, Vec<(usize, GemmDims)>);

impl Gemm {
    /// The validated first product of a strided batch and the batch count.
    pub(crate) fn strided_problem(
        &self,
        a: (MatrixDims, usize, usize, usize),
        b: (MatrixDims, usize, usize, usize),
        c: (MatrixDims, usize, usize, usize),
    ) -> Result<(GemmDims, usize), Error> {
        if a.1 != c.1 || b.1 != c.1 {
            return Err(Error::BatchCount { a: a.1, b: b.1, c: c.1 });
        }
        let count = c.1;
        let dims = self.problem((a.0, a.3), (b.0, b.3), (c.0, c.3))?;
        for (operand, (d, _, stride, len)) in [(Operand::A, a), (Operand::B, b), (Operand::C, c)] {
            batch_storage(operand, &d, count, stride, len)?;
        }
        Ok((dims, count))
    }

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
        let (dims, count) = self.strided_problem(
            (a.first.dims(), a.count, a.stride, a.first.as_slice().len()),
            (b.first.dims(), b.count, b.stride, b.first.as_slice().len()),
            (c.first.dims(), c.count, c.stride, c.first.storage_len()),
        )?;
        if count == 0 || dims.is_empty() || self.leaves_c_unchanged(&dims) {
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
        let reads_ab = self.alpha != 0.0 && dims.k > 0;
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
        if self.beta != 0.0 {
            // SAFETY: the batch (validated shapes, `count` matrices `c_stride`
            // apart) lies in C's storage; the device buffer has the same
            // layout and length; synchronized before return.
            unsafe { copy_elements(&stream, c_dims, (count, c_stride), host, dev, true) }?;
        }
        let operands = (&da.slice(..), &db.slice(..), &mut dc.slice_mut(..));
        let strides = [a.stride, b.stride, c.stride];
        exec::enqueue(&launch, &device, &stream, (self.alpha, self.beta), operands, (count, strides))?;
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
    /// batch; [`ShapeError::Overlap`] when C's batch extent meets A's or B's.
    pub fn run_strided_device<'a, 'b, 'c, T: Product<C>, C: Scalar>(
        &self,
        a: Strided<DeviceView<'a, T>>,
        b: Strided<DeviceView<'b, T>>,
        mut c: Strided<DeviceViewMut<'c, C>>,
    ) -> Result<(), Error> {
        let kernels = self.kernels::<T, C>(true, Some(c.first.device))?;
        self.check_device_call()?;
        let Some((dims, count, device, stream)) = self.strided_device_problem(&a, &b, &c)? else { return Ok(()) };
        let launch = self.launch_on(kernels, &device, &dims, count)?;
        let operands = (&a.first.data, &b.first.data, &mut c.first.data);
        let strides = [a.stride, b.stride, c.stride];
        exec::enqueue(&launch, &device, &stream, (self.alpha, self.beta), operands, (count, strides))
    }

    /// A strided batch of device matrices validated, in the order every
    /// device door checks: shapes, strides and storage, the operands'
    /// device (and the builder's), the stream's context, then the BLAS quick
    /// return (None: nothing to do), then C's extent apart from A's and B's.
    /// Returns the problem (user form), the count, C's device and the
    /// stream to enqueue on.
    #[allow(clippy::type_complexity)]
    pub(crate) fn strided_device_problem<T: Scalar, C: Scalar>(
        &self,
        a: &Strided<DeviceView<'_, T>>,
        b: &Strided<DeviceView<'_, T>>,
        c: &Strided<DeviceViewMut<'_, C>>,
    ) -> Result<Option<(GemmDims, usize, Arc<Device>, Arc<CudaStream>)>, Error> {
        let (dims, count) = self.strided_problem(
            (a.first.dims, a.count, a.stride, a.first.data.len()),
            (b.first.dims, b.count, b.stride, b.first.data.len()),
            (c.first.dims, c.count, c.stride, c.first.data.len()),
        )?;
        let device = c.first.device.clone();
        for other in [a.first.device, b.first.device].into_iter().chain(self.device_option()) {
            if !other.same_context(&device) {
                return Err(Error::DeviceMismatch(other.name().to_string(), device.name().to_string()));
            }
        }
        let stream = self.stream_on(&device)?;
        if count == 0 || dims.is_empty() || self.leaves_c_unchanged(&dims) {
            return Ok(None);
        }
        let extent = |address: u64, d: &MatrixDims, stride: usize, size: usize| {
            (address as usize, batch_len(d, count, stride).unwrap_or(0) * size)
        };
        let (c_start, c_bytes) = extent(c.first.address, &c.first.dims, c.stride, size_of::<C>());
        for (operand, (start, bytes)) in [
            (Operand::A, extent(a.first.address, &a.first.dims, a.stride, size_of::<T>())),
            (Operand::B, extent(b.first.address, &b.first.dims, b.stride, size_of::<T>())),
        ] {
            if spans_overlap(c_start, c_bytes, start, bytes) {
                return Err(ShapeError::Overlap { operand }.into());
            }
        }
        Ok(Some((dims, count, device, stream)))
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
            self.shape_varies(a, b, c)?;
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
            if first.is_none() && !(dims.is_empty() || self.leaves_c_unchanged(dims)) {
                first = Some(*dims);
            }
            Ok(())
        };
        let Some((device, todo)) = self.list_problems(a, b, c, same_layouts)? else { return Ok(()) };
        let stream = self.stream_on(&device)?;
        if todo.is_empty() {
            return Ok(());
        }
        let launch = self.list_launch(kernels, &device, &todo)?;
        let av: Vec<&CudaView<'_, T>> = a.iter().map(|v| &v.data).collect();
        let bv: Vec<&CudaView<'_, T>> = b.iter().map(|v| &v.data).collect();
        let mut cv: Vec<&mut CudaViewMut<'_, C>> = c.iter_mut().map(|v| &mut v.data).collect();
        exec::enqueue_list(&launch, &device, &stream, (self.alpha, self.beta), (&av, &bv, &mut cv))
    }

    /// The products of a pointer-array batch differ in shape: the first that does.
    pub(crate) fn shape_varies<T: Scalar, C: Scalar>(
        &self,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        c: &[DeviceViewMut<'_, C>],
    ) -> Result<(), Error> {
        let shape = |i: usize| {
            let (ad, bd) = (a[i].dims.op(self.op_a), b[i].dims.op(self.op_b));
            format!("{}x{}x{}", ad.rows, bd.cols, ad.cols)
        };
        if a.len() == b.len() && b.len() == c.len() {
            for i in 1..a.len() {
                if shape(i) != shape(0) || c[i].dims.rows != c[0].dims.rows || c[i].dims.cols != c[0].dims.cols {
                    return Err(Error::ShapeVaries { index: i, expected: shape(0), found: shape(i) });
                }
            }
        }
        Ok(())
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

    /// The problems of a pointer-array or grouped batch, every one validated
    /// before anything runs: equal list lengths ([`Error::BatchCount`]);
    /// each problem's shapes and storage, device and C apart from its A and
    /// B ([`Error::Problem`] naming it), then `each` (in list order); no two
    /// problems' C overlapping ([`Error::BatchOverlap`]). Returns the device
    /// and the problems that change C (index, dimensions in the user's form),
    /// or `None` for an empty list.
    pub(crate) fn list_problems<T: Scalar, C: Scalar>(
        &self,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        c: &[DeviceViewMut<'_, C>],
        mut each: impl FnMut(usize, &GemmDims) -> Result<(), Error>,
    ) -> Result<Option<ListProblems>, Error> {
        if a.len() != c.len() || b.len() != c.len() {
            return Err(Error::BatchCount { a: a.len(), b: b.len(), c: c.len() });
        }
        let Some(first) = c.first() else { return Ok(None) };
        let device = first.device.clone();
        let mut todo = Vec::with_capacity(c.len());
        for i in 0..c.len() {
            let wrap = |e: Error| Error::Problem { index: i, source: Box::new(e) };
            let dims = self
                .problem((a[i].dims, a[i].data.len()), (b[i].dims, b[i].data.len()), (c[i].dims, c[i].data.len()))
                .map_err(wrap)?;
            for other in [a[i].device, b[i].device, c[i].device].into_iter().chain(self.device_option()) {
                if !other.same_context(&device) {
                    return Err(wrap(Error::DeviceMismatch(other.name().to_string(), device.name().to_string())));
                }
            }
            let (c_start, c_bytes) = c[i].byte_span();
            for (operand, (start, bytes)) in [(Operand::A, a[i].byte_span()), (Operand::B, b[i].byte_span())] {
                if spans_overlap(c_start, c_bytes, start, bytes) {
                    return Err(wrap(ShapeError::Overlap { operand }.into()));
                }
            }
            each(i, &dims)?;
            if !(dims.is_empty() || self.leaves_c_unchanged(&dims)) {
                todo.push((i, dims));
            }
        }
        // Outputs must not share memory: sort the spans and compare neighbours.
        let mut spans: Vec<(usize, usize, usize)> = todo
            .iter()
            .map(|&(i, _)| {
                let (s, len) = c[i].byte_span();
                (s, len, i)
            })
            .collect();
        spans.sort_unstable();
        for w in spans.windows(2) {
            if spans_overlap(w[0].0, w[0].1, w[1].0, w[1].1) {
                return Err(Error::BatchOverlap { first: w[0].2.min(w[1].2), second: w[0].2.max(w[1].2) });
            }
        }
        Ok(Some((device, todo)))
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
