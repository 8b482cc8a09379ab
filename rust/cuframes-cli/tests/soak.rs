//! Soak: a publisher in this process publishes small frames (64x64, as
//! fast as it can) while `cuframes subscribe --verify` processes join,
//! leave and are killed with SIGKILL at random. A strict-wait phase, then a
//! drop-oldest phase, until 1,000,000 frames flowed or the time is up.
//!
//! Asserts: 0 mismatched frames in every summary; under strict-wait a
//! sequential subscriber that finishes lost nothing; the publisher never
//! waited longer than its ACK timeout; at the end no subscriber bit is set
//! and this process has the descriptors, shared mappings and threads it had
//! before.
//!
//! `CUFRAMES_SOAK_SECS` (default 100) bounds the run; set it to run longer:
//! then it runs for that long instead of stopping at 1M frames.
//! `CUFRAMES_SOAK_SEED` replays a run's random choices.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{EXIT_LIMIT, Proc, TestEnv, uint, wait_until};
use cuframes::{MemoryRequest, PixelFormat, Policy, Publisher, PublisherConfig, pattern};

const FRAME_TARGET: u64 = 1_000_000;
const ACK_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_SUBSCRIBERS: usize = 4;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    fds: usize,
    shared_maps: usize,
    threads: usize,
}

fn counts() -> Counts {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    Counts {
        fds: std::fs::read_dir("/proc/self/fd").unwrap().count(),
        shared_maps: maps
            .lines()
            .filter(|l| l.contains("cuframes") || l.contains("memfd:"))
            .count(),
        threads: std::fs::read_dir("/proc/self/task").unwrap().count(),
    }
}

#[derive(Default, Debug)]
struct Tally {
    spawned: u64,
    finished: u64,
    killed: u64,
    frames_read: u64,
    verified: u64,
}

struct Child {
    proc: Proc,
    sequential: bool,
    frames: u64,
}

/// Reaps a subscriber that exited by itself and checks its summary.
fn check_finished(child: Child, policy: Policy, tally: &mut Tally) {
    let out = child.proc.wait(EXIT_LIMIT);
    let summary = out.json();
    assert_eq!(uint(&summary, "mismatched"), 0, "{out}");
    tally.frames_read += uint(&summary, "frames");
    tally.verified += uint(&summary, "verified");
    if out.status.success() {
        tally.finished += 1;
        assert_eq!(uint(&summary, "frames"), child.frames, "{out}");
        if policy == Policy::StrictWait && child.sequential {
            assert_eq!(uint(&summary, "dropped"), 0, "strict-wait loses nothing: {out}");
            assert_eq!(
                uint(&summary, "last_seq") - uint(&summary, "first_seq") + 1,
                child.frames,
                "{out}"
            );
        }
    } else {
        // Only an ACK timeout may end a subscriber early; never a mismatch.
        let error = summary["error"].as_str().unwrap_or_default().to_owned();
        assert!(error.contains("ACK") || error.contains("disconnected"), "{out}");
        tally.finished += 1;
    }
}

/// One phase: returns frames published.
fn phase(env: &TestEnv, policy: Policy, until: Instant, frame_goal: u64, rng: &mut Rng) -> u64 {
    let key = env.key(&format!("soak-{}", policy.name()));
    let publisher = soak_publisher(env, &key, policy);
    // The publisher's own threads and descriptors included, the worker not
    // (it is joined before the count after).
    let before = counts();

    let stop = Arc::new(AtomicBool::new(false));
    let published = Arc::new(AtomicU64::new(0));
    let slowest_us = Arc::new(AtomicU64::new(0));
    let worker = publish_flat_out(publisher, stop.clone(), published.clone(), slowest_us.clone());
    let started = Instant::now();
    let tally = churn(env, &key, policy, rng, || {
        Instant::now() < until && published.load(Ordering::Relaxed) < frame_goal
    });
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let publisher = worker.join().expect("the publisher never fails");
    wait_reclaimed(env, &key, &publisher, before);
    let after = counts();
    let frames = publisher.next_seq() - 1;
    let slowest = Duration::from_micros(slowest_us.load(Ordering::Relaxed));
    eprintln!(
        "soak {}: {frames} frames in {took:.1?} ({:.0} fps); subscribers {tally:?}; ACK timeouts {}; slowest publish {slowest:?}; before {before:?} after {after:?}",
        policy.name(),
        frames as f64 / took.as_secs_f64(),
        publisher.stats().ack_timeouts,
    );
    assert_eq!(after, before, "leak in the publisher's process");
    assert!(
        slowest <= ACK_TIMEOUT + Duration::from_millis(500),
        "a publish waited {slowest:?} (ACK timeout {ACK_TIMEOUT:?})"
    );
    assert!(
        tally.spawned >= 3 && tally.killed >= 1,
        "churn happened: {tally:?}"
    );
    frames
}

/// A 64x64 NV12 host-memory publisher of `key` under `policy`, ring 4.
fn soak_publisher(env: &TestEnv, key: &str, policy: Policy) -> Publisher {
    let mut config = PublisherConfig::new(key.to_owned(), PixelFormat::Nv12, 64, 64);
    config.memory = MemoryRequest::Host;
    config.policy = policy;
    config.ack_timeout = ACK_TIMEOUT;
    config.ring_size = 4;
    config.runtime_dir = Some(env.dir().to_owned());
    Publisher::create(config).expect("publisher")
}

