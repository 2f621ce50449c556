//! The reference BLAS Level-3 test of xGEMM, ported in spirit: netlib's
//! `dblat3`/`sblat3`, the DGEMM section (`DCHK1`, whose results `DMMCH`
//! checks), and its argument checks (`DCHKE`).
//!
//! # What is varied (DCHK1)
//! Every TRANSA, TRANSB in {N, T}, every storage order of A, B and C,
//! alpha in {0, 1, 0.7}, beta in {0, 1, 1.3}: 288 combinations per
//! precision. Dimensions m, n, k come from {0, 1, 2, 3, 5, 9, 16, 31, 33,
//! 64, 65, 127}: one combination per precision runs every (m, n, k) of
//! {0, 1, 2, 5, 9, 16, 33, 65, 127} (729 products), each other one six
//! triples rotated through the set, and a few products in the hundreds
//! (300 x 257 x 129, its rotations, 1 x 300 x 257) run in every op
//! combination. Leading dimensions are the minimum plus a pad in {0, 1, 3,
//! 8}; C is a view at (g, g) of a matrix g larger on every side (g in {0,
//! 1, 2}).
//!
//! # What must hold
//! - A guard value (a quiet NaN with a payload no arithmetic produces) in
//!   the padding of A, B and C, in the storage after them, and in the
//!   border around the view C comes back bit for bit.
//! - beta = 0: C starts as NaN and must not be read. alpha = 0: every
//!   element of A and B is NaN and must not be read.
//! - alpha = 0 or k = 0: C = beta * C0 exactly up to the one rounding of
//!   that product, |C - beta C0| <= eps |beta C0| (so 0 for beta = 0 and
//!   C0 itself for beta = 1).
//! - Otherwise, DMMCH's test with gemm::check's constant: with
//!   `G = |alpha| sum_p |op(A)(i,p)| |op(B)(p,j)| + |beta| |C0(i,j)|`,
//!   every element satisfies `|C - C_ref| <= (k + 2) eps G` (C_ref in f64 on
//!   the CPU; G = 0 demands equality); the error ratio |C - C_ref| / (eps G)
//!   is reported on failure. alpha and beta enter the reference as the
//!   element type rounds them (f32: 0.7f32, 1.3f32). eps is 2^-52 (f64) or
//!   2^-23 (f32).
//! - Every product also runs through `Gemm::run` on host matrices; a third of
//!   the combinations (and the large products) also through `run_device` on
//!   views of `DeviceMatrix`es, whose A and B must come back unchanged too.
//!   Half of the rotated products choose a stage explicitly (all eight in
//!   turn), the rest take the default kernel.
//!
//! The GPU tests are ignored (they need an NVIDIA GPU; without one they
//! fail). The argument checks (DCHKE's idea) run everywhere: every bad
//! argument gives its typed error, with the numbers, before the GPU is
//! touched, and leaves C bit for bit as it was.

mod common;

use approx::abs_diff_eq;
use common::{device, outside_view_unchanged, required_len, same_bits, Bits, Rng, Variant};
use gemm::tuning::Stage;
use gemm::{DeviceMatrix, Error, Gemm, Layout, MatMut, MatRef, Matrix, Op, Precision, ShapeError};

const DIMS: [usize; 12] = [0, 1, 2, 3, 5, 9, 16, 31, 33, 64, 65, 127];
const CUBE_DIMS: [usize; 9] = [0, 1, 2, 5, 9, 16, 33, 65, 127];
const ALPHAS: [f64; 3] = [0.0, 1.0, 0.7];
const BETAS: [f64; 3] = [0.0, 1.0, 1.3];
const PADS: [usize; 4] = [0, 1, 3, 8];
const LARGE: [(usize, usize, usize); 4] = [(300, 257, 129), (129, 300, 257), (257, 129, 300), (1, 300, 257)];
/// Products per combination other than the one that runs the whole cube.
const PER_COMBINATION: usize = 6;
/// Guard elements stored after each matrix's last element.
const TAIL: usize = 3;

const R: Layout = Layout::RowMajor;
const C: Layout = Layout::ColMajor;

/// One product of the test.
#[derive(Clone, Copy, Debug)]
struct Case {
    v: Variant,
    alpha: f64,
    beta: f64,
    m: usize,
    n: usize,
    k: usize,
    /// lda, ldb, ldc beyond their minimum.
    pads: [usize; 3],
    /// C is the m x n view at (border, border) of a matrix 2 * border larger each way.
    border: usize,
    /// A stage chosen with `.stage(..)`, or the default kernel.
    stage: Option<Stage>,
    /// op(A) = A^T given as `a.t()` (and op(B) likewise) instead of the op flag.
    transposed_views: bool,
    seed: u64,
}

impl core::fmt::Display for Case {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "m={} n={} k={} {} alpha={} beta={} pads={:?} border={} {}{} seed={}",
            self.m,
            self.n,
            self.k,
            self.v,
            self.alpha,
            self.beta,
            self.pads,
            self.border,
            self.stage.map_or("default kernel".to_string(), |s| s.to_string()),
            if self.transposed_views { ", transposed views" } else { "" },
            self.seed
        )
    }
}

