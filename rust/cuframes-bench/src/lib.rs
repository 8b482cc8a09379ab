//! The harness of `cuframes bench`: the same frames through cuframes, a
//! pipe and a plain shared-memory copy, to N subscriber processes each;
//! what each side measured, per transport.
//!
//! Two kinds of process. The publisher ([`Bench`], in the `cuframes bench`
//! process) makes the frames once, then per transport starts N workers and
//! publishes every frame to them. Each worker is the `cuframes` executable
//! again, as its hidden [`WORKER_COMMAND`] ([`worker::run`]): it receives
//! and checks the frames and prints what it measured. Times are
//! CLOCK_MONOTONIC, one clock for every process.
//!
//! Modules use only modules of the rows below their own, and of their own
//! row only as the arrows say; no two use each other:
//!
//! | row | modules |
//! |---|---|
//! | the two processes | `bench` (publisher), `worker` |
//! | picking a transport | `transports` (`carrier_of`) |
//! | the transports, both sides each | `transports::{via_cuframes, via_pipe, via_shm}` → `transports::carrier` (the trait) |
//! | each side's kit | `publishing::{source, workers, measured → workers}`, `receiving::{check, stdin}` → `receiving` |
//! | shared | `plan` → `frames`, `shm_ring`, `transport`; `worker_args` → `plan`; `worker_result`, `clock`, `gpu` |

mod bench;
mod clock;
mod frames;
mod gpu;
mod plan;
mod publishing;
mod receiving;
mod shm_ring;
mod transport;
mod transports;
pub mod worker;
mod worker_args;
mod worker_result;

pub use bench::Bench;
pub use frames::{Geometry, Verify};
pub use plan::{MAX_RING, MAX_SUBSCRIBERS, Plan};
pub use publishing::measured::{Measured, PublisherCounters, PublisherSide};
pub use transport::Transport;
pub use worker_args::{WORKER_COMMAND, WorkerArgs};
pub use worker_result::SubscriberResult;
