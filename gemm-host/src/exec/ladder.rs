//! The f64 and f32 ladder's launches (stages 1-8 on the CUDA cores, f64 on
//! the FP64 tensor cores): one product (whole, split along k into a
//! workspace and summed in slice order, or read from packed copies), a
//! strided batch in one launch, and a list batch as one grouped launch.
//! What to launch comes planned ([`LadderLaunch`]).

use crate::device::memory::alloc_scratch;
use crate::device::Device;
use crate::element::Element;
use crate::error::{DriverContext, Error};
use crate::exec::launch::{
    checked_geometry, launch, launch_pack, launch_reduce, product_geometry, Batch, ListViews, Operands, SINGLE,
};
use crate::exec::warpgroup::fusion_bytes;
use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use gemm_core::batch::GroupProblem;
use gemm_core::pack::{self, PackCopy};
use gemm_core::shape::{Layout, MatrixDims};
use gemm_core::split_k::{self, TailSplit};
use gemm_core::warpgroup::Fusion;
use gemm_core::{GemmDims, KernelConfig, Precision};
use std::sync::Arc;

/// One planned product (or strided batch) of the ladder.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LadderLaunch {
    /// f64 or f32.
    pub precision: Precision,
    /// The kernel and its tuning.
    pub config: KernelConfig,
    /// Slices of k (1: not split; one product only).
    pub split_k: u32,
    /// Whether the operands are read from packed copies (one product only).
    pub pack: bool,
    /// The product in kernel form (C row-major), k = 0 when A and B are not
    /// read (alpha = 0).
    pub kd: GemmDims,
    /// Whether the user's A and B trade places in that form.
    pub swapped: bool,
    /// The last wave balanced (one product): the first rows of block tiles
    /// whole, the other rows split along k.
    pub tail: Option<TailSplit>,
}

/// Enqueues `count` products (element strides of A, B and C; a stride of 0
/// is one matrix for all) of the planned `launch` on `stream`. One product
/// is split along k or read from packed copies as planned; a batch is one
/// launch.
pub(crate) fn enqueue<T: Element>(
    plan: &LadderLaunch,
    device: &Arc<Device>,
    stream: &Arc<CudaStream>,
    (alpha, beta): (f64, f64),
    (a, b, c): Operands<'_, '_, '_, '_, T, T>,
    (count, strides): (usize, [usize; 3]),
) -> Result<(), Error> {
    let LadderLaunch { precision, config, split_k, pack, kd: kdims, swapped, tail } = *plan;
    let split_k = (split_k, if count == 1 { tail } else { None });
    let (ka, kb, sa, sb) = if swapped { (b, a, strides[1], strides[0]) } else { (a, b, strides[0], strides[1]) };
    let (alpha, beta) = (T::from_f64(alpha), T::from_f64(beta));
    if count == 1 && pack {
        let (pdims, pa, pb) = enqueue_packs(device, stream, &kdims, precision, (ka, kb))?;
        let pa_view = pa.as_ref().map(|w| w.slice(..));
        let pb_view = pb.as_ref().map(|w| w.slice(..));
        let (ka, kb) = (pa_view.as_ref().unwrap_or(ka), pb_view.as_ref().unwrap_or(kb));
        return enqueue_product(device, stream, (config, split_k), &pdims, (alpha, beta), (ka, kb, c));
    }
    if count == 1 {
        return enqueue_product(device, stream, (config, split_k), &kdims, (alpha, beta), (ka, kb, c));
    }
    let batch = Batch::Strided { count, strides: [sa, sb, strides[2]] };
    launch(device, stream, config, &kdims, alpha, ka, kb, beta, c, batch)
}

