//! The publisher process of a run (`cuframes bench`): the frames are made
//! once, then each transport in turn gets fresh workers and every frame.

use cuframes::{Error, Result};

use crate::plan::Plan;
use crate::publishing::measured::Measured;
use crate::publishing::source::Source;
use crate::transport::Transport;
use crate::transports::carrier_of;

/// A run: its plan, the frames it sends, the transports measured so far.
#[derive(Debug)]
pub struct Bench {
    plan: Plan,
    source: Source,
    /// Part of every name a round creates (a key, a file), with the round.
    run_id: u32,
    rounds: usize,
}

impl Bench {
    /// Makes the frames (`--memory cuda`: opens the GPU and uploads them).
    pub fn new(plan: Plan) -> Result<Bench> {
        let source = Source::make(&plan)?;
        Ok(Bench {
            plan,
            source,
            run_id: std::process::id(),
            rounds: 0,
        })
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Measures `transport`: starts its workers, publishes every frame to
    /// them and collects what they measured. An error names the transport.
    pub fn measure(&mut self, transport: Transport) -> Result<Measured> {
        let tag = format!("{}-{}", self.run_id, self.rounds);
        self.rounds += 1;
        carrier_of(transport)
            .publish(&self.plan, &mut self.source, &tag)
            .map_err(|e| Error::new(e.kind(), format!("{}: {e}", transport.name())))
    }
}
