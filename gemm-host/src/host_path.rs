//! The host path: products of matrices in host memory, with the copies
//! overlapped with the compute (seed 002: Martini and Boldo split the
//! product over CUDA streams so that uploads, kernels and downloads of
//! different parts run at once).
//!
//! C (in the kernel's terms, m x n) is cut into tiles of rows x columns, and
//! k into chunks when the product does not fit the device's memory budget.
//! Tile t runs on stream `t % S`: upload its panel of op(A) (and its block
//! of C when beta != 0), compute, download its block of C. op(B)'s column
//! panel is uploaded once per column of tiles and stays on the device while
//! every tile of that column uses it (unless k is chunked: out of core, every
//! piece is streamed through per tile). Copy engines, SMs and the host all
//! work at once: while the GPU computes tile t, tile t + 1 uploads and tile
//! t - 1 downloads.
//!
//! Host memory the driver knows to be page-locked (a [`crate::Matrix`] made
//! with [`crate::Matrix::pinned`], or any memory the caller registered) is
//! copied directly. Pageable memory goes through a ring of page-locked
//! staging buffers kept in a per-device pool ([`HostPool`]): the host packs
//! the next piece into a free buffer (with all cores, rayon) while earlier
//! pieces are in flight, and unpacks finished downloads into C. Neither
//! device memory nor page-locked memory is allocated per call once the pool
//! has grown to the largest call seen.

use crate::device::Device;
use crate::element::Element;
use crate::error::{DriverContext, Error};
use crate::gemm::Gemm;
use cudarc::driver::sys::CUresult;
use cudarc::driver::{result, sys, CudaEvent, CudaSlice, CudaStream};
use gemm_core::shape::MatrixDims;
use gemm_core::GemmDims;
use rayon::prelude::*;
use std::mem::size_of;
use std::sync::Arc;

/// Bytes of one page-locked staging buffer.
const STAGING_BYTES: usize = 8 << 20;
/// Staging buffers in each of the two rings (uploads, downloads): separate,
/// so packing the next upload never waits behind a download that waits for
/// a kernel.
const STAGING_BUFFERS: usize = 8;
/// Bytes one thread copies at a time when packing or unpacking a staging
/// buffer (16 of them fill one buffer: all cores copy at once).
const COPY_GRAIN: usize = 512 << 10;

