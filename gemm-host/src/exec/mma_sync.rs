//! Stage 8's `mma.sync` launches for the tensor-core types (f16, bf16,
//! TF32, i8) on compute capability 8.x, or when `.stage(Stage::TensorCore)`
//! asks for them: one product or a strided batch in one launch.

use crate::device::registry::MmaKernel;
use crate::device::Device;
use crate::element::{product_name, Scalar};
use crate::error::{DriverContext, Error};
use crate::exec::launch::Operands;
use crate::exec::tensor_core::{prepare_operand, scalars, Keep, TensorCoreStage, TmaOperand};
use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use gemm_core::shape::Layout;
use gemm_core::warpgroup::WgmmaTypes;
use gemm_core::{GemmDims, KernelLayouts};
use std::sync::Arc;

/// One planned stage-8 product (or strided batch of it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct MmaLaunch {
    /// Operand and C types.
    pub types: WgmmaTypes,
    /// The product in kernel form (C row-major).
    pub kd: GemmDims,
    /// Whether the user's A and B trade places in that form.
    pub swapped: bool,
    /// The kernel (tile, pipeline depth).
    pub kernel: &'static MmaKernel,
}

/// Enqueues `count` products (element strides of A, B and C; a stride of 0
/// is one matrix for all) of the planned `launch` on `stream` with stage
/// 8's `mma.sync` kernels (`s08_tensor_core_mixed`): K-major copies of the
/// operands ldmatrix cannot transpose (tf32, i8) and of those whose lines
/// do not start on 16 bytes, then one launch.
pub(crate) fn enqueue<T: Scalar, C: Scalar>(
    launch: &MmaLaunch,
    device: &Arc<Device>,
    stream: &Arc<CudaStream>,
    (alpha, beta): (f64, f64),
    (a, b, c): Operands<'_, '_, '_, '_, T, C>,
    (count, [stride_a, stride_b, stride_c]): (usize, [usize; 3]),
) -> Result<(), Error> {
    let MmaLaunch { types, kd, swapped, kernel } = *launch;
    let (ka, kb) = if swapped { (b, a) } else { (a, b) };
    let (sa, sb) = if swapped { (stride_b, stride_a) } else { (stride_a, stride_b) };
    // An operand with stride 0 is one matrix for every product.
    let batch_of = |stride: usize| if stride == 0 { (1, 0) } else { (count, stride) };
    let reads_ab = alpha != 0.0 && kd.k > 0;
    if [kd.m, kd.n, kd.k, kd.lda, kd.ldb, kd.ldc].iter().any(|&d| d > i32::MAX as usize) {
        return Err(Error::Unsupported {
            product: product_name(types),
            why: format!(
                "{}x{}x{} (lda {}, ldb {}, ldc {}): the kernels' sizes are 32-bit, so each must be below 2^31",
                kd.m, kd.n, kd.k, kd.lda, kd.ldb, kd.ldc
            ),
        });
    }
    let tile = kernel.tile;
    if tile.tiles(kd.m as u32, kd.n as u32) > i32::MAX as u64 {
        return Err(Error::Unsupported {
            product: product_name(types),
            why: format!("{}x{} needs more than 2^31 block tiles", kd.m, kd.n),
        });
    }
    let elem = types.input_bytes() as usize;
    let mut keep = Keep::new();
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
            // ldmatrix transposes 16-bit elements only.
            let in_layout = k_major || types.transposes();
            let (address, op, transposed) =
                prepare_operand(device, stream, TensorCoreStage::MmaSync, op, (in_layout, false), src, &mut keep)?;
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
            (ptrs[i], lds[i], strides[i]) = (address, op.ld as u32, if op.count > 1 { op.stride as u64 } else { 0 });
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
    let (alpha, beta) = scalars(types, alpha, beta);
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
    drop(keep);
    Ok(())
}
