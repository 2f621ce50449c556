//! Host-side numerics of **Ozaki scheme II**: emulation of an `f64` matrix
//! product `C = A B` (`A` is `m x k`, `B` is `k x n`) with `N` exact INT8
//! matrix products and the Chinese remainder theorem (CRT).
//!
//! Sources:
//! * K. Ozaki, Y. Uchino, T. Imamura, *"Ozaki Scheme II: A GEMM-oriented
//!   emulation of floating-point matrix multiplication using an integer
//!   modular technique"*, 2025, arXiv:2504.08009.
//! * Y. Uchino, K. Ozaki, T. Imamura, *"High-Performance and Power-Efficient
//!   Emulation of Matrix Multiplication using INT8 Matrix Engines"*, SC '25,
//!   2025, arXiv:2508.03984.
//!
//! The GPU runs it with [`Gemm::emulation`](crate::Gemm::emulation) and an
//! [`Emulation`]. This module holds its numerics: the CRT constants the
//! kernels need ([`Moduli`], [`CrtConstants`]; the moduli and the exact
//! scaling rules live in `gemm_core::emulation`, shared with the kernels),
//! the rules that fix every rounding, and [`emulate_dgemm_cpu`], a CPU
//! version of the whole scheme. The GPU kernels match that CPU version bit
//! for bit (`tests/gpu_emulation.rs`). The exact integer arithmetic behind
//! the constants is done once, in [`Moduli::new`]; the API itself only deals
//! in `f64`, `i64`, `i32`, `i8` and `u32` values.
//!
//! # The scheme (and the order of operations a GPU must follow)
//!
//! Notation: `u = 2^-53` (unit roundoff of `f64`), `p_1..p_N` are the first `N`
//! entries of [`MODULI`], `P = p_1 * ... * p_N`, `ldexp(x, e) = x * 2^e`
//! rounded once (see [`ldexp`]), and `fma` is a fused multiply-add.
//!
//! 1. **Scaling exponents** ("fast" mode, [`row_exponents`],
//!    [`col_exponents`]; the accurate mode's are in
//!    [its own section](#the-accurate-mode)). Each row `i` of `A` gets an integer `mu_i`, and each
//!    column `j` of `B` gets an integer `nu_j`, by the rule in
//!    [the scaling rule](#the-scaling-rule-step-1). It guarantees that
//!    `||A'_i||_2 * ||B'_j||_2 < T <= P/2 - P*2^-24`, where `T` is
//!    [`Moduli::scaling_target`]. By Cauchy–Schwarz,
//!    `sum_h |A'_ih| |B'_hj| < P/2 - P*2^-24`.
//! 2. **Integers**: `A'_ih = trunc(ldexp(A_ih, mu_i))` and
//!    `B'_hj = trunc(ldexp(B_hj, nu_j))` ([`scale_to_int`]). These are exact
//!    integers with `|.| < 2^63`, held as `i64`.
//! 3. **Residues**: `A'_l = A' mod p_l` and `B'_l = B' mod p_l`, taken
//!    *symmetrically* ([`Moduli::residues`]): the residue lies in
//!    `[-128, 127]` for `p = 256` and in `[-(p-1)/2, (p-1)/2]` for odd `p`,
//!    so it fits in `i8`.
//! 4. **INT8 products**: `C_l = A'_l B'_l`, accumulated exactly in `i32` over
//!    at most [`MAX_K_PER_PRODUCT`] terms. A longer `k` is split into blocks.
//!    Each block's `i32` result is reduced symmetrically modulo `p_l`, and the
//!    reduced blocks are summed. All of this is exact integer arithmetic, so
//!    any blocking or order gives the same residues.
//! 5. **Reconstruction** ([`reconstruct`]): an `f64`-only CRT. It turns the
//!    `N` residues of an entry into `Zhat`, which approximates
//!    `Z = (A'B')_ij`.
//! 6. **Unscaling**: `C_ij = ldexp(Zhat, -(mu_i + nu_j))`.
//!
//! Integer steps (2–4) are exact, so they are the same in any evaluation
//! order. The `f64` steps that must be evaluated exactly as written are:
//! * the sum of squares in the scaling rule: 32 interleaved partial sums,
//!   each by `fma` in ascending index, combined by a fixed butterfly;
//! * the whole of [`reconstruct`], which has no free choices;
//! * the final [`ldexp`].
//!
//! The plain operations must not be contracted into FMAs: Rust never
//! contracts (the GPU kernels are Rust too, and LLVM writes `mul.rn` and
//! `add.rn`, which ptxas keeps). A different summation order for the norm is still *safe*: the margin covers
//! any order. It may, however, give a different exponent in rare boundary
//! cases, and then the results are no longer bit-identical.
//!
//! # The scaling rule (step 1)
//!
//! For one line `x` of length `k` (a row of `A` or a column of `B`) and the
//! target `T` ([`Moduli::scaling_target`]), in this exact order:
//! 1. `amax = max_h |x_h|`, checking that every element is finite (else
//!    [`EmulationError::NonFinite`]). If `amax == 0`, the exponent is `0`.
//! 2. `E = ilogb(amax)`, so `amax` lies in `[2^E, 2^(E+1))`.
//! 3. `s_l = 0` for the 32 lanes `l`; for `h = 0..k` in ascending order:
//!    `t = ldexp(x_h, -E)`, then `s_l = fma(t, t, s_l)` with `l = h % 32`.
//!    Then `s` is their butterfly sum: for masks 16, 8, 4, 2, 1, every
//!    `s_l` becomes `s_l + s_(l ^ mask)`; `s = s_0`
//!    (`gemm_core::emulation::butterfly_sum`: what one warp computes, a
//!    lane per partial sum).
//! 4. `s_up = fl(s * F_k)`, where `F_k = 1 + (k + 4) 2^-52` is exact.
//! 5. `g` is the largest integer with `s_up 4^g <= T`, found exactly: write
//!    `s_up = ms 2^es` and `T = mt 2^et` with `ms, mt` in `[1, 2)`, and let
//!    `d = et - es`. Then `g = floor(d/2)`, minus one if `2g == d` and
//!    `ms > mt`.
//! 6. `mu = min(g - E, 62 - E)`.
//!
//! # Why the scaling is safe
//!
//! Let `t_h = ldexp(x_h, -E)`, so that `max |t_h|` lies in `[1, 2)`. The proof
//! that `s_up` bounds the true sum of squares:
//! * Any summation order has `|s - sum t~_h^2| <= gamma_k sum t~_h^2`, where
//!   `gamma_k = k u / (1 - k u)`.
//! * A `t~_h` that is rounded (only when it underflows) is off by at most
//!   `2^-1075`.
//! * An `fma` that underflows adds at most `2^-1074` absolute error.
//! * Since `s >= 1` (it contains `t_max^2 >= 1`), these absolute errors
//!   amount to less than `k 2^-1069 s`.
//! * Hence `sum t_h^2 <= s (1 + 1.01 k u + k 2^-1069) < s F_k (1 - u) <= s_up`
//!   for `k <= 2^40` ([`MAX_K`]).
//!
//! Then, with `g` the largest integer with `s_up 4^g <= T`:
//! * `||x 2^mu||_2^2 = 4^(mu+E) sum t_h^2 < 4^g s_up <= T`. Truncation only
//!   shrinks magnitudes, so `||trunc(x 2^mu)||_2^2 < T`. For a row and a
//!   column, the product of the two norms is then `< T`.
//! * `max |x 2^mu| < 2^(E+1) 2^(62-E) = 2^63`, so every `A'` fits in `i64`.
//!   The cap is never active for `N <= 16`, where `sqrt(T) < 2^62.2`.
//! * A zero line gets exponent 0 (its integers are all 0).
//! * Maximality of `g` gives `2^mu ||x||_2 >= sqrt(T)/2 (1 - (3k+10)u)` unless
//!   the cap is active.
//! * For finite input, `mu` lies in `[-1040, 1140]`
//!   (see [`MIN_EXPONENT`], [`MAX_EXPONENT`]).
//!
//! # The accurate mode
//!
//! [`Mode::Accurate`] ([`accurate_exponents`]) replaces step 1 by a bound on
//! `|A| |B|` itself rather than on the product of two norms:
//! 1. Each line gets the coarse shift `c = 5 - ilogb(amax)` (0 for a zero
//!    line; a non-finite line is as in the fast mode), and each element the
//!    coarse magnitude `abar = ceil(|x| 2^c)`, at least 1 where `x != 0`
//!    (`gemm_core::emulation::coarse`): `|x| 2^c <= abar <= 64`.
//! 2. `U = Abar Bbar`, exactly (one more INT8 product: its terms are at most
//!    `2^12`, so a k block's sum stays below `2^31`, and all of `U` below
//!    `2^52` for `k <= MAX_K`). Then
//!    `sum_h |A_ih| |B_hj| <= U_ij 2^-(c_i + c'_j)`.
//! 3. `R_i = max_j U_ij`, `S_j = max_i U_ij`; `g_i` is the largest integer
//!    with `R_i 4^g_i <= T` (exact, `gemm_core::emulation::quarter_power`),
//!    `h_j` likewise with `S_j`, and `mu_i = min(g_i, 57) + c_i`,
//!    `nu_j = min(h_j, 57) + c'_j` (`exponent_from_bound`). A line whose
//!    `R_i` is 0 touches no nonzero term of any entry of C: it gets
//!    `min(0, 57 + c_i)`.
//!
//! **Why it is safe.** `U_ij <= min(R_i, S_j) <= sqrt(R_i S_j)`, so
//! `sum_h |A'_ih| |B'_hj| <= 2^(mu_i + nu_j) sum_h |A_ih| |B_hj|
//! <= 2^(g_i + h_j) U_ij <= sqrt(T/R_i) sqrt(T/S_j) sqrt(R_i S_j) = T`,
//! the reconstruction's range. The cap 57 keeps `|A'| < 2^63` as in the
//! fast mode, and `mu` stays in [`MIN_EXPONENT`]`..=`[`MAX_EXPONENT`].
//!
//! **What it gains.** The fast mode's scales satisfy
//! `||a_i|| ||b_j|| < T`; the accurate mode's `sqrt(R_i S_j) <~ T`, where
//! `R_i` is row i's largest entry of `|A||B|` (up to the 6-bit rounding
//! of the magnitudes). For inputs whose large elements meet (uniform
//! magnitudes) the two differ by a fraction of a bit; for spread exponents
//! (the Ozaki papers' phi >= 1) `|A||B|` falls far below the norms'
//! product and the accurate mode keeps more bits per modulus. Its cost is
//! one INT8 product and two passes over `U` (measured in
//! `docs/benchmarks.md`).
//!
//! # Reconstruction and its error bound (step 5)
//!
//! Let `w_l = (M_l y_l) mod P`, where `M_l = P/p_l` and
//! `y_l = M_l^{-1} mod p_l`. The weights are split as
//! `w_l = w1_l + w2_l + w3_l` (see [`CrtConstants`]):
//! * `w1_l` is a multiple of `2^t1` and `w2_l` a multiple of `2^t2`. The grid
//!   exponents `t1`, `t2` are the smallest for which every sum and `fma`
//!   marked *exact* below is provably exact (checked in exact integer
//!   arithmetic when [`Moduli::new`] runs).
//! * `w3_l` is the rest, rounded to nearest `f64` (`|w3_l| <= 2^(t2-1)`).
//!
//! `P` is split the same way: `P = P1 + P2 + P3`. `inv_p` is `1/P` rounded
//! to nearest. With residues `r_l` (`|r_l| <= 128`), [`reconstruct`] computes:
//!
//! ```text
//! s1 = s2 = s3 = 0
//! for l in 0..N (ascending):
//!     s1 = fma(r_l, w1_l, s1)         // exact
//!     s2 = fma(r_l, w2_l, s2)         // exact
//!     s3 = fma(r_l, w3_l, s3)         // rounded
//! q  = rint(s1 * inv_p)               // round half to even
//! z1 = fma(-q, P1, s1)                // exact
//! z2 = fma(-q, P2, s2)                // exact
//! z3 = fma(-q, P3, s3)                // rounded
//! (h, e) = TwoSum(z1, z2)             // exact: h + e = z1 + z2
//! Zhat = h + (e + z3)
//! ```
//!
//! Below, `t1` is [`CrtConstants::grid1`] and `t2` is [`CrtConstants::grid2`].
//!
//! **Theorem.** If
//! `|Z| <= (1/2 - 2^-24) P` (which step 1 guarantees), then `q` is exactly the
//! CRT quotient, and
//!
//! ```text
//! |Zhat - Z| <= (u + 2u^2) |Z| + R,
//! R = (N + 4) u (128 N + qmax) 2^(t2-1)
//! ```
//!
//! Here `qmax = floor(128 sum_l w_l / P) + 1 <= 128 N + 1`
//! ([`Moduli::qmax`]).
//!
//! *Proof sketch.* Let `S = sum_l r_l w_l = s1 + s2 + s3e`, where `s3e` is the
//! exact `sum_l r_l w3e_l` with the unrounded `w3e_l`. Then `Z = S - qP`.
//! 1. *Exactness.* Every partial sum of `s1` is a multiple of `2^t1`, and its
//!    magnitude is at most `128 sum|w1_l| <= 2^(53+t1)`, so it is
//!    representable. The same holds for `s2` with `t2`. Next,
//!    `z1 = s1 - qP1 = Z - (S - s1) + q(P - P1)` is a multiple of `2^t1`
//!    with `|z1| <= P/2 + (128N + qmax) 2^(t1-1) <= 2^(53+t1)`. Likewise,
//!    `|z2| <= 128 sum|w2_l| + qmax |P2| <= 2^(53+t2)`. [`Moduli::new`]
//!    picks `t1` and `t2` by checking these inequalities in exact integer
//!    arithmetic.
//! 2. *Quotient.* The error bound is
//!    `|fl(s1 inv_p) - S/P| <= (2u + u^2) 128 sum w1_l / P + 128 N 2^(t1-1) / P < 2^-31`.
//!    Since `S/P = q + Z/P` with `|Z/P| <= 1/2 - 2^-24`, `rint` returns `q`.
//! 3. *Rounding.* Write `z1 + z2 + zeta3 = Z` with
//!    `zeta3 = s3e - q P3e`. The computed `z3` differs from `zeta3` by at most
//!    `E3 = (N + 2.1) u (128N + qmax) 2^(t2-1)`. This covers the rounding of
//!    `w3` and `P3`, the `gamma_N` of the `fma` chain, and the rounding of
//!    `z3`. TwoSum is exact. The two final additions add
//!    `u|Z| + u^2 (|Z| + |zeta3|) + u|zeta3|`. Since
//!    `|zeta3| <= (128N + qmax) 2^(t2-1)`, this sums to the stated bound.
//!
//! [`Moduli::reconstruction_abs_bound`] returns `R`. Numerically:
//! * For `N <= 10`, `grid2 = 0`, so `w3 = p3 = 0` and `R < 2^-37`: only the
//!   final rounding of `Z` remains.
//! * For `N >= 11`, `R < 2^-121 P`. At `N = 20`, `R ~ 2^32.5` while
//!   `P ~ 2^155.4`.
//!
//! So `Zhat` is `Z` correctly rounded, up to a relative `2u^2` and a
//! negligible absolute term. In terms of `P` and `N` alone (using `|Z| < P/2`):
//!
//! ```text
//! |Zhat - Z| <= (u/2 + u^2) P + R <= 2^-54 (1 + 2^-52) P + max(2^-37, 2^-121 P)
//! ```
//!
//! This holds for every `2 <= N <= 20`. The quotient test has margin:
//! `|s1 inv_p - S/P| <= 2^-31` for all `N` (see
//! [`Moduli::quotient_error_bound`]), against the `2^-24` guaranteed by
//! scaling.
//!
//! # Error bound of the whole emulation
//!
//! Write `rho_i = 2^-mu_i`, `sigma_j = 2^-nu_j`, `a_i` for row `i` of `A`, and
//! `b_j` for column `j` of `B`. Truncation gives `A'_ih = A_ih/rho_i - alpha`
//! with `|alpha| < 1`, and likewise for `B`. Then, if no result underflows,
//!
//! ```text
//! |Chat_ij - C_ij| <= (u + 2u^2) |C_ij|
//!                   + (1 + u + 2u^2) (rho_i ||b_j||_1 + sigma_j ||a_i||_1 + k rho_i sigma_j)
//!                   + rho_i sigma_j R
//! ```
//!
//! Away from the `i64` cap, `rho_i <= 2 ||a_i||_2 / sqrt(T) (1 + O(ku))` and
//! `T ~ P/2`. With `||.||_1 <= sqrt(k) ||.||_2`, this becomes
//!
//! ```text
//! |Chat_ij - C_ij| <~ u |C_ij| + 4 sqrt(2k/P) ||a_i||_2 ||b_j||_2   (+ O(k/P) terms)
//! ```
//!
//! How it shrinks with `N`:
//! * Each extra modulus multiplies `P` by `p_l ~ 2^7.4 .. 2^8`. The truncation
//!   term therefore shrinks by about `2^3.7 .. 2^4` per modulus: about 4 more
//!   bits kept in each operand.
//! * At `N = 14, 15, 16`, `log2 P = 110.2, 117.8, 125.4`.
//! * For `N >= 17`, the `i64` cap `|A'| < 2^63` may bind for short or spiky
//!   lines. Then `rho_i <= 2^-62 max_h |A_ih|`, and the truncation error stops
//!   improving. It is already below the `f64` rounding of the result.
//!
//! The bound is per entry, relative to `||a_i|| ||b_j||`, not to `|C_ij|`.
//! When a dot product cancels, the relative error can be larger. This is
//! inherent to Ozaki schemes.
//!
//! # Example
//!
//! ```
//! use gemm::emulation::{emulate_dgemm_cpu, Moduli};
//! let moduli = Moduli::new(16)?;
//! let a = [1.0, 2.0, 3.0, 4.0]; // m x k = 2 x 2, row-major
//! let b = [0.5, -1.0, 0.25, 8.0]; // k x n = 2 x 2, row-major
//! let c = emulate_dgemm_cpu(2, 2, 2, &a, &b, &moduli)?;
//! assert_eq!(c, vec![1.0, 15.0, 2.5, 29.0]);
//! # Ok::<(), gemm::emulation::EmulationError>(())
//! ```

