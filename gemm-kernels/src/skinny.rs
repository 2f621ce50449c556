//! The token-sized kernels: `Y <- alpha * X W + beta * Y` with X s x k small
//! (s <= S rows), W k x N large, read once at 16 bytes a lane, and the
//! partial sums added in a fixed order. Geometry, the mapping of a product
//! onto X, W and Y, and the lanes' layout: `gemm_core::skinny`.
//!
//! Every operand is addressed by strides (elements), so one kernel serves
//! every op and layout; only W's contiguous dimension is compiled in
//! ([`skinny_wk`]: k contiguous, [`skinny_wn`]: N contiguous;
//! [`skinny_mma_wk`], the tensor-core form, k contiguous). k runs in tiles:
//! X's tile is copied into shared memory (`cp.async` 16 bytes at a time
//! where X's k is contiguous and its rows start on 16 bytes, else element by
//! element; two buffers, the next tile's copy in flight during this one's
//! products), and each lane reads its chunks of W for the next tile before
//! it multiplies this one's. A chunk of W is read with one 16-byte
//! `ld.global.nc` where W's start, leading dimension and batch stride allow
//! it and the chunk lies inside W, else element by element (zeros past the
//! edge). Arithmetic: f64 FMAs for f64, f32 FMAs for f32 (and a TF32
//! request), f16 and bf16 converted exactly to f32, i8 by `dp4a` (an
//! N-contiguous W's bytes transposed 4 x 4 by `prmt` first), wrapping, as cuBLAS's
//! `CUBLAS_COMPUTE_32I`; the tensor-core form by `mma.sync` ([`MmaInput`]).
//! The epilogue is [`crate::mixed::Output`]'s: `beta == 0` never reads Y.
//!
//! # Order of the sums (the same bits every run)
//! Lane partial sums run over its k in increasing order (the tensor-core
//! form: `mma.sync`'s order within each chunk); the lanes that share an
//! output are added by butterfly shuffles (xor 1 then 2 for a K-contiguous
//! W, xor 4, 8, 16 for an N-contiguous one, 2, 4, 8, 16 for i8's); then the warps' sums in warp
//! order 0..WARPS.
//!
//! # Source
//! NVIDIA, "Matrix Multiplication Background User's Guide" (memory-bound
//! products); PTX ISA, "Data Movement: shfl.sync", "cp.async", "Integer
//! Arithmetic: dp4a", "Matrix Fragments for mma.m16n8k16" (and m16n8k32,
//! m8n8k4).

use crate::mixed::{Bf16, Bh, Output, F16, H, S8};
use crate::thread::{block_idx, grid_dim, smem_base, sync_threads, thread_idx};
use core::arch::asm;
use gemm_core::skinny::{cols_per_block, SkinnyTypes, WLayout, WARPS};

/// A partial sum's arithmetic: f64, f32 or i32 (wrapping).
pub trait Acc: Copy {
    /// Zero.
    const ZERO: Self;
    /// Bytes in shared memory.
    const BYTES: u32;
    /// `a + b`.
    fn add(a: Self, b: Self) -> Self;
    /// The value of the lane `lane ^ mask` (`shfl.sync.bfly`, whole warp).
    ///
    /// # Safety
    /// Every lane of the warp executes it.
    unsafe fn shfl_xor(v: Self, mask: u32) -> Self;
    /// `st.shared` at a 32-bit shared address.
    ///
    /// # Safety
    /// The address lies in the launch's dynamic shared memory, aligned.
    unsafe fn st_shared(addr: u32, v: Self);
    /// `ld.shared` at a 32-bit shared address.
    ///
    /// # Safety
    /// As `st_shared`.
    unsafe fn ld_shared(addr: u32) -> Self;
}

#[inline(always)]
unsafe fn shfl_b32(v: u32, mask: u32) -> u32 {
    let r: u32;
    asm!("shfl.sync.bfly.b32 {r}, {v}, {m}, 0x1f, 0xffffffff;", r = out(reg32) r, v = in(reg32) v,
         m = in(reg32) mask, options(nomem, nostack));
    r
}

