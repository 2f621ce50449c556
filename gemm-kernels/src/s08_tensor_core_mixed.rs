//! Stage 8 for the mixed-precision products: f16 and bf16 (f32
//! accumulation), f32 read as TF32, and i8 (i32 accumulation) on warp-level
//! `mma.sync`, with `ldmatrix` fragment loads, a cp.async pipeline of DEPTH
//! buffers and swizzled shared memory. The path for GPUs without stage 9's
//! warpgroup MMA (compute capability 8.x: A100, RTX 30xx and 40xx, L4...);
//! on 9.0 it runs when asked for (`Stage::TensorCore`).
//!
//! `C <- alpha * A * B + beta * C` with alpha and beta in f32 (i32 for i8).
//!
//! # Shapes
//! A m x k (lda), B k x n (ldb), C m x n row-major (ldc), in elements; A
//! and B in this build's layouts (`A_MN`: A column-major, `B_MN`: B
//! row-major, f16 and bf16 only: tf32 and i8 operands come K-major, the
//! host transposes the others first). Operand rows (lines along the
//! contiguous dimension) must start on 16 bytes: the base 16-byte aligned,
//! `ld * size` a multiple of 16 (the host copies other operands to such a
//! layout first).
//!
//! # Launch
//! `gemm_core::mma_sync::MmaTile`: 256 threads (2 x 4 warps), grid
//! (block tiles of one product, 1, products), `smem_bytes` of dynamic shared
//! memory. Block x computes block tile `raster(x)` (groups of
//! `RASTER_GROUP` tile rows walked column by column), for products z =
//! blockIdx.z, + gridDim.z, ...
//!
//! # Fragments in 32-bit words
//! Counted in 32-bit words of k, the operand fragments of the three `mma`
//! shapes are the same: with g = lane / 4, t = lane % 4, a k-group of 8
//! words (16 f16 or bf16, 8 tf32, 32 i8: one `mma.m16n8k{16,8,32}`) has
//! a0 = A(g, word t), a1 = A(g + 8, word t), a2 = A(g, word t + 4), a3 =
//! A(g + 8, word t + 4); b0 = B(word t, g), b1 = B(word t + 4, g); and the
//! accumulators c0, c1 = C(g, 2t), C(g, 2t + 1), c2, c3 = C(g + 8, 2t),
//! C(g + 8, 2t + 1) (PTX ISA, "Matrix Fragments for mma.m16n8k16",
//! "m16n8k8", "m16n8k32"). `ldmatrix.x4` gives lane l word l % 4 of row l /
//! 4 of four 8 x 16-byte matrices whose row addresses lanes 8q..8q + 8 name:
//! for a K-major tile (rows along m or n, 16 bytes = 4 words of k) that is
//! exactly the fragment, for every type, with no conversion. An MN-major
//! f16 or bf16 tile (rows along k) is read with `ldmatrix.trans`, which
//! hands lane l the pair of 16-bit elements of column l / 4, rows 2(l % 4)
//! and 2(l % 4) + 1: again a0..a3, b0, b1.
//!
//! # Shared memory: 64 bytes of k per k-tile, swizzled by 16-byte chunks
//! ```text
//! K-major tile (A row-major, B column-major): a row of 64 bytes per m (n)
//!   chunk c of row r at r * 64 + 16 * (c ^ ((r >> 1) & 3))
//!   ldmatrix reads chunk c of 8 consecutive rows: 4 pairs of rows share a
//!   128-byte line, and the XOR gives each pair a different chunk: 8 of the
//!   8 bank groups of 16 bytes, no conflict
//! MN-major tile (A column-major, B row-major): a row of BM (BN) 16-bit
//! elements per k
//!   chunk c of row r at r * (2 BM) + 16 * (c ^ (r & 7))
//!   ldmatrix.trans reads chunk c of 8 consecutive k rows: the XOR gives
//!   each a different chunk of its 128 bytes, no conflict
//! ```
//! The cp.async copies write 16-byte chunks with 8 consecutive threads on 8
//! different bank groups in both layouts. Elements outside the matrix (edges,
//! the k tail, down to a part of a chunk) are zero-filled by cp.async's
//! source size.
//!
//! # Main loop
//! Tiles 0..DEPTH-1 are requested first. At k-tile kt every thread waits for
//! its copies of kt (`cp.async.wait_group DEPTH - 2`), the block meets (so
//! every thread's copies of kt are visible, and every warp has finished with
//! kt - 1), the copies of kt + DEPTH - 1 are requested into kt - 1's buffer,
//! and the warp runs the tile's two k-groups: per k-group BM / 32 + BN / 64
//! `ldmatrix.x4` and (BM / 32) (BN / 32) `mma` (for 128 x 256 with 64 x 64 warp
//! tiles, 8 ldmatrix and 32 mma). TF32 fragments are rounded with
//! `cvt.rna.tf32.f32` first (the `mma` expects TF32 values).
//!
//! # Source
//! PTX ISA, "Warp Level Matrix Multiply-Accumulate Instructions" (mma with
//! .f16, .bf16, .tf32, .s8; "Matrix Fragments"), "ldmatrix", "cp.async",
//! "cvt" (.tf32); CUTLASS's sm80 tensor-op GEMM (block tile 128 x 256 x 32
//! with 8 warps of 64 x 64 and 3 buffers; the XOR-swizzled shared-memory
//! layouts of its `TensorOpMultiplicandCongruous` / `Crosswise`).

