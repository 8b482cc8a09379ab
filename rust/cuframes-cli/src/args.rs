//! Command-line interface (the exact interface other tools drive).

use clap::{Args, Parser, Subcommand};

/// Zero-copy sharing of decoded video frames between processes.
#[derive(Debug, Parser)]
#[command(name = "cuframes", version, about, long_about = None)]
pub struct Cli {
    /// How messages on standard error are written: text, or one JSON object
    /// per line (time, level, key, event, message, fields) for log collectors.
    #[arg(long, global = true, value_enum, default_value_t = crate::logline::LogFormat::Text)]
    pub log_format: crate::logline::LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Publish a deterministic test pattern under KEY.
    Publish(PublishArgs),
    /// Read frames from KEY (optionally verifying the test pattern).
    Subscribe(SubscribeArgs),
    /// List every key on this machine.
    Ls(LsArgs),
    /// Show a key's header, slots and subscribers, read from shared memory.
    Inspect(InspectArgs),
    /// Remove resources of dead publishers (all keys, or KEY).
    Cleanup(CleanupArgs),
    /// Measure latency, throughput and CPU cost of cuframes against a pipe and a shared-memory copy.
    Bench(BenchArgs),
    /// Live view of every publisher: fps, subscribers, lag and drops (read from shared memory).
    Top(TopArgs),
    /// Serve Prometheus metrics for every key on this machine (read from shared memory).
    Exporter(ExporterArgs),
    /// Exit 0 when KEY has a live publisher that published recently (for probes).
    Health(HealthArgs),
    /// Internal: a subscriber process of `cuframes bench`.
    #[command(name = "__bench-worker", hide = true)]
    BenchWorker(BenchWorkerArgs),
}

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// Key: 1-63 characters from a-z A-Z 0-9 _ -.
    pub key: String,
    /// Frame memory: auto (CUDA when usable, else host), host or cuda.
    #[arg(long, default_value = "auto")]
    pub memory: String,
    /// Pixel format: nv12, yuv420p, p010, bgra, p016, yuv444p, yuv444p16, rgba, bgr0 or rgb0.
    #[arg(long, default_value = "nv12")]
    pub format: String,
    /// Frame size WxH.
    #[arg(long, default_value = "1280x720")]
    pub size: String,
    /// Frames per second (0 = as fast as possible).
    #[arg(long, default_value_t = 30.0)]
    pub fps: f64,
    /// Frames to publish (0 = until killed).
    #[arg(long, default_value_t = 0)]
    pub frames: u64,
    /// Ring slots, 1-16.
    #[arg(long, default_value_t = 4)]
    pub ring: usize,
    /// When the ring is full: drop-oldest or strict-wait.
    #[arg(long, default_value = "drop-oldest")]
    pub policy: String,
    /// strict-wait: how long a subscriber may hold up the ring (no slot free
    /// for the next frame) before it is dropped.
    #[arg(long, default_value_t = 1000)]
    pub ack_timeout_ms: u64,
    /// strict-wait: the same for a subscriber in its first milliseconds,
    /// while its consumer is still starting.
    #[arg(long, default_value_t = cuframes::DEFAULT_STARTUP_TIMEOUT_MS)]
    pub startup_timeout_ms: u64,
    /// Hold the first frame until N subscribers are active.
    #[arg(long, default_value_t = 0)]
    pub wait_subscribers: usize,
    /// How long --wait-subscribers waits.
    #[arg(long, default_value_t = 30000)]
    pub wait_timeout_ms: u64,
    /// Also let members of this group (name or gid) subscribe: the socket
    /// becomes 0660 and the shared memory 0640 with that group (default:
    /// 0600, this user and root).
    #[arg(long)]
    pub group: Option<String>,
    /// Which protocol-v1 subscribers to admit, those that ACK in the shared
    /// memory every one of them can write (other implementations, cuframes
    /// before 0.3): refuse, same-user (this user and root) or allow (the
    /// group's too; docs/security.md).
    #[arg(long, value_name = "WHO", default_value = "same-user", value_parser = parse_v1_peers)]
    pub v1_peers: cuframes::V1Peers,
    /// CUDA device ordinal whose primary context holds the slots (default:
    /// device 0). Implies CUDA memory: an error with --memory host or
    /// without a usable GPU.
    #[arg(long, value_name = "N")]
    pub cuda_device: Option<u32>,
    /// CUDA memory: share the slots as file descriptors (fd: subscribers in
    /// other containers need only the runtime directory), as CUDA IPC
    /// handles (ipc: what protocol-v1 subscribers read; they must share this
    /// PID namespace), or fd where the GPU supports it (auto).
    #[arg(long, default_value = "auto")]
    pub cuda_share: String,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct SubscribeArgs {
    /// Key of the publisher.
    pub key: String,
    /// Frames to read (0 = until the publisher shuts down).
    #[arg(long, default_value_t = 0)]
    pub frames: u64,
    /// Check every frame against the test pattern of `cuframes publish`.
    #[arg(long)]
    pub verify: bool,
    /// Fail when no frame arrives for this long.
    #[arg(long, default_value_t = 5000)]
    pub timeout_ms: u64,
    /// Wait up to this long for a publisher of KEY to appear (0: fail at
    /// once when there is none).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub wait_ms: u64,
    /// Name shown to the publisher (at most 31 bytes).
    #[arg(long)]
    pub name: Option<String>,
    /// Frame selection: sequential (every frame) or latest (newest only).
    #[arg(long, default_value = "sequential")]
    pub mode: String,
    /// Print the summary as a JSON object on the last line.
    #[arg(long)]
    pub json: bool,
    /// CUDA device ordinal whose primary context maps CUDA frames (default:
    /// device 0); on another GPU than the publisher's, frames are read over
    /// peer access. An error without a usable GPU.
    #[arg(long, value_name = "N")]
    pub cuda_device: Option<u32>,
    /// Frames as the shared slots (never), as private copies (always), or
    /// the slots while the ring can spare them and copies beyond (auto).
    #[arg(long, default_value = "never")]
    pub copy: String,
    /// Keep the newest N frames unreleased, as an encoder does (frames are
    /// checked when taken and again when released).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub hold: usize,
    /// Let a library thread queue up to N frames as they are published.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub read_ahead: usize,
    /// Wait this long after subscribing before reading, like a consumer
    /// that is still starting.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub start_delay_ms: u64,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Key to inspect.
    pub key: String,
    /// JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// Only this key (default: every stale key).
    pub key: Option<String>,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Frame memory: host, cuda, or auto (CUDA when usable, else host).
    #[arg(long, default_value = "host")]
    pub memory: String,
    /// Pixel format: nv12, yuv420p, p010, bgra, p016, yuv444p, yuv444p16, rgba, bgr0 or rgb0.
    #[arg(long, default_value = "nv12")]
    pub format: String,
    /// Frame size WxH.
    #[arg(long, default_value = "1920x1080")]
    pub size: String,
    /// Subscriber processes per transport (1-31).
    #[arg(long, default_value_t = 1)]
    pub subscribers: usize,
    /// Ring slots, 1-16 (cuframes and shm-copy).
    #[arg(long, default_value_t = 4)]
    pub ring: usize,
    /// When the ring is full: strict-wait (lossless) or drop-oldest (cuframes and shm-copy).
    #[arg(long, default_value = "strict-wait")]
    pub policy: String,
    /// Frames per transport.
    #[arg(long, default_value_t = 1000)]
    pub frames: u64,
    /// Publish rate (0 = as fast as the transport takes them).
    #[arg(long, default_value_t = 0.0)]
    pub fps: f64,
    /// Transports to measure, comma-separated: cuframes, pipe, shm-copy.
    #[arg(long, default_value = "cuframes,pipe,shm-copy")]
    pub transports: String,
    /// Frame checks: sample (rows of every frame, whole frame every --verify-every), full (every frame whole) or none.
    #[arg(long, default_value = "sample")]
    pub verify: String,
    /// With --verify sample: check the whole frame of every Nth frame (0 = never).
    #[arg(long, default_value_t = 100)]
    pub verify_every: u64,
    /// CUDA: subscribers synchronize their stream before a frame counts as ready.
    #[arg(long)]
    pub cuda_sync: bool,
    /// CUDA memory: how the cuframes transport shares its slots (fd, ipc or
    /// auto), as `publish --cuda-share`.
    #[arg(long, default_value = "auto")]
    pub cuda_share: String,
    /// Fail when a subscriber gets no frame for this long.
    #[arg(long, default_value_t = 10000)]
    pub timeout_ms: u64,
    /// Print a JSON array (one object per transport) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write the latency distributions as an SVG plot (CDF, log µs axis).
    #[arg(long)]
    pub plot: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Refresh interval (also the window fps is measured over).
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Print one snapshot (measured over one interval) and exit.
    #[arg(long)]
    pub once: bool,
    /// With --once: a JSON array, one object per key.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExporterArgs {
    /// Address to serve /metrics and /healthz on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9477")]
    pub listen: String,
    /// Write the metrics to this file every --interval-ms instead (for
    /// node_exporter's textfile collector; written whole, then renamed).
    #[arg(long, value_name = "PATH")]
    pub textfile: Option<std::path::PathBuf>,
    /// How often --textfile is rewritten.
    #[arg(long, default_value_t = 15000)]
    pub interval_ms: u64,
    /// Print the metrics once to standard output and exit.
    #[arg(long)]
    pub once: bool,
    /// Look for sockets and locks in this directory only.
    #[arg(long, value_name = "DIR")]
    pub runtime_dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct HealthArgs {
    /// The key to check.
    pub key: String,
    /// Healthy only when the newest frame is at most this many seconds old.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub max_age: f64,
    /// Also check this subscriber (by name): active, at most --max-lag frames
    /// behind, and releasing frames.
    #[arg(long, value_name = "NAME")]
    pub subscriber: Option<String>,
    /// With --subscriber: the most frames it may be behind.
    #[arg(long, value_name = "FRAMES", default_value_t = 64)]
    pub max_lag: u64,
    /// Look for the key's socket and lock in this directory only.
    #[arg(long, value_name = "DIR")]
    pub runtime_dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct BenchWorkerArgs {
    /// cuframes, pipe or shm-copy.
    #[arg(long)]
    pub transport: String,
    /// cuframes: the key; shm-copy: the shared memory file.
    #[arg(long, default_value = "")]
    pub target: String,
    /// Subscriber index (0-based).
    #[arg(long, default_value_t = 0)]
    pub index: usize,
    #[arg(long)]
    pub memory: String,
    #[arg(long)]
    pub format: String,
    #[arg(long)]
    pub size: String,
    #[arg(long)]
    pub frames: u64,
    /// Distinct frames the publisher cycles through.
    #[arg(long)]
    pub pool: u64,
    #[arg(long, default_value_t = 4)]
    pub ring: usize,
    #[arg(long)]
    pub verify: String,
    #[arg(long, default_value_t = 100)]
    pub verify_every: u64,
    #[arg(long)]
    pub cuda_sync: bool,
    #[arg(long, default_value_t = 10000)]
    pub timeout_ms: u64,
}

fn parse_v1_peers(s: &str) -> Result<cuframes::V1Peers, String> {
    cuframes::V1Peers::parse(s).map_err(|e| e.to_string())
}
