//! Which product of a launch this block computes, and where its operands lie
//! (strided and grouped batches; `gemm_core::batch` has the arithmetic and
//! the launch layout). A single product is a strided batch of one.

use crate::element::Element;
use crate::thread::{block_idx, grid_dim, GemmArgs};
use gemm_core::batch::{group_block, strided_block, GroupProblem};
use gemm_core::split_k::slice_k;

/// The arguments of this block's product, with [`GemmArgs::block`] and
/// [`GemmArgs::grid`] set, or `None` when the block has no product (the
/// tail of a strided launch's last z slice).
///
/// - `problems` null: a strided batch of `count` products of the shape in
///   `g`, whose grid along x is `g.grid[0]`; product i reads A, B and C at
///   `g.a + i * strides[0]` and so on (elements). With `k_slice` > 0 the
///   products are the slices of a split-K launch: product i's k is
///   `gemm_core::split_k::slice_k(k, k_slice, i)`.
/// - otherwise: a grouped launch of `count >= 1` problems, read from
///   `problems` (`g`'s shape, pointers and strides are unused; alpha and
///   beta are the launch's).
///
/// # Safety
/// `problems` is null or points to `count` problems in device memory whose
/// blocks tile the launch's x dimension as [`GroupProblem::first_block`]
/// says; the strided operands lie inside their buffers for every product.
#[inline(always)]
pub unsafe fn locate<T: Element>(
    mut g: GemmArgs<T>,
    count: u32,
    strides: [u64; 3],
    problems: *const GroupProblem,
    k_slice: u32,
) -> Option<GemmArgs<T>> {
    let block = block_idx();
    if problems.is_null() {
        let (z, b) = strided_block(block, grid_dim()[0], g.grid[0]);
        if z >= count {
            return None;
        }
        g.k = slice_k(g.k, k_slice, z);
        let z = z as usize;
        g.a = g.a.add(z * strides[0] as usize);
        g.b = g.b.add(z * strides[1] as usize);
        g.c = g.c.add(z * strides[2] as usize);
        g.block = b;
        g.grid = [g.grid[0], grid_dim()[1]];
        Some(g)
    } else {
        let t = block[0];
        let i = group_block(t, count, |i| (*problems.add(i as usize)).first_block);
        let p = *problems.add(i as usize);
        let local = t - p.first_block;
        g.m = p.m;
        g.n = p.n;
        g.k = p.k;
        g.a = p.a as usize as *const T;
        g.b = p.b as usize as *const T;
        g.c = p.c as usize as *mut T;
        g.lda = p.lda;
        g.ldb = p.ldb;
        g.ldc = p.ldc;
        g.block = [local % p.grid_x, local / p.grid_x];
        g.grid = [p.grid_x, p.grid_y];
        Some(g)
    }
}