impl Acc for f32 {
    const ZERO: f32 = 0.0;
    const BYTES: u32 = 4;
    #[inline(always)]
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    unsafe fn shfl_xor(v: f32, mask: u32) -> f32 {
        f32::from_bits(shfl_b32(v.to_bits(), mask))
    }
    #[inline(always)]
    unsafe fn st_shared(addr: u32, v: f32) {
        asm!("st.shared.b32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v.to_bits(), options(nostack));
    }
    #[inline(always)]
    unsafe fn ld_shared(addr: u32) -> f32 {
        let v: u32;
        asm!("ld.shared.b32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) addr, options(readonly, nostack));
        f32::from_bits(v)
    }
}

impl Acc for i32 {
    const ZERO: i32 = 0;
    const BYTES: u32 = 4;
    #[inline(always)]
    fn add(a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }
    #[inline(always)]
    unsafe fn shfl_xor(v: i32, mask: u32) -> i32 {
        shfl_b32(v as u32, mask) as i32
    }
    #[inline(always)]
    unsafe fn st_shared(addr: u32, v: i32) {
        asm!("st.shared.b32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v as u32, options(nostack));
    }
    #[inline(always)]
    unsafe fn ld_shared(addr: u32) -> i32 {
        let v: u32;
        asm!("ld.shared.b32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) addr, options(readonly, nostack));
        v as i32
    }
}

impl Acc for f64 {
    const ZERO: f64 = 0.0;
    const BYTES: u32 = 8;
    #[inline(always)]
    fn add(a: f64, b: f64) -> f64 {
        a + b
    }
    #[inline(always)]
    unsafe fn shfl_xor(v: f64, mask: u32) -> f64 {
        let bits = v.to_bits();
        let lo = shfl_b32(bits as u32, mask) as u64;
        let hi = shfl_b32((bits >> 32) as u32, mask) as u64;
        f64::from_bits(hi << 32 | lo)
    }
    #[inline(always)]
    unsafe fn st_shared(addr: u32, v: f64) {
        asm!("st.shared.b64 [{a}], {v};", a = in(reg32) addr, v = in(reg64) v.to_bits(), options(nostack));
    }
    #[inline(always)]
    unsafe fn ld_shared(addr: u32) -> f64 {
        let v: u64;
        asm!("ld.shared.b64 {v}, [{a}];", v = out(reg64) v, a = in(reg32) addr, options(readonly, nostack));
        f64::from_bits(v)
    }
}

/// C's f64 type for the token-sized f64 kernels: f64 arithmetic.
impl Output for f64 {
    type Value = f64;
    type Pair = [f64; 2];
    #[inline(always)]
    fn acc(x: f32) -> f64 {
        x as f64
    }
    #[inline(always)]
    fn is_zero(v: f64) -> bool {
        v == 0.0
    }
    #[inline(always)]
    fn mul(a: f64, x: f64) -> f64 {
        a * x
    }
    #[inline(always)]
    fn add(a: f64, b: f64) -> f64 {
        a + b
    }
    #[inline(always)]
    fn mul_add(a: f64, x: f64, y: f64) -> f64 {
        core::intrinsics::fmaf64(a, x, y)
    }
    #[inline(always)]
    fn from_value(x: f64) -> Self {
        x
    }
    #[inline(always)]
    fn to_value(self) -> f64 {
        self
    }
    #[inline(always)]
    fn pair(a: f64, b: f64) -> [f64; 2] {
        [a, b]
    }
    #[inline(always)]
    fn unpair(p: [f64; 2]) -> (f64, f64) {
        (p[0], p[1])
    }
    // The token-sized kernels fuse nothing.
    const FLOAT: bool = false;
    #[inline(always)]
    fn value_f32(v: f64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn f32_value(x: f32) -> f64 {
        x as f64
    }
}

/// An operand type: its storage, its partial sums, and a 16-byte chunk's
/// arithmetic. A chunk is 4 words of raw bits ([`Input::unpack`] gives its
/// V elements as partial-sum values, in memory order, in `[..V]`).
pub trait Input {
    /// One element's storage.
    type Raw: Copy;
    /// Partial sums (and alpha, beta).
    type Acc: Acc;
    /// Elements in 16 bytes.
    const V: u32;
    /// The chunk's elements, exactly, in `[..V]`.
    fn unpack(c: [u32; 4]) -> [Self::Acc; 16];
    /// `acc + sum over v < V of x[v] w[v]`, v in increasing order (raw
    /// chunks and their unpacked values both given).
    fn dot(acc: Self::Acc, x: ([u32; 4], &[Self::Acc; 16]), w: ([u32; 4], &[Self::Acc; 16])) -> Self::Acc;
    /// `acc[v] += x w[v]` for v < V.
    fn axpy(acc: &mut [Self::Acc; 16], x: Self::Acc, w: &[Self::Acc; 16]);
    /// One element at shared address `addr`, as a partial-sum value.
    ///
    /// # Safety
    /// `addr` lies in the launch's shared memory, aligned to the element.
    unsafe fn ld_shared_one(addr: u32) -> Self::Acc;
    /// A chunk of `count <= V` elements `stride` apart from `p` (zeros
    /// after them).
    ///
    /// # Safety
    /// The `count` elements are readable global memory.
    unsafe fn gather(p: *const Self::Raw, stride: u64, count: u32) -> [u32; 4];
    /// `acc[i][v] += sum over r < 4 of X(i, k0 + r) W(k0 + r, v)`: `w` are
    /// 4 consecutive rows of one chunk of columns (an N-contiguous W read
    /// as `gemm_core::skinny::wn_quads` says), X's tile row i at shared
    /// address `x(i)` (its element k0, on 4 elements). This default: row
    /// by row (`axpy`), r in increasing order.
    ///
    /// # Safety
    /// The addresses lie in the launch's shared memory.
    #[inline(always)]
    unsafe fn quad<const S: usize>(acc: &mut [[Self::Acc; 16]; S], w: &[[u32; 4]; 4], x: impl Fn(u32) -> u32) {
        let bytes = 16 / Self::V;
        for (r, chunk) in w.iter().enumerate() {
            let wu = Self::unpack(*chunk);
            for (i, row) in acc.iter_mut().enumerate() {
                Self::axpy(row, Self::ld_shared_one(x(i as u32) + r as u32 * bytes), &wu);
            }
        }
    }
}

/// 16 bytes at `p`, read-only path.
///
/// # Safety
/// `p` is 16-byte aligned, readable global memory not written during the
/// kernel.
#[inline(always)]
unsafe fn ld_v4(p: *const u8) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    asm!("ld.global.nc.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b,
         c = out(reg32) c, d = out(reg32) d, p = in(reg64) p, options(readonly, nostack));
    [a, b, c, d]
}

macro_rules! ld_one {
    ($p:expr, $ty:literal, $reg:ident, $t:ty) => {{
        let v: $t;
        asm!(concat!("ld.global.nc.", $ty, " {v}, [{p}];"), v = out($reg) v, p = in(reg64) $p,
             options(readonly, nostack));
        v
    }};
}

/// Floating-point FMAs of a chunk, v in order.
macro_rules! float_dot {
    ($t:ty, $fma:path) => {
        #[inline(always)]
        fn dot(acc: $t, x: ([u32; 4], &[$t; 16]), w: ([u32; 4], &[$t; 16])) -> $t {
            let mut a = acc;
            for v in 0..Self::V as usize {
                a = $fma(x.1[v], w.1[v], a);
            }
            a
        }
        #[inline(always)]
        fn axpy(acc: &mut [$t; 16], x: $t, w: &[$t; 16]) {
            for v in 0..Self::V as usize {
                acc[v] = $fma(x, w[v], acc[v]);
            }
        }
    };
}

impl Input for f64 {
    type Raw = f64;
    type Acc = f64;
    const V: u32 = 2;
    #[inline(always)]
    fn unpack(c: [u32; 4]) -> [f64; 16] {
        let mut o = [0.0; 16];
        o[0] = f64::from_bits((c[1] as u64) << 32 | c[0] as u64);
        o[1] = f64::from_bits((c[3] as u64) << 32 | c[2] as u64);
        o
    }
    float_dot!(f64, core::intrinsics::fmaf64);
    #[inline(always)]
    unsafe fn ld_shared_one(addr: u32) -> f64 {
        f64::ld_shared(addr)
    }
    #[inline(always)]
    unsafe fn gather(p: *const f64, stride: u64, count: u32) -> [u32; 4] {
        let mut c = [0u32; 4];
        for v in 0..2 {
            if (v as u32) < count {
                let b = ld_one!(p.add(v * stride as usize), "b64", reg64, u64);
                (c[2 * v], c[2 * v + 1]) = (b as u32, (b >> 32) as u32);
            }
        }
        c
    }
}

impl Input for f32 {
    type Raw = f32;
    type Acc = f32;
    const V: u32 = 4;
    #[inline(always)]
    fn unpack(c: [u32; 4]) -> [f32; 16] {
        let mut o = [0.0; 16];
        for v in 0..4 {
            o[v] = f32::from_bits(c[v]);
        }
        o
    }
    float_dot!(f32, core::intrinsics::fmaf32);
    #[inline(always)]
    unsafe fn ld_shared_one(addr: u32) -> f32 {
        f32::ld_shared(addr)
    }
    #[inline(always)]
    unsafe fn gather(p: *const f32, stride: u64, count: u32) -> [u32; 4] {
        let mut c = [0u32; 4];
        for (v, w) in c.iter_mut().enumerate() {
            if (v as u32) < count {
                *w = ld_one!(p.add(v * stride as usize), "b32", reg32, u32);
            }
        }
        c
    }
}

/// f16 or bf16: 8 elements a chunk, two a word (low half first), each
/// converted exactly to f32 by `$to`.
macro_rules! half_input {
    ($marker:ident, $out:ident) => {
        impl Input for $marker {
            type Raw = u16;
            type Acc = f32;
            const V: u32 = 8;
            #[inline(always)]
            fn unpack(c: [u32; 4]) -> [f32; 16] {
                let mut o = [0.0; 16];
                for w in 0..4 {
                    o[2 * w] = $out(c[w] as u16).to_value();
                    o[2 * w + 1] = $out((c[w] >> 16) as u16).to_value();
                }
                o
            }
            float_dot!(f32, core::intrinsics::fmaf32);
            #[inline(always)]
            unsafe fn ld_shared_one(addr: u32) -> f32 {
                let h: u16;
                asm!("ld.shared.b16 {h}, [{a}];", h = out(reg16) h, a = in(reg32) addr, options(readonly, nostack));
                $out(h).to_value()
            }
            #[inline(always)]
            unsafe fn gather(p: *const u16, stride: u64, count: u32) -> [u32; 4] {
                let mut c = [0u32; 4];
                for v in 0..8 {
                    if (v as u32) < count {
                        let h = ld_one!(p.add(v * stride as usize), "b16", reg16, u16) as u32;
                        c[v / 2] |= h << (16 * (v % 2));
                    }
                }
                c
            }
        }
    };
}

half_input!(F16, H);
half_input!(Bf16, Bh);

/// `acc + dot of the four signed bytes of x and y` (`dp4a.s32.s32`).
#[inline(always)]
fn dp4a(acc: i32, x: u32, y: u32) -> i32 {
    let r: i32;
    // SAFETY: arithmetic on registers.
    unsafe {
        asm!("dp4a.s32.s32 {r}, {x}, {y}, {c};", r = out(reg32) r, x = in(reg32) x, y = in(reg32) y,
             c = in(reg32) acc, options(pure, nomem, nostack))
    };
    r
}

/// `prmt.b32`: byte `i` of the result is byte `sel` nibble `i` of `b:a`
/// (a's bytes 0-3, b's 4-7).
#[inline(always)]
fn prmt(a: u32, b: u32, sel: u32) -> u32 {
    let r: u32;
    // SAFETY: arithmetic on registers.
    unsafe {
        asm!("prmt.b32 {r}, {a}, {b}, {s};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b,
             s = in(reg32) sel, options(pure, nomem, nostack))
    };
    r
}

/// The 4 x 4 block of bytes `rows[r]` (byte c: column c of row r),
/// transposed: byte r of word c is `rows[r]`'s byte c.
#[inline(always)]
fn transpose_4x4(rows: [u32; 4]) -> [u32; 4] {
    // Rows 0 and 1 interleaved, then 2 and 3: (r0.b0, r1.b0, r0.b1, r1.b1)
    // and (r0.b2, r1.b2, r0.b3, r1.b3).
    let (lo01, hi01) = (prmt(rows[0], rows[1], 0x5140), prmt(rows[0], rows[1], 0x7362));
    let (lo23, hi23) = (prmt(rows[2], rows[3], 0x5140), prmt(rows[2], rows[3], 0x7362));
    [prmt(lo01, lo23, 0x5410), prmt(lo01, lo23, 0x7632), prmt(hi01, hi23, 0x5410), prmt(hi01, hi23, 0x7632)]
}

impl Input for S8 {
    type Raw = i8;
    type Acc = i32;
    const V: u32 = 16;
    #[inline(always)]
    fn unpack(c: [u32; 4]) -> [i32; 16] {
        let mut o = [0; 16];
        for v in 0..16 {
            o[v] = (c[v / 4] >> (8 * (v % 4))) as u8 as i8 as i32;
        }
        o
    }
    #[inline(always)]
    fn dot(acc: i32, x: ([u32; 4], &[i32; 16]), w: ([u32; 4], &[i32; 16])) -> i32 {
        let mut a = acc;
        for q in 0..4 {
            a = dp4a(a, x.0[q], w.0[q]);
        }
        a
    }
    #[inline(always)]
    fn axpy(acc: &mut [i32; 16], x: i32, w: &[i32; 16]) {
        for v in 0..16 {
            acc[v] = acc[v].wrapping_add(x.wrapping_mul(w[v]));
        }
    }
    #[inline(always)]
    unsafe fn ld_shared_one(addr: u32) -> i32 {
        let b: i16;
        asm!("ld.shared.s8 {b}, [{a}];", b = out(reg16) b, a = in(reg32) addr, options(readonly, nostack));
        b as i32
    }
    /// 4 rows of 16 columns: 4 transposes of 4 x 4 bytes into words of 4 k
    /// of one column, then one `dp4a` per row of X and column (the i32 sum
    /// wraps: the same bits in any order).
    #[inline(always)]
    unsafe fn quad<const S: usize>(acc: &mut [[i32; 16]; S], w: &[[u32; 4]; 4], x: impl Fn(u32) -> u32) {
        let mut cols = [0u32; 16];
        for m in 0..4 {
            let t = transpose_4x4([w[0][m], w[1][m], w[2][m], w[3][m]]);
            cols[4 * m..4 * m + 4].copy_from_slice(&t);
        }
        for (i, row) in acc.iter_mut().enumerate() {
            let xw = i32::ld_shared(x(i as u32)) as u32;
            for (a, &col) in row.iter_mut().zip(cols.iter()) {
                *a = dp4a(*a, xw, col);
            }
        }
    }
    #[inline(always)]
    unsafe fn gather(p: *const i8, stride: u64, count: u32) -> [u32; 4] {
        let mut c = [0u32; 4];
        for v in 0..16 {
            if (v as u32) < count {
                let b = ld_one!(p.add(v * stride as usize), "s8", reg16, i16) as u8 as u32;
                c[v / 4] |= b << (8 * (v % 4));
            }
        }
        c
    }
}

/// One launch's arguments (see `gemm_core::skinny` for the product).
#[derive(Clone, Copy)]
pub struct Params<R, O: Output> {
    /// Rows of X and Y (at most the kernel's S).
    pub s: u32,
    /// Columns of W and Y.
    pub n: u32,
    /// The inner dimension.
    pub k: u32,
    /// Scalars in the partial sums' type.
    pub alpha: O::Value,
    /// `beta == 0`: Y is not read.
    pub beta: O::Value,
    /// X(i, kk) at `x[i x_rs + kk x_ks]`.
    pub x: *const R,
    /// X's row stride (elements).
    pub x_rs: u64,
    /// X's k stride.
    pub x_ks: u64,
    /// W, with leading dimension `ldw` (elements).
    pub w: *const R,
    /// W's leading dimension.
    pub ldw: u64,
    /// Y(i, j) at `y[i y_rs + j y_cs]`.
    pub y: *mut O,
    /// Y's row stride.
    pub y_rs: u64,
    /// Y's column stride.
    pub y_cs: u64,
    /// Products in the batch.
    pub count: u32,
    /// Elements between the batch's X, W and Y matrices.
    pub strides: [u64; 3],
}

/// Chunks (K-contiguous W) or rows (N-contiguous W) of W each lane reads
/// per tile of k, all issued before any is used (`gemm_core::skinny`).
const U: usize = gemm_core::skinny::UNROLL as usize;
/// The tensor-core form's.
const UM: usize = gemm_core::skinny::MMA_UNROLL as usize;
const KT_BYTES_WK: u32 = gemm_core::skinny::TILE_ROW_BYTES_WK;

/// 16 bytes of shared memory at `addr`.
///
/// # Safety
/// `addr` is 16-byte aligned inside the launch's shared memory.
#[inline(always)]
unsafe fn ld_shared_v4(addr: u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    asm!("ld.shared.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b,
         c = out(reg32) c, d = out(reg32) d, p = in(reg32) addr, options(readonly, nostack));
    [a, b, c, d]
}

/// One element of `bytes` bytes at global `src`, as bits.
///
/// # Safety
/// `src` is readable global memory aligned to the element.
#[inline(always)]
unsafe fn load_bits(src: *const u8, bytes: u32) -> u64 {
    match bytes {
        8 => ld_one!(src, "b64", reg64, u64),
        4 => ld_one!(src, "b32", reg32, u32) as u64,
        2 => ld_one!(src, "b16", reg16, u16) as u64,
        _ => ld_one!(src, "b8", reg16, u16) as u64,
    }
}

/// Stores the low `bytes` bytes of `v` at shared address `dst`.
///
/// # Safety
/// `dst` is aligned shared memory of the launch.
#[inline(always)]
unsafe fn store_bits(dst: u32, v: u64, bytes: u32) {
    match bytes {
        8 => asm!("st.shared.b64 [{a}], {v};", a = in(reg32) dst, v = in(reg64) v, options(nostack)),
        4 => asm!("st.shared.b32 [{a}], {v};", a = in(reg32) dst, v = in(reg32) v as u32, options(nostack)),
        2 => asm!("st.shared.b16 [{a}], {v};", a = in(reg32) dst, v = in(reg16) v as u16, options(nostack)),
        _ => asm!("st.shared.b8 [{a}], {v};", a = in(reg32) dst, v = in(reg16) v as u16, options(nostack)),
    }
}

/// Brings X's tile `[kt, kt + kt_len)` (rows `< S`; zeros past k and in
/// rows `>= s`) into shared memory at `buf`, row i at `buf + i pitch`:
/// 16-byte `cp.async` copies when X's k is contiguous and its rows start
/// on 16 bytes (`x_vec`; committed by the caller; the chunk in which k ends
/// element by element), else element by element.
///
/// # Safety
/// All threads of the block call it; `buf` holds `S` rows of `pitch`
/// bytes, each at least `kt_len` elements.
#[inline(always)]
unsafe fn load_x_tile<I: Input, O: Output, const S: usize>(
    p: &Params<I::Raw, O>,
    x: *const I::Raw,
    (kt, kt_len): (u32, u32),
    (buf, pitch): (u32, u32),
    x_vec: bool,
) {
    let bytes = 16 / I::V;
    let t = thread_idx()[0];
    let threads = gemm_core::skinny::THREADS;
    if x_vec {
        let per_row = kt_len / I::V;
        let mut c = t;
        while c < S as u32 * per_row {
            let (i, kc) = (c / per_row, c % per_row);
            let kk = kt + kc * I::V;
            let dst = buf + i * pitch + kc * I::V * bytes;
            let (src, valid) = if i < p.s && kk < p.k {
                (x.add((i as u64 * p.x_rs + kk as u64) as usize), (p.k - kk).min(I::V) * bytes)
            } else {
                (x, 0)
            };
            if valid == 16 || valid == 0 {
                crate::thread::cp_async_16_zfill(dst, src as *const u8, valid);
            } else {
                // The chunk in which X's k ends: element by element, zeros
                // after (a 16-byte cp.async reads past the row's last
                // element even with a smaller source size, as
                // compute-sanitizer's memcheck counts it, and past the end
                // of X for its last row).
                let src = src as *const u8;
                for e in 0..I::V {
                    let v = if e * bytes < valid { load_bits(src.add((e * bytes) as usize), bytes) } else { 0 };
                    store_bits(dst + e * bytes, v, bytes);
                }
            }
            c += threads;
        }
    } else {
        // Consecutive threads read consecutive elements of global memory:
        // along k, or along the rows where those are contiguous (X =
        // op(B)^T of a row-major B: the transposed form).
        // Each thread has `BATCH` loads in flight before it stores any.
        const BATCH: u32 = 4;
        let rows_contiguous = p.x_rs == 1;
        let total = S as u32 * kt_len;
        let place = |e: u32| if rows_contiguous { (e % S as u32, e / S as u32) } else { (e / kt_len, e % kt_len) };
        let mut first = t;
        while first < total {
            let mut vals = [0u64; BATCH as usize];
            for (r, val) in vals.iter_mut().enumerate() {
                let e = first + r as u32 * threads;
                let (i, kc) = place(e);
                if e < total && i < p.s && kt + kc < p.k {
                    let at = x.add((i as u64 * p.x_rs + (kt + kc) as u64 * p.x_ks) as usize) as *const u8;
                    *val = load_bits(at, bytes);
                }
            }
            for (r, &val) in vals.iter().enumerate() {
                let e = first + r as u32 * threads;
                if e < total {
                    let (i, kc) = place(e);
                    store_bits(buf + i * pitch + kc * bytes, val, bytes);
                }
            }
            first += BATCH * threads;
        }
    }
}

/// Adds the warps' partial sums (in shared memory at `red`,
/// `[warp][row][col]`) in warp order and stores the block's outputs of Y.
///
/// # Safety
/// All threads of the block call it; shared memory holds the sums.
#[inline(always)]
unsafe fn finish<I: Input, O: Output<Value = I::Acc>, const S: usize>(
    p: &Params<I::Raw, O>,
    y: *mut O,
    (j0, cols): (u32, u32),
    red: u32,
) {
    let t = thread_idx()[0];
    let outputs = S as u32 * cols;
    let mut o = t;
    while o < outputs {
        let (i, jj) = (o / cols, o % cols);
        let mut sum = I::Acc::ld_shared(red + (i * cols + jj) * I::Acc::BYTES);
        for w in 1..WARPS {
            sum = I::Acc::add(sum, I::Acc::ld_shared(red + ((w * S as u32 + i) * cols + jj) * I::Acc::BYTES));
        }
        let j = j0 + jj;
        if i < p.s && j < p.n {
            let q = y.add((i as u64 * p.y_rs + j as u64 * p.y_cs) as usize);
            let v = O::mul(p.alpha, sum);
            *q = O::from_value(if O::is_zero(p.beta) { v } else { O::mul_add(p.beta, (*q).to_value(), v) });
        }
        o += gemm_core::skinny::THREADS;
    }
    // Shared memory is reused by the next product of the batch.
    sync_threads();
}

/// Whether X's tiles can be copied 16 bytes at a time: k contiguous, every
/// row and matrix starting on 16 bytes.
#[inline(always)]
fn x_vectors<R, O: Output>(p: &Params<R, O>, v: u32) -> bool {
    let v64 = v as u64;
    p.x_ks == 1 && (p.x as usize) % 16 == 0 && p.x_rs % v64 == 0 && p.strides[0] % v64 == 0
}

/// The kernel for a K-contiguous W (see the module docs). k runs in tiles
/// of `KT_BYTES_WK` bytes: X's tile is copied into shared memory (double
/// buffered, the next tile's copy in flight during this one's products)
/// and each lane reads its `U x COLS_PER_LANE` chunks of W for the next
/// tile before it multiplies this one's.
///
/// # Safety
/// Launched with `gemm_core::skinny`'s geometry for `WLayout::KContiguous`
/// and these types and S; the operands hold the shapes and strides of `p`;
/// Y overlaps neither X nor W; `p.s <= S`.
#[inline(always)]
pub unsafe fn skinny_wk<I: Input, O: Output<Value = I::Acc>, const S: usize>(p: Params<I::Raw, O>, types: SkinnyTypes) {
    const CL: usize = gemm_core::skinny::COLS_PER_LANE as usize;
    let t = thread_idx()[0];
    let (lane, warp) = (t % 32, t / 32);
    let (c, q) = (lane / 4, lane % 4);
    let v = I::V;
    let bytes = 16 / v;
    let kt_len = KT_BYTES_WK / bytes;
    let cols = cols_per_block(types, WLayout::KContiguous);
    let j0 = block_idx()[0] * cols;
    let x_vec = x_vectors(&p, v);
    let w_vec = (p.w as usize) % 16 == 0 && p.ldw % v as u64 == 0 && p.strides[1] % v as u64 == 0;
    let base = smem_base();
    let pitch = gemm_core::skinny::tile_pitch(types, WLayout::KContiguous, false);
    let tile_bytes = S as u32 * pitch;
    let red = base + 2 * tile_bytes;
    let tiles = p.k.div_ceil(kt_len);
    // This lane's offset in a tile's k: warp w's chunks of 4 V, lane q's V.
    let lane_k = (warp * 4 + q) * v;
    let load_w = |w: *const I::Raw, tile: u32| {
        let mut wc = [[[0u32; 4]; CL]; U];
        if tile < tiles {
            for (u, row) in wc.iter_mut().enumerate() {
                let ku = tile * kt_len + u as u32 * WARPS * 4 * v + lane_k;
                if ku >= p.k {
                    break;
                }
                let full = ku + v <= p.k;
                let len = if full { v } else { p.k - ku };
                for (ci, chunk) in row.iter_mut().enumerate() {
                    let j = j0 + c + 8 * ci as u32;
                    if j < p.n {
                        let at = w.add((j as u64 * p.ldw + ku as u64) as usize);
                        *chunk = if w_vec && full { ld_v4(at as *const u8) } else { I::gather(at, 1, len) };
                    }
                }
            }
        }
        wc
    };
    let mut b = block_idx()[1];
    while b < p.count {
        let x = p.x.add((b as u64 * p.strides[0]) as usize);
        let w = p.w.add((b as u64 * p.strides[1]) as usize);
        let y = p.y.add((b as u64 * p.strides[2]) as usize);
        let mut acc = [[I::Acc::ZERO; CL]; S];
        if tiles > 0 {
            load_x_tile::<I, O, S>(&p, x, (0, kt_len), (base, pitch), x_vec);
        }
        crate::thread::cp_async_commit();
        let mut wcur = load_w(w, 0);
        for tile in 0..tiles {
            if tile + 1 < tiles {
                let next = base + ((tile + 1) % 2) * tile_bytes;
                load_x_tile::<I, O, S>(&p, x, ((tile + 1) * kt_len, kt_len), (next, pitch), x_vec);
            }
            crate::thread::cp_async_commit();
            let wnext = load_w(w, tile + 1);
            crate::thread::cp_async_wait(1);
            sync_threads();
            let buf = base + (tile % 2) * tile_bytes;
            for (u, row) in wcur.iter().enumerate() {
                let wu = row.map(I::unpack);
                let off = u as u32 * WARPS * 4 * v + lane_k;
                for (i, acc_row) in acc.iter_mut().enumerate() {
                    let xc = ld_shared_v4(buf + i as u32 * pitch + off * bytes);
                    let xu = I::unpack(xc);
                    for ci in 0..CL {
                        acc_row[ci] = I::dot(acc_row[ci], (xc, &xu), (row[ci], &wu[ci]));
                    }
                }
            }
            // The buffer is refilled two tiles on.
            sync_threads();
            wcur = wnext;
        }
        crate::thread::cp_async_wait(0);
        // The 4 lanes of a column, then the warps.
        for (i, row) in acc.iter().enumerate() {
            for (ci, &a) in row.iter().enumerate() {
                let a = I::Acc::add(a, I::Acc::shfl_xor(a, 1));
                let a = I::Acc::add(a, I::Acc::shfl_xor(a, 2));
                if q == 0 {
                    let col = c + 8 * ci as u32;
                    I::Acc::st_shared(red + ((warp * S as u32 + i as u32) * cols + col) * I::Acc::BYTES, a);
                }
            }
        }
        sync_threads();
        finish::<I, O, S>(&p, y, (j0, cols), red);
        b += grid_dim()[1];
    }
}

/// One step of a halving butterfly over the lanes `mask` apart: of the
/// first `n` sums (flat: `acc[t / 16][t % 16]`), the lane keeps the upper
/// half (`upper`) or the lower, adds its partner's values of that half,
/// and leaves the result in the first `n / 2`. The partner sends the half
/// it does not keep, so both halves end summed, each in one lane.
///
/// # Safety
/// Every lane of the warp calls it with the same `n` and `mask`.
#[inline(always)]
unsafe fn halve<A: Acc, const S: usize>(acc: &mut [[A; 16]; S], n: usize, mask: u32, upper: bool) {
    let half = n / 2;
    for t in 0..half {
        let (lo, hi) = (acc[t / 16][t % 16], acc[(t + half) / 16][(t + half) % 16]);
        let (keep, send) = if upper { (hi, lo) } else { (lo, hi) };
        acc[t / 16][t % 16] = A::add(keep, A::shfl_xor(send, mask));
    }
}

/// The kernel for an N-contiguous W (see the module docs): as
/// [`skinny_wk`], in tiles of `tile_rows_wn` rows of k, each lane reading `U`
/// rows of one 16-byte chunk of columns per tile: `WARPS x k_lanes` rows
/// apart, or consecutive where `wn_quads` (i8: multiplied 4 rows at a
/// time, [`Input::quad`]).
///
/// # Safety
/// As [`skinny_wk`], with `WLayout::NContiguous`'s geometry.
#[inline(always)]
pub unsafe fn skinny_wn<I: Input, O: Output<Value = I::Acc>, const S: usize>(p: Params<I::Raw, O>, types: SkinnyTypes) {
    const { assert!(U == 4, "a lane's rows make one quad") };
    let t = thread_idx()[0];
    let (lane, warp) = (t % 32, t / 32);
    let column_lanes = gemm_core::skinny::wn_column_lanes(types);
    let k_lanes = gemm_core::skinny::k_lanes(types, WLayout::NContiguous);
    let quads = gemm_core::skinny::wn_quads(types);
    let (c, q) = (lane % column_lanes, lane / column_lanes);
    let v = I::V;
    let bytes = 16 / v;
    let kt_len = gemm_core::skinny::tile_rows_wn(types);
    let cols = cols_per_block(types, WLayout::NContiguous);
    let j0 = block_idx()[0] * cols;
    let j = j0 + c * v;
    let x_vec = x_vectors(&p, v);
    let w_vec = (p.w as usize) % 16 == 0 && p.ldw % v as u64 == 0 && p.strides[1] % v as u64 == 0;
    let base = smem_base();
    let pitch = gemm_core::skinny::tile_pitch(types, WLayout::NContiguous, false);
    let tile_bytes = S as u32 * pitch;
    let red = base + 2 * tile_bytes;
    let tiles = p.k.div_ceil(kt_len);
    // The tile's row of this lane's chunk u.
    let lane_k = warp * k_lanes + q;
    let lane_row = |u: u32| if quads { lane_k * U as u32 + u } else { u * WARPS * k_lanes + lane_k };
    let load_w = |w: *const I::Raw, tile: u32| {
        let mut wc = [[0u32; 4]; U];
        if tile < tiles && j < p.n {
            for (u, chunk) in wc.iter_mut().enumerate() {
                let ku = tile * kt_len + lane_row(u as u32);
                if ku >= p.k {
                    break;
                }
                let at = w.add((ku as u64 * p.ldw + j as u64) as usize);
                *chunk = if w_vec && j + v <= p.n { ld_v4(at as *const u8) } else { I::gather(at, 1, p.n - j) };
            }
        }
        wc
    };
    let mut b = block_idx()[1];
    while b < p.count {
        let x = p.x.add((b as u64 * p.strides[0]) as usize);
        let w = p.w.add((b as u64 * p.strides[1]) as usize);
        let y = p.y.add((b as u64 * p.strides[2]) as usize);
        let mut acc = [[I::Acc::ZERO; 16]; S];
        if tiles > 0 {
            load_x_tile::<I, O, S>(&p, x, (0, kt_len), (base, pitch), x_vec);
        }
        crate::thread::cp_async_commit();
        let mut wcur = load_w(w, 0);
        for tile in 0..tiles {
            if tile + 1 < tiles {
                let next = base + ((tile + 1) % 2) * tile_bytes;
                load_x_tile::<I, O, S>(&p, x, ((tile + 1) * kt_len, kt_len), (next, pitch), x_vec);
            }
            crate::thread::cp_async_commit();
            let wnext = load_w(w, tile + 1);
            crate::thread::cp_async_wait(1);
            sync_threads();
            let buf = base + (tile % 2) * tile_bytes;
            if quads {
                I::quad(&mut acc, &wcur, |i| buf + i * pitch + lane_row(0) * bytes);
            } else {
                for (u, chunk) in wcur.iter().enumerate() {
                    let wu = I::unpack(*chunk);
                    let r = lane_row(u as u32);
                    for (i, acc_row) in acc.iter_mut().enumerate() {
                        let xv = I::ld_shared_one(buf + i as u32 * pitch + r * bytes);
                        I::axpy(acc_row, xv, &wu);
                    }
                }
            }
            sync_threads();
            wcur = wnext;
        }
        crate::thread::cp_async_wait(0);
        if quads {
            // i8's S x 16 sums a lane, halved at each of the k lanes' bits
            // (`halve`): each lane ends with S finished sums, 4 x S
            // shuffles (S x 64 one at a time; its epilogue took longer
            // than its products at S = 8). Then the warps.
            // One call a k-lane bit, each with a constant count, so that
            // every loop unrolls and the sums stay in registers.
            debug_assert!(column_lanes == 2);
            let bit = |m: u32| lane & m != 0;
            halve(&mut acc, S * 16, 2, bit(2));
            halve(&mut acc, S * 8, 4, bit(4));
            halve(&mut acc, S * 4, 8, bit(8));
            halve(&mut acc, S * 2, 16, bit(16));
            let off = [(2, 8), (4, 4), (8, 2), (16, 1)]
                .iter()
                .fold(0, |o, &(m, part)| o + if bit(m) { part * S as u32 } else { 0 });
            for t in 0..S {
                let idx = off + t as u32;
                let (i, col) = (idx / 16, c * 16 + idx % 16);
                I::Acc::st_shared(red + ((warp * S as u32 + i) * cols + col) * I::Acc::BYTES, acc[0][t]);
            }
            sync_threads();
            finish::<I, O, S>(&p, y, (j0, cols), red);
            b += grid_dim()[1];
            continue;
        }
        // The k lanes of a chunk of columns (xor column_lanes, .., 16),
        // then the warps.
        for (i, row) in acc.iter().enumerate() {
            for (vv, &a) in row.iter().enumerate().take(v as usize) {
                let mut a = a;
                let mut mask = column_lanes;
                while mask < 32 {
                    a = I::Acc::add(a, I::Acc::shfl_xor(a, mask));
                    mask *= 2;
                }
                if q == 0 {
                    let col = c * v + vv as u32;
                    I::Acc::st_shared(red + ((warp * S as u32 + i as u32) * cols + col) * I::Acc::BYTES, a);
                }
            }
        }
        sync_threads();
        finish::<I, O, S>(&p, y, (j0, cols), red);
        b += grid_dim()[1];
    }
}

/// Operand types the tensor-core form of [`skinny_wk`] takes
/// ([`skinny_mma_wk`]): `mma.sync` with the small side as A (16 rows a tile;
/// 8 for f64's m8n8k4) and W as B (8 columns a tile).
///
/// A lane's 16-byte chunk of W (column `lane / 4`, k offset `(lane % 4) V`
/// of the warp's `4 V`) is two k-steps of B's fragment for a permuted k:
/// the warp's `4 V` elements of k are multiplied in an order other than
/// memory's, the same for A (X) and B (W), so the products are those of
/// the unpermuted sum (PTX ISA, "Matrix Fragments for mma.m16n8k16",
/// "mma.m16n8k32", "mma.m8n8k4"): for 16-bit and 8-bit operands words 0
/// and 1 of the chunk are the first step's `b0, b1` (A's row r: `a0, a2`;
/// row r + 8: `a1, a3`), words 2 and 3 the second's; for f64 element 0 is
/// the first step's, element 1 the second's.
pub trait MmaInput: Input {
    /// Rows of one A tile (16; 8 for f64).
    const TILE_M: u32;
    /// Partial sums of one m x 8 tile a lane holds (4; 2 for f64).
    type Frag: Copy;
    /// A tile's zero sums.
    const FRAG_ZERO: Self::Frag;
    /// Two k-steps: `acc += X(rows r, r + 8; chunk) W(chunk; column)`, `x`
    /// the lane's chunk of row r and `x8` of row r + 8 (unused for f64).
    fn mma2(acc: Self::Frag, x: [u32; 4], x8: [u32; 4], w: [u32; 4]) -> Self::Frag;
    /// The sums for C(r, 2q), C(r, 2q + 1), C(r + 8, 2q), C(r + 8, 2q + 1)
    /// (f64: the first two).
    fn sums(f: Self::Frag) -> [Self::Acc; 4];
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32`, twice.
macro_rules! mma_half {
    ($marker:ident, $ty:literal) => {
        impl MmaInput for $marker {
            const TILE_M: u32 = 16;
            type Frag = [f32; 4];
            const FRAG_ZERO: [f32; 4] = [0.0; 4];
            #[inline(always)]
            fn mma2(acc: [f32; 4], x: [u32; 4], x8: [u32; 4], w: [u32; 4]) -> [f32; 4] {
                let mut d = acc;
                for step in 0..2 {
                    let (a0, a1, a2, a3) = (x[2 * step], x8[2 * step], x[2 * step + 1], x8[2 * step + 1]);
                    let (b0, b1) = (w[2 * step], w[2 * step + 1]);
                    // SAFETY: register-only tensor-core arithmetic; every lane
                    // of the warp executes it (sm_80 and newer).
                    unsafe {
                        asm!(concat!("mma.sync.aligned.m16n8k16.row.col.f32.", $ty, ".", $ty, ".f32 ",
                                     "{{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, ",
                                     "{{{d0}, {d1}, {d2}, {d3}}};"),
                             d0 = inout(reg32) d[0], d1 = inout(reg32) d[1], d2 = inout(reg32) d[2],
                             d3 = inout(reg32) d[3], a0 = in(reg32) a0, a1 = in(reg32) a1, a2 = in(reg32) a2,
                             a3 = in(reg32) a3, b0 = in(reg32) b0, b1 = in(reg32) b1,
                             options(pure, nomem, nostack));
                    }
                }
                d
            }
            #[inline(always)]
            fn sums(f: [f32; 4]) -> [f32; 4] {
                f
            }
        }
    };
}

mma_half!(F16, "f16");
mma_half!(Bf16, "bf16");

impl MmaInput for S8 {
    const TILE_M: u32 = 16;
    type Frag = [i32; 4];
    const FRAG_ZERO: [i32; 4] = [0; 4];
    #[inline(always)]
    fn mma2(acc: [i32; 4], x: [u32; 4], x8: [u32; 4], w: [u32; 4]) -> [i32; 4] {
        let mut d = acc;
        for step in 0..2 {
            let (a0, a1, a2, a3) = (x[2 * step], x8[2 * step], x[2 * step + 1], x8[2 * step + 1]);
            let (b0, b1) = (w[2 * step], w[2 * step + 1]);
            // SAFETY: as for the 16-bit types (wrapping i32 sums).
            unsafe {
                asm!("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {{{d0}, {d1}, {d2}, {d3}}}, \
                      {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
                     d0 = inout(reg32) d[0], d1 = inout(reg32) d[1], d2 = inout(reg32) d[2],
                     d3 = inout(reg32) d[3], a0 = in(reg32) a0, a1 = in(reg32) a1, a2 = in(reg32) a2,
                     a3 = in(reg32) a3, b0 = in(reg32) b0, b1 = in(reg32) b1,
                     options(pure, nomem, nostack));
            }
        }
        d
    }
    #[inline(always)]
    fn sums(f: [i32; 4]) -> [i32; 4] {
        f
    }
}

impl MmaInput for f64 {
    const TILE_M: u32 = 8;
    type Frag = [f64; 2];
    const FRAG_ZERO: [f64; 2] = [0.0; 2];
    #[inline(always)]
    fn mma2(acc: [f64; 2], x: [u32; 4], _x8: [u32; 4], w: [u32; 4]) -> [f64; 2] {
        let mut d = acc;
        for step in 0..2 {
            let a = (x[2 * step + 1] as u64) << 32 | x[2 * step] as u64;
            let b = (w[2 * step + 1] as u64) << 32 | w[2 * step] as u64;
            // SAFETY: register-only FP64 tensor-core arithmetic, whole warp.
            unsafe {
                asm!("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {{{d0}, {d1}}}, {{{a}}}, {{{b}}}, {{{d0}, {d1}}};",
                     d0 = inout(reg64) d[0], d1 = inout(reg64) d[1], a = in(reg64) a, b = in(reg64) b,
                     options(pure, nomem, nostack));
            }
        }
        d
    }
    #[inline(always)]
    fn sums(f: [f64; 2]) -> [f64; 4] {
        [f[0], f[1], 0.0, 0.0]
    }
}

/// The tensor-core form of [`skinny_wk`] for S = 16 to 64 rows: the same
/// lanes, tiles of k and loads (X's tile in shared memory, W's chunks in
/// registers one tile ahead), each lane's chunks fed to `mma.sync` as B
/// fragments ([`MmaInput`]); the warps' sums added in warp order as there.
///
/// # Safety
/// As [`skinny_wk`].
#[inline(always)]
pub unsafe fn skinny_mma_wk<I: MmaInput, O: Output<Value = I::Acc>, const S: usize, const TILES: usize>(
    p: Params<I::Raw, O>,
    types: SkinnyTypes,
) {
    const CL: usize = gemm_core::skinny::COLS_PER_LANE as usize;
    let t = thread_idx()[0];
    let (lane, warp) = (t % 32, t / 32);
    let (c, q) = (lane / 4, lane % 4);
    let v = I::V;
    let bytes = 16 / v;
    let kt_len = KT_BYTES_WK / U as u32 * UM as u32 / bytes;
    let cols = cols_per_block(types, WLayout::KContiguous);
    let j0 = block_idx()[0] * cols;
    let x_vec = x_vectors(&p, v);
    let w_vec = (p.w as usize) % 16 == 0 && p.ldw % v as u64 == 0 && p.strides[1] % v as u64 == 0;
    let base = smem_base();
    let pitch = gemm_core::skinny::tile_pitch(types, WLayout::KContiguous, true);
    let tile_bytes = S as u32 * pitch;
    let red = base + 2 * tile_bytes;
    let tiles = p.k.div_ceil(kt_len);
    let lane_k = (warp * 4 + q) * v;
    let load_w = |w: *const I::Raw, tile: u32| {
        let mut wc = [[[0u32; 4]; CL]; UM];
        if tile < tiles {
            for (u, row) in wc.iter_mut().enumerate() {
                let ku = tile * kt_len + u as u32 * WARPS * 4 * v + lane_k;
                if ku >= p.k {
                    break;
                }
                let full = ku + v <= p.k;
                let len = if full { v } else { p.k - ku };
                for (ci, chunk) in row.iter_mut().enumerate() {
                    let j = j0 + c + 8 * ci as u32;
                    if j < p.n {
                        let at = w.add((j as u64 * p.ldw + ku as u64) as usize);
                        *chunk = if w_vec && full { ld_v4(at as *const u8) } else { I::gather(at, 1, len) };
                    }
                }
            }
        }
        wc
    };
    let tm = I::TILE_M;
    let mut b = block_idx()[1];
    while b < p.count {
        let x = p.x.add((b as u64 * p.strides[0]) as usize);
        let w = p.w.add((b as u64 * p.strides[1]) as usize);
        let y = p.y.add((b as u64 * p.strides[2]) as usize);
        let mut acc = [[I::FRAG_ZERO; CL]; TILES];
        if tiles > 0 {
            load_x_tile::<I, O, S>(&p, x, (0, kt_len), (base, pitch), x_vec);
        }
        crate::thread::cp_async_commit();
        let mut wcur = load_w(w, 0);
        for tile in 0..tiles {
            if tile + 1 < tiles {
                let next = base + ((tile + 1) % 2) * tile_bytes;
                load_x_tile::<I, O, S>(&p, x, ((tile + 1) * kt_len, kt_len), (next, pitch), x_vec);
            }
            crate::thread::cp_async_commit();
            let wnext = load_w(w, tile + 1);
            crate::thread::cp_async_wait(1);
            sync_threads();
            let buf = base + (tile % 2) * tile_bytes;
            for (u, row) in wcur.iter().enumerate() {
                let off = u as u32 * WARPS * 4 * v + lane_k;
                for (mt, acc_m) in acc.iter_mut().enumerate() {
                    let r = mt as u32 * tm + c;
                    let xr = ld_shared_v4(buf + r * pitch + off * bytes);
                    let xr8 = if tm == 16 { ld_shared_v4(buf + (r + 8) * pitch + off * bytes) } else { [0; 4] };
                    for ci in 0..CL {
                        acc_m[ci] = I::mma2(acc_m[ci], xr, xr8, row[ci]);
                    }
                }
            }
            sync_threads();
            wcur = wnext;
        }
        crate::thread::cp_async_wait(0);
        // Each lane's sums: rows r (and r + 8), columns 2q, 2q + 1 of each
        // 8-column tile; then the warps.
        for (mt, acc_m) in acc.iter().enumerate() {
            for (ci, &f) in acc_m.iter().enumerate() {
                let s4 = I::sums(f);
                for (e, &sum) in s4.iter().enumerate().take(if tm == 16 { 4 } else { 2 }) {
                    let row = mt as u32 * tm + c + 8 * (e as u32 / 2);
                    let col = 8 * ci as u32 + 2 * q + e as u32 % 2;
                    I::Acc::st_shared(red + ((warp * S as u32 + row) * cols + col) * I::Acc::BYTES, sum);
                }
            }
        }
        sync_threads();
        finish::<I, O, S>(&p, y, (j0, cols), red);
        b += grid_dim()[1];
    }
}

/// Where a lane of [`skinny_mma_wn`] reads W.
#[derive(Clone, Copy)]
struct WnWords {
    tiles: u32,
    kt_len: u32,
    /// The first of the lane's 4 columns.
    j: u32,
    /// Whether W's words can be read 4 bytes at a time.
    w_vec: bool,
    warp: u32,
    /// The lane's k group (lane % 4).
    h: u32,
}

/// The lane's words of W for `tile` (`[pair][slot][r]`, zeros past k, n
/// or the last tile): row `pair x WARPS x 64 + warp x 64 + 4 (h + 4 slot)
/// + r` of the tile, columns `j .. j + 4`. A function, not a closure, so
/// that it is inlined (a closure called twice was not, and took its
/// captures through local memory).
///
/// # Safety
/// As [`skinny_mma_wn`]'s.
#[inline(always)]
unsafe fn wn_words<O: Output, const PAIRS: usize>(
    p: &Params<i8, O>,
    w: *const i8,
    tile: u32,
    c: WnWords,
) -> [[[u32; 4]; 4]; PAIRS] {
    let mut wc = [[[0u32; 4]; 4]; PAIRS];
    if tile < c.tiles && c.j < p.n {
        for (pair, slots) in wc.iter_mut().enumerate() {
            for (slot, rows) in slots.iter_mut().enumerate() {
                for (r, word) in rows.iter_mut().enumerate() {
                    let row = pair as u32 * WARPS * 64 + c.warp * 64 + 4 * (c.h + 4 * slot as u32) + r as u32;
                    let ku = tile * c.kt_len + row;
                    if ku < p.k {
                        let at = w.add((ku as u64 * p.ldw + c.j as u64) as usize);
                        *word = if c.w_vec && c.j + 4 <= p.n {
                            ld_one!(at, "b32", reg32, u32)
                        } else {
                            S8::gather(at, 1, (p.n - c.j).min(4))[0]
                        };
                    }
                }
            }
        }
    }
    wc
}

/// The tensor-core form for an N-contiguous W of i8 (16 to 64 rows;
/// `gemm_core::skinny::mma_wn_rows_for`): the block's 32 columns as in
/// [`skinny_wn`] for i8, its warps splitting k, each warp taking 2 x 64
/// rows a tile. Lane `4 g + h` reads the 4-byte word of columns `4 g ..
/// 4 g + 4` at the rows of k groups `h, h + 4, h + 8, h + 12` (4 rows each)
/// of each 64; each group's 4 x 4 bytes, transposed (`prmt`), are the B
/// fragments (`b0`, `b1`, 4 k of column `g`) of `mma.m16n8k32` for 4
/// n8 tiles: tile `t` holds the columns `4 g' + t` (g' = 0..8). X's
/// fragments are read as 4-byte words of its tile in shared memory (k in
/// memory order). The warps' sums are added in warp order as in
/// [`skinny_wk`].
///
/// # Safety
/// As [`skinny_wn`], with the tensor-core form's geometry.
#[inline(always)]
pub unsafe fn skinny_mma_wn<O: Output<Value = i32>, const S: usize, const TILES: usize>(
    p: Params<i8, O>,
    types: SkinnyTypes,
) {
    /// 64-row chunks of k a warp takes per tile.
    const PAIRS: usize = 2;
    let t = thread_idx()[0];
    let (lane, warp) = (t % 32, t / 32);
    let (g, h) = (lane / 4, lane % 4);
    let kt_len = gemm_core::skinny::MMA_WN_TILE_ROWS;
    const { assert!(gemm_core::skinny::MMA_WN_TILE_ROWS == WARPS * 64 * PAIRS as u32) };
    let cols = cols_per_block(types, WLayout::NContiguous);
    let j0 = block_idx()[0] * cols;
    let j = j0 + 4 * g;
    let x_vec = x_vectors(&p, 16);
    let w_vec = (p.w as usize) % 4 == 0 && p.ldw % 4 == 0 && p.strides[1] % 4 == 0;
    let base = smem_base();
    let pitch = gemm_core::skinny::tile_pitch(types, WLayout::NContiguous, true);
    let tile_bytes = S as u32 * pitch;
    let red = base + 2 * tile_bytes;
    let tiles = p.k.div_ceil(kt_len);
    let words = WnWords { tiles, kt_len, j, w_vec, warp, h };
    let mut b = block_idx()[1];
    while b < p.count {
        let x = p.x.add((b as u64 * p.strides[0]) as usize);
        let w = p.w.add((b as u64 * p.strides[1]) as usize);
        let y = p.y.add((b as u64 * p.strides[2]) as usize);
        let mut acc = [[[0i32; 4]; 4]; TILES];
        if tiles > 0 {
            load_x_tile::<S8, O, S>(&p, x, (0, kt_len), (base, pitch), x_vec);
        }
        crate::thread::cp_async_commit();
        let mut wcur = wn_words::<O, PAIRS>(&p, w, 0, words);
        for tile in 0..tiles {
            if tile + 1 < tiles {
                let next = base + ((tile + 1) % 2) * tile_bytes;
                load_x_tile::<S8, O, S>(&p, x, ((tile + 1) * kt_len, kt_len), (next, pitch), x_vec);
            }
            crate::thread::cp_async_commit();
            let wnext = wn_words::<O, PAIRS>(&p, w, tile + 1, words);
            crate::thread::cp_async_wait(1);
            sync_threads();
            let buf = base + (tile % 2) * tile_bytes;
            for (pair, slots) in wcur.iter().enumerate() {
                // frag[tile t][slot]: 4 k of group `h + 4 slot`, column 4 g + t.
                let mut frag = [[0u32; 4]; 4];
                for (slot, rows) in slots.iter().enumerate() {
                    let cols4 = transpose_4x4(*rows);
                    for (ft, &word) in frag.iter_mut().zip(cols4.iter()) {
                        ft[slot] = word;
                    }
                }
                // X's words of rows g and g + 8 of each m tile, k groups
                // `h + 4 slot` of this 64 (the tile's row of slot 0, r 0:
                // as in `wn_words`).
                let k0 = pair as u32 * WARPS * 64 + warp * 64 + 4 * h;
                for (mt, acc_m) in acc.iter_mut().enumerate() {
                    let at = buf + (mt as u32 * 16 + g) * pitch + k0;
                    let (mut xr, mut xr8) = ([0u32; 4], [0u32; 4]);
                    for slot in 0..4 {
                        xr[slot] = i32::ld_shared(at + 16 * slot as u32) as u32;
                        xr8[slot] = i32::ld_shared(at + 8 * pitch + 16 * slot as u32) as u32;
                    }
                    for (ft, a) in frag.iter().zip(acc_m.iter_mut()) {
                        *a = S8::mma2(*a, xr, xr8, *ft);
                    }
                }
            }
            sync_threads();
            wcur = wnext;
        }
        crate::thread::cp_async_wait(0);
        // Lane sums: rows g (and g + 8), n8 columns 2h, 2h + 1 of each tile
        // t, columns 4 (2h + e % 2) + t of the block; then the warps.
        for (mt, acc_m) in acc.iter().enumerate() {
            for (ft, f) in acc_m.iter().enumerate() {
                for (e, &sum) in f.iter().enumerate() {
                    let row = mt as u32 * 16 + g + 8 * (e as u32 / 2);
                    let col = 4 * (2 * h + e as u32 % 2) + ft as u32;
                    i32::st_shared(red + ((warp * S as u32 + row) * cols + col) * 4, sum);
                }
            }
        }
        sync_threads();
        finish::<S8, O, S>(&p, y, (j0, cols), red);
        b += grid_dim()[1];
    }
}

/// The exported entry points: for each line `(name, types, S, layouts)` of
/// [`gemm_core::skinny_menu!`], `<name>_wk` and `<name>_wn` as it lists
/// them; for each line `(name, types, S)` of
/// [`gemm_core::skinny_mma_menu!`], `<name>` (the tensor-core forms). Parameters, in
/// this order: `s, n, k: u32`, `alpha, beta` (f64 for f64, i32 for i8, f32
/// otherwise), `x: *const`, `x_rs, x_ks: u64`, `w: *const`, `ldw: u64`,
/// `y: *mut`, `y_rs, y_cs: u64`, `count: u32`, `stride_x, stride_w,
/// stride_y: u64` (see [`Params`]).
pub mod entry_points {
    use super::*;

    /// One entry point: `$export` (the symbol), the launch's parameters
    /// into [`Params`], then `$call` on them (`p`).
    macro_rules! entry {
        ($export:expr, $fn:ident, $i:ty, $o:ty, |$p:ident| $call:expr) => {
            #[doc = concat!("Entry point `", $export, "`.")]
            ///
            /// # Safety
            /// As the kernel's (`skinny_wk`, `skinny_wn`, `skinny_mma_wk`,
            /// `skinny_mma_wn`).
            #[export_name = $export]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn $fn(
                s: u32,
                n: u32,
                k: u32,
                alpha: <$o as Output>::Value,
                beta: <$o as Output>::Value,
                x: *const <$i as Input>::Raw,
                x_rs: u64,
                x_ks: u64,
                w: *const <$i as Input>::Raw,
                ldw: u64,
                y: *mut $o,
                y_rs: u64,
                y_cs: u64,
                count: u32,
                stride_x: u64,
                stride_w: u64,
                stride_y: u64,
            ) {
                let $p = Params {
                    s,
                    n,
                    k,
                    alpha,
                    beta,
                    x,
                    x_rs,
                    x_ks,
                    w,
                    ldw,
                    y,
                    y_rs,
                    y_cs,
                    count,
                    strides: [stride_x, stride_w, stride_y],
                };
                $call
            }
        };
    }

    macro_rules! skinny_entry {
        ($name:ident, $suffix:ident, $kernel:ident, $i:ty, $o:ty, $types:ident, $s:literal) => {
            entry!(concat!(stringify!($name), "_", stringify!($suffix)), $suffix, $i, $o, |p| {
                crate::skinny::$kernel::<$i, $o, $s>(p, SkinnyTypes::$types)
            });
        };
    }

    macro_rules! skinny_types {
        ($name:ident, F64, $s:literal, $l:tt) => { skinny_types!(@go $name, f64, f64, F64, $s, $l); };
        ($name:ident, F32, $s:literal, $l:tt) => { skinny_types!(@go $name, f32, f32, F32, $s, $l); };
        ($name:ident, F16, $s:literal, $l:tt) => { skinny_types!(@go $name, F16, H, F16, $s, $l); };
        ($name:ident, F16F32, $s:literal, $l:tt) => { skinny_types!(@go $name, F16, f32, F16F32, $s, $l); };
        ($name:ident, Bf16, $s:literal, $l:tt) => { skinny_types!(@go $name, Bf16, Bh, Bf16, $s, $l); };
        ($name:ident, Bf16F32, $s:literal, $l:tt) => { skinny_types!(@go $name, Bf16, f32, Bf16F32, $s, $l); };
        ($name:ident, S8, $s:literal, $l:tt) => { skinny_types!(@go $name, S8, i32, S8, $s, $l); };
        (@go $name:ident, $i:ty, $o:ty, $types:ident, $s:literal, [$($l:ident),*]) => {
            #[doc = concat!("Entry points `", stringify!($name), "_{wk,wn}`.")]
            pub mod $name {
                use super::*;
                $( skinny_types!(@layout $l, $name, $i, $o, $types, $s); )*
            }
        };
        (@layout wk, $name:ident, $i:ty, $o:ty, $types:ident, $s:literal) => {
            skinny_entry!($name, wk, skinny_wk, $i, $o, $types, $s);
        };
        (@layout wn, $name:ident, $i:ty, $o:ty, $types:ident, $s:literal) => {
            skinny_entry!($name, wn, skinny_wn, $i, $o, $types, $s);
        };
    }

    macro_rules! export_skinny {
        ($( ($name:ident, $t:ident, $s:literal, $l:tt) )*) => {$(
            skinny_types!($name, $t, $s, $l);
        )*};
    }

    /// The tensor-core form's entry point `$name`.
    macro_rules! mma_entry {
        ($name:ident, $i:ty, $o:ty, $types:ident, $s:literal) => {
            entry!(stringify!($name), $name, $i, $o, |p| {
                crate::skinny::skinny_mma_wk::<$i, $o, $s, { $s / <$i as MmaInput>::TILE_M as usize }>(
                    p,
                    SkinnyTypes::$types,
                )
            });
        };
    }

    macro_rules! mma_types {
        ($name:ident, S8, $s:literal, wn) => {
            entry!(stringify!($name), $name, S8, i32, |p| {
                crate::skinny::skinny_mma_wn::<i32, $s, { $s / 16 }>(p, SkinnyTypes::S8)
            });
        };
        ($name:ident, $t:ident, $s:literal, wk) => {
            mma_types!($name, $t, $s);
        };
        ($name:ident, F64, $s:literal) => {
            mma_entry!($name, f64, f64, F64, $s);
        };
        ($name:ident, F16, $s:literal) => {
            mma_entry!($name, F16, H, F16, $s);
        };
        ($name:ident, F16F32, $s:literal) => {
            mma_entry!($name, F16, f32, F16F32, $s);
        };
        ($name:ident, Bf16, $s:literal) => {
            mma_entry!($name, Bf16, Bh, Bf16, $s);
        };
        ($name:ident, Bf16F32, $s:literal) => {
            mma_entry!($name, Bf16, f32, Bf16F32, $s);
        };
        ($name:ident, S8, $s:literal) => {
            mma_entry!($name, S8, i32, S8, $s);
        };
    }

    macro_rules! export_mma {
        ($( ($name:ident, $t:ident, $s:literal, $l:ident) )*) => {$(
            mma_types!($name, $t, $s, $l);
        )*};
    }

    gemm_core::skinny_mma_menu!(export_mma);

    gemm_core::skinny_menu!(export_skinny);
}
