//! Measuring: CUDA-event timing, GFLOP/s, and the run's provenance
//! (device, date, commit) for results files.

use crate::api::gemm::Gemm;
use crate::check::{random_matrix_in, Comparison, Reference};
use crate::cublas::Cublas;
use crate::device::Device;
use crate::element::Element;
use crate::error::{DriverContext, Error};
use crate::operands::device_matrix::DeviceMatrix;
use crate::operands::matrix::Matrix;
use cudarc::driver::sys::CUevent_flags;
use gemm_core::shape::{Layout, Op};
use gemm_core::{gemm_flops, KernelConfig};
use std::sync::Arc;

/// Kernel times of repeated runs, in milliseconds (CUDA events).
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Median.
    pub median_ms: f64,
    /// Fastest.
    pub min_ms: f64,
    /// Slowest.
    pub max_ms: f64,
    /// Timed runs.
    pub reps: usize,
}

/// Times work enqueued by `f` with CUDA events on the device's stream: one
/// warm-up call, one probe, then enough timed runs to fill about `budget_ms`
/// (at least 3, at most `max_reps`), and returns the median and range.
/// `f(i)` is the i-th call; it must only enqueue work on `device.stream()`.
///
/// # Errors
/// Whatever `f` returns, or [`Error::Driver`] from the events.
pub fn time_kernel(
    device: &Device,
    budget_ms: f64,
    max_reps: usize,
    mut f: impl FnMut(usize) -> Result<(), Error>,
) -> Result<Timing, Error> {
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut calls = 0;
    let mut timed = |calls: &mut usize| -> Result<f64, Error> {
        let start = device.stream().record_event(flags).during("cuEventRecord")?;
        f(*calls)?;
        *calls += 1;
        let end = device.stream().record_event(flags).during("cuEventRecord")?;
        end.synchronize().during("cuEventSynchronize")?;
        Ok(start.elapsed_ms(&end).during("cuEventElapsedTime")? as f64)
    };
    timed(&mut calls)?; // warm-up: module function load, clocks up
    let probe = timed(&mut calls)?;
    let reps = ((budget_ms / probe.max(1e-3)) as usize).clamp(3, max_reps.max(3));
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        times.push(timed(&mut calls)?);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    Ok(Timing {
        median_ms: times[times.len() / 2],
        min_ms: times[0],
        max_ms: times[times.len() - 1],
        reps: times.len(),
    })
}

/// Wall-clock milliseconds of `f` (a blocking call, such as a host
/// product): the median of 3 timed runs after a warm-up, or the warm-up
/// alone when it took over `one_run_above_ms` (a long call is timed once).
///
/// # Errors
/// Whatever `f` returns.
pub fn wall_ms(mut f: impl FnMut() -> Result<(), Error>, one_run_above_ms: f64) -> Result<f64, Error> {
    let t0 = std::time::Instant::now();
    f()?;
    let first = t0.elapsed().as_secs_f64() * 1e3;
    if first > one_run_above_ms {
        return Ok(first);
    }
    let mut t = [0.0; 3];
    for x in &mut t {
        let t0 = std::time::Instant::now();
        f()?;
        *x = t0.elapsed().as_secs_f64() * 1e3;
    }
    t.sort_by(f64::total_cmp);
    Ok(t[1])
}

/// Page-locked copy rates of `device` in GB/s (host to device, device to
/// host): `bytes` each way on the device's stream, each the median of 3
/// copies after a warm-up ([`wall_ms`]).
///
/// # Errors
/// [`Error::Driver`] or [`Error::OutOfMemory`] from the allocations and copies.
pub fn pinned_copy_rates(device: &Arc<Device>, bytes: usize) -> Result<(f64, f64), Error> {
    let s = device.stream();
    // SAFETY: written by the copies before being read.
    let mut host = unsafe { device.context().alloc_pinned::<u8>(bytes) }?;
    let mut d = s.alloc_zeros::<u8>(bytes)?;
    let up = wall_ms(
        || {
            s.memcpy_htod(&host, &mut d)?;
            Ok(s.synchronize()?)
        },
        f64::INFINITY,
    )?;
    let down = wall_ms(
        || {
            s.memcpy_dtoh(&d, &mut host)?;
            Ok(s.synchronize()?)
        },
        f64::INFINITY,
    )?;
    Ok((bytes as f64 / up / 1e6, bytes as f64 / down / 1e6))
}

