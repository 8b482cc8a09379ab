//! The subscriber processes of `cuframes bench` (hidden subcommand
//! `__bench-worker`). Each prints `ready` on stdout once set up, receives
//! the frames of one transport, and prints one JSON line with what it saw.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::invalid;
use cuframes::{Error, ErrorKind, MemoryKind, PixelFormat, Result, Subscriber, SubscriberConfig, clock};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde_json::json;

use super::frames::{Checker, Depth, Geometry, Verify};
use super::gpu::Gpu;
use super::shm::{ShmRing, WRITING};
use super::{Transport, thread_cpu_ns};
use crate::args::BenchWorkerArgs;
use crate::publish::parse_size;

/// What one subscriber measured.
#[derive(Debug, Default)]
struct Tally {
    received: u64,
    dropped: u64,
    last_seq: u64,
    /// ready − publish stamp, ns.
    latency: Vec<u64>,
    /// ready − the publisher's start on the frame, ns.
    handover: Vec<u64>,
    first_ready: u64,
    last_ready: u64,
    /// CPU spent on whole-frame checks (and their device copies), excluded.
    verify_cpu: u64,
}

impl Tally {
    fn frame(&mut self, seq: u64, ready: u64, published: u64, started: u64) {
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
fn timed<T>(tally: &mut Tally, depth: Depth, check: impl FnOnce() -> T) -> T {
    if depth != Depth::Whole {
        return check();
    }
    let before = thread_cpu_ns();
    let out = check();
    tally.verify_cpu += thread_cpu_ns().saturating_sub(before);
    out
}

struct Setup {
    geometry: Geometry,
    checker: Checker,
    gpu: Option<Gpu>,
    a: BenchWorkerArgs,
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
        Transport::Cuframes => cuframes_role(&mut setup, &mut tally),
        Transport::Pipe => pipe_role(&mut setup, &mut tally),
        Transport::ShmCopy => shm_role(&mut setup, &mut tally),
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

fn ready() -> Result<u64> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")
        .and_then(|()| out.flush())
        .map_err(|e| Error::io("writing ready", &e))?;
    Ok(super::process_cpu_ns())
}

/// Runs the receive loop `body` between `ready` and the end; returns the
/// error that ended it (if any) and the process CPU time it took.
fn measured(body: impl FnOnce() -> Result<()>) -> (Option<Error>, u64) {
    let start = match ready() {
        Ok(cpu) => cpu,
        Err(e) => return (Some(e), 0),
    };
    let error = body().err();
    (error, super::process_cpu_ns().saturating_sub(start))
}

fn cuframes_role(s: &mut Setup, tally: &mut Tally) -> (Option<Error>, u64) {
    let mut config = SubscriberConfig::new(s.a.target.clone());
    config.name = format!("bench-{}", s.a.index);
    let mut sub = match Subscriber::connect(config) {
        Ok(sub) => sub,
        Err(e) => return (Some(e), 0),
    };
    let layout = sub.info().layout.clone();
    let memory = sub.info().memory;
    let timeout = Duration::from_millis(s.a.timeout_ms);
    let mut download: Vec<Vec<u8>> = vec![Vec::new(); layout.planes().len()];
    let (error, cpu) = measured(|| {
        loop {
            let lease = match sub.next(Some(timeout)) {
                Ok(lease) => lease,
                Err(e) if e.kind() == ErrorKind::Disconnected && sub.publisher_shut_down() => return Ok(()),
                Err(e) => return Err(e),
            };
            if s.a.cuda_sync
                && let Some(gpu) = &s.gpu
            {
                gpu.sync()?;
            }
            let ready = clock::monotonic_ns();
            let seq = lease.seq();
            let (published, started) = (lease.publish_mono_ns(), lease.pts_ns() as u64);
            let torn_before = s.checker.torn;
            let planes = layout.planes();
            let geometry = |p: usize| (planes[p].row_bytes, planes[p].rows);
            match (s.checker.depth(seq), memory) {
                (None, _) | (Some(Depth::Rows), MemoryKind::Cuda) => {}
                (Some(depth), MemoryKind::Host) => timed(tally, depth, || {
                    s.checker.check(
                        seq,
                        depth,
                        planes.len(),
                        geometry,
                        |p| (lease.host_plane(p).unwrap_or(&[]), planes[p].pitch),
                        || lease.is_intact(),
                    )
                }),
                (Some(depth), MemoryKind::Cuda) => timed(tally, depth, || -> Result<()> {
                    for (p, buf) in download.iter_mut().enumerate() {
                        lease.read_plane(p, buf)?;
                    }
                    s.checker.check(
                        seq,
                        depth,
                        planes.len(),
                        geometry,
                        |p| (download[p].as_slice(), planes[p].pitch),
                        || lease.is_intact(),
                    );
                    Ok(())
                })?,
            }
            // Overwritten while leased (drop-oldest): dropped, not received.
            let overwritten = lease.release().is_err();
            if !overwritten && s.checker.torn == torn_before {
                tally.frame(seq, ready, published, started);
            }
            if seq >= s.a.frames {
                return Ok(());
            }
        }
    });
    let stats = sub.stats();
    tally.dropped = stats.dropped + stats.overwritten.max(s.checker.torn);
    (error, cpu)
}

/// Stdin without Rust's buffering (poll on the descriptor must see every
/// byte that was not read yet).
fn raw_stdin() -> Result<std::fs::File> {
    std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .map_err(|e| Error::io("duplicating stdin", &e))
}

/// Waits until `fd` is readable, up to `timeout_ms`.
fn wait_readable(fd: impl AsFd, timeout_ms: u64, what: &str) -> Result<()> {
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

/// The pipe frame header: seq and the publisher's start time (LE u64s).
pub const PIPE_HEADER: usize = 16;

fn pipe_role(s: &mut Setup, tally: &mut Tally) -> (Option<Error>, u64) {
    let g = &s.geometry;
    let mut host = vec![0u8; g.packed_size];
    let mut check_buf = Vec::new();
    let mut device = match &s.gpu {
        Some(gpu) => match gpu.alloc(g.packed_size) {
            Ok(d) => Some(d),
            Err(e) => return (Some(e), 0),
        },
        None => None,
    };
    let mut input = match raw_stdin() {
        Ok(f) => f,
        Err(e) => return (Some(e), 0),
    };
    let (error, cpu) = measured(|| {
        loop {
            let mut header = [0u8; PIPE_HEADER];
            wait_readable(&input, s.a.timeout_ms, "frame on the pipe")?;
            match input.read_exact(&mut header) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(Error::io("reading the pipe", &e)),
            }
            input
                .read_exact(&mut host)
                .map_err(|e| Error::io("reading a frame from the pipe", &e))?;
            let seq = u64::from_le_bytes(header[0..8].try_into().expect("8 bytes"));
            let started = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
            if let (Some(gpu), Some(dev)) = (&s.gpu, device.as_mut()) {
                gpu.upload_into(&host, dev)?;
                if s.a.cuda_sync {
                    gpu.sync()?;
                }
            }
            let ready = clock::monotonic_ns();
            // A pipe has no commit point: the frame is published when its write starts.
            tally.frame(seq, ready, started, started);
            check_packed(s, tally, seq, &host, device.as_ref(), &mut check_buf, || true)?;
            if seq >= s.a.frames {
                return Ok(());
            }
        }
    });
    tally.dropped = s.a.frames.saturating_sub(tally.received);
    (error, cpu)
}

/// Checks a packed frame: in `host`, or (CUDA) copied back from `device`.
fn check_packed(
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

fn shm_role(s: &mut Setup, tally: &mut Tally) -> (Option<Error>, u64) {
    let g = s.geometry.clone();
    let ring = match ShmRing::open(Path::new(&s.a.target), s.a.ring, g.packed_size) {
        Ok(r) => r,
        Err(e) => return (Some(e), 0),
    };
    let ring_size = ring.ring() as u64;
    let mut host = vec![0u8; g.packed_size];
    let mut check_buf = Vec::new();
    let mut device = match &s.gpu {
        Some(gpu) => match gpu.alloc(g.packed_size) {
            Ok(d) => Some(d),
            Err(e) => return (Some(e), 0),
        },
        None => None,
    };
    let done = ring.done(s.a.index);
    let mut wake = match raw_stdin() {
        Ok(f) => f,
        Err(e) => return (Some(e), 0),
    };
    let mut next = 1u64;
    let (error, cpu) = measured(|| {
        let mut closed = false;
        loop {
            let global = ring.global().load(Ordering::Acquire);
            // Frames older than the ring are gone.
            let first_readable = global.saturating_sub(ring_size - 1).max(1);
            if next < first_readable {
                tally.dropped += first_readable - next;
                next = first_readable;
            }
            while next <= global {
                let seq = next;
                next += 1;
                let slot = (seq % ring_size) as usize;
                let in_slot = ring.slot_seq(slot).load(Ordering::Acquire);
                if in_slot != seq {
                    debug_assert!(in_slot == WRITING || in_slot > seq);
                    tally.dropped += 1;
                    done.store(seq, Ordering::Release);
                    continue;
                }
                let published = ring.slot_published(slot).load(Ordering::Relaxed);
                let started = ring.slot_started(slot).load(Ordering::Relaxed);
                let bytes = ring.slot(slot);
                match (&s.gpu, device.as_mut()) {
                    (Some(gpu), Some(dev)) => {
                        gpu.upload_into(bytes, dev)?;
                        if s.a.cuda_sync {
                            gpu.sync()?;
                        }
                    }
                    _ => host.copy_from_slice(bytes),
                }
                let intact = ring.seq_after_read(slot) == seq;
                done.store(seq, Ordering::Release);
                if !intact {
                    tally.dropped += 1;
                    continue;
                }
                let ready = clock::monotonic_ns();
                tally.frame(seq, ready, published, started);
                check_packed(s, tally, seq, &host, device.as_ref(), &mut check_buf, || true)?;
                if seq >= s.a.frames {
                    return Ok(());
                }
            }
            if closed {
                return Ok(());
            }
            // Sleep until the publisher writes a wake-up byte (or closes the pipe).
            wait_readable(&wake, s.a.timeout_ms, "frame notification")?;
            let mut bytes = [0u8; 4096];
            match wake.read(&mut bytes) {
                Ok(0) => closed = true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("reading wake-ups", &e)),
            }
        }
    });
    (error, cpu)
}
