//! f64 and f32 products emulated on INT8 tensor cores (Ozaki scheme II):
//! the three kernels around the INT8 products, which stage 9 runs as one
//! strided batch over the moduli (`gemm_core::emulation` has the geometry).
//!
//! # Shapes (kernel form: C row-major, m x n)
//! A line is a row of A (length k) or a column of B (length k): element h of
//! line i is `x[i * line_stride + h * elem_stride]` (elements). The scaled
//! integers of A are `trunc(ldexp(A_ih, mu_i))`, of B
//! `trunc(ldexp(B_hj, nu_j))`; their residues modulo `p_l` are written as
//! K-major i8 matrices `lines x block_k`, one per modulus l and k block b,
//! matrix `l * blocks + b` (`gemm_core::emulation::k_blocks`). The INT8
//! products leave, for each (l, b), the i32 m x n matrix
//! `W[(l * blocks + b) * m * n ..]`, row-major with leading dimension n.
//!
//! # The kernels
//! * [`exponents`]: one warp per line, the scaling rule of the host's
//!   `gemm::emulation` in its order (the largest magnitude, then the sum of
//!   squares as 32 interleaved partial sums of fused multiply-adds in
//!   ascending h, combined by a butterfly), so that the exponents are the
//!   CPU reference's bit for bit. A line holding an Inf or NaN gets
//!   `NON_FINITE`.
//! * [`residues`]: a tile of 32 lines x 128 k through shared memory (reads
//!   coalesced along whichever of the two is contiguous), then 4 residues a
//!   thread per modulus as one 4-byte store; the moduli are compile-time
//!   constants (each `%` is a multiply and a shift).
//! * [`reconstruct`]: one thread per element of C: the N residues, the
//!   three-accumulator CRT of the host's `reconstruct`, the scaling back and
//!   the alpha/beta epilogue in f64. An element whose row of A or column of
//!   B is not finite is a plain dot product (fused multiply-adds in
//!   ascending h) instead, so Inf and NaN propagate as in the native
//!   product.
//!
//! Rust never contracts a multiply and an add into an fma (LLVM emits
//! `mul.rn` and `add.rn`, which ptxas keeps), so every rounding is the one
//! written.
//!
//! # Source
//! K. Ozaki, Y. Uchino, T. Imamura, "Ozaki Scheme II: A GEMM-oriented
//! emulation of floating-point matrix multiplication using an integer
//! modular technique", 2025; Y. Uchino, K. Ozaki, T. Imamura,
//! "High-Performance and Power-Efficient Emulation of Matrix Multiplication
//! using INT8 Matrix Engines", 2025 (the kernels' division of labour).

use crate::element::Element;
use crate::skinny::Acc;
use crate::thread::{block_idx, smem_base, sync_threads, thread_idx};
use core::arch::{asm, nvptx};
use gemm_core::emulation::{
    exponent_from_bound, exponent_from_sum, ilogb, ldexp, CrtConstants, BOUND_ROWS, BOUND_THREADS, COARSE_BITS,
    EXPONENT_LINES, EXPONENT_THREADS, MAX_MODULI, MODULI, NON_FINITE, RECONSTRUCT_THREADS, RESIDUE_K, RESIDUE_LINES,
    RESIDUE_THREADS, SUM_LANES,
};

/// An operand type of the emulation: f64, or f32 (widened exactly).
pub trait Real: Element {
    /// The value as an f64 (exact).
    fn to_f64(self) -> f64;
    /// An f64 rounded to this type (to nearest).
    fn from_f64(x: f64) -> Self;
}

impl Real for f64 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        x
    }
}

impl Real for f32 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_f64(x: f64) -> Self {
        x as f32
    }
}

/// The f64 of lane `lane ^ mask` (every lane of the warp executes it).
#[inline(always)]
unsafe fn shfl_f64(v: f64, mask: u32) -> f64 {
    <f64 as Acc>::shfl_xor(v, mask)
}

/// The i32 of lane `lane ^ mask` (every lane of the warp executes it).
#[inline(always)]
unsafe fn shfl_i32(v: i32, mask: u32) -> i32 {
    <i32 as Acc>::shfl_xor(v, mask)
}

/// `trunc(x)` (`cvt.rzi.f64.f64`).
#[inline(always)]
fn trunc(x: f64) -> f64 {
    let y: f64;
    // SAFETY: a register conversion.
    unsafe { asm!("cvt.rzi.f64.f64 {y}, {x};", y = out(reg64) y, x = in(reg64) x, options(pure, nomem, nostack)) };
    y
}

