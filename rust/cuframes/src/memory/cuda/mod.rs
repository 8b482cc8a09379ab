//! CUDA memory backend: slots are device allocations exported once with
//! CUDA IPC; one interprocess event orders subscribers after each publish.
//!
//! Publisher: one `cuMemAlloc` per slot (an IPC handle names a whole
//! allocation), the frame layout's pitches (rows aligned to 256 bytes, as
//! FFmpeg's CUDA frames), `cuIpcGetMemHandle` once per slot into the slot
//! descriptor, and one `CU_EVENT_INTERPROCESS` event in the header. Publish
//! queues 2D copies on the caller's stream and records the event there: no
//! host synchronisation on the hot path.
//!
//! Subscriber: opens every handle once in the caller's context, waits on
//! the event on the caller's stream before handing a frame out, and closes
//! every mapping when the last lease and the subscriber are gone. A context
//! on another GPU than the publisher's reads the frames over peer access
//! when the two GPUs can peer, and is refused otherwise (`route`).

pub(crate) mod driver;
pub(crate) mod route;

use self::driver::{CUdeviceptr, CUevent, CUstream, Context, DeviceAlloc, Mem};
use std::sync::Mutex;

use super::{DevicePlane, HostPlane, LocalFrame, MemoryKind, PlanePtr, SlotMapping, SlotPool};
use crate::error::{Error, ErrorKind, Result};
use crate::format::FrameLayout;
use crate::memory::CudaBinding;
use crate::wire::layout::SlotDescriptor;

/// Publisher side.
#[derive(Debug)]
pub(crate) struct CudaPool {
    ctx: Context,
    stream: usize,
    slots: Vec<DeviceAlloc>,
    /// EXTERNAL ownership: the caller's buffers, never freed here.
    external: bool,
    handles: Vec<[u8; 64]>,
    event: usize,
    event_handle: [u8; 64],
    device_uuid: [u8; 16],
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
    ) -> Result<CudaPool> {
        let mut pool = CudaPool::empty(binding, device, false)?;
        let _current = pool.ctx.enter()?;
        for _ in 0..ring_size {
            // Pushed at once: the pool frees what it holds if a later step fails.
            pool.slots.push(driver::alloc(layout.size())?);
        }
        pool.export()?;
        Ok(pool)
    }

    /// The pool over the caller's buffers (EXTERNAL ownership): each must be
    /// the base of its own allocation (an IPC handle names a whole one).
    pub(crate) fn external(
        layout: &FrameLayout,
        ptrs: &[u64],
        binding: Option<CudaBinding>,
        device: i32,
    ) -> Result<CudaPool> {
        let mut pool = CudaPool::empty(binding, device, true)?;
        let _current = pool.ctx.enter()?;
        for (index, &ptr) in ptrs.iter().enumerate() {
            let (base, size) = driver::allocation_range(ptr)
                .map_err(|e| Error::invalid(format!("external slot {index} (0x{ptr:x}): {e}")))?;
            if base != ptr || size < layout.size() {
                return Err(Error::invalid(format!(
                    "external slot {index}: 0x{ptr:x} must be the base of an allocation of at least {} bytes (its allocation starts at 0x{base:x}, {size} bytes)",
                    layout.size()
                )));
            }
            pool.slots.push(DeviceAlloc { ptr });
        }
        pool.export()?;
        Ok(pool)
    }

    /// A pool without slots yet, in the caller's (or the device's) context,
    /// on a device that can share events between processes.
    fn empty(binding: Option<CudaBinding>, device: i32, external: bool) -> Result<CudaPool> {
        let binding = binding.unwrap_or_default();
        let ctx = Context::resolve(binding.context, device)?;
        let _current = ctx.enter()?;
        if !ctx.ipc_events_supported()? {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "this CUDA device cannot share events between processes (CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED is 0)",
            ));
        }
        let device_uuid = ctx.device_uuid()?;
        drop(_current);
        Ok(CudaPool {
            stream: binding.stream,
            slots: Vec::new(),
            external,
            handles: Vec::new(),
            event: 0,
            event_handle: [0; 64],
            device_uuid,
            ctx,
        })
    }

    /// IPC handles of every slot and the interprocess event (context current).
    fn export(&mut self) -> Result<()> {
        for slot in &self.slots {
            self.handles.push(driver::ipc_mem_handle(slot.ptr)?);
        }
        let (event, handle) = driver::ipc_event_create()?;
        self.event = event as usize;
        self.event_handle = handle;
        Ok(())
    }

    fn copy_in(&mut self, index: usize, layout: &FrameLayout, sources: &[(Mem, usize)]) -> Result<()> {
        if sources.len() != layout.planes().len() {
            return Err(Error::invalid(format!(
                "{} frame needs {} planes, got {}",
                layout.format(),
                layout.planes().len(),
                sources.len()
            )));
        }
        let _current = self.ctx.enter()?;
        let base = self.slots[index].ptr;
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
        driver::event_record(self.event as CUevent, stream)
    }
}