/// The 288 combinations of op flags, layouts, alpha and beta.
fn combinations() -> Vec<(Variant, f64, f64)> {
    let mut out = Vec::new();
    for v in Variant::all() {
        for alpha in ALPHAS {
            for beta in BETAS {
                out.push((v, alpha, beta));
            }
        }
    }
    out
}

/// The combination that runs the whole cube of [`CUBE_DIMS`]: column-major,
/// no transpose (BLAS's own convention) for f64; everything transposed and
/// row-major for f32.
fn cube_combination(precision: Precision) -> (Variant, f64, f64) {
    let v = match precision {
        Precision::F64 => Variant { op_a: Op::N, op_b: Op::N, a: C, b: C, c: C },
        _ => Variant { op_a: Op::T, op_b: Op::T, a: R, b: R, c: R },
    };
    (v, 0.7, 1.3)
}

fn stage_for(precision: Precision, i: usize) -> Option<Stage> {
    let stage = Stage::ALL[i % Stage::ALL.len()];
    (precision == Precision::F64 || stage != Stage::TensorCore).then_some(stage)
}

/// Every product of the test for `precision`, in a fixed order.
fn cases(precision: Precision) -> Vec<Case> {
    let base = |v, alpha, beta, (m, n, k), i: usize| Case {
        v,
        alpha,
        beta,
        m,
        n,
        k,
        pads: [PADS[i % 4], PADS[(i / 4 + 1) % 4], PADS[(i / 16 + 2) % 4]],
        border: i % 3,
        stage: None,
        transposed_views: false,
        seed: 1000 + i as u64,
    };
    let mut out = Vec::new();
    let cube = cube_combination(precision);
    for (ci, (v, alpha, beta)) in combinations().into_iter().enumerate() {
        if (v, alpha, beta) == cube {
            continue;
        }
        for j in 0..PER_COMBINATION {
            let m = DIMS[(ci * 5 + j * 7) % DIMS.len()];
            let n = DIMS[(ci * 7 + j * 5 + 3) % DIMS.len()];
            let k = DIMS[(ci * 11 + j * 5 + 6) % DIMS.len()];
            let mut case = base(v, alpha, beta, (m, n, k), ci * PER_COMBINATION + j);
            case.pads = [PADS[(ci + j) % 4], PADS[(ci / 4 + j + 1) % 4], PADS[(ci / 16 + 2 * j + 2) % 4]];
            case.border = (ci + j) % 3;
            if j % 2 == 1 {
                case.stage = stage_for(precision, ci + j / 2);
            }
            case.transposed_views = j == PER_COMBINATION - 1;
            out.push(case);
        }
    }
    out.extend(large_cases(precision));
    out
}

/// The products in the hundreds, one per op combination and shape, in
/// rotating layouts.
fn large_cases(precision: Precision) -> Vec<Case> {
    let mut out = Vec::new();
    for (i, &shape) in LARGE.iter().enumerate() {
        for (o, (op_a, op_b)) in
            [(Op::N, Op::N), (Op::N, Op::T), (Op::T, Op::N), (Op::T, Op::T)].into_iter().enumerate()
        {
            let l = |bit: usize| if (i + o) >> bit & 1 == 1 { C } else { R };
            let v = Variant { op_a, op_b, a: l(0), b: l(1), c: l(2) };
            let (alpha, beta) = if o % 2 == 0 { (0.7, 1.3) } else { (1.0, 0.0) };
            out.push(Case {
                v,
                alpha,
                beta,
                m: shape.0,
                n: shape.1,
                k: shape.2,
                pads: [PADS[(i + o) % 4], PADS[(i + 2 * o + 1) % 4], PADS[(2 * i + o + 2) % 4]],
                border: (i + o) % 3,
                stage: if precision == Precision::F64 { None } else { stage_for(precision, i * 4 + o) },
                transposed_views: false,
                seed: 9000 + (i * 4 + o) as u64,
            });
        }
    }
    out
}

/// The cube of one combination.
fn cube_cases(precision: Precision) -> Vec<Case> {
    let (v, alpha, beta) = cube_combination(precision);
    let mut out = Vec::new();
    for &m in &CUBE_DIMS {
        for &n in &CUBE_DIMS {
            for &k in &CUBE_DIMS {
                let i = out.len();
                out.push(Case {
                    v,
                    alpha,
                    beta,
                    m,
                    n,
                    k,
                    pads: [PADS[i % 4], PADS[(i / 4 + 1) % 4], PADS[(i / 16 + 2) % 4]],
                    border: i % 3,
                    stage: None,
                    transposed_views: false,
                    seed: 5000 + i as u64,
                });
            }
        }
    }
    out
}

/// The operands of one case, in host memory, guards in place.
struct Operands<T> {
    /// A as stored (m x k, or k x m for op(A) = A^T), with TAIL guards after it.
    a: Matrix<T>,
    b: Matrix<T>,
    /// The matrix C is a view of, before the product.
    c_parent: Matrix<T>,
}

