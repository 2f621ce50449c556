//! Stage 9, the Hopper stage: geometry of the warpgroup-MMA kernels
//! (`wgmma.mma_async` fed by TMA), shared by the host launcher and the
//! kernels (`gemm-kernels/src/s09_warpgroup.rs`), and the list of compiled
//! kernels ([`warpgroup_menu!`](crate::warpgroup_menu)).
//!
//! # The schedule
//! Persistent blocks: one per SM ([`WgmmaTile::grid`]), each taking every
//! gridDim-th block tile of the launch's products (see the kernel's docs).
//!
//! # The block
//! `1 + BM / 64` warpgroups of 128 threads: warpgroup 0 is the producer (one
//! thread issues the TMA copies of each k-tile), warpgroups 1..=BM/64 are the
//! consumers, consumer `w` computing rows `64 (w - 1) .. 64 w` of the BM x BN
//! block tile with `wgmma.mma_async.m64nBNk*` (its accumulators in
//! registers).
//!
//! # Shared memory
//! DEPTH buffers, each the A tile then the B tile of one k-tile, from the
//! dynamic buffer's start, which the kernels declare aligned to 1024 bytes
//! ([`SMEM_ALIGN`]: the 128-byte swizzle repeats every 1024 bytes; TMA
//! and the wgmma descriptors assume tiles on that grid), then the epilogue's staging buffers (two [`C_BOX_BYTES`]
//! boxes of C per consumer warpgroup, for the TMA store), then 2 x DEPTH
//! mbarriers of 8 bytes (`full`, `empty`). A row
//! of a tile along its contiguous dimension is [`ROW_BYTES`] = 128 bytes
//! (BK = 64 f16 or bf16, 32 tf32 or 128 i8 elements when k is the
//! contiguous dimension), so a buffer holds `(BM + BN) * 128` bytes whatever
//! the element type.
//!
//! # Source
//! PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
//! Instructions" (wgmma.mma_async, matrix descriptors, shared memory matrix
//! layouts with the 128-byte swizzle), "Tensor Copy Instructions"
//! (cp.async.bulk.tensor), "Parallel Synchronization and Communication
//! Instructions: mbarrier"; the CUDA driver API's `cuTensorMapEncodeTiled`.

use crate::geometry::ceil_div;

/// Bytes of one row of a tile along its contiguous dimension: the span of the
/// 128-byte swizzle, and the most a TMA box with that swizzle may hold along
/// its inner dimension.
pub const ROW_BYTES: u32 = 128;

/// Rows of M one consumer warpgroup computes (`wgmma`'s m64).
pub const WARPGROUP_M: u32 = 64;

/// Threads of a warpgroup (4 warps).
pub const WARPGROUP_THREADS: u32 = 128;

/// Bytes of one box of C the epilogue stages for a TMA store: 64 rows (one
/// consumer warpgroup's) of 128 bytes (64 f16 or bf16, 32 f32 or i32
/// elements), stored with the 128-byte swizzle.
pub const C_BOX_BYTES: u32 = WARPGROUP_M * ROW_BYTES;

/// Registers per thread the producer warpgroup keeps after
/// `setmaxnreg.dec` (it only issues TMA copies); the rest of its share goes
/// to the consumers ([`WgmmaTile::consumer_registers`]).
pub const PRODUCER_REGISTERS: u32 = 40;

/// The kernel's `c_store` parameter: each thread stores its own elements of
/// C, row-major (C unaligned for TMA, or split-K's workspace).
pub const C_STORE_THREADS: u32 = 0;

/// The kernel's `c_store` parameter: the epilogue stores C box by box
/// through shared memory with TMA (C's tensor map at `maps + 256`).
pub const C_STORE_TMA: u32 = 1;

/// The kernel's `c_store` parameter: each thread stores its own elements of
/// the transpose: element (i, j) of the kernel's m x n result goes to
/// `c[j ldc + i]` (the host swapped A and B to put an MN-major tf32
/// operand in wgmma's register-A slot: `WgmmaTypes::register_a`).
pub const C_STORE_TRANSPOSED: u32 = 2;

/// One product of a grouped launch of stage 9 (`Params::group`): its shape
/// in kernel form (C row-major m x n; k 0 when A and B are not read), the
/// first job (block tile) of the launch that is its, C's address, leading
/// dimension and store mode (`C_STORE_*`). The launch's table holds one per
/// product plus an end marker whose `first_job` is the launch's job count;
/// product z's tensor maps (A, B, C) are the 384 bytes at `maps + 384 z`.
/// 40 bytes, the same on the host and in the kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupProblem {
    /// Rows of C.
    pub m: u32,
    /// Columns of C.
    pub n: u32,
    /// The shared dimension (0: A and B are not read, C <- beta C).
    pub k: u32,
    /// The launch's first job of this product: the block tiles of the
    /// products before it.
    pub first_job: u32,
    /// Leading dimension of C (elements).
    pub ldc: u32,
    /// How the epilogue stores C (`C_STORE_THREADS`, `C_STORE_TMA` or
    /// `C_STORE_TRANSPOSED`).
    pub c_store: u32,
    /// C's device address.
    pub c: u64,
    /// 0, or the device address of this product's [`Fusion`].
    pub fusion: u64,
}

