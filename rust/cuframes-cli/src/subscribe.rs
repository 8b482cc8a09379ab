//! `cuframes subscribe`: read (and verify) frames, report latency.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use cuframes::{
    Error, ErrorKind, FrameLease, MemoryKind, MemoryRequest, Result, StreamInfo, Subscriber,
    SubscriberConfig, clock, pattern,
};
use serde_json::{Value, json};

use crate::args::{SubscribeArgs, legacy_ms};
use crate::duration::Dur;
use crate::report::percentile;

/// How long `subscribe` waits in silence for a publisher before it says so.
const QUIET_WAIT: Duration = Duration::from_secs(1);

/// Connects, retrying while no publisher is there (or one is still
/// starting) until `wait` has passed, not counting the time this process
/// spends making its CUDA context meanwhile (`Subscriber::warming_up`).
/// When the first look found none and the wait goes on past [`QUIET_WAIT`],
/// says once what it waits for, so that a mistyped key does not look like a
/// hang.
fn connect_waiting(config: SubscriberConfig, wait: Duration) -> Result<Subscriber> {
    let started = Instant::now();
    let mut deadline = started + wait;
    let mut pause = Duration::from_millis(10);
    let mut told = false;
    loop {
        let result = Subscriber::connect(config.clone());
        if Subscriber::warming_up() {
            deadline = Instant::now() + wait;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match result {
            Err(e)
                if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Disconnected) && !left.is_zero() =>
            {
                if !told && started.elapsed() >= QUIET_WAIT {
                    told = true;
                    say_waiting(&config.key, wait);
                }
                // The last try at the deadline itself.
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            result => return result,
        }
    }
}

/// `waiting up to 30 s for a publisher of 'KEY' (--wait-timeout)`.
fn say_waiting(key: &str, wait: Duration) {
    crate::logline::event(
        crate::logline::Level::Info,
        Some(key),
        "waiting",
        &format!(
            "waiting up to {} s for a publisher of '{key}' (--wait-timeout)",
            wait.as_secs_f64()
        ),
        json!({ "wait_s": wait.as_secs_f64() }),
    );
}

pub fn run(a: SubscribeArgs) -> Result<ExitCode> {
    let timeout = legacy_ms(a.timeout, a.timeout_ms, "timeout-ms", "timeout")?;
    let wait = legacy_ms(a.wait_timeout, a.wait_ms, "wait-ms", "wait-timeout")?;
    // A publisher started together with its subscribers may hold its first frame
    // until the last of them joined: that frame is waited for as long as the publisher.
    let first_wait = timeout.max(wait);
    let start_delay = legacy_ms(a.start_delay, a.start_delay_ms, "start-delay-ms", "start-delay")?.get();
    let mut sub = connect_waiting(subscriber_config(&a)?, wait.get())?;
    if !a.json {
        announce(&a, &sub);
    }
    if !start_delay.is_zero() {
        std::thread::sleep(start_delay);
    }
    let started = Instant::now();
    let mut tally = Tally::new(a.frames);
    let failure = receive(&a, &mut sub, &mut tally, Waits { first_wait, timeout }).err();
    let elapsed = started.elapsed().as_secs_f64();
    tally.latencies_ns.sort_unstable();
    let summary = summary(&a, &sub, &tally, elapsed, failure.as_ref());
    print_summary(&a, &tally, &summary);
    if let Some(e) = failure {
        return Err(e);
    }
    if tally.mismatched > 0 {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "{} of {} frames mismatched the pattern",
                tally.mismatched, tally.received
            ),
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn subscriber_config(a: &SubscribeArgs) -> Result<SubscriberConfig> {
    let mut config = SubscriberConfig::new(a.key.clone());
    if let Some(name) = &a.name {
        config.name = name.clone();
    }
    config.mode = a.mode.into();
    config.copy = a.copy.into();
    config.read_ahead = a.read_ahead;
    if let Some(device) = a.cuda_device {
        // Naming a GPU needs one, whatever memory the publisher uses.
        MemoryRequest::Cuda.resolve()?;
        config.cuda_device = crate::publish::cuda_ordinal(device)?;
    }
    Ok(config)
}

/// The "subscribed" line: the stream, and how its frames reach us.
fn announce(a: &SubscribeArgs, sub: &Subscriber) {
    let info = sub.info();
    let layout = &info.layout;
    let peer = match sub.cuda_peer_device() {
        Some(device) => format!(", read over peer access from CUDA device {device}"),
        None => String::new(),
    };
    let shared = info
        .cuda_share()
        .map_or(String::new(), |share| format!(" shared as {}", share.name()));
    crate::logline::event(
        crate::logline::Level::Info,
        Some(&a.key),
        "subscribed",
        &format!(
            "subscribed to '{}' as bit {}: {} {}x{}, ring {}, {} memory{shared}{peer}",
            a.key,
            sub.bit(),
            layout.format(),
            layout.width(),
            layout.height(),
            info.ring_size,
            info.memory.name()
        ),
        serde_json::json!({
            "bit": sub.bit(), "format": layout.format().to_string(), "width": layout.width(),
            "height": layout.height(), "ring": info.ring_size, "memory": info.memory.name(),
        }),
    );
}

/// What the frames received so far add up to.
#[derive(Debug)]
struct Tally {
    received: u64,
    verified: u64,
    mismatched: u64,
    /// Frames overwritten while read or held: counted as dropped, not judged.
    torn: u64,
    first_seq: Option<u64>,
    last_seq: u64,
    latencies_ns: Vec<u64>,
}

impl Tally {
    fn new(frames: u64) -> Tally {
        Tally {
            received: 0,
            verified: 0,
            mismatched: 0,
            torn: 0,
            first_seq: None,
            last_seq: 0,
            latencies_ns: Vec::with_capacity(frames.clamp(1, 1 << 20) as usize),
        }
    }
}

/// How long `next` waits: for the first frame, then for each other.
#[derive(Clone, Copy, Debug)]
struct Waits {
    first_wait: Dur,
    timeout: Dur,
}

/// Receives (verifies, holds) frames until `--frames`, or the publisher
/// shut down (`--frames 0`); the error that ended it otherwise.
fn receive(a: &SubscribeArgs, sub: &mut Subscriber, tally: &mut Tally, waits: Waits) -> Result<()> {
    let info = sub.info().clone();
    let mut held: VecDeque<FrameLease> = VecDeque::with_capacity(a.hold + 1);
    let mut download = Vec::new();
    let result = loop {
        if a.frames != 0 && tally.received >= a.frames {
            break Ok(());
        }
        let lease = match next_frame(a, sub, tally.received, waits) {
            Ok(Some(lease)) => lease,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        let published = lease.publish_mono_ns();
        if published != 0 {
            tally
                .latencies_ns
                .push(clock::monotonic_ns().saturating_sub(published));
        }
        tally.received += 1;
        tally.first_seq.get_or_insert(lease.seq());
        tally.last_seq = lease.seq();
        if a.verify {
            verify(a, &info, &lease, &mut download, tally);
        }
        held.push_back(lease);
        release_beyond_hold(a, &mut held, tally);
    };
    for old in held.drain(..) {
        let _ = old.release();
    }
    result
}

/// The next frame; None when the publisher shut down and `--frames 0`
/// reads until then. A timeout says which frame did not come.
fn next_frame(
    a: &SubscribeArgs,
    sub: &mut Subscriber,
    received: u64,
    waits: Waits,
) -> Result<Option<FrameLease>> {
    let bound = if received == 0 {
        waits.first_wait
    } else {
        waits.timeout
    };
    match sub.next(Some(bound.get())) {
        Ok(lease) => Ok(Some(lease)),
        Err(e) if e.kind() == ErrorKind::Disconnected && a.frames == 0 && sub.publisher_shut_down() => {
            Ok(None)
        }
        Err(e) => Err(match e.kind() {
            ErrorKind::Timeout if received == 0 => Error::new(
                ErrorKind::Timeout,
                format!("no first frame from '{}' within {bound} of subscribing", a.key),
            ),
            ErrorKind::Timeout => Error::new(
                ErrorKind::Timeout,
                format!(
                    "no frame from '{}' within {} (after {received} frames)",
                    a.key, waits.timeout
                ),
            ),
            _ => Error::new(e.kind(), format!("{e} (after {received} frames)")),
        }),
    }
}

/// `--verify`: checks the frame against the pattern of its seq; the first
/// mismatches are logged.
fn verify(
    a: &SubscribeArgs,
    info: &StreamInfo,
    lease: &FrameLease,
    download: &mut Vec<u8>,
    tally: &mut Tally,
) {
    let layout = &info.layout;
    let frame = lease.seq().wrapping_sub(1);
    let matches = (0..layout.planes().len()).all(|p| match info.memory {
        // Host frames are checked in place; device frames copied down first.
        MemoryKind::Host => lease
            .host_plane(p)
            .is_some_and(|bytes| pattern::check_plane(layout, frame, p, bytes)),
        MemoryKind::Cuda => {
            lease.read_plane(p, download).is_ok() && pattern::check_plane(layout, frame, p, download)
        }
    });
    if !lease.is_intact() {
        tally.torn += 1; // overwritten while we read it: counted as dropped, not judged
    } else if matches {
        tally.verified += 1;
    } else {
        tally.mismatched += 1;
        if tally.mismatched <= 3 {
            crate::logline::event(
                crate::logline::Level::Warning,
                Some(&a.key),
                "mismatch",
                &format!(
                    "frame seq {} does not match the pattern of frame {frame}",
                    lease.seq()
                ),
                serde_json::json!({"seq": lease.seq(), "expected_frame": frame}),
            );
        }
    }
}

/// `--hold N`: releases the oldest frames beyond the N newest.
fn release_beyond_hold(a: &SubscribeArgs, held: &mut VecDeque<FrameLease>, tally: &mut Tally) {
    while held.len() > a.hold {
        let old = held.pop_front().expect("longer than hold");
        if a.verify && a.hold > 0 && !old.is_intact() {
            tally.torn += 1; // a held frame the publisher overwrote
        }
        let _ = old.release();
    }
}

/// The JSON summary (`--json` prints it; the text line reads from it).
fn summary(a: &SubscribeArgs, sub: &Subscriber, t: &Tally, elapsed: f64, failure: Option<&Error>) -> Value {
    let info = sub.info();
    let layout = &info.layout;
    let us = |ns: u64| (ns as f64 / 100.0).round() / 10.0;
    let stats = sub.stats();
    let latencies_ns = &t.latencies_ns;
    json!({
        "key": a.key,
        "frames": t.received,
        "verified": t.verified,
        "mismatched": t.mismatched,
        "dropped": stats.dropped + stats.overwritten.max(t.torn),
        "overwritten": stats.overwritten.max(t.torn),
        "copied": stats.copied,
        "p50_us": us(percentile(latencies_ns, 50.0)),
        "p99_us": us(percentile(latencies_ns, 99.0)),
        "max_us": us(latencies_ns.last().copied().unwrap_or(0)),
        "fps": if elapsed > 0.0 { (t.received as f64 / elapsed * 10.0).round() / 10.0 } else { 0.0 },
        "first_seq": t.first_seq.unwrap_or(0),
        "last_seq": t.last_seq,
        "format": layout.format().name(),
        "width": layout.width(),
        "height": layout.height(),
        "memory": info.memory.name(),
        "cuda_share": info.cuda_share().map(|s| s.name()),
        "error": failure.map(|e| e.to_string()),
    })
}

fn print_summary(a: &SubscribeArgs, t: &Tally, summary: &Value) {
    if a.json {
        println!("{summary}");
        return;
    }
    println!(
        "{} frames ({} verified, {} mismatched, {} dropped); latency p50 {} µs, p99 {} µs",
        t.received,
        if a.verify {
            t.verified.to_string()
        } else {
            "not".into()
        },
        t.mismatched,
        summary["dropped"],
        summary["p50_us"],
        summary["p99_us"]
    );
}
