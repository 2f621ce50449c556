//! Stage 7, pipelining and warp tiling: the shared-memory tiles are filled by
//! `cp.async` (global to shared memory without passing through registers)
//! into DEPTH buffers (the pipeline depth), so the copies of the next tiles overlap the
//! arithmetic on the current one; the block tile is split into warp tiles.
//!
//! # Shapes
//! A m x k (lda), B k x n (ldb), C m x n (ldc), in elements; C row-major,
//! A and B row- or column-major (`A_COL`, `B_COL`; `crate::A_COL_MAJOR`).
//!
//! # Launch
//! 1D block of (BM / WM) * (BN / WN) warps, grid (ceil(n / BN), ceil(m / BM)),
//! DEPTH buffers of the layout `gemm_core::tiling::s07_layout`: each tile in
//! its operand's storage order (A row-major `[BM][BK + V]` or column-major
//! `[BK][BM]`; B row-major `[BK][BN]` or column-major `[BN][BK + V]`)
//! (`KernelConfig::Pipelined`).
//!
//! # Pipeline
//! DEPTH - 1 tiles are requested before the loop; at step kt the thread waits
//! for its copies of tile kt (`cp.async.wait_group DEPTH - 2`), the block
//! meets at one barrier (after which every thread's copies of tile kt are
//! visible, and every thread has finished computing tile kt - 1), tile
//! kt + DEPTH - 1 is requested into the buffer tile kt - 1 used, and tile kt
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
//! Other layouts swap the roles: a tile whose lines run along k (row-major
//! A, column-major B) is read in 16-byte vectors along k by interleaved rows
//! (columns) `lane + i * LM` (odd 16-byte line stride: no bank conflicts); a
//! tile whose lines run along m or n (column-major A, row-major B) is read in
//! 16-byte vectors along m or n by rows (columns) in groups of V,
//! consecutive lanes on consecutive vectors. Either way a thread issues TM
//! and TN 16-byte reads per V steps of k. With a column-major B the thread's
//! columns are interleaved, so C is stored element by element.
//!
//! # Fringe
//! Every tile, interior, edge, the k tail or past the last, is copied by
//! one straight-line run of cp.async with a source size
//! ([`copy_tile_zfill`], which stage 8 introduced; "Copies" in
//! `s08_tensor_core` says why): a chunk inside the matrix is copied, any
//! other zero-filled, with no branch, so ptxas interleaves the copies with
//! the fma. The chunks are 16 bytes when both operands come in them
//! (16-byte aligned rows, `thread::vector_ok`, of a length that is a
//! multiple of V), else one element (4 or 8 bytes), which any matrix
//! allows. Each kernel holds both main loops and picks one per launch. The
//! epilogue is `thread::store_c_vec`.
//!
//! # Source
//! "Optimizing matrix multiplication on an RTX 3050" ("next steps": double buffering), Volkov, "Optimizing GPU codes" (prefetching, ILP);
//! PTX ISA, "Data movement: cp.async", "cp.async.wait_group".

