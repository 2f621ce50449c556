//! [`Gemm::run_distributed`]: `C <- alpha * A * B + beta * C` on matrices
//! distributed 2D block-cyclically over a process grid, by SUMMA over NCCL
//! ([`crate::exec::summa`]), each panel's local product on the library's
//! own kernels (the dispatch every door goes through).

use crate::api::dispatch::Kernels;
use crate::api::gemm::Gemm;
use crate::device::nccl::CommGroup;
use crate::element::{Product, Scalar, Types};
use crate::error::Error;
use crate::exec;
use crate::exec::host_path::TileProduct;
use crate::exec::summa::{enqueue_panels, finish_f32_into, LocalInputs, SummaShape};
use crate::operands::distributed::{failed_grid, DistMatrix};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut};
use gemm_core::shape::Op;
use gemm_core::warpgroup::WgmmaTypes;
use gemm_core::GemmDims;
use std::sync::Arc;

impl Gemm {
    /// `C <- alpha * A * B + beta * C` on distributed matrices
    /// ([`DistMatrix`]) by SUMMA (van de Geijn and Watts, "SUMMA: scalable
    /// universal matrix multiplication algorithm"), as PBLAS's `PxGEMM`:
    /// for each block column of A (width `kb`, A's column block = B's row
    /// block), its owners broadcast it along their grid rows and B's
    /// matching block row's owners along their grid columns (NCCL,
    /// `ncclBroadcast` of bytes), and every rank adds the product of the
    /// two panels into its local C with the library's kernels (as
    /// [`Gemm::run_device`] plans them). The broadcast of panel l + 1 runs
    /// on a communication stream while panel l is multiplied on the
    /// compute stream (two workspaces per operand, ordered by events).
    /// Blocks until the product is done on every rank this process drives
    /// (each process of a [`crate::ProcessGrid::from_rank`] grid calls it
    /// with its parts).
    ///
    /// op(A) = T and op(B) = T (`.op_a(Op::T)`): the operand is first
    /// redistributed as its transpose on the grid ([`DistMatrix::transpose`],
    /// PBLAS's `PxTRAN`: its bits moved, an extra copy of it per rank while
    /// the call runs), so the block sizes are checked on op(A) and op(B):
    /// a `k x m` A in `kb x mb` blocks is op(A) = A^T, `m x k` in
    /// `mb x kb` blocks.
    ///
    /// Every type pair of [`Product`]. Accuracy, per element of C:
    /// - i8 -> i32: exact (wrapping, as one product).
    /// - f64, f32 and f16/bf16 -> f32: the panels are accumulated through
    ///   C, so the sum's order differs from one product's (each panel's
    ///   partial rounded once more): |C - C_exact| <= gamma_(k + P + 1)
    ///   (|alpha| |A| |B| + |beta C|), P = ceil(k / kb) panels, gamma_j =
    ///   j u / (1 - j u), u the unit roundoff of C's type (the standard
    ///   bound of a dot product summed in P + k steps).
    /// - f16/bf16 -> f16/bf16: accumulated in an f32 workspace (the f16 /
    ///   bf16 -> f32 product per panel, alpha applied at the end) and
    ///   rounded once to C's type by `C <- alpha * acc + beta * C`: the f32
    ///   bound above plus one rounding of C's type (compute capability 9.0:
    ///   the last pass is stage 9's reduction kernel).
    /// - Integer-valued inputs whose products and sums are exact in C's
    ///   type give the exact result on every grid.
    ///
    /// ```no_run
    /// use gemm::{DistMatrix, Gemm, Matrix, ProcessGrid};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let devices = [gemm::Device::new(0)?, gemm::Device::new(1)?];
    /// let grid = ProcessGrid::from_devices(&devices, 2, 1)?;
    /// let a = DistMatrix::from_host(&grid, &Matrix::<f32>::from_fn(512, 384, |i, j| (i % 5 + j % 3) as f32), 128, 128)?;
    /// let b = DistMatrix::from_host(&grid, &Matrix::<f32>::from_fn(384, 256, |i, j| (i * j % 4) as f32), 128, 64)?;
    /// let mut c = DistMatrix::<f32>::zeros(&grid, 512, 256, 128, 64)?;
    /// Gemm::new().alpha(2.0).run_distributed(&a, &b, &mut c)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Before any launch: [`Error::DeviceGroup`] when the three matrices
    /// are not on one grid, or the grid failed before;
    /// [`Error::Distribution`] when op(A)'s column blocks are not op(B)'s
    /// row blocks, or C's blocks are not op(A)'s row and op(B)'s column
    /// blocks; [`Error::Shape`] for mismatched shapes;
    /// [`Error::Unsupported`] for `.stream(..)`, `.device(..)` and
    /// `.host_streams(..)` (`.memory_budget(bytes)` bounds each rank's
    /// SUMMA workspaces), and for a 16-bit C off compute capability 9.0.
    /// During the call: [`Error::Collective`] when a kernel, a copy or a
    /// collective fails on any rank, or the work does not finish within
    /// the grid's timeout ([`crate::ProcessGrid::timeout`]); the grid's
    /// communicators are then aborted (the grid cannot be used again) and
    /// C is unspecified (only then).
    pub fn run_distributed<T: Product<C>, C: Scalar>(
        &self,
        a: &DistMatrix<T>,
        b: &DistMatrix<T>,
        c: &mut DistMatrix<C>,
    ) -> Result<(), Error> {
        let shape = self.check_distributed(a, b, c)?;
        let group = a.grid.group.clone();
        let first = group.ranks[0].device.clone();
        let kernels = self.kernels::<T, C>(false, Some(&first))?;
        // `.memory_budget(bytes)` bounds each rank's workspaces here; the
        // host path's other option does not apply.
        let budget = self.memory_budget;
        let mut probe = self.clone();
        probe.memory_budget = None;
        probe.check_device_call()?;
        // The f32 accumulator's kernels for a 16-bit C.
        let widened = match (T::TYPES, C::NAME) {
            (Types::Mixed(WgmmaTypes::F16), "f16") => {
                Some((self.kernels::<half::f16, f32>(false, Some(&first))?, WgmmaTypes::F16))
            }
            (Types::Mixed(WgmmaTypes::Bf16), "bf16") => {
                Some((self.kernels::<half::bf16, f32>(false, Some(&first))?, WgmmaTypes::Bf16))
            }
            // FP8 into a 16-bit C: the e4m3 -> f32 kernels, then the same last pass.
            (Types::Mixed(WgmmaTypes::E4m3F16), _) => {
                Some((self.kernels::<float8::F8E4M3, f32>(false, Some(&first))?, WgmmaTypes::F16))
            }
            (Types::Mixed(WgmmaTypes::E4m3Bf16), _) => {
                Some((self.kernels::<float8::F8E4M3, f32>(false, Some(&first))?, WgmmaTypes::Bf16))
            }
            _ => None,
        };
        if widened.is_some() {
            if let Some(s) = group.ranks.iter().find(|s| s.device.compute_capability() != (9, 0)) {
                let (major, minor) = s.device.compute_capability();
                return Err(Error::Unsupported {
                    product: format!("distributed {0} x {0} -> {0}", T::NAME),
                    why: format!(
                        "a 16-bit C is accumulated in f32 and rounded once by stage 9's reduction kernel, which needs \
                         compute capability 9.0; rank {} ({}) has {major}.{minor} (use an f32 C)",
                        s.rank,
                        s.device.name()
                    ),
                });
            }
        }
        let (m, n) = (shape.m, shape.n);
        if m == 0 || n == 0 {
            return Ok(());
        }
        let reads_ab = self.desc.alpha != 0.0 && shape.k > 0;
        if !reads_ab && self.desc.beta == 1.0 {
            return Ok(()); // C unchanged
        }
        // op = T: the operand's transpose, redistributed on the grid first.
        let (a_t, b_t);
        let a = if self.desc.op_a == Op::T && reads_ab {
            a_t = a.transpose()?;
            &a_t
        } else {
            a
        };
        let b = if self.desc.op_b == Op::T && reads_ab {
            b_t = b.transpose()?;
            &b_t
        } else {
            b
        };
        let _busy = group.busy.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(why) = group.failed() {
            return Err(failed_grid(&why));
        }
        let fault = group.take_fault();
        let (alpha, beta) = (self.desc.alpha, self.desc.beta);
        let inputs: Vec<LocalInputs<'_, T>> = a
            .locals
            .iter()
            .zip(&b.locals)
            .zip(&c.locals)
            .map(|(((_, la), (_, lb)), (_, lc))| LocalInputs {
                a: la.buffer().slice(..),
                a_cols: la.cols(),
                b: lb.buffer().slice(..),
                rows: lc.rows(),
                cols: lc.cols(),
            })
            .collect();
        let enqueued = (|| -> Result<(), Error> {
            if !reads_ab {
                // C <- beta C: a product with k = 0 on each rank.
                let products = rank_products::<T, C>(self, &group, kernels);
                for (i, ((s, lo), (_, lc))) in group.ranks.iter().zip(&inputs).zip(c.locals.iter_mut()).enumerate() {
                    if lo.rows == 0 || lo.cols == 0 {
                        continue;
                    }
                    let mut cv = lc.buffer_mut().slice_mut(..);
                    let d = |r, c, ld| gemm_core::MatrixDims::new(r, c, gemm_core::Layout::RowMajor, ld);
                    let dims = GemmDims::from_operands(
                        d(lo.rows, 0, 1),
                        lo.a.len(),
                        d(0, lo.cols, lo.cols),
                        lo.b.len(),
                        d(lo.rows, lo.cols, lo.cols),
                        cv.len(),
                    )?;
                    products[i].enqueue((0.0, beta), &s.compute, &dims, (&lo.a, &lo.b, &mut cv))?;
                }
                return Ok(());
            }
            let per_chunk = chunk_panels(&group, &inputs, &shape, size_of::<T>(), budget)?;
            // One chunk: one local product over all of k, straight into C
            // (a 16-bit C is rounded once, by that product).
            let widened = if per_chunk >= shape.k.div_ceil(shape.kb) { None } else { widened };
            match widened {
                None => {
                    let mut targets: Vec<CudaViewMut<'_, C>> =
                        c.locals.iter_mut().map(|(_, lc)| lc.buffer_mut().slice_mut(..)).collect();
                    let products = rank_products::<T, C>(self, &group, kernels);
                    enqueue_panels(
                        &group,
                        &shape,
                        (&inputs, &mut targets),
                        (alpha, beta),
                        (&products, per_chunk),
                        fault,
                    )
                }
                Some((acc_kernels, types)) => {
                    // f32 accumulators, alpha = 1 and beta = 0 then 1;
                    // C <- alpha acc + beta C at the end.
                    let mut accs: Vec<CudaSlice<f32>> = Vec::new();
                    for (s, lo) in group.ranks.iter().zip(&inputs) {
                        // SAFETY: the first panel's product (beta = 0)
                        // writes every element before any is read.
                        accs.push(unsafe {
                            crate::device::memory::alloc_scratch::<f32>(&s.compute, lo.rows * lo.cols)
                        }?);
                    }
                    let mut targets: Vec<CudaViewMut<'_, f32>> = accs.iter_mut().map(|w| w.slice_mut(..)).collect();
                    let products = rank_products::<T, f32>(self, &group, acc_kernels);
                    enqueue_panels(&group, &shape, (&inputs, &mut targets), (1.0, 0.0), (&products, per_chunk), fault)?;
                    drop(targets);
                    for ((s, lo), (acc, (_, lc))) in
                        group.ranks.iter().zip(&inputs).zip(accs.iter().zip(c.locals.iter_mut()))
                    {
                        let mut cv = lc.buffer_mut().slice_mut(..);
                        finish_f32_into(&s.device, &s.compute, types, (lo.rows, lo.cols), acc, &mut cv, (alpha, beta))?;
                    }
                    Ok(())
                }
            }
        })();
        let call = "SUMMA (panel copies, ncclBroadcast, panel products)";
        match enqueued {
            Ok(()) => group.wait(call),
            Err(e @ Error::Collective { .. }) => {
                group.abort(&e.to_string());
                Err(e)
            }
            Err(e) => Err(group.fail(group.ranks[0].rank, call, e.to_string())),
        }
    }

