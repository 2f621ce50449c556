//! Matrix and problem shapes, and their validation.
//!
//! Storage is row-major: element (i, j) of a matrix with leading dimension `ld`
//! sits at offset `i * ld + j` (in elements), and `ld >= cols`. A matrix of
//! `rows` rows therefore needs `(rows - 1) * ld + cols` elements of storage
//! (0 when it has no rows). Dimensions are limited to `i32::MAX`, as in BLAS.

use thiserror::Error;

/// The largest dimension or leading dimension accepted (as in BLAS, which uses `int`).
pub const MAX_DIM: usize = i32::MAX as usize;

/// Which operand of `C = A * B` a shape belongs to (for error messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// The m x k left operand.
    A,
    /// The k x n right operand.
    B,
    /// The m x n result.
    C,
    /// A matrix being constructed, not yet an operand.
    Matrix,
}

impl core::fmt::Display for Operand {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Operand::A => "A",
            Operand::B => "B",
            Operand::C => "C",
            Operand::Matrix => "the matrix",
        })
    }
}

/// A shape error: the message names the operands and the numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ShapeError {
    /// A's columns and B's rows differ.
    #[error("shape mismatch: A is {a_rows}x{a_cols} but B is {b_rows}x{b_cols} (A's columns must equal B's rows)")]
    InnerDimension {
        /// Rows of A (m).
        a_rows: usize,
        /// Columns of A (k).
        a_cols: usize,
        /// Rows of B (should be k).
        b_rows: usize,
        /// Columns of B (n).
        b_cols: usize,
    },
    /// C is not m x n.
    #[error("shape mismatch: A*B is {m}x{n} but C is {c_rows}x{c_cols}")]
    Output {
        /// Rows of A.
        m: usize,
        /// Columns of B.
        n: usize,
        /// Rows of C.
        c_rows: usize,
        /// Columns of C.
        c_cols: usize,
    },
    /// A leading dimension is smaller than the row length (or zero).
    #[error("leading dimension of {operand} is {ld}, but its rows hold {cols} elements (need ld >= max(1, {cols}))")]
    LeadingDimension {
        /// The operand.
        operand: Operand,
        /// Its leading dimension, in elements.
        ld: usize,
        /// Its number of columns.
        cols: usize,
    },
    /// The storage is shorter than the shape needs.
    #[error("{operand} is {rows}x{cols} with leading dimension {ld}, which needs {needed} elements, but its storage holds {len}")]
    Storage {
        /// The operand.
        operand: Operand,
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// Leading dimension in elements.
        ld: usize,
        /// Elements needed.
        needed: usize,
        /// Elements present.
        len: usize,
    },
    /// A dimension exceeds [`MAX_DIM`].
    #[error("{operand}: dimension {value} exceeds the largest supported, {max}")]
    TooLarge {
        /// The operand.
        operand: Operand,
        /// The offending value.
        value: usize,
        /// The limit ([`MAX_DIM`]).
        max: usize,
    },
}

/// The shape of one row-major matrix: `rows x cols` with leading dimension `ld`
/// (elements between the starts of consecutive rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixDims {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Leading dimension in elements, `>= max(1, cols)`.
    pub ld: usize,
}

impl MatrixDims {
    /// A densely packed shape (`ld = max(1, cols)`).
    pub const fn packed(rows: usize, cols: usize) -> Self {
        MatrixDims { rows, cols, ld: if cols == 0 { 1 } else { cols } }
    }

    /// Elements of storage the shape needs: `(rows - 1) * ld + cols`, or 0 without rows.
    /// `None` on overflow.
    pub const fn required_len(&self) -> Option<usize> {
        if self.rows == 0 || self.cols == 0 {
            return Some(0);
        }
        match (self.rows - 1).checked_mul(self.ld) {
            Some(x) => x.checked_add(self.cols),
            None => None,
        }
    }

    /// Offset of element (i, j) in elements.
    #[inline(always)]
    pub const fn offset(&self, i: usize, j: usize) -> usize {
        i * self.ld + j
    }

    /// Checks the leading dimension, the size limits and (given the storage
    /// length) that the storage is long enough.
    pub const fn validate(&self, operand: Operand, len: usize) -> Result<(), ShapeError> {
        if self.rows > MAX_DIM {
            return Err(ShapeError::TooLarge { operand, value: self.rows, max: MAX_DIM });
        }
        if self.ld > MAX_DIM {
            return Err(ShapeError::TooLarge { operand, value: self.ld, max: MAX_DIM });
        }
        if self.ld < self.cols || self.ld == 0 {
            return Err(ShapeError::LeadingDimension { operand, ld: self.ld, cols: self.cols });
        }
        match self.required_len() {
            Some(needed) if needed <= len => Ok(()),
            Some(needed) => {
                Err(ShapeError::Storage { operand, rows: self.rows, cols: self.cols, ld: self.ld, needed, len })
            }
            None => Err(ShapeError::TooLarge { operand, value: self.rows, max: MAX_DIM }),
        }
    }
}

/// The dimensions of one product `C (m x n) = A (m x k) * B (k x n)` with the
/// three leading dimensions, as the kernels receive them (all in elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmDims {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// Leading dimension of A.
    pub lda: usize,
    /// Leading dimension of B.
    pub ldb: usize,
    /// Leading dimension of C.
    pub ldc: usize,
}

