//! Launch geometry (grid, block, shared memory) and the device limits it must fit.

/// `ceil(a / b)` for `b > 0`.
#[inline(always)]
pub const fn ceil_div(a: u32, b: u32) -> u32 {
    a.div_ceil(b)
}

/// Grid and block dimensions (x, y, z) and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchGeometry {
    /// Blocks along x, y, z.
    pub grid: [u32; 3],
    /// Threads per block along x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub smem_bytes: u32,
}

/// The per-device limits a launch must fit, read from the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceLimits {
    /// Most threads per block.
    pub max_threads_per_block: u32,
    /// Most threads per block along x, y, z.
    pub max_block_dim: [u32; 3],
    /// Most blocks along x, y, z.
    pub max_grid_dim: [u32; 3],
    /// Most shared memory per block, in bytes, with the opt-in above 48 KiB.
    pub max_smem_per_block: u32,
}

/// A launch that does not fit the device; the message names the numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitError {
    /// Too many threads per block.
    Threads {
        /// Threads asked for.
        requested: u64,
        /// The device's limit.
        limit: u32,
    },
    /// A block dimension exceeds the device's limit along that axis.
    BlockDim {
        /// 'x', 'y' or 'z'.
        axis: char,
        /// Threads along the axis.
        requested: u32,
        /// The device's limit.
        limit: u32,
    },
    /// The grid needs more blocks along an axis than the device allows
    /// (a matrix too large for this configuration; pick larger blocks).
    GridDim {
        /// 'x', 'y' or 'z'.
        axis: char,
        /// Blocks needed.
        requested: u32,
        /// The device's limit.
        limit: u32,
    },
    /// Too much shared memory per block.
    SharedMemory {
        /// Bytes asked for.
        requested: u32,
        /// The device's limit.
        limit: u32,
    },
}

impl core::fmt::Display for LimitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LimitError::Threads { requested, limit } => {
                write!(f, "{requested} threads per block; this device allows {limit}")
            }
            LimitError::BlockDim { axis, requested, limit } => {
                write!(f, "block dimension {axis} is {requested}; this device allows {limit}")
            }
            LimitError::GridDim { axis, requested, limit } => write!(
                f,
                "grid dimension {axis} needs {requested} blocks; this device allows {limit} (use a larger block or tile)"
            ),
            LimitError::SharedMemory { requested, limit } => {
                write!(f, "{requested} bytes of shared memory per block; this device allows {limit}")
            }
        }
    }
}

impl core::error::Error for LimitError {}

const AXES: [char; 3] = ['x', 'y', 'z'];

impl LaunchGeometry {
    /// Threads per block.
    pub const fn threads_per_block(&self) -> u64 {
        self.block[0] as u64 * self.block[1] as u64 * self.block[2] as u64
    }

    /// Total blocks in the grid.
    pub const fn blocks(&self) -> u64 {
        self.grid[0] as u64 * self.grid[1] as u64 * self.grid[2] as u64
    }

    /// Checks the launch against the device's limits.
    pub const fn check(&self, limits: &DeviceLimits) -> Result<(), LimitError> {
        let threads = self.threads_per_block();
        if threads > limits.max_threads_per_block as u64 {
            return Err(LimitError::Threads { requested: threads, limit: limits.max_threads_per_block });
        }
        let mut i = 0;
        while i < 3 {
            if self.block[i] > limits.max_block_dim[i] {
                return Err(LimitError::BlockDim {
                    axis: AXES[i],
                    requested: self.block[i],
                    limit: limits.max_block_dim[i],
                });
            }
            if self.grid[i] > limits.max_grid_dim[i] {
                return Err(LimitError::GridDim {
                    axis: AXES[i],
                    requested: self.grid[i],
                    limit: limits.max_grid_dim[i],
                });
            }
            i += 1;
        }
        if self.smem_bytes > limits.max_smem_per_block {
            return Err(LimitError::SharedMemory { requested: self.smem_bytes, limit: limits.max_smem_per_block });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const H100: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_block_dim: [1024, 1024, 64],
        max_grid_dim: [2147483647, 65535, 65535],
        max_smem_per_block: 232448,
    };

    #[test]
    fn limits_are_named() {
        let g = LaunchGeometry { grid: [1, 70000, 1], block: [32, 1, 1], smem_bytes: 0 };
        assert_eq!(g.check(&H100), Err(LimitError::GridDim { axis: 'y', requested: 70000, limit: 65535 }));
        let g = LaunchGeometry { grid: [1, 1, 1], block: [1, 2048, 1], smem_bytes: 0 };
        assert!(matches!(g.check(&H100), Err(LimitError::Threads { requested: 2048, .. })));
        let g = LaunchGeometry { grid: [1, 1, 1], block: [32, 1, 1], smem_bytes: 300_000 };
        assert!(matches!(g.check(&H100), Err(LimitError::SharedMemory { .. })));
    }

    proptest! {
        #[test]
        fn ceil_div_is_the_least_cover(a in 0u32..1_000_000, b in 1u32..2000) {
            let q = ceil_div(a, b);
            prop_assert!(q as u64 * b as u64 >= a as u64);
            prop_assert!(q == 0 || (q as u64 - 1) * (b as u64) < a as u64);
        }
    }
}
