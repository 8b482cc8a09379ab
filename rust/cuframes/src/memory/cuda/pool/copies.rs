//! Copies into the slots: one launch of the copy kernel a frame where it
//! may read the sources (loaded at the first such frame), else the
//! driver's copy calls, a plane merged into the copy before it where the
//! two lie back to back.

use std::cell::RefCell;

use super::CudaPool;
use crate::error::{Error, Result};
use crate::format::FrameLayout;
use crate::memory::cuda::copy_kernel::{self, CopyKernel, KernelPlane};
use crate::memory::cuda::driver::{Allocation, CUcontext, CUdeviceptr, CUstream, Mem};
use crate::memory::cuda::{driver, stream_of};

/// The copy kernel, loaded at the first frame it may copy: a publisher
/// that copies from host memory, or never copies, never compiles it.
#[derive(Debug)]
pub(super) enum KernelState {
    NotTried,
    /// With the launch the test hook has the driver refuse, read once here
    /// (`CUFRAMES_TEST_FAIL_COPY_KERNEL_AT`), not on every frame.
    Loaded(CopyKernel, Option<u64>),
    /// It did not load or launch (said once), or a test turned it off.
    Unavailable,
}

impl CudaPool {
    /// Copies frame `seq` from `sources` (one per plane, with its pitch)
    /// into slot `index`, then marks it written.
    pub(super) fn copy_in(
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
        for (&(_, pitch), plane) in sources.iter().zip(layout.planes()) {
            if pitch < plane.row_bytes {
                return Err(Error::invalid(format!(
                    "source pitch {pitch} is shorter than a row of {} bytes",
                    plane.row_bytes
                )));
            }
        }
        let _current = self.ctx.enter()?;
        let base = self.slot_base(index);
        let stream = stream_of(self.stream);
        let allocations = SourceAllocations::new(self.ctx.ctx);
        // A copy must stay within one allocation: planes allocated apart
        // that happen to lie back to back are two copies.
        let copies = plane_copies(sources, layout, |start, end| {
            allocations.holding(start, end).is_some()
        });
        let planes = kernel_planes(&copies, base, |start, end| {
            allocations.holding(start, end).is_some_and(|a| a.kernel_readable)
        });
        if let Some(planes) = planes
            && self.launch_copy(&planes, stream)
        {
            self.kernel_copies += 1;
            return self.mark_written(index, seq);
        }
        for copy in copies {
            let dst = base + copy.dst_offset as CUdeviceptr;
            match (copy.linear, copy.src) {
                (true, Mem::Device(src)) => driver::copy_dtod(dst, src, copy.span(), stream)?,
                _ => driver::copy_2d(
                    copy.src,
                    copy.src_pitch,
                    Mem::Device(dst),
                    copy.dst_pitch,
                    copy.row_bytes,
                    copy.rows,
                    stream,
                )?,
            }
        }
        self.mark_written(index, seq)
    }

    /// Queues the copy kernel over `planes` (context current): false where
    /// it is unavailable or its launch failed (said once, never tried
    /// again), and the caller copies with the copy calls instead.
    fn launch_copy(&mut self, planes: &[KernelPlane], stream: CUstream) -> bool {
        if let KernelState::NotTried = self.kernel {
            self.kernel = if crate::testhook::copy_kernel_disabled() {
                KernelState::Unavailable
            } else {
                let started = std::time::Instant::now();
                match CopyKernel::load(self.ctx.device) {
                    Ok(kernel) => {
                        crate::log::debug!("frame copy kernel loaded in {:?}", started.elapsed());
                        KernelState::Loaded(kernel, crate::testhook::copy_kernel_launch_to_fail())
                    }
                    Err(e) => {
                        crate::log::warning!(
                            "the frame copy kernel did not load ({e}): frames are copied with the driver's copy calls"
                        );
                        KernelState::Unavailable
                    }
                }
            };
        }
        let KernelState::Loaded(kernel, refused) = &self.kernel else {
            return false;
        };
        let launched = if *refused == Some(self.kernel_copies + 1) {
            kernel.launch_refused(planes, stream)
        } else {
            kernel.launch(planes, stream)
        };
        match launched {
            Ok(()) => true,
            Err(e) => {
                crate::log::warning!(
                    "the frame copy kernel failed to launch ({e}): frames are copied with the driver's copy calls from now on"
                );
                // Earlier launches of it may still be queued.
                let _ = driver::stream_synchronize(stream);
                kernel.unload();
                self.kernel = KernelState::Unavailable;
                false
            }
        }
    }
}

