//! One question, one answer for every type pair: [`crate::Gemm::plan_for`]
//! says which kernel family, stage, kernel, tile, split of k, copies and
//! route a product of `T` operands into a `C` runs, and why: its answer
//! ([`ProductPlan`]), and the planners of the mixed-precision products
//! (stage 8's [`mma_kernel`], stage 9's [`warpgroup_plan`], route and
//! realigned copies).

use crate::device::registry::{MmaKernel, WarpgroupKernel, MMA_KERNELS, WARPGROUP_KERNELS};
use crate::exec::mma_sync::MmaLaunch;
use crate::exec::skinny::SkinnyLaunch;
use crate::exec::warpgroup::{WarpgroupLaunch, WarpgroupRoute, WarpgroupTail};
use crate::plan::tuning_plan::Plan;
use gemm_core::mma_sync::MmaTile;
use gemm_core::shape::{GemmDims, Layout};
use gemm_core::skinny::{SkinnyTypes, WLayout};
use gemm_core::warpgroup::{WgmmaTile, WgmmaTypes, WARPGROUP_M};
use std::fmt;

/// The kernels a product runs on.
#[derive(Clone, Debug)]
pub enum KernelFamily {
    /// The f64 and f32 ladder (stages 1-8 on the CUDA cores, f64 on the
    /// FP64 tensor cores), as [`Gemm::plan`](crate::Gemm::plan) says.
    Ladder(Plan),
    /// Stage 9: Hopper's warpgroup MMA fed by TMA (compute capability 9.0).
    Warpgroup {
        /// The entry point for the layouts the kernel reads.
        kernel: &'static str,
        /// Block tile and pipeline depth.
        tile: WgmmaTile,
    },
    /// Stage 8's `mma.sync` kernels for the mixed-precision products
    /// (compute capability 8.x, or `.stage(Stage::TensorCore)`).
    MmaSync {
        /// The entry point.
        kernel: &'static str,
        /// Block tile and pipeline depth.
        tile: MmaTile,
    },
    /// f64 or f32 emulated on INT8 tensor cores (Ozaki scheme II;
    /// [`Gemm::emulation`](crate::Gemm::emulation)).
    Emulated {
        /// Moduli: INT8 products per k block.
        moduli: usize,
        /// k blocks (k over 131,008 is cut so that i32 sums stay exact).
        k_blocks: usize,
        /// Rows of C per panel.
        panel_rows: usize,
        /// Bytes of workspace from the library's pool.
        workspace_bytes: usize,
        /// Stage 9's INT8 entry point of the products.
        kernel: &'static str,
        /// The accurate mode (one more INT8 product per k block, of coarse
        /// magnitudes, for the scales), else the fast mode.
        accurate: bool,
    },
    /// The token-sized kernels: C with few rows or columns (up to 8, 16 for
    /// f32, on the CUDA cores; up to 32 on the tensor cores for f16, bf16
    /// and i8 when the large operand's k is contiguous), the large operand
    /// read once (compute capability 9.0; `gemm_core::skinny`).
    Skinny {
        /// The entry point.
        kernel: &'static str,
        /// The kernel's row count S (the small side, rounded up to a power
        /// of two).
        rows: u32,
        /// Whether the small side is n (the kernel then computes C^T).
        small_n: bool,
    },
}

/// What [`Gemm::plan_for`](crate::Gemm::plan_for) answers: the kernels a product of one type pair
/// runs with this builder's options, for operands stored row-major with the
/// builder's op flags (op = T reads that operand column-major) and a
/// row-major C of leading dimension n (a column-major C is the transposed
/// product: plan for (n, m, k) with the op flags exchanged).
#[derive(Clone, Debug)]
pub struct ProductPlan {
    /// The types, e.g. "bf16 x bf16 -> f32".
    pub product: String,
    /// The kernel family and its kernel.
    pub family: KernelFamily,
    /// Slices of k (1: not split; split products sum their slices in a
    /// fixed order, so the bits are the same every run).
    pub split_k: u32,
    /// How the kernel reads the operands and writes C.
    pub route: String,
    /// Copies made before the product (empty: operands read in place).
    pub copies: Vec<String>,
    /// Why this kernel.
    pub why: String,
    /// The device planned for: its name, or what was assumed without one.
    pub device: String,
    /// How C is split over a group of GPUs ([`Gemm::devices`](crate::Gemm::devices)
    /// with more than one GPU); None on one GPU.
    pub devices: Option<DeviceSplit>,
}

/// How a host product's C is split over a group of GPUs
/// ([`Gemm::devices`](crate::Gemm::devices)): a grid of blocks, one per GPU, in
/// the group's order (GPU `p` at grid row `p / grid.cols`, column
/// `p % grid.cols`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSplit {
    /// Rows x columns of blocks.
    pub grid: gemm_core::distribution::Grid,
    /// Each GPU's block of C, in the group's order.
    pub blocks: Vec<DeviceBlock>,
}

/// One GPU's block of C in a [`DeviceSplit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceBlock {
    /// The GPU, e.g. "GPU 1 (NVIDIA H100 80GB HBM3)".
    pub device: String,
    /// Its rows of C (may be empty when C has fewer rows than the grid).
    pub rows: core::ops::Range<usize>,
    /// Its columns of C.
    pub cols: core::ops::Range<usize>,
}

impl fmt::Display for DeviceSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "C over {} GPUs as a {} grid:", self.blocks.len(), self.grid)?;
        for (p, b) in self.blocks.iter().enumerate() {
            let sep = if p == 0 { " " } else { ", " };
            write!(f, "{sep}{} rows {:?} columns {:?}", b.device, b.rows, b.cols)?;
        }
        Ok(())
    }
}

impl ProductPlan {
    /// The stage's number (1-9) and name.
    pub fn stage(&self) -> String {
        match &self.family {
            KernelFamily::Ladder(p) => p.config.stage().to_string(),
            KernelFamily::Warpgroup { .. } => "stage 9 (warpgroup MMA)".to_string(),
            KernelFamily::MmaSync { .. } => "stage 8 (tensor cores, mma.sync)".to_string(),
            KernelFamily::Skinny { .. } => "token-sized (the large operand read once)".to_string(),
            KernelFamily::Emulated { .. } => "emulated on INT8 tensor cores (Ozaki scheme II)".to_string(),
        }
    }
}

impl fmt::Display for ProductPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.product)?;
        match &self.family {
            KernelFamily::Ladder(p) => write!(f, "{p}")?,
            KernelFamily::Warpgroup { kernel, tile } => write!(
                f,
                "{}, {kernel} (block {}x{}, pipeline depth {}), k {}",
                self.stage(),
                tile.bm,
                tile.bn,
                tile.depth,
                if self.split_k > 1 { format!("in {} slices", self.split_k) } else { "not split".into() }
            )?,
            KernelFamily::MmaSync { kernel, tile } => {
                write!(f, "{}, {kernel} (block {}x{}, pipeline depth {})", self.stage(), tile.bm, tile.bn, tile.depth)?
            }
            KernelFamily::Skinny { kernel, rows, .. } => write!(f, "{}, {kernel} (S = {rows})", self.stage())?,
            KernelFamily::Emulated { moduli, k_blocks, panel_rows, workspace_bytes, kernel, accurate } => write!(
                f,
                "{}, {} mode, {moduli} moduli x {k_blocks} k block(s) of INT8 products on {kernel}, C in panels of {panel_rows} rows, workspace {:.1} MiB",
                self.stage(),
                if *accurate { "accurate" } else { "fast" },
                *workspace_bytes as f64 / (1u64 << 20) as f64
            )?,
        }
        if !self.route.is_empty() {
            write!(f, "; {}", self.route)?;
        }
        if !self.copies.is_empty() {
            write!(f, "; copies: {}", self.copies.join(", "))?;
        }
        if !self.why.is_empty() {
            write!(f, "; {}", self.why)?;
        }
        match &self.devices {
            Some(split) => write!(f, "; on {}; {split}", self.device),
            None => write!(f, "; on {}", self.device),
        }
    }
}

