//! Clocks shared across processes.

use nix::time::{ClockId, clock_gettime};

fn ns(clock: ClockId) -> i64 {
    let t = clock_gettime(clock).expect("clock_gettime of a standard clock cannot fail");
    t.tv_sec() * 1_000_000_000 + t.tv_nsec()
}

/// CLOCK_MONOTONIC in ns: one clock for every process of the host, used for
/// publish→receive latency.
pub fn monotonic_ns() -> u64 {
    ns(ClockId::CLOCK_MONOTONIC) as u64
}

/// CLOCK_REALTIME in ns (subscriber slot `last_ack_ns`, spec: wall clock).
pub fn realtime_ns() -> i64 {
    ns(ClockId::CLOCK_REALTIME)
}
