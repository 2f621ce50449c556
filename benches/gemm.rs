//! Criterion benchmark: `dgemm`/`sgemm` with the default kernel choice beside
//! cuBLAS on matrices already on the GPU (each sample synchronizes), at a few
//! sizes. Without a GPU it prints why and measures nothing.
//!
//! `cargo bench --bench gemm` (the full stage ladder with plots is
//! `cargo bench --bench ladder`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gemm::check::random_matrix;
use gemm::cublas::Cublas;
use gemm::{DeviceMatrix, Element, Gemm};

fn bench_precision<T: Element>(c: &mut Criterion) {
    let device = match gemm::default_device() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("gemm bench: no GPU ({e}); nothing measured");
            return;
        }
    };
    let cublas = Cublas::new(&device).expect("cuBLAS");
    let mut group = c.benchmark_group(format!("{}gemm", T::PRECISION.blas_prefix()));
    group.sample_size(20);
    for n in [1024usize, 4096] {
        let a = DeviceMatrix::from_host(&device, &random_matrix::<T>(n, n, 1)).expect("upload");
        let b = DeviceMatrix::from_host(&device, &random_matrix::<T>(n, n, 2)).expect("upload");
        let mut out = DeviceMatrix::<T>::zeros(&device, n, n).expect("alloc");
        group.throughput(Throughput::Elements((2 * n * n * n) as u64)); // flops per iteration
        group.bench_with_input(BenchmarkId::new("default", n), &n, |bench, _| {
            bench.iter(|| {
                Gemm::new().run_device(&a, &b, &mut out).expect("gemm");
                device.synchronize().expect("sync");
            })
        });
        group.bench_with_input(BenchmarkId::new("cublas", n), &n, |bench, _| {
            bench.iter(|| {
                cublas.gemm(1.0, &a, &b, 0.0, &mut out).expect("cublas");
                device.synchronize().expect("sync");
            })
        });
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    bench_precision::<f64>(c);
    bench_precision::<f32>(c);
}

criterion_group!(gemm_benches, benches);
criterion_main!(gemm_benches);
