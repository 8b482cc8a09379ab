//! Reading a key's shared header without connecting: for `cuframes ls`,
//! `inspect` and monitoring tools. Nothing read here is trusted: the
//! header's fixed part is reported alongside the verdict of validation, and
//! what subscribers' records say is bounded by what they could have seen
//! ([`Inspection::subscribers`]), since writers of the named header other
//! than the publisher (protocol-v1 peers, D33) can write every record.

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
    /// The header read is one that others than the publisher's user may
    /// write: a named header whose group may write it (`v1_peers=allow`
    /// with a group, 0660), where that group's protocol-v1 subscribers
    /// write. False for a 0600 or 0640 named header and for the
    /// publisher's sealed copy (read over the socket).
    pub others_can_write: bool,
}

/// Who could have written a subscriber record's counts (D35).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportWriter {
    /// The publisher: the subscriber's own report, copied from its private
    /// ACK area and bounded (D33), in a header nobody but the publisher's
    /// user can write. Nobody else's figures.
    Publisher,
    /// Protocol-v1 peers: the record says a v1 subscriber wrote it itself,
    /// or it lies in a named header its group's v1 subscribers may write,
    /// so any of them could have (D33).
    V1Peers,
}

impl ReportWriter {
    /// `publisher` or `v1_peers` (the exporter's `report` label).
    pub fn name(self) -> &'static str {
        match self {
            ReportWriter::Publisher => "publisher",
            ReportWriter::V1Peers => "v1_peers",
        }
    }
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
    /// The seq published when it joined, as the publisher wrote it at
    /// admission (extension, D35; 0 = not kept).
    pub joined_seq: u64,
    /// Who could have written the counts.
    pub report: ReportWriter,
}

impl SubscriberView {
    /// The record bounded by what its subscriber could have seen with
    /// `published` frames published: no seq past the last published; no
    /// more frames received, nor lost, than were published since it joined
    /// (`joined_seq`, at most `published`; all of them when not kept); no
    /// more copies than frames received, nor frames overwritten than lost.
    /// A writer of the named header other than the publisher could have
    /// written any record (2^62 lost, say), so every reader goes through
    /// here ([`Inspection::subscribers`]).
    pub fn bounded(mut self, published: u64) -> SubscriberView {
        self.joined_seq = self.joined_seq.min(published);
        let seen = published - self.joined_seq;
        self.last_seen_seq = self.last_seen_seq.min(published);
        self.last_taken_seq = self.last_taken_seq.min(published);
        self.received = self.received.min(seen);
        self.dropped = self.dropped.min(seen);
        self.copied = self.copied.min(self.received);
        self.overwritten = self.overwritten.min(self.dropped);
        self
    }
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

    /// Why this key's header could not be read, or did not validate, when
    /// a live publisher has it or it is in `/dev/shm` (a stale key with no
    /// header is not unreadable): what tools skip the key for.
    pub fn unreadable_reason(&self) -> Option<&str> {
        match &self.info {
            Err(e) if self.status.live || self.status.has_shm => Some(e),
            _ => None,
        }
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

    /// The occupied subscriber slots (state not free), their counts
    /// bounded by what each could have seen ([`SubscriberView::bounded`])
    /// and labelled with who could have written them.
    pub fn subscribers(&self) -> Vec<SubscriberView> {
        let Some(h) = &self.header else {
            return Vec::new();
        };
        let writer = |source: u64| {
            if source == REPORT_FROM_ACK_AREA && !self.others_can_write {
                ReportWriter::Publisher
            } else {
                ReportWriter::V1Peers
            }
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
                    joined_seq: word(0x30),
                    report: writer(word(0x28)),
                }
                .bounded(h.global_seq)
            })
            .collect()
    }
}

/// How long [`inspect`] waits for a publisher to send its header over the
/// socket.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(2);

/// Inspects `key`, waiting up to [`DEFAULT_FETCH_TIMEOUT`] for a header
/// asked for over the socket. The key is looked up as [`crate::key_status`]
/// does: in `runtime_dir` alone when given, else `$CUFRAMES_RUNTIME_DIR`
/// alone when set, else in the first of `/run/cuframes`,
/// `$XDG_RUNTIME_DIR/cuframes` and `/tmp/cuframes-<uid>` that holds its
/// socket or lock.
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
    let mut others_can_write = false;
    let (header, info) = match opened {
        Ok(shm) => {
            others_can_write = shm.others_can_write();
            let magic_ready = shm.load_magic();
            let snapshot = shm.snapshot();
            let info = if shm.lost_pages() {
                Err(format!(
                    "shared memory {} shrank while it was read (a process that may write it truncated it)",
                    status.paths.shm_name
                ))
            } else if magic_ready == crate::wire::MAGIC {
                validate_header(&snapshot).map_err(|e| e.to_string())
            } else {
                Err("header not initialised (no magic)".to_owned())
            };
            (Some(snapshot), info)
        }
        Err(e) => (None, Err(e.to_string())),
    };
    Ok(Inspection {
        status,
        header,
        info,
        others_can_write,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forged(joined_seq: u64, value: u64) -> SubscriberView {
        SubscriberView {
            bit: 1,
            state: crate::wire::layout::SUBSCRIBER_ACTIVE,
            pid: 1,
            name: "honest".into(),
            last_seen_seq: value,
            last_ack_ns: 0,
            dropped: value,
            last_taken_seq: value,
            received: value,
            copied: value,
            overwritten: value,
            joined_seq,
            report: ReportWriter::Publisher,
        }
    }

    /// 2^62 everywhere in a record of a subscriber that joined at seq 3,
    /// with 8 published: 5 at most of each count, seqs at most 8.
    #[test]
    fn forged_counts_are_bounded_by_what_was_published_since_joining() {
        let v = forged(3, 1 << 62).bounded(8);
        assert_eq!((v.received, v.dropped, v.copied, v.overwritten), (5, 5, 5, 5));
        assert_eq!((v.last_seen_seq, v.last_taken_seq), (8, 8));
        // A joined seq past the last published (forged too) bounds to 0.
        let v = forged(1 << 62, 1 << 62).bounded(8);
        assert_eq!((v.joined_seq, v.received, v.dropped), (8, 0, 0));
        // Not kept (0): everything published.
        assert_eq!(forged(0, 1 << 62).bounded(8).received, 8);
    }

    /// Copies are some of the frames received; overwritten ones some of
    /// those lost.
    #[test]
    fn parts_are_bounded_by_their_wholes() {
        let mut v = forged(0, 0);
        (v.received, v.copied, v.dropped, v.overwritten) = (2, 7, 1, 4);
        let v = v.bounded(100);
        assert_eq!((v.received, v.copied, v.dropped, v.overwritten), (2, 2, 1, 1));
    }

    /// Honest figures pass unchanged.
    #[test]
    fn honest_counts_are_unchanged() {
        let mut v = forged(10, 0);
        (v.received, v.copied, v.dropped, v.overwritten, v.last_seen_seq) = (20, 3, 5, 1, 30);
        assert_eq!(v.clone().bounded(35), v);
    }
}
