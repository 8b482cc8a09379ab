//! Failures of `cuframes publish` / `subscribe`: exit 1 and exactly one
//! `cuframes: error: ...` line on stderr that says what went wrong.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use common::{EXIT_LIMIT, Proc, TestEnv, assert_all_verified, shm_path};
use cuframes::protocol::{HelloResp, Message, TLV_HEADER_LEN, msg_type};
use cuframes::{
    ErrorKind, MemoryRequest, PixelFormat, Publisher, PublisherConfig, Subscriber, SubscriberConfig,
};

fn host_publisher(env: &TestEnv, key: &str) -> Publisher {
    let mut config = PublisherConfig::new(key, PixelFormat::Nv12, 64, 48);
    config.memory = MemoryRequest::Host;
    config.runtime_dir = Some(env.dir().to_owned());
    Publisher::create(config).expect("in-process publisher")
}

/// Asserts that nothing of `key` exists (a rejected command created nothing).
fn assert_nothing_created(env: &TestEnv, key: &str) {
    let entries: Vec<_> = std::fs::read_dir(env.dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(entries.is_empty(), "runtime dir not empty: {entries:?}");
    if !key.is_empty() && !key.contains('/') && key.len() <= 63 {
        assert!(!shm_path(key).exists(), "shared memory created for {key}");
    }
}

#[test]
fn bad_keys_are_rejected() {
    let env = TestEnv::new();
    let long = "k".repeat(64);
    for key in ["a/b", long.as_str(), "a.b", ""] {
        let out = env.run(&[
            "publish", key, "--memory", "host", "--size", "160x120", "--frames", "1",
        ]);
        out.assert_error(&["invalid key"]);
        assert_nothing_created(&env, key);
        let out = env.run(&["subscribe", key, "--frames", "1"]);
        out.assert_error(&["invalid key"]);
    }
    // 63 characters is the longest valid key: that one is merely unpublished.
    let longest = "k".repeat(63);
    env.run(&[
        "subscribe",
        longest.as_str(),
        "--frames",
        "1",
        "--wait-timeout",
        "0s",
    ])
    .assert_error(&["no publisher"]);
}

/// With `--wait-timeout 0s` a missing publisher fails at once, in one line.
#[test]
fn subscribe_without_publisher() {
    let env = TestEnv::new();
    let key = env.key("err-nopub");
    let started = Instant::now();
    let line = env
        .run(&["subscribe", &key, "--frames", "1", "--wait-timeout", "0s"])
        .assert_error(&["no publisher", &key]);
    assert!(!line.contains("cleanup"), "nothing stale to clean up: {line}");
    // --json does not turn a connect failure into JSON on stdout.
    let out = env.run(&[
        "subscribe",
        &key,
        "--frames",
        "1",
        "--json",
        "--wait-timeout",
        "0s",
    ]);
    out.assert_error(&["no publisher"]);
    assert!(out.stdout.trim().is_empty(), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "looked once each: {:?}",
        started.elapsed()
    );
}

/// A subscriber waits for its publisher by default (30 s: services start in
/// any order), and says so once after about a second, so that a mistyped
/// key does not look like a hang; a publisher that comes in the meantime is
/// read. A shorter wait that runs out says so, then fails in one more line.
#[test]
fn subscribe_waits_for_a_publisher_and_says_so() {
    let env = TestEnv::new();
    let key = env.key("err-wait");
    let waiting = env.subscribe(&key, "--verify --frames 10");
    std::thread::sleep(Duration::from_secs(3));
    let publisher = env.start_publisher(
        &key,
        "--size 64x48 --fps 0 --frames 10 --policy strict_wait --wait-subscribers 1",
    );
    let out = waiting.wait(EXIT_LIMIT);
    assert_all_verified(&out.assert_success().json(), 1, 10);
    let said = format!("cuframes: waiting up to 30 s for a publisher of '{key}' (--wait-timeout)");
    assert_eq!(
        out.stderr_lines().iter().filter(|l| **l == said).count(),
        1,
        "said once: {out}"
    );
    publisher.wait(EXIT_LIMIT).assert_success();

    let other = env.key("err-wait2");
    let started = Instant::now();
    let out = env.run(&["subscribe", &other, "--frames", "1", "--wait-timeout", "2500ms"]);
    let waited = started.elapsed();
    assert_eq!(out.code(), Some(1), "{out}");
    assert!(waited >= Duration::from_millis(2400), "waited {waited:?}: {out}");
    let lines = out.stderr_lines();
    assert_eq!(
        lines,
        [
            format!("cuframes: waiting up to 2.5 s for a publisher of '{other}' (--wait-timeout)").as_str(),
            lines[1],
        ],
        "{out}"
    );
    assert!(
        lines[1].starts_with("cuframes: error: no publisher for key"),
        "{out}"
    );
    // Nothing to say when there is nothing to wait for, or a publisher is there.
    let out = env.run(&["subscribe", &other, "--frames", "1", "--wait-timeout", "0s"]);
    assert!(!out.stderr.contains("waiting"), "{out}");
}

#[test]
fn subscribe_to_stale_socket_of_killed_publisher() {
    let env = TestEnv::new();
    let key = env.key("err-stale");
    let mut publisher = env.start_publisher(&key, "--size 160x120 --fps 100 --frames 0");
    publisher.kill9();
    publisher.wait(EXIT_LIMIT);
    assert!(env.socket(&key).exists(), "the killed publisher's socket stays");
    let line = env
        .run(&["subscribe", &key, "--frames", "1", "--wait-timeout", "0s"])
        .assert_error(&["no publisher", "stale"]);
    assert!(
        line.contains(&format!("cuframes cleanup {key}")),
        "should say how to clean up: {line}"
    );
}

#[test]
fn thirty_second_subscriber_is_refused() {
    let env = TestEnv::new();
    let key = env.key("err-toomany");
    let publisher = host_publisher(&env, &key);
    let mut subscribers: Vec<Subscriber> = (0..31)
        .map(|i| {
            let mut config = SubscriberConfig::new(key.clone());
            config.name = format!("in-process-{i}");
            config.runtime_dir = Some(env.dir().to_owned());
            Subscriber::connect(config).unwrap_or_else(|e| panic!("subscriber {i}: {e}"))
        })
        .collect();
    publisher
        .wait_for_subscribers(31, Duration::from_secs(5))
        .expect("31 subscribers");
    let out = env.run(&["subscribe", &key, "--frames", "1", "--wait-timeout", "0s"]);
    out.assert_error(&["too many subscribers", "31"]);
    assert_eq!(publisher.subscriber_count(), 31);
    // One leaves: the next one gets in.
    drop(subscribers.pop());
    common::wait_until(Duration::from_secs(5), "a free subscriber slot", || {
        publisher.subscriber_count() == 30
    });
    let out = env.run(&[
        "subscribe",
        &key,
        "--frames",
        "1",
        "--timeout",
        "200ms",
        "--json",
        "--wait-timeout",
        "0s",
    ]);
    // Nothing is published, so it gets in and then times out waiting for a
    // frame (the first as long as --wait-timeout, were that longer).
    out.assert_error(&["no first frame", "within 200ms of subscribing"]);
    let summary = out.json();
    assert_eq!(common::uint(&summary, "frames"), 0, "{summary}");
    assert_eq!(subscribers.len(), 30);
}

/// A fake publisher speaking protocol v2 answers HELLO_REQ with a
/// version-mismatch HELLO_RESP.
#[test]
fn protocol_version_mismatch() {
    let env = TestEnv::new();
    let key = env.key("err-version");
    let listener = UnixListener::bind(env.socket(&key)).expect("bind fake publisher");
    let fake = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("accept");
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut header = [0u8; TLV_HEADER_LEN];
        conn.read_exact(&mut header).expect("HELLO_REQ header");
        let kind = u32::from_le_bytes(header[0..4].try_into().unwrap());
        let len = u32::from_le_bytes(header[4..8].try_into().unwrap()) as usize;
        let mut payload = vec![0u8; len];
        conn.read_exact(&mut payload).expect("HELLO_REQ payload");
        let reply = Message::HelloResp(HelloResp {
            result: ErrorKind::Protocol.code(),
            proto_version: 2,
            accept: None,
        })
        .encode()
        .expect("encode HELLO_RESP");
        conn.write_all(&reply).expect("send HELLO_RESP");
        // Wait for the subscriber to hang up.
        let mut rest = Vec::new();
        let _ = conn.read_to_end(&mut rest);
        (kind, rest.len())
    });
    let line = env
        .run(&["subscribe", &key, "--frames", "1"])
        .assert_error(&["version mismatch", "v2", "v1"]);
    let (kind, trailing) = fake.join().expect("fake publisher");
    assert_eq!(kind, msg_type::HELLO_REQ, "first message must be HELLO_REQ");
    assert_eq!(trailing, 0, "nothing may follow a refused HELLO ({line})");
}

