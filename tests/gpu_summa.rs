//! Distributed matrices multiplied by SUMMA (`Gemm::run_distributed`):
//! the degenerate 1 x 1 grid (a group of one) on one GPU, and 1 x 2 / 2 x 1
//! grids on two (`two_gpus_*`, which fail with a clear message where fewer
//! than 2 GPUs exist), every type pair against a CPU reference with
//! integer-valued inputs (exact in f64, f32 and i32, and in the f32
//! accumulator of the 16-bit products, rounded once: within half an ulp of
//! C's type) and against the single-GPU `run_device` product (the same
//! bits: both round the exact value once); NaN-poisoned C with beta = 0;
//! round trips from and to host and device matrices bit for bit, host C's
//! padding untouched; op(A) = T and op(B) = T (the operand redistributed
//! as its transpose) and `DistMatrix::transpose` bit for bit for every
//! element width; mismatched layouts as typed errors; an injected
//! fault on one rank ending the call with `Error::Collective` within the
//! grid's timeout. GPU tests: `--include-ignored`.

mod common;

use common::{device, Rng};
use gemm::float8::F8E4M3;
use gemm::half::{bf16, f16};
use gemm::{DeviceMatrix, DistMatrix, Error, Gemm, Layout, MatMut, Matrix, Op, ProcessGrid, Product, Scalar};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Two GPUs, or a panic saying so (never a silent pass).
fn two_devices() -> Vec<Arc<gemm::Device>> {
    (0..2)
        .map(|i| gemm::Device::new(i).unwrap_or_else(|e| panic!("the two_gpus_ tests need 2 GPUs; GPU {i}: {e}")))
        .collect()
}

fn one_by_one() -> ProcessGrid {
    ProcessGrid::from_devices(&[device()], 1, 1).expect("a 1 x 1 grid")
}

/// Integers in -4..=4 (i8 too).
fn ints<T: Scalar>(rows: usize, cols: usize, seed: u64) -> Matrix<T> {
    let mut r = Rng::new(seed);
    Matrix::from_fn(rows, cols, |_, _| T::from_f64(r.below(9) as f64 - 4.0))
}

/// alpha A B + beta C in f64 (exact for these inputs); beta = 0 ignores C.
fn reference<T: Scalar, C: Scalar>(a: &Matrix<T>, b: &Matrix<T>, c: &Matrix<C>, alpha: f64, beta: f64) -> Vec<f64> {
    let (m, n, k) = (a.rows(), b.cols(), a.cols());
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k).map(|p| a[(i, p)].as_f64() * b[(p, j)].as_f64()).sum();
            out[i * n + j] = alpha * dot + if beta == 0.0 { 0.0 } else { beta * c[(i, j)].as_f64() };
        }
    }
    out
}

/// Within half an ulp of C's type (one rounding of an exact value; exact
/// for f64, f32 and i32 here).
fn assert_close<C: Scalar>(got: &Matrix<C>, want: &[f64], what: &str) {
    let n = got.cols();
    for i in 0..got.rows() {
        for j in 0..n {
            let (g, w) = (got[(i, j)].as_f64(), want[i * n + j]);
            let tol = C::EPSILON * w.abs() / 2.0;
            assert!((g - w).abs() <= tol, "{what}: C({i}, {j}) = {g}, want {w} (tolerance {tol})");
        }
    }
}

/// Bits of two host matrices of one type compared through f64 (NaN-free).
fn assert_same<C: Scalar>(x: &Matrix<C>, y: &Matrix<C>, what: &str) {
    for i in 0..x.rows() {
        for j in 0..x.cols() {
            assert!(x[(i, j)] == y[(i, j)], "{what}: C({i}, {j}) = {:?} vs {:?}", x[(i, j)], y[(i, j)]);
        }
    }
}

/// `a` transposed, as a new host matrix.
fn transposed<T: Scalar>(a: &Matrix<T>) -> Matrix<T> {
    Matrix::from_fn(a.cols(), a.rows(), |i, j| a[(j, i)])
}

/// One distributed product C <- alpha A B + beta C of `T` into `C` on
/// `grid` with blocks (mb, kb, nb), checked against the CPU reference and
/// the single-GPU device product; beta = 0 poisons C first.
fn check<T: Product<C>, C: Scalar>(
    grid: &ProcessGrid,
    dims: (usize, usize, usize),
    blocks: (usize, usize, usize),
    scalars: (f64, f64),
) {
    check_ops::<T, C>(grid, (Op::N, Op::N), dims, blocks, scalars)
}

