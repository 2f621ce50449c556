//! SUMMA over NCCL, layer exec: the panels of a product of 2D
//! block-cyclic matrices (van de Geijn and Watts, "SUMMA: scalable
//! universal matrix multiplication algorithm"), enqueued on every rank this
//! process drives.
//!
//! For each k panel ([`gemm_core::distribution::k_panels`]), on the rank's
//! communication stream: the process column that holds A's panel copies it
//! (local_m x width, strided in its local A) into a packed buffer
//! (`cuMemcpy2DAsync`) and broadcasts it along its grid row; the process
//! row that holds B's panel (width x local_n, already contiguous in its
//! local B) broadcasts it along its grid column. Consecutive panels form a
//! chunk, gathered into one workspace per operand and multiplied by one
//! local product on the compute stream, `T <- alpha * A_chunk * B_chunk +
//! beta_c * T` with the library's kernels (a [`TileProduct`] per rank, built at the
//! api layer), beta_c = beta for the first chunk and 1 after, into C or an
//! f32 accumulator: C is read and written once per chunk, and one chunk
//! (all of k, where the workspaces fit) is one product. With several
//! chunks, two workspaces per operand: chunk c + 1 is broadcast while chunk
//! c is multiplied, ordered by explicit events.

use crate::device::memory::{alloc_scratch, copy_2d_device};
use crate::device::nccl::{broadcast, grouped, CommGroup};
use crate::device::Device;
use crate::element::Scalar;
use crate::error::{DriverContext, Error};
use crate::exec::host_path::TileProduct;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};
use gemm_core::distribution::{k_panels, KPanel};
use gemm_core::shape::{Layout, MatrixDims};
use gemm_core::warpgroup::WgmmaTypes;
use gemm_core::GemmDims;
use std::sync::Arc;

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

/// A rank's workspaces: per slot (two when the call has more than one
/// chunk of panels), A's chunk (`rows x width`, row-major, ld the chunk's
/// width) and B's (`width x cols`, ld `cols`); None where the panels are
/// read in place (a grid of one column for A, one row for B). A's panels
/// arrive through `staging` (one panel, packed: a broadcast needs
/// contiguous memory) and are copied into their columns of the chunk.
struct Workspaces<T> {
    a: Option<[CudaSlice<T>; 2]>,
    b: Option<[CudaSlice<T>; 2]>,
    staging: Option<CudaSlice<T>>,
    /// Per slot: the chunk's copies and broadcasts are done (recorded on
    /// the communication stream; the product waits for it).
    sent: [Option<CudaEvent>; 2],
    /// Per slot: the product that read it is done (recorded on the compute
    /// stream; the next chunk's copies into the slot wait for it).
    used: [Option<CudaEvent>; 2],
}

/// Consecutive k panels multiplied as one local product: `first..end` of
/// [`k_panels`], global k from `k0`, `width` wide.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    first: usize,
    end: usize,
    k0: usize,
    width: usize,
}

