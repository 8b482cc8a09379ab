//! Ring policies (spec §5, D4): STRICT_WAIT back-pressure and ACK
//! timeout, DROP_OLDEST overwrite detection, subscriber modes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cuframes::{ErrorKind, Subscriber, SubscriberMode};

use crate::common::backend::{Backend, every_backend};
use crate::common::*;

fn strict_wait_blocks_until_the_slot_is_released(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("backpressure");
    let mut publisher = backend.publisher(strict(&key, dir.path(), 2, Duration::from_secs(10)));
    let mut sub = backend.subscribe(&key, dir.path(), "holder");
    let published = Arc::new(AtomicU64::new(0));
    let counter = published.clone();
    let worker = std::thread::spawn(move || {
        for _ in 0..3 {
            publisher.publish_pattern();
            counter.fetch_add(1, Ordering::SeqCst);
        }
        publisher
    });
    // Seq 1 and 2 fill the ring; seq 3 reuses seq 1's slot and must wait.
    let first = sub.next(SECOND).unwrap();
    assert_eq!(first.seq(), 1);
    backend.check_lease(&first);
    assert!(eventually(Duration::from_secs(1), || published
        .load(Ordering::SeqCst)
        == 2));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        published.load(Ordering::SeqCst),
        2,
        "publisher waits for the held frame"
    );
    assert!(
        lease_matches(&first),
        "a held frame is never overwritten under strict-wait"
    );
    let released = Instant::now();
    first.release().unwrap();
    assert!(eventually(Duration::from_secs(1), || published
        .load(Ordering::SeqCst)
        == 3));
    assert!(released.elapsed() < Duration::from_millis(500));
    let mut publisher = worker.join().unwrap();
    assert_eq!(publisher.stats().ack_timeouts, 0);
    for want in 2..=3 {
        let lease = sub.next(SECOND).unwrap();
        assert_eq!(lease.seq(), want);
        assert!(lease_matches(&lease));
    }
    assert_eq!(sub.stats().dropped, 0);
}

fn ack_timeout_drops_only_the_slow_subscriber(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("acktimeout");
    let mut publisher = backend.publisher(strict(&key, dir.path(), 2, Duration::from_millis(200)));
    let mut fast = backend.subscribe(&key, dir.path(), "fast");
    let mut slow = backend.subscribe(&key, dir.path(), "slow");
    let reader = std::thread::spawn(move || {
        let mut seqs = Vec::new();
        let mut bad = 0;
        while seqs.len() < 40 {
            let lease = fast
                .next(Some(Duration::from_secs(5)))
                .expect("fast subscriber keeps receiving");
            if !lease_matches(&lease) {
                bad += 1;
            }
            seqs.push(lease.seq());
            lease.release().expect("never overwritten under strict-wait");
        }
        (seqs, bad, fast)
    });
    let started = Instant::now();
    for _ in 0..40 {
        publisher.publish_pattern();
    }
    let elapsed = started.elapsed();
    let (seqs, bad, fast) = reader.join().unwrap();
    let stats = fast.stats();
    assert_eq!(seqs, (1..=40).collect::<Vec<_>>(), "fast subscriber lost nothing");
    assert_eq!(bad, 0);
    assert_eq!(stats.dropped, 0);
    assert_eq!(
        publisher.stats().ack_timeouts,
        1,
        "exactly the slow one was dropped"
    );
    assert_eq!(publisher.subscriber_count(), 1);
    assert!(
        elapsed < Duration::from_millis(1500),
        "one timeout's wait, not one per frame: {elapsed:?}"
    );
    let err = loop {
        match slow.next(SECOND) {
            Ok(_) => continue, // frames from before it was dropped
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), ErrorKind::Disconnected);
    assert!(err.to_string().contains("no ACK"), "{err}");
}

