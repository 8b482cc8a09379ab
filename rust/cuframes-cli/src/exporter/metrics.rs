//! Prometheus's text format (version 0.0.4) for every key on the machine,
//! from the shared headers alone: nothing here connects a subscriber, so
//! watching costs the streams nothing and cannot be dropped.
//!
//! Every figure is read from a header other processes write: subscriber
//! names are escaped, counts a subscriber reports are bounded by what it
//! could have seen and labelled with who could have written them
//! (`report`: `publisher` or `v1_peers`, [`cuframes::inspect::ReportWriter`]),
//! and a header that does not validate is counted as an error, never
//! trusted.

use std::fmt::Write;

use cuframes::Policy;
use cuframes::inspect::{Inspection, SubscriberView};
use cuframes::protocol::SUBSCRIBER_ACTIVE;

use crate::args::policy_name;

/// One metric family: HELP, TYPE, and its samples.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(String, f64)>,
}

impl Family {
    fn new(name: &'static str, kind: &'static str, help: &'static str) -> Family {
        Family {
            name,
            help,
            kind,
            samples: Vec::new(),
        }
    }

    fn add(&mut self, labels: &[(&str, &str)], value: f64) {
        let labels: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        let text = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", labels.join(","))
        };
        self.samples.push((text, value));
    }
}

/// A label value as the text format wants it: `\`, `"` and newlines
/// escaped; other control characters (a hostile name) replaced.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

fn number(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.is_finite() {
        format!("{v}")
    } else {
        "NaN".into()
    }
}

/// What the exporter knows besides the keys: its own scrape.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScrapeStats {
    /// Seconds the last scrape took.
    pub seconds: f64,
    /// Keys whose header could not be read or did not validate, ever.
    pub errors_total: u64,
}

/// Whether a key counts as a scrape error: it could not be inspected, or
/// a live publisher's header (or one left in `/dev/shm`) could not be read
/// in time or did not validate. A stale key with no header is not one.
pub fn unreadable(ins: &Result<Inspection, String>) -> bool {
    why_unreadable(ins).is_some()
}

/// Why a key counts as unreadable ([`unreadable`]), or None.
pub fn why_unreadable(ins: &Result<Inspection, String>) -> Option<&str> {
    match ins {
        Err(e) => Some(e),
        Ok(i) => i.unreadable_reason(),
    }
}

