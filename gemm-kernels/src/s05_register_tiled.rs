//! Stage 5, 2D register tiling: `C <- alpha * A * B + beta * C` with a
//! BM x BN x BK block tile in shared memory and a TM x TN tile of C per thread
//! in registers.
//!
//! # Shapes
//! A m x k (lda), B k x n (ldb), C m x n (ldc), in elements; C row-major,
//! A and B row- or column-major (`A_COL`, `B_COL`; `crate::A_COL_MAJOR`).
//!
//! # Launch
//! 1D block of (BM / TM) * (BN / TN) threads, grid (ceil(n / BN), ceil(m / BM)),
//! `(BM * BK + BK * BN) * size_of::<T>()` bytes of dynamic shared memory
//! (`KernelConfig::RegisterTiled`, layout `gemm_core::tiling::s05_layout`).
//!
//! # Thread mapping
//! Block (bx, by) owns the BM x BN tile of C at rows by*BM.., columns bx*BN...
//! Thread `tid` sits at (ty, tx) = (tid / (BN / TN), tid % (BN / TN)) and owns
//! the contiguous TM x TN tile at rows ty*TM.., columns tx*TN... Per step of
//! BK the block copies the A tile (row-major `[BM][BK]`) and the B tile
//! (`[BK][BN]`) element by element, consecutive threads on consecutive
//! addresses of the operand (along k for a row-major A, along m for a
//! column-major one; likewise for B); then, for each kk, each thread reads a column of TM elements of
//! A and a row of TN elements of B into registers and adds their outer product
//! (TM * TN fma for TM + TN shared loads: stage 4 had one load per fma).
//!
//! What is left for stage 6: the A column is read with a row stride of BK
//! elements (bank conflicts), the B row with a stride of TN between threads
//! (bank conflicts), and every global access moves one element.
//!
//! # Source
//! "Optimizing matrix multiplication on an RTX 3050" (2D block tiling: TM, TN, BK, per-thread register accumulators),
//! Volkov, "Optimizing GPU codes" (registers as the working set, ILP over occupancy).

use crate::element::Element;
use crate::thread::{load_or_zero, smem_base, store_c, sync_threads, thread_idx, GemmArgs};
use gemm_core::ceil_div;
use gemm_core::tiling::{block_tile_origin, s05_layout, BlockTile};

/// Stage 5 (see the module docs).
///
/// # Safety
/// Launched with the geometry of `KernelConfig::RegisterTiled` for these
/// constants, on device pointers to matrices of the shapes in `g`.
#[inline(always)]
pub unsafe fn register_tiled<
    T: Element,
    const BM: u32,
    const BN: u32,
    const BK: u32,
    const TM: usize,
    const TN: usize,
    const A_COL: bool,
    const B_COL: bool,
>(
    g: GemmArgs<T>,
) {
    const { assert!(BM % TM as u32 == 0 && BN % TN as u32 == 0, "the thread tile must divide the block tile") };
    let lanes_n = BN / TN as u32;
    let threads = (BM / TM as u32) * lanes_n;
    let tid = thread_idx()[0];
    let (ty, tx) = (tid / lanes_n, tid % lanes_n);
    let (row0, col0) = block_tile_origin(g.block, BlockTile::new(BM, BN, BK));
    let layout = s05_layout(BlockTile::new(BM, BN, BK));
    let a_tile = smem_base();
    let b_tile = a_tile + layout.b_offset * T::BYTES;

    let mut acc = [[T::ZERO; TN]; TM];
    let mut k0 = 0;
    while k0 < g.k {
        // Constant trip counts, so the copies unroll; the guard covers tiles
        // that are not a multiple of the thread count. Consecutive threads
        // take consecutive elements along the operand's contiguous dimension
        // (coalesced for either layout).
        for i in 0..ceil_div(BM * BK, threads) {
            let e = tid + i * threads;
            if e < BM * BK {
                let (r, c) = if A_COL { (e % BM, e / BM) } else { (e / BK, e % BK) };
                let v = load_or_zero::<T, A_COL>(g.a, row0 + r, k0 + c, g.m, g.k, g.lda);
                T::st_shared(a_tile + (r * layout.a_ld + c) * T::BYTES, v);
            }
        }
        for i in 0..ceil_div(BK * BN, threads) {
            let e = tid + i * threads;
            if e < BK * BN {
                let (r, c) = if B_COL { (e % BK, e / BK) } else { (e / BN, e % BN) };
                let v = load_or_zero::<T, B_COL>(g.b, k0 + r, col0 + c, g.k, g.n, g.ldb);
                T::st_shared(b_tile + (r * layout.b_ld + c) * T::BYTES, v);
            }
        }
        sync_threads();
        for kk in 0..BK {
            let mut a = [T::ZERO; TM];
            for (i, v) in a.iter_mut().enumerate() {
                *v = T::ld_shared(a_tile + ((ty * TM as u32 + i as u32) * layout.a_ld + kk) * T::BYTES);
            }
            let mut b = [T::ZERO; TN];
            for (j, v) in b.iter_mut().enumerate() {
                *v = T::ld_shared(b_tile + (kk * layout.b_ld + tx * TN as u32 + j as u32) * T::BYTES);
            }
            for i in 0..TM {
                for j in 0..TN {
                    acc[i][j] = T::fma(a[i], b[j], acc[i][j]);
                }
            }
        }
        sync_threads();
        k0 += BK;
    }
    for (i, acc_row) in acc.iter().enumerate() {
        let row = row0 + ty * TM as u32 + i as u32;
        for (j, &v) in acc_row.iter().enumerate() {
            let col = col0 + tx * TN as u32 + j as u32;
            if row < g.m && col < g.n {
                store_c(g.c, row, col, g.ldc, v, g.alpha, g.beta);
            }
        }
    }
}