/// A contiguous run of bytes in host memory.
#[derive(Clone, Copy)]
struct Segment {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: segments name disjoint ranges of the caller's matrices or of
// staging buffers, copied by one thread each (rayon), during one call.
unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

/// The host bytes of a block of a strided matrix, line by line (rows of a
/// row-major matrix, columns of a column-major one), merged where contiguous.
fn segments(base: *const u8, dims: &MatrixDims, elem: usize, out: &mut Vec<Segment>) {
    let (outer, line) = dims.lines();
    if outer == 0 || line == 0 {
        return;
    }
    for o in 0..outer {
        let ptr = base.wrapping_add(o * dims.ld * elem) as *mut u8;
        let len = line * elem;
        match out.last_mut() {
            Some(last) if last.ptr.wrapping_add(last.len) == ptr => last.len += len,
            _ => out.push(Segment { ptr, len }),
        }
    }
}

/// One page-locked staging buffer, the event of its last copy, and the
/// unpacking into C still owed for a download that went through it.
struct Staging {
    ptr: *mut u8,
    event: CudaEvent,
    /// Where the bytes of a finished download go: (offset in the buffer, segment).
    owed: Vec<(usize, Segment)>,
}

/// The per-device resources of the host path: the staging ring, a device
/// workspace that grows to the largest call, and the streams.
pub(crate) struct HostPool {
    /// Uploads use buffers 0..STAGING_BUFFERS, downloads the rest.
    ring: Vec<Staging>,
    next: [usize; 2],
    /// Device memory for the operands read (A panels, B) ...
    inputs: Option<CudaSlice<u8>>,
    /// ... and for the tiles of C.
    outputs: Option<CudaSlice<u8>>,
    streams: Vec<Arc<CudaStream>>,
}

// SAFETY: the raw pointers are page-locked buffers owned by the pool (freed
// in Drop) and, between the start and the end of one call (which holds the
// pool's lock throughout), the caller's matrices.
unsafe impl Send for HostPool {}

impl Drop for HostPool {
    fn drop(&mut self) {
        for s in &self.ring {
            let _ = s.event.synchronize();
            // SAFETY: allocated by malloc_host in `HostPool::new`, not used after.
            unsafe {
                let _ = result::free_host(s.ptr as _);
            }
        }
    }
}

/// Whether the driver knows `p` as page-locked host memory (allocated or
/// registered through CUDA). `cuPointerGetAttributes`, not the singular
/// call: it answers "unknown" for ordinary memory instead of failing (a
/// failing API call counts as an error under compute-sanitizer).
fn is_page_locked(p: *const u8) -> bool {
    let mut ty: u32 = 0;
    let mut attribute = sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    let mut data = [&mut ty as *mut u32 as *mut core::ffi::c_void];
    // SAFETY: one attribute into a local; any pointer value is allowed.
    let r = unsafe { sys::cuPointerGetAttributes(1, &mut attribute, data.as_mut_ptr(), p as sys::CUdeviceptr) };
    r == CUresult::CUDA_SUCCESS && ty == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
}

impl HostPool {
    fn new(device: &Device) -> Result<Self, Error> {
        let ctx = device.context();
        ctx.bind_to_thread().during("cuCtxSetCurrent")?;
        let mut ring = Vec::with_capacity(STAGING_BUFFERS);
        for _ in 0..2 * STAGING_BUFFERS {
            // Not write-combined: downloads are read back by the CPU.
            // SAFETY: a plain allocation, freed in Drop.
            let ptr = unsafe { result::malloc_host(STAGING_BYTES, 0) }.during("cuMemHostAlloc")? as *mut u8;
            let event = ctx.new_event(None).during("cuEventCreate")?;
            ring.push(Staging { ptr, event, owed: Vec::new() });
        }
        Ok(HostPool { ring, next: [0, 0], inputs: None, outputs: None, streams: Vec::new() })
    }

    /// At least `inputs` and `outputs` bytes of device workspace (grown,
    /// never shrunk), and `count` streams.
    fn prepare(&mut self, device: &Device, inputs: usize, outputs: usize, count: usize) -> Result<(), Error> {
        for (w, bytes) in [(&mut self.inputs, inputs), (&mut self.outputs, outputs)] {
            if w.as_ref().is_none_or(|w| w.len() < bytes) {
                *w = None; // free the old one first
                           // SAFETY: written before read (uploads or the kernel's output).
                           // SAFETY: written before read (uploads or the kernel's output).
                let buf = unsafe { device.stream().alloc::<u8>(bytes.max(1)) }
                    .map_err(|_| Error::OutOfMemory { bytes: bytes.max(1) })?;
                *w = Some(buf);
            }
        }
        device.stream().synchronize().during("cuStreamSynchronize")?;
        while self.streams.len() < count {
            self.streams.push(device.context().new_stream().during("cuStreamCreate")?);
        }
        Ok(())
    }

    /// The next staging buffer of the upload (`down == false`) or download
    /// ring, once its last copy has finished and what it owed to C has been
    /// unpacked.
    fn take(&mut self, down: bool) -> Result<usize, Error> {
        let r = down as usize;
        let i = r * STAGING_BUFFERS + self.next[r];
        self.next[r] = (self.next[r] + 1) % STAGING_BUFFERS;
        self.settle(i)?;
        Ok(i)
    }

    fn settle(&mut self, i: usize) -> Result<(), Error> {
        let s = &mut self.ring[i];
        s.event.synchronize().during("cuEventSynchronize")?;
        let src = s.ptr as usize;
        let owed = std::mem::take(&mut s.owed);
        owed.par_iter().for_each(|&(off, seg)| {
            // SAFETY: the download into this buffer has finished (event);
            // the segment lies in the caller's C, exclusively borrowed for
            // the call; the ranges do not overlap.
            unsafe { std::ptr::copy_nonoverlapping((src as *const u8).add(off), seg.ptr, seg.len) };
        });
        Ok(())
    }

