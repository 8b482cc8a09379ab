//! The control-plane thread: accepts subscribers and runs spec §4.2's state
//! machine for each, never blocking the publishing thread (it shares only
//! the registry's short critical sections with it).
//!
//! Every peer is untrusted: a malformed or unexpected message, a handshake
//! that takes too long, or a socket that does not drain closes that peer
//! alone; the publisher and the other subscribers carry on.

use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags};
use nix::sys::eventfd::{EfdFlags, EventFd};

use super::registry::Registry;
use crate::channel::{Channel, Descriptors, poll_fds};
use crate::error::{Error, ErrorKind, Resource, Result};
use crate::platform::access;
use crate::wire::PROTOCOL_VERSION;
use crate::wire::message::{
    HelloAccept, HelloReq, HelloResp, Message, SubscribeResp, fd_purpose, hello_flags, shutdown_reason,
};

/// How long a new connection may take to send HELLO_REQ: ours send it
/// right after connecting; silence is a leaked or hostile connection (D34).
const HELLO_TIMEOUT: Duration = Duration::from_millis(500);

/// Most connections waiting for their HELLO_REQ at once; a new one beyond
/// this closes the one that has been silent longest.
const MAX_SILENT: usize = 64;

/// Most handshakes past HELLO (making their CUDA context, mapping slots)
/// at once, and from one user. A HELLO beyond either closes the handshake
/// that has waited longest since its HELLO: of the newcomer's user when
/// that user is at its share, else of the user with the most (D34). The
/// wait between HELLO and SUBSCRIBE cannot be short: a CUDA subscriber
/// makes its context there (D23).
const MAX_HANDSHAKES: usize = 64;
const MAX_HANDSHAKES_PER_UID: usize = 16;

/// Most connections accepted per turn of the loop, so that peers already
/// connected are read between bursts of new ones.
const ACCEPT_BURST: usize = 16;

/// How often what subscribers report of themselves in their ACK areas is
/// copied into the headers' subscriber records (D33), for the tools.
const MIRROR_EVERY: Duration = Duration::from_millis(250);

/// Counters the control thread keeps, for callers and tests.
#[derive(Debug, Default)]
pub(crate) struct ControlStats {
    pub rejected: AtomicU64,
}

/// What the thread needs to answer subscribers.
#[derive(Debug)]
pub(crate) struct ControlSetup {
    pub listener: UnixListener,
    pub registry: Arc<Registry>,
    pub hello: HelloAccept,
    pub shared_fds: Vec<(u32, OwnedFd)>,
    /// The header a subscriber that asks for descriptors gets first (D27):
    /// the sealed copy for one with its own ACK area, the named one (read-
    /// write) for a protocol-v1 subscriber (D33).
    pub headers_to_send: [OwnedFd; 2],
    /// Sent after the header (slots shared as fds, side data; D27, D30).
    pub early_fds: Vec<(u32, OwnedFd)>,
    /// The ACK doorbell, sent to subscribers with an ACK area.
    pub doorbell: OwnedFd,
    /// Which protocol-v1 subscribers are admitted.
    pub v1_peers: super::V1Peers,
    pub handshake_timeout: Duration,
    pub stats: Arc<ControlStats>,
    /// Who may subscribe (D19): this uid, root, and `group`.
    pub owner_uid: u32,
    pub group: Option<u32>,
    /// The publisher's logger, for what the thread reports.
    pub logger: Option<crate::log::Logger>,
}

/// The running thread; stopping it sends SHUTDOWN to every peer.
#[derive(Debug)]
pub(crate) struct ControlThread {
    stop: Arc<EventFd>,
    handle: Option<JoinHandle<()>>,
}

