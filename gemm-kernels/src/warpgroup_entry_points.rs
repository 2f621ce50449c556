//! The exported entry points of stage 9 (the `sm_90a` module): for each line
//! `(name, types, [BM, BN, depth, cluster])` of [`gemm_core::warpgroup_menu!`], one
//! kernel per layout of A and B, named `<name>_nn`, `<name>_nt`, `<name>_tn`,
//! `<name>_tt` (A then B; `n` row-major, `t` column-major); for tf32 only
//! `_nt` (both operands K-major) and `_tt` (an MN-major A read through
//! registers), for s8 and FP8 (e4m3, e4m3 x e5m2, e5m2 x e4m3) only `_nt`: wgmma cannot transpose them; a narrow
//! line (BN below 64) reads B K-major only: `_nt` and `_tt`. A line marked
//! `fused` has each of its entry points twice: plain, and `<entry>_fused`,
//! which reads `fusion` (block scales, the fused epilogue); the plain ones
//! ignore it; a line marked `fused, epilogue` has them three times, the third
//! `<entry>_epilogue` (the fused epilogue without block scales: FP8 tiles
//! whose `_fused` kernels stage block scales in shared memory); a line marked `fused_only` has the `_fused` ones alone. A line with clusters of 2 has its entry points declared
//! with `.reqnctapercluster 2, 1, 1` (the xtask adds it, as the launch
//! bounds): a plain launch runs them in clusters.
//! Parameters, in this order: `m, n, k: u32`, `alpha, beta` (f32; i32 for
//! the s8 product), `maps: *const u8` (A's,
//! B's and, for the TMA-store epilogue, C's `CUtensorMap`, 128 bytes each,
//! in global memory), `c: *mut C`,
//! `ldc: u32`, `stride_c: u64`, `batch_a, batch_b, count, c_store, k_slice: u32`,
//! `group: *const GroupProblem`, `fusion: *const Fusion` (see
//! [`crate::s09_warpgroup::Params`]). And split-K's reductions
//! `warpgroup_reduce_{f32,f16,bf16,i32}` (see
//! [`crate::mixed::reduce`]). The transposes of MN-major tf32 and s8
//! operands, `transpose_b32` and `_b8`, are packing's
//! ([`crate::pack`]).

use crate::mixed::{reduce, Bf16, Bh, E4m3, E4m3E5m2, E5m2E4m3, Output, Tf32, F16, H, S8};
use crate::s09_warpgroup::{masked_rows, warpgroup, Params};
use gemm_core::warpgroup::{Fusion, GroupProblem};

macro_rules! layout_entry {
    ([$tail:literal, $fused:literal, $block:literal], $name:ident, $fn:ident, $suffix:literal, $i:ty, $o:ty, [$bm:literal, $bn:literal, $d:literal, $cl:literal], $amn:literal, $bmn:literal) => {
        #[doc = concat!("Entry point `", stringify!($name), "_", $suffix, $tail, "`.")]
        ///
        /// # Safety
        /// Launched by the host with the geometry of its `WgmmaTile`, tensor
        /// maps for A and B in this layout, and a C of the given shape.
        #[export_name = concat!(stringify!($name), "_", $suffix, $tail)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $fn(
            m: u32,
            n: u32,
            k: u32,
            alpha: <$o as Output>::Value,
            beta: <$o as Output>::Value,
            maps: *const u8,
            c: *mut $o,
            ldc: u32,
            stride_c: u64,
            batch_a: u32,
            batch_b: u32,
            count: u32,
            c_store: u32,
            k_slice: u32,
            group: *const GroupProblem,
            fusion: *const Fusion,
        ) {
            let p = Params {
                m,
                n,
                k,
                alpha,
                beta,
                maps,
                c,
                ldc,
                stride_c,
                batch_a,
                batch_b,
                count,
                c_store,
                k_slice,
                group,
                fusion,
            };
            warpgroup::<$i, $o, $bm, $bn, $d, { $bn / 2 }, $amn, $bmn, $fused, $block, $cl>(p)
        }
    };
}

