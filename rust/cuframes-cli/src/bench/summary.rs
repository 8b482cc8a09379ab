//! The report of `cuframes bench`: one JSON object per transport (what
//! `--json` prints) and the table made from them.

use cuframes::MemoryKind;
use cuframes_bench::{Measured, Plan, SubscriberResult, Transport};
use serde_json::{Value, json};

use crate::args::policy_name;
use crate::report::percentile;

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn us(ns: u64) -> f64 {
    round1(ns as f64 / 1000.0)
}

/// µs per frame of `ns` over `count` frames.
fn per_frame(ns: u64, count: u64) -> f64 {
    round1(ns as f64 / 1000.0 / count.max(1) as f64)
}

/// The subscribers' figures of one transport, added up.
#[derive(Debug, Default)]
struct Totals {
    /// Every subscriber's latencies, sorted.
    latency: Vec<u64>,
    handover: Vec<u64>,
    received: u64,
    verified: u64,
    mismatched: u64,
    dropped: u64,
    whole_frames: u64,
    cpu_ns: u64,
    verify_cpu_ns: u64,
    /// The slowest subscriber's rate.
    fps: Option<f64>,
    /// One report per subscriber.
    rows: Vec<Value>,
}

impl Totals {
    /// `first_ns`: the publisher's start, where each subscriber's rate starts.
    fn of(subscribers: &[SubscriberResult], first_ns: u64) -> Totals {
        let mut totals = Totals::default();
        for s in subscribers {
            totals.add(s, first_ns);
        }
        totals.latency.sort_unstable();
        totals.handover.sort_unstable();
        totals
    }

    fn add(&mut self, s: &SubscriberResult, first_ns: u64) {
        let mut latency = s.latency_ns.clone();
        latency.sort_unstable();
        self.latency.extend_from_slice(&latency);
        self.handover.extend_from_slice(&s.handover_ns);
        self.received += s.frames;
        self.verified += s.verified;
        self.mismatched += s.mismatched;
        self.dropped += s.dropped;
        self.whole_frames += s.whole_frames;
        self.cpu_ns += s.cpu_ns;
        self.verify_cpu_ns += s.verify_cpu_ns;
        let span = s.last_ready_ns.saturating_sub(first_ns);
        let fps = if span > 0 {
            s.frames as f64 * 1e9 / span as f64
        } else {
            0.0
        };
        self.fps = Some(self.fps.map_or(fps, |f| f.min(fps)));
        self.rows.push(subscriber_row(s, &latency, fps));
    }
}

/// One subscriber's report; `latency` sorted.
fn subscriber_row(s: &SubscriberResult, latency: &[u64], fps: f64) -> Value {
    json!({
        "index": s.index,
        "frames": s.frames,
        "dropped": s.dropped,
        "verified": s.verified,
        "mismatched": s.mismatched,
        "p50_us": us(percentile(latency, 50.0)),
        "p99_us": us(percentile(latency, 99.0)),
        "max_us": us(latency.last().copied().unwrap_or(0)),
        "fps": round1(fps),
        "cpu_us_per_frame": round1(s.cpu_ns as f64 / 1000.0 / s.frames.max(1) as f64),
        "error": s.error,
    })
}

