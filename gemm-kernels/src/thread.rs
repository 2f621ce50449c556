//! Thread indices, the dynamic shared-memory buffer, and the memory helpers
//! every stage shares (bounds-checked tile loads, the alpha/beta epilogue).

use crate::element::Element;
use core::arch::{asm, global_asm, nvptx};

// The one dynamic shared-memory buffer of every kernel; its size is set at
// launch (`LaunchGeometry::smem_bytes`), its start aligned to 1024 bytes
// (`gemm_core::warpgroup::SMEM_ALIGN`: the 128-byte swizzle's period, which
// stage 9's tiles need). PTX ISA, "State spaces: shared", ".align".
global_asm!(".extern .shared .align 1024 .b8 SMEM[];");

/// (x, y) of threadIdx.
#[inline(always)]
pub fn thread_idx() -> [u32; 2] {
    // SAFETY: reading special registers has no preconditions.
    unsafe { [nvptx::_thread_idx_x() as u32, nvptx::_thread_idx_y() as u32] }
}

/// (x, y, z) of blockIdx. Stages read their block's place in its product
/// from [`GemmArgs::block`] instead (`crate::batch`).
#[inline(always)]
pub fn block_idx() -> [u32; 3] {
    // SAFETY: as above.
    unsafe { [nvptx::_block_idx_x() as u32, nvptx::_block_idx_y() as u32, nvptx::_block_idx_z() as u32] }
}

/// (x, y) of blockDim.
#[inline(always)]
pub fn block_dim() -> [u32; 2] {
    // SAFETY: as above.
    unsafe { [nvptx::_block_dim_x() as u32, nvptx::_block_dim_y() as u32] }
}

