//! Host matrices and views: owned ([`Matrix`]) or borrowed ([`MatRef`],
//! [`MatMut`]), row-major or column-major, with a leading dimension.
//!
//! Every operand of a product is a strided matrix `rows x cols` stored in a
//! [`Layout`] with leading dimension `ld` (in elements): element (i, j) sits
//! at `i * ld + j` (row-major, `ld >= cols`) or `j * ld + i` (column-major,
//! `ld >= rows`). Views of sub-matrices ([`Matrix::view`]) and transposed
//! views ([`Matrix::t`]) borrow the same storage: nothing is copied.

use crate::element::{Recast, Scalar};
use crate::error::Error;
use gemm_core::shape::{Layout, MatrixDims, Operand};
use std::mem::size_of;

/// The shape accessors every matrix type has: `rows`, `cols`, `ld`,
/// `layout`, `dims` (read from its `dims: MatrixDims` field).
macro_rules! shape_accessors {
    () => {
        /// Rows.
        pub fn rows(&self) -> usize {
            self.dims.rows
        }

        /// Columns.
        pub fn cols(&self) -> usize {
            self.dims.cols
        }

        /// Leading dimension, in elements.
        pub fn ld(&self) -> usize {
            self.dims.ld
        }

        /// Storage order.
        pub fn layout(&self) -> gemm_core::shape::Layout {
            self.dims.layout
        }

        /// Rows, columns, leading dimension and layout.
        pub fn dims(&self) -> gemm_core::shape::MatrixDims {
            self.dims
        }
    };
}
pub(crate) use shape_accessors;

fn checked_len(rows: usize, cols: usize) -> Result<usize, Error> {
    rows.checked_mul(cols).ok_or(Error::Shape(gemm_core::ShapeError::TooLarge {
        operand: Operand::Matrix,
        value: rows.max(cols),
        max: gemm_core::shape::MAX_DIM,
    }))
}

/// A matrix in host memory that owns its storage: `rows x cols`, row-major
/// or column-major ([`Matrix::layout`]), with leading dimension
/// [`Matrix::ld`] (elements between the starts of consecutive rows, or
/// columns for column-major).
///
/// Elements between the end of a line and the next line's start are
/// padding: products never read or write them.
///
/// ```
/// use gemm::{Layout, Matrix};
/// let a = Matrix::<f64>::from_fn(2, 3, |i, j| (10 * i + j) as f64); // row-major
/// assert_eq!(a.as_slice(), &[0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
/// let b = Matrix::<f64>::from_fn_col_major(2, 3, |i, j| (10 * i + j) as f64);
/// assert_eq!(b.as_slice(), &[0.0, 10.0, 1.0, 11.0, 2.0, 12.0]);
/// assert_eq!((b.layout(), b.ld()), (Layout::ColMajor, 2));
/// assert_eq!(a[(1, 2)], b[(1, 2)]);
/// assert_eq!(a.t().get(2, 1), Some(12.0)); // a transposed view, no copy
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix<T> {
    data: Storage<T>,
    dims: MatrixDims,
}

/// A matrix's storage: an ordinary vector, or page-locked memory from the
/// CUDA driver ([`Matrix::pinned`]), which the GPU's copy engines read and
/// write directly.
enum Storage<T> {
    Heap(Vec<T>),
    // The owner holds the bytes (cudarc's typed page-locked buffers want
    // `DeviceRepr`, which f16 and bf16 lack without cudarc's `f16` feature).
    Pinned { ptr: *mut T, len: usize, _owner: cudarc::driver::PinnedHostSlice<u8> },
}

// SAFETY: a pinned buffer is owned by this storage alone, like a Vec.
unsafe impl<T: Send> Send for Storage<T> {}
unsafe impl<T: Sync> Sync for Storage<T> {}

impl<T> From<Vec<T>> for Storage<T> {
    fn from(v: Vec<T>) -> Self {
        Storage::Heap(v)
    }
}

impl<T> core::ops::Deref for Storage<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Storage::Heap(v) => v,
            // SAFETY: `len` initialized elements owned by `_owner`; no
            // asynchronous copy runs on them outside a call that waits for it.
            Storage::Pinned { ptr, len, .. } => unsafe { core::slice::from_raw_parts(*ptr, *len) },
        }
    }
}

