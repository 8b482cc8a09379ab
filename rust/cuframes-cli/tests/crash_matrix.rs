//! The crash matrix, over memory kind: kill -9 of the publisher and of a
//! subscriber at each point of the handshake and mid-stream, under both
//! policies, with real processes (`cuframes publish` / `cuframes subscribe
//! --verify --json`), in host memory and in CUDA memory shared as file
//! descriptors and as IPC handles. One case list (`matrix!` at the end)
//! makes one test per (case, memory):
//!
//! - `host::<case>`: host memory; runs everywhere.
//! - `needs_gpu::cuda_fd::<case>`, `needs_gpu::cuda_ipc::<case>`: `--memory
//!   cuda --cuda-share fd|ipc`. They need an NVIDIA GPU: ignored by default,
//!   run on the GPU machine by `scripts/gpu-test.sh run crash` (`--ignored`,
//!   one at a time). Without a GPU every one fails at once, saying that
//!   `cuframes publish --memory cuda` could not start.
//!
//! Handshake points use the test-only hook `CUFRAMES_TEST_ABORT_AT`
//! (`rust/cuframes/src/testhook.rs`): the process raises SIGKILL on itself
//! at that step. Every case asserts what `docs/reliability.md` promises:
//! survivors see 0 mismatched frames and, under strict-wait, lose none; a
//! subscriber learns of a dead publisher at once; a new publisher takes the
//! key at once; a killed subscriber's bit and slot are reclaimed at once,
//! without waiting for the ACK timeout (30 s here).
//!
//! What differs with the memory kind is what the test can look at from
//! inside: with host memory it reads frames itself, so it also watches from
//! inside the test process (an in-process subscriber that must learn of a
//! dead publisher within 50 ms and whose held lease must stay readable, an
//! in-process connecting subscriber, an in-process new publisher, and in the
//! subscriber cases an in-process publisher whose every publish and ACK
//! timeout it counts). With CUDA memory everything is a `cuframes` process
//! (1280x720 at 300 fps: the survivor's exit, the connecting subscriber's
//! error, a new CUDA publisher verified by a fresh subscriber, a publisher
//! that ends in its nominal time).

mod common;

use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{EXIT_LIMIT, Proc, SOCKET_LIMIT, TestEnv, assert_all_verified, uint, wait_until};
use cuframes::inspect::SubscriberView;
use cuframes::{
    ErrorKind, FrameLease, MemoryRequest, PixelFormat, Policy, Publisher, PublisherConfig, Subscriber,
    SubscriberConfig, pattern,
};
use serde_json::Value;

/// Ring size of every stream here.
const RING: usize = 4;
/// The publishers' ACK timeout: far longer than any case, so waiting for it
/// shows.
const ACK_TIMEOUT_MS: u64 = 30_000;
/// The `cuframes subscribe` processes of the matrix read the slots in place,
/// one frame at a time (`--copy never --read-ahead 0`, the CLI's defaults
/// before they became the input device's): the cases are about crashes, and
/// were measured and bounded that way.
const SURVIVOR: &str = "--verify --frames 0 --name survivor --timeout 20s --copy never --read-ahead 0";
const TRIGGER: &str = "--verify --frames 0 --name trigger --timeout 20s --copy never --read-ahead 0";
/// How fast an in-process subscriber must learn that its publisher died.
const DETECT_LIMIT: Duration = Duration::from_millis(50);
/// How long after the publisher's death a survivor process may take to exit
/// (noticing the death; with CUDA memory also closing its mappings and
/// tearing CUDA down); its `--timeout` is 20 s, so a survivor that waited
/// for frames would not make it.
const SURVIVOR_EXIT_LIMIT: Duration = Duration::from_secs(5);
/// How long after the publisher's death a subscriber process caught in its
/// handshake may take to fail: below its 5 s handshake timeout.
const TRIGGER_EXIT_LIMIT: Duration = Duration::from_secs(4);
/// How long a CUDA subscriber process may take to start and read its first
/// frames (process start, CUDA initialisation, handles opened).
const READY_LIMIT: Duration = Duration::from_secs(10);
/// Frames of the CUDA publisher in the subscriber cases (4 s at 300 fps).
const CUDA_SUB_FRAMES: u64 = 1200;
/// The test hook's environment variable.
const ABORT_AT: &str = "CUFRAMES_TEST_ABORT_AT";

