//! Geometry of the token-sized kernels (`gemm-kernels/src/skinny.rs`): products
//! where one side of C is small - the m = 1 to 16 rows of activations a
//! language model multiplies by a weight while it generates tokens, or the
//! same with n small. Such a product is bound by reading the large operand
//! once: these kernels read it exactly once, 16 bytes a lane, and keep the
//! small one in registers, with no tensor-core tile padding the small side
//! to 64 or 128 rows.
//!
//! # The product the kernel sees
//! `Y <- alpha * X W + beta * Y` with X s x k (the small operand, s <= S, the
//! kernel's row count), W k x N (the large one) and Y s x N; every operand
//! is addressed by strides in elements, so one kernel serves every op and
//! layout: X(i, kk) at `x[i x_rs + kk x_ks]`, Y(i, j) at `y[i y_rs + j y_cs]`,
//! W(kk, j) at `w[j ldw + kk]` when W's k is contiguous ([`WLayout::KContiguous`])
//! or `w[kk ldw + j]` when its N is ([`WLayout::NContiguous`]). The host
//! maps C = op(A) op(B) onto it: X = op(A) and W = op(B) when m is small, or
//! X = op(B)^T, W = op(A)^T and Y = C^T when n is.
//!
//! # The block
//! [`THREADS`] threads, [`WARPS`] warps; the block computes all s rows of Y
//! for [`cols_per_block`] columns, its warps splitting k, each warp's lanes
//! splitting it further ([`k_lanes`]). Each lane reads one 16-byte chunk
//! (V = 16 / element bytes elements) of W at a time:
//! - K-contiguous W: lane `l` reads columns `l / 4` and `l / 4 + 8` of the
//!   block's 16 at k offset `(l % 4) V` of the warp's chunk of `4 V`: a warp
//!   instruction reads 8 columns x 4 V contiguous elements.
//! - N-contiguous W: with `L` = [`wn_column_lanes`] (4; 2 for i8), lane `l`
//!   reads V columns `(l % L) V ..` of the block's `L V` at k row `l / L`
//!   of the warp's `32 / L`: a warp instruction reads `32 / L` rows x 64
//!   (i8: 32) contiguous bytes. For i8 ([`wn_quads`]) a lane's [`UNROLL`]
//!   rows of a tile are consecutive, so that it holds a 4 x 16 block of
//!   bytes, transposed 4 x 4 at a time (`prmt`) into words of 4 k of one
//!   column for `dp4a`: 2.5 instructions a byte of W at 8 rows of X, where
//!   unpacking each byte and multiplying it by each row took 9.
//!
//! The lanes' partial sums are added across the lanes of a warp that share
//! outputs (butterfly shuffles), then across the warps in warp order through
//! shared memory ([`smem_bytes`]): a fixed order, so the same bits every run.
//!
//! # Launch
//! Grid (`ceil(N / cols_per_block)`, `min(count, 65535)`, 1): the block's y
//! walks the batch in steps of gridDim.y.
//!
//! # Source
//! The shape of the problem and its bound: NVIDIA, "Matrix Multiplication
//! Background User's Guide" (arithmetic intensity, memory-bound products);
//! the warp-per-row GEMV layout as in cuBLAS's `gemv` and the split-k
//! reduction order as in CUTLASS's serial reduction.

use crate::geometry::ceil_div;

/// Threads in a block.
pub const THREADS: u32 = 256;
/// Warps in a block; they split k.
pub const WARPS: u32 = THREADS / 32;
/// Bytes each lane reads from W at a time.
pub const CHUNK_BYTES: u32 = 16;
/// Columns of W each lane reads for a K-contiguous W.
pub const COLS_PER_LANE: u32 = 2;
/// Grid y's limit: the batch is walked in steps of it.
pub const MAX_GRID_Y: u32 = 65535;
/// Chunks (K-contiguous W) or rows of k (N-contiguous W) each lane reads
/// from W per tile of k, all issued before any is used.
pub const UNROLL: u32 = 4;
/// Bytes of one row of X's tile of k for a K-contiguous W: the block's
/// warps read `UNROLL` chunks of 4 lanes each per tile.
pub const TILE_ROW_BYTES_WK: u32 = WARPS * 4 * CHUNK_BYTES * UNROLL;
/// The largest row count of the tensor-core form.
pub const MAX_MMA_ROWS: u32 = 32;
/// [`UNROLL`] of the tensor-core form: half, so that two buffers of 64 rows
/// of X's tile fit in shared memory.
pub const MMA_UNROLL: u32 = 2;
/// The largest row count of the tensor-core form for an N-contiguous W
/// (i8; one block a SM at 64 rows, 194 KiB of shared memory).
pub const MAX_MMA_WN_ROWS: u32 = 64;
/// Rows of k in a tile of the tensor-core form for an N-contiguous W (i8,
/// [`mma_wn_rows_for`]): each warp takes 2 x 64 rows a tile (a lane reads
/// 4-byte words of 4 columns at 32 rows, transposed into `mma.m16n8k32`'s
/// B fragments).
pub const MMA_WN_TILE_ROWS: u32 = WARPS * 64 * 2;

