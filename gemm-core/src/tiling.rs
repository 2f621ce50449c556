//! Block, warp and thread tiles of stages 5-8, the shared-memory layouts the
//! kernels and the launcher agree on, and block rasterization.
//!
//! Words: the block tile is BM x BN of C, stepping BK along k; a warp tile is
//! WM x WN; a thread tile TM x TN. The pipeline depth of stages 7 and 8 is
//! the number of shared-memory buffers, each holding a BM x BK tile of A and
//! a BK x BN tile of B.
//!
//! Each operand tile is stored in shared memory as lines along the operand's
//! contiguous dimension (the order in which `cp.async` copies it), so its
//! layout depends on [`KernelLayouts`]: "k-contiguous" for a row-major A or a
//! column-major B, "m-/n-contiguous" otherwise.

use crate::shape::{KernelLayouts, Layout};

/// Block tile: BM rows x BN columns of C per block, BK along k per step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockTile {
    /// BM: rows of C per block.
    pub bm: u32,
    /// BN: columns of C per block.
    pub bn: u32,
    /// BK: step along k (columns of the A tile, rows of the B tile).
    pub bk: u32,
}

impl BlockTile {
    /// A BM x BN x BK block tile.
    pub const fn new(bm: u32, bn: u32, bk: u32) -> Self {
        BlockTile { bm, bn, bk }
    }
}

impl core::fmt::Display for BlockTile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}x{}x{}", self.bm, self.bn, self.bk)
    }
}

/// Warp tile: WM x WN of C per warp (stages 7 and 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WarpTile {
    /// WM: rows of C per warp.
    pub wm: u32,
    /// WN: columns of C per warp.
    pub wn: u32,
}

impl WarpTile {
    /// A WM x WN warp tile.
    pub const fn new(wm: u32, wn: u32) -> Self {
        WarpTile { wm, wn }
    }
}

impl core::fmt::Display for WarpTile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}x{}", self.wm, self.wn)
    }
}

/// Thread tile: TM x TN elements of C held in one thread's registers
/// (stages 5-7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ThreadTile {
    /// TM: rows of C per thread.
    pub tm: u32,
    /// TN: columns of C per thread.
    pub tn: u32,
}

impl ThreadTile {
    /// A TM x TN thread tile.
    pub const fn new(tm: u32, tn: u32) -> Self {
        ThreadTile { tm, tn }
    }
}

impl core::fmt::Display for ThreadTile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}x{}", self.tm, self.tn)
    }
}

/// Bytes moved by one vector access: 16 (`ld.global.v2.f64`, `.v4.f32`,
/// `cp.async ... 16`).
pub const VECTOR_BYTES: u32 = 16;

/// Elements per 16-byte vector: 2 for f64, 4 for f32.
pub const fn vector_width(element_bytes: u32) -> u32 {
    VECTOR_BYTES / element_bytes
}

/// Threads of the lane grid in one warp.
pub const WARP_SIZE: u32 = 32;

/// Shared-memory layout of one pipeline stage (or the single buffer of stages
/// 5 and 6), in elements: the A tile at offset 0 with row stride `a_ld`, the B
/// tile at `b_offset` with row stride `b_ld`; `stage_elems` per stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmemLayout {
    /// Row stride of the A tile (elements).
    pub a_ld: u32,
    /// Offset of the B tile from the stage's start (elements).
    pub b_offset: u32,
    /// Row stride of the B tile (elements).
    pub b_ld: u32,
    /// Elements per stage (A tile + B tile, padding included).
    pub stage_elems: u32,
}

/// Stage 5: A row-major `[BM][BK]`, B row-major `[BK][BN]`, no padding (the
/// bank conflicts of the A reads are what stage 6 removes).
pub const fn s05_layout(t: BlockTile) -> SmemLayout {
    SmemLayout { a_ld: t.bk, b_offset: t.bm * t.bk, b_ld: t.bn, stage_elems: t.bm * t.bk + t.bk * t.bn }
}

/// Stage 6: A stored k-major (transposed) `[BK][BM + V]`, B `[BK][BN]`, with
/// V = [`vector_width`]. The V-element pad keeps rows 16-byte aligned and
/// moves consecutive k rows by V elements, so the transposing stores of a
/// warp spread over all banks (f64: each 8-byte bank hit exactly twice by 32
/// lanes, the minimum); the 16-byte reads of both tiles are conflict-free by
/// the thread mapping (`gemm-kernels/src/s06_vectorized.rs`).
pub const fn s06_layout(t: BlockTile, element_bytes: u32) -> SmemLayout {
    let a_ld = t.bm + vector_width(element_bytes);
    SmemLayout { a_ld, b_offset: t.bk * a_ld, b_ld: t.bn, stage_elems: t.bk * a_ld + t.bk * t.bn }
}

