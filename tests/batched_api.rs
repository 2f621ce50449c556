//! The batch API without a GPU: host strided batches ([`Strided`] of
//! [`MatRef`] and [`MatMut`]) check their storage and the disjointness of
//! their outputs at construction, with typed errors that name the numbers;
//! `run_strided` validates (batch counts, shapes) before the device is
//! touched, leaves C untouched on any error, and treats a batch of 0 as
//! a no-op. These run everywhere (CI has no GPU); where a GPU is present the
//! calls succeed and the results are checked instead (bound: gemm::check's
//! |C - C_ref| <= (k + 2) eps (|alpha| |A||B| + |beta| |C0|) elementwise).

use gemm::check::Reference;
use gemm::{Error, Gemm, Layout, MatMut, MatRef, Matrix, Op, Operand, ShapeError, Strided};

const R: Layout = Layout::RowMajor;
const C: Layout = Layout::ColMajor;

fn same_bits(x: &[f64], y: &[f64]) -> bool {
    x.len() == y.len() && x.iter().zip(y).all(|(a, b)| a.to_bits() == b.to_bits())
}

/// `0, 1, 2, ...` as f64.
fn iota(len: usize) -> Vec<f64> {
    (0..len).map(|x| x as f64).collect()
}

#[test]
fn packed_batches_from_slices() {
    // 4 row-major 2 x 3 matrices, packed: matrix i, element (r, c) = 6 i + 3 r + c.
    let x = iota(24);
    let a = Strided::from_slice(&x, 4, 2, 3, R).unwrap();
    assert_eq!((a.count(), a.stride()), (4, 6));
    for i in 0..4 {
        let m = a.matrix(i);
        assert_eq!((m.rows(), m.cols(), m.layout(), m.ld()), (2, 3, R, 3));
        for r in 0..2 {
            for c in 0..3 {
                assert_eq!(m.get(r, c), Some((6 * i + 3 * r + c) as f64));
            }
        }
    }
    // Column-major: element (r, c) of matrix i at 6 i + 2 c + r.
    let b = Strided::from_slice(&x, 4, 2, 3, C).unwrap();
    assert_eq!((b.count(), b.stride(), b.matrix(3).ld()), (4, 6, 2));
    assert_eq!(b.matrix(3).get(1, 2), Some((18 + 4 + 1) as f64));
    // The batch of transposes: 3 x 2 matrices over the same storage.
    let t = a.t();
    assert_eq!((t.count(), t.stride()), (4, 6));
    for i in 0..4 {
        let (m, mt) = (a.matrix(i), t.matrix(i));
        assert_eq!((mt.rows(), mt.cols(), mt.layout()), (3, 2, C));
        for r in 0..2 {
            for c in 0..3 {
                assert_eq!(mt.get(c, r), m.get(r, c));
            }
        }
    }
    // Output batches: the same shapes, read back through `matrix`.
    let mut y = iota(24);
    let mut c = Strided::from_slice_mut(&mut y, 4, 2, 3, R).unwrap();
    assert_eq!((c.count(), c.stride()), (4, 6));
    assert_eq!(c.matrix(2).get(1, 1), Some(16.0));
    assert_eq!(c.rb().matrix(3).get(0, 0), Some(18.0));
}

/// Stride 0 repeats one matrix (a weight shared by every product); an
/// explicit stride larger than a matrix leaves gaps; a view with padded
/// lines keeps its leading dimension in every matrix.
#[test]
fn broadcast_and_padded_strides() {
    let w = iota(12);
    let b = Strided::new(MatRef::from_slice(&w, 3, 4, R, 4).unwrap(), 1000, 0).unwrap();
    assert_eq!((b.count(), b.stride()), (1000, 0));
    assert_eq!(b.matrix(999).get(2, 3), Some(11.0));
    assert_eq!(b.matrix(0).get(1, 0), Some(4.0));

    // 3 column-major 2 x 2 matrices, ld 3 (one padding element per column),
    // 10 elements apart: storage (2 - 1) * 3 + 2 = 5 for one, 25 for all.
    let x = iota(25);
    let a = Strided::new(MatRef::from_slice(&x, 2, 2, C, 3).unwrap(), 3, 10).unwrap();
    for i in 0..3 {
        let m = a.matrix(i);
        assert_eq!((m.ld(), m.layout()), (3, C));
        assert_eq!(m.get(1, 1), Some((10 * i + 3 + 1) as f64));
    }
    // Count 1 needs only one matrix, whatever the stride; count 0 needs nothing more.
    let one = &x[..5];
    assert!(Strided::new(MatRef::from_slice(one, 2, 2, C, 3).unwrap(), 1, 1 << 40).is_ok());
    assert!(Strided::new(MatRef::from_slice(one, 2, 2, C, 3).unwrap(), 0, 1 << 40).is_ok());
}

