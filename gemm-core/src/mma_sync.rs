//! Stage 8 for the mixed-precision products (f16, bf16, tf32, i8 operands):
//! geometry of the warp-level `mma.sync` kernels that run where stage 9's
//! warpgroup MMA does not (compute capability 8.x, and 9.0 on request),
//! shared by the host launcher and the kernels
//! (`gemm-kernels/src/s08_tensor_core_mixed.rs`), and the list of compiled
//! kernels ([`mma_menu!`](crate::mma_menu)).
//!
//! # The block
//! [`MMA_WARPS_M`] x [`MMA_WARPS_N`] warps (256 threads), warp (wm, wn)
//! computing the `BM / 2 x BN / 4` warp tile at rows `wm BM / 2`, columns
//! `wn BN / 4` of the BM x BN block tile, as (BM / 32) x (BN / 32) tiles of
//! `mma.m16n8kK` (K = 32 bytes of the operand type: k16 for f16 and bf16,
//! k8 for tf32, k32 for i8).
//!
//! # Shared memory
//! DEPTH buffers, each the A tile then the B tile of one k-tile of
//! [`K_TILE_BYTES`] = 64 bytes of k (BK = 32 f16 or bf16, 16 tf32, 64 i8
//! elements): `(BM + BN) * 64` bytes a buffer whatever the type and layout.
//! A K-major tile (k contiguous) is BM (BN) rows of 64 bytes; an MN-major
//! one (f16 and bf16 only) BK rows of `BM * 2` (`BN * 2`) bytes. Both are
//! swizzled by 16-byte chunks so that `ldmatrix` and the cp.async copies
//! meet no bank conflict (the kernel's docs draw them).
//!
//! # Source
//! PTX ISA, "Warp Level Matrix Multiply-Accumulate Instructions" (mma.m16n8k16
//! with .f16/.bf16, m16n8k8 with .tf32, m16n8k32 with .s8; "Matrix Fragments"),
//! "ldmatrix", "cp.async"; CUTLASS's sm80 tensor-op GEMMs
//! (`DefaultGemmConfiguration<OpClassTensorOp, Sm80, half_t ...>`: 128 x 256 x
//! 32 with 8 warps of 64 x 64, 3 buffers; 128 x 128) as the starting point.

use crate::geometry::ceil_div;

/// Bytes of k in one k-tile: two k-groups of one `mma` each.
pub const K_TILE_BYTES: u32 = 64;

/// Warps along m in a block.
pub const MMA_WARPS_M: u32 = 2;

/// Warps along n in a block.
pub const MMA_WARPS_N: u32 = 4;

/// A compiled `mma.sync` configuration for the mixed-precision types: block
/// tile BM x BN x BK (BK = 64 bytes of the operand type) and pipeline depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaTile {
    /// Rows of C per block (a multiple of 32: 16-row mma tiles in 2 warps).
    pub bm: u32,
    /// Columns of C per block (a multiple of 64: 16-column ldmatrix pairs in 4 warps).
    pub bn: u32,
    /// Shared-memory buffers (k-tiles in flight).
    pub depth: u32,
}

impl MmaTile {
    /// BK for operands of `input_bytes` bytes.
    pub const fn bk(self, input_bytes: u32) -> u32 {
        K_TILE_BYTES / input_bytes
    }

    /// Threads per block.
    pub const fn threads_per_block(self) -> u32 {
        32 * MMA_WARPS_M * MMA_WARPS_N
    }

    /// Bytes of the A tile of one buffer.
    pub const fn a_tile_bytes(self) -> u32 {
        self.bm * K_TILE_BYTES
    }

    /// Bytes of one buffer (A tile, then B tile).
    pub const fn buffer_bytes(self) -> u32 {
        (self.bm + self.bn) * K_TILE_BYTES
    }

    /// Dynamic shared memory to request at launch.
    pub const fn smem_bytes(self) -> u32 {
        self.depth * self.buffer_bytes()
    }

    /// Block tiles of one m x n product.
    pub const fn tiles(self, m: u32, n: u32) -> u64 {
        ceil_div(n, self.bn) as u64 * ceil_div(m, self.bm) as u64
    }

    /// Grid of a launch of `count` products: the block tiles of one product
    /// along x (rasterized by the kernel), the products along z (at most
    /// 65535; the kernel loops over the rest).
    pub const fn grid(self, m: u32, n: u32, count: u32) -> [u32; 3] {
        let tiles = self.tiles(m, n);
        [tiles as u32, 1, if count < 65535 { count } else { 65535 }]
    }

