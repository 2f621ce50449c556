//! Stage 4, several outputs per thread ("Double-Precision Matrix Multiply on
//! CUDA", a CSE 260 report, section 3.2; Volkov, "Optimizing GPU codes"):
//! 32 x 32 tiles, each thread computing 1, 2, 4, 8 or 16 outputs of a column.
//! Prints the report's table: outputs per thread, GFLOP/s, registers per thread,
//! threads per block, blocks per SM and occupancy (read from the driver).
//!
//! `cargo run --release --example 04_outputs_per_thread [N] [--f32]`

mod common;

use gemm::tuning::registry::stage_configs;
use gemm::tuning::{KernelConfig, KernelLayouts, Stage};
use gemm::Element;

fn run<T: Element>(args: &common::Args) {
    let (device, cublas) = common::open();
    let configs = stage_configs(Stage::OutputsPerThread, T::PRECISION);
    let (rows, blas) = common::run_table::<T>(&device, &cublas, args, &configs);
    println!(
        "\n{:>8} {:>10} {:>9} {:>10} {:>11} {:>8} {:>10} {:>9}",
        "outputs", "GFLOP/s", "x cuBLAS", "registers", "threads/blk", "blk/SM", "occupancy", "smem B"
    );
    for r in &rows {
        let KernelConfig::OutputsPerThread { outputs, .. } = r.config else { continue };
        let info = device.kernel_info(T::PRECISION, r.config, KernelLayouts::NN).unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(2)
        });
        println!(
            "{:>8} {:>10.1} {:>9.3} {:>10} {:>11} {:>8} {:>9.0}% {:>9}",
            outputs,
            r.measurement.gflops,
            r.measurement.gflops / blas.gflops,
            info.registers,
            info.threads_per_block,
            info.blocks_per_sm,
            100.0 * info.occupancy,
            info.smem_bytes
        );
    }
}

fn main() {
    let args = common::args(4096);
    by_precision!(args, run);
}