#[test]
fn second_publisher_on_live_key() {
    let env = TestEnv::new();
    let key = env.key("err-twice");
    let first = env.start_publisher(&key, "--size 160x120 --fps 100 --frames 0");
    let out = env.run(&[
        "publish", &key, "--memory", "host", "--size", "160x120", "--frames", "1",
    ]);
    let line = out.assert_error(&["already published", &key]);
    assert!(
        line.contains(&first.pid().to_string()),
        "should name the owner's pid: {line}"
    );
    // The first publisher is untouched and still serves.
    assert!(env.socket(&key).exists() && shm_path(&key).exists());
    let summary = env
        .subscribe(&key, "--verify --frames 5")
        .wait(EXIT_LIMIT)
        .assert_success()
        .json();
    assert_eq!(common::uint(&summary, "verified"), 5, "{summary}");
    first.signal(nix::sys::signal::Signal::SIGTERM);
    first.wait(EXIT_LIMIT).assert_success();
}

#[test]
fn bad_publish_arguments() {
    let env = TestEnv::new();
    let key = env.key("err-args");
    for (args, phrases) in BAD_PUBLISH_VALUES {
        let mut argv = publish_argv(&key, args);
        if !args.contains(&"--size") {
            argv.extend_from_slice(&["--size", "160x120"]);
        }
        let out = env.run(&argv);
        out.assert_error(phrases);
        assert_nothing_created(&env, &key);
    }
    // Choices and durations are checked by the command line's parser: exit 2,
    // the choices listed.
    for (args, phrases) in BAD_PUBLISH_USAGE {
        env.run(&publish_argv(&key, args)).assert_usage_error(phrases);
        assert_nothing_created(&env, &key);
    }
    for (args, phrases) in BAD_SUBSCRIBE_USAGE {
        let mut argv = vec!["subscribe", key.as_str()];
        argv.extend_from_slice(args);
        env.run(&argv).assert_usage_error(phrases);
    }
}

