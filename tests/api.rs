//! The public API without a GPU: validation happens before the device is
//! touched, errors name the numbers, and C is left untouched. These run
//! everywhere (CI has no GPU); where a GPU is present the calls succeed and
//! the results are checked instead.

use gemm::{ConfigError, Error, Gemm, KernelConfig, Matrix, ShapeError, Stage};

fn poisoned(rows: usize, cols: usize) -> Matrix<f64> {
    Matrix::filled(rows, cols, f64::NAN)
}

fn same_bits(x: &Matrix<f64>, y: &Matrix<f64>) -> bool {
    x.as_slice().iter().zip(y.as_slice()).all(|(a, b)| a.to_bits() == b.to_bits())
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

#[test]
fn configurations_outside_the_menu_are_typed_errors() {
    let e = Gemm::new().tile_size(12).config().unwrap_err();
    assert!(matches!(e, Error::Config(ConfigError::TileSize { tile: 12, .. })), "{e:?}");
    assert_eq!(
        e.to_string(),
        "invalid configuration: stage 3 (smem-tiled) has no tile size 12; compiled tile sizes: [8, 16, 32]"
    );

    let e = Gemm::new().outputs_per_thread(3).config().unwrap_err();
    assert!(matches!(e, Error::Config(ConfigError::OutputsPerThread { outputs: 3, .. })), "{e:?}");

    let e = Gemm::new().tile_size(16).outputs_per_thread(4).config().unwrap_err();
    assert!(e.to_string().contains("stage 4 (outputs-per-thread) has no tile size 16"), "{e}");

    let e = Gemm::new().block_dim(64, 32).config().unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid configuration: block 64x32 has 2048 threads; at most 1024 are allowed per block"
    );

    let e = Gemm::new().stage(Stage::Naive).tile_size(8).config().unwrap_err();
    assert_eq!(e.to_string(), "invalid configuration: option `tile_size` does not apply to stage 1 (naive)");

    let e = Gemm::new().stage(Stage::SmemTiled).block_dim(8, 8).config().unwrap_err();
    assert!(matches!(e, Error::Config(ConfigError::OptionNotForStage { option: "block_dim", .. })));
}

#[test]
fn a_bad_configuration_fails_before_the_gpu_and_leaves_c() {
    let a = Matrix::<f64>::zeros(8, 8);
    let mut c = poisoned(8, 8);
    let before = c.clone();
    let e = Gemm::new().tile_size(64).run(&a, &a, &mut c).unwrap_err();
    assert!(matches!(e, Error::Config(_)), "{e:?}");
    assert!(same_bits(&c, &before));
}

#[test]
fn the_stage_follows_from_the_options() {
    assert_eq!(
        Gemm::new().tile_size(32).outputs_per_thread(8).config().unwrap(),
        KernelConfig::OutputsPerThread { tile: 32, outputs: 8 }
    );
    assert_eq!(Gemm::new().tile_size(16).config().unwrap(), KernelConfig::SmemTiled { tile: 16 });
    assert_eq!(
        Gemm::new().block_dim(16, 4).config().unwrap(),
        KernelConfig::Coalesced { block: gemm::BlockDim::new(16, 4) }
    );
    assert_eq!(
        Gemm::new().stage(Stage::Naive).block_dim(16, 4).config().unwrap(),
        KernelConfig::Naive { block: gemm::BlockDim::new(16, 4) }
    );
    assert_eq!(
        Gemm::new().stage(Stage::OutputsPerThread).outputs_per_thread(16).config().unwrap().stage(),
        Stage::OutputsPerThread
    );
    assert!(Gemm::new().config().is_ok());
}

#[test]
fn matrix_constructors_check_their_storage() {
    let e = Matrix::<f64>::from_vec(3, 4, vec![0.0; 11]).unwrap_err();
    assert!(matches!(e, Error::Shape(ShapeError::Storage { needed: 12, len: 11, .. })), "{e:?}");
    let e = Matrix::<f64>::from_vec_with_ld(3, 4, 3, vec![0.0; 100]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "leading dimension of the matrix is 3, but its rows hold 4 elements (need ld >= max(1, 4))"
    );
    let m = Matrix::<f64>::from_vec_with_ld(3, 4, 6, vec![1.0; 16]).unwrap();
    assert_eq!((m.rows(), m.cols(), m.ld()), (3, 4, 6));
    assert_eq!(m.get(2, 3), Some(1.0));
    assert_eq!(m.get(3, 0), None);
    let f = Matrix::<f32>::from_fn(2, 3, |i, j| (10 * i + j) as f32);
    assert_eq!(f.row(1), &[10.0, 11.0, 12.0]);
    assert_eq!(f[(1, 2)], 12.0);
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

/// A product with k = 0 has a reference of zeros; matrices without columns
/// have empty rows.
#[test]
fn k_zero_reference_and_empty_rows() {
    let a = gemm::check::random_matrix::<f64>(5, 0, 1);
    let b = gemm::check::random_matrix::<f64>(0, 3, 2);
    assert!(a.row(4).is_empty());
    let r = gemm::check::Reference::new(1.0, &a, &b, 0.0, &Matrix::zeros(5, 3));
    assert!(r.value.iter().all(|&x| x == 0.0));
}