/// The stage-8 kernel for `types` on an m x n C on a device whose blocks
/// may have `max_smem` bytes of shared memory: the 128 x 256 tile when it
/// gives at least one block per SM, else 128 x 128; of each, the deepest
/// pipeline that fits.
pub fn mma_kernel(types: WgmmaTypes, m: usize, n: usize, sm_count: u32, max_smem: u32) -> &'static MmaKernel {
    let fills = |t: MmaTile| m.div_ceil(t.bm as usize) * n.div_ceil(t.bn as usize) >= sm_count as usize;
    let fitting = || MMA_KERNELS.iter().filter(|k| k.types == types && k.tile.smem_bytes() <= max_smem);
    let deepest = |bn: u32| fitting().filter(|k| k.tile.bn == bn).max_by_key(|k| k.tile.depth);
    match (deepest(128), deepest(256)) {
        (Some(_), Some(wide)) if fills(wide.tile) => wide,
        (Some(small), _) => small,
        // Every device of compute capability 8.0 or newer has room for
        // 128 x 128 at depth 6 (96 KiB).
        (None, _) => MMA_KERNELS.iter().find(|k| k.types == types).expect("a kernel for every WgmmaTypes"),
    }
}

/// The token-sized kernel's launch for `count` products shaped as `dims`
/// (user form) of `types` on a device of `sm_count` SMs, where it applies:
/// C's small side at most [`SkinnyTypes::max_rows`], and enough blocks to
/// keep the SMs reading - or a k short enough that a few blocks finish
/// early (a small C with a long k goes to stage 9's split-K instead). The
/// same answer for any `count`.
pub(crate) fn skinny_launch(
    types: SkinnyTypes,
    dims: &GemmDims,
    alpha: f64,
    count: usize,
    sm_count: u32,
) -> Option<SkinnyLaunch> {
    let reads_ab = alpha != 0.0 && dims.k > 0;
    let d = if reads_ab { *dims } else { GemmDims { k: 0, ..*dims } };
    let launch = SkinnyLaunch::new(types, d)?;
    // Per product, so that a batch's products take the kernel a single
    // product of their shape takes (the same bits).
    let _ = count;
    let blocks = (launch.wide() as u64).div_ceil(gemm_core::skinny::cols_per_block(types, launch.layout) as u64);
    if 2 * blocks < sm_count as u64 && d.k > SKINNY_SHORT_K {
        return None;
    }
    Some(launch)
}

/// The longest k a token-sized product with fewer blocks than half the SMs
/// still takes.
const SKINNY_SHORT_K: usize = 8192;

/// The token-sized kernels' types for a tensor-core product (none for FP8
/// yet: stage 9 takes every shape).
pub(crate) fn skinny_types(types: WgmmaTypes) -> Option<SkinnyTypes> {
    Some(match types {
        WgmmaTypes::F16 => SkinnyTypes::F16,
        WgmmaTypes::F16F32 => SkinnyTypes::F16F32,
        WgmmaTypes::Bf16 => SkinnyTypes::Bf16,
        WgmmaTypes::Bf16F32 => SkinnyTypes::Bf16F32,
        // f32 FMAs: at least TF32's accuracy.
        WgmmaTypes::Tf32 => SkinnyTypes::F32,
        WgmmaTypes::S8 => SkinnyTypes::S8,
        _ => return None, // FP8
    })
}

/// What the plan says of a token-sized launch: its family and route.
pub(crate) fn skinny_family(launch: &SkinnyLaunch) -> (KernelFamily, String) {
    let family = KernelFamily::Skinny { kernel: launch.entry(), rows: launch.rows, small_n: launch.small_n };
    let (x, w) = if launch.small_n { ("op(B)^T", "op(A)^T") } else { ("op(A)", "op(B)") };
    let along = match launch.layout {
        WLayout::KContiguous => "along k",
        WLayout::NContiguous => "along its columns",
    };
    let s = if launch.small_n { launch.dims.n } else { launch.dims.m };
    let on = if launch.mma { "tensor cores (mma.sync)" } else { "CUDA cores" };
    let route = format!(
        "{x} ({s} row{}) in shared memory, {w} read once in 16-byte chunks {along} on the {on}, k split over the \
         block's warps and summed in a fixed order{}",
        if s == 1 { "" } else { "s" },
        if launch.small_n { ", C written transposed" } else { "" }
    );
    (family, route)
}

/// What stage 9 runs for one launch: the kernel family and split-K.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarpgroupPlan {
    /// The kernel family (tile, pipeline depth, types).
    pub kernel: &'static WarpgroupKernel,
    /// Slices of k (1: no split) and k-tiles per slice
    /// ([`WgmmaTile::split_k`]).
    pub split: (u32, u32),
    /// The last wave's rows split along k instead ([`WarpgroupTail`]; a
    /// single product whose block tiles leave the last wave partly empty).
    pub tail: Option<WarpgroupTail>,
}

/// What a tail block adds to its k-tiles, in k-tiles: the pipeline's fill
/// and the store of its f32 (i32) partial (see [`warpgroup_plan`]'s
/// fitted costs).
const TAIL_FIXED_K_TILES: u32 = 12;

/// The tail split of an m x n x k product of `types` on block tiles
/// `tile` and `sm_count` SMs (one block tile per SM at a time, the
/// persistent kernel's), if one takes fewer k-tile steps on the busiest SM
/// than whole tiles ([`gemm_core::split_k::tail_split`]).
pub fn warpgroup_tail(
    types: WgmmaTypes,
    tile: WgmmaTile,
    (m, n, k): (u32, u32, u32),
    sm_count: u32,
) -> Option<WarpgroupTail> {
    let bk = tile.bk(types.input_bytes());
    let (rows, cols, k_tiles) = (m.div_ceil(tile.bm) as u64, n.div_ceil(tile.bn) as u64, k.div_ceil(bk) as u64);
    let fixed = TAIL_FIXED_K_TILES as f64;
    let t = gemm_core::split_k::tail_split(rows, cols, k_tiles, bk, sm_count as u64, fixed, 64)?;
    let (k_slice, slices) = gemm_core::split_k::slices(k, t.slices, bk);
    Some(WarpgroupTail { head_rows: t.head_tile_rows * tile.bm, split: (slices, k_slice / bk) })
}