    /// Waits for every copy and unpacks every finished download.
    fn drain(&mut self) -> Result<(), Error> {
        for s in &self.streams {
            s.synchronize().during("cuStreamSynchronize")?;
        }
        for i in 0..self.ring.len() {
            self.settle(i)?;
        }
        Ok(())
    }

    /// Enqueues on `stream` the copy of the host bytes `segs` (concatenated)
    /// to device address `dst`.
    fn upload(&mut self, segs: &[Segment], dst: u64, stream: &CudaStream) -> Result<(), Error> {
        let locked =
            segs.first().is_some_and(|s| is_page_locked(s.ptr) && is_page_locked(s.ptr.wrapping_add(s.len - 1)));
        let mut at = dst;
        if locked && segs.iter().all(|s| is_page_locked(s.ptr)) {
            if let Some((ptr, pitch, width, height)) = regular(segs) {
                // SAFETY: page-locked lines of the caller's matrix to a
                // packed workspace range; drained before return.
                return unsafe { copy_2d(ptr, pitch, dst, width, width, height, true, stream) };
            }
            for s in segs {
                // SAFETY: page-locked host memory of s.len bytes to a
                // workspace range of the same size; drained before return.
                unsafe { result::memcpy_htod_async(at, std::slice::from_raw_parts(s.ptr, s.len), stream.cu_stream()) }
                    .during("cuMemcpyHtoDAsync")?;
                at += s.len as u64;
            }
            return Ok(());
        }
        // Pack into staging buffers, one buffer's worth at a time.
        let mut pieces: Vec<(usize, Segment)> = Vec::new();
        let mut fill = 0;
        let flush = |pool: &mut Self, pieces: &mut Vec<(usize, Segment)>, fill: &mut usize, at: &mut u64| {
            if *fill == 0 {
                return Ok::<(), Error>(());
            }
            let i = pool.take(false)?;
            let buf = pool.ring[i].ptr as usize;
            pieces.par_iter().for_each(|&(off, seg)| {
                // SAFETY: the buffer is free (take); the segment is the
                // caller's readable memory; ranges do not overlap.
                unsafe { std::ptr::copy_nonoverlapping(seg.ptr, (buf as *mut u8).add(off), seg.len) };
            });
            // SAFETY: page-locked staging of `fill` bytes; the event guards its reuse.
            unsafe {
                result::memcpy_htod_async(*at, std::slice::from_raw_parts(buf as *const u8, *fill), stream.cu_stream())
            }
            .during("cuMemcpyHtoDAsync")?;
            pool.ring[i].event.record(stream).during("cuEventRecord")?;
            *at += *fill as u64;
            pieces.clear();
            *fill = 0;
            Ok(())
        };
        for s in segs {
            let mut done = 0;
            while done < s.len {
                let n = (s.len - done).min(STAGING_BYTES - fill).min(COPY_GRAIN);
                pieces.push((fill, Segment { ptr: s.ptr.wrapping_add(done), len: n }));
                fill += n;
                done += n;
                if fill == STAGING_BYTES {
                    flush(self, &mut pieces, &mut fill, &mut at)?;
                }
            }
        }
        flush(self, &mut pieces, &mut fill, &mut at)
    }

