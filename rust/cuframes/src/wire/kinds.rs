//! The enums whose numbers are the frame meta's `memory_kind` (protocol
//! §2.4, D17, D27): one field says both where the frames live and how CUDA
//! slots are shared. The C API (`cuframes_memory`) and Python number memory
//! on their own, because they also need AUTO (a request, never on the wire).
//! This table is the one place the two numberings meet:
//!
//! | wire `memory_kind` | [`MemoryKind`] | [`CudaShare`] | C `cuframes_memory` (Python `memory=`) |
//! |---|---|---|---|
//! | —                         | (`MemoryRequest::Auto`) | — | 0 `CUFRAMES_MEMORY_AUTO` (`"auto"`) |
//! | 0 `MEMORY_KIND_CUDA`      | `Cuda` | `Ipc` | 2 `CUFRAMES_MEMORY_CUDA` (`"cuda"`), `cuda_share` IPC |
//! | 1 `MEMORY_KIND_HOST`      | `Host` | —     | 1 `CUFRAMES_MEMORY_HOST` (`"host"`) |
//! | 2 `MEMORY_KIND_CUDA_FD`   | `Cuda` | `Fd`  | 2 `CUFRAMES_MEMORY_CUDA` (`"cuda"`), `cuda_share` FD |
//!
//! Conversions: [`MemoryKind::wire`] / [`MemoryKind::from_wire`] and
//! `CudaShare::wire` / `CudaShare::from_wire` here; `memory_to_c` and
//! `memory_request_from_c` in `rust/cuframes-capi/src/types.rs`.

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

/// How a publisher shares CUDA slots with other processes (D27).
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
