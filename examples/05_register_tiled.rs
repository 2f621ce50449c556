//! Stage 5, 2D register tiling ("Optimizing matrix multiplication on an RTX
//! 3050"; Volkov, "Optimizing GPU codes"): a BM x BN x BK block tile in shared
//! memory, each thread computing a TM x TN tile of C from registers.
//! Runs every compiled configuration (`cargo xtask`'s menu in
//! `gemm_core::kernel_menu!`), checks each against cuBLAS with C poisoned by
//! NaN, and prints ms, GFLOP/s, % of the FMA peak and the ratio to cuBLAS;
//! exits 1 on a wrong result.
//!
//! `cargo run --release --example 05_register_tiled [N | MxNxK] [--f32]`

mod common;

use gemm::tuning::Stage;
use gemm::Element;

fn run<T: Element>(args: &common::Args) {
    common::run_stage::<T>(Stage::RegisterTiled, args);
}

fn main() {
    let args = common::args(4096);
    by_precision!(args, run);
}