impl<T> core::ops::DerefMut for Storage<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Storage::Heap(v) => v,
            // SAFETY: as in Deref, exclusively borrowed.
            Storage::Pinned { ptr, len, .. } => unsafe { core::slice::from_raw_parts_mut(*ptr, *len) },
        }
    }
}

/// `len` zeros in page-locked memory: portable (any context may copy from
/// it), not write-combined (the CPU reads it too).
fn pinned_zeros<T: Scalar>(device: &std::sync::Arc<crate::Device>, len: usize) -> Result<Storage<T>, Error> {
    let bytes = len.max(1) * size_of::<T>();
    // SAFETY: zero-filled below before any read.
    let mut owner =
        unsafe { device.context().alloc_pinned_with_flags::<u8>(bytes, cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(|_| Error::OutOfMemory { bytes })?;
    let ptr = owner.as_mut_ptr().map_err(|source| Error::Driver { call: "cuEventSynchronize", source })?.cast::<T>();
    // As cudarc checks for a typed buffer.
    assert!(ptr.is_aligned());
    // SAFETY: `len` elements of fresh page-locked memory (`cuMemHostAlloc`
    // returns page-aligned memory, so aligned for `T`); zero bits are a
    // valid value of every `Scalar`.
    unsafe { core::ptr::write_bytes(ptr, 0, len) };
    Ok(Storage::Pinned { ptr, len, _owner: owner })
}

/// A clone is an ordinary (pageable) matrix.
impl<T: Clone> Clone for Storage<T> {
    fn clone(&self) -> Self {
        Storage::Heap(self.to_vec())
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for Storage<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: PartialEq> PartialEq for Storage<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Scalar> Matrix<T> {
    /// A `rows x cols` matrix of zeros in `layout`, densely packed, in
    /// page-locked host memory allocated through `device`'s CUDA driver.
    /// Products on it copy directly between it and the GPU (no staging
    /// copy; the host path's fastest case), as cuBLAS users do with
    /// `cudaMallocHost`. Page-locked memory is a scarce system resource: keep
    /// it for the operands that move often. A clone is ordinary memory.
    ///
    /// ```no_run
    /// use gemm::{Layout, Matrix};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let dev = gemm::default_device()?;
    /// let mut a = Matrix::<f64>::pinned(&dev, 4096, 4096, Layout::RowMajor)?;
    /// a.as_mut_slice().fill(1.0);
    /// assert!(a.is_pinned());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the driver cannot lock that much memory;
    /// [`Error::Shape`] if `rows * cols` overflows.
    pub fn pinned(
        device: &std::sync::Arc<crate::Device>,
        rows: usize,
        cols: usize,
        layout: Layout,
    ) -> Result<Self, Error> {
        let len = checked_len(rows, cols)?;
        Ok(Matrix { data: pinned_zeros(device, len)?, dims: MatrixDims::packed_in(rows, cols, layout) })
    }

    /// A page-locked copy of this matrix (see [`Matrix::pinned`]), same
    /// layout and leading dimension.
    ///
    /// # Errors
    /// As [`Matrix::pinned`].
    pub fn to_pinned(&self, device: &std::sync::Arc<crate::Device>) -> Result<Self, Error> {
        let mut data = pinned_zeros(device, self.data.len())?;
        data.copy_from_slice(&self.data);
        Ok(Matrix { data, dims: self.dims })
    }

    /// Whether the storage is page-locked ([`Matrix::pinned`]).
    pub fn is_pinned(&self) -> bool {
        matches!(self.data, Storage::Pinned { .. })
    }

    /// A `rows x cols` row-major matrix of zeros, densely packed (`ld = cols`).
    ///
    /// # Panics
    /// If `rows * cols` overflows `usize` (as `vec!` would).
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self::filled(rows, cols, T::default())
    }

    /// A `rows x cols` matrix of zeros in `layout`, densely packed.
    ///
    /// # Panics
    /// If `rows * cols` overflows `usize`.
    pub fn zeros_in(rows: usize, cols: usize, layout: Layout) -> Self {
        let dims = MatrixDims::packed_in(rows, cols, layout);
        Matrix { data: vec![T::default(); rows * cols].into(), dims }
    }

    /// A `rows x cols` row-major matrix with every element `value`.
    ///
    /// # Panics
    /// If `rows * cols` overflows `usize`.
    pub fn filled(rows: usize, cols: usize, value: T) -> Self {
        let dims = MatrixDims::packed(rows, cols);
        Matrix { data: vec![value; rows * cols].into(), dims }
    }

    /// A `rows x cols` row-major matrix with element (i, j) = `f(i, j)`.
    pub fn from_fn(rows: usize, cols: usize, f: impl FnMut(usize, usize) -> T) -> Self {
        Self::from_fn_in(rows, cols, Layout::RowMajor, f)
    }

    /// A `rows x cols` column-major matrix (`ld = rows`) with element (i, j) = `f(i, j)`.
    pub fn from_fn_col_major(rows: usize, cols: usize, f: impl FnMut(usize, usize) -> T) -> Self {
        Self::from_fn_in(rows, cols, Layout::ColMajor, f)
    }

    /// A `rows x cols` matrix in `layout`, densely packed, with element (i, j) = `f(i, j)`
    /// (called in storage order).
    pub fn from_fn_in(rows: usize, cols: usize, layout: Layout, mut f: impl FnMut(usize, usize) -> T) -> Self {
        let dims = MatrixDims::packed_in(rows, cols, layout);
        let (outer, line) = dims.lines();
        let mut data = Vec::with_capacity(rows.saturating_mul(cols));
        for o in 0..outer {
            for l in 0..line {
                data.push(match layout {
                    Layout::RowMajor => f(o, l),
                    Layout::ColMajor => f(l, o),
                });
            }
        }
        Matrix { data: data.into(), dims }
    }

    /// Wraps row-major `data` of length `rows * cols`.
    ///
    /// # Errors
    /// [`Error::Shape`] when the length does not match.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<T>) -> Result<Self, Error> {
        let len = checked_len(rows, cols)?;
        let dims = MatrixDims::packed(rows, cols);
        dims.validate(Operand::Matrix, data.len())?;
        if data.len() != len {
            return Err(gemm_core::ShapeError::Storage {
                operand: Operand::Matrix,
                rows,
                cols,
                layout: Layout::RowMajor,
                ld: dims.ld,
                needed: len,
                len: data.len(),
            }
            .into());
        }
        Ok(Matrix { data: data.into(), dims })
    }

    /// Wraps row-major `data` with leading dimension `ld` (element (i, j) at
    /// `i * ld + j`); `data` must hold at least `(rows - 1) * ld + cols` elements.
    ///
    /// # Errors
    /// [`Error::Shape`] when `ld < cols` or the storage is too short.
    pub fn from_vec_with_ld(rows: usize, cols: usize, ld: usize, data: Vec<T>) -> Result<Self, Error> {
        Self::from_vec_in(rows, cols, Layout::RowMajor, ld, data)
    }

    /// Wraps `data` holding a `rows x cols` matrix in `layout` with leading
    /// dimension `ld`; `data` must hold at least `(lines - 1) * ld + line`
    /// elements (lines: rows for row-major, columns for column-major).
    ///
    /// # Errors
    /// [`Error::Shape`] when `ld` is below the line length or the storage is too short.
    pub fn from_vec_in(rows: usize, cols: usize, layout: Layout, ld: usize, data: Vec<T>) -> Result<Self, Error> {
        let dims = MatrixDims::new(rows, cols, layout, ld);
        dims.validate(Operand::Matrix, data.len())?;
        Ok(Matrix { data: data.into(), dims })
    }

    shape_accessors!();

    /// The whole storage, padding included.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The whole storage, padding included.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// Element (i, j), or `None` outside the matrix.
    pub fn get(&self, i: usize, j: usize) -> Option<T> {
        (i < self.dims.rows && j < self.dims.cols).then(|| self.data[self.dims.offset(i, j)])
    }

    /// Sets every element (not the padding) to `value`.
    pub fn fill(&mut self, value: T) {
        self.as_mut().fill(value);
    }

    /// A view of the whole matrix.
    pub fn as_ref(&self) -> MatRef<'_, T> {
        MatRef { data: &self.data, dims: self.dims }
    }

    /// A mutable view of the whole matrix.
    pub fn as_mut(&mut self) -> MatMut<'_, T> {
        MatMut { data: &mut self.data, dims: self.dims }
    }

    /// The transposed matrix as a view (`cols x rows`, the other layout, same
    /// storage): op(A) = A^T without a copy.
    pub fn t(&self) -> MatRef<'_, T> {
        self.as_ref().t()
    }

    /// The `rows x cols` sub-matrix whose top-left element is (row, col), as a view.
    ///
    /// # Errors
    /// [`Error::Shape`] ([`gemm_core::ShapeError::View`]) when it reaches outside the matrix.
    pub fn view(&self, row: usize, col: usize, rows: usize, cols: usize) -> Result<MatRef<'_, T>, Error> {
        self.as_ref().view(row, col, rows, cols)
    }

    /// The `rows x cols` sub-matrix at (row, col), as a mutable view (e.g. a block of C).
    ///
    /// # Errors
    /// As [`Matrix::view`].
    pub fn view_mut(&mut self, row: usize, col: usize, rows: usize, cols: usize) -> Result<MatMut<'_, T>, Error> {
        self.as_mut().into_view(row, col, rows, cols)
    }
}