/// As [`check`], with op(A) and op(B): an op = T operand is stored
/// transposed (A as k x m in kb x mb blocks, B as n x k in nb x kb).
fn check_ops<T: Product<C>, C: Scalar>(
    grid: &ProcessGrid,
    (op_a, op_b): (Op, Op),
    (m, n, k): (usize, usize, usize),
    (mb, kb, nb): (usize, usize, usize),
    (alpha, beta): (f64, f64),
) {
    let what = format!(
        "{} -> {} op {op_a:?}{op_b:?} on {} {m}x{n}x{k} blocks {mb}/{kb}/{nb} alpha {alpha} beta {beta}",
        T::NAME,
        C::NAME,
        grid.grid()
    );
    let (a, b) = (ints::<T>(m, k, 1 + m as u64), ints::<T>(k, n, 2 + n as u64));
    let c0: Matrix<C> = if beta == 0.0 { Matrix::filled(m, n, C::POISON) } else { ints(m, n, 3) };
    let want = reference(&a, &b, &c0, alpha, beta);
    let (sa, sb) = match (op_a, op_b) {
        (Op::N, Op::N) => (a.clone(), b.clone()),
        (Op::T, Op::N) => (transposed(&a), b.clone()),
        (Op::N, Op::T) => (a.clone(), transposed(&b)),
        (Op::T, Op::T) => (transposed(&a), transposed(&b)),
    };
    let (a_blocks, b_blocks) =
        (if op_a == Op::T { (kb, mb) } else { (mb, kb) }, if op_b == Op::T { (nb, kb) } else { (kb, nb) });
    let da = DistMatrix::from_host(grid, &sa, a_blocks.0, a_blocks.1).unwrap();
    let db = DistMatrix::from_host(grid, &sb, b_blocks.0, b_blocks.1).unwrap();
    let g = Gemm::new().alpha(alpha).beta(beta).op_a(op_a).op_b(op_b);
    // All of k in one chunk (the default here), a panel per chunk (a
    // 1-byte budget), and a few panels per chunk (staged A panels).
    let mut got = Matrix::filled(m, n, C::POISON);
    for budget in [None, Some(1), Some(256 << 10)] {
        let what = format!("{what}, workspace budget {budget:?}");
        let mut dc = DistMatrix::from_host(grid, &c0, mb, nb).unwrap();
        let gb = match budget {
            Some(b) => g.clone().memory_budget(b),
            None => g.clone(),
        };
        gb.run_distributed(&da, &db, &mut dc).unwrap_or_else(|e| panic!("{what}: {e}"));
        got = Matrix::filled(m, n, C::POISON);
        dc.to_host(&mut got).unwrap();
        assert_close(&got, &want, &what);
    }
    // The single-GPU device product of the same op(A) and op(B): the same bits.
    let dev = device();
    let (sa, sb) = (DeviceMatrix::from_host(&dev, &sa).unwrap(), DeviceMatrix::from_host(&dev, &sb).unwrap());
    let mut sc = DeviceMatrix::from_host(&dev, &c0).unwrap();
    g.run_device(&sa, &sb, &mut sc).unwrap();
    assert_same(&got, &sc.to_host().unwrap(), &format!("{what} against run_device"));
}

/// op(A) = T and op(B) = T (the operands redistributed as their
/// transposes first) on four type pairs of every element width.
fn every_op(grid: &ProcessGrid, dims: (usize, usize, usize), blocks: (usize, usize, usize)) {
    for ops in [(Op::T, Op::N), (Op::N, Op::T), (Op::T, Op::T)] {
        check_ops::<f64, f64>(grid, ops, dims, blocks, (2.0, 0.5));
        check_ops::<f32, f32>(grid, ops, dims, blocks, (1.0, 0.0));
        check_ops::<bf16, bf16>(grid, ops, dims, blocks, (1.0, 0.0));
        check_ops::<f16, f32>(grid, ops, dims, blocks, (2.0, 0.5));
        check_ops::<i8, i32>(grid, ops, dims, blocks, (1.0, 1.0));
    }
}