    /// The checks of a distributed product that need no device: one grid,
    /// the op flags, the shapes and the block sizes. The SUMMA shape.
    pub(crate) fn check_distributed<T: Scalar, C: Scalar>(
        &self,
        a: &DistMatrix<T>,
        b: &DistMatrix<T>,
        c: &DistMatrix<C>,
    ) -> Result<SummaShape, Error> {
        if !a.grid.same(&b.grid) || !a.grid.same(&c.grid) {
            return Err(Error::DeviceGroup {
                why: "A, B and C are distributed over different process grids; a product needs one grid (the same \
                      ProcessGrid, or clones of it)"
                    .into(),
            });
        }
        let (a, b) = check_layouts(self.desc.op_a, self.desc.op_b, &a.layout, &b.layout, &c.layout)?;
        if self.has_stream() || self.device_option().is_some() {
            return Err(Error::Unsupported {
                product: "distributed".into(),
                why: ".stream(..) and .device(..) do not apply: each rank runs on its grid GPU's own streams".into(),
            });
        }
        Ok(SummaShape { m: a.m, n: b.n, k: a.n, kb: a.nb })
    }
}

/// The local products of each rank of `group`, in rank order: the launch
/// [`Gemm::run_device`] would plan on that rank's GPU, with the chunk's
/// alpha and beta.
fn rank_products<'g, T: Scalar, W: Scalar>(
    gemm: &'g Gemm,
    group: &'g CommGroup,
    kernels: Kernels,
) -> Vec<impl TileProduct<T, W> + 'g> {
    group
        .ranks
        .iter()
        .map(move |s| {
            let device = &s.device;
            move |(alpha, beta): (f64, f64),
                  stream: &Arc<CudaStream>,
                  dims: &GemmDims,
                  (a, b, c): (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, W>)| {
                let launch = gemm.clone().alpha(alpha).beta(beta).launch_on(kernels, device, dims, 1)?;
                exec::enqueue(&launch, device, stream, (alpha, beta), (a, b, c), (1, [0; 3]))
            }
        })
        .collect()
}

