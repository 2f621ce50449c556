//! GPU tests of the BLAS contract across op flags and layouts: property
//! tests over random shapes, layouts, op flags, sub-matrix views, leading
//! dimensions, alpha, beta and stages; every op/layout combination against
//! cuBLAS at sizes near 1000; alpha = 0 and k = 0; the caller's stream and
//! cudarc buffers, and views of slices of the caller's arenas; overlapping
//! operands; bitwise determinism.
//!
//! Bounds: against the CPU reference (gemm::check::Reference, f64) and
//! against cuBLAS (Reference::from_cublas) each element must satisfy
//! `|C - C_ref| <= (k + 2) eps (|alpha| |A||B| + |beta| |C0|)` (eps = 2^-52
//! for f64, 2^-23 for f32; alpha and beta as the element type rounds them);
//! alpha = 0 and k = 0 must give beta * C0 rounded once in the element type,
//! exactly; repeated products must agree bit for bit. Storage outside C's
//! elements must come back bit for bit.
//!
//! They need an NVIDIA GPU: ignored by default, run with
//! `--include-ignored`; without a GPU they fail, never pass.

mod common;

use common::{device, first_changed, op_view, outside_view_unchanged, same_bits, seed, store, Bits, Variant};
use gemm::bench::Problem;
use gemm::check::{random_matrix, random_matrix_in, Reference};
use gemm::cublas::Cublas;
use gemm::tuning::registry::stage_configs;
use gemm::tuning::{BlockDim, KernelConfig, Stage};
use gemm::{DeviceMatrix, Element, Error, Gemm, Layout, MatRef, Matrix, Op, Precision, ShapeError};

const R: Layout = Layout::RowMajor;
const C: Layout = Layout::ColMajor;

/// Every configuration of a stage worth a random pick: the compiled menu,
/// for the naive stages the power-of-two block sweep plus two odd blocks.
fn configs(stage: Stage, precision: Precision) -> Vec<KernelConfig> {
    let mut all = stage_configs(stage, precision);
    for (x, y) in [(7, 13), (33, 31)] {
        match stage {
            Stage::Naive => all.push(KernelConfig::Naive { block: BlockDim::new(x, y) }),
            Stage::Coalesced => all.push(KernelConfig::Coalesced { block: BlockDim::new(x, y) }),
            _ => {}
        }
    }
    all
}

/// The stages an element type has kernels for (stage 8 is f64 only).
fn stages_for(precision: Precision) -> impl Iterator<Item = Stage> {
    Stage::ALL.into_iter().filter(move |&s| precision == Precision::F64 || s != Stage::TensorCore)
}

