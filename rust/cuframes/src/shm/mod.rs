//! Shared memory: the mapped region and the typed, validated shared header.

pub(crate) mod header;
pub(crate) mod region;

pub use header::{HeaderInfo, validate_header, validate_meta};
