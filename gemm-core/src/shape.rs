//! Matrix and problem shapes, their storage orders, and their validation.
//!
//! A matrix is `rows x cols` with a leading dimension `ld`, stored
//! row-major (element (i, j) at offset `i * ld + j`, `ld >= cols`) or
//! column-major (at `j * ld + i`, `ld >= rows`), in elements. A matrix with
//! `o` outer lines (rows of a row-major matrix, columns of a column-major
//! one) of `l` elements each needs `(o - 1) * ld + l` elements of storage
//! (0 when it has none). Dimensions and leading dimensions are limited to
//! `i32::MAX`, as in BLAS.
//!
//! A transposed view of a row-major matrix is a column-major matrix over the
//! same storage ([`MatrixDims::t`]), so op(A) = A^T never copies; and a
//! column-major C is the row-major C^T = op(B)^T op(A)^T
//! ([`GemmDims::kernel_form`]), so kernels only ever write a row-major C.

/// The largest dimension or leading dimension accepted (as in BLAS, which uses `int`).
pub const MAX_DIM: usize = i32::MAX as usize;

/// Storage order of a matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Layout {
    /// Rows are contiguous: element (i, j) at `i * ld + j` (C and Rust convention).
    #[default]
    RowMajor,
    /// Columns are contiguous: element (i, j) at `j * ld + i` (Fortran, BLAS and cuBLAS convention).
    ColMajor,
}

impl Layout {
    /// The other order: the layout of the transposed view of the same storage.
    pub const fn transposed(self) -> Layout {
        match self {
            Layout::RowMajor => Layout::ColMajor,
            Layout::ColMajor => Layout::RowMajor,
        }
    }

    /// `"row"` or `"col"` (the `layout` column of the benchmark CSV).
    pub const fn short_name(self) -> &'static str {
        match self {
            Layout::RowMajor => "row",
            Layout::ColMajor => "col",
        }
    }
}

impl core::fmt::Display for Layout {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Layout::RowMajor => "row-major",
            Layout::ColMajor => "column-major",
        })
    }
}

/// A BLAS operation flag: op(X) = X (`N`) or op(X) = X^T (`T`). For real
/// matrices BLAS's `C` (conjugate transpose) is `T`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Op {
    /// No transpose: op(X) = X (BLAS `TRANSA = 'N'`, `CUBLAS_OP_N`).
    #[default]
    N,
    /// Transpose: op(X) = X^T (BLAS `TRANSA = 'T'`, `CUBLAS_OP_T`).
    T,
}

impl Op {
    /// `'N'` or `'T'`, as BLAS spells it.
    pub const fn as_char(self) -> char {
        match self {
            Op::N => 'N',
            Op::T => 'T',
        }
    }
}

/// Which operand of `C = op(A) * op(B)` a shape belongs to (for error messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// The m x k left operand op(A).
    A,
    /// The k x n right operand op(B).
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShapeError {
    /// op(A)'s columns and op(B)'s rows differ.
    InnerDimension {
        /// Rows of op(A) (m).
        a_rows: usize,
        /// Columns of op(A) (k).
        a_cols: usize,
        /// Rows of op(B) (should be k).
        b_rows: usize,
        /// Columns of op(B) (n).
        b_cols: usize,
    },
    /// C is not m x n.
    Output {
        /// Rows of op(A).
        m: usize,
        /// Columns of op(B).
        n: usize,
        /// Rows of C.
        c_rows: usize,
        /// Columns of C.
        c_cols: usize,
    },
    /// A leading dimension is smaller than the contiguous lines it separates.
    LeadingDimension {
        /// The operand.
        operand: Operand,
        /// Its leading dimension, in elements.
        ld: usize,
        /// Its storage order.
        layout: Layout,
        /// Elements of one contiguous line (columns of a row-major matrix,
        /// rows of a column-major one): the smallest valid `ld` (at least 1).
        min: usize,
    },
    /// The storage is shorter than the shape needs.
    Storage {
        /// The operand.
        operand: Operand,
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// Storage order.
        layout: Layout,
        /// Leading dimension in elements.
        ld: usize,
        /// Elements needed.
        needed: usize,
        /// Elements present.
        len: usize,
    },
    /// A dimension exceeds [`MAX_DIM`].
    TooLarge {
        /// The operand.
        operand: Operand,
        /// The offending value.
        value: usize,
        /// The limit ([`MAX_DIM`]).
        max: usize,
    },
    /// A sub-matrix view reaches outside its parent.
    View {
        /// First row of the view.
        row: usize,
        /// First column of the view.
        col: usize,
        /// Rows of the view.
        rows: usize,
        /// Columns of the view.
        cols: usize,
        /// Rows of the parent.
        parent_rows: usize,
        /// Columns of the parent.
        parent_cols: usize,
    },
    /// The output shares storage with an input.
    Overlap {
        /// The input it overlaps (A or B).
        operand: Operand,
    },
}

