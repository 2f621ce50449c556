//! Stage 9's launches (Hopper's warpgroup MMA fed by TMA, compute
//! capability 9.0) for the tensor-core types (f16, bf16, TF32, i8): the
//! TMA tensor maps of A, B and C (`cuTensorMapEncodeTiled`); an aligned copy
//! of an operand TMA cannot read in place, a K-major copy of an MN-major i8
//! operand (or TF32 B beside an MN-major A); one product or a strided batch
//! in one launch, split-K into a workspace and its reduction, and list
//! batches as grouped launches. What to launch (kernel, tile, split, route)
//! comes planned ([`WarpgroupLaunch`]); the operation mirrors CUTLASS 3's
//! kernel layer beneath its device adapter.

use crate::device::memory::alloc_scratch;
use crate::device::registry::WarpgroupKernel;
use crate::device::Device;
use crate::element::{product_name, Scalar};
use crate::error::{DriverContext, Error};
use crate::exec::launch::{ListViews, Operands};
use crate::exec::tensor_core::{prepare_operand, scalars, Keep, TensorCoreStage, TmaOperand};
use cudarc::driver::sys as cu;
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
};
use gemm_core::shape::Layout;
use gemm_core::warpgroup::{
    Fusion, GroupProblem, WgmmaTile, WgmmaTypes, C_STORE_THREADS, C_STORE_TMA, C_STORE_TRANSPOSED, GROUP_MAPS_BYTES,
    ROW_BYTES, WARPGROUP_M,
};
use gemm_core::GemmDims;
use gemm_core::KernelLayouts;
use std::sync::Arc;

/// How stage 9 computes a product in kernel form (C row-major).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WarpgroupRoute {
    /// The kernel form the kernel runs: the product's, or its transpose.
    pub dims: GemmDims,
    /// Whether it runs the transposed product and stores C transposed.
    pub transposed_c: bool,
    /// Whether it does so because C has few rows (a token-sized product:
    /// its rows in wgmma's N).
    pub token: bool,
}

/// A stage-9 product run in two parts so that no wave of block tiles runs
/// partly empty ([`gemm_core::split_k::TailSplit`]; planned by `plan::product_plan::warpgroup_tail`): C's rows (kernel form)
/// up to `head_rows`, a multiple of BM, whole in full waves of the
/// planned kernel, then the other rows with k in `split.0` slices of
/// `split.1` k-tiles into an f32 (i32) workspace, summed in slice order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarpgroupTail {
    /// Rows of C computed whole.
    pub head_rows: u32,
    /// Slices of the other rows' k and k-tiles per slice.
    pub split: (u32, u32),
}