impl<T: Scalar> core::ops::Index<(usize, usize)> for Matrix<T> {
    type Output = T;
    /// Element (i, j).
    ///
    /// # Panics
    /// Outside the matrix.
    fn index(&self, (i, j): (usize, usize)) -> &T {
        assert!(
            i < self.dims.rows && j < self.dims.cols,
            "index ({i}, {j}) outside a {}x{} matrix",
            self.dims.rows,
            self.dims.cols
        );
        &self.data[self.dims.offset(i, j)]
    }
}

impl<T: Scalar> core::ops::IndexMut<(usize, usize)> for Matrix<T> {
    fn index_mut(&mut self, (i, j): (usize, usize)) -> &mut T {
        assert!(
            i < self.dims.rows && j < self.dims.cols,
            "index ({i}, {j}) outside a {}x{} matrix",
            self.dims.rows,
            self.dims.cols
        );
        let o = self.dims.offset(i, j);
        &mut self.data[o]
    }
}

/// A borrowed matrix: a view of a caller's slice, of a [`Matrix`], or of a
/// sub-matrix or transpose of either; `Copy`, no storage of its own.
///
/// ```
/// use gemm::{Layout, MatRef};
/// let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
/// // 2 x 2, column-major, columns 3 apart (the third element of each column is padding).
/// let a = MatRef::from_slice(&x, 2, 2, Layout::ColMajor, 3)?;
/// assert_eq!((a.get(0, 1), a.get(1, 0)), (Some(4.0), Some(2.0)));
/// assert_eq!(a.t().get(1, 0), Some(4.0));
/// # Ok::<(), gemm::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a, T> {
    /// Storage from element (0, 0) on.
    data: &'a [T],
    dims: MatrixDims,
}

