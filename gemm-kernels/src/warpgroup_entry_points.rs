//! The exported entry points of stage 9 (the `sm_90a` module): for each line
//! `(name, types, [BM, BN, depth])` of [`gemm_core::warpgroup_menu!`], one
//! kernel per layout of A and B, named `<name>_nn`, `<name>_nt`, `<name>_tn`,
//! `<name>_tt` (A then B; `n` row-major, `t` column-major). Parameters, in
//! this order: `m, n, k: u32`, `alpha, beta: f32`, `maps: *const u8` (A's
//! and B's `CUtensorMap`, 128 bytes each, in global memory), `c: *mut C`,
//! `ldc: u32`, `stride_c: u64`, `batch_a, batch_b, count: u32` (see
//! [`crate::s09_warpgroup::Params`]).

use crate::s09_warpgroup::{warpgroup, Bf16, Bh, Params, F16, H};

macro_rules! layout_entry {
    ($name:ident, $fn:ident, $suffix:literal, $i:ty, $o:ty, [$bm:literal, $bn:literal, $d:literal], $amn:literal, $bmn:literal) => {
        #[doc = concat!("Entry point `", stringify!($name), "_", $suffix, "`.")]
        ///
        /// # Safety
        /// Launched by the host with the geometry of its `WgmmaTile`, tensor
        /// maps for A and B in this layout, and a C of the given shape.
        #[export_name = concat!(stringify!($name), "_", $suffix)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $fn(
            m: u32,
            n: u32,
            k: u32,
            alpha: f32,
            beta: f32,
            maps: *const u8,
            c: *mut $o,
            ldc: u32,
            stride_c: u64,
            batch_a: u32,
            batch_b: u32,
            count: u32,
        ) {
            let p = Params { m, n, k, alpha, beta, maps, c, ldc, stride_c, batch_a, batch_b, count };
            warpgroup::<$i, $o, $bm, $bn, $d, { $bn / 2 }, $amn, $bmn>(p)
        }
    };
}

/// The four layouts of one menu line, with the line's operand and C types.
macro_rules! layouts {
    ($name:ident, F16, $p:tt) => { layouts!(@go $name, F16, H, $p); };
    ($name:ident, F16F32, $p:tt) => { layouts!(@go $name, F16, f32, $p); };
    ($name:ident, Bf16, $p:tt) => { layouts!(@go $name, Bf16, Bh, $p); };
    ($name:ident, Bf16F32, $p:tt) => { layouts!(@go $name, Bf16, f32, $p); };
    (@go $name:ident, $i:ty, $o:ty, [$($p:literal),*]) => {
        // A row-major is K-major; B row-major is N-major.
        layout_entry!($name, nn, "nn", $i, $o, [$($p),*], false, true);
        layout_entry!($name, nt, "nt", $i, $o, [$($p),*], false, false);
        layout_entry!($name, tn, "tn", $i, $o, [$($p),*], true, true);
        layout_entry!($name, tt, "tt", $i, $o, [$($p),*], true, false);
    };
}

macro_rules! export_warpgroup {
    ($( ($name:ident, $t:ident, [$bm:literal, $bn:literal, $d:literal]) )*) => {$(
        #[doc = concat!("Entry points `", stringify!($name), "_{nn,nt,tn,tt}`.")]
        pub mod $name {
            use super::*;
            layouts!($name, $t, [$bm, $bn, $d]);
        }
    )*};
}

gemm_core::warpgroup_menu!(export_warpgroup);
