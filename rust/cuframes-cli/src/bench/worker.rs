//! The subscriber processes of `cuframes bench` (hidden subcommand
//! `__bench-worker`). Each prints `ready` on stdout once set up, receives
//! the frames of one transport, and prints one JSON line with what it saw.

use std::io::Write;
use std::os::fd::AsFd;
use std::process::ExitCode;

use super::invalid;
use cuframes::{Error, ErrorKind, PixelFormat, Result};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde_json::json;

use super::frames::{Checker, Depth, Geometry, Verify};
use super::gpu::Gpu;
use super::{Transport, thread_cpu_ns};
use crate::args::BenchWorkerArgs;
use crate::publish::parse_size;

/// What one subscriber measured.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) received: u64,
    pub(super) dropped: u64,
    pub(super) last_seq: u64,
    /// ready − publish stamp, ns.
    pub(super) latency: Vec<u64>,
    /// ready − the publisher's start on the frame, ns.
    pub(super) handover: Vec<u64>,
    pub(super) first_ready: u64,
    pub(super) last_ready: u64,
    /// CPU spent on whole-frame checks (and their device copies), excluded.
    pub(super) verify_cpu: u64,
}

impl Tally {
    pub(super) fn frame(&mut self, seq: u64, ready: u64, published: u64, started: u64) {
        self.received += 1;
        self.last_seq = seq;
        if self.first_ready == 0 {
            self.first_ready = ready;
        }
        self.last_ready = ready;
        self.latency.push(ready.saturating_sub(published));
        self.handover.push(ready.saturating_sub(started));
    }
}

/// Runs `check` (a whole-frame check) and books its CPU time apart.
pub(super) fn timed<T>(tally: &mut Tally, depth: Depth, check: impl FnOnce() -> T) -> T {
    if depth != Depth::Whole {
        return check();
    }
    let before = thread_cpu_ns();
    let out = check();
    tally.verify_cpu += thread_cpu_ns().saturating_sub(before);
    out
}

pub(super) struct Setup {
    pub(super) geometry: Geometry,
    pub(super) checker: Checker,
    pub(super) gpu: Option<Gpu>,
    pub(super) a: BenchWorkerArgs,
}

pub fn run(a: BenchWorkerArgs) -> Result<ExitCode> {
    let transport = Transport::parse(&a.transport)?;
    let format = PixelFormat::parse(&a.format)?;
    let (width, height) = parse_size(&a.size)?;
    let geometry = Geometry::new(format, width, height)?;
    let verify = Verify::parse(&a.verify, a.verify_every).map_err(invalid)?;
    let checker = Checker::new(format, verify, a.pool);
    let gpu = match a.memory.as_str() {
        "cuda" => Some(Gpu::open()?),
        _ => None,
    };
    let mut setup = Setup {
        geometry,
        checker,
        gpu,
        a,
    };
    let mut tally = Tally {
        latency: Vec::with_capacity(setup.a.frames.min(1 << 22) as usize),
        handover: Vec::with_capacity(setup.a.frames.min(1 << 22) as usize),
        ..Tally::default()
    };
    let (error, cpu) = match transport {
        Transport::Cuframes => super::via_cuframes::receive(&mut setup, &mut tally),
        Transport::Pipe => super::via_pipe::receive(&mut setup, &mut tally),
        Transport::ShmCopy => super::via_shm::receive(&mut setup, &mut tally),
    };
    let c = &setup.checker;
    let summary = json!({
        "index": setup.a.index,
        "frames": tally.received,
        "verified": c.verified,
        "mismatched": c.mismatched,
        "torn": c.torn,
        "whole_frames": c.whole_frames,
        "dropped": tally.dropped,
        "last_seq": tally.last_seq,
        "first_ready_ns": tally.first_ready,
        "last_ready_ns": tally.last_ready,
        "cpu_ns": cpu.saturating_sub(tally.verify_cpu),
        "verify_cpu_ns": tally.verify_cpu,
        "latency_ns": tally.latency,
        "handover_ns": tally.handover,
        "error": error.map(|e| e.to_string()),
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "{summary}").map_err(|e| Error::io("writing the result", &e))?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn ready() -> Result<u64> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")
        .and_then(|()| out.flush())
        .map_err(|e| Error::io("writing ready", &e))?;
    Ok(super::process_cpu_ns())
}

/// Runs the receive loop `body` between `ready` and the end; returns the
/// error that ended it (if any) and the process CPU time it took.
pub(super) fn measured(body: impl FnOnce() -> Result<()>) -> (Option<Error>, u64) {
    let start = match ready() {
        Ok(cpu) => cpu,
        Err(e) => return (Some(e), 0),
    };
    let error = body().err();
    (error, super::process_cpu_ns().saturating_sub(start))
}

/// Stdin without Rust's buffering (poll on the descriptor must see every
/// byte that was not read yet).
pub(super) fn raw_stdin() -> Result<std::fs::File> {
    std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .map_err(|e| Error::io("duplicating stdin", &e))
}

/// Waits until `fd` is readable, up to `timeout_ms`.
pub(super) fn wait_readable(fd: impl AsFd, timeout_ms: u64, what: &str) -> Result<()> {
    let timeout = PollTimeout::try_from(timeout_ms.min(i32::MAX as u64) as i32).unwrap_or(PollTimeout::MAX);
    loop {
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) => {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!("no {what} within {timeout_ms} ms"),
                ));
            }
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(Error::os("poll", e)),
        }
    }
}

/// Checks a packed frame: in `host`, or (CUDA) copied back from `device`.
pub(super) fn check_packed(
    s: &mut Setup,
    tally: &mut Tally,
    seq: u64,
    host: &[u8],
    device: Option<&cudarc::driver::CudaSlice<u8>>,
    check_buf: &mut Vec<u8>,
    intact: impl FnOnce() -> bool,
) -> Result<()> {
    let Some(depth) = s.checker.depth(seq) else {
        return Ok(());
    };
    let g = &s.geometry;
    let geometry = |p: usize| (g.packed[p].row_bytes, g.packed[p].rows);
    match (&s.gpu, device) {
        (Some(gpu), Some(device)) => {
            if depth == Depth::Rows {
                return Ok(()); // device frames: only whole-frame checks
            }
            timed(tally, depth, || -> Result<()> {
                check_buf.resize(g.packed_size, 0);
                gpu.download(device, check_buf)?;
                let frame = check_buf.as_slice();
                s.checker.check(
                    seq,
                    depth,
                    g.packed.len(),
                    geometry,
                    |p| g.packed_plane(frame, p),
                    intact,
                );
                Ok(())
            })
        }
        _ => {
            timed(tally, depth, || {
                s.checker.check(
                    seq,
                    depth,
                    g.packed.len(),
                    geometry,
                    |p| g.packed_plane(host, p),
                    intact,
                )
            });
            Ok(())
        }
    }
}
