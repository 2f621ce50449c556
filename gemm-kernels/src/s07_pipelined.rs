//! Stage 7, pipelining and warp tiling: the shared-memory tiles are filled by
//! `cp.async` (global to shared memory without passing through registers)
//! into STAGES buffers, so the copies of the next tiles overlap the
//! arithmetic on the current one; the block tile is split into warp tiles.
//!
//! # Shapes
//! A m x k (lda), B k x n (ldb), C m x n (ldc); row-major, in elements.
//!
//! # Launch
//! 1D block of (BM / WM) * (BN / WN) warps, grid (ceil(n / BN), ceil(m / BM)),
//! STAGES buffers of the layout `gemm_core::tiling::s07_layout` (A row-major
//! `[BM][BK + V]`, B `[BK][BN]`) (`KernelConfig::Pipelined`).
//!
//! # Pipeline
//! STAGES - 1 tiles are requested before the loop; at step kt the thread waits
//! for its copies of tile kt (`cp.async.wait_group STAGES - 2`), the block
//! meets at one barrier (after which every thread's copies of tile kt are
//! visible, and every thread has finished computing tile kt - 1), tile
//! kt + STAGES - 1 is requested into the buffer tile kt - 1 used, and tile kt
//! is computed. One barrier per step.
//!
//! # Thread mapping
//! Warp w computes the WM x WN warp tile at (w / (BN / WN), w % (BN / WN)).
//! Its 32 lanes form an LM x LN grid (LN = WN / TN, LM = 32 / LN); lane (lr, lc)
//! owns rows `lr + i * LM` (i < TM) and column vectors `lc * V + w' * LN * V`
//! (w' < TN / V). Per V steps of k a thread reads, for each of its rows, V
//! consecutive k elements of A (a 16-byte read; the LM rows a warp reads at
//! once fall in distinct bank groups because the padded row stride is an odd
//! number of 16-byte units) and V rows of TN elements of B (16-byte reads, LN
//! consecutive vectors); then TM * TN * V fma.
//!
//! # Fringe
//! With 16-byte aligned rows (`thread::vector_ok`) a vector wholly inside the
//! matrix is one 16-byte cp.async. Rows of A past m and column chunks of B
//! past n are copied from inside the matrix instead (they only feed C
//! elements that are never stored), so edge blocks run at full speed; past k
//! the tiles are zero-filled. A vector that straddles the edge, or rows that
//! are not 16-byte aligned, are copied element by element (4 or 8 bytes) with
//! zeros outside. The epilogue is `thread::store_c_vec`.
//!
//! # Source
//! Seed 004 ("next steps": double buffering), seed 001 (prefetching, ILP);
//! PTX ISA, "Data movement: cp.async", "cp.async.wait_group".

use crate::element::Element;
use crate::thread::{
    block_idx, cp_async_16, cp_async_commit, cp_async_wait, smem_base, store_c_vec, sync_threads, thread_idx,
    vector_ok, GemmArgs,
};
use gemm_core::ceil_div;
use gemm_core::tiling::{block_tile_origin, s07_layout, BlockTile, SmemLayout, WARP_SIZE};

