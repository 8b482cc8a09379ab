//! The shared-memory-copy transport of `cuframes bench`: the publisher
//! copies each frame into a plain shared ring ([`super::shm::ShmRing`]) and
//! wakes the workers through their stdin; each worker copies it out.

use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use cuframes::{Error, Policy, Result, clock};
use nix::fcntl::{FcntlArg, OFlag, fcntl};

use super::shm::{ShmRing, WRITING};
use super::worker::{Setup, Tally, check_packed, measured, raw_stdin, wait_readable};
use super::{Measured, Plan, Source, Transport, collect, pace, process_cpu_ns, spawn_workers, wait_until};

// ------------------------------------------------------------- publisher side

pub(super) fn publish(plan: &Plan, source: &mut Source, round: usize) -> Result<Measured> {
    let path = PathBuf::from(format!("/dev/shm/cuframes-bench-{}-{round}", plan.run_id));
    let mut ring = ShmRing::create(&path, plan.ring, plan.geometry.packed_size)?;
    let workers = spawn_workers(plan, Transport::ShmCopy, &path.display().to_string())?;
    for w in &workers {
        if let Some(stdin) = &w.stdin {
            fcntl(stdin.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
                .map_err(|e| Error::os("making a wake-up pipe non-blocking", e))?;
        }
    }
    let n = plan.subscribers;
    let r = plan.ring as u64;
    let cpu = process_cpu_ns();
    let first_ns = clock::monotonic_ns();
    let started = Instant::now();
    let mut error = None;
    'frames: for i in 0..plan.frames {
        let seq = i + 1;
        pace(plan, started, i);
        let t0 = clock::monotonic_ns();
        let slot = (seq % r) as usize;
        if plan.policy == Policy::StrictWait && seq > r {
            let waited = wait_until(
                plan.timeout,
                || {
                    format!(
                        "shm-copy: a subscriber did not copy out frame {} in time",
                        seq - r
                    )
                },
                || ring.min_done(n) >= seq - r,
            );
            if let Err(e) = waited {
                error = Some(e.to_string());
                break;
            }
        }
        ring.begin(slot);
        let frame = (i % plan.pool) as usize;
        match source {
            Source::Host(frames) => ring.slot_mut(slot).copy_from_slice(&frames[frame]),
            Source::Cuda { gpu, frames, .. } => {
                if let Err(e) = gpu.download(&frames[frame], ring.slot_mut(slot)) {
                    error = Some(e.to_string());
                    break;
                }
            }
        }
        ring.commit(slot, seq, t0, clock::monotonic_ns());
        for w in &workers {
            let stdin = w.stdin.as_ref().expect("piped");
            match nix::unistd::write(stdin, &[1]) {
                Ok(_) | Err(nix::errno::Errno::EAGAIN) => {}
                Err(e) => {
                    error = Some(format!("waking subscriber {}: {e}", w.index));
                    break 'frames;
                }
            }
        }
    }
    let published_ns = clock::monotonic_ns();
    if error.is_none()
        && let Err(e) = wait_until(
            plan.timeout,
            || "shm-copy: subscribers did not copy out the last frames in time".into(),
            || ring.min_done(n) >= plan.frames,
        )
    {
        error = Some(e.to_string());
    }
    let cpu_ns = process_cpu_ns().saturating_sub(cpu);
    let (subscribers, sub_error) = collect(plan, workers);
    drop(ring);
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

pub(super) fn receive(s: &mut Setup, tally: &mut Tally) -> (Option<Error>, u64) {
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