/// One planned stage-9 product (or strided batch of it): everything its
/// launch needs beside the operands and alpha, beta.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WarpgroupLaunch {
    /// Operand and C types.
    pub types: WgmmaTypes,
    /// The kernel form the kernel runs and whether C is stored transposed.
    pub route: WarpgroupRoute,
    /// Whether the user's A and B trade places in that form.
    pub swapped: bool,
    /// Whether A and B are read (alpha != 0 and k > 0).
    pub reads_ab: bool,
    /// The kernel family (types, tile, pipeline depth); for a split
    /// product, the tile's family with an f32 (i32) C.
    pub kernel: &'static WarpgroupKernel,
    /// Slices of k (1: not split) and k-tiles per slice.
    pub split: (u32, u32),
    /// Whether A and B are worth copying to lines on 128 bytes.
    pub realign: [bool; 2],
    /// The last wave's rows split along k (a single product): the tail's
    /// plan and its kernel (the tile's family with an f32 or i32 C).
    pub tail: Option<(WarpgroupTail, &'static WarpgroupKernel)>,
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
/// Enqueues `batch` products (count, element strides of A, B and C; a
/// stride of 0 is one matrix for all) of the planned `launch` on `stream`:
/// the operands made ready ([`ready_warpgroup`]), then one launch, or for a
/// split product the slices into a workspace and their reduction into C.
pub(crate) fn enqueue<T: Scalar, C: Scalar>(
    launch: &WarpgroupLaunch,
    device: &Arc<Device>,
    stream: &Arc<CudaStream>,
    (alpha, beta): (f64, f64),
    (a, b, c): Operands<'_, '_, '_, '_, T, C>,
    (batch, [stride_a, stride_b, stride_c]): (usize, [usize; 3]),
    fusion: Option<&Fusion>,
) -> Result<(), Error> {
    let WarpgroupLaunch { types, route, swapped, reads_ab, kernel, split, realign, tail } = *launch;
    // A fused product splits no last wave, and k only where it fuses
    // scales alone (linear in the sums; `warpgroup_fused_launch`).
    debug_assert!(fusion.is_none() || tail.is_none());
    debug_assert!(split.0 == 1 || fusion.is_none_or(|f| f.bias == 0 && f.activation == 0));
    let (kd, transposed_c) = (route.dims, route.transposed_c);
    let (ka, kb) = if swapped { (b, a) } else { (a, b) };
    let (sa, sb) = if swapped { (stride_b, stride_a) } else { (stride_a, stride_b) };
    // An operand with stride 0 is one matrix for every product.
    let batch_of = |stride: usize| if stride == 0 { (1, 0) } else { (batch, stride) };
    let tile = kernel.tile;
    // Split-K where the block tiles leave most SMs idle: slices of k into
    // a workspace (the family with f32 or i32 C), then a reduction.
    let (slices, k_slice) = split;
    let count = if slices > 1 { slices } else { batch as u32 };
    if tile.tiles(kd.m as u32, kd.n as u32, count) > u32::MAX as u64 {
        return Err(Error::Unsupported {
            product: product_name(types),
            why: format!("{}x{} needs more than 2^32 block tiles", kd.m, kd.n),
        });
    }
    let mut keep = Keep::new();
    let c_address = c.device_ptr(stream).0;
    let operands = ((ka, batch_of(sa)), (kb, batch_of(sb)));
    let ready = ready_warpgroup::<T, C>(
        device,
        stream,
        types,
        tile,
        (&route, reads_ab, realign),
        operands,
        (c_address, count as usize, stride_c, slices),
        &mut keep,
    )?;
    let (mut maps, mut c_store) = (ready.maps, ready.c_store);
    let [batch_a, batch_b] = ready.batch;
    let (mut a_layout, mut b_layout) = (ready.layouts.a, ready.layouts.b);
    let (m, n, k) = (kd.m as u32, kd.n as u32, if reads_ab { kd.k as u32 } else { 0 });
    // A transposed C and a narrow tile's are stored by threads, not TMA.
    let thread_stores = transposed_c || tile.narrow();
    // A tail split: the maps of its rows (A's from row `head_rows` on) and
    // its workspace. A split product: its workspace as C.
    let tail = match (tail, ready.a) {
        (Some((t, tail_kernel)), Some(a)) if reads_ab && batch == 1 => {
            let mut tail_maps = maps;
            tail_maps[..128].copy_from_slice(&a.rows_from(t.head_rows as usize)?);
            let (w, w_map) = workspace(stream, types, (m - t.head_rows, n, t.split.0), thread_stores)?;
            let store = slices_store(&mut tail_maps, w_map, transposed_c);
            Some((t, tail_kernel, tail_maps, w, store))
        }
        _ => None,
    };
    let w = if slices > 1 {
        let (w, w_map) = workspace(stream, types, (m, n, slices), thread_stores)?;
        c_store = slices_store(&mut maps, w_map, transposed_c);
        Some(w)
    } else {
        None
    };
    // One upload (a tail's maps after the product's, 384 bytes on: TMA's
    // 64-byte alignment kept), before the first launch: a copy between the
    // launches would hold the second back.
    let mut bytes = maps.to_vec();
    if let Some((_, _, tail_maps, _, _)) = &tail {
        bytes.extend_from_slice(tail_maps);
    }
    // A fused epilogue's description after the maps (8-byte aligned).
    let fusion_offset = bytes.len() as u64;
    if let Some(f) = fusion {
        bytes.extend_from_slice(&fusion_bytes(f));
    }
    // The same operands' maps are uploaded once (`Device::tensor_maps`).
    let uploaded = device.tensor_maps(stream, &bytes)?;
    let maps = uploaded.slice(..GROUP_MAPS_BYTES);
    let fusion_at = if fusion.is_some() { uploaded.device_ptr(stream).0 + fusion_offset } else { NO_FUSION };
    if !reads_ab {
        // With alpha = 0 or k = 0 the maps are not read: any layout's
        // kernel, `_nt`, which every family has (a narrow one reads B
        // K-major only).
        (a_layout, b_layout) = (Layout::RowMajor, Layout::ColMajor);
    }
    let layout_index = KernelLayouts { a: a_layout, b: b_layout }.index();
    // A fused epilogue takes the family's fused kernels (the planner
    // picks a family that has them: `warpgroup_fused_launch`), or its
    // `_epilogue` ones where the launch has no block scales and the fused
    // ones would stage them (`WarpgroupKernel::flavour`).
    let flavour = kernel.flavour(fusion.is_some(), fusion.is_some_and(Fusion::block_scaled));
    let name = kernel.entry(layout_index, flavour).expect("a kernel for every layout the operands are brought to");
    let func = device.warpgroup_function(name)?;
    // Persistent blocks: as many as run at once (a clustered tile's
    // clusters may fill fewer than all SMs).
    let smem_bytes = kernel.smem_bytes(flavour);
    let slots = device.warpgroup_slots(name, &func, tile, smem_bytes)?;
    let grid = tile.grid(m, n, count, slots);
    let cfg = LaunchConfig {
        grid_dim: (grid[0], grid[1], grid[2]),
        block_dim: (tile.threads_per_block(), 1, 1),
        shared_mem_bytes: smem_bytes,
    };
    // alpha and beta in the accumulation's type: i32 (checked integers)
    // for the i8 product, f32 otherwise; 4 bytes either way.
    let (alpha, beta) = scalars(types, alpha, beta);
    let ldc = kd.ldc as u32;
    if let Some((t, tail_kernel, _, mut w, tail_store)) = tail {
        // The head: C's rows up to head_rows whole, in full waves.
        let head = t.head_rows;
        let g = tile.grid(head, n, 1, slots);
        let head_cfg = LaunchConfig { grid_dim: (g[0], g[1], g[2]), ..cfg };
        let mut builder = stream.launch_builder(&func);
        builder.arg(&head).arg(&n).arg(&k).arg(&alpha).arg(&beta).arg(&maps).arg(&mut *c).arg(&ldc);
        builder.arg(&0u64).arg(&batch_a).arg(&batch_b).arg(&1u32).arg(&c_store).arg(&0u32).arg(&NOT_GROUPED);
        builder.arg(&NO_FUSION);
        // SAFETY: as for an unsplit launch below, over C's first `head`
        // rows (whole block tiles: a multiple of BM, below m).
        unsafe { builder.launch(head_cfg) }.during("cuLaunchKernel")?;
        // The tail: the other rows (A's map from row `head` on, C from
        // there), k in slices into its workspace, then summed into C.
        let tail_maps = uploaded.slice(GROUP_MAPS_BYTES..);
        let tail_name = tail_kernel.names[layout_index].expect("every family has an f32 (i32) C twin");
        let tail_func = device.warpgroup_function(tail_name)?;
        let tail_slots = device.warpgroup_slots(tail_name, &tail_func, tile, smem_bytes)?;
        let offset = if transposed_c { head as usize } else { head as usize * kd.ldc };
        let tail_m = m - head;
        let g = tile.grid(tail_m, n, t.split.0, tail_slots);
        let tail_cfg = LaunchConfig { grid_dim: (g[0], g[1], g[2]), ..cfg };
        let sliced = (&tail_func, tail_cfg, [batch_a, batch_b], tail_store, NO_FUSION);
        enqueue_slices(stream, types, sliced, (tail_m, n, k), t.split, &tail_maps, (&mut w, transposed_c))?;
        let mut tail_c = c.slice_mut(offset..);
        reduce(device, stream, types, (tail_m, n, transposed_c), (t.split.0, &w), (alpha, beta), (&mut tail_c, ldc))?;
        drop((keep, uploaded, w));
        return Ok(());
    }
    let Some(mut w) = w else {
        let stride_c = stride_c as u64;
        let mut builder = stream.launch_builder(&func);
        builder.arg(&m).arg(&n).arg(&k).arg(&alpha).arg(&beta).arg(&maps).arg(c).arg(&ldc);
        builder.arg(&stride_c).arg(&batch_a).arg(&batch_b).arg(&count).arg(&c_store).arg(&k_slice).arg(&NOT_GROUPED);
        builder.arg(&fusion_at);
        // SAFETY: the arguments match the entry point's signature
        // (gemm-kernels/src/warpgroup_entry_points.rs); the tensor maps
        // describe buffers that live until the work queued on `stream`
        // is done (the copies are freed stream-ordered); C (m x n, ldc,
        // row-major in kernel form; n x m with `C_STORE_TRANSPOSED`)
        // was validated against its buffer; the geometry is the tile's.
        unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
        drop(keep);
        return Ok(());
    };
    // The slices of a fused launch read its description (its scales).
    let sliced = (&func, cfg, [batch_a, batch_b], c_store, fusion_at);
    enqueue_slices(stream, types, sliced, (m, n, k), split, &maps, (&mut w, transposed_c))?;
    reduce(device, stream, types, (m, n, transposed_c), (slices, &w), (alpha, beta), (c, ldc))?;
    drop((keep, w, uploaded));
    Ok(())
}

/// Split-K's workspace of `slices` m x n partials (kernel form; n x m when
/// C is transposed), f32 or i32 (4 bytes), from the library's scratch pool,
/// and the tensor map the epilogue's TMA stores write it through where its
/// rows are whole 16-byte chunks (n a multiple of 4) and the threads need
/// not store it (`thread_stores`: C transposed, or a narrow tile): each
/// thread's own stores of a 128 x 256 f32 partial took about as long as its
/// 10 k-tiles of f16 multiply-adds (NVIDIA H200).
fn workspace(
    stream: &Arc<CudaStream>,
    types: WgmmaTypes,
    (m, n, slices): (u32, u32, u32),
    thread_stores: bool,
) -> Result<(CudaSlice<f32>, Option<[u8; 128]>), Error> {
    let mn = m as usize * n as usize;
    // SAFETY: every element of each slice's m x n is written by the
    // product before the reduction reads it (stream order).
    let w = unsafe { alloc_scratch::<f32>(stream, slices as usize * mn) }?;
    if thread_stores || n % 4 != 0 || mn == 0 {
        return Ok((w, None));
    }
    let data_type = if types == WgmmaTypes::S8 {
        cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_INT32
    } else {
        cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32
    };
    let (n, m) = (n as usize, m as usize);
    let op = TmaOperand { elem: 4, line: n, lines: m, ld: n, count: slices as usize, stride: m * n };
    let map = tensor_map(data_type, w.device_ptr(stream).0, op, WARPGROUP_M)?;
    Ok((w, Some(map)))
}

/// How a split launch stores its partials: by TMA through `w_map` (put in
/// `maps` as C's), else by the threads (transposed when C is).
fn slices_store(maps: &mut [u8; GROUP_MAPS_BYTES], w_map: Option<[u8; 128]>, transposed_c: bool) -> u32 {
    match w_map {
        Some(map) => {
            maps[256..384].copy_from_slice(&map);
            C_STORE_TMA
        }
        None if transposed_c => C_STORE_TRANSPOSED,
        None => C_STORE_THREADS,
    }
}

/// Split-K's first launch: slice z of k (`split`: slices, k-tiles per
/// slice) of an m x n product (kernel form) into matrix z of the workspace
/// `w` (m x n, ld n, alpha 1, beta 0; transposed: n x m, ld m), with the
/// f32 (i32) C kernel `func` at `cfg` reading the tensor maps `maps` and,
/// for a fused kernel, the description at `fusion_at` (scales alone: each
/// slice applies them to its own k-tiles' sum).
#[allow(clippy::too_many_arguments)]
fn enqueue_slices(
    stream: &Arc<CudaStream>,
    types: WgmmaTypes,
    (func, cfg, [batch_a, batch_b], c_store, fusion_at): (&CudaFunction, LaunchConfig, [u32; 2], u32, u64),
    (m, n, k): (u32, u32, u32),
    (slices, k_slice): (u32, u32),
    maps: &CudaView<'_, u8>,
    (w, transposed_c): (&mut CudaSlice<f32>, bool),
) -> Result<(), Error> {
    let mn = m as usize * n as usize;
    let one = if types == WgmmaTypes::S8 { 1i32.to_ne_bytes() } else { 1f32.to_ne_bytes() };
    let (one, zero) = (u32::from_ne_bytes(one), 0u32);
    let (ldw, stride_w) = (if transposed_c { m } else { n }, mn as u64);
    let mut builder = stream.launch_builder(func);
    builder.arg(&m).arg(&n).arg(&k).arg(&one).arg(&zero).arg(maps).arg(w).arg(&ldw);
    builder.arg(&stride_w).arg(&batch_a).arg(&batch_b).arg(&slices).arg(&c_store).arg(&k_slice).arg(&NOT_GROUPED);
    builder.arg(&fusion_at);
    // SAFETY: the arguments match the entry point's signature
    // (gemm-kernels/src/warpgroup_entry_points.rs), the tensor maps
    // describe buffers that live until the work queued on `stream` is
    // done (C's: the workspace, `slices` m x n matrices of 4-byte
    // elements, ld n (m transposed), m n apart: its length).
    unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
    Ok(())
}

/// Split-K's second launch: C <- alpha * (sum of the `slices` partials
/// of `w`, in slice order) + beta * C over C's m x n (kernel form; n x m
/// stored when transposed), ld `ldc`.
fn reduce<C: Scalar>(
    device: &Device,
    stream: &Arc<CudaStream>,
    types: WgmmaTypes,
    (m, n, transposed_c): (u32, u32, bool),
    (slices, w): (u32, &CudaSlice<f32>),
    (alpha, beta): (u32, u32),
    (c, ldc): (&mut CudaViewMut<'_, C>, u32),
) -> Result<(), Error> {
    let func = device.warpgroup_function(match types.c_name() {
        "f16" => "warpgroup_reduce_f16",
        "bf16" => "warpgroup_reduce_bf16",
        "i32" => "warpgroup_reduce_i32",
        _ => "warpgroup_reduce_f32",
    })?;
    use gemm_core::split_k::{reduce_grid, REDUCE_THREADS};
    // 4-byte partial results (f32 or i32), at most 8 blocks a SM.
    let blocks = reduce_grid(m, n, 4, (device.sm_count(), 8));
    let rcfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (REDUCE_THREADS, 1, 1), shared_mem_bytes: 0 };
    let (rows, cols) = if transposed_c { (n, m) } else { (m, n) };
    let mut builder = stream.launch_builder(&func);
    builder.arg(&rows).arg(&cols).arg(&slices).arg(w).arg(&alpha).arg(&beta).arg(c).arg(&ldc);
    // SAFETY: `warpgroup_reduce_*(m, n, slices, w, alpha, beta, c,
    // ldc)`: the workspace holds `slices` m x n results, C (validated)
    // m x n with ldc; they do not overlap (a fresh allocation).
    unsafe { builder.launch(rcfg) }.during("cuLaunchKernel")?;
    Ok(())
}

/// Enqueues the list batch `problems` (each its index in the lists and
/// its planned launch, all of one kernel and none split) on `stream` as
/// grouped launches: each problem's operands made ready as for a single
/// product, the problems whose operands the kernel reads in the same
/// layouts in one launch whose persistent blocks walk the problems' block
/// tiles one after the other. Problem i reads `a[i]`, `b[i]` and writes
/// `c[i]`, fuses `fusions[i]` where given, and where `rows` is given (the
/// masked layout; the launches must then be unswapped) computes the first
/// `min(*rows[i], m)` rows only: `rows[i]` the device address of a `u32`,
/// read by `warpgroup_masked_rows` on the stream before each launch.
pub(crate) fn enqueue_grouped<T: Scalar, C: Scalar>(
    problems: &[(usize, WarpgroupLaunch)],
    device: &Arc<Device>,
    stream: &Arc<CudaStream>,
    (alpha, beta): (f64, f64),
    (a, b, c): ListViews<'_, '_, '_, '_, '_, T, C>,
    (fusions, rows): (Option<&[Fusion]>, Option<&[u64]>),
) -> Result<(), Error> {
    let Some(&(_, first)) = problems.first() else { return Ok(()) };
    // Each problem's fused epilogue (by its index), uploaded first: the
    // table holds their addresses.
    let uploaded_fusions = match fusions {
        Some(f) => {
            let bytes: Vec<u8> = f.iter().flat_map(fusion_bytes).collect();
            Some(stream.clone_htod(&bytes).during("cuMemcpyHtoDAsync")?)
        }
        None => None,
    };
    let fusion_of = |i: usize| match &uploaded_fusions {
        Some(u) => u.device_ptr(stream).0 + (i * FUSION_BYTES) as u64,
        None => NO_FUSION,
    };
    let (types, kernel) = (first.types, first.kernel);
    let tile = kernel.tile;
    // The planner never picks a clustered tile for a grouped launch (its
    // kernels trap on one: a cluster's blocks run their k-loops in step).
    debug_assert_eq!(tile.cluster, 1);
    let mut keep = Keep::new();
    // Each problem's C, taken once (its guard records the launch's write).
    let mut c_once: Vec<Option<&mut CudaViewMut<'_, C>>> = c.iter_mut().map(|v| Some(&mut **v)).collect();
    // Per layout index of the kernel: the problems' table, maps and (the
    // masked layout) the addresses of their row counts.
    let mut launches: Vec<GroupedLaunch> = Vec::new();
    let mut any_layout = Vec::new();
    for &(i, launch) in problems {
        let WarpgroupLaunch { route, swapped, reads_ab, realign, .. } = launch;
        debug_assert!(launch.kernel == kernel && launch.split.0 == 1);
        debug_assert!(rows.is_none() || !swapped);
        let wrap = |e: Error| Error::Problem { index: i, source: Box::new(e) };
        let (ka, kb) = if swapped { (b[i], a[i]) } else { (a[i], b[i]) };
        let c_i = c_once[i].take().expect("each problem once in the list");
        let (c_address, written) = c_i.device_ptr_mut(stream);
        keep.guards.push(written);
        let operands = ((ka, (1, 0)), (kb, (1, 0)));
        let ready = ready_warpgroup::<T, C>(
            device,
            stream,
            types,
            tile,
            (&route, reads_ab, realign),
            operands,
            (c_address, 1, 0, 1),
            &mut keep,
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
            fusion: fusion_of(i),
        };
        if !reads_ab {
            // A and B not read: any layout's kernel.
            any_layout.push((problem, ready.maps, rows.map(|r| r[i])));
            continue;
        }
        let index = ready.layouts.index();
        let at = match launches.iter().position(|l| l.layout == index) {
            Some(at) => at,
            None => {
                launches.push(GroupedLaunch::new(index));
                launches.len() - 1
            }
        };
        launches[at].add(problem, &ready.maps, rows.map(|r| r[i]));
    }
    if !any_layout.is_empty() {
        if launches.is_empty() {
            launches.push(GroupedLaunch::new(KernelLayouts { a: Layout::RowMajor, b: Layout::ColMajor }.index()));
        }
        for (problem, maps, count) in any_layout {
            launches[0].add(problem, &maps, count);
        }
    }
    let (alpha, beta) = scalars(types, alpha, beta);
    let counter = match rows {
        Some(_) => Some(device.warpgroup_function(MASKED_ROWS)?),
        None => None,
    };
    for GroupedLaunch { layout: index, mut problems, maps, counts } in launches {
        // The block tiles of each problem, one after the other (over its
        // slot's rows in the masked layout: a bound on its counted ones,
        // for the grid; `warpgroup_masked_rows` numbers them).
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
        // One upload: the maps (384 bytes a problem, so the table after
        // them starts on 128 bytes), then the table (40 bytes a problem and
        // the end marker), then the masked layout's count addresses.
        let mut bytes = maps;
        let maps_len = bytes.len() as u64;
        bytes.extend(problems.iter().flat_map(group_words).flat_map(u32::to_le_bytes));
        let table_len = bytes.len() as u64 - maps_len;
        bytes.extend(counts.iter().flat_map(|a| a.to_le_bytes()));
        let uploaded = stream.clone_htod(&bytes).during("cuMemcpyHtoDAsync")?;
        let maps = uploaded.device_ptr(stream).0;
        let table = maps + maps_len;
        if let Some(counter) = &counter {
            debug_assert_eq!(counts.len(), problem_count as usize);
            let addresses = table + table_len;
            let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
            let mut builder = stream.launch_builder(counter);
            builder.arg(&table).arg(&maps).arg(&problem_count).arg(&addresses).arg(&tile.bm).arg(&tile.bn);
            // SAFETY: `warpgroup_masked_rows(group, maps, count, rows, bm,
            // bn)` (gemm-kernels/src/warpgroup_entry_points.rs): the table
            // of `problem_count` products and its end marker, their maps
            // (128-byte aligned: the upload's start), and one count address
            // per product, all in `uploaded` (alive until the launches are
            // done); the counts are the caller's device `u32`s, validated
            // as one per problem in this context; the grouped launch after
            // it, on the same stream, is the only reader of the table.
            unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
        }
        // Block scales in any product's description: the `_fused` kernels.
        let block_scaled = fusions.is_some_and(|f| f.iter().any(Fusion::block_scaled));
        let flavour = kernel.flavour(fusions.is_some(), block_scaled);
        let name = kernel.entry(index, flavour).expect("a kernel for every layout the operands are brought to");
        let func = device.warpgroup_function(name)?;
        // Persistent blocks, as for one product of `jobs` block tiles.
        let [blocks, _, _] = tile.grid(tile.bm, tile.bn, jobs as u32, device.sm_count());
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (tile.threads_per_block(), 1, 1),
            shared_mem_bytes: kernel.smem_bytes(flavour),
        };
        let (zero, wide_zero) = (0u32, 0u64);
        let mut builder = stream.launch_builder(&func);
        builder.arg(&zero).arg(&zero).arg(&zero).arg(&alpha).arg(&beta).arg(&maps).arg(&wide_zero).arg(&zero);
        builder.arg(&wide_zero).arg(&zero).arg(&zero).arg(&problem_count).arg(&zero).arg(&zero).arg(&table);
        builder.arg(&NO_FUSION);
        // SAFETY: the arguments match the entry point's signature
        // (gemm-kernels/src/warpgroup_entry_points.rs) for a grouped
        // launch: `problem_count` products in the table (plus its end
        // marker) at `table`, each with its three tensor maps 384 bytes
        // apart from `maps` (both in `uploaded`, alive until the launch is
        // done: freed stream-ordered), made for this kernel's tile and layouts by
        // `ready_warpgroup` from validated operands that live (and the
        // copies, freed stream-ordered) until the work queued on
        // `stream` is done; each C (m x n, ldc; n x m when transposed)
        // validated against its buffer and apart from the others.
        unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
        drop(uploaded); // freed stream-ordered, after the launch
    }
    drop((keep, uploaded_fusions));
    Ok(())
}

