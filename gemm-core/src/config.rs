//! Kernel configurations: which stage, which tile constants, checked once.
//!
//! The menu of compiled configurations is [`crate::kernel_menu!`]: the kernel crate
//! instantiates and exports one PTX entry point per line, and the host builds
//! its registry from the same lines (one source of truth, CONVENTIONS.md rule 3).

use crate::geometry::{ceil_div, LaunchGeometry};
use crate::shape::KernelLayouts;
use crate::stage::Stage;
use crate::tiling::{
    s05_layout, s06_layout, s07_layout, s08_layout, BlockTile, ThreadTile, WarpTile, S08_STASH_BYTES, WARP_SIZE,
};

/// Element precision of a kernel: `f64` (DGEMM) or `f32` (SGEMM).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Precision {
    /// 32-bit IEEE float (`sgemm`).
    F32,
    /// 64-bit IEEE float (`dgemm`).
    F64,
}

impl Precision {
    /// Bytes per element.
    pub const fn bytes(self) -> u32 {
        match self {
            Precision::F32 => 4,
            Precision::F64 => 8,
        }
    }

    /// BLAS prefix of the routine: `s` or `d`.
    pub const fn blas_prefix(self) -> &'static str {
        match self {
            Precision::F32 => "s",
            Precision::F64 => "d",
        }
    }

    /// Rust type name: `f32` or `f64`.
    pub const fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }
}

/// Tile sizes T of stage 3 (T x T tiles, T x T threads per block). Dharmaraj and Pampana, "Double-Precision Matrix Multiply on CUDA", section 3.1.
pub const SMEM_TILE_SIZES: [u32; 3] = [8, 16, 32];
/// Tile size of stage 4 (32 x 32 tiles). Dharmaraj and Pampana, "Double-Precision Matrix Multiply on CUDA", section 3.2.
pub const OPT_TILE_SIZES: [u32; 1] = [32];
/// Outputs per thread of stage 4. Dharmaraj and Pampana, "Double-Precision Matrix Multiply on CUDA", section 3.2 (table "Outputs per thread").
pub const OUTPUTS_PER_THREAD: [u32; 5] = [1, 2, 4, 8, 16];
/// Most threads a block may hold on every supported GPU (sm_80 and newer).
pub const MAX_THREADS_PER_BLOCK: u32 = 1024;

/// Threads per block of the naive stages, `x * y` (x is the fast, warp-forming axis).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockDim {
    /// Threads along x (consecutive lanes of a warp).
    pub x: u32,
    /// Threads along y.
    pub y: u32,
}

impl BlockDim {
    /// A block of `x * y` threads.
    pub const fn new(x: u32, y: u32) -> Self {
        BlockDim { x, y }
    }

    /// Threads per block.
    pub const fn threads(self) -> u32 {
        self.x.saturating_mul(self.y)
    }
}

impl core::fmt::Display for BlockDim {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}x{}", self.x, self.y)
    }
}

/// A configuration that cannot run; the message names the numbers and the menu.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A block dimension is zero.
    EmptyBlock {
        /// Threads along x.
        x: u32,
        /// Threads along y.
        y: u32,
    },
    /// More threads per block than any GPU allows.
    BlockTooLarge {
        /// Threads along x.
        x: u32,
        /// Threads along y.
        y: u32,
        /// x * y.
        threads: u64,
        /// The limit.
        max: u32,
    },
    /// The stage has no compiled kernel with this tile size.
    TileSize {
        /// The stage asked for.
        stage: Stage,
        /// The tile size asked for.
        tile: u32,
        /// The tile sizes compiled for the stage.
        menu: &'static [u32],
    },
    /// Stage 4 has no compiled kernel with this many outputs per thread.
    OutputsPerThread {
        /// The stage asked for.
        stage: Stage,
        /// Outputs per thread asked for.
        outputs: u32,
        /// The counts compiled.
        menu: &'static [u32],
    },
    /// A tile dimension that must divide another does not (stages 5-8).
    Indivisible {
        /// The stage asked for.
        stage: Stage,
        /// The dimension that must be a multiple (e.g. "BM").
        what: &'static str,
        /// Its value.
        value: u32,
        /// The dimension it must be a multiple of (e.g. "TM").
        by_what: &'static str,
        /// Its value.
        by: u32,
    },
    /// The tiles give a thread count no block can have (stages 5-8).
    Threads {
        /// The stage asked for.
        stage: Stage,
        /// Threads per block the tiles imply.
        threads: u32,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A pipeline with fewer than 2 shared-memory buffers (stages 7, 8).
    PipelineDepth {
        /// The stage asked for.
        stage: Stage,
        /// Pipeline depth asked for.
        depth: u32,
    },
    /// A well-formed configuration of stages 5-8 that is not compiled; the
    /// compiled ones are listed by [`compiled_configs`].
    NotCompiled(KernelConfig),
    /// An option was given that the chosen stage does not take.
    OptionNotForStage {
        /// The builder option.
        option: &'static str,
        /// The stage it was given for.
        stage: Stage,
    },
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::EmptyBlock { x, y } => write!(f, "block {x}x{y} has no threads"),
            ConfigError::BlockTooLarge { x, y, threads, max } => {
                write!(f, "block {x}x{y} has {threads} threads; at most {max} are allowed per block")
            }
            ConfigError::TileSize { stage, tile, menu } => {
                write!(f, "{stage} has no tile size {tile}; compiled tile sizes: {menu:?}")
            }
            ConfigError::OutputsPerThread { stage, outputs, menu } => {
                write!(f, "{stage} has no kernel computing {outputs} outputs per thread; compiled: {menu:?}")
            }
            ConfigError::Indivisible { stage, what, value, by_what, by } => {
                write!(f, "{stage}: {what} = {value} is not a multiple of {by_what} = {by}")
            }
            ConfigError::Threads { stage, threads, reason } => {
                write!(f, "{stage}: the tiles need {threads} threads per block; {reason}")
            }
            ConfigError::PipelineDepth { stage, depth } => {
                write!(f, "{stage}: a pipeline needs a depth of at least 2 (shared-memory buffers), got {depth}")
            }
            ConfigError::NotCompiled(config) => write!(
                f,
                "{} is not among the compiled configurations of {}; compiled: {}",
                config,
                config.stage(),
                MenuList(config.stage())
            ),
            ConfigError::OptionNotForStage { option, stage } => {
                write!(f, "option `{option}` does not apply to {stage}")
            }
        }
    }
}

