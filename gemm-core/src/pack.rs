//! Packing: before the product, a copy of each operand whose lines run along
//! k (a row-major A, a column-major B, in kernel form) into a workspace where
//! they run along m or n (A column-major, B row-major), so that the product
//! runs the kernels of the `tn` module (`KernelLayouts::PACKED`).
//!
//! Why: a tile whose lines run along k is read from shared memory in
//! 16-byte vectors along k, TM (TN) of them per V steps of k, which holds
//! V x TM values of A in registers; tiles along m and n are read V rows at a
//! time. On an H200 the stage-7 SGEMM with both operands along m and n ran
//! 0.97 of cuBLAS at 4096³ where the row-major A ran 0.89 (ladder of
//! 2f135808ae, 2026-11-24). The copy is a transpose, read and written once
//! (memory-bound: 2 x 64 MiB at 4096² f32, tens of microseconds), so it pays
//! where the product is long; the plan takes it from measurement.
//!
//! The packed operand's lines are padded to a multiple of 128 bytes
//! ([`packed_ld`]), so its leading dimension allows 16-byte copies whatever
//! the user's was.
//!
//! # The kernel
//! [`pack_entry`]: `(rows, cols, src, ld, dst, ld_dst)` writes
//! `dst[c * ld_dst + r] = src[r * ld + c]` for the `rows x cols` matrix
//! stored at `src` (lines of `cols`), through 32 x 32 tiles in shared memory
//! (rows padded to 33 elements: no bank conflicts on the transposed read):
//! blocks of [`PACK_BLOCK`] threads, grid [`pack_grid`], each block walking
//! tiles at a grid-sized stride, [`pack_smem_bytes`] of dynamic shared
//! memory.

use crate::config::Precision;
use crate::geometry::ceil_div;
use crate::shape::{GemmDims, KernelLayouts, Layout, MatrixDims};

/// Side of the square tile a block transposes at a time.
pub const PACK_TILE: u32 = 32;
/// Threads of a pack block, x (along the source line) by y.
pub const PACK_BLOCK: [u32; 2] = [32, 8];
/// The largest y extent of a grid (CUDA's limit).
const MAX_GRID_Y: u32 = 65_535;

/// The pack kernel's entry point in every PTX module.
pub const fn pack_entry(precision: Precision) -> &'static str {
    match precision {
        Precision::F64 => "dgemm_pack",
        Precision::F32 => "sgemm_pack",
    }
}

/// The transposed copies of elements of 8, 4, 2 and 1 bytes, in every
/// module (`transpose_b64` .. `transpose_b8`; any type's bits).
pub const TRANSPOSE_ENTRIES: [&str; 4] = ["transpose_b64", "transpose_b32", "transpose_b16", "transpose_b8"];

/// The transposed copy of elements of `element_bytes` bytes (8, 4, 2 or 1;
/// None otherwise).
pub const fn transpose_entry(element_bytes: usize) -> Option<&'static str> {
    match element_bytes {
        8 => Some(TRANSPOSE_ENTRIES[0]),
        4 => Some(TRANSPOSE_ENTRIES[1]),
        2 => Some(TRANSPOSE_ENTRIES[2]),
        1 => Some(TRANSPOSE_ENTRIES[3]),
        _ => None,
    }
}

/// Grid of the pack kernel for a `rows x cols` source (lines of `cols`):
/// one block per 32 x 32 tile, y capped at 65535 (blocks then loop).
pub const fn pack_grid(rows: u32, cols: u32) -> [u32; 3] {
    tile_grid(rows, cols, PACK_TILE)
}

/// One block per `tile x tile` tile of a `rows x cols` source, y capped at
/// 65535 (blocks then loop), at least one block each way.
const fn tile_grid(rows: u32, cols: u32, tile: u32) -> [u32; 3] {
    let x = ceil_div(cols, tile);
    let y = ceil_div(rows, tile);
    let y = if y > MAX_GRID_Y { MAX_GRID_Y } else { y };
    [if x == 0 { 1 } else { x }, if y == 0 { 1 } else { y }, 1]
}

/// Side of the square tile, in bytes, of the transposed copy of 1-byte
/// elements (`transpose_b8`): each thread moves 4-byte words, and a 4 x 4
/// block of bytes is transposed in registers (byte permutes), so a warp
/// reads and writes whole 128-byte lines.
pub const BYTE_TILE: u32 = 128;

