//! One question, one answer for every type pair: [`Gemm::plan_for`] says
//! which kernel family, stage, kernel, tile, split of k, copies and route a
//! product of `T` operands into a `C` runs, and why.

use crate::device::registry::WARPGROUP_KERNELS;
use crate::device::{default_device, Device};
use crate::error::Error;
use crate::gemm::Gemm;
use crate::tuning_plan::Plan;
use crate::warpgroup::{mma_kernel, warpgroup_plan, Product};
use crate::Scalar;
use gemm_core::mma_sync::MmaTile;
use gemm_core::shape::{GemmDims, Layout};
use gemm_core::warpgroup::{WgmmaTile, WgmmaTypes, ROW_BYTES};
use gemm_core::{KernelLayouts, Op, Precision};
use std::fmt;

/// The kernels a product runs on.
#[derive(Clone, Debug)]
pub enum KernelFamily {
    /// The f64 and f32 ladder (stages 1-8 on the CUDA cores, f64 on the
    /// FP64 tensor cores), as [`Gemm::plan`] says.
    Ladder(Plan),
    /// Stage 9: Hopper's warpgroup MMA fed by TMA (compute capability 9.0).
    Warpgroup {
        /// The entry point for the layouts the kernel reads.
        kernel: &'static str,
        /// Block tile and pipeline depth.
        tile: WgmmaTile,
    },
    /// Stage 8's `mma.sync` kernels for the mixed-precision products
    /// (compute capability 8.x, or `.stage(Stage::TensorCore)`).
    MmaSync {
        /// The entry point.
        kernel: &'static str,
        /// Block tile and pipeline depth.
        tile: MmaTile,
    },
}

/// What [`Gemm::plan_for`] answers: the kernels a product of one type pair
/// runs with this builder's options, for operands stored row-major with the
/// builder's op flags (op = T reads that operand column-major) and a
/// row-major C of leading dimension n (a column-major C is the transposed
/// product: plan for (n, m, k) with the op flags exchanged).
#[derive(Clone, Debug)]
pub struct ProductPlan {
    /// The types, e.g. "bf16 x bf16 -> f32".
    pub product: String,
    /// The kernel family and its kernel.
    pub family: KernelFamily,
    /// Slices of k (1: not split; split products sum their slices in a
    /// fixed order, so the bits are the same every run).
    pub split_k: u32,
    /// How the kernel reads the operands and writes C.
    pub route: String,
    /// Copies made before the product (empty: operands read in place).
    pub copies: Vec<String>,
    /// Why this kernel.
    pub why: String,
    /// The device planned for: its name, or what was assumed without one.
    pub device: String,
}

impl ProductPlan {
    /// The stage's number (1-9) and name.
    pub fn stage(&self) -> String {
        match &self.family {
            KernelFamily::Ladder(p) => p.config.stage().to_string(),
            KernelFamily::Warpgroup { .. } => "stage 9 (warpgroup MMA)".to_string(),
            KernelFamily::MmaSync { .. } => "stage 8 (tensor cores, mma.sync)".to_string(),
        }
    }
}

impl fmt::Display for ProductPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.product)?;
        match &self.family {
            KernelFamily::Ladder(p) => write!(f, "{p}")?,
            KernelFamily::Warpgroup { kernel, tile } => write!(
                f,
                "{}, {kernel} (block {}x{}, pipeline depth {}), k {}",
                self.stage(),
                tile.bm,
                tile.bn,
                tile.depth,
                if self.split_k > 1 { format!("in {} slices", self.split_k) } else { "not split".into() }
            )?,
            KernelFamily::MmaSync { kernel, tile } => {
                write!(f, "{}, {kernel} (block {}x{}, pipeline depth {})", self.stage(), tile.bm, tile.bn, tile.depth)?
            }
        }
        if !self.route.is_empty() {
            write!(f, "; {}", self.route)?;
        }
        if !self.copies.is_empty() {
            write!(f, "; copies: {}", self.copies.join(", "))?;
        }
        if !self.why.is_empty() {
            write!(f, "; {}", self.why)?;
        }
        write!(f, "; on {}", self.device)
    }
}

/// The SMs and compute capability planned for without a device: an H100
/// SXM's (132 SMs, 9.0), the device the tables were measured on.
const ASSUMED: (u32, (i32, i32), &str) = (132, (9, 0), "no device: planned as for compute capability 9.0, 132 SMs");