/// `x` rounded to the nearest integer, ties to even (`cvt.rni.f64.f64`).
#[inline(always)]
fn rint(x: f64) -> f64 {
    let y: f64;
    // SAFETY: a register conversion.
    unsafe { asm!("cvt.rni.f64.f64 {y}, {x};", y = out(reg64) y, x = in(reg64) x, options(pure, nomem, nostack)) };
    y
}

/// An integral f64 with `|x| < 2^63` as an i64 (`cvt.rzi.s64.f64`: exact).
#[inline(always)]
fn to_i64(x: f64) -> i64 {
    let y: i64;
    // SAFETY: a register conversion.
    unsafe { asm!("cvt.rzi.s64.f64 {y}, {x};", y = out(reg64) y, x = in(reg64) x, options(pure, nomem, nostack)) };
    y
}

/// `|x| mod (P1 P2)` for `|x| < 2^63`, negated modulo `P1 P2` where x is
/// negative: `x mod (P1 P2)` in `[0, P1 P2)`, `P1 P2 < 2^16`. `|x|` as
/// 32-bit halves, each reduced with a constant divisor; one such residue
/// serves two moduli.
#[inline(always)]
fn mod_pair<const Q: u32>(hi: u32, lo: u32, negative: bool) -> u32 {
    let two32 = ((1u64 << 32) % Q as u64) as u32;
    let q = ((hi % Q) * two32 + lo % Q) % Q; // (Q - 1)^2 + Q - 1 < 2^32
    if negative && q != 0 {
        Q - q
    } else {
        q
    }
}

/// The symmetric residue modulo the constant `P` of `q` in `[0, Q)`.
#[inline(always)]
fn sym_of<const P: u32>(q: u32) -> u32 {
    let r = q % P;
    let r = if r > (P - 1) / 2 { r as i32 - P as i32 } else { r as i32 };
    (r as u8) as u32
}

/// The symmetric residue modulo the constant `P` of an integer `x` with
/// `|x| < 2^31`, on the FP64 pipe: `q = rint(x / P)` (the product by
/// `1/P` is within `2^-21` of `x / P`, which lies at least `1/(2P)` from
/// a half-integer unless `P = 256`, where it is exact; `1.5 * 2^52` added
/// and taken away rounds to the nearest integer, ties to even), then
/// `x - q P` by an exact fma; for `P = 256`, `128` becomes `-128`. The
/// integer `sym_mod` of the host's reference, as an f64. `p` and `inv_p`
/// (`1/p` rounded to nearest) come from shared memory: as constants, the
/// compiler would hold all 40 in registers.
#[inline(always)]
fn sym_mod_f64(x: f64, p: f64, inv_p: f64) -> f64 {
    const ROUND: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
    let q = (x * inv_p + ROUND) - ROUND;
    let r = <f64 as Element>::fma(-q, p, x);
    if r == 128.0 {
        -128.0 // only p = 256 reaches 128
    } else {
        r
    }
}

/// Calls `$f!(index, first modulus, second modulus, their product)` for
/// each pair of consecutive entries of `gemm_core::emulation::MODULI`
/// (every product is below 2^16).
macro_rules! each_pair {
    ($f:ident) => {
        $f!(0, 256, 255, 65280);
        $f!(2, 253, 251, 63503);
        $f!(4, 247, 241, 59527);
        $f!(6, 239, 233, 55687);
        $f!(8, 229, 227, 51983);
        $f!(10, 223, 217, 48391);
        $f!(12, 211, 199, 41989);
        $f!(14, 197, 193, 38021);
        $f!(16, 191, 181, 34571);
        $f!(18, 179, 173, 30967);
    };
}

/// The largest magnitude of a line's elements `h = first, first + 32, ...`
/// (below `len`; element h at `line + h * elem_stride`) and whether they
/// are all finite (1) or not (0): one lane's (or warp class's) share of a
/// line in the exponent kernels.
#[inline(always)]
unsafe fn partial_max<T: Real>(line: *const T, (first, len, elem_stride): (u64, u64, u64)) -> (f64, u32) {
    let (mut amax, mut finite) = (0.0f64, 1u32);
    let mut h = first;
    while h < len {
        let v = T::ld_global(line.add((h * elem_stride) as usize)).to_f64();
        finite &= v.is_finite() as u32;
        let a = v.abs();
        if a > amax {
            amax = a;
        }
        h += SUM_LANES as u64;
    }
    (amax, finite)
}

