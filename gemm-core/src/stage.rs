//! The optimization stages, in one place: number, name, PTX symbol prefix, source.
//!
//! Examples, benches, the README table and the kernel registry all read stage
//! names from [`Stage`] (CONVENTIONS.md, rule 1).

/// One rung of the optimization ladder. The number is the stage's place in the
/// README table and in the example file names (`examples/01_naive.rs`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Stage {
    /// Stage 1: one thread per element of C, block Bx x By chosen at run time;
    /// consecutive threads of a warp walk down a column of C (uncoalesced for
    /// row-major matrices).
    Naive,
    /// Stage 2: the naive kernel with consecutive threads along a row of C, so a
    /// warp reads consecutive elements of B and writes consecutive elements of C.
    Coalesced,
    /// Stage 3: square T x T tiles of A and B staged in shared memory.
    SmemTiled,
    /// Stage 4: 32 x 32 shared-memory tiles, each thread computing several
    /// outputs of one column of C from registers.
    OutputsPerThread,
    /// Stage 5: 2D register tiling: a BM x BN x BK block tile, each thread
    /// computing a TM x TN tile of C from registers (outer products).
    RegisterTiled,
    /// Stage 6: stage 5 with 16-byte global loads and stores, the A tile stored
    /// k-major in shared memory, and bank-conflict-free shared-memory reads.
    Vectorized,
    /// Stage 7: multi-stage shared-memory pipeline filled by `cp.async` while the
    /// previous tile is computed, and warp tiling.
    Pipelined,
    /// Stage 8: FP64 tensor cores (`mma.sync` f64), warp tiles, a cp.async
    /// pipeline, block rasterization, a vectorized epilogue. f64 only.
    TensorCore,
}

impl Stage {
    /// Every stage, in ladder order.
    pub const ALL: [Stage; 8] = [
        Stage::Naive,
        Stage::Coalesced,
        Stage::SmemTiled,
        Stage::OutputsPerThread,
        Stage::RegisterTiled,
        Stage::Vectorized,
        Stage::Pipelined,
        Stage::TensorCore,
    ];

    /// The stage's number in the ladder (1-based).
    pub const fn number(self) -> u32 {
        match self {
            Stage::Naive => 1,
            Stage::Coalesced => 2,
            Stage::SmemTiled => 3,
            Stage::OutputsPerThread => 4,
            Stage::RegisterTiled => 5,
            Stage::Vectorized => 6,
            Stage::Pipelined => 7,
            Stage::TensorCore => 8,
        }
    }

    /// Short kebab-case name, used in file names, CSV columns and the CLI.
    pub const fn name(self) -> &'static str {
        match self {
            Stage::Naive => "naive",
            Stage::Coalesced => "coalesced",
            Stage::SmemTiled => "smem-tiled",
            Stage::OutputsPerThread => "outputs-per-thread",
            Stage::RegisterTiled => "register-tiled",
            Stage::Vectorized => "vectorized",
            Stage::Pipelined => "pipelined",
            Stage::TensorCore => "tensor-core",
        }
    }

    /// Title for tables and plots.
    pub const fn title(self) -> &'static str {
        match self {
            Stage::Naive => "Naive (one thread per element)",
            Stage::Coalesced => "Coalesced thread mapping",
            Stage::SmemTiled => "Shared-memory tiling",
            Stage::OutputsPerThread => "Several outputs per thread",
            Stage::RegisterTiled => "2D register tiling",
            Stage::Vectorized => "16-byte vectorized access",
            Stage::Pipelined => "cp.async pipeline and warp tiling",
            Stage::TensorCore => "FP64 tensor cores (mma.sync)",
        }
    }

    /// Prefix of the stage's PTX entry points after `dgemm_`/`sgemm_`
    /// (e.g. `dgemm_tiled_t32`).
    pub const fn symbol(self) -> &'static str {
        match self {
            Stage::Naive => "naive",
            Stage::Coalesced => "coalesced",
            Stage::SmemTiled => "tiled",
            Stage::OutputsPerThread => "opt",
            Stage::RegisterTiled => "regtile",
            Stage::Vectorized => "vector",
            Stage::Pipelined => "pipelined",
            Stage::TensorCore => "mma",
        }
    }

    /// File stem of the stage's example (`examples/<stem>.rs`); its kernel
    /// module is `gemm-kernels/src/s<stem>.rs`.
    pub const fn file_stem(self) -> &'static str {
        match self {
            Stage::Naive => "01_naive",
            Stage::Coalesced => "02_coalesced",
            Stage::SmemTiled => "03_smem_tiled",
            Stage::OutputsPerThread => "04_outputs_per_thread",
            Stage::RegisterTiled => "05_register_tiled",
            Stage::Vectorized => "06_vectorized",
            Stage::Pipelined => "07_pipelined",
            Stage::TensorCore => "08_tensor_core",
        }
    }

    /// The source document(s) the stage follows (by author and title).
    pub const fn source(self) -> &'static str {
        match self {
            Stage::Naive => "Dharmaraj and Pampana, \"Double-Precision Matrix Multiply on CUDA\" (2014), section 2; 0x7df, \"CUDA basics part 2\" (2015)",
            Stage::Coalesced => "Dharmaraj and Pampana, \"Double-Precision Matrix Multiply on CUDA\" (2014), section 3.1.3; 0x7df, \"CUDA basics part 2\" (2015)",
            Stage::SmemTiled => "Dharmaraj and Pampana, \"Double-Precision Matrix Multiply on CUDA\" (2014), section 3.1; 0x7df, \"CUDA basics part 2\" (2015)",
            Stage::OutputsPerThread => "Dharmaraj and Pampana, \"Double-Precision Matrix Multiply on CUDA\" (2014), section 3.2; Volkov, \"Optimizing GPU codes\" (2009)",
            Stage::RegisterTiled => "\"Optimizing matrix multiplication on an RTX 3050\" (blog post), 2D tiling; Volkov, \"Optimizing GPU codes\" (2009)",
            Stage::Vectorized => "\"Optimizing matrix multiplication on an RTX 3050\" (blog post), vectorized loads",
            Stage::Pipelined => "\"Optimizing matrix multiplication on an RTX 3050\" (blog post), next steps; Volkov, \"Optimizing GPU codes\" (2009), prefetching",
            Stage::TensorCore => "PTX ISA, warp-level mma (m16n8k8 / m8n8k4 .f64); CUTLASS multistage",
        }
    }

    /// The stage with this number, if any.
    pub const fn from_number(number: u32) -> Option<Stage> {
        match number {
            1 => Some(Stage::Naive),
            2 => Some(Stage::Coalesced),
            3 => Some(Stage::SmemTiled),
            4 => Some(Stage::OutputsPerThread),
            5 => Some(Stage::RegisterTiled),
            6 => Some(Stage::Vectorized),
            7 => Some(Stage::Pipelined),
            8 => Some(Stage::TensorCore),
            _ => None,
        }
    }
}

impl core::fmt::Display for Stage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "stage {} ({})", self.number(), self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_are_in_order() {
        for (i, s) in Stage::ALL.iter().enumerate() {
            assert_eq!(s.number() as usize, i + 1);
            assert_eq!(Stage::from_number(s.number()), Some(*s));
        }
        assert_eq!(Stage::from_number(0), None);
        assert_eq!(Stage::from_number(9), None);
    }
}