/// One launch of a grouped list: the problems whose operands the kernel
/// reads in the same layouts.
struct GroupedLaunch {
    /// The kernel's layout index ([`KernelLayouts::index`]).
    layout: usize,
    /// The problems' table entries.
    problems: Vec<GroupProblem>,
    /// Their tensor maps ([`GROUP_MAPS_BYTES`] a problem).
    maps: Vec<u8>,
    /// The masked layout: the device addresses of their row counts.
    counts: Vec<u64>,
}

impl GroupedLaunch {
    fn new(layout: usize) -> Self {
        GroupedLaunch { layout, problems: Vec::new(), maps: Vec::new(), counts: Vec::new() }
    }

    /// Adds a problem, its maps and (the masked layout) its count's address.
    fn add(&mut self, problem: GroupProblem, maps: &[u8], count: Option<u64>) {
        self.problems.push(problem);
        self.maps.extend_from_slice(maps);
        self.counts.extend(count);
    }
}

/// The masked layout's kernel: each problem's counted rows and first job,
/// written into a grouped launch's table before it runs.
const MASKED_ROWS: &str = "warpgroup_masked_rows";

/// The `group` argument of a launch that is not grouped (a null table).
const NOT_GROUPED: u64 = 0;

/// The `fusion` argument of a launch without a fused epilogue (null), and
/// a grouped product's [`GroupProblem::fusion`] without one.
const NO_FUSION: u64 = 0;