/// Enqueues SUMMA on every local rank (nothing waited for):
/// `target <- alpha * A * B + beta * target` over the grid, rank i of the
/// group reading `inputs[i]` and writing `targets[i]`. The k panels go in
/// chunks of `per_chunk` consecutive panels (at least 1): each chunk's
/// panels are broadcast into one workspace, then multiplied by one local
/// product, so C is read and written once per chunk; with more than one
/// chunk, chunk c + 1 is broadcast while chunk c is multiplied (two
/// workspaces). With `fault = Some(r)`, rank r skips its copies and
/// broadcasts (tests: its peers then wait for them until the watchdog
/// fires). The caller waits ([`CommGroup::wait`]) and aborts on any error.
pub(crate) fn enqueue_panels<T: Scalar, W: Scalar>(
    group: &CommGroup,
    shape: &SummaShape,
    (inputs, targets): (&[LocalInputs<'_, T>], &mut [CudaViewMut<'_, W>]),
    (alpha, beta): (f64, f64),
    (products, per_chunk): (&[impl TileProduct<T, W>], usize),
    fault: Option<usize>,
) -> Result<(), Error> {
    let panels: Vec<KPanel> = k_panels(shape.k, shape.kb, group.grid).collect();
    let per_chunk = per_chunk.max(1);
    let chunks: Vec<Chunk> = (0..panels.len())
        .step_by(per_chunk)
        .map(|first| {
            let end = (first + per_chunk).min(panels.len());
            let k0 = panels[first].k0;
            Chunk { first, end, k0, width: panels[end - 1].k0 + panels[end - 1].width - k0 }
        })
        .collect();
    let widest = chunks.iter().map(|c| c.width).max().unwrap_or(0);
    let slots = chunks.len().min(2);
    let mut spaces = Vec::with_capacity(inputs.len());
    for (s, l) in group.ranks.iter().zip(inputs) {
        s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        // SAFETY: every element a product reads is written first by the
        // chunk's copies and broadcasts (ordered by the events below).
        let alloc = |len: usize| unsafe { alloc_scratch::<T>(&s.comm, len.max(1)) };
        let pair = |len: usize| -> Result<[CudaSlice<T>; 2], Error> {
            Ok([alloc(len)?, if slots > 1 { alloc(len)? } else { alloc(1)? }])
        };
        let a = if s.row.is_some() { Some(pair(l.rows * widest)?) } else { None };
        let b = if s.col.is_some() { Some(pair(widest * l.cols)?) } else { None };
        let staging = if s.row.is_some() && per_chunk > 1 { Some(alloc(l.rows * shape.kb)?) } else { None };
        spaces.push(Workspaces { a, b, staging, sent: [None, None], used: [None, None] });
    }
    let send_chunk = |spaces: &mut [Workspaces<T>], c: usize| -> Result<(), Error> {
        let chunk = chunks[c];
        let slot = c % 2;
        // The slot's last product is done before this chunk overwrites it.
        for (s, space) in group.ranks.iter().zip(spaces.iter()) {
            if let Some(ev) = &space.used[slot] {
                s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
                s.comm.wait(ev).during("cuStreamWaitEvent")?;
            }
        }
        for p in &panels[chunk.first..chunk.end] {
            send(group, inputs, spaces, (*p, p.k0 - chunk.k0, chunk.width, slot), fault)?;
        }
        for (s, space) in group.ranks.iter().zip(spaces.iter_mut()) {
            s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
            space.sent[slot] = Some(s.comm.record_event(None).during("cuEventRecord")?);
        }
        Ok(())
    };
    if !chunks.is_empty() {
        send_chunk(&mut spaces, 0)?;
    }
    for (c, chunk) in chunks.iter().enumerate() {
        if c + 1 < chunks.len() {
            send_chunk(&mut spaces, c + 1)?;
        }
        let slot = c % 2;
        let first = panels[chunk.first];
        for (i, ((s, lo), target)) in group.ranks.iter().zip(inputs).zip(targets.iter_mut()).enumerate() {
            if lo.rows == 0 || lo.cols == 0 {
                continue;
            }
            s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
            let row_major = |rows: usize, cols: usize, ld: usize| MatrixDims::new(rows, cols, Layout::RowMajor, ld);
            // In place, a chunk's panels are consecutive local columns of
            // A (one grid column) or rows of B (one grid row).
            let (a_view, a_dims) = match spaces[i].a.as_ref() {
                Some(ws) => (ws[slot].slice(..), row_major(lo.rows, chunk.width, chunk.width)),
                None => (lo.a.slice(first.a_local..), row_major(lo.rows, chunk.width, lo.a_cols)),
            };
            let (b_view, b_dims) = match spaces[i].b.as_ref() {
                Some(ws) => (ws[slot].slice(..), row_major(chunk.width, lo.cols, lo.cols)),
                None => (lo.b.slice(first.b_local * lo.cols..), row_major(chunk.width, lo.cols, lo.cols)),
            };
            let c_dims = row_major(lo.rows, lo.cols, lo.cols);
            let dims = GemmDims::from_operands(a_dims, a_view.len(), b_dims, b_view.len(), c_dims, target.len())?;
            let scalars = (alpha, if c == 0 { beta } else { 1.0 });
            // The chunk's broadcasts first (explicit: the kernels may read
            // the workspace through tensor maps, which cudarc cannot track).
            if let Some(ev) = &spaces[i].sent[slot] {
                s.compute.wait(ev).during("cuStreamWaitEvent")?;
            }
            products[i].enqueue(scalars, &s.compute, &dims, (&a_view, &b_view, target))?;
            spaces[i].used[slot] = Some(s.compute.record_event(None).during("cuEventRecord")?);
        }
    }
    // The workspaces go back to the pool on their stream after the last
    // product that reads them.
    for (s, space) in group.ranks.iter().zip(&spaces) {
        for ev in space.used.iter().flatten() {
            s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
            s.comm.wait(ev).during("cuStreamWaitEvent")?;
        }
    }
    drop(spaces);
    Ok(())
}

