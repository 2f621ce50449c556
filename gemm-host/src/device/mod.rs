//! The GPU, layer device (the lowest above the base: `device/` imports only
//! `error` and `element`): context, stream, the loaded kernel modules and
//! the device's limits here; the compiled menu in [`registry`], the shipped
//! kernels in [`kernels`], device memory (allocation, copies, the memory
//! pool's threshold) in [`memory`], and the host path's pinned pool in
//! [`staging`].

pub(crate) mod kernels;
pub(crate) mod memory;
pub(crate) mod nccl;
pub(crate) mod registry;
pub(crate) mod staging;

use crate::device::kernels::{Format, KernelCode, PtxModule};
use crate::device::memory::keep_pool_memory;
use crate::device::registry::Flavour;
use crate::error::{DriverContext, Error};
use cudarc::driver::sys::{CUdevice_attribute as Attr, CUfunction_attribute as FnAttr};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream};
use gemm_core::{DeviceLimits, KernelConfig, KernelLayouts, Precision};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One GPU with the library's kernels: a CUDA context, the stream the
/// library's work on this device is ordered on unless a call names another
/// ([`crate::Gemm::stream`]), and the kernel modules for the device's
/// compute capability ([`crate::tuning::kernels`]: machine code for 8.x and
/// 9.0, PTX compiled kernel by kernel above), unpacked and loaded on first
/// use (one per storage order of A and B, and stage 9's), each once.
pub struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Cubin modules (one per layouts), loaded on first use.
    modules: Mutex<[Option<Arc<CudaModule>>; 4]>,
    /// PTX modules (one per layouts), unpacked and split on first use; each
    /// kernel is then compiled alone.
    ptx_modules: Mutex<[Option<Arc<PtxModule>>; 4]>,
    warpgroup_module: Mutex<Option<Arc<CudaModule>>>,
    /// Modules handed to the driver so far (cuModuleLoadData calls).
    modules_loaded: std::sync::atomic::AtomicUsize,
    name: String,
    compute_capability: (i32, i32),
    kernel_code: KernelCode,
    limits: DeviceLimits,
    sm_count: u32,
    clock_khz: u32,
    max_threads_per_sm: u32,
    l2_bytes: usize,
    memory_clock_khz: u32,
    memory_bus_bits: u32,
    functions: Mutex<HashMap<(&'static str, KernelLayouts), CudaFunction>>,
    /// Resident blocks per SM of each kernel asked about (the split model's).
    blocks_per_sm: Mutex<HashMap<(Precision, KernelConfig, KernelLayouts), u32>>,
    /// Blocks of each clustered stage-9 kernel that run at once
    /// ([`Device::warpgroup_slots`]).
    cluster_slots: Mutex<HashMap<&'static str, u32>>,
    /// The host path's staging ring, workspace and streams, made on first use.
    pub(crate) host_pool: Mutex<Option<crate::device::staging::HostPool>>,
    /// Stage 9's tensor maps in device memory, by their bytes
    /// ([`Device::tensor_maps`]).
    tensor_maps: Mutex<TensorMapCache>,
}

/// Uploaded tensor maps by their bytes.
type TensorMapCache = HashMap<Box<[u8]>, Arc<CudaSlice<u8>>>;

/// The most sets of tensor maps [`Device::tensor_maps`] keeps (each a few
/// hundred bytes of device memory).
const TENSOR_MAP_SETS: usize = 256;

impl core::fmt::Debug for Device {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.name)
            .field("ordinal", &self.ctx.ordinal())
            .field("compute_capability", &self.compute_capability)
            .field("kernel_code", &self.kernel_code)
            .finish()
    }
}

