//! The publisher: owns a key, the shared header, the ring's slots and the
//! control thread; publishes frames per spec §5.

mod control;
mod headers;
mod registry;

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use nix::sys::eventfd::{EfdFlags, EventFd};
use std::time::{Duration, Instant};

pub use registry::SubscriberInfo;

use self::control::{ControlSetup, ControlStats, ControlThread};
use self::headers::Headers;
use self::registry::{Registry, Table};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{FrameLayout, PixelFormat};
use crate::memory::{
    CudaBinding, CudaShareRequest, DevicePlane, HostPlane, MemoryKind, MemoryRequest, PlanePtr, SlotPool,
    create_pool,
};
use crate::platform::access;
use crate::props::FrameProps;
use crate::resources::{KeyClaim, KeyPaths};
use crate::shm::header::{ShmHeader, StreamInfo, validate_header};
use crate::shm::ring::{SlotState, choose_slot};
use crate::shm::side_area::SideArea;
use crate::side_data::{self, SIDE_DATA_CAPACITY};
use crate::wire::layout::{
    FrameMeta, MAGIC, MAX_RING_SIZE, MAX_SUBSCRIBER_SLOTS, OWNERSHIP_EXTERNAL, OWNERSHIP_LIBRARY,
    POLICY_DROP_OLDEST, POLICY_STRICT_WAIT, PROTOCOL_VERSION, SharedHeader,
};
use crate::wire::message::{HelloAccept, Message, fd_purpose};

/// Row alignment of slots (CUDA's texture pitch alignment; also good for SIMD).
pub const PITCH_ALIGNMENT: usize = 256;

/// Default of [`PublisherConfig::startup_timeout`], in ms.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 10_000;

/// Where the next frame goes (see [`Publisher::acquire_slot`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotTarget {
    /// Ring slot index.
    pub index: usize,
    /// Start of each plane (pitches: [`Publisher::layout`]).
    pub planes: Vec<PlanePtr>,
}

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
    /// Frames are published with [`Publisher::acquire_slot`] /
    /// [`Publisher::commit_slot`], with no copy. CUDA memory only.
    pub external_slots: Option<Vec<u64>>,
    /// Directory for socket and lock instead of `$CUFRAMES_RUNTIME_DIR` /
    /// `/run/cuframes` (D5).
    pub runtime_dir: Option<PathBuf>,
    /// A group (name or number) whose members may subscribe besides this
    /// user and root: socket and shared header become 0660 with that group,
    /// a runtime directory of ours gets its search bit (D19).
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
    /// Parses "refuse", "same-user" (or "same_user") or "allow".
    pub fn parse(name: &str) -> Result<V1Peers> {
        match name.to_ascii_lowercase().replace('_', "-").as_str() {
            "refuse" => Ok(V1Peers::Refuse),
            "same-user" => Ok(V1Peers::SameUser),
            "allow" => Ok(V1Peers::Allow),
            _ => Err(Error::invalid(format!(
                "unknown v1_peers '{name}' (refuse, same-user or allow)"
            ))),
        }
    }

    /// "refuse", "same-user" or "allow".
    pub fn name(self) -> &'static str {
        match self {
            V1Peers::Refuse => "refuse",
            V1Peers::SameUser => "same-user",
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
            ring_size: 4,
            policy: Policy::DropOldest,
            ack_timeout: Duration::from_millis(1000),
            startup_timeout: Duration::from_millis(DEFAULT_STARTUP_TIMEOUT_MS),
            memory: MemoryRequest::Auto,
            cuda_share: CudaShareRequest::Auto,
            fps: None,
            cuda: None,
            cuda_device: -1,
            handshake_timeout: Duration::from_secs(30),
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
}

