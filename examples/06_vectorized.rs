//! Stage 6, vectorized access ("Optimizing matrix multiplication on an RTX
//! 3050"): stage 5 with 16-byte global loads and stores, the A tile stored
//! k-major in shared memory, conflict-free shared
//! reads. Every compiled configuration, self-checked against cuBLAS (NaN-
//! poisoned C); prints ms, GFLOP/s, % of the FMA peak, ratio to cuBLAS.
//!
//! `cargo run --release --example 06_vectorized [N | MxNxK] [--f32]`

mod common;

use gemm::tuning::Stage;
use gemm::Element;

fn run<T: Element>(args: &common::Args) {
    common::run_stage::<T>(Stage::Vectorized, args);
}

fn main() {
    let args = common::args(4096);
    by_precision!(args, run);
}
