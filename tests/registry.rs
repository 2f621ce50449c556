//! The host's list of entry points agrees with the shipped kernels, for
//! every target architecture and every storage order of A and B (one module
//! each), in machine code and PTX alike. Everything here reads what the
//! library embeds, never the repository, so it passes or fails the same on
//! any machine the test binary is carried to.

use gemm::tuning::kernels::{self, Format, KernelImage, IMAGES};
use gemm::tuning::registry::{entry_point, stage_configs, ENTRY_POINTS};
use gemm::tuning::{KernelLayouts, PlanSource, Stage};
use gemm::{Gemm, Precision};
use std::collections::BTreeSet;

#[test]
fn there_is_one_module_per_architecture_format_and_layouts() {
    let modules: BTreeSet<(&str, String, Option<&str>)> =
        IMAGES.iter().map(|i| (i.arch, format!("{:?}", i.format), i.layouts.map(|l| l.suffix()))).collect();
    assert_eq!(modules.len(), IMAGES.len(), "a module is listed twice");
    let mut expected = BTreeSet::new();
    for (arch, format) in [("sm_80", "Cubin"), ("sm_90", "Cubin"), ("sm_90", "Ptx")] {
        for l in KernelLayouts::ALL {
            expected.insert((arch, format.to_string(), Some(l.suffix())));
        }
    }
    expected.insert(("sm_90a", "Cubin".to_string(), None));
    assert_eq!(modules, expected);
    // The suffixes and indices of the layouts.
    let suffixes: Vec<_> = KernelLayouts::ALL.iter().map(|l| l.suffix()).collect();
    assert_eq!(suffixes, ["nn", "nt", "tn", "tt"]);
    for (i, l) in KernelLayouts::ALL.iter().enumerate() {
        assert_eq!(l.index(), i);
    }
}

/// The names the registry expects in a stage 1-8 module of `layouts`.
fn expected_ladder_names(layouts: KernelLayouts) -> BTreeSet<String> {
    // Every entry point, the separate batched entry points of the stages that keep them, the fused twins,
    // ... and the split-K reduction and the pack copy of each precision.
    let reductions = [Precision::F64, Precision::F32].map(gemm::tuning::split_k::reduce_entry);
    let packs = [Precision::F64, Precision::F32].map(gemm::tuning::pack::pack_entry);
    // Stage 8's mixed-precision kernels (tf32 and i8 in `nt` alone) and
    // the transposes of their MN-major tf32 and i8 operands.
    let mixed = gemm::tuning::MMA_KERNELS
        .iter()
        .filter(|k| k.types.transposes() || layouts == KernelLayouts::ALL[1])
        .map(|k| k.name);
    ENTRY_POINTS
        .iter()
        .flat_map(|e| [Some(e.name), Some(e.batched_name), e.fused_name].into_iter().flatten())
        .chain(reductions)
        .chain(packs)
        .chain(mixed)
        .chain(gemm::tuning::pack::TRANSPOSE_ENTRIES)
        .map(String::from)
        .collect()
}

/// The names stage 9's module must hold: every warpgroup kernel in each
/// layout it has, the split-K reductions, the transposes, the realigning
/// copy, the masked layout's table writer, the token-sized kernels and the
/// emulation's kernels.
fn expected_warpgroup_names() -> BTreeSet<String> {
    let reductions = ["warpgroup_reduce_f32", "warpgroup_reduce_f16", "warpgroup_reduce_bf16", "warpgroup_reduce_i32"];
    gemm::tuning::WARPGROUP_KERNELS
        .iter()
        .flat_map(|k| k.names.iter().chain(&k.fused).chain(&k.epilogue).flatten().copied())
        .chain(reductions)
        .chain(gemm::tuning::pack::TRANSPOSE_ENTRIES)
        .chain(["copy_lines_16", "warpgroup_masked_rows"])
        .chain(gemm::tuning::SKINNY_KERNELS.iter().copied())
        .chain(gemm::tuning::SKINNY_MMA_KERNELS.iter().copied())
        .chain(gemm::tuning::EMULATION_KERNELS.iter().flatten().copied())
        .chain(gemm::tuning::EMULATION_BOUND_KERNELS)
        .map(String::from)
        .collect()
}

/// The kernels of `image`, whose unpacked bytes are `bytes`.
fn names_in(image: &KernelImage, bytes: &[u8]) -> BTreeSet<String> {
    let names: Vec<String> = match image.format {
        Format::Ptx => kernels::ptx_entry_names(std::str::from_utf8(bytes).expect("PTX is text"))
            .into_iter()
            .map(String::from)
            .collect(),
        Format::Cubin => kernels::cubin_entry_names(bytes),
    };
    let set: BTreeSet<String> = names.iter().cloned().collect();
    assert_eq!(set.len(), names.len(), "{} {:?}: a kernel is listed twice", image.arch, image.format);
    set
}

