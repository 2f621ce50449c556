//! Products over several GPUs of one host, timed beside their bounds and
//! beside cuBLASXt:
//!
//! - **host to host** (`Gemm::devices`): f64 and bf16 N x N x N products of
//!   host matrices, from pageable (`Vec`) and page-locked
//!   ([`gemm::Matrix::pinned`]) memory, on 1 and 2 (or `--gpus`) GPUs;
//!   f64 also through `cublasXtDgemm` on the same GPUs (NVIDIA, "cuBLAS: the
//!   cuBLASXt API"). Each multi-GPU result is checked to have the bits of
//!   the one-GPU result.
//! - **SUMMA** ([`gemm::DistMatrix`], `Gemm::run_distributed`): f64 and
//!   bf16 matrices already on the GPUs, 2D block-cyclic, on a 1 x 1 grid
//!   and on the grid of all GPUs, beside the one-GPU product of device
//!   matrices (`run_device`); with `--transposed`, also op(A) = T on A
//!   stored transposed (the call redistributes it, `DistMatrix::transpose`),
//!   and that transpose timed alone.
//!
//! Times are wall-clock from the call to its return (the host rows) or to
//! the end of the work on every GPU (the device rows), the median of 3
//! timed runs after a warm-up (1 run where the warm-up took over 2 s).
//! Inputs are uniform random in [-1, 1).
//!
//! Bounds per row, from rates measured in this run: **transfer**, the
//! largest over the GPUs of (bytes it uploads / its page-locked upload
//! rate, bytes it downloads / its download rate) for the host rows, and of
//! (bytes it receives by broadcast / the peer-to-peer copy rate, peer
//! access on) for SUMMA;
//! **compute**, the one-GPU product of device matrices times the largest
//! GPU's share of the flops.
//!
//! Run: `cargo run --release --example several_gpus [-- --sizes 16384,32768]
//! [--gpus 1,2] [--parts host,summa] [--types f64,bf16] [--blocks 2048,8192]
//! [--streams 2,8] [--diagnose] [--transposed] [--no-xt] [--out DIR]`; writes
//! `DIR/multi_gpu.csv` (device, date, commit, gpus, precision, m, n, k,
//! method, ms, tflops, transfer_ms, compute_ms) when `--out` is given.

use gemm::bench::{commit, today_utc};
use gemm::cublas::CublasXt;
use gemm::half::bf16;
use gemm::{Device, DeviceMatrix, DistMatrix, Gemm, Matrix, ProcessGrid, Product, Scalar};
use rayon::prelude::*;
use std::sync::Arc;

/// Median ms of `f` over 3 runs after a warm-up; the warm-up alone when it
/// took over 2 s.
fn time(f: impl FnMut() -> Result<(), gemm::Error>) -> Result<f64, gemm::Error> {
    gemm::bench::wall_ms(f, 2000.0)
}

fn list<T: std::str::FromStr>(args: &[String], flag: &str) -> Option<Vec<T>> {
    let i = args.iter().position(|a| a == flag)?;
    Some(args[i + 1].split(',').map(|s| s.parse().ok().expect("a comma-separated list")).collect())
}

/// An n x n matrix of uniform random values in [-1, 1), filled on all cores
/// (SplitMix64 per row, from `seed`).
fn random<T: Scalar>(n: usize, seed: u64) -> Matrix<T> {
    let mut x = Matrix::<T>::zeros(n, n);
    x.as_mut_slice().par_chunks_mut(n.max(1)).enumerate().for_each(|(i, row)| {
        let mut s = seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for v in row {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            *v = T::from_f64((z >> 11) as f64 / (1u64 << 52) as f64 - 1.0);
        }
    });
    x
}

/// The bytes of a matrix's storage.
fn bytes<T: Scalar>(x: &Matrix<T>) -> &[u8] {
    let s = x.as_slice();
    // SAFETY: Scalar types are plain data without padding.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
}