use crate::mixed::{store_pair, Bf16, Output, Tf32, F16, S8};
use crate::thread::{cp_async_16_zfill, cp_async_commit, cp_async_wait, smem_base, sync_threads};
use core::arch::{asm, nvptx};
use gemm_core::ceil_div;
use gemm_core::mma_sync::{MmaTile, K_TILE_BYTES, MMA_WARPS_M, MMA_WARPS_N};
use gemm_core::tiling::{raster, RASTER_GROUP};

/// Element type of A and B: selects the `mma` instruction (k = 32 bytes).
pub trait MmaInput {
    /// Bytes of one element.
    const BYTES: u32;
    /// `d <- a * b + d` on one 16 x 8 tile over one k-group (fragments in
    /// the module docs; f32 accumulators, or s32 ones as their bits).
    ///
    /// # Safety
    /// Warp-collective: all 32 lanes, in uniform control flow.
    unsafe fn mma(d: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]);
    /// Prepares fragment words for `mma` (TF32 rounding; nothing for the others).
    #[inline(always)]
    fn round<const N: usize>(_x: &mut [u32; N]) {}
}

macro_rules! mma_input {
    ($t:ident, $bytes:literal, $shape:literal, $types:literal) => {
        impl MmaInput for $t {
            const BYTES: u32 = $bytes;
            #[inline(always)]
            unsafe fn mma(d: &mut [f32; 4], a: &[u32; 4], b: &[u32; 2]) {
                // Not `pure`/`nomem`: LLVM must not merge or move a
                // warp-collective instruction (DESIGN.md).
                asm!(
                    concat!("mma.sync.aligned.", $shape, ".row.col.", $types,
                            " {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};"),
                    d0 = inout(reg32) d[0], d1 = inout(reg32) d[1], d2 = inout(reg32) d[2], d3 = inout(reg32) d[3],
                    a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                    b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                    options(nostack, preserves_flags),
                );
            }
            mma_input!(@round $t);
        }
    };
    (@round Tf32) => {
        #[inline(always)]
        fn round<const N: usize>(x: &mut [u32; N]) {
            for w in x.iter_mut() {
                // SAFETY: a conversion between registers.
                unsafe {
                    asm!("cvt.rna.tf32.f32 {y}, {x};", y = lateout(reg32) *w, x = in(reg32) *w,
                         options(pure, nomem, nostack, preserves_flags))
                };
            }
        }
    };
    (@round $t:ident) => {};
}

mma_input!(F16, 2, "m16n8k16", "f32.f16.f16.f32");
mma_input!(Bf16, 2, "m16n8k16", "f32.bf16.bf16.f32");
mma_input!(Tf32, 4, "m16n8k8", "f32.tf32.tf32.f32");
mma_input!(S8, 1, "m16n8k32", "s32.s8.s8.s32");

/// `ldmatrix.sync.aligned.m8n8.x4` (`.trans` when `TRANS`) at shared address
/// `addr` (this lane's row of its matrix).
///
/// # Safety
/// Warp-collective; every lane's `addr` is a 16-byte aligned row inside the
/// launch's shared memory.
#[inline(always)]
unsafe fn ldmatrix_x4<const TRANS: bool>(addr: u32) -> [u32; 4] {
    let mut r = [0u32; 4];
    if TRANS {
        asm!("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{a}];",
             r0 = out(reg32) r[0], r1 = out(reg32) r[1], r2 = out(reg32) r[2], r3 = out(reg32) r[3],
             a = in(reg32) addr, options(nostack, preserves_flags, readonly));
    } else {
        asm!("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{a}];",
             r0 = out(reg32) r[0], r1 = out(reg32) r[1], r2 = out(reg32) r[2], r3 = out(reg32) r[3],
             a = in(reg32) addr, options(nostack, preserves_flags, readonly));
    }
    r
}

