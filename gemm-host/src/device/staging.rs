//! The host path's pinned pool, layer device: the ring of page-locked
//! staging buffers, the device workspace and the streams of one [`Device`]
//! ([`HostPool`], held in `Device::host_pool`), and the copies of host byte
//! ranges ([`Segment`]) to and from device addresses through it
//! ([`HostPool::upload`], [`HostPool::download`], [`HostPool::drain`],
//! [`copy_2d`]). It knows nothing of tiles (`host_path.rs` plans those)
//! and imports only the base layer.
//!
//! [`Device`]: crate::Device

use crate::element::Scalar;
use crate::error::{DriverContext, Error};
use cudarc::driver::sys::CUresult;
use cudarc::driver::{result, sys, CudaContext, CudaEvent, CudaSlice, CudaStream};
use gemm_core::shape::MatrixDims;
use rayon::prelude::*;
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
pub(crate) struct Segment {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: segments name disjoint ranges of the caller's matrices or of
// staging buffers, copied by one thread each (rayon), during one call.
unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

/// The host bytes of a block of a strided matrix, line by line (rows of a
/// row-major matrix, columns of a column-major one), merged where contiguous.
pub(crate) fn segments(base: *const u8, dims: &MatrixDims, elem: usize, out: &mut Vec<Segment>) {
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
    pub(crate) inputs: Option<CudaSlice<u8>>,
    /// ... and for the tiles of C.
    pub(crate) outputs: Option<CudaSlice<u8>>,
    pub(crate) streams: Vec<Arc<CudaStream>>,
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

/// Whether the lines `segs` (of one block of one host matrix, in address
/// order) are page-locked, by their first and last bytes: two driver calls
/// per copy, not two per line (a 2048 x 2048 tile of a wide matrix has 2048
/// lines). A block lies in one allocation of the caller's; were its middle
/// pageable after all, the driver still copies it correctly (staged, and
/// not asynchronously).
fn ends_page_locked(segs: &[Segment]) -> bool {
    match (segs.first(), segs.last()) {
        (Some(first), Some(last)) if last.len > 0 => {
            is_page_locked(first.ptr) && is_page_locked(last.ptr.wrapping_add(last.len - 1))
        }
        _ => false,
    }
}

/// Whether the driver knows `p` as page-locked host memory (allocated or
/// registered through CUDA). `cuPointerGetAttributes`, not the singular
/// call: it answers "unknown" for ordinary memory instead of failing (a
/// failing API call counts as an error under compute-sanitizer).
pub(crate) fn is_page_locked(p: *const u8) -> bool {
    let mut ty: u32 = 0;
    let mut attribute = sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    let mut data = [&mut ty as *mut u32 as *mut core::ffi::c_void];
    // SAFETY: one attribute into a local; any pointer value is allowed.
    let r = unsafe { sys::cuPointerGetAttributes(1, &mut attribute, data.as_mut_ptr(), p as sys::CUdeviceptr) };
    r == CUresult::CUDA_SUCCESS && ty == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
}

impl HostPool {
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Self, Error> {
        ctx.bind_to_thread().during("cuCtxSetCurrent")?;
        let mut ring = Vec::with_capacity(STAGING_BUFFERS);
        for _ in 0..2 * STAGING_BUFFERS {
            let event = ctx.new_event(None).during("cuEventCreate")?;
            ring.push(Staging { ptr: core::ptr::null_mut(), event, owed: Vec::new() });
        }
        Ok(HostPool { ring, next: [0, 0], inputs: None, outputs: None, streams: Vec::new() })
    }

    /// At least `inputs` and `outputs` bytes of device workspace (grown,
    /// never shrunk) on `stream`, and `count` streams of `ctx`.
    pub(crate) fn prepare(
        &mut self,
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        inputs: usize,
        outputs: usize,
        count: usize,
    ) -> Result<(), Error> {
        for (w, bytes) in [(&mut self.inputs, inputs), (&mut self.outputs, outputs)] {
            if w.as_ref().is_none_or(|w| w.len() < bytes) {
                *w = None; // free the old one first
                           // SAFETY: written before read (uploads or the kernel's output).
                           // SAFETY: written before read (uploads or the kernel's output).
                let buf = unsafe { stream.alloc::<u8>(bytes.max(1)) }
                    .map_err(|_| Error::OutOfMemory { bytes: bytes.max(1) })?;
                *w = Some(buf);
            }
        }
        stream.synchronize().during("cuStreamSynchronize")?;
        while self.streams.len() < count {
            self.streams.push(ctx.new_stream().during("cuStreamCreate")?);
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
    pub(crate) fn drain(&mut self) -> Result<(), Error> {
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
    pub(crate) fn upload(&mut self, segs: &[Segment], dst: u64, stream: &CudaStream) -> Result<(), Error> {
        let mut at = dst;
        if ends_page_locked(segs) {
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
    pub(crate) fn download(&mut self, src: u64, segs: &[Segment], stream: &CudaStream) -> Result<(), Error> {
        let mut at = src;
        if ends_page_locked(segs) {
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

/// Copies the elements of `count` matrices of shape `dims`, `stride`
/// elements apart, between the caller's host storage `host` (from the first
/// matrix's element (0, 0)) and device memory at `dev` laid out alike, line
/// by line (`cuMemcpy2DAsync`): the padding between lines and the gaps
/// between matrices are neither read nor written. `up`: host to device.
///
/// # Safety
/// Both ranges hold the `count` matrices and stay valid (the host range
/// exclusively borrowed for a download) until `stream` is synchronized.
pub(crate) unsafe fn copy_elements<C: Scalar>(
    stream: &Arc<CudaStream>,
    dims: MatrixDims,
    (count, stride): (usize, usize),
    host: *mut C,
    dev: u64,
    up: bool,
) -> Result<(), Error> {
    let (lines, line) = dims.lines();
    if lines == 0 || line == 0 || count == 0 {
        return Ok(());
    }
    let size = size_of::<C>();
    let pitch = dims.ld * size;
    // Matrices that follow each other line for line are one copy.
    let (copies, height) = if count > 1 && stride == lines * dims.ld { (1, lines * count) } else { (count, lines) };
    for i in 0..copies {
        let (h, d) = (host.add(i * stride) as *mut u8, dev + (i * stride * size) as u64);
        // SAFETY: forwarded from the caller.
        unsafe { copy_2d(h, pitch, d, pitch, line * size, height, up, stream) }?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_core::shape::Layout;

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
