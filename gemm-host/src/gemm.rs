//! The `Gemm` builder and the one-call functions `dgemm` and `sgemm`.

use crate::device::{default_device, Device};
use crate::element::Element;
use crate::error::{DriverContext, Error};
use crate::launch::{checked_geometry, launch};
use crate::matrix::{DeviceMatrix, Matrix};
use crate::registry::entry_point;
use crate::tuning::{Plan, PlanSource};
use gemm_core::config::OPT_TILE_SIZES;
use gemm_core::{BlockDim, BlockTile, ConfigError, GemmDims, KernelConfig, Precision, Stage, ThreadTile, WarpTile};
use std::sync::Arc;

/// Outputs per thread of stage 4 when none is given.
pub const DEFAULT_OUTPUTS_PER_THREAD: u32 = 16;

/// Block shape of the naive stages when none is given.
pub const DEFAULT_NAIVE_BLOCK: BlockDim = BlockDim::new(32, 8);

/// The configuration a stage runs with when only `.stage(s)` is given (and the
/// base that partial options such as `.block_tile(..)` modify): for stages
/// 3-8 the configuration the stage's example reports first.
pub const fn stage_default(stage: Stage, precision: Precision) -> KernelConfig {
    let f64 = matches!(precision, Precision::F64);
    match stage {
        Stage::Naive => KernelConfig::Naive { block: DEFAULT_NAIVE_BLOCK },
        Stage::Coalesced => KernelConfig::Coalesced { block: DEFAULT_NAIVE_BLOCK },
        Stage::SmemTiled => KernelConfig::SmemTiled { tile: 32 },
        Stage::OutputsPerThread => {
            KernelConfig::OutputsPerThread { tile: OPT_TILE_SIZES[0], outputs: DEFAULT_OUTPUTS_PER_THREAD }
        }
        Stage::RegisterTiled => {
            KernelConfig::RegisterTiled { block: BlockTile::new(128, 128, 16), thread: ThreadTile::new(8, 8) }
        }
        Stage::Vectorized => {
            KernelConfig::Vectorized { block: BlockTile::new(128, 128, 16), thread: ThreadTile::new(8, 8) }
        }
        Stage::Pipelined if f64 => KernelConfig::Pipelined {
            block: BlockTile::new(128, 64, 16),
            warp: WarpTile::new(32, 32),
            thread: ThreadTile::new(4, 8),
            stages: 3,
        },
        Stage::Pipelined => KernelConfig::Pipelined {
            block: BlockTile::new(128, 128, 16),
            warp: WarpTile::new(64, 32),
            thread: ThreadTile::new(8, 8),
            stages: 3,
        },
        _ => KernelConfig::TensorCore { block: BlockTile::new(128, 64, 16), warp: WarpTile::new(64, 32), stages: 3 },
    }
}

/// `C = A * B` in f64 on the default device with the default kernel.
/// A is m x k, B is k x n, C is m x n (row-major, any leading dimensions).
///
/// # Errors
/// [`Error::Shape`] for mismatched shapes; [`Error::NoDriver`] /
/// [`Error::NoDevice`] without a GPU; [`Error::Driver`] on driver failure.
/// C is untouched on error.
pub fn dgemm(a: &Matrix<f64>, b: &Matrix<f64>, c: &mut Matrix<f64>) -> Result<(), Error> {
    Gemm::new().run(a, b, c)
}

/// `C = A * B` in f32 on the default device with the default kernel
/// (FFMA on the CUDA cores, no TF32). Shapes and errors as [`dgemm`].
///
/// # Errors
/// As [`dgemm`].
pub fn sgemm(a: &Matrix<f32>, b: &Matrix<f32>, c: &mut Matrix<f32>) -> Result<(), Error> {
    Gemm::new().run(a, b, c)
}

