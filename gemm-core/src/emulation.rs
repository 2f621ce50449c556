//! Ozaki scheme II on INT8 tensor cores: the constants and the exact rules
//! that the host's reference (`gemm::emulation`) and the GPU kernels share,
//! so that the two cannot disagree about a single bit.
//!
//! An f64 (or f32) product `C = A B` is emulated with `N` exact INT8
//! products: each row of A and column of B is scaled by a power of two
//! (the rule of [`exponent_from_sum`]), truncated to an integer, and split into its
//! symmetric residues modulo the first `N` of [`MODULI`] ([`sym_mod`]); the
//! residue matrices are multiplied on INT8 tensor cores with exact i32
//! accumulation, and each entry of C is rebuilt by the Chinese remainder
//! theorem ([`CrtConstants`]) and scaled back ([`ldexp`]). The derivations
//! and error bounds are in the host module's docs (`gemm::emulation`).
//!
//! # Launch geometry (the GPU path)
//! * **Exponents** (entry points `emulation_exponents_{f64,f32}`, grid
//!   [`exponent_grid`]): one warp
//!   per line (a row of A or a column of B), [`EXPONENT_THREADS`] per block
//!   (`emulation_exponents_strided_*` where a line's elements are not
//!   contiguous: [`EXPONENT_LINES`] lines a block, a lane a line);
//!   the sum of squares as [`SUM_LANES`] interleaved partial sums combined
//!   by a butterfly ([`butterfly_sum`]).
//! * **Residues** (`emulation_residues_{f64,f32}`): a block of
//!   [`RESIDUE_THREADS`] converts a tile of [`RESIDUE_LINES`] lines by
//!   [`RESIDUE_K`] elements of k through shared memory (coalesced reads in
//!   either layout) and writes, for each modulus, the tile's residues K-major
//!   (4 bytes a thread, 128 bytes a warp): `lines x block_k` i8 matrices, one per modulus and
//!   k block ([`k_blocks`]), each `lines * block_k` bytes after the previous.
//! * **Reconstruction** (`emulation_reconstruct_{f64,f32}`): one thread per
//!   element of C, [`RECONSTRUCT_THREADS`] per block, a grid-sized stride
//!   ([`reconstruct_grid`]).
//! * **The accurate mode's bound** (first pass): the exponent kernels give
//!   coarse shifts ([`COARSE_BITS`]), the residue kernel coarse magnitudes
//!   ([`coarse`], one matrix per k block), stage 9 their product per panel;
//!   `emulation_bound_max` ([`bound_grid`]: [`BOUND_ROWS`] rows by
//!   [`BOUND_THREADS`] columns a block) takes its row and column maxima,
//!   `emulation_bound_exponents` ([`bound_exponents_grid`]) turns them into
//!   the exponents ([`exponent_from_bound`]).
//!
//! Source: K. Ozaki, Y. Uchino, T. Imamura, "Ozaki Scheme II: A
//! GEMM-oriented emulation of floating-point matrix multiplication using an
//! integer modular technique", 2025.

use crate::geometry::ceil_div;

/// Largest number of moduli, `N <= 20`. `P` then reaches about `2^155.4`.
pub const MAX_MODULI: usize = 20;

/// Smallest supported number of moduli.
pub const MIN_MODULI: usize = 2;

/// The moduli: pairwise coprime, all `<= 256`, largest first. `N` moduli
/// means the first `N` entries. `256 = 2^8`, `255 = 3*5*17`,
/// `253 = 11*23`, `247 = 13*19`, `217 = 7*31`; the others are prime.
///
/// ```
/// use gemm_core::emulation::MODULI;
/// assert_eq!(&MODULI[..3], &[256, 255, 253]);
/// ```
pub const MODULI: [u32; MAX_MODULI] =
    [256, 255, 253, 251, 247, 241, 239, 233, 229, 227, 223, 217, 211, 199, 197, 193, 191, 181, 179, 173];

