//! Consumers that start slowly or hold frames (D22, D23, D25): under
//! STRICT_WAIT nobody is dropped for starting slowly, a consumer that keeps
//! more frames than the ring has never stalls the publisher when it lets
//! the library copy, and every frame arrives intact and in order.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use cuframes::{CopyMode, ErrorKind, FrameLease, Subscriber};

use crate::common::backend::{Backend, PublisherProcess, every_backend};
use crate::common::*;

/// A STRICT_WAIT publisher in a thread: `frames` pattern frames, then
/// waits until they are delivered; returns it for its stats.
fn publish_in_thread(
    mut publisher: PublisherProcess,
    frames: u64,
) -> std::thread::JoinHandle<PublisherProcess> {
    std::thread::spawn(move || {
        for _ in 0..frames {
            publisher.publish_pattern();
        }
        let _ = publisher.wait_delivered(Duration::from_secs(5));
        publisher
    })
}

fn subscribe_with(
    backend: Backend,
    key: &str,
    dir: &std::path::Path,
    name: &str,
    copy: CopyMode,
) -> Subscriber {
    let mut c = backend.subscriber_config(key, dir, name);
    c.copy = copy;
    backend.connect(c)
}

/// Reads `frames` frames, keeping the newest `hold` of them unreleased;
/// returns the seqs in order, how many did not match the pattern, and the
/// most slots (frames that are no copies) held at once.
fn read_holding(sub: &mut Subscriber, frames: u64, hold: usize) -> (Vec<u64>, usize, usize) {
    let mut held: VecDeque<FrameLease> = VecDeque::new();
    let (mut seqs, mut bad, mut most_slots) = (Vec::new(), 0, 0);
    while (seqs.len() as u64) < frames {
        let lease = sub
            .next(Some(Duration::from_secs(5)))
            .expect("frames keep coming");
        seqs.push(lease.seq());
        held.push_back(lease);
        most_slots = most_slots.max(held.iter().filter(|l| !l.is_copy()).count());
        while held.len() > hold {
            let old = held.pop_front().unwrap();
            if !lease_matches(&old) {
                bad += 1;
            }
            old.release().expect("nothing is overwritten");
        }
    }
    for lease in held {
        if !lease_matches(&lease) {
            bad += 1;
        }
        lease.release().expect("nothing is overwritten");
    }
    (seqs, bad, most_slots)
}

fn a_subscriber_slower_to_start_than_the_ack_timeout_is_not_dropped(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("slowstart");
    let mut cfg = strict(&key, dir.path(), 4, Duration::from_millis(100));
    cfg.startup_timeout = Duration::from_secs(5);
    let publisher = backend.publisher(cfg);
    let mut sub = backend.subscribe(&key, dir.path(), "slow-starter");
    let started = Instant::now();
    let publishing = publish_in_thread(publisher, 30);
    // The consumer is still setting up: 4 ACK timeouts pass before it reads.
    std::thread::sleep(Duration::from_millis(400));
    let (seqs, bad, _) = read_holding(&mut sub, 30, 0);
    let mut publisher = publishing.join().unwrap();
    assert_eq!(seqs, (1..=30).collect::<Vec<_>>(), "no frame lost");
    assert_eq!(bad, 0);
    let stats = publisher.stats();
    assert_eq!(stats.ack_timeouts, 0, "nobody dropped");
    assert!(
        stats.ack_wait_ns >= 300_000_000,
        "the publisher waited for it ({} ns in {:?})",
        stats.ack_wait_ns,
        started.elapsed()
    );
}

fn past_its_startup_time_a_silent_subscriber_is_dropped(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("startupover");
    let mut cfg = strict(&key, dir.path(), 2, Duration::from_millis(50));
    cfg.startup_timeout = Duration::from_millis(400);
    let mut publisher = backend.publisher(cfg);
    let mut silent = backend.subscribe(&key, dir.path(), "silent");
    let started = Instant::now();
    for _ in 0..3 {
        publisher.publish_pattern(); // the third finds both slots owed
    }
    let waited = started.elapsed();
    assert_eq!(publisher.stats().ack_timeouts, 1);
    assert!(
        waited >= Duration::from_millis(350),
        "held for its start-up time, not the 50 ms ACK timeout: {waited:?}"
    );
    let err = loop {
        match silent.next(SECOND) {
            Ok(lease) => drop(lease),
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), ErrorKind::Disconnected);
    assert!(err.to_string().contains("while starting"), "{err}");
}

