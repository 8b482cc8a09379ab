//! Memory backends: where frame data lives.
//!
//! The protocol logic (ring, ACKs, handshake) never touches frame memory; it
//! asks a backend. The publisher side is a `SlotPool` that owns the slots
//! and copies frames into them; the subscriber side is a `SlotMapping`
//! opened from what the publisher shares (slot handles in the header and
//! file descriptors sent with EVENT_FD). The frame meta's `memory_kind`
//! extension tells a subscriber which backend to open.

pub(crate) mod cuda;
pub(crate) mod host;

use std::os::fd::OwnedFd;

use crate::error::{Error, ErrorKind, Result};
use crate::format::FrameLayout;
use crate::wire::layout::SlotDescriptor;
pub use crate::wire::{CudaShare, MemoryKind};

/// How a publisher asks to share CUDA slots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CudaShareRequest {
    /// `Fd` where the GPU and driver support it, `Ipc` otherwise (and for
    /// external slots, which are the caller's `cuMemAlloc` buffers).
    #[default]
    Auto,
    /// File descriptors; an error where unsupported.
    Fd,
    /// CUDA IPC handles (what protocol-v1 subscribers expect).
    Ipc,
}

impl CudaShareRequest {
    /// Parses "auto", "fd" or "ipc".
    pub fn parse(name: &str) -> Result<CudaShareRequest> {
        match name.to_ascii_lowercase().as_str() {
            "auto" => Ok(CudaShareRequest::Auto),
            "fd" => Ok(CudaShareRequest::Fd),
            "ipc" => Ok(CudaShareRequest::Ipc),
            _ => Err(Error::invalid(format!(
                "unknown CUDA sharing mode '{name}' (auto, fd or ipc)"
            ))),
        }
    }
}

/// What memory a publisher asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryRequest {
    /// CUDA when a driver and device are usable, host memory otherwise.
    #[default]
    Auto,
    /// Host shared memory.
    Host,
    /// CUDA device memory; an error when CUDA is unavailable.
    Cuda,
}

impl MemoryRequest {
    /// Parses "auto", "host" or "cuda".
    pub fn parse(name: &str) -> Result<MemoryRequest> {
        match name.to_ascii_lowercase().as_str() {
            "auto" => Ok(MemoryRequest::Auto),
            "host" => Ok(MemoryRequest::Host),
            "cuda" => Ok(MemoryRequest::Cuda),
            _ => Err(Error::invalid(format!(
                "unknown memory kind '{name}' (auto, host or cuda)"
            ))),
        }
    }

    /// The backend this request resolves to on this machine: `Auto` is CUDA
    /// when a driver and a device are usable, host memory otherwise.
    pub fn resolve(self) -> Result<MemoryKind> {
        match self {
            MemoryRequest::Host => Ok(MemoryKind::Host),
            MemoryRequest::Auto if cuda_available() => Ok(MemoryKind::Cuda),
            MemoryRequest::Auto => Ok(MemoryKind::Host),
            MemoryRequest::Cuda => cuda::driver::require().map(|()| MemoryKind::Cuda),
        }
    }
}

/// Whether a CUDA driver loads and reports a device (checked once; never
/// crashes or hangs on machines without one).
pub fn cuda_available() -> bool {
    cuda::driver::availability().is_ok()
}

/// Why CUDA is unusable here, or None when it is usable.
pub fn cuda_unavailable_reason() -> Option<String> {
    cuda::driver::availability().as_ref().err().cloned()
}

/// The caller's CUDA objects, for the CUDA backend: the context frames are
/// mapped in and the stream copies and event waits are ordered on. Raw
/// driver handles (`CUcontext`, `CUstream`) as integers; 0 = the current
/// context (else the device's primary context) / the default stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CudaBinding {
    /// `CUcontext`.
    pub context: usize,
    /// `CUstream`.
    pub stream: usize,
}

/// One source plane in host memory.
#[derive(Clone, Copy, Debug)]
pub struct HostPlane<'a> {
    /// The plane's bytes, at least `pitch × (rows-1) + row_bytes` long.
    pub data: &'a [u8],
    /// Bytes from one row to the next.
    pub pitch: usize,
}

/// One source plane in CUDA device memory (a `CUdeviceptr` of the caller's
/// context).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevicePlane {
    /// Device address of the plane's first row.
    pub ptr: u64,
    /// Bytes from one row to the next.
    pub pitch: usize,
}

/// A pointer to a plane of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanePtr {
    /// Host memory, readable in this process.
    Host(*const u8),
    /// A CUDA device pointer (`CUdeviceptr`) in the subscriber's context.
    Device(u64),
}

