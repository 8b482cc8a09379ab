//! The crash matrix with CUDA memory: kill -9 of a `cuframes publish
//! --memory cuda` publisher and of `cuframes subscribe --verify` subscribers
//! at each point of the handshake and mid-stream, under both policies, with
//! real processes only. The host-memory matrix is `crash_matrix.rs`; the
//! points are those of `rust/cuframes/src/testhook.rs`
//! (`CUFRAMES_TEST_ABORT_AT=<point>[:<n>]`).
//!
//! These need an NVIDIA GPU: they are ignored by default, sit in
//! `needs_gpu`, and are run on the GPU machine with `--ignored` (one at a
//! time: `--test-threads=1`; they also serialise themselves). Without a GPU every case fails at once, saying
//! that `cuframes publish --memory cuda` could not start.
//!
//! Publisher cases: the survivor subscriber process ends with a
//! "disconnected" error (not "shut down"), 0 mismatched, and under
//! strict-wait no gap; a new CUDA publisher takes the key at once and a
//! fresh subscriber verifies its frames.
//!
//! Subscriber cases: the CUDA publisher (ACK timeout 30 s) publishes all its
//! frames in about their nominal time, never waiting for the dead
//! subscriber; the dead subscriber's slot is freed at once; the survivor
//! sees 0 mismatched frames (strict-wait: verifies all of them, seqs 1..N;
//! drop-oldest: reaches seq N, frames lost only to being lapped).

mod common;

use std::os::unix::process::ExitStatusExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{EXIT_LIMIT, Proc, SOCKET_LIMIT, TestEnv, assert_all_verified, uint, wait_until};
use cuframes::Policy;
use cuframes::inspect::SubscriberView;
use serde_json::Value;

/// Frame size of every CUDA stream here (NV12, the CLI's default format).
const SIZE: &str = "1280x720";
/// Publishing rate.
const FPS: u64 = 300;
/// Ring size.
const RING: usize = 4;
/// The publisher's ACK timeout: far longer than any case, so waiting for it
/// shows in the wall time.
const ACK_TIMEOUT_MS: u64 = 30_000;
/// The publish (seq) at which `pub-mid-publish` kills the publisher: 2 s
/// at 300 fps, time for a drop-oldest survivor to open its IPC handles and
/// read frames before the death.
const MID_PUBLISH_AT: u64 = 600;
/// Frames of the publisher in the subscriber cases (4 s at 300 fps).
const SUB_FRAMES: u64 = 1200;
/// How long a CUDA process may take to start and read its first frames
/// (process start, CUDA initialisation, IPC handles opened).
const READY_LIMIT: Duration = Duration::from_secs(10);
/// How long after the publisher's death a survivor process may take to exit
/// (noticing the death, closing its IPC mappings, tearing CUDA down); its
/// `--timeout-ms` is 20 s, so a survivor that waited for frames would not
/// make it.
const SURVIVOR_EXIT_LIMIT: Duration = Duration::from_secs(5);
/// How long after the publisher's death a subscriber caught in its handshake
/// may take to fail: below its 5 s handshake timeout.
const TRIGGER_EXIT_LIMIT: Duration = Duration::from_secs(4);
/// The test hook's environment variable.
const ABORT_AT: &str = "CUFRAMES_TEST_ABORT_AT";

