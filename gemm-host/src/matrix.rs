//! Host and device matrices: row-major storage with a leading dimension.

use crate::device::Device;
use crate::element::Element;
use crate::error::{DriverContext, Error};
use cudarc::driver::CudaSlice;
use gemm_core::shape::{MatrixDims, Operand};
use std::sync::Arc;

/// A row-major matrix in host memory: element (i, j) is at `i * ld + j` of
/// the storage, `ld >= cols` (the leading dimension, in elements).
///
/// Elements between `cols` and `ld` in a row are padding: products never
/// read or write them.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix<T> {
    data: Vec<T>,
    dims: MatrixDims,
}

impl<T: Element> Matrix<T> {
    /// A `rows x cols` matrix of zeros, densely packed (`ld = cols`).
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self::filled(rows, cols, T::default())
    }

    /// A `rows x cols` matrix with every element `value`.
    pub fn filled(rows: usize, cols: usize, value: T) -> Self {
        let dims = MatrixDims::packed(rows, cols);
        Matrix { data: vec![value; rows * cols], dims }
    }

    /// A `rows x cols` matrix with element (i, j) = `f(i, j)`.
    pub fn from_fn(rows: usize, cols: usize, mut f: impl FnMut(usize, usize) -> T) -> Self {
        let mut data = Vec::with_capacity(rows * cols);
        for i in 0..rows {
            for j in 0..cols {
                data.push(f(i, j));
            }
        }
        Matrix { data, dims: MatrixDims::packed(rows, cols) }
    }

    /// Wraps row-major `data` of length `rows * cols`.
    ///
    /// # Errors
    /// [`Error::Shape`] when the length does not match.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<T>) -> Result<Self, Error> {
        let dims = MatrixDims::packed(rows, cols);
        dims.validate(Operand::Matrix, data.len())?;
        if data.len() != rows * cols {
            return Err(gemm_core::ShapeError::Storage {
                operand: Operand::Matrix,
                rows,
                cols,
                ld: dims.ld,
                needed: rows * cols,
                len: data.len(),
            }
            .into());
        }
        Ok(Matrix { data, dims })
    }

    /// Wraps row-major `data` with leading dimension `ld` (element (i, j) at
    /// `i * ld + j`); `data` must hold at least `(rows - 1) * ld + cols` elements.
    ///
    /// # Errors
    /// [`Error::Shape`] when `ld < cols` or the storage is too short.
    pub fn from_vec_with_ld(rows: usize, cols: usize, ld: usize, data: Vec<T>) -> Result<Self, Error> {
        let dims = MatrixDims { rows, cols, ld };
        dims.validate(Operand::Matrix, data.len())?;
        Ok(Matrix { data, dims })
    }

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

    /// Rows, columns and leading dimension.
    pub fn dims(&self) -> MatrixDims {
        self.dims
    }

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

    /// Row `i` (its `cols` elements, without padding).
    ///
    /// # Panics
    /// If `i >= rows`.
    pub fn row(&self, i: usize) -> &[T] {
        assert!(i < self.dims.rows, "row {i} of a matrix with {} rows", self.dims.rows);
        if self.dims.cols == 0 {
            return &[]; // a matrix without columns stores nothing
        }
        let start = self.dims.offset(i, 0);
        &self.data[start..start + self.dims.cols]
    }

    /// Row `i`, mutable.
    ///
    /// # Panics
    /// If `i >= rows`.
    pub fn row_mut(&mut self, i: usize) -> &mut [T] {
        assert!(i < self.dims.rows, "row {i} of a matrix with {} rows", self.dims.rows);
        if self.dims.cols == 0 {
            return &mut [];
        }
        let start = self.dims.offset(i, 0);
        &mut self.data[start..start + self.dims.cols]
    }

    /// Sets every element (not the padding) to `value`.
    pub fn fill(&mut self, value: T) {
        for i in 0..self.dims.rows {
            self.row_mut(i).fill(value);
        }
    }
}

impl<T: Element> core::ops::Index<(usize, usize)> for Matrix<T> {
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

impl<T: Element> core::ops::IndexMut<(usize, usize)> for Matrix<T> {
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

/// A row-major matrix in GPU memory, with the same layout rules as
/// [`Matrix`]. Keep operands here when chaining products: uploads and
/// downloads happen only when asked for.
pub struct DeviceMatrix<T> {
    data: CudaSlice<T>,
    dims: MatrixDims,
    device: Arc<Device>,
}

impl<T: Element> DeviceMatrix<T> {
    /// Copies a host matrix (its whole storage, padding included) to `device`.
    ///
    /// # Errors
    /// [`Error::Driver`] if allocation or copy fails.
    pub fn from_host(device: &Arc<Device>, m: &Matrix<T>) -> Result<Self, Error> {
        let data = if m.as_slice().is_empty() {
            // The driver cannot allocate zero bytes; an empty matrix gets one element.
            device.stream().alloc_zeros::<T>(1).during("cuMemAlloc")?
        } else {
            device.stream().clone_htod(m.as_slice()).during("cuMemcpyHtoD")?
        };
        Ok(DeviceMatrix { data, dims: m.dims(), device: device.clone() })
    }

    /// A `rows x cols` matrix of zeros on `device` (`ld = cols`).
    ///
    /// # Errors
    /// [`Error::Driver`] if allocation fails.
    pub fn zeros(device: &Arc<Device>, rows: usize, cols: usize) -> Result<Self, Error> {
        let dims = MatrixDims::packed(rows, cols);
        let data = device.stream().alloc_zeros::<T>((rows * cols).max(1)).during("cuMemAlloc")?;
        Ok(DeviceMatrix { data, dims, device: device.clone() })
    }

    /// Copies the matrix back into a new host matrix (same leading dimension).
    ///
    /// # Errors
    /// [`Error::Driver`] if the copy (or an earlier kernel) fails.
    pub fn to_host(&self) -> Result<Matrix<T>, Error> {
        let data = self.device.stream().clone_dtoh(&self.data).during("cuMemcpyDtoH")?;
        Matrix::from_vec_with_ld(self.dims.rows, self.dims.cols, self.dims.ld, data)
    }

    /// Copies the elements (not the padding) into `dst`, which must have the same
    /// rows and columns. `dst` is untouched on error.
    ///
    /// # Errors
    /// [`Error::Shape`] on a shape mismatch, [`Error::Driver`] if the copy fails.
    pub fn copy_to_host(&self, dst: &mut Matrix<T>) -> Result<(), Error> {
        if dst.rows() != self.dims.rows || dst.cols() != self.dims.cols {
            return Err(gemm_core::ShapeError::Output {
                m: self.dims.rows,
                n: self.dims.cols,
                c_rows: dst.rows(),
                c_cols: dst.cols(),
            }
            .into());
        }
        let src = self.device.stream().clone_dtoh(&self.data).during("cuMemcpyDtoH")?;
        for i in 0..self.dims.rows {
            let s = self.dims.offset(i, 0);
            dst.row_mut(i).copy_from_slice(&src[s..s + self.dims.cols]);
        }
        Ok(())
    }

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

    /// Rows, columns and leading dimension.
    pub fn dims(&self) -> MatrixDims {
        self.dims
    }

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

    /// Wraps a buffer already holding (or about to hold) a matrix of `dims`.
    pub(crate) fn from_raw(data: CudaSlice<T>, dims: MatrixDims, device: &Arc<Device>) -> Self {
        DeviceMatrix { data, dims, device: device.clone() }
    }

    /// Storage length in elements (what [`MatrixDims::validate`] checks against).
    pub(crate) fn storage_len(&self) -> usize {
        self.data.len()
    }
}