use crate::element::Element;
use crate::fusion::fuse_in_place;
use crate::thread::{
    cp_async_16, cp_async_16_zfill, cp_async_commit, cp_async_wait, opaque_u32, smem_base, store_c, store_c_vec,
    sync_threads, thread_idx, vector_ok, GemmArgs,
};
use gemm_core::ceil_div;
use gemm_core::shape::{KernelLayouts, Layout};
use gemm_core::tiling::{block_tile_origin, s07_layout, BlockTile, SmemLayout, WARP_SIZE};
use gemm_core::warpgroup::Fusion;

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
/// C element sums over k. Tiles with k wholly inside (interior tiles, and
/// edge tiles of m and n whose column chunks cannot straddle the edge) take
/// a fast path without bounds checks.
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

    // Interior tiles and the edge tiles of the free dimensions (the last
    // block row or column of C), with k wholly inside: each thread walks its
    // chunks at a constant row stride, with no per-chunk bounds checks but a
    // `min` on the row (one 16-byte copy per chunk when the matrix allows
    // vectors; for f64 without them, an odd leading dimension or an
    // unaligned view, two 8-byte copies). In an edge tile, rows past the
    // matrix are read from its last row and whole column chunks past it from
    // chunk 0 (those values reach only C elements that are never stored),
    // which needs no chunk to straddle the column edge (`cols_max` a
    // multiple of V). Before edge tiles took this loop, every tile of an
    // edge block took the fringe path below, and with one wave of blocks
    // (1000^3) the edge blocks set the kernel's time: 1.5x that of 1024^3 on
    // the same grid (H200, 2026-11-23). (f32 without vectors keeps the
    // fringe path: this loop for it raised the 256-thread stage-7 kernels
    // past 128 registers, one block per SM.)
    let copies = vec || T::BYTES == 8;
    let even = threads % per_row == 0 && chunks % threads == 0;
    let rows_ok = rows_free || row0 + rows <= rows_max;
    let cols_ok = col0 + cols <= cols_max || (cols_free && cols_max % v == 0);
    if copies && even && rows_ok && cols_ok {
        let rows_per_pass = threads / per_row;
        let (r, cc) = (tid / per_row, tid % per_row * v);
        let col = if col0 + cc < cols_max { col0 + cc } else { 0 };
        let d = dst + (r * dst_ld + cc) * T::BYTES;
        for i in 0..chunks / threads {
            let step = i * rows_per_pass;
            let row = (row0 + r + step).min(rows_max - 1);
            copy_chunk::<T>(vec, d + step * dst_ld * T::BYTES, p.add(row as usize * ld as usize + col as usize));
        }
        return;
    }
    // The fringe path. Its per-chunk indices do not change along k, so the
    // compiler would compute them once, before the k loop, and keep them all
    // in registers across it for the rare tile that needs them (ptxas then
    // spilled stage 8's accumulators); an opaque `tid` keeps them here.
    let tid = opaque_u32(tid);
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

/// One chunk of V elements from global `src` to shared `dst`: one 16-byte
/// cp.async when the matrix allows vectors (`vec`), else V element copies.
///
/// # Safety
/// As [`copy_tile_async`]; the V elements at `src` lie inside the matrix.
#[inline(always)]
unsafe fn copy_chunk<T: Element>(vec: bool, dst: u32, src: *const T) {
    if vec {
        cp_async_16(dst, src as *const u8);
    } else {
        for e in 0..T::VEC as u32 {
            T::cp_async_elem(dst + e * T::BYTES, src.add(e as usize));
        }
    }
}

/// The branch-free form of [`copy_tile_async`]: every tile, interior, edge
/// or past the last k tile, takes one straight-line sequence of cp.async
/// copies with a source size (`src-size`): a chunk wholly inside the matrix
/// is copied, any other zero-filled, read with source size 0 from an address
/// inside the matrix (nothing outside it is ever addressed). `live` false
/// zero-fills the whole tile: a request past the last k tile costs no
/// branch either.
///
/// A chunk is 16 bytes (V elements) when `WIDE`, which needs 16-byte rows
/// ([`vector_ok`]) whose length `cols_max` is a multiple of V, so that no
/// chunk straddles the edge ([`zfill_vec`]); else one element (4 or 8
/// bytes), which any matrix allows (odd leading dimensions, unaligned
/// views). Either way the thread count must divide the tile's chunks and be
/// a multiple of its chunks per row ([`zfill_even`]; the caller checks it at
/// compile time).
///
/// With no branch in it, the copies share a basic block with the mma (or
/// fma) around them, and ptxas interleaves the two, as cuBLAS's kernels do
/// (why it matters: "Copies" in `s08_tensor_core`).
///
/// A thread's chunks share one column chunk and step down the rows
/// `threads / per_row` apart, so it walks one pointer down them (as
/// cuBLAS's kernels do) rather than computing each chunk's address: the
/// pointer changes every tile, so ptxas cannot hoist per-chunk addresses out
/// of the loop (it did, 16 registers, and spilled). Past the matrix's last
/// row the pointer stops advancing and the copies zero-fill.
///
/// # Safety
/// As [`copy_tile_async`], and the matrix has at least one element.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn copy_tile_zfill<T: Element, const WIDE: bool>(
    p: *const T,
    ld: u32,
    (row0, col0): (u32, u32),
    (rows_max, cols_max): (u32, u32),
    (rows, cols): (u32, u32),
    live: bool,
    dst: u32,
    dst_ld: u32,
    (tid, threads): (u32, u32),
) {
    let w = if WIDE { T::VEC as u32 } else { 1 }; // elements per chunk
    let bytes = T::BYTES;
    let per_row = cols / w;
    let rows_per_pass = threads / per_row;
    let per_thread = rows * cols / w / threads;
    let (r, cc) = (tid / per_row, tid % per_row * w);
    let (row, col) = (row0 + r, col0 + cc);
    // How many of the thread's chunks lie inside the matrix: rows row, row +
    // rows_per_pass, ... below rows_max, in a column chunk inside it.
    let inside = if !live || col >= cols_max || row >= rows_max {
        0
    } else {
        ((rows_max - row + rows_per_pass - 1) / rows_per_pass).min(per_thread)
    };
    let mut src = p.add(row.min(rows_max - 1) as usize * ld as usize + if col < cols_max { col as usize } else { 0 });
    let stride = rows_per_pass as usize * ld as usize;
    let d = dst + (r * dst_ld + cc) * bytes;
    for i in 0..per_thread {
        let di = d + i * rows_per_pass * dst_ld * bytes;
        if WIDE {
            cp_async_16_zfill(di, src as *const u8, if i < inside { 16 } else { 0 });
        } else {
            T::cp_async_elem_zfill(di, src, if i < inside { bytes } else { 0 });
        }
        if i + 1 < per_thread {
            src = src.add(if i + 1 < inside { stride } else { 0 });
        }
    }
}

