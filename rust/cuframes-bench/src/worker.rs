//! The worker process (the `cuframes` executable again, as
//! [`WORKER_COMMAND`](crate::WORKER_COMMAND)): sets up, says `ready`,
//! receives one transport's frames and prints one JSON line with what it
//! saw ([`SubscriberResult`]).

use std::io::Write;
use std::process::ExitCode;

use cuframes::{Error, ErrorKind, PixelFormat, Result};

use crate::frames::{Checker, Geometry, Verify};
use crate::gpu::Gpu;
use crate::receiving::{Setup, Tally};
use crate::transport::Transport;
use crate::transports::carrier_of;
use crate::worker_args::WorkerArgs;
use crate::worker_result::SubscriberResult;

pub fn run(args: WorkerArgs) -> Result<ExitCode> {
    let transport = Transport::parse(&args.transport)?;
    let mut setup = setup(args)?;
    let mut tally = Tally::with_capacity(setup.args.frames);
    let (error, cpu) = carrier_of(transport).receive(&mut setup, &mut tally);
    let result = result(&setup, tally, error, cpu);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", result.to_json()).map_err(|e| Error::io("writing the result", &e))?;
    Ok(ExitCode::SUCCESS)
}

fn setup(args: WorkerArgs) -> Result<Setup> {
    let format = PixelFormat::parse(&args.format)?;
    let geometry = Geometry::new(format, args.width, args.height)?;
    let verify = Verify::parse(&args.verify, args.verify_every)
        .map_err(|e| Error::new(ErrorKind::InvalidArgument, e))?;
    let checker = Checker::new(format, verify, args.pool);
    let gpu = match args.memory.as_str() {
        "cuda" => Some(Gpu::open()?),
        _ => None,
    };
    Ok(Setup {
        geometry,
        checker,
        gpu,
        args,
    })
}

/// What the receive loop counted, ended by `error`, in `cpu_ns` of CPU
/// time (whole-frame checks taken out).
fn result(setup: &Setup, tally: Tally, error: Option<Error>, cpu_ns: u64) -> SubscriberResult {
    let c = &setup.checker;
    SubscriberResult {
        index: setup.args.index,
        frames: tally.received,
        verified: c.verified,
        mismatched: c.mismatched,
        torn: c.torn,
        whole_frames: c.whole_frames,
        dropped: tally.dropped,
        last_seq: tally.last_seq,
        first_ready_ns: tally.first_ready,
        last_ready_ns: tally.last_ready,
        cpu_ns: cpu_ns.saturating_sub(tally.verify_cpu),
        verify_cpu_ns: tally.verify_cpu,
        latency_ns: tally.latency,
        handover_ns: tally.handover,
        error: error.map(|e| e.to_string()),
    }
}