/// Byte offset of 16-byte chunk `c` of row `r` in a K-major tile (rows of 64 bytes).
#[inline(always)]
const fn k_major_offset(r: u32, c: u32) -> u32 {
    r * K_TILE_BYTES + 16 * (c ^ ((r >> 1) & 3))
}

/// Byte offset of 16-byte chunk `c` of row `r` in an MN-major tile (rows of
/// `row_bytes`, a multiple of 128).
#[inline(always)]
const fn mn_major_offset(r: u32, c: u32, row_bytes: u32) -> u32 {
    r * row_bytes + 16 * (c ^ (r & 7))
}

/// The kernel's parameters (see the module docs).
#[derive(Clone, Copy)]
pub struct MmaParams<O: Output> {
    /// Rows of C.
    pub m: u32,
    /// Columns of C.
    pub n: u32,
    /// The shared dimension.
    pub k: u32,
    /// Scale of A B.
    pub alpha: O::Value,
    /// Scale of C (0: C is not read).
    pub beta: O::Value,
    /// A (bytes of the input type).
    pub a: *const u8,
    /// Leading dimension of A, in elements.
    pub lda: u32,
    /// B.
    pub b: *const u8,
    /// Leading dimension of B, in elements.
    pub ldb: u32,
    /// C, row-major.
    pub c: *mut O,
    /// Leading dimension of C.
    pub ldc: u32,
    /// Elements from one product's A to the next (0: one A for all).
    pub stride_a: u64,
    /// As `stride_a`, for B.
    pub stride_b: u64,
    /// Elements from one product's C to the next.
    pub stride_c: u64,
    /// Products.
    pub count: u32,
}

/// One thread's share of the copies of one operand's k-tiles, worked out
/// once per product so that a k-tile's copies cost a few adds each. The
/// thread copies `chunks` 16-byte chunks of a tile, chunk j from
/// `src + j line_step + kt tile_step` (bytes) to `dst + j dst_step`: the
/// same chunk of lines `line_step` apart. Of the part of the matrix a chunk
/// starts in, `edge - j edge_step - kt kt_units` units lie ahead along k
/// (K-major: elements of k from the chunk's start; MN-major: lines of k),
/// each worth `unit_bytes` of the chunk, which holds at most `part` bytes of
/// the matrix (16, or fewer at the end of m or n); chunks j >= `valid` lie
/// past the last line.
struct TileCopy {
    chunks: u32,
    valid: u32,
    src: *const u8,
    line_step: u64,
    tile_step: u64,
    dst: u32,
    dst_step: u32,
    edge: u32,
    edge_step: u32,
    kt_units: u32,
    unit_bytes: u32,
    part: u32,
}

impl TileCopy {
    /// The copies of `ROWS` (BM or BN) lines of the K-major operand at `x`
    /// (lines of k, `ld` elements of `bytes` bytes apart, lines `first ..`
    /// of `lines`), or, when `MN`, of BK lines (one per k) of `ROWS`
    /// 16-bit elements along m or n (elements `first ..` of `lines`), by
    /// thread `t`.
    #[inline(always)]
    fn new<const ROWS: u32, const MN: bool>(
        x: *const u8,
        bytes: u32,
        ld: u32,
        (first, lines): (u32, u32),
        k: u32,
        t: u32,
    ) -> Self {
        const THREADS: u32 = 32 * MMA_WARPS_M * MMA_WARPS_N;
        let ld_bytes = ld as u64 * bytes as u64;
        let bk = K_TILE_BYTES / bytes;
        // Chunks per line of the tile; lines per pass of all threads.
        let per_line = if MN { ROWS * bytes / 16 } else { K_TILE_BYTES / 16 };
        let (r, ch) = (t / per_line, t % per_line);
        let pass = THREADS / per_line;
        let chunks = if MN { bk } else { ROWS } / pass;
        if !MN {
            let row = first + r;
            // Chunks j < valid have first + r + j pass < lines.
            let valid = if row < lines { ((lines - row).div_ceil(pass)).min(chunks) } else { 0 };
            TileCopy {
                chunks,
                valid,
                // SAFETY (of the arithmetic): only used for valid chunks,
                // whose lines lie inside the operand.
                src: if valid > 0 { unsafe { x.add((row as u64 * ld_bytes + 16 * ch as u64) as usize) } } else { x },
                line_step: pass as u64 * ld_bytes,
                tile_step: K_TILE_BYTES as u64,
                dst: k_major_offset(r, ch),
                dst_step: pass * K_TILE_BYTES,
                edge: k.saturating_sub(16 * ch / bytes),
                edge_step: 0,
                kt_units: bk,
                unit_bytes: bytes,
                part: 16,
            }
        } else {
            let e = first + ch * (16 / bytes);
            let valid = if e < lines { chunks } else { 0 };
            TileCopy {
                chunks,
                valid,
                // SAFETY (of the arithmetic): as above; line r of k is read
                // only while it is below k.
                src: if valid > 0 {
                    unsafe { x.add((r as u64 * ld_bytes + e as u64 * bytes as u64) as usize) }
                } else {
                    x
                },
                line_step: pass as u64 * ld_bytes,
                tile_step: bk as u64 * ld_bytes,
                dst: mn_major_offset(r, ch, ROWS * bytes),
                dst_step: pass * ROWS * bytes,
                edge: k.saturating_sub(r),
                edge_step: pass,
                kt_units: bk,
                unit_bytes: 16,
                part: if e < lines { ((lines - e) * bytes).min(16) } else { 0 },
            }
        }
    }