/// The partial sum of squares of the same elements as [`partial_max`],
/// each scaled by `2^-e`: fused multiply-adds in ascending h (the host's
/// reference's partial sum `first`).
#[inline(always)]
unsafe fn partial_sum<T: Real>(line: *const T, (first, len, elem_stride): (u64, u64, u64), e: i32) -> f64 {
    let mut s = 0.0f64;
    let mut h = first;
    while h < len {
        let t = ldexp(T::ld_global(line.add((h * elem_stride) as usize)).to_f64(), -e);
        s = <f64 as Element>::fma(t, t, s);
        h += SUM_LANES as u64;
    }
    s
}

/// The scaling exponents of `lines` lines of length `len` (see the module
/// docs), for the scaling target `target`, into `out[..lines]`: one warp a
/// line, lane l over the elements `h = l, l + 32, ...` (the largest
/// magnitude, then its sum of squares by fused multiply-adds in ascending
/// h), the lanes' results combined by a butterfly (`shfl.sync.bfly` with
/// masks 16, 8, 4, 2, 1), as the host's reference does. With `coarse !=
/// 0` (the accurate mode's first pass), the line's coarse shift
/// `COARSE_BITS - ilogb(amax)` instead (0 for a zero line), without the sum
/// of squares.
///
/// # Safety
/// Launched with `EXPONENT_THREADS` threads a block (a multiple of 32);
/// every element of every line is readable global memory; `out` holds
/// `lines` writable i32.
#[inline(always)]
pub unsafe fn exponents<T: Real>(
    lines: u32,
    len: u64,
    x: *const T,
    (line_stride, elem_stride): (u64, u64),
    (target, coarse): (f64, u32),
    out: *mut i32,
) {
    let t = block_idx()[0] as u64 * EXPONENT_THREADS as u64 + thread_idx()[0] as u64;
    let (i, lane) = (t / SUM_LANES as u64, t % SUM_LANES as u64);
    if i >= lines as u64 {
        return; // the whole warp
    }
    let line = x.add((i * line_stride) as usize);
    let (mut amax, mut finite) = partial_max(line, (lane, len, elem_stride));
    for mask in [16, 8, 4, 2, 1] {
        let o = shfl_f64(amax, mask);
        if o > amax {
            amax = o;
        }
        finite &= shfl_i32(finite as i32, mask) as u32;
    }
    let e = if finite == 0 {
        NON_FINITE
    } else if amax == 0.0 {
        0
    } else if coarse != 0 {
        COARSE_BITS - ilogb(amax)
    } else {
        let e = ilogb(amax);
        let mut s = partial_sum(line, (lane, len, elem_stride), e);
        for mask in [16, 8, 4, 2, 1] {
            s = s + shfl_f64(s, mask);
        }
        exponent_from_sum(s, len, e, target)
    };
    if lane == 0 {
        *out.add(i as usize) = e;
    }
}