/// The layouts of one menu line, with the line's operand and C types; `$v`
/// is the variant, `["", false, false]` (plain), `["_fused", true, true]`
/// (block scales and the fused epilogue) or `["_epilogue", true, false]`
/// (the fused epilogue alone).
macro_rules! layouts {
    ($v:tt, $name:ident, F16, $p:tt) => { layouts!(@go $v, $name, F16, H, $p); };
    ($v:tt, $name:ident, F16F32, $p:tt) => { layouts!(@go $v, $name, F16, f32, $p); };
    ($v:tt, $name:ident, Bf16, $p:tt) => { layouts!(@go $v, $name, Bf16, Bh, $p); };
    ($v:tt, $name:ident, Bf16F32, $p:tt) => { layouts!(@go $v, $name, Bf16, f32, $p); };
    // wgmma reads tf32 and s8 operands K-major only from shared memory:
    // tf32's A may be MN-major (`tt`: read through registers); the host
    // swaps or transposes the others first.
    ($v:tt, $name:ident, Tf32, [$($p:literal),*]) => {
        layout_entry!($v, $name, nt, "nt", Tf32, f32, [$($p),*], false, false);
        layout_entry!($v, $name, tt, "tt", Tf32, f32, [$($p),*], true, false);
    };
    ($v:tt, $name:ident, S8, [$($p:literal),*]) => {
        layout_entry!($v, $name, nt, "nt", S8, i32, [$($p),*], false, false);
    };
    // FP8: K-major operands only, as s8.
    ($v:tt, $name:ident, E4m3Bf16, $p:tt) => { layouts!(@k_major $v, $name, E4m3, Bh, $p); };
    ($v:tt, $name:ident, E4m3F16, $p:tt) => { layouts!(@k_major $v, $name, E4m3, H, $p); };
    ($v:tt, $name:ident, E4m3F32, $p:tt) => { layouts!(@k_major $v, $name, E4m3, f32, $p); };
    ($v:tt, $name:ident, E4m3E5m2Bf16, $p:tt) => { layouts!(@k_major $v, $name, E4m3E5m2, Bh, $p); };
    ($v:tt, $name:ident, E4m3E5m2F16, $p:tt) => { layouts!(@k_major $v, $name, E4m3E5m2, H, $p); };
    ($v:tt, $name:ident, E4m3E5m2F32, $p:tt) => { layouts!(@k_major $v, $name, E4m3E5m2, f32, $p); };
    ($v:tt, $name:ident, E5m2E4m3Bf16, $p:tt) => { layouts!(@k_major $v, $name, E5m2E4m3, Bh, $p); };
    ($v:tt, $name:ident, E5m2E4m3F16, $p:tt) => { layouts!(@k_major $v, $name, E5m2E4m3, H, $p); };
    ($v:tt, $name:ident, E5m2E4m3F32, $p:tt) => { layouts!(@k_major $v, $name, E5m2E4m3, f32, $p); };
    // A narrow tile reads B K-major only.
    ($v:tt, $name:ident, F16, $p:tt, narrow) => { layouts!(@k_major_b $v, $name, F16, H, $p); };
    ($v:tt, $name:ident, F16F32, $p:tt, narrow) => { layouts!(@k_major_b $v, $name, F16, f32, $p); };
    ($v:tt, $name:ident, Bf16, $p:tt, narrow) => { layouts!(@k_major_b $v, $name, Bf16, Bh, $p); };
    ($v:tt, $name:ident, Bf16F32, $p:tt, narrow) => { layouts!(@k_major_b $v, $name, Bf16, f32, $p); };
    ($v:tt, $name:ident, $t:ident, $p:tt, narrow) => { layouts!($v, $name, $t, $p); };
    // A line marked `fused_only`: the fused kernels alone.
    ($v:tt, $name:ident, $t:ident, $p:tt, fused_only) => {
        #[doc = concat!("The fused-epilogue entry points of `", stringify!($name), "` (it has no others).")]
        pub mod fused {
            use super::*;
            layouts!(["_fused", true, true], $name, $t, $p);
        }
    };
    // A line marked `fused, epilogue` (FP8 tiles whose fused kernels stage
    // their block scales): as `fused`, and in the submodule `epilogue` the
    // same layouts with the fused epilogue but no block scales
    // (`<entry>_epilogue`).
    ($v:tt, $name:ident, $t:ident, $p:tt, fused, epilogue) => {
        layouts!($v, $name, $t, $p, fused);
        #[doc = concat!("The fused-epilogue entry points of `", stringify!($name), "` without block scales.")]
        pub mod epilogue {
            use super::*;
            layouts!(["_epilogue", true, false], $name, $t, $p);
        }
    };
    // A line marked `fused`: its plain kernels and, in the submodule
    // `fused`, the same layouts with the fused epilogue (`<entry>_fused`).
    ($v:tt, $name:ident, $t:ident, $p:tt, fused) => {
        layouts!($v, $name, $t, $p);
        #[doc = concat!("The fused-epilogue entry points of `", stringify!($name), "`.")]
        pub mod fused {
            use super::*;
            layouts!(["_fused", true, true], $name, $t, $p);
        }
    };
    (@k_major $v:tt, $name:ident, $i:ty, $o:ty, [$($p:literal),*]) => {
        layout_entry!($v, $name, nt, "nt", $i, $o, [$($p),*], false, false);
    };
    (@k_major_b $v:tt, $name:ident, $i:ty, $o:ty, [$($p:literal),*]) => {
        layout_entry!($v, $name, nt, "nt", $i, $o, [$($p),*], false, false);
        layout_entry!($v, $name, tt, "tt", $i, $o, [$($p),*], true, false);
    };
    (@go $v:tt, $name:ident, $i:ty, $o:ty, [$($p:literal),*]) => {
        // A row-major is K-major; B row-major is N-major.
        layout_entry!($v, $name, nn, "nn", $i, $o, [$($p),*], false, true);
        layout_entry!($v, $name, nt, "nt", $i, $o, [$($p),*], false, false);
        layout_entry!($v, $name, tn, "tn", $i, $o, [$($p),*], true, true);
        layout_entry!($v, $name, tt, "tt", $i, $o, [$($p),*], true, false);
    };
}