/// Peer-to-peer copy rate from GPU `from` to GPU `to` (GB/s): 1 GiB, with
/// peer access on (NVLink where the GPUs have it, as NCCL uses).
fn peer_rate(from: &Arc<Device>, to: &Arc<Device>) -> Result<f64, gemm::Error> {
    use gemm::cudarc::driver::{sys, DevicePtr, DevicePtrMut};
    to.context().bind_to_thread()?;
    // SAFETY: two live contexts; "already enabled" is fine.
    let r = unsafe { sys::cuCtxEnablePeerAccess(from.context().cu_ctx(), 0) };
    assert!(
        matches!(r, sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED),
        "cuCtxEnablePeerAccess: {r:?}"
    );
    let bytes = 1usize << 30;
    let src = from.stream().alloc_zeros::<u8>(bytes)?;
    let s = to.stream();
    let mut dst = s.alloc_zeros::<u8>(bytes)?;
    from.synchronize()?;
    let ms = time(|| {
        // Each buffer's pointer on its own context's stream (cudarc's
        // events belong to one context).
        let (sp, _g1) = src.device_ptr(from.stream());
        to.context().bind_to_thread()?;
        let (dp, _g2) = dst.device_ptr_mut(s);
        // SAFETY: two live allocations of `bytes` bytes, on their contexts.
        let r = unsafe {
            sys::cuMemcpyPeerAsync(dp, to.context().cu_ctx(), sp, from.context().cu_ctx(), bytes, s.cu_stream())
        };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuMemcpyPeerAsync");
        Ok(s.synchronize()?)
    })?;
    Ok(bytes as f64 / ms / 1e6)
}

/// `r`, naming the step on stderr when it failed.
fn step<T>(what: &str, r: Result<T, gemm::Error>) -> Result<T, gemm::Error> {
    r.inspect_err(|e| eprintln!("# {what} failed: {e}"))
}

/// One row of the table.
struct Row {
    gpus: usize,
    precision: &'static str,
    n: usize,
    method: String,
    ms: f64,
    transfer_ms: f64,
    compute_ms: f64,
}

struct Bench {
    /// The CSV being written, a row at a time (`--out`).
    csv: Option<std::fs::File>,
    /// Its fixed columns: device, date, commit.
    stamp: String,
    /// Extra stream counts to time the host rows with (`--streams`).
    streams: Vec<usize>,
    /// Whether to time cuBLASXt (f64; not with `--no-xt`).
    xt: bool,
    /// Whether to time GPU 0 alone on its block (`--diagnose`).
    diagnose: bool,
    /// Whether to time SUMMA with op(A) = T too (`--transposed`).
    transposed: bool,
    devices: Vec<Arc<Device>>,
    rates: Vec<(f64, f64)>,
    rows: Vec<Row>,
}

impl Bench {
    fn push(&mut self, row: Row) {
        let flops = 2.0 * (row.n as f64).powi(3);
        println!(
            "{:>5} {:>4} {:>2} GPU(s) {:<24} {:>10.1} ms {:>7.1} TFLOP/s  bounds: transfer {:>8.1} ms, compute {:>8.1} ms",
            row.n,
            row.precision,
            row.gpus,
            row.method,
            row.ms,
            flops / row.ms / 1e9,
            row.transfer_ms,
            row.compute_ms
        );
        if let Some(f) = self.csv.as_mut() {
            use std::io::Write;
            let n = row.n;
            writeln!(
                f,
                "{},{},{},{n},{n},{n},{},{:.2},{:.1},{:.2},{:.2}",
                self.stamp,
                row.gpus,
                row.precision,
                row.method,
                row.ms,
                flops / row.ms / 1e9,
                row.transfer_ms,
                row.compute_ms
            )
            .expect("write multi_gpu.csv");
        }
        self.rows.push(row);
    }

    /// The one-GPU product of device matrices (ms), the compute bound's base.
    fn device_ms<T: Product<T>>(&self, a: &Matrix<T>, b: &Matrix<T>) -> Result<f64, gemm::Error> {
        let dev = &self.devices[0];
        let (da, db) = (DeviceMatrix::from_host(dev, a)?, DeviceMatrix::from_host(dev, b)?);
        let mut dc = DeviceMatrix::<T>::zeros(dev, a.rows(), b.cols())?;
        time(|| {
            Gemm::new().run_device(&da, &db, &mut dc)?;
            dev.synchronize()
        })
    }

