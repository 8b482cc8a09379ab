//! The cuframes transport of `cuframes bench`: the publisher side (a
//! [`cuframes::Publisher`] fed from the frame pool) and the worker side (a
//! [`cuframes::Subscriber`] reading the slots in place).

use std::time::{Duration, Instant};

use cuframes::{
    Error, ErrorKind, MemoryKind, MemoryRequest, Publisher, PublisherConfig, Result, Subscriber,
    SubscriberConfig, clock,
};

use super::frames::Depth;
use super::worker::{Setup, Tally, measured, timed};
use super::{
    Measured, Plan, Source, Transport, collect, device_planes, host_planes, pace, process_cpu_ns,
    spawn_workers,
};

// ------------------------------------------------------------- publisher side

pub(super) fn publish(plan: &Plan, source: &mut Source, round: usize) -> Result<Measured> {
    let key = format!("bench-{}-{round}", plan.run_id);
    let (width, height) = (plan.geometry.layout.width(), plan.geometry.layout.height());
    let mut config = PublisherConfig::new(key.clone(), plan.format, width, height);
    config.ring_size = plan.ring;
    config.policy = plan.policy;
    config.ack_timeout = plan.timeout;
    config.cuda_share = plan.cuda_share;
    config.memory = match plan.memory {
        MemoryKind::Host => MemoryRequest::Host,
        MemoryKind::Cuda => MemoryRequest::Cuda,
    };
    let device_copy_fps = match source {
        Source::Cuda { gpu, frames, .. } => Some(gpu.copy_rate(frames, 1000)?),
        Source::Host(_) => None,
    };
    let mut publisher = Publisher::create(config)?;
    let workers = spawn_workers(plan, Transport::Cuframes, &key)?;
    publisher.wait_for_subscribers(plan.subscribers, plan.timeout)?;
    let g = &plan.geometry;
    let cpu = process_cpu_ns();
    let first_ns = clock::monotonic_ns();
    let started = Instant::now();
    let mut error = None;
    for i in 0..plan.frames {
        pace(plan, started, i);
        let t0 = clock::monotonic_ns() as i64;
        let frame = (i % plan.pool) as usize;
        let published = match source {
            Source::Host(frames) => publisher.publish(&host_planes(g, &frames[frame]), t0),
            Source::Cuda { gpu, frames, .. } => {
                publisher.publish_device(&device_planes(g, gpu, &frames[frame]), t0)
            }
        };
        if let Err(e) = published {
            error = Some(e.to_string());
            break;
        }
    }
    let published_ns = clock::monotonic_ns();
    let stats = publisher.stats();
    let ack_waits = Some((stats.ack_waits, stats.ack_wait_ns));
    let kernel_copies = Some(stats.kernel_copies);
    if let Err(e) = publisher.flush(plan.timeout) {
        error.get_or_insert(e.to_string());
    }
    let cpu_ns = process_cpu_ns().saturating_sub(cpu);
    drop(publisher);
    let (subscribers, sub_error) = collect(plan, workers);
    Ok(Measured {
        cpu_ns,
        first_ns,
        published_ns,
        subscribers,
        error: error.or(sub_error),
        device_copy_fps,
        ack_waits,
        kernel_copies,
    })
}

// ---------------------------------------------------------------- worker side

pub(super) fn receive(s: &mut Setup, tally: &mut Tally) -> (Option<Error>, u64) {
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
