//! Products of host matrices streamed through the GPU, for every element
//! type with tensor-core kernels: f16 x f16 -> f32, f16 -> f16,
//! bf16 -> bf16, bf16 -> f32, i8 -> i32 and f32 on TF32 tensor cores
//! (`.allow_tf32(true)`), square N x N x N, timed from host to host beside
//! the kernel alone and the transfer bound. For each product and N:
//!
//! - `kernel`: the product on device matrices (`Gemm::run_device`, then a
//!   synchronize); its C is the reference the other methods are checked
//!   against;
//! - `pinned`: `Gemm::run` on page-locked matrices ([`gemm::Matrix::pinned`],
//!   copied directly by the copy engines);
//! - `pageable`: `Gemm::run` on ordinary (`Vec`) matrices, staged through
//!   page-locked buffers;
//! - `out_of_core`: `pinned` under `.memory_budget(q)`, q a quarter of the
//!   bytes of A, B and C, so the product streams through the GPU in pieces;
//!
//! each beside the transfer bound `bound_ms`: the largest of (bytes of A and
//! B / the pinned upload rate, bytes of C / the pinned download rate, the
//! `kernel` time), the rates measured in this run (one 256 MiB page-locked
//! buffer each way). Times are the median of 3 runs after a warm-up (a
//! single run after the warm-up when the warm-up took over a second).
//!
//! Inputs are random small integers in -4..=4 stored in the operand type,
//! from a counter-based SplitMix64 stream (Steele, Lea and Flood, "Fast
//! splittable pseudorandom number generators", OOPSLA 2014). Every product
//! of two of them, and every partial sum of up to 2^20 of them (at most
//! 16 * k <= 2^24 in magnitude), is an integer that f32 (and TF32, and i32)
//! holds exactly, so every order of summation gives the same C. Checks,
//! element by element against the `kernel` C:
//!
//! - `pinned` and `pageable`: bit for bit (every tile of the host path runs
//!   the whole product's kernel plan);
//! - `out_of_core`: bit for bit too. For a C of 16 bits (k kept whole) and
//!   i32 (exact) this holds for any input; for an f32 C, k is cut into
//!   chunks whose f32 partial sums are rounded between chunks, which the
//!   exact small-integer inputs make exact. Were k above 2^20 (sums past
//!   2^24), the check would allow |diff| <= 2 k eps_f32 (16 k), the
//!   classical bound 2 k eps sum |a||b| with |a||b| <= 16.
//!
//! The table adds ms / bound_ms and the rate 2 N^3 / ms (TFLOP/s; tera
//! integer operations per second for i8).
//!
//! A failed check prints the first mismatching element (index and values),
//! the run goes on, and the program exits with status 1 at the end (after
//! writing the CSV, whose `check` column says `FAIL`). A product the device
//! cannot run (`Error::Unsupported`, e.g. a GPU older than compute
//! capability 8.0) is reported and skipped; any other error ends the run
//! (after the CSV of the rows so far).
//!
//! Run: `cargo run --release -p gemm-host --example host_mixed [-- --sizes 4096,8192,16384]
//! [--types f16-f32,f16-f16,bf16-bf16,bf16-f32,i8-i32,tf32] [--out DIR]`
//! (defaults: N = 4096, every type). With `--out DIR` it writes
//! `DIR/host_mixed.csv` with the columns `device,date,commit,n,precision,
//! method,ms,bound_ms,check`: precision is `f16->f32`, `f16->f16`,
//! `bf16->bf16`, `bf16->f32`, `i8->i32` or `tf32->f32`; method one of the
//! four above; check `reference` (the kernel row), `bits` (bit for bit),
//! `within` (inside the bound above) or `FAIL`.

use gemm::bench::{commit, today_utc};
use gemm::half::{bf16, f16};
use gemm::{Device, DeviceMatrix, Error, Gemm, Layout, Matrix, Product, Scalar};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use std::mem::size_of;
use std::sync::Arc;
use std::time::Instant;