    /// Requests k-tile `kt` into the tile at shared address `tile`,
    /// zero-filling what lies outside the matrix.
    ///
    /// # Safety
    /// `tile` is a tile of the launch's shared memory; the operand is as
    /// given to [`TileCopy::new`].
    #[inline(always)]
    unsafe fn issue(&self, tile: u32, kt: u32) {
        for j in 0..self.chunks {
            let used = j * self.edge_step + kt * self.kt_units;
            let size = if j < self.valid && used < self.edge {
                let left = self.edge - used;
                if left >= 16 {
                    self.part
                } else {
                    (left * self.unit_bytes).min(self.part)
                }
            } else {
                0
            };
            let src = if size > 0 {
                self.src.add((j as u64 * self.line_step + kt as u64 * self.tile_step) as usize)
            } else {
                self.src
            };
            cp_async_16_zfill(tile + self.dst + j * self.dst_step, src, size);
        }
    }
}

/// Stage 8's mixed-precision kernel: see the module docs. MT = BM / 32 and
/// NT = BN / 32 are the warp tile's 16 x 8 mma tiles along m and n.
///
/// # Safety
/// Launched with the geometry of `MmaTile { bm: BM, bn: BN, depth: DEPTH }`
/// on compute capability 8.0 or newer, with A, B, C as the module docs say
/// (rows on 16 bytes) holding `count` products at their strides.
#[inline(always)]
pub unsafe fn mma_mixed<
    I: MmaInput,
    O: Output,
    const BM: u32,
    const BN: u32,
    const DEPTH: u32,
    const MT: usize,
    const NT: usize,
    const A_MN: bool,
    const B_MN: bool,