/// GFLOP/s of `flops` floating-point operations in `ms` milliseconds.
pub fn gflops(flops: f64, ms: f64) -> f64 {
    flops / (ms * 1e6)
}

/// The commit the binary was built from (`GEMM_COMMIT` at build time, set by
/// `cargo xtask gpu-bundle`), or "unknown".
pub fn commit() -> &'static str {
    option_env!("GEMM_COMMIT").unwrap_or("unknown")
}

/// Today's date in UTC as YYYY-MM-DD.
pub fn today_utc() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Random operands of one m x n x k product on the device, with several
/// copies of A and B to rotate through when they would otherwise sit in L2
/// (so small sizes are not flattered by the cache), and one C. A is stored
/// m x k (op N) or k x m (op T), B k x n or n x k, all three in `layout`.
pub struct Problem<T> {
    /// m, n, k.
    pub dims: (usize, usize, usize),
    /// op(A), op(B).
    pub ops: (Op, Op),
    /// Storage order of A, B and C.
    pub layout: Layout,
    /// (A, B) input sets, as stored; run `i` uses set `i % sets.len()`.
    pub sets: Vec<(DeviceMatrix<T>, DeviceMatrix<T>)>,
    /// The output.
    pub c: DeviceMatrix<T>,
}

impl<T: Element> Problem<T> {
    /// [`Problem::random_with`] for row-major, untransposed operands.
    ///
    /// # Errors
    /// As [`Problem::random_with`].
    pub fn random(device: &Arc<Device>, m: usize, n: usize, k: usize, seed: u64) -> Result<Self, Error> {
        Self::random_with(device, m, n, k, (Op::N, Op::N), Layout::RowMajor, seed)
    }

    /// Draws fresh random A and B in [-1, 1) from `seed`, for op(A) (m x k)
    /// and op(B) (k x n) with the given ops, stored in `layout`, as many sets
    /// as it takes to exceed twice the device's L2 (at most 8).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`] on allocation or copy failure.
    pub fn random_with(
        device: &Arc<Device>,
        m: usize,
        n: usize,
        k: usize,
        ops: (Op, Op),
        layout: Layout,
        seed: u64,
    ) -> Result<Self, Error> {
        let bytes = ((m * k + k * n) * std::mem::size_of::<T>()).max(1);
        let count = (2 * device.l2_bytes()).div_ceil(bytes).clamp(1, 8);
        let stored = |op: Op, rows: usize, cols: usize| if op == Op::N { (rows, cols) } else { (cols, rows) };
        let (a_shape, b_shape) = (stored(ops.0, m, k), stored(ops.1, k, n));
        let mut sets = Vec::with_capacity(count);
        for s in 0..count as u64 {
            let seed_a = seed.wrapping_mul(31).wrapping_add(2 * s);
            let a = random_matrix_in::<T>(a_shape.0, a_shape.1, layout, seed_a);
            let b = random_matrix_in::<T>(b_shape.0, b_shape.1, layout, seed_a + 1);
            sets.push((DeviceMatrix::from_host(device, &a)?, DeviceMatrix::from_host(device, &b)?));
        }
        let c = DeviceMatrix::zeros_in(device, m, n, layout)?;
        Ok(Problem { dims: (m, n, k), ops, layout, sets, c })
    }

    /// `2 m n k`.
    pub fn flops(&self) -> f64 {
        gemm_flops(self.dims.0, self.dims.1, self.dims.2)
    }

    /// `"NN"`, `"NT"`, `"TN"` or `"TT"`: op(A) and op(B) (the `ops` column of the results).
    pub fn ops_name(&self) -> String {
        format!("{}{}", self.ops.0.as_char(), self.ops.1.as_char())
    }