/// `Strided::new` takes a view or a borrowed matrix, and the batch's type
/// follows from it (no turbofish): `&Matrix`, `&MatRef` and `&MatMut` give
/// read batches, `&mut Matrix` and `&mut MatMut` output batches, checked as
/// such (an output's matrices must not overlap).
#[test]
fn the_batch_type_follows_from_the_first_matrix() {
    fn read(s: Strided<MatRef<'_, f64>>) -> (usize, usize, Option<f64>) {
        (s.count(), s.stride(), s.matrix(s.count() - 1).get(1, 2))
    }
    fn write(s: Strided<MatMut<'_, f64>>) -> (usize, usize) {
        (s.count(), s.stride())
    }
    let mut m = Matrix::from_vec(4, 3, iota(12)).unwrap(); // row-major 4 x 3: two packed 2 x 3 matrices
    let first = m.view(0, 0, 2, 3).unwrap();
    assert_eq!(read(Strided::new(first, 2, 6).unwrap()), (2, 6, Some(11.0)));
    assert_eq!(read(Strided::new(&first, 2, 6).unwrap()), (2, 6, Some(11.0)));
    assert_eq!(read(Strided::new(&m, 3, 0).unwrap()), (3, 0, Some(5.0)));
    assert_eq!(write(Strided::new(&mut m, 1, 0).unwrap()), (1, 0));
    let mut first = m.view_mut(0, 0, 2, 3).unwrap();
    assert_eq!(read(Strided::new(&first, 2, 6).unwrap()), (2, 6, Some(11.0)));
    assert_eq!(write(Strided::new(&mut first, 2, 6).unwrap()), (2, 6));
    assert!(matches!(Strided::new(&mut first, 2, 0), Err(Error::BatchOverlap { first: 0, second: 1 })));
    assert_eq!(write(Strided::new(first, 2, 6).unwrap()), (2, 6));
    // The same 2 x 3 view read twice (stride 0) is fine; written twice it is not.
    assert!(Strided::new(m.as_ref().view(0, 0, 2, 3).unwrap(), 2, 0).is_ok());
    assert!(matches!(
        Strided::new(m.view_mut(0, 0, 2, 3).unwrap(), 2, 0),
        Err(Error::BatchOverlap { first: 0, second: 1 })
    ));
}

/// Storage shorter than the batch: [`Error::BatchStorage`] with the numbers;
/// shorter than one matrix: a shape error from the matrix itself.
#[test]
fn short_storage_is_a_typed_error() {
    let x = iota(13); // 2 x 3 matrices: two fit (12), three need 18
    let e = Strided::from_slice(&x, 3, 2, 3, R).unwrap_err();
    assert!(
        matches!(e, Error::BatchStorage { operand: Operand::Matrix, count: 3, stride: 6, needed: 18, len: 13 }),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "the batch (3 matrices 6 elements apart) needs 18 elements, but its storage holds 13");
    assert!(Strided::from_slice(&x, 2, 2, 3, R).is_ok());

    // An explicit stride: 4 matrices 4 elements apart need 3 * 4 + 6 = 18.
    let e = Strided::new(MatRef::from_slice(&x, 2, 3, R, 3).unwrap(), 4, 4).unwrap_err();
    assert!(matches!(e, Error::BatchStorage { count: 4, stride: 4, needed: 18, len: 13, .. }), "{e:?}");

    // Output batches check the same.
    let mut y = iota(13);
    let e = Strided::from_slice_mut(&mut y, 3, 2, 3, R).unwrap_err();
    assert!(matches!(e, Error::BatchStorage { count: 3, stride: 6, needed: 18, len: 13, .. }), "{e:?}");
    let e = Strided::new(MatMut::from_slice(&mut y, 2, 3, C, 2).unwrap(), 2, 8).unwrap_err();
    assert!(matches!(e, Error::BatchStorage { count: 2, stride: 8, needed: 14, len: 13, .. }), "{e:?}");

    // Shorter than one matrix: the matrix's own shape error.
    let e = Strided::from_slice(&x[..5], 1, 2, 3, R).unwrap_err();
    assert!(matches!(e, Error::Shape(_)), "{e:?}");
    let e = Strided::from_slice_mut(&mut y[..5], 1, 2, 3, R).unwrap_err();
    assert!(matches!(e, Error::Shape(_)), "{e:?}");
}

