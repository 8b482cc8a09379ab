//! The subscriber: handshake (spec §4.1), then frames by seq, woken by the
//! publisher's eventfd.

mod lease;

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags};

pub use lease::{FrameLease, PlaneView};

use self::lease::Ring;
use crate::channel::{Channel, poll_fds};
use crate::clock;
use crate::error::{Error, ErrorKind, Result};
use crate::memory::{CudaBinding, MappingSource, MemoryKind, open_mapping};
use crate::resources::KeyPaths;
use crate::shm::header::{HeaderInfo, ShmHeader, validate_header, validate_meta};
use crate::wire::layout::{
    FIRST_SUBSCRIBER_BIT, LAST_SUBSCRIBER_BIT, MAX_RING_SIZE, PROTOCOL_VERSION, SEQ_INVALID, offsets,
};
use crate::wire::message::{HelloReq, Message, fd_purpose, msg_type};

/// Which frames a subscriber receives (HELLO_REQ `mode`, decision 9).
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
/// (decision 25).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CopyMode {
    /// Always the shared slot itself: no copy. A consumer that holds frames
    /// holds slots: under STRICT_WAIT the publisher waits (and drops it after
    /// its ACK timeout) once no slot is free; under DROP_OLDEST held frames
    /// may be overwritten ([`FrameLease::is_intact`]).
    #[default]
    Never,
    /// The shared slot while that is safe, else a private copy (the slot is
    /// released at once): under STRICT_WAIT a copy when holding the slot
    /// would leave the publisher no free slot; under DROP_OLDEST always a
    /// copy (a held slot could be overwritten). Never stalls, never tears.
    Auto,
    /// Always a private copy; the slot is released at once.
    Always,
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
    /// Bound on the whole handshake.
    pub connect_timeout: Duration,
    /// The caller's CUDA context and stream (CUDA memory only).
    pub cuda: Option<CudaBinding>,
    /// CUDA device ordinal: sent in HELLO_REQ, and the device whose primary
    /// context maps CUDA frames when no context is given (-1 = the current
    /// context, else device 0).
    pub cuda_device: i32,
    /// Directory to find the socket in instead of `$CUFRAMES_RUNTIME_DIR` /
    /// the default search (decision 5).
    pub runtime_dir: Option<PathBuf>,
    /// Shared slots or private copies (default: never copy).
    pub copy: CopyMode,
}

