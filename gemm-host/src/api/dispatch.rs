//! One dispatch for every type pair: a call's options and types decide its
//! kernels before the device is opened ([`Kernels`]); on the device each
//! validated product is planned into a [`Launch`] of its kernel family (the
//! f64/f32 ladder, stage 8's `mma.sync`, stage 9's warpgroup MMA), which
//! the execution layer runs ([`crate::exec::enqueue`]). Every door - host
//! matrices (through the host path), device matrices, strided, pointer-array
//! and grouped batches - goes this one way.

use crate::api::gemm::{Gemm, ASSUMED};
use crate::device::Device;
use crate::element::{product_name, Product, Scalar, Types};
use crate::error::Error;
use crate::exec::emulation::EmulatedLaunch;
use crate::exec::host_path::{host_product, HostOperand, HostPolicy, SendOperands};
use crate::exec::ladder::LadderLaunch;
use crate::exec::launch::{checked_geometry, SINGLE};
use crate::exec::skinny::SkinnyLaunch;
use crate::exec::warpgroup::read_in_layout;
use crate::exec::{self, Launch, ListLaunch, TensorCoreStage};
use crate::operands::device_matrix::{DeviceView, DeviceViewMut};
use crate::operands::matrix::{MatMut, MatRef};
use crate::plan::emulation::Mode;
use crate::plan::product_plan::{
    mma_launch, skinny_family, skinny_launch, skinny_types, warpgroup_launch, warpgroup_list, KernelFamily, ProductPlan,
};
use cudarc::driver::{CudaStream, CudaView, CudaViewMut};
use gemm_core::emulation;
use gemm_core::pack;
use gemm_core::shape::{MatrixDims, Op};
use gemm_core::skinny::{SkinnyTypes, WLayout};
use gemm_core::warpgroup::WgmmaTypes;
use gemm_core::{GemmDims, Layout, Precision};
use std::sync::Arc;

/// The kernels a call runs on, from its types and options (no device yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernels {
    /// The f64/f32 ladder (stages 1-8).
    Ladder(Precision),
    /// The tensor-core kernels of these types: stage 9 on compute capability
    /// 9.0, stage 8's `mma.sync` on 8.x or when `.stage(Stage::TensorCore)`
    /// asked for it (true).
    TensorCores(WgmmaTypes, bool),
    /// f64 or f32 emulated on INT8 tensor cores with this many moduli, in
    /// the accurate mode or not ([`Gemm::emulation`]).
    Emulated(Precision, usize, bool),
}

impl Kernels {
    /// How the host path streams a product of these kernels with a C of
    /// `c_bytes` bytes an element.
    pub(crate) fn host_policy(self, c_bytes: usize) -> HostPolicy {
        match self {
            Kernels::Ladder(_) => HostPolicy::LADDER,
            Kernels::TensorCores(..) => HostPolicy::tensor_cores(c_bytes),
            // k whole: each tile's rows and columns scale as the whole
            // product's, so a tile gives the whole product's bits. The
            // accurate mode's scales depend on all of C's rows and
            // columns: C whole, one tile.
            Kernels::Emulated(_, _, accurate) => HostPolicy { whole_k: true, column_panels: false, whole_c: accurate },
        }
    }
}

