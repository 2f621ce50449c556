//! The API layer: the builder [`gemm::Gemm`] and its doors (single
//! products, plans, the BLAS-style functions), batches ([`batch`]), the one
//! dispatch every door goes through to the execution layer ([`dispatch`]),
//! and the tensor-core types' options and `hgemm`/`igemm` ([`warpgroup`]).

pub(crate) mod batch;
pub(crate) mod devices;
pub(crate) mod dispatch;
pub(crate) mod distributed;
pub(crate) mod epilogue;
pub(crate) mod fp8;
pub(crate) mod gemm;
pub(crate) mod warpgroup;
