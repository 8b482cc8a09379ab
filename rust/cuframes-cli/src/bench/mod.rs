//! `cuframes bench`: the same frames through cuframes, a pipe and a plain
//! shared-memory copy, to N subscriber processes each; latency, throughput,
//! CPU per frame and verification, per transport.
//!
//! This process is the publisher of every transport; the subscribers are
//! this executable again (`__bench-worker`, see `worker.rs`), started per
//! transport. Times are CLOCK_MONOTONIC, one clock for every process.
//!
//! One module per transport holds both of its sides, the publisher's
//! `publish` and the worker's `receive`: `via_cuframes.rs`, `via_pipe.rs`,
//! `via_shm.rs` (over the plain ring of `shm.rs`). This module plans a run,
//! starts the workers and reports; `worker.rs` is the worker's frame.

pub mod frames;
pub mod gpu;
pub mod plot;
pub mod shm;
pub mod via_cuframes;
pub mod via_pipe;
pub mod via_shm;
pub mod worker;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cudarc::driver::CudaSlice;
use cuframes::{
    DevicePlane, Error, ErrorKind, HostPlane, MemoryKind, MemoryRequest, PixelFormat, Policy, Result,
};
use nix::time::{ClockId, clock_gettime};
use serde_json::{Value, json};

use self::frames::{Geometry, Verify};
use self::gpu::Gpu;
use crate::args::{BenchArgs, MemoryArg, TransportArg, legacy_ms, policy_name};
use crate::publish::parse_size;
use crate::report::percentile;

/// A way to move frames from the publisher to its subscribers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// The cuframes ring: subscribers read the publisher's slots in place.
    Cuframes,
    /// A Unix pipe per subscriber, frames written packed (`ffmpeg -f rawvideo pipe:`).
    Pipe,
    /// A shared-memory ring: copied in by the publisher, out by each subscriber.
    ShmCopy,
}

impl From<TransportArg> for Transport {
    fn from(t: TransportArg) -> Transport {
        match t {
            TransportArg::Cuframes => Transport::Cuframes,
            TransportArg::Pipe => Transport::Pipe,
            TransportArg::ShmCopy => Transport::ShmCopy,
        }
    }
}

impl Transport {
    pub const ALL: [Transport; 3] = [Transport::Cuframes, Transport::Pipe, Transport::ShmCopy];

    pub fn parse(name: &str) -> Result<Transport> {
        Transport::ALL
            .into_iter()
            .find(|t| t.name() == name.trim())
            .ok_or_else(|| {
                invalid(format!(
                    "bad --transports: unknown transport '{}' (cuframes, pipe, shm-copy)",
                    name.trim()
                ))
            })
    }

    pub fn name(self) -> &'static str {
        match self {
            Transport::Cuframes => "cuframes",
            Transport::Pipe => "pipe",
            Transport::ShmCopy => "shm-copy",
        }
    }
}

/// An invalid-argument error.
pub fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}

