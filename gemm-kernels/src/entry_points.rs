//! The exported PTX entry points: one `#[no_mangle] extern "ptx-kernel"`
//! function per line of [`gemm_core::kernel_menu!`], each a fixed
//! instantiation of a stage's generic kernel.
//!
//! Every entry point has the same parameters, in this order (PTX ISA,
//! "Kernel function parameters"): `m, n, k: u32`, `alpha: T`, `a: *const T`,
//! `lda: u32`, `b: *const T`, `ldb: u32`, `beta: T`, `c: *mut T`, `ldc: u32`,
//! and computes `C <- alpha * A * B + beta * C` (row-major, in elements).

use crate::thread::GemmArgs;
use crate::{s01_naive, s02_coalesced, s03_smem_tiled, s04_outputs_per_thread};

macro_rules! stage_kernel {
    (Naive, $t:ty, $tile:literal, $outputs:literal, $g:ident) => {
        s01_naive::naive::<$t>($g)
    };
    (Coalesced, $t:ty, $tile:literal, $outputs:literal, $g:ident) => {
        s02_coalesced::coalesced::<$t>($g)
    };
    (SmemTiled, $t:ty, $tile:literal, $outputs:literal, $g:ident) => {
        s03_smem_tiled::smem_tiled::<$t, $tile>($g)
    };
    (OutputsPerThread, $t:ty, $tile:literal, $outputs:literal, $g:ident) => {
        s04_outputs_per_thread::outputs_per_thread::<$t, $tile, $outputs>($g)
    };
}

macro_rules! export_kernels {
    ($( ($name:ident, $t:ty, $stage:ident, $tile:literal, $outputs:literal) )*) => {$(
        #[doc = concat!("Entry point `", stringify!($name), "`: stage ", stringify!($stage),
                        ", ", stringify!($t), ", tile ", stringify!($tile),
                        ", outputs per thread ", stringify!($outputs), ".")]
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
        ) {
            let g = GemmArgs { m, n, k, alpha, a, lda, b, ldb, beta, c, ldc };
            stage_kernel!($stage, $t, $tile, $outputs, g)
        }
    )*};
}

gemm_core::kernel_menu!(export_kernels);