macro_rules! export_warpgroup {
    ($( ($name:ident, $t:ident, [$bm:literal, $bn:literal, $d:literal, $cl:literal] $(, $flag:ident)*) )*) => {$(
        #[doc = concat!("Entry points `", stringify!($name), "_{nn,nt,tn,tt}` (those of its types and tile).")]
        pub mod $name {
            use super::*;
            layouts!(["", false, false], $name, $t, [$bm, $bn, $d, $cl] $(, $flag)*);
        }
    )*};
}

gemm_core::warpgroup_menu!(export_warpgroup);

macro_rules! export_reduce {
    ($name:ident, $o:ty) => {
        #[doc = concat!("Entry point `", stringify!($name), "`: split-K's sum of slices into a C of ", stringify!($o), ".")]
        ///
        /// # Safety
        /// As [`crate::mixed::reduce`].
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
            m: u32,
            n: u32,
            slices: u32,
            w: *const <$o as Output>::Value,
            alpha: <$o as Output>::Value,
            beta: <$o as Output>::Value,
            c: *mut $o,
            ldc: u32,
        ) {
            reduce::<$o>(m, n, slices, w, alpha, beta, c, ldc)
        }
    };
}

export_reduce!(warpgroup_reduce_f32, f32);
export_reduce!(warpgroup_reduce_f16, H);
export_reduce!(warpgroup_reduce_bf16, Bh);
export_reduce!(warpgroup_reduce_i32, i32);

/// Entry point `warpgroup_masked_rows`: the masked layout's rows and jobs
/// of a grouped launch, written into its table before it runs.
///
/// # Safety
/// As [`crate::s09_warpgroup::masked_rows`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn warpgroup_masked_rows(
    group: *mut GroupProblem,
    maps: *mut u8,
    count: u32,
    rows: *const u64,
    bm: u32,
    bn: u32,
) {
    masked_rows(group, maps, count, rows, bm, bn)
}