/// Relative speed of a tile's k-loop per multiply-add, 128 x 256 = 1: a
/// narrower wgmma (N = 128, 64, and the narrow 32, 16, 8) reads more shared
/// memory per multiply-add,
/// and one consumer warpgroup (BM = 64) hides less latency than two. Rough
/// ranks, checked by the suite's results (NVIDIA H100, 2026-11-25;
/// docs/stages.md, stage 9); FP8's (`fp8`) 192 x 128, 128 x 192
/// and 128 x 256 are set from same-run A/B measurements (cited beside
/// them).
fn tile_efficiency(tile: WgmmaTile, fp8: bool) -> f64 {
    if tile.narrow() {
        // wgmma m64nNk16 reads 2 KiB of A from shared memory whatever N:
        // below N = 32 that read, not the multiply-adds, sets its time.
        return 0.6 * tile.bn as f64 / 32.0;
    }
    match (tile.bm, tile.bn) {
        // FP8 multiplies and promotes each k-tile in two halves of 128
        // columns (64 wgmma accumulators beside the 128 of the promoted
        // sum): per multiply-add, 0.95-0.96x 192 x 128 where both fill
        // their waves (e4m3 -> bf16 per-tensor, same binary, the planner
        // restricted: 8192³ 0.785-0.791 against 0.749 ms, 16384³ 6.97
        // against 6.70-6.73; NVIDIA H200, 2026-11-29), so it wins where its
        // fewer, larger tiles fill the last wave better (4096³ 0.110-0.113
        // against 0.118-0.121 ms).
        (128, 256) if fp8 => 0.86,
        (128, 256) => 1.0,
        (192, 192) => 0.95,
        (128, 128) => 0.8,
        // FP8 only: fewer operand bytes per multiply-add than 128 x 128
        // (5/6), which is what bounds FP8's k-loop (e4m3 -> bf16, same run:
        // 8192³ 0.77 against 0.86 ms, 16384³ 6.2-6.6 against 7.3-7.6 ms;
        // NVIDIA H200, 2026-11-28). Block-scaled, with the scales staged
        // in shared memory on both: 1.11-1.16x 128 x 128's rate per
        // multiply-add of the padded tiles (same run, m = 4096: 4096 x 7168
        // x 16384 0.871 against 0.944 ms, 4096 x 2112 x 7168 0.128 against
        // 0.160, 4096 x 7168 x 2048 0.135 against 0.140; NVIDIA H200,
        // 2026-11-28).
        (192, 128) => 0.9,
        (128, 192) => 0.88,
        (64, _) => 0.7,
        _ => 0.6,
    }
}

/// The kernel family and split-K for `batch` m x n x k products of `types`
/// on `sm_count` SMs: of the menu's tiles, the one with the least estimated
/// time, where the time is the k-loops' multiply-adds per SM (whole waves
/// of block tiles, their padding included, over the tile's relative speed,
/// at Hopper's dense rate) plus the bytes every product must move (A, B
/// and C once, and split-K's workspace twice) at HBM's rate, and for FP8
/// the epilogues between a block's tiles (a consumer's 64 x BN elements
/// each wave but the last). The padding
/// term picks narrow tiles for skinny C (n = 32: 128 x 32; m = 16: 64 x
/// 256; a [narrow](WgmmaTile::narrow) tile's reads of A again for each of
/// its columns of tiles count as bytes, and it assumes B K-major, which a
/// call's planner checks), the wave term the tile that leaves fewest SMs idle in the last
/// wave (3072³: 192 x 192). A single product may also balance its last
/// wave ([`WarpgroupTail`], [`warpgroup_tail`]) where that wins by 3%,
/// with its fitted fixed costs. Pure arithmetic: no device is needed.
///
/// ```
/// use gemm::tuning::{warpgroup_plan, WgmmaTypes};
/// // 3072^3: 256 tiles of 192 x 192 (1.94 waves), not 288 of 128 x 256.
/// let p = warpgroup_plan(WgmmaTypes::F16, 3072, 3072, 3072, 1, 132);
/// assert_eq!((p.kernel.tile.bm, p.kernel.tile.bn), (192, 192));
/// // A C of 32 columns on 132 SMs: the narrow 128 x 32 tile, k not split.
/// let p = warpgroup_plan(WgmmaTypes::F16, 65536, 32, 1024, 1, 132);
/// assert_eq!((p.kernel.tile.bm, p.kernel.tile.bn, p.split.0), (128, 32, 1));
/// // A small C with a long k: split into slices of k.
/// assert!(warpgroup_plan(WgmmaTypes::Bf16, 256, 256, 16384, 1, 132).split.0 > 1);
/// ```
///
/// # Source
/// Wave quantization and split-K as in NVIDIA's CUTLASS documentation
/// (efficient GEMM, "Parallelized Reductions"); the rates are Hopper's
/// datasheet figures (H100 SXM: 989 TFLOP/s dense f16, 3.35 TB/s).
pub fn warpgroup_plan(types: WgmmaTypes, m: usize, n: usize, k: usize, batch: usize, sm_count: u32) -> WarpgroupPlan {
    warpgroup_plan_with(types, (m, n, k), (batch, sm_count), (true, true))
}

/// [`warpgroup_plan`], with tail splits among the candidates or not, and
/// the [narrow](WgmmaTile::narrow) tiles or not (they read B K-major only).
fn warpgroup_plan_with(
    types: WgmmaTypes,
    (m, n, k): (usize, usize, usize),
    (batch, sm_count): (usize, u32),
    (tails, narrow): (bool, bool),
) -> WarpgroupPlan {
    warpgroup_plan_among(types, (m, n, k), (batch, sm_count), (tails, narrow, true), Fuse::No)
}

/// What the kernel a plan picks applies besides alpha op(A) op(B) + beta C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fuse {
    /// Nothing: a plain product.
    No,
    /// A fused epilogue with a bias or an activation, on the sums of the
    /// whole of k: k is not split (a split's reduction would have to apply
    /// it).
    Epilogue,
    /// Scales only, each linear in the sums: FP8 block scales (each
    /// k-tile's, applied at its promotion), row and column scales
    /// (applied to each slice's sum alike) and per-tensor scales (in
    /// alpha), so k may be split: each slice applies them to its own
    /// k-tiles, the reduction sums the slices and applies alpha and beta.
    Splittable,
}

/// [`warpgroup_plan_with`]; `fuse`: other than [`Fuse::No`], among the
/// tiles that fuse ([`WgmmaTile::fuses`]), k whole for [`Fuse::Epilogue`];
/// `clusters`: the tiles run in clusters may be picked (not for a grouped
/// launch, whose products differ in k: a cluster's blocks run their
/// k-loops in step).
fn warpgroup_plan_among(
    types: WgmmaTypes,
    dims: (usize, usize, usize),
    batch: (usize, u32),
    flags: (bool, bool, bool),
    fuse: Fuse,
) -> WarpgroupPlan {
    warpgroup_plan_rows(types, dims, batch, flags, fuse, &[])
}

