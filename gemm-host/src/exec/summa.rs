//! SUMMA over NCCL, layer exec: the panels of a product of 2D
//! block-cyclic matrices (van de Geijn and Watts, "SUMMA: scalable
//! universal matrix multiplication algorithm"), enqueued on every rank this
//! process drives.
//!
//! For each k panel ([`gemm_core::distribution::k_panels`]), on the rank's
//! communication stream: the process column that holds A's panel copies it
//! (local_m x width, strided in its local A) into a packed workspace
//! (`cuMemcpy2DAsync`) and broadcasts it along its grid row; the process
//! row that holds B's panel (width x local_n, already contiguous in its
//! local B) broadcasts it along its grid column. On the compute stream:
//! the local product `T <- alpha * A_panel * B_panel + beta_l * T` with the
//! library's kernels ([`PanelProduct`], built at the api layer), beta_l =
//! beta for the first panel and 1 after, into C or an f32 accumulator.
//! Two workspaces per operand: panel l + 1 is broadcast while panel l is
//! multiplied, ordered by the buffers' events (cudarc's, recorded when a
//! stream writes or reads them).

use crate::device::memory::alloc_scratch;
use crate::device::nccl::{broadcast, group_end, group_start, CommGroup};
use crate::device::Device;
use crate::element::Scalar;
use crate::error::{DriverContext, Error};
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};
use gemm_core::distribution::{k_panels, KPanel};
use gemm_core::shape::{Layout, MatrixDims};
use gemm_core::warpgroup::WgmmaTypes;
use gemm_core::GemmDims;
use std::sync::Arc;

/// Enqueues on a stream one local product of a rank (index `local` in the
/// group's ranks) with `(alpha, beta)`, operands in device memory, shapes
/// validated: how SUMMA runs each panel, the same for every element type.
pub(crate) trait PanelProduct<T, W> {
    fn enqueue(
        &self,
        local: usize,
        scalars: (f64, f64),
        stream: &Arc<CudaStream>,
        dims: &GemmDims,
        operands: (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, W>),
    ) -> Result<(), Error>;
}

impl<T, W, F> PanelProduct<T, W> for F
where
    F: Fn(
        usize,
        (f64, f64),
        &Arc<CudaStream>,
        &GemmDims,
        (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, W>),
    ) -> Result<(), Error>,
{
    fn enqueue(
        &self,
        local: usize,
        scalars: (f64, f64),
        stream: &Arc<CudaStream>,
        dims: &GemmDims,
        operands: (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, W>),
    ) -> Result<(), Error> {
        self(local, scalars, stream, dims, operands)
    }
}

/// The global product's shape and the width of its k panels (A's column
/// blocks, B's row blocks).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SummaShape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub kb: usize,
}

/// One local rank's inputs: its local A (`rows` x `a_cols`, row-major,
/// ld `a_cols`) and local B (local k rows x `cols`, ld `cols`); its
/// target (C, or an f32 accumulator) is `rows x cols`, ld `cols`.
pub(crate) struct LocalInputs<'a, T> {
    pub a: CudaView<'a, T>,
    pub a_cols: usize,
    pub b: CudaView<'a, T>,
    pub rows: usize,
    pub cols: usize,
}

/// A rank's two workspaces of each operand's panel (None where the panel
/// is read in place: a grid of one column for A, one row for B).
struct Workspaces<T> {
    a: Option<[CudaSlice<T>; 2]>,
    b: Option<[CudaSlice<T>; 2]>,
    /// Per slot: the panel's copy and broadcast are done (recorded on the
    /// communication stream; the product waits for it).
    sent: [Option<CudaEvent>; 2],
    /// Per slot: the product that read it is done (recorded on the compute
    /// stream; the next copy and broadcast into the slot wait for it).
    used: [Option<CudaEvent>; 2],
}

