//! Every type through every door, as a user writes it: the plans of three
//! type pairs, a bf16 mixture-of-experts layer as one grouped batch on the
//! caller's stream (8 experts, one with no rows), pointer-array batches of
//! f16 -> f16 and i8 -> i32, a strided batch of bf16 activations times one
//! shared bf16 weight into f32, a streamed f16 -> f32 host product under a
//! 16 MiB budget over 2 streams, and a product of views of the caller's own
//! cudarc buffers. Without a GPU the program ends with a readable error
//! (checked here on every machine); with one it runs and every result is
//! checked against a CPU reference (ignored test, `--include-ignored`).
//! Small integer inputs keep every product exact in f32 and i32, and in
//! f16 where the sums stay below 2048.

use gemm::half::{bf16, f16};
use gemm::{DeviceMatrix, DeviceView, DeviceViewMut, Error, Gemm, Layout, Matrix, Strided};

/// A small integer in -3..=3 from (seed, i, j).
fn int(seed: usize, i: usize, j: usize) -> f64 {
    ((i * 7 + j * 13 + seed * 5) % 7) as f64 - 3.0
}

/// `sum_p a(i, p) b(p, j)` over p < k.
fn dot(a: impl Fn(usize, usize) -> f64, b: impl Fn(usize, usize) -> f64, k: usize, i: usize, j: usize) -> f64 {
    (0..k).map(|p| a(i, p) * b(p, j)).sum()
}

/// What the program computed, for the checks: (what, got, want) of sampled
/// elements.
type Samples = Vec<(String, f64, f64)>;