/// Matrices of an output batch must not share an element: stride 0 with
/// more than one matrix, a stride shorter than a matrix, or an interleaving
/// that meets a later matrix are refused at construction
/// ([`Error::BatchOverlap`] naming the first colliding pair); interleaved
/// batches whose elements are disjoint (e.g. column blocks of a row-major
/// matrix) are fine, and so is any stride for one matrix.
#[test]
fn overlapping_output_batches_are_refused() {
    let mut y = vec![0.0f64; 64];
    let mut overlap = |rows: usize, cols: usize, layout: Layout, ld: usize, count: usize, stride: usize| {
        let first = MatMut::from_slice(&mut y, rows, cols, layout, ld).unwrap();
        Strided::new(first, count, stride).map(|s| (s.count(), s.stride()))
    };
    // Stride 0 with two outputs: matrices 0 and 1 are the same.
    let e = overlap(2, 3, R, 3, 2, 0).unwrap_err();
    assert!(matches!(e, Error::BatchOverlap { first: 0, second: 1 }), "{e:?}");
    assert_eq!(e.to_string(), "matrices 0 and 1 of the C batch overlap in memory: each product needs its own output");
    // A stride one element short of a packed matrix.
    let e = overlap(2, 3, R, 3, 3, 5).unwrap_err();
    assert!(matches!(e, Error::BatchOverlap { first: 0, second: 1 }), "{e:?}");
    let e = overlap(3, 2, C, 3, 3, 5).unwrap_err();
    assert!(matches!(e, Error::BatchOverlap { first: 0, second: 1 }), "{e:?}");
    // Row-major 3 x 2 with ld 4, stride 2: matrix 1 fills the gaps of
    // matrix 0 (disjoint), but matrix 2 starts on matrix 0's second row.
    assert_eq!(overlap(3, 2, R, 4, 2, 2).unwrap(), (2, 2));
    let e = overlap(3, 2, R, 4, 3, 2).unwrap_err();
    assert!(matches!(e, Error::BatchOverlap { first: 0, second: 2 }), "{e:?}");
    // The column blocks of a row-major 4 x 12 matrix: 4 blocks of 4 x 3, 3 apart.
    assert_eq!(overlap(4, 3, R, 12, 4, 3).unwrap(), (4, 3));
    // Packed, and with gaps between matrices.
    assert_eq!(overlap(2, 3, R, 3, 10, 6).unwrap(), (10, 6));
    assert_eq!(overlap(2, 3, C, 2, 5, 9).unwrap(), (5, 9));
    // One output (or none) cannot overlap, whatever the stride.
    assert_eq!(overlap(2, 3, R, 3, 1, 0).unwrap(), (1, 0));
    assert_eq!(overlap(2, 3, R, 3, 0, 0).unwrap(), (0, 0));
    // Read batches may share matrices.
    let x = iota(6);
    assert!(Strided::new(MatRef::from_slice(&x, 2, 3, R, 3).unwrap(), 5, 0).is_ok());
}

#[test]
#[should_panic(expected = "matrix 3 of a batch of 3")]
fn matrix_past_the_count_panics() {
    let x = iota(18);
    let a = Strided::from_slice(&x, 3, 2, 3, R).unwrap();
    let _ = a.matrix(3);
}

/// A host strided batch: 4 row-major `m x k` A's, one shared `k x n` B
/// (stride 0), 4 column-major C's with NaN in the gaps between them.
struct HostBatch {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
    count: usize,
    dims: (usize, usize, usize),
}

impl HostBatch {
    fn new(count: usize) -> Self {
        let (m, n, k) = (5, 4, 3);
        // At least one matrix of storage for A (the view of the first needs it).
        let a = (0..count.max(1) * m * k).map(|x| ((x * 7) % 11) as f64 - 5.0).collect();
        let b = (0..k * n).map(|x| ((x * 5) % 7) as f64 - 3.0).collect();
        let c = vec![f64::NAN; (count.max(1) - 1) * (m * n + 2) + m * n];
        HostBatch { a, b, c, count, dims: (m, n, k) }
    }

    /// Runs `g` on the batch with C's count `c_count` (A and B hold `count`).
    fn run(&mut self, g: &Gemm, c_count: usize) -> Result<(), Error> {
        let (m, n, k) = self.dims;
        let a = Strided::from_slice(&self.a, self.count, m, k, R)?;
        let b = Strided::new(MatRef::from_slice(&self.b, k, n, R, n)?, self.count, 0)?;
        let c = Strided::new(MatMut::from_slice(&mut self.c, m, n, C, m)?, c_count, m * n + 2)?;
        g.run_strided(a, b, c)
    }
}