use gemm_core::Layout;
use std::fmt;

use num_bigint::{BigInt, BigUint, Sign};
use num_integer::Integer;
use num_traits::{One, ToPrimitive, Zero};

// ---------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------

pub use gemm_core::emulation::{CrtConstants, MAX_K_PER_PRODUCT, MAX_MODULI, MIN_MODULI, MODULI};

/// Largest inner dimension `k` that the scaling margin is proven for (`2^40`).
///
/// [`row_exponents`], [`col_exponents`] and [`emulate_dgemm_cpu`] return
/// [`EmulationError::InvalidDimensions`] for a longer `k`.
pub const MAX_K: usize = 1usize << 40;

/// Smallest scaling exponent [`row_exponents`] and [`col_exponents`] can
/// return for finite input.
///
/// Together with [`MAX_EXPONENT`], this means an `i16` can hold any exponent.
pub const MIN_EXPONENT: i32 = -1100;

/// Largest scaling exponent [`row_exponents`] and [`col_exponents`] can return
/// for finite input.
pub const MAX_EXPONENT: i32 = 1200;

/// The reconstruction margin: scaling guarantees `|Z| <= (1/2 - 2^-24) P`.
pub const RECONSTRUCTION_MARGIN_LOG2: u32 = 24;

/// Unit roundoff `u = 2^-53`.
const U: f64 = 1.0 / 9_007_199_254_740_992.0;

/// `2^63`, the bound on the scaled integers.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Which kind of matrix line an [`EmulationError`] refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Line {
    /// A row of `A` (index = row index `i`, `0 <= i < m`).
    RowOfA,
    /// A column of `B` (index = column index `j`, `0 <= j < n`).
    ColumnOfB,
}

/// Errors of the Ozaki scheme II host functions.
///
/// # Example
/// ```
/// use gemm::emulation::{EmulationError, Moduli};
/// assert_eq!(Moduli::new(1), Err(EmulationError::UnsupportedModuliCount { n: 1 }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmulationError {
    /// The number of moduli is outside [`MIN_MODULI`]`..=`[`MAX_MODULI`].
    UnsupportedModuliCount {
        /// The requested number of moduli.
        n: usize,
    },
    /// The line holds an `Inf` or `NaN`, so it cannot be scaled to integers.
    NonFinite {
        /// Row of `A` or column of `B`.
        line: Line,
        /// Its index.
        index: usize,
    },
    /// The scaling exponent lies outside [`MIN_EXPONENT`]`..=`[`MAX_EXPONENT`].
    ///
    /// This is a defensive check: it cannot happen for finite `f64` input.
    ExponentOutOfRange {
        /// Row of `A` or column of `B`.
        line: Line,
        /// Its index.
        index: usize,
        /// The offending exponent.
        exponent: i32,
    },
    /// A slice is too short (or, for [`reconstruct`], not `N` long), a leading
    /// dimension is too small, `k > MAX_K`, or a size overflows `usize` or
    /// cannot be allocated.
    InvalidDimensions(&'static str),
}

impl fmt::Display for EmulationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmulationError::UnsupportedModuliCount { n } => {
                write!(f, "{n} moduli requested; Ozaki scheme II supports {MIN_MODULI} to {MAX_MODULI}")
            }
            EmulationError::NonFinite { line, index } => {
                write!(f, "{line:?} {index} contains Inf or NaN; not representable by Ozaki scheme II")
            }
            EmulationError::ExponentOutOfRange { line, index, exponent } => {
                write!(f, "{line:?} {index}: scaling exponent {exponent} outside [{MIN_EXPONENT}, {MAX_EXPONENT}]")
            }
            EmulationError::InvalidDimensions(what) => write!(f, "invalid dimensions: {what}"),
        }
    }
}

impl std::error::Error for EmulationError {}

// ---------------------------------------------------------------------------
// Small exact f64 helpers
// ---------------------------------------------------------------------------

pub use gemm_core::emulation::ldexp;
use gemm_core::emulation::{
    butterfly_sum, coarse, exponent_from_bound, exponent_from_sum, ilogb, sym_mod, COARSE_BITS, SUM_LANES,
};

/// Knuth's TwoSum: `s + e == a + b` exactly, with `s = fl(a + b)`.
#[inline]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, e)
}

/// `trunc(ldexp(x, e))` as an `i64`: the scaled integer of step 2,
/// `A'_ih = trunc(A_ih 2^mu_i)` (likewise `B'_hj` with `nu_j`).
///
/// The result is exact: `ldexp` is exact unless the result is subnormal, and
/// then it is `< 1` and truncates to 0.
///
/// Returns `None` if `x` is not finite or `|x 2^e| >= 2^63`. With the
/// exponents of [`row_exponents`] and [`col_exponents`], every element of the
/// line gives `Some`.
///
/// # Example
/// ```
/// use gemm::emulation::scale_to_int;
/// assert_eq!(scale_to_int(-2.75, 1), Some(-5));
/// assert_eq!(scale_to_int(1.0, 63), None);
/// assert_eq!(scale_to_int(f64::NAN, 0), None);
/// ```
#[inline]
pub fn scale_to_int(x: f64, e: i32) -> Option<i64> {
    let y = ldexp(x, e).trunc();
    (y.abs() < TWO_63).then_some(y as i64)
}

// ---------------------------------------------------------------------------
// Exact integer arithmetic (num-bigint), used by `Moduli::new` and the tests
// ---------------------------------------------------------------------------

/// How [`ratio_to_f64`] rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rounding {
    /// To nearest, ties to even.
    NearestEven,
    /// Toward zero (the largest `f64 <= value`).
    TowardZero,
}

/// The value of `x` as a `u64`; only for values known to fit (saturates).
fn to_u64_saturating(x: &BigUint) -> u64 {
    x.to_u64().unwrap_or(u64::MAX)
}

/// `2^e` as a big integer.
fn pow2(e: u64) -> BigUint {
    BigUint::one() << e
}

/// `num / den` rounded to `f64`, for `den > 0`: the module's one big-integer
/// to `f64` conversion.
///
/// The quotient `q = floor(num 2^shift / den)` is formed with at least 55
/// bits. Its 53 leading bits are kept; the bit below them decides a half, and
/// any lower bit of `q` or a nonzero remainder makes the value lie strictly
/// above that half (sticky). This gives the correctly rounded result whenever
/// it is a normal `f64` (every use here: integers below `2^160` and
/// `1/P > 2^-160`); only then is the final scaling by a power of two exact.
fn ratio_to_f64(num: &BigUint, den: &BigUint, mode: Rounding) -> f64 {
    debug_assert!(!den.is_zero());
    if num.is_zero() {
        return 0.0;
    }
    // num 2^shift >= 2^(den.bits() + 54) > den 2^54, so q >= 2^54.
    let shift = (den.bits() + 55).saturating_sub(num.bits());
    let (q, rem) = (num << shift).div_rem(den);
    let s = q.bits() - 53; // >= 2
    let mut mant = to_u64_saturating(&(&q >> s)); // in [2^52, 2^53)
    let half = q.bit(s - 1);
    let sticky = !rem.is_zero() || q.trailing_zeros().is_some_and(|tz| tz < s - 1);
    if mode == Rounding::NearestEven && half && (sticky || mant & 1 == 1) {
        mant += 1; // may reach 2^53, which is still exact
    }
    let exp = (s as i64 - shift as i64).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    ldexp(mant as f64, exp)
}

/// A signed big integer correctly rounded (nearest, ties to even) to `f64`.
fn int_to_f64(x: &BigInt) -> f64 {
    let mag = ratio_to_f64(x.magnitude(), &BigUint::one(), Rounding::NearestEven);
    if x.sign() == Sign::Minus {
        -mag
    } else {
        mag
    }
}

/// Rounds `x` to the nearest multiple of `2^t`, ties toward `+inf`.
fn round_to_grid(x: &BigInt, t: u64) -> BigInt {
    if t == 0 {
        x.clone()
    } else {
        // `>>` on a BigInt rounds toward -inf.
        ((x + (BigInt::one() << (t - 1))) >> t) << t
    }
}

/// `P` and the CRT weights `w_l = (M_l y_l) mod P` of the first `n` moduli,
/// exactly (`M_l = P / p_l`, `y_l = M_l^{-1} mod p_l`).
struct ExactCrt {
    p: BigUint,
    w: Vec<BigUint>,
}

