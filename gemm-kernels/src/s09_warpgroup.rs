//! Stage 9, the Hopper stage: f16, bf16, tf32, i8 and FP8 (e4m3, and e4m3
//! with e5m2) GEMM on
//! warpgroup MMA (`wgmma.mma_async`; f32 accumulation, i32 for i8), its
//! operands brought into shared memory by the tensor memory accelerator
//! (TMA, `cp.async.bulk.tensor`) in a warp-specialized pipeline. Compiled
//! only into the `sm_90a` module (`--cfg gemm_sm90a`): these instructions
//! exist for compute capability 9.0 only.
//!
//! `C <- alpha * A * B + beta * C` with alpha and beta in f32 (i32 for
//! i8), and optionally what [`Fusion`] describes: FP8 block scales applied
//! as each k-tile is promoted, row and column scales, a bias and an
//! activation applied in the epilogue.
//!
//! # Shapes
//! A m x k, B k x n (f16 or bf16), C m x n row-major (f16, bf16 or f32), in
//! elements; C at `c` with leading dimension `ldc`. A and B are not passed
//! as pointers: the host describes each (base address, dimensions, leading
//! dimension, batch stride) in a `CUtensorMap` made by
//! `cuTensorMapEncodeTiled`, and the kernel names the tiles it wants by
//! coordinates. Each operand is either K-major (k contiguous: a row-major A,
//! a column-major B) or MN-major (`A_MN`, `B_MN`); the map's dimensions run
//! contiguous first: (k, m, batch) for a K-major A, (m, k, batch) for an
//! MN-major one, likewise for B with n. The box is BK elements (128 bytes)
//! along the contiguous dimension by BM or BN rows along the other for a
//! K-major operand, and BK x BK for an MN-major one (BM / BK or BN / BK
//! boxes per tile: 64 x 64 for f16 and bf16, 32 x 32 for a tf32 A), with the
//! 128-byte swizzle; elements outside the matrix
//! arrive as zeros, so tiles at the edges and the k tail need no special
//! case.
//!
//! # Launch
//! Block of `gemm_core::warpgroup::WgmmaTile::threads_per_block` threads
//! (1 + BM / 64 warpgroups), `WgmmaTile::kernel_smem_bytes` of dynamic
//! shared memory (`WgmmaTile::smem_bytes`, and for a fused FP8 kernel the
//! staged block scales' slots; see `gemm_core::warpgroup` for its layout;
//! a kernel that stages them traps when launched with less, and every
//! kernel if the buffer's start is not on 1024 bytes, which its declaration
//! asks for), a 1D grid of at most
//! one block per SM (`WgmmaTile::grid`): persistent blocks. The tiles of
//! all products of the launch are numbered i = 0, 1, ...; block b computes
//! tiles b, b + gridDim.x, ... Within a product, tile i is block tile
//! `raster(i)`: groups of `RASTER_GROUP` tile rows walked column by column,
//! so the blocks in flight share rows of A and columns of B in L2. The
//! producer runs ahead across tiles: while the consumers store one tile's
//! C, the next tile's first k-tiles are already arriving.
//!
//! # Clusters
//! No line of the menu runs in clusters at present: FP8's 128 x 128 pair
//! (depth 6, its consumers loading the block scales from global memory)
//! was slower than the lone 128 x 128 tile whose producer stages them
//! (depth 5), which the pair's buffers leave no room for
//! (docs/benchmarks.md). A kernel with `CLUSTER` = 2 is declared with `.reqnctapercluster 2, 1,
//! 1`: consecutive blocks pair up in a cluster (on one GPC), and a job of
//! the schedule is two block tiles, tile rows 2 by and 2 by + 1 of one
//! column of tiles, block `rank` taking row 2 by + rank (past the last
//! row, a block runs the k-loop for its partner and stores nothing). Both
//! need the same k-tiles of B: each k-tile's B is fetched once, by the
//! blocks in turn (k-tile `it` by rank `it % 2`), and multicast by TMA
//! into the same buffer of both blocks (`.multicast::cluster`), completing
//! on each block's `full` barrier; each block fetches its own A. A buffer
//! is free once the consumers of both blocks have released it: the
//! `empty` barriers count 2 x the consumers, and each consumer arrives on
//! its own block's and on its partner's (`mapa`, `mbarrier.arrive`
//! `.shared::cluster`). The blocks synchronize with `barrier.cluster`
//! after initializing their barriers and before leaving (a partner may
//! still write into this block's shared memory). The L2 then serves 48
//! KiB per pair of 128 x 128 x 128 k-tiles instead of 64 (the FP8 tile
//! asks twice the bytes per multiply-add of a 16-bit one); cuBLASLt's
//! FP8 kernels run in clusters of 2 too (ncu names
//! `nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA`).
//!
//! # Warp specialization
//! Warpgroup 0 produces: its first thread, for each k-tile kt, waits until
//! buffer kt % DEPTH is free (`empty` mbarrier), announces the bytes to come
//! (`mbarrier.arrive.expect_tx` on the `full` mbarrier) and requests the A
//! and B boxes; the TMA unit writes them and completes the transaction.
//! Warpgroups 1..=BM/64 consume: each waits on `full`, issues the four (for
//! BK = 64) `wgmma.mma_async.m64nBNk16` of the k-tile on its 64 rows, commits
//! them as one group, and once the previous k-tile's group has completed
//! (`wgmma.wait_group 1`) releases that k-tile's buffer (`empty`). A
//! promoting type (FP8) waits for each group anyway (`wgmma.wait_group 0`,
//! then the promotion): it releases the k-tile's own buffer right there,
//! one k-tile earlier, so the producer runs one buffer further ahead. On
//! the 128 x 256 tile a promoting type multiplies and promotes each k-tile
//! in two halves of 128 columns (B's rows 0..128 of the buffer, then
//! 128..256), each a group of four `m64n128k32` into the same 64 wgmma
//! accumulators (the first k-step with scale-d false: D = A B), promoted
//! into its half of the 128 sums: two sets of 128 accumulators would need
//! 256 registers a thread. The second half runs even where its columns are
//! past n (a branch around it made ptxas spill the sums in the k-loop). The
//! mbarriers' phases alternate with each use of a buffer: use u of buffer s
//! is k-tile s + u DEPTH and waits for parity u % 2.
//!
//! # Block scales (FP8, fused)
//! Each k-tile's partial product is promoted times its block scales: sa(r)
//! sb for row r (A's scale of that row and k block, B's of the tile's 128
//! columns). Where the tile leaves room (`WgmmaTile::stages_scales`: 128 x
//! 128 at depth 5, 192 x 128 and 128 x 256 at depth 4), the producer's whole first warp
//! runs its loop and stages them beside the buffer: after the `empty` wait,
//! each lane copies A's scales of rows `lane + 32 j` (and lane 0 B's; on
//! 128 x 256 lane 1 B's of columns 128.., unless they are past n: that
//! entry of every slot is set to 1.0 at the start) into
//! the buffer's slot with 4-byte `cp.async`, whose completion arrives on
//! the buffer's `full` barrier (`cp.async.mbarrier.arrive.noinc`: the
//! barrier counts 1 + 32 arrivals; without block scales the lanes store
//! ones and arrive). Each consumer thread reads its two rows' and B's scale
//! with `ld.shared` right after the `full` wait, before issuing the
//! k-tile's group, and each consumer warp releases the buffer after the
//! group's wait (the `empty` barrier counts 4 x the consumers), as DeepGEMM
//! (DeepSeek-AI, "DeepGEMM") stages its
//! scales. On the other tiles (128 x 64 at depth 8, and tiles run in
//! clusters), each consumer thread loads its scales from global memory one
//! k-tile ahead ([`BlockScales`]). Staging is compiled in: a fused launch
//! without block scales on a staging tile runs the line's `<entry>_epilogue`
//! kernels instead (`BLOCK_SCALES` false: no slots, promotion by additions,
//! as the plain kernels, and the fused epilogue), which the host picks.
//!
//! # An MN-major tf32 A: through registers
//! wgmma reads tf32 operands from shared memory K-major only, but takes A
//! from registers in any layout. With `A_MN` and tf32, each consumer loads
//! its A fragments from the MN-major tile with `ld.shared` (four registers
//! per k8 step: [`tf32_a_fragments`]) and issues the register-A form
//! `wgmma.mma_async.m64nBNk8.f32.tf32.tf32 d, {a0..a3}, b-desc` (the `tt`
//! entry points). The host puts an MN-major operand there: as A directly,
//! or, when B is the MN-major one and A K-major, by computing C^T = B^T A^T
//! and storing C transposed (`C_STORE_TRANSPOSED`). An MN-major tf32 B with
//! an MN-major A still gets a K-major copy (as s8 operands do).
//!
//! # Registers (`setmaxnreg`)
//! The entry points carry `.maxntid` and `.minnctapersm 1` (the xtask adds
//! them to the PTX: rustc cannot), so ptxas caps every thread at 65536 / 384
//! = 168 registers at entry. With two consumers, the producer warpgroup
//! then gives most of its share back (`setmaxnreg.dec` to 40) and the
//! consumers take it (`setmaxnreg.inc` to 232): 128 x 40 + 256 x 232 <=
//! 65536. A consumer of the 128 x 256 tile holds 128 accumulators and needs
//! more than 168 registers in the TMA-store epilogue (FP8: 128 sums and 64
//! wgmma accumulators); one consumer (BM = 64, 256 threads) has 255 from
//! the start (PTX ISA, "setmaxnreg"). Each thread reads its warpgroup's
//! index from lane 0 (`shfl.sync.idx`, CUTLASS's
//! `canonical_warp_group_idx`): ptxas then knows it is the same across the
//! warp and builds the consumer's wgmma descriptors in uniform registers
//! (from `%tid.x` directly it built them per thread and moved them over,
//! 16 `R2UR` a k-tile).
//!
//! # Epilogue (TMA store)
//! When C's start, rows and matrices lie on 16 bytes (TMA's alignment) and
//! k is not split, each consumer stores its 64 x BN part box by box: 64 rows
//! of 128 bytes (64 f16/bf16 or 32 f32/i32 columns) written from the
//! accumulators into one of two staging boxes in shared memory with the
//! 128-byte swizzle (conflict-free: a warp's 8 rows land in 8 distinct
//! 16-byte chunks), `fence.proxy.async`, a named barrier of the warpgroup's
//! 128 threads, then one thread's `cp.async.bulk.tensor` store
//! (`.global.shared::cta.bulk_group`, C's tensor map; TMA clips the box at
//! m x n). A box is reused once the store before last has read it
//! (`cp.async.bulk.wait_group.read 1`). Against each thread storing its own
//! pairs (8 rows x 16 bytes per warp instruction for a 16-bit C: one
//! 32-byte sector half written at a time), the stores leave the SM as whole
//! 128-byte lines. Otherwise (an unaligned C, split-K's workspace) each
//! thread stores its pairs; for a transposed C each thread stores its
//! elements one by one at `c[j ldc + i]` (a warp's stores then cover 8
//! consecutive elements in each of 4 lines: whole 32-byte sectors for f32).
//!
//! # Shared-memory layouts and descriptors (128-byte swizzle)
//! A tile is stored as rows of 128 bytes (64 elements along the operand's
//! contiguous dimension); within each group of 8 rows (1024 bytes), the
//! 16-byte chunk c of row r sits at chunk c ^ r. TMA writes that layout
//! (`CU_TENSOR_MAP_SWIZZLE_128B`) and wgmma reads it, given a 64-bit
//! descriptor: start address >> 4 (bits 0-13), leading-dimension byte offset
//! >> 4 (16-29), stride-dimension byte offset >> 4 (32-45), and the swizzle
//! mode (bits 62-63: 1 = 128 bytes). With every tile on a 1024-byte
//! boundary the base offset (bits 49-51) is 0.
//! ```text
//! K-major (A row-major: a row = 64 k of one m)      MN-major (A column-major: a row = 64 m of one k)
//!   row r = m index, 128 B each                       box j (64 m) at j * 8 KiB; row r = k index
//!   8-row groups every 1024 B  -> SBO = 1024          8-row groups (8 k) every 1024 B -> SBO = 1024
//!   LBO unused (1)                                    next 64 m (box j + 1): LBO = 8 KiB
//!   k16 step: start + 32 B                            k16 step: start + 16 rows = 2048 B
//! ```
//! (PTX ISA, "Shared Memory Matrix Layout", "Matrix Descriptor Format": for
//! swizzled K-major layouts the leading byte offset is not used; for
//! MN-major it is the offset between groups of 64 elements along M or N, the
//! stride byte offset the offset between groups of 8 along K.)
//!
//! # Accumulators
//! Consumer thread t (warp w = t / 32 of its warpgroup, lane l) holds, for
//! each 8-column block j of its m64 x BN tile, acc[4j..4j + 4] = C(16w + l/4,
//! 8j + 2(l%4) + {0, 1}) and C(16w + l/4 + 8, same columns) (PTX ISA,
//! "Register Fragments": the wgmma D fragment for .f32).
//!
//! # Source
//! PTX ISA sections "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
//! Instructions", "Tensor Copy Instructions: cp.async.bulk.tensor",
//! "mbarrier"; the warp-specialized producer/consumer design of CUTLASS 3's
//! sm90 kernels (`KernelTmaWarpSpecialized`).

