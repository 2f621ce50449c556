//! Checking results: random inputs, a CPU reference in f64, and the error
//! bound every GPU result is held to.
//!
//! **Bound.** For `C <- alpha * A * B + beta * C0` with elements of machine
//! epsilon `eps` (2^-52 for f64, 2^-23 for f32), each element must satisfy
//!
//! ```text
//! |C - C_ref| <= (k + 2) * eps * (|alpha| * (|A| * |B|) + |beta| * |C0|)
//! ```
//!
//! elementwise, where `C_ref` is computed in f64 on the CPU (matrixmultiply)
//! and `|A| * |B|` is the product of the absolute values. A k-term dot
//! product with fused multiply-adds has error at most `k * u * (|A| * |B|)`
//! (`u = eps / 2`, Higham, *Accuracy and Stability of Numerical Algorithms*,
//! section 3.1); the f64 reference contributes at most as much again; the
//! `+ 2` covers the alpha/beta epilogue. Any NaN or infinity fails.

use crate::cublas::Cublas;
use crate::element::{Element, Product, Recast, Scalar, Types};
use crate::error::Error;
use crate::operands::device_matrix::{DeviceMatrix, DeviceView};
use crate::operands::matrix::{MatRef, Matrix};
use gemm_core::shape::{Layout, Op};
use gemm_core::warpgroup::WgmmaTypes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A `rows x cols` row-major matrix with elements drawn uniformly from
/// [-1, 1) (integer types: [-128, 127]), from `seed`.
pub fn random_matrix<T: Scalar>(rows: usize, cols: usize, seed: u64) -> Matrix<T> {
    random_matrix_in(rows, cols, Layout::RowMajor, seed)
}

/// A `rows x cols` matrix in `layout` with elements drawn uniformly from
/// [-1, 1) (integer types: from i8's range, [-128, 127]), from `seed`.
pub fn random_matrix_in<T: Scalar>(rows: usize, cols: usize, layout: Layout, seed: u64) -> Matrix<T> {
    let mut rng = StdRng::seed_from_u64(seed);
    if T::EPSILON == 0.0 {
        return Matrix::from_fn_in(rows, cols, layout, |_, _| T::from_f64(rng.random_range(-128i32..=127) as f64));
    }
    Matrix::from_fn_in(rows, cols, layout, |_, _| T::from_f64(rng.random_range(-1.0..1.0)))
}

/// A `rows x cols` matrix of small integers in [-4, 4] from `seed`: products
/// of such matrices are exact in f32 while `k * 16 < 2^24`, so results can be
/// compared for equality.
pub fn random_int_matrix<T: Scalar>(rows: usize, cols: usize, seed: u64) -> Matrix<T> {
    let mut rng = StdRng::seed_from_u64(seed);
    Matrix::from_fn(rows, cols, |_, _| T::from_f64(rng.random_range(-4i32..=4) as f64))
}

/// The elements of any matrix or view, row-major and packed, in f64.
fn to_f64_packed<T: Scalar>(m: MatRef<'_, T>, abs: bool) -> Vec<f64> {
    let mut out = Vec::with_capacity(m.rows() * m.cols());
    for i in 0..m.rows() {
        for j in 0..m.cols() {
            let x = m.get(i, j).map_or(f64::NAN, Scalar::as_f64);
            out.push(if abs { x.abs() } else { x });
        }
    }
    out
}