/// Builds and runs one GEMM, `C <- alpha * A * B + beta * C` (defaults
/// alpha = 1, beta = 0, so `C = A * B`; with beta = 0, C is not read).
///
/// Choose a stage and its configuration, or leave them to the defaults:
/// - `.stage(s)` picks a [`Stage`] (its other options default to
///   [`stage_default`]); without it the stage follows from the options given:
///   `outputs_per_thread` means stage 4, `tile_size` stage 3, `block_dim`
///   stage 2, `warp_tile` without `thread_tile` stage 8, `warp_tile` or
///   `pipeline_stages` stage 7, `block_tile` or `thread_tile` stage 5; none of
///   them, the measured default for the problem ([`Gemm::plan`]).
/// - `.block_dim(x, y)` (stages 1, 2): any x * y <= 1024.
/// - `.tile_size(t)` (stage 3: 8, 16, 32; stage 4: 32).
/// - `.outputs_per_thread(o)` (stage 4: 1, 2, 4, 8, 16).
/// - `.block_tile(bm, bn, bk)` (stages 5-8), `.thread_tile(tm, tn)` (5-7),
///   `.warp_tile(wm, wn)`, `.pipeline_stages(s)` (7, 8): a configuration of
///   the compiled menu (`gemm::registry::stage_configs`); shapes that cannot
///   work name the two numbers that disagree, well-formed ones that are not
///   compiled list the menu.
/// - `.kernel(config)`: exactly this configuration.
///
/// An option that does not apply to the stage, or a configuration that is not
/// compiled, is an [`Error::Config`] before anything touches the GPU
/// ([`Gemm::config`] checks without running).
#[derive(Clone, Debug)]
pub struct Gemm {
    stage: Option<Stage>,
    kernel: Option<KernelConfig>,
    block: Option<BlockDim>,
    tile: Option<u32>,
    outputs: Option<u32>,
    block_tile: Option<BlockTile>,
    warp_tile: Option<WarpTile>,
    thread_tile: Option<ThreadTile>,
    pipeline_stages: Option<u32>,
    alpha: f64,
    beta: f64,
    device: Option<Arc<Device>>,
}

impl Default for Gemm {
    fn default() -> Self {
        Self::new()
    }
}

impl Gemm {
    /// The default GEMM: `C = A * B` with the default kernel on the default device.
    pub fn new() -> Self {
        Gemm {
            stage: None,
            kernel: None,
            block: None,
            tile: None,
            outputs: None,
            block_tile: None,
            warp_tile: None,
            thread_tile: None,
            pipeline_stages: None,
            alpha: 1.0,
            beta: 0.0,
            device: None,
        }
    }

    /// Runs a chosen stage.
    pub fn stage(mut self, stage: Stage) -> Self {
        self.stage = Some(stage);
        self
    }

    /// Threads per block (x, y) of the naive stages 1 and 2.
    pub fn block_dim(mut self, x: u32, y: u32) -> Self {
        self.block = Some(BlockDim::new(x, y));
        self
    }

    /// Tile size T (T x T tiles) of stages 3 and 4.
    pub fn tile_size(mut self, tile: u32) -> Self {
        self.tile = Some(tile);
        self
    }

    /// Outputs per thread of stage 4.
    pub fn outputs_per_thread(mut self, outputs: u32) -> Self {
        self.outputs = Some(outputs);
        self
    }

    /// Block tile BM x BN x BK of stages 5-8.
    pub fn block_tile(mut self, bm: u32, bn: u32, bk: u32) -> Self {
        self.block_tile = Some(BlockTile::new(bm, bn, bk));
        self
    }

    /// Thread tile TM x TN of stages 5-7.
    pub fn thread_tile(mut self, tm: u32, tn: u32) -> Self {
        self.thread_tile = Some(ThreadTile::new(tm, tn));
        self
    }

    /// Warp tile WM x WN of stages 7 and 8.
    pub fn warp_tile(mut self, wm: u32, wn: u32) -> Self {
        self.warp_tile = Some(WarpTile::new(wm, wn));
        self
    }

    /// Pipeline depth (shared-memory buffers) of stages 7 and 8.
    pub fn pipeline_stages(mut self, stages: u32) -> Self {
        self.pipeline_stages = Some(stages);
        self
    }

    /// Runs exactly `config` (any [`KernelConfig`]; other kernel options are
    /// then an error).
    pub fn kernel(mut self, config: KernelConfig) -> Self {
        self.kernel = Some(config);
        self
    }

    /// Scale of `A * B` (default 1). For f32 it is rounded to f32.
    pub fn alpha(mut self, alpha: f64) -> Self {
        self.alpha = alpha;
        self
    }

    /// Scale of C's old value (default 0: C is then not read).
    pub fn beta(mut self, beta: f64) -> Self {
        self.beta = beta;
        self
    }

    /// Runs on `device` instead of the default device.
    pub fn device(mut self, device: &Arc<Device>) -> Self {
        self.device = Some(device.clone());
        self
    }

    /// The configuration this builder will run for f64 ([`Gemm::config_for`]).
    ///
    /// # Errors
    /// As [`Gemm::config_for`].
    pub fn config(&self) -> Result<KernelConfig, Error> {
        self.config_for(Precision::F64)
    }

