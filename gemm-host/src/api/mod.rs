//! The API layer: the builder [`gemm::Gemm`] and its doors (single
//! products, plans, the BLAS-style functions), batches ([`batch`]), and the
//! mixed-precision products' launches on stages 8 and 9 ([`warpgroup`]).

pub(crate) mod batch;
pub(crate) mod gemm;
pub(crate) mod warpgroup;
