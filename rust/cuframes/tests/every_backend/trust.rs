//! Attacks on what a subscriber reads of frame memory (docs/security.md):
//! a peer of this user forging seqs, `global_seq` or ACKs in the shared
//! header as protocol v1 lets it, or lying in its own ACK area, beside an
//! honest subscriber that must keep reading every frame right. The same
//! attacks from another user: `trust.rs`, `needs_root`.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cuframes::Policy;

use crate::common::backend::{Backend, every_backend};
use crate::common::forgery::*;
use crate::common::*;

/// [`beside`] with an attacker thread of this user.
fn beside_an_attacker(
    backend: Backend,
    forgery: Forgery,
    policy: Policy,
    hold: Duration,
    frames: u64,
) -> Seen {
    let cfg = move |key: &str, dir: &Path| match policy {
        Policy::StrictWait => strict(key, dir, 4, Duration::from_secs(10)),
        Policy::DropOldest => config(key, dir),
    };
    eprint!("{forgery:?} ");
    beside(backend, Attacker::Thread(forgery), cfg, hold, frames)
}

/// Relabelled stale slots never reach an honest subscriber as new frames.
fn a_relabelled_slot_is_never_delivered_as_a_new_frame(backend: Backend) {
    let seen = beside_an_attacker(backend, Forgery::Relabel, Policy::DropOldest, Duration::ZERO, 400);
    assert_eq!(seen.mismatched, 0, "{seen:?}");
    assert_eq!(
        seen.received + seen.dropped,
        seen.published,
        "every frame accounted for: {seen:?}"
    );
}

/// Seqs forged far ahead neither send an honest subscriber past the frames
/// to come nor inflate its loss count.
fn seqs_forged_far_ahead_neither_strand_nor_inflate(backend: Backend) {
    let seen = beside_an_attacker(
        backend,
        Forgery::FarAhead,
        Policy::StrictWait,
        Duration::ZERO,
        300,
    );
    assert_eq!(seen.mismatched, 0, "{seen:?}");
    assert_eq!(seen.received, seen.published, "every frame delivered: {seen:?}");
    assert_eq!(seen.dropped, 0, "{seen:?}");
}

/// Forged ACKs do not make a strict-wait publisher overwrite the frames an
/// honest, slower subscriber has not released.
fn forged_acks_cost_an_honest_subscriber_nothing(backend: Backend) {
    let seen = beside_an_attacker(
        backend,
        Forgery::Acks,
        Policy::StrictWait,
        Duration::from_micros(800),
        300,
    );
    assert_eq!(seen.mismatched, 0, "{seen:?}");
    assert_eq!((seen.dropped, seen.overwritten), (0, 0), "{seen:?}");
    assert_eq!(seen.received, seen.published, "{seen:?}");
}

/// A subscriber that lies in its own ACK area — every slot released, every
/// frame taken, all the while, while it reads nothing — costs an honest,
/// slower subscriber beside it nothing: its releases count for itself alone.
fn a_liar_in_its_own_ack_area_hurts_only_itself(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("liar");
    let mut publisher = backend.publisher(strict(&key, dir.path(), 4, Duration::from_secs(10)));
    let mut honest = backend.subscribe(&key, dir.path(), "honest");
    let liar = backend.subscribe(&key, dir.path(), "liar"); // connection 2
    // The liar's area, through its mapping in this process.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps
        .lines()
        .find(|l| l.contains(&format!("/memfd:cuframes-{key}-acks-2")) && l.contains("rw-s"))
        .expect("the liar's ACK area is mapped here");
    let area = u64::from_str_radix(line.split('-').next().unwrap(), 16).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let lying = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mem = std::fs::OpenOptions::new()
                .write(true)
                .open("/proc/self/mem")
                .unwrap();
            while !stop.load(Ordering::Relaxed) {
                for slot in 0..16u64 {
                    mem.write_all_at(&u64::MAX.to_le_bytes(), area + 8 * slot)
                        .unwrap();
                }
                mem.write_all_at(&u64::MAX.to_le_bytes(), area + 0x80).unwrap(); // taken
                mem.write_all_at(&(1u64 << 62).to_le_bytes(), area + 0xA0)
                    .unwrap(); // dropped
                std::thread::sleep(Duration::from_micros(50));
            }
        })
    };
    let publishing = std::thread::spawn(move || {
        for _ in 0..200 {
            publisher.publish_pattern();
        }
        publisher
    });
    let mut seen = Seen::default();
    while seen.received < 200 {
        let lease = honest
            .next(Some(Duration::from_secs(5)))
            .expect("frames keep coming");
        seen.received += 1;
        if !lease_matches(&lease) {
            seen.mismatched += 1;
        }
        std::thread::sleep(Duration::from_micros(500));
        let _ = lease.release();
    }
    let mut publisher = publishing.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    lying.join().unwrap();
    let stats = honest.stats();
    assert_eq!(
        (seen.mismatched, stats.dropped, stats.overwritten),
        (0, 0, 0),
        "{seen:?} {stats:?}"
    );
    assert_eq!(publisher.stats().ack_timeouts, 0);
    // Its forged loss count is shown bounded by what it could have missed.
    std::thread::sleep(Duration::from_millis(400));
    let ins = cuframes::inspect::inspect(&key, Some(dir.path())).unwrap();
    let shown = ins.subscribers().into_iter().find(|s| s.name == "liar").unwrap();
    assert!(
        shown.dropped <= 200,
        "the liar's count is clamped: {}",
        shown.dropped
    );
    drop(liar);
}

every_backend!(
    a_relabelled_slot_is_never_delivered_as_a_new_frame,
    seqs_forged_far_ahead_neither_strand_nor_inflate,
    forged_acks_cost_an_honest_subscriber_nothing,
    a_liar_in_its_own_ack_area_hurts_only_itself,
);
