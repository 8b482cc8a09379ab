//! Command-line interface (the exact interface other tools drive).
//!
//! It speaks like the FFmpeg components (`ffmpeg -h muxer=cuframes`,
//! `-h demuxer=cuframes`): every choice is a [`ValueEnum`] that `--help`
//! lists, spelled as FFmpeg spells it (`drop_oldest`; the older `drop-oldest`
//! is accepted too); the defaults are the muxer's and the input device's;
//! every time is a duration in FFmpeg's syntax (`5`, `5s`, `500ms`, see
//! [`crate::duration`]). The millisecond options of 0.2 stay accepted,
//! hidden, for a while ([`legacy_ms`]).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use cuframes::{CopyMode, CudaShareRequest, MemoryRequest, PixelFormat, Policy, SubscriberMode};

use crate::duration::Dur;

/// Zero-copy sharing of decoded video frames between processes.
#[derive(Debug, Parser)]
#[command(name = "cuframes", version, long_about = None)]
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
    /// Read frames from KEY, optionally checking them against the test pattern.
    Subscribe(SubscribeArgs),
    /// List every key on this machine.
    Ls(LsArgs),
    /// Show a key's header, slots and subscribers, read from shared memory.
    Inspect(InspectArgs),
    /// Remove what dead publishers left behind (every stale key, or KEY).
    Cleanup(CleanupArgs),
    /// Measure latency, throughput and CPU cost of cuframes against a pipe and a shared-memory copy.
    Bench(BenchArgs),
    /// Show every publisher live: frame rate, subscribers, lag and drops, read from shared memory.
    Top(TopArgs),
    /// Serve Prometheus metrics for every key on this machine (read from shared memory).
    Exporter(ExporterArgs),
    /// Exit 0 when KEY has a live publisher that published recently (for probes).
    Health(HealthArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish or powershell).
    #[command(hide = true)]
    Completions(CompletionsArgs),
    /// Print the manual page, or write one page per command into a directory.
    #[command(hide = true)]
    Manpage(ManpageArgs),
    /// Internal: a subscriber process of `cuframes bench`.
    #[command(name = cuframes_bench::WORKER_COMMAND, hide = true)]
    BenchWorker(cuframes_bench::WorkerArgs),
}

// ---------------------------------------------------------------- choices

/// Where the frame slots live (the muxer's `memory`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MemoryArg {
    /// CUDA memory when a CUDA driver and device are usable, host memory otherwise.
    Auto,
    /// Host shared memory.
    Host,
    /// CUDA device memory; an error without a usable GPU.
    Cuda,
}

impl From<MemoryArg> for MemoryRequest {
    fn from(m: MemoryArg) -> MemoryRequest {
        match m {
            MemoryArg::Auto => MemoryRequest::Auto,
            MemoryArg::Host => MemoryRequest::Host,
            MemoryArg::Cuda => MemoryRequest::Cuda,
        }
    }
}

/// What the publisher does when the ring is full (the muxer's `policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// Never wait: overwrite the oldest slot; slow subscribers lose frames and are told.
    #[value(name = "drop_oldest", alias = "drop-oldest")]
    DropOldest,
    /// Wait until every subscriber released a slot before reusing it, up to the ACK timeout.
    #[value(name = "strict_wait", alias = "strict-wait")]
    StrictWait,
}

impl From<PolicyArg> for Policy {
    fn from(p: PolicyArg) -> Policy {
        match p {
            PolicyArg::DropOldest => Policy::DropOldest,
            PolicyArg::StrictWait => Policy::StrictWait,
        }
    }
}

/// Which protocol-v1 subscribers a publisher admits (the muxer's `v1_peers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum V1PeersArg {
    /// None: every subscriber must ACK in an area of its own.
    Refuse,
    /// Only this user's and root's, who could write the shared memory anyway.
    #[value(name = "same_user", alias = "same-user")]
    SameUser,
    /// Every admitted peer (with --group, the shared memory becomes 0660).
    Allow,
}

impl From<V1PeersArg> for cuframes::V1Peers {
    fn from(v: V1PeersArg) -> cuframes::V1Peers {
        match v {
            V1PeersArg::Refuse => cuframes::V1Peers::Refuse,
            V1PeersArg::SameUser => cuframes::V1Peers::SameUser,
            V1PeersArg::Allow => cuframes::V1Peers::Allow,
        }
    }
}

