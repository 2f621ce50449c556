//! The execution layer: running products that are already planned. Stages
//! 1-8's launches, split-K and packing copies ([`launch`]), and the host
//! path's tiles, which stream host matrices through the device
//! ([`host_path`]). It imports the device layer and the base only.

pub(crate) mod host_path;
pub(crate) mod launch;