fn drop_oldest_reports_an_overwritten_lease(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("overwrite");
    let mut cfg = config(&key, dir.path());
    cfg.ring_size = 2;
    let mut publisher = backend.publisher(cfg);
    let mut sub = backend.subscribe(&key, dir.path(), "s");
    publisher.publish_pattern();
    let lease = sub.next(SECOND).unwrap();
    backend.check_lease(&lease);
    assert!(lease.is_intact() && lease_matches(&lease));
    for _ in 0..2 {
        // D22: seq 3 spares the held seq 1 and replaces the unread seq 2.
        publisher.publish_pattern();
    }
    assert!(
        lease.is_intact(),
        "a held frame is spared while an unread one can go"
    );
    let third = sub.next(SECOND).unwrap();
    assert_eq!(third.seq(), 3);
    assert_eq!(sub.stats().dropped, 1, "seq 2 was lost, and counted");
    publisher.publish_pattern(); // every slot held: the oldest goes
    assert!(!lease.is_intact());
    assert!(!lease_matches(&lease), "the bytes really changed under the lease");
    assert!(third.is_intact() && lease_matches(&third));
    let err = lease.release().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Overwritten);
    assert_eq!(sub.stats().overwritten, 1);
    third.release().unwrap();
}

fn a_lagging_sequential_subscriber_counts_lost_frames(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("lag");
    let mut publisher = backend.publisher(config(&key, dir.path())); // ring 4
    let mut sub = backend.subscribe(&key, dir.path(), "s");
    for _ in 0..10 {
        publisher.publish_pattern();
    }
    let seqs: Vec<u64> = (0..4)
        .map(|_| {
            let lease = sub.next(SECOND).unwrap();
            assert!(lease_matches(&lease), "seq {}", lease.seq());
            lease.seq()
        })
        .collect();
    assert_eq!(seqs, [7, 8, 9, 10], "the ring holds the last four");
    assert_eq!(sub.stats().dropped, 6);
    assert_eq!(sub.stats().received, 4);
}

fn latest_mode_skips_to_the_newest_frame(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("latest");
    let mut publisher = backend.publisher(config(&key, dir.path()));
    let mut cfg = backend.subscriber_config(&key, dir.path(), "latest");
    cfg.mode = SubscriberMode::Latest;
    let mut sub = backend.connect(cfg);
    for _ in 0..3 {
        publisher.publish_pattern();
    }
    let lease = sub.next(SECOND).unwrap();
    assert_eq!(lease.seq(), 3);
    assert!(lease_matches(&lease));
    assert_eq!(sub.stats().dropped, 2);
}

/// The defaults' read-ahead (32) does not turn LATEST into a queue of old
/// frames: it reads no frames ahead.
fn latest_mode_reads_no_frames_ahead(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("latestahead");
    let mut publisher = backend.publisher(config(&key, dir.path()));
    let mut cfg = backend.subscriber_config(&key, dir.path(), "latest");
    cfg.mode = SubscriberMode::Latest;
    cfg.copy = cuframes::CopyMode::Auto;
    cfg.read_ahead = 32;
    let mut sub = backend.connect(cfg);
    for _ in 0..3 {
        publisher.publish_pattern();
        std::thread::sleep(Duration::from_millis(50));
    }
    let lease = sub.next(SECOND).unwrap();
    assert_eq!(lease.seq(), 3, "the newest, not the first queued");
    assert!(lease_matches(&lease));
    assert_eq!((sub.stats().dropped, sub.queued()), (2, 0));
}

/// Under STRICT_WAIT a LATEST subscriber ACKs the frames it skips, so the
/// publisher runs at the pace of the subscriber's reads, never into the ACK
/// timeout.
fn latest_mode_never_stalls_strict_wait(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("lateststrict");
    let mut publisher = backend.publisher(strict(&key, dir.path(), 2, Duration::from_secs(10)));
    let mut cfg = backend.subscriber_config(&key, dir.path(), "latest");
    cfg.mode = SubscriberMode::Latest;
    let mut sub = backend.connect(cfg);
    let reader = std::thread::spawn(move || {
        let mut last = 0;
        while last < 100 {
            let lease = sub.next(Some(Duration::from_secs(5))).unwrap();
            assert!(lease.seq() > last, "newest first, never backwards");
            assert!(lease_matches(&lease));
            last = lease.seq();
            drop(lease);
            std::thread::sleep(Duration::from_millis(1));
        }
        sub.stats()
    });
    let started = Instant::now();
    for _ in 0..100 {
        publisher.publish_pattern();
    }
    let stats = reader.join().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(publisher.stats().ack_timeouts, 0);
    assert_eq!(stats.received + stats.dropped, 100, "every frame read or skipped");
}

