//! The checks of every door, before anything runs: a product's shapes
//! and storage (op(A), op(B) and C with their buffers), a strided batch's
//! counts and extents, a list batch's problems one by one and their C
//! apart from each other; then the operands' device and the stream's
//! context for device operands; the BLAS quick return (nothing to do); C
//! apart from A and B.

use crate::describe::{ProductDesc, Target};
use crate::device::Device;
use crate::element::Scalar;
use crate::error::Error;
use crate::operands::device_matrix::{DeviceView, DeviceViewMut};
use crate::operands::strided::{batch_storage, Strided};
use cudarc::driver::CudaStream;
use gemm_core::batch::batch_len;
use gemm_core::shape::{spans_overlap, MatrixDims, Operand};
use gemm_core::{GemmDims, ShapeError};
use std::mem::size_of;
use std::sync::Arc;

/// The layouts of a problem, as [`Error::MixedLayouts`] names them.
pub(crate) fn layouts_name(d: &GemmDims) -> String {
    format!("A {}, B {}, C {}", d.a_layout.short_name(), d.b_layout.short_name(), d.c_layout.short_name())
}

/// A list batch's device and the problems that change C: (index in the
/// lists, dimensions in the user's form).
pub(crate) type ListProblems = (Arc<Device>, Vec<(usize, GemmDims)>);

impl ProductDesc {
    /// The validated problem: shapes of op(A), op(B), C with their storage.
    pub(crate) fn problem(
        &self,
        a: (gemm_core::MatrixDims, usize),
        b: (gemm_core::MatrixDims, usize),
        c: (gemm_core::MatrixDims, usize),
    ) -> Result<GemmDims, Error> {
        Ok(GemmDims::from_operands(a.0.op(self.op_a), a.1, b.0.op(self.op_b), b.1, c.0, c.1)?)
    }

    /// The reference BLAS's quick return: (alpha = 0 or k = 0) and beta = 1
    /// leave C as it is.
    pub(crate) fn leaves_c_unchanged(&self, dims: &GemmDims) -> bool {
        (self.alpha == 0.0 || dims.k == 0) && self.beta == 1.0
    }

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

    /// A product of device matrices validated, in the order every device
    /// door checks: shapes and storage, the operands' device (and the
    /// builder's), the stream's context, then the BLAS quick return (None:
    /// nothing to do), then C apart from A and B. Returns the problem (user
    /// form), C's device and the stream to enqueue on.
    #[allow(clippy::type_complexity)]
    pub(crate) fn device_problem<T: Scalar, C: Scalar>(
        &self,
        a: &DeviceView<'_, T>,
        b: &DeviceView<'_, T>,
        c: &DeviceViewMut<'_, C>,
        at: Target<'_>,
    ) -> Result<Option<(GemmDims, Arc<Device>, Arc<CudaStream>)>, Error> {
        self.device_problem_with(a, b, c, at, true)
    }

    /// [`ProductDesc::device_problem`], with the BLAS quick return for alpha
    /// = 0 (or k = 0) and beta = 1 only when `c_unchanged_returns` (a fused
    /// epilogue changes C even then).
    #[allow(clippy::type_complexity)]
    pub(crate) fn device_problem_with<T: Scalar, C: Scalar>(
        &self,
        a: &DeviceView<'_, T>,
        b: &DeviceView<'_, T>,
        c: &DeviceViewMut<'_, C>,
        at: Target<'_>,
        c_unchanged_returns: bool,
    ) -> Result<Option<(GemmDims, Arc<Device>, Arc<CudaStream>)>, Error> {
        let dims = self.problem((a.dims, a.data.len()), (b.dims, b.data.len()), (c.dims, c.data.len()))?;
        let device = c.device.clone();
        for other in [a.device, b.device].into_iter().chain(at.device) {
            if !other.same_context(&device) {
                return Err(Error::DeviceMismatch(other.name().to_string(), device.name().to_string()));
            }
        }
        let stream = device.stream_or(at.stream)?;
        if dims.is_empty() || (c_unchanged_returns && self.leaves_c_unchanged(&dims)) {
            return Ok(None); // BLAS quick return
        }
        let (c_start, c_bytes) = c.byte_span();
        for (operand, (start, bytes)) in [(Operand::A, a.byte_span()), (Operand::B, b.byte_span())] {
            if spans_overlap(c_start, c_bytes, start, bytes) {
                return Err(ShapeError::Overlap { operand }.into());
            }
        }
        Ok(Some((dims, device, stream)))
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
        at: Target<'_>,
    ) -> Result<Option<(GemmDims, usize, Arc<Device>, Arc<CudaStream>)>, Error> {
        let (dims, count) = self.strided_problem(
            (a.first.dims, a.count, a.stride, a.first.data.len()),
            (b.first.dims, b.count, b.stride, b.first.data.len()),
            (c.first.dims, c.count, c.stride, c.first.data.len()),
        )?;
        let device = c.first.device.clone();
        for other in [a.first.device, b.first.device].into_iter().chain(at.device) {
            if !other.same_context(&device) {
                return Err(Error::DeviceMismatch(other.name().to_string(), device.name().to_string()));
            }
        }
        let stream = device.stream_or(at.stream)?;
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
        at: Target<'_>,
        mut each: impl FnMut(usize, &GemmDims) -> Result<(), Error>,
        c_unchanged_skips: bool,
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
            for other in [a[i].device, b[i].device, c[i].device].into_iter().chain(at.device) {
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
            if !(dims.is_empty() || (c_unchanged_skips && self.leaves_c_unchanged(&dims))) {
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
}
