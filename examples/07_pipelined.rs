//! Stage 7, cp.async pipeline and warp tiling (seed 004's next steps, seed
//! 001's prefetching). Every compiled configuration, self-checked against
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
