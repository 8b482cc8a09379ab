//! The shared-memory-copy transport of `cuframes bench`: the publisher
//! copies each frame into a plain shared ring ([`ShmRing`]) and wakes the
//! workers through their stdin; each worker copies it out.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use cudarc::driver::CudaSlice;
use cuframes::{Error, ErrorKind, Policy, Result, clock};
use nix::fcntl::{FcntlArg, OFlag, fcntl};

use super::carrier::Carrier;
use crate::clock::wait_until;
use crate::plan::Plan;
use crate::publishing::measured::{Measured, PublisherClock, PublisherCounters};
use crate::publishing::source::Source;
use crate::publishing::workers::{Worker, spawn_workers};
use crate::receiving::check::check_packed;
use crate::receiving::stdin::{raw_stdin, wait_readable};
use crate::receiving::{Setup, Tally, receive_measured};
use crate::shm_ring::{ShmRing, WRITING};
use crate::transport::Transport;

#[derive(Debug)]
pub struct ViaShm;

impl Carrier for ViaShm {
    fn publish(&self, plan: &Plan, source: &mut Source, tag: &str) -> Result<Measured> {
        let path = PathBuf::from(format!("/dev/shm/cuframes-bench-{tag}"));
        // Lives until the workers are collected (and unlinks the file then).
        let mut ring = ShmRing::create(&path, plan.ring, plan.geometry.packed_size)?;
        let workers = spawn_workers(plan, Transport::ShmCopy, &path.display().to_string())?;
        for w in &workers {
            if let Some(stdin) = &w.stdin {
                fcntl(stdin.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
                    .map_err(|e| Error::os("making a wake-up pipe non-blocking", e))?;
            }
        }
        let mut clock = PublisherClock::start();
        let sent = (0..plan.frames).try_for_each(|i| {
            clock.pace(plan, i);
            copy_in(plan, source, &mut ring, &workers, i)
        });
        clock.all_published();
        let error = sent.and_then(|()| {
            wait_until(
                plan.timeout,
                || "shm-copy: subscribers did not copy out the last frames in time".into(),
                || ring.min_done(plan.subscribers) >= plan.frames,
            )
        });
        let publisher = clock.stop(error.err().map(|e| e.to_string()));
        Ok(Measured::from_parts(
            plan,
            publisher,
            PublisherCounters::default(),
            workers,
        ))
    }

    fn receive(&self, s: &mut Setup, tally: &mut Tally) -> (Option<Error>, u64) {
        let mut reader = match ShmReader::open(s) {
            Ok(reader) => reader,
            Err(e) => return (Some(e), 0),
        };
        receive_measured(|| reader.read_all(s, tally))
    }
}

// ------------------------------------------------------------- publisher side

/// Copies frame `i` (seq `i + 1`) into its slot (under strict-wait once
/// every subscriber copied out what was there) and wakes the workers.
fn copy_in(plan: &Plan, source: &mut Source, ring: &mut ShmRing, workers: &[Worker], i: u64) -> Result<()> {
    let seq = i + 1;
    let t0 = clock::monotonic_ns();
    let r = plan.ring as u64;
    let slot = (seq % r) as usize;
    if plan.policy == Policy::StrictWait && seq > r {
        wait_until(
            plan.timeout,
            || {
                format!(
                    "shm-copy: a subscriber did not copy out frame {} in time",
                    seq - r
                )
            },
            || ring.min_done(plan.subscribers) >= seq - r,
        )?;
    }
    ring.begin(slot);
    let frame = (i % plan.pool()) as usize;
    match source {
        Source::Host(frames) => ring.slot_mut(slot).copy_from_slice(&frames[frame]),
        Source::Cuda { gpu, frames, .. } => gpu.download(&frames[frame], ring.slot_mut(slot))?,
    }
    ring.commit(slot, seq, t0, clock::monotonic_ns());
    for w in workers {
        let stdin = w.stdin.as_ref().expect("piped");
        match nix::unistd::write(stdin, &[1]) {
            Ok(_) | Err(nix::errno::Errno::EAGAIN) => {}
            Err(e) => {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!("waking subscriber {}: {e}", w.index),
                ));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- worker side

/// A worker's mapping of the ring, where a frame goes, and the next seq
/// it reads.
struct ShmReader {
    ring: ShmRing,
    host: Vec<u8>,
    device: Option<CudaSlice<u8>>,
    check_buf: Vec<u8>,
    wake: File,
    next: u64,
}

impl ShmReader {
    fn open(s: &Setup) -> Result<ShmReader> {
        let g = &s.geometry;
        let ring = ShmRing::open(Path::new(&s.args.target), s.args.ring, g.packed_size)?;
        let host = vec![0u8; g.packed_size];
        let device = s.device_frame()?;
        Ok(ShmReader {
            ring,
            host,
            device,
            check_buf: Vec::new(),
            wake: raw_stdin()?,
            next: 1,
        })
    }

    /// Reads what is published, then sleeps until woken, until the last
    /// frame or the end of the wake-up pipe.
    fn read_all(&mut self, s: &mut Setup, tally: &mut Tally) -> Result<()> {
        let mut closed = false;
        loop {
            if self.read_published(s, tally)? || closed {
                return Ok(());
            }
            closed = self.wait_for_wake_up(s.args.timeout_ms)?;
        }
    }

    /// Reads every frame published since the last call; true once the last
    /// frame of the run was read.
    fn read_published(&mut self, s: &mut Setup, tally: &mut Tally) -> Result<bool> {
        let global = self.ring.global().load(Ordering::Acquire);
        // Frames older than the ring are gone.
        let first_readable = global.saturating_sub(self.ring.ring() as u64 - 1).max(1);
        if self.next < first_readable {
            tally.dropped += first_readable - self.next;
            self.next = first_readable;
        }
        while self.next <= global {
            let seq = self.next;
            self.next += 1;
            let Some((published, started)) = self.copy_out(s, seq, tally)? else {
                continue;
            };
            let ready = clock::monotonic_ns();
            tally.frame(seq, ready, published, started);
            check_packed(
                s,
                tally,
                seq,
                &self.host,
                self.device.as_ref(),
                &mut self.check_buf,
            )?;
            if seq >= s.args.frames {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Copies frame `seq` out of its slot and marks it done; its
    /// (published, started) stamps, or None when it was overwritten
    /// (counted as dropped).
    fn copy_out(&mut self, s: &Setup, seq: u64, tally: &mut Tally) -> Result<Option<(u64, u64)>> {
        let ring = &self.ring;
        let done = ring.done(s.args.index);
        let slot = (seq % ring.ring() as u64) as usize;
        let in_slot = ring.slot_seq(slot).load(Ordering::Acquire);
        if in_slot != seq {
            debug_assert!(in_slot == WRITING || in_slot > seq);
            tally.dropped += 1;
            done.store(seq, Ordering::Release);
            return Ok(None);
        }
        let published = ring.slot_published(slot).load(Ordering::Relaxed);
        let started = ring.slot_started(slot).load(Ordering::Relaxed);
        let bytes = ring.slot(slot);
        match self.device.as_mut() {
            Some(device) => s.upload(bytes, device)?,
            None => self.host.copy_from_slice(bytes),
        }
        let intact = ring.seq_after_read(slot) == seq;
        done.store(seq, Ordering::Release);
        if !intact {
            tally.dropped += 1;
            return Ok(None);
        }
        Ok(Some((published, started)))
    }

    /// Sleeps until the publisher writes a wake-up byte; true when it
    /// closed the pipe instead.
    fn wait_for_wake_up(&mut self, timeout_ms: u64) -> Result<bool> {
        wait_readable(&self.wake, timeout_ms, "frame notification")?;
        let mut bytes = [0u8; 4096];
        match self.wake.read(&mut bytes) {
            Ok(0) => Ok(true),
            Ok(_) => Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(Error::io("reading wake-ups", &e)),
        }
    }
}
