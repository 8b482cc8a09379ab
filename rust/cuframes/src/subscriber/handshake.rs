//! The subscriber's side of the handshake (spec §4.1): HELLO, the shared
//! header (untrusted, checked against HELLO_RESP), SUBSCRIBE, the
//! descriptors sent with EVENT_FD, and the slots mapped in this process.

use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::errno::Errno;

use super::lease::{PrivateAcks, Ring};
use super::reader::Reader;
use super::{SubscriberConfig, SubscriberMode};
use crate::channel::{Channel, Descriptors};
use crate::error::{Error, ErrorKind, Result};
use crate::memory::{
    ContextHold, CudaShare, MappingSource, MemoryKind, SlotMapping, hold_context, open_mapping,
};
use crate::platform::access::PeerCred;
use crate::platform::region::Access;
use crate::resources::KeyPaths;
use crate::shm::ack_area::AckArea;
use crate::shm::header::{ShmHeader, StreamInfo, validate_header, validate_meta};
use crate::shm::side_area::SideArea;
use crate::wire::layout::{
    FIRST_SUBSCRIBER_BIT, LAST_SUBSCRIBER_BIT, MAX_RING_SIZE, PROTOCOL_VERSION, SharedHeader,
};
use crate::wire::message::{
    HelloAccept, HelloReq, Message, SubscribeResp, fd_purpose, hello_flags, msg_type,
};

/// Time between HELLO_RESP and SUBSCRIBE past which a handshake that then
/// fails is the subscriber's slowness (making its CUDA context), not the
/// publisher's: a CUDA context takes ~0.2 s alone and tens of seconds when
/// dozens of processes make theirs at once.
const SLOW_BEFORE_SUBSCRIBE: Duration = Duration::from_secs(1);

/// Connects to the publisher of `config.key` and completes the handshake
/// (spec §4.1): a reader of its ring. A handshake that failed at SUBSCRIBE
/// or after it, because this process took long to make its CUDA context
/// between HELLO and SUBSCRIBE (the publisher closes a handshake not done
/// within its `handshake_timeout`, and this side's `connect_timeout` may run
/// out too), is tried once more at once, with that context kept: it is
/// made by then, so the second one does not wait for the driver again.
pub(super) fn connect(config: &SubscriberConfig) -> Result<Reader> {
    match connect_once(config) {
        Ok(reader) => Ok(reader),
        Err(Failed {
            error,
            slow: Some((took, _held)),
        }) => {
            crate::log::warning!(
                "the handshake with the publisher of '{}' failed after this process took {:.1} s to make its CUDA context ({error}): connecting again, the context made",
                config.key,
                took.as_secs_f64()
            );
            connect_once(config).map_err(|f| f.error)
        }
        Err(f) => Err(f.error),
    }
}

/// A handshake that failed, and when the subscriber's own slowness before
/// SUBSCRIBE is why: how long it took, and its CUDA context kept for the
/// next try.
struct Failed {
    error: Error,
    slow: Option<(Duration, ContextHold)>,
}

impl From<Error> for Failed {
    fn from(error: Error) -> Failed {
        Failed { error, slow: None }
    }
}

