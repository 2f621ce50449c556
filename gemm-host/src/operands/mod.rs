//! The operands layer: matrices in host memory ([`matrix`]) and in device
//! memory ([`device_matrix`]), owned or borrowed, with their layouts and
//! views.

pub(crate) mod device_matrix;
pub(crate) mod matrix;
