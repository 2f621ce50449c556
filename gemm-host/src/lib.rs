//! # gemm: BLAS-style matrix multiply on NVIDIA GPUs, kernels written in Rust
//!
//! `C <- alpha * op(A) * op(B) + beta * C`, the BLAS xGEMM contract, in f64
//! ([`dgemm`]) and f32 ([`sgemm`]), and on tensor cores (compute capability
//! 8.0 and newer; Hopper's warpgroup MMA on 9.0) with f16 or bf16 operands
//! ([`hgemm`]; f32 accumulation), f32 on TF32 tensor cores when asked for
//! ([`Gemm::allow_tf32`]) and i8 operands with i32 accumulation ([`igemm`])
//! (which types: [`Product`]; what each runs: [`Gemm::plan_for`]), on host
//! matrices ([`Matrix`]), views of
//! the caller's slices ([`MatRef`], [`MatMut`]), sub-matrices and transposes
//! (no copies), or device buffers ([`DeviceMatrix`], also made from a cudarc
//! `CudaSlice`), row- or column-major with any leading dimension, on the
//! caller's stream if asked ([`Gemm::stream`]).
//!
//! ```no_run
//! use gemm::{Gemm, Layout, MatMut, Matrix, Op};
//! # fn main() -> Result<(), gemm::Error> {
//! let a = Matrix::<f64>::from_fn(200, 300, |i, j| (i as f64 - j as f64) / 9.0); // 200 x 300
//! let b = Matrix::<f64>::from_fn_col_major(200, 100, |i, j| ((i + j) % 7) as f64);
//! let mut c = Matrix::<f64>::zeros(300, 100);
//! gemm::dgemm(a.t(), &b, &mut c)?;                                        // C = A^T B
//! Gemm::new().op_a(Op::T).alpha(2.0).beta(0.5).run(&a, &b, &mut c)?;     // C = 2 A^T B + C / 2
//! gemm::dgemm(a.view(10, 20, 50, 70)?, b.view(0, 0, 70, 40)?, c.view_mut(0, 0, 50, 40)?)?; // blocks
//! let mut z = vec![0.0f64; 300 * 100];
//! gemm::dgemm(a.t(), &b, MatMut::from_slice(&mut z, 300, 100, Layout::ColMajor, 300)?)?; // into a slice
//! # Ok(()) }
//! ```
//!
//! Every call validates shapes, leading dimensions, views and overlaps
//! first and returns a typed [`Error`] (C is left untouched on any error);
//! without an NVIDIA driver or GPU it returns [`Error::NoDriver`] /
//! [`Error::NoDevice`], never a panic. [`Gemm::run`] and the one-call
//! functions block until C holds the result; [`Gemm::run_device`] only
//! enqueues work on a stream.
//!
//! Several GPUs: [`Gemm::devices`] spreads a host product over a group of
//! GPUs (C in a block per GPU, one GPU's bits); [`DistMatrix`] keeps a
//! matrix 2D block-cyclic on the GPUs of a [`ProcessGrid`] (NCCL), and
//! [`Gemm::run_distributed`] multiplies such matrices by SUMMA.
//!
//! The kernels, one per stage of an optimization ladder from a naive loop to
//! FP64 tensor cores (stages 1-8) and Hopper's warpgroup MMA fed by TMA
//! (stage 9), and how to choose and tune them, are in [`tuning`];
//! benchmarking and checking support (`gemm::bench`, `gemm::check`,
//! `gemm::cublas`, `gemm::cublas_lt`) is behind the `bench` cargo feature.
//! [`cudarc`] is re-exported, so a dependent uses the same version.
#![deny(missing_docs)]

mod api;
#[cfg(feature = "bench")]
pub mod bench;
#[cfg(feature = "bench")]
pub mod check;
#[cfg(feature = "bench")]
pub mod cublas;
#[cfg(feature = "bench")]
pub mod cublas_lt;
mod describe;
mod device;
mod element;
mod error;
mod exec;
mod operands;
mod plan;