/// Requests a `rows x cols` tile of a row-major matrix (top-left element
/// (row0, col0), `ld`; the matrix has `rows_max x cols_max` elements, at
/// least one) into shared memory at `dst` with row stride `dst_ld`, as
/// 16-byte cp.async copies spread over `threads` threads. `cols` must be a
/// multiple of V.
///
/// Outside the matrix: along a dimension that is `free` (m for A, n for B) a
/// row or a whole 16-byte column chunk is copied from inside the matrix
/// instead (row `rows_max - 1`, chunk 0): those values only reach rows or
/// columns of C that are never stored, and the copy stays a full-speed
/// 16-byte cp.async. Along k (not free) the tile is zero-filled, since every
/// C element sums over k. Tiles wholly inside take a fast path without
/// bounds checks.
///
/// # Safety
/// `p` points to the matrix; `dst` is a 16-byte aligned shared address with
/// room for the tile; `vec` is `vector_ok(p, ld)`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn copy_tile_async<T: Element>(
    p: *const T,
    vec: bool,
    ld: u32,
    (row0, col0): (u32, u32),
    (rows_max, cols_max): (u32, u32),
    (rows, cols): (u32, u32),
    (rows_free, cols_free): (bool, bool),
    dst: u32,
    dst_ld: u32,
    (tid, threads): (u32, u32),
) {
    let v = T::VEC as u32;
    let chunks = rows * cols / v;
    let per_row = cols / v; // 16-byte chunks per tile row

    // Interior tiles (the block-uniform common case): every chunk is a whole
    // aligned vector inside the matrix, so each thread walks its chunks with
    // one pointer and a constant stride, without per-chunk bounds checks.
    let interior = vec && row0 + rows <= rows_max && col0 + cols <= cols_max;
    if interior && threads % per_row == 0 && chunks % threads == 0 {
        let rows_per_pass = threads / per_row;
        let (r, cc) = (tid / per_row, tid % per_row * v);
        let src = p.add((row0 + r) as usize * ld as usize + (col0 + cc) as usize);
        let d = dst + (r * dst_ld + cc) * T::BYTES;
        for i in 0..chunks / threads {
            let step = i * rows_per_pass;
            cp_async_16(d + step * dst_ld * T::BYTES, src.add(step as usize * ld as usize) as *const u8);
        }
        return;
    }
    for i in 0..ceil_div(chunks, threads) {
        let c = tid + i * threads;
        if c >= chunks {
            continue;
        }
        let (r, cc) = (c / per_row, c % per_row * v);
        let d = dst + (r * dst_ld + cc) * T::BYTES;
        let (mut row, mut col) = (row0 + r, col0 + cc);
        if row >= rows_max && rows_free {
            row = rows_max - 1;
        }
        if col >= cols_max && cols_free && vec && v <= cols_max {
            col = 0;
        }
        let inside = if row < rows_max && col < cols_max { (cols_max - col).min(v) } else { 0 };
        if vec && inside == v {
            cp_async_16(d, p.add(row as usize * ld as usize + col as usize) as *const u8);
        } else {
            // The fringe: element copies inside the matrix, zeros outside
            // (plain stores, visible to the block after the barrier that
            // precedes this buffer's use). No read ever leaves the matrix:
            // a 16-byte copy with a shorter `src-size` would be flagged by
            // compute-sanitizer at the end of an allocation.
            for e in 0..v {
                if e < inside {
                    T::cp_async_elem(d + e * T::BYTES, p.add(row as usize * ld as usize + (col + e) as usize));
                } else {
                    T::st_shared(d + e * T::BYTES, T::ZERO);
                }
            }
        }
    }
}

/// Requests tile `kt` (k from kt * BK) of A and B into the pipeline buffer at
/// shared address `stage`.
///
/// # Safety
/// As [`copy_tile_async`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn request_tiles<T: Element>(
    g: &GemmArgs<T>,
    (a_vec, b_vec): (bool, bool),
    tile: BlockTile,
    layout: SmemLayout,
    (row0, col0): (u32, u32),
    kt: u32,
    stage: u32,
    (tid, threads): (u32, u32),
) {
    let k0 = kt * tile.bk;
    let (a_shape, b_shape) = ((tile.bm, tile.bk), (tile.bk, tile.bn));
    // A's rows (m) and B's columns (n) may be clamped; k is zero-filled.
    copy_tile_async(
        g.a,
        a_vec,
        g.lda,
        (row0, k0),
        (g.m, g.k),
        a_shape,
        (true, false),
        stage,
        layout.a_ld,
        (tid, threads),
    );
    let b_dst = stage + layout.b_offset * T::BYTES;
    copy_tile_async(
        g.b,
        b_vec,
        g.ldb,
        (k0, col0),
        (g.k, g.n),
        b_shape,
        (false, true),
        b_dst,
        layout.b_ld,
        (tid, threads),
    );
}

/// Stage 7 (see the module docs).
///
/// # Safety
/// Launched with the geometry of `KernelConfig::Pipelined` for these
/// constants on an sm_80 or newer GPU, on device pointers to matrices of the
/// shapes in `g`.
#[inline(always)]
pub unsafe fn pipelined<
    T: Element,
    const BM: u32,
    const BN: u32,
    const BK: u32,
    const WM: u32,
    const WN: u32,
    const TM: usize,
    const TN: usize,
    const STAGES: u32,
