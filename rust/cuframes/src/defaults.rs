//! One default for each publisher and subscriber option that more than one
//! surface has (this library, the C API, Python, the `cuframes` command, the
//! FFmpeg muxer, input device and source filter, the GStreamer elements),
//! chosen for the main job: consumers such as encoders hold frames, so the
//! ring leaves room for them and subscribers copy what it cannot spare; and
//! containerised services start in any order, so a subscriber waits for its
//! publisher (protocol notes D39). Each surface takes its default from here
//! (the C header and the FFmpeg components through `CUFRAMES_DEFAULT_*`); a
//! test compares what every surface reports.

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

/// Subscribers: private copies of what the ring cannot spare. Consumers
/// that hold frames (encoders, queues) then neither stall the publisher nor
/// see a held frame overwritten; a consumer that holds nothing still gets
/// the slots under strict-wait.
pub const COPY: crate::CopyMode = crate::CopyMode::Auto;

/// Under drop-oldest, frames a library thread queues for a subscriber: a
/// consumer that is still starting, or briefly slow, loses none of about a
/// second of video. Ignored under strict-wait (the publisher waits instead)
/// and in latest mode (it asks for the newest frame).
pub const READ_AHEAD: usize = 32;

/// How long a subscriber waits for a publisher of its key to appear (the
/// command, Python, the FFmpeg input device and source filter, the
/// GStreamer source; the library and the C API look once, their callers
/// loop): services started together come up in any order.
pub const WAIT_FOR_PUBLISHER: Duration = Duration::from_secs(30);

/// How long a subscriber waits for a frame before it gives up or warns:
/// far longer than any frame interval, short enough to notice a publisher
/// that stalled.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(5);

/// Bound on a subscriber's whole handshake, its CUDA context and the
/// mapping of the slots included: the publisher's [`HANDSHAKE_TIMEOUT`].
pub const CONNECT_TIMEOUT: Duration = HANDSHAKE_TIMEOUT;

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

    #[test]
    fn a_new_subscriber_config_takes_these_defaults() {
        let c = crate::SubscriberConfig::new("k");
        assert_eq!((c.copy, COPY), (crate::CopyMode::Auto, crate::CopyMode::Auto));
        assert_eq!(crate::CopyMode::default(), COPY);
        assert_eq!((c.read_ahead, READ_AHEAD), (32, 32));
        assert_eq!(
            (c.connect_timeout, CONNECT_TIMEOUT),
            (Duration::from_secs(30), Duration::from_secs(30))
        );
        assert_eq!(c.mode, crate::SubscriberMode::Sequential);
        assert_eq!(WAIT_FOR_PUBLISHER, Duration::from_secs(30));
        assert_eq!(FRAME_TIMEOUT, Duration::from_secs(5));
    }
}