/// Where the frames live, and how the publisher shares them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Memory {
    Host,
    CudaFd,
    CudaIpc,
}

impl Memory {
    fn publish_options(self) -> &'static str {
        match self {
            Memory::Host => "--memory host",
            Memory::CudaFd => "--memory cuda --cuda-share fd",
            Memory::CudaIpc => "--memory cuda --cuda-share ipc",
        }
    }

    /// Frame size (NV12, the CLI's default format) and rate.
    fn stream_options(self) -> &'static str {
        match self {
            Memory::Host => "--size 64x48 --fps 1000",
            Memory::CudaFd | Memory::CudaIpc => "--size 1280x720 --fps 300",
        }
    }

    /// The publish (seq) at which `pub-mid-publish` kills the publisher. On
    /// CUDA, 2 s at 300 fps: time for a drop-oldest survivor to open its
    /// slots and read frames before the death. There the slot is marked
    /// "being written" with the previous frame's host-to-device copy and
    /// event record queued on the publisher's stream, unsynchronised.
    fn mid_publish_at(self) -> u64 {
        match self {
            Memory::Host => 300,
            Memory::CudaFd | Memory::CudaIpc => 600,
        }
    }

    /// Key tag.
    fn tag(self) -> &'static str {
        match self {
            Memory::Host => "h",
            Memory::CudaFd => "fd",
            Memory::CudaIpc => "ipc",
        }
    }

    /// With host memory the test process itself subscribes, connects and
    /// publishes beside the `cuframes` processes (see the module's doc).
    fn in_process(self) -> bool {
        self == Memory::Host
    }

    /// Asserts the memory and CUDA sharing a subscriber's summary reports.
    fn check(self, summary: &Value) {
        let (memory, share) = match self {
            Memory::Host => ("host", None),
            Memory::CudaFd => ("cuda", Some("fd")),
            Memory::CudaIpc => ("cuda", Some("ipc")),
        };
        assert_eq!(summary["memory"], memory, "{self:?}: {summary}");
        match share {
            Some(share) => assert_eq!(summary["cuda_share"], share, "{self:?}: {summary}"),
            None => assert!(summary["cuda_share"].is_null(), "{self:?}: {summary}"),
        }
    }
}

