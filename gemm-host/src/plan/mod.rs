//! The plan layer: which kernel runs a product, and why. The f64/f32
//! ladder's measured choice ([`tuning_plan`], reading the generated table
//! [`tuning_table`] of [`measured`] rows), and stage 8's and 9's planners
//! with [`product_plan::ProductPlan`], the answer of `Gemm::plan_for`.
//! [`emulation`]: the numerics of f64 products emulated on INT8 tensor
//! cores (Ozaki scheme II), public as `gemm::emulation`.

pub mod emulation;
pub(crate) mod measured;
pub(crate) mod product_plan;
pub(crate) mod tuning_plan;
#[rustfmt::skip] // generated (cargo xtask tuning)
pub(crate) mod tuning_table;