/// What a stage-9 launch fuses into its product (the kernel's `fusion`
/// parameter, or a grouped product's [`GroupProblem::fusion`]: a device
/// address of one of these, 0 for none). In the kernel's form: rows i and
/// columns j of the kernel's m x n C, A its m x k operand, B its k x n. The
/// kernel computes, for C(i, j),
///
/// ```text
/// acc   = sum over k-tiles kb of  sa(i, kb) sb(j, kb) (A B over kb's 128 k)   (sa = sb = 1 without block scales)
/// v     = alpha rs(i) cs(j) acc + beta C(i, j)                                (rs = cs = 1 without them)
/// C(i,j) = act(v + bias)                                                      (bias by row i or column j)
/// ```
///
/// 80 bytes, `repr(C)`, the same on the host and in the kernel; pointers
/// as device addresses (0: absent), all scales and an f32 bias as f32.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Fusion {
    /// A's block scales (FP8 only, applied as each k-tile of 128 is
    /// promoted): the scale of rows `i` with the same `i / a_scales_rows`
    /// and k-tile kb at `a_scales[kb a_scales_k + (i / a_scales_rows)
    /// a_scales_mn]`.
    pub a_scales: u64,
    /// B's block scales: the scale of columns `j` with the same `j / 128`
    /// (one per block tile: BN divides 128) and k-tile kb at `b_scales[kb
    /// b_scales_k + (j / 128) b_scales_mn]`.
    pub b_scales: u64,
    /// Elements from one k-tile's A scale to the next.
    pub a_scales_k: u32,
    /// Elements from one row block's A scale to the next.
    pub a_scales_mn: u32,
    /// Elements from one k-tile's B scale to the next.
    pub b_scales_k: u32,
    /// Elements from one column block's B scale to the next.
    pub b_scales_mn: u32,
    /// Rows of A one A scale covers: 1 (DeepGEMM's 1 x 128 blocks) or 128
    /// (the kernels divide by it as a power of two: a shift).
    pub a_scales_rows: u32,
    /// Padding (0).
    pub reserved: u32,
    /// m f32 factors of C's rows (per-row scales of A), or 0.
    pub row_scales: u64,
    /// n f32 factors of C's columns (per-column scales of B), or 0.
    pub col_scales: u64,
    /// The bias: one element per row (`BIAS_ROWS`, m) or per column
    /// (`BIAS_COLUMNS`, n), f32 or C's type (`bias_type`); 0 for none.
    pub bias: u64,
    /// `BIAS_ROWS` or `BIAS_COLUMNS`.
    pub bias_along: u32,
    /// `BIAS_F32` or `BIAS_C_TYPE`.
    pub bias_type: u32,
    /// `ACT_NONE`, `ACT_RELU` or `ACT_GELU`.
    pub activation: u32,
    /// Padding (0).
    pub reserved2: u32,
}

impl Fusion {
    /// Whether the description has FP8 block scales (A's or B's): a launch
    /// with them runs a line's `<entry>_fused` kernels; one without them may
    /// run `<entry>_epilogue` ([`crate::warpgroup_menu!`]).
    pub const fn block_scaled(&self) -> bool {
        self.a_scales != 0 || self.b_scales != 0
    }
}

/// k of one block scale along k (FP8's k-tile: 128 one-byte elements), and
/// the columns of B one B scale covers.
pub const BLOCK_SCALE_K: u32 = 128;
/// [`Fusion::bias_along`]: `bias[i]` is added to row i.
pub const BIAS_ROWS: u32 = 0;
/// [`Fusion::bias_along`]: `bias[j]` is added to column j.
pub const BIAS_COLUMNS: u32 = 1;
/// [`Fusion::bias_type`]: the bias is f32.
pub const BIAS_F32: u32 = 0;
/// [`Fusion::bias_type`]: the bias has C's type.
pub const BIAS_C_TYPE: u32 = 1;
/// [`Fusion::activation`]: none.
pub const ACT_NONE: u32 = 0;
/// [`Fusion::activation`]: `max(v, 0)` (a NaN stays NaN).
pub const ACT_RELU: u32 = 1;
/// [`Fusion::activation`]: GELU, tanh approximation: `0.5 v (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3)))`.
pub const ACT_GELU: u32 = 2;

/// Bytes of one product's tensor maps in a grouped launch: A's, B's, C's.
pub const GROUP_MAPS_BYTES: usize = 384;

/// Registers of an SM (and the most one block may have).
pub const SM_REGISTERS: u32 = 65536;

/// Alignment in bytes of the dynamic shared-memory buffer's start: the
/// kernels declare it so (`.extern .shared .align 1024`, as CUTLASS and
/// DeepGEMM align theirs), and a warpgroup kernel traps if it is not.
pub const SMEM_ALIGN: u32 = 1024;

/// The most dynamic shared memory a Hopper block may have (227 KiB).
pub const MAX_SMEM_BYTES: u32 = 232_448;

/// The element types of a warpgroup-MMA product: operands A and B, and C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WgmmaTypes {
    /// f16 operands, f32 accumulation, f16 C.
    F16,
    /// f16 operands, f32 accumulation, f32 C.
    F16F32,
    /// bf16 operands, f32 accumulation, bf16 C.
    Bf16,
    /// bf16 operands, f32 accumulation, f32 C.
    Bf16F32,
    /// f32 operands read as TF32, f32 accumulation, f32 C.
    Tf32,
    /// i8 operands, i32 accumulation, i32 C.
    S8,
    /// FP8 e4m3 operands, f32 accumulation (promoted to a full-precision
    /// f32 accumulator every k-tile of 128), bf16 C.
    E4m3Bf16,
    /// FP8 e4m3 operands, f32 accumulation (promoted), f16 C.
    E4m3F16,
    /// FP8 e4m3 operands, f32 accumulation (promoted), f32 C.
    E4m3F32,
    /// FP8 operands, A e4m3 and B e5m2 (promoted as e4m3's), bf16 C.
    E4m3E5m2Bf16,
    /// A e4m3, B e5m2, f16 C.
    E4m3E5m2F16,
    /// A e4m3, B e5m2, f32 C.
    E4m3E5m2F32,
    /// A e5m2, B e4m3, bf16 C.
    E5m2E4m3Bf16,
    /// A e5m2, B e4m3, f16 C.
    E5m2E4m3F16,
    /// A e5m2, B e4m3, f32 C.
    E5m2E4m3F32,
}

impl WgmmaTypes {
    /// Bytes of one element of A and B.
    pub const fn input_bytes(self) -> u32 {
        match self {
            WgmmaTypes::Tf32 => 4,
            WgmmaTypes::F16 | WgmmaTypes::F16F32 | WgmmaTypes::Bf16 | WgmmaTypes::Bf16F32 => 2,
            _ => 1,
        }
    }

    /// Whether wgmma can read its operands MN-major (transposed): f16 and
    /// bf16 only; tf32, s8 and FP8 operands must be K-major (PTX ISA,
    /// wgmma.mma_async: imm-trans-a and imm-trans-b exist for .f16 and
    /// .bf16 only).
    pub const fn transposes(self) -> bool {
        self.input_bytes() == 2
    }