fn dgemm_cpu(m: usize, n: usize, k: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: a is m x k, b is k x n, c is m x n, all packed row-major
    // (row stride = columns, column stride 1), as their lengths show.
    unsafe {
        matrixmultiply::dgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            k as isize,
            1,
            b.as_ptr(),
            n as isize,
            1,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// The CPU reference `alpha * A * B + beta * C0` and the error bound of each
/// element (see the module docs), both m x n, packed, in f64.
pub struct Reference {
    /// Rows.
    pub m: usize,
    /// Columns.
    pub n: usize,
    /// Expected values.
    pub value: Vec<f64>,
    /// Allowed |error| per element.
    pub bound: Vec<f64>,
}

impl Reference {
    /// Computes the reference for `alpha * A * B + beta * C0` (`c0` is only
    /// read when `beta != 0`); A, B and C0 are any matrices or views (pass
    /// `a.t()` for op(A) = A^T).
    ///
    /// # Panics
    /// When the shapes do not match (a bug in the caller's test).
    pub fn new<'a, 'b, 'c, T: Element>(
        alpha: f64,
        a: impl Into<MatRef<'a, T>>,
        b: impl Into<MatRef<'b, T>>,
        beta: f64,
        c0: impl Into<MatRef<'c, T>>,
    ) -> Self {
        let (a, b, c0) = (a.into(), b.into(), c0.into());
        let (m, k, n) = (a.rows(), a.cols(), b.cols());
        assert_eq!(b.rows(), k, "reference: inner dimensions");
        assert_eq!((c0.rows(), c0.cols()), (m, n), "reference: C0's shape");
        let mut ab = vec![0.0; m * n];
        let mut abs_ab = vec![0.0; m * n];
        dgemm_cpu(m, n, k, &to_f64_packed(a, false), &to_f64_packed(b, false), &mut ab);
        dgemm_cpu(m, n, k, &to_f64_packed(a, true), &to_f64_packed(b, true), &mut abs_ab);
        let scale = (k as f64 + 2.0) * T::EPSILON;
        let mut value = vec![0.0; m * n];
        let mut bound = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let o = i * n + j;
                let c = if beta != 0.0 { c0.get(i, j).map_or(f64::NAN, Scalar::as_f64) } else { 0.0 };
                value[o] = alpha * ab[o] + beta * c;
                bound[o] = scale * (alpha.abs() * abs_ab[o] + beta.abs() * c.abs());
            }
        }
        Reference { m, n, value, bound }
    }

    /// The reference for a product with f16 or bf16 operands accumulated in
    /// f32 (stage 9, [`crate::Product`]), C of type `C`: the same f64
    /// product of the (already rounded) inputs, with the bound
    ///
    /// ```text
    /// |C - C_ref| <= (2k + 4) * 2^-24 * (|alpha| * (|A| * |B|) + |beta| * |C0|) + eps_C / 2 * |C_ref|
    /// ```
    ///
    /// the f32 accumulation's error with c = 2 (the tensor cores' adds are
    /// not all rounded to nearest), plus the rounding of the result to C's
    /// type (`eps_C` its machine epsilon: 2^-10 f16, 2^-7 bf16, 2^-23 f32).
    /// For i8 operands and an i32 C (exact integer products) the bound is 0;
    /// for FP8 (e4m3) operands it adds [`FP8_ACCUMULATION`] `|alpha|
    /// (|A||B|)_ij` (the tensor cores' reduced-precision accumulation within
    /// each k-tile of 128).
    ///
    /// # Panics
    /// When the shapes do not match (a bug in the caller's test).
    pub fn new_mixed<'a, 'b, 'c, T: Scalar, C: Scalar>(
        alpha: f64,
        a: impl Into<MatRef<'a, T>>,
        b: impl Into<MatRef<'b, T>>,
        beta: f64,
        c0: impl Into<MatRef<'c, C>>,
    ) -> Self {
        let input = if T::NAME == "e4m3" { FP8_ACCUMULATION } else { 0.0 };
        Self::mixed(alpha, a.into(), b.into(), beta, c0.into(), input)
    }

    /// The reference of an f32 product on TF32 tensor cores
    /// ([`crate::Gemm::allow_tf32`]): as [`Reference::new_mixed`] of the f32
    /// inputs, plus the inputs' reduction to TF32 (10 mantissa bits: a
    /// relative error up to 2^-10 each when truncated, so up to
    /// `2 * 2^-10 + 2^-20` per product):
    ///
    /// ```text
    /// |C - C_ref| <= ((2k + 4) * 2^-24 + 2^-9 + 2^-20) * |alpha| * (|A| * |B|) + (2k + 4) * 2^-24 * |beta| * |C0| + 2^-24 * |C_ref|
    /// ```
    ///
    /// # Panics
    /// When the shapes do not match.
    pub fn new_tf32<'a, 'b, 'c>(
        alpha: f64,
        a: impl Into<MatRef<'a, f32>>,
        b: impl Into<MatRef<'b, f32>>,
        beta: f64,
        c0: impl Into<MatRef<'c, f32>>,
    ) -> Self {
        Self::mixed(alpha, a.into(), b.into(), beta, c0.into(), 2f64.powi(-9) + 2f64.powi(-20))
    }

    /// [`Reference::new_mixed`] with `input` the relative error of each
    /// product from the inputs' reduction (0 when they are used as given).
    /// Integer products (both types exact) get a zero bound.
    fn mixed<T: Scalar, C: Scalar>(
        alpha: f64,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        beta: f64,
        c0: MatRef<'_, C>,
        input: f64,
    ) -> Self {
        let (m, k, n) = (a.rows(), a.cols(), b.cols());
        assert_eq!(b.rows(), k, "reference: inner dimensions");
        assert_eq!((c0.rows(), c0.cols()), (m, n), "reference: C0's shape");
        let mut ab = vec![0.0; m * n];
        let mut abs_ab = vec![0.0; m * n];
        dgemm_cpu(m, n, k, &to_f64_packed(a, false), &to_f64_packed(b, false), &mut ab);
        dgemm_cpu(m, n, k, &to_f64_packed(a, true), &to_f64_packed(b, true), &mut abs_ab);
        let exact = T::EPSILON == 0.0 && C::EPSILON == 0.0;
        let scale = if exact { 0.0 } else { (2.0 * k as f64 + 4.0) * 2f64.powi(-24) };
        let mut value = vec![0.0; m * n];
        let mut bound = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let o = i * n + j;
                let c = if beta != 0.0 { c0.get(i, j).map_or(f64::NAN, Scalar::as_f64) } else { 0.0 };
                value[o] = alpha * ab[o] + beta * c;
                bound[o] = scale * (alpha.abs() * abs_ab[o] + beta.abs() * c.abs())
                    + input * alpha.abs() * abs_ab[o]
                    + C::EPSILON / 2.0 * value[o].abs();
            }
        }
        Reference { m, n, value, bound }
    }

    /// The reference computed by cuBLAS on the GPU (for sizes where the CPU is
    /// too slow): values from cuBLAS `?gemm` of op(A) and op(B), bounds from
    /// cuBLAS of |A| and |B|. cuBLAS's own error is within `k * u * (|A||B|)`,
    /// so the same bound `(k + 2) * eps * (|A||B|)` holds for the difference
    /// (alpha = 1, beta = 0). C is computed in `c_layout`.
    ///
    /// # Errors
    /// cuBLAS or driver failures, mismatched shapes.
    pub fn from_cublas<T: Element>(
        cublas: &Cublas,
        (op_a, a): (Op, &DeviceMatrix<T>),
        (op_b, b): (Op, &DeviceMatrix<T>),
        c_layout: Layout,
    ) -> Result<Self, Error> {
        let (m, k) = (a.dims().op(op_a).rows, a.dims().op(op_a).cols);
        let n = b.dims().op(op_b).cols;
        let device = a.device();
        let mut c = DeviceMatrix::<T>::zeros_in(device, m, n, c_layout)?;
        cublas.gemm_op(op_a, op_b, 1.0, a, b, 0.0, &mut c)?;
        let value = to_f64_packed(c.to_host()?.as_ref(), false);
        let abs = |x: &DeviceMatrix<T>| -> Result<DeviceMatrix<T>, Error> {
            let mut h = x.to_host()?;
            for v in h.as_mut_slice() {
                *v = v.abs();
            }
            DeviceMatrix::from_host(device, &h)
        };
        cublas.gemm_op(op_a, op_b, 1.0, &abs(a)?, &abs(b)?, 0.0, &mut c)?;
        let scale = (k as f64 + 2.0) * T::EPSILON;
        let bound = to_f64_packed(c.to_host()?.as_ref(), false).into_iter().map(|x| scale * x).collect();
        Ok(Reference { m, n, value, bound })
    }

    /// The reference for any product the library computes
    /// ([`crate::Product`]: f64, f32, TF32 with `tf32`, f16 and bf16 into
    /// their own type or f32, i8 into i32) computed by cuBLAS on the GPU
    /// with the same types ([`Cublas::gemm_product`]), alpha = 1, beta = 0,
    /// C in `c_layout`: values from cuBLAS's product of op(A) and op(B),
    /// bounds from cuBLAS's product of `a_abs` and `b_abs` (the elementwise
    /// absolute values of A and B, as the caller holds them; not read for
    /// the exact i8 product, so any matrices of A's and B's shapes do) in
    /// f64 for f64 operands, else in f32 (a 16-bit C could overflow with
    /// |A||B|). Each element's bound ([`ProductBound`]) covers both results'
    /// errors from the exact product of the (already rounded) inputs:
    ///
    /// ```text
    /// f64, f32:     (k + 2) * eps * (|A||B|)                      (as Reference::from_cublas)
    /// f16, bf16:    2 * (2k + 4) * 2^-24 * (|A||B|) + eps_C * |C_ref|
    /// TF32:         2 * ((2k + 4) * 2^-24 + 2^-9 + 2^-20) * (|A||B|) + 2^-23 * |C_ref|
    /// i8 -> i32:    0 (exact)
    /// ```
    ///
    /// the f32 accumulation and input terms of [`Reference::new_mixed`] and
    /// [`Reference::new_tf32`] once for each side, and each side's rounding
    /// to C's type (`eps_C`: 2^-10 f16, 2^-7 bf16, 2^-23 f32). A call cuBLAS
    /// refuses (INT8 at leading dimensions that are not multiples of 4) is
    /// an [`Error::Cublas`]; [`Reference::new_mixed`] on the CPU is the
    /// fallback there.
    ///
    /// # Errors
    /// cuBLAS or driver failures, mismatched shapes.
    pub fn from_cublas_product<T: Product<C>, C: Scalar>(
        cublas: &Cublas,
        (op_a, a, a_abs): (Op, &DeviceMatrix<T>, &DeviceMatrix<T>),
        (op_b, b, b_abs): (Op, &DeviceMatrix<T>, &DeviceMatrix<T>),
        c_layout: Layout,
        tf32: bool,
    ) -> Result<Self, Error> {
        let (m, k) = (a.dims().op(op_a).rows, a.dims().op(op_a).cols);
        let n = b.dims().op(op_b).cols;
        let device = a.device();
        let value = {
            let mut c = DeviceMatrix::<C>::zeros_in(device, m, n, c_layout)?;
            cublas.gemm_product(op_a, op_b, 1.0, a, b, 0.0, &mut c, tf32)?;
            to_f64_packed(c.to_host()?.as_ref(), false)
        };
        let rule = ProductBound::of::<T, C>(tf32);
        // |A||B| in f64 for f64, else in f32 (f32 or TF32 as the product).
        fn abs_product<S: Element>(
            cublas: &Cublas,
            (op_a, a): (Op, DeviceView<'_, S>),
            (op_b, b): (Op, DeviceView<'_, S>),
            (m, n, c_layout): (usize, usize, Layout),
        ) -> Result<Vec<f64>, Error> {
            let mut s = DeviceMatrix::<S>::zeros_in(a.device(), m, n, c_layout)?;
            cublas.gemm_op(op_a, op_b, 1.0, a, b, 0.0, &mut s)?;
            Ok(to_f64_packed(s.to_host()?.as_ref(), false))
        }
        let c_shape = (m, n, c_layout);
        let mut bound = match (rule, T::TYPES) {
            (ProductBound::Exact, _) => vec![0.0; m * n],
            (_, Types::F64) => {
                abs_product::<f64>(cublas, (op_a, a_abs.as_view().recast()), (op_b, b_abs.as_view().recast()), c_shape)?
            }
            (_, Types::F32) if !tf32 => {
                abs_product::<f32>(cublas, (op_a, a_abs.as_view().recast()), (op_b, b_abs.as_view().recast()), c_shape)?
            }
            _ => {
                let mut s = DeviceMatrix::<f32>::zeros_in(device, m, n, c_layout)?;
                cublas.gemm_ex(op_a, op_b, 1.0, a_abs, b_abs, 0.0, &mut s)?;
                to_f64_packed(s.to_host()?.as_ref(), false)
            }
        };
        for (x, &v) in bound.iter_mut().zip(&value) {
            *x = rule.bound(k, *x, v);
        }
        Ok(Reference { m, n, value, bound })
    }

    /// Compares a GPU result (any matrix or view) with the reference.
    pub fn compare<'a, T: Scalar>(&self, got: impl Into<MatRef<'a, T>>) -> Comparison {
        let got = got.into();
        assert_eq!((got.rows(), got.cols()), (self.m, self.n), "compare: shape");
        let mut cmp = Comparison { checked: self.m * self.n, ..Default::default() };
        for i in 0..self.m {
            for j in 0..self.n {
                let o = i * self.n + j;
                let x = got.get(i, j).map_or(f64::NAN, Scalar::as_f64);
                let err = (x - self.value[o]).abs();
                if !x.is_finite() {
                    cmp.non_finite += 1;
                    cmp.first_bad.get_or_insert((i, j, x, self.value[o]));
                    continue;
                }
                cmp.max_abs_error = cmp.max_abs_error.max(err);
                if err > self.bound[o] {
                    cmp.out_of_bound += 1;
                    cmp.first_bad.get_or_insert((i, j, x, self.value[o]));
                }
                if self.bound[o] > 0.0 {
                    cmp.max_error_over_bound = cmp.max_error_over_bound.max(err / self.bound[o]);
                }
            }
        }
        cmp
    }
}

