//! Matrices in GPU memory: owned ([`DeviceMatrix`], possibly made from a
//! caller's cudarc [`CudaSlice`] without a copy) and borrowed
//! ([`DeviceView`], [`DeviceViewMut`]: sub-matrices and transposes, or
//! views of a caller's cudarc [`CudaView`] / [`CudaViewMut`]), with the
//! same layout rules as the host types.

use crate::device::memory::{address, alloc_zeros, clone_htod, memcpy_dtoh};
use crate::device::Device;
use crate::element::{Recast, Scalar};
use crate::error::{DriverContext, Error};
use crate::operands::matrix::{shape_accessors, MatMut, MatRef, Matrix};
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DeviceSlice};
use gemm_core::shape::{Layout, MatrixDims, Operand};
use std::sync::Arc;

/// Checks a caller's buffer or view against the shape and `device`'s context.
fn check_cuda_memory<T>(
    device: &Device,
    memory: &impl DeviceSlice<T>,
    rows: usize,
    cols: usize,
    layout: Layout,
    ld: usize,
) -> Result<MatrixDims, Error> {
    let dims = MatrixDims::new(rows, cols, layout, ld);
    dims.validate(Operand::Matrix, memory.len())?;
    // cudarc hands out several handles to one primary context: compare
    // the contexts, not the handles.
    if **memory.stream().context() != **device.context() {
        return Err(Error::ContextMismatch { what: "the buffer", device: device.name().into() });
    }
    Ok(dims)
}

/// A matrix in GPU memory that owns its buffer: `rows x cols`, row-major or
/// column-major, leading dimension `ld` (elements). Keep operands here when
/// chaining products: uploads and downloads happen only when asked for.
///
/// Every copy runs on the buffer's own stream (the device's stream, or the
/// caller's for [`DeviceMatrix::from_cuda_slice`]); cudarc orders work on
/// other streams after it.
///
/// ```no_run
/// use gemm::{DeviceMatrix, Gemm, Layout, Matrix};
/// # fn main() -> Result<(), gemm::Error> {
/// let dev = gemm::default_device()?;
/// let a = DeviceMatrix::from_host(&dev, &Matrix::<f64>::from_fn(64, 32, |i, j| (i + j) as f64))?;
/// let b = DeviceMatrix::from_host(&dev, &Matrix::<f64>::from_fn_col_major(32, 16, |i, j| (i * j) as f64))?;
/// let mut c = DeviceMatrix::<f64>::zeros(&dev, 64, 16)?;
/// Gemm::new().run_device(&a, &b, &mut c)?; // enqueued, not waited for
/// let c = c.to_host()?;                    // waits
/// # Ok(()) }
/// ```
pub struct DeviceMatrix<T> {
    data: CudaSlice<T>,
    dims: MatrixDims,
    device: Arc<Device>,
    address: u64,
}

impl<T> core::fmt::Debug for DeviceMatrix<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceMatrix").field("dims", &self.dims).field("device", &self.device.name()).finish()
    }
}

