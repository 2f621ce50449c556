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
    /// Elements per 16-byte vector (2 for f64, 4 for f32).
    const VEC: usize;
    /// 16-byte `ld.shared.v*` into `out[..VEC]`.
    ///
    /// # Safety
    /// As `ld_shared`, with `addr` 16-byte aligned.
    unsafe fn ld_shared_vec(addr: u32, out: &mut [Self; 4]);
    /// 16-byte `st.shared.v*` of `v[..VEC]`.
    ///
    /// # Safety
    /// As `st_shared`, with `addr` 16-byte aligned.
    unsafe fn st_shared_vec(addr: u32, v: &[Self; 4]);
    /// 16-byte `ld.global.nc.v*` (read-only path) into `out[..VEC]`.
    ///
    /// # Safety
    /// `p` points to VEC readable elements of global memory, 16-byte aligned,
    /// not written during the kernel.
    unsafe fn ld_global_vec(p: *const Self, out: &mut [Self; 4]);
    /// 16-byte `st.global.v*` of `v[..VEC]`.
    ///
    /// # Safety
    /// `p` points to VEC writable elements of global memory, 16-byte aligned.
    unsafe fn st_global_vec(p: *mut Self, v: &[Self; 4]);
    /// `cp.async.ca.shared.global` of one element (4 or 8 bytes). PTX ISA,
    /// "cp.async".
    ///
    /// # Safety
    /// `dst` is an aligned shared address inside the launch's buffer; `src`
    /// points to a readable element of global memory.
    unsafe fn cp_async_elem(dst: u32, src: *const Self);
    /// [`Element::cp_async_elem`] with a source size: `src_bytes` (0 or the
    /// element's size) are read and the rest zero-filled, so 0 clears the
    /// element without reading it. PTX ISA, "cp.async", `src-size`.
    ///
    /// # Safety
    /// As [`Element::cp_async_elem`]: `src` stays a readable element of
    /// global memory even when `src_bytes` is 0.
    unsafe fn cp_async_elem_zfill(dst: u32, src: *const Self, src_bytes: u32);

    /// `ld.global` of one element (an explicit state space: a pointer
    /// computed per product of a batch no longer tells the compiler it
    /// points to global memory, and generic accesses cost ptxas registers).
    ///
    /// # Safety
    /// `p` points to a readable element in global memory.
    unsafe fn ld_global(p: *const Self) -> Self;

    /// `st.global` of one element.
    ///
    /// # Safety
    /// `p` points to a writable element in global memory.
    unsafe fn st_global(p: *mut Self, value: Self);

    /// `x` in this type (exact: f32 or its widening to f64).
    fn from_f32(x: f32) -> Self;

    /// Whether `self < 0` (false for a NaN).
    fn is_negative(self) -> bool;

    /// GELU, tanh approximation: [`crate::fusion::gelu_f32`] (a few ulps)
    /// or [`crate::fusion::gelu_f64`] (about an ulp of f64).
    fn gelu(self) -> Self;
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
    const VEC: usize = 2;
    #[inline(always)]
    unsafe fn ld_shared_vec(addr: u32, out: &mut [Self; 4]) {
        asm!("ld.shared.v2.f64 {{{x}, {y}}}, [{a}];", x = out(reg64) out[0], y = out(reg64) out[1],
             a = in(reg32) addr, options(readonly, nostack, preserves_flags));
    }
    #[inline(always)]
    unsafe fn st_shared_vec(addr: u32, v: &[Self; 4]) {
        asm!("st.shared.v2.f64 [{a}], {{{x}, {y}}};", a = in(reg32) addr, x = in(reg64) v[0], y = in(reg64) v[1],
             options(nostack, preserves_flags));
    }
    #[inline(always)]
    unsafe fn ld_global_vec(p: *const Self, out: &mut [Self; 4]) {
        asm!("ld.global.nc.v2.f64 {{{x}, {y}}}, [{p}];", x = out(reg64) out[0], y = out(reg64) out[1],
             p = in(reg64) p, options(readonly, nostack, preserves_flags));
    }
    #[inline(always)]
    unsafe fn st_global_vec(p: *mut Self, v: &[Self; 4]) {
        asm!("st.global.v2.f64 [{p}], {{{x}, {y}}};", p = in(reg64) p, x = in(reg64) v[0], y = in(reg64) v[1],
             options(nostack, preserves_flags));
    }
    #[inline(always)]
    unsafe fn cp_async_elem(dst: u32, src: *const Self) {
        asm!("cp.async.ca.shared.global [{d}], [{s}], 8;", d = in(reg32) dst, s = in(reg64) src,
             options(nostack, preserves_flags));
    }
    #[inline(always)]
    unsafe fn cp_async_elem_zfill(dst: u32, src: *const Self, src_bytes: u32) {
        asm!("cp.async.ca.shared.global [{d}], [{s}], 8, {n};", d = in(reg32) dst, s = in(reg64) src,
             n = in(reg32) src_bytes, options(nostack, preserves_flags));
    }

    #[inline(always)]
    unsafe fn ld_global(p: *const Self) -> Self {
        let v: Self;
        asm!("ld.global.f64 {v}, [{p}];", v = out(reg64) v, p = in(reg64) p, options(readonly, nostack, preserves_flags));
        v
    }

    #[inline(always)]
    unsafe fn st_global(p: *mut Self, value: Self) {
        asm!("st.global.f64 [{p}], {v};", p = in(reg64) p, v = in(reg64) value, options(nostack, preserves_flags));
    }

    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x as f64
    }

    #[inline(always)]
    fn is_negative(self) -> bool {
        self < 0.0
    }

    #[inline(always)]
    fn gelu(self) -> Self {
        crate::fusion::gelu_f64(self)
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
    const VEC: usize = 4;
    #[inline(always)]
    unsafe fn ld_shared_vec(addr: u32, out: &mut [Self; 4]) {
        asm!("ld.shared.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];", x = out(reg32) out[0], y = out(reg32) out[1],
             z = out(reg32) out[2], w = out(reg32) out[3], a = in(reg32) addr,
             options(readonly, nostack, preserves_flags));
    }
    #[inline(always)]
    unsafe fn st_shared_vec(addr: u32, v: &[Self; 4]) {
        asm!("st.shared.v4.f32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg32) addr, x = in(reg32) v[0],
             y = in(reg32) v[1], z = in(reg32) v[2], w = in(reg32) v[3], options(nostack, preserves_flags));
    }
    #[inline(always)]
    unsafe fn ld_global_vec(p: *const Self, out: &mut [Self; 4]) {
        asm!("ld.global.nc.v4.f32 {{{x}, {y}, {z}, {w}}}, [{p}];", x = out(reg32) out[0], y = out(reg32) out[1],
             z = out(reg32) out[2], w = out(reg32) out[3], p = in(reg64) p,
             options(readonly, nostack, preserves_flags));
    }
    #[inline(always)]
    unsafe fn st_global_vec(p: *mut Self, v: &[Self; 4]) {
        asm!("st.global.v4.f32 [{p}], {{{x}, {y}, {z}, {w}}};", p = in(reg64) p, x = in(reg32) v[0],
             y = in(reg32) v[1], z = in(reg32) v[2], w = in(reg32) v[3], options(nostack, preserves_flags));
    }
    #[inline(always)]
    unsafe fn cp_async_elem(dst: u32, src: *const Self) {
        asm!("cp.async.ca.shared.global [{d}], [{s}], 4;", d = in(reg32) dst, s = in(reg64) src,
             options(nostack, preserves_flags));
    }
    #[inline(always)]
    unsafe fn cp_async_elem_zfill(dst: u32, src: *const Self, src_bytes: u32) {
        asm!("cp.async.ca.shared.global [{d}], [{s}], 4, {n};", d = in(reg32) dst, s = in(reg64) src,
             n = in(reg32) src_bytes, options(nostack, preserves_flags));
    }

    #[inline(always)]
    unsafe fn ld_global(p: *const Self) -> Self {
        let v: Self;
        asm!("ld.global.f32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) p, options(readonly, nostack, preserves_flags));
        v
    }

    #[inline(always)]
    unsafe fn st_global(p: *mut Self, value: Self) {
        asm!("st.global.f32 [{p}], {v};", p = in(reg64) p, v = in(reg32) value, options(nostack, preserves_flags));
    }

    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x
    }

    #[inline(always)]
    fn is_negative(self) -> bool {
        self < 0.0
    }

    #[inline(always)]
    fn gelu(self) -> Self {
        crate::fusion::gelu_f32(self)
    }
}