/// Side of the square tile of the transposed copy of elements of
/// `element_bytes` bytes: [`BYTE_TILE`] for 1-byte elements, else
/// [`PACK_TILE`].
pub const fn transpose_tile(element_bytes: u32) -> u32 {
    if element_bytes == 1 {
        BYTE_TILE
    } else {
        PACK_TILE
    }
}

/// Grid of the transposed copy (`transpose_b64` .. `transpose_b8`) of a
/// `rows x cols` source of elements of `element_bytes` bytes: one block
/// per [`transpose_tile`], y capped at 65535 (blocks then loop).
pub const fn transpose_grid(rows: u32, cols: u32, element_bytes: u32) -> [u32; 3] {
    tile_grid(rows, cols, transpose_tile(element_bytes))
}

/// Dynamic shared memory of a transposed copy's block: the padded 32 x 33
/// tile ([`pack_tile_bytes`]), or for 1-byte elements a 128 x 128 one
/// (its 4-byte words swizzled instead of padded).
pub const fn transpose_smem_bytes(element_bytes: u32) -> u32 {
    if element_bytes == 1 {
        BYTE_TILE * BYTE_TILE
    } else {
        pack_tile_bytes(element_bytes)
    }
}

/// Threads per block of stage 9's realigning copy (`copy_lines_16`: an
/// operand's lines copied to lines on 128 bytes, 16 bytes per thread).
pub const COPY_THREADS: u32 = 256;

/// Grid of the realigning copy of `lines` lines of `line_bytes` bytes: x
/// over a line's 16-byte chunks (and its tail), y over lines, capped at
/// 65535 (blocks then loop).
pub const fn copy_grid(lines: u32, line_bytes: u32) -> [u32; 3] {
    let items = ceil_div(line_bytes, 16);
    let x = ceil_div(items, COPY_THREADS);
    let y = if lines > MAX_GRID_Y { MAX_GRID_Y } else { lines };
    [if x == 0 { 1 } else { x }, if y == 0 { 1 } else { y }, 1]
}

/// Dynamic shared memory of a pack block: a 32 x 33 tile.
pub const fn pack_smem_bytes(precision: Precision) -> u32 {
    pack_tile_bytes(precision.bytes())
}

/// The 32 x 33 tile of a pack block for elements of `element_bytes` bytes
/// (also the transposes of 8-, 4- and 2-byte words).
pub const fn pack_tile_bytes(element_bytes: u32) -> u32 {
    PACK_TILE * (PACK_TILE + 1) * element_bytes
}

/// Leading dimension of a packed operand whose lines hold `len` elements
/// of `bytes` bytes: `len` rounded up to 128 bytes (at least one line's worth).
pub const fn packed_ld(len: usize, bytes: usize) -> usize {
    let per = 128 / bytes;
    let len = if len == 0 { 1 } else { len };
    len.div_ceil(per) * per
}

/// One operand to pack: the source as stored (`rows` lines of `cols`
/// elements, leading dimension `ld`) and the packed copy's leading
/// dimension (its `cols` lines of `rows`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackCopy {
    /// Lines of the source.
    pub rows: usize,
    /// Elements per source line.
    pub cols: usize,
    /// Source leading dimension.
    pub ld: usize,
    /// Leading dimension of the packed copy (`cols` lines of `rows`).
    pub ld_packed: usize,
}

impl PackCopy {
    /// The source as stored: `rows` lines of `cols` (row-major), `ld` apart.
    pub const fn source(&self) -> MatrixDims {
        MatrixDims::new(self.rows, self.cols, Layout::RowMajor, self.ld)
    }

    /// The packed copy: the same matrix stored the other way, `cols` lines
    /// of `rows` (column-major), `ld_packed` apart.
    pub const fn copy(&self) -> MatrixDims {
        MatrixDims::new(self.rows, self.cols, Layout::ColMajor, self.ld_packed)
    }

    /// Elements of the packed copy's workspace (None past `usize`).
    pub const fn len(&self) -> Option<usize> {
        self.copy().required_len()
    }

    /// Whether the copy has no element.
    pub const fn is_empty(&self) -> bool {
        self.rows == 0 || self.cols == 0
    }
}