impl SubscriberConfig {
    /// Defaults: name "sub-<pid>", sequential, 5 s handshake.
    pub fn new(key: impl Into<String>) -> SubscriberConfig {
        SubscriberConfig {
            key: key.into(),
            name: format!("sub-{}", std::process::id()),
            mode: SubscriberMode::Sequential,
            connect_timeout: Duration::from_secs(5),
            cuda: None,
            cuda_device: -1,
            runtime_dir: None,
            copy: CopyMode::Never,
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
}

/// A connected subscriber.
#[derive(Debug)]
pub struct Subscriber {
    key: String,
    ring: Arc<Ring>,
    info: HeaderInfo,
    chan: Channel,
    wake: OwnedFd,
    mode: SubscriberMode,
    initial_seq: u64,
    next_seq: u64,
    received: u64,
    dropped: u64,
    copied: u64,
    torn: u64,
    copy: CopyMode,
    strict: bool,
    disconnected: Option<Error>,
    shut_down: bool,
    /// The control socket was seen readable: read it before the next frame.
    control_pending: bool,
    /// CLOCK_MONOTONIC ns after which the socket is read even when frames
    /// keep coming (and poll is never reached).
    control_due_ns: u64,
}

/// While frames keep coming, the control socket is still read this often
/// (a SHUTDOWN or ERROR is noticed at most this late).
const CONTROL_CHECK_NS: u64 = 1_000_000;

impl Subscriber {
    /// Connects to the publisher of `config.key` and completes the handshake.
    pub fn connect(config: SubscriberConfig) -> Result<Subscriber> {
        let paths = KeyPaths::for_subscriber(&config.key, config.runtime_dir.as_deref())?;
        let key = config.key.clone();
        let sock = UnixStream::connect(&paths.socket).map_err(|e| match e.raw_os_error().map(Errno::from_raw) {
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
        let mut chan = Channel::new(sock, format!("publisher of '{key}'"))?;
        let deadline = Instant::now() + config.connect_timeout;
        crate::testhook::abort_at("sub-before-hello");

        // HELLO
        chan.send(&Message::HelloReq(HelloReq {
            proto_version: PROTOCOL_VERSION,
            name: config.name.clone(),
            cuda_device: config.cuda_device,
            mode: config.mode.wire(),
        }))
        .map_err(|e| refusal_or(&mut chan, e, &key))?;
        let accept = match expect(&mut chan, deadline, msg_type::HELLO_RESP, &key)? {
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
        if accept.shm_path != paths.shm_name {
            return Err(Error::protocol(format!(
                "publisher of '{key}' names shared memory {:?}; expected {}",
                accept.shm_path, paths.shm_name
            )));
        }
        validate_meta(&accept.meta)
            .map_err(|e| Error::new(e.kind(), format!("HELLO_RESP from '{key}': {e}")))?;

        // The header, untrusted: validated, and it must agree with HELLO_RESP.
        let header = ShmHeader::open(&paths.shm_name)?;
        // Anyone may create a name in /dev/shm: the header must belong to
        // the process that answers on the socket.
        let publisher_uid = crate::access::peer_credentials(chan.socket())?.uid;
        if header.owner_uid() != publisher_uid {
            return Err(Error::new(
                ErrorKind::Permission,
                format!(
                    "shared memory {} of '{key}' belongs to uid {}, but its publisher runs as uid {publisher_uid}",
                    paths.shm_name,
                    header.owner_uid()
                ),
            ));
        }
        if header.load_magic() != crate::wire::MAGIC {
            return Err(Error::corrupt(format!(
                "shared memory of '{key}' is not initialised"
            )));
        }
        let snapshot = header.snapshot();
        let info = validate_header(&snapshot)
            .map_err(|e| Error::new(e.kind(), format!("shared memory of '{key}': {e}")))?;
        if info.ring_size != accept.ring_size as usize || info.meta != accept.meta {
            return Err(Error::corrupt(format!(
                "shared memory of '{key}' disagrees with its publisher's HELLO_RESP"
            )));
        }

        // SUBSCRIBE
        crate::testhook::abort_at("sub-after-hello");
        chan.send(&Message::SubscribeReq {
            proto_version: PROTOCOL_VERSION,
        })?;
        let resp = match expect(&mut chan, deadline, msg_type::SUBSCRIBE_RESP, &key)? {
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

        // Descriptors: the wake-up eventfd, plus what the memory backend needs.
        let mut wanted = vec![fd_purpose::WAKEUP];
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
                other => handle_unexpected(&chan, other, &key)?,
            }
        }
        let at = fds
            .iter()
            .position(|(p, _)| *p == fd_purpose::WAKEUP)
            .expect("collected above");
        let (_, wake) = fds.swap_remove(at);
        let source = MappingSource {
            layout: &info.layout,
            slots: &snapshot.slots[..info.ring_size.min(MAX_RING_SIZE)],
            event_handle: &snapshot.ipc_event_handle,
            device_uuid: info.meta.device_uuid,
            cuda: config.cuda,
            cuda_device: config.cuda_device,
        };
        let mapping = open_mapping(info.memory, &source, &mut fds)
            .map_err(|e| publisher_gone_or(&mut chan, e, &key))?;
        crate::testhook::abort_at("sub-after-accept");
        let ring = Arc::new(Ring {
            header,
            mapping,
            layout: info.layout.clone(),
            memory: info.memory,
            ring_size: info.ring_size,
            bit: resp.assigned_bit,
            overwritten: AtomicU64::new(0),
            spare: Mutex::new(Vec::new()),
        });
        let strict = info.policy == crate::wire::layout::POLICY_STRICT_WAIT;
        Ok(Subscriber {
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
            copy: config.copy,
            strict,
            disconnected: None,
            shut_down: false,
            control_pending: true,
            control_due_ns: 0,
        })
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The validated header: geometry, ring, policy, memory, frame rate.
    pub fn info(&self) -> &HeaderInfo {
        &self.info
    }

    /// CUDA memory on another GPU than this subscriber's context: the
    /// publisher's device ordinal (this process's numbering), whose frames
    /// are read over peer access (decision 21). None on the same GPU, for
    /// host memory, and when the publisher did not name its GPU.
    pub fn cuda_peer_device(&self) -> Option<i32> {
        self.ring.mapping.peer_device()
    }

    /// The subscriber bit the publisher assigned (1..=31).
    pub fn bit(&self) -> u32 {
        self.ring.bit
    }

    /// `global_seq` at the handshake: the first frame delivered is the one after.
    pub fn initial_seq(&self) -> u64 {
        self.initial_seq
    }

    /// Whether the publisher announced its shutdown (SHUTDOWN), as opposed
    /// to vanishing (crash) or dropping this subscriber.
    pub fn publisher_shut_down(&self) -> bool {
        self.shut_down
    }

    /// Counters.
    pub fn stats(&self) -> SubscriberStats {
        SubscriberStats {
            received: self.received,
            dropped: self.dropped,
            overwritten: self.ring.overwritten.load(Ordering::Relaxed),
            copied: self.copied,
            torn: self.torn,
        }
    }

    /// The next frame, waiting up to `timeout` (None = forever).
    ///
    /// `Timeout` when nothing came; `Disconnected` once the publisher shut
    /// down, died, or dropped us (and on every call after).
    pub fn next(&mut self, timeout: Option<Duration>) -> Result<FrameLease> {
        let deadline = timeout.map(|t| Instant::now() + t);
        if let Some(e) = &self.disconnected {
            return Err(e.clone());
        }
        loop {
            // Fast path, a frame is waiting: no system call but the ones
            // the frame needs. The socket is read when poll saw it readable,
            // before sleeping, and every CONTROL_CHECK_NS while frames flow.
            if self.control_pending || clock::monotonic_ns() >= self.control_due_ns {
                self.poll_control()?;
            }
            if let Some(lease) = self.take()? {
                self.show_dropped();
                return Ok(lease);
            }
            // About to sleep: drain the wake-up counter, then look again, so
            // a publish after the look leaves it readable for the poll below.
            let mut counter = [0u8; 8];
            let _ = nix::unistd::read(&self.wake, &mut counter);
            self.poll_control()?;
            let taken = self.take()?;
            self.show_dropped();
            if let Some(lease) = taken {
                return Ok(lease);
            }
            let left = match deadline {
                None => None,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(Error::new(
                            ErrorKind::Timeout,
                            format!(
                                "no frame from '{}' within {} ms",
                                self.key,
                                timeout.unwrap_or_default().as_millis()
                            ),
                        ));
                    }
                    Some(left)
                }
            };
            let mut fds = [
                PollFd::new(self.wake.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.chan.socket().as_fd(), PollFlags::POLLIN),
            ];
            poll_fds(&mut fds, left)?;
            self.control_pending = fds[1].revents().is_some_and(|r| !r.is_empty());
        }
    }

    /// Handles what the publisher sent on the socket; remembers and returns
    /// a disconnection.
    fn poll_control(&mut self) -> Result<()> {
        if let Some(e) = &self.disconnected {
            return Err(e.clone());
        }
        self.control_pending = false;
        self.control_due_ns = clock::monotonic_ns() + CONTROL_CHECK_NS;
        loop {
            let result = self.chan.try_recv();
            let err = match result {
                Ok(None) => return Ok(()),
                Ok(Some(r)) => match r.msg {
                    Message::Ping { nonce } => {
                        let _ = self.chan.send(&Message::Pong { nonce });
                        continue;
                    }
                    Message::Pong { .. } | Message::EventFd { .. } => continue,
                    Message::Shutdown { reason } => {
                        self.shut_down = true;
                        Error::new(
                            ErrorKind::Disconnected,
                            format!(
                                "disconnected: publisher of '{}' shut down (reason {reason})",
                                self.key
                            ),
                        )
                    }
                    Message::Error { code, message } => Error::new(
                        ErrorKind::Disconnected,
                        format!(
                            "disconnected: publisher of '{}' reported {}: {message}",
                            self.key,
                            ErrorKind::from_code(code).describe()
                        ),
                    ),
                    other => Error::new(
                        ErrorKind::Disconnected,
                        format!(
                            "disconnected: publisher of '{}' sent unexpected {}",
                            self.key,
                            other.name()
                        ),
                    ),
                },
                Err(e) if e.kind() == ErrorKind::Disconnected => Error::new(
                    ErrorKind::Disconnected,
                    format!(
                        "disconnected: publisher of '{}' went away (socket closed)",
                        self.key
                    ),
                ),
                Err(e) => Error::new(
                    ErrorKind::Disconnected,
                    format!("disconnected from '{}': {e}", self.key),
                ),
            };
            self.disconnected = Some(err.clone());
            return Err(err);
        }
    }

    /// The next deliverable frame, if any; counts what was lost on the way.
    fn take(&mut self) -> Result<Option<FrameLease>> {
        let ring = self.ring.clone();
        let header = &ring.header;
        let global = header.global_seq().load(Ordering::Acquire);
        if global == SEQ_INVALID || global < self.next_seq {
            return Ok(None);
        }
        if self.mode == SubscriberMode::Latest && global > self.next_seq {
            // Skipped frames are ACKed: under STRICT_WAIT no one waits for them.
            for slot in 0..ring.ring_size {
                let seq = header.slot_field(slot, offsets::SLOT_SEQ).load(Ordering::Acquire);
                if (self.next_seq..global).contains(&seq) {
                    ring.ack(slot, seq);
                }
            }
            self.dropped += global - self.next_seq;
            self.next_seq = global;
        }
        while self.next_seq <= global {
            let seq = self.next_seq;
            let Some(slot) = header.find_slot(seq, ring.ring_size) else {
                // Overwritten, or being rewritten: lost. Go on from the
                // oldest frame still in the ring.
                let next = header
                    .oldest_from(seq + 1, ring.ring_size)
                    .map_or(global + 1, |oldest| oldest.min(global + 1));
                self.dropped += next - seq;
                self.next_seq = next;
                continue;
            };
            self.next_seq += 1;
            // Taken from here on, until ACKed: the publisher and other
            // subscribers count the slot as held (decision 25).
            header.note_taken(ring.bit, seq);
            let pts = header.slot_field(slot, offsets::SLOT_PTS).load(Ordering::Relaxed) as i64;
            let published = header
                .slot_field(slot, offsets::SLOT_PUBLISH_MONO)
                .load(Ordering::Relaxed);
            if header.seq_after_read(slot) != seq {
                self.dropped += 1;
                continue;
            }
            let copy = match self.copy {
                CopyMode::Never => None,
                CopyMode::Always => Some(()),
                CopyMode::Auto => {
                    (!self.strict || header.held_slots(ring.ring_size) >= ring.ring_size).then_some(())
                }
            };
            let copy = match copy {
                None => {
                    ring.mapping.prepare(slot)?;
                    None
                }
                Some(()) => {
                    let mut buffer = ring.local_buffer()?;
                    let copied = ring.mapping.copy_out(slot, &ring.layout, &mut buffer);
                    let intact = copied.is_ok() && header.seq_after_read(slot) == seq;
                    ring.ack(slot, seq);
                    if let Err(e) = copied {
                        ring.mapping.free_local(buffer);
                        return Err(e);
                    }
                    if !intact {
                        ring.give_back(buffer);
                        self.torn += 1;
                        self.dropped += 1;
                        continue;
                    }
                    self.copied += 1;
                    Some(buffer)
                }
            };
            self.received += 1;
            crate::testhook::abort_at("sub-holding-lease");
            return Ok(Some(FrameLease::new(
                ring.clone(),
                slot,
                seq,
                pts,
                published,
                copy,
            )));
        }
        Ok(None)
    }

    /// Extension: frames lost so far, in our subscriber slot (for `cuframes top`).
    fn show_dropped(&self) {
        let lost = self.dropped + self.ring.overwritten.load(Ordering::Relaxed);
        self.ring
            .header
            .subscriber_field(self.ring.bit as usize, offsets::SUB_DROPPED)
            .store(lost, Ordering::Relaxed);
    }

    /// CLOCK_MONOTONIC now, for latency against [`FrameLease::publish_mono_ns`].
    pub fn now_mono_ns() -> u64 {
        clock::monotonic_ns()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        if self.disconnected.is_none() {
            let _ = self.chan.send(&Message::Unsubscribe { reason: 0 });
        }
    }
}

/// A publisher that refuses a peer at accept (decision 19) sends ERROR and
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
        let mut chan = Channel::new(ours, "publisher").unwrap();
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
