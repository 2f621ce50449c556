//! Fused epilogues and scales: what a product computes besides `alpha
//! op(A) op(B) + beta C`, in the product's own launch (stage 9's kernels
//! for the mixed-precision types, stage 8's for f64 and stage 7's for f32),
//!
//! ```text
//! C <- act(alpha sA sB (rs(i) cs(j) sum over k-blocks kb of sa(i, kb) sb(kb, j) op(A) op(B) over kb) + beta C + bias)
//! ```
//!
//! with per-tensor scales sA, sB (folded into alpha), per-row scales rs of
//! op(A) and per-column scales cs of op(B), FP8 block scales sa, sb
//! (DeepGEMM's: 1 x 128 or 128 x 128 blocks of op(A) along k, 128 x 128
//! blocks of op(B)), a bias by row or by column (f32 or C's type), and an
//! activation (none, ReLU, GELU with the tanh approximation, as
//! cuBLASLt's `CUBLASLT_EPILOGUE_GELU`; within a few ulps of C's type).
//! [`Gemm::epilogue`] runs a product with one. f64 and f32 products take
//! the f32 scales and an f32 or C-type bias.
//!
//! Sources: DeepSeek-AI, "DeepGEMM: clean and efficient FP8 GEMM kernels
//! with fine-grained scaling" (block scales, promotion every 128 of k);
//! NVIDIA, cuBLASLt's `cublasLtMatmulDescAttributes_t` (scale modes, bias
//! and GELU epilogues).

use crate::api::dispatch::Kernels;
use crate::api::gemm::{describe_warpgroup, Gemm, ASSUMED};
use crate::device::memory::clone_htod;
use crate::device::registry::ENTRY_POINTS;
use crate::device::Device;
use crate::element::{product_name, Product, Recast, Scalar, Types};
use crate::error::Error;
use crate::exec::ladder::enqueue_fused;
use crate::exec::warpgroup::{enqueue, enqueue_grouped};
use crate::exec::TensorCoreStage;
use crate::operands::device_matrix::{DeviceMatrix, DeviceView, DeviceViewMut};
use crate::operands::matrix::{MatMut, MatRef};
use crate::plan::product_plan::{warpgroup_fused_launch, warpgroup_fused_list, Fuse, KernelFamily, ProductPlan};
use crate::tuning::{PackReason, Plan, PlanSource, SplitReason};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DeviceSlice, SyncOnDrop};
use gemm_core::warpgroup::{
    Fusion, WgmmaTypes, ACT_GELU, ACT_NONE, ACT_RELU, BIAS_COLUMNS, BIAS_C_TYPE, BIAS_F32, BIAS_ROWS, BLOCK_SCALE_K,
};
use gemm_core::{GemmDims, KernelConfig, Precision, Stage as CoreStage};
use std::any::TypeId;
use std::sync::Arc;

/// The activation a fused epilogue applies last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    /// None: `C <- v`.
    #[default]
    None,
    /// `max(v, 0)`; a NaN stays NaN.
    Relu,
    /// GELU, tanh approximation (as cuBLASLt's): `0.5 v (1 + tanh(sqrt(2 /
    /// pi) (v + 0.044715 v^3)))`. For an f32 C computed in f32 within 2^-20
    /// |v|; for an f64 C in f64, within a few ulps; for a bf16 or f16 C
    /// with the GPU's approximate tanh (`tanh.approx.f32`, as NVIDIA's
    /// CUTLASS epilogues), within 2^-12 |v|: below half an ulp of v in C's
    /// type, though for v < -2, where the result is near 0, that can be
    /// many ulps of the result.
    Gelu,
}

/// Which way a bias runs over C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Along {
    /// One value per row of C (m values): `bias[i]` is added to row i.
    Rows,
    /// One value per column of C (n values): `bias[j]` is added to column j.
    Columns,
}

/// Values an epilogue reads: a host slice (copied to the GPU with the call)
/// or a view of a cudarc buffer on the product's device (read in place; it
/// must outlive the enqueued work, as the operands do).
pub enum Values<'v, T> {
    /// In host memory.
    Host(&'v [T]),
    /// In GPU memory.
    Device(CudaView<'v, T>),
}

impl<'v, T> Values<'v, T> {
    fn len(&self) -> usize {
        match self {
            Values::Host(s) => s.len(),
            Values::Device(v) => v.len(),
        }
    }
}

impl<'v, T> From<&'v [T]> for Values<'v, T> {
    fn from(s: &'v [T]) -> Self {
        Values::Host(s)
    }
}

impl<'v, T> From<&'v Vec<T>> for Values<'v, T> {
    fn from(s: &'v Vec<T>) -> Self {
        Values::Host(s)
    }
}

impl<'v, T> From<&'v CudaSlice<T>> for Values<'v, T> {
    fn from(s: &'v CudaSlice<T>) -> Self {
        Values::Device(s.as_view())
    }
}

impl<'v, T> From<CudaView<'v, T>> for Values<'v, T> {
    fn from(v: CudaView<'v, T>) -> Self {
        Values::Device(v)
    }
}

/// A bias: f32, or C's type (f16 or bf16 for a 16-bit C, f64 for an f64
/// C).
pub enum Bias<'v> {
    /// f32 values.
    F32(Values<'v, f32>),
    /// f64 values (C must be f64).
    F64(Values<'v, f64>),
    /// f16 values (C must be f16).
    F16(Values<'v, half::f16>),
    /// bf16 values (C must be bf16).
    Bf16(Values<'v, half::bf16>),
}

impl<'v, V: Into<Values<'v, f32>>> From<V> for Bias<'v> {
    fn from(v: V) -> Self {
        Bias::F32(v.into())
    }
}

impl Bias<'_> {
    /// The bias's type, "f32" or C's ("f16", "bf16", "f64").
    ///
    /// # Errors
    /// [`Error::Epilogue`] for a 16-bit bias of a type other than C's.
    fn type_for<C: Scalar>(&self) -> Result<&'static str, Error> {
        let c_is = |t: TypeId| TypeId::of::<C>() == t;
        match self {
            Bias::F32(_) => Ok("f32"),
            Bias::F64(_) if c_is(TypeId::of::<f64>()) => Ok("f64"),
            Bias::F16(_) if c_is(TypeId::of::<half::f16>()) => Ok("f16"),
            Bias::Bf16(_) if c_is(TypeId::of::<half::bf16>()) => Ok("bf16"),
            _ => {
                Err(Error::Epilogue { what: "the bias", why: format!("its values are f32 or C's type ({})", C::NAME) })
            }
        }
    }
}

impl<'v> Bias<'v> {
    /// A bias of f64 values (for an f64 C).
    pub fn f64(v: impl Into<Values<'v, f64>>) -> Self {
        Bias::F64(v.into())
    }

    /// A bias of f16 values (for an f16 C).
    pub fn f16(v: impl Into<Values<'v, half::f16>>) -> Self {
        Bias::F16(v.into())
    }

    /// A bias of bf16 values (for a bf16 C).
    pub fn bf16(v: impl Into<Values<'v, half::bf16>>) -> Self {
        Bias::Bf16(v.into())
    }
}

/// FP8 block scales (DeepGEMM's fine-grained scaling), f32: op(A) (m x k)
/// in blocks of `a_rows` rows (1 or 128) by 128 of k, op(B) (k x n) in
/// blocks of 128 x 128. The product over each 128 of k is multiplied by
/// its blocks' scales as the kernel adds it to its f32 sum.
///
/// Layouts, in elements: A's scale of row block `ib = i / a_rows` and k
/// block `kb = p / 128` at `a[ib * a_strides.0 + kb * a_strides.1]`, by
/// default `(1, ceil(m / a_rows))` (column-major `ceil(m / a_rows) x
/// ceil(k / 128)`: DeepGEMM's layout for A); B's of k block kb and column
/// block `jb = j / 128` at `b[jb * b_strides.0 + kb * b_strides.1]`, by
/// default `(ceil(k / 128), 1)` (DeepGEMM's `(n / 128, k / 128)`,
/// row-major).
pub struct BlockScales<'v> {
    a: Values<'v, f32>,
    a_rows: usize,
    a_strides: Option<(usize, usize)>,
    b: Values<'v, f32>,
    b_strides: Option<(usize, usize)>,
}

impl<'v> BlockScales<'v> {
    /// DeepGEMM's scaling: A's scales per 1 x 128 block, B's per 128 x 128,
    /// in the default layouts above.
    pub fn new(a: impl Into<Values<'v, f32>>, b: impl Into<Values<'v, f32>>) -> Self {
        BlockScales { a: a.into(), a_rows: 1, a_strides: None, b: b.into(), b_strides: None }
    }

    /// Rows of A one A scale covers: 1 (the default) or 128.
    pub fn a_rows(mut self, rows: usize) -> Self {
        self.a_rows = rows;
        self
    }

    /// A's strides (per row block, per k block), in elements.
    pub fn a_strides(mut self, per_row_block: usize, per_k_block: usize) -> Self {
        self.a_strides = Some((per_row_block, per_k_block));
        self
    }

    /// B's strides (per column block, per k block), in elements.
    pub fn b_strides(mut self, per_column_block: usize, per_k_block: usize) -> Self {
        self.b_strides = Some((per_column_block, per_k_block));
        self
    }

