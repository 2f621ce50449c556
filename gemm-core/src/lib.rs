//! Shapes, stages, tile configurations and launch geometry for the `gemm` library.
//!
//! This crate is `no_std` and compiled twice: for the host, where the launcher
//! validates a call and computes its grid, and for `nvptx64-nvidia-cuda`, where
//! the kernels compute their tile indices with the *same* functions, so the two
//! cannot disagree.
//!
//! Words (as in BLAS): `C <- alpha * op(A) * op(B) + beta * C` with A m x k,
//! B k x n, C m x n; `lda`, `ldb`, `ldc` are leading dimensions in elements.
//! Tiles: BM/BN/BK block tile, TM/TN per-thread tile; "tile size" T for the
//! square tiles of stages 3 and 4.
#![no_std]
#![deny(missing_docs)]

pub mod batch;
pub mod config;
pub mod distribution;
pub mod emulation;
pub mod geometry;
pub mod mma_sync;
pub mod pack;
pub mod shape;
pub mod skinny;
pub mod split_k;
pub mod stage;
pub mod tiling;
pub mod warpgroup;

pub use batch::GroupProblem;
pub use config::{BlockDim, ConfigError, KernelConfig, Precision};
pub use geometry::{ceil_div, DeviceLimits, LaunchGeometry, LimitError};
pub use shape::{gemm_flops, spans_overlap, GemmDims, KernelLayouts, Layout, MatrixDims, Op, Operand, ShapeError};
pub use stage::Stage;
pub use tiling::{BlockTile, ThreadTile, WarpTile};
