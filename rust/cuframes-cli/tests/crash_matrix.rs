//! The crash matrix: kill -9 of the publisher and of a subscriber at each
//! point of the handshake and mid-stream, under both policies, with real
//! processes (`cuframes publish` / `cuframes subscribe --verify --json`).
//!
//! Handshake points use the test-only hook `CUFRAMES_TEST_ABORT_AT`
//! (`rust/cuframes/src/testhook.rs`): the process raises SIGKILL on itself
//! at that step. Every case asserts what `docs/reliability.md` promises:
//! survivors see 0 mismatched frames and, under strict-wait, lose none; a
//! subscriber learns of a dead publisher within 50 ms; a new publisher
//! takes the key at once; a killed subscriber's bit is reclaimed at once,
//! without waiting for the ACK timeout.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{EXIT_LIMIT, Finished, Proc, SOCKET_LIMIT, TestEnv, assert_all_verified, uint, wait_until};
use cuframes::{
    ErrorKind, FrameLease, MemoryRequest, PixelFormat, Policy, Publisher, PublisherConfig, Subscriber,
    SubscriberConfig, pattern,
};
use serde_json::Value;

/// How fast a subscriber must learn that its publisher died.
const DETECT_LIMIT: Duration = Duration::from_millis(50);

fn policy_arg(policy: Policy) -> &'static str {
    policy.name()
}

/// `global_seq` and the subscriber bitmap of `key`, from its shared header.
fn header_state(env: &TestEnv, key: &str) -> (u64, u64) {
    match cuframes::inspect::inspect(key, Some(env.dir())) {
        Ok(ins) => ins.header.map_or((0, 0), |h| (h.global_seq, h.subscriber_bitmap)),
        Err(_) => (0, 0),
    }
}

fn sub_config(env: &TestEnv, key: &str, name: &str) -> SubscriberConfig {
    let mut c = SubscriberConfig::new(key);
    c.name = name.into();
    c.runtime_dir = Some(env.dir().to_owned());
    c
}

fn lease_matches(lease: &FrameLease) -> bool {
    let layout = lease.layout().clone();
    (0..layout.planes().len()).all(|p| {
        lease
            .host_plane(p)
            .is_some_and(|b| pattern::check_plane(&layout, lease.seq() - 1, p, b))
    })
}