    /// Whether stage 9 reads an MN-major A through registers (wgmma's
    /// register-A form, which takes any layout; its shared-memory operands
    /// stay K-major): tf32, whose A fragment is one 32-bit element per
    /// register, loaded by scalar `ld.shared` from the MN-major tile. s8's
    /// fragment packs 4 k-consecutive bytes per register, which MN-major
    /// storage holds in 4 different rows: it keeps the transposed copy.
    pub const fn register_a(self) -> bool {
        matches!(self, WgmmaTypes::Tf32)
    }

    /// Bytes of one element of C.
    pub const fn output_bytes(self) -> u32 {
        match self {
            WgmmaTypes::F16
            | WgmmaTypes::Bf16
            | WgmmaTypes::E4m3Bf16
            | WgmmaTypes::E4m3F16
            | WgmmaTypes::E4m3E5m2Bf16
            | WgmmaTypes::E4m3E5m2F16
            | WgmmaTypes::E5m2E4m3Bf16
            | WgmmaTypes::E5m2E4m3F16 => 2,
            WgmmaTypes::F16F32
            | WgmmaTypes::Bf16F32
            | WgmmaTypes::Tf32
            | WgmmaTypes::S8
            | WgmmaTypes::E4m3F32
            | WgmmaTypes::E4m3E5m2F32
            | WgmmaTypes::E5m2E4m3F32 => 4,
        }
    }

    /// C's type: "f16", "bf16", "f32" or "i32".
    pub const fn c_name(self) -> &'static str {
        match self {
            WgmmaTypes::F16 | WgmmaTypes::E4m3F16 | WgmmaTypes::E4m3E5m2F16 | WgmmaTypes::E5m2E4m3F16 => "f16",
            WgmmaTypes::Bf16 | WgmmaTypes::E4m3Bf16 | WgmmaTypes::E4m3E5m2Bf16 | WgmmaTypes::E5m2E4m3Bf16 => "bf16",
            WgmmaTypes::S8 => "i32",
            _ => "f32",
        }
    }

    /// The types whose kernels write the accumulators as they are (f32, or
    /// i32 for s8): split-K's partial products.
    pub const fn accumulating(self) -> WgmmaTypes {
        match self {
            WgmmaTypes::F16 => WgmmaTypes::F16F32,
            WgmmaTypes::Bf16 => WgmmaTypes::Bf16F32,
            WgmmaTypes::E4m3Bf16 | WgmmaTypes::E4m3F16 => WgmmaTypes::E4m3F32,
            WgmmaTypes::E4m3E5m2Bf16 | WgmmaTypes::E4m3E5m2F16 => WgmmaTypes::E4m3E5m2F32,
            WgmmaTypes::E5m2E4m3Bf16 | WgmmaTypes::E5m2E4m3F16 => WgmmaTypes::E5m2E4m3F32,
            other => other,
        }
    }

    /// "f16", "f16_f32", ...: the kernels' name part.
    pub const fn name(self) -> &'static str {
        match self {
            WgmmaTypes::F16 => "f16",
            WgmmaTypes::F16F32 => "f16_f32",
            WgmmaTypes::Bf16 => "bf16",
            WgmmaTypes::Bf16F32 => "bf16_f32",
            WgmmaTypes::Tf32 => "tf32",
            WgmmaTypes::S8 => "s8",
            WgmmaTypes::E4m3Bf16 => "e4m3_bf16",
            WgmmaTypes::E4m3F16 => "e4m3_f16",
            WgmmaTypes::E4m3F32 => "e4m3_f32",
            WgmmaTypes::E4m3E5m2Bf16 => "e4m3_e5m2_bf16",
            WgmmaTypes::E4m3E5m2F16 => "e4m3_e5m2_f16",
            WgmmaTypes::E4m3E5m2F32 => "e4m3_e5m2_f32",
            WgmmaTypes::E5m2E4m3Bf16 => "e5m2_e4m3_bf16",
            WgmmaTypes::E5m2E4m3F16 => "e5m2_e4m3_f16",
            WgmmaTypes::E5m2E4m3F32 => "e5m2_e4m3_f32",
        }
    }

    /// Whether the operands are FP8 (e4m3, e5m2): wgmma's FP8 accumulation is not
    /// full f32, so the kernel adds each k-tile's (128 k) partial product to
    /// a second, full-precision f32 accumulator (DeepGEMM's promotion).
    pub const fn fp8(self) -> bool {
        self.input_bytes() == 1 && !matches!(self, WgmmaTypes::S8)
    }

    /// The types of the product with A and B trading places (C^T = B^T
    /// A^T, the kernel form of a column-major C): A e4m3 x B e5m2 becomes A
    /// e5m2 x B e4m3 and back; the others keep their types.
    pub const fn operands_swapped(self) -> WgmmaTypes {
        match self {
            WgmmaTypes::E4m3E5m2Bf16 => WgmmaTypes::E5m2E4m3Bf16,
            WgmmaTypes::E4m3E5m2F16 => WgmmaTypes::E5m2E4m3F16,
            WgmmaTypes::E4m3E5m2F32 => WgmmaTypes::E5m2E4m3F32,
            WgmmaTypes::E5m2E4m3Bf16 => WgmmaTypes::E4m3E5m2Bf16,
            WgmmaTypes::E5m2E4m3F16 => WgmmaTypes::E4m3E5m2F16,
            WgmmaTypes::E5m2E4m3F32 => WgmmaTypes::E4m3E5m2F32,
            other => other,
        }
    }
}

/// A compiled warpgroup-MMA configuration: block tile BM x BN x BK (BK =
/// 128 bytes of the operand type) and pipeline depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgmmaTile {
    /// Rows of C per block (64 per consumer warpgroup).
    pub bm: u32,
    /// Columns of C per block (wgmma's N: a multiple of 8 up to 256).
    pub bn: u32,
    /// Shared-memory buffers (k-tiles in flight).
    pub depth: u32,
    /// Blocks per cluster, along m: 1, or 2 (a pair of blocks on the tiles
    /// of two consecutive tile rows with the same columns, each k-tile's B
    /// fetched once and multicast to both by TMA).
    pub cluster: u32,
}

impl WgmmaTile {
    /// BK for operands of `input_bytes` bytes: one 128-byte row.
    pub const fn bk(self, input_bytes: u32) -> u32 {
        ROW_BYTES / input_bytes
    }

    /// Consumer warpgroups.
    pub const fn consumers(self) -> u32 {
        self.bm / WARPGROUP_M
    }

