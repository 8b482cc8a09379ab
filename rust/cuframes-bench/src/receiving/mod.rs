//! The worker's kit, shared by every transport's `receive`: what a worker
//! is set up with ([`Setup`]) and counts ([`Tally`]), the frame of every
//! receive loop ([`receive_measured`]), checking frames ([`check`]) and
//! reading its stdin ([`stdin`]). Nothing here knows a transport.

pub mod check;
pub mod stdin;

use std::io::Write;

use cudarc::driver::CudaSlice;
use cuframes::{Error, Result};

use crate::clock::process_cpu_ns;
use crate::frames::{Checker, Geometry};
use crate::gpu::Gpu;
use crate::worker_args::WorkerArgs;

/// What a worker receives with: the frames' geometry, its checks, the GPU
/// (`--memory cuda`) and its command line.
#[derive(Debug)]
pub struct Setup {
    pub geometry: Geometry,
    pub checker: Checker,
    pub gpu: Option<Gpu>,
    pub args: WorkerArgs,
}

impl Setup {
    /// A device buffer for one packed frame (`--memory cuda`), or None.
    pub fn device_frame(&self) -> Result<Option<CudaSlice<u8>>> {
        self.gpu
            .as_ref()
            .map(|gpu| gpu.alloc(self.geometry.packed_size))
            .transpose()
    }

    /// Copies a received frame up to the device (and with `--cuda-sync`
    /// waits for the copy).
    pub fn upload(&self, bytes: &[u8], device: &mut CudaSlice<u8>) -> Result<()> {
        let Some(gpu) = &self.gpu else { return Ok(()) };
        gpu.upload_into(bytes, device)?;
        if self.args.cuda_sync {
            gpu.sync()?;
        }
        Ok(())
    }
}

/// What one worker counted and timed.
#[derive(Debug, Default)]
pub struct Tally {
    pub received: u64,
    pub dropped: u64,
    pub last_seq: u64,
    /// ready − publish stamp, ns.
    pub latency: Vec<u64>,
    /// ready − the publisher's start on the frame, ns.
    pub handover: Vec<u64>,
    pub first_ready: u64,
    pub last_ready: u64,
    /// CPU spent on whole-frame checks (and their device copies), excluded.
    pub verify_cpu: u64,
}

impl Tally {
    /// Room for the latencies of `frames` frames (up to 4 Mi).
    pub fn with_capacity(frames: u64) -> Tally {
        let capacity = frames.min(1 << 22) as usize;
        Tally {
            latency: Vec::with_capacity(capacity),
            handover: Vec::with_capacity(capacity),
            ..Tally::default()
        }
    }

    /// Frame `seq` is ready at `ready`; published at `published`, its
    /// publish started at `started` (CLOCK_MONOTONIC ns).
    pub fn frame(&mut self, seq: u64, ready: u64, published: u64, started: u64) {
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

/// Tells the publisher this worker is set up; the process CPU time then.
fn ready() -> Result<u64> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")
        .and_then(|()| out.flush())
        .map_err(|e| Error::io("writing ready", &e))?;
    Ok(process_cpu_ns())
}

/// Runs the receive loop `body` between `ready` and the end; returns the
/// error that ended it (if any) and the process CPU time it took.
pub fn receive_measured(body: impl FnOnce() -> Result<()>) -> (Option<Error>, u64) {
    let start = match ready() {
        Ok(cpu) => cpu,
        Err(e) => return (Some(e), 0),
    };
    let error = body().err();
    (error, process_cpu_ns().saturating_sub(start))
}
