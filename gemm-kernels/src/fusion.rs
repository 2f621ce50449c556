//! Fused epilogues of the ladder's top kernels (stage 7's f32, stage 8's
//! f64; their `<name>_fused` entry points) and the activations every fused
//! kernel shares (stage 9's too).
//!
//! A fused ladder kernel stores each element (i, j) of C as
//!
//! ```text
//! act(((alpha rs(i)) acc) cs(j) + beta C(i, j) + bias)
//! ```
//!
//! in C's type (f32 or f64), the optional terms as [`Fusion`] describes them
//! (row and column scales f32, the bias f32 or C's type, along rows or
//! columns), in the order stage 9 applies them.
//! The threads apply it to their sums before the plain kernel's stores
//! ([`fuse_in_place`]); the k-loop is the plain kernel's.
//!
//! Sources: NVIDIA, cuBLASLt's `cublasLtEpilogue_t` (bias, ReLU and GELU
//! epilogues); W. J. Cody and W. Waite, "Software Manual for the
//! Elementary Functions" (the exponential's argument reduction).

use crate::element::Element;
use crate::thread::{opaque_u32, GemmArgs};
use core::arch::asm;
use gemm_core::warpgroup::{Fusion, ACT_GELU, ACT_RELU, BIAS_F32, BIAS_ROWS};

/// The most sums a thread of a fused ladder kernel holds (stage 7's 8 x 8,
/// stage 8's 64 x 32 warp tile: 64).
pub const MAX_SUMS: usize = 64;

/// Applies the fused epilogue at `fusion` to a thread's sums in place: element `i`
/// of `acc` (C's element `at(i)` = (row, col)) becomes `act(((alpha rs(row))
/// acc) cs(col) + beta C(row, col) + bias)`, and returns the arguments
/// that store the result as it is (alpha 1, beta 0). Elements
/// outside C (the caller does not store them) read the last row's or
/// column's values, so every load is valid.
///
/// Each term is one loop over all of `acc` under one test of its presence
/// (the description read once): each loop is unrolled (the elements stay
/// in registers) and its loads leave together. One loop with every term
/// in its body is too large to unroll: `acc` then went to local memory
/// (256 bytes of stack in every fused kernel, sm_90, 2026-11-28).
///
/// # Safety
/// `fusion` points to a valid [`Fusion`] whose
/// vectors cover m x n (m, n >= 1); C as `g` says; `acc` holds at most
/// [`MAX_SUMS`] sums.
#[inline(always)]
pub unsafe fn fuse_in_place<T: Element>(
    g: &GemmArgs<T>,
    fusion: *const Fusion,
    acc: &mut [T],
    at: impl Fn(usize) -> (u32, u32),
) -> GemmArgs<T> {
    let f = *fusion;
    let clamp = |x: u32, n: u32| if x < n { x } else { n - 1 } as usize;
    let f32_at = |a: u64, i: usize| T::from_f32(<f32 as Element>::ld_global((a as *const f32).add(i)));
    let row = |i: usize| clamp(at(i).0, g.m);
    let col = |i: usize| clamp(at(i).1, g.n);
    if f.row_scales != 0 {
        for (i, x) in acc.iter_mut().enumerate() {
            *x = (g.alpha * f32_at(f.row_scales, row(i))) * *x;
        }
    } else if g.alpha != T::from_f32(1.0) {
        for x in acc.iter_mut() {
            *x = g.alpha * *x;
        }
    }
    if f.col_scales != 0 {
        for (i, x) in acc.iter_mut().enumerate() {
            *x = *x * f32_at(f.col_scales, col(i));
        }
    }
    if g.beta != T::ZERO {
        for (i, x) in acc.iter_mut().enumerate() {
            let old = T::ld_global(g.c.add(row(i) * g.ldc as usize + col(i)));
            *x = T::fma(g.beta, old, *x);
        }
    }
    if f.bias != 0 {
        let by_rows = f.bias_along == BIAS_ROWS;
        let index = |i: usize| if by_rows { row(i) } else { col(i) };
        if f.bias_type == BIAS_F32 {
            for (i, x) in acc.iter_mut().enumerate() {
                *x = *x + f32_at(f.bias, index(i));
            }
        } else {
            for (i, x) in acc.iter_mut().enumerate() {
                *x = *x + T::ld_global((f.bias as *const T).add(index(i)));
            }
        }
    }
    match f.activation {
        ACT_RELU => {
            for x in acc.iter_mut() {
                *x = relu(*x);
            }
        }
        ACT_GELU if T::BYTES == 8 => {
            // f64's GELU is long (an exponential's polynomial, a reciprocal
            // refined): unrolled over a thread's 64 sums it took every
            // register and sent the sums to local memory for the whole
            // k-loop. One element at a time, from a copy in local memory
            // (a loop of opaque length, not unrolled), it needs a few.
            // Eight sums an iteration (unrolled): eight independent chains
            // of dependent f64 operations, not one (one at a time, the
            // epilogue of a 128 x 128 tile took about 18 us, NVIDIA H200,
            // 2026-11-28).
            const LANES: usize = 8;
            const { assert!(MAX_SUMS * 8 <= 512) };
            let mut copy = [T::ZERO; MAX_SUMS];
            copy[..acc.len()].copy_from_slice(acc);
            let whole = acc.len() / LANES;
            for i in 0..opaque_u32(whole as u32) as usize {
                for j in 0..LANES {
                    let x = copy.get_unchecked_mut(i * LANES + j);
                    *x = x.gelu();
                }
            }
            for x in copy[whole * LANES..acc.len()].iter_mut() {
                *x = x.gelu();
            }
            acc.copy_from_slice(&copy[..acc.len()]);
        }
        ACT_GELU => {
            for x in acc.iter_mut() {
                *x = x.gelu();
            }
        }
        _ => {}
    }
    GemmArgs { alpha: T::from_f32(1.0), beta: T::ZERO, ..*g }
}

