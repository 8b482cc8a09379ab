//! `cuframes publish` → `cuframes subscribe --verify`, as real processes.

mod common;

use common::{EXIT_LIMIT, TestEnv, assert_all_verified, uint};
use cuframes::PixelFormat;

/// One strict-wait subscriber receives and verifies every frame, in order.
#[test]
fn one_subscriber_gets_every_frame() {
    let env = TestEnv::new();
    let key = env.key("rt-one");
    let publisher = env.start_publisher(
        &key,
        "--size 160x120 --fps 0 --frames 3000 --policy strict-wait --wait-subscribers 1",
    );
    let subscriber = env.subscribe(&key, "--verify --frames 3000 --name rt-one");
    let sub = subscriber.wait(EXIT_LIMIT);
    let summary = sub.assert_success().json();
    assert_all_verified(&summary, 1, 3000);
    assert_eq!(summary["format"], "nv12");
    assert_eq!(uint(&summary, "width"), 160);
    assert_eq!(uint(&summary, "height"), 120);
    assert_eq!(summary["memory"], "host");
    let publisher = publisher.wait(EXIT_LIMIT);
    publisher.assert_success();
    assert!(
        publisher.stderr.contains("published 3000 frames"),
        "publisher summary: {publisher}"
    );
    assert!(!env.socket(&key).exists(), "socket left behind");
    assert!(!common::shm_path(&key).exists(), "shared memory left behind");
}

/// Three subscribers at once each get all 2000 frames.
#[test]
fn three_subscribers_get_every_frame() {
    let env = TestEnv::new();
    let key = env.key("rt-three");
    let publisher = env.start_publisher(
        &key,
        "--size 160x120 --fps 0 --frames 2000 --policy strict-wait --wait-subscribers 3",
    );
    let subscribers: Vec<_> = (0..3)
        .map(|i| env.subscribe(&key, &format!("--verify --frames 2000 --name rt-three-{i}")))
        .collect();
    for subscriber in subscribers {
        let summary = subscriber.wait(EXIT_LIMIT).assert_success().json();
        assert_all_verified(&summary, 1, 2000);
    }
    publisher.wait(EXIT_LIMIT).assert_success();
}

/// Every pixel format, at an odd size (chroma rounding, pitch padding).
#[test]
fn every_format_at_an_odd_size() {
    let env = TestEnv::new();
    for format in PixelFormat::ALL.map(PixelFormat::name) {
        let key = env.key(&format!("rt-fmt-{format}"));
        let publisher = env.start_publisher(
            &key,
            &format!("--size 33x17 --format {format} --fps 0 --frames 200 --policy strict-wait --ring 3 --wait-subscribers 1"),
        );
        let subscriber = env.subscribe(&key, "--verify --frames 200");
        let summary = subscriber.wait(EXIT_LIMIT).assert_success().json();
        assert_all_verified(&summary, 1, 200);
        assert_eq!(summary["format"], format, "{summary}");
        assert_eq!(uint(&summary, "width"), 33, "{summary}");
        assert_eq!(uint(&summary, "height"), 17, "{summary}");
        publisher.wait(EXIT_LIMIT).assert_success();
    }
}

/// Drop-oldest with a `--mode latest` subscriber: frames may be skipped, but
/// every frame delivered matches the pattern, every seq is accounted for
/// (received or dropped), and the last frame is delivered.
#[test]
fn drop_oldest_latest_mode_never_mismatches() {
    let env = TestEnv::new();
    let key = env.key("rt-latest");
    let total = 2000;
    let publisher = env.start_publisher(
        &key,
        "--size 160x120 --fps 0 --frames 2000 --policy drop-oldest --ring 2 --wait-subscribers 1",
    );
    // The slots themselves, read in place while the publisher may overwrite
    // them (the defaults, like the input device's, copy under drop_oldest).
    let subscriber = env.subscribe(
        &key,
        "--verify --frames 0 --mode latest --copy never --read-ahead 0",
    );
    let summary = subscriber.wait(EXIT_LIMIT).assert_success().json();
    publisher.wait(EXIT_LIMIT).assert_success();
    let frames = uint(&summary, "frames");
    let verified = uint(&summary, "verified");
    let overwritten = uint(&summary, "overwritten");
    let dropped = uint(&summary, "dropped");
    assert_eq!(uint(&summary, "mismatched"), 0, "{summary}");
    assert!(frames >= 1 && verified >= 1, "{summary}");
    assert!(
        verified <= frames && verified + overwritten >= frames,
        "{summary}"
    );
    // `dropped` = skipped seqs + overwritten leases; skipped + received = every seq.
    assert_eq!(frames + (dropped - overwritten), total, "{summary}");
    assert_eq!(
        uint(&summary, "last_seq"),
        total,
        "the newest frame must arrive: {summary}"
    );
    assert!(summary["error"].is_null(), "{summary}");
}

