//! The pipe transport of `cuframes bench` (`ffmpeg -f rawvideo pipe:`):
//! the publisher writes each packed frame, behind a small header, to every
//! worker's stdin; each worker reads it whole.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::time::Instant;

use cuframes::{Error, Result, clock};
use nix::fcntl::{FcntlArg, fcntl};

use super::worker::{Setup, Tally, check_packed, measured, raw_stdin, wait_readable};
use super::{Measured, Plan, Source, Transport, collect, pace, process_cpu_ns, spawn_workers};

// ------------------------------------------------------------- publisher side

pub(super) fn publish(plan: &Plan, source: &mut Source) -> Result<Measured> {
    let mut workers = spawn_workers(plan, Transport::Pipe, "")?;
    for w in &workers {
        if let Some(stdin) = &w.stdin {
            // As large as an unprivileged process may (pipe-max-size, 1 MiB by default).
            let _ = fcntl(stdin.as_fd(), FcntlArg::F_SETPIPE_SZ(1 << 20));
        }
    }
    let cpu = process_cpu_ns();
    let first_ns = clock::monotonic_ns();
    let started = Instant::now();
    let mut error = None;
    'frames: for i in 0..plan.frames {
        pace(plan, started, i);
        let t0 = clock::monotonic_ns();
        let frame = (i % plan.pool) as usize;
        let bytes: &[u8] = match source {
            Source::Host(frames) => &frames[frame],
            Source::Cuda { gpu, frames, staging } => {
                if let Err(e) = gpu.download(&frames[frame], staging) {
                    error = Some(e.to_string());
                    break;
                }
                staging
            }
        };
        let mut header = [0u8; PIPE_HEADER];
        header[0..8].copy_from_slice(&(i + 1).to_le_bytes());
        header[8..16].copy_from_slice(&t0.to_le_bytes());
        for w in workers.iter_mut() {
            let stdin = w.stdin.as_mut().expect("piped");
            if let Err(e) = stdin.write_all(&header).and_then(|()| stdin.write_all(bytes)) {
                error = Some(format!("writing frame {} to subscriber {}: {e}", i + 1, w.index));
                break 'frames;
            }
        }
    }
    let published_ns = clock::monotonic_ns();
    let cpu_ns = process_cpu_ns().saturating_sub(cpu);
    let (subscribers, sub_error) = collect(plan, workers);
    Ok(Measured {
        cpu_ns,
        first_ns,
        published_ns,
        subscribers,
        error: sub_error.or(error),
        device_copy_fps: None,
        ack_waits: None,
        kernel_copies: None,
    })
}

// ---------------------------------------------------------------- worker side

/// The pipe frame header: seq and the publisher's start time (LE u64s).
pub(super) const PIPE_HEADER: usize = 16;

pub(super) fn receive(s: &mut Setup, tally: &mut Tally) -> (Option<Error>, u64) {
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