fn clock_ns(id: ClockId) -> u64 {
    clock_gettime(id).map_or(0, |t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
}

/// CPU time (user + system) of this process, every thread, in ns.
pub fn process_cpu_ns() -> u64 {
    clock_ns(ClockId::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time of the calling thread, in ns.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(ClockId::CLOCK_THREAD_CPUTIME_ID)
}

/// Everything a run needs, validated.
#[derive(Debug)]
struct Plan {
    transports: Vec<Transport>,
    memory: MemoryKind,
    format: PixelFormat,
    size: String,
    geometry: Geometry,
    pool: u64,
    subscribers: usize,
    ring: usize,
    policy: Policy,
    frames: u64,
    fps: f64,
    verify: Verify,
    cuda_sync: bool,
    cuda_share: cuframes::CudaShareRequest,
    timeout: Duration,
    run_id: String,
}

fn bad(option: &str, value: impl std::fmt::Display, hint: &str) -> Error {
    invalid(format!("bad {option} '{value}': {hint}"))
}

fn plan(a: &BenchArgs) -> Result<Plan> {
    let memory = match a.memory {
        MemoryArg::Host => MemoryKind::Host,
        MemoryArg::Cuda => MemoryKind::Cuda,
        MemoryArg::Auto => MemoryRequest::Auto.resolve()?,
    };
    let format = PixelFormat::from(a.format);
    let (width, height) =
        parse_size(&a.size).map_err(|_| bad("--size", &a.size, "use WxH, e.g. 1920x1080"))?;
    let geometry =
        Geometry::new(format, width, height).map_err(|e| bad("--size", &a.size, &e.to_string()))?;
    let max_subs = shm::MAX_SUBSCRIBERS.min(cuframes::protocol::LAST_SUBSCRIBER_BIT as usize);
    if a.subscribers == 0 || a.subscribers > max_subs {
        return Err(bad(
            "--subscribers",
            a.subscribers,
            &format!("use 1 to {max_subs}"),
        ));
    }
    if a.ring == 0 || a.ring > shm::MAX_RING {
        return Err(bad("--ring", a.ring, &format!("use 1 to {}", shm::MAX_RING)));
    }
    let policy = Policy::from(a.policy);
    if a.frames == 0 || a.frames > 100_000_000 {
        return Err(bad("--frames", a.frames, "use 1 to 100000000"));
    }
    if !a.fps.is_finite() || a.fps < 0.0 || a.fps > 10_000_000.0 {
        return Err(bad(
            "--fps",
            a.fps,
            "use 0 (as fast as possible) or a rate up to 10000000",
        ));
    }
    let timeout = legacy_ms(a.timeout, a.timeout_ms, "timeout-ms", "timeout")?;
    if timeout.get() < Duration::from_millis(1) {
        return Err(bad("--timeout", timeout, "use at least 1ms"));
    }
    let verify = Verify::parse(a.verify.name(), a.verify_every).map_err(invalid)?;
    let mut transports = Vec::new();
    let listed = || {
        a.transports
            .iter()
            .map(|t| Transport::from(*t).name())
            .collect::<Vec<_>>()
            .join(",")
    };
    for t in a.transports.iter().map(|t| Transport::from(*t)) {
        if transports.contains(&t) {
            return Err(bad(
                "--transports",
                listed(),
                &format!("'{}' is listed twice", t.name()),
            ));
        }
        transports.push(t);
    }
    if transports.is_empty() {
        return Err(bad(
            "--transports",
            listed(),
            "name at least one of cuframes, pipe, shm-copy",
        ));
    }
    if let Some(plot) = &a.plot {
        let dir = plot.parent().filter(|d| !d.as_os_str().is_empty());
        if dir.is_some_and(|d| !d.is_dir()) || plot.is_dir() {
            return Err(bad(
                "--plot",
                plot.display(),
                "not a file in an existing directory",
            ));
        }
    }
    let pool = geometry.pool_len();
    Ok(Plan {
        transports,
        memory,
        format,
        size: format!("{width}x{height}"),
        geometry,
        pool,
        subscribers: a.subscribers,
        ring: a.ring,
        policy,
        frames: a.frames,
        fps: a.fps,
        verify,
        cuda_sync: a.cuda_sync,
        cuda_share: a.cuda_share.into(),
        timeout: timeout.get(),
        run_id: format!("{}", std::process::id()),
    })
}

/// The frames the publisher sends: `pool` packed pattern frames, in host
/// memory, or in device memory for `--memory cuda`.
enum Source {
    Host(Vec<Vec<u8>>),
    Cuda {
        gpu: Gpu,
        frames: Vec<CudaSlice<u8>>,
        /// Host staging for the baselines' device → host copy.
        staging: Vec<u8>,
    },
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Host(frames) => write!(f, "Source::Host({} frames)", frames.len()),
            Source::Cuda { frames, .. } => write!(f, "Source::Cuda({} frames)", frames.len()),
        }
    }
}