>(
    p: MmaParams<O>,
) {
    const { assert!(MT as u32 * 16 * MMA_WARPS_M == BM && NT as u32 * 8 * MMA_WARPS_N == BN, "MT, NT") };
    const { assert!(NT % 2 == 0, "B fragments come in ldmatrix.x4 pairs") };
    const { assert!(I::BYTES == 2 || !(A_MN || B_MN), "only f16 and bf16 operands may be MN-major") };
    const { assert!(MmaTile { bm: BM, bn: BN, depth: DEPTH }.check().is_ok(), "invalid mma tile") };
    let tile = MmaTile { bm: BM, bn: BN, depth: DEPTH };
    let base = smem_base();
    let a_tile = |s: u32| base + s * tile.buffer_bytes();
    let b_tile = |s: u32| base + s * tile.buffer_bytes() + tile.a_tile_bytes();
    let t = nvptx::_thread_idx_x() as u32;
    let (warp, lane) = (t / 32, t % 32);
    let (wm, wn) = (warp % MMA_WARPS_M, warp / MMA_WARPS_M);
    let (tiles_m, tiles_n) = (ceil_div(p.m, BM), ceil_div(p.n, BN));
    let (tm, tn) = raster(nvptx::_block_idx_x() as u32, tiles_m, tiles_n, RASTER_GROUP);
    let (m0, n0) = (tm * BM, tn * BN);
    let k_tiles = ceil_div(p.k, K_TILE_BYTES / I::BYTES);
    // Pairs of C's elements are stored as one access when every pair is
    // aligned: an even ldc and stride, C itself aligned to a pair.
    let pairs = p.ldc % 2 == 0
        && (p.count == 1 || p.stride_c % 2 == 0)
        && (p.c as usize) % core::mem::align_of::<O::Pair>() == 0;

    // This lane's ldmatrix row within its matrix, and which of the four.
    let (q, r8) = (lane / 8, lane % 8);
    // Warp-tile origins in the block tile.
    let (wm0, wn0) = (wm * (BM / MMA_WARPS_M), wn * (BN / MMA_WARPS_N));

    let mut z = nvptx::_block_idx_z() as u32;
    while z < p.count {
        let a = p.a.add((z as u64 * p.stride_a * I::BYTES as u64) as usize);
        let b = p.b.add((z as u64 * p.stride_b * I::BYTES as u64) as usize);
        let copy_a = TileCopy::new::<BM, A_MN>(a, I::BYTES, p.lda, (m0, p.m), p.k, t);
        let copy_b = TileCopy::new::<BN, B_MN>(b, I::BYTES, p.ldb, (n0, p.n), p.k, t);
        let load = |s: u32, kt: u32| {
            copy_a.issue(a_tile(s), kt);
            copy_b.issue(b_tile(s), kt);
        };
        let mut acc = [[[0f32; 4]; NT]; MT];
        for s in 0..DEPTH - 1 {
            if s < k_tiles {
                load(s, s);
            }
            cp_async_commit();
        }
        for kt in 0..k_tiles {
            cp_async_wait(DEPTH - 2);
            sync_threads();
            let next = kt + DEPTH - 1;
            if next < k_tiles {
                load(next % DEPTH, next);
            }
            cp_async_commit();
            let s = kt % DEPTH;
            for g in 0..2u32 {
                let mut fa = [[0u32; 4]; MT];
                let mut fb = [[0u32; 2]; NT];
                for (i, f) in fa.iter_mut().enumerate() {
                    let mrow = wm0 + 16 * i as u32;
                    *f = if A_MN {
                        // Matrix q: m block q % 2, k block q / 2 of the k-group.
                        let r = 16 * g + 8 * (q / 2) + r8;
                        ldmatrix_x4::<true>(a_tile(s) + mn_major_offset(r, (mrow + 8 * (q % 2)) / 8, BM * 2))
                    } else {
                        let r = mrow + 8 * (q % 2) + r8;
                        ldmatrix_x4::<false>(a_tile(s) + k_major_offset(r, 2 * g + q / 2))
                    };
                    I::round(f);
                }
                for jj in 0..NT / 2 {
                    let ncol = wn0 + 16 * jj as u32;
                    // Matrix q: n block q / 2, k block q % 2 (b0, b1 of n block 2jj, then 2jj + 1).
                    let x = if B_MN {
                        let r = 16 * g + 8 * (q % 2) + r8;
                        ldmatrix_x4::<true>(b_tile(s) + mn_major_offset(r, (ncol + 8 * (q / 2)) / 8, BN * 2))
                    } else {
                        let r = ncol + 8 * (q / 2) + r8;
                        ldmatrix_x4::<false>(b_tile(s) + k_major_offset(r, 2 * g + q % 2))
                    };
                    fb[2 * jj] = [x[0], x[1]];
                    fb[2 * jj + 1] = [x[2], x[3]];
                }
                for f in fb.iter_mut() {
                    I::round(f);
                }
                for i in 0..MT {
                    for j in 0..NT {
                        I::mma(&mut acc[i][j], &fa[i], &fb[j]);
                    }
                }
            }
        }
        // No copy is in flight past here (the last groups are empty), and
        // every warp is done with the buffers before the next product's
        // first copies.
        cp_async_wait(0);
        sync_threads();

        let c = p.c.add(z as usize * p.stride_c as usize);
        let (g, tq) = (lane / 4, lane % 4);
        for (i, row) in acc.iter().enumerate() {
            for (j, x) in row.iter().enumerate() {
                let r = m0 + wm0 + 16 * i as u32 + g;
                let col = n0 + wn0 + 8 * j as u32 + 2 * tq;
                for h in 0..2usize {
                    let v = (O::acc(x[2 * h]), O::acc(x[2 * h + 1]));
                    store_pair(c, p.ldc, (p.m, p.n), (r + 8 * h as u32, col), (p.alpha, p.beta), v, pairs);
                }
            }
        }
        z += nvptx::_grid_dim_z() as u32;
    }
}