    /// Host to host on `g` GPUs from pageable and page-locked memory, and
    /// cuBLASXt (f64); checks the bits against one GPU.
    fn host<T: Product<T>>(&mut self, n: usize, gpus: &[usize], device_ms: f64) -> Result<(), gemm::Error> {
        let precision = T::NAME;
        let (a, b) = (random::<T>(n, 1), random::<T>(n, 2));
        let dev0 = self.devices[0].clone();
        let (pa, pb) = (a.to_pinned(&dev0)?, b.to_pinned(&dev0)?);
        let mut pc = Matrix::<T>::pinned(&dev0, n, n, gemm::Layout::RowMajor)?;
        let mut c = Matrix::<T>::zeros(n, n);
        let mut one_gpu: Option<Matrix<T>> = None;
        let e = std::mem::size_of::<T>() as f64;
        for &g in gpus {
            let group = self.devices[..g].to_vec();
            let gemm = Gemm::new().devices(&group);
            let split = gemm.plan_for::<T, T>(n, n, n)?.devices;
            // Bounds: each GPU's block of C from its rows of A and columns of B.
            let (mut transfer, mut share) = (0f64, 0f64);
            for (p, (up, down)) in self.rates[..g].iter().enumerate() {
                let (rows, cols) = match &split {
                    Some(s) => (s.blocks[p].rows.len() as f64, s.blocks[p].cols.len() as f64),
                    None => (n as f64, n as f64),
                };
                let (up_bytes, down_bytes) = ((rows + cols) * n as f64 * e, rows * cols * e);
                transfer = transfer.max(up_bytes / up / 1e6).max(down_bytes / down / 1e6);
                share = share.max(rows * cols / (n as f64 * n as f64));
            }
            let compute = device_ms * share;
            c.fill(T::POISON);
            let ms = time(|| gemm.run(&a, &b, &mut c))?;
            let row = |method: &str, ms| Row {
                gpus: g,
                precision,
                n,
                method: method.into(),
                ms,
                transfer_ms: transfer,
                compute_ms: compute,
            };
            self.push(row("gemm_pageable", ms));
            let ms = time(|| gemm.run(&pa, &pb, &mut pc))?;
            self.push(row("gemm_pinned", ms));
            // Diagnostics: other stream counts; and one GPU alone on the
            // first GPU's block of C (the same work, no neighbour).
            for st in self.streams.clone() {
                let ms = time(|| gemm.clone().host_streams(st).run(&pa, &pb, &mut pc))?;
                self.push(row(&format!("gemm_pinned_s{st}"), ms));
            }
            if let (Some(split), true) = (&split, self.diagnose) {
                let (r, cl) = (split.blocks[0].rows.clone(), split.blocks[0].cols.clone());
                let (sa, sb) = (pa.view(r.start, 0, r.len(), n)?, pb.view(0, cl.start, n, cl.len())?);
                let mut sc = Matrix::<T>::pinned(&dev0, r.len(), cl.len(), gemm::Layout::RowMajor)?;
                let ms = time(|| Gemm::new().device(&dev0).run(sa, sb, &mut sc))?;
                self.push(row("gemm_pinned_block0_alone", ms));
            }
            match &one_gpu {
                None => one_gpu = Some(c.clone()),
                Some(one) => {
                    let same = bytes(one) == bytes(&c) && bytes(one) == bytes(&pc);
                    println!("# {precision} {n}: {g} GPUs give the one-GPU bits: {same}");
                    assert!(same, "{g} GPUs differ from one");
                }
            }
            // cuBLASXt has no bf16 GEMM from host memory: f64 only.
            use std::any::Any;
            fn f64s<T: Scalar>(x: &Matrix<T>) -> Option<&Matrix<f64>> {
                (x as &dyn Any).downcast_ref::<Matrix<f64>>()
            }
            if let (Some(a), Some(b), Some(pa), Some(pb), true) = (f64s(&a), f64s(&b), f64s(&pa), f64s(&pb), self.xt) {
                let xt = CublasXt::with_devices(&group)?;
                let c = (&mut c as &mut dyn Any).downcast_mut::<Matrix<f64>>().expect("T is f64");
                let ms = time(|| xt.dgemm(a, b, c))?;
                self.push(row("cublasxt_pageable", ms));
                let pc = (&mut pc as &mut dyn Any).downcast_mut::<Matrix<f64>>().expect("T is f64");
                let ms = time(|| xt.dgemm(pa, pb, pc))?;
                self.push(row("cublasxt_pinned", ms));
            }
        }
        Ok(())
    }