/// Publishes frames under a key. Dropping it sends SHUTDOWN to every
/// subscriber and removes the key's socket and shared memory.
#[derive(Debug)]
pub struct Publisher {
    key: String,
    layout: FrameLayout,
    ring_size: usize,
    policy: Policy,
    ack_timeout: Duration,
    startup_timeout: Duration,
    /// The seq each slot holds (0: none yet), from our own bookkeeping.
    slot_seqs: [u64; MAX_RING_SIZE],
    pool: Box<dyn SlotPool>,
    registry: Arc<Registry>,
    control: ControlThread,
    control_stats: Arc<ControlStats>,
    next_seq: u64,
    /// Rung by subscribers with an ACK area after an ACK while we wait (D33).
    doorbell: EventFd,
    /// CLOCK_MONOTONIC ns after which a publish copies subscribers' reports.
    next_mirror_ns: u64,
    /// A slot handed out by `acquire_slot`, not yet committed.
    acquired: Option<usize>,
    /// The stream as subscribers see it (D18: EXTERNAL ownership here).
    info: StreamInfo,
    /// Properties given to every frame from now on (D29).
    props: Option<FrameProps>,
    /// The side-data area (D30) and the next frame's side data, encoded.
    side_area: SideArea,
    pending_side_data: Vec<u8>,
    stats: PublisherStats,
    claim: KeyClaim,
}

impl Publisher {
    /// Claims the key (recovering stale resources of a dead publisher),
    /// creates slots, shared header and socket, and starts serving
    /// subscribers.
    pub fn create(config: PublisherConfig) -> Result<Publisher> {
        let logger = config.logger.clone();
        crate::log::with_logger(logger.as_ref(), || Self::create_logged(config))
    }

