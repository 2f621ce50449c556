//! Kernel configurations: which stage, which tile constants, checked once.
//!
//! The menu of compiled configurations is [`crate::kernel_menu!`]: the kernel crate
//! instantiates and exports one PTX entry point per line, and the host builds
//! its registry from the same lines (one source of truth, CONVENTIONS.md rule 3).

use crate::geometry::{ceil_div, LaunchGeometry};
use crate::stage::Stage;
use thiserror::Error;

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

/// Tile sizes T of stage 3 (T x T tiles, T x T threads per block). Seed 000, section 3.1.
pub const SMEM_TILE_SIZES: [u32; 3] = [8, 16, 32];
/// Tile size of stage 4 (32 x 32 tiles). Seed 000, section 3.2.
pub const OPT_TILE_SIZES: [u32; 1] = [32];
/// Outputs per thread of stage 4. Seed 000, section 3.2 (table "Outputs per thread").
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A block dimension is zero.
    #[error("block {x}x{y} has no threads")]
    EmptyBlock {
        /// Threads along x.
        x: u32,
        /// Threads along y.
        y: u32,
    },
    /// More threads per block than any GPU allows.
    #[error("block {x}x{y} has {threads} threads; at most {max} are allowed per block")]
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
    #[error("{stage} has no tile size {tile}; compiled tile sizes: {menu:?}")]
    TileSize {
        /// The stage asked for.
        stage: Stage,
        /// The tile size asked for.
        tile: u32,
        /// The tile sizes compiled for the stage.
        menu: &'static [u32],
    },
    /// Stage 4 has no compiled kernel with this many outputs per thread.
    #[error("{stage} has no kernel computing {outputs} outputs per thread; compiled: {menu:?}")]
    OutputsPerThread {
        /// The stage asked for.
        stage: Stage,
        /// Outputs per thread asked for.
        outputs: u32,
        /// The counts compiled.
        menu: &'static [u32],
    },
    /// An option was given that the chosen stage does not take.
    #[error("option `{option}` does not apply to {stage}")]
    OptionNotForStage {
        /// The builder option.
        option: &'static str,
        /// The stage it was given for.
        stage: Stage,
    },
}

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
        }
    }

    /// Checks the configuration against the compiled menu and the per-block
    /// thread limit (device-specific limits are checked by [`LaunchGeometry::check`]).
    pub const fn validate(&self) -> Result<(), ConfigError> {
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
        }
    }

    /// Threads per block as (x, y).
    pub const fn block_dim(&self) -> (u32, u32) {
        match *self {
            KernelConfig::Naive { block } | KernelConfig::Coalesced { block } => (block.x, block.y),
            KernelConfig::SmemTiled { tile } => (tile, tile),
            KernelConfig::OutputsPerThread { tile, outputs } => (tile, rows_per_pass(tile, outputs)),
        }
    }

    /// Dynamic shared memory per block in bytes: two T x T tiles (A and B) for
    /// stages 3 and 4, none for stages 1 and 2.
    pub const fn smem_bytes(&self, precision: Precision) -> u32 {
        match *self {
            KernelConfig::Naive { .. } | KernelConfig::Coalesced { .. } => 0,
            KernelConfig::SmemTiled { tile } | KernelConfig::OutputsPerThread { tile, .. } => {
                tile_pair_smem_bytes(tile, precision.bytes())
            }
        }
    }

    /// Grid, block and shared memory for an m x n output. The configuration
    /// must be valid ([`KernelConfig::validate`]).
    ///
    /// - naive: grid (ceil(m / x), ceil(n / y)): x walks down the rows of C;
    /// - coalesced: grid (ceil(n / x), ceil(m / y)): x walks along a row of C;
    /// - tiled stages: grid (ceil(n / T), ceil(m / T)): block (bx, by) owns the
    ///   T x T tile of C at rows by*T.., columns bx*T.. ([`tile_origin`]).
    pub const fn geometry(&self, m: u32, n: u32, precision: Precision) -> LaunchGeometry {
        let (bx, by) = self.block_dim();
        let grid = match *self {
            KernelConfig::Naive { block } => [ceil_div(m, block.x), ceil_div(n, block.y), 1],
            KernelConfig::Coalesced { block } => [ceil_div(n, block.x), ceil_div(m, block.y), 1],
            KernelConfig::SmemTiled { tile } | KernelConfig::OutputsPerThread { tile, .. } => {
                [ceil_div(n, tile), ceil_div(m, tile), 1]
            }
        };
        LaunchGeometry { grid, block: [bx, by, 1], smem_bytes: self.smem_bytes(precision) }
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

/// The menu of compiled kernels: one line per exported PTX entry point, as
/// `(symbol, element type, stage, tile, outputs per thread)` (0 where a stage
/// takes no such constant). Invoke with a macro that takes the whole list:
/// `gemm_core::kernel_menu!(my_macro)` expands to `my_macro! { (..) (..) ... }`.
///
/// The kernel crate exports exactly these symbols; the host registry lists
/// exactly these; a test checks both against the PTX.
#[macro_export]
macro_rules! kernel_menu {
    ($callback:ident) => {
        $callback! {
            (dgemm_naive, f64, Naive, 0, 0)
            (sgemm_naive, f32, Naive, 0, 0)
            (dgemm_coalesced, f64, Coalesced, 0, 0)
            (sgemm_coalesced, f32, Coalesced, 0, 0)
            (dgemm_tiled_t8, f64, SmemTiled, 8, 1)
            (dgemm_tiled_t16, f64, SmemTiled, 16, 1)
            (dgemm_tiled_t32, f64, SmemTiled, 32, 1)
            (sgemm_tiled_t8, f32, SmemTiled, 8, 1)
            (sgemm_tiled_t16, f32, SmemTiled, 16, 1)
            (sgemm_tiled_t32, f32, SmemTiled, 32, 1)
            (dgemm_opt_t32_o1, f64, OutputsPerThread, 32, 1)
            (dgemm_opt_t32_o2, f64, OutputsPerThread, 32, 2)
            (dgemm_opt_t32_o4, f64, OutputsPerThread, 32, 4)
            (dgemm_opt_t32_o8, f64, OutputsPerThread, 32, 8)
            (dgemm_opt_t32_o16, f64, OutputsPerThread, 32, 16)
            (sgemm_opt_t32_o1, f32, OutputsPerThread, 32, 1)
            (sgemm_opt_t32_o2, f32, OutputsPerThread, 32, 2)
            (sgemm_opt_t32_o4, f32, OutputsPerThread, 32, 4)
            (sgemm_opt_t32_o8, f32, OutputsPerThread, 32, 8)
            (sgemm_opt_t32_o16, f32, OutputsPerThread, 32, 16)
        }
    };
}

#[cfg(test)]
mod tests {
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
        assert_eq!(c.smem_bytes(Precision::F64), 16384);
        assert_eq!(c.smem_bytes(Precision::F32), 8192);
    }

    /// Every C element is owned by exactly one thread of the launched grid.
    fn assert_covers_exactly_once(config: KernelConfig, m: u32, n: u32) {
        let g = config.geometry(m, n, Precision::F64);
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
