//! The element types the kernels are generic over (f64, f32), with the few
//! device operations they need: a fused multiply-add and shared-memory access.
//!
//! `fma` calls the `fma.rn` intrinsic directly: num-traits' `Float::mul_add`
//! in a no_std build with `libm` compiles to a software fma (DESIGN.md).

use core::arch::asm;
use core::ops::{Add, Mul};

/// An element type of a GEMM kernel.
///
/// # Safety
/// `ld_shared`/`st_shared` take a 32-bit shared-window address (as produced by
/// [`crate::thread::smem_base`]) that must be aligned to `size_of::<Self>()`
/// and lie inside the launch's dynamic shared memory.
pub trait Element: Copy + PartialEq + Add<Output = Self> + Mul<Output = Self> + 'static {
    /// Additive identity.
    const ZERO: Self;
    /// Bytes per element (as a u32 for address arithmetic).
    const BYTES: u32;
    /// `a * b + c` rounded once (`fma.rn`).
    fn fma(a: Self, b: Self, c: Self) -> Self;
    /// `ld.shared` from a 32-bit shared address.
    ///
    /// # Safety
    /// See the trait's safety section.
    unsafe fn ld_shared(addr: u32) -> Self;
    /// `st.shared` to a 32-bit shared address.
    ///
    /// # Safety
    /// See the trait's safety section.
    unsafe fn st_shared(addr: u32, value: Self);
}

impl Element for f64 {
    const ZERO: Self = 0.0;
    const BYTES: u32 = 8;
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        // SAFETY: fma on floats has no preconditions (the intrinsic is `unsafe`
        // in older compilers only).
        #[allow(unused_unsafe)]
        unsafe {
            core::intrinsics::fmaf64(a, b, c)
        }
    }
    #[inline(always)]
    unsafe fn ld_shared(addr: u32) -> Self {
        let v: f64;
        // Not `pure`: the value changes across barriers, which LLVM must not
        // move it over; `readonly` lets it schedule loads between them.
        asm!("ld.shared.f64 {v}, [{a}];", v = out(reg64) v, a = in(reg32) addr,
             options(readonly, nostack, preserves_flags));
        v
    }
    #[inline(always)]
    unsafe fn st_shared(addr: u32, value: Self) {
        asm!("st.shared.f64 [{a}], {v};", a = in(reg32) addr, v = in(reg64) value,
             options(nostack, preserves_flags));
    }
}

impl Element for f32 {
    const ZERO: Self = 0.0;
    const BYTES: u32 = 4;
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        // SAFETY: fma on floats has no preconditions (the intrinsic is `unsafe`
        // in older compilers only).
        #[allow(unused_unsafe)]
        unsafe {
            core::intrinsics::fmaf32(a, b, c)
        }
    }
    #[inline(always)]
    unsafe fn ld_shared(addr: u32) -> Self {
        let v: f32;
        asm!("ld.shared.f32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) addr,
             options(readonly, nostack, preserves_flags));
        v
    }
    #[inline(always)]
    unsafe fn st_shared(addr: u32, value: Self) {
        asm!("st.shared.f32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) value,
             options(nostack, preserves_flags));
    }
}