/// One handshake, one step a function.
fn connect_once(config: &SubscriberConfig) -> std::result::Result<Reader, Failed> {
    let paths = KeyPaths::for_subscriber(&config.key, config.runtime_dir.as_deref())?;
    let key = config.key.clone();
    let deadline = Instant::now() + config.connect_timeout;
    let (mut chan, publisher) = open_channel(&paths, deadline)?;
    crate::testhook::abort_at("sub-before-hello");

    // HELLO, and the descriptors sent before SUBSCRIBE (D27): the
    // shared header, so that /dev/shm need not be shared, and CUDA slots
    // shared as fds.
    let (accept, mut early) = hello(
        &mut chan,
        deadline,
        &key,
        config.name.clone(),
        config.cuda_device,
        config.mode,
    )?;
    let hello_done = Instant::now();
    let private_acks = accept.granted & hello_flags::PRIVATE_ACKS != 0;
    let (header, snapshot, info) = map_header(&accept, &mut early, &paths, publisher.uid, private_acks)?;
    // Side data (D30) from publishers that have an area.
    let side = take_fd(&mut early, fd_purpose::SIDE_DATA)
        .map(|fd| SideArea::open(&fd, &key))
        .transpose()?;

    // CUDA memory is mapped before SUBSCRIBE (D23): making a CUDA
    // context takes seconds on a busy host, and the publisher counts a
    // subscriber's start-up time from its admission.
    let cuda_share = cuda_share_of(&info, &publisher, &key)?;
    let source = MappingSource {
        layout: &info.layout,
        cuda_share,
        slots: &snapshot.slots[..info.ring_size.min(MAX_RING_SIZE)],
        event_handle: &snapshot.ipc_event_handle,
        device_uuid: info.meta.device_uuid,
        cuda: config.cuda,
        cuda_device: config.cuda_device,
    };
    let early_mapping = match info.memory {
        MemoryKind::Cuda => Some(
            open_mapping(info.memory, &source, &mut early)
                .map_err(|e| publisher_gone_or(&mut chan, e, &key))?,
        ),
        MemoryKind::Host => None,
    };
    crate::testhook::stall_at_first("sub-context");
    let before_subscribe = hello_done.elapsed();

    crate::testhook::abort_at("sub-after-hello");
    // Judged here, while the mapping still holds the context.
    let (resp, after) = subscribe(&mut chan, deadline, &key)
        .and_then(|resp| {
            Ok((
                resp,
                receive_descriptors(&mut chan, deadline, &key, &info, private_acks)?,
            ))
        })
        .map_err(|error| failed_after_hello(error, before_subscribe, info.memory, &source))?;
    let AfterSubscribe {
        wake,
        acks,
        mut memory,
    } = after;
    let mapping = match early_mapping {
        Some(mapping) => mapping,
        None => open_mapping(info.memory, &source, &mut memory)
            .map_err(|e| publisher_gone_or(&mut chan, e, &key))?,
    };
    crate::testhook::abort_at("sub-after-accept");
    let ring = ring(header, &info, mapping, resp.assigned_bit, side, acks);
    Ok(reader(config, key, chan, info, ring, wake, resp))
}

/// How the publisher shares CUDA slots, if it does (None: host memory),
/// refused where this process cannot open them: CUDA IPC handles open only
/// within the publisher's PID namespace.
fn cuda_share_of(info: &StreamInfo, publisher: &PeerCred, key: &str) -> Result<Option<CudaShare>> {
    let cuda_share = CudaShare::from_wire(info.meta.memory_kind).filter(|_| info.memory == MemoryKind::Cuda);
    if cuda_share == Some(CudaShare::Ipc) && publisher.pid == 0 {
        // SO_PEERCRED reports pid 0 for a peer outside our PID namespace:
        // legacy CUDA IPC handles cannot be opened from there.
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "the publisher of '{key}' runs in another PID namespace (another container) and shares CUDA memory with CUDA IPC handles (cuda_share=ipc), which only open within its PID namespace: publish with cuda_share=fd (the default where the GPU supports it), or share the publisher's PID namespace"
            ),
        ));
    }
    Ok(cuda_share)
}

/// A handshake that failed at SUBSCRIBE or after it (steps 7-8): this
/// process's own slowness is why when it took long before SUBSCRIBE and
/// the failure is one the publisher's impatience makes; then its CUDA
/// context is kept for the next try (taken while the mapping, of `source`,
/// still holds it: the caller's job).
fn failed_after_hello(
    error: Error,
    before_subscribe: Duration,
    memory: MemoryKind,
    source: &MappingSource<'_>,
) -> Failed {
    let ours = before_subscribe >= SLOW_BEFORE_SUBSCRIBE
        && matches!(
            error.kind(),
            ErrorKind::Timeout | ErrorKind::Disconnected | ErrorKind::Io
        );
    let slow = ours.then(|| (before_subscribe, hold_context(memory, source)));
    Failed { error, slow }
}

