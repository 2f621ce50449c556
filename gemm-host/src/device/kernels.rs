//! The kernels this library ships, embedded in every binary that links it,
//! zstd-compressed (8.4 MB in all: 3.7 MB of cubins, 4.7 MB of PTX) and unpacked in memory when a device
//! first needs a module:
//!
//! - **Machine code** (cubins, SASS) for `sm_80` (runs on every device of
//!   compute capability 8.x: A100, A10, L4, RTX 30xx and 40xx), `sm_90` and
//!   `sm_90a` (9.0: H100, H200; `sm_90a` holds stage 9's warpgroup kernels),
//!   assembled ahead of time by `ptxas` from the committed PTX. Loading one
//!   costs milliseconds, and with the driver's lazy loading (the default
//!   since CUDA 12.2; `CUDA_MODULE_LOADING`) a kernel reaches the device
//!   only when it is first launched.
//! - **PTX** of `sm_90`, the fallback for newer architectures without a
//!   cubin here (compute capability 10.x, 12.x: Blackwell). The driver
//!   compiles PTX at run time, so the first product that needs a kernel
//!   waits for it to be compiled: the library hands the driver that one
//!   kernel's PTX ([`PtxModule::kernel_text`]), not the module's hundred.
//!   The driver keeps what it compiled in its JIT cache
//!   (`~/.nv/ComputeCache`), so later processes skip the wait unless the
//!   cache is disabled or cleared.
//!
//! [`code_for`] says which a device gets; [`crate::Device::kernel_code`]
//! says which one it uses. Setting the environment variable
//! `GEMM_KERNEL_CODE=ptx` before the device is opened makes a 9.0 device use
//! the PTX path for stages 1-8 too (stage 9 stays machine code: its `sm_90a`
//! PTX is not shipped), to test or time the fallback.
//!
//! Layer device (`device/`); it imports nothing of this crate. Public as
//! `gemm::tuning::kernels`.

use gemm_core::KernelLayouts;
use std::fmt;
use std::io::Read;
use std::ops::Range;

/// What a device's kernels are loaded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelCode {
    /// Machine code assembled ahead of time for architecture `arch`
    /// (`sm_80` or `sm_90`; stage 9's `sm_90a` beside `sm_90`): no
    /// compilation at run time.
    Cubin {
        /// The architecture the cubins were assembled for.
        arch: &'static str,
    },
    /// PTX of architecture `arch`, compiled by the driver kernel by kernel,
    /// the first time each is needed (measured on an H100 forced onto this
    /// path, 2026-11-25, JIT cache off: the first 64³ dgemm 0.9 s after the
    /// context, the 4096³ dgemm's kernel 1.6 s; once per machine while the
    /// driver's JIT cache keeps it).
    Ptx {
        /// The architecture the PTX targets.
        arch: &'static str,
    },
}

impl KernelCode {
    /// The architecture the code targets.
    pub fn arch(&self) -> &'static str {
        match self {
            KernelCode::Cubin { arch } | KernelCode::Ptx { arch } => arch,
        }
    }
}

impl fmt::Display for KernelCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelCode::Cubin { arch } => write!(f, "cubin {arch} (machine code)"),
            KernelCode::Ptx { arch } => write!(f, "PTX {arch} (compiled by the driver on first use)"),
        }
    }
}

/// The kernel code for a device of compute capability `major.minor`:
/// machine code for 8.x and 9.0, the `sm_90` PTX above, `None` below 8.0.
///
/// ```
/// use gemm::tuning::kernels::{code_for, KernelCode};
/// assert_eq!(code_for(8, 9), Some(KernelCode::Cubin { arch: "sm_80" }));
/// assert_eq!(code_for(9, 0), Some(KernelCode::Cubin { arch: "sm_90" }));
/// assert_eq!(code_for(12, 0), Some(KernelCode::Ptx { arch: "sm_90" }));
/// assert_eq!(code_for(7, 5), None);
/// ```
pub fn code_for(major: i32, minor: i32) -> Option<KernelCode> {
    match (major, minor) {
        (8, _) => Some(KernelCode::Cubin { arch: "sm_80" }),
        (9, 0) => Some(KernelCode::Cubin { arch: "sm_90" }),
        (m, _) if m >= 9 => Some(KernelCode::Ptx { arch: "sm_90" }),
        _ => None,
    }
}

/// The format of an embedded module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// An ELF cubin (machine code).
    Cubin,
    /// PTX text.
    Ptx,
}

