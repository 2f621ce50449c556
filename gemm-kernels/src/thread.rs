//! Thread indices, the dynamic shared-memory buffer, and the memory helpers
//! every stage shares (bounds-checked tile loads, the alpha/beta epilogue).

use crate::element::Element;
use core::arch::{asm, global_asm, nvptx};

// The one dynamic shared-memory buffer of every kernel; its size is set at
// launch (`LaunchGeometry::smem_bytes`). PTX ISA, "State spaces: shared".
global_asm!(".extern .shared .align 16 .b8 SMEM[];");

/// (x, y) of threadIdx.
#[inline(always)]
pub fn thread_idx() -> [u32; 2] {
    // SAFETY: reading special registers has no preconditions.
    unsafe { [nvptx::_thread_idx_x() as u32, nvptx::_thread_idx_y() as u32] }
}

/// (x, y) of blockIdx.
#[inline(always)]
pub fn block_idx() -> [u32; 2] {
    // SAFETY: as above.
    unsafe { [nvptx::_block_idx_x() as u32, nvptx::_block_idx_y() as u32] }
}

/// (x, y) of blockDim.
#[inline(always)]
pub fn block_dim() -> [u32; 2] {
    // SAFETY: as above.
    unsafe { [nvptx::_block_dim_x() as u32, nvptx::_block_dim_y() as u32] }
}

/// `bar.sync 0`: every thread of the block waits here.
///
/// # Safety
/// Must be reached by all threads of the block (block-uniform control flow).
#[inline(always)]
pub unsafe fn sync_threads() {
    nvptx::_syncthreads();
}

/// 32-bit shared-window address of the dynamic shared-memory buffer.
#[inline(always)]
pub fn smem_base() -> u32 {
    let p: u32;
    // SAFETY: takes the address of a symbol; reads no memory.
    unsafe { asm!("mov.u32 {p}, SMEM;", p = out(reg32) p, options(pure, nomem, nostack)) };
    p
}

/// Element (row, col) of a row-major matrix with `rows x cols` elements and
/// leading dimension `ld`, or zero outside it (the fringe of a tile).
///
/// # Safety
/// `p` must point to a matrix of at least that shape.
#[inline(always)]
pub unsafe fn load_or_zero<T: Element>(p: *const T, row: u32, col: u32, rows: u32, cols: u32, ld: u32) -> T {
    if row < rows && col < cols {
        *p.add(row as usize * ld as usize + col as usize)
    } else {
        T::ZERO
    }
}

/// Writes `alpha * acc + beta * C(row, col)` to C(row, col); when `beta == 0`
/// C is not read (BLAS convention), so NaN in C does not propagate.
///
/// # Safety
/// (row, col) must lie inside C, whose leading dimension is `ldc`.
#[inline(always)]
pub unsafe fn store_c<T: Element>(c: *mut T, row: u32, col: u32, ldc: u32, acc: T, alpha: T, beta: T) {
    let p = c.add(row as usize * ldc as usize + col as usize);
    *p = if beta == T::ZERO { alpha * acc } else { T::fma(beta, *p, alpha * acc) };
}

/// The arguments every kernel receives, gathered for the generic stage
/// functions: `C <- alpha * A * B + beta * C`, A m x k (lda), B k x n (ldb),
/// C m x n (ldc), row-major, dimensions and leading dimensions in elements.
#[derive(Clone, Copy)]
pub struct GemmArgs<T> {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
    /// Scale of A * B.
    pub alpha: T,
    /// A, m x k.
    pub a: *const T,
    /// Leading dimension of A (>= k).
    pub lda: u32,
    /// B, k x n.
    pub b: *const T,
    /// Leading dimension of B (>= n).
    pub ldb: u32,
    /// Scale of C's old value; 0 means C is not read.
    pub beta: T,
    /// C, m x n.
    pub c: *mut T,
    /// Leading dimension of C (>= n).
    pub ldc: u32,
}
