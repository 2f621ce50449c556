//! The exported PTX entry points: one `#[no_mangle] extern "ptx-kernel"`
//! function per line of [`gemm_core::kernel_menu!`], each a fixed
//! instantiation of a stage's generic kernel.
//!
//! Every entry point has the same parameters, in this order (PTX ISA,
//! "Kernel function parameters"): `m, n, k: u32`, `alpha: T`, `a: *const T`,
//! `lda: u32`, `b: *const T`, `ldb: u32`, `beta: T`, `c: *mut T`, `ldc: u32`,
//! then the batch: `grid_x: u32` (one product's grid along x), `count: u32`,
//! `stride_a, stride_b, stride_c: u64` and `problems: *const GroupProblem`
//! (null for a strided batch; see [`crate::batch`]). Each product computes
//! `C <- alpha * A * B + beta * C` (C row-major, A and B in this build's
//! layouts, [`crate::A_COL_MAJOR`] and [`crate::B_COL_MAJOR`]; in elements).
//! A single product is a strided batch of one. The four builds export the
//! same names.

use crate::batch::locate;
use crate::thread::{block_idx, grid_dim, GemmArgs};
use crate::{
    s01_naive, s02_coalesced, s03_smem_tiled, s04_outputs_per_thread, s05_register_tiled, s06_vectorized,
    s07_pipelined, s08_tensor_core,
};
use crate::{A_COL_MAJOR as AC, B_COL_MAJOR as BC};
use gemm_core::batch::GroupProblem;

macro_rules! stage_kernel {
    (Naive, $t:ty, [], $g:ident) => {
        s01_naive::naive::<$t, AC, BC>($g)
    };
    (Coalesced, $t:ty, [], $g:ident) => {
        s02_coalesced::coalesced::<$t, AC, BC>($g)
    };
    (SmemTiled, $t:ty, [$tile:literal], $g:ident) => {
        s03_smem_tiled::smem_tiled::<$t, $tile, AC, BC>($g)
    };
    (OutputsPerThread, $t:ty, [$tile:literal, $outputs:literal], $g:ident) => {
        s04_outputs_per_thread::outputs_per_thread::<$t, $tile, $outputs, AC, BC>($g)
    };
    (RegisterTiled, $t:ty, [$bm:literal, $bn:literal, $bk:literal, $tm:literal, $tn:literal], $g:ident) => {
        s05_register_tiled::register_tiled::<$t, $bm, $bn, $bk, $tm, $tn, AC, BC>($g)
    };
    (Vectorized, $t:ty, [$bm:literal, $bn:literal, $bk:literal, $tm:literal, $tn:literal], $g:ident) => {
        s06_vectorized::vectorized::<$t, $bm, $bn, $bk, $tm, $tn, AC, BC>($g)
    };
    (Pipelined, $t:ty, [$bm:literal, $bn:literal, $bk:literal, $wm:literal, $wn:literal, $tm:literal, $tn:literal,
                        $s:literal], $g:ident) => {
        s07_pipelined::pipelined::<$t, $bm, $bn, $bk, $wm, $wn, $tm, $tn, $s, AC, BC, false>($g, core::ptr::null())
    };
    (TensorCore, f64, [$bm:literal, $bn:literal, $bk:literal, $wm:literal, $wn:literal, $s:literal], $g:ident) => {
        s08_tensor_core::tensor_core::<$bm, $bn, $bk, $wm, $wn, $s, { $wm / 16 }, { $wn / 8 }, AC, BC, false>(
            $g,
            core::ptr::null(),
        )
    };
}

/// [`stage_kernel!`]'s fused kernels (`FUSED`: the epilogue at `fusion`).
macro_rules! fused_stage_kernel {
    (Pipelined, f32, [$bm:literal, $bn:literal, $bk:literal, $wm:literal, $wn:literal, $tm:literal, $tn:literal,
                      $s:literal], $g:ident, $f:ident) => {
        s07_pipelined::pipelined::<f32, $bm, $bn, $bk, $wm, $wn, $tm, $tn, $s, AC, BC, true>($g, $f)
    };
    (TensorCore, f64, [$bm:literal, $bn:literal, $bk:literal, $wm:literal, $wn:literal, $s:literal], $g:ident,
     $f:ident) => {
        s08_tensor_core::tensor_core::<$bm, $bn, $bk, $wm, $wn, $s, { $wm / 16 }, { $wn / 8 }, AC, BC, true>($g, $f)
    };
}