impl Gemm {
    /// [`Gemm::run`] on `kernels` (the types the kernels read `T` as: FP8
    /// views of either format come as e4m3 bytes).
    pub(crate) fn run_on<T: Scalar, C: Scalar>(
        &self,
        kernels: Kernels,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        mut c: MatMut<'_, C>,
    ) -> Result<(), Error> {
        let c_len = c.dims().required_len().unwrap_or(0);
        let dims = self.desc.problem((a.dims(), a.span().len()), (b.dims(), b.span().len()), (c.dims(), c_len))?;
        if dims.is_empty() || self.desc.leaves_c_unchanged(&dims) {
            return Ok(()); // BLAS quick return: nothing to do, not even on the GPU
        }
        let group = self.device_group()?;
        let operand = |base: *const u8, d: MatrixDims, op: Op| HostOperand { base, dims: d.op(op) };
        let ha = operand(a.as_slice().as_ptr() as *const u8, a.dims(), self.desc.op_a);
        let hb = operand(b.as_slice().as_ptr() as *const u8, b.dims(), self.desc.op_b);
        let hc = operand(c.span_mut().as_mut_ptr() as *const u8, c.dims(), Op::N);
        let policy = kernels.host_policy(size_of::<C>());
        let split = self.device_split(&group, (dims.m, dims.n, dims.k), policy.whole_c);
        // Each GPU's block: its launch (the whole product's plan on that
        // GPU) and its operands. Fail on configuration and device limits
        // before any copy.
        let mut parts = Vec::new();
        for (device, block) in group.iter().zip(&split.blocks) {
            if block.rows.is_empty() || block.cols.is_empty() {
                continue;
            }
            let whole = self.launch_on(kernels, device, &dims, 1)?;
            let step = self.tile_step(&whole, device)?;
            let (r, cl) = (block.rows.clone(), block.cols.clone());
            let (ti, tc) = (size_of::<T>(), size_of::<C>());
            let (sa, sb, sc) =
                (ha.sub(ti, r.clone(), 0..dims.k)?, hb.sub(ti, 0..dims.k, cl.clone())?, hc.sub(tc, r, cl)?);
            let sub = GemmDims::from_operands(sa.dims, usize::MAX, sb.dims, usize::MAX, sc.dims, usize::MAX)?;
            parts.push((device.clone(), step, sub, SendOperands((sa, sb, sc))));
        }
        let call = self.host_call();
        let run_part = |(device, step, sub, ops): (Arc<Device>, Gemm, GemmDims, SendOperands)| {
            let tile = |(alpha, beta): (f64, f64),
                        stream: &Arc<CudaStream>,
                        pd: &GemmDims,
                        ops: (&CudaView<'_, T>, &CudaView<'_, T>, &mut CudaViewMut<'_, C>)| {
                let launch = step.clone().alpha(alpha).beta(beta).launch_on(kernels, &device, pd, 1)?;
                exec::enqueue(&launch, &device, stream, (alpha, beta), ops, (1, [0; 3]))
            };
            host_product(&call, &device, &sub, ops.0, &tile, policy)
        };
        if parts.len() == 1 {
            return run_part(parts.pop().expect("one part"));
        }
        // One host thread per GPU; every GPU runs to its end (so none is
        // left copying into C), then the first error in the group's order.
        std::thread::scope(|scope| {
            let handles: Vec<_> = parts.into_iter().map(|part| scope.spawn(|| run_part(part))).collect();
            let results: Vec<Result<(), Error>> =
                handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect();
            results.into_iter().collect::<Result<(), Error>>()
        })
    }

    /// [`Gemm::run_device`] on the `kernels` the caller chose (an FP8 pair
    /// on e4m3-typed views of its operands' bits: `Gemm::run_fp8_device`).
    pub(crate) fn run_device_on<T: Scalar, C: Scalar>(
        &self,
        kernels: Kernels,
        a: DeviceView<'_, T>,
        b: DeviceView<'_, T>,
        mut c: DeviceViewMut<'_, C>,
    ) -> Result<(), Error> {
        self.check_device_call()?;
        let Some((dims, device, stream)) = self.desc.device_problem(&a, &b, &c, self.target())? else { return Ok(()) };
        let launch = self.launch_on(kernels, &device, &dims, 1)?;
        exec::enqueue(
            &launch,
            &device,
            &stream,
            (self.desc.alpha, self.desc.beta),
            (&a.data, &b.data, &mut c.data),
            (1, [0; 3]),
        )
    }

