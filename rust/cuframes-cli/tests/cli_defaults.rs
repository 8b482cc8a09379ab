//! The CLI's defaults are the FFmpeg components' (`-h muxer=cuframes`,
//! `-h demuxer=cuframes`): a ring of 16, copy=auto, read-ahead under
//! drop_oldest, FFmpeg's spelling of policies, and the muxer's end of stream
//! (wait until subscribers took the last frame, at most max(ACK timeout, 1 s)).

mod common;

use std::time::{Duration, Instant};

use common::{EXIT_LIMIT, TestEnv, assert_all_verified, uint};

/// Without options: ring 16, drop_oldest, and a subscriber whose frames are
/// private copies (copy=auto copies every frame under drop_oldest).
#[test]
fn publish_and_subscribe_default_like_the_muxer_and_the_input_device() {
    let env = TestEnv::new();
    let key = env.key("def-pub");
    let mut publisher = env.start_publisher(&key, "--size 64x48 --fps 200 --frames 60 --wait-subscribers 1");
    let info = env.run(&["inspect", &key, "--json"]).assert_success().json();
    assert_eq!(uint(&info, "ring_size"), 16, "the muxer's ring_size: {info}");
    assert_eq!(
        info["policy"], "drop_oldest",
        "the muxer's policy, FFmpeg's spelling: {info}"
    );
    let summary = env
        .subscribe(&key, "--verify --frames 0")
        .wait(EXIT_LIMIT)
        .assert_success()
        .json();
    assert_all_verified(&summary, 1, 60);
    assert_eq!(
        uint(&summary, "copied"),
        60,
        "copy=auto under drop_oldest copies: {summary}"
    );
    let out = publisher
        .wait_within(EXIT_LIMIT)
        .unwrap_or_else(|o| panic!("{o}"));
    out.assert_success();
    assert!(out.stderr.contains("ring 16, drop_oldest"), "{out}");
}

/// Under strict_wait copy=auto hands out the slots themselves while the
/// ring can spare them: a subscriber that holds nothing gets no copy.
#[test]
fn copy_auto_under_strict_wait_is_zero_copy() {
    let env = TestEnv::new();
    let key = env.key("def-strict");
    let publisher = env.start_publisher(
        &key,
        "--size 64x48 --fps 0 --frames 200 --policy strict_wait --wait-subscribers 1",
    );
    let summary = env
        .subscribe(&key, "--verify --frames 0")
        .wait(EXIT_LIMIT)
        .assert_success()
        .json();
    assert_all_verified(&summary, 1, 200);
    assert_eq!(uint(&summary, "copied"), 0, "{summary}");
    publisher.wait(EXIT_LIMIT).assert_success();
}

/// The end of a stream waits for subscribers to *take* the last frame, not
/// to release it (a consumer may hold its last frames until it sees the
/// end, as ffmpeg does): with a subscriber that holds every frame and an
/// ACK timeout of 20 s, the publisher still ends at once, and the
/// subscriber has every frame.
#[test]
fn end_of_stream_waits_for_the_last_frame_to_be_taken() {
    let env = TestEnv::new();
    let key = env.key("def-end");
    let mut publisher = env.start_publisher(
        &key,
        "--size 64x48 --fps 0 --frames 6 --policy strict_wait --ack-timeout 20s --wait-subscribers 1",
    );
    let subscriber = env.subscribe(&key, "--verify --frames 0 --hold 100");
    let started = Instant::now();
    let out = publisher
        .wait_within(Duration::from_secs(10))
        .unwrap_or_else(|o| panic!("the publisher waited for releases: {o}"));
    out.assert_success();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "{took:?}");
    let summary = subscriber.wait(EXIT_LIMIT).assert_success().json();
    assert_all_verified(&summary, 1, 6);
}

/// A subscriber that takes nothing (it waits before reading) holds up the
/// end of the stream for max(ACK timeout, 1 s) at most: 1 s with a shorter
/// ACK timeout.
#[test]
fn end_of_stream_waits_at_least_one_second() {
    let env = TestEnv::new();
    let key = env.key("def-least");
    let mut publisher = env.start_publisher(
        &key,
        "--size 64x48 --fps 0 --frames 1 --ack-timeout 100ms --wait-subscribers 1",
    );
    let subscriber = env.subscribe(&key, "--frames 0 --start-delay 30s --read-ahead 0 --copy never");
    // Timed from the moment it is in: the publisher publishes its frame then.
    common::wait_until(EXIT_LIMIT, "the subscriber to join", || {
        let out = env.run(&["inspect", &key, "--json"]);
        out.code() != Some(0)
            || out.json()["subscriber_slots"]
                .as_array()
                .is_some_and(|s| !s.is_empty())
    });
    let started = Instant::now();
    let out = publisher
        .wait_within(EXIT_LIMIT)
        .unwrap_or_else(|o| panic!("{o}"));
    out.assert_success();
    let took = started.elapsed();
    // About 1 s: not the 2 s the CLI waited in 0.2.
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_millis(1800),
        "waited {took:?}, not about 1 s: {out}"
    );
    drop(subscriber);
}
