//! Command-line interface (the exact interface other tools drive).

use clap::{Args, Parser, Subcommand};

/// Zero-copy sharing of decoded video frames between processes.
#[derive(Debug, Parser)]
#[command(name = "cuframes", version, about, long_about = None)]
pub struct Cli {
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
}

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// Key: 1-63 characters from a-z A-Z 0-9 _ -.
    pub key: String,
    /// Frame memory: auto (CUDA when usable, else host), host or cuda.
    #[arg(long, default_value = "auto")]
    pub memory: String,
    /// Pixel format: nv12, yuv420p, p010 or bgra.
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
    /// strict-wait: how long a subscriber may hold a slot before it is dropped.
    #[arg(long, default_value_t = 1000)]
    pub ack_timeout_ms: u64,
    /// Hold the first frame until N subscribers are active.
    #[arg(long, default_value_t = 0)]
    pub wait_subscribers: usize,
    /// How long --wait-subscribers waits.
    #[arg(long, default_value_t = 30000)]
    pub wait_timeout_ms: u64,
    /// Also let members of this group (name or gid) subscribe: socket and
    /// shared memory 0660 with that group (default: 0600, this user and root).
    #[arg(long)]
    pub group: Option<String>,
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
    /// Name shown to the publisher (at most 31 bytes).
    #[arg(long)]
    pub name: Option<String>,
    /// Frame selection: sequential (every frame) or latest (newest only).
    #[arg(long, default_value = "sequential")]
    pub mode: String,
    /// Print the summary as a JSON object on the last line.
    #[arg(long)]
    pub json: bool,
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
