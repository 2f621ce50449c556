//! Split-K: one product computed as `slices` partial products over
//! consecutive ranges of k, summed in a fixed order.
//!
//! A C with too few tiles to fill the GPU (a small C with a long k, a
//! skinny C) leaves most SMs idle while each of its few blocks walks a long
//! k loop. Split-K gives each tile `slices` blocks instead: slice s
//! multiplies A's columns and B's rows `s * k_slice .. min((s + 1) * k_slice, k)`
//! into its own m x n partial C in a workspace, and a second kernel sums the
//! partials in slice order, `C <- alpha * (W_0 + W_1 + ... + W_{slices-1}) + beta * C`:
//! the same sums in the same order on every run (no floating-point atomics),
//! so the result is bitwise deterministic. The partial products are a strided
//! batch ([`crate::batch`]) whose product s has its k clamped to its slice
//! ([`slice_k`]).
//!
//! The split is chosen on the host by a model of waves (`gemm::tuning::
//! WaveModel`); the ladder benchmark measures splits around the model's and
//! the tuning table keeps the fastest where it was measured.
//!
//! Source: the split-K ("sliced-K" across blocks) GEMM of CUTLASS
//! (NVIDIA, "CUTLASS: Fast Linear Algebra in CUDA C++", the `GemmSplitKParallel`
//! kernel and its reduction); stream-K (Osama, Merrill, Cecka, Garland and
//! Owens, "Stream-K: Work-centric Parallel Decomposition for Dense
//! Matrix-Matrix Multiplication on the GPU", 2023) for the wave analysis.

use crate::geometry::ceil_div;

/// The k ranges of a split into about `split` slices: `(k_slice, slices)`,
/// with `k_slice` a multiple of `bk` (so every slice but the last covers
/// whole k tiles, and slice starts keep 16-byte alignment) and `slices =
/// ceil(k / k_slice)` (at most `split`; fewer when k is short). `split` 0 or
/// 1, or k = 0, gives one slice of all of k.
///
/// ```
/// use gemm_core::split_k::slices;
/// assert_eq!(slices(16384, 8, 16), (2048, 8));
/// assert_eq!(slices(1000, 4, 16), (256, 4)); // 256 + 256 + 256 + 232
/// assert_eq!(slices(40, 8, 16), (16, 3)); // k too short for 8 slices
/// ```
pub const fn slices(k: u32, split: u32, bk: u32) -> (u32, u32) {
    if split <= 1 || k == 0 {
        return (k, 1);
    }
    let bk = if bk == 0 { 1 } else { bk };
    let k_slice = ceil_div(ceil_div(k, split), bk) * bk;
    (k_slice, ceil_div(k, k_slice))
}

/// Threads per block of the reduction kernel.
pub const REDUCE_THREADS: u32 = 256;

/// The most blocks a SM of the ladder's reduction grid ([`reduce_grid`]);
/// beyond, each thread loops.
pub const REDUCE_BLOCKS_PER_SM: u32 = 16;

/// Elements of C one thread of a reduction kernel sums, each slice's read
/// in one 16-byte access, for partial results of `elem_bytes` bytes (2 for
/// f64; 4 for f32 and for the tensor-core products' f32 or i32
/// workspace), where m n is a multiple of it; otherwise one.
pub const fn reduce_vector(elem_bytes: u32) -> u32 {
    if elem_bytes == 0 || elem_bytes > 16 {
        1
    } else {
        16 / elem_bytes
    }
}

/// The tensor-core products' [`reduce_vector`] (4-byte partial results).
pub const REDUCE_VECTOR: u32 = reduce_vector(4);