/// The products, by their `--types` names.
const TYPES: [&str; 6] = ["f16-f32", "f16-f16", "bf16-bf16", "bf16-f32", "i8-i32", "tf32"];
/// The methods timed for each product and N, in order.
const METHODS: [&str; 4] = ["kernel", "pinned", "pageable", "out_of_core"];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median ms of `f` over 3 runs after a warm-up; one run after the warm-up
/// when the warm-up took over a second.
fn time(mut f: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    let t0 = Instant::now();
    f()?;
    let runs = if t0.elapsed().as_secs_f64() > 1.0 { 1 } else { 3 };
    let mut t = Vec::new();
    for _ in 0..runs {
        let t0 = Instant::now();
        f()?;
        t.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(t))
}

/// The fastest of 7 runs after 3 warm-ups, ms: a copy rate (the first
/// copies of a fresh process ran at half speed on an H100).
fn best(mut f: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    for _ in 0..3 {
        f()?;
    }
    let mut t = f64::INFINITY;
    for _ in 0..7 {
        let t0 = Instant::now();
        f()?;
        t = t.min(t0.elapsed().as_secs_f64() * 1e3);
    }
    Ok(t)
}

fn list(args: &[String], flag: &str) -> Option<Vec<String>> {
    let i = args.iter().position(|a| a == flag)?;
    let value = args.get(i + 1).unwrap_or_else(|| panic!("{flag} needs a comma-separated list"));
    Some(value.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
}

/// SplitMix64 output number `i` of the stream `seed`.
fn mix(seed: u64, i: u64) -> u64 {
    let mut z =
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// An n x n row-major matrix of random integers in -4..=4 (the same for a
/// seed whatever the thread count).
fn random<T: Scalar>(n: usize, seed: u64) -> Result<Matrix<T>, Error> {
    let values: [T; 9] = std::array::from_fn(|v| T::from_f64(v as f64 - 4.0));
    let data: Vec<T> = (0..n * n).into_par_iter().map(|i| values[(mix(seed, i as u64) % 9) as usize]).collect();
    Matrix::from_vec(n, n, data)
}

/// The bytes of a slice of scalars.
fn bytes<C: Scalar>(x: &[C]) -> &[u8] {
    // SAFETY: the scalar types (f64, f32, f16, bf16, i8, i32) are plain
    // numbers without padding: every byte is initialized.
    unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u8>(), std::mem::size_of_val(x)) }
}

/// The first element of `got` that is not `want`'s: other bits when `tol`
/// is 0, else more than `tol` away (or a NaN).
fn first_mismatch<C: Scalar>(got: &[C], want: &[C], tol: f64) -> Option<usize> {
    assert_eq!(got.len(), want.len());
    if tol > 0.0 {
        return got.par_iter().zip(want.par_iter()).position_first(|(&g, &w)| {
            let (g, w) = (g.as_f64(), w.as_f64());
            (g - w).abs() > tol || g.is_nan()
        });
    }
    // Bit for bit: whole chunks compared as bytes, then the element.
    const CHUNK: usize = 1 << 16;
    let chunk = got.par_chunks(CHUNK).zip(want.par_chunks(CHUNK)).position_first(|(g, w)| bytes(g) != bytes(w))?;
    let (g, w) = (&got[chunk * CHUNK..], &want[chunk * CHUNK..]);
    let e = g.iter().zip(w).position(|(x, y)| bytes(std::slice::from_ref(x)) != bytes(std::slice::from_ref(y)));
    e.map(|e| chunk * CHUNK + e)
}

/// Prints a line above the progress bar, on stdout even when the bar is
/// hidden (output not a terminal), so a redirected run keeps the table.
fn say(bar: &ProgressBar, line: String) {
    bar.suspend(|| println!("{line}"));
}

/// One row of the table and the CSV.
struct Row {
    precision: String,
    n: usize,
    method: &'static str,
    ms: f64,
    bound_ms: f64,
    check: &'static str,
}

/// What every product shares: the device, the measured copy rates, the
/// progress bar, the rows so far, and whether a check failed.
struct Bench {
    dev: Arc<Device>,
    up_gbs: f64,
    down_gbs: f64,
    /// `--streams N`: the host path's streams (default: the library's choice).
    streams: Option<usize>,
    bar: ProgressBar,
    rows: Vec<Row>,
    failed: bool,
}