/// Enqueues every panel of SUMMA on every local rank (nothing waited
/// for): `target <- alpha * A * B + beta * target` over the grid, rank i
/// of the group reading `inputs[i]` and writing `targets[i]`. With
/// `fault = Some(r)`, rank r skips its copies and broadcasts (tests: its
/// peers then wait for them until the watchdog fires). The caller waits
/// ([`CommGroup::wait`]) and aborts on any error.
pub(crate) fn enqueue_panels<T: Scalar, W: Scalar>(
    group: &CommGroup,
    shape: &SummaShape,
    (inputs, targets): (&[LocalInputs<'_, T>], &mut [CudaViewMut<'_, W>]),
    (alpha, beta): (f64, f64),
    product: &impl PanelProduct<T, W>,
    fault: Option<usize>,
) -> Result<(), Error> {
    let panels: Vec<KPanel> = k_panels(shape.k, shape.kb, group.grid).collect();
    // The workspaces, from the library's pool on each comm stream.
    let mut spaces = Vec::with_capacity(inputs.len());
    for (s, l) in group.ranks.iter().zip(inputs) {
        s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let pair = |len: usize| -> Result<[CudaSlice<T>; 2], Error> {
            // SAFETY: each is written by its panel's copy or broadcast
            // before a product reads it (stream order, events).
            unsafe { Ok([alloc_scratch::<T>(&s.comm, len)?, alloc_scratch::<T>(&s.comm, len)?]) }
        };
        let a = if s.row.is_some() { Some(pair(l.rows * shape.kb)?) } else { None };
        let b = if s.col.is_some() { Some(pair(shape.kb * l.cols)?) } else { None };
        spaces.push(Workspaces { a, b, sent: [None, None], used: [None, None] });
    }
    if let Some(&first) = panels.first() {
        send(group, inputs, &mut spaces, (first, 0), fault)?;
    }
    for (l, p) in panels.iter().enumerate() {
        if let Some(&next) = panels.get(l + 1) {
            send(group, inputs, &mut spaces, (next, (l + 1) % 2), fault)?;
        }
        let slot = l % 2;
        for (i, ((s, lo), target)) in group.ranks.iter().zip(inputs).zip(targets.iter_mut()).enumerate() {
            if lo.rows == 0 || lo.cols == 0 {
                continue;
            }
            s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
            let row_major = |rows: usize, cols: usize, ld: usize| MatrixDims::new(rows, cols, Layout::RowMajor, ld);
            let (a_view, a_dims) = match spaces[i].a.as_ref() {
                Some(ws) => (ws[slot].slice(..), row_major(lo.rows, p.width, p.width)),
                None => (lo.a.slice(p.a_local..), row_major(lo.rows, p.width, lo.a_cols)),
            };
            let (b_view, b_dims) = match spaces[i].b.as_ref() {
                Some(ws) => (ws[slot].slice(..), row_major(p.width, lo.cols, lo.cols)),
                None => (lo.b.slice(p.b_local * lo.cols..), row_major(p.width, lo.cols, lo.cols)),
            };
            let c_dims = row_major(lo.rows, lo.cols, lo.cols);
            let dims = GemmDims::from_operands(a_dims, a_view.len(), b_dims, b_view.len(), c_dims, target.len())?;
            let scalars = (alpha, if l == 0 { beta } else { 1.0 });
            // The panel's broadcast first (explicit: the kernels may read
            // the workspace through tensor maps, which cudarc cannot track).
            if let Some(ev) = &spaces[i].sent[slot] {
                s.compute.wait(ev).during("cuStreamWaitEvent")?;
            }
            product.enqueue(i, scalars, &s.compute, &dims, (&a_view, &b_view, target))?;
            spaces[i].used[slot] = Some(s.compute.record_event(None).during("cuEventRecord")?);
        }
    }
    // The workspaces are freed on their streams after their last use
    // (their events), without waiting here.
    drop(spaces);
    Ok(())
}