impl core::error::Error for ConfigError {}

/// One kernel configuration: a stage and its tile constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KernelConfig {
    /// Stage 1; `block` is chosen at run time (any `x * y <= 1024`).
    Naive {
        /// Threads per block.
        block: BlockDim,
    },
    /// Stage 2; `block` is chosen at run time (any `x * y <= 1024`).
    Coalesced {
        /// Threads per block.
        block: BlockDim,
    },
    /// Stage 3: T x T tiles, T x T threads, T in [`SMEM_TILE_SIZES`].
    SmemTiled {
        /// T.
        tile: u32,
    },
    /// Stage 4: T x T tiles, T x (T / outputs) threads, each computing `outputs`
    /// elements of one column of C; T in [`OPT_TILE_SIZES`], outputs in
    /// [`OUTPUTS_PER_THREAD`].
    OutputsPerThread {
        /// T.
        tile: u32,
        /// Outputs per thread.
        outputs: u32,
    },
    /// Stage 5: BM x BN x BK block tile, TM x TN thread tile,
    /// (BM / TM) * (BN / TN) threads.
    RegisterTiled {
        /// Block tile.
        block: BlockTile,
        /// Thread tile.
        thread: ThreadTile,
    },
    /// Stage 6: as stage 5, with 16-byte vector access (TM, TN and BK
    /// multiples of 4, the f32 vector width).
    Vectorized {
        /// Block tile.
        block: BlockTile,
        /// Thread tile.
        thread: ThreadTile,
    },
    /// Stage 7: block tile split into WM x WN warp tiles of 32 threads with
    /// TM x TN thread tiles each ((WM / TM) * (WN / TN) = 32), a pipeline of
    /// `depth` shared-memory buffers filled by cp.async.
    Pipelined {
        /// Block tile.
        block: BlockTile,
        /// Warp tile.
        warp: WarpTile,
        /// Thread tile.
        thread: ThreadTile,
        /// Pipeline depth (shared-memory buffers), at least 2.
        depth: u32,
    },
    /// Stage 8 (f64): block tile split into WM x WN warp tiles computed with
    /// 16 x 8 x 8 tensor-core tiles (WM multiple of 16, WN of 8, BK of 16:
    /// two or more k-groups of 8 per tile), a pipeline of `depth` cp.async
    /// buffers.
    TensorCore {
        /// Block tile.
        block: BlockTile,
        /// Warp tile.
        warp: WarpTile,
        /// Pipeline depth (shared-memory buffers), at least 2.
        depth: u32,
    },
}

/// Builds a [`KernelConfig`] from one line of [`crate::kernel_menu!`]: the stage and
/// its numbers, `[]` (stages 1, 2: the block shape is a run-time choice, given
/// here as 0 x 0), `[T]`, `[T, outputs]`, `[BM, BN, BK, TM, TN]` (stages 5, 6),
/// `[BM, BN, BK, WM, WN, TM, TN, depth]` (7), `[BM, BN, BK, WM, WN, depth]` (8),
/// `depth` being the pipeline depth.
#[macro_export]
macro_rules! menu_config {
    (Naive, []) => {
        $crate::KernelConfig::Naive { block: $crate::BlockDim::new(0, 0) }
    };
    (Coalesced, []) => {
        $crate::KernelConfig::Coalesced { block: $crate::BlockDim::new(0, 0) }
    };
    (SmemTiled, [$t:literal]) => {
        $crate::KernelConfig::SmemTiled { tile: $t }
    };
    (OutputsPerThread, [$t:literal, $o:literal]) => {
        $crate::KernelConfig::OutputsPerThread { tile: $t, outputs: $o }
    };
    (RegisterTiled, [$bm:literal, $bn:literal, $bk:literal, $tm:literal, $tn:literal]) => {
        $crate::KernelConfig::RegisterTiled {
            block: $crate::tiling::BlockTile::new($bm, $bn, $bk),
            thread: $crate::tiling::ThreadTile::new($tm, $tn),
        }
    };
    (Vectorized, [$bm:literal, $bn:literal, $bk:literal, $tm:literal, $tn:literal]) => {
        $crate::KernelConfig::Vectorized {
            block: $crate::tiling::BlockTile::new($bm, $bn, $bk),
            thread: $crate::tiling::ThreadTile::new($tm, $tn),
        }
    };
    (Pipelined, [$bm:literal, $bn:literal, $bk:literal, $wm:literal, $wn:literal, $tm:literal, $tn:literal, $s:literal]) => {
        $crate::KernelConfig::Pipelined {
            block: $crate::tiling::BlockTile::new($bm, $bn, $bk),
            warp: $crate::tiling::WarpTile::new($wm, $wn),
            thread: $crate::tiling::ThreadTile::new($tm, $tn),
            depth: $s,
        }
    };
    (TensorCore, [$bm:literal, $bn:literal, $bk:literal, $wm:literal, $wn:literal, $s:literal]) => {
        $crate::KernelConfig::TensorCore {
            block: $crate::tiling::BlockTile::new($bm, $bn, $bk),
            warp: $crate::tiling::WarpTile::new($wm, $wn),
            depth: $s,
        }
    };
}