/// Validation comes first: batch counts that differ and shapes that do not
/// fit are typed errors before the device is touched, C untouched.
#[test]
fn run_strided_validates_before_the_gpu() {
    let mut h = HostBatch::new(4);
    let before = h.c.clone();
    let e = h.run(&Gemm::new(), 3).unwrap_err();
    assert!(matches!(e, Error::BatchCount { a: 4, b: 4, c: 3 }), "{e:?}");
    assert_eq!(e.to_string(), "batch counts differ: A has 4 matrices, B 4, C 3");
    assert!(same_bits(&h.c, &before));
    // op(A) = A^T of a 5 x 3 A is 3 x 5: the inner dimension no longer fits.
    let e = h.run(&Gemm::new().op_a(Op::T), 4).unwrap_err();
    assert!(matches!(e, Error::Shape(ShapeError::InnerDimension { a_rows: 3, a_cols: 5, .. })), "{e:?}");
    assert!(same_bits(&h.c, &before));
}

/// A batch of 0 is a no-op (nothing to do, not even on the GPU), as is the
/// BLAS quick return (alpha = 0 and beta = 1).
#[test]
fn empty_batches_are_no_ops() {
    let mut h = HostBatch::new(0);
    let before = h.c.clone();
    h.run(&Gemm::new(), 0).unwrap();
    assert!(same_bits(&h.c, &before));
    let mut h = HostBatch::new(3);
    for (i, x) in h.c.iter_mut().enumerate() {
        *x = i as f64;
    }
    let before = h.c.clone();
    h.run(&Gemm::new().alpha(0.0).beta(1.0), 3).unwrap();
    assert!(same_bits(&h.c, &before));
}

/// Without a driver or GPU the call is a typed error, never a panic, and C
/// is untouched; with a GPU every product must be right and the NaN in the
/// gaps between the C's must come back bit for bit.
#[test]
fn without_a_gpu_run_strided_is_a_typed_error() {
    let mut h = HostBatch::new(4);
    let before = h.c.clone();
    match h.run(&Gemm::new().alpha(0.5), 4) {
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            assert!(same_bits(&h.c, &before), "C changed after {e}");
        }
        Err(other) => panic!("unexpected error: {other}"),
        Ok(()) => {
            let (m, n, k) = h.dims;
            let b = MatRef::from_slice(&h.b, k, n, R, n).unwrap();
            for i in 0..h.count {
                let a = MatRef::from_slice(&h.a[i * m * k..], m, k, R, k).unwrap();
                let got = MatRef::from_slice(&h.c[i * (m * n + 2)..], m, n, C, m).unwrap();
                let cmp = Reference::new(0.5, a, b, 0.0, &Matrix::<f64>::zeros(m, n)).compare(got);
                assert!(cmp.passed(), "product {i}: {cmp}");
            }
            for i in 0..h.count - 1 {
                let gap = &h.c[i * (m * n + 2) + m * n..(i + 1) * (m * n + 2)];
                assert!(gap.iter().all(|x| x.to_bits() == f64::NAN.to_bits()), "gap after C {i}: {gap:?}");
            }
        }
    }
}

/// A split or packing asked of a batch is its typed error with or without a
/// GPU: found before the device is opened (it was `NoDriver` on a machine
/// without one), and C is untouched.
#[test]
fn batch_options_are_checked_before_the_device() {
    let x = iota(2 * 6);
    let mut y = vec![7.0f64; 2 * 4];
    let a = || Strided::from_slice(&x, 2, 2, 3, R).unwrap();
    let b = || Strided::from_slice(&x, 2, 3, 2, R).unwrap();
    let e = Gemm::new().split_k(4).run_strided(a(), b(), Strided::from_slice_mut(&mut y, 2, 2, 2, R).unwrap());
    assert!(matches!(e, Err(Error::SplitK { slices: 4, .. })), "{e:?}");
    let e = Gemm::new().pack(true).run_strided(a(), b(), Strided::from_slice_mut(&mut y, 2, 2, 2, R).unwrap());
    assert!(matches!(e, Err(Error::Pack { .. })), "{e:?}");
    let e = Gemm::new().allow_tf32(true).run_strided(a(), b(), Strided::from_slice_mut(&mut y, 2, 2, 2, R).unwrap());
    assert!(matches!(e, Err(Error::Unsupported { .. })), "{e:?}");
    assert!(y.iter().all(|&v| v == 7.0));
}
