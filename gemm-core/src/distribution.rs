//! How a product is spread over several GPUs: the split of C for host
//! products over a device group, and the 2D block-cyclic layout of
//! distributed matrices (the layout of ScaLAPACK and PBLAS: Choi, Dongarra,
//! Ostrouchov, Petitet, Walker and Whaley, "The design and implementation of
//! the ScaLAPACK LU, QR, and Cholesky factorization routines"), which SUMMA
//! multiplies (van de Geijn and Watts, "SUMMA: scalable universal matrix
//! multiplication algorithm").
//!
//! Pure arithmetic, no device: the host crate plans with it and the tests
//! check it on the CPU.

use core::ops::Range;

/// A grid of `rows x cols` parts: the GPUs a host product's C is split
/// over, or the processes (ranks) a distributed matrix is dealt to. Ranks
/// are numbered row-major, as BLACS's default ordering: rank
/// `row * cols + col`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Grid {
    /// Rows of the grid (process rows, `P_r`).
    pub rows: usize,
    /// Columns of the grid (process columns, `P_c`).
    pub cols: usize,
}

impl Grid {
    /// A `rows x cols` grid.
    pub const fn new(rows: usize, cols: usize) -> Self {
        Grid { rows, cols }
    }

    /// Parts (ranks) in the grid.
    pub const fn size(&self) -> usize {
        self.rows * self.cols
    }

    /// The rank at grid row `row`, column `col` (row-major).
    pub const fn rank(&self, row: usize, col: usize) -> usize {
        row * self.cols + col
    }

    /// The (row, column) of `rank`.
    pub const fn coords(&self, rank: usize) -> (usize, usize) {
        (rank / self.cols, rank % self.cols)
    }
}

impl core::fmt::Display for Grid {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} x {}", self.rows, self.cols)
    }
}

/// The split of an m x n C (inner dimension k) over `devices` GPUs for a
/// host product: the `rows x cols` grid of blocks of C, one per GPU, that
/// uploads the fewest bytes of A and B. The GPU at grid (i, j) uploads the
/// rows of A and the columns of B its block needs, `(m / rows + n / cols) k`
/// elements, and every grid moves the same bytes of C; so with 2 GPUs a
/// C with m >= n is split by rows, else by columns, and 4 GPUs take a 2 x 2
/// grid for a square C. Ties go to more grid rows. `devices = 0` is taken
/// as 1.
///
/// ```
/// use gemm_core::distribution::{device_grid, Grid};
/// assert_eq!(device_grid(16384, 16384, 16384, 2), Grid::new(2, 1));
/// assert_eq!(device_grid(100, 50_000, 4096, 2), Grid::new(1, 2));
/// assert_eq!(device_grid(8192, 8192, 8192, 4), Grid::new(2, 2));
/// ```
pub fn device_grid(m: usize, n: usize, k: usize, devices: usize) -> Grid {
    let devices = devices.max(1);
    let cost = |g: Grid| {
        // Elements uploaded per GPU for A and B (k = 0: none), then the
        // larger block of C as a tie-break.
        let (rows, cols) = (m.div_ceil(g.rows), n.div_ceil(g.cols));
        ((rows + cols) as u128 * k as u128, rows as u128 * cols as u128)
    };
    (1..=devices)
        .rev()
        .filter(|r| devices % r == 0)
        .map(|r| Grid::new(r, devices / r))
        .min_by_key(|&g| cost(g))
        .expect("1 divides every count")
}

/// Part `p` of `len` cut into `parts` consecutive ranges as even as
/// possible, with every boundary on a multiple of `quantum` (the last range
/// takes the remainder): the rows or columns of C the GPU at grid row (or
/// column) `p` of a host product computes. Ranges are empty where `len` has
/// fewer quanta than `parts`. `parts = 0` is taken as 1, `quantum = 0` as 1.
///
/// ```
/// use gemm_core::distribution::even_range;
/// assert_eq!((even_range(1000, 2, 128, 0), even_range(1000, 2, 128, 1)), (0..512, 512..1000));
/// assert_eq!((even_range(100, 3, 128, 0), even_range(100, 3, 128, 2)), (0..100, 100..100));
/// ```
pub fn even_range(len: usize, parts: usize, quantum: usize, p: usize) -> Range<usize> {
    let (parts, quantum) = (parts.max(1), quantum.max(1));
    let quanta = len.div_ceil(quantum);
    let (each, extra) = (quanta / parts, quanta % parts);
    // Parts before p: `each` quanta each, one more for the first `extra`.
    let start_quanta = p * each + p.min(extra);
    let start = (start_quanta * quantum).min(len);
    let end = ((start_quanta + each + usize::from(p < extra)) * quantum).min(len);
    start..end
}

/// How many of `n` rows (or columns), dealt in blocks of `nb` cyclically
/// over `procs` processes starting at process 0, process `p` holds
/// (ScaLAPACK's NUMROC). `nb` and `procs` must be at least 1.
///
/// ```
/// use gemm_core::distribution::local_count;
/// // 10 rows in blocks of 3 over 2 processes: 0 holds blocks 0 and 2 (rows 0-2, 6-8), 1 holds 3-5 and 9.
/// assert_eq!((local_count(10, 3, 0, 2), local_count(10, 3, 1, 2)), (6, 4));
/// ```
pub fn local_count(n: usize, nb: usize, p: usize, procs: usize) -> usize {
    let blocks = n / nb; // whole blocks
    let mut count = (blocks / procs) * nb;
    let extra = blocks % procs;
    if p < extra {
        count += nb;
    } else if p == extra {
        count += n % nb; // the last, partial block
    }
    count
}

