//! The public API without a GPU: validation happens before the device is
//! touched, errors name the numbers, and C is left untouched. These run
//! everywhere (CI has no GPU); where a GPU is present the calls succeed and
//! the results are checked instead (bound: gemm::check's
//! |C - C_ref| <= (k + 2) eps (|alpha| |A||B| + |beta| |C0|) elementwise).

use gemm::tuning::{BlockDim, ConfigError, KernelConfig, Stage};
use gemm::{Error, Gemm, Layout, MatRef, Matrix, Op, Precision, ShapeError};

fn poisoned(rows: usize, cols: usize) -> Matrix<f64> {
    Matrix::filled(rows, cols, f64::NAN)
}

fn same_bits(x: &Matrix<f64>, y: &Matrix<f64>) -> bool {
    x.as_slice().len() == y.as_slice().len()
        && x.as_slice().iter().zip(y.as_slice()).all(|(a, b)| a.to_bits() == b.to_bits())
}

/// The configuration the builder's options choose for f64.
fn chosen(g: Gemm) -> Result<Option<KernelConfig>, Error> {
    g.chosen_config(Precision::F64)
}

#[test]
fn mismatched_inner_dimension_is_named_and_c_untouched() {
    let a = Matrix::<f64>::zeros(300, 200);
    let b = Matrix::<f64>::zeros(199, 100);
    let mut c = poisoned(300, 100);
    let before = c.clone();
    let err = gemm::dgemm(&a, &b, &mut c).unwrap_err();
    assert!(
        matches!(err, Error::Shape(ShapeError::InnerDimension { a_rows: 300, a_cols: 200, b_rows: 199, b_cols: 100 })),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "shape mismatch: A is 300x200 but B is 199x100 (A's columns must equal B's rows)");
    // Debug prints the message too (for `fn main() -> Result<(), gemm::Error>`).
    assert_eq!(format!("{err:?}"), err.to_string());
    assert!(same_bits(&c, &before));
}

#[test]
fn mismatched_output_is_named() {
    let a = Matrix::<f32>::zeros(4, 5);
    let b = Matrix::<f32>::zeros(5, 6);
    let mut c = Matrix::<f32>::zeros(4, 7);
    let err = gemm::sgemm(&a, &b, &mut c).unwrap_err();
    assert_eq!(err.to_string(), "shape mismatch: A*B is 4x6 but C is 4x7");
}

/// The op flags apply before the shapes are compared: op(A) = A^T of a
/// 200 x 300 A is 300 x 200.
#[test]
fn op_flags_apply_before_the_shape_check() {
    let a = Matrix::<f64>::zeros(200, 300);
    let b = Matrix::<f64>::zeros(201, 100);
    let mut c = poisoned(300, 100);
    let before = c.clone();
    let err = Gemm::new().op_a(Op::T).run(&a, &b, &mut c).unwrap_err();
    assert!(
        matches!(err, Error::Shape(ShapeError::InnerDimension { a_rows: 300, a_cols: 200, b_rows: 201, b_cols: 100 })),
        "{err:?}"
    );
    // The same through a transposed view.
    let err = gemm::dgemm(a.t(), &b, &mut c).unwrap_err();
    assert!(matches!(err, Error::Shape(ShapeError::InnerDimension { a_rows: 300, b_rows: 201, .. })), "{err:?}");
    assert!(same_bits(&c, &before));
}