impl Gemm {
    /// What a product of `T` operands into a `C` runs with this builder's
    /// options, and why, for every type pair of [`Product`]: the kernel
    /// family and stage, the kernel and its tile, the slices of k, the route
    /// (TMA, A through registers, the transposed product, TMA or per-thread
    /// stores of C), the copies made first, and the device it planned for
    /// (the builder's, else the default device, else an assumed compute
    /// capability 9.0 with 132 SMs, said so). Operands are taken row-major
    /// with the builder's op flags (op = T: that operand read
    /// column-major), leading dimensions packed, C row-major. f64 and f32
    /// (without TF32) give [`Gemm::plan`]'s answer.
    ///
    /// ```
    /// use gemm::half::bf16;
    /// let plan = gemm::Gemm::new().plan_for::<bf16, f32>(4096, 1024, 4096)?;
    /// println!("{plan}"); // "bf16 x bf16 -> f32: stage 9 (warpgroup MMA), wgmma_bf16_f32_b128x256_d4_nt ..."
    /// let tf32 = gemm::Gemm::new().allow_tf32(true).plan_for::<f32, f32>(4096, 4096, 4096)?;
    /// assert!(tf32.product.contains("TF32"));
    /// # Ok::<(), gemm::Error>(())
    /// ```
    ///
    /// # Errors
    /// The options' errors a call would give before it opens the device
    /// ([`Error::Unsupported`] for an option that does not apply to the
    /// type, [`Error::SplitK`], [`Error::Config`], ...).
    pub fn plan_for<T: Product<C>, C: Scalar>(&self, m: usize, n: usize, k: usize) -> Result<ProductPlan, Error> {
        T::plan(self, (m, n, k))
    }

    /// The device a plan is made for: the builder's, else the default one.
    fn plan_device(&self) -> Option<std::sync::Arc<Device>> {
        self.device_option().cloned().or_else(|| default_device().ok())
    }

    /// [`Gemm::plan_for`] for f32: on TF32 tensor cores when a call would
    /// run there (without a device: as on compute capability 9.0), else the
    /// f32 ladder.
    pub(crate) fn plan_f32(&self, dims: (usize, usize, usize)) -> Result<ProductPlan, Error> {
        // As a call: the host path's options with TF32 are an error.
        let tf32 = match self.plan_device() {
            Some(d) => self.uses_tf32(Some(&d))?,
            None => self.tf32_by_options(),
        };
        if tf32 {
            self.plan_mixed(WgmmaTypes::Tf32, dims)
        } else {
            self.plan_ladder(Precision::F32, dims)
        }
    }

    /// [`Gemm::plan_for`] for f64 and f32 on the ladder.
    pub(crate) fn plan_ladder(
        &self,
        precision: Precision,
        (m, n, k): (usize, usize, usize),
    ) -> Result<ProductPlan, Error> {
        let plan = self.plan(precision, m, n, k)?;
        let name = precision.name();
        let device = self.plan_device().map_or_else(|| ASSUMED.2.to_string(), |d| d.name().to_string());
        let copies =
            if plan.pack { vec!["A and B packed (their lines along m and n)".to_string()] } else { Vec::new() };
        Ok(ProductPlan {
            product: format!("{name} x {name} -> {name}"),
            split_k: plan.split_k,
            family: KernelFamily::Ladder(plan),
            route: String::new(),
            copies,
            why: String::new(),
            device,
        })
    }

