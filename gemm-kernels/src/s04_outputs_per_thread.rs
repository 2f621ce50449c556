//! Stage 4, several outputs per thread: 32 x 32 shared-memory tiles as in
//! stage 3, but each thread computes OUTPUTS elements of one column of C and
//! keeps them in registers, so one shared-memory read of B feeds OUTPUTS fmas.
//!
//! # Shapes
//! A m x k (lda), B k x n (ldb), C m x n (ldc), in elements; C row-major,
//! A and B row- or column-major (`A_COL`, `B_COL`; `crate::A_COL_MAJOR`).
//!
//! # Launch
//! Block T x (T / OUTPUTS) threads, grid (ceil(n / T), ceil(m / T)),
//! `2 * T * T * size_of::<T>()` bytes of dynamic shared memory
//! (`KernelConfig::OutputsPerThread`); T = 32, OUTPUTS in {1, 2, 4, 8, 16}.
//!
//! # Thread mapping
//! With R = T / OUTPUTS rows per pass (`gemm_core::config::rows_per_pass`),
//! thread (x, y) of block (bx, by) owns C(by*T + y + r*R, bx*T + x) for r in
//! 0..OUTPUTS: rows R apart, as in Dharmaraj and Pampana, "Double-Precision Matrix Multiply on CUDA"'s listing. It also loads OUTPUTS
//! elements of each tile per step, at the same rows, with x fast (coalesced).
//!
//! Fewer threads with more work each: Volkov's "faster codes run at lower
//! occupancy" (Volkov, "Optimizing GPU codes"); Dharmaraj and Pampana, "Double-Precision Matrix Multiply on CUDA"'s table shows 1, 2, 4, 8 outputs per
//! thread at rising GFLOP/s and registers, falling occupancy.
//!
//! The kernel is stage 3's [`crate::s03_smem_tiled::tiled`] with OUTPUTS > 1:
//! the accumulators become a register array and the inner loop feeds one
//! shared-memory read of B into OUTPUTS fmas.
//!
//! # Source
//! Dharmaraj and Pampana, "Double-Precision Matrix Multiply on CUDA" (section 3.2, "Inducing instruction level parallelism"),
//! Volkov, "Optimizing GPU codes" (ILP over occupancy; registers as the working set).

use crate::element::Element;
use crate::s03_smem_tiled::tiled;
use crate::thread::GemmArgs;
use gemm_core::config::OPT_TILE_SIZES;

/// Stage 4 (see the module docs).
///
/// # Safety
/// As [`crate::s01_naive::naive`]; launched with T x (T / OUTPUTS) threads and
/// at least `2 * T * T * size_of::<T>()` bytes of dynamic shared memory.
#[inline(always)]
pub unsafe fn outputs_per_thread<
    T: Element,
    const TILE: u32,
    const OUTPUTS: usize,
    const A_COL: bool,
    const B_COL: bool,
>(
    g: GemmArgs<T>,
) {
    const { assert!(TILE == OPT_TILE_SIZES[0], "stage 4 tiles are 32 x 32") };
    tiled::<T, TILE, OUTPUTS, A_COL, B_COL>(g)
}
