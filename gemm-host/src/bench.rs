//! Measuring: CUDA-event timing, GFLOP/s, and the run's provenance
//! (device, date, commit) for results files.

use crate::device::Device;
use crate::error::{DriverContext, Error};
use cudarc::driver::sys::CUevent_flags;

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

/// Runs `f` `warmup` times, then `reps` times each between two CUDA events on
/// the device's stream, and returns the median (and range) of the event times.
/// `f` must only enqueue work on `device.stream()` (launches, not copies).
///
/// # Errors
/// Whatever `f` returns, or [`Error::Driver`] from the events.
pub fn time_kernel(device: &Device, warmup: usize, reps: usize, mut f: impl FnMut(usize) -> Result<(), Error>) -> Result<Timing, Error> {
    for i in 0..warmup {
        f(i)?;
    }
    device.synchronize()?;
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut times = Vec::with_capacity(reps);
    for i in 0..reps.max(1) {
        let start = device.stream().record_event(flags).during("cuEventRecord")?;
        f(warmup + i)?;
        let end = device.stream().record_event(flags).during("cuEventRecord")?;
        end.synchronize().during("cuEventSynchronize")?;
        times.push(start.elapsed_ms(&end).during("cuEventElapsedTime")? as f64);
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
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
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
