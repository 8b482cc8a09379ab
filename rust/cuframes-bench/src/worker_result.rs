//! What one worker measured: the JSON line it prints last
//! ([`SubscriberResult::to_json`]), read back by the publisher
//! ([`SubscriberResult::from_json`]).

use serde_json::{Value, json};

/// One subscriber's figures over one transport.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SubscriberResult {
    pub index: usize,
    /// Frames received (not dropped, not torn).
    pub frames: u64,
    pub verified: u64,
    pub mismatched: u64,
    /// Frames overwritten while read: counted as dropped, not judged.
    pub torn: u64,
    /// Frames checked whole (every byte).
    pub whole_frames: u64,
    pub dropped: u64,
    pub last_seq: u64,
    pub first_ready_ns: u64,
    pub last_ready_ns: u64,
    /// CPU time of the receive loop, whole-frame checks excluded.
    pub cpu_ns: u64,
    /// CPU time of the whole-frame checks (and their device copies).
    pub verify_cpu_ns: u64,
    /// Per frame: ready − publish stamp.
    pub latency_ns: Vec<u64>,
    /// Per frame: ready − the publisher's start on the frame.
    pub handover_ns: Vec<u64>,
    /// What ended the receive loop early.
    pub error: Option<String>,
}

impl SubscriberResult {
    pub fn to_json(&self) -> Value {
        json!({
            "index": self.index,
            "frames": self.frames,
            "verified": self.verified,
            "mismatched": self.mismatched,
            "torn": self.torn,
            "whole_frames": self.whole_frames,
            "dropped": self.dropped,
            "last_seq": self.last_seq,
            "first_ready_ns": self.first_ready_ns,
            "last_ready_ns": self.last_ready_ns,
            "cpu_ns": self.cpu_ns,
            "verify_cpu_ns": self.verify_cpu_ns,
            "latency_ns": self.latency_ns,
            "handover_ns": self.handover_ns,
            "error": self.error,
        })
    }

    /// A missing or malformed figure reads as 0 (empty, no error).
    pub fn from_json(v: &Value) -> SubscriberResult {
        let u = |name: &str| v[name].as_u64().unwrap_or(0);
        let list = |name: &str| {
            v[name]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default()
        };
        SubscriberResult {
            index: u("index") as usize,
            frames: u("frames"),
            verified: u("verified"),
            mismatched: u("mismatched"),
            torn: u("torn"),
            whole_frames: u("whole_frames"),
            dropped: u("dropped"),
            last_seq: u("last_seq"),
            first_ready_ns: u("first_ready_ns"),
            last_ready_ns: u("last_ready_ns"),
            cpu_ns: u("cpu_ns"),
            verify_cpu_ns: u("verify_cpu_ns"),
            latency_ns: list("latency_ns"),
            handover_ns: list("handover_ns"),
            error: v["error"].as_str().map(str::to_owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_round_trips() {
        let sent = SubscriberResult {
            index: 2,
            frames: 5,
            verified: 4,
            mismatched: 1,
            latency_ns: vec![3, 1, 2],
            error: Some("no frame".into()),
            ..SubscriberResult::default()
        };
        let line = sent.to_json().to_string();
        let got = SubscriberResult::from_json(&serde_json::from_str(&line).unwrap());
        assert_eq!(got, sent);
    }
}
