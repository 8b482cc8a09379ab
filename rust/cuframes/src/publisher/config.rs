//! How a publisher is configured: [`PublisherConfig`], its policies and
//! the counters it reports.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::format::PixelFormat;
use crate::memory::{CudaBinding, CudaShareRequest, MemoryRequest};
use crate::wire::layout::{POLICY_DROP_OLDEST, POLICY_STRICT_WAIT};

/// What to do when the ring is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Overwrite the oldest slot; slow subscribers lose frames (and learn it).
    #[default]
    DropOldest,
    /// Wait until every active subscriber released the slot's previous frame,
    /// up to the ACK timeout; a subscriber that misses it is dropped.
    StrictWait,
}

impl Policy {
    /// Parses "drop-oldest" or "strict-wait".
    pub fn parse(name: &str) -> Result<Policy> {
        match name.to_ascii_lowercase().replace('_', "-").as_str() {
            "drop-oldest" => Ok(Policy::DropOldest),
            "strict-wait" => Ok(Policy::StrictWait),
            _ => Err(Error::invalid(format!(
                "unknown policy '{name}' (drop-oldest or strict-wait)"
            ))),
        }
    }

    /// The header's `policy` value.
    pub fn wire(self) -> u64 {
        match self {
            Policy::DropOldest => POLICY_DROP_OLDEST,
            Policy::StrictWait => POLICY_STRICT_WAIT,
        }
    }

    /// "drop-oldest" or "strict-wait".
    pub fn name(self) -> &'static str {
        match self {
            Policy::DropOldest => "drop-oldest",
            Policy::StrictWait => "strict-wait",
        }
    }

    /// The policy for a header value.
    pub fn from_wire(value: u64) -> Option<Policy> {
        match value {
            POLICY_DROP_OLDEST => Some(Policy::DropOldest),
            POLICY_STRICT_WAIT => Some(Policy::StrictWait),
            _ => None,
        }
    }
}

/// How to create a publisher. Start from [`PublisherConfig::new`].
#[derive(Clone, Debug)]
pub struct PublisherConfig {
    /// `^[a-zA-Z0-9_-]{1,63}$`.
    pub key: String,
    /// Pixel format of every frame.
    pub format: PixelFormat,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Slots, 1..=16 (default 4).
    pub ring_size: usize,
    /// Full-ring behaviour (default drop-oldest).
    pub policy: Policy,
    /// STRICT_WAIT: how long a subscriber may hold up the ring (no slot
    /// free for the next frame) before it is dropped (default 1 s).
    pub ack_timeout: Duration,
    /// STRICT_WAIT: how long after joining a subscriber may hold up the ring
    /// before it is dropped, while its consumer is still starting (default
    /// 10 s; D23). Never shorter than `ack_timeout` in effect.
    pub startup_timeout: Duration,
    /// Which memory (default auto).
    pub memory: MemoryRequest,
    /// CUDA memory: how slots are shared with subscribers (default auto:
    /// file descriptors where the GPU supports them, so subscribers in other
    /// containers can map them; D27).
    pub cuda_share: CudaShareRequest,
    /// Frame rate (num, den), advertised to subscribers.
    pub fps: Option<(u32, u32)>,
    /// The caller's CUDA context and stream: slots are allocated in that
    /// context and copies queued on that stream (CUDA memory), or device
    /// frames downloaded with them (host memory).
    pub cuda: Option<CudaBinding>,
    /// CUDA memory without a context in `cuda`: the device whose primary
    /// context holds the slots. -1 (default): the current context, else
    /// device 0's primary context; n ≥ 0: device n's primary context, even
    /// when another context is current. Below -1: INVALID_ARGUMENT.
    /// Subscribers on another GPU read the frames over peer access when
    /// the GPUs can peer (D21).
    pub cuda_device: i32,
    /// How long a connecting subscriber may take to finish its handshake
    /// (default 30 s: it makes its CUDA context meanwhile, which takes
    /// seconds on a busy host).
    pub handshake_timeout: Duration,
    /// EXTERNAL ownership (spec `ownership_mode` 1): the caller's own CUDA
    /// buffers are the slots, one per ring slot, each the base of its own
    /// `cuMemAlloc` allocation of at least `layout.size()` bytes laid out as
    /// `FrameLayout::aligned(format, width, height, PITCH_ALIGNMENT)`.
    /// Frames are published with
    /// [`Publisher::acquire_slot`](crate::Publisher::acquire_slot) /
    /// [`Publisher::commit_slot`](crate::Publisher::commit_slot), with no copy. CUDA memory only.
    pub external_slots: Option<Vec<u64>>,
    /// Directory for socket and lock instead of `$CUFRAMES_RUNTIME_DIR` /
    /// `/run/cuframes` (D5).
    pub runtime_dir: Option<PathBuf>,
    /// A group (name or number) whose members may subscribe besides this
    /// user and root: the socket becomes 0660 and the shared header 0640
    /// with that group (0660 with [`V1Peers::Allow`]), a runtime directory
    /// of ours gets its search bit (D19).
    /// None (default): 0600, this user and root only.
    pub group: Option<String>,
    /// Where the library's messages about this publisher go (its creation
    /// and its control thread); None: the process's logger ([`crate::log`]).
    pub logger: Option<crate::log::Logger>,
    /// Which subscribers that speak plain protocol v1 (ACKing in the named
    /// shared header, which they can all write) are admitted (D33). Default
    /// [`V1Peers::SameUser`].
    pub v1_peers: V1Peers,
}