/// `publish KEY --frames 1 ARGS`, in host memory unless ARGS say otherwise.
fn publish_argv<'a>(key: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut argv = vec!["publish", key, "--frames", "1"];
    argv.extend_from_slice(args);
    if !args.contains(&"--memory") {
        argv.extend_from_slice(&["--memory", "host"]);
    }
    argv
}

/// Arguments of `publish` (beside a valid size, unless they give one) that
/// the command refuses (exit 1, one error line), and what that line says.
const BAD_PUBLISH_VALUES: [(&[&str], &[&str]); 9] = [
    (&["--ring", "0"], &["ring size 0", "1..=16"]),
    (&["--ring", "17"], &["ring size 17", "1..=16"]),
    (&["--size", "0x10"], &["0x10", "out of range"]),
    (&["--size", "160"], &["bad size '160'"]),
    (&["--fps=-1"], &["bad --fps -1"]),
    (&["--fps", "0.0001"], &["bad --fps 0.0001"]),
    (&["--wait-subscribers", "32"], &["--wait-subscribers 32", "31"]),
    (
        &["--policy", "strict-wait", "--ack-timeout", "0ms"],
        &["ACK timeout"],
    ),
    (&["--handshake-timeout", "0"], &["handshake timeout of 0"]),
];

/// Arguments of `publish` the command line's parser refuses (exit 2), and
/// what it says: the choices, or what a duration looks like.
const BAD_PUBLISH_USAGE: [(&[&str], &[&str]); 9] = [
    (
        &["--format", "rgb24"],
        &[
            "invalid value 'rgb24' for '--format <FORMAT>'",
            "nv12",
            "yuv444p16",
        ],
    ),
    (
        &["--policy", "foo"],
        &[
            "invalid value 'foo'",
            "[possible values: drop_oldest, strict_wait]",
        ],
    ),
    (&["--policy", "drop"], &["invalid value 'drop'", "drop_oldest"]),
    (
        &["--memory", "gpu"],
        &["invalid value 'gpu'", "[possible values: auto, host, cuda]"],
    ),
    (
        &["--cuda-share", "dmabuf"],
        &["invalid value 'dmabuf'", "[possible values: auto, fd, ipc]"],
    ),
    (
        &["--ack-timeout", "1 s"],
        &["--ack-timeout", "not a duration", "500ms"],
    ),
    (&["--startup-timeout=-1"], &["--startup-timeout", "negative"]),
    (&["--wait-timeout", "2000000000"], &["--wait-timeout", "too long"]),
    (&["--ack-timeout-ms", "soon"], &["--ack-timeout-ms"]),
];

