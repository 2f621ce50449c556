//! NCCL, layer device: the library loaded at run time (cudarc's
//! `dynamic-loading`, which looks for `libnccl.so`), its unique ids
//! ([`NcclId`]), the communicators of a process grid ([`CommGroup`]: a
//! row and a column communicator per rank, made with `ncclCommInitAll` in
//! one process or `ncclCommInitRank` and `ncclCommSplit` with one process
//! per GPU), broadcasts of raw bytes (`ncclUint8`, so no NCCL type is
//! needed for f16 or bf16), and the watchdog that waits for a call's work
//! on every local rank, polling the streams' events and
//! `ncclCommGetAsyncError` until the grid's timeout, and aborts the
//! communicators (`ncclCommAbort`) on an error or a timeout.
//!
//! The raw API (`cudarc::nccl::sys`) with the library's own handles, not
//! cudarc's `Comm` (whose handle is private and whose drop panics on an
//! error), so that a communicator can be aborted.

use crate::device::Device;
use crate::error::Error;
use cudarc::driver::{CudaEvent, CudaStream};
use cudarc::nccl::sys;
use gemm_core::distribution::Grid;
use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The NCCL symbols the library calls; each is looked up before the first
/// call, so an old or partial `libnccl.so` is a typed error, not cudarc's
/// panic on a missing symbol.
const SYMBOLS: [&str; 11] = [
    "ncclGetUniqueId",
    "ncclCommInitAll",
    "ncclCommInitRank",
    "ncclCommSplit",
    "ncclCommDestroy",
    "ncclCommAbort",
    "ncclCommGetAsyncError",
    "ncclBroadcast",
    "ncclGroupStart",
    "ncclGroupEnd",
    "ncclGetErrorString",
];

/// The default watchdog timeout of a grid's calls.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Loads NCCL (once) and checks that every symbol the library calls is
/// there. cudarc panics on a missing library or symbol: asked first here.
pub(crate) fn load() -> Result<(), Error> {
    static LOADED: Mutex<Option<Result<(), String>>> = Mutex::new(None);
    let mut slot = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    if slot.is_none() {
        *slot = Some(check_library());
    }
    match slot.as_ref().expect("just set") {
        Ok(()) => Ok(()),
        Err(why) => Err(Error::DeviceGroup { why: why.clone() }),
    }
}

fn check_library() -> Result<(), String> {
    // SAFETY: only tries to dlopen the library.
    if !unsafe { sys::is_culib_present() } {
        return Err("NCCL could not be loaded: a grid of more than one GPU needs libnccl.so (cudarc looks for \
                    `libnccl.so`, not `libnccl.so.2`: add a `libnccl.so` symlink next to it or put its folder \
                    on LD_LIBRARY_PATH)"
            .into());
    }
    // SAFETY: present (checked above), so `culib` does not panic.
    let lib = unsafe { sys::culib() };
    for name in SYMBOLS {
        // SAFETY: looks the symbol up; it is not called here.
        if unsafe { lib.get::<*const c_void>(name.as_bytes()) }.is_err() {
            return Err(format!("the NCCL library found has no `{name}` (NCCL 2.18 or newer is needed)"));
        }
    }
    Ok(())
}

/// An NCCL unique id: made by one process ([`crate::ProcessGrid::unique_id`])
/// and sent to the others (as its 128 bytes, [`NcclId::to_bytes`]), which
/// all pass it to [`crate::ProcessGrid::from_rank`].
///
/// ```no_run
/// let id = gemm::ProcessGrid::unique_id()?;
/// let bytes: [u8; 128] = id.to_bytes(); // send to the other processes
/// let same = gemm::NcclId::from_bytes(&bytes);
/// assert_eq!(same.to_bytes(), bytes);
/// # Ok::<(), gemm::Error>(())
/// ```
#[derive(Clone)]
pub struct NcclId(sys::ncclUniqueId);

impl core::fmt::Debug for NcclId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("NcclId(..)")
    }
}

impl NcclId {
    /// A fresh id from NCCL (`ncclGetUniqueId`).
    pub(crate) fn new() -> Result<Self, Error> {
        load()?;
        let mut id = sys::ncclUniqueId { internal: [0; 128] };
        // SAFETY: NCCL writes the id into `id` (present: `load`).
        let r = unsafe { sys::ncclGetUniqueId(&mut id) };
        check(r, None).map_err(|why| Error::Collective { rank: 0, call: "ncclGetUniqueId", why })?;
        Ok(NcclId(id))
    }

    /// The id's 128 bytes, to send to the other processes.
    pub fn to_bytes(&self) -> [u8; 128] {
        self.0.internal.map(|c| c as u8)
    }

