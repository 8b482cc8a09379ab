//! `cuframes publish`: the test pattern under a key.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use cuframes::{
    Error, FrameLayout, HostPlane, MemoryKind, MemoryRequest, PixelFormat, Publisher, PublisherConfig,
    Result, pattern,
};

use crate::args::{MemoryArg, PublishArgs, invalid, legacy_ms, policy_name};
use crate::duration::Dur;
use crate::signals::{self, StopFlag};

/// The least time the end of a stream waits for subscribers to take the
/// last frame, as the muxer's trailer waits (max(`ack_timeout`, 1 s)).
pub const END_OF_STREAM_WAIT: Duration = Duration::from_secs(1);

/// Parses "WxH".
pub fn parse_size(text: &str) -> Result<(u32, u32)> {
    let parsed = text
        .split_once(['x', 'X'])
        .and_then(|(w, h)| Some((w.trim().parse::<u32>().ok()?, h.trim().parse::<u32>().ok()?)));
    parsed.ok_or_else(|| {
        Error::new(
            cuframes::ErrorKind::InvalidArgument,
            format!("bad size '{text}': use WxH, e.g. 1920x1080"),
        )
    })
}

/// `--cuda-device N` as the library's ordinal.
pub fn cuda_ordinal(device: u32) -> Result<i32> {
    i32::try_from(device).map_err(|_| {
        Error::new(
            cuframes::ErrorKind::InvalidArgument,
            format!("bad --cuda-device {device}: not a device ordinal"),
        )
    })
}

/// A frame rate as a fraction with denominator 1000 (reduced), e.g. 29.97 → 2997/100.
fn fps_fraction(fps: f64) -> (u32, u32) {
    let num = (fps * 1000.0).round() as u64;
    let (mut a, mut b) = (num, 1000u64);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    ((num / a) as u32, (1000 / a) as u32)
}

/// The options of `cuframes publish`, checked, with the timeouts resolved.
#[derive(Debug)]
struct Checked {
    width: u32,
    height: u32,
    ack_timeout: Duration,
    startup_timeout: Duration,
    wait_timeout: Dur,
    /// `--fps` as the fraction the header advertises; None: unthrottled.
    fps: Option<(u32, u32)>,
}