/// Largest `k` one INT8 product may have and still accumulate exactly in
/// `i32`: symmetric residues have `|r| <= 128`, so a product's terms are at
/// most `2^14` and `k 2^14 < 2^31` for `k <= 131071`. A longer `k` is split
/// into blocks ([`k_blocks`]) whose results are reduced modulo `p` before
/// they are added.
pub const MAX_K_PER_PRODUCT: usize = (1usize << 17) - 1;

/// Lines of A or B per block of the residue kernel.
pub const RESIDUE_LINES: u32 = 32;
/// Elements of k per block of the residue kernel; every k block
/// ([`k_blocks`]) is a multiple of it.
pub const RESIDUE_K: u32 = 128;
/// Threads per block of the residue kernel.
pub const RESIDUE_THREADS: u32 = 256;
/// Dynamic shared memory of the residue kernel: the tile as f64, its lines
/// `RESIDUE_K + 1` apart.
pub const RESIDUE_SMEM_BYTES: u32 = RESIDUE_LINES * (RESIDUE_K + 1) * 8;
/// Threads per block of the exponent kernel (a warp a line).
pub const EXPONENT_THREADS: u32 = 256;

/// Lines per block of the exponent kernel for lines whose elements are not
/// contiguous (`emulation_exponents_strided_*`): `EXPONENT_LINES` warps of
/// 32 threads, warp c summing the elements `h = c, c + 32, ...` of each of
/// its 32 lines (a lane a line).
pub const EXPONENT_LINES: u32 = 32;

/// Dynamic shared memory of the strided exponent kernel: a 32 x 33 tile of
/// f64 and one of u32.
pub const EXPONENT_STRIDED_SMEM_BYTES: u32 = EXPONENT_LINES * 33 * (8 + 4);

/// The partial sums of a line's sum of squares: element `h` goes to partial
/// `h % SUM_LANES` (a lane of the exponent kernel's warp), each summed by
/// fused multiply-adds in ascending `h`, then combined by
/// [`butterfly_sum`].
pub const SUM_LANES: usize = 32;

/// The butterfly that combines the [`SUM_LANES`] partial sums: for masks
/// 16, 8, 4, 2, 1, every partial becomes `p[l] + p[l ^ mask]` (what
/// `shfl.sync.bfly` and one add give each lane: every lane ends with the
/// same value, as addition commutes exactly); the result is `p[0]`.
///
/// ```
/// use gemm_core::emulation::butterfly_sum;
/// let mut p = [0.0; 32];
/// p[3] = 1.0;
/// p[30] = 2.0;
/// assert_eq!(butterfly_sum(p), 3.0);
/// ```
pub fn butterfly_sum(mut p: [f64; SUM_LANES]) -> f64 {
    let mut mask = SUM_LANES / 2;
    while mask > 0 {
        let prev = p;
        let mut l = 0;
        while l < SUM_LANES {
            p[l] = prev[l] + prev[l ^ mask];
            l += 1;
        }
        mask /= 2;
    }
    p[0]
}
/// Threads per block of the reconstruction kernel (one element of C each).
pub const RECONSTRUCT_THREADS: u32 = 256;

/// Blocks per SM of the reconstruction's grid at most (its threads then
/// stride over C).
pub const RECONSTRUCT_BLOCKS_PER_SM: u32 = 8;

/// The reconstruction's grid (blocks) over `elems` elements of C on a
/// device of `sm_count` SMs: a thread an element, at most
/// [`RECONSTRUCT_BLOCKS_PER_SM`] blocks an SM, at least one block.
///
/// ```
/// use gemm_core::emulation::reconstruct_grid;
/// assert_eq!(reconstruct_grid(1000, 132), 4);
/// assert_eq!(reconstruct_grid(1 << 30, 132), 1056);
/// assert_eq!(reconstruct_grid(0, 132), 1);
/// ```
pub const fn reconstruct_grid(elems: u64, sm_count: u32) -> u32 {
    let blocks = elems.div_ceil(RECONSTRUCT_THREADS as u64);
    let most = sm_count as u64 * RECONSTRUCT_BLOCKS_PER_SM as u64;
    if blocks < 1 {
        1
    } else if blocks > most {
        most as u32
    } else {
        blocks as u32
    }
}