/// Precision of a `kernel_menu!` element type.
#[doc(hidden)]
#[macro_export]
macro_rules! menu_precision {
    (f64) => {
        $crate::Precision::F64
    };
    (f32) => {
        $crate::Precision::F32
    };
}

macro_rules! compiled_list {
    ($( ($name:ident, $t:ident, $stage:ident, [$($p:literal),*]) )*) => {
        &[$(($crate::menu_precision!($t), $crate::menu_config!($stage, [$($p),*]))),*]
    };
}

static COMPILED: &[(Precision, KernelConfig)] = crate::kernel_menu!(compiled_list);

/// Every compiled (precision, configuration) pair, in menu order (stages 1
/// and 2 appear once each, with a 0 x 0 block: their block is chosen at run
/// time).
pub fn compiled_configs() -> &'static [(Precision, KernelConfig)] {
    COMPILED
}

/// Lists the compiled configurations of one stage (for error messages).
struct MenuList(Stage);

impl core::fmt::Display for MenuList {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut first = true;
        for (p, c) in COMPILED.iter().filter(|(_, c)| c.stage() == self.0) {
            if !first {
                f.write_str("; ")?;
            }
            first = false;
            write!(f, "{} {c}", p.name())?;
        }
        Ok(())
    }
}

const fn in_menu(x: u32, menu: &[u32]) -> bool {
    let mut i = 0;
    while i < menu.len() {
        if menu[i] == x {
            return true;
        }
        i += 1;
    }
    false
}

const fn check_block(block: BlockDim) -> Result<(), ConfigError> {
    if block.x == 0 || block.y == 0 {
        return Err(ConfigError::EmptyBlock { x: block.x, y: block.y });
    }
    let threads = block.x as u64 * block.y as u64;
    if threads > MAX_THREADS_PER_BLOCK as u64 {
        return Err(ConfigError::BlockTooLarge { x: block.x, y: block.y, threads, max: MAX_THREADS_PER_BLOCK });
    }
    Ok(())
}

impl KernelConfig {
    /// The stage this configuration belongs to.
    pub const fn stage(&self) -> Stage {
        match self {
            KernelConfig::Naive { .. } => Stage::Naive,
            KernelConfig::Coalesced { .. } => Stage::Coalesced,
            KernelConfig::SmemTiled { .. } => Stage::SmemTiled,
            KernelConfig::OutputsPerThread { .. } => Stage::OutputsPerThread,
            KernelConfig::RegisterTiled { .. } => Stage::RegisterTiled,
            KernelConfig::Vectorized { .. } => Stage::Vectorized,
            KernelConfig::Pipelined { .. } => Stage::Pipelined,
            KernelConfig::TensorCore { .. } => Stage::TensorCore,
        }
    }

    /// The part of the configuration fixed at compile time (stages 1 and 2
    /// with their block set to 0 x 0): what selects the PTX entry point.
    pub const fn kernel_key(&self) -> KernelConfig {
        match *self {
            KernelConfig::Naive { .. } => KernelConfig::Naive { block: BlockDim::new(0, 0) },
            KernelConfig::Coalesced { .. } => KernelConfig::Coalesced { block: BlockDim::new(0, 0) },
            other => other,
        }
    }

