//! Matrices distributed 2D block-cyclically over the GPUs of a process
//! grid, the layout of ScaLAPACK and PBLAS (Choi, Dongarra, Ostrouchov,
//! Petitet, Walker and Whaley, "The design and implementation of the
//! ScaLAPACK LU, QR, and Cholesky factorization routines"), which
//! [`crate::Gemm::run_distributed`] multiplies by SUMMA (van de Geijn and
//! Watts, "SUMMA: scalable universal matrix multiplication algorithm").
//!
//! # Layout
//! - **Process grid** ([`ProcessGrid`]): `P_r x P_c` ranks, numbered
//!   row-major (rank `r` is grid row `r / P_c`, column `r % P_c`), one GPU
//!   each: `devices[r]` with [`ProcessGrid::from_devices`], or the GPU a
//!   process passes with [`ProcessGrid::from_rank`].
//! - **Blocks** ([`BlockCyclic`]): an `m x n` matrix is cut into `mb x nb`
//!   blocks (the last block row and column may be shorter). Block `(I, J)`
//!   (rows `I mb ..`, columns `J nb ..`) lives on the rank at grid row
//!   `I mod P_r`, grid column `J mod P_c`; the source (first) process is
//!   (0, 0).
//! - **Local storage**: each rank holds its blocks as one row-major
//!   [`crate::DeviceMatrix`] of `local_count(m, mb, row, P_r) x
//!   local_count(n, nb, col, P_c)` elements (ScaLAPACK's NUMROC,
//!   [`gemm_core::distribution::local_count`]), leading dimension = its
//!   columns, on the rank's GPU: global element `(i, j)` is local element
//!   `((i / (mb P_r)) mb + i mod mb, (j / (nb P_c)) nb + j mod nb)` on the
//!   rank owning its block ([`BlockCyclic::owner`]). A rank with no blocks
//!   holds an empty matrix.

use crate::device::nccl::{CommGroup, NcclId};
use crate::device::Device;
use crate::element::Scalar;
use crate::error::{DriverContext, Error};
use crate::operands::device_matrix::{DeviceMatrix, DeviceView, DeviceViewMut};
use crate::operands::matrix::{MatMut, MatRef, Matrix};
use gemm_core::distribution::{global_to_local, local_count, local_to_global, Grid};
use std::sync::Arc;
use std::time::Duration;

/// A grid of GPUs that distributed matrices are dealt to ([`DistMatrix`]),
/// with its NCCL communicators (one per grid row and per grid column of
/// more than one GPU), two streams per GPU (products, communication), and
/// a watchdog timeout (default 60 s, [`ProcessGrid::timeout`]). Cheap to
/// clone (shared); matrices keep the grid they were made on, and a product
/// needs its three matrices on one grid (the same object, or clones of it).
///
/// NCCL is loaded at run time (cudarc looks for `libnccl.so`; where only
/// `libnccl.so.2` is installed, add a `libnccl.so` symlink or put its
/// folder on `LD_LIBRARY_PATH`). A 1 x 1 grid needs no NCCL.
///
/// ```no_run
/// use gemm::{DistMatrix, Gemm, Matrix, ProcessGrid};
/// # fn main() -> Result<(), gemm::Error> {
/// let devices = [gemm::Device::new(0)?, gemm::Device::new(1)?];
/// let grid = ProcessGrid::from_devices(&devices, 1, 2)?; // 1 x 2 grid, one process
/// let a = Matrix::<f64>::from_fn(1000, 800, |i, j| (i + j) as f64);
/// let b = Matrix::<f64>::from_fn(800, 600, |i, j| (i * j % 7) as f64);
/// let da = DistMatrix::from_host(&grid, &a, 256, 256)?;
/// let db = DistMatrix::from_host(&grid, &b, 256, 256)?;
/// let mut dc = DistMatrix::<f64>::zeros(&grid, 1000, 600, 256, 256)?;
/// Gemm::new().run_distributed(&da, &db, &mut dc)?; // C = A B by SUMMA
/// let mut c = Matrix::<f64>::zeros(1000, 600);
/// dc.to_host(&mut c)?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ProcessGrid {
    pub(crate) group: Arc<CommGroup>,
}

