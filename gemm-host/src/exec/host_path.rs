//! The host path: products of matrices in host memory, with the copies
//! overlapped with the compute (Martini and Boldo, "Improving performance of the matrix-multiplication algorithm with CUDA": Martini and Boldo split the
//! product over CUDA streams so that uploads, kernels and downloads of
//! different parts run at once).
//!
//! C (m x n, as the caller gives it) is cut into tiles of rows x columns,
//! and tile t runs on compute stream `t % S`. In core (A, B and one C tile
//! per stream fit the device's memory budget) A's row panels and B's column
//! panels are uploaded once each, on an upload stream of their own, B's
//! first panel first and then A's and B's interleaved ([`upload_order`]);
//! a tile is enqueued as soon as its two panels are, waits for their copies,
//! computes, and its block of C goes straight back. B is one panel (whole)
//! except for page-locked f64 and f32 operands with n >= 16384 ([`column_panel`]). Out of
//! core, k is cut into chunks too and every piece streams through per-stream
//! slots. Copy engines, SMs and the host all work at once: while the GPU
//! computes tile t, later panels upload and tile t - 1 downloads.
//!
//! Host memory the driver knows to be page-locked (a [`crate::Matrix`] made
//! with [`crate::Matrix::pinned`], or any memory the caller registered) is
//! copied directly. Pageable memory goes through a ring of page-locked
//! staging buffers kept in a per-device pool ([`HostPool`], `device/staging.rs`): the host packs
//! the next piece into a free buffer (with all cores, rayon) while earlier
//! pieces are in flight, and unpacks finished downloads into C. Neither
//! device memory nor page-locked memory is allocated per call once the pool
//! has grown to the largest call seen.

use crate::device::staging::{is_page_locked, segments, HostPool, Segment};
use crate::device::Device;
use crate::element::Scalar;
use crate::error::{DriverContext, Error};
use cudarc::driver::{result, CudaEvent, CudaStream, CudaView, CudaViewMut};
use gemm_core::shape::MatrixDims;
use gemm_core::GemmDims;
use std::mem::size_of;
use std::ops::Range;
use std::sync::Arc;

/// A host operand as the host path sees it: storage base and shape (after
/// op), elements of `T`.
#[derive(Clone, Copy)]
pub(crate) struct HostOperand {
    pub base: *const u8,
    pub dims: MatrixDims,
}

impl HostOperand {
    /// Whether the driver knows the operand's storage (its first and last
    /// element) as page-locked.
    fn page_locked(&self, elem: usize) -> bool {
        let len = self.dims.required_len().unwrap_or(0) * elem;
        len > 0 && is_page_locked(self.base) && is_page_locked(self.base.wrapping_add(len - 1))
    }

    /// The block `rows` x `cols` of this operand (elements of `elem` bytes),
    /// in place: a GPU's part of a product over a group.
    pub(crate) fn sub(&self, elem: usize, rows: Range<usize>, cols: Range<usize>) -> Result<HostOperand, Error> {
        let (offset, dims) = self.dims.sub(rows.start, cols.start, rows.len(), cols.len())?;
        Ok(HostOperand { base: self.base.wrapping_add(offset * elem), dims })
    }

    /// Segments of the block (row0, col0, rows, cols).
    fn block(&self, elem: usize, row0: usize, col0: usize, rows: usize, cols: usize) -> Vec<Segment> {
        let mut out = Vec::new();
        if rows == 0 || cols == 0 {
            return out;
        }
        let block = self.sub(elem, row0..row0 + rows, col0..col0 + cols).expect("inside the operand");
        segments(block.base, &block.dims, elem, &mut out);
        out
    }
}

/// A GPU's A, B and C of a product over a group, handed to that GPU's
/// host thread.
pub(crate) struct SendOperands(pub (HostOperand, HostOperand, HostOperand));

// SAFETY: the operands point into the caller's matrices, borrowed for the
// whole call (`Gemm::run` joins every GPU's thread before it returns); the
// GPUs read A and B and write disjoint blocks of C.
unsafe impl Send for SendOperands {}