    /// Checks the configuration against the compiled menu and the per-block
    /// thread limit (device-specific limits are checked by [`LaunchGeometry::check`]).
    /// For stages 5-8 the tile shapes are checked first (each error names the
    /// two numbers that disagree), then membership in the compiled menu.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(result) = self.validate_tiles() {
            result?;
            return if COMPILED.iter().any(|(_, c)| *c == *self) {
                Ok(())
            } else {
                Err(ConfigError::NotCompiled(*self))
            };
        }
        self.validate_square()
    }

    /// Shape rules of stages 5-8; `None` for stages 1-4.
    const fn validate_tiles(&self) -> Option<Result<(), ConfigError>> {
        let stage = self.stage();
        let (block, warp, thread, depth) = match *self {
            KernelConfig::RegisterTiled { block, thread } | KernelConfig::Vectorized { block, thread } => {
                (block, WarpTile::new(block.bm, block.bn), thread, 0)
            }
            KernelConfig::Pipelined { block, warp, thread, depth } => (block, warp, thread, depth),
            KernelConfig::TensorCore { block, warp, depth } => (block, warp, ThreadTile::new(16, 8), depth),
            _ => return None,
        };
        macro_rules! multiple {
            ($what:literal, $value:expr, $by_what:literal, $by:expr) => {
                if $by == 0 || $value == 0 || $value % $by != 0 {
                    return Some(Err(ConfigError::Indivisible {
                        stage,
                        what: $what,
                        value: $value,
                        by_what: $by_what,
                        by: $by,
                    }));
                }
            };
        }
        if matches!(self, KernelConfig::RegisterTiled { .. } | KernelConfig::Vectorized { .. }) {
            multiple!("BM", block.bm, "TM", thread.tm);
            multiple!("BN", block.bn, "TN", thread.tn);
        } else {
            multiple!("BM", block.bm, "WM", warp.wm);
            multiple!("BN", block.bn, "WN", warp.wn);
        }
        if matches!(self, KernelConfig::TensorCore { .. }) {
            multiple!("WM", warp.wm, "the mma tile's 16 rows", 16);
            multiple!("WN", warp.wn, "the mma tile's 8 columns", 8);
            multiple!("BK", block.bk, "the mma tile's k of 16", 16);
        } else {
            multiple!("WM", warp.wm, "TM", thread.tm);
            multiple!("WN", warp.wn, "TN", thread.tn);
        }
        if matches!(self, KernelConfig::Vectorized { .. } | KernelConfig::Pipelined { .. }) {
            multiple!("TM", thread.tm, "the f32 vector width", 4);
            multiple!("TN", thread.tn, "the f32 vector width", 4);
            multiple!("BK", block.bk, "the f32 vector width", 4);
        }
        if depth < 2 && matches!(self, KernelConfig::Pipelined { .. } | KernelConfig::TensorCore { .. }) {
            return Some(Err(ConfigError::PipelineDepth { stage, depth }));
        }
        let threads = self.threads();
        if matches!(self, KernelConfig::Pipelined { .. }) && (warp.wm / thread.tm) * (warp.wn / thread.tn) != WARP_SIZE
        {
            return Some(Err(ConfigError::Threads {
                stage,
                threads,
                reason: "a warp tile must hold (WM / TM) * (WN / TN) = 32 thread tiles",
            }));
        }
        if threads > MAX_THREADS_PER_BLOCK || threads % WARP_SIZE != 0 {
            return Some(Err(ConfigError::Threads {
                stage,
                threads,
                reason: "a block must have a multiple of 32 threads, at most 1024",
            }));
        }
        Some(Ok(()))
    }

    /// Threads per block of stages 5-8 (1D blocks).
    const fn threads(&self) -> u32 {
        match *self {
            KernelConfig::RegisterTiled { block, thread } | KernelConfig::Vectorized { block, thread } => {
                (block.bm / thread.tm) * (block.bn / thread.tn)
            }
            KernelConfig::Pipelined { block, warp, .. } | KernelConfig::TensorCore { block, warp, .. } => {
                (block.bm / warp.wm) * (block.bn / warp.wn) * WARP_SIZE
            }
            _ => 0,
        }
    }

    /// Rules of stages 1-4.
    const fn validate_square(&self) -> Result<(), ConfigError> {
        match *self {
            KernelConfig::Naive { block } | KernelConfig::Coalesced { block } => check_block(block),
            KernelConfig::SmemTiled { tile } => {
                if in_menu(tile, &SMEM_TILE_SIZES) {
                    Ok(())
                } else {
                    Err(ConfigError::TileSize { stage: Stage::SmemTiled, tile, menu: &SMEM_TILE_SIZES })
                }
            }
            KernelConfig::OutputsPerThread { tile, outputs } => {
                if !in_menu(tile, &OPT_TILE_SIZES) {
                    Err(ConfigError::TileSize { stage: Stage::OutputsPerThread, tile, menu: &OPT_TILE_SIZES })
                } else if !in_menu(outputs, &OUTPUTS_PER_THREAD) || tile % outputs != 0 {
                    Err(ConfigError::OutputsPerThread {
                        stage: Stage::OutputsPerThread,
                        outputs,
                        menu: &OUTPUTS_PER_THREAD,
                    })
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }

    /// Threads per block as (x, y); stages 5-8 use 1D blocks (x, 1).
    pub const fn block_dim(&self) -> (u32, u32) {
        match *self {
            KernelConfig::Naive { block } | KernelConfig::Coalesced { block } => (block.x, block.y),
            KernelConfig::SmemTiled { tile } => (tile, tile),
            KernelConfig::OutputsPerThread { tile, outputs } => (tile, rows_per_pass(tile, outputs)),
            _ => (self.threads(), 1),
        }
    }

    /// The part of C (BM x BN) one block computes and the step of its k loop
    /// (BK), as a [`BlockTile`]: the block tile of stages 5-8, T x T x T for
    /// stages 3 and 4, the block's threads x 1 x 1 for stages 1 and 2 (one
    /// element per thread, k one at a time).
    pub const fn c_tile(&self) -> BlockTile {
        match *self {
            KernelConfig::Naive { block } => BlockTile::new(block.x, block.y, 1),
            KernelConfig::Coalesced { block } => BlockTile::new(block.y, block.x, 1),
            KernelConfig::SmemTiled { tile } | KernelConfig::OutputsPerThread { tile, .. } => {
                BlockTile::new(tile, tile, tile)
            }
            KernelConfig::RegisterTiled { block, .. }
            | KernelConfig::Vectorized { block, .. }
            | KernelConfig::Pipelined { block, .. }
            | KernelConfig::TensorCore { block, .. } => block,
        }
    }

    /// Pipeline depth of stages 7 and 8, 1 for the others.
    pub const fn depth(&self) -> u32 {
        match *self {
            KernelConfig::Pipelined { depth, .. } | KernelConfig::TensorCore { depth, .. } => depth,
            _ => 1,
        }
    }

    /// Dynamic shared memory per block in bytes: two T x T tiles (A and B) for
    /// stages 3 and 4, none for stages 1 and 2, the [`crate::tiling`] layout
    /// (times the pipeline depth) for stages 5-8, which for stages 7 and 8
    /// depends on the storage order of A and B.
    pub const fn smem_bytes(&self, precision: Precision, layouts: KernelLayouts) -> u32 {
        let bytes = precision.bytes();
        match *self {
            KernelConfig::Naive { .. } | KernelConfig::Coalesced { .. } => 0,
            KernelConfig::SmemTiled { tile } | KernelConfig::OutputsPerThread { tile, .. } => {
                tile_pair_smem_bytes(tile, bytes)
            }
            KernelConfig::RegisterTiled { block, .. } => s05_layout(block).stage_elems * bytes,
            KernelConfig::Vectorized { block, .. } => s06_layout(block, bytes).stage_elems * bytes,
            KernelConfig::Pipelined { block, depth, .. } => {
                s07_layout(block, bytes, layouts).stage_elems * bytes * depth
            }
            KernelConfig::TensorCore { block, depth, .. } => {
                s08_layout(block, layouts).stage_elems * bytes * depth + S08_STASH_BYTES
            }
        }
    }

    /// Modeled arithmetic intensity in flop/byte: the flops of one block over
    /// the bytes it loads from global memory (0x7df, "CUDA basics part 2"'s CGMA ratio, in
    /// bytes): 1 / size for the naive stages (two loads per fma), T / size
    /// for T x T tiles, 2 BM BN / ((BM + BN) size) for a BM x BN block tile.
    /// Caches are ignored, so this places a stage on a roofline by its
    /// design, not by a measurement.
    pub fn modeled_intensity(&self, precision: Precision) -> f64 {
        let bytes = precision.bytes() as f64;
        match *self {
            KernelConfig::Naive { .. } | KernelConfig::Coalesced { .. } => 1.0 / bytes,
            KernelConfig::SmemTiled { tile } | KernelConfig::OutputsPerThread { tile, .. } => tile as f64 / bytes,
            KernelConfig::RegisterTiled { block, .. }
            | KernelConfig::Vectorized { block, .. }
            | KernelConfig::Pipelined { block, .. }
            | KernelConfig::TensorCore { block, .. } => {
                let (bm, bn) = (block.bm as f64, block.bn as f64);
                2.0 * bm * bn / ((bm + bn) * bytes)
            }
        }
    }

    /// Grid, block and shared memory for an m x n output. The configuration
    /// must be valid ([`KernelConfig::validate`]).
    ///
    /// - naive: grid (ceil(m / x), ceil(n / y)): x walks down the rows of C;
    /// - coalesced: grid (ceil(n / x), ceil(m / y)): x walks along a row of C;
    /// - stages 3, 4: grid (ceil(n / T), ceil(m / T)): block (bx, by) owns the
    ///   T x T tile of C at rows by*T.., columns bx*T.. ([`tile_origin`]);
    /// - stages 5-8: grid (ceil(n / BN), ceil(m / BM)); stages 5-7 map block
    ///   (bx, by) to the block tile (by, bx), stage 8 rasterizes
    ///   ([`crate::tiling::raster`]).
    pub const fn geometry(&self, m: u32, n: u32, precision: Precision, layouts: KernelLayouts) -> LaunchGeometry {
        let (bx, by) = self.block_dim();
        let grid = match *self {
            KernelConfig::Naive { block } => [ceil_div(m, block.x), ceil_div(n, block.y), 1],
            KernelConfig::Coalesced { block } => [ceil_div(n, block.x), ceil_div(m, block.y), 1],
            KernelConfig::SmemTiled { tile } | KernelConfig::OutputsPerThread { tile, .. } => {
                [ceil_div(n, tile), ceil_div(m, tile), 1]
            }
            KernelConfig::RegisterTiled { block, .. }
            | KernelConfig::Vectorized { block, .. }
            | KernelConfig::Pipelined { block, .. }
            | KernelConfig::TensorCore { block, .. } => [ceil_div(n, block.bn), ceil_div(m, block.bm), 1],
        };
        LaunchGeometry { grid, block: [bx, by, 1], smem_bytes: self.smem_bytes(precision, layouts) }
    }
}

impl core::fmt::Display for KernelConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            KernelConfig::Naive { block } | KernelConfig::Coalesced { block } => write!(f, "block {block}"),
            KernelConfig::SmemTiled { tile } => write!(f, "tile {tile}x{tile}"),
            KernelConfig::OutputsPerThread { tile, outputs } => {
                write!(f, "tile {tile}x{tile}, {outputs} outputs/thread")
            }
            KernelConfig::RegisterTiled { block, thread } | KernelConfig::Vectorized { block, thread } => {
                write!(f, "block {block}, thread {thread}")
            }
            KernelConfig::Pipelined { block, warp, thread, depth } => {
                write!(f, "block {block}, warp {warp}, thread {thread}, pipeline depth {depth}")
            }
            KernelConfig::TensorCore { block, warp, depth } => {
                write!(f, "block {block}, warp {warp}, pipeline depth {depth}")
            }
        }
    }
}

