//! Launching one configuration: geometry from gemm-core, checks against the
//! device's limits, then the driver call.

use crate::device::Device;
use crate::element::Element;
use crate::error::{DriverContext, Error};
use crate::registry::{self, EntryPoint};
use cudarc::driver::{CudaStream, CudaView, CudaViewMut, LaunchConfig, PushKernelArg};
use gemm_core::{GemmDims, KernelConfig};

/// The entry point serving `config` and the grid, block and shared memory it
/// needs for `dims` (in kernel form: C row-major), checked against the
/// device's limits.
pub(crate) fn checked_geometry<T: Element>(
    device: &Device,
    config: KernelConfig,
    dims: &GemmDims,
) -> Result<(&'static EntryPoint, LaunchConfig), Error> {
    let entry = registry::entry_point(T::PRECISION, config)?; // validates the configuration
                                                              // Dimensions were validated <= i32::MAX, so they fit u32.
    let g = config.geometry(dims.m as u32, dims.n as u32, T::PRECISION, dims.layouts());
    g.check(device.limits()).map_err(|source| Error::DeviceLimit {
        config,
        device: device.name().to_string(),
        source,
    })?;
    let cfg = LaunchConfig {
        grid_dim: (g.grid[0], g.grid[1], g.grid[2]),
        block_dim: (g.block[0], g.block[1], g.block[2]),
        shared_mem_bytes: g.smem_bytes,
    };
    Ok((entry, cfg))
}

/// Enqueues `C <- alpha * A * B + beta * C` on `stream`, for `dims` in kernel
/// form (C row-major; A and B in `dims.layouts()`, which selects the PTX
/// module). `dims` must have been validated against the three buffers; with
/// `dims.k == 0` the kernel reads neither A nor B.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch<T: Element>(
    device: &Device,
    stream: &CudaStream,
    config: KernelConfig,
    dims: &GemmDims,
    alpha: T,
    a: &CudaView<'_, T>,
    b: &CudaView<'_, T>,
    beta: T,
    c: &mut CudaViewMut<'_, T>,
) -> Result<(), Error> {
    let (entry, cfg) = checked_geometry::<T>(device, config, dims)?;
    if dims.is_empty() {
        return Ok(()); // no element of C to write; a grid of 0 blocks is not a valid launch
    }
    let func = device.function(entry.name, dims.layouts())?; // shared-memory limit raised at load
    let (m, n, k) = (dims.m as u32, dims.n as u32, dims.k as u32);
    let (lda, ldb, ldc) = (dims.lda as u32, dims.ldb as u32, dims.ldc as u32);
    let mut builder = stream.launch_builder(&func);
    builder.arg(&m).arg(&n).arg(&k).arg(&alpha).arg(a).arg(&lda).arg(b).arg(&ldb).arg(&beta).arg(c).arg(&ldc);
    // SAFETY: the argument list matches the entry point's signature
    // (gemm-kernels/src/entry_points.rs: m, n, k, alpha, a, lda, b, ldb, beta,
    // c, ldc); the module is the one compiled for A's and B's layouts; the
    // shapes were validated against the buffers' lengths, so every access
    // the kernel makes lies inside them; the geometry is the configuration's
    // own (gemm-core) and fits the device.
    unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
    Ok(())
}
