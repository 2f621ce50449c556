//! Stage 8, FP64 tensor cores: DGEMM with warp-level `mma.sync` on f64
//! fragments, a cp.async pipeline of DEPTH buffers (stage 7's), padded
//! (conflict-free) shared memory, block rasterization and a 16-byte epilogue.
//!
//! # Shapes
//! A m x k (lda), B k x n (ldb), C m x n (ldc), f64, in elements; C
//! row-major, A and B row- or column-major (`A_COL`, `B_COL`).
//!
//! # Launch
//! 1D block of (BM / WM) * (BN / WN) warps, grid (ceil(n / BN), ceil(m / BM)),
//! DEPTH buffers of `gemm_core::tiling::s08_layout`, each tile in its
//! operand's storage order (A row-major `[BM][BK + 4]` or column-major
//! `[BK][BM + 8]`; B row-major `[BK][BN + 4]` or column-major `[BN][BK + 4]`),
//! then `S08_STASH_BYTES` for the epilogue's values (`KernelConfig::TensorCore`).
//!
//! # Copies
//! When both operands come in whole 16-byte chunks (16-byte aligned rows
//! whose length is a multiple of 2; `s07_pipelined::zfill_vec`), the tiles
//! are requested by `s07_pipelined::copy_tile_zfill`: one straight-line run
//! of 16-byte cp.async per thread, zero-filling with a source size of 0
//! where a chunk lies outside the matrix (edges, the k tail, tiles past the
//! last), one pointer walked down the thread's rows. With no branch around
//! them, ptxas interleaves the copies with the mma, as in cuBLAS's kernels.
//! Otherwise (an odd leading dimension, an unaligned view) stage 7's copies
//! are used, with a bounds-check-free loop for tiles with k inside and
//! element copies at the fringe. The kernel holds both main loops and picks
//! one per launch. Why: under ncu at 4096^3 (H200, 2026-11-24), with stage
//! 7's copies behind their fast-path branch, each warp issued a whole tile's
//! copies (about 150 instructions) with no mma between them, and the FP64
//! tensor pipe was busy 85% of the time against cuBLAS's 95% with the same
//! block tile (BENCHMARKS.md has the times before and after).
//!
//! # The mma tile
//! A warp computes its WM x WN warp tile as (WM / 16) x (WN / 8) tiles of
//! 16 x 8, each accumulated over k in k-groups of 8: on sm_90 one
//! `mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64`, on sm_80 the same
//! fragments fed to four `m8n8k4` (the m16n8k8 fragments are exactly those
//! of two m8n8k4 tiles in m, two in k). With g = lane / 4, t = lane % 4
//! (PTX ISA, "Matrix fragments for mma.m16n8k8" with .f64; DESIGN.md):
//! a[2j] = A(g, 4j + t), a[2j + 1] = A(g + 8, 4j + t) for j < 2;
//! b[i] = B(t + 4i, g) for i < 2; c = C(g, 2t), C(g, 2t + 1), C(g + 8, 2t),
//! C(g + 8, 2t + 1). `ldmatrix` moves 16-bit elements only, so fragments are
//! read with 8-byte `ld.shared`, at addresses that follow the tile's storage
//! order; the pads map the 32 reads of a fragment onto every bank pair
//! exactly twice, in each layout (see `s08_layout`). With a column-major A
//! a lane holds rows 2g and 2g + 1 of the mma tile instead of g and g + 8
//! (a permutation of the tile's rows, which C's rows follow): the pair is
//! adjacent in the m-contiguous tile, so each A pair is one 16-byte read.
//!
//! # Main loop: fragments in two buffers
//! The fragments of a k-group (for a 64 x 32 warp tile: 4 A fragments of 4
//! doubles, 4 B fragments of 2) are read from shared memory while the mma
//! of the previous k-group run, into the other of two fragment buffers, so
//! the mma never wait for `ld.shared` (as CUTLASS's multistage main loop).
//! The block meets once per tile of BK, after the mma of its second-to-last
//! k-group: every warp has then read all of the tile's fragments, so its
//! buffer is free, and the next tile has arrived, so the last k-group's mma
//! run while the next tile's first fragments are read. The copies of tile
//! kt + DEPTH - 1 are requested at the tile's first k-group. The k-group of 8
//! (m16n8k8) rather than 16 (m16n8k16) halves the fragments each buffer
//! holds; cuBLAS's sm_90 DGEMM kernels use the same instruction
//! (`tensor16x8x8` in their names, seen under ncu on an H200, 2026-11-22).
//!
//! Register budget: WM / 16 * WN / 8 * 4 accumulators (64 for a 64 x 32 warp
//! tile) and two buffers of WM / 16 * 4 + WN / 8 * 2 fragment doubles (24):
//! 112 doubles, 224 of the 255 registers; the shared addresses are one
//! register per operand plus constants.