/// Tiling of one product: C in tiles of `pm x pn`, k in chunks of `pk`.
#[derive(Clone, Copy, Debug)]
struct Tiling {
    pm: usize,
    pn: usize,
    pk: usize,
}

impl Tiling {
    /// Bytes of one stream's input slot out of core: its piece of A and
    /// (k in chunks) its chunk of B, each from a 256-byte boundary.
    fn slot_bytes(&self, k: usize, e: Sizes) -> usize {
        let resident = self.pk == k;
        aligned(self.pm * self.pk * e.input) + if resident { 0 } else { aligned(self.pk * self.pn * e.input) }
    }

    /// Bytes of device memory for inputs: the resident B panel (when k is
    /// whole) and per stream an A panel and (out of core) a B chunk.
    fn input_bytes(&self, k: usize, streams: usize, e: Sizes) -> usize {
        let resident = if self.pk == k { aligned(self.pk * self.pn * e.input) } else { 0 };
        resident + streams * self.slot_bytes(k, e)
    }

    /// Bytes of one C tile's slot.
    fn c_bytes(&self, e: Sizes) -> usize {
        aligned(self.pm * self.pn * e.output)
    }

    /// Bytes for outputs: a C tile per stream.
    fn output_bytes(&self, streams: usize, e: Sizes) -> usize {
        streams * self.c_bytes(e)
    }

    /// Byte offset of stream `s`'s C tile in the output workspace.
    fn c_slot(&self, s: usize, e: Sizes) -> usize {
        s * self.c_bytes(e)
    }

    fn bytes(&self, k: usize, streams: usize, e: Sizes) -> usize {
        self.input_bytes(k, streams, e) + self.output_bytes(streams, e)
    }
}

/// Bytes of an element of A and B (`input`) and of C (`output`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sizes {
    pub input: usize,
    pub output: usize,
}

/// `bytes` rounded up to 256: every operand in the workspaces starts on a
/// 256-byte boundary (TMA reads from 16-byte aligned addresses in place).
fn aligned(bytes: usize) -> usize {
    bytes.div_ceil(256) * 256
}

/// Out of core: the largest tiling under `budget` bytes, shrinking the
/// largest dimension of what is held. With `whole_k` (a C of 16 bits, whose
/// partial sums must not be rounded to C's type between chunks of k) k is
/// never cut; the caller checks that the result fits.
fn choose_tiling(m: usize, n: usize, k: usize, streams: usize, budget: usize, e: Sizes, whole_k: bool) -> Tiling {
    let round = |x: usize, q: usize| x.div_ceil(q) * q;
    // Enough tiles for the streams to overlap, each still a full-size GEMM.
    let mut t = Tiling { pm: round(m.div_ceil(2 * streams), 128).clamp(1, m.max(1)), pn: n.max(1), pk: k.max(1) };
    while t.bytes(k, streams, e) > budget {
        // Shrink the largest dimension of what is held, not below a tile.
        if t.pn >= t.pm.max(if whole_k { 0 } else { t.pk }) && t.pn > 128 {
            t.pn = round(t.pn / 2, 64);
        } else if !whole_k && t.pk >= t.pm && t.pk > 128 {
            t.pk = round(t.pk / 2, 64);
        } else if t.pm > 64 {
            t.pm = round(t.pm / 2, 32);
        } else if t.pm.max(t.pn).max(if whole_k { 1 } else { t.pk }) > 1 {
            // A tiny budget (tests): halve everything down to single elements.
            t.pm = t.pm.div_ceil(2);
            t.pn = t.pn.div_ceil(2);
            if !whole_k {
                t.pk = t.pk.div_ceil(2);
            }
        } else {
            break;
        }
    }
    t
}

/// A panel uploaded once and held in core: a row panel of A or a column
/// panel of B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Panel {
    A(usize),
    B(usize),
}

