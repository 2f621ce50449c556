//! Which kernel entry points exist: built from [`gemm_core::kernel_menu!`],
//! the same list the kernel crate exports, so the two cannot drift (a test
//! also checks this list against the PTX).

use crate::element::Element;
use crate::error::Error;
use gemm_core::config::{OPT_TILE_SIZES, OUTPUTS_PER_THREAD, SMEM_TILE_SIZES};
use gemm_core::{BlockDim, KernelConfig, Precision, Stage};

/// One exported PTX entry point and the configuration it implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryPoint {
    /// The PTX symbol, e.g. `dgemm_tiled_t32`.
    pub name: &'static str,
    /// Element type.
    pub precision: Precision,
    /// Stage.
    pub stage: Stage,
    /// Tile size T (0 for stages without one).
    pub tile: u32,
    /// Outputs per thread (0 for the naive stages).
    pub outputs: u32,
}

macro_rules! registry_entries {
    ($( ($name:ident, $t:ty, $stage:ident, $tile:literal, $outputs:literal) )*) => {
        &[$(EntryPoint {
            name: stringify!($name),
            precision: <$t as Element>::PRECISION,
            stage: Stage::$stage,
            tile: $tile,
            outputs: $outputs,
        }),*]
    };
}

/// Every compiled entry point.
pub static ENTRY_POINTS: &[EntryPoint] = gemm_core::kernel_menu!(registry_entries);

/// The entry point that runs `config` for `precision`.
pub fn entry_point(precision: Precision, config: KernelConfig) -> Result<&'static EntryPoint, Error> {
    config.validate()?;
    let (stage, tile, outputs) = match config {
        KernelConfig::SmemTiled { tile } => (Stage::SmemTiled, tile, 1),
        KernelConfig::OutputsPerThread { tile, outputs } => (Stage::OutputsPerThread, tile, outputs),
        other => (other.stage(), 0, 0),
    };
    ENTRY_POINTS
        .iter()
        .find(|e| e.precision == precision && e.stage == stage && e.tile == tile && e.outputs == outputs)
        .ok_or(Error::NoKernel { precision, config })
}

/// Block shapes the naive stages are swept over (Bx, By powers of two with
/// 32 <= Bx * By <= 1024), as in seed 000's heat map.
pub fn naive_block_sweep() -> Vec<BlockDim> {
    let pows: Vec<u32> = (0..=10).map(|p| 1 << p).collect();
    let mut out = Vec::new();
    for &y in &pows {
        for &x in &pows {
            if (32..=1024).contains(&(x * y)) {
                out.push(BlockDim::new(x, y));
            }
        }
    }
    out
}

/// Every configuration of a stage that is worth a sweep: the compiled menu for
/// the tiled stages, [`naive_block_sweep`] for the naive ones.
pub fn stage_configs(stage: Stage) -> Vec<KernelConfig> {
    match stage {
        Stage::Naive => naive_block_sweep().into_iter().map(|block| KernelConfig::Naive { block }).collect(),
        Stage::Coalesced => naive_block_sweep().into_iter().map(|block| KernelConfig::Coalesced { block }).collect(),
        Stage::SmemTiled => SMEM_TILE_SIZES.iter().map(|&tile| KernelConfig::SmemTiled { tile }).collect(),
        _ => OPT_TILE_SIZES
            .iter()
            .flat_map(|&tile| {
                OUTPUTS_PER_THREAD.iter().map(move |&outputs| KernelConfig::OutputsPerThread { tile, outputs })
            })
            .collect(),
    }
}