/// One embedded module: an architecture, the storage order of A and B its
/// stage 1-8 kernels read (`None` for `sm_90a`, whose stage-9 entry points
/// take every layout), its format and its zstd-compressed bytes.
#[derive(Debug)]
pub struct KernelImage {
    /// `sm_80`, `sm_90` or `sm_90a`.
    pub arch: &'static str,
    /// The layouts of A and B its kernels are built for, or `None` for every one.
    pub layouts: Option<KernelLayouts>,
    /// Machine code or PTX.
    pub format: Format,
    /// The module, zstd-compressed.
    pub packed: &'static [u8],
}

impl KernelImage {
    /// The module's bytes (a cubin, or PTX text), unpacked in memory
    /// (about 10 ms for a 6 MB cubin).
    pub fn unpack(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // The bytes were written by `cargo xtask cubin` / `ptx` and every
        // image is unpacked by a CPU test in CI: a failure here is a corrupt
        // build of this crate, not anything a caller did.
        let mut decoder = ruzstd::decoding::StreamingDecoder::new(self.packed)
            .unwrap_or_else(|e| panic!("embedded kernels {}: not a zstd frame: {e}", self.arch));
        decoder.read_to_end(&mut out).unwrap_or_else(|e| panic!("embedded kernels {}: {e}", self.arch));
        out
    }

    /// The names of its kernels (entry points).
    pub fn entry_names(&self) -> Vec<String> {
        let bytes = self.unpack();
        match self.format {
            Format::Ptx => ptx_entry_names(&String::from_utf8_lossy(&bytes)).into_iter().map(String::from).collect(),
            Format::Cubin => cubin_entry_names(&bytes),
        }
    }
}

macro_rules! images {
    ($($format:ident $ext:literal $arch:literal: $($layouts:literal $suffix:literal)*;)*) => {
        /// Every embedded module: the cubins of `sm_80` and `sm_90` (one per
        /// storage order of A and B) and of `sm_90a`, and the `sm_90` PTX.
        pub static IMAGES: &[KernelImage] = &[
            $($(KernelImage {
                arch: $arch,
                layouts: Some(KernelLayouts::ALL[$layouts]),
                format: Format::$format,
                packed: include_bytes!(concat!("../../", $ext, "/gemm_", $arch, "_", $suffix, ".", $ext, ".zst")),
            },)*)*
            KernelImage {
                arch: "sm_90a",
                layouts: None,
                format: Format::Cubin,
                packed: include_bytes!("../../cubin/gemm_sm_90a.cubin.zst"),
            },
        ];
    };
}

images! {
    Cubin "cubin" "sm_80": 0 "nn" 1 "nt" 2 "tn" 3 "tt";
    Cubin "cubin" "sm_90": 0 "nn" 1 "nt" 2 "tn" 3 "tt";
    Ptx "ptx" "sm_90": 0 "nn" 1 "nt" 2 "tn" 3 "tt";
}

/// The embedded module of `arch` in `format` for kernels reading A and B in
/// `layouts` (`None`: the `sm_90a` module of every layout).
pub fn image(arch: &str, format: Format, layouts: Option<KernelLayouts>) -> Option<&'static KernelImage> {
    IMAGES.iter().find(|i| i.arch == arch && i.format == format && i.layouts == layouts)
}

/// Names of the `.entry` functions in a PTX text.
pub fn ptx_entry_names(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|l| l.trim().strip_prefix(".visible .entry "))
        .map(|rest| rest.split('(').next().unwrap_or(rest).trim())
        .collect()
}

/// Names of the kernels in a cubin: its sections `.nv.constant0.<kernel>`
/// (each kernel's parameter bank; device functions have none). Empty if the
/// bytes are not a 64-bit little-endian ELF file.
pub fn cubin_entry_names(elf: &[u8]) -> Vec<String> {
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |o: usize| elf.get(o..o + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
    let u64_at = |o: usize| elf.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize);
    let names = || -> Option<Vec<String>> {
        if elf.get(..5)? != b"\x7fELF\x02" {
            return None;
        }
        // ELF64 header: e_shoff at 0x28, e_shentsize, e_shnum, e_shstrndx at 0x3a.
        let (shoff, shentsize, shnum, shstrndx) = (u64_at(0x28)?, u16_at(0x3a)?, u16_at(0x3c)?, u16_at(0x3e)?);
        // Section header: sh_name at 0, sh_offset at 0x18.
        let strtab = u64_at(shoff + shstrndx * shentsize + 0x18)?;
        let mut out = Vec::new();
        for i in 0..shnum {
            let start = strtab + u32_at(shoff + i * shentsize)?;
            let len = elf.get(start..)?.iter().position(|&b| b == 0)?;
            let name = std::str::from_utf8(&elf[start..start + len]).ok()?;
            if let Some(kernel) = name.strip_prefix(".nv.constant0.") {
                out.push(kernel.to_string());
            }
        }
        Some(out)
    };
    names().unwrap_or_default()
}