/// The exponent kernels' grid (blocks) over `lines` lines: a warp a line,
/// [`EXPONENT_THREADS`] a block, where a line's elements are contiguous
/// (`emulation_exponents_*`); else [`EXPONENT_LINES`] lines a block
/// (`emulation_exponents_strided_*`).
///
/// ```
/// use gemm_core::emulation::exponent_grid;
/// assert_eq!(exponent_grid(130, true), 17);
/// assert_eq!(exponent_grid(130, false), 5);
/// ```
pub const fn exponent_grid(lines: u32, contiguous: bool) -> u32 {
    if contiguous {
        (lines as u64 * SUM_LANES as u64).div_ceil(EXPONENT_THREADS as u64) as u32
    } else {
        ceil_div(lines, EXPONENT_LINES)
    }
}

/// Dynamic shared memory of the reconstruction kernel: its 104 f64
/// constants (the CRT weights' three parts, `P`'s three parts, `1/P`, the
/// moduli and their inverses).
pub const RECONSTRUCT_SMEM_BYTES: u32 = (5 * MAX_MODULI as u32 + 4) * 8;

/// The exponent the scaling kernel writes for a line holding an Inf or NaN:
/// its residues are 0, and each entry of C that depends on it is computed by
/// a plain f64 dot product instead (fused multiply-adds in ascending k).
pub const NON_FINITE: i32 = i32::MIN;

/// The largest k block: a multiple of [`RESIDUE_K`] no larger than
/// [`MAX_K_PER_PRODUCT`].
pub const MAX_BLOCK_K: usize = MAX_K_PER_PRODUCT / RESIDUE_K as usize * RESIDUE_K as usize;

/// How k is cut for the INT8 products: `(blocks, block_k)`, the fewest
/// blocks of at most [`MAX_BLOCK_K`] and the k of each, a multiple of
/// [`RESIDUE_K`] (the last block's elements past k are zero residues).
///
/// ```
/// use gemm_core::emulation::k_blocks;
/// assert_eq!(k_blocks(1000), (1, 1024));
/// assert_eq!(k_blocks(1025), (1, 1152));
/// assert_eq!(k_blocks(200_000), (2, 100_096));
/// assert_eq!(k_blocks(0), (1, 128));
/// ```
pub const fn k_blocks(k: usize) -> (usize, usize) {
    let k = if k == 0 { 1 } else { k };
    let blocks = k.div_ceil(MAX_BLOCK_K);
    let per = k.div_ceil(blocks);
    (blocks, per.div_ceil(RESIDUE_K as usize) * RESIDUE_K as usize)
}

/// The residue kernel's grid for `lines` lines cut in `blocks` k blocks of
/// `block_k`: (k tiles, line tiles).
pub const fn residue_grid(lines: u32, blocks: u32, block_k: u32) -> [u32; 2] {
    [blocks * (block_k / RESIDUE_K), ceil_div(lines, RESIDUE_LINES)]
}

