//! Stage 7, cp.async pipeline and warp tiling (the next steps of "Optimizing
//! matrix multiplication on an RTX 3050"; the prefetching of Volkov,
//! "Optimizing GPU codes"). Every compiled configuration, self-checked against
//! cuBLAS (NaN-poisoned C); prints ms, GFLOP/s, % of the FMA peak, ratio to
//! cuBLAS.
//!
//! `cargo run --release --example 07_pipelined [N | MxNxK] [--f32]`

mod common;

use gemm::tuning::Stage;
use gemm::Element;

fn run<T: Element>(args: &common::Args) {
    common::run_stage::<T>(Stage::Pipelined, args);
}

fn main() {
    let args = common::args(4096);
    by_precision!(args, run);
}
