//! The table of "Improving performance of the matrix-multiplication
//! algorithm with CUDA" (a 2019 report: what a user of host matrices sees, copies included, with the product
//! split over CUDA streams): f64 products of N x N host matrices, timed from
//! host to host, N = 64, 128, ..., 8192, for
//!
//! - `cpu`: matrixmultiply on all cores (the sequential baseline of the
//!   report, parallel here);
//! - `stage1`, `stage3`: the naive and shared-memory stages through the
//!   host path;
//! - `default_pageable`, `default_pinned`: the default kernel through the
//!   host path, from ordinary (`Vec`) and page-locked
//!   ([`gemm::Matrix::pinned`]) matrices;
//! - `cublas_plain_copies`: cudarc + cuBLAS with plain pageable copies
//!   (upload A and B, `cublasDgemm`, download C);
//! - `cublasxt`: `cublasXtDgemm` on the same host matrices, one GPU;
//!
//! each beside the transfer bound: the largest of (bytes up / the pinned
//! upload rate, bytes down / the pinned download rate, the kernel on device
//! operands), all measured in this run. Median of 3 timed runs after a
//! warm-up (1 run where a method takes over a second). Above N = 8192 only
//! the GPU methods run (the CPU and the naive stages would take minutes;
//! the report's table stops at 8192).
//!
//! Run: `cargo run --release --example host_streams [-- --out DIR] [--sizes 64,128] [--streams 2,4]`;
//! writes `DIR/host.csv` (device, date, commit, n, precision, method, ms,
//! bound_ms) when `--out` is given.

use gemm::bench::{commit, today_utc};
use gemm::cublas::{Cublas, CublasXt};
use gemm::tuning::Stage;
use gemm::{DeviceMatrix, Gemm, Layout, Matrix};
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Instant;

/// The largest N at which the CPU baseline and stages 1 and 3 are timed.
const SLOW_METHODS_MAX_N: usize = 8192;

/// Median ms of `f` over 3 runs after a warm-up; the warm-up alone when it
/// took over a second.
fn time(f: impl FnMut() -> Result<(), gemm::Error>) -> Result<f64, gemm::Error> {
    gemm::bench::wall_ms(f, 1000.0)
}

fn list(args: &[String], flag: &str) -> Option<Vec<usize>> {
    let i = args.iter().position(|a| a == flag)?;
    Some(args[i + 1].split(',').map(|s| s.parse().expect("comma-separated integers")).collect())
}