    fn create_logged(config: PublisherConfig) -> Result<Publisher> {
        crate::testhook::announce();
        if config.ring_size == 0 || config.ring_size > MAX_RING_SIZE {
            return Err(Error::invalid(format!(
                "ring size {} is outside 1..={MAX_RING_SIZE}",
                config.ring_size
            )));
        }
        if config.policy == Policy::StrictWait && config.ack_timeout.is_zero() {
            return Err(Error::invalid("strict-wait needs an ACK timeout above 0 ms"));
        }
        if let Some((num, den)) = config.fps
            && (num == 0 || den == 0)
        {
            return Err(Error::invalid(format!("frame rate {num}/{den} is not positive")));
        }
        if config.cuda_device < -1 {
            return Err(Error::invalid(format!(
                "cuda_device {} is no device ordinal (-1 = the current context, else device 0; n >= 0 = device n)",
                config.cuda_device
            )));
        }
        let memory = config.memory.resolve()?;
        let layout = FrameLayout::aligned(config.format, config.width, config.height, PITCH_ALIGNMENT)?;
        let group = config.group.as_deref().map(access::resolve_group).transpose()?;
        let paths = KeyPaths::for_publisher(&config.key, config.runtime_dir.as_deref(), group)?;
        let claim = KeyClaim::acquire(&paths)?;
        let pool = match &config.external_slots {
            None => create_pool(
                memory,
                &config.key,
                &layout,
                config.ring_size,
                config.cuda,
                config.cuda_device,
                config.cuda_share,
            )?,
            Some(ptrs) => {
                if config.cuda_share == CudaShareRequest::Fd {
                    return Err(Error::invalid(
                        "external slots are the caller's cuMemAlloc buffers, shared with CUDA IPC: use cuda_share auto or ipc",
                    ));
                }
                if memory != MemoryKind::Cuda || ptrs.len() != config.ring_size {
                    return Err(Error::invalid(format!(
                        "external slots need CUDA memory and exactly ring_size ({}) device buffers, got {} on {} memory",
                        config.ring_size,
                        ptrs.len(),
                        memory.name()
                    )));
                }
                crate::memory::external_pool(&layout, ptrs, config.cuda, config.cuda_device)?
            }
        };
        let memory_kind = pool.cuda_share().map_or(memory.wire(), |share| share.wire());
        let meta = frame_meta(&layout, memory_kind, config.fps, pool.device_uuid())?;
        let ownership = if config.external_slots.is_some() {
            OWNERSHIP_EXTERNAL
        } else {
            OWNERSHIP_LIBRARY
        };
        let initial = initial_header(&config, &meta, pool.as_ref());
        // What subscribers will read, read back the way they do.
        let info = validate_header(&SharedHeader {
            magic: MAGIC,
            ..initial
        })?;
        let group_writes = config.v1_peers == V1Peers::Allow;
        let headers = Headers::create(&config.key, &paths.shm_name, &initial, group, group_writes)?;
        let listener = crate::resources::bind_secured(&paths.socket, group)?;
        let doorbell = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| Error::os("eventfd (ACK doorbell)", e))?;
        let doorbell_for_peers = doorbell
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Error::io("dup eventfd", &e))?;
        let named_for_v1 = ShmHeader::open_for_sharing(&paths.shm_name)?;
        let sealed_for_peers = headers
            .sealed_fd()
            .try_clone_to_owned()
            .map_err(|e| Error::io("dup the sealed header", &e))?;
        let registry = Arc::new(Registry::new(&config.key, headers));
        let (side_area, side_fd) = SideArea::create(&config.key)?;
        let control_stats = Arc::new(ControlStats::default());
        let control = ControlThread::spawn(ControlSetup {
            listener,
            registry: registry.clone(),
            hello: HelloAccept {
                ring_size: config.ring_size as u32,
                ownership_mode: ownership as u32,
                meta,
                shm_path: paths.shm_name.clone(),
                early_fds: 0,
                granted: 0,
            },
            shared_fds: pool.shared_fds()?,
            headers_to_send: [sealed_for_peers, named_for_v1],
            early_fds: early_fds(pool.as_ref(), side_fd)?,
            doorbell: doorbell_for_peers,
            v1_peers: config.v1_peers,
            handshake_timeout: config.handshake_timeout,
            stats: control_stats.clone(),
            owner_uid: nix::unistd::geteuid().as_raw(),
            group,
            logger: config.logger.clone(),
        })?;
        Ok(Publisher {
            key: config.key,
            layout,
            ring_size: config.ring_size,
            policy: config.policy,
            ack_timeout: config.ack_timeout,
            startup_timeout: config.startup_timeout,
            slot_seqs: [0; MAX_RING_SIZE],
            pool,
            registry,
            control,
            control_stats,
            next_seq: 1,
            doorbell,
            next_mirror_ns: 0,
            acquired: None,
            info,
            props: None,
            side_area,
            pending_side_data: Vec::new(),
            stats: PublisherStats::default(),
            claim,
        })
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The stream as its subscribers see it: geometry, ring size, policy,
    /// ownership, memory and frame rate, as written in the shared header.
    pub fn info(&self) -> &StreamInfo {
        &self.info
    }

    /// Frame geometry (slot pitches included).
    pub fn layout(&self) -> &FrameLayout {
        &self.layout
    }

    /// CUDA memory: how the slots are shared (D27); None for host memory.
    pub fn cuda_share(&self) -> Option<crate::memory::CudaShare> {
        self.pool.cuda_share()
    }

    /// The properties every frame published from now on carries (colour
    /// description, aspect ratio, field order, key frame, duration: what a
    /// subscriber's encoder reads); None: none (D29).
    pub fn set_frame_props(&mut self, props: Option<FrameProps>) {
        self.props = props;
    }

    /// Attaches side data (HDR metadata, captions, SEI, timecodes: see
    /// [`crate::side_data_kind`]) to the next frame published; it is cleared
    /// once that frame is out (D30). A frame carries at most
    /// [`crate::SIDE_DATA_CAPACITY`] bytes of it (8 per entry included);
    /// what would not fit is refused with INVALID_ARGUMENT, the rest kept.
    pub fn add_side_data(&mut self, kind: u16, bytes: &[u8]) -> Result<()> {
        side_data::append(&mut self.pending_side_data, kind, bytes, SIDE_DATA_CAPACITY)
    }

    /// Drops the side data added for the next frame.
    pub fn clear_side_data(&mut self) {
        self.pending_side_data.clear();
    }

    /// Where the slots live.
    pub fn memory(&self) -> MemoryKind {
        self.pool.kind()
    }

    /// The ring size.
    pub fn ring_size(&self) -> usize {
        self.ring_size
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Paths of the key's resources.
    pub fn paths(&self) -> &KeyPaths {
        self.claim.paths()
    }

    /// Counters.
    pub fn stats(&self) -> PublisherStats {
        PublisherStats {
            rejected_connections: self.control_stats.rejected.load(Ordering::Relaxed),
            ..self.stats
        }
    }

    /// Seq the next publish will get (published seqs are 1, 2, 3, …).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Number of active subscribers.
    pub fn subscriber_count(&self) -> usize {
        self.registry.active().count_ones() as usize
    }

    /// The active subscribers.
    pub fn subscribers(&self) -> Vec<SubscriberInfo> {
        self.registry.subscribers()
    }

    /// Waits until at least `count` subscribers are active.
    pub fn wait_for_subscribers(&self, count: usize, timeout: Duration) -> Result<()> {
        if count > MAX_SUBSCRIBER_SLOTS - 1 {
            return Err(Error::invalid(format!(
                "cannot wait for {count} subscribers (at most 31)"
            )));
        }
        let deadline = Instant::now() + timeout;
        while self.subscriber_count() < count {
            if Instant::now() >= deadline {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "'{}': {} of {count} subscribers after {} ms",
                        self.key,
                        self.subscriber_count(),
                        timeout.as_millis()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Publishes a frame copied from host planes; returns its seq.
    /// Not under EXTERNAL ownership (see [`Publisher::acquire_slot`]).
    pub fn publish(&mut self, planes: &[HostPlane<'_>], pts_ns: i64) -> Result<u64> {
        self.refuse_copy_into_external()?;
        let slot = self.begin();
        self.pool.write_host(slot, self.next_seq, &self.layout, planes)?;
        Ok(self.commit(slot, pts_ns))
    }

    /// Publishes a frame copied from CUDA device planes (in the caller's
    /// context, ordered on its stream); returns its seq. Host memory
    /// downloads the frame first. Not under EXTERNAL ownership (see
    /// [`Publisher::acquire_slot`]).
    pub fn publish_device(&mut self, planes: &[DevicePlane], pts_ns: i64) -> Result<u64> {
        self.refuse_copy_into_external()?;
        let slot = self.begin();
        self.pool
            .write_device(slot, self.next_seq, &self.layout, planes)?;
        Ok(self.commit(slot, pts_ns))
    }

    /// D18: the library never copies into the caller's buffers; under
    /// EXTERNAL ownership frames are written by the caller and published
    /// with `acquire_slot` / `commit_slot`. Checked before a slot is picked,
    /// so a refused call changes nothing.
    fn refuse_copy_into_external(&self) -> Result<()> {
        if self.info.ownership_mode == OWNERSHIP_EXTERNAL {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "'{}' publishes the caller's own buffers (EXTERNAL ownership), which the library never copies into: write the frame into the slot from acquire_slot and call commit_slot",
                    self.key
                ),
            ));
        }
        Ok(())
    }

    /// Zero-copy publish, step 1: the slot the next frame goes to (after the
    /// STRICT_WAIT wait), with the address of each plane — device pointers
    /// for CUDA memory (the caller's own buffers under EXTERNAL ownership),
    /// host pointers for host memory. Write the frame there, then call
    /// [`Publisher::commit_slot`].
    pub fn acquire_slot(&mut self) -> Result<SlotTarget> {
        if let Some(index) = self.acquired {
            return Err(Error::invalid(format!(
                "slot {index} was acquired and not committed yet"
            )));
        }
        let index = self.begin();
        self.acquired = Some(index);
        let planes = (0..self.layout.planes().len())
            .map(|p| self.pool.slot_plane(index, &self.layout, p))
            .collect();
        Ok(SlotTarget { index, planes })
    }

    /// Zero-copy publish, step 2: publishes what was written into the slot
    /// from [`Publisher::acquire_slot`] (CUDA: work queued on the caller's
    /// stream before this call is ordered before every subscriber's read).
    pub fn commit_slot(&mut self, pts_ns: i64) -> Result<u64> {
        let index = self
            .acquired
            .take()
            .ok_or_else(|| Error::invalid("commit_slot without acquire_slot"))?;
        self.pool.written_in_place(index, self.next_seq)?;
        Ok(self.commit(index, pts_ns))
    }

    /// Publishes a frame written in place: `fill` gets the slot's planes
    /// (each `pitch × rows` bytes, see [`Publisher::layout`]). Host memory
    /// only; returns the seq.
    pub fn publish_with(&mut self, pts_ns: i64, fill: impl FnOnce(&mut [&mut [u8]])) -> Result<u64> {
        if self.pool.kind() != MemoryKind::Host {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "publish_with needs host memory; use publish() for other memory",
            ));
        }
        let slot = self.begin();
        let layout = self.layout.clone();
        let mut planes = self
            .pool
            .planes_mut(slot, &layout)
            .expect("host memory is host-addressable");
        fill(&mut planes);
        Ok(self.commit(slot, pts_ns))
    }

    /// Waits until every active subscriber has released every frame still
    /// in the ring (or left), e.g. before destroying a publisher whose last
    /// frames must arrive. Subscribers are not dropped on timeout.
    pub fn flush(&self, timeout: Duration) -> Result<()> {
        self.wait_until_none(timeout, Self::owing_acks, |pending| {
            format!("{pending} subscriber(s) still hold frames")
        })
    }

    /// Waits until every active subscriber has taken the newest frame (it
    /// may still hold it), released every frame, or left: then shutting down
    /// loses no frame for it, as leases stay readable after the publisher is
    /// gone. Unlike [`Publisher::flush`] this does not wait for a consumer
    /// that keeps its last frame until it sees the end of the stream (FFmpeg
    /// does). A subscriber that never writes the taken seq (extension, see
    /// docs/protocol-notes.md) is waited for as by `flush`.
    pub fn wait_delivered(&self, timeout: Duration) -> Result<()> {
        let newest = self.next_seq - 1;
        let not_taken = |p: &Self| {
            let owing = p.owing_acks();
            let table = p.registry.lock();
            (0..32usize)
                .filter(|&bit| owing & (1 << bit) != 0)
                .filter(|&bit| table.taken(bit, &p.registry.headers) < newest)
                .fold(0u32, |acc, bit| acc | (1 << bit))
        };
        self.wait_until_none(timeout, not_taken, |pending| {
            format!("{pending} subscriber(s) have not taken frame {newest}")
        })
    }

    /// Subscribers that still owe an ACK for some frame in the ring.
    fn owing_acks(&self) -> u32 {
        (0..self.ring_size).fold(0, |acc, slot| acc | self.missing_acks(slot))
    }

    /// Polls `pending` (a subscriber bitmask) until it is empty, or fails
    /// with TIMEOUT and `what(count)` after `timeout`.
    fn wait_until_none(
        &self,
        timeout: Duration,
        pending: impl Fn(&Self) -> u32,
        what: impl Fn(u32) -> String,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut backoff = Backoff::new();
        loop {
            let left = pending(self);
            if left == 0 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "'{}': {} after {} ms",
                        self.key,
                        what(left.count_ones()),
                        timeout.as_millis()
                    ),
                ));
            }
            backoff.wait();
        }
    }

    /// Bits that still owe an ACK for slot `slot`'s current frame.
    fn missing_acks(&self, slot: usize) -> u32 {
        self.owing(&self.registry.lock(), slot)
    }

    /// [`Publisher::missing_acks`] with the table locked.
    fn owing(&self, table: &Table, slot: usize) -> u32 {
        let need = table.required[slot] & self.registry.active();
        need & !table.released(slot, self.slot_seqs[slot], &self.registry.headers, need)
    }

    /// Picks the next slot (waiting for one under STRICT_WAIT) and marks
    /// it invalid so readers of its old frame see the overwrite.
    fn begin(&mut self) -> usize {
        let slot = self.next_slot();
        self.registry.headers.mark_writing(slot);
        crate::testhook::abort_at("pub-mid-publish");
        slot
    }

    /// D4, D22, D23: the slot for the next frame. Under STRICT_WAIT,
    /// when every slot is still owed an ACK, sleeps until one is free; a
    /// subscriber that holds up the ring longer than its time (the ACK
    /// timeout, or the start-up timeout while it is new) is dropped.
    fn next_slot(&mut self) -> usize {
        let preferred = (self.next_seq % self.ring_size as u64) as usize;
        let strict = self.policy == Policy::StrictWait;
        let mut waiting_since: Option<Instant> = None;
        let mut doorbell = Doorbell::default();
        loop {
            let expired = waiting_since.map_or(0, |since| self.expired(since));
            let states = self.slot_states(expired, !strict);
            if let Some(slot) = choose_slot(&states, preferred, strict) {
                if let Some(since) = waiting_since {
                    self.registry.headers.stop_waiting_for_acks();
                    self.stats.ack_waits += 1;
                    self.stats.ack_wait_ns += since.elapsed().as_nanos() as u64;
                }
                let late = self.missing_acks(slot) & expired;
                if late != 0 {
                    self.drop_late(slot, late);
                }
                return slot;
            }
            let since = *waiting_since.get_or_insert_with(Instant::now);
            doorbell.progress(states.iter().map(|s| s.owing.count_ones()).sum());
            let ticket = self.registry.headers.ack_ticket();
            // An ACK between the look above and the ticket changed nothing
            // the ticket would show: look once more before sleeping.
            if choose_slot(&self.slot_states(self.expired(since), false), preferred, true).is_none() {
                self.sleep_for_ack(ticket, &mut doorbell);
            }
        }
    }

    /// Sleeps until an ACK may have freed a slot, at most 2 ms (v1
    /// subscribers of older versions ACK without waking anyone): on the
    /// named header's futex when only v1 subscribers are connected, else on
    /// the doorbell, which any subscriber with an ACK area can ring — after
    /// rings that freed nothing it pauses first, so that a peer ringing in
    /// a loop costs the publisher at most one look per millisecond.
    fn sleep_for_ack(&self, ticket: u32, doorbell: &mut Doorbell) {
        const MOST: Duration = Duration::from_millis(2);
        if self.registry.lock().private_bits() == 0 {
            self.registry.headers.sleep_for_ack(ticket, MOST);
            return;
        }
        if let Some(pause) = doorbell.pause() {
            std::thread::sleep(pause);
        }
        if crate::channel::wait_readable(self.doorbell.as_fd(), Some(MOST)).unwrap_or(false) {
            let _ = self.doorbell.read();
            doorbell.rang();
        }
    }

    /// The slots as the choice sees them: what each holds, who still owes
    /// it an ACK (minus `given_up`), and (for drop-oldest) who holds it.
    fn slot_states(&self, given_up: u32, want_held: bool) -> Vec<SlotState> {
        let table = self.registry.lock();
        let active = self.registry.active();
        let mut taken = [0u64; MAX_SUBSCRIBER_SLOTS];
        if want_held {
            for bit in (1..32usize).filter(|&bit| active & (1 << bit) != 0) {
                taken[bit] = table.taken(bit, &self.registry.headers);
            }
        }
        (0..self.ring_size)
            .map(|slot| {
                let seq = self.slot_seqs[slot];
                let owing = self.owing(&table, slot);
                let holders = if want_held {
                    (1..32usize)
                        .filter(|&bit| owing & (1 << bit) != 0 && taken[bit] >= seq)
                        .fold(0u32, |acc, bit| acc | (1 << bit))
                } else {
                    0
                };
                SlotState {
                    seq,
                    owing: owing & !given_up,
                    holders,
                }
            })
            .collect()
    }

    /// Subscribers whose time to free a slot ran out, waiting since `since`:
    /// the ACK timeout, or the start-up timeout from their joining while
    /// that is later (D23).
    fn expired(&self, since: Instant) -> u32 {
        let now = Instant::now();
        let steady = since + self.ack_timeout;
        self.registry
            .admitted()
            .into_iter()
            .filter(|&(_, admitted)| now >= steady.max(admitted + self.startup_timeout))
            .fold(0, |acc, (bit, _)| acc | (1 << bit))
    }

    /// Drops the subscribers `late` that still owe slot `slot`'s frame.
    fn drop_late(&mut self, slot: usize, late: u32) {
        let seq = self.slot_seqs[slot];
        let notice = Message::Error {
            code: ErrorKind::Timeout.code(),
            message: format!(
                "dropped by publisher of '{}': no ACK for seq {seq} within {} ms (strict-wait; {} ms while starting)",
                self.key,
                self.ack_timeout.as_millis(),
                self.startup_timeout.max(self.ack_timeout).as_millis()
            ),
        };
        for bit in (0..32).filter(|b| late & (1 << b) != 0) {
            if self.registry.remove(bit, None, Some(&notice)) {
                self.stats.ack_timeouts += 1;
            }
        }
    }

    /// Spec §5 steps 3-5: slot fields, slot seq, global seq (Release), wake-ups.
    fn commit(&mut self, slot: usize, pts_ns: i64) -> u64 {
        let seq = self.next_seq;
        let mut table = self.registry.lock();
        table.required[slot] = self.registry.active();
        self.slot_seqs[slot] = seq;
        let headers = &self.registry.headers;
        if self.policy == Policy::StrictWait {
            // D25 with D33: what subscribers' copy decisions go by, counted
            // here from each one's own word (the new frame is owed by all).
            let busy = (0..self.ring_size)
                .filter(|&s| self.owing(&table, s) != 0)
                .count();
            headers.set_busy_slots(busy as u64);
        }
        let props = self.props.map_or([0; 3], FrameProps::to_words);
        self.side_area.write(slot, &self.pending_side_data);
        let side_len = self.pending_side_data.len() as u64;
        headers.publish_slot(slot, seq, pts_ns, self.layout.size() as u64, props, side_len);
        self.pending_side_data.clear();
        self.registry.set_published(seq);
        // What subscribers report of themselves, for the tools: at most
        // once a millisecond (and by the control thread between publishes).
        let now = crate::platform::clock::monotonic_ns();
        if now >= self.next_mirror_ns {
            self.registry.mirror_reports_locked(&table);
            self.next_mirror_ns = now + 1_000_000;
        }
        for sub in table.subs.iter().flatten() {
            let _ = sub.wake.write(1);
        }
        drop(table);
        self.next_seq += 1;
        self.stats.published += 1;
        seq
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.registry.headers.mark_shutdown();
        self.control.stop();
        // `claim` (dropped after this) unlinks socket, shared header and lock.
    }
}

