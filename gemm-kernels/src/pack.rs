//! Packing (a step before a product, not a stage; `gemm_core::pack`): a
//! transposed copy of an operand whose lines run along k, so that the
//! product reads it along m or n.
//!
//! # Shapes
//! The source is `rows` lines of `cols` elements (leading dimension `ld`);
//! the copy is `cols` lines of `rows` (`ld_dst`): `dst[c * ld_dst + r] =
//! src[r * ld + c]`. Elements between `rows` and `ld_dst` are not written.
//!
//! # Launch
//! Blocks of 32 x 8 threads (`gemm_core::pack::PACK_BLOCK`), grid
//! `gemm_core::pack::pack_grid`, a 32 x 33 tile of dynamic shared memory.
//! Each block copies 32 x 32 tiles, walking them at a grid-sized stride: 8
//! rows at a time, lanes along the source line (coalesced reads) into the
//! tile, a barrier, then lanes along the copy's line (coalesced writes) out
//! of it. The tile's rows are 33 elements apart, so the column the warp
//! reads out of it falls in distinct banks. Memory-bound: each element is
//! read and written once.
//!
//! One-byte elements (`transpose_b8`) move as 4-byte words through 128 x
//! 128 tiles instead ([`transpose_bytes`]): a byte per thread left the
//! copy bound by instructions (an H200 moved 16 MiB of FP8 in 41 us, 10%
//! of its DRAM bandwidth, ncu, 2026-11-29).
//!
//! # Source
//! Mark Harris, "An Efficient Matrix Transpose in CUDA C/C++" (NVIDIA
//! developer blog): the tiled transpose with a padded shared-memory tile.
//!
//! # The realigning copy
//! [`copy_lines`] (entry point `copy_lines_16`, stage 9's module) is the
//! other copy before a product: `lines` lines of `line_bytes` bytes from a
//! source whose lines start on 16 bytes to a copy whose lines start on 128
//! (TMA reads a box row that straddles two 128-byte lines as two), 16
//! bytes per thread, the last `line_bytes % 16` of each line a byte at a
//! time. Blocks of `gemm_core::pack::COPY_THREADS` threads; grid
//! `gemm_core::pack::copy_grid`: x over a line's 16-byte
//! chunks, grid y over lines, each walking at a grid-sized stride.

use crate::element::Element;
use crate::thread::{block_idx, grid_dim, smem_base, sync_threads, thread_idx};
use core::arch::asm;
use gemm_core::ceil_div;
use gemm_core::pack::{COPY_THREADS, PACK_BLOCK, PACK_TILE};

/// What the transposed copy moves: an element's bits (f64, f32, and for
/// stage 9's and the token-sized kernels' operands u32 (f32 read as TF32),
/// u16 (f16, bf16) and u8 (i8)).
pub trait Word: Copy {
    /// Bytes per element.
    const BYTES: u32;
    /// Loads from global memory.
    ///
    /// # Safety
    /// `p` is a readable global address.
    unsafe fn ld_global(p: *const Self) -> Self;
    /// Stores to global memory.
    ///
    /// # Safety
    /// `p` is a writable global address.
    unsafe fn st_global(p: *mut Self, value: Self);
    /// Loads from a 32-bit shared address.
    ///
    /// # Safety
    /// `addr` lies in the block's shared memory.
    unsafe fn ld_shared(addr: u32) -> Self;
    /// Stores to a 32-bit shared address.
    ///
    /// # Safety
    /// `addr` lies in the block's shared memory.
    unsafe fn st_shared(addr: u32, value: Self);
}

impl<T: Element> Word for T {
    const BYTES: u32 = <T as Element>::BYTES;
    #[inline(always)]
    unsafe fn ld_global(p: *const Self) -> Self {
        <T as Element>::ld_global(p)
    }
    #[inline(always)]
    unsafe fn st_global(p: *mut Self, value: Self) {
        <T as Element>::st_global(p, value)
    }
    #[inline(always)]
    unsafe fn ld_shared(addr: u32) -> Self {
        <T as Element>::ld_shared(addr)
    }
    #[inline(always)]
    unsafe fn st_shared(addr: u32, value: Self) {
        <T as Element>::st_shared(addr, value)
    }
}