/// How [`Reference::from_cublas_product`] bounds the difference between
/// two results of one product (ours and cuBLAS's), each computed from the
/// same rounded inputs: per element, from k, the element of |A||B| and
/// cuBLAS's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ProductBound {
    /// Operands and C of one type of machine epsilon `eps`, accumulated in
    /// it (f64, f32): `(k + 2) * eps * (|A||B|)`, as
    /// [`Reference::from_cublas`].
    Same {
        /// The type's machine epsilon.
        eps: f64,
    },
    /// f32 accumulation (f16, bf16 and TF32 operands): each side within
    /// `((2k + 4) * 2^-24 + input) * (|A||B|)` of the exact product and its
    /// rounding to C, so `2 * ((2k + 4) * 2^-24 + input) * (|A||B|) +
    /// eps_c * |C_ref|` between them.
    F32Accumulation {
        /// The relative error of each product from the inputs' reduction
        /// (TF32: `2^-9 + 2^-20`; 0 for inputs used as given).
        input: f64,
        /// C's machine epsilon.
        eps_c: f64,
    },
    /// i8 operands, i32 C: exact on both sides, bound 0.
    Exact,
}

/// The relative error, against `|alpha| (|A||B|)_ij`, that an FP8 product
/// may add to the f32 bound: wgmma accumulates FP8 products with fewer bits
/// than f32 (DeepSeek-AI, "DeepSeek-V3 technical report": about 14), and
/// stage 9 adds each k-tile's partial (128 k, at most four wgmma steps of
/// 32 into a partial below |A||B|) to an f32 accumulator: 2^-9 leaves room
/// for a step's truncations at 2^-13 relative to the running sum.
pub const FP8_ACCUMULATION: f64 = 1.0 / 512.0;

