//! `cuframes subscribe`: read (and verify) frames, report latency.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use cuframes::{
    Error, ErrorKind, FrameLease, MemoryKind, MemoryRequest, Result, Subscriber, SubscriberConfig, clock,
    pattern,
};
use serde_json::json;

use crate::args::{SubscribeArgs, legacy_ms};
use crate::report::percentile;

/// Connects, retrying while no publisher is there (or one is still
/// starting) until `wait` has passed, not counting the time this process
/// spends making its CUDA context meanwhile (`Subscriber::warming_up`).
fn connect_waiting(config: SubscriberConfig, wait: Duration) -> Result<Subscriber> {
    let mut deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(10);
    loop {
        let result = Subscriber::connect(config.clone());
        if Subscriber::warming_up() {
            deadline = Instant::now() + wait;
        }
        match result {
            Err(e)
                if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Disconnected)
                    && Instant::now() + pause < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            result => return result,
        }
    }
}

pub fn run(a: SubscribeArgs) -> Result<ExitCode> {
    let timeout = legacy_ms(a.timeout, a.timeout_ms, "timeout-ms", "timeout")?;
    let wait = legacy_ms(a.wait_timeout, a.wait_ms, "wait-ms", "wait-timeout")?;
    // A publisher started together with its subscribers may hold its first frame
    // until the last of them joined: that frame is waited for as long as the publisher.
    let first_wait = timeout.max(wait);
    let start_delay = legacy_ms(a.start_delay, a.start_delay_ms, "start-delay-ms", "start-delay")?.get();
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
    let mut sub = connect_waiting(config, wait.get())?;
    let info = sub.info().clone();
    let layout = info.layout.clone();
    if !a.json {
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

    if !start_delay.is_zero() {
        std::thread::sleep(start_delay);
    }
    let mut held: VecDeque<FrameLease> = VecDeque::with_capacity(a.hold + 1);
    let mut download = Vec::new();
    let mut latencies_ns: Vec<u64> = Vec::with_capacity(a.frames.clamp(1, 1 << 20) as usize);
    let (mut received, mut verified, mut mismatched, mut torn) = (0u64, 0u64, 0u64, 0u64);
    let (mut first_seq, mut last_seq) = (None, 0u64);
    let mut failure: Option<Error> = None;
    let started = Instant::now();
    while a.frames == 0 || received < a.frames {
        let bound = if received == 0 { first_wait } else { timeout };
        let lease = match sub.next(Some(bound.get())) {
            Ok(lease) => lease,
            Err(e) if e.kind() == ErrorKind::Disconnected && a.frames == 0 && sub.publisher_shut_down() => {
                break;
            }
            Err(e) => {
                let e = match e.kind() {
                    ErrorKind::Timeout if received == 0 => Error::new(
                        ErrorKind::Timeout,
                        format!("no first frame from '{}' within {bound} of subscribing", a.key),
                    ),
                    ErrorKind::Timeout => Error::new(
                        ErrorKind::Timeout,
                        format!(
                            "no frame from '{}' within {timeout} (after {received} frames)",
                            a.key
                        ),
                    ),
                    _ => Error::new(e.kind(), format!("{e} (after {received} frames)")),
                };
                failure = Some(e);
                break;
            }
        };
        let published = lease.publish_mono_ns();
        if published != 0 {
            latencies_ns.push(clock::monotonic_ns().saturating_sub(published));
        }
        received += 1;
        first_seq.get_or_insert(lease.seq());
        last_seq = lease.seq();
        if a.verify {
            let frame = lease.seq().wrapping_sub(1);
            let matches = (0..layout.planes().len()).all(|p| match info.memory {
                // Host frames are checked in place; device frames copied down first.
                MemoryKind::Host => lease
                    .host_plane(p)
                    .is_some_and(|bytes| pattern::check_plane(&layout, frame, p, bytes)),
                MemoryKind::Cuda => {
                    lease.read_plane(p, &mut download).is_ok()
                        && pattern::check_plane(&layout, frame, p, &download)
                }
            });
            if !lease.is_intact() {
                torn += 1; // overwritten while we read it: counted as dropped, not judged
            } else if matches {
                verified += 1;
            } else {
                mismatched += 1;
                if mismatched <= 3 {
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
        held.push_back(lease);
        while held.len() > a.hold {
            let old = held.pop_front().expect("longer than hold");
            if a.verify && a.hold > 0 && !old.is_intact() {
                torn += 1; // a held frame the publisher overwrote
            }
            let _ = old.release();
        }
    }
    for old in held.drain(..) {
        let _ = old.release();
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies_ns.sort_unstable();
    let us = |ns: u64| (ns as f64 / 100.0).round() / 10.0;
    let stats = sub.stats();
    let dropped = stats.dropped + stats.overwritten.max(torn);
    let summary = json!({
        "key": a.key,
        "frames": received,
        "verified": verified,
        "mismatched": mismatched,
        "dropped": dropped,
        "overwritten": stats.overwritten.max(torn),
        "copied": stats.copied,
        "p50_us": us(percentile(&latencies_ns, 50.0)),
        "p99_us": us(percentile(&latencies_ns, 99.0)),
        "max_us": us(latencies_ns.last().copied().unwrap_or(0)),
        "fps": if elapsed > 0.0 { (received as f64 / elapsed * 10.0).round() / 10.0 } else { 0.0 },
        "first_seq": first_seq.unwrap_or(0),
        "last_seq": last_seq,
        "format": layout.format().name(),
        "width": layout.width(),
        "height": layout.height(),
        "memory": info.memory.name(),
        "cuda_share": info.cuda_share().map(|s| s.name()),
        "error": failure.as_ref().map(|e| e.to_string()),
    });
    if a.json {
        println!("{summary}");
    } else {
        println!(
            "{received} frames ({} verified, {mismatched} mismatched, {dropped} dropped); latency p50 {} µs, p99 {} µs",
            if a.verify {
                verified.to_string()
            } else {
                "not".into()
            },
            summary["p50_us"],
            summary["p99_us"]
        );
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if mismatched > 0 {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!("{mismatched} of {received} frames mismatched the pattern"),
        ));
    }
    Ok(ExitCode::SUCCESS)
}