/// The cudarc crate this library is built on (driver API, cuBLAS), so a
/// dependent can use its `CudaSlice`s and streams without matching its
/// version by hand. It is built without cudarc's `f16` feature (which would
/// bring the `rand` crates into every dependent's build): to hold f16 or bf16
/// cudarc buffers yourself (`stream.alloc_zeros::<half::f16>(n)`), turn it
/// on in your own manifest, `cudarc = { version = "0.19.10",
/// default-features = false, features = ["f16"] }`. The library's own
/// constructors ([`DeviceMatrix::from_host`], [`DeviceMatrix::zeros`]) need
/// nothing.
pub use cudarc;

/// The `half` crate, whose [`half::f16`] and [`half::bf16`] are the
/// half-precision element types ([`hgemm`], [`Product`]).
pub use half;

/// The `float8` crate, whose [`float8::F8E4M3`] is the FP8 (e4m3) element
/// type ([`Product`]: e4m3 x e4m3 -> bf16, f16 or f32 on stage 9).
pub use float8;

pub use api::epilogue::{Activation, Along, Bias, BlockScales, Epilogue, Fused, Values};
pub use api::gemm::{dgemm, sgemm, Gemm};
pub use api::warpgroup::{hgemm, igemm};
pub use device::nccl::NcclId;
pub use device::{default_device, Device};
pub use element::{Element, Fp8, Product, Scalar};
pub use error::Error;
pub use gemm_core::distribution::Grid;
pub use gemm_core::{Layout, MatrixDims, Op, Operand, Precision, ShapeError};
pub use operands::device_matrix::{DeviceMatrix, DeviceView, DeviceViewMut};
pub use operands::distributed::{BlockCyclic, DistMatrix, ProcessGrid};
pub use operands::matrix::{MatMut, MatRef, Matrix};
pub use operands::strided::{BatchView, IntoBatchView, Strided};
pub use plan::emulation;
pub use plan::product_plan::{DeviceBlock, DeviceSplit, KernelFamily, ProductPlan};

/// The teaching and tuning surface: the stages of the ladder, their kernel
/// configurations, the compiled menu (registry), the shipped kernels, and the
/// measured default choice (plans).
///
/// ```
/// use gemm::tuning::{Stage, KernelConfig};
/// let config = gemm::Gemm::new().stage(Stage::TensorCore).chosen_config(gemm::Precision::F64)?;
/// assert!(matches!(config, Some(KernelConfig::TensorCore { .. })));
/// # Ok::<(), gemm::Error>(())
/// ```
pub mod tuning {
    pub use crate::device::memory::MAX_SPLIT_WORKSPACE;
    pub use crate::device::registry::{
        Flavour, MmaKernel, WarpgroupKernel, EMULATION_BOUND_KERNELS, EMULATION_KERNELS, MMA_KERNELS, SKINNY_KERNELS,
        SKINNY_MMA_KERNELS, WARPGROUP_KERNELS,
    };
    pub use crate::device::KernelInfo;
    pub use crate::exec::warpgroup::WarpgroupTail;
    pub use crate::plan::product_plan::{mma_kernel, warpgroup_plan, warpgroup_tail, WarpgroupPlan};
    pub use crate::plan::tuning_plan::{
        choose, choose_batched, measured, model_split_for, model_tail_for, stage_default, Measured, PackReason, Plan,
        PlanSource, SplitReason, WaveModel, DRAM_ROUND_TRIP_US,
    };
    pub use gemm_core::batch::{separate_batched_entry, GroupProblem};
    pub use gemm_core::distribution;
    pub use gemm_core::mma_sync::MmaTile;
    pub use gemm_core::pack;
    pub use gemm_core::skinny;
    pub use gemm_core::split_k;
    pub use gemm_core::warpgroup::{WgmmaTile, WgmmaTypes};
    pub use gemm_core::{
        BlockDim, BlockTile, ConfigError, DeviceLimits, GemmDims, KernelConfig, KernelLayouts, LaunchGeometry,
        LimitError, Stage, ThreadTile, WarpTile,
    };

    /// Which kernel entry points exist (the compiled menu).
    pub mod registry {
        pub use crate::device::registry::{entry_point, naive_block_sweep, stage_configs, EntryPoint, ENTRY_POINTS};
    }

    /// The kernels the library ships: machine code per architecture, PTX as
    /// the fallback on newer ones, and which a device gets.
    pub mod kernels {
        pub use crate::device::kernels::*;
    }
}