    /// Enqueues on `stream` the copy of device bytes from `src` into the
    /// host segments `segs` (concatenated); pageable segments are written
    /// when their staging buffer settles (at the latest in [`HostPool::drain`]).
    fn download(&mut self, src: u64, segs: &[Segment], stream: &CudaStream) -> Result<(), Error> {
        let locked = segs.iter().all(|s| is_page_locked(s.ptr) && is_page_locked(s.ptr.wrapping_add(s.len - 1)));
        let mut at = src;
        if locked {
            if let Some((ptr, pitch, width, height)) = regular(segs) {
                // SAFETY: packed workspace range to the caller's page-locked
                // C, exclusively borrowed; drained before return.
                return unsafe { copy_2d(ptr, pitch, src, width, width, height, false, stream) };
            }
            for s in segs {
                // SAFETY: the caller's page-locked C, exclusively borrowed; drained before return.
                unsafe {
                    result::memcpy_dtoh_async(std::slice::from_raw_parts_mut(s.ptr, s.len), at, stream.cu_stream())
                }
                .during("cuMemcpyDtoHAsync")?;
                at += s.len as u64;
            }
            return Ok(());
        }
        let mut owed: Vec<(usize, Segment)> = Vec::new();
        let mut fill = 0;
        let flush = |pool: &mut Self, owed: &mut Vec<(usize, Segment)>, fill: &mut usize, at: &mut u64| {
            if *fill == 0 {
                return Ok::<(), Error>(());
            }
            let i = pool.take(true)?;
            let buf = pool.ring[i].ptr;
            // SAFETY: the buffer is free; `fill` bytes of workspace.
            unsafe { result::memcpy_dtoh_async(std::slice::from_raw_parts_mut(buf, *fill), *at, stream.cu_stream()) }
                .during("cuMemcpyDtoHAsync")?;
            pool.ring[i].event.record(stream).during("cuEventRecord")?;
            pool.ring[i].owed = std::mem::take(owed);
            *at += *fill as u64;
            *fill = 0;
            Ok(())
        };
        for s in segs {
            let mut done = 0;
            while done < s.len {
                let n = (s.len - done).min(STAGING_BYTES - fill).min(COPY_GRAIN);
                owed.push((fill, Segment { ptr: s.ptr.wrapping_add(done), len: n }));
                fill += n;
                done += n;
                if fill == STAGING_BYTES {
                    flush(self, &mut owed, &mut fill, &mut at)?;
                }
            }
        }
        flush(self, &mut owed, &mut fill, &mut at)
    }
}

/// Segments of equal length at equal distances (the lines of a block of a
/// strided matrix): (first, pitch, width, height) in bytes, when there are
/// at least two.
fn regular(segs: &[Segment]) -> Option<(*mut u8, usize, usize, usize)> {
    let (first, second) = (segs.first()?, segs.get(1)?);
    let pitch = (second.ptr as usize).checked_sub(first.ptr as usize)?;
    let ok =
        segs.iter().enumerate().all(|(i, s)| s.len == first.len && s.ptr as usize == first.ptr as usize + i * pitch);
    ok.then_some((first.ptr, pitch, first.len, segs.len()))
}

/// `cuMemcpy2DAsync` between page-locked host lines (`host`, `host_pitch`)
/// and packed device lines (`dev`, `dev_pitch`), `width` bytes by `height`
/// lines; `up` copies host to device.
///
/// # Safety
/// Both ranges are valid for the copy until the stream is synchronized.
#[allow(clippy::too_many_arguments)]
unsafe fn copy_2d(
    host: *mut u8,
    host_pitch: usize,
    dev: u64,
    dev_pitch: usize,
    width: usize,
    height: usize,
    up: bool,
    stream: &CudaStream,
) -> Result<(), Error> {
    let (h, d) = (sys::CUmemorytype::CU_MEMORYTYPE_HOST, sys::CUmemorytype::CU_MEMORYTYPE_DEVICE);
    // (Not `mem::zeroed`: the memory-type enum has no zero value.)
    let p = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: if up { h } else { d },
        srcHost: if up { host as *const core::ffi::c_void } else { core::ptr::null() },
        srcDevice: if up { 0 } else { dev },
        srcArray: core::ptr::null_mut(),
        srcPitch: if up { host_pitch } else { dev_pitch },
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: if up { d } else { h },
        dstHost: if up { core::ptr::null_mut() } else { host as *mut core::ffi::c_void },
        dstDevice: if up { dev } else { 0 },
        dstArray: core::ptr::null_mut(),
        dstPitch: if up { dev_pitch } else { host_pitch },
        WidthInBytes: width,
        Height: height,
    };
    // SAFETY: forwarded from the caller.
    unsafe { sys::cuMemcpy2DAsync_v2(&p, stream.cu_stream()) }.result().during("cuMemcpy2DAsync")
}

/// A host operand as the host path sees it: storage base and shape (after
/// op), elements of `T`.
#[derive(Clone, Copy)]
pub(crate) struct HostOperand {
    pub base: *const u8,
    pub dims: MatrixDims,
}