    /// The kernels of a call with `T` operands into a `C` (a batch when
    /// `batch`), its options checked first: an option that cannot apply is
    /// a typed error here, before the device is opened. `device` is the
    /// operands' device where they have one (it decides whether f32 may run
    /// on TF32 tensor cores).
    pub(crate) fn kernels<T: Product<C>, C: Scalar>(
        &self,
        batch: bool,
        device: Option<&Arc<Device>>,
    ) -> Result<Kernels, Error> {
        let ladder = |precision: Precision| -> Result<Kernels, Error> {
            self.chosen_config(precision)?; // a bad configuration fails before the shapes are looked at
            self.check_options(precision, batch)?;
            Ok(Kernels::Ladder(precision))
        };
        if let Some(e) = &self.emulation {
            let precision = match T::TYPES {
                Types::F64 => Precision::F64,
                Types::F32 if !self.tf32 => Precision::F32,
                _ => {
                    return Err(Error::Unsupported {
                        product: format!("{0} x {0} -> {1}", T::NAME, C::NAME),
                        why: "emulation on INT8 tensor cores applies to f64 and f32 products (without TF32)".into(),
                    })
                }
            };
            if let Some(option) = self.tuning_option_set() {
                return Err(Error::Unsupported {
                    product: format!("{0} x {0} -> {0}", T::NAME),
                    why: format!("{option} chooses a kernel of the native product; an emulated one has its own"),
                });
            }
            self.check_options(precision, batch)?;
            return Ok(Kernels::Emulated(precision, e.moduli().n(), e.scaling() == Mode::Accurate));
        }
        match T::TYPES {
            Types::F64 => ladder(Precision::F64),
            Types::F32 if self.uses_tf32(device)? => {
                Ok(Kernels::TensorCores(WgmmaTypes::Tf32, self.mixed_options(WgmmaTypes::Tf32)?))
            }
            Types::F32 => ladder(Precision::F32),
            Types::Mixed(types) => Ok(Kernels::TensorCores(types, self.mixed_options(types)?)),
        }
    }

    /// The token-sized kernels' types for a call of `kernels` on a device
    /// of compute capability `cc`, unless an option chose other kernels
    /// (a stage, a configuration, a split or packing on the ladder; stage 8
    /// on the tensor cores) or the host path's tile follows a whole product
    /// that did not take them.
    pub(crate) fn skinny_allowed(&self, kernels: Kernels, cc: (i32, i32)) -> Result<Option<SkinnyTypes>, Error> {
        if self.skinny == Some(None) || cc != (9, 0) {
            return Ok(None);
        }
        Ok(match kernels {
            Kernels::Ladder(precision) => {
                if self.chosen_config(precision)?.is_some() || self.ladder_options_set() {
                    return Ok(None);
                }
                Some(if precision == Precision::F64 { SkinnyTypes::F64 } else { SkinnyTypes::F32 })
            }
            Kernels::TensorCores(_, true) | Kernels::Emulated(..) => None,
            Kernels::TensorCores(_, false) if self.warpgroup_split.is_some() => None,
            Kernels::TensorCores(types, false) => skinny_types(types),
        })
    }

    /// The token-sized launch of `count` products shaped as `dims` (user
    /// form) on a device of `sm_count` SMs and compute capability `cc`,
    /// where it applies ([`skinny_launch`]; a host path's tile that follows
    /// a token-sized whole product takes it whatever its blocks, with the
    /// whole product's side and form: [`SkinnyLaunch::like`]).
    pub(crate) fn skinny_on(
        &self,
        kernels: Kernels,
        (cc, sm_count): ((i32, i32), u32),
        dims: &GemmDims,
        count: usize,
    ) -> Result<Option<SkinnyLaunch>, Error> {
        let Some(types) = self.skinny_allowed(kernels, cc)? else { return Ok(None) };
        if let Some(Some(whole)) = &self.skinny {
            let reads_ab = self.desc.alpha != 0.0 && dims.k > 0;
            let d = if reads_ab { *dims } else { GemmDims { k: 0, ..*dims } };
            return Ok(SkinnyLaunch::like(types, d, Some(whole)));
        }
        let launch = skinny_launch(types, dims, self.desc.alpha, count, sm_count);
        // Stage 9's narrow tiles, where it would take one, from
        // NARROW_MIN_ROWS rows on (NARROW_MIN_ROWS_WN where W's N is
        // contiguous).
        if let (Some(l), Kernels::TensorCores(wgmma, false)) = (launch, kernels) {
            let small = if l.small_n { dims.n } else { dims.m };
            // f16 and bf16 (2-byte operands) only.
            let wn = l.layout == WLayout::NContiguous && l.types.input_bytes() == 2;
            let min_rows = if wn { NARROW_MIN_ROWS_WN } else { NARROW_MIN_ROWS };
            if small >= min_rows {
                let w = warpgroup_launch(wgmma, dims, self.desc.alpha, (count, sm_count), None, self.balance_last_wave);
                // A B that must be copied K-major first costs a launch: from
                // NARROW_COPY_MIN_ROWS rows on, where the token-sized
                // kernels read their X with k strided.
                let copies_b = !read_in_layout(wgmma, w.kernel.tile, 1, w.route.dims.b_layout == Layout::ColMajor);
                if w.kernel.tile.narrow() && (!copies_b || small >= NARROW_COPY_MIN_ROWS) {
                    return Ok(None);
                }
            }
        }
        Ok(launch)
    }