/// A policy as FFmpeg spells it (`drop_oldest`, `strict_wait`), the one
/// spelling the CLI prints.
pub fn policy_name(policy: Policy) -> &'static str {
    match policy {
        Policy::DropOldest => "drop_oldest",
        Policy::StrictWait => "strict_wait",
    }
}

/// How CUDA slots reach subscribers (the muxer's `cuda_share`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CudaShareArg {
    /// File descriptors where the GPU and driver support them, else CUDA IPC handles.
    Auto,
    /// File descriptors over the control socket: subscribers in other containers need only the runtime directory.
    Fd,
    /// CUDA IPC handles, what protocol-v1 subscribers read; they must share this PID namespace.
    Ipc,
}

impl From<CudaShareArg> for CudaShareRequest {
    fn from(s: CudaShareArg) -> CudaShareRequest {
        match s {
            CudaShareArg::Auto => CudaShareRequest::Auto,
            CudaShareArg::Fd => CudaShareRequest::Fd,
            CudaShareArg::Ipc => CudaShareRequest::Ipc,
        }
    }
}

/// Which frames a subscriber reads (the input device's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Every frame, in order.
    Sequential,
    /// Always the newest frame, skipping older ones.
    Latest,
}

impl From<ModeArg> for SubscriberMode {
    fn from(m: ModeArg) -> SubscriberMode {
        match m {
            ModeArg::Sequential => SubscriberMode::Sequential,
            ModeArg::Latest => SubscriberMode::Latest,
        }
    }
}

/// When frames are private copies rather than the shared slots (the input device's `copy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CopyArg {
    /// The slots while the ring can spare them, copies beyond; always copies under drop_oldest.
    Auto,
    /// Copy every frame and release its slot at once.
    Always,
    /// Always the slots: a consumer holding as many frames as the ring has slots stalls the publisher.
    Never,
}

impl From<CopyMode> for CopyArg {
    fn from(c: CopyMode) -> CopyArg {
        match c {
            CopyMode::Auto => CopyArg::Auto,
            CopyMode::Always => CopyArg::Always,
            CopyMode::Never => CopyArg::Never,
        }
    }
}

impl From<CopyArg> for CopyMode {
    fn from(c: CopyArg) -> CopyMode {
        match c {
            CopyArg::Auto => CopyMode::Auto,
            CopyArg::Always => CopyMode::Always,
            CopyArg::Never => CopyMode::Never,
        }
    }
}

/// Pixel formats, by the library's names; FFmpeg's `pix_fmt` names where they differ are accepted too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// 8-bit 4:2:0, Y plane and interleaved UV (NVDEC's 8-bit output).
    Nv12,
    /// 8-bit 4:2:0, three planes.
    Yuv420p,
    /// 10-bit 4:2:0 in 16-bit samples, Y and interleaved UV (NVDEC's 10-bit output).
    #[value(alias = "p010le")]
    P010,
    /// 8-bit BGRA, one plane.
    Bgra,
    /// 16-bit 4:2:0, Y and interleaved UV (NVDEC's 12-bit output).
    #[value(alias = "p016le")]
    P016,
    /// 8-bit 4:4:4, three planes.
    Yuv444p,
    /// 16-bit 4:4:4, three planes.
    #[value(alias = "yuv444p16le")]
    Yuv444p16,
    /// 8-bit RGBA, one plane.
    Rgba,
    /// 8-bit BGR with an unused fourth byte, one plane.
    Bgr0,
    /// 8-bit RGB with an unused fourth byte, one plane.
    Rgb0,
    /// 12-bit 4:2:0 in the high bits of 16-bit samples, Y and interleaved UV (NVDEC's 12-bit output since FFmpeg 8.1).
    #[value(alias = "p012le")]
    P012,
    /// 8-bit 4:2:2, Y and interleaved UV.
    Nv16,
    /// 10-bit 4:2:2 in the high bits of 16-bit samples, Y and interleaved UV.
    #[value(alias = "p210le")]
    P210,
    /// 12-bit 4:2:2 in the high bits of 16-bit samples, Y and interleaved UV.
    #[value(alias = "p212le")]
    P212,
    /// 16-bit 4:2:2, Y and interleaved UV.
    #[value(alias = "p216le")]
    P216,
    /// 8-bit 4:2:2, three planes.
    Yuv422p,
    /// 10-bit 4:2:0 in the low bits of 16-bit samples, three planes.
    #[value(alias = "yuv420p10le")]
    Yuv420p10,
    /// 10-bit 4:2:2 in the low bits of 16-bit samples, three planes.
    #[value(alias = "yuv422p10le")]
    Yuv422p10,
    /// 10-bit 4:4:4 in the low bits of 16-bit samples, three planes.
    #[value(alias = "yuv444p10le")]
    Yuv444p10,
    /// 10-bit 4:4:4 in the high bits of 16-bit samples, three planes (NVDEC's since FFmpeg 8.1).
    #[value(name = "yuv444p10msb", alias = "yuv444p10msble")]
    Yuv444p10Msb,
    /// 12-bit 4:4:4 in the high bits of 16-bit samples, three planes (NVDEC's since FFmpeg 8.1).
    #[value(name = "yuv444p12msb", alias = "yuv444p12msble")]
    Yuv444p12Msb,
    /// 8-bit 4:2:0 with a full-size alpha plane: Y, U, V, A.
    Yuva420p,
}

