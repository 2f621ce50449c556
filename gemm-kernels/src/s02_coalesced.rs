//! Stage 2, coalesced: the naive kernel with the thread mapping turned so that
//! a warp's 32 lanes read 32 consecutive elements of a row of B and write 32
//! consecutive elements of a row of C (one memory transaction each), while
//! all lanes read the same element of A (a broadcast).
//!
//! # Shapes
//! A m x k (lda), B k x n (ldb), C m x n (ldc), in elements; C row-major,
//! A and B row- or column-major (`A_COL`, `B_COL`; `crate::A_COL_MAJOR`).
//!
//! # Launch
//! Block Bx x By chosen at run time (any Bx * By <= 1024); grid
//! (ceil(n / Bx), ceil(m / By)); no shared memory.
//!
//! # Thread mapping
//! Thread (x, y) of block (bx, by) owns C(by*By + y, bx*Bx + x). The
//! uncoalesced mapping stays selectable as stage 1 ([`crate::s01_naive`]),
//! with the same block shapes, so the two can be compared directly.
//!
//! # Source
//! Dharmaraj and Pampana, "Double-Precision Matrix Multiply on CUDA" (section 3.1.3, coalescing accesses to global memory; its naive
//! kernel already maps x to columns), 0x7df, "CUDA basics part 2".

use crate::element::Element;
use crate::s01_naive::one_thread_per_element;
use crate::thread::GemmArgs;

/// Stage 2 (see the module docs).
///
/// # Safety
/// As [`crate::s01_naive::naive`].
#[inline(always)]
pub unsafe fn coalesced<T: Element, const A_COL: bool, const B_COL: bool>(g: GemmArgs<T>) {
    one_thread_per_element::<T, true, A_COL, B_COL>(g)
}