fn exact_crt(n: usize) -> ExactCrt {
    let ps = &MODULI[..n.min(MAX_MODULI)];
    let p: BigUint = ps.iter().map(|&pl| BigUint::from(pl)).product();
    let w = ps
        .iter()
        .map(|&pl| {
            let m_l = &p / pl;
            let m_mod = to_u64_saturating(&(&m_l % pl)) as i64;
            // The moduli are pairwise coprime (checked in the tests), so
            // x m_mod + y p_l = 1 and x is the inverse.
            let y = m_mod.extended_gcd(&i64::from(pl)).x.rem_euclid(i64::from(pl));
            (m_l * y as u64) % &p
        })
        .collect();
    ExactCrt { p, w }
}

// ---------------------------------------------------------------------------
// Moduli and CRT constants
// ---------------------------------------------------------------------------

/// A set of the first `N` moduli of [`MODULI`], with its CRT data.
///
/// It holds the `f64` CRT constants ([`CrtConstants`]), the scaling target
/// `T`, and the reconstruction error bounds, all derived in exact integer
/// arithmetic by [`Moduli::new`].
///
/// # Example
/// ```
/// use gemm::emulation::Moduli;
/// let m = Moduli::new(14)?;
/// assert_eq!(m.n(), 14);
/// assert_eq!(m.moduli()[0], 256);
/// assert!((m.log2_product() - 110.16).abs() < 0.01);
/// assert_eq!(m.residues(-129).next(), Some(127)); // -129 mod 256
/// # Ok::<(), gemm::emulation::EmulationError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Moduli {
    n: usize,
    crt: CrtConstants,
    scaling_target: f64,
    recon_abs_bound: f64,
    quotient_error_bound: f64,
    qmax: u64,
}

impl Moduli {
    /// The first `n` moduli of [`MODULI`], for `MIN_MODULI <= n <= MAX_MODULI`.
    ///
    /// Everything is computed exactly in integer arithmetic (well under a
    /// millisecond in release builds); the result is small and `Copy`.
    ///
    /// # Errors
    /// [`EmulationError::UnsupportedModuliCount`] if `n` is outside
    /// `MIN_MODULI..=MAX_MODULI`.
    ///
    /// # Example
    /// ```
    /// use gemm::emulation::{EmulationError, Moduli, MAX_MODULI};
    /// assert!(Moduli::new(MAX_MODULI).is_ok());
    /// assert_eq!(Moduli::new(21), Err(EmulationError::UnsupportedModuliCount { n: 21 }));
    /// ```
    pub fn new(n: usize) -> Result<Moduli, EmulationError> {
        if !(MIN_MODULI..=MAX_MODULI).contains(&n) {
            return Err(EmulationError::UnsupportedModuliCount { n });
        }
        let ExactCrt { p, w } = exact_crt(n);
        let sum_w: BigUint = w.iter().sum();
        // |q| <= |S|/P + 1/2 with |S| <= 128 sum w_l, so |q| <= qmax.
        let qmax = to_u64_saturating(&(sum_w * 128u32 / &p)).saturating_add(1);
        let c_n = BigUint::from(128 * n as u64) + qmax; // 128N + qmax

        let p_int = BigInt::from(p.clone());
        let w_int: Vec<BigInt> = w.iter().cloned().map(BigInt::from).collect();

        // grid1 = t: the loop ends, since the conditions hold for t >= log2 P.
        let mut t1 = 0u64;
        let (w1, p1) = loop {
            let w1: Vec<BigInt> = w_int.iter().map(|x| round_to_grid(x, t1)).collect();
            let sum1: BigUint = w1.iter().map(BigInt::magnitude).sum();
            let p1 = round_to_grid(&p_int, t1);
            let lim = pow2(53 + t1);
            let e1 = sum1 * 128u32 <= lim;
            // 2 (P/2 + (128N + qmax) 2^(t-1)) <= 2^(54+t)
            let e2 = &p + (&c_n << t1) <= pow2(54 + t1);
            let e3 = p1.magnitude() <= &lim;
            if e1 && e2 && e3 {
                break (w1, p1);
            }
            t1 += 1;
        };
        // Remainders after the first split: |r_l| <= 2^(t1-1).
        let r: Vec<BigInt> = w_int.iter().zip(&w1).map(|(w, w1)| w - w1).collect();
        let rp = &p_int - &p1;

        // grid2 = t': the loop ends by t' = t1 + 1, where w2 = p2 = 0.
        let mut t2 = 0u64;
        let (w2, p2) = loop {
            let w2: Vec<BigInt> = r.iter().map(|x| round_to_grid(x, t2)).collect();
            let p2 = round_to_grid(&rp, t2);
            let sum2: BigUint = w2.iter().map(BigInt::magnitude).sum();
            if sum2 * 128u32 + p2.magnitude() * qmax <= pow2(53 + t2) {
                break (w2, p2);
            }
            t2 += 1;
        };
        // The parts of the grids are exact in f64 by the conditions above; the
        // third parts are rounded to nearest.
        let mut crt = CrtConstants {
            w1: [0.0; MAX_MODULI],
            w2: [0.0; MAX_MODULI],
            w3: [0.0; MAX_MODULI],
            p1: int_to_f64(&p1),
            p2: int_to_f64(&p2),
            p3: int_to_f64(&(&rp - &p2)),
            inv_p: ratio_to_f64(&BigUint::one(), &p, Rounding::NearestEven),
            n: n as u32,
            grid1: t1 as i32,
            grid2: t2 as i32,
            pad: 0,
        };
        for (l, ((w1, w2), r)) in w1.iter().zip(&w2).zip(&r).enumerate() {
            crt.w1[l] = int_to_f64(w1);
            crt.w2[l] = int_to_f64(w2);
            crt.w3[l] = int_to_f64(&(r - w2));
        }

        // Scaling target T = largest f64 <= floor(P (2^23 - 1) / 2^24) = floor(P/2 - P/2^24).
        let tq = (&p * ((1u32 << 23) - 1)) >> RECONSTRUCTION_MARGIN_LOG2;
        let scaling_target = ratio_to_f64(&tq, &BigUint::one(), Rounding::TowardZero);

        // Reconstruction bound R = (N + 4) u (128N + qmax) 2^(t2-1), rounded up generously.
        // Derivation (with B3 = 2^(t2-1) >= |w3e_l|, |P3e|; zeta3 = sum r w3e - q P3e):
        //   E3 = |z3 - zeta3| <= B3 (128N + qmax) ((N + 2) u + O(u^2))   [w3, P3 rounding,
        //        fma-recursive sum (gamma_N), final fma rounding]
        //   |Zhat - Z| <= u|Z| + (1+u) D,  D <= u|e| + u|zeta3| + (1+u) E3,  |e| <= u(1+u)(|Z| + |zeta3|)
        //   => |Zhat - Z| <= (u + 2u^2)|Z| + (N + 3.2) u (128N + qmax) B3.
        let b3 = ldexp(1.0, crt.grid2 - 1);
        let recon_abs_bound = (n as f64 + 4.0) * U * (128.0 * n as f64 + qmax as f64) * b3;

        // Quotient error bound:
        // |fl(s1 * inv_p) - S/P| <= (2u + u^2) 128 sum|w1| / P + 128 N 2^(t1-1) / P.
        let sum1: BigUint = w1.iter().map(BigInt::magnitude).sum();
        let sum1_over_p = ratio_to_f64(&sum1, &p, Rounding::NearestEven);
        let grid_over_p = if t1 == 0 { 0.0 } else { ratio_to_f64(&pow2(t1 - 1), &p, Rounding::NearestEven) };
        let quotient_error_bound = 1.01 * ((2.0 * U + U * U) * 128.0 * sum1_over_p + 128.0 * n as f64 * grid_over_p);
        Ok(Moduli { n, crt, scaling_target, recon_abs_bound, quotient_error_bound, qmax })
    }

    /// Number of moduli `N`.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The moduli in use, `p_1..p_N` (the first `N` entries of [`MODULI`]).
    pub fn moduli(&self) -> &'static [u32] {
        &MODULI[..self.n]
    }

    /// `log2 P`, computed in `f64` (about 1e-15 relative accuracy).
    pub fn log2_product(&self) -> f64 {
        self.moduli().iter().map(|&p| f64::from(p).log2()).sum()
    }

    /// The `f64` constants of [`reconstruct`] (the weight parts, the parts of
    /// `P`, and `1/P`).
    ///
    /// The grids: `N <= 5` has `grid1 = 0` (`w1` is the exact weight,
    /// `w2 = w3 = 0`); `N <= 10` has `grid2 = 0` (`w3 = p3 = 0`).
    ///
    /// ```
    /// use gemm::emulation::Moduli;
    /// let c = *Moduli::new(20)?.crt();
    /// assert_eq!((c.n, c.grid1, c.grid2), (20, 113, 70));
    /// // P1 + P2 + P3 approximates P, and inv_p approximates 1/P.
    /// let p = c.p1 + c.p2 + c.p3;
    /// assert!((p * c.inv_p - 1.0).abs() < 1e-15);
    /// # Ok::<(), gemm::emulation::EmulationError>(())
    /// ```
    pub fn crt(&self) -> &CrtConstants {
        &self.crt
    }

    /// The scaling target `T`: the largest `f64 <= floor(P/2 - P/2^24)`.
    ///
    /// Fast-mode scaling makes the squared 2-norm of every scaled row of `A`
    /// and column of `B` `< T`.
    pub fn scaling_target(&self) -> f64 {
        self.scaling_target
    }

    /// `R` of the reconstruction bound `|Zhat - Z| <= (u + 2u^2)|Z| + R`,
    /// valid for `|Z| <= (1/2 - 2^-24) P`. It is an absolute bound in units
    /// of the scaled integers (multiply by `2^-(mu_i + nu_j)` for `C_ij`).
    pub fn reconstruction_abs_bound(&self) -> f64 {
        self.recon_abs_bound
    }

    /// A bound on `|fl(s1 inv_p) - S/P|` in [`reconstruct`].
    ///
    /// It is below `2^-31` for every `N` (checked in the tests), well inside
    /// the margin of `2^-24`.
    pub fn quotient_error_bound(&self) -> f64 {
        self.quotient_error_bound
    }

    /// The bound `qmax >= |q|` on the CRT quotient (`qmax <= 128 N + 1`).
    pub fn qmax(&self) -> u64 {
        self.qmax
    }

    /// The symmetric residues of `x` modulo `p_1..p_N`, in that order (step 3).
    ///
    /// The residue modulo `p` lies in `[-128, 127]` for `p = 256` and in
    /// `[-(p-1)/2, (p-1)/2]` for odd `p`, and is congruent to `x`.
    ///
    /// # Example
    /// ```
    /// use gemm::emulation::Moduli;
    /// let m = Moduli::new(3)?; // 256, 255, 253
    /// assert_eq!(m.residues(128).collect::<Vec<i8>>(), vec![-128, -127, -125]);
    /// assert_eq!(m.residues(-128).collect::<Vec<i8>>(), vec![-128, 127, 125]);
    /// # Ok::<(), gemm::emulation::EmulationError>(())
    /// ```
    pub fn residues(&self, x: i64) -> impl ExactSizeIterator<Item = i8> {
        // |sym_mod| <= 128, so the cast is exact.
        MODULI[..self.n].iter().map(move |&p| sym_mod(x, p) as i8)
    }
}

/// The two scalings of Ozaki scheme II (step 1 of the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Each row of A and column of B scaled from its own 2-norm
    /// (Cauchy–Schwarz): one pass over A and one over B.
    #[default]
    Fast,
    /// The scales from a bound on `|A| |B|`: one more INT8 product, of 6-bit
    /// magnitudes of A and B, and its row and column maxima
    /// ([the accurate mode](self#the-accurate-mode)). Tighter where a
    /// row's or column's large elements do not meet the other operand's:
    /// more bits kept for the same moduli, for about one more INT8 product.
    /// Every scale depends on all of C's rows and columns, so on host
    /// operands C is computed whole, in one tile (A, B and C must fit the
    /// device's memory budget, else `Error::MemoryBudget`), and a strided
    /// batch prepares a shared B for each product.
    Accurate,
}

/// How [`Gemm::emulation`](crate::Gemm::emulation) emulates an f64 or f32
/// product on INT8 tensor cores: Ozaki scheme II with `N` moduli (`N` INT8
/// products) in its fast mode, or its accurate mode ([`Mode`]). More
/// moduli, more accuracy and more time: each adds about 4 bits kept per
/// operand and one INT8 product (see the module docs for the bound, and
/// `docs/benchmarks.md` for measured errors and speeds).
///
/// # Example
/// ```
/// use gemm::emulation::{Emulation, Mode};
/// assert_eq!(Emulation::f64_accuracy().moduli().n(), 15);
/// assert_eq!(Emulation::new(8)?.moduli().n(), 8);
/// assert_eq!(Emulation::new(14)?.mode(Mode::Accurate).scaling(), Mode::Accurate);
/// assert!(Emulation::new(30).is_err());
/// # Ok::<(), gemm::emulation::EmulationError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Emulation {
    moduli: Moduli,
    panel_bytes: usize,
    mode: Mode,
}