impl ProductBound {
    /// The bound of a product of `T` operands into a `C` (`tf32`: f32 on
    /// TF32 tensor cores).
    pub fn of<T: Product<C>, C: Scalar>(tf32: bool) -> Self {
        match T::TYPES {
            Types::F64 => ProductBound::Same { eps: T::EPSILON },
            Types::F32 if !tf32 => ProductBound::Same { eps: T::EPSILON },
            Types::F32 | Types::Mixed(WgmmaTypes::Tf32) => {
                ProductBound::F32Accumulation { input: 2f64.powi(-9) + 2f64.powi(-20), eps_c: C::EPSILON }
            }
            Types::Mixed(WgmmaTypes::S8) => ProductBound::Exact,
            Types::Mixed(t) if t.fp8() => ProductBound::F32Accumulation { input: FP8_ACCUMULATION, eps_c: C::EPSILON },
            Types::Mixed(_) => ProductBound::F32Accumulation { input: 0.0, eps_c: C::EPSILON },
        }
    }

    /// The bound of one element: `k`, the element of |A||B| (`abs_ab`) and
    /// cuBLAS's value (`value`).
    pub fn bound(self, k: usize, abs_ab: f64, value: f64) -> f64 {
        match self {
            ProductBound::Same { eps } => (k as f64 + 2.0) * eps * abs_ab,
            ProductBound::F32Accumulation { input, eps_c } => {
                2.0 * ((2.0 * k as f64 + 4.0) * 2f64.powi(-24) + input) * abs_ab + eps_c * value.abs()
            }
            ProductBound::Exact => 0.0,
        }
    }
}

