//! Quick start: `C = A * B` in f64 with `gemm::dgemm`, N = 4096 by default.
//! Prints the time of the call as a user sees it (transfers included) and of
//! the kernel alone, GFLOP/s, and the check against cuBLAS DGEMM; then the
//! rest of the BLAS contract, `C <- alpha * op(A) * op(B) + beta * C` with a
//! transposed A and a column-major B, checked against the CPU. Exits
//! non-zero on a wrong result.
//!
//! `cargo run --release --example dgemm [N]`

use gemm::check::{random_matrix, Comparison, Reference};
use gemm::cublas::Cublas;
use gemm::{DeviceMatrix, Gemm, Layout, Matrix, Op, Precision};
use std::time::Instant;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn report(what: &str, cmp: &Comparison) {
    println!("{what}: {cmp}");
    if !cmp.passed() {
        std::process::exit(1);
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
        Gemm::new().plan(Precision::F64, n, n, n)?
    );

    // The kernel alone, on matrices already on the GPU (CUDA events, median).
    let (da, db) = (DeviceMatrix::from_host(&device, &a)?, DeviceMatrix::from_host(&device, &b)?);
    let mut dc = DeviceMatrix::<f64>::zeros(&device, n, n)?;
    let t = gemm::bench::time_kernel(&device, 500.0, 20, |_| Gemm::new().run_device(&da, &db, &mut dc))?;
    let kernel_gflops = gemm::bench::gflops(2.0 * (n as f64).powi(3), t.median_ms);
    println!("kernel alone: {:.2} ms (median of {}), {kernel_gflops:.1} GFLOP/s", t.median_ms, t.reps);

    // Check against cuBLAS DGEMM on the same inputs: |C - C_ref| <= (k+2) eps |A||B|.
    let cublas = Cublas::new(&device)?;
    let reference = Reference::from_cublas(&cublas, (Op::N, &da), (Op::N, &db), Layout::RowMajor)?;
    report("check against cuBLAS", &reference.compare(&c));

    // The BLAS contract: C <- 2 * A^T * B - C, A stored 300 x 200 (op(A) = A^T
    // is 200 x 300), B column-major (as Fortran and cuBLAS store it).
    let a = random_matrix::<f64>(300, 200, 3);
    let b = Matrix::from_fn_col_major(300, 100, |i, j| ((i * 7 + j) % 11) as f64 - 5.0);
    let c0 = random_matrix::<f64>(200, 100, 4);
    let mut c = c0.clone();
    Gemm::new().op_a(Op::T).alpha(2.0).beta(-1.0).run(&a, &b, &mut c)?;
    let cpu = Reference::new(2.0, a.t(), &b, -1.0, &c0);
    report("C <- 2 A^T B - C (B column-major) against the CPU", &cpu.compare(&c));
    Ok(())
}
