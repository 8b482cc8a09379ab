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

#[cfg(test)]
mod tests {
    //! The subscriber's side of CUDA memory. What needs no GPU runs
    //! everywhere; the rest sits in `needs_gpu`, ignored unless asked for
    //! (`scripts/gpu-test.sh run lib`), and fails without a usable GPU.

    use super::super::{fd_event_handle, fd_slot_handle};
    use super::*;
    use crate::memory::host::AlignedBytes;

    /// What `fd` mode writes where protocol v1 has IPC handles (D27): a
    /// slot's size, then zeros; the fence flag, a zero word and the fence
    /// array's size; nothing at all without fences.
    #[test]
    fn fd_handles_carry_sizes_and_the_fence_flag() {
        let slot = fd_slot_handle(0x0123_4567_89AB);
        assert_eq!(le_u64(&slot), 0x0123_4567_89AB);
        assert_eq!(slot[0], 0xAB, "little-endian");
        assert!(slot[8..].iter().all(|&b| b == 0));
        let event = fd_event_handle(Some(24));
        assert_eq!(u32::from_le_bytes(event[..4].try_into().unwrap()), FD_FLAG_FENCES);
        assert_eq!(&event[4..8], &[0; 4]);
        assert_eq!(le_u64(&event[8..]), 24);
        assert!(event[16..].iter().all(|&b| b == 0));
        assert_eq!(fd_event_handle(None), [0; 64], "no fences: no flag");
    }