/// [`warpgroup_plan_among`] for `batch` products of `m` rows each, or, where
/// `rows` is not empty, for a list of products of `rows[i]` rows each (`m`
/// their average; `batch` their count): each tile's waves then count the
/// block tiles of every product's own rows, so that a list of skewed
/// products (a mixture of experts' rows) pays each product's last,
/// partly filled row of tiles.
fn warpgroup_plan_rows(
    types: WgmmaTypes,
    (m, n, k): (usize, usize, usize),
    (batch, sm_count): (usize, u32),
    (tails, narrow, clusters): (bool, bool, bool),
    fuse: Fuse,
    rows: &[usize],
) -> WarpgroupPlan {
    let fused = fuse != Fuse::No;
    let tails = tails && !fused;
    // Seconds per multiply-add of one SM (989 TFLOP/s f16 over 132 SMs; the
    // other types scale alike) and per byte of HBM (about 3.3 TB/s).
    const MAC_S: f64 = 2.0 * 132.0 / 989e12;
    const BYTE_S: f64 = 1.0 / 3.3e12;
    // A split's fixed cost: the workspace's allocation and the reduction's
    // launch (a few microseconds each on the stream).
    const SPLIT_S: f64 = 4e-6;
    // A tail split's: three launches one after the other (TAIL_S), and
    // per tail block, the pipeline's fill and the partial's store, as many
    // k-tiles (TAIL_FIXED_K_TILES). Fitted to one H200 run (2026-11-26): a
    // tail of 120 blocks of 128 x 256 and 10 k-tiles each took 23 us, the
    // reduction of its 5 slices 11 us, where a full wave's k-tile took 1.04
    // us (under ncu's clocks).
    const TAIL_S: f64 = 15e-6;
    // How long a block's buffers take to come back from HBM: a block
    // streams its pipeline's bytes (depth x buffer) per this time, and a
    // product whose blocks are few is bound by their rate, not HBM's.
    // Fitted (NVIDIA H200, 2026-11-26, ncu): 32 blocks of 128 x 8 at depth
    // 13 (221 KiB in flight each) read a 4096 x 4096 f16 operand in 15.7
    // us, 67 GB/s a block.
    const IN_FLIGHT_S: f64 = 3.3e-6;
    // FP8's epilogue, per element a consumer warpgroup stores (64 x BN a
    // block tile, the consumers side by side), in the units of MAC_S (the
    // FP8 k-loop counted at the f16 rate): the last promotion, the
    // conversion and the store of a tile, while the block's tensor cores
    // wait for its next tile; counted for every wave but the last. Fitted
    // to the A/B of 128 x 256 against 192 x 128 (same binary, NVIDIA H200,
    // 2026-11-29): block-scaled e4m3 -> bf16 4096 x 24576 x 1536 took
    // 0.341-0.351 against 0.295-0.297 ms and 4096 x 7168 x 2048 0.136-0.142
    // against 0.134, which the k-loops' time alone ranked the other way;
    // with 2e-10 to 5e-10 s every pair of those runs and of the per-tensor
    // squares ranks as measured (4096³ 0.110-0.113 against 0.118-0.121 ms,
    // 8192³ 0.785-0.791 against 0.749). Counted for the last wave too, it
    // moved single-wave products off 128 x 256 and they ran slower (64 x
    // 24576 x 1536 block-scaled 0.034 ms on 128 x 64 against 0.029; H200,
    // 2026-11-29). The other types' tile rates were fitted without it.
    const FP8_EPILOGUE_S: f64 = 3e-10;
    let (m32, n32, k32) =
        (m.min(u32::MAX as usize) as u32, n.min(u32::MAX as usize) as u32, k.min(u32::MAX as usize) as u32);
    let (ib, ob) = (types.input_bytes() as f64, types.output_bytes() as f64);
    // Block tiles of the whole batch or list.
    let batch_tiles = |tile: WgmmaTile| {
        if rows.is_empty() {
            tile.tiles(m32, n32, batch.min(u32::MAX as usize) as u32)
        } else {
            rows.iter().map(|&r| tile.tiles(r.min(u32::MAX as usize) as u32, n32, 1)).sum()
        }
    };
    let estimate = |kernel: &'static WarpgroupKernel, split: (u32, u32), tail: Option<WarpgroupTail>| {
        let tile = kernel.tile;
        let bk = tile.bk(types.input_bytes()) as usize;
        let waves = |units: u64| units.div_ceil(sm_count.max(1) as u64) as f64;
        let tile_macs =
            |k_unit: usize| (tile.bm as usize * tile.bn as usize * k_unit) as f64 / tile_efficiency(tile, types.fp8());
        let whole_k = k.div_ceil(bk) * bk;
        let mut bytes = batch as f64 * ((m * k + k * n) as f64 * ib + (m * n) as f64 * ob);
        if tile.narrow() {
            // Each column of narrow tiles reads all of A again: count it
            // as HBM traffic, so the narrowest tile that holds C's columns
            // wins.
            bytes += batch as f64 * ((n.div_ceil(tile.bn as usize) - 1) * m * k) as f64 * ib;
        }
        let mut fixed = 0.0;
        // The blocks that stream the operands at once (one per SM).
        let mut blocks = batch_tiles(tile).min(sm_count as u64);
        // The k-loops' multiply-adds, and the waves of tiles each ending
        // in an epilogue.
        let (macs, epilogues) = if let Some(t) = tail {
            // The head's whole tiles, then the tail's slices.
            let tail_m = m - t.head_rows as usize;
            let (head, rest) = (tile.tiles(t.head_rows, n32, 1), tile.tiles(tail_m as u32, n32, 1));
            bytes += 2.0 * 4.0 * t.split.0 as f64 * (tail_m * n) as f64;
            fixed = TAIL_S;
            let tail_k = (t.split.1 + TAIL_FIXED_K_TILES) as usize * bk;
            let waves = (waves(head), waves(rest * t.split.0 as u64));
            (waves.0 * tile_macs(whole_k) + waves.1 * tile_macs(tail_k), waves.0 + waves.1)
        } else if split.0 > 1 {
            bytes += 2.0 * 4.0 * split.0 as f64 * (m * n) as f64;
            fixed = SPLIT_S;
            blocks = (tile.tiles(m32, n32, 1) * split.0 as u64).min(sm_count as u64);
            let waves = waves(tile.tiles(m32, n32, 1) * split.0 as u64);
            (waves * tile_macs(split.1 as usize * bk), waves)
        } else {
            let waves = waves(batch_tiles(tile));
            (waves * tile_macs(whole_k), waves)
        };
        if types.fp8() {
            fixed += (epilogues - 1.0).max(0.0) * (WARPGROUP_M * tile.bn) as f64 * FP8_EPILOGUE_S;
        }
        let in_flight = (tile.depth * tile.buffer_bytes()) as f64;
        let byte_s = BYTE_S.max(IN_FLIGHT_S / in_flight / blocks.max(1) as f64);
        macs * MAC_S + bytes * if tail.is_some() { BYTE_S } else { byte_s } + fixed
    };
    let mut best: Option<(f64, WarpgroupPlan)> = None;
    // Narrow tiles for C of few columns only (token-sized products).
    let narrow = narrow && n <= TOKEN_ROWS;
    let candidates = WARPGROUP_KERNELS.iter().filter(|k| {
        // A plain product takes a family with plain kernels (a
        // `fused_only` one has none), a fused one a family that fuses.
        let has = if fused { k.fuses() } else { k.names.iter().any(Option::is_some) };
        k.types == types && (narrow || !k.tile.narrow()) && has && (clusters || k.tile.cluster == 1)
    });
    for kernel in candidates {
        // Each tile whole, or split where split_k offers it (single
        // products), or the last wave's rows split (`warpgroup_tail`).
        let split = if batch == 1 && fuse != Fuse::Epilogue {
            kernel.tile.split_k(m32, n32, k32, types.input_bytes(), sm_count)
        } else {
            (1, 0)
        };
        let tail =
            if batch == 1 && tails { warpgroup_tail(types, kernel.tile, (m32, n32, k32), sm_count) } else { None };
        for (split, tail) in [((1, 0), None), (split, None), ((1, 0), tail.filter(|_| split.0 == 1))] {
            // A tail split must win by 3%: the model is coarse, and a
            // product in one launch is simpler.
            let time = estimate(kernel, split, tail) * if tail.is_some() { 1.03 } else { 1.0 };
            if best.is_none_or(|(t, _)| time < t) {
                best = Some((time, WarpgroupPlan { kernel, split, tail }));
            }
        }
    }
    best.expect("the menu has a kernel for every WgmmaTypes").1
}

/// Whether A and B (of kernel form `kd`, read by block tiles `tile`) are
/// worth a copy with lines on 128 bytes, where theirs are not on 32 bytes
/// (`prepare_operand` checks the addresses). A line that starts off a 32-byte
/// sector costs TMA 5 sectors per 128-byte box row instead of 4. Measured
/// with each choice forced, over squares 2056-7000 and three rectangles in
/// f16 and squares 2500-6000 in TF32 (NVIDIA H100 and H200, 2026-11-26,
/// default kernels; same run as cuBLAS):
/// - B alone realigned was fastest, or within noise of it, wherever the
///   lines were off 32 bytes: f16 3000³ 0.84-0.87x cuBLAS against
///   0.70-0.76x in place, 5000³ 0.85-0.86 against 0.58-0.64, TF32 4500³
///   0.81-0.83 against 0.64-0.67, 3500³ 1.21-1.26 against 0.90-0.93;
/// - both realigned was slower than B alone everywhere (A's copy costs
///   more than it saves);
/// - lines on 32 bytes but not 128 (f16 4000³ and 6000³, TF32 6000³) ran
///   fastest in place: 4000³ 0.96-0.99 against 0.80-0.83 with both copied.
///
/// The copy (one read and one write of B) pays where the kernel reads each
/// line many times: a product of at least 2^33 multiply-adds whose B is
/// read by at least 8 block tiles. 16-bit and TF32 operands (i8's are read
/// K-major from copies anyway where they must be).
pub(crate) fn realign_wanted(types: WgmmaTypes, kd: &GemmDims, tile: WgmmaTile) -> [bool; 2] {
    let big = (kd.m as f64) * (kd.n as f64) * (kd.k as f64) >= (1u64 << 33) as f64;
    let b_rereads = kd.m.div_ceil(tile.bm as usize);
    [false, types.input_bytes() != 1 && big && b_rereads >= 8]
}

