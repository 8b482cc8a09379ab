//! Resource hygiene of keys: a hundred publishers created and destroyed in
//! a loop, each with a subscriber that read a frame, leave this process's
//! descriptors, mappings and threads where they began (both sides live in
//! this process). One test in its own binary: nothing else runs while it
//! counts.

mod common;

use std::time::Duration;

use common::*;
use cuframes::Publisher;

#[test]
fn a_hundred_keys_created_and_destroyed_leak_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let churn = |round: usize| {
        let key = unique_key(&format!("churn{round}"));
        let mut publisher = Publisher::create(config(&key, dir.path())).unwrap();
        let mut sub = subscribe(&key, dir.path(), "churn");
        publish_pattern(&mut publisher);
        let lease = sub.next(Some(Duration::from_secs(5))).expect("a frame");
        assert!(lease_matches(&lease));
        drop(lease);
        drop(sub);
        drop(publisher);
    };
    for round in 0..3 {
        churn(round); // warm-up: lazily created process state
    }
    let before = counts();
    for round in 0..100 {
        churn(round);
    }
    let settled = eventually(Duration::from_secs(10), || {
        let now = counts();
        now.fds <= before.fds && now.maps <= before.maps && now.threads <= before.threads
    });
    assert!(settled, "before {before:?}, after {:?}", counts());
}