    /// A host copy handed where a device copy belongs is an internal error,
    /// not a device pointer made of a host address.
    #[test]
    fn a_host_copy_is_refused_where_a_device_copy_belongs() {
        let mut frame = LocalFrame::Host(AlignedBytes::zeroed(64));
        let err = as_device(&mut frame).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Internal, "{err}");
    }

    mod needs_gpu {
        use std::os::fd::AsFd;

        use super::*;
        use crate::memory::cuda::CudaPool;
        use crate::memory::host::tests::{
            check_contract, descriptors, odd_layout, slot_holds, write_pattern,
        };
        use crate::memory::{CudaShareRequest, MemoryKind, SlotPool};

        const RING: usize = 3;

        fn require_gpu() {
            if let Err(why) = driver::availability() {
                panic!("needs a usable CUDA GPU, and this machine has none: {why}");
            }
        }

        fn pool(share: CudaShareRequest) -> CudaPool {
            require_gpu();
            CudaPool::create(&odd_layout(), RING, None, -1, share).unwrap()
        }

        /// Opens what `pool` shares, as a subscriber of this process, with
        /// `slots` as the header's descriptors and `fds` as the descriptors
        /// received.
        fn open_with(
            pool: &CudaPool,
            share: CudaShare,
            slots: &[SlotDescriptor],
            event_handle: &[u8; 64],
            mut fds: Vec<(u32, OwnedFd)>,
        ) -> Result<CudaMapping> {
            CudaMapping::open(
                &odd_layout(),
                slots,
                event_handle,
                share,
                &mut fds,
                pool.device_uuid(),
                None,
                -1,
            )
        }

        fn received(pool: &CudaPool) -> Vec<(u32, OwnedFd)> {
            let mut fds = pool.early_fds().unwrap();
            fds.extend(pool.shared_fds().unwrap());
            fds
        }

        fn open_fd(pool: &CudaPool) -> Result<CudaMapping> {
            open_with(
                pool,
                CudaShare::Fd,
                &descriptors(pool, RING),
                &pool.event_handle(),
                received(pool),
            )
        }

        #[test]
        #[ignore = "needs a CUDA GPU: scripts/gpu-test.sh run lib"]
        fn slots_shared_as_fds_meet_the_contract() {
            let mut pool = pool(CudaShareRequest::Fd);
            assert_eq!(
                (pool.kind(), pool.cuda_share()),
                (MemoryKind::Cuda, Some(CudaShare::Fd))
            );
            assert_ne!(pool.device_uuid(), [0; 16]);
            let mapping = open_fd(&pool).unwrap();
            check_contract(&mut pool, &mapping, &odd_layout(), RING);
        }

        /// What a publisher sends in `fd` mode: one descriptor per slot and
        /// one for the fence array, each slot a whole number of the
        /// allocation granularity, at least a frame.
        #[test]
        #[ignore = "needs a CUDA GPU: scripts/gpu-test.sh run lib"]
        fn fd_pools_send_a_descriptor_per_slot_and_the_fences() {
            let pool = pool(CudaShareRequest::Fd);
            let purposes: Vec<u32> = received(&pool).iter().map(|(p, _)| *p).collect();
            let mut want: Vec<u32> = (0..RING as u32).map(|i| fd_purpose::CUDA_SLOT_0 + i).collect();
            want.push(fd_purpose::CUDA_FENCES);
            assert_eq!(
                purposes, want,
                "this GPU runs stream memory operations: fences expected"
            );
            let granularity = vmm::rounded_size(0, 1).unwrap();
            for slot in descriptors(&pool, RING) {
                let size = le_u64(&slot.mem_handle) as usize;
                assert!(
                    size >= odd_layout().size() && size.is_multiple_of(granularity),
                    "{size}"
                );
            }
            let event = pool.event_handle();
            assert_eq!(u32::from_le_bytes(event[..4].try_into().unwrap()), FD_FLAG_FENCES);
            assert!(le_u64(&event[8..]) >= 8 * RING as u64);
        }

        /// Two mappings of the same slots (two subscribers in one process)
        /// read the same frames at their own addresses; dropping one unmaps
        /// its addresses and leaves the other readable.
        #[test]
        #[ignore = "needs a CUDA GPU: scripts/gpu-test.sh run lib"]
        fn fd_slots_mapped_twice_read_alike_and_each_unmaps_on_drop() {
            let layout = odd_layout();
            let mut pool = pool(CudaShareRequest::Fd);
            let first = open_fd(&pool).unwrap();
            let second = open_fd(&pool).unwrap();
            write_pattern(&mut pool, 1, 5, &layout);
            assert!(slot_holds(&first, 1, 5, &layout) && slot_holds(&second, 1, 5, &layout));
            let PlanePtr::Device(ptr) = first.plane(1, 0) else {
                panic!("CUDA slots are device memory");
            };
            assert_ne!(first.plane(1, 0), second.plane(1, 0), "two mappings");
            {
                let _current = first.ctx.enter().unwrap();
                let (base, size) = driver::allocation_range(ptr).unwrap();
                assert!(base <= ptr && ptr + layout.size() as u64 <= base + size as u64);
            }
            drop(first);
            {
                let _current = second.ctx.enter().unwrap();
                assert!(
                    driver::allocation_range(ptr).is_err(),
                    "still mapped after the drop"
                );
            }
            assert!(slot_holds(&second, 1, 5, &layout));
        }

        /// What a hostile or broken publisher may send in `fd` mode: a
        /// descriptor missing, a slot or fence array the header says is
        /// too small or larger than its allocation, a descriptor that is no
        /// CUDA allocation. Each is refused with an error naming it.
        #[test]
        #[ignore = "needs a CUDA GPU: scripts/gpu-test.sh run lib"]
        fn fd_mappings_refuse_bad_descriptors_and_sizes() {
            let layout = odd_layout();
            let pool = pool(CudaShareRequest::Fd);
            let good = descriptors(&pool, RING);
            let event = pool.event_handle();
            let without = |purpose: u32| -> Vec<(u32, OwnedFd)> {
                received(&pool)
                    .into_iter()
                    .filter(|(p, _)| *p != purpose)
                    .collect()
            };
            let err = open_with(
                &pool,
                CudaShare::Fd,
                &good,
                &event,
                without(fd_purpose::CUDA_SLOT_0 + 1),
            )
            .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
            assert!(err.to_string().contains("CUDA slot 1"), "{err}");
            let err = open_with(
                &pool,
                CudaShare::Fd,
                &good,
                &event,
                without(fd_purpose::CUDA_FENCES),
            )
            .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");

            let allocated = le_u64(&good[0].mem_handle) as usize;
            for (what, size, kind) in [
                (
                    "smaller than a frame",
                    layout.size() - 1,
                    Some(ErrorKind::Corrupt),
                ),
                ("larger than its allocation", allocated * 2, None),
            ] {
                let mut slots = good.clone();
                slots[0].mem_handle = fd_slot_handle(size);
                let err = open_with(&pool, CudaShare::Fd, &slots, &event, received(&pool)).unwrap_err();
                if let Some(kind) = kind {
                    assert_eq!(err.kind(), kind, "{what}: {err}");
                }
                assert!(err.to_string().contains("CUDA slot 0"), "{what}: {err}");
            }
            let err = open_with(
                &pool,
                CudaShare::Fd,
                &good,
                &fd_event_handle(Some(8)),
                received(&pool),
            )
            .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
            assert!(err.to_string().contains("fence array"), "{err}");

            let memfd = nix::sys::memfd::memfd_create(
                "cuframes-test-not-cuda",
                nix::sys::memfd::MFdFlags::MFD_CLOEXEC,
            )
            .unwrap();
            nix::unistd::ftruncate(memfd.as_fd(), allocated as i64).unwrap();
            let mut fds = without(fd_purpose::CUDA_SLOT_0);
            fds.push((fd_purpose::CUDA_SLOT_0, memfd));
            let err = open_with(&pool, CudaShare::Fd, &good, &event, fds).unwrap_err();
            assert!(
                err.to_string().contains("CUDA slot 0"),
                "a memfd as a slot: {err}"
            );
            // After all that, the good descriptors still open.
            assert!(open_fd(&pool).is_ok());
        }

        /// `ipc` pools: a distinct CUDA IPC handle per slot and an
        /// interprocess event, and no descriptors. The exporting process
        /// cannot open its own handles (a driver rule, why the suite over
        /// every backend puts publishers in child processes): refused with
        /// an error, not a crash.
        #[test]
        #[ignore = "needs a CUDA GPU: scripts/gpu-test.sh run lib"]
        fn ipc_pools_send_handles_the_exporting_process_cannot_open() {
            let pool = pool(CudaShareRequest::Ipc);
            assert_eq!(
                (pool.kind(), pool.cuda_share()),
                (MemoryKind::Cuda, Some(CudaShare::Ipc))
            );
            assert!(received(&pool).is_empty());
            let handles: Vec<[u8; 64]> = (0..RING).map(|i| pool.slot_handle(i)).collect();
            for (i, handle) in handles.iter().enumerate() {
                assert_ne!(*handle, [0; 64], "slot {i}");
                assert!(!handles[..i].contains(handle), "slot {i} repeats a handle");
            }
            assert_ne!(pool.event_handle(), [0; 64]);
            let err = open_with(
                &pool,
                CudaShare::Ipc,
                &descriptors(&pool, RING),
                &pool.event_handle(),
                Vec::new(),
            )
            .unwrap_err();
            assert!(err.to_string().contains("slot 0"), "{err}");
            eprintln!("opened by its exporter: {err}");
        }
    }
}
