//! f64 (and f32) products emulated on INT8 tensor cores (Ozaki scheme II,
//! `Gemm::emulation`), beside the native product and cuBLAS: time, TFLOP/s
//! and the relative error of sampled elements against an exact reference
//! (a compensated dot product, as accurate as double-double arithmetic).
//!
//! Inputs have the Ozaki papers' controlled exponent spread: elements
//! `(u - 0.5) exp(phi z)`, u uniform in [0, 1), z standard normal.
//!
//! `cargo run --release --example emulated_dgemm [N]`: one f64 product N^3
//! (4096 by default), phi = 1, with 15 moduli (`Emulation::f64_accuracy`).
//!
//! `--once N MODULI [accurate]`: two emulated products and nothing else
//! (for a profiler's per-kernel times).
//!
//! The study (`--study [--out CSV] [--sizes 1024,4096] [--phis 0.5,1]
//! [--moduli 12,14,15,16] [--f32-moduli 5,6,7,8] [--modes fast,accurate]
//! [--samples S]`) appends a row per measurement to
//! `benches/results/emulation.csv` (or CSV): for each size and phi, our
//! native product and cuBLAS, then the emulation at each number of moduli
//! in each scaling mode; f32 the same with its moduli.

use gemm::bench::{commit, time_kernel, today_utc};
use gemm::cublas::Cublas;
use gemm::emulation::{Emulation, Mode};
use gemm::{Device, DeviceMatrix, Element, Gemm, Layout, Matrix, Scalar};
use rayon::prelude::*;
use std::io::Write;
use std::sync::Arc;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

/// SplitMix64.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform in (0, 1) from a hash.
fn unit(h: u64) -> f64 {
    ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// A row-major rows x cols matrix with elements (u - 0.5) exp(phi z).
fn spread(rows: usize, cols: usize, phi: f64, seed: u64) -> Vec<f64> {
    (0..rows * cols)
        .into_par_iter()
        .map(|i| {
            let h = mix(seed ^ mix(i as u64));
            let (u, u1, u2) = (unit(h), unit(mix(h ^ 1)), unit(mix(h ^ 2)));
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            (u - 0.5) * (phi * z).exp()
        })
        .collect()
}

/// The dot product of x and y (strided) by Ogita, Rump and Oishi's Dot2:
/// the accuracy of double-double arithmetic.
fn dot2(k: usize, x: impl Fn(usize) -> f64, y: impl Fn(usize) -> f64) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for h in 0..k {
        let (a, b) = (x(h), y(h));
        let p = a * b;
        let e = a.mul_add(b, -p);
        let t = s + p;
        let z = t - s;
        let q = (s - (t - z)) + (p - z);
        s = t;
        c += q + e;
    }
    s + c
}

/// Sampled elements (i, j) of C and their exact values.
struct Samples {
    at: Vec<(usize, usize)>,
    exact: Vec<f64>,
}

fn samples(n: usize, count: usize, a: &[f64], b: &[f64]) -> Samples {
    let at: Vec<(usize, usize)> = (0..count)
        .map(|s| ((mix(s as u64 * 2 + 11) % n as u64) as usize, (mix(s as u64 * 2 + 12) % n as u64) as usize))
        .collect();
    let exact = at.par_iter().map(|&(i, j)| dot2(n, |h| a[i * n + h], |h| b[h * n + j])).collect();
    Samples { at, exact }
}

/// Median and maximum relative error of C's sampled elements.
fn errors<T: Scalar>(c: &DeviceMatrix<T>, s: &Samples) -> Result<(f64, f64), gemm::Error> {
    let host = c.to_host()?;
    let mut rel: Vec<f64> =
        s.at.iter()
            .zip(&s.exact)
            .filter(|(_, &x)| x != 0.0)
            .map(|(&(i, j), &x)| (host[(i, j)].as_f64() - x).abs() / x.abs())
            .collect();
    rel.sort_by(|a, b| a.total_cmp(b));
    if rel.is_empty() {
        return Ok((0.0, 0.0));
    }
    Ok((rel[rel.len() / 2], rel[rel.len() - 1]))
}