impl<'a, T: crate::element::Fp8> MatRef<'a, T> {
    /// The same bytes as e4m3 (both FP8 formats are one byte of plain
    /// data): the kernels read them as the product's types say.
    pub(crate) fn fp8_as_e4m3(self) -> MatRef<'a, float8::F8E4M3> {
        // SAFETY: `T` is F8E4M3 or F8E5M2 (`Fp8` is sealed), one byte each,
        // any bit pattern valid; the same length and lifetime.
        let data = unsafe { core::slice::from_raw_parts(self.data.as_ptr() as *const float8::F8E4M3, self.data.len()) };
        MatRef { data, dims: self.dims }
    }
}

impl<'a, T: Scalar> MatRef<'a, T> {
    /// A `rows x cols` view of `data` in `layout` with leading dimension `ld`
    /// (element (i, j) at `i * ld + j` or `j * ld + i`).
    ///
    /// # Errors
    /// [`Error::Shape`] when `ld` is below the line length, or `data` is
    /// shorter than the shape needs.
    pub fn from_slice(data: &'a [T], rows: usize, cols: usize, layout: Layout, ld: usize) -> Result<Self, Error> {
        let dims = MatrixDims::new(rows, cols, layout, ld);
        dims.validate(Operand::Matrix, data.len())?;
        Ok(MatRef { data, dims })
    }

    shape_accessors!();