    /// The id from its 128 bytes ([`NcclId::to_bytes`]).
    pub fn from_bytes(bytes: &[u8; 128]) -> Self {
        NcclId(sys::ncclUniqueId { internal: bytes.map(|b| b as core::ffi::c_char) })
    }
}

/// NCCL's message for `r` (and the communicator's last error), or Ok.
fn check(r: sys::ncclResult_t, comm: Option<sys::ncclComm_t>) -> Result<(), String> {
    if r == sys::ncclResult_t::ncclSuccess {
        return Ok(());
    }
    Err(message(r as u32, comm))
}

/// NCCL's text for result code `code`, with the communicator's last error.
fn message(code: u32, comm: Option<sys::ncclComm_t>) -> String {
    // Only codes the bindings know are turned back into the enum.
    let text = if code < sys::ncclResult_t::ncclNumResults as u32 {
        // SAFETY: `code` is a valid discriminant (below ncclNumResults,
        // the enum is dense from 0); NCCL returns a static string.
        unsafe {
            let r: sys::ncclResult_t = core::mem::transmute::<u32, sys::ncclResult_t>(code);
            CStr::from_ptr(sys::ncclGetErrorString(r)).to_string_lossy().into_owned()
        }
    } else {
        format!("NCCL error {code}")
    };
    let last = comm.and_then(|c| {
        // SAFETY: a live communicator (or null, which NCCL accepts); the
        // string is NCCL's, copied at once. The symbol is optional.
        let lib = unsafe { sys::culib() };
        unsafe { lib.get::<*const c_void>(b"ncclGetLastError") }.ok()?;
        let s = unsafe { CStr::from_ptr(sys::ncclGetLastError(c)) }.to_string_lossy().into_owned();
        (!s.is_empty()).then_some(s)
    });
    match last {
        Some(last) => format!("{text} ({last})"),
        None => text,
    }
}

/// One NCCL communicator handle.
pub(crate) struct Comm {
    raw: sys::ncclComm_t,
}

/// A rank this process drives: its GPU, its streams (products on
/// `compute`, panel copies and broadcasts on `comm`), and its row and
/// column communicators (None where the grid has one column, or one row:
/// the panel is then local).
pub(crate) struct RankState {
    /// The rank in the grid (row-major).
    pub(crate) rank: usize,
    pub(crate) device: Arc<Device>,
    pub(crate) compute: Arc<CudaStream>,
    pub(crate) comm: Arc<CudaStream>,
    /// The communicator of the rank's grid row (its rank there: the grid column).
    pub(crate) row: Option<Comm>,
    /// The communicator of the rank's grid column (its rank there: the grid row).
    pub(crate) col: Option<Comm>,
    /// The communicator of the whole grid (its rank there: the grid rank;
    /// None on a 1 x 1 grid): the transpose's point-to-point messages.
    pub(crate) world: Option<Comm>,
}

impl RankState {
    fn comms(&self) -> impl Iterator<Item = &Comm> {
        [self.row.as_ref(), self.col.as_ref(), self.world.as_ref()].into_iter().flatten()
    }
}

/// The communicators of a process grid and the ranks this process drives,
/// with the grid's state: its watchdog timeout, whether it failed (its
/// communicators aborted), and a fault injected for the tests.
pub(crate) struct CommGroup {
    pub(crate) grid: Grid,
    pub(crate) ranks: Vec<RankState>,
    timeout_ms: AtomicU64,
    failed: Mutex<Option<String>>,
    fault: Mutex<Option<usize>>,
    /// Held for the whole of a call: one call at a time on a grid.
    pub(crate) busy: Mutex<()>,
}

// SAFETY: the raw communicator handles are used only under `busy` (one
// call at a time) or in `abort`/`drop`, which NCCL allows from any thread;
// the rest is Send + Sync.
unsafe impl Send for CommGroup {}
// SAFETY: as above.
unsafe impl Sync for CommGroup {}

/// `ncclGroupStart`: the NCCL calls up to [`group_end`] are launched
/// together (one thread driving several ranks).
fn group_start() -> Result<(), String> {
    // SAFETY: NCCL is loaded (a grid with communicators exists).
    check(unsafe { sys::ncclGroupStart() }, None)
}

/// `ncclGroupEnd`: launches the calls since [`group_start`].
fn group_end() -> Result<(), String> {
    // SAFETY: closes a group [`group_start`] opened.
    check(unsafe { sys::ncclGroupEnd() }, None)
}