//! # Rasterization
//! Block b (launch order) computes the block tile `gemm_core::tiling::raster`
//! gives: consecutive blocks walk down groups of `RASTER_GROUP` tile rows, so
//! the blocks resident at once share rows of A and columns of B in L2.
//!
//! # Source
//! PTX ISA, "Warp-level matrix multiply-accumulate instructions" (mma.m8n8k4,
//! mma.m16n8k8 with .f64), "cp.async"; CUTLASS's sm_90 FP64 default (block
//! tile 128 x 64 x 16, 2 x 2 warps of 64 x 32, pipeline depth 3) as the
//! starting point named in the project's issue, and its multistage main loop
//! (`MmaMultistage`: fragments double-buffered across k-groups, the barrier
//! before the last k-group) for the schedule.

use crate::element::Element;
use crate::fusion::fuse_in_place;
use crate::s07_pipelined::{request_tiles, request_tiles_zfill, tiles_zfill_even, zfill_vec};
use crate::thread::{
    cp_async_commit, cp_async_wait, opaque_u32, smem_base, store_c_vec, sync_threads, thread_idx, vector_ok, GemmArgs,
};
use core::arch::asm;
use gemm_core::ceil_div;
use gemm_core::shape::{KernelLayouts, Layout};
use gemm_core::tiling::{raster, s08_layout, BlockTile, RASTER_GROUP, S08_STASH_BYTES, WARP_SIZE};
use gemm_core::warpgroup::Fusion;

/// `d <- a * b + d` on one 16 x 8 x 8 f64 tile held in fragments (layout in
/// the module docs): one `mma.m16n8k8` (sm_90).
#[cfg(gemm_sm90)]
#[inline(always)]
fn mma_16x8x8(d: &mut [f64; 4], a: &[f64; 4], b: &[f64; 2]) {
    // SAFETY: a warp-collective instruction reached by all 32 lanes in
    // warp-uniform control flow (the caller's loops have constant bounds); not
    // `pure`/`nomem`, so LLVM does not merge or move it (DESIGN.md).
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {{{d0}, {d1}, {d2}, {d3}}}, \
             {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
            d0 = inout(reg64) d[0], d1 = inout(reg64) d[1], d2 = inout(reg64) d[2], d3 = inout(reg64) d[3],
            a0 = in(reg64) a[0], a1 = in(reg64) a[1], a2 = in(reg64) a[2], a3 = in(reg64) a[3],
            b0 = in(reg64) b[0], b1 = in(reg64) b[1],
            options(nostack, preserves_flags),
        );
    }
}

/// `d <- a * b + d` on one 16 x 8 x 8 f64 tile (sm_80): four `mma.m8n8k4`,
/// rows g and g + 8 for each k step of 4 (the fragments of m16n8k8 are
/// those of m8n8k4: a0 = A(g, t), b0 = B(t, g), c = C(g, 2t), C(g, 2t + 1)).
#[cfg(not(gemm_sm90))]
#[inline(always)]
fn mma_16x8x8(d: &mut [f64; 4], a: &[f64; 4], b: &[f64; 2]) {
    for j in 0..2 {
        for h in 0..2 {
            let (c0, c1) = d.split_at_mut(2 * h + 1);
            let (lo, hi) = (&mut c0[2 * h], &mut c1[0]);
            // SAFETY: as the sm_90 version.
            unsafe {
                asm!(
                    "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {{{d0}, {d1}}}, {{{a0}}}, {{{b0}}}, {{{d0}, {d1}}};",
                    d0 = inout(reg64) *lo, d1 = inout(reg64) *hi,
                    a0 = in(reg64) a[2 * j + h], b0 = in(reg64) b[j],
                    options(nostack, preserves_flags),
                );
            }
        }
    }
}

/// The fragments of one k-group (8 steps of k) of a warp tile: MT A
/// fragments of 16 x 8 and NT B fragments of 8 x 8 (layout in the module docs).
#[derive(Clone, Copy)]
struct Frags<const MT: usize, const NT: usize> {
    a: [[f64; 4]; MT],
    b: [[f64; 2]; NT],
}