/// The ring as this subscriber reads it: the header, the slots mapped, the
/// bit it was assigned, its side-data and ACK areas.
fn ring(
    header: ShmHeader,
    info: &StreamInfo,
    mapping: Box<dyn SlotMapping>,
    bit: u32,
    side: Option<SideArea>,
    acks: Option<PrivateAcks>,
) -> Arc<Ring> {
    Arc::new(Ring {
        header: Arc::new(header),
        mapping,
        layout: info.layout.clone(),
        memory: info.memory,
        ring_size: info.ring_size,
        bit,
        overwritten: AtomicU64::new(0),
        spare: Mutex::new(Vec::new()),
        side,
        acks,
        held_here: Default::default(),
    })
}

/// The reader of the ring, from the frame after `resp.initial_seq`, nothing
/// read yet.
fn reader(
    config: &SubscriberConfig,
    key: String,
    chan: Channel,
    info: StreamInfo,
    ring: Arc<Ring>,
    wake: OwnedFd,
    resp: SubscribeResp,
) -> Reader {
    let strict = info.policy == crate::wire::layout::POLICY_STRICT_WAIT;
    Reader {
        key,
        ring,
        info,
        chan,
        wake,
        mode: config.mode,
        initial_seq: resp.initial_seq,
        next_seq: resp.initial_seq.saturating_add(1),
        received: 0,
        dropped: 0,
        copied: 0,
        torn: 0,
        side_data_rejected: 0,
        copies_refused_told: false,
        dropped_before_last: 0,
        copy: config.copy,
        strict,
        disconnected: None,
        shut_down: false,
        control_pending: true,
        control_due_ns: 0,
    }
}

/// Locate and connect (step 1): the channel to the key's publisher, and
/// its credentials, once it is known to be the socket's own listener.
fn open_channel(paths: &KeyPaths, deadline: Instant) -> Result<(Channel, PeerCred)> {
    let key = &paths.key;
    let sock = crate::channel::connect_until(&paths.socket, deadline).map_err(|e| match e.raw_os_error().map(Errno::from_raw) {
        Some(Errno::ECONNREFUSED) => Error::new(
            ErrorKind::NotFound,
            format!(
                "no publisher for key '{key}': {} is stale (its publisher died; `cuframes cleanup {key}` removes it)",
                paths.socket.display()
            ),
        ),
        Some(Errno::ENOENT) => Error::new(ErrorKind::NotFound, format!("no publisher for key '{key}'")),
        _ => Error::io(format!("connecting to {}", paths.socket.display()), &e),
    })?;
    let chan = Channel::new(sock, format!("publisher of '{key}'"), Descriptors::WithEventFd)?;
    let publisher = crate::platform::access::peer_credentials(chan.socket())?;
    trusted_listener(paths, publisher.uid)?;
    Ok((chan, publisher))
}

