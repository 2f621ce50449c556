//! Quick start: `C = A * B` in f64 with `gemm::dgemm`, N = 4096 by default.
//! Prints the time of the call as a user sees it (transfers included) and of
//! the kernel alone, GFLOP/s, and the check against cuBLAS DGEMM; exits
//! non-zero on a wrong result.
//!
//! `cargo run --release --example dgemm [N]`

use gemm::check::{random_matrix, Reference};
use gemm::cublas::Cublas;
use gemm::{DeviceMatrix, Matrix};
use std::time::Instant;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), gemm::Error> {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(4096);
    let a = random_matrix::<f64>(n, n, 1);
    let b = random_matrix::<f64>(n, n, 2);
    let mut c = Matrix::<f64>::filled(n, n, f64::NAN);

    gemm::dgemm(&a, &b, &mut c)?; // first call: creates the device, loads the PTX
    let start = Instant::now();
    gemm::dgemm(&a, &b, &mut c)?;
    let secs = start.elapsed().as_secs_f64();
    let flops = gemm::bench::gflops(2.0 * (n as f64).powi(3), secs * 1e3);
    let device = gemm::default_device()?;
    println!("device: {}", device.name());
    println!(
        "dgemm {n}x{n}x{n}: {:.1} ms with transfers, {flops:.1} GFLOP/s\nkernel: {}",
        secs * 1e3,
        gemm::Gemm::new().plan(gemm::Precision::F64, n, n, n)?
    );

    // The kernel alone, on matrices already on the GPU (CUDA events, median).
    let (da, db) = (DeviceMatrix::from_host(&device, &a)?, DeviceMatrix::from_host(&device, &b)?);
    let mut dc = DeviceMatrix::<f64>::zeros(&device, n, n)?;
    let t = gemm::bench::time_kernel(&device, 500.0, 20, |_| gemm::Gemm::new().run_device(&da, &db, &mut dc))?;
    let kernel_gflops = gemm::bench::gflops(2.0 * (n as f64).powi(3), t.median_ms);
    println!("kernel alone: {:.2} ms (median of {}), {kernel_gflops:.1} GFLOP/s", t.median_ms, t.reps);

    // Check against cuBLAS DGEMM on the same inputs: |C - C_ref| <= (k+2) eps |A||B|.
    let cublas = Cublas::new(&device)?;
    let reference = Reference::from_cublas(&cublas, &da, &db)?;
    let cmp = reference.compare(&c);
    println!("check against cuBLAS: {cmp}");
    if !cmp.passed() {
        std::process::exit(1);
    }
    Ok(())
}