    /// [`Gemm::plan_for`] for the mixed-precision products (f16, bf16, TF32, i8).
    pub(crate) fn plan_mixed(&self, types: WgmmaTypes, (m, n, k): (usize, usize, usize)) -> Result<ProductPlan, Error> {
        let mma_sync = self.mixed_options(types)?;
        let device = self.plan_device();
        let (sm_count, cc, where_) = match &device {
            Some(d) => (d.sm_count(), d.compute_capability(), d.name().to_string()),
            None => (ASSUMED.0, ASSUMED.1, ASSUMED.2.to_string()),
        };
        if cc < (8, 0) {
            return Err(Error::Unsupported {
                product: crate::warpgroup::product_name(types),
                why: format!("its kernels need compute capability 8.0 or newer; {where_} has {}.{}", cc.0, cc.1),
            });
        }
        let of = |op: Op| if op == Op::N { Layout::RowMajor } else { Layout::ColMajor };
        let (a_layout, b_layout) = (of(self.op_a), of(self.op_b));
        let reads_ab = self.alpha != 0.0 && k > 0;
        let product = crate::warpgroup::product_name(types);
        let mut copies = Vec::new();
        if cc != (9, 0) || mma_sync {
            let max_smem = device.as_ref().map_or(232_448, |d| d.limits().max_smem_per_block);
            let kernel = mma_kernel(types, m, n, sm_count, max_smem);
            // Stage 8 reads f16/bf16 in any layout (ldmatrix .trans); tf32
            // and i8 only K-major: others are transposed first.
            if !types.transposes() && reads_ab {
                if a_layout == Layout::ColMajor {
                    copies.push("A transposed to K-major".to_string());
                }
                if b_layout == Layout::RowMajor {
                    copies.push("B transposed to K-major".to_string());
                }
            }
            let why = if mma_sync {
                ".stage(Stage::TensorCore) asks for stage 8".to_string()
            } else {
                format!("compute capability {}.{}: stage 9 needs 9.0", cc.0, cc.1)
            };
            return Ok(ProductPlan {
                product,
                family: KernelFamily::MmaSync { kernel: kernel.name, tile: kernel.tile },
                split_k: 1,
                route: "cp.async into swizzled shared memory, ldmatrix".to_string(),
                copies,
                why: format!("{why}; the deepest pipeline that fits, the 128 x 256 tile where it fills the SMs"),
                device: where_,
            });
        }
        let kd = GemmDims {
            m,
            n,
            k,
            lda: if a_layout == Layout::RowMajor { k } else { m },
            ldb: if b_layout == Layout::RowMajor { n } else { k },
            ldc: n,
            a_layout,
            b_layout,
            c_layout: Layout::RowMajor,
        };
        let route = crate::warpgroup::warpgroup_route(types, &kd, reads_ab);
        let kd = route.dims;
        let plan = warpgroup_plan(types, kd.m, kd.n, if reads_ab { kd.k } else { 0 }, 1, sm_count);
        let (slices, _) = plan.split;
        let family = if slices > 1 {
            WARPGROUP_KERNELS
                .iter()
                .find(|f| f.types == types.accumulating() && f.tile == plan.kernel.tile)
                .expect("every tile has an f32 (i32) C family")
        } else {
            plan.kernel
        };
        let mut parts = Vec::new();
        if route.transposed_c {
            parts
                .push("the transposed product C^T = B^T A^T (wgmma reads B only K-major in TF32), C stored transposed");
        }
        let (a_k_major, b_k_major) = (kd.a_layout == Layout::RowMajor, kd.b_layout == Layout::ColMajor);
        let (mut read_a, mut read_b) = (kd.a_layout, kd.b_layout);
        if reads_ab {
            let elem = types.input_bytes() as usize;
            let realign = crate::warpgroup::realign_wanted(types, &kd, family.tile);
            for (i, (name, k_major, ld)) in [("A", a_k_major, kd.lda), ("B", b_k_major, kd.ldb)].into_iter().enumerate()
            {
                let in_place = k_major || (i == 0 && types.register_a());
                if !in_place && !types.transposes() {
                    copies.push(format!("{name} transposed to K-major (wgmma reads {} only K-major)", short(types)));
                    if i == 0 {
                        read_a = Layout::RowMajor;
                    } else {
                        read_b = Layout::ColMajor;
                    }
                } else if realign[i] && (ld * elem) % ROW_BYTES as usize != 0 {
                    copies.push(format!("{name} realigned to 128-byte lines (read by many block tiles)"));
                }
            }
            if types.register_a() && kd.a_layout == Layout::ColMajor {
                parts.push("A (MN-major) through registers");
            }
            parts.push("A and B by TMA into 128-byte-swizzled shared memory");
        }
        let c_bytes = types.output_bytes() as usize;
        if slices > 1 {
            parts.push("slices into an f32 (i32) workspace, summed in slice order");
        } else if !route.transposed_c && (kd.n * c_bytes) % 16 == 0 {
            parts.push("C by TMA stores (lines on 16 bytes)");
        } else {
            parts.push("C by per-thread stores");
        }
        let kernel = family.names[KernelLayouts { a: read_a, b: read_b }.index()]
            .or(family.names[1])
            .expect("a kernel for the layouts the operands are brought to");
        let why = format!(
            "the tile with the least estimated time on {sm_count} SMs (whole waves of block tiles{}, bytes at HBM's rate)",
            if slices > 1 { ", k split where the tiles leave SMs idle" } else { "" }
        );
        Ok(ProductPlan {
            product,
            family: KernelFamily::Warpgroup { kernel, tile: family.tile },
            split_k: slices,
            route: parts.join(", "),
            copies,
            why,
            device: where_,
        })
    }
}

