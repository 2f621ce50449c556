//! Stage 2, coalesced ("Double-Precision Matrix Multiply on CUDA", a CSE 260
//! report, section 3.1.3; "CUDA basics part 2"): the naive kernel with x along
//! the columns of C, so a warp reads consecutive elements of B and
//! writes consecutive elements of C. Runs both mappings with the same block
//! shapes, to show what coalescing buys.
//!
//! `cargo run --release --example 02_coalesced [N] [--f32] [--sweep]`

mod common;

use gemm::tuning::registry::naive_block_sweep;
use gemm::tuning::{BlockDim, KernelConfig};
use gemm::Element;

fn run<T: Element>(args: &common::Args) {
    let (device, cublas) = common::open();
    let blocks: Vec<BlockDim> = if args.sweep {
        naive_block_sweep()
    } else {
        vec![BlockDim::new(32, 8), BlockDim::new(32, 32), BlockDim::new(64, 4), BlockDim::new(16, 16)]
    };
    let mut configs = Vec::new();
    for &block in &blocks {
        configs.push(KernelConfig::Naive { block }); // uncoalesced mapping (stage 1)
        configs.push(KernelConfig::Coalesced { block });
    }
    common::run_table::<T>(&device, &cublas, args, &configs);
}

fn main() {
    let args = common::args(2048);
    by_precision!(args, run);
}
