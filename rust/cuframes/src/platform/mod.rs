//! What this library needs from Linux, in one place: mapped regions and
//! sealed memfds (`region`), SIGBUS contained to the region it hit (`sigbus`), OFD locks (`lock`), peer credentials and file
//! modes (`access`), names in shared directories (`names`), and the clocks
//! (`clock`). Every other module reaches the
//! kernel through these (or through `nix` for sockets and shared-memory
//! names); none of them knows the protocol.

pub(crate) mod access;
pub mod clock;
pub(crate) mod lock;
pub(crate) mod names;
pub(crate) mod region;
pub(crate) mod sigbus;
