//! The subscriber: handshake (spec §4.1), then frames by seq, woken by the
//! publisher's eventfd.

pub(crate) mod handshake;
mod lease;
mod read_ahead;
mod reader;

use std::path::PathBuf;
use std::time::Duration;

pub use lease::{FrameLease, PlaneView};

use self::read_ahead::ReadAhead;
use self::reader::Reader;
use crate::error::{Error, ErrorKind, Result};
use crate::memory::CudaBinding;
use crate::platform::clock;
use crate::shm::header::StreamInfo;

/// Which frames a subscriber receives (HELLO_REQ `mode`, D9).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SubscriberMode {
    /// Every frame, in order; frames the ring lost are counted as dropped.
    #[default]
    Sequential,
    /// Always the newest frame; older unread frames are skipped (and
    /// ACKed, so STRICT_WAIT never waits on them).
    Latest,
}

impl SubscriberMode {
    /// The wire number.
    pub fn wire(self) -> u32 {
        match self {
            SubscriberMode::Sequential => 0,
            SubscriberMode::Latest => 1,
        }
    }

    /// The mode for a wire number.
    pub fn from_wire(value: u32) -> Option<SubscriberMode> {
        match value {
            0 => Some(SubscriberMode::Sequential),
            1 => Some(SubscriberMode::Latest),
            _ => None,
        }
    }
}

/// Whether frames are handed out as the shared slots or as private copies
/// (D25). The default is [`crate::defaults::COPY`], `Auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyMode {
    /// Always the shared slot itself: no copy. A consumer that holds frames
    /// holds slots: under STRICT_WAIT the publisher waits (and drops it after
    /// its ACK timeout) once no slot is free; under DROP_OLDEST held frames
    /// may be overwritten ([`FrameLease::is_intact`]).
    Never,
    /// The shared slot while that is safe, else a private copy (the slot is
    /// released at once): under STRICT_WAIT a copy when holding the slot
    /// would leave the publisher no free slot; under DROP_OLDEST always a
    /// copy (a held slot could be overwritten). Never stalls, never tears.
    Auto,
    /// Always a private copy; the slot is released at once.
    Always,
}

impl Default for CopyMode {
    fn default() -> CopyMode {
        crate::defaults::COPY
    }
}

impl CopyMode {
    /// Parses "never", "auto" or "always".
    pub fn parse(name: &str) -> Result<CopyMode> {
        match name.to_ascii_lowercase().as_str() {
            "never" => Ok(CopyMode::Never),
            "auto" => Ok(CopyMode::Auto),
            "always" => Ok(CopyMode::Always),
            _ => Err(Error::invalid(format!(
                "unknown copy mode '{name}' (never, auto or always)"
            ))),
        }
    }
}

/// How to subscribe. Start from [`SubscriberConfig::new`].
#[derive(Clone, Debug)]
pub struct SubscriberConfig {
    /// The publisher's key.
    pub key: String,
    /// Shown to the publisher and in `cuframes inspect` (≤ 31 bytes).
    pub name: String,
    /// Frame selection.
    pub mode: SubscriberMode,
    /// Bound on the whole handshake (CUDA memory: the CUDA context is made
    /// and the slots mapped meanwhile).
    pub connect_timeout: Duration,
    /// The caller's CUDA context and stream (CUDA memory only).
    pub cuda: Option<CudaBinding>,
    /// CUDA device ordinal: sent in HELLO_REQ, and the device whose primary
    /// context maps CUDA frames when no context is given (-1 = the current
    /// context, else device 0).
    pub cuda_device: i32,
    /// Directory to find the socket in instead of `$CUFRAMES_RUNTIME_DIR` /
    /// the default search (D5).
    pub runtime_dir: Option<PathBuf>,
    /// Shared slots or private copies (default: [`CopyMode::Auto`],
    /// [`crate::defaults::COPY`]).
    pub copy: CopyMode,
    /// Read-ahead (D26), under DROP_OLDEST: a thread takes frames
    /// as they come and queues up to this many for `next`, so a consumer
    /// that is starting or briefly slow loses nothing (use it with
    /// [`CopyMode::Auto`]). Default 32 ([`crate::defaults::READ_AHEAD`]);
    /// 0: no thread. Ignored under STRICT_WAIT, where the publisher waits
    /// for a slow consumer instead, and in [`SubscriberMode::Latest`], which
    /// asks for the newest frame, not the oldest queued one.
    pub read_ahead: usize,
    /// While no publisher is there, make the CUDA context this subscriber
    /// would map CUDA frames in (the device's primary context) in the
    /// background, so that it is ready when one comes (issue 27). Default
    /// on; off for a caller that maps CUDA frames in a context of its own,
    /// given only once it sees a CUDA publisher (GStreamer's cuframessrc),
    /// where that context would be made for nothing. Only when `cuda` names
    /// no context; `CUFRAMES_CUDA_WARMUP=0` turns it off process-wide.
    pub cuda_warm_up: bool,
    /// Where the library's messages about this subscriber go (while it
    /// connects, and from its read-ahead thread); None: the process's
    /// logger ([`crate::log`]).
    pub logger: Option<crate::log::Logger>,
}