#[test]
fn registry_and_every_module_list_the_same_entry_points() {
    let twins = ENTRY_POINTS.iter().filter(|e| e.batched_name != e.name).count();
    assert!(
        twins > 0
            && ENTRY_POINTS.iter().all(|e| e.batched_name == e.name
                || (e.batched_name == format!("{}_batched", e.name)
                    && gemm::tuning::separate_batched_entry(e.stage(), e.precision)))
    );
    let fused = ENTRY_POINTS.iter().filter(|e| e.fused_name.is_some()).count();
    assert!(
        fused > 0
            && ENTRY_POINTS.iter().all(|e| e.fused_name.is_none()
                || (e.fused_name == Some(format!("{}_fused", e.name).as_str())
                    && matches!(e.stage(), Stage::Pipelined | Stage::TensorCore)))
    );
    let names: BTreeSet<&str> = ENTRY_POINTS.iter().map(|e| e.name).collect();
    assert_eq!(names.len(), ENTRY_POINTS.len(), "duplicate names in the registry");
    for image in IMAGES {
        let what = format!("{} {:?} {}", image.arch, image.format, image.layouts.map_or("all", |l| l.suffix()));
        let expected = match image.layouts {
            Some(layouts) => expected_ladder_names(layouts),
            None => expected_warpgroup_names(),
        };
        assert!(expected.len() > 40, "{what}: the registry expects only {} kernels", expected.len());
        let bytes = image.unpack();
        assert_eq!(names_in(image, &bytes), expected, "{what}: kernels differ from the registry");
        if image.format == Format::Ptx {
            let text = std::str::from_utf8(&bytes).expect("PTX is text");
            assert!(text.contains(&format!(".target {}", image.arch)), "{what}: the PTX targets another architecture");
        } else {
            let cubin = &bytes;
            assert_eq!(&cubin[..4], b"\x7fELF", "{what}: not an ELF cubin");
        }
    }
}

/// The PTX fallback hands the driver one kernel at a time: each kernel's
/// text is a whole module (header, declarations, device functions) with
/// that entry alone.
#[test]
fn the_ptx_fallback_splits_into_single_kernel_modules() {
    let image = IMAGES.iter().find(|i| i.format == Format::Ptx).expect("a PTX module is shipped");
    let whole = String::from_utf8(image.unpack()).unwrap();
    let module = kernels::PtxModule::new(whole.clone());
    let names: Vec<&str> = module.entry_names().collect();
    assert_eq!(names.len(), names_in(image, whole.as_bytes()).len());
    for name in [names[0], names[names.len() / 2], names[names.len() - 1]] {
        let one = module.kernel_text(name).unwrap();
        assert_eq!(kernels::ptx_entry_names(&one), [name]);
        assert!(one.starts_with(&whole[..whole.find(".visible .entry").unwrap()]));
        assert!(one.ends_with(&whole[whole.rfind("\n}\n").unwrap()..]));
        assert!(one.len() < whole.len() / 4, "{name}: {} of {} bytes", one.len(), whole.len());
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

/// A newcomer finds each stage's kernel and example by the stage's name.
/// The files are read when the test is compiled (a missing one fails the
/// build), so the check also holds where the binary runs without the
/// repository (the GPU machine).
#[test]
fn every_stage_has_its_kernel_module_and_example() {
    macro_rules! files {
        ($($stem:literal)*) => {
            [$(($stem,
                include_str!(concat!("../gemm-kernels/src/s", $stem, ".rs")),
                include_str!(concat!("../examples/", $stem, ".rs")))),*]
        };
    }
    let files = files!("01_naive" "02_coalesced" "03_smem_tiled" "04_outputs_per_thread" "05_register_tiled"
        "06_vectorized" "07_pipelined" "08_tensor_core");
    let stems: Vec<&str> = files.iter().map(|f| f.0).collect();
    let stages: Vec<&str> = Stage::ALL.iter().map(|s| s.file_stem()).collect();
    assert_eq!(stems, stages, "a stage without its kernel file and example, or a file without its stage");
    for (stage, (_, kernel, example)) in Stage::ALL.iter().zip(files) {
        assert!(stage.file_stem().starts_with(&format!("{:02}_", stage.number())));
        assert!(!kernel.is_empty() && example.contains("fn main"), "{stage}");
    }
    // Stage 9 (Hopper's warpgroup MMA) is a kernel family beside the ladder's enum.
    let (kernel, example) =
        (include_str!("../gemm-kernels/src/s09_warpgroup.rs"), include_str!("../examples/09_warpgroup.rs"));
    assert!(!kernel.is_empty() && example.contains("fn main"));
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
