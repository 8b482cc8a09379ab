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
//! FFmpeg's CUDA frames). Publish queues, on the caller's stream, one launch
//! of a copy kernel for all planes where the kernel may read the source
//! (`copy_kernel`), else the driver's copy calls.
//! A subscriber maps every slot once in its context and unmaps them when
//! the last lease and the subscriber are gone. A context on another GPU
//! than the publisher's reads the frames over peer access when the two GPUs
//! can peer, and is refused otherwise (`route`).

mod copy_kernel;
pub(crate) mod driver;
mod mapping;
mod pool;
pub(crate) mod route;
pub(crate) mod vmm;
pub(crate) mod warm;

pub(crate) use mapping::{CudaMapping, LocalDeviceFrame};
pub(crate) use pool::CudaPool;

use self::driver::CUstream;

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

fn stream_of(raw: usize) -> CUstream {
    raw as CUstream
}