/// A stored `rows x cols` matrix in `layout` with leading dimension
/// `min + pad`: elements from `value`, guards everywhere else (padding and
/// TAIL elements after the last one).
fn guarded<T: Bits>(
    rows: usize,
    cols: usize,
    layout: Layout,
    pad: usize,
    mut value: impl FnMut(usize, usize) -> T,
) -> Matrix<T> {
    let ld = common::ld_with_pad(rows, cols, layout, pad);
    let mut data = vec![T::GUARD; required_len(rows, cols, layout, ld) + TAIL];
    for i in 0..rows {
        for j in 0..cols {
            data[common::offset(layout, ld, i, j)] = value(i, j);
        }
    }
    Matrix::from_vec_in(rows, cols, layout, ld, data).expect("a valid shape")
}

fn operands<T: Bits>(case: &Case) -> Operands<T> {
    let mut rng = Rng::new(case.seed);
    let (m, n, k, g) = (case.m, case.n, case.k, case.border);
    let stored = |op: Op, rows: usize, cols: usize| if op == Op::N { (rows, cols) } else { (cols, rows) };
    let (ar, ac) = stored(case.v.op_a, m, k);
    let (br, bc) = stored(case.v.op_b, k, n);
    // alpha = 0: A and B are never read, so they may hold NaN.
    let ab = |rng: &mut Rng| if case.alpha == 0.0 { T::POISON } else { T::from_f64(rng.uniform()) };
    let a = guarded(ar, ac, case.v.a, case.pads[0], |_, _| ab(&mut rng));
    let b = guarded(br, bc, case.v.b, case.pads[1], |_, _| ab(&mut rng));
    // beta = 0: C is never read, so it starts as NaN; the border stays guard.
    let c_parent = guarded(m + 2 * g, n + 2 * g, case.v.c, case.pads[2], |i, j| {
        let inside = (g..g + m).contains(&i) && (g..g + n).contains(&j);
        match (inside, case.beta == 0.0) {
            (false, _) => T::GUARD,
            (true, true) => T::POISON,
            (true, false) => T::from_f64(rng.uniform()),
        }
    });
    Operands { a, b, c_parent }
}

/// DMMCH: checks the m x n result `got` against the f64 reference of `case`
/// (see the module docs for the bound). `c0` is C's view before the product.
fn check_result<T: Bits>(case: &Case, ops: &Operands<T>, got: MatRef<'_, T>) -> Result<(), String> {
    let (m, n, k) = (case.m, case.n, case.k);
    let alpha = T::from_f64(case.alpha).as_f64();
    let beta = T::from_f64(case.beta).as_f64();
    let eps = T::EPSILON;
    let reads_ab = alpha != 0.0 && k > 0;
    let op_a = common::op_view(&ops.a, case.v.op_a);
    let op_b = common::op_view(&ops.b, case.v.op_b);
    let c0 = ops.c_parent.view(case.border, case.border, m, n).unwrap();
    // op(A) by rows and op(B) by columns, packed, in f64.
    let (mut pa, mut pb) = (vec![0.0; m * k], vec![0.0; n * k]);
    if reads_ab {
        for p in 0..k {
            for i in 0..m {
                pa[i * k + p] = op_a.get(i, p).unwrap().as_f64();
            }
            for j in 0..n {
                pb[j * k + p] = op_b.get(p, j).unwrap().as_f64();
            }
        }
    }
    let mut worst: Option<(f64, String)> = None;
    let mut bad = 0usize;
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut g) = (0.0f64, 0.0f64);
            if reads_ab {
                let (ra, cb) = (&pa[i * k..(i + 1) * k], &pb[j * k..(j + 1) * k]);
                for (x, y) in ra.iter().zip(cb) {
                    let t = x * y;
                    s += t;
                    g += t.abs();
                }
            }
            let c0v = if beta != 0.0 { c0.get(i, j).unwrap().as_f64() } else { 0.0 };
            let x = got.get(i, j).unwrap().as_f64();
            // eps G: DMMCH's unit of error.
            let (expect, eps_g, bound) = if reads_ab {
                let eps_g = eps * (alpha.abs() * g + beta.abs() * c0v.abs());
                (alpha * s + beta * c0v, eps_g, (k as f64 + 2.0) * eps_g)
            } else {
                let eps_g = eps * (beta * c0v).abs();
                (beta * c0v, eps_g, eps_g)
            };
            let err = (x - expect).abs();
            let exact_needed = !reads_ab && beta == 1.0;
            let ok = x.is_finite() && abs_diff_eq!(x, expect, epsilon = bound) && (!exact_needed || x == c0v);
            if !ok {
                bad += 1;
                let ratio = if eps_g > 0.0 { err / eps_g } else { f64::INFINITY };
                let msg = format!(
                    "C({i}, {j}) = {x:e}, expected {expect:e}, |error| {err:.3e} > bound {bound:.3e} \
                     (error ratio |C - C_ref| / (eps G) = {ratio:.2})"
                );
                if worst.as_ref().is_none_or(|(r, _)| ratio > *r || r.is_nan()) {
                    worst = Some((ratio, msg));
                }
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((_, msg)) => Err(format!("{bad} of {} elements wrong; worst: {msg}", m * n)),
    }
}