impl Emulation {
    /// The emulation with `n` moduli ([`MIN_MODULI`]`..=`[`MAX_MODULI`]),
    /// fast mode.
    ///
    /// # Errors
    /// [`EmulationError::UnsupportedModuliCount`] for any other `n`.
    pub fn new(n: usize) -> Result<Emulation, EmulationError> {
        Ok(Emulation { moduli: Moduli::new(n)?, panel_bytes: gemm_core::emulation::PANEL_BYTES, mode: Mode::Fast })
    }

    /// The same emulation with the scaling `mode` ([`Mode`]).
    pub fn mode(mut self, mode: Mode) -> Emulation {
        self.mode = mode;
        self
    }

    /// The scaling mode ([`Emulation::mode`]; [`Mode::Fast`] unless set).
    pub fn scaling(&self) -> Mode {
        self.mode
    }

    /// Bounds the workspace a panel of C's rows takes (its residues of A
    /// and its i32 INT8 products, `N (k + 4 n)` bytes a row; 2 GiB unless
    /// set): C is computed in panels of as many rows as fit, a multiple of
    /// 128 (at least 128). B's residues (`N k n` bytes) and the exponents
    /// come on top. The plan says the panels and the whole workspace.
    ///
    /// ```
    /// use gemm::emulation::Emulation;
    /// let e = Emulation::f64_accuracy().workspace_limit(256 << 20);
    /// assert_eq!(e.panel_bytes(), 256 << 20);
    /// ```
    pub fn workspace_limit(mut self, bytes: usize) -> Emulation {
        self.panel_bytes = bytes;
        self
    }

    /// The bound on a panel's workspace, in bytes
    /// ([`Emulation::workspace_limit`]).
    pub fn panel_bytes(&self) -> usize {
        self.panel_bytes
    }

    /// 15 moduli: `P` about `2^117.8`: a median relative error below a
    /// native f64 product's for inputs of moderate exponent spread (at
    /// 16384^3 with phi up to 2; phi = 4 needs 16 or 17; the study in
    /// `docs/benchmarks.md`).
    pub fn f64_accuracy() -> Emulation {
        Emulation::new(15).expect("15 moduli are supported")
    }

    /// 8 moduli: `P` about `2^63.5`: a median relative error below a
    /// native f32 product's for inputs of moderate exponent spread (7
    /// moduli are about as accurate as it at phi = 1 and less at phi = 2;
    /// the study in `docs/benchmarks.md`).
    pub fn f32_accuracy() -> Emulation {
        Emulation::new(8).expect("8 moduli are supported")
    }

    /// The moduli and their CRT constants.
    pub fn moduli(&self) -> &Moduli {
        &self.moduli
    }

    /// The CRT constants of this emulation's moduli, from a table built once
    /// per process (what a planned launch holds).
    pub(crate) fn crt_static(&self) -> &'static CrtConstants {
        static TABLE: std::sync::OnceLock<Vec<Moduli>> = std::sync::OnceLock::new();
        let table = TABLE.get_or_init(|| {
            (MIN_MODULI..=MAX_MODULI).map(|n| Moduli::new(n).expect("every supported count")).collect()
        });
        &table[self.moduli.n - MIN_MODULI].crt
    }
}

// ---------------------------------------------------------------------------
// Step 1: scaling exponents (fast mode)
// ---------------------------------------------------------------------------

/// The fast-mode scaling exponent of one line of length `len <= MAX_K`,
/// whose element `h` is `get(h)`, for the target `T` of `moduli`, by the
/// scaling rule of the module docs. Returns `None` if the line holds an Inf or
/// NaN.
fn line_exponent(len: usize, get: impl Fn(usize) -> f64, moduli: &Moduli) -> Option<i32> {
    debug_assert!(len <= MAX_K);
    let amax = line_amax(len, &get)?;
    if amax == 0.0 {
        return Some(0);
    }
    let e = ilogb(amax);
    // SUM_LANES partial sums, as the GPU's warp computes them.
    let mut part = [0.0f64; SUM_LANES];
    for h in 0..len {
        let t = ldexp(get(h), -e);
        part[h % SUM_LANES] = t.mul_add(t, part[h % SUM_LANES]);
    }
    let s = butterfly_sum(part);
    Some(exponent_from_sum(s, len as u64, e, moduli.scaling_target))
}

/// Applies [`line_exponent`] to `lines` lines of length `len`, where element
/// `h` of line `i` is `x[i * line_stride + h * elem_stride]`.
fn strided_exponents(
    x: &[f64],
    (lines, len): (usize, usize),
    (line_stride, elem_stride): (usize, usize),
    moduli: &Moduli,
    kind: Line,
) -> Result<Vec<i32>, EmulationError> {
    if len > MAX_K {
        return Err(EmulationError::InvalidDimensions("k exceeds MAX_K = 2^40"));
    }
    if lines > 0 && len > 0 {
        let last = (lines - 1)
            .checked_mul(line_stride)
            .and_then(|a| (len - 1).checked_mul(elem_stride).and_then(|b| a.checked_add(b)))
            .ok_or(EmulationError::InvalidDimensions("index overflows usize"))?;
        if last >= x.len() {
            return Err(EmulationError::InvalidDimensions("matrix slice too short"));
        }
    }
    // With k = 0 the slice may be empty for any number of lines: reserve
    // fallibly rather than panic on a capacity overflow.
    let mut exponents = Vec::new();
    exponents.try_reserve_exact(lines).map_err(|_| EmulationError::InvalidDimensions("too many lines to allocate"))?;
    for i in 0..lines {
        let base = i * line_stride;
        let mu = line_exponent(len, |h| x[base + h * elem_stride], moduli)
            .ok_or(EmulationError::NonFinite { line: kind, index: i })?;
        if !(MIN_EXPONENT..=MAX_EXPONENT).contains(&mu) {
            return Err(EmulationError::ExponentOutOfRange { line: kind, index: i, exponent: mu });
        }
        exponents.push(mu);
    }
    Ok(exponents)
}

/// Fast-mode scaling exponents `mu_i` of the `m` rows of `A` (`m x k`).
///
/// * `lda` is the leading dimension. Row-major: element `(i, h)` is
///   `a[i * lda + h]` (`lda >= max(k, 1)`); column-major: `a[i + h * lda]`
///   (`lda >= max(m, 1)`).
/// * Returns `m` exponents. Row `i` becomes `A'_ih = trunc(A_ih 2^mu_i)`
///   ([`scale_to_int`]); the rule is in the module docs (step 1). A zero row
///   gets `0`.
///
/// # Errors
/// * [`EmulationError::NonFinite`] with [`Line::RowOfA`] and the row index,
///   for the first row that holds an Inf or NaN.
/// * [`EmulationError::InvalidDimensions`] if `a` is too short, `lda` too
///   small, or `k > MAX_K`.
///
/// # Example
/// ```
/// use gemm::emulation::{row_exponents, Moduli};
/// use gemm::Layout;
/// let moduli = Moduli::new(14)?;
/// let a = [1.0, 0.0, 0.0, 0.0]; // 2 x 2, second row zero
/// let mu = row_exponents(&a, 2, 2, 2, Layout::RowMajor, &moduli)?;
/// assert_eq!(mu[1], 0);
/// assert!(mu[0] > 50);
/// # Ok::<(), gemm::emulation::EmulationError>(())
/// ```
pub fn row_exponents(
    a: &[f64],
    m: usize,
    k: usize,
    lda: usize,
    layout: Layout,
    moduli: &Moduli,
) -> Result<Vec<i32>, EmulationError> {
    if layout == Layout::RowMajor {
        if lda < k.max(1) {
            return Err(EmulationError::InvalidDimensions("lda < k for row-major A"));
        }
        strided_exponents(a, (m, k), (lda, 1), moduli, Line::RowOfA)
    } else {
        if lda < m.max(1) {
            return Err(EmulationError::InvalidDimensions("lda < m for column-major A"));
        }
        strided_exponents(a, (m, k), (1, lda), moduli, Line::RowOfA)
    }
}

/// Fast-mode scaling exponents `nu_j` of the `n` columns of `B` (`k x n`).
///
/// * `ldb` is the leading dimension. Row-major: element `(h, j)` is
///   `b[h * ldb + j]` (`ldb >= max(n, 1)`); column-major: `b[h + j * ldb]`
///   (`ldb >= max(k, 1)`).
/// * Returns `n` exponents. Column `j` becomes `B'_hj = trunc(B_hj 2^nu_j)`;
///   the rule is the same as for [`row_exponents`].
///
/// # Errors
/// * [`EmulationError::NonFinite`] with [`Line::ColumnOfB`] and the column
///   index.
/// * [`EmulationError::InvalidDimensions`] if `b` is too short, `ldb` too
///   small, or `k > MAX_K`.
///
/// # Example
/// ```
/// use gemm::emulation::{col_exponents, EmulationError, Line, Moduli};
/// use gemm::Layout;
/// let moduli = Moduli::new(14)?;
/// let b = [1.0, f64::NAN]; // 1 x 2
/// assert_eq!(
///     col_exponents(&b, 1, 2, 2, Layout::RowMajor, &moduli),
///     Err(EmulationError::NonFinite { line: Line::ColumnOfB, index: 1 })
/// );
/// # Ok::<(), EmulationError>(())
/// ```
pub fn col_exponents(
    b: &[f64],
    k: usize,
    n: usize,
    ldb: usize,
    layout: Layout,
    moduli: &Moduli,
) -> Result<Vec<i32>, EmulationError> {
    if layout == Layout::RowMajor {
        if ldb < n.max(1) {
            return Err(EmulationError::InvalidDimensions("ldb < n for row-major B"));
        }
        strided_exponents(b, (n, k), (1, ldb), moduli, Line::ColumnOfB)
    } else {
        if ldb < k.max(1) {
            return Err(EmulationError::InvalidDimensions("ldb < k for column-major B"));
        }
        strided_exponents(b, (n, k), (ldb, 1), moduli, Line::ColumnOfB)
    }
}

/// `(m k, k n)` for dense row-major `a` (`m x k`) and `b` (`k x n`), after
/// checking that the sizes do not overflow, the slices hold them and
/// `k <= MAX_K`.
fn dense_operands((m, n, k): (usize, usize, usize), a: &[f64], b: &[f64]) -> Result<(usize, usize), EmulationError> {
    let mk = m.checked_mul(k).ok_or(EmulationError::InvalidDimensions("m*k overflows usize"))?;
    let kn = k.checked_mul(n).ok_or(EmulationError::InvalidDimensions("k*n overflows usize"))?;
    if a.len() < mk || b.len() < kn {
        return Err(EmulationError::InvalidDimensions("matrix slice too short"));
    }
    if k > MAX_K {
        return Err(EmulationError::InvalidDimensions("k exceeds MAX_K = 2^40"));
    }
    Ok((mk, kn))
}

/// The coarse shift of one line ([`COARSE_BITS`]` - ilogb(amax)`, 0 for a
/// zero line), or `None` where it holds an Inf or NaN.
fn coarse_shift(len: usize, get: impl Fn(usize) -> f64) -> Option<i32> {
    let amax = line_amax(len, &get)?;
    Some(if amax == 0.0 { 0 } else { COARSE_BITS - ilogb(amax) })
}

/// The largest magnitude of a line's `len` elements (`get(h)`), or `None`
/// where one is Inf or NaN.
fn line_amax(len: usize, get: &impl Fn(usize) -> f64) -> Option<f64> {
    let mut amax = 0.0f64;
    for h in 0..len {
        let x = get(h);
        if !x.is_finite() {
            return None;
        }
        amax = amax.max(x.abs());
    }
    Some(amax)
}

/// Accurate-mode scaling exponents `(mu, nu)` of the `m` rows of `A`
/// (`m x k`, dense row-major) and the `n` columns of `B` (`k x n`, dense
/// row-major), by the rule of [the accurate mode](self#the-accurate-mode):
/// coarse shifts, the exact product `U` of the coarse magnitudes, its row
/// and column maxima, then `gemm_core::emulation::exponent_from_bound`.
/// Exact integer arithmetic after the shifts, so any order gives the same
/// exponents (the GPU's atomic maxima included).
///
/// # Errors
/// [`EmulationError::NonFinite`] for the first row of A, then column of B,
/// that holds an Inf or NaN; [`EmulationError::InvalidDimensions`] where a
/// slice is too short or `k > MAX_K`.
///
/// # Example
/// ```
/// use gemm::emulation::{accurate_exponents, Moduli};
/// let moduli = Moduli::new(14)?;
/// let a = [1.0, 0.0, 0.0, 0.0]; // 2 x 2, second row zero
/// let b = [1.0, 0.0, 0.0, 1e-3]; // 2 x 2
/// let (mu, nu) = accurate_exponents(2, 2, 2, &a, &b, &moduli)?;
/// assert_eq!(mu[1], 0);
/// assert!(mu[0] > 50 && nu[0] == mu[0]);
/// // Column 1 of B meets only A's zero column: no entry of C depends on
/// // its scale.
/// assert_eq!(nu[1], 0);
/// # Ok::<(), gemm::emulation::EmulationError>(())
/// ```
pub fn accurate_exponents(
    m: usize,
    n: usize,
    k: usize,
    a: &[f64],
    b: &[f64],
    moduli: &Moduli,
) -> Result<(Vec<i32>, Vec<i32>), EmulationError> {
    let (mk, kn) = dense_operands((m, n, k), a, b)?;
    let mut ca = Vec::with_capacity(m);
    for i in 0..m {
        ca.push(coarse_shift(k, |h| a[i * k + h]).ok_or(EmulationError::NonFinite { line: Line::RowOfA, index: i })?);
    }
    let mut cb = Vec::with_capacity(n);
    for j in 0..n {
        cb.push(
            coarse_shift(k, |h| b[h * n + j]).ok_or(EmulationError::NonFinite { line: Line::ColumnOfB, index: j })?,
        );
    }
    // The coarse magnitudes (0..=64) and their exact product's maxima
    // (each entry <= 4096 k < 2^53).
    let abar: Vec<u64> = (0..mk).map(|idx| u64::from(coarse(a[idx], ca[idx / k.max(1)]))).collect();
    let bbar: Vec<u64> = (0..kn).map(|idx| u64::from(coarse(b[idx], cb[idx % n.max(1)]))).collect();
    let (mut rmax, mut smax) = (vec![0u64; m], vec![0u64; n]);
    for i in 0..m {
        for j in 0..n {
            let u: u64 = (0..k).map(|h| abar[i * k + h] * bbar[h * n + j]).sum();
            rmax[i] = rmax[i].max(u);
            smax[j] = smax[j].max(u);
        }
    }
    let t = moduli.scaling_target;
    let mu = ca.iter().zip(&rmax).map(|(&c, &r)| exponent_from_bound(r, c, t)).collect();
    let nu = cb.iter().zip(&smax).map(|(&c, &r)| exponent_from_bound(r, c, t)).collect();
    Ok((mu, nu))
}

