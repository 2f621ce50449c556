//! What the mixed-precision products share (stage 8's `mma.sync` kernels
//! for f16, bf16, tf32 and i8 in `s08_tensor_core_mixed`, stage 9's
//! warpgroup kernels in `s09_warpgroup`): the operand markers, the C types
//! with their epilogue arithmetic ([`Output`]), the store of a pair of C's
//! elements ([`store_pair`]) and split-K's reduction ([`reduce`]).
//!
//! An f16 or bf16 value is its bits (`u16`) on the device; conversions are
//! PTX's `cvt` with rounding to nearest even.

use core::arch::asm;

/// f16 operands (their bits, as `u16`, on the device).
pub struct F16;
/// bf16 operands.
pub struct Bf16;
/// f32 operands read as TF32 (the tensor cores use 10 of the 23 mantissa bits).
pub struct Tf32;
/// i8 operands (s32 accumulation).
pub struct S8;
/// FP8 e4m3 operands (their bits, as `u8`; f32 accumulation, promoted).
pub struct E4m3;
/// FP8 operands, A e4m3 and B e5m2 (as [`E4m3`]).
pub struct E4m3E5m2;
/// FP8 operands, A e5m2 and B e4m3 (as [`E4m3`]).
pub struct E5m2E4m3;

/// Element type of C, with the epilogue's arithmetic: `alpha * acc + beta *
/// C` in `Value` (f32 for the floating-point products, i32, wrapping, for
/// the integer one).
pub trait Output: Copy {
    /// The accumulators' and alpha's and beta's type.
    type Value: Copy;
    /// Two elements, aligned to their size together (one 8- or 4-byte access).
    type Pair: Copy;
    /// An accumulator register (f32, or s32 as its bits) as a value.
    fn acc(x: f32) -> Self::Value;
    /// Whether beta is zero (C is not read).
    fn is_zero(v: Self::Value) -> bool;
    /// `a * x`.
    fn mul(a: Self::Value, x: Self::Value) -> Self::Value;
    /// `a + b`.
    fn add(a: Self::Value, b: Self::Value) -> Self::Value;
    /// `a * x + y` (fused for f32).
    fn mul_add(a: Self::Value, x: Self::Value, y: Self::Value) -> Self::Value;
    /// Converts with rounding to nearest even.
    fn from_value(x: Self::Value) -> Self;
    /// Converts exactly.
    fn to_value(self) -> Self::Value;
    /// Packs two values.
    fn pair(a: Self::Value, b: Self::Value) -> Self::Pair;
    /// Unpacks two values.
    fn unpair(p: Self::Pair) -> (Self::Value, Self::Value);
    /// Whether `Value` is f32 (the floating-point outputs): only those take
    /// stage 9's fused epilogue.
    const FLOAT: bool;
    /// A value as f32 (exact for the floating-point outputs).
    fn value_f32(v: Self::Value) -> f32;
    /// An f32 as a value (exact for the floating-point outputs).
    fn f32_value(x: f32) -> Self::Value;
}

/// Two f32, one 8-byte access.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub struct F32x2([f32; 2]);

/// Two 16-bit values, one 4-byte access.
#[derive(Clone, Copy)]
#[repr(C, align(4))]
pub struct U16x2([u16; 2]);

/// Two i32, one 8-byte access.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub struct I32x2([i32; 2]);

/// An f16 value's bits.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct H(pub u16);
/// A bf16 value's bits.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Bh(pub u16);

/// The f32 arithmetic of the floating-point outputs.
macro_rules! float_value {
    () => {
        type Value = f32;
        #[inline(always)]
        fn acc(x: f32) -> f32 {
            x
        }
        #[inline(always)]
        fn is_zero(v: f32) -> bool {
            v == 0.0
        }
        #[inline(always)]
        fn mul(a: f32, x: f32) -> f32 {
            a * x
        }
        #[inline(always)]
        fn add(a: f32, b: f32) -> f32 {
            a + b
        }
        #[inline(always)]
        fn mul_add(a: f32, x: f32, y: f32) -> f32 {
            core::intrinsics::fmaf32(a, x, y)
        }
        const FLOAT: bool = true;
        #[inline(always)]
        fn value_f32(v: f32) -> f32 {
            v
        }
        #[inline(always)]
        fn f32_value(x: f32) -> f32 {
            x
        }
    };
}

impl Output for f32 {
    float_value!();
    type Pair = F32x2;
    #[inline(always)]
    fn pair(a: f32, b: f32) -> F32x2 {
        F32x2([a, b])
    }
    #[inline(always)]
    fn unpair(p: F32x2) -> (f32, f32) {
        (p.0[0], p.0[1])
    }
    #[inline(always)]
    fn from_value(x: f32) -> Self {
        x
    }
    #[inline(always)]
    fn to_value(self) -> f32 {
        self
    }
}