/// Check HELLO_RESP and map the header (steps 4-5): untrusted, validated,
/// and it must agree with HELLO_RESP. Granted an ACK area of our own (D33),
/// we get the copy only the publisher can write, and map it read-only.
fn map_header(
    accept: &HelloAccept,
    early: &mut Vec<(u32, OwnedFd)>,
    paths: &KeyPaths,
    publisher_uid: u32,
    private_acks: bool,
) -> Result<(ShmHeader, SharedHeader, StreamInfo)> {
    let key = &paths.key;
    if accept.shm_path != paths.shm_name {
        return Err(Error::protocol(format!(
            "publisher of '{key}' names shared memory {:?}; expected {}",
            accept.shm_path, paths.shm_name
        )));
    }
    validate_meta(&accept.meta).map_err(|e| Error::new(e.kind(), format!("HELLO_RESP from '{key}': {e}")))?;
    let header = match take_fd(early, fd_purpose::HEADER) {
        Some(fd) => ShmHeader::from_fd(
            &fd,
            if private_acks {
                Access::ReadOnly
            } else {
                Access::ReadWrite
            },
            &format!("shared memory of '{key}' (sent by its publisher)"),
        )?,
        None if private_acks => {
            return Err(Error::protocol(format!(
                "publisher of '{key}' granted private ACKs but sent no header"
            )));
        }
        None => open_header_by_name(&paths.shm_name, publisher_uid, key)?,
    };
    if header.load_magic() != crate::wire::MAGIC {
        return Err(Error::corrupt(format!(
            "shared memory of '{key}' is not initialised"
        )));
    }
    let snapshot = header.snapshot();
    let info = validate_header(&snapshot)
        .map_err(|e| Error::new(e.kind(), format!("shared memory of '{key}': {e}")))?;
    // Ownership is asked of no one: the header (validated) says it, and
    // HELLO_RESP must say the same.
    if info.ownership_mode != u64::from(accept.ownership_mode) {
        return Err(Error::corrupt(format!(
            "publisher of '{key}' says ownership_mode {} in HELLO_RESP, its shared memory says {}",
            accept.ownership_mode, info.ownership_mode
        )));
    }
    if info.ring_size != accept.ring_size as usize || info.meta != accept.meta {
        return Err(Error::corrupt(format!(
            "shared memory of '{key}' disagrees with its publisher's HELLO_RESP"
        )));
    }
    Ok((header, snapshot, info))
}

/// SUBSCRIBE (step 7): the accepted answer, with a bit in 1..=31.
fn subscribe(chan: &mut Channel, deadline: Instant, key: &str) -> Result<SubscribeResp> {
    // A publisher that gave up on this handshake said why before it closed.
    chan.send(&Message::SubscribeReq {
        proto_version: PROTOCOL_VERSION,
    })
    .map_err(|e| refusal_or(chan, e, key))?;
    let resp = match expect(chan, deadline, msg_type::SUBSCRIBE_RESP, key)? {
        Message::SubscribeResp(r) => r,
        _ => unreachable!("expect() returns the asked type"),
    };
    if resp.result != 0 {
        let kind = ErrorKind::from_code(resp.result);
        let message = match kind {
            ErrorKind::TooMany => {
                format!("too many subscribers: publisher of '{key}' serves its maximum of 31")
            }
            _ => format!("publisher of '{key}' refused SUBSCRIBE: {}", kind.describe()),
        };
        return Err(Error::new(kind, message));
    }
    if !(FIRST_SUBSCRIBER_BIT..=LAST_SUBSCRIBER_BIT).contains(&resp.assigned_bit) {
        return Err(Error::protocol(format!(
            "publisher of '{key}' assigned bit {} (must be 1..=31)",
            resp.assigned_bit
        )));
    }
    Ok(resp)
}

/// What step 8 receives.
struct AfterSubscribe {
    wake: OwnedFd,
    acks: Option<PrivateAcks>,
    /// What the memory backend needs, with the purposes.
    memory: Vec<(u32, OwnedFd)>,
}

/// The descriptors after SUBSCRIBE_RESP (step 8): the wake-up eventfd, our
/// ACK area and the doorbell when granted (D33), and what the memory
/// backend needs.
fn receive_descriptors(
    chan: &mut Channel,
    deadline: Instant,
    key: &str,
    info: &StreamInfo,
    private_acks: bool,
) -> Result<AfterSubscribe> {
    let mut wanted = vec![fd_purpose::WAKEUP];
    if private_acks {
        wanted.extend([fd_purpose::ACK_AREA, fd_purpose::ACK_DOORBELL]);
    }
    if info.memory == MemoryKind::Host {
        wanted.push(fd_purpose::HOST_SLOTS);
    }
    let mut fds: Vec<(u32, OwnedFd)> = Vec::new();
    while !wanted.is_empty() {
        let received = chan.recv(deadline, "EVENT_FD")?;
        match received.msg {
            Message::EventFd { purpose } => {
                let fd = received.fd.expect("channel pairs EVENT_FD with a descriptor");
                if let Some(at) = wanted.iter().position(|&p| p == purpose) {
                    wanted.swap_remove(at);
                    fds.push((purpose, fd));
                } // unknown purposes: a later extension; closed here.
            }
            other => handle_unexpected(chan, other, key)?,
        }
    }
    let wake = take_fd(&mut fds, fd_purpose::WAKEUP).expect("collected above");
    let acks = match private_acks {
        true => {
            let area = take_fd(&mut fds, fd_purpose::ACK_AREA).expect("collected above");
            Some(PrivateAcks {
                area: AckArea::open(&area, key)?,
                doorbell: take_fd(&mut fds, fd_purpose::ACK_DOORBELL).expect("collected above"),
            })
        }
        false => None,
    };
    Ok(AfterSubscribe {
        wake,
        acks,
        memory: fds,
    })
}

