//! Reading a key's shared header without connecting: for `cuframes ls`,
//! `inspect` and monitoring tools. Nothing read here is trusted; the raw
//! values are reported alongside the verdict of validation.

use crate::error::Result;
use crate::resources::{KeyStatus, key_status};
use crate::shm::header::{ShmHeader, StreamInfo, validate_header};
use crate::wire::layout::{MAX_SUBSCRIBER_SLOTS, SUBSCRIBER_FREE, SharedHeader};

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
}

impl Inspection {
    /// The occupied subscriber slots (state not free).
    pub fn subscribers(&self) -> Vec<SubscriberView> {
        let Some(h) = &self.header else {
            return Vec::new();
        };
        (0..MAX_SUBSCRIBER_SLOTS)
            .filter(|&bit| h.subscribers[bit].state != SUBSCRIBER_FREE)
            .map(|bit| {
                let s = &h.subscribers[bit];
                SubscriberView {
                    bit: bit as u32,
                    state: s.state,
                    pid: s.consumer_pid,
                    name: s.name_lossy(),
                    last_seen_seq: s.last_seen_seq,
                    last_ack_ns: s.last_ack_ns,
                    dropped: u64::from_ne_bytes(s.reserved[0..8].try_into().expect("8 bytes")),
                }
            })
            .collect()
    }
}

/// Inspects `key` (runtime directory as in
/// [`crate::resources::runtime_dir_candidates`]).
pub fn inspect(key: &str, runtime_dir: Option<&std::path::Path>) -> Result<Inspection> {
    let status = key_status(key, runtime_dir)?;
    // A live key whose /dev/shm is another IPC namespace's (another
    // container): ask its publisher for the header over the socket.
    let opened = ShmHeader::open_read_only(&status.paths.shm_name).or_else(|e| {
        if e.kind() == crate::error::ErrorKind::NotFound && status.live {
            crate::subscriber::handshake::fetch_header(&status.paths, std::time::Duration::from_secs(2))
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