/// A grouped launch's table entry as the kernel reads it: 10 words in
/// [`GroupProblem`]'s `repr(C)` order (addresses low word first, little
/// endian as the GPU).
fn group_words(p: &GroupProblem) -> [u32; 10] {
    let (c, f) = (p.c, p.fusion);
    [p.m, p.n, p.k, p.first_job, p.ldc, p.c_store, c as u32, (c >> 32) as u32, f as u32, (f >> 32) as u32]
}

/// A [`Fusion`] as the kernel reads it: its fields in `repr(C)` order,
/// little-endian (as the GPU), [`FUSION_BYTES`] bytes.
pub(crate) fn fusion_bytes(f: &Fusion) -> [u8; FUSION_BYTES] {
    let mut out = [0u8; FUSION_BYTES];
    let fields: [(u64, usize); 15] = [
        (f.a_scales, 8),
        (f.b_scales, 8),
        (f.a_scales_k as u64, 4),
        (f.a_scales_mn as u64, 4),
        (f.b_scales_k as u64, 4),
        (f.b_scales_mn as u64, 4),
        (f.a_scales_rows as u64, 4),
        (f.reserved as u64, 4),
        (f.row_scales, 8),
        (f.col_scales, 8),
        (f.bias, 8),
        (f.bias_along as u64, 4),
        (f.bias_type as u64, 4),
        (f.activation as u64, 4),
        (f.reserved2 as u64, 4),
    ];
    let mut at = 0;
    for (value, len) in fields {
        out[at..at + len].copy_from_slice(&value.to_le_bytes()[..len]);
        at += len;
    }
    out
}