/// Publisher side: the ring's slots.
pub(crate) trait SlotPool: Send + std::fmt::Debug {
    /// The kind of memory.
    fn kind(&self) -> MemoryKind;
    /// The 64-byte handle written into slot `index`'s descriptor.
    fn slot_handle(&self, index: usize) -> [u8; 64];
    /// The 64-byte interprocess event handle for the header.
    fn event_handle(&self) -> [u8; 64] {
        [0; 64]
    }
    /// Descriptors every subscriber receives after SUBSCRIBE_RESP, each with
    /// its EVENT_FD purpose.
    fn shared_fds(&self) -> Result<Vec<(u32, OwnedFd)>>;
    /// Descriptors sent before SUBSCRIBE to subscribers that ask for them
    /// (CUDA slots shared as fds, D27), each with its purpose.
    fn early_fds(&self) -> Result<Vec<(u32, OwnedFd)>> {
        Ok(Vec::new())
    }
    /// How CUDA slots are shared; None for host memory.
    fn cuda_share(&self) -> Option<CudaShare> {
        None
    }
    /// The GPU the slots live on (16-byte UUID; zero for host memory).
    fn device_uuid(&self) -> [u8; 16] {
        [0; 16]
    }
    /// Copies frame `seq` from host planes into slot `index`.
    fn write_host(
        &mut self,
        index: usize,
        seq: u64,
        layout: &FrameLayout,
        planes: &[HostPlane<'_>],
    ) -> Result<()>;
    /// Copies frame `seq` from device planes into slot `index`.
    fn write_device(
        &mut self,
        index: usize,
        seq: u64,
        layout: &FrameLayout,
        planes: &[DevicePlane],
    ) -> Result<()>;
    /// Where plane `plane` of slot `index` starts (for in-place writes).
    fn slot_plane(&self, index: usize, layout: &FrameLayout, plane: usize) -> PlanePtr;
    /// Frames this pool copied in with the CUDA copy kernel.
    fn kernel_copies(&self) -> u64 {
        0
    }
    /// The caller wrote frame `seq` into slot `index` in place (CUDA: mark
    /// it done on the caller's stream).
    fn written_in_place(&mut self, _index: usize, _seq: u64) -> Result<()> {
        Ok(())
    }
    /// Slot `index`'s planes for writing in place, when the memory is
    /// host-addressable.
    fn planes_mut(&mut self, index: usize, layout: &FrameLayout) -> Option<Vec<&mut [u8]>>;
}

/// A subscriber's private copy of a frame (D25), laid out like a
/// slot: host bytes, or device memory in the subscriber's CUDA context.
#[derive(Debug)]
pub(crate) enum LocalFrame {
    /// Host memory.
    Host(host::AlignedBytes),
    /// CUDA device memory.
    Device(cuda::LocalDeviceFrame),
}

impl LocalFrame {
    /// Start of plane `plane`.
    pub(crate) fn plane(&self, layout: &FrameLayout, plane: usize) -> PlanePtr {
        let offset = layout.planes()[plane].offset;
        match self {
            LocalFrame::Host(bytes) => PlanePtr::Host(bytes.as_slice()[offset..].as_ptr()),
            LocalFrame::Device(frame) => PlanePtr::Device(frame.ptr() + offset as u64),
        }
    }
}

/// Subscriber side: the ring's slots as mapped in this process.
pub(crate) trait SlotMapping: Send + Sync + std::fmt::Debug {
    /// A new private buffer for one frame.
    fn new_local(&self, layout: &FrameLayout) -> Result<LocalFrame>;
    /// Copies slot `index`'s frame (`seq`) into `dst`, complete when this
    /// returns (the slot may be released right after).
    fn copy_out(&self, index: usize, seq: u64, layout: &FrameLayout, dst: &mut LocalFrame) -> Result<()>;
    /// The consumer gave `frame` back (CUDA: later copies into it wait for
    /// the work queued on the caller's stream until now).
    fn recycle(&self, _frame: &mut LocalFrame) -> Result<()> {
        Ok(())
    }
    /// Frees a private buffer.
    fn free_local(&self, frame: LocalFrame);
    /// Copies plane `plane` of a private frame into host memory `dst`.
    fn read_local_plane(
        &self,
        frame: &LocalFrame,
        plane: usize,
        layout: &FrameLayout,
        dst: &mut [u8],
    ) -> Result<()>;
    /// Start of plane `plane` of slot `index`.
    fn plane(&self, index: usize, plane: usize) -> PlanePtr;
    /// Orders the caller's work after the publish of frame `seq` into slot
    /// `index` (CUDA: a wait queued on the caller's stream).
    fn prepare(&self, _index: usize, _seq: u64) -> Result<()> {
        Ok(())
    }
    /// Copies plane `plane` of slot `index` into host memory `dst` (at the
    /// layout's pitch; at least pitch × (rows-1) + row_bytes bytes).
    fn read_plane(&self, index: usize, plane: usize, layout: &FrameLayout, dst: &mut [u8]) -> Result<()>;
    /// CUDA: the publisher's device ordinal (this process's numbering) when
    /// frames are read over peer access from another GPU; None otherwise.
    fn peer_device(&self) -> Option<i32> {
        None
    }
}

/// Checks that host source planes can hold a frame of `layout`.
pub(crate) fn check_host_source(layout: &FrameLayout, planes: &[HostPlane<'_>]) -> Result<()> {
    if planes.len() != layout.planes().len() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "{} frame needs {} planes, got {}",
                layout.format(),
                layout.planes().len(),
                planes.len()
            ),
        ));
    }
    for (index, (src, dst)) in planes.iter().zip(layout.planes()).enumerate() {
        let need = src.pitch * (dst.rows - 1) + dst.row_bytes;
        if src.pitch < dst.row_bytes || src.data.len() < need {
            return Err(Error::invalid(format!(
                "plane {index}: {} bytes at pitch {} cannot hold {} rows of {} bytes",
                src.data.len(),
                src.pitch,
                dst.rows,
                dst.row_bytes
            )));
        }
    }
    Ok(())
}

