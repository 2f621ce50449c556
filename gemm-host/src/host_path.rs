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
//! except for page-locked operands with n >= 16384 ([`column_panel`]). Out of
//! core, k is cut into chunks too and every piece streams through per-stream
//! slots. Copy engines, SMs and the host all work at once: while the GPU
//! computes tile t, later panels upload and tile t - 1 downloads.
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
use crate::element::Scalar;
use crate::error::{DriverContext, Error};
use crate::gemm::Gemm;
use cudarc::driver::sys::CUresult;
use cudarc::driver::{result, sys, CudaEvent, CudaSlice, CudaStream, CudaView, CudaViewMut};
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
    /// Page-locked, allocated the first time the buffer is taken (null
    /// before): a small product pins one buffer each way, not the ring.
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
            if s.ptr.is_null() {
                continue;
            }
            // SAFETY: allocated by malloc_host in `HostPool::take`, not used after.
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
            let event = ctx.new_event(None).during("cuEventCreate")?;
            ring.push(Staging { ptr: core::ptr::null_mut(), event, owed: Vec::new() });
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
        if self.ring[i].ptr.is_null() {
            // Pinning memory takes time: a buffer is allocated when first
            // needed, so a small product pins two, not the ring's sixteen.
            // Not write-combined: downloads are read back by the CPU.
            // SAFETY: a plain allocation, freed in Drop.
            self.ring[i].ptr = unsafe { result::malloc_host(STAGING_BYTES, 0) }.during("cuMemHostAlloc")? as *mut u8;
        }
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

/// `cuMemcpy2DAsync` between host lines (`host`, `host_pitch`) and device
/// lines (`dev`, `dev_pitch`), `width` bytes by `height` lines; `up` copies
/// host to device. Asynchronous from page-locked host memory; from pageable
/// memory the driver stages it and returns once the source was read.
///
/// # Safety
/// Both ranges are valid for the copy until the stream is synchronized.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn copy_2d(
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
    /// Whether the driver knows the operand's storage (its first and last
    /// element) as page-locked.
    fn page_locked(&self, elem: usize) -> bool {
        let len = self.dims.required_len().unwrap_or(0) * elem;
        len > 0 && is_page_locked(self.base) && is_page_locked(self.base.wrapping_add(len - 1))
    }

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
/// (validated, user form): how the host path runs each tile, the same for
/// every element type (`enqueue` launches the type's kernels).
pub(crate) trait TileProduct<T, C> {
    fn enqueue(
        &self,
        g: &Gemm,
        stream: &Arc<CudaStream>,
        dims: &GemmDims,
        operands: (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, C>),
    ) -> Result<(), Error>;
}

impl<T, C, F> TileProduct<T, C> for F
where
    F: Fn(
        &Gemm,
        &Arc<CudaStream>,
        &GemmDims,
        (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, C>),
    ) -> Result<(), Error>,
{
    fn enqueue(
        &self,
        g: &Gemm,
        stream: &Arc<CudaStream>,
        dims: &GemmDims,
        operands: (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, C>),
    ) -> Result<(), Error> {
        self(g, stream, dims, operands)
    }
}

/// Enqueues on `stream` one product of packed workspace operands: A at byte
/// `a.0` of the input workspace with shape `a.1`, B likewise, C at byte
/// `c.0` of the output workspace.
fn enqueue_packed<T: Scalar, C: Scalar>(
    g: &Gemm,
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
    tile.enqueue(g, stream, &pd, (&av, &bv, &mut cv))
}