/// The `f64` constants the GPU reconstruction needs, for one `N` (unused
/// trailing entries 0), `#[repr(C)]` so that it is passed to the kernel by
/// value as it is (528 bytes). Built by `gemm::emulation::Moduli::new` in
/// exact integer arithmetic:
/// * `w1[l]`: the multiple of `2^grid1` nearest to the CRT weight
///   `w_l = (M_l y_l) mod P` (exact); `w2[l]`: the multiple of `2^grid2`
///   nearest to `w_l - w1[l]` (exact); `w3[l]`: the rest rounded to nearest
///   (the only rounded weight).
/// * `p1`, `p2`, `p3`: `P` split the same way; `inv_p`: `1/P` rounded to
///   nearest.
/// * `grid1`, `grid2`: the smallest grids for which every sum marked exact
///   in the reconstruction is exact.
///
/// ```
/// use gemm_core::emulation::CrtConstants;
/// assert_eq!(core::mem::size_of::<CrtConstants>(), 528);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct CrtConstants {
    /// High parts of the CRT weights (exact multiples of `2^grid1`).
    pub w1: [f64; MAX_MODULI],
    /// Middle parts of the CRT weights (exact multiples of `2^grid2`).
    pub w2: [f64; MAX_MODULI],
    /// Low parts of the CRT weights (rounded to nearest).
    pub w3: [f64; MAX_MODULI],
    /// High part of `P` (exact).
    pub p1: f64,
    /// Middle part of `P` (exact).
    pub p2: f64,
    /// Low part of `P` (rounded to nearest).
    pub p3: f64,
    /// `1/P`, correctly rounded to nearest.
    pub inv_p: f64,
    /// Number of moduli `N`.
    pub n: u32,
    /// Exponent of the grid of `w1` and `p1`.
    pub grid1: i32,
    /// Exponent of the grid of `w2` and `p2`.
    pub grid2: i32,
    /// Explicit padding, always 0, so that the struct has no uninitialised
    /// bytes.
    pub pad: i32,
}

/// `x * 2^e`, rounded once to nearest-even (C's `scalbn`): exact unless the
/// result overflows (to `±Inf`) or is subnormal (one rounding). As musl's
/// `scalbn`: scaling down, the first step also multiplies by `2^53`, so that
/// only the last multiplication can round. `NaN` and `±Inf` pass through.
///
/// ```
/// use gemm_core::emulation::ldexp;
/// assert_eq!(ldexp(3.0, -1), 1.5);
/// assert_eq!(ldexp(1.0, -1074), f64::from_bits(1));
/// assert_eq!(ldexp(1.0, 1024), f64::INFINITY);
/// ```
#[inline(always)]
pub fn ldexp(x: f64, e: i32) -> f64 {
    let two_1023 = f64::from_bits(0x7fe0_0000_0000_0000); // 2^1023
    let two_m969 = f64::from_bits(0x0360_0000_0000_0000); // 2^-1022 * 2^53
    let mut y = x;
    let mut n = e;
    if n > 1023 {
        y *= two_1023;
        n -= 1023;
        if n > 1023 {
            y *= two_1023;
            n -= 1023;
            if n > 1023 {
                n = 1023;
            }
        }
    } else if n < -1022 {
        y *= two_m969;
        n += 1022 - 53;
        if n < -1022 {
            y *= two_m969;
            n += 1022 - 53;
            if n < -1022 {
                n = -1022;
            }
        }
    }
    y * f64::from_bits(((0x3ff + n) as u64) << 52)
}

/// `floor(log2 |x|)` for finite nonzero `x` (subnormals included).
///
/// ```
/// use gemm_core::emulation::ilogb;
/// assert_eq!(ilogb(-3.0), 1);
/// assert_eq!(ilogb(f64::from_bits(1)), -1074);
/// ```
#[inline(always)]
pub fn ilogb(x: f64) -> i32 {
    let bits = x.to_bits() & !(1u64 << 63);
    let be = (bits >> 52) as i32;
    if be == 0 {
        63 - bits.leading_zeros() as i32 - 1074
    } else {
        be - 1023
    }
}

/// Steps 4-6 of the scaling rule (host docs, "The scaling rule"): from the
/// sum of squares `s` of a line of length `len` scaled by `2^-e` (`e` the
/// `ilogb` of its largest magnitude, `s >= 1`), the line's exponent for the
/// scaling target `target` (`Moduli::scaling_target`).
///
/// ```
/// use gemm_core::emulation::exponent_from_sum;
/// // One element 1.0 (e = 0, s = 1) and a target of 2^100: 4^50 = 2^100.
/// assert_eq!(exponent_from_sum(1.0, 1, 0, 2f64.powi(100)), 49);
/// ```
#[inline(always)]
pub fn exponent_from_sum(s: f64, len: u64, e: i32, target: f64) -> i32 {
    let f_k = 1.0 + (len as f64 + 4.0) * ldexp(1.0, -52);
    let g = quarter_power(s * f_k, target) - e;
    if g < 62 - e {
        g
    } else {
        62 - e
    }
}