#[derive(Clone, Copy)]
struct Row {
    precision: &'static str,
    n: usize,
    phi: f64,
    moduli: usize,
    mode: &'static str,
    ms: f64,
    cublas_ms: f64,
    err: (f64, f64),
    native_err: (f64, f64),
}

/// One size and phi of one precision: native, cuBLAS, then each emulation.
#[allow(clippy::too_many_arguments)]
fn measure<T: Element>(
    device: &Arc<Device>,
    cublas: &Cublas,
    (n, phi): (usize, f64),
    (moduli, modes): (&[usize], &[Mode]),
    sample_count: usize,
    precision: &'static str,
    rows: &mut Vec<Row>,
) -> Result<(), gemm::Error> {
    let (a, b) = (spread(n, n, phi, 1 + n as u64), spread(n, n, phi, 2 + n as u64));
    let (a, b): (Vec<f64>, Vec<f64>) = if T::NAME == "f32" {
        (a.iter().map(|&x| x as f32 as f64).collect(), b.iter().map(|&x| x as f32 as f64).collect())
    } else {
        (a, b)
    };
    let s = samples(n, sample_count, &a, &b);
    let to_t = |x: &[f64]| Matrix::from_vec_in(n, n, Layout::RowMajor, n, x.iter().map(|&v| T::from_f64(v)).collect());
    let (da, db) = (DeviceMatrix::from_host(device, &to_t(&a)?)?, DeviceMatrix::from_host(device, &to_t(&b)?)?);
    drop((a, b));
    let mut dc = DeviceMatrix::<T>::zeros(device, n, n)?;
    let budget = 400.0;
    let t = time_kernel(device, budget, 10, |_| cublas.gemm(1.0, &da, &db, 0.0, &mut dc))?;
    let cublas_ms = t.median_ms;
    let cublas_err = errors(&dc, &s)?;
    let t = time_kernel(device, budget, 10, |_| Gemm::new().run_device(&da, &db, &mut dc))?;
    let native = errors(&dc, &s)?;
    let base = Row {
        precision,
        n,
        phi,
        moduli: 0,
        mode: "native",
        ms: t.median_ms,
        cublas_ms,
        err: native,
        native_err: cublas_err,
    };
    let print = |r: &Row| {
        println!(
            "{:>4} {n:>6}^3 phi {phi:<4} {:>7} {:>2} moduli: {:>9.3} ms {:>6.1} TFLOP/s ({:.2}x cuBLAS), rel. error median {:.2e} max {:.2e} (cuBLAS {:.2e} / {:.2e})",
            r.precision,
            r.mode,
            r.moduli,
            r.ms,
            2.0 * (n as f64).powi(3) / r.ms * 1e-9,
            r.cublas_ms / r.ms,
            r.err.0,
            r.err.1,
            cublas_err.0,
            cublas_err.1
        )
    };
    let cub = Row { mode: "cublas", ms: cublas_ms, err: cublas_err, ..base };
    print(&cub);
    print(&base);
    rows.push(cub);
    rows.push(base);
    for &mode in modes {
        for &nm in moduli {
            let e = Emulation::new(nm)
                .map_err(|e| gemm::Error::Unsupported { product: precision.into(), why: e.to_string() })?;
            let g = Gemm::new().emulation(e.mode(mode));
            let t = time_kernel(device, budget, 10, |_| g.run_device(&da, &db, &mut dc))?;
            let name = if mode == Mode::Accurate { "accurate" } else { "fast" };
            let row = Row { moduli: nm, mode: name, ms: t.median_ms, err: errors(&dc, &s)?, ..base };
            print(&row);
            rows.push(row);
        }
    }
    Ok(())
}

fn list<T: std::str::FromStr>(s: &str) -> Vec<T> {
    s.split(',').filter_map(|x| x.parse().ok()).collect()
}

