//! One end of a control connection: TLV messages over a non-blocking Unix
//! stream socket, with descriptors in SCM_RIGHTS.
//!
//! Descriptors arrive with the bytes of the message they were sent with (the
//! kernel never merges a read across a descriptor-carrying send), so they are
//! queued in arrival order and each EVENT_FD message takes the oldest one.
//!
//! Every descriptor the kernel delivers is owned (and so closed) here, even
//! when the ancillary data was truncated: the control buffer is parsed as
//! bytes rather than through an iterator that refuses truncated data. A
//! side that expects none (the publisher: subscribers never send any)
//! closes them and the connection at once; the other (a subscriber) accepts
//! one per EVENT_FD and refuses a peer with more queued (D33).

use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Instant;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{ControlMessage, MsgFlags, UnixAddr, recvmsg, sendmsg};

use crate::error::{Error, ErrorKind, Resource, Result};
use crate::wire::message::{MAX_MESSAGE_LEN, Message};

/// Most descriptors a peer may have queued before it is a protocol error:
/// our publishers send each EVENT_FD with its descriptor alone.
const MAX_QUEUED_FDS: usize = 4;

/// The kernel's limit of descriptors in one message (`SCM_MAX_FD`): the
/// control buffer holds that many, so a flood is read whole and closed.
const SCM_MAX_FD: usize = 253;

/// Whether a side of the connection accepts descriptors from its peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Descriptors {
    /// None: the first one closes the connection (the publisher's side).
    Refused,
    /// One per EVENT_FD message (the subscriber's side).
    WithEventFd,
}

/// A received message and, for EVENT_FD, its descriptor.
#[derive(Debug)]
pub(crate) struct Received {
    pub msg: Message,
    pub fd: Option<OwnedFd>,
}

/// A framed, non-blocking control connection.
#[derive(Debug)]
pub(crate) struct Channel {
    sock: UnixStream,
    rx: Vec<u8>,
    fds: VecDeque<OwnedFd>,
    accepts: Descriptors,
    eof: bool,
    peer: String,
}

impl Channel {
    /// Wraps a connected socket (made non-blocking). `peer` names the other
    /// side in errors.
    pub(crate) fn new(sock: UnixStream, peer: impl Into<String>, accepts: Descriptors) -> Result<Channel> {
        let peer = peer.into();
        sock.set_nonblocking(true)
            .map_err(|e| Error::io(format!("socket to {peer}"), &e))?;
        Ok(Channel {
            sock,
            rx: Vec::with_capacity(256),
            fds: VecDeque::new(),
            accepts,
            eof: false,
            peer,
        })
    }

    pub(crate) fn socket(&self) -> &UnixStream {
        &self.sock
    }

    /// Sends a message (see [`send_on`]).
    pub(crate) fn send(&self, msg: &Message) -> Result<()> {
        self.send_with_fd(msg, None)
    }

    /// Sends a message with one descriptor in SCM_RIGHTS.
    pub(crate) fn send_with_fd(&self, msg: &Message, fd: Option<BorrowedFd<'_>>) -> Result<()> {
        send_on(&self.sock, &self.peer, msg, fd)
    }

    /// Reads what the socket has without blocking. Returns false when
    /// nothing was there.
    fn fill(&mut self) -> Result<bool> {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let mut cmsg = nix::cmsg_space!([RawFd; SCM_MAX_FD]);
        let (n, truncated) = {
            let mut iov = [IoSliceMut::new(&mut buf)];
            match recvmsg::<UnixAddr>(
                self.sock.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(msg) => (msg.bytes, msg.flags.contains(MsgFlags::MSG_CTRUNC)),
                Err(Errno::EAGAIN | Errno::EINTR) => return Ok(false),
                Err(Errno::ECONNRESET) => {
                    self.eof = true;
                    return Ok(true);
                }
                Err(e) => return Err(Error::os(format!("reading from {}", self.peer), e)),
            }
        };
        self.take_descriptors(&cmsg, truncated)?;
        if n == 0 {
            self.eof = true;
        }
        self.rx.extend_from_slice(&buf[..n]);
        Ok(true)
    }