impl core::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ShapeError::InnerDimension { a_rows, a_cols, b_rows, b_cols } => write!(
                f,
                "shape mismatch: A is {a_rows}x{a_cols} but B is {b_rows}x{b_cols} (A's columns must equal B's rows)"
            ),
            ShapeError::Output { m, n, c_rows, c_cols } => {
                write!(f, "shape mismatch: A*B is {m}x{n} but C is {c_rows}x{c_cols}")
            }
            ShapeError::LeadingDimension { operand, ld, layout, min } => write!(
                f,
                "leading dimension of {operand} is {ld}, but it is {layout} with {min} elements per {line} (need ld >= max(1, {min}))",
                line = if matches!(layout, Layout::RowMajor) { "row" } else { "column" }
            ),
            ShapeError::Storage { operand, rows, cols, layout, ld, needed, len } => write!(
                f,
                "{operand} is {rows}x{cols} ({layout}) with leading dimension {ld}, which needs {needed} elements, but its storage holds {len}"
            ),
            ShapeError::TooLarge { operand, value, max } => {
                write!(f, "{operand}: dimension {value} exceeds the largest supported, {max}")
            }
            ShapeError::View { row, col, rows, cols, parent_rows, parent_cols } => write!(
                f,
                "view of {rows}x{cols} at ({row}, {col}) does not fit in a {parent_rows}x{parent_cols} matrix"
            ),
            ShapeError::Overlap { operand } => {
                write!(f, "C overlaps {operand} in memory: the output must not share storage with an input")
            }
        }
    }
}

impl core::error::Error for ShapeError {}

/// The shape and storage of one matrix: `rows x cols`, stored in `layout`
/// with leading dimension `ld` (elements between the starts of consecutive
/// rows of a row-major matrix, of consecutive columns of a column-major one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixDims {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Leading dimension in elements, `>= max(1, cols)` (row-major) or
    /// `>= max(1, rows)` (column-major).
    pub ld: usize,
    /// Storage order.
    pub layout: Layout,
}

impl MatrixDims {
    /// A densely packed row-major shape (`ld = max(1, cols)`).
    pub const fn packed(rows: usize, cols: usize) -> Self {
        Self::packed_in(rows, cols, Layout::RowMajor)
    }

    /// A densely packed shape in `layout` (`ld` = the length of one
    /// contiguous line, at least 1).
    pub const fn packed_in(rows: usize, cols: usize, layout: Layout) -> Self {
        let line = match layout {
            Layout::RowMajor => cols,
            Layout::ColMajor => rows,
        };
        MatrixDims { rows, cols, ld: if line == 0 { 1 } else { line }, layout }
    }

    /// A shape with an explicit layout and leading dimension (not yet validated).
    pub const fn new(rows: usize, cols: usize, layout: Layout, ld: usize) -> Self {
        MatrixDims { rows, cols, ld, layout }
    }