/// [`exponents`] for lines whose elements are not contiguous (a column of a
/// row-major B): a block of `EXPONENT_LINES` x 32 threads takes 32 lines,
/// warp c over the elements `h = c, c + 32, ...` with a lane per line (each
/// load coalesced across the lines), the same partial sums as
/// [`exponents`]'s lanes, combined by the same butterfly through shared
/// memory: the same bits.
///
/// # Safety
/// Launched with `EXPONENT_LINES * 32` threads a block and
/// `EXPONENT_STRIDED_SMEM_BYTES` of dynamic shared memory, a block per 32
/// lines; otherwise as [`exponents`].
#[inline(always)]
pub unsafe fn exponents_strided<T: Real>(
    lines: u32,
    len: u64,
    x: *const T,
    (line_stride, elem_stride): (u64, u64),
    (target, coarse): (f64, u32),
    out: *mut i32,
) {
    let tid = thread_idx()[0];
    let (c, lane) = (tid / 32, tid % 32);
    let line = block_idx()[0] * EXPONENT_LINES + lane;
    let live = line < lines;
    let base = x.add((line as u64 * line_stride) as usize);
    let smem = smem_base();
    // Tile [class][line] of f64, rows 33 apart; then [class][line] of u32.
    let at = |cls: u32, ln: u32| smem + (cls * 33 + ln) * 8;
    let flag_at = |cls: u32, ln: u32| smem + EXPONENT_LINES * 33 * 8 + (cls * 33 + ln) * 4;
    let (amax, finite) = if live { partial_max(base, (c as u64, len, elem_stride)) } else { (0.0, 1) };
    <f64 as Element>::st_shared(at(c, lane), amax);
    asm!("st.shared.u32 [{a}], {v};", a = in(reg32) flag_at(c, lane), v = in(reg32) finite, options(nostack));
    sync_threads();
    // Every thread reduces its line's 32 classes (max and and: any order).
    let (mut amax, mut finite) = (0.0f64, 1u32);
    for cls in 0..SUM_LANES as u32 {
        let o = <f64 as Element>::ld_shared(at(cls, lane));
        if o > amax {
            amax = o;
        }
        let f: u32;
        asm!("ld.shared.u32 {v}, [{a}];", v = out(reg32) f, a = in(reg32) flag_at(cls, lane), options(readonly, nostack));
        finite &= f;
    }
    sync_threads();
    let e = if finite == 0 || amax == 0.0 { 0 } else { ilogb(amax) };
    let s = if live && finite != 0 && amax != 0.0 && coarse == 0 {
        partial_sum(base, (c as u64, len, elem_stride), e)
    } else {
        0.0
    };
    <f64 as Element>::st_shared(at(c, lane), s);
    // The butterfly over the classes, as shfl.sync.bfly over lanes.
    let mut mask = SUM_LANES as u32 / 2;
    while mask > 0 {
        sync_threads();
        let sum = <f64 as Element>::ld_shared(at(c, lane)) + <f64 as Element>::ld_shared(at(c ^ mask, lane));
        sync_threads();
        <f64 as Element>::st_shared(at(c, lane), sum);
        mask /= 2;
    }
    if c == 0 && live {
        let e = if finite == 0 {
            NON_FINITE
        } else if amax == 0.0 {
            0
        } else if coarse != 0 {
            COARSE_BITS - e
        } else {
            exponent_from_sum(<f64 as Element>::ld_shared(at(0, lane)), len, e, target)
        };
        *out.add(line as usize) = e;
    }
}