/// The most rows of C (kernel form) of a token-sized product: one that
/// runs transposed ([`warpgroup_route`]) on a narrow tile or 128 x 64.
pub(crate) const TOKEN_ROWS: usize = 64;

/// The fewest columns of C (kernel form) of a token-sized product.
const TOKEN_MIN_COLS: usize = 512;

/// Two products run as the transposed product C^T = op(B)^T op(A)^T, whose
/// epilogue writes C^T's elements transposed (`C_STORE_TRANSPOSED`):
/// - wgmma reads an MN-major tf32 A through registers, but B only K-major:
///   a K-major A with an MN-major B (both row-major, the library's
///   default) runs transposed, whose A is then the MN-major one.
/// - A token-sized product (C of at most [`TOKEN_ROWS`] rows and at least
///   [`TOKEN_MIN_COLS`] columns, at least 4 times as many) with a K-major
///   A: its few rows become the transposed product's N, a narrow tile's
///   (8, 16 or 32 columns; [`WgmmaTile::narrow`]) or 64, and the large
///   operand op(B)^T its A, read once in 128-row tiles through a deep
///   pipeline (as cuBLAS's kernels for such shapes do: ncu names
///   `nvjet_sm90_hsh_128x8_64x12`).
///
/// Every other product runs as it is.
pub(crate) fn warpgroup_route(types: WgmmaTypes, kd: &GemmDims, reads_ab: bool) -> WarpgroupRoute {
    let register_a =
        types.register_a() && reads_ab && kd.a_layout == Layout::RowMajor && kd.b_layout == Layout::RowMajor;
    // i8's transposed A must be K-major too (op(B) column-major): wgmma
    // cannot transpose it, and a transposed copy of the large operand (4096
    // x 14336: 140 us) costs more than the token-sized kernel's reads.
    let token = reads_ab
        && kd.m <= TOKEN_ROWS
        && kd.n >= TOKEN_MIN_COLS.max(4 * kd.m)
        && kd.a_layout == Layout::RowMajor
        && (types.transposes() || types.register_a() || kd.b_layout == Layout::ColMajor);
    let transposed_c = register_a || token;
    let dims = if transposed_c { GemmDims { c_layout: Layout::ColMajor, ..*kd }.kernel_form().0 } else { *kd };
    WarpgroupRoute { dims, transposed_c, token }
}

/// Whether stage 9 may run `count` products in kernel form `kd` on a
/// narrow tile, whose B it reads K-major only: a column-major B; an MN-major
/// one copied K-major first, as tf32 and i8 copy theirs for any tile, and
/// for f16 and bf16 where the copy is one small matrix and pays (a single
/// product of C of at most [`NARROW_COPY_MAX_COLS`] columns: B k x n, one
/// transpose launch; a strided batch's B would take one launch per
/// product).
fn narrow_allowed(types: WgmmaTypes, kd: &GemmDims, count: usize) -> bool {
    kd.b_layout == Layout::ColMajor || !types.transposes() || (count == 1 && kd.n <= NARROW_COPY_MAX_COLS)
}

/// The most columns of C (kernel form) a narrow tile takes through a
/// K-major copy of a 16-bit B: where a 128 x 8 tile holds C. Wider, 128 x
/// 64 reads the MN-major B in place in about the same time (f16, 4096 and
/// 11008 x 16 x 4096: 0.79 and 0.88x cuBLAS, against 0.73 and 0.88x on 128
/// x 16 with the copy; 14336 x 32 x 4096: 0.93 against 0.88x; NVIDIA H200,
/// 2026-11-26).
const NARROW_COPY_MAX_COLS: usize = 8;

/// A validated product in user form `dims` as stage 9 runs it with this
/// alpha: its route ([`warpgroup_route`] of the kernel form), whether the
/// user's A and B trade places in the form the kernel runs (the kernel form
/// of a column-major C, and the transposed product), and whether A and B
/// are read at all (alpha != 0 and k > 0).
pub(crate) fn warpgroup_form(types: WgmmaTypes, dims: &GemmDims, alpha: f64) -> (WarpgroupRoute, bool, bool) {
    let (kd, swapped) = dims.kernel_form();
    let reads_ab = alpha != 0.0 && kd.k > 0;
    let route = warpgroup_route(types, &kd, reads_ab);
    (route, swapped ^ route.transposed_c, reads_ab)
}

/// The stage-9 launch of a validated product in user form `dims` with this
/// alpha, `count` of them (a strided batch): its route ([`warpgroup_form`]),
/// the kernel [`warpgroup_plan`] picks for its kernel form, the split of k
/// (`forced`, else the planner's; a batch is not split; a split product
/// runs the tile's family with an f32 or i32 C), the operands worth
/// realigning ([`realign_wanted`]) and, where `balance` allows it and k is
/// not forced, the planner's tail split ([`WarpgroupTail`]).
pub(crate) fn warpgroup_launch(
    types: WgmmaTypes,
    dims: &GemmDims,
    alpha: f64,
    (count, sm_count): (usize, u32),
    forced: Option<(u32, u32)>,
    balance: bool,
) -> WarpgroupLaunch {
    let (route, swapped, reads_ab) = warpgroup_form(types, dims, alpha);
    // Mixed FP8 operands trade types with places.
    let types = if swapped { types.operands_swapped() } else { types };
    let kd = route.dims;
    let tails = balance && forced.is_none();
    let narrow = narrow_allowed(types, &kd, count);
    let dims_k = (kd.m, kd.n, if reads_ab { kd.k } else { 0 });
    let plan = warpgroup_plan_with(types, dims_k, (count, sm_count), (tails, narrow));
    let realign = realign_wanted(types, &kd, plan.kernel.tile);
    let split = forced.unwrap_or(plan.split);
    let f32_family =
        || accumulating_family(types, plan.kernel.tile, false).expect("every tile has an f32 (i32) C family");
    let kernel = if split.0 > 1 { f32_family() } else { plan.kernel };
    let tail = plan.tail.filter(|_| count == 1 && reads_ab).map(|t| (t, f32_family()));
    WarpgroupLaunch { types, route, swapped, reads_ab, kernel, split, realign, tail }
}

/// The family of `tile` with `types`' f32 (i32) C, one with fused kernels
/// where `fused`: a split product's slices (and a tail's) run it into the
/// workspace.
fn accumulating_family(types: WgmmaTypes, tile: WgmmaTile, fused: bool) -> Option<&'static WarpgroupKernel> {
    WARPGROUP_KERNELS.iter().find(|f| f.types == types.accumulating() && f.tile == tile && (!fused || f.fuses()))
}

