//! Stage 6, vectorized access: stage 5 with 16-byte global loads and stores
//! (two f64 or four f32 per access), the A tile stored k-major in shared
//! memory, and shared-memory reads free of bank conflicts.
//!
//! # Shapes
//! A m x k (lda), B k x n (ldb), C m x n (ldc), in elements; C row-major,
//! A and B row- or column-major (`A_COL`, `B_COL`; `crate::A_COL_MAJOR`).
//!
//! # Launch
//! As stage 5 (`KernelConfig::Vectorized`), with the shared-memory layout
//! `gemm_core::tiling::s06_layout`: A transposed, `[BK][BM + V]`, B `[BK][BN]`,
//! V = `T::VEC` elements per 16-byte vector.
//!
//! # Thread mapping
//! Thread (ty, tx) = (tid / (BN / TN), tid % (BN / TN)) owns TM / V row
//! groups and TN / V column groups of V each, spaced one block-width of
//! vectors apart: rows `u * (BM / TM) * V + ty * V + e`, columns
//! `w * (BN / TN) * V + tx * V + e`. So the 16 lanes along x of a warp read 16
//! consecutive 16-byte vectors of a B row (conflict-free), the two values of
//! ty read two adjacent vectors of an A row (a broadcast each), and C is
//! written by full 16-byte vectors, consecutive lanes on consecutive vectors.
//!
//! Loads: a row-major A tile moves as 16-byte vectors along k (one row of A)
//! and is stored transposed, one element per k row; the V-element pad of the
//! transposed rows spreads those stores over the banks (see `s06_layout`).
//! A column-major A moves as vectors along m and is stored as vectors. A
//! row-major B tile moves as vectors and is stored as vectors; a
//! column-major B moves along k and is stored transposed (with some bank
//! conflicts on those stores: `[BK][BN]` has no pad).
//!
//! # Fringe
//! Vector access needs a 16-byte aligned base and a leading dimension that is
//! a multiple of V (checked once per matrix, `thread::vector_ok`) and the V
//! elements inside the matrix; anything else (odd lda, the last columns of an
//! odd k or n) takes the scalar path, element by element with zero fill.
//!
//! # Source
//! "Optimizing matrix multiplication on an RTX 3050" (16-byte vectorized loads, transposed A tile), CUDA C++ Best
//! Practices Guide on shared-memory banks.

use crate::element::Element;
use crate::thread::{load_or_zero, smem_base, store_c_vec, sync_threads, thread_idx, vector_ok, GemmArgs};
use gemm_core::ceil_div;
use gemm_core::tiling::{block_tile_origin, s06_layout, BlockTile};

/// V elements of storage line `row` of a matrix starting at position `col`
/// (a multiple of V), in storage coordinates (row and column of a row-major
/// matrix; column and row of a column-major one): one 16-byte load when
/// `vec` and all V lie inside the matrix, else element by element with
/// zeros outside it.
///
/// # Safety
/// `p` points to a matrix of `rows` lines of `cols` elements, `ld` apart.
#[inline(always)]
pub(crate) unsafe fn load_vec_or_zero<T: Element>(
    p: *const T,
    vec: bool,
    row: u32,
    col: u32,
    rows: u32,
    cols: u32,
    ld: u32,
) -> [T; 4] {
    let mut v = [T::ZERO; 4];
    if vec && row < rows && col + T::VEC as u32 <= cols {
        T::ld_global_vec(p.add(row as usize * ld as usize + col as usize), &mut v);
    } else {
        for (e, x) in v.iter_mut().enumerate() {
            if e < T::VEC {
                *x = load_or_zero::<T, false>(p, row, col + e as u32, rows, cols, ld);
            }
        }
    }
    v
}

/// Stage 6 (see the module docs).
///
/// # Safety
/// Launched with the geometry of `KernelConfig::Vectorized` for these
/// constants, on device pointers to matrices of the shapes in `g`.
#[inline(always)]
pub unsafe fn vectorized<
    T: Element,
    const BM: u32,
    const BN: u32,
    const BK: u32,
    const TM: usize,
    const TN: usize,
    const A_COL: bool,
    const B_COL: bool,