impl core::fmt::Debug for ProcessGrid {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ProcessGrid")
            .field("grid", &self.group.grid)
            .field("local_ranks", &self.local_ranks())
            .field("timeout", &self.group.timeout())
            .finish()
    }
}

impl ProcessGrid {
    /// A `rows x cols` grid driven by this one process (as
    /// `ncclCommInitAll`): rank r (grid row `r / cols`, column `r % cols`)
    /// on `devices[r]`. Makes each grid row's and column's communicator
    /// and runs one small broadcast on each (NCCL connects its peers
    /// there).
    ///
    /// # Errors
    /// [`Error::DeviceGroup`] when `rows * cols` is not the number of
    /// devices, a dimension is 0, a GPU is listed twice, or NCCL cannot be
    /// loaded (a grid of more than one GPU); [`Error::Collective`] when
    /// NCCL fails; [`Error::Driver`].
    pub fn from_devices(devices: &[Arc<Device>], rows: usize, cols: usize) -> Result<ProcessGrid, Error> {
        let grid = checked_grid(rows, cols)?;
        if devices.len() != grid.size() {
            return Err(Error::DeviceGroup {
                why: format!("a {grid} grid needs {} GPUs; {} were given", grid.size(), devices.len()),
            });
        }
        for (i, d) in devices.iter().enumerate() {
            if let Some(j) = devices[..i].iter().position(|e| e.same_context(d)) {
                return Err(Error::DeviceGroup {
                    why: format!("devices {j} and {i} are the same GPU ({}); each rank needs its own", d.name()),
                });
            }
        }
        Ok(ProcessGrid { group: Arc::new(CommGroup::from_devices(devices, grid)?) })
    }

    /// A fresh NCCL unique id for [`ProcessGrid::from_rank`]: made by one
    /// process (rank 0, say) and sent to the others as its bytes
    /// ([`NcclId::to_bytes`]).
    ///
    /// # Errors
    /// [`Error::DeviceGroup`] when NCCL cannot be loaded;
    /// [`Error::Collective`] when NCCL fails.
    pub fn unique_id() -> Result<NcclId, Error> {
        NcclId::new()
    }

    /// Rank `rank` of a `rows x cols` grid with one process (or thread)
    /// per GPU, on `device`: every rank calls it with the same `id`
    /// ([`ProcessGrid::unique_id`], made once and shared), and it blocks
    /// until all have (NCCL's `ncclCommInitRank`, then `ncclCommSplit` into
    /// the row and column communicators). The form that extends past one
    /// host.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), gemm::Error> {
    /// # let (rank, bytes) = (0usize, [0u8; 128]);
    /// // In each of 2 processes (rank from the launcher, id from rank 0):
    /// let id = gemm::NcclId::from_bytes(&bytes);
    /// let grid = gemm::ProcessGrid::from_rank(&gemm::Device::new(rank)?, rank, 2, 1, &id)?;
    /// assert_eq!(grid.local_ranks(), vec![rank]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::DeviceGroup`] for a rank outside the grid or without NCCL;
    /// [`Error::Collective`] when NCCL fails.
    pub fn from_rank(
        device: &Arc<Device>,
        rank: usize,
        rows: usize,
        cols: usize,
        id: &NcclId,
    ) -> Result<ProcessGrid, Error> {
        let grid = checked_grid(rows, cols)?;
        if rank >= grid.size() {
            return Err(Error::DeviceGroup { why: format!("rank {rank} is outside a {grid} grid") });
        }
        Ok(ProcessGrid { group: Arc::new(CommGroup::from_rank(device, rank, grid, id)?) })
    }

    /// Sets the watchdog of the grid's calls (default 60 s): a call whose
    /// work has not finished on every local rank after `t` (a peer failed
    /// or stalled) aborts the communicators and returns
    /// [`Error::Collective`]. It must exceed the longest product's time.
    pub fn timeout(self, t: Duration) -> Self {
        self.group.set_timeout(t);
        self
    }

    /// The grid's rows and columns.
    pub fn grid(&self) -> Grid {
        self.group.grid
    }

