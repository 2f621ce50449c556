//! Stage 1, naive: one thread per element of C, block Bx x By chosen at run
//! time. Prints time, GFLOP/s, % of peak and the ratio to cuBLAS measured in
//! the same run; `--sweep` sweeps every Bx x By (powers of two, 32 to 1024
//! threads) and prints a heat map of them.
//!
//! Sources: "Double-Precision Matrix Multiply on CUDA" (a CSE 260 report),
//! section 2; "CUDA basics part 2".
//!
//! `cargo run --release --example 01_naive [N] [--f32] [--sweep]`

mod common;

use gemm::tuning::registry::naive_block_sweep;
use gemm::tuning::{BlockDim, KernelConfig};
use gemm::Element;

fn run<T: Element>(args: &common::Args) {
    let (device, cublas) = common::open();
    let blocks: Vec<BlockDim> = if args.sweep {
        naive_block_sweep()
    } else {
        vec![BlockDim::new(32, 8), BlockDim::new(16, 16), BlockDim::new(8, 32), BlockDim::new(1, 256)]
    };
    let configs: Vec<_> = blocks.iter().map(|&block| KernelConfig::Naive { block }).collect();
    let (rows, _) = common::run_table::<T>(&device, &cublas, args, &configs);
    if args.sweep {
        // Heat map: GFLOP/s by Bx (columns) and By (rows).
        let xs: Vec<u32> = (0..=10).map(|p| 1 << p).collect();
        println!("\nGFLOP/s by block shape (Bx across, By down):");
        print!("{:>6}", "By\\Bx");
        for x in &xs {
            print!("{x:>7}");
        }
        println!();
        for y in &xs {
            print!("{y:>6}");
            for x in &xs {
                match rows.iter().find(|r| r.config == KernelConfig::Naive { block: BlockDim::new(*x, *y) }) {
                    Some(r) => print!("{:>7.0}", r.measurement.gflops),
                    None => print!("{:>7}", "."),
                }
            }
            println!();
        }
    }
}

fn main() {
    let args = common::args(2048);
    by_precision!(args, run);
}