impl Word for u32 {
    const BYTES: u32 = 4;
    #[inline(always)]
    unsafe fn ld_global(p: *const Self) -> Self {
        let v: u32;
        asm!("ld.global.u32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) p, options(readonly, nostack));
        v
    }
    #[inline(always)]
    unsafe fn st_global(p: *mut Self, value: Self) {
        asm!("st.global.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) value, options(nostack));
    }
    #[inline(always)]
    unsafe fn ld_shared(addr: u32) -> Self {
        let v: u32;
        asm!("ld.shared.u32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) addr, options(readonly, nostack));
        v
    }
    #[inline(always)]
    unsafe fn st_shared(addr: u32, value: Self) {
        asm!("st.shared.u32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) value, options(nostack));
    }
}

impl Word for u16 {
    const BYTES: u32 = 2;
    #[inline(always)]
    unsafe fn ld_global(p: *const Self) -> Self {
        let v: u16;
        asm!("ld.global.u16 {v}, [{p}];", v = out(reg16) v, p = in(reg64) p, options(readonly, nostack));
        v
    }
    #[inline(always)]
    unsafe fn st_global(p: *mut Self, value: Self) {
        asm!("st.global.u16 [{p}], {v};", p = in(reg64) p, v = in(reg16) value, options(nostack));
    }
    #[inline(always)]
    unsafe fn ld_shared(addr: u32) -> Self {
        let v: u16;
        asm!("ld.shared.u16 {v}, [{a}];", v = out(reg16) v, a = in(reg32) addr, options(readonly, nostack));
        v
    }
    #[inline(always)]
    unsafe fn st_shared(addr: u32, value: Self) {
        asm!("st.shared.u16 [{a}], {v};", a = in(reg32) addr, v = in(reg16) value, options(nostack));
    }
}

impl Word for u8 {
    const BYTES: u32 = 1;
    #[inline(always)]
    unsafe fn ld_global(p: *const Self) -> Self {
        let v: u16;
        asm!("ld.global.u8 {v}, [{p}];", v = out(reg16) v, p = in(reg64) p, options(readonly, nostack));
        v as u8
    }
    #[inline(always)]
    unsafe fn st_global(p: *mut Self, value: Self) {
        asm!("st.global.u8 [{p}], {v};", p = in(reg64) p, v = in(reg16) value as u16, options(nostack));
    }
    #[inline(always)]
    unsafe fn ld_shared(addr: u32) -> Self {
        let v: u16;
        asm!("ld.shared.u8 {v}, [{a}];", v = out(reg16) v, a = in(reg32) addr, options(readonly, nostack));
        v as u8
    }
    #[inline(always)]
    unsafe fn st_shared(addr: u32, value: Self) {
        asm!("st.shared.u8 [{a}], {v};", a = in(reg32) addr, v = in(reg16) value as u16, options(nostack));
    }
}

/// The transposed copy (see the module docs).
///
/// # Safety
/// `src` holds `rows` lines of `cols` readable elements `ld` apart; `dst`
/// has room for `cols` lines of `rows` elements `ld_dst` apart and does not
/// overlap `src`; launched as the module docs say.
#[inline(always)]
pub unsafe fn transpose<T: Word>(rows: u32, cols: u32, src: *const T, ld: u32, dst: *mut T, ld_dst: u32) {
    const STEP: u32 = PACK_BLOCK[1];
    const PAD: u32 = PACK_TILE + 1;
    let [tx, ty] = thread_idx();
    let [gx, gy] = grid_dim();
    let [bx0, by0, _] = block_idx();
    let tile = smem_base();
    let (tiles_x, tiles_y) = (ceil_div(cols, PACK_TILE), ceil_div(rows, PACK_TILE));
    let mut by = by0;
    while by < tiles_y {
        let mut bx = bx0;
        while bx < tiles_x {
            let (r0, c0) = (by * PACK_TILE, bx * PACK_TILE);
            let mut i = ty;
            while i < PACK_TILE {
                let (r, c) = (r0 + i, c0 + tx);
                if r < rows && c < cols {
                    let x = T::ld_global(src.add(r as usize * ld as usize + c as usize));
                    T::st_shared(tile + (i * PAD + tx) * T::BYTES, x);
                }
                i += STEP;
            }
            sync_threads();
            let mut i = ty;
            while i < PACK_TILE {
                let (c, r) = (c0 + i, r0 + tx);
                if r < rows && c < cols {
                    let x = T::ld_shared(tile + (tx * PAD + i) * T::BYTES);
                    T::st_global(dst.add(c as usize * ld_dst as usize + r as usize), x);
                }
                i += STEP;
            }
            sync_threads(); // the tile is read before the next one is written
            bx += gx;
        }
        by += gy;
    }
}

/// The transposed copy of 1-byte elements (see the module docs):
/// `gemm_core::pack::BYTE_TILE`-square tiles of bytes (128 x 128, 16 KiB of
/// shared memory), each thread moving 4-byte words. A warp loads one
/// 128-byte source line of the tile at a time (its lanes' words, 16 lines
/// each for the block's 8 warps, all sixteen loads in flight together) into shared memory, word `w` of tile line
/// `r` at `32 r + (w ^ (r / 4) % 32)` (a swizzle instead of padding: a
/// line's words are a permutation of the banks, and so are the words `w`
/// of lines `4 t + i` for t = 0..31); then each thread takes 4 x 4 blocks
/// of bytes, lane t reading lines 4t..4t+3 at word w, transposes each in
/// registers (four `prmt` pairs) and stores four words, one on each of the
/// copy's lines 4w..4w+3 at byte 4t: the warp writes four whole 128-byte
/// lines. Tiles that lie inside the matrix, with `src`, `dst`, `ld` and
/// `ld_dst` multiples of 4, move words; the others (the edges, unaligned
/// operands) read and write the same words a byte at a time, bounds
/// checked (bytes outside the source read as zero and are not written).
///
/// # Safety
/// As [`transpose`], launched with `gemm_core::pack::transpose_grid` and
/// `transpose_smem_bytes` for 1-byte elements.
#[inline(always)]
pub unsafe fn transpose_bytes(rows: u32, cols: u32, src: *const u8, ld: u32, dst: *mut u8, ld_dst: u32) {
    const TILE: u32 = gemm_core::pack::BYTE_TILE;
    const WORDS: u32 = TILE / 4;
    let [tx, ty] = thread_idx();
    let [gx, gy] = grid_dim();
    let [bx0, by0, _] = block_idx();
    let (warp, lane) = (ty, tx);
    let threads = PACK_BLOCK[0] * PACK_BLOCK[1];
    let tile = smem_base();
    let word_at = |r: u32, w: u32| tile + 4 * (WORDS * r + (w ^ ((r / 4) % WORDS)));
    let aligned = (src as usize | dst as usize | ld as usize | ld_dst as usize) % 4 == 0;
    let (tiles_x, tiles_y) = (ceil_div(cols, TILE), ceil_div(rows, TILE));
    let mut by = by0;
    while by < tiles_y {
        let mut bx = bx0;
        while bx < tiles_x {
            let (r0, c0) = (by * TILE, bx * TILE);
            let whole = aligned && rows - r0 >= TILE && cols - c0 >= TILE;
            // Source lines r0 + warp + 8 j, bytes c0 + 4 lane .. + 4: all
            // sixteen loads issued before the first store into the tile
            // (one after another, each store would wait for its load).
            const LINES: usize = (TILE / PACK_BLOCK[1]) as usize;
            let mut words = [0u32; LINES];
            for (j, x) in words.iter_mut().enumerate() {
                let r = r0 + warp + PACK_BLOCK[1] * j as u32;
                let line = src.wrapping_add(r as usize * ld as usize + (c0 + 4 * lane) as usize);
                *x = if whole {
                    let v: u32;
                    asm!("ld.global.nc.u32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) line, options(pure, readonly, nostack));
                    v
                } else {
                    let mut v = 0u32;
                    for e in 0..4 {
                        if r < rows && c0 + 4 * lane + e < cols {
                            v |= (<u8 as Word>::ld_global(line.add(e as usize)) as u32) << (8 * e);
                        }
                    }
                    v
                };
            }
            for (j, x) in words.iter().enumerate() {
                let r = warp + PACK_BLOCK[1] * j as u32;
                asm!("st.shared.u32 [{a}], {v};", a = in(reg32) word_at(r, lane), v = in(reg32) *x, options(nostack));
            }
            sync_threads();
            // 4 x 4 blocks: lane t, word w = the block's column of words.
            let mut b = warp * PACK_BLOCK[0] + lane;
            while b < WORDS * WORDS {
                let (w, t) = (b / WORDS, b % WORDS);
                let mut v = [0u32; 4];
                for (i, x) in v.iter_mut().enumerate() {
                    asm!("ld.shared.u32 {x}, [{a}];", x = out(reg32) *x, a = in(reg32) word_at(4 * t + i as u32, w), options(readonly, nostack));
                }
                // Byte e of out[k] is byte k of v[e]: line 4w + k of the
                // copy, source lines 4t .. 4t + 3.
                let (lo01, hi01, lo23, hi23) = (
                    prmt(v[0], v[1], 0x5140),
                    prmt(v[0], v[1], 0x7362),
                    prmt(v[2], v[3], 0x5140),
                    prmt(v[2], v[3], 0x7362),
                );
                let out = [
                    prmt(lo01, lo23, 0x5410),
                    prmt(lo01, lo23, 0x7632),
                    prmt(hi01, hi23, 0x5410),
                    prmt(hi01, hi23, 0x7632),
                ];
                for (k, x) in out.iter().enumerate() {
                    let (c, r) = (c0 + 4 * w + k as u32, r0 + 4 * t);
                    let at = dst.wrapping_add(c as usize * ld_dst as usize + r as usize);
                    if whole {
                        asm!("st.global.u32 [{p}], {x};", p = in(reg64) at, x = in(reg32) *x, options(nostack));
                    } else if c < cols {
                        for e in 0..4 {
                            if r + e < rows {
                                <u8 as Word>::st_global(at.add(e as usize), (*x >> (8 * e)) as u8);
                            }
                        }
                    }
                }
                b += threads;
            }
            sync_threads(); // the tile is read before the next one is written
            bx += gx;
        }
        by += gy;
    }
}

/// `prmt.b32 d, a, b, selector`: byte i of d is byte `selector`'s nibble i
/// of the eight bytes b:a (0-3 from a, 4-7 from b).
#[inline(always)]
fn prmt(a: u32, b: u32, selector: u32) -> u32 {
    let d: u32;
    // SAFETY: a register-only permute.
    unsafe {
        asm!("prmt.b32 {d}, {a}, {b}, {s};", d = out(reg32) d, a = in(reg32) a, b = in(reg32) b, s = in(reg32) selector, options(pure, nomem, nostack));
    }
    d
}

/// The realigning copy (see the module docs): line `l`'s `line_bytes`
/// bytes from `src + l * ld_src` to `dst + l * ld_dst` (pitches in bytes).
///
/// # Safety
/// `src`, `dst`, `ld_src` and `ld_dst` are multiples of 16; `src` holds
/// `lines` readable lines of `line_bytes` bytes `ld_src` apart, `dst` room
/// for as many `ld_dst` apart, not overlapping `src`; blocks of
/// `COPY_THREADS` x 1 threads.
#[inline(always)]
pub unsafe fn copy_lines(lines: u32, line_bytes: u32, src: *const u8, ld_src: u64, dst: *mut u8, ld_dst: u64) {
    let [tx, _] = thread_idx();
    let [gx, gy] = grid_dim();
    let [bx, by, _] = block_idx();
    let chunks = line_bytes / 16;
    let tail = line_bytes % 16;
    // A line's work items: its whole chunks, then one for the tail bytes.
    let items = chunks + (tail > 0) as u32;
    let mut line = by;
    while line < lines {
        let from = src.add(line as usize * ld_src as usize);
        let to = dst.add(line as usize * ld_dst as usize);
        let mut i = bx * COPY_THREADS + tx;
        while i < items {
            let at = i as usize * 16;
            if i < chunks {
                let (x, y, z, w): (u32, u32, u32, u32);
                asm!(
                    "ld.global.nc.v4.u32 {{{x}, {y}, {z}, {w}}}, [{p}];",
                    x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
                    p = in(reg64) from.add(at),
                    options(readonly, nostack)
                );
                asm!(
                    "st.global.v4.u32 [{p}], {{{x}, {y}, {z}, {w}}};",
                    p = in(reg64) to.add(at),
                    x = in(reg32) x, y = in(reg32) y, z = in(reg32) z, w = in(reg32) w,
                    options(nostack)
                );
            } else {
                let mut b = 0;
                while b < tail {
                    let at = at + b as usize;
                    <u8 as Word>::st_global(to.add(at), <u8 as Word>::ld_global(from.add(at)));
                    b += 1;
                }
            }
            i += gx * COPY_THREADS;
        }
        line += gy;
    }
}

/// Entry point `copy_lines_16`: the realigning copy of stage 9's operands.
///
/// # Safety
/// As [`copy_lines`].
#[cfg(gemm_sm90a)]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn copy_lines_16(
    lines: u32,
    line_bytes: u32,
    src: *const u8,
    ld_src: u64,
    dst: *mut u8,
    ld_dst: u64,
) {
    copy_lines(lines, line_bytes, src, ld_src, dst, ld_dst)
}

macro_rules! export_pack {
    ($name:ident, $t:ty, $f:ident) => {
        #[doc = concat!("Entry point `", stringify!($name), "`: the pack copy of ", stringify!($t), " elements.")]
        ///
        /// # Safety
        /// As [`transpose`].
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            rows: u32,
            cols: u32,
            src: *const $t,
            ld: u32,
            dst: *mut $t,
            ld_dst: u32,
        ) {
            $f(rows, cols, src, ld, dst, ld_dst)
        }
    };
    ($name:ident, $t:ty) => {
        export_pack!($name, $t, transpose);
    };
}

#[cfg(not(gemm_sm90a))]
export_pack!(dgemm_pack, f64);
#[cfg(not(gemm_sm90a))]
export_pack!(sgemm_pack, f32);
// Every module's: the K-major copies of the MN-major tf32 (u32 words) and
// i8 (u8) operands of stages 8 (mixed precision) and 9, which neither
// ldmatrix nor wgmma reads transposed; of a 16-bit B that a narrow stage-9
// tile reads K-major only (u16); and of the small operand of a
// token-sized product whose k is strided (every width).
export_pack!(transpose_b64, f64);
export_pack!(transpose_b32, u32);
export_pack!(transpose_b16, u16);
export_pack!(transpose_b8, u8, transpose_bytes);