fn after_its_startup_time_the_ack_timeout_applies(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("steady");
    let mut cfg = strict(&key, dir.path(), 2, Duration::from_millis(100));
    cfg.startup_timeout = Duration::from_millis(600);
    let mut publisher = backend.publisher(cfg);
    let mut sub = backend.subscribe(&key, dir.path(), "steady");
    publisher.publish_pattern();
    sub.next(SECOND).unwrap().release().unwrap();
    std::thread::sleep(Duration::from_millis(650)); // start-up is over
    let _held = sub.next(Some(Duration::ZERO)).err(); // nothing new
    publisher.publish_pattern();
    let holding = sub.next(SECOND).unwrap(); // seq 2, held
    let started = Instant::now();
    publisher.publish_pattern(); // slot of seq 1: free
    publisher.publish_pattern(); // both owed: seq 2 held, seq 3 unread
    let waited = started.elapsed();
    assert_eq!(publisher.stats().ack_timeouts, 1);
    assert!(
        waited >= Duration::from_millis(90) && waited < Duration::from_millis(500),
        "the 100 ms ACK timeout, not the 600 ms start-up time: {waited:?}"
    );
    drop(holding);
}

fn auto_copy_lets_a_consumer_hold_more_frames_than_the_ring(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("holdmany");
    let publisher = backend.publisher(strict(&key, dir.path(), 4, Duration::from_millis(300)));
    let mut sub = subscribe_with(backend, &key, dir.path(), "encoder", CopyMode::Auto);
    let publishing = publish_in_thread(publisher, 60);
    let (seqs, bad, most_slots) = read_holding(&mut sub, 60, 10);
    let mut publisher = publishing.join().unwrap();
    assert_eq!(seqs, (1..=60).collect::<Vec<_>>());
    assert_eq!(bad, 0, "every frame intact");
    assert_eq!(
        publisher.stats().ack_timeouts,
        0,
        "the publisher never stalled into a drop"
    );
    let stats = sub.stats();
    assert_eq!(stats.dropped, 0);
    assert_eq!(most_slots, 2, "at most half the ring held, the rest copies");
    assert!(stats.copied >= 60 - 60 / 10 * 3, "{stats:?}");
    assert!(
        stats.copied < 60,
        "while a slot can be spared, frames are the slots: {stats:?}"
    );
}

fn two_consumers_holding_different_depths_share_the_ring_without_a_stall(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("twoholders");
    let publisher = backend.publisher(strict(&key, dir.path(), 4, Duration::from_millis(300)));
    let mut deep = subscribe_with(backend, &key, dir.path(), "deep", CopyMode::Auto);
    let mut shallow = subscribe_with(backend, &key, dir.path(), "shallow", CopyMode::Auto);
    let publishing = publish_in_thread(publisher, 80);
    let other = std::thread::spawn(move || read_holding(&mut shallow, 80, 1));
    let (seqs, bad, _) = read_holding(&mut deep, 80, 12);
    let (seqs2, bad2, _) = other.join().unwrap();
    let mut publisher = publishing.join().unwrap();
    assert_eq!(seqs, (1..=80).collect::<Vec<_>>());
    assert_eq!(seqs2, seqs);
    assert_eq!(bad + bad2, 0);
    assert_eq!(publisher.stats().ack_timeouts, 0);
}

fn never_copy_holding_every_slot_is_dropped_after_the_timeout(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("holdall");
    let publisher = backend.publisher(strict(&key, dir.path(), 2, Duration::from_millis(100)));
    let mut sub = subscribe_with(backend, &key, dir.path(), "hoarder", CopyMode::Never);
    let publishing = publish_in_thread(publisher, 5);
    let mut held = Vec::new();
    let err = loop {
        match sub.next(SECOND) {
            Ok(lease) => held.push(lease),
            Err(e) => break e,
        }
    };
    let mut publisher = publishing.join().unwrap();
    assert_eq!(err.kind(), ErrorKind::Disconnected, "{err}");
    assert_eq!(held.len(), 2, "both slots, then nothing");
    assert_eq!(publisher.stats().ack_timeouts, 1);
}

fn copy_always_releases_every_slot_at_once(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("copyall");
    let mut publisher = backend.publisher(strict(&key, dir.path(), 2, Duration::from_millis(100)));
    let mut sub = subscribe_with(backend, &key, dir.path(), "copier", CopyMode::Always);
    let mut held = Vec::new();
    for _ in 0..6 {
        publisher.publish_pattern(); // never waits: every slot is free
        let lease = sub.next(SECOND).unwrap();
        assert!(lease.is_copy() && lease.is_intact());
        backend.check_lease(&lease); // a copy in the backend's memory
        held.push(lease);
    }
    assert_eq!(publisher.stats().ack_waits, 0);
    for lease in held {
        assert!(lease_matches(&lease), "seq {}", lease.seq());
        lease.release().unwrap();
    }
    assert_eq!(sub.stats().copied, 6);
}