/// Shared-memory bytes of one T x T tile of A plus one of B.
pub const fn tile_pair_smem_bytes(tile: u32, element_bytes: u32) -> u32 {
    2 * tile * tile * element_bytes
}

/// Threads along y in stage 4 (T / outputs): the rows of a tile one pass of the
/// block covers; thread y owns rows `y + r * rows_per_pass` for r in 0..outputs.
pub const fn rows_per_pass(tile: u32, outputs: u32) -> u32 {
    tile / outputs
}

/// The C element owned by a thread of the naive stages, as (row, col).
///
/// `lanes_along_n == false` (stage 1): x indexes rows, so a warp's lanes own
/// one column of C and read rows of A `lda` apart. `true` (stage 2): x indexes
/// columns, so a warp reads consecutive elements of B and writes consecutive
/// elements of C. Arguments are (x, y) pairs of blockIdx, blockDim, threadIdx.
#[inline(always)]
pub const fn naive_element(
    lanes_along_n: bool,
    block_idx: [u32; 2],
    block_dim: [u32; 2],
    thread_idx: [u32; 2],
) -> (u32, u32) {
    let fast = block_idx[0] * block_dim[0] + thread_idx[0];
    let slow = block_idx[1] * block_dim[1] + thread_idx[1];
    if lanes_along_n {
        (slow, fast)
    } else {
        (fast, slow)
    }
}

/// First row and column of the C tile owned by block (bx, by) in the tiled
/// stages: (by * T, bx * T). Matches the grid of [`KernelConfig::geometry`].
#[inline(always)]
pub const fn tile_origin(block_idx: [u32; 2], tile: u32) -> (u32, u32) {
    (block_idx[1] * tile, block_idx[0] * tile)
}