/// Where global row (or column) `i` lives: (process, local index) for
/// blocks of `nb` dealt cyclically over `procs` processes from process 0.
pub fn global_to_local(i: usize, nb: usize, procs: usize) -> (usize, usize) {
    let block = i / nb;
    (block % procs, (block / procs) * nb + i % nb)
}

/// The global row (or column) of local index `l` on process `p` (the
/// inverse of [`global_to_local`]).
pub fn local_to_global(l: usize, nb: usize, p: usize, procs: usize) -> usize {
    ((l / nb) * procs + p) * nb + l % nb
}

/// One k panel of SUMMA on a 2D block-cyclic product: global k in
/// `k0..k0 + width`, held by process column `a_col` (in A's local columns
/// from `a_local`) and by process row `b_row` (in B's local rows from
/// `b_local`). A's column blocks and B's row blocks are both `kb` wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KPanel {
    /// The panel's first global index along k.
    pub k0: usize,
    /// Its width (`kb`, less for the last).
    pub width: usize,
    /// The process column holding A's columns `k0..k0 + width`.
    pub a_col: usize,
    /// Their first local column there.
    pub a_local: usize,
    /// The process row holding B's rows `k0..k0 + width`.
    pub b_row: usize,
    /// Their first local row there.
    pub b_local: usize,
}

/// The k panels of SUMMA, one per block of `kb` along k, in order
/// (`kb = 0` is taken as 1).
///
/// ```
/// use gemm_core::distribution::{k_panels, Grid};
/// let p: Vec<_> = k_panels(10, 4, Grid::new(2, 3)).collect();
/// assert_eq!(p.len(), 3);
/// assert_eq!((p[2].k0, p[2].width, p[2].a_col, p[2].a_local, p[2].b_row, p[2].b_local), (8, 2, 2, 0, 0, 4));
/// ```
pub fn k_panels(k: usize, kb: usize, grid: Grid) -> impl Iterator<Item = KPanel> {
    let kb = kb.max(1);
    (0..k.div_ceil(kb)).map(move |l| KPanel {
        k0: l * kb,
        width: kb.min(k - l * kb),
        a_col: l % grid.cols,
        a_local: (l / grid.cols) * kb,
        b_row: l % grid.rows,
        b_local: (l / grid.rows) * kb,
    })
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn local_counts_sum_and_indices_round_trip() {
        for (n, nb, procs) in [(10, 3, 2), (1, 1, 1), (0, 4, 3), (1000, 128, 3), (7, 8, 4), (4096, 256, 2)] {
            let total: usize = (0..procs).map(|p| local_count(n, nb, p, procs)).sum();
            assert_eq!(total, n, "{n} {nb} {procs}");
            let mut seen = vec![0usize; procs];
            for i in 0..n {
                let (p, l) = global_to_local(i, nb, procs);
                assert_eq!(l, seen[p], "local indices are dense and in order");
                seen[p] += 1;
                assert_eq!(local_to_global(l, nb, p, procs), i);
            }
            for (p, &count) in seen.iter().enumerate() {
                assert_eq!(count, local_count(n, nb, p, procs));
            }
        }
    }

    #[test]
    fn even_ranges_cover_in_order() {
        for (len, parts, q) in [(1000, 2, 128), (0, 3, 128), (5, 8, 1), (16384, 4, 128), (129, 2, 128)] {
            let r: Vec<_> = (0..parts).map(|p| even_range(len, parts, q, p)).collect();
            assert_eq!(r.len(), parts);
            assert_eq!(r[0].start, 0);
            assert_eq!(r.last().unwrap().end, len);
            for w in r.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert!(w[0].end == len || w[0].end % q == 0);
            }
        }
        assert_eq!(vec![even_range(16384, 2, 128, 0), even_range(16384, 2, 128, 1)], vec![0..8192, 8192..16384]);
    }

    #[test]
    fn device_grids_use_every_device() {
        for g in 1..=8 {
            for (m, n, k) in [(1, 1, 1), (16384, 16384, 16384), (64, 100000, 512), (100000, 64, 0)] {
                assert_eq!(device_grid(m, n, k, g).size(), g);
            }
        }
        assert_eq!(device_grid(16384, 16384, 16384, 1), Grid::new(1, 1));
        assert_eq!(device_grid(64, 100000, 512, 8), Grid::new(1, 8));
    }

    #[test]
    fn panels_walk_k_in_order() {
        let grid = Grid::new(2, 2);
        let panels: Vec<_> = k_panels(1000, 128, grid).collect();
        assert_eq!(panels.iter().map(|p| p.width).sum::<usize>(), 1000);
        for p in &panels {
            // The panel's A columns and B rows are where the block-cyclic layout puts them.
            assert_eq!(global_to_local(p.k0, 128, grid.cols), (p.a_col, p.a_local));
            assert_eq!(global_to_local(p.k0, 128, grid.rows), (p.b_row, p.b_local));
        }
        assert_eq!(k_panels(0, 128, grid).count(), 0);
    }
}
