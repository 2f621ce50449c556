//! Stage 3, shared-memory tiling ("Double-Precision Matrix Multiply on CUDA",
//! a CSE 260 report, section 3.1; "CUDA basics part 2"): T x T tiles of A
//! and B in shared memory, T in {8, 16, 32}, coalesced loads.
//!
//! `cargo run --release --example 03_smem_tiled [N] [--f32]`

mod common;

use gemm::tuning::registry::stage_configs;
use gemm::tuning::Stage;
use gemm::Element;

fn run<T: Element>(args: &common::Args) {
    let (device, cublas) = common::open();
    let configs = stage_configs(Stage::SmemTiled, T::PRECISION);
    common::run_table::<T>(&device, &cublas, args, &configs);
}

fn main() {
    let args = common::args(4096);
    by_precision!(args, run);
}