impl SubscriberConfig {
    /// Defaults ([`crate::defaults`]): name `"sub-<pid>"`, sequential, 30 s
    /// handshake, copy auto, read-ahead 32.
    pub fn new(key: impl Into<String>) -> SubscriberConfig {
        SubscriberConfig {
            key: key.into(),
            name: format!("sub-{}", std::process::id()),
            mode: SubscriberMode::Sequential,
            connect_timeout: crate::defaults::CONNECT_TIMEOUT,
            cuda: None,
            cuda_device: -1,
            runtime_dir: None,
            copy: crate::defaults::COPY,
            read_ahead: crate::defaults::READ_AHEAD,
            cuda_warm_up: true,
            logger: None,
        }
    }
}

/// Counters of a subscriber.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubscriberStats {
    /// Frames handed out by `next`.
    pub received: u64,
    /// Frames published after we joined that we never got (lapped or skipped).
    pub dropped: u64,
    /// Leases the publisher overwrote before they were released.
    pub overwritten: u64,
    /// Frames handed out as private copies (counted in `received`).
    pub copied: u64,
    /// Copies discarded because the publisher rewrote the slot while it was
    /// copied (counted in `dropped`).
    pub torn: u64,
    /// Frames whose side data was malformed (handed out without it).
    pub side_data_rejected: u64,
}
/// The TIMEOUT error of a `next` that waited `timeout` for nothing.
fn no_frame(key: &str, timeout: Option<Duration>) -> Error {
    Error::new(
        crate::error::ErrorKind::Timeout,
        format!(
            "no frame from '{key}' within {} ms",
            timeout.unwrap_or_default().as_millis()
        ),
    )
}

/// A connected subscriber.
#[derive(Debug)]
pub struct Subscriber {
    key: String,
    info: StreamInfo,
    bit: u32,
    initial_seq: u64,
    peer_device: Option<i32>,
    source: Source,
}

/// Where `next` gets its frames.
#[derive(Debug)]
enum Source {
    /// From the ring, in the caller's thread.
    Direct(Box<Reader>),
    /// From the read-ahead queue.
    Ahead(ReadAhead),
}

impl Subscriber {
    /// Connects to the publisher of `config.key` and completes the handshake.
    ///
    /// NOT_FOUND when there is no publisher yet; a caller that tries again
    /// is expected, so the library makes the device's primary CUDA context
    /// meanwhile (when a CUDA driver is there and `config.cuda` names no
    /// context) and lets go of it once connected. `CUFRAMES_CUDA_WARMUP=0`
    /// turns that off.
    pub fn connect(config: SubscriberConfig) -> Result<Subscriber> {
        let logger = config.logger.clone();
        crate::log::with_logger(logger.as_ref(), || Self::connect_logged(config))
    }

    /// Whether this process is still making the CUDA context that a
    /// `connect` which found no publisher began. A caller that retries until
    /// a deadline should not count this time against its wait for a
    /// publisher: on a GPU where many processes start at once the publisher
    /// makes its own context in the same queue of the driver and cannot
    /// appear sooner (48 processes started at once on an H200 had theirs after 9.5 s).
    pub fn warming_up() -> bool {
        crate::memory::cuda::warm::warming_up()
    }