    /// The rows of A one scale covers, checked: 1 or 128.
    fn checked_a_rows(&self) -> Result<usize, Error> {
        if self.a_rows != 1 && self.a_rows != BLOCK_SCALE_K as usize {
            return Err(Error::Epilogue {
                what: "the block scales",
                why: format!("A's blocks cover 1 or 128 rows, not {}", self.a_rows),
            });
        }
        Ok(self.a_rows)
    }
}

/// What a product fuses into its launch (see the module docs): build one,
/// then run with [`Gemm::epilogue`]. Stage 9 (compute capability 9.0), for
/// f16, bf16, TF32 and FP8 operands with a floating-point C; block scales
/// for FP8 only.
///
/// ```no_run
/// use gemm::{Activation, Along, DeviceMatrix, Epilogue, Gemm};
/// use gemm::half::bf16;
/// # fn main() -> Result<(), gemm::Error> {
/// let dev = gemm::default_device()?;
/// let (m, n, k) = (256, 512, 1024);
/// let a = DeviceMatrix::<bf16>::zeros(&dev, m, k)?;
/// let b = DeviceMatrix::<bf16>::zeros(&dev, k, n)?;
/// let mut c = DeviceMatrix::<bf16>::zeros(&dev, m, n)?;
/// let bias = vec![0.5f32; n];
/// let e = Epilogue::new().bias(Along::Columns, &bias).activation(Activation::Gelu);
/// Gemm::new().epilogue(&e).run_device(&a, &b, &mut c)?; // C = GELU(A B + bias)
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct Epilogue<'v> {
    scale_a: Option<f32>,
    scale_b: Option<f32>,
    row_scales: Option<Values<'v, f32>>,
    col_scales: Option<Values<'v, f32>>,
    bias: Option<(Along, Bias<'v>)>,
    activation: Activation,
    block_scales: Option<BlockScales<'v>>,
}

impl<'v> Epilogue<'v> {
    /// Nothing fused: the plain product.
    pub fn new() -> Self {
        Epilogue::default()
    }

    /// A per-tensor scale of A (an FP8 operand's dequantization factor):
    /// multiplies alpha.
    pub fn scale_a(mut self, scale: f32) -> Self {
        self.scale_a = Some(scale);
        self
    }

    /// A per-tensor scale of B: multiplies alpha.
    pub fn scale_b(mut self, scale: f32) -> Self {
        self.scale_b = Some(scale);
        self
    }

    /// Per-row scales of op(A): m f32 values, row i of the product times
    /// `scales[i]` (before beta C is added).
    pub fn row_scales(mut self, scales: impl Into<Values<'v, f32>>) -> Self {
        self.row_scales = Some(scales.into());
        self
    }

    /// Per-column scales of op(B): n f32 values, column j of the product
    /// times `scales[j]`.
    pub fn col_scales(mut self, scales: impl Into<Values<'v, f32>>) -> Self {
        self.col_scales = Some(scales.into());
        self
    }

    /// A bias added after beta C: m values along [`Along::Rows`], n along
    /// [`Along::Columns`]; f32 (a slice or buffer of f32) or C's type
    /// ([`Bias::f16`], [`Bias::bf16`]).
    pub fn bias(mut self, along: Along, values: impl Into<Bias<'v>>) -> Self {
        self.bias = Some((along, values.into()));
        self
    }

    /// The activation applied last.
    pub fn activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }

    /// FP8 block scales ([`BlockScales`]).
    pub fn block_scales(mut self, scales: BlockScales<'v>) -> Self {
        self.block_scales = Some(scales);
        self
    }

    /// alpha times the per-tensor scales.
    fn alpha(&self, alpha: f64) -> f64 {
        alpha * self.scale_a.unwrap_or(1.0) as f64 * self.scale_b.unwrap_or(1.0) as f64
    }

    /// Whether the epilogue changes C where the plain product would not
    /// (alpha = 0 or k = 0, beta = 1): a bias or an activation.
    fn changes_c(&self) -> bool {
        self.bias.is_some() || self.activation != Activation::None
    }

    /// How a stage-9 launch fuses it: [`Fuse::Splittable`] where nothing
    /// in it needs the sums of the whole of k (no bias or activation:
    /// scales only, each linear in the sums, so each slice of a split k
    /// may apply them to its own), else [`Fuse::Epilogue`].
    fn fuse(&self) -> Fuse {
        if self.changes_c() {
            Fuse::Epilogue
        } else {
            Fuse::Splittable
        }
    }

    /// Whether the user's A stays the kernel's A (`keep_a` of
    /// `warpgroup_fused_launch`): A's block scales are per row (1 x 128),
    /// which the kernel applies to its A only.
    fn keeps_a(&self) -> bool {
        self.block_scales.as_ref().is_some_and(|s| s.a_rows == 1)
    }

    /// What the epilogue has, in words, for a plan (`alpha`: the
    /// builder's, before the per-tensor scales), its inputs' types checked
    /// against C's ([`Fused::plan_for`]).
    fn parts<C: Scalar>(&self, alpha: f64) -> Result<Vec<String>, Error> {
        let mut parts = Vec::new();
        if self.scale_a.is_some() || self.scale_b.is_some() {
            let s = |x: Option<f32>| x.unwrap_or(1.0);
            parts.push(format!(
                "per-tensor scales sA = {}, sB = {} (in alpha: {})",
                s(self.scale_a),
                s(self.scale_b),
                self.alpha(alpha)
            ));
        }
        if self.row_scales.is_some() {
            parts.push("row scales of op(A) (m values)".to_string());
        }
        if self.col_scales.is_some() {
            parts.push("column scales of op(B) (n values)".to_string());
        }
        if let Some((along, bias)) = &self.bias {
            let (along, count) = if *along == Along::Rows { ("rows", 'm') } else { ("columns", 'n') };
            parts.push(format!("a bias along {along} ({count} values, {})", bias.type_for::<C>()?));
        }
        match self.activation {
            Activation::None => {}
            Activation::Relu => parts.push("ReLU".to_string()),
            Activation::Gelu => parts.push("GELU (tanh approximation)".to_string()),
        }
        if let Some(s) = &self.block_scales {
            parts.push(format!(
                "FP8 block scales (A in {} x 128 blocks, B in 128 x 128, each 128 of k scaled as it is added to the \
                 f32 sums)",
                s.checked_a_rows()?
            ));
        }
        Ok(parts)
    }
}

/// A product with a fused [`Epilogue`]: [`Gemm::epilogue`]'s answer, with
/// the builder's doors for a single product.
pub struct Fused<'g, 'v> {
    gemm: &'g Gemm,
    epilogue: &'g Epilogue<'v>,
}

impl Gemm {
    /// This builder's product with what `epilogue` fuses into it: f16,
    /// bf16, TF32 with [`Gemm::allow_tf32`] and FP8 operands on stage 9
    /// (compute capability 9.0; a floating-point C), f64 on stage 8's and
    /// f32 on stage 7's fused kernels (`gemm_core::fused_menu!`; any
    /// device; no emulation); i8 (an
    /// integer C) does not fuse. The product runs in one launch without a
    /// split of k, except on stage 9 where the epilogue has scales alone
    /// (no bias, no activation) and the planner splits k as for a plain
    /// product ([`Fused::plan_for`]); the tuning options of stages 1-8 (a
    /// forced `.split_k` among them) do not apply.
    /// [`Fused::plan_for`] says which kernel it runs, and why.
    pub fn epilogue<'g, 'v>(&'g self, epilogue: &'g Epilogue<'v>) -> Fused<'g, 'v> {
        Fused { gemm: self, epilogue }
    }
}