/// A `rows x cols` view at `(r0, c0)` of a random `(rows + er) x (cols + ec)`
/// matrix in `layout` with leading dimension `line + pad`, every element
/// from `value` (padding holds the guard).
fn parent_of<T: Bits>(
    (rows, cols): (usize, usize),
    (er, ec): (usize, usize),
    layout: Layout,
    pad: usize,
    mut value: impl FnMut(usize, usize) -> T,
) -> Matrix<T> {
    let logical = Matrix::from_fn(rows + er, cols + ec, &mut value);
    store(&logical, Op::N, layout, pad, T::GUARD)
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    /// One random product.
    #[derive(Clone, Debug)]
    pub struct Spec {
        m: usize,
        n: usize,
        k: usize,
        variant: usize,
        /// (extra rows, extra columns) of the parents of A, B and C.
        extra: [(usize, usize); 3],
        /// Offsets of the views, as fractions of the extra rows/columns (0..=4 quarters).
        at: [(usize, usize); 3],
        pads: [usize; 3],
        alpha: f64,
        beta: f64,
        pick: usize,
        double: bool,
        on_device: bool,
        seed: u64,
    }

    pub fn spec() -> impl Strategy<Value = Spec> {
        let dims = (1usize..300, 1usize..300, 0usize..300, 0usize..32);
        let views = (
            proptest::array::uniform3((0usize..6, 0usize..6)),
            proptest::array::uniform3((0usize..5, 0usize..5)),
            proptest::array::uniform3(0usize..9),
        );
        let scalars = (
            prop_oneof![Just(1.0), Just(-1.0), -2.0f64..2.0],
            prop_oneof![Just(0.0), Just(1.0), -2.0f64..2.0],
            0usize..64,
            any::<bool>(),
            any::<bool>(),
            any::<u64>(),
        );
        (dims, views, scalars).prop_map(
            |((m, n, k, variant), (extra, at, pads), (alpha, beta, pick, double, on_device, seed))| Spec {
                m,
                n,
                k,
                variant,
                extra,
                at,
                pads,
                alpha,
                beta,
                pick,
                double,
                on_device,
                seed,
            },
        )
    }

    /// Runs one spec with `stage` and checks it against the CPU reference
    /// (bound in the module docs) and the storage around C.
    pub fn check<T: Bits>(stage: Stage, s: &Spec) -> Result<(), TestCaseError> {
        let all = configs(stage, T::PRECISION);
        let config = all[s.pick % all.len()];
        let v = Variant::all()[s.variant];
        let (m, n, k) = (s.m, s.n, s.k);
        let mut rng = common::Rng::new(s.seed);
        let stored = |op: Op, rows: usize, cols: usize| if op == Op::N { (rows, cols) } else { (cols, rows) };
        let mut random = |_: usize, _: usize| T::from_f64(rng.uniform());
        let a_shape = stored(v.op_a, m, k);
        let b_shape = stored(v.op_b, k, n);
        let pa = parent_of(a_shape, s.extra[0], v.a, s.pads[0], &mut random);
        let pb = parent_of(b_shape, s.extra[1], v.b, s.pads[1], &mut random);
        // C's parent: random around the view; inside, NaN when beta = 0 (not read).
        let (cr, cc) = (s.at[2].0 * s.extra[2].0 / 4, s.at[2].1 * s.extra[2].1 / 4);
        let pc = parent_of((m, n), s.extra[2], v.c, s.pads[2], |i, j| {
            let inside = (cr..cr + m).contains(&i) && (cc..cc + n).contains(&j);
            if inside && s.beta == 0.0 {
                T::POISON
            } else {
                T::from_f64(rng.uniform())
            }
        });
        let at = |i: usize| (s.at[i].0 * s.extra[i].0 / 4, s.at[i].1 * s.extra[i].1 / 4);
        let (a_at, b_at) = (at(0), at(1));
        let a = pa.view(a_at.0, a_at.1, a_shape.0, a_shape.1).unwrap();
        let b = pb.view(b_at.0, b_at.1, b_shape.0, b_shape.1).unwrap();
        let c0 = pc.view(cr, cc, m, n).unwrap();
        let (alpha, beta) = (T::from_f64(s.alpha).as_f64(), T::from_f64(s.beta).as_f64());
        let reference = Reference::new(alpha, op_ref(a, v.op_a), op_ref(b, v.op_b), beta, c0);
        let g = gemm_for(config).op_a(v.op_a).op_b(v.op_b).alpha(s.alpha).beta(s.beta);
        let what =
            format!("{} {stage} {config} {v} {m}x{n}x{k} alpha={} beta={}", T::PRECISION.name(), s.alpha, s.beta);
        let after = if s.on_device {
            let dev = device();
            let (da, db) = (DeviceMatrix::from_host(&dev, &pa).unwrap(), DeviceMatrix::from_host(&dev, &pb).unwrap());
            let mut dc = DeviceMatrix::from_host(&dev, &pc).unwrap();
            let va = da.view(a_at.0, a_at.1, a_shape.0, a_shape.1).unwrap();
            let vb = db.view(b_at.0, b_at.1, b_shape.0, b_shape.1).unwrap();
            g.run_device(va, vb, dc.view_mut(cr, cc, m, n).unwrap()).unwrap_or_else(|e| panic!("{what}: {e}"));
            dc.to_host().unwrap()
        } else {
            let mut after = pc.clone();
            g.device(&device())
                .run(a, b, after.view_mut(cr, cc, m, n).unwrap())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            after
        };
        let cmp = reference.compare(after.view(cr, cc, m, n).unwrap());
        prop_assert!(cmp.passed(), "{}: {}", what, cmp);
        let outside = outside_view_unchanged(&pc, &after, (cr, cc), (m, n));
        prop_assert!(outside.is_ok(), "{}: {}", what, outside.unwrap_err());
        Ok(())
    }

    fn op_ref<T: Element>(x: MatRef<'_, T>, op: Op) -> MatRef<'_, T> {
        if op == Op::N {
            x
        } else {
            x.t()
        }
    }

    fn gemm_for(config: KernelConfig) -> Gemm {
        Gemm::new().kernel(config)
    }

    macro_rules! stage_props {
        ($($name:ident: $stage:expr;)*) => {
            proptest! {
                #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]
                $(
                    /// Random shapes, layouts, op flags, views, pads, alpha and beta for one stage.
                    #[test]
                    #[ignore = "needs an NVIDIA GPU"]
                    fn $name(s in spec()) {
                        if s.double || $stage == Stage::TensorCore {
                            check::<f64>($stage, &s)?;
                        } else {
                            check::<f32>($stage, &s)?;
                        }
                    }
                )*
            }
        };
    }

    stage_props! {
        prop_stage1_naive: Stage::Naive;
        prop_stage2_coalesced: Stage::Coalesced;
        prop_stage3_smem_tiled: Stage::SmemTiled;
        prop_stage4_outputs_per_thread: Stage::OutputsPerThread;
        prop_stage5_register_tiled: Stage::RegisterTiled;
        prop_stage6_vectorized: Stage::Vectorized;
        prop_stage7_pipelined: Stage::Pipelined;
        prop_stage8_tensor_core: Stage::TensorCore;
    }
}

/// The four op combinations.
const OPS: [(Op, Op); 4] = [(Op::N, Op::N), (Op::N, Op::T), (Op::T, Op::N), (Op::T, Op::T)];

/// Every op combination with A, B and C in one layout, through
/// `bench::Problem`, against cuBLAS, with the default kernel.
fn against_cublas_uniform<T: Element>() {
    let dev = device();
    let cublas = Cublas::new(&dev).unwrap();
    for (m, n, k) in [(1000, 999, 1001), (1023, 1025, 997)] {
        for ops in OPS {
            for layout in [R, C] {
                let mut p = Problem::<T>::random_with(&dev, m, n, k, ops, layout, seed()).unwrap();
                let r = p.reference(&cublas).unwrap();
                let g = p.default_gemm();
                let cmp = p.check_with(&r, &g).unwrap();
                let what = format!("{} {m}x{n}x{k} {} {layout}", T::PRECISION.name(), p.ops_name());
                assert!(cmp.passed(), "{what}: {cmp}");
            }
        }
    }
}

/// All 32 combinations of op flags and layouts of A, B and C (mixed
/// layouts included), against cuBLAS, with the default kernel.
fn against_cublas_every_combination<T: Element>() {
    let dev = device();
    let cublas = Cublas::new(&dev).unwrap();
    let (m, n, k) = (999, 1001, 1000);
    for v in Variant::all() {
        let stored = |op: Op, rows: usize, cols: usize| if op == Op::N { (rows, cols) } else { (cols, rows) };
        let (ar, ac) = stored(v.op_a, m, k);
        let (br, bc) = stored(v.op_b, k, n);
        let da = DeviceMatrix::from_host(&dev, &random_matrix_in::<T>(ar, ac, v.a, seed())).unwrap();
        let db = DeviceMatrix::from_host(&dev, &random_matrix_in::<T>(br, bc, v.b, seed())).unwrap();
        let r = Reference::from_cublas(&cublas, (v.op_a, &da), (v.op_b, &db), v.c).unwrap();
        let nan = Matrix::<T>::from_fn_in(m, n, v.c, |_, _| T::POISON);
        let mut dc = DeviceMatrix::from_host(&dev, &nan).unwrap();
        Gemm::new().op_a(v.op_a).op_b(v.op_b).run_device(&da, &db, &mut dc).unwrap();
        let cmp = r.compare(&dc.to_host().unwrap());
        assert!(cmp.passed(), "{} {m}x{n}x{k} {v}: {cmp}", T::PRECISION.name());
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn dgemm_against_cublas_each_op_and_layout() {
    against_cublas_uniform::<f64>();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn sgemm_against_cublas_each_op_and_layout() {
    against_cublas_uniform::<f32>();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn dgemm_against_cublas_mixed_layouts() {
    against_cublas_every_combination::<f64>();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn sgemm_against_cublas_mixed_layouts() {
    against_cublas_every_combination::<f32>();
}

/// alpha = 0 (A and B all NaN) or k = 0: C = beta * C0 rounded once in the
/// element type, exactly, for every stage, through host and device
/// matrices, in every op/layout combination in turn; beta = 0 with a NaN C0
/// gives zeros.
fn alpha_zero_and_k_zero<T: Bits>() {
    let dev = device();
    let (m, n) = (67, 45);
    let all = Variant::all();
    let mut turn = 0;
    for stage in stages_for(T::PRECISION) {
        for beta in [0.0, 1.0, -1.5] {
            for (alpha, k) in [(0.0, 33), (2.0, 0)] {
                for on_device in [false, true] {
                    let v = all[turn % all.len()];
                    turn += 7;
                    let stored =
                        |op: Op, rows: usize, cols: usize| if op == Op::N { (rows, cols) } else { (cols, rows) };
                    let (ar, ac) = stored(v.op_a, m, k);
                    let (br, bc) = stored(v.op_b, k, n);
                    let a = Matrix::<T>::from_fn_in(ar, ac, v.a, |_, _| T::POISON);
                    let b = Matrix::<T>::from_fn_in(br, bc, v.b, |_, _| T::POISON);
                    let c0 = if beta == 0.0 {
                        Matrix::<T>::from_fn_in(m, n, v.c, |_, _| T::POISON)
                    } else {
                        random_matrix_in::<T>(m, n, v.c, seed())
                    };
                    let g = Gemm::new().stage(stage).op_a(v.op_a).op_b(v.op_b).alpha(alpha).beta(beta);
                    let c = if on_device {
                        let (da, db) =
                            (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
                        let mut dc = DeviceMatrix::from_host(&dev, &c0).unwrap();
                        g.run_device(&da, &db, &mut dc).unwrap();
                        dc.to_host().unwrap()
                    } else {
                        let mut c = c0.clone();
                        g.device(&dev).run(&a, &b, &mut c).unwrap();
                        c
                    };
                    let beta_t = T::from_f64(beta);
                    for i in 0..m {
                        for j in 0..n {
                            let want = if beta == 0.0 { T::from_f64(0.0) } else { beta_t * c0[(i, j)] };
                            assert!(
                                c[(i, j)] == want,
                                "{} {stage} {v} alpha={alpha} k={k} beta={beta} device={on_device}: C({i}, {j}) = {:?}, \
                                 expected {want:?}",
                                T::PRECISION.name(),
                                c[(i, j)]
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn alpha_zero_reads_neither_a_nor_b_f64() {
    alpha_zero_and_k_zero::<f64>();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn alpha_zero_reads_neither_a_nor_b_f32() {
    alpha_zero_and_k_zero::<f32>();
}

/// The caller's stream and cudarc buffers: operands made with
/// `stream.clone_htod` and `DeviceMatrix::from_cuda_slice`, two products
/// queued on the caller's stream without a synchronization between them
/// (D = (alpha op(A) op(B) + beta C) E), then `stream.synchronize()`; also an
/// operand of the device's own stream used on the caller's. Bound as the
/// module's (the second product against the first's GPU result).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_callers_stream_and_buffers() {
    let dev = device();
    let s = dev.context().new_stream().unwrap();
    let a = random_matrix::<f64>(200, 300, seed()); // op(A) = A^T is 300 x 200
    let b = random_matrix_in::<f64>(200, 100, C, seed());
    let c0 = common::store(&random_matrix::<f64>(300, 100, seed()), Op::N, C, 5, f64::GUARD); // ld 305
    let e = random_matrix_in::<f64>(100, 64, C, seed());
    let da = DeviceMatrix::from_cuda_slice(&dev, s.clone_htod(a.as_slice()).unwrap(), 200, 300, R, 300).unwrap();
    let db = DeviceMatrix::from_cuda_slice(&dev, s.clone_htod(b.as_slice()).unwrap(), 200, 100, C, 200).unwrap();
    let mut dc = DeviceMatrix::from_cuda_slice(&dev, s.clone_htod(c0.as_slice()).unwrap(), 300, 100, C, 305).unwrap();
    let de = DeviceMatrix::from_host(&dev, &e).unwrap(); // on the device's stream
    let mut dd = DeviceMatrix::from_cuda_slice(&dev, s.alloc_zeros::<f64>(300 * 64).unwrap(), 300, 64, R, 64).unwrap();
    Gemm::new().op_a(Op::T).alpha(0.5).beta(2.0).stream(&s).run_device(&da, &db, &mut dc).unwrap();
    Gemm::new().stream(&s).run_device(&dc, &de, &mut dd).unwrap();
    s.synchronize().unwrap();
    let c = Matrix::from_vec_in(300, 100, C, 305, s.clone_dtoh(dc.buffer()).unwrap()).unwrap();
    let cmp = Reference::new(0.5, a.t(), &b, 2.0, &c0).compare(&c);
    assert!(cmp.passed(), "C: {cmp}");
    outside_view_unchanged(&c0, &c, (0, 0), (300, 100)).unwrap();
    let d = Matrix::from_vec_in(300, 64, R, 64, s.clone_dtoh(dd.buffer()).unwrap()).unwrap();
    let cmp = Reference::new(1.0, &c, &e, 0.0, &Matrix::zeros(300, 64)).compare(&d);
    assert!(cmp.passed(), "D: {cmp}");
    // The buffers go back to cudarc.
    assert_eq!(dd.into_cuda_slice().len(), 300 * 64);
}

/// A stream and a buffer of a `CudaContext` handle the caller opened
/// itself on the same GPU (`CudaContext::new(0)`: cudarc retains the same
/// primary context, in a new `Arc`) belong to the library's CUDA context and
/// must be accepted: the stream by `Gemm::stream`, the buffer by
/// `DeviceMatrix::from_cuda_slice`. Bound as the module's.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_stream_and_buffer_of_the_callers_own_context_handle() {
    let dev = device();
    let ctx = gemm::cudarc::driver::CudaContext::new(0).unwrap();
    assert!(*ctx == **dev.context(), "cudarc: not the same primary context");
    let s = ctx.new_stream().unwrap();
    let a = random_matrix::<f32>(64, 48, seed());
    let b = random_matrix::<f32>(48, 32, seed());
    let reference = Reference::new(1.0, &a, &b, 0.0, &Matrix::zeros(64, 32));
    let (da, db) = (DeviceMatrix::from_host(&dev, &a).unwrap(), DeviceMatrix::from_host(&dev, &b).unwrap());
    let mut problems = Vec::new();
    // The caller's stream, the library's buffers.
    let mut dc = DeviceMatrix::<f32>::zeros(&dev, 64, 32).unwrap();
    match Gemm::new().stream(&s).run_device(&da, &db, &mut dc) {
        Ok(()) => {
            s.synchronize().unwrap();
            let cmp = reference.compare(&dc.to_host().unwrap());
            assert!(cmp.passed(), "{cmp}");
        }
        Err(e) => problems.push(format!("a stream of the same context is refused: {e}")),
    }
    // The caller's buffer, the library's stream.
    match DeviceMatrix::from_cuda_slice(&dev, s.clone_htod(a.as_slice()).unwrap(), 64, 48, R, 48) {
        Ok(da2) => {
            let mut dc = DeviceMatrix::<f32>::zeros(&dev, 64, 32).unwrap();
            Gemm::new().run_device(&da2, &db, &mut dc).unwrap();
            let cmp = reference.compare(&dc.to_host().unwrap());
            assert!(cmp.passed(), "{cmp}");
        }
        Err(e) => problems.push(format!("a buffer of the same context is refused: {e}")),
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `DeviceView::from_cuda_view` and `DeviceViewMut::from_cuda_view_mut`
/// over slices of the caller's arenas (cudarc memory the library does not
/// own), on the caller's stream: A (row-major, padded) and B (column-major,
/// padded) one after the other in an input arena, C (column-major, padded)
/// in an output arena, each between guard values; one product reading C
/// (beta = 2), then a strided batch of three (A packed, B shared, C's
/// matrices with guards between them) through the same kind of views.
/// Bound as the module's; the input arena, and the output arena outside C's
/// elements (guards, padding, gaps), must come back bit for bit. Argument
/// errors: a leading dimension too small, a view too short.
fn products_on_views_of_the_callers_arenas<T: Bits>() {
    use gemm::{DeviceView, DeviceViewMut, Strided};
    const GAP: usize = 19; // guards between and around the operands
    let dev = device();
    let s = dev.context().new_stream().unwrap();
    let (m, n, k) = (70, 45, 33);
    let a = store(&random_matrix::<T>(m, k, seed()), Op::N, R, 3, T::GUARD); // ld k + 3
    let b = store(&random_matrix::<T>(k, n, seed()), Op::N, C, 1, T::GUARD); // ld k + 1
    let c0 = store(&random_matrix::<T>(m, n, seed()), Op::N, C, 2, T::GUARD); // ld m + 2
    let guards = [T::GUARD; GAP];
    // Input arena: guards, A, guards, B, guards.
    let mut input = guards.to_vec();
    let a_at = input.len();
    input.extend_from_slice(a.as_slice());
    input.extend_from_slice(&guards);
    let b_at = input.len();
    input.extend_from_slice(b.as_slice());
    input.extend_from_slice(&guards);
    // Output arena: guards, C, guards.
    let mut output = guards.to_vec();
    let c_at = output.len();
    output.extend_from_slice(c0.as_slice());
    output.extend_from_slice(&guards);
    let (a_len, b_len, c_len) = (a.as_slice().len(), b.as_slice().len(), c0.as_slice().len());
    let d_in = s.clone_htod(&input).unwrap();
    let mut d_out = s.clone_htod(&output).unwrap();
    {
        let av = DeviceView::from_cuda_view(&dev, d_in.slice(a_at..a_at + a_len), m, k, R, a.ld()).unwrap();
        let bv = DeviceView::from_cuda_view(&dev, d_in.slice(b_at..b_at + b_len), k, n, C, b.ld()).unwrap();
        let cv =
            DeviceViewMut::from_cuda_view_mut(&dev, d_out.slice_mut(c_at..c_at + c_len), m, n, C, c0.ld()).unwrap();
        Gemm::new().alpha(0.5).beta(2.0).stream(&s).run_device(av, bv, cv).unwrap();
    }
    let (input_after, output_after) = (s.clone_dtoh(&d_in).unwrap(), s.clone_dtoh(&d_out).unwrap());
    s.synchronize().unwrap();
    assert!(same_bits(&input_after, &input), "the input arena changed");
    let c = Matrix::from_vec_in(m, n, C, c0.ld(), output_after[c_at..c_at + c_len].to_vec()).unwrap();
    let cmp = Reference::new(0.5, &a, &b, 2.0, &c0).compare(&c);
    assert!(cmp.passed(), "C: {cmp}");
    outside_view_unchanged(&c0, &c, (0, 0), (m, n)).unwrap();
    assert!(
        same_bits(&output_after[..c_at], &guards) && same_bits(&output_after[c_at + c_len..], &guards),
        "the output arena changed outside C"
    );

    // A strided batch of three: A packed after guards (row-major, ld k),
    // B shared (stride 0), C's matrices `c_len + GAP` apart with guards
    // between them.
    let count = 3;
    let xs: Vec<Matrix<T>> = (0..count).map(|_| random_matrix::<T>(m, k, seed())).collect();
    let mut input = guards.to_vec();
    for x in &xs {
        input.extend_from_slice(x.as_slice());
    }
    input.extend_from_slice(&guards);
    let c_stride = c_len + GAP;
    let mut output = guards.to_vec();
    for _ in 0..count {
        output.extend_from_slice(c0.as_slice());
        output.extend_from_slice(&guards);
    }
    let d_x = s.clone_htod(&input).unwrap();
    let d_w = s.clone_htod(b.as_slice()).unwrap();
    let mut d_y = s.clone_htod(&output).unwrap();
    {
        let x0 = DeviceView::from_cuda_view(&dev, d_x.slice(GAP..GAP + count * m * k), m, k, R, k).unwrap();
        let w = DeviceView::from_cuda_view(&dev, d_w.slice(..), k, n, C, b.ld()).unwrap();
        let y0 = DeviceViewMut::from_cuda_view_mut(&dev, d_y.slice_mut(GAP..), m, n, C, c0.ld()).unwrap();
        Gemm::new()
            .alpha(0.5)
            .beta(2.0)
            .stream(&s)
            .run_strided_device(
                Strided::new(x0, count, m * k).unwrap(),
                Strided::new(w, count, 0).unwrap(),
                Strided::new(y0, count, c_stride).unwrap(),
            )
            .unwrap();
    }
    let (input_after, output_after) = (s.clone_dtoh(&d_x).unwrap(), s.clone_dtoh(&d_y).unwrap());
    s.synchronize().unwrap();
    assert!(same_bits(&input_after, &input), "the strided batch's input arena changed");
    let mut expect = output.clone(); // the guards, with each C_i's elements from the result
    for (i, x) in xs.iter().enumerate() {
        let at = GAP + i * c_stride;
        let ci = Matrix::from_vec_in(m, n, C, c0.ld(), output_after[at..at + c_len].to_vec()).unwrap();
        let cmp = Reference::new(0.5, x, &b, 2.0, &c0).compare(&ci);
        assert!(cmp.passed(), "C_{i}: {cmp}");
        for j in 0..n {
            let line = at + j * c0.ld();
            expect[line..line + m].copy_from_slice(&output_after[line..line + m]);
        }
    }
    assert_eq!(first_changed(&output_after, &expect), None, "the output arena changed outside the C_i");

    // Argument errors, before any device work.
    let ld_small = DeviceView::from_cuda_view(&dev, d_in.slice(..), m, k, R, k - 1).err();
    assert!(matches!(ld_small, Some(Error::Shape(ShapeError::LeadingDimension { .. }))), "{ld_small:?}");
    let short = DeviceView::from_cuda_view(&dev, d_in.slice(..a_len - 1), m, k, R, a.ld()).err();
    assert!(matches!(short, Some(Error::Shape(ShapeError::Storage { .. }))), "{short:?}");
    let short_mut = DeviceViewMut::from_cuda_view_mut(&dev, d_out.slice_mut(1..c_len), m, n, C, c0.ld()).err();
    assert!(matches!(short_mut, Some(Error::Shape(ShapeError::Storage { .. }))), "{short_mut:?}");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn products_on_views_of_the_callers_arenas_f64() {
    products_on_views_of_the_callers_arenas::<f64>();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn products_on_views_of_the_callers_arenas_f32() {
    products_on_views_of_the_callers_arenas::<f32>();
}

/// C overlapping A or B in device memory is refused before any launch
/// (`ShapeError::Overlap`), C untouched; disjoint blocks of the same
/// allocation are fine. Two `DeviceMatrix`es over one allocation cannot be
/// made with safe code, so the second handle is made with cudarc's
/// `upgrade_device_ptr` and leaked before it could free the memory twice.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn overlapping_operands_are_refused() {
    use gemm::cudarc::driver::DevicePtr;
    let dev = device();
    let s = dev.stream().clone();
    let (rows, cols) = (128, 64); // one row-major 128 x 64 allocation
    let host = random_matrix::<f64>(rows, cols, seed());
    let owner = s.clone_htod(host.as_slice()).unwrap();
    let ptr = {
        let (ptr, _sync) = owner.device_ptr(&s);
        ptr
    };
    // SAFETY: `alias` is a second handle to `owner`'s allocation; it is
    // leaked below (never freed), and every use of it is ordered on `s`.
    let alias = unsafe { s.upgrade_device_ptr::<f64>(ptr, rows * cols) };
    let a_all = DeviceMatrix::from_cuda_slice(&dev, owner, rows, cols, R, cols).unwrap();
    let mut c_all = DeviceMatrix::from_cuda_slice(&dev, alias, rows, cols, R, cols).unwrap();
    let b = DeviceMatrix::from_host(&dev, &random_matrix::<f64>(64, 64, seed())).unwrap();
    let b_host = b.to_host().unwrap();
    let mut overlapping = |g: Gemm, a_is_b: bool, c_row: usize| {
        let (view, c) = (a_all.view(0, 0, 64, 64).unwrap(), c_all.view_mut(c_row, 0, 64, 64));
        if a_is_b {
            g.run_device(&b, view, c.unwrap())
        } else {
            g.run_device(view, &b, c.unwrap())
        }
    };
    let outcomes = [
        // C = rows 32..96 overlaps rows 0..64, given as A and as B.
        overlapping(Gemm::new(), false, 32),
        overlapping(Gemm::new(), true, 32),
        // A transposed view of the overlapping block.
        overlapping(Gemm::new().op_a(Op::T), false, 0),
    ];
    let untouched = same_bits(c_all.to_host().unwrap().as_slice(), host.as_slice());
    // Disjoint rows of the same allocation: C = rows 64..128, A = rows 0..64.
    let disjoint =
        Gemm::new().run_device(a_all.view(0, 0, 64, 64).unwrap(), &b, c_all.view_mut(64, 0, 64, 64).unwrap());
    let after = c_all.to_host().unwrap();
    let _ = c_all.into_cuda_slice().leak(); // the owner frees the allocation
    drop(a_all);
    for (i, r) in outcomes.iter().enumerate() {
        assert!(
            matches!(r, Err(Error::Shape(ShapeError::Overlap { .. }))),
            "overlap {i} not refused: {:?}",
            r.as_ref().err()
        );
    }
    let operands: Vec<String> = outcomes
        .iter()
        .map(|r| match r {
            Err(Error::Shape(ShapeError::Overlap { operand })) => operand.to_string(),
            _ => String::new(),
        })
        .collect();
    assert_eq!(operands, ["A", "B", "A"]);
    assert!(untouched, "C changed by a refused call");
    disjoint.unwrap();
    let a_top = host.view(0, 0, 64, 64).unwrap();
    let cmp =
        Reference::new(1.0, a_top, &b_host, 0.0, &Matrix::zeros(64, 64)).compare(after.view(64, 0, 64, 64).unwrap());
    assert!(cmp.passed(), "{cmp}");
    assert!(same_bits(after.view(0, 0, 64, 64).unwrap().to_matrix().as_slice(), a_top.to_matrix().as_slice()));
}

/// The same product twice gives the same bits: every stage's default
/// configuration and the default kernel, f64 and f32, two op/layout
/// combinations, through host and device matrices.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn products_are_bitwise_deterministic() {
    fn twice<T: Bits>() {
        let dev = device();
        let (m, n, k) = (257, 191, 700);
        let a = random_matrix::<T>(m, k, seed());
        let b = random_matrix::<T>(k, n, seed());
        let c0 = random_matrix::<T>(m, n, seed());
        let builders: Vec<(String, Gemm)> = stages_for(T::PRECISION)
            .map(|s| (s.to_string(), Gemm::new().stage(s)))
            .chain([("default kernel".to_string(), Gemm::new())])
            .collect();
        for (name, g) in builders {
            for v in [Variant::NN, Variant { op_a: Op::T, op_b: Op::N, a: R, b: C, c: C }] {
                let (sa, sb) = (store(&a, v.op_a, v.a, 0, T::POISON), store(&b, v.op_b, v.b, 0, T::POISON));
                let g = g.clone().op_a(v.op_a).op_b(v.op_b).alpha(0.75).beta(-1.25).device(&dev);
                let run_host = || {
                    let mut c = store(&c0, Op::N, v.c, 0, T::POISON);
                    g.run(&sa, &sb, &mut c).unwrap();
                    c
                };
                let run_dev = || {
                    let (da, db) =
                        (DeviceMatrix::from_host(&dev, &sa).unwrap(), DeviceMatrix::from_host(&dev, &sb).unwrap());
                    let mut dc = DeviceMatrix::from_host(&dev, &store(&c0, Op::N, v.c, 0, T::POISON)).unwrap();
                    g.run_device(&da, &db, &mut dc).unwrap();
                    dc.to_host().unwrap()
                };
                let (h1, h2, d1) = (run_host(), run_host(), run_dev());
                assert!(same_bits(h1.as_slice(), h2.as_slice()), "{} {name} {v}: two runs differ", T::PRECISION.name());
                assert!(
                    same_bits(h1.as_slice(), d1.as_slice()),
                    "{} {name} {v}: host and device differ",
                    T::PRECISION.name()
                );
                let cmp = Reference::new(0.75, op_view(&sa, v.op_a), op_view(&sb, v.op_b), -1.25, &c0).compare(&h1);
                assert!(cmp.passed(), "{} {name} {v}: {cmp}", T::PRECISION.name());
            }
        }
    }
    twice::<f64>();
    twice::<f32>();
}
