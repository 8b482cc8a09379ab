//! CUDA memory backend: slots are device allocations shared with other
//! processes one of two ways (D27), and subscribers' reads are
//! ordered after the publisher's writes on the GPU, never with a CPU wait on
//! the hot path (D28).
//!
//! - `fd`: each slot a VMM allocation (`cuMemCreate`, granularity-aligned)
//!   exported once as a file descriptor and sent over the control socket;
//!   a small shared fence array holds, per slot, the seq the publisher's
//!   stream last finished writing (`cuStreamWriteValue64`), which the
//!   subscriber's stream waits for (`cuStreamWaitValue64`). Works between
//!   containers that share only the runtime directory.
//! - `ipc` (protocol v1): one `cuMemAlloc` per slot with its CUDA IPC handle
//!   in the slot descriptor, and one interprocess event in the header,
//!   recorded after each publish. Needs a shared PID namespace.
//!
//! Both keep the frame layout's pitches (rows aligned to 256 bytes, as
//! FFmpeg's CUDA frames). Publish queues 2D copies on the caller's stream.
//! A subscriber maps every slot once in its context and unmaps them when
//! the last lease and the subscriber are gone. A context on another GPU
//! than the publisher's reads the frames over peer access when the two GPUs
//! can peer, and is refused otherwise (`route`).

pub(crate) mod driver;
pub(crate) mod route;
pub(crate) mod vmm;

use self::driver::{CUdeviceptr, CUevent, CUstream, Context, DeviceAlloc, Mem};
use std::os::fd::OwnedFd;
use std::sync::Mutex;

use super::{
    CudaShare, CudaShareRequest, DevicePlane, HostPlane, LocalFrame, MemoryKind, PlanePtr, SlotMapping,
    SlotPool,
};
use crate::error::{Error, ErrorKind, Result};
use crate::format::FrameLayout;
use crate::memory::CudaBinding;
use crate::wire::layout::SlotDescriptor;
use crate::wire::message::fd_purpose;

/// `fd` mode, header `ipc_event_handle` bytes 0..4 (flags): the publisher
/// writes the fence array; without it, it waits for each copy before
/// announcing the frame and subscribers wait for nothing.
const FD_FLAG_FENCES: u32 = 1;

/// What the header says about `fd` mode, in the bytes protocol v1 uses for
/// IPC handles (D27): a slot descriptor's handle is its allocation
/// size (u64 LE, then zeros); the event handle is flags (u32), 0 (u32) and
/// the fence array's size (u64).
fn fd_slot_handle(size: usize) -> [u8; 64] {
    let mut handle = [0u8; 64];
    handle[..8].copy_from_slice(&(size as u64).to_le_bytes());
    handle
}

fn fd_event_handle(fences: Option<usize>) -> [u8; 64] {
    let mut handle = [0u8; 64];
    if let Some(size) = fences {
        handle[..4].copy_from_slice(&FD_FLAG_FENCES.to_le_bytes());
        handle[8..16].copy_from_slice(&(size as u64).to_le_bytes());
    }
    handle
}

fn le_u64(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
}

/// Publisher side.
#[derive(Debug)]
pub(crate) struct CudaPool {
    ctx: Context,
    stream: usize,
    shared: Shared,
    /// EXTERNAL ownership: the caller's buffers, never freed here.
    external: bool,
    device_uuid: [u8; 16],
}

/// The slots and how they are shared.
#[derive(Debug)]
enum Shared {
    Ipc {
        slots: Vec<DeviceAlloc>,
        handles: Vec<[u8; 64]>,
        event: usize,
        event_handle: [u8; 64],
    },
    Fd {
        slots: Vec<vmm::Exported>,
        /// None: stream memory operations failed here; the publisher waits
        /// for each copy instead (and says so once).
        fences: Option<vmm::Exported>,
    },
}

fn stream_of(raw: usize) -> CUstream {
    raw as CUstream
}

