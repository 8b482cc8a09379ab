//! Protocol v1 on the wire: the shared-memory layout and the control messages.

pub mod kinds;
pub mod layout;
pub mod message;

pub use kinds::{CudaShare, MemoryKind};

pub use layout::*;