    /// Starts making, in the background, the CUDA context a subscriber with
    /// this config would map CUDA frames in (the device's primary context),
    /// as `connect` does when it finds no publisher: for a caller that waits
    /// for a publisher without connecting yet (one that looks the key up
    /// first). Nothing happens when `config.cuda` names a context, without a
    /// CUDA driver, or with `CUFRAMES_CUDA_WARMUP=0`; the next successful
    /// `connect` lets go of it.
    pub fn warm_up(config: &SubscriberConfig) {
        crate::testhook::announce();
        if config.cuda.is_none() {
            crate::memory::cuda::warm::start_while_waiting(config.cuda_device);
        }
    }

    fn connect_logged(config: SubscriberConfig) -> Result<Subscriber> {
        crate::testhook::announce();
        let reader = match handshake::connect(&config) {
            Ok(reader) => reader,
            Err(e) => {
                // No publisher yet: make the CUDA context while waiting for
                // one (the caller tries again), not after it came (issue 27).
                if e.kind() == ErrorKind::NotFound && config.cuda_warm_up {
                    Self::warm_up(&config);
                }
                return Err(e);
            }
        };
        crate::memory::cuda::warm::settle();
        let (key, info) = (reader.key.clone(), reader.info.clone());
        let (bit, initial_seq) = (reader.ring.bit, reader.initial_seq);
        let peer_device = reader.ring.mapping.peer_device();
        // A queue hands out the oldest frame first: in LATEST mode, which asks
        // for the newest, there is none (nor under STRICT_WAIT, D26).
        let source = match config.read_ahead {
            depth if depth > 0 && !reader.strict && config.mode == SubscriberMode::Sequential => {
                Source::Ahead(ReadAhead::start(reader, depth, config.logger.clone())?)
            }
            _ => Source::Direct(Box::new(reader)),
        };
        crate::testhook::stall_at("sub-connected");
        Ok(Subscriber {
            key,
            info,
            bit,
            initial_seq,
            peer_device,
            source,
        })
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The validated header: geometry, ring, policy, memory, frame rate.
    pub fn info(&self) -> &StreamInfo {
        &self.info
    }

    /// CUDA memory on another GPU than this subscriber's context: the
    /// publisher's device ordinal (this process's numbering), whose frames
    /// are read over peer access (D21). None on the same GPU, for
    /// host memory, and when the publisher did not name its GPU.
    pub fn cuda_peer_device(&self) -> Option<i32> {
        self.peer_device
    }

    /// The subscriber bit the publisher assigned (1..=31).
    pub fn bit(&self) -> u32 {
        self.bit
    }

    /// `global_seq` at the handshake: the first frame delivered is the one after.
    pub fn initial_seq(&self) -> u64 {
        self.initial_seq
    }

    /// Whether the publisher announced its shutdown (SHUTDOWN), as opposed
    /// to vanishing (crash) or dropping this subscriber.
    pub fn publisher_shut_down(&self) -> bool {
        match &self.source {
            Source::Direct(reader) => reader.shut_down,
            Source::Ahead(ahead) => ahead.publisher_shut_down(),
        }
    }

    /// Counters. With read-ahead, frames still queued count as received.
    pub fn stats(&self) -> SubscriberStats {
        match &self.source {
            Source::Direct(reader) => reader.stats(),
            Source::Ahead(ahead) => ahead.stats(),
        }
    }

    /// Frames read ahead and not yet handed out (0 without read-ahead).
    pub fn queued(&self) -> usize {
        match &self.source {
            Source::Direct(_) => 0,
            Source::Ahead(ahead) => ahead.queued(),
        }
    }

    /// The next frame, waiting up to `timeout` (None = forever).
    ///
    /// `Timeout` when nothing came; `Disconnected` once the publisher shut
    /// down, died, or dropped us (and on every call after).
    pub fn next(&mut self, timeout: Option<Duration>) -> Result<FrameLease> {
        match &mut self.source {
            Source::Direct(reader) => reader.next(timeout),
            Source::Ahead(ahead) => ahead.next(timeout),
        }
    }

    /// CLOCK_MONOTONIC now, for latency against [`FrameLease::publish_mono_ns`].
    pub fn now_mono_ns() -> u64 {
        clock::monotonic_ns()
    }
}