impl Source {
    fn make(plan: &Plan) -> Result<Source> {
        let gpu = match plan.memory {
            MemoryKind::Cuda => Some(Gpu::open()?),
            MemoryKind::Host => None,
        };
        let host: Vec<Vec<u8>> = (0..plan.pool).map(|i| plan.geometry.make_packed(i)).collect();
        match gpu {
            None => Ok(Source::Host(host)),
            Some(gpu) => {
                let frames = host.iter().map(|f| gpu.upload(f)).collect::<Result<Vec<_>>>()?;
                Ok(Source::Cuda {
                    gpu,
                    frames,
                    staging: vec![0; plan.geometry.packed_size],
                })
            }
        }
    }
}

/// One subscriber process.
#[derive(Debug)]
struct Worker {
    index: usize,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
    reaped: bool,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

impl Worker {
    fn stderr_text(&mut self) -> String {
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// Waits for the exit (killing it after `limit`) and parses its result line.
    fn finish(mut self, limit: Duration) -> Result<Value> {
        drop(self.stdin.take());
        let deadline = Instant::now() + limit;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
                _ => {
                    let _ = self.child.kill();
                    self.reaped = true;
                    let _ = self.child.wait();
                    return Err(Error::new(
                        ErrorKind::Timeout,
                        format!(
                            "subscriber {} did not finish within {} ms",
                            self.index,
                            limit.as_millis()
                        ),
                    ));
                }
            }
        };
        self.reaped = true;
        let out = self.stdout.take().and_then(|h| h.join().ok()).unwrap_or_default();
        let err = self.stderr_text();
        let result = out
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| serde_json::from_str::<Value>(l).ok());
        match result {
            Some(v) if status.success() => Ok(v),
            _ => Err(Error::new(
                ErrorKind::Io,
                format!("subscriber {} failed ({status}): {err}", self.index),
            )),
        }
    }
}

fn spawn_workers(plan: &Plan, transport: Transport, target: &str) -> Result<Vec<Worker>> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding this executable", &e))?;
    let mut workers = Vec::new();
    for index in 0..plan.subscribers {
        let mut cmd = Command::new(&exe);
        cmd.arg("__bench-worker")
            .args(["--transport", transport.name(), "--target", target])
            .args(["--index", &index.to_string(), "--memory", plan.memory.name()])
            .args(["--format", plan.format.name(), "--size", &plan.size])
            .args([
                "--frames",
                &plan.frames.to_string(),
                "--pool",
                &plan.pool.to_string(),
            ])
            .args(["--ring", &plan.ring.to_string(), "--verify", plan.verify.name()])
            .args(["--timeout-ms", &plan.timeout.as_millis().to_string()]);
        if let Verify::Sample { every } = plan.verify {
            cmd.args(["--verify-every", &every.to_string()]);
        }
        if plan.cuda_sync {
            cmd.arg("--cuda-sync");
        }
        cmd.stdin(if transport == Transport::Cuframes {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| Error::io(format!("starting subscriber {index}"), &e))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        let stderr = drain(child.stderr.take().expect("piped"));
        workers.push((index, child, stdin, stdout, stderr));
    }
    // Every subscriber says "ready" once set up (connected, mapped).
    let mut ready = Vec::new();
    let mut failure = None;
    for (index, child, stdin, stdout, stderr) in workers {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let ok = reader.read_line(&mut line).is_ok() && line.trim() == "ready";
        let mut worker = Worker {
            index,
            child,
            stdin,
            stdout: Some(drain(reader)),
            stderr: Some(stderr),
            reaped: false,
        };
        if !ok && failure.is_none() {
            let _ = worker.child.kill();
            let _ = worker.child.wait();
            worker.reaped = true;
            let out = worker
                .stdout
                .take()
                .and_then(|h| h.join().ok())
                .unwrap_or_default();
            let why = format!("{} {}", line.trim(), out.trim());
            failure = Some(Error::new(
                ErrorKind::Io,
                format!(
                    "{} subscriber {index} did not start: {} {}",
                    transport.name(),
                    worker.stderr_text(),
                    why.trim()
                ),
            ));
        }
        ready.push(worker);
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(ready),
    }
}

