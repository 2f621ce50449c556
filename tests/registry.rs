//! The host's list of entry points agrees with the PTX, for every target
//! architecture and every storage order of A and B (one module each).

use gemm::tuning::registry::{entry_point, stage_configs, ENTRY_POINTS};
use gemm::tuning::{KernelLayouts, PlanSource, Stage};
use gemm::{Gemm, Precision};
use std::collections::BTreeSet;

const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

#[test]
fn there_is_one_module_per_architecture_and_layouts() {
    let modules: BTreeSet<(&str, &str)> =
        gemm::tuning::ptx::ALL.iter().map(|&(arch, suffix, _)| (arch, suffix)).collect();
    assert_eq!(modules.len(), gemm::tuning::ptx::ALL.len(), "a module is listed twice");
    let expected: BTreeSet<(&str, &str)> =
        ARCHS.iter().flat_map(|&arch| KernelLayouts::ALL.iter().map(move |l| (arch, l.suffix()))).collect();
    assert_eq!(modules, expected);
    for arch in ARCHS {
        for layouts in KernelLayouts::ALL {
            assert!(gemm::tuning::ptx::module(arch, layouts).is_some(), "{arch} {}", layouts.suffix());
        }
    }
    assert!(gemm::tuning::ptx::module("sm_70", KernelLayouts::NN).is_none());
    // The suffixes and indices of the layouts.
    let suffixes: Vec<_> = KernelLayouts::ALL.iter().map(|l| l.suffix()).collect();
    assert_eq!(suffixes, ["nn", "nt", "tn", "tt"]);
    for (i, l) in KernelLayouts::ALL.iter().enumerate() {
        assert_eq!(l.index(), i);
    }
}

#[test]
fn registry_and_ptx_list_the_same_entry_points() {
    let names: BTreeSet<&str> = ENTRY_POINTS.iter().map(|e| e.name).collect();
    assert_eq!(names.len(), ENTRY_POINTS.len(), "duplicate names in the registry");
    // Every entry point, and the separate batched entry points of the stages that keep one.
    // ... and the split-K reduction and the pack copy of each precision.
    let reductions = [Precision::F64, Precision::F32].map(gemm::tuning::split_k::reduce_entry);
    let packs = [Precision::F64, Precision::F32].map(gemm::tuning::pack::pack_entry);
    let registry: BTreeSet<&str> =
        ENTRY_POINTS.iter().flat_map(|e| [e.name, e.batched_name]).chain(reductions).chain(packs).collect();
    let twins = ENTRY_POINTS.iter().filter(|e| e.batched_name != e.name).count();
    assert!(
        twins > 0
            && ENTRY_POINTS.iter().all(|e| e.batched_name == e.name
                || (e.batched_name == format!("{}_batched", e.name)
                    && gemm::tuning::separate_batched_entry(e.stage(), e.precision)))
    );
    for &(arch, suffix, ptx) in gemm::tuning::ptx::ALL {
        assert!(ptx.contains(&format!(".target {arch}")), "{arch}_{suffix}: the PTX targets another architecture");
        let in_ptx: BTreeSet<&str> = gemm::tuning::ptx::entry_names(ptx).into_iter().collect();
        // Stage 8's mixed-precision kernels (tf32 and i8 in `nt` alone) and
        // the transposes of their MN-major tf32 and i8 operands.
        let mixed = gemm::tuning::MMA_KERNELS.iter().filter(|k| k.types.transposes() || suffix == "nt").map(|k| k.name);
        let expected: BTreeSet<&str> =
            registry.iter().copied().chain(mixed).chain(["transpose_b32", "transpose_b8"]).collect();
        assert_eq!(in_ptx, expected, "{arch}_{suffix}: PTX entry points differ from the registry");
    }
}

#[test]
fn every_menu_configuration_has_an_entry_point_named_for_it() {
    for precision in [Precision::F32, Precision::F64] {
        for stage in Stage::ALL {
            for config in stage_configs(stage, precision) {
                let e = entry_point(precision, config).unwrap_or_else(|err| panic!("{config:?}: {err}"));
                assert_eq!(e.stage(), stage);
                assert!(
                    e.name.starts_with(&format!("{}gemm_{}", precision.blas_prefix(), stage.symbol())),
                    "{}",
                    e.name
                );
            }
        }
    }
}

/// `.stage(s)` alone runs the stage's default configuration, which must be
/// compiled for both precisions (stage 5's f64 default once named a kernel
/// that had left the menu).
#[test]
fn every_stage_default_is_compiled() {
    for precision in [Precision::F32, Precision::F64] {
        for stage in Stage::ALL {
            if stage == Stage::TensorCore && precision == Precision::F32 {
                continue; // stage 8 is f64 only
            }
            let config = gemm::tuning::stage_default(stage, precision);
            entry_point(precision, config)
                .unwrap_or_else(|e| panic!("{stage:?} {precision:?} default {config:?}: {e}"));
        }
    }
}

#[test]
fn ptx_for_each_architecture() {
    assert_eq!(gemm::tuning::ptx::arch_for(9, 0), Some("sm_90"));
    assert_eq!(gemm::tuning::ptx::arch_for(10, 0), Some("sm_90"));
    assert_eq!(gemm::tuning::ptx::arch_for(8, 6), Some("sm_80"));
    assert_eq!(gemm::tuning::ptx::arch_for(8, 0), Some("sm_80"));
    assert_eq!(gemm::tuning::ptx::arch_for(7, 5), None);
}