impl CudaPool {
    pub(crate) fn create(
        layout: &FrameLayout,
        ring_size: usize,
        binding: Option<CudaBinding>,
        device: i32,
        share: CudaShareRequest,
    ) -> Result<CudaPool> {
        let binding = binding.unwrap_or_default();
        let ctx = Context::resolve(binding.context, device)?;
        let _current = ctx.enter()?;
        let device_uuid = ctx.device_uuid()?;
        let why_not_fd = match share {
            CudaShareRequest::Ipc => Some(String::new()),
            _ => vmm::fd_sharing_unsupported(ctx.device)?,
        };
        let shared = match (share, why_not_fd) {
            (CudaShareRequest::Fd, Some(why)) => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "cuda_share=fd: {why}; use cuda_share=ipc (subscribers must then share the publisher's PID namespace)"
                    ),
                ));
            }
            (_, None) => Self::fd_slots(ctx.device, layout, ring_size, stream_of(binding.stream))?,
            (share, Some(why)) => {
                if share != CudaShareRequest::Ipc {
                    crate::log::warning!(
                        "{why}: CUDA memory shared as CUDA IPC handles instead (subscribers must share this PID namespace)"
                    );
                }
                require_ipc_events(&ctx)?;
                let mut slots = Vec::with_capacity(ring_size);
                for _ in 0..ring_size {
                    match driver::alloc(layout.size()) {
                        Ok(slot) => slots.push(slot),
                        Err(e) => {
                            slots.iter().for_each(driver::free);
                            return Err(e);
                        }
                    }
                }
                Self::ipc_shared(slots, true)?
            }
        };
        drop(_current);
        Ok(CudaPool {
            ctx,
            stream: binding.stream,
            shared,
            external: false,
            device_uuid,
        })
    }

    /// The pool over the caller's buffers (EXTERNAL ownership), shared with
    /// CUDA IPC: each must be the base of its own allocation (an IPC handle
    /// names a whole one).
    pub(crate) fn external(
        layout: &FrameLayout,
        ptrs: &[u64],
        binding: Option<CudaBinding>,
        device: i32,
    ) -> Result<CudaPool> {
        let binding = binding.unwrap_or_default();
        let ctx = Context::resolve(binding.context, device)?;
        let _current = ctx.enter()?;
        require_ipc_events(&ctx)?;
        let device_uuid = ctx.device_uuid()?;
        let mut slots = Vec::with_capacity(ptrs.len());
        for (index, &ptr) in ptrs.iter().enumerate() {
            let (base, size) = driver::allocation_range(ptr)
                .map_err(|e| Error::invalid(format!("external slot {index} (0x{ptr:x}): {e}")))?;
            if base != ptr || size < layout.size() {
                return Err(Error::invalid(format!(
                    "external slot {index}: 0x{ptr:x} must be the base of an allocation of at least {} bytes (its allocation starts at 0x{base:x}, {size} bytes)",
                    layout.size()
                )));
            }
            slots.push(DeviceAlloc { ptr });
        }
        let shared = Self::ipc_shared(slots, false)?;
        drop(_current);
        Ok(CudaPool {
            ctx,
            stream: binding.stream,
            shared,
            external: true,
            device_uuid,
        })
    }

    /// IPC handles of every slot and the interprocess event (context
    /// current). On failure, frees the slots when they are ours (`owned`).
    fn ipc_shared(slots: Vec<DeviceAlloc>, owned: bool) -> Result<Shared> {
        let exported = slots
            .iter()
            .map(|slot| driver::ipc_mem_handle(slot.ptr))
            .collect::<Result<Vec<_>>>()
            .and_then(|handles| driver::ipc_event_create().map(|event| (handles, event)));
        match exported {
            Ok((handles, (event, event_handle))) => Ok(Shared::Ipc {
                slots,
                handles,
                event: event as usize,
                event_handle,
            }),
            Err(e) => {
                if owned {
                    slots.iter().for_each(driver::free);
                }
                Err(e)
            }
        }
    }

    /// Slots and fence array as exported VMM allocations (context current).
    fn fd_slots(device: i32, layout: &FrameLayout, ring_size: usize, stream: CUstream) -> Result<Shared> {
        let mut slots = Vec::with_capacity(ring_size);
        let freed = |slots: &Vec<vmm::Exported>| slots.iter().for_each(|s| vmm::unmap(&s.mapped));
        for _ in 0..ring_size {
            match vmm::alloc_exported(device, layout.size()) {
                Ok(slot) => slots.push(slot),
                Err(e) => {
                    freed(&slots);
                    return Err(e);
                }
            }
        }
        // The fence array, tried once: where stream memory operations fail,
        // the publisher waits for each copy instead (D28).
        let fences = vmm::alloc_exported(device, 8 * ring_size).map(|fences| {
            let tried = if crate::testhook::stream_memops_disabled() {
                Err(Error::new(
                    ErrorKind::Unsupported,
                    format!("disabled by {}", crate::testhook::NO_STREAM_MEMOPS_ENV),
                ))
            } else {
                vmm::zero(fences.mapped.ptr, fences.mapped.size)
                    .and_then(|()| vmm::stream_write_u64(stream, fences.mapped.ptr, 0))
                    .and_then(|()| driver::stream_synchronize(stream))
            };
            match tried {
                Ok(()) => Some(fences),
                Err(e) => {
                    vmm::unmap(&fences.mapped);
                    crate::log::warning!(
                        "CUDA stream memory operations are unavailable ({e}): the publisher waits for each frame's copy before announcing it"
                    );
                    None
                }
            }
        });
        match fences {
            Ok(fences) => Ok(Shared::Fd { slots, fences }),
            Err(e) => {
                freed(&slots);
                Err(e)
            }
        }
    }

    fn slot_base(&self, index: usize) -> CUdeviceptr {
        match &self.shared {
            Shared::Ipc { slots, .. } => slots[index].ptr,
            Shared::Fd { slots, .. } => slots[index].mapped.ptr,
        }
    }

    /// Marks frame `seq` of slot `index` done on the caller's stream, after
    /// the work queued there (context current).
    fn mark_written(&self, index: usize, seq: u64) -> Result<()> {
        let stream = stream_of(self.stream);
        match &self.shared {
            Shared::Ipc { event, .. } => driver::event_record(*event as CUevent, stream),
            Shared::Fd {
                fences: Some(fences), ..
            } => vmm::stream_write_u64(stream, fences.mapped.ptr + 8 * index as CUdeviceptr, seq),
            Shared::Fd { fences: None, .. } => driver::stream_synchronize(stream),
        }
    }

    fn copy_in(
        &mut self,
        index: usize,
        seq: u64,
        layout: &FrameLayout,
        sources: &[(Mem, usize)],
    ) -> Result<()> {
        if sources.len() != layout.planes().len() {
            return Err(Error::invalid(format!(
                "{} frame needs {} planes, got {}",
                layout.format(),
                layout.planes().len(),
                sources.len()
            )));
        }
        let _current = self.ctx.enter()?;
        let base = self.slot_base(index);
        let stream = stream_of(self.stream);
        for (&(src, pitch), plane) in sources.iter().zip(layout.planes()) {
            if pitch < plane.row_bytes {
                return Err(Error::invalid(format!(
                    "source pitch {pitch} is shorter than a row of {} bytes",
                    plane.row_bytes
                )));
            }
            driver::copy_2d(
                src,
                pitch,
                Mem::Device(base + plane.offset as CUdeviceptr),
                plane.pitch,
                plane.row_bytes,
                plane.rows,
                stream,
            )?;
        }
        self.mark_written(index, seq)
    }
}

