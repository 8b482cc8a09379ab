//! `cuframes ls`, `inspect` and `cleanup` against live and dead publishers.
//!
//! Never run a bare `cuframes cleanup` here: it considers every
//! /dev/shm/cuframes-* key, including those of tests running in parallel.

mod common;

use std::time::Duration;

use common::{EXIT_LIMIT, SOCKET_LIMIT, TestEnv, shm_path, uint, wait_until};
use nix::sys::signal::Signal;
use serde_json::Value;

/// The `ls --json` row of `key`, if listed.
fn ls_row(env: &TestEnv, key: &str) -> Option<Value> {
    let out = env.run(&["ls", "--json"]);
    let rows = out.assert_success().json();
    let rows = rows
        .as_array()
        .unwrap_or_else(|| panic!("ls --json is not an array: {out}"));
    rows.iter().find(|r| r["key"] == key).cloned()
}

/// `inspect KEY --json`.
fn inspect(env: &TestEnv, key: &str) -> Value {
    env.run(&["inspect", key, "--json"]).assert_success().json()
}

#[test]
fn ls_and_inspect_show_a_live_publisher_and_its_subscriber() {
    let env = TestEnv::new();
    let key = env.key("st-live");
    let publisher = env.start_publisher(
        &key,
        "--size 160x120 --fps 200 --frames 0 --ring 3 --policy strict-wait --wait-subscribers 1",
    );
    let subscriber = env.subscribe(&key, "--verify --frames 0 --name status-viewer");
    wait_until(
        SOCKET_LIMIT,
        "the subscriber to be listed with frames flowing",
        || ls_row(&env, &key).is_some_and(|r| r["subscribers"] == 1 && r["global_seq"].as_u64() >= Some(5)),
    );

    let row = ls_row(&env, &key).expect("listed");
    assert_eq!(row["state"], "live", "{row}");
    assert_eq!(uint(&row, "subscribers"), 1, "{row}");
    assert!(uint(&row, "global_seq") >= 5, "{row}");
    assert_eq!(uint(&row, "producer_pid"), publisher.pid() as u64, "{row}");
    assert_eq!(row["format"], "nv12", "{row}");
    assert_eq!(uint(&row, "width"), 160, "{row}");
    assert_eq!(uint(&row, "height"), 120, "{row}");
    assert_eq!(uint(&row, "ring_size"), 3, "{row}");
    assert_eq!(row["policy"], "strict_wait", "FFmpeg's spelling: {row}");
    assert_eq!(row["memory"], "host", "{row}");
    assert_eq!(row["shutdown"], false, "{row}");
    assert_eq!(row["socket"], env.socket(&key).display().to_string(), "{row}");
    assert_eq!(row["shm"], shm_path(&key).display().to_string(), "{row}");
    assert_eq!(row["fps"].as_f64(), Some(200.0), "{row}");

    let ins = inspect(&env, &key);
    assert_eq!(ins["state"], "live", "{ins}");
    assert_eq!(ins["proto_version"], 1, "{ins}");
    let slots = ins["slots"].as_array().expect("slots");
    assert_eq!(slots.len(), 3, "one entry per ring slot: {ins}");
    for (i, slot) in slots.iter().enumerate() {
        assert_eq!(uint(slot, "slot"), i as u64, "{ins}");
    }
    let subs = ins["subscriber_slots"].as_array().expect("subscriber_slots");
    assert_eq!(subs.len(), 1, "{ins}");
    assert_eq!(subs[0]["name"], "status-viewer", "{ins}");
    assert_eq!(subs[0]["state"], "active", "{ins}");
    assert_eq!(uint(&subs[0], "pid"), subscriber.pid() as u64, "{ins}");
    assert!((1..=31).contains(&uint(&subs[0], "bit")), "{ins}");
    assert_eq!(
        ins["subscriber_bitmap"],
        format!("0x{:08x}", 1u32 << uint(&subs[0], "bit")),
        "{ins}"
    );

    // Text forms mention the key and the subscriber too.
    let text = env.run(&["ls"]);
    assert!(
        text.assert_success()
            .stdout
            .lines()
            .any(|l| l.starts_with(&key) && l.contains("live")),
        "{text}"
    );
    let text = env.run(&["inspect", &key]);
    assert!(text.assert_success().stdout.contains("status-viewer"), "{text}");

    publisher.signal(Signal::SIGTERM);
    publisher.wait(EXIT_LIMIT).assert_success();
    subscriber.wait(EXIT_LIMIT).assert_success();
    assert!(
        ls_row(&env, &key).is_none(),
        "a cleanly stopped key is not listed"
    );
    env.run(&["inspect", &key]).assert_error(&["no publisher", &key]);
}

