//! The second pass of split-K (`gemm_core::split_k`): the sum of the partial
//! products, in slice order, into C.
//!
//! # Shapes
//! W holds `slices` partial products of m x n, each row-major with leading
//! dimension n, one after another (`m * n` elements apart); C is row-major
//! m x n with leading dimension ldc (elements).
//!
//! # Launch
//! A 1D grid of 1D blocks of any size; each thread walks the elements of C
//! (`VEC` at a time where m n is a multiple of it) with a grid-sized stride (`gemm_core::split_k::REDUCE_THREADS` per block,
//! the grid from `gemm_core::split_k::reduce_grid`).
//!
//! Each element is `alpha * (W_0 + W_1 + ... + W_{slices-1}) + beta * C`,
//! summed left to right, the same on every run (no atomics); `beta == 0`
//! never reads C. Memory-bound: the partials are read once, coalesced.
//!
//! # Source
//! CUTLASS's split-K reduction (NVIDIA, "CUTLASS: Fast Linear Algebra in
//! CUDA C++", `ReduceSplitK`).

use crate::element::Element;
use core::arch::nvptx;

/// The reduction (see the module docs). Where m n is a multiple of
/// `T::VEC` (`gemm_core::split_k::reduce_vector`), each thread sums `VEC`
/// consecutive elements of C: one 16-byte read of each slice and one
/// division for their row and column; otherwise one element.
///
/// # Safety
/// `w` points to `slices * m * n` readable elements of global memory,
/// 16-byte aligned, `c` to C (m x n, ldc >= n) in global memory, not
/// overlapping W.
#[inline(always)]
pub unsafe fn reduce<T: Element>(m: u32, n: u32, slices: u32, w: *const T, alpha: T, beta: T, c: *mut T, ldc: u32) {
    let elems = m as u64 * n as u64;
    // SAFETY: reading special registers has no preconditions.
    let (tid, block, threads, blocks) =
        unsafe { (nvptx::_thread_idx_x(), nvptx::_block_idx_x(), nvptx::_block_dim_x(), nvptx::_grid_dim_x()) };
    let step = threads as u64 * blocks as u64;
    let first = block as u64 * threads as u64 + tid as u64;
    let store = |row: u64, col: u64, sum: T| {
        let p = c.add((row * ldc as u64 + col) as usize);
        let out = if beta == T::ZERO { alpha * sum } else { T::fma(beta, T::ld_global(p), alpha * sum) };
        T::st_global(p, out);
    };
    // Row and column of element e: 32-bit division where m n fits.
    let place = |e: u64| {
        if elems <= u32::MAX as u64 {
            ((e as u32 / n) as u64, (e as u32 % n) as u64)
        } else {
            (e / n as u64, e % n as u64)
        }
    };
    let v = T::VEC as u64;
    if elems % v == 0 {
        let mut e = first * v;
        while e < elems {
            let mut sum = [T::ZERO; 4];
            T::ld_global_vec(w.add(e as usize), &mut sum);
            for s in 1..slices as u64 {
                let mut q = [T::ZERO; 4];
                T::ld_global_vec(w.add((s * elems + e) as usize), &mut q);
                for i in 0..T::VEC {
                    sum[i] = sum[i] + q[i];
                }
            }
            let (mut row, mut col) = place(e);
            for &x in sum.iter().take(T::VEC) {
                store(row, col, x);
                col += 1;
                if col == n as u64 {
                    (row, col) = (row + 1, 0);
                }
            }
            e += step * v;
        }
    } else {
        let mut e = first;
        while e < elems {
            let mut sum = T::ld_global(w.add(e as usize));
            for s in 1..slices as u64 {
                sum = sum + T::ld_global(w.add((s * elems + e) as usize));
            }
            let (row, col) = place(e);
            store(row, col, sum);
            e += step;
        }
    }
}

macro_rules! export_reduce {
    ($name:ident, $t:ty) => {
        #[doc = concat!("Entry point `", stringify!($name), "`: the split-K reduction in ", stringify!($t), ".")]
        ///
        /// # Safety
        /// As [`reduce`].
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
            m: u32,
            n: u32,
            slices: u32,
            w: *const $t,
            alpha: $t,
            beta: $t,
            c: *mut $t,
            ldc: u32,
        ) {
            reduce::<$t>(m, n, slices, w, alpha, beta, c, ldc)
        }
    };
}

export_reduce!(dgemm_split_k_reduce, f64);
export_reduce!(sgemm_split_k_reduce, f32);