    /// (outer lines, elements per line): (rows, cols) for row-major, (cols, rows) for column-major.
    pub const fn lines(&self) -> (usize, usize) {
        match self.layout {
            Layout::RowMajor => (self.rows, self.cols),
            Layout::ColMajor => (self.cols, self.rows),
        }
    }

    /// The transposed view: `cols x rows` over the same storage, in the other layout.
    pub const fn t(&self) -> MatrixDims {
        MatrixDims { rows: self.cols, cols: self.rows, ld: self.ld, layout: self.layout.transposed() }
    }

    /// op(X) of this matrix: itself for [`Op::N`], [`MatrixDims::t`] for [`Op::T`].
    pub const fn op(&self, op: Op) -> MatrixDims {
        match op {
            Op::N => *self,
            Op::T => self.t(),
        }
    }

    /// Elements of storage the shape needs: `(outer - 1) * ld + line`, or 0 when empty.
    /// `None` on overflow.
    pub const fn required_len(&self) -> Option<usize> {
        if self.rows == 0 || self.cols == 0 {
            return Some(0);
        }
        let (outer, line) = self.lines();
        match (outer - 1).checked_mul(self.ld) {
            Some(x) => x.checked_add(line),
            None => None,
        }
    }

    /// Offset of element (i, j) in elements.
    #[inline(always)]
    pub const fn offset(&self, i: usize, j: usize) -> usize {
        match self.layout {
            Layout::RowMajor => i * self.ld + j,
            Layout::ColMajor => j * self.ld + i,
        }
    }

    /// The `rows x cols` sub-matrix whose top-left element is (row, col):
    /// its offset in the parent's storage and its shape (same layout and
    /// leading dimension). An empty view (`rows` or `cols` zero) has offset 0.
    ///
    /// # Errors
    /// [`ShapeError::View`] when it reaches outside this matrix.
    pub const fn sub(
        &self,
        row: usize,
        col: usize,
        rows: usize,
        cols: usize,
    ) -> Result<(usize, MatrixDims), ShapeError> {
        let fits_rows = match row.checked_add(rows) {
            Some(end) => end <= self.rows,
            None => false,
        };
        let fits_cols = match col.checked_add(cols) {
            Some(end) => end <= self.cols,
            None => false,
        };
        if !fits_rows || !fits_cols {
            return Err(ShapeError::View { row, col, rows, cols, parent_rows: self.rows, parent_cols: self.cols });
        }
        let dims = MatrixDims { rows, cols, ld: self.ld, layout: self.layout };
        if rows == 0 || cols == 0 {
            return Ok((0, dims));
        }
        Ok((self.offset(row, col), dims))
    }

    /// Checks the leading dimension, the size limits and (given the storage
    /// length) that the storage is long enough.
    pub const fn validate(&self, operand: Operand, len: usize) -> Result<(), ShapeError> {
        if self.rows > MAX_DIM {
            return Err(ShapeError::TooLarge { operand, value: self.rows, max: MAX_DIM });
        }
        if self.cols > MAX_DIM {
            return Err(ShapeError::TooLarge { operand, value: self.cols, max: MAX_DIM });
        }
        if self.ld > MAX_DIM {
            return Err(ShapeError::TooLarge { operand, value: self.ld, max: MAX_DIM });
        }
        let (_, line) = self.lines();
        if self.ld < line || self.ld == 0 {
            return Err(ShapeError::LeadingDimension { operand, ld: self.ld, layout: self.layout, min: line });
        }
        match self.required_len() {
            Some(needed) if needed <= len => Ok(()),
            Some(needed) => Err(ShapeError::Storage {
                operand,
                rows: self.rows,
                cols: self.cols,
                layout: self.layout,
                ld: self.ld,
                needed,
                len,
            }),
            None => Err(ShapeError::TooLarge { operand, value: self.rows, max: MAX_DIM }),
        }
    }
}

