//! A shared mapping of a file descriptor (POSIX shm object or memfd).
//!
//! The only place that calls mmap/munmap. The bytes are shared with other
//! processes that may write them at any time, so the region hands out raw
//! pointers; typed access goes through atomics (`header.rs`) or explicit
//! copies.

use std::num::NonZeroUsize;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;

use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};
use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};
use nix::sys::stat::fstat;
use nix::unistd::ftruncate;

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

/// A new memfd of `len` bytes named `name`, mapped read-write here, then
/// sealed: its size fixed, and (Linux >= 5.1, F_SEAL_FUTURE_WRITE) every
/// later write(2) and writable mapping forbidden, so the processes it is sent
/// to, who could reopen it read-write through /proc, can only read it.
pub(crate) fn sealed_memfd(name: &str, len: usize, what: &str) -> Result<(OwnedFd, MappedRegion)> {
    memfd(name, len, what, true)
}

/// A new memfd like [`sealed_memfd`] whose size is fixed but which stays
/// writable: for memory one peer writes and the publisher reads.
pub(crate) fn resizeless_memfd(name: &str, len: usize, what: &str) -> Result<(OwnedFd, MappedRegion)> {
    memfd(name, len, what, false)
}

fn memfd(name: &str, len: usize, what: &str, read_only_elsewhere: bool) -> Result<(OwnedFd, MappedRegion)> {
    let memfd = memfd_create(name, MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING)
        .map_err(|e| Error::os(format!("memfd_create for {what}"), e))?;
    let size = i64::try_from(len).map_err(|_| Error::invalid(format!("{what}: {len} bytes")))?;
    ftruncate(&memfd, size).map_err(|e| Error::os(format!("ftruncate {what} to {len} bytes"), e))?;
    let region = MappedRegion::map(&memfd, len, Access::ReadWrite, what)?;
    let fixed = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL;
    let seals = if read_only_elsewhere {
        fixed | SealFlag::F_SEAL_FUTURE_WRITE
    } else {
        fixed
    };
    fcntl(&memfd, FcntlArg::F_ADD_SEALS(seals))
        .or_else(|e| match e {
            nix::errno::Errno::EINVAL if read_only_elsewhere => fcntl(&memfd, FcntlArg::F_ADD_SEALS(fixed)),
            e => Err(e),
        })
        .map_err(|e| Error::os(format!("sealing {what}"), e))?;
    Ok((memfd, region))
}

/// Whether nobody can write `fd`'s memory any more except through mappings
/// made before (F_SEAL_FUTURE_WRITE, or F_SEAL_WRITE).
pub(crate) fn writes_sealed(fd: &OwnedFd) -> bool {
    fcntl(fd, FcntlArg::F_GET_SEALS).is_ok_and(|seals| {
        SealFlag::from_bits_truncate(seals).intersects(SealFlag::F_SEAL_FUTURE_WRITE | SealFlag::F_SEAL_WRITE)
    })
}

/// The size of a memfd another process sent, which must be sealed against
/// shrinking: shrunk under our mapping, a read would raise SIGBUS.
pub(crate) fn sealed_size(fd: &OwnedFd, what: &str) -> Result<u64> {
    let seals = fcntl(fd, FcntlArg::F_GET_SEALS)
        .map_err(|e| Error::protocol(format!("{what} is not a sealable memfd: {}", e.desc())))?;
    if !SealFlag::from_bits_truncate(seals).contains(SealFlag::F_SEAL_SHRINK) {
        return Err(Error::protocol(format!(
            "{what} is not sealed against shrinking; refusing to map it"
        )));
    }
    Ok(fstat(fd.as_fd())
        .map_err(|e| Error::os(format!("fstat {what}"), e))?
        .st_size as u64)
}