impl HostOperand {
    /// Segments of the block (row0, col0, rows, cols).
    fn block(&self, elem: usize, row0: usize, col0: usize, rows: usize, cols: usize) -> Vec<Segment> {
        let mut out = Vec::new();
        if rows == 0 || cols == 0 {
            return out;
        }
        let (offset, dims) = self.dims.sub(row0, col0, rows, cols).expect("inside the operand");
        segments(self.base.wrapping_add(offset * elem), &dims, elem, &mut out);
        out
    }
}

/// Tiling of one product: C in tiles of `pm x pn`, k in chunks of `pk`.
#[derive(Clone, Copy, Debug)]
struct Tiling {
    pm: usize,
    pn: usize,
    pk: usize,
}

impl Tiling {
    /// Elements of device memory for inputs: the resident B panel (when k
    /// is whole) and per stream an A panel and (out of core) a B chunk.
    fn input_elements(&self, k: usize, streams: usize) -> usize {
        let resident = self.pk == k;
        let b = self.pk * self.pn;
        (if resident { b } else { 0 }) + streams * (self.pm * self.pk + if resident { 0 } else { b })
    }

    /// Elements for outputs: a C tile per stream.
    fn output_elements(&self, streams: usize) -> usize {
        streams * self.pm * self.pn
    }

    fn elements(&self, k: usize, streams: usize) -> usize {
        self.input_elements(k, streams) + self.output_elements(streams)
    }
}

fn choose_tiling(m: usize, n: usize, k: usize, streams: usize, budget_elems: usize) -> Tiling {
    let round = |x: usize, q: usize| x.div_ceil(q) * q;
    // Enough tiles for the streams to overlap, each still a full-size GEMM.
    let mut t = Tiling { pm: round(m.div_ceil(2 * streams), 128).clamp(1, m.max(1)), pn: n.max(1), pk: k.max(1) };
    while t.elements(k, streams) > budget_elems {
        // Shrink the largest dimension of what is held, not below a tile.
        if t.pn >= t.pm.max(t.pk) && t.pn > 128 {
            t.pn = round(t.pn / 2, 64);
        } else if t.pk >= t.pm && t.pk > 128 {
            t.pk = round(t.pk / 2, 64);
        } else if t.pm > 64 {
            t.pm = round(t.pm / 2, 32);
        } else if t.pm.max(t.pn).max(t.pk) > 1 {
            // A tiny budget (tests): halve everything down to single elements.
            t.pm = t.pm.div_ceil(2);
            t.pn = t.pn.div_ceil(2);
            t.pk = t.pk.div_ceil(2);
        } else {
            break;
        }
    }
    t
}