/// The storage order of A and B as a kernel reads them; the kernel's C is
/// always row-major ([`GemmDims::kernel_form`]). Each combination is a
/// separately compiled PTX module (`nn`, `nt`, `tn`, `tt`: `n` for a
/// row-major operand, as op = N of a row-major matrix, `t` for a
/// column-major one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelLayouts {
    /// Storage of the kernel's A (m x k).
    pub a: Layout,
    /// Storage of the kernel's B (k x n).
    pub b: Layout,
}

impl KernelLayouts {
    /// A and B row-major: the layouts the kernels were first written for.
    pub const NN: KernelLayouts = KernelLayouts { a: Layout::RowMajor, b: Layout::RowMajor };
    /// All four combinations, in module order (`nn`, `nt`, `tn`, `tt`).
    pub const ALL: [KernelLayouts; 4] = [
        KernelLayouts::NN,
        KernelLayouts { a: Layout::RowMajor, b: Layout::ColMajor },
        KernelLayouts { a: Layout::ColMajor, b: Layout::RowMajor },
        KernelLayouts { a: Layout::ColMajor, b: Layout::ColMajor },
    ];

    /// `"nn"`, `"nt"`, `"tn"` or `"tt"`: the module suffix.
    pub const fn suffix(self) -> &'static str {
        match (self.a, self.b) {
            (Layout::RowMajor, Layout::RowMajor) => "nn",
            (Layout::RowMajor, Layout::ColMajor) => "nt",
            (Layout::ColMajor, Layout::RowMajor) => "tn",
            (Layout::ColMajor, Layout::ColMajor) => "tt",
        }
    }

    /// Index in [`KernelLayouts::ALL`].
    pub const fn index(self) -> usize {
        (matches!(self.a, Layout::ColMajor) as usize) * 2 + matches!(self.b, Layout::ColMajor) as usize
    }
}

/// One product `C (m x n) <- alpha * op(A) (m x k) * op(B) (k x n) + beta * C`
/// as validated: the shapes of op(A), op(B) and C with their leading
/// dimensions and storage orders (all in elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmDims {
    /// Rows of op(A) and C.
    pub m: usize,
    /// Columns of op(B) and C.
    pub n: usize,
    /// Columns of op(A), rows of op(B).
    pub k: usize,
    /// Leading dimension of A.
    pub lda: usize,
    /// Leading dimension of B.
    pub ldb: usize,
    /// Leading dimension of C.
    pub ldc: usize,
    /// Storage order of op(A) (a transposed row-major A is column-major).
    pub a_layout: Layout,
    /// Storage order of op(B).
    pub b_layout: Layout,
    /// Storage order of C.
    pub c_layout: Layout,
}