/// IPC mode needs interprocess events (context current).
fn require_ipc_events(ctx: &Context) -> Result<()> {
    if !ctx.ipc_events_supported()? {
        return Err(Error::new(
            ErrorKind::Unsupported,
            "this CUDA device cannot share events between processes (CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED is 0)",
        ));
    }
    Ok(())
}

impl SlotPool for CudaPool {
    fn kind(&self) -> MemoryKind {
        MemoryKind::Cuda
    }

    fn cuda_share(&self) -> Option<CudaShare> {
        Some(match self.shared {
            Shared::Ipc { .. } => CudaShare::Ipc,
            Shared::Fd { .. } => CudaShare::Fd,
        })
    }

    fn slot_handle(&self, index: usize) -> [u8; 64] {
        match &self.shared {
            Shared::Ipc { handles, .. } => handles[index],
            Shared::Fd { slots, .. } => fd_slot_handle(slots[index].mapped.size),
        }
    }

    fn event_handle(&self) -> [u8; 64] {
        match &self.shared {
            Shared::Ipc { event_handle, .. } => *event_handle,
            Shared::Fd { fences, .. } => fd_event_handle(fences.as_ref().map(|f| f.mapped.size)),
        }
    }

    fn device_uuid(&self) -> [u8; 16] {
        self.device_uuid
    }

