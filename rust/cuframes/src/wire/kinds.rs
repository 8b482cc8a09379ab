//! The enums whose numbers are the frame meta's `memory_kind` (protocol
//! §2.4, D17, D27): one field says both where the frames live and how CUDA
//! slots are shared. This is the one place that maps them to numbers.
//!
//! | `memory_kind` | [`MemoryKind`] | [`CudaShare`] | C `cuframes_memory` |
//! |---|---|---|---|
//! | 0 (`MEMORY_KIND_CUDA`) | `Cuda` | `Ipc` | `CUFRAMES_MEMORY_CUDA` |
//! | 1 (`MEMORY_KIND_HOST`) | `Host` | — | `CUFRAMES_MEMORY_HOST` |
//! | 2 (`MEMORY_KIND_CUDA_FD`) | `Cuda` | `Fd` | `CUFRAMES_MEMORY_CUDA` |
//!
//! The C API numbers its `cuframes_memory` values on its own (AUTO is a
//! request, not a wire value); `rust/cuframes-capi/src/types.rs` converts.

use super::layout::{MEMORY_KIND_CUDA, MEMORY_KIND_CUDA_FD, MEMORY_KIND_HOST};

/// Where the frames of a publisher live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// CUDA device memory (shared as [`CudaShare`] says).
    Cuda,
    /// Host shared memory (a sealed memfd).
    Host,
}

impl MemoryKind {
    /// The frame meta `memory_kind` value.
    pub fn wire(self) -> u32 {
        match self {
            MemoryKind::Cuda => MEMORY_KIND_CUDA,
            MemoryKind::Host => MEMORY_KIND_HOST,
        }
    }

    /// The kind for a `memory_kind` value.
    pub fn from_wire(value: u32) -> Option<MemoryKind> {
        match value {
            MEMORY_KIND_CUDA | MEMORY_KIND_CUDA_FD => Some(MemoryKind::Cuda),
            MEMORY_KIND_HOST => Some(MemoryKind::Host),
            _ => None,
        }
    }

    /// "cuda" or "host".
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Cuda => "cuda",
            MemoryKind::Host => "host",
        }
    }
}

/// How a publisher shares CUDA slots with other processes (decision 27).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CudaShare {
    /// VMM allocations exported as file descriptors, sent over the control
    /// socket: works between containers that share only the runtime
    /// directory (separate PID and IPC namespaces).
    Fd,
    /// Legacy CUDA IPC handles in the shared header (protocol v1): the
    /// subscriber must share the publisher's PID namespace.
    Ipc,
}

impl CudaShare {
    /// "fd" or "ipc".
    pub fn name(self) -> &'static str {
        match self {
            CudaShare::Fd => "fd",
            CudaShare::Ipc => "ipc",
        }
    }

    /// The frame meta `memory_kind` of CUDA slots shared this way.
    pub(crate) fn wire(self) -> u32 {
        match self {
            CudaShare::Fd => MEMORY_KIND_CUDA_FD,
            CudaShare::Ipc => MEMORY_KIND_CUDA,
        }
    }

    /// How the slots of a `memory_kind` are shared; None for host memory
    /// and unknown kinds.
    pub(crate) fn from_wire(memory_kind: u32) -> Option<CudaShare> {
        match memory_kind {
            MEMORY_KIND_CUDA_FD => Some(CudaShare::Fd),
            MEMORY_KIND_CUDA => Some(CudaShare::Ipc),
            _ => None,
        }
    }
}