impl Bench {
    /// Prints a row of the table and keeps it.
    fn row(&mut self, row: Row) {
        let tflops = 2.0 * (row.n as f64).powi(3) / row.ms / 1e9;
        say(
            &self.bar,
            format!(
                "{:10} {:>6} {:12} {:>10.3} {:>10.3} {:>8.2} {:>9.1} {}",
                row.precision,
                row.n,
                row.method,
                row.ms,
                row.bound_ms,
                row.ms / row.bound_ms,
                tflops,
                row.check
            ),
        );
        self.rows.push(row);
        self.bar.inc(1);
    }

    /// Every size of one product: `base` is the builder without the host
    /// path's options (`.allow_tf32(true)` for TF32). Stops at the first
    /// error (an `Error::Unsupported` among them).
    fn product<T: Product<C>, C: Scalar>(
        &mut self,
        precision: &str,
        base: &Gemm,
        sizes: &[usize],
    ) -> Result<(), Error> {
        // A small product each way first: loads the kernels' modules (and
        // finds an unsupported product) before anything is timed.
        {
            let (a, b) = (random::<T>(256, 1)?, random::<T>(256, 2)?);
            let mut c = Matrix::<C>::zeros(256, 256);
            base.run::<T, C>(&a, &b, &mut c)?;
            let (da, db) = (DeviceMatrix::from_host(&self.dev, &a)?, DeviceMatrix::from_host(&self.dev, &b)?);
            let mut dc = DeviceMatrix::<C>::zeros(&self.dev, 256, 256)?;
            base.run_device::<T, C>(&da, &db, &mut dc)?;
            self.dev.synchronize()?;
        }
        for &n in sizes {
            self.size::<T, C>(precision, base, n)?;
        }
        Ok(())
    }

