//! Host memory backend: the ring's slots in one sealed memfd.
//!
//! The publisher creates the memfd, sizes it to `ring_size` page-aligned
//! slots, seals its size (so no one can shrink it under a reader and raise
//! SIGBUS) and maps it read-write. Each slot descriptor's handle holds the
//! slot's offset and length (LE u64 each). Subscribers receive the memfd as
//! EVENT_FD(purpose = HOST_SLOTS) and map it read-only.

use std::os::fd::OwnedFd;

use super::cuda::driver::{self, Context, Mem};
use super::{CudaBinding, DevicePlane, HostPlane, LocalFrame, MemoryKind, PlanePtr, SlotMapping, SlotPool};
use crate::error::{Error, ErrorKind, Result};
use crate::format::FrameLayout;
use crate::platform::region::{Access, MappedRegion, sealed_memfd, sealed_size};
use crate::wire::layout::SlotDescriptor;
use crate::wire::message::fd_purpose;

const PAGE: usize = 4096;

/// A zeroed, page-aligned heap buffer: a private copy of a frame is
/// aligned like a slot (SIMD code in consumers such as FFmpeg expects
/// aligned planes; the allocator's 16 bytes are not enough).
#[derive(Debug)]
pub(crate) struct AlignedBytes {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is owned exclusively by this value; moving it between
// threads moves that ownership.
unsafe impl Send for AlignedBytes {}
// SAFETY: shared references only read the bytes.
unsafe impl Sync for AlignedBytes {}

impl AlignedBytes {
    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(len.max(1), PAGE).expect("frame sizes are far below isize::MAX")
    }

