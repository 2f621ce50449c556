//! The mixed-precision products' host side: f16 and bf16 products (f32
//! accumulation), f32 products on TF32 tensor cores when asked for
//! ([`Gemm::allow_tf32`]) and the i8 product (i32 accumulation), single and
//! strided-batched, through the same builder as f64 and f32 ([`crate::Product`]
//! picks the path per element type); their launchers: stage 9 (Hopper's
//! warpgroup MMA: the TMA tensor maps of A and B from
//! `cuTensorMapEncodeTiled`, split-K) on compute capability 9.0, stage 8's
//! `mma.sync` kernels on 8.x (or when asked for); an aligned copy of an
//! operand the kernels cannot read in place, a K-major copy of an MN-major
//! i8 operand (or tf32 B beside an MN-major A); an MN-major tf32 operand
//! otherwise goes in wgmma's register-A slot (swapping A and B, with C
//! stored transposed, when it is B); the launch (the tile, split-K and route
//! are planned in product_plan.rs).

use crate::api::batch::Strided;
use crate::api::gemm::Gemm;
use crate::device::memory::alloc_uninit;
use crate::device::registry::WARPGROUP_KERNELS;
use crate::device::{default_device, Device};
use crate::element::Scalar;
use crate::error::{DriverContext, Error};
use crate::exec::host_path::{host_product, HostOperand, HostPolicy};
use crate::operands::device_matrix::{DeviceView, DeviceViewMut};
use crate::operands::matrix::{MatMut, MatRef};
use crate::plan::product_plan::{
    mma_kernel, product_name, realign_wanted, warpgroup_form, warpgroup_plan, WarpgroupRoute,
};
use cudarc::driver::sys as cu;
use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
};
use gemm_core::batch::batch_len;
use gemm_core::shape::{Layout, MatrixDims, Op};
use gemm_core::warpgroup::{
    GroupProblem, WgmmaTile, WgmmaTypes, C_STORE_THREADS, C_STORE_TMA, C_STORE_TRANSPOSED, GROUP_MAPS_BYTES, ROW_BYTES,
    WARPGROUP_M,
};
use gemm_core::GemmDims;
use gemm_core::{KernelLayouts, Stage};
use half::f16;
use std::sync::Arc;

/// Which kernels run a mixed-precision product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MixedStage {
    /// Stage 9: warpgroup MMA and TMA (the `sm_90a` module).
    Warpgroup,
    /// Stage 8's `mma.sync` kernels (the layout modules).
    MmaSync,
}

/// alpha and beta in the accumulation's type, as their bits: i32 (checked
/// integers) for the i8 product, f32 otherwise; 4 bytes either way.
fn scalars(types: WgmmaTypes, alpha: f64, beta: f64) -> (u32, u32) {
    if types == WgmmaTypes::S8 {
        (alpha as i32 as u32, beta as i32 as u32)
    } else {
        ((alpha as f32).to_bits(), (beta as f32).to_bits())
    }
}

/// One operand as TMA reads it: `lines` lines of `line` elements of
/// `elem` bytes, `ld` elements apart, `count` matrices `stride` elements
/// apart (one when `stride == 0`: a broadcast operand).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TmaOperand {
    elem: usize,
    line: usize,
    lines: usize,
    ld: usize,
    count: usize,
    stride: usize,
}

impl TmaOperand {
    /// Elements in 16 bytes: TMA's alignment unit.
    fn align(&self) -> usize {
        16 / self.elem
    }

    /// Whether TMA can read it in place: 16-byte aligned start, line and
    /// matrix strides multiples of 16 bytes, matrices that do not overlap
    /// (else a packed copy is read).
    fn aligned(&self, address: u64) -> bool {
        let a = self.align();
        address % 16 == 0
            && self.ld % a == 0
            && (self.count == 1 || (self.stride % a == 0 && self.stride >= self.lines * self.ld))
    }

    /// The layout of a copy whose lines are padded to a multiple of `bytes`
    /// (16, or 128 for [`TmaOperand::lines_on_128`]).
    fn padded_to(&self, bytes: usize) -> TmaOperand {
        let a = bytes / self.elem;
        let ld = self.line.div_ceil(a) * a;
        TmaOperand { ld, stride: ld * self.lines, ..*self }
    }

    /// Whether every line starts on 128 bytes (TMA's 128-byte box rows then
    /// each fill one L2 line rather than straddling two).
    fn lines_on_128(&self, address: u64) -> bool {
        address % 128 == 0
            && (self.ld * self.elem) % 128 == 0
            && (self.count == 1 || (self.stride * self.elem) % 128 == 0)
    }

    /// The same matrix with lines and columns exchanged (what the transposed
    /// copy holds), its lines padded to 128 bytes (free in a fresh copy).
    fn transposed(&self) -> TmaOperand {
        let t = TmaOperand { line: self.lines, lines: self.line, ..*self };
        t.padded_to(128)
    }

    /// Elements of a buffer laid out so, its last line whole (`ld`
    /// elements): a 16-byte chunk that starts inside a line then ends inside
    /// the buffer, so stage 8's partial cp.async copies (which read only the
    /// bytes inside the matrix) never name bytes past it.
    fn len(&self) -> usize {
        (self.count - 1) * self.stride + self.lines * self.ld
    }

    /// Whether each line's length is a whole number of 16-byte chunks.
    fn whole_chunks(&self) -> bool {
        self.line % self.align() == 0
    }
}

/// Copies `op` at `src` into a new buffer laid out as `op.padded_to(bytes)`
/// (cuMemcpy2DAsync per matrix, on `stream`).
fn aligned_copy<T: Scalar>(
    stream: &Arc<CudaStream>,
    op: TmaOperand,
    src: &CudaView<'_, T>,
    bytes: usize,
) -> Result<(CudaSlice<T>, TmaOperand), Error> {
    let dst_op = op.padded_to(bytes);
    // SAFETY: every element TMA reads inside the matrix is written below; the
    // pad elements (past `line` in each line) are never read: TMA's boxes
    // stop at the tensor's dimensions.
    let mut dst = unsafe { alloc_uninit::<T>(stream, dst_op.len()) }?;
    let size = size_of::<T>();
    let (src_ptr, _r) = src.device_ptr(stream);
    let (dst_ptr, _w) = dst.device_ptr_mut(stream);
    for i in 0..op.count {
        let copy = cu::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: cu::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: core::ptr::null(),
            srcDevice: src_ptr + (i * op.stride * size) as u64,
            srcArray: core::ptr::null_mut(),
            srcPitch: op.ld * size,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: cu::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: core::ptr::null_mut(),
            dstDevice: dst_ptr + (i * dst_op.stride * size) as u64,
            dstArray: core::ptr::null_mut(),
            dstPitch: dst_op.ld * size,
            WidthInBytes: op.line * size,
            Height: op.lines,
        };
        // SAFETY: both regions lie in their buffers (validated shapes; the
        // destination was sized by `len`); the copy is ordered on `stream`.
        unsafe { cu::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) }.result().during("cuMemcpy2DAsync")?;
    }
    drop((_r, _w));
    Ok((dst, dst_op))
}