/// Arguments of `subscribe` the command line's parser refuses (exit 2), and
/// what it says.
const BAD_SUBSCRIBE_USAGE: [(&[&str], &[&str]); 5] = [
    (
        &["--mode", "newest"],
        &["invalid value 'newest'", "[possible values: sequential, latest]"],
    ),
    (
        &["--copy", "sometimes"],
        &["[possible values: auto, always, never]"],
    ),
    (&["--timeout", "5min"], &["--timeout", "not a duration"]),
    (&["--wait-timeout", "1:60"], &["--wait-timeout", "not a duration"]),
    (&["--start-delay", ""], &["--start-delay"]),
];

/// The millisecond options of 0.2 still work for now, in milliseconds,
/// with a warning that names the new spelling.
#[test]
fn renamed_options_still_work() {
    let env = TestEnv::new();
    let key = env.key("err-legacy");
    let out = env.run(&[
        "subscribe",
        &key,
        "--frames",
        "1",
        "--wait-ms",
        "300",
        "--timeout-ms",
        "200",
    ]);
    assert_eq!(out.code(), Some(1), "{out}");
    let lines = out.stderr_lines();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("--wait-ms is deprecated") && l.contains("--wait-timeout 300ms")),
        "{out}"
    );
    assert!(lines.iter().any(|l| l.contains("--timeout 200ms")), "{out}");
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("cuframes: error: no publisher for key"),
        "{out}"
    );
    // Old and new spelling of one option together are a contradiction.
    env.run(&["subscribe", &key, "--timeout", "1s", "--timeout-ms", "1000"])
        .assert_usage_error(&["--timeout-ms", "--timeout"]);
    // An ACK timeout of 0 ms is refused as --ack-timeout 0 is.
    let out = env.run(&[
        "publish",
        &key,
        "--memory",
        "host",
        "--frames",
        "1",
        "--policy",
        "strict_wait",
        "--ack-timeout-ms",
        "0",
    ]);
    assert_eq!(out.code(), Some(1), "{out}");
    assert!(out.stderr.contains("--ack-timeout 0s"), "{out}");
    assert!(out.stderr.contains("ACK timeout"), "{out}");
    assert_nothing_created(&env, &key);
}