    /// The builder running `config` with this problem's op flags.
    pub fn gemm(&self, config: KernelConfig) -> Gemm {
        gemm_for(config).op_a(self.ops.0).op_b(self.ops.1)
    }

    /// The builder running the default choice with this problem's op flags.
    pub fn default_gemm(&self) -> Gemm {
        Gemm::new().op_a(self.ops.0).op_b(self.ops.1)
    }

    /// The cuBLAS reference for input set 0 ([`Reference::from_cublas`]).
    ///
    /// # Errors
    /// Driver or cuBLAS failures.
    pub fn reference(&self, cublas: &Cublas) -> Result<Reference, Error> {
        Reference::from_cublas(cublas, (self.ops.0, &self.sets[0].0), (self.ops.1, &self.sets[0].1), self.layout)
    }

    /// Poisons C with NaN, runs `gemm` (e.g. [`Problem::gemm`]) on input set
    /// 0 and compares the result with `reference` (from [`Problem::reference`]).
    ///
    /// # Errors
    /// As [`Gemm::run_device`].
    pub fn check_with(&mut self, reference: &Reference, gemm: &Gemm) -> Result<Comparison, Error> {
        let (m, n, _) = self.dims;
        let device = self.c.device().clone();
        self.c = DeviceMatrix::from_host(&device, &Matrix::from_fn_in(m, n, self.layout, |_, _| T::POISON))?;
        gemm.run_device(&self.sets[0].0, &self.sets[0].1, &mut self.c)?;
        Ok(reference.compare(&self.c.to_host()?))
    }

    /// [`Problem::check_with`] for exactly `config`.
    ///
    /// # Errors
    /// As [`Gemm::run_device`].
    pub fn check(&mut self, reference: &Reference, config: KernelConfig) -> Result<Comparison, Error> {
        let gemm = self.gemm(config);
        self.check_with(reference, &gemm)
    }
}

/// One timed configuration.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// Kernel times.
    pub timing: Timing,
    /// GFLOP/s at the median time.
    pub gflops: f64,
}

/// Times `config` on `problem`, rotating input sets ([`time_kernel`] with a
/// budget of `budget_ms`, at most 50 runs).
///
/// # Errors
/// As [`Gemm::run_device`].
pub fn measure<T: Element>(
    problem: &mut Problem<T>,
    config: KernelConfig,
    budget_ms: f64,
) -> Result<Measurement, Error> {
    let gemm = problem.gemm(config);
    measure_with(problem, &gemm, budget_ms)
}

/// Times `gemm` (any builder, e.g. [`Problem::default_gemm`]) on `problem` as [`measure`] does.
///
/// # Errors
/// As [`Gemm::run_device`].
pub fn measure_with<T: Element>(problem: &mut Problem<T>, gemm: &Gemm, budget_ms: f64) -> Result<Measurement, Error> {
    let device = problem.c.device().clone();
    let Problem { sets, c, .. } = problem;
    let timing = time_kernel(&device, budget_ms, 50, |i| {
        let (a, b) = &sets[i % sets.len()];
        gemm.run_device(a, b, &mut *c)
    })?;
    Ok(Measurement { gflops: gflops(problem.flops(), timing.median_ms), timing })
}

/// Times cuBLAS on `problem` (same op flags and layouts) as [`measure`] does.
///
/// # Errors
/// cuBLAS or driver failures.
pub fn measure_cublas<T: Element>(
    cublas: &Cublas,
    problem: &mut Problem<T>,
    budget_ms: f64,
) -> Result<Measurement, Error> {
    let device = problem.c.device().clone();
    let ops = problem.ops;
    let Problem { sets, c, .. } = problem;
    let timing = time_kernel(&device, budget_ms, 50, |i| {
        let (a, b) = &sets[i % sets.len()];
        cublas.gemm_op(ops.0, ops.1, 1.0, a, b, 0.0, &mut *c)
    })?;
    Ok(Measurement { gflops: gflops(problem.flops(), timing.median_ms), timing })
}

/// The builder that runs exactly `config`.
pub fn gemm_for(config: KernelConfig) -> Gemm {
    Gemm::new().kernel(config)
}