/// The allocations of a frame's sources, each asked of the driver once a
/// frame (an address may be freed and reused between frames).
struct SourceAllocations {
    ctx: CUcontext,
    known: RefCell<Vec<Allocation>>,
}

impl SourceAllocations {
    fn new(ctx: CUcontext) -> SourceAllocations {
        SourceAllocations {
            ctx,
            known: RefCell::new(Vec::new()),
        }
    }

    /// The allocation holding all of `start..end`, if one does.
    fn holding(&self, start: CUdeviceptr, end: CUdeviceptr) -> Option<Allocation> {
        if let Some(known) = self.known.borrow().iter().find(|a| a.holds(start, end)) {
            return Some(*known);
        }
        let found = driver::allocation_of(start, self.ctx)?;
        self.known.borrow_mut().push(found);
        found.holds(start, end).then_some(found)
    }
}

/// The frame's copies as the copy kernel's planes, or None where one must
/// go through the copy calls: a host source, more copies than a launch
/// takes, a plane off the kernel's 16-byte grain, or a source range that
/// `kernel_readable(start, end)` does not vouch for (checked last: it asks
/// the driver).
fn kernel_planes(
    copies: &[PlaneCopy],
    slot_base: CUdeviceptr,
    kernel_readable: impl Fn(CUdeviceptr, CUdeviceptr) -> bool,
) -> Option<Vec<KernelPlane>> {
    if copies.is_empty() || copies.len() > copy_kernel::MAX_PLANES {
        return None;
    }
    let planes = copies
        .iter()
        .map(|copy| match copy.src {
            Mem::Device(src) if copy.rows > 0 => KernelPlane::new(
                slot_base + copy.dst_offset as CUdeviceptr,
                src,
                copy.dst_pitch,
                copy.src_pitch,
                copy.row_bytes,
                copy.rows,
            )
            .map(|plane| (src, plane)),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let readable = copies.iter().zip(&planes).all(|(copy, &(src, _))| {
        src.checked_add(copy.span() as CUdeviceptr)
            .is_some_and(|end| kernel_readable(src, end))
    });
    readable.then(|| planes.into_iter().map(|(_, plane)| plane).collect())
}

/// One 2D copy into a slot: `rows` rows of `row_bytes` from `src` (pitch
/// `src_pitch`) to the slot's `dst_offset` (pitch `dst_pitch`).
#[derive(Clone, Copy, Debug)]
struct PlaneCopy {
    src: Mem,
    src_pitch: usize,
    dst_offset: usize,
    dst_pitch: usize,
    row_bytes: usize,
    rows: usize,
    /// The same pitch on both sides, device memory, the whole span within
    /// one allocation: queued as one linear copy of `span()` bytes, the gaps
    /// between rows included (the slot's are padding). The GPU moves a 4K
    /// frame's 12 MB faster so than row by row (docs/benchmarks.md, issue 27).
    linear: bool,
}

impl PlaneCopy {
    /// Bytes from the first row's start to the last row's end.
    fn span(&self) -> usize {
        self.src_pitch * (self.rows - 1) + self.row_bytes
    }
}

/// The copies of a frame's planes, a plane merged into the copy before it
/// where it follows it at the same pitch and width in both the source and
/// the slot, in device memory, within one allocation (`one_allocation(start,
/// end)` says whether a source range is): a 4K NV12 frame from NVDEC (luma
/// and chroma back to back) is one copy, not two. Each copy costs the
/// publisher ~6 µs of CPU in the driver (docs/benchmarks.md, issue 27).
fn plane_copies(
    sources: &[(Mem, usize)],
    layout: &FrameLayout,
    one_allocation: impl Fn(CUdeviceptr, CUdeviceptr) -> bool,
) -> Vec<PlaneCopy> {
    let mut copies: Vec<PlaneCopy> = Vec::with_capacity(sources.len());
    for (&(src, src_pitch), plane) in sources.iter().zip(layout.planes()) {
        let next = PlaneCopy {
            src,
            src_pitch,
            dst_offset: plane.offset,
            dst_pitch: plane.pitch,
            row_bytes: plane.row_bytes,
            rows: plane.rows,
            linear: false,
        };
        if let (Some(last), Mem::Device(at)) = (copies.last_mut(), src)
            && let Mem::Device(last_at) = last.src
        {
            let follows = last.src_pitch == src_pitch
                && last.dst_pitch == plane.pitch
                && last.row_bytes == plane.row_bytes
                && last_at.checked_add((src_pitch * last.rows) as u64) == Some(at)
                && last.dst_offset + plane.pitch * last.rows == plane.offset;
            let end = at + (src_pitch * (plane.rows - 1) + plane.row_bytes) as u64;
            if follows && one_allocation(last_at, end) {
                last.rows += plane.rows;
                last.linear = last.src_pitch == last.dst_pitch;
                continue;
            }
        }
        copies.push(next);
    }
    // Merged copies were checked against their allocation above; the others
    // are checked here, and only where a linear copy could replace them.
    for copy in copies
        .iter_mut()
        .filter(|c| !c.linear && c.rows > 0 && c.src_pitch == c.dst_pitch)
    {
        if let Mem::Device(at) = copy.src {
            copy.linear = copy.rows == 1 || one_allocation(at, at + copy.span() as CUdeviceptr);
        }
    }
    copies
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::PixelFormat;

    fn rows_of(copies: &[PlaneCopy]) -> Vec<usize> {
        copies.iter().map(|c| c.rows).collect()
    }

    #[test]
    fn back_to_back_planes_are_one_copy() {
        // 4K NV12 from NVDEC: pitch 3840 both sides, chroma right after luma.
        let layout = FrameLayout::aligned(PixelFormat::Nv12, 3840, 2160, 256).unwrap();
        let base = 0x7000_0000u64;
        let sources = [(Mem::Device(base), 3840), (Mem::Device(base + 3840 * 2160), 3840)];
        let copies = plane_copies(&sources, &layout, |_, _| true);
        assert_eq!(rows_of(&copies), [2160 + 1080]);
        assert_eq!((copies[0].dst_offset, copies[0].row_bytes), (0, 3840));
        // The same pitch on both sides: one linear copy of the whole frame.
        assert!(copies[0].linear);
        assert_eq!(copies[0].span(), 3840 * 3240);
    }

    #[test]
    fn linear_only_at_one_pitch_within_one_allocation() {
        let layout = FrameLayout::aligned(PixelFormat::Nv12, 1920, 1080, 256).unwrap();
        let base = 0x7000_0000u64;
        // 1080p from NVDEC: pitch 2048 as the slot's, planes apart (1088 rows):
        // two copies, each linear, spanning its rows' gaps but not the last's.
        let nvdec = [(Mem::Device(base), 2048), (Mem::Device(base + 2048 * 1088), 2048)];
        let copies = plane_copies(&nvdec, &layout, |_, _| true);
        assert_eq!(
            copies.iter().map(|c| (c.linear, c.span())).collect::<Vec<_>>(),
            [(true, 2048 * 1079 + 1920), (true, 2048 * 539 + 1920)]
        );
        // Each span is asked about as a whole: a plane whose rows are not in
        // one allocation stays row by row.
        let asked = std::cell::RefCell::new(Vec::new());
        let copies = plane_copies(&nvdec, &layout, |start, end| {
            asked.borrow_mut().push((start, end));
            start != base + 2048 * 1088
        });
        assert_eq!(copies.iter().map(|c| c.linear).collect::<Vec<_>>(), [true, false]);
        assert_eq!(asked.borrow()[0], (base, base + 2048 * 1079 + 1920));
        // Another pitch in the source than in the slot: row by row.
        let packed = [(Mem::Device(base), 1920), (Mem::Device(base + 1920 * 1080), 1920)];
        let copies = plane_copies(&packed, &layout, |_, _| true);
        assert_eq!(rows_of(&copies), [1620]);
        assert!(!copies[0].linear);
        // Host memory: never.
        let host = [
            (Mem::Host(base as usize as *const u8), 2048),
            (Mem::Host((base + 2048 * 1088) as usize as *const u8), 2048),
        ];
        assert!(
            plane_copies(&host, &layout, |_, _| true)
                .iter()
                .all(|c| !c.linear)
        );
    }

    #[test]
    fn planes_apart_stay_apart() {
        let layout = FrameLayout::aligned(PixelFormat::Nv12, 1920, 1080, 256).unwrap();
        let base = 0x7000_0000u64;
        // 1080p from NVDEC: the pool's frames are 1088 rows high.
        let gap = [(Mem::Device(base), 2048), (Mem::Device(base + 2048 * 1088), 2048)];
        assert_eq!(rows_of(&plane_copies(&gap, &layout, |_, _| true)), [1080, 540]);
        // Another pitch in the source than in the slot is fine: each side
        // is contiguous at its own pitch.
        let other = [(Mem::Device(base), 1920), (Mem::Device(base + 1920 * 1080), 1920)];
        assert_eq!(rows_of(&plane_copies(&other, &layout, |_, _| true)), [1620]);
        // Chroma at another pitch than luma in the source.
        let pitches = [(Mem::Device(base), 2048), (Mem::Device(base + 2048 * 1080), 4096)];
        assert_eq!(
            rows_of(&plane_copies(&pitches, &layout, |_, _| true)),
            [1080, 540]
        );
        // Back to back in two allocations: two copies (a copy must stay in
        // one; the driver refuses one that does not).
        let base_end = base + 2048 * 1080;
        let apart = [(Mem::Device(base), 2048), (Mem::Device(base_end), 2048)];
        let one = |start: u64, end: u64| start >= base && end <= base_end;
        assert_eq!(rows_of(&plane_copies(&apart, &layout, one)), [1080, 540]);
        // Host memory never merges.
        let host = [
            (Mem::Host(base as usize as *const u8), 2048),
            (Mem::Host((base + 2048 * 1080) as usize as *const u8), 2048),
        ];
        assert_eq!(rows_of(&plane_copies(&host, &layout, |_, _| true)), [1080, 540]);
        // Host and device sources never merge.
        let kinds = [
            (Mem::Device(base), 2048),
            (Mem::Host((base + 2048 * 1080) as usize as *const u8), 2048),
        ];
        assert_eq!(rows_of(&plane_copies(&kinds, &layout, |_, _| true)), [1080, 540]);
        // Chroma before luma in the source.
        let before = [(Mem::Device(base + 2048 * 540), 2048), (Mem::Device(base), 2048)];
        assert_eq!(rows_of(&plane_copies(&before, &layout, |_, _| true)), [1080, 540]);
    }

    #[test]
    fn frames_the_kernel_may_copy_and_those_it_may_not() {
        let slot = 0x9000_0000u64;
        let base = 0x7000_0000u64;
        let readable = |_, _| true;
        // 4K NV12 from NVDEC: one merged copy, one plane of the launch.
        let layout = FrameLayout::aligned(PixelFormat::Nv12, 3840, 2160, 256).unwrap();
        let nvdec = [(Mem::Device(base), 3840), (Mem::Device(base + 3840 * 2160), 3840)];
        let copies = plane_copies(&nvdec, &layout, |_, _| true);
        let planes = kernel_planes(&copies, slot, readable).unwrap();
        assert_eq!(
            planes,
            [KernelPlane::new(slot, base, 3840, 3840, 3840, 3240).unwrap()]
        );
        // 1080p: two copies, two planes of one launch; each source range is
        // asked about as a whole.
        let layout = FrameLayout::aligned(PixelFormat::Nv12, 1920, 1080, 256).unwrap();
        let nv = [(Mem::Device(base), 2048), (Mem::Device(base + 2048 * 1088), 2048)];
        let copies = plane_copies(&nv, &layout, |_, _| true);
        let asked = RefCell::new(Vec::new());
        let planes = kernel_planes(&copies, slot, |start, end| {
            asked.borrow_mut().push((start, end));
            true
        });
        assert_eq!(planes.map(|p| p.len()), Some(2));
        assert_eq!(
            *asked.borrow(),
            [
                (base, base + 2048 * 1079 + 1920),
                (base + 2048 * 1088, base + 2048 * 1088 + 2048 * 539 + 1920)
            ]
        );
        // A source the driver does not vouch for: the copy calls.
        assert!(kernel_planes(&copies, slot, |start, _| start == base).is_none());
        // Off the kernel's 16-byte grain: never asks the driver.
        let never = |_: u64, _: u64| -> bool { panic!("asked about a frame the kernel cannot copy") };
        let shifted = [
            (Mem::Device(base + 8), 2048),
            (Mem::Device(base + 2048 * 1088), 2048),
        ];
        assert!(kernel_planes(&plane_copies(&shifted, &layout, |_, _| true), slot, never).is_none());
        let odd = FrameLayout::aligned(PixelFormat::Nv12, 1912, 1080, 256).unwrap();
        let narrow = [(Mem::Device(base), 2048), (Mem::Device(base + 2048 * 1088), 2048)];
        assert!(kernel_planes(&plane_copies(&narrow, &odd, |_, _| true), slot, never).is_none());
        let pitch = [(Mem::Device(base), 2056), (Mem::Device(base + 2056 * 1088), 2056)];
        assert!(kernel_planes(&plane_copies(&pitch, &layout, |_, _| true), slot, never).is_none());
        // Host memory, or any plane of it.
        let host = [
            (Mem::Device(base), 2048),
            (Mem::Host((base + 2048 * 1088) as usize as *const u8), 2048),
        ];
        assert!(kernel_planes(&plane_copies(&host, &layout, |_, _| true), slot, never).is_none());
        // More copies than one launch takes.
        let one = copies[0];
        assert!(kernel_planes(&[one; copy_kernel::MAX_PLANES + 1], slot, never).is_none());
        assert_eq!(
            kernel_planes(&[one; copy_kernel::MAX_PLANES], slot, readable).map(|p| p.len()),
            Some(copy_kernel::MAX_PLANES)
        );
        // yuv420p: three planes (the chroma ones merged: two).
        let yuv = FrameLayout::aligned(PixelFormat::Yuv420p, 1280, 720, 256).unwrap();
        let p = yuv.planes();
        let sources: Vec<_> = p
            .iter()
            .map(|p| (Mem::Device(base + p.offset as u64), p.pitch))
            .collect();
        let copies = plane_copies(&sources, &yuv, |_, _| true);
        assert_eq!(
            kernel_planes(&copies, slot, readable).map(|p| p.len()),
            Some(copies.len())
        );
    }

    #[test]
    fn only_planes_of_one_width_merge() {
        // yuv420p: the two half-width chroma planes can merge, luma cannot.
        let layout = FrameLayout::aligned(PixelFormat::Yuv420p, 1024, 512, 256).unwrap();
        let p = layout.planes();
        assert_eq!(p[1].pitch, p[2].pitch);
        let base = 0x1000_0000u64;
        let sources = [
            (Mem::Device(base), p[0].pitch),
            (Mem::Device(base + p[1].offset as u64), p[1].pitch),
            (Mem::Device(base + p[2].offset as u64), p[2].pitch),
        ];
        let copies = plane_copies(&sources, &layout, |_, _| true);
        assert_eq!(rows_of(&copies), [512, 512]);
        assert_eq!(copies[1].dst_offset, p[1].offset);
    }
}