fn under_drop_oldest_auto_copies_are_never_torn(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("dropcopy");
    let mut cfg = config(&key, dir.path());
    cfg.ring_size = 2;
    let mut publisher = backend.publisher(cfg);
    let mut sub = subscribe_with(backend, &key, dir.path(), "keeper", CopyMode::Auto);
    publisher.publish_pattern();
    let first = sub.next(SECOND).unwrap();
    assert!(first.is_copy());
    for _ in 0..5 {
        publisher.publish_pattern(); // laps the ring twice
    }
    assert!(
        first.is_intact() && lease_matches(&first),
        "a copy cannot be overwritten"
    );
    first.release().unwrap();
    let stats = sub.stats();
    assert_eq!(stats.overwritten, 0);
}

/// D26: the read-ahead thread keeps a consumer that is still
/// starting from losing frames under drop-oldest.
fn read_ahead_keeps_a_slow_starter_from_losing_frames_under_drop_oldest(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("readahead");
    let mut cfg = config(&key, dir.path());
    cfg.ring_size = 4;
    let mut publisher = backend.publisher(cfg);
    let mut c = backend.subscriber_config(&key, dir.path(), "late");
    c.copy = CopyMode::Auto;
    c.read_ahead = 32;
    let mut sub = backend.connect(c);
    for _ in 0..20 {
        publisher.publish_pattern(); // 5 times the ring, nobody reading yet
        std::thread::sleep(Duration::from_millis(20));
    }
    let (seqs, bad, most_slots) = read_holding(&mut sub, 20, 0);
    assert_eq!(seqs, (1..=20).collect::<Vec<_>>(), "nothing lapped");
    assert_eq!(bad, 0);
    assert_eq!(most_slots, 0, "drop-oldest: every frame a copy");
    let stats = sub.stats();
    assert_eq!((stats.dropped, stats.overwritten, stats.copied), (0, 0, 20));
}

/// A full read-ahead queue stops taking frames: what the ring laps
/// meanwhile is counted, never silently lost.
fn frames_lapped_past_a_full_read_ahead_queue_are_counted(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("readaheadfull");
    let mut cfg = config(&key, dir.path());
    cfg.ring_size = 2;
    let mut publisher = backend.publisher(cfg);
    let mut c = backend.subscriber_config(&key, dir.path(), "full");
    c.copy = CopyMode::Auto;
    c.read_ahead = 3;
    let mut sub = backend.connect(c);
    for _ in 0..12 {
        publisher.publish_pattern();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(eventually(Duration::from_secs(2), || sub.queued() == 3));
    let (mut seqs, mut lost) = (Vec::new(), 0);
    while let Ok(frame) = sub.next(Some(Duration::from_millis(300))) {
        assert!(lease_matches(&frame));
        if let Some(&previous) = seqs.last() {
            assert_eq!(
                frame.lost_before(),
                frame.seq() - previous - 1,
                "the gap, per frame"
            );
        }
        lost += frame.lost_before();
        seqs.push(frame.seq());
    }
    assert!(seqs.starts_with(&[1, 2, 3]), "{seqs:?}");
    assert_eq!(
        *seqs.last().unwrap(),
        12,
        "the newest frames still arrive: {seqs:?}"
    );
    let stats = sub.stats();
    assert_eq!(stats.received, seqs.len() as u64);
    assert_eq!(stats.received + stats.dropped, 12, "{stats:?}");
    assert_eq!(lost, stats.dropped, "every loss is on some frame's lost_before");
}

every_backend!(
    a_subscriber_slower_to_start_than_the_ack_timeout_is_not_dropped,
    past_its_startup_time_a_silent_subscriber_is_dropped,
    after_its_startup_time_the_ack_timeout_applies,
    auto_copy_lets_a_consumer_hold_more_frames_than_the_ring,
    two_consumers_holding_different_depths_share_the_ring_without_a_stall,
    never_copy_holding_every_slot_is_dropped_after_the_timeout,
    copy_always_releases_every_slot_at_once,
    under_drop_oldest_auto_copies_are_never_torn,
    read_ahead_keeps_a_slow_starter_from_losing_frames_under_drop_oldest,
    frames_lapped_past_a_full_read_ahead_queue_are_counted,
);
