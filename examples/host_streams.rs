//! The host path (seed 002, Martini and Boldo: the product as a user of
//! host matrices sees it, copies included, split over CUDA streams): f64
//! products of N x N host matrices for N = 64 .. 8192, timed from host to
//! host (median of 3 after a warm-up), beside the kernel alone on device
//! operands and the transfer bound (bytes up and down at the pinned copy
//! rates measured here). Run: `cargo run --release --example host_streams`.

use gemm::{DeviceMatrix, Gemm, Matrix};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), gemm::Error> {
    let dev = gemm::default_device()?;
    let sizes: Vec<usize> = match std::env::args().nth(1) {
        Some(list) => list.split(',').map(|s| s.parse().expect("sizes: comma-separated integers")).collect(),
        None => vec![64, 128, 256, 512, 1024, 2048, 4096, 8192],
    };
    let streams: Vec<usize> = match std::env::var("HOST_STREAMS") {
        Ok(list) => list.split(',').map(|s| s.parse().expect("HOST_STREAMS: integers")).collect(),
        Err(_) => vec![gemm::DEFAULT_HOST_STREAMS],
    };
    // Pinned copy rates (one 256 MiB buffer each way).
    let (up_gbs, down_gbs) = {
        let bytes = 256usize << 20;
        let s = dev.stream();
        // SAFETY: the buffer is written by the copies before being read.
        let mut host = unsafe { dev.context().alloc_pinned::<u8>(bytes) }?;
        let mut d = s.alloc_zeros::<u8>(bytes)?;
        let mut rate = |up: bool| -> Result<f64, gemm::Error> {
            let mut t = Vec::new();
            for _ in 0..3 {
                s.synchronize()?;
                let t0 = Instant::now();
                if up {
                    s.memcpy_htod(&host, &mut d)?;
                } else {
                    s.memcpy_dtoh(&d, &mut host)?;
                }
                s.synchronize()?;
                t.push(t0.elapsed().as_secs_f64());
            }
            Ok(bytes as f64 / median(t) / 1e9)
        };
        (rate(true)?, rate(false)?)
    };
    println!("# {} ({} SMs); pinned copies: {up_gbs:.1} GB/s up, {down_gbs:.1} GB/s down", dev.name(), dev.sm_count());
    println!("n,streams,host_ms,kernel_ms,bound_ms,host_gflops");
    for &n in &sizes {
        let a = Matrix::<f64>::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0);
        let b = Matrix::<f64>::from_fn(n, n, |i, j| ((i * 5 + j) % 13) as f64 - 6.0);
        let mut c = Matrix::<f64>::zeros(n, n);
        // The kernel alone, on device operands.
        let (da, db) = (DeviceMatrix::from_host(&dev, &a)?, DeviceMatrix::from_host(&dev, &b)?);
        let mut dc = DeviceMatrix::<f64>::zeros(&dev, n, n)?;
        let mut kt = Vec::new();
        for _ in 0..4 {
            dev.synchronize()?;
            let t0 = Instant::now();
            Gemm::new().run_device(&da, &db, &mut dc)?;
            dev.synchronize()?;
            kt.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        kt.remove(0);
        let kernel_ms = median(kt);
        let bytes = (n * n * 8) as f64;
        let bound_ms = (2.0 * bytes / up_gbs / 1e6).max(bytes / down_gbs / 1e6).max(kernel_ms);
        for &s in &streams {
            let g = Gemm::new().host_streams(s);
            let mut t = Vec::new();
            for _ in 0..4 {
                let t0 = Instant::now();
                g.run(&a, &b, &mut c)?;
                t.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            t.remove(0);
            let ms = median(t);
            // Check one row against the device result.
            let want = dc.to_host()?;
            let worst = (0..n).map(|j| (c[(n / 2, j)] - want[(n / 2, j)]).abs()).fold(0.0, f64::max);
            assert!(worst == 0.0, "host path differs from the device path by {worst} at n = {n}");
            println!("{n},{s},{ms:.3},{kernel_ms:.3},{bound_ms:.3},{:.1}", 2.0 * (n as f64).powi(3) / ms / 1e6);
        }
    }
    Ok(())
}