/// Runs `f` between [`group_start`] and [`group_end`] (an error of `f`
/// still ends the group).
pub(crate) fn grouped(f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    group_start()?;
    let inner = f();
    let end = group_end();
    inner.and(end)
}

impl CommGroup {
    fn new(grid: Grid, ranks: Vec<RankState>) -> Self {
        CommGroup {
            grid,
            ranks,
            timeout_ms: AtomicU64::new(DEFAULT_TIMEOUT.as_millis() as u64),
            failed: Mutex::new(None),
            fault: Mutex::new(None),
            busy: Mutex::new(()),
        }
    }

    fn rank_state(rank: usize, device: &Arc<Device>) -> Result<RankState, Error> {
        use crate::error::DriverContext;
        let ctx = device.context();
        Ok(RankState {
            rank,
            device: device.clone(),
            compute: ctx.new_stream().during("cuStreamCreate")?,
            comm: ctx.new_stream().during("cuStreamCreate")?,
            row: None,
            col: None,
            world: None,
        })
    }

    /// Every rank of `grid` in this process, rank r on `devices[r]`: one
    /// `ncclCommInitAll` over the grid and one per grid row and per grid
    /// column of more than one GPU (none for a 1 x 1 grid, which needs no
    /// NCCL).
    pub(crate) fn from_devices(devices: &[Arc<Device>], grid: Grid) -> Result<Self, Error> {
        let mut ranks = Vec::with_capacity(devices.len());
        for (r, d) in devices.iter().enumerate() {
            ranks.push(Self::rank_state(r, d)?);
        }
        let group = CommGroup::new(grid, ranks);
        if grid.size() == 1 {
            return Ok(group);
        }
        load()?;
        let mut group = group;
        let init_all = |members: &[usize]| -> Result<Vec<Comm>, Error> {
            let list: Vec<c_int> = members.iter().map(|&r| devices[r].context().ordinal() as c_int).collect();
            let mut raw = vec![core::ptr::null_mut(); members.len()];
            // SAFETY: `raw` has room for one handle per device listed.
            let r = unsafe { sys::ncclCommInitAll(raw.as_mut_ptr(), list.len() as c_int, list.as_ptr()) };
            check(r, None).map_err(|why| Error::Collective { rank: members[0], call: "ncclCommInitAll", why })?;
            Ok(raw.into_iter().map(|raw| Comm { raw }).collect())
        };
        let everyone: Vec<usize> = (0..grid.size()).collect();
        for (comm, &r) in init_all(&everyone)?.into_iter().zip(&everyone) {
            group.ranks[r].world = Some(comm);
        }
        if grid.cols > 1 {
            for row in 0..grid.rows {
                let members: Vec<usize> = (0..grid.cols).map(|c| grid.rank(row, c)).collect();
                for (comm, &r) in init_all(&members)?.into_iter().zip(&members) {
                    group.ranks[r].row = Some(comm);
                }
            }
        }
        if grid.rows > 1 {
            for col in 0..grid.cols {
                let members: Vec<usize> = (0..grid.rows).map(|r| grid.rank(r, col)).collect();
                for (comm, &r) in init_all(&members)?.into_iter().zip(&members) {
                    group.ranks[r].col = Some(comm);
                }
            }
        }
        group.warm_up()?;
        Ok(group)
    }

    /// Rank `rank` of `grid` in this process (one process, or thread, per
    /// GPU): `ncclCommInitRank` over the grid with `id`, then
    /// `ncclCommSplit` into the rank's row and column communicators.
    /// Blocks until every rank has called it.
    pub(crate) fn from_rank(device: &Arc<Device>, rank: usize, grid: Grid, id: &NcclId) -> Result<Self, Error> {
        let mut state = Self::rank_state(rank, device)?;
        if grid.size() == 1 {
            return Ok(CommGroup::new(grid, vec![state]));
        }
        load()?;
        let fail = |call: &'static str| move |why: String| Error::Collective { rank, call, why };
        use crate::error::DriverContext;
        device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let mut world: sys::ncclComm_t = core::ptr::null_mut();
        // SAFETY: NCCL writes the handle; `id` is a unique id's bytes.
        let r = unsafe { sys::ncclCommInitRank(&mut world, grid.size() as c_int, id.0, rank as c_int) };
        check(r, None).map_err(fail("ncclCommInitRank"))?;
        state.world = Some(Comm { raw: world });
        let group_of_one = CommGroup::new(grid, vec![state]);
        let mut group = group_of_one;
        let (row, col) = grid.coords(rank);
        let split = |color: usize, key: usize| -> Result<Comm, Error> {
            let mut raw: sys::ncclComm_t = core::ptr::null_mut();
            // SAFETY: a live world communicator; NCCL writes the new
            // handle; a null config inherits the parent's.
            let r = unsafe { sys::ncclCommSplit(world, color as c_int, key as c_int, &mut raw, core::ptr::null_mut()) };
            check(r, Some(world)).map_err(fail("ncclCommSplit"))?;
            Ok(Comm { raw })
        };
        // Every rank makes the same splits (the grid is known to all).
        if grid.cols > 1 {
            group.ranks[0].row = Some(split(row, col)?);
        }
        if grid.rows > 1 {
            group.ranks[0].col = Some(split(col, row)?);
        }
        group.warm_up()?;
        Ok(group)
    }