fn main() -> Result<(), gemm::Error> {
    let args: Vec<String> = std::env::args().collect();
    let out = args.iter().position(|a| a == "--out").map(|i| std::path::PathBuf::from(&args[i + 1]));
    let sizes = list(&args, "--sizes").unwrap_or((6..=13).map(|p| 1usize << p).collect());
    let streams = list(&args, "--streams").unwrap_or(vec![0]); // 0: the library's choice
    let dev = gemm::default_device()?;
    let cublas = Cublas::new(&dev)?;
    let xt = CublasXt::new(&dev).ok();
    // Pinned copy rates: one 256 MiB buffer each way.
    let (up_gbs, down_gbs) = gemm::bench::pinned_copy_rates(&dev, 256 << 20)?;
    // Load the kernels once (the driver's JIT compiles the PTX module on
    // first use, seconds), so no row pays for it.
    {
        let (x, y) = (Matrix::<f64>::zeros(64, 64), Matrix::<f64>::zeros(64, 64));
        let mut z = Matrix::<f64>::zeros(64, 64);
        let t0 = Instant::now();
        Gemm::new().run(&x, &y, &mut z)?;
        println!("# first product (loads the PTX module): {:.0} ms", t0.elapsed().as_secs_f64() * 1e3);
        for stage in [Stage::Naive, Stage::SmemTiled] {
            Gemm::new().stage(stage).run(&x, &y, &mut z)?;
        }
    }
    let (date, commit) = (today_utc(), commit());
    println!("# {} ({} SMs), {date}, commit {commit}", dev.name(), dev.sm_count());
    println!("# pinned copies: {up_gbs:.1} GB/s up, {down_gbs:.1} GB/s down");
    let mut methods: Vec<String> =
        ["cpu", "stage1", "stage3", "cublas_plain_copies", "cublasxt", "default_pinned"].map(String::from).into();
    for s in &streams {
        methods.push(if streams.len() == 1 { "default_pageable".into() } else { format!("default_pageable_s{s}") });
    }
    let bar = ProgressBar::new((sizes.len() * methods.len()) as u64);
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}").expect("template"));
    let mut rows: Vec<(usize, String, f64, f64)> = Vec::new();
    for &n in &sizes {
        let a = Matrix::<f64>::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0);
        let b = Matrix::<f64>::from_fn(n, n, |i, j| ((i * 5 + j) % 13) as f64 - 6.0);
        let mut c = Matrix::<f64>::zeros(n, n);
        // The kernel alone, on device operands, and the reference result.
        let (da, db) = (DeviceMatrix::from_host(&dev, &a)?, DeviceMatrix::from_host(&dev, &b)?);
        let mut dc = DeviceMatrix::<f64>::zeros(&dev, n, n)?;
        let kernel_ms = time(|| {
            Gemm::new().run_device(&da, &db, &mut dc)?;
            dev.synchronize()
        })?;
        let want = dc.to_host()?;
        let bytes = (n * n * 8) as f64;
        let bound_ms = (2.0 * bytes / up_gbs / 1e6).max(bytes / down_gbs / 1e6).max(kernel_ms);
        // What registering the caller's memory would cost (cuMemHostRegister
        // and cuMemHostUnregister of A, B and C), for the choice between
        // registering and staging (printed, not a row of the table).
        let register_ms = time(|| {
            for m in [a.as_slice(), b.as_slice(), c.as_slice()] {
                let p = m.as_ptr() as *mut core::ffi::c_void;
                // SAFETY: registers and unregisters memory we own; nothing uses it meanwhile.
                unsafe {
                    let r = gemm::cudarc::driver::sys::cuMemHostRegister_v2(p, m.len() * 8, 0);
                    assert_eq!(r, gemm::cudarc::driver::sys::CUresult::CUDA_SUCCESS, "cuMemHostRegister");
                    gemm::cudarc::driver::sys::cuMemHostUnregister(p);
                }
            }
            Ok(())
        })?;
        bar.println(format!("{n:6} registering A, B, C: {register_ms:.3} ms; kernel {kernel_ms:.3} ms"));
        let (pa, pb) = (a.to_pinned(&dev)?, b.to_pinned(&dev)?);
        let mut pc = Matrix::<f64>::pinned(&dev, n, n, Layout::RowMajor)?;
        for method in &methods {
            if n > SLOW_METHODS_MAX_N && matches!(method.as_str(), "cpu" | "stage1" | "stage3") {
                bar.inc(1);
                continue;
            }
            bar.set_message(format!("n = {n}: {method}"));
            c.fill(f64::NAN);
            let ms = match method.as_str() {
                "cpu" => time(|| {
                    // SAFETY: packed row-major matrices of these shapes.
                    unsafe {
                        matrixmultiply::dgemm(
                            n,
                            n,
                            n,
                            1.0,
                            a.as_slice().as_ptr(),
                            n as isize,
                            1,
                            b.as_slice().as_ptr(),
                            n as isize,
                            1,
                            0.0,
                            c.as_mut_slice().as_mut_ptr(),
                            n as isize,
                            1,
                        );
                    }
                    Ok(())
                })?,
                "stage1" => time(|| Gemm::new().stage(Stage::Naive).run(&a, &b, &mut c))?,
                "stage3" => time(|| Gemm::new().stage(Stage::SmemTiled).run(&a, &b, &mut c))?,
                "cublas_plain_copies" => {
                    let s = dev.stream();
                    time(|| {
                        let ga = DeviceMatrix::from_host(&dev, &a)?;
                        let gb = DeviceMatrix::from_host(&dev, &b)?;
                        let mut gc = DeviceMatrix::<f64>::zeros(&dev, n, n)?;
                        cublas.gemm(1.0, &ga, &gb, 0.0, &mut gc)?;
                        s.memcpy_dtoh(gc.buffer(), c.as_mut_slice())?;
                        Ok(s.synchronize()?)
                    })?
                }
                "cublasxt" => match &xt {
                    Some(xt) => time(|| xt.dgemm(&a, &b, &mut c))?,
                    None => {
                        bar.inc(1);
                        continue;
                    }
                },
                "default_pinned" => time(|| Gemm::new().run(&pa, &pb, &mut pc))?,
                other => {
                    let s = other.rsplit_once("_s").and_then(|(_, s)| s.parse().ok()).unwrap_or(streams[0]);
                    let g = if s == 0 { Gemm::new() } else { Gemm::new().host_streams(s) };
                    time(|| g.run(&a, &b, &mut c))?
                }
            };
            // Every method's C against the device path's (integer-valued inputs: exact).
            let got = if method == "default_pinned" { &pc } else { &c };
            let wrong = (0..n).flat_map(|i| (0..n).map(move |j| (i, j))).find(|&(i, j)| got[(i, j)] != want[(i, j)]);
            if let Some((i, j)) = wrong {
                panic!("{method} at n = {n}: C({i}, {j}) = {} but the device path gives {}", got[(i, j)], want[(i, j)]);
            }
            bar.println(format!(
                "{n:6} {method:24} {ms:10.3} ms   bound {bound_ms:9.3} ms   {:6.2} x bound",
                ms / bound_ms
            ));
            rows.push((n, method.clone(), ms, bound_ms));
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    if let Some(dir) = out {
        std::fs::create_dir_all(&dir).expect("output directory");
        let mut csv = String::from("device,date,commit,n,precision,method,ms,bound_ms\n");
        for (n, method, ms, bound) in &rows {
            csv += &format!("{},{date},{commit},{n},f64,{method},{ms:.4},{bound:.4}\n", dev.name());
        }
        std::fs::write(dir.join("host.csv"), csv).expect("write host.csv");
        println!("wrote {}", dir.join("host.csv").display());
    }
    Ok(())
}