impl Fused<'_, '_> {
    /// As [`Gemm::run_device`], with the epilogue fused.
    ///
    /// # Errors
    /// As [`Gemm::run_device`]; [`Error::Unsupported`] for a product that
    /// does not fuse (i8, emulation, a mixed-precision type off compute
    /// capability 9.0, an option of stages 1-8 set, block scales on other
    /// than FP8 operands); [`Error::Epilogue`] for
    /// an input too short for the product, on another device, or a bias of
    /// a type other than f32 and C's.
    pub fn run_device<'a, 'b, 'c, T: Product<C>, C: Scalar>(
        &self,
        a: impl Into<DeviceView<'a, T>>,
        b: impl Into<DeviceView<'b, T>>,
        c: impl Into<DeviceViewMut<'c, C>>,
    ) -> Result<(), Error> {
        let (a, b, c) = (a.into(), b.into(), c.into());
        if let Some(precision) = self.ladder::<T, C>(Some(c.device))? {
            return self.run_ladder_device(precision, a, b, c);
        }
        let types = self.types::<T, C>(Some(c.device))?;
        self.run_device_as(types, a, b, c)
    }

    /// f64 or f32 (without TF32) when `T x T -> C` runs on the ladder
    /// (`device`: the operands' where known), its options checked: the
    /// fused ladder takes no option of stages 1-8, no emulation and no
    /// block scales.
    fn ladder<T: Product<C>, C: Scalar>(&self, device: Option<&Arc<Device>>) -> Result<Option<Precision>, Error> {
        let Kernels::Ladder(precision) = self.gemm.kernels::<T, C>(false, device)? else {
            return Ok(None);
        };
        self.ladder_checked(precision).map(Some)
    }

    /// `precision` when the builder's options and the epilogue fuse on the
    /// ladder.
    fn ladder_checked(&self, precision: Precision) -> Result<Precision, Error> {
        let product = format!("{0} x {0} -> {0}", precision.name());
        let refuse = |why: String| Err(Error::Unsupported { product: product.clone(), why });
        if self.epilogue.block_scales.is_some() {
            return refuse("block scales apply to FP8 operands only".into());
        }
        if let Some(option) = self.gemm.tuning_option_set() {
            return refuse(format!("{option} does not apply to a fused product"));
        }
        Ok(precision)
    }

    /// The fused ladder launch of `dims` (user form) with alpha `alpha` on
    /// `device` (None: the tuning table's first device): the plan (the
    /// measured fastest configuration at the nearest shape where it has a
    /// fused twin, [`gemm_core::fused_menu!`], else the fused configuration
    /// of the nearest block-tile size), the kernel form (k 0 when A and B are not
    /// read) and whether A and B trade places. k is not split (a split's
    /// sum would have to apply the epilogue), the operands are packed
    /// first where the tuning table packs the plain product (f32 at 4096³
    /// with a column-major B: the fused product read in place took 18% longer
    /// than the plain one, NVIDIA H200, 2026-11-29), the token-sized kernels
    /// are not used.
    fn ladder_launch(
        precision: Precision,
        device: Option<&Device>,
        dims: &GemmDims,
        alpha: f64,
    ) -> (Plan, GemmDims, bool) {
        let (kd, swapped) = dims.kernel_form();
        let kd = if alpha != 0.0 && dims.k > 0 { kd } else { GemmDims { k: 0, ..kd } };
        let stage = if precision == Precision::F64 { CoreStage::TensorCore } else { CoreStage::Pipelined };
        let plan = crate::tuning::choose(device.map(Device::name), precision, kd.m, kd.n, kd.k, kd.layouts());
        let packs = plan.pack && kd.k > 0;
        let whole = Plan {
            split_k: 1,
            split: SplitReason::NotConsidered,
            pack: packs,
            pack_reason: if packs { plan.pack_reason } else { PackReason::NotConsidered },
            tail: None,
            ..plan
        };
        let fused = ENTRY_POINTS.iter().filter(|e| e.precision == precision && e.fused_name.is_some());
        if fused.clone().any(|e| e.config == plan.config) {
            return (whole, kd, swapped);
        }
        // The fused tile nearest the measured one in size (C elements per
        // block, as a ratio), the larger on a tie.
        let area = |c: KernelConfig| (c.c_tile().bm as f64 * c.c_tile().bn as f64).ln();
        let target = area(plan.config);
        let nearest = fused
            .map(|e| e.config)
            .min_by(|x, y| {
                (area(*x) - target).abs().total_cmp(&(area(*y) - target).abs()).then(area(*y).total_cmp(&area(*x)))
            })
            .unwrap_or_else(|| crate::tuning::stage_default(stage, precision));
        (Plan { config: nearest, source: PlanSource::Fallback, ..whole }, kd, swapped)
    }

    /// A device call's product (validated; the call's options checked), its
    /// device and stream; None when there is nothing to do (an empty C, or
    /// a C the product leaves as it is and the epilogue does not change).
    #[allow(clippy::type_complexity)]
    fn device_problem<T: Scalar, C: Scalar>(
        &self,
        a: &DeviceView<'_, T>,
        b: &DeviceView<'_, T>,
        c: &DeviceViewMut<'_, C>,
    ) -> Result<Option<(GemmDims, Arc<Device>, Arc<CudaStream>)>, Error> {
        let gemm = self.gemm;
        gemm.check_device_call()?;
        gemm.desc.device_problem_with(a, b, c, gemm.target(), !self.epilogue.changes_c())
    }

    /// [`Fused::run_device`] on the f64/f32 ladder: one launch of the
    /// planned configuration's `<name>_fused` entry point, k not split, the
    /// operands read in place or from packed copies, as planned.
    fn run_ladder_device<T: Scalar, C: Scalar>(
        &self,
        precision: Precision,
        a: DeviceView<'_, T>,
        b: DeviceView<'_, T>,
        mut c: DeviceViewMut<'_, C>,
    ) -> Result<(), Error> {
        let (gemm, e) = (self.gemm, self.epilogue);
        let Some((dims, device, stream)) = self.device_problem(&a, &b, &c)? else {
            return Ok(());
        };
        let alpha = e.alpha(gemm.desc.alpha);
        let (plan, kd, swapped) = Self::ladder_launch(precision, Some(&device), &dims, alpha);
        let (config, pack) = (plan.config, plan.pack);
        let mut inputs = Inputs { device: &device, stream: &stream, owned: Vec::new(), guards: Vec::new() };
        let fusion = kernel_fusion::<C>(e, &dims, swapped, &mut inputs)?;
        let (ka, kb) = if swapped { (&b.data, &a.data) } else { (&a.data, &b.data) };
        let beta = gemm.desc.beta;
        let done = match precision {
            Precision::F64 => {
                let ops = (ka.recast(), kb.recast(), (&mut c.data).recast());
                enqueue_fused::<f64>(&device, &stream, (config, pack), &kd, (alpha, beta), ops, &fusion)
            }
            Precision::F32 => {
                let ops = (ka.recast(), kb.recast(), (&mut c.data).recast());
                enqueue_fused::<f32>(&device, &stream, (config, pack), &kd, (alpha as f32, beta as f32), ops, &fusion)
            }
        };
        drop(inputs); // host inputs' copies freed stream-ordered, after the launch
        done
    }

    /// [`Fused::run_device`] of the stage-9 `types` (checked by the caller),
    /// on operands of `T` (e4m3 for any FP8 pair: their bits).
    pub(crate) fn run_device_as<T: Scalar, C: Scalar>(
        &self,
        types: WgmmaTypes,
        a: DeviceView<'_, T>,
        b: DeviceView<'_, T>,
        mut c: DeviceViewMut<'_, C>,
    ) -> Result<(), Error> {
        let (gemm, e) = (self.gemm, self.epilogue);
        let Some((dims, device, stream)) = self.device_problem(&a, &b, &c)? else {
            return Ok(());
        };
        if Gemm::mixed_stage(types, &device, false)? != TensorCoreStage::Warpgroup {
            return Err(unsupported(types, "fused epilogues run on stage 9 (compute capability 9.0) only"));
        }
        let alpha = e.alpha(gemm.desc.alpha);
        let launch = warpgroup_fused_launch(types, &dims, alpha, (device.sm_count(), e.fuse()), e.keeps_a());
        let mut inputs = Inputs { device: &device, stream: &stream, owned: Vec::new(), guards: Vec::new() };
        let fusion = kernel_fusion::<C>(e, &dims, launch.swapped, &mut inputs)?;
        let ops = (&a.data, &b.data, &mut c.data);
        let done = enqueue(&launch, &device, &stream, (alpha, gemm.desc.beta), ops, (1, [0; 3]), Some(&fusion));
        drop(inputs); // host inputs' copies freed stream-ordered, after the launch
        done
    }

    /// As [`Gemm::run`], with the epilogue fused: A, B (and C when beta is
    /// not 0) are copied to the device whole, the product runs there, and C
    /// comes back (its padding left as it was). Blocks until C holds the
    /// result.
    ///
    /// # Errors
    /// As [`Fused::run_device`]; [`Error::OutOfMemory`] when the operands do
    /// not fit on the device (fused products of host matrices are not
    /// streamed in tiles).
    pub fn run<'a, 'b, 'c, T: Product<C>, C: Scalar>(
        &self,
        a: impl Into<MatRef<'a, T>>,
        b: impl Into<MatRef<'b, T>>,
        c: impl Into<MatMut<'c, C>>,
    ) -> Result<(), Error> {
        let (a, b, mut c) = (a.into(), b.into(), c.into());
        let gemm = self.gemm;
        let ladder = self.ladder::<T, C>(None)?;
        let types = if ladder.is_none() { Some(self.types::<T, C>(None)?) } else { None };
        let c_len = c.dims().required_len().unwrap_or(0);
        let dims = gemm.desc.problem((a.dims(), a.span().len()), (b.dims(), b.span().len()), (c.dims(), c_len))?;
        if dims.is_empty() || (!self.epilogue.changes_c() && gemm.desc.leaves_c_unchanged(&dims)) {
            return Ok(());
        }
        gemm.check_no_group("a fused epilogue (one device)")?;
        let device = match gemm.target().device {
            Some(d) => d.clone(),
            None => crate::default_device()?,
        };
        if let Some(types) = types {
            if Gemm::mixed_stage(types, &device, false)? != TensorCoreStage::Warpgroup {
                return Err(unsupported(types, "fused epilogues run on stage 9 (compute capability 9.0) only"));
            }
        }
        let da = DeviceMatrix::from_host(&device, a)?;
        let db = DeviceMatrix::from_host(&device, b)?;
        let mut dc = if gemm.desc.beta != 0.0 {
            DeviceMatrix::from_host(&device, c.as_ref())?
        } else {
            DeviceMatrix::zeros_in(&device, c.dims().rows, c.dims().cols, c.dims().layout)?
        };
        let on_device = gemm.clone().device(&device);
        Fused { gemm: &on_device, epilogue: self.epilogue }.run_device(&da, &db, &mut dc)?;
        dc.copy_to_host(c.rb())
    }

    /// What [`Fused::run_device`] runs for an m x n x k product of `T`
    /// operands into a `C` with this builder's options and epilogue, and
    /// why: as [`Gemm::plan_for`] (operands row-major with the builder's op
    /// flags, op = T: that operand read column-major, leading dimensions
    /// packed, C row-major; the builder's device, else the default device,
    /// else an assumed compute capability 9.0 with 132 SMs, said so), the
    /// kernel being the family's fused entry point (`<entry>_fused`) for
    /// the layouts the operands are read in, among the tiles that fuse. The
    /// plan states what the epilogue has (per-tensor, row, column and FP8
    /// block scales, the bias and its type, the activation); the last wave
    /// is not balanced, and k is split (`split_k` above 1: slices by the
    /// tile's fused kernel with an f32 C, then a reduction that applies
    /// alpha and beta) only on stage 9 where the epilogue has scales alone
    /// (no bias, no activation) and the block tiles would leave most SMs
    /// idle (m of 64 or 128 with a long k); otherwise a fused product is
    /// one launch. [`Fused::run`] runs the same kernel once the operands
    /// are on the device. The lengths of the epilogue's inputs
    /// are checked by the call, not here.
    ///
    /// ```
    /// use gemm::half::bf16;
    /// use gemm::{Activation, Along, Epilogue, Gemm, KernelFamily};
    /// let bias = vec![0.5f32; 1024];
    /// let e = Epilogue::new().bias(Along::Columns, &bias).activation(Activation::Gelu);
    /// // Without a GPU, planned as on compute capability 9.0; another
    /// // device does not fuse (`Error::Unsupported`).
    /// match Gemm::new().epilogue(&e).plan_for::<bf16, bf16>(4096, 1024, 4096) {
    ///     Ok(plan) => {
    ///         println!("{plan}"); // "bf16 x bf16 -> bf16: stage 9 (warpgroup MMA), wgmma_bf16_b128x128_d5_nn_fused ..."
    ///         let KernelFamily::Warpgroup { kernel, .. } = plan.family else { unreachable!() };
    ///         assert!(kernel.ends_with("_fused") && plan.split_k == 1);
    ///         assert!(plan.why.contains("GELU"));
    ///     }
    ///     Err(gemm::Error::Unsupported { .. }) => {} // a GPU other than compute capability 9.0
    ///     Err(e) => return Err(e),
    /// }
    /// // f64 fuses on stage 8 (any device), k not split.
    /// let f64_plan = Gemm::new().epilogue(&e).plan_for::<f64, f64>(4096, 1024, 4096)?;
    /// assert!(f64_plan.why.contains("_fused") && f64_plan.split_k == 1);
    /// # Ok::<(), gemm::Error>(())
    /// ```
    ///
    /// # Errors
    /// The errors a call gives before it opens the device:
    /// [`Error::Unsupported`] for a product that does not fuse (i8,
    /// emulation, an option of stages 1-8 set, block scales on other than
    /// FP8 operands, the host path's options of [`Fused::run_device`]), and
    /// for the mixed-precision types on a device of compute capability other
    /// than 9.0 (they fuse on stage 9 only); [`Error::Epilogue`]
    /// for a bias of a type other than f32 and C's, or A's block scales of
    /// other than 1 or 128 rows; the builder's option errors, as
    /// [`Gemm::plan_for`].
    pub fn plan_for<T: Product<C>, C: Scalar>(&self, m: usize, n: usize, k: usize) -> Result<ProductPlan, Error> {
        let gemm = self.gemm;
        let device = gemm.plan_device();
        let kernels = match &device {
            Some(d) => gemm.kernels::<T, C>(false, Some(d))?,
            // Without a device, as on compute capability 9.0: f32 on TF32
            // where the options allow it (as `Gemm::plan_for`).
            None if T::TYPES == Types::F32 && gemm.emulation.is_none() && gemm.tf32_by_options() => {
                Kernels::TensorCores(WgmmaTypes::Tf32, gemm.mixed_options(WgmmaTypes::Tf32)?)
            }
            None => gemm.kernels::<T, C>(false, None)?,
        };
        if let Kernels::Ladder(precision) = kernels {
            self.ladder_checked(precision)?;
            gemm.check_device_call()?;
            return self.plan_ladder::<C>(precision, (m, n, k), device.as_deref());
        }
        let types = self.types_of::<T, C>(kernels)?;
        gemm.check_device_call()?;
        self.plan_as::<C>(types, (m, n, k), device.as_deref())
    }

    /// [`Fused::plan_for`] on the f64/f32 ladder (`device`: None as
    /// [`Fused::ladder_launch`] says).
    fn plan_ladder<C: Scalar>(
        &self,
        precision: Precision,
        (m, n, k): (usize, usize, usize),
        device: Option<&Device>,
    ) -> Result<ProductPlan, Error> {
        let (gemm, e) = (self.gemm, self.epilogue);
        let parts = e.parts::<C>(gemm.desc.alpha)?;
        let dims = gemm.planned_dims((m, n, k));
        let (plan, kd, _) = Self::ladder_launch(precision, device, &dims, e.alpha(gemm.desc.alpha));
        let kernel = crate::device::registry::entry_point(precision, plan.config)?
            .fused_name
            .expect("the ladder fuses on the stages with fused entry points");
        let mut why = if parts.is_empty() {
            "no epilogue inputs (alpha op(A) op(B) + beta C)".to_string()
        } else {
            parts.join(", ")
        };
        let operands = if plan.pack { "the operands packed first" } else { "the operands read in place" };
        why.push_str(&format!(
            " fused in the kernel's epilogue ({kernel}: each thread applies it to its sums before storing them), one \
             launch, k not split, {operands}"
        ));
        if matches!(plan.source, PlanSource::Fallback) {
            why.push_str(
                "; the fused tile nearest in size to the fastest measured at the nearest shape (which has no fused \
                 kernel)",
            );
        }
        let name = precision.name();
        Ok(ProductPlan {
            product: format!("{name} x {name} -> {name}"),
            family: KernelFamily::Ladder(plan),
            split_k: 1,
            route: String::new(),
            copies: crate::api::gemm::ladder_copies(&plan, &kd, precision),
            why,
            device: device.map_or_else(|| ASSUMED.2.to_string(), |d| d.name().to_string()),
            devices: None,
        })
    }

    /// [`Fused::plan_for`] of the stage-9 `types` (checked by the caller)
    /// on `device` (None: as on compute capability 9.0, [`ASSUMED`]).
    fn plan_as<C: Scalar>(
        &self,
        types: WgmmaTypes,
        (m, n, k): (usize, usize, usize),
        device: Option<&Device>,
    ) -> Result<ProductPlan, Error> {
        let (gemm, e) = (self.gemm, self.epilogue);
        let (sm_count, cc, where_) = match device {
            Some(d) => (d.sm_count(), d.compute_capability(), d.name().to_string()),
            None => (ASSUMED.0, ASSUMED.1, ASSUMED.2.to_string()),
        };
        if cc != (9, 0) {
            return Err(unsupported(
                types,
                &format!(
                    "fused epilogues run on stage 9 (compute capability 9.0) only; {where_} has {}.{}",
                    cc.0, cc.1
                ),
            ));
        }
        let parts = e.parts::<C>(gemm.desc.alpha)?;
        // The launch a call would run (C row-major: the user's form is
        // the kernel form, unless the route runs the transposed product).
        let dims = gemm.planned_dims((m, n, k));
        let keep_a = e.keeps_a();
        let launch = warpgroup_fused_launch(types, &dims, e.alpha(gemm.desc.alpha), (sm_count, e.fuse()), keep_a);
        let applied = if e.block_scales.is_some() {
            "FP8 block scales on each 128 of k, the epilogue on the f32 sums before C is stored"
        } else {
            "the epilogue on the f32 sums before C is stored"
        };
        let (route, copies, layouts) = describe_warpgroup(types, &launch, Some(applied));
        let family = launch.kernel;
        let flavour = family.flavour(true, e.block_scales.is_some());
        let kernel = family
            .entry(layouts, flavour)
            .expect("the planner picks a family with fused kernels for the layouts the operands are brought to");
        let mut why = if parts.is_empty() {
            "no epilogue inputs (alpha op(A) op(B) + beta C)".to_string()
        } else {
            parts.join(", ")
        };
        let (slices, k_tiles) = launch.split;
        if slices > 1 {
            why.push_str(&format!(
                " fused in the kernel, k in {slices} slices of {k_tiles} k-tiles (each applies the scales to its own \
                 k-tiles' sum; the reduction sums the slices and applies alpha and beta): the block tiles alone would \
                 leave most SMs idle"
            ));
        } else if e.fuse() == Fuse::Splittable {
            why.push_str(" fused in the kernel's epilogue, one launch, k not split (enough block tiles)");
        } else {
            why.push_str(
                " fused in the kernel's epilogue, one launch, k not split (a split's sum would have to apply it)",
            );
        }
        if keep_a {
            why.push_str(
                "; A's 1 x 128 block scales keep the user's A as the kernel's A: a column-major C is stored transposed \
                 by the threads, not run as the transposed product",
            );
        } else if launch.swapped && (e.row_scales.is_some() || e.col_scales.is_some() || e.bias.is_some()) {
            why.push_str(
                "; in the transposed product C's rows are the kernel's columns: row and column inputs trade places",
            );
        }
        why.push_str(&format!(
            "; the tile with the least estimated time on {sm_count} SMs among the families with fused kernels \
             (whole waves of block tiles, bytes at HBM's rate)"
        ));
        Ok(ProductPlan {
            product: product_name(types),
            family: KernelFamily::Warpgroup { kernel, tile: family.tile },
            split_k: slices,
            route,
            copies,
            why,
            device: where_,
            devices: None,
        })
    }

    /// The stage-9 types of a fused `T x T -> C` product, its options
    /// checked (`device`: the operands' device where known).
    pub(crate) fn types<T: Product<C>, C: Scalar>(&self, device: Option<&Arc<Device>>) -> Result<WgmmaTypes, Error> {
        self.types_of::<T, C>(self.gemm.kernels::<T, C>(false, device)?)
    }

    /// [`Fused::types`] of a call on `kernels` (the builder's answer for
    /// `T x T -> C`).
    fn types_of<T: Product<C>, C: Scalar>(&self, kernels: Kernels) -> Result<WgmmaTypes, Error> {
        let Kernels::TensorCores(types, false) = kernels else {
            return Err(Error::Unsupported {
                product: format!("{} x {} -> {}", T::NAME, T::NAME, C::NAME),
                why:
                    "fused epilogues run on the f64/f32 ladder's stages 7-8 and on stage 9's tensor-core kernels (f16, \
                      bf16, FP8 operands, f32 with .allow_tf32(true)); not on emulation, nor with \
                      .stage(Stage::TensorCore)"
                        .into(),
            });
        };
        if types == WgmmaTypes::S8 {
            return Err(unsupported(types, "an integer C takes no fused epilogue"));
        }
        if self.epilogue.block_scales.is_some() && !types.fp8() {
            return Err(unsupported(types, "block scales apply to FP8 operands only"));
        }
        if let Some(option) = self.gemm.tuning_option_set() {
            return Err(unsupported(types, &format!("{option} does not apply to a fused product")));
        }
        Ok(types)
    }
}