fn program() -> Result<Samples, Error> {
    println!("{}", Gemm::new().plan_for::<bf16, f32>(4096, 1024, 4096)?);
    println!("{}", Gemm::new().plan_for::<i8, i32>(64, 4096, 4096)?);
    println!("{}", Gemm::new().allow_tf32(true).plan_for::<f32, f32>(4096, 4096, 4096)?);
    let mut samples = Samples::new();
    let dev = gemm::default_device()?;
    let stream = dev.context().new_stream()?;

    // A mixture-of-experts layer: 8 experts, rows routed to each (one none).
    let rows = [37, 0, 128, 5, 300, 64, 1, 200];
    let (n, k) = (96, 80);
    let x: Vec<Matrix<bf16>> =
        rows.iter().enumerate().map(|(e, &m)| Matrix::from_fn(m, k, |i, j| bf16::from_f64(int(e, i, j)))).collect();
    let w: Vec<Matrix<bf16>> =
        (0..8).map(|e| Matrix::from_fn(k, n, |i, j| bf16::from_f64(int(e + 20, i, j)))).collect();
    let dx: Vec<_> = x.iter().map(|m| DeviceMatrix::from_host(&dev, m)).collect::<Result<_, _>>()?;
    let dw: Vec<_> = w.iter().map(|m| DeviceMatrix::from_host(&dev, m)).collect::<Result<_, _>>()?;
    let mut dy: Vec<_> = rows.iter().map(|&m| DeviceMatrix::<f32>::zeros(&dev, m, n)).collect::<Result<_, _>>()?;
    {
        let xa: Vec<DeviceView<bf16>> = dx.iter().map(|m| m.as_view()).collect();
        let wa: Vec<DeviceView<bf16>> = dw.iter().map(|m| m.as_view()).collect();
        let mut ya: Vec<DeviceViewMut<f32>> = dy.iter_mut().map(|m| m.as_view_mut()).collect();
        Gemm::new().stream(&stream).run_grouped_device(&xa, &wa, &mut ya)?;
    }
    stream.synchronize()?;
    for (e, &m) in rows.iter().enumerate().filter(|(_, &m)| m > 0) {
        let y = dy[e].to_host()?;
        let (i, j) = (m - 1, n / 2);
        let want = dot(|i, p| x[e][(i, p)].to_f64(), |p, j| w[e][(p, j)].to_f64(), k, i, j);
        samples.push((format!("expert {e} C({i}, {j})"), y[(i, j)] as f64, want));
    }

    // Pointer-array batches: f16 -> f16 and i8 -> i32, 4 products of 64^3.
    let p: Vec<Matrix<f16>> = (0..4).map(|s| Matrix::from_fn(64, 64, |i, j| f16::from_f64(int(s, i, j)))).collect();
    let dp: Vec<_> = p.iter().map(|m| DeviceMatrix::from_host(&dev, m)).collect::<Result<_, _>>()?;
    let mut dq: Vec<_> = (0..4).map(|_| DeviceMatrix::<f16>::zeros(&dev, 64, 64)).collect::<Result<_, _>>()?;
    {
        let pa: Vec<DeviceView<f16>> = dp.iter().map(|m| m.as_view()).collect();
        let mut qa: Vec<DeviceViewMut<f16>> = dq.iter_mut().map(|m| m.as_view_mut()).collect();
        Gemm::new().run_batched_device(&pa, &pa, &mut qa)?;
    }
    let r: Vec<Matrix<i8>> = (0..4).map(|s| Matrix::from_fn(64, 64, |i, j| int(s, i, j) as i8)).collect();
    let dr: Vec<_> = r.iter().map(|m| DeviceMatrix::from_host(&dev, m)).collect::<Result<_, _>>()?;
    let mut ds: Vec<_> = (0..4).map(|_| DeviceMatrix::<i32>::zeros(&dev, 64, 64)).collect::<Result<_, _>>()?;
    {
        let ra: Vec<DeviceView<i8>> = dr.iter().map(|m| m.as_view()).collect();
        let mut sa: Vec<DeviceViewMut<i32>> = ds.iter_mut().map(|m| m.as_view_mut()).collect();
        Gemm::new().run_batched_device(&ra, &ra, &mut sa)?;
    }
    dev.synchronize()?;
    for s in 0..4 {
        let (q, t) = (dq[s].to_host()?, ds[s].to_host()?);
        let want = dot(|i, j| int(s, i, j), |i, j| int(s, i, j), 64, 5 + s, 60 - s);
        samples.push((format!("f16 product {s}"), q[(5 + s, 60 - s)].to_f64(), want));
        samples.push((format!("i8 product {s}"), t[(5 + s, 60 - s)] as f64, want));
    }

    // A strided batch: 8 x (32 x 1024) bf16 activations times one shared
    // 1024 x 256 bf16 weight, into f32.
    let acts: Vec<bf16> = (0..8 * 32 * 1024).map(|x| bf16::from_f64(int(1, x / 1024, x % 1024))).collect();
    let weight = Matrix::<bf16>::from_fn(1024, 256, |i, j| bf16::from_f64(int(2, i, j)));
    let mut out = vec![f32::NAN; 8 * 32 * 256];
    Gemm::new().run_strided(
        Strided::from_slice(&acts, 8, 32, 1024, Layout::RowMajor)?,
        Strided::new(weight.as_ref(), 8, 0)?,
        Strided::from_slice_mut(&mut out, 8, 32, 256, Layout::RowMajor)?,
    )?;
    for z in [0, 7] {
        let (i, j) = (31, 255 - z);
        let want = dot(|i, p| int(1, z * 32 + i, p), |p, j| int(2, p, j), 1024, i, j);
        samples.push((format!("strided product {z}"), out[z * 32 * 256 + i * 256 + j] as f64, want));
    }

    // A host product streamed through a 16 MiB budget on 2 streams.
    let a = Matrix::<f16>::from_fn(3000, 2000, |i, j| f16::from_f64(int(3, i, j)));
    let b = Matrix::<f16>::from_fn(2000, 3000, |i, j| f16::from_f64(int(4, i, j)));
    let mut c = Matrix::<f32>::filled(3000, 3000, f32::NAN);
    Gemm::new().memory_budget(16 << 20).host_streams(2).run(&a, &b, &mut c)?;
    for (i, j) in [(0, 0), (1499, 2001), (2999, 2999)] {
        let want = dot(|i, p| int(3, i, p), |p, j| int(4, p, j), 2000, i, j);
        samples.push((format!("streamed C({i}, {j})"), c[(i, j)] as f64, want));
    }

    // Views of the caller's own cudarc buffers: A and B in one arena.
    let host: Vec<f32> = (0..2 * 256 * 256).map(|x| int(5, x / 256, x % 256) as f32).collect();
    let arena = stream.clone_htod(&host)?;
    let mut out_arena = stream.alloc_zeros::<f32>(256 * 256)?;
    let av = DeviceView::from_cuda_view(&dev, arena.slice(0..256 * 256), 256, 256, Layout::RowMajor, 256)?;
    let bv = DeviceView::from_cuda_view(&dev, arena.slice(256 * 256..), 256, 256, Layout::RowMajor, 256)?;
    let cv = DeviceViewMut::from_cuda_view_mut(&dev, out_arena.slice_mut(..), 256, 256, Layout::RowMajor, 256)?;
    Gemm::new().stream(&stream).run_device(av, bv, cv)?;
    let got = stream.clone_dtoh(&out_arena)?;
    stream.synchronize()?;
    let want = dot(|i, p| int(5, i, p), |p, j| int(5, 256 + p, j), 256, 17, 200);
    samples.push(("arena C(17, 200)".into(), got[17 * 256 + 200] as f64, want));
    Ok(samples)
}

/// Without a GPU the program stops at its first device call with a typed,
/// readable error (the plans need none); with one, see below.
#[test]
fn without_a_gpu_the_program_ends_with_a_readable_error() {
    if gemm::default_device().is_ok() {
        return; // a GPU is here: `runs_and_is_right_on_a_gpu` covers it
    }
    let e = program().unwrap_err();
    assert!(matches!(e, Error::NoDriver | Error::NoDevice { .. }), "{e:?}");
    assert!(!format!("{e}").is_empty() && !format!("{e:?}").is_empty());
}

#[test]
#[ignore = "needs a GPU"]
fn runs_and_is_right_on_a_gpu() {
    let samples = program().unwrap();
    assert!(samples.len() >= 20, "{} samples", samples.len());
    for (what, got, want) in samples {
        assert_eq!(got, want, "{what}");
    }
}