    /// The launch of `count` products shaped as the validated `dims` (user
    /// form) on `device`: the token-sized kernels where they apply
    /// ([`Gemm::skinny_on`]), else the ladder's configuration, split and
    /// packing ([`Gemm::plan_on`] for the kernel form), or the tensor-core
    /// stage of the device and its kernel, route and split.
    pub(crate) fn launch_on(
        &self,
        kernels: Kernels,
        device: &Arc<Device>,
        dims: &GemmDims,
        count: usize,
    ) -> Result<Launch, Error> {
        if let Some(l) = self.skinny_on(kernels, (device.compute_capability(), device.sm_count()), dims, count)? {
            return Ok(Launch::Skinny(l));
        }
        match kernels {
            Kernels::Ladder(precision) => {
                let (kdims, swapped) = dims.kernel_form();
                let reads_ab = self.desc.alpha != 0.0 && dims.k > 0;
                let kd = if reads_ab { kdims } else { GemmDims { k: 0, ..kdims } };
                let plan = self.plan_on(Some(device), precision, (kd.m, kd.n, kd.k), kd.layouts(), count)?;
                let (config, split_k, pack, tail) = (plan.config, plan.split_k, plan.pack, plan.tail);
                Ok(Launch::Ladder(LadderLaunch { precision, config, split_k, pack, kd, swapped, tail }))
            }
            Kernels::TensorCores(types, mma_sync) => match Self::mixed_stage(types, device, mma_sync)? {
                TensorCoreStage::Warpgroup => {
                    let sm = device.sm_count();
                    Ok(Launch::Warpgroup(warpgroup_launch(
                        types,
                        dims,
                        self.desc.alpha,
                        (count, sm),
                        self.warpgroup_split,
                        self.balance_last_wave,
                    )))
                }
                TensorCoreStage::MmaSync => {
                    let (sm, smem) = (device.sm_count(), device.limits().max_smem_per_block);
                    Ok(Launch::MmaSync(mma_launch(types, dims, sm, smem)))
                }
            },
            Kernels::Emulated(precision, ..) => self.emulated_launch(precision, device, dims),
        }
    }