/// `cuframes publish KEY <memory> <options>`, with the test hook set to
/// `hook` when given; waits until its socket accepts connections (a bare
/// connection, no HELLO: it does not count for the hook). Returns the
/// publisher and how long it took to start. Fails at once when the
/// publisher exits first (for CUDA: no GPU, no driver).
fn start_publisher(
    env: &TestEnv,
    key: &str,
    memory: Memory,
    options: &str,
    hook: Option<&str>,
) -> (Proc, Duration) {
    let mut args = vec!["publish", key];
    args.extend(memory.publish_options().split_whitespace());
    args.extend(options.split_whitespace());
    let mut cmd = env.command(&args);
    if let Some(hook) = hook {
        cmd.env(ABORT_AT, hook);
    }
    let started = Instant::now();
    let mut publisher = Proc::spawn(&format!("publish {key} ({memory:?})"), cmd);
    let socket = env.socket(key);
    loop {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            return (publisher, started.elapsed());
        }
        if !publisher.is_running() {
            let out = publisher.wait(EXIT_LIMIT);
            panic!(
                "`cuframes publish {}` exited before its socket appeared{}: {out}",
                memory.publish_options(),
                if memory.in_process() {
                    ""
                } else {
                    " (these tests need an NVIDIA GPU and its driver)"
                }
            );
        }
        assert!(
            started.elapsed() < SOCKET_LIMIT,
            "the publisher's socket {} did not appear within {SOCKET_LIMIT:?}",
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

fn bitmap(env: &TestEnv, key: &str) -> u64 {
    header_state(env, key).map_or(0, |(_, bitmap)| bitmap)
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

/// A survivor's summary: the stream's memory, nothing mismatched; under
/// strict-wait nothing lost either (a gapless run of seqs, every frame
/// verified). Under drop-oldest a frame overwritten while it was read (the
/// survivor reads in place: a CUDA frame of 1280x720 takes a while to
/// check, and a host one does too on a loaded machine) is counted, not
/// judged (`docs/cli.md`).
fn assert_survivor(memory: Memory, summary: &Value, policy: Policy) {
    memory.check(summary);
    assert_eq!(uint(summary, "mismatched"), 0, "{summary}");
    assert!(uint(summary, "frames") >= 1, "{summary}");
    assert!(uint(summary, "verified") >= 1, "{summary}");
    if policy == Policy::StrictWait {
        assert_eq!(uint(summary, "verified"), uint(summary, "frames"), "{summary}");
    } else {
        assert!(
            uint(summary, "verified") + uint(summary, "overwritten") >= uint(summary, "frames"),
            "every frame not verified was overwritten while read: {summary}"
        );
    }
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

fn sub_config(env: &TestEnv, key: &str, name: &str) -> SubscriberConfig {
    let mut c = SubscriberConfig::new(key);
    c.name = name.into();
    c.runtime_dir = Some(env.dir().to_owned());
    // The slots themselves, read when the test says (not the defaults, D39).
    c.copy = cuframes::CopyMode::Never;
    c.read_ahead = 0;
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

/// An in-process subscriber (host memory) that reads (and, when `hold` is
/// set, keeps the first lease it gets) until its publisher goes away;
/// returns when it learnt, how many frames matched and how many intact ones
/// did not, after checking that a held lease stayed readable and
/// intact-or-detected after the death.
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PubPoint {
    /// HELLO_REQ of the connecting subscriber received, no HELLO_RESP.
    GotHello,
    /// SUBSCRIBE_REQ of the connecting subscriber received, no
    /// SUBSCRIBE_RESP.
    GotSubscribe,
    /// SUBSCRIBE_RESP and descriptors sent to the connecting subscriber, no
    /// frame for it yet.
    AfterAccept,
    /// Half-way into writing a slot (its seq marked "being written").
    MidPublish,
    /// kill -9 from outside mid-stream (with host memory, while the
    /// in-process watcher holds a lease).
    Killed,
}

impl PubPoint {
    /// The hook that kills the publisher, `nth` being the handshake of the
    /// connecting subscriber (the ones before it come first).
    fn hook(self, nth: usize, memory: Memory) -> Option<String> {
        match self {
            PubPoint::GotHello => Some(format!("pub-got-hello:{nth}")),
            PubPoint::GotSubscribe => Some(format!("pub-got-subscribe:{nth}")),
            PubPoint::AfterAccept => Some(format!("pub-after-accept:{nth}")),
            PubPoint::MidPublish => Some(format!("pub-mid-publish:{}", memory.mid_publish_at())),
            PubPoint::Killed => None,
        }
    }

    fn connects(self) -> bool {
        matches!(
            self,
            PubPoint::GotHello | PubPoint::GotSubscribe | PubPoint::AfterAccept
        )
    }
}

/// The subscriber that connects while the publisher dies in its handshake.
enum Trigger {
    None,
    /// In the test process: the result of `connect` and how long it took.
    InProcess(cuframes::Result<Subscriber>, Duration),
    /// A `cuframes subscribe` process.
    Process(Proc),
}

/// One publisher case: the publisher dies at `point` beside a survivor
/// (and, with host memory, an in-process watcher) and, at a handshake
/// point, a connecting subscriber; each learns of it at once, and a new
/// publisher takes the key.
fn publisher_crash(memory: Memory, policy: Policy, point: PubPoint) {
    let env = TestEnv::new();
    let key = env.key(&format!("pc-{}-{}-{point:?}", memory.tag(), policy.name()).to_lowercase());
    let (mut publisher, startup) = start_doomed_publisher(&env, &key, memory, policy, point);
    let (mut survivor, watcher) = start_survivor(&env, &key, memory, point);
    let (mut trigger, killed_at) = bring_death(&env, &key, memory, point, &mut publisher);
    let seen = {
        let mut procs: Vec<&mut Proc> = vec![&mut publisher, &mut survivor];
        if let Trigger::Process(t) = &mut trigger {
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
    // kill(2) for the mid-stream case, else when its exit was seen.
    let death = killed_at.unwrap_or(seen[0]);

    let watcher_note = check_watcher(watcher, death);
    let survivor_exit = seen[1].saturating_duration_since(death);
    let (summary, line) = check_dead_publishers_survivor(memory, policy, survivor, survivor_exit, reap_limit);
    let trigger_note = check_trigger(trigger, &seen, death, reap_limit);
    // A new publisher takes the key over at once, and a fresh subscriber
    // verifies its frames.
    let (took_over, fresh_note) = if memory.in_process() {
        take_over_in_process(&env, &key)
    } else {
        take_over_with_a_process(&env, &key, memory)
    };

    let death_is = if killed_at.is_some() {
        "kill(2)"
    } else {
        "its exit was seen"
    };
    eprintln!(
        "{memory:?} publisher killed {point:?} ({}): survivor exited {survivor_exit:?} after the death ({death_is}), \
         {} frames (seqs {}..{}), {} verified, {} dropped, {} mismatched, error: {line}; watcher: {watcher_note}; \
         trigger: {trigger_note}; new publisher in {took_over:?} (first publisher's socket: {startup:?}); \
         fresh subscriber verified {fresh_note}",
        policy.name(),
        uint(&summary, "frames"),
        uint(&summary, "first_seq"),
        uint(&summary, "last_seq"),
        uint(&summary, "verified"),
        uint(&summary, "dropped"),
        uint(&summary, "mismatched"),
    );
}

/// The publisher of a publisher case, set to die at `point` (by its test
/// hook; `Killed` from outside). Returns it and how long its socket took.
fn start_doomed_publisher(
    env: &TestEnv,
    key: &str,
    memory: Memory,
    policy: Policy,
    point: PubPoint,
) -> (Proc, Duration) {
    // The handshakes before the connecting subscriber's: the survivor's, and
    // with host memory the in-process watcher's.
    let before = if memory.in_process() { 2 } else { 1 };
    let hook = point.hook(before + 1, memory);
    let wait = if point == PubPoint::MidPublish {
        format!(" --wait-subscribers {before}")
    } else {
        String::new()
    };
    let options = format!(
        "{} --frames 0 --ring {RING} --policy {} --ack-timeout {ACK_TIMEOUT_MS}ms{wait}",
        memory.stream_options(),
        policy.name()
    );
    start_publisher(env, key, memory, &options, hook.as_deref())
}

/// The survivor process, and with host memory the in-process watcher (which
/// holds a lease when the publisher is killed from outside), both reading
/// before the death is brought about.
fn start_survivor(env: &TestEnv, key: &str, memory: Memory, point: PubPoint) -> (Proc, Option<Watcher>) {
    let mut survivor = env.subscribe(key, SURVIVOR);
    let watcher = if memory.in_process() {
        wait_until(SOCKET_LIMIT, "the survivor", || {
            bitmap(env, key).count_ones() == 1
        });
        let watcher = Watcher::start(env, key, point == PubPoint::Killed);
        if point != PubPoint::MidPublish {
            watcher.wait_ready();
        }
        Some(watcher)
    } else {
        wait_reading(env, key, "survivor", &mut survivor, 20);
        None
    };
    (survivor, watcher)
}

/// What kills the publisher at `point`: a subscriber connecting (its
/// handshake trips the hook), kill -9 from outside (returns when), or, at
/// `MidPublish`, nothing but its own publishing.
fn bring_death(
    env: &TestEnv,
    key: &str,
    memory: Memory,
    point: PubPoint,
    publisher: &mut Proc,
) -> (Trigger, Option<Instant>) {
    let mut trigger = Trigger::None;
    let mut killed_at = None;
    match point {
        _ if point.connects() => {
            trigger = if memory.in_process() {
                let started = Instant::now();
                let result = Subscriber::connect(sub_config(env, key, "trigger"));
                Trigger::InProcess(result, started.elapsed())
            } else {
                Trigger::Process(env.subscribe(key, TRIGGER))
            };
        }
        PubPoint::Killed => {
            std::thread::sleep(Duration::from_millis(if memory.in_process() { 50 } else { 200 }));
            killed_at = Some(Instant::now());
            publisher.kill9();
        }
        _ => {}
    }
    (trigger, killed_at)
}

/// The in-process watcher (host memory) learnt of the death within
/// DETECT_LIMIT and saw no mismatched frame; its note for the report.
fn check_watcher(watcher: Option<Watcher>, death: Instant) -> String {
    match watcher {
        None => "-".to_owned(),
        Some(watcher) => {
            let (learnt_at, matched, bad) = watcher.join();
            let detect = learnt_at.saturating_duration_since(death);
            assert_eq!(bad, 0, "the watcher saw a mismatched frame");
            assert!(matched >= 1);
            assert!(
                detect < DETECT_LIMIT,
                "the watcher learnt {detect:?} after the death"
            );
            format!("learnt {detect:?} after the death (0 = before this test saw it)")
        }
    }
}

/// The survivor of a dead publisher ended `survivor_exit` after the death
/// with "disconnected" (not a shutdown) and a good summary; returns the
/// summary and its error line.
fn check_dead_publishers_survivor(
    memory: Memory,
    policy: Policy,
    survivor: Proc,
    survivor_exit: Duration,
    reap_limit: Duration,
) -> (Value, String) {
    let out = survivor.wait(reap_limit);
    let line = out.assert_error(&["disconnected"]);
    assert!(!line.contains("shut down"), "a crash is not a SHUTDOWN: {line}");
    let summary = out.json();
    assert_survivor(memory, &summary, policy);
    assert!(
        survivor_exit < SURVIVOR_EXIT_LIMIT,
        "the survivor exited {survivor_exit:?} after the publisher's death: {out}"
    );
    (summary, line)
}

/// The subscriber connecting while the publisher died learnt of the death
/// at once, with a clean error (never a timeout); its note for the report.
/// `seen[2]` is when a trigger process's exit was seen.
fn check_trigger(trigger: Trigger, seen: &[Instant], death: Instant, reap_limit: Duration) -> String {
    match trigger {
        Trigger::None => "-".to_owned(),
        Trigger::InProcess(Err(e), took) => {
            assert!(
                took < Duration::from_secs(1),
                "the connecting subscriber learnt in {took:?} ({e})"
            );
            format!("connect failed in {took:?}: {}", e.kind().describe())
        }
        Trigger::InProcess(Ok(mut sub), _) => {
            // Accepted just before the death: the next call says so.
            let t = Instant::now();
            let err = sub.next(Some(Duration::from_secs(2))).map(|_| ()).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Disconnected, "{err}");
            assert!(t.elapsed() < DETECT_LIMIT, "{:?}", t.elapsed());
            "connected, then DISCONNECTED".to_owned()
        }
        Trigger::Process(t) => {
            let after = seen[2].saturating_duration_since(death);
            let out = t.wait(reap_limit);
            // Refused during the handshake, or accepted and then told
            // DISCONNECTED (when the dead publisher's slots would not open,
            // the subscriber says the publisher went away, not the driver's
            // error): a clean error either way, never a timeout.
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
    }
}

/// Host memory: a new in-process publisher takes the key over at once, and
/// an in-process subscriber verifies its first frame. Returns how long the
/// takeover took and the fresh subscriber's note.
fn take_over_in_process(env: &TestEnv, key: &str) -> (Duration, String) {
    let started = Instant::now();
    let mut config = PublisherConfig::new(key.to_owned(), PixelFormat::Nv12, 64, 48);
    config.memory = MemoryRequest::Host;
    config.runtime_dir = Some(env.dir().to_owned());
    let mut fresh = Publisher::create(config).expect("a new publisher on the key");
    let took_over = started.elapsed();
    assert!(took_over < Duration::from_millis(500), "took {took_over:?}");
    let mut sub = Subscriber::connect(sub_config(env, key, "after")).unwrap();
    let layout = fresh.layout().clone();
    fresh
        .publish_with(0, |planes| pattern::fill_frame(&layout, 0, planes))
        .unwrap();
    assert!(lease_matches(&sub.next(Some(Duration::from_secs(1))).unwrap()));
    (took_over, "1/1".to_owned())
}

/// CUDA memory: a new `cuframes publish` takes the key over, and a fresh
/// `cuframes subscribe` verifies its 20 frames. Returns how long the new
/// publisher's socket took and the fresh subscriber's note.
fn take_over_with_a_process(env: &TestEnv, key: &str, memory: Memory) -> (Duration, String) {
    // Strict-wait whatever the case's policy: a subscriber still opening
    // its slots must not be lapped. The socket comes after CUDA context
    // creation (~200 ms, as at a first start), so no bound here beyond
    // SOCKET_LIMIT.
    let options = format!(
        "{} --frames 20 --ring {RING} --policy strict-wait --wait-subscribers 1",
        memory.stream_options()
    );
    let (fresh, took_over) = start_publisher(env, key, memory, &options, None);
    let after = env.subscribe(key, "--verify --frames 20 --name after");
    let fresh_summary = after.wait(EXIT_LIMIT).assert_success().json();
    memory.check(&fresh_summary);
    assert_all_verified(&fresh_summary, 1, 20);
    fresh.wait(EXIT_LIMIT).assert_success();
    (took_over, format!("{}/20", uint(&fresh_summary, "verified")))
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

impl SubPoint {
    fn hook(self) -> Option<&'static str> {
        match self {
            SubPoint::BeforeHello => Some("sub-before-hello"),
            SubPoint::AfterHello => Some("sub-after-hello"),
            SubPoint::AfterAccept => Some("sub-after-accept"),
            SubPoint::HoldingLease => Some("sub-holding-lease:5"),
            SubPoint::MidStream => None,
        }
    }
}

/// What the in-process publishing thread reports.
#[derive(Default)]
struct Progress {
    published: AtomicU64,
    subscribers: AtomicUsize,
    slowest_publish_us: AtomicU64,
    stop: AtomicBool,
}

/// The publisher of a subscriber case.
enum Publishing {
    /// Host memory: a thread of the test process publishing until told to
    /// stop, every publish timed.
    InProcess {
        worker: std::thread::JoinHandle<Publisher>,
        progress: Arc<Progress>,
    },
    /// CUDA memory: `cuframes publish` with CUDA_SUB_FRAMES frames.
    Process { proc: Proc, startup: Duration },
}

/// One subscriber case: the victim dies at `point` beside a survivor; its
/// slot and bit are freed at once, and the publisher never waits for it.
fn subscriber_crash(memory: Memory, policy: Policy, point: SubPoint) {
    let env = TestEnv::new();
    let key = env.key(&format!("sc-{}-{}-{point:?}", memory.tag(), policy.name()).to_lowercase());
    let started = Instant::now();
    let (publishing, survivor) = if memory.in_process() {
        publish_in_process(&env, &key, policy)
    } else {
        publish_in_a_process(&env, &key, memory, policy)
    };
    let survivor_only = bitmap(&env, &key);
    assert_eq!(
        survivor_only.count_ones(),
        1,
        "only the survivor: {survivor_only:#b}"
    );

    let hook = point.hook();
    let (mut victim, spawned) = spawn_victim(&env, &key, hook);
    let killed_at = if point == SubPoint::MidStream {
        Some(kill_victim_mid_stream(&env, &key, &publishing, &mut victim))
    } else {
        None
    };
    let seen = exits_seen(&mut [&mut victim], EXIT_LIMIT)[0];
    let out = victim.wait(Duration::from_millis(500));
    assert_eq!(
        out.status.signal(),
        Some(9),
        "the victim should have been killed (by the hook {hook:?}, or by the test): {out}"
    );
    let died = killed_at.unwrap_or(seen);
    let victim_life = died.saturating_duration_since(spawned);

    let freed = wait_victim_freed(&env, &key, memory, &publishing, survivor_only);
    // The publisher never waits for the dead subscriber.
    let (summary, published, publisher_note) = match publishing {
        Publishing::InProcess { worker, progress } => finish_in_process(worker, &progress, survivor),
        Publishing::Process { proc, startup } => finish_process(proc, startup, survivor, started),
    };
    check_victims_survivor(memory, policy, &summary, published);
    eprintln!(
        "{memory:?} subscriber killed {point:?} ({}): victim died {victim_life:?} after its start, slot and bit \
         freed {freed:?} after its death was seen; publisher ({publisher_note}, ACK timeout {ACK_TIMEOUT_MS} ms); \
         survivor {} of {published} frames verified, {} dropped, {} mismatched",
        policy.name(),
        uint(&summary, "verified"),
        uint(&summary, "dropped"),
        uint(&summary, "mismatched"),
    );
}

/// Host memory: an in-process publisher under `policy` publishing from a
/// thread, once the survivor process is in and 20 frames are out.
fn publish_in_process(env: &TestEnv, key: &str, policy: Policy) -> (Publishing, Proc) {
    let mut config = PublisherConfig::new(key.to_owned(), PixelFormat::Nv12, 64, 48);
    config.memory = MemoryRequest::Host;
    config.policy = policy;
    config.ack_timeout = Duration::from_millis(ACK_TIMEOUT_MS);
    config.ring_size = RING;
    config.runtime_dir = Some(env.dir().to_owned());
    let publisher = Publisher::create(config).expect("publisher");
    let survivor = env.subscribe(key, SURVIVOR);
    publisher
        .wait_for_subscribers(1, SOCKET_LIMIT)
        .expect("the survivor");
    let progress = Arc::new(Progress::default());
    let worker = spawn_publishing(publisher, progress.clone());
    wait_until(SOCKET_LIMIT, "20 frames", || {
        progress.published.load(Ordering::Relaxed) >= 20
    });
    (Publishing::InProcess { worker, progress }, survivor)
}

/// The in-process publisher's thread: publishes pattern frames until told
/// to stop, timing every publish and counting its subscribers.
fn spawn_publishing(mut publisher: Publisher, progress: Arc<Progress>) -> std::thread::JoinHandle<Publisher> {
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
}

/// CUDA memory: `cuframes publish` of CUDA_SUB_FRAMES frames under
/// `policy`, once the survivor process reads them.
fn publish_in_a_process(env: &TestEnv, key: &str, memory: Memory, policy: Policy) -> (Publishing, Proc) {
    let options = format!(
        "{} --frames {CUDA_SUB_FRAMES} --ring {RING} --policy {} --ack-timeout {ACK_TIMEOUT_MS}ms --wait-subscribers 1",
        memory.stream_options(),
        policy.name()
    );
    let (proc, startup) = start_publisher(env, key, memory, &options, None);
    let mut survivor = env.subscribe(key, SURVIVOR);
    wait_reading(env, key, "survivor", &mut survivor, 10);
    (Publishing::Process { proc, startup }, survivor)
}

/// The victim: `cuframes subscribe` with the test hook set to `hook` when
/// given. Returns it and when it was spawned.
fn spawn_victim(env: &TestEnv, key: &str, hook: Option<&str>) -> (Proc, Instant) {
    let args = [
        "subscribe",
        key,
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
    (Proc::spawn("victim", cmd), spawned)
}

/// kill -9 of the victim once it reads, is counted by an in-process
/// publisher, and 50 frames went by with it. Returns when it was killed.
fn kill_victim_mid_stream(env: &TestEnv, key: &str, publishing: &Publishing, victim: &mut Proc) -> Instant {
    wait_reading(env, key, "victim", victim, 1);
    if let Publishing::InProcess { progress, .. } = publishing {
        wait_until(SOCKET_LIMIT, "the publisher to count the victim", || {
            progress.subscribers.load(Ordering::Relaxed) == 2
        });
    }
    let at = global_seq(env, key);
    wait_until(READY_LIMIT, "50 frames with the victim", || {
        global_seq(env, key) >= at + 50
    });
    let killed_at = Instant::now();
    victim.kill9();
    killed_at
}

/// Waits (at most 1 s) until the victim's subscriber slot and bit are
/// freed; returns how long that took.
fn wait_victim_freed(
    env: &TestEnv,
    key: &str,
    memory: Memory,
    publishing: &Publishing,
    survivor_only: u64,
) -> Duration {
    // Only the survivor's bit is left (with CUDA memory the stream may have
    // ended already, its header gone; the in-process publisher streams on
    // and counts one subscriber).
    wait_until(Duration::from_secs(1), "the victim's slot to be freed", || {
        let counted = match publishing {
            Publishing::InProcess { progress, .. } => progress.subscribers.load(Ordering::Relaxed) == 1,
            Publishing::Process { .. } => true,
        };
        counted
            && match header_state(env, key) {
                Some((_, bitmap)) => bitmap == survivor_only && reader(env, key, "victim").is_none(),
                None => !memory.in_process(),
            }
    })
}

/// Host memory: 200 more frames, then the publishing thread stops, never
/// having waited for an ACK timeout or a second, and shuts down once the
/// survivor released everything. Returns the survivor's summary, the frames
/// published and the publisher's note.
fn finish_in_process(
    worker: std::thread::JoinHandle<Publisher>,
    progress: &Progress,
    survivor: Proc,
) -> (Value, u64, String) {
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
    let summary = survivor.wait(EXIT_LIMIT).assert_success().json();
    (
        summary,
        published,
        format!("in process, slowest publish {slowest:?}"),
    )
}

/// CUDA memory: the publisher process published all its frames in about
/// their nominal time from `started`, far below the ACK timeout, with no
/// ACK timeout. Returns the survivor's summary, the frames published and
/// the publisher's note.
fn finish_process(
    proc: Proc,
    startup: Duration,
    mut survivor: Proc,
    started: Instant,
) -> (Value, u64, String) {
    let bound = Duration::from_millis(CUDA_SUB_FRAMES * 1000 / 300) + Duration::from_secs(10);
    let limit = bound.saturating_sub(started.elapsed());
    let out = survivor.wait_within(limit).unwrap_or_else(|out| {
        panic!(
            "the survivor did not end within {bound:?} of the publisher's start: \
             the publisher waited for the dead subscriber? {out}"
        )
    });
    let summary = out.assert_success().json();
    let pub_out = proc.wait(EXIT_LIMIT);
    pub_out.assert_success();
    let took = started.elapsed();
    assert!(
        took < bound,
        "the publisher took {took:?} (bound {bound:?}): it waited for the dead subscriber: {pub_out}"
    );
    assert!(
        pub_out
            .stderr
            .contains(&format!("published {CUDA_SUB_FRAMES} frames in ")),
        "{pub_out}"
    );
    assert!(
        pub_out.stderr.contains("; 0 dropped for ACK timeout"),
        "no ACK timeout was needed: {pub_out}"
    );
    let line = pub_out.stderr.lines().last().unwrap_or_default().to_owned();
    let note = format!("socket in {startup:?}, ended {took:?} after its start (bound {bound:?}): {line}");
    (summary, CUDA_SUB_FRAMES, note)
}

/// The survivor of the victim: the stream's memory; under strict-wait every
/// frame published verified; under drop-oldest a good survivor, and with
/// CUDA memory one that read on to the last frame.
fn check_victims_survivor(memory: Memory, policy: Policy, summary: &Value, published: u64) {
    memory.check(summary);
    match policy {
        Policy::StrictWait => assert_all_verified(summary, 1, published),
        Policy::DropOldest => {
            assert_survivor(memory, summary, policy);
            if !memory.in_process() {
                assert_eq!(uint(summary, "last_seq"), published, "the last frame: {summary}");
                assert!(
                    uint(summary, "frames") >= published / 2,
                    "the survivor kept reading: {summary}"
                );
            }
        }
    }
}

/// One case at a time: the bounds are about the library, not about a
/// 2-core machine running ten process trees at once, nor several sharing
/// one GPU.
static SERIAL: Mutex<()> = Mutex::new(());

fn case(run: impl FnOnce()) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    run();
}

/// One test per (case, memory): `host::<case>`, and the ignored
/// `needs_gpu::cuda_fd::<case>` and `needs_gpu::cuda_ipc::<case>`.
macro_rules! matrix {
    ($($name:ident: $f:ident($policy:ident, $point:expr);)*) => {
        mod host {
            use super::*;
            $(
                #[test]
                fn $name() {
                    case(|| $f(Memory::Host, Policy::$policy, $point));
                }
            )*
        }
        mod needs_gpu {
            mod cuda_fd {
                use super::super::*;
                $(
                    #[test]
                    #[ignore = "needs an NVIDIA GPU: run by scripts/gpu-test.sh"]
                    fn $name() {
                        case(|| $f(Memory::CudaFd, Policy::$policy, $point));
                    }
                )*
            }
            mod cuda_ipc {
                use super::super::*;
                $(
                    #[test]
                    #[ignore = "needs an NVIDIA GPU: run by scripts/gpu-test.sh"]
                    fn $name() {
                        case(|| $f(Memory::CudaIpc, Policy::$policy, $point));
                    }
                )*
            }
        }
    };
}

matrix! {
    publisher_dies_on_hello_drop_oldest: publisher_crash(DropOldest, PubPoint::GotHello);
    publisher_dies_on_hello_strict_wait: publisher_crash(StrictWait, PubPoint::GotHello);
    publisher_dies_on_subscribe_drop_oldest: publisher_crash(DropOldest, PubPoint::GotSubscribe);
    publisher_dies_on_subscribe_strict_wait: publisher_crash(StrictWait, PubPoint::GotSubscribe);
    publisher_dies_after_accept_drop_oldest: publisher_crash(DropOldest, PubPoint::AfterAccept);
    publisher_dies_after_accept_strict_wait: publisher_crash(StrictWait, PubPoint::AfterAccept);
    publisher_dies_mid_publish_drop_oldest: publisher_crash(DropOldest, PubPoint::MidPublish);
    publisher_dies_mid_publish_strict_wait: publisher_crash(StrictWait, PubPoint::MidPublish);
    publisher_killed_mid_stream_drop_oldest: publisher_crash(DropOldest, PubPoint::Killed);
    publisher_killed_mid_stream_strict_wait: publisher_crash(StrictWait, PubPoint::Killed);
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