/// The shared header of the publisher answering on `paths.socket`, asked for
/// over the socket (HELLO with `EARLY_FDS`, then the connection is closed
/// without subscribing): for inspecting a key whose /dev/shm is another
/// IPC namespace's (D27). Mapped read-only; the publisher's sealed copy
/// when it grants `PRIVATE_ACKS` (D33), else the named header.
pub(crate) fn fetch_header(paths: &KeyPaths, timeout: std::time::Duration) -> Result<ShmHeader> {
    let key = paths.key.clone();
    let deadline = Instant::now() + timeout;
    let sock = crate::channel::connect_until(&paths.socket, deadline)
        .map_err(|e| Error::io(format!("connecting to {}", paths.socket.display()), &e))?;
    let mut chan = Channel::new(sock, format!("publisher of '{key}'"), Descriptors::WithEventFd)?;
    trusted_listener(
        paths,
        crate::platform::access::peer_credentials(chan.socket())?.uid,
    )?;
    let (accept, mut early) = hello(
        &mut chan,
        deadline,
        &key,
        "inspect".into(),
        -1,
        SubscriberMode::Sequential,
    )?;
    let sealed = accept.granted & hello_flags::PRIVATE_ACKS != 0;
    let fd = take_fd(&mut early, fd_purpose::HEADER).ok_or_else(|| {
        Error::new(
            ErrorKind::NotFound,
            format!("the publisher of '{key}' sends no descriptor of its shared memory (protocol v1)"),
        )
    })?;
    let header = ShmHeader::from_fd(
        &fd,
        Access::ReadOnly,
        &format!("shared memory of '{key}' (sent by its publisher)"),
    )?;
    // Granted PRIVATE_ACKS, the publisher sent its sealed copy (D33).
    Ok(if sealed { header.into_sealed_copy() } else { header })
}

/// Refuses a listener that need not be the key's publisher: one whose
/// socket file is not its own, or, in a directory every user may write
/// (sticky, like /tmp, or a container volume), one of a user other than
/// ours, root or the directory's owner that did not give its socket to a
/// group of ours — anyone could have taken the name first (D34).
fn trusted_listener(paths: &KeyPaths, listener_uid: u32) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let socket = crate::platform::names::lstat(&paths.socket)?.ok_or_else(|| {
        Error::new(
            ErrorKind::NotFound,
            format!("{} vanished", paths.socket.display()),
        )
    })?;
    if socket.uid() != listener_uid {
        return Err(Error::new(
            ErrorKind::Permission,
            format!(
                "{} belongs to uid {} but the process listening on it runs as uid {listener_uid}: refusing it",
                paths.socket.display(),
                socket.uid()
            ),
        ));
    }
    let dir =
        std::fs::metadata(&paths.dir).map_err(|e| Error::io(format!("stat {}", paths.dir.display()), &e))?;
    let me = nix::unistd::geteuid().as_raw();
    // A publisher that admits a group of ours gave its socket to that group
    // (0660): only a member of the group can do that (chgrp).
    let our_group = socket.mode() & 0o060 == 0o060 && in_our_groups(socket.gid());
    if dir.mode() & 0o002 != 0 && ![me, 0, dir.uid()].contains(&listener_uid) && !our_group {
        return Err(Error::new(
            ErrorKind::Permission,
            format!(
                "{} was bound by uid {listener_uid} in {}, a directory every user may write: anyone could have taken the name; use a runtime directory of the publisher's own (CUFRAMES_RUNTIME_DIR)",
                paths.socket.display(),
                paths.dir.display()
            ),
        ));
    }
    Ok(())
}