/// (x, y) of gridDim.
#[inline(always)]
pub fn grid_dim() -> [u32; 2] {
    // SAFETY: as above.
    unsafe { [nvptx::_grid_dim_x() as u32, nvptx::_grid_dim_y() as u32] }
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

/// Offset in elements of (row, col) of a matrix stored row-major
/// (`COL == false`: `row * ld + col`) or column-major (`col * ld + row`).
#[inline(always)]
pub fn at<const COL: bool>(row: u32, col: u32, ld: u32) -> usize {
    if COL {
        col as usize * ld as usize + row as usize
    } else {
        row as usize * ld as usize + col as usize
    }
}

/// Element (row, col) of a `rows x cols` matrix stored row-major
/// (`COL == false`) or column-major, with leading dimension `ld`, or zero
/// outside it (the fringe of a tile).
///
/// # Safety
/// `p` must point to a matrix of at least that shape.
#[inline(always)]
pub unsafe fn load_or_zero<T: Element, const COL: bool>(
    p: *const T,
    row: u32,
    col: u32,
    rows: u32,
    cols: u32,
    ld: u32,
) -> T {
    if row < rows && col < cols {
        T::ld_global(p.add(at::<COL>(row, col, ld)))
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
    T::st_global(p, if beta == T::ZERO { alpha * acc } else { T::fma(beta, T::ld_global(p), alpha * acc) });
}

/// The arguments every kernel receives, gathered for the generic stage
/// functions: `C <- alpha * A * B + beta * C`, A m x k (lda), B k x n (ldb),
/// C m x n (ldc), dimensions and leading dimensions in elements. C is
/// row-major; A and B are stored as the module's layouts say
/// ([`crate::A_COL_MAJOR`], [`crate::B_COL_MAJOR`]).
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
    /// Leading dimension of A (>= k row-major, >= m column-major).
    pub lda: u32,
    /// B, k x n.
    pub b: *const T,
    /// Leading dimension of B (>= n row-major, >= k column-major).
    pub ldb: u32,
    /// Scale of C's old value; 0 means C is not read.
    pub beta: T,
    /// C, m x n.
    pub c: *mut T,
    /// Leading dimension of C (>= n).
    pub ldc: u32,
    /// This block's (x, y) in its product's grid: what `blockIdx` would be
    /// in a launch of that product alone (`crate::batch`).
    pub block: [u32; 2],
    /// The product's grid (x, y), as a launch of it alone would have.
    pub grid: [u32; 2],
}

/// Whether 16-byte vector access is allowed on a matrix: its base address is
/// 16-byte aligned and its leading dimension a multiple of the vector width,
/// so every row starts 16-byte aligned. Uniform over the launch.
#[inline(always)]
pub fn vector_ok<T: Element>(p: *const T, ld: u32) -> bool {
    (p as usize) % 16 == 0 && ld as usize % T::VEC == 0
}

/// `cp.async.cg.shared.global` of 16 bytes (PTX ISA, "Data movement:
/// cp.async"). The copy completes asynchronously: see [`cp_async_commit`] and
/// [`cp_async_wait`].
///
/// # Safety
/// `dst` is a 16-byte aligned shared address inside the launch's buffer;
/// `src` is 16-byte aligned and its 16 bytes are readable global memory.
#[inline(always)]
pub unsafe fn cp_async_16(dst: u32, src: *const u8) {
    asm!("cp.async.cg.shared.global [{d}], [{s}], 16;", d = in(reg32) dst, s = in(reg64) src,
         options(nostack, preserves_flags));
}

/// `cp.async.cg.shared.global` of 16 bytes with a source size: `src_bytes`
/// (0 or 16 here) are read and the rest of the 16 zero-filled (PTX ISA,
/// "cp.async", `src-size`). With 0 nothing is read, so one instruction both
/// copies and clears, and a copy can be switched off without a branch.
///
/// # Safety
/// As [`cp_async_16`]: `src` stays a readable, 16-byte aligned address even
/// when `src_bytes` is 0 (compute-sanitizer checks the address).
#[inline(always)]
pub unsafe fn cp_async_16_zfill(dst: u32, src: *const u8, src_bytes: u32) {
    asm!("cp.async.cg.shared.global [{d}], [{s}], 16, {n};", d = in(reg32) dst, s = in(reg64) src, n = in(reg32) src_bytes,
         options(nostack, preserves_flags));
}

/// `x`, through a `mov` the compiler cannot see into, so what is computed
/// from it inside a loop stays inside the loop: not hoisted out of it and
/// kept live in registers across it. Costs one move.
#[inline(always)]
pub fn opaque_u32(x: u32) -> u32 {
    let y: u32;
    // SAFETY: a register move. Not `pure`, so it is not moved out of loops.
    unsafe { asm!("mov.b32 {y}, {x};", y = out(reg32) y, x = in(reg32) x, options(nomem, nostack, preserves_flags)) };
    y
}

/// `cp.async.commit_group`: closes the group of this thread's cp.async copies
/// issued since the last commit.
///
/// # Safety
/// None beyond being on sm_80 or newer.
#[inline(always)]
pub unsafe fn cp_async_commit() {
    asm!("cp.async.commit_group;", options(nostack, preserves_flags));
}

/// `cp.async.wait_group N`: waits until at most `pending` of this thread's
/// committed groups are still in flight (0..=6; larger waits for all). Other
/// threads' copies are visible only after a following barrier.
///
/// # Safety
/// None beyond being on sm_80 or newer.
#[inline(always)]
pub unsafe fn cp_async_wait(pending: u32) {
    // The operand must be an immediate; `pending` is a constant at every call.
    match pending {
        0 => asm!("cp.async.wait_group 0;", options(nostack, preserves_flags)),
        1 => asm!("cp.async.wait_group 1;", options(nostack, preserves_flags)),
        2 => asm!("cp.async.wait_group 2;", options(nostack, preserves_flags)),
        3 => asm!("cp.async.wait_group 3;", options(nostack, preserves_flags)),
        4 => asm!("cp.async.wait_group 4;", options(nostack, preserves_flags)),
        5 => asm!("cp.async.wait_group 5;", options(nostack, preserves_flags)),
        6 => asm!("cp.async.wait_group 6;", options(nostack, preserves_flags)),
        _ => asm!("cp.async.wait_all;", options(nostack, preserves_flags)),
    }
}

/// Writes VEC consecutive elements `alpha * acc[e] + beta * C(row, col + e)`
/// of a row of C, with one 16-byte store when `vec` (C allows vector access,
/// see [`vector_ok`]) and all VEC columns lie inside C, else element by
/// element with bounds checks (the fringe). `beta == 0` never reads C.
///
/// # Safety
/// `c` is C (m x n, ldc); `col` is a multiple of VEC.
#[inline(always)]
pub unsafe fn store_c_vec<T: Element>(g: &GemmArgs<T>, vec: bool, row: u32, col: u32, acc: &[T; 4]) {
    if row >= g.m {
        return;
    }
    if vec && col + T::VEC as u32 <= g.n {
        let p = g.c.add(row as usize * g.ldc as usize + col as usize);
        let mut out = [T::ZERO; 4];
        if g.beta == T::ZERO {
            for e in 0..T::VEC {
                out[e] = g.alpha * acc[e];
            }
        } else {
            // Not `ld_global_vec`, which takes the read-only path: C is
            // written by this kernel.
            for e in 0..T::VEC {
                out[e] = T::fma(g.beta, T::ld_global(p.add(e)), g.alpha * acc[e]);
            }
        }
        T::st_global_vec(p, &out);
    } else {
        for e in 0..T::VEC as u32 {
            if col + e < g.n {
                store_c(g.c, row, col + e, g.ldc, acc[e as usize], g.alpha, g.beta);
            }
        }
    }
}