/// Stage 7, with the tiles in the operands' storage order (cp.async cannot
/// transpose):
/// - A row-major: `[BM][BK + V]`; the pad makes the row stride an odd
///   number of 16-byte units, so the 8 rows a warp reads at once (16-byte
///   reads along k) fall in 8 distinct 16-byte bank groups.
/// - A column-major: `[BK][BM]`; a warp reads consecutive 16-byte vectors along m.
/// - B row-major: `[BK][BN]`; consecutive 16-byte vectors along n.
/// - B column-major: `[BN][BK + V]`, odd 16-byte row stride as for A.
///
/// `a_ld` and `b_ld` are the strides between the stored lines.
pub const fn s07_layout(t: BlockTile, element_bytes: u32, layouts: KernelLayouts) -> SmemLayout {
    let v = vector_width(element_bytes);
    let (a_lines, a_ld) = match layouts.a {
        Layout::RowMajor => (t.bm, t.bk + v),
        Layout::ColMajor => (t.bk, t.bm),
    };
    let (b_lines, b_ld) = match layouts.b {
        Layout::RowMajor => (t.bk, t.bn),
        Layout::ColMajor => (t.bn, t.bk + v),
    };
    let b_offset = a_lines * a_ld;
    SmemLayout { a_ld, b_offset, b_ld, stage_elems: b_offset + b_lines * b_ld }
}

/// Stage 8 (f64), tiles in the operands' storage order. With g = lane / 4
/// and t = lane % 4, a warp reads A(g, t + c) and B(t + c, g) for its mma
/// fragments; the pads map those 32 8-byte reads onto the 16 bank pairs
/// exactly twice each (the minimum for 256 bytes) and keep lines 16-byte
/// aligned for cp.async:
/// - A row-major `[BM][BK + 4]`: address g (BK + 4) + t, and BK + 4 = 4 (mod 16);
/// - A column-major `[BK][BM + 4]`: the kernel then holds rows 2g and 2g + 1
///   (one 16-byte read at t (BM + 4) + 2g); with (BM + 4) / 2 = 2 (mod 8)
///   the 8 lanes of each quarter-warp hit 8 distinct 16-byte bank groups;
/// - B row-major `[BK][BN + 4]`: t (BN + 4) + g;
/// - B column-major `[BN][BK + 4]`: g (BK + 4) + t.
pub const fn s08_layout(t: BlockTile, layouts: KernelLayouts) -> SmemLayout {
    let (a_lines, a_ld) = match layouts.a {
        Layout::RowMajor => (t.bm, t.bk + 4),
        Layout::ColMajor => (t.bk, t.bm + 4),
    };
    let (b_lines, b_ld) = match layouts.b {
        Layout::RowMajor => (t.bk, t.bn + 4),
        Layout::ColMajor => (t.bn, t.bk + 4),
    };
    let b_offset = a_lines * a_ld;
    SmemLayout { a_ld, b_offset, b_ld, stage_elems: b_offset + b_lines * b_ld }
}

/// Bytes of shared memory after stage 8's DEPTH pipeline buffers in which
/// the block parks what only its epilogue needs (the block tile's origin and
/// C's address) across the main loop, rather than in two or three registers
/// that ptxas would otherwise spill.
pub const S08_STASH_BYTES: u32 = 16;

/// First row and column of the block tile of C that block (bx, by) computes
/// in stages 5-7: (by * BM, bx * BN), matching the grid (ceil(n / BN),
/// ceil(m / BM)) of `KernelConfig::geometry` (stage 8 rasterizes, [`raster`]).
#[inline(always)]
pub const fn block_tile_origin(block_idx: [u32; 2], tile: BlockTile) -> (u32, u32) {
    (block_idx[1] * tile.bm, block_idx[0] * tile.bn)
}

/// Rows of block tiles in one raster group (stage 8): consecutive blocks walk
/// down a group of this many tile rows before moving to the next column, so
/// the tiles of A and B they share stay in L2.
pub const RASTER_GROUP: u32 = 8;

