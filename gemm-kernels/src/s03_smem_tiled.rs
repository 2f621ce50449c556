//! Stage 3, shared-memory tiling: `C <- alpha * A * B + beta * C` with square
//! T x T tiles of A and B staged in shared memory.
//!
//! # Shapes
//! A m x k (lda), B k x n (ldb), C m x n (ldc); row-major, in elements.
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
//! traffic per fma falls by T (seed 003's CGMA ratio). In the inner loop all
//! lanes of a warp read the same A element (broadcast) and consecutive B
//! elements: no bank conflicts.
//!
//! # Source
//! Seed 000 (section 3.1: tiling, coalesced loads, two barriers per step),
//! seed 003 (tiled kernel for rectangular matrices).

use crate::element::Element;
use crate::thread::{block_idx, load_or_zero, smem_base, store_c, sync_threads, thread_idx, GemmArgs};
use gemm_core::config::{tile_origin, SMEM_TILE_SIZES};

/// Stage 3 (see the module docs).
///
/// # Safety
/// As [`crate::s01_naive::naive`]; launched with T x T threads and at least
/// `2 * T * T * size_of::<T>()` bytes of dynamic shared memory.
#[inline(always)]
pub unsafe fn smem_tiled<T: Element, const TILE: u32>(g: GemmArgs<T>) {
    const {
        assert!(
            TILE == SMEM_TILE_SIZES[0] || TILE == SMEM_TILE_SIZES[1] || TILE == SMEM_TILE_SIZES[2],
            "stage 3 tile size must be one of SMEM_TILE_SIZES"
        )
    };
    let [tx, ty] = thread_idx();
    let (row0, col0) = tile_origin(block_idx(), TILE);
    let (row, col) = (row0 + ty, col0 + tx);
    let a_tile = smem_base(); // (T, T) of A, row-major: [row][k]
    let b_tile = a_tile + TILE * TILE * T::BYTES; // (T, T) of B, row-major: [k][col]
    let mine = (ty * TILE + tx) * T::BYTES;

    let mut acc = T::ZERO;
    let mut k0 = 0;
    while k0 < g.k {
        T::st_shared(a_tile + mine, load_or_zero(g.a, row, k0 + tx, g.m, g.k, g.lda));
        T::st_shared(b_tile + mine, load_or_zero(g.b, k0 + ty, col, g.k, g.n, g.ldb));
        sync_threads();
        for kk in 0..TILE {
            let a = T::ld_shared(a_tile + (ty * TILE + kk) * T::BYTES);
            let b = T::ld_shared(b_tile + (kk * TILE + tx) * T::BYTES);
            acc = T::fma(a, b, acc);
        }
        sync_threads();
        k0 += TILE;
    }
    if row < g.m && col < g.n {
        store_c(g.c, row, col, g.ldc, acc, g.alpha, g.beta);
    }
}
