//! The cuframes transport of `cuframes bench`: the publisher side (a
//! [`cuframes::Publisher`] fed from the frame pool) and the worker side (a
//! [`cuframes::Subscriber`] reading the slots in place).

use std::time::Duration;

use cuframes::{
    CopyMode, ErrorKind, FrameLayout, FrameLease, MemoryKind, MemoryRequest, Publisher, PublisherConfig,
    Result, Subscriber, SubscriberConfig, clock,
};

use super::carrier::Carrier;
use crate::frames::Depth;
use crate::plan::Plan;
use crate::publishing::measured::{Measured, PublisherClock, PublisherCounters};
use crate::publishing::source::{Source, device_planes, host_planes};
use crate::publishing::workers::spawn_workers;
use crate::receiving::check::timed;
use crate::receiving::{Setup, Tally, receive_measured};
use crate::transport::Transport;

#[derive(Debug)]
pub struct ViaCuframes;

impl Carrier for ViaCuframes {
    fn publish(&self, plan: &Plan, source: &mut Source, tag: &str) -> Result<Measured> {
        let key = format!("bench-{tag}");
        let device_copy_fps = match source {
            Source::Cuda { gpu, frames, .. } => Some(gpu.copy_rate(frames, 1000)?),
            Source::Host(_) => None,
        };
        let mut publisher = Publisher::create(publisher_config(plan, &key))?;
        let workers = spawn_workers(plan, Transport::Cuframes, &key)?;
        publisher.wait_for_subscribers(plan.subscribers, plan.timeout)?;
        let mut clock = PublisherClock::start();
        let sent = (0..plan.frames).try_for_each(|i| {
            clock.pace(plan, i);
            publish_frame(plan, source, &mut publisher, i)
        });
        clock.all_published();
        let stats = publisher.stats();
        let counters = PublisherCounters {
            device_copy_fps,
            ack_waits: Some((stats.ack_waits, stats.ack_wait_ns)),
            kernel_copies: Some(stats.kernel_copies),
        };
        // Flushed even after a failed publish: the workers take what was
        // published. The first error stands.
        let flushed = publisher.flush(plan.timeout);
        let error = sent.and(flushed);
        let side = clock.stop(error.err().map(|e| e.to_string()));
        // Its SHUTDOWN ends the workers' streams.
        drop(publisher);
        Ok(Measured::from_parts(plan, side, counters, workers))
    }

    fn receive(&self, s: &mut Setup, tally: &mut Tally) -> (Option<cuframes::Error>, u64) {
        let mut config = SubscriberConfig::new(s.args.target.clone());
        config.name = format!("bench-{}", s.args.index);
        // What is measured is the shared slots themselves, read as they
        // come: no private copies, no reading thread (the defaults since D39).
        config.copy = CopyMode::Never;
        config.read_ahead = 0;
        let mut sub = match Subscriber::connect(config) {
            Ok(sub) => sub,
            Err(e) => return (Some(e), 0),
        };
        let mut frames = LeaseChecks::new(&sub);
        let (error, cpu) = receive_measured(|| read_all(s, tally, &mut sub, &mut frames));
        let stats = sub.stats();
        tally.dropped = stats.dropped + stats.overwritten.max(s.checker.torn);
        (error, cpu)
    }
}

// ------------------------------------------------------------- publisher side

fn publisher_config(plan: &Plan, key: &str) -> PublisherConfig {
    let (width, height) = (plan.geometry.layout.width(), plan.geometry.layout.height());
    let mut config = PublisherConfig::new(key.to_owned(), plan.format(), width, height);
    config.ring_size = plan.ring;
    config.policy = plan.policy;
    config.ack_timeout = plan.timeout;
    config.cuda_share = plan.cuda_share;
    config.memory = match plan.memory {
        MemoryKind::Host => MemoryRequest::Host,
        MemoryKind::Cuda => MemoryRequest::Cuda,
    };
    config
}

/// Publishes frame `i` of the pool, stamped with the publisher's start on it.
fn publish_frame(plan: &Plan, source: &Source, publisher: &mut Publisher, i: u64) -> Result<()> {
    let t0 = clock::monotonic_ns() as i64;
    let frame = (i % plan.pool()) as usize;
    let g = &plan.geometry;
    match source {
        Source::Host(frames) => publisher.publish(&host_planes(g, &frames[frame]), t0)?,
        Source::Cuda { gpu, frames, .. } => {
            publisher.publish_device(&device_planes(g, gpu, &frames[frame]), t0)?
        }
    };
    Ok(())
}

// ---------------------------------------------------------------- worker side

/// Takes, times and checks frames until the last one or the publisher's
/// shutdown.
fn read_all(s: &mut Setup, tally: &mut Tally, sub: &mut Subscriber, frames: &mut LeaseChecks) -> Result<()> {
    let timeout = Duration::from_millis(s.args.timeout_ms);
    loop {
        let lease = match sub.next(Some(timeout)) {
            Ok(lease) => lease,
            Err(e) if e.kind() == ErrorKind::Disconnected && sub.publisher_shut_down() => return Ok(()),
            Err(e) => return Err(e),
        };
        if s.args.cuda_sync
            && let Some(gpu) = &s.gpu
        {
            gpu.sync()?;
        }
        let ready = clock::monotonic_ns();
        let seq = lease.seq();
        let (published, started) = (lease.publish_mono_ns(), lease.pts_ns() as u64);
        let torn_before = s.checker.torn;
        frames.check(s, tally, &lease)?;
        // Overwritten while leased (drop-oldest): dropped, not received.
        let overwritten = lease.release().is_err();
        if !overwritten && s.checker.torn == torn_before {
            tally.frame(seq, ready, published, started);
        }
        if seq >= s.args.frames {
            return Ok(());
        }
    }
}

/// What checking a leased frame needs: the stream's layout and memory,
/// and (CUDA) host buffers to copy planes down into.
struct LeaseChecks {
    layout: FrameLayout,
    memory: MemoryKind,
    download: Vec<Vec<u8>>,
}

impl LeaseChecks {
    fn new(sub: &Subscriber) -> LeaseChecks {
        let layout = sub.info().layout.clone();
        LeaseChecks {
            download: vec![Vec::new(); layout.planes().len()],
            memory: sub.info().memory,
            layout,
        }
    }

    /// Checks a leased frame in place (host) or copied down (CUDA, whole
    /// frames only).
    fn check(&mut self, s: &mut Setup, tally: &mut Tally, lease: &FrameLease) -> Result<()> {
        let seq = lease.seq();
        let planes = self.layout.planes();
        let geometry = |p: usize| (planes[p].row_bytes, planes[p].rows);
        let download = &mut self.download;
        match (s.checker.depth(seq), self.memory) {
            (None, _) | (Some(Depth::Rows), MemoryKind::Cuda) => Ok(()),
            (Some(depth), MemoryKind::Host) => {
                timed(tally, depth, || {
                    s.checker.check(
                        seq,
                        depth,
                        planes.len(),
                        geometry,
                        |p| (lease.host_plane(p).unwrap_or(&[]), planes[p].pitch),
                        || lease.is_intact(),
                    )
                });
                Ok(())
            }
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
            }),
        }
    }
}