#[test]
fn cuda_device_needs_a_gpu() {
    let env = TestEnv::new();
    let key = env.key("err-cudadev");
    // Every run without a GPU (hidden where there is one; tests/cuda.rs
    // publishes on a device).
    let publish = |extra: &[&str]| {
        let mut argv = vec!["publish", key.as_str(), "--frames", "1", "--size", "160x120"];
        argv.extend_from_slice(extra);
        env.run_without_gpu(&argv)
    };
    // Parsed, and it asks for CUDA memory: host is a contradiction.
    publish(&["--cuda-device", "0", "--memory", "host"])
        .assert_error(&["--cuda-device needs CUDA memory", "--memory host"]);
    assert_nothing_created(&env, &key);
    let out = publish(&["--cuda-device=x"]);
    assert_eq!(out.code(), Some(2), "a usage error: {out}");
    assert!(out.stderr.contains("--cuda-device"), "{out}");
    let out = publish(&["--cuda-device=-1"]);
    assert_eq!(out.code(), Some(2), "ordinals only: {out}");
    // The clear CUDA error, also with --memory auto (which would otherwise
    // fall back to host memory).
    for memory in ["auto", "cuda"] {
        publish(&["--cuda-device", "1", "--memory", memory]).assert_error(&["CUDA is not available"]);
        assert_nothing_created(&env, &key);
    }
    publish(&["--cuda-device", "0"]).assert_error(&["CUDA is not available"]);
    // A subscriber that names a device needs a GPU before it connects.
    let _publisher = host_publisher(&env, &key);
    env.run_without_gpu(&["subscribe", &key, "--frames", "1", "--cuda-device", "0"])
        .assert_error(&["CUDA is not available"]);
    let out = env.run(&["subscribe", &key, "--frames", "1", "--cuda-device", "nope"]);
    assert_eq!(out.code(), Some(2), "a usage error: {out}");
}

/// A process run with a test switch in its environment says so, once (D20).
#[test]
fn a_test_switch_is_announced() {
    let env = TestEnv::new();
    let key = env.key("switch");
    let mut cmd = env.command(&[
        "publish", &key, "--memory", "host", "--size", "64x48", "--frames", "2", "--fps", "100",
    ]);
    cmd.env("CUFRAMES_TEST_STALL_AT", "sub-connected:1");
    let out = Proc::spawn("publish with a switch", cmd).wait(EXIT_LIMIT);
    out.assert_success();
    let said: Vec<&str> = out
        .stderr_lines()
        .into_iter()
        .filter(|l| l.contains("is set: a test switch"))
        .collect();
    assert_eq!(said.len(), 1, "{out}");
    assert!(
        said[0].contains("CUFRAMES_TEST_STALL_AT=sub-connected:1"),
        "{out}"
    );
}

/// The first frame is waited for as long as the publisher (`--wait-timeout`),
/// at least `--timeout`: a publisher that holds it back for 1 s (as one
/// waiting for its other subscribers does) is not a timeout of 200 ms. Once
/// frames came, `--timeout` bounds each.
#[test]
fn first_frame_is_waited_for_as_long_as_the_publisher() {
    let env = TestEnv::new();
    let key = env.key("err-first");
    let mut publisher = host_publisher(&env, &key);
    let sub = env.spawn(
        "subscribe",
        &[
            "subscribe",
            &key,
            "--frames",
            "3",
            "--timeout",
            "200ms",
            "--wait-timeout",
            "10s",
            "--json",
        ],
    );
    publisher
        .wait_for_subscribers(1, Duration::from_secs(10))
        .expect("the subscriber joins");
    std::thread::sleep(Duration::from_secs(1));
    let layout = publisher.layout().clone();
    for n in 0..2u64 {
        publisher
            .publish_with(n as i64, |planes| {
                cuframes::pattern::fill_frame(&layout, n, planes)
            })
            .expect("publish");
    }
    // The third frame never comes: 200 ms after the second, the run fails.
    let out = sub.wait(EXIT_LIMIT);
    out.assert_error(&["no frame", "within 200ms (after 2 frames)"]);
    assert_eq!(common::uint(&out.json(), "frames"), 2, "{out}");
}
