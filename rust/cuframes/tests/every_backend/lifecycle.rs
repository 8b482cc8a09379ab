//! A stream's life around its frames: a subscriber joining late, the
//! publisher shut down or killed, a subscriber gone or killed while it
//! holds frames. What each backend must keep: held frames stay readable
//! after their publisher is gone, and no one waits for a dead peer.

use std::path::Path;
use std::time::{Duration, Instant};

use cuframes::ErrorKind;

use crate::common::backend::{Backend, SubscriberProcess, every_backend};
use crate::common::*;

/// Well above what any of these waits takes, and far below the ACK
/// timeout of the strict-wait publishers here (10 s): a wait for a gone
/// subscriber's ACKs would show.
const AT_ONCE: Duration = Duration::from_secs(2);

fn late_join_starts_after_initial_seq(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("late");
    let mut publisher = backend.publisher(config(&key, dir.path()));
    for _ in 0..5 {
        publisher.publish_pattern();
    }
    let mut sub = backend.subscribe(&key, dir.path(), "late");
    assert_eq!(sub.initial_seq(), 5);
    assert_eq!(
        sub.next(Some(Duration::from_millis(50))).unwrap_err().kind(),
        ErrorKind::Timeout,
        "frames from before the join are not delivered"
    );
    publisher.publish_pattern();
    let lease = sub.next(SECOND).unwrap();
    assert_eq!(lease.seq(), 6);
    assert!(lease_matches(&lease));
    drop(lease);
    assert_eq!(sub.stats().dropped, 0);
}

/// A publisher shut down: SHUTDOWN to its subscribers, its names removed,
/// and a frame leased before stays readable after its process is gone.
fn destroy_sends_shutdown_and_removes_resources(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("down");
    let mut publisher = backend.publisher(config(&key, dir.path()));
    let mut sub = backend.subscribe(&key, dir.path(), "s");
    publisher.publish_pattern();
    let lease = sub.next(SECOND).unwrap();
    let paths = cuframes::KeyPaths::in_dir(&key, dir.path()).unwrap();
    let shm = format!("/dev/shm/cuframes-{key}");
    assert!(paths.socket.exists() && Path::new(&shm).exists());
    publisher.shut_down();
    assert!(!paths.socket.exists(), "socket unlinked");
    assert!(!Path::new(&shm).exists(), "shm unlinked");
    assert!(!paths.lock.exists(), "lock unlinked");
    // The outstanding lease stays readable: mappings live until released.
    assert!(lease_matches(&lease));
    drop(lease);
    let err = sub.next(SECOND).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Disconnected);
    assert!(sub.publisher_shut_down());
    assert!(err.to_string().contains("shut down"), "{err}");
    assert_eq!(
        sub.next(SECOND).unwrap_err().kind(),
        ErrorKind::Disconnected,
        "sticky"
    );
}

/// A consumer slower than its publisher still gets what the publisher put in
/// the ring before it shut down, and counts what was overwritten before that:
/// received + lost = published, then the disconnection.
fn frames_in_the_ring_at_shutdown_are_delivered_then_disconnected(backend: Backend) {
    for (published, first) in [(3u64, 1u64), (10, 7)] {
        let dir = tempfile::tempdir().unwrap();
        let key = unique_key("drain");
        let mut publisher = backend.publisher(config(&key, dir.path())); // ring 4
        let mut sub = backend.subscribe(&key, dir.path(), "slow");
        for _ in 0..published {
            publisher.publish_pattern();
        }
        publisher.shut_down();
        let mut seqs = Vec::new();
        let err = loop {
            match sub.next(SECOND) {
                Ok(lease) => {
                    assert!(lease_matches(&lease), "frame {} intact", lease.seq());
                    seqs.push(lease.seq());
                }
                Err(e) => break e,
            }
        };
        assert_eq!(seqs, (first..=published).collect::<Vec<_>>());
        assert_eq!(err.kind(), ErrorKind::Disconnected, "{err}");
        assert!(sub.publisher_shut_down());
        let stats = sub.stats();
        assert_eq!(stats.received + stats.dropped, published, "{stats:?}");
    }
}

