//! `cuframes top`: every live publisher on the machine, refreshed in place:
//! frame rate, subscribers, each subscriber's lag, ACK rate and drops. Read
//! from the shared headers without connecting (as `ls` and `inspect`).

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::args::invalid;
use cuframes::inspect::{Inspection, inspect as inspect_key};
use cuframes::list_keys;
use cuframes::protocol::{SUBSCRIBER_ACTIVE, SUBSCRIBER_CONNECTING, SUBSCRIBER_DRAINING};
use cuframes::{Policy, Result};
use serde_json::{Value, json};

use crate::args::{TopArgs, legacy_ms, policy_name};

/// Every key's inspection at one instant.
#[derive(Debug)]
struct Snapshot {
    at: Instant,
    keys: BTreeMap<String, Inspection>,
    /// Keys skipped because they could not be read, and why.
    unreadable: BTreeMap<String, String>,
}

fn snapshot() -> Snapshot {
    let mut keys = BTreeMap::new();
    let mut unreadable = BTreeMap::new();
    for key in list_keys(None) {
        match inspect_key(&key, None) {
            Ok(ins) => match ins.unreadable_reason() {
                Some(why) => {
                    unreadable.insert(key, why.to_owned());
                }
                None => {
                    keys.insert(key, ins);
                }
            },
            Err(e) => {
                unreadable.insert(key, e.to_string());
            }
        }
    }
    Snapshot {
        at: Instant::now(),
        keys,
        unreadable,
    }
}

fn rate(delta: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        (delta as f64 / seconds * 10.0).round() / 10.0
    } else {
        0.0
    }
}

fn state_name(state: u64) -> &'static str {
    match state {
        SUBSCRIBER_CONNECTING => "connecting",
        SUBSCRIBER_ACTIVE => "active",
        SUBSCRIBER_DRAINING => "draining",
        _ => "unknown",
    }
}

