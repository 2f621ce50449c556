//! The `Gemm` builder and the one-call functions `dgemm` and `sgemm`.

use crate::device::{default_device, Device};
use crate::element::Element;
use crate::error::{DriverContext, Error};
use crate::launch::{checked_geometry, launch};
use crate::matrix::{DeviceMatrix, Matrix};
use gemm_core::config::OPT_TILE_SIZES;
use gemm_core::{BlockDim, ConfigError, GemmDims, KernelConfig, Precision, Stage};
use std::sync::Arc;

/// The configuration `dgemm`/`sgemm` (and a [`Gemm`] given no options) use:
/// the fastest stage so far, stage 4, with 16 outputs per thread, the fastest
/// at N = 4096 for both precisions (`examples/04_outputs_per_thread.rs` on an
/// NVIDIA H200, 2026-11-21: f64 11.6 TFLOP/s against 10.9 with 8 outputs;
/// f32 21.3 against 20.1; see BENCHMARKS.md for the other sizes).
pub const fn default_config(_precision: Precision) -> KernelConfig {
    KernelConfig::OutputsPerThread { tile: OPT_TILE_SIZES[0], outputs: DEFAULT_OUTPUTS_PER_THREAD }
}

/// Outputs per thread of stage 4 when none is given (see [`default_config`]).
pub const DEFAULT_OUTPUTS_PER_THREAD: u32 = 16;

/// Block shape of the naive stages when none is given.
pub const DEFAULT_NAIVE_BLOCK: BlockDim = BlockDim::new(32, 8);

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
/// - `.stage(s)` picks a [`Stage`]; without it the stage follows from the
///   options given: `outputs_per_thread` means stage 4, `tile_size` stage 3,
///   `block_dim` stage 2; none of them, the default ([`default_config`]).
/// - `.block_dim(x, y)` (stages 1, 2): any x * y <= 1024.
/// - `.tile_size(t)` (stage 3: 8, 16, 32; stage 4: 32).
/// - `.outputs_per_thread(o)` (stage 4: 1, 2, 4, 8, 16).
///
/// An option that does not apply to the stage, or a configuration that is not
/// compiled, is an [`Error::Config`] before anything touches the GPU
/// ([`Gemm::config`] checks without running).
#[derive(Clone, Debug)]
pub struct Gemm {
    stage: Option<Stage>,
    block: Option<BlockDim>,
    tile: Option<u32>,
    outputs: Option<u32>,
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
        Gemm { stage: None, block: None, tile: None, outputs: None, alpha: 1.0, beta: 0.0, device: None }
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

    /// The configuration this builder will run for `precision`, checked
    /// against the compiled menu (but not yet against a device or a problem
    /// size).
    ///
    /// # Errors
    /// [`Error::Config`] when an option does not apply to the stage or the
    /// configuration is not compiled.
    pub fn config_for(&self, precision: Precision) -> Result<KernelConfig, Error> {
        let stage = match self.stage {
            Some(s) => s,
            None if self.outputs.is_some() => Stage::OutputsPerThread,
            None if self.tile.is_some() => Stage::SmemTiled,
            None if self.block.is_some() => Stage::Coalesced,
            None => return Ok(default_config(precision)),
        };
        let reject = |option: &'static str| Err(Error::Config(ConfigError::OptionNotForStage { option, stage }));
        let config = match stage {
            Stage::Naive | Stage::Coalesced => {
                if self.tile.is_some() {
                    return reject("tile_size");
                }
                if self.outputs.is_some() {
                    return reject("outputs_per_thread");
                }
                let block = self.block.unwrap_or(DEFAULT_NAIVE_BLOCK);
                if stage == Stage::Naive {
                    KernelConfig::Naive { block }
                } else {
                    KernelConfig::Coalesced { block }
                }
            }
            Stage::SmemTiled => {
                if self.block.is_some() {
                    return reject("block_dim");
                }
                if self.outputs.is_some() {
                    return reject("outputs_per_thread");
                }
                KernelConfig::SmemTiled { tile: self.tile.unwrap_or(32) }
            }
            _ => {
                if self.block.is_some() {
                    return reject("block_dim");
                }
                KernelConfig::OutputsPerThread {
                    tile: self.tile.unwrap_or(OPT_TILE_SIZES[0]),
                    outputs: self.outputs.unwrap_or(DEFAULT_OUTPUTS_PER_THREAD),
                }
            }
        };
        config.validate()?;
        Ok(config)
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
        let config = self.config_for(T::PRECISION)?;
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
        let config = self.config_for(T::PRECISION)?;
        let dims =
            GemmDims::from_operands(a.dims(), a.storage_len(), b.dims(), b.storage_len(), c.dims(), c.storage_len())?;
        let device = c.device().clone();
        for other in [a.device(), b.device()].into_iter().chain(self.device.as_ref()) {
            if !Arc::ptr_eq(other, &device) {
                return Err(Error::DeviceMismatch(other.name().to_string(), device.name().to_string()));
            }
        }
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