    /// Why this tile cannot be compiled, if it cannot.
    pub const fn check(self) -> Result<(), &'static str> {
        if self.bm == 0 || self.bm % (16 * MMA_WARPS_M) != 0 || self.bm > 256 {
            return Err("BM must be a multiple of 32 up to 256 (16-row mma tiles in 2 warps)");
        }
        if self.bn == 0 || self.bn % (16 * MMA_WARPS_N) != 0 || self.bn > 256 {
            return Err("BN must be a multiple of 64 up to 256 (16-column ldmatrix pairs in 4 warps)");
        }
        if self.depth < 2 {
            return Err("the pipeline depth must be at least 2");
        }
        if self.depth > 8 {
            return Err("the pipeline depth must be at most 8 (cp.async.wait_group's immediate)");
        }
        if self.smem_bytes() > 232_448 {
            return Err("the buffers exceed the 227 KiB of shared memory a block may have (H100)");
        }
        Ok(())
    }
}

/// Every compiled `mma.sync` kernel family of the mixed-precision types, as
/// `(name, types, [BM, BN, depth])`: 128 x 128 at depth 6 and 128 x 256 at
/// depth 4, 96 KiB of shared memory each, which every sm_8x block may have
/// (sm_86 and sm_89: 99 KiB). Why this deep: a k-tile is 64 bytes of k, and
/// on an H100 the next tiles must be in flight for about a microsecond of
/// memory latency (depth 3 measured 0.35x cuBLAS at 4096^3, H200,
/// 2026-11-25). 128 x 256 at depth 6 (144 KiB, A100 and H100 only) spilled
/// registers in the sm_80 build; before the copies were planned once per
/// product it measured the same as depth 4. TF32 has no 128 x
/// 256 tile: its fragments' rounding (`cvt.rna.tf32.f32`) takes the
/// registers that tile leaves.
///
/// `types` is a [`WgmmaTypes`](crate::warpgroup::WgmmaTypes). Each of the
/// four layout modules (`nn`, `nt`, `tn`, `tt`) exports `<name>` for f16 and bf16; the
/// `nt` module alone (both operands K-major) for tf32 and i8, whose
/// operands the host brings to K-major first (`ldmatrix` transposes 16-bit
/// elements only). `gemm_core::mma_menu!(my_macro)` expands to
/// `my_macro! { (..) ... }`.
#[macro_export]
macro_rules! mma_menu {
    ($callback:ident) => {
        $callback! {
            (mma_f16_b128x128_d6, F16, [128, 128, 6])
            (mma_f16_f32_b128x128_d6, F16F32, [128, 128, 6])
            (mma_bf16_b128x128_d6, Bf16, [128, 128, 6])
            (mma_bf16_f32_b128x128_d6, Bf16F32, [128, 128, 6])
            (mma_tf32_b128x128_d6, Tf32, [128, 128, 6])
            (mma_s8_b128x128_d6, S8, [128, 128, 6])
            (mma_f16_b128x256_d4, F16, [128, 256, 4])
            (mma_f16_f32_b128x256_d4, F16F32, [128, 256, 4])
            (mma_bf16_b128x256_d4, Bf16, [128, 256, 4])
            (mma_bf16_f32_b128x256_d4, Bf16F32, [128, 256, 4])
            (mma_s8_b128x256_d4, S8, [128, 256, 4])
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warpgroup::WgmmaTypes;

    #[test]
    fn menu_tiles_are_valid() {
        macro_rules! check {
            ($( ($name:ident, $t:ident, [$bm:literal, $bn:literal, $d:literal]) )*) => {$(
                let tile = MmaTile { bm: $bm, bn: $bn, depth: $d };
                assert_eq!(tile.check(), Ok(()), "{}", stringify!($name));
                assert!(stringify!($name).contains(WgmmaTypes::$t.name()));
            )*};
        }
        mma_menu!(check);
    }

    #[test]
    fn geometry() {
        let t = MmaTile { bm: 128, bn: 256, depth: 3 };
        assert_eq!(t.threads_per_block(), 256);
        assert_eq!(t.smem_bytes(), 3 * 384 * 64);
        assert_eq!(t.bk(2), 32);
        assert_eq!(t.bk(4), 16);
        assert_eq!(t.bk(1), 64);
        assert_eq!(t.grid(1000, 513, 3), [8 * 3, 1, 3]);
        assert_eq!(t.grid(1, 1, 100_000), [1, 1, 65535]);
        assert!(MmaTile { bm: 48, ..t }.check().is_err());
        assert!(MmaTile { bn: 96, ..t }.check().is_err());
        assert!(MmaTile { depth: 9, ..t }.check().is_err());
        assert!(MmaTile { bm: 256, bn: 256, depth: 8 }.check().is_err());
    }
}