    fn shared_fds(&self) -> Result<Vec<(u32, OwnedFd)>> {
        Ok(Vec::new())
    }

    fn early_fds(&self) -> Result<Vec<(u32, OwnedFd)>> {
        let Shared::Fd { slots, fences } = &self.shared else {
            return Ok(Vec::new());
        };
        let dup = |fd: &OwnedFd, what: &str| {
            fd.try_clone()
                .map_err(|e| Error::io(format!("duplicating the descriptor of {what}"), &e))
        };
        let mut fds = Vec::with_capacity(slots.len() + 1);
        for (index, slot) in slots.iter().enumerate() {
            fds.push((
                fd_purpose::CUDA_SLOT_0 + index as u32,
                dup(&slot.fd, "a CUDA slot")?,
            ));
        }
        if let Some(fences) = fences {
            fds.push((fd_purpose::CUDA_FENCES, dup(&fences.fd, "the CUDA fences")?));
        }
        Ok(fds)
    }

    fn write_host(
        &mut self,
        index: usize,
        seq: u64,
        layout: &FrameLayout,
        planes: &[HostPlane<'_>],
    ) -> Result<()> {
        super::check_host_source(layout, planes)?;
        let sources: Vec<(Mem, usize)> = planes
            .iter()
            .map(|p| (Mem::Host(p.data.as_ptr()), p.pitch))
            .collect();
        self.copy_in(index, seq, layout, &sources)
    }

    fn write_device(
        &mut self,
        index: usize,
        seq: u64,
        layout: &FrameLayout,
        planes: &[DevicePlane],
    ) -> Result<()> {
        let sources: Vec<(Mem, usize)> = planes.iter().map(|p| (Mem::Device(p.ptr), p.pitch)).collect();
        self.copy_in(index, seq, layout, &sources)
    }

    fn slot_plane(&self, index: usize, layout: &FrameLayout, plane: usize) -> PlanePtr {
        PlanePtr::Device(self.slot_base(index) + layout.planes()[plane].offset as CUdeviceptr)
    }

    fn written_in_place(&mut self, index: usize, seq: u64) -> Result<()> {
        let _current = self.ctx.enter()?;
        self.mark_written(index, seq)
    }

    fn planes_mut(&mut self, _index: usize, _layout: &FrameLayout) -> Option<Vec<&mut [u8]>> {
        None
    }
}

impl Drop for CudaPool {
    fn drop(&mut self) {
        let Ok(_current) = self.ctx.enter() else {
            return; // the context is gone: so is the memory
        };
        // Copies still queued on the caller's stream must not write freed memory.
        let _ = driver::stream_synchronize(stream_of(self.stream));
        match &self.shared {
            Shared::Ipc { slots, event, .. } => {
                if !self.external {
                    slots.iter().for_each(driver::free);
                }
                driver::event_destroy(*event as CUevent);
            }
            // Subscribers' mappings keep the memory until they unmap.
            Shared::Fd { slots, fences } => {
                slots.iter().for_each(|s| vmm::unmap(&s.mapped));
                if let Some(fences) = fences {
                    vmm::unmap(&fences.mapped);
                }
            }
        }
    }
}

/// Subscriber side.
#[derive(Debug)]
pub(crate) struct CudaMapping {
    ctx: Context,
    stream: usize,
    slots: Vec<CUdeviceptr>,
    plane_offsets: Vec<usize>,
    /// How reads are ordered after the publisher's writes.
    order: Order,
    /// `fd` mode: the slots (and fence array) mapped here; `slots` holds
    /// their addresses.
    imported: Vec<vmm::Mapped>,
    /// The publisher's device ordinal (this process's numbering) when the
    /// frames are read over peer access from another GPU.
    peer_device: Option<i32>,
    /// Stream and event of private copies, made on the first copy.
    copier: Mutex<Option<Copier>>,
}

/// What a read of a slot waits for on the GPU (D28).
#[derive(Debug)]
enum Order {
    /// `ipc`: the interprocess event, recorded after every publish.
    IpcEvent(usize),
    /// `fd`: the slot's word in the fence array reaching the frame's seq.
    Fences(CUdeviceptr),
    /// `fd` without fences: the publisher waited for its copy before it
    /// announced the frame.
    Nothing,
}

/// Private copies run on their own stream, so waiting for one does not
/// wait for the consumer's work queued on its stream.
#[derive(Debug)]
struct Copier {
    stream: usize,
}

/// A private copy of a frame in the subscriber's context (D25).
#[derive(Debug)]
pub(crate) struct LocalDeviceFrame {
    alloc: DeviceAlloc,
    /// Recorded on the caller's stream when the consumer gave it back:
    /// the next copy into it waits for that point.
    given_back: usize,
    recycled: bool,
    /// Recorded on the copy stream after each copy into it.
    copied: usize,
}

impl LocalDeviceFrame {
    pub(crate) fn ptr(&self) -> CUdeviceptr {
        self.alloc.ptr
    }
}

fn as_device(frame: &mut LocalFrame) -> Result<&mut LocalDeviceFrame> {
    match frame {
        LocalFrame::Device(f) => Ok(f),
        LocalFrame::Host(_) => Err(Error::new(
            ErrorKind::Internal,
            "CUDA slots copy into device memory",
        )),
    }
}

/// The driver behind `route::plan`.
struct DriverDevices;

impl route::Devices for DriverDevices {
    fn count(&self) -> Result<i32> {
        driver::device_count()
    }
    fn get(&self, ordinal: i32) -> Result<i32> {
        driver::device_get(ordinal)
    }
    fn uuid(&self, device: i32) -> Result<[u8; 16]> {
        driver::device_uuid(device)
    }
    fn name(&self, device: i32) -> String {
        driver::device_name(device)
    }
    fn can_access_peer(&self, device: i32, peer: i32) -> Result<bool> {
        driver::can_access_peer(device, peer)
    }
}

impl CudaMapping {
    #[allow(clippy::too_many_arguments)] // one per thing the handshake hands over
    pub(crate) fn open(
        layout: &FrameLayout,
        slots: &[SlotDescriptor],
        event_handle: &[u8; 64],
        share: CudaShare,
        fds: &mut Vec<(u32, OwnedFd)>,
        publisher_uuid: [u8; 16],
        binding: Option<CudaBinding>,
        device: i32,
    ) -> Result<CudaMapping> {
        let binding = binding.unwrap_or_default();
        let ctx = Context::resolve(binding.context, device)?;
        let _current = ctx.enter()?;
        let ours = ctx.device_uuid()?;
        // Same GPU (or one the publisher did not name): no further driver
        // call, as before. Another GPU: peer access, or a refusal naming both.
        let peer_device = match route::plan(&DriverDevices, ctx.device, ours, publisher_uuid)? {
            route::Route::Peer { publisher } => Some(publisher),
            _ => None,
        };
        let device = ctx.device;
        // Built first and filled in place: if a step fails, dropping it
        // releases what was opened so far.
        let mut mapping = CudaMapping {
            stream: binding.stream,
            slots: Vec::with_capacity(slots.len()),
            plane_offsets: layout.planes().iter().map(|p| p.offset).collect(),
            order: Order::Nothing,
            imported: Vec::new(),
            peer_device,
            copier: Mutex::new(None),
            ctx,
        };
        match share {
            CudaShare::Ipc => mapping.open_ipc(slots, event_handle)?,
            CudaShare::Fd => mapping.open_fd(layout, slots, event_handle, fds, device)?,
        }
        Ok(mapping)
    }

