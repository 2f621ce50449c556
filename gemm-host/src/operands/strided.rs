//! Strided batches ([`Strided`]): `count` matrices of one shape in one
//! storage, `stride` elements apart, as host views or device views, with
//! the checks of their storage.

use crate::element::{Recast, Scalar};
use crate::error::Error;
use crate::operands::device_matrix::{DeviceMatrix, DeviceView, DeviceViewMut};
use crate::operands::matrix::{MatMut, MatRef, Matrix};
use gemm_core::batch::{batch_len, strided_disjoint};
use gemm_core::shape::{Layout, MatrixDims, Operand};
use gemm_core::ShapeError;

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

pub(crate) fn batch_storage(
    operand: Operand,
    dims: &MatrixDims,
    count: usize,
    stride: usize,
    len: usize,
) -> Result<(), Error> {
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

pub(crate) fn output_disjoint(dims: &MatrixDims, count: usize, stride: usize) -> Result<(), Error> {
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
