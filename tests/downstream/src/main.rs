use gemm::{DeviceMatrix, Gemm, Layout, MatMut, MatRef, Matrix, Op};

fn main() -> Result<(), gemm::Error> {
    // A is stored 200 x 300, row-major; op(A) = A^T is 300 x 200.
    let a = Matrix::<f64>::from_fn(200, 300, |i, j| (i as f64 - j as f64) / 9.0);
    // B is 200 x 100, stored column-major.
    let b = Matrix::<f64>::from_fn_col_major(200, 100, |i, j| ((i + j) % 7) as f64);
    assert_eq!(b.layout(), Layout::ColMajor);
    let mut c = Matrix::<f64>::zeros(300, 100);
    // BLAS style: C = 2 op(A) op(B) + 0.5 C.
    Gemm::new().op_a(Op::T).op_b(Op::N).alpha(2.0).beta(0.5).run(&a, &b, &mut c)?;
    // The same op(A) as a transposed view, through the one-call function.
    gemm::dgemm(a.t(), &b, &mut c)?;
    // Sub-matrices, no copies: C[0..50, 0..40] = A[10..60, 20..90] * B[0..70, 0..40].
    gemm::dgemm(a.view(10, 20, 50, 70)?, b.view(0, 0, 70, 40)?, c.view_mut(0, 0, 50, 40)?)?;
    // The caller's storage with leading dimensions; beta = 0, so the NaNs in z are never read.
    let x = vec![0.5f32; 64 * 48];
    let y = vec![0.25f32; 48 * 32];
    let mut z = vec![f32::NAN; 70 * 32];
    let xa = MatRef::from_slice(&x, 64, 48, Layout::RowMajor, 48)?;
    let yb = MatRef::from_slice(&y, 48, 32, Layout::ColMajor, 48)?;
    let zc = MatMut::from_slice(&mut z, 64, 32, Layout::ColMajor, 70)?;
    gemm::sgemm(xa, yb, zc)?;
    assert!(z[0] == 6.0 && z[69].is_nan()); // 48 * 0.5 * 0.25; z[64..70] is padding
    // Device operands from cudarc buffers, on the caller's stream, asynchronously.
    let dev = gemm::default_device()?;
    let stream = dev.context().new_stream()?;
    let da = DeviceMatrix::from_cuda_slice(&dev, stream.clone_htod(a.as_slice())?, 200, 300, Layout::RowMajor, 300)?;
    let db = DeviceMatrix::from_cuda_slice(&dev, stream.clone_htod(b.as_slice())?, 200, 100, Layout::ColMajor, 200)?;
    let mut dc = DeviceMatrix::<f64>::zeros(&dev, 300, 100)?;
    Gemm::new().op_a(Op::T).stream(&stream).run_device(&da, &db, &mut dc)?;
    stream.synchronize()?;
    assert_eq!(dc.to_host()?.rows(), 300);
    earlier_program()
}

/// The program this crate built before the BLAS options: the one-call
/// function on `Matrix` and a stage chosen with the builder's options.
fn earlier_program() -> Result<(), gemm::Error> {
    let a = Matrix::<f64>::from_fn(300, 200, |i, j| (i as f64 - j as f64) / 7.0);
    let b = Matrix::<f64>::from_fn(200, 100, |i, j| ((i * j) % 5) as f64);
    let mut c = Matrix::<f64>::zeros(300, 100);
    gemm::dgemm(&a, &b, &mut c)?;
    Gemm::new().tile_size(32).outputs_per_thread(8).run(&a, &b, &mut c)?;
    Ok(())
}