/// The residues of a tile of `RESIDUE_LINES` lines by `RESIDUE_K` of k
/// (block (x, y): k from `x * RESIDUE_K`, lines from `y * RESIDUE_LINES`)
/// for the first `moduli` moduli, into the K-major i8 matrices of `out`
/// (see the module docs); elements past k or of a non-finite line are 0.
/// With `coarse != 0` (the accurate mode's first pass), `exps` holds coarse
/// shifts and the tile's coarse magnitudes (`gemm_core::emulation::coarse`,
/// in `0..=64`) go to the first `blocks` matrices instead of residues.
///
/// # Safety
/// Launched with `RESIDUE_THREADS` threads, `RESIDUE_SMEM_BYTES` of dynamic
/// shared memory and the grid of `gemm_core::emulation::residue_grid`; the
/// lines as for [`exponents`]; `exps` holds their exponents; `out` holds
/// `moduli * blocks` matrices of `lines x block_k` bytes, 4-byte aligned.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn residues<T: Real>(
    (lines, len): (u32, u64),
    x: *const T,
    (line_stride, elem_stride): (u64, u64),
    exps: *const i32,
    (moduli, coarse): (u32, u32),
    (blocks, block_k): (u32, u32),
    out: *mut u8,
) {
    let [bx, by, _] = block_idx();
    let tid = thread_idx()[0];
    let h0 = bx as u64 * RESIDUE_K as u64;
    let line0 = by * RESIDUE_LINES;
    let smem = smem_base();
    let row = RESIDUE_K + 1; // f64 elements from one line of the tile to the next
                             // Load: lanes along k where k is contiguous, else along the lines.
    let along_k = elem_stride == 1;
    let per = RESIDUE_LINES * RESIDUE_K / RESIDUE_THREADS;
    for it in 0..per {
        let idx = it * RESIDUE_THREADS + tid;
        let (ll, hl) =
            if along_k { (idx / RESIDUE_K, idx % RESIDUE_K) } else { (idx % RESIDUE_LINES, idx / RESIDUE_LINES) };
        let (line, h) = (line0 + ll, h0 + hl as u64);
        let mut t = 0.0f64;
        if line < lines && h < len {
            let e = *exps.add(line as usize);
            if e != NON_FINITE {
                let v = T::ld_global(x.add((line as u64 * line_stride + h * elem_stride) as usize)).to_f64();
                t = if coarse != 0 { gemm_core::emulation::coarse(v, e) as f64 } else { trunc(ldexp(v, e)) };
            }
        }
        <f64 as Element>::st_shared(smem + (ll * row + hl) * 8, t);
    }
    sync_threads();
    // Residues: 4 consecutive elements of k a thread, one 4-byte store per
    // modulus.
    let quads = RESIDUE_K / 4;
    let b = h0 / block_k as u64;
    let hb = (h0 % block_k as u64) as usize;
    let matrix = lines as usize * block_k as usize;
    for it in 0..(RESIDUE_LINES * quads / RESIDUE_THREADS) {
        let idx = it * RESIDUE_THREADS + tid;
        let (ll, q) = (idx / quads, idx % quads);
        let line = line0 + ll;
        if line >= lines {
            continue;
        }
        let at = smem + (ll * row + q * 4) * 8;
        let dst = out.add(b as usize * matrix + line as usize * block_k as usize + hb + q as usize * 4);
        if coarse != 0 {
            let mut word = 0u32;
            for j in 0..4u32 {
                word |= (<f64 as Element>::ld_shared(at + 8 * j) as u32) << (8 * j);
            }
            asm!("st.global.u32 [{p}], {v};", p = in(reg64) dst as *mut u32, v = in(reg32) word, options(nostack));
            continue;
        }
        let mut parts = [(0u32, 0u32, false); 4];
        for (j, part) in parts.iter_mut().enumerate() {
            let x = to_i64(<f64 as Element>::ld_shared(at + 8 * j as u32));
            let a = x.unsigned_abs();
            *part = ((a >> 32) as u32, a as u32, x < 0);
        }
        let step = blocks as usize * matrix;
        macro_rules! pair {
            ($l:literal, $p1:literal, $p2:literal, $q:literal) => {
                if $l < moduli {
                    let qs = parts.map(|(hi, lo, neg)| mod_pair::<$q>(hi, lo, neg));
                    macro_rules! word {
                        ($p:literal) => {
                            sym_of::<$p>(qs[0])
                                | sym_of::<$p>(qs[1]) << 8
                                | sym_of::<$p>(qs[2]) << 16
                                | sym_of::<$p>(qs[3]) << 24
                        };
                    }
                    let p = dst.add($l as usize * step) as *mut u32;
                    let w1 = word!($p1);
                    asm!("st.global.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) w1, options(nostack));
                    if $l + 1 < moduli {
                        let p = dst.add(($l + 1) as usize * step) as *mut u32;
                        let w2 = word!($p2);
                        asm!("st.global.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) w2, options(nostack));
                    }
                }
            };
        }
        each_pair!(pair);
    }
}

/// `C <- alpha * Chat + beta * C` over C's m x n (row-major, `ldc`), where
/// `Chat` is rebuilt from the `moduli * blocks` INT8 products `w` (see the
/// module docs) and the exponents `mu` (rows of A) and `nu` (columns of B);
/// an element whose row or column is `NON_FINITE` is the dot product of A's
/// row and B's column instead. `beta == 0` never reads C.
///
/// # Safety
/// Launched with `RECONSTRUCT_THREADS` threads a block and
/// `RECONSTRUCT_SMEM_BYTES` of dynamic shared memory; `crt` points to the
/// constants of `moduli` moduli in global memory (copied to shared memory);
/// `w`
/// holds the products; `mu`, `nu` the m and n exponents; A's rows and B's
/// columns are readable as for [`exponents`]; C is writable and does not
/// overlap them.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn reconstruct<T: Real>(
    (m, n, k): (u32, u32, u64),
    crt: *const CrtConstants,
    (moduli, blocks, w): (u32, u32, *const i32),
    (mu, nu): (*const i32, *const i32),
    (alpha, beta): (f64, f64),
    (c, ldc): (*mut T, u32),
    (a, a_strides): (*const T, (u64, u64)),
    (b, b_strides): (*const T, (u64, u64)),
) {
    let elems = m as u64 * n as u64;
    // SAFETY: reading special registers has no preconditions.
    let blocks_x = unsafe { nvptx::_grid_dim_x() } as u64;
    let step = blocks_x * RECONSTRUCT_THREADS as u64;
    let mut e = block_idx()[0] as u64 * RECONSTRUCT_THREADS as u64 + thread_idx()[0] as u64;
    // The constants into shared memory (read there with a broadcast: held
    // in registers, all 64 of them would leave room for one block an SM):
    // the struct's first 64 words, its f64 fields in order.
    let smem = smem_base();
    let tid = thread_idx()[0] as usize;
    if tid < CONSTANTS {
        let v: f64;
        asm!("ld.global.nc.f64 {v}, [{p}];", v = out(reg64) v, p = in(reg64) (crt as *const f64).add(tid),
             options(readonly, nostack));
        <f64 as Element>::st_shared(smem + 8 * tid as u32, v);
    } else if tid < CONSTANTS + MAX_MODULI {
        let p = MODULI[tid - CONSTANTS] as f64;
        <f64 as Element>::st_shared(smem + 8 * (PMOD + tid - CONSTANTS) as u32, p);
        <f64 as Element>::st_shared(smem + 8 * (INVMOD + tid - CONSTANTS) as u32, 1.0 / p);
    }
    sync_threads();
    while e < elems {
        let (i, j) = if elems <= u32::MAX as u64 {
            ((e as u32 / n) as u64, (e as u32 % n) as u64)
        } else {
            (e / n as u64, e % n as u64)
        };
        let (ei, ej) = (*mu.add(i as usize), *nu.add(j as usize));
        let value = if ei == NON_FINITE || ej == NON_FINITE {
            let (ra, rb) = (a.add((i * a_strides.0) as usize), b.add((j * b_strides.0) as usize));
            let mut s = 0.0f64;
            let mut h = 0u64;
            while h < k {
                let x = T::ld_global(ra.add((h * a_strides.1) as usize)).to_f64();
                let y = T::ld_global(rb.add((h * b_strides.1) as usize)).to_f64();
                s = <f64 as Element>::fma(x, y, s);
                h += 1;
            }
            s
        } else {
            // The moduli's first products, LOAD_GROUP at a time: loaded
            // before any of them is used (a load past the N-th rereads the
            // N-th, cached), so that the loads overlap.
            let stride = blocks as usize * elems as usize;
            let mut at = w.add(e as usize);
            let last = w.add(e as usize + (moduli as usize - 1) * stride);
            let (mut s1, mut s2, mut s3) = (0.0f64, 0.0f64, 0.0f64);
            let mut l = 0u32;
            while l < moduli {
                let mut group = [0i32; LOAD_GROUP];
                for f in group.iter_mut() {
                    *f = i32::ld_global_i32(if at < last { at } else { last });
                    at = at.add(stride);
                }
                for (j, &f) in group.iter().enumerate() {
                    let m = l + j as u32;
                    if m < moduli {
                        let (p, inv) = (constant(smem, PMOD + m as usize), constant(smem, INVMOD + m as usize));
                        let mut r = sym_mod_f64(f as f64, p, inv);
                        let mut bb = 1u64;
                        while bb < blocks as u64 {
                            let v = i32::ld_global_i32(w.add(((m as u64 * blocks as u64 + bb) * elems + e) as usize));
                            r = sym_mod_f64(r + sym_mod_f64(v as f64, p, inv), p, inv);
                            bb += 1;
                        }
                        s1 = <f64 as Element>::fma(r, constant(smem, W1 + m as usize), s1);
                        s2 = <f64 as Element>::fma(r, constant(smem, W2 + m as usize), s2);
                        s3 = <f64 as Element>::fma(r, constant(smem, W3 + m as usize), s3);
                    }
                }
                l += LOAD_GROUP as u32;
            }
            let q = rint(s1 * constant(smem, INV_P));
            let z1 = <f64 as Element>::fma(-q, constant(smem, P1), s1);
            let z2 = <f64 as Element>::fma(-q, constant(smem, P2), s2);
            let z3 = <f64 as Element>::fma(-q, constant(smem, P3), s3);
            // TwoSum(z1, z2).
            let hs = z1 + z2;
            let bv = hs - z1;
            let err = (z1 - (hs - bv)) + (z2 - bv);
            let zhat = hs + (err + z3);
            ldexp(zhat, -(ei + ej))
        };
        let p = c.add((i * ldc as u64 + j) as usize);
        let out = if beta == 0.0 {
            alpha * value
        } else {
            <f64 as Element>::fma(beta, T::ld_global(p).to_f64(), alpha * value)
        };
        T::st_global(p, T::from_f64(out));
        e += step;
    }
}

/// The accurate mode's bound pass over a `rows x n` panel of the coarse
/// product (the INT8 product of the coarse magnitudes): `u` holds its
/// `blocks` i32 matrices (one per k block, row-major, leading dimension
/// n); the largest sum over the blocks of each row goes to `row_max` (the
/// panel's rows) and of each column to `col_max`, as f64 (exact: below
/// 2^53), by atomic maxima on their bits (`red.max.u64`: non-negative
/// doubles order as their bits do), the same values in any order. Block (x, y) takes `BOUND_ROWS` rows from `y
/// * BOUND_ROWS` and `BOUND_THREADS` columns from `x * BOUND_THREADS`, a
/// thread a column; a row's maximum goes through a warp's butterfly, then
/// shared memory.
///
/// # Safety
/// Launched with `BOUND_THREADS` threads, `BOUND_SMEM_BYTES` of dynamic
/// shared memory and the grid of `gemm_core::emulation::bound_grid`; `u`
/// holds `blocks * rows * n` non-negative i32 whose sums are below 2^53;
/// `row_max` holds `rows` and `col_max` `n` writable non-negative f64.
#[inline(always)]
pub unsafe fn bound_max(rows: u32, n: u32, blocks: u32, u: *const i32, row_max: *mut f64, col_max: *mut f64) {
    let [bx, by, _] = block_idx();
    let tid = thread_idx()[0];
    let (warp, lane) = (tid / 32, tid % 32);
    let j = bx * BOUND_THREADS + tid;
    let r0 = by * BOUND_ROWS;
    let smem = smem_base(); // [warp][row] f64
    let plane = rows as u64 * n as u64;
    let mut col = 0u64;
    for r in 0..BOUND_ROWS {
        let i = r0 + r;
        let mut v = 0u64;
        if i < rows && j < n {
            let mut bb = 0u32;
            while bb < blocks {
                let at = bb as u64 * plane + i as u64 * n as u64 + j as u64;
                v += i32::ld_global_i32(u.add(at as usize)) as u32 as u64;
                bb += 1;
            }
        }
        if v > col {
            col = v;
        }
        // The row's maximum over the warp (exact as f64: below 2^53).
        let mut w = v as f64;
        for mask in [16, 8, 4, 2, 1] {
            let o = shfl_f64(w, mask);
            if o > w {
                w = o;
            }
        }
        if lane == 0 {
            <f64 as Element>::st_shared(smem + (warp * BOUND_ROWS + r) * 8, w);
        }
    }
    sync_threads();
    if tid < BOUND_ROWS && r0 + tid < rows {
        let mut best = 0.0f64;
        for wi in 0..BOUND_THREADS / 32 {
            let o = <f64 as Element>::ld_shared(smem + (wi * BOUND_ROWS + tid) * 8);
            if o > best {
                best = o;
            }
        }
        if best > 0.0 {
            let p = row_max.add((r0 + tid) as usize);
            asm!("red.global.max.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) best.to_bits(), options(nostack));
        }
    }
    if j < n && col > 0 {
        let p = col_max.add(j as usize);
        let v = (col as f64).to_bits();
        asm!("red.global.max.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v, options(nostack));
    }
}

/// The accurate mode's exponents: line i's coarse shift `exps[i]` becomes
/// `exponent_from_bound(maxes[i], exps[i], target)` (`NON_FINITE` stays),
/// a thread a line.
///
/// # Safety
/// Launched with `BOUND_THREADS` threads a block and at least `lines`
/// threads; `maxes` holds `lines` integral f64 in `[0, 2^53)` (from
/// [`bound_max`]) and `exps` `lines` writable i32.
#[inline(always)]
pub unsafe fn bound_exponents(lines: u32, maxes: *const f64, target: f64, exps: *mut i32) {
    let i = block_idx()[0] as usize * BOUND_THREADS as usize + thread_idx()[0] as usize;
    if i < lines as usize {
        let c = *exps.add(i);
        if c != NON_FINITE {
            *exps.add(i) = exponent_from_bound(*maxes.add(i) as u64, c, target);
        }
    }
}

/// Entry point: [`bound_max`].
///
/// # Safety
/// As [`bound_max`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn emulation_bound_max(
    rows: u32,
    n: u32,
    blocks: u32,
    u: *const i32,
    row_max: *mut f64,
    col_max: *mut f64,
) {
    bound_max(rows, n, blocks, u, row_max, col_max)
}

/// Entry point: [`bound_exponents`].
///
/// # Safety
/// As [`bound_exponents`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn emulation_bound_exponents(
    lines: u32,
    maxes: *const f64,
    target: f64,
    exps: *mut i32,
) {
    bound_exponents(lines, maxes, target, exps)
}

/// Products the reconstruction loads before it uses any of them.
const LOAD_GROUP: usize = 8;

/// Where the reconstruction keeps each constant in shared memory (f64
/// index): the three weight parts, `1/P` and the three parts of `P`.
/// The layout of `CrtConstants`' f64 fields (`#[repr(C)]`).
const W1: usize = 0;
const W2: usize = MAX_MODULI;
const W3: usize = 2 * MAX_MODULI;
const P1: usize = 3 * MAX_MODULI;
const P2: usize = P1 + 1;
const P3: usize = P1 + 2;
const INV_P: usize = P1 + 3;
/// The constants read from `CrtConstants`.
const CONSTANTS: usize = INV_P + 1;
/// The moduli as f64, then their inverses (rounded to nearest).
const PMOD: usize = CONSTANTS;
const INVMOD: usize = PMOD + MAX_MODULI;

/// Constant `index` of the reconstruction from shared memory.
#[inline(always)]
fn constant(smem: u32, index: usize) -> f64 {
    // SAFETY: the constants were stored at the start of the block's shared
    // memory before the barrier that precedes every read.
    unsafe { <f64 as Element>::ld_shared(smem + 8 * index as u32) }
}

/// A global i32 load (the INT8 products' results).
trait LoadI32 {
    /// `ld.global.nc.s32`.
    unsafe fn ld_global_i32(p: *const i32) -> i32;
}

impl LoadI32 for i32 {
    #[inline(always)]
    unsafe fn ld_global_i32(p: *const i32) -> i32 {
        let v: i32;
        asm!("ld.global.nc.s32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) p, options(readonly, nostack));
        v
    }
}

macro_rules! export {
    ($t:ty, $exp:ident, $strided:ident, $res:ident, $rec:ident) => {
        /// Entry point: [`exponents`] of this operand type.
        ///
        /// # Safety
        /// As [`exponents`], with `EXPONENT_THREADS` threads a block.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $exp(
            lines: u32,
            len: u64,
            x: *const $t,
            line_stride: u64,
            elem_stride: u64,
            target: f64,
            coarse: u32,
            out: *mut i32,
        ) {
            exponents::<$t>(lines, len, x, (line_stride, elem_stride), (target, coarse), out)
        }

        /// Entry point: [`exponents_strided`] of this operand type.
        ///
        /// # Safety
        /// As [`exponents_strided`].
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $strided(
            lines: u32,
            len: u64,
            x: *const $t,
            line_stride: u64,
            elem_stride: u64,
            target: f64,
            coarse: u32,
            out: *mut i32,
        ) {
            exponents_strided::<$t>(lines, len, x, (line_stride, elem_stride), (target, coarse), out)
        }

        /// Entry point: [`residues`] of this operand type.
        ///
        /// # Safety
        /// As [`residues`].
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $res(
            lines: u32,
            len: u64,
            x: *const $t,
            line_stride: u64,
            elem_stride: u64,
            exps: *const i32,
            moduli: u32,
            coarse: u32,
            blocks: u32,
            block_k: u32,
            out: *mut u8,
        ) {
            residues::<$t>((lines, len), x, (line_stride, elem_stride), exps, (moduli, coarse), (blocks, block_k), out)
        }

        /// Entry point: [`reconstruct`] of this operand type.
        ///
        /// # Safety
        /// As [`reconstruct`], with `RECONSTRUCT_THREADS` threads a block.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $rec(
            m: u32,
            n: u32,
            k: u64,
            crt: *const CrtConstants,
            moduli: u32,
            blocks: u32,
            w: *const i32,
            mu: *const i32,
            nu: *const i32,
            alpha: f64,
            beta: f64,
            c: *mut $t,
            ldc: u32,
            a: *const $t,
            a_line: u64,
            a_elem: u64,
            b: *const $t,
            b_line: u64,
            b_elem: u64,
        ) {
            reconstruct::<$t>(
                (m, n, k),
                crt,
                (moduli, blocks, w),
                (mu, nu),
                (alpha, beta),
                (c, ldc),
                (a, (a_line, a_elem)),
                (b, (b_line, b_elem)),
            )
        }
    };
}

export!(
    f64,
    emulation_exponents_f64,
    emulation_exponents_strided_f64,
    emulation_residues_f64,
    emulation_reconstruct_f64
);
export!(
    f32,
    emulation_exponents_f32,
    emulation_exponents_strided_f32,
    emulation_residues_f32,
    emulation_reconstruct_f32
);