/// Whether `gid` is this process's group or one of its supplementary ones.
fn in_our_groups(gid: u32) -> bool {
    nix::unistd::getegid().as_raw() == gid
        || nix::unistd::getgroups().is_ok_and(|groups| groups.iter().any(|g| g.as_raw() == gid))
}

/// HELLO_REQ asking for the early descriptors, HELLO_RESP (a refusal as an
/// error naming why), and the descriptors the publisher announced in it.
fn hello(
    chan: &mut Channel,
    deadline: Instant,
    key: &str,
    name: String,
    cuda_device: i32,
    mode: SubscriberMode,
) -> Result<(HelloAccept, Vec<(u32, OwnedFd)>)> {
    chan.send(&Message::HelloReq(HelloReq {
        proto_version: PROTOCOL_VERSION,
        name,
        cuda_device,
        mode: mode.wire(),
        ext_flags: hello_flags::EARLY_FDS | hello_flags::PRIVATE_ACKS,
    }))
    .map_err(|e| refusal_or(chan, e, key))?;
    let accept = match expect(chan, deadline, msg_type::HELLO_RESP, key)? {
        Message::HelloResp(r) if r.result == 0 => r
            .accept
            .ok_or_else(|| Error::protocol("HELLO_RESP without body"))?,
        Message::HelloResp(r) if r.result == ErrorKind::Protocol.code() => {
            return Err(Error::new(
                ErrorKind::Protocol,
                format!(
                    "version mismatch: publisher of '{key}' speaks protocol v{}, this library v{PROTOCOL_VERSION}",
                    r.proto_version
                ),
            ));
        }
        Message::HelloResp(r) => {
            let kind = ErrorKind::from_code(r.result);
            return Err(Error::new(
                kind,
                format!("publisher of '{key}' refused HELLO: {}", kind.describe()),
            ));
        }
        _ => unreachable!("expect() returns the asked type"),
    };
    let early = receive_early_fds(chan, deadline, accept.early_fds, key)?;
    Ok((accept, early))
}

/// Receives the `count` EVENT_FDs a publisher announced in HELLO_RESP.
fn receive_early_fds(
    chan: &mut Channel,
    deadline: Instant,
    count: u32,
    key: &str,
) -> Result<Vec<(u32, OwnedFd)>> {
    // A publisher announcing more is not one of ours.
    let most = fd_purpose::MAX_EARLY;
    if count > most {
        return Err(Error::protocol(format!(
            "publisher of '{key}' announced {count} descriptors before SUBSCRIBE (at most {most})"
        )));
    }
    let mut fds = Vec::with_capacity(count as usize);
    while fds.len() < count as usize {
        let received = chan.recv(deadline, "EVENT_FD")?;
        match received.msg {
            Message::EventFd { purpose } => {
                let fd = received.fd.expect("channel pairs EVENT_FD with a descriptor");
                fds.push((purpose, fd));
            }
            other => handle_unexpected(chan, other, key)?,
        }
    }
    Ok(fds)
}

fn take_fd(fds: &mut Vec<(u32, OwnedFd)>, purpose: u32) -> Option<OwnedFd> {
    let at = fds.iter().position(|(p, _)| *p == purpose)?;
    Some(fds.swap_remove(at).1)
}