/// `subscribe --frames 0` ends with exit 0 when the publisher finishes its
/// `--frames` run and sends SHUTDOWN.
#[test]
fn unbounded_subscriber_ends_on_shutdown() {
    let env = TestEnv::new();
    let key = env.key("rt-shutdown");
    let publisher = env.start_publisher(
        &key,
        "--size 160x120 --fps 0 --frames 100 --policy strict-wait --wait-subscribers 1",
    );
    let subscriber = env.subscribe(&key, "--verify --frames 0");
    let sub = subscriber.wait(EXIT_LIMIT);
    let summary = sub.assert_success().json();
    assert_all_verified(&summary, 1, 100);
    assert!(sub.stderr_lines().is_empty(), "no error expected: {sub}");
    publisher.wait(EXIT_LIMIT).assert_success();
}

/// Reads `count` frames of `key` with an in-process library subscriber;
/// returns (seq, pts_ns) of each after checking its pattern.
fn read_with_library(env: &TestEnv, key: &str, count: u64) -> Vec<(u64, i64)> {
    let mut config = cuframes::SubscriberConfig::new(key);
    config.runtime_dir = Some(env.dir().to_owned());
    // The slots themselves (not the defaults, D39).
    config.copy = cuframes::CopyMode::Never;
    config.read_ahead = 0;
    let mut sub = cuframes::Subscriber::connect(config).expect("library subscriber");
    let mut frames = Vec::new();
    for _ in 0..count {
        let lease = sub.next(Some(std::time::Duration::from_secs(5))).expect("frame");
        let layout = lease.layout().clone();
        for p in 0..layout.planes().len() {
            let bytes = lease.host_plane(p).expect("host plane");
            assert!(
                cuframes::pattern::check_plane(&layout, lease.seq() - 1, p, bytes),
                "seq {} plane {p} mismatches the pattern",
                lease.seq()
            );
        }
        assert!(lease.publish_mono_ns() > 0);
        frames.push((lease.seq(), lease.pts_ns()));
        lease.release().expect("release");
    }
    frames
}

/// docs/cli.md: frame i is seq i + 1 with pts_ns = i × 10⁹ / fps (i when
/// unthrottled), read here by the library rather than the CLI.
#[test]
fn pts_follow_the_documented_formula() {
    let env = TestEnv::new();
    for (tag, fps) in [
        ("rt-pts-3000", 3000.0),
        ("rt-pts-2997", 2997.0),
        ("rt-pts-0", 0.0),
    ] {
        let key = env.key(tag);
        let publisher = env.start_publisher(
            &key,
            &format!("--size 64x48 --fps {fps} --frames 100 --policy strict-wait --wait-subscribers 1"),
        );
        let frames = read_with_library(&env, &key, 100);
        for (i, &(seq, pts)) in frames.iter().enumerate() {
            assert_eq!(seq, i as u64 + 1, "fps {fps}");
            if fps == 0.0 {
                assert_eq!(pts, i as i64, "unthrottled frame {i}");
            } else {
                let exact = i as f64 * 1e9 / fps;
                assert!(
                    (pts as f64 - exact).abs() <= 1.0,
                    "fps {fps} frame {i}: pts {pts} ns, documented {exact:.1} ns"
                );
            }
        }
        publisher.wait(EXIT_LIMIT).assert_success();
    }
}

/// `subscribe --wait-timeout` does not count the time the subscriber spends
/// making its CUDA context while no publisher is there (a crowded GPU,
/// played by a warm-up stalled for 6 s; without a GPU the warm-up then finds
/// no driver and ends): a publisher that comes 2 s later, past the 1 s wait,
/// is still found. With the warm-up off, the same wait fails at 1 s.
#[test]
fn wait_for_a_publisher_does_not_count_the_cuda_warm_up() {
    use std::time::{Duration, Instant};
    let env = TestEnv::new();
    let key = env.key("rt-warm");
    let subscribe = |vars: &[(&str, &str)]| {
        let mut cmd = env.command(&[
            "subscribe",
            &key,
            "--json",
            "--verify",
            "--frames",
            "30",
            "--wait-timeout",
            "1s",
        ]);
        cmd.envs(vars.iter().copied());
        common::Proc::spawn(&format!("subscribe {key}"), cmd)
    };

    let started = Instant::now();
    let off = subscribe(&[
        ("CUFRAMES_TEST_STALL_AT", "cuda-warm-up:6000"),
        ("CUFRAMES_CUDA_WARMUP", "0"),
    ])
    .wait(EXIT_LIMIT);
    off.assert_error(&["no publisher"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "failed after {:?}: {off}",
        started.elapsed()
    );

    let mut waiting = subscribe(&[("CUFRAMES_TEST_STALL_AT", "cuda-warm-up:6000")]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        waiting.is_running(),
        "gave up while making its context: {}",
        waiting.wait(EXIT_LIMIT)
    );
    let publisher = env.start_publisher(
        &key,
        "--size 64x48 --fps 0 --frames 30 --policy strict-wait --wait-subscribers 1",
    );
    let summary = waiting.wait(EXIT_LIMIT).assert_success().json();
    assert_all_verified(&summary, 1, 30);
    publisher.wait(EXIT_LIMIT).assert_success();
}