impl From<FormatArg> for PixelFormat {
    fn from(f: FormatArg) -> PixelFormat {
        match f {
            FormatArg::Nv12 => PixelFormat::Nv12,
            FormatArg::Yuv420p => PixelFormat::Yuv420p,
            FormatArg::P010 => PixelFormat::P010,
            FormatArg::Bgra => PixelFormat::Bgra,
            FormatArg::P016 => PixelFormat::P016,
            FormatArg::Yuv444p => PixelFormat::Yuv444p,
            FormatArg::Yuv444p16 => PixelFormat::Yuv444p16,
            FormatArg::Rgba => PixelFormat::Rgba,
            FormatArg::Bgr0 => PixelFormat::Bgr0,
            FormatArg::Rgb0 => PixelFormat::Rgb0,
            FormatArg::P012 => PixelFormat::P012,
            FormatArg::Nv16 => PixelFormat::Nv16,
            FormatArg::P210 => PixelFormat::P210,
            FormatArg::P212 => PixelFormat::P212,
            FormatArg::P216 => PixelFormat::P216,
            FormatArg::Yuv422p => PixelFormat::Yuv422p,
            FormatArg::Yuv420p10 => PixelFormat::Yuv420p10,
            FormatArg::Yuv422p10 => PixelFormat::Yuv422p10,
            FormatArg::Yuv444p10 => PixelFormat::Yuv444p10,
            FormatArg::Yuv444p10Msb => PixelFormat::Yuv444p10Msb,
            FormatArg::Yuv444p12Msb => PixelFormat::Yuv444p12Msb,
            FormatArg::Yuva420p => PixelFormat::Yuva420p,
        }
    }
}

/// What `cuframes bench` checks of each frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VerifyArg {
    /// Three rows of every plane of every frame, and every byte of every --verify-every-th frame.
    Sample,
    /// Every byte of every frame.
    Full,
    /// Nothing.
    None,
}

impl VerifyArg {
    pub fn name(self) -> &'static str {
        match self {
            VerifyArg::Sample => "sample",
            VerifyArg::Full => "full",
            VerifyArg::None => "none",
        }
    }
}

/// The ways `cuframes bench` moves frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// The cuframes ring: subscribers read the publisher's slots in place.
    Cuframes,
    /// A Unix pipe per subscriber, frames written packed, as `ffmpeg -f rawvideo pipe:` does.
    Pipe,
    /// A plain shared-memory ring: copied in by the publisher, out by each subscriber.
    #[value(name = "shm-copy")]
    ShmCopy,
}

/// Shells `cuframes completions` writes for.
pub type ShellArg = clap_complete::Shell;

/// An invalid-argument error.
pub fn invalid(message: impl Into<String>) -> cuframes::Error {
    cuframes::Error::new(cuframes::ErrorKind::InvalidArgument, message)
}

