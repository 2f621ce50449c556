//! Stage 8, FP64 tensor cores (PTX ISA `mma.sync` .f64): warp tiles of
//! 16 x 8 x 8 mma tiles with fragments in two buffers, a cp.async pipeline,
//! rasterized blocks. f64 only.
//! Every compiled configuration, self-checked against cuBLAS (NaN-poisoned
//! C); prints ms, GFLOP/s, % of the FP64 tensor-core peak, ratio to cuBLAS.
//!
//! `cargo run --release --example 08_tensor_core [N | MxNxK]`

mod common;

use gemm::tuning::Stage;
use gemm::Element;

fn run<T: Element>(args: &common::Args) {
    common::run_stage::<T>(Stage::TensorCore, args);
}

fn main() {
    let args = common::args(4096);
    by_precision!(args, run);
}