/// The outcome of [`Reference::compare`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// Elements compared.
    pub checked: usize,
    /// Elements that are NaN or infinite (e.g. never written over a NaN-poisoned C).
    pub non_finite: usize,
    /// Finite elements outside the bound.
    pub out_of_bound: usize,
    /// Largest |C - C_ref| over finite elements.
    pub max_abs_error: f64,
    /// Largest |C - C_ref| / bound (below 1 passes).
    pub max_error_over_bound: f64,
    /// The first failing element: (i, j, got, expected).
    pub first_bad: Option<(usize, usize, f64, f64)>,
}

impl Comparison {
    /// True when every element is finite and inside the bound.
    pub fn passed(&self) -> bool {
        self.non_finite == 0 && self.out_of_bound == 0
    }
}

impl core::fmt::Display for Comparison {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.passed() {
            write!(
                f,
                "ok: {} elements within (k+2)*eps*(|A||B|) (max error {:.2e}, {:.3} of the bound)",
                self.checked, self.max_abs_error, self.max_error_over_bound
            )
        } else {
            write!(
                f,
                "WRONG: {} non-finite, {} outside the bound of {} elements",
                self.non_finite, self.out_of_bound, self.checked
            )?;
            if let Some((i, j, got, want)) = self.first_bad {
                write!(f, "; first at ({i}, {j}): got {got}, expected {want}")?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    /// The bounds of [`Reference::from_cublas_product`] per type pair.
    #[test]
    fn product_bounds_by_type() {
        assert_eq!(ProductBound::of::<f64, f64>(false), ProductBound::Same { eps: f64::EPSILON });
        assert_eq!(ProductBound::of::<f32, f32>(false), ProductBound::Same { eps: f32::EPSILON as f64 });
        let tf32 = 2f64.powi(-9) + 2f64.powi(-20);
        assert_eq!(
            ProductBound::of::<f32, f32>(true),
            ProductBound::F32Accumulation { input: tf32, eps_c: 2f64.powi(-23) }
        );
        assert_eq!(
            ProductBound::of::<f16, f16>(false),
            ProductBound::F32Accumulation { input: 0.0, eps_c: 2f64.powi(-10) }
        );
        assert_eq!(
            ProductBound::of::<f16, f32>(false),
            ProductBound::F32Accumulation { input: 0.0, eps_c: 2f64.powi(-23) }
        );
        assert_eq!(
            ProductBound::of::<bf16, bf16>(true),
            ProductBound::F32Accumulation { input: 0.0, eps_c: 2f64.powi(-7) }
        );
        assert_eq!(
            ProductBound::of::<bf16, f32>(false),
            ProductBound::F32Accumulation { input: 0.0, eps_c: 2f64.powi(-23) }
        );
        assert_eq!(ProductBound::of::<i8, i32>(false), ProductBound::Exact);
    }

    /// Each bound's formula at one element.
    #[test]
    fn product_bound_formulas() {
        assert_eq!(ProductBound::Same { eps: f64::EPSILON }.bound(10, 3.0, -1.0), 12.0 * f64::EPSILON * 3.0);
        let f16 = ProductBound::F32Accumulation { input: 0.0, eps_c: 2f64.powi(-10) };
        assert_eq!(f16.bound(16, 4.0, -2.0), 2.0 * 36.0 * 2f64.powi(-24) * 4.0 + 2f64.powi(-10) * 2.0);
        let tf32 = ProductBound::F32Accumulation { input: 2f64.powi(-9), eps_c: 2f64.powi(-23) };
        assert_eq!(tf32.bound(0, 1.0, 0.0), 2.0 * (4.0 * 2f64.powi(-24) + 2f64.powi(-9)));
        assert_eq!(ProductBound::Exact.bound(1 << 20, 1e9, 1e9), 0.0);
    }
}