use crate::element::Element;
use crate::fusion::{gelu_f32, gelu_tanh_f32, relu};
use crate::mixed::{store_one, store_pair, Bf16, E4m3, E4m3E5m2, E5m2E4m3, Output, Tf32, F16, S8};
use crate::thread::smem_base;
use core::arch::asm;
use gemm_core::warpgroup::{
    Fusion, GroupProblem, WgmmaTile, ACT_GELU, ACT_RELU, BIAS_F32, BIAS_ROWS, BLOCK_SCALE_K, C_BOX_BYTES, C_STORE_TMA,
    C_STORE_TRANSPOSED, GROUP_MAPS_BYTES, PRODUCER_REGISTERS, ROW_BYTES, SMEM_ALIGN, WARPGROUP_M, WARPGROUP_THREADS,
};

/// Bytes of one 64 x 64 box of an MN-major 16-bit operand (64 rows of 128
/// bytes; in general BK x BK elements: BK rows of 128 bytes).
const MN_BOX_BYTES: u32 = 64 * ROW_BYTES;

/// Element type of A and B: selects the `wgmma` instruction.
pub trait Input {
    /// Bytes of one element: BK = 128 / BYTES (64 f16 or bf16, 32 tf32,
    /// 128 s8 or e4m3), four k-steps of the instruction's k (16, 8, 32) per
    /// k-tile.
    const BYTES: u32;
    /// Whether each k-tile's partial product is added to a second,
    /// full-precision f32 accumulator once its wgmma group completes, the
    /// wgmma accumulators then cleared (FP8: its tensor-core accumulation
    /// keeps fewer bits than f32; DeepGEMM's promotion, every 128 k).
    const PROMOTE: bool = false;
    /// One k-tile (four k-steps of `wgmma.mma_async.m64nNk*`) into `acc`
    /// (N = 2 x ACC; f32 accumulators, or s32 ones as their bits),
    /// committed as one wgmma group; with `accumulate` false the first
    /// k-step ignores `acc`'s values (wgmma's scale-d false: D = A B).
    ///
    /// # Safety
    /// Warpgroup-collective: all 128 threads of the warpgroup, in uniform
    /// control flow; `da`, `db` describe tiles in shared memory that the TMA
    /// copies have completed; TA and TB false unless the type transposes
    /// (f16, bf16 only).
    unsafe fn k_tile<const ACC: usize, const TA: bool, const TB: bool>(
        acc: &mut [f32; ACC],
        da: [u64; 4],
        db: [u64; 4],
        accumulate: bool,
    );

    /// One k-tile with A from registers (`a[kk]`: the A fragment of k-step
    /// kk, see [`tf32_a_fragments`]) and B from shared memory (`db`, K-major),
    /// committed as one wgmma group: tf32 only (`WgmmaTypes::register_a`).
    ///
    /// # Safety
    /// As [`Input::k_tile`]; `a` holds this thread's fragments.
    #[inline(always)]
    unsafe fn k_tile_rs<const ACC: usize>(_acc: &mut [f32; ACC], _a: [[u32; 4]; 4], _db: [u64; 4]) {
        core::arch::nvptx::trap()
    }
}

/// Defines `$name`: one tf32 k-tile of four `wgmma.mma_async.m64n$n k8` with
/// A from registers (`a[kk]`, four 32-bit elements per k8 step) and B from
/// the descriptors `db`, fenced before (the A registers were just written)
/// and committed after.
macro_rules! wgmma_k_tile_rs {
    ($name:ident, $n:literal, [$($i:literal)*]) => {
        #[inline(always)]
        unsafe fn $name(acc: &mut [f32; $n / 2], a: [[u32; 4]; 4], db: [u64; 4]) {
            asm!(
                "wgmma.fence.sync.aligned;",
                "{{",
                ".reg .pred p;",
                "setp.ne.b32 p, {one}, 0;",
                concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k8.f32.tf32.tf32 {{{0}" $(, ", {", $i, "}")*,
                        "}}, {{{a00}, {a01}, {a02}, {a03}}}, {db0}, p, 1, 1;"),
                concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k8.f32.tf32.tf32 {{{0}" $(, ", {", $i, "}")*,
                        "}}, {{{a10}, {a11}, {a12}, {a13}}}, {db1}, p, 1, 1;"),
                concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k8.f32.tf32.tf32 {{{0}" $(, ", {", $i, "}")*,
                        "}}, {{{a20}, {a21}, {a22}, {a23}}}, {db2}, p, 1, 1;"),
                concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k8.f32.tf32.tf32 {{{0}" $(, ", {", $i, "}")*,
                        "}}, {{{a30}, {a31}, {a32}, {a33}}}, {db3}, p, 1, 1;"),
                "}}",
                "wgmma.commit_group.sync.aligned;",
                inout(reg32) acc[0], $(inout(reg32) acc[$i],)*
                a00 = in(reg32) a[0][0], a01 = in(reg32) a[0][1], a02 = in(reg32) a[0][2], a03 = in(reg32) a[0][3],
                a10 = in(reg32) a[1][0], a11 = in(reg32) a[1][1], a12 = in(reg32) a[1][2], a13 = in(reg32) a[1][3],
                a20 = in(reg32) a[2][0], a21 = in(reg32) a[2][1], a22 = in(reg32) a[2][2], a23 = in(reg32) a[2][3],
                a30 = in(reg32) a[3][0], a31 = in(reg32) a[3][1], a32 = in(reg32) a[3][2], a33 = in(reg32) a[3][3],
                db0 = in(reg64) db[0], db1 = in(reg64) db[1], db2 = in(reg64) db[2], db3 = in(reg64) db[3],
                one = in(reg32) 1u32,
                options(nostack),
            );
        }
    };
}

/// Defines `$name`: one k-tile of four `wgmma.mma_async.m64n$n k$k` with
/// `($ta, $tb)` operands (A's and B's types) and `$acc` accumulators `acc[0..$n / 2]` (the `$i` list
/// is 1..$n/2), fenced before and committed after. `$args` is what follows
/// the descriptors: scale-d and, for floating-point types, the input scales
/// and (f16, bf16) the transposes.
macro_rules! wgmma_k_tile {
    ($name:ident, $n:literal, $k:literal, $acc:literal, ($ta:literal, $tb:literal), $args:literal, [$($i:literal)*]) => {
        #[inline(always)]
        unsafe fn $name<const TA: bool, const TB: bool>(
            acc: &mut [f32; $n / 2], da: [u64; 4], db: [u64; 4], accumulate: bool,
        ) {
            asm!(
                "wgmma.fence.sync.aligned;",
                "{{",
                ".reg .pred p;",
                "setp.ne.b32 p, {first}, 0;",
                concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k", $k, ".", $acc, ".", $ta, ".", $tb,
                        " {{{0}" $(, ", {", $i, "}")*, "}}, {da0}, {db0}, ", $args, ";"),
                "}}",
                "{{",
                ".reg .pred p;",
                "setp.ne.b32 p, {one}, 0;",
                concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k", $k, ".", $acc, ".", $ta, ".", $tb,
                        " {{{0}" $(, ", {", $i, "}")*, "}}, {da1}, {db1}, ", $args, ";"),
                concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k", $k, ".", $acc, ".", $ta, ".", $tb,
                        " {{{0}" $(, ", {", $i, "}")*, "}}, {da2}, {db2}, ", $args, ";"),
                concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k", $k, ".", $acc, ".", $ta, ".", $tb,
                        " {{{0}" $(, ", {", $i, "}")*, "}}, {da3}, {db3}, ", $args, ";"),
                "}}",
                "wgmma.commit_group.sync.aligned;",
                "// imm-trans {ta} {tb}",
                inout(reg32) acc[0], $(inout(reg32) acc[$i],)*
                da0 = in(reg64) da[0], da1 = in(reg64) da[1], da2 = in(reg64) da[2], da3 = in(reg64) da[3],
                db0 = in(reg64) db[0], db1 = in(reg64) db[1], db2 = in(reg64) db[2], db3 = in(reg64) db[3],
                one = in(reg32) 1u32,
                first = in(reg32) accumulate as u32,
                ta = const TA as u32, tb = const TB as u32,
                options(nostack),
            );
        }
    };
}