    /// The `parts` (host, summa) of one type at n^3, beside the one-GPU
    /// product of device matrices.
    fn all<T: Product<T>>(
        &mut self,
        n: usize,
        gpus: &[usize],
        blocks: &[usize],
        parts: &[String],
    ) -> Result<(), gemm::Error> {
        let dms = self.device_ms(&random::<T>(n, 5), &random::<T>(n, 6))?;
        if parts.iter().any(|p| p == "host") {
            self.host::<T>(n, gpus, dms)?;
        }
        if parts.iter().any(|p| p == "summa") {
            self.summa::<T>(n, gpus, blocks, dms)?;
        }
        Ok(())
    }

    /// SUMMA on a 1 x 1 grid and on the grid of each GPU count, beside the
    /// one-GPU device product.
    fn summa<T: Product<T>>(
        &mut self,
        n: usize,
        gpus: &[usize],
        blocks: &[usize],
        device_ms: f64,
    ) -> Result<(), gemm::Error> {
        let precision = T::NAME;
        let (a, b) = (random::<T>(n, 3), random::<T>(n, 4));
        let e = std::mem::size_of::<T>() as f64;
        self.push(Row {
            gpus: 1,
            precision,
            n,
            method: "device".into(),
            ms: device_ms,
            transfer_ms: 0.0,
            compute_ms: device_ms,
        });
        // The one-GPU product of the same operands, to check each grid's result against.
        let want = {
            let dev = &self.devices[0];
            let (da, db) = (DeviceMatrix::from_host(dev, &a)?, DeviceMatrix::from_host(dev, &b)?);
            let mut dc = DeviceMatrix::<T>::zeros(dev, n, n)?;
            Gemm::new().run_device(&da, &db, &mut dc)?;
            dc.to_host()?
        };
        for (&g, &block) in gpus.iter().flat_map(|g| blocks.iter().map(move |b| (g, b))) {
            let grid_shape = gemm::tuning::distribution::device_grid(n, n, n, g);
            let grid = ProcessGrid::from_devices(&self.devices[..g], grid_shape.rows, grid_shape.cols)?;
            let (da, db) =
                (DistMatrix::from_host(&grid, &a, block, block)?, DistMatrix::from_host(&grid, &b, block, block)?);
            let mut dc = DistMatrix::<T>::zeros(&grid, n, n, block, block)?;
            let ms = step("run_distributed", time(|| Gemm::new().run_distributed(&da, &db, &mut dc)))?;
            let mut got = Matrix::<T>::zeros(n, n);
            dc.to_host(&mut got)?;
            let (mut diff, mut top) = (0f64, 0f64);
            for (x, y) in got.as_slice().iter().zip(want.as_slice()) {
                diff = diff.max((x.as_f64() - y.as_f64()).abs());
                top = top.max(y.as_f64().abs());
            }
            let same = bytes(&got) == bytes(&want);
            println!(
                "# {precision} {n} on {g} GPU(s), blocks {block}: max |SUMMA - one GPU| = {diff:.3e} (max |C| {top:.3e}); same bits: {same}"
            );
            // Each rank receives the A panels of its process row and the B
            // panels of its process column that it does not hold.
            let (pr, pc) = (grid_shape.rows as f64, grid_shape.cols as f64);
            let nf = n as f64;
            let received = (nf / pr) * nf * (1.0 - 1.0 / pc) * e + nf * (nf / pc) * (1.0 - 1.0 / pr) * e;
            let peer =
                if g > 1 { step("peer_rate", peer_rate(&self.devices[0], &self.devices[1]))? } else { f64::INFINITY };
            let row = |suffix: &str, ms: f64| Row {
                gpus: g,
                precision,
                n,
                method: format!("summa_{}x{}_b{block}{suffix}", grid_shape.rows, grid_shape.cols),
                ms,
                transfer_ms: received / peer / 1e6,
                compute_ms: device_ms / g as f64,
            };
            self.push(row("", ms));
            if self.transposed {
                // op(A) = T: A stored transposed, redistributed as its
                // transpose inside the call (one chunk: the same bits).
                drop(da);
                let dat = DistMatrix::from_host(&grid, a.t(), block, block)?;
                let t_ms = step("transpose", time(|| dat.transpose().map(drop)))?;
                let ms = step(
                    "run_distributed op(A) = T",
                    time(|| Gemm::new().op_a(gemm::Op::T).run_distributed(&dat, &db, &mut dc)),
                )?;
                let mut got_t = Matrix::<T>::zeros(n, n);
                dc.to_host(&mut got_t)?;
                let same = bytes(&got_t) == bytes(&got);
                println!(
                    "# {precision} {n} on {g} GPU(s), blocks {block}: op(A) = T {ms:.1} ms (of which a transpose \
                     alone takes {t_ms:.1} ms); same bits as op(A) = N: {same}"
                );
                self.push(row("_ta", ms));
            }
        }
        Ok(())
    }
}

