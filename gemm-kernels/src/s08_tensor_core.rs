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
//! `[BK][BM + 8]`; B row-major `[BK][BN + 4]` or column-major `[BN][BK + 4]`)
//! (`KernelConfig::TensorCore`).
//!
//! # The mma tile
//! A warp computes its WM x WN warp tile as (WM / 16) x (WN / 8) tiles of
//! 16 x 8, each accumulated over k in steps of 16: on sm_90 one
//! `mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64`, on sm_80 the same
//! fragments fed to eight `m8n8k4` (the m16n8k16 fragments are exactly those
//! of two m8n8k4 tiles in m, four in k). With g = lane / 4, t = lane % 4
//! (PTX ISA, "Matrix fragments for mma.m16n8k16" with .f64; DESIGN.md):
//! a[2j] = A(g, 4j + t), a[2j + 1] = A(g + 8, 4j + t) for j < 4;
//! b[i] = B(t + 4i, g) for i < 4; c = C(g, 2t), C(g, 2t + 1), C(g + 8, 2t),
//! C(g + 8, 2t + 1). `ldmatrix` moves 16-bit elements only, so fragments are
//! read with 8-byte `ld.shared`, at addresses that follow the tile's storage
//! order; the pads map the 32 reads of a fragment onto every bank pair
//! exactly twice, in each layout (see `s08_layout`). With a column-major A
//! a lane holds rows 2g and 2g + 1 of the mma tile instead of g and g + 8
//! (a permutation of the tile's rows, which C's rows follow): the pair is
//! adjacent in the m-contiguous tile, so each A pair is one 16-byte read.
//!
//! Register budget: WM / 16 * WN / 8 * 4 accumulators (64 for a 64 x 32 warp
//! tile), the B fragments of the warp tile's columns (16), one A fragment (8).
//!
//! # Rasterization
//! Block b (launch order) computes the block tile `gemm_core::tiling::raster`
//! gives: consecutive blocks walk down groups of `RASTER_GROUP` tile rows, so
//! the blocks resident at once share rows of A and columns of B in L2.
//!
//! # Source
//! PTX ISA, "Warp-level matrix multiply-accumulate instructions" (mma.m8n8k4,
//! mma.m16n8k16 with .f64), "cp.async"; CUTLASS's sm_90 FP64 default (block
//! tile 128 x 64 x 16, 2 x 2 warps of 64 x 32, pipeline depth 3) as the starting point
//! named in the project's issue.

use crate::element::Element;
use crate::s07_pipelined::request_tiles;
use crate::thread::{
    cp_async_commit, cp_async_wait, smem_base, store_c_vec, sync_threads, thread_idx, vector_ok, GemmArgs,
};
use core::arch::asm;
use gemm_core::ceil_div;
use gemm_core::shape::{KernelLayouts, Layout};
use gemm_core::tiling::{raster, s08_layout, BlockTile, RASTER_GROUP, WARP_SIZE};

/// `d <- a * b + d` on one 16 x 8 x 16 f64 tile held in fragments (layout in
/// the module docs): one `mma.m16n8k16` (sm_90).
#[cfg(gemm_sm90)]
#[inline(always)]
fn mma_16x8x16(d: &mut [f64; 4], a: &[f64; 8], b: &[f64; 4]) {
    // SAFETY: a warp-collective instruction reached by all 32 lanes in
    // warp-uniform control flow (the caller's loops have constant bounds); not
    // `pure`/`nomem`, so LLVM does not merge or move it (DESIGN.md).
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {{{d0}, {d1}, {d2}, {d3}}}, \
             {{{a0}, {a1}, {a2}, {a3}, {a4}, {a5}, {a6}, {a7}}}, {{{b0}, {b1}, {b2}, {b3}}}, \
             {{{d0}, {d1}, {d2}, {d3}}};",
            d0 = inout(reg64) d[0], d1 = inout(reg64) d[1], d2 = inout(reg64) d[2], d3 = inout(reg64) d[3],
            a0 = in(reg64) a[0], a1 = in(reg64) a[1], a2 = in(reg64) a[2], a3 = in(reg64) a[3],
            a4 = in(reg64) a[4], a5 = in(reg64) a[5], a6 = in(reg64) a[6], a7 = in(reg64) a[7],
            b0 = in(reg64) b[0], b1 = in(reg64) b[1], b2 = in(reg64) b[2], b3 = in(reg64) b[3],
            options(nostack, preserves_flags),
        );
    }
}

