//! Stage 3, shared-memory tiling: `C <- alpha * A * B + beta * C` with square
//! T x T tiles of A and B staged in shared memory.
//!
//! # Shapes
//! A m x k (lda), B k x n (ldb), C m x n (ldc), in elements; C row-major,
//! A and B row- or column-major (`A_COL`, `B_COL`; `crate::A_COL_MAJOR`).
//!
//! # Launch
//! Block T x T threads, grid (ceil(n / T), ceil(m / T)), `2 * T * T *
//! size_of::<T>()` bytes of dynamic shared memory (`KernelConfig::SmemTiled`).
//!
//! # Thread mapping
//! Block (bx, by) owns the C tile at rows by*T.., columns bx*T..
//! (`gemm_core::config::tile_origin`); thread (x, y) owns one element of it,
//! C(by*T + y, bx*T + x). For each step of T along k, thread (x, y) loads
//! A(row, k0 + x) and B(k0 + y, col): x is the fast index of both loads, so
//! each warp reads consecutive addresses (coalesced). Out-of-range elements
//! (the fringe) load as zero, so any m, n, k works.
//!
//! Each element brought from global memory is used T times, so the global
//! traffic per fma falls by T (0x7df, "CUDA basics part 2"'s CGMA ratio). In the inner loop all
//! lanes of a warp read the same A element (broadcast) and consecutive B
//! elements: no bank conflicts.
//!
//! The code is [`tiled`], written once for any number of outputs per thread:
//! stage 3 is its `OUTPUTS = 1` case; stage 4
//! ([`crate::s04_outputs_per_thread`]) raises OUTPUTS.
//!
//! # Source
//! Dharmaraj and Pampana, "Double-Precision Matrix Multiply on CUDA" (section 3.1: tiling, coalesced loads, two barriers per step),
//! 0x7df, "CUDA basics part 2" (tiled kernel for rectangular matrices).

use crate::element::Element;
use crate::thread::{load_or_zero, smem_base, store_c, sync_threads, thread_idx, GemmArgs};
use gemm_core::config::{rows_per_pass, tile_origin, SMEM_TILE_SIZES};

/// Stage 3 (see the module docs): [`tiled`] with one output per thread.
///
/// # Safety
/// As [`crate::s01_naive::naive`]; launched with T x T threads and at least
/// `2 * T * T * size_of::<T>()` bytes of dynamic shared memory.
#[inline(always)]
pub unsafe fn smem_tiled<T: Element, const TILE: u32, const A_COL: bool, const B_COL: bool>(g: GemmArgs<T>) {
    const {
        assert!(
            TILE == SMEM_TILE_SIZES[0] || TILE == SMEM_TILE_SIZES[1] || TILE == SMEM_TILE_SIZES[2],
            "stage 3 tile size must be one of SMEM_TILE_SIZES"
        )
    };
    tiled::<T, TILE, 1, A_COL, B_COL>(g)
}

/// The shared-memory tiled kernel with OUTPUTS outputs per thread.
///
/// Block T x R threads with R = T / OUTPUTS rows per pass
/// (`gemm_core::config::rows_per_pass`); thread (x, y) of block (bx, by)
/// owns C(by*T + y + r*R, bx*T + x) for r in 0..OUTPUTS (rows R apart, seed
/// 000's listing) and keeps them in registers. For each step of T along k it
/// loads OUTPUTS elements of each tile, at the same rows, x fast (coalesced);
/// out-of-range elements load as zero. A column-major A or B is read
/// through the same indices (run-time strides: coalesced for row-major
/// operands only; the fast stages load each layout along its contiguous
/// dimension).
///
/// # Safety
/// As [`crate::s01_naive::naive`]; launched with T x (T / OUTPUTS) threads
/// and at least `2 * T * T * size_of::<T>()` bytes of dynamic shared memory.
#[inline(always)]
pub unsafe fn tiled<T: Element, const TILE: u32, const OUTPUTS: usize, const A_COL: bool, const B_COL: bool>(
    g: GemmArgs<T>,
) {
    const { assert!(OUTPUTS > 0 && TILE as usize % OUTPUTS == 0, "outputs per thread must divide the tile size") };
    let rpp = rows_per_pass(TILE, OUTPUTS as u32);
    let [tx, ty] = thread_idx();
    let (row0, col0) = tile_origin(g.block, TILE);
    let col = col0 + tx;
    let a_tile = smem_base(); // (T, T) of A, row-major: [row][k]
    let b_tile = a_tile + TILE * TILE * T::BYTES; // (T, T) of B, row-major: [k][col]

    let mut acc = [T::ZERO; OUTPUTS]; // (OUTPUTS) of C's column `col`, in registers
    let mut k0 = 0;
    while k0 < g.k {
        for r in 0..OUTPUTS as u32 {
            let tr = ty + r * rpp; // tile row this thread loads
            let slot = (tr * TILE + tx) * T::BYTES;
            T::st_shared(a_tile + slot, load_or_zero::<T, A_COL>(g.a, row0 + tr, k0 + tx, g.m, g.k, g.lda));
            T::st_shared(b_tile + slot, load_or_zero::<T, B_COL>(g.b, k0 + tr, col, g.k, g.n, g.ldb));
        }
        sync_threads();
        for kk in 0..TILE {
            let b = T::ld_shared(b_tile + (kk * TILE + tx) * T::BYTES);
            for (r, c) in acc.iter_mut().enumerate() {
                let a = T::ld_shared(a_tile + ((ty + r as u32 * rpp) * TILE + kk) * T::BYTES);
                *c = T::fma(a, b, *c);
            }
        }
        sync_threads();
        k0 += TILE;
    }
    for (r, c) in acc.iter().enumerate() {
        let row = row0 + ty + r as u32 * rpp;
        if row < g.m && col < g.n {
            store_c(g.c, row, col, g.ldc, *c, g.alpha, g.beta);
        }
    }
}