/// Copies `op` at `src` into a new buffer holding its transpose
/// (`op.transposed()`): the K-major copy of an MN-major tf32 or i8 operand,
/// which neither wgmma nor ldmatrix reads transposed (`transpose_b32`, `_b8`: the
/// tiled transpose of packing, on `stream`).
fn transposed_copy<T: Scalar>(
    device: &Device,
    stream: &Arc<CudaStream>,
    stage: MixedStage,
    op: TmaOperand,
    src: &CudaView<'_, T>,
) -> Result<(CudaSlice<T>, TmaOperand), Error> {
    use gemm_core::pack::{pack_grid, pack_tile_bytes, PACK_BLOCK};
    let dst_op = op.transposed();
    // SAFETY: the transpose writes every element inside each copied matrix;
    // the pad past each line's end is never read (TMA's boxes stop at the
    // tensor's dimensions).
    let mut dst = unsafe { alloc_uninit::<T>(stream, dst_op.len()) }?;
    let name = if op.elem == 4 { "transpose_b32" } else { "transpose_b8" };
    let func = match stage {
        MixedStage::Warpgroup => device.warpgroup_function(name)?,
        MixedStage::MmaSync => device.function(name, KernelLayouts::NN)?,
    };
    let grid = pack_grid(op.lines as u32, op.line as u32);
    let cfg = LaunchConfig {
        grid_dim: (grid[0], grid[1], grid[2]),
        block_dim: (PACK_BLOCK[0], PACK_BLOCK[1], 1),
        shared_mem_bytes: pack_tile_bytes(op.elem as u32),
    };
    let (rows, cols, ld, ld_dst) = (op.lines as u32, op.line as u32, op.ld as u32, dst_op.ld as u32);
    for i in 0..op.count {
        let from = src.slice(i * op.stride..);
        let mut to = dst.slice_mut(i * dst_op.stride..);
        let mut builder = stream.launch_builder(&func);
        builder.arg(&rows).arg(&cols).arg(&from).arg(&ld).arg(&mut to).arg(&ld_dst);
        // SAFETY: the source holds `rows` lines of `cols` elements `ld` apart
        // (a validated operand), the destination `cols` lines of `rows`
        // elements `ld_dst` apart (sized by `len`); they do not overlap; the
        // geometry is packing's.
        unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
    }
    Ok((dst, dst_op))
}

/// One operand brought to what the kernels read (`k_major`: its storage
/// runs along k): an MN-major tf32 or i8 operand is transposed to a K-major
/// copy (returned flag true), one whose lines do not start on 16 bytes (or,
/// for stage 8, do not end on them) is
/// copied to padded lines, and so is, for stage 9, one that `realign` says
/// to bring to lines on 128 bytes; the copies are pushed to `copies` (freed
/// after the launch, stream-ordered). Returns the address the kernel reads
/// and its layout.
#[allow(clippy::too_many_arguments)]
fn prepare_operand<T: Scalar>(
    device: &Device,
    stream: &Arc<CudaStream>,
    stage: MixedStage,
    types: WgmmaTypes,
    op: TmaOperand,
    (k_major, realign): (bool, bool),
    src: &CudaView<'_, T>,
    copies: &mut Vec<CudaSlice<T>>,
) -> Result<(u64, TmaOperand, bool), Error> {
    let (address, _sync) = src.device_ptr(stream);
    let realign = realign && stage == MixedStage::Warpgroup && !op.lines_on_128(address);
    if !k_major && !types.transposes() {
        let (copy, t) = transposed_copy(device, stream, stage, op, src)?;
        let address = copy.device_ptr(stream).0;
        copies.push(copy);
        Ok((address, t, true))
    } else if op.aligned(address) && (stage == MixedStage::Warpgroup || op.whole_chunks()) && !realign {
        // Stage 8 reads a line's last chunk with cp.async's source size (the
        // bytes inside the matrix), but compute-sanitizer's memcheck checks
        // all 16 bytes: lines of whole chunks are read in place, others
        // from a copy whose last line is whole (`TmaOperand::len`).
        Ok((address, op, false))
    } else {
        let (copy, padded) = aligned_copy(stream, op, src, if realign { 128 } else { 16 })?;
        let address = copy.device_ptr(stream).0;
        copies.push(copy);
        Ok((address, padded, false))
    }
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
unsafe fn copy_elements<C: Scalar>(
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
        unsafe { crate::device::staging::copy_2d(h, pitch, d, pitch, line * size, height, up, stream) }?;
    }
    Ok(())
}

