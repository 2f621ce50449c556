//! f64 and f32 products emulated on INT8 tensor cores (Ozaki scheme II;
//! `gemm::emulation` has the numerics, `gemm_core::emulation` the geometry):
//! the scaling exponents of A's rows and B's columns, B's residues, then per
//! panel of C's rows A's residues, the INT8 products as one strided batch of
//! stage 9 over the moduli and k blocks, and the reconstruction fused with
//! the alpha/beta epilogue. The accurate mode first runs a bound pass: the
//! lines' coarse shifts, the coarse magnitudes of B and, per panel, of A,
//! their INT8 product and its row and column maxima, which give the
//! exponents. Every buffer comes from the library's scratch pool and is
//! freed stream-ordered; nothing is waited for.

use crate::device::memory::alloc_scratch;
use crate::device::registry::{EMULATION_BOUND_KERNELS, EMULATION_KERNELS};
use crate::device::Device;
use crate::element::{Recast, Scalar};
use crate::error::{DriverContext, Error};
use crate::exec::launch::Operands;
use crate::exec::warpgroup::{self, WarpgroupLaunch};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, LaunchConfig, PushKernelArg};
use gemm_core::emulation::{
    bound_exponents_grid, bound_grid, exponent_grid, reconstruct_grid, residue_grid, CrtConstants, BOUND_SMEM_BYTES,
    BOUND_THREADS, EXPONENT_LINES, EXPONENT_STRIDED_SMEM_BYTES, EXPONENT_THREADS, RECONSTRUCT_SMEM_BYTES,
    RECONSTRUCT_THREADS, RESIDUE_SMEM_BYTES, RESIDUE_THREADS, SUM_LANES,
};
use gemm_core::{GemmDims, Layout, Precision};
use std::sync::Arc;

/// One planned emulated product (or strided batch of it, run product by
/// product).
#[derive(Clone, Copy, Debug)]
pub(crate) struct EmulatedLaunch {
    /// f64 or f32 operands and C.
    pub precision: Precision,
    /// The CRT constants of the moduli (their count is `crt.n`).
    pub crt: &'static CrtConstants,
    /// The scaling target `T` of the moduli.
    pub target: f64,
    /// The product in kernel form (C row-major).
    pub kd: GemmDims,
    /// Whether A and B trade places in that form.
    pub swapped: bool,
    /// k blocks of the INT8 products and the k of each.
    pub blocks: (usize, usize),
    /// Rows of C per panel (the workspace's bound).
    pub panel_rows: usize,
    /// The INT8 batch of a full panel, and of the last one where it is
    /// shorter.
    pub products: (WarpgroupLaunch, Option<WarpgroupLaunch>),
    /// The accurate mode's coarse products (a batch over the k blocks) of a
    /// full panel and of the last one; `None` in the fast mode.
    pub bound: Option<(WarpgroupLaunch, Option<WarpgroupLaunch>)>,
}

impl EmulatedLaunch {
    /// Bytes of device memory one product takes beside its operands: the
    /// exponents, B's residues, and a panel's A residues and i32 products
    /// (and the accurate mode's row and column maxima, which the coarse
    /// magnitudes and products share those buffers with).
    pub(crate) fn workspace_bytes(&self) -> usize {
        let (m, n, (blocks, block_k)) = (self.kd.m, self.kd.n, self.blocks);
        let mats = self.crt.n as usize * blocks;
        let maxima = if self.bound.is_some() { 8 * (m + n) } else { 0 };
        4 * (m + n) + maxima + mats * n * block_k + mats * self.panel_rows.min(m) * (block_k + 4 * n)
    }
}

/// A matrix's lines for the kernels: (line stride, element stride) of A's
/// rows (`rows == true`) or B's columns in kernel form.
fn line_strides(layout: Layout, ld: usize, rows: bool) -> (u64, u64) {
    let ld = ld as u64;
    match (layout, rows) {
        (Layout::RowMajor, true) | (Layout::ColMajor, false) => (ld, 1),
        (Layout::ColMajor, true) | (Layout::RowMajor, false) => (1, ld),
    }
}

