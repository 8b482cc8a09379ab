//! What every transport provides: both of its sides.

use cuframes::{Error, Result};

use crate::plan::Plan;
use crate::publishing::measured::Measured;
use crate::publishing::source::Source;
use crate::receiving::{Setup, Tally};

/// Both sides of one transport.
pub trait Carrier: Sync {
    /// Starts the workers, publishes every frame of `source` to them and
    /// collects what they measured. `tag` makes the names this round
    /// creates (a key, a file) unique.
    fn publish(&self, plan: &Plan, source: &mut Source, tag: &str) -> Result<Measured>;

    /// A worker's receive loop: the error that ended it (if any) and the
    /// CPU time it took.
    fn receive(&self, setup: &mut Setup, tally: &mut Tally) -> (Option<Error>, u64);
}
