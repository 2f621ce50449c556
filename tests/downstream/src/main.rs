use gemm::{Gemm, Matrix};
fn main() -> Result<(), gemm::Error> {
    let a = Matrix::<f64>::from_fn(300, 200, |i, j| (i as f64 - j as f64) / 7.0);
    let b = Matrix::<f64>::from_fn(200, 100, |i, j| ((i * j) % 5) as f64);
    let mut c = Matrix::<f64>::zeros(300, 100);
    gemm::dgemm(&a, &b, &mut c)?;
    Gemm::new().tile_size(32).outputs_per_thread(8).run(&a, &b, &mut c)?;
    let x = Matrix::<f32>::zeros(4, 4);
    let mut y = Matrix::<f32>::zeros(4, 4);
    gemm::sgemm(&x, &x, &mut y)?;
    Ok(())
}
