//! Stage 4, several outputs per thread: 32 x 32 shared-memory tiles as in
//! stage 3, but each thread computes OUTPUTS elements of one column of C and
//! keeps them in registers, so one shared-memory read of B feeds OUTPUTS fmas.
//!
//! # Shapes
//! A m x k (lda), B k x n (ldb), C m x n (ldc); row-major, in elements.
//!
//! # Launch
//! Block T x (T / OUTPUTS) threads, grid (ceil(n / T), ceil(m / T)),
//! `2 * T * T * size_of::<T>()` bytes of dynamic shared memory
//! (`KernelConfig::OutputsPerThread`); T = 32, OUTPUTS in {1, 2, 4, 8, 16}.
//!
//! # Thread mapping
//! With R = T / OUTPUTS rows per pass (`gemm_core::config::rows_per_pass`),
//! thread (x, y) of block (bx, by) owns C(by*T + y + r*R, bx*T + x) for r in
//! 0..OUTPUTS: rows R apart, as in seed 000's listing. It also loads OUTPUTS
//! elements of each tile per step, at the same rows, with x fast (coalesced).
//!
//! Fewer threads with more work each: Volkov's "faster codes run at lower
//! occupancy" (seed 001); seed 000's table shows 1, 2, 4, 8 outputs per
//! thread at rising GFLOP/s and registers, falling occupancy.
//!
//! # Source
//! Seed 000 (section 3.2, "Inducing instruction level parallelism"),
//! seed 001 (ILP over occupancy; registers as the working set).

use crate::element::Element;
use crate::thread::{block_idx, load_or_zero, smem_base, store_c, sync_threads, thread_idx, GemmArgs};
use gemm_core::config::{rows_per_pass, tile_origin, OPT_TILE_SIZES};

/// Stage 4 (see the module docs).
///
/// # Safety
/// As [`crate::s01_naive::naive`]; launched with T x (T / OUTPUTS) threads and
/// at least `2 * T * T * size_of::<T>()` bytes of dynamic shared memory.
#[inline(always)]
pub unsafe fn outputs_per_thread<T: Element, const TILE: u32, const OUTPUTS: usize>(g: GemmArgs<T>) {
    const {
        assert!(TILE == OPT_TILE_SIZES[0], "stage 4 tiles are 32 x 32");
        assert!(OUTPUTS > 0 && TILE as usize % OUTPUTS == 0, "outputs per thread must divide the tile size");
    };
    let rpp = rows_per_pass(TILE, OUTPUTS as u32);
    let [tx, ty] = thread_idx();
    let (row0, col0) = tile_origin(block_idx(), TILE);
    let col = col0 + tx;
    let a_tile = smem_base(); // (T, T) of A, row-major: [row][k]
    let b_tile = a_tile + TILE * TILE * T::BYTES; // (T, T) of B, row-major: [k][col]

    let mut acc = [T::ZERO; OUTPUTS]; // (OUTPUTS) of C's column `col`, in registers
    let mut k0 = 0;
    while k0 < g.k {
        for r in 0..OUTPUTS as u32 {
            let tr = ty + r * rpp; // tile row this thread loads
            let slot = (tr * TILE + tx) * T::BYTES;
            T::st_shared(a_tile + slot, load_or_zero(g.a, row0 + tr, k0 + tx, g.m, g.k, g.lda));
            T::st_shared(b_tile + slot, load_or_zero(g.b, k0 + tr, col, g.k, g.n, g.ldb));
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