/// The CPU checks of a distributed product's layouts, on op(A) and op(B)
/// (the transpose's layout where op = T, [`crate::BlockCyclic::transposed`]):
/// shapes, and blocks: op(A)'s column blocks are op(B)'s row blocks (kb),
/// C's blocks are op(A)'s row blocks and op(B)'s column blocks. Returns
/// op(A)'s and op(B)'s layouts.
pub(crate) fn check_layouts(
    op_a: Op,
    op_b: Op,
    a: &crate::BlockCyclic,
    b: &crate::BlockCyclic,
    c: &crate::BlockCyclic,
) -> Result<(crate::BlockCyclic, crate::BlockCyclic), Error> {
    for l in [a, b, c] {
        l.check()?;
    }
    if a.grid != b.grid || a.grid != c.grid {
        return Err(Error::DeviceGroup {
            why: format!("A is on a {} grid, B on {}, C on {}: a product needs one grid", a.grid, b.grid, c.grid),
        });
    }
    let a = if op_a == Op::T { a.transposed() } else { *a };
    let b = if op_b == Op::T { b.transposed() } else { *b };
    if a.n != b.m {
        return Err(gemm_core::ShapeError::InnerDimension { a_rows: a.m, a_cols: a.n, b_rows: b.m, b_cols: b.n }.into());
    }
    if c.m != a.m || c.n != b.n {
        return Err(gemm_core::ShapeError::Output { m: a.m, n: b.n, c_rows: c.m, c_cols: c.n }.into());
    }
    if a.nb != b.mb {
        return Err(Error::Distribution {
            why: format!(
                "op(A)'s column blocks are {} wide but op(B)'s row blocks are {} high: SUMMA's k panels need them \
                 equal",
                a.nb, b.mb
            ),
        });
    }
    if c.mb != a.mb || c.nb != b.nb {
        return Err(Error::Distribution {
            why: format!(
                "C's blocks are {} x {} but op(A)'s row blocks are {} high and op(B)'s column blocks {} wide: C needs \
                 {} x {}",
                c.mb, c.nb, a.mb, b.nb, a.mb, b.nb
            ),
        });
    }
    Ok((a, b))
}