/// A survivor's summary: nothing mismatched; under strict-wait nothing
/// lost either (a gapless run of seqs).
fn assert_survivor(summary: &Value, policy: Policy) {
    assert_eq!(uint(summary, "mismatched"), 0, "{summary}");
    assert!(uint(summary, "frames") >= 1, "{summary}");
    assert_eq!(uint(summary, "verified"), uint(summary, "frames"), "{summary}");
    if policy == Policy::StrictWait {
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
}

/// Waits for a child's exit, polling every millisecond; returns it and the
/// moment its death was first seen.
fn reap(mut proc: Proc, limit: Duration) -> (Finished, Instant) {
    let out = proc
        .wait_within(limit)
        .unwrap_or_else(|out| panic!("{} did not exit within {limit:?}: {out}", out.name));
    (out, Instant::now())
}

/// An in-process subscriber that reads (and, when `hold` is set, keeps the
/// first lease it gets) until its publisher goes away; returns when it
/// learnt, how many frames matched, and whether a held lease stayed
/// readable and intact-or-detected after the death.
struct Watcher {
    handle: std::thread::JoinHandle<(Instant, u64, u64)>,
    ready: Arc<AtomicBool>,
}

impl Watcher {
    fn start(env: &TestEnv, key: &str, hold: bool) -> Watcher {
        let mut sub = Subscriber::connect(sub_config(env, key, "watcher")).expect("watcher subscribes");
        let ready = Arc::new(AtomicBool::new(false));
        let flag = ready.clone();
        let handle = std::thread::spawn(move || {
            let (mut matched, mut bad) = (0u64, 0u64);
            let mut held: Option<FrameLease> = None;
            loop {
                match sub.next(None) {
                    Ok(lease) => {
                        if lease_matches(&lease) {
                            matched += 1;
                        } else if lease.is_intact() {
                            bad += 1;
                        }
                        flag.store(true, Ordering::Release);
                        if hold && held.is_none() {
                            held = Some(lease);
                        }
                    }
                    Err(e) => {
                        let at = Instant::now();
                        assert_eq!(e.kind(), ErrorKind::Disconnected, "{e}");
                        assert!(!sub.publisher_shut_down(), "a crash is not a SHUTDOWN");
                        // The held frame's memory outlives the publisher:
                        // readable, and either intact or known overwritten
                        // (drop-oldest laps it).
                        if let Some(lease) = held.take() {
                            let intact = lease.is_intact();
                            let matches = lease_matches(&lease);
                            assert!(matches || !intact, "held lease after the crash");
                            if !intact {
                                assert_eq!(lease.release().unwrap_err().kind(), ErrorKind::Overwritten);
                            } else {
                                let _ = lease.release();
                            }
                        }
                        return (at, matched, bad);
                    }
                }
            }
        });
        Watcher { handle, ready }
    }

    fn wait_ready(&self) {
        wait_until(SOCKET_LIMIT, "the watcher's first frame", || {
            self.ready.load(Ordering::Acquire)
        });
    }

    fn join(self) -> (Instant, u64, u64) {
        self.handle.join().expect("watcher thread")
    }
}

/// Where the publisher dies.
#[derive(Clone, Copy, Debug)]
enum PubPoint {
    /// HELLO_REQ of a third subscriber received, no HELLO_RESP.
    GotHello,
    /// SUBSCRIBE_REQ received, no SUBSCRIBE_RESP.
    GotSubscribe,
    /// SUBSCRIBE_RESP and descriptors sent, no frame for it yet.
    AfterAccept,
    /// Half-way into writing a slot.
    MidPublish,
    /// kill -9 from outside while a subscriber holds a lease.
    MidStreamHoldingLease,
}

fn publisher_crash(policy: Policy, point: PubPoint) {
    let env = TestEnv::new();
    let key = env.key(&format!("pc-{}-{point:?}", policy_arg(policy)).to_lowercase());
    let hook = match point {
        // The survivor's and the watcher's handshakes come first.
        PubPoint::GotHello => Some("pub-got-hello:3".to_owned()),
        PubPoint::GotSubscribe => Some("pub-got-subscribe:3".to_owned()),
        PubPoint::AfterAccept => Some("pub-after-accept:3".to_owned()),
        PubPoint::MidPublish => None, // set below, once we know the seq
        PubPoint::MidStreamHoldingLease => None,
    };
    let mut args: Vec<String> = format!(
        "publish {key} --memory host --size 64x48 --fps 1000 --frames 0 --ring 4 --policy {} --ack-timeout-ms 30000",
        policy_arg(policy)
    )
    .split_whitespace()
    .map(str::to_owned)
    .collect();
    if matches!(point, PubPoint::MidPublish) {
        args.extend(["--wait-subscribers".to_owned(), "2".to_owned()]);
    }
    let mut cmd = env.command(&args);
    match (&hook, point) {
        (Some(h), _) => {
            cmd.env("CUFRAMES_TEST_ABORT_AT", h);
        }
        (None, PubPoint::MidPublish) => {
            cmd.env("CUFRAMES_TEST_ABORT_AT", "pub-mid-publish:300");
        }
        _ => {}
    }
    let mut publisher = Proc::spawn(&format!("publish {key}"), cmd);
    env.wait_for_socket(&key);
    let survivor = env.subscribe(&key, "--verify --frames 0 --name survivor --timeout-ms 20000");
    wait_until(SOCKET_LIMIT, "the survivor", || {
        header_state(&env, &key).1.count_ones() == 1
    });
    let hold = matches!(point, PubPoint::MidStreamHoldingLease);
    let watcher = Watcher::start(&env, &key, hold);
    if !matches!(point, PubPoint::MidPublish) {
        watcher.wait_ready();
    }

    let mut trigger_result = None;
    let death_seen = match point {
        PubPoint::GotHello | PubPoint::GotSubscribe | PubPoint::AfterAccept => {
            let started = Instant::now();
            let result = Subscriber::connect(sub_config(&env, &key, "trigger"));
            let took = started.elapsed();
            let (out, seen) = reap(publisher, EXIT_LIMIT);
            assert_eq!(out.status.signal(), Some(9), "{out}");
            match result {
                Err(e) => {
                    assert!(
                        took < Duration::from_secs(1),
                        "the connecting subscriber learnt in {took:?} ({e})"
                    );
                    trigger_result = Some(format!("connect failed in {took:?}: {}", e.kind().describe()));
                }
                Ok(mut sub) => {
                    // Accepted just before the death: the next call says so.
                    let t = Instant::now();
                    let err = sub.next(Some(Duration::from_secs(2))).map(|_| ()).unwrap_err();
                    assert_eq!(err.kind(), ErrorKind::Disconnected, "{err}");
                    assert!(t.elapsed() < DETECT_LIMIT, "{:?}", t.elapsed());
                    trigger_result = Some("connected, then DISCONNECTED".into());
                }
            }
            seen
        }
        PubPoint::MidPublish => {
            let (out, seen) = reap(publisher, EXIT_LIMIT);
            assert_eq!(out.status.signal(), Some(9), "{out}");
            seen
        }
        PubPoint::MidStreamHoldingLease => {
            std::thread::sleep(Duration::from_millis(50));
            let killed_at = Instant::now();
            publisher.kill9();
            let (out, _) = reap(publisher, EXIT_LIMIT);
            assert_eq!(out.status.signal(), Some(9), "{out}");
            killed_at
        }
    };
    let (learnt_at, matched, bad) = watcher.join();
    let detect = learnt_at.saturating_duration_since(death_seen);
    assert_eq!(bad, 0, "the watcher saw a mismatched frame");
    assert!(matched >= 1);
    assert!(
        detect < DETECT_LIMIT,
        "the watcher learnt {detect:?} after the death"
    );

    let out = survivor.wait(EXIT_LIMIT);
    let line = out.assert_error(&["disconnected"]);
    assert!(!line.contains("shut down"), "{line}");
    let summary = out.json();
    assert_survivor(&summary, policy);

    // A new publisher takes the key over at once.
    let started = Instant::now();
    let mut config = PublisherConfig::new(key.clone(), PixelFormat::Nv12, 64, 48);
    config.memory = MemoryRequest::Host;
    config.runtime_dir = Some(env.dir().to_owned());
    let mut fresh = Publisher::create(config).expect("a new publisher on the key");
    let took_over = started.elapsed();
    assert!(took_over < Duration::from_millis(500), "took {took_over:?}");
    let mut sub = Subscriber::connect(sub_config(&env, &key, "after")).unwrap();
    let layout = fresh.layout().clone();
    fresh
        .publish_with(0, |planes| pattern::fill_frame(&layout, 0, planes))
        .unwrap();
    assert!(lease_matches(&sub.next(Some(Duration::from_secs(1))).unwrap()));
    eprintln!(
        "publisher killed {point:?} ({}): watcher learnt {detect:?} after the death was seen (kill(2) for the mid-stream case; 0 = before this test saw it); survivor {} frames, {} dropped; trigger: {}; new publisher in {took_over:?}",
        policy.name(),
        uint(&summary, "frames"),
        uint(&summary, "dropped"),
        trigger_result.unwrap_or_else(|| "-".into()),
    );
}

/// Where the subscriber dies.
#[derive(Clone, Copy, Debug)]
enum SubPoint {
    BeforeHello,
    AfterHello,
    AfterAccept,
    HoldingLease,
    /// kill -9 from outside, mid-stream.
    MidStream,
}

/// What the publishing thread reports.
#[derive(Default)]
struct Progress {
    published: AtomicU64,
    subscribers: AtomicUsize,
    slowest_publish_us: AtomicU64,
    stop: AtomicBool,
}

fn subscriber_crash(policy: Policy, point: SubPoint) {
    let env = TestEnv::new();
    let key = env.key(&format!("sc-{}-{point:?}", policy_arg(policy)).to_lowercase());
    let mut config = PublisherConfig::new(key.clone(), PixelFormat::Nv12, 64, 48);
    config.memory = MemoryRequest::Host;
    config.policy = policy;
    config.ack_timeout = Duration::from_secs(30);
    config.ring_size = 4;
    config.runtime_dir = Some(env.dir().to_owned());
    let publisher = Publisher::create(config).expect("publisher");
    let survivor = env.subscribe(&key, "--verify --frames 0 --name survivor --timeout-ms 20000");
    publisher
        .wait_for_subscribers(1, SOCKET_LIMIT)
        .expect("the survivor");

    let progress = Arc::new(Progress::default());
    let worker = {
        let progress = progress.clone();
        let mut publisher = publisher;
        std::thread::spawn(move || {
            let layout = publisher.layout().clone();
            while !progress.stop.load(Ordering::Relaxed) {
                let index = publisher.next_seq() - 1;
                let started = Instant::now();
                publisher
                    .publish_with(index as i64, |planes| pattern::fill_frame(&layout, index, planes))
                    .expect("publish");
                progress
                    .slowest_publish_us
                    .fetch_max(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                progress
                    .subscribers
                    .store(publisher.subscriber_count(), Ordering::Relaxed);
                progress.published.store(index + 1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(500));
            }
            publisher
        })
    };
    wait_until(SOCKET_LIMIT, "20 frames", || {
        progress.published.load(Ordering::Relaxed) >= 20
    });

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
    if let Some(h) = hook {
        cmd.env("CUFRAMES_TEST_ABORT_AT", h);
    }
    let mut victim = Proc::spawn("victim", cmd);
    let died_at = match point {
        SubPoint::MidStream => {
            wait_until(SOCKET_LIMIT, "the victim to join", || {
                progress.subscribers.load(Ordering::Relaxed) == 2
            });
            let at = progress.published.load(Ordering::Relaxed);
            wait_until(SOCKET_LIMIT, "50 frames with the victim", || {
                progress.published.load(Ordering::Relaxed) >= at + 50
            });
            victim.kill9();
            let (out, seen) = reap(victim, EXIT_LIMIT);
            assert_eq!(out.status.signal(), Some(9), "{out}");
            seen
        }
        _ => {
            let (out, seen) = reap(victim, EXIT_LIMIT);
            assert_eq!(out.status.signal(), Some(9), "the hook kills the victim: {out}");
            seen
        }
    };
    // Its bit is reclaimed at once: only the survivor's (bit 1) is left.
    let reclaimed = wait_until(Duration::from_secs(1), "the victim's bit to be reclaimed", || {
        progress.subscribers.load(Ordering::Relaxed) == 1 && header_state(&env, &key).1 == 0b10
    });
    let at = progress.published.load(Ordering::Relaxed);
    wait_until(Duration::from_secs(10), "200 more frames", || {
        progress.published.load(Ordering::Relaxed) >= at + 200
    });
    progress.stop.store(true, Ordering::Relaxed);
    let publisher = worker.join().expect("publishing thread");
    let published = publisher.next_seq() - 1;
    assert_eq!(publisher.stats().ack_timeouts, 0, "no ACK timeout was needed");
    let slowest = Duration::from_micros(progress.slowest_publish_us.load(Ordering::Relaxed));
    assert!(slowest < Duration::from_secs(1), "a publish took {slowest:?}");
    publisher
        .flush(Duration::from_secs(5))
        .expect("survivor releases everything");
    drop(publisher); // SHUTDOWN

    let out = survivor.wait(EXIT_LIMIT);
    let summary = out.assert_success().json();
    match policy {
        Policy::StrictWait => assert_all_verified(&summary, 1, published),
        Policy::DropOldest => assert_survivor(&summary, policy),
    }
    eprintln!(
        "subscriber killed {point:?} ({}): bit reclaimed {reclaimed:?} after its death was seen ({:?} ago); survivor {} of {published} frames, slowest publish {slowest:?}",
        policy.name(),
        died_at.elapsed(),
        uint(&summary, "frames"),
    );
}

macro_rules! matrix {
    ($($name:ident: $f:ident($policy:ident, $point:expr);)*) => {
        $(
            #[test]
            fn $name() {
                let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
                $f(Policy::$policy, $point);
            }
        )*
    };
}

/// The cases run one at a time: the 50 ms detection bound is about the
/// library, not about a 2-core machine running ten process trees at once.
static SERIAL: Mutex<()> = Mutex::new(());

matrix! {
    publisher_dies_on_hello_drop_oldest: publisher_crash(DropOldest, PubPoint::GotHello);
    publisher_dies_on_hello_strict_wait: publisher_crash(StrictWait, PubPoint::GotHello);
    publisher_dies_on_subscribe_drop_oldest: publisher_crash(DropOldest, PubPoint::GotSubscribe);
    publisher_dies_on_subscribe_strict_wait: publisher_crash(StrictWait, PubPoint::GotSubscribe);
    publisher_dies_after_accept_drop_oldest: publisher_crash(DropOldest, PubPoint::AfterAccept);
    publisher_dies_after_accept_strict_wait: publisher_crash(StrictWait, PubPoint::AfterAccept);
    publisher_dies_mid_publish_drop_oldest: publisher_crash(DropOldest, PubPoint::MidPublish);
    publisher_dies_mid_publish_strict_wait: publisher_crash(StrictWait, PubPoint::MidPublish);
    publisher_killed_while_lease_held_drop_oldest: publisher_crash(DropOldest, PubPoint::MidStreamHoldingLease);
    publisher_killed_while_lease_held_strict_wait: publisher_crash(StrictWait, PubPoint::MidStreamHoldingLease);
    subscriber_dies_before_hello_drop_oldest: subscriber_crash(DropOldest, SubPoint::BeforeHello);
    subscriber_dies_before_hello_strict_wait: subscriber_crash(StrictWait, SubPoint::BeforeHello);
    subscriber_dies_after_hello_drop_oldest: subscriber_crash(DropOldest, SubPoint::AfterHello);
    subscriber_dies_after_hello_strict_wait: subscriber_crash(StrictWait, SubPoint::AfterHello);
    subscriber_dies_after_accept_drop_oldest: subscriber_crash(DropOldest, SubPoint::AfterAccept);
    subscriber_dies_after_accept_strict_wait: subscriber_crash(StrictWait, SubPoint::AfterAccept);
    subscriber_dies_holding_a_lease_drop_oldest: subscriber_crash(DropOldest, SubPoint::HoldingLease);
    subscriber_dies_holding_a_lease_strict_wait: subscriber_crash(StrictWait, SubPoint::HoldingLease);
    subscriber_killed_mid_stream_drop_oldest: subscriber_crash(DropOldest, SubPoint::MidStream);
    subscriber_killed_mid_stream_strict_wait: subscriber_crash(StrictWait, SubPoint::MidStream);
}