// ---------------------------------------------------------------- legacy options

/// A millisecond option of 0.2 (`--timeout-ms 5000` became `--timeout 5s`):
/// the old spelling, in milliseconds, still wins when given (clap refuses
/// both together), with a warning on stderr. To be removed in a later version.
pub fn legacy_ms(new: Dur, old: Option<u64>, old_name: &str, new_name: &str) -> cuframes::Result<Dur> {
    let Some(ms) = old else {
        return Ok(new);
    };
    let dur = Dur::from_millis(ms).map_err(|e| {
        cuframes::Error::new(
            cuframes::ErrorKind::InvalidArgument,
            format!("bad --{old_name}: {e}"),
        )
    })?;
    eprintln!(
        "cuframes: warning: --{old_name} is deprecated and goes in the next version; use --{new_name} {dur}"
    );
    Ok(dur)
}

// ---------------------------------------------------------------- commands

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The key to publish under: 1-63 characters from a-z A-Z 0-9 _ -.
    pub key: String,
    /// Where the frame slots live.
    #[arg(long, value_enum, ignore_case = true, default_value = "auto")]
    pub memory: MemoryArg,
    /// The pixel format of the test pattern.
    #[arg(long, value_enum, ignore_case = true, default_value = "nv12")]
    pub format: FormatArg,
    /// The frame size, as WIDTHxHEIGHT.
    #[arg(long, default_value = "1280x720", value_name = "WxH")]
    pub size: String,
    /// Frames per second to publish at (0: as fast as the ring allows).
    #[arg(long, default_value_t = 30.0)]
    pub fps: f64,
    /// How many frames to publish (0: until SIGINT or SIGTERM).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub frames: u64,
    /// How many slots the ring has, 1 to 16; 16 leaves room for the frames a consumer's filters and encoder hold.
    #[arg(long, default_value_t = cuframes::defaults::RING_SIZE, value_name = "N")]
    pub ring: usize,
    /// What to do when the ring is full.
    #[arg(long, value_enum, ignore_case = true, default_value = "drop_oldest")]
    pub policy: PolicyArg,
    /// Under strict_wait, how long a subscriber may hold up the ring (no slot free for the next frame) before it is dropped; also the least time the end of the stream waits for subscribers to take the last frame.
    #[arg(long, default_value_t = Dur(cuframes::defaults::ACK_TIMEOUT), value_name = "DURATION")]
    pub ack_timeout: Dur,
    #[arg(long, hide = true, value_name = "MS", conflicts_with = "ack_timeout")]
    pub ack_timeout_ms: Option<u64>,
    /// Under strict_wait, the same for a subscriber that joined less than this long ago, while its consumer is still starting.
    #[arg(long, default_value_t = Dur(cuframes::defaults::STARTUP_TIMEOUT), value_name = "DURATION")]
    pub startup_timeout: Dur,
    #[arg(long, hide = true, value_name = "MS", conflicts_with = "startup_timeout")]
    pub startup_timeout_ms: Option<u64>,
    /// How long a connecting subscriber may take to finish its handshake before it is closed (it makes its CUDA context meanwhile; one that took longer connects again by itself).
    #[arg(long, default_value_t = Dur(cuframes::defaults::HANDSHAKE_TIMEOUT), value_name = "DURATION")]
    pub handshake_timeout: Dur,
    /// Hold the first frame until this many subscribers are active (0 to 31).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub wait_subscribers: usize,
    /// How long --wait-subscribers waits before the publisher fails.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub wait_timeout: Dur,
    #[arg(long, hide = true, value_name = "MS", conflicts_with = "wait_timeout")]
    pub wait_timeout_ms: Option<u64>,
    /// Let members of this group (a name or a gid) subscribe too: the socket becomes 0660 and the shared memory 0640 with that group (without it: 0600, this user and root).
    #[arg(long, value_name = "GROUP")]
    pub group: Option<String>,
    /// Which protocol-v1 subscribers to admit, those that ACK in the shared memory every one of them can write (other implementations, cuframes before 0.3); see docs/security.md.
    #[arg(long, value_enum, default_value_t = V1PeersArg::SameUser)]
    pub v1_peers: V1PeersArg,
    /// The CUDA device (ordinal) whose primary context holds the slots; naming one asks for CUDA memory, an error with --memory host or without a usable GPU.
    #[arg(long, value_name = "N")]
    pub cuda_device: Option<u32>,
    /// How CUDA slots reach subscribers.
    #[arg(long, value_enum, ignore_case = true, default_value = "auto")]
    pub cuda_share: CudaShareArg,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct SubscribeArgs {
    /// The key of the publisher.
    pub key: String,
    /// How many frames to read (0: until the publisher shuts down).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub frames: u64,
    /// Check every frame against the test pattern of `cuframes publish`.
    #[arg(long)]
    pub verify: bool,
    /// Fail when no frame arrives for this long (the first frame: at least --wait-timeout).
    #[arg(long, default_value_t = Dur(cuframes::defaults::FRAME_TIMEOUT), value_name = "DURATION")]
    pub timeout: Dur,
    #[arg(long, hide = true, value_name = "MS", conflicts_with = "timeout")]
    pub timeout_ms: Option<u64>,
    /// How long to wait for a publisher of KEY to appear, not counting the time this process spends making its CUDA context meanwhile (0: fail at once when there is none), and then at least this long for its first frame; services started together come up in any order.
    #[arg(long, default_value_t = Dur(cuframes::defaults::WAIT_FOR_PUBLISHER), value_name = "DURATION")]
    pub wait_timeout: Dur,
    #[arg(long, hide = true, value_name = "MS", conflicts_with = "wait_timeout")]
    pub wait_ms: Option<u64>,
    /// The name the publisher and `cuframes inspect` show (at most 31 bytes; default `sub-<pid>`).
    #[arg(long)]
    pub name: Option<String>,
    /// Which frames to read.
    #[arg(long, value_enum, ignore_case = true, default_value = "sequential")]
    pub mode: ModeArg,
    /// Print the summary as a JSON object on the last line.
    #[arg(long)]
    pub json: bool,
    /// The CUDA device (ordinal) whose primary context maps CUDA frames (default: device 0; an error without a usable GPU); frames of a publisher on another GPU are read over peer access.
    #[arg(long, value_name = "N")]
    pub cuda_device: Option<u32>,
    /// When frames are private copies rather than the shared slots.
    #[arg(long, value_enum, ignore_case = true, default_value_t = CopyArg::from(cuframes::defaults::COPY))]
    pub copy: CopyArg,
    /// Keep the newest N frames unreleased, as an encoder does; frames are checked when taken and again when released.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub hold: usize,
    /// Under drop_oldest, let a reading thread queue up to N frames while this subscriber is busy or still starting (0: no thread; none with --mode latest).
    #[arg(long, default_value_t = cuframes::defaults::READ_AHEAD, value_name = "N")]
    pub read_ahead: usize,
    /// Wait this long after subscribing before reading, like a consumer that is still starting.
    #[arg(long, default_value = "0s", value_name = "DURATION")]
    pub start_delay: Dur,
    #[arg(long, hide = true, value_name = "MS", conflicts_with = "start_delay")]
    pub start_delay_ms: Option<u64>,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Print a JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The key to inspect.
    pub key: String,
    /// Print a JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// Clean up only this key (default: every stale key).
    pub key: Option<String>,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Where the frames live.
    #[arg(long, value_enum, ignore_case = true, default_value = "host")]
    pub memory: MemoryArg,
    /// The pixel format of the frames.
    #[arg(long, value_enum, ignore_case = true, default_value = "nv12")]
    pub format: FormatArg,
    /// The frame size, as WIDTHxHEIGHT.
    #[arg(long, default_value = "1920x1080", value_name = "WxH")]
    pub size: String,
    /// How many subscriber processes each transport feeds (1 to 31).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub subscribers: usize,
    /// How many slots the ring of cuframes and shm-copy has (1 to 16).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub ring: usize,
    /// What cuframes and shm-copy do when the ring is full (strict_wait is lossless).
    #[arg(long, value_enum, ignore_case = true, default_value = "strict_wait")]
    pub policy: PolicyArg,
    /// How many frames each transport moves.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub frames: u64,
    /// Frames per second to publish at (0: as fast as the transport takes them).
    #[arg(long, default_value_t = 0.0)]
    pub fps: f64,
    /// The transports to measure, comma-separated, in this order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "cuframes,pipe,shm-copy"
    )]
    pub transports: Vec<TransportArg>,
    /// What to check of each frame.
    #[arg(long, value_enum, ignore_case = true, default_value = "sample")]
    pub verify: VerifyArg,
    /// With --verify sample, check every byte of every Nth frame (0: never).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub verify_every: u64,
    /// With CUDA memory, make subscribers synchronize their stream before a frame counts as ready.
    #[arg(long)]
    pub cuda_sync: bool,
    /// How the cuframes transport shares CUDA slots, as for `publish --cuda-share`.
    #[arg(long, value_enum, ignore_case = true, default_value = "auto")]
    pub cuda_share: CudaShareArg,
    /// Fail when a subscriber gets no frame for this long.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub timeout: Dur,
    #[arg(long, hide = true, value_name = "MS", conflicts_with = "timeout")]
    pub timeout_ms: Option<u64>,
    /// Print a JSON array, one object per transport, instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write the latency distributions to this file as an SVG plot (CDF, log µs axis).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    /// How often to refresh; the frame rates are measured over this interval too (10ms to 1h).
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub interval: Dur,
    #[arg(long, hide = true, value_name = "MS", conflicts_with = "interval")]
    pub interval_ms: Option<u64>,
    /// Print one snapshot, measured over one interval, and exit.
    #[arg(long)]
    pub once: bool,
    /// With --once, print a JSON array, one object per key.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExporterArgs {
    /// Address to serve /metrics and /healthz on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9477")]
    pub listen: String,
    /// Write the metrics to this file every --interval instead (for node_exporter's textfile collector; written whole, then renamed).
    #[arg(long, value_name = "PATH")]
    pub textfile: Option<std::path::PathBuf>,
    /// How often --textfile is rewritten.
    #[arg(long, default_value = "15s", value_name = "DURATION")]
    pub interval: Dur,
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
    /// Healthy only when the newest frame is at most this old.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub max_age: Dur,
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
pub struct CompletionsArgs {
    /// The shell to write the completion script for.
    #[arg(value_enum)]
    pub shell: ShellArg,
}