fn run() -> Result<(), gemm::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let device = gemm::default_device()?;
    let cublas = Cublas::new(&device)?;
    println!("device: {}", device.name());
    let mut rows = Vec::new();
    if let Some(i) = args.iter().position(|a| a == "--once") {
        // Two emulated products (a warm-up and one more), nothing else: for
        // a profiler's per-kernel times.
        let n: usize = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(16384);
        let nm: usize = args.get(i + 2).and_then(|s| s.parse().ok()).unwrap_or(15);
        let (a, b) = (spread(n, n, 1.0, 1), spread(n, n, 1.0, 2));
        let to_m = |x: Vec<f64>| Matrix::from_vec_in(n, n, Layout::RowMajor, n, x);
        let (da, db) = (DeviceMatrix::from_host(&device, &to_m(a)?)?, DeviceMatrix::from_host(&device, &to_m(b)?)?);
        let mut dc = DeviceMatrix::<f64>::zeros(&device, n, n)?;
        let e =
            Emulation::new(nm).map_err(|e| gemm::Error::Unsupported { product: "f64".into(), why: e.to_string() })?;
        let mode = if args.get(i + 3).is_some_and(|s| s == "accurate") { Mode::Accurate } else { Mode::Fast };
        let g = Gemm::new().emulation(e.mode(mode));
        println!("{}", g.plan_for::<f64, f64>(n, n, n)?);
        for _ in 0..2 {
            g.run_device(&da, &db, &mut dc)?;
        }
        device
            .stream()
            .synchronize()
            .map_err(|e| gemm::Error::Unsupported { product: "f64".into(), why: e.to_string() })?;
        return Ok(());
    }
    if !args.iter().any(|a| a == "--study") {
        let n = args.first().and_then(|s| s.parse().ok()).unwrap_or(4096);
        println!("{}", Gemm::new().emulation(Emulation::f64_accuracy()).plan_for::<f64, f64>(n, n, n)?);
        return measure::<f64>(&device, &cublas, (n, 1.0), (&[15], &[Mode::Fast]), 256, "f64", &mut rows);
    }
    let opt = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str);
    let sizes: Vec<usize> = list(opt("--sizes").unwrap_or("1024,2048,4096,8192,16384"));
    let phis: Vec<f64> = list(opt("--phis").unwrap_or("0.5,1,2,4"));
    let moduli: Vec<usize> = list(opt("--moduli").unwrap_or("10,12,13,14,15,16,17,18"));
    let f32_moduli: Vec<usize> = list(opt("--f32-moduli").unwrap_or("4,5,6,7,8,9"));
    let modes: Vec<Mode> = opt("--modes")
        .unwrap_or("fast,accurate")
        .split(',')
        .filter_map(|m| match m {
            "fast" => Some(Mode::Fast),
            "accurate" => Some(Mode::Accurate),
            _ => None,
        })
        .collect();
    let sample_count = opt("--samples").and_then(|s| s.parse().ok()).unwrap_or(256);
    let out = opt("--out").unwrap_or("benches/results/emulation.csv").to_string();
    for &n in &sizes {
        for &phi in &phis {
            measure::<f64>(&device, &cublas, (n, phi), (&moduli, &modes), sample_count, "f64", &mut rows)?;
            measure::<f32>(&device, &cublas, (n, phi), (&f32_moduli, &modes), sample_count, "f32", &mut rows)?;
        }
    }
    let new = !std::path::Path::new(&out).exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)
        .map_err(|e| gemm::Error::Unsupported { product: "the study".into(), why: format!("{out}: {e}") })?;
    let mut text = String::new();
    if new {
        text += "device,date,commit,precision,m,n,k,phi,moduli,mode,ms,tflops,cublas_tflops,median_rel_err,max_rel_err,native_median_rel_err,native_max_rel_err\n";
    }
    for r in &rows {
        let flops = 2.0 * (r.n as f64).powi(3);
        text += &format!(
            "{},{},{},{},{n},{n},{n},{},{},{},{:.4},{:.2},{:.2},{:.3e},{:.3e},{:.3e},{:.3e}\n",
            device.name(),
            today_utc(),
            commit(),
            r.precision,
            r.phi,
            r.moduli,
            r.mode,
            r.ms,
            flops / r.ms * 1e-9,
            flops / r.cublas_ms * 1e-9,
            r.err.0,
            r.err.1,
            r.native_err.0,
            r.native_err.1,
            n = r.n
        );
    }
    f.write_all(text.as_bytes())
        .map_err(|e| gemm::Error::Unsupported { product: "the study".into(), why: e.to_string() })?;
    println!("{} rows appended to {out}", rows.len());
    Ok(())
}