impl ControlThread {
    pub(crate) fn spawn(setup: ControlSetup) -> Result<ControlThread> {
        let stop = Arc::new(
            EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
                .map_err(|e| Error::os("eventfd", e))?,
        );
        setup
            .listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("listener", &e))?;
        let thread_stop = stop.clone();
        // Taken here, not in the thread: the publisher holds all it needs
        // when `create` returns.
        let spare = spare_descriptor();
        let name = format!("cuframes-ctl-{}", setup.registry.key);
        let handle = std::thread::Builder::new()
            .name(name.chars().take(15).collect())
            .spawn(move || {
                let logger = setup.logger.clone();
                crate::log::with_logger(logger.as_ref(), || Control::new(setup, thread_stop, spare).run())
            })
            .map_err(|e| Error::io("spawning the control thread", &e))?;
        Ok(ControlThread {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops the thread: every connected peer gets SHUTDOWN(normal).
    pub(crate) fn stop(&mut self) {
        let _ = self.stop.write(1);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for ControlThread {
    fn drop(&mut self) {
        self.stop();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Connected, waiting for HELLO_REQ.
    Hello,
    /// HELLO_RESP sent, waiting for SUBSCRIBE_REQ.
    Subscribe,
    /// Holds `bit`.
    Active(u32),
}

#[derive(Debug)]
struct Peer {
    conn: u64,
    chan: Channel,
    phase: Phase,
    name: String,
    pid: u32,
    uid: u32,
    /// It asked for an ACK area of its own (D33).
    private_acks: bool,
    /// When its handshake times out: before HELLO, HELLO_TIMEOUT after the
    /// accept; after HELLO, `handshake_timeout` after its HELLO.
    deadline: Instant,
    /// Closed to make room for a newer handshake (closed with the timed-out
    /// ones, after the peers ready this turn are served).
    evicted: bool,
}

enum Verdict {
    Keep,
    Close,
}

struct Control {
    setup: ControlSetup,
    stop: Arc<EventFd>,
    peers: Vec<Peer>,
    next_conn: u64,
    /// A descriptor held in reserve: out of descriptors, it is closed to
    /// accept a newcomer and tell it why it cannot be served, instead of
    /// leaving it to time out (and the listener readable for ever).
    spare: Option<OwnedFd>,
    /// What ran out, each logged once (with its limit).
    told: HashSet<String>,
}

impl Control {
    fn new(setup: ControlSetup, stop: Arc<EventFd>, spare: Option<OwnedFd>) -> Control {
        Control {
            setup,
            stop,
            peers: Vec::new(),
            next_conn: 1,
            spare,
            told: HashSet::new(),
        }
    }

    /// Logs, once per cause (a resource, or all 31 subscriber slots taken),
    /// that a subscriber could not be taken for `lack` of it; the ones it
    /// has are served on.
    fn tell_once(&mut self, lack: &Error) {
        let cause = match (lack.resource(), lack.kind()) {
            (Some(resource), _) => format!("{resource:?}"),
            (None, ErrorKind::TooMany) => "subscriber slots".to_owned(),
            _ => return,
        };
        if self.told.insert(cause) {
            crate::log::warning!(
                "publisher of '{}' cannot take more subscribers: {lack}; it goes on serving the {} it has (said once)",
                self.setup.registry.key,
                self.setup.registry.subscribers().len()
            );
        }
    }

    /// Accepts a newcomer with the spare descriptor and tells it that this
    /// publisher has no descriptor left.
    fn turn_away_for_lack_of_descriptors(&mut self, lack: Error) {
        self.tell_once(&lack);
        if self.spare.take().is_none() {
            // Nothing to make room with: let the newcomer wait a moment
            // rather than spin on a listener that stays readable.
            std::thread::sleep(Duration::from_millis(10));
            return;
        }
        if let Ok((sock, _)) = self.setup.listener.accept() {
            self.setup.stats.rejected.fetch_add(1, Ordering::Relaxed);
            let _ = crate::channel::send_on(&sock, "turned-away peer", &refusal_for(&lack), None);
        }
        self.spare = spare_descriptor();
    }

    fn run(mut self) {
        let mut next_mirror = Instant::now() + MIRROR_EVERY;
        loop {
            let now = Instant::now();
            if now >= next_mirror {
                self.setup.registry.mirror_reports();
                next_mirror = now + MIRROR_EVERY;
            }
            let timeout = self
                .peers
                .iter()
                .filter(|p| !matches!(p.phase, Phase::Active(_)))
                .map(|p| p.deadline)
                .chain(std::iter::once(next_mirror))
                .map(|at| at.saturating_duration_since(now))
                .min();
            let (stop_ready, listener_ready, ready) = {
                let mut fds = Vec::with_capacity(self.peers.len() + 2);
                fds.push(PollFd::new(self.stop.as_fd(), PollFlags::POLLIN));
                fds.push(PollFd::new(self.setup.listener.as_fd(), PollFlags::POLLIN));
                for p in &self.peers {
                    fds.push(PollFd::new(p.chan.socket().as_fd(), PollFlags::POLLIN));
                }
                if poll_fds(&mut fds, timeout).is_err() {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                let fired = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
                let ready: Vec<bool> = fds[2..].iter().map(fired).collect();
                (fired(&fds[0]), fired(&fds[1]), ready)
            };
            if stop_ready {
                break;
            }
            // Service readable peers (back to front so removal keeps indices).
            for index in (0..ready.len()).rev() {
                if ready[index] && !self.peers[index].evicted && matches!(self.service(index), Verdict::Close)
                {
                    self.close(index);
                }
            }
            // Peers removed by the publishing thread (ACK timeout) show up as
            // readable with EOF and are closed by service(); handshakes that
            // ran out of time or made room for newer ones are closed here.
            let now = Instant::now();
            for index in (0..self.peers.len()).rev() {
                let p = &self.peers[index];
                if p.evicted {
                    let _ = p.chan.send(&Message::Error {
                        code: ErrorKind::TooMany.code(),
                        message: format!(
                            "too many handshakes in progress: yours, silent longest since its HELLO, was closed to make room (at most {MAX_HANDSHAKES} at once, {MAX_HANDSHAKES_PER_UID} of one user)"
                        ),
                    });
                    self.reject(index);
                } else if !matches!(p.phase, Phase::Active(_)) && p.deadline <= now {
                    let _ = p.chan.send(&Message::Error {
                        code: ErrorKind::Timeout.code(),
                        message: "handshake not completed in time".into(),
                    });
                    self.reject(index);
                }
            }
            if listener_ready {
                self.accept();
            }
        }
        self.shutdown_all();
    }

    fn accept(&mut self) {
        for _ in 0..ACCEPT_BURST {
            let sock = match self.setup.listener.accept() {
                Ok((sock, _)) => sock,
                Err(e) => {
                    let e = Error::io("accepting a subscriber", &e);
                    if matches!(
                        e.resource(),
                        Some(Resource::Descriptors { .. } | Resource::SystemDescriptors)
                    ) {
                        self.turn_away_for_lack_of_descriptors(e);
                    }
                    return;
                }
            };
            let silent: Vec<usize> = (0..self.peers.len())
                .filter(|&i| self.peers[i].phase == Phase::Hello)
                .collect();
            if silent.len() >= MAX_SILENT
                && let Some(&oldest) = silent.iter().min_by_key(|&&i| self.peers[i].conn)
            {
                self.reject(oldest); // silent longest: makes room
            }
            let Ok(cred) = access::peer_credentials(&sock) else {
                self.setup.stats.rejected.fetch_add(1, Ordering::Relaxed);
                continue; // unknown credentials: closed here
            };
            let pid = cred.pid;
            if !access::peer_allowed(&cred, self.setup.owner_uid, self.setup.group) {
                self.setup.stats.rejected.fetch_add(1, Ordering::Relaxed);
                let refusal = Message::Error {
                    code: ErrorKind::Permission.code(),
                    message: format!(
                        "uid {} may not subscribe to '{}' (publisher uid {}{})",
                        cred.uid,
                        self.setup.registry.key,
                        self.setup.owner_uid,
                        self.setup.group.map_or(String::new(), |g| format!(", group {g}"))
                    ),
                };
                let _ = crate::channel::send_on(&sock, "refused peer", &refusal, None);
                continue; // closed here
            }
            let conn = self.next_conn;
            self.next_conn += 1;
            let Ok(chan) = Channel::new(
                sock,
                format!("subscriber connection {conn} (pid {pid})"),
                Descriptors::Refused,
            ) else {
                continue;
            };
            self.peers.push(Peer {
                conn,
                chan,
                phase: Phase::Hello,
                name: String::new(),
                pid,
                uid: cred.uid,
                private_acks: false,
                deadline: Instant::now() + HELLO_TIMEOUT,
                evicted: false,
            });
        }
    }

    fn service(&mut self, index: usize) -> Verdict {
        loop {
            let received = match self.peers[index].chan.try_recv() {
                Ok(Some(r)) => r,
                Ok(None) => return Verdict::Keep,
                Err(e) => {
                    if e.kind() != ErrorKind::Disconnected {
                        self.setup.stats.rejected.fetch_add(1, Ordering::Relaxed);
                        let _ = self.peers[index].chan.send(&Message::Error {
                            code: e.kind().code(),
                            message: e.to_string(),
                        });
                    }
                    return Verdict::Close;
                }
            };
            if let Verdict::Close = self.handle(index, received.msg) {
                return Verdict::Close;
            }
        }
    }

    /// Makes room for one more handshake past HELLO, of `uid`: when that
    /// user has its share, or everyone has theirs, the handshake that has
    /// waited longest since its HELLO — of `uid`, or else of the user with
    /// the most in progress — is marked to be closed. An admitted peer
    /// that says HELLO and then nothing thus holds a place only until
    /// newer handshakes need it, and never one of a user with fewer.
    fn make_room(&mut self, uid: u32) {
        let pending = |p: &&Peer| p.phase == Phase::Subscribe && !p.evicted;
        let of = |uid: u32| self.peers.iter().filter(pending).filter(|p| p.uid == uid).count();
        let victims_uid = if of(uid) >= MAX_HANDSHAKES_PER_UID {
            uid
        } else if self.peers.iter().filter(pending).count() >= MAX_HANDSHAKES {
            // Everyone's places are taken: of the users with the most
            // (never fewer than `uid`'s), the one whose oldest waited longest.
            let most = self
                .peers
                .iter()
                .filter(pending)
                .map(|p| of(p.uid))
                .max()
                .unwrap_or(0);
            match self
                .peers
                .iter()
                .filter(pending)
                .filter(|p| of(p.uid) == most)
                .min_by_key(|p| p.deadline)
            {
                Some(p) => p.uid,
                None => return,
            }
        } else {
            return;
        };
        // Every pending deadline is its HELLO + `handshake_timeout`: the
        // first to come is of the HELLO longest ago.
        let Some(victim) = self
            .peers
            .iter_mut()
            .filter(|p| p.phase == Phase::Subscribe && !p.evicted && p.uid == victims_uid)
            .min_by_key(|p| p.deadline)
        else {
            return;
        };
        victim.evicted = true;
    }

    fn handle(&mut self, index: usize, msg: Message) -> Verdict {
        let peer = &mut self.peers[index];
        match (peer.phase, msg) {
            (_, Message::Ping { nonce }) => send_or_close(&peer.chan, &Message::Pong { nonce }),
            (_, Message::Pong { .. }) => Verdict::Keep,
            (Phase::Hello, Message::HelloReq(req)) => self.hello(index, req),
            (Phase::Subscribe, Message::SubscribeReq { proto_version }) => {
                crate::testhook::abort_at("pub-got-subscribe");
                if proto_version != PROTOCOL_VERSION {
                    let _ = peer.chan.send(&refused_subscribe(ErrorKind::Protocol));
                    return Verdict::Close;
                }
                self.subscribe(index)
            }
            (Phase::Active(bit), Message::Unsubscribe { .. }) => {
                self.setup.registry.remove(bit, Some(peer.conn), None);
                Verdict::Close
            }
            (phase, other) => {
                let expected = match phase {
                    Phase::Hello => "HELLO_REQ",
                    Phase::Subscribe => "SUBSCRIBE_REQ",
                    Phase::Active(_) => "UNSUBSCRIBE or PING",
                };
                let _ = peer.chan.send(&Message::Error {
                    code: ErrorKind::Protocol.code(),
                    message: format!("unexpected {} (expected {expected})", other.name()),
                });
                Verdict::Close
            }
        }
    }

    /// HELLO_REQ (spec §4.2): refused (protocol version, mode, the policy on
    /// protocol-v1 subscribers), or the peer waits for SUBSCRIBE from now
    /// on, with room made for it among the handshakes in progress.
    fn hello(&mut self, index: usize, req: HelloReq) -> Verdict {
        let peer = &mut self.peers[index];
        crate::testhook::abort_at("pub-got-hello");
        if req.proto_version != PROTOCOL_VERSION {
            // D3: HELLO_RESP(PROTOCOL), short payload, then close.
            let _ = peer.chan.send(&Message::HelloResp(HelloResp {
                result: ErrorKind::Protocol.code(),
                proto_version: PROTOCOL_VERSION,
                accept: None,
            }));
            return Verdict::Close;
        }
        if crate::SubscriberMode::from_wire(req.mode).is_none() {
            let _ = peer.chan.send(&Message::HelloResp(HelloResp {
                result: ErrorKind::InvalidArgument.code(),
                proto_version: PROTOCOL_VERSION,
                accept: None,
            }));
            return Verdict::Close;
        }
        let early_fds = req.ext_flags & hello_flags::EARLY_FDS != 0;
        let private_acks = req.ext_flags & hello_flags::PRIVATE_ACKS != 0;
        if let Some(refusal) = v1_refusal(&self.setup, peer, early_fds, private_acks) {
            let _ = peer.chan.send(&refusal);
            return Verdict::Close;
        }
        let uid = peer.uid;
        self.make_room(uid);
        let peer = &mut self.peers[index];
        peer.name = req.name;
        peer.phase = Phase::Subscribe;
        peer.private_acks = private_acks;
        peer.deadline = Instant::now() + self.setup.handshake_timeout;
        self.answer_hello(index, early_fds, private_acks)
    }

    /// HELLO_RESP to peer `index`, then the descriptors it asked for
    /// (`early_fds`): the header, of the copy `private_acks` says, and the
    /// rest sent before SUBSCRIBE.
    fn answer_hello(&self, index: usize, early_fds: bool, private_acks: bool) -> Verdict {
        let peer = &self.peers[index];
        // Protocol-v1 subscribers get v1's handshake; ours ask for
        // the descriptors that spare them /dev/shm and CUDA IPC,
        // the header first: the copy only we can write for those
        // with ACK areas of their own (D33).
        let header = &self.setup.headers_to_send[if private_acks { 0 } else { 1 }];
        let early: Vec<(u32, std::os::fd::BorrowedFd<'_>)> = if early_fds {
            std::iter::once((fd_purpose::HEADER, header.as_fd()))
                .chain(self.setup.early_fds.iter().map(|(p, fd)| (*p, fd.as_fd())))
                .collect()
        } else {
            Vec::new()
        };
        let mut accept = self.setup.hello.clone();
        accept.early_fds = early.len() as u32;
        accept.granted = if private_acks {
            hello_flags::PRIVATE_ACKS
        } else {
            0
        };
        let sent = peer
            .chan
            .send(&Message::HelloResp(HelloResp {
                result: 0,
                proto_version: PROTOCOL_VERSION,
                accept: Some(accept),
            }))
            .and_then(|()| {
                early.iter().try_for_each(|(purpose, fd)| {
                    peer.chan
                        .send_with_fd(&Message::EventFd { purpose: *purpose }, Some(*fd))
                })
            });
        match sent {
            Ok(()) => Verdict::Keep,
            Err(_) => Verdict::Close,
        }
    }

    fn subscribe(&mut self, index: usize) -> Verdict {
        let registry = self.setup.registry.clone();
        let peer = &mut self.peers[index];
        let admitted = match registry.admit(
            peer.conn,
            &peer.name,
            peer.pid,
            peer.chan.socket(),
            peer.private_acks,
        ) {
            Ok(admitted) => admitted,
            Err(e) => {
                if e.resource().is_some() {
                    let _ = peer.chan.send(&refusal_for(&e));
                }
                let _ = peer.chan.send(&refused_subscribe(e.kind()));
                self.tell_once(&e);
                return Verdict::Close;
            }
        };
        peer.phase = Phase::Active(admitted.bit);
        let send_fd = |purpose: u32, fd: std::os::fd::BorrowedFd<'_>| {
            peer.chan.send_with_fd(&Message::EventFd { purpose }, Some(fd))
        };
        let sent = peer
            .chan
            .send(&Message::SubscribeResp(SubscribeResp {
                result: 0,
                assigned_bit: admitted.bit,
                initial_seq: admitted.initial_seq,
            }))
            .and_then(|()| send_fd(fd_purpose::WAKEUP, admitted.wake.as_fd()))
            .and_then(|()| match &admitted.acks {
                Some(area) => send_fd(fd_purpose::ACK_AREA, area.as_fd())
                    .and_then(|()| send_fd(fd_purpose::ACK_DOORBELL, self.setup.doorbell.as_fd())),
                None => Ok(()),
            })
            .and_then(|()| {
                self.setup.shared_fds.iter().try_for_each(|(purpose, fd)| {
                    peer.chan
                        .send_with_fd(&Message::EventFd { purpose: *purpose }, Some(fd.as_fd()))
                })
            });
        match sent {
            Ok(()) => {
                crate::testhook::abort_at("pub-after-accept");
                Verdict::Keep
            }
            Err(_) => Verdict::Close,
        }
    }

    /// Closes peer `index`, freeing its bit at once (socket EOF, UNSUBSCRIBE,
    /// protocol error: no waiting for any ACK timeout).
    fn close(&mut self, index: usize) {
        let peer = self.peers.swap_remove(index);
        if let Phase::Active(bit) = peer.phase {
            self.setup.registry.remove(bit, Some(peer.conn), None);
        }
    }

    fn reject(&mut self, index: usize) {
        self.setup.stats.rejected.fetch_add(1, Ordering::Relaxed);
        self.close(index);
    }

    fn shutdown_all(&mut self) {
        let notice = Message::Shutdown {
            reason: shutdown_reason::NORMAL,
        };
        for peer in self.peers.drain(..) {
            match peer.phase {
                Phase::Active(bit) => {
                    self.setup.registry.remove(bit, Some(peer.conn), Some(&notice));
                }
                _ => {
                    let _ = peer.chan.send(&notice);
                }
            }
        }
    }
}

/// Why a peer's HELLO_REQ is refused by the policy on protocol-v1
/// subscribers (D33), as the ERROR to send; None when it is admitted.
fn v1_refusal(setup: &ControlSetup, peer: &Peer, early_fds: bool, private_acks: bool) -> Option<Message> {
    use super::V1Peers;
    let key = &setup.registry.key;
    if private_acks && !early_fds {
        return Some(Message::Error {
            code: ErrorKind::InvalidArgument.code(),
            message: "PRIVATE_ACKS needs EARLY_FDS (the header comes as a descriptor)".into(),
        });
    }
    let trusted = peer.uid == setup.owner_uid || peer.uid == 0;
    let admitted = private_acks
        || match setup.v1_peers {
            V1Peers::Refuse => false,
            V1Peers::SameUser => trusted,
            V1Peers::Allow => true,
        };
    (!admitted).then(|| Message::Error {
        code: ErrorKind::Permission.code(),
        message: format!(
            "'{key}' admits {} protocol-v1 subscribers (which ACK in the shared header every one of them can write; v1_peers={}): subscribe with cuframes 0.3 or later, which ACKs in an area of its own, or publish with v1_peers=allow",
            match setup.v1_peers {
                V1Peers::Refuse => "no",
                _ => "only its own user's and root's",
            },
            setup.v1_peers.name()
        ),
    })
}

fn send_or_close(chan: &Channel, msg: &Message) -> Verdict {
    match chan.send(msg) {
        Ok(()) => Verdict::Keep,
        Err(_) => Verdict::Close,
    }
}

/// The ERROR that tells a subscriber what this publisher ran out of.
fn refusal_for(lack: &Error) -> Message {
    Message::Error {
        code: lack.kind().code(),
        message: match lack.resource() {
            Some(resource) => resource.ran_out("the publisher"),
            None => lack.to_string(),
        },
    }
}

/// A descriptor to hold in reserve (see `Control::spare`).
fn spare_descriptor() -> Option<OwnedFd> {
    std::fs::File::open("/dev/null").ok().map(OwnedFd::from)
}

fn refused_subscribe(kind: ErrorKind) -> Message {
    Message::SubscribeResp(SubscribeResp {
        result: kind.code(),
        assigned_bit: 0,
        initial_seq: 0,
    })
}
