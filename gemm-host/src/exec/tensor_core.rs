//! What stage 8's and stage 9's launches share for the tensor-core types
//! (f16, bf16, TF32, i8): alpha and beta in the accumulation's type, and
//! each operand brought to what the kernels read (an aligned copy of one
//! whose lines do not start on 16 bytes, a K-major copy of an MN-major
//! TF32 or i8 operand).

use crate::device::memory::{alloc_scratch, copy_2d_device};
use crate::device::Device;
use crate::element::Scalar;
use crate::error::{DriverContext, Error};
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
    SyncOnDrop,
};
use gemm_core::warpgroup::WgmmaTypes;
use gemm_core::KernelLayouts;
use std::sync::Arc;

/// The bytes TMA reads a line in whole sectors of (L2's 32-byte sectors):
/// an operand whose lines start off them is realigned where the plan asks
/// (`plan::product_plan::realign_wanted`).
pub(crate) const SECTOR_BYTES: usize = 32;

/// The tensor-core kernels of the f16, bf16, TF32 and i8 products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TensorCoreStage {
    /// Stage 9: warpgroup MMA and TMA (the `sm_90a` module).
    Warpgroup,
    /// Stage 8's `mma.sync` kernels (the layout modules).
    MmaSync,
}

/// alpha and beta in the accumulation's type, as their bits: i32 (checked
/// integers) for the i8 product, f32 otherwise; 4 bytes either way.
pub(crate) fn scalars(types: WgmmaTypes, alpha: f64, beta: f64) -> (u32, u32) {
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
pub(crate) struct TmaOperand {
    pub(crate) elem: usize,
    pub(crate) line: usize,
    pub(crate) lines: usize,
    pub(crate) ld: usize,
    pub(crate) count: usize,
    pub(crate) stride: usize,
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
    /// (16, or 128 for a realigned copy).
    fn padded_to(&self, bytes: usize) -> TmaOperand {
        let a = bytes / self.elem;
        let ld = self.line.div_ceil(a) * a;
        TmaOperand { ld, stride: ld * self.lines, ..*self }
    }

    /// Whether every line starts on `bytes` (32: TMA's 128-byte box rows
    /// then each cover 4 whole 32-byte sectors rather than touching 5).
    fn lines_on(&self, address: u64, bytes: usize) -> bool {
        address % bytes as u64 == 0
            && (self.ld * self.elem) % bytes == 0
            && (self.count == 1 || (self.stride * self.elem) % bytes == 0)
    }

    /// The same matrix with lines and columns exchanged (what the transposed
    /// copy holds), its lines padded to 128 bytes (free in a fresh copy).
    pub(crate) fn transposed(&self) -> TmaOperand {
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

/// Copies `op` at `src` into a new buffer laid out as `op.padded_to(bytes)`,
/// on `stream`: with stage 9's realigning copy (`copy_lines_16`, 16 bytes a
/// thread) where `realign_on` has its kernels and the source's lines
/// start on 16 bytes, else cuMemcpy2DAsync per matrix (which moved an f16
/// 3000 x 3000 operand at about a third of the copy kernel's rate on an
/// H200).
fn aligned_copy<T: Scalar>(
    realign_on: Option<&Device>,
    stream: &Arc<CudaStream>,
    op: TmaOperand,
    src: &CudaView<'_, T>,
    bytes: usize,
) -> Result<(CudaSlice<T>, TmaOperand), Error> {
    let dst_op = op.padded_to(bytes);
    // SAFETY: every element TMA reads inside the matrix is written below; the
    // pad elements (past `line` in each line) are never read: TMA's boxes
    // stop at the tensor's dimensions.
    let mut dst = unsafe { alloc_scratch::<T>(stream, dst_op.len()) }?;
    let size = size_of::<T>();
    let (src_ptr, _r) = src.device_ptr(stream);
    let (dst_ptr, _w) = dst.device_ptr_mut(stream);
    if let Some(device) = realign_on.filter(|_| op.aligned(src_ptr) && op.lines <= u32::MAX as usize) {
        use gemm_core::pack::{copy_grid, COPY_THREADS};
        let func = device.warpgroup_function("copy_lines_16")?;
        let (lines, line_bytes) = (op.lines as u32, (op.line * size) as u32);
        let grid = copy_grid(lines, line_bytes);
        let cfg = LaunchConfig {
            grid_dim: (grid[0], grid[1], grid[2]),
            block_dim: (COPY_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let (ld_src, ld_dst) = ((op.ld * size) as u64, (dst_op.ld * size) as u64);
        for i in 0..op.count {
            let from = src_ptr + (i * op.stride * size) as u64;
            let to = dst_ptr + (i * dst_op.stride * size) as u64;
            let mut builder = stream.launch_builder(&func);
            builder.arg(&lines).arg(&line_bytes).arg(&from).arg(&ld_src).arg(&to).arg(&ld_dst);
            // SAFETY: `copy_lines_16(lines, line_bytes, src, ld_src, dst,
            // ld_dst)`: the source's lines (a validated operand, each
            // matrix inside its buffer) start on 16 bytes (`aligned`), as
            // do the copy's (a fresh allocation sized by `len`, lines on
            // `bytes` >= 16); they do not overlap; blocks of COPY_THREADS.
            unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
        }
        drop((_r, _w));
        return Ok((dst, dst_op));
    }
    for i in 0..op.count {
        let from = src_ptr + (i * op.stride * size) as u64;
        let to = dst_ptr + (i * dst_op.stride * size) as u64;
        // Both regions lie in their buffers (validated shapes; the
        // destination was sized by `len`); the copy is ordered on `stream`.
        copy_2d_device(stream, (from, op.ld * size), (to, dst_op.ld * size), op.line * size, op.lines)?;
    }
    drop((_r, _w));
    Ok((dst, dst_op))
}

/// Copies `op` at `src` into a new buffer holding its transpose
/// (`op.transposed()`): the K-major copy of an MN-major operand the kernel
/// does not read so (tf32 and i8, which neither wgmma nor ldmatrix reads
/// transposed; a narrow stage-9 tile's 16-bit B), by the tiled transpose
/// of packing (`transpose_b32` and the other widths), on `stream`.
pub(crate) fn transposed_copy<T: Scalar>(
    device: &Device,
    stream: &Arc<CudaStream>,
    stage: TensorCoreStage,
    op: TmaOperand,
    src: &CudaView<'_, T>,
) -> Result<(CudaSlice<T>, TmaOperand), Error> {
    let dst_op = op.transposed();
    // SAFETY: the transpose writes every element inside each copied matrix;
    // the pad past each line's end is never read (TMA's boxes stop at the
    // tensor's dimensions).
    let mut dst = unsafe { alloc_scratch::<T>(stream, dst_op.len()) }?;
    let name = gemm_core::pack::transpose_entry(op.elem).expect("elements of 1, 2, 4 or 8 bytes");
    let func = match stage {
        TensorCoreStage::Warpgroup => device.warpgroup_function(name)?,
        TensorCoreStage::MmaSync => device.function(name, KernelLayouts::NN)?,
    };
    let (rows, cols, ld, ld_dst) = (op.lines as u32, op.line as u32, op.ld as u32, dst_op.ld as u32);
    for i in 0..op.count {
        let from = src.slice(i * op.stride..);
        let mut to = dst.slice_mut(i * dst_op.stride..);
        // SAFETY: the source holds `rows` lines of `cols` elements `ld` apart
        // (a validated operand), the destination `cols` lines of `rows`
        // elements `ld_dst` apart (sized by `len`); they do not overlap.
        unsafe { launch_transpose(&func, stream, (rows, cols, ld), &from, (&mut to, ld_dst)) }?;
    }
    Ok((dst, dst_op))
}

/// Enqueues packing's tiled transpose (`transpose_b64` and the other
/// widths, `func`) on `stream`: `rows` lines of `cols` elements `ld` apart
/// at `src` into `cols` lines of `rows` elements `ld_dst` apart at `dst`.
///
/// # Safety
/// `src` and `dst` hold what those shapes address and do not overlap;
/// `func` is the transpose of `T`'s width.
pub(crate) unsafe fn launch_transpose<T: Scalar>(
    func: &CudaFunction,
    stream: &Arc<CudaStream>,
    (rows, cols, ld): (u32, u32, u32),
    src: &CudaView<'_, T>,
    (dst, ld_dst): (&mut CudaViewMut<'_, T>, u32),
) -> Result<(), Error> {
    use gemm_core::pack::{transpose_grid, transpose_smem_bytes, PACK_BLOCK};
    let bytes = size_of::<T>() as u32;
    let grid = transpose_grid(rows, cols, bytes);
    let cfg = LaunchConfig {
        grid_dim: (grid[0], grid[1], grid[2]),
        block_dim: (PACK_BLOCK[0], PACK_BLOCK[1], 1),
        shared_mem_bytes: transpose_smem_bytes(bytes),
    };
    let mut builder = stream.launch_builder(func);
    builder.arg(&rows).arg(&cols).arg(src).arg(&ld).arg(dst).arg(&ld_dst);
    // SAFETY: the caller's contract; packing's geometry.
    unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
    Ok(())
}

/// One operand brought to what the kernels read (`in_layout`: the kernel
/// reads its layout, K-major or one it transposes; else, an MN-major tf32
/// or i8 operand, or the 16-bit B of a narrow stage-9 tile, it is
/// transposed to a K-major copy, returned flag true), one whose lines do not start on 16 bytes (or,
/// for stage 8, do not end on them) is
/// copied to padded lines, and so is, for stage 9, one that `realign` says
/// to bring to lines on 128 bytes; the copies are pushed to `copies` (freed
/// after the launch, stream-ordered). Returns the address the kernel reads
/// and its layout.
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_operand<'g, T: Scalar>(
    device: &Device,
    stream: &'g Arc<CudaStream>,
    stage: TensorCoreStage,
    op: TmaOperand,
    (in_layout, realign): (bool, bool),
    src: &'g CudaView<'_, T>,
    keep: &mut Keep<'g, T>,
) -> Result<(u64, TmaOperand, bool), Error> {
    // The stream waits for the last write of `src` (on any stream); the
    // guard records this use when dropped: after the copy below, or for an
    // operand read in place, after the launch (`keep`).
    let (address, used) = src.device_ptr(stream);
    let realign = realign && stage == TensorCoreStage::Warpgroup && !op.lines_on(address, SECTOR_BYTES);
    if !in_layout {
        let (copy, t) = transposed_copy(device, stream, stage, op, src)?;
        drop(used);
        let address = copy.device_ptr(stream).0;
        keep.copies.push(copy);
        Ok((address, t, true))
    } else if op.aligned(address) && (stage == TensorCoreStage::Warpgroup || op.whole_chunks()) && !realign {
        // Stage 8 reads a line's last chunk with cp.async's source size (the
        // bytes inside the matrix), but compute-sanitizer's memcheck checks
        // all 16 bytes: lines of whole chunks are read in place, others
        // from a copy whose last line is whole (`TmaOperand::len`).
        keep.guards.push(used);
        Ok((address, op, false))
    } else {
        let realign_on = (realign && stage == TensorCoreStage::Warpgroup).then_some(device);
        let (copy, padded) = aligned_copy(realign_on, stream, op, src, if realign { 128 } else { 16 })?;
        drop(used);
        let address = copy.device_ptr(stream).0;
        keep.copies.push(copy);
        Ok((address, padded, false))
    }
}

/// What enqueueing a launch keeps until the launch is queued: the operands'
/// copies (then freed stream-ordered, after the launch has read them) and
/// the guards of the caller's buffers the launch uses in place. Dropped
/// after the launch, each guard records that use on the stream (cudarc's
/// event tracking), so work on another stream that later writes the buffer
/// (or reads a C) waits for the launch, not only for what came before it.
pub(crate) struct Keep<'g, T> {
    /// Copies of operands the kernel could not read in place.
    pub(crate) copies: Vec<CudaSlice<T>>,
    /// Uses of the caller's buffers, recorded when dropped.
    pub(crate) guards: Vec<SyncOnDrop<'g>>,
}

impl<T> Keep<'_, T> {
    /// Nothing kept yet.
    pub(crate) fn new() -> Self {
        Keep { copies: Vec::new(), guards: Vec::new() }
    }
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
        assert!(f16.aligned(256) && !f16.lines_on(256, 32));
        // 4000 f16: lines on 64 bytes, so on 32; 2056 f16 (4112 bytes): not.
        assert!(TmaOperand { ld: 4000, ..f16 }.lines_on(256, 32) && !TmaOperand { ld: 2056, ..f16 }.lines_on(256, 32));
        assert!(f16.padded_to(128).lines_on(256, 128) && f16.padded_to(128).ld == 3008);
        let t = TmaOperand { elem: 4, ..bytes }.transposed();
        assert_eq!((t.line, t.lines, t.ld), (5, 33, 32));
        assert!(t.aligned(0));
    }

    /// The transposes' launches cover the matrix with their tiles (128 x
    /// 128 bytes for 1-byte elements, 32 x 32 otherwise) within the 48 KiB
    /// a block gets without opting in.
    #[test]
    fn transpose_launches_cover_the_matrix() {
        use gemm_core::pack::{transpose_grid, transpose_smem_bytes, transpose_tile};
        for bytes in [1, 2, 4, 8] {
            let tile = transpose_tile(bytes);
            assert_eq!(tile, if bytes == 1 { 128 } else { 32 });
            assert!(transpose_smem_bytes(bytes) <= 48 * 1024);
            for (rows, cols) in [(1, 1), (129, 300), (4096, 4096), (10_000_000, 3)] {
                let g = transpose_grid(rows, cols, bytes);
                assert_eq!(g[0], cols.div_ceil(tile));
                assert_eq!(g[1], rows.div_ceil(tile).min(65_535), "{rows}x{cols}");
            }
        }
        assert_eq!(transpose_smem_bytes(1), 128 * 128);
        assert_eq!(transpose_smem_bytes(4), 32 * 33 * 4);
    }
}