    /// One small broadcast on every communicator, waited for: NCCL
    /// connects its peers on a communicator's first collective (which may
    /// block the host); done here, a later call's collectives only
    /// enqueue work, so a rank that fails then cannot hold the others'
    /// host threads.
    fn warm_up(&self) -> Result<(), Error> {
        let mut buffers = Vec::new();
        for s in &self.ranks {
            // SAFETY: the broadcast writes every byte read (none are).
            buffers.push(unsafe { crate::device::memory::alloc_uninit::<f64>(&s.comm, 1) }?);
        }
        let result = grouped(|| {
            for (s, buf) in self.ranks.iter().zip(&buffers) {
                let ptr = crate::device::memory::address(buf);
                for comm in [s.row.as_ref(), s.col.as_ref()].into_iter().flatten() {
                    // SAFETY: 8 bytes of a live buffer on the comm's device, in place.
                    unsafe { broadcast(comm, ptr, ptr, 8, 0, &s.comm) }?;
                }
            }
            Ok(())
        });
        if let Err(why) = result {
            self.abort(&why);
            return Err(Error::Collective { rank: self.ranks[0].rank, call: "ncclBroadcast (warm-up)", why });
        }
        let waited = self.wait("ncclBroadcast (warm-up)");
        drop(buffers);
        waited
    }