    /// Both routes open the handles the same way, in the subscriber's
    /// context: `ipc_open` passes CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS (the
    /// driver enables peer access when the memory is on another device; on
    /// the same device the flag does nothing), and the event opens in this
    /// context too (cuStreamWaitEvent accepts an event of another device).
    fn open_ipc(&mut self, slots: &[SlotDescriptor], event_handle: &[u8; 64]) -> Result<()> {
        for (index, slot) in slots.iter().enumerate() {
            let ptr = driver::ipc_open(&slot.mem_handle)
                .map_err(|e| Error::new(e.kind(), format!("slot {index}: {e}")))?;
            self.slots.push(ptr);
        }
        self.order = Order::IpcEvent(driver::ipc_event_open(event_handle)? as usize);
        Ok(())
    }

    /// Imports every slot (and the fence array) from the descriptors the
    /// publisher sent, with the sizes its header gives (untrusted: a slot
    /// must hold a frame, the fences one word per slot, and the driver
    /// refuses a size beyond the allocation).
    fn open_fd(
        &mut self,
        layout: &FrameLayout,
        slots: &[SlotDescriptor],
        event_handle: &[u8; 64],
        fds: &mut Vec<(u32, OwnedFd)>,
        device: i32,
    ) -> Result<()> {
        let mut take = |purpose: u32, what: &str| {
            fds.iter()
                .position(|(p, _)| *p == purpose)
                .map(|at| fds.swap_remove(at).1)
                .ok_or_else(|| Error::protocol(format!("the publisher sent no descriptor for {what}")))
        };
        for (index, slot) in slots.iter().enumerate() {
            let what = format!("CUDA slot {index}");
            let fd = take(fd_purpose::CUDA_SLOT_0 + index as u32, &what)?;
            let size = le_u64(&slot.mem_handle);
            if size < layout.size() as u64 || size > usize::MAX as u64 {
                return Err(Error::corrupt(format!(
                    "{what} is {size} bytes, too small for a frame of {} bytes",
                    layout.size()
                )));
            }
            let mapped = vmm::import(&fd, size as usize, device)
                .map_err(|e| Error::new(e.kind(), format!("{what}: {e}")))?;
            self.slots.push(mapped.ptr);
            self.imported.push(mapped);
        }
        let flags = u32::from_le_bytes(event_handle[..4].try_into().expect("4 bytes"));
        if flags & FD_FLAG_FENCES == 0 {
            self.order = Order::Nothing;
            return Ok(());
        }
        let fd = take(fd_purpose::CUDA_FENCES, "the CUDA fence array")?;
        let size = le_u64(&event_handle[8..]);
        if size < 8 * slots.len() as u64 || size > usize::MAX as u64 {
            return Err(Error::corrupt(format!(
                "the CUDA fence array is {size} bytes, too small for {} slots",
                slots.len()
            )));
        }
        let fences = vmm::import(&fd, size as usize, device)
            .map_err(|e| Error::new(e.kind(), format!("CUDA fences: {e}")))?;
        self.order = Order::Fences(fences.ptr);
        self.imported.push(fences);
        Ok(())
    }
}

impl CudaMapping {
    /// Copies plane `plane` of the frame at `base` (a slot or a private
    /// copy) into host memory `dst`, on the caller's stream, and waits.
    fn download(&self, base: CUdeviceptr, plane: usize, layout: &FrameLayout, dst: &mut [u8]) -> Result<()> {
        let p = layout.planes()[plane];
        let _current = self.ctx.enter()?;
        let stream = stream_of(self.stream);
        driver::copy_2d(
            Mem::Device(base + p.offset as CUdeviceptr),
            p.pitch,
            Mem::HostMut(dst.as_mut_ptr()),
            p.pitch,
            p.row_bytes,
            p.rows,
            stream,
        )?;
        driver::stream_synchronize(stream)
    }