    /// Threads per block: the producer warpgroup and the consumers.
    pub const fn threads_per_block(self) -> u32 {
        WARPGROUP_THREADS * (1 + self.consumers())
    }

    /// Whether the kernel moves registers from the producer to the
    /// consumers (`setmaxnreg`): when the cap at entry, [`SM_REGISTERS`] /
    /// threads (168 for 384 threads; the entry points are compiled with
    /// `.maxntid` and `.minnctapersm 1`), is below what one consumer's
    /// accumulators and epilogue want.
    pub const fn reallocates(self) -> bool {
        self.consumers() >= 2
    }

    /// Registers per consumer thread after `setmaxnreg.inc`: what the block's
    /// registers leave after the producer's [`PRODUCER_REGISTERS`], a
    /// multiple of 8, at most 256 (232 for two consumers).
    pub const fn consumer_registers(self) -> u32 {
        let r =
            (SM_REGISTERS - WARPGROUP_THREADS * PRODUCER_REGISTERS) / (WARPGROUP_THREADS * self.consumers()) / 8 * 8;
        if r > 256 {
            256
        } else {
            r
        }
    }

    /// Registers per producer thread where its whole first warp stages block
    /// scales ([`WgmmaTile::stages_scales`]): what the consumers'
    /// [`WgmmaTile::consumer_registers`] leave of the block's registers at
    /// entry (the cap per thread at entry, a multiple of 8, times the
    /// threads: `setmaxnreg.inc` waits until the pool has what it asks), a
    /// multiple of 8: 40 for two consumers (384 threads of 168 registers),
    /// 56 for three (512 of 128). The other kernels keep
    /// [`PRODUCER_REGISTERS`].
    pub const fn staging_producer_registers(self) -> u32 {
        let pool = SM_REGISTERS / self.threads_per_block() / 8 * 8 * self.threads_per_block();
        (pool - WARPGROUP_THREADS * self.consumers() * self.consumer_registers()) / WARPGROUP_THREADS / 8 * 8
    }

    /// Bytes of the A tile of one buffer.
    pub const fn a_tile_bytes(self) -> u32 {
        self.bm * ROW_BYTES
    }

    /// Bytes of one buffer (A tile, then B tile): what the producer's copies
    /// of one k-tile deliver (TMA counts a box's zero-filled elements too).
    pub const fn buffer_bytes(self) -> u32 {
        (self.bm + self.bn) * ROW_BYTES
    }

    /// Offset of the epilogue's staging buffers from the aligned start:
    /// consumer `c`'s two boxes of C at `c_stage_offset() + (2 c + i)
    /// C_BOX_BYTES`, i = 0, 1.
    pub const fn c_stage_offset(self) -> u32 {
        self.depth * self.buffer_bytes()
    }

    /// Offset of the mbarriers from the aligned start (a
    /// [narrow](WgmmaTile::narrow) tile stages no C).
    pub const fn barriers_offset(self) -> u32 {
        self.c_stage_offset() + if self.narrow() { 0 } else { 2 * self.consumers() * C_BOX_BYTES }
    }

    /// Whether the kernels of this tile may apply a fused epilogue
    /// ([`Fusion`]'s block scales, row and column scales, bias and
    /// activation): the tiles of two consumers (BM at most 128) and at most
    /// 256 columns, and 192 x 128 (for FP8's block-scaled products: B's
    /// block scales are per 128 columns, one per tile). With three
    /// consumers of 152 registers, 192 x 192's epilogue spilled (ptxas -v);
    /// 128 x 256 (128 accumulators a thread) fuses without spills since the
    /// epilogue loads its values outside the per-element branches, but for
    /// FP8 (128 promoted sums and 64 wgmma accumulators a thread), whose
    /// kernels keep a few values of per-tile state in local memory outside
    /// the k-loop (accepted by `cargo xtask ptxas`, with the reason).
    pub const fn fuses(self) -> bool {
        self.bn <= 256 && (self.bm <= 128 || self.bn <= 128)
    }

    /// Whether BN is below the 64-element span of the 128-byte swizzle (8,
    /// 16 or 32: the token-sized products' tiles, where C^T = W^T X^T puts
    /// the few rows of X in wgmma's N). Such a tile reads B K-major only
    /// (its TMA box is BN rows of 128 bytes; an MN-major box spans 64
    /// columns) and stores C by threads only (the TMA store's boxes are 128
    /// bytes of columns), so it stages no C and has room for a deeper
    /// pipeline.
    pub const fn narrow(self) -> bool {
        self.bn < 64
    }

    /// Dynamic shared memory to request at launch.
    pub const fn smem_bytes(self) -> u32 {
        self.barriers_offset() + 16 * self.depth
    }

    /// Bytes of one buffer's block scales where the producer stages them
    /// ([`WgmmaTile::stages_scales`]): A's scales of the tile's BM rows,
    /// then B's, one per 128 of its columns (one, or two for BN = 256), f32
    /// each, padded to 16 bytes.
    pub const fn scales_slot_bytes(self) -> u32 {
        4 * self.bm + 16
    }

    /// Offset of buffer 0's block scales from the aligned start (after the
    /// barriers; buffer s's at `scales_offset() + s scales_slot_bytes()`).
    pub const fn scales_offset(self) -> u32 {
        self.barriers_offset() + 16 * self.depth
    }

    /// Whether a fused kernel of a promoting type (FP8) on this tile has its
    /// producer warp stage each k-tile's block scales in shared memory
    /// beside the buffer (`cp.async`, counted on the buffer's `full`
    /// barrier), where the consumers read them after the barrier's wait:
    /// unclustered tiles of at most 128 columns, or 256 (two B scales a
    /// k-tile), whose buffers leave room for them (128 x 128 at depth 5,
    /// 192 x 128 and 128 x 256 at depth 4; not 128 x 64 at depth 8). The others' consumers load their scales from global
    /// memory a k-tile ahead. The choice is made when the kernel is
    /// compiled: such a line also has kernels without block scales
    /// (`<entry>_epilogue`, marked `epilogue` in [`crate::warpgroup_menu!`]) for
    /// the fused launches that have none, which would otherwise stage
    /// scales of 1 on every k-tile.
    pub const fn stages_scales(self) -> bool {
        self.fuses()
            && self.cluster == 1
            && (self.bn <= BLOCK_SCALE_K || self.bn == 2 * BLOCK_SCALE_K)
            && self.smem_bytes() + self.depth * self.scales_slot_bytes() <= MAX_SMEM_BYTES
    }

