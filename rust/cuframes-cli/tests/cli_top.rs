//! `cuframes top` against live publishers: read from shared memory, without
//! connecting.

mod common;

use std::time::Duration;

use common::{SOCKET_LIMIT, TestEnv, uint, wait_until};
use cuframes::{Subscriber, SubscriberConfig};
use serde_json::Value;

/// `top --once --json --interval MSms`: the row of `key`, if listed.
fn top_row(env: &TestEnv, key: &str, interval_ms: u64) -> Option<Value> {
    let out = env.run(&[
        "top",
        "--once",
        "--json",
        "--interval",
        &format!("{interval_ms}ms"),
    ]);
    out.assert_success();
    let rows = out.json();
    let rows = rows
        .as_array()
        .unwrap_or_else(|| panic!("top --json is not an array: {out}"));
    rows.iter().find(|r| r["key"] == key).cloned()
}

#[test]
fn shows_a_publisher_its_rate_and_its_subscriber() {
    let env = TestEnv::new();
    let key = env.key("top-live");
    let publisher = env.start_publisher(
        &key,
        "--size 160x120 --fps 200 --frames 0 --ring 3 --policy strict-wait --wait-subscribers 1",
    );
    let subscriber = env.subscribe(&key, "--verify --frames 0 --name top-viewer");
    wait_until(SOCKET_LIMIT, "the subscriber to receive frames", || {
        top_row(&env, &key, 20).is_some_and(|r| r["subscribers"] == 1 && r["global_seq"].as_u64() >= Some(5))
    });
    let row = top_row(&env, &key, 500).expect("listed");
    assert_eq!(uint(&row, "pid"), publisher.pid() as u64, "{row}");
    assert_eq!(row["format"], "nv12", "{row}");
    assert_eq!(uint(&row, "width"), 160, "{row}");
    assert_eq!(row["memory"], "host", "{row}");
    assert_eq!(row["policy"], "strict_wait", "FFmpeg's spelling: {row}");
    assert_eq!(uint(&row, "ring_size"), 3, "{row}");
    let fps = row["fps"].as_f64().unwrap_or_else(|| panic!("fps: {row}"));
    assert!((20.0..=600.0).contains(&fps), "published at 200 fps: {row}");
    assert_eq!(uint(&row, "subscribers"), 1, "{row}");
    let sub = &row["subscriber_slots"][0];
    assert_eq!(sub["name"], "top-viewer", "{row}");
    assert_eq!(uint(sub, "pid"), subscriber.pid() as u64, "{row}");
    assert_eq!(sub["state"], "active", "{row}");
    assert!(
        uint(sub, "lag") <= 3,
        "a verifying subscriber keeps up at 200 fps: {row}"
    );
    assert_eq!(uint(sub, "dropped"), 0, "{row}");
    let ack_fps = sub["ack_fps"]
        .as_f64()
        .unwrap_or_else(|| panic!("ack_fps: {row}"));
    assert!(ack_fps > 25.0, "{row}");

    // The text view names the key and its subscriber.
    let out = env.run(&["top", "--once", "--interval", "50ms"]);
    out.assert_success();
    assert!(
        out.stdout.contains(&key) && out.stdout.contains("top-viewer"),
        "{out}"
    );
    assert!(out.stdout.contains("FPS"), "{out}");
}

#[test]
fn shows_what_a_lagging_subscriber_lost() {
    let env = TestEnv::new();
    let key = env.key("top-drops");
    let _publisher = env.start_publisher(
        &key,
        "--size 64x48 --fps 500 --frames 0 --ring 2 --policy drop-oldest",
    );
    let mut config = SubscriberConfig::new(key.clone());
    config.runtime_dir = Some(env.dir().to_owned());
    config.name = "sleepy".into();
    // No reading thread (the default, D39) to keep up for it.
    config.read_ahead = 0;
    let mut sub = Subscriber::connect(config).expect("subscribe");
    // Fall a ring behind, then take one frame: what was lapped counts as dropped.
    std::thread::sleep(Duration::from_millis(100));
    let lease = sub.next(Some(Duration::from_secs(5))).expect("a frame");
    drop(lease);
    let lost = sub.stats().dropped;
    assert!(lost > 10, "lapped at 500 fps: {lost}");
    let row = top_row(&env, &key, 50).expect("listed");
    let slot = row["subscriber_slots"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "sleepy"))
        .unwrap_or_else(|| panic!("subscriber listed: {row}"))
        .clone();
    assert!(uint(&slot, "dropped") >= lost, "top shows the drops: {row}");
    assert!(uint(&slot, "lag") > 2, "still behind: {row}");
}

#[test]
fn bad_arguments_name_the_option() {
    let env = TestEnv::new();
    env.run(&["top", "--json"]).assert_error(&["--once"]);
    env.run(&["top", "--once", "--interval", "0ms"])
        .assert_error(&["--interval 0s", "10ms"]);
    env.run(&["top", "--once", "--interval", "2h"])
        .assert_usage_error(&["--interval", "not a duration"]);
    env.run(&["top", "--once", "--interval", "01:00:01"])
        .assert_error(&["--interval 3601s"]);
}