/// Launch resources of one compiled kernel on a device, read from the driver
/// (the columns of Dharmaraj and Pampana, "Double-Precision Matrix Multiply on CUDA"'s outputs-per-thread table).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelInfo {
    /// PTX entry point.
    pub name: &'static str,
    /// Registers per thread.
    pub registers: u32,
    /// Local memory per thread, in bytes (0 unless the kernel spills).
    pub local_bytes: u32,
    /// Threads per block of the configuration.
    pub threads_per_block: u32,
    /// Dynamic shared memory per block, in bytes.
    pub smem_bytes: u32,
    /// Resident blocks per multiprocessor (the driver's occupancy calculator).
    pub blocks_per_sm: u32,
    /// Resident threads over the multiprocessor's maximum, in 0..=1.
    pub occupancy: f64,
}

static DEFAULT: Mutex<Option<Arc<Device>>> = Mutex::new(None);

/// The default device (ordinal 0), created on first use and shared after.
/// `dgemm`, `sgemm` and [`crate::Gemm::run`] use it unless told otherwise.
///
/// # Errors
/// [`Error::NoDriver`] without an NVIDIA driver, [`Error::NoDevice`] without
/// a GPU, [`Error::UnsupportedDevice`] below compute capability 8.0,
/// [`Error::Driver`] if the driver fails. A failure is not cached.
pub fn default_device() -> Result<Arc<Device>, Error> {
    let mut slot = DEFAULT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = slot.as_ref() {
        return Ok(d.clone());
    }
    let d = Device::new(0)?;
    *slot = Some(d.clone());
    Ok(d)
}

fn attr(ctx: &CudaContext, a: Attr) -> Result<u32, Error> {
    ctx.attribute(a).during("cuDeviceGetAttribute").map(|v| v.max(0) as u32)
}