/// The builder of a case (op flags unless the operands are passed as transposed views).
fn builder(case: &Case) -> Gemm {
    let g = Gemm::new().alpha(case.alpha).beta(case.beta);
    let g = if case.transposed_views { g } else { g.op_a(case.v.op_a).op_b(case.v.op_b) };
    match case.stage {
        Some(s) => g.stage(s),
        None => g,
    }
}

/// One case through `Gemm::run` on host matrices.
fn run_host<T: Bits>(case: &Case) -> Result<(), String> {
    let ops = operands::<T>(case);
    let mut c_parent = ops.c_parent.clone();
    let view = c_parent.view_mut(case.border, case.border, case.m, case.n).map_err(|e| e.to_string())?;
    let g = builder(case);
    let result = if case.transposed_views {
        g.run(common::op_view(&ops.a, case.v.op_a), common::op_view(&ops.b, case.v.op_b), view)
    } else {
        g.run(&ops.a, &ops.b, view)
    };
    result.map_err(|e| format!("run failed: {e}"))?;
    outside_view_unchanged(&ops.c_parent, &c_parent, (case.border, case.border), (case.m, case.n))?;
    check_result(case, &ops, c_parent.view(case.border, case.border, case.m, case.n).unwrap())
}

/// The first `required_len` elements of a host matrix, as the matrix a
/// device copy of it comes back as.
fn span_of<T: Bits>(x: &Matrix<T>) -> Matrix<T> {
    let len = required_len(x.rows(), x.cols(), x.layout(), x.ld());
    Matrix::from_vec_in(x.rows(), x.cols(), x.layout(), x.ld(), x.as_slice()[..len].to_vec()).unwrap()
}

/// One case through `Gemm::run_device` on views of device matrices.
fn run_device_case<T: Bits>(case: &Case) -> Result<(), String> {
    let dev = device();
    let ops = operands::<T>(case);
    let e = |e: Error| e.to_string();
    let da = DeviceMatrix::from_host(&dev, &ops.a).map_err(e)?;
    let db = DeviceMatrix::from_host(&dev, &ops.b).map_err(e)?;
    let mut dc = DeviceMatrix::from_host(&dev, &ops.c_parent).map_err(e)?;
    let view = dc.view_mut(case.border, case.border, case.m, case.n).map_err(e)?;
    let g = builder(case);
    let result = if case.transposed_views {
        let va = if case.v.op_a == Op::N { da.as_view() } else { da.t() };
        let vb = if case.v.op_b == Op::N { db.as_view() } else { db.t() };
        g.run_device(va, vb, view)
    } else {
        g.run_device(&da, &db, view)
    };
    result.map_err(|e| format!("run_device failed: {e}"))?;
    let after = dc.to_host().map_err(e)?;
    for (name, d, host) in [("A", &da, &ops.a), ("B", &db, &ops.b)] {
        if !same_bits(d.to_host().map_err(e)?.as_slice(), span_of(host).as_slice()) {
            return Err(format!("{name} changed on the device"));
        }
    }
    outside_view_unchanged(&span_of(&ops.c_parent), &after, (case.border, case.border), (case.m, case.n))?;
    check_result(case, &ops, after.view(case.border, case.border, case.m, case.n).unwrap())
}

