//! # gemm: BLAS-style matrix multiply on NVIDIA GPUs, kernels written in Rust
//!
//! ```no_run
//! use gemm::{Gemm, Matrix, Stage};
//! # fn main() -> Result<(), gemm::Error> {
//! let a = Matrix::<f64>::from_fn(300, 200, |i, j| (i as f64 - j as f64) / 7.0);
//! let b = Matrix::<f64>::from_fn(200, 100, |i, j| ((i * j) % 5) as f64);
//! let mut c = Matrix::<f64>::zeros(300, 100);
//! gemm::dgemm(&a, &b, &mut c)?;                      // C = A * B, the measured default kernel
//! Gemm::new().tile_size(32).outputs_per_thread(8)    // stage 4, a chosen configuration
//!     .run(&a, &b, &mut c)?;
//! Gemm::new().block_tile(128, 128, 16).thread_tile(8, 8) // stage 5
//!     .run(&a, &b, &mut c)?;
//! let plan = Gemm::new().plan(gemm::Precision::F64, 300, 100, 200)?; // what dgemm runs, and why
//! println!("{plan}");
//! Gemm::new().stage(Stage::Coalesced).block_dim(32, 8).alpha(2.0).beta(1.0)
//!     .run(&a, &b, &mut c)?;                         // C = 2 * A * B + C
//! # Ok(()) }
//! ```
//!
//! Matrices are row-major with a leading dimension ([`Matrix`]); A is m x k,
//! B is k x n, C is m x n. Every call validates shapes and the configuration
//! first and returns a typed [`Error`] (C is left untouched on any error);
//! without an NVIDIA driver or GPU it returns [`Error::NoDriver`] /
//! [`Error::NoDevice`], never a panic.
//!
//! The kernels are in the `gemm-kernels` crate, one module per stage of the
//! optimization ladder ([`Stage`]); `cargo xtask ptx` compiles them to PTX for
//! sm_80 and sm_90, which this crate embeds and loads for the device at hand
//! ([`ptx`]). [`DeviceMatrix`] keeps operands on the GPU between products.
#![deny(missing_docs)]

pub mod bench;
pub mod check;
pub mod cublas;
mod device;
mod element;
mod error;
mod gemm;
mod launch;
mod matrix;
pub mod ptx;
pub mod registry;
pub mod tuning;

pub use device::{default_device, Device, KernelInfo};
pub use element::Element;
pub use error::Error;
pub use gemm::{dgemm, sgemm, stage_default, Gemm};
pub use gemm_core::{
    BlockDim, BlockTile, ConfigError, DeviceLimits, KernelConfig, LimitError, Precision, ShapeError, Stage, ThreadTile,
    WarpTile,
};
pub use matrix::{DeviceMatrix, Matrix};
pub use tuning::{Plan, PlanSource};