/// One row per live publisher, rates measured between `before` and `now`.
fn rows(before: &Snapshot, now: &Snapshot) -> (Vec<Value>, usize) {
    let seconds = now.at.duration_since(before.at).as_secs_f64();
    let mut rows = Vec::new();
    let mut stale = 0;
    for (key, ins) in &now.keys {
        let Some(h) = &ins.header else {
            stale += usize::from(!ins.status.live);
            continue;
        };
        if !ins.status.live {
            stale += 1;
            continue;
        }
        // The same publisher in the previous snapshot (not a restarted one).
        let prev = before
            .keys
            .get(key)
            .and_then(|p| p.header.as_ref().map(|ph| (p, ph)))
            .filter(|(_, ph)| ph.producer_pid == h.producer_pid && ph.global_seq <= h.global_seq);
        let fps = prev.map(|(_, ph)| rate(h.global_seq - ph.global_seq, seconds));
        let prev_subs = prev.map(|(p, _)| p.subscribers()).unwrap_or_default();
        let subs: Vec<Value> = ins
            .subscribers()
            .iter()
            .map(|s| {
                let earlier = prev_subs
                    .iter()
                    .find(|o| o.bit == s.bit && o.pid == s.pid && o.last_seen_seq <= s.last_seen_seq);
                json!({
                    "bit": s.bit,
                    "name": s.name,
                    "pid": s.pid,
                    "state": state_name(s.state),
                    "last_seen_seq": s.last_seen_seq,
                    "lag": h.global_seq.saturating_sub(s.last_seen_seq),
                    "dropped": s.dropped,
                    "ack_fps": earlier.map(|o| rate(s.last_seen_seq - o.last_seen_seq, seconds)),
                    "dropped_per_s": earlier.map(|o| rate(s.dropped.saturating_sub(o.dropped), seconds)),
                })
            })
            .collect();
        let mut row = json!({
            "key": key,
            "pid": h.producer_pid,
            "global_seq": h.global_seq,
            "fps": fps,
            "subscribers": subs.len(),
            "subscriber_slots": subs,
            "shutdown": h.shutdown_flag != 0,
        });
        match &ins.info {
            Ok(info) => {
                row["format"] = json!(info.layout.format().name());
                row["width"] = json!(info.layout.width());
                row["height"] = json!(info.layout.height());
                row["memory"] = json!(info.memory.name());
                row["ring_size"] = json!(info.ring_size);
                row["policy"] = json!(Policy::from_wire(info.policy).map_or("?", policy_name));
                row["nominal_fps"] = json!(info.fps.map(|(n, d)| n as f64 / d as f64));
            }
            Err(e) => row["invalid"] = json!(e),
        }
        rows.push(row);
    }
    (rows, stale)
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn render(
    rows: &[Value],
    stale: usize,
    unreadable: &BTreeMap<String, String>,
    interval: Duration,
    live: bool,
) -> String {
    let mut out = String::new();
    out += &format!(
        "cuframes top — {} publisher(s), rates over {} ms{}\n\n",
        rows.len(),
        interval.as_millis(),
        if live { " (Ctrl-C to quit)" } else { "" }
    );
    out += &format!(
        "{:<24} {:>8} {:<8} {:>11} {:<5} {:>4} {:<12} {:>9} {:>12} {:>4}\n",
        "KEY", "PID", "FORMAT", "SIZE", "MEM", "RING", "POLICY", "FPS", "SEQ", "SUBS"
    );
    for r in rows {
        out += &format!(
            "{:<24} {:>8} {:<8} {:>11} {:<5} {:>4} {:<12} {:>9} {:>12} {:>4}\n",
            text(&r["key"]),
            text(&r["pid"]),
            text(&r["format"]),
            format!("{}x{}", text(&r["width"]), text(&r["height"])),
            text(&r["memory"]),
            text(&r["ring_size"]),
            text(&r["policy"]),
            text(&r["fps"]),
            text(&r["global_seq"]),
            text(&r["subscribers"]),
        );
        for s in r["subscriber_slots"].as_array().into_iter().flatten() {
            out += &format!(
                "  └ {:<20} bit {:>2}  pid {:>8}  {:<8} lag {:>6}  ack/s {:>9}  dropped {:>8} ({}/s)\n",
                text(&s["name"]),
                text(&s["bit"]),
                text(&s["pid"]),
                text(&s["state"]),
                text(&s["lag"]),
                text(&s["ack_fps"]),
                text(&s["dropped"]),
                text(&s["dropped_per_s"]),
            );
        }
    }
    if rows.is_empty() {
        out += "no live publishers\n";
    }
    if stale > 0 {
        out += &format!("\n{stale} stale key(s) left by dead publishers: `cuframes cleanup` removes them\n");
    }
    if !unreadable.is_empty() {
        out += &format!("\n{} key(s) skipped, unreadable:\n", unreadable.len());
        for (key, why) in unreadable {
            out += &format!("  {key}: {why}\n");
        }
    }
    out
}

pub fn run(a: TopArgs) -> Result<ExitCode> {
    let interval = legacy_ms(a.interval, a.interval_ms, "interval-ms", "interval")?;
    if interval.get() < Duration::from_millis(10) || interval.get() > Duration::from_secs(3600) {
        return Err(invalid(format!(
            "bad --interval {interval}: use 10ms to 1h (3600s)"
        )));
    }
    if a.json && !a.once {
        return Err(invalid("--json needs --once (top refreshes a screen otherwise)"));
    }
    let interval = interval.get();
    let mut before = snapshot();
    if !a.once {
        print!("\x1b[2J\x1b[H");
    }
    loop {
        std::thread::sleep(interval);
        let now = snapshot();
        let (rows, stale) = rows(&before, &now);
        if a.once {
            if a.json {
                println!("{}", Value::Array(rows));
            } else {
                print!("{}", render(&rows, stale, &now.unreadable, interval, false));
            }
            return Ok(ExitCode::SUCCESS);
        }
        let mut stdout = std::io::stdout().lock();
        // Home, draw, clear what the previous frame left below.
        let screen = render(&rows, stale, &now.unreadable, interval, true).replace('\n', "\x1b[K\n");
        let _ = write!(stdout, "\x1b[H{screen}\x1b[J");
        let _ = stdout.flush();
        drop(stdout);
        before = now;
    }
}