// ---------------------------------------------------------------------------
// Step 4: INT8 products modulo p
// ---------------------------------------------------------------------------

/// Symmetric residue modulo `p` of the exact dot product of two `i8` vectors.
///
/// The sum runs in `i32` over blocks of at most [`MAX_K_PER_PRODUCT`]. Each
/// block is reduced symmetrically, then added to the running residue.
fn residue_dot(a: &[i8], b: &[i8], p: u32) -> i32 {
    let mut acc: i64 = 0;
    for (ca, cb) in a.chunks(MAX_K_PER_PRODUCT).zip(b.chunks(MAX_K_PER_PRODUCT)) {
        let mut s: i32 = 0;
        for (&x, &y) in ca.iter().zip(cb) {
            s += i32::from(x) * i32::from(y); // exact: |s| <= 131071 * 2^14 < 2^31
        }
        acc = sym_mod(acc + sym_mod(i64::from(s), p), p);
    }
    acc as i32
}

/// `C = A B mod p` with symmetric residues, for dense row-major `i8` matrices
/// (`A` is `m x k`, `B` is `k x n`, `C` is `m x n` as `i32`). Exact, so the
/// same for any blocking or order. The caller passes full-size slices.
fn int8_gemm_mod(m: usize, n: usize, k: usize, a: &[i8], b: &[i8], p: u32) -> Vec<i32> {
    let mut c = vec![0i32; m * n];
    if k == 0 || n == 0 {
        return c;
    }
    let mut bt = vec![0i8; n * k]; // B transposed: column j at bt[j * k..]
    for (h, b_row) in b.chunks_exact(n).take(k).enumerate() {
        for (j, &x) in b_row.iter().enumerate() {
            bt[j * k + h] = x;
        }
    }
    for (a_row, c_row) in a.chunks_exact(k).zip(c.chunks_exact_mut(n)) {
        for (cij, b_col) in c_row.iter_mut().zip(bt.chunks_exact(k)) {
            *cij = residue_dot(a_row, b_col, p);
        }
    }
    c
}

// ---------------------------------------------------------------------------
// Step 5: reconstruction
// ---------------------------------------------------------------------------

/// `f64`-only CRT reconstruction of one output entry, as the GPU runs it.
///
/// * `c` holds the `N` values `c_l` of the INT8 products for moduli
///   `p_1..p_N` (`c.len() == N`). Any `i32` is accepted: it is first reduced
///   symmetrically modulo `p_l`, so `|r_l| <= 128`.
/// * Returns `Zhat`, an approximation of the integer `Z` with
///   `Z ≡ c_l (mod p_l)` and `-P/2 <= Z < P/2`.
///
/// The algorithm is in the module docs ("Reconstruction"). Every `fma` is
/// explicit (`mul_add`), and no other operation may be contracted.
///
/// **Bound.** If `|Z| <= (1/2 - 2^-24) P`, then
/// `|Zhat - Z| <= (u + 2u^2)|Z| + R`, where `R` is
/// [`Moduli::reconstruction_abs_bound`] (`R < max(2^-37, 2^-121 P)`). In
/// particular, `|Zhat - Z| <= 2^-54 (1 + 2^-52) P + max(2^-37, 2^-121 P)`.
/// Otherwise the quotient can be off by one, and `Zhat` may approximate
/// `Z ± P` instead. Step 1 of the scheme rules this out.
///
/// # Errors
/// [`EmulationError::InvalidDimensions`] if `c.len() != N`.
///
/// # Example
/// ```
/// use gemm::emulation::{reconstruct, Moduli};
/// let moduli = Moduli::new(16)?;
/// let z: i64 = -123_456_789_012_345;
/// let c: Vec<i32> = moduli.residues(z).map(i32::from).collect();
/// assert_eq!(reconstruct(&c, &moduli)?, z as f64);
/// # Ok::<(), gemm::emulation::EmulationError>(())
/// ```
pub fn reconstruct(c: &[i32], moduli: &Moduli) -> Result<f64, EmulationError> {
    if c.len() != moduli.n {
        return Err(EmulationError::InvalidDimensions("reconstruct needs exactly N residues"));
    }
    Ok(crt_reconstruct(c, &moduli.crt))
}

/// The body of [`reconstruct`], for the `min(c.len(), N)` first values.
fn crt_reconstruct(c: &[i32], k: &CrtConstants) -> f64 {
    let (mut s1, mut s2, mut s3) = (0.0f64, 0.0f64, 0.0f64);
    let weights = k.w1.iter().zip(&k.w2).zip(&k.w3).take(k.n as usize);
    for ((&cl, &p), ((&w1, &w2), &w3)) in c.iter().zip(&MODULI).zip(weights) {
        let r = sym_mod(i64::from(cl), p) as f64;
        s1 = r.mul_add(w1, s1); // exact
        s2 = r.mul_add(w2, s2); // exact
        s3 = r.mul_add(w3, s3); // rounded
    }
    let q = (s1 * k.inv_p).round_ties_even();
    let z1 = (-q).mul_add(k.p1, s1); // exact
    let z2 = (-q).mul_add(k.p2, s2); // exact
    let z3 = (-q).mul_add(k.p3, s3); // rounded
    let (h, e) = two_sum(z1, z2);
    h + (e + z3)
}

// ---------------------------------------------------------------------------
// The whole scheme on the CPU
// ---------------------------------------------------------------------------

/// Emulates `C = A B` with Ozaki scheme II on the CPU, in the exact order of
/// operations the GPU kernels must follow (K. Ozaki, Y. Uchino, T. Imamura,
/// "Ozaki Scheme II: A GEMM-oriented emulation of floating-point matrix
/// multiplication using an integer modular technique", 2025).
///
/// This is the bit-for-bit reference for the GPU kernels.
///
/// * `a` is `m x k` row-major and dense (`lda = k`); `b` is `k x n`
///   row-major and dense (`ldb = n`). Longer slices are fine; the extra
///   elements are ignored.
/// * Returns `C`, `m x n` row-major and dense (`ldc = n`).
/// * `moduli` picks `N`. `N = 14..16` gives about `f64` accuracy for typical
///   data; see the module docs for the error bound.
///
/// The steps:
/// 1. Compute `mu = row_exponents(A)` and `nu = col_exponents(B)`.
/// 2. Scale to integers: `A' = trunc(ldexp(A, mu))`, `B' = trunc(ldexp(B, nu))`
///    (`i64`).
/// 3. For each `l`, form the `i8` residue matrices.
/// 4. Compute `C_l = A'_l B'_l mod p_l` (blocked along `k` by
///    [`MAX_K_PER_PRODUCT`]).
/// 5. For each entry, `Zhat = reconstruct(C_1..C_N)`.
/// 6. `C_ij = ldexp(Zhat, -(mu_i + nu_j))`.
///
/// A zero result is `+0.0`: signs of zero are not reproduced. A result whose
/// exact value overflows `f64` becomes `±Inf`.
///
/// # Errors
/// * [`EmulationError::NonFinite`] if a row of `A` or a column of `B` holds
///   Inf or NaN. Rows of `A` are checked first.
/// * [`EmulationError::InvalidDimensions`] if a slice is too short,
///   `k > MAX_K`, or a size overflows.
///
/// # Example
/// ```
/// use gemm::emulation::{emulate_dgemm_cpu, EmulationError, Line, Moduli};
/// let moduli = Moduli::new(15)?;
/// let a = [0.1, 0.2, 0.3]; // 1 x 3
/// let b = [1.0, 2.0, 3.0]; // 3 x 1
/// let c = emulate_dgemm_cpu(1, 1, 3, &a, &b, &moduli)?;
/// assert!((c[0] - 1.4).abs() < 1e-15);
/// let bad = [f64::INFINITY, 0.0, 0.0];
/// assert_eq!(
///     emulate_dgemm_cpu(1, 1, 3, &bad, &b, &moduli),
///     Err(EmulationError::NonFinite { line: Line::RowOfA, index: 0 })
/// );
/// # Ok::<(), EmulationError>(())
/// ```
pub fn emulate_dgemm_cpu(
    m: usize,
    n: usize,
    k: usize,
    a: &[f64],
    b: &[f64],
    moduli: &Moduli,
) -> Result<Vec<f64>, EmulationError> {
    emulate_dgemm_cpu_mode(m, n, k, a, b, moduli, Mode::Fast)
}

