//! The clocks every measurement reads, and the two ways the publisher
//! waits. Times are CLOCK_MONOTONIC ([`cuframes::clock`]), one clock for
//! every process; CPU times are per process or per thread.

use std::time::{Duration, Instant};

use cuframes::{Error, ErrorKind, Result};
use nix::time::{ClockId, clock_gettime};

fn clock_ns(id: ClockId) -> u64 {
    clock_gettime(id).map_or(0, |t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
}

/// CPU time (user + system) of this process, every thread, in ns.
pub fn process_cpu_ns() -> u64 {
    clock_ns(ClockId::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time of the calling thread, in ns.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(ClockId::CLOCK_THREAD_CPUTIME_ID)
}

/// Sleeps until frame `index` is due at `fps` frames/s from `started`
/// (`--fps`; 0: never sleeps).
pub fn pace(started: Instant, fps: f64, index: u64) {
    if fps > 0.0 {
        let due = started + Duration::from_secs_f64(index as f64 / fps);
        let left = due.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            std::thread::sleep(left);
        }
    }
}

/// Waits until `cond` holds, with a short spin, then sleeps growing to
/// 200 µs (as the library's strict-wait); a timeout error saying `what`
/// after `timeout`.
pub fn wait_until(
    timeout: Duration,
    what: impl Fn() -> String,
    mut cond: impl FnMut() -> bool,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut round = 0u32;
    while !cond() {
        if Instant::now() >= deadline {
            return Err(Error::new(ErrorKind::Timeout, what()));
        }
        if round < 64 {
            std::hint::spin_loop();
        } else if round < 128 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros((round as u64 - 127).min(200)));
        }
        round += 1;
    }
    Ok(())
}
