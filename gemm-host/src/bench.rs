//! Measuring: CUDA-event timing, GFLOP/s, and the run's provenance
//! (device, date, commit) for results files.

use crate::check::{random_matrix, Comparison, Reference};
use crate::cublas::Cublas;
use crate::device::Device;
use crate::element::Element;
use crate::error::{DriverContext, Error};
use crate::gemm::Gemm;
use crate::matrix::{DeviceMatrix, Matrix};
use cudarc::driver::sys::CUevent_flags;
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
/// (so small sizes are not flattered by the cache), and one C.
pub struct Problem<T> {
    /// m, n, k.
    pub dims: (usize, usize, usize),
    /// (A, B) input sets; run `i` uses set `i % sets.len()`.
    pub sets: Vec<(DeviceMatrix<T>, DeviceMatrix<T>)>,
    /// The output.
    pub c: DeviceMatrix<T>,
}

impl<T: Element> Problem<T> {
    /// Draws fresh random A (m x k) and B (k x n) in [-1, 1) from `seed`, as
    /// many sets as it takes to exceed twice the device's L2 (at most 8).
    ///
    /// # Errors
    /// [`Error::Driver`] on allocation or copy failure.
    pub fn random(device: &Arc<Device>, m: usize, n: usize, k: usize, seed: u64) -> Result<Self, Error> {
        let bytes = ((m * k + k * n) * std::mem::size_of::<T>()).max(1);
        let count = (2 * device.l2_bytes()).div_ceil(bytes).clamp(1, 8);
        let mut sets = Vec::with_capacity(count);
        for s in 0..count as u64 {
            let a = random_matrix::<T>(m, k, seed.wrapping_mul(31).wrapping_add(2 * s));
            let b = random_matrix::<T>(k, n, seed.wrapping_mul(31).wrapping_add(2 * s + 1));
            sets.push((DeviceMatrix::from_host(device, &a)?, DeviceMatrix::from_host(device, &b)?));
        }
        let c = DeviceMatrix::zeros(device, m, n)?;
        Ok(Problem { dims: (m, n, k), sets, c })
    }

    /// `2 m n k`.
    pub fn flops(&self) -> f64 {
        gemm_flops(self.dims.0, self.dims.1, self.dims.2)
    }

    /// The cuBLAS reference for input set 0 ([`Reference::from_cublas`]).
    ///
    /// # Errors
    /// Driver or cuBLAS failures.
    pub fn reference(&self, cublas: &Cublas) -> Result<Reference, Error> {
        Reference::from_cublas(cublas, &self.sets[0].0, &self.sets[0].1)
    }

    /// Poisons C with NaN, runs `config` on input set 0 and compares the
    /// result with `reference` (from [`Problem::reference`]).
    ///
    /// # Errors
    /// As [`Gemm::run_device`].
    pub fn check(&mut self, reference: &Reference, config: KernelConfig) -> Result<Comparison, Error> {
        let (m, n, _) = self.dims;
        let device = self.c.device().clone();
        self.c = DeviceMatrix::from_host(&device, &Matrix::filled(m, n, T::NAN))?;
        gemm_for(config).run_device(&self.sets[0].0, &self.sets[0].1, &mut self.c)?;
        Ok(reference.compare(&self.c.to_host()?))
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
    let device = problem.c.device().clone();
    let gemm = gemm_for(config);
    let Problem { sets, c, .. } = problem;
    let timing = time_kernel(&device, budget_ms, 50, |i| {
        let (a, b) = &sets[i % sets.len()];
        gemm.run_device(a, b, c)
    })?;
    Ok(Measurement { gflops: gflops(problem.flops(), timing.median_ms), timing })
}

/// Times cuBLAS on `problem` as [`measure`] does.
///
/// # Errors
/// cuBLAS or driver failures.
pub fn measure_cublas<T: Element>(
    cublas: &Cublas,
    problem: &mut Problem<T>,
    budget_ms: f64,
) -> Result<Measurement, Error> {
    let device = problem.c.device().clone();
    let Problem { sets, c, .. } = problem;
    let timing = time_kernel(&device, budget_ms, 50, |i| {
        let (a, b) = &sets[i % sets.len()];
        cublas.gemm(1.0, a, b, 0.0, c)
    })?;
    Ok(Measurement { gflops: gflops(problem.flops(), timing.median_ms), timing })
}

/// The builder that runs exactly `config`.
pub fn gemm_for(config: KernelConfig) -> Gemm {
    Gemm::new().kernel(config)
}