/// The stage-9 launch of one product in user form `dims` with a fused
/// epilogue ([`crate::Epilogue`]): as [`warpgroup_launch`], among the tiles
/// that fuse, no tail split, k whole unless `fuse` is
/// [`Fuse::Splittable`] (then split where the planner splits a plain
/// product: slices of k by the tile's fused family with an f32 C into a
/// workspace, each applying the scales to its own k-tiles, and the
/// reduction); with `keep_a` (A's block scales are per row, which the
/// kernel applies to its A only), the user's A stays the kernel's A: a
/// column-major C is stored transposed by the threads (`C_STORE_TRANSPOSED`)
/// instead of running the product transposed, and no token-sized route.
pub(crate) fn warpgroup_fused_launch(
    types: WgmmaTypes,
    dims: &GemmDims,
    alpha: f64,
    (sm_count, fuse): (u32, Fuse),
    keep_a: bool,
) -> WarpgroupLaunch {
    debug_assert!(fuse != Fuse::No);
    let (route, swapped, reads_ab) = fused_form(types, dims, alpha, keep_a);
    let types = if swapped { types.operands_swapped() } else { types };
    let kd = route.dims;
    let narrow = narrow_allowed(types, &kd, 1);
    let dims_k = (kd.m, kd.n, if reads_ab { kd.k } else { 0 });
    let plan = warpgroup_plan_among(types, dims_k, (1, sm_count), (false, narrow, true), fuse);
    let realign = realign_wanted(types, &kd, plan.kernel.tile);
    let kernel = if plan.split.0 > 1 {
        accumulating_family(types, plan.kernel.tile, true).expect("every tile that fuses has a fused f32 C family")
    } else {
        plan.kernel
    };
    WarpgroupLaunch { types, route, swapped, reads_ab, kernel, split: plan.split, realign, tail: None }
}

/// [`warpgroup_form`] of a product with a fused epilogue: with `keep_a`
/// the user's A stays the kernel's A (see [`warpgroup_fused_launch`]).
fn fused_form(types: WgmmaTypes, dims: &GemmDims, alpha: f64, keep_a: bool) -> (WarpgroupRoute, bool, bool) {
    if keep_a {
        let reads_ab = alpha != 0.0 && dims.k > 0;
        let transposed_c = dims.c_layout == Layout::ColMajor;
        let kd = GemmDims { c_layout: Layout::RowMajor, ..*dims };
        (WarpgroupRoute { dims: kd, transposed_c, token: false }, false, reads_ab)
    } else {
        warpgroup_form(types, dims, alpha)
    }
}

/// [`warpgroup_list`] of problems with fused epilogues (`todo`: index,
/// dims, `keep_a`): one kernel among the tiles that fuse, for the average
/// problem.
pub(crate) fn warpgroup_fused_list(
    types: WgmmaTypes,
    todo: &[(usize, GemmDims, bool)],
    alpha: f64,
    sm_count: u32,
) -> Vec<(usize, WarpgroupLaunch)> {
    let forms = todo.iter().map(|(i, dims, keep_a)| (*i, fused_form(types, dims, alpha, *keep_a))).collect();
    list_of_forms(types, forms, sm_count, true)
}

/// The stage-9 launches of a list batch's problems `todo` (index, validated
/// dims in user form): one kernel for all, the planner's choice for the
/// average product of the batch (its rows averaged, the largest n and k;
/// the waves counted over each product's own rows of tiles), and no split
/// along k: each problem gives the bits of a single run of it
/// that takes no split (the planner splits only products with few block
/// tiles and at least 8 k-tiles).
pub(crate) fn warpgroup_list(
    types: WgmmaTypes,
    todo: &[(usize, GemmDims)],
    alpha: f64,
    sm_count: u32,
) -> Vec<(usize, WarpgroupLaunch)> {
    let forms = todo.iter().map(|(i, dims)| (*i, warpgroup_form(types, dims, alpha))).collect();
    list_of_forms(types, forms, sm_count, false)
}

/// The launches of a list's problems in their forms (index, route,
/// swapped, reads A and B): one kernel for all, planned for the average
/// problem with each problem's own tiles counted ([`warpgroup_plan_rows`];
/// among the tiles that fuse when `fused`).
fn list_of_forms(
    types: WgmmaTypes,
    forms: Vec<(usize, (WarpgroupRoute, bool, bool))>,
    sm_count: u32,
    fused: bool,
) -> Vec<(usize, WarpgroupLaunch)> {
    let count = forms.len().max(1);
    let each: Vec<usize> = forms.iter().map(|f| f.1 .0.dims.m).collect();
    let n = forms.iter().map(|f| f.1 .0.dims.n).max().unwrap_or(0);
    let k = forms.iter().filter(|f| f.1 .2).map(|f| f.1 .0.dims.k).max().unwrap_or(0);
    // A list's problems each take their own copies: B K-major as it is.
    let narrow = forms.iter().all(|f| narrow_allowed(types, &f.1 .0.dims, usize::MAX));
    let average = (each.iter().sum::<usize>().div_ceil(count), n, k);
    let fuse = if fused { Fuse::Epilogue } else { Fuse::No };
    let kernel = warpgroup_plan_rows(types, average, (count, sm_count), (true, narrow, false), fuse, &each).kernel;
    forms
        .into_iter()
        .map(|(i, (route, swapped, reads_ab))| {
            let realign = realign_wanted(types, &route.dims, kernel.tile);
            (i, WarpgroupLaunch { types, route, swapped, reads_ab, kernel, split: (1, 0), realign, tail: None })
        })
        .collect()
}