/// Enqueues the planned emulated product(s) on `stream`: `batch` = (count,
/// element strides of A, B and C), run one product after the other.
pub(crate) fn enqueue<T: Scalar, C: Scalar>(
    launch: &EmulatedLaunch,
    device: &Arc<Device>,
    stream: &Arc<CudaStream>,
    scalars: (f64, f64),
    (a, b, c): Operands<'_, '_, '_, '_, T, C>,
    (count, [sa, sb, sc]): (usize, [usize; 3]),
) -> Result<(), Error> {
    // The kernel form's B (the user's A when swapped), one matrix for
    // every product when its stride is 0: its exponents and residues are
    // made once for the batch.
    // (Not in the accurate mode: there B's exponents depend on A too.)
    let shared_b = (if launch.swapped { sa } else { sb }) == 0 && launch.bound.is_none();
    let mut prepared = None;
    for i in 0..count {
        let (ai, bi) = (a.slice(i * sa..), b.slice(i * sb..));
        let mut ci = c.slice_mut(i * sc..);
        if !shared_b {
            prepared = None;
        }
        match launch.precision {
            Precision::F64 => {
                let ops = ((&ai).recast(), (&bi).recast(), (&mut ci).recast());
                one::<f64>(launch, device, stream, scalars, ops, &mut prepared)?
            }
            Precision::F32 => {
                let ops = ((&ai).recast(), (&bi).recast(), (&mut ci).recast());
                one::<f32>(launch, device, stream, scalars, ops, &mut prepared)?
            }
        }
    }
    Ok(())
}

/// The kernel form's B made ready: its columns' exponents and residues.
struct PreparedB {
    nu: CudaSlice<i32>,
    res_b: CudaSlice<i8>,
}

/// The entry points of element type `T` (`EMULATION_KERNELS`).
fn entries<T: Scalar>() -> [&'static str; 4] {
    EMULATION_KERNELS[if T::NAME == "f64" { 0 } else { 1 }]
}