    /// The ranks this process drives: all of them with
    /// [`ProcessGrid::from_devices`], its own with [`ProcessGrid::from_rank`].
    pub fn local_ranks(&self) -> Vec<usize> {
        self.group.ranks.iter().map(|s| s.rank).collect()
    }

    /// The GPU of local rank `rank`, if this process drives it.
    pub fn device(&self, rank: usize) -> Option<&Arc<Device>> {
        self.group.ranks.iter().find(|s| s.rank == rank).map(|s| &s.device)
    }

    /// Whether the grid's communicators were aborted by a failed call (it
    /// cannot be used again: make a new one), and why.
    pub fn failure(&self) -> Option<String> {
        self.group.failed()
    }

    /// Tests only: makes `rank` skip its panel copies and broadcasts in the
    /// next [`crate::Gemm::run_distributed`] on this grid, so that its
    /// peers wait for them and the watchdog ends the call.
    #[doc(hidden)]
    pub fn inject_fault(&self, rank: usize) {
        self.group.set_fault(rank);
    }

    /// Whether two handles are the same grid.
    pub(crate) fn same(&self, other: &ProcessGrid) -> bool {
        Arc::ptr_eq(&self.group, &other.group)
    }
}

fn checked_grid(rows: usize, cols: usize) -> Result<Grid, Error> {
    if rows == 0 || cols == 0 {
        return Err(Error::DeviceGroup { why: format!("a {rows} x {cols} grid has no ranks") });
    }
    Ok(Grid::new(rows, cols))
}

/// The 2D block-cyclic layout of an `m x n` matrix in `mb x nb` blocks over
/// `grid` (see the module docs of [`DistMatrix`]): a plain descriptor,
/// checked by [`BlockCyclic::new`] / [`BlockCyclic::check`].
///
/// ```
/// use gemm::BlockCyclic;
/// use gemm::Grid;
/// let l = BlockCyclic::new(10, 7, 3, 4, Grid::new(2, 2))?;
/// assert_eq!(l.owner(4, 5), 3);                 // block (1, 1): grid (1, 1)
/// assert_eq!(l.local_shape(0), (6, 4));         // rows 0-2, 6-8; columns 0-3
/// assert_eq!(l.global_to_local(7, 5), (1, 4, 1)); // rank 1, local (4, 1)
/// # Ok::<(), gemm::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockCyclic {
    /// Rows of the matrix.
    pub m: usize,
    /// Columns of the matrix.
    pub n: usize,
    /// Rows of a block.
    pub mb: usize,
    /// Columns of a block.
    pub nb: usize,
    /// The process grid (rows, columns).
    pub grid: Grid,
}

impl BlockCyclic {
    /// The layout, checked ([`BlockCyclic::check`]).
    ///
    /// # Errors
    /// As [`BlockCyclic::check`].
    pub fn new(m: usize, n: usize, mb: usize, nb: usize, grid: Grid) -> Result<Self, Error> {
        let l = BlockCyclic { m, n, mb, nb, grid };
        l.check()?;
        Ok(l)
    }

    /// Checks the descriptor on the CPU.
    ///
    /// # Errors
    /// [`Error::Distribution`] when a block size is 0 or a grid dimension
    /// is 0; [`Error::Shape`] when a dimension exceeds the library's limit.
    pub fn check(&self) -> Result<(), Error> {
        if self.mb == 0 || self.nb == 0 {
            return Err(Error::Distribution {
                why: format!("blocks of {} x {}: block sizes must be at least 1", self.mb, self.nb),
            });
        }
        if self.grid.rows == 0 || self.grid.cols == 0 {
            return Err(Error::Distribution { why: format!("a {} grid has no ranks", self.grid) });
        }
        let max = gemm_core::shape::MAX_DIM;
        for v in [self.m, self.n] {
            if v > max {
                return Err(
                    gemm_core::ShapeError::TooLarge { operand: gemm_core::Operand::Matrix, value: v, max }.into()
                );
            }
        }
        Ok(())
    }

