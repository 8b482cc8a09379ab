//! Helpers shared by the integration tests: unique keys, a private runtime
//! directory per test, and small publishers/subscribers on host memory;
//! `backend`: the suite over every memory backend (publishers in child
//! processes); `forgery`: a peer forging the shared header.
#![allow(dead_code)]

pub mod backend;
pub mod forgery;

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use cuframes::protocol::{HelloResp, Message};
use cuframes::{
    CopyMode, MemoryRequest, PixelFormat, Policy, Publisher, PublisherConfig, Subscriber, SubscriberConfig,
    pattern,
};

/// A key unique to this process and call (shm names are global).
pub fn unique_key(tag: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}-{tag}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A 64x48 NV12 host-memory publisher config in `dir`, with a ring of 4
/// (the library's default was 4 when these tests were written; they count
/// frames against it).
pub fn config(key: &str, dir: &Path) -> PublisherConfig {
    let mut c = PublisherConfig::new(key, PixelFormat::Nv12, 64, 48);
    c.ring_size = 4;
    c.memory = MemoryRequest::Host;
    c.runtime_dir = Some(dir.to_owned());
    c
}

pub fn strict(key: &str, dir: &Path, ring: usize, ack_timeout: Duration) -> PublisherConfig {
    let mut c = config(key, dir);
    c.ring_size = ring;
    c.policy = Policy::StrictWait;
    c.ack_timeout = ack_timeout;
    // These tests are about the steady state: no longer grace for new
    // subscribers (D23 has tests of its own).
    c.startup_timeout = ack_timeout;
    c
}

/// A subscriber of the shared slots themselves, without a reading thread:
/// these tests are about the slots (copies and read-ahead, the defaults
/// since D39, are asked for by the tests of them).
pub fn subscriber_config(key: &str, dir: &Path, name: &str) -> SubscriberConfig {
    let mut c = SubscriberConfig::new(key);
    c.name = name.to_owned();
    c.runtime_dir = Some(dir.to_owned());
    c.copy = CopyMode::Never;
    c.read_ahead = 0;
    c
}

pub fn subscribe(key: &str, dir: &Path, name: &str) -> Subscriber {
    Subscriber::connect(subscriber_config(key, dir, name)).expect("subscribe")
}

/// Publishes the pattern frame for the next seq.
pub fn publish_pattern(publisher: &mut Publisher) -> u64 {
    let layout = publisher.layout().clone();
    let frame = publisher.next_seq() - 1;
    publisher
        .publish_with(frame as i64 * 1000, |planes| {
            pattern::fill_frame(&layout, frame, planes)
        })
        .expect("publish")
}

/// Whether the lease holds the pattern frame for its seq, each plane read
/// with `read_plane` (host or device memory alike); a plane that cannot be
/// read fails the test.
pub fn lease_matches(lease: &cuframes::FrameLease) -> bool {
    let layout = lease.layout().clone();
    let mut bytes = Vec::new();
    (0..layout.planes().len()).all(|p| {
        lease
            .read_plane(p, &mut bytes)
            .unwrap_or_else(|e| panic!("reading plane {p} of seq {}: {e}", lease.seq()));
        pattern::check_plane(&layout, lease.seq() - 1, p, &bytes)
    })
}

/// Polls `cond` until true or `limit` passes; returns whether it held.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    cond()
}

pub const SECOND: Option<Duration> = Some(Duration::from_secs(1));

/// Runs `f` on a thread and waits at most `limit` for it: None when it hung
/// (the thread is left behind; the test fails).
pub fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

/// The next control message on `s`, or None when the peer closed or the
/// read timed out.
pub fn read_message(s: &mut UnixStream) -> Option<Message> {
    let mut head = [0u8; 8];
    s.read_exact(&mut head).ok()?;
    let len = u32::from_le_bytes(head[4..8].try_into().unwrap()) as usize;
    let mut buf = head.to_vec();
    buf.resize(8 + len, 0);
    s.read_exact(&mut buf[8..]).ok()?;
    Some(Message::decode(&buf).unwrap().unwrap().0)
}

/// A protocol-v1 publisher in the middle, for tests of what a subscriber
/// trusts: accepts one subscriber on `listener`, passes its HELLO_REQ to the
/// real publisher at `real_socket` without `EARLY_FDS` (so the subscriber
/// opens the real header by name), and passes back the HELLO_RESP after
/// `edit` changed it. Returns the subscriber's side of the socket.
pub fn relay_hello_v1(
    listener: &UnixListener,
    real_socket: &Path,
    edit: impl FnOnce(&mut HelloResp),
) -> UnixStream {
    let (mut sub, _) = listener.accept().unwrap();
    let Some(Message::HelloReq(mut hello)) = read_message(&mut sub) else {
        panic!("HELLO_REQ first")
    };
    assert_ne!(hello.ext_flags, 0, "our subscribers ask for descriptors");
    hello.ext_flags = 0;
    let mut publisher = UnixStream::connect(real_socket).unwrap();
    publisher
        .write_all(&Message::HelloReq(hello).encode().unwrap())
        .unwrap();
    let Some(Message::HelloResp(mut resp)) = read_message(&mut publisher) else {
        panic!("HELLO_RESP")
    };
    edit(&mut resp);
    sub.write_all(&Message::HelloResp(resp).encode().unwrap())
        .unwrap();
    sub
}

/// Writes `value` at `offset` of the header copy only the publisher of
/// `key` can write (D33), through its own read-write mapping in this
/// process (/proc/self/maps names it, /proc/self/mem writes it): for tests
/// that play a hostile or broken publisher.
pub fn write_publisher_copy(key: &str, offset: u64, value: u64) {
    use std::os::unix::fs::FileExt;
    let name = format!("/memfd:cuframes-{key}-header");
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps
        .lines()
        .find(|l| l.contains(&name) && l.split_whitespace().nth(1) == Some("rw-s"))
        .unwrap_or_else(|| panic!("the publisher of {key} is not in this process"));
    let start = u64::from_str_radix(line.split('-').next().unwrap(), 16).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")
        .unwrap()
        .write_all_at(&value.to_le_bytes(), start + offset)
        .unwrap();
}

/// What this process holds of the kernel's: descriptors, mappings (and of
/// those, shared headers and memfds), threads. Tests that count it run
/// alone in their binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub fds: usize,
    pub maps: usize,
    pub shared_maps: usize,
    pub threads: usize,
}

pub fn counts() -> Counts {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    Counts {
        fds: std::fs::read_dir("/proc/self/fd").unwrap().count(),
        maps: maps.lines().count(),
        shared_maps: maps
            .lines()
            .filter(|l| l.contains("cuframes") || l.contains("memfd:"))
            .count(),
        threads: std::fs::read_dir("/proc/self/task").unwrap().count(),
    }
}