/// `max(v, 0)`, a NaN kept.
#[inline(always)]
pub fn relu<T: Element>(v: T) -> T {
    if v.is_negative() {
        T::ZERO
    } else {
        v
    }
}

/// sqrt(2 / pi), GELU's scale of its cubic.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// GELU, tanh approximation (as cuBLASLt's `CUBLASLT_EPILOGUE_GELU`):
/// `0.5 v (1 + tanh(u))` with `u = sqrt(2 / pi) (v + 0.044715 v^3)`,
/// computed as `v / (1 + 2^x)` (the same function), `x = -2 log2(e) u =
/// v (K1 + K2 v^2)` (the constants folded: three f32 roundings), with
/// `ex2.approx.ftz` (relative error below 2^-22) and `rcp.approx.ftz` (1
/// ulp) times v. Within 2^-20 |v| of the true value. The flushes to zero
/// cost nothing here: 2^x below 2^-126 leaves 1 + 2^x = 1, and a reciprocal
/// below 2^-126 (v < -9.7) gives -0 for a true value below 1e-37. Large
/// |v| give v and -0; a NaN stays NaN, and so does -inf. Seven
/// instructions, two of them on the SFU (`div.approx` and `ex2.approx`
/// without `.ftz` took sixteen: ptxas scales subnormal arguments).
#[inline(always)]
pub fn gelu_f32(v: f32) -> f32 {
    const K1: f32 = (-2.0 * core::f64::consts::LOG2_E * SQRT_2_OVER_PI) as f32;
    const K2: f32 = (-2.0 * core::f64::consts::LOG2_E * SQRT_2_OVER_PI * 0.044_715) as f32;
    let x = v * <f32 as Element>::fma(K2, v * v, K1);
    let (e, r): (f32, f32);
    // SAFETY: register-to-register approximations.
    unsafe {
        asm!("ex2.approx.ftz.f32 {e}, {x};", e = out(reg32) e, x = in(reg32) x, options(pure, nomem, nostack));
        asm!("rcp.approx.ftz.f32 {r}, {d};", r = out(reg32) r, d = in(reg32) 1.0 + e, options(pure, nomem, nostack));
    };
    v * r
}