/// The order in which the `rows` row panels of A and the `cols` column
/// panels of B are uploaded in core: B's first panel, then A's and B's
/// interleaved so that the tiles of C whose panels have arrived grow as a
/// square (the next panel is B's while B's share of its panels is not ahead
/// of A's). With one panel of B this is B whole, then A panel by panel.
fn upload_order(rows: usize, cols: usize) -> Vec<Panel> {
    let (mut i, mut j) = (0, 0);
    let mut order = Vec::with_capacity(rows + cols);
    while i < rows || j < cols {
        if j < cols && (i >= rows || j * rows <= i * cols) {
            order.push(Panel::B(j));
            j += 1;
        } else {
            order.push(Panel::A(i));
            i += 1;
        }
    }
    order
}

/// Enqueues, on a stream, one product of operands already in device memory
/// (validated, user form) with the tile's `(alpha, beta)`: how the host path
/// runs each tile, and SUMMA each rank's local product (`exec/summa.rs`),
/// the same for every element type (`enqueue` launches the type's kernels
/// with the whole product's plan).
pub(crate) trait TileProduct<T, C> {
    fn enqueue(
        &self,
        scalars: (f64, f64),
        stream: &Arc<CudaStream>,
        dims: &GemmDims,
        operands: (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, C>),
    ) -> Result<(), Error>;
}

impl<T, C, F> TileProduct<T, C> for F
where
    F: Fn(
        (f64, f64),
        &Arc<CudaStream>,
        &GemmDims,
        (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, C>),
    ) -> Result<(), Error>,
{
    fn enqueue(
        &self,
        scalars: (f64, f64),
        stream: &Arc<CudaStream>,
        dims: &GemmDims,
        operands: (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, C>),
    ) -> Result<(), Error> {
        self(scalars, stream, dims, operands)
    }
}

/// Enqueues on `stream` one product of packed workspace operands: A at byte
/// `a.0` of the input workspace with shape `a.1`, B likewise, C at byte
/// `c.0` of the output workspace.
fn enqueue_packed<T: Scalar, C: Scalar>(
    scalars: (f64, f64),
    tile: &impl TileProduct<T, C>,
    stream: &Arc<CudaStream>,
    pool: &mut HostPool,
    a: (usize, MatrixDims),
    b: (usize, MatrixDims),
    c: (usize, MatrixDims),
) -> Result<(), Error> {
    let pd = GemmDims::from_operands(a.1, usize::MAX, b.1, usize::MAX, c.1, usize::MAX)?;
    let len = |d: &MatrixDims| d.required_len().unwrap_or(0).max(1);
    let inputs = pool.inputs.as_ref().expect("prepared");
    let outputs = pool.outputs.as_mut().expect("prepared");
    let (ti, tc) = (size_of::<T>(), size_of::<C>());
    let mut c_bytes = outputs.slice_mut(c.0..c.0 + len(&c.1) * tc);
    // SAFETY: reinterpreting workspace bytes as elements (plain data;
    // offsets are on 256 bytes or whole elements past them).
    let (av, bv, mut cv) = unsafe {
        (
            inputs.slice(a.0..a.0 + len(&a.1) * ti).transmute::<T>(len(&a.1)).expect("in range"),
            inputs.slice(b.0..b.0 + len(&b.1) * ti).transmute::<T>(len(&b.1)).expect("in range"),
            c_bytes.transmute_mut::<C>(len(&c.1)).expect("in range"),
        )
    };
    tile.enqueue(scalars, stream, &pd, (&av, &bv, &mut cv))
}

/// What the host path takes of a call: alpha, beta, and the host path's
/// options ([`crate::Gemm::host_streams`], [`crate::Gemm::memory_budget`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostCall {
    pub alpha: f64,
    pub beta: f64,
    pub streams: Option<usize>,
    pub budget: Option<usize>,
}

