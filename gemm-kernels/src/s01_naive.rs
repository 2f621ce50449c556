//! Stage 1, naive: one thread per element of C, `C <- alpha * A * B + beta * C`.
//!
//! # Shapes
//! A m x k (lda), B k x n (ldb), C m x n (ldc), in elements; C row-major,
//! A and B row- or column-major (`A_COL`, `B_COL`; `crate::A_COL_MAJOR`).
//!
//! # Launch
//! Block Bx x By chosen at run time (any Bx * By <= 1024); grid
//! (ceil(m / Bx), ceil(n / By)); no shared memory
//! (`gemm_core::KernelConfig::Naive`).
//!
//! # Thread mapping
//! x walks down the rows of C: thread (x, y) of block (bx, by) owns
//! C(bx*Bx + x, by*By + y) (`gemm_core::config::naive_element`). The 32
//! lanes of a warp therefore read 32 rows of A that lie `lda` elements apart,
//! all read the same element of B, and write down a column of C: uncoalesced
//! for row-major storage. Stage 2 swaps the axes.
//!
//! # Source
//! Dharmaraj and Pampana, "Double-Precision Matrix Multiply on CUDA" (section 2: the naive algorithm and its Bx x By sweep), 0x7df, "CUDA basics part 2"
//! (the rectangular naive kernel with bounds checks).

use crate::element::Element;
use crate::thread::{at, block_dim, store_c, thread_idx, GemmArgs};
use gemm_core::config::naive_element;

/// Stage 1 (see the module docs).
///
/// # Safety
/// The pointers and leading dimensions of `g` must describe valid matrices of
/// the stated shapes; C must not alias A or B.
#[inline(always)]
pub unsafe fn naive<T: Element, const A_COL: bool, const B_COL: bool>(g: GemmArgs<T>) {
    one_thread_per_element::<T, false, A_COL, B_COL>(g)
}

/// The naive kernel with either thread mapping: `LANES_ALONG_N == false` is
/// stage 1, `true` is stage 2 ([`crate::s02_coalesced`]).
///
/// # Safety
/// As [`naive`].
#[inline(always)]
pub unsafe fn one_thread_per_element<T: Element, const LANES_ALONG_N: bool, const A_COL: bool, const B_COL: bool>(
    g: GemmArgs<T>,
) {
    let (row, col) = naive_element(LANES_ALONG_N, g.block, block_dim(), thread_idx());
    if row < g.m && col < g.n {
        // Row `row` of A and column `col` of B, one fma per term; the steps
        // along k are 1 or the leading dimension, by the operands' layouts.
        let a_row = g.a.add(at::<A_COL>(row, 0, g.lda));
        let b_col = g.b.add(at::<B_COL>(0, col, g.ldb));
        let a_step = if A_COL { g.lda as usize } else { 1 };
        let b_step = if B_COL { 1 } else { g.ldb as usize };
        let mut acc = T::ZERO;
        for p in 0..g.k as usize {
            acc = T::fma(T::ld_global(a_row.add(p * a_step)), T::ld_global(b_col.add(p * b_step)), acc);
        }
        store_c(g.c, row, col, g.ldc, acc, g.alpha, g.beta);
    }
}