    /// Dynamic shared memory of this tile's kernel: [`WgmmaTile::smem_bytes`],
    /// and the block scales' slots for a fused kernel of a promoting type
    /// (`promotes_fused`) where the tile [stages](WgmmaTile::stages_scales)
    /// them.
    pub const fn kernel_smem_bytes(self, promotes_fused: bool) -> u32 {
        if promotes_fused && self.stages_scales() {
            self.smem_bytes() + self.depth * self.scales_slot_bytes()
        } else {
            self.smem_bytes()
        }
    }

    /// Block tiles of `count` m x n products: the tile schedule's length,
    /// in blocks' tiles. With clusters, each product's tile rows are
    /// rounded up to a multiple of the cluster (a cluster's blocks take
    /// tile rows together; a block past the last row still runs the
    /// k-loop, for its partner's multicasts, and stores nothing).
    pub const fn tiles(self, m: u32, n: u32, count: u32) -> u64 {
        let rows = ceil_div(ceil_div(m, self.bm), self.cluster) * self.cluster;
        ceil_div(n, self.bn) as u64 * rows as u64 * count as u64
    }

    /// Grid of one launch of persistent blocks: one block per SM (the
    /// buffers leave room for one), fewer when there are fewer tiles; a
    /// multiple of the cluster.
    pub const fn grid(self, m: u32, n: u32, count: u32, sm_count: u32) -> [u32; 3] {
        let tiles = self.tiles(m, n, count);
        let slots = sm_count / self.cluster * self.cluster;
        [if tiles < slots as u64 { tiles as u32 } else { slots }, 1, 1]
    }

    /// Split-K for one m x n x k product with `input_bytes` operands on
    /// `sm_count` SMs: `(slices, k-tiles per slice)`, or `(1, 0)` for no
    /// split. A product whose block tiles fill less than half the SMs, with
    /// at least 8 k-tiles, is cut into slices of at least 4 k-tiles, as many
    /// as give about one block tile per SM; each slice's partial result goes
    /// to a workspace of `slices x m x n` f32 (or i32) that a reduction sums
    /// in slice order.
    pub const fn split_k(self, m: u32, n: u32, k: u32, input_bytes: u32, sm_count: u32) -> (u32, u32) {
        let tiles = self.tiles(m, n, 1);
        let k_tiles = ceil_div(k, self.bk(input_bytes));
        if tiles == 0 || tiles * 2 > sm_count as u64 || k_tiles < 8 {
            return (1, 0);
        }
        let want = sm_count / tiles as u32;
        let per = ceil_div(k_tiles, want);
        let per = if per < 4 { 4 } else { per };
        let slices = ceil_div(k_tiles, per);
        if slices < 2 {
            (1, 0)
        } else {
            (slices, per)
        }
    }

    /// Why this tile cannot be compiled, if it cannot.
    pub const fn check(self) -> Result<(), &'static str> {
        if self.bm == 0 || self.bm % WARPGROUP_M != 0 || self.bm > 256 {
            return Err("BM must be 64, 128, 192 or 256 (64 rows per consumer warpgroup; a TMA box holds 256 rows)");
        }
        if self.bn == 0 || self.bn % 8 != 0 || (self.bn > 32 && self.bn % 64 != 0) || self.bn > 256 {
            return Err("BN must be 8, 16, 32 (narrow), 64, 128, 192 or 256 (wgmma's N, a multiple of the \
                        64-element swizzle span above 32)");
        }
        if self.depth < 2 {
            return Err("the pipeline depth must be at least 2");
        }
        if self.cluster != 1 && (self.cluster != 2 || self.narrow()) {
            return Err("a cluster is 1 or 2 blocks (not for a narrow tile)");
        }
        if self.smem_bytes() > MAX_SMEM_BYTES {
            return Err("the buffers exceed the 227 KiB of shared memory a Hopper block may have");
        }
        Ok(())
    }
}

/// Whether a kernel reads an operand with its contiguous dimension along k
/// ("K-major", wgmma's imm-trans 0) or along m (A) / n (B) ("MN-major",
/// imm-trans 1). In the kernel form (C row-major), a row-major A and a
/// column-major B are K-major.
pub const fn k_major(col_major: bool, operand_is_a: bool) -> bool {
    col_major != operand_is_a
}