#[test]
fn stale_key_is_listed_and_cleaned_up() {
    let env = TestEnv::new();
    let key = env.key("st-stale");
    let mut publisher = env.start_publisher(&key, "--size 160x120 --fps 100 --frames 0");
    let pid = publisher.pid() as u64;
    publisher.kill9();
    publisher.wait(EXIT_LIMIT);

    let row = ls_row(&env, &key).expect("a killed publisher's key is listed");
    assert_eq!(row["state"], "stale", "{row}");
    assert_eq!(uint(&row, "producer_pid"), pid, "{row}");
    let ins = inspect(&env, &key);
    assert_eq!(ins["state"], "stale", "{ins}");
    assert!(env.socket(&key).exists() && env.lock(&key).exists() && shm_path(&key).exists());

    let out = env.run(&["cleanup", &key]);
    out.assert_success();
    let removed: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("removed "))
        .collect();
    let expected = [
        env.socket(&key).display().to_string(),
        shm_path(&key).display().to_string(),
        env.lock(&key).display().to_string(),
    ];
    for path in &expected {
        assert!(
            removed.contains(&path.as_str()),
            "cleanup should report {path}: {out}"
        );
    }
    assert_eq!(removed.len(), 3, "{out}");
    assert!(!env.socket(&key).exists(), "socket survived cleanup");
    assert!(!shm_path(&key).exists(), "shared memory survived cleanup");
    assert!(!env.lock(&key).exists(), "lock survived cleanup");
    assert!(ls_row(&env, &key).is_none(), "cleaned key still listed");
    let again = env.run(&["cleanup", &key]);
    assert!(
        again.assert_success().stdout.contains("nothing to clean up"),
        "{again}"
    );

    // A live key is refused and left intact.
    let live = env.start_publisher(&key, "--size 160x120 --fps 100 --frames 0");
    let out = env.run(&["cleanup", &key]);
    out.assert_error(&["live", &key]);
    assert!(out.stdout.contains("left alone"), "{out}");
    assert!(!out.stdout.contains("removed"), "{out}");
    assert!(env.socket(&key).exists() && env.lock(&key).exists() && shm_path(&key).exists());
    let row = ls_row(&env, &key).expect("still listed");
    assert_eq!(row["state"], "live", "{row}");
    assert_eq!(uint(&row, "producer_pid"), live.pid() as u64, "{row}");
    live.signal(Signal::SIGTERM);
    live.wait(EXIT_LIMIT).assert_success();
    wait_until(Duration::from_secs(1), "resources removed on SIGTERM", || {
        !env.socket(&key).exists() && !shm_path(&key).exists()
    });
}

/// `cleanup KEY` run with another runtime directory must not destroy the
/// shared memory of a live publisher: /dev/shm is global, and the
/// publisher holds a lock on its shared header.
#[test]
fn cleanup_from_another_runtime_dir_spares_a_live_publisher() {
    let env = TestEnv::new();
    let other = TestEnv::new();
    let key = env.key("st-otherdir");
    let publisher = env.start_publisher(&key, "--size 160x120 --fps 100 --frames 0");
    let out = other.run(&["cleanup", &key]);
    assert!(
        shm_path(&key).exists(),
        "cleanup from another runtime dir removed a live publisher's shared memory: {out}"
    );
    let summary = env
        .subscribe(&key, "--verify --frames 5")
        .wait(EXIT_LIMIT)
        .assert_success()
        .json();
    assert_eq!(uint(&summary, "verified"), 5, "{summary}");
    publisher.signal(Signal::SIGTERM);
    publisher.wait(EXIT_LIMIT).assert_success();
}

/// A FIFO planted at a key's shared-header name: `inspect KEY` and `health
/// KEY` fail at once, saying what is at which path (they used to say only
/// that there was no publisher).
#[test]
fn inspect_and_health_name_what_is_planted_at_a_key() {
    let env = TestEnv::new();
    let key = env.key("st-fifo");
    let path = shm_path(&key);
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let inspected = env.run(&["inspect", &key]);
    let health = env.run(&["health", &key]);
    let _ = std::fs::remove_file(&path);
    let said = format!("{} is a FIFO, not a file cuframes made", path.display());
    inspected.assert_error(&[&said]);
    assert_eq!(health.code(), Some(1), "{health}");
    assert!(
        health.stdout.starts_with("unhealthy: ") && health.stdout.contains(&said),
        "{health}"
    );
}
