//! What the publisher measures of one transport, and the one way a
//! transport's result is built from its parts ([`Measured::from_parts`]).

use std::time::Instant;

use cuframes::clock;

use super::workers::{Worker, collect};
use crate::clock::{pace, process_cpu_ns};
use crate::plan::Plan;
use crate::worker_result::SubscriberResult;

/// The publisher's clocks over one transport's frames: started just before
/// the first frame, stamped when the last frame was published
/// ([`Self::all_published`]) and when the publisher's work ended
/// ([`Self::stop`]: a transport may wait for its subscribers in between).
#[derive(Debug)]
pub struct PublisherClock {
    cpu_at_start: u64,
    first_ns: u64,
    started: Instant,
    published_ns: Option<u64>,
}

impl PublisherClock {
    pub fn start() -> PublisherClock {
        PublisherClock {
            cpu_at_start: process_cpu_ns(),
            first_ns: clock::monotonic_ns(),
            started: Instant::now(),
            published_ns: None,
        }
    }

    /// Sleeps until frame `index` is due (`--fps`).
    pub fn pace(&self, plan: &Plan, index: u64) {
        pace(self.started, plan.fps, index);
    }

    /// The last frame is out.
    pub fn all_published(&mut self) {
        self.published_ns = Some(clock::monotonic_ns());
    }

    /// The publisher's work is done; `error` is what cut it short. (Not
    /// stamped by [`Self::all_published`], the last frame went out now.)
    pub fn stop(self, error: Option<String>) -> PublisherSide {
        PublisherSide {
            cpu_ns: process_cpu_ns().saturating_sub(self.cpu_at_start),
            first_ns: self.first_ns,
            published_ns: self.published_ns.unwrap_or_else(clock::monotonic_ns),
            error,
        }
    }
}

/// What the publisher's side of one transport measured.
#[derive(Debug)]
pub struct PublisherSide {
    /// CPU time of this process (every thread) over the frames.
    pub cpu_ns: u64,
    /// CLOCK_MONOTONIC before the first frame.
    pub first_ns: u64,
    /// CLOCK_MONOTONIC after the last frame was published.
    pub published_ns: u64,
    pub error: Option<String>,
}

/// What only the cuframes publisher reports (None for the baselines).
#[derive(Debug, Default)]
pub struct PublisherCounters {
    /// CUDA: frames/s of the device copies alone (the GPU's bound on the ring).
    pub device_copy_fps: Option<f64>,
    /// strict-wait: (publishes that waited for a slot, ns spent waiting).
    pub ack_waits: Option<(u64, u64)>,
    /// Frames the publisher copied with its CUDA copy kernel.
    pub kernel_copies: Option<u64>,
}

/// Everything measured of one transport: the publisher's side and every
/// subscriber's.
#[derive(Debug)]
pub struct Measured {
    pub publisher: PublisherSide,
    pub counters: PublisherCounters,
    pub subscribers: Vec<SubscriberResult>,
    /// The error the report shows: the first a subscriber reported, else
    /// the publisher's (why: `root_cause`).
    pub error: Option<String>,
}

impl Measured {
    /// The result of one transport, built the one way for every transport:
    /// the publisher's side and counters, and the workers' results
    /// (collected here, each within the timeout).
    pub fn from_parts(
        plan: &Plan,
        publisher: PublisherSide,
        counters: PublisherCounters,
        workers: Vec<Worker>,
    ) -> Measured {
        let (subscribers, subscriber_error) = collect(plan, workers);
        let error = root_cause(publisher.error.clone(), subscriber_error);
        Measured {
            publisher,
            counters,
            subscribers,
            error,
        }
    }
}

/// When both sides failed, the subscriber's error is the one shown: it
/// happened first. A publisher that fails ends the stream cleanly (it
/// closes the pipes, shuts the ring down), so its subscribers end without
/// an error of their own; a subscriber that fails leaves the publisher
/// failing after it (a broken pipe, a slot never released, a flush that
/// times out), an effect whose cause is the subscriber's error.
fn root_cause(publisher: Option<String>, subscriber: Option<String>) -> Option<String> {
    subscriber.or(publisher)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subscriber_error_is_the_cause() {
        let (p, s) = (
            Some("broken pipe".to_owned()),
            Some("subscriber 0: no frame".to_owned()),
        );
        assert_eq!(root_cause(p.clone(), s.clone()), s);
        assert_eq!(root_cause(p.clone(), None), p);
        assert_eq!(root_cause(None, None), None);
    }
}