/// Runs every case, collects the failures, and fails with the first few.
fn run_all<T: Bits>(what: &str, cases: &[Case], run: fn(&Case) -> Result<(), String>) {
    device();
    let mut failures = Vec::new();
    for case in cases {
        if let Err(e) = run(case) {
            failures.push(format!("{case}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{what}: {} of {} products failed; first ones:\n{}",
        failures.len(),
        cases.len(),
        failures.iter().take(12).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// The device subset: every third combination's first product, and the large ones.
fn device_cases(precision: Precision) -> Vec<Case> {
    let all = cases(precision);
    let mut out: Vec<Case> = all.iter().step_by(3 * PER_COMBINATION).copied().collect();
    // A combination's last product passes transposed views.
    out.extend(all.iter().skip(PER_COMBINATION - 1).step_by(5 * PER_COMBINATION).copied());
    out.extend(large_cases(precision));
    out
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn dgemm_every_combination() {
    run_all::<f64>("DGEMM", &cases(Precision::F64), run_host::<f64>);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn sgemm_every_combination() {
    run_all::<f32>("SGEMM", &cases(Precision::F32), run_host::<f32>);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn dgemm_every_shape_of_one_combination() {
    run_all::<f64>("DGEMM cube", &cube_cases(Precision::F64), run_host::<f64>);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn sgemm_every_shape_of_one_combination() {
    run_all::<f32>("SGEMM cube", &cube_cases(Precision::F32), run_host::<f32>);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn dgemm_device_views() {
    run_all::<f64>("DGEMM on the device", &device_cases(Precision::F64), run_device_case::<f64>);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn sgemm_device_views() {
    run_all::<f32>("SGEMM on the device", &device_cases(Precision::F32), run_device_case::<f32>);
}

/// The case lists cover what the module docs promise (no GPU needed).
#[test]
fn the_cases_cover_every_combination_dimension_pad_and_stage() {
    for precision in [Precision::F64, Precision::F32] {
        let all: Vec<Case> = cases(precision).into_iter().chain(cube_cases(precision)).collect();
        for (v, alpha, beta) in combinations() {
            assert!(all.iter().any(|c| c.v == v && c.alpha == alpha && c.beta == beta), "{v} {alpha} {beta}");
        }
        for d in DIMS {
            assert!(
                all.iter().any(|c| c.m == d) && all.iter().any(|c| c.n == d) && all.iter().any(|c| c.k == d),
                "{d}"
            );
        }
        for p in PADS {
            for o in 0..3 {
                assert!(all.iter().any(|c| c.pads[o] == p), "pad {p} of operand {o}");
            }
        }
        for s in Stage::ALL.into_iter().filter(|&s| precision == Precision::F64 || s != Stage::TensorCore) {
            assert!(all.iter().any(|c| c.stage == Some(s)), "{s}");
        }
        assert!(all.iter().any(|c| c.transposed_views && c.v.op_a == Op::T));
        assert_eq!(cube_cases(precision).len(), CUBE_DIMS.len().pow(3));
        assert!(device_cases(precision).len() >= 96, "{}", device_cases(precision).len());
        // The guards are NaNs no arithmetic makes.
        assert!(f64::GUARD.is_nan() && f32::GUARD.is_nan());
    }
}

/// The reference check itself fails on a wrong element, a NaN, a written
/// guard and a C that was read although beta = 0 (no GPU needed: the
/// "results" are made on the CPU).
#[test]
fn the_reference_check_can_fail() {
    let case = Case {
        v: Variant { op_a: Op::T, op_b: Op::N, a: R, b: C, c: C },
        alpha: 0.7,
        beta: 1.3,
        m: 9,
        n: 5,
        k: 16,
        pads: [1, 3, 8],
        border: 1,
        stage: None,
        transposed_views: false,
        seed: 7,
    };
    let ops = operands::<f64>(&case);
    // The exact result, computed the slow way.
    let mut c = ops.c_parent.clone();
    let (op_a, op_b) = (common::op_view(&ops.a, Op::T), ops.b.as_ref());
    for i in 0..case.m {
        for j in 0..case.n {
            let s: f64 = (0..case.k).map(|p| op_a.get(i, p).unwrap() * op_b.get(p, j).unwrap()).sum();
            c[(i + 1, j + 1)] = 0.7 * s + 1.3 * ops.c_parent[(i + 1, j + 1)];
        }
    }
    let view = |c: &Matrix<f64>| c.view(1, 1, case.m, case.n).unwrap().to_matrix();
    assert_eq!(check_result(&case, &ops, view(&c).as_ref()), Ok(()));
    assert_eq!(outside_view_unchanged(&ops.c_parent, &c, (1, 1), (case.m, case.n)), Ok(()));
    let mut off = c.clone();
    off[(3, 4)] += 1e-12;
    assert!(check_result(&case, &ops, view(&off).as_ref()).is_err());
    let mut nan = c.clone();
    nan[(9, 5)] = f64::NAN;
    assert!(check_result(&case, &ops, view(&nan).as_ref()).is_err());
    let mut border = c.clone();
    border[(0, 2)] = 0.0;
    assert!(outside_view_unchanged(&ops.c_parent, &border, (1, 1), (case.m, case.n)).is_err());
    let mut padding = c.clone();
    let last = padding.as_slice().len() - 1; // a TAIL guard
    padding.as_mut_slice()[last] = 1.0;
    assert!(outside_view_unchanged(&ops.c_parent, &padding, (1, 1), (case.m, case.n)).is_err());
    // beta = 0 and alpha = 0: C starts as NaN and A, B hold NaN.
    let zero = Case { alpha: 0.0, beta: 0.0, ..case };
    let ops0 = operands::<f64>(&zero);
    assert!(ops0.a.get(0, 0).unwrap().is_nan() && ops0.c_parent.get(1, 1).unwrap().is_nan());
    assert_eq!(check_result(&zero, &ops0, Matrix::<f64>::zeros(9, 5).as_ref()), Ok(()));
    assert!(check_result(&zero, &ops0, Matrix::<f64>::filled(9, 5, 1e-300).as_ref()).is_err());
    // alpha = 0, beta = 1: C0 itself, exactly.
    let keep = Case { alpha: 0.0, beta: 1.0, ..case };
    let ops1 = operands::<f64>(&keep);
    let c0 = view(&ops1.c_parent);
    assert_eq!(check_result(&keep, &ops1, c0.as_ref()), Ok(()));
    let mut c0_off = c0.clone();
    c0_off[(0, 0)] = f64::from_bits(c0_off[(0, 0)].to_bits() + 1);
    assert!(check_result(&keep, &ops1, c0_off.as_ref()).is_err());
}

// ---------------------------------------------------------------------------
// Argument checks (DCHKE's idea): no GPU needed.
// ---------------------------------------------------------------------------

/// A C of `rows x cols` as a view at (1, 1) of a guarded parent, for the
/// argument checks: returns the parent (to check afterwards).
fn guarded_c(rows: usize, cols: usize, layout: Layout) -> Matrix<f64> {
    let mut rng = Rng::new(rows as u64 * 31 + cols as u64);
    guarded(rows + 2, cols + 2, layout, 1, |i, j| {
        if (1..=rows).contains(&i) && (1..=cols).contains(&j) {
            rng.uniform()
        } else {
            f64::GUARD
        }
    })
}

/// Runs `g` on zero matrices of the given stored shapes, into a `c_rows x
/// c_cols` view of a guarded parent; returns the error and checks that the
/// parent (C and around it) is bit for bit unchanged.
fn run_expecting_error(
    g: Gemm,
    a: (usize, usize, Layout),
    b: (usize, usize, Layout),
    c: (usize, usize, Layout),
) -> Error {
    let a = Matrix::<f64>::zeros_in(a.0, a.1, a.2);
    let b = Matrix::<f64>::zeros_in(b.0, b.1, b.2);
    let before = guarded_c(c.0, c.1, c.2);
    let mut parent = before.clone();
    let err = g.run(&a, &b, parent.view_mut(1, 1, c.0, c.1).unwrap()).expect_err("a bad argument must be an error");
    assert!(same_bits(parent.as_slice(), before.as_slice()), "C changed by a call that failed with {err}");
    assert!(!matches!(err, Error::NoDriver | Error::NoDevice { .. }), "validation must come before the device: {err}");
    err
}

/// LDA, LDB and LDC below their minimum, for each operand, layout and op:
/// the BLAS minimum (column-major: `max(1, m)` for A with TRANSA = N, `max(1,
/// k)` with T; `max(1, k)` / `max(1, n)` for B; `max(1, m)` for C) and its
/// row-major mirror. A view with such a leading dimension cannot be made,
/// so the error comes from the view's constructor (naming "the matrix").
#[test]
fn leading_dimensions_below_the_minimum_are_rejected() {
    let (m, n, k) = (5, 4, 3);
    // (operand, op, layout, stored rows, stored cols, minimum leading dimension)
    let table = [
        ("A", Op::N, C, m, k, m),
        ("A", Op::T, C, k, m, k),
        ("A", Op::N, R, m, k, k),
        ("A", Op::T, R, k, m, m),
        ("B", Op::N, C, k, n, k),
        ("B", Op::T, C, n, k, n),
        ("B", Op::N, R, k, n, n),
        ("B", Op::T, R, n, k, k),
        ("C", Op::N, C, m, n, m),
        ("C", Op::N, R, m, n, n),
    ];
    for (operand, op, layout, rows, cols, min) in table {
        let ld = min - 1;
        let mut data = vec![f64::GUARD; 100];
        let before = data.clone();
        let expect = |e: Error| {
            let Error::Shape(ShapeError::LeadingDimension { operand: o, ld: got_ld, layout: l, min: got_min }) = e
            else {
                panic!("{operand} op {op:?} {layout}: {e:?}")
            };
            assert_eq!((got_ld, l, got_min), (ld, layout, min), "{operand} op {op:?} {layout}");
            assert_eq!(o.to_string(), "the matrix");
            let line = if layout == R { "row" } else { "column" };
            assert_eq!(
                e.to_string(),
                format!(
                    "leading dimension of the matrix is {ld}, but it is {layout} with {min} elements per {line} \
                     (need ld >= max(1, {min}))"
                )
            );
        };
        expect(MatRef::from_slice(&data, rows, cols, layout, ld).unwrap_err());
        expect(MatMut::from_slice(&mut data, rows, cols, layout, ld).unwrap_err());
        expect(Matrix::from_vec_in(rows, cols, layout, ld, before.clone()).unwrap_err());
        assert!(same_bits(&data, &before));
        // The minimum itself is accepted, and the view's op gives the BLAS shape.
        let x = MatRef::from_slice(&data, rows, cols, layout, min).unwrap();
        let opx = common::op_view(&x.to_matrix(), op).dims();
        let want = match operand {
            "A" => (m, k),
            "B" => (k, n),
            _ => (m, n),
        };
        assert_eq!((opx.rows, opx.cols), want);
    }
    // An empty line still needs ld >= 1.
    let e = MatRef::<f64>::from_slice(&[], 0, 3, C, 0).unwrap_err();
    assert!(matches!(e, Error::Shape(ShapeError::LeadingDimension { ld: 0, min: 0, .. })), "{e:?}");
    assert!(MatRef::<f64>::from_slice(&[], 0, 3, C, 1).is_ok());
}

/// op(A)'s columns differ from op(B)'s rows, or C is not m x n: for every
/// op combination, alpha in {0, 1}, beta in {0, 1} (BLAS checks the
/// arguments whatever alpha and beta are), also when m = 0.
#[test]
fn mismatched_dimensions_are_rejected_for_each_op() {
    let (m, n, k) = (5, 4, 3);
    let stored =
        |op: Op, rows: usize, cols: usize, l: Layout| if op == Op::N { (rows, cols, l) } else { (cols, rows, l) };
    for op_a in [Op::N, Op::T] {
        for op_b in [Op::N, Op::T] {
            for (alpha, beta) in [(1.0, 0.0), (0.0, 1.0), (0.0, 0.0), (0.7, 1.3)] {
                for (la, lb, lc) in [(R, R, R), (C, C, C), (R, C, C), (C, R, R)] {
                    let g = || Gemm::new().op_a(op_a).op_b(op_b).alpha(alpha).beta(beta);
                    let what = format!("op {op_a:?}{op_b:?} alpha={alpha} beta={beta} {la}/{lb}/{lc}");
                    let e = run_expecting_error(g(), stored(op_a, m, k, la), stored(op_b, k + 1, n, lb), (m, n, lc));
                    assert!(
                        matches!(
                            e,
                            Error::Shape(ShapeError::InnerDimension { a_rows: 5, a_cols: 3, b_rows: 4, b_cols: 4 })
                        ),
                        "{what}: {e:?}"
                    );
                    let e = run_expecting_error(g(), stored(op_a, m, k, la), stored(op_b, k, n, lb), (m + 1, n, lc));
                    assert!(
                        matches!(e, Error::Shape(ShapeError::Output { m: 5, n: 4, c_rows: 6, c_cols: 4 })),
                        "{what}: {e:?}"
                    );
                    let e = run_expecting_error(g(), stored(op_a, m, k, la), stored(op_b, k, n, lb), (m, n - 1, lc));
                    assert!(
                        matches!(e, Error::Shape(ShapeError::Output { m: 5, n: 4, c_rows: 5, c_cols: 3 })),
                        "{what}: {e:?}"
                    );
                    // m = 0 and k = 0 are no excuse.
                    let e = run_expecting_error(g(), stored(op_a, 0, k, la), stored(op_b, k + 2, n, lb), (0, n, lc));
                    assert!(
                        matches!(e, Error::Shape(ShapeError::InnerDimension { a_rows: 0, a_cols: 3, b_rows: 5, .. })),
                        "{what}: {e:?}"
                    );
                    let e = run_expecting_error(g(), stored(op_a, m, 0, la), stored(op_b, 0, n, lb), (n, m, lc));
                    assert!(
                        matches!(e, Error::Shape(ShapeError::Output { m: 5, n: 4, c_rows: 4, c_cols: 5 })),
                        "{what}: {e:?}"
                    );
                }
            }
        }
    }
    // The one-call functions, with transposed views: op(A) = A^T of a 3 x 5 A is 5 x 3.
    let a = Matrix::<f64>::zeros(3, 5);
    let b = Matrix::<f64>::zeros(4, 4);
    let before = guarded_c(5, 4, C);
    let mut parent = before.clone();
    let e = gemm::dgemm(a.t(), &b, parent.view_mut(1, 1, 5, 4).unwrap()).unwrap_err();
    assert!(matches!(e, Error::Shape(ShapeError::InnerDimension { a_rows: 5, a_cols: 3, b_rows: 4, .. })), "{e:?}");
    assert!(same_bits(parent.as_slice(), before.as_slice()));
    let x = Matrix::<f32>::zeros_in(5, 3, C);
    let mut z = vec![f32::GUARD; 40];
    let e = gemm::sgemm(&x, x.t(), MatMut::from_slice(&mut z, 5, 6, R, 6).unwrap()).unwrap_err();
    assert!(matches!(e, Error::Shape(ShapeError::Output { m: 5, n: 5, c_rows: 5, c_cols: 6 })), "{e:?}");
    assert!(z.iter().all(|x| x.to_bits() == f32::GUARD.to_bits()));
}

/// A sub-matrix reaching outside its parent, for each kind of view; the
/// numbers are relative to the matrix the view is taken of.
#[test]
fn views_outside_their_parent_are_rejected() {
    let mut parent = guarded_c(6, 5, C); // 8 x 7
    let before = parent.clone();
    let view_error = |e: Error| match e {
        Error::Shape(ShapeError::View { row, col, rows, cols, parent_rows, parent_cols }) => {
            (row, col, rows, cols, parent_rows, parent_cols)
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(view_error(parent.view(5, 0, 4, 1).unwrap_err()), (5, 0, 4, 1, 8, 7));
    assert_eq!(view_error(parent.view(0, 6, 1, 2).unwrap_err()), (0, 6, 1, 2, 8, 7));
    assert_eq!(view_error(parent.view(9, 0, 0, 0).unwrap_err()), (9, 0, 0, 0, 8, 7));
    assert_eq!(view_error(parent.view_mut(1, 1, 8, 1).unwrap_err()), (1, 1, 8, 1, 8, 7));
    assert_eq!(view_error(parent.view(usize::MAX, 0, 2, 1).unwrap_err()).0, usize::MAX);
    assert_eq!(view_error(parent.t().view(0, 0, 8, 7).unwrap_err()), (0, 0, 8, 7, 7, 8));
    let inner = parent.view(1, 1, 6, 5).unwrap();
    assert_eq!(view_error(inner.view(2, 2, 5, 1).unwrap_err()), (2, 2, 5, 1, 6, 5));
    let mut inner_mut = parent.view_mut(1, 1, 6, 5).unwrap();
    assert_eq!(view_error(inner_mut.view_mut(0, 4, 1, 2).unwrap_err()), (0, 4, 1, 2, 6, 5));
    assert_eq!(view_error(inner_mut.into_view(6, 0, 1, 1).unwrap_err()), (6, 0, 1, 1, 6, 5));
    // Views at the edge, empty ones included, are fine.
    assert!(parent.view(8, 7, 0, 0).is_ok() && parent.view(0, 0, 8, 7).is_ok() && parent.view(7, 6, 1, 1).is_ok());
    assert!(same_bits(parent.as_slice(), before.as_slice()));
}

/// Storage shorter than the shape needs, for each layout and leading dimension:
/// needed = (outer lines - 1) * ld + line.
#[test]
fn storage_too_short_is_rejected() {
    for layout in [R, C] {
        for pad in PADS {
            let (rows, cols) = (4, 3);
            let ld = common::ld_with_pad(rows, cols, layout, pad);
            let needed = required_len(rows, cols, layout, ld);
            let data = vec![f64::GUARD; needed - 1];
            let mut out = data.clone();
            let storage = |e: Error| match e {
                Error::Shape(ShapeError::Storage { rows, cols, layout, ld, needed, len, .. }) => {
                    (rows, cols, layout, ld, needed, len)
                }
                other => panic!("{other:?}"),
            };
            let want = (rows, cols, layout, ld, needed, needed - 1);
            assert_eq!(storage(MatRef::from_slice(&data, rows, cols, layout, ld).unwrap_err()), want);
            assert_eq!(storage(MatMut::from_slice(&mut out, rows, cols, layout, ld).unwrap_err()), want);
            assert_eq!(storage(Matrix::from_vec_in(rows, cols, layout, ld, data.clone()).unwrap_err()), want);
            assert!(same_bits(&out, &data));
            let full = vec![0.0f64; needed];
            assert!(MatRef::from_slice(&full, rows, cols, layout, ld).is_ok());
        }
    }
    let e = Matrix::<f32>::from_vec(3, 4, vec![0.0; 11]).unwrap_err();
    assert!(matches!(e, Error::Shape(ShapeError::Storage { needed: 12, len: 11, .. })), "{e:?}");
}

/// Dimensions and leading dimensions above BLAS's `int` (i32::MAX) are rejected.
#[test]
fn dimensions_above_the_blas_limit_are_rejected() {
    let max = i32::MAX as usize;
    let too_large = |e: Error| match e {
        Error::Shape(ShapeError::TooLarge { value, max, .. }) => (value, max),
        other => panic!("{other:?}"),
    };
    assert_eq!(too_large(MatRef::<f64>::from_slice(&[], max + 1, 0, R, 1).unwrap_err()), (max + 1, max));
    assert_eq!(too_large(MatRef::<f64>::from_slice(&[], 0, max + 1, C, 1).unwrap_err()), (max + 1, max));
    assert_eq!(too_large(MatRef::<f64>::from_slice(&[], 0, 0, R, max + 1).unwrap_err()), (max + 1, max));
    assert!(MatRef::<f64>::from_slice(&[], max, 0, R, 1).is_ok());
}

/// m = 0 or n = 0: nothing to compute, C (and around it) untouched, and no
/// GPU needed (BLAS's quick return); for every combination, whatever alpha
/// and beta, and also with k = 0.
#[test]
fn empty_products_touch_nothing() {
    for v in Variant::all() {
        for (alpha, beta) in [(1.0, 0.0), (0.7, 1.3), (0.0, 1.0)] {
            for (m, n, k) in [(0, 4, 3), (5, 0, 3), (0, 0, 0), (0, 4, 0)] {
                let stored = |op: Op, rows: usize, cols: usize| if op == Op::N { (rows, cols) } else { (cols, rows) };
                let (ar, ac) = stored(v.op_a, m, k);
                let (br, bc) = stored(v.op_b, k, n);
                let a = Matrix::<f64>::zeros_in(ar, ac, v.a);
                let b = Matrix::<f64>::zeros_in(br, bc, v.b);
                let before = guarded_c(m, n, v.c);
                let mut parent = before.clone();
                let g = Gemm::new().op_a(v.op_a).op_b(v.op_b).alpha(alpha).beta(beta);
                let r = g.run(&a, &b, parent.view_mut(1, 1, m, n).unwrap());
                assert!(r.is_ok(), "{v} alpha={alpha} beta={beta} {m}x{n}x{k}: {r:?}");
                assert!(same_bits(parent.as_slice(), before.as_slice()), "{v} {m}x{n}x{k}: C changed");
            }
        }
    }
}