/// Enqueues panel `p`'s copies and broadcasts into workspace `slot` on
/// every local rank's communication stream: A's panel packed by its
/// owners and broadcast along the grid rows, B's broadcast along the grid
/// columns (from the owner's local B, where its rows are contiguous), all
/// ranks' NCCL calls in one group.
fn send<T: Scalar>(
    group: &CommGroup,
    inputs: &[LocalInputs<'_, T>],
    spaces: &mut [Workspaces<T>],
    (p, slot): (KPanel, usize),
    fault: Option<usize>,
) -> Result<(), Error> {
    let grid = group.grid;
    let elem = size_of::<T>();
    let (row_root, col_root) = (p.a_col, p.b_row);
    // The slot's last product is done before its copy and broadcast overwrite it.
    for (s, space) in group.ranks.iter().zip(spaces.iter()) {
        if let Some(ev) = &space.used[slot] {
            s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
            s.comm.wait(ev).during("cuStreamWaitEvent")?;
        }
    }
    // The copies of A's panel into the owners' workspaces.
    for ((s, lo), space) in group.ranks.iter().zip(inputs).zip(spaces.iter_mut()) {
        let (_, col) = grid.coords(s.rank);
        let Some(ws) = space.a.as_mut() else { continue };
        if col != row_root || fault == Some(s.rank) || lo.rows == 0 {
            continue;
        }
        s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let (src, _read) = lo.a.device_ptr(&s.comm);
        let (dst, _write) = ws[slot].device_ptr_mut(&s.comm);
        let src = src + (p.a_local * elem) as u64;
        copy_2d(&s.comm, (src, lo.a_cols * elem), (dst, p.width * elem), p.width * elem, lo.rows)?;
    }
    // The broadcasts, all ranks' in one group. The buffers' guards live
    // until the group is launched, so that their events follow it.
    let mut guards = Vec::new();
    let fail = |why: String| Error::Collective { rank: group.ranks[0].rank, call: "ncclBroadcast", why };
    group_start().map_err(fail)?;
    let mut result = Ok(());
    for ((s, lo), space) in group.ranks.iter().zip(inputs).zip(spaces.iter_mut()) {
        if fault == Some(s.rank) || result.is_err() {
            continue;
        }
        let (row, _) = grid.coords(s.rank);
        let Workspaces { a, b, .. } = space;
        if let (Some(comm), Some(ws)) = (s.row.as_ref(), a.as_mut()) {
            let bytes = lo.rows * p.width * elem;
            if bytes > 0 {
                let (ptr, g) = ws[slot].device_ptr_mut(&s.comm);
                guards.push(g);
                // SAFETY: `bytes` of the workspace (rows x width,
                // packed) on this rank's device, in place at the root.
                result = unsafe { broadcast(comm, ptr, ptr, bytes, row_root, &s.comm) };
            }
        }
        if let (Some(comm), Some(ws)) = (s.col.as_ref(), b.as_mut()) {
            let bytes = p.width * lo.cols * elem;
            if bytes > 0 {
                let (dst, g) = ws[slot].device_ptr_mut(&s.comm);
                guards.push(g);
                let src = if row == col_root {
                    let (src, g) = lo.b.device_ptr(&s.comm);
                    guards.push(g);
                    src + (p.b_local * lo.cols * elem) as u64
                } else {
                    dst
                };
                // SAFETY: `bytes` of B's local rows b_local.. at the
                // root (contiguous: ld = local_n), into the workspace,
                // on this rank's device.
                let sent = unsafe { broadcast(comm, src, dst, bytes, col_root, &s.comm) };
                result = result.and(sent);
            }
        }
    }
    let end = group_end();
    drop(guards);
    result.and(end).map_err(fail)?;
    for (s, space) in group.ranks.iter().zip(spaces.iter_mut()) {
        s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        space.sent[slot] = Some(s.comm.record_event(None).during("cuEventRecord")?);
    }
    Ok(())
}

/// A 2D copy of `height` lines of `width` bytes between device buffers
/// with pitches in bytes, on `stream`.
fn copy_2d(
    stream: &CudaStream,
    (src, src_pitch): (u64, usize),
    (dst, dst_pitch): (u64, usize),
    width: usize,
    height: usize,
) -> Result<(), Error> {
    use cudarc::driver::sys;
    let d = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
    // (Not `mem::zeroed`: the memory-type enum has no zero value.)
    let copy = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: d,
        srcHost: core::ptr::null(),
        srcDevice: src,
        srcArray: core::ptr::null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: d,
        dstHost: core::ptr::null_mut(),
        dstDevice: dst,
        dstArray: core::ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: width,
        Height: height,
    };
    // SAFETY: the caller's buffers hold `height` lines of `width` bytes at
    // their pitches, on the stream's device (checked by the caller).
    unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) }.result().during("cuMemcpy2DAsync")
}

/// The last pass of a product accumulated in f32 for a 16-bit C:
/// `C <- alpha * acc + beta * C` (one rounding to C's type; beta = 0 does
/// not read C), stage 9's split-K reduction kernel with one slice, over a
/// packed `rows x cols` C (ld `cols`) and accumulator. Compute capability
/// 9.0 (the kernel is in the `sm_90a` module).
pub(crate) fn finish_f32_into<C: Scalar>(
    device: &Device,
    stream: &Arc<CudaStream>,
    types: WgmmaTypes,
    (rows, cols): (usize, usize),
    acc: &CudaSlice<f32>,
    c: &mut CudaViewMut<'_, C>,
    (alpha, beta): (f64, f64),
) -> Result<(), Error> {
    use cudarc::driver::{LaunchConfig, PushKernelArg};
    use gemm_core::split_k::{reduce_grid, REDUCE_THREADS};
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let func = device.warpgroup_function(match types {
        WgmmaTypes::F16 => "warpgroup_reduce_f16",
        _ => "warpgroup_reduce_bf16",
    })?;
    let (m, n) = (rows as u32, cols as u32);
    let blocks = reduce_grid(m, n, 4, (device.sm_count(), 8));
    let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (REDUCE_THREADS, 1, 1), shared_mem_bytes: 0 };
    let (alpha, beta) = ((alpha as f32).to_bits(), (beta as f32).to_bits());
    let (slices, ldc) = (1u32, n);
    let mut builder = stream.launch_builder(&func);
    builder.arg(&m).arg(&n).arg(&slices).arg(acc).arg(&alpha).arg(&beta).arg(c).arg(&ldc);
    // SAFETY: `warpgroup_reduce_{f16,bf16}(m, n, slices, w, alpha, beta,
    // c, ldc)`: the accumulator holds one packed m x n f32 result, C is a
    // packed m x n matrix of 16-bit elements (ld n); separate buffers.
    unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
    Ok(())
}