/// The largest integer `g` with `s 4^g <= target`, exactly, for positive
/// normal `s` and `target`: write `s = ms 2^es` and `target = mt 2^et`
/// with `ms, mt` in `[1, 2)` and `d = et - es`; then `g = floor(d/2)`,
/// minus one where `2g == d` and `ms > mt`.
///
/// ```
/// use gemm_core::emulation::quarter_power;
/// assert_eq!(quarter_power(1.0, 16.0), 2);
/// assert_eq!(quarter_power(1.5, 16.0), 1);
/// assert_eq!(quarter_power(3.0, 1.0), -1);
/// ```
#[inline(always)]
pub fn quarter_power(s: f64, target: f64) -> i32 {
    let (es, ms) = split_normal(s);
    let (et, mt) = split_normal(target);
    let d = et - es;
    let mut g = d.div_euclid(2);
    if 2 * g == d && ms > mt {
        g -= 1;
    }
    g
}

/// Bits of the accurate mode's coarse magnitudes: a line whose largest
/// magnitude has `ilogb` `E` gets the coarse shift `c = COARSE_BITS - E`
/// (0 for a zero line), and its element `x` the coarse magnitude
/// [`coarse`]`(x, c)` in `0..=64`: the INT8 product of the coarse
/// magnitudes bounds `|A| |B|` (host docs, "The accurate mode").
pub const COARSE_BITS: i32 = 5;

/// The coarse magnitude of `x` for the coarse shift `c`: `ceil(|x| 2^c)`,
/// at least 1 where `x != 0` (`|x| 2^c` may round to 0 where it is
/// subnormal), so never below `|x| 2^c`; at most `2^COARSE_BITS = 64`
/// where `|x| < 2^(COARSE_BITS + 1 - c)`.
///
/// ```
/// use gemm_core::emulation::coarse;
/// assert_eq!(coarse(-1.5, 5), 48);
/// assert_eq!(coarse(1.0 + f64::EPSILON, 5), 33);
/// assert_eq!(coarse(f64::from_bits(1), 5), 1);
/// assert_eq!(coarse(0.0, 5), 0);
/// ```
#[inline(always)]
pub fn coarse(x: f64, c: i32) -> u32 {
    let v = ldexp(x.abs(), c);
    let t = v as u32;
    let t = if (t as f64) < v { t + 1 } else { t };
    if x != 0.0 && t == 0 {
        1
    } else {
        t
    }
}

/// The accurate mode's exponent of a line of coarse shift `c` whose row
/// (or column) of the coarse product has the largest entry `r` (`r <
/// 2^53`): `min(g, 62 - COARSE_BITS) + c` with `g` the largest integer with
/// `r 4^g <= target` ([`quarter_power`]); where `r == 0` (no entry of C
/// depends on the line's scale), `min(0, 62 - COARSE_BITS + c)`. The
/// `i64` cap keeps `|x 2^mu| < 2^63`.
///
/// ```
/// use gemm_core::emulation::exponent_from_bound;
/// assert_eq!(exponent_from_bound(1, 0, 16.0), 2);
/// assert_eq!(exponent_from_bound(0, 10, 16.0), 0);
/// assert_eq!(exponent_from_bound(1, -3, 2f64.powi(200)), 54);
/// ```
#[inline(always)]
pub fn exponent_from_bound(r: u64, c: i32, target: f64) -> i32 {
    let cap = 62 - COARSE_BITS;
    if r == 0 {
        if cap + c < 0 {
            cap + c
        } else {
            0
        }
    } else {
        let g = quarter_power(r as f64, target);
        (if g < cap { g } else { cap }) + c
    }
}