/// The header by name (publishers that send no descriptor for it: protocol
/// v1). Anyone may create a name in /dev/shm, so it must belong to the
/// process that answers on the socket.
fn open_header_by_name(name: &str, publisher_uid: u32, key: &str) -> Result<ShmHeader> {
    let header = ShmHeader::open(name).map_err(|e| {
        if e.kind() != ErrorKind::NotFound {
            return e;
        }
        Error::new(
            ErrorKind::NotFound,
            format!(
                "the publisher of '{key}' answers on its socket, but its shared memory {name} is not visible here: it sends no descriptor for it (an older cuframes or another protocol-v1 publisher), so this process must share its /dev/shm (IPC namespace; between containers, docker's --ipc container:NAME); or upgrade the publisher"
            ),
        )
    })?;
    if header.owner_uid() != publisher_uid {
        return Err(Error::new(
            ErrorKind::Permission,
            format!(
                "shared memory {name} of '{key}' belongs to uid {}, but its publisher runs as uid {publisher_uid}",
                header.owner_uid()
            ),
        ));
    }
    Ok(header)
}

/// A publisher that refuses a peer at accept (D19) sends ERROR and
/// closes before our first send fails: report its reason rather than the
/// failed send.
fn refusal_or(chan: &mut Channel, err: Error, key: &str) -> Error {
    match chan.try_recv() {
        Ok(Some(received)) => match handle_unexpected(chan, received.msg, key) {
            Err(refusal) => refusal,
            Ok(()) => err,
        },
        _ => err,
    }
}

/// Opening the slots failed: when the publisher died meanwhile (its CUDA IPC
/// handles die with it), say that rather than the driver's error.
fn publisher_gone_or(chan: &mut Channel, err: Error, key: &str) -> Error {
    match chan.try_recv() {
        Err(e) if e.kind() == ErrorKind::Disconnected => Error::new(
            ErrorKind::Disconnected,
            format!("disconnected: publisher of '{key}' went away during the handshake ({err})"),
        ),
        Ok(Some(received)) => match handle_unexpected(chan, received.msg, key) {
            Err(refusal) => refusal,
            Ok(()) => err,
        },
        _ => err,
    }
}

/// Receives until a message of `kind` arrives; answers PING, turns ERROR and
/// SHUTDOWN into errors.
fn expect(chan: &mut Channel, deadline: Instant, kind: u32, key: &str) -> Result<Message> {
    loop {
        let received = chan.recv(deadline, crate::wire::message::type_name(kind))?;
        if received.msg.type_id() == kind {
            return Ok(received.msg);
        }
        handle_unexpected(chan, received.msg, key)?;
    }
}

fn handle_unexpected(chan: &Channel, msg: Message, key: &str) -> Result<()> {
    match msg {
        Message::Ping { nonce } => chan.send(&Message::Pong { nonce }),
        Message::Pong { .. } => Ok(()),
        Message::Error { code, message } => Err(Error::new(
            ErrorKind::from_code(code),
            format!("publisher of '{key}': {message}"),
        )),
        Message::Shutdown { .. } => Err(Error::new(
            ErrorKind::Disconnected,
            format!("disconnected: publisher of '{key}' shut down during the handshake"),
        )),
        other => Err(Error::protocol(format!(
            "publisher of '{key}' sent unexpected {} during the handshake",
            other.name()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixStream;

    use super::*;

    #[test]
    fn a_failed_slot_mapping_with_the_publisher_gone_is_a_disconnection() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let mut chan = Channel::new(ours, "publisher", Descriptors::WithEventFd).unwrap();
        let driver_error = Error::new(
            ErrorKind::Cuda,
            "cuIpcOpenMemHandle failed: CUDA_ERROR_INVALID_HANDLE",
        );
        // The publisher is alive: the driver's error stands.
        let err = publisher_gone_or(&mut chan, driver_error.clone(), "cam");
        assert_eq!(err.kind(), ErrorKind::Cuda, "{err}");
        // It died: its socket is at EOF, and that is what the caller hears.
        drop(theirs);
        let err = publisher_gone_or(&mut chan, driver_error, "cam");
        assert_eq!(err.kind(), ErrorKind::Disconnected, "{err}");
        assert!(
            err.to_string().contains("went away during the handshake"),
            "{err}"
        );
        assert!(err.to_string().contains("cuIpcOpenMemHandle"), "{err}");
    }
}