/// One panel `p` into slot `slot` of the workspaces, at column (A) and row
/// (B) `offset` of a chunk `width` wide: the process column holding A's
/// panel copies it from its local A (packed, into the staging buffer, or
/// straight into the chunk when a chunk is one panel) and broadcasts it
/// along its grid row, the receivers copying it into their chunk; the
/// process row holding B's panel broadcasts it from its local B along its
/// grid column into the receivers' chunk rows.
fn send<T: Scalar>(
    group: &CommGroup,
    inputs: &[LocalInputs<'_, T>],
    spaces: &mut [Workspaces<T>],
    (p, offset, width, slot): (KPanel, usize, usize, usize),
    fault: Option<usize>,
) -> Result<(), Error> {
    let grid = group.grid;
    let elem = size_of::<T>();
    let (row_root, col_root) = (p.a_col, p.b_row);
    // Where A's panel is broadcast: the staging buffer, or the chunk itself
    // when the chunk is this one panel (packed, ld = width).
    let a_target = |space: &mut Workspaces<T>, stream: &CudaStream| -> Option<u64> {
        let buf = match space.staging.as_mut() {
            Some(staging) => staging,
            None => &mut space.a.as_mut()?[slot],
        };
        Some(buf.device_ptr_mut(stream).0)
    };
    // The root column's copies of its local A panel, packed.
    for ((s, lo), space) in group.ranks.iter().zip(inputs).zip(spaces.iter_mut()) {
        let (_, col) = grid.coords(s.rank);
        if space.a.is_none() || col != row_root || fault == Some(s.rank) || lo.rows == 0 {
            continue;
        }
        s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let Some(dst) = a_target(space, &s.comm) else { continue };
        let (src, _read) = lo.a.device_ptr(&s.comm);
        let src = src + (p.a_local * elem) as u64;
        copy_2d_device(&s.comm, (src, lo.a_cols * elem), (dst, p.width * elem), p.width * elem, lo.rows)?;
    }
    let fail = |why: String| Error::Collective { rank: group.ranks[0].rank, call: "ncclBroadcast", why };
    grouped(|| {
        for ((s, lo), space) in group.ranks.iter().zip(inputs).zip(spaces.iter_mut()) {
            if fault == Some(s.rank) {
                continue;
            }
            let (row, _) = grid.coords(s.rank);
            if let Some(comm) = s.row.as_ref() {
                let bytes = lo.rows * p.width * elem;
                if let (Some(ptr), true) = (a_target(space, &s.comm), bytes > 0) {
                    // SAFETY: `bytes` bytes of a live workspace of this rank.
                    unsafe { broadcast(comm, ptr, ptr, bytes, row_root, &s.comm) }?;
                }
            }
            if let (Some(comm), Some(ws)) = (s.col.as_ref(), space.b.as_mut()) {
                let bytes = p.width * lo.cols * elem;
                if bytes > 0 {
                    let (dst, _g) = ws[slot].device_ptr_mut(&s.comm);
                    let dst = dst + (offset * lo.cols * elem) as u64;
                    let src = if row == col_root {
                        let (src, _g) = lo.b.device_ptr(&s.comm);
                        src + (p.b_local * lo.cols * elem) as u64
                    } else {
                        dst
                    };
                    // SAFETY: `bytes` bytes of live buffers of this rank.
                    unsafe { broadcast(comm, src, dst, bytes, col_root, &s.comm) }?;
                }
            }
        }
        Ok(())
    })
    .map_err(fail)?;
    // Received A panels (staged) into their columns of the chunk.
    for ((s, lo), space) in group.ranks.iter().zip(inputs).zip(spaces.iter_mut()) {
        if fault == Some(s.rank) || lo.rows == 0 {
            continue;
        }
        let (Some(staging), Some(ws)) = (space.staging.as_ref(), space.a.as_mut()) else { continue };
        s.device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let (src, _r) = staging.device_ptr(&s.comm);
        let (dst, _w) = ws[slot].device_ptr_mut(&s.comm);
        let dst = dst + (offset * elem) as u64;
        copy_2d_device(&s.comm, (src, p.width * elem), (dst, width * elem), p.width * elem, lo.rows)?;
    }
    Ok(())
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