impl<const MT: usize, const NT: usize> Frags<MT, NT> {
    const ZERO: Self = Self { a: [[0.0; 4]; MT], b: [[0.0; 2]; NT] };
}

/// Stage 8 (see the module docs); MT = WM / 16 and NT = WN / 8 are the
/// warp tile's mma tiles along m and n.
///
/// # Safety
/// Launched with the geometry of `KernelConfig::TensorCore` for these
/// constants on an sm_80 or newer GPU (the sm_90 PTX on sm_90), on device
/// pointers to matrices of the shapes in `g`.
#[inline(always)]
pub unsafe fn tensor_core<
    const BM: u32,
    const BN: u32,
    const BK: u32,
    const WM: u32,
    const WN: u32,
    const DEPTH: u32,
    const MT: usize,
    const NT: usize,
    const A_COL: bool,
    const B_COL: bool,
    const FUSED: bool,
>(
    g: GemmArgs<f64>,
    fusion: *const Fusion,
) {
    // Two copies of the kernel, chosen once per launch (a uniform branch; see
    // "Copies" in the module docs): the branch-free copies when both
    // operands come in whole 16-byte chunks (`zfill_vec`), stage 7's copies
    // otherwise.
    let a_vec = zfill_vec::<f64, A_COL>(g.a, g.lda, (g.m, g.k));
    let b_vec = zfill_vec::<f64, B_COL>(g.b, g.ldb, (g.k, g.n));
    if a_vec && b_vec {
        tensor_core_body::<BM, BN, BK, WM, WN, DEPTH, MT, NT, A_COL, B_COL, true, FUSED>(g, fusion);
    } else {
        tensor_core_body::<BM, BN, BK, WM, WN, DEPTH, MT, NT, A_COL, B_COL, false, FUSED>(g, fusion);
    }
}

/// The kernel of [`tensor_core`]: with `ALL_VEC` (both operands pass
/// `zfill_vec`) its copies are `request_tiles_zfill`'s, else
/// `request_tiles`'.
#[inline(always)]
unsafe fn tensor_core_body<
    const BM: u32,
    const BN: u32,
    const BK: u32,
    const WM: u32,
    const WN: u32,
    const DEPTH: u32,
    const MT: usize,
    const NT: usize,
    const A_COL: bool,
    const B_COL: bool,
    const ALL_VEC: bool,
    const FUSED: bool,
