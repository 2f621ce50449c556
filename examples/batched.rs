//! A strided batch: 100 products of 1000 x 1000 matrices, A, B and C each a
//! (batch, row, col) row-major tensor of random inputs, in one launch with
//! `Gemm::run_strided_device`, beside cuBLAS's `?gemmStridedBatched` on the
//! same inputs in the same run; f32, then f64. Prints the median kernel time
//! of 10 runs after a warm-up (CUDA events), GFLOP/s, the ratio to cuBLAS,
//! and for a few products the largest difference from cuBLAS relative to
//! cuBLAS's largest element; two products are also checked against the CPU
//! (|C - C_ref| <= (k+2) eps |A||B|). Exits non-zero on a wrong result.
//!
//! `cargo run --release --example batched [COUNT [N]]`

mod common;

use gemm::bench::{gflops, time_kernel};
use gemm::check::{random_matrix, Reference};
use gemm::cublas::Cublas;
use gemm::tuning::{choose_batched, KernelLayouts};
use gemm::{Device, DeviceMatrix, Element, Gemm, Layout, Matrix, Op, Strided};
use std::process::exit;
use std::sync::Arc;

/// Timed runs after the warm-up (and one probe run).
const REPS: usize = 10;

fn main() {
    let arg = |i: usize, default: usize| -> usize {
        std::env::args().nth(i).map_or(default, |s| {
            s.parse().unwrap_or_else(|_| {
                eprintln!("usage: batched [COUNT [N]]");
                exit(2)
            })
        })
    };
    let (count, n) = (arg(1, 100), arg(2, 1000));
    let (device, cublas) = common::open();
    let mut ok = true;
    for result in [batch::<f32>(&device, &cublas, count, n), batch::<f64>(&device, &cublas, count, n)] {
        match result {
            Ok(passed) => ok &= passed,
            Err(e) => {
                eprintln!("error: {e}");
                exit(2)
            }
        }
    }
    if !ok {
        eprintln!("FAILED: a result was outside the error bound (see above)");
        exit(1);
    }
}

/// The largest |x - y| over the largest |y|.
fn relative_error<T: Element>(x: &[T], y: &[T]) -> f64 {
    let diff = x.iter().zip(y).map(|(a, b)| (a.as_f64() - b.as_f64()).abs()).fold(0.0, f64::max);
    let scale = y.iter().map(|b| b.as_f64().abs()).fold(0.0, f64::max);
    if diff == 0.0 {
        0.0
    } else {
        diff / scale
    }
}

/// Product `i` of a packed batch of `rows x cols` matrices on the device.
fn product<T: Element>(c: &DeviceMatrix<T>, i: usize, rows: usize, cols: usize) -> Result<Vec<T>, gemm::Error> {
    let s = c.buffer().stream();
    let v = s.clone_dtoh(&c.buffer().slice(i * rows * cols..(i + 1) * rows * cols))?;
    s.synchronize()?;
    Ok(v)
}

/// Runs, times and checks the batch in `T`; returns whether every check passed.
fn batch<T: Element>(device: &Arc<Device>, cublas: &Cublas, count: usize, n: usize) -> Result<bool, gemm::Error> {
    let (m, k) = (n, n);
    // (batch, row, col) row-major tensors are (count * rows) x cols matrices.
    let a = random_matrix::<T>(count * m, k, 4);
    let b = random_matrix::<T>(count * k, n, 5);
    let (da, db) = (DeviceMatrix::from_host(device, &a)?, DeviceMatrix::from_host(device, &b)?);
    let mut dc = DeviceMatrix::<T>::zeros(device, count * m, n)?;
    let mut dr = DeviceMatrix::<T>::zeros(device, count * m, n)?;
    // Views of the first matrix run on to the end of the buffer: the whole batch.
    let a0 = || da.view(0, 0, m, k);
    let b0 = || db.view(0, 0, k, n);

    let g = Gemm::new();
    let ours = time_kernel(device, 1e12, REPS, |_| {
        g.run_strided_device(
            Strided::new(a0()?, count, m * k)?,
            Strided::new(b0()?, count, k * n)?,
            Strided::new(dc.view_mut(0, 0, m, n)?, count, m * n)?,
        )
    })?;
    let blas = time_kernel(device, 1e12, REPS, |_| {
        cublas.gemm_strided_batched(
            Op::N,
            Op::N,
            1.0,
            (a0()?, m * k),
            (b0()?, k * n),
            0.0,
            (dr.view_mut(0, 0, m, n)?, m * n),
            count,
        )
    })?;

    let flops = count as f64 * 2.0 * (m * n * k) as f64;
    let (ours_gflops, blas_gflops) = (gflops(flops, ours.median_ms), gflops(flops, blas.median_ms));
    let layouts = KernelLayouts { a: Layout::RowMajor, b: Layout::RowMajor };
    println!();
    println!(
        "{}gemm strided batch: {count} products of {m}x{n}x{k}, (batch, row, col) row-major tensors",
        T::PRECISION.blas_prefix()
    );
    println!("kernel: {}", choose_batched(Some(device.name()), T::PRECISION, m, n, k, layouts, count));
    println!("{:<28} {:>10} {:>10} {:>9}", "", "ms", "GFLOP/s", "x cuBLAS");
    println!(
        "{:<28} {:>10.3} {:>10.1} {:>9.3}",
        "gemm run_strided_device",
        ours.median_ms,
        ours_gflops,
        ours_gflops / blas_gflops
    );
    println!("{:<28} {:>10.3} {:>10.1} {:>9.3}", "cuBLAS ?gemmStridedBatched", blas.median_ms, blas_gflops, 1.0);
    println!("(median of {} runs after a warm-up; cuBLAS's of {})", ours.reps, blas.reps);

    // A few products against cuBLAS's, and two against the CPU.
    let mut ok = true;
    let mut picks = vec![0, count / 2, count.saturating_sub(1)];
    picks.dedup();
    for &i in picks.iter().filter(|&&i| i < count) {
        let (got, want) = (product(&dc, i, m, n)?, product(&dr, i, m, n)?);
        let rel = relative_error(&got, &want);
        let mut line = format!("product {i:>4}: max |C - C_cuBLAS| / max |C_cuBLAS| = {rel:.2e}");
        if i == 0 || i + 1 == count {
            let (ai, bi) = (a.view(i * m, 0, m, k)?, b.view(i * k, 0, k, n)?);
            let cmp =
                Reference::new(1.0, ai, bi, 0.0, &Matrix::<T>::zeros(m, n)).compare(&Matrix::from_vec(m, n, got)?);
            ok &= cmp.passed();
            line += &format!("; against the CPU: {cmp}");
        }
        println!("{line}");
    }
    Ok(ok)
}