impl Gemm {
    /// The product of validated host operands (op applied, user form):
    /// `C <- alpha * A * B + beta * C` through the pipeline. Each tile runs
    /// with the options of `step` (the whole product's plan, so that a tile
    /// takes the kernel and split the product would on device matrices) by
    /// `tile`; `whole_k` keeps k whole (a 16-bit C).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn host_product<T: Scalar, C: Scalar>(
        &self,
        device: &Arc<Device>,
        dims: &GemmDims,
        (a, b, c): (HostOperand, HostOperand, HostOperand),
        step: Gemm,
        tile: &impl TileProduct<T, C>,
        whole_k: bool,
    ) -> Result<(), Error> {
        let e = Sizes { input: size_of::<T>(), output: size_of::<C>() };
        let (m, n, k) = (dims.m, dims.n, dims.k);
        let reads_ab = self.alpha != 0.0 && k > 0;
        let kk = if reads_ab { k } else { 0 };
        let streams = self.host_streams.unwrap_or_else(|| default_host_streams(m, n, k)).max(1);
        // The driver answers for the context current on this thread.
        device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let budget = match self.memory_budget {
            Some(b) => b,
            None => result::mem_get_info().map(|(free, _)| free / 10 * 9).unwrap_or(1 << 30),
        };
        let locked = reads_ab && a.page_locked(e.input) && b.page_locked(e.input);
        let plan = plan_tiles((m, n, kk), streams, budget, column_panel(n, locked), e, whole_k);
        let t = plan.tiling;
        let needed = plan.input_bytes + t.output_bytes(streams, e);
        if whole_k && needed > budget && self.memory_budget.is_some() {
            return Err(Error::MemoryBudget { budget, needed });
        }
        let mut guard = device.host_pool.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(HostPool::new(device)?);
        }
        let pool = guard.as_mut().expect("just made");
        // The compute streams, and one more for the in-core uploads.
        pool.prepare(device, plan.input_bytes, t.output_bytes(streams, e), streams + 1)?;
        let ins = crate::device_matrix::address(pool.inputs.as_ref().expect("prepared"));
        let outs = crate::device_matrix::address(pool.outputs.as_ref().expect("prepared"));
        let step = if reads_ab { step } else { step.alpha(0.0) };
        let (operands, workspace) = ((a, b, c), (ins, outs));
        let run = TileRun { device, step: &step, tile, m, n, kk, t, streams, e };
        let result = if plan.in_core {
            self.in_core(pool, &run, operands, workspace)
        } else {
            self.out_of_core(pool, &run, operands, workspace)
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
        &self,
        pool: &mut HostPool,
        run: &TileRun<'_, impl TileProduct<T, C>>,
        (a, b, c): (HostOperand, HostOperand, HostOperand),
        (ins, outs): (u64, u64),
    ) -> Result<(), Error> {
        let TileRun { step, tile, m, n, kk, t, streams, e, .. } = *run;
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
                    if first && self.beta != 0.0 {
                        pool.upload(&c_block, outs + t.c_slot(s, e) as u64, &stream)?;
                    }
                    let a_dims = MatrixDims::packed_in(rows, depth, a.dims.layout);
                    // A resident B panel is k x cols, packed: rows k0.. of it.
                    let (b_off, b_dims) = if resident_b {
                        MatrixDims::packed_in(kk, cols, b.dims.layout).sub(k0, 0, depth, cols)?
                    } else {
                        (0, MatrixDims::packed_in(depth, cols, b.dims.layout))
                    };
                    let g = if first { step.clone() } else { step.clone().beta(1.0) };
                    let (a_op, b_op) = ((a_at(s), a_dims), (b_at(s) + b_off * e.input, b_dims));
                    enqueue_packed(&g, tile, &stream, pool, a_op, b_op, (t.c_slot(s, e), c_dims))?;
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
        &self,
        pool: &mut HostPool,
        run: &TileRun<'_, impl TileProduct<T, C>>,
        (a, b, c): (HostOperand, HostOperand, HostOperand),
        (ins, outs): (u64, u64),
    ) -> Result<(), Error> {
        let TileRun { step, tile, m, n, kk, t, streams, e, .. } = *run;
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
            if self.beta != 0.0 {
                pool.upload(&c_block, outs + c_slot as u64, &stream)?;
            }
            let a_op = (a_at(i), MatrixDims::packed_in(rows, kk, a.dims.layout));
            let b_op = (b_at(j), MatrixDims::packed_in(kk, cols, b.dims.layout));
            let c_op = (c_slot, MatrixDims::packed_in(rows, cols, c.dims.layout));
            enqueue_packed(step, tile, &stream, pool, a_op, b_op, c_op)?;
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
}

/// One call's tiling and how its tiles run.
struct TileRun<'r, K> {
    #[allow(dead_code)]
    device: &'r Arc<Device>,
    step: &'r Gemm,
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
    use gemm_core::shape::Layout;

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
