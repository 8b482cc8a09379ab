//! The transports, each both of its sides in one module behind one trait
//! ([`Carrier`]): the publisher's `publish` and the worker's `receive`.
//! They build on the kits ([`crate::publishing`], [`crate::receiving`]);
//! only the two processes ([`crate::bench`], [`crate::worker`]) pick one,
//! through [`carrier_of`].

mod carrier;
mod via_cuframes;
mod via_pipe;
mod via_shm;

pub use carrier::Carrier;

use crate::transport::Transport;

/// The sides of `transport`.
pub fn carrier_of(transport: Transport) -> &'static dyn Carrier {
    match transport {
        Transport::Cuframes => &via_cuframes::ViaCuframes,
        Transport::Pipe => &via_pipe::ViaPipe,
        Transport::ShmCopy => &via_shm::ViaShm,
    }
}
