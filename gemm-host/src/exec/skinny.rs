//! The token-sized kernels' launches (`gemm_core::skinny`): a product with
//! few rows or columns of C (up to 8, 4 for f64, on the CUDA cores; up to
//! 32 on the tensor cores for f16, bf16 and i8 where W's k is contiguous,
//! and 64 for i8 where its N is), read as `Y <- alpha X W +
//! beta Y` with the small side as X, in one launch for one product or a
//! strided batch, every op and layout (the kernel takes strides), the
//! operands read in place.

use crate::device::Device;
use crate::element::Scalar;
use crate::error::{DriverContext, Error};
use crate::exec::launch::Operands;
use crate::exec::tensor_core::{transposed_copy, TensorCoreStage, TmaOperand};
use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use gemm_core::skinny::{self, SkinnyTypes, WLayout};
use gemm_core::{GemmDims, Layout};
use std::sync::Arc;

/// One planned token-sized product (or strided batch of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SkinnyLaunch {
    /// Operand and C types.
    pub types: SkinnyTypes,
    /// The kernel's row count S (at least the small side).
    pub rows: u32,
    /// W's contiguous dimension.
    pub layout: WLayout,
    /// Whether the kernel is the tensor-core form (`mma.sync`, 16 or 32
    /// rows with a K-contiguous W; for i8 with an N-contiguous one, 16 to
    /// 64).
    pub mma: bool,
    /// Whether the small side is n (X = op(B)^T, W = op(A)^T, Y = C^T)
    /// rather than m.
    pub small_n: bool,
    /// The product as the user gave it (k = 0 when A and B are not read).
    pub dims: GemmDims,
}

impl SkinnyLaunch {
    /// The launch for `dims` (user form) whose small side a token-sized
    /// kernel of `types` takes (`gemm_core::skinny::cuda_core_rows`, else
    /// the tensor-core form's `mma_rows_for` with a K-contiguous W,
    /// `mma_wn_rows_for` with an N-contiguous one); None
    /// otherwise.
    pub(crate) fn new(types: SkinnyTypes, dims: GemmDims) -> Option<SkinnyLaunch> {
        Self::like(types, dims, None)
    }

    /// [`SkinnyLaunch::new`], or, with `whole`, the launch of a part of
    /// that product (a host-path tile of its C): the same side as X and the
    /// same form (CUDA cores or tensor cores), so that each element of C
    /// is summed in the same order as in the whole product (the same bits).
    pub(crate) fn like(types: SkinnyTypes, dims: GemmDims, whole: Option<&SkinnyLaunch>) -> Option<SkinnyLaunch> {
        let small_n = whole.map_or(dims.n < dims.m, |w| w.small_n);
        let s = u32::try_from(if small_n { dims.n } else { dims.m }).ok()?;
        // W is op(B) (k x n) or op(A)^T (k x m): k contiguous when op(B) is
        // column-major, or op(A) row-major.
        let k_contiguous = if small_n { dims.a_layout == Layout::RowMajor } else { dims.b_layout == Layout::ColMajor };
        let layout = if k_contiguous { WLayout::KContiguous } else { WLayout::NContiguous };
        // X = op(A), or op(B)^T: its k contiguous when op(A) is row-major,
        // or op(B) column-major.
        let x_k_contiguous =
            if small_n { dims.b_layout == Layout::ColMajor } else { dims.a_layout == Layout::RowMajor };
        // i8 with W's N contiguous: the tensor-core form from 2 rows.
        let mma_first = layout == WLayout::NContiguous && x_k_contiguous && skinny::mma_wn_first(types, s);
        let cuda_cores = whole.map_or(s <= skinny::cuda_core_rows(types, layout) && !mma_first, |w| !w.mma);
        let (rows, mma) = if cuda_cores {
            (skinny::rows_for(types, s)?, false)
        } else if layout == WLayout::KContiguous && (x_k_contiguous || whole.is_some()) {
            // The tensor-core form copies X's tile 16 bytes at a time; with
            // X's k strided (the transposed form of a row-major B) it ran
            // 0.28-0.32x cuBLAS at 32 rows (NVIDIA H200, 2026-11-26), stage
            // 9 0.7x.
            (skinny::mma_rows_for(types, s)?, true)
        } else if layout == WLayout::NContiguous && (x_k_contiguous || whole.is_some()) {
            // i8 alone (`skinny_mma_wn`): W's bytes transposed in registers.
            // The other types take stage 9's narrow tiles there.
            (skinny::mma_wn_rows_for(types, s)?, true)
        } else {
            return None;
        };
        Some(SkinnyLaunch { types, rows, layout, mma, small_n, dims })
    }