/// Which of W's dimensions is contiguous in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WLayout {
    /// k contiguous: `W(kk, j)` at `w[j ldw + kk]`.
    KContiguous,
    /// N contiguous: `W(kk, j)` at `w[kk ldw + j]`.
    NContiguous,
}

impl WLayout {
    /// The entry point's suffix: `wk` or `wn`.
    pub const fn suffix(self) -> &'static str {
        match self {
            WLayout::KContiguous => "wk",
            WLayout::NContiguous => "wn",
        }
    }
}

/// The operand and output types of a token-sized kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SkinnyTypes {
    /// f64 in, f64 out.
    F64,
    /// f32 in, f32 out (also a TF32 request: f32 arithmetic is at least as
    /// accurate).
    F32,
    /// f16 in, f16 out (f32 accumulation).
    F16,
    /// f16 in, f32 out.
    F16F32,
    /// bf16 in, bf16 out (f32 accumulation).
    Bf16,
    /// bf16 in, f32 out.
    Bf16F32,
    /// i8 in, i32 out (i32 accumulation, wrapping).
    S8,
}

impl SkinnyTypes {
    /// Bytes of an operand element.
    pub const fn input_bytes(self) -> u32 {
        match self {
            SkinnyTypes::F64 => 8,
            SkinnyTypes::F32 => 4,
            SkinnyTypes::F16 | SkinnyTypes::F16F32 | SkinnyTypes::Bf16 | SkinnyTypes::Bf16F32 => 2,
            SkinnyTypes::S8 => 1,
        }
    }

    /// Bytes of a partial sum (f64, f32 or i32).
    pub const fn acc_bytes(self) -> u32 {
        match self {
            SkinnyTypes::F64 => 8,
            _ => 4,
        }
    }

    /// Elements in one 16-byte chunk.
    pub const fn vector(self) -> u32 {
        CHUNK_BYTES / self.input_bytes()
    }

    /// The largest row count s a CUDA-core kernel of these types takes
    /// (see [`cuda_core_rows`]).
    pub const fn max_rows(self) -> u32 {
        cuda_core_rows(self, WLayout::KContiguous)
    }

    /// The name fragment of the entry points: `f64`, `f16_f32`, ...
    pub const fn name(self) -> &'static str {
        match self {
            SkinnyTypes::F64 => "f64",
            SkinnyTypes::F32 => "f32",
            SkinnyTypes::F16 => "f16",
            SkinnyTypes::F16F32 => "f16_f32",
            SkinnyTypes::Bf16 => "bf16",
            SkinnyTypes::Bf16F32 => "bf16_f32",
            SkinnyTypes::S8 => "s8",
        }
    }
}

/// The kernel's row count S for `s` rows: the smallest of 1, 2, 4, 8, 16 at
/// least s (None above `types.max_rows()` or for s = 0).
pub const fn rows_for(types: SkinnyTypes, s: u32) -> Option<u32> {
    if s == 0 || s > types.max_rows() {
        return None;
    }
    Some(s.next_power_of_two())
}

/// Lanes of a warp across W's columns for an N-contiguous W, one 16-byte
/// chunk of V columns each: 4, and 2 for i8 (32 columns a block, so that a
/// W 4096 wide still has 128 blocks to keep the SMs reading).
pub const fn wn_column_lanes(types: SkinnyTypes) -> u32 {
    match types {
        SkinnyTypes::S8 => 2,
        _ => 4,
    }
}