impl Gemm {
    /// The product of validated host operands (op applied, user form):
    /// `C <- alpha * A * B + beta * C` through the pipeline.
    pub(crate) fn host_product<T: Element>(
        &self,
        device: &Arc<Device>,
        dims: &GemmDims,
        a: HostOperand,
        b: HostOperand,
        c: HostOperand,
    ) -> Result<(), Error> {
        let elem = size_of::<T>();
        let (m, n, k) = (dims.m, dims.n, dims.k);
        let reads_ab = self.alpha != 0.0 && k > 0;
        let kk = if reads_ab { k } else { 0 };
        let streams = self.host_streams.unwrap_or_else(|| default_host_streams(m, n, k)).max(1);
        // The driver answers for the context current on this thread.
        device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let budget = match self.memory_budget {
            Some(b) => b,
            None => result::mem_get_info().map(|(free, _)| free / 10 * 9).unwrap_or(1 << 30),
        } / elem;
        let plan = plan_tiles(m, n, kk, streams, budget);
        let t = plan.tiling;
        let mut guard = device.host_pool.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(HostPool::new(device)?);
        }
        let pool = guard.as_mut().expect("just made");
        pool.prepare(device, plan.input_elements * elem, t.output_elements(streams) * elem, streams)?;
        let ins = crate::device_matrix::address(pool.inputs.as_ref().expect("prepared"));
        let outs = crate::device_matrix::address(pool.outputs.as_ref().expect("prepared"));
        let at = |elements: usize| ins + (elements * elem) as u64;
        let resident_b = t.pk == kk; // k whole: B's column panel is shared by its tiles
        let per_stream_in = t.pm * t.pk + if resident_b { 0 } else { t.pk * t.pn };
        // Device addresses: A's row panel i (tile on stream s), B's column
        // panel j, C's tile slot of stream s.
        let a_addr = |i: usize, s: usize| {
            if plan.in_core {
                at(i * t.pm * kk)
            } else {
                at(if resident_b { t.pk * t.pn } else { 0 } + s * per_stream_in)
            }
        };
        let b_addr = |j: usize, s: usize| {
            if plan.in_core {
                at(m * kk + j * t.pn * kk)
            } else if resident_b {
                at(0)
            } else {
                at(s * per_stream_in + t.pm * t.pk)
            }
        };
        let c_addr = |s: usize| outs + (s * t.pm * t.pn * elem) as u64;
        let primary = pool.streams[0].clone();
        let result = (|| -> Result<(), Error> {
            let mut tile = 0;
            let mut done_events: Vec<CudaEvent> = Vec::new();
            // In core: the event after each row panel of A was uploaded.
            let mut a_ready: Vec<Option<CudaEvent>> = (0..m.div_ceil(t.pm)).map(|_| None).collect();
            for (j, c0) in (0..n).step_by(t.pn).enumerate() {
                let cols = t.pn.min(n - c0);
                let b_ready = if resident_b && reads_ab {
                    if !plan.in_core {
                        // Every stream is done with the previous panel of B.
                        for e in done_events.drain(..) {
                            primary.wait(&e).during("cuStreamWaitEvent")?;
                        }
                    }
                    pool.upload(&b.block(elem, 0, c0, kk, cols), b_addr(j, 0), &primary)?;
                    Some(primary.record_event(None).during("cuEventRecord")?)
                } else {
                    None
                };
                for (i, r0) in (0..m).step_by(t.pm).enumerate() {
                    let rows = t.pm.min(m - r0);
                    let s = tile % streams;
                    tile += 1;
                    let stream = pool.streams[s].clone();
                    if let Some(e) = &b_ready {
                        stream.wait(e).during("cuStreamWaitEvent")?;
                    }
                    let c_slot = c_addr(s);
                    let c_block = c.block(elem, r0, c0, rows, cols);
                    let c_dims = MatrixDims::packed_in(rows, cols, c.dims.layout);
                    let chunks = if kk == 0 { 1 } else { kk.div_ceil(t.pk) };
                    for l in 0..chunks {
                        let (k0, depth) = (l * t.pk, t.pk.min(kk.saturating_sub(l * t.pk)));
                        let a_slot = a_addr(i, s);
                        if reads_ab {
                            if plan.in_core {
                                match &a_ready[i] {
                                    Some(e) => stream.wait(e).during("cuStreamWaitEvent")?,
                                    None => {
                                        pool.upload(&a.block(elem, r0, 0, rows, kk), a_slot, &stream)?;
                                        a_ready[i] = Some(stream.record_event(None).during("cuEventRecord")?);
                                    }
                                }
                            } else {
                                pool.upload(&a.block(elem, r0, k0, rows, depth), a_slot, &stream)?;
                            }
                            if !resident_b {
                                pool.upload(&b.block(elem, k0, c0, depth, cols), b_addr(j, s), &stream)?;
                            }
                        }
                        let first = l == 0;
                        if first && self.beta != 0.0 {
                            pool.upload(&c_block, c_slot, &stream)?;
                        }
                        let a_dims = MatrixDims::packed_in(rows, depth, a.dims.layout);
                        // A resident B panel is k x cols, packed: rows k0.. of it.
                        let (b_off, b_dims) = if resident_b {
                            MatrixDims::packed_in(kk, cols, b.dims.layout).sub(k0, 0, depth, cols)?
                        } else {
                            (0, MatrixDims::packed_in(depth, cols, b.dims.layout))
                        };
                        let b_at = b_addr(j, s) + (b_off * elem) as u64;
                        let pd = GemmDims::from_operands(a_dims, usize::MAX, b_dims, usize::MAX, c_dims, usize::MAX)?;
                        let step = if first { self.clone() } else { self.clone().beta(1.0) };
                        let step = if reads_ab { step } else { step.alpha(0.0) };
                        let len = |d: &MatrixDims| d.required_len().unwrap_or(0).max(1) * elem;
                        let (ai, bi, ci) = ((a_slot - ins) as usize, (b_at - ins) as usize, (c_slot - outs) as usize);
                        let inputs = pool.inputs.as_ref().expect("prepared");
                        let outputs = pool.outputs.as_mut().expect("prepared");
                        let mut c_bytes = outputs.slice_mut(ci..ci + len(&c_dims));
                        // SAFETY: reinterpreting workspace bytes as elements
                        // (plain data; offsets are whole elements, 8-byte aligned).
                        let (av, bv, mut cv) = unsafe {
                            (
                                inputs
                                    .slice(ai..ai + len(&a_dims))
                                    .transmute::<T>(len(&a_dims) / elem)
                                    .expect("in range"),
                                inputs
                                    .slice(bi..bi + len(&b_dims))
                                    .transmute::<T>(len(&b_dims) / elem)
                                    .expect("in range"),
                                c_bytes.transmute_mut::<T>(len(&c_dims) / elem).expect("in range"),
                            )
                        };
                        step.enqueue(device, &stream, &pd, (&av, &bv, &mut cv), 1, [0; 3])?;
                    }
                    pool.download(c_slot, &c_block, &stream)?;
                    if resident_b && reads_ab && !plan.in_core {
                        done_events.push(stream.record_event(None).during("cuEventRecord")?);
                    }
                }
            }
            Ok(())
        })();
        // Always wait for every copy before returning: they read and write
        // the caller's memory.
        let drained = pool.drain();
        result.and(drained)
    }
}

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
    /// A and B are held whole (each panel uploaded once, on first use);
    /// else out of core ([`Tiling`]'s per-stream slots).
    in_core: bool,
    /// Elements of the input workspace.
    input_elements: usize,
}