impl<T: Scalar> DeviceMatrix<T> {
    /// Copies a host matrix or view to `device` (same shape, layout and
    /// leading dimension; the padding between its lines is copied too).
    /// Blocks until the copy is done (the source is pageable host memory).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn from_host<'a>(device: &Arc<Device>, m: impl Into<MatRef<'a, T>>) -> Result<Self, Error> {
        let m = m.into();
        let span = m.span();
        let stream = device.stream();
        let data = if span.is_empty() { alloc_zeros(stream, 1)? } else { clone_htod(stream, span)? };
        Ok(Self::wrap(data, m.dims(), device))
    }

    /// A `rows x cols` row-major matrix of zeros on `device` (`ld = cols`).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn zeros(device: &Arc<Device>, rows: usize, cols: usize) -> Result<Self, Error> {
        Self::zeros_in(device, rows, cols, Layout::RowMajor)
    }

    /// A `rows x cols` matrix of zeros in `layout` on `device`, densely packed.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`]; [`Error::Shape`] if
    /// `rows * cols` overflows.
    pub fn zeros_in(device: &Arc<Device>, rows: usize, cols: usize, layout: Layout) -> Result<Self, Error> {
        let dims = MatrixDims::packed_in(rows, cols, layout);
        let len = dims.required_len().ok_or(Error::Shape(gemm_core::ShapeError::TooLarge {
            operand: Operand::Matrix,
            value: rows.max(cols),
            max: gemm_core::shape::MAX_DIM,
        }))?;
        dims.validate(Operand::Matrix, len)?;
        let data = alloc_zeros::<T>(device.stream(), len)?;
        Ok(Self::wrap(data, dims, device))
    }

    /// Wraps a caller's cudarc buffer, without copying, as a `rows x cols`
    /// matrix in `layout` with leading dimension `ld`. The buffer keeps its
    /// stream; products on other streams are ordered after its pending work
    /// by cudarc's events.
    ///
    /// To borrow part of a caller's buffer instead (a slice of an arena),
    /// see [`DeviceView::from_cuda_view`] and
    /// [`DeviceViewMut::from_cuda_view_mut`].
    ///
    /// # Errors
    /// [`Error::Shape`] when `ld` is below the line length or the buffer is
    /// shorter than the shape needs; [`Error::ContextMismatch`] when the
    /// buffer belongs to another CUDA context than `device`'s.
    pub fn from_cuda_slice(
        device: &Arc<Device>,
        data: CudaSlice<T>,
        rows: usize,
        cols: usize,
        layout: Layout,
        ld: usize,
    ) -> Result<Self, Error> {
        let dims = check_cuda_memory(device, &data, rows, cols, layout, ld)?;
        Ok(Self::wrap(data, dims, device))
    }

    fn wrap(data: CudaSlice<T>, dims: MatrixDims, device: &Arc<Device>) -> Self {
        let address = address(&data);
        DeviceMatrix { data, dims, device: device.clone(), address }
    }

    /// Copies the matrix back into a new host matrix (same layout and leading
    /// dimension). Blocks until the copy (and the work before it on the
    /// buffer's stream) is done.
    ///
    /// Only this `rows x cols` matrix comes back: the buffer from its first
    /// element to its last, not the rest of a longer buffer. A strided batch
    /// kept as one buffer wrapped as its first matrix (see
    /// [`crate::Strided::new`]) comes back as its first matrix only; to read
    /// every matrix, copy the whole buffer with cudarc, e.g.
    /// `m.buffer().stream().clone_dtoh(m.buffer())` then synchronize the
    /// stream (matrix i starts `i * stride` elements on).
    ///
    /// # Errors
    /// [`Error::Driver`] if the copy, or an earlier kernel, fails.
    pub fn to_host(&self) -> Result<Matrix<T>, Error> {
        let len = self.dims.required_len().unwrap_or(0);
        let mut host = vec![T::default(); len];
        if len > 0 {
            memcpy_dtoh(self.data.stream(), &self.data.slice(..len), &mut host)?;
            self.data.stream().synchronize().during("cuStreamSynchronize")?;
        }
        Matrix::from_vec_in(self.dims.rows, self.dims.cols, self.dims.layout, self.dims.ld, host)
    }

    /// Copies the elements (not the padding) into `dst`, a host matrix or
    /// view of the same rows and columns (any layout). Blocks. `dst` is
    /// untouched on error.
    ///
    /// # Errors
    /// [`Error::Shape`] on a shape mismatch, [`Error::Driver`] if the copy fails.
    pub fn copy_to_host<'a>(&self, dst: impl Into<MatMut<'a, T>>) -> Result<(), Error> {
        let mut dst = dst.into();
        if dst.rows() != self.dims.rows || dst.cols() != self.dims.cols {
            return Err(gemm_core::ShapeError::Output {
                m: self.dims.rows,
                n: self.dims.cols,
                c_rows: dst.rows(),
                c_cols: dst.cols(),
            }
            .into());
        }
        let host = self.to_host()?;
        if dst.layout() == self.dims.layout && dst.ld() == self.dims.ld {
            dst.copy_elements_from_span(host.as_slice());
        } else {
            for i in 0..self.dims.rows {
                for j in 0..self.dims.cols {
                    dst.set(i, j, host[(i, j)]);
                }
            }
        }
        Ok(())
    }

    shape_accessors!();

    /// The device it lives on.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// The device buffer (for interoperation with cudarc).
    pub fn buffer(&self) -> &CudaSlice<T> {
        &self.data
    }

    /// The device buffer, mutable.
    pub fn buffer_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.data
    }

    /// Gives the buffer back to cudarc.
    pub fn into_cuda_slice(self) -> CudaSlice<T> {
        self.data
    }

    /// A view of the whole matrix.
    pub fn as_view(&self) -> DeviceView<'_, T> {
        self.view_of(0, self.dims)
    }

    /// A mutable view of the whole matrix.
    pub fn as_view_mut(&mut self) -> DeviceViewMut<'_, T> {
        let dims = self.dims;
        self.view_mut_of(0, dims)
    }

    /// The transposed matrix as a view (no copy).
    pub fn t(&self) -> DeviceView<'_, T> {
        self.as_view().t()
    }

    /// The `rows x cols` sub-matrix at (row, col), as a view (no copy).
    ///
    /// # Errors
    /// [`Error::Shape`] when it reaches outside the matrix.
    pub fn view(&self, row: usize, col: usize, rows: usize, cols: usize) -> Result<DeviceView<'_, T>, Error> {
        let (offset, dims) = self.dims.sub(row, col, rows, cols)?;
        Ok(self.view_of(offset, dims))
    }

    /// The `rows x cols` sub-matrix at (row, col), as a mutable view (e.g. a block of C).
    ///
    /// # Errors
    /// As [`DeviceMatrix::view`].
    pub fn view_mut(
        &mut self,
        row: usize,
        col: usize,
        rows: usize,
        cols: usize,
    ) -> Result<DeviceViewMut<'_, T>, Error> {
        let (offset, dims) = self.dims.sub(row, col, rows, cols)?;
        Ok(self.view_mut_of(offset, dims))
    }

    // Views keep the buffer from their first element to its end (as host
    // views keep the rest of the slice), so a strided batch can start at one.
    fn view_of(&self, offset: usize, dims: MatrixDims) -> DeviceView<'_, T> {
        DeviceView {
            data: self.data.slice(offset.min(self.data.len())..),
            dims,
            device: &self.device,
            address: self.address + (offset * size_of::<T>()) as u64,
        }
    }

    fn view_mut_of(&mut self, offset: usize, dims: MatrixDims) -> DeviceViewMut<'_, T> {
        let start = offset.min(self.data.len());
        DeviceViewMut {
            data: self.data.slice_mut(start..),
            dims,
            device: &self.device,
            address: self.address + (offset * size_of::<T>()) as u64,
        }
    }
}

