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

use cuframes::inspect::{Inspection, SubscriberView};
use cuframes::protocol::{SUBSCRIBER_ACTIVE, SharedHeader};
use cuframes::{Policy, StreamInfo};

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
    let now_ns = realtime_ns();
    let mut per_key = KeyFamilies::new();
    let mut per_subscriber = SubscriberFamilies::new();
    for (key, ins) in keys {
        per_key.add_status(key, ins);
        let Ok(ins) = ins else { continue };
        let (Some(header), Ok(stream)) = (&ins.header, &ins.info) else {
            continue;
        };
        let active: Vec<SubscriberView> = ins
            .subscribers()
            .into_iter()
            .filter(|s| s.state == SUBSCRIBER_ACTIVE)
            .collect();
        let fps = ins.frame_rate();
        per_key.add_stream(key, ins, header, stream, fps, &active);
        per_subscriber.add(key, header.global_seq, fps, &active, now_ns);
    }
    let mut out = String::new();
    let families = per_key
        .into_families()
        .into_iter()
        .chain(per_subscriber.into_families())
        .chain(exporter_families(keys, scrape));
    for family in families {
        family.write_to(&mut out);
    }
    out
}

impl Family {
    /// HELP, TYPE and the samples, as the text format wants them.
    fn write_to(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind);
        for (labels, value) in &self.samples {
            let _ = writeln!(out, "{}{labels} {}", self.name, number(*value));
        }
    }
}

/// The families with one sample per key (a stream's figures and its
/// publisher's), in the page's order.
struct KeyFamilies {
    up: Family,
    unread: Family,
    pid: Family,
    stale: Family,
    info: Family,
    published: Family,
    rate: Family,
    nominal: Family,
    age: Family,
    ring: Family,
    subscribers: Family,
    waits: Family,
    wait_seconds: Family,
    dropped_subscribers: Family,
    copied: Family,
}

impl KeyFamilies {
    fn new() -> KeyFamilies {
        KeyFamilies {
            up: Family::new(
                "cuframes_publisher_up",
                "gauge",
                "1 while a live process publishes the key and its header could be read",
            ),
            unread: Family::new(
                "cuframes_key_unreadable",
                "gauge",
                "1 when the key's header could not be read in time or did not validate in this scrape (counted in cuframes_exporter_scrape_errors_total)",
            ),
            pid: Family::new(
                "cuframes_publisher_pid",
                "gauge",
                "The publisher's pid, as its header says (its own PID namespace)",
            ),
            stale: Family::new(
                "cuframes_key_stale",
                "gauge",
                "1 when the key's resources were left by a publisher that is gone (cuframes cleanup removes them)",
            ),
            info: Family::new(
                "cuframes_stream_info",
                "gauge",
                "The stream's description, as labels (always 1)",
            ),
            published: Family::new("cuframes_frames_published_total", "counter", "Frames published"),
            rate: Family::new(
                "cuframes_frames_per_second",
                "gauge",
                "The publish rate of the frames still in the ring",
            ),
            nominal: Family::new(
                "cuframes_nominal_frames_per_second",
                "gauge",
                "The frame rate the publisher advertises",
            ),
            age: Family::new(
                "cuframes_last_publish_age_seconds",
                "gauge",
                "How long ago the newest frame in the ring was published",
            ),
            ring: Family::new("cuframes_ring_slots", "gauge", "Slots in the ring"),
            subscribers: Family::new("cuframes_subscribers", "gauge", "Active subscribers"),
            waits: Family::new(
                "cuframes_slot_waits_total",
                "counter",
                "strict-wait publishes that waited for a slot",
            ),
            wait_seconds: Family::new(
                "cuframes_slot_wait_seconds_total",
                "counter",
                "Time strict-wait publishes spent waiting for a slot",
            ),
            dropped_subscribers: Family::new(
                "cuframes_subscribers_dropped_total",
                "counter",
                "Subscribers the publisher dropped, by reason",
            ),
            copied: Family::new(
                "cuframes_frames_copied_total",
                "counter",
                "Frames subscribers took as private copies because the ring could not spare the slot (sum of their reports)",
            ),
        }
    }

    /// Whether the key is up, readable, stale: every key has these.
    fn add_status(&mut self, k: &str, ins: &Result<Inspection, String>) {
        let failed = unreadable(ins);
        self.unread.add(&[("key", k)], f64::from(u8::from(failed)));
        let Ok(ins) = ins else {
            self.up.add(&[("key", k)], 0.0);
            return;
        };
        let live = ins.status.live;
        self.up.add(&[("key", k)], f64::from(u8::from(live && !failed)));
        self.stale.add(&[("key", k)], f64::from(u8::from(!live)));
    }