/// `DistMatrix::transpose` against the host transpose, bit for bit, for
/// elements of 8, 4, 2 and 1 bytes, then transposed back.
fn transposes(grid: &ProcessGrid, (m, n): (usize, usize), (mb, nb): (usize, usize)) {
    fn one<T: Scalar>(grid: &ProcessGrid, a: &Matrix<T>, (mb, nb): (usize, usize)) {
        let what = format!("{} {}x{} blocks {mb}x{nb} on {}", T::NAME, a.rows(), a.cols(), grid.grid());
        let d = DistMatrix::from_host(grid, a, mb, nb).unwrap();
        let t = d.transpose().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(t.layout(), d.layout().transposed(), "{what}");
        let mut got = Matrix::filled(a.cols(), a.rows(), T::POISON);
        t.to_host(&mut got).unwrap();
        assert_same(&got, &transposed(a), &what);
        let mut back = Matrix::filled(a.rows(), a.cols(), T::POISON);
        t.transpose().unwrap().to_host(&mut back).unwrap();
        assert_same(&back, a, &format!("{what}, transposed back"));
    }
    let mut r = Rng::new(9);
    one(grid, &Matrix::<f64>::from_fn(m, n, |_, _| r.uniform()), (mb, nb));
    one(grid, &Matrix::<f32>::from_fn(m, n, |_, _| r.uniform() as f32), (mb, nb));
    one(grid, &Matrix::<f16>::from_fn(m, n, |_, _| f16::from_f64(r.uniform())), (mb, nb));
    one(grid, &ints::<i8>(m, n, 10), (mb, nb));
}

/// Every type pair of `Product` at one shape, blocking and grid.
fn every_type(grid: &ProcessGrid, dims: (usize, usize, usize), blocks: (usize, usize, usize)) {
    for (alpha, beta) in [(1.0, 0.0), (2.0, 0.5), (0.0, 2.0)] {
        check::<f64, f64>(grid, dims, blocks, (alpha, beta));
        check::<f32, f32>(grid, dims, blocks, (alpha, beta));
        check::<f16, f16>(grid, dims, blocks, (alpha, beta));
        check::<f16, f32>(grid, dims, blocks, (alpha, beta));
        check::<bf16, bf16>(grid, dims, blocks, (alpha, beta));
        check::<bf16, f32>(grid, dims, blocks, (alpha, beta));
        // i8: integer alpha and beta.
        check::<i8, i32>(grid, dims, blocks, (alpha.round(), (beta * 2.0).round()));
        check::<F8E4M3, bf16>(grid, dims, blocks, (alpha, beta));
        check::<F8E4M3, f32>(grid, dims, blocks, (alpha, beta));
    }
}

#[test]
#[ignore = "needs a GPU"]
fn one_by_one_grid_every_type_odd_sizes() {
    let grid = one_by_one();
    every_type(&grid, (257, 131, 300), (64, 64, 64));
    every_type(&grid, (33, 65, 1), (7, 5, 9));
    // k within one panel.
    every_type(&grid, (100, 64, 48), (64, 64, 64));
    every_op(&grid, (257, 131, 300), (64, 48, 40));
    transposes(&grid, (257, 131), (64, 48));
    transposes(&grid, (33, 70), (300, 7));
}

#[test]
#[ignore = "needs a GPU"]
fn one_by_one_grid_round_trips_bit_for_bit() {
    let grid = one_by_one();
    let dev = device();
    let (m, n) = (257, 131);
    let mut r = Rng::new(7);
    let a = Matrix::<f64>::from_fn(m, n, |_, _| r.uniform());
    for (mb, nb) in [(64, 64), (1, 1), (300, 200), (7, 13)] {
        let d = DistMatrix::from_host(&grid, &a, mb, nb).unwrap();
        assert_eq!(d.layout().local_shape(0), (m, n));
        // A column-major host C with padding: the guards stay.
        let guard = f64::from_bits(0x7ff8_dead_beef_0001);
        let ld = m + 3;
        let mut store = vec![guard; ld * n];
        d.to_host(MatMut::from_slice(&mut store, m, n, Layout::ColMajor, ld).unwrap()).unwrap();
        for j in 0..n {
            for i in 0..ld {
                let v = store[j * ld + i];
                if i < m {
                    assert_eq!(v.to_bits(), a[(i, j)].to_bits(), "({i}, {j}) blocks {mb}x{nb}");
                } else {
                    assert_eq!(v.to_bits(), guard.to_bits(), "padding ({i}, {j}) changed");
                }
            }
        }
        // Device round trip.
        let src = DeviceMatrix::from_host(&dev, &a).unwrap();
        let d2 = DistMatrix::from_device(&grid, &src, mb, nb).unwrap();
        let mut out = DeviceMatrix::<f64>::zeros_in(&dev, m, n, Layout::ColMajor).unwrap();
        d2.to_device(&mut out).unwrap();
        let back = out.to_host().unwrap();
        for i in 0..m {
            for j in 0..n {
                assert_eq!(back[(i, j)].to_bits(), a[(i, j)].to_bits());
            }
        }
        let local = d2.local(0).expect("rank 0 is local");
        assert_eq!((local.dims().rows, local.dims().cols), (m, n));
    }
}