/// The ladder's kernels that also have a fused-epilogue twin
/// (`<symbol>_fused`: one product, each thread applying a
/// [`crate::warpgroup::Fusion`] to its sums before the plain stores), as
/// lines of [`crate::kernel_menu!`]: stage 8's f64 and stage 7's f32 tiles for
/// large, middle and small products (the planner's fused product takes the
/// measured fastest configuration where it is one of these, else the
/// nearest of them in tile size). Few, because each twin adds its machine
/// code to every layout module.
#[macro_export]
macro_rules! fused_menu {
    ($callback:ident) => {
        $callback! {
            (dgemm_mma_b128x128x16_w64x32_d3, f64, TensorCore, [128, 128, 16, 64, 32, 3])
            (dgemm_mma_b128x128x16_w64x32_d4, f64, TensorCore, [128, 128, 16, 64, 32, 4])
            (dgemm_mma_b128x64x16_w64x32_d3, f64, TensorCore, [128, 64, 16, 64, 32, 3])
            (dgemm_mma_b64x64x16_w32x32_d4, f64, TensorCore, [64, 64, 16, 32, 32, 4])
            (sgemm_pipelined_b128x128x32_w64x32_t8x8_d3, f32, Pipelined, [128, 128, 32, 64, 32, 8, 8, 3])
            (sgemm_pipelined_b128x128x16_w64x32_t8x8_d3, f32, Pipelined, [128, 128, 16, 64, 32, 8, 8, 3])
            (sgemm_pipelined_b128x64x16_w64x32_t8x8_d4, f32, Pipelined, [128, 64, 16, 64, 32, 8, 8, 4])
            (sgemm_pipelined_b64x64x16_w32x32_t4x8_d3, f32, Pipelined, [64, 64, 16, 32, 32, 4, 8, 3])
        }
    };
}

/// The menu of compiled kernels: one line per exported PTX entry point, as
/// `(symbol, element type, stage, [numbers])`, the numbers as
/// [`crate::menu_config!`] reads them. Invoke with a macro that takes the whole list:
/// `gemm_core::kernel_menu!(my_macro)` expands to `my_macro! { (..) (..) ... }`.
///
/// The kernel crate exports exactly these symbols; the host registry lists
/// exactly these; a test checks both against the PTX.
#[macro_export]
macro_rules! kernel_menu {
    ($callback:ident) => {
        $callback! {
            (dgemm_naive, f64, Naive, [])
            (sgemm_naive, f32, Naive, [])
            (dgemm_coalesced, f64, Coalesced, [])
            (sgemm_coalesced, f32, Coalesced, [])
            (dgemm_tiled_t8, f64, SmemTiled, [8])
            (dgemm_tiled_t16, f64, SmemTiled, [16])
            (dgemm_tiled_t32, f64, SmemTiled, [32])
            (sgemm_tiled_t8, f32, SmemTiled, [8])
            (sgemm_tiled_t16, f32, SmemTiled, [16])
            (sgemm_tiled_t32, f32, SmemTiled, [32])
            (dgemm_opt_t32_o1, f64, OutputsPerThread, [32, 1])
            (dgemm_opt_t32_o2, f64, OutputsPerThread, [32, 2])
            (dgemm_opt_t32_o4, f64, OutputsPerThread, [32, 4])
            (dgemm_opt_t32_o8, f64, OutputsPerThread, [32, 8])
            (dgemm_opt_t32_o16, f64, OutputsPerThread, [32, 16])
            (sgemm_opt_t32_o1, f32, OutputsPerThread, [32, 1])
            (sgemm_opt_t32_o2, f32, OutputsPerThread, [32, 2])
            (sgemm_opt_t32_o4, f32, OutputsPerThread, [32, 4])
            (sgemm_opt_t32_o8, f32, OutputsPerThread, [32, 8])
            (sgemm_opt_t32_o16, f32, OutputsPerThread, [32, 16])
            (dgemm_regtile_b64x64x8_t4x4, f64, RegisterTiled, [64, 64, 8, 4, 4])
            (dgemm_regtile_b128x128x8_t8x8, f64, RegisterTiled, [128, 128, 8, 8, 8])
            (sgemm_regtile_b64x64x8_t4x4, f32, RegisterTiled, [64, 64, 8, 4, 4])
            (sgemm_regtile_b128x128x8_t8x8, f32, RegisterTiled, [128, 128, 8, 8, 8])
            (sgemm_regtile_b128x128x16_t8x8, f32, RegisterTiled, [128, 128, 16, 8, 8])
            (dgemm_vector_b64x64x16_t4x4, f64, Vectorized, [64, 64, 16, 4, 4])
            (dgemm_vector_b128x64x16_t8x4, f64, Vectorized, [128, 64, 16, 8, 4])
            (dgemm_vector_b128x128x16_t8x8, f64, Vectorized, [128, 128, 16, 8, 8])
            (sgemm_vector_b64x64x16_t4x4, f32, Vectorized, [64, 64, 16, 4, 4])
            (sgemm_vector_b128x64x16_t8x4, f32, Vectorized, [128, 64, 16, 8, 4])
            (sgemm_vector_b128x128x16_t8x8, f32, Vectorized, [128, 128, 16, 8, 8])
            (dgemm_pipelined_b64x64x16_w32x32_t4x8_d3, f64, Pipelined, [64, 64, 16, 32, 32, 4, 8, 3])
            (dgemm_pipelined_b128x64x16_w32x32_t4x8_d3, f64, Pipelined, [128, 64, 16, 32, 32, 4, 8, 3])
            (dgemm_pipelined_b128x64x16_w64x16_t8x4_d3, f64, Pipelined, [128, 64, 16, 64, 16, 8, 4, 3])
            (dgemm_pipelined_b128x64x16_w32x32_t4x8_d4, f64, Pipelined, [128, 64, 16, 32, 32, 4, 8, 4])
            (dgemm_pipelined_b64x64x32_w32x32_t4x8_d3, f64, Pipelined, [64, 64, 32, 32, 32, 4, 8, 3])
            (sgemm_pipelined_b64x64x16_w32x32_t4x8_d3, f32, Pipelined, [64, 64, 16, 32, 32, 4, 8, 3])
            (sgemm_pipelined_b128x64x16_w64x32_t8x8_d3, f32, Pipelined, [128, 64, 16, 64, 32, 8, 8, 3])
            (sgemm_pipelined_b128x128x16_w64x32_t8x8_d3, f32, Pipelined, [128, 128, 16, 64, 32, 8, 8, 3])
            (sgemm_pipelined_b128x128x32_w64x32_t8x8_d3, f32, Pipelined, [128, 128, 32, 64, 32, 8, 8, 3])
            (sgemm_pipelined_b128x128x32_w64x32_t8x8_d4, f32, Pipelined, [128, 128, 32, 64, 32, 8, 8, 4])
            (sgemm_pipelined_b128x32x16_w32x32_t4x8_d3, f32, Pipelined, [128, 32, 16, 32, 32, 4, 8, 3])
            (sgemm_pipelined_b32x128x16_w32x32_t4x8_d3, f32, Pipelined, [32, 128, 16, 32, 32, 4, 8, 3])
            (sgemm_pipelined_b32x32x16_w32x32_t4x8_d4, f32, Pipelined, [32, 32, 16, 32, 32, 4, 8, 4])
            (sgemm_pipelined_b128x64x16_w64x32_t8x8_d4, f32, Pipelined, [128, 64, 16, 64, 32, 8, 8, 4])
            (dgemm_mma_b64x64x16_w32x32_d3, f64, TensorCore, [64, 64, 16, 32, 32, 3])
            (dgemm_mma_b128x64x16_w64x32_d3, f64, TensorCore, [128, 64, 16, 64, 32, 3])
            (dgemm_mma_b128x64x16_w64x32_d4, f64, TensorCore, [128, 64, 16, 64, 32, 4])
            (dgemm_mma_b128x128x16_w64x32_d3, f64, TensorCore, [128, 128, 16, 64, 32, 3])
            (dgemm_mma_b64x64x32_w32x32_d3, f64, TensorCore, [64, 64, 32, 32, 32, 3])
            (dgemm_mma_b128x64x32_w32x32_d3, f64, TensorCore, [128, 64, 32, 32, 32, 3])
            (dgemm_mma_b128x32x16_w32x32_d3, f64, TensorCore, [128, 32, 16, 32, 32, 3])
            (dgemm_mma_b32x128x16_w32x32_d3, f64, TensorCore, [32, 128, 16, 32, 32, 3])
            (dgemm_mma_b32x32x16_w32x32_d4, f64, TensorCore, [32, 32, 16, 32, 32, 4])
            (dgemm_mma_b64x64x16_w32x32_d4, f64, TensorCore, [64, 64, 16, 32, 32, 4])
            (dgemm_mma_b128x128x16_w64x32_d4, f64, TensorCore, [128, 128, 16, 64, 32, 4])
            (dgemm_mma_b128x64x32_w32x32_d4, f64, TensorCore, [128, 64, 32, 32, 32, 4])
            (dgemm_mma_b64x128x16_w64x32_d3, f64, TensorCore, [64, 128, 16, 64, 32, 3])
        }
    };
}

