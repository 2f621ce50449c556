//! Which kernel entry points exist, layer device: the ladder's entry points
//! ([`ENTRY_POINTS`], built from [`gemm_core::kernel_menu!`]), stage 9's
//! kernel families ([`WARPGROUP_KERNELS`], from
//! [`gemm_core::warpgroup_menu!`]) and stage 8's mixed-precision kernels
//! ([`MMA_KERNELS`], from [`gemm_core::mma_menu!`]): the same lists the
//! kernel crate exports, so the two cannot drift (a test also checks this
//! list against the PTX). It imports only the base layer.

use crate::error::Error;
use gemm_core::mma_sync::MmaTile;
use gemm_core::warpgroup::{WgmmaTile, WgmmaTypes};
use gemm_core::{BlockDim, KernelConfig, Precision, Stage};

/// One exported PTX entry point and the configuration it implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryPoint {
    /// The PTX symbol, e.g. `dgemm_tiled_t32`.
    pub name: &'static str,
    /// The symbol that runs batches: `name`, or `<name>_batched` where the
    /// stage keeps a separate batched entry
    /// (`gemm_core::batch::separate_batched_entry`).
    pub batched_name: &'static str,
    /// The fused-epilogue twin `<name>_fused` (one product, C stored through
    /// a `Fusion`), for the lines of [`gemm_core::fused_menu!`].
    pub fused_name: Option<&'static str>,
    /// Element type.
    pub precision: Precision,
    /// The compiled configuration ([`KernelConfig::kernel_key`]: stages 1 and
    /// 2 with a 0 x 0 block, their block being a run-time choice).
    pub config: KernelConfig,
}

impl EntryPoint {
    /// The entry point's stage.
    pub fn stage(&self) -> Stage {
        self.config.stage()
    }
}

macro_rules! registry_entries {
    ($( ($name:ident, $t:tt, $stage:ident, [$($p:literal),*]) )*) => {
        &[$(EntryPoint {
            name: stringify!($name),
            batched_name: if gemm_core::batch::separate_batched_entry(
                gemm_core::Stage::$stage, gemm_core::menu_precision!($t)) {
                concat!(stringify!($name), "_batched")
            } else {
                stringify!($name)
            },
            fused_name: if listed(FUSED_MENU, stringify!($name)) {
                Some(concat!(stringify!($name), "_fused"))
            } else {
                None
            },
            precision: gemm_core::menu_precision!($t),
            config: gemm_core::menu_config!($stage, [$($p),*]),
        }),*]
    };
}

macro_rules! menu_names {
    ($( ($name:ident, $t:tt, $stage:ident, [$($p:literal),*]) )*) => {
        &[$(stringify!($name)),*]
    };
}

/// The symbols of [`gemm_core::fused_menu!`]: the kernels with a fused twin.
pub static FUSED_MENU: &[&str] = gemm_core::fused_menu!(menu_names);

/// Whether `name` is in `list` (a const fn: the registry's table is built
/// at compile time).
const fn listed(list: &[&str], name: &str) -> bool {
    let mut i = 0;
    while i < list.len() {
        let (a, b) = (list[i].as_bytes(), name.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return true;
            }
        }
        i += 1;
    }
    false
}

/// Every compiled entry point.
pub static ENTRY_POINTS: &[EntryPoint] = gemm_core::kernel_menu!(registry_entries);

/// The entry point that runs `config` for `precision`.
///
/// # Errors
/// [`Error::Config`] when the configuration is invalid or not compiled for
/// any precision; [`Error::NoKernel`] when it is compiled, but not for this
/// precision (stage 8 is f64 only).
pub fn entry_point(precision: Precision, config: KernelConfig) -> Result<&'static EntryPoint, Error> {
    config.validate()?;
    let key = config.kernel_key();
    ENTRY_POINTS
        .iter()
        .find(|e| e.precision == precision && e.config == key)
        .ok_or(Error::NoKernel { precision, config })
}

/// Block shapes the naive stages are swept over (Bx, By powers of two with
/// 32 <= Bx * By <= 1024), as in Dharmaraj and Pampana, "Double-Precision Matrix Multiply on CUDA"'s heat map.
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

/// Every configuration of a stage that is worth a sweep for `precision`: the
/// compiled menu for the tiled stages, [`naive_block_sweep`] for the naive
/// ones (empty for stage 8 in f32).
pub fn stage_configs(stage: Stage, precision: Precision) -> Vec<KernelConfig> {
    match stage {
        Stage::Naive => naive_block_sweep().into_iter().map(|block| KernelConfig::Naive { block }).collect(),
        Stage::Coalesced => naive_block_sweep().into_iter().map(|block| KernelConfig::Coalesced { block }).collect(),
        _ => ENTRY_POINTS.iter().filter(|e| e.stage() == stage && e.precision == precision).map(|e| e.config).collect(),
    }
}