/// Bytes of a [`Fusion`] in device memory.
pub(crate) const FUSION_BYTES: usize = 80;

/// One product of stage 9 made ready for a launch of `tile`: its tensor maps
/// (A's, B's and, for TMA stores, C's), the layouts the kernel reads (the
/// operands' own, or K-major copies), whether A and B have a matrix per
/// product, and how the epilogue stores C.
struct ReadyProduct {
    maps: [u8; GROUP_MAPS_BYTES],
    layouts: KernelLayouts,
    batch: [u32; 2],
    c_store: u32,
    a: Option<MapSource>,
}

/// What A's tensor map was made from (the operand, or its copy), so that a
/// map of its rows from `rows` on can be made for a tail split.
#[derive(Clone, Copy)]
struct MapSource {
    data_type: cu::CUtensorMapDataType,
    address: u64,
    op: TmaOperand,
    box_lines: u32,
    /// Whether the map's lines are A's rows (K-major), else its columns.
    k_major: bool,
}

impl MapSource {
    /// The tensor map of A's rows `rows..` (`rows` a multiple of BM: the
    /// address stays on 16 bytes).
    fn rows_from(&self, rows: usize) -> Result<[u8; 128], Error> {
        let (elem, mut op) = (self.op.elem, self.op);
        let address = if self.k_major {
            op.lines -= rows;
            self.address + (rows * op.ld * elem) as u64
        } else {
            op.line -= rows;
            self.address + (rows * elem) as u64
        };
        tensor_map(self.data_type, address, op, self.box_lines)
    }
}