macro_rules! wgmma_input {
    ($t:ident, $bytes:literal, $k:literal, $acc:literal, $ty:tt, $args:literal,
     [$n8:ident, $n16:ident, $n32:ident, $n64:ident, $n128:ident, $n192:ident, $n256:ident]) => {
        wgmma_input!(@ $t, $bytes, $k, $acc, $ty, $args, [$n8, $n16, $n32, $n64, $n128, $n192, $n256], {});
    };
    // With the register-A k-tiles `$r8` .. `$r256` (tf32).
    ($t:ident, $bytes:literal, $k:literal, $acc:literal, $ty:tt, $args:literal,
     [$n8:ident, $n16:ident, $n32:ident, $n64:ident, $n128:ident, $n192:ident, $n256:ident],
     rs [$r8:ident, $r16:ident, $r32:ident, $r64:ident, $r128:ident, $r192:ident, $r256:ident]) => {
        wgmma_k_tile_rs!($r8, 8, [1 2 3]);
        wgmma_k_tile_rs!($r16, 16, [1 2 3 4 5 6 7]);
        wgmma_k_tile_rs!($r32, 32, [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
        wgmma_k_tile_rs!($r64, 64, [
            1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        ]);
        wgmma_k_tile_rs!($r128, 128, [
            1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
        ]);
        wgmma_k_tile_rs!($r192, 192, [
            1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36
            37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69
            70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
        ]);
        wgmma_k_tile_rs!($r256, 256, [
            1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
            64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
            96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120
            121 122 123 124 125 126 127
        ]);
        wgmma_input!(@ $t, $bytes, $k, $acc, $ty, $args, [$n8, $n16, $n32, $n64, $n128, $n192, $n256], {
            #[inline(always)]
            unsafe fn k_tile_rs<const ACC: usize>(acc: &mut [f32; ACC], a: [[u32; 4]; 4], db: [u64; 4]) {
                match ACC {
                    4 => $r8(&mut *(acc.as_mut_ptr() as *mut [f32; 4]), a, db),
                    8 => $r16(&mut *(acc.as_mut_ptr() as *mut [f32; 8]), a, db),
                    16 => $r32(&mut *(acc.as_mut_ptr() as *mut [f32; 16]), a, db),
                    32 => $r64(&mut *(acc.as_mut_ptr() as *mut [f32; 32]), a, db),
                    64 => $r128(&mut *(acc.as_mut_ptr() as *mut [f32; 64]), a, db),
                    96 => $r192(&mut *(acc.as_mut_ptr() as *mut [f32; 96]), a, db),
                    128 => $r256(&mut *(acc.as_mut_ptr() as *mut [f32; 128]), a, db),
                    _ => core::arch::nvptx::trap(),
                }
            }
        });
    };
    // With promotion (FP8).
    ($t:ident, $bytes:literal, $k:literal, $acc:literal, $ty:tt, $args:literal,
     [$n8:ident, $n16:ident, $n32:ident, $n64:ident, $n128:ident, $n192:ident, $n256:ident], promote) => {
        wgmma_input!(@ $t, $bytes, $k, $acc, $ty, $args, [$n8, $n16, $n32, $n64, $n128, $n192, $n256], {
            const PROMOTE: bool = true;
        });
    };
    (@ $t:ident, $bytes:literal, $k:literal, $acc:literal, $ty:tt, $args:literal,
     [$n8:ident, $n16:ident, $n32:ident, $n64:ident, $n128:ident, $n192:ident, $n256:ident], {$($rs:item)*}) => {
        wgmma_k_tile!($n8, 8, $k, $acc, $ty, $args, [1 2 3]);
        wgmma_k_tile!($n16, 16, $k, $acc, $ty, $args, [1 2 3 4 5 6 7]);
        wgmma_k_tile!($n32, 32, $k, $acc, $ty, $args, [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
        wgmma_k_tile!($n64, 64, $k, $acc, $ty, $args, [
            1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        ]);
        wgmma_k_tile!($n128, 128, $k, $acc, $ty, $args, [
            1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
        ]);
        wgmma_k_tile!($n192, 192, $k, $acc, $ty, $args, [
            1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36
            37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69
            70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
        ]);
        wgmma_k_tile!($n256, 256, $k, $acc, $ty, $args, [
            1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
            64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
            96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120
            121 122 123 124 125 126 127
        ]);

        impl Input for $t {
            const BYTES: u32 = $bytes;
            #[inline(always)]
            unsafe fn k_tile<const ACC: usize, const TA: bool, const TB: bool>(
                acc: &mut [f32; ACC],
                da: [u64; 4],
                db: [u64; 4],
                accumulate: bool,
            ) {
                // ACC is BN / 2, fixed by the menu: one arm survives.
                match ACC {
                    4 => $n8::<TA, TB>(&mut *(acc.as_mut_ptr() as *mut [f32; 4]), da, db, accumulate),
                    8 => $n16::<TA, TB>(&mut *(acc.as_mut_ptr() as *mut [f32; 8]), da, db, accumulate),
                    16 => $n32::<TA, TB>(&mut *(acc.as_mut_ptr() as *mut [f32; 16]), da, db, accumulate),
                    32 => $n64::<TA, TB>(&mut *(acc.as_mut_ptr() as *mut [f32; 32]), da, db, accumulate),
                    64 => $n128::<TA, TB>(&mut *(acc.as_mut_ptr() as *mut [f32; 64]), da, db, accumulate),
                    96 => $n192::<TA, TB>(&mut *(acc.as_mut_ptr() as *mut [f32; 96]), da, db, accumulate),
                    128 => $n256::<TA, TB>(&mut *(acc.as_mut_ptr() as *mut [f32; 128]), da, db, accumulate),
                    _ => core::arch::nvptx::trap(),
                }
            }
            $($rs)*
        }
    };
}

// PTX ISA, wgmma.mma_async: f16 and bf16 take scale-d, imm-scale-a,
// imm-scale-b, imm-trans-a, imm-trans-b; tf32 has no transposes (both
// operands K-major); the integer types take scale-d only.
wgmma_input!(
    F16,
    2,
    "16",
    "f32",
    ("f16", "f16"),
    "p, 1, 1, {ta}, {tb}",
    [f16_n8, f16_n16, f16_n32, f16_n64, f16_n128, f16_n192, f16_n256]
);
wgmma_input!(
    Bf16,
    2,
    "16",
    "f32",
    ("bf16", "bf16"),
    "p, 1, 1, {ta}, {tb}",
    [bf16_n8, bf16_n16, bf16_n32, bf16_n64, bf16_n128, bf16_n192, bf16_n256]
);
wgmma_input!(
    Tf32, 4, "8", "f32", ("tf32", "tf32"), "p, 1, 1",
    [tf32_n8, tf32_n16, tf32_n32, tf32_n64, tf32_n128, tf32_n192, tf32_n256],
    rs [tf32_rs_n8, tf32_rs_n16, tf32_rs_n32, tf32_rs_n64, tf32_rs_n128, tf32_rs_n192, tf32_rs_n256]
);
wgmma_input!(S8, 1, "32", "s32", ("s8", "s8"), "p", [s8_n8, s8_n16, s8_n32, s8_n64, s8_n128, s8_n192, s8_n256]);
// FP8: scale-d and the input scales (imm-scale-a, imm-scale-b), no
// transposes (K-major operands only).
wgmma_input!(
    E4m3,
    1,
    "32",
    "f32",
    ("e4m3", "e4m3"),
    "p, 1, 1",
    [e4m3_n8, e4m3_n16, e4m3_n32, e4m3_n64, e4m3_n128, e4m3_n192, e4m3_n256],
    promote
);
wgmma_input!(
    E4m3E5m2,
    1,
    "32",
    "f32",
    ("e4m3", "e5m2"),
    "p, 1, 1",
    [e4m3e5m2_n8, e4m3e5m2_n16, e4m3e5m2_n32, e4m3e5m2_n64, e4m3e5m2_n128, e4m3e5m2_n192, e4m3e5m2_n256],
    promote
);
wgmma_input!(
    E5m2E4m3,
    1,
    "32",
    "f32",
    ("e5m2", "e4m3"),
    "p, 1, 1",
    [e5m2e4m3_n8, e5m2e4m3_n16, e5m2e4m3_n32, e5m2e4m3_n64, e5m2e4m3_n128, e5m2e4m3_n192, e5m2e4m3_n256],
    promote
);

/// `mbarrier.init` of the barrier at shared address `bar` for `count` arrivals.
#[inline(always)]
unsafe fn mbarrier_init(bar: u32, count: u32) {
    asm!("mbarrier.init.shared::cta.b64 [{b}], {c};", b = in(reg32) bar, c = in(reg32) count, options(nostack));
}

/// Arrives on `bar` and adds `bytes` to the transaction count its phase waits for.
#[inline(always)]
unsafe fn mbarrier_arrive_expect_tx(bar: u32, bytes: u32) {
    asm!(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {n};",
        b = in(reg32) bar,
        n = in(reg32) bytes,
        options(nostack)
    );
}

/// Copies `bytes` (a multiple of 16) from global memory at `src` into
/// shared memory at `dst` (both 16-byte aligned) and completes them on
/// the barrier at `bar`, first adding them to the transaction count its
/// phase waits for (without arriving). PTX ISA, "cp.async.bulk",
/// "mbarrier.expect_tx".
#[inline(always)]
unsafe fn bulk_load(dst: u32, src: *const u8, bytes: u32, bar: u32) {
    asm!(
        "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [{b}], {n};",
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], {n}, [{b}];",
        d = in(reg32) dst,
        s = in(reg64) src,
        n = in(reg32) bytes,
        b = in(reg32) bar,
        options(nostack)
    );
}

/// Arrives on `bar`.
#[inline(always)]
unsafe fn mbarrier_arrive(bar: u32) {
    asm!("mbarrier.arrive.shared::cta.b64 _, [{b}];", b = in(reg32) bar, options(nostack));
}

/// A consumer warpgroup's release of a buffer (called by all its threads):
/// one arrival on the barrier at shared address `bar` of each block of
/// this block's cluster of `CLUSTER` (the cluster's producers write into
/// every block's buffer: a multicast B lands in all of them). Lane 0 of
/// warp r arrives on rank r's barrier, so the arrivals leave side by
/// side; with no cluster, the warpgroup's first thread arrives on its
/// own. The remote arrival has the default semantics (release at CTA
/// scope), as CUTLASS's cluster barrier: with `.release.cluster` ptxas
/// put a `MEMBAR.ALL.GPU` before each arrival, and the FP8 product ran at
/// 0.4x its speed without clusters (NVIDIA H200, 2026-11-27, SASS and ncu:
/// membar stalls).
#[inline(always)]
unsafe fn release_buffer<const CLUSTER: u32>(bar: u32) {
    let t = core::arch::nvptx::_thread_idx_x() as u32 % WARPGROUP_THREADS;
    if CLUSTER == 1 {
        if t == 0 {
            mbarrier_arrive(bar);
        }
    } else if t % 32 == 0 && t / 32 < CLUSTER {
        asm!(
            "{{",
            ".reg .b32 r;",
            "mapa.shared::cluster.u32 r, {b}, {rank};",
            "mbarrier.arrive.shared::cluster.b64 _, [r];",
            "}}",
            b = in(reg32) bar,
            rank = in(reg32) t / 32,
            options(nostack)
        );
    }
}

/// This block's rank in its cluster (`%cluster_ctarank`).
#[inline(always)]
fn cluster_rank() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {r}, %cluster_ctarank;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// Every thread of the cluster waits here (`barrier.cluster.arrive` with
/// release semantics, then `.wait` with acquire): the barriers one block
/// initialized are seen by the others, and no block leaves while another
/// may still write into its shared memory.
///
/// # Safety
/// Reached by every thread of every block of the cluster.
#[inline(always)]
unsafe fn cluster_sync() {
    asm!("barrier.cluster.arrive.release;", "barrier.cluster.wait.acquire;", options(nostack));
}

/// Waits until the phase of `bar` with parity `parity` has completed.
#[inline(always)]
unsafe fn mbarrier_wait(bar: u32, parity: u32) {
    loop {
        let done: u32;
        asm!(
            "{{",
            ".reg .pred p;",
            "mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {ph};",
            "selp.u32 {d}, 1, 0, p;",
            "}}",
            b = in(reg32) bar,
            ph = in(reg32) parity,
            d = out(reg32) done,
            options(nostack)
        );
        if done != 0 {
            return;
        }
    }
}

/// Requests the box at coordinates (c0, c1, c2) of the tensor map at generic
/// address `map` into shared memory at `dst`, completing `bytes` on `bar`.
#[inline(always)]
unsafe fn tma_load_3d(dst: u32, map: *const u8, c0: i32, c1: i32, c2: i32, bar: u32) {
    asm!(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c0}, {c1}, {c2}}}], [{b}];",
        d = in(reg32) dst,
        m = in(reg64) map,
        c0 = in(reg32) c0,
        c1 = in(reg32) c1,
        c2 = in(reg32) c2,
        b = in(reg32) bar,
        options(nostack)
    );
}