/// The tensor map of one operand (or of C) at device address `address`, as
/// the 128 bytes the kernel reads: dimensions (line, lines, count), box
/// (128 bytes, `box_lines`, 1), 128-byte swizzle, zeros outside.
fn tensor_map(
    data_type: cu::CUtensorMapDataType,
    address: u64,
    op: TmaOperand,
    box_lines: u32,
) -> Result<[u8; 128], Error> {
    let elem = op.elem as u64;
    let dims = [op.line as u64, op.lines as u64, op.count as u64];
    let line_stride = op.ld as u64 * elem;
    let matrix_stride =
        if op.count > 1 { op.stride as u64 * elem } else { (line_stride * op.lines as u64).div_ceil(16) * 16 };
    let strides = [line_stride, matrix_stride];
    let boxes = [ROW_BYTES / elem as u32, box_lines, 1];
    let element_strides = [1u32; 3];
    let mut map = core::mem::MaybeUninit::<cu::CUtensorMap>::uninit();
    // SAFETY: the arrays have the rank's lengths (strides: rank - 1); the
    // address is the operand's device memory; the driver only encodes.
    unsafe {
        cu::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            data_type,
            3,
            address as *mut core::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            cu::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            cu::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            cu::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .during("cuTensorMapEncodeTiled")?;
    // SAFETY: initialized by the successful call; a CUtensorMap is 128
    // bytes of plain data.
    Ok(unsafe { core::mem::transmute::<cu::CUtensorMap, [u8; 128]>(map.assume_init()) })
}

impl Gemm {
    /// The mixed-precision products' options check: the tuning options of
    /// stages 1-8 do not apply to them, but for `.stage(Stage::TensorCore)`
    /// alone, which asks for stage 8's `mma.sync` kernels (returns true);
    /// the i8 product's alpha and beta are i32.
    pub(crate) fn mixed_options(&self, types: WgmmaTypes) -> Result<bool, Error> {
        let mma_sync = self.stage_option() == Some(Stage::TensorCore) && {
            let mut rest = self.clone();
            rest.clear_stage();
            rest.tuning_option_set().is_none()
        };
        if let (Some(option), false) = (self.tuning_option_set(), mma_sync) {
            return Err(Error::Unsupported {
                product: product_name(types),
                why: format!(
                    "{option} does not apply: these products run stage 9's kernels, or stage 8's with .stage(Stage::TensorCore) alone"
                ),
            });
        }
        if types == WgmmaTypes::S8 {
            for (name, v) in [("alpha", self.alpha), ("beta", self.beta)] {
                if v.fract() != 0.0 || !(i32::MIN as f64..=i32::MAX as f64).contains(&v) {
                    return Err(Error::Unsupported {
                        product: product_name(types),
                        why: format!(
                            "{name} = {v}: it computes in i32, so alpha and beta must be integers in i32's range"
                        ),
                    });
                }
            }
        }
        Ok(mma_sync)
    }

    /// Whether the options let an f32 product run on TF32 tensor cores:
    /// [`Gemm::allow_tf32`], and no option of stages 1-8 set but
    /// `.stage(Stage::TensorCore)` alone (stage 8's TF32 kernels).
    pub(crate) fn tf32_by_options(&self) -> bool {
        self.tf32 && (self.tuning_option_set().is_none() || matches!(self.mixed_options(WgmmaTypes::Tf32), Ok(true)))
    }

    /// Whether an f32 product runs on TF32 tensor cores: only when
    /// [`Gemm::allow_tf32`] asked for it, no option of stages 1-8 is set
    /// (but `.stage(Stage::TensorCore)`, which picks stage 8's TF32 kernels),
    /// and the device (`device`, else the builder's, else the default) has
    /// compute capability 8.0 or newer.
    pub(crate) fn uses_tf32(&self, device: Option<&Arc<Device>>) -> Result<bool, Error> {
        if !self.tf32 {
            return Ok(false);
        }
        if !self.tf32_by_options() {
            return Ok(false);
        }
        // Without a device the f32 path runs and reports it, after the
        // shape checks.
        let device = match device.or(self.device_option()) {
            Some(d) => d.clone(),
            None => match default_device() {
                Ok(d) => d,
                Err(_) => return Ok(false),
            },
        };
        Ok(device.compute_capability() >= (8, 0))
    }

    /// Which kernels run a mixed-precision product on `device`: stage 9 on
    /// compute capability 9.0 (unless `mma_sync`: stage 8 was asked for),
    /// stage 8's `mma.sync` kernels on other devices from 8.0 on.
    fn mixed_stage(types: WgmmaTypes, device: &Device, mma_sync: bool) -> Result<MixedStage, Error> {
        let (major, minor) = device.compute_capability();
        if (major, minor) == (9, 0) && !mma_sync {
            Ok(MixedStage::Warpgroup)
        } else if major >= 8 {
            Ok(MixedStage::MmaSync)
        } else {
            Err(Error::Unsupported {
                product: product_name(types),
                why: format!(
                    "its kernels use the tensor cores' mma.sync of compute capability 8.0 and newer; {} has {major}.{minor}",
                    device.name()
                ),
            })
        }
    }

    /// [`Gemm::run`] for the mixed-precision products (f16, bf16, TF32, i8):
    /// the host path ([`crate::exec::host_path`]) with the type's kernels on each
    /// tile: uploads, products and downloads overlapped on several streams,
    /// out of core under [`Gemm::memory_budget`]. Each tile takes the whole
    /// product's split of k, so the bits are those of the same product on
    /// device matrices; with a C of 16 bits k is never cut into chunks (its
    /// partial sums would be rounded to C's type between them).
    pub(crate) fn run_mixed_host<T: Scalar, C: Scalar>(
        &self,
        types: WgmmaTypes,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        mut c: MatMut<'_, C>,
    ) -> Result<(), Error> {
        let mma_sync = self.mixed_options(types)?;
        let c_len = c.dims().required_len().unwrap_or(0);
        let dims = self.problem((a.dims(), a.span().len()), (b.dims(), b.span().len()), (c.dims(), c_len))?;
        if dims.is_empty() || self.leaves_c_unchanged(&dims) {
            return Ok(());
        }
        let device = match self.device_option() {
            Some(d) => d.clone(),
            None => default_device()?,
        };
        let stage = Self::mixed_stage(types, &device, mma_sync)?;
        let mut step = self.clone();
        let (route, _, reads_ab) = warpgroup_form(types, &dims, self.alpha);
        if stage == MixedStage::Warpgroup && reads_ab {
            let kd = route.dims;
            step.warpgroup_split = Some(warpgroup_plan(types, kd.m, kd.n, kd.k, 1, device.sm_count()).split);
        }
        let operand = |base: *const u8, d: MatrixDims, op: Op| HostOperand { base, dims: d.op(op) };
        let ha = operand(a.as_slice().as_ptr() as *const u8, a.dims(), self.op_a);
        let hb = operand(b.as_slice().as_ptr() as *const u8, b.dims(), self.op_b);
        let hc = operand(c.span_mut().as_mut_ptr() as *const u8, c.dims(), Op::N);
        let tile = |(alpha, beta): (f64, f64),
                    stream: &Arc<CudaStream>,
                    pd: &GemmDims,
                    ops: (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, C>)| {
            let g = step.clone().alpha(alpha).beta(beta);
            g.enqueue_mixed(&device, stream, stage, types, pd, ops, (1, [0; 3]))
        };
        let policy = HostPolicy::tensor_cores(size_of::<C>());
        host_product(&self.host_call(), &device, &dims, (ha, hb, hc), &tile, policy)
    }

    /// [`Gemm::run_device`] for the mixed-precision products.
    pub(crate) fn run_mixed_device<T: Scalar, C: Scalar>(
        &self,
        types: WgmmaTypes,
        a: DeviceView<'_, T>,
        b: DeviceView<'_, T>,
        mut c: DeviceViewMut<'_, C>,
    ) -> Result<(), Error> {
        let mma_sync = self.mixed_options(types)?;
        self.check_device_call()?;
        let Some((dims, device, stream)) = self.device_problem(&a, &b, &c)? else { return Ok(()) };
        let stage = Self::mixed_stage(types, &device, mma_sync)?;
        self.enqueue_mixed(&device, &stream, stage, types, &dims, (&a.data, &b.data, &mut c.data), (1, [0; 3]))
    }

    /// [`Gemm::run_batched_device`] (`same_shape`) and
    /// [`Gemm::run_grouped_device`] for the mixed-precision products: every
    /// problem validated first (shapes and storage, devices, C apart from
    /// its A and B and from the other problems' C), then on stage 9 one
    /// grouped launch for the problems that change C (one per layout their
    /// operands are read in: one for a uniform batch), on stage 8 one
    /// launch per problem, on the call's stream.
    pub(crate) fn run_mixed_list<T: Scalar, C: Scalar>(
        &self,
        types: WgmmaTypes,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        c: &mut [DeviceViewMut<'_, C>],
        same_shape: bool,
    ) -> Result<(), Error> {
        let mma_sync = self.mixed_options(types)?;
        self.check_device_call()?;
        if same_shape {
            self.shape_varies(a, b, c)?;
        }
        let Some((device, todo)) = self.list_problems(a, b, c, |_, _| Ok(()))? else { return Ok(()) };
        let stream = self.stream_on(&device)?;
        if todo.is_empty() {
            return Ok(());
        }
        let stage = Self::mixed_stage(types, &device, mma_sync)?;
        if stage == MixedStage::Warpgroup {
            return self.enqueue_warpgroup_list(&device, &stream, types, &todo, (a, b, c));
        }
        for (i, dims) in todo {
            let operands = (&a[i].data, &b[i].data, &mut c[i].data);
            self.enqueue_mixed(&device, &stream, stage, types, &dims, operands, (1, [0; 3]))
                .map_err(|e| Error::Problem { index: i, source: Box::new(e) })?;
        }
        Ok(())
    }

    /// Enqueues the problems `todo` (index, validated dims in user form) of
    /// a list batch on stage 9 as grouped launches: one tile for all (the
    /// planner's choice for the average product of the batch), each
    /// problem's operands made ready as for a single product, the problems
    /// whose operands the kernel reads in the same layouts in one launch
    /// whose blocks walk the problems' block tiles one after the other. A
    /// batch's products are not split along k: each gives the bits of a
    /// single run of it that takes no split (the planner splits only
    /// products with few block tiles and at least 8 k-tiles).
    fn enqueue_warpgroup_list<T: Scalar, C: Scalar>(
        &self,
        device: &Arc<Device>,
        stream: &Arc<CudaStream>,
        types: WgmmaTypes,
        todo: &[(usize, GemmDims)],
        (a, b, c): ListOperands<'_, '_, '_, '_, T, C>,
    ) -> Result<(), Error> {
        // Each problem in the kernel form its kernel runs, A and B swapped
        // where that form is the transposed product.
        let forms: Vec<(usize, WarpgroupRoute, bool, bool)> = todo
            .iter()
            .map(|&(i, dims)| {
                let (route, swapped, reads_ab) = warpgroup_form(types, &dims, self.alpha);
                (i, route, swapped, reads_ab)
            })
            .collect();
        let count = forms.len().max(1);
        let rows: usize = forms.iter().map(|f| f.1.dims.m).sum();
        let n = forms.iter().map(|f| f.1.dims.n).max().unwrap_or(0);
        let k = forms.iter().filter(|f| f.3).map(|f| f.1.dims.k).max().unwrap_or(0);
        let kernel = warpgroup_plan(types, rows.div_ceil(count), n, k, count, device.sm_count()).kernel;
        let tile = kernel.tile;
        let mut copies = Vec::new();
        // Per layout index of the kernel: the problems' table and maps.
        let mut launches: Vec<(usize, Vec<GroupProblem>, Vec<u8>)> = Vec::new();
        let mut any_layout = Vec::new();
        for &(i, route, swapped, reads_ab) in &forms {
            let wrap = |e: Error| Error::Problem { index: i, source: Box::new(e) };
            let (ka, kb) = if swapped { (&b[i].data, &a[i].data) } else { (&a[i].data, &b[i].data) };
            let c_address = c[i].data.device_ptr(stream).0;
            let operands = ((ka, (1, 0)), (kb, (1, 0)));
            let ready = ready_warpgroup::<T, C>(
                device,
                stream,
                types,
                tile,
                (&route, reads_ab),
                operands,
                (c_address, 1, 0, 1),
                &mut copies,
            )
            .map_err(wrap)?;
            let kd = route.dims;
            let problem = GroupProblem {
                m: kd.m as u32,
                n: kd.n as u32,
                k: if reads_ab { kd.k as u32 } else { 0 },
                first_job: 0,
                ldc: kd.ldc as u32,
                c_store: ready.c_store,
                c: c_address,
            };
            if !reads_ab && !types.transposes() {
                // A and B not read: any layout's kernel.
                any_layout.push((problem, ready.maps));
                continue;
            }
            let index = ready.layouts.index();
            let at = match launches.iter().position(|l| l.0 == index) {
                Some(at) => at,
                None => {
                    launches.push((index, Vec::new(), Vec::new()));
                    launches.len() - 1
                }
            };
            launches[at].1.push(problem);
            launches[at].2.extend_from_slice(&ready.maps);
        }
        if !any_layout.is_empty() {
            if launches.is_empty() {
                let nt = KernelLayouts { a: Layout::RowMajor, b: Layout::ColMajor }.index();
                launches.push((nt, Vec::new(), Vec::new()));
            }
            for (problem, maps) in any_layout {
                launches[0].1.push(problem);
                launches[0].2.extend_from_slice(&maps);
            }
        }
        let (alpha, beta) = scalars(types, self.alpha, self.beta);
        for (index, mut problems, maps) in launches {
            // The block tiles of each problem, one after the other.
            let mut jobs = 0u64;
            for p in problems.iter_mut() {
                p.first_job = jobs as u32;
                jobs += tile.tiles(p.m, p.n, 1);
                if jobs > u32::MAX as u64 {
                    return Err(Error::Unsupported {
                        product: product_name(types),
                        why: format!("a batch of more than 2^32 - 1 block tiles of {}x{}", tile.bm, tile.bn),
                    });
                }
            }
            let problem_count = problems.len() as u32;
            problems.push(GroupProblem { first_job: jobs as u32, ..GroupProblem::default() });
            let table: Vec<u32> = problems.iter().flat_map(group_words).collect();
            let table = stream.clone_htod(&table).during("cuMemcpyHtoDAsync")?;
            let maps = stream.clone_htod(&maps).during("cuMemcpyHtoDAsync")?;
            let name = kernel.names[index].expect("a kernel for every layout the operands are brought to");
            let func = device.warpgroup_function(name)?;
            // Persistent blocks, as for one product of `jobs` block tiles.
            let [blocks, _, _] = tile.grid(tile.bm, tile.bn, jobs as u32, device.sm_count());
            let cfg = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (tile.threads_per_block(), 1, 1),
                shared_mem_bytes: tile.smem_bytes(),
            };
            let (zero, wide_zero) = (0u32, 0u64);
            let mut builder = stream.launch_builder(&func);
            builder.arg(&zero).arg(&zero).arg(&zero).arg(&alpha).arg(&beta).arg(&maps).arg(&wide_zero).arg(&zero);
            builder.arg(&wide_zero).arg(&zero).arg(&zero).arg(&problem_count).arg(&zero).arg(&zero).arg(&table);
            // SAFETY: the arguments match the entry point's signature
            // (gemm-kernels/src/warpgroup_entry_points.rs) for a grouped
            // launch: `problem_count` products in the table (plus its end
            // marker), each with its three tensor maps at 384 bytes apart in
            // `maps`, made for this kernel's tile and layouts by
            // `ready_warpgroup` from validated operands that live (and the
            // copies, freed stream-ordered) until the work queued on
            // `stream` is done; each C (m x n, ldc; n x m when transposed)
            // validated against its buffer and apart from the others.
            unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
        }
        drop(copies);
        Ok(())
    }

    /// [`Gemm::run_strided`] for the mixed-precision products: uploads the
    /// batch extents of A, B and C, enqueues one launch, writes C's extent
    /// back (its padding as it was) and waits. A batch whose extents exceed
    /// 90% of the device's free memory runs product by product.
    pub(crate) fn run_mixed_strided_host<T: Scalar, C: Scalar>(
        &self,
        types: WgmmaTypes,
        a: Strided<MatRef<'_, T>>,
        b: Strided<MatRef<'_, T>>,
        mut c: Strided<MatMut<'_, C>>,
    ) -> Result<(), Error> {
        let mma_sync = self.mixed_options(types)?;
        let (dims, count) = self.strided_problem(
            (a.first.dims(), a.count, a.stride, a.first.as_slice().len()),
            (b.first.dims(), b.count, b.stride, b.first.as_slice().len()),
            (c.first.dims(), c.count, c.stride, c.first.storage_len()),
        )?;
        if count == 0 || dims.is_empty() || self.leaves_c_unchanged(&dims) {
            return Ok(());
        }
        let device = match self.device_option() {
            Some(d) => d.clone(),
            None => default_device()?,
        };
        let stage = Self::mixed_stage(types, &device, mma_sync)?;
        let stream = self.stream_on(&device)?;
        let extent = |d: &MatrixDims, stride: usize| batch_len(d, count, stride).unwrap_or(0);
        let (la, lb, lc) =
            (extent(&a.first.dims(), a.stride), extent(&b.first.dims(), b.stride), extent(&c.first.dims(), c.stride));
        device.context().bind_to_thread().during("cuCtxSetCurrent")?;
        let budget = match self.memory_budget {
            Some(x) => x,
            None => cudarc::driver::result::mem_get_info().map(|(free, _)| free / 10 * 9).unwrap_or(1 << 30),
        };
        if (la + lb) * size_of::<T>() + lc * size_of::<C>() > budget {
            for i in 0..count {
                let ci = c.first.rb_at(i * c.stride);
                self.run_mixed_host(types, a.matrix(i), b.matrix(i), ci)?;
            }
            return Ok(());
        }
        let upload = |s: &[T]| crate::device::memory::clone_htod(&stream, s);
        let (da, db) = (upload(&a.first.as_slice()[..la])?, upload(&b.first.as_slice()[..lb])?);
        // The matrices' elements only, both ways (up only when beta reads
        // them): the gaps between matrices and the padding are neither read
        // nor written.
        let (c_dims, c_stride) = (c.first.dims(), c.stride);
        let host = c.first.storage_mut()[..lc].as_mut_ptr();
        // SAFETY: every element of each C is uploaded below when beta != 0,
        // and otherwise written by the product before it is read back.
        let mut dc = unsafe { alloc_uninit::<C>(&stream, lc) }?;
        let dev = dc.device_ptr_mut(&stream).0;
        if self.beta != 0.0 {
            // SAFETY: the batch (validated shapes, `count` matrices `c_stride`
            // apart) lies in C's storage; the device buffer has the same
            // layout and length; synchronized before return.
            unsafe { copy_elements(&stream, c_dims, (count, c_stride), host, dev, true) }?;
        }
        let operands = (&da.slice(..), &db.slice(..), &mut dc.slice_mut(..));
        self.enqueue_mixed(&device, &stream, stage, types, &dims, operands, (count, [a.stride, b.stride, c.stride]))?;
        // SAFETY: as above; C is exclusively borrowed until the synchronize.
        unsafe { copy_elements(&stream, c_dims, (count, c_stride), host, dev, false) }?;
        stream.synchronize().during("cuStreamSynchronize")
    }

    /// [`Gemm::run_strided_device`] for the mixed-precision products.
    pub(crate) fn run_mixed_strided_device<T: Scalar, C: Scalar>(
        &self,
        types: WgmmaTypes,
        a: Strided<DeviceView<'_, T>>,
        b: Strided<DeviceView<'_, T>>,
        mut c: Strided<DeviceViewMut<'_, C>>,
    ) -> Result<(), Error> {
        let mma_sync = self.mixed_options(types)?;
        self.check_device_call()?;
        let Some((dims, count, device, stream)) = self.strided_device_problem(&a, &b, &c)? else { return Ok(()) };
        let stage = Self::mixed_stage(types, &device, mma_sync)?;
        let operands = (&a.first.data, &b.first.data, &mut c.first.data);
        self.enqueue_mixed(&device, &stream, stage, types, &dims, operands, (count, [a.stride, b.stride, c.stride]))
    }

    /// Enqueues the products of the validated problem `dims` (user form) on
    /// `stream` with the kernels of `stage`: `batch` = (count, element
    /// strides of A, B, C), (1, [0; 3]) for one product.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_mixed<T: Scalar, C: Scalar>(
        &self,
        device: &Arc<Device>,
        stream: &Arc<CudaStream>,
        stage: MixedStage,
        types: WgmmaTypes,
        dims: &GemmDims,
        operands: (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, C>),
        batch: (usize, [usize; 3]),
    ) -> Result<(), Error> {
        if batch.0 > u32::MAX as usize {
            return Err(Error::Unsupported {
                product: product_name(types),
                why: format!("a batch of {} products: at most 2^32 - 1 in one launch", batch.0),
            });
        }
        match stage {
            MixedStage::Warpgroup => self.enqueue_warpgroup(device, stream, types, dims, operands, batch),
            MixedStage::MmaSync => self.enqueue_mma_sync(device, stream, types, dims, operands, batch),
        }
    }

    /// Enqueues one product of the validated problem `dims` (user form) on
    /// `stream` with stage 8's `mma.sync` kernels (`s08_tensor_core_mixed`).
    fn enqueue_mma_sync<T: Scalar, C: Scalar>(
        &self,
        device: &Arc<Device>,
        stream: &Arc<CudaStream>,
        types: WgmmaTypes,
        dims: &GemmDims,
        (a, b, c): (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, C>),
        (count, [stride_a, stride_b, stride_c]): (usize, [usize; 3]),
    ) -> Result<(), Error> {
        let (kd, swapped) = dims.kernel_form();
        let (ka, kb) = if swapped { (b, a) } else { (a, b) };
        let (sa, sb) = if swapped { (stride_b, stride_a) } else { (stride_a, stride_b) };
        // An operand with stride 0 is one matrix for every product.
        let batch_of = |stride: usize| if stride == 0 { (1, 0) } else { (count, stride) };
        let reads_ab = self.alpha != 0.0 && kd.k > 0;
        if [kd.m, kd.n, kd.k, kd.lda, kd.ldb, kd.ldc].iter().any(|&d| d > i32::MAX as usize) {
            return Err(Error::Unsupported {
                product: product_name(types),
                why: format!(
                    "{}x{}x{} (lda {}, ldb {}, ldc {}): the kernels' sizes are 32-bit, so each must be below 2^31",
                    kd.m, kd.n, kd.k, kd.lda, kd.ldb, kd.ldc
                ),
            });
        }
        let kernel = mma_kernel(types, kd.m, kd.n, device.sm_count(), device.limits().max_smem_per_block);
        let tile = kernel.tile;
        if tile.tiles(kd.m as u32, kd.n as u32) > i32::MAX as u64 {
            return Err(Error::Unsupported {
                product: product_name(types),
                why: format!("{}x{} needs more than 2^31 block tiles", kd.m, kd.n),
            });
        }
        let elem = types.input_bytes() as usize;
        let mut copies = Vec::new();
        // What the kernel reads: the operands' own layouts, or K-major
        // copies where ldmatrix cannot transpose (tf32, i8).
        let (mut layouts, mut ptrs, mut lds) = (KernelLayouts { a: kd.a_layout, b: kd.b_layout }, [0u64; 2], [0u32; 2]);
        let mut strides = [0u64; 3];
        if reads_ab {
            let a_k_major = kd.a_layout == Layout::RowMajor;
            let b_k_major = kd.b_layout == Layout::ColMajor;
            let line = |k_major: bool, other: usize| if k_major { (kd.k, other) } else { (other, kd.k) };
            let ((la, na), (lb, nb)) = (line(a_k_major, kd.m), line(b_k_major, kd.n));
            let ((ca, sa), (cb, sb)) = (batch_of(sa), batch_of(sb));
            let a_op = TmaOperand { elem, line: la, lines: na, ld: kd.lda, count: ca, stride: sa };
            let b_op = TmaOperand { elem, line: lb, lines: nb, ld: kd.ldb, count: cb, stride: sb };
            for (i, (op, src, k_major)) in [(a_op, ka, a_k_major), (b_op, kb, b_k_major)].into_iter().enumerate() {
                let (address, op, transposed) = prepare_operand(
                    device,
                    stream,
                    MixedStage::MmaSync,
                    types,
                    op,
                    (k_major, false),
                    src,
                    &mut copies,
                )?;
                if transposed {
                    if i == 0 {
                        layouts.a = Layout::RowMajor;
                    } else {
                        layouts.b = Layout::ColMajor;
                    }
                }
                if op.ld > i32::MAX as usize {
                    return Err(Error::Unsupported {
                        product: product_name(types),
                        why: format!("a copy's leading dimension {} is not below 2^31", op.ld),
                    });
                }
                (ptrs[i], lds[i], strides[i]) =
                    (address, op.ld as u32, if op.count > 1 { op.stride as u64 } else { 0 });
            }
        }
        if !types.transposes() || !reads_ab {
            // K-major operands (tf32, i8: the `nt` module alone), or none read.
            layouts = KernelLayouts { a: Layout::RowMajor, b: Layout::ColMajor };
        }
        let func = device.function(kernel.name, layouts)?;
        let grid = tile.grid(kd.m as u32, kd.n as u32, count as u32);
        let cfg = LaunchConfig {
            grid_dim: (grid[0], grid[1], grid[2]),
            block_dim: (tile.threads_per_block(), 1, 1),
            shared_mem_bytes: tile.smem_bytes(),
        };
        let (m, n, k) = (kd.m as u32, kd.n as u32, if reads_ab { kd.k as u32 } else { 0 });
        let (alpha, beta) = scalars(types, self.alpha, self.beta);
        strides[2] = stride_c as u64;
        let (ldc, count) = (kd.ldc as u32, count as u32);
        let mut builder = stream.launch_builder(&func);
        builder.arg(&m).arg(&n).arg(&k).arg(&alpha).arg(&beta);
        builder.arg(&ptrs[0]).arg(&lds[0]).arg(&ptrs[1]).arg(&lds[1]).arg(c).arg(&ldc);
        builder.arg(&strides[0]).arg(&strides[1]).arg(&strides[2]).arg(&count);
        // SAFETY: the arguments match the entry point's signature
        // (gemm-kernels/src/entry_points.rs, `mixed_entry_points`); A and B
        // (or their copies, which live until the work queued on `stream` is
        // done) hold the validated shapes with rows on 16 bytes, in the
        // layouts of the module the function comes from; with k = 0 they are
        // not read; C (m x n, ldc, row-major in kernel form) was validated
        // against its buffer; the geometry is the tile's.
        unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
        drop(copies);
        Ok(())
    }

    /// Enqueues one product of the validated problem `dims` (user form) on
    /// `stream`.
    fn enqueue_warpgroup<T: Scalar, C: Scalar>(
        &self,
        device: &Arc<Device>,
        stream: &Arc<CudaStream>,
        types: WgmmaTypes,
        dims: &GemmDims,
        (a, b, c): (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, C>),
        (batch, [stride_a, stride_b, stride_c]): (usize, [usize; 3]),
    ) -> Result<(), Error> {
        let (route, swapped, reads_ab) = warpgroup_form(types, dims, self.alpha);
        let (kd, transposed_c) = (route.dims, route.transposed_c);
        let (ka, kb) = if swapped { (b, a) } else { (a, b) };
        let (sa, sb) = if swapped { (stride_b, stride_a) } else { (stride_a, stride_b) };
        // An operand with stride 0 is one matrix for every product.
        let batch_of = |stride: usize| if stride == 0 { (1, 0) } else { (batch, stride) };
        let plan = warpgroup_plan(types, kd.m, kd.n, if reads_ab { kd.k } else { 0 }, batch, device.sm_count());
        let (kernel, tile) = (plan.kernel, plan.kernel.tile);
        // Split-K where the block tiles leave most SMs idle: slices of k into
        // a workspace (the family with f32 or i32 C), then a reduction.
        let (slices, k_slice) = self.warpgroup_split.unwrap_or(plan.split);
        let kernel = if slices > 1 {
            WARPGROUP_KERNELS
                .iter()
                .find(|f| f.types == types.accumulating() && f.tile == tile)
                .expect("every tile has an f32 (i32) C family")
        } else {
            kernel
        };
        let count = if slices > 1 { slices } else { batch as u32 };
        if tile.tiles(kd.m as u32, kd.n as u32, count) > u32::MAX as u64 {
            return Err(Error::Unsupported {
                product: product_name(types),
                why: format!("{}x{} needs more than 2^32 block tiles", kd.m, kd.n),
            });
        }
        let grid = tile.grid(kd.m as u32, kd.n as u32, count, device.sm_count());
        let mut copies = Vec::new();
        let c_address = c.device_ptr(stream).0;
        let operands = ((ka, batch_of(sa)), (kb, batch_of(sb)));
        let ready = ready_warpgroup::<T, C>(
            device,
            stream,
            types,
            tile,
            (&route, reads_ab),
            operands,
            (c_address, count as usize, stride_c, slices),
            &mut copies,
        )?;
        let (maps, c_store) = (ready.maps, ready.c_store);
        let [batch_a, batch_b] = ready.batch;
        let (mut a_layout, mut b_layout) = (ready.layouts.a, ready.layouts.b);
        let maps = stream.clone_htod(&maps[..]).during("cuMemcpyHtoDAsync")?;
        if !reads_ab && !types.transposes() {
            // With alpha = 0 or k = 0 the maps are not read: any layout's kernel.
            (a_layout, b_layout) = (Layout::RowMajor, Layout::ColMajor);
        }
        let name = kernel.names[KernelLayouts { a: a_layout, b: b_layout }.index()]
            .expect("a kernel for every layout the operands are brought to");
        let func = device.warpgroup_function(name)?;
        let cfg = LaunchConfig {
            grid_dim: (grid[0], grid[1], grid[2]),
            block_dim: (tile.threads_per_block(), 1, 1),
            shared_mem_bytes: tile.smem_bytes(),
        };
        let (m, n, k) = (kd.m as u32, kd.n as u32, if reads_ab { kd.k as u32 } else { 0 });
        // alpha and beta in the accumulation's type: i32 (checked integers)
        // for the i8 product, f32 otherwise; 4 bytes either way.
        let (alpha, beta) = scalars(types, self.alpha, self.beta);
        if slices == 1 {
            let (ldc, stride_c) = (kd.ldc as u32, stride_c as u64);
            let mut builder = stream.launch_builder(&func);
            builder.arg(&m).arg(&n).arg(&k).arg(&alpha).arg(&beta).arg(&maps).arg(c).arg(&ldc);
            builder
                .arg(&stride_c)
                .arg(&batch_a)
                .arg(&batch_b)
                .arg(&count)
                .arg(&c_store)
                .arg(&k_slice)
                .arg(&NOT_GROUPED);
            // SAFETY: the arguments match the entry point's signature
            // (gemm-kernels/src/warpgroup_entry_points.rs); the tensor maps
            // describe buffers that live until the work queued on `stream`
            // is done (the copies are freed stream-ordered); C (m x n, ldc,
            // row-major in kernel form; n x m with `C_STORE_TRANSPOSED`)
            // was validated against its buffer; the geometry is the tile's.
            unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
            drop(copies);
            return Ok(());
        }
        // Split-K: slice z of k into workspace matrix z (m x n, ld n; alpha
        // 1, beta 0; transposed: n x m, ld m), then C <- alpha * sum + beta
        // * C over C's rows and columns ((n, m) when transposed).
        let mn = kd.m * kd.n;
        // SAFETY: every element of each slice's m x n is written by the
        // product before the reduction reads it (stream order).
        let mut w = unsafe { alloc_uninit::<f32>(stream, slices as usize * mn) }?;
        let one = if types == WgmmaTypes::S8 { 1i32.to_ne_bytes() } else { 1f32.to_ne_bytes() };
        let (one, zero) = (u32::from_ne_bytes(one), 0u32);
        let (ldw, stride_w) = (if transposed_c { m } else { n }, mn as u64);
        let mut builder = stream.launch_builder(&func);
        builder.arg(&m).arg(&n).arg(&k).arg(&one).arg(&zero).arg(&maps).arg(&mut w).arg(&ldw);
        builder.arg(&stride_w).arg(&batch_a).arg(&batch_b).arg(&count).arg(&c_store).arg(&k_slice).arg(&NOT_GROUPED);
        // SAFETY: as above, with the workspace as C: `slices` m x n matrices
        // of 4-byte elements, ld n, m n apart (its length).
        unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
        let reduce = device.warpgroup_function(match types {
            WgmmaTypes::F16 => "warpgroup_reduce_f16",
            WgmmaTypes::Bf16 => "warpgroup_reduce_bf16",
            WgmmaTypes::S8 => "warpgroup_reduce_i32",
            _ => "warpgroup_reduce_f32",
        })?;
        const REDUCE_THREADS: u32 = 256;
        let blocks = mn.div_ceil(REDUCE_THREADS as usize).min(device.sm_count() as usize * 8) as u32;
        let rcfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (REDUCE_THREADS, 1, 1), shared_mem_bytes: 0 };
        let ldc = kd.ldc as u32;
        let (rows, cols) = if transposed_c { (n, m) } else { (m, n) };
        let mut builder = stream.launch_builder(&reduce);
        builder.arg(&rows).arg(&cols).arg(&slices).arg(&w).arg(&alpha).arg(&beta).arg(c).arg(&ldc);
        // SAFETY: `warpgroup_reduce_*(m, n, slices, w, alpha, beta, c,
        // ldc)`: the workspace holds `slices` m x n results, C (validated)
        // m x n with ldc; they do not overlap (a fresh allocation).
        unsafe { builder.launch(rcfg) }.during("cuLaunchKernel")?;
        drop((copies, w));
        Ok(())
    }
}

