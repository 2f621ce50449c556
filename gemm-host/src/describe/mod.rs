//! The describe layer: a product as the user gave it, checked before
//! anything runs. [`ProductDesc`] holds what the product is (op(A), op(B),
//! alpha, beta: cuBLASLt's matmul descriptor), [`Target`] where the call
//! is to run (the builder's device and stream); [`check`] validates the
//! operands of every door (shapes, storage, devices, overlaps, batch
//! counts) into the problem the plan and the execution take, in the order
//! every door checks, and finds the BLAS quick return.

pub(crate) mod check;

use crate::device::Device;
use cudarc::driver::CudaStream;
use gemm_core::shape::Op;
use std::sync::Arc;

/// What a product is: C <- alpha op(A) op(B) + beta C.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ProductDesc {
    /// op(A): A as stored (N) or transposed (T).
    pub op_a: Op,
    /// op(B).
    pub op_b: Op,
    /// The product's scale.
    pub alpha: f64,
    /// C's scale (0: C is not read).
    pub beta: f64,
}

impl Default for ProductDesc {
    fn default() -> Self {
        ProductDesc { op_a: Op::N, op_b: Op::N, alpha: 1.0, beta: 0.0 }
    }
}

/// Where a call runs, as the builder says: its device (the operands must
/// live there) and stream (of that device's context), if set.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Target<'a> {
    /// The builder's device.
    pub device: Option<&'a Arc<Device>>,
    /// The builder's stream.
    pub stream: Option<&'a Arc<CudaStream>>,
}