    /// Owns every descriptor in `control`, the control buffer of one
    /// `recvmsg` (`truncated`: it came back with `MSG_CTRUNC`), and queues
    /// them for EVENT_FD messages; descriptors this side refuses, a
    /// truncated buffer, or more queued than [`MAX_QUEUED_FDS`] are a
    /// protocol error, with every descriptor received closed.
    fn take_descriptors(&mut self, control: &[u8], truncated: bool) -> Result<()> {
        let received = descriptors_in(control);
        if truncated && let Some(lack) = self.out_of_descriptors() {
            self.fds.clear();
            return Err(Error::exhausted(
                lack,
                format!(
                    "{} sent descriptors this process could not take: {}",
                    self.peer,
                    lack.ran_out("this process")
                ),
            ));
        }
        if truncated || (self.accepts == Descriptors::Refused && !received.is_empty()) {
            self.fds.clear();
            return Err(Error::protocol(format!(
                "{} sent {}{} file descriptor(s){}",
                self.peer,
                received.len(),
                if truncated { " or more" } else { "" },
                if self.accepts == Descriptors::Refused {
                    "; subscribers never send any"
                } else {
                    ""
                }
            )));
        }
        self.fds.extend(received);
        if self.fds.len() > MAX_QUEUED_FDS {
            self.fds.clear();
            return Err(Error::protocol(format!(
                "{} sent more file descriptors than messages to carry them",
                self.peer
            )));
        }
        Ok(())
    }

    /// Whether this process is out of descriptors (the kernel truncates
    /// what it cannot install, as it does what the buffer cannot hold):
    /// asked by trying to take one more.
    fn out_of_descriptors(&self) -> Option<Resource> {
        match self.sock.as_fd().try_clone_to_owned() {
            Ok(_one_more) => None,
            Err(e) => Error::io("", &e).resource(),
        }
    }

    fn parse(&mut self) -> Result<Option<Received>> {
        let Some((msg, used)) =
            Message::decode(&self.rx).map_err(|e| Error::protocol(format!("from {}: {e}", self.peer)))?
        else {
            return Ok(None);
        };
        self.rx.drain(..used);
        let fd = if matches!(msg, Message::EventFd { .. }) {
            Some(self.fds.pop_front().ok_or_else(|| {
                Error::protocol(format!("EVENT_FD from {} carried no descriptor", self.peer))
            })?)
        } else {
            None
        };
        Ok(Some(Received { msg, fd }))
    }

    /// The next message if one is complete, without blocking. After the
    /// peer closed: `Disconnected` (or `Protocol` when it left half a
    /// message).
    pub(crate) fn try_recv(&mut self) -> Result<Option<Received>> {
        loop {
            if let Some(r) = self.parse()? {
                return Ok(Some(r));
            }
            if self.rx.is_empty() && !self.fds.is_empty() {
                // Every complete message is taken and no EVENT_FD claimed
                // them: sent with some other message.
                self.fds.clear();
                return Err(Error::protocol(format!(
                    "{} sent a file descriptor with a message that carries none",
                    self.peer
                )));
            }
            if self.eof {
                return Err(self.closed_error());
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// The next message, waiting until `deadline`.
    pub(crate) fn recv(&mut self, deadline: Instant, waiting_for: &str) -> Result<Received> {
        loop {
            if let Some(r) = self.try_recv()? {
                return Ok(r);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!("{} did not send {waiting_for} in time", self.peer),
                ));
            }
            wait_readable(self.sock.as_fd(), Some(left))?;
        }
    }

    fn closed_error(&self) -> Error {
        if self.rx.is_empty() {
            Error::new(
                ErrorKind::Disconnected,
                format!("{} closed the connection", self.peer),
            )
        } else {
            Error::protocol(format!(
                "{} closed the connection in the middle of a message",
                self.peer
            ))
        }
    }
}

/// Connects to the listening socket at `path` without blocking: a listener
/// whose backlog is full (busy, or flooded) answers `EAGAIN` at once
/// instead of holding the caller (D34).
pub(crate) fn connect_nonblocking(path: &std::path::Path) -> std::result::Result<UnixStream, Errno> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, connect, socket};
    let fd = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    connect(fd.as_raw_fd(), &UnixAddr::new(path)?)?;
    Ok(UnixStream::from(fd))
}

