//! Reading a key's shared header without connecting: for `cuframes ls`,
//! `inspect` and monitoring tools. Nothing read here is trusted; the raw
//! values are reported alongside the verdict of validation.

use std::time::Duration;

use crate::error::Result;
use crate::resources::{KeyStatus, key_status};
use crate::shm::header::{ShmHeader, StreamInfo, validate_header};
use crate::wire::layout::{
    MAX_SUBSCRIBER_SLOTS, REPORT_FROM_ACK_AREA, SEQ_INVALID, SUBSCRIBER_FREE, SharedHeader,
};

/// What a key's resources and shared header say.
#[derive(Clone, Debug)]
pub struct Inspection {
    /// Files and liveness.
    pub status: KeyStatus,
    /// The raw header, when the shared memory could be mapped.
    pub header: Option<SharedHeader>,
    /// The validated fixed part, or why validation failed.
    pub info: std::result::Result<StreamInfo, String>,
}

/// One occupied subscriber slot of a header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriberView {
    /// Bit / slot index.
    pub bit: u32,
    /// Raw state value.
    pub state: u64,
    /// Pid as written by the publisher.
    pub pid: u64,
    /// Name (lossy).
    pub name: String,
    /// Highest seq ACKed.
    pub last_seen_seq: u64,
    /// CLOCK_REALTIME ns of the last ACK.
    pub last_ack_ns: i64,
    /// Frames the subscriber lost, as it reports them (extension; 0 from
    /// subscribers that do not write it).
    pub dropped: u64,
    /// Newest seq it took (leased or copied; extension, D22).
    pub last_taken_seq: u64,
    /// Frames it received, of those copies, and of the lost ones those
    /// overwritten while leased (extension, D35).
    pub received: u64,
    pub copied: u64,
    pub overwritten: u64,
    /// The counts are the subscriber's own report copied by the publisher
    /// from its ACK area, bounded by what it could have seen (D33), rather
    /// than what a protocol-v1 subscriber wrote into the record itself.
    pub report_from_ack_area: bool,
}

/// The publisher's own counters in the header (extension, D35).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PublisherCounters {
    /// Strict-wait publishes that waited for a slot.
    pub ack_waits: u64,
    /// Nanoseconds spent in those waits.
    pub ack_wait_ns: u64,
    /// Subscribers dropped for missing their ACK timeout.
    pub ack_timeouts: u64,
}

impl Inspection {
    /// The live slots' frames, as (seq, CLOCK_MONOTONIC ns published),
    /// oldest first, skipping slots empty or being written.
    fn published_frames(&self) -> Vec<(u64, u64)> {
        let Some(h) = &self.header else {
            return Vec::new();
        };
        let ring = self.info.as_ref().map_or(0, |i| i.ring_size);
        let mut frames: Vec<(u64, u64)> = h.slots[..ring]
            .iter()
            .filter(|s| s.seq != SEQ_INVALID && s.seq != 0 && s.publish_mono_ns != 0)
            .map(|s| (s.seq, s.publish_mono_ns))
            .collect();
        frames.sort_unstable();
        frames
    }

    /// The frame rate of the frames still in the ring (published frames
    /// per second between the oldest and the newest); None with fewer than
    /// two, or when their times do not add up.
    pub fn frame_rate(&self) -> Option<f64> {
        let frames = self.published_frames();
        let (first, last) = (frames.first()?, frames.last()?);
        let (frames, ns) = (last.0.checked_sub(first.0)?, last.1.checked_sub(first.1)?);
        (frames > 0 && ns > 0).then(|| frames as f64 * 1e9 / ns as f64)
    }

    /// How long ago (ns, CLOCK_MONOTONIC) the newest frame in the ring was
    /// published; None when none is.
    pub fn newest_frame_age_ns(&self) -> Option<u64> {
        let (_, at) = *self.published_frames().last()?;
        Some(crate::platform::clock::monotonic_ns().saturating_sub(at))
    }

    /// The publisher's counters, when the header could be read.
    pub fn publisher_counters(&self) -> Option<PublisherCounters> {
        let h = self.header.as_ref()?;
        let word = |at: usize| u64::from_le_bytes(h.reserved_b[at..at + 8].try_into().expect("8 bytes"));
        Some(PublisherCounters {
            ack_waits: word(8),
            ack_wait_ns: word(16),
            ack_timeouts: word(24),
        })
    }

    /// The occupied subscriber slots (state not free).
    pub fn subscribers(&self) -> Vec<SubscriberView> {
        let Some(h) = &self.header else {
            return Vec::new();
        };
        (0..MAX_SUBSCRIBER_SLOTS)
            .filter(|&bit| h.subscribers[bit].state != SUBSCRIBER_FREE)
            .map(|bit| {
                let s = &h.subscribers[bit];
                let word =
                    |at: usize| u64::from_le_bytes(s.reserved[at..at + 8].try_into().expect("8 bytes"));
                SubscriberView {
                    bit: bit as u32,
                    state: s.state,
                    pid: s.consumer_pid,
                    name: s.name_lossy(),
                    last_seen_seq: s.last_seen_seq,
                    last_ack_ns: s.last_ack_ns,
                    dropped: word(0x00),
                    last_taken_seq: word(0x08),
                    received: word(0x10),
                    copied: word(0x18),
                    overwritten: word(0x20),
                    report_from_ack_area: word(0x28) == REPORT_FROM_ACK_AREA,
                }
            })
            .collect()
    }
}

/// How long [`inspect`] waits for a publisher to send its header over the
/// socket.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(2);

/// Inspects `key` (runtime directory as in
/// [`crate::resources::runtime_dir_candidates`]), waiting up to
/// [`DEFAULT_FETCH_TIMEOUT`] for a header asked for over the socket.
pub fn inspect(key: &str, runtime_dir: Option<&std::path::Path>) -> Result<Inspection> {
    inspect_within(key, runtime_dir, DEFAULT_FETCH_TIMEOUT)
}

/// [`inspect`], waiting at most `timeout` for a publisher that is asked for
/// its header over the socket (a key whose `/dev/shm` is another IPC
/// namespace's): one that does not answer in time leaves the header
/// unread (`header` None, `info` saying why). Everything else read here
/// never waits.
pub fn inspect_within(
    key: &str,
    runtime_dir: Option<&std::path::Path>,
    timeout: Duration,
) -> Result<Inspection> {
    let status = key_status(key, runtime_dir)?;
    // A live key whose /dev/shm is another IPC namespace's (another
    // container): ask its publisher for the header over the socket.
    let opened = ShmHeader::open_read_only(&status.paths.shm_name).or_else(|e| {
        if e.kind() == crate::error::ErrorKind::NotFound && status.live {
            crate::subscriber::handshake::fetch_header(&status.paths, timeout)
        } else {
            Err(e)
        }
    });
    let (header, info) = match opened {
        Ok(shm) => {
            let magic_ready = shm.load_magic();
            let snapshot = shm.snapshot();
            let info = if magic_ready == crate::wire::MAGIC {
                validate_header(&snapshot).map_err(|e| e.to_string())
            } else {
                Err("header not initialised (no magic)".to_owned())
            };
            (Some(snapshot), info)
        }
        Err(e) => (None, Err(e.to_string())),
    };
    Ok(Inspection { status, header, info })
}