/// Requests tile `kt` of A and B as [`request_tiles`] does, through
/// [`copy_tile_zfill`] (no branch; `live` false zero-fills the buffer
/// instead), in 16-byte chunks when `WIDE` (both operands must pass
/// [`zfill_vec`]), else element by element.
///
/// # Safety
/// As [`copy_tile_zfill`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn request_tiles_zfill<T: Element, const A_COL: bool, const B_COL: bool, const WIDE: bool>(
    g: &GemmArgs<T>,
    tile: BlockTile,
    layout: SmemLayout,
    (row0, col0): (u32, u32),
    kt: u32,
    live: bool,
    stage: u32,
    (tid, threads): (u32, u32),
) {
    let k0 = kt * tile.bk;
    copy_tile_zfill::<T, WIDE>(
        g.a,
        g.lda,
        stored::<A_COL, _>((row0, k0)),
        stored::<A_COL, _>((g.m, g.k)),
        stored::<A_COL, _>((tile.bm, tile.bk)),
        live,
        stage,
        layout.a_ld,
        (tid, threads),
    );
    copy_tile_zfill::<T, WIDE>(
        g.b,
        g.ldb,
        stored::<B_COL, _>((k0, col0)),
        stored::<B_COL, _>((g.k, g.n)),
        stored::<B_COL, _>((tile.bk, tile.bn)),
        live,
        stage + layout.b_offset * T::BYTES,
        layout.b_ld,
        (tid, threads),
    );
}

/// Whether [`copy_tile_zfill`] may copy a matrix (`rows x cols`, in
/// elements, as stored: `COL` swaps them) in 16-byte chunks: 16-byte rows
/// ([`vector_ok`]) of a length that is a multiple of V.
#[inline(always)]
pub(crate) fn zfill_vec<T: Element, const COL: bool>(p: *const T, ld: u32, (rows, cols): (u32, u32)) -> bool {
    let line = stored::<COL, _>((rows, cols)).1;
    vector_ok(p, ld) && line % T::VEC as u32 == 0
}

/// Whether a tile of `rows x cols` (as stored) splits evenly over `threads`
/// for [`copy_tile_zfill`] in chunks of `w` elements: the thread count
/// divides its chunks and is a multiple of the chunks per row.
const fn zfill_even(rows: u32, cols: u32, w: u32, threads: u32) -> bool {
    let per_row = cols / w;
    cols % w == 0 && threads % per_row == 0 && (rows * per_row) % threads == 0
}

