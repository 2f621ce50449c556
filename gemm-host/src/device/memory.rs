//! Device memory, layer device: allocation of a generic [`Scalar`] on a
//! stream ([`alloc_uninit`], [`alloc_zeros`], and a call's scratch from the
//! library's own pool, [`alloc_scratch`]; out of memory becomes
//! [`Error::OutOfMemory`]), the copies through [`Scalar::Bits`]
//! ([`memcpy_htod`], [`memcpy_dtoh`], [`clone_htod`]), a buffer's
//! [`address`], and the split-K workspace bound ([`MAX_SPLIT_WORKSPACE`])
//! with the memory the scratch pool and the default pool keep for it
//! ([`POOL_KEEP_BYTES`]).
//! It imports only the base layer.

use crate::element::Scalar;
use crate::error::{DriverContext, Error};
use cudarc::driver::{result, CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr};
use std::sync::Arc;

/// Allocates `len` (at least one) elements on `stream`, uninitialized;
/// out-of-memory becomes [`Error::OutOfMemory`].
///
/// cudarc's `CudaStream::alloc` wants `T: DeviceRepr`, which cudarc gives
/// f16 and bf16 only under its `f16` feature (and that brings the `rand`
/// crates into every dependent's build): this allocates as it does, by
/// hand. Every device allocation of a generic [`Scalar`] goes through
/// here, and its copies through [`memcpy_htod`], [`memcpy_dtoh`] and
/// [`clone_htod`] ([`crate::Element`]s, f64 and f32, are `DeviceRepr`).
///
/// # Safety
/// The caller writes every element it later reads.
pub(crate) unsafe fn alloc_uninit<T: Scalar>(stream: &Arc<CudaStream>, len: usize) -> Result<CudaSlice<T>, Error> {
    // SAFETY: the caller's contract.
    unsafe { alloc_in(stream, len, None) }
}

/// [`alloc_uninit`] from `pool` (a pool of the stream's device), or from
/// the device's default pool.
///
/// # Safety
/// As [`alloc_uninit`].
unsafe fn alloc_in<T: Scalar>(
    stream: &Arc<CudaStream>,
    len: usize,
    pool: Option<usize>,
) -> Result<CudaSlice<T>, Error> {
    let len = len.max(1); // the driver cannot allocate zero bytes
    let bytes = len * size_of::<T>();
    let ctx = stream.context();
    let call = if pool.is_some() { "cuMemAllocFromPoolAsync" } else { "cuMemAllocAsync" };
    ctx.bind_to_thread().map_err(|e| oom_or(e, bytes, call))?;
    // SAFETY: `bytes` fresh bytes on `stream`'s context, stream-ordered
    // where the context has memory pools, exactly as `CudaStream::alloc`
    // allocates (or from `pool`, a pool of this device, the same way), so
    // the `CudaSlice`'s drop frees them as it frees cudarc's own
    // (`cuMemFreeAsync` on the stream, which frees from any pool, else
    // `cuMemFree`).
    let ptr = unsafe {
        match pool {
            Some(pool) if ctx.has_async_alloc() => {
                let mut ptr: cudarc::driver::sys::CUdeviceptr = 0;
                cudarc::driver::sys::cuMemAllocFromPoolAsync(&mut ptr, bytes, pool as _, stream.cu_stream())
                    .result()
                    .map(|()| ptr)
            }
            _ if ctx.has_async_alloc() => result::malloc_async(stream.cu_stream(), bytes),
            _ => result::malloc_sync(bytes),
        }
    }
    .map_err(|e| oom_or(e, bytes, call))?;
    // SAFETY: `ptr` is that allocation, room for `len` elements of `T`
    // (device allocations are aligned to at least 256 bytes), owned by the
    // slice from here on; the caller initializes what it reads.
    Ok(unsafe { stream.upgrade_device_ptr::<T>(ptr, len) })
}

/// [`alloc_uninit`] for a call's own scratch (split-K's workspace, the
/// operands' copies), freed at the end of the call: from the library's
/// memory pool on the stream's device ([`scratch_pool`]), not the device's
/// default pool, where it falls back to the latter.
///
/// The default pool releases its free memory at each synchronization once
/// it holds more than its release threshold, live allocations included: a
/// process holding 1 GiB there (a model's weights, a benchmark's operands)
/// had every split product map its workspace anew after each sync, which
/// doubled the time of short products.
///
/// # Safety
/// As [`alloc_uninit`].
pub(crate) unsafe fn alloc_scratch<T: Scalar>(stream: &Arc<CudaStream>, len: usize) -> Result<CudaSlice<T>, Error> {
    let ctx = stream.context();
    let pool = if ctx.has_async_alloc() { scratch_pool(ctx) } else { None };
    // SAFETY: the caller's contract.
    unsafe { alloc_in(stream, len, pool) }
}

