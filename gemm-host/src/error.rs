//! The library's one error type.

use cudarc::cublas::result::CublasError;
use cudarc::driver::DriverError;
use gemm_core::{ConfigError, KernelConfig, LimitError, Operand, Precision, ShapeError};

/// Everything that can go wrong in a call. Messages name the numbers
/// (shapes, limits, the menu of configurations). When a call returns an
/// error, the output matrix is untouched.
///
/// `Debug` prints the message too (with its causes), so
/// `fn main() -> Result<(), gemm::Error>` reports something a person can
/// read. cudarc's driver errors convert with `?` ([`From`]).
///
/// ```
/// let a = gemm::Matrix::<f64>::zeros(3, 4);
/// let mut c = gemm::Matrix::<f64>::zeros(3, 5);
/// let e = gemm::dgemm(&a, &a, &mut c).unwrap_err();
/// assert_eq!(format!("{e:?}"), "shape mismatch: A is 3x4 but B is 3x4 (A's columns must equal B's rows)");
/// ```
#[non_exhaustive]
pub enum Error {
    /// The operands' shapes, leading dimensions or storage do not fit together.
    Shape(ShapeError),
    /// The configuration asked of the builder does not exist.
    Config(ConfigError),
    /// The configuration made of the options given and the stage's defaults
    /// for the others does not exist; the message names the defaults.
    ConfigWithDefaults {
        /// What is wrong with the configuration.
        error: ConfigError,
        /// The options that were left at their defaults, with their values
        /// (e.g. "thread tile 8x8 (`.thread_tile(..)`)").
        defaults: String,
    },
    /// A device allocation failed for lack of memory.
    OutOfMemory {
        /// Bytes asked for.
        bytes: usize,
    },
    /// The memory budget set with [`crate::Gemm::memory_budget`] is below
    /// the least a host product needs (with a C of 16 bits k is kept whole,
    /// so the host path holds at least a row of A and a column of B per
    /// stream).
    MemoryBudget {
        /// The budget set.
        budget: usize,
        /// The least the product needs, in bytes.
        needed: usize,
    },
    /// A stream or buffer given by the caller belongs to another CUDA context
    /// than the device's.
    ContextMismatch {
        /// "the stream" or "the buffer".
        what: &'static str,
        /// The device's name.
        device: String,
    },
    /// The configuration exists but does not fit this device or problem.
    DeviceLimit {
        /// The configuration.
        config: KernelConfig,
        /// The device's name.
        device: String,
        /// Which limit.
        source: LimitError,
    },
    /// No compiled entry point serves this precision and configuration.
    NoKernel {
        /// Element type.
        precision: Precision,
        /// Configuration asked for.
        config: KernelConfig,
    },
    /// The CUDA driver library (libcuda) cannot be loaded: no NVIDIA driver.
    NoDriver,
    /// The driver is present but the asked-for device is not.
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// The device is older than the oldest PTX target (sm_80).
    UnsupportedDevice {
        /// Device name.
        name: String,
        /// Compute capability, major.
        major: i32,
        /// Compute capability, minor.
        minor: i32,
    },
    /// A product that cannot run here: its element types need hardware or
    /// options this call does not have (e.g. f16 on a GPU other than
    /// compute capability 9.0).
    Unsupported {
        /// The element types, e.g. "f16 x f16 -> f32".
        product: String,
        /// Why, with the numbers.
        why: String,
    },
    /// A fused epilogue's input ([`crate::Epilogue`]: a scale vector, the
    /// bias, the block scales) does not fit the product: too short, on
    /// another device, or of the wrong type.
    Epilogue {
        /// Which input, e.g. "the bias".
        what: &'static str,
        /// Why, with the numbers.
        why: String,
    },
    /// The row counts of a masked batch ([`crate::Gemm::run_masked_device`])
    /// do not fit it: fewer than one per problem, or on another device.
    RowCounts {
        /// Why, with the numbers.
        why: String,
    },
    /// The split of k asked for with `.split_k(n)` cannot be run.
    SplitK {
        /// Slices asked for.
        slices: u32,
        /// Why not.
        why: &'static str,
    },
    /// Packing asked for with `.pack(true)` cannot be done.
    Pack {
        /// Why not.
        why: &'static str,
    },
    /// The operands of a batch hold different numbers of matrices.
    BatchCount {
        /// Matrices of A.
        a: usize,
        /// Matrices of B.
        b: usize,
        /// Matrices of C.
        c: usize,
    },
    /// A batch's storage is shorter than its matrices need. The message
    /// names the operand of a product ("the A batch (...) needs ...") or,
    /// from a constructor ([`crate::Strided::new`]), just "the batch".
    BatchStorage {
        /// Which operand ([`Operand::Matrix`] from a constructor).
        operand: Operand,
        /// Matrices.
        count: usize,
        /// Elements between consecutive matrices.
        stride: usize,
        /// Elements needed.
        needed: usize,
        /// Elements held.
        len: usize,
    },
    /// Two matrices of an output batch share elements (a strided C whose
    /// stride is too small, or two problems writing the same memory).
    BatchOverlap {
        /// The first of the two.
        first: usize,
        /// The second.
        second: usize,
    },
    /// A problem of a pointer-array or grouped batch is invalid.
    Problem {
        /// Its index in the lists.
        index: usize,
        /// What is wrong with it.
        source: Box<Error>,
    },
    /// The problems of a grouped launch do not share their storage orders
    /// (one launch runs one PTX module, i.e. one layout combination).
    MixedLayouts {
        /// The first problem that differs.
        index: usize,
        /// Problem 0's A, B and C layouts, as "A row, B col, C row".
        expected: String,
        /// This problem's.
        found: String,
    },
    /// A pointer-array batch whose matrices differ in shape (use a grouped batch).
    ShapeVaries {
        /// The first matrix that differs.
        index: usize,
        /// Matrix 0's m x n x k.
        expected: String,
        /// This one's.
        found: String,
    },
    /// Operands live on different devices.
    DeviceMismatch(String, String),
    /// A device group ([`crate::Gemm::devices`]) or process grid that cannot
    /// run the call (a device listed twice, an empty group, a grid whose
    /// size is not the number of GPUs); found before any launch.
    DeviceGroup {
        /// What is wrong, with the numbers.
        why: String,
    },
    /// Distributed matrices whose layouts do not fit the call (shapes,
    /// block sizes or process grids that differ); found before any launch.
    Distribution {
        /// What is wrong, with the numbers.
        why: String,
    },
    /// A collective (NCCL) call failed, or did not finish within the grid's
    /// timeout, on one rank: the call ended on every rank this process
    /// drives, and the communicators were aborted (the grid cannot be used
    /// again; make a new one).
    Collective {
        /// The rank that failed.
        rank: usize,
        /// What the library was doing.
        call: &'static str,
        /// NCCL's or the driver's message, or the timeout.
        why: String,
    },
    /// The cuBLAS library cannot be loaded (only needed for the reference column).
    NoCublas,
    /// A CUDA driver call failed.
    Driver {
        /// What the library was doing.
        call: &'static str,
        /// The driver's error code.
        source: DriverError,
    },
    /// A cuBLAS call failed.
    Cublas {
        /// What the library was doing.
        call: &'static str,
        /// cuBLAS's status.
        source: CublasError,
    },
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Shape(error) => core::fmt::Display::fmt(error, f),
            Error::Config(error) => write!(f, "invalid configuration: {error}"),
            Error::ConfigWithDefaults { error, defaults } => write!(
                f,
                "invalid configuration: {error} ({defaults} not set, so the stage default; set it with the builder to change it)"
            ),
            Error::OutOfMemory { bytes } => write!(f, "out of device memory: could not allocate {bytes} bytes"),
            Error::MemoryBudget { budget, needed } => write!(
                f,
                "a memory budget of {budget} bytes is too small for this product: the host path needs at least {needed} bytes (k is kept whole for a C of 16 bits)"
            ),
            Error::ContextMismatch { what, device } => {
                write!(f, "{what} belongs to another CUDA context than {device}'s")
            }
            Error::DeviceLimit { config, device, source } => write!(f, "{config} does not fit {device}: {source}"),
            Error::NoKernel { precision, config } => write!(
                f,
                "no {} kernel is compiled for {config} (see gemm::tuning::registry::ENTRY_POINTS)",
                precision.name()
            ),
            Error::NoDriver => f.write_str(
                "no CUDA driver: libcuda could not be loaded (an NVIDIA driver is needed to run on the GPU)",
            ),
            Error::NoDevice { ordinal, count } => {
                write!(f, "no CUDA device with ordinal {ordinal}: the driver reports {count} device(s)")
            }
            Error::UnsupportedDevice { name, major, minor } => {
                write!(f, "{name} has compute capability {major}.{minor}; gemm's kernels need 8.0 or newer")
            }
            Error::Unsupported { product, why } => write!(f, "{product} products: {why}"),
            Error::Epilogue { what, why } => write!(f, "{what} of the fused epilogue: {why}"),
            Error::RowCounts { why } => write!(f, "the row counts of the masked batch: {why}"),
            Error::SplitK { slices, why } => write!(f, "split-K into {slices} slices is not possible: {why}"),
            Error::Pack { why } => write!(f, "packing the operands is not possible: {why}"),
            Error::BatchCount { a, b, c } => write!(f, "batch counts differ: A has {a} matrices, B {b}, C {c}"),
            Error::BatchStorage { operand, count, stride, needed, len } => write!(
                f,
                "{} ({count} matrices {stride} elements apart) needs {needed} elements, but its storage holds {len}",
                batch_name(*operand)
            ),
            Error::BatchOverlap { first, second } => write!(
                f,
                "matrices {first} and {second} of the C batch overlap in memory: each product needs its own output"
            ),
            Error::Problem { index, source } => write!(f, "problem {index} of the batch: {source}"),
            Error::MixedLayouts { index, expected, found } => write!(
                f,
                "problem {index} stores its operands as {found}, problem 0 as {expected}: a grouped batch needs one layout combination (kernel form) throughout"
            ),
            Error::ShapeVaries { index, expected, found } => write!(
                f,
                "matrix {index} of the pointer-array batch is {found}, matrix 0 is {expected}: all must have one shape (a grouped batch takes any shapes)"
            ),
            Error::DeviceMismatch(first, second) => {
                write!(f, "operands live on different devices ({first} and {second})")
            }
            Error::DeviceGroup { why } => write!(f, "device group: {why}"),
            Error::Distribution { why } => write!(f, "distributed matrices: {why}"),
            Error::Collective { rank, call, why } => {
                write!(f, "collective `{call}` failed on rank {rank}: {why} (the grid's communicators were aborted)")
            }
            Error::NoCublas => {
                f.write_str("cuBLAS could not be loaded (libcublas is needed for the cuBLAS comparison)")
            }
            Error::Driver { call, source } => write!(f, "CUDA driver call `{call}` failed: {source}"),
            Error::Cublas { call, source } => write!(f, "cuBLAS call `{call}` failed: {source}"),
        }
    }
}

