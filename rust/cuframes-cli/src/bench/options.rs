//! `cuframes bench`'s options, checked into a [`Plan`]: the first bad
//! option is named, with what it takes.

use std::time::Duration;

use cuframes::{Error, MemoryKind, MemoryRequest, PixelFormat, Policy, Result};
use cuframes_bench::{Geometry, MAX_RING, MAX_SUBSCRIBERS, Plan, Transport, Verify};

use crate::args::{BenchArgs, MemoryArg, TransportArg, invalid, legacy_ms};
use crate::publish::parse_size;

impl From<TransportArg> for Transport {
    fn from(t: TransportArg) -> Transport {
        match t {
            TransportArg::Cuframes => Transport::Cuframes,
            TransportArg::Pipe => Transport::Pipe,
            TransportArg::ShmCopy => Transport::ShmCopy,
        }
    }
}

fn bad(option: &str, value: impl std::fmt::Display, hint: &str) -> Error {
    invalid(format!("bad {option} '{value}': {hint}"))
}

pub fn plan(a: &BenchArgs) -> Result<Plan> {
    let memory = match a.memory {
        MemoryArg::Host => MemoryKind::Host,
        MemoryArg::Cuda => MemoryKind::Cuda,
        MemoryArg::Auto => MemoryRequest::Auto.resolve()?,
    };
    let geometry = geometry(a)?;
    check_counts(a)?;
    let timeout = timeout(a)?;
    let verify = Verify::parse(a.verify.name(), a.verify_every).map_err(invalid)?;
    let transports = transports(a)?;
    check_plot(a)?;
    Ok(Plan {
        transports,
        memory,
        geometry,
        subscribers: a.subscribers,
        ring: a.ring,
        policy: Policy::from(a.policy),
        frames: a.frames,
        fps: a.fps,
        verify,
        cuda_sync: a.cuda_sync,
        cuda_share: a.cuda_share.into(),
        timeout,
    })
}

/// `--format` and `--size`.
fn geometry(a: &BenchArgs) -> Result<Geometry> {
    let (width, height) =
        parse_size(&a.size).map_err(|_| bad("--size", &a.size, "use WxH, e.g. 1920x1080"))?;
    Geometry::new(PixelFormat::from(a.format), width, height)
        .map_err(|e| bad("--size", &a.size, &e.to_string()))
}

/// `--subscribers`, `--ring`, `--frames` and `--fps`.
fn check_counts(a: &BenchArgs) -> Result<()> {
    if a.subscribers == 0 || a.subscribers > MAX_SUBSCRIBERS {
        return Err(bad(
            "--subscribers",
            a.subscribers,
            &format!("use 1 to {MAX_SUBSCRIBERS}"),
        ));
    }
    if a.ring == 0 || a.ring > MAX_RING {
        return Err(bad("--ring", a.ring, &format!("use 1 to {MAX_RING}")));
    }
    if a.frames == 0 || a.frames > 100_000_000 {
        return Err(bad("--frames", a.frames, "use 1 to 100000000"));
    }
    if !a.fps.is_finite() || a.fps < 0.0 || a.fps > 10_000_000.0 {
        return Err(bad(
            "--fps",
            a.fps,
            "use 0 (as fast as possible) or a rate up to 10000000",
        ));
    }
    Ok(())
}

/// `--timeout` (or the old `--timeout-ms`), at least 1 ms.
fn timeout(a: &BenchArgs) -> Result<Duration> {
    let timeout = legacy_ms(a.timeout, a.timeout_ms, "timeout-ms", "timeout")?;
    if timeout.get() < Duration::from_millis(1) {
        return Err(bad("--timeout", timeout, "use at least 1ms"));
    }
    Ok(timeout.get())
}

/// `--transports`: at least one, each once, in the order given.
fn transports(a: &BenchArgs) -> Result<Vec<Transport>> {
    let listed = || {
        a.transports
            .iter()
            .map(|t| Transport::from(*t).name())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut transports = Vec::new();
    for t in a.transports.iter().map(|t| Transport::from(*t)) {
        if transports.contains(&t) {
            return Err(bad(
                "--transports",
                listed(),
                &format!("'{}' is listed twice", t.name()),
            ));
        }
        transports.push(t);
    }
    if transports.is_empty() {
        return Err(bad(
            "--transports",
            listed(),
            "name at least one of cuframes, pipe, shm-copy",
        ));
    }
    Ok(transports)
}

/// `--plot`: a file in an existing directory.
fn check_plot(a: &BenchArgs) -> Result<()> {
    let Some(plot) = &a.plot else { return Ok(()) };
    let dir = plot.parent().filter(|d| !d.as_os_str().is_empty());
    if dir.is_some_and(|d| !d.is_dir()) || plot.is_dir() {
        return Err(bad(
            "--plot",
            plot.display(),
            "not a file in an existing directory",
        ));
    }
    Ok(())
}