/// kill -9 of the publisher: a subscriber waiting for a frame learns at
/// once that it went away (not a shutdown), and the frame it holds stays
/// readable and intact (the backend keeps the memory of a dead publisher's
/// slots while they are mapped).
fn a_killed_publisher_is_reported_at_once_and_held_frames_stay_readable(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("pubkill");
    let mut publisher = backend.publisher(config(&key, dir.path()));
    let mut sub = backend.subscribe(&key, dir.path(), "survivor");
    for _ in 0..3 {
        publisher.publish_pattern();
    }
    let held: Vec<_> = (1..=3).map(|_| sub.next(SECOND).unwrap()).collect();
    assert_eq!(held.iter().map(|l| l.seq()).collect::<Vec<_>>(), [1, 2, 3]);
    let waiting = std::thread::spawn(move || {
        let result = sub.next(Some(Duration::from_secs(10))).map(|lease| lease.seq());
        (result, Instant::now(), sub)
    });
    std::thread::sleep(Duration::from_millis(100)); // blocked in next()
    let killed = Instant::now();
    publisher.kill();
    let (result, learnt, sub) = waiting.join().unwrap();
    let err = result.expect_err("no frame after the kill");
    assert_eq!(err.kind(), ErrorKind::Disconnected, "{err}");
    assert!(err.to_string().contains("went away"), "{err}");
    assert!(!sub.publisher_shut_down(), "a crash is not a SHUTDOWN");
    let took = learnt.duration_since(killed);
    assert!(took < Duration::from_millis(500), "learnt after {took:?}");
    for lease in held {
        assert!(lease.is_intact(), "seq {}", lease.seq());
        assert!(lease_matches(&lease), "seq {} after the kill", lease.seq());
        backend.check_lease(&lease);
    }
}

/// A subscriber dropped while its consumer still holds every slot (the
/// leases outlive it): the strict-wait publisher stops waiting for it at
/// once, the other subscriber loses nothing, and the orphaned leases stay
/// readable until released, then report that their slots were reused.
fn a_subscriber_dropped_while_holding_frames_holds_up_no_one(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("subdrop");
    let mut publisher = backend.publisher(strict(&key, dir.path(), 2, Duration::from_secs(10)));
    let mut gone = backend.subscribe(&key, dir.path(), "gone");
    let mut stays = backend.subscribe(&key, dir.path(), "stays");
    publisher.publish_pattern();
    publisher.publish_pattern();
    let orphans: Vec<_> = (0..2).map(|_| gone.next(SECOND).unwrap()).collect();
    for want in 1..=2 {
        stays.next(SECOND).unwrap().release().unwrap();
        assert_eq!(stays.stats().received, want);
    }
    drop(gone);
    for lease in &orphans {
        assert!(
            lease_matches(lease),
            "seq {}: readable after its subscriber",
            lease.seq()
        );
    }
    assert!(eventually(AT_ONCE, || publisher.subscriber_count() == 1));
    let started = Instant::now();
    for _ in 0..2 {
        publisher.publish_pattern(); // into the slots the orphans hold
    }
    let took = started.elapsed();
    assert!(took < AT_ONCE, "waited {took:?} for a gone subscriber");
    for want in 3..=4 {
        let lease = stays.next(SECOND).unwrap();
        assert_eq!(lease.seq(), want);
        assert!(lease_matches(&lease));
    }
    for lease in orphans {
        assert!(!lease.is_intact(), "seq {}: its slot was reused", lease.seq());
        assert_eq!(lease.release().unwrap_err().kind(), ErrorKind::Overwritten);
    }
    let stats = publisher.stats();
    assert_eq!((stats.ack_timeouts, stats.published), (0, 4), "{stats:?}");
}

/// kill -9 of a subscriber process holding every slot of a strict-wait
/// ring: its slots are freed with its socket, not after the ACK timeout,
/// and the subscriber beside it loses nothing.
fn a_killed_subscriber_holding_every_slot_holds_up_no_one(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("subkill");
    let mut publisher = backend.publisher(strict(&key, dir.path(), 2, Duration::from_secs(10)));
    let mut victim = SubscriberProcess::start(backend, &key, dir.path(), "victim");
    let mut honest = backend.subscribe(&key, dir.path(), "honest");
    publisher.publish_pattern();
    publisher.publish_pattern();
    assert_eq!(victim.take(Duration::from_secs(5)), 1);
    assert_eq!(victim.take(Duration::from_secs(5)), 2);
    for want in 1..=2 {
        let lease = honest.next(SECOND).unwrap();
        assert_eq!(lease.seq(), want);
        assert!(lease_matches(&lease));
    }
    victim.kill();
    let started = Instant::now();
    for _ in 0..2 {
        publisher.publish_pattern(); // into the slots the victim held
    }
    let took = started.elapsed();
    assert!(took < AT_ONCE, "waited {took:?} for a dead subscriber");
    for want in 3..=4 {
        let lease = honest.next(SECOND).unwrap();
        assert_eq!(lease.seq(), want);
        assert!(lease_matches(&lease));
    }
    assert_eq!(honest.stats().dropped, 0);
    let stats = publisher.stats();
    assert_eq!(stats.ack_timeouts, 0, "{stats:?}");
    assert_eq!(publisher.subscriber_count(), 1, "the dead one's bit is free");
}

every_backend!(
    late_join_starts_after_initial_seq,
    destroy_sends_shutdown_and_removes_resources,
    frames_in_the_ring_at_shutdown_are_delivered_then_disconnected,
    a_killed_publisher_is_reported_at_once_and_held_frames_stay_readable,
    a_subscriber_dropped_while_holding_frames_holds_up_no_one,
    a_killed_subscriber_holding_every_slot_holds_up_no_one,
);
