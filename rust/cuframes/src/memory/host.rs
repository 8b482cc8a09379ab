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

#[cfg(test)]
pub(crate) mod tests {
    //! The host backend, and the [`SlotPool`]/[`SlotMapping`] contract every
    //! backend meets ([`check_contract`]; `cuda/mapping.rs` runs it on CUDA).

    use std::os::fd::AsFd;
    use std::sync::atomic::{AtomicU32, Ordering};

    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};

    use super::*;
    use crate::format::PixelFormat;
    use crate::pattern;
    use crate::publisher::PITCH_ALIGNMENT;

    const RING: usize = 3;

    /// Four planes at two pitches, an odd size: no plane starts where a
    /// simpler layout would put it.
    pub(crate) fn odd_layout() -> FrameLayout {
        FrameLayout::aligned(PixelFormat::Yuva420p, 33, 17, PITCH_ALIGNMENT).unwrap()
    }

    /// A memfd name unique to this process and call.
    fn unique_key(tag: &str) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        format!(
            "u{}-{tag}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// The slot descriptors a subscriber reads: the pool's handles.
    pub(crate) fn descriptors(pool: &dyn SlotPool, ring: usize) -> Vec<SlotDescriptor> {
        (0..ring)
            .map(|index| SlotDescriptor {
                mem_handle: pool.slot_handle(index),
                ..SlotDescriptor::empty()
            })
            .collect()
    }

    /// Writes pattern frame `seq - 1` (as publishers number them) into
    /// `slot` from host planes at the layout's pitch.
    pub(crate) fn write_pattern(pool: &mut dyn SlotPool, slot: usize, seq: u64, layout: &FrameLayout) {
        let mut bytes: Vec<Vec<u8>> = layout
            .planes()
            .iter()
            .map(|p| vec![0; p.pitch * p.rows])
            .collect();
        let mut planes: Vec<&mut [u8]> = bytes.iter_mut().map(Vec::as_mut_slice).collect();
        pattern::fill_frame(layout, seq - 1, &mut planes);
        let host: Vec<HostPlane<'_>> = bytes
            .iter()
            .zip(layout.planes())
            .map(|(data, p)| HostPlane { data, pitch: p.pitch })
            .collect();
        pool.write_host(slot, seq, layout, &host).unwrap();
    }

    /// Whether `read(plane, dst)` gives pattern frame `seq - 1`, every plane.
    fn holds(layout: &FrameLayout, seq: u64, mut read: impl FnMut(usize, &mut [u8]) -> Result<()>) -> bool {
        layout.planes().iter().enumerate().all(|(index, p)| {
            let mut bytes = vec![0xA5; p.pitch * (p.rows - 1) + p.row_bytes];
            read(index, &mut bytes).unwrap();
            pattern::check_plane(layout, seq - 1, index, &bytes)
        })
    }

    /// Whether slot `slot`, as `mapping` reads it, holds frame `seq`.
    pub(crate) fn slot_holds(mapping: &dyn SlotMapping, slot: usize, seq: u64, layout: &FrameLayout) -> bool {
        mapping.prepare(slot, seq).unwrap();
        holds(layout, seq, |plane, dst| {
            mapping.read_plane(slot, plane, layout, dst)
        })
    }

    fn address(ptr: PlanePtr, kind: MemoryKind) -> u64 {
        match (ptr, kind) {
            (PlanePtr::Host(p), MemoryKind::Host) => p as u64,
            (PlanePtr::Device(p), MemoryKind::Cuda) => p,
            (ptr, kind) => panic!("a {ptr:?} in a {kind:?} backend"),
        }
    }

    /// The contract of a pool and of a mapping opened from what it shares
    /// (`ring` slots of `layout`), whatever the backend:
    /// - a slot holds what was written into it, plane by plane at the
    ///   layout's pitch, and writing one slot leaves the others alone;
    /// - on both sides every plane pointer is in the backend's memory,
    ///   aligned to `PITCH_ALIGNMENT`, at the layout's offset from the slot's
    ///   first plane, and no two slots overlap;
    /// - a private copy holds the frame and keeps it when the slot is
    ///   written again; recycled, it takes another frame; then it is freed.
    pub(crate) fn check_contract(
        pool: &mut dyn SlotPool,
        mapping: &dyn SlotMapping,
        layout: &FrameLayout,
        ring: usize,
    ) {
        let kind = pool.kind();
        for slot in 0..ring {
            write_pattern(pool, slot, slot as u64 + 1, layout);
        }
        for slot in 0..ring {
            assert!(slot_holds(mapping, slot, slot as u64 + 1, layout), "slot {slot}");
        }
        let mut extents = Vec::new();
        for slot in 0..ring {
            let (read_base, write_base) = (
                address(mapping.plane(slot, 0), kind),
                address(pool.slot_plane(slot, layout, 0), kind),
            );
            for (index, p) in layout.planes().iter().enumerate() {
                let read = address(mapping.plane(slot, index), kind);
                let write = address(pool.slot_plane(slot, layout, index), kind);
                assert_eq!(read - read_base, p.offset as u64, "slot {slot} plane {index}");
                assert_eq!(write - write_base, p.offset as u64, "slot {slot} plane {index}");
                assert_eq!(read % PITCH_ALIGNMENT as u64, 0, "slot {slot} plane {index}");
                assert_eq!(write % PITCH_ALIGNMENT as u64, 0, "slot {slot} plane {index}");
            }
            extents.push(read_base..read_base + layout.size() as u64);
        }
        for (a, first) in extents.iter().enumerate() {
            for second in &extents[a + 1..] {
                assert!(
                    first.end <= second.start || second.end <= first.start,
                    "{first:?} and {second:?} overlap"
                );
            }
        }
        let mut copy = mapping.new_local(layout).unwrap();
        for (index, p) in layout.planes().iter().enumerate() {
            let at = address(copy.plane(layout, index), kind);
            assert_eq!(at % PITCH_ALIGNMENT as u64, 0, "copy plane {index} at {at:#x}");
            assert_eq!(at - address(copy.plane(layout, 0), kind), p.offset as u64);
        }
        mapping.copy_out(0, 1, layout, &mut copy).unwrap();
        write_pattern(pool, 0, 1 + ring as u64, layout); // the slot moves on
        assert!(slot_holds(mapping, 0, 1 + ring as u64, layout));
        assert!(
            holds(layout, 1, |plane, dst| mapping
                .read_local_plane(&copy, plane, layout, dst)),
            "the copy keeps its frame"
        );
        mapping.recycle(&mut copy).unwrap();
        mapping
            .copy_out(ring - 1, ring as u64, layout, &mut copy)
            .unwrap();
        assert!(holds(layout, ring as u64, |plane, dst| mapping
            .read_local_plane(&copy, plane, layout, dst)));
        mapping.free_local(copy);
    }

    fn pool(tag: &str, layout: &FrameLayout) -> (HostPool, String) {
        let key = unique_key(tag);
        (HostPool::create(&key, layout, RING, None).unwrap(), key)
    }

    fn open(pool: &HostPool, layout: &FrameLayout) -> Result<HostMapping> {
        HostMapping::open(layout, &descriptors(pool, RING), &mut pool.shared_fds().unwrap())
    }

    /// Mappings of the key's slot memfd in this process: (read-write, read-only).
    fn mappings_of(key: &str) -> (usize, usize) {
        let name = format!("/memfd:cuframes-{key}-slots");
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let modes: Vec<&str> = maps
            .lines()
            .filter(|l| l.contains(&name))
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        (
            modes.iter().filter(|&&m| m == "rw-s").count(),
            modes.iter().filter(|&&m| m == "r--s").count(),
        )
    }

    #[test]
    fn the_host_backend_meets_the_contract() {
        let layout = odd_layout();
        let (mut pool, _key) = pool("contract", &layout);
        let mapping = open(&pool, &layout).unwrap();
        check_contract(&mut pool, &mapping, &layout, RING);
    }

    #[test]
    fn aligned_bytes_are_zeroed_page_aligned_and_their_own_length() {
        for len in [0, 1, 4095, 4097, 3 * PAGE] {
            let bytes = AlignedBytes::zeroed(len);
            assert_eq!(bytes.len(), len);
            assert_eq!(bytes.as_slice().len(), len);
            assert!(bytes.as_slice().iter().all(|&b| b == 0), "{len}");
            assert_eq!(bytes.as_slice().as_ptr() as usize % PAGE, 0, "{len}");
        }
    }

    #[test]
    fn slot_handles_say_offset_and_length_little_endian() {
        let handle = encode_handle(0x0102_0304_0506_0708, 4096);
        assert_eq!(handle[0], 0x08, "little-endian");
        assert!(handle[16..].iter().all(|&b| b == 0), "the rest is zero");
        assert_eq!(decode_handle(&handle), (0x0102_0304_0506_0708, 4096));
    }

    /// Slots a page-rounded frame apart, in one memfd sealed against
    /// resizing (a subscriber could otherwise shrink it under a reader).
    #[test]
    fn a_pool_is_one_sealed_memfd_of_page_aligned_slots() {
        let layout = odd_layout();
        let (pool, _key) = pool("layout", &layout);
        let stride = layout.size().next_multiple_of(PAGE);
        assert!(stride >= layout.size() && stride.is_multiple_of(PAGE));
        for slot in 0..RING {
            assert_eq!(
                decode_handle(&pool.slot_handle(slot)),
                ((slot * stride) as u64, stride as u64),
                "slot {slot}"
            );
        }
        assert_eq!(pool.kind(), MemoryKind::Host);
        assert_eq!((pool.cuda_share(), pool.device_uuid()), (None, [0; 16]));
        let fds = pool.shared_fds().unwrap();
        assert_eq!(fds.len(), 1);
        assert_eq!(fds[0].0, fd_purpose::HOST_SLOTS);
        assert_eq!(sealed_size(&fds[0].1, "test").unwrap(), (stride * RING) as u64);
        let seals = SealFlag::from_bits_truncate(fcntl(&fds[0].1, FcntlArg::F_GET_SEALS).unwrap());
        assert!(seals.contains(SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL));
        assert!(pool.early_fds().unwrap().is_empty());
    }

    #[test]
    fn a_ring_whose_size_overflows_is_refused() {
        let err = HostPool::create(&unique_key("huge"), &odd_layout(), usize::MAX / 2, None).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("overflow"), "{err}");
    }

    /// Frames copied in from planes that cannot hold one are refused, the
    /// slot left as it was.
    #[test]
    fn write_host_refuses_planes_that_cannot_hold_the_frame() {
        let layout = odd_layout();
        let (mut pool, _key) = pool("short", &layout);
        let mapping = open(&pool, &layout).unwrap();
        write_pattern(&mut pool, 0, 1, &layout);
        let full: Vec<Vec<u8>> = layout
            .planes()
            .iter()
            .map(|p| vec![0xEE; p.pitch * p.rows])
            .collect();
        // Each plane `pitch - pitch_cut` apart, one byte short of its last
        // row when `short`.
        let planes = |pitch_cut: usize, short: bool| -> Vec<HostPlane<'_>> {
            full.iter()
                .zip(layout.planes())
                .map(|(d, p)| {
                    let need = p.pitch * (p.rows - 1) + p.row_bytes;
                    HostPlane {
                        data: &d[..if short { need - 1 } else { d.len() }],
                        pitch: p.pitch - pitch_cut,
                    }
                })
                .collect()
        };
        let too_few = &planes(0, false)[..3];
        let cases: [(&str, &[HostPlane<'_>]); 3] = [
            ("a plane missing", too_few),
            ("each plane a byte short", &planes(0, true)),
            ("a pitch shorter than a row", &planes(PITCH_ALIGNMENT, false)),
        ];
        for (what, planes) in cases {
            let err = pool.write_host(0, 2, &layout, planes).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{what}: {err}");
        }
        assert!(slot_holds(&mapping, 0, 1, &layout), "the slot is untouched");
    }

    /// In-place writes go through `planes_mut`: each slice is the slot's
    /// plane, pitch × rows, and the subscriber reads what was written.
    #[test]
    fn planes_mut_are_the_slot_planes() {
        let layout = odd_layout();
        let (mut pool, _key) = pool("inplace", &layout);
        let mapping = open(&pool, &layout).unwrap();
        let mut planes = pool.planes_mut(2, &layout).expect("host memory is addressable");
        for (plane, p) in planes.iter().zip(layout.planes()) {
            assert_eq!(plane.len(), p.pitch * p.rows);
        }
        pattern::fill_frame(&layout, 6, &mut planes);
        drop(planes);
        pool.written_in_place(2, 7).unwrap();
        assert!(slot_holds(&mapping, 2, 7, &layout));
    }

    /// The subscriber's mapping is read-only; a second mapping of the same
    /// slots reads the same frames; dropping a mapping unmaps it, and the
    /// other one stays.
    #[test]
    fn mappings_are_read_only_and_each_unmaps_on_drop() {
        let layout = odd_layout();
        let (mut pool, key) = pool("twice", &layout);
        assert_eq!(mappings_of(&key), (1, 0), "the pool's own mapping");
        let first = open(&pool, &layout).unwrap();
        let second = open(&pool, &layout).unwrap();
        assert_eq!(mappings_of(&key), (1, 2));
        write_pattern(&mut pool, 1, 5, &layout);
        assert!(slot_holds(&first, 1, 5, &layout) && slot_holds(&second, 1, 5, &layout));
        assert_ne!(first.plane(1, 0), second.plane(1, 0), "two mappings");
        drop(first);
        assert_eq!(mappings_of(&key), (1, 1));
        assert!(slot_holds(&second, 1, 5, &layout));
        drop(second);
        drop(pool);
        assert_eq!(mappings_of(&key), (0, 0));
    }

    /// What a hostile or broken publisher may send: no slot memory, an
    /// unsealed memfd, or handles that put a slot outside it, too short or
    /// misaligned. Each is refused before anything is mapped.
    #[test]
    fn a_mapping_refuses_bad_slot_memory_and_handles() {
        let layout = odd_layout();
        let (pool, key) = pool("hostile", &layout);
        let good = descriptors(&pool, RING);
        let err = HostMapping::open(&layout, &good, &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
        let other = |fd: OwnedFd| vec![(fd_purpose::HOST_SLOTS + 1, fd)];
        let err = HostMapping::open(&layout, &good, &mut other(pool.shared_fds().unwrap().remove(0).1))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Protocol, "another purpose: {err}");

        let unsealed = memfd_create("cuframes-test-unsealed", MFdFlags::MFD_CLOEXEC).unwrap();
        nix::unistd::ftruncate(
            unsealed.as_fd(),
            (RING * layout.size().next_multiple_of(PAGE)) as i64,
        )
        .unwrap();
        let err =
            HostMapping::open(&layout, &good, &mut vec![(fd_purpose::HOST_SLOTS, unsealed)]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
        assert!(err.to_string().contains("not sealed"), "{err}");

        let size = sealed_size(&pool.shared_fds().unwrap()[0].1, "test").unwrap();
        let frame = layout.size() as u64;
        let stride = frame.next_multiple_of(PAGE as u64);
        for (what, offset, length) in [
            ("past the end", size - frame + 8, stride),
            ("far past the end", u64::MAX - 7, stride),
            ("shorter than a frame", 0, frame - 1),
            ("misaligned", 4, stride),
        ] {
            let mut slots = good.clone();
            slots[1].mem_handle = encode_handle(offset, length);
            let err = HostMapping::open(&layout, &slots, &mut pool.shared_fds().unwrap()).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Corrupt, "{what}: {err}");
            assert!(err.to_string().contains("slot 1"), "{what}: {err}");
        }
        assert_eq!(mappings_of(&key), (1, 0), "nothing was mapped");
        // The last slot may end exactly at the end of the memory.
        let mut slots = good.clone();
        slots[1].mem_handle = encode_handle(size - frame, frame);
        assert!(HostMapping::open(&layout, &slots, &mut pool.shared_fds().unwrap()).is_ok());
    }

    /// A host mapping copies into host memory only: a device copy handed to
    /// it is an internal error, not a write through a wrong pointer.
    #[test]
    fn host_copies_are_host_memory() {
        let layout = odd_layout();
        let (pool, _key) = pool("local", &layout);
        let mapping = open(&pool, &layout).unwrap();
        let copy = mapping.new_local(&layout).unwrap();
        let LocalFrame::Host(bytes) = &copy else {
            panic!("a host mapping's copy is host memory: {copy:?}");
        };
        assert_eq!(bytes.len(), layout.size());
        mapping.free_local(copy);
    }
}