    /// The watchdog timeout.
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    /// Sets the watchdog timeout.
    pub(crate) fn set_timeout(&self, t: Duration) {
        self.timeout_ms.store(t.as_millis().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    /// Why the grid cannot be used (its communicators were aborted), if so.
    pub(crate) fn failed(&self) -> Option<String> {
        self.failed.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Makes `rank` skip its broadcasts in the next call (tests).
    pub(crate) fn set_fault(&self, rank: usize) {
        *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = Some(rank);
    }

    /// The fault injected for this call, taken.
    pub(crate) fn take_fault(&self) -> Option<usize> {
        self.fault.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Aborts every communicator of the ranks this process drives
    /// (`ncclCommAbort`: their pending collectives end) and marks the grid
    /// unusable with `why`. Idempotent.
    pub(crate) fn abort(&self, why: &str) {
        let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        if failed.is_some() {
            return;
        }
        *failed = Some(why.to_string());
        for s in &self.ranks {
            let _ = s.device.context().bind_to_thread();
            for comm in s.comms() {
                // SAFETY: a live communicator, aborted once (the `failed`
                // flag guards this and `drop`).
                let _ = unsafe { sys::ncclCommAbort(comm.raw) };
            }
        }
    }

    /// Waits for the work enqueued so far on every local rank's streams,
    /// polling each stream's event and each communicator's asynchronous
    /// error until the timeout. On a device error, an NCCL error or the
    /// timeout, aborts the communicators and returns
    /// [`Error::Collective`] naming the rank and `call`.
    pub(crate) fn wait(&self, call: &'static str) -> Result<(), Error> {
        use crate::error::DriverContext;
        let mut events: Vec<(usize, CudaEvent)> = Vec::new();
        for s in &self.ranks {
            for stream in [&s.compute, &s.comm] {
                events.push((s.rank, stream.record_event(None).during("cuEventRecord")?));
            }
        }
        let start = Instant::now();
        let timeout = self.timeout();
        let mut pause = Duration::from_micros(20);
        loop {
            let mut pending = None;
            for (rank, ev) in &events {
                // SAFETY: a live event of this call.
                match unsafe { cudarc::driver::result::event::query(ev.cu_event()) } {
                    Ok(()) => {}
                    Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_READY => {
                        pending.get_or_insert(*rank);
                    }
                    Err(e) => return Err(self.fail(*rank, call, format!("a device error: {e}"))),
                }
            }
            for s in &self.ranks {
                for comm in s.comms() {
                    let mut code: u32 = 0;
                    // SAFETY: a live communicator; NCCL writes a result
                    // code, read as a plain u32.
                    let r = unsafe {
                        sys::ncclCommGetAsyncError(comm.raw, (&mut code as *mut u32).cast::<sys::ncclResult_t>())
                    };
                    let in_progress = sys::ncclResult_t::ncclInProgress as u32;
                    if let Err(why) = check(r, Some(comm.raw)) {
                        return Err(self.fail(s.rank, call, why));
                    }
                    if code != 0 && code != in_progress {
                        return Err(self.fail(s.rank, call, message(code, Some(comm.raw))));
                    }
                }
            }
            let Some(rank) = pending else { return Ok(()) };
            if start.elapsed() >= timeout {
                let why = format!(
                    "its work did not finish within the grid's timeout of {timeout:?} (a peer rank failed, \
                     stalled or skipped its part of the collectives)"
                );
                return Err(self.fail(rank, call, why));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_micros(250));
        }
    }

    /// Aborts the grid and makes the error of rank `rank`'s failure.
    pub(crate) fn fail(&self, rank: usize, call: &'static str, why: String) -> Error {
        self.abort(&format!("`{call}` failed on rank {rank}: {why}"));
        Error::Collective { rank, call, why }
    }
}

impl Drop for CommGroup {
    fn drop(&mut self) {
        if self.failed.get_mut().map(|f| f.is_some()).unwrap_or(true) {
            return; // aborted: NCCL freed them
        }
        for s in &self.ranks {
            let _ = s.device.context().bind_to_thread();
            for comm in s.comms() {
                // SAFETY: a live communicator, not aborted, destroyed once;
                // every call on it was waited for.
                let _ = unsafe { sys::ncclCommDestroy(comm.raw) };
            }
        }
    }
}

/// `ncclBroadcast` of `bytes` bytes from the communicator's rank `root`
/// (`send`, read there only) into `recv` on every rank, on `stream`.
///
/// # Safety
/// `send` (at the root) and `recv` are device addresses of at least
/// `bytes` bytes on the communicator's device, live until the stream has
/// run the broadcast; the caller orders them on `stream` (events).
pub(crate) unsafe fn broadcast(
    comm: &Comm,
    send: u64,
    recv: u64,
    bytes: usize,
    root: usize,
    stream: &CudaStream,
) -> Result<(), String> {
    // SAFETY: the caller's contract; NCCL is loaded.
    let r = unsafe {
        sys::ncclBroadcast(
            send as *const c_void,
            recv as *mut c_void,
            bytes,
            sys::ncclDataType_t::ncclUint8,
            root as c_int,
            comm.raw,
            stream.cu_stream() as sys::cudaStream_t,
        )
    };
    check(r, Some(comm.raw))
}

/// `ncclSend` of `bytes` bytes at `send` to the communicator's rank
/// `peer`, on `stream` (matched by that rank's [`recv`]).
///
/// # Safety
/// `send` is a device address of at least `bytes` bytes on the
/// communicator's device, live until the stream has run the send.
pub(crate) unsafe fn send(
    comm: &Comm,
    send: u64,
    bytes: usize,
    peer: usize,
    stream: &CudaStream,
) -> Result<(), String> {
    // SAFETY: the caller's contract.
    unsafe { point_to_point(true, comm, send, bytes, peer, stream) }
}

/// `ncclRecv` of `bytes` bytes into `recv` from the communicator's rank
/// `peer`, on `stream` (matched by that rank's [`send`]).
///
/// # Safety
/// `recv` is a device address of at least `bytes` bytes on the
/// communicator's device, live until the stream has run the receive.
pub(crate) unsafe fn recv(
    comm: &Comm,
    recv: u64,
    bytes: usize,
    peer: usize,
    stream: &CudaStream,
) -> Result<(), String> {
    // SAFETY: the caller's contract.
    unsafe { point_to_point(false, comm, recv, bytes, peer, stream) }
}

/// [`send`] (`sending`) or [`recv`] of bytes at `at`.
///
/// # Safety
/// As theirs.
unsafe fn point_to_point(
    sending: bool,
    comm: &Comm,
    at: u64,
    bytes: usize,
    peer: usize,
    stream: &CudaStream,
) -> Result<(), String> {
    let (kind, peer, raw) = (sys::ncclDataType_t::ncclUint8, peer as c_int, comm.raw);
    let stream = stream.cu_stream() as sys::cudaStream_t;
    // SAFETY: the caller's contract; NCCL is loaded.
    let r = unsafe {
        if sending {
            sys::ncclSend(at as *const c_void, bytes, kind, peer, raw, stream)
        } else {
            sys::ncclRecv(at as *mut c_void, bytes, kind, peer, raw, stream)
        }
    };
    check(r, Some(comm.raw))
}