    pub(crate) fn zeroed(len: usize) -> AlignedBytes {
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (at least 1 byte).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBytes { ptr, len }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` initialised (zeroed) bytes owned by self, alive as long as &self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this very layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) };
    }
}

/// Encodes a host slot handle.
fn encode_handle(offset: u64, length: u64) -> [u8; 64] {
    let mut handle = [0u8; 64];
    handle[0..8].copy_from_slice(&offset.to_le_bytes());
    handle[8..16].copy_from_slice(&length.to_le_bytes());
    handle
}

/// Decodes a host slot handle (untrusted).
fn decode_handle(handle: &[u8; 64]) -> (u64, u64) {
    let offset = u64::from_le_bytes(handle[0..8].try_into().expect("8 bytes"));
    let length = u64::from_le_bytes(handle[8..16].try_into().expect("8 bytes"));
    (offset, length)
}

/// Publisher side.
#[derive(Debug)]
pub(crate) struct HostPool {
    memfd: OwnedFd,
    region: MappedRegion,
    stride: usize,
    ring_size: usize,
    /// The caller's CUDA objects, for publishing device frames (downloaded).
    cuda: Option<CudaBinding>,
    /// Made on the first device frame.
    cuda_context: Option<Context>,
}

impl HostPool {
    pub(crate) fn create(
        key: &str,
        layout: &FrameLayout,
        ring_size: usize,
        cuda: Option<CudaBinding>,
    ) -> Result<HostPool> {
        let what = format!("host slot memory of '{key}'");
        let stride = layout.size().next_multiple_of(PAGE);
        let total = stride
            .checked_mul(ring_size)
            .filter(|&t| t <= i64::MAX as usize)
            .ok_or_else(|| Error::invalid(format!("{what}: {ring_size} slots of {stride} bytes overflow")))?;
        let (memfd, region) = sealed_memfd(&format!("cuframes-{key}-slots"), total, &what)?;
        Ok(HostPool {
            memfd,
            region,
            stride,
            ring_size,
            cuda,
            cuda_context: None,
        })
    }

    fn slot_ptr(&self, index: usize) -> *mut u8 {
        assert!(index < self.ring_size);
        // SAFETY: index < ring_size, so the offset lies inside the mapping
        // of stride × ring_size bytes.
        unsafe { self.region.as_ptr().add(index * self.stride) }
    }
}

impl SlotPool for HostPool {
    fn kind(&self) -> MemoryKind {
        MemoryKind::Host
    }

    fn slot_handle(&self, index: usize) -> [u8; 64] {
        encode_handle((index * self.stride) as u64, self.stride as u64)
    }

    fn shared_fds(&self) -> Result<Vec<(u32, OwnedFd)>> {
        let dup = self
            .memfd
            .try_clone()
            .map_err(|e| Error::io("duplicating the host slot memfd", &e))?;
        Ok(vec![(fd_purpose::HOST_SLOTS, dup)])
    }

    fn write_host(
        &mut self,
        index: usize,
        _seq: u64,
        layout: &FrameLayout,
        planes: &[HostPlane<'_>],
    ) -> Result<()> {
        super::check_host_source(layout, planes)?;
        let base = self.slot_ptr(index);
        for (src, dst) in planes.iter().zip(layout.planes()) {
            for row in 0..dst.rows {
                let from = &src.data[row * src.pitch..row * src.pitch + dst.row_bytes];
                // SAFETY: dst.offset + row*pitch + row_bytes ≤ layout.size()
                // ≤ stride, so the destination lies inside this slot; the
                // source is a distinct Rust slice. Subscribers map the pool
                // read-only, so this process is the only writer.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        from.as_ptr(),
                        base.add(dst.offset + row * dst.pitch),
                        dst.row_bytes,
                    );
                }
            }
        }
        Ok(())
    }

    fn slot_plane(&self, index: usize, layout: &FrameLayout, plane: usize) -> PlanePtr {
        // SAFETY: the plane offset lies inside the slot (layout.size() ≤ stride).
        PlanePtr::Host(unsafe { self.slot_ptr(index).add(layout.planes()[plane].offset) }.cast_const())
    }

    /// Device frames are downloaded (synchronously: host slots are complete
    /// when published).
    fn write_device(
        &mut self,
        index: usize,
        _seq: u64,
        layout: &FrameLayout,
        planes: &[DevicePlane],
    ) -> Result<()> {
        if planes.len() != layout.planes().len() {
            return Err(Error::invalid(format!(
                "{} frame needs {} planes, got {}",
                layout.format(),
                layout.planes().len(),
                planes.len()
            )));
        }
        let binding = self.cuda.unwrap_or_default();
        if self.cuda_context.is_none() {
            self.cuda_context = Some(Context::resolve(binding.context, -1)?);
        }
        let ctx = self.cuda_context.as_ref().expect("set above");
        let _current = ctx.enter()?;
        let base = self.slot_ptr(index);
        let stream = binding.stream as driver::CUstream;
        for (src, dst) in planes.iter().zip(layout.planes()) {
            // SAFETY: the plane lies inside this slot (layout.size() ≤
            // stride); the copy completes before stream_synchronize returns,
            // while &mut self keeps the slot exclusively ours.
            let dst_ptr = unsafe { base.add(dst.offset) };
            driver::copy_2d(
                Mem::Device(src.ptr),
                src.pitch,
                Mem::HostMut(dst_ptr),
                dst.pitch,
                dst.row_bytes,
                dst.rows,
                stream,
            )?;
        }
        driver::stream_synchronize(stream)
    }

    fn planes_mut(&mut self, index: usize, layout: &FrameLayout) -> Option<Vec<&mut [u8]>> {
        let base = self.slot_ptr(index);
        let planes = layout
            .planes()
            .iter()
            .map(|p| {
                // SAFETY: each plane [offset, offset + pitch×rows) lies inside
                // the slot (layout.size() ≤ stride) and planes do not overlap;
                // the slices borrow &mut self, so no other write happens
                // through this pool meanwhile, and subscribers only read.
                unsafe { std::slice::from_raw_parts_mut(base.add(p.offset), p.pitch * p.rows) }
            })
            .collect();
        Some(planes)
    }
}

/// Subscriber side.
#[derive(Debug)]
pub(crate) struct HostMapping {
    region: MappedRegion,
    slot_offsets: Vec<usize>,
    plane_offsets: Vec<usize>,
}

impl HostMapping {
    pub(crate) fn open(
        layout: &FrameLayout,
        slots: &[SlotDescriptor],
        fds: &mut Vec<(u32, OwnedFd)>,
    ) -> Result<HostMapping> {
        let at = fds
            .iter()
            .position(|(purpose, _)| *purpose == fd_purpose::HOST_SLOTS)
            .ok_or_else(|| Error::protocol("publisher sent no host slot memory (EVENT_FD purpose 2)"))?;
        let (_, memfd) = fds.remove(at);
        let size = sealed_size(&memfd, "host slot memory")?;
        let mut slot_offsets = Vec::with_capacity(slots.len());
        for (index, slot) in slots.iter().enumerate() {
            let (offset, length) = decode_handle(&slot.mem_handle);
            let end = offset.checked_add(layout.size() as u64);
            if length < layout.size() as u64 || !offset.is_multiple_of(8) || end.is_none_or(|end| end > size)
            {
                return Err(Error::corrupt(format!(
                    "slot {index}: host handle (offset {offset}, length {length}) does not fit a {}-byte frame in {size} bytes of slot memory",
                    layout.size()
                )));
            }
            slot_offsets.push(offset as usize);
        }
        let size = usize::try_from(size).map_err(|_| Error::corrupt("host slot memory too large"))?;
        let region = MappedRegion::map(&memfd, size, Access::ReadOnly, "host slot memory")?;
        Ok(HostMapping {
            region,
            slot_offsets,
            plane_offsets: layout.planes().iter().map(|p| p.offset).collect(),
        })
    }
}

impl SlotMapping for HostMapping {
    fn new_local(&self, layout: &FrameLayout) -> Result<LocalFrame> {
        Ok(LocalFrame::Host(AlignedBytes::zeroed(layout.size())))
    }

    fn copy_out(&self, index: usize, _seq: u64, layout: &FrameLayout, dst: &mut LocalFrame) -> Result<()> {
        let LocalFrame::Host(bytes) = dst else {
            return Err(Error::new(
                ErrorKind::Internal,
                "host slots copy into host memory",
            ));
        };
        let len = layout.size().min(bytes.len());
        // SAFETY: open() checked that the slot (offset + frame size) lies
        // inside the mapping; `bytes` is a distinct buffer of at least `len`
        // bytes. The publisher may rewrite the slot meanwhile (drop-oldest):
        // the caller's seqlock check discards such a copy.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.region.as_ptr().add(self.slot_offsets[index]),
                bytes.as_mut_ptr(),
                len,
            )
        };
        Ok(())
    }

    fn free_local(&self, frame: LocalFrame) {
        drop(frame);
    }

    fn read_local_plane(
        &self,
        frame: &LocalFrame,
        plane: usize,
        layout: &FrameLayout,
        dst: &mut [u8],
    ) -> Result<()> {
        let LocalFrame::Host(bytes) = frame else {
            return Err(Error::new(ErrorKind::Internal, "host copies are host memory"));
        };
        let p = layout.planes()[plane];
        let len = p.pitch * (p.rows - 1) + p.row_bytes;
        dst[..len].copy_from_slice(&bytes.as_slice()[p.offset..p.offset + len]);
        Ok(())
    }

    fn read_plane(&self, index: usize, plane: usize, layout: &FrameLayout, dst: &mut [u8]) -> Result<()> {
        let p = layout.planes()[plane];
        let len = p.pitch * (p.rows - 1) + p.row_bytes;
        let PlanePtr::Host(src) = self.plane(index, plane) else {
            unreachable!("host mapping")
        };
        // SAFETY: open() checked that the slot lies inside the mapping, so
        // `len` bytes from the plane start are mapped; dst is a distinct
        // Rust slice of at least `len` bytes (checked by the slice index).
        unsafe { std::ptr::copy_nonoverlapping(src, dst[..len].as_mut_ptr(), len) };
        Ok(())
    }

    fn plane(&self, index: usize, plane: usize) -> PlanePtr {
        let offset = self.slot_offsets[index] + self.plane_offsets[plane];
        // SAFETY: open() checked slot offset + frame size ≤ mapping length,
        // and plane offsets lie inside the frame.
        PlanePtr::Host(unsafe { self.region.as_ptr().add(offset) })
    }
}