/// What a subscriber needs to open the slots of a publisher.
#[derive(Debug)]
pub(crate) struct MappingSource<'a> {
    pub layout: &'a FrameLayout,
    /// How CUDA slots are shared (None: host memory).
    pub cuda_share: Option<CudaShare>,
    /// The live slot descriptors (handles).
    pub slots: &'a [SlotDescriptor],
    /// The header's interprocess event handle.
    pub event_handle: &'a [u8; 64],
    /// The publisher's GPU (frame meta extension), zero when unknown.
    pub device_uuid: [u8; 16],
    /// The subscriber's CUDA context and stream.
    pub cuda: Option<CudaBinding>,
    /// The subscriber's CUDA device ordinal (-1 = current / 0).
    pub cuda_device: i32,
}

/// Opens the subscriber side of `memory` from the header's slot descriptors
/// and the descriptors received with EVENT_FD (taken from `fds` as needed).
pub(crate) fn open_mapping(
    memory: MemoryKind,
    source: &MappingSource<'_>,
    fds: &mut Vec<(u32, OwnedFd)>,
) -> Result<Box<dyn SlotMapping>> {
    match memory {
        MemoryKind::Host => Ok(Box::new(host::HostMapping::open(
            source.layout,
            source.slots,
            fds,
        )?)),
        MemoryKind::Cuda => Ok(Box::new(cuda::CudaMapping::open(
            source.layout,
            source.slots,
            source.event_handle,
            source.cuda_share.unwrap_or(CudaShare::Ipc),
            fds,
            source.device_uuid,
            source.cuda,
            source.cuda_device,
        )?)),
    }
}

/// Keeps the CUDA context that `mapping` (of `source`) lives in alive after
/// the mapping is gone: for a subscriber that connects again at once, so
/// that it does not make the context a second time. Nothing for host memory.
pub(crate) struct ContextHold(#[allow(dead_code)] Option<cuda::driver::Context>);

/// A [`ContextHold`] on `source`'s context, taken while a mapping of it is
/// open.
pub(crate) fn hold_context(memory: MemoryKind, source: &MappingSource<'_>) -> ContextHold {
    ContextHold(match memory {
        MemoryKind::Cuda => cuda::warm::hold(source.cuda, source.cuda_device),
        MemoryKind::Host => None,
    })
}

/// A CUDA publisher side over the caller's own buffers (EXTERNAL ownership).
pub(crate) fn external_pool(
    layout: &FrameLayout,
    ptrs: &[u64],
    cuda: Option<CudaBinding>,
    cuda_device: i32,
) -> Result<Box<dyn SlotPool>> {
    Ok(Box::new(cuda::CudaPool::external(
        layout,
        ptrs,
        cuda,
        cuda_device,
    )?))
}

/// Creates the publisher side of `memory`.
pub(crate) fn create_pool(
    memory: MemoryKind,
    key: &str,
    layout: &FrameLayout,
    ring_size: usize,
    cuda: Option<CudaBinding>,
    cuda_device: i32,
    share: CudaShareRequest,
) -> Result<Box<dyn SlotPool>> {
    match memory {
        MemoryKind::Host => Ok(Box::new(host::HostPool::create(key, layout, ring_size, cuda)?)),
        MemoryKind::Cuda => Ok(Box::new(cuda::CudaPool::create(
            layout,
            ring_size,
            cuda,
            cuda_device,
            share,
        )?)),
    }
}