/// Blocks of the reduction kernel for an m x n C of partial results of
/// `elem_bytes` bytes on a GPU with `sms` SMs, at most `per_sm` a SM: one
/// thread per [`reduce_vector`] elements (where m n is a multiple of it,
/// else per element) up to that cap, then each thread loops (at least 1
/// block).
///
/// ```
/// use gemm_core::split_k::reduce_grid;
/// assert_eq!(reduce_grid(4096, 128, 8, (132, 16)), 1024); // f64: 2 a thread
/// assert_eq!(reduce_grid(4096, 128, 4, (132, 16)), 512); // f32: 4 a thread
/// assert_eq!(reduce_grid(3, 3, 4, (132, 16)), 1); // 9 elements, one a thread
/// assert_eq!(reduce_grid(1 << 16, 1 << 12, 8, (132, 16)), 132 * 16);
/// ```
pub const fn reduce_grid(m: u32, n: u32, elem_bytes: u32, (sms, per_sm): (u32, u32)) -> u32 {
    let elems = m as u64 * n as u64;
    let v = reduce_vector(elem_bytes) as u64;
    let per_thread = if elems % v == 0 { v } else { 1 };
    let blocks = elems.div_ceil(REDUCE_THREADS as u64 * per_thread);
    let cap = if sms == 0 { per_sm as u64 } else { sms as u64 * per_sm as u64 };
    let b = if blocks < cap { blocks } else { cap };
    if b == 0 {
        1
    } else {
        b as u32
    }
}

/// The PTX entry point of the reduction for `precision`.
pub const fn reduce_entry(precision: crate::Precision) -> &'static str {
    match precision {
        crate::Precision::F64 => "dgemm_split_k_reduce",
        crate::Precision::F32 => "sgemm_split_k_reduce",
    }
}

/// The k extent of slice `s` of a launch whose slices are `k_slice` long
/// (0: not split, all of `k`): `min(k_slice, k - s * k_slice)`.
#[inline(always)]
pub const fn slice_k(k: u32, k_slice: u32, s: u32) -> u32 {
    if k_slice == 0 {
        return k;
    }
    let start = s.saturating_mul(k_slice);
    let left = k.saturating_sub(start);
    if left < k_slice {
        left
    } else {
        k_slice
    }
}

/// A product whose last wave of block tiles would leave SMs idle, run in
/// two parts (the data-parallel waves plus a split remainder, one of the
/// hybrids of Osama et al.'s "Stream-K", with split-K in place of
/// stream-K's shared tiles): its first `head_tile_rows` rows of block tiles
/// whole, in full waves, then the remaining rows with k split in `slices`
/// into a workspace and summed in slice order (so the bits are the same
/// every run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailSplit {
    /// Rows of block tiles computed whole (at least 1, fewer than the C's).
    pub head_tile_rows: u32,
    /// Slices of k of the remaining rows (at least 2).
    pub slices: u32,
}