/// Enqueues one product of `kdims` (kernel form, validated) with `config`:
/// split along k into `split_k` slices or whole, or with its last wave
/// balanced (`tail`): C's first rows of block tiles whole, then the other
/// rows (A's and C's from there on) split along k.
fn enqueue_product<T: Element>(
    device: &Device,
    stream: &Arc<CudaStream>,
    (config, (split_k, tail)): (KernelConfig, (u32, Option<TailSplit>)),
    kdims: &GemmDims,
    (alpha, beta): (T, T),
    (a, b, c): (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, T>),
) -> Result<(), Error> {
    let head = tail.map_or(0, |t| t.head_tile_rows as usize * config.c_tile().bm as usize);
    if let Some(t) = tail.filter(|_| head > 0 && head < kdims.m) {
        let head_dims = GemmDims { m: head, ..*kdims };
        launch(device, stream, config, &head_dims, alpha, a, b, beta, c, SINGLE)?;
        let a_at = MatrixDims::new(kdims.m, kdims.k, kdims.a_layout, kdims.lda).offset(head, 0);
        let c_at = MatrixDims::new(kdims.m, kdims.n, kdims.c_layout, kdims.ldc).offset(head, 0);
        let tail_dims = GemmDims { m: kdims.m - head, ..*kdims };
        let (k_slice, slices) = split_k::slices(kdims.k as u32, t.slices, config.c_tile().bk);
        let (a_tail, mut c_tail) = (a.slice(a_at..), c.slice_mut(c_at..));
        return enqueue_split_k(
            device,
            stream,
            config,
            &tail_dims,
            (alpha, beta),
            (&a_tail, b, &mut c_tail),
            (k_slice, slices),
        );
    }
    let (k_slice, slices) = split_k::slices(kdims.k as u32, split_k, config.c_tile().bk);
    if slices > 1 {
        return enqueue_split_k(device, stream, config, kdims, (alpha, beta), (a, b, c), (k_slice, slices));
    }
    launch(device, stream, config, kdims, alpha, a, b, beta, c, SINGLE)
}

/// Enqueues one product of `kdims` (kernel form, validated, k > 0 or
/// alpha 0 as the caller planned) with `config`'s fused entry point
/// (`<name>_fused`): each element of C stored through `fusion`'s epilogue,
/// whose vectors (device addresses) cover the kernel form's m x n; A and B
/// read from packed copies when `pack` (as the plain product's plan). The
/// description's device copy is the device's cached one for the same bytes
/// (`Device::tensor_maps`: a product run again with the same epilogue on
/// the same buffers uploads nothing), else uploaded on `stream`.
///
/// # Errors
/// [`Error::NoKernel`] when the configuration has no fused twin; the
/// launch's errors.
pub(crate) fn enqueue_fused<T: Element>(
    device: &Device,
    stream: &Arc<CudaStream>,
    (config, pack): (KernelConfig, bool),
    kdims: &GemmDims,
    (alpha, beta): (T, T),
    (a, b, c): (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, T>),
    fusion: &Fusion,
) -> Result<(), Error> {
    if pack && kdims.k > 0 {
        let (pdims, pa, pb) = enqueue_packs(device, stream, kdims, T::PRECISION, (a, b))?;
        let pa_view = pa.as_ref().map(|w| w.slice(..));
        let pb_view = pb.as_ref().map(|w| w.slice(..));
        let (a, b) = (pa_view.as_ref().unwrap_or(a), pb_view.as_ref().unwrap_or(b));
        return enqueue_fused(device, stream, (config, false), &pdims, (alpha, beta), (a, b, c), fusion);
    }
    let (entry, g) = checked_geometry::<T>(device, config, kdims, SINGLE)?;
    let name = entry.fused_name.ok_or(Error::NoKernel { precision: T::PRECISION, config })?;
    if g.blocks() == 0 {
        return Ok(());
    }
    // The description in device memory: the copy made for the same bytes
    // before (stage 9's cache of tensor maps), else a new one.
    let described = device.tensor_maps(stream, &fusion_bytes(fusion))?;
    let func = device.function(name, kdims.layouts())?;
    let cfg = LaunchConfig {
        grid_dim: (g.grid[0], g.grid[1], g.grid[2]),
        block_dim: (g.block[0], g.block[1], g.block[2]),
        shared_mem_bytes: g.smem_bytes,
    };
    let (m, n, k) = (kdims.m as u32, kdims.n as u32, kdims.k as u32);
    let (lda, ldb, ldc) = (kdims.lda as u32, kdims.ldb as u32, kdims.ldc as u32);
    let (fusion_at, _guard) = described.device_ptr(stream);
    let mut builder = stream.launch_builder(&func);
    builder.arg(&m).arg(&n).arg(&k).arg(&alpha).arg(a).arg(&lda).arg(b).arg(&ldb).arg(&beta).arg(c).arg(&ldc);
    builder.arg(&fusion_at);
    // SAFETY: the argument list matches the fused entry point's signature
    // (gemm-kernels/src/entry_points.rs: m, n, k, alpha, a, lda, b, ldb,
    // beta, c, ldc, fusion); the module is the one compiled for A's and B's
    // layouts; the shapes were validated against the buffers and the
    // epilogue's vectors against m and n (the caller), so every access lies
    // inside them; the grid is gemm-core's and fits the device.
    unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
    Ok(())
}