/// The report of one transport, plus its sorted latencies (for the plot).
pub fn summarize(plan: &Plan, transport: Transport, m: &Measured) -> (Value, Vec<u64>) {
    let publisher = &m.publisher;
    let t = Totals::of(&m.subscribers, publisher.first_ns);
    let frames = plan.frames;
    let publish_span = publisher.published_ns.saturating_sub(publisher.first_ns).max(1);
    let policy = match transport {
        Transport::Pipe => "blocking",
        _ => policy_name(plan.policy),
    };
    let counters = &m.counters;
    let report = json!({
        "transport": transport.name(),
        "memory": plan.memory.name(),
        "format": plan.format().name(),
        "width": plan.geometry.layout.width(),
        "height": plan.geometry.layout.height(),
        "frame_bytes": plan.geometry.packed_size,
        "subscribers": plan.subscribers,
        "ring": if transport == Transport::Pipe { Value::Null } else { json!(plan.ring) },
        "policy": policy,
        "frames": frames,
        "received": t.received,
        "fps": round1(t.fps.unwrap_or(0.0)),
        "publish_fps": round1(frames as f64 * 1e9 / publish_span as f64),
        "p50_us": us(percentile(&t.latency, 50.0)),
        "p99_us": us(percentile(&t.latency, 99.0)),
        "max_us": us(t.latency.last().copied().unwrap_or(0)),
        "handover_p50_us": us(percentile(&t.handover, 50.0)),
        "handover_p99_us": us(percentile(&t.handover, 99.0)),
        "cpu_us_per_frame": per_frame(publisher.cpu_ns + t.cpu_ns, frames),
        "publisher_cpu_us_per_frame": per_frame(publisher.cpu_ns, frames),
        "subscriber_cpu_us_per_frame": per_frame(t.cpu_ns, t.received),
        "verify_cpu_us_per_frame": per_frame(t.verify_cpu_ns, t.received),
        "verified": t.verified,
        "mismatched": t.mismatched,
        "whole_frames_checked": t.whole_frames,
        "dropped": t.dropped,
        "verification": plan.verify.describe(plan.memory == MemoryKind::Cuda, plan.pool()),
        "copies": transport.copies(plan.memory),
        "cuda_sync": plan.cuda_sync,
        "device_copy_fps": counters.device_copy_fps.map(round1),
        "publisher_slot_waits": counters.ack_waits.map(|(n, _)| n),
        "publisher_slot_wait_us_per_frame": counters.ack_waits.map(|(_, ns)| per_frame(ns, frames)),
        "publisher_kernel_copies": counters.kernel_copies,
        "per_subscriber": t.rows,
        "error": m.error,
    });
    (report, t.latency)
}

/// The table `cuframes bench` prints without `--json`.
pub fn print_table(reports: &[Value]) {
    let Some(first) = reports.first() else { return };
    println!(
        "{} {}x{} ({} bytes), {} memory, {} subscriber(s), {} frames, ring {}, {}",
        first["format"].as_str().unwrap_or(""),
        first["width"],
        first["height"],
        first["frame_bytes"],
        first["memory"].as_str().unwrap_or(""),
        first["subscribers"],
        first["frames"],
        reports.iter().find_map(|r| r["ring"].as_u64()).unwrap_or(0),
        reports
            .iter()
            .find(|r| r["transport"] != "pipe")
            .and_then(|r| r["policy"].as_str())
            .unwrap_or("")
    );
    println!(
        "{:<9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>10}",
        "TRANSPORT",
        "FPS",
        "P50 µs",
        "P99 µs",
        "MAX µs",
        "CPU µs/f",
        "PUB µs/f",
        "SUB µs/f",
        "DROPPED",
        "VERIFIED",
        "MISMATCHED"
    );
    let t = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    for r in reports {
        println!(
            "{:<9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>10}",
            t(&r["transport"]),
            t(&r["fps"]),
            t(&r["p50_us"]),
            t(&r["p99_us"]),
            t(&r["max_us"]),
            t(&r["cpu_us_per_frame"]),
            t(&r["publisher_cpu_us_per_frame"]),
            t(&r["subscriber_cpu_us_per_frame"]),
            t(&r["dropped"]),
            t(&r["verified"]),
            t(&r["mismatched"])
        );
        if let Some(e) = r["error"].as_str() {
            println!("  error: {e}");
        }
    }
    println!(
        "latency: publish -> subscriber has the frame (CLOCK_MONOTONIC); CPU per frame: publisher + all subscribers"
    );
    println!("verified: {}", first["verification"].as_str().unwrap_or(""));
}