/// Spin briefly, then sleep with growing pauses (≤ 200 µs): ACK waits are
/// short under normal load and must not burn a core when a subscriber lags.
struct Backoff {
    round: u32,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff { round: 0 }
    }

    fn wait(&mut self) {
        self.round += 1;
        if self.round <= 64 {
            std::hint::spin_loop();
        } else if self.round <= 128 {
            std::thread::yield_now();
        } else {
            let micros = (self.round - 128).min(200) as u64;
            std::thread::sleep(Duration::from_micros(micros));
        }
    }
}

/// What a subscriber that asks (HELLO_REQ `EARLY_FDS`) gets before
/// SUBSCRIBE besides the header (which depends on the subscriber, D33): the
/// slots when they are shared as descriptors, and the side-data area.
fn early_fds(pool: &dyn SlotPool, side_data: OwnedFd) -> Result<Vec<(u32, OwnedFd)>> {
    let mut fds = pool.early_fds()?;
    fds.push((fd_purpose::SIDE_DATA, side_data));
    // Subscribers refuse more (a ring of 16 in fd mode sends exactly this
    // many, with the header).
    debug_assert!(
        fds.len() < fd_purpose::MAX_EARLY as usize,
        "{} early descriptors",
        fds.len()
    );
    Ok(fds)
}

