//! Host products over a group of GPUs ([`Gemm::devices`]): C is cut into a
//! grid of blocks, one per GPU ([`gemm_core::distribution::device_grid`]),
//! and each GPU runs the streamed host path on its block, with its own
//! streams, staging ring and workspace, all at once (one host thread per
//! GPU). The block of GPU (i, j) reads the rows of A and the columns of B
//! it needs straight from the caller's memory, so the GPUs share nothing
//! but the host's memory bandwidth. This is what cuBLASXt does with host
//! operands (NVIDIA, "cuBLAS: the cuBLASXt API"), with the blocks of C
//! planned rather than dealt in fixed tiles.

use crate::device::Device;
use crate::error::Error;
use crate::plan::product_plan::{DeviceBlock, DeviceSplit};
use crate::Gemm;
use gemm_core::distribution::{device_grid, even_range, Grid};
use std::sync::Arc;

/// Rows and columns of C are split over the GPUs in multiples of this
/// (the host path's tiles are multiples of 128 rows).
pub(crate) const SPLIT_QUANTUM: usize = 128;

impl Gemm {
    /// Spreads host products ([`Gemm::run`] on host matrices, every element
    /// type) over several GPUs: C is cut into one block per GPU, as a grid
    /// of rows x columns chosen from the shape (2 GPUs: by rows when
    /// m >= n, else by columns; 4: a 2 x 2 grid for a square C; the grid
    /// that uploads the fewest bytes of A and B per GPU), and every GPU runs
    /// the host path on its block at once, with its own streams and
    /// page-locked staging, out of core where its memory (or
    /// [`Gemm::memory_budget`], which applies per GPU) is too small.
    /// [`Gemm::plan_for`] says the split ([`ProductPlan::devices`](crate::ProductPlan::devices)).
    ///
    /// Each element of C is computed by one GPU with the kernel the whole
    /// product would run on one GPU of the group, in the same k order: on
    /// GPUs of one model the result has the same bits as on one of them.
    /// The emulation's accurate mode, whose scales depend on all of C, runs
    /// on the first GPU alone.
    ///
    /// A group of one is [`Gemm::device`]. The GPUs must be distinct and of
    /// one model (name and compute capability); the group does not apply to
    /// device matrices ([`Gemm::run_device`] and the device batches: the
    /// operands' device decides; for matrices spread over several GPUs see
    /// [`crate::DistMatrix`]) or to host batches ([`Gemm::run_strided`]).
    ///
    /// ```no_run
    /// use gemm::{Device, Gemm, Matrix};
    /// # fn main() -> Result<(), gemm::Error> {
    /// let gpus = [Device::new(0)?, Device::new(1)?];
    /// let a = Matrix::<f64>::from_fn(8192, 8192, |i, j| (i + j) as f64);
    /// let b = Matrix::<f64>::from_fn(8192, 8192, |i, j| (i * j % 7) as f64);
    /// let mut c = Matrix::<f64>::zeros(8192, 8192);
    /// let g = Gemm::new().devices(&gpus);
    /// println!("{}", g.plan_for::<f64, f64>(8192, 8192, 8192)?); // "...; C over 2 GPUs as a 2 x 1 grid: ..."
    /// g.run(&a, &b, &mut c)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::DeviceGroup`] (before any copy) for an empty group, a GPU
    /// listed twice, GPUs of different models, a group with
    /// [`Gemm::device`] or [`Gemm::stream`] also set, or a group of more than
    /// one GPU on device matrices or a host batch.
    pub fn devices(mut self, devices: &[Arc<Device>]) -> Self {
        self.devices = Some(devices.to_vec());
        self
    }

    /// The GPUs a host product runs on: the group ([`Gemm::devices`],
    /// checked), else the builder's device, else the default device.
    pub(crate) fn device_group(&self) -> Result<Vec<Arc<Device>>, Error> {
        let Some(group) = &self.devices else {
            return Ok(vec![match self.device_option() {
                Some(d) => d.clone(),
                None => crate::device::default_device()?,
            }]);
        };
        check_group(group)?;
        if self.has_device() {
            return Err(Error::DeviceGroup {
                why: "both .device(..) and .devices(..) are set: set one (a group of one is .device)".into(),
            });
        }
        if group.len() > 1 && self.has_stream() {
            return Err(Error::DeviceGroup {
                why: format!(
                    ".stream(..) is set on a group of {} GPUs: a stream belongs to one GPU; the group's products run on streams of their own",
                    group.len()
                ),
            });
        }
        Ok(group.clone())
    }

    /// A group of more than one GPU set on a call it does not apply to
    /// (`what`: device matrices, a host batch): an error rather than ignored.
    pub(crate) fn check_no_group(&self, what: &str) -> Result<(), Error> {
        match &self.devices {
            Some(group) if group.len() > 1 => Err(Error::DeviceGroup {
                why: format!(
                    ".devices(..) ({} GPUs) applies to single products of host matrices, not to {what}",
                    group.len()
                ),
            }),
            Some(group) => check_group(group),
            None => Ok(()),
        }
    }

    /// The split of an m x n x k host product over `group` (one block when
    /// the group has one GPU or C must stay whole).
    pub(crate) fn device_split(
        &self,
        group: &[Arc<Device>],
        (m, n, k): (usize, usize, usize),
        whole_c: bool,
    ) -> DeviceSplit {
        let grid = if whole_c { Grid::new(1, 1) } else { device_grid(m, n, k, group.len()) };
        let blocks = (0..grid.size())
            .map(|p| {
                let (i, j) = grid.coords(p);
                DeviceBlock {
                    device: format!("GPU {} ({})", group[p].context().ordinal(), group[p].name()),
                    rows: even_range(m, grid.rows, SPLIT_QUANTUM, i),
                    cols: even_range(n, grid.cols, SPLIT_QUANTUM, j),
                }
            })
            .collect();
        DeviceSplit { grid, blocks }
    }
}

/// A group is non-empty, of distinct GPUs of one model.
fn check_group(group: &[Arc<Device>]) -> Result<(), Error> {
    let Some(first) = group.first() else {
        return Err(Error::DeviceGroup { why: "the group is empty: give at least one GPU".into() });
    };
    for (i, d) in group.iter().enumerate() {
        if let Some(j) = group[..i].iter().position(|e| e.context().ordinal() == d.context().ordinal()) {
            return Err(Error::DeviceGroup {
                why: format!(
                    "GPU {} is listed twice (entries {j} and {i}): each GPU of a group computes its own block of C",
                    d.context().ordinal()
                ),
            });
        }
        if d.name() != first.name() || d.compute_capability() != first.compute_capability() {
            let cc = |d: &Device| format!("{}.{}", d.compute_capability().0, d.compute_capability().1);
            return Err(Error::DeviceGroup {
                why: format!(
                    "entry {i} is a {} (compute capability {}) but entry 0 a {} ({}): a group's GPUs must be of one model, so that every block of C is computed as on one of them",
                    d.name(),
                    cc(d),
                    first.name(),
                    cc(first)
                ),
            });
        }
    }
    Ok(())
}