/// A newcomer finds each stage's kernel and example by the stage's name.
#[test]
fn every_stage_has_its_kernel_module_and_example() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for stage in Stage::ALL {
        let kernel = root.join(format!("gemm-kernels/src/s{}.rs", stage.file_stem()));
        let example = root.join(format!("examples/{}.rs", stage.file_stem()));
        assert!(kernel.is_file(), "{stage}: missing {}", kernel.display());
        assert!(example.is_file(), "{stage}: missing {}", example.display());
        assert!(stage.file_stem().starts_with(&format!("{:02}_", stage.number())));
    }
}

/// Every row of the generated default-choice table names a compiled kernel of
/// its precision, so the plan never falls back silently.
#[test]
fn tuning_table_names_compiled_kernels() {
    assert!(!gemm::tuning::measured().is_empty());
    for row in gemm::tuning::measured() {
        assert!(
            ENTRY_POINTS.iter().any(|e| e.name == row.kernel && e.precision == row.precision),
            "{}: not compiled",
            row.kernel
        );
    }
}

/// Without options the plan is the measured table's choice for the nearest
/// shape; with options it is the chosen configuration.
#[test]
fn plan_follows_the_table_or_the_options() {
    for precision in [Precision::F64, Precision::F32] {
        let plan =
            gemm::tuning::choose(Some("no such device"), precision, 4000, 4100, 4096, gemm::tuning::KernelLayouts::NN);
        let PlanSource::Measured { row, same_device } = plan.source else { panic!("{plan}") };
        assert!(!same_device);
        assert_eq!((row.m, row.n, row.k), (4096, 4096, 4096), "{plan}");
        let best = gemm::tuning::measured()
            .iter()
            .filter(|r| r.precision == precision && (r.m, r.n, r.k) == (4096, 4096, 4096) && r.layouts == "nn")
            .max_by(|a, b| a.gflops.total_cmp(&b.gflops))
            .unwrap();
        assert_eq!(row.kernel, best.kernel);
        // Layouts measured at that shape refine the choice (their rows say
        // whether to pack); others keep the nn row, packed or not.
        for layouts in gemm::tuning::KernelLayouts::ALL {
            let plan = gemm::tuning::choose(Some(row.device), precision, 4000, 4100, 4096, layouts);
            let PlanSource::Measured { row: r, .. } = plan.source else { panic!("{plan}") };
            assert_eq!((r.m, r.n, r.k), (4096, 4096, 4096), "{plan}");
            let measured_here = gemm::tuning::measured().iter().any(|x| {
                x.precision == precision && (x.m, x.n, x.k) == (4096, 4096, 4096) && x.layouts == layouts.suffix()
            });
            assert_eq!(r.layouts, if measured_here { layouts.suffix() } else { "nn" }, "{plan}");
            let packs = r.pack && layouts != KernelLayouts::PACKED;
            assert_eq!(plan.pack, packs, "{plan}");
            assert_eq!(plan.kernel_layouts(layouts), if packs { KernelLayouts::PACKED } else { layouts });
        }
        let device_row =
            gemm::tuning::choose(Some(row.device), precision, 4096, 4096, 256, gemm::tuning::KernelLayouts::NN);
        assert!(matches!(device_row.source, PlanSource::Measured { same_device: true, row } if row.k == 256));
    }
    let chosen = Gemm::new().stage(Stage::Vectorized).plan(Precision::F32, 10, 10, 10).unwrap();
    assert_eq!(chosen.source, PlanSource::Chosen);
    assert_eq!(chosen.config.stage(), Stage::Vectorized);
}

/// `.pack(b)` decides packing and the plan says so; a product already read
/// as packing would leave it (A column-major, B row-major) packs nothing; a
/// chosen kernel packs only when asked.
#[test]
fn the_plan_packs_when_asked_and_says_so() {
    use gemm::tuning::PackReason;
    for precision in [Precision::F64, Precision::F32] {
        let plan = Gemm::new().pack(true).plan(precision, 1000, 900, 800).unwrap();
        assert!(plan.pack && plan.pack_reason == PackReason::Chosen, "{plan}");
        assert!(plan.to_string().contains("operands packed (chosen)"), "{plan}");
        assert_eq!(plan.kernel_layouts(KernelLayouts::NN), KernelLayouts::PACKED);
        let plan = Gemm::new().pack(false).plan(precision, 1000, 900, 800).unwrap();
        assert!(!plan.pack && plan.pack_reason == PackReason::Chosen, "{plan}");
        // op(A) = T of a row-major A, op(B) = N: the kernel reads A
        // column-major and B row-major already.
        let plan = Gemm::new().pack(true).op_a(gemm::Op::T).plan(precision, 1000, 900, 800).unwrap();
        assert!(!plan.pack, "{plan}");
        let plan = Gemm::new().stage(Stage::Pipelined).plan(precision, 1000, 900, 800).unwrap();
        assert!(!plan.pack && plan.pack_reason == PackReason::NotConsidered, "{plan}");
        let plan = Gemm::new().stage(Stage::Pipelined).pack(true).plan(precision, 1000, 900, 800).unwrap();
        assert!(plan.pack, "{plan}");
    }
}
