use gemm::{DeviceMatrix, Gemm, Layout, MatMut, MatRef, Matrix, Op};

fn main() -> Result<(), gemm::Error> {
    // A is stored 200 x 300, row-major; B is 200 x 100, column-major.
    let a = Matrix::<f64>::from_fn(200, 300, |i, j| (i as f64 - j as f64) / 9.0);
    let b = Matrix::<f64>::from_fn_col_major(200, 100, |i, j| ((i + j) % 7) as f64);
    let mut c = Matrix::<f64>::zeros(300, 100);
    gemm::dgemm(a.t(), &b, &mut c)?; // C = A^T B: a transposed view, no copy
    Gemm::new().op_a(Op::T).alpha(2.0).beta(0.5).run(&a, &b, &mut c)?; // C = 2 A^T B + 0.5 C
    // Sub-matrices, no copies: C[0..50, 0..40] = A[10..60, 20..90] B[0..70, 0..40].
    gemm::dgemm(a.view(10, 20, 50, 70)?, b.view(0, 0, 70, 40)?, c.view_mut(0, 0, 50, 40)?)?;

    // Your own slices with leading dimensions; beta = 0, so z's NaNs are never read.
    let x = vec![0.5f32; 64 * 48];
    let y = vec![0.25f32; 48 * 32];
    let mut z = vec![f32::NAN; 70 * 32];
    gemm::sgemm(
        MatRef::from_slice(&x, 64, 48, Layout::RowMajor, 48)?,
        MatRef::from_slice(&y, 48, 32, Layout::ColMajor, 48)?,
        MatMut::from_slice(&mut z, 64, 32, Layout::ColMajor, 70)?, // 64 x 32 in 70-element columns
    )?;
    assert!(z[0] == 6.0 && z[69].is_nan()); // 48 * 0.5 * 0.25; z[64..70] is padding

    // Device matrices, one made from a cudarc buffer, on your stream, without waiting.
    let dev = gemm::default_device()?;
    let stream = dev.context().new_stream()?;
    let da = DeviceMatrix::from_cuda_slice(&dev, stream.clone_htod(a.as_slice())?, 200, 300, Layout::RowMajor, 300)?;
    let db = DeviceMatrix::from_host(&dev, &b)?;
    let mut dc = DeviceMatrix::<f64>::zeros(&dev, 300, 100)?;
    Gemm::new().op_a(Op::T).stream(&stream).run_device(&da, &db, &mut dc)?;
    stream.synchronize()?;
    println!("C[0, 0] = {}", dc.to_host()?[(0, 0)]);
    println!("{}", Gemm::new().op_a(Op::T).plan_for::<f64, f64>(300, 100, 200)?); // which kernel, and why
    Ok(())
}