/// Sleeps until frame `index` is due (`--fps`).
fn pace(plan: &Plan, started: Instant, index: u64) {
    if plan.fps > 0.0 {
        let due = started + Duration::from_secs_f64(index as f64 / plan.fps);
        let left = due.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            std::thread::sleep(left);
        }
    }
}

/// Waits with a short spin, then sleeps growing to 200 µs (as the
/// library's strict-wait).
fn wait_until(timeout: Duration, what: impl Fn() -> String, mut cond: impl FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut round = 0u32;
    while !cond() {
        if Instant::now() >= deadline {
            return Err(Error::new(ErrorKind::Timeout, what()));
        }
        if round < 64 {
            std::hint::spin_loop();
        } else if round < 128 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros((round as u64 - 127).min(200)));
        }
        round += 1;
    }
    Ok(())
}

/// What the publisher side measured for one transport.
#[derive(Debug)]
struct Measured {
    cpu_ns: u64,
    first_ns: u64,
    published_ns: u64,
    subscribers: Vec<Value>,
    error: Option<String>,
    /// CUDA: frames/s of the device copies alone (the GPU's bound on the ring).
    device_copy_fps: Option<f64>,
    /// cuframes strict-wait: (publishes that waited for a slot, ns spent waiting).
    ack_waits: Option<(u64, u64)>,
    /// cuframes: frames the publisher copied with its CUDA copy kernel.
    kernel_copies: Option<u64>,
}

fn host_planes<'a>(g: &Geometry, frame: &'a [u8]) -> Vec<HostPlane<'a>> {
    g.packed
        .iter()
        .map(|p| HostPlane {
            data: &frame[p.offset..],
            pitch: p.row_bytes,
        })
        .collect()
}

fn device_planes(g: &Geometry, gpu: &Gpu, frame: &CudaSlice<u8>) -> Vec<DevicePlane> {
    let base = gpu.ptr(frame);
    g.packed
        .iter()
        .map(|p| DevicePlane {
            ptr: base + p.offset as u64,
            pitch: p.row_bytes,
        })
        .collect()
}