/// One compiled stage-9 kernel family: its four layout entry points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarpgroupKernel {
    /// The entry points `<name>_nn`, `_nt`, `_tn`, `_tt` (A then B; `n`
    /// row-major, `t` column-major, kernel form); only `_nt` (both operands
    /// K-major) when the types do not [transpose](WgmmaTypes::transposes)
    /// (and `_tt` for tf32's A through registers); `_nt` and `_tt` (B
    /// K-major) for a [narrow](WgmmaTile::narrow) tile; none on a line
    /// marked `fused_only` (whose kernels are all fused).
    pub names: [Option<&'static str>; 4],
    /// The same layouts' kernels with FP8 block scales and the fused
    /// epilogue (`<entry>_fused`, reading the launch's `Fusion`), on the
    /// menu lines marked `fused` or `fused_only`; none elsewhere (the plain kernels ignore
    /// `fusion`).
    pub fused: [Option<&'static str>; 4],
    /// The same layouts' kernels with the fused epilogue but no block
    /// scales (`<entry>_epilogue`), on the FP8 menu lines marked `epilogue`:
    /// those whose `_fused` kernels [stage](WgmmaTile::stages_scales) block
    /// scales, a choice compiled into them; none elsewhere.
    pub epilogue: [Option<&'static str>; 4],
    /// Operand and C types.
    pub types: WgmmaTypes,
    /// Block tile and pipeline depth.
    pub tile: WgmmaTile,
}

/// Which of a [`WarpgroupKernel`] family's kernels a launch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// The plain product (`<entry>`): `fusion` ignored.
    Plain,
    /// Block scales and the fused epilogue (`<entry>_fused`).
    Fused,
    /// The fused epilogue without block scales (`<entry>_epilogue`).
    Epilogue,
}

impl WarpgroupKernel {
    /// Whether the family has fused-epilogue kernels.
    pub fn fuses(&self) -> bool {
        self.fused.iter().any(Option::is_some)
    }

    /// The flavour of a launch: plain without a fusion; with one, the
    /// family's `_epilogue` kernels where it has them and the launch has
    /// no block scales ([`gemm_core::warpgroup::Fusion::block_scaled`]),
    /// else its `_fused` kernels.
    pub fn flavour(&self, fused: bool, block_scaled: bool) -> Flavour {
        if !fused {
            Flavour::Plain
        } else if !block_scaled && self.epilogue.iter().any(Option::is_some) {
            Flavour::Epilogue
        } else {
            Flavour::Fused
        }
    }

    /// The entry point for layouts `index` ([`gemm_core::shape::KernelLayouts::index`]
    /// order) in `flavour`.
    pub fn entry(&self, index: usize, flavour: Flavour) -> Option<&'static str> {
        match flavour {
            Flavour::Plain => self.names[index],
            Flavour::Fused => self.fused[index],
            Flavour::Epilogue => self.epilogue[index],
        }
    }

    /// Dynamic shared memory of the family's kernels in `flavour`: a fused
    /// FP8 kernel's producer may stage block scales beside the buffers
    /// ([`WgmmaTile::stages_scales`]).
    pub fn smem_bytes(&self, flavour: Flavour) -> u32 {
        self.tile.kernel_smem_bytes(flavour == Flavour::Fused && self.types.fp8())
    }
}

/// The layout entry points of one menu line with suffix `$tail` ("",
/// "_fused" or "_epilogue"), as [`WarpgroupKernel::names`] says.
macro_rules! layout_names {
    ($name:ident, $t:ident, [$bm:literal, $bn:literal, $d:literal, $cl:literal], $tail:literal) => {
        if WgmmaTypes::$t.transposes() && (WgmmaTile { bm: $bm, bn: $bn, depth: $d, cluster: $cl }).narrow() {
            // B K-major only.
            [None, Some(concat!(stringify!($name), "_nt", $tail)), None, Some(concat!(stringify!($name), "_tt", $tail))]
        } else if WgmmaTypes::$t.transposes() {
            [
                Some(concat!(stringify!($name), "_nn", $tail)),
                Some(concat!(stringify!($name), "_nt", $tail)),
                Some(concat!(stringify!($name), "_tn", $tail)),
                Some(concat!(stringify!($name), "_tt", $tail)),
            ]
        } else {
            [
                None,
                Some(concat!(stringify!($name), "_nt", $tail)),
                None,
                if WgmmaTypes::$t.register_a() { Some(concat!(stringify!($name), "_tt", $tail)) } else { None },
            ]
        }
    };
}