/// As [`tma_load_3d`], the box written at `dst` and completed on `bar` in
/// every block of the cluster named by `mask` (bit r: rank r), each at
/// the same shared offsets (`.multicast::cluster`).
#[inline(always)]
unsafe fn tma_load_3d_multicast(dst: u32, map: *const u8, (c0, c1, c2): (i32, i32, i32), bar: u32, mask: u16) {
    asm!(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [{d}], [{m}, {{{c0}, {c1}, {c2}}}], [{b}], {k};",
        d = in(reg32) dst,
        m = in(reg64) map,
        c0 = in(reg32) c0,
        c1 = in(reg32) c1,
        c2 = in(reg32) c2,
        b = in(reg32) bar,
        k = in(reg16) mask,
        options(nostack)
    );
}

/// A wgmma shared-memory descriptor: 128-byte swizzle, start `addr`,
/// leading and stride byte offsets `lbo`, `sbo`.
#[inline(always)]
const fn descriptor(addr: u32, lbo: u32, sbo: u32) -> u64 {
    const fn enc(x: u32) -> u64 {
        ((x & 0x3_FFFF) >> 4) as u64
    }
    enc(addr) | (enc(lbo) << 16) | (enc(sbo) << 32) | (1u64 << 62)
}

/// The four k16-step descriptors of one 64-wide (in k) tile at `tile` whose
/// first row of interest is `row0` (along m or n): K-major steps 32 bytes
/// along the row, MN-major 16 rows.
#[inline(always)]
const fn k_tile_descriptors(tile: u32, row0: u32, mn_major: bool) -> [u64; 4] {
    let mut d = [0u64; 4];
    let mut kk = 0;
    while kk < 4 {
        d[kk] = if mn_major {
            // row0 is a multiple of 64: box row0 / 64.
            descriptor(tile + row0 / 64 * MN_BOX_BYTES + kk as u32 * 16 * ROW_BYTES, MN_BOX_BYTES, 1024)
        } else {
            descriptor(tile + row0 * ROW_BYTES + kk as u32 * 32, 16, 1024)
        };
        kk += 1;
    }
    d
}

/// This thread's A fragments for the four k8 steps of one tf32 k-tile, read
/// from the MN-major tile at `tile` (BM / 32 boxes of 32 m x 32 k, 4 KiB
/// each: row r = k index, 128 bytes = 32 m values, the 16-byte chunk c of
/// row r at chunk c ^ (r % 8)) for the consumer's rows `row0 .. row0 + 64`.
/// Warp w's lane l (g = l / 4, q = l % 4) holds for step kk the elements
/// (m, k) = (16w + g, 8kk + q), (16w + g + 8, 8kk + q), (16w + g, 8kk + q +
/// 4), (16w + g + 8, 8kk + q + 4) (PTX ISA, "Register Fragments and Shared
/// Memory Matrix Layouts": wgmma's A fragment for .tf32). A warp's loads of
/// one register touch 2 chunks in each of 4 rows: at most 2-way bank
/// conflicts, on 8 KiB per consumer and k-tile.
#[inline(always)]
unsafe fn tf32_a_fragments(tile: u32, row0: u32) -> [[u32; 4]; 4] {
    let t = core::arch::nvptx::_thread_idx_x() as u32 % WARPGROUP_THREADS;
    let (warp, g, q) = (t / 32, t % 32 / 4, t % 4);
    let mut a = [[0u32; 4]; 4];
    for (kk, step) in a.iter_mut().enumerate() {
        for (v, x) in step.iter_mut().enumerate() {
            let m = row0 + 16 * warp + g + 8 * (v as u32 % 2);
            let k = 8 * kk as u32 + q + 4 * (v as u32 / 2);
            let byte = (m % 32) * 4;
            let at = tile + m / 32 * (32 * ROW_BYTES) + k * ROW_BYTES + ((byte / 16) ^ (k % 8)) * 16 + byte % 16;
            asm!("ld.shared.b32 {x}, [{a}];", x = out(reg32) *x, a = in(reg32) at, options(nostack, readonly, preserves_flags));
        }
    }
    a
}

/// The kernel's parameters (see the module docs).
#[derive(Clone, Copy)]
pub struct Params<O: Output> {
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
    /// Two `CUtensorMap`s of 128 bytes in global memory: A's, then B's.
    pub maps: *const u8,
    /// C, row-major.
    pub c: *mut O,
    /// Leading dimension of C.
    pub ldc: u32,
    /// Elements from one product's C to the next.
    pub stride_c: u64,
    /// 1 when A has a matrix per product (its map's third coordinate is the
    /// product), 0 when one A serves all.
    pub batch_a: u32,
    /// As `batch_a`, for B.
    pub batch_b: u32,
    /// Products (the batch count; 1 for a single product), or the slices of
    /// a split k (with `k_slice`).
    pub count: u32,
    /// How the epilogue stores C: `C_STORE_TMA` through shared memory with
    /// TMA, C's `CUtensorMap` (dimensions (n, m, count), box 128 bytes x 64
    /// rows, 128-byte swizzle) following A's and B's at `maps + 256`;
    /// `C_STORE_THREADS`: each thread stores its own elements (C unaligned
    /// for TMA, or split-K's workspace); `C_STORE_TRANSPOSED`: each thread
    /// stores its elements of the transpose, (i, j) at `c[j ldc + i]` (and
    /// C is `n x m` for the bounds).
    pub c_store: u32,
    /// 0, or split-K: k-tiles per slice. Product z of the launch is then
    /// slice z of one product, over k-tiles `z k_slice .. (z + 1) k_slice`
    /// (clipped to k), its partial result written to the z-th C (a
    /// workspace; alpha 1, beta 0) for `warpgroup_reduce_*` to sum.
    pub k_slice: u32,
    /// Null, or a grouped launch: `count` products of their own shapes,
    /// described by this table of `count + 1` entries ([`GroupProblem`]:
    /// the last marks the end), product z's tensor maps at
    /// `maps + 384 z`; m, n, k, c, ldc, stride_c, batch_a, batch_b,
    /// c_store and k_slice above are then unused.
    pub group: *const GroupProblem,
    /// Null, or what the product fuses (block scales, row and column
    /// scales, bias, activation: [`Fusion`]); a grouped product's is its
    /// [`GroupProblem::fusion`].
    pub fusion: *const Fusion,
}

impl<O: Output> Params<O> {
    /// The product that job `job` of a grouped launch belongs to, as the
    /// parameters of a single product, and the job's block tile in it.
    /// `cursor` is the product of the caller's previous job (jobs of a block
    /// only grow, so the search resumes there).
    #[inline(always)]
    unsafe fn grouped_job(&self, job: u32, cursor: &mut u32) -> (Params<O>, u32) {
        while (*self.group.add(*cursor as usize + 1)).first_job <= job {
            *cursor += 1;
        }
        let g = *self.group.add(*cursor as usize);
        let q = Params {
            m: g.m,
            n: g.n,
            k: g.k,
            maps: self.maps.add(GROUP_MAPS_BYTES * *cursor as usize),
            c: g.c as *mut O,
            ldc: g.ldc,
            stride_c: 0,
            batch_a: 0,
            batch_b: 0,
            count: 1,
            c_store: g.c_store,
            k_slice: 0,
            group: core::ptr::null(),
            fusion: g.fusion as *const Fusion,
            ..*self
        };
        (q, job - g.first_job)
    }

    /// Job `job` of the launch: the parameters of its product, the product's
    /// index among them (its third TMA coordinate, its C at `z stride_c`),
    /// and its block tile. `cursor`: as [`Params::grouped_job`].
    #[inline(always)]
    unsafe fn job(&self, job: u32, tiles: u32, cursor: &mut u32) -> (Params<O>, u32, u32) {
        if self.group.is_null() {
            (*self, job / tiles, job % tiles)
        } else {
            let (q, tile) = self.grouped_job(job, cursor);
            (q, 0, tile)
        }
    }
}

/// Stage 9's generic kernel: see the module docs. `ACC` = BN / 2
/// accumulators per consumer thread. `FUSED`: the kernel reads `p.fusion`
/// (block scales at promotion, the fused epilogue); without it the
/// argument is ignored and none of that code is compiled in (the block
/// scales' state is live across the k-loop: the plain kernels carry none
/// of it). `BLOCK_SCALES` (with `FUSED`): the kernel applies `p.fusion`'s
/// block scales; without it (the `_epilogue` kernels, for launches without
/// block scales) a promoting type promotes by additions and stages
/// nothing, and only the epilogue reads `p.fusion`.
///
/// # Safety
/// Launched with the geometry of `WgmmaTile { bm: BM, bn: BN, depth: DEPTH, cluster: CLUSTER }`
/// (threads, grid, shared memory) on a compute capability 9.0 device, with
/// tensor maps that describe A and B as the module docs say and a C of at
/// least `m x n` (ldc) per product.
#[inline(always)]
pub unsafe fn warpgroup<
    I: Input,
    O: Output,
    const BM: u32,
    const BN: u32,
    const DEPTH: u32,
    const ACC: usize,
    const A_MN: bool,
    const B_MN: bool,
    const FUSED: bool,
    const BLOCK_SCALES: bool,
    const CLUSTER: u32,