    /// Columns of Y (the large side of C).
    pub(crate) fn wide(&self) -> usize {
        if self.small_n {
            self.dims.m
        } else {
            self.dims.n
        }
    }

    /// Whether X, whose k is strided, is copied k-contiguous first, for
    /// `count` products whose X matrices are `sx` elements apart (0: one
    /// for all): from [`X_COPY_MIN_ROWS`] rows on, A and B read, one X.
    pub(crate) fn copies_x(&self, count: usize, sx: usize) -> bool {
        let s = if self.small_n { self.dims.n } else { self.dims.m };
        let x_k_contiguous =
            if self.small_n { self.dims.b_layout == Layout::ColMajor } else { self.dims.a_layout == Layout::RowMajor };
        !x_k_contiguous && s >= X_COPY_MIN_ROWS && self.dims.k > 0 && (count == 1 || sx == 0)
    }

    /// The entry point.
    pub(crate) fn entry(&self) -> &'static str {
        if self.mma {
            mma_entry(self.types, self.rows, self.layout)
        } else {
            entry(self.types, self.rows, self.layout)
        }
    }
}

/// The fewest rows of X (C's small side) for which a token-sized product
/// whose X has its k strided copies X k-contiguous first
/// ([`SkinnyLaunch::copies_x`]): below, the element-by-element reads of X
/// cost less than the copy's launch (f32, NVIDIA H200, 2026-11-26: at 1
/// and 2 rows 4-7% over k contiguous, at 4 rows 24%).
const X_COPY_MIN_ROWS: usize = 4;

/// The entry point `skinny_<types>_s<rows>_<wk|wn>`
/// (`gemm_kernels::skinny::entry_points`).
fn entry(types: SkinnyTypes, rows: u32, layout: WLayout) -> &'static str {
    macro_rules! names {
        ($( ($name:ident, $t:ident, $s:literal, [$($l:ident),*]) )*) => {
            match (types, rows, layout.suffix()) {
                $($(
                    (SkinnyTypes::$t, $s, stringify!($l)) => concat!(stringify!($name), "_", stringify!($l)),
                )*)*
                // `SkinnyLaunch::new` asks only for what the menu has
                // (gemm-core's test).
                _ => unreachable!("no token-sized kernel {types:?} s{rows} {layout:?}"),
            }
        };
    }
    gemm_core::skinny_menu!(names)
}

/// The tensor-core form's entry point `skinny_<types>_s<rows>_mma` (W
/// K-contiguous) or `.._mma_wn` (N-contiguous).
fn mma_entry(types: SkinnyTypes, rows: u32, layout: WLayout) -> &'static str {
    macro_rules! names {
        ($( ($name:ident, $t:ident, $s:literal, $l:ident) )*) => {
            match (types, rows, layout.suffix()) {
                $( (SkinnyTypes::$t, $s, stringify!($l)) => stringify!($name), )*
                _ => unreachable!("no token-sized tensor-core kernel {types:?} s{rows} {layout:?}"),
            }
        };
    }
    gemm_core::skinny_mma_menu!(names)
}

/// Strides (elements) of (row, column) of a matrix stored so.
fn strides(layout: Layout, ld: usize) -> (u64, u64) {
    match layout {
        Layout::RowMajor => (ld as u64, 1),
        Layout::ColMajor => (1, ld as u64),
    }
}

