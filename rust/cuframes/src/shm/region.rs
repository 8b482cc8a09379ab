//! A shared mapping of a file descriptor (POSIX shm object or memfd).
//!
//! The only place that calls mmap/munmap. The bytes are shared with other
//! processes that may write them at any time, so the region hands out raw
//! pointers; typed access goes through atomics (`header.rs`) or explicit
//! copies.

use std::num::NonZeroUsize;
use std::os::fd::AsFd;
use std::ptr::NonNull;

use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};

use crate::error::{Error, Result};

/// Read-only or read-write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    ReadOnly,
    ReadWrite,
}

/// An owned `MAP_SHARED` mapping, unmapped on drop.
#[derive(Debug)]
pub(crate) struct MappedRegion {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the region is plain shared memory; all access goes through raw
// pointers with atomic or explicitly racy-tolerant copies, never through
// Rust references that assume exclusivity, so moving or sharing the handle
// between threads is sound.
unsafe impl Send for MappedRegion {}
// SAFETY: as above; &MappedRegion only exposes the pointer and length.
unsafe impl Sync for MappedRegion {}

impl MappedRegion {
    /// Maps `len` bytes of `fd` from offset 0. The caller has checked that
    /// the object is at least `len` bytes long (else access past its end
    /// raises SIGBUS).
    pub(crate) fn map(fd: impl AsFd, len: usize, access: Access, what: &str) -> Result<MappedRegion> {
        let length =
            NonZeroUsize::new(len).ok_or_else(|| Error::invalid(format!("{what}: empty mapping")))?;
        let prot = match access {
            Access::ReadOnly => ProtFlags::PROT_READ,
            Access::ReadWrite => ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
        };
        // SAFETY: a fresh shared mapping chosen by the kernel (addr None)
        // cannot alias any Rust object; the fd is valid for the call.
        let ptr = unsafe { mmap(None, length, prot, MapFlags::MAP_SHARED, fd, 0) }
            .map_err(|e| Error::os(format!("mmap {what} ({len} bytes)"), e))?;
        Ok(MappedRegion { ptr: ptr.cast(), len })
    }

    /// Start of the mapping.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for MappedRegion {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from a successful mmap and nothing else
        // unmaps them; no reference into the region outlives the region.
        let _ = unsafe { munmap(self.ptr.cast(), self.len) };
    }
}