/// Whether a menu line's markers include `marker`.
const fn marked(flags: &[&str], marker: &str) -> bool {
    let mut i = 0;
    while i < flags.len() {
        let (f, m) = (flags[i].as_bytes(), marker.as_bytes());
        if f.len() == m.len() {
            let mut j = 0;
            while j < f.len() && f[j] == m[j] {
                j += 1;
            }
            if j == f.len() {
                return true;
            }
        }
        i += 1;
    }
    false
}

macro_rules! warpgroup_entries {
    ($( ($name:ident, $t:ident, [$bm:literal, $bn:literal, $d:literal, $cl:literal] $(, $flag:ident)*) )*) => {
        &[$(WarpgroupKernel {
            names: if marked(&[$(stringify!($flag)),*], "fused_only") {
                [None; 4]
            } else {
                layout_names!($name, $t, [$bm, $bn, $d, $cl], "")
            },
            fused: if marked(&[$(stringify!($flag)),*], "fused") || marked(&[$(stringify!($flag)),*], "fused_only") {
                layout_names!($name, $t, [$bm, $bn, $d, $cl], "_fused")
            } else {
                [None; 4]
            },
            epilogue: if marked(&[$(stringify!($flag)),*], "epilogue") {
                layout_names!($name, $t, [$bm, $bn, $d, $cl], "_epilogue")
            } else {
                [None; 4]
            },
            types: WgmmaTypes::$t,
            tile: WgmmaTile { bm: $bm, bn: $bn, depth: $d, cluster: $cl },
        }),*]
    };
}

/// Every compiled stage-9 kernel family (the `sm_90a` module's entry points).
pub static WARPGROUP_KERNELS: &[WarpgroupKernel] = gemm_core::warpgroup_menu!(warpgroup_entries);

macro_rules! skinny_names {
    ($( ($name:ident, $t:ident, $s:literal, [$($l:ident),*]) )*) => {
        &[$($(concat!(stringify!($name), "_", stringify!($l)),)*)*]
    };
}

macro_rules! skinny_mma_names {
    ($( ($name:ident, $t:ident, $s:literal, $l:ident) )*) => {
        &[$(stringify!($name),)*]
    };
}

/// Every compiled token-sized kernel of the CUDA cores
/// (`gemm_core::skinny_menu!`; the `sm_90a` module's entry points).
pub static SKINNY_KERNELS: &[&str] = gemm_core::skinny_menu!(skinny_names);

/// Every compiled token-sized kernel of the tensor cores
/// (`gemm_core::skinny_mma_menu!`; the `sm_90a` module's entry points).
pub static SKINNY_MMA_KERNELS: &[&str] = gemm_core::skinny_mma_menu!(skinny_mma_names);

/// The entry points of f64 and f32 products emulated on INT8 tensor cores
/// (stage 9's module; `gemm-kernels/src/emulation.rs`): for f64 then f32,
/// the exponents of lines with contiguous elements, of other lines, the
/// residues and the reconstruction.
pub static EMULATION_KERNELS: [[&str; 4]; 2] = [
    [
        "emulation_exponents_f64",
        "emulation_exponents_strided_f64",
        "emulation_residues_f64",
        "emulation_reconstruct_f64",
    ],
    [
        "emulation_exponents_f32",
        "emulation_exponents_strided_f32",
        "emulation_residues_f32",
        "emulation_reconstruct_f32",
    ],
];

/// The type-free entry points of the emulation's accurate mode: the row and
/// column maxima of the coarse product, and the exponents they give.
pub static EMULATION_BOUND_KERNELS: [&str; 2] = ["emulation_bound_max", "emulation_bound_exponents"];

/// One compiled stage-8 mixed-precision kernel (`mma.sync`): the entry
/// point of that name in each layout module (f16, bf16), or in the `nt`
/// module alone (tf32, i8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaKernel {
    /// The entry point.
    pub name: &'static str,
    /// Operand and C types.
    pub types: WgmmaTypes,
    /// Block tile and pipeline depth.
    pub tile: MmaTile,
}

macro_rules! mma_entries {
    ($( ($name:ident, $t:ident, [$bm:literal, $bn:literal, $d:literal]) )*) => {
        &[$(MmaKernel {
            name: stringify!($name),
            types: WgmmaTypes::$t,
            tile: MmaTile { bm: $bm, bn: $bn, depth: $d },
        }),*]
    };
}

/// Every compiled stage-8 mixed-precision kernel ([`gemm_core::mma_menu!`]).
pub static MMA_KERNELS: &[MmaKernel] = gemm_core::mma_menu!(mma_entries);