>(
    p: Params<O>,
) {
    const { assert!(ACC as u32 * 2 == BN, "ACC must be BN / 2") };
    const { assert!(FUSED || !BLOCK_SCALES, "block scales come with a fused kernel") };
    const {
        assert!(
            !FUSED || (O::FLOAT && WgmmaTile { bm: BM, bn: BN, depth: DEPTH, cluster: CLUSTER }.fuses()),
            "a fused kernel has a floating-point C and a tile that fuses"
        )
    };
    const {
        assert!(
            I::BYTES == 2 || (I::BYTES == 4 && !B_MN) || !(A_MN || B_MN),
            "only f16 and bf16 operands may be MN-major, and a tf32 A (through registers)"
        )
    };
    const { assert!(WgmmaTile { bm: BM, bn: BN, depth: DEPTH, cluster: CLUSTER }.check().is_ok(), "invalid warpgroup tile") };
    const { assert!(!(B_MN && BN < 64), "a narrow tile reads B K-major only") };
    let tile = WgmmaTile { bm: BM, bn: BN, depth: DEPTH, cluster: CLUSTER };
    let base = smem_base();
    if base % SMEM_ALIGN != 0 {
        // The buffer is declared aligned (`SMEM` in `thread`): never.
        core::arch::nvptx::trap();
    }
    let full = |s: u32| base + tile.barriers_offset() + 8 * s;
    let empty = |s: u32| base + tile.barriers_offset() + 8 * (DEPTH + s);
    let a_tile = |s: u32| base + s * tile.buffer_bytes();
    let b_tile = |s: u32| base + s * tile.buffer_bytes() + tile.a_tile_bytes();
    let tile_bytes = tile.buffer_bytes();
    // FP8's fused kernels on a tile with room for them: the producer warp
    // stages each k-tile's block scales in shared memory beside its buffer
    // (`stage_scales`; its 32 lanes arrive on the buffer's `full` barrier
    // besides the TMA's thread), and each consumer warp reads them after the
    // barrier's wait and releases the buffer itself (the reads done).
    let staged = I::PROMOTE && FUSED && BLOCK_SCALES && tile.stages_scales();
    let halves = I::PROMOTE && BN == 256;
    const {
        assert!(
            !(I::PROMOTE && BN == 256 && FUSED && BLOCK_SCALES)
                || WgmmaTile { bm: BM, bn: BN, depth: DEPTH, cluster: CLUSTER }.stages_scales(),
            "a promoting type's 256-column tile takes block scales staged only"
        )
    };
    let scales_slot = |s: u32| base + tile.scales_offset() + s * tile.scales_slot_bytes();
    if staged {
        let smem: u32;
        asm!("mov.u32 {s}, %dynamic_smem_size;", s = out(reg32) smem, options(pure, nomem, nostack));
        if smem < tile.kernel_smem_bytes(true) {
            // Launched without room for the slots (`WgmmaTile::kernel_smem_bytes`).
            core::arch::nvptx::trap();
        }
    }

    let t = core::arch::nvptx::_thread_idx_x() as u32;
    // Clusters of CLUSTER blocks (consecutive blocks: the entry point's
    // `.reqnctapercluster`) take the schedule's jobs; a job is CLUSTER
    // block tiles of consecutive tile rows with the same columns, block
    // `rank` of the cluster taking row `CLUSTER by + rank`.
    let rank = if CLUSTER > 1 { cluster_rank() } else { 0 };
    let blocks = crate::thread::grid_dim()[0] / CLUSTER;
    let block = crate::thread::block_idx()[0] / CLUSTER;
    let consumers = BM / WARPGROUP_M;
    if staged && BN > BLOCK_SCALE_K && t < DEPTH {
        // A tile's second B scale is not staged where its columns are past
        // n: the slots hold a value from the start (ordered by the barrier below).
        f32::st_shared(slot_b_scale::<BM>(scales_slot(t), 1), 1.0);
    }
    if t == 0 {
        for s in 0..DEPTH {
            mbarrier_init(full(s), if staged { 1 + 32 } else { 1 });
            // A buffer is free once every consumer of the cluster has
            // released it: a multicast B is written into all of them (with
            // staged scales, every consumer warp).
            mbarrier_init(empty(s), consumers * CLUSTER * if staged { 4 } else { 1 });
        }
        asm!("fence.mbarrier_init.release.cluster;", options(nostack));
    }
    if CLUSTER > 1 {
        if !p.group.is_null() {
            // A grouped launch's products differ in k: the cluster's
            // pipelines would fall out of step (the host never asks).
            core::arch::nvptx::trap();
        }
        cluster_sync();
    } else {
        crate::thread::sync_threads();
    }

    // The tile schedule: tile i of the launch (over every product of the
    // batch) is block tile `raster(i % tiles)` of product `i / tiles`; block b
    // takes tiles b, b + blocks, ... (persistent blocks). A grouped launch
    // lays its products' block tiles one after the other (`p.group`).
    // Jobs per product, and a product's rows of jobs.
    let job_rows = |q: &Params<O>| q.m.div_ceil(BM).div_ceil(CLUSTER);
    let tiles = job_rows(&p) * p.n.div_ceil(BN);
    let total = if p.group.is_null() { tiles * p.count } else { (*p.group.add(p.count as usize)).first_job };
    let bk = ROW_BYTES / I::BYTES;
    // The k-tiles of product z of q: all of them, or its slice.
    let k_range = |q: &Params<O>, z: u32| {
        let k_tiles = q.k.div_ceil(bk);
        if q.k_slice == 0 {
            (0, k_tiles)
        } else {
            let first = z * q.k_slice;
            (first, if first + q.k_slice < k_tiles { first + q.k_slice } else { k_tiles })
        }
    };
    // The warpgroup's index, read from lane 0 (`shfl.sync.idx`): the same
    // value, which ptxas then knows is uniform across the warp, so what
    // is computed from it (the consumer's A-tile descriptors) lives in
    // uniform registers (CUTLASS's `canonical_warp_group_idx`).
    let warpgroup: u32;
    asm!(
        "shfl.sync.idx.b32 {w}, {v}, 0, 31, -1;",
        w = out(reg32) warpgroup,
        v = in(reg32) t / WARPGROUP_THREADS,
        options(pure, nomem, nostack)
    );
    if warpgroup == 0 {
        // The producer needs few registers: give them to the consumers.
        if tile.reallocates() {
            if staged {
                // A whole warp runs the loop (the scales' sources): what the
                // consumers leave.
                asm!(
                    "setmaxnreg.dec.sync.aligned.u32 {n};",
                    n = const WgmmaTile { bm: BM, bn: BN, depth: DEPTH, cluster: CLUSTER }.staging_producer_registers(),
                    options(nostack)
                );
            } else {
                asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const PRODUCER_REGISTERS, options(nostack));
            }
        }
        if t == 0 || (staged && t < 32) {
            let mut it = 0u32; // k-tiles issued by this block, over all its tiles
            let mut job = block;
            let mut cursor = 0u32;
            while job < total {
                let (q, z, tile_index) = p.job(job, tiles, &mut cursor);
                let (map_a, map_b) = (q.maps, q.maps.add(128));
                let (by, bx) = raster(tile_index, job_rows(&q), q.n.div_ceil(BN));
                let (m0, n0) = ((CLUSTER * by + rank) * BM, bx * BN);
                let (za, zb) = ((z * q.batch_a) as i32, (z * q.batch_b) as i32);
                let (k_first, k_end) = k_range(&q, z);
                let sources = if staged {
                    ScaleSources::of::<BM, BN>(q.fusion, (m0, n0), (q.m, q.n), t)
                } else {
                    ScaleSources::NONE
                };
                for kt in k_first..k_end {
                    let (s, u) = (it % DEPTH, it / DEPTH);
                    if u > 0 {
                        mbarrier_wait(empty(s), (u - 1) & 1);
                    }
                    if staged {
                        stage_scales::<BM, BN>(&sources, kt, scales_slot(s), t, full(s));
                    }
                    if staged && t != 0 {
                        it += 1;
                        continue;
                    }
                    mbarrier_arrive_expect_tx(full(s), tile_bytes);
                    let k0 = (kt * bk) as i32;
                    // MN-major: boxes of BK (128 bytes) along m or n by BK
                    // rows along k.
                    if A_MN {
                        for j in 0..BM / bk {
                            let at = a_tile(s) + j * bk * ROW_BYTES;
                            tma_load_3d(at, map_a, (m0 + bk * j) as i32, k0, za, full(s));
                        }
                    } else {
                        tma_load_3d(a_tile(s), map_a, k0, m0 as i32, za, full(s));
                    }
                    // A cluster's blocks share B: its k-tiles are fetched
                    // by the blocks in turn, each multicast into every
                    // block's buffer s.
                    let load_b = |at: u32, c: (i32, i32, i32)| {
                        if CLUSTER > 1 {
                            tma_load_3d_multicast(at, map_b, c, full(s), ((1u32 << CLUSTER) - 1) as u16);
                        } else {
                            tma_load_3d(at, map_b, c.0, c.1, c.2, full(s));
                        }
                    };
                    if CLUSTER == 1 || it % CLUSTER == rank {
                        if B_MN {
                            for j in 0..BN / bk {
                                load_b(b_tile(s) + j * bk * ROW_BYTES, ((n0 + bk * j) as i32, k0, zb));
                            }
                        } else {
                            load_b(b_tile(s), (k0, n0 as i32, zb));
                        }
                    }
                    it += 1;
                }
                job += blocks;
            }
        }
        if CLUSTER > 1 {
            cluster_sync();
        }
        return;
    }

    // Consumer warpgroup c computes rows 64 c .. 64 c + 64 of each block tile.
    if tile.reallocates() {
        asm!(
            "setmaxnreg.inc.sync.aligned.u32 {n};",
            n = const WgmmaTile { bm: BM, bn: BN, depth: DEPTH, cluster: CLUSTER }.consumer_registers(),
            options(nostack)
        );
    }
    let c = warpgroup - 1;
    let leader = t % WARPGROUP_THREADS == 0;
    let lane = t % 32;
    let warp = (t % WARPGROUP_THREADS) / 32;
    let mut it = 0u32;
    let mut job = block;
    let mut cursor = 0u32;
    while job < total {
        let (q, z, tile_index) = p.job(job, tiles, &mut cursor);
        // Pairs of C's elements are stored as one access when every pair is
        // aligned: an even ldc and stride, C itself aligned to a pair.
        let pairs = q.ldc % 2 == 0
            && (q.count == 1 || q.stride_c % 2 == 0)
            && (q.c as usize) % core::mem::align_of::<O::Pair>() == 0;
        let (by, bx) = raster(tile_index, job_rows(&q), q.n.div_ceil(BN));
        let (m0, n0) = ((CLUSTER * by + rank) * BM, bx * BN);
        let mut acc = [0f32; ACC];
        // The full-precision accumulator of a promoting type (unused, and
        // optimized away, otherwise).
        let mut total = [0f32; ACC];
        // A promoting type on a tile of 256 columns multiplies and promotes
        // each k-tile in two halves of 128 columns, one wgmma group each
        // into these 64 accumulators (beside the 128 of `total`: two full
        // sets would take 256 registers a thread).
        let mut half = [0f32; 64];
        let (k_first, k_end) = k_range(&q, z);
        let row = m0 + c * WARPGROUP_M + 16 * warp + lane / 4;
        let scales = if I::PROMOTE && FUSED && BLOCK_SCALES && !staged {
            BlockScales::of(q.fusion, (row, n0), q.m)
        } else {
            BlockScales::NONE
        };
        // k-tile kt, the it-th of this block: its buffer, phase parity and
        // the previous k-tile's `empty` barrier (released through `release_buffer`).
        // A promoting type releases each k-tile's buffer itself, as soon as
        // its group has completed (before the promotion).
        let args = |kt: u32, it: u32| {
            let (s, u) = (it % DEPTH, it / DEPTH);
            let release = if kt > k_first && !I::PROMOTE { Some(empty((it + DEPTH - 1) % DEPTH)) } else { None };
            ((full(s), u & 1), (a_tile(s), b_tile(s)), release)
        };
        let row0 = c * WARPGROUP_M;
        // The block scales of the next k-tile, loaded a k-tile ahead and
        // multiplied only at its promotion (a product right after the loads
        // waited for them there).
        let mut next_scales = if scales.present() && k_first < k_end { scales.load(k_first) } else { [0f32; 3] };
        for kt in k_first..k_end {
            let loaded = next_scales;
            if scales.present() && kt + 1 < k_end {
                next_scales = scales.load(kt + 1);
            }
            // Staged scales: this thread's rows' and the tile's, read after
            // the buffer's `full` wait, before its wgmma group is issued.
            let slot = if staged { Some((scales_slot(it % DEPTH), row - m0)) } else { None };
            if halves {
                // Half 0 (B's rows 0..128 of the buffer), promoted, then
                // half 1 (rows 128..256) into the same accumulators; each
                // group's first k-step overwrites them (scale-d false).
                // Half 1 runs even where its columns are past n (a branch
                // around it made ptxas spill the sums in the k-loop).
                let s = it % DEPTH;
                let staged_scales =
                    consume::<I, 64, A_MN, B_MN, CLUSTER, BM>(&mut half, args(kt, it), row0, slot, false);
                // B's scale of the second half's columns, read while the
                // group runs (where they are past n, none is staged: the
                // slot keeps an earlier tile's or the 1.0 stored at the
                // start, times sums not stored; choosing 1.0 here instead
                // made ptxas spill 3 KB).
                let sb1 = if staged { f32::ld_shared(slot_b_scale::<BM>(scales_slot(s), 1)) } else { 0.0 };
                asm!("wgmma.wait_group.sync.aligned 0;", options(nostack));
                let [a0, a1, sb0] = staged_scales;
                promote_half(&mut half, &mut total, 0, staged.then_some(BlockScales::factors([a0, a1, sb0])));
                let da = k_tile_descriptors(a_tile(s), row0, A_MN);
                I::k_tile::<64, A_MN, B_MN>(&mut half, da, k_tile_descriptors(b_tile(s), 128, B_MN), false);
                asm!("wgmma.wait_group.sync.aligned 0;", options(nostack));
                if staged {
                    if lane == 0 {
                        mbarrier_arrive(empty(s));
                    }
                } else {
                    release_buffer::<CLUSTER>(empty(s));
                }
                promote_half(&mut half, &mut total, 1, staged.then_some(BlockScales::factors([a0, a1, sb1])));
                it += 1;
                continue;
            }
            let staged_scales = consume::<I, ACC, A_MN, B_MN, CLUSTER, BM>(&mut acc, args(kt, it), row0, slot, true);
            if I::PROMOTE {
                // This k-tile's group is done: its buffer is free, its
                // partial product (times its block scales) joins the
                // full-precision sum, and the wgmma accumulators start
                // the next k-tile from zero.
                asm!("wgmma.wait_group.sync.aligned 0;", options(nostack));
                if staged {
                    // Each warp read its scales from the buffer: each
                    // releases it (its lanes in step after the wait).
                    if lane == 0 {
                        mbarrier_arrive(empty(it % DEPTH));
                    }
                    promote(&mut acc, &mut total, Some(BlockScales::factors(staged_scales)));
                } else {
                    release_buffer::<CLUSTER>(empty(it % DEPTH));
                    if scales.present() {
                        promote(&mut acc, &mut total, Some(BlockScales::factors(loaded)));
                    } else {
                        promote(&mut acc, &mut total, None);
                    }
                }
            }
            it += 1;
        }
        asm!("wgmma.wait_group.sync.aligned 0;", options(nostack));
        if I::PROMOTE {
            acc = total;
        }
        // The accumulators as this point defines them: an empty asm per
        // register, ordered after the wait, so LLVM cannot hoist the
        // epilogue's arithmetic on them (it did, for i32, and ptxas then
        // serialized the wgmmas: C7514).
        for x in acc.iter_mut() {
            asm!("// {x}", x = inout(reg32) * x, options(nomem, nostack, preserves_flags));
        }
        if k_end > k_first && !I::PROMOTE {
            release_buffer::<CLUSTER>(empty((it - 1) % DEPTH));
        }
        if CLUSTER > 1 && m0 >= q.m {
            // Past the last tile row: the k-loop ran for the cluster's
            // multicasts; nothing to store.
            job += blocks;
            continue;
        }

        // Epilogue: alpha * acc + beta * C, converted to C's type, while the
        // producer already fetches the next tile's k-tiles.
        let cbase = q.c.add(z as usize * q.stride_c as usize);
        // A fused epilogue (floating-point C only) is applied to the
        // accumulators here, C's old value included; the stores below then
        // convert them (alpha 1, beta 0).
        let fused = if FUSED { Epilogue::of(q.fusion) } else { Epilogue::OFF };
        let mut q = q;
        if fused.on {
            let transposed = q.c_store == C_STORE_TRANSPOSED;
            fuse_accumulators::<O, ACC>(&mut acc, &q, fused.f, (cbase, transposed), (row, n0 + 2 * (lane % 4)));
            (q.alpha, q.beta) = (O::f32_value(1.0), O::f32_value(0.0));
        }
        // A narrow tile has no staging boxes: its threads store C (the host
        // asks for TMA stores only where BN is at least 64).
        if BN >= 64 && q.c_store == C_STORE_TMA {
            store_tma::<O, ACC>(&acc, &q, (z, m0 + c * WARPGROUP_M, n0, row), base + tile.c_stage_offset(), c);
        } else if q.c_store == C_STORE_TRANSPOSED {
            // (i, j) at c[j ldc + i]: element (j, i) of an n x m row-major C.
            for j in 0..ACC / 4 {
                let col = n0 + 8 * j as u32 + 2 * (lane % 4);
                for h in 0..2usize {
                    for e in 0..2usize {
                        let x = O::acc(acc[4 * j + 2 * h + e]);
                        let at = (col + e as u32, row + 8 * h as u32);
                        store_one(cbase, q.ldc, (q.n, q.m), at, (q.alpha, q.beta), x);
                    }
                }
            }
        } else {
            for j in 0..ACC / 4 {
                let col = n0 + 8 * j as u32 + 2 * (lane % 4);
                for h in 0..2usize {
                    let x = (O::acc(acc[4 * j + 2 * h]), O::acc(acc[4 * j + 2 * h + 1]));
                    store_pair(cbase, q.ldc, (q.m, q.n), (row + 8 * h as u32, col), (q.alpha, q.beta), x, pairs);
                }
            }
        }
        job += blocks;
    }
    if leader {
        // The last stores have read their boxes before the block's shared
        // memory goes away (any product of a grouped launch may have used
        // TMA stores; none pending is a no-op).
        asm!("cp.async.bulk.wait_group.read 0;", options(nostack));
    }
    if CLUSTER > 1 {
        cluster_sync();
    }
}

