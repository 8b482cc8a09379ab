//! cuframes: zero-copy sharing of decoded video frames between processes
//! on one host.
//!
//! A [`Publisher`] owns a key and a ring of frame slots (CUDA device memory
//! or host shared memory); any number of [`Subscriber`]s on the same host
//! read the very same slots. The wire protocol (shared header layout,
//! control messages, ACKs) is protocol v1, see `docs/protocol-notes.md`.
//!
//! ```no_run
//! use cuframes::{PixelFormat, Publisher, PublisherConfig, Subscriber, SubscriberConfig};
//! # fn main() -> cuframes::Result<()> {
//! let mut publisher = Publisher::create(PublisherConfig::new("cam1", PixelFormat::Nv12, 1920, 1080))?;
//! let mut subscriber = Subscriber::connect(SubscriberConfig::new("cam1"))?;
//! let layout = publisher.layout().clone();
//! publisher.publish_with(0, |planes| cuframes::pattern::fill_frame(&layout, 0, planes))?;
//! let frame = subscriber.next(Some(std::time::Duration::from_secs(1)))?;
//! println!("seq {} pts {}", frame.seq(), frame.pts_ns());
//! frame.release()?;
//! # Ok(()) }
//! ```

mod channel;
pub mod defaults;
mod error;
pub mod format;
pub mod inspect;
pub mod log;
pub mod memory;
pub mod pattern;
mod platform;
mod props;
mod publisher;
mod resources;
mod shm;
mod side_data;
mod subscriber;
mod testhook;
mod wire;

pub use error::{Error, ErrorKind, Resource, Result};
pub use format::{FrameLayout, PixelFormat, PlaneLayout};
pub use memory::{
    CudaBinding, CudaShareRequest, DevicePlane, HostPlane, MemoryRequest, PlanePtr, cuda_available,
    cuda_unavailable_reason,
};
/// The clocks of frame timestamps (`publish_mono_ns` is CLOCK_MONOTONIC), for
/// latencies measured against them.
pub use platform::clock;
pub use platform::names::{kind_of as file_kind, open_shared_file};
pub use resources::{KeyPaths, KeyStatus, cleanup_key, key_status, list_keys, validate_key};
pub use shm::StreamInfo;
pub use wire::{CudaShare, MemoryKind};

/// Protocol v1 byte for byte: the shared-memory layout (structs, offsets,
/// constants) and the control messages with their encoder and strict
/// decoder, and the checks a subscriber makes of untrusted headers. For
/// conformance tests, inspection tools (`cuframes inspect`, `top`) and other
/// implementations; the library's own users need none of it.
pub mod protocol {
    pub use crate::shm::{validate_header, validate_meta};
    pub use crate::wire::layout::*;
    pub use crate::wire::message::*;
}
pub use props::FrameProps;
pub use publisher::{
    PITCH_ALIGNMENT, Policy, Publisher, PublisherConfig, PublisherStats, SubscriberInfo, V1Peers,
};
pub use side_data::{SIDE_DATA_CAPACITY, SideData, kind as side_data_kind};
pub use subscriber::{
    CopyMode, FrameLease, PlaneView, Subscriber, SubscriberConfig, SubscriberMode, SubscriberStats,
};

/// This library's version (major, minor, patch), as written in shared headers.
pub fn library_version() -> (u32, u32, u32) {
    let part = |s: &str| s.parse::<u32>().unwrap_or(0);
    (
        part(env!("CARGO_PKG_VERSION_MAJOR")),
        part(env!("CARGO_PKG_VERSION_MINOR")),
        part(env!("CARGO_PKG_VERSION_PATCH")),
    )
}

/// The wire protocol version this library speaks.
pub fn protocol_version() -> u32 {
    wire::PROTOCOL_VERSION
}