/// Makes one product of the validated kernel form `route` ready for a
/// launch of `tile` (see [`ReadyProduct`]): A and B (each with its batch
/// count and element stride), realigned or transposed into `keep` where
/// TMA or wgmma cannot read them in place, and C at `c_address` (`count`
/// matrices `stride_c` apart; `slices` > 1: split-K's workspace, stored by
/// the threads).
#[allow(clippy::too_many_arguments)]
fn ready_warpgroup<'g, T: Scalar, C: Scalar>(
    device: &Device,
    stream: &'g Arc<CudaStream>,
    types: WgmmaTypes,
    tile: WgmmaTile,
    (route, reads_ab, realign_wanted): (&WarpgroupRoute, bool, [bool; 2]),
    ((ka, (ca, sa)), (kb, (cb, sb))): OperandPair<'g, '_, T>,
    (c_address, count, stride_c, slices): (u64, usize, usize, u32),
    keep: &mut Keep<'g, T>,
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
        // i8 and FP8 as their bits (the kernel's wgmma reads them as its
        // types).
        _ => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
    };
    let elem = types.input_bytes() as usize;
    // The maps: A (k, m) K-major or (m, k) M-major; B (k, n) or (n, k).
    let mut maps = [0u8; GROUP_MAPS_BYTES];
    let (mut batch_a, mut batch_b) = (0u32, 0u32);
    // The layouts the kernel reads: the operands' own, or K-major copies
    // where wgmma cannot transpose (tf32, i8; a narrow tile's B).
    let (mut a_layout, mut b_layout) = (kd.a_layout, kd.b_layout);
    let mut a_source = None;
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
        for (i, (op, src)) in [(a_op, ka), (b_op, kb)].into_iter().enumerate() {
            let realign = realign_wanted[i];
            let in_layout = read_in_layout(types, tile, i, k_major[i]);
            let (address, op, transpose) =
                prepare_operand(device, stream, TensorCoreStage::Warpgroup, op, (in_layout, realign), src, keep)?;
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
            if i == 0 {
                a_source = Some(MapSource { data_type, address, op, box_lines, k_major: k_major[0] || transpose });
            }
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
        && !tile.narrow()
        && kd.m > 0
        && kd.n > 0
        && c_address % 16 == 0
        && (kd.ldc * c_elem) % 16 == 0
        && (kd.n * c_elem) % 16 == 0
        && (count == 1 || ((stride_c * c_elem) % 16 == 0 && stride_c >= kd.m * kd.ldc));
    if tma_c {
        let c_type = match types.c_name() {
            "f16" => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            "bf16" => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            "i32" => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_INT32,
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
    let layouts = KernelLayouts { a: a_layout, b: b_layout };
    Ok(ReadyProduct { maps, layouts, batch: [batch_a, batch_b], c_store, a: a_source })
}

/// Whether a launch of `tile` reads operand `i` (0: A, 1: B, kernel form)
/// as it is laid out (`k_major`, else MN-major), rather than from a K-major
/// copy: a K-major operand always; an MN-major one where wgmma transposes
/// it (f16 and bf16), except a narrow tile's B (its entry points read B
/// K-major only), and tf32's A (through registers).
pub(crate) fn read_in_layout(types: WgmmaTypes, tile: WgmmaTile, i: usize, k_major: bool) -> bool {
    k_major || (i == 0 && types.register_a()) || (types.transposes() && !(i == 1 && tile.narrow()))
}

/// A and B of one product as [`ready_warpgroup`] takes them: each view with
/// its batch count and element stride.
type OperandPair<'a, 'b, T> = ((&'a CudaView<'b, T>, (usize, usize)), (&'a CudaView<'b, T>, (usize, usize)));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_and_group_tables_are_the_kernels_layouts() {
        assert_eq!(size_of::<Fusion>(), FUSION_BYTES);
        assert_eq!(size_of::<GroupProblem>(), 4 * group_words(&GroupProblem::default()).len());
        let f = Fusion {
            a_scales: 0x1122_3344_5566_7788,
            b_scales: 2,
            a_scales_k: 3,
            a_scales_mn: 4,
            b_scales_k: 5,
            b_scales_mn: 6,
            a_scales_rows: 7,
            reserved: 8,
            row_scales: 9,
            col_scales: 10,
            bias: 11,
            bias_along: 12,
            bias_type: 13,
            activation: 14,
            reserved2: 15,
        };
        // SAFETY: Fusion is repr(C) plain data without padding (80 bytes of
        // u64 and u32 fields in order); the host is little-endian, as the GPU.
        let raw: [u8; FUSION_BYTES] = unsafe { core::mem::transmute(f) };
        assert_eq!(fusion_bytes(&f), raw);
        let p =
            GroupProblem { m: 1, n: 2, k: 3, first_job: 4, ldc: 5, c_store: 6, c: 7 << 32 | 8, fusion: 9 << 32 | 10 };
        // SAFETY: as above; GroupProblem is 40 bytes without padding.
        let raw: [u32; 10] = unsafe { core::mem::transmute(p) };
        assert_eq!(group_words(&p), raw);
    }
}