/// The cause: the wrapped error of `Config`, `DeviceLimit`, `Problem`,
/// `Driver` and `Cublas`; `Shape` is transparent, so its cause is the shape
/// error's own (none).
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Shape(error) => std::error::Error::source(error),
            Error::Config(error) => Some(error),
            Error::DeviceLimit { source, .. } => Some(source),
            Error::Problem { source, .. } => Some(source),
            Error::Driver { source, .. } => Some(source),
            Error::Cublas { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<ShapeError> for Error {
    fn from(error: ShapeError) -> Self {
        Error::Shape(error)
    }
}

impl From<ConfigError> for Error {
    fn from(error: ConfigError) -> Self {
        Error::Config(error)
    }
}

/// "the A batch", or "the batch" for a batch not yet an operand.
fn batch_name(operand: Operand) -> String {
    match operand {
        Operand::Matrix => "the batch".to_string(),
        operand => format!("the {operand} batch"),
    }
}

impl core::fmt::Debug for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The message; variants that wrap a cause already print it.
        write!(f, "{self}")
    }
}

/// A cudarc driver error from a user's own call (e.g. `stream.clone_htod(..)?`
/// in a function returning `gemm::Error`).
impl From<DriverError> for Error {
    fn from(source: DriverError) -> Self {
        Error::Driver { call: "a cudarc call", source }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::cublas::sys::cublasStatus_t;
    use cudarc::driver::sys::CUresult;
    use gemm_core::Stage;
    use std::error::Error as _;

    const INNER: ShapeError = ShapeError::InnerDimension { a_rows: 3, a_cols: 4, b_rows: 5, b_cols: 6 };
    const EMPTY: ConfigError = ConfigError::EmptyBlock { x: 0, y: 4 };
    const SMEM: LimitError = LimitError::SharedMemory { requested: 300_000, limit: 232_448 };

    /// The causes of `e`, nearest first.
    fn causes(e: &Error) -> Vec<&(dyn std::error::Error + 'static)> {
        let mut causes = Vec::new();
        let mut next = e.source();
        while let Some(cause) = next {
            causes.push(cause);
            next = cause.source();
        }
        causes
    }

    #[test]
    fn shape_errors_are_transparent() {
        let e = Error::from(INNER);
        assert!(matches!(e, Error::Shape(INNER)));
        assert_eq!(e.to_string(), "shape mismatch: A is 3x4 but B is 5x6 (A's columns must equal B's rows)");
        assert_eq!(e.to_string(), INNER.to_string());
        // Debug prints the message too (see the doc example on `Error`).
        assert_eq!(format!("{e:?}"), e.to_string());
        // Transparent: the shape error's own cause, which it has not.
        assert!(e.source().is_none());
    }

    #[test]
    fn config_errors_are_the_cause() {
        let e = Error::from(EMPTY);
        assert!(matches!(e, Error::Config(EMPTY)));
        assert_eq!(e.to_string(), "invalid configuration: block 0x4 has no threads");
        let cause = e.source().expect("a configuration error is the cause");
        assert_eq!(cause.downcast_ref::<ConfigError>(), Some(&EMPTY));
        assert_eq!(cause.to_string(), "block 0x4 has no threads");
        assert!(cause.source().is_none());

        let why = ConfigError::PipelineDepth { stage: Stage::TensorCore, depth: 1 };
        let e = Error::ConfigWithDefaults { error: why, defaults: "pipeline depth 1".to_string() };
        assert_eq!(
            e.to_string(),
            "invalid configuration: stage 8 (tensor-core): a pipeline needs a depth of at least 2 (shared-memory \
             buffers), got 1 (pipeline depth 1 not set, so the stage default; set it with the builder to change it)"
        );
        // A field named `error` is not a cause.
        assert!(e.source().is_none());
    }

    #[test]
    fn fields_named_source_are_the_cause() {
        let limit = Error::DeviceLimit {
            config: KernelConfig::SmemTiled { tile: 16 },
            device: "NVIDIA H100".to_string(),
            source: SMEM,
        };
        assert_eq!(
            limit.to_string(),
            "tile 16x16 does not fit NVIDIA H100: 300000 bytes of shared memory per block; this device allows 232448"
        );
        assert_eq!(limit.source().and_then(|s| s.downcast_ref::<LimitError>()), Some(&SMEM));

        // A problem's cause is the boxed error, whose cause is in turn its own.
        let e = Error::Problem { index: 9, source: Box::new(Error::Problem { index: 2, source: Box::new(limit) }) };
        assert_eq!(
            e.to_string(),
            "problem 9 of the batch: problem 2 of the batch: tile 16x16 does not fit NVIDIA H100: 300000 bytes of \
             shared memory per block; this device allows 232448"
        );
        let chain: Vec<String> = causes(&e).iter().map(|s| s.to_string()).collect();
        assert_eq!(
            chain,
            [
                "problem 2 of the batch: tile 16x16 does not fit NVIDIA H100: 300000 bytes of shared memory per \
                 block; this device allows 232448",
                "tile 16x16 does not fit NVIDIA H100: 300000 bytes of shared memory per block; this device allows \
                 232448",
                "300000 bytes of shared memory per block; this device allows 232448",
            ]
        );
        // The cause is the `Box<Error>` itself (as thiserror gave it), not the error in it.
        assert!(e.source().is_some_and(|s| s.is::<Box<Error>>()));
        assert!(causes(&e).last().is_some_and(|s| s.is::<LimitError>()));

        let status = CublasError(cublasStatus_t::CUBLAS_STATUS_INVALID_VALUE);
        let e = Error::Cublas { call: "cublasDgemm_v2", source: status };
        assert_eq!(e.to_string(), "cuBLAS call `cublasDgemm_v2` failed: CublasError(CUBLAS_STATUS_INVALID_VALUE)");
        assert_eq!(e.source().and_then(|s| s.downcast_ref::<CublasError>()), Some(&status));

        // (A driver error's message asks libcuda, so only its cause is checked.)
        let code = DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
        let e = Error::from(code);
        assert!(matches!(e, Error::Driver { call: "a cudarc call", .. }));
        assert_eq!(e.source().and_then(|s| s.downcast_ref::<DriverError>()), Some(&code));
    }

    #[test]
    fn plain_messages() {
        let e = Error::NoKernel { precision: Precision::F64, config: KernelConfig::SmemTiled { tile: 16 } };
        assert_eq!(
            e.to_string(),
            "no f64 kernel is compiled for tile 16x16 (see gemm::tuning::registry::ENTRY_POINTS)"
        );
        let e = Error::BatchStorage { operand: Operand::A, count: 4, stride: 10, needed: 40, len: 39 };
        assert_eq!(
            e.to_string(),
            "the A batch (4 matrices 10 elements apart) needs 40 elements, but its storage holds 39"
        );
        let e = Error::BatchStorage { operand: Operand::Matrix, count: 4, stride: 10, needed: 40, len: 39 };
        assert_eq!(
            e.to_string(),
            "the batch (4 matrices 10 elements apart) needs 40 elements, but its storage holds 39"
        );
        let e = Error::DeviceMismatch("GPU 0".to_string(), "GPU 1".to_string());
        assert_eq!(e.to_string(), "operands live on different devices (GPU 0 and GPU 1)");
        assert_eq!(
            Error::NoDriver.to_string(),
            "no CUDA driver: libcuda could not be loaded (an NVIDIA driver is needed to run on the GPU)"
        );
        for e in [e, Error::NoDriver, Error::NoCublas, Error::OutOfMemory { bytes: 1 }] {
            assert!(e.source().is_none());
        }
    }
}