/// The product of validated host operands (op applied, user form):
/// `C <- alpha * A * B + beta * C` through the pipeline. Each tile runs by
/// `tile` (with the whole product's plan, so that a tile takes the kernel
/// and split the product would on device matrices), streamed as `policy`
/// says.
pub(crate) fn host_product<T: Scalar, C: Scalar>(
    call: &HostCall,
    device: &Arc<Device>,
    dims: &GemmDims,
    (a, b, c): (HostOperand, HostOperand, HostOperand),
    tile: &impl TileProduct<T, C>,
    policy: HostPolicy,
) -> Result<(), Error> {
    let whole_k = policy.whole_k;
    let e = Sizes { input: size_of::<T>(), output: size_of::<C>() };
    let (m, n, k) = (dims.m, dims.n, dims.k);
    let reads_ab = call.alpha != 0.0 && k > 0;
    let kk = if reads_ab { k } else { 0 };
    let streams = if policy.whole_c { 1 } else { call.streams.unwrap_or_else(|| default_host_streams(m, n, k)).max(1) };
    // The driver answers for the context current on this thread.
    device.context().bind_to_thread().during("cuCtxSetCurrent")?;
    let budget = match call.budget {
        Some(b) => b,
        None => result::mem_get_info().map(|(free, _)| free / 10 * 9).unwrap_or(1 << 30),
    };
    let locked = reads_ab && a.page_locked(e.input) && b.page_locked(e.input);
    let plan = if policy.whole_c {
        let tiling = Tiling { pm: m.max(1), pn: n.max(1), pk: kk.max(1) };
        let input_bytes = (aligned(m * kk * e.input) + aligned(kk * n * e.input)).max(256);
        TilePlan { tiling, in_core: true, input_bytes }
    } else {
        plan_tiles((m, n, kk), streams, budget, column_panel(n, locked && policy.column_panels), e, whole_k)
    };
    let t = plan.tiling;
    let needed = plan.input_bytes + t.output_bytes(streams, e);
    if (whole_k && call.budget.is_some() || policy.whole_c) && needed > budget {
        return Err(Error::MemoryBudget { budget, needed });
    }
    let mut guard = device.host_pool.lock().unwrap_or_else(|p| p.into_inner());
    if guard.is_none() {
        *guard = Some(HostPool::new(device.context())?);
    }
    let pool = guard.as_mut().expect("just made");
    // The compute streams, and one more for the in-core uploads.
    pool.prepare(device.context(), device.stream(), plan.input_bytes, t.output_bytes(streams, e), streams + 1)?;
    let ins = crate::device::memory::address(pool.inputs.as_ref().expect("prepared"));
    let outs = crate::device::memory::address(pool.outputs.as_ref().expect("prepared"));
    // A and B not read (alpha = 0 or k = 0): the tiles compute beta C.
    let alpha = if reads_ab { call.alpha } else { 0.0 };
    let (operands, workspace) = ((a, b, c), (ins, outs));
    let run = TileRun { device, alpha, beta: call.beta, tile, m, n, kk, t, streams, e };
    let result = if plan.in_core {
        in_core(pool, &run, operands, workspace)
    } else {
        out_of_core(pool, &run, operands, workspace)
    };
    // Always wait for every copy before returning: they read and write
    // the caller's memory.
    let drained = pool.drain();
    result.and(drained)
}