/// The batched twin of an entry point, for the stages that keep one
/// (`gemm_core::batch::separate_batched_entry`; keep the two lists equal).
macro_rules! batched_twin {
    (Pipelined, f32, $name:ident, [$($p:literal),*]) => {
        batched_entry!(Pipelined, f32, $name, [$($p),*]);
    };
    (TensorCore, f64, $name:ident, [$($p:literal),*]) => {
        batched_entry!(TensorCore, f64, $name, [$($p),*]);
    };
    ($stage:ident, $t:tt, $name:ident, [$($p:literal),*]) => {};
}

/// The entry point `<name>_batched`: strided, grouped and split-K launches.
macro_rules! batched_entry {
    ($stage:ident, $t:tt, $name:ident, [$($p:literal),*]) => {
        #[doc = concat!("The batched entry point `", stringify!($name), "_batched`.")]
        pub mod $name {
            use super::*;
            #[doc = concat!("Entry point `", stringify!($name), "_batched`.")]
            ///
            /// # Safety
            /// As the single-product entry point.
            #[export_name = concat!(stringify!($name), "_batched")]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn batched(
                m: u32, n: u32, k: u32,
                alpha: $t, a: *const $t, lda: u32,
                b: *const $t, ldb: u32,
                beta: $t, c: *mut $t, ldc: u32,
                grid_x: u32, count: u32, stride_a: u64, stride_b: u64, stride_c: u64,
                problems: *const GroupProblem, k_slice: u32,
            ) {
                let g = GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, block: [0; 2], grid: [grid_x, 0] };
                if let Some(g) = locate(g, count, [stride_a, stride_b, stride_c], problems, k_slice) {
                    stage_kernel!($stage, $t, [$($p),*], g)
                }
            }
        }
    };
}

macro_rules! export_kernels {
    ($( ($name:ident, $t:tt, $stage:ident, [$($p:literal),*]) )*) => {$(
        #[doc = concat!("Entry point `", stringify!($name), "`: ", stringify!($stage),
                        ", ", stringify!($t), ", [", stringify!($($p),*), "].")]
        ///
        /// # Safety
        /// Launched by the host with the geometry of its `KernelConfig`, on
        /// valid device pointers to matrices of the given shapes.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
            m: u32, n: u32, k: u32,
            alpha: $t, a: *const $t, lda: u32,
            b: *const $t, ldb: u32,
            beta: $t, c: *mut $t, ldc: u32,
            grid_x: u32, count: u32, stride_a: u64, stride_b: u64, stride_c: u64,
            problems: *const GroupProblem, k_slice: u32,
        ) {
            let g = GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, block: [0; 2], grid: [grid_x, 0] };
            if gemm_core::batch::separate_batched_entry(gemm_core::Stage::$stage, gemm_core::menu_precision!($t)) {
                // One product: the pointers stay kernel parameters.
                let [bx, by, _] = block_idx();
                let g = GemmArgs { block: [bx, by], grid: grid_dim(), ..g };
                stage_kernel!($stage, $t, [$($p),*], g)
            } else if let Some(g) = locate(g, count, [stride_a, stride_b, stride_c], problems, k_slice) {
                stage_kernel!($stage, $t, [$($p),*], g)
            }
        }
        batched_twin!($stage, $t, $name, [$($p),*]);
    )*};
}

gemm_core::kernel_menu!(export_kernels);

/// The entry point `<name>_fused`: one product, C stored through the fused
/// epilogue at `fusion` (a [`gemm_core::warpgroup::Fusion`] in global
/// memory; [`crate::fusion`]).
macro_rules! fused_entry {
    ($stage:ident, $t:tt, $name:ident, [$($p:literal),*]) => {
        #[doc = concat!("Entry point `", stringify!($name), "_fused`.")]
        ///
        /// # Safety
        /// As the single-product entry point; `fusion` points to a valid
        /// `Fusion` whose vectors cover m x n.
        #[export_name = concat!(stringify!($name), "_fused")]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
            m: u32, n: u32, k: u32,
            alpha: $t, a: *const $t, lda: u32,
            b: *const $t, ldb: u32,
            beta: $t, c: *mut $t, ldc: u32,
            fusion: *const gemm_core::warpgroup::Fusion,
        ) {
            let [bx, by, _] = block_idx();
            let g = GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, block: [bx, by], grid: grid_dim() };
            fused_stage_kernel!($stage, $t, [$($p),*], g, fusion)
        }
    };
}