    /// The four methods of one product at one N.
    fn size<T: Product<C>, C: Scalar>(&mut self, precision: &str, base: &Gemm, n: usize) -> Result<(), Error> {
        let dev = self.dev.clone();
        self.bar.set_message(format!("{precision} n = {n}: inputs"));
        let a = random::<T>(n, 2 * n as u64 + 1)?;
        let b = random::<T>(n, 2 * n as u64 + 2)?;
        let (ab_bytes, c_bytes) = ((2 * n * n * size_of::<T>()) as f64, (n * n * size_of::<C>()) as f64);

        // The kernel alone, on device operands, and the reference C.
        self.bar.set_message(format!("{precision} n = {n}: kernel"));
        let (want, bound_ms) = {
            let (da, db) = (DeviceMatrix::from_host(&dev, &a)?, DeviceMatrix::from_host(&dev, &b)?);
            let mut dc = DeviceMatrix::<C>::zeros(&dev, n, n)?;
            let kernel_ms = time(|| {
                base.run_device::<T, C>(&da, &db, &mut dc)?;
                dev.synchronize()
            })?;
            let bound_ms = (ab_bytes / self.up_gbs / 1e6).max(c_bytes / self.down_gbs / 1e6).max(kernel_ms);
            let precision = precision.to_string();
            self.row(Row { precision, n, method: "kernel", ms: kernel_ms, bound_ms, check: "reference" });
            (dc.to_host()?, bound_ms)
        }; // the device operands are freed here, leaving the host path the memory

        let (pa, pb) = (a.to_pinned(&dev)?, b.to_pinned(&dev)?);
        let mut pc = Matrix::<C>::pinned(&dev, n, n, Layout::RowMajor)?;
        let mut c = Matrix::<C>::zeros(n, n);
        let budget = (2 * n * n * size_of::<T>() + n * n * size_of::<C>()) / 4;
        let host = match self.streams {
            Some(s) => base.clone().host_streams(s),
            None => base.clone(),
        };
        let out_of_core = host.clone().memory_budget(budget);
        // Out of core with an f32 C, k is cut into chunks: exact while every
        // partial sum is an integer below 2^24 (|a b| <= 16), else the bound.
        let ooc_tol = if size_of::<C>() == 4 && C::EPSILON > 0.0 && 16 * n > 1 << 24 {
            2.0 * n as f64 * C::EPSILON * 16.0 * n as f64
        } else {
            0.0
        };
        for method in &METHODS[1..] {
            self.bar.set_message(format!("{precision} n = {n}: {method}"));
            // Poisoned, so a C left unwritten cannot pass.
            c.fill(C::POISON);
            pc.fill(C::POISON);
            let (ms, got, tol) = match *method {
                "pinned" => (time(|| host.run::<T, C>(&pa, &pb, &mut pc))?, &pc, 0.0),
                "pageable" => (time(|| host.run::<T, C>(&a, &b, &mut c))?, &c, 0.0),
                _ => (time(|| out_of_core.run::<T, C>(&pa, &pb, &mut pc))?, &pc, ooc_tol),
            };
            let check = match first_mismatch(got.as_slice(), want.as_slice(), tol) {
                None if tol == 0.0 => "bits",
                None => "within",
                Some(idx) => {
                    let (i, j) = (idx / n, idx % n);
                    say(
                        &self.bar,
                        format!(
                            "MISMATCH {precision} n = {n} {method}: C({i}, {j}) = {:?} but the kernel on device \
                         matrices gives {:?} (allowed |diff|: {tol})",
                            got.as_slice()[idx],
                            want.as_slice()[idx]
                        ),
                    );
                    self.failed = true;
                    "FAIL"
                }
            };
            self.row(Row { precision: precision.to_string(), n, method, ms, bound_ms, check });
        }
        Ok(())
    }
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let out = args.iter().position(|a| a == "--out").map(|i| std::path::PathBuf::from(&args[i + 1]));
    let sizes: Vec<usize> = list(&args, "--sizes")
        .map(|l| l.iter().map(|s| s.parse().expect("--sizes: comma-separated integers")).collect())
        .unwrap_or(vec![4096]);
    let types = list(&args, "--types").unwrap_or(TYPES.map(String::from).into());
    if let Some(t) = types.iter().find(|t| !TYPES.contains(&t.as_str())) {
        eprintln!("unknown type {t:?} in --types; the types are {}", TYPES.join(","));
        std::process::exit(2);
    }
    let dev = gemm::default_device()?;
    if args.iter().any(|a| a == "--no-event-tracking") {
        // A diagnosis: cudarc orders every use of a buffer across streams
        // with events unless this is off (the host path's workspaces are
        // shared by its streams).
        // SAFETY: this program synchronizes every call it makes before the
        // next; no buffer is used on two streams at once by it.
        unsafe { dev.context().disable_event_tracking() };
        println!("# cudarc's event tracking off");
    }
    // Pinned copy rates: one 256 MiB buffer each way, the best of 7.
    let (up_gbs, down_gbs) = {
        let bytes = 256usize << 20;
        let s = dev.stream();
        // SAFETY: written by the copies before being read.
        let mut host = unsafe { dev.context().alloc_pinned::<u8>(bytes) }?;
        let mut d = s.alloc_zeros::<u8>(bytes)?;
        let up = best(|| {
            s.memcpy_htod(&host, &mut d)?;
            Ok(s.synchronize()?)
        })?;
        let down = best(|| {
            s.memcpy_dtoh(&d, &mut host)?;
            Ok(s.synchronize()?)
        })?;
        // Both ways at once, on two streams: whether the copy engines
        // overlap uploads and downloads (the bound assumes they do).
        let s2 = dev.context().new_stream()?;
        // SAFETY: as above.
        let mut host2 = unsafe { dev.context().alloc_pinned::<u8>(bytes) }?;
        let d2 = s2.alloc_zeros::<u8>(bytes)?;
        let both = best(|| {
            s.memcpy_htod(&host, &mut d)?;
            s2.memcpy_dtoh(&d2, &mut host2)?;
            s.synchronize()?;
            Ok(s2.synchronize()?)
        })?;
        println!(
            "# 256 MiB each way at once: {both:.2} ms (one way: {up:.2} ms up, {down:.2} ms down): {:.1} GB/s in all",
            2.0 * bytes as f64 / both / 1e6
        );
        (bytes as f64 / up / 1e6, bytes as f64 / down / 1e6)
    };
    if args.iter().any(|a| a == "--copy2d") {
        copy_2d_rates(&dev)?;
    }
    let (date, commit) = (today_utc(), commit());
    let (major, minor) = dev.compute_capability();
    println!("# {} ({} SMs, compute capability {major}.{minor}), {date}, commit {commit}", dev.name(), dev.sm_count());
    println!("# pinned copies: {up_gbs:.1} GB/s up, {down_gbs:.1} GB/s down");
    println!(
        "{:10} {:>6} {:12} {:>10} {:>10} {:>8} {:>9} check",
        "product", "N", "method", "ms", "bound_ms", "ms/bound", "TFLOP/s"
    );
    let bar = ProgressBar::new((types.len() * sizes.len() * METHODS.len()) as u64);
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}").expect("template"));
    let streams = args.iter().position(|a| a == "--streams").map(|i| args[i + 1].parse().expect("--streams N"));
    let mut bench = Bench { dev: dev.clone(), up_gbs, down_gbs, streams, bar, rows: Vec::new(), failed: false };
    // Another error ends the run, after the CSV of the rows so far.
    let mut fatal = None;
    for (p, ty) in types.iter().enumerate() {
        // `--stage8`: stage 8's mma.sync kernels (no tensor maps) instead of stage 9's.
        let plain = if args.iter().any(|a| a == "--stage8") {
            Gemm::new().stage(gemm::tuning::Stage::TensorCore)
        } else {
            Gemm::new()
        };
        let (precision, result) = match ty.as_str() {
            "f16-f32" => ("f16->f32", bench.product::<f16, f32>("f16->f32", &plain, &sizes)),
            "f16-f16" => ("f16->f16", bench.product::<f16, f16>("f16->f16", &plain, &sizes)),
            "bf16-bf16" => ("bf16->bf16", bench.product::<bf16, bf16>("bf16->bf16", &plain, &sizes)),
            "bf16-f32" => ("bf16->f32", bench.product::<bf16, f32>("bf16->f32", &plain, &sizes)),
            "i8-i32" => ("i8->i32", bench.product::<i8, i32>("i8->i32", &plain, &sizes)),
            _ => ("tf32->f32", bench.product::<f32, f32>("tf32->f32", &Gemm::new().allow_tf32(true), &sizes)),
        };
        match result {
            Ok(()) => {}
            Err(e @ Error::Unsupported { .. }) => {
                say(&bench.bar, format!("{precision}: skipped: {e}"));
                bench.bar.set_position(((p + 1) * sizes.len() * METHODS.len()) as u64);
            }
            Err(e) => {
                fatal = Some(e);
                break;
            }
        }
    }
    bench.bar.finish_and_clear();
    if let Some(dir) = out {
        std::fs::create_dir_all(&dir).expect("output directory");
        let mut csv = String::from("device,date,commit,n,precision,method,ms,bound_ms,check\n");
        for r in &bench.rows {
            csv += &format!(
                "{},{date},{commit},{},{},{},{:.4},{:.4},{}\n",
                dev.name(),
                r.n,
                r.precision,
                r.method,
                r.ms,
                r.bound_ms,
                r.check
            );
        }
        std::fs::write(dir.join("host_mixed.csv"), csv).expect("write host_mixed.csv");
        println!("wrote {}", dir.join("host_mixed.csv").display());
    }
    if let Some(e) = fatal {
        return Err(e);
    }
    if bench.failed {
        eprintln!("a host-path result differs from the kernel's (see MISMATCH above)");
        std::process::exit(1);
    }
    Ok(())
}