/// The packed form of `kdims` ([`gemm_core::pack::packed`]) and the packed
/// copies of A and B it needs, enqueued on `stream` (None: that operand is
/// read as it is).
#[allow(clippy::type_complexity)]
fn enqueue_packs<T: Element>(
    device: &Device,
    stream: &Arc<CudaStream>,
    kdims: &GemmDims,
    precision: Precision,
    (a, b): (&CudaView<'_, T>, &CudaView<'_, T>),
) -> Result<(GemmDims, Option<cudarc::driver::CudaSlice<T>>, Option<cudarc::driver::CudaSlice<T>>), Error> {
    let (pdims, copy_a, copy_b) = pack::packed(kdims, precision);
    let pa = copy_a.map(|copy| enqueue_pack(device, stream, copy, a)).transpose()?;
    let pb = copy_b.map(|copy| enqueue_pack(device, stream, copy, b)).transpose()?;
    Ok((pdims, pa, pb))
}

/// Enqueues the pack copy of one operand ([`gemm_core::pack`]): `copy`'s
/// source in `src` (validated), transposed into a new workspace from the
/// library's scratch pool (`alloc_scratch`), which it returns (freed when dropped, after the
/// work queued on the stream).
fn enqueue_pack<T: Element>(
    device: &Device,
    stream: &Arc<CudaStream>,
    copy: PackCopy,
    src: &CudaView<'_, T>,
) -> Result<cudarc::driver::CudaSlice<T>, Error> {
    let len = copy.len().filter(|l| l.checked_mul(size_of::<T>()).is_some_and(|b| b <= isize::MAX as usize));
    let Some(len) = len else {
        return Err(Error::Pack { why: "its workspace does not fit in memory addresses" });
    };
    // SAFETY: the product reads only elements of the packed copy that the
    // copy writes (each of its `cols` lines' first `rows` elements).
    let mut w = unsafe { alloc_scratch::<T>(stream, len) }?;
    launch_pack(device, stream, copy, src, &mut w)?;
    Ok(w)
}

/// Elements of a split-K workspace, `slices * m * n`, when its bytes fit in
/// an `isize` (a larger one cannot be allocated: an error, not an overflow).
fn workspace_len<T>(m: usize, n: usize, slices: usize) -> Option<usize> {
    let len = m.checked_mul(n)?.checked_mul(slices)?;
    (len.checked_mul(size_of::<T>())? <= isize::MAX as usize).then_some(len)
}

/// Enqueues a split-K product (`gemm_core::split_k`) of `kdims` (kernel
/// form, validated): the `slices` partial products into a workspace from the
/// library's scratch pool (`alloc_scratch`), then their sum in slice order into C.
fn enqueue_split_k<T: Element>(
    device: &Device,
    stream: &Arc<CudaStream>,
    config: KernelConfig,
    kdims: &GemmDims,
    (alpha, beta): (T, T),
    (a, b, c): (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, T>),
    (k_slice, slices): (u32, u32),
) -> Result<(), Error> {
    let (m, n, slices) = (kdims.m, kdims.n, slices as usize);
    // Elements from one slice's start to the next's: A(0, k_slice), B(k_slice, 0).
    let ks = k_slice as usize;
    let a_step = MatrixDims::new(m, kdims.k, kdims.a_layout, kdims.lda).offset(0, ks);
    let b_step = MatrixDims::new(kdims.k, n, kdims.b_layout, kdims.ldb).offset(ks, 0);
    let Some(len) = workspace_len::<T>(m, n, slices) else {
        return Err(Error::SplitK {
            slices: slices as u32,
            why: "its workspace (slices x m x n elements) does not fit in memory addresses",
        });
    };
    // SAFETY: every element of every partial is written by the partial
    // products (beta = 0, each slice has k >= 1) before the reduction reads it.
    let mut w = unsafe { alloc_scratch::<T>(stream, len) }?;
    let wdims = GemmDims { ldc: n, c_layout: Layout::RowMajor, ..*kdims };
    let batch = Batch::SplitK { slices, strides: [a_step, b_step, m * n], k_slice };
    let (one, zero) = (T::from_f64(1.0), T::from_f64(0.0));
    launch(device, stream, config, &wdims, one, a, b, zero, &mut w.slice_mut(..), batch)?;
    launch_reduce(device, stream, (m, n, kdims.ldc), slices, &w, alpha, beta, kdims.layouts(), c)
}