    /// What a readable header says of the stream and its publisher.
    fn add_stream(
        &mut self,
        k: &str,
        ins: &Inspection,
        h: &SharedHeader,
        stream: &StreamInfo,
        fps: Option<f64>,
        active: &[SubscriberView],
    ) {
        self.pid.add(&[("key", k)], h.producer_pid as f64);
        self.add_info(k, stream);
        self.published.add(&[("key", k)], h.global_seq as f64);
        if let Some(fps) = fps {
            self.rate.add(&[("key", k)], fps);
        }
        if let Some((num, den)) = stream.fps {
            self.nominal.add(&[("key", k)], f64::from(num) / f64::from(den));
        }
        if let Some(ns) = ins.newest_frame_age_ns() {
            self.age.add(&[("key", k)], ns as f64 / 1e9);
        }
        self.ring.add(&[("key", k)], stream.ring_size as f64);
        self.subscribers.add(&[("key", k)], active.len() as f64);
        if let Some(c) = ins.publisher_counters() {
            self.waits.add(&[("key", k)], c.ack_waits as f64);
            self.wait_seconds.add(&[("key", k)], c.ack_wait_ns as f64 / 1e9);
            self.dropped_subscribers
                .add(&[("key", k), ("reason", "ack_timeout")], c.ack_timeouts as f64);
        }
        self.copied
            .add(&[("key", k)], active.iter().map(|s| s.copied as f64).sum());
    }

    /// `cuframes_stream_info`: the stream's description as labels.
    fn add_info(&mut self, k: &str, stream: &StreamInfo) {
        let layout = &stream.layout;
        let (w, hgt) = (layout.width().to_string(), layout.height().to_string());
        // Spelled as `ls`, `inspect` and `top` print them.
        let policy = Policy::from_wire(stream.policy).map_or("unknown", policy_name);
        let memory = stream.memory.name();
        let share = stream.cuda_share().map_or("", |share| share.name());
        let format = layout.format().name();
        self.info.add(
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
    }

    fn into_families(self) -> [Family; 15] {
        [
            self.up,
            self.unread,
            self.pid,
            self.stale,
            self.info,
            self.published,
            self.rate,
            self.nominal,
            self.age,
            self.ring,
            self.subscribers,
            self.waits,
            self.wait_seconds,
            self.dropped_subscribers,
            self.copied,
        ]
    }
}

/// The families with one sample per active subscriber (what it reports,
/// and how far behind it is), in the page's order.
struct SubscriberFamilies {
    received: Family,
    lost: Family,
    copied: Family,
    lag: Family,
    lag_seconds: Family,
    ack_age: Family,
}

impl SubscriberFamilies {
    fn new() -> SubscriberFamilies {
        SubscriberFamilies {
            received: Family::new(
                "cuframes_subscriber_frames_received_total",
                "counter",
                "Frames the subscriber received, as it reports them",
            ),
            lost: Family::new(
                "cuframes_subscriber_frames_lost_total",
                "counter",
                "Frames the subscriber lost, by reason, as it reports them",
            ),
            copied: Family::new(
                "cuframes_subscriber_frames_copied_total",
                "counter",
                "Frames the subscriber received as private copies, as it reports them",
            ),
            lag: Family::new(
                "cuframes_subscriber_lag_frames",
                "gauge",
                "Frames published since the newest one the subscriber released",
            ),
            lag_seconds: Family::new(
                "cuframes_subscriber_lag_seconds",
                "gauge",
                "The subscriber's lag at the current publish rate",
            ),
            ack_age: Family::new(
                "cuframes_subscriber_last_ack_age_seconds",
                "gauge",
                "How long ago the subscriber last released a frame",
            ),
        }
    }

    /// The `active` subscribers of key `k`, whose newest frame is `global_seq`.
    fn add(&mut self, k: &str, global_seq: u64, fps: Option<f64>, active: &[SubscriberView], now_ns: u64) {
        for s in active {
            let bit = s.bit.to_string();
            let report = s.report.name();
            let labels = [
                ("key", k),
                ("subscriber", s.name.as_str()),
                ("bit", bit.as_str()),
                ("report", report),
            ];
            self.received.add(&labels, s.received as f64);
            self.copied.add(&labels, s.copied as f64);
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
            self.lost
                .add(&with_reason("dropped"), (s.dropped - overwritten) as f64);
            self.lost.add(&with_reason("overwritten"), overwritten as f64);
            let behind = global_seq.saturating_sub(s.last_seen_seq);
            self.lag.add(&labels, behind as f64);
            if let Some(fps) = fps.filter(|f| *f > 0.0) {
                self.lag_seconds.add(&labels, behind as f64 / fps);
            }
            if s.last_ack_ns > 0 {
                let age_ns = now_ns.saturating_sub(s.last_ack_ns as u64);
                self.ack_age.add(&labels, age_ns as f64 / 1e9);
            }
        }
    }

    fn into_families(self) -> [Family; 6] {
        [
            self.received,
            self.lost,
            self.copied,
            self.lag,
            self.lag_seconds,
            self.ack_age,
        ]
    }
}

/// The exporter's own families: its scrape, and the keys it found.
fn exporter_families(keys: &[(String, Result<Inspection, String>)], scrape: ScrapeStats) -> [Family; 4] {
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
    errors.add(&[], scrape.errors_total as f64);
    duration.add(&[], scrape.seconds);
    count.add(&[], keys.len() as f64);
    unreadable_now.add(&[], keys.iter().filter(|(_, ins)| unreadable(ins)).count() as f64);
    [errors, duration, count, unreadable_now]
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