/// A borrowed matrix in GPU memory: a [`DeviceMatrix`], a sub-matrix of one,
/// a transpose ([`DeviceView::t`]), or part of a caller's cudarc buffer
/// ([`DeviceView::from_cuda_view`]); an operand A or B of
/// [`crate::Gemm::run_device`]. Its storage runs on from its first element
/// to the end of the memory it borrows (the first matrix of a strided batch,
/// [`crate::Strided::new`]).
pub struct DeviceView<'a, T> {
    pub(crate) data: CudaView<'a, T>,
    pub(crate) dims: MatrixDims,
    pub(crate) device: &'a Arc<Device>,
    pub(crate) address: u64,
}

/// A mutable borrowed matrix in GPU memory (a whole [`DeviceMatrix`], a
/// block of one, or part of a caller's cudarc buffer,
/// [`DeviceViewMut::from_cuda_view_mut`]): the output C of
/// [`crate::Gemm::run_device`].
pub struct DeviceViewMut<'a, T> {
    pub(crate) data: CudaViewMut<'a, T>,
    pub(crate) dims: MatrixDims,
    pub(crate) device: &'a Arc<Device>,
    pub(crate) address: u64,
}

impl<'a, T: Scalar> DeviceView<'a, T> {
    /// Views part of a caller's cudarc buffer, without copying, as a `rows x
    /// cols` matrix in `layout` with leading dimension `ld` (element (i, j)
    /// at `i * ld + j` row-major, `j * ld + i` column-major, from the view's
    /// first element): e.g. `arena.slice(offset..)` of an arena holding
    /// several operands. The view borrows the buffer for `'a`; the matrix's
    /// storage is the whole view (the first matrix of a strided batch may
    /// run on through it, [`crate::Strided::new`]). Work on the buffer's
    /// stream and products on other streams are ordered by cudarc's events,
    /// as for [`DeviceMatrix::from_cuda_slice`].
    ///
    /// ```no_run
    /// use gemm::{DeviceView, DeviceViewMut, Gemm, Layout};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let dev = gemm::default_device()?;
    /// let (m, n, k) = (64, 32, 48);
    /// // One arena for A (m x k, row-major) then B (k x n, column-major).
    /// let arena = dev.stream().alloc_zeros::<f32>(m * k + k * n)?;
    /// let mut out = dev.stream().alloc_zeros::<f32>(16 + m * n)?;
    /// let a = DeviceView::from_cuda_view(&dev, arena.slice(..m * k), m, k, Layout::RowMajor, k)?;
    /// let b = DeviceView::from_cuda_view(&dev, arena.slice(m * k..), k, n, Layout::ColMajor, k)?;
    /// let c = DeviceViewMut::from_cuda_view_mut(&dev, out.slice_mut(16..), m, n, Layout::RowMajor, n)?;
    /// Gemm::new().run_device(a, b, c)?; // C = AB in out[16..], enqueued
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Shape`] when `ld` is below the line length
    /// ([`crate::ShapeError::LeadingDimension`]) or the view is shorter than
    /// the shape needs ([`crate::ShapeError::Storage`]);
    /// [`Error::ContextMismatch`] when the buffer belongs to another CUDA
    /// context than `device`'s.
    pub fn from_cuda_view(
        device: &'a Arc<Device>,
        data: CudaView<'a, T>,
        rows: usize,
        cols: usize,
        layout: Layout,
        ld: usize,
    ) -> Result<Self, Error> {
        let dims = check_cuda_memory(device, &data, rows, cols, layout, ld)?;
        let address = address(&data);
        Ok(DeviceView { data, dims, device, address })
    }

    /// Rows, columns, leading dimension and layout.
    pub fn dims(&self) -> MatrixDims {
        self.dims
    }

    /// The device it lives on.
    pub fn device(&self) -> &Arc<Device> {
        self.device
    }

    /// The transposed view (no copy).
    pub fn t(self) -> DeviceView<'a, T> {
        DeviceView { dims: self.dims.t(), ..self }
    }

    /// The `rows x cols` sub-matrix at (row, col) of this view.
    ///
    /// # Errors
    /// [`Error::Shape`] when it reaches outside this view.
    pub fn view(self, row: usize, col: usize, rows: usize, cols: usize) -> Result<DeviceView<'a, T>, Error> {
        let (offset, dims) = self.dims.sub(row, col, rows, cols)?;
        Ok(DeviceView {
            data: self.data.slice(offset.min(self.data.len())..),
            dims,
            device: self.device,
            address: self.address + (offset * size_of::<T>()) as u64,
        })
    }

    /// Byte span `[address, address + bytes)` the view can touch.
    pub(crate) fn byte_span(&self) -> (usize, usize) {
        (self.address as usize, self.dims.required_len().unwrap_or(0) * size_of::<T>())
    }
}

impl<'a, T: Scalar> DeviceViewMut<'a, T> {
    /// Views part of a caller's cudarc buffer mutably, without copying, as a
    /// `rows x cols` matrix in `layout` with leading dimension `ld`: an
    /// output C in e.g. `arena.slice_mut(offset..)`. Products write C's
    /// elements only (not the padding between its lines nor the rest of the
    /// view). As [`DeviceView::from_cuda_view`] otherwise.
    ///
    /// ```no_run
    /// use gemm::{DeviceMatrix, DeviceViewMut, Gemm, Layout, Strided};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let dev = gemm::default_device()?;
    /// let (count, m, n, k) = (8, 64, 32, 48);
    /// let a = DeviceMatrix::<f32>::zeros(&dev, m, k)?;
    /// let b = DeviceMatrix::<f32>::zeros(&dev, k, n)?;
    /// // A batch of `count` packed m x n row-major C's in the caller's arena.
    /// let mut arena = dev.stream().alloc_zeros::<f32>(1024 + count * m * n)?;
    /// let c = DeviceViewMut::from_cuda_view_mut(&dev, arena.slice_mut(1024..), m, n, Layout::RowMajor, n)?;
    /// Gemm::new().run_strided_device(
    ///     Strided::new(&a, count, 0)?,
    ///     Strided::new(&b, count, 0)?,
    ///     Strided::new(c, count, m * n)?,
    /// )?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`DeviceView::from_cuda_view`].
    pub fn from_cuda_view_mut(
        device: &'a Arc<Device>,
        data: CudaViewMut<'a, T>,
        rows: usize,
        cols: usize,
        layout: Layout,
        ld: usize,
    ) -> Result<Self, Error> {
        let dims = check_cuda_memory(device, &data, rows, cols, layout, ld)?;
        let address = address(&data);
        Ok(DeviceViewMut { data, dims, device, address })
    }