/// [`gelu_f32`]'s function with the SFU's `tanh.approx.f32` (relative
/// error about 2^-11, PTX ISA): `h + h tanh(u)`, `h = v / 2`, `u = v (K1
/// + K2 v^2)`. Within 2^-12 |v| of the true value (below half an ulp of v
/// in bf16 and f16; relative to the result, large where v < -2, the
/// result near 0); one SFU operation and five on the FMA pipes, where
/// [`gelu_f32`] takes two on the SFU, whose 16 results a clock per
/// multiprocessor bound a 16-bit product's fused epilogue. Stage 9 uses it
/// for 16-bit C (as NVIDIA's CUTLASS and TensorRT-LLM epilogues use this
/// instruction). Large v give v, large negative v +0 or -0; a NaN stays
/// NaN, and so does -inf.
#[inline(always)]
pub fn gelu_tanh_f32(v: f32) -> f32 {
    const K1: f32 = SQRT_2_OVER_PI as f32;
    const K2: f32 = (SQRT_2_OVER_PI * 0.044_715) as f32;
    let u = v * <f32 as Element>::fma(K2, v * v, K1);
    let t: f32;
    // SAFETY: a register-to-register approximation.
    unsafe { asm!("tanh.approx.f32 {t}, {u};", t = out(reg32) t, u = in(reg32) u, options(pure, nomem, nostack)) };
    let h = 0.5 * v;
    <f32 as Element>::fma(h, t, h)
}

/// [`gelu_f32`]'s function in f64: `v / (1 + exp(-2 u))` with
/// [`exp_f64`] (about 1 ulp; its argument kept at most 709, where the
/// denominator stays finite) and the quotient from `rcp.approx.ftz.f64`
/// refined by two Newton steps and one correction of the quotient (within
/// an ulp; no call to the IEEE division's slow path, which made ptxas
/// spill every live register around each element). Large positive v and
/// +inf give v; large negative v give -0 (true values below 1e-305 in
/// magnitude); a NaN stays NaN, and so does -inf.
#[inline(always)]
pub fn gelu_f64(v: f64) -> f64 {
    let fma = <f64 as Element>::fma;
    let u = SQRT_2_OVER_PI * (v + 0.044_715 * v * v * v);
    let x = -2.0 * u;
    let d = 1.0 + exp_f64(if x > 709.0 { 709.0 } else { x });
    let mut y: f64;
    // SAFETY: a register-to-register approximation.
    unsafe { asm!("rcp.approx.ftz.f64 {y}, {d};", y = out(reg64) y, d = in(reg64) d, options(pure, nomem, nostack)) };
    y = fma(y, fma(-d, y, 1.0), y);
    y = fma(y, fma(-d, y, 1.0), y);
    let q = v * y;
    let refined = fma(fma(-d, q, v), y, q);
    // An infinite v leaves a NaN residual: the quotient as it is.
    if refined == refined {
        refined
    } else {
        q
    }
}

/// `e^x` in f64 (no f64 exponential in PTX): x clamped to [-746, 710]
/// (beyond, e^x is 0 or infinite in f64), `x = n ln 2 + r` with `n`
/// the nearest integer to `x / ln 2` and `ln 2` in two parts (Cody and
/// Waite: `n ln2_hi` exact), `e^r` (|r| <= ln 2 / 2) by its Taylor series
/// to the 13th power (truncation below 2^-60), times `2^n` as two powers
/// of two (each a normal f64). A NaN stays NaN.
#[inline(always)]
pub fn exp_f64(x: f64) -> f64 {
    const LOG2_E: f64 = core::f64::consts::LOG2_E;
    const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
    // Adding and subtracting 1.5 x 2^52 rounds to the nearest integer.
    const ROUND: f64 = 6_755_399_441_055_744.0;
    let x = if x > 710.0 {
        710.0
    } else if x < -746.0 {
        -746.0
    } else {
        x
    };
    let n = (x * LOG2_E + ROUND) - ROUND;
    let fma = <f64 as Element>::fma;
    let r = fma(-n, LN2_LO, fma(-n, LN2_HI, x));
    // 1/13!, 1/12!, ..., 1/1!, 1/0!.
    const C: [f64; 14] = [
        1.0 / 6_227_020_800.0,
        1.0 / 479_001_600.0,
        1.0 / 39_916_800.0,
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
        1.0 / 40_320.0,
        1.0 / 5_040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ];
    let mut p = C[0];
    for &c in &C[1..] {
        p = fma(p, r, c);
    }
    // n in [-1077, 1025]: 2^n as 2^(n / 2) 2^(n - n / 2), each a normal
    // f64 (a NaN's n converts to 0, and p is NaN).
    let n = n as i32;
    let (n1, n2) = (n >> 1, n - (n >> 1));
    let pow2 = |e: i32| f64::from_bits(((e + 1023) as u64) << 52);
    p * pow2(n1) * pow2(n2)
}