/// Collects every subscriber's result (each within the timeout).
fn collect(plan: &Plan, workers: Vec<Worker>) -> (Vec<Value>, Option<String>) {
    let mut results = Vec::new();
    let mut error = None;
    for w in workers {
        match w.finish(plan.timeout + Duration::from_secs(5)) {
            Ok(v) => {
                if let Some(e) = v["error"].as_str() {
                    error.get_or_insert_with(|| format!("subscriber {}: {e}", v["index"]));
                }
                results.push(v);
            }
            Err(e) => {
                error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    (results, error)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn us(ns: u64) -> f64 {
    round1(ns as f64 / 1000.0)
}

fn u(v: &Value, name: &str) -> u64 {
    v[name].as_u64().unwrap_or(0)
}

fn ns_list(v: &Value, name: &str) -> Vec<u64> {
    v[name]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// The report of one transport, plus its sorted latencies (for the plot).
fn summarize(plan: &Plan, transport: Transport, m: &Measured) -> (Value, Vec<u64>) {
    let mut latency = Vec::new();
    let mut handover = Vec::new();
    let mut subs = Vec::new();
    let (mut verified, mut mismatched, mut dropped, mut received, mut whole) = (0, 0, 0, 0, 0);
    let (mut sub_cpu, mut verify_cpu) = (0u64, 0u64);
    let mut fps: Option<f64> = None;
    for s in &m.subscribers {
        let mut lat = ns_list(s, "latency_ns");
        lat.sort_unstable();
        latency.extend_from_slice(&lat);
        handover.extend(ns_list(s, "handover_ns"));
        let frames = u(s, "frames");
        verified += u(s, "verified");
        mismatched += u(s, "mismatched");
        dropped += u(s, "dropped");
        whole += u(s, "whole_frames");
        received += frames;
        sub_cpu += u(s, "cpu_ns");
        verify_cpu += u(s, "verify_cpu_ns");
        let span = u(s, "last_ready_ns").saturating_sub(m.first_ns);
        let sub_fps = if span > 0 {
            frames as f64 * 1e9 / span as f64
        } else {
            0.0
        };
        fps = Some(fps.map_or(sub_fps, |f| f.min(sub_fps)));
        subs.push(json!({
            "index": s["index"],
            "frames": frames,
            "dropped": u(s, "dropped"),
            "verified": u(s, "verified"),
            "mismatched": u(s, "mismatched"),
            "p50_us": us(percentile(&lat, 50.0)),
            "p99_us": us(percentile(&lat, 99.0)),
            "max_us": us(lat.last().copied().unwrap_or(0)),
            "fps": round1(sub_fps),
            "cpu_us_per_frame": round1(u(s, "cpu_ns") as f64 / 1000.0 / frames.max(1) as f64),
            "error": s["error"],
        }));
    }
    latency.sort_unstable();
    handover.sort_unstable();
    let frames = plan.frames;
    let publish_span = m.published_ns.saturating_sub(m.first_ns).max(1);
    let per_frame = |ns: u64, count: u64| round1(ns as f64 / 1000.0 / count.max(1) as f64);
    let device = plan.memory == MemoryKind::Cuda;
    let copies = match (transport, device) {
        (Transport::Cuframes, false) => {
            "publisher copies the frame into a ring slot; subscribers read the slot in place"
        }
        (Transport::Cuframes, true) => {
            "publisher copies the frame device to device into a ring slot; subscribers use the slot in place (CUDA IPC)"
        }
        (Transport::Pipe, false) => {
            "publisher writes the packed frame into one pipe per subscriber; each subscriber reads it out"
        }
        (Transport::Pipe, true) => {
            "publisher copies the frame device to host, writes it into one pipe per subscriber; each subscriber reads it and copies it host to device"
        }
        (Transport::ShmCopy, false) => {
            "publisher copies the frame into a shared-memory slot; each subscriber copies it out"
        }
        (Transport::ShmCopy, true) => {
            "publisher copies the frame device to host into a shared-memory slot; each subscriber copies it host to device"
        }
    };
    let policy = match transport {
        Transport::Pipe => "blocking",
        _ => policy_name(plan.policy),
    };
    let report = json!({
        "transport": transport.name(),
        "memory": plan.memory.name(),
        "format": plan.format.name(),
        "width": plan.geometry.layout.width(),
        "height": plan.geometry.layout.height(),
        "frame_bytes": plan.geometry.packed_size,
        "subscribers": plan.subscribers,
        "ring": if transport == Transport::Pipe { Value::Null } else { json!(plan.ring) },
        "policy": policy,
        "frames": frames,
        "received": received,
        "fps": round1(fps.unwrap_or(0.0)),
        "publish_fps": round1(frames as f64 * 1e9 / publish_span as f64),
        "p50_us": us(percentile(&latency, 50.0)),
        "p99_us": us(percentile(&latency, 99.0)),
        "max_us": us(latency.last().copied().unwrap_or(0)),
        "handover_p50_us": us(percentile(&handover, 50.0)),
        "handover_p99_us": us(percentile(&handover, 99.0)),
        "cpu_us_per_frame": per_frame(m.cpu_ns + sub_cpu, frames),
        "publisher_cpu_us_per_frame": per_frame(m.cpu_ns, frames),
        "subscriber_cpu_us_per_frame": per_frame(sub_cpu, received),
        "verify_cpu_us_per_frame": per_frame(verify_cpu, received),
        "verified": verified,
        "mismatched": mismatched,
        "whole_frames_checked": whole,
        "dropped": dropped,
        "verification": plan.verify.describe(device, plan.pool),
        "copies": copies,
        "cuda_sync": plan.cuda_sync,
        "device_copy_fps": m.device_copy_fps.map(round1),
        "publisher_slot_waits": m.ack_waits.map(|(n, _)| n),
        "publisher_slot_wait_us_per_frame": m.ack_waits.map(|(_, ns)| per_frame(ns, frames)),
        "publisher_kernel_copies": m.kernel_copies,
        "per_subscriber": subs,
        "error": m.error,
    });
    (report, latency)
}

fn print_table(reports: &[Value]) {
    let Some(first) = reports.first() else { return };
    println!(
        "{} {}x{} ({} bytes), {} memory, {} subscriber(s), {} frames, ring {}, {}",
        first["format"].as_str().unwrap_or(""),
        first["width"],
        first["height"],
        first["frame_bytes"],
        first["memory"].as_str().unwrap_or(""),
        first["subscribers"],
        first["frames"],
        reports.iter().find_map(|r| r["ring"].as_u64()).unwrap_or(0),
        reports
            .iter()
            .find(|r| r["transport"] != "pipe")
            .and_then(|r| r["policy"].as_str())
            .unwrap_or("")
    );
    println!(
        "{:<9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>10}",
        "TRANSPORT",
        "FPS",
        "P50 µs",
        "P99 µs",
        "MAX µs",
        "CPU µs/f",
        "PUB µs/f",
        "SUB µs/f",
        "DROPPED",
        "VERIFIED",
        "MISMATCHED"
    );
    let t = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    for r in reports {
        println!(
            "{:<9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>10}",
            t(&r["transport"]),
            t(&r["fps"]),
            t(&r["p50_us"]),
            t(&r["p99_us"]),
            t(&r["max_us"]),
            t(&r["cpu_us_per_frame"]),
            t(&r["publisher_cpu_us_per_frame"]),
            t(&r["subscriber_cpu_us_per_frame"]),
            t(&r["dropped"]),
            t(&r["verified"]),
            t(&r["mismatched"])
        );
        if let Some(e) = r["error"].as_str() {
            println!("  error: {e}");
        }
    }
    println!(
        "latency: publish -> subscriber has the frame (CLOCK_MONOTONIC); CPU per frame: publisher + all subscribers"
    );
    println!("verified: {}", first["verification"].as_str().unwrap_or(""));
}

pub fn run(a: BenchArgs) -> Result<ExitCode> {
    let plan = plan(&a)?;
    let mut source = Source::make(&plan)?;
    let mut reports = Vec::new();
    let mut curves = Vec::new();
    for (round, &transport) in plan.transports.iter().enumerate() {
        if !a.json {
            eprintln!("cuframes bench: {} ...", transport.name());
        }
        let measured = match transport {
            Transport::Cuframes => via_cuframes::publish(&plan, &mut source, round),
            Transport::Pipe => via_pipe::publish(&plan, &mut source),
            Transport::ShmCopy => via_shm::publish(&plan, &mut source, round),
        }
        .map_err(|e| Error::new(e.kind(), format!("{}: {e}", transport.name())))?;
        let (report, latency) = summarize(&plan, transport, &measured);
        reports.push(report);
        curves.push((transport.name().to_owned(), latency));
    }
    if a.json {
        println!("{}", Value::Array(reports.clone()));
    } else {
        print_table(&reports);
    }
    if let Some(path) = &a.plot {
        let title = format!(
            "cuframes bench: {} {} {} memory, {} subscriber(s), {} frames",
            plan.format.name(),
            plan.size,
            plan.memory.name(),
            plan.subscribers,
            plan.frames
        );
        std::fs::write(path, plot::latency_cdf_svg(&title, &curves))
            .map_err(|e| Error::io(format!("writing --plot {}", path.display()), &e))?;
    }
    let mismatched: u64 = reports.iter().map(|r| u(r, "mismatched")).sum();
    if mismatched > 0 {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!("{mismatched} frame(s) mismatched the pattern"),
        ));
    }
    if let Some(e) = reports.iter().find_map(|r| r["error"].as_str()) {
        return Err(Error::new(ErrorKind::Io, e.to_owned()));
    }
    Ok(ExitCode::SUCCESS)
}