/// Promotes a k-tile (a promoting type): its `ACC` wgmma accumulators (in
/// the fragment layout of an m64nN group) join the full-precision sums
/// `total`, times `factors` (this thread's rows r and r + 8: sa sb) if
/// given, and are cleared for the next k-tile. The group has completed.
#[inline(always)]
unsafe fn promote<const ACC: usize>(acc: &mut [f32; ACC], total: &mut [f32; ACC], factors: Option<[f32; 2]>) {
    for (i, (x, t)) in acc.iter_mut().zip(total.iter_mut()).enumerate() {
        asm!("// {x}", x = inout(reg32) * x, options(nomem, nostack, preserves_flags));
        // acc[4j + 2h + e] is on row `row + 8 h`.
        *t = match factors {
            Some(s) => core::intrinsics::fmaf32(*x, s[i / 2 % 2], *t),
            None => *t + *x,
        };
        *x = 0.0;
    }
}

/// Promotes one half of a k-tile on a tile of 256 columns (a promoting
/// type): `half`'s 64 wgmma accumulators (columns 128 h .. 128 h + 128 of
/// the tile, in the fragment layout of an m64n128 group) join `total`'s
/// entries 64 h .., times `factors` (this thread's rows r and r + 8: sa sb)
/// if given (the next group overwrites them: scale-d false). The group
/// has completed.
#[inline(always)]
unsafe fn promote_half<const ACC: usize>(
    half: &mut [f32; 64],
    total: &mut [f32; ACC],
    h: usize,
    factors: Option<[f32; 2]>,
) {
    for (i, x) in half.iter_mut().enumerate() {
        asm!("// {x}", x = inout(reg32) * x, options(nomem, nostack, preserves_flags));
        let t = &mut total[64 * h + i];
        // half[4j + 2h' + e] is on row `row + 8 h'`.
        *t = match factors {
            Some(s) => core::intrinsics::fmaf32(*x, s[i / 2 % 2], *t),
            None => *t + *x,
        };
    }
}

/// One k-tile of a consumer warpgroup (rows `row0 .. row0 + 64` of the block
/// tile): waits for its buffer (`full` barrier and phase parity), issues its
/// wgmma group, and once the previous k-tile's group has completed arrives
/// on that k-tile's `empty` barrier ([`release_buffer`]), if given. Both operands by descriptor:
/// the group is issued, then `wgmma.wait_group 1` (the previous group is
/// done; this one runs on). An MN-major tf32 A through registers: first
/// `wgmma.wait_group 0`, then the fragments are loaded and the group
/// issued, so no register a wgmma reads is rewritten while it runs (PTX
/// ISA, wgmma.mma_async) and ptxas need not serialize the wgmmas (its
/// C7513: registers defined inside a pipeline stage). The tensor cores stay
/// busy meanwhile with the other consumer's group. Returns the k-tile's
/// staged block scales of this thread (`scales`), read after the group is
/// issued, or zeros.
///
/// # Safety
/// All 128 threads of the consumer warpgroup, in uniform control flow; the
/// tiles as the module docs say.
#[inline(always)]
unsafe fn consume<I: Input, const ACC: usize, const A_MN: bool, const B_MN: bool, const CLUSTER: u32, const BM: u32>(
    acc: &mut [f32; ACC],
    ((full, parity), (a_tile, b_tile), release): ((u32, u32), (u32, u32), Option<u32>),
    row0: u32,
    scales: Option<(u32, u32)>,
    accumulate: bool,
) -> [f32; 3] {
    mbarrier_wait(full, parity);
    let db = k_tile_descriptors(b_tile, 0, B_MN);
    if I::BYTES == 4 && A_MN {
        asm!("wgmma.wait_group.sync.aligned 0;", options(nostack));
        if let Some(bar) = release {
            release_buffer::<CLUSTER>(bar);
        }
        let a = tf32_a_fragments(a_tile, row0);
        I::k_tile_rs::<ACC>(acc, a, db);
    } else {
        let da = k_tile_descriptors(a_tile, row0, A_MN);
        I::k_tile::<ACC, A_MN, B_MN>(acc, da, db, accumulate);
        // The previous k-tile's group has completed: its buffer is free.
        asm!("wgmma.wait_group.sync.aligned 1;", options(nostack));
        if let Some(bar) = release {
            release_buffer::<CLUSTER>(bar);
        }
    }
    // The staged block scales (`scales`: the buffer's slot and this
    // thread's first row in the tile): sa(r), sa(r + 8), sb, read while
    // the group runs (read before it, their loads held up its issue:
    // `wgmma.fence` waits for the warp's register writes in flight).
    match scales {
        Some((slot, r)) => [
            f32::ld_shared(slot_a_scale(slot, r)),
            f32::ld_shared(slot_a_scale(slot, r + 8)),
            f32::ld_shared(slot_b_scale::<BM>(slot, 0)),
        ],
        None => [0f32; 3],
    }
}

/// The shared address of A's scale of tile row `r` in a k-tile's scales
/// slot at `slot` (BM f32 of A's rows, then B's, one per 128 columns:
/// `gemm_core::warpgroup::WgmmaTile::scales_slot_bytes`).
#[inline(always)]
const fn slot_a_scale(slot: u32, r: u32) -> u32 {
    slot + 4 * r
}

/// The shared address of B's scale of the tile's columns `128 h ..` in a
/// k-tile's scales slot at `slot` ([`slot_a_scale`]).
#[inline(always)]
const fn slot_b_scale<const BM: u32>(slot: u32, h: u32) -> u32 {
    slot + 4 * (BM + h)
}

/// Where one producer lane copies a product's block scales from, for one
/// block tile ([`stage_scales`]): A's scales of tile rows `lane + 32 j` (j
/// below BM / 32) and B's of the tile's columns, at k-tile 0 (k-tile kt's
/// are `kt k` further), or null: none (factors of one).
struct ScaleSources {
    /// A's scales at k-tile 0, or null.
    a: *const f32,
    /// Offsets from `a` of rows `lane + 32 j` (rows past m read row m - 1's).
    rows: [u32; 8],
    /// The B scale this lane copies, at k-tile 0: lane 0 the tile's
    /// (columns 0..), lane 1 on a tile of 256 columns that of its columns
    /// 128.. unless they are past n; else null.
    b: *const f32,
    /// `a_scales_k` and `b_scales_k`.
    k: [u32; 2],
    /// Whether A's scales of the tile's BM rows lie side by side, 16-byte
    /// aligned at every k-tile (one scale a row, rows contiguous, every
    /// row inside m): lane 0 copies them as one bulk copy.
    bulk: bool,
}

impl ScaleSources {
    const NONE: ScaleSources =
        ScaleSources { a: core::ptr::null(), rows: [0; 8], b: core::ptr::null(), k: [0; 2], bulk: false };