/// In core when A, B and a C tile per stream fit the budget: C in row
/// panels of A (two per stream), B whole; else [`choose_tiling`].
fn plan_tiles(m: usize, n: usize, k: usize, streams: usize, budget_elems: usize) -> TilePlan {
    let round = |x: usize, q: usize| x.div_ceil(q) * q;
    let pm = round(m.div_ceil(2 * streams), 128).clamp(1, m.max(1));
    // One column panel: B whole. (Four panels, so that the first tiles
    // start after a quarter of B, measured slower on an H200 on 2026-11-21:
    // 41 ms against 33 at 8192^3 from page-locked matrices, 7.7 against 6.0
    // at 4096^3; the uploads of A for the first column of tiles delay the
    // rest of B.)
    let pn = n.max(1);
    let in_core = Tiling { pm, pn, pk: k.max(1) };
    let held = m * k + k * n;
    if held + in_core.output_elements(streams) <= budget_elems {
        return TilePlan { tiling: in_core, in_core: true, input_elements: held.max(1) };
    }
    let tiling = choose_tiling(m, n, k, streams, budget_elems);
    TilePlan { tiling, in_core: false, input_elements: tiling.input_elements(k, streams).max(1) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_core::shape::Layout;

    #[test]
    fn tilings_fit_their_budget() {
        for (m, n, k) in [(4096, 4096, 4096), (100, 7, 100000), (1, 1, 1), (8192, 3, 5), (3000, 3000, 17)] {
            for budget in [16, 1 << 12, 1 << 20, 1 << 28] {
                let t = choose_tiling(m, n, k, 4, budget);
                assert!(t.pm >= 1 && t.pn >= 1 && t.pk >= 1);
                assert!(t.elements(k, 4) <= budget.max(12), "{m}x{n}x{k} in {budget}: {t:?}");
            }
        }
    }

    #[test]
    fn contiguous_lines_merge() {
        let mut out = Vec::new();
        let base = 0x1000 as *const u8;
        segments(base, &MatrixDims::packed_in(4, 5, Layout::RowMajor), 8, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len, 160);
        out.clear();
        segments(base, &MatrixDims::new(4, 5, Layout::RowMajor, 7), 8, &mut out);
        assert_eq!(out.len(), 4);
    }
}
