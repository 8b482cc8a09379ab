//! Creating a publisher: the key claimed, the slots, both headers, the
//! socket and the control thread, and what the headers say at first.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use nix::sys::eventfd::{EfdFlags, EventFd};

use super::control::{ControlSetup, ControlStats, ControlThread};
use super::headers::Headers;
use super::registry::Registry;
use super::{PITCH_ALIGNMENT, Policy, Publisher, PublisherConfig, PublisherStats, V1Peers};
use crate::error::{Error, Result};
use crate::format::FrameLayout;
use crate::memory::{CudaShareRequest, MemoryKind, SlotPool, create_pool};
use crate::platform::access;
use crate::resources::{KeyClaim, KeyPaths};
use crate::shm::header::{ShmHeader, StreamInfo, validate_header};
use crate::shm::side_area::SideArea;
use crate::wire::layout::{
    FrameMeta, MAGIC, MAX_RING_SIZE, MAX_SUBSCRIBER_SLOTS, OWNERSHIP_EXTERNAL, OWNERSHIP_LIBRARY,
    PROTOCOL_VERSION, SharedHeader,
};
use crate::wire::message::{HelloAccept, fd_purpose};

impl Publisher {
    /// Claims the key (recovering stale resources of a dead publisher),
    /// creates slots, shared header and socket, and starts serving
    /// subscribers.
    pub fn create(config: PublisherConfig) -> Result<Publisher> {
        let logger = config.logger.clone();
        crate::log::with_logger(logger.as_ref(), || Self::create_logged(config))
    }

    /// The steps of `create`, in their order: each one's resources are
    /// released, should a later one fail, before those of the steps before
    /// it (the key's claim last).
    fn create_logged(config: PublisherConfig) -> Result<Publisher> {
        crate::testhook::announce();
        check_config(&config)?;
        let memory = config.memory.resolve()?;
        let layout = FrameLayout::aligned(config.format, config.width, config.height, PITCH_ALIGNMENT)?;
        let group = config.group.as_deref().map(access::resolve_group).transpose()?;
        let (paths, claim) = claim_key(&config, group)?;
        let pool = make_pool(&config, memory, &layout)?;
        let memory_kind = pool.cuda_share().map_or(memory.wire(), |share| share.wire());
        let meta = frame_meta(&layout, memory_kind, config.fps, pool.device_uuid())?;
        let (headers, info) = make_headers(&config, &paths, group, &meta, pool.as_ref())?;
        let serving = start_control(&config, &paths, group, headers, meta, pool.as_ref())?;
        Ok(Publisher {
            key: config.key,
            layout,
            ring_size: config.ring_size,
            policy: config.policy,
            ack_timeout: config.ack_timeout,
            startup_timeout: config.startup_timeout,
            slot_seqs: [0; MAX_RING_SIZE],
            pool,
            registry: serving.registry,
            control: serving.control,
            control_stats: serving.control_stats,
            next_seq: 1,
            doorbell: serving.doorbell,
            next_mirror_ns: 0,
            acquired: None,
            info,
            props: None,
            side_area: serving.side_area,
            pending_side_data: Vec::new(),
            stats: PublisherStats::default(),
            claim,
        })
    }
}

/// Check: the configuration's values, before anything is made.
fn check_config(config: &PublisherConfig) -> Result<()> {
    if config.ring_size == 0 || config.ring_size > MAX_RING_SIZE {
        return Err(Error::invalid(format!(
            "ring size {} is outside 1..={MAX_RING_SIZE}",
            config.ring_size
        )));
    }
    if config.policy == Policy::StrictWait && config.ack_timeout.is_zero() {
        return Err(Error::invalid("strict-wait needs an ACK timeout above 0 ms"));
    }
    if config.handshake_timeout.is_zero() {
        return Err(Error::invalid(
            "a handshake timeout of 0 would close every subscriber before it subscribed",
        ));
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
    Ok(())
}

/// Reserve the key: its paths, and the claim on them (what a publisher that
/// is gone left behind removed, and said).
fn claim_key(config: &PublisherConfig, group: Option<u32>) -> Result<(KeyPaths, KeyClaim)> {
    let paths = KeyPaths::for_publisher(&config.key, config.runtime_dir.as_deref(), group)?;
    let claim = KeyClaim::acquire(&paths)?;
    if !claim.removed().is_empty() {
        crate::log::warning!(
            "key '{}': removed what a publisher that is gone left behind: {}",
            config.key,
            claim.removed().join(", ")
        );
    }
    Ok((paths, claim))
}

/// Make the memory: the ring's slots, ours or the caller's (EXTERNAL).
fn make_pool(
    config: &PublisherConfig,
    memory: MemoryKind,
    layout: &FrameLayout,
) -> Result<Box<dyn SlotPool>> {
    match &config.external_slots {
        None => create_pool(
            memory,
            &config.key,
            layout,
            config.ring_size,
            config.cuda,
            config.cuda_device,
            config.cuda_share,
        ),
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
            crate::memory::external_pool(layout, ptrs, config.cuda, config.cuda_device)
        }
    }
}

/// Make the header: what it says at first, read back the way subscribers
/// read it, then the shared header (named and sealed) made with it.
fn make_headers(
    config: &PublisherConfig,
    paths: &KeyPaths,
    group: Option<u32>,
    meta: &FrameMeta,
    pool: &dyn SlotPool,
) -> Result<(Headers, StreamInfo)> {
    let initial = initial_header(config, meta, pool);
    // What subscribers will read, read back the way they do.
    let info = validate_header(&SharedHeader {
        magic: MAGIC,
        ..initial
    })?;
    let group_writes = config.v1_peers == V1Peers::Allow;
    let headers = Headers::create(&config.key, &paths.shm_name, &initial, group, group_writes)?;
    Ok((headers, info))
}

/// What [`start_control`] made, which the publisher keeps.
struct Serving {
    registry: Arc<Registry>,
    control: ControlThread,
    control_stats: Arc<ControlStats>,
    doorbell: EventFd,
    side_area: SideArea,
}

/// Start the control thread: the socket bound, the ACK doorbell, the
/// descriptors the thread hands subscribers (the headers, the side-data
/// area, the slots), the registry of subscribers, and the thread.
fn start_control(
    config: &PublisherConfig,
    paths: &KeyPaths,
    group: Option<u32>,
    headers: Headers,
    meta: FrameMeta,
    pool: &dyn SlotPool,
) -> Result<Serving> {
    let ownership = if config.external_slots.is_some() {
        OWNERSHIP_EXTERNAL
    } else {
        OWNERSHIP_LIBRARY
    };
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
        early_fds: early_fds(pool, side_fd)?,
        doorbell: doorbell_for_peers,
        v1_peers: config.v1_peers,
        handshake_timeout: config.handshake_timeout,
        stats: control_stats.clone(),
        owner_uid: nix::unistd::geteuid().as_raw(),
        group,
        logger: config.logger.clone(),
    })?;
    Ok(Serving {
        registry,
        control,
        control_stats,
        doorbell,
        side_area,
    })
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