#[derive(Debug, Args)]
pub struct ManpageArgs {
    /// Write cuframes.1 and one page per command (cuframes-publish.1, ...) into this directory instead of printing cuframes.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_interface_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn format_names_are_the_library_s() {
        for f in FormatArg::value_variants() {
            let name = f.to_possible_value().unwrap().get_name().to_owned();
            assert_eq!(PixelFormat::from(*f).name(), name);
        }
        assert_eq!(FormatArg::value_variants().len(), PixelFormat::ALL.len());
    }

    /// One scheme: the library's name, and FFmpeg's pix_fmt name where it
    /// differs, for every format.
    #[test]
    fn format_takes_both_names() {
        let parse = |s: &str| Cli::try_parse_from(["cuframes", "publish", "k", "--format", s]);
        for format in PixelFormat::ALL {
            for name in [format.name().to_owned(), format.ffmpeg_name()] {
                let Command::Publish(a) = parse(&name).unwrap_or_else(|e| panic!("{name}: {e}")).command
                else {
                    unreachable!()
                };
                assert_eq!(PixelFormat::from(a.format), format, "{name}");
            }
        }
        assert!(parse("p012be").is_err());
    }

    #[test]
    fn policies_in_both_spellings() {
        let parse = |s: &str| Cli::try_parse_from(["cuframes", "publish", "k", "--policy", s]);
        for (text, want) in [
            ("drop_oldest", PolicyArg::DropOldest),
            ("drop-oldest", PolicyArg::DropOldest),
            ("STRICT_WAIT", PolicyArg::StrictWait),
            ("strict-wait", PolicyArg::StrictWait),
        ] {
            let Command::Publish(a) = parse(text).unwrap().command else {
                unreachable!()
            };
            assert_eq!(a.policy, want);
        }
        assert!(parse("drop").is_err());
        assert_eq!(policy_name(Policy::DropOldest), "drop_oldest");
        assert_eq!(policy_name(Policy::StrictWait), "strict_wait");
    }
}