impl KernelLayouts {
    /// The layouts a packed product runs in: A column-major (lines along m),
    /// B row-major (lines along n): the `tn` module.
    pub const PACKED: KernelLayouts = KernelLayouts { a: Layout::ColMajor, b: Layout::RowMajor };
}

/// What packing does to a product in kernel form (C row-major): the copies
/// of A and of B it makes (None where the operand already runs along m or
/// n), and the product's dimensions over the packed operands (layouts
/// [`KernelLayouts::PACKED`], the packed leading dimensions).
pub const fn packed(dims: &GemmDims, precision: Precision) -> (GemmDims, Option<PackCopy>, Option<PackCopy>) {
    let bytes = precision.bytes() as usize;
    let mut out = *dims;
    let a = match dims.a_layout {
        Layout::RowMajor => {
            let ld_packed = packed_ld(dims.m, bytes);
            out.a_layout = Layout::ColMajor;
            out.lda = ld_packed;
            Some(PackCopy { rows: dims.m, cols: dims.k, ld: dims.lda, ld_packed })
        }
        Layout::ColMajor => None,
    };
    let b = match dims.b_layout {
        Layout::ColMajor => {
            let ld_packed = packed_ld(dims.n, bytes);
            out.b_layout = Layout::RowMajor;
            out.ldb = ld_packed;
            Some(PackCopy { rows: dims.n, cols: dims.k, ld: dims.ldb, ld_packed })
        }
        Layout::RowMajor => None,
    };
    (out, a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(m: usize, n: usize, k: usize, a: Layout, b: Layout) -> GemmDims {
        let lda = if a == Layout::RowMajor { k + 3 } else { m + 1 };
        let ldb = if b == Layout::RowMajor { n } else { k };
        GemmDims { m, n, k, lda, ldb, ldc: n, a_layout: a, b_layout: b, c_layout: Layout::RowMajor }
    }

    #[test]
    fn packing_moves_k_lines_to_m_and_n_lines() {
        // A row-major (lines along k): packed column-major, ld 2047 -> 2048 (f32).
        let (p, a, b) = packed(&dims(2047, 100, 33, Layout::RowMajor, Layout::RowMajor), Precision::F32);
        assert_eq!(a, Some(PackCopy { rows: 2047, cols: 33, ld: 36, ld_packed: 2048 }));
        assert_eq!(b, None);
        assert_eq!((p.a_layout, p.lda, p.b_layout, p.ldb), (Layout::ColMajor, 2048, Layout::RowMajor, 100));
        assert_eq!(p.layouts(), KernelLayouts::PACKED);
        assert_eq!((p.m, p.n, p.k, p.ldc), (2047, 100, 33, 100));
        // B column-major: packed row-major, f64 lines of 16 elements.
        let (p, a, b) = packed(&dims(5, 17, 9, Layout::ColMajor, Layout::ColMajor), Precision::F64);
        assert_eq!(a, None);
        assert_eq!(b, Some(PackCopy { rows: 17, cols: 9, ld: 9, ld_packed: 32 }));
        assert_eq!((p.a_layout, p.lda, p.b_layout, p.ldb), (Layout::ColMajor, 6, Layout::RowMajor, 32));
        // Both, and already packed.
        let (p, a, b) = packed(&dims(8, 8, 8, Layout::RowMajor, Layout::ColMajor), Precision::F64);
        assert!(a.is_some() && b.is_some() && p.layouts() == KernelLayouts::PACKED);
        let d = dims(8, 8, 8, Layout::ColMajor, Layout::RowMajor);
        assert_eq!(packed(&d, Precision::F32), (d, None, None));
    }

    #[test]
    fn packed_copy_length_and_grid() {
        let c = PackCopy { rows: 2047, cols: 33, ld: 36, ld_packed: 2048 };
        assert_eq!(c.len(), Some(32 * 2048 + 2047));
        assert_eq!(packed_ld(0, 8), 16);
        assert_eq!(packed_ld(16, 8), 16);
        assert_eq!(packed_ld(17, 4), 32);
        assert_eq!(pack_grid(2047, 33), [2, 64, 1]);
        assert_eq!(pack_grid(1 << 30, 1), [1, 65_535, 1]);
        assert_eq!(pack_smem_bytes(Precision::F64), 32 * 33 * 8);
    }
}