/// `cuframes publish KEY --memory cuda <options>`, with the test hook set to
/// `hook` when given; waits until its socket accepts connections (a bare
/// connection, no HELLO: it does not count for the hook). Returns the
/// publisher and how long it took to start. Fails at once when the
/// publisher exits first (no GPU, no driver).
fn start_cuda_publisher(env: &TestEnv, key: &str, options: &str, hook: Option<&str>) -> (Proc, Duration) {
    let mut args = vec!["publish", key, "--memory", "cuda"];
    args.extend(options.split_whitespace());
    let mut cmd = env.command(&args);
    if let Some(hook) = hook {
        cmd.env(ABORT_AT, hook);
    }
    let started = Instant::now();
    let mut publisher = Proc::spawn(&format!("publish {key} --memory cuda"), cmd);
    let socket = env.socket(key);
    loop {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            return (publisher, started.elapsed());
        }
        if !publisher.is_running() {
            let out = publisher.wait(EXIT_LIMIT);
            panic!(
                "`cuframes publish --memory cuda` exited before its socket appeared \
                 (these tests need an NVIDIA GPU and its driver): {out}"
            );
        }
        assert!(
            started.elapsed() < SOCKET_LIMIT,
            "the CUDA publisher's socket {} did not appear within {SOCKET_LIMIT:?}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The subscriber slot named `name` in `key`'s shared header, if any.
fn reader(env: &TestEnv, key: &str, name: &str) -> Option<SubscriberView> {
    cuframes::inspect::inspect(key, Some(env.dir()))
        .ok()?
        .subscribers()
        .into_iter()
        .find(|s| s.name == name)
}

/// `global_seq` and the subscriber bitmap of `key`, or None when it has no
/// shared header (any more).
fn header_state(env: &TestEnv, key: &str) -> Option<(u64, u64)> {
    let ins = cuframes::inspect::inspect(key, Some(env.dir())).ok()?;
    ins.header.map(|h| (h.global_seq, h.subscriber_bitmap))
}

fn global_seq(env: &TestEnv, key: &str) -> u64 {
    header_state(env, key).map_or(0, |(seq, _)| seq)
}

/// Waits until the subscriber process `proc`, named `name`, has ACKed
/// `frames` frames more than when it was first seen in the header (its
/// ACKs move `last_seen_seq`); fails with its output when it exits first.
fn wait_reading(env: &TestEnv, key: &str, name: &str, proc: &mut Proc, frames: u64) {
    let mut base = None;
    wait_until(READY_LIMIT, &format!("{name} to read {frames} frames"), || {
        if !proc.is_running() {
            let out = proc.wait_within(EXIT_LIMIT).unwrap_or_else(|out| out);
            panic!("{name} exited while it should be reading frames: {out}");
        }
        let Some(view) = reader(env, key, name) else {
            return false;
        };
        let base = *base.get_or_insert(view.last_seen_seq);
        view.last_seen_seq >= base + frames
    });
}

/// Polls every millisecond until each of `procs` has exited (at most
/// `limit`); returns when each exit was first seen (now for those still
/// running: the caller's `wait` then reports them hung, with their output).
fn exits_seen(procs: &mut [&mut Proc], limit: Duration) -> Vec<Instant> {
    let deadline = Instant::now() + limit;
    let mut seen: Vec<Option<Instant>> = vec![None; procs.len()];
    while seen.iter().any(Option::is_none) && Instant::now() < deadline {
        for (proc, seen) in procs.iter_mut().zip(seen.iter_mut()) {
            if seen.is_none() && !proc.is_running() {
                *seen = Some(Instant::now());
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let now = Instant::now();
    seen.into_iter().map(|s| s.unwrap_or(now)).collect()
}

/// A survivor's summary: CUDA memory, nothing mismatched; under strict-wait
/// nothing lost either (a gapless run of seqs, every frame verified). Under
/// drop-oldest a frame overwritten while it was read (1280x720 takes a
/// while to check) is counted as dropped, not judged (`docs/cli.md`).
fn assert_survivor(summary: &Value, policy: Policy) {
    assert_eq!(summary["memory"], "cuda", "{summary}");
    assert_eq!(uint(summary, "mismatched"), 0, "{summary}");
    assert!(uint(summary, "verified") >= 1, "{summary}");
    match policy {
        Policy::StrictWait => {
            assert_eq!(uint(summary, "verified"), uint(summary, "frames"), "{summary}");
            assert_eq!(
                uint(summary, "dropped"),
                0,
                "strict-wait loses nothing: {summary}"
            );
            assert_eq!(
                uint(summary, "last_seq") - uint(summary, "first_seq") + 1,
                uint(summary, "frames"),
                "gapless: {summary}"
            );
        }
        Policy::DropOldest => assert!(
            uint(summary, "verified") + uint(summary, "overwritten") >= uint(summary, "frames"),
            "every frame not verified was overwritten while read: {summary}"
        ),
    }
}

/// Where the publisher dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PubPoint {
    /// HELLO_REQ of a second subscriber received, no HELLO_RESP.
    GotHello,
    /// SUBSCRIBE_REQ of a second subscriber received, no SUBSCRIBE_RESP.
    GotSubscribe,
    /// SUBSCRIBE_RESP and descriptors sent to a second subscriber.
    AfterAccept,
    /// Slot marked "being written" for publish #MID_PUBLISH_AT: the previous
    /// frame's host-to-device copy and event record were queued on the
    /// publisher's stream without a host synchronisation.
    MidPublish,
    /// kill -9 from outside mid-stream.
    Killed,
}

fn publisher_crash(policy: Policy, point: PubPoint) {
    let env = TestEnv::new();
    let key = env.key(&format!("cpc-{}-{point:?}", policy.name()).to_lowercase());
    // The survivor's handshake comes first: the second one kills.
    let hook = match point {
        PubPoint::GotHello => Some("pub-got-hello:2".to_owned()),
        PubPoint::GotSubscribe => Some("pub-got-subscribe:2".to_owned()),
        PubPoint::AfterAccept => Some("pub-after-accept:2".to_owned()),
        PubPoint::MidPublish => Some(format!("pub-mid-publish:{MID_PUBLISH_AT}")),
        PubPoint::Killed => None,
    };
    let wait = if point == PubPoint::MidPublish {
        " --wait-subscribers 1"
    } else {
        ""
    };
    let options = format!(
        "--size {SIZE} --fps {FPS} --frames 0 --ring {RING} --policy {} --ack-timeout-ms {ACK_TIMEOUT_MS}{wait}",
        policy.name()
    );
    let (mut publisher, startup) = start_cuda_publisher(&env, &key, &options, hook.as_deref());
    let mut survivor = env.subscribe(&key, "--verify --frames 0 --name survivor --timeout-ms 20000");
    wait_reading(&env, &key, "survivor", &mut survivor, 20);

    let mut trigger = None;
    let mut killed_at = None;
    match point {
        PubPoint::GotHello | PubPoint::GotSubscribe | PubPoint::AfterAccept => {
            trigger = Some(env.subscribe(&key, "--verify --frames 0 --name trigger --timeout-ms 20000"));
        }
        PubPoint::Killed => {
            std::thread::sleep(Duration::from_millis(200));
            killed_at = Some(Instant::now());
            publisher.kill9();
        }
        PubPoint::MidPublish => {}
    }
    let seen = {
        let mut procs: Vec<&mut Proc> = vec![&mut publisher, &mut survivor];
        if let Some(t) = trigger.as_mut() {
            procs.push(t);
        }
        exits_seen(&mut procs, EXIT_LIMIT + SURVIVOR_EXIT_LIMIT)
    };
    let reap_limit = Duration::from_millis(500);
    let out = publisher.wait(reap_limit);
    assert_eq!(
        out.status.signal(),
        Some(9),
        "the publisher should have been killed: {out}"
    );
    let death = killed_at.unwrap_or(seen[0]);

    let survivor_exit = seen[1].saturating_duration_since(death);
    let out = survivor.wait(reap_limit);
    let line = out.assert_error(&["disconnected"]);
    assert!(!line.contains("shut down"), "a crash is not a SHUTDOWN: {line}");
    let summary = out.json();
    assert_survivor(&summary, policy);
    assert!(
        survivor_exit < SURVIVOR_EXIT_LIMIT,
        "the survivor exited {survivor_exit:?} after the publisher's death: {out}"
    );

    let trigger_note = match trigger {
        None => "-".to_owned(),
        Some(t) => {
            let after = seen[2].saturating_duration_since(death);
            let out = t.wait(reap_limit);
            // Refused during the handshake, or accepted and then told
            // DISCONNECTED (when the dead publisher's IPC handles would not
            // open, the subscriber says the publisher went away, not the
            // driver's error): a clean error either way, never a timeout.
            let line = out.assert_error(&[]);
            assert!(
                !line.contains("in time") && !line.contains("no frame from"),
                "the connecting subscriber timed out instead of learning of the death: {out}"
            );
            assert!(
                !line.contains("cuIpcOpenMemHandle") || line.contains("went away during the handshake"),
                "a dead publisher's handles reported as a CUDA error, not as its death: {out}"
            );
            assert!(
                after < TRIGGER_EXIT_LIMIT,
                "the connecting subscriber exited {after:?} after the publisher's death: {out}"
            );
            format!("exited {after:?} after the death: {line}")
        }
    };

    // A new CUDA publisher takes the key over at once; a fresh subscriber
    // verifies its frames. (Strict-wait whatever the case's policy: a
    // subscriber still opening its IPC handles must not be lapped.)
    let options = format!(
        "--size {SIZE} --fps {FPS} --frames 20 --ring {RING} --policy strict-wait --wait-subscribers 1"
    );
    let (fresh, took_over) = start_cuda_publisher(&env, &key, &options, None);
    let after = env.subscribe(&key, "--verify --frames 20 --name after");
    let fresh_summary = after.wait(EXIT_LIMIT).assert_success().json();
    assert_eq!(fresh_summary["memory"], "cuda", "{fresh_summary}");
    assert_all_verified(&fresh_summary, 1, 20);
    fresh.wait(EXIT_LIMIT).assert_success();

    let death_is = if killed_at.is_some() {
        "kill(2)"
    } else {
        "its exit was seen"
    };
    eprintln!(
        "cuda publisher killed {point:?} ({}): survivor exited {survivor_exit:?} after the death ({death_is}), \
         {} frames (seqs {}..{}), {} verified, {} dropped, {} mismatched, error: {line}; \
         trigger: {trigger_note}; new publisher's socket in {took_over:?} (first publisher's: {startup:?}); \
         fresh subscriber verified {}/20",
        policy.name(),
        uint(&summary, "frames"),
        uint(&summary, "first_seq"),
        uint(&summary, "last_seq"),
        uint(&summary, "verified"),
        uint(&summary, "dropped"),
        uint(&summary, "mismatched"),
        uint(&fresh_summary, "verified"),
    );
}

/// Where the subscriber dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SubPoint {
    BeforeHello,
    AfterHello,
    AfterAccept,
    /// `next()` hands out its 5th lease, never released.
    HoldingLease,
    /// kill -9 from outside, mid-stream.
    MidStream,
}

fn subscriber_crash(policy: Policy, point: SubPoint) {
    let env = TestEnv::new();
    let key = env.key(&format!("csc-{}-{point:?}", policy.name()).to_lowercase());
    let started = Instant::now();
    let options = format!(
        "--size {SIZE} --fps {FPS} --frames {SUB_FRAMES} --ring {RING} --policy {} --ack-timeout-ms {ACK_TIMEOUT_MS} --wait-subscribers 1",
        policy.name()
    );
    let (publisher, startup) = start_cuda_publisher(&env, &key, &options, None);
    let mut survivor = env.subscribe(&key, "--verify --frames 0 --name survivor --timeout-ms 20000");
    wait_reading(&env, &key, "survivor", &mut survivor, 10);
    let survivor_only = header_state(&env, &key).map_or(0, |(_, bitmap)| bitmap);
    assert_eq!(
        survivor_only.count_ones(),
        1,
        "only the survivor: {survivor_only:#b}"
    );

    let hook = match point {
        SubPoint::BeforeHello => Some("sub-before-hello"),
        SubPoint::AfterHello => Some("sub-after-hello"),
        SubPoint::AfterAccept => Some("sub-after-accept"),
        SubPoint::HoldingLease => Some("sub-holding-lease:5"),
        SubPoint::MidStream => None,
    };
    let args = [
        "subscribe",
        &key,
        "--json",
        "--verify",
        "--frames",
        "0",
        "--name",
        "victim",
    ];
    let mut cmd = env.command(&args);
    if let Some(hook) = hook {
        cmd.env(ABORT_AT, hook);
    }
    let spawned = Instant::now();
    let mut victim = Proc::spawn("victim", cmd);
    let mut killed_at = None;
    if point == SubPoint::MidStream {
        wait_reading(&env, &key, "victim", &mut victim, 1);
        let at = global_seq(&env, &key);
        wait_until(READY_LIMIT, "50 frames with the victim", || {
            global_seq(&env, &key) >= at + 50
        });
        killed_at = Some(Instant::now());
        victim.kill9();
    }
    let seen = exits_seen(&mut [&mut victim], EXIT_LIMIT)[0];
    let out = victim.wait(Duration::from_millis(500));
    assert_eq!(
        out.status.signal(),
        Some(9),
        "the victim should have been killed (by the hook {hook:?}, or by the test): {out}"
    );
    let died = killed_at.unwrap_or(seen);
    let victim_life = died.saturating_duration_since(spawned);

    // Its subscriber slot and bit are freed at once (or the stream already
    // ended, its header gone).
    let freed = wait_until(
        Duration::from_secs(1),
        "the victim's slot to be freed",
        || match header_state(&env, &key) {
            Some((_, bitmap)) => bitmap == survivor_only && reader(&env, &key, "victim").is_none(),
            None => true,
        },
    );

    // The publisher never waits for the dead subscriber: all its frames in
    // about their nominal time, far below the 30 s ACK timeout.
    let bound = Duration::from_millis(SUB_FRAMES * 1000 / FPS) + Duration::from_secs(10);
    let limit = bound.saturating_sub(started.elapsed());
    let out = survivor.wait_within(limit).unwrap_or_else(|out| {
        panic!(
            "the survivor did not end within {bound:?} of the publisher's start: \
             the publisher waited for the dead subscriber? {out}"
        )
    });
    let summary = out.assert_success().json();
    let pub_out = publisher.wait(EXIT_LIMIT);
    pub_out.assert_success();
    let took = started.elapsed();
    assert!(
        took < bound,
        "the publisher took {took:?} (bound {bound:?}): it waited for the dead subscriber: {pub_out}"
    );
    assert!(
        pub_out
            .stderr
            .contains(&format!("published {SUB_FRAMES} frames in ")),
        "{pub_out}"
    );
    assert!(
        pub_out.stderr.contains("; 0 dropped for ACK timeout"),
        "no ACK timeout was needed: {pub_out}"
    );

    assert_eq!(summary["memory"], "cuda", "{summary}");
    match policy {
        Policy::StrictWait => assert_all_verified(&summary, 1, SUB_FRAMES),
        Policy::DropOldest => {
            assert_survivor(&summary, policy);
            assert_eq!(
                uint(&summary, "last_seq"),
                SUB_FRAMES,
                "the last frame: {summary}"
            );
            assert!(
                uint(&summary, "frames") >= SUB_FRAMES / 2,
                "the survivor kept reading: {summary}"
            );
        }
    }
    let publisher_line = pub_out.stderr.lines().last().unwrap_or_default();
    eprintln!(
        "cuda subscriber killed {point:?} ({}): victim died {victim_life:?} after its start, slot freed {freed:?} \
         after its death was seen; publisher (socket in {startup:?}) ended {took:?} after its start \
         (bound {bound:?}, ACK timeout {ACK_TIMEOUT_MS} ms): {publisher_line}; survivor {} of {SUB_FRAMES} frames \
         verified, {} dropped, {} mismatched",
        policy.name(),
        uint(&summary, "verified"),
        uint(&summary, "dropped"),
        uint(&summary, "mismatched"),
    );
}

macro_rules! matrix {
    ($($name:ident: $f:ident($policy:ident, $point:expr);)*) => {
        mod needs_gpu {
            use super::*;
            $(
                #[test]
                #[ignore = "needs an NVIDIA GPU: run by scripts/gpu-test.sh"]
                fn $name() {
                    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
                    $f(Policy::$policy, $point);
                }
            )*
        }
    };
}

/// One case at a time: the bounds are about the library, not about several
/// process trees sharing one GPU.
static SERIAL: Mutex<()> = Mutex::new(());

matrix! {
    cuda_publisher_dies_on_hello_drop_oldest: publisher_crash(DropOldest, PubPoint::GotHello);
    cuda_publisher_dies_on_hello_strict_wait: publisher_crash(StrictWait, PubPoint::GotHello);
    cuda_publisher_dies_on_subscribe_drop_oldest: publisher_crash(DropOldest, PubPoint::GotSubscribe);
    cuda_publisher_dies_on_subscribe_strict_wait: publisher_crash(StrictWait, PubPoint::GotSubscribe);
    cuda_publisher_dies_after_accept_drop_oldest: publisher_crash(DropOldest, PubPoint::AfterAccept);
    cuda_publisher_dies_after_accept_strict_wait: publisher_crash(StrictWait, PubPoint::AfterAccept);
    cuda_publisher_dies_mid_publish_drop_oldest: publisher_crash(DropOldest, PubPoint::MidPublish);
    cuda_publisher_dies_mid_publish_strict_wait: publisher_crash(StrictWait, PubPoint::MidPublish);
    cuda_publisher_killed_mid_stream_drop_oldest: publisher_crash(DropOldest, PubPoint::Killed);
    cuda_publisher_killed_mid_stream_strict_wait: publisher_crash(StrictWait, PubPoint::Killed);
    cuda_subscriber_dies_before_hello_drop_oldest: subscriber_crash(DropOldest, SubPoint::BeforeHello);
    cuda_subscriber_dies_before_hello_strict_wait: subscriber_crash(StrictWait, SubPoint::BeforeHello);
    cuda_subscriber_dies_after_hello_drop_oldest: subscriber_crash(DropOldest, SubPoint::AfterHello);
    cuda_subscriber_dies_after_hello_strict_wait: subscriber_crash(StrictWait, SubPoint::AfterHello);
    cuda_subscriber_dies_after_accept_drop_oldest: subscriber_crash(DropOldest, SubPoint::AfterAccept);
    cuda_subscriber_dies_after_accept_strict_wait: subscriber_crash(StrictWait, SubPoint::AfterAccept);
    cuda_subscriber_dies_holding_a_lease_drop_oldest: subscriber_crash(DropOldest, SubPoint::HoldingLease);
    cuda_subscriber_dies_holding_a_lease_strict_wait: subscriber_crash(StrictWait, SubPoint::HoldingLease);
    cuda_subscriber_killed_mid_stream_drop_oldest: subscriber_crash(DropOldest, SubPoint::MidStream);
    cuda_subscriber_killed_mid_stream_strict_wait: subscriber_crash(StrictWait, SubPoint::MidStream);
}