/// Whether a lane's [`UNROLL`] rows of an N-contiguous W in a tile are
/// consecutive rows of k (i8: multiplied 4 rows at a time by `dp4a` on
/// transposed 4 x 4 blocks of bytes) rather than `WARPS` x [`k_lanes`]
/// apart.
pub const fn wn_quads(types: SkinnyTypes) -> bool {
    matches!(types, SkinnyTypes::S8)
}

/// Lanes of a warp that split k (and share their outputs): 4 for a
/// K-contiguous W, `32 /` [`wn_column_lanes`] for an N-contiguous one.
pub const fn k_lanes(types: SkinnyTypes, layout: WLayout) -> u32 {
    match layout {
        WLayout::KContiguous => 4,
        WLayout::NContiguous => 32 / wn_column_lanes(types),
    }
}

/// Rows of k in a tile for an N-contiguous W: [`UNROLL`] rows a lane,
/// [`k_lanes`] lanes a warp along k (256; 512 for i8).
pub const fn tile_rows_wn(types: SkinnyTypes) -> u32 {
    WARPS * k_lanes(types, WLayout::NContiguous) * UNROLL
}

/// Columns of Y (and of W) one block computes: 16 for a K-contiguous W,
/// [`wn_column_lanes`] chunks of V for an N-contiguous one.
pub const fn cols_per_block(types: SkinnyTypes, layout: WLayout) -> u32 {
    match layout {
        WLayout::KContiguous => (32 / k_lanes(types, layout)) * COLS_PER_LANE,
        WLayout::NContiguous => wn_column_lanes(types) * types.vector(),
    }
}

/// Bytes between rows of X's tile in shared memory: a tile row (the
/// tensor-core form's, `mma`, is [`MMA_UNROLL`] chunks a lane long) and 16
/// bytes more, so that the rows fall on different banks (the tensor-core
/// form's lanes read 8 rows at once; a transposed X is written a column
/// of rows at a time).
pub const fn tile_pitch(types: SkinnyTypes, layout: WLayout, mma: bool) -> u32 {
    CHUNK_BYTES
        + match layout {
            WLayout::KContiguous if mma => TILE_ROW_BYTES_WK / UNROLL * MMA_UNROLL,
            WLayout::KContiguous => TILE_ROW_BYTES_WK,
            WLayout::NContiguous if mma => MMA_WN_TILE_ROWS * types.input_bytes(),
            WLayout::NContiguous => tile_rows_wn(types) * types.input_bytes(),
        }
}

/// Dynamic shared memory of a launch: two buffers of X's tile (S rows of
/// [`tile_pitch`]), then each warp's partial sums of the block's S x cols
/// outputs.
pub const fn smem_bytes(types: SkinnyTypes, layout: WLayout, rows: u32, mma: bool) -> u32 {
    2 * rows * tile_pitch(types, layout, mma) + WARPS * rows * cols_per_block(types, layout) * types.acc_bytes()
}

/// The most rows a CUDA-core kernel takes for W so stored: 4 for f64 with
/// W's k contiguous, none for f64 with W's N contiguous, 8 for the others
/// (beyond, the tensor-core form, [`mma_rows_for`], or the other kernels).
/// Measured beside cuBLAS (NVIDIA H200, 2026-11-26): f64 at 8 rows (4096
/// to 14336 x 4096) 0.59-0.87x, where stage 8's 32 x 32 tiles with k split
/// ran 0.91-1.06x; f32 at 16 rows 0.33-0.81x (8192 x 16 x 8192 and its
/// transpose), stage 7 1.05-1.19x; f16 and bf16 with n contiguous at 16
/// rows 0.36-0.41x (stage 9: 0.73x). f64 with W's N contiguous (4096 to
/// 14336 x 4096 and 4096 x 11008, 14336): stage 8 at 8 rows took less
/// time (0.098-0.137 ms on the H200, 0.126-0.172 on the H100, 2026-11-26)
/// than this kernel at 1 row (0.108-0.149 and 0.137-0.181 ms) and at 4
/// (0.136-0.172 ms, 0.72-0.77x cuBLAS on the H200).
pub const fn cuda_core_rows(types: SkinnyTypes, layout: WLayout) -> u32 {
    match (types, layout) {
        (SkinnyTypes::F64, WLayout::NContiguous) => 0,
        (SkinnyTypes::F64, WLayout::KContiguous) => 4,
        _ => 8,
    }
}