/// [`emulate_dgemm_cpu`] in either scaling mode: with [`Mode::Accurate`],
/// the exponents are [`accurate_exponents`]'; every later step is the
/// same.
///
/// # Errors
/// As [`emulate_dgemm_cpu`].
///
/// # Example
/// ```
/// use gemm::emulation::{emulate_dgemm_cpu_mode, Mode, Moduli};
/// let moduli = Moduli::new(15)?;
/// let a = [0.1, 0.2, 0.3]; // 1 x 3
/// let b = [1.0, 2.0, 3.0]; // 3 x 1
/// let c = emulate_dgemm_cpu_mode(1, 1, 3, &a, &b, &moduli, Mode::Accurate)?;
/// assert!((c[0] - 1.4).abs() < 1e-15);
/// # Ok::<(), gemm::emulation::EmulationError>(())
/// ```
pub fn emulate_dgemm_cpu_mode(
    m: usize,
    n: usize,
    k: usize,
    a: &[f64],
    b: &[f64],
    moduli: &Moduli,
    mode: Mode,
) -> Result<Vec<f64>, EmulationError> {
    let (mk, kn) = dense_operands((m, n, k), a, b)?;
    let mn = m.checked_mul(n).ok_or(EmulationError::InvalidDimensions("m*n overflows usize"))?;
    let nm = moduli.n();
    // C (8 bytes an entry) and the N residue matrices (4 bytes an entry each).
    if mn.checked_mul(8 + 4 * nm).is_none_or(|bytes| bytes > isize::MAX as usize) {
        return Err(EmulationError::InvalidDimensions("m*n too large to allocate"));
    }
    // Step 1.
    let (mu, nu) = match mode {
        Mode::Fast => (
            row_exponents(a, m, k, k.max(1), Layout::RowMajor, moduli)?,
            col_exponents(b, k, n, n.max(1), Layout::RowMajor, moduli)?,
        ),
        Mode::Accurate => accurate_exponents(m, n, k, a, b, moduli)?,
    };
    if mn == 0 {
        return Ok(Vec::new());
    }
    // Step 2. `|x 2^mu| < 2^63` is proven (module docs), so the cast is exact.
    let scale = |x: f64, e: i32| ldexp(x, e).trunc() as i64;
    let ai: Vec<i64> = a[..mk].iter().enumerate().map(|(idx, &x)| scale(x, mu[idx / k])).collect();
    let bi: Vec<i64> = b[..kn].iter().enumerate().map(|(idx, &x)| scale(x, nu[idx % n])).collect();
    // Steps 3 and 4.
    let mut cres = Vec::with_capacity(nm); // cres[l] is C_l, m x n row-major
    let mut ar = vec![0i8; mk];
    let mut br = vec![0i8; kn];
    for &p in moduli.moduli() {
        for (r, &x) in ar.iter_mut().zip(&ai) {
            *r = sym_mod(x, p) as i8;
        }
        for (r, &x) in br.iter_mut().zip(&bi) {
            *r = sym_mod(x, p) as i8;
        }
        cres.push(int8_gemm_mod(m, n, k, &ar, &br, p));
    }
    // Steps 5 and 6.
    let mut c = vec![0.0f64; mn];
    let mut buf = [0i32; MAX_MODULI];
    for (idx, cij) in c.iter_mut().enumerate() {
        for (v, cl) in buf.iter_mut().zip(&cres) {
            *v = cl[idx];
        }
        let z = crt_reconstruct(&buf[..nm], &moduli.crt);
        *cij = ldexp(z, -(mu[idx / n] + nu[idx % n]));
    }
    Ok(c)
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use num_traits::FromPrimitive;

    /// SplitMix64: small deterministic generator.
    struct Rng(u64);
    impl Rng {
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        /// Uniform in [0, 1).
        fn uniform(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 * ldexp(1.0, -53)
        }
        fn normal(&mut self) -> f64 {
            let u1 = 1.0 - self.uniform(); // (0, 1]
            let u2 = self.uniform();
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next_u64() % n
        }
        /// Random big integer in `[0, bound)` (negligibly biased).
        fn big_below(&mut self, bound: &BigUint) -> BigUint {
            let digits = (bound.bits() / 32 + 3) as usize;
            BigUint::new((0..digits).map(|_| self.next_u64() as u32).collect()) % bound
        }
        /// Random signed big integer with magnitude below `bound`.
        fn signed_below(&mut self, bound: &BigUint) -> BigInt {
            let sign = if self.below(2) == 1 { Sign::Minus } else { Sign::Plus };
            BigInt::from_biguint(sign, self.big_below(bound))
        }
    }

    /// The exact value of an integral `f64`.
    fn exact_int(x: f64) -> BigInt {
        assert_eq!(x.fract(), 0.0, "{x} is not an integer");
        BigInt::from_f64(x).expect("finite")
    }

    /// The exact value of a non-negative integral `f64`.
    fn exact_uint(x: f64) -> BigUint {
        assert!(x >= 0.0 && x.fract() == 0.0, "{x} is not a non-negative integer");
        BigUint::from_f64(x).expect("finite")
    }

    /// The unique `Z` in `[-P/2, P/2)` with `Z ≡ c_l (mod p_l)`, exactly.
    ///
    /// It computes `Z = sym_mod(sum_l r_l w_l, P)`, where `r_l` is `c[l]`
    /// reduced symmetrically modulo `p_l`.
    fn reconstruct_exact(c: &[i32], exact: &ExactCrt) -> BigInt {
        let s: BigInt = c
            .iter()
            .zip(MODULI)
            .zip(&exact.w)
            .map(|((&cl, p), w)| BigInt::from(w.clone()) * sym_mod(cl.into(), p))
            .sum();
        let p = BigInt::from(exact.p.clone());
        let r = s.mod_floor(&p);
        if BigInt::from(2) * &r >= p {
            r - p
        } else {
            r
        }
    }

    /// The symmetric residues of an exact `z` as the INT8 products would give them.
    fn residues_of(z: &BigInt, n: usize) -> Vec<i32> {
        MODULI[..n]
            .iter()
            .map(|&p| {
                let r = z.mod_floor(&BigInt::from(p)).to_i64().expect("small");
                sym_mod(r, p) as i32
            })
            .collect()
    }

    /// `floor(P/2 - P/2^24)`: the guaranteed range of `|Z|`.
    fn z_limit(p: &BigUint) -> BigUint {
        (p * ((1u32 << 23) - 1)) >> 24
    }

    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }

    /// Ozaki test matrices: (u - 0.5) * exp(phi * z).
    fn test_matrix(rng: &mut Rng, len: usize, phi: f64) -> Vec<f64> {
        (0..len).map(|_| (rng.uniform() - 0.5) * (phi * rng.normal()).exp()).collect()
    }

    /// Double-double dot product (TwoProd + TwoSum), returns (hi, lo).
    fn dd_dot(x: impl Iterator<Item = (f64, f64)>) -> (f64, f64) {
        let (mut hi, mut lo) = (0.0f64, 0.0f64);
        for (a, b) in x {
            let p = a * b;
            let pe = a.mul_add(b, -p);
            let (s, e) = two_sum(hi, p);
            let t = e + lo + pe;
            hi = s + t;
            lo = t - (hi - s);
        }
        (hi, lo)
    }

    fn ref_gemm(m: usize, n: usize, k: usize, a: &[f64], b: &[f64]) -> Vec<(f64, f64)> {
        let mut c = Vec::with_capacity(m * n);
        for i in 0..m {
            for j in 0..n {
                c.push(dd_dot((0..k).map(|h| (a[i * k + h], b[h * n + j]))));
            }
        }
        c
    }

    fn median(v: &mut [f64]) -> f64 {
        v.sort_by(f64::total_cmp);
        let l = v.len();
        if l % 2 == 1 {
            v[l / 2]
        } else {
            0.5 * (v[l / 2 - 1] + v[l / 2])
        }
    }

    #[test]
    fn moduli_pairwise_coprime_and_sorted() {
        for (i, &pi) in MODULI.iter().enumerate() {
            assert!((2..=256).contains(&pi));
            if i > 0 {
                assert!(pi < MODULI[i - 1], "largest first");
            }
            for &pj in &MODULI[i + 1..] {
                assert_eq!(gcd(pi, pj), 1, "{pi} {pj}");
            }
        }
        assert_eq!(Moduli::new(0), Err(EmulationError::UnsupportedModuliCount { n: 0 }));
        assert_eq!(Moduli::new(1), Err(EmulationError::UnsupportedModuliCount { n: 1 }));
        assert_eq!(Moduli::new(21), Err(EmulationError::UnsupportedModuliCount { n: 21 }));
        assert_eq!(Moduli::new(usize::MAX), Err(EmulationError::UnsupportedModuliCount { n: usize::MAX }));
        assert_eq!(MAX_K_PER_PRODUCT, 131071);
        // k * 128 * 128 < 2^31 exactly at the limit.
        assert!((MAX_K_PER_PRODUCT as i64) * 128 * 128 < 1i64 << 31);
        assert!((MAX_K_PER_PRODUCT as i64 + 1) * 128 * 128 >= 1i64 << 31);
    }

    #[test]
    fn crt_constants_consistent() {
        for n in MIN_MODULI..=MAX_MODULI {
            let m = Moduli::new(n).unwrap();
            let exact = exact_crt(n);
            let p = &exact.p;
            let c = m.crt();
            assert_eq!(c.n as usize, n);
            let (g1, g2) = (c.grid1 as u64, c.grid2 as u64);
            let multiple_of = |x: &BigInt, t: u64| x.is_zero() || x.trailing_zeros().is_some_and(|tz| tz >= t);
            let within_half_grid = |x: &BigInt, t: u64| {
                if t == 0 {
                    x.is_zero()
                } else {
                    x.magnitude() <= &pow2(t - 1)
                }
            };
            for l in 0..n {
                // w_l ≡ 1 mod p_l, ≡ 0 mod p_j (j != l), and w_l < P.
                for (j, &pj) in MODULI[..n].iter().enumerate() {
                    assert_eq!(&exact.w[l] % pj, BigUint::from(u32::from(l == j)), "n={n} l={l} j={j}");
                }
                assert!(&exact.w[l] < p);
                // w1 and w2 are exact grid multiples; w3 is the rest rounded to nearest.
                let (w1, w2) = (exact_int(c.w1[l]), exact_int(c.w2[l]));
                assert!(multiple_of(&w1, g1) && multiple_of(&w2, g2), "n={n} l={l}");
                assert!(w1.magnitude() <= &pow2(46 + g1));
                let w3e = BigInt::from(exact.w[l].clone()) - &w1 - &w2;
                assert_eq!(w3e.to_f64(), Some(c.w3[l]), "w3 must be w - w1 - w2 rounded to nearest");
                assert!(within_half_grid(&w3e, g2), "n={n} l={l}");
            }
            for l in n..MAX_MODULI {
                assert_eq!((c.w1[l], c.w2[l], c.w3[l]), (0.0, 0.0, 0.0));
            }
            let (p1, p2) = (exact_int(c.p1), exact_int(c.p2));
            assert!(multiple_of(&p1, g1) && multiple_of(&p2, g2));
            let p3e = BigInt::from(p.clone()) - &p1 - &p2;
            assert_eq!(p3e.to_f64(), Some(c.p3));
            assert!(within_half_grid(&p3e, g2));
            assert!((p.to_f64().unwrap().log2() - m.log2_product()).abs() < 1e-9);
            // inv_p correctly rounded: no neighbour is closer to 1/P. With the
            // common scale 2^e, x = mx 2^e and |x P - 1| = |mx P - 2^-e| 2^e.
            let e = ilogb(c.inv_p) - 53;
            let dist = |x: f64| {
                let xp = exact_uint(ldexp(x, -e)) * p;
                let one = pow2((-e) as u64);
                if xp >= one {
                    xp - one
                } else {
                    one - xp
                }
            };
            let d0 = dist(c.inv_p);
            let up = f64::from_bits(c.inv_p.to_bits() + 1);
            let dn = f64::from_bits(c.inv_p.to_bits() - 1);
            assert!(d0 <= dist(up) && d0 <= dist(dn), "inv_p not nearest for n={n}");
            // T <= P/2 - P/2^24, and the next f64 above T exceeds it.
            let t = exact_uint(m.scaling_target());
            let lim = z_limit(p);
            assert!(t <= lim);
            if lim.bits() <= 53 {
                assert_eq!(t, lim);
            } else {
                assert!(exact_uint(f64::from_bits(m.scaling_target().to_bits() + 1)) > lim);
            }
            assert!(m.quotient_error_bound() < ldexp(1.0, -31));
            let r = m.reconstruction_abs_bound();
            if n <= 10 {
                assert_eq!(c.grid2, 0);
                assert!(c.w3.iter().all(|&w| w == 0.0) && c.p3 == 0.0);
                assert!(r < ldexp(1.0, -37));
            } else {
                assert!(r < ldexp(p.to_f64().unwrap(), -121));
            }
            assert!(m.qmax() <= 128 * n as u64 + 1);
            if n <= 5 {
                assert_eq!(c.grid1, 0);
            }
        }
        let m20 = Moduli::new(20).unwrap();
        assert_eq!((m20.crt().grid1, m20.crt().grid2), (113, 70));
        assert_eq!(std::mem::size_of::<CrtConstants>(), 528);
    }

    #[test]
    fn print_crt_constants() {
        println!("  N  log2(P)  grid1  grid2  qmax  log2(R)  log2(R/P)  log2(qerr)");
        for n in MIN_MODULI..=MAX_MODULI {
            let m = Moduli::new(n).unwrap();
            let c = m.crt();
            let lp = m.log2_product();
            let lr = m.reconstruction_abs_bound().log2();
            println!(
                "{n:3}  {lp:7.2}  {:5}  {:5}  {:4}  {lr:7.2}  {:9.2}  {:10.2}",
                c.grid1,
                c.grid2,
                m.qmax(),
                lr - lp,
                m.quotient_error_bound().log2()
            );
        }
    }

    #[test]
    fn residues_in_range_and_congruent() {
        assert_eq!(sym_mod(128, 256), -128);
        assert_eq!(sym_mod(127, 256), 127);
        assert_eq!(sym_mod(-128, 255), 127);
        let mut rng = Rng(1);
        let m = Moduli::new(MAX_MODULI).unwrap();
        let mut xs: Vec<i64> = vec![i64::MIN, i64::MIN + 1, -1, 0, 1, 127, 128, -128, -129, i64::MAX];
        xs.extend((0..2000).map(|_| rng.next_u64() as i64 >> rng.below(64)));
        for &x in &xs {
            let rs = m.residues(x);
            assert_eq!(rs.len(), MAX_MODULI);
            // Big-integer residues agree.
            assert_eq!(rs.map(i32::from).collect::<Vec<_>>(), residues_of(&BigInt::from(x), MAX_MODULI));
            for (r, p) in m.residues(x).zip(MODULI) {
                let (r, p) = (i64::from(r), i64::from(p));
                let (lo, hi) = if p == 256 { (-128, 127) } else { (-(p - 1) / 2, (p - 1) / 2) };
                assert!((lo..=hi).contains(&r), "x={x} p={p} r={r}");
                assert_eq!((i128::from(x) - i128::from(r)).rem_euclid(p.into()), 0);
            }
        }
    }

    #[test]
    fn big_to_f64_is_correctly_rounded() {
        use Rounding::{NearestEven, TowardZero};
        let one = BigUint::one();
        let int = |x: &BigUint| ratio_to_f64(x, &one, NearestEven);
        let mut rng = Rng(7);
        for _ in 0..2000 {
            // Against Rust's `u128 as f64` (round to nearest, ties to even).
            let a = (u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())) >> rng.below(128);
            assert_eq!(int(&BigUint::from(a)), a as f64, "a={a}");
            // Against num-bigint's own `to_f64` (ties to even since 0.4.4), with
            // runs of zeros or ones below the 53 kept bits.
            let fill = if rng.below(2) == 1 { (BigUint::one() << 40u32) - 1u32 } else { BigUint::zero() };
            let big = ((BigUint::from(a | 1) << 40u32) + fill) << (14 + rng.below(200)); // >= 2^54
            assert_eq!(int(&big), big.to_f64().unwrap(), "big={big}");
            // Toward zero: the largest f64 <= big.
            let tz = ratio_to_f64(&big, &one, TowardZero);
            assert!(exact_uint(tz) <= big && exact_uint(f64::from_bits(tz.to_bits() + 1)) > big);
            // Quotients: IEEE division of exact operands is correctly rounded.
            let x = rng.next_u64() >> rng.below(64) >> 11;
            let y = (rng.next_u64() >> rng.below(64) >> 11).max(1);
            let q = ratio_to_f64(&BigUint::from(x), &BigUint::from(y), NearestEven);
            assert_eq!(q, x as f64 / y as f64, "{x} / {y}");
        }
        // Ties go to even; any bit below the half breaks the tie upward.
        let two200 = ldexp(1.0, 200);
        assert_eq!(int(&(pow2(200) + pow2(147))), two200);
        assert_eq!(int(&(pow2(200) + pow2(147) + 1u32)), two200 + ldexp(1.0, 148));
        assert_eq!(int(&(pow2(200) + pow2(148) + pow2(147))), two200 + ldexp(1.0, 149));
        assert_eq!(ratio_to_f64(&(pow2(200) + pow2(147) + 1u32), &one, TowardZero), two200);
        // A tie of the quotient broken only by the remainder: (2^54 + 3) / 2 = 2^53 + 1.5.
        let two53 = ldexp(1.0, 53);
        assert_eq!(ratio_to_f64(&(pow2(54) + 3u32), &BigUint::from(2u32), NearestEven), two53 + 2.0);
        assert_eq!(ratio_to_f64(&(pow2(54) + 2u32), &BigUint::from(2u32), NearestEven), two53);
        assert_eq!(ratio_to_f64(&BigUint::from(1u32), &BigUint::from(3u32), NearestEven), 1.0 / 3.0);
        assert_eq!(int_to_f64(&BigInt::from(-5)), -5.0);
        assert_eq!(int_to_f64(&BigInt::zero()), 0.0);
        // Grid rounding: nearest multiple, ties toward +inf, for both signs.
        let grid = |x: i64, t: u64| round_to_grid(&BigInt::from(x), t).to_i64().unwrap();
        assert_eq!((grid(5, 1), grid(-5, 1), grid(-6, 2), grid(7, 0), grid(-7, 2)), (6, -4, -4, 7, -8));
    }

    #[test]
    fn ldexp_exact_and_rounded() {
        assert_eq!(ldexp(1.5, -1074), ldexp(1.0, -1073)); // tie -> even
        assert_eq!(ldexp(1.25, -1074), f64::from_bits(1));
        assert_eq!(ldexp(f64::from_bits(1), 1074), 1.0);
        assert_eq!(ldexp(f64::from_bits(1), 2097), ldexp(1.0, 1023));
        assert_eq!(ldexp(f64::from_bits(1), 2098), f64::INFINITY);
        assert_eq!(ldexp(f64::MAX, -2098), f64::from_bits(1)); // (2 - 2^-52) 2^-1075 rounds up
        assert_eq!(ldexp(f64::MAX, -2100), 0.0);
        assert_eq!(ldexp(-3.0, 2), -12.0);
        assert_eq!(ldexp(1.0, 1023), f64::from_bits(0x7fe0_0000_0000_0000));
        assert_eq!(ldexp(1.0, i32::MAX), f64::INFINITY);
        assert_eq!(ldexp(1.0, i32::MIN), 0.0);
        assert!(ldexp(f64::NAN, 3).is_nan());
        assert_eq!(ilogb(f64::from_bits(1)), -1074);
        assert_eq!(ilogb(f64::MAX), 1023);
        assert_eq!(ilogb(-0.75), -1);
        let mut rng = Rng(3);
        for _ in 0..1000 {
            let x = f64::from_bits(rng.next_u64() >> 2);
            let e = rng.below(400) as i32 - 200;
            let y = ldexp(x, e);
            if y.is_normal() && x.is_normal() {
                assert_eq!(ldexp(y, -e), x);
            }
        }
        // scale_to_int: exact truncation inside the i64 range, None outside.
        assert_eq!(scale_to_int(-2.75, 1), Some(-5));
        assert_eq!(scale_to_int(ldexp(1.0, 62) * 1.5, 0), Some(3 << 61));
        assert_eq!(scale_to_int(-1.0, 63), None); // -2^63 is excluded too
        assert_eq!(scale_to_int(f64::from_bits(1), 1073), Some(0)); // subnormal, < 1
        assert_eq!(scale_to_int(f64::INFINITY, -2000), None);
    }

    #[test]
    fn crt_round_trip_exact() {
        let mut rng = Rng(11);
        for n in MIN_MODULI..=MAX_MODULI {
            let m = Moduli::new(n).unwrap();
            let exact = exact_crt(n);
            let half = BigInt::from(&exact.p >> 1u32); // P is even
            let mut cases = vec![BigInt::zero(), BigInt::from(1), BigInt::from(-1)];
            cases.push(-half.clone()); // -P/2 is in range
            cases.push(&half - 1);
            for _ in 0..150 {
                cases.push(rng.signed_below(half.magnitude()));
            }
            for z in cases {
                let c = residues_of(&z, n);
                assert_eq!(reconstruct_exact(&c, &exact), z, "n={n}");
                // Unreduced inputs: add multiples of p_l.
                let c2: Vec<i32> = c.iter().zip(MODULI).map(|(&x, p)| x + 7 * p as i32).collect();
                assert_eq!(reconstruct_exact(&c2, &exact), z);
                assert_eq!(reconstruct(&c2, &m).unwrap().to_bits(), reconstruct(&c, &m).unwrap().to_bits());
            }
        }
        // An i64 at N = 20, through the public residues.
        let m = Moduli::new(20).unwrap();
        let z = i64::MIN + 1;
        let c: Vec<i32> = m.residues(z).map(i32::from).collect();
        assert_eq!(reconstruct_exact(&c, &exact_crt(20)), BigInt::from(z));
        // At N = 20 a small Z is only reconstructed to within R ~ 2^32.5.
        let err = (reconstruct(&c, &m).unwrap() - z as f64).abs();
        assert!(err <= U * (z as f64).abs() + m.reconstruction_abs_bound(), "err={err:e}");
        // Wrong lengths are typed errors.
        assert!(matches!(reconstruct(&c[..19], &m), Err(EmulationError::InvalidDimensions(_))));
        assert!(matches!(reconstruct(&[0; 21], &m), Err(EmulationError::InvalidDimensions(_))));
    }

    /// |Zhat - Z| <= (u + 2u^2)|Z| + R, checked exactly.
    fn check_recon(m: &Moduli, exact: &ExactCrt, c: &[i32], worst: &mut f64) -> bool {
        let z = reconstruct_exact(c, exact);
        if z.magnitude() > &z_limit(&exact.p) {
            return false; // outside the guaranteed range
        }
        let zh = reconstruct(c, m).unwrap();
        let err = (exact_int(zh) - &z).magnitude().to_f64().unwrap();
        let bound = (U + 2.0 * U * U) * z.magnitude().to_f64().unwrap() + m.reconstruction_abs_bound();
        assert!(err <= bound * (1.0 + 1e-12), "n={} err={err:e} bound={bound:e}", m.n());
        if bound > 0.0 {
            *worst = worst.max(err / bound);
        }
        true
    }

    #[test]
    fn f64_reconstruction_within_bound() {
        let mut rng = Rng(5);
        for n in 8..=MAX_MODULI {
            let m = Moduli::new(n).unwrap();
            let exact = exact_crt(n);
            let mut worst = 0.0f64;
            let mut checked = 0;
            // Random residues (Z uniform in [-P/2, P/2)).
            for _ in 0..300 {
                let c: Vec<i32> =
                    MODULI[..n].iter().map(|&p| (rng.below(p.into()) as i64 - i64::from(p) / 2) as i32).collect();
                checked += usize::from(check_recon(&m, &exact, &c, &mut worst));
            }
            // Extreme Z: at the guaranteed limit, tiny, and random of every size.
            let lim = BigInt::from(z_limit(&exact.p));
            let mut zs = vec![lim.clone(), -lim.clone(), &lim - 1, BigInt::zero(), BigInt::from(1), BigInt::from(-3)];
            for _ in 0..50 {
                let nb = rng.below(exact.p.bits() - 1) + 1;
                let z = rng.signed_below(&pow2(nb));
                zs.push(z.clone().clamp(-lim.clone(), lim.clone()));
            }
            for z in zs {
                assert!(check_recon(&m, &exact, &residues_of(&z, n), &mut worst));
                checked += 1;
            }
            assert!(checked > 300);
            assert!(worst <= 1.0);
        }
    }

    #[test]
    fn exact_small_integer_products() {
        let mut rng = Rng(9);
        let (m, n, k) = (5, 4, 7);
        let a: Vec<f64> = (0..m * k).map(|_| rng.below(201) as f64 - 100.0).collect();
        let b: Vec<f64> = (0..k * n).map(|_| rng.below(201) as f64 - 100.0).collect();
        for nm in 8..=MAX_MODULI {
            let md = Moduli::new(nm).unwrap();
            let c = emulate_dgemm_cpu(m, n, k, &a, &b, &md).unwrap();
            for i in 0..m {
                for j in 0..n {
                    let e: f64 = (0..k).map(|h| a[i * k + h] * b[h * n + j]).sum();
                    assert_eq!(c[i * n + j], e, "N={nm}");
                }
            }
        }
    }

    #[test]
    fn scaled_bound_holds_exactly() {
        let mut rng = Rng(13);
        for &nm in &[2usize, 5, 8, 12, 14, 16, 17, 18, 20] {
            let md = Moduli::new(nm).unwrap();
            let p = exact_crt(nm).p;
            let lim = z_limit(&p);
            let k = 1 + rng.below(60) as usize;
            let (m, n) = (6, 5);
            let mut mats: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
            for &phi in &[0.5, 2.0, 8.0] {
                mats.push((test_matrix(&mut rng, m * k, phi), test_matrix(&mut rng, k * n, phi)));
            }
            // Adversarial: Cauchy–Schwarz tight (parallel rows/columns), huge and tiny values.
            let row: Vec<f64> = (0..k).map(|h| 1.0 + (h % 3) as f64 * 0.25).collect();
            let a: Vec<f64> = (0..m * k).map(|idx| row[idx % k] * ldexp(1.0, (idx / k) as i32 * 300 - 900)).collect();
            let b: Vec<f64> = (0..k * n).map(|idx| row[idx / n] * ldexp(1.0, (idx % n) as i32 * 400 - 1070)).collect();
            mats.push((a, b));
            let a: Vec<f64> = (0..m * k).map(|_| f64::from_bits(rng.below(1 << 52) + 1)).collect(); // subnormal
            let b: Vec<f64> = (0..k * n).map(|_| f64::MAX * (rng.uniform() - 0.5)).collect();
            mats.push((a, b));
            // Accurate mode: a row of A whose large element meets only B's
            // small ones (the bound on |A||B| far below the norms').
            let a: Vec<f64> = (0..m * k).map(|idx| if idx % k == idx / k % k { 1e30 } else { 1.0 }).collect();
            let b: Vec<f64> = (0..k * n).map(|idx| if idx / n == idx % n % k { 1e-30 } else { 1.0 }).collect();
            mats.push((a, b));
            for ((a, b), mode) in mats.iter().flat_map(|ab| [(ab, Mode::Fast), (ab, Mode::Accurate)]) {
                let (mu, nu) = match mode {
                    Mode::Fast => (
                        row_exponents(a, m, k, k, Layout::RowMajor, &md).unwrap(),
                        col_exponents(b, k, n, n, Layout::RowMajor, &md).unwrap(),
                    ),
                    Mode::Accurate => accurate_exponents(m, n, k, a, b, &md).unwrap(),
                };
                assert!(mu.iter().chain(&nu).all(|e| (MIN_EXPONENT..=MAX_EXPONENT).contains(e)));
                let ai: Vec<i64> = (0..m * k).map(|idx| scale_to_int(a[idx], mu[idx / k]).unwrap()).collect();
                let bi: Vec<i64> = (0..k * n).map(|idx| scale_to_int(b[idx], nu[idx % n]).unwrap()).collect();
                for i in 0..m {
                    for j in 0..n {
                        let s: BigUint = (0..k)
                            .map(|h| {
                                let t =
                                    u128::from(ai[i * k + h].unsigned_abs()) * u128::from(bi[h * n + j].unsigned_abs());
                                BigUint::from(t)
                            })
                            .sum();
                        assert!(&s << 1u32 < p, "sum |A'||B'| >= P/2 (N={nm}, {mode:?})");
                        assert!(s <= lim, "sum |A'||B'| > P/2 - P/2^24 (N={nm}, {mode:?})");
                    }
                }
            }
        }
    }

    #[test]
    fn exponents_near_optimal_and_capped() {
        let mut rng = Rng(17);
        for &nm in &[4usize, 10, 14, 16, 20] {
            let md = Moduli::new(nm).unwrap();
            let t = md.scaling_target();
            for _ in 0..50 {
                let k = 1 + rng.below(100) as usize;
                let x = test_matrix(&mut rng, k, 1.0);
                let scale = ldexp(1.0, rng.below(200) as i32 - 100);
                let x: Vec<f64> = x.iter().map(|v| v * scale).collect();
                let mu = line_exponent(k, |h| x[h], &md).unwrap();
                assert_eq!(row_exponents(&x, 1, k, k, Layout::RowMajor, &md), Ok(vec![mu]));
                assert_eq!(col_exponents(&x, k, 1, 1, Layout::RowMajor, &md), Ok(vec![mu]));
                let amax = x.iter().fold(0.0f64, |a, v| a.max(v.abs()));
                let cap = 62 - ilogb(amax);
                let nrm2: f64 = x.iter().map(|v| ldexp(*v, mu) * ldexp(*v, mu)).sum();
                assert!(nrm2 < t);
                assert!(mu <= cap);
                assert!(ldexp(amax, mu) < ldexp(1.0, 63));
                if mu < cap {
                    assert!(4.0 * nrm2 > t * (1.0 - 1e-9), "exponent not maximal");
                }
            }
        }
        // ||(3, -4)|| = 5: the scaled squared norm lands in [T/4, T).
        let md = Moduli::new(8).unwrap();
        let mu = line_exponent(2, |h| [3.0, -4.0][h], &md).unwrap();
        let nrm2 = 25.0 * 4f64.powi(mu);
        assert!(nrm2 < md.scaling_target() && 4.0 * nrm2 >= 0.99 * md.scaling_target());
        // Single-element row at N = 20: capped at 2^62.
        let md = Moduli::new(20).unwrap();
        let mu = row_exponents(&[1.0, 0.0, 0.0], 1, 3, 3, Layout::RowMajor, &md).unwrap();
        assert_eq!(mu, vec![62]);
        assert_eq!(scale_to_int(1.0, mu[0]), Some(1i64 << 62));
        // Extremes of finite input stay inside [MIN_EXPONENT, MAX_EXPONENT].
        let huge = vec![f64::MAX; 1000];
        let lo = row_exponents(&huge, 1, 1000, 1000, Layout::RowMajor, &Moduli::new(MIN_MODULI).unwrap()).unwrap()[0];
        let hi = row_exponents(&[f64::from_bits(1)], 1, 1, 1, Layout::RowMajor, &md).unwrap()[0];
        assert_eq!(hi, 62 + 1074);
        assert!((MIN_EXPONENT..-1000).contains(&lo) && hi <= MAX_EXPONENT, "lo={lo} hi={hi}");
        // Column-major layouts agree with row-major ones.
        let mut rng = Rng(19);
        let (m, k) = (4, 6);
        let a = test_matrix(&mut rng, m * k, 2.0); // row-major m x k
        let a_cm: Vec<f64> = (0..m * k).map(|idx| a[(idx % m) * k + idx / m]).collect();
        assert_eq!(
            row_exponents(&a, m, k, k, Layout::RowMajor, &md),
            row_exponents(&a_cm, m, k, m, Layout::ColMajor, &md)
        );
        assert_eq!(
            col_exponents(&a_cm, m, k, m, Layout::ColMajor, &md),
            col_exponents(&a, m, k, k, Layout::RowMajor, &md)
        );
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let md = Moduli::new(14).unwrap();
        let (m, n, k) = (3, 2, 4);
        let good_a = vec![1.0; m * k];
        let good_b = vec![1.0; k * n];
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut a = good_a.clone();
            a[2 * k + 1] = bad;
            assert_eq!(
                emulate_dgemm_cpu(m, n, k, &a, &good_b, &md),
                Err(EmulationError::NonFinite { line: Line::RowOfA, index: 2 })
            );
            let mut b = good_b.clone();
            b[3 * n + 1] = bad;
            assert_eq!(
                emulate_dgemm_cpu(m, n, k, &good_a, &b, &md),
                Err(EmulationError::NonFinite { line: Line::ColumnOfB, index: 1 })
            );
            // Column-major A: element (2, 1) at 2 + 1*3.
            let mut a_cm = good_a.clone();
            a_cm[2 + 3] = bad;
            assert_eq!(
                row_exponents(&a_cm, m, k, m, Layout::ColMajor, &md),
                Err(EmulationError::NonFinite { line: Line::RowOfA, index: 2 })
            );
        }
        let dims = |r: Result<Vec<f64>, EmulationError>| matches!(r, Err(EmulationError::InvalidDimensions(_)));
        let dims_i = |r: Result<Vec<i32>, EmulationError>| matches!(r, Err(EmulationError::InvalidDimensions(_)));
        assert!(dims(emulate_dgemm_cpu(m, n, k, &good_a[..5], &good_b, &md)));
        assert!(dims(emulate_dgemm_cpu(m, n, k, &good_a, &good_b[..7], &md)));
        assert!(dims(emulate_dgemm_cpu(usize::MAX, 2, 2, &good_a, &good_b, &md)));
        assert!(dims(emulate_dgemm_cpu(1 << 40, 1 << 40, 0, &[], &[], &md))); // m*n overflows
        assert!(dims(emulate_dgemm_cpu(1 << 31, 1 << 31, 0, &[], &[], &md))); // too large to allocate
        assert!(dims(emulate_dgemm_cpu(0, 0, MAX_K + 1, &[], &[], &md)));
        assert!(dims(emulate_dgemm_cpu(usize::MAX / 2, 0, 0, &[], &[], &md))); // m exponents can't be allocated
        assert!(dims_i(row_exponents(&[], usize::MAX / 2, 0, 1, Layout::RowMajor, &md)));
        assert!(dims_i(col_exponents(&[], 0, usize::MAX / 2, usize::MAX / 2, Layout::RowMajor, &md)));
        assert!(dims_i(row_exponents(&good_a, m, k, k - 1, Layout::RowMajor, &md)));
        assert!(dims_i(row_exponents(&good_a, m, k, m - 1, Layout::ColMajor, &md)));
        assert!(dims_i(row_exponents(&good_a, m + 1, k, k, Layout::RowMajor, &md)));
        assert!(dims_i(row_exponents(&good_a, 2, usize::MAX, usize::MAX, Layout::RowMajor, &md)));
        assert!(dims_i(col_exponents(&good_b, k, n, n - 1, Layout::RowMajor, &md)));
        assert!(dims_i(col_exponents(&good_b, k, n, k - 1, Layout::ColMajor, &md)));
        assert!(dims_i(col_exponents(&good_b, k + 1, n, n, Layout::RowMajor, &md)));
        // Strided access with lda > k reads only inside the slice.
        assert_eq!(row_exponents(&[1.0, 9.0, 2.0], 2, 1, 2, Layout::RowMajor, &md).unwrap().len(), 2);
        // Extreme but finite values are fine.
        let a = vec![f64::MAX, -f64::MAX, f64::from_bits(1), 0.0];
        let b = vec![0.5, 0.0, -0.25, 1.0];
        let c = emulate_dgemm_cpu(1, 1, 4, &a, &b, &md).unwrap();
        assert_eq!(c[0], f64::MAX * 0.5);
        assert_eq!(emulate_dgemm_cpu(2, 3, 0, &[], &[], &md).unwrap(), vec![0.0; 6]);
        assert_eq!(emulate_dgemm_cpu(0, 3, 2, &[], &[0.0; 6], &md).unwrap(), Vec::<f64>::new());
        // Longer slices than needed are fine.
        assert_eq!(emulate_dgemm_cpu(1, 1, 1, &[2.0, 9.0], &[3.0, 9.0], &md).unwrap(), vec![6.0]);
        // Errors print.
        let e = EmulationError::NonFinite { line: Line::ColumnOfB, index: 3 };
        assert_eq!(e.to_string(), "ColumnOfB 3 contains Inf or NaN; not representable by Ozaki scheme II");
    }

    #[test]
    fn int8_gemm_blocking_long_k() {
        assert_eq!(int8_gemm_mod(1, 1, 2, &[100, 100], &[100, 100], 255), vec![sym_mod(20000, 255) as i32]);
        let mut rng = Rng(21);
        let k = MAX_K_PER_PRODUCT + 70_000;
        let vec = |rng: &mut Rng| -> Vec<i8> {
            (0..k).map(|h| if h % 5 == 0 { -128 } else { rng.next_u64() as i8 }).collect()
        };
        let a = vec(&mut rng);
        let b = vec(&mut rng);
        let exact: i64 = a.iter().zip(&b).map(|(&x, &y)| i64::from(x) * i64::from(y)).sum();
        for p in [256u32, 255, 173] {
            let c = int8_gemm_mod(1, 1, k, &a, &b, p);
            assert_eq!(i64::from(c[0]), sym_mod(exact, p));
        }
    }

    /// Emulation errors for random 37 x 29 x 53 matrices against a
    /// double-double reference. Also checks the documented per-entry bound.
    fn error_table(phi: f64, seed: u64) -> Vec<(usize, f64, f64)> {
        error_table_mode(phi, seed, Mode::Fast)
    }

    fn error_table_mode(phi: f64, seed: u64, mode: Mode) -> Vec<(usize, f64, f64)> {
        let (m, n, k) = (37, 29, 53);
        let mut rng = Rng(seed);
        let a = test_matrix(&mut rng, m * k, phi);
        let b = test_matrix(&mut rng, k * n, phi);
        let reference = ref_gemm(m, n, k, &a, &b);
        let mut rows = Vec::new();
        for nm in MIN_MODULI..=MAX_MODULI {
            let md = Moduli::new(nm).unwrap();
            let c = emulate_dgemm_cpu_mode(m, n, k, &a, &b, &md, mode).unwrap();
            let (mu, nu) = match mode {
                Mode::Fast => (
                    row_exponents(&a, m, k, k, Layout::RowMajor, &md).unwrap(),
                    col_exponents(&b, k, n, n, Layout::RowMajor, &md).unwrap(),
                ),
                Mode::Accurate => accurate_exponents(m, n, k, &a, &b, &md).unwrap(),
            };
            let mut rel = Vec::with_capacity(m * n);
            for i in 0..m {
                let a1: f64 = (0..k).map(|h| a[i * k + h].abs()).sum();
                for j in 0..n {
                    let (hi, lo) = reference[i * n + j];
                    let err = ((c[i * n + j] - hi) - lo).abs();
                    rel.push(err / hi.abs());
                    // Documented bound.
                    let b1: f64 = (0..k).map(|h| b[h * n + j].abs()).sum();
                    let (rho, sigma) = (ldexp(1.0, -mu[i]), ldexp(1.0, -nu[j]));
                    let trunc = rho * b1 + sigma * a1 + k as f64 * rho * sigma;
                    let bound = (U + 2.0 * U * U) * hi.abs()
                        + (1.0 + U + 2.0 * U * U) * trunc
                        + rho * sigma * md.reconstruction_abs_bound();
                    assert!(err <= bound * (1.0 + 1e-6), "N={nm} ({i},{j}) err={err:e} bound={bound:e}");
                }
            }
            let mx = rel.iter().copied().fold(0.0, f64::max);
            rows.push((nm, median(&mut rel), mx));
        }
        rows
    }

    fn check_and_print(phi: f64, rows: &[(usize, f64, f64)]) {
        println!("phi = {phi}: 37 x 29 x 53, relative error vs double-double reference");
        println!("  N  log2(P)   median rel err   max rel err");
        for &(nm, med, mx) in rows {
            let lp = Moduli::new(nm).unwrap().log2_product();
            println!("{nm:3}  {lp:7.2}   {med:14.3e}   {mx:11.3e}");
        }
        for w in rows.windows(2) {
            if w[0].1 > 1e-14 {
                assert!(w[1].1 < w[0].1, "median error must decrease while above 1e-14: {w:?}");
            }
        }
    }

    #[test]
    fn emulation_error_table_phi_0_5() {
        let rows = error_table(0.5, 101);
        check_and_print(0.5, &rows);
        for &(nm, med, _) in &rows {
            if (14..=16).contains(&nm) {
                assert!(med <= 3e-15, "N={nm}: median {med:e}");
            }
            if nm >= 16 {
                assert!(med <= 2e-16, "N={nm}: median {med:e}");
            }
        }
    }

    #[test]
    fn accurate_mode_keeps_more_bits_where_exponents_spread() {
        // Same inputs, both modes. The fast mode's margin is already exact
        // (no log2 estimates), so the accurate mode gains a fraction of a
        // bit, not a modulus: its median error is within 1.5x of the fast
        // mode's at every count, and at phi >= 1 smaller at most counts
        // (5-25% at 37 x 29 x 53).
        for (phi, seed) in [(0.5, 101), (1.0, 202), (2.0, 303), (4.0, 404)] {
            let fast = error_table_mode(phi, seed, Mode::Fast);
            let accurate = error_table_mode(phi, seed, Mode::Accurate);
            println!("phi = {phi}:   N   fast median   accurate median");
            for (f, a) in fast.iter().zip(&accurate) {
                println!("            {:3}   {:11.3e}   {:15.3e}", f.0, f.1, a.1);
                assert!(a.1 <= f.1 * 1.5 + 2e-16, "phi {phi} N {}: accurate {:e} > fast {:e}", f.0, a.1, f.1);
            }
            if phi >= 1.0 {
                let better = fast.iter().zip(&accurate).filter(|(f, a)| f.0 <= 15 && a.1 < f.1).count();
                assert!(better >= 10, "phi {phi}: the accurate mode smaller at only {better} of 14 moduli counts");
            }
        }
    }

    #[test]
    fn emulation_error_table_phi_1() {
        let rows = error_table(1.0, 202);
        check_and_print(1.0, &rows);
        assert!(rows.last().unwrap().1 <= 2e-16);
    }

    #[test]
    fn emulation_error_table_phi_2() {
        let rows = error_table(2.0, 303);
        check_and_print(2.0, &rows);
        assert!(rows.last().unwrap().1 <= 1e-15);
    }
}