/// Which protocol-v1 subscribers a publisher admits (D33): those that ACK
/// in the shared header everyone of them can write, not in an area of their
/// own (other implementations, and cuframes before private ACKs). Whatever
/// this says, they cannot change what cuframes subscribers read; among
/// themselves they can (forged ACKs, seqs, counts), as v1 allows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum V1Peers {
    /// None: every subscriber must ACK in its own area.
    Refuse,
    /// Only this user's and root's (who could write the header anyway); a
    /// group's members are refused, and the named header is 0640 to them.
    #[default]
    SameUser,
    /// Every admitted peer; with a group, the named header becomes 0660 so
    /// that its members can ACK in it.
    Allow,
}

impl V1Peers {
    /// Parses "refuse", "same_user" (or "same-user") or "allow".
    pub fn parse(name: &str) -> Result<V1Peers> {
        match name.to_ascii_lowercase().replace('_', "-").as_str() {
            "refuse" => Ok(V1Peers::Refuse),
            "same-user" => Ok(V1Peers::SameUser),
            "allow" => Ok(V1Peers::Allow),
            _ => Err(Error::invalid(format!(
                "unknown v1_peers '{name}' (refuse, same_user or allow)"
            ))),
        }
    }

    /// "refuse", "same_user" or "allow" (FFmpeg's spelling).
    pub fn name(self) -> &'static str {
        match self {
            V1Peers::Refuse => "refuse",
            V1Peers::SameUser => "same_user",
            V1Peers::Allow => "allow",
        }
    }
}

impl PublisherConfig {
    /// A config with defaults for everything but the key and geometry.
    pub fn new(key: impl Into<String>, format: PixelFormat, width: u32, height: u32) -> PublisherConfig {
        PublisherConfig {
            key: key.into(),
            format,
            width,
            height,
            ring_size: crate::defaults::RING_SIZE,
            policy: Policy::DropOldest,
            ack_timeout: crate::defaults::ACK_TIMEOUT,
            startup_timeout: crate::defaults::STARTUP_TIMEOUT,
            memory: MemoryRequest::Auto,
            cuda_share: CudaShareRequest::Auto,
            fps: None,
            cuda: None,
            cuda_device: -1,
            handshake_timeout: crate::defaults::HANDSHAKE_TIMEOUT,
            external_slots: None,
            runtime_dir: None,
            group: None,
            logger: None,
            v1_peers: V1Peers::SameUser,
        }
    }
}

/// Counters of a publisher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PublisherStats {
    /// Frames published.
    pub published: u64,
    /// Subscribers dropped for missing the ACK timeout.
    pub ack_timeouts: u64,
    /// Connections closed for protocol violations or slow handshakes.
    pub rejected_connections: u64,
    /// STRICT_WAIT: publishes that found their slot still held and waited.
    pub ack_waits: u64,
    /// STRICT_WAIT: time spent in those waits, in nanoseconds.
    pub ack_wait_ns: u64,
    /// CUDA slots: frames copied in by one launch of the library's copy
    /// kernel rather than by the driver's copy calls (a source the kernel
    /// may not read, or of another layout, takes the calls).
    pub kernel_copies: u64,
}