>(
    g: GemmArgs<f64>,
    fusion: *const Fusion,
) {
    const { assert!(BM % WM == 0 && BN % WN == 0 && DEPTH >= 2, "warp tiles must divide the block tile") };
    const { assert!(WM % 16 == 0 && WN % 8 == 0 && BK % 16 == 0, "WM, WN, BK must be multiples of 16, 8, 16") };
    const { assert!(MT as u32 * 16 == WM && NT as u32 * 8 == WN, "MT = WM / 16, NT = WN / 8") };
    const {
        assert!(
            tiles_zfill_even::<A_COL, B_COL>((BM, BN, BK), 2, (BM / WM) * (BN / WN) * WARP_SIZE),
            "the block's threads must split each tile's 16-byte chunks evenly (copy_tile_zfill)"
        )
    };
    let tile = BlockTile::new(BM, BN, BK);
    let layouts = KernelLayouts {
        a: if A_COL { Layout::ColMajor } else { Layout::RowMajor },
        b: if B_COL { Layout::ColMajor } else { Layout::RowMajor },
    };
    let layout = s08_layout(tile, layouts);
    // Shared offsets (elements) of A(row, k) and B(k, col) in a stored tile.
    let a_at = |row: u32, k: u32| if A_COL { k * layout.a_ld + row } else { row * layout.a_ld + k };
    let b_at = |k: u32, col: u32| if B_COL { col * layout.b_ld + k } else { k * layout.b_ld + col };
    let bytes = f64::BYTES;
    let stage_bytes = layout.stage_elems * bytes;
    let threads = (BM / WM) * (BN / WN) * WARP_SIZE;
    // Opaque, so the two bodies (`ALL_VEC`) share no setup LLVM could hoist
    // above the choice between them: without it ptxas spilled 4-8 bytes in
    // the tn batched 128 x 64 and 128 x 128 kernels (sm_90, 2026-11-24).
    let tid = opaque_u32(thread_idx()[0]);
    let (warp, lane) = (tid / WARP_SIZE, tid % WARP_SIZE);
    let (wr, wc) = (warp / (BN / WN), warp % (BN / WN));
    let (gq, tq) = (lane / 4, lane % 4); // g and t of the fragment layouts
                                         // The two rows of A (and of C) a lane holds in an mma tile starting at
                                         // row `r0`: g and g + 8 as the PTX ISA lays out the fragments; with a
                                         // column-major A, 2g and 2g + 1 instead. Any permutation of the tile's
                                         // rows works if C's rows follow it; adjacent rows make the A fragment's
                                         // pairs one 16-byte read of the m-contiguous tile.
    let frag_rows = |r0: u32| if A_COL { (r0 + 2 * gq, r0 + 2 * gq + 1) } else { (r0 + gq, r0 + gq + 8) };
    let [bx, by] = g.block;
    let [gx, gy] = g.grid;
    let (tile_m, tile_n) = raster(by * gx + bx, gy, gx, RASTER_GROUP);
    let (row0, col0) = (tile_m * BM, tile_n * BN);
    let base = smem_base();
    // Requests tile `kt` into the buffer at `stage` (`live` false: a tile
    // past the last). With whole 16-byte chunks (ALL_VEC) through the
    // branch-free `request_tiles_zfill`, which zero-fills instead of
    // skipping; otherwise through stage 7's `request_tiles` (a bounds-check-
    // free loop for tiles with k inside, element copies at the fringe),
    // skipped when not live.
    let request = |kt: u32, live: bool, stage: u32, tid: u32| {
        if ALL_VEC {
            request_tiles_zfill::<f64, A_COL, B_COL, true>(
                &g,
                tile,
                layout,
                (row0, col0),
                kt,
                live,
                stage,
                (tid, threads),
            );
        } else if live {
            let vecs = (vector_ok(g.a, g.lda), vector_ok(g.b, g.ldb));
            request_tiles::<f64, A_COL, B_COL>(&g, vecs, tile, layout, (row0, col0), kt, stage, (tid, threads));
        }
    };

    // The fragments of k-group `kk` of the tile stored at `a_tile`: a[mi] =
    // A(lo, k + t), A(hi, k + t), A(lo, k + 4 + t), A(hi, k + 4 + t) and
    // b[nt] = B(k + t, col), B(k + 4 + t, col), with k = 8 kk. `a_at` and
    // `b_at` are linear, so each read is the lane's first element plus a
    // constant: the lane's address is computed once per k-group (opaque, so
    // the compiler keeps one register per operand rather than hoisting one
    // per fragment out of the loop) and every read is `[lane + constant]`.
    let (lane_row, lane_col) = (frag_rows(wr * WM).0, wc * WN + gq);
    let hi_row = frag_rows(0).1 - frag_rows(0).0; // 8, or 1 with a column-major A
    let load = |f: &mut Frags<MT, NT>, a_tile: u32, kk: u32| {
        let a_lane = opaque_u32(a_tile + a_at(lane_row, tq) * bytes);
        let b_lane = opaque_u32(a_tile + (layout.b_offset + b_at(tq, lane_col)) * bytes);
        for (nt, bf) in f.b.iter_mut().enumerate() {
            for (i, x) in bf.iter_mut().enumerate() {
                *x = f64::ld_shared(b_lane + b_at(kk * 8 + 4 * i as u32, nt as u32 * 8) * bytes);
            }
        }
        for (mi, af) in f.a.iter_mut().enumerate() {
            for j in 0..2u32 {
                let at = a_lane + a_at(mi as u32 * 16, kk * 8 + 4 * j) * bytes;
                if A_COL {
                    // Rows lo and hi = lo + 1 are adjacent: one 16-byte read.
                    let mut x = [0.0f64; 4];
                    f64::ld_shared_vec(at, &mut x);
                    af[2 * j as usize] = x[0];
                    af[2 * j as usize + 1] = x[1];
                } else {
                    af[2 * j as usize] = f64::ld_shared(at);
                    af[2 * j as usize + 1] = f64::ld_shared(at + a_at(hi_row, 0) * bytes);
                }
            }
        }
    };

    // What only the epilogue needs (the tile's origin, C's address) waits in
    // shared memory after the pipeline buffers (`S08_STASH_BYTES`): held in
    // registers across the loop beside its copies and two fragment buffers,
    // it was what ptxas spilled. One thread writes; the barrier before the
    // epilogue publishes it.
    let stash = base + DEPTH * stage_bytes;
    const { assert!(S08_STASH_BYTES >= 16) };
    if tid == 0 {
        f64::st_shared(stash, f64::from_bits(u64::from(row0) | u64::from(col0) << 32));
        f64::st_shared(stash + 8, f64::from_bits(g.c as usize as u64));
    }
    // Prologue: tiles 0..DEPTH - 1 requested, tile 0 waited for, its first
    // k-group's fragments read.
    let k_tiles = ceil_div(g.k, BK);
    let groups = BK / 8;
    for s in 0..DEPTH - 1 {
        if s < k_tiles {
            let stage = base + s * stage_bytes;
            request(s, true, stage, tid);
        }
        cp_async_commit();
    }
    let mut acc = [[[0.0f64; 4]; NT]; MT];
    let (mut read, mut write) = (0, DEPTH - 1);
    // Two fragment buffers as two variables (an array indexed by k-group
    // parity would sit in local memory wherever the loop is not unrolled).
    let (mut f0, mut f1) = (Frags::<MT, NT>::ZERO, Frags::<MT, NT>::ZERO);
    if k_tiles > 0 {
        cp_async_wait(DEPTH - 2);
        sync_threads();
        load(&mut f0, base, 0);
    }
    // k-group `kk` of tile `kt`: its mma on `cur` while the next group's
    // fragments are read into `next`.
    let mut k_group = |kt: u32, kk: u32, cur: &Frags<MT, NT>, next: &mut Frags<MT, NT>| {
        if kk == 0 {
            // Tile kt + DEPTH - 1 goes to the buffer tile kt - 1 used, freed
            // at the previous step's barrier. With ALL_VEC no branch
            // separates its copies from the mma below, so ptxas interleaves
            // the two. (Requested after the loads and mma below instead,
            // the copies' addresses spilled.) Opaque: the copies' per-thread
            // addresses are recomputed each step rather than held in
            // registers across the loop beside two fragment buffers.
            request(kt + DEPTH - 1, kt + DEPTH - 1 < k_tiles, base + write * stage_bytes, opaque_u32(tid));
            cp_async_commit();
        }
        // The next k-group's fragments (after the last group: the next
        // tile's first; `read` moved to tile kt + 1 at the barrier after
        // group groups - 2) are read while this group's mma run.
        if kk + 1 < groups || kt + 1 < k_tiles {
            load(next, base + read * stage_bytes, (kk + 1) % groups);
        }
        for (mi, acc_m) in acc.iter_mut().enumerate() {
            for (nt, d) in acc_m.iter_mut().enumerate() {
                mma_16x8x8(d, &cur.a[mi], &cur.b[nt]);
            }
        }
        if kk + 2 == groups {
            // Every warp has read all of tile kt's fragments; wait for tile
            // kt + 1 and meet, which frees tile kt's buffer.
            cp_async_wait(DEPTH - 2);
            sync_threads();
            write = read;
            read = if read + 1 == DEPTH { 0 } else { read + 1 };
        }
    };
    for kt in 0..k_tiles {
        for kk in (0..groups).step_by(2) {
            k_group(kt, kk, &f0, &mut f1);
            k_group(kt, kk + 1, &f1, &mut f0);
        }
    }
    sync_threads();
    let origin = f64::ld_shared(stash).to_bits();
    let (row0, col0) = (origin as u32, (origin >> 32) as u32);
    let g = GemmArgs { c: f64::ld_shared(stash + 8).to_bits() as usize as *mut f64, ..g };
    // A fused kernel's epilogue on the sums (element (mt, nt, e) of `acc`
    // is C's (lo or hi, col + e % 2) as stored below); the stores then
    // write them as they are.
    let g = if FUSED {
        let at = |i: usize| {
            let (mt, nt, e) = (i / (4 * NT), i / 4 % NT, i % 4);
            let (lo, hi) = frag_rows(row0 + wr * WM + mt as u32 * 16);
            (if e < 2 { lo } else { hi }, col0 + wc * WN + nt as u32 * 8 + 2 * tq + (e % 2) as u32)
        };
        fuse_in_place(&g, fusion, acc.as_flattened_mut().as_flattened_mut(), at)
    } else {
        g
    };
    let c_vec = vector_ok(g.c as *const f64, g.ldc);
    for (mt, acc_m) in acc.iter().enumerate() {
        let (lo, hi) = frag_rows(row0 + wr * WM + mt as u32 * 16);
        for (nt, d) in acc_m.iter().enumerate() {
            let col = col0 + wc * WN + nt as u32 * 8 + 2 * tq;
            store_c_vec(&g, c_vec, lo, col, &[d[0], d[1], 0.0, 0.0]);
            store_c_vec(&g, c_vec, hi, col, &[d[2], d[3], 0.0, 0.0]);
        }
    }
}
