//! The library's one error type.

use cudarc::cublas::result::CublasError;
use cudarc::driver::DriverError;
use gemm_core::{ConfigError, KernelConfig, LimitError, Operand, Precision, ShapeError};
use thiserror::Error;

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
#[derive(Error)]
#[non_exhaustive]
pub enum Error {
    /// The operands' shapes, leading dimensions or storage do not fit together.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// The configuration asked of the builder does not exist.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// The configuration made of the options given and the stage's defaults
    /// for the others does not exist; the message names the defaults.
    #[error("invalid configuration: {error} ({defaults} not set, so the stage default; set it with the builder to change it)")]
    ConfigWithDefaults {
        /// What is wrong with the configuration.
        error: ConfigError,
        /// The options that were left at their defaults, with their values
        /// (e.g. "thread tile 8x8 (`.thread_tile(..)`)").
        defaults: String,
    },
    /// A device allocation failed for lack of memory.
    #[error("out of device memory: could not allocate {bytes} bytes")]
    OutOfMemory {
        /// Bytes asked for.
        bytes: usize,
    },
    /// The memory budget set with [`crate::Gemm::memory_budget`] is below
    /// the least a host product needs (with a C of 16 bits k is kept whole,
    /// so the host path holds at least a row of A and a column of B per
    /// stream).
    #[error("a memory budget of {budget} bytes is too small for this product: the host path needs at least {needed} bytes (k is kept whole for a C of 16 bits)")]
    MemoryBudget {
        /// The budget set.
        budget: usize,
        /// The least the product needs, in bytes.
        needed: usize,
    },
    /// A stream or buffer given by the caller belongs to another CUDA context
    /// than the device's.
    #[error("{what} belongs to another CUDA context than {device}'s")]
    ContextMismatch {
        /// "the stream" or "the buffer".
        what: &'static str,
        /// The device's name.
        device: String,
    },
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
    #[error("no {} kernel is compiled for {config} (see gemm::tuning::registry::ENTRY_POINTS)", .precision.name())]
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
    /// A product that cannot run here: its element types need hardware or
    /// options this call does not have (e.g. f16 on a GPU other than
    /// compute capability 9.0).
    #[error("{product} products: {why}")]
    Unsupported {
        /// The element types, e.g. "f16 x f16 -> f32".
        product: String,
        /// Why, with the numbers.
        why: String,
    },
    /// The split of k asked for with `.split_k(n)` cannot be run.
    #[error("split-K into {slices} slices is not possible: {why}")]
    SplitK {
        /// Slices asked for.
        slices: u32,
        /// Why not.
        why: &'static str,
    },
    /// Packing asked for with `.pack(true)` cannot be done.
    #[error("packing the operands is not possible: {why}")]
    Pack {
        /// Why not.
        why: &'static str,
    },
    /// The operands of a batch hold different numbers of matrices.
    #[error("batch counts differ: A has {a} matrices, B {b}, C {c}")]
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
    #[error("{} ({count} matrices {stride} elements apart) needs {needed} elements, but its storage holds {len}", batch_name(*.operand))]
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
    #[error("matrices {first} and {second} of the C batch overlap in memory: each product needs its own output")]
    BatchOverlap {
        /// The first of the two.
        first: usize,
        /// The second.
        second: usize,
    },
    /// A problem of a pointer-array or grouped batch is invalid.
    #[error("problem {index} of the batch: {source}")]
    Problem {
        /// Its index in the lists.
        index: usize,
        /// What is wrong with it.
        #[source]
        source: Box<Error>,
    },
    /// The problems of a grouped launch do not share their storage orders
    /// (one launch runs one PTX module, i.e. one layout combination).
    #[error("problem {index} stores its operands as {found}, problem 0 as {expected}: a grouped batch needs one layout combination (kernel form) throughout")]
    MixedLayouts {
        /// The first problem that differs.
        index: usize,
        /// Problem 0's A, B and C layouts, as "A row, B col, C row".
        expected: String,
        /// This problem's.
        found: String,
    },
    /// A pointer-array batch whose matrices differ in shape (use a grouped batch).
    #[error("matrix {index} of the pointer-array batch is {found}, matrix 0 is {expected}: all must have one shape (a grouped batch takes any shapes)")]
    ShapeVaries {
        /// The first matrix that differs.
        index: usize,
        /// Matrix 0's m x n x k.
        expected: String,
        /// This one's.
        found: String,
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