/// Out of core: C tile by tile on the compute streams in turn, k in
/// chunks of `t.pk`; each chunk of A (and of B, unless k is whole and
/// B's column panel stays for its column of tiles) streams through the
/// tile's stream's slot, and C's block goes back after its last chunk.
fn out_of_core<T: Scalar, C: Scalar>(
    pool: &mut HostPool,
    run: &TileRun<'_, impl TileProduct<T, C>>,
    (a, b, c): (HostOperand, HostOperand, HostOperand),
    (ins, outs): (u64, u64),
) -> Result<(), Error> {
    let TileRun { alpha, beta, tile, m, n, kk, t, streams, e, .. } = *run;
    let reads_ab = kk > 0;
    let resident_b = t.pk == kk; // k whole: B's column panel is shared by its tiles
    let resident = if resident_b { aligned(t.pk * t.pn * e.input) } else { 0 };
    // Byte offsets in the input workspace: stream s's slot of A's
    // piece, and of B's (the resident column panel when k is whole).
    let a_at = |s: usize| resident + s * t.slot_bytes(kk, e);
    let b_at = |s: usize| if resident_b { 0 } else { a_at(s) + aligned(t.pm * t.pk * e.input) };
    let primary = pool.streams[0].clone();
    let mut tile_index = 0;
    let mut done_events: Vec<CudaEvent> = Vec::new();
    for c0 in (0..n).step_by(t.pn) {
        let cols = t.pn.min(n - c0);
        let b_ready = if resident_b && reads_ab {
            // Every stream is done with the previous panel of B.
            for ev in done_events.drain(..) {
                primary.wait(&ev).during("cuStreamWaitEvent")?;
            }
            pool.upload(&b.block(e.input, 0, c0, kk, cols), ins, &primary)?;
            Some(primary.record_event(None).during("cuEventRecord")?)
        } else {
            None
        };
        for r0 in (0..m).step_by(t.pm) {
            let rows = t.pm.min(m - r0);
            let s = tile_index % streams;
            tile_index += 1;
            let stream = pool.streams[s].clone();
            if let Some(ev) = &b_ready {
                stream.wait(ev).during("cuStreamWaitEvent")?;
            }
            let c_block = c.block(e.output, r0, c0, rows, cols);
            let c_dims = MatrixDims::packed_in(rows, cols, c.dims.layout);
            let chunks = if kk == 0 { 1 } else { kk.div_ceil(t.pk) };
            for l in 0..chunks {
                let (k0, depth) = (l * t.pk, t.pk.min(kk.saturating_sub(l * t.pk)));
                if reads_ab {
                    pool.upload(&a.block(e.input, r0, k0, rows, depth), ins + a_at(s) as u64, &stream)?;
                    if !resident_b {
                        pool.upload(&b.block(e.input, k0, c0, depth, cols), ins + b_at(s) as u64, &stream)?;
                    }
                }
                let first = l == 0;
                if first && beta != 0.0 {
                    pool.upload(&c_block, outs + t.c_slot(s, e) as u64, &stream)?;
                }
                let a_dims = MatrixDims::packed_in(rows, depth, a.dims.layout);
                // A resident B panel is k x cols, packed: rows k0.. of it.
                let (b_off, b_dims) = if resident_b {
                    MatrixDims::packed_in(kk, cols, b.dims.layout).sub(k0, 0, depth, cols)?
                } else {
                    (0, MatrixDims::packed_in(depth, cols, b.dims.layout))
                };
                let scalars = (alpha, if first { beta } else { 1.0 });
                let (a_op, b_op) = ((a_at(s), a_dims), (b_at(s) + b_off * e.input, b_dims));
                enqueue_packed(scalars, tile, &stream, pool, a_op, b_op, (t.c_slot(s, e), c_dims))?;
            }
            pool.download(outs + t.c_slot(s, e) as u64, &c_block, &stream)?;
            if resident_b && reads_ab {
                done_events.push(stream.record_event(None).during("cuEventRecord")?);
            }
        }
    }
    Ok(())
}