/// `--copy2d`: page-locked copy rates of 256 MiB as lines of 2, 4, ... 64
/// KiB taken from (or put into) lines 4 times as long (a column panel of a
/// quarter of a row-major matrix), each way: how narrow the host path's
/// panels and tiles may be before their 2D copies slow down.
fn copy_2d_rates(dev: &Arc<Device>) -> Result<(), Error> {
    use gemm::cudarc::driver::sys;
    let bytes = 256usize << 20;
    let s = dev.stream();
    // SAFETY: written by the copies before being read (never read here).
    let host = unsafe { dev.context().alloc_pinned::<u8>(4 * bytes) }?;
    let d = s.alloc_zeros::<u8>(bytes)?;
    let (hp, dp) = (host.as_ptr()? as *mut u8, {
        use gemm::cudarc::driver::DevicePtr;
        d.device_ptr(s).0
    });
    for width in [2usize << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10] {
        let height = bytes / width;
        let mut rates = Vec::new();
        for up in [true, false] {
            let copy = || -> Result<(), Error> {
                let (h, dv) = (sys::CUmemorytype::CU_MEMORYTYPE_HOST, sys::CUmemorytype::CU_MEMORYTYPE_DEVICE);
                let p = sys::CUDA_MEMCPY2D {
                    srcXInBytes: 0,
                    srcY: 0,
                    srcMemoryType: if up { h } else { dv },
                    srcHost: if up { hp as *const core::ffi::c_void } else { core::ptr::null() },
                    srcDevice: if up { 0 } else { dp },
                    srcArray: core::ptr::null_mut(),
                    srcPitch: if up { 4 * width } else { width },
                    dstXInBytes: 0,
                    dstY: 0,
                    dstMemoryType: if up { dv } else { h },
                    dstHost: if up { core::ptr::null_mut() } else { hp as *mut core::ffi::c_void },
                    dstDevice: if up { dp } else { 0 },
                    dstArray: core::ptr::null_mut(),
                    dstPitch: if up { width } else { 4 * width },
                    WidthInBytes: width,
                    Height: height,
                };
                // SAFETY: the host buffer (1 GiB) holds `height` lines of
                // 4 x `width` bytes, the device buffer `height` lines of
                // `width` (256 MiB).
                unsafe { sys::cuMemcpy2DAsync_v2(&p, s.cu_stream()) }.result()?;
                Ok(s.synchronize()?)
            };
            let ms = best(copy)?;
            rates.push(bytes as f64 / ms / 1e6);
        }
        // Both ways at once: up on `s`, down on a second stream, into and
        // from separate buffers.
        let s2 = dev.context().new_stream()?;
        let d2 = s2.alloc_zeros::<u8>(bytes)?;
        let dp2 = {
            use gemm::cudarc::driver::DevicePtr;
            d2.device_ptr(&s2).0
        };
        let hp2 = hp.wrapping_add(2 * bytes);
        let both = best(|| {
            let (h, dv) = (sys::CUmemorytype::CU_MEMORYTYPE_HOST, sys::CUmemorytype::CU_MEMORYTYPE_DEVICE);
            let line = |up: bool, hptr: *mut u8, dptr: u64| sys::CUDA_MEMCPY2D {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: if up { h } else { dv },
                srcHost: if up { hptr as *const core::ffi::c_void } else { core::ptr::null() },
                srcDevice: if up { 0 } else { dptr },
                srcArray: core::ptr::null_mut(),
                srcPitch: if up { 4 * width } else { width },
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: if up { dv } else { h },
                dstHost: if up { core::ptr::null_mut() } else { hptr as *mut core::ffi::c_void },
                dstDevice: if up { dptr } else { 0 },
                dstArray: core::ptr::null_mut(),
                dstPitch: if up { width } else { 4 * width },
                WidthInBytes: width,
                Height: height / 2,
            };
            let (pu, pd) = (line(true, hp, dp), line(false, hp2, dp2));
            // SAFETY: half of each buffer as above; the two copies touch
            // different host and device ranges.
            unsafe {
                sys::cuMemcpy2DAsync_v2(&pu, s.cu_stream()).result()?;
                sys::cuMemcpy2DAsync_v2(&pd, s2.cu_stream()).result()?;
            }
            s.synchronize()?;
            Ok(s2.synchronize()?)
        })?;
        println!(
            "# 2D copies, lines of {:2} KiB, every 4th: {:.1} GB/s up, {:.1} GB/s down, {:.1} GB/s both ways at once",
            width >> 10,
            rates[0],
            rates[1],
            bytes as f64 / both / 1e6
        );
    }
    Ok(())
}