/// The tensor-core form's row count for `s` rows (K-contiguous W only):
/// 16 or 32 for f16, bf16 and i8; None for f32 (its tensor cores are
/// TF32), for f64 (m8n8k4 ran 0.38-0.56x cuBLAS at 32 and 64 rows, the
/// ladder 0.7-0.9x) and above [`MAX_MMA_ROWS`] (at 64 rows the form ran
/// 0.47-0.51x, stage 9 0.7x; NVIDIA H200, 2026-11-26).
pub const fn mma_rows_for(types: SkinnyTypes, s: u32) -> Option<u32> {
    if s == 0 || s > MAX_MMA_ROWS {
        return None;
    }
    let r = s.next_power_of_two();
    match types {
        SkinnyTypes::F32 | SkinnyTypes::F64 => None,
        _ => Some(if r < 16 { 16 } else { r }),
    }
}

/// The tensor-core form's row count for `s` rows where W's N is
/// contiguous: 16, 32 or 64 for i8 (`mma.m16n8k32` on W's bytes transposed
/// 4 x 4 in registers), None for the other types and above
/// [`MAX_MMA_WN_ROWS`]. The same block of 32 columns as the CUDA-core i8
/// kernel.
pub const fn mma_wn_rows_for(types: SkinnyTypes, s: u32) -> Option<u32> {
    if s == 0 || s > MAX_MMA_WN_ROWS || !matches!(types, SkinnyTypes::S8) {
        return None;
    }
    let r = s.next_power_of_two();
    Some(if r < 16 { 16 } else { r })
}

/// Whether `s` rows of i8 with W's N contiguous take the tensor-core form
/// ([`mma_wn_rows_for`], where X's k is contiguous) before the CUDA-core
/// kernel: from 2 rows. The form at 16 rows ran as fast as the CUDA-core
/// kernel at 1 (4096 to 14336 x 4096, 4096 x 11008; NVIDIA H100,
/// 2026-11-26: 0.021-0.049 ms against 0.022-0.046 ms) and faster than it
/// from 2 rows (0.029-0.059 ms at 2 rows, 0.064-0.24 ms at 8).
pub const fn mma_wn_first(types: SkinnyTypes, s: u32) -> bool {
    s >= 2 && mma_wn_rows_for(types, s).is_some()
}

/// Blocks per SM the kernel is compiled for (`.minnctapersm`, which caps
/// its registers at 65536 / (THREADS x blocks)): 2, so that two blocks'
/// loads are in flight on each SM, except where the partial sums alone
/// need more than half the registers (i8 with an N-contiguous W and S = 8:
/// 16 i32 sums a row per lane), where ptxas would spill.
pub const fn min_blocks_per_sm(types: SkinnyTypes, layout: WLayout, rows: u32) -> u32 {
    let sums_per_lane = match layout {
        WLayout::KContiguous => rows * COLS_PER_LANE * types.acc_bytes() / 4,
        WLayout::NContiguous => rows * types.vector() * types.acc_bytes() / 4,
    };
    if sums_per_lane > 64 {
        1
    } else {
        2
    }
}

/// [`min_blocks_per_sm`] of the tensor-core form: 2 up to 32 rows (a lane
/// holds S / 2 sums, S for f64), 1 at 64.
pub const fn mma_min_blocks_per_sm(rows: u32) -> u32 {
    if rows >= 64 {
        1
    } else {
        2
    }
}

/// The grid of `count` products with N columns of Y.
pub const fn grid(types: SkinnyTypes, layout: WLayout, n: u32, count: u32) -> [u32; 3] {
    let y = if count < MAX_GRID_Y { count } else { MAX_GRID_Y };
    [ceil_div(n, cols_per_block(types, layout)), if y == 0 { 1 } else { y }, 1]
}