/// The `group` argument of a launch that is not grouped (a null table).
const NOT_GROUPED: u64 = 0;

/// A grouped launch's table entry as the kernel reads it: 8 words in
/// [`GroupProblem`]'s `repr(C)` order (C's address low word first, little
/// endian as the GPU).
fn group_words(p: &GroupProblem) -> [u32; 8] {
    [p.m, p.n, p.k, p.first_job, p.ldc, p.c_store, p.c as u32, (p.c >> 32) as u32]
}

/// One product of stage 9 made ready for a launch of `tile`: its tensor maps
/// (A's, B's and, for TMA stores, C's), the layouts the kernel reads (the
/// operands' own, or K-major copies), whether A and B have a matrix per
/// product, and how the epilogue stores C.
struct ReadyProduct {
    maps: [u8; GROUP_MAPS_BYTES],
    layouts: KernelLayouts,
    batch: [u32; 2],
    c_store: u32,
}

/// Makes one product of the validated kernel form `route` ready for a
/// launch of `tile` (see [`ReadyProduct`]): A and B (each with its batch
/// count and element stride), realigned or transposed into `copies` where
/// TMA or wgmma cannot read them in place, and C at `c_address` (`count`
/// matrices `stride_c` apart; `slices` > 1: split-K's workspace, stored by
/// the threads).
#[allow(clippy::too_many_arguments)]
fn ready_warpgroup<T: Scalar, C: Scalar>(
    device: &Device,
    stream: &Arc<CudaStream>,
    types: WgmmaTypes,
    tile: WgmmaTile,
    (route, reads_ab): (&WarpgroupRoute, bool),
    ((ka, (ca, sa)), (kb, (cb, sb))): OperandPair<'_, '_, T>,
    (c_address, count, stride_c, slices): (u64, usize, usize, u32),
    copies: &mut Vec<CudaSlice<T>>,
) -> Result<ReadyProduct, Error> {
    let (kd, transposed_c) = (route.dims, route.transposed_c);
    if [kd.m, kd.n, kd.k].iter().any(|&d| d > i32::MAX as usize) {
        return Err(Error::Unsupported {
            product: product_name(types),
            why: format!("{}x{}x{}: TMA coordinates are i32, so m, n and k must be below 2^31", kd.m, kd.n, kd.k),
        });
    }
    let data_type = match types {
        WgmmaTypes::F16 | WgmmaTypes::F16F32 => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        WgmmaTypes::Bf16 | WgmmaTypes::Bf16F32 => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        // The bits as they are: wgmma reads the TF32 part of each f32.
        WgmmaTypes::Tf32 => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        WgmmaTypes::S8 => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
    };
    let elem = types.input_bytes() as usize;
    // The maps: A (k, m) K-major or (m, k) M-major; B (k, n) or (n, k).
    let mut maps = [0u8; GROUP_MAPS_BYTES];
    let (mut batch_a, mut batch_b) = (0u32, 0u32);
    // The layouts the kernel reads: the operands' own, or K-major copies
    // where wgmma cannot transpose (tf32, i8).
    let (mut a_layout, mut b_layout) = (kd.a_layout, kd.b_layout);
    if reads_ab {
        let a_k_major = kd.a_layout == Layout::RowMajor;
        let b_k_major = kd.b_layout == Layout::ColMajor;
        let a_op = if a_k_major {
            TmaOperand { elem, line: kd.k, lines: kd.m, ld: kd.lda, count: ca, stride: sa }
        } else {
            TmaOperand { elem, line: kd.m, lines: kd.k, ld: kd.lda, count: ca, stride: sa }
        };
        let b_op = if b_k_major {
            TmaOperand { elem, line: kd.k, lines: kd.n, ld: kd.ldb, count: cb, stride: sb }
        } else {
            TmaOperand { elem, line: kd.n, lines: kd.k, ld: kd.ldb, count: cb, stride: sb }
        };
        (batch_a, batch_b) = ((ca > 1) as u32, (cb > 1) as u32);
        let k_major = [a_k_major, b_k_major];
        let rows = [tile.bm, tile.bn];
        let realign_wanted = realign_wanted(types, &kd, tile);
        for (i, (op, src)) in [(a_op, ka), (b_op, kb)].into_iter().enumerate() {
            let realign = realign_wanted[i];
            // An MN-major tf32 A is read in place, through registers.
            let in_place = k_major[i] || (i == 0 && types.register_a());
            let (address, op, transpose) =
                prepare_operand(device, stream, MixedStage::Warpgroup, types, op, (in_place, realign), src, copies)?;
            // K-major boxes: BK (128 bytes) by BM or BN rows; MN-major:
            // BK x BK (128 bytes along m or n by BK rows along k).
            let bk = ROW_BYTES as usize / elem;
            let box_lines = if k_major[i] || transpose { rows[i] } else { bk as u32 };
            if transpose {
                if i == 0 {
                    a_layout = Layout::RowMajor;
                } else {
                    b_layout = Layout::ColMajor;
                }
            }
            maps[128 * i..128 * (i + 1)].copy_from_slice(&tensor_map(data_type, address, op, box_lines)?);
        }
    }
    // C's map, for the epilogue's TMA stores: when C's rows and
    // matrices start on 16 bytes (TMA's alignment) and its rows end on
    // 16 bytes; else, and for split-K's workspace, each thread stores
    // its own elements. A TMA store writes whole 16-byte chunks: a row
    // whose bytes (n elements) are not a multiple of 16 would have the
    // rest of its last chunk overwritten, which is the padding between
    // C's rows (the caller's data; seen on an H100 with a column-major
    // f32 C of 129 rows and ld 132: elements 129..131 of each column
    // changed).
    let c_elem = size_of::<C>();
    let tma_c = slices == 1
        && !transposed_c
        && kd.m > 0
        && kd.n > 0
        && c_address % 16 == 0
        && (kd.ldc * c_elem) % 16 == 0
        && (kd.n * c_elem) % 16 == 0
        && (count == 1 || ((stride_c * c_elem) % 16 == 0 && stride_c >= kd.m * kd.ldc));
    if tma_c {
        let c_type = match types.output_bytes() {
            2 => data_type,
            _ if types == WgmmaTypes::S8 => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_INT32,
            _ => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        };
        let c_op = TmaOperand { elem: c_elem, line: kd.n, lines: kd.m, ld: kd.ldc, count, stride: stride_c };
        maps[256..].copy_from_slice(&tensor_map(c_type, c_address, c_op, WARPGROUP_M)?);
    }
    let c_store = if transposed_c {
        C_STORE_TRANSPOSED
    } else if tma_c {
        C_STORE_TMA
    } else {
        C_STORE_THREADS
    };
    Ok(ReadyProduct { maps, layouts: KernelLayouts { a: a_layout, b: b_layout }, batch: [batch_a, batch_b], c_store })
}