impl SlotPool for CudaPool {
    fn kind(&self) -> MemoryKind {
        MemoryKind::Cuda
    }

    fn slot_handle(&self, index: usize) -> [u8; 64] {
        self.handles[index]
    }

    fn event_handle(&self) -> [u8; 64] {
        self.event_handle
    }

    fn device_uuid(&self) -> [u8; 16] {
        self.device_uuid
    }

    fn shared_fds(&self) -> Result<Vec<(u32, std::os::fd::OwnedFd)>> {
        Ok(Vec::new())
    }

    fn write_host(&mut self, index: usize, layout: &FrameLayout, planes: &[HostPlane<'_>]) -> Result<()> {
        super::check_host_source(layout, planes)?;
        let sources: Vec<(Mem, usize)> = planes
            .iter()
            .map(|p| (Mem::Host(p.data.as_ptr()), p.pitch))
            .collect();
        self.copy_in(index, layout, &sources)
    }

    fn write_device(&mut self, index: usize, layout: &FrameLayout, planes: &[DevicePlane]) -> Result<()> {
        let sources: Vec<(Mem, usize)> = planes.iter().map(|p| (Mem::Device(p.ptr), p.pitch)).collect();
        self.copy_in(index, layout, &sources)
    }

    fn slot_plane(&self, index: usize, layout: &FrameLayout, plane: usize) -> PlanePtr {
        PlanePtr::Device(self.slots[index].ptr + layout.planes()[plane].offset as CUdeviceptr)
    }

    fn written_in_place(&mut self, _index: usize) -> Result<()> {
        let _current = self.ctx.enter()?;
        driver::event_record(self.event as CUevent, stream_of(self.stream))
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
        if !self.external {
            for slot in &self.slots {
                driver::free(slot);
            }
        }
        if self.event != 0 {
            driver::event_destroy(self.event as CUevent);
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
    event: usize,
    /// The publisher's device ordinal (this process's numbering) when the
    /// frames are read over peer access from another GPU.
    peer_device: Option<i32>,
    /// Stream and event of private copies, made on the first copy.
    copier: Mutex<Option<Copier>>,
}

/// Private copies run on their own stream, so waiting for one does not
/// wait for the consumer's work queued on its stream.
#[derive(Debug)]
struct Copier {
    stream: usize,
}

/// A private copy of a frame in the subscriber's context (decision 25).
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
    pub(crate) fn open(
        layout: &FrameLayout,
        slots: &[SlotDescriptor],
        event_handle: &[u8; 64],
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
        let mut mapping = CudaMapping {
            stream: binding.stream,
            slots: Vec::with_capacity(slots.len()),
            plane_offsets: layout.planes().iter().map(|p| p.offset).collect(),
            event: 0,
            peer_device,
            copier: Mutex::new(None),
            ctx,
        };
        // Both routes open the handles the same way, in the subscriber's
        // context: `ipc_open` passes CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS (the
        // driver enables peer access when the memory is on another device;
        // on the same device the flag does nothing), and the event opens
        // in this context too (cuStreamWaitEvent accepts an event of
        // another device).
        for (index, slot) in slots.iter().enumerate() {
            let ptr = driver::ipc_open(&slot.mem_handle)
                .map_err(|e| Error::new(e.kind(), format!("slot {index}: {e}")))?;
            mapping.slots.push(ptr);
        }
        mapping.event = driver::ipc_event_open(event_handle)? as usize;
        Ok(mapping)
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

    /// Orders `stream` after the publisher's last copy into the ring (the
    /// interprocess event; context current). When the publisher's copy is
    /// already done, as it usually is by the time a frame is read, no wait
    /// is queued: a wait on an interprocess event costs the driver wake-ups.
    fn after_publish(&self, stream: CUstream) -> Result<()> {
        let event = self.event as CUevent;
        if driver::event_done(event)? {
            return Ok(());
        }
        driver::stream_wait_event(stream, event)
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

    fn copy_out(&self, index: usize, layout: &FrameLayout, dst: &mut LocalFrame) -> Result<()> {
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
        self.after_publish(stream)?;
        driver::copy_dtod(dst.alloc.ptr, self.slots[index], layout.size(), stream)?;
        // Waited for here, so that the slot is released before `next`
        // returns: a slot held until a later call could stall the publisher
        // while the caller is busy elsewhere (FFmpeg's demuxer blocks on its
        // full queue; found on the H200, docs/benchmarks.md).
        let copied = dst.copied as CUevent;
        driver::event_record(copied, stream)?;
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

    fn prepare(&self, _index: usize) -> Result<()> {
        let _current = self.ctx.enter()?;
        self.after_publish(stream_of(self.stream))
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
        for &ptr in &self.slots {
            driver::ipc_close(ptr);
        }
        if self.event != 0 {
            driver::event_destroy(self.event as CUevent);
        }
    }
}