/// Every CUDA-core token-sized kernel, one line per (name, types, S, W's
/// layouts); the kernels crate exports `<name>_wk` and `<name>_wn` as the
/// line lists them.
/// `gemm_core::skinny_menu!(my_macro)` expands to `my_macro! { (..) ... }`.
#[macro_export]
macro_rules! skinny_menu {
    ($callback:ident) => {
        $callback! {
            (skinny_f64_s1, F64, 1, [wk]) (skinny_f64_s2, F64, 2, [wk]) (skinny_f64_s4, F64, 4, [wk])
            (skinny_f32_s1, F32, 1, [wk, wn]) (skinny_f32_s2, F32, 2, [wk, wn]) (skinny_f32_s4, F32, 4, [wk, wn])
            (skinny_f32_s8, F32, 8, [wk, wn])
            (skinny_f16_s1, F16, 1, [wk, wn]) (skinny_f16_s2, F16, 2, [wk, wn]) (skinny_f16_s4, F16, 4, [wk, wn])
            (skinny_f16_s8, F16, 8, [wk, wn])
            (skinny_f16_f32_s1, F16F32, 1, [wk, wn]) (skinny_f16_f32_s2, F16F32, 2, [wk, wn])
            (skinny_f16_f32_s4, F16F32, 4, [wk, wn]) (skinny_f16_f32_s8, F16F32, 8, [wk, wn])
            (skinny_bf16_s1, Bf16, 1, [wk, wn]) (skinny_bf16_s2, Bf16, 2, [wk, wn]) (skinny_bf16_s4, Bf16, 4, [wk, wn])
            (skinny_bf16_s8, Bf16, 8, [wk, wn])
            (skinny_bf16_f32_s1, Bf16F32, 1, [wk, wn]) (skinny_bf16_f32_s2, Bf16F32, 2, [wk, wn])
            (skinny_bf16_f32_s4, Bf16F32, 4, [wk, wn]) (skinny_bf16_f32_s8, Bf16F32, 8, [wk, wn])
            (skinny_s8_s1, S8, 1, [wk, wn]) (skinny_s8_s2, S8, 2, [wk, wn]) (skinny_s8_s4, S8, 4, [wk, wn])
            (skinny_s8_s8, S8, 8, [wk, wn])
        }
    };
}