/// Enqueues a list batch as one grouped launch of `config` (planned for the
/// `largest` problem, whose shape the launch is given): `problems` are
/// each problem's index in the lists, its kernel form (k = 0 when A and B
/// are not read) and whether A and B trade places in it. Problem i reads
/// `a[i]`, `b[i]` and writes `c[i]`; one launch runs the block tiles of all.
pub(crate) fn enqueue_grouped<T: Element>(
    (config, largest): (KernelConfig, &GemmDims),
    problems: &[(usize, GemmDims, bool)],
    device: &Arc<Device>,
    stream: &Arc<CudaStream>,
    (alpha, beta): (f64, f64),
    (a, b, c): ListViews<'_, '_, '_, '_, '_, T, T>,
) -> Result<(), Error> {
    if problems.is_empty() {
        return Ok(());
    }
    let (alpha, beta) = (T::from_f64(alpha), T::from_f64(beta));
    let mut words: Vec<u64> = Vec::with_capacity(problems.len() * 8);
    let mut blocks: u64 = 0;
    for &(i, d, swapped) in problems {
        let g =
            product_geometry::<T>(device, config, &d).map_err(|e| Error::Problem { index: i, source: Box::new(e) })?.1;
        // The stream waits for pending work on each buffer (cudarc's
        // events; the guards record again after the launch, below).
        let (pa, pb) = (a[i].device_ptr(stream).0, b[i].device_ptr(stream).0);
        let pc = c[i].device_ptr_mut(stream).0;
        let (ka, kb) = if swapped { (pb, pa) } else { (pa, pb) };
        let p = GroupProblem {
            a: ka,
            b: kb,
            c: pc,
            m: d.m as u32,
            n: d.n as u32,
            k: d.k as u32,
            lda: d.lda as u32,
            ldb: d.ldb as u32,
            ldc: d.ldc as u32,
            first_block: blocks.min(u32::MAX as u64) as u32,
            grid_x: g.grid[0],
            grid_y: g.grid[1],
            pad: 0,
        };
        words.extend(problem_words(&p));
        blocks += g.blocks();
    }
    let max_x = device.limits().max_grid_dim[0] as u64;
    if blocks > max_x {
        return Err(Error::DeviceLimit {
            config,
            device: device.name().to_string(),
            source: gemm_core::LimitError::GridDim {
                axis: 'x',
                requested: blocks.min(u32::MAX as u64) as u32,
                limit: max_x as u32,
            },
        });
    }
    let table = stream.clone_htod(&words).during("cuMemcpyHtoDAsync")?;
    // The kernel ignores the pointers passed for a grouped launch; pass
    // the first problem's buffers (valid arguments of the right types).
    let i0 = problems[0].0;
    let (av, bv) = (a[i0].slice(..), b[i0].slice(..));
    let mut cv = c[i0].slice_mut(..);
    let result = launch(
        device,
        stream,
        config,
        largest,
        alpha,
        &av,
        &bv,
        beta,
        &mut cv,
        Batch::Grouped { problems: &table, count: problems.len(), blocks: blocks as u32 },
    );
    let _ = cv;
    // Each buffer records the launch, so work on other streams that uses
    // it later waits for it (as a launch's own arguments do).
    for &(i, _, _) in problems {
        drop((a[i].device_ptr(stream), b[i].device_ptr(stream)));
        drop(c[i].device_ptr_mut(stream));
    }
    result
}

/// The 8 words of a problem as the kernel reads them (`#[repr(C)]`, 64 bytes).
fn problem_words(p: &GroupProblem) -> [u64; 8] {
    let pair = |lo: u32, hi: u32| lo as u64 | (hi as u64) << 32;
    [
        p.a,
        p.b,
        p.c,
        pair(p.m, p.n),
        pair(p.k, p.lda),
        pair(p.ldb, p.ldc),
        pair(p.first_block, p.grid_x),
        pair(p.grid_y, p.pad),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_workspace_overflow_is_caught() {
        assert_eq!(workspace_len::<f64>(256, 256, 32), Some(256 * 256 * 32));
        assert_eq!(workspace_len::<f64>(1 << 31, 1 << 31, 1 << 20), None);
        assert_eq!(workspace_len::<f64>(1 << 30, 1 << 30, 8), None); // 2^63 bytes
    }

    #[test]
    fn problem_words_follow_the_c_layout() {
        let p = GroupProblem {
            a: 1,
            b: 2,
            c: 3,
            m: 4,
            n: 5,
            k: 6,
            lda: 7,
            ldb: 8,
            ldc: 9,
            first_block: 10,
            grid_x: 11,
            grid_y: 12,
            pad: 0,
        };
        let w = problem_words(&p);
        // SAFETY: GroupProblem is #[repr(C)], 64 bytes, no padding; little-endian target.
        let raw: [u64; 8] = unsafe { core::mem::transmute(p) };
        assert_eq!(w, raw);
    }
}