/// The stage-8 launch of a validated product in user form `dims` on a
/// device of `sm_count` SMs whose blocks may have `max_smem` bytes of
/// shared memory ([`mma_kernel`] for its kernel form).
pub(crate) fn mma_launch(types: WgmmaTypes, dims: &GemmDims, sm_count: u32, max_smem: u32) -> MmaLaunch {
    let (kd, swapped) = dims.kernel_form();
    MmaLaunch { types, kd, swapped, kernel: mma_kernel(types, kd.m, kd.n, sm_count, max_smem) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::Stage;
    use crate::{Error, Gemm, Op};
    use half::{bf16, f16};

    /// Every type pair has a plan, with or without a device (then as on 9.0
    /// with 132 SMs), that names its kernel and says where it planned.
    #[test]
    fn every_type_pair_has_a_plan() {
        let plans = [
            Gemm::new().plan_for::<f64, f64>(4096, 4096, 4096).unwrap(),
            Gemm::new().plan_for::<f32, f32>(1000, 1000, 1000).unwrap(),
            Gemm::new().allow_tf32(true).plan_for::<f32, f32>(4096, 4096, 4096).unwrap(),
            Gemm::new().plan_for::<f16, f32>(4096, 4096, 4096).unwrap(),
            Gemm::new().plan_for::<f16, f16>(333, 129, 65).unwrap(),
            Gemm::new().plan_for::<bf16, f32>(4096, 1024, 4096).unwrap(),
            Gemm::new().plan_for::<bf16, bf16>(128, 128, 65536).unwrap(),
            Gemm::new().plan_for::<i8, i32>(128, 4096, 4096).unwrap(),
        ];
        for p in &plans {
            let text = p.to_string();
            assert!(text.starts_with(&p.product) && text.contains("; on "), "{text}");
            assert!(p.split_k >= 1);
        }
        assert!(plans[2].product.contains("TF32") && !plans[1].product.contains("TF32"));
        if crate::default_device().is_err() {
            // As on an H100: stage 9, the row-major B of TF32 through the transposed product.
            assert!(plans[2].to_string().contains("transposed product"), "{}", plans[2]);
            assert!(plans[3].stage().contains('9'), "{}", plans[3]);
            // i8 reads B only K-major: a row-major B is transposed first.
            assert!(plans[7].copies.iter().any(|c| c.starts_with("B transposed")), "{}", plans[7]);
            // A small C with a long k is split.
            assert!(plans[6].split_k > 1, "{}", plans[6]);
        }
        // op(B) = B^T of a row-major B is K-major: no copy for i8.
        let nt = Gemm::new().op_b(Op::T).plan_for::<i8, i32>(128, 4096, 4096).unwrap();
        assert!(nt.copies.is_empty(), "{nt}");
        // Up to 64 rows with B row-major: the token-sized tensor-core form
        // reads B in place (its bytes transposed in registers).
        let token = Gemm::new().plan_for::<i8, i32>(64, 4096, 4096).unwrap();
        if crate::default_device().is_err() {
            assert!(token.copies.is_empty() && token.to_string().contains("skinny_s8_s64_mma_wn"), "{token}");
        }
    }

    /// Options that cannot apply to a type are typed errors from the plan,
    /// as from the call, with no device.
    #[test]
    fn options_that_do_not_apply_are_errors() {
        let e = Gemm::new().block_tile(128, 128, 16).plan_for::<f16, f32>(64, 64, 64).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        let e = Gemm::new().alpha(0.5).plan_for::<i8, i32>(64, 64, 64).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        let p = Gemm::new().stage(Stage::TensorCore).plan_for::<bf16, bf16>(256, 256, 256).unwrap();
        assert!(p.stage().contains('8'), "{p}");
        let e = Gemm::new().split_k(0).plan_for::<f64, f64>(64, 64, 64).unwrap_err();
        assert!(matches!(e, Error::SplitK { .. }), "{e}");
        let e = Gemm::new().allow_tf32(true).plan_for::<f64, f64>(64, 64, 64).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        // The host path's options stream TF32 products too: the plan stays TF32's.
        let p = Gemm::new().allow_tf32(true).memory_budget(1 << 20).plan_for::<f32, f32>(64, 64, 64).unwrap();
        assert!(p.to_string().contains("tf32") || p.to_string().contains("TF32"), "{p}");
    }

    /// A batch is planned as a whole and never split along k: a long-k
    /// product with few block tiles splits alone, not in a batch; a split
    /// asked of a batch is the call's error.
    #[test]
    fn batches_are_planned_whole_and_not_split() {
        let one = Gemm::new().plan_for::<f16, f32>(256, 256, 16384).unwrap();
        assert!(one.split_k > 1, "{one}");
        let batch = Gemm::new().plan_for_batch::<f16, f32>(256, 256, 16384, 64).unwrap();
        assert_eq!(batch.split_k, 1, "{batch}");
        let f64_batch = Gemm::new().plan_for_batch::<f64, f64>(1000, 1000, 1000, 100).unwrap();
        assert_eq!(f64_batch.split_k, 1, "{f64_batch}");
        let e = Gemm::new().split_k(4).plan_for_batch::<f64, f64>(64, 64, 4096, 8).unwrap_err();
        assert!(matches!(e, Error::SplitK { .. }), "{e}");
        assert_eq!(Gemm::new().plan_for_batch::<i8, i32>(64, 64, 64, 0).unwrap().split_k, 1);
    }

    /// The same misuse in a call is its typed error whether or not a GPU is
    /// present (found before the device is opened), and C is untouched.
    #[test]
    fn misuse_is_found_before_the_device() {
        let a = crate::Matrix::<f64>::filled(8, 8, 1.0);
        let mut c = crate::Matrix::<f64>::filled(8, 8, 7.0);
        let e = Gemm::new().split_k(0).run(&a, &a, &mut c).unwrap_err();
        assert!(matches!(e, Error::SplitK { slices: 0, .. }), "{e}");
        let e = Gemm::new().allow_tf32(true).run(&a, &a, &mut c).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        assert!(c.as_slice().iter().all(|&v| v == 7.0));
    }

    /// A plain FP8 product of many tiles takes 192 x 128 (fewer operand
    /// bytes per multiply-add); 4096³ (5.3 waves of it, 7.8 of 128 x 128)
    /// takes 128 x 256 (3.9 waves; measured 0.110-0.113 ms against
    /// 0.118-0.121 on 128 x 128).
    #[test]
    fn large_fp8_products_take_the_192_row_tile() {
        for t in [WgmmaTypes::E4m3Bf16, WgmmaTypes::E4m3F32, WgmmaTypes::E5m2E4m3F16] {
            for (m, n, k) in [(8192, 8192, 4096), (8192, 8192, 8192), (6144, 6144, 6144), (16384, 16384, 16384)] {
                let p = warpgroup_plan(t, m, n, k, 1, 132);
                assert_eq!((p.kernel.tile.bm, p.kernel.tile.bn, p.split.0), (192, 128, 1), "{t:?} {m}x{n}x{k}");
            }
            let p = warpgroup_plan(t, 4096, 4096, 4096, 1, 132);
            assert_eq!((p.kernel.tile.bm, p.kernel.tile.bn), (128, 256));
        }
    }

    #[test]
    fn kernel_choice_fills_the_gpu() {
        let tile = |t, m, n, k| {
            let p = warpgroup_plan(t, m, n, k, 1, 132);
            (p.kernel.tile.bm, p.kernel.tile.bn, p.split.0)
        };
        assert_eq!(tile(WgmmaTypes::F16, 8192, 8192, 8192), (128, 256, 1));
        assert_eq!(tile(WgmmaTypes::F16, 4096, 4096, 4096), (128, 256, 1));
        // Skinny C: the narrow tiles (of B's K-major layout), the narrowest
        // that holds C's columns; few rows: one consumer.
        assert_eq!(tile(WgmmaTypes::F16, 65536, 32, 1024), (128, 32, 1));
        assert_eq!(tile(WgmmaTypes::F16, 8192, 16, 8192).1, 16);
        assert_eq!(tile(WgmmaTypes::S8, 8192, 8, 8192).1, 8);
        assert_eq!(tile(WgmmaTypes::F16, 16, 8192, 8192).0, 64);
        // Without narrow tiles (an MN-major B): 128 x 64.
        let wide = warpgroup_plan_with(WgmmaTypes::F16, (65536, 32, 1024), (1, 132), (true, false));
        assert_eq!((wide.kernel.tile.bm, wide.kernel.tile.bn), (128, 64));
        // Few tiles, long k: split.
        assert!(tile(WgmmaTypes::F16, 256, 256, 16384).2 > 1);
        // A batch is never split.
        assert_eq!(warpgroup_plan(WgmmaTypes::F16, 32, 32, 65536, 10, 132).split, (1, 0));
        // 5000^3 on 128 x 256 tiles is 800 block tiles (6.06 waves on 132
        // SMs): 39 rows of tiles in six waves, the last row split along k.
        let p = warpgroup_plan(WgmmaTypes::F16, 5000, 5000, 5000, 1, 132);
        let t = p.tail.expect("a tail split");
        assert_eq!((p.kernel.tile.bm, p.kernel.tile.bn, t.head_rows, p.split.0), (128, 256, 4992, 1));
        assert!(t.split.0 >= 2 && 20 * t.split.0 <= 132);
        // Whole waves, a batch, or too few tiles: none.
        assert_eq!(warpgroup_plan(WgmmaTypes::F16, 4096, 4096, 4096, 1, 132).tail, None);
        assert_eq!(warpgroup_plan(WgmmaTypes::F16, 3000, 3000, 3000, 2, 132).tail, None);
        assert_eq!(warpgroup_plan(WgmmaTypes::F16, 1000, 1000, 3000, 1, 132).tail, None);
        for t in [
            WgmmaTypes::F16,
            WgmmaTypes::F16F32,
            WgmmaTypes::Bf16,
            WgmmaTypes::Bf16F32,
            WgmmaTypes::Tf32,
            WgmmaTypes::S8,
        ] {
            for k in WARPGROUP_KERNELS.iter().filter(|k| k.types == t) {
                // Every kernel has the K-major entry point; the others only
                // when the types transpose (a narrow tile's B K-major), or
                // `tt` (A MN-major) when A may come from registers.
                assert!(k.names[1].is_some());
                let layouts = match (t.transposes(), k.tile.narrow()) {
                    (true, false) => 4,
                    (true, true) => 2,
                    _ => 1 + t.register_a() as usize,
                };
                assert_eq!(k.names.iter().filter(|n| n.is_some()).count(), layouts, "{k:?}");
                assert_eq!(k.names[3].is_some(), t.transposes() || t.register_a());
            }
            assert_eq!(warpgroup_plan(t, 1, 1, 1, 1, 132).kernel.types, t);
        }
    }

    /// Every family that fuses has a fused twin of the same tile with an
    /// f32 (i32) C: a split fused product's slices run it
    /// (`warpgroup_fused_launch`).
    #[test]
    fn every_fused_family_has_an_f32_fused_twin() {
        for f in WARPGROUP_KERNELS.iter().filter(|f| f.fuses()) {
            assert!(accumulating_family(f.types, f.tile, true).is_some(), "{:?} {:?}", f.types, f.tile);
        }
    }

    /// Fused FP8 products (block scales) run on 128 x 128 tiles, whose
    /// producer stages the scales, where that tile fills the SMs best (the
    /// shapes of the GPU tests, odd tile rows among them).
    #[test]
    fn fused_fp8_products_take_the_staging_128_row_tile_where_it_fills_the_sms() {
        for (m, n, k) in [(1000, 1900, 700), (1300, 1024, 512), (640, 2300, 2000)] {
            for t in [WgmmaTypes::E4m3Bf16, WgmmaTypes::E4m3F32, WgmmaTypes::E5m2E4m3F16] {
                let f = warpgroup_plan_among(t, (m, n, k), (1, 132), (false, true, true), Fuse::Epilogue);
                assert_eq!((f.kernel.tile.bm, f.kernel.tile.bn), (128, 128), "{m}x{n}x{k}");
                assert!(f.kernel.fuses() && f.kernel.tile.stages_scales());
            }
        }
    }

    /// Fused FP8 products whose 192 x 128 tiles fill the SMs better than
    /// 128 x 128 and 128 x 256 take them (the GPU tests' shapes and the
    /// benchmark's: 4096 x 2112 x 7168 is 2.8 waves of 192 x 128 against
    /// 4.1 of 128 x 128 and 2.2 of 128 x 256), grouped ones too; and where
    /// 128 x 256's epilogue per tile costs more than its waves save (4096
    /// x 7168 x 2048: 0.142 ms against 0.134 on 192 x 128, NVIDIA H200,
    /// 2026-11-29).
    #[test]
    fn fused_fp8_products_take_the_192_row_tile_where_it_fills_the_sms() {
        let shapes = [
            (1800, 2304, 384),
            (2100, 3000, 300),
            (4096, 2112, 7168),
            (4096, 24576, 1536),
            (4096, 32768, 512),
            (4096, 7168, 2048),
        ];
        for (m, n, k) in shapes {
            for t in [WgmmaTypes::E4m3Bf16, WgmmaTypes::E4m3F32, WgmmaTypes::E5m2E4m3F16, WgmmaTypes::E4m3E5m2F16] {
                let f = warpgroup_plan_among(t, (m, n, k), (1, 132), (false, true, true), Fuse::Epilogue);
                assert_eq!((f.kernel.tile.bm, f.kernel.tile.bn), (192, 128), "{t:?} {m}x{n}x{k}");
                assert!(f.kernel.fuses() && f.kernel.names[1].is_some());
                let g = warpgroup_plan_among(t, (m, n, k), (2, 132), (true, true, false), Fuse::Epilogue);
                assert_eq!(g.kernel.tile.bm, 192, "{t:?} {m}x{n}x{k}");
            }
        }
        // f16 and bf16 have no 192 x 128 kernels; their fused products keep
        // their tiles.
        let f =
            warpgroup_plan_among(WgmmaTypes::Bf16, (4096, 2112, 7168), (1, 132), (false, true, true), Fuse::Epilogue);
        assert!(f.kernel.tile.bm <= 128);
    }

    /// Fused FP8 products where 128 x 256's fewer tiles fill the last wave
    /// best take it (its kernels stage B's two scales a k-tile): the
    /// benchmark's long-k shapes (4096 x 7168 x 16384: 6.8 waves against
    /// 9.3 of 192 x 128; 4096 x 4096 x 7168: 3.9 against 5.3) and the GPU
    /// tests' (the last column of tiles partly or wholly past n in its
    /// second half).
    #[test]
    fn fused_fp8_products_take_the_wide_tile_where_it_fills_the_sms() {
        let shapes = [(4096, 7168, 16384), (4096, 4096, 7168), (1100, 3000, 300), (1100, 2900, 300)];
        for (m, n, k) in shapes {
            for t in [WgmmaTypes::E4m3Bf16, WgmmaTypes::E4m3F32, WgmmaTypes::E5m2E4m3F16] {
                let f = warpgroup_plan_among(t, (m, n, k), (1, 132), (false, true, true), Fuse::Epilogue);
                assert_eq!((f.kernel.tile.bm, f.kernel.tile.bn), (128, 256), "{t:?} {m}x{n}x{k}");
                assert!(f.kernel.fuses() && f.kernel.tile.stages_scales());
            }
        }
    }

    /// A fused f16 or bf16 product takes the plain product's 128 x 256 tile
    /// where the plain one does (the shapes of the GPU test
    /// `wide_tiles_fuse_every_layout`, both forms, and the benchmark's).
    #[test]
    fn fused_half_products_take_the_plain_products_wide_tile() {
        for t in [WgmmaTypes::Bf16, WgmmaTypes::F16, WgmmaTypes::F16F32, WgmmaTypes::Bf16F32] {
            for (m, n, k) in [(1535, 2560, 136), (2560, 1535, 136), (4096, 4096, 4096), (8192, 8192, 8192)] {
                let plain = warpgroup_plan_among(t, (m, n, k), (1, 132), (true, true, true), Fuse::No);
                let fused = warpgroup_plan_among(t, (m, n, k), (1, 132), (false, true, true), Fuse::Epilogue);
                assert_eq!((plain.kernel.tile.bm, plain.kernel.tile.bn), (128, 256), "{t:?} {m}x{n}x{k}");
                assert_eq!(fused.kernel.tile, plain.kernel.tile, "{t:?} {m}x{n}x{k}");
                assert!(fused.kernel.fuses());
            }
        }
    }

    /// A list's waves count each product's own rows of tiles: one product
    /// of 3000 rows and three of one row each take 24 + 3 rows of 128 x
    /// 128 tiles (4 waves of 132 at n = 2048, at their average of 751 rows
    /// only 3); 128 x 256 takes 2 waves of tiles twice as large, and wins.
    #[test]
    fn skewed_lists_count_each_products_tiles() {
        let rows = [3000, 1, 1, 1];
        let average = (rows.iter().sum::<usize>().div_ceil(4), 2048, 4096);
        let flags = (true, true, false);
        let uniform = warpgroup_plan_rows(WgmmaTypes::Bf16, average, (4, 132), flags, Fuse::No, &[]);
        let skewed = warpgroup_plan_rows(WgmmaTypes::Bf16, average, (4, 132), flags, Fuse::No, &rows);
        assert_eq!((uniform.kernel.tile.bm, uniform.kernel.tile.bn), (128, 128));
        assert_eq!((skewed.kernel.tile.bm, skewed.kernel.tile.bn), (128, 256));
        // Equal rows: the same plan either way.
        for m in [100, 1000, 4096] {
            let a = warpgroup_plan_rows(WgmmaTypes::Bf16, (m, 2048, 4096), (4, 132), flags, Fuse::No, &[]);
            let b = warpgroup_plan_rows(WgmmaTypes::Bf16, (m, 2048, 4096), (4, 132), flags, Fuse::No, &[m; 4]);
            assert_eq!(a.kernel.tile, b.kernel.tile, "m {m}");
        }
    }
}