/// Every tensor-core token-sized kernel, one line per (name, types, S, W's
/// layout: `wk` K-contiguous, `wn` N-contiguous); the kernels crate exports
/// `<name>`.
/// `gemm_core::skinny_mma_menu!(my_macro)` expands to `my_macro! { (..) ... }`.
#[macro_export]
macro_rules! skinny_mma_menu {
    ($callback:ident) => {
        $callback! {
            (skinny_f16_s16_mma, F16, 16, wk) (skinny_f16_s32_mma, F16, 32, wk)
            (skinny_f16_f32_s16_mma, F16F32, 16, wk) (skinny_f16_f32_s32_mma, F16F32, 32, wk)
            (skinny_bf16_s16_mma, Bf16, 16, wk) (skinny_bf16_s32_mma, Bf16, 32, wk)
            (skinny_bf16_f32_s16_mma, Bf16F32, 16, wk) (skinny_bf16_f32_s32_mma, Bf16F32, 32, wk)
            (skinny_s8_s16_mma, S8, 16, wk) (skinny_s8_s32_mma, S8, 32, wk)
            (skinny_s8_s16_mma_wn, S8, 16, wn) (skinny_s8_s32_mma_wn, S8, 32, wn)
            (skinny_s8_s64_mma_wn, S8, 64, wn)
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [SkinnyTypes; 7] = [
        SkinnyTypes::F64,
        SkinnyTypes::F32,
        SkinnyTypes::F16,
        SkinnyTypes::F16F32,
        SkinnyTypes::Bf16,
        SkinnyTypes::Bf16F32,
        SkinnyTypes::S8,
    ];

    #[test]
    fn the_menu_has_every_row_count_of_every_type() {
        // Every (types, layout, S) the planner can ask for is on a menu.
        let mut cuda_core = [[[false; 2]; 17]; 7];
        let at = |t: SkinnyTypes| ALL.iter().position(|&x| x == t).unwrap();
        macro_rules! count {
            ($( ($name:ident, $t:ident, $s:literal, [$($l:ident),*]) )*) => {$(
                let t = SkinnyTypes::$t;
                assert!($s <= t.max_rows(), "{}", stringify!($name));
                assert_eq!(rows_for(t, $s), Some($s));
                $( cuda_core[at(t)][$s][(stringify!($l) == "wn") as usize] = true; )*
            )*};
        }
        skinny_menu!(count);
        let mut mma = [[[false; 2]; 65]; 7];
        macro_rules! count_mma {
            ($( ($name:ident, $t:ident, $s:literal, $l:ident) )*) => {$(
                mma[at(SkinnyTypes::$t)][$s][(stringify!($l) == "wn") as usize] = true;
            )*};
        }
        skinny_mma_menu!(count_mma);
        for t in ALL {
            for (li, layout) in [WLayout::KContiguous, WLayout::NContiguous].into_iter().enumerate() {
                for s in 1..=MAX_MMA_WN_ROWS {
                    if s <= cuda_core_rows(t, layout) {
                        let r = rows_for(t, s).unwrap();
                        assert!(cuda_core[at(t)][r as usize][li], "{t:?} {layout:?} s {s}");
                    } else if let (WLayout::KContiguous, Some(r)) = (layout, mma_rows_for(t, s)) {
                        assert!(mma[at(t)][r as usize][0], "{t:?} mma s {s}");
                    } else if let (WLayout::NContiguous, Some(r)) = (layout, mma_wn_rows_for(t, s)) {
                        assert!(mma[at(t)][r as usize][1], "{t:?} mma wn s {s}");
                    }
                }
            }
        }
    }

    #[test]
    fn rows_round_up_to_a_power_of_two() {
        assert_eq!(rows_for(SkinnyTypes::F16, 3), Some(4));
        assert_eq!(rows_for(SkinnyTypes::F16, 8), Some(8));
        assert_eq!(rows_for(SkinnyTypes::F16, 9), None);
        assert_eq!(rows_for(SkinnyTypes::F32, 9), None);
        assert_eq!(rows_for(SkinnyTypes::F64, 3), Some(4));
        assert_eq!(rows_for(SkinnyTypes::F64, 5), None);
        assert_eq!(rows_for(SkinnyTypes::F64, 0), None);
        assert_eq!(mma_rows_for(SkinnyTypes::Bf16, 9), Some(16));
        assert_eq!(mma_rows_for(SkinnyTypes::S8, 32), Some(32));
        assert_eq!(mma_wn_rows_for(SkinnyTypes::S8, 9), Some(16));
        assert_eq!(mma_wn_rows_for(SkinnyTypes::F16, 9), None);
        assert_eq!(mma_wn_rows_for(SkinnyTypes::S8, 33), Some(64));
        assert_eq!(mma_wn_rows_for(SkinnyTypes::S8, 65), None);
        assert!(!mma_wn_first(SkinnyTypes::S8, 1) && mma_wn_first(SkinnyTypes::S8, 2));
        assert!(!mma_wn_first(SkinnyTypes::F16, 4));
        assert_eq!(mma_rows_for(SkinnyTypes::S8, 33), None);
        assert_eq!(mma_rows_for(SkinnyTypes::F64, 20), None);
    }

    #[test]
    fn geometry_fits_a_block() {
        for t in ALL {
            for layout in [WLayout::KContiguous, WLayout::NContiguous] {
                // Every output of the block has a thread for the final sum
                // within a few passes, and shared memory stays small.
                assert!(smem_bytes(t, layout, t.max_rows(), false) <= 100 * 1024);
                // Two blocks of the tensor-core form fit an SM.
                let mma = match layout {
                    WLayout::KContiguous => mma_rows_for(t, MAX_MMA_ROWS).is_some(),
                    WLayout::NContiguous => mma_wn_rows_for(t, MAX_MMA_ROWS).is_some(),
                };
                assert!(!mma || smem_bytes(t, layout, MAX_MMA_ROWS, true) <= 113 * 1024, "{t:?} {layout:?}");
                // One block of the largest fits (227 KiB a block).
                if mma_wn_rows_for(t, MAX_MMA_WN_ROWS).is_some() {
                    assert!(smem_bytes(t, WLayout::NContiguous, MAX_MMA_WN_ROWS, true) <= 227 * 1024);
                    assert_eq!(mma_min_blocks_per_sm(MAX_MMA_WN_ROWS), 1);
                }
                assert!(cols_per_block(t, layout) >= 8);
                assert_eq!(grid(t, layout, 1, 0), [1, 1, 1]);
                assert_eq!(grid(t, layout, 4096, 100_000)[1], MAX_GRID_Y);
            }
        }
        assert_eq!(cols_per_block(SkinnyTypes::F16, WLayout::NContiguous), 32);
        assert_eq!(cols_per_block(SkinnyTypes::F16, WLayout::KContiguous), 16);
        assert_eq!(cols_per_block(SkinnyTypes::S8, WLayout::NContiguous), 32);
        for t in ALL {
            // The i8 form multiplies a lane's rows 4 at a time.
            assert!(!wn_quads(t) || UNROLL == 4);
            assert_eq!(tile_rows_wn(t) % (4 * WARPS), 0);
        }
    }
}
