//! One measured row of the f64/f32 tuning table ([`Measured`]): the type
//! the generated table (`tuning_table.rs`, written by `cargo xtask tuning`)
//! is made of, apart from the planner that reads it (`tuning_plan.rs`), so
//! the two do not import each other. Plan layer.

use gemm_core::Precision;

/// One measured row: the fastest of our configurations at one shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// Device name as the driver reports it.
    pub device: &'static str,
    /// Date of the run (UTC, YYYY-MM-DD).
    pub date: &'static str,
    /// Commit the run measured.
    pub commit: &'static str,
    /// Element type.
    pub precision: Precision,
    /// Problem shape.
    pub m: usize,
    /// Problem shape.
    pub n: usize,
    /// Problem shape.
    pub k: usize,
    /// Products in the launch: 1 for a single product, more for a strided
    /// batch of this shape.
    pub batch: usize,
    /// The storage of A and B as the kernel read them (C row-major; a
    /// column-major C is measured as C^T): `"nn"`, `"nt"`, `"tn"` or `"tt"`
    /// ([`gemm_core::KernelLayouts::suffix`]).
    pub layouts: &'static str,
    /// PTX entry point of the fastest configuration.
    pub kernel: &'static str,
    /// Slices of k it ran with (1: not split).
    pub split_k: u32,
    /// Whether it packed the operands first ([`gemm_core::pack`]): the
    /// kernel then read A column-major and B row-major (`"tn"`), whatever
    /// `layouts` says; the speed counts the copies.
    pub pack: bool,
    /// Its speed, GFLOP/s.
    pub gflops: f64,
    /// cuBLAS's speed in the same run, GFLOP/s.
    pub cublas_gflops: f64,
}