/// Subscriber wake-ups a waiting publisher got from its doorbell that freed
/// nothing (owed ACKs did not go down), and the pause they earn.
#[derive(Debug, Default)]
struct Doorbell {
    owed: Option<u32>,
    rang: bool,
    idle_rings: u32,
}

impl Doorbell {
    /// The ACKs still owed now (after a wake-up, or before the first sleep).
    fn progress(&mut self, owed: u32) {
        let freed_some = self.owed.is_some_and(|before| owed < before);
        if freed_some {
            self.idle_rings = 0;
        } else if self.rang {
            self.idle_rings += 1;
        }
        self.owed = Some(owed);
        self.rang = false;
    }

    fn rang(&mut self) {
        self.rang = true;
    }

    /// 10 µs after the first ring that freed nothing, doubling to 1 ms.
    fn pause(&self) -> Option<Duration> {
        (self.idle_rings > 0).then(|| Duration::from_micros((10u64 << self.idle_rings.min(7)).min(1000)))
    }
}

fn frame_meta(
    layout: &FrameLayout,
    memory_kind: u32,
    fps: Option<(u32, u32)>,
    device_uuid: [u8; 16],
) -> Result<FrameMeta> {
    let to_u32 = |v: usize, what: &str| {
        u32::try_from(v).map_err(|_| Error::invalid(format!("{what} {v} does not fit the frame meta")))
    };
    let (fps_num, fps_den) = fps.unwrap_or((0, 0));
    Ok(FrameMeta {
        format: layout.format().wire(),
        width: layout.width(),
        height: layout.height(),
        pitch_y: to_u32(layout.pitch_y(), "pitch")?,
        pitch_uv: to_u32(layout.pitch_uv(), "pitch")?,
        bits_per_pixel: layout.format().bits_per_pixel(),
        frame_size_bytes: layout.size() as u64,
        memory_kind,
        fps_num,
        fps_den,
        device_uuid,
        reserved: [0; 4],
    })
}

fn initial_header(config: &PublisherConfig, meta: &FrameMeta, pool: &dyn SlotPool) -> SharedHeader {
    let (major, minor, patch) = crate::library_version();
    let mut h = SharedHeader::zeroed();
    h.proto_version = PROTOCOL_VERSION;
    h.lib_version_major = major;
    h.lib_version_minor = minor;
    h.lib_version_patch = patch;
    h.producer_pid = std::process::id() as u64;
    h.ring_size = config.ring_size as u64;
    h.ownership_mode = if config.external_slots.is_some() {
        OWNERSHIP_EXTERNAL
    } else {
        OWNERSHIP_LIBRARY
    };
    h.policy = config.policy.wire();
    h.max_subscribers = MAX_SUBSCRIBER_SLOTS as u64;
    h.meta = *meta;
    h.ipc_event_handle = pool.event_handle();
    for (index, slot) in h.slots.iter_mut().enumerate().take(config.ring_size) {
        slot.mem_handle = pool.slot_handle(index);
        if let Some(ptrs) = &config.external_slots {
            slot.cuda_ptr_external[..8].copy_from_slice(&ptrs[index].to_le_bytes());
        }
    }
    h
}