>(
    g: GemmArgs<T>,
) {
    const { assert!(BM % WM == 0 && BN % WN == 0 && STAGES >= 2, "warp tiles must divide the block tile") };
    const { assert!((WM / TM as u32) * (WN / TN as u32) == WARP_SIZE, "a warp tile must hold 32 thread tiles") };
    let v = T::VEC as u32;
    let tile = BlockTile::new(BM, BN, BK);
    let layout = s07_layout(tile, T::BYTES);
    let stage_bytes = layout.stage_elems * T::BYTES;
    let threads = (BM / WM) * (BN / WN) * WARP_SIZE;
    let tid = thread_idx()[0];
    let (warp, lane) = (tid / WARP_SIZE, tid % WARP_SIZE);
    let (wr, wc) = (warp / (BN / WN), warp % (BN / WN));
    let lanes_n = WN / TN as u32;
    let lanes_m = WARP_SIZE / lanes_n;
    let (lr, lc) = (lane / lanes_n, lane % lanes_n);
    let (row0, col0) = block_tile_origin(block_idx(), tile);
    let vecs = (vector_ok(g.a, g.lda), vector_ok(g.b, g.ldb));
    let base = smem_base();
    // Row (within the block tile) of the thread's i-th row, column of its w-th vector.
    let tile_row = |i: u32| wr * WM + lr + i * lanes_m;
    let tile_col = |w: u32| wc * WN + w * lanes_n * v + lc * v;

    let k_tiles = ceil_div(g.k, BK);
    for s in 0..STAGES - 1 {
        if s < k_tiles {
            request_tiles(&g, vecs, tile, layout, (row0, col0), s, base + s * stage_bytes, (tid, threads));
        }
        cp_async_commit(); // empty groups keep the count of groups uniform
    }
    let mut acc = [[T::ZERO; TN]; TM];
    let (mut read, mut write) = (0, STAGES - 1); // buffer of tile kt, of tile kt + STAGES - 1
    for kt in 0..k_tiles {
        cp_async_wait(STAGES - 2);
        sync_threads();
        if kt + STAGES - 1 < k_tiles {
            request_tiles(
                &g,
                vecs,
                tile,
                layout,
                (row0, col0),
                kt + STAGES - 1,
                base + write * stage_bytes,
                (tid, threads),
            );
        }
        cp_async_commit();
        let a_tile = base + read * stage_bytes;
        let b_tile = a_tile + layout.b_offset * T::BYTES;
        for kv in 0..BK / v {
            let mut a = [[T::ZERO; 4]; TM]; // a[i][e] = A(row i, k = kv * V + e)
            for (i, ai) in a.iter_mut().enumerate() {
                T::ld_shared_vec(a_tile + (tile_row(i as u32) * layout.a_ld + kv * v) * T::BYTES, ai);
            }
            for e in 0..T::VEC {
                let kk = kv * v + e as u32;
                let mut b = [T::ZERO; TN];
                for w in 0..TN as u32 / v {
                    let mut x = [T::ZERO; 4];
                    T::ld_shared_vec(b_tile + (kk * layout.b_ld + tile_col(w)) * T::BYTES, &mut x);
                    b[(w * v) as usize..][..T::VEC].copy_from_slice(&x[..T::VEC]);
                }
                for i in 0..TM {
                    for j in 0..TN {
                        acc[i][j] = T::fma(a[i][e], b[j], acc[i][j]);
                    }
                }
            }
        }
        read = if read + 1 == STAGES { 0 } else { read + 1 };
        write = if write + 1 == STAGES { 0 } else { write + 1 };
    }
    let c_vec = vector_ok(g.c as *const T, g.ldc);
    for (i, acc_row) in acc.iter().enumerate() {
        let row = row0 + tile_row(i as u32);
        for w in 0..TN as u32 / v {
            let j = (w * v) as usize;
            let mut x = [T::ZERO; 4];
            x[..T::VEC].copy_from_slice(&acc_row[j..j + T::VEC]);
            store_c_vec(&g, c_vec, row, col0 + tile_col(w), &x);
        }
    }
}