/// The [`TailSplit`] with the fewest k-tile steps on the busiest SM, for a
/// C of `tile_rows` x `tile_cols` block tiles whose k loop is `k_tiles`
/// tiles of `bk` elements (k elements in all), each block adding
/// `fixed_steps` of pipeline fill and epilogue, on `sms` SMs running one
/// block tile each at a time (so the busiest SM runs `ceil(blocks / sms)`
/// of them): the head's whole tiles plus the tail's slices, against
/// `ceil(tiles / sms) * (k_tiles + fixed_steps)` unsplit. Heads are the
/// most rows of tiles that fill whole waves, or one row fewer; slices are
/// at least 4 k tiles long, at most `max_slices` and at most as many as
/// give the tail two waves. None when no tail split
/// takes fewer steps (whole waves already, or k too short). The caller
/// adds the workspace's traffic and the reduction's launch.
///
/// ```
/// use gemm_core::split_k::{tail_split, TailSplit};
/// // 12 x 12 tiles on 132 SMs: 11 rows in one wave, the last row's 12
/// // tiles in 11 slices beside nothing else.
/// let t = tail_split(12, 12, 96, 16, 132, 2.0, 64).unwrap();
/// assert_eq!(t.head_tile_rows, 11);
/// assert!(t.slices >= 8);
/// // 4 x 33 tiles fill 132 SMs: nothing to balance.
/// assert_eq!(tail_split(4, 33, 96, 16, 132, 2.0, 64), None);
/// ```
pub fn tail_split(
    tile_rows: u64,
    tile_cols: u64,
    k_tiles: u64,
    bk: u32,
    sms: u64,
    fixed_steps: f64,
    max_slices: u32,
) -> Option<TailSplit> {
    let sms = sms.max(1);
    let tiles = tile_rows.checked_mul(tile_cols)?;
    if tile_rows < 2 || tiles % sms == 0 || k_tiles < 8 {
        return None;
    }
    let whole = tiles.div_ceil(sms) as f64 * (k_tiles as f64 + fixed_steps);
    let k = k_tiles.saturating_mul(bk as u64).min(u32::MAX as u64) as u32;
    let mut best: Option<(f64, TailSplit)> = None;
    // Heads: the most rows of tiles that fill whole waves, and one row
    // fewer (a larger tail for slices to share); slices: up to two waves of
    // the tail's blocks (more only adds waves). Few candidates: the host
    // plans every call.
    let full_rows = (tiles / sms * sms) / tile_cols;
    let top = full_rows.min(tile_rows - 1);
    for head in [top, top.saturating_sub(1)] {
        if head == 0 || best.is_some_and(|(_, t)| t.head_tile_rows as u64 == head) {
            continue;
        }
        let (head_tiles, tail_tiles) = (head * tile_cols, (tile_rows - head) * tile_cols);
        let head_steps = head_tiles.div_ceil(sms) as f64 * (k_tiles as f64 + fixed_steps);
        let most = (2 * sms).div_ceil(tail_tiles).min(max_slices as u64) as u32;
        let mut s = 2u32;
        while s <= most && k_tiles >= 4 * s as u64 {
            let (k_slice, n) = slices(k, s, bk);
            let slice_tiles = (k_slice as u64).div_ceil(bk.max(1) as u64) as f64;
            let steps = head_steps + (tail_tiles * n as u64).div_ceil(sms) as f64 * (slice_tiles + fixed_steps);
            // Fewer steps wins; a tie keeps the fewer slices (less workspace).
            if best.is_none_or(|(b, _)| steps < b) {
                best = Some((steps, TailSplit { head_tile_rows: head as u32, slices: n }));
            }
            s += 1;
        }
    }
    best.filter(|(steps, _)| *steps < whole).map(|(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tail_split_fills_the_last_wave() {
        // 3000^3 f16 on 128 x 256 tiles: 24 x 12 tiles (2.2 waves) on 132
        // SMs; two rows of tiles (24) left after 22 rows in two waves.
        let t = tail_split(24, 12, 47, 64, 132, 4.0, 64).expect("a tail");
        assert_eq!(t.head_tile_rows, 22);
        assert!(t.slices >= 2 && 24 * t.slices as u64 <= 132);
        // One wave short of filling: nothing to gain by a tail split.
        assert_eq!(tail_split(11, 12, 96, 16, 132, 2.0, 64), None);
        // A single row of tiles has no head.
        assert_eq!(tail_split(1, 12, 96, 16, 132, 2.0, 64), None);
        // k too short to slice.
        assert_eq!(tail_split(12, 12, 4, 16, 132, 2.0, 64), None);
    }

    proptest! {
        #[test]
        fn tail_splits_are_valid(rows in 1u64..200, cols in 1u64..200, k_tiles in 0u64..2000, sms in 1u64..200) {
            if let Some(t) = tail_split(rows, cols, k_tiles, 16, sms, 3.0, 64) {
                prop_assert!(t.head_tile_rows >= 1 && (t.head_tile_rows as u64) < rows);
                prop_assert!(t.slices >= 2 && t.slices <= 64);
                prop_assert!(k_tiles >= 4 * t.slices as u64);
            }
        }

        #[test]
        fn slices_cover_k_exactly(k in 0u32..1_000_000, split in 0u32..300, bk in prop::sample::select(&[1u32, 8, 16, 32][..])) {
            let (k_slice, n) = slices(k, split, bk);
            prop_assert!(n >= 1 && n <= split.max(1));
            let total: u64 = (0..n).map(|s| slice_k(k, if n == 1 { 0 } else { k_slice }, s) as u64).sum();
            prop_assert_eq!(total, k as u64);
            if n > 1 {
                prop_assert_eq!(k_slice % bk, 0);
                prop_assert!(slice_k(k, k_slice, n - 1) > 0); // no empty last slice
            }
        }
    }
}