/// The Output of a 16-bit float C (`$t`, its bits): f32 arithmetic,
/// `cvt.rn.$ty.f32` to store, `$to` (exact) to load.
macro_rules! half_output {
    ($t:ident, $ty:literal, $to:expr) => {
        impl Output for $t {
            float_value!();
            type Pair = U16x2;
            #[inline(always)]
            fn pair(a: f32, b: f32) -> U16x2 {
                // One `cvt.rn.$ty x2.f32` (its first operand into the upper
                // half): one F2FP in SASS, where two scalar conversions
                // were two F2F and a PRMT.
                let p: u32;
                // SAFETY: a conversion between registers.
                unsafe {
                    asm!(concat!("cvt.rn.", $ty, "x2.f32 {p}, {b}, {a};"), p = out(reg32) p, a = in(reg32) a,
                         b = in(reg32) b, options(pure, nomem, nostack))
                };
                // SAFETY: U16x2 is two u16 in 4 bytes, a the lower.
                unsafe { core::mem::transmute::<u32, U16x2>(p) }
            }
            #[inline(always)]
            fn unpair(p: U16x2) -> (f32, f32) {
                ($t(p.0[0]).to_value(), $t(p.0[1]).to_value())
            }
            #[inline(always)]
            fn from_value(x: f32) -> Self {
                let h: u16;
                // SAFETY: a conversion between registers.
                unsafe {
                    asm!(concat!("cvt.rn.", $ty, ".f32 {h}, {x};"), h = out(reg16) h, x = in(reg32) x,
                         options(pure, nomem, nostack))
                };
                $t(h)
            }
            #[inline(always)]
            fn to_value(self) -> f32 {
                $to(self.0)
            }
        }
    };
}

half_output!(H, "f16", |h: u16| {
    let x: f32;
    // SAFETY: a conversion between registers.
    unsafe { asm!("cvt.f32.f16 {x}, {h};", x = out(reg32) x, h = in(reg16) h, options(pure, nomem, nostack)) };
    x
});
// bf16 is the upper half of an f32.
half_output!(Bh, "bf16", |h: u16| f32::from_bits((h as u32) << 16));

/// The integer product's C: i32, wrapping arithmetic (as cuBLAS's
/// `CUBLAS_COMPUTE_32I`).
impl Output for i32 {
    type Value = i32;
    type Pair = I32x2;
    #[inline(always)]
    fn acc(x: f32) -> i32 {
        x.to_bits() as i32
    }
    #[inline(always)]
    fn is_zero(v: i32) -> bool {
        v == 0
    }
    #[inline(always)]
    fn mul(a: i32, x: i32) -> i32 {
        a.wrapping_mul(x)
    }
    #[inline(always)]
    fn add(a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }
    #[inline(always)]
    fn mul_add(a: i32, x: i32, y: i32) -> i32 {
        a.wrapping_mul(x).wrapping_add(y)
    }
    #[inline(always)]
    fn from_value(x: i32) -> Self {
        x
    }
    #[inline(always)]
    fn to_value(self) -> i32 {
        self
    }
    // The host fuses nothing into an integer product.
    const FLOAT: bool = false;
    #[inline(always)]
    fn value_f32(v: i32) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn f32_value(x: f32) -> i32 {
        x as i32
    }
    #[inline(always)]
    fn pair(a: i32, b: i32) -> I32x2 {
        I32x2([a, b])
    }
    #[inline(always)]
    fn unpair(p: I32x2) -> (i32, i32) {
        (p.0[0], p.0[1])
    }
}

/// Writes `alpha * v + beta * C` for the two elements (r, col), (r, col +
/// 1) of product C at `c` (row-major, `ldc`), converted to C's type, each
/// only inside the m x n matrix; one paired access when `pairs` (every pair
/// of C aligned: see the callers) and both lie inside. `beta` zero: C is not
/// read.
///
/// # Safety
/// `c` holds an m x n matrix with leading dimension `ldc`; `pairs` only when
/// `c + r ldc + col` is aligned to `O::Pair` for every even `col`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn store_pair<O: Output>(
    c: *mut O,
    ldc: u32,
    (m, n): (u32, u32),
    (r, col): (u32, u32),
    (alpha, beta): (O::Value, O::Value),
    (x0, x1): (O::Value, O::Value),
    pairs: bool,
) {
    if r >= m || col >= n {
        return;
    }
    let (v0, v1) = (O::mul(alpha, x0), O::mul(alpha, x1));
    let q = c.add(r as usize * ldc as usize + col as usize);
    if pairs && col + 1 < n {
        let q2 = q as *mut O::Pair;
        let (o0, o1) = if O::is_zero(beta) {
            (v0, v1)
        } else {
            let (c0, c1) = O::unpair(*q2);
            (O::mul_add(beta, c0, v0), O::mul_add(beta, c1, v1))
        };
        *q2 = O::pair(o0, o1);
    } else {
        store_one(c, ldc, (m, n), (r, col), (alpha, beta), x0);
        store_one(c, ldc, (m, n), (r, col + 1), (alpha, beta), x1);
    }
}

