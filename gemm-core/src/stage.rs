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
}

impl Stage {
    /// Every stage, in ladder order.
    pub const ALL: [Stage; 4] = [Stage::Naive, Stage::Coalesced, Stage::SmemTiled, Stage::OutputsPerThread];

    /// The stage's number in the ladder (1-based).
    pub const fn number(self) -> u32 {
        match self {
            Stage::Naive => 1,
            Stage::Coalesced => 2,
            Stage::SmemTiled => 3,
            Stage::OutputsPerThread => 4,
        }
    }

    /// Short kebab-case name, used in file names, CSV columns and the CLI.
    pub const fn name(self) -> &'static str {
        match self {
            Stage::Naive => "naive",
            Stage::Coalesced => "coalesced",
            Stage::SmemTiled => "smem-tiled",
            Stage::OutputsPerThread => "outputs-per-thread",
        }
    }

    /// Title for tables and plots.
    pub const fn title(self) -> &'static str {
        match self {
            Stage::Naive => "Naive (one thread per element)",
            Stage::Coalesced => "Coalesced thread mapping",
            Stage::SmemTiled => "Shared-memory tiling",
            Stage::OutputsPerThread => "Several outputs per thread",
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
        }
    }

    /// The source document(s) the stage follows (files in `shared/seeds/`).
    pub const fn source(self) -> &'static str {
        match self {
            Stage::Naive => "seed 000 (section 2), seed 003",
            Stage::Coalesced => "seed 000 (section 3.1.3), seed 003",
            Stage::SmemTiled => "seed 000 (section 3.1), seed 003",
            Stage::OutputsPerThread => "seed 000 (section 3.2), seed 001",
        }
    }

    /// The stage with this number, if any.
    pub const fn from_number(number: u32) -> Option<Stage> {
        match number {
            1 => Some(Stage::Naive),
            2 => Some(Stage::Coalesced),
            3 => Some(Stage::SmemTiled),
            4 => Some(Stage::OutputsPerThread),
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
        assert_eq!(Stage::from_number(5), None);
    }
}