#[cfg(test)]
mod tests {
    /// Every line of `fused_menu!` is a line of `kernel_menu!`, word for
    /// word (the fused twin runs the plain kernel's configuration).
    #[test]
    fn fused_menu_lines_are_kernel_menu_lines() {
        macro_rules! lines {
            ($( ($name:ident, $t:tt, $stage:ident, [$($p:literal),*]) )*) => {
                [$(concat!(stringify!($name), " ", stringify!($t), " ", stringify!($stage), $(" ", stringify!($p)),*)),*]
            };
        }
        let (all, fused) = (kernel_menu!(lines), fused_menu!(lines));
        assert!(!fused.is_empty());
        for line in fused {
            assert!(all.contains(&line), "{line} is not a line of kernel_menu!");
        }
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn menus_validate() {
        for t in SMEM_TILE_SIZES {
            assert_eq!(KernelConfig::SmemTiled { tile: t }.validate(), Ok(()));
        }
        for o in OUTPUTS_PER_THREAD {
            assert_eq!(KernelConfig::OutputsPerThread { tile: 32, outputs: o }.validate(), Ok(()));
        }
        assert!(matches!(KernelConfig::SmemTiled { tile: 12 }.validate(), Err(ConfigError::TileSize { tile: 12, .. })));
        assert!(matches!(
            KernelConfig::OutputsPerThread { tile: 32, outputs: 3 }.validate(),
            Err(ConfigError::OutputsPerThread { outputs: 3, .. })
        ));
        assert!(matches!(
            KernelConfig::OutputsPerThread { tile: 16, outputs: 4 }.validate(),
            Err(ConfigError::TileSize { tile: 16, .. })
        ));
    }

    #[test]
    fn oversized_and_empty_blocks_are_rejected() {
        let big = KernelConfig::Naive { block: BlockDim::new(64, 32) };
        assert!(matches!(big.validate(), Err(ConfigError::BlockTooLarge { threads: 2048, .. })));
        let huge = KernelConfig::Coalesced { block: BlockDim::new(u32::MAX, u32::MAX) };
        assert!(matches!(huge.validate(), Err(ConfigError::BlockTooLarge { .. })));
        let empty = KernelConfig::Coalesced { block: BlockDim::new(0, 4) };
        assert!(matches!(empty.validate(), Err(ConfigError::EmptyBlock { .. })));
    }

    #[test]
    fn stage4_block_is_tile_by_rows_per_pass() {
        let c = KernelConfig::OutputsPerThread { tile: 32, outputs: 8 };
        assert_eq!(c.block_dim(), (32, 4));
        assert_eq!(c.smem_bytes(Precision::F64, KernelLayouts::NN), 16384);
        assert_eq!(c.smem_bytes(Precision::F32, KernelLayouts::NN), 8192);
    }

    /// Every C element is owned by exactly one thread of the launched grid.
    fn assert_covers_exactly_once(config: KernelConfig, m: u32, n: u32) {
        let g = config.geometry(m, n, Precision::F64, KernelLayouts::NN);
        let mut owned = std::vec![0u8; (m * n) as usize];
        for bx in 0..g.grid[0] {
            for by in 0..g.grid[1] {
                for tx in 0..g.block[0] {
                    for ty in 0..g.block[1] {
                        let cells: std::vec::Vec<(u32, u32)> = match config {
                            KernelConfig::Naive { .. } => {
                                std::vec![naive_element(false, [bx, by], [g.block[0], g.block[1]], [tx, ty])]
                            }
                            KernelConfig::Coalesced { .. } => {
                                std::vec![naive_element(true, [bx, by], [g.block[0], g.block[1]], [tx, ty])]
                            }
                            KernelConfig::SmemTiled { tile } => {
                                let (r0, c0) = tile_origin([bx, by], tile);
                                std::vec![(r0 + ty, c0 + tx)]
                            }
                            KernelConfig::OutputsPerThread { tile, outputs } => {
                                let (r0, c0) = tile_origin([bx, by], tile);
                                let rpp = rows_per_pass(tile, outputs);
                                (0..outputs).map(|r| (r0 + ty + r * rpp, c0 + tx)).collect()
                            }
                            _ => unreachable!("stages 5-8 are covered by `tiled_grids_cover_c`"),
                        };
                        for (i, j) in cells {
                            if i < m && j < n {
                                owned[(i * n + j) as usize] += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(owned.iter().all(|&x| x == 1), "{config:?} at {m}x{n}");
    }

    extern crate std;

    #[test]
    fn compiled_tiled_configs_validate_and_their_grids_cover_c() {
        for &(_, c) in compiled_configs().iter().filter(|(_, c)| c.stage().number() >= 3) {
            assert_eq!(c.validate(), Ok(()), "{c}");
        }
        for &(p, c) in compiled_configs().iter().filter(|(_, c)| c.stage().number() >= 5) {
            let (KernelConfig::RegisterTiled { block, .. }
            | KernelConfig::Vectorized { block, .. }
            | KernelConfig::Pipelined { block, .. }
            | KernelConfig::TensorCore { block, .. }) = c
            else {
                unreachable!()
            };
            for (m, n) in [(1, 1), (127, 129), (1000, 1023)] {
                let g = c.geometry(m, n, p, KernelLayouts::NN);
                assert!(g.grid[0] * block.bn >= n && (g.grid[0] - 1) * block.bn < n, "{c}");
                assert!(g.grid[1] * block.bm >= m && (g.grid[1] - 1) * block.bm < m, "{c}");
                assert_eq!(g.block[0] % 32, 0);
                assert!(g.smem_bytes <= 227 * 1024, "{c}: {} bytes", g.smem_bytes);
            }
        }
    }

    #[test]
    fn tiled_configs_name_what_is_wrong() {
        use crate::tiling::{BlockTile, ThreadTile, WarpTile};
        let bad = KernelConfig::RegisterTiled { block: BlockTile::new(128, 100, 16), thread: ThreadTile::new(8, 8) };
        assert!(matches!(bad.validate(), Err(ConfigError::Indivisible { what: "BN", value: 100, by: 8, .. })));
        let big = KernelConfig::RegisterTiled { block: BlockTile::new(256, 256, 8), thread: ThreadTile::new(4, 4) };
        assert!(matches!(big.validate(), Err(ConfigError::Threads { threads: 4096, .. })));
        let odd = KernelConfig::Vectorized { block: BlockTile::new(128, 128, 16), thread: ThreadTile::new(8, 6) };
        assert!(matches!(odd.validate(), Err(ConfigError::Indivisible { .. })));
        let warp = KernelConfig::Pipelined {
            block: BlockTile::new(128, 128, 16),
            warp: WarpTile::new(64, 64),
            thread: ThreadTile::new(8, 8),
            depth: 3,
        };
        assert!(matches!(warp.validate(), Err(ConfigError::Threads { .. })));
        let shallow =
            KernelConfig::TensorCore { block: BlockTile::new(128, 64, 16), warp: WarpTile::new(64, 32), depth: 1 };
        assert_eq!(shallow.validate(), Err(ConfigError::PipelineDepth { stage: Stage::TensorCore, depth: 1 }));
        let absent =
            KernelConfig::TensorCore { block: BlockTile::new(128, 64, 16), warp: WarpTile::new(32, 32), depth: 3 };
        assert_eq!(absent.validate(), Err(ConfigError::NotCompiled(absent)));
        let msg = std::format!("{}", ConfigError::NotCompiled(absent));
        assert!(msg.contains("f64 block 128x64x16, warp 64x32, pipeline depth 3"), "{msg}");
    }

    proptest! {
        #[test]
        fn grids_cover_every_element_once(m in 1u32..80, n in 1u32..80, bx in 1u32..40, by in 1u32..20,
                                          ti in 0usize..3, oi in 0usize..5) {
            assert_covers_exactly_once(KernelConfig::Naive { block: BlockDim::new(bx, by) }, m, n);
            assert_covers_exactly_once(KernelConfig::Coalesced { block: BlockDim::new(bx, by) }, m, n);
            assert_covers_exactly_once(KernelConfig::SmemTiled { tile: SMEM_TILE_SIZES[ti] }, m, n);
            assert_covers_exactly_once(KernelConfig::OutputsPerThread { tile: 32, outputs: OUTPUTS_PER_THREAD[oi] }, m, n);
        }
    }
}
