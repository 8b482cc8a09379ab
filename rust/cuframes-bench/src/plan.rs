//! What one run measures: the frames, the processes, the transports.

use std::time::Duration;

use cuframes::{CudaShareRequest, MemoryKind, PixelFormat, Policy};

use crate::frames::{Geometry, Verify};
use crate::shm_ring;
use crate::transport::Transport;

/// The most subscribers a run may have: a cuframes ring has a bit per
/// subscriber, the shm-copy ring's control page a word.
pub const MAX_SUBSCRIBERS: usize = {
    let bits = cuframes::protocol::LAST_SUBSCRIBER_BIT as usize;
    if shm_ring::MAX_SUBSCRIBERS < bits {
        shm_ring::MAX_SUBSCRIBERS
    } else {
        bits
    }
};

/// The most slots a ring may have (the shm-copy ring's control page).
pub const MAX_RING: usize = shm_ring::MAX_RING;

/// Everything a run needs. The caller checks the figures (`cuframes
/// bench`'s options): subscribers 1 to [`MAX_SUBSCRIBERS`], ring 1 to
/// [`MAX_RING`], at least one frame and one transport, each once.
#[derive(Debug)]
pub struct Plan {
    /// Measured in this order.
    pub transports: Vec<Transport>,
    pub memory: MemoryKind,
    pub geometry: Geometry,
    pub subscribers: usize,
    pub ring: usize,
    pub policy: Policy,
    pub frames: u64,
    /// Frames per second to publish at; 0: as fast as the transport takes them.
    pub fps: f64,
    pub verify: Verify,
    /// CUDA: subscribers synchronize their stream before a frame counts as ready.
    pub cuda_sync: bool,
    pub cuda_share: CudaShareRequest,
    /// How long a subscriber waits for a frame, and the publisher for a slot.
    pub timeout: Duration,
}

impl Plan {
    pub fn format(&self) -> PixelFormat {
        self.geometry.layout.format()
    }

    /// Distinct frames the publisher cycles through.
    pub fn pool(&self) -> u64 {
        self.geometry.pool_len()
    }
}