#[test]
fn configurations_outside_the_menu_are_typed_errors() {
    let e = chosen(Gemm::new().tile_size(12)).unwrap_err();
    assert!(matches!(e, Error::Config(ConfigError::TileSize { tile: 12, .. })), "{e:?}");
    assert_eq!(
        e.to_string(),
        "invalid configuration: stage 3 (smem-tiled) has no tile size 12; compiled tile sizes: [8, 16, 32]"
    );

    let e = chosen(Gemm::new().outputs_per_thread(3)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Config(ConfigError::OutputsPerThread { outputs: 3, .. })
                | Error::ConfigWithDefaults { error: ConfigError::OutputsPerThread { outputs: 3, .. }, .. }
        ),
        "{e:?}"
    );

    let e = chosen(Gemm::new().tile_size(16).outputs_per_thread(4)).unwrap_err();
    assert!(e.to_string().contains("stage 4 (outputs-per-thread) has no tile size 16"), "{e}");

    let e = chosen(Gemm::new().block_dim(64, 32)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid configuration: block 64x32 has 2048 threads; at most 1024 are allowed per block"
    );

    let e = chosen(Gemm::new().stage(Stage::Naive).tile_size(8)).unwrap_err();
    assert_eq!(e.to_string(), "invalid configuration: option `tile_size` does not apply to stage 1 (naive)");

    let e = chosen(Gemm::new().stage(Stage::SmemTiled).block_dim(8, 8)).unwrap_err();
    assert!(matches!(e, Error::Config(ConfigError::OptionNotForStage { option: "block_dim", .. })), "{e:?}");

    let e = chosen(Gemm::new().stage(Stage::TensorCore).pipeline_depth(1)).unwrap_err();
    assert!(e.to_string().contains("depth"), "{e}");

    // Stage 8 is compiled for f64 only.
    let e = Gemm::new().stage(Stage::TensorCore).chosen_config(Precision::F32).unwrap_err();
    assert!(matches!(e, Error::NoKernel { precision: Precision::F32, .. }), "{e:?}");
}

#[test]
fn a_bad_configuration_fails_before_the_gpu_and_leaves_c() {
    let a = Matrix::<f64>::zeros(8, 8);
    let mut c = poisoned(8, 8);
    let before = c.clone();
    let e = Gemm::new().tile_size(64).run(&a, &a, &mut c).unwrap_err();
    assert!(matches!(e, Error::Config(_) | Error::ConfigWithDefaults { .. }), "{e:?}");
    assert!(same_bits(&c, &before));
}

#[test]
fn the_stage_follows_from_the_options() {
    assert_eq!(
        chosen(Gemm::new().tile_size(32).outputs_per_thread(8)).unwrap(),
        Some(KernelConfig::OutputsPerThread { tile: 32, outputs: 8 })
    );
    assert_eq!(chosen(Gemm::new().tile_size(16)).unwrap(), Some(KernelConfig::SmemTiled { tile: 16 }));
    assert_eq!(
        chosen(Gemm::new().block_dim(16, 4)).unwrap(),
        Some(KernelConfig::Coalesced { block: BlockDim::new(16, 4) })
    );
    assert_eq!(
        chosen(Gemm::new().stage(Stage::Naive).block_dim(16, 4)).unwrap(),
        Some(KernelConfig::Naive { block: BlockDim::new(16, 4) })
    );
    assert_eq!(
        chosen(Gemm::new().stage(Stage::OutputsPerThread).outputs_per_thread(16)).unwrap().map(|c| c.stage()),
        Some(Stage::OutputsPerThread)
    );
    assert_eq!(
        chosen(Gemm::new().stage(Stage::Pipelined).pipeline_depth(4)).unwrap().map(|c| c.stage()),
        Some(Stage::Pipelined)
    );
    // The BLAS options choose no kernel: the plan does, per problem.
    assert_eq!(chosen(Gemm::new()).unwrap(), None);
    assert_eq!(chosen(Gemm::new().op_a(Op::T).op_b(Op::T).alpha(2.0).beta(0.5)).unwrap(), None);
    let chosen_plan = Gemm::new().tile_size(16).config_for(Precision::F64, 10, 20, 30).unwrap();
    assert_eq!(chosen_plan, KernelConfig::SmemTiled { tile: 16 });
    // Without options the plan is a compiled configuration.
    let planned = Gemm::new().config_for(Precision::F32, 100, 100, 100).unwrap();
    assert!(gemm::tuning::registry::entry_point(Precision::F32, planned).is_ok(), "{planned}");
}