/// `d <- a * b + d` on one 16 x 8 x 16 f64 tile (sm_80): eight `mma.m8n8k4`,
/// rows g and g + 8 for each k step of 4 (the fragments of m16n8k16 are
/// those of m8n8k4: a0 = A(g, t), b0 = B(t, g), c = C(g, 2t), C(g, 2t + 1)).
#[cfg(not(gemm_sm90))]
#[inline(always)]
fn mma_16x8x16(d: &mut [f64; 4], a: &[f64; 8], b: &[f64; 4]) {
    for j in 0..4 {
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
>(
    g: GemmArgs<f64>,
) {
    const MG: usize = 2;
    const { assert!(MT % MG == 0, "WM must be a multiple of 32 (mma tiles are grouped in pairs along m)") };
    const { assert!(BM % WM == 0 && BN % WN == 0 && DEPTH >= 2, "warp tiles must divide the block tile") };
    const { assert!(WM % 16 == 0 && WN % 8 == 0 && BK % 16 == 0, "WM, WN, BK must be multiples of 16, 8, 16") };
    const { assert!(MT as u32 * 16 == WM && NT as u32 * 8 == WN, "MT = WM / 16, NT = WN / 8") };
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
    let tid = thread_idx()[0];
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
    let vecs = (vector_ok(g.a, g.lda), vector_ok(g.b, g.ldb));
    let base = smem_base();

    let k_tiles = ceil_div(g.k, BK);
    for s in 0..DEPTH - 1 {
        if s < k_tiles {
            let stage = base + s * stage_bytes;
            request_tiles::<f64, A_COL, B_COL>(&g, vecs, tile, layout, (row0, col0), s, stage, (tid, threads));
        }
        cp_async_commit();
    }
    let mut acc = [[[0.0f64; 4]; NT]; MT];
    let (mut read, mut write) = (0, DEPTH - 1);
    for kt in 0..k_tiles {
        cp_async_wait(DEPTH - 2);
        sync_threads();
        if kt + DEPTH - 1 < k_tiles {
            request_tiles::<f64, A_COL, B_COL>(
                &g,
                vecs,
                tile,
                layout,
                (row0, col0),
                kt + DEPTH - 1,
                base + write * stage_bytes,
                (tid, threads),
            );
        }
        cp_async_commit();
        let a_tile = base + read * stage_bytes;
        let b_tile = a_tile + layout.b_offset * bytes;
        for ks in 0..BK / 16 {
            // The mma tiles of the warp tile in groups of MG rows: the A
            // fragments of a group (MG x 8 doubles) are loaded once, the B
            // fragments once per group, one column at a time (4 doubles).
            // This keeps at most MG x 8 + 4 fragment doubles live beside the
            // accumulators (stage 8 spilled when all of B's were held).
            for mg in 0..MT / MG {
                let mut a = [[0.0f64; 8]; MG];
                for (mi, af) in a.iter_mut().enumerate() {
                    let (lo, hi) = frag_rows(wr * WM + (mg * MG + mi) as u32 * 16);
                    for j in 0..4u32 {
                        let k = ks * 16 + 4 * j + tq;
                        if A_COL {
                            // Rows lo and hi = lo + 1 are adjacent: one 16-byte read.
                            let mut x = [0.0f64; 4];
                            f64::ld_shared_vec(a_tile + a_at(lo, k) * bytes, &mut x);
                            af[2 * j as usize] = x[0];
                            af[2 * j as usize + 1] = x[1];
                        } else {
                            af[2 * j as usize] = f64::ld_shared(a_tile + a_at(lo, k) * bytes);
                            af[2 * j as usize + 1] = f64::ld_shared(a_tile + a_at(hi, k) * bytes);
                        }
                    }
                }
                for nt in 0..NT {
                    let col = wc * WN + nt as u32 * 8 + gq;
                    let mut bf = [0.0f64; 4];
                    for (i, x) in bf.iter_mut().enumerate() {
                        *x = f64::ld_shared(b_tile + b_at(ks * 16 + tq + 4 * i as u32, col) * bytes);
                    }
                    for (mi, af) in a.iter().enumerate() {
                        mma_16x8x16(&mut acc[mg * MG + mi][nt], af, &bf);
                    }
                }
            }
        }
        read = if read + 1 == DEPTH { 0 } else { read + 1 };
        write = if write + 1 == DEPTH { 0 } else { write + 1 };
    }
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
