//! The publisher's side: the slots allocated and shared (D17, D27), the
//! fence array (D28), and copies into the slots: one launch of the copy
//! kernel a frame where it may read the sources, else the driver's copy calls.
//!
//! One job a file:
//! - here, the pool: the slots allocated (or the caller's, EXTERNAL) and
//!   shared, as CUDA IPC handles or exported descriptors, what the header
//!   and the subscribers are told of them, and their release;
//! - `fences`: the fence array, and the mark a frame gets once written
//!   (the slot's fence, or the interprocess event);
//! - `copies`: copies into the slots, by the copy kernel or the driver's
//!   copy calls.

mod copies;
mod fences;

use std::os::fd::OwnedFd;

use self::copies::KernelState;
use super::driver::{CUdeviceptr, CUevent, CUstream, Context, DeviceAlloc, Mem};
use super::{driver, fd_event_handle, fd_slot_handle, stream_of, vmm};
use crate::error::{Error, ErrorKind, Result};
use crate::format::FrameLayout;
use crate::memory::{
    CudaBinding, CudaShare, CudaShareRequest, DevicePlane, HostPlane, MemoryKind, PlanePtr, SlotPool,
};
use crate::wire::message::fd_purpose;

/// Publisher side.
#[derive(Debug)]
pub(crate) struct CudaPool {
    ctx: Context,
    stream: usize,
    shared: Shared,
    /// EXTERNAL ownership: the caller's buffers, never freed here.
    external: bool,
    device_uuid: [u8; 16],
    kernel: KernelState,
    /// Frames copied in by the kernel.
    kernel_copies: u64,
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
        driver::require_free_memory(
            layout.size() as u64 * ring_size as u64,
            &format!(
                "the ring ({ring_size} slots of {})",
                driver::mib(layout.size() as u64)
            ),
        )?;
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
            kernel: KernelState::NotTried,
            kernel_copies: 0,
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
            kernel: KernelState::NotTried,
            kernel_copies: 0,
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
        match fences::fence_array(device, ring_size, stream) {
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
        crate::memory::check_host_source(layout, planes)?;
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

    fn kernel_copies(&self) -> u64 {
        self.kernel_copies
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
        if let KernelState::Loaded(kernel, _) = &self.kernel {
            kernel.unload();
        }
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
