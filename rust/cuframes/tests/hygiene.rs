//! Resource hygiene: 10,000 connect/disconnect cycles leak no descriptor,
//! mapping, thread or subscriber bit, in the publisher or the subscribers
//! (both live in this process, so /proc/self counts both sides).
//!
//! One test in its own binary: nothing else runs in the process while it
//! counts. `CUFRAMES_HYGIENE_CYCLES` changes the count (default 10,000).

mod common;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use cuframes::protocol::{HelloReq, Message};
use cuframes::{Publisher, Subscriber};

fn cycles() -> usize {
    std::env::var("CUFRAMES_HYGIENE_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn bitmap(key: &str, dir: &std::path::Path) -> u64 {
    let ins = cuframes::inspect::inspect(key, Some(dir)).unwrap();
    let header = ins.header.expect("header");
    assert_eq!(
        ins.subscribers().len(),
        (header.subscriber_bitmap as u32).count_ones() as usize,
        "subscriber slots mirror the bitmap"
    );
    header.subscriber_bitmap
}

#[test]
fn ten_thousand_connect_disconnect_cycles_leak_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("hygiene");
    let mut cfg = config(&key, dir.path());
    cfg.handshake_timeout = Duration::from_secs(2);
    let publisher = Publisher::create(cfg).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = publish_until_stopped(publisher, stop.clone());
    let hello = half_hello();
    let cycle = |i: usize| one_cycle(i, &key, dir.path(), &hello);

    for i in 0..40 {
        cycle(i); // warm-up: lazily created process state
    }
    assert!(eventually(Duration::from_secs(5), || bitmap(&key, dir.path()) == 0));
    std::thread::sleep(Duration::from_millis(50));
    let before = counts();

    let n = cycles();
    let started = Instant::now();
    for i in 0..n {
        cycle(i);
    }
    let took = started.elapsed();
    assert!(
        eventually(Duration::from_secs(10), || bitmap(&key, dir.path()) == 0),
        "bits reclaimed"
    );
    settle(before);
    let after = counts();
    stop.store(true, Ordering::Relaxed);
    let publisher = worker.join().unwrap();
    eprintln!(
        "{n} cycles in {took:?} ({:.0} µs each); before {before:?}, after {after:?}; {} frames published, {} rejected",
        took.as_micros() as f64 / n as f64,
        publisher.next_seq() - 1,
        publisher.stats().rejected_connections
    );
    assert_eq!(publisher.subscriber_count(), 0);
    assert_eq!(after.fds, before.fds, "descriptors");
    assert_eq!(after.shared_maps, before.shared_maps, "shared mappings");
    assert_eq!(after.threads, before.threads, "threads");
    // The allocator may map an arena or two; a leak per cycle would be thousands.
    assert!(after.maps <= before.maps + 8, "mappings: {before:?} -> {after:?}");
}

/// A thread publishing pattern frames every 0.3 ms until `stop`; it hands
/// the publisher back.
fn publish_until_stopped(
    mut publisher: Publisher,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Publisher> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            publish_pattern(&mut publisher);
            std::thread::sleep(Duration::from_micros(300));
        }
        publisher
    })
}

/// An encoded HELLO_REQ, for the handshakes abandoned after it.
fn half_hello() -> Vec<u8> {
    Message::HelloReq(HelloReq {
        proto_version: 1,
        name: "half".into(),
        cuda_device: -1,
        mode: 0,
        ext_flags: 0,
    })
    .encode()
    .unwrap()
}

/// Cycle `i`: one of four ways in and out, by `i % 4`.
fn one_cycle(i: usize, key: &str, dir: &std::path::Path, hello: &[u8]) {
    match i % 4 {
        // Subscribe, read a frame, drop the subscriber while still holding
        // the lease, then the lease.
        0 => {
            let mut sub = subscribe(key, dir, "lease");
            let lease = sub.next(SECOND).expect("a frame");
            assert!(lease_matches(&lease) || !lease.is_intact());
            drop(sub);
            drop(lease);
        }
        // Subscribe and leave at once.
        1 => drop(subscribe(key, dir, "quick")),
        // Abandon the handshake after HELLO.
        2 => {
            let mut s = UnixStream::connect(dir.join(format!("{key}.sock"))).unwrap();
            s.write_all(hello).unwrap();
        }
        // Latest mode, two frames, released.
        _ => {
            let mut c = subscriber_config(key, dir, "latest");
            c.mode = cuframes::SubscriberMode::Latest;
            let mut sub = Subscriber::connect(c).unwrap();
            for _ in 0..2 {
                sub.next(SECOND).expect("a frame").release().ok();
            }
        }
    }
}

/// Waits (at most 10 s) until this process holds no more descriptors,
/// shared mappings and threads than `want`; whether it got there (the
/// assertions after compare exactly).
fn settle(want: Counts) -> bool {
    eventually(Duration::from_secs(10), || {
        let c = counts();
        c.fds <= want.fds && c.shared_maps <= want.shared_maps && c.threads <= want.threads
    })
}