impl GemmDims {
    /// Checks that op(A), op(B) and C (given with op applied, e.g. by
    /// [`MatrixDims::op`]) have compatible shapes (m x k, k x n, m x n), that
    /// each leading dimension is at least its line length, and that each
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
        if let Err(e) = a.validate(Operand::A, a_len) {
            return Err(e);
        }
        if let Err(e) = b.validate(Operand::B, b_len) {
            return Err(e);
        }
        if let Err(e) = c.validate(Operand::C, c_len) {
            return Err(e);
        }
        Ok(GemmDims {
            m: a.rows,
            n: b.cols,
            k: a.cols,
            lda: a.ld,
            ldb: b.ld,
            ldc: c.ld,
            a_layout: a.layout,
            b_layout: b.layout,
            c_layout: c.layout,
        })
    }

    /// The product as the kernels compute it, with a row-major C: itself when
    /// C is row-major; else C^T (n x m, row-major over C's storage) =
    /// op(B)^T op(A)^T, i.e. m and n swapped, A and B swapped, each in the
    /// other layout. The flag says whether A and B were swapped (the caller
    /// then passes B's storage as the kernel's A and A's as its B).
    pub const fn kernel_form(&self) -> (GemmDims, bool) {
        match self.c_layout {
            Layout::RowMajor => (*self, false),
            Layout::ColMajor => (
                GemmDims {
                    m: self.n,
                    n: self.m,
                    k: self.k,
                    lda: self.ldb,
                    ldb: self.lda,
                    ldc: self.ldc,
                    a_layout: self.b_layout.transposed(),
                    b_layout: self.a_layout.transposed(),
                    c_layout: Layout::RowMajor,
                },
                true,
            ),
        }
    }

    /// The storage orders of A and B (meaningful on [`GemmDims::kernel_form`]).
    pub const fn layouts(&self) -> KernelLayouts {
        KernelLayouts { a: self.a_layout, b: self.b_layout }
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

/// Whether two storage spans overlap: `[a_start, a_start + a_len)` and
/// `[b_start, b_start + b_len)` in bytes (empty spans overlap nothing).
pub const fn spans_overlap(a_start: usize, a_len: usize, b_start: usize, b_len: usize) -> bool {
    a_len != 0 && b_len != 0 && a_start < b_start.saturating_add(b_len) && b_start < a_start.saturating_add(a_len)
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

    fn any_layout() -> impl Strategy<Value = Layout> {
        prop_oneof![Just(Layout::RowMajor), Just(Layout::ColMajor)]
    }

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
        let d = MatrixDims::new(4, 5, Layout::RowMajor, 4);
        assert!(matches!(d.validate(Operand::B, 100), Err(ShapeError::LeadingDimension { ld: 4, min: 5, .. })));
        let d = MatrixDims::new(6, 5, Layout::ColMajor, 5);
        let e = d.validate(Operand::A, 100).unwrap_err();
        assert!(matches!(e, ShapeError::LeadingDimension { ld: 5, min: 6, layout: Layout::ColMajor, .. }));
        assert_eq!(
            std::format!("{e}"),
            "leading dimension of A is 5, but it is column-major with 6 elements per column (need ld >= max(1, 6))"
        );
        let z = MatrixDims::new(4, 0, Layout::RowMajor, 0);
        assert!(z.validate(Operand::A, 0).is_err());
    }

    #[test]
    fn required_len_counts_the_last_line_once() {
        assert_eq!(MatrixDims::new(3, 2, Layout::RowMajor, 5).required_len(), Some(12));
        assert_eq!(MatrixDims::new(3, 2, Layout::ColMajor, 5).required_len(), Some(8));
        assert_eq!(MatrixDims::new(0, 2, Layout::RowMajor, 5).required_len(), Some(0));
        assert_eq!(MatrixDims::new(usize::MAX, 2, Layout::RowMajor, 5).required_len(), None);
    }

    #[test]
    fn transposed_views_share_offsets() {
        let d = MatrixDims::new(3, 4, Layout::RowMajor, 6);
        let t = d.t();
        assert_eq!((t.rows, t.cols, t.ld, t.layout), (4, 3, 6, Layout::ColMajor));
        for i in 0..3 {
            for j in 0..4 {
                assert_eq!(d.offset(i, j), t.offset(j, i));
            }
        }
        assert_eq!(d.op(Op::T), t);
        assert_eq!(d.op(Op::N), d);
    }

    #[test]
    fn views_outside_the_parent_are_rejected() {
        let d = MatrixDims::new(10, 8, Layout::ColMajor, 12);
        assert_eq!(d.sub(2, 3, 4, 5), Ok((3 * 12 + 2, MatrixDims::new(4, 5, Layout::ColMajor, 12))));
        assert!(matches!(d.sub(7, 0, 4, 1), Err(ShapeError::View { row: 7, rows: 4, parent_rows: 10, .. })));
        assert!(matches!(d.sub(0, usize::MAX, 1, 2), Err(ShapeError::View { .. })));
    }

    #[test]
    fn overlap_of_spans() {
        assert!(spans_overlap(0, 10, 9, 1));
        assert!(!spans_overlap(0, 10, 10, 1));
        assert!(!spans_overlap(0, 0, 0, 10));
    }

    #[test]
    fn flops_are_two_mnk() {
        assert_eq!(gemm_flops(2, 3, 4), 48.0);
        assert_eq!(gemm_min_bytes(1, 1, 1, 8, false), 24.0);
    }

    extern crate std;

    proptest! {
        #[test]
        fn compatible_shapes_validate(m in 0usize..300, n in 0usize..300, k in 0usize..300,
                                      pa in 0usize..4, pb in 0usize..4, pc in 0usize..4,
                                      la in any_layout(), lb in any_layout(), lc in any_layout()) {
            let pad = |d: MatrixDims, p: usize| MatrixDims { ld: d.ld + p, ..d };
            let a = pad(MatrixDims::packed_in(m, k, la), pa);
            let b = pad(MatrixDims::packed_in(k, n, lb), pb);
            let c = pad(MatrixDims::packed_in(m, n, lc), pc);
            let d = GemmDims::from_operands(
                a, a.required_len().unwrap(), b, b.required_len().unwrap(),
                c, c.required_len().unwrap()).unwrap();
            prop_assert_eq!((d.m, d.n, d.k), (m, n, k));
            prop_assert_eq!((d.lda, d.ldb, d.ldc), (a.ld, b.ld, c.ld));
            // The kernel form computes the same elements: C(i, j) of the
            // original at the offset of C'(j, i) of the swapped product.
            let (kf, swapped) = d.kernel_form();
            prop_assert_eq!(kf.c_layout, Layout::RowMajor);
            prop_assert_eq!(swapped, lc == Layout::ColMajor);
            if swapped {
                let ka = MatrixDims::new(kf.m, kf.k, kf.a_layout, kf.lda);
                let kb = MatrixDims::new(kf.k, kf.n, kf.b_layout, kf.ldb);
                for (i, j, p) in [(0usize, 0usize, 0usize), (m.saturating_sub(1), n.saturating_sub(1), k.saturating_sub(1))] {
                    prop_assert_eq!(ka.offset(j, p), b.offset(p, j));
                    prop_assert_eq!(kb.offset(p, i), a.offset(i, p));
                    prop_assert_eq!(MatrixDims::new(kf.m, kf.n, Layout::RowMajor, kf.ldc).offset(j, i), c.offset(i, j));
                }
            }
        }

        #[test]
        fn short_storage_is_rejected(rows in 1usize..100, cols in 1usize..100, pad in 0usize..5, l in any_layout()) {
            let d0 = MatrixDims::packed_in(rows, cols, l);
            let d = MatrixDims { ld: d0.ld + pad, ..d0 };
            let need = d.required_len().unwrap();
            prop_assert!(d.validate(Operand::C, need).is_ok());
            let short = d.validate(Operand::C, need - 1);
            prop_assert!(matches!(short, Err(ShapeError::Storage { .. })), "{:?}", short);
        }

        #[test]
        fn views_stay_inside_their_parent(rows in 1usize..40, cols in 1usize..40, pad in 0usize..4, l in any_layout(),
                                          r in 0usize..40, c in 0usize..40, h in 0usize..40, w in 0usize..40) {
            let p0 = MatrixDims::packed_in(rows, cols, l);
            let p = MatrixDims { ld: p0.ld + pad, ..p0 };
            match p.sub(r, c, h, w) {
                Ok((off, v)) => {
                    prop_assert!(r + h <= rows && c + w <= cols);
                    let need = v.required_len().unwrap();
                    prop_assert!(need == 0 || off + need <= p.required_len().unwrap());
                }
                Err(_) => prop_assert!(r + h > rows || c + w > cols),
            }
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