    /// Orders `stream` after the publisher's copy of frame `seq` into slot
    /// `index` (context current). `ipc`: when the publisher's last copy is
    /// already done, as it usually is by the time a frame is read, no wait
    /// is queued: a wait on an interprocess event costs the driver
    /// wake-ups. `fd`: a GPU-side wait on the slot's fence word.
    fn after_publish(&self, stream: CUstream, index: usize, seq: u64) -> Result<()> {
        match self.order {
            Order::IpcEvent(event) => {
                let event = event as CUevent;
                if driver::event_done(event)? {
                    return Ok(());
                }
                driver::stream_wait_event(stream, event)
            }
            Order::Fences(fences) => vmm::stream_wait_u64(stream, fences + 8 * index as CUdeviceptr, seq),
            Order::Nothing => Ok(()),
        }
    }
}

impl SlotMapping for CudaMapping {
    fn peer_device(&self) -> Option<i32> {
        self.peer_device
    }

    fn new_local(&self, layout: &FrameLayout) -> Result<LocalFrame> {
        let _current = self.ctx.enter()?;
        let alloc = driver::alloc(layout.size())?;
        let events = driver::event_create().and_then(|given_back| match driver::event_create_blocking() {
            Ok(copied) => Ok((given_back, copied)),
            Err(e) => {
                driver::event_destroy(given_back);
                Err(e)
            }
        });
        match events {
            Ok((given_back, copied)) => Ok(LocalFrame::Device(LocalDeviceFrame {
                alloc,
                given_back: given_back as usize,
                recycled: false,
                copied: copied as usize,
            })),
            Err(e) => {
                driver::free(&alloc);
                Err(e)
            }
        }
    }

