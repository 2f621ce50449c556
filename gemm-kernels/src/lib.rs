//! GPU kernels of the `gemm` library, written in Rust for the stock
//! `nvptx64-nvidia-cuda` target (LLVM's NVPTX back end).
//!
//! One module per stage (`s01_naive`, ... `s08_tensor_core`); stages 1-7 are
//! generic over the element type (`element::Element`: f64, f32) and over its
//! tile constants (const generics). `entry_points` exports one
//! `#[no_mangle] extern "ptx-kernel"` function per line of
//! [`gemm_core::kernel_menu!`], which is also what the host registry lists.
//!
//! Stage 9 (`s09_warpgroup`, Hopper's warpgroup MMA and TMA) is compiled
//! only into the `sm_90a` module (`--cfg gemm_sm90a`), which exports its
//! kernels alone (`warpgroup_entry_points`) and no other stage's, with the
//! kernels around the INT8 products of f64 and f32 products emulated on
//! them (`emulation`).
//!
//! On the host this crate compiles to nothing; `cargo xtask ptx` builds it to
//! the PTX files that the host library embeds (`gemm-host/ptx/`).
//!
//! Every kernel computes `C <- alpha * A * B + beta * C` for A (m x k,
//! leading dimension lda), B (k x n, ldb) and a row-major C (m x n, ldc), all
//! in elements; when `beta == 0`, C is not read (so it may hold NaN). A and B
//! are row-major or column-major as the build says: `cargo xtask ptx` builds
//! this crate once per combination (`--cfg gemm_a_col_major`,
//! `--cfg gemm_b_col_major`), giving the PTX modules `nn`, `nt`, `tn`, `tt`
//! with the same entry points; every stage is generic over the two layouts
//! (const parameters `A_COL`, `B_COL`) and the entry points instantiate it
//! with [`A_COL_MAJOR`] and [`B_COL_MAJOR`]. A column-major C is the host's
//! business: it computes C^T = B^T A^T (`gemm_core::GemmDims::kernel_form`).
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx, asm_experimental_arch, core_intrinsics))]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

/// Whether this build reads A column-major (m contiguous) rather than
/// row-major (k contiguous).
pub const A_COL_MAJOR: bool = cfg!(gemm_a_col_major);
/// Whether this build reads B column-major (k contiguous) rather than
/// row-major (n contiguous).
pub const B_COL_MAJOR: bool = cfg!(gemm_b_col_major);

#[cfg(target_arch = "nvptx64")]
pub mod batch;
#[cfg(target_arch = "nvptx64")]
pub mod element;
#[cfg(all(target_arch = "nvptx64", gemm_sm90a))]
pub mod emulation;
#[cfg(all(target_arch = "nvptx64", not(gemm_sm90a)))]
pub mod entry_points;
#[cfg(target_arch = "nvptx64")]
pub mod fusion;
#[cfg(target_arch = "nvptx64")]
pub mod mixed;
#[cfg(target_arch = "nvptx64")]
pub mod pack;
#[cfg(target_arch = "nvptx64")]
pub mod s01_naive;
#[cfg(target_arch = "nvptx64")]
pub mod s02_coalesced;
#[cfg(target_arch = "nvptx64")]
pub mod s03_smem_tiled;
#[cfg(target_arch = "nvptx64")]
pub mod s04_outputs_per_thread;
#[cfg(target_arch = "nvptx64")]
pub mod s05_register_tiled;
#[cfg(target_arch = "nvptx64")]
pub mod s06_vectorized;
#[cfg(target_arch = "nvptx64")]
pub mod s07_pipelined;
#[cfg(target_arch = "nvptx64")]
pub mod s08_tensor_core;
#[cfg(all(target_arch = "nvptx64", not(gemm_sm90a)))]
pub mod s08_tensor_core_mixed;
#[cfg(all(target_arch = "nvptx64", gemm_sm90a))]
pub mod s09_warpgroup;
#[cfg(all(target_arch = "nvptx64", gemm_sm90a))]
pub mod skinny;
#[cfg(all(target_arch = "nvptx64", not(gemm_sm90a)))]
pub mod split_k;
#[cfg(target_arch = "nvptx64")]
pub mod thread;
#[cfg(all(target_arch = "nvptx64", gemm_sm90a))]
pub mod warpgroup_entry_points;

/// A kernel that panics traps: the launch fails with an error the host reports
/// (bounds-checked indexing is kept out of the kernels; this should not run).
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; it has no preconditions.
    unsafe { core::arch::nvptx::trap() }
}