/// Writes `alpha * x + beta * C` for element (r, col) of product C at `c`
/// (row-major, `ldc`), converted to C's type, only inside the m x n matrix;
/// `beta` zero: C is not read.
///
/// # Safety
/// `c` holds an m x n matrix with leading dimension `ldc`.
#[inline(always)]
pub unsafe fn store_one<O: Output>(
    c: *mut O,
    ldc: u32,
    (m, n): (u32, u32),
    (r, col): (u32, u32),
    (alpha, beta): (O::Value, O::Value),
    x: O::Value,
) {
    if r < m && col < n {
        let q = c.add(r as usize * ldc as usize + col as usize);
        let v = O::mul(alpha, x);
        *q = O::from_value(if O::is_zero(beta) { v } else { O::mul_add(beta, (*q).to_value(), v) });
    }
}

/// Four consecutive partial results of split-K's workspace (4-byte values:
/// f32 or i32), read in one 16-byte access.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Quad<V>([V; 4]);

/// Split-K's second step: `C <- alpha * (W_0 + ... + W_{slices-1}) + beta *
/// C`, summed in slice order (the same bits every run), converted to C's
/// type. W is `slices` row-major m x n partial results (f32, or i32 for the
/// integer product) `m n` elements apart, C row-major with `ldc`. A
/// grid-stride loop over 1D blocks: where m n is a multiple of
/// [`REDUCE_VECTOR`], each thread sums that many consecutive elements (one
/// 16-byte read of each slice, one division for their row and column),
/// else one.
///
/// # Safety
/// `w` holds `slices` m x n matrices, 16-byte aligned; C holds m x n
/// (ldc); they do not overlap.
#[inline(always)]
pub unsafe fn reduce<O: Output>(
    m: u32,
    n: u32,
    slices: u32,
    w: *const O::Value,
    alpha: O::Value,
    beta: O::Value,
    c: *mut O,
    ldc: u32,
) {
    let block = crate::thread::block_dim()[0] as u64;
    let threads = crate::thread::grid_dim()[0] as u64 * block;
    let first = crate::thread::block_idx()[0] as u64 * block + crate::thread::thread_idx()[0] as u64;
    let (mn, n64) = (m as u64 * n as u64, n as u64);
    let store = |row: u64, col: u64, sum: O::Value| {
        let q = c.add((row * ldc as u64 + col) as usize);
        let v = O::mul(alpha, sum);
        *q = O::from_value(if O::is_zero(beta) { v } else { O::mul_add(beta, (*q).to_value(), v) });
    };
    // Row and column of element e: 32-bit division where m n fits.
    let place = |e: u64| {
        if mn <= u32::MAX as u64 {
            ((e as u32 / n) as u64, (e as u32 % n) as u64)
        } else {
            (e / n64, e % n64)
        }
    };
    const V: u64 = REDUCE_VECTOR as u64;
    if mn % V == 0 && core::mem::size_of::<O::Value>() == 4 {
        let mut e = first * V;
        while e < mn {
            let mut sum = *(w.add(e as usize) as *const Quad<O::Value>);
            for s in 1..slices {
                let q = *(w.add((s as u64 * mn + e) as usize) as *const Quad<O::Value>);
                for i in 0..REDUCE_VECTOR as usize {
                    sum.0[i] = O::add(sum.0[i], q.0[i]);
                }
            }
            let (mut row, mut col) = place(e);
            for i in 0..REDUCE_VECTOR as usize {
                store(row, col, sum.0[i]);
                col += 1;
                if col == n64 {
                    (row, col) = (row + 1, 0);
                }
            }
            e += threads * V;
        }
    } else {
        let mut e = first;
        while e < mn {
            let mut sum = *w.add(e as usize);
            for s in 1..slices {
                sum = O::add(sum, *w.add((s as u64 * mn + e) as usize));
            }
            let (row, col) = place(e);
            store(row, col, sum);
            e += threads;
        }
    }
}

/// Elements of C one thread of [`reduce`] sums where m n is a multiple of
/// it (gemm-core's `split_k::REDUCE_VECTOR`, which the launch divides the
/// grid by).
pub const REDUCE_VECTOR: u32 = gemm_core::split_k::REDUCE_VECTOR;