macro_rules! export_fused_kernels {
    ($( ($name:ident, $t:tt, $stage:ident, [$($p:literal),*]) )*) => {$(
        fused_entry!($stage, $t, $name, [$($p),*]);
    )*};
}

/// The fused entry points (`<name>_fused`), one per line of
/// [`gemm_core::fused_menu!`], in a module of their own (their Rust names
/// are the plain entry points').
pub mod fused {
    use super::*;
    gemm_core::fused_menu!(export_fused_kernels);
}

/// Stage 8's mixed-precision entry points, one per line `(name, types, [BM,
/// BN, depth])` of [`gemm_core::mma_menu!`]: f16 and bf16 in every layout
/// module, tf32 and i8 in the `nt` module alone (both operands K-major).
/// Parameters, in this order: `m, n, k: u32`, `alpha, beta` (f32; i32 for
/// i8), `a: *const u8, lda: u32, b: *const u8, ldb: u32` (elements of the
/// input type), `c: *mut C, ldc: u32`, `stride_a, stride_b, stride_c: u64`,
/// `count: u32` (see [`s08_tensor_core_mixed::MmaParams`]).
mod mixed_entry_points {
    use crate::mixed::{Bf16, Bh, Output, F16, H};
    use crate::s08_tensor_core_mixed::{mma_mixed, MmaParams};
    use crate::{A_COL_MAJOR as AC, B_COL_MAJOR as BC};

    macro_rules! mma_entry {
        ($name:ident, $i:ty, $o:ty, [$bm:literal, $bn:literal, $d:literal]) => {
            #[doc = concat!("Entry point `", stringify!($name), "`.")]
            ///
            /// # Safety
            /// Launched by the host with the geometry of its `MmaTile`, on
            /// operands as `s08_tensor_core_mixed` says.
            #[no_mangle]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn $name(
                m: u32,
                n: u32,
                k: u32,
                alpha: <$o as Output>::Value,
                beta: <$o as Output>::Value,
                a: *const u8,
                lda: u32,
                b: *const u8,
                ldb: u32,
                c: *mut $o,
                ldc: u32,
                stride_a: u64,
                stride_b: u64,
                stride_c: u64,
                count: u32,
            ) {
                let p = MmaParams { m, n, k, alpha, beta, a, lda, b, ldb, c, ldc, stride_a, stride_b, stride_c, count };
                // A column-major and B row-major are MN-major.
                mma_mixed::<$i, $o, $bm, $bn, $d, { $bm / 32 }, { $bn / 32 }, AC, { !BC }>(p)
            }
        };
    }

    macro_rules! mma_types {
        ($name:ident, F16, $p:tt) => {
            mma_entry!($name, F16, H, $p);
        };
        ($name:ident, F16F32, $p:tt) => {
            mma_entry!($name, F16, f32, $p);
        };
        ($name:ident, Bf16, $p:tt) => {
            mma_entry!($name, Bf16, Bh, $p);
        };
        ($name:ident, Bf16F32, $p:tt) => {
            mma_entry!($name, Bf16, f32, $p);
        };
        // ldmatrix transposes 16-bit elements only: tf32 and i8 operands
        // come K-major (the host transposes the others).
        ($name:ident, Tf32, $p:tt) => {
            #[cfg(all(not(gemm_a_col_major), gemm_b_col_major))]
            mma_entry!($name, crate::mixed::Tf32, f32, $p);
        };
        ($name:ident, S8, $p:tt) => {
            #[cfg(all(not(gemm_a_col_major), gemm_b_col_major))]
            mma_entry!($name, crate::mixed::S8, i32, $p);
        };
    }

    macro_rules! export_mma {
        ($( ($name:ident, $t:ident, [$bm:literal, $bn:literal, $d:literal]) )*) => {$(
            mma_types!($name, $t, [$bm, $bn, $d]);
        )*};
    }

    gemm_core::mma_menu!(export_mma);
}
