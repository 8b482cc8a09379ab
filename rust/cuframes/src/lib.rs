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

pub mod access;
mod channel;
pub mod clock;
mod error;
pub mod format;
pub mod inspect;
mod lock;
pub mod memory;
pub mod pattern;
mod props;
mod publisher;
pub mod resources;
pub mod shm;
mod side_data;
mod subscriber;
mod testhook;
pub mod wire;

pub use error::{Error, ErrorKind, Result};
pub use format::{FrameLayout, PixelFormat, PlaneLayout};
pub use memory::{
    CudaBinding, CudaShare, CudaShareRequest, DevicePlane, HostPlane, MemoryKind, MemoryRequest, PlanePtr,
    cuda_available, cuda_unavailable_reason,
};
pub use props::FrameProps;
pub use publisher::{
    DEFAULT_STARTUP_TIMEOUT_MS, PITCH_ALIGNMENT, Policy, Publisher, PublisherConfig, PublisherStats,
    SubscriberInfo,
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