/// In core: A's row panels and B's column panels are uploaded once each,
/// on their own stream, in [`upload_order`]; each tile of C runs (on the
/// compute streams in turn) as soon as its two panels are enqueued,
/// waiting for their copies, and its block of C goes straight back.
fn in_core<T: Scalar, C: Scalar>(
    pool: &mut HostPool,
    run: &TileRun<'_, impl TileProduct<T, C>>,
    (a, b, c): (HostOperand, HostOperand, HostOperand),
    (ins, outs): (u64, u64),
) -> Result<(), Error> {
    let TileRun { alpha, beta, tile, m, n, kk, t, streams, e, .. } = *run;
    let (rows_of, cols_of) = (m.div_ceil(t.pm), n.div_ceil(t.pn));
    let up = pool.streams[streams].clone();
    // Byte offsets in the input workspace: A whole (row panel i at row
    // i * pm; pm is a multiple of 128 or m), then B's column panels
    // (each k x pn, packed), each on 256 bytes.
    let a_at = |i: usize| i * t.pm * kk * e.input;
    let b_at = |j: usize| aligned(m * kk * e.input) + j * aligned(t.pn * kk * e.input);
    let mut a_ready: Vec<Option<CudaEvent>> = (0..rows_of).map(|_| None).collect();
    let mut b_ready: Vec<Option<CudaEvent>> = (0..cols_of).map(|_| None).collect();
    let mut tile_index = 0;
    let mut run_tile = |pool: &mut HostPool, i: usize, j: usize, ready: [Option<&CudaEvent>; 2]| {
        let (r0, c0) = (i * t.pm, j * t.pn);
        let (rows, cols) = (t.pm.min(m - r0), t.pn.min(n - c0));
        let s = tile_index % streams;
        tile_index += 1;
        let stream = pool.streams[s].clone();
        for ev in ready.into_iter().flatten() {
            stream.wait(ev).during("cuStreamWaitEvent")?;
        }
        let c_block = c.block(e.output, r0, c0, rows, cols);
        let c_slot = t.c_slot(s, e);
        if beta != 0.0 {
            pool.upload(&c_block, outs + c_slot as u64, &stream)?;
        }
        let a_op = (a_at(i), MatrixDims::packed_in(rows, kk, a.dims.layout));
        let b_op = (b_at(j), MatrixDims::packed_in(kk, cols, b.dims.layout));
        let c_op = (c_slot, MatrixDims::packed_in(rows, cols, c.dims.layout));
        enqueue_packed((alpha, beta), tile, &stream, pool, a_op, b_op, c_op)?;
        pool.download(outs + c_slot as u64, &c_block, &stream)
    };
    if kk == 0 {
        // Nothing to upload (alpha = 0 or k = 0): C = beta C tile by tile.
        for j in 0..cols_of {
            for i in 0..rows_of {
                run_tile(pool, i, j, [None, None])?;
            }
        }
        return Ok(());
    }
    for panel in upload_order(rows_of, cols_of) {
        match panel {
            Panel::A(i) => {
                let (r0, rows) = (i * t.pm, t.pm.min(m - i * t.pm));
                pool.upload(&a.block(e.input, r0, 0, rows, kk), ins + a_at(i) as u64, &up)?;
                a_ready[i] = Some(up.record_event(None).during("cuEventRecord")?);
                for (j, ev) in b_ready.iter().enumerate() {
                    if let Some(ev) = ev {
                        run_tile(pool, i, j, [a_ready[i].as_ref(), Some(ev)])?;
                    }
                }
            }
            Panel::B(j) => {
                let (c0, cols) = (j * t.pn, t.pn.min(n - j * t.pn));
                pool.upload(&b.block(e.input, 0, c0, kk, cols), ins + b_at(j) as u64, &up)?;
                b_ready[j] = Some(up.record_event(None).during("cuEventRecord")?);
                for (i, ev) in a_ready.iter().enumerate() {
                    if let Some(ev) = ev {
                        run_tile(pool, i, j, [Some(ev), b_ready[j].as_ref()])?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// One call's tiling and how its tiles run.
struct TileRun<'r, K> {
    #[allow(dead_code)]
    device: &'r Arc<Device>,
    /// The tiles' alpha (0 when A and B are not read) and beta.
    alpha: f64,
    beta: f64,
    tile: &'r K,
    m: usize,
    n: usize,
    kk: usize,
    t: Tiling,
    streams: usize,
    e: Sizes,
}

impl<K> Clone for TileRun<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for TileRun<'_, K> {}

/// Streams of the host path by problem size, from the table of
/// `examples/host_streams.rs` (NVIDIA H200, 2026-11-21, f64 from pageable
/// memory, in-core tiling): 2 streams were fastest up to 2048^3 (3.9 ms
/// against 4.2 with 4 and 4.9 with 8), 4 at 4096^3 (9.3 ms against 10.0
/// and 13.2) and 8192^3 (39.3 ms against 43.2 and 42.2).
fn default_host_streams(m: usize, n: usize, k: usize) -> usize {
    if (m as f64) * (n as f64) * (k as f64) <= (1u64 << 33) as f64 {
        2
    } else {
        4
    }
}

/// How a product is laid out in device memory.
#[derive(Clone, Copy, Debug)]
struct TilePlan {
    tiling: Tiling,
    /// A and B are held whole (each panel uploaded once, in
    /// [`upload_order`]); else out of core ([`Tiling`]'s per-stream slots).
    in_core: bool,
    /// Bytes of the input workspace.
    input_bytes: usize,
}

/// How a type's host products stream.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostPolicy {
    /// Keep k whole out of core (a C of 16 bits: its partial sums are not
    /// rounded to C's type between chunks of k).
    pub whole_k: bool,
    /// Whether page-locked operands with n >= 16384 may take B in column
    /// panels ([`column_panel`]): for the ladder's f64 and f32, whose
    /// kernels are slower than the copies. The tensor-core types' products
    /// are bound by the copies, and there B whole measured faster (NVIDIA
    /// H100, 2026-11-25, f16 -> f32 from page-locked matrices,
    /// `examples/host_mixed.rs`: 16384^3 in column panels of 2048 took 41.3
    /// ms, 2.12x its transfer bound, against 31.6 ms, 1.70x, for 16000^3
    /// with B whole; bf16 -> bf16 30.3 ms, 1.56x, against 22.4 ms, 1.21x).
    pub column_panels: bool,
    /// C whole, in one tile on one stream, in core (the emulation's
    /// accurate mode, whose scales depend on all of C's rows and columns);
    /// a typed error where it does not fit the memory budget.
    pub whole_c: bool,
}

impl HostPolicy {
    /// The ladder's f64 and f32 products.
    pub(crate) const LADDER: HostPolicy = HostPolicy { whole_k: false, column_panels: true, whole_c: false };

    /// The tensor-core products (f16, bf16, TF32, i8) into a C of
    /// `c_bytes` bytes an element.
    pub(crate) fn tensor_cores(c_bytes: usize) -> HostPolicy {
        HostPolicy { whole_k: c_bytes == 2, column_panels: false, whole_c: false }
    }
}

/// Columns of B per panel in core: B whole (its first tile waits for all of
/// it), except when A and B are page-locked and n >= 16384: panels of n / 8
/// columns, at least 2048, uploaded interleaved with A's row panels
/// ([`upload_order`]), so the first tiles start after a fraction of B.
///
/// Measured on an NVIDIA H200 (2026-11-22, f64, page-locked square
/// matrices, `examples/host_streams.rs`): at 16384^3 panels of 2048 took
/// 196 ms against 208 for B whole; at 8192^3 they took 36.0 ms against 32.8
/// (not analysed; a model of the copy engines and SMs predicted 27 ms: the
/// 16 KiB lines of a row-major B's panels and the narrower tiles' kernels
/// are candidates), so below 16384 B stays whole. The B-whole figures come
/// from the run before the upload stream (same order of copies).
/// From pageable memory the host's packing paces the uploads and B whole
/// measured faster (2026-11-21: four panels, 41 ms against 33 at 8192^3).
fn column_panel(n: usize, page_locked: bool) -> usize {
    if page_locked && n >= COLUMN_PANELS_FROM_N {
        (n / 8).max(2048).div_ceil(64) * 64
    } else {
        n.max(1)
    }
}

/// The smallest n at which page-locked operands take B in column panels.
const COLUMN_PANELS_FROM_N: usize = 16384;

/// In core when A, B and a C tile per stream fit the budget (bytes): C in
/// row panels of A (two per stream) by column panels of `pn` columns of B;
/// else [`choose_tiling`].
fn plan_tiles(
    (m, n, k): (usize, usize, usize),
    streams: usize,
    budget: usize,
    pn: usize,
    e: Sizes,
    whole_k: bool,
) -> TilePlan {
    let round = |x: usize, q: usize| x.div_ceil(q) * q;
    let pm = round(m.div_ceil(2 * streams), 128).clamp(1, m.max(1));
    let in_core = Tiling { pm, pn: pn.clamp(1, n.max(1)), pk: k.max(1) };
    let held = aligned(m * k * e.input) + n.div_ceil(in_core.pn) * aligned(k * in_core.pn * e.input);
    if held + in_core.output_bytes(streams, e) <= budget {
        return TilePlan { tiling: in_core, in_core: true, input_bytes: held.max(256) };
    }
    let tiling = choose_tiling(m, n, k, streams, budget, e, whole_k);
    TilePlan { tiling, in_core: false, input_bytes: tiling.input_bytes(k, streams, e).max(256) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tilings_fit_their_budget() {
        let sizes = [Sizes { input: 8, output: 8 }, Sizes { input: 2, output: 4 }, Sizes { input: 1, output: 4 }];
        for (m, n, k) in [(4096, 4096, 4096), (100, 7, 100000), (1, 1, 1), (8192, 3, 5), (3000, 3000, 17)] {
            for budget in [16, 1 << 12, 1 << 20, 1 << 28] {
                for e in sizes {
                    let t = choose_tiling(m, n, k, 4, budget, e, false);
                    assert!(t.pm >= 1 && t.pn >= 1 && t.pk >= 1);
                    // Below the least (a 256-byte slot for each piece), single elements.
                    assert!(t.bytes(k, 4, e) <= budget.max(12 * 256), "{m}x{n}x{k} in {budget}: {t:?}");
                }
            }
        }
    }

    #[test]
    fn whole_k_tilings_keep_k_and_fit_when_a_line_fits() {
        let e = Sizes { input: 2, output: 2 };
        for (m, n, k) in [(16384, 16384, 16384), (100, 7, 100000), (3000, 3000, 2000)] {
            for budget in [1 << 20, 16 << 20, 1 << 28] {
                let t = choose_tiling(m, n, k, 2, budget, e, true);
                assert_eq!(t.pk, k);
                // A row of A and a column of B per stream fit: so does the tiling.
                if 3 * aligned(k * 2) + 2 * 256 <= budget {
                    assert!(t.bytes(k, 2, e) <= budget, "{m}x{n}x{k} in {budget}: {t:?}");
                }
            }
        }
    }

    #[test]
    fn upload_order_is_b_whole_then_a_with_one_panel_of_b() {
        let order = upload_order(4, 1);
        assert_eq!(order, [Panel::B(0), Panel::A(0), Panel::A(1), Panel::A(2), Panel::A(3)]);
    }

    #[test]
    fn upload_order_holds_every_panel_once_and_grows_square() {
        for (rows, cols) in [(8, 4), (8, 8), (3, 7), (1, 1), (16, 8), (5, 2)] {
            let order = upload_order(rows, cols);
            assert_eq!(order.len(), rows + cols);
            assert_eq!(order[0], Panel::B(0));
            let (mut i, mut j) = (0, 0);
            for p in &order {
                match *p {
                    Panel::A(x) => {
                        assert_eq!(x, i);
                        i += 1;
                    }
                    Panel::B(x) => {
                        assert_eq!(x, j);
                        j += 1;
                    }
                }
                // Neither side runs ahead of the other by more than one panel's share.
                assert!(
                    j * rows <= (i + 1) * cols + rows && i * cols <= (j + 1) * rows + cols,
                    "{rows}x{cols}: {order:?}"
                );
            }
            assert_eq!((i, j), (rows, cols));
        }
    }

    #[test]
    fn column_panels_only_for_large_page_locked_products() {
        assert_eq!(column_panel(4096, true), 4096);
        assert_eq!(column_panel(8192, true), 8192);
        assert_eq!(column_panel(16384, false), 16384);
        assert_eq!(column_panel(16384, true), 2048);
        assert_eq!(column_panel(40000, true), 5056);
        assert_eq!(column_panel(0, false), 1);
        for (m, n, k, pn) in [(8192, 8192, 8192, 2048), (8192, 10000, 300, 2048), (300, 5, 7, 5)] {
            let plan = plan_tiles((m, n, k), 4, 8 << 30, pn, Sizes { input: 8, output: 8 }, false);
            assert!(plan.in_core, "{m}x{n}x{k}");
            assert!(plan.input_bytes >= (m * k + k * n) * 8);
            assert_eq!(plan.tiling.pn, pn.min(n));
        }
    }
}
