//! Batches: which product of a launch a block computes.
//!
//! One launch computes many products C_i <- alpha op(A_i) op(B_i) + beta C_i
//! in one of two ways (the same entry points serve both):
//!
//! - **Strided**: `count` products of one shape, operand i at
//!   `base + i * stride` (stride 0 broadcasts one matrix to every product).
//!   Each product has the grid its configuration gives one product,
//!   (gx, gy) ([`crate::KernelConfig::geometry`]); the launch puts up to
//!   `per_x` products side by side along x and the rest along z:
//!   grid (per_x * gx, gy, ceil(count / per_x)), so batch counts past the z
//!   limit (65535) still fit ([`strided_grid`], [`strided_block`]).
//! - **Grouped**: a list of problems of any shapes ([`GroupProblem`], one per
//!   product, in device memory), each with its own grid; the launch is one
//!   dimensional over the blocks of all of them, and a block finds its
//!   problem by binary search over the problems' first blocks
//!   ([`group_block`]). A pointer-array batch (same shapes, unrelated
//!   addresses) is a group whose problems share a shape.
//!
//! The block then computes tile (bx, by) of its product's grid (gx, gy)
//! exactly as a single-product launch's block (bx, by) would.

use crate::shape::MatrixDims;

/// Whether a stage's kernels have a separate entry point for batches
/// (`<name>_batched`): the plain entry then computes one product only and
/// reads its pointers straight from its parameters. Stage 7's f32 kernels
/// need it: with pointers computed per product, ptxas gives the
/// 256-thread ones 167 registers instead of 127 (one block per SM instead of
/// two; capping them at 128 spills). Stage 8's too: its two fragment
/// buffers leave few registers, and the product's shape and pointers held in
/// registers across the main loop cost the warp tile of 32 x 32 the third
/// block per SM (168 registers or fewer) and made the block of 128 x 128
/// spill. The other kernels keep their occupancy with one entry for both.
pub const fn separate_batched_entry(stage: crate::Stage, precision: crate::Precision) -> bool {
    matches!(
        (stage, precision),
        (crate::Stage::Pipelined, crate::Precision::F32) | (crate::Stage::TensorCore, crate::Precision::F64)
    )
}

/// One product of a grouped launch, as the kernel reads it from device
/// memory (`#[repr(C)]`, 64 bytes): `C <- alpha * A * B + beta * C` in
/// kernel form (C row-major; A and B in the launch's layouts), addresses in
/// bytes, dimensions and leading dimensions in elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupProblem {
    /// Device address of A (m x k).
    pub a: u64,
    /// Device address of B (k x n).
    pub b: u64,
    /// Device address of C (m x n).
    pub c: u64,
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B (0: C <- beta * C, A and B not read).
    pub k: u32,
    /// Leading dimension of A.
    pub lda: u32,
    /// Leading dimension of B.
    pub ldb: u32,
    /// Leading dimension of C.
    pub ldc: u32,
    /// Index of the problem's first block in the launch: the sum of
    /// `grid_x * grid_y` over the problems before it.
    pub first_block: u32,
    /// The problem's grid along x, as one launch of it would have.
    pub grid_x: u32,
    /// The problem's grid along y.
    pub grid_y: u32,
    /// Zero (keeps the size a multiple of 16 bytes).
    pub pad: u32,
}

/// The grid of a strided batch of `count >= 1` products whose own grid is
/// (gx, gy): `per_x = min(count, max_x / gx)` products side by side along x,
/// `ceil(count / per_x)` along z. `None` when even that exceeds `max_z`
/// (or a product's grid is empty).
pub const fn strided_grid(product_grid: [u32; 2], count: u32, max_x: u32, max_z: u32) -> Option<[u32; 3]> {
    let [gx, gy] = product_grid;
    if gx == 0 || gy == 0 || count == 0 || gx > max_x {
        return None;
    }
    let fit = max_x / gx;
    let per_x = if count < fit { count } else { fit };
    let gz = count.div_ceil(per_x);
    if gz > max_z {
        return None;
    }
    Some([per_x * gx, gy, gz])
}

/// Product index and block (bx, by) within the product's grid of the block
/// `block` of a launch with grid x `grid_x` made by [`strided_grid`], for
/// products with grid x `product_grid_x`. The product index may reach past
/// the count in the last z slice: such a block has nothing to do.
#[inline(always)]
pub const fn strided_block(block: [u32; 3], grid_x: u32, product_grid_x: u32) -> (u32, [u32; 2]) {
    let per_x = grid_x / product_grid_x;
    let z = block[2] * per_x + block[0] / product_grid_x;
    (z, [block[0] % product_grid_x, block[1]])
}