/// The page for `keys` (name and inspection, or why it could not be
/// inspected).
pub fn render(keys: &[(String, Result<Inspection, String>)], scrape: ScrapeStats) -> String {
    let mut up = Family::new(
        "cuframes_publisher_up",
        "gauge",
        "1 while a live process publishes the key and its header could be read",
    );
    let mut unread = Family::new(
        "cuframes_key_unreadable",
        "gauge",
        "1 when the key's header could not be read in time or did not validate in this scrape (counted in cuframes_exporter_scrape_errors_total)",
    );
    let mut pid = Family::new(
        "cuframes_publisher_pid",
        "gauge",
        "The publisher's pid, as its header says (its own PID namespace)",
    );
    let mut stale = Family::new(
        "cuframes_key_stale",
        "gauge",
        "1 when the key's resources were left by a publisher that is gone (cuframes cleanup removes them)",
    );
    let mut info = Family::new(
        "cuframes_stream_info",
        "gauge",
        "The stream's description, as labels (always 1)",
    );
    let mut published = Family::new("cuframes_frames_published_total", "counter", "Frames published");
    let mut rate = Family::new(
        "cuframes_frames_per_second",
        "gauge",
        "The publish rate of the frames still in the ring",
    );
    let mut nominal = Family::new(
        "cuframes_nominal_frames_per_second",
        "gauge",
        "The frame rate the publisher advertises",
    );
    let mut age = Family::new(
        "cuframes_last_publish_age_seconds",
        "gauge",
        "How long ago the newest frame in the ring was published",
    );
    let mut ring = Family::new("cuframes_ring_slots", "gauge", "Slots in the ring");
    let mut subs = Family::new("cuframes_subscribers", "gauge", "Active subscribers");
    let mut waits = Family::new(
        "cuframes_slot_waits_total",
        "counter",
        "strict-wait publishes that waited for a slot",
    );
    let mut wait_s = Family::new(
        "cuframes_slot_wait_seconds_total",
        "counter",
        "Time strict-wait publishes spent waiting for a slot",
    );
    let mut timeouts = Family::new(
        "cuframes_subscribers_dropped_total",
        "counter",
        "Subscribers the publisher dropped, by reason",
    );
    let mut copied_key = Family::new(
        "cuframes_frames_copied_total",
        "counter",
        "Frames subscribers took as private copies because the ring could not spare the slot (sum of their reports)",
    );
    let mut received = Family::new(
        "cuframes_subscriber_frames_received_total",
        "counter",
        "Frames the subscriber received, as it reports them",
    );
    let mut lost = Family::new(
        "cuframes_subscriber_frames_lost_total",
        "counter",
        "Frames the subscriber lost, by reason, as it reports them",
    );
    let mut copied = Family::new(
        "cuframes_subscriber_frames_copied_total",
        "counter",
        "Frames the subscriber received as private copies, as it reports them",
    );
    let mut lag = Family::new(
        "cuframes_subscriber_lag_frames",
        "gauge",
        "Frames published since the newest one the subscriber released",
    );
    let mut lag_s = Family::new(
        "cuframes_subscriber_lag_seconds",
        "gauge",
        "The subscriber's lag at the current publish rate",
    );
    let mut ack_age = Family::new(
        "cuframes_subscriber_last_ack_age_seconds",
        "gauge",
        "How long ago the subscriber last released a frame",
    );
    let mut errors = Family::new(
        "cuframes_exporter_scrape_errors_total",
        "counter",
        "Keys whose shared header could not be read or did not validate",
    );
    let mut duration = Family::new(
        "cuframes_exporter_scrape_duration_seconds",
        "gauge",
        "How long the last scrape took",
    );
    let mut count = Family::new(
        "cuframes_exporter_keys",
        "gauge",
        "Keys found in /dev/shm and the runtime directories",
    );
    let mut unreadable_now = Family::new(
        "cuframes_keys_unreadable",
        "gauge",
        "Keys skipped in this scrape because their header could not be read (the exporter logs why, once per key and reason)",
    );
    let now_ns = realtime_ns();
    for (key, ins) in keys {
        let k = key.as_str();
        let failed = unreadable(ins);
        unread.add(&[("key", k)], f64::from(u8::from(failed)));
        let Ok(ins) = ins else {
            up.add(&[("key", k)], 0.0);
            continue;
        };
        let live = ins.status.live;
        up.add(&[("key", k)], f64::from(u8::from(live && !failed)));
        stale.add(&[("key", k)], f64::from(u8::from(!live)));
        let (Some(h), Ok(stream)) = (&ins.header, &ins.info) else {
            continue;
        };
        pid.add(&[("key", k)], h.producer_pid as f64);
        let layout = &stream.layout;
        let (w, hgt) = (layout.width().to_string(), layout.height().to_string());
        // Spelled as `ls`, `inspect` and `top` print them.
        let policy = Policy::from_wire(stream.policy).map_or("unknown", policy_name);
        let memory = stream.memory.name();
        let share = stream.cuda_share().map_or("", |share| share.name());
        let format = layout.format().name();
        info.add(
            &[
                ("key", k),
                ("format", format),
                ("width", &w),
                ("height", &hgt),
                ("memory", memory),
                ("cuda_share", share),
                ("policy", policy),
            ],
            1.0,
        );
        published.add(&[("key", k)], h.global_seq as f64);
        let fps = ins.frame_rate();
        if let Some(fps) = fps {
            rate.add(&[("key", k)], fps);
        }
        if let Some((num, den)) = stream.fps {
            nominal.add(&[("key", k)], f64::from(num) / f64::from(den));
        }
        if let Some(ns) = ins.newest_frame_age_ns() {
            age.add(&[("key", k)], ns as f64 / 1e9);
        }
        ring.add(&[("key", k)], stream.ring_size as f64);
        let active: Vec<SubscriberView> = ins
            .subscribers()
            .into_iter()
            .filter(|s| s.state == SUBSCRIBER_ACTIVE)
            .collect();
        subs.add(&[("key", k)], active.len() as f64);
        if let Some(c) = ins.publisher_counters() {
            waits.add(&[("key", k)], c.ack_waits as f64);
            wait_s.add(&[("key", k)], c.ack_wait_ns as f64 / 1e9);
            timeouts.add(&[("key", k), ("reason", "ack_timeout")], c.ack_timeouts as f64);
        }
        copied_key.add(&[("key", k)], active.iter().map(|s| s.copied as f64).sum());
        for s in &active {
            let bit = s.bit.to_string();
            let report = s.report.name();
            let labels = [
                ("key", k),
                ("subscriber", s.name.as_str()),
                ("bit", bit.as_str()),
                ("report", report),
            ];
            received.add(&labels, s.received as f64);
            copied.add(&labels, s.copied as f64);
            let overwritten = s.overwritten; // at most s.dropped (bounded)
            let with_reason = |reason| {
                [
                    ("key", k),
                    ("subscriber", s.name.as_str()),
                    ("bit", bit.as_str()),
                    ("report", report),
                    ("reason", reason),
                ]
            };
            lost.add(&with_reason("dropped"), (s.dropped - overwritten) as f64);
            lost.add(&with_reason("overwritten"), overwritten as f64);
            let behind = h.global_seq.saturating_sub(s.last_seen_seq);
            lag.add(&labels, behind as f64);
            if let Some(fps) = fps.filter(|f| *f > 0.0) {
                lag_s.add(&labels, behind as f64 / fps);
            }
            if s.last_ack_ns > 0 {
                ack_age.add(
                    &labels,
                    (now_ns.saturating_sub(s.last_ack_ns as u64)) as f64 / 1e9,
                );
            }
        }
    }
    errors.add(&[], scrape.errors_total as f64);
    duration.add(&[], scrape.seconds);
    count.add(&[], keys.len() as f64);
    unreadable_now.add(&[], keys.iter().filter(|(_, ins)| unreadable(ins)).count() as f64);
    let mut out = String::new();
    for family in [
        up,
        unread,
        pid,
        stale,
        info,
        published,
        rate,
        nominal,
        age,
        ring,
        subs,
        waits,
        wait_s,
        timeouts,
        copied_key,
        received,
        lost,
        copied,
        lag,
        lag_s,
        ack_age,
        errors,
        duration,
        count,
        unreadable_now,
    ] {
        let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
        let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind);
        for (labels, value) in &family.samples {
            let _ = writeln!(out, "{}{labels} {}", family.name, number(*value));
        }
    }
    out
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd\u{7}"), "a\\\"b\\\\c\\nd?");
    }

    #[test]
    fn an_empty_machine_still_says_what_it_is() {
        let page = render(&[], ScrapeStats::default());
        assert!(page.contains("# TYPE cuframes_publisher_up gauge"));
        assert!(page.contains("cuframes_exporter_keys 0"));
    }
}