fn main() -> Result<(), gemm::Error> {
    let args: Vec<String> = std::env::args().collect();
    let out = args.iter().position(|a| a == "--out").map(|i| std::path::PathBuf::from(&args[i + 1]));
    let sizes: Vec<usize> = list(&args, "--sizes").unwrap_or(vec![16384, 32768]);
    let gpus: Vec<usize> = list(&args, "--gpus").unwrap_or(vec![1, 2]);
    let parts: Vec<String> = list(&args, "--parts").unwrap_or(vec!["host".into(), "summa".into()]);
    let types: Vec<String> = list(&args, "--types").unwrap_or(vec!["f64".into(), "bf16".into()]);
    let blocks: Vec<usize> = list(&args, "--blocks").unwrap_or(vec![2048]);
    let count = gpus.iter().copied().max().unwrap_or(1);
    let devices = (0..count).map(Device::new).collect::<Result<Vec<_>, _>>()?;
    let rates = devices.iter().map(|d| gemm::bench::pinned_copy_rates(d, 512 << 20)).collect::<Result<Vec<_>, _>>()?;
    let (date, commit) = (today_utc(), commit());
    println!("# {} x {count}, {date}, commit {commit}", devices[0].name());
    for (d, (up, down)) in devices.iter().zip(&rates) {
        println!("# GPU {}: page-locked copies {up:.1} GB/s up, {down:.1} GB/s down", d.context().ordinal());
    }
    let streams: Vec<usize> = list(&args, "--streams").unwrap_or_default();
    let diagnose = args.iter().any(|a| a == "--diagnose");
    let transposed = args.iter().any(|a| a == "--transposed");
    let csv = out.map(|dir| {
        use std::io::Write;
        std::fs::create_dir_all(&dir).expect("output folder");
        let mut f = std::fs::File::create(dir.join("multi_gpu.csv")).expect("create multi_gpu.csv");
        writeln!(f, "device,date,commit,gpus,precision,m,n,k,method,ms,tflops,transfer_ms,compute_ms").expect("write");
        f
    });
    let stamp = format!("{},{date},{commit}", devices[0].name());
    let xt = !args.iter().any(|a| a == "--no-xt");
    let mut bench = Bench { csv, stamp, streams, xt, diagnose, transposed, devices, rates, rows: Vec::new() };
    for &n in &sizes {
        for t in &types {
            match t.as_str() {
                "f64" => bench.all::<f64>(n, &gpus, &blocks, &parts)?,
                "bf16" => bench.all::<bf16>(n, &gpus, &blocks, &parts)?,
                other => panic!("--types: f64 or bf16, not {other}"),
            }
        }
    }
    Ok(())
}