pub fn run(a: PublishArgs) -> Result<ExitCode> {
    let stop = signals::install();
    let checked = check(&a)?;
    let mut publisher = Publisher::create(publisher_config(&a, &checked)?)?;
    announce(&a, &checked, &publisher);
    if a.wait_subscribers > 0 && !wait_for_subscribers(&a, &publisher, checked.wait_timeout, &stop)? {
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let published = publish_frames(&a, &mut publisher, checked.fps, started, &stop)?;
    if !stop.is_set() {
        // The muxer's rule for the end of a stream: wait until every
        // subscriber has taken the last frame (it may still hold it: leases
        // stay readable after SHUTDOWN), at most max(ACK timeout, 1 s).
        let _ = publisher.wait_delivered(checked.ack_timeout.max(END_OF_STREAM_WAIT));
    }
    report_end(&a, &publisher, published, started.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

/// Resolves the timeouts and checks the size, the rate and the subscribers
/// to wait for, in that order (the first bad option is the one named).
fn check(a: &PublishArgs) -> Result<Checked> {
    let ack_timeout = legacy_ms(a.ack_timeout, a.ack_timeout_ms, "ack-timeout-ms", "ack-timeout")?.get();
    let startup_timeout = legacy_ms(
        a.startup_timeout,
        a.startup_timeout_ms,
        "startup-timeout-ms",
        "startup-timeout",
    )?
    .get();
    let wait_timeout = legacy_ms(
        a.wait_timeout,
        a.wait_timeout_ms,
        "wait-timeout-ms",
        "wait-timeout",
    )?;
    let (width, height) = parse_size(&a.size)?;
    // Below 0.001 the rate's fraction (denominator 1000) would round to 0.
    if !a.fps.is_finite() || a.fps < 0.0 || a.fps > 100_000.0 || (a.fps > 0.0 && a.fps < 0.001) {
        return Err(invalid(format!(
            "bad --fps {}: use 0 (unthrottled) or 0.001 to 100000",
            a.fps
        )));
    }
    let max_subscribers = cuframes::protocol::LAST_SUBSCRIBER_BIT as usize;
    if a.wait_subscribers > max_subscribers {
        return Err(invalid(format!(
            "bad --wait-subscribers {}: a publisher serves at most {max_subscribers} subscribers",
            a.wait_subscribers
        )));
    }
    Ok(Checked {
        width,
        height,
        ack_timeout,
        startup_timeout,
        wait_timeout,
        fps: (a.fps > 0.0).then(|| fps_fraction(a.fps)),
    })
}

fn publisher_config(a: &PublishArgs, checked: &Checked) -> Result<PublisherConfig> {
    let format = PixelFormat::from(a.format);
    let mut config = PublisherConfig::new(a.key.clone(), format, checked.width, checked.height);
    config.ring_size = a.ring;
    config.policy = a.policy.into();
    config.ack_timeout = checked.ack_timeout;
    config.startup_timeout = checked.startup_timeout;
    config.handshake_timeout = a.handshake_timeout.get();
    config.memory = a.memory.into();
    config.cuda_share = a.cuda_share.into();
    if let Some(device) = a.cuda_device {
        // Naming a GPU asks for CUDA memory: auto must not fall back to host.
        config.memory = match config.memory {
            MemoryRequest::Host => {
                return Err(invalid(
                    "--cuda-device needs CUDA memory (--memory cuda or auto), not --memory host",
                ));
            }
            MemoryRequest::Auto | MemoryRequest::Cuda => MemoryRequest::Cuda,
        };
        config.cuda_device = cuda_ordinal(device)?;
    }
    config.fps = checked.fps;
    config.group = a.group.clone();
    config.v1_peers = a.v1_peers.into();
    Ok(config)
}

/// An info line, unless `--quiet`.
fn say(a: &PublishArgs, event: &str, text: String, fields: serde_json::Value) {
    if !a.quiet {
        crate::logline::event(crate::logline::Level::Info, Some(&a.key), event, &text, fields);
    }
}

/// The memory the publisher got, and why host memory where auto could not
/// have CUDA.
fn memory_note(a: &PublishArgs, publisher: &Publisher) -> String {
    let note = match (publisher.memory(), cuframes::cuda_unavailable_reason()) {
        (MemoryKind::Host, Some(why)) if a.memory == MemoryArg::Auto => format!("host memory ({why})"),
        (kind, _) => format!("{} memory", kind.name()),
    };
    match a.cuda_device {
        Some(device) => format!("{note} on CUDA device {device}"),
        None => note,
    }
}

/// The "publishing" line: what the stream is and where its socket is.
fn announce(a: &PublishArgs, checked: &Checked, publisher: &Publisher) {
    let format = PixelFormat::from(a.format);
    let (width, height) = (checked.width, checked.height);
    let memory_note = memory_note(a, publisher);
    let rate = if a.fps > 0.0 {
        a.fps.to_string()
    } else {
        "unthrottled".into()
    };
    say(
        a,
        "publishing",
        format!(
            "publishing '{}': {format} {width}x{height}, {rate} fps, ring {}, {}, {memory_note} (socket {})",
            a.key,
            a.ring,
            policy_name(publisher.policy()),
            publisher.paths().socket.display()
        ),
        serde_json::json!({
            "format": format.to_string(), "width": width, "height": height, "fps": a.fps,
            "ring": a.ring, "policy": policy_name(publisher.policy()), "memory": memory_note,
            "socket": publisher.paths().socket.display().to_string(),
        }),
    );
}

/// `--wait-subscribers`: true once they joined, false when a signal came
/// first; an error when `wait_timeout` passed.
fn wait_for_subscribers(
    a: &PublishArgs,
    publisher: &Publisher,
    wait_timeout: Dur,
    stop: &StopFlag,
) -> Result<bool> {
    say(
        a,
        "waiting_for_subscribers",
        format!("waiting for {} subscriber(s)", a.wait_subscribers),
        serde_json::json!({"subscribers": a.wait_subscribers}),
    );
    let deadline = Instant::now() + wait_timeout.get();
    loop {
        match publisher.wait_for_subscribers(a.wait_subscribers, Duration::from_millis(50)) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == cuframes::ErrorKind::Timeout && Instant::now() < deadline => {
                if stop.is_set() {
                    return Ok(false);
                }
            }
            Err(e) if e.kind() != cuframes::ErrorKind::Timeout => return Err(e),
            Err(_) => {
                return Err(Error::new(
                    cuframes::ErrorKind::Timeout,
                    format!(
                        "only {} of {} subscriber(s) joined '{}' within {wait_timeout}",
                        publisher.subscriber_count(),
                        a.wait_subscribers,
                        a.key,
                    ),
                ));
            }
        }
    }
}

/// Publishes pattern frames at `--fps` from `started` until `--frames` or
/// a signal; returns how many.
fn publish_frames(
    a: &PublishArgs,
    publisher: &mut Publisher,
    fps: Option<(u32, u32)>,
    started: Instant,
    stop: &StopFlag,
) -> Result<u64> {
    let mut frames = PatternFrames::new(publisher);
    let interval = (a.fps > 0.0).then(|| Duration::from_secs_f64(1.0 / a.fps));
    let mut index = 0u64;
    while (a.frames == 0 || index < a.frames) && !stop.is_set() {
        if let Some(interval) = interval
            && !sleep_until(started + interval.mul_f64(index as f64), stop)
        {
            break;
        }
        let pts_ns = fps.map_or(index as i64, |(num, den)| {
            (index as u128 * 1_000_000_000 * den as u128 / num as u128) as i64
        });
        let seq = frames.publish(publisher, index, pts_ns)?;
        debug_assert_eq!(seq, index + 1, "pattern frame index is seq - 1");
        index += 1;
    }
    Ok(index)
}

/// Sleeps until `due`, waking for signals; false when one came.
fn sleep_until(due: Instant, stop: &StopFlag) -> bool {
    while !stop.is_set() {
        let left = due.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
    !stop.is_set()
}

/// Makes pattern frame `index` and publishes it: in place in a host slot,
/// or through host staging that publish copies up to a device slot.
struct PatternFrames {
    layout: FrameLayout,
    staging: Vec<Vec<u8>>,
}

impl PatternFrames {
    fn new(publisher: &Publisher) -> PatternFrames {
        let layout = publisher.layout().clone();
        let staging = match publisher.memory() {
            MemoryKind::Cuda => layout
                .planes()
                .iter()
                .map(|p| vec![0; p.pitch * p.rows])
                .collect(),
            MemoryKind::Host => Vec::new(),
        };
        PatternFrames { layout, staging }
    }

    fn publish(&mut self, publisher: &mut Publisher, index: u64, pts_ns: i64) -> Result<u64> {
        let layout = &self.layout;
        match publisher.memory() {
            MemoryKind::Host => {
                publisher.publish_with(pts_ns, |planes| pattern::fill_frame(layout, index, planes))
            }
            // Device slots: make the frame on the CPU, publish copies it up.
            MemoryKind::Cuda => {
                let mut planes: Vec<&mut [u8]> = self.staging.iter_mut().map(Vec::as_mut_slice).collect();
                pattern::fill_frame(layout, index, &mut planes);
                let sources: Vec<HostPlane<'_>> = self
                    .staging
                    .iter()
                    .zip(layout.planes())
                    .map(|(data, p)| HostPlane { data, pitch: p.pitch })
                    .collect();
                publisher.publish(&sources, pts_ns)
            }
        }
    }
}

/// The "published" line: frames, rate, who was still there.
fn report_end(a: &PublishArgs, publisher: &Publisher, frames: u64, elapsed: f64) {
    let stats = publisher.stats();
    say(
        a,
        "published",
        format!(
            "published {frames} frames in {elapsed:.2} s ({:.1} fps); {} subscriber(s) at the end; {} dropped for ACK timeout",
            frames as f64 / elapsed.max(1e-9),
            publisher.subscriber_count(),
            stats.ack_timeouts
        ),
        serde_json::json!({
            "frames": frames, "seconds": elapsed, "subscribers": publisher.subscriber_count(),
            "ack_timeouts": stats.ack_timeouts, "ack_waits": stats.ack_waits,
            "kernel_copies": stats.kernel_copies,
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_rates() {
        assert_eq!(parse_size("1920x1080").unwrap(), (1920, 1080));
        assert_eq!(parse_size("64X48").unwrap(), (64, 48));
        assert!(parse_size("1920").is_err());
        assert!(parse_size("axb").is_err());
        assert_eq!(fps_fraction(30.0), (30, 1));
        assert_eq!(fps_fraction(29.97), (2997, 100));
        assert_eq!(fps_fraction(0.5), (1, 2));
        assert_eq!(cuda_ordinal(0).unwrap(), 0);
        assert_eq!(cuda_ordinal(7).unwrap(), 7);
        assert!(cuda_ordinal(u32::MAX).is_err());
    }
}
