//! Launching one configuration: geometry from gemm-core, checks against the
//! device's limits, then the driver call. Every launch is a batch: a single
//! product is a strided batch of one (`gemm_core::batch`).

use crate::device::registry::{self, EntryPoint};
use crate::device::Device;
use crate::element::Element;
use crate::error::{DriverContext, Error};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, LaunchConfig, PushKernelArg};
use gemm_core::batch::strided_grid;
use gemm_core::{GemmDims, KernelConfig, LaunchGeometry, LimitError};

/// The products of one launch.
#[derive(Clone, Copy)]
pub(crate) enum Batch<'a> {
    /// `count >= 1` products of the launch's shape; product i's A, B and C
    /// lie `i * strides` elements after the first ones.
    Strided {
        /// Products.
        count: usize,
        /// Element strides of A, B and C (0 broadcasts one matrix).
        strides: [usize; 3],
    },
    /// `count >= 1` problems in device memory (`gemm_core::GroupProblem`s as
    /// 8 words each), `blocks` blocks in all.
    Grouped {
        /// The problems, 8 u64 words each.
        problems: &'a CudaSlice<u64>,
        /// Problems.
        count: usize,
        /// Sum of the problems' blocks.
        blocks: u32,
    },
    /// The partial products of a split-K product (`gemm_core::split_k`):
    /// `slices >= 2` products, slice s over k in `s * k_slice ..`, its A and
    /// B `s * strides` elements on, its C the s-th m x n matrix of the
    /// workspace (row-major, ld = n, `strides[2]` = m n).
    SplitK {
        /// Slices (products).
        slices: usize,
        /// Element strides of A, B and C between slices.
        strides: [usize; 3],
        /// k of every slice but the last, a multiple of BK.
        k_slice: u32,
    },
}

/// A, B and C of one launch (C of a batch: its first matrix).
pub(crate) type Operands<'x, 'a, 'b, 'c, T, C> = (&'x CudaView<'a, T>, &'x CudaView<'b, T>, &'x mut CudaViewMut<'c, C>);

/// The lists of a pointer-array or grouped batch: A's, B's and C's
/// buffers, problem i's at index i.
pub(crate) type ListViews<'s, 'x, 'a, 'b, 'c, T, C> =
    (&'s [&'x CudaView<'a, T>], &'s [&'x CudaView<'b, T>], &'s mut [&'x mut CudaViewMut<'c, C>]);

/// One product.
pub(crate) const SINGLE: Batch<'static> = Batch::Strided { count: 1, strides: [0; 3] };

fn device_limit(device: &Device, config: KernelConfig, source: LimitError) -> Error {
    Error::DeviceLimit { config, device: device.name().to_string(), source }
}

/// The entry point serving `config` and the geometry of one product of
/// `dims` (in kernel form: C row-major), checked against the device's limits.
pub(crate) fn product_geometry<T: Element>(
    device: &Device,
    config: KernelConfig,
    dims: &GemmDims,
) -> Result<(&'static EntryPoint, LaunchGeometry), Error> {
    let entry = registry::entry_point(T::PRECISION, config)?; // validates the configuration
                                                              // Dimensions were validated <= i32::MAX, so they fit u32.
    let g = config.geometry(dims.m as u32, dims.n as u32, T::PRECISION, dims.layouts());
    g.check(device.limits()).map_err(|source| device_limit(device, config, source))?;
    Ok((entry, g))
}

/// The entry point and launch of `batch` (see [`Batch`]), checked against the
/// device's limits.
pub(crate) fn checked_geometry<T: Element>(
    device: &Device,
    config: KernelConfig,
    dims: &GemmDims,
    batch: Batch<'_>,
) -> Result<(&'static EntryPoint, LaunchGeometry), Error> {
    let (entry, mut g) = product_geometry::<T>(device, config, dims)?;
    let limits = device.limits();
    match batch {
        Batch::Strided { count, .. } | Batch::SplitK { slices: count, .. } => {
            let count = count.min(u32::MAX as usize) as u32;
            if g.grid[0] > 0 && g.grid[1] > 0 && count > 0 {
                let [max_x, _, max_z] = limits.max_grid_dim;
                g.grid = strided_grid([g.grid[0], g.grid[1]], count, max_x, max_z).ok_or_else(|| {
                    let requested = count.div_ceil((max_x / g.grid[0]).max(1));
                    device_limit(device, config, LimitError::GridDim { axis: 'z', requested, limit: max_z })
                })?;
            }
        }
        Batch::Grouped { blocks, .. } => {
            g.grid = [blocks, 1, 1];
            g.check(limits).map_err(|source| device_limit(device, config, source))?;
        }
    }
    Ok((entry, g))
}

/// Enqueues `C_i <- alpha * A_i * B_i + beta * C_i` for the products of
/// `batch` on `stream`, for `dims` in kernel form (C row-major; A and B in
/// `dims.layouts()`, which selects the PTX module; for a grouped batch the
/// shapes and pointers come from the problems and `dims` gives only the
/// layouts and the shape the configuration was checked with). Everything
/// must have been validated against the buffers; with `dims.k == 0` the
/// kernel reads neither A nor B.
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
    batch: Batch<'_>,
) -> Result<(), Error> {
    let (entry, g) = checked_geometry::<T>(device, config, dims, batch)?;
    if g.blocks() == 0 {
        return Ok(()); // no element of C to write; a grid of 0 blocks is not a valid launch
    }
    let cfg = LaunchConfig {
        grid_dim: (g.grid[0], g.grid[1], g.grid[2]),
        block_dim: (g.block[0], g.block[1], g.block[2]),
        shared_mem_bytes: g.smem_bytes,
    };
    let single = matches!(batch, Batch::Strided { count: 1, .. });
    let name = if single { entry.name } else { entry.batched_name };
    let func = device.function(name, dims.layouts())?; // shared-memory limit raised at load
    let (m, n, k) = (dims.m as u32, dims.n as u32, dims.k as u32);
    let (lda, ldb, ldc) = (dims.lda as u32, dims.ldb as u32, dims.ldc as u32);
    let (count, strides, problems, k_slice) = match batch {
        Batch::Strided { count, strides } => (count as u32, strides.map(|s| s as u64), 0u64, 0u32),
        Batch::SplitK { slices, strides, k_slice } => (slices as u32, strides.map(|s| s as u64), 0, k_slice),
        Batch::Grouped { problems, count, .. } => (count as u32, [0; 3], crate::device::memory::address(problems), 0),
    };
    let grid_x = config.geometry(m, n, T::PRECISION, dims.layouts()).grid[0];
    let mut builder = stream.launch_builder(&func);
    builder.arg(&m).arg(&n).arg(&k).arg(&alpha).arg(a).arg(&lda).arg(b).arg(&ldb).arg(&beta).arg(c).arg(&ldc);
    builder.arg(&grid_x).arg(&count).arg(&strides[0]).arg(&strides[1]).arg(&strides[2]).arg(&problems);
    builder.arg(&k_slice);
    // SAFETY: the argument list matches the entry point's signature
    // (gemm-kernels/src/entry_points.rs: m, n, k, alpha, a, lda, b, ldb, beta,
    // c, ldc, grid_x, count, stride_a, stride_b, stride_c, problems, k_slice); the
    // module is the one compiled for A's and B's layouts; the shapes (every
    // product's, at its stride or in its problem) were validated against the
    // buffers, so every access the kernel makes lies inside them; the grid is
    // gemm-core's for the batch and fits the device.
    unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
    Ok(())
}

