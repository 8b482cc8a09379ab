//! Crashes and signals: kill -9 of a publisher or a subscriber, SIGTERM of a
//! publisher.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{EXIT_LIMIT, Proc, TestEnv, assert_all_verified, shm_path, uint, wait_until};
use cuframes::{MemoryRequest, PixelFormat, Policy, Publisher, PublisherConfig, pattern};
use nix::sys::signal::Signal;

/// `global_seq` and active subscriber count of `key`, read from its shared header.
fn header_state(env: &TestEnv, key: &str) -> (u64, usize) {
    match cuframes::inspect::inspect(key, Some(env.dir())) {
        Ok(ins) => match &ins.header {
            Some(h) => (h.global_seq, (h.subscriber_bitmap as u32).count_ones() as usize),
            None => (0, 0),
        },
        Err(_) => (0, 0),
    }
}

/// kill -9 of the publisher: a running subscriber notices within a second
/// (exit 1, "disconnected"), and a new publisher takes the key over.
#[test]
fn publisher_kill9_disconnects_subscriber_and_key_is_reusable() {
    let env = TestEnv::new();
    let key = env.key("crash-pub");
    let mut publisher = env.start_publisher(&key, "--size 160x120 --fps 200 --frames 0 --ring 4");
    let subscriber = env.subscribe(&key, "--verify --frames 0");
    wait_until(common::SOCKET_LIMIT, "a subscriber and 20 frames", || {
        let (seq, subs) = header_state(&env, &key);
        subs == 1 && seq >= 20
    });

    publisher.kill9();
    let killed_at = Instant::now();
    let mut subscriber = subscriber;
    let sub = subscriber
        .wait_within(Duration::from_secs(1))
        .unwrap_or_else(|out| panic!("subscriber still running 1 s after the publisher's SIGKILL: {out}"));
    let took = killed_at.elapsed();
    assert!(took < Duration::from_secs(1), "subscriber took {took:?}");
    let line = sub.assert_error(&["disconnected"]);
    assert!(!line.contains("shut down"), "a crash is not a shutdown: {line}");
    let summary = sub.json();
    assert!(uint(&summary, "frames") >= 1, "{summary}");
    assert_eq!(uint(&summary, "mismatched"), 0, "{summary}");
    assert_eq!(uint(&summary, "verified"), uint(&summary, "frames"), "{summary}");
    assert!(
        summary["error"]
            .as_str()
            .is_some_and(|e| e.contains("disconnected")),
        "{summary}"
    );
    let killed = publisher.wait(EXIT_LIMIT);
    assert_eq!(killed.status.signal(), Some(9), "{killed}");
    // The dead publisher's files are still there: the new one must recover them.
    assert!(
        env.socket(&key).exists(),
        "a SIGKILLed publisher cannot remove its socket"
    );
    assert!(
        shm_path(&key).exists(),
        "a SIGKILLed publisher cannot remove its shared memory"
    );

    let publisher = env.start_publisher(
        &key,
        "--size 160x120 --fps 0 --frames 50 --policy strict-wait --wait-subscribers 1",
    );
    let summary = env
        .subscribe(&key, "--verify --frames 50")
        .wait(EXIT_LIMIT)
        .assert_success()
        .json();
    assert_all_verified(&summary, 1, 50);
    publisher.wait(EXIT_LIMIT).assert_success();
    assert!(!env.socket(&key).exists() && !shm_path(&key).exists());
}

/// What the publishing thread reports while it runs.
#[derive(Default)]
struct Progress {
    published: AtomicU64,
    subscribers: AtomicUsize,
    slowest_publish_us: AtomicU64,
    stop: AtomicBool,
}

/// kill -9 of one of two strict-wait subscribers: the publisher drops it at
/// once (not after its 30 s ACK timeout), keeps publishing, and the other
/// subscriber gets every frame and ends cleanly on SHUTDOWN.
#[test]
fn subscriber_kill9_is_dropped_at_once() {
    let env = TestEnv::new();
    let key = env.key("crash-sub");
    let publisher = strict_wait_publisher(&env, &key);
    let mut victim = env.subscribe(&key, "--verify --frames 0 --name victim");
    let survivor = env.subscribe(&key, "--verify --frames 0 --name survivor");
    publisher
        .wait_for_subscribers(2, common::SOCKET_LIMIT)
        .expect("two subscribers");

    let progress = Arc::new(Progress::default());
    let worker = publish_reporting(publisher, progress.clone());
    wait_until(common::SOCKET_LIMIT, "100 frames to both subscribers", || {
        progress.published.load(Ordering::Relaxed) >= 100
    });
    assert_eq!(progress.subscribers.load(Ordering::Relaxed), 2);
    kill_and_see_it_dropped(&mut victim, &progress);

    progress.stop.store(true, Ordering::Relaxed);
    let publisher = worker.join().expect("publishing thread");
    let published = publisher.next_seq() - 1;
    assert_never_waited_for_the_dead(&publisher, &progress);
    publisher
        .flush(Duration::from_secs(5))
        .expect("survivor releases every frame");
    drop(publisher); // SHUTDOWN

    let out = survivor.wait(EXIT_LIMIT);
    let summary = out.assert_success().json();
    assert_all_verified(&summary, 1, published);
    let victim = victim.wait(EXIT_LIMIT);
    assert_eq!(victim.status.signal(), Some(9), "{victim}");
    assert!(!env.socket(&key).exists() && !shm_path(&key).exists());
}