>(
    g: GemmArgs<T>,
) {
    let vec_len = T::VEC as u32;
    const { assert!(BM % TM as u32 == 0 && BN % TN as u32 == 0, "the thread tile must divide the block tile") };
    const { assert!(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "TM, TN, BK must be multiples of 4") };
    let lanes_n = BN / TN as u32;
    let lanes_m = BM / TM as u32;
    let threads = lanes_m * lanes_n;
    let tid = thread_idx()[0];
    let (ty, tx) = (tid / lanes_n, tid % lanes_n);
    let (row0, col0) = block_tile_origin(g.block, BlockTile::new(BM, BN, BK));
    let layout = s06_layout(BlockTile::new(BM, BN, BK), T::BYTES);
    let a_tile = smem_base(); // [BK][BM + V]: A transposed
    let b_tile = a_tile + layout.b_offset * T::BYTES; // [BK][BN]
    let (a_vec, b_vec, c_vec) = (vector_ok(g.a, g.lda), vector_ok(g.b, g.ldb), vector_ok(g.c as *const T, g.ldc));
    // Row of C (within the block tile) of the thread's element (u, e), and column of (w, e).
    let tile_row = |u: u32, e: u32| u * lanes_m * vec_len + ty * vec_len + e;
    let tile_col = |w: u32, e: u32| w * lanes_n * vec_len + tx * vec_len + e;

    let mut acc = [[T::ZERO; TN]; TM];
    let mut k0 = 0;
    while k0 < g.k {
        // The A tile: 16-byte vectors along A's contiguous dimension. A
        // row-major A moves along k and is stored transposed, one element per
        // k row; a column-major A moves along m and is stored as vectors.
        let a_chunks = BM * BK / vec_len;
        for i in 0..ceil_div(a_chunks, threads) {
            let c = tid + i * threads;
            if c < a_chunks {
                if A_COL {
                    // Storage rows are k, columns m: (k0 + kr, row0 + mc ..).
                    let (kr, mc) = (c / (BM / vec_len), c % (BM / vec_len) * vec_len);
                    let v = load_vec_or_zero(g.a, a_vec, k0 + kr, row0 + mc, g.k, g.m, g.lda);
                    T::st_shared_vec(a_tile + (kr * layout.a_ld + mc) * T::BYTES, &v);
                } else {
                    let (r, kc) = (c / (BK / vec_len), c % (BK / vec_len) * vec_len);
                    let v = load_vec_or_zero(g.a, a_vec, row0 + r, k0 + kc, g.m, g.k, g.lda);
                    // Index loops (not `.take(VEC)`): LLVM unrolls them, keeping `v` in registers.
                    for (e, &x) in v.iter().enumerate() {
                        if e < T::VEC {
                            T::st_shared(a_tile + ((kc + e as u32) * layout.a_ld + r) * T::BYTES, x);
                        }
                    }
                }
            }
        }
        // The B tile: vectors along n stored as vectors (row-major B), or
        // along k stored transposed (column-major B).
        let b_chunks = BK * BN / vec_len;
        for i in 0..ceil_div(b_chunks, threads) {
            let c = tid + i * threads;
            if c < b_chunks {
                if B_COL {
                    // Storage rows are n, columns k: (col0 + nr, k0 + kc ..).
                    let (nr, kc) = (c / (BK / vec_len), c % (BK / vec_len) * vec_len);
                    let v = load_vec_or_zero(g.b, b_vec, col0 + nr, k0 + kc, g.n, g.k, g.ldb);
                    for (e, &x) in v.iter().enumerate() {
                        if e < T::VEC {
                            T::st_shared(b_tile + ((kc + e as u32) * layout.b_ld + nr) * T::BYTES, x);
                        }
                    }
                } else {
                    let (r, nc) = (c / (BN / vec_len), c % (BN / vec_len) * vec_len);
                    let v = load_vec_or_zero(g.b, b_vec, k0 + r, col0 + nc, g.k, g.n, g.ldb);
                    T::st_shared_vec(b_tile + (r * layout.b_ld + nc) * T::BYTES, &v);
                }
            }
        }
        sync_threads();
        for kk in 0..BK {
            let mut a = [T::ZERO; TM];
            for u in 0..TM as u32 / vec_len {
                let mut v = [T::ZERO; 4];
                T::ld_shared_vec(a_tile + (kk * layout.a_ld + tile_row(u, 0)) * T::BYTES, &mut v);
                a[(u * vec_len) as usize..][..T::VEC].copy_from_slice(&v[..T::VEC]);
            }
            let mut b = [T::ZERO; TN];
            for w in 0..TN as u32 / vec_len {
                let mut v = [T::ZERO; 4];
                T::ld_shared_vec(b_tile + (kk * layout.b_ld + tile_col(w, 0)) * T::BYTES, &mut v);
                b[(w * vec_len) as usize..][..T::VEC].copy_from_slice(&v[..T::VEC]);
            }
            for i in 0..TM {
                for j in 0..TN {
                    acc[i][j] = T::fma(a[i], b[j], acc[i][j]);
                }
            }
        }
        sync_threads();
        k0 += BK;
    }
    for u in 0..TM as u32 / vec_len {
        for e in 0..vec_len {
            let i = (u * vec_len + e) as usize;
            let row = row0 + tile_row(u, e);
            for w in 0..TN as u32 / vec_len {
                let j = (w * vec_len) as usize;
                let mut v = [T::ZERO; 4];
                v[..T::VEC].copy_from_slice(&acc[i][j..j + T::VEC]);
                store_c_vec(&g, c_vec, row, col0 + tile_col(w, 0), &v);
            }
        }
    }
}