impl Device {
    /// Opens GPU `ordinal`, loads the PTX for its architecture and reads its limits.
    ///
    /// # Errors
    /// As [`default_device`].
    pub fn new(ordinal: usize) -> Result<Arc<Device>, Error> {
        // cudarc panics when libcuda is missing: ask first.
        // SAFETY: only tries to dlopen the driver library.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::NoDriver);
        }
        let count = match CudaContext::device_count() {
            Ok(c) => c.max(0) as usize,
            Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_NO_DEVICE => 0,
            Err(e) => return Err(Error::Driver { call: "cuInit", source: e }),
        };
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).during("cuDevicePrimaryCtxRetain")?;
        let name = ctx.name().during("cuDeviceGetName")?;
        let (major, minor) = ctx.compute_capability().during("cuDeviceGetAttribute")?;
        let Some(mut kernel_code) = crate::device::kernels::code_for(major, minor) else {
            return Err(Error::UnsupportedDevice { name, major, minor });
        };
        // The PTX fallback on request (to test or time it), where it is shipped.
        if std::env::var_os("GEMM_KERNEL_CODE").is_some_and(|v| v == "ptx")
            && crate::device::kernels::image(kernel_code.arch(), Format::Ptx, Some(KernelLayouts::NN)).is_some()
        {
            kernel_code = KernelCode::Ptx { arch: kernel_code.arch() };
        }
        let stream = ctx.new_stream().during("cuStreamCreate")?;
        // Best effort: without memory pools (or if the driver refuses) the
        // workspace is simply allocated each time.
        let _ = keep_pool_memory(&ctx);
        let limits = DeviceLimits {
            max_threads_per_block: attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block_dim: [
                attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid_dim: [
                attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            max_smem_per_block: attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        };
        Ok(Arc::new(Device {
            sm_count: attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            clock_khz: attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
            max_threads_per_sm: attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
            l2_bytes: attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize,
            memory_clock_khz: attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
            memory_bus_bits: attr(&ctx, Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
            ctx,
            stream,
            modules: Mutex::new([None, None, None, None]),
            ptx_modules: Mutex::new([None, None, None, None]),
            warpgroup_module: Mutex::new(None),
            modules_loaded: std::sync::atomic::AtomicUsize::new(0),
            name,
            compute_capability: (major, minor),
            kernel_code,
            limits,
            functions: Mutex::new(HashMap::new()),
            blocks_per_sm: Mutex::new(HashMap::new()),
            cluster_slots: Mutex::new(HashMap::new()),
            host_pool: Mutex::new(None),
            tensor_maps: Mutex::new(HashMap::new()),
        }))
    }

    /// The device's name as the driver reports it (e.g. "NVIDIA H100 80GB HBM3").
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Compute capability (major, minor).
    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// What its kernels are loaded from: machine code for its architecture
    /// (compute capability 8.x: `sm_80`; 9.0: `sm_90`, and `sm_90a` for
    /// stage 9), or, on newer devices, the `sm_90` PTX that the driver
    /// compiles the first time each kernel is needed
    /// ([`crate::tuning::kernels`] says what that costs).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), gemm::Error> {
    /// let dev = gemm::default_device()?;
    /// println!("{}: {}", dev.name(), dev.kernel_code()); // "NVIDIA H100 80GB HBM3: cubin sm_90 (machine code)"
    /// # Ok(()) }
    /// ```
    pub fn kernel_code(&self) -> KernelCode {
        self.kernel_code
    }

    /// How many kernel modules this `Device` has handed to the driver: one
    /// per storage order of A and B that its products used, one for stage
    /// 9 (machine code); one per kernel used on the PTX path. Each is loaded
    /// once, however many threads ask for it at the same time.
    pub fn modules_loaded(&self) -> usize {
        self.modules_loaded.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `cuModuleLoadData` of an unpacked cubin or a PTX text, counted.
    fn load_module(&self, code: cudarc::nvrtc::Ptx) -> Result<Arc<CudaModule>, Error> {
        let m = self.ctx.load_module(code).during("cuModuleLoadData")?;
        self.modules_loaded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(m)
    }

    /// Launch limits (threads, block and grid dimensions, shared memory).
    pub fn limits(&self) -> &DeviceLimits {
        &self.limits
    }

    /// Streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    /// Peak SM clock in MHz, as the driver reports it.
    pub fn clock_mhz(&self) -> f64 {
        self.clock_khz as f64 / 1000.0
    }

    /// Peak rate of fused multiply-adds on the CUDA cores (no tensor cores),
    /// in GFLOP/s: SMs x clock x FMA per clock per SM x 2. FMA units per SM:
    /// sm_80 32 (f64) / 64 (f32); sm_90 64 / 128; other architectures 2 / 128.
    /// This is the ceiling for stages that use FFMA/DFMA.
    pub fn peak_fma_gflops(&self, precision: Precision) -> f64 {
        let per_sm = match (self.compute_capability, precision) {
            ((8, 0), Precision::F64) => 32.0,
            ((8, 0), Precision::F32) => 64.0,
            ((9, 0), Precision::F64) => 64.0,
            ((9, 0), Precision::F32) => 128.0,
            (_, Precision::F64) => 2.0,
            (_, Precision::F32) => 128.0,
        };
        self.sm_count as f64 * self.clock_mhz() * 1e-3 * per_sm * 2.0
    }

    /// Theoretical FP64 tensor-core peak in GFLOP/s (stage 8's ceiling): SMs x
    /// clock x FP64 mma flops per clock per SM (sm_80 128, sm_90 256, others 0:
    /// no FP64 tensor cores known).
    pub fn peak_fp64_tensor_gflops(&self) -> f64 {
        let per_sm = match self.compute_capability {
            (8, 0) => 128.0,
            (9, 0) => 256.0,
            _ => 0.0,
        };
        self.sm_count as f64 * self.clock_mhz() * 1e-3 * per_sm
    }

    /// Theoretical DRAM bandwidth in GB/s: 2 (double data rate) x memory clock
    /// x bus width, from the driver's attributes.
    pub fn dram_gbs(&self) -> f64 {
        2.0 * self.memory_clock_khz as f64 * 1e3 * self.memory_bus_bits as f64 / 8.0 * 1e-9
    }

    /// The ceiling of a stage in GFLOP/s: the FP64 tensor-core peak for stage
    /// 8, the FMA peak ([`Device::peak_fma_gflops`]) for the others.
    pub fn peak_gflops(&self, precision: Precision, stage: gemm_core::Stage) -> f64 {
        if stage == gemm_core::Stage::TensorCore {
            self.peak_fp64_tensor_gflops()
        } else {
            self.peak_fma_gflops(precision)
        }
    }

    /// L2 cache size in bytes.
    pub fn l2_bytes(&self) -> usize {
        self.l2_bytes
    }

    /// Resident threads per multiprocessor at most.
    pub fn max_threads_per_sm(&self) -> u32 {
        self.max_threads_per_sm
    }

    /// Whether `other` is the same GPU context: the same `Device`, or another
    /// handle to the same CUDA context (e.g. two `Device::new(0)`).
    pub fn same_context(&self, other: &Device) -> bool {
        core::ptr::eq(self, other) || *self.ctx == *other.ctx
    }

    /// The CUDA context (for interoperation with cudarc).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream the library's work on this device is ordered on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The stream of a call on this device: `stream` (a caller's, which
    /// must belong to this device's context), else the device's own.
    pub(crate) fn stream_or(&self, stream: Option<&Arc<CudaStream>>) -> Result<Arc<CudaStream>, Error> {
        match stream {
            Some(s) if **s.context() != **self.context() => {
                Err(Error::ContextMismatch { what: "the stream", device: self.name().to_string() })
            }
            Some(s) => Ok(s.clone()),
            None => Ok(self.stream.clone()),
        }
    }

    /// Waits for all of the library's work on this device to finish.
    ///
    /// # Errors
    /// [`Error::Driver`] if a kernel failed.
    pub fn synchronize(&self) -> Result<(), Error> {
        self.stream.synchronize().during("cuStreamSynchronize")
    }

    fn unsupported(&self) -> Error {
        Error::UnsupportedDevice {
            name: self.name.clone(),
            major: self.compute_capability.0,
            minor: self.compute_capability.1,
        }
    }

    /// The cubin module of the kernels reading A and B in `layouts`,
    /// unpacked and loaded on first use (the lock makes two threads that
    /// ask at once load it once).
    fn module(&self, layouts: KernelLayouts) -> Result<Arc<CudaModule>, Error> {
        let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = &modules[layouts.index()] {
            return Ok(m.clone());
        }
        let image = crate::device::kernels::image(self.kernel_code.arch(), Format::Cubin, Some(layouts))
            .ok_or_else(|| self.unsupported())?;
        let m = self.load_module(cudarc::nvrtc::Ptx::from_binary(image.unpack()))?;
        modules[layouts.index()] = Some(m.clone());
        Ok(m)
    }

    /// The PTX module of the kernels reading A and B in `layouts`, unpacked
    /// and split into its kernels on first use.
    fn ptx_module(&self, layouts: KernelLayouts) -> Result<Arc<PtxModule>, Error> {
        let mut modules = self.ptx_modules.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = &modules[layouts.index()] {
            return Ok(m.clone());
        }
        let image = crate::device::kernels::image(self.kernel_code.arch(), Format::Ptx, Some(layouts))
            .ok_or_else(|| self.unsupported())?;
        let text = String::from_utf8(image.unpack()).map_err(|_| self.unsupported())?;
        let m = Arc::new(PtxModule::new(text));
        modules[layouts.index()] = Some(m.clone());
        Ok(m)
    }

    /// Loads entry point `name` of the kernels reading A and B in `layouts`:
    /// from the cubin module, or its PTX alone, compiled by the driver.
    fn load_function(&self, name: &'static str, layouts: KernelLayouts) -> Result<CudaFunction, Error> {
        match self.kernel_code {
            KernelCode::Cubin { .. } => self.module(layouts)?.load_function(name).during("cuModuleGetFunction"),
            KernelCode::Ptx { .. } => {
                let not_found = || Error::Driver {
                    call: "cuModuleGetFunction",
                    source: cudarc::driver::DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_FOUND),
                };
                let text = self.ptx_module(layouts)?.kernel_text(name).ok_or_else(not_found)?;
                let module = self.load_module(cudarc::nvrtc::Ptx::from_src(text))?;
                module.load_function(name).during("cuModuleGetFunction")
            }
        }
    }

    /// A stage-9 launch's tensor maps (`bytes`: A's, B's and C's
    /// `CUtensorMap`s, and a tail's) in device memory: the copy made for
    /// the same bytes before, else a new one uploaded on `stream`. A map
    /// holds an operand's address, shape and strides, so the same bytes
    /// describe the same operand: a product run again on the same buffers
    /// (a model's layers, token after token) reuses its maps, without the
    /// upload (3.7-7 us of host time for 384 bytes, NVIDIA H200,
    /// 2026-11-26). At most [`TENSOR_MAP_SETS`] sets are kept; when full,
    /// the device is synchronized and the cache emptied (a set may be read
    /// by launches on several streams, and cudarc's event tracking waits
    /// only for the last one before freeing it).
    pub(crate) fn tensor_maps(&self, stream: &Arc<CudaStream>, bytes: &[u8]) -> Result<Arc<CudaSlice<u8>>, Error> {
        let mut cache = self.tensor_maps.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(maps) = cache.get(bytes) {
            return Ok(maps.clone());
        }
        if cache.len() >= TENSOR_MAP_SETS {
            self.ctx.synchronize().during("cuCtxSynchronize")?;
            cache.clear();
        }
        let maps = Arc::new(stream.clone_htod(bytes).during("cuMemcpyHtoDAsync")?);
        cache.insert(bytes.into(), maps.clone());
        Ok(maps)
    }

    /// The loaded function of a stage-9 entry point (the `sm_90a` module,
    /// loaded on first use; the caller checked the compute capability), with
    /// its dynamic shared-memory limit raised to the device's maximum.
    pub(crate) fn warpgroup_function(&self, name: &'static str) -> Result<CudaFunction, Error> {
        let mut map = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        // The sm_90a module's functions are cached under the `nn` layouts key
        // of their own (unique) names.
        if let Some(f) = map.get(&(name, KernelLayouts::PACKED)) {
            return Ok(f.clone());
        }
        let module = {
            let mut slot = self.warpgroup_module.lock().unwrap_or_else(|p| p.into_inner());
            match slot.as_ref() {
                Some(m) => m.clone(),
                None => {
                    let image = crate::device::kernels::image("sm_90a", Format::Cubin, None)
                        .ok_or_else(|| self.unsupported())?;
                    let cubin = cudarc::nvrtc::Ptx::from_binary(image.unpack());
                    let m = self.load_module(cubin)?;
                    *slot = Some(m.clone());
                    m
                }
            }
        };
        let f = module.load_function(name).during("cuModuleGetFunction")?;
        f.set_attribute(FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.limits.max_smem_per_block as i32)
            .during("cuFuncSetAttribute")?;
        map.insert((name, KernelLayouts::PACKED), f.clone());
        Ok(f)
    }

    /// Blocks of stage-9 kernel `name` (`func`, of `tile`, launched with
    /// `smem_bytes` of dynamic shared memory) that run at once, the most a
    /// launch of persistent blocks should have (the `sm_count` of
    /// [`WgmmaTile::grid`](gemm_core::warpgroup::WgmmaTile::grid), which
    /// rounds it down to whole clusters): one per SM; for a tile run
    /// in clusters, the clusters the driver can keep resident at once
    /// (`cuOccupancyMaxActiveClusters`: a cluster's blocks share a GPC)
    /// times their blocks, at most the SMs (remembered per kernel).
    ///
    /// # Errors
    /// [`Error::Driver`] if the driver's occupancy query fails.
    pub(crate) fn warpgroup_slots(
        &self,
        name: &'static str,
        func: &CudaFunction,
        tile: gemm_core::warpgroup::WgmmaTile,
        smem_bytes: u32,
    ) -> Result<u32, Error> {
        if tile.cluster == 1 {
            return Ok(self.sm_count);
        }
        if let Some(&s) = self.cluster_slots.lock().unwrap_or_else(|p| p.into_inner()).get(name) {
            return Ok(s);
        }
        self.ctx.bind_to_thread().during("cuCtxSetCurrent")?;
        // The cluster's size is the kernel's own (`.reqnctapercluster`):
        // no launch attribute; the grid, one launch's over the SMs.
        let config = cudarc::driver::sys::CUlaunchConfig {
            gridDimX: tile.grid(u32::MAX, u32::MAX, 1, self.sm_count)[0].max(tile.cluster),
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: tile.threads_per_block(),
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: smem_bytes,
            hStream: core::ptr::null_mut(),
            attrs: core::ptr::null_mut(),
            numAttrs: 0,
        };
        let mut clusters = 0i32;
        // SAFETY: `func` is a loaded function of this context (current on
        // this thread); the config asks for no attributes.
        unsafe { cudarc::driver::sys::cuOccupancyMaxActiveClusters(&mut clusters, func.cu_function(), &config) }
            .result()
            .during("cuOccupancyMaxActiveClusters")?;
        let slots = (clusters.max(1) as u32 * tile.cluster).min(self.sm_count.max(tile.cluster));
        self.cluster_slots.lock().unwrap_or_else(|p| p.into_inner()).insert(name, slots);
        Ok(slots)
    }

    /// The loaded function of a PTX entry point in the module of `layouts` (cached).
    pub(crate) fn function(&self, name: &'static str, layouts: KernelLayouts) -> Result<CudaFunction, Error> {
        let mut map = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = map.get(&(name, layouts)) {
            return Ok(f.clone());
        }
        let f = self.load_function(name, layouts)?;
        // Allow up to the device's opt-in shared memory per block once, at
        // load, rather than before each launch (and so the occupancy
        // calculator sees the launches as they run).
        f.set_attribute(FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.limits.max_smem_per_block as i32)
            .during("cuFuncSetAttribute")?;
        map.insert((name, layouts), f.clone());
        Ok(f)
    }

    /// Resident blocks per SM of the kernel serving `config` (the driver's
    /// occupancy calculator, [`Device::kernel_info`]), remembered per kernel.
    ///
    /// # Errors
    /// As [`Device::kernel_info`].
    pub fn blocks_per_sm(
        &self,
        precision: Precision,
        config: KernelConfig,
        layouts: KernelLayouts,
    ) -> Result<u32, Error> {
        let key = (precision, config, layouts);
        if let Some(b) = self.blocks_per_sm.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(*b);
        }
        let blocks = self.kernel_info(precision, config, layouts)?.blocks_per_sm;
        self.blocks_per_sm.lock().unwrap_or_else(|p| p.into_inner()).insert(key, blocks);
        Ok(blocks)
    }

    /// Registers, threads, shared memory, resident blocks per SM and occupancy
    /// of the kernel serving `config` at `precision` for A and B stored in
    /// `layouts`, read from the driver.
    ///
    /// # Errors
    /// [`Error::Config`]/[`Error::NoKernel`] for a configuration not compiled;
    /// [`Error::Driver`] on driver failure.
    pub fn kernel_info(
        &self,
        precision: Precision,
        config: KernelConfig,
        layouts: KernelLayouts,
    ) -> Result<KernelInfo, Error> {
        let entry = registry::entry_point(precision, config)?;
        self.info_of(entry.name, precision, config, layouts)
    }

    /// As [`Device::kernel_info`], for the separate entry point that serves
    /// `config`'s batches and split-K launches (`<name>_batched`), or `None`
    /// where one entry point serves all launches
    /// ([`crate::tuning::separate_batched_entry`]).
    ///
    /// # Errors
    /// As [`Device::kernel_info`].
    pub fn batched_kernel_info(
        &self,
        precision: Precision,
        config: KernelConfig,
        layouts: KernelLayouts,
    ) -> Result<Option<KernelInfo>, Error> {
        let entry = registry::entry_point(precision, config)?;
        if entry.batched_name == entry.name {
            return Ok(None);
        }
        self.info_of(entry.batched_name, precision, config, layouts).map(Some)
    }

    /// Launch resources of the stage-9 entry point `layout` (0..4: `nn`,
    /// `nt`, `tn`, `tt`) of `kernel` (one of
    /// [`WARPGROUP_KERNELS`](crate::tuning::WARPGROUP_KERNELS)) on this
    /// device: registers and local memory after the driver's JIT of the
    /// `sm_90a` module, threads, shared memory and residency of its tile.
    /// `Ok(None)` when the family has no kernel in that layout.
    ///
    /// ```no_run
    /// use gemm::tuning::WARPGROUP_KERNELS;
    /// # fn main() -> Result<(), gemm::Error> {
    /// let dev = gemm::default_device()?;
    /// if let Some(info) = dev.warpgroup_kernel_info(&WARPGROUP_KERNELS[0], 1)? {
    ///     assert_eq!(info.local_bytes, 0);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a device other than compute capability 9.0
    /// (the module is `sm_90a`); [`Error::Driver`] if the module or the
    /// function does not load.
    pub fn warpgroup_kernel_info(
        &self,
        kernel: &crate::device::registry::WarpgroupKernel,
        layout: usize,
    ) -> Result<Option<KernelInfo>, Error> {
        self.warpgroup_flavour_info(kernel, layout, Flavour::Plain)
    }

    /// [`Device::warpgroup_kernel_info`] of the family's kernel in that
    /// layout and [`Flavour`] (its `_fused` or `_epilogue` entry points,
    /// or the plain ones); `Ok(None)` when it has none there.
    ///
    /// # Errors
    /// As [`Device::warpgroup_kernel_info`].
    pub fn warpgroup_flavour_info(
        &self,
        kernel: &crate::device::registry::WarpgroupKernel,
        layout: usize,
        flavour: Flavour,
    ) -> Result<Option<KernelInfo>, Error> {
        let Some(name) = (layout < 4).then(|| kernel.entry(layout, flavour)).flatten() else {
            return Ok(None);
        };
        if self.compute_capability() != (9, 0) {
            return Err(Error::Unsupported {
                product: name.to_string(),
                why: format!("stage 9's sm_90a kernels load on compute capability 9.0 only; {} is not", self.name()),
            });
        }
        let f = self.warpgroup_function(name)?;
        self.launch_info(name, &f, kernel.tile.threads_per_block(), kernel.smem_bytes(flavour)).map(Some)
    }

    fn info_of(
        &self,
        name: &'static str,
        precision: Precision,
        config: KernelConfig,
        layouts: KernelLayouts,
    ) -> Result<KernelInfo, Error> {
        let f = self.function(name, layouts)?;
        let (bx, by) = config.block_dim();
        self.launch_info(name, &f, bx * by, config.smem_bytes(precision, layouts))
    }

    /// The driver's view of loaded function `f` (entry point `name`)
    /// launched with `threads` per block and `smem` bytes of dynamic shared
    /// memory: registers, local memory, residency.
    fn launch_info(&self, name: &'static str, f: &CudaFunction, threads: u32, smem: u32) -> Result<KernelInfo, Error> {
        // The occupancy calculator needs the context current on this thread.
        self.ctx.bind_to_thread().during("cuCtxSetCurrent")?;
        let get = |a: FnAttr| f.get_attribute(a).during("cuFuncGetAttribute").map(|v| v.max(0) as u32);
        let blocks = f
            .occupancy_max_active_blocks_per_multiprocessor(threads, smem as usize, None)
            .during("cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
        Ok(KernelInfo {
            name,
            registers: get(FnAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            local_bytes: get(FnAttr::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            threads_per_block: threads,
            smem_bytes: smem,
            blocks_per_sm: blocks,
            occupancy: (blocks * threads) as f64 / self.max_threads_per_sm.max(1) as f64,
        })
    }
}
