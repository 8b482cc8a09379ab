//! The fence array (D28) and the mark a frame gets once written: in `fd`
//! mode the slot's fence, written on the caller's stream after the copy
//! (or, where stream memory operations fail, a wait for the copy); in `ipc`
//! mode the interprocess event, recorded after it.

use super::{CudaPool, Shared};
use crate::error::{Error, ErrorKind, Result};
use crate::memory::cuda::driver::{CUdeviceptr, CUevent, CUstream};
use crate::memory::cuda::{driver, stream_of, vmm};

/// The fence array of a ring of `ring_size` slots, exported (context
/// current); `Ok(None)` where stream memory operations fail here (said
/// once): the publisher then waits for each copy instead.
pub(super) fn fence_array(device: i32, ring_size: usize, stream: CUstream) -> Result<Option<vmm::Exported>> {
    // The fence array, tried once: where stream memory operations fail,
    // the publisher waits for each copy instead (D28).
    vmm::alloc_exported(device, 8 * ring_size).map(|fences| {
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
    })
}

impl CudaPool {
    /// Marks frame `seq` of slot `index` done on the caller's stream, after
    /// the work queued there (context current). The fence stays a stream
    /// write even behind the copy kernel: written by the kernel's last block
    /// instead, it saved the publisher a driver call (~7-9 µs a 4K frame
    /// instead of ~14 at full rate), but a subscriber's GPU wait queued
    /// before that store was met late, so under a saturated GPU its stream
    /// backed up for ~1.3 ms at a time (p99 0.95-1.45 ms against 14-67 µs,
    /// run 2026-12-06g in bench/runs/README.md): the driver's own write lets waiters go at once.
    pub(super) fn mark_written(&self, index: usize, seq: u64) -> Result<()> {
        let stream = stream_of(self.stream);
        match &self.shared {
            Shared::Ipc { event, .. } => driver::event_record(*event as CUevent, stream),
            Shared::Fd {
                fences: Some(fences), ..
            } => vmm::stream_write_u64(stream, fences.mapped.ptr + 8 * index as CUdeviceptr, seq),
            Shared::Fd { fences: None, .. } => driver::stream_synchronize(stream),
        }
    }
}