/// [`connect_nonblocking`], retried while the listener is busy until
/// `deadline`.
pub(crate) fn connect_until(path: &std::path::Path, deadline: Instant) -> std::io::Result<UnixStream> {
    loop {
        match connect_nonblocking(path) {
            Err(Errno::EAGAIN | Errno::EINTR) if Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(e) => return Err(std::io::Error::from(e)),
            Ok(sock) => return Ok(sock),
        }
    }
}

/// Sends `msg` (and `fd` in SCM_RIGHTS) on `sock`, never blocking and never
/// raising SIGPIPE. A peer that does not drain its socket (the send would
/// block) is an error: control messages are few and small, so only a stuck
/// or hostile peer fills it.
pub(crate) fn send_on(
    sock: &UnixStream,
    peer: &str,
    msg: &Message,
    fd: Option<BorrowedFd<'_>>,
) -> Result<()> {
    let bytes = msg.encode()?;
    let raw: Vec<RawFd> = fd.iter().map(|f| f.as_raw_fd()).collect();
    let mut sent = 0;
    while sent < bytes.len() {
        let iov = [IoSlice::new(&bytes[sent..])];
        let rights = [ControlMessage::ScmRights(&raw)];
        let cmsgs: &[ControlMessage] = if sent == 0 && !raw.is_empty() {
            &rights
        } else {
            &[]
        };
        match sendmsg::<UnixAddr>(
            sock.as_raw_fd(),
            &iov,
            cmsgs,
            MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            None,
        ) {
            Ok(n) => sent += n,
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!(
                        "sending {} to {peer}: the peer is not reading its socket",
                        msg.name()
                    ),
                ));
            }
            Err(Errno::EPIPE | Errno::ECONNRESET | Errno::ENOTCONN) => {
                return Err(Error::new(
                    ErrorKind::Disconnected,
                    format!("sending {} to {peer}: connection closed", msg.name()),
                ));
            }
            Err(e) => return Err(Error::os(format!("sending {} to {peer}", msg.name()), e)),
        }
    }
    Ok(())
}

/// Every descriptor in a control buffer the kernel filled (zeroed before
/// the call), owned: `SCM_RIGHTS` messages in `cmsghdr` layout, read as
/// bytes so that a truncated buffer gives up its descriptors too.
fn descriptors_in(control: &[u8]) -> Vec<OwnedFd> {
    let header = size_of::<nix::libc::cmsghdr>();
    let align = |n: usize| n.next_multiple_of(size_of::<usize>());
    let word = |at: usize, len: usize| control.get(at..at + len);
    let mut fds = Vec::new();
    let mut at = 0;
    while let Some(len_bytes) = word(at, size_of::<usize>()) {
        let len = usize::from_ne_bytes(len_bytes.try_into().expect("usize bytes"));
        if len < header || at + len > control.len() {
            break;
        }
        let level = i32::from_ne_bytes(
            control[at + size_of::<usize>()..][..4]
                .try_into()
                .expect("4 bytes"),
        );
        let kind = i32::from_ne_bytes(
            control[at + size_of::<usize>() + 4..][..4]
                .try_into()
                .expect("4 bytes"),
        );
        if level == nix::libc::SOL_SOCKET && kind == nix::libc::SCM_RIGHTS {
            for raw in control[at + align(header)..at + len].chunks_exact(4) {
                let raw = RawFd::from_ne_bytes(raw.try_into().expect("4 bytes"));
                // SAFETY: the kernel installed this descriptor in our table
                // for this message (SCM_RIGHTS) and nothing else owns it.
                fds.push(unsafe { OwnedFd::from_raw_fd(raw) });
            }
        }
        at += align(len);
    }
    fds
}

