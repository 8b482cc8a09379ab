//! The pipe transport of `cuframes bench` (`ffmpeg -f rawvideo pipe:`):
//! the publisher writes each packed frame, behind a small header, to every
//! worker's stdin; each worker reads it whole.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsFd;

use cudarc::driver::CudaSlice;
use cuframes::{Error, ErrorKind, Result, clock};
use nix::fcntl::{FcntlArg, fcntl};

use super::carrier::Carrier;
use crate::plan::Plan;
use crate::publishing::measured::{Measured, PublisherClock, PublisherCounters};
use crate::publishing::source::Source;
use crate::publishing::workers::{Worker, spawn_workers};
use crate::receiving::check::check_packed;
use crate::receiving::stdin::{raw_stdin, wait_readable};
use crate::receiving::{Setup, Tally, receive_measured};
use crate::transport::Transport;

#[derive(Debug)]
pub struct ViaPipe;

impl Carrier for ViaPipe {
    fn publish(&self, plan: &Plan, source: &mut Source, _tag: &str) -> Result<Measured> {
        let mut workers = spawn_workers(plan, Transport::Pipe, "")?;
        for w in &workers {
            if let Some(stdin) = &w.stdin {
                // As large as an unprivileged process may (pipe-max-size, 1 MiB by default).
                let _ = fcntl(stdin.as_fd(), FcntlArg::F_SETPIPE_SZ(1 << 20));
            }
        }
        let mut clock = PublisherClock::start();
        let sent = (0..plan.frames).try_for_each(|i| {
            clock.pace(plan, i);
            send_frame(plan, source, &mut workers, i)
        });
        clock.all_published();
        let publisher = clock.stop(sent.err().map(|e| e.to_string()));
        Ok(Measured::from_parts(
            plan,
            publisher,
            PublisherCounters::default(),
            workers,
        ))
    }

    fn receive(&self, s: &mut Setup, tally: &mut Tally) -> (Option<Error>, u64) {
        let mut reader = match PipeReader::open(s) {
            Ok(reader) => reader,
            Err(e) => return (Some(e), 0),
        };
        let (error, cpu) = receive_measured(|| reader.read_all(s, tally));
        tally.dropped = s.args.frames.saturating_sub(tally.received);
        (error, cpu)
    }
}

/// The pipe frame header: seq and the publisher's start time (LE u64s).
const PIPE_HEADER: usize = 16;

fn header(seq: u64, started_ns: u64) -> [u8; PIPE_HEADER] {
    let mut header = [0u8; PIPE_HEADER];
    header[0..8].copy_from_slice(&seq.to_le_bytes());
    header[8..16].copy_from_slice(&started_ns.to_le_bytes());
    header
}

/// (seq, the publisher's start time) of a [`header`].
fn parse_header(header: &[u8; PIPE_HEADER]) -> (u64, u64) {
    let word = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"));
    (word(0), word(8))
}

// ------------------------------------------------------------- publisher side

/// Writes frame `i` (seq `i + 1`) to every worker's pipe.
fn send_frame(plan: &Plan, source: &mut Source, workers: &mut [Worker], i: u64) -> Result<()> {
    let t0 = clock::monotonic_ns();
    let frame = (i % plan.pool()) as usize;
    let bytes: &[u8] = match source {
        Source::Host(frames) => &frames[frame],
        Source::Cuda { gpu, frames, staging } => {
            gpu.download(&frames[frame], staging)?;
            staging
        }
    };
    let header = header(i + 1, t0);
    for w in workers.iter_mut() {
        let stdin = w.stdin.as_mut().expect("piped");
        stdin
            .write_all(&header)
            .and_then(|()| stdin.write_all(bytes))
            .map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    format!("writing frame {} to subscriber {}: {e}", i + 1, w.index),
                )
            })?;
    }
    Ok(())
}

// ---------------------------------------------------------------- worker side

/// A worker's end of its pipe, and where a frame goes.
struct PipeReader {
    input: File,
    host: Vec<u8>,
    device: Option<CudaSlice<u8>>,
    check_buf: Vec<u8>,
}

impl PipeReader {
    fn open(s: &Setup) -> Result<PipeReader> {
        let host = vec![0u8; s.geometry.packed_size];
        let device = s.device_frame()?;
        Ok(PipeReader {
            input: raw_stdin()?,
            host,
            device,
            check_buf: Vec::new(),
        })
    }

    /// Reads, times and checks frames until the last one or the end of the pipe.
    fn read_all(&mut self, s: &mut Setup, tally: &mut Tally) -> Result<()> {
        while let Some((seq, started)) = self.read_frame(s.args.timeout_ms)? {
            if let Some(device) = self.device.as_mut() {
                s.upload(&self.host, device)?;
            }
            let ready = clock::monotonic_ns();
            // A pipe has no commit point: the frame is published when its write starts.
            tally.frame(seq, ready, started, started);
            check_packed(
                s,
                tally,
                seq,
                &self.host,
                self.device.as_ref(),
                &mut self.check_buf,
            )?;
            if seq >= s.args.frames {
                break;
            }
        }
        Ok(())
    }

    /// Reads the next frame into `host`: its seq and the publisher's start;
    /// None at the end of the pipe.
    fn read_frame(&mut self, timeout_ms: u64) -> Result<Option<(u64, u64)>> {
        let mut header = [0u8; PIPE_HEADER];
        wait_readable(&self.input, timeout_ms, "frame on the pipe")?;
        match self.input.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(Error::io("reading the pipe", &e)),
        }
        self.input
            .read_exact(&mut self.host)
            .map_err(|e| Error::io("reading a frame from the pipe", &e))?;
        Ok(Some(parse_header(&header)))
    }
}