#[test]
fn matrix_constructors_check_their_storage() {
    let e = Matrix::<f64>::from_vec(3, 4, vec![0.0; 11]).unwrap_err();
    assert!(matches!(e, Error::Shape(ShapeError::Storage { needed: 12, len: 11, .. })), "{e:?}");
    let e = Matrix::<f64>::from_vec_with_ld(3, 4, 3, vec![0.0; 100]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "leading dimension of the matrix is 3, but it is row-major with 4 elements per row (need ld >= max(1, 4))"
    );
    let e = Matrix::<f64>::from_vec_in(5, 4, Layout::ColMajor, 4, vec![0.0; 100]).unwrap_err();
    assert!(
        matches!(e, Error::Shape(ShapeError::LeadingDimension { ld: 4, layout: Layout::ColMajor, min: 5, .. })),
        "{e:?}"
    );
    let m = Matrix::<f64>::from_vec_with_ld(3, 4, 6, vec![1.0; 16]).unwrap();
    assert_eq!((m.rows(), m.cols(), m.ld(), m.layout()), (3, 4, 6, Layout::RowMajor));
    assert_eq!(m.get(2, 3), Some(1.0));
    assert_eq!(m.get(3, 0), None);
    let f = Matrix::<f32>::from_fn(2, 3, |i, j| (10 * i + j) as f32);
    assert_eq!(&f.as_slice()[3..6], &[10.0, 11.0, 12.0]);
    assert_eq!(f[(1, 2)], 12.0);
    let g = Matrix::<f32>::from_fn_col_major(2, 3, |i, j| (10 * i + j) as f32);
    assert_eq!(g.as_slice(), &[0.0, 10.0, 1.0, 11.0, 2.0, 12.0]);
    assert_eq!((g.layout(), g.ld()), (Layout::ColMajor, 2));
    // A transposed view is the other layout over the same storage.
    let t = f.t();
    assert_eq!((t.rows(), t.cols(), t.layout(), t.ld()), (3, 2, Layout::ColMajor, 3));
    assert_eq!(t.get(2, 1), Some(12.0));
    // Views of a caller's slice.
    let x = [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0];
    let v = MatRef::from_slice(&x, 2, 2, Layout::ColMajor, 3).unwrap();
    assert_eq!((v.get(0, 1), v.get(1, 0)), (Some(4.0), Some(2.0)));
    let e = MatRef::from_slice(&x, 3, 2, Layout::ColMajor, 4).unwrap_err();
    assert!(matches!(e, Error::Shape(ShapeError::Storage { needed: 7, len: 6, .. })), "{e:?}");
    let e = m.view(2, 1, 2, 3).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Shape(ShapeError::View { row: 2, col: 1, rows: 2, cols: 3, parent_rows: 3, parent_cols: 4 })
        ),
        "{e:?}"
    );
}

/// Without a driver or GPU the call is a typed error, never a panic, and C is
/// untouched; with a GPU it must be right.
#[test]
fn without_a_gpu_the_call_is_a_typed_error() {
    let a = Matrix::<f64>::from_fn(30, 20, |i, j| (i as f64 - j as f64) / 7.0);
    let b = Matrix::<f64>::from_fn(20, 10, |i, j| ((i * j) % 5) as f64);
    let mut c = poisoned(30, 10);
    let before = c.clone();
    match gemm::dgemm(&a, &b, &mut c) {
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            assert!(same_bits(&c, &before), "C changed after {e}");
            assert!(!e.to_string().is_empty());
        }
        Err(other) => panic!("unexpected error: {other}"),
        Ok(()) => {
            let r = gemm::check::Reference::new(1.0, &a, &b, 0.0, &before);
            let cmp = r.compare(&c);
            assert!(cmp.passed(), "{cmp}");
        }
    }
}

