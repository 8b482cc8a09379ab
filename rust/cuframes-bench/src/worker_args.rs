//! The command line from the publisher to each worker: one definition,
//! parsed by clap in the worker ([`WorkerArgs`], which the `cuframes`
//! command embeds as its hidden [`WORKER_COMMAND`]) and written by the
//! publisher from the same fields ([`WorkerArgs::to_args`]).

use clap::Args;

use crate::plan::Plan;
use crate::transport::Transport;

/// The hidden subcommand that makes the executable a worker.
pub const WORKER_COMMAND: &str = "__bench-worker";

/// What `cuframes bench` passes to each of its subscriber processes.
#[derive(Clone, Debug, Args)]
pub struct WorkerArgs {
    /// cuframes, pipe or shm-copy.
    #[arg(long)]
    pub transport: String,
    /// For cuframes the key, for shm-copy the shared memory file.
    #[arg(long, default_value = "")]
    pub target: String,
    /// The subscriber's index (0-based).
    #[arg(long, default_value_t = 0)]
    pub index: usize,
    /// host or cuda.
    #[arg(long)]
    pub memory: String,
    /// The pixel format's name.
    #[arg(long)]
    pub format: String,
    /// The frame width in pixels.
    #[arg(long)]
    pub width: u32,
    /// The frame height in pixels.
    #[arg(long)]
    pub height: u32,
    /// How many frames to expect.
    #[arg(long)]
    pub frames: u64,
    /// How many distinct frames the publisher cycles through.
    #[arg(long)]
    pub pool: u64,
    /// The ring's slots.
    #[arg(long, default_value_t = 4)]
    pub ring: usize,
    /// sample, full or none.
    #[arg(long)]
    pub verify: String,
    /// With sample, every byte of every Nth frame.
    #[arg(long, default_value_t = 100)]
    pub verify_every: u64,
    /// Synchronize the stream before a frame counts as ready.
    #[arg(long)]
    pub cuda_sync: bool,
    /// Fail when no frame arrives for this many ms.
    #[arg(long, default_value_t = 10000)]
    pub timeout_ms: u64,
}

impl WorkerArgs {
    /// Worker `index` of `transport` in `plan`, reading from `target`.
    pub(crate) fn new(plan: &Plan, transport: Transport, target: &str, index: usize) -> WorkerArgs {
        WorkerArgs {
            transport: transport.name().to_owned(),
            target: target.to_owned(),
            index,
            memory: plan.memory.name().to_owned(),
            format: plan.format().name().to_owned(),
            width: plan.geometry.layout.width(),
            height: plan.geometry.layout.height(),
            frames: plan.frames,
            pool: plan.pool(),
            ring: plan.ring,
            verify: plan.verify.name().to_owned(),
            verify_every: match plan.verify {
                crate::frames::Verify::Sample { every } => every,
                _ => 0,
            },
            cuda_sync: plan.cuda_sync,
            timeout_ms: plan.timeout.as_millis() as u64,
        }
    }

    /// The arguments after [`WORKER_COMMAND`] that clap parses back into
    /// these fields.
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            ("--transport", self.transport.clone()),
            ("--target", self.target.clone()),
            ("--index", self.index.to_string()),
            ("--memory", self.memory.clone()),
            ("--format", self.format.clone()),
            ("--width", self.width.to_string()),
            ("--height", self.height.to_string()),
            ("--frames", self.frames.to_string()),
            ("--pool", self.pool.to_string()),
            ("--ring", self.ring.to_string()),
            ("--verify", self.verify.clone()),
            ("--verify-every", self.verify_every.to_string()),
            ("--timeout-ms", self.timeout_ms.to_string()),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_owned(), value])
        .collect();
        if self.cuda_sync {
            args.push("--cuda-sync".into());
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: WorkerArgs,
    }

    /// What the publisher writes is what the worker reads.
    #[test]
    fn the_command_line_round_trips() {
        let sent = WorkerArgs {
            transport: "shm-copy".into(),
            target: "/dev/shm/x".into(),
            index: 3,
            memory: "cuda".into(),
            format: "p010".into(),
            width: 64,
            height: 48,
            frames: 50,
            pool: 17,
            ring: 2,
            verify: "sample".into(),
            verify_every: 7,
            cuda_sync: true,
            timeout_ms: 1234,
        };
        let argv = std::iter::once(WORKER_COMMAND.to_owned()).chain(sent.to_args());
        let got = Wrapper::try_parse_from(argv).unwrap().args;
        assert_eq!(format!("{got:?}"), format!("{sent:?}"));
    }
}