    /// [`Gemm::plan_for_batch`] of an emulated product
    /// ([`Gemm::emulation`]).
    pub(crate) fn plan_emulated<T: Product<C>, C: Scalar>(
        &self,
        (m, n, k): (usize, usize, usize),
        count: usize,
    ) -> Result<ProductPlan, Error> {
        let device = self.plan_device();
        let Kernels::Emulated(precision, moduli, _) = self.kernels::<T, C>(count > 1, device.as_ref())? else {
            unreachable!("the emulation option gives emulated kernels or an error")
        };
        let (sm_count, cc, where_) = match &device {
            Some(d) => (d.sm_count(), d.compute_capability(), d.name().to_string()),
            None => (ASSUMED.0, ASSUMED.1, ASSUMED.2.to_string()),
        };
        let product = format!("{0} x {0} -> {0}", precision.name());
        if cc != (9, 0) {
            return Err(Error::Unsupported {
                product,
                why: format!("emulation runs on stage 9 (compute capability 9.0); {where_} is {}.{}", cc.0, cc.1),
            });
        }
        let dims = self.planned_dims((m, n, k));
        let l = self.emulated_parts(precision, sm_count, &dims);
        let layouts = gemm_core::KernelLayouts { a: Layout::RowMajor, b: Layout::ColMajor }.index();
        let kernel = l.products.0.kernel.names[layouts].unwrap_or("?");
        let (blocks, block_k) = l.blocks;
        Ok(ProductPlan {
            product,
            family: KernelFamily::Emulated {
                moduli,
                k_blocks: blocks,
                panel_rows: l.panel_rows,
                workspace_bytes: l.workspace_bytes(),
                kernel,
                accurate: l.bound.is_some(),
            },
            split_k: 1,
            route: format!(
                "{}residues written K-major (k padded to {block_k}), \
                 {} INT8 products in one strided batch per panel, CRT reconstruction fused with alpha and beta",
                if l.bound.is_some() {
                    "scales from a bound on |A||B| (coarse magnitudes, their INT8 product per panel, its row and column maxima), "
                } else {
                    "scales from each line's 2-norm (a warp a line), "
                },
                moduli * blocks
            ),
            copies: Vec::new(),
            why: format!("asked for with .emulation(..): {moduli} moduli"),
            device: where_,
            devices: None,
        })
    }

    /// The emulated launch of `dims` (user form) on `device`: its kernel
    /// form, k blocks, panels and the INT8 batches of stage 9; C <- beta C
    /// (alpha = 0 or k = 0) runs on the ladder, which reads neither A nor B.
    fn emulated_launch(&self, precision: Precision, device: &Arc<Device>, dims: &GemmDims) -> Result<Launch, Error> {
        if device.compute_capability() != (9, 0) {
            let (major, minor) = device.compute_capability();
            return Err(Error::Unsupported {
                product: format!("{0} x {0} -> {0} emulated on INT8 tensor cores", precision.name()),
                why: format!("it runs on stage 9 (compute capability 9.0); {} is {major}.{minor}", device.name()),
            });
        }
        let (kd, swapped) = dims.kernel_form();
        if self.desc.alpha == 0.0 || dims.k == 0 {
            let kd = GemmDims { k: 0, ..kd };
            let plan = self.plan_on(Some(device), precision, (kd.m, kd.n, 0), kd.layouts(), 1)?;
            let (config, split_k, pack, tail) = (plan.config, plan.split_k, plan.pack, plan.tail);
            return Ok(Launch::Ladder(LadderLaunch { precision, config, split_k, pack, kd, swapped, tail }));
        }
        Ok(Launch::Emulated(self.emulated_parts(precision, device.sm_count(), dims)))
    }

    /// The emulated launch of `dims` (user form, A and B read) on a device
    /// of `sm_count` SMs: its kernel form, k blocks, panels of C's rows and
    /// the INT8 batches of stage 9 (the full panel's and the last one's).
    pub(crate) fn emulated_parts(&self, precision: Precision, sm_count: u32, dims: &GemmDims) -> EmulatedLaunch {
        let emulation = self.emulation.expect("Kernels::Emulated comes from the option");
        let (kd, swapped) = dims.kernel_form();
        let moduli = emulation.moduli();
        let (blocks, block_k) = emulation::k_blocks(kd.k);
        let panel = emulation::panel_rows(moduli.n(), (kd.m, kd.n), (blocks, block_k), emulation.panel_bytes());
        let count = moduli.n() * blocks;
        let int8 = |rows: usize, count: usize| {
            let d = GemmDims {
                m: rows,
                n: kd.n,
                k: block_k,
                lda: block_k,
                ldb: block_k,
                ldc: kd.n,
                a_layout: Layout::RowMajor,
                b_layout: Layout::ColMajor,
                c_layout: Layout::RowMajor,
            };
            warpgroup_launch(WgmmaTypes::S8, &d, 1.0, (count, sm_count), None, false)
        };
        let last = kd.m % panel;
        let products = (int8(panel, count), (last != 0 && kd.m > panel).then(|| int8(last, count)));
        // The accurate mode's coarse products: a batch over the k blocks.
        let bound = (emulation.scaling() == Mode::Accurate)
            .then(|| (int8(panel, blocks), (last != 0 && kd.m > panel).then(|| int8(last, blocks))));
        EmulatedLaunch {
            precision,
            crt: emulation.crt_static(),
            target: moduli.scaling_target(),
            kd,
            swapped,
            blocks: (blocks, block_k),
            panel_rows: panel,
            products,
            bound,
        }
    }

