//! The execution layer: running products that are already planned. Every
//! kernel family sits behind one dispatch ([`enqueue`] for one product or a
//! strided batch, [`enqueue_list`] for pointer-array and grouped batches),
//! fed a [`Launch`] from the plan: the f64/f32 ladder (stages 1-8,
//! [`ladder`] over [`launch`]'s kernel launches, split-K and packing),
//! stage 8's `mma.sync` kernels for the tensor-core types ([`mma_sync`]),
//! stage 9's warpgroup MMA ([`warpgroup`]), the token-sized kernels of
//! every type ([`skinny`]) and f64 and f32 emulated on INT8 tensor cores
//! ([`emulation`]). The host path ([`host_path`])
//! streams host matrices through the device on top of them. It imports the
//! device layer and the base only.

pub(crate) mod emulation;
pub(crate) mod host_path;
pub(crate) mod ladder;
pub(crate) mod launch;
pub(crate) mod mma_sync;
pub(crate) mod redistribute;
pub(crate) mod skinny;
pub(crate) mod summa;
pub(crate) mod tensor_core;
pub(crate) mod warpgroup;

use crate::device::Device;
use crate::element::{product_name, Recast, Scalar};
use crate::error::Error;
use crate::exec::launch::{ListViews, Operands};
pub(crate) use crate::exec::tensor_core::TensorCoreStage;
use cudarc::driver::CudaStream;
use gemm_core::warpgroup::WgmmaTypes;
use gemm_core::{KernelConfig, Precision};
use std::sync::Arc;

/// One planned product (or strided batch of it) of any kernel family: the
/// plan's answer, which [`enqueue`] runs.
// The emulated launch holds two INT8 batches' plans (about 330 bytes):
// planned once per call and passed by reference, its size costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
pub(crate) enum Launch {
    /// The f64/f32 ladder.
    Ladder(ladder::LadderLaunch),
    /// Stage 8's `mma.sync` kernels of the tensor-core types.
    MmaSync(mma_sync::MmaLaunch),
    /// Stage 9 of the tensor-core types.
    Warpgroup(warpgroup::WarpgroupLaunch),
    /// The token-sized kernels (every type; compute capability 9.0).
    Skinny(skinny::SkinnyLaunch),
    /// f64 or f32 emulated on INT8 tensor cores (Ozaki scheme II).
    Emulated(emulation::EmulatedLaunch),
}

/// A planned pointer-array or grouped batch: each problem's index in the
/// lists with its plan.
pub(crate) enum ListLaunch {
    /// The ladder: one grouped launch of one configuration, planned for the
    /// `largest` problem; each problem in kernel form (k = 0 when A and B
    /// are not read), A and B swapped or not.
    Ladder {
        precision: Precision,
        config: KernelConfig,
        largest: gemm_core::GemmDims,
        problems: Vec<(usize, gemm_core::GemmDims, bool)>,
    },
    /// Stage 9: grouped launches of one kernel (one per layout class).
    Warpgroup(Vec<(usize, warpgroup::WarpgroupLaunch)>),
    /// One launch per problem (stage 8).
    EachAlone(Vec<(usize, Launch)>),
}

/// Enqueues `batch` = (count, element strides of A, B, C) products of the
/// planned `launch` on `stream`, C <- alpha op(A) op(B) + beta C, operands
/// as the user gave them (the launch knows its kernel form): (1, [0; 3]) for
/// one product. The one entry to every kernel family.
pub(crate) fn enqueue<T: Scalar, C: Scalar>(
    launch: &Launch,
    device: &Arc<Device>,
    stream: &Arc<CudaStream>,
    scalars: (f64, f64),
    (a, b, c): Operands<'_, '_, '_, '_, T, C>,
    batch: (usize, [usize; 3]),
) -> Result<(), Error> {
    // One launch of the tensor-core kernels takes a u32 batch count.
    let fits = |types: WgmmaTypes| {
        if batch.0 > u32::MAX as usize {
            return Err(Error::Unsupported {
                product: product_name(types),
                why: format!("a batch of {} products: at most 2^32 - 1 in one launch", batch.0),
            });
        }
        Ok(())
    };
    match launch {
        Launch::Ladder(plan) => match plan.precision {
            Precision::F64 => {
                ladder::enqueue::<f64>(plan, device, stream, scalars, (a.recast(), b.recast(), c.recast()), batch)
            }
            Precision::F32 => {
                ladder::enqueue::<f32>(plan, device, stream, scalars, (a.recast(), b.recast(), c.recast()), batch)
            }
        },
        Launch::MmaSync(l) => {
            fits(l.types)?;
            mma_sync::enqueue(l, device, stream, scalars, (a, b, c), batch)
        }
        Launch::Warpgroup(l) => {
            fits(l.types)?;
            warpgroup::enqueue(l, device, stream, scalars, (a, b, c), batch, None)
        }
        Launch::Skinny(l) => skinny::enqueue(l, device, stream, scalars, (a, b, c), batch),
        Launch::Emulated(l) => emulation::enqueue(l, device, stream, scalars, (a, b, c), batch),
    }
}

/// Enqueues the planned list batch on `stream`: problem i reads `a[i]`,
/// `b[i]` and writes `c[i]`. Errors of one problem name it
/// ([`Error::Problem`]).
pub(crate) fn enqueue_list<T: Scalar, C: Scalar>(
    launch: &ListLaunch,
    device: &Arc<Device>,
    stream: &Arc<CudaStream>,
    scalars: (f64, f64),
    (a, b, c): ListViews<'_, '_, '_, '_, '_, T, C>,
) -> Result<(), Error> {
    match launch {
        ListLaunch::Ladder { precision: Precision::F64, config, largest, problems } => ladder::enqueue_grouped::<f64>(
            (*config, largest),
            problems,
            device,
            stream,
            scalars,
            (a.recast(), b.recast(), c.recast()),
        ),
        ListLaunch::Ladder { precision: Precision::F32, config, largest, problems } => ladder::enqueue_grouped::<f32>(
            (*config, largest),
            problems,
            device,
            stream,
            scalars,
            (a.recast(), b.recast(), c.recast()),
        ),
        ListLaunch::Warpgroup(problems) => {
            warpgroup::enqueue_grouped(problems, device, stream, scalars, (a, b, c), (None, None))
        }
        ListLaunch::EachAlone(problems) => {
            for (i, launch) in problems {
                let i = *i;
                enqueue(launch, device, stream, scalars, (a[i], b[i], &mut *c[i]), (1, [0; 3]))
                    .map_err(|e| Error::Problem { index: i, source: Box::new(e) })?;
            }
            Ok(())
        }
    }
}