/// The library's memory pool on `ctx`'s device, made on first use, with a
/// release threshold of [`POOL_KEEP_BYTES`] of its own (the scratch of the
/// largest split workspace); None where the driver cannot make one.
fn scratch_pool(ctx: &Arc<CudaContext>) -> Option<usize> {
    use cudarc::driver::sys;
    use std::sync::Mutex;
    /// (device, pool handle) of the pools made so far.
    static POOLS: Mutex<Vec<(sys::CUdevice, usize)>> = Mutex::new(Vec::new());
    let device = ctx.cu_device();
    let mut pools = POOLS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&(_, pool)) = pools.iter().find(|(d, _)| *d == device) {
        return Some(pool);
    }
    // SAFETY: zeroed props are valid (no handle types, no Windows security
    // attributes, no maximum size), then pinned device memory of this
    // device; the threshold attribute is a u64 (CUDA driver API,
    // cuMemPoolCreate, cuMemPoolSetAttribute). The pool lives as long as
    // the process.
    let pool = unsafe {
        let mut props: sys::CUmemPoolProps = core::mem::zeroed();
        props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = device;
        let mut pool: sys::CUmemoryPool = core::ptr::null_mut();
        ctx.bind_to_thread().ok()?;
        sys::cuMemPoolCreate(&mut pool, &props).result().ok()?;
        let mut keep = POOL_KEEP_BYTES;
        let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
        sys::cuMemPoolSetAttribute(pool, attr, &mut keep as *mut u64 as *mut _).result().ok()?;
        pool as usize
    };
    pools.push((device, pool));
    Some(pool)
}

/// `len` (at least one) zeroed elements on `stream`.
pub(crate) fn alloc_zeros<T: Scalar>(stream: &Arc<CudaStream>, len: usize) -> Result<CudaSlice<T>, Error> {
    // SAFETY: every byte is zeroed below, and zero bits are a valid `T`
    // (they are a valid `T::Bits`, `ValidAsZeroBits`, the same bits).
    let mut data = unsafe { alloc_uninit::<T>(stream, len) }?;
    stream.memset_zeros(&mut bits_mut(&mut data.as_view_mut())).during("cuMemsetD8Async")?;
    Ok(data)
}

/// `s` seen as its elements' [`Scalar::Bits`] (same memory), for cudarc's copies.
fn host_bits<T: Scalar>(s: &[T]) -> &[T::Bits] {
    const { assert!(size_of::<T>() == size_of::<T::Bits>() && align_of::<T>() == align_of::<T::Bits>()) };
    // SAFETY: same size and alignment (checked above); `T::Bits` is `T`
    // itself or, for f16 and bf16 (`repr(transparent)` over `u16`), `u16`:
    // plain bits, no padding, every bit pattern valid in both. The result
    // borrows `s`.
    unsafe { core::slice::from_raw_parts(s.as_ptr().cast::<T::Bits>(), s.len()) }
}

/// `s` seen mutably as its elements' [`Scalar::Bits`] (same memory).
fn host_bits_mut<T: Scalar>(s: &mut [T]) -> &mut [T::Bits] {
    const { assert!(size_of::<T>() == size_of::<T::Bits>() && align_of::<T>() == align_of::<T::Bits>()) };
    // SAFETY: as in `host_bits` (any `T::Bits` written is a valid `T`);
    // the result borrows `s` exclusively.
    unsafe { core::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<T::Bits>(), s.len()) }
}

/// A device view seen as its elements' [`Scalar::Bits`] (same memory, same
/// cudarc events, so the copies are ordered as the view's own would be).
fn bits<'a, T: Scalar>(v: &CudaView<'a, T>) -> CudaView<'a, T::Bits> {
    // SAFETY: same size per element (`host_bits`), so the `len` elements
    // fit; any bits are a valid `T::Bits`.
    unsafe { v.transmute::<T::Bits>(v.len()) }.expect("T::Bits has the size of T")
}