/// Every compiled warpgroup-MMA kernel family: 128 x 256 (depth 4) and
/// 128 x 128 (depth 5) for large C (FP8's fused kernels of 128 x 128,
/// 192 x 128 and 128 x 256 [stage](WgmmaTile::stages_scales) their block
/// scales; FP8's 128 x 256 multiplies and promotes each k-tile in two
/// halves of 128 columns; no
/// line runs in [clusters](WgmmaTile::cluster) at present: FP8's 128 x 128
/// pair at depth 6, with the scales loaded by its consumers, measured
/// 1-3% slower than the lone tile that stages them, NVIDIA H200,
/// 2026-11-28), for FP8's plain products 192 x 128
/// and 128 x 192 (depth 4: 5/6 of 128 x 128's operand bytes per
/// multiply-add, which bound FP8's k-loop), 128 x 64 (depth 8) for C with few
/// columns or few tiles, for f16 and bf16 64 x 256 (one consumer, depth 5)
/// for C with few rows and 192 x 192 (depth 3) where it fills the last
/// wave, and for every type the [narrow](WgmmaTile::narrow) 128 x 8, 16 and
/// 32 tiles (depth 13, 12, 11) of token-sized products, marked `narrow`;
/// the host's planner picks among them. As lines `(name, types, [BM, BN,
/// depth, cluster])`, `(name, types, [BM, BN, depth, cluster], narrow)`,
/// `(.., fused)` (the lines whose kernels also come as `<entry>_fused`,
/// with FP8 block scales and the fused epilogue: floating-point C, tiles
/// that [fuse](WgmmaTile::fuses), BN at least 64), `(.., fused, epilogue)`
/// (FP8 lines whose fused kernels [stage](WgmmaTile::stages_scales) their
/// block scales, a choice made when the kernel is compiled: their kernels
/// come a third time as `<entry>_epilogue`, the fused epilogue without
/// block scales, for the launches that have none) or `(.., fused_only)`
/// (those whose kernels come as `<entry>_fused` only): the kernel crate exports
/// `<name>_<ab>` for each layout suffix `ab` of `nn`, `nt`, `tn`, `tt` (A
/// then B; `n` row-major, `t` column-major; `nt` only when the types do not
/// [transpose](WgmmaTypes::transposes), plus `tt` (A MN-major through
/// registers) when they read [A from registers](WgmmaTypes::register_a);
/// a narrow line's B is K-major: `nt` and `tt` only), the host lists the
/// same.
/// `gemm_core::warpgroup_menu!(my_macro)` expands to `my_macro! { (..) ... }`.
#[macro_export]
macro_rules! warpgroup_menu {
    ($callback:ident) => {
        $callback! {
            (wgmma_f16_b128x128_d5, F16, [128, 128, 5, 1], fused)
            (wgmma_f16_f32_b128x128_d5, F16F32, [128, 128, 5, 1], fused)
            (wgmma_bf16_b128x128_d5, Bf16, [128, 128, 5, 1], fused)
            (wgmma_bf16_f32_b128x128_d5, Bf16F32, [128, 128, 5, 1], fused)
            (wgmma_f16_b128x256_d4, F16, [128, 256, 4, 1], fused)
            (wgmma_f16_f32_b128x256_d4, F16F32, [128, 256, 4, 1], fused)
            (wgmma_bf16_b128x256_d4, Bf16, [128, 256, 4, 1], fused)
            (wgmma_bf16_f32_b128x256_d4, Bf16F32, [128, 256, 4, 1], fused)
            (wgmma_f16_b128x64_d8, F16, [128, 64, 8, 1], fused)
            (wgmma_f16_f32_b128x64_d8, F16F32, [128, 64, 8, 1], fused)
            (wgmma_bf16_b128x64_d8, Bf16, [128, 64, 8, 1], fused)
            (wgmma_bf16_f32_b128x64_d8, Bf16F32, [128, 64, 8, 1], fused)
            (wgmma_f16_b192x192_d3, F16, [192, 192, 3, 1])
            (wgmma_f16_f32_b192x192_d3, F16F32, [192, 192, 3, 1])
            (wgmma_bf16_b192x192_d3, Bf16, [192, 192, 3, 1])
            (wgmma_bf16_f32_b192x192_d3, Bf16F32, [192, 192, 3, 1])
            (wgmma_f16_b64x256_d5, F16, [64, 256, 5, 1])
            (wgmma_f16_f32_b64x256_d5, F16F32, [64, 256, 5, 1])
            (wgmma_bf16_b64x256_d5, Bf16, [64, 256, 5, 1])
            (wgmma_bf16_f32_b64x256_d5, Bf16F32, [64, 256, 5, 1])
            (wgmma_tf32_b128x64_d8, Tf32, [128, 64, 8, 1], fused)
            (wgmma_tf32_b128x128_d5, Tf32, [128, 128, 5, 1], fused)
            (wgmma_tf32_b128x256_d4, Tf32, [128, 256, 4, 1])
            (wgmma_s8_b128x64_d8, S8, [128, 64, 8, 1])
            (wgmma_s8_b128x128_d5, S8, [128, 128, 5, 1])
            (wgmma_s8_b128x256_d4, S8, [128, 256, 4, 1])
            (wgmma_e4m3_bf16_b128x64_d8, E4m3Bf16, [128, 64, 8, 1], fused)
            (wgmma_e4m3_f16_b128x64_d8, E4m3F16, [128, 64, 8, 1], fused)
            (wgmma_e4m3_f32_b128x64_d8, E4m3F32, [128, 64, 8, 1], fused)
            (wgmma_e4m3_bf16_b128x128_d5, E4m3Bf16, [128, 128, 5, 1], fused, epilogue)
            (wgmma_e4m3_f16_b128x128_d5, E4m3F16, [128, 128, 5, 1], fused, epilogue)
            (wgmma_e4m3_f32_b128x128_d5, E4m3F32, [128, 128, 5, 1], fused, epilogue)
            (wgmma_e4m3_e5m2_bf16_b128x128_d5, E4m3E5m2Bf16, [128, 128, 5, 1], fused, epilogue)
            (wgmma_e4m3_e5m2_f16_b128x128_d5, E4m3E5m2F16, [128, 128, 5, 1], fused, epilogue)
            (wgmma_e4m3_e5m2_f32_b128x128_d5, E4m3E5m2F32, [128, 128, 5, 1], fused, epilogue)
            (wgmma_e5m2_e4m3_bf16_b128x128_d5, E5m2E4m3Bf16, [128, 128, 5, 1], fused, epilogue)
            (wgmma_e5m2_e4m3_f16_b128x128_d5, E5m2E4m3F16, [128, 128, 5, 1], fused, epilogue)
            (wgmma_e5m2_e4m3_f32_b128x128_d5, E5m2E4m3F32, [128, 128, 5, 1], fused, epilogue)
            (wgmma_e4m3_bf16_b192x128_d4, E4m3Bf16, [192, 128, 4, 1], fused, epilogue)
            (wgmma_e4m3_f16_b192x128_d4, E4m3F16, [192, 128, 4, 1], fused, epilogue)
            (wgmma_e4m3_f32_b192x128_d4, E4m3F32, [192, 128, 4, 1], fused, epilogue)
            (wgmma_e4m3_e5m2_bf16_b192x128_d4, E4m3E5m2Bf16, [192, 128, 4, 1], fused, epilogue)
            (wgmma_e4m3_e5m2_f16_b192x128_d4, E4m3E5m2F16, [192, 128, 4, 1], fused, epilogue)
            (wgmma_e4m3_e5m2_f32_b192x128_d4, E4m3E5m2F32, [192, 128, 4, 1], fused, epilogue)
            (wgmma_e5m2_e4m3_bf16_b192x128_d4, E5m2E4m3Bf16, [192, 128, 4, 1], fused, epilogue)
            (wgmma_e5m2_e4m3_f16_b192x128_d4, E5m2E4m3F16, [192, 128, 4, 1], fused, epilogue)
            (wgmma_e5m2_e4m3_f32_b192x128_d4, E5m2E4m3F32, [192, 128, 4, 1], fused, epilogue)
            (wgmma_e4m3_bf16_b128x256_d4, E4m3Bf16, [128, 256, 4, 1], fused, epilogue)
            (wgmma_e4m3_f16_b128x256_d4, E4m3F16, [128, 256, 4, 1], fused, epilogue)
            (wgmma_e4m3_f32_b128x256_d4, E4m3F32, [128, 256, 4, 1], fused, epilogue)
            (wgmma_e4m3_e5m2_bf16_b128x256_d4, E4m3E5m2Bf16, [128, 256, 4, 1], fused, epilogue)
            (wgmma_e4m3_e5m2_f16_b128x256_d4, E4m3E5m2F16, [128, 256, 4, 1], fused, epilogue)
            (wgmma_e4m3_e5m2_f32_b128x256_d4, E4m3E5m2F32, [128, 256, 4, 1], fused, epilogue)
            (wgmma_e5m2_e4m3_bf16_b128x256_d4, E5m2E4m3Bf16, [128, 256, 4, 1], fused, epilogue)
            (wgmma_e5m2_e4m3_f16_b128x256_d4, E5m2E4m3F16, [128, 256, 4, 1], fused, epilogue)
            (wgmma_e5m2_e4m3_f32_b128x256_d4, E5m2E4m3F32, [128, 256, 4, 1], fused, epilogue)
            (wgmma_e4m3_bf16_b128x192_d4, E4m3Bf16, [128, 192, 4, 1])
            (wgmma_e4m3_f16_b128x192_d4, E4m3F16, [128, 192, 4, 1])
            (wgmma_e4m3_f32_b128x192_d4, E4m3F32, [128, 192, 4, 1])
            (wgmma_e4m3_e5m2_bf16_b128x192_d4, E4m3E5m2Bf16, [128, 192, 4, 1])
            (wgmma_e4m3_e5m2_f16_b128x192_d4, E4m3E5m2F16, [128, 192, 4, 1])
            (wgmma_e4m3_e5m2_f32_b128x192_d4, E4m3E5m2F32, [128, 192, 4, 1])
            (wgmma_e5m2_e4m3_bf16_b128x192_d4, E5m2E4m3Bf16, [128, 192, 4, 1])
            (wgmma_e5m2_e4m3_f16_b128x192_d4, E5m2E4m3F16, [128, 192, 4, 1])
            (wgmma_e5m2_e4m3_f32_b128x192_d4, E5m2E4m3F32, [128, 192, 4, 1])
            (wgmma_f16_b128x8_d13, F16, [128, 8, 13, 1], narrow)
            (wgmma_f16_f32_b128x8_d13, F16F32, [128, 8, 13, 1], narrow)
            (wgmma_bf16_b128x8_d13, Bf16, [128, 8, 13, 1], narrow)
            (wgmma_bf16_f32_b128x8_d13, Bf16F32, [128, 8, 13, 1], narrow)
            (wgmma_tf32_b128x8_d13, Tf32, [128, 8, 13, 1], narrow)
            (wgmma_s8_b128x8_d13, S8, [128, 8, 13, 1], narrow)
            (wgmma_f16_b128x16_d12, F16, [128, 16, 12, 1], narrow)
            (wgmma_f16_f32_b128x16_d12, F16F32, [128, 16, 12, 1], narrow)
            (wgmma_bf16_b128x16_d12, Bf16, [128, 16, 12, 1], narrow)
            (wgmma_bf16_f32_b128x16_d12, Bf16F32, [128, 16, 12, 1], narrow)
            (wgmma_tf32_b128x16_d12, Tf32, [128, 16, 12, 1], narrow)
            (wgmma_s8_b128x16_d12, S8, [128, 16, 12, 1], narrow)
            (wgmma_f16_b128x32_d11, F16, [128, 32, 11, 1], narrow)
            (wgmma_f16_f32_b128x32_d11, F16F32, [128, 32, 11, 1], narrow)
            (wgmma_bf16_b128x32_d11, Bf16, [128, 32, 11, 1], narrow)
            (wgmma_bf16_f32_b128x32_d11, Bf16F32, [128, 32, 11, 1], narrow)
            (wgmma_tf32_b128x32_d11, Tf32, [128, 32, 11, 1], narrow)
            (wgmma_s8_b128x32_d11, S8, [128, 32, 11, 1], narrow)
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn menu_tiles_are_valid() {
        macro_rules! check {
            ($( ($name:ident, $t:ident, [$bm:literal, $bn:literal, $d:literal, $cl:literal] $(, $flag:ident)*) )*) => {$(
                let tile = WgmmaTile { bm: $bm, bn: $bn, depth: $d, cluster: $cl };
                assert_eq!(tile.check(), Ok(()), "{}", stringify!($name));
                assert!(stringify!($name).contains(WgmmaTypes::$t.name()));
                // `narrow` exactly on the narrow tiles; `fused` only on
                // tiles that fuse, with a floating-point C.
                let marked: &[&str] = &[$(stringify!($flag)),*];
                assert_eq!(marked.contains(&"narrow"), tile.narrow(), "{}", stringify!($name));
                assert!(
                    marked == ["narrow"] || marked == ["fused"] || marked == ["fused_only"]
                        || marked == ["fused", "epilogue"] || marked.is_empty(),
                    "{}",
                    stringify!($name)
                );
                if marked.contains(&"fused") || marked.contains(&"fused_only") {
                    assert!(tile.fuses() && !tile.narrow(), "{}", stringify!($name));
                    assert!(WgmmaTypes::$t != WgmmaTypes::S8, "{}", stringify!($name));
                }
                // `epilogue` exactly on the fused FP8 lines whose fused
                // kernels stage block scales.
                assert_eq!(
                    marked.contains(&"epilogue"),
                    marked.contains(&"fused") && WgmmaTypes::$t.fp8() && tile.stages_scales(),
                    "{}",
                    stringify!($name)
                );
            )*};
        }
        warpgroup_menu!(check);
    }

    #[test]
    fn geometry() {
        let t = WgmmaTile { bm: 128, bn: 256, depth: 4, cluster: 1 };
        assert_eq!(t.threads_per_block(), 384);
        assert_eq!(t.buffer_bytes(), 384 * 128);
        assert_eq!(t.smem_bytes(), 4 * 49152 + 4 * 8192 + 64);
        assert_eq!(t.tiles(1000, 513, 3), 3 * 8 * 3);
        assert_eq!(t.grid(1000, 513, 3, 132), [72, 1, 1]);
        assert_eq!(t.grid(8192, 8192, 1, 132), [132, 1, 1]);
        assert_eq!(t.bk(2), 64);
        assert!(t.reallocates() && t.consumer_registers() == 232);
        assert!(128 * PRODUCER_REGISTERS + 256 * t.consumer_registers() <= SM_REGISTERS);
        assert!(WgmmaTile { bm: 96, ..t }.check().is_err());
        assert!(WgmmaTile { depth: 6, ..t }.check().is_err());
        // Narrow tiles: BN 8, 16, 32; no C staging, so a deep pipeline fits.
        let narrow = WgmmaTile { bm: 128, bn: 16, depth: 12, cluster: 1 };
        assert!(narrow.narrow() && narrow.check().is_ok() && !t.narrow());
        assert_eq!(narrow.barriers_offset(), 12 * 144 * 128);
        assert!(WgmmaTile { bn: 24, depth: 11, ..narrow }.check().is_ok());
        assert!(WgmmaTile { bn: 48, ..narrow }.check().is_err());
        assert!(WgmmaTile { bn: 12, ..narrow }.check().is_err());
        assert!(WgmmaTile { depth: 13, ..narrow }.check().is_err());
        let small = WgmmaTile { bm: 128, bn: 128, depth: 5, cluster: 1 };
        // One tile, 1024 k-tiles: 132 slices of 8.
        assert_eq!(small.split_k(128, 128, 65536, 2, 132), (128, 8));
        assert_eq!(small.split_k(1024, 1024, 32768, 2, 132), (2, 256));
        // Enough tiles, or too little k: no split.
        assert_eq!(small.split_k(4096, 4096, 65536, 2, 132), (1, 0));
        assert_eq!(small.split_k(128, 128, 448, 2, 132), (1, 0));
        // Every slice has k-tiles: slices * per covers k_tiles, slices - 1 do not.
        for k in [512u32, 1000, 4099, 65536, 262144] {
            let (s, per) = small.split_k(32, 32, k, 1, 132);
            let kt = k.div_ceil(128);
            if s > 1 {
                assert!(s * per >= kt && (s - 1) * per < kt, "k {k}");
            }
        }
        assert!(k_major(false, true) && k_major(true, false) && !k_major(true, true) && !k_major(false, false));
    }

    #[test]
    fn cluster_geometry() {
        let pair = WgmmaTile { bm: 128, bn: 128, depth: 6, cluster: 2 };
        assert_eq!(pair.check(), Ok(()));
        assert_eq!(pair.smem_bytes(), 6 * 32768 + 4 * 8192 + 96);
        // 3 tile rows are run as 2 pairs: 4 rows of blocks' tiles.
        assert_eq!(pair.tiles(300, 256, 2), 4 * 2 * 2);
        assert_eq!(pair.tiles(256, 128, 1), 2);
        // The grid is a multiple of the cluster, at most the SMs'.
        assert_eq!(pair.grid(8192, 8192, 1, 132), [132, 1, 1]);
        assert_eq!(pair.grid(8192, 8192, 1, 133), [132, 1, 1]);
        assert_eq!(pair.grid(100, 100, 1, 132), [2, 1, 1]);
        assert!(WgmmaTile { cluster: 3, ..pair }.check().is_err());
        assert!(WgmmaTile { bn: 16, depth: 12, ..pair }.check().is_err());
    }

    #[test]
    fn staged_block_scales() {
        // 128 x 128 at depth 5 and 192 x 128 at depth 4 have room for a
        // slot of scales per buffer; 128 x 64 at depth 8 and a clustered
        // 128 x 128 at depth 6 do not (their consumers load the scales).
        let t = WgmmaTile { bm: 128, bn: 128, depth: 5, cluster: 1 };
        assert!(t.stages_scales());
        assert_eq!(t.scales_offset() % 16, 0);
        assert_eq!(t.kernel_smem_bytes(true), t.smem_bytes() + 5 * (512 + 16));
        assert_eq!(t.kernel_smem_bytes(false), t.smem_bytes());
        let tall = WgmmaTile { bm: 192, bn: 128, depth: 4, cluster: 1 };
        assert!(tall.stages_scales() && tall.kernel_smem_bytes(true) <= MAX_SMEM_BYTES);
        assert_eq!(tall.kernel_smem_bytes(true), 216_192);
        assert!(!WgmmaTile { bn: 64, depth: 8, ..t }.stages_scales());
        assert!(!WgmmaTile { depth: 6, cluster: 2, ..t }.stages_scales());
        // The staging producer's registers and the consumers' fit in the
        // block's registers at entry (168 a thread for 384 threads: with
        // 48 for the producer, `setmaxnreg.inc` to 232 waited forever).
        for s in [t, tall] {
            let entry = SM_REGISTERS / s.threads_per_block() / 8 * 8;
            let used = WARPGROUP_THREADS * (s.staging_producer_registers() + s.consumers() * s.consumer_registers());
            assert!(s.staging_producer_registers() >= PRODUCER_REGISTERS && used <= entry * s.threads_per_block());
        }
        assert_eq!((t.staging_producer_registers(), tall.staging_producer_registers()), (40, 56));
        // B's scale is one per 128 columns: 128 x 256 stages two a k-tile
        // (with the buffer's start declared aligned, 128 bytes to spare);
        // 192 columns would straddle B's blocks.
        let wide = WgmmaTile { bn: 256, depth: 4, ..t };
        assert!(wide.stages_scales());
        assert_eq!(wide.kernel_smem_bytes(true), 4 * 49152 + 4 * 8192 + 64 + 4 * (512 + 16));
        assert!(!WgmmaTile { bn: 192, depth: 4, ..t }.stages_scales());
        // Every tile that stages them still fits with them.
        macro_rules! check {
            ($(($name:ident, $t:ident, [$bm:expr, $bn:expr, $depth:expr, $cl:expr] $(, $flag:ident)*))*) => {$(
                let tile = WgmmaTile { bm: $bm, bn: $bn, depth: $depth, cluster: $cl };
                assert!(tile.kernel_smem_bytes(true) <= MAX_SMEM_BYTES, "{}", stringify!($name));
            )*};
        }
        warpgroup_menu!(check);
    }
}