/// A thread publishing pattern frames as fast as it can until `stop`,
/// counting them in `published` and keeping the slowest publish in
/// `slowest_us`; it hands the publisher back.
fn publish_flat_out(
    mut publisher: Publisher,
    stop: Arc<AtomicBool>,
    published: Arc<AtomicU64>,
    slowest_us: Arc<AtomicU64>,
) -> std::thread::JoinHandle<Publisher> {
    std::thread::spawn(move || {
        let layout = publisher.layout().clone();
        while !stop.load(Ordering::Relaxed) {
            let index = publisher.next_seq() - 1;
            let t = Instant::now();
            publisher
                .publish_with(index as i64, |planes| pattern::fill_frame(&layout, index, planes))
                .expect("publish");
            slowest_us.fetch_max(t.elapsed().as_micros() as u64, Ordering::Relaxed);
            published.store(index + 1, Ordering::Relaxed);
        }
        publisher
    })
}

/// Subscriber processes of `key` join, leave and are killed at random
/// while `go_on` says so (every 10-100 ms: reap those that left, then
/// maybe spawn one, maybe kill one); then the rest are killed.
fn churn(env: &TestEnv, key: &str, policy: Policy, rng: &mut Rng, mut go_on: impl FnMut() -> bool) -> Tally {
    let mut children: Vec<Child> = Vec::new();
    let mut tally = Tally::default();
    while go_on() {
        reap_finished(&mut children, policy, &mut tally);
        match rng.below(10) {
            0..=3 if children.len() < MAX_SUBSCRIBERS => {
                children.push(spawn_subscriber(env, key, rng));
                tally.spawned += 1;
            }
            4 | 5 if !children.is_empty() => kill_one(&mut children, rng, &mut tally),
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(10 + rng.below(90)));
    }
    for mut child in children.drain(..) {
        child.proc.kill9();
        let _ = child.proc.wait(EXIT_LIMIT);
        tally.killed += 1;
    }
    tally
}

/// Reaps (and checks) the subscribers that left on their own.
fn reap_finished(children: &mut Vec<Child>, policy: Policy, tally: &mut Tally) {
    let mut i = 0;
    while i < children.len() {
        if children[i].proc.is_running() {
            i += 1;
        } else {
            check_finished(children.swap_remove(i), policy, tally);
        }
    }
}

/// `cuframes subscribe --verify` of a random number of frames, sequential
/// (3 in 4) or latest, half of them reading the slots in place.
fn spawn_subscriber(env: &TestEnv, key: &str, rng: &mut Rng) -> Child {
    let sequential = rng.below(4) != 0;
    let frames = 200 + rng.below(20_000);
    let mode = if sequential { "sequential" } else { "latest" };
    // Half of them read the slots in place, half as the defaults
    // do (copies and read-ahead under drop_oldest).
    let copy = if rng.below(2) == 0 {
        "--copy never --read-ahead 0"
    } else {
        ""
    };
    let options = format!("--verify --frames {frames} --mode {mode} --timeout 10s {copy}");
    Child {
        proc: env.subscribe(key, &options),
        sequential,
        frames,
    }
}

/// kill -9 of a random subscriber; one that finished just before the
/// signal must have mismatched nothing.
fn kill_one(children: &mut Vec<Child>, rng: &mut Rng, tally: &mut Tally) {
    let at = rng.below(children.len() as u64) as usize;
    let mut child = children.swap_remove(at);
    child.proc.kill9();
    let out = child.proc.wait(EXIT_LIMIT);
    if out.status.code().is_some() {
        // It finished just before the signal.
        let summary = out.json();
        assert_eq!(uint(&summary, "mismatched"), 0, "{out}");
    } else {
        tally.killed += 1;
    }
}

/// Waits (5 s each) until every subscriber bit is reclaimed and this
/// process is back to the descriptors, mappings and threads of `before`.
fn wait_reclaimed(env: &TestEnv, key: &str, publisher: &Publisher, before: Counts) {
    wait_until(Duration::from_secs(5), "every subscriber bit reclaimed", || {
        publisher.subscriber_count() == 0
            && cuframes::inspect::inspect(key, Some(env.dir()))
                .ok()
                .and_then(|i| i.header)
                .is_some_and(|h| h.subscriber_bitmap == 0)
    });
    wait_until(
        Duration::from_secs(5),
        "descriptors and threads back to where they were",
        || {
            let now = counts();
            now.fds <= before.fds && now.shared_maps <= before.shared_maps && now.threads <= before.threads
        },
    );
}

#[test]
fn soak_with_subscribers_joining_leaving_and_killed() {
    let env = TestEnv::new();
    let explicit = std::env::var("CUFRAMES_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let secs = explicit.unwrap_or(100);
    let goal = if explicit.is_some() {
        u64::MAX
    } else {
        FRAME_TARGET
    };
    let seed = std::env::var("CUFRAMES_SOAK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("soak: {secs} s, seed {seed} (CUFRAMES_SOAK_SEED replays it)");
    let mut rng = Rng(seed);
    let start = Instant::now();
    let total = Duration::from_secs(secs);
    // A fifth of the time under strict-wait (paced by the slowest reader),
    // the rest under drop-oldest until the goal.
    let strict = phase(&env, Policy::StrictWait, start + total / 5, goal / 5, &mut rng);
    let drop = phase(
        &env,
        Policy::DropOldest,
        start + total,
        goal.saturating_sub(strict),
        &mut rng,
    );
    eprintln!(
        "soak: {} frames in {:.1?} ({strict} strict-wait, {drop} drop-oldest)",
        strict + drop,
        start.elapsed()
    );
    assert!(strict + drop >= 100_000, "frames flowed");
}