#[test]
#[ignore = "needs a GPU"]
fn one_by_one_grid_mismatches_are_typed_errors() {
    let grid = one_by_one();
    let a = DistMatrix::<f64>::zeros(&grid, 64, 48, 16, 8).unwrap();
    let b = DistMatrix::<f64>::zeros(&grid, 48, 32, 16, 8).unwrap();
    let mut c = DistMatrix::<f64>::zeros(&grid, 64, 32, 16, 8).unwrap();
    let e = Gemm::new().run_distributed(&a, &b, &mut c).unwrap_err();
    assert!(matches!(e, Error::Distribution { .. }), "{e}");
    let other = one_by_one();
    let b = DistMatrix::<f64>::zeros(&other, 48, 32, 8, 8).unwrap();
    let e = Gemm::new().run_distributed(&a, &b, &mut c).unwrap_err();
    assert!(matches!(e, Error::DeviceGroup { .. }), "{e}");
    let b = DistMatrix::<f64>::zeros(&grid, 48, 32, 8, 8).unwrap();
    // op(A) = T: op(A) is 48 x 64, which B's 48 rows do not fit.
    let e = Gemm::new().op_a(Op::T).run_distributed(&a, &b, &mut c).unwrap_err();
    assert!(matches!(e, Error::Shape(_)), "{e}");
    assert!(matches!(DistMatrix::<f64>::zeros(&grid, 4, 4, 0, 1), Err(Error::Distribution { .. })));
    Gemm::new().run_distributed(&a, &b, &mut c).unwrap();
}

#[test]
#[ignore = "needs 2 GPUs"]
fn two_gpus_grids_every_type() {
    let devices = two_devices();
    for (rows, cols) in [(1, 2), (2, 1)] {
        let grid = ProcessGrid::from_devices(&devices, rows, cols).unwrap();
        assert_eq!(grid.local_ranks(), vec![0, 1]);
        // Odd sizes, block sizes dividing nothing, more panels than ranks.
        every_type(&grid, (257, 131, 300), (64, 48, 40));
        every_type(&grid, (100, 50, 70), (33, 7, 19));
        // A rank with no blocks (m, n below one block).
        every_type(&grid, (20, 10, 90), (64, 16, 64));
        every_op(&grid, (257, 131, 300), (64, 48, 40));
        every_op(&grid, (100, 50, 70), (33, 7, 19));
        every_op(&grid, (20, 10, 90), (64, 16, 64));
        transposes(&grid, (257, 131), (64, 48));
        transposes(&grid, (100, 50), (33, 7));
        transposes(&grid, (10, 200), (64, 16));
    }
}

#[test]
#[ignore = "needs 2 GPUs"]
fn two_gpus_round_trips_and_ownership() {
    let devices = two_devices();
    let grid = ProcessGrid::from_devices(&devices, 1, 2).unwrap();
    let a = Matrix::<f32>::from_fn(70, 90, |i, j| (i * 1000 + j) as f32);
    let d = DistMatrix::from_host(&grid, &a, 16, 16).unwrap();
    let l = d.layout();
    for (rank, dev) in devices.iter().enumerate() {
        let local = d.local(rank).unwrap();
        assert_eq!((local.dims().rows, local.dims().cols), l.local_shape(rank));
        assert!(local.device().same_context(dev));
    }
    let mut back = Matrix::<f32>::zeros(70, 90);
    d.to_host(&mut back).unwrap();
    assert_eq!(back.as_slice(), a.as_slice());
}