    /// Lane `lane`'s sources for the block tile at `(m0, n0)` of an m x n
    /// product fusing `fusion` (as [`BlockScales::of`]).
    #[inline(always)]
    unsafe fn of<const BM: u32, const BN: u32>(
        fusion: *const Fusion,
        (m0, n0): (u32, u32),
        (m, n): (u32, u32),
        lane: u32,
    ) -> ScaleSources {
        if fusion.is_null() || (*fusion).a_scales == 0 {
            return ScaleSources::NONE;
        }
        let f = *fusion;
        let (last, shift) = (m - 1, f.a_scales_rows.trailing_zeros());
        let mut rows = [0u32; 8];
        for (j, r) in rows.iter_mut().enumerate().take((BM / 32) as usize) {
            let i = m0 + 32 * j as u32 + lane;
            *r = (if i < last { i } else { last } >> shift) * f.a_scales_mn;
        }
        // Lane h copies B's scale of the tile's columns 128 h ..
        let h = n0 / BLOCK_SCALE_K + lane;
        let b = if lane < BN.div_ceil(BLOCK_SCALE_K) && BLOCK_SCALE_K * h < n {
            (f.b_scales as *const f32).add((h * f.b_scales_mn) as usize)
        } else {
            core::ptr::null()
        };
        ScaleSources {
            a: f.a_scales as *const f32,
            rows,
            b,
            k: [f.a_scales_k, f.b_scales_k],
            bulk: f.a_scales_rows == 1
                && f.a_scales_mn == 1
                && f.a_scales % 16 == 0
                && f.a_scales_k % 4 == 0
                && m0 + BM <= m,
        }
    }
}

/// One producer lane's part of staging k-tile `kt`'s block scales in the
/// buffer's slot at shared address `slot` (BM f32 of A's rows, then B's
/// one per 128 columns): rows `lane + 32 j` and (lane 0) B's, (lane 1, BN
/// = 256) B's of columns 128.. unless they are past n, copied by `cp.async` whose
/// completion arrives on the buffer's `full` barrier (`.noinc`: the
/// barrier counts these 32 arrivals); A's rows side by side
/// ([`ScaleSources::bulk`]) instead by lane 0 in one bulk copy counted in
/// the barrier's transaction bytes (as DeepGEMM's TMA copy of them);
/// without block scales, ones stored and a plain arrival. PTX ISA,
/// "cp.async", "cp.async.mbarrier.arrive", "cp.async.bulk".
///
/// # Safety
/// All 32 lanes of the producer's first warp, the slot free (its buffer's
/// `empty` wait passed) and `full` counting them.
#[inline(always)]
unsafe fn stage_scales<const BM: u32, const BN: u32>(src: &ScaleSources, kt: u32, slot: u32, lane: u32, full: u32) {
    if src.a.is_null() {
        for j in 0..BM / 32 {
            f32::st_shared(slot_a_scale(slot, 32 * j + lane), 1.0);
        }
        if lane < BN.div_ceil(BLOCK_SCALE_K) {
            f32::st_shared(slot_b_scale::<BM>(slot, lane), 1.0);
        }
        mbarrier_arrive(full);
        return;
    }
    let a = src.a.add((kt * src.k[0]) as usize);
    if src.bulk {
        if lane == 0 {
            bulk_load(slot_a_scale(slot, 0), a.add(src.rows[0] as usize) as *const u8, 4 * BM, full);
        }
    } else {
        for j in 0..BM / 32 {
            f32::cp_async_elem(slot_a_scale(slot, 32 * j + lane), a.add(src.rows[j as usize] as usize));
        }
    }
    if !src.b.is_null() {
        f32::cp_async_elem(slot_b_scale::<BM>(slot, lane), src.b.add((kt * src.k[1]) as usize));
    }
    asm!("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [{b}];", b = in(reg32) full, options(nostack));
}

/// The block scales one consumer thread applies as it promotes (FP8; see
/// [`Fusion`]): the A scales of its two rows (r and r + 8) and the B scale
/// of its block tile's columns, at k-tile 0 (k-tile kt's are `kt k` further,
/// `k` the strides along k).
#[derive(Clone, Copy)]
struct BlockScales {
    /// A's scales of rows r and r + 8, B's of the tile, or null: none.
    a: [*const f32; 2],
    b: *const f32,
    /// `a_scales_k` and `b_scales_k`.
    k: [u32; 2],
}

impl BlockScales {
    const NONE: BlockScales = BlockScales { a: [core::ptr::null(); 2], b: core::ptr::null(), k: [0; 2] };

    /// The scales of the thread whose first row is `row` in the tile of
    /// columns from `n0` (a multiple of BN, and BN divides 128), in a
    /// product of `m` rows. Rows past m read row m - 1's scale (their
    /// results are not stored).
    #[inline(always)]
    unsafe fn of(fusion: *const Fusion, (row, n0): (u32, u32), m: u32) -> BlockScales {
        if fusion.is_null() || (*fusion).a_scales == 0 {
            return BlockScales::NONE;
        }
        let f = *fusion;
        let (last, shift) = (m - 1, f.a_scales_rows.trailing_zeros());
        let block = |r: u32| ((if r < last { r } else { last } >> shift) * f.a_scales_mn) as usize;
        let a = f.a_scales as *const f32;
        BlockScales {
            a: [a.add(block(row)), a.add(block(row + 8))],
            b: (f.b_scales as *const f32).add((n0 / BLOCK_SCALE_K * f.b_scales_mn) as usize),
            k: [f.a_scales_k, f.b_scales_k],
        }
    }

    /// Whether there are block scales.
    #[inline(always)]
    fn present(&self) -> bool {
        !self.b.is_null()
    }

    /// The scales of k-tile `kt`: sa(r, kt), sa(r + 8, kt), sb(kt).
    #[inline(always)]
    unsafe fn load(&self, kt: u32) -> [f32; 3] {
        let at = (kt * self.k[0]) as usize;
        [*self.a[0].add(at), *self.a[1].add(at), *self.b.add((kt * self.k[1]) as usize)]
    }

    /// The factors of rows r and r + 8 from a k-tile's scales ([`BlockScales::load`]):
    /// sa(r, kt) sb(kt), sa(r + 8, kt) sb(kt).
    #[inline(always)]
    fn factors([a0, a1, b]: [f32; 3]) -> [f32; 2] {
        [a0 * b, a1 * b]
    }
}

/// The fused epilogue of one product ([`Fusion`] without its block scales:
/// row and column scales, bias, activation), if any: `on` false without
/// one (a fused kernel's C is a floating-point type).
#[derive(Clone, Copy)]
struct Epilogue {
    on: bool,
    f: *const Fusion,
}

impl Epilogue {
    /// No fused epilogue (the plain kernels).
    const OFF: Epilogue = Epilogue { on: false, f: core::ptr::null() };

    #[inline(always)]
    unsafe fn of(fusion: *const Fusion) -> Epilogue {
        if fusion.is_null() {
            return Epilogue::OFF;
        }
        let f = &*fusion;
        Epilogue { on: f.row_scales != 0 || f.col_scales != 0 || f.bias != 0 || f.activation != 0, f: fusion }
    }
}

/// Applies the epilogue `f` to one consumer thread's accumulators in place:
/// each element (i, j) becomes `act(acc alpha rs(i) cs(j) + beta C(i, j) +
/// bias)` in f32 (the value the store then converts, with alpha 1 and beta
/// 0); `row` is the thread's first row, `col` its first column (acc[4 jj + 2
/// h + e] is element (row + 8 h, col + 8 jj + e)); C's element (i, j) at `c
/// + i ldc + j`, or `c + j ldc + i` when `transposed`.
///
/// The description is copied into registers once; each kind of value
/// (row scales, row bias, column scales, column bias, C) is loaded by a
/// loop of its own under one test of its presence, every address in it
/// valid (rows and columns outside C read the last row's or column's
/// values, and are not stored), so the loads of a loop leave together and
/// their latencies overlap. Loads inside per-element branches, the
/// description re-read for each, waited one after another: the fused
/// bias+GELU product cost 40% over the plain one (bf16 4096³, NVIDIA H200,
/// 2026-11-27), 26% of it in this function.
///
/// # Safety
/// `f` is a valid [`Fusion`] whose vectors cover m x n; C as the kernel's.
#[inline(always)]
unsafe fn fuse_accumulators<O: Output, const ACC: usize>(
    acc: &mut [f32; ACC],
    q: &Params<O>,
    f: *const Fusion,
    (c, transposed): (*mut O, bool),
    (row, col): (u32, u32),
) {
    let f = *f;
    let alpha = O::value_f32(q.alpha);
    let clamp = |x: u32, n: u32| if x < n { x } else { n - 1 } as usize;
    let f32_at = |p: u64, i: usize| *(p as *const f32).add(i);
    let o_at = |p: u64, i: usize| O::value_f32((*(p as *const O).add(i)).to_value());
    let rows = [clamp(row, q.m), clamp(row + 8, q.m)];
    let mut rs = [alpha; 2];
    if f.row_scales != 0 {
        for h in 0..2 {
            rs[h] *= f32_at(f.row_scales, rows[h]);
        }
    }
    let by_rows = f.bias != 0 && f.bias_along == BIAS_ROWS;
    let mut rb = [0f32; 2];
    if by_rows {
        rb = if f.bias_type == BIAS_F32 {
            [f32_at(f.bias, rows[0]), f32_at(f.bias, rows[1])]
        } else {
            [o_at(f.bias, rows[0]), o_at(f.bias, rows[1])]
        };
    }
    // Column e of 8-column block jj is index i = 2 jj + e. In a tile whose
    // columns all lie in C the indices are the thread's first plus
    // constants (the loads' addresses one register plus offsets); at C's
    // edge they are clamped.
    let rows_and_c = (rows, rs, (c, transposed));
    if col + 8 * (ACC / 4 - 1) as u32 + 1 < q.n {
        fuse_columns::<O, ACC>(acc, q, &f, rows_and_c, |i| col as usize + 8 * (i / 2) + i % 2);
    } else {
        fuse_columns::<O, ACC>(acc, q, &f, rows_and_c, |i| clamp(col + 8 * (i / 2) as u32 + (i % 2) as u32, q.n));
    }
    // The bias by rows, in a loop of its own after the column terms: as
    // the column bias's alternative inside `fuse_columns`, LLVM merged the
    // two loops' additions into one over 128 selected operands (a copy of
    // a row's bias per element), and the 128 x 256 kernels spilled 200-390
    // registers (ptxas, 2026-11-29).
    if by_rows {
        for (i, x) in acc.iter_mut().enumerate() {
            *x += rb[i / 2 % 2];
        }
    }
    match f.activation {
        ACT_RELU => {
            for x in acc.iter_mut() {
                *x = relu(*x);
            }
        }
        // A 16-bit C takes the SFU's tanh (within 2^-12 |v|, below half
        // an ulp of v in C's type): one SFU operation an element, not two.
        ACT_GELU if core::mem::size_of::<O>() == 2 => {
            for x in acc.iter_mut() {
                *x = gelu_tanh_f32(*x);
            }
        }
        ACT_GELU => {
            for x in acc.iter_mut() {
                *x = gelu_f32(*x);
            }
        }
        _ => {}
    }
}