/// The problem of block `t` in a grouped launch of `count >= 1` problems,
/// and the block (bx, by) within that problem's grid: the last problem whose
/// first block is at most `t` (problems with no blocks are skipped, as they
/// share their first block with the next). `first_block(i)` reads problem
/// i's [`GroupProblem::first_block`]; `grid_x` is that problem's grid along x.
#[inline(always)]
pub fn group_block(t: u32, count: u32, first_block: impl Fn(u32) -> u32) -> u32 {
    // Invariant: first_block(lo) <= t (problem 0 starts at block 0), and
    // every problem from hi on starts after t.
    let (mut lo, mut hi) = (0u32, count);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if first_block(mid) <= t {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Elements a strided batch spans: `(count - 1) * stride` plus one matrix's
/// [`MatrixDims::required_len`]; 0 when the batch or the matrix is empty;
/// `None` on overflow.
pub const fn batch_len(dims: &MatrixDims, count: usize, stride: usize) -> Option<usize> {
    let Some(one) = dims.required_len() else {
        return None;
    };
    if count == 0 || one == 0 {
        return Some(0);
    }
    match (count - 1).checked_mul(stride) {
        Some(x) => x.checked_add(one),
        None => None,
    }
}

/// Whether the `count` matrices of a strided batch (matrix i at element
/// `i * stride`) have pairwise disjoint elements, padding aside: matrices of
/// an output batch must. Interleaved batches (e.g. the columns blocks of a
/// row-major (row, batch, col) tensor) are disjoint; stride 0 with
/// `count > 1` is not.
pub const fn strided_disjoint(dims: &MatrixDims, count: usize, stride: usize) -> bool {
    let (outer, line) = dims.lines();
    if count <= 1 || outer == 0 || line == 0 {
        return true;
    }
    if stride == 0 {
        return false;
    }
    // Matrices q apart overlap iff d = q * stride = a * ld + b with
    // 0 <= a < outer and |b| < line; as ld >= line, only a = floor(d / ld)
    // (b = d mod ld) and a + 1 (b = d mod ld - ld) can work.
    let span = (outer - 1) * dims.ld + line;
    let mut q = 1;
    while q < count {
        let d = q * stride;
        if d >= span {
            return true; // and every later d is larger
        }
        let (a, r) = (d / dims.ld, d % dims.ld);
        if (a < outer && r < line) || (a + 1 < outer && dims.ld - r < line) {
            return false;
        }
        q += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn problem_is_64_bytes() {
        assert_eq!(core::mem::size_of::<GroupProblem>(), 64);
        assert_eq!(core::mem::align_of::<GroupProblem>(), 8);
    }

    proptest! {
        /// Every (product, block) pair of a strided batch is computed by
        /// exactly one block of the launch, and no other block has work.
        #[test]
        fn strided_blocks_cover_each_product_once(
            gx in 1u32..50, gy in 1u32..4, count in 1u32..3000, max_x in 1u32..400, max_z in 1u32..3000,
        ) {
            let Some(grid) = strided_grid([gx, gy], count, max_x, max_z) else {
                prop_assert!(gx > max_x || count.div_ceil((max_x / gx).min(count).max(1)) > max_z);
                return Ok(());
            };
            prop_assert!(grid[0] <= max_x && grid[2] <= max_z);
            let mut seen = std::collections::HashSet::new();
            for z in 0..grid[2] {
                for y in 0..grid[1] {
                    for x in 0..grid[0] {
                        let (p, b) = strided_block([x, y, z], grid[0], gx);
                        if p < count {
                            prop_assert!(b[0] < gx && b[1] < gy);
                            prop_assert!(seen.insert((p, b)));
                        }
                    }
                }
            }
            prop_assert_eq!(seen.len() as u64, count as u64 * gx as u64 * gy as u64);
        }

        /// The disjointness test agrees with counting the elements.
        #[test]
        fn strided_disjoint_matches_brute_force(
            rows in 1usize..6, cols in 1usize..6, pad in 0usize..4, col_major in any::<bool>(),
            count in 1usize..6, stride in 0usize..40,
        ) {
            let layout = if col_major { crate::Layout::ColMajor } else { crate::Layout::RowMajor };
            let line = if col_major { rows } else { cols };
            let dims = MatrixDims::new(rows, cols, layout, line + pad);
            let mut seen = std::collections::HashSet::new();
            let mut disjoint = true;
            for z in 0..count {
                for i in 0..rows {
                    for j in 0..cols {
                        disjoint &= seen.insert(z * stride + dims.offset(i, j));
                    }
                }
            }
            prop_assert_eq!(strided_disjoint(&dims, count, stride), disjoint);
            prop_assert_eq!(batch_len(&dims, count, stride), Some((count - 1) * stride + dims.required_len().unwrap()));
        }

        /// The binary search finds the problem that owns each block, skipping
        /// problems with no blocks.
        #[test]
        fn group_search_finds_the_owner(sizes in proptest::collection::vec(0u32..7, 1..40)) {
            let mut first = std::vec::Vec::new();
            let mut total = 0;
            for s in &sizes {
                first.push(total);
                total += s;
            }
            for t in 0..total {
                let p = group_block(t, sizes.len() as u32, |i| first[i as usize]);
                prop_assert!(first[p as usize] <= t && t < first[p as usize] + sizes[p as usize]);
            }
        }
    }
}