/// Threads per block of the accurate mode's bound kernels
/// (`emulation_bound_max`, `emulation_bound_exponents`).
pub const BOUND_THREADS: u32 = 256;

/// Rows of the coarse product a block of `emulation_bound_max` takes (its
/// columns: [`BOUND_THREADS`], a thread a column).
pub const BOUND_ROWS: u32 = 32;

/// Dynamic shared memory of `emulation_bound_max`: a row maximum (f64) per
/// warp and row of its tile.
pub const BOUND_SMEM_BYTES: u32 = BOUND_THREADS / 32 * BOUND_ROWS * 8;

/// The grid of `emulation_bound_max` over a `rows x n` coarse product.
pub const fn bound_grid(rows: u32, n: u32) -> [u32; 2] {
    [ceil_div(n, BOUND_THREADS), ceil_div(rows, BOUND_ROWS)]
}

/// The grid (blocks) of `emulation_bound_exponents` over `lines` lines: a
/// thread a line, [`BOUND_THREADS`] a block, at least one block.
pub const fn bound_exponents_grid(lines: u32) -> u32 {
    let blocks = ceil_div(lines, BOUND_THREADS);
    if blocks < 1 {
        1
    } else {
        blocks
    }
}

/// The unbiased exponent and the 52 fraction bits of a positive normal `f64`.
#[inline(always)]
fn split_normal(x: f64) -> (i32, u64) {
    let b = x.to_bits();
    (((b >> 52) & 0x7ff) as i32 - 1023, b & ((1u64 << 52) - 1))
}

/// Symmetric remainder of `x` modulo `p` (an entry of [`MODULI`]): in
/// `[-128, 127]` for `p = 256`, in `[-(p-1)/2, (p-1)/2]` for odd `p`.
///
/// ```
/// use gemm_core::emulation::sym_mod;
/// assert_eq!(sym_mod(128, 256), -128);
/// assert_eq!(sym_mod(-128, 255), 127);
/// assert_eq!(sym_mod(i64::MIN + 1, 253), (i64::MIN as i128 + 1).rem_euclid(253) as i64 - 253);
/// ```
#[inline(always)]
pub fn sym_mod(x: i64, p: u32) -> i64 {
    let p = p as i64;
    let r = x.rem_euclid(p);
    if r > (p - 1) / 2 {
        r - p
    } else {
        r
    }
}

/// Bytes of workspace a panel of C's rows may take by default: its A
/// residues and its i32 INT8 products (`moduli * blocks` of each).
pub const PANEL_BYTES: usize = 2 << 30;

/// Rows of C per panel for `moduli` moduli, C m x n and k cut as
/// `(blocks, block_k)` ([`k_blocks`]): all `m` rows where their workspace
/// fits `budget` bytes, else the most that fit, a multiple of 128 (at
/// least 128, or all `m` where `m < 128`): never more than `m`.
///
/// ```
/// use gemm_core::emulation::{panel_rows, PANEL_BYTES};
/// assert_eq!(panel_rows(16, (4096, 4096), (1, 4096), PANEL_BYTES), 4096);
/// assert_eq!(panel_rows(16, (16384, 16384), (1, 16384), PANEL_BYTES), 1536);
/// assert_eq!(panel_rows(2, (1000, 100), (1, 128), 1 << 20), 896);
/// assert_eq!(panel_rows(14, (130, 67), (1, 128), 1 << 10), 128);
/// assert_eq!(panel_rows(14, (2, 67), (1, 128), 1 << 10), 2);
/// ```
pub const fn panel_rows(
    moduli: usize,
    (m, n): (usize, usize),
    (blocks, block_k): (usize, usize),
    budget: usize,
) -> usize {
    let per_row = moduli * blocks * (block_k + 4 * n);
    let fit = match budget.checked_div(per_row) {
        Some(rows) => rows,
        None => m,
    };
    if fit >= m || m <= 128 {
        m
    } else if fit < 128 {
        128
    } else {
        fit / 128 * 128
    }
}