    /// The layout of the transpose on the same grid ([`DistMatrix::transpose`]):
    /// `n x m` in `nb x mb` blocks.
    pub fn transposed(&self) -> BlockCyclic {
        BlockCyclic { m: self.n, n: self.m, mb: self.nb, nb: self.mb, grid: self.grid }
    }

    /// The rank holding global element `(i, j)`.
    pub fn owner(&self, i: usize, j: usize) -> usize {
        self.global_to_local(i, j).0
    }

    /// (rank, local row, local column) of global element `(i, j)`.
    pub fn global_to_local(&self, i: usize, j: usize) -> (usize, usize, usize) {
        let (pr, li) = global_to_local(i, self.mb, self.grid.rows);
        let (pc, lj) = global_to_local(j, self.nb, self.grid.cols);
        (self.grid.rank(pr, pc), li, lj)
    }

    /// The global (row, column) of local element `(li, lj)` of `rank`.
    pub fn local_to_global(&self, rank: usize, li: usize, lj: usize) -> (usize, usize) {
        let (pr, pc) = self.grid.coords(rank);
        (local_to_global(li, self.mb, pr, self.grid.rows), local_to_global(lj, self.nb, pc, self.grid.cols))
    }

    /// The local matrix's rows and columns on `rank`.
    pub fn local_shape(&self, rank: usize) -> (usize, usize) {
        let (pr, pc) = self.grid.coords(rank);
        (local_count(self.m, self.mb, pr, self.grid.rows), local_count(self.n, self.nb, pc, self.grid.cols))
    }
}

/// A matrix distributed 2D block-cyclically over a [`ProcessGrid`]: each
/// rank this process drives holds its blocks in a row-major
/// [`DeviceMatrix`] on its GPU (layout: [`BlockCyclic`] and the module
/// docs: `local_count(m, mb, row, P_r) x local_count(n, nb, col, P_c)`,
/// leading dimension its columns). Multiplied by
/// [`crate::Gemm::run_distributed`].
///
/// ```no_run
/// use gemm::{DistMatrix, Matrix, ProcessGrid};
/// # fn main() -> Result<(), gemm::Error> {
/// let grid = ProcessGrid::from_devices(&[gemm::default_device()?], 1, 1)?; // a group of one
/// let a = Matrix::<f32>::from_fn(300, 200, |i, j| (i + j) as f32);
/// let d = DistMatrix::from_host(&grid, &a, 64, 64)?;
/// assert_eq!(d.layout().local_shape(0), (300, 200));
/// let mut back = Matrix::<f32>::zeros(300, 200);
/// d.to_host(&mut back)?;
/// assert_eq!(back.as_slice(), a.as_slice());
/// # Ok(()) }
/// ```
pub struct DistMatrix<T> {
    pub(crate) grid: ProcessGrid,
    pub(crate) layout: BlockCyclic,
    /// (rank, its local matrix), for the ranks this process drives, in
    /// the grid's order of local ranks.
    pub(crate) locals: Vec<(usize, DeviceMatrix<T>)>,
}

impl<T> core::fmt::Debug for DistMatrix<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DistMatrix").field("layout", &self.layout).finish()
    }
}

impl<T: Scalar> DistMatrix<T> {
    fn layout_on(grid: &ProcessGrid, m: usize, n: usize, mb: usize, nb: usize) -> Result<BlockCyclic, Error> {
        BlockCyclic::new(m, n, mb, nb, grid.grid())
    }

    /// An `m x n` matrix of zeros in `mb x nb` blocks over `grid` (the
    /// local matrices of the ranks this process drives).
    ///
    /// # Errors
    /// [`Error::Distribution`] for a block size of 0; [`Error::OutOfMemory`],
    /// [`Error::Driver`].
    pub fn zeros(grid: &ProcessGrid, m: usize, n: usize, mb: usize, nb: usize) -> Result<Self, Error> {
        let layout = Self::layout_on(grid, m, n, mb, nb)?;
        let mut locals = Vec::new();
        for s in &grid.group.ranks {
            let (rows, cols) = layout.local_shape(s.rank);
            locals.push((s.rank, DeviceMatrix::zeros(&s.device, rows, cols)?));
        }
        Ok(DistMatrix { grid: grid.clone(), layout, locals })
    }

