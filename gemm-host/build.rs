//! Unpacks the committed PTX modules (`ptx/gemm_<arch>_<layouts>.ptx.zst`,
//! written by `cargo xtask ptx`) into `OUT_DIR`, where `src/ptx.rs` embeds
//! them with `include_str!`. They are stored compressed (about a tenth of
//! the text) so the crate and the repository stay small.

use std::{env, fs, io::Read, path::Path};

fn main() {
    let out = env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let dir = Path::new("ptx");
    println!("cargo:rerun-if-changed=ptx");
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a readable ptx/ entry").path())
        .filter(|p| p.to_str().is_some_and(|s| s.ends_with(".ptx.zst")))
        .collect();
    entries.sort();
    for path in entries {
        let file = fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut text = Vec::new();
        ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(file))
            .unwrap_or_else(|e| panic!("{}: not a zstd frame: {e}", path.display()))
            .read_to_end(&mut text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path.file_stem().expect("a file name"); // gemm_<module>.ptx
        fs::write(Path::new(&out).join(name), text).unwrap_or_else(|e| panic!("{name:?}: {e}"));
    }
}
