//! The operands layer: matrices in host memory ([`matrix`]) and in device
//! memory ([`device_matrix`]), owned or borrowed, with their layouts and
//! views, and strided batches of them ([`strided`]).

pub(crate) mod device_matrix;
pub(crate) mod distributed;
pub(crate) mod matrix;
pub(crate) mod strided;