    /// Deals a host matrix (any layout, view or leading dimension) to the
    /// grid in `mb x nb` blocks: every process passes the whole matrix,
    /// and each rank it drives uploads its blocks. Blocks until copied.
    ///
    /// # Errors
    /// As [`DistMatrix::zeros`].
    pub fn from_host<'a>(grid: &ProcessGrid, a: impl Into<MatRef<'a, T>>, mb: usize, nb: usize) -> Result<Self, Error> {
        use rayon::prelude::*;
        let a = a.into();
        let layout = Self::layout_on(grid, a.rows(), a.cols(), mb, nb)?;
        let mut locals = Vec::new();
        for s in &grid.group.ranks {
            let (rows, cols) = layout.local_shape(s.rank);
            // Gathered in parallel, a local row per task.
            let (rank, mut data) = (s.rank, vec![T::default(); rows * cols]);
            data.par_chunks_mut(cols.max(1)).enumerate().for_each(|(li, line)| {
                for (lj, x) in line.iter_mut().enumerate() {
                    let (i, j) = layout.local_to_global(rank, li, lj);
                    *x = a.get(i, j).expect("inside the matrix");
                }
            });
            let local = Matrix::from_vec_in(rows, cols, gemm_core::Layout::RowMajor, cols.max(1), data)?;
            let d = DeviceMatrix::from_host(&s.device, &local)?;
            locals.push((s.rank, d));
        }
        Ok(DistMatrix { grid: grid.clone(), layout, locals })
    }

    /// Writes the blocks of the ranks this process drives (all of them
    /// with [`ProcessGrid::from_devices`]) into `c`, a host matrix or view
    /// of `m x n` (any layout); its padding and the elements of other
    /// processes' ranks are left as they were. Blocks.
    ///
    /// # Errors
    /// [`Error::Shape`] when `c` is not `m x n`; [`Error::Driver`].
    pub fn to_host<'a>(&self, c: impl Into<MatMut<'a, T>>) -> Result<(), Error> {
        let mut c = c.into();
        self.check_shape(c.rows(), c.cols())?;
        let mut hosts: Vec<Option<Matrix<T>>> = vec![None; self.grid.grid().size()];
        for (rank, local) in &self.locals {
            hosts[*rank] = Some(local.to_host()?);
        }
        // Scattered in parallel, a line of C per task; each element is
        // read from the local matrix that holds it, where this process
        // drives its rank.
        let (layout, row_major) = (self.layout, c.layout() == gemm_core::Layout::RowMajor);
        c.par_lines_mut(|line, out| {
            for (x, v) in out.iter_mut().enumerate() {
                let (i, j) = if row_major { (line, x) } else { (x, line) };
                let (rank, li, lj) = layout.global_to_local(i, j);
                if let Some(h) = &hosts[rank] {
                    *v = h[(li, lj)];
                }
            }
        });
        Ok(())
    }

    /// Deals a matrix on one GPU of this process to the grid (staged
    /// through host memory: copied down once, then uploaded block by
    /// block as [`DistMatrix::from_host`]). Blocks.
    ///
    /// # Errors
    /// As [`DistMatrix::from_host`].
    pub fn from_device<'a>(
        grid: &ProcessGrid,
        a: impl Into<DeviceView<'a, T>>,
        mb: usize,
        nb: usize,
    ) -> Result<Self, Error> {
        let host = view_to_host(&a.into())?;
        Self::from_host(grid, &host, mb, nb)
    }

    /// Writes the blocks of the ranks this process drives into `c`, a
    /// matrix on one GPU of this process (`m x n`, any layout), staged
    /// through host memory; C's padding is left as it was. Blocks.
    ///
    /// # Errors
    /// As [`DistMatrix::to_host`].
    pub fn to_device<'a>(&self, c: impl Into<DeviceViewMut<'a, T>>) -> Result<(), Error> {
        let mut c = c.into();
        let dims = c.dims();
        self.check_shape(dims.rows, dims.cols)?;
        let len = dims.required_len().unwrap_or(0);
        if len == 0 {
            return Ok(());
        }
        let stream = c.device.stream().clone();
        let mut span = vec![T::default(); len];
        crate::device::memory::memcpy_dtoh(&stream, &c.data.slice(..len), &mut span)?;
        stream.synchronize().during("cuStreamSynchronize")?;
        {
            let view = MatMut::from_slice(&mut span, dims.rows, dims.cols, dims.layout, dims.ld)?;
            self.to_host(view)?;
        }
        crate::device::memory::memcpy_htod(&stream, &span, &mut c.data.slice_mut(..len))?;
        stream.synchronize().during("cuStreamSynchronize")
    }

    /// The transpose, an `n x m` matrix in `nb x mb` blocks on the same
    /// grid (PBLAS's `PxTRAN`): its block (I, J) is this matrix's block
    /// (J, I) transposed, on the rank at grid row `I mod P_r`, column
    /// `J mod P_c`. Each rank transposes its local matrix on its GPU, packs
    /// what each other rank needs into one message per rank and exchanges
    /// them (`ncclSend` / `ncclRecv` on the grid's communicator), then
    /// unpacks; the bits are moved, not computed. Blocks until done on
    /// every rank this process drives (each process of a
    /// [`ProcessGrid::from_rank`] grid calls it). Memory while it runs, per
    /// rank: the result's local matrix, plus a transposed copy of its local
    /// matrix and its messages (each at most the local matrix's size).
    ///
    /// ```no_run
    /// use gemm::{DistMatrix, Matrix, ProcessGrid};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let devices = [gemm::Device::new(0)?, gemm::Device::new(1)?];
    /// let grid = ProcessGrid::from_devices(&devices, 1, 2)?;
    /// let a = Matrix::<f64>::from_fn(300, 200, |i, j| (i * 200 + j) as f64);
    /// let at = DistMatrix::from_host(&grid, &a, 64, 32)?.transpose()?; // 200 x 300, blocks 32 x 64
    /// let mut back = Matrix::<f64>::zeros(200, 300);
    /// at.to_host(&mut back)?;
    /// assert_eq!(back[(5, 7)], a[(7, 5)]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::DeviceGroup`] when the grid's communicators were aborted by
    /// an earlier failed call; [`Error::OutOfMemory`], [`Error::Driver`];
    /// [`Error::Collective`] when a copy or a message fails on any rank, or
    /// does not finish within the grid's timeout (the communicators are then
    /// aborted; this matrix is left as it was).
    pub fn transpose(&self) -> Result<DistMatrix<T>, Error> {
        use crate::exec::redistribute::{enqueue_transpose, TransposeParts};
        let l = self.layout;
        let mut out = DistMatrix::zeros(&self.grid, l.n, l.m, l.nb, l.mb)?;
        for (_, local) in &out.locals {
            // The copies below run on the grid's own streams.
            local.device().stream().synchronize().during("cuStreamSynchronize")?;
        }
        let group = self.grid.group.clone();
        let _busy = group.busy.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(why) = group.failed() {
            return Err(failed_grid(&why));
        }
        let call = "transpose (local transposes, ncclSend/ncclRecv, copies)";
        let enqueued = {
            let mut parts: Vec<TransposeParts<'_, T>> = self
                .locals
                .iter()
                .zip(out.locals.iter_mut())
                .map(|((_, src), (_, dst))| TransposeParts {
                    src: src.buffer().slice(..),
                    rows: src.rows(),
                    cols: src.cols(),
                    dst_cols: dst.cols(),
                    dst: dst.buffer_mut().slice_mut(..),
                })
                .collect();
            enqueue_transpose(&group, (l.m, l.n, l.mb, l.nb), &mut parts)
        };
        match enqueued {
            Ok(scratch) => {
                let waited = group.wait(call);
                drop(scratch);
                waited?;
            }
            Err(e @ Error::Collective { .. }) => {
                group.abort(&e.to_string());
                return Err(e);
            }
            Err(e) => return Err(group.fail(group.ranks[0].rank, call, e.to_string())),
        }
        Ok(out)
    }

    fn check_shape(&self, rows: usize, cols: usize) -> Result<(), Error> {
        if rows != self.layout.m || cols != self.layout.n {
            return Err(gemm_core::ShapeError::Output {
                m: self.layout.m,
                n: self.layout.n,
                c_rows: rows,
                c_cols: cols,
            }
            .into());
        }
        Ok(())
    }

    /// The layout: shape, block sizes, grid.
    pub fn layout(&self) -> BlockCyclic {
        self.layout
    }

    /// The grid it is distributed over.
    pub fn grid(&self) -> &ProcessGrid {
        &self.grid
    }

    /// Rank `rank`'s local matrix (row-major, `local_shape(rank)`, leading
    /// dimension its columns) on its GPU, if this process drives it.
    pub fn local(&self, rank: usize) -> Option<DeviceView<'_, T>> {
        self.locals.iter().find(|(r, _)| *r == rank).map(|(_, m)| m.as_view())
    }
}