/// Whether both tiles of a block tile BM x BN x BK, each in its operand's
/// storage order (`A_COL`, `B_COL`: A as BM lines of BK or BK lines of BM, B
/// as BK lines of BN or BN lines of BK), split evenly over `threads` for
/// [`copy_tile_zfill`] in chunks of `w` elements ([`zfill_even`]).
pub(crate) const fn tiles_zfill_even<const A_COL: bool, const B_COL: bool>(
    (bm, bn, bk): (u32, u32, u32),
    w: u32,
    threads: u32,
) -> bool {
    let (a_rows, a_cols) = if A_COL { (bk, bm) } else { (bm, bk) };
    let (b_rows, b_cols) = if B_COL { (bn, bk) } else { (bk, bn) };
    zfill_even(a_rows, a_cols, w, threads) && zfill_even(b_rows, b_cols, w, threads)
}

/// Requests tile `kt` (k from kt * BK) of A and B into the pipeline buffer at
/// shared address `stage`, each in its storage order (`A_COL`, `B_COL`; the
/// shared layouts of `s07_layout` / `s08_layout`): a row-major A as BM lines
/// of BK, a column-major A as BK lines of BM; a row-major B as BK lines of
/// BN, a column-major B as BN lines of BK.
///
/// # Safety
/// As [`copy_tile_async`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn request_tiles<T: Element, const A_COL: bool, const B_COL: bool>(
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
    // In each operand's storage order; A's rows (m) and B's columns (n) may
    // be clamped, k is zero-filled.
    copy_tile_async(
        g.a,
        a_vec,
        g.lda,
        stored::<A_COL, _>((row0, k0)),
        stored::<A_COL, _>((g.m, g.k)),
        stored::<A_COL, _>((tile.bm, tile.bk)),
        stored::<A_COL, _>((true, false)),
        stage,
        layout.a_ld,
        (tid, threads),
    );
    copy_tile_async(
        g.b,
        b_vec,
        g.ldb,
        stored::<B_COL, _>((k0, col0)),
        stored::<B_COL, _>((g.k, g.n)),
        stored::<B_COL, _>((tile.bk, tile.bn)),
        stored::<B_COL, _>((false, true)),
        stage + layout.b_offset * T::BYTES,
        layout.b_ld,
        (tid, threads),
    );
}

/// A (row, column) pair of a matrix in its storage order: (line, position
/// in the line), i.e. swapped for a column-major matrix (`COL`).
#[inline(always)]
fn stored<const COL: bool, X>((row, col): (X, X)) -> (X, X) {
    if COL {
        (col, row)
    } else {
        (row, col)
    }
}

/// Stage 7 (see the module docs); `FUSED`: C stored through the fused
/// epilogue at `fusion` ([`fuse_in_place`]; the plain kernels pass null).
///
/// # Safety
/// Launched with the geometry of `KernelConfig::Pipelined` for these
/// constants on an sm_80 or newer GPU, on device pointers to matrices of the
/// shapes in `g`; with `FUSED`, `fusion` as [`fuse_in_place`] needs.
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
    const DEPTH: u32,
    const A_COL: bool,
    const B_COL: bool,
    const FUSED: bool,
>(
    g: GemmArgs<T>,
    fusion: *const Fusion,
) {
    // As stage 8 ("Copies" in `s08_tensor_core`): branch-free copies, which
    // ptxas interleaves with the fma, in 16-byte chunks when both operands
    // come in them, else element by element (odd leading dimensions,
    // unaligned views). One main loop per launch.
    const {
        assert!(
            tiles_zfill_even::<A_COL, B_COL>((BM, BN, BK), 1, (BM / WM) * (BN / WN) * WARP_SIZE),
            "the block's threads must split each tile's elements evenly (copy_tile_zfill)"
        )
    };
    let threads = (BM / WM) * (BN / WN) * WARP_SIZE;
    if tiles_zfill_even::<A_COL, B_COL>((BM, BN, BK), T::VEC as u32, threads)
        && zfill_vec::<T, A_COL>(g.a, g.lda, (g.m, g.k))
        && zfill_vec::<T, B_COL>(g.b, g.ldb, (g.k, g.n))
    {
        pipelined_body::<T, BM, BN, BK, WM, WN, TM, TN, DEPTH, A_COL, B_COL, true, FUSED>(g, fusion);
    } else {
        pipelined_body::<T, BM, BN, BK, WM, WN, TM, TN, DEPTH, A_COL, B_COL, false, FUSED>(g, fusion);
    }
}

