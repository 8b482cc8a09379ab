//! Shared memory: the mapped region and the typed, validated shared header.

pub(crate) mod ack_area;
mod futex;
pub(crate) mod header;
pub(crate) mod ring;
pub(crate) mod side_area;

pub use header::{StreamInfo, validate_header, validate_meta};