/// The error of a call on a grid whose communicators were aborted.
pub(crate) fn failed_grid(why: &str) -> Error {
    Error::DeviceGroup {
        why: format!("the grid's communicators were aborted by an earlier failed call ({why}); make a new ProcessGrid"),
    }
}

/// A device view copied to a new host matrix (its layout and leading
/// dimension). Blocks.
fn view_to_host<T: Scalar>(v: &DeviceView<'_, T>) -> Result<Matrix<T>, Error> {
    let dims = v.dims();
    let len = dims.required_len().unwrap_or(0);
    let mut span = vec![T::default(); len];
    if len > 0 {
        let stream = v.device.stream();
        crate::device::memory::memcpy_dtoh(stream, &v.data.slice(..len), &mut span)?;
        stream.synchronize().during("cuStreamSynchronize")?;
    }
    Matrix::from_vec_in(dims.rows, dims.cols, dims.layout, dims.ld, span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_checked() {
        let e = BlockCyclic::new(10, 10, 0, 4, Grid::new(1, 2)).unwrap_err();
        assert!(matches!(e, Error::Distribution { .. }), "{e}");
        assert_eq!(e.to_string(), "distributed matrices: blocks of 0 x 4: block sizes must be at least 1");
        let e = BlockCyclic::new(10, 10, 2, 2, Grid::new(0, 2)).unwrap_err();
        assert!(matches!(e, Error::Distribution { .. }), "{e}");
        assert!(BlockCyclic::new(0, 0, 1, 1, Grid::new(1, 1)).is_ok());
        assert!(matches!(BlockCyclic::new(usize::MAX, 1, 1, 1, Grid::new(1, 1)), Err(Error::Shape(_))));
    }

    #[test]
    fn every_element_has_one_owner_and_local_place() {
        for (m, n, mb, nb, grid) in
            [(10, 7, 3, 4, Grid::new(2, 2)), (257, 131, 64, 64, Grid::new(1, 2)), (5, 9, 8, 2, Grid::new(3, 1))]
        {
            let l = BlockCyclic::new(m, n, mb, nb, grid).unwrap();
            let mut count = vec![0usize; grid.size()];
            for i in 0..m {
                for j in 0..n {
                    let (rank, li, lj) = l.global_to_local(i, j);
                    assert_eq!(rank, l.owner(i, j));
                    let (rows, cols) = l.local_shape(rank);
                    assert!(li < rows && lj < cols, "{m}x{n} ({i}, {j}) -> {rank} ({li}, {lj}) of {rows}x{cols}");
                    assert_eq!(l.local_to_global(rank, li, lj), (i, j));
                    count[rank] += 1;
                }
            }
            for (rank, &c) in count.iter().enumerate() {
                let (rows, cols) = l.local_shape(rank);
                assert_eq!(c, rows * cols, "rank {rank} holds exactly its local matrix");
            }
        }
    }

    #[test]
    fn the_first_block_is_on_rank_zero_and_blocks_deal_row_major() {
        let l = BlockCyclic::new(100, 100, 10, 10, Grid::new(2, 3)).unwrap();
        assert_eq!(l.owner(0, 0), 0);
        assert_eq!(l.owner(0, 10), 1);
        assert_eq!(l.owner(0, 30), 0);
        assert_eq!(l.owner(10, 0), 3);
        assert_eq!(l.owner(25, 25), 2);
    }
}
