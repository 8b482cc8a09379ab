//! The subscriber's side: every slot mapped once in its context, reads
//! ordered after the publisher's writes on the GPU (D28), device copies of
//! frames a consumer holds (D25), and the way to another GPU (D21).

use std::os::fd::OwnedFd;
use std::sync::Mutex;

use super::driver::{CUdeviceptr, CUevent, CUstream, Context, DeviceAlloc, Mem};
use super::{FD_FLAG_FENCES, driver, le_u64, route, stream_of, vmm};
use crate::error::{Error, ErrorKind, Result};
use crate::format::FrameLayout;
use crate::memory::{CudaBinding, CudaShare, LocalFrame, PlanePtr, SlotMapping};
use crate::wire::layout::SlotDescriptor;
use crate::wire::message::fd_purpose;

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