impl GemmDims {
    /// Checks that A, B and C have compatible shapes (A m x k, B k x n, C m x n),
    /// that each leading dimension is at least its row length, and that each
    /// storage (lengths `a_len`, `b_len`, `c_len` in elements) is long enough.
    pub const fn from_operands(
        a: MatrixDims,
        a_len: usize,
        b: MatrixDims,
        b_len: usize,
        c: MatrixDims,
        c_len: usize,
    ) -> Result<GemmDims, ShapeError> {
        if a.cols != b.rows {
            return Err(ShapeError::InnerDimension { a_rows: a.rows, a_cols: a.cols, b_rows: b.rows, b_cols: b.cols });
        }
        if c.rows != a.rows || c.cols != b.cols {
            return Err(ShapeError::Output { m: a.rows, n: b.cols, c_rows: c.rows, c_cols: c.cols });
        }
        if a.cols > MAX_DIM {
            return Err(ShapeError::TooLarge { operand: Operand::A, value: a.cols, max: MAX_DIM });
        }
        if let Err(e) = a.validate(Operand::A, a_len) {
            return Err(e);
        }
        if let Err(e) = b.validate(Operand::B, b_len) {
            return Err(e);
        }
        if let Err(e) = c.validate(Operand::C, c_len) {
            return Err(e);
        }
        Ok(GemmDims { m: a.rows, n: b.cols, k: a.cols, lda: a.ld, ldb: b.ld, ldc: c.ld })
    }

    /// Floating-point operations of the product: `2 * m * n * k`.
    pub const fn flops(&self) -> f64 {
        gemm_flops(self.m, self.n, self.k)
    }

    /// True when there is nothing to launch (m or n is zero).
    pub const fn is_empty(&self) -> bool {
        self.m == 0 || self.n == 0
    }
}

/// Floating-point operations of an m x n x k product: `2 * m * n * k`
/// (one multiply and one add per term).
pub const fn gemm_flops(m: usize, n: usize, k: usize) -> f64 {
    2.0 * (m as f64) * (n as f64) * (k as f64)
}

/// The fewest bytes an m x n x k product must move through device memory:
/// A and B read once, C written once (and read once more when `beta != 0`).
pub const fn gemm_min_bytes(m: usize, n: usize, k: usize, element_bytes: usize, reads_c: bool) -> f64 {
    let c_passes = if reads_c { 2.0 } else { 1.0 };
    (element_bytes as f64) * ((m * k + k * n) as f64 + c_passes * (m * n) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn mismatched_inner_dimension_names_the_shapes() {
        let e = GemmDims::from_operands(
            MatrixDims::packed(300, 200),
            60000,
            MatrixDims::packed(199, 100),
            19900,
            MatrixDims::packed(300, 100),
            30000,
        )
        .unwrap_err();
        assert_eq!(e, ShapeError::InnerDimension { a_rows: 300, a_cols: 200, b_rows: 199, b_cols: 100 });
    }

    #[test]
    fn short_leading_dimension_is_rejected() {
        let d = MatrixDims { rows: 4, cols: 5, ld: 4 };
        assert!(matches!(d.validate(Operand::B, 100), Err(ShapeError::LeadingDimension { ld: 4, cols: 5, .. })));
        let z = MatrixDims { rows: 4, cols: 0, ld: 0 };
        assert!(z.validate(Operand::A, 0).is_err());
    }

    #[test]
    fn required_len_counts_the_last_row_once() {
        assert_eq!(MatrixDims { rows: 3, cols: 2, ld: 5 }.required_len(), Some(12));
        assert_eq!(MatrixDims { rows: 0, cols: 2, ld: 5 }.required_len(), Some(0));
        assert_eq!(MatrixDims { rows: usize::MAX, cols: 2, ld: 5 }.required_len(), None);
    }

    #[test]
    fn flops_are_two_mnk() {
        assert_eq!(gemm_flops(2, 3, 4), 48.0);
        assert_eq!(gemm_min_bytes(1, 1, 1, 8, false), 24.0);
    }

    proptest! {
        #[test]
        fn compatible_shapes_validate(m in 0usize..300, n in 0usize..300, k in 0usize..300,
                                      pa in 0usize..4, pb in 0usize..4, pc in 0usize..4) {
            let a = MatrixDims { rows: m, cols: k, ld: k.max(1) + pa };
            let b = MatrixDims { rows: k, cols: n, ld: n.max(1) + pb };
            let c = MatrixDims { rows: m, cols: n, ld: n.max(1) + pc };
            let d = GemmDims::from_operands(
                a, a.required_len().unwrap(), b, b.required_len().unwrap(),
                c, c.required_len().unwrap()).unwrap();
            prop_assert_eq!((d.m, d.n, d.k), (m, n, k));
            prop_assert_eq!((d.lda, d.ldb, d.ldc), (a.ld, b.ld, c.ld));
        }

        #[test]
        fn short_storage_is_rejected(rows in 1usize..100, cols in 1usize..100, pad in 0usize..5) {
            let d = MatrixDims { rows, cols, ld: cols + pad };
            let need = d.required_len().unwrap();
            prop_assert!(d.validate(Operand::C, need).is_ok());
            let short = d.validate(Operand::C, need - 1);
            prop_assert!(matches!(short, Err(ShapeError::Storage { .. })), "{:?}", short);
        }

        #[test]
        fn mismatched_output_is_rejected(m in 1usize..50, n in 1usize..50, k in 1usize..50, dm in 1usize..3) {
            let a = MatrixDims::packed(m, k);
            let b = MatrixDims::packed(k, n);
            let c = MatrixDims::packed(m + dm, n);
            let r = GemmDims::from_operands(a, m * k, b, k * n, c, (m + dm) * n);
            prop_assert!(matches!(r, Err(ShapeError::Output { .. })), "{:?}", r);
        }
    }
}