/// One emulated product (see the module docs).
fn one<T: Scalar>(
    launch: &EmulatedLaunch,
    device: &Arc<Device>,
    stream: &Arc<CudaStream>,
    (alpha, beta): (f64, f64),
    (a, b, c): Operands<'_, '_, '_, '_, T, T>,
    prepared: &mut Option<PreparedB>,
) -> Result<(), Error> {
    let EmulatedLaunch { crt, target, kd, swapped, blocks: (blocks, block_k), panel_rows, products, bound, .. } =
        *launch;
    let (ka, kb) = if swapped { (b, a) } else { (a, b) };
    let (m, n, k) = (kd.m, kd.n, kd.k);
    let moduli = crt.n as usize;
    let mats = moduli * blocks;
    let [exp_fn, strided_fn, res_fn, rec_fn] = entries::<T>().map(|name| device.warpgroup_function(name));
    let (exp_fn, strided_fn, res_fn, rec_fn) = (exp_fn?, strided_fn?, res_fn?, rec_fn?);
    let a_lines = line_strides(kd.a_layout, kd.lda, true);
    let b_lines = line_strides(kd.b_layout, kd.ldb, false);
    // The CRT constants, uploaded once per set (cached by content).
    // SAFETY: CrtConstants is repr(C) plain data with explicit padding.
    let crt_bytes =
        unsafe { core::slice::from_raw_parts((crt as *const CrtConstants).cast::<u8>(), size_of::<CrtConstants>()) };
    let crt_dev = device.tensor_maps(stream, crt_bytes)?;
    let crt_ptr = crt_dev.slice(..);
    // SAFETY (each allocation): every element is written by a kernel
    // before one reads it, in stream order: the exponents by the exponent
    // kernel, the residues (padding included) by the residue kernel, the
    // products by the INT8 batch.
    let mut mu = unsafe { alloc_scratch::<i32>(stream, m.max(1)) }?;
    let rows = panel_rows.min(m);
    let mut res_a = unsafe { alloc_scratch::<i8>(stream, (mats * rows * block_k).max(1)) }?;
    let mut w = unsafe { alloc_scratch::<i32>(stream, (mats * rows * n).max(1)) }?;
    let (len, moduli_u32) = (k as u64, moduli as u32);
    // The INT8 batch of a panel of `pm` rows: product z of the K-major
    // matrices z of A's and B's residues (or coarse magnitudes) into the
    // z-th pm x n i32 matrix of w; `plans` for a full panel and the last.
    let int8_batch = |plans: &(WarpgroupLaunch, Option<WarpgroupLaunch>),
                      count: usize,
                      pm: usize,
                      (res_a, res_b): (&CudaSlice<i8>, &CudaSlice<i8>),
                      w: &mut CudaSlice<i32>| {
        let plan = if pm == rows { &plans.0 } else { plans.1.as_ref().unwrap_or(&plans.0) };
        let mut wv = w.slice_mut(..count * pm * n);
        let (ra, rb) = (res_a.slice(..count * pm * block_k), res_b.slice(..count * n * block_k));
        let strides = [pm * block_k, n * block_k, pm * n];
        warpgroup::enqueue::<i8, i32>(plan, device, stream, (1.0, 0.0), (&ra, &rb, &mut wv), (count, strides), None)
    };
    // Exponents of A's rows and B's columns: a warp a line where its
    // elements are contiguous, else a lane a line (32 lines a block).
    // The accurate mode's first pass: coarse shifts and magnitudes.
    let coarse = bound.is_some() as u32;
    let exponents = |x: &CudaView<'_, T>, lines: usize, strides: (u64, u64), out: &mut CudaViewMut<'_, i32>| {
        let (func, cfg) = if strides.1 == 1 {
            let blocks = exponent_grid(lines as u32, true);
            (
                &exp_fn,
                LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (EXPONENT_THREADS, 1, 1), shared_mem_bytes: 0 },
            )
        } else {
            let blocks = exponent_grid(lines as u32, false);
            let cfg = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (EXPONENT_LINES * SUM_LANES as u32, 1, 1),
                shared_mem_bytes: EXPONENT_STRIDED_SMEM_BYTES,
            };
            (&strided_fn, cfg)
        };
        let lines = lines as u32;
        let mut builder = stream.launch_builder(func);
        builder.arg(&lines).arg(&len).arg(x).arg(&strides.0).arg(&strides.1).arg(&target).arg(&coarse).arg(out);
        // SAFETY: matches `emulation_exponents_*` and
        // `emulation_exponents_strided_*` (lines, len, x, line_stride,
        // elem_stride, target, coarse, out); every line's elements lie in the
        // operand (validated shapes); `out` holds `lines` i32; the blocks
        // and shared memory are gemm-core's.
        unsafe { builder.launch(cfg) }.during("cuLaunchKernel").map(|_| ())
    };
    let residues = |x: &CudaView<'_, T>,
                    (lines, coarse): (usize, u32),
                    strides: (u64, u64),
                    exps: &CudaView<'_, i32>,
                    out: &mut CudaViewMut<'_, i8>| {
        let grid = residue_grid(lines as u32, blocks as u32, block_k as u32);
        let cfg = LaunchConfig {
            grid_dim: (grid[0], grid[1], 1),
            block_dim: (RESIDUE_THREADS, 1, 1),
            shared_mem_bytes: RESIDUE_SMEM_BYTES,
        };
        let (lines, nb, bk) = (lines as u32, blocks as u32, block_k as u32);
        let mut builder = stream.launch_builder(&res_fn);
        builder.arg(&lines).arg(&len).arg(x).arg(&strides.0).arg(&strides.1).arg(exps);
        builder.arg(&moduli_u32).arg(&coarse).arg(&nb).arg(&bk).arg(out);
        // SAFETY: matches `emulation_residues_*` (lines, len, x,
        // line_stride, elem_stride, exps, moduli, coarse, blocks, block_k,
        // out); `out` holds moduli * blocks matrices of lines x block_k
        // bytes (blocks of them for coarse magnitudes; 4-byte aligned:
        // block_k is a multiple of 128); the grid and shared memory are
        // gemm-core's.
        unsafe { builder.launch(cfg) }.during("cuLaunchKernel").map(|_| ())
    };
    exponents(ka, m, a_lines, &mut mu.slice_mut(..))?;
    if prepared.is_none() {
        // SAFETY: as above.
        let mut nu = unsafe { alloc_scratch::<i32>(stream, n.max(1)) }?;
        let mut res_b = unsafe { alloc_scratch::<i8>(stream, (mats * n * block_k).max(1)) }?;
        exponents(kb, n, b_lines, &mut nu.slice_mut(..))?;
        if let Some(bound) = bound {
            // The accurate mode: coarse magnitudes of B (in res_b), then
            // per panel of A's, their INT8 product (in w) and its maxima;
            // then the exponents, and B's residues.
            // SAFETY: zeroed before use (0.0, the maxima's start).
            let mut maxima = unsafe { alloc_scratch::<f64>(stream, m + n) }?;
            stream.memset_zeros(&mut maxima).during("cuMemsetD8Async")?;
            let [max_fn, bexp_fn] = EMULATION_BOUND_KERNELS.map(|name| device.warpgroup_function(name));
            let (max_fn, bexp_fn) = (max_fn?, bexp_fn?);
            residues(kb, (n, 1), b_lines, &nu.slice(..), &mut res_b.slice_mut(..blocks * n * block_k))?;
            let mut r0 = 0;
            while r0 < m {
                let pm = rows.min(m - r0);
                let a_panel = ka.slice(r0 * a_lines.0 as usize..);
                let mut ra = res_a.slice_mut(..blocks * pm * block_k);
                residues(&a_panel, (pm, 1), a_lines, &mu.slice(r0..), &mut ra)?;
                int8_batch(&bound, blocks, pm, (&res_a, &res_b), &mut w)?;
                let grid = bound_grid(pm as u32, n as u32);
                let cfg = LaunchConfig {
                    grid_dim: (grid[0], grid[1], 1),
                    block_dim: (BOUND_THREADS, 1, 1),
                    shared_mem_bytes: BOUND_SMEM_BYTES,
                };
                let (pm32, n32, nb) = (pm as u32, n as u32, blocks as u32);
                let w_view = w.slice(..blocks * pm * n);
                let (mut row_max, mut col_max) = maxima.split_at_mut(m);
                let mut row_max = row_max.slice_mut(r0..);
                let mut builder = stream.launch_builder(&max_fn);
                builder.arg(&pm32).arg(&n32).arg(&nb).arg(&w_view).arg(&mut row_max).arg(&mut col_max);
                // SAFETY: matches `emulation_bound_max` (rows, n, blocks, u,
                // row_max, col_max); w holds the panel's `blocks` coarse
                // products (non-negative, each below 2^31, their sums below
                // 2^53); the maxima (f64, zeroed) hold the panel's rows and
                // n columns;
                // the grid and shared memory are gemm-core's.
                unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
                r0 += pm;
            }
            let (rows_max, cols_max) = maxima.split_at(m);
            for (exps, lines, maxes) in [(&mut mu, m, &rows_max), (&mut nu, n, &cols_max)] {
                let cfg = LaunchConfig {
                    grid_dim: (bound_exponents_grid(lines as u32), 1, 1),
                    block_dim: (BOUND_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                };
                let lines = lines as u32;
                let mut builder = stream.launch_builder(&bexp_fn);
                builder.arg(&lines).arg(maxes).arg(&target).arg(exps);
                // SAFETY: matches `emulation_bound_exponents` (lines, maxes,
                // target, exps): `lines` maxima and coarse shifts.
                unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
            }
            drop(maxima);
        }
        residues(kb, (n, 0), b_lines, &nu.slice(..), &mut res_b.slice_mut(..))?;
        *prepared = Some(PreparedB { nu, res_b });
    }
    let PreparedB { nu, res_b } = prepared.as_ref().expect("made above");
    let mut r0 = 0;
    while r0 < m {
        let pm = rows.min(m - r0);
        let a_panel = ka.slice(r0 * a_lines.0 as usize..);
        let mu_panel = mu.slice(r0..);
        let mut ra = res_a.slice_mut(..mats * pm * block_k);
        residues(&a_panel, (pm, 0), a_lines, &mu_panel, &mut ra)?;
        // The INT8 batch: product z = l * blocks + b of the K-major residue
        // matrices into the z-th pm x n i32 matrix of w.
        int8_batch(&products, mats, pm, (&res_a, res_b), &mut w)?;
        // The reconstruction of the panel's rows of C.
        let elems = (pm * n) as u64;
        let grid = reconstruct_grid(elems, device.sm_count());
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (RECONSTRUCT_THREADS, 1, 1),
            shared_mem_bytes: RECONSTRUCT_SMEM_BYTES,
        };
        let (pm32, n32, ldc) = (pm as u32, n as u32, kd.ldc as u32);
        let (nb, w_view) = (blocks as u32, w.slice(..mats * pm * n));
        let mut c_panel = c.slice_mut(r0 * kd.ldc..);
        let mut builder = stream.launch_builder(&rec_fn);
        builder.arg(&pm32).arg(&n32).arg(&len).arg(&crt_ptr).arg(&moduli_u32).arg(&nb).arg(&w_view);
        builder.arg(&mu_panel).arg(nu).arg(&alpha).arg(&beta).arg(&mut c_panel).arg(&ldc);
        builder.arg(&a_panel).arg(&a_lines.0).arg(&a_lines.1).arg(kb).arg(&b_lines.0).arg(&b_lines.1);
        // SAFETY: matches `emulation_reconstruct_*` (m, n, k, crt, moduli,
        // blocks, w, mu, nu, alpha, beta, c, ldc, a, a_line, a_elem, b,
        // b_line, b_elem); w holds the panel's moduli * blocks products;
        // C's panel (pm x n, ldc, validated) lies in `c` and does not
        // overlap A, B or the workspace.
        unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
        r0 += pm;
    }
    drop((mu, res_a, w, crt_dev));
    Ok(())
}
