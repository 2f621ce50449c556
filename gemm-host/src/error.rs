//! The library's one error type.

use cudarc::cublas::result::CublasError;
use cudarc::driver::DriverError;
use gemm_core::{ConfigError, KernelConfig, LimitError, Precision, ShapeError};
use thiserror::Error;

/// Everything that can go wrong in a call. Messages name the numbers
/// (shapes, limits, the menu of configurations). When a call returns an
/// error, the output matrix is untouched.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The operands' shapes, leading dimensions or storage do not fit together.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// The configuration asked of the builder does not exist.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// The configuration exists but does not fit this device or problem.
    #[error("{config} does not fit {device}: {source}")]
    DeviceLimit {
        /// The configuration.
        config: KernelConfig,
        /// The device's name.
        device: String,
        /// Which limit.
        #[source]
        source: LimitError,
    },
    /// No compiled entry point serves this precision and configuration.
    #[error("no {} kernel is compiled for {config} (see gemm::registry::ENTRY_POINTS)", .precision.name())]
    NoKernel {
        /// Element type.
        precision: Precision,
        /// Configuration asked for.
        config: KernelConfig,
    },
    /// The CUDA driver library (libcuda) cannot be loaded: no NVIDIA driver.
    #[error("no CUDA driver: libcuda could not be loaded (an NVIDIA driver is needed to run on the GPU)")]
    NoDriver,
    /// The driver is present but the asked-for device is not.
    #[error("no CUDA device with ordinal {ordinal}: the driver reports {count} device(s)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// The device is older than the oldest PTX target (sm_80).
    #[error("{name} has compute capability {major}.{minor}; gemm's kernels need 8.0 or newer")]
    UnsupportedDevice {
        /// Device name.
        name: String,
        /// Compute capability, major.
        major: i32,
        /// Compute capability, minor.
        minor: i32,
    },
    /// Operands live on different devices.
    #[error("operands live on different devices ({0} and {1})")]
    DeviceMismatch(String, String),
    /// The cuBLAS library cannot be loaded (only needed for the reference column).
    #[error("cuBLAS could not be loaded (libcublas is needed for the cuBLAS comparison)")]
    NoCublas,
    /// A CUDA driver call failed.
    #[error("CUDA driver call `{call}` failed: {source}")]
    Driver {
        /// What the library was doing.
        call: &'static str,
        /// The driver's error code.
        #[source]
        source: DriverError,
    },
    /// A cuBLAS call failed.
    #[error("cuBLAS call `{call}` failed: {source}")]
    Cublas {
        /// What the library was doing.
        call: &'static str,
        /// cuBLAS's status.
        #[source]
        source: CublasError,
    },
}

/// Attaches the name of the driver call to a cudarc result.
pub(crate) trait DriverContext<T> {
    fn during(self, call: &'static str) -> Result<T, Error>;
}

impl<T> DriverContext<T> for Result<T, DriverError> {
    fn during(self, call: &'static str) -> Result<T, Error> {
        self.map_err(|source| Error::Driver { call, source })
    }
}