/// Enqueues `count` products (element strides of A, B and C; 0: one matrix
/// for all) of the planned `launch` on `stream`.
pub(crate) fn enqueue<T: Scalar, C: Scalar>(
    launch: &SkinnyLaunch,
    device: &Arc<Device>,
    stream: &Arc<CudaStream>,
    (alpha, beta): (f64, f64),
    (a, b, c): Operands<'_, '_, '_, '_, T, C>,
    (count, [stride_a, stride_b, stride_c]): (usize, [usize; 3]),
) -> Result<(), Error> {
    let SkinnyLaunch { types, rows, layout, mma, small_n, dims: d } = *launch;
    let wide = launch.wide();
    if wide > i32::MAX as usize || d.k > i32::MAX as usize || count > u32::MAX as usize {
        return Err(Error::Unsupported {
            product: format!("{} x {} -> {}", T::NAME, T::NAME, C::NAME),
            why: format!(
                "{}x{}x{} in a batch of {count}: the token-sized kernel's sizes are 32-bit (below 2^31)",
                d.m, d.n, d.k
            ),
        });
    }
    let (a_r, a_c) = strides(d.a_layout, d.lda);
    let (b_r, b_c) = strides(d.b_layout, d.ldb);
    let (c_r, c_c) = strides(d.c_layout, d.ldc);
    // X(i, kk), W(kk, j), Y(i, j).
    let (x, x_rs, x_ks, w, ldw, y_rs, y_cs, s, sx, sw) = if small_n {
        (b, b_c, b_r, a, d.lda, c_c, c_r, d.n, stride_b, stride_a)
    } else {
        (a, a_r, a_c, b, d.ldb, c_r, c_c, d.m, stride_a, stride_b)
    };
    // X with its k strided (op(B)^T of a row-major B, or a column-major
    // op(A)) is read element by element, which cost the token-sized kernels
    // up to twice their time from 4 rows on (f32, 16 rows: 0.12 ms against
    // 0.066 ms with k contiguous; NVIDIA H200, 2026-11-26). There, a
    // k-contiguous copy of X first (one transpose launch; X is the small
    // operand), for one product or one X shared by a batch. The same sums
    // in the same order: the same bits.
    let x_copy = if x_ks != 1 && launch.copies_x(count, sx) {
        let op = TmaOperand { elem: size_of::<T>(), line: s, lines: d.k, ld: x_ks as usize, count: 1, stride: 0 };
        Some(transposed_copy(device, stream, TensorCoreStage::Warpgroup, op, x)?)
    } else {
        None
    };
    let x_view = x_copy.as_ref().map(|(copy, _)| copy.as_view());
    let (x, x_rs, x_ks, sx) = match (&x_view, &x_copy) {
        (Some(view), Some((_, t))) => (view, t.ld as u64, 1, 0),
        _ => (x, x_rs, x_ks, sx),
    };
    let func = device.warpgroup_function(launch.entry())?;
    let grid = skinny::grid(types, layout, wide as u32, count as u32);
    let cfg = LaunchConfig {
        grid_dim: (grid[0], grid[1], grid[2]),
        block_dim: (skinny::THREADS, 1, 1),
        shared_mem_bytes: skinny::smem_bytes(types, layout, rows, mma),
    };
    let (s, n, k, ldw, count) = (s as u32, wide as u32, d.k as u32, ldw as u64, count as u32);
    let (sx, sw, sy) = (sx as u64, sw as u64, stride_c as u64);
    let (a64, b64) = (alpha, beta);
    let (a32, b32) = (alpha as f32, beta as f32);
    let (ai, bi) = (alpha as i32, beta as i32);
    let mut builder = stream.launch_builder(&func);
    builder.arg(&s).arg(&n).arg(&k);
    match types {
        SkinnyTypes::F64 => builder.arg(&a64).arg(&b64),
        SkinnyTypes::S8 => builder.arg(&ai).arg(&bi),
        _ => builder.arg(&a32).arg(&b32),
    };
    builder.arg(x).arg(&x_rs).arg(&x_ks).arg(w).arg(&ldw);
    builder.arg(c).arg(&y_rs).arg(&y_cs).arg(&count).arg(&sx).arg(&sw).arg(&sy);
    // SAFETY: the arguments match the entry point's signature
    // (gemm_kernels::skinny::entry_points): scalars in the types' partial
    // sums, X and W read through the validated shapes and strides of A and
    // B (not read when k = 0), Y = C (or C^T) validated against its buffer
    // and not overlapping them; s <= rows; the geometry is gemm_core's.
    unsafe { builder.launch(cfg) }.during("cuLaunchKernel")?;
    drop(x_copy); // freed stream-ordered, after the launch
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(m: usize, n: usize, k: usize, a: Layout, b: Layout) -> GemmDims {
        let ld = |l: Layout, rows: usize, cols: usize| if l == Layout::RowMajor { cols } else { rows };
        GemmDims {
            m,
            n,
            k,
            lda: ld(a, m, k),
            ldb: ld(b, k, n),
            ldc: n,
            a_layout: a,
            b_layout: b,
            c_layout: Layout::RowMajor,
        }
    }

    #[test]
    fn the_small_side_is_x_and_w_keeps_its_contiguous_dimension() {
        use Layout::{ColMajor as C, RowMajor as R};
        // m small, a language model's weight as B column-major: k contiguous.
        let l = SkinnyLaunch::new(SkinnyTypes::Bf16, dims(4, 4096, 4096, R, C)).unwrap();
        assert_eq!((l.rows, l.layout, l.small_n, l.wide()), (4, WLayout::KContiguous, false, 4096));
        assert_eq!(l.entry(), "skinny_bf16_s4_wk");
        // B row-major: n contiguous.
        let l = SkinnyLaunch::new(SkinnyTypes::F16F32, dims(3, 4096, 4096, R, R)).unwrap();
        assert_eq!((l.rows, l.layout), (4, WLayout::NContiguous));
        assert_eq!(l.entry(), "skinny_f16_f32_s4_wn");
        // n small: W = op(A)^T, k contiguous when A is row-major.
        let l = SkinnyLaunch::new(SkinnyTypes::F64, dims(4096, 4, 4096, R, R)).unwrap();
        assert_eq!((l.rows, l.layout, l.small_n, l.wide()), (4, WLayout::KContiguous, true, 4096));
        let l = SkinnyLaunch::new(SkinnyTypes::S8, dims(4096, 1, 4096, C, R)).unwrap();
        assert_eq!((l.rows, l.layout, l.small_n), (1, WLayout::NContiguous, true));
        // 9 to 32 rows with k contiguous: the tensor-core form.
        let l = SkinnyLaunch::new(SkinnyTypes::F16, dims(9, 4096, 4096, R, C)).unwrap();
        assert_eq!((l.rows, l.mma, l.entry()), (16, true, "skinny_f16_s16_mma"));
        let l = SkinnyLaunch::new(SkinnyTypes::S8, dims(4096, 20, 4096, R, C)).unwrap();
        assert_eq!((l.rows, l.mma, l.small_n, l.entry()), (32, true, true, "skinny_s8_s32_mma"));
        // ... with X's k contiguous only (here X = B^T of a row-major B).
        assert!(SkinnyLaunch::new(SkinnyTypes::S8, dims(4096, 20, 4096, R, R)).is_none());
        assert!(SkinnyLaunch::new(SkinnyTypes::F16, dims(20, 4096, 4096, C, C)).is_none());
        // f32 on the CUDA cores up to 8 rows, f64 up to 4.
        let l = SkinnyLaunch::new(SkinnyTypes::F32, dims(5, 4096, 4096, R, R)).unwrap();
        assert_eq!((l.rows, l.mma, l.entry()), (8, false, "skinny_f32_s8_wn"));
        let l = SkinnyLaunch::new(SkinnyTypes::F64, dims(3, 4096, 4096, R, C)).unwrap();
        assert_eq!((l.rows, l.entry()), (4, "skinny_f64_s4_wk"));
        // f64 with W's n contiguous: stage 8 from 1 row.
        for m in [1, 4] {
            assert!(SkinnyLaunch::new(SkinnyTypes::F64, dims(m, 4096, 4096, R, R)).is_none());
        }
        // i8 with n contiguous: the tensor-core form from 2 rows (1 row on
        // the CUDA cores), the CUDA-core kernel where X's k is strided.
        for m in [2, 9] {
            let l = SkinnyLaunch::new(SkinnyTypes::S8, dims(m, 4096, 4096, R, R)).unwrap();
            assert_eq!((l.rows, l.mma, l.layout, l.entry()), (16, true, WLayout::NContiguous, "skinny_s8_s16_mma_wn"));
        }
        let l = SkinnyLaunch::new(SkinnyTypes::S8, dims(1, 4096, 4096, R, R)).unwrap();
        assert_eq!((l.mma, l.entry()), (false, "skinny_s8_s1_wn"));
        let l = SkinnyLaunch::new(SkinnyTypes::S8, dims(5, 4096, 4096, C, R)).unwrap();
        assert_eq!((l.mma, l.entry()), (false, "skinny_s8_s8_wn"));
        assert!(SkinnyLaunch::new(SkinnyTypes::S8, dims(65, 4096, 4096, R, R)).is_none());
        // Too many rows for the type and layout.
        assert!(SkinnyLaunch::new(SkinnyTypes::F16, dims(9, 4096, 4096, R, R)).is_none());
        assert!(SkinnyLaunch::new(SkinnyTypes::F64, dims(5, 4096, 4096, R, C)).is_none());
        assert!(SkinnyLaunch::new(SkinnyTypes::F32, dims(9, 4096, 4096, R, C)).is_none());
        assert!(SkinnyLaunch::new(SkinnyTypes::F16, dims(33, 4096, 4096, R, C)).is_none());
        assert!(SkinnyLaunch::new(SkinnyTypes::F32, dims(0, 4096, 4096, R, C)).is_none());
    }

    #[test]
    fn a_part_of_a_product_keeps_its_side_and_form() {
        use Layout::{ColMajor as C, RowMajor as R};
        let whole = SkinnyLaunch::new(SkinnyTypes::F16, dims(20, 4096, 4096, R, C)).unwrap();
        assert!(whole.mma && !whole.small_n);
        // A tile of 20 x 12 columns: n is now the smaller side, and 12 rows
        // alone would take the CUDA-core kernels.
        let part = SkinnyLaunch::like(SkinnyTypes::F16, dims(20, 12, 4096, R, C), Some(&whole)).unwrap();
        assert_eq!((part.small_n, part.mma, part.rows), (false, true, 32));
        let part = SkinnyLaunch::like(SkinnyTypes::F16, dims(5, 300, 4096, R, C), Some(&whole)).unwrap();
        assert_eq!((part.mma, part.rows), (true, 16));
    }
}