    /// The launch of a list batch's problems `todo` (index, validated dims
    /// in user form) on `device`: the ladder's one grouped launch of the
    /// configuration planned for the largest problem, stage 9's grouped
    /// launches of one kernel, or stage 8's launch per problem.
    pub(crate) fn list_launch(
        &self,
        kernels: Kernels,
        device: &Arc<Device>,
        todo: &[(usize, GemmDims)],
    ) -> Result<ListLaunch, Error> {
        match kernels {
            Kernels::Ladder(precision) => {
                let problems: Vec<(usize, GemmDims, bool)> = todo
                    .iter()
                    .map(|&(i, dims)| {
                        let (kdims, swapped) = dims.kernel_form();
                        let reads_ab = self.desc.alpha != 0.0 && dims.k > 0;
                        (i, if reads_ab { kdims } else { GemmDims { k: 0, ..kdims } }, swapped)
                    })
                    .collect();
                // One configuration for all: the largest problem's.
                let Some(largest) = problems.iter().map(|p| p.1).max_by_key(|d| (d.m * d.n, d.k)) else {
                    return Ok(ListLaunch::EachAlone(Vec::new()));
                };
                let config = self.batch_config(device, precision, &largest, problems.len())?;
                Ok(ListLaunch::Ladder { precision, config, largest, problems })
            }
            Kernels::TensorCores(types, mma_sync) => match Self::mixed_stage(types, device, mma_sync)? {
                TensorCoreStage::Warpgroup => {
                    Ok(ListLaunch::Warpgroup(warpgroup_list(types, todo, self.desc.alpha, device.sm_count())))
                }
                TensorCoreStage::MmaSync => Ok(ListLaunch::EachAlone(
                    todo.iter()
                        .map(|(i, dims)| {
                            let (sm, smem) = (device.sm_count(), device.limits().max_smem_per_block);
                            (*i, Launch::MmaSync(mma_launch(types, dims, sm, smem)))
                        })
                        .collect(),
                )),
            },
            Kernels::Emulated(..) => Ok(ListLaunch::EachAlone(
                todo.iter()
                    .map(|&(i, dims)| Ok((i, self.launch_on(kernels, device, &dims, 1)?)))
                    .collect::<Result<_, Error>>()?,
            )),
        }
    }

    /// The builder the host path's tiles run with, given the whole
    /// product's launch `whole`: every tile takes the whole product's
    /// kernel, split and packing on the ladder (unless the options chose
    /// the kernel, which is then the same for every tile already) and its
    /// split of k on stage 9. A tile planned on its own shape could take
    /// another kernel or split and give other bits than the same product on
    /// device matrices. Checks the ladder's launch against the device's
    /// limits first (before any copy).
    pub(crate) fn tile_step(&self, whole: &Launch, device: &Device) -> Result<Gemm, Error> {
        let mut step = self.clone();
        step.skinny = Some(match whole {
            Launch::Skinny(l) => Some(*l),
            _ => None,
        });
        match whole {
            Launch::Ladder(l) => {
                let gdims = if l.pack { pack::packed(&l.kd, l.precision).0 } else { l.kd };
                match l.precision {
                    Precision::F64 => checked_geometry::<f64>(device, l.config, &gdims, SINGLE)?,
                    Precision::F32 => checked_geometry::<f32>(device, l.config, &gdims, SINGLE)?,
                };
                if l.kd.k > 0 && self.chosen_config(l.precision)?.is_none() {
                    step = step.kernel(l.config).split_k(l.split_k).pack(l.pack);
                }
            }
            Launch::Warpgroup(l) if l.reads_ab => {
                // The tiles run whole, as the whole product's head would.
                (step.warpgroup_split, step.balance_last_wave) = (Some(l.split), false)
            }
            _ => {}
        }
        Ok(step)
    }