/// Polls `fd` for readability for at most `timeout` (None = forever).
pub(crate) fn wait_readable(fd: BorrowedFd<'_>, timeout: Option<std::time::Duration>) -> Result<bool> {
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    let ready = poll_fds(&mut fds, timeout)?;
    Ok(ready > 0)
}

/// poll(2) with a Duration timeout (rounded up to whole ms; None = forever),
/// retried on EINTR.
pub(crate) fn poll_fds(fds: &mut [PollFd<'_>], timeout: Option<std::time::Duration>) -> Result<usize> {
    let ms = match timeout {
        None => PollTimeout::NONE,
        Some(t) => {
            let ms = t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
        }
    };
    loop {
        match poll(fds, ms) {
            Ok(n) => return Ok(n as usize),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(Error::os("poll", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;

    use super::*;

    /// How many of this process's descriptors are open on `file`.
    fn open_on(file: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == file))
            .count()
    }

    /// Sends `bytes` with `fds` copies of `fd` (SCM_RIGHTS) in one message.
    fn send_chunk(sock: &UnixStream, bytes: &[u8], fd: RawFd, fds: usize) {
        let copies = vec![fd; fds];
        let rights = [ControlMessage::ScmRights(&copies)];
        let cmsgs: &[ControlMessage] = if fds == 0 { &[] } else { &rights };
        let iov = [IoSlice::new(bytes)];
        let _ = sendmsg::<UnixAddr>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None);
    }

    fn message_bytes() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(Message::Ping { nonce: 1 }.encode().unwrap()),
            Just(Message::EventFd { purpose: 1 }.encode().unwrap()),
            Just(Message::Shutdown { reason: 0 }.encode().unwrap()),
            proptest::collection::vec(any::<u8>(), 0..64),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Any mix of messages, junk and descriptor counts (0 to the
        /// kernel's 253 a message), split anywhere, read by either side:
        /// no panic, and once the channel is gone every descriptor it was
        /// sent is closed.
        #[test]
        fn every_descriptor_received_is_closed_whatever_the_peer_sends(
            chunks in proptest::collection::vec((message_bytes(), prop_oneof![Just(0usize), Just(1), 0usize..10, Just(253)]), 1..12),
            refused in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let marker = dir.path().join("marker");
            let file = std::fs::File::create(&marker).unwrap();
            let marker = marker.canonicalize().unwrap();
            let (ours, theirs) = UnixStream::pair().unwrap();
            let accepts = if refused { Descriptors::Refused } else { Descriptors::WithEventFd };
            let mut chan = Channel::new(ours, "peer", accepts).unwrap();
            for (bytes, fds) in &chunks {
                send_chunk(&theirs, bytes, file.as_raw_fd(), *fds);
                // Read what is there until the channel refuses the peer.
                let mut refused_peer = false;
                for _ in 0..32 {
                    match chan.try_recv() {
                        Ok(Some(received)) => drop(received),
                        Ok(None) => break,
                        Err(_) => { refused_peer = true; break; }
                    }
                }
                if refused_peer {
                    break;
                }
            }
            drop(theirs);
            while let Ok(Some(received)) = chan.try_recv() {
                drop(received);
            }
            drop(chan);
            prop_assert_eq!(open_on(&marker), 1, "only the sender's own descriptor is left");
        }
    }

    /// A control buffer as the kernel fills it for one `SCM_RIGHTS`
    /// message holding `fds`, in `space` bytes (zeroed beyond).
    fn scm_rights(fds: &[RawFd], space: usize) -> Vec<u8> {
        let header = size_of::<nix::libc::cmsghdr>();
        let mut control = vec![0u8; space];
        let len = header + 4 * fds.len();
        control[..size_of::<usize>()].copy_from_slice(&len.to_ne_bytes());
        control[size_of::<usize>()..][..4].copy_from_slice(&nix::libc::SOL_SOCKET.to_ne_bytes());
        control[size_of::<usize>() + 4..][..4].copy_from_slice(&nix::libc::SCM_RIGHTS.to_ne_bytes());
        for (i, fd) in fds.iter().enumerate() {
            control[header + 4 * i..][..4].copy_from_slice(&fd.to_ne_bytes());
        }
        control
    }

    /// A control buffer the kernel truncated (`MSG_CTRUNC`: more
    /// descriptors than fit; it installs those that fit and closes the
    /// rest), on either side, its buffer full or not: a protocol error, and
    /// every descriptor that reached this process is closed at once. A real
    /// socket cannot produce it (the buffer holds the 253 a message can
    /// carry), so the buffer is made here, holding duplicates of a file's
    /// descriptor as `recvmsg` would have installed them.
    #[test]
    fn a_truncated_control_buffer_is_refused_and_its_descriptors_closed() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("marker");
        let file = std::fs::File::create(&marker).unwrap();
        let marker = marker.canonicalize().unwrap();
        let space = nix::cmsg_space!([RawFd; SCM_MAX_FD]).len();
        for accepts in [Descriptors::Refused, Descriptors::WithEventFd] {
            for count in [1, 4, SCM_MAX_FD] {
                let (ours, _theirs) = UnixStream::pair().unwrap();
                let mut chan = Channel::new(ours, "peer", accepts).unwrap();
                let fds: Vec<RawFd> = (0..count)
                    .map(|_| std::os::fd::IntoRawFd::into_raw_fd(nix::unistd::dup(&file).unwrap()))
                    .collect();
                assert_eq!(open_on(&marker), 1 + count);
                let err = chan.take_descriptors(&scm_rights(&fds, space), true).unwrap_err();
                assert_eq!(err.kind(), ErrorKind::Protocol, "{accepts:?}, {count}: {err}");
                assert!(err.to_string().contains("or more file descriptor"), "{err}");
                assert_eq!(
                    open_on(&marker),
                    1,
                    "{accepts:?}, {count} descriptors, truncated: the channel kept some"
                );
                assert!(chan.fds.is_empty());
            }
        }
    }

    #[test]
    fn a_publisher_side_channel_refuses_the_first_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("f")).unwrap();
        let (ours, theirs) = UnixStream::pair().unwrap();
        let mut chan = Channel::new(ours, "peer", Descriptors::Refused).unwrap();
        send_chunk(
            &theirs,
            &Message::Ping { nonce: 1 }.encode().unwrap(),
            file.as_raw_fd(),
            1,
        );
        let err = chan.try_recv().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Protocol);
        assert!(err.to_string().contains("subscribers never send any"), "{err}");
    }

    #[test]
    fn a_descriptor_with_a_message_that_carries_none_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("f")).unwrap();
        let (ours, theirs) = UnixStream::pair().unwrap();
        let mut chan = Channel::new(ours, "publisher", Descriptors::WithEventFd).unwrap();
        send_chunk(
            &theirs,
            &Message::EventFd { purpose: 1 }.encode().unwrap(),
            file.as_raw_fd(),
            1,
        );
        let got = chan.try_recv().unwrap().unwrap();
        assert!(got.fd.is_some(), "EVENT_FD takes its descriptor");
        send_chunk(
            &theirs,
            &Message::Ping { nonce: 2 }.encode().unwrap(),
            file.as_raw_fd(),
            1,
        );
        assert!(matches!(
            chan.try_recv(),
            Ok(Some(Received {
                msg: Message::Ping { .. },
                ..
            }))
        ));
        let err = chan.try_recv().unwrap_err();
        assert!(err.to_string().contains("carries none"), "{err}");
    }
}