/// A 160x120 NV12 host-memory strict-wait publisher (ACK timeout 30 s,
/// ring 4).
fn strict_wait_publisher(env: &TestEnv, key: &str) -> Publisher {
    let mut config = PublisherConfig::new(key.to_owned(), PixelFormat::Nv12, 160, 120);
    config.memory = MemoryRequest::Host;
    config.policy = Policy::StrictWait;
    config.ack_timeout = Duration::from_secs(30);
    config.ring_size = 4;
    config.runtime_dir = Some(env.dir().to_owned());
    Publisher::create(config).expect("publisher")
}

/// A thread publishing pattern frames every 0.5 ms until `progress.stop`,
/// reporting in `progress` what it published, its subscribers and its
/// slowest publish; it hands the publisher back.
fn publish_reporting(
    mut publisher: Publisher,
    progress: Arc<Progress>,
) -> std::thread::JoinHandle<Publisher> {
    std::thread::spawn(move || {
        let layout = publisher.layout().clone();
        while !progress.stop.load(Ordering::Relaxed) {
            let index = publisher.next_seq() - 1;
            let started = Instant::now();
            let seq = publisher
                .publish_with(index as i64 * 1000, |planes| {
                    pattern::fill_frame(&layout, index, planes)
                })
                .expect("publish");
            let took = started.elapsed().as_micros() as u64;
            assert_eq!(seq, index + 1);
            progress.slowest_publish_us.fetch_max(took, Ordering::Relaxed);
            progress
                .subscribers
                .store(publisher.subscriber_count(), Ordering::Relaxed);
            progress.published.store(seq, Ordering::Relaxed);
            std::thread::sleep(Duration::from_micros(500));
        }
        publisher
    })
}

/// kill -9 of the victim: the publisher drops it within a second and
/// publishes 200 more frames.
fn kill_and_see_it_dropped(victim: &mut Proc, progress: &Progress) {
    victim.kill9();
    let killed_at = Instant::now();
    let took = wait_until(
        Duration::from_secs(1),
        "the publisher to drop the killed subscriber",
        || progress.subscribers.load(Ordering::Relaxed) == 1,
    );
    let at_drop = progress.published.load(Ordering::Relaxed);
    wait_until(Duration::from_secs(5), "200 more frames after the kill", || {
        progress.published.load(Ordering::Relaxed) >= at_drop + 200
    });
    eprintln!(
        "killed subscriber dropped after {took:?} ({:?} since kill)",
        killed_at.elapsed()
    );
}

/// The stopped publisher kept the survivor, needed no ACK timeout for the
/// killed subscriber, and no publish took a second.
fn assert_never_waited_for_the_dead(publisher: &Publisher, progress: &Progress) {
    assert_eq!(publisher.subscriber_count(), 1);
    assert_eq!(
        publisher.stats().ack_timeouts,
        0,
        "the killed subscriber must not wait for a timeout"
    );
    let slowest = Duration::from_micros(progress.slowest_publish_us.load(Ordering::Relaxed));
    assert!(
        slowest < Duration::from_secs(1),
        "a publish call took {slowest:?}"
    );
}

/// SIGTERM: the publisher shuts down cleanly (exit 0, SHUTDOWN to its
/// subscriber, socket, lock and shared memory removed).
#[test]
fn publisher_sigterm_shuts_down_cleanly() {
    let env = TestEnv::new();
    let key = env.key("crash-term");
    let publisher = env.start_publisher(
        &key,
        "--size 160x120 --fps 200 --frames 0 --policy strict-wait --wait-subscribers 1",
    );
    let subscriber = env.subscribe(&key, "--verify --frames 0");
    wait_until(common::SOCKET_LIMIT, "a subscriber and 10 frames", || {
        let (seq, subs) = header_state(&env, &key);
        subs == 1 && seq >= 10
    });
    assert!(shm_path(&key).exists());

    publisher.signal(Signal::SIGTERM);
    let out = publisher.wait(EXIT_LIMIT);
    out.assert_success();
    assert!(out.stderr.contains("published "), "{out}");
    assert!(!env.socket(&key).exists(), "socket left behind");
    assert!(!env.lock(&key).exists(), "lock left behind");
    assert!(!shm_path(&key).exists(), "shared memory left behind");
    let leftovers: Vec<_> = std::fs::read_dir(env.dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(leftovers.is_empty(), "runtime dir not empty: {leftovers:?}");

    let sub = subscriber.wait(EXIT_LIMIT);
    let summary = sub.assert_success().json();
    // Strict-wait from the first frame: a gapless run 1..=n, however far it got.
    let frames = uint(&summary, "frames");
    assert!(frames >= 9, "{summary}");
    assert_all_verified(&summary, 1, frames);
}