#[test]
#[ignore = "needs 2 GPUs"]
fn two_gpus_one_thread_per_rank() {
    let devices = two_devices();
    let id = ProcessGrid::unique_id().unwrap();
    let (m, n, k) = (150, 90, 200);
    let a = ints::<f64>(m, k, 11);
    let b = ints::<f64>(k, n, 12);
    let want = reference(&a, &b, &Matrix::<f64>::zeros(m, n), 1.0, 0.0);
    let parts: Vec<Matrix<f64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|rank| {
                let (dev, id, a, b) = (devices[rank].clone(), id.clone(), &a, &b);
                s.spawn(move || {
                    let bytes = id.to_bytes();
                    let grid = ProcessGrid::from_rank(&dev, rank, 2, 1, &gemm::NcclId::from_bytes(&bytes)).unwrap();
                    assert_eq!(grid.local_ranks(), vec![rank]);
                    let da = DistMatrix::from_host(&grid, a, 32, 24).unwrap();
                    let db = DistMatrix::from_host(&grid, b, 24, 32).unwrap();
                    let mut dc = DistMatrix::<f64>::zeros(&grid, m, n, 32, 32).unwrap();
                    Gemm::new().run_distributed(&da, &db, &mut dc).unwrap();
                    let mut part = Matrix::filled(m, n, f64::NAN);
                    dc.to_host(&mut part).unwrap();
                    // op(A) = T on A stored transposed (ncclSend/Recv
                    // between the processes' ranks): the same result.
                    let dat = DistMatrix::from_host(&grid, &transposed(a), 24, 32).unwrap();
                    let mut dc2 = DistMatrix::<f64>::zeros(&grid, m, n, 32, 32).unwrap();
                    Gemm::new().op_a(Op::T).run_distributed(&dat, &db, &mut dc2).unwrap();
                    let mut part2 = Matrix::filled(m, n, f64::NAN);
                    dc2.to_host(&mut part2).unwrap();
                    for (x, y) in part.as_slice().iter().zip(part2.as_slice()) {
                        assert!(x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()), "op(A) = T differs");
                    }
                    part
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let layout = gemm::BlockCyclic::new(m, n, 32, 32, gemm::Grid::new(2, 1)).unwrap();
    for i in 0..m {
        for j in 0..n {
            let owner = layout.owner(i, j);
            assert_eq!(parts[owner][(i, j)], want[i * n + j], "({i}, {j}) from rank {owner}");
            assert!(parts[1 - owner][(i, j)].is_nan(), "({i}, {j}) written by a rank that does not own it");
        }
    }
}

#[test]
#[ignore = "needs 2 GPUs"]
fn two_gpus_injected_fault_ends_with_a_typed_error_in_time() {
    let devices = two_devices();
    for (rows, cols) in [(1, 2), (2, 1)] {
        let timeout = Duration::from_secs(5);
        let grid = ProcessGrid::from_devices(&devices, rows, cols).unwrap().timeout(timeout);
        let (m, n, k) = (256, 256, 512);
        let a = DistMatrix::from_host(&grid, &ints::<f64>(m, k, 5), 64, 64).unwrap();
        let b = DistMatrix::from_host(&grid, &ints::<f64>(k, n, 6), 64, 64).unwrap();
        let mut c = DistMatrix::<f64>::zeros(&grid, m, n, 64, 64).unwrap();
        // A healthy call first.
        Gemm::new().run_distributed(&a, &b, &mut c).unwrap();
        grid.inject_fault(1);
        let start = Instant::now();
        let e = Gemm::new().run_distributed(&a, &b, &mut c).unwrap_err();
        let took = start.elapsed();
        assert!(matches!(e, Error::Collective { .. }), "{rows}x{cols}: {e}");
        assert!(took < timeout + Duration::from_secs(10), "{rows}x{cols}: the error took {took:?}");
        assert!(grid.failure().is_some());
        // The grid is unusable after: a typed error, at once.
        let e = Gemm::new().run_distributed(&a, &b, &mut c).unwrap_err();
        assert!(matches!(e, Error::DeviceGroup { .. }), "{e}");
    }
}

/// Four GPUs, or a panic saying so (never a silent pass).
fn four_devices() -> Vec<Arc<gemm::Device>> {
    (0..4)
        .map(|i| gemm::Device::new(i).unwrap_or_else(|e| panic!("the four_gpus_ tests need 4 GPUs; GPU {i}: {e}")))
        .collect()
}

#[test]
#[ignore = "needs 4 GPUs"]
fn four_gpus_grids_every_type() {
    let devices = four_devices();
    for (rows, cols) in [(2, 2), (1, 4), (4, 1)] {
        let grid = ProcessGrid::from_devices(&devices, rows, cols).unwrap();
        assert_eq!(grid.local_ranks(), vec![0, 1, 2, 3]);
        every_type(&grid, (257, 131, 300), (64, 48, 40));
        every_type(&grid, (100, 50, 70), (33, 7, 19));
        every_op(&grid, (257, 131, 300), (64, 48, 40));
        every_op(&grid, (100, 50, 70), (33, 7, 19));
        transposes(&grid, (257, 131), (64, 48));
        transposes(&grid, (100, 50), (33, 7));
    }
}