/// "TF32", "i8": the input type in words.
fn short(types: WgmmaTypes) -> &'static str {
    match types {
        WgmmaTypes::Tf32 => "TF32",
        WgmmaTypes::S8 => "i8",
        WgmmaTypes::F16 | WgmmaTypes::F16F32 => "f16",
        WgmmaTypes::Bf16 | WgmmaTypes::Bf16F32 => "bf16",
    }
}

#[cfg(test)]
mod tests {
    use crate::tuning::Stage;
    use crate::{Error, Gemm, Op};
    use half::{bf16, f16};

    /// Every type pair has a plan, with or without a device (then as on 9.0
    /// with 132 SMs), that names its kernel and says where it planned.
    #[test]
    fn every_type_pair_has_a_plan() {
        let plans = [
            Gemm::new().plan_for::<f64, f64>(4096, 4096, 4096).unwrap(),
            Gemm::new().plan_for::<f32, f32>(1000, 1000, 1000).unwrap(),
            Gemm::new().allow_tf32(true).plan_for::<f32, f32>(4096, 4096, 4096).unwrap(),
            Gemm::new().plan_for::<f16, f32>(4096, 4096, 4096).unwrap(),
            Gemm::new().plan_for::<f16, f16>(333, 129, 65).unwrap(),
            Gemm::new().plan_for::<bf16, f32>(4096, 1024, 4096).unwrap(),
            Gemm::new().plan_for::<bf16, bf16>(128, 128, 65536).unwrap(),
            Gemm::new().plan_for::<i8, i32>(64, 4096, 4096).unwrap(),
        ];
        for p in &plans {
            let text = p.to_string();
            assert!(text.starts_with(&p.product) && text.contains("; on "), "{text}");
            assert!(p.split_k >= 1);
        }
        assert!(plans[2].product.contains("TF32") && !plans[1].product.contains("TF32"));
        if crate::default_device().is_err() {
            // As on an H100: stage 9, the row-major B of TF32 through the transposed product.
            assert!(plans[2].to_string().contains("transposed product"), "{}", plans[2]);
            assert!(plans[3].stage().contains('9'), "{}", plans[3]);
            // i8 reads B only K-major: a row-major B is transposed first.
            assert!(plans[7].copies.iter().any(|c| c.starts_with("B transposed")), "{}", plans[7]);
            // A small C with a long k is split.
            assert!(plans[6].split_k > 1, "{}", plans[6]);
        }
        // op(B) = B^T of a row-major B is K-major: no copy for i8.
        let nt = Gemm::new().op_b(Op::T).plan_for::<i8, i32>(64, 4096, 4096).unwrap();
        assert!(nt.copies.is_empty(), "{nt}");
    }

    /// Options that cannot apply to a type are typed errors from the plan,
    /// as from the call, with no device.
    #[test]
    fn options_that_do_not_apply_are_errors() {
        let e = Gemm::new().block_tile(128, 128, 16).plan_for::<f16, f32>(64, 64, 64).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        let e = Gemm::new().alpha(0.5).plan_for::<i8, i32>(64, 64, 64).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        let p = Gemm::new().stage(Stage::TensorCore).plan_for::<bf16, bf16>(256, 256, 256).unwrap();
        assert!(p.stage().contains('8'), "{p}");
        let e = Gemm::new().split_k(0).plan_for::<f64, f64>(64, 64, 64).unwrap_err();
        assert!(matches!(e, Error::SplitK { .. }), "{e}");
        let e = Gemm::new().allow_tf32(true).plan_for::<f64, f64>(64, 64, 64).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        // The host path's options stream TF32 products too: the plan stays TF32's.
        let p = Gemm::new().allow_tf32(true).memory_budget(1 << 20).plan_for::<f32, f32>(64, 64, 64).unwrap();
        assert!(p.to_string().contains("tf32") || p.to_string().contains("TF32"), "{p}");
    }

    /// The same misuse in a call is its typed error whether or not a GPU is
    /// present (found before the device is opened), and C is untouched.
    #[test]
    fn misuse_is_found_before_the_device() {
        let a = crate::Matrix::<f64>::filled(8, 8, 1.0);
        let mut c = crate::Matrix::<f64>::filled(8, 8, 7.0);
        let e = Gemm::new().split_k(0).run(&a, &a, &mut c).unwrap_err();
        assert!(matches!(e, Error::SplitK { slices: 0, .. }), "{e}");
        let e = Gemm::new().allow_tf32(true).run(&a, &a, &mut c).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        assert!(c.as_slice().iter().all(|&v| v == 7.0));
    }
}