/// A mutable device view seen as its elements' [`Scalar::Bits`].
fn bits_mut<'b, T: Scalar>(v: &'b mut CudaViewMut<'_, T>) -> CudaViewMut<'b, T::Bits> {
    let len = v.len();
    // SAFETY: as in `bits`; any `T::Bits` written is a valid `T`.
    unsafe { v.transmute_mut::<T::Bits>(len) }.expect("T::Bits has the size of T")
}

/// Copies `src` into the start of `dst` (cudarc's `memcpy_htod`;
/// asynchronous only for page-locked `src`).
pub(crate) fn memcpy_htod<T: Scalar>(
    stream: &Arc<CudaStream>,
    src: &[T],
    dst: &mut CudaViewMut<'_, T>,
) -> Result<(), Error> {
    stream.memcpy_htod(host_bits(src), &mut bits_mut(dst)).during("cuMemcpyHtoDAsync")
}

/// Copies `src` into the start of `dst` (cudarc's `memcpy_dtoh`): enqueued
/// on `stream`; `dst` holds the data once the stream is synchronized.
pub(crate) fn memcpy_dtoh<T: Scalar>(
    stream: &Arc<CudaStream>,
    src: &CudaView<'_, T>,
    dst: &mut [T],
) -> Result<(), Error> {
    stream.memcpy_dtoh(&bits(src), host_bits_mut(dst)).during("cuMemcpyDtoH")
}

/// `src` in a new device buffer (at least one element) on `stream`
/// (cudarc's `clone_htod`).
pub(crate) fn clone_htod<T: Scalar>(stream: &Arc<CudaStream>, src: &[T]) -> Result<CudaSlice<T>, Error> {
    // SAFETY: the copy writes every element a reader of `src.len()` elements reads.
    let mut d = unsafe { alloc_uninit::<T>(stream, src.len()) }?;
    if !src.is_empty() {
        memcpy_htod(stream, src, &mut d.as_view_mut())?;
    }
    Ok(d)
}

fn oom_or(e: cudarc::driver::DriverError, bytes: usize, call: &'static str) -> Error {
    if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        Error::OutOfMemory { bytes }
    } else {
        Error::Driver { call, source: e }
    }
}

/// The device address of a buffer or view (for the overlap check; the
/// stream is its own, so reading it waits for nothing).
pub(crate) fn address<T>(s: &impl DevicePtr<T>) -> u64 {
    let (ptr, _sync) = s.device_ptr(s.stream());
    ptr
}

/// The largest split-K workspace, in elements of C (256 MiB of f64).
pub const MAX_SPLIT_WORKSPACE: u64 = 1 << 25;

/// The release threshold of the library's scratch pool ([`alloc_scratch`]):
/// the bytes it holds, live or free, before it returns free memory to the
/// driver at a synchronization. The largest split-K workspace
/// ([`crate::tuning::MAX_SPLIT_WORKSPACE`] elements of f64), allocated and
/// freed on the stream by every split product. The device's default pool
/// gets at least this threshold too (the operands' other transient
/// copies).
pub const POOL_KEEP_BYTES: u64 = MAX_SPLIT_WORKSPACE * 8;

/// Raises the default memory pool's release threshold to at least
/// [`POOL_KEEP_BYTES`] (a threshold the process set higher is kept).
pub(crate) fn keep_pool_memory(ctx: &Arc<CudaContext>) -> Result<(), Error> {
    use cudarc::driver::sys;
    ctx.bind_to_thread().during("cuCtxSetCurrent")?;
    let mut pool: sys::CUmemoryPool = core::ptr::null_mut();
    let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
    let mut current: u64 = 0;
    // SAFETY: a valid device of a live context; the attribute is a u64 (CUDA
    // driver API, cuMemPoolGetAttribute / cuMemPoolSetAttribute).
    unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()).result().during("cuDeviceGetDefaultMemPool")?;
        sys::cuMemPoolGetAttribute(pool, attr, &mut current as *mut u64 as *mut _)
            .result()
            .during("cuMemPoolGetAttribute")?;
        if current < POOL_KEEP_BYTES {
            let mut keep = POOL_KEEP_BYTES;
            sys::cuMemPoolSetAttribute(pool, attr, &mut keep as *mut u64 as *mut _)
                .result()
                .during("cuMemPoolSetAttribute")?;
        }
    }
    Ok(())
}

/// A 2D copy of `height` lines of `width` bytes between device buffers
/// with pitches in bytes, on `stream`.
pub(crate) fn copy_2d_device(
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