    /// Rows, columns, leading dimension and layout.
    pub fn dims(&self) -> MatrixDims {
        self.dims
    }

    /// The device it lives on.
    pub fn device(&self) -> &Arc<Device> {
        self.device
    }

    /// Byte span `[address, address + bytes)` the view can touch.
    pub(crate) fn byte_span(&self) -> (usize, usize) {
        (self.address as usize, self.dims.required_len().unwrap_or(0) * size_of::<T>())
    }
}

// SAFETY: `With<U>` is `Self` with `T` written as `U` (Recast's contract);
// so for the three below.
unsafe impl<'a, T: Scalar> Recast for DeviceView<'a, T> {
    type Elem = T;
    type With<U: Scalar> = DeviceView<'a, U>;
}

// SAFETY: as above.
unsafe impl<'a, T: Scalar> Recast for DeviceViewMut<'a, T> {
    type Elem = T;
    type With<U: Scalar> = DeviceViewMut<'a, U>;
}

// SAFETY: as above (a list batch's operands).
unsafe impl<'s, 'a, T: Scalar> Recast for &'s [DeviceView<'a, T>] {
    type Elem = T;
    type With<U: Scalar> = &'s [DeviceView<'a, U>];
}

// SAFETY: as above (a list batch's C).
unsafe impl<'s, 'a, T: Scalar> Recast for &'s mut [DeviceViewMut<'a, T>] {
    type Elem = T;
    type With<U: Scalar> = &'s mut [DeviceViewMut<'a, U>];
}

impl<'a, T: Scalar> From<&'a DeviceMatrix<T>> for DeviceView<'a, T> {
    fn from(m: &'a DeviceMatrix<T>) -> Self {
        m.as_view()
    }
}

impl<'a, T: Scalar> From<&'a mut DeviceMatrix<T>> for DeviceView<'a, T> {
    fn from(m: &'a mut DeviceMatrix<T>) -> Self {
        m.as_view()
    }
}

impl<'a, T: Scalar> From<&'a mut DeviceMatrix<T>> for DeviceViewMut<'a, T> {
    fn from(m: &'a mut DeviceMatrix<T>) -> Self {
        m.as_view_mut()
    }
}