fn flush_waits_for_outstanding_frames(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("flush");
    let mut publisher = backend.publisher(config(&key, dir.path()));
    let mut sub = backend.subscribe(&key, dir.path(), "s");
    publisher.publish_pattern();
    publisher.publish_pattern();
    let err = publisher.flush(Duration::from_millis(50)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(publisher.subscriber_count(), 1, "flush never drops anyone");
    for _ in 0..2 {
        sub.next(SECOND).unwrap().release().unwrap();
    }
    publisher.flush(Duration::from_secs(1)).unwrap();
}

fn next_times_out_and_waits_for_subscribers_time_out(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("timeouts");
    let mut publisher = backend.publisher(config(&key, dir.path()));
    let err = publisher
        .wait_for_subscribers(1, Duration::from_millis(30))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    let mut sub = backend.subscribe(&key, dir.path(), "s");
    publisher.wait_for_subscribers(1, Duration::from_secs(1)).unwrap();
    let start = Instant::now();
    let err = sub.next(Some(Duration::from_millis(80))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(75) && took < Duration::from_millis(600),
        "{took:?}"
    );
}

fn eventfd_wakes_a_blocked_subscriber(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("wake");
    let mut publisher = backend.publisher(config(&key, dir.path()));
    let mut sub = backend.subscribe(&key, dir.path(), "s");
    let waiter = std::thread::spawn(move || {
        let lease = sub.next(Some(Duration::from_secs(5))).unwrap();
        (lease.seq(), Instant::now())
    });
    std::thread::sleep(Duration::from_millis(100));
    let published = Instant::now();
    publisher.publish_pattern();
    let (seq, woke) = waiter.join().unwrap();
    assert_eq!(seq, 1);
    assert!(woke.duration_since(published) < Duration::from_millis(50));
}

fn many_frames_in_order_with_verification(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("many");
    let mut publisher = backend.publisher(strict(&key, dir.path(), 4, Duration::from_secs(5)));
    let subs: Vec<Subscriber> = (0..3)
        .map(|i| backend.subscribe(&key, dir.path(), &format!("r{i}")))
        .collect();
    let readers: Vec<_> = subs
        .into_iter()
        .map(|mut sub| {
            std::thread::spawn(move || {
                let mut good = 0;
                for want in 1..=2000u64 {
                    let lease = sub.next(Some(Duration::from_secs(5))).unwrap();
                    assert_eq!(lease.seq(), want);
                    good += lease_matches(&lease) as u64;
                }
                (good, sub.stats())
            })
        })
        .collect();
    for _ in 0..2000 {
        publisher.publish_pattern();
    }
    for r in readers {
        let (good, stats) = r.join().unwrap();
        assert_eq!(good, 2000);
        assert_eq!((stats.dropped, stats.overwritten), (0, 0));
    }
}

/// In-place publishing: the slot's planes are in the backend's memory
/// (device pointers for CUDA), and commit_slot needs acquire_slot first.
fn in_place_publish_needs_acquire_then_commit(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("inplace");
    let mut publisher = backend.publisher(config(&key, dir.path()));
    let mut sub = backend.subscribe(&key, dir.path(), "s");
    assert_eq!(
        publisher.commit_slot(0).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let (index, planes) = publisher.acquire_slot().unwrap();
    assert_eq!(index, 1, "seq 1 goes to slot 1 % ring");
    assert_eq!(planes, [backend.memory(); 2], "NV12: two planes");
    assert_eq!(
        publisher.acquire_slot().unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(publisher.commit_slot(42).unwrap(), 1);
    let lease = sub.next(SECOND).unwrap();
    assert_eq!((lease.seq(), lease.slot(), lease.pts_ns()), (1, 1, 42));
    backend.check_lease(&lease);
}

every_backend!(
    strict_wait_blocks_until_the_slot_is_released,
    ack_timeout_drops_only_the_slow_subscriber,
    drop_oldest_reports_an_overwritten_lease,
    a_lagging_sequential_subscriber_counts_lost_frames,
    latest_mode_skips_to_the_newest_frame,
    latest_mode_reads_no_frames_ahead,
    latest_mode_never_stalls_strict_wait,
    flush_waits_for_outstanding_frames,
    next_times_out_and_waits_for_subscribers_time_out,
    eventfd_wakes_a_blocked_subscriber,
    many_frames_in_order_with_verification,
    in_place_publish_needs_acquire_then_commit,
);