/// [`fuse_accumulators`]' terms after the row factors: in the order of the
/// plain kernel's alpha acc + beta C, ((acc alpha rs(i)) cs(j) + beta C) +
/// a bias by column (the caller adds a bias by row next), an absent term
/// not computed (a row factor of exactly 1, alpha 1 without row scales,
/// multiplies nothing);
/// `column(i)` the index of the thread's column i (2 jj + e). Each loop's
/// loads are unrolled side by side (ptxas keeps as many in flight as the
/// registers allow).
///
/// # Safety
/// As [`fuse_accumulators`]; `column` gives indices inside C.
#[inline(always)]
#[allow(clippy::type_complexity)]
unsafe fn fuse_columns<O: Output, const ACC: usize>(
    acc: &mut [f32; ACC],
    q: &Params<O>,
    f: &Fusion,
    (rows, rs, (c, transposed)): ([usize; 2], [f32; 2], (*mut O, bool)),
    column: impl Fn(usize) -> usize,
) {
    let beta = O::value_f32(q.beta);
    let f32_at = |p: u64, i: usize| *(p as *const f32).add(i);
    let o_at = |p: u64, i: usize| O::value_f32((*(p as *const O).add(i)).to_value());
    // acc[4 jj + 2 h + e] is on row h, column 2 jj + e.
    let at = |i: usize, h: usize| 4 * (i / 2) + 2 * h + i % 2;
    if rs != [1.0; 2] {
        for (i, x) in acc.iter_mut().enumerate() {
            *x *= rs[i / 2 % 2];
        }
    }
    if f.col_scales != 0 {
        for i in 0..ACC / 2 {
            let s = f32_at(f.col_scales, column(i));
            for h in 0..2 {
                acc[at(i, h)] *= s;
            }
        }
    }
    if beta != 0.0 {
        let (si, sj) = if transposed { (1, q.ldc as usize) } else { (q.ldc as usize, 1) };
        for i in 0..ACC / 2 {
            for h in 0..2 {
                let old = O::value_f32((*c.add(rows[h] * si + column(i) * sj)).to_value());
                acc[at(i, h)] = core::intrinsics::fmaf32(beta, old, acc[at(i, h)]);
            }
        }
    }
    if f.bias == 0 || f.bias_along == BIAS_ROWS {
        return;
    }
    if f.bias_type == BIAS_F32 {
        for i in 0..ACC / 2 {
            let b = f32_at(f.bias, column(i));
            for h in 0..2 {
                acc[at(i, h)] += b;
            }
        }
    } else {
        for i in 0..ACC / 2 {
            let b = o_at(f.bias, column(i));
            for h in 0..2 {
                acc[at(i, h)] += b;
            }
        }
    }
}

/// The TMA-store epilogue of one consumer warpgroup (`consumer`, rows `r0 ..
/// r0 + 64` of product `z`'s C from column `n0`; `row` this thread's first
/// row): box by box (128 bytes of columns: 64 f16/bf16 or 32 f32/i32), the
/// warpgroup writes `alpha * acc + beta * C` in C's type into one of its two
/// staging boxes at `stage` (the 128-byte swizzle: the 16-byte chunk c of
/// row r at chunk c ^ (r % 8), so a warp's 8 rows x 16 or 32 bytes hit
/// distinct banks), makes the writes visible to the async proxy
/// (`fence.proxy.async`), and its first thread issues
/// `cp.async.bulk.tensor.3d.global.shared::cta` of the box; TMA clips
/// what lies outside m x n. A box is reused once the store issued two boxes
/// earlier has read it (`cp.async.bulk.wait_group.read 1`), so the stores
/// overlap the next box's writes and the next tile's k-loop.
///
/// # Safety
/// All 128 threads of the consumer warpgroup, in uniform control flow;
/// `p.maps + 256` holds C's tensor map; `stage` is the 1024-byte-aligned
/// shared address of the consumers' staging boxes.
#[inline(always)]
unsafe fn store_tma<O: Output, const ACC: usize>(
    acc: &[f32; ACC],
    p: &Params<O>,
    (z, r0, n0, row): (u32, u32, u32, u32),
    stage: u32,
    consumer: u32,
) {
    // The thread index read here, by an asm LLVM may not move (not
    // `pure`): the staging addresses below are then computed in each
    // tile's epilogue. From the intrinsic, LLVM hoisted them out of the
    // tile loop, and where registers were short (FP8's 128 x 256
    // `_fused` kernels) ptxas kept them in local memory, each box store
    // waiting for its reload.
    let t: u32;
    asm!("mov.u32 {t}, %tid.x;", t = out(reg32) t, options(nomem, nostack, preserves_flags));
    let (lane, warp) = (t % 32, (t % WARPGROUP_THREADS) / 32);
    let leader = t % WARPGROUP_THREADS == 0;
    let bytes = core::mem::size_of::<O>() as u32;
    let box_cols = ROW_BYTES / bytes;
    // 8-column blocks of the accumulators per box.
    let per_box = (box_cols / 8) as usize;
    let cbase = p.c.add(z as usize * p.stride_c as usize);
    let barrier = 1 + consumer;
    for b in 0..ACC / 4 / per_box {
        let buf = stage + (2 * consumer + (b as u32 % 2)) * C_BOX_BYTES;
        if leader {
            asm!("cp.async.bulk.wait_group.read 1;", options(nostack));
        }
        named_barrier(barrier);
        for jj in 0..per_box {
            let j = b * per_box + jj;
            let col_in_box = 8 * jj as u32 + 2 * (lane % 4);
            for h in 0..2usize {
                let (x0, x1) = (O::acc(acc[4 * j + 2 * h]), O::acc(acc[4 * j + 2 * h + 1]));
                let (mut v0, mut v1) = (O::mul(p.alpha, x0), O::mul(p.alpha, x1));
                let r = 16 * warp + lane / 4 + 8 * h as u32;
                if !O::is_zero(p.beta) {
                    let (gr, gc) = (row + 8 * h as u32, n0 + 8 * j as u32 + 2 * (lane % 4));
                    let q = cbase.add(gr as usize * p.ldc as usize + gc as usize);
                    if gr < p.m && gc < p.n {
                        v0 = O::mul_add(p.beta, (*q).to_value(), v0);
                    }
                    if gr < p.m && gc + 1 < p.n {
                        v1 = O::mul_add(p.beta, (*q.add(1)).to_value(), v1);
                    }
                }
                let x = col_in_box * bytes;
                let at = buf + r * ROW_BYTES + (((x / 16) ^ (r % 8)) * 16) + x % 16;
                st_shared_pair(at, O::pair(v0, v1));
            }
        }
        asm!("fence.proxy.async.shared::cta;", options(nostack));
        named_barrier(barrier);
        if leader {
            let col = n0 + b as u32 * box_cols;
            tma_store_3d(p.maps.add(256), buf, col as i32, r0 as i32, z as i32);
            asm!("cp.async.bulk.commit_group;", options(nostack));
        }
    }
}

/// `bar.sync id, 128`: the 128 threads of one consumer warpgroup wait here
/// (ids 1, 2, ...; 0 is the block's barrier).
#[inline(always)]
unsafe fn named_barrier(id: u32) {
    asm!("bar.sync {id}, 128;", id = in(reg32) id, options(nostack));
}

/// Stores a pair of C's elements (4 or 8 bytes) at shared address `at`.
#[inline(always)]
unsafe fn st_shared_pair<P: Copy>(at: u32, pair: P) {
    if core::mem::size_of::<P>() == 4 {
        let v: u32 = core::mem::transmute_copy(&pair);
        asm!("st.shared.b32 [{a}], {v};", a = in(reg32) at, v = in(reg32) v, options(nostack));
    } else {
        let v: u64 = core::mem::transmute_copy(&pair);
        asm!("st.shared.b64 [{a}], {v};", a = in(reg32) at, v = in(reg64) v, options(nostack));
    }
}

/// Stores the box at shared address `src` to coordinates (c0, c1, c2) of the
/// tensor map at generic address `map` (one bulk async-group of this
/// thread's, with the commit that follows).
#[inline(always)]
unsafe fn tma_store_3d(map: *const u8, src: u32, c0: i32, c1: i32, c2: i32) {
    asm!(
        "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [{m}, {{{c0}, {c1}, {c2}}}], [{s}];",
        m = in(reg64) map,
        c0 = in(reg32) c0,
        c1 = in(reg32) c1,
        c2 = in(reg32) c2,
        s = in(reg32) src,
        options(nostack)
    );
}

/// Block tile (row, column) of the `i`-th tile of a `tiles_m x tiles_n`
/// grid, walked in groups of [`RASTER_GROUP`] tile rows, column by column
/// within a group: the blocks running at once share rows of A and columns
/// of B in L2.
#[inline(always)]
pub const fn raster(i: u32, tiles_m: u32, tiles_n: u32) -> (u32, u32) {
    let width = RASTER_GROUP * tiles_n;
    let first = i / width * RASTER_GROUP;
    let rows = if tiles_m - first < RASTER_GROUP { tiles_m - first } else { RASTER_GROUP };
    let r = i % width;
    (first + r % rows, r / rows)
}

/// Tile rows per raster group.
pub const RASTER_GROUP: u32 = 8;

/// The masked layout's count of a grouped launch's jobs (run on the
/// stream before the launch, one warp): for each product e of `group`
/// (`count` of them, `m` its slot), its rows become `min(*rows[e], m)`
/// (`rows[e]`: the device address of a `u32`), its `first_job` the block
/// tiles (BM x BN) of the products before it over their counted rows, the
/// end marker's the launch's total; where the product stores C with TMA,
/// C's tensor map (at `maps + 384 e + 256`, dimensions (n, m, 1)) is
/// clipped at the counted rows (`tensormap.replace`), so the unchanged
/// epilogue writes no row past the count. A product of no rows has no
/// jobs. The launch's kernel then walks the table as any grouped launch.
///
/// # Safety
/// One block of 32 threads; `group` holds `count + 1` entries and `maps`
/// `count` products' maps (128-byte aligned), both in global memory and
/// read by no kernel running meanwhile; `rows` holds `count` addresses of
/// readable `u32`s; `bm`, `bn` are the launch's tile.
#[inline(always)]
pub unsafe fn masked_rows(group: *mut GroupProblem, maps: *mut u8, count: u32, rows: *const u64, bm: u32, bn: u32) {
    let lane = core::arch::nvptx::_thread_idx_x() as u32;
    use core::num::NonZeroU32;
    let (bm, bn) = (NonZeroU32::new(bm).unwrap_or(NonZeroU32::MIN), NonZeroU32::new(bn).unwrap_or(NonZeroU32::MIN));
    // Jobs of the products before this chunk of 32.
    let mut carry = 0u32;
    let mut base = 0u32;
    while base < count {
        let e = base + lane;
        let (mut m, mut jobs) = (0u32, 0u32);
        if e < count {
            let g = &*group.add(e as usize);
            let counted = *(*rows.add(e as usize) as *const u32);
            m = if counted < g.m { counted } else { g.m };
            jobs = (m / bm + (m % bm != 0) as u32) * (g.n / bn + (g.n % bn != 0) as u32);
        }
        // Inclusive sum over the warp's lanes (`shfl.sync.up`).
        let mut sum = jobs;
        let mut d = 1u32;
        while d < 32 {
            let up: u32;
            asm!("shfl.sync.up.b32 {u}, {v}, {d}, 0, -1;", u = out(reg32) up, v = in(reg32) sum, d = in(reg32) d, options(nostack));
            if lane >= d {
                sum += up;
            }
            d *= 2;
        }
        if e < count {
            let g = &mut *group.add(e as usize);
            g.first_job = carry + sum - jobs;
            if g.c_store == C_STORE_TMA && m > 0 && m < g.m {
                let map = maps.add(GROUP_MAPS_BYTES * e as usize + 256);
                asm!(
                    "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; tensormap.replace.tile.global_dim.global.b1024.b32 [g], 1, {m}; }}",
                    p = in(reg64) map,
                    m = in(reg32) m,
                    options(nostack)
                );
            }
            g.m = m;
        }
        let total: u32;
        asm!("shfl.sync.idx.b32 {t}, {v}, 31, 31, -1;", t = out(reg32) total, v = in(reg32) sum, options(nostack));
        carry += total;
        base += 32;
    }
    if lane == 0 {
        (*group.add(count as usize)).first_job = carry;
    }
    // The maps were written through the generic proxy; the launch reads
    // them through the tensor-map proxy.
    asm!("fence.proxy.tensormap::generic.release.gpu;", options(nostack));
}