/// The kernel of [`pipelined`], its copies [`request_tiles_zfill`]'s, in
/// 16-byte chunks when `WIDE`, else element by element.
#[inline(always)]
unsafe fn pipelined_body<
    T: Element,
    const BM: u32,
    const BN: u32,
    const BK: u32,
    const WM: u32,
    const WN: u32,
    const TM: usize,
    const TN: usize,
    const DEPTH: u32,
    const A_COL: bool,
    const B_COL: bool,
    const WIDE: bool,
    const FUSED: bool,
>(
    g: GemmArgs<T>,
    fusion: *const Fusion,
) {
    const { assert!(BM % WM == 0 && BN % WN == 0 && DEPTH >= 2, "warp tiles must divide the block tile") };
    const { assert!((WM / TM as u32) * (WN / TN as u32) == WARP_SIZE, "a warp tile must hold 32 thread tiles") };
    let v = T::VEC as u32;
    let tile = BlockTile::new(BM, BN, BK);
    let layouts = KernelLayouts {
        a: if A_COL { Layout::ColMajor } else { Layout::RowMajor },
        b: if B_COL { Layout::ColMajor } else { Layout::RowMajor },
    };
    let layout = s07_layout(tile, T::BYTES, layouts);
    let stage_bytes = layout.stage_elems * T::BYTES;
    let threads = (BM / WM) * (BN / WN) * WARP_SIZE;
    let tid = thread_idx()[0];
    let (warp, lane) = (tid / WARP_SIZE, tid % WARP_SIZE);
    let (wr, wc) = (warp / (BN / WN), warp % (BN / WN));
    let lanes_n = WN / TN as u32;
    let lanes_m = WARP_SIZE / lanes_n;
    let (lr, lc) = (lane / lanes_n, lane % lanes_n);
    let (row0, col0) = block_tile_origin(g.block, tile);
    let base = smem_base();
    // Requests tile `kt` into the buffer at `stage` (`live` false: a tile
    // past the last, zero-filled).
    let request = |kt: u32, live: bool, stage: u32, tid: u32| {
        request_tiles_zfill::<T, A_COL, B_COL, WIDE>(&g, tile, layout, (row0, col0), kt, live, stage, (tid, threads));
    };
    // Row (within the block tile) of the thread's i-th row: interleaved
    // (lr + i * LM) when A's tile is k-contiguous (16-byte reads along k),
    // in groups of V (16-byte reads along m) when it is m-contiguous.
    let tile_row = |i: u32| {
        if A_COL {
            wr * WM + (i / v) * lanes_m * v + lr * v + i % v
        } else {
            wr * WM + lr + i * lanes_m
        }
    };
    // Column of the thread's j-th column, likewise for B.
    let tile_col = |j: u32| {
        if B_COL {
            wc * WN + lc + j * lanes_n
        } else {
            wc * WN + (j / v) * lanes_n * v + lc * v + j % v
        }
    };

    let k_tiles = ceil_div(g.k, BK);
    for s in 0..DEPTH - 1 {
        if s < k_tiles {
            request(s, true, base + s * stage_bytes, tid);
        }
        cp_async_commit(); // empty groups keep the count of groups uniform
    }
    let mut acc = [[T::ZERO; TN]; TM];
    let (mut read, mut write) = (0, DEPTH - 1); // buffer of tile kt, of tile kt + DEPTH - 1
    for kt in 0..k_tiles {
        cp_async_wait(DEPTH - 2);
        sync_threads();
        // The tid is opaque, so the copies' per-thread values are
        // recomputed each step rather than held across the loop.
        request(kt + DEPTH - 1, kt + DEPTH - 1 < k_tiles, base + write * stage_bytes, opaque_u32(tid));
        cp_async_commit();
        let a_tile = base + read * stage_bytes;
        let b_tile = a_tile + layout.b_offset * T::BYTES;
        for kv in 0..BK / v {
            // k-contiguous tiles: V consecutive k of each of the thread's
            // rows (columns), one 16-byte read each.
            let mut a_k = [[T::ZERO; 4]; TM]; // a_k[i][e] = A(row i, k = kv * V + e)
            if !A_COL {
                for (i, ai) in a_k.iter_mut().enumerate() {
                    T::ld_shared_vec(a_tile + (tile_row(i as u32) * layout.a_ld + kv * v) * T::BYTES, ai);
                }
            }
            if B_COL && !A_COL {
                // Both tiles are k-contiguous: with A's V x TM block in
                // registers, one 16-byte column of B at a time, so only V
                // values of B are live (a whole V x TN block of B as well
                // cost 15 registers and, for f32, the second block per SM).
                for j in 0..TN {
                    let mut bj = [T::ZERO; 4]; // bj[e] = B(k = kv * V + e, column j)
                    T::ld_shared_vec(b_tile + (tile_col(j as u32) * layout.b_ld + kv * v) * T::BYTES, &mut bj);
                    for e in 0..T::VEC {
                        for i in 0..TM {
                            acc[i][j] = T::fma(a_k[i][e], bj[e], acc[i][j]);
                        }
                    }
                }
                continue;
            }
            let mut b_k = [[T::ZERO; 4]; TN]; // b_k[j][e] = B(k = kv * V + e, column j)
            if B_COL {
                for (j, bj) in b_k.iter_mut().enumerate() {
                    T::ld_shared_vec(b_tile + (tile_col(j as u32) * layout.b_ld + kv * v) * T::BYTES, bj);
                }
            }
            for e in 0..T::VEC {
                let kk = kv * v + e as u32;
                let mut a = [T::ZERO; TM];
                if A_COL {
                    // m-contiguous: V rows per 16-byte read at this k.
                    for u in 0..TM as u32 / v {
                        let mut x = [T::ZERO; 4];
                        T::ld_shared_vec(a_tile + (kk * layout.a_ld + tile_row(u * v)) * T::BYTES, &mut x);
                        a[(u * v) as usize..][..T::VEC].copy_from_slice(&x[..T::VEC]);
                    }
                } else {
                    for i in 0..TM {
                        a[i] = a_k[i][e];
                    }
                }
                let mut b = [T::ZERO; TN];
                if B_COL {
                    for j in 0..TN {
                        b[j] = b_k[j][e];
                    }
                } else {
                    for w in 0..TN as u32 / v {
                        let mut x = [T::ZERO; 4];
                        T::ld_shared_vec(b_tile + (kk * layout.b_ld + tile_col(w * v)) * T::BYTES, &mut x);
                        b[(w * v) as usize..][..T::VEC].copy_from_slice(&x[..T::VEC]);
                    }
                }
                for i in 0..TM {
                    for j in 0..TN {
                        acc[i][j] = T::fma(a[i], b[j], acc[i][j]);
                    }
                }
            }
        }
        read = if read + 1 == DEPTH { 0 } else { read + 1 };
        write = if write + 1 == DEPTH { 0 } else { write + 1 };
    }
    // A fused kernel's epilogue on the sums (acc[i][j] is C's (row0 +
    // tile_row(i), col0 + tile_col(j))); the stores then write them as
    // they are.
    let g = if FUSED {
        fuse_in_place(&g, fusion, acc.as_flattened_mut(), |i| {
            (row0 + tile_row((i / TN) as u32), col0 + tile_col((i % TN) as u32))
        })
    } else {
        g
    };
    let c_vec = vector_ok(g.c as *const T, g.ldc);
    for (i, acc_row) in acc.iter().enumerate() {
        let row = row0 + tile_row(i as u32);
        if B_COL {
            // Interleaved columns: one element each (lanes on consecutive columns).
            if row < g.m {
                for (j, &x) in acc_row.iter().enumerate() {
                    let col = col0 + tile_col(j as u32);
                    if col < g.n {
                        store_c(g.c, row, col, g.ldc, x, g.alpha, g.beta);
                    }
                }
            }
        } else {
            for w in 0..TN as u32 / v {
                let j = (w * v) as usize;
                let mut x = [T::ZERO; 4];
                x[..T::VEC].copy_from_slice(&acc_row[j..j + T::VEC]);
                store_c_vec(&g, c_vec, row, col0 + tile_col(w * v), &x);
            }
        }
    }
}