    /// The storage from element (0, 0) to the end of the borrowed slice.
    pub fn as_slice(&self) -> &'a [T] {
        self.data
    }

    /// Element (i, j), or `None` outside the view.
    pub fn get(&self, i: usize, j: usize) -> Option<T> {
        (i < self.dims.rows && j < self.dims.cols).then(|| self.data[self.dims.offset(i, j)])
    }

    /// The transposed view (`cols x rows`, the other layout, same storage).
    pub fn t(self) -> MatRef<'a, T> {
        MatRef { data: self.data, dims: self.dims.t() }
    }

    /// The `rows x cols` sub-matrix at (row, col) of this view.
    ///
    /// # Errors
    /// [`Error::Shape`] when it reaches outside this view.
    pub fn view(self, row: usize, col: usize, rows: usize, cols: usize) -> Result<MatRef<'a, T>, Error> {
        let (offset, dims) = self.dims.sub(row, col, rows, cols)?;
        Ok(MatRef { data: &self.data[offset.min(self.data.len())..], dims })
    }

    /// A packed copy in the same layout.
    pub fn to_matrix(&self) -> Matrix<T> {
        Matrix::from_fn_in(self.dims.rows, self.dims.cols, self.dims.layout, |i, j| self.data[self.dims.offset(i, j)])
    }

    /// The storage the view can touch: `[0, required_len)` of its slice.
    pub(crate) fn span(&self) -> &'a [T] {
        &self.data[..self.dims.required_len().unwrap_or(0)]
    }
}

/// A mutable borrowed matrix: a view of a caller's slice or of a block of a
/// [`Matrix`], for the output C. Reborrow it with [`MatMut::rb`].
///
/// ```
/// use gemm::{Layout, MatMut};
/// let mut z = vec![0.0f64; 12];
/// let mut c = MatMut::from_slice(&mut z, 3, 2, Layout::ColMajor, 5)?;
/// c.set(2, 1, 7.0);
/// assert_eq!(z[5 + 2], 7.0);
/// # Ok::<(), gemm::Error>(())
/// ```
#[derive(Debug)]
pub struct MatMut<'a, T> {
    /// Storage from element (0, 0) on.
    data: &'a mut [T],
    dims: MatrixDims,
}

impl<'a, T: Scalar> MatMut<'a, T> {
    /// A mutable `rows x cols` view of `data` in `layout` with leading
    /// dimension `ld`.
    ///
    /// # Errors
    /// As [`MatRef::from_slice`].
    pub fn from_slice(data: &'a mut [T], rows: usize, cols: usize, layout: Layout, ld: usize) -> Result<Self, Error> {
        let dims = MatrixDims::new(rows, cols, layout, ld);
        dims.validate(Operand::Matrix, data.len())?;
        Ok(MatMut { data, dims })
    }

    shape_accessors!();

    /// Element (i, j), or `None` outside the view.
    pub fn get(&self, i: usize, j: usize) -> Option<T> {
        (i < self.dims.rows && j < self.dims.cols).then(|| self.data[self.dims.offset(i, j)])
    }

    /// Calls `f(line, elements)` for every line of the view (a row of a
    /// row-major view, a column of a column-major one; its padding left
    /// out), in parallel on the host's threads (rayon).
    pub(crate) fn par_lines_mut(&mut self, f: impl Fn(usize, &mut [T]) + Sync + Send) {
        use rayon::prelude::*;
        let (lines, len) = self.dims.lines();
        if lines == 0 || len == 0 {
            return;
        }
        self.data
            .par_chunks_mut(self.dims.ld.max(1))
            .take(lines)
            .enumerate()
            .for_each(|(l, chunk)| f(l, &mut chunk[..len]));
    }

    /// Sets element (i, j); returns false (and changes nothing) outside the view.
    pub fn set(&mut self, i: usize, j: usize, value: T) -> bool {
        if i < self.dims.rows && j < self.dims.cols {
            self.data[self.dims.offset(i, j)] = value;
            true
        } else {
            false
        }
    }

    /// Sets every element of the view (not the padding) to `value`.
    pub fn fill(&mut self, value: T) {
        let (outer, line) = self.dims.lines();
        if line == 0 {
            return;
        }
        for o in 0..outer {
            let start = o * self.dims.ld;
            self.data[start..start + line].fill(value);
        }
    }