/// A and B of one product as [`ready_warpgroup`] takes them: each view with
/// its batch count and element stride.
/// A list batch's operands: A's, B's and C's views.
type ListOperands<'a, 'b, 'c, 'd, T, C> =
    (&'a [DeviceView<'b, T>], &'a [DeviceView<'c, T>], &'a mut [DeviceViewMut<'d, C>]);

type OperandPair<'a, 'b, T> = ((&'a CudaView<'b, T>, (usize, usize)), (&'a CudaView<'b, T>, (usize, usize)));

/// `C = op(A) * op(B)` with f16 operands, f32 accumulation and an f16 C, on
/// the default device: the BLAS-style `hgemm` (alpha = 1, beta = 0). Runs
/// stage 9 (Hopper warpgroup MMA) on compute capability 9.0 (H100, H200),
/// stage 8's `mma.sync` kernels on 8.x (A100, RTX 30xx/40xx, L4...). For an
/// f32 C, bf16, alpha, beta or op flags, use [`Gemm::run`].
///
/// ```no_run
/// use gemm::half::f16;
/// use gemm::Matrix;
/// # fn main() -> Result<(), gemm::Error> {
/// let a = Matrix::<f16>::from_fn(256, 512, |i, j| f16::from_f32(((i + j) % 5) as f32));
/// let b = Matrix::<f16>::from_fn(512, 128, |i, j| f16::from_f32(((i * j) % 3) as f32));
/// let mut c = Matrix::<f16>::zeros(256, 128);
/// gemm::hgemm(&a, &b, &mut c)?;
/// let mut c32 = Matrix::<f32>::zeros(256, 128); // f32 output
/// gemm::Gemm::new().run(&a, &b, &mut c32)?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::Shape`]; [`Error::Unsupported`] on a GPU older than compute
/// capability 8.0; [`Error::NoDriver`], [`Error::NoDevice`],
/// [`Error::OutOfMemory`], [`Error::Driver`]. C is untouched on error.
///
/// # Source
/// PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
/// Instructions" and "Tensor Copy Instructions".
pub fn hgemm<'a, 'b, 'c>(
    a: impl Into<MatRef<'a, f16>>,
    b: impl Into<MatRef<'b, f16>>,
    c: impl Into<MatMut<'c, f16>>,
) -> Result<(), Error> {
    Gemm::new().run(a, b, c)
}