/// A PTX module split into its kernels, so that the driver compiles only
/// the kernel a product runs: the text outside every entry (the header,
/// the declarations, the globals, the device functions) is kept for each
/// kernel, and one entry's body is put back at its place.
#[derive(Debug)]
pub struct PtxModule {
    text: String,
    /// Byte ranges of the entries, in order, with their names.
    entries: Vec<(String, Range<usize>)>,
}

impl PtxModule {
    /// Splits `text` (PTX as LLVM writes it: each entry from its `.visible
    /// .entry NAME(` line to the first line that is `}` alone).
    pub fn new(text: String) -> PtxModule {
        let mut entries = Vec::new();
        let mut open: Option<(String, usize)> = None;
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            let trimmed = line.trim_end();
            if let Some(rest) = trimmed.strip_prefix(".visible .entry ") {
                open = Some((rest.split('(').next().unwrap_or(rest).trim().to_string(), at));
            } else if trimmed == "}" {
                if let Some((name, start)) = open.take() {
                    entries.push((name, start..at + line.len()));
                }
            }
            at += line.len();
        }
        PtxModule { text, entries }
    }

    /// The names of its kernels.
    pub fn entry_names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// A PTX module holding kernel `name` alone, or `None` if it has none.
    pub fn kernel_text(&self, name: &str) -> Option<String> {
        let keep = self.entries.iter().position(|(n, _)| n == name)?;
        let mut out = String::with_capacity(self.text.len() / self.entries.len().max(1) + 4096);
        let mut at = 0;
        for (i, (_, range)) in self.entries.iter().enumerate() {
            out.push_str(&self.text[at..range.start]);
            if i == keep {
                out.push_str(&self.text[range.clone()]);
            }
            at = range.end;
        }
        out.push_str(&self.text[at..]);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_module_keeps_the_shared_text_and_one_entry() {
        let text = ".version 7.8\n.target sm_90\n.global .b8 g[1];\n\n// .globl\ta\n.visible .entry a(\n)\n{\n\t{\n\t}\n\tret;\n}\n\
                    // .globl\tb\n.visible .entry b(\n)\n{\n\tret;\n}\n.func f()\n{\n\tret;\n}\n"
            .to_string();
        let m = PtxModule::new(text);
        assert_eq!(m.entry_names().collect::<Vec<_>>(), ["a", "b"]);
        let b = m.kernel_text("b").unwrap();
        assert!(b.contains(".visible .entry b(") && !b.contains(".visible .entry a("));
        assert!(
            b.starts_with(".version 7.8\n.target sm_90\n.global .b8 g[1];") && b.ends_with(".func f()\n{\n\tret;\n}\n")
        );
        let a = m.kernel_text("a").unwrap();
        assert!(a.contains("{\n\t{\n\t}\n\tret;\n}\n") && !a.contains("entry b"));
        assert!(m.kernel_text("c").is_none());
    }

    #[test]
    fn every_architecture_has_its_code() {
        assert_eq!(code_for(8, 0), Some(KernelCode::Cubin { arch: "sm_80" }));
        assert_eq!(code_for(8, 6), Some(KernelCode::Cubin { arch: "sm_80" }));
        assert_eq!(code_for(9, 0), Some(KernelCode::Cubin { arch: "sm_90" }));
        assert_eq!(code_for(10, 0), Some(KernelCode::Ptx { arch: "sm_90" }));
        assert_eq!(code_for(7, 5), None);
        for code in [code_for(8, 0), code_for(9, 0), code_for(10, 0)].into_iter().flatten() {
            let format = if matches!(code, KernelCode::Cubin { .. }) { Format::Cubin } else { Format::Ptx };
            for layouts in KernelLayouts::ALL {
                assert!(image(code.arch(), format, Some(layouts)).is_some(), "{code} {}", layouts.suffix());
            }
        }
        assert!(image("sm_90a", Format::Cubin, None).is_some());
    }
}