    /// The configuration chosen with the builder's options for `precision`,
    /// checked against the compiled menu (not yet against a device or a
    /// problem size); `Ok(None)` when no kernel option was given, so the
    /// kernel is chosen per problem by [`Gemm::plan`].
    ///
    /// # Errors
    /// [`Error::Config`] when an option does not apply to the stage or the
    /// configuration is not compiled; [`Error::NoKernel`] when it is compiled
    /// only for the other precision.
    pub fn chosen_config(&self, precision: Precision) -> Result<Option<KernelConfig>, Error> {
        let stage = match (self.stage, self.kernel) {
            (_, Some(config)) => {
                let any_option = self.stage.is_some_and(|s| s != config.stage())
                    || self.block.is_some()
                    || self.tile.is_some()
                    || self.outputs.is_some()
                    || self.block_tile.is_some()
                    || self.warp_tile.is_some()
                    || self.thread_tile.is_some()
                    || self.pipeline_stages.is_some();
                if any_option {
                    return Err(Error::Config(ConfigError::OptionNotForStage {
                        option: "kernel",
                        stage: config.stage(),
                    }));
                }
                entry_point(precision, config)?;
                return Ok(Some(config));
            }
            (Some(s), None) => s,
            (None, None) if self.outputs.is_some() => Stage::OutputsPerThread,
            (None, None) if self.tile.is_some() => Stage::SmemTiled,
            (None, None) if self.block.is_some() => Stage::Coalesced,
            (None, None) if self.warp_tile.is_some() && self.thread_tile.is_none() => Stage::TensorCore,
            (None, None) if self.warp_tile.is_some() || self.pipeline_stages.is_some() => Stage::Pipelined,
            (None, None) if self.block_tile.is_some() || self.thread_tile.is_some() => Stage::RegisterTiled,
            (None, None) => return Ok(None),
        };
        let reject = |option: &'static str| Err(Error::Config(ConfigError::OptionNotForStage { option, stage }));
        let takes = |option: &'static str| match option {
            "block_dim" => matches!(stage, Stage::Naive | Stage::Coalesced),
            "tile_size" => matches!(stage, Stage::SmemTiled | Stage::OutputsPerThread),
            "outputs_per_thread" => stage == Stage::OutputsPerThread,
            "block_tile" => stage.number() >= 5,
            "thread_tile" => (5..=7).contains(&stage.number()),
            _ => matches!(stage, Stage::Pipelined | Stage::TensorCore), // warp_tile, pipeline_stages
        };
        for (option, given) in [
            ("block_dim", self.block.is_some()),
            ("tile_size", self.tile.is_some()),
            ("outputs_per_thread", self.outputs.is_some()),
            ("block_tile", self.block_tile.is_some()),
            ("thread_tile", self.thread_tile.is_some()),
            ("warp_tile", self.warp_tile.is_some()),
            ("pipeline_stages", self.pipeline_stages.is_some()),
        ] {
            if given && !takes(option) {
                return reject(option);
            }
        }
        let config = match stage_default(stage, precision) {
            KernelConfig::Naive { block } => KernelConfig::Naive { block: self.block.unwrap_or(block) },
            KernelConfig::Coalesced { block } => KernelConfig::Coalesced { block: self.block.unwrap_or(block) },
            KernelConfig::SmemTiled { tile } => KernelConfig::SmemTiled { tile: self.tile.unwrap_or(tile) },
            KernelConfig::OutputsPerThread { tile, outputs } => KernelConfig::OutputsPerThread {
                tile: self.tile.unwrap_or(tile),
                outputs: self.outputs.unwrap_or(outputs),
            },
            KernelConfig::RegisterTiled { block, thread } => KernelConfig::RegisterTiled {
                block: self.block_tile.unwrap_or(block),
                thread: self.thread_tile.unwrap_or(thread),
            },
            KernelConfig::Vectorized { block, thread } => KernelConfig::Vectorized {
                block: self.block_tile.unwrap_or(block),
                thread: self.thread_tile.unwrap_or(thread),
            },
            KernelConfig::Pipelined { block, warp, thread, stages } => KernelConfig::Pipelined {
                block: self.block_tile.unwrap_or(block),
                warp: self.warp_tile.unwrap_or(warp),
                thread: self.thread_tile.unwrap_or(thread),
                stages: self.pipeline_stages.unwrap_or(stages),
            },
            KernelConfig::TensorCore { block, warp, stages } => KernelConfig::TensorCore {
                block: self.block_tile.unwrap_or(block),
                warp: self.warp_tile.unwrap_or(warp),
                stages: self.pipeline_stages.unwrap_or(stages),
            },
            other => other,
        };
        entry_point(precision, config)?;
        Ok(Some(config))
    }

    /// The configuration this builder runs for `precision` on an m x n x k
    /// problem when no device is known: the chosen one, or else the
    /// measured table's choice for the default device ([`Gemm::plan`]).
    ///
    /// # Errors
    /// As [`Gemm::chosen_config`].
    pub fn config_for(&self, precision: Precision) -> Result<KernelConfig, Error> {
        match self.chosen_config(precision)? {
            Some(c) => Ok(c),
            None => Ok(crate::tuning::choose(None, precision, 4096, 4096, 4096).config),
        }
    }

    /// The kernel this builder runs for an m x n x k problem in `precision`
    /// and why: the configuration given with the options, or else the
    /// fastest configuration the ladder benchmark measured for the nearest
    /// shape on this device (or on the device it was measured on, when this
    /// one is not in the table); see [`Plan`].
    ///
    /// Uses the builder's device, else the default device when one is
    /// present; without a GPU it plans as for the measured device.
    ///
    /// # Errors
    /// As [`Gemm::chosen_config`].
    pub fn plan(&self, precision: Precision, m: usize, n: usize, k: usize) -> Result<Plan, Error> {
        if let Some(config) = self.chosen_config(precision)? {
            return Ok(Plan { config, source: PlanSource::Chosen });
        }
        let device = match &self.device {
            Some(d) => Some(d.clone()),
            None => default_device().ok(),
        };
        Ok(crate::tuning::choose(device.as_deref().map(Device::name), precision, m, n, k))
    }

    /// Runs `C <- alpha * A * B + beta * C` on host matrices: uploads A and B
    /// (and C when beta != 0), runs the kernel, waits, and writes C's elements
    /// back (its padding is left as it was).
    ///
    /// # Errors
    /// [`Error::Config`], [`Error::Shape`] (checked before the GPU is touched),
    /// [`Error::DeviceLimit`], [`Error::NoDriver`], [`Error::NoDevice`],
    /// [`Error::Driver`]. C is untouched on error.
    pub fn run<T: Element>(&self, a: &Matrix<T>, b: &Matrix<T>, c: &mut Matrix<T>) -> Result<(), Error> {
        let chosen = self.chosen_config(T::PRECISION)?;
        let dims = GemmDims::from_operands(
            a.dims(),
            a.as_slice().len(),
            b.dims(),
            b.as_slice().len(),
            c.dims(),
            c.as_slice().len(),
        )?;
        let device = match &self.device {
            Some(d) => d.clone(),
            None => default_device()?,
        };
        let config = config_on(chosen, &device, T::PRECISION, &dims);
        // Fail on device limits before any host-device copy.
        checked_geometry::<T>(&device, config, &dims)?;
        if dims.is_empty() {
            return Ok(());
        }
        let da = DeviceMatrix::from_host(&device, a)?;
        let db = DeviceMatrix::from_host(&device, b)?;
        let mut dc = if self.beta != 0.0 {
            DeviceMatrix::from_host(&device, c)?
        } else {
            // beta = 0: C is not read; the kernel writes every element.
            let len = c.as_slice().len().max(1);
            // SAFETY: every element the product reads of this buffer is first
            // written by the kernel (beta = 0 means C is never loaded); the
            // padding is never copied back.
            let data = unsafe { device.stream().alloc::<T>(len) }.during("cuMemAlloc")?;
            DeviceMatrix::from_raw(data, c.dims(), &device)
        };
        launch(
            &device,
            config,
            &dims,
            T::from_f64(self.alpha),
            da.buffer(),
            db.buffer(),
            T::from_f64(self.beta),
            dc.buffer_mut(),
        )?;
        device.synchronize()?;
        dc.copy_to_host(c)
    }

    /// Enqueues `C <- alpha * A * B + beta * C` on matrices already on the GPU,
    /// on their device's stream, and returns without waiting (as cuBLAS does):
    /// call [`Device::synchronize`] or copy C back to see the result and any
    /// error from the kernel.
    ///
    /// # Errors
    /// As [`Gemm::run`], plus [`Error::DeviceMismatch`] when the operands live
    /// on different devices (or not on the device set with [`Gemm::device`]).
    pub fn run_device<T: Element>(
        &self,
        a: &DeviceMatrix<T>,
        b: &DeviceMatrix<T>,
        c: &mut DeviceMatrix<T>,
    ) -> Result<(), Error> {
        let chosen = self.chosen_config(T::PRECISION)?;
        let dims =
            GemmDims::from_operands(a.dims(), a.storage_len(), b.dims(), b.storage_len(), c.dims(), c.storage_len())?;
        let device = c.device().clone();
        for other in [a.device(), b.device()].into_iter().chain(self.device.as_ref()) {
            if !Arc::ptr_eq(other, &device) {
                return Err(Error::DeviceMismatch(other.name().to_string(), device.name().to_string()));
            }
        }
        let config = config_on(chosen, &device, T::PRECISION, &dims);
        launch(
            &device,
            config,
            &dims,
            T::from_f64(self.alpha),
            a.buffer(),
            b.buffer(),
            T::from_f64(self.beta),
            c.buffer_mut(),
        )
    }
}

/// The configuration a call runs: the one chosen with the options, or else
/// the measured table's choice for this device and problem.
fn config_on(chosen: Option<KernelConfig>, device: &Device, precision: Precision, dims: &GemmDims) -> KernelConfig {
    chosen.unwrap_or_else(|| crate::tuning::choose(Some(device.name()), precision, dims.m, dims.n, dims.k).config)
}