    /// A shorter-lived mutable view of the same matrix.
    pub fn rb(&mut self) -> MatMut<'_, T> {
        MatMut { data: self.data, dims: self.dims }
    }

    /// A read-only view of the same matrix.
    pub fn as_ref(&self) -> MatRef<'_, T> {
        MatRef { data: self.data, dims: self.dims }
    }

    /// The `rows x cols` sub-matrix at (row, col) of this view, consuming it.
    ///
    /// # Errors
    /// [`Error::Shape`] when it reaches outside this view.
    pub fn into_view(self, row: usize, col: usize, rows: usize, cols: usize) -> Result<MatMut<'a, T>, Error> {
        let (offset, dims) = self.dims.sub(row, col, rows, cols)?;
        let start = offset.min(self.data.len());
        Ok(MatMut { data: &mut self.data[start..], dims })
    }

    /// The `rows x cols` sub-matrix at (row, col), borrowing this view.
    ///
    /// # Errors
    /// As [`MatMut::into_view`].
    pub fn view_mut(&mut self, row: usize, col: usize, rows: usize, cols: usize) -> Result<MatMut<'_, T>, Error> {
        self.rb().into_view(row, col, rows, cols)
    }

    /// The storage the view can touch: `[0, required_len)` of its slice.
    /// Elements of storage from element (0, 0) to the end of the borrowed slice.
    pub(crate) fn storage_len(&self) -> usize {
        self.data.len()
    }

    /// The storage from element (0, 0) to the end of the borrowed slice.
    pub(crate) fn storage_mut(&mut self) -> &mut [T] {
        self.data
    }

    /// A view of this shape starting `offset` elements on (matrix i of a strided batch).
    pub(crate) fn rb_at(&mut self, offset: usize) -> MatMut<'_, T> {
        MatMut { data: &mut self.data[offset..], dims: self.dims }
    }

    pub(crate) fn span_mut(&mut self) -> &mut [T] {
        let len = self.dims.required_len().unwrap_or(0);
        &mut self.data[..len]
    }

    /// Copies the elements (not the padding) from `src`, whose storage holds
    /// a matrix of this view's shape, layout and leading dimension from its
    /// first element on (e.g. a download of the view's span).
    pub(crate) fn copy_elements_from_span(&mut self, src: &[T]) {
        let (outer, line) = self.dims.lines();
        if line == 0 {
            return;
        }
        for o in 0..outer {
            let start = o * self.dims.ld;
            self.data[start..start + line].copy_from_slice(&src[start..start + line]);
        }
    }
}

// SAFETY: `With<U>` is `Self` with `T` written as `U` (Recast's contract).
unsafe impl<'a, T: Scalar> Recast for MatRef<'a, T> {
    type Elem = T;
    type With<U: Scalar> = MatRef<'a, U>;
}

// SAFETY: as for `MatRef`.
unsafe impl<'a, T: Scalar> Recast for MatMut<'a, T> {
    type Elem = T;
    type With<U: Scalar> = MatMut<'a, U>;
}

impl<'a, T: Scalar> From<&'a Matrix<T>> for MatRef<'a, T> {
    fn from(m: &'a Matrix<T>) -> Self {
        m.as_ref()
    }
}

impl<'a, T: Scalar> From<&'a mut Matrix<T>> for MatRef<'a, T> {
    fn from(m: &'a mut Matrix<T>) -> Self {
        m.as_ref()
    }
}

impl<'a, T: Scalar> From<&MatRef<'a, T>> for MatRef<'a, T> {
    fn from(m: &MatRef<'a, T>) -> Self {
        *m
    }
}

impl<'a, T: Scalar> From<&'a MatMut<'_, T>> for MatRef<'a, T> {
    fn from(m: &'a MatMut<'_, T>) -> Self {
        m.as_ref()
    }
}

impl<'a, T: Scalar> From<&'a mut Matrix<T>> for MatMut<'a, T> {
    fn from(m: &'a mut Matrix<T>) -> Self {
        m.as_mut()
    }
}

impl<'a, T: Scalar> From<&'a mut MatMut<'_, T>> for MatMut<'a, T> {
    fn from(m: &'a mut MatMut<'_, T>) -> Self {
        m.rb()
    }
}