/// How many k panels SUMMA multiplies at once (a chunk): all of them when
/// every rank's workspaces for all of k (its rows of A's panels and its
/// columns of B's, where they are broadcast) fit in half of its free device
/// memory (or in `limit` bytes, [`Gemm::memory_budget`], if smaller), so C
/// is written once and a 16-bit C rounded once; else the most that fit
/// twice (chunk c + 1 is broadcast while chunk c is multiplied),
/// at least one. Fewer chunks mean fewer passes over C; one chunk leaves
/// its broadcasts unoverlapped. Where all of k does not fit at first, the
/// rank's context is synchronized and its free memory read again (memory
/// freed stream-ordered is held by its pool until a synchronization).
fn chunk_panels<T>(
    group: &CommGroup,
    inputs: &[LocalInputs<'_, T>],
    shape: &SummaShape,
    elem: usize,
    limit: Option<usize>,
) -> Result<usize, Error> {
    use crate::error::DriverContext;
    let panels = shape.k.div_ceil(shape.kb.max(1)).max(1);
    let mut most = panels;
    for (s, lo) in group.ranks.iter().zip(inputs) {
        let ctx = s.device.context();
        ctx.bind_to_thread().during("cuCtxSetCurrent")?;
        // Bytes per panel of width kb held by this rank's workspaces.
        let a = if s.row.is_some() { lo.rows * shape.kb } else { 0 };
        let b = if s.col.is_some() { shape.kb * lo.cols } else { 0 };
        let per_panel = (a + b) * elem;
        if per_panel == 0 {
            continue;
        }
        let fits = |free: usize| {
            let budget = limit.map_or(free / 2, |l| l.min(free / 2));
            if per_panel * panels <= budget {
                panels
            } else {
                (budget / (2 * per_panel)).max(1)
            }
        };
        let (free, _) = cudarc::driver::result::mem_get_info().during("cuMemGetInfo")?;
        let mut chunk = fits(free);
        if chunk < panels {
            // Memory freed stream-ordered stays in its pool (counted as
            // used) until a synchronization returns it to the driver.
            ctx.synchronize().during("cuCtxSynchronize")?;
            let (free, _) = cudarc::driver::result::mem_get_info().during("cuMemGetInfo")?;
            chunk = fits(free);
        }
        most = most.min(chunk);
    }
    Ok(most)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BlockCyclic;
    use gemm_core::distribution::Grid;

    fn l(m: usize, n: usize, mb: usize, nb: usize) -> BlockCyclic {
        BlockCyclic::new(m, n, mb, nb, Grid::new(1, 2)).unwrap()
    }

    #[test]
    fn mismatched_blocks_are_typed_errors() {
        let ok = check_layouts(Op::N, Op::N, &l(100, 80, 32, 16), &l(80, 60, 16, 8), &l(100, 60, 32, 8));
        assert!(ok.is_ok());
        let e = check_layouts(Op::N, Op::N, &l(100, 80, 32, 16), &l(80, 60, 32, 8), &l(100, 60, 32, 8)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "distributed matrices: op(A)'s column blocks are 16 wide but op(B)'s row blocks are 32 high: SUMMA's k panels \
             need them equal"
        );
        let e = check_layouts(Op::N, Op::N, &l(100, 80, 32, 16), &l(80, 60, 16, 8), &l(100, 60, 16, 8)).unwrap_err();
        assert!(matches!(e, Error::Distribution { .. }), "{e}");
        let e = check_layouts(Op::N, Op::N, &l(100, 80, 32, 16), &l(81, 60, 16, 8), &l(100, 60, 32, 8)).unwrap_err();
        assert!(matches!(e, Error::Shape(_)), "{e}");
        let e = check_layouts(Op::N, Op::N, &l(100, 80, 32, 16), &l(80, 60, 16, 8), &l(99, 60, 32, 8)).unwrap_err();
        assert!(matches!(e, Error::Shape(_)), "{e}");
        let other = BlockCyclic::new(80, 60, 16, 8, Grid::new(2, 1)).unwrap();
        let e = check_layouts(Op::N, Op::N, &l(100, 80, 32, 16), &other, &l(100, 60, 32, 8)).unwrap_err();
        assert!(matches!(e, Error::DeviceGroup { .. }), "{e}");
        // op = T checks the transpose's layout: A^T of an 80 x 100 A in 16 x 32 blocks.
        let (ea, eb) = check_layouts(Op::T, Op::N, &l(80, 100, 16, 32), &l(80, 60, 16, 8), &l(100, 60, 32, 8)).unwrap();
        assert_eq!((ea.m, ea.n, ea.mb, ea.nb), (100, 80, 32, 16));
        assert_eq!(eb, l(80, 60, 16, 8));
        let e = check_layouts(Op::T, Op::N, &l(100, 80, 32, 16), &l(80, 60, 16, 8), &l(100, 60, 32, 8)).unwrap_err();
        assert!(matches!(e, Error::Shape(_)), "{e}");
        let e = check_layouts(Op::N, Op::T, &l(100, 80, 32, 16), &l(60, 80, 8, 32), &l(100, 60, 32, 8)).unwrap_err();
        assert!(matches!(e, Error::Distribution { .. }), "{e}");
        assert!(check_layouts(Op::N, Op::T, &l(100, 80, 32, 16), &l(60, 80, 8, 16), &l(100, 60, 32, 8)).is_ok());
    }
}