/// The CPU reference and its bound: a perturbation by 2 bound-widths fails,
/// the exact value passes, NaN fails.
#[test]
fn the_reference_check_can_fail() {
    let a = gemm::check::random_matrix::<f32>(17, 9, 1);
    let b = gemm::check::random_matrix::<f32>(9, 5, 2);
    let c0 = Matrix::<f32>::zeros(17, 5);
    let r = gemm::check::Reference::new(1.0, &a, &b, 0.0, &c0);
    let exact = Matrix::<f32>::from_fn(17, 5, |i, j| r.value[i * 5 + j] as f32);
    assert!(r.compare(&exact).passed());
    let mut off = exact.clone();
    off[(3, 4)] = (r.value[3 * 5 + 4] + 2.0 * r.bound[3 * 5 + 4] + 1e-6) as f32;
    assert!(!r.compare(&off).passed());
    let mut nan = exact.clone();
    nan[(16, 0)] = f32::NAN;
    let cmp = r.compare(&nan);
    assert_eq!(cmp.non_finite, 1);
    assert!(!cmp.passed());
}

/// The reference of a transposed operand (pass `a.t()`: op already applied)
/// equals the reference of the explicitly transposed copy, exactly.
#[test]
fn the_reference_takes_transposed_views() {
    let a = gemm::check::random_matrix::<f64>(7, 5, 3); // op(A) = A^T is 5 x 7
    let b = gemm::check::random_matrix_in::<f64>(7, 4, Layout::ColMajor, 4);
    let at = Matrix::<f64>::from_fn(5, 7, |i, j| a[(j, i)]);
    let c0 = gemm::check::random_matrix::<f64>(5, 4, 5);
    let r1 = gemm::check::Reference::new(0.5, a.t(), &b, 2.0, &c0);
    let r2 = gemm::check::Reference::new(0.5, &at, &b, 2.0, &c0);
    assert_eq!(r1.value, r2.value);
    assert_eq!(r1.bound, r2.bound);
}

/// A product with k = 0 has a reference of beta * C0; matrices without
/// columns have no storage.
#[test]
fn k_zero_reference_and_empty_matrices() {
    let a = gemm::check::random_matrix::<f64>(5, 0, 1);
    let b = gemm::check::random_matrix::<f64>(0, 3, 2);
    assert!(a.as_slice().is_empty());
    assert_eq!(a.get(4, 0), None);
    let r = gemm::check::Reference::new(1.0, &a, &b, 0.0, &Matrix::zeros(5, 3));
    assert!(r.value.iter().all(|&x| x == 0.0));
    let r = gemm::check::Reference::new(1.0, &a, &b, 0.5, &Matrix::filled(5, 3, 4.0));
    assert!(r.value.iter().all(|&x| x == 2.0));
}

#[test]
fn split_k_is_planned_and_explained() {
    // Without a GPU the plan is made for the measured device (an H200 where
    // the model needs one); with a GPU for that GPU. Either way a 64 x 64 C
    // with k = 65536 fills few SMs and is split; a big square is not.
    let plan = Gemm::new().plan(Precision::F64, 64, 64, 65_536).unwrap();
    assert!(plan.split_k > 1, "{plan}");
    assert!(plan.to_string().contains("split-K"), "{plan}");
    let plan = Gemm::new().plan(Precision::F32, 8192, 8192, 8192).unwrap();
    assert_eq!(plan.split_k, 1, "{plan}");
    // Asked for: taken as given, and said so.
    let plan = Gemm::new().split_k(6).plan(Precision::F64, 100, 100, 100).unwrap();
    assert_eq!((plan.split_k, plan.split), (6, gemm::tuning::SplitReason::Chosen));
    assert!(plan.to_string().ends_with("; split-K 6 (chosen)"), "{plan}");
    // A chosen kernel is not split unless asked.
    let plan = Gemm::new().stage(Stage::Pipelined).plan(Precision::F32, 64, 64, 65_536).unwrap();
    assert_eq!(plan.split_k, 1, "{plan}");
    // No slices at all is a typed error.
    let e = Gemm::new().split_k(0).plan(Precision::F64, 10, 10, 10).unwrap_err();
    assert!(matches!(e, Error::SplitK { slices: 0, .. }), "{e}");
    assert_eq!(e.to_string(), "split-K into 0 slices is not possible: a product needs at least one slice of k");
}