    /// [`Gemm::plan_for`] where a call would run the token-sized kernels
    /// (C row-major; without a device: as on compute capability 9.0 with 132
    /// SMs). None otherwise, and where the options are in error (the other
    /// planners report those).
    pub(crate) fn plan_skinny<T: Product<C>, C: Scalar>(
        &self,
        (m, n, k): (usize, usize, usize),
        count: usize,
    ) -> Result<Option<ProductPlan>, Error> {
        let device = self.plan_device();
        let Ok(kernels) = self.kernels::<T, C>(count > 1, device.as_ref()) else { return Ok(None) };
        let (sm_count, cc, where_) = match &device {
            Some(d) => (d.sm_count(), d.compute_capability(), d.name().to_string()),
            None => (ASSUMED.0, ASSUMED.1, ASSUMED.2.to_string()),
        };
        let dims = self.planned_dims((m, n, k));
        let Ok(Some(launch)) = self.skinny_on(kernels, (cc, sm_count), &dims, count) else { return Ok(None) };
        let product = match kernels {
            Kernels::Ladder(p) => format!("{0} x {0} -> {0}", p.name()),
            Kernels::TensorCores(types, _) => product_name(types),
            Kernels::Emulated(p, ..) => format!("{0} x {0} -> {0}", p.name()),
        };
        let (family, route) = skinny_family(&launch);
        let plural = |x: usize, one: &str| if x == 1 { format!("1 {one}") } else { format!("{x} {one}s") };
        let side = if launch.small_n { plural(n, "column") } else { plural(m, "row") };
        Ok(Some(ProductPlan {
            product,
            family,
            split_k: 1,
            route,
            // A batch's plan: each product with its own X.
            copies: if launch.copies_x(count, 1) {
                let x = if launch.small_n { "B" } else { "A" };
                vec![format!("{x} copied with k contiguous (the small operand, read with k strided otherwise)")]
            } else {
                Vec::new()
            },
            why: format!("C has {side}: the product is bound by reading the large operand once"),
            device: where_,
            devices: None,
        }))
    }
}

/// The fewest rows (of C's small side) a token-sized product of the tensor
/// core types needs to run on stage 9's narrow tiles rather than the
/// token-sized kernels, where stage 9 would take a narrow tile. Measured
/// (NVIDIA H200, 2026-11-26, f16, back-to-back calls beside cuBLAS): at 2
/// to 32 rows x 4096 x 4096 the narrow tiles ran 0.76-0.82x cuBLAS where
/// the token-sized kernels ran 0.50-0.73x (0.35 at 8 rows with a row-major
/// weight), at 14336 x 4096 0.95-0.97x; at one row the token-sized kernel
/// with a weight stored n x k ran 0.96x, the narrow tile 0.82x (its
/// reduction's launch).
const NARROW_MIN_ROWS: usize = 2;

/// [`NARROW_MIN_ROWS`] for f16 and bf16 where W's N is contiguous (a
/// row-major B with m small): one row. There the CUDA-core kernel at one
/// row read the weight at 42% of DRAM peak (ncu, bf16 1 x 4096 x 14336:
/// 58.8 us; cuBLAS's 128 x 8 tensor-core kernel 31.9 us and its reduction
/// 3.6 us) and ran 0.71-0.89x cuBLAS at 1 x 4096 x 11008 and 14336 and 1 x
/// 11008 and 14336 x 4096; the narrow tile at one row ran 0.90-1.01x there
/// and 0.93-0.96x at 1 x 4096 x 4096 (f16 and bf16 -> f32, NVIDIA H200,
/// 2026-11-26, same runs as cuBLAS). TF32 keeps 2: its narrow tile at one
/// row ran 0.79-0.89x where k is split (1 x 4096 x 4096 to 14336), the
/// CUDA-core kernel 0.90-0.96x.
const NARROW_MIN_ROWS_WN: usize = 1;

/// The fewest rows of a token-sized product that leaves the token-sized
/// kernels for a narrow tile whose B is copied K-major first.
const NARROW_COPY_MIN_ROWS: usize = 8;