/// The block tile (tile row, tile column) that block `linear` (0-based, in
/// launch order) computes, for `tiles_m x tiles_n` block tiles, with blocks
/// rasterized in groups of `group` tile rows: inside a group, consecutive
/// blocks go down a column. Every tile is visited exactly once (a test checks).
#[inline(always)]
pub const fn raster(linear: u32, tiles_m: u32, tiles_n: u32, group: u32) -> (u32, u32) {
    let per_group = group * tiles_n;
    let g = linear / per_group;
    let first_m = g * group;
    let rows = if tiles_m - first_m < group { tiles_m - first_m } else { group };
    let within = linear - g * per_group;
    (first_m + within % rows, within / rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use proptest::prelude::*;

    /// The 32 fragment reads of a warp hit each of the 16 8-byte bank pairs
    /// exactly twice, for every operand layout (stage 8).
    #[test]
    fn stage8_fragment_reads_are_conflict_free() {
        for t in [BlockTile::new(128, 64, 16), BlockTile::new(64, 64, 32), BlockTile::new(128, 128, 16)] {
            for layouts in KernelLayouts::ALL {
                let l = s08_layout(t, layouts);
                // A(g, t) and B(t, g): (line, position) in the stored tile.
                let a = |g: u32, q: u32| g * l.a_ld + q;
                let b = |q: u32, g: u32| if layouts.b == Layout::RowMajor { q * l.b_ld + g } else { g * l.b_ld + q };
                if layouts.a == Layout::ColMajor {
                    // 16-byte reads of rows (2g, 2g + 1) at k = t: per quarter-warp
                    // (8 lanes), 8 distinct 16-byte bank groups.
                    for quarter in 0..4u32 {
                        let mut groups = [0u32; 8];
                        for lane in quarter * 8..quarter * 8 + 8 {
                            let doubles = (lane % 4) * l.a_ld + 2 * (lane / 4);
                            assert_eq!(doubles % 2, 0);
                            groups[(doubles / 2 % 8) as usize] += 1;
                        }
                        assert!(groups.iter().all(|&h| h == 1), "{layouts:?} {t}: {groups:?}");
                    }
                }
                let fs: [&dyn Fn(u32, u32) -> u32; 2] = [&a, &|g, q| b(q, g)];
                for f in fs.into_iter().skip(usize::from(layouts.a == Layout::ColMajor)) {
                    let mut hits = [0u32; 16];
                    for lane in 0..32 {
                        hits[(f(lane / 4, lane % 4) % 16) as usize] += 1;
                    }
                    assert!(hits.iter().all(|&h| h == 2), "{layouts:?} {t}: {hits:?}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn raster_visits_every_tile_once(tiles_m in 1u32..40, tiles_n in 1u32..40, group in 1u32..10) {
            let mut seen = std::vec![0u8; (tiles_m * tiles_n) as usize];
            for linear in 0..tiles_m * tiles_n {
                let (r, c) = raster(linear, tiles_m, tiles_n, group);
                prop_assert!(r < tiles_m && c < tiles_n);
                seen[(r * tiles_n + c) as usize] += 1;
            }
            prop_assert!(seen.iter().all(|&x| x == 1));
        }
    }

    #[test]
    fn layouts_keep_rows_16_byte_aligned() {
        for t in [BlockTile::new(128, 64, 16), BlockTile::new(64, 64, 32), BlockTile::new(128, 128, 16)] {
            for layouts in KernelLayouts::ALL {
                for bytes in [4, 8] {
                    for l in [s06_layout(t, bytes), s07_layout(t, bytes, layouts)] {
                        assert_eq!(l.a_ld * bytes % 16, 0);
                        assert_eq!(l.b_ld * bytes % 16, 0);
                        assert_eq!(l.b_offset * bytes % 16, 0);
                        assert_eq!(l.stage_elems * bytes % 16, 0);
                    }
                    // Stage 7: k-contiguous lines are an odd number of 16-byte units apart.
                    let l = s07_layout(t, bytes, layouts);
                    if layouts.a == Layout::RowMajor {
                        assert_eq!(l.a_ld * bytes / 16 % 2, 1);
                    }
                    if layouts.b == Layout::ColMajor {
                        assert_eq!(l.b_ld * bytes / 16 % 2, 1);
                    }
                }
                let l = s08_layout(t, layouts);
                assert_eq!((l.a_ld * 8 % 16, l.b_ld * 8 % 16, l.b_offset * 8 % 16), (0, 0, 0));
            }
        }
    }
}