/// `C = op(A) * op(B)` with i8 operands and an i32 C, accumulated exactly in
/// i32 (wrapping on overflow, as cuBLAS's `CUBLAS_COMPUTE_32I`), on the
/// default device (alpha = 1, beta = 0). Runs stage 9 (Hopper warpgroup
/// MMA) on compute capability 9.0, stage 8's `mma.sync` kernels on 8.x. For integer alpha and
/// beta, or op flags, use [`Gemm::run`].
///
/// ```no_run
/// use gemm::Matrix;
/// # fn main() -> Result<(), gemm::Error> {
/// let a = Matrix::<i8>::from_fn(256, 512, |i, j| ((i + j) % 7) as i8 - 3);
/// let b = Matrix::<i8>::from_fn(512, 128, |i, j| ((i * j) % 5) as i8 - 2);
/// let mut c = Matrix::<i32>::zeros(256, 128);
/// gemm::igemm(&a, &b, &mut c)?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// As [`hgemm`].
///
/// # Source
/// PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
/// Instructions" (`wgmma.mma_async` with `.s8` operands and `.s32`
/// accumulators).
pub fn igemm<'a, 'b, 'c>(
    a: impl Into<MatRef<'a, i8>>,
    b: impl Into<MatRef<'b, i8>>,
    c: impl Into<MatMut<'c, i32>>,
) -> Result<(), Error> {
    Gemm::new().run(a, b, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_copies_are_tma_aligned() {
        let op = TmaOperand { elem: 2, line: 1001, lines: 7, ld: 1003, count: 1, stride: 0 };
        assert!(!op.aligned(0));
        let p = op.padded_to(16);
        assert_eq!((p.ld, p.line, p.lines), (1008, 1001, 7));
        assert!(p.aligned(256));
        assert!(!p.aligned(8));
        assert_eq!(op.len(), 7 * 1003);
        assert!(!op.whole_chunks() && TmaOperand { line: 1000, ..op }.whole_chunks());
        let bytes = TmaOperand { elem: 1, line: 33, lines: 5, ld: 40, count: 1, stride: 0 };
        assert!(!bytes.aligned(0));
        assert_eq!(bytes.padded_to(16).ld, 48);
        assert_eq!(bytes.padded_to(128).ld, 128);
        let f16 = TmaOperand { elem: 2, line: 3000, lines: 3000, ld: 3000, count: 1, stride: 0 };
        assert!(f16.aligned(256) && !f16.lines_on_128(256));
        assert!(f16.padded_to(128).lines_on_128(256) && f16.padded_to(128).ld == 3008);
        let t = TmaOperand { elem: 4, ..bytes }.transposed();
        assert_eq!((t.line, t.lines, t.ld), (5, 33, 32));
        assert!(t.aligned(0));
    }

    #[test]
    fn kernel_choice_fills_the_gpu() {
        let tile = |t, m, n, k| {
            let p = warpgroup_plan(t, m, n, k, 1, 132);
            (p.kernel.tile.bm, p.kernel.tile.bn, p.split.0)
        };
        assert_eq!(tile(WgmmaTypes::F16, 8192, 8192, 8192), (128, 256, 1));
        assert_eq!(tile(WgmmaTypes::F16, 4096, 4096, 4096), (128, 256, 1));
        // Skinny C: the narrow tiles.
        assert_eq!(tile(WgmmaTypes::F16, 65536, 32, 1024), (128, 64, 1));
        assert_eq!(tile(WgmmaTypes::F16, 16, 8192, 8192).0, 64);
        assert_eq!(tile(WgmmaTypes::F16, 8192, 16, 8192).1, 64);
        // Few tiles, long k: split.
        assert!(tile(WgmmaTypes::F16, 256, 256, 16384).2 > 1);
        // A batch is never split.
        assert_eq!(warpgroup_plan(WgmmaTypes::F16, 32, 32, 65536, 10, 132).split, (1, 0));
        for t in [
            WgmmaTypes::F16,
            WgmmaTypes::F16F32,
            WgmmaTypes::Bf16,
            WgmmaTypes::Bf16F32,
            WgmmaTypes::Tf32,
            WgmmaTypes::S8,
        ] {
            let k = warpgroup_plan(t, 1, 1, 1, 1, 132).kernel;
            assert_eq!(k.types, t);
            // Every kernel has the K-major entry point; the others only when
            // the types transpose, or `tt` (A MN-major) when A may come
            // from registers.
            assert!(k.names[1].is_some());
            let layouts = if t.transposes() { 4 } else { 1 + t.register_a() as usize };
            assert_eq!(k.names.iter().filter(|n| n.is_some()).count(), layouts);
            assert_eq!(k.names[3].is_some(), t.transposes() || t.register_a());
        }
    }
}