    fn copy_out(&self, index: usize, seq: u64, layout: &FrameLayout, dst: &mut LocalFrame) -> Result<()> {
        let dst = as_device(dst)?;
        let _current = self.ctx.enter()?;
        let mut copier = self.copier.lock().unwrap_or_else(|p| p.into_inner());
        if copier.is_none() {
            *copier = Some(Copier {
                stream: driver::stream_create()? as usize,
            });
        }
        let stream = stream_of(copier.as_ref().expect("made above").stream);
        if dst.recycled {
            driver::stream_wait_event(stream, dst.given_back as CUevent)?;
        }
        self.after_publish(stream, index, seq)?;
        driver::copy_dtod(dst.alloc.ptr, self.slots[index], layout.size(), stream)?;
        let copied = dst.copied as CUevent;
        driver::event_record(copied, stream)?;
        // Waited for here, so that the slot is released before `next`
        // returns: a slot held until a later call could stall the publisher
        // while the caller is busy elsewhere (FFmpeg's demuxer blocks on its
        // full queue; found on the H200, docs/benchmarks.md). Letting the copy
        // finish later and ACK from the driver's thread was slower at K = 4
        // (run 2026-12-03i).
        driver::event_wait(copied)
    }

    fn recycle(&self, frame: &mut LocalFrame) -> Result<()> {
        let frame = as_device(frame)?;
        let _current = self.ctx.enter()?;
        driver::event_record(frame.given_back as CUevent, stream_of(self.stream))?;
        frame.recycled = true;
        Ok(())
    }

    fn free_local(&self, frame: LocalFrame) {
        let LocalFrame::Device(frame) = frame else {
            return;
        };
        if let Ok(_current) = self.ctx.enter() {
            driver::free(&frame.alloc);
            driver::event_destroy(frame.given_back as CUevent);
            driver::event_destroy(frame.copied as CUevent);
        }
    }

    fn read_local_plane(
        &self,
        frame: &LocalFrame,
        plane: usize,
        layout: &FrameLayout,
        dst: &mut [u8],
    ) -> Result<()> {
        let LocalFrame::Device(frame) = frame else {
            return Err(Error::new(ErrorKind::Internal, "CUDA copies are device memory"));
        };
        self.download(frame.alloc.ptr, plane, layout, dst)
    }

    fn plane(&self, index: usize, plane: usize) -> PlanePtr {
        PlanePtr::Device(self.slots[index] + self.plane_offsets[plane] as CUdeviceptr)
    }

    fn prepare(&self, index: usize, seq: u64) -> Result<()> {
        let _current = self.ctx.enter()?;
        self.after_publish(stream_of(self.stream), index, seq)
    }

    fn read_plane(&self, index: usize, plane: usize, layout: &FrameLayout, dst: &mut [u8]) -> Result<()> {
        self.download(self.slots[index], plane, layout, dst)
    }
}

impl Drop for CudaMapping {
    fn drop(&mut self) {
        let Ok(_current) = self.ctx.enter() else {
            return;
        };
        if let Some(c) = self.copier.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = driver::stream_synchronize(stream_of(c.stream));
            driver::stream_destroy(stream_of(c.stream));
        }
        if self.imported.is_empty() {
            for &ptr in &self.slots {
                driver::ipc_close(ptr);
            }
        }
        self.imported.iter().for_each(vmm::unmap);
        if let Order::IpcEvent(event) = self.order {
            driver::event_destroy(event as CUevent);
        }
    }
}