/// Enqueues the split-K reduction (`gemm_core::split_k`):
/// `C <- alpha * (W_0 + ... + W_{slices-1}) + beta * C` for C m x n row-major
/// (ldc) and the `slices` partials of `w`, each m x n row-major (ld = n), in
/// that order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_reduce<T: Element>(
    device: &Device,
    stream: &CudaStream,
    (m, n, ldc): (usize, usize, usize),
    slices: usize,
    w: &CudaSlice<T>,
    alpha: T,
    beta: T,
    layouts: gemm_core::KernelLayouts,
    c: &mut CudaViewMut<'_, T>,
) -> Result<(), Error> {
    use gemm_core::split_k::{reduce_entry, reduce_grid, REDUCE_BLOCKS_PER_SM, REDUCE_THREADS};
    debug_assert!(w.len() >= slices * m * n && c.len() >= (m.max(1) - 1) * ldc + n);
    let (m, n, slices, ldc) = (m as u32, n as u32, slices as u32, ldc as u32);
    let cfg = LaunchConfig {
        grid_dim: (reduce_grid(m, n, std::mem::size_of::<T>() as u32, (device.sm_count(), REDUCE_BLOCKS_PER_SM)), 1, 1),
        block_dim: (REDUCE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    // Every module exports the reduction; take the one already loaded for the product.
    let func = device.function(reduce_entry(T::PRECISION), layouts)?;
    let mut builder = stream.launch_builder(&func);
    builder.arg(&m).arg(&n).arg(&slices).arg(w).arg(&alpha).arg(&beta).arg(c).arg(&ldc);
    // SAFETY: the arguments match gemm-kernels/src/split_k.rs (m, n, slices,
    // w, alpha, beta, c, ldc); W holds slices * m * n elements and C is an
    // m x n row-major matrix with leading dimension ldc inside its buffer
    // (validated by the caller); W is the caller's own workspace, so it does
    // not overlap C.
    unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
    Ok(())
}

/// Enqueues the pack copy ([`gemm_core::pack`]): `copy`'s source, `rows`
/// lines of `cols` elements `ld` apart in `src`, transposed into `w` (`cols`
/// lines of `rows`, `ld_packed` apart).
pub(crate) fn launch_pack<T: Element>(
    device: &Device,
    stream: &CudaStream,
    copy: gemm_core::pack::PackCopy,
    src: &CudaView<'_, T>,
    w: &mut CudaSlice<T>,
) -> Result<(), Error> {
    use gemm_core::pack::{pack_entry, pack_grid, pack_smem_bytes, PACK_BLOCK};
    use gemm_core::KernelLayouts;
    debug_assert!(copy.source().required_len().is_some_and(|l| src.len() >= l));
    debug_assert!(copy.len().is_some_and(|l| w.len() >= l));
    if copy.is_empty() {
        return Ok(());
    }
    let (rows, cols, ld, ld_packed) = (copy.rows as u32, copy.cols as u32, copy.ld as u32, copy.ld_packed as u32);
    let grid = pack_grid(rows, cols);
    let cfg = LaunchConfig {
        grid_dim: (grid[0], grid[1], grid[2]),
        block_dim: (PACK_BLOCK[0], PACK_BLOCK[1], 1),
        shared_mem_bytes: pack_smem_bytes(T::PRECISION),
    };
    // Every module exports the copy; take the one the packed product runs from.
    let func = device.function(pack_entry(T::PRECISION), KernelLayouts::PACKED)?;
    let mut builder = stream.launch_builder(&func);
    builder.arg(&rows).arg(&cols).arg(src).arg(&ld).arg(w).arg(&ld_packed);
    // SAFETY: the arguments match gemm-kernels/src/pack.rs (rows, cols, src,
    // ld, dst, ld_dst); the source lies inside `src` (validated by the
    // caller), the copy inside `w` (allocated for it, not overlapping the
    // source); the grid and block are gemm-core's.
    unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
    Ok(())
}
