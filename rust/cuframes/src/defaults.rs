//! One default for each publisher option that more than one surface has
//! (this library, the C API, Python, the `cuframes` command, the FFmpeg
//! muxer, the GStreamer sink), chosen for the main job: consumers such as
//! encoders hold frames, so the ring leaves room for them. Each surface
//! takes its default from here (the C header and the FFmpeg muxer through
//! `CUFRAMES_DEFAULT_*`); a test compares what every surface reports.

use std::time::Duration;

/// Slots in the ring: 16, the most a header holds. Encoders and queues
/// downstream of a subscriber hold frames; fewer slots turn those holds
/// into private copies (or, under strict-wait, into waits).
pub const RING_SIZE: usize = crate::wire::layout::MAX_RING_SIZE;

/// Under strict-wait, how long a subscriber may hold up the ring before it
/// is dropped.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(1);

/// Under strict-wait, the same for a subscriber that joined less than this
/// long ago (its consumer is still starting, D23).
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a new connection may take from HELLO to SUBSCRIBE (a CUDA
/// subscriber makes its context in between, D23).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_publisher_config_takes_these_defaults() {
        let c = crate::PublisherConfig::new("k", crate::PixelFormat::Nv12, 64, 48);
        assert_eq!((c.ring_size, RING_SIZE), (16, 16));
        assert_eq!(c.policy, crate::Policy::DropOldest);
        assert_eq!(c.ack_timeout, ACK_TIMEOUT);
        assert_eq!(c.startup_timeout, STARTUP_TIMEOUT);
        assert_eq!(c.handshake_timeout, HANDSHAKE_TIMEOUT);
        assert_eq!(c.v1_peers, crate::V1Peers::SameUser);
    }
}