impl Gemm {
    /// A grouped batch ([`Gemm::run_grouped_device`]) with one fused
    /// epilogue per problem (`epilogues[i]` for problem i), in one launch of
    /// stage 9: the mixture-of-experts layer with each expert's block
    /// scales, bias or activation. Enqueued, as `run_grouped_device`.
    ///
    /// The contiguous layout (each expert's rows consecutive in one A and
    /// one C, its row count `m_e`): A's rows `r_e .. r_e + m_e` as problem
    /// e's A (`DeviceView::view`), its block scales those rows' (with
    /// DeepGEMM's column-major A scales of ld `m_total`: the view of the
    /// scales from element `r_e`, `BlockScales::a_strides(1, m_total)`).
    /// Per-tensor scales must be the same for every problem (they multiply
    /// the launch's one alpha): per-expert factors go in row or column
    /// scales.
    ///
    /// # Errors
    /// As [`Gemm::run_grouped_device`] and [`Fused::run_device`];
    /// [`Error::Epilogue`] when `epilogues` is not one per problem or the
    /// per-tensor scales differ.
    pub fn run_grouped_fused_device<T: Product<C>, C: Scalar>(
        &self,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        c: &mut [DeviceViewMut<'_, C>],
        epilogues: &[Epilogue<'_>],
    ) -> Result<(), Error> {
        if epilogues.is_empty() {
            return self.run_grouped_device(a, b, c);
        }
        self.run_list_fused(a, b, c, epilogues, None, None)
    }

    /// The masked layout of a mixture-of-experts layer (DeepGEMM's): a slot
    /// of rows per expert, of which only the first `rows[e]` hold tokens,
    /// a count known on the device only (written by the routing kernel
    /// before; no copy to the host, so the call can be captured in a CUDA
    /// graph). Problem e is `c[e] <- alpha op(a[e]) op(b[e]) + beta c[e]`
    /// (with `epilogues[e]` fused, as [`Gemm::run_grouped_fused_device`]),
    /// over the first `min(rows[e], m_e)` rows of its m_e (the slot's)
    /// only: C's rows from there on are neither read nor written (A's
    /// rows past the count up to the end of its block tile may be read:
    /// they lie in the slot). Two launches on the stream: a one-warp
    /// kernel that reads the counts and writes the launch's table (each
    /// expert's rows and first block tile; C's tensor map clipped at the
    /// count), then the grouped launch of stage 9 (compute capability
    /// 9.0) over the counted block tiles only. Enqueued, as
    /// [`Gemm::run_grouped_device`]; `rows` must not change until the
    /// work queued on the stream has run.
    ///
    /// `epilogues`: one per problem, or none (the plain product). A slot of
    /// a strided `[experts, m, k]` A is the view from element `e m k`
    /// ([`DeviceView::view`]); its A block scales (1 x 128, DeepGEMM's
    /// column-major `[experts, k / 128, m]`) the view from `e m (k / 128)`
    /// with `BlockScales::a_strides(1, m)`.
    ///
    /// ```no_run
    /// use gemm::{DeviceMatrix, DeviceView, DeviceViewMut, Gemm};
    /// use gemm::half::bf16;
    /// # fn main() -> Result<(), gemm::Error> {
    /// let dev = gemm::default_device()?;
    /// let (experts, slot, n, k) = (8, 256, 1024, 512);
    /// // Written by the routing kernel: the tokens each expert's slot holds.
    /// let rows = dev.stream().clone_htod(&[3u32, 0, 256, 17, 100, 1, 255, 64])?;
    /// let zeros = |r, c| DeviceMatrix::<bf16>::zeros(&dev, r, c);
    /// let x: Vec<_> = (0..experts).map(|_| zeros(slot, k)).collect::<Result<_, _>>()?;
    /// let w: Vec<_> = (0..experts).map(|_| zeros(k, n)).collect::<Result<_, _>>()?;
    /// let mut y: Vec<_> = (0..experts).map(|_| zeros(slot, n)).collect::<Result<_, _>>()?;
    /// let a: Vec<DeviceView<bf16>> = x.iter().map(|m| m.as_view()).collect();
    /// let b: Vec<DeviceView<bf16>> = w.iter().map(|m| m.as_view()).collect();
    /// let mut c: Vec<DeviceViewMut<bf16>> = y.iter_mut().map(|m| m.as_view_mut()).collect();
    /// Gemm::new().run_masked_device(&a, &b, &mut c, &rows.as_view(), &[])?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Gemm::run_grouped_fused_device`] (also for `epilogues`);
    /// [`Error::RowCounts`] when `rows` holds fewer than one count per
    /// problem or lies in another device's context;
    /// [`Error::Unsupported`] off stage 9 or for types it does not run.
    pub fn run_masked_device<T: Product<C>, C: Scalar>(
        &self,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        c: &mut [DeviceViewMut<'_, C>],
        rows: &CudaView<'_, u32>,
        epilogues: &[Epilogue<'_>],
    ) -> Result<(), Error> {
        self.run_list_fused(a, b, c, epilogues, Some(rows), None)
    }

    /// [`Gemm::run_grouped_fused_device`] (`rows` None) and
    /// [`Gemm::run_masked_device`] (`rows`: at least one count per problem);
    /// no `epilogues` (masked and `pair` lists): each problem's empty one;
    /// `pair`: the kernels' types of FP8 operands of two formats (`a` and
    /// `b` then viewed as e4m3), whose problems are never run transposed
    /// (one kernel, one order of the formats; a column-major C is stored
    /// transposed by the threads).
    pub(crate) fn run_list_fused<T: Product<C>, C: Scalar>(
        &self,
        a: &[DeviceView<'_, T>],
        b: &[DeviceView<'_, T>],
        c: &mut [DeviceViewMut<'_, C>],
        epilogues: &[Epilogue<'_>],
        rows: Option<&CudaView<'_, u32>>,
        pair: Option<WgmmaTypes>,
    ) -> Result<(), Error> {
        if let Some(r) = rows.filter(|r| r.len() < c.len()) {
            return Err(Error::RowCounts { why: format!("{} counts for {} problems: one each", r.len(), c.len()) });
        }
        let plain: Vec<Epilogue<'_>>;
        let epilogues = if epilogues.is_empty() {
            plain = c.iter().map(|_| Epilogue::new()).collect();
            &plain[..]
        } else {
            epilogues
        };
        let Some(first) = epilogues.first() else { return Ok(()) };
        if epilogues.len() != c.len() {
            return Err(Error::Epilogue {
                what: "the epilogues",
                why: format!("{} epilogues for {} problems: one each", epilogues.len(), c.len()),
            });
        }
        if epilogues.iter().any(|e| (e.scale_a, e.scale_b) != (first.scale_a, first.scale_b)) {
            return Err(Error::Epilogue {
                what: "the per-tensor scales",
                why: "they differ between problems; a grouped launch has one alpha (use row or column scales)".into(),
            });
        }
        let block_scaled = epilogues.iter().find(|e| e.block_scales.is_some()).unwrap_or(first);
        let types = Fused { gemm: self, epilogue: block_scaled }.types::<T, C>(c.first().map(|c| c.device))?;
        let types = pair.unwrap_or(types);
        self.check_device_call()?;
        let changes_c = epilogues.iter().any(Epilogue::changes_c);
        let Some((device, todo)) = self.desc.list_problems(a, b, c, self.target(), |_, _| Ok(()), !changes_c)? else {
            return Ok(());
        };
        if Gemm::mixed_stage(types, &device, false)? != TensorCoreStage::Warpgroup {
            let what = if rows.is_some() { "the masked layout runs" } else { "fused epilogues run" };
            return Err(unsupported(types, &format!("{what} on stage 9 (compute capability 9.0) only")));
        }
        if let Some(r) = rows {
            if **r.stream().context() != **device.context() {
                return Err(Error::RowCounts { why: format!("their buffer is not in {}'s context", device.name()) });
            }
        }
        let stream = self.stream_on(&device)?;
        if todo.is_empty() {
            return Ok(());
        }
        let alpha = first.alpha(self.desc.alpha);
        // The masked layout keeps every problem's rows the kernel's rows
        // (the counts cut them): never the transposed product.
        let keep = |i: usize| rows.is_some() || pair.is_some() || epilogues[i].keeps_a();
        let forms: Vec<_> = todo.iter().map(|&(i, dims)| (i, dims, keep(i))).collect();
        let launches = warpgroup_fused_list(types, &forms, alpha, device.sm_count());
        let mut inputs = Inputs { device: &device, stream: &stream, owned: Vec::new(), guards: Vec::new() };
        let mut fusions = vec![Fusion::default(); c.len()];
        for (&(i, dims), (_, launch)) in todo.iter().zip(&launches) {
            fusions[i] = kernel_fusion::<C>(&epilogues[i], &dims, launch.swapped, &mut inputs)
                .map_err(|e| Error::Problem { index: i, source: Box::new(e) })?;
        }
        // Problem i's count: the i-th u32 of `rows`.
        let counts: Option<Vec<u64>> = rows.map(|r| {
            let (address, guard) = r.device_ptr(&stream);
            inputs.guards.push(guard);
            (0..c.len() as u64).map(|i| address + 4 * i).collect()
        });
        let av: Vec<&CudaView<'_, T>> = a.iter().map(|v| &v.data).collect();
        let bv: Vec<&CudaView<'_, T>> = b.iter().map(|v| &v.data).collect();
        let mut cv: Vec<&mut CudaViewMut<'_, C>> = c.iter_mut().map(|v| &mut v.data).collect();
        let scalars = (alpha, self.desc.beta);
        let views = (&av[..], &bv[..], &mut cv[..]);
        let done = enqueue_grouped(&launches, &device, &stream, scalars, views, (Some(&fusions), counts.as_deref()));
        drop(inputs);
        done
    }
}

fn unsupported(types: WgmmaTypes, why: &str) -> Error {
    Error::Unsupported { product: product_name(types), why: why.into() }
}

/// The device side of an epilogue's inputs while the launch is enqueued:
/// host values' copies (freed stream-ordered when dropped) and the device
/// views' use records.
struct Inputs<'a> {
    device: &'a Arc<Device>,
    stream: &'a Arc<CudaStream>,
    owned: Vec<Owned>,
    guards: Vec<SyncOnDrop<'a>>,
}

/// A host input's copy on the device, held (not read) until the launch is
/// enqueued.
#[allow(dead_code)]
enum Owned {
    F32(CudaSlice<f32>),
    F64(CudaSlice<f64>),
    F16(CudaSlice<half::f16>),
    Bf16(CudaSlice<half::bf16>),
}

impl<'a> Inputs<'a> {
    /// The device address of `values` (at least `needed` elements), copied
    /// there first when on the host.
    fn address<T: Scalar>(
        &mut self,
        what: &'static str,
        values: &'a Values<'a, T>,
        needed: usize,
        wrap: fn(CudaSlice<T>) -> Owned,
    ) -> Result<u64, Error> {
        if values.len() < needed {
            return Err(Error::Epilogue { what, why: format!("{} values, the product needs {needed}", values.len()) });
        }
        match values {
            Values::Host(s) => {
                let copy = clone_htod(self.stream, &s[..needed])?;
                let (address, _) = copy.device_ptr(self.stream);
                self.owned.push(wrap(copy));
                Ok(address)
            }
            Values::Device(v) => {
                if **v.stream().context() != **self.device.context() {
                    return Err(Error::Epilogue {
                        what,
                        why: format!("its buffer is not in {}'s context", self.device.name()),
                    });
                }
                let (address, guard) = v.device_ptr(self.stream);
                self.guards.push(guard);
                Ok(address)
            }
        }
    }
}

/// The kernel's [`Fusion`] of `e` for the product `dims` (user form) run
/// with A and B swapped or not (`swapped`: the kernel's rows are the
/// user's columns), its inputs on the device.
fn kernel_fusion<'a, C: Scalar>(
    e: &'a Epilogue<'a>,
    dims: &GemmDims,
    swapped: bool,
    inputs: &mut Inputs<'a>,
) -> Result<Fusion, Error> {
    let (m, n, k) = (dims.m, dims.n, dims.k);
    let mut f = Fusion::default();
    let rows = match &e.row_scales {
        Some(v) => inputs.address("the row scales", v, m, Owned::F32)?,
        None => 0,
    };
    let cols = match &e.col_scales {
        Some(v) => inputs.address("the column scales", v, n, Owned::F32)?,
        None => 0,
    };
    (f.row_scales, f.col_scales) = if swapped { (cols, rows) } else { (rows, cols) };
    if let Some((along, bias)) = &e.bias {
        let needed = if *along == Along::Rows { m } else { n };
        let c_type = bias.type_for::<C>()? != "f32";
        let address = match bias {
            Bias::F32(v) => inputs.address("the bias", v, needed, Owned::F32)?,
            Bias::F64(v) => inputs.address("the bias", v, needed, Owned::F64)?,
            Bias::F16(v) => inputs.address("the bias", v, needed, Owned::F16)?,
            Bias::Bf16(v) => inputs.address("the bias", v, needed, Owned::Bf16)?,
        };
        f.bias = address;
        f.bias_type = if c_type { BIAS_C_TYPE } else { BIAS_F32 };
        f.bias_along = if (*along == Along::Rows) != swapped { BIAS_ROWS } else { BIAS_COLUMNS };
    }
    f.activation = match e.activation {
        Activation::None => ACT_NONE,
        Activation::Relu => ACT_RELU,
        Activation::Gelu => ACT_GELU,
    };
    if let Some(s) = &e.block_scales {
        let block = BLOCK_SCALE_K as usize;
        s.checked_a_rows()?;
        let (a_blocks, b_blocks, k_blocks) = (m.div_ceil(s.a_rows), n.div_ceil(block), k.div_ceil(block).max(1));
        let a_strides = s.a_strides.unwrap_or((1, a_blocks));
        let b_strides = s.b_strides.unwrap_or((k_blocks, 1));
        let extent = |(blocks, kb): (usize, usize), (s0, s1): (usize, usize)| (blocks - 1) * s0 + (kb - 1) * s1 + 1;
        let a_len = if m == 0 { 0 } else { extent((a_blocks, k_blocks), a_strides) };
        let b_len = if n == 0 { 0 } else { extent((b_blocks, k_blocks), b_strides) };
        let a = inputs.address("A's block scales", &s.a, a_len, Owned::F32)?;
        let b = inputs.address("B's block scales", &s.b, b_len, Owned::F32)?;
        let stride = |x: usize| {
            u32::try_from(x).map_err(|_| Error::Epilogue {
                what: "the block scales",
                why: format!("a stride of {x} elements: at most 2^32 - 1"),
            })
        };
        if swapped {
            // The kernel's A is the user's B: its scales cover 128 kernel
            // rows; the kernel's B is the user's A, whose row blocks are
            // 128 rows (`keep_a` keeps 1-row blocks unswapped).
            debug_assert_eq!(s.a_rows, block);
            (f.a_scales, f.a_scales_mn, f.a_scales_k, f.a_scales_rows) =
                (b, stride(b_strides.0)?, stride(b_strides.1)?, BLOCK_SCALE_K);
            (f.b_scales, f.b_scales_mn, f.b_scales_k) = (a, stride(a_strides.0)?, stride(a_strides.1)?);
        } else {
            (f.a_scales, f.a_scales_mn, f.a_scales_k, f.a_scales_rows) =
                (a, stride(a_strides.0)?, stride(a_strides.1)?, s.a_rows as u32);
            (f.b_scales, f.b_scales_mn, f.b_scales_k) = (b, stride(b_strides.0)?, stride(b_strides.1)?);
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::registry::Flavour;
    use crate::exec::warpgroup::read_in_layout;
    use crate::tuning::Stage;
    use crate::Op;
    use float8::F8E4M3;
    use gemm_core::{KernelLayouts, Layout};
    use half::bf16;

    /// Whether the plans below are stage 9's: no device (planned as on
    /// compute capability 9.0), or a device of 9.0; other devices do not
    /// fuse.
    fn fuses_here() -> bool {
        crate::default_device().map_or(true, |d| d.compute_capability() == (9, 0))
    }

    /// The SMs a plan is made for (the default device's, else the
    /// assumed 132).
    fn sm_count() -> u32 {
        crate::default_device().map_or(ASSUMED.0, |d| d.sm_count())
    }

    fn kernel_of(plan: &ProductPlan) -> &'static str {
        match plan.family {
            KernelFamily::Warpgroup { kernel, .. } => kernel,
            _ => panic!("a fused plan is stage 9's: {plan}"),
        }
    }

    /// bf16 -> bf16 with a bias and GELU: the family's fused kernel, one
    /// launch, the epilogue stated.
    #[test]
    fn bias_gelu_plans_a_fused_kernel() {
        let bias = vec![0.5f32; 1024];
        let e = Epilogue::new().bias(Along::Columns, &bias).activation(Activation::Gelu);
        let plan = Gemm::new().epilogue(&e).plan_for::<bf16, bf16>(4096, 1024, 4096);
        if !fuses_here() {
            assert!(matches!(plan, Err(Error::Unsupported { .. })), "{plan:?}");
            return;
        }
        let plan = plan.unwrap();
        let text = plan.to_string();
        assert!(kernel_of(&plan).ends_with("_fused"), "{text}");
        assert!(kernel_of(&plan).starts_with("wgmma_bf16_b"), "{text}");
        assert_eq!(plan.split_k, 1, "{text}");
        assert_eq!(plan.product, "bf16 x bf16 -> bf16");
        assert!(plan.why.contains("a bias along columns (n values, f32)"), "{text}");
        assert!(plan.why.contains("GELU"), "{text}");
        assert!(plan.why.contains("fused in the kernel's epilogue, one launch, k not split"), "{text}");
        assert!(plan.route.contains("the epilogue on the f32 sums"), "{text}");
        assert!(text.starts_with("bf16 x bf16 -> bf16: stage 9") && text.contains("; on "), "{text}");
        // bf16 reads both row-major operands in place (wgmma transposes B).
        assert!(plan.copies.is_empty(), "{text}");
        assert!(kernel_of(&plan).ends_with("_nn_fused"), "{text}");
        // A bf16 bias, rows; ReLU; scales.
        let rows = vec![bf16::ONE; 4096];
        let e = Epilogue::new()
            .scale_a(0.5)
            .scale_b(4.0)
            .row_scales(&bias)
            .col_scales(&bias)
            .bias(Along::Rows, Bias::bf16(&rows))
            .activation(Activation::Relu);
        let plan = Gemm::new().alpha(2.0).epilogue(&e).plan_for::<bf16, bf16>(4096, 1024, 4096).unwrap();
        for part in [
            "per-tensor scales sA = 0.5, sB = 4 (in alpha: 4)",
            "row scales of op(A)",
            "column scales of op(B)",
            "a bias along rows (m values, bf16)",
            "ReLU",
        ] {
            assert!(plan.why.contains(part), "{part}: {plan}");
        }
        // Nothing fused: still the fused kernel (the call passes its
        // empty epilogue).
        let plan = Gemm::new().epilogue(&Epilogue::new()).plan_for::<bf16, f32>(4096, 4096, 4096).unwrap();
        assert!(kernel_of(&plan).ends_with("_fused") && plan.why.starts_with("no epilogue inputs"), "{plan}");
    }

    /// e4m3 -> bf16 with DeepGEMM's block scales (1 x 128 A blocks): the
    /// fused kernel, B copied K-major (row-major B: wgmma reads FP8 only
    /// K-major), A kept as the kernel's A.
    #[test]
    fn block_scaled_fp8_plans_a_fused_kernel() {
        let none: Vec<f32> = Vec::new();
        let e = Epilogue::new().block_scales(BlockScales::new(&none, &none));
        let plan = Gemm::new().epilogue(&e).plan_for::<F8E4M3, bf16>(4096, 7168, 2048);
        if !fuses_here() {
            assert!(matches!(plan, Err(Error::Unsupported { .. })), "{plan:?}");
            return;
        }
        let plan = plan.unwrap();
        let kernel = kernel_of(&plan);
        assert!(kernel.starts_with("wgmma_e4m3_bf16_b") && kernel.ends_with("_nt_fused"), "{plan}");
        assert_eq!(plan.product, "e4m3 x e4m3 -> bf16");
        assert_eq!(plan.split_k, 1);
        assert!(plan.why.contains("FP8 block scales (A in 1 x 128 blocks, B in 128 x 128"), "{plan}");
        assert!(plan.why.contains("a column-major C is stored transposed by the threads"), "{plan}");
        assert!(plan.route.contains("FP8 block scales on each 128 of k"), "{plan}");
        assert!(plan.copies.iter().any(|c| c.starts_with("B transposed to K-major")), "{plan}");
        // B^T of a row-major B is K-major: no copy.
        let nt = Gemm::new().op_b(Op::T).epilogue(&e).plan_for::<F8E4M3, bf16>(4096, 7168, 2048).unwrap();
        assert!(nt.copies.is_empty() && kernel_of(&nt).ends_with("_nt_fused"), "{nt}");
        // Without block scales (a bias and GELU): the kernels without the
        // block scales' staging, on the same tile.
        let g = Epilogue::new().bias(Along::Columns, &none).activation(Activation::Gelu);
        let p = Gemm::new().op_b(Op::T).epilogue(&g).plan_for::<F8E4M3, bf16>(4096, 7168, 2048).unwrap();
        assert!(kernel_of(&p).ends_with("_nt_epilogue"), "{p}");
        assert_eq!(kernel_of(&p).trim_end_matches("_epilogue"), kernel_of(&nt).trim_end_matches("_fused"), "{p}");
        // The staging 128 x 128 tile too (the GPU test's shape).
        let p = Gemm::new().epilogue(&g).plan_for::<F8E4M3, bf16>(1000, 1900, 700).unwrap();
        assert!(kernel_of(&p).contains("_b128x128_d5_") && kernel_of(&p).ends_with("_epilogue"), "{p}");
        // And 128 x 256.
        let p = Gemm::new().epilogue(&g).plan_for::<F8E4M3, bf16>(1100, 3000, 300).unwrap();
        assert!(kernel_of(&p).contains("_b128x256_d4_") && kernel_of(&p).ends_with("_epilogue"), "{p}");
        // 128 x 128 A blocks: A may trade places, and the plan says so.
        let e128 = Epilogue::new().block_scales(BlockScales::new(&none, &none).a_rows(128));
        let p = Gemm::new().epilogue(&e128).plan_for::<F8E4M3, f32>(4096, 4096, 4096).unwrap();
        assert!(p.why.contains("A in 128 x 128 blocks") && !p.why.contains("stored transposed"), "{p}");
    }

    /// What a call refuses before it opens the device, the plan refuses
    /// with the same typed error.
    /// f64 and f32 (without TF32) fuse on the ladder's top stages, on any
    /// device: stage 8's `dgemm_mma_*_fused`, stage 7's
    /// `sgemm_pipelined_*_fused`, k not split.
    #[test]
    fn f64_and_f32_plan_a_fused_ladder_kernel() {
        let bias = vec![0.5f64; 1000];
        let e = Epilogue::new().bias(Along::Rows, Bias::f64(&bias)).activation(Activation::Gelu);
        for (m, n, k) in [(1000, 1000, 1000), (3, 5, 7), (4096, 4096, 64)] {
            let plan = Gemm::new().epilogue(&e).plan_for::<f64, f64>(m, n, k).unwrap();
            assert!(plan.why.contains("dgemm_mma_") && plan.why.contains("_fused"), "{plan}");
            assert!(plan.why.contains("GELU") && plan.why.contains("f64"), "{plan}");
            assert_eq!(plan.split_k, 1, "{plan}");
            let KernelFamily::Ladder(p) = &plan.family else { panic!("{plan}") };
            assert_eq!(p.config.stage(), CoreStage::TensorCore, "{plan}");
            let f32_bias = vec![0.5f32; 1000];
            let e32 = Epilogue::new().bias(Along::Columns, &f32_bias).activation(Activation::Relu);
            let plan = Gemm::new().epilogue(&e32).plan_for::<f32, f32>(m, n, k).unwrap();
            assert!(plan.why.contains("sgemm_pipelined_") && plan.why.contains("_fused"), "{plan}");
            let KernelFamily::Ladder(p) = &plan.family else { panic!("{plan}") };
            assert!(p.config.stage() == CoreStage::Pipelined && p.split_k == 1 && p.tail.is_none(), "{plan}");
        }
        // Large f32 products take the plain product's measured tile (128 x
        // 128 x 32), which has a fused twin, and its packed operands.
        let e32 = Epilogue::new().activation(Activation::Gelu);
        let plan = Gemm::new().epilogue(&e32).plan_for::<f32, f32>(4096, 4096, 4096).unwrap();
        assert!(plan.why.contains("sgemm_pipelined_b128x128x32_") && plan.why.contains("_fused"), "{plan}");
        assert!(plan.why.contains("packed first"), "{plan}");
        // Row-major A and B: A's lines run along k, B's along n.
        assert_eq!(plan.copies, ["A packed (its lines along m)"], "{plan}");
        let KernelFamily::Ladder(p) = &plan.family else { panic!("{plan}") };
        assert!(p.pack, "{plan}");
        let plan = Gemm::new().op_b(Op::T).epilogue(&e32).plan_for::<f32, f32>(4096, 4096, 4096).unwrap();
        assert_eq!(plan.copies, ["A packed (its lines along m)", "B packed (its lines along n)"], "{plan}");
        // alpha = 0 reads neither operand: nothing to pack.
        let plan = Gemm::new().alpha(0.0).epilogue(&e32).plan_for::<f32, f32>(4096, 4096, 4096).unwrap();
        assert!(plan.copies.is_empty() && plan.why.contains("read in place"), "{plan}");
        // An f64 bias for an f32 C is the wrong type.
        let wrong = Epilogue::new().bias(Along::Rows, Bias::f64(&bias));
        let err = Gemm::new().epilogue(&wrong).plan_for::<f32, f32>(64, 64, 64).unwrap_err();
        assert!(matches!(err, Error::Epilogue { what: "the bias", .. }), "{err}");
    }

    #[test]
    fn products_that_do_not_fuse_are_errors() {
        let e = Epilogue::new().activation(Activation::Relu);
        let g = Gemm::new();
        let unsupported = |r: Result<ProductPlan, Error>| matches!(r, Err(Error::Unsupported { .. }));
        assert!(unsupported(g.epilogue(&e).plan_for::<i8, i32>(64, 64, 64)));
        // The f64/f32 ladder fuses, without its tuning options, block
        // scales or emulation.
        let staged = Gemm::new().stage(Stage::TensorCore);
        assert!(unsupported(staged.epilogue(&e).plan_for::<f64, f64>(64, 64, 64)));
        let tuned = Gemm::new().block_tile(128, 128, 16);
        let none: Vec<f32> = Vec::new();
        let scaled = Epilogue::new().block_scales(BlockScales::new(&none, &none));
        assert!(unsupported(g.epilogue(&scaled).plan_for::<f32, f32>(64, 64, 64)));
        let emulated = Gemm::new().emulation(crate::emulation::Emulation::new(14).unwrap());
        assert!(unsupported(emulated.epilogue(&e).plan_for::<f64, f64>(64, 64, 64)));
        assert!(unsupported(tuned.epilogue(&e).plan_for::<bf16, bf16>(64, 64, 64)));
        let stage8 = Gemm::new().stage(Stage::TensorCore);
        assert!(unsupported(stage8.epilogue(&e).plan_for::<bf16, bf16>(64, 64, 64)));
        let host = Gemm::new().memory_budget(1 << 30);
        assert!(unsupported(host.epilogue(&e).plan_for::<bf16, bf16>(64, 64, 64)));
        assert!(unsupported(g.epilogue(&scaled).plan_for::<bf16, f32>(64, 64, 64)));
        // TF32 fuses.
        let tf32 = Gemm::new().allow_tf32(true);
        let plan = tf32.epilogue(&e).plan_for::<f32, f32>(4096, 4096, 4096);
        if !fuses_here() {
            assert!(unsupported(plan));
            return;
        }
        let plan = plan.unwrap();
        assert!(kernel_of(&plan).starts_with("wgmma_tf32_") && kernel_of(&plan).ends_with("_fused"), "{plan}");
        // The inputs' types: a bias of f32 or C's type; A blocks of 1 or
        // 128 rows.
        let halves = vec![half::f16::ONE; 64];
        let wrong = Epilogue::new().bias(Along::Columns, Bias::f16(&halves));
        let e = g.epilogue(&wrong).plan_for::<bf16, bf16>(64, 64, 64).unwrap_err();
        assert!(matches!(e, Error::Epilogue { what: "the bias", .. }), "{e}");
        let rows64 = Epilogue::new().block_scales(BlockScales::new(&none, &none).a_rows(64));
        let e = g.epilogue(&rows64).plan_for::<F8E4M3, bf16>(64, 64, 64).unwrap_err();
        assert!(matches!(e, Error::Epilogue { what: "the block scales", .. }), "{e}");
    }

    /// The plan's kernel is the fused entry point of the family
    /// `warpgroup_fused_launch` picks, for the layouts the launch reads
    /// (the operands' own, or K-major copies; `_nt` where A and B are not
    /// read).
    #[test]
    fn the_plan_names_the_launch_kernel() {
        if !fuses_here() {
            return;
        }
        let none: Vec<f32> = Vec::new();
        let bias = vec![0.0f32; 1];
        let plain = Epilogue::new().bias(Along::Rows, &bias).activation(Activation::Gelu);
        let per_row = Epilogue::new().block_scales(BlockScales::new(&none, &none));
        let per_block = Epilogue::new().block_scales(BlockScales::new(&none, &none).a_rows(128));
        let shapes = [(4096, 4096, 4096), (16, 8192, 4096), (8192, 32, 1024), (333, 129, 65), (1000, 1000, 0)];
        let ops = [(Op::N, Op::N), (Op::N, Op::T), (Op::T, Op::N), (Op::T, Op::T)];
        let (mut checked, mut splits) = (0, 0);
        for (op_a, op_b) in ops {
            for alpha in [1.0, 0.0] {
                let g = Gemm::new().op_a(op_a).op_b(op_b).alpha(alpha).allow_tf32(true);
                for (m, n, k) in shapes {
                    let dims = g.planned_dims((m, n, k));
                    let cases: [(WgmmaTypes, &Epilogue<'_>, Result<ProductPlan, Error>); 6] = [
                        (WgmmaTypes::Bf16, &plain, g.epilogue(&plain).plan_for::<bf16, bf16>(m, n, k)),
                        (WgmmaTypes::F16F32, &plain, g.epilogue(&plain).plan_for::<half::f16, f32>(m, n, k)),
                        (WgmmaTypes::Tf32, &plain, g.epilogue(&plain).plan_for::<f32, f32>(m, n, k)),
                        (WgmmaTypes::E4m3Bf16, &per_row, g.epilogue(&per_row).plan_for::<F8E4M3, bf16>(m, n, k)),
                        (WgmmaTypes::E4m3F32, &per_block, g.epilogue(&per_block).plan_for::<F8E4M3, f32>(m, n, k)),
                        (WgmmaTypes::E4m3Bf16, &plain, g.epilogue(&plain).plan_for::<F8E4M3, bf16>(m, n, k)),
                    ];
                    for (types, e, plan) in cases {
                        let plan = plan.unwrap();
                        let launch =
                            warpgroup_fused_launch(types, &dims, e.alpha(alpha), (sm_count(), e.fuse()), e.keeps_a());
                        let kd = launch.route.dims;
                        let family = launch.kernel;
                        // The layouts `ready_warpgroup` and `enqueue` give the kernel.
                        let layouts = if launch.reads_ab {
                            let a = if read_in_layout(types, family.tile, 0, kd.a_layout == Layout::RowMajor) {
                                kd.a_layout
                            } else {
                                Layout::RowMajor
                            };
                            let b = if read_in_layout(types, family.tile, 1, kd.b_layout == Layout::ColMajor) {
                                kd.b_layout
                            } else {
                                Layout::ColMajor
                            };
                            KernelLayouts { a, b }
                        } else {
                            KernelLayouts { a: Layout::RowMajor, b: Layout::ColMajor }
                        };
                        // FP8 without block scales: the `_epilogue` kernels
                        // where the family's fused ones stage them.
                        let flavour = family.flavour(true, e.block_scales.is_some());
                        if types.fp8() && e.block_scales.is_none() && family.tile.stages_scales() {
                            assert_eq!(flavour, Flavour::Epilogue);
                        } else {
                            assert_eq!(flavour, Flavour::Fused);
                        }
                        let expected =
                            family.entry(layouts.index(), flavour).expect("a fused kernel for the read layouts");
                        assert_eq!(kernel_of(&plan), expected, "{m}x{n}x{k} {op_a:?}{op_b:?} alpha {alpha}: {plan}");
                        assert!(family.fuses() && launch.tail.is_none());
                        // k split only without terms on the whole sums, by
                        // the fused family with an f32 C.
                        if launch.split.0 > 1 {
                            assert_eq!(e.fuse(), Fuse::Splittable, "{m}x{n}x{k}: {plan}");
                            assert_eq!(family.types, types.accumulating());
                            splits += 1;
                        } else {
                            assert_eq!(launch.split, (1, 0));
                        }
                        let KernelFamily::Warpgroup { tile, .. } = plan.family else { unreachable!() };
                        assert_eq!(tile, family.tile);
                        assert_eq!(plan.split_k, launch.split.0);
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 4 * 2 * shapes.len() * 6);
        // A block-scaled product of few block tiles and a long k splits it
        // (16 x 8192 x 4096 keeps A's place: one row of 128-row tiles).
        assert!(splits > 0);
    }

    /// Scales alone (block, row, column, per-tensor) let the planner split
    /// k where the block tiles leave most SMs idle (DeepGEMM's m = 64 and
    /// 128 shapes); a bias or an activation keeps k whole, as does a
    /// product with enough tiles.
    #[test]
    fn scales_alone_split_k_where_the_tiles_are_few() {
        if !fuses_here() {
            return;
        }
        let none: Vec<f32> = Vec::new();
        let bias = vec![0.0f32; 1];
        let block = Epilogue::new().block_scales(BlockScales::new(&none, &none));
        let scaled = Epilogue::new().scale_a(2.0).scale_b(0.5).block_scales(BlockScales::new(&none, &none));
        let with_bias = Epilogue::new().block_scales(BlockScales::new(&none, &none)).bias(Along::Columns, &bias);
        let channels = Epilogue::new().row_scales(&bias).col_scales(&bias);
        let gelu = Epilogue::new().row_scales(&bias).activation(Activation::Gelu);
        let g = Gemm::new();
        for (m, n, k) in [(64, 7168, 16384), (128, 2112, 7168), (64, 4096, 7168)] {
            for e in [&block, &scaled, &channels] {
                let plan = g.epilogue(e).plan_for::<F8E4M3, bf16>(m, n, k).unwrap();
                assert!(plan.split_k > 1, "{m}x{n}x{k}: {plan}");
                // The f32-C family's fused kernel: `_epilogue` without
                // block scales on a tile whose `_fused` one stages them.
                let kernel = kernel_of(&plan);
                let KernelFamily::Warpgroup { tile, .. } = plan.family else { unreachable!() };
                let flavour = if e.block_scales.is_none() && tile.stages_scales() { "_epilogue" } else { "_fused" };
                assert!(kernel.starts_with("wgmma_e4m3_f32_") && kernel.ends_with(flavour), "{plan}");
                assert!(plan.to_string().contains("slices"), "{plan}");
            }
            for e in [&with_bias, &gelu] {
                let plan = g.epilogue(e).plan_for::<F8E4M3, bf16>(m, n, k).unwrap();
                assert_eq!(plan.split_k, 1, "{m}x{n}x{k}: {plan}");
            }
        }
        let plan = g.epilogue(&block).plan_for::<F8E4M3, bf16>(4096, 7168, 16384).unwrap();
        assert_eq!(plan.split_k, 1, "{plan}");
    }
}
