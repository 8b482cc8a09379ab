//! A shared mapping of a file descriptor (POSIX shm object or memfd).
//!
//! The only place that maps and unmaps shared memory (`platform/sigbus.rs` maps
//! anonymous pages over a region that faulted, nothing else). The bytes are shared with other
//! processes that may write them at any time, so the region hands out raw
//! pointers; typed access goes through atomics (`header.rs`) or explicit
//! copies.

use std::num::NonZeroUsize;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;

use nix::errno::Errno;
use nix::fcntl::posix_fallocate;
use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};
use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};
use nix::sys::stat::fstat;
use nix::sys::statvfs::fstatvfs;
use nix::unistd::ftruncate;

use super::sigbus::Guarded;
use crate::error::{Error, Resource, Result};

/// Read-only or read-write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    ReadOnly,
    ReadWrite,
}

/// An owned `MAP_SHARED` mapping, unmapped on drop. A SIGBUS inside it
/// (its file shrank under it) is contained: see [`MappedRegion::faulted`].
#[derive(Debug)]
pub(crate) struct MappedRegion {
    ptr: NonNull<u8>,
    len: usize,
    guard: Guarded,
}

// SAFETY: the region is plain shared memory; all access goes through raw
// pointers with atomic or explicitly racy-tolerant copies, never through
// Rust references that assume exclusivity, so moving or sharing the handle
// between threads is sound.
unsafe impl Send for MappedRegion {}
// SAFETY: as above; &MappedRegion only exposes the pointer and length.
unsafe impl Sync for MappedRegion {}

impl MappedRegion {
    /// Maps `len` bytes of `fd` from offset 0, once the object is known to
    /// be that long and to have its pages, or the room to get them: a page
    /// it has not and cannot get would raise SIGBUS when touched.
    pub(crate) fn map(fd: impl AsFd, len: usize, access: Access, what: &str) -> Result<MappedRegion> {
        let length =
            NonZeroUsize::new(len).ok_or_else(|| Error::invalid(format!("{what}: empty mapping")))?;
        check_backing(fd.as_fd(), len, what)?;
        let prot = match access {
            Access::ReadOnly => ProtFlags::PROT_READ,
            Access::ReadWrite => ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
        };
        // SAFETY: a fresh shared mapping chosen by the kernel (addr None)
        // cannot alias any Rust object; the fd is valid for the call.
        let ptr = unsafe { mmap(None, length, prot, MapFlags::MAP_SHARED, fd, 0) }
            .map_err(|e| Error::os(format!("mmap {what} ({len} bytes)"), e))?;
        let guard = Guarded::register(ptr.as_ptr().cast(), len);
        Ok(MappedRegion {
            ptr: ptr.cast(),
            len,
            guard,
        })
    }

    /// Whether the file shrank or lost pages under the mapping (a SIGBUS
    /// was contained): every byte now reads 0 and writes go nowhere, so
    /// its owner must stop trusting it and say so.
    pub(crate) fn faulted(&self) -> bool {
        self.guard.faulted()
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
        // Unguarded before unmapped: the range may be mapped again by anyone.
        self.guard = Guarded::none();
        // SAFETY: ptr/len came from a successful mmap and nothing else
        // unmaps them; no reference into the region outlives the region.
        let _ = unsafe { munmap(self.ptr.cast(), self.len) };
    }
}

/// Refuses to map `len` bytes of `fd` when it is shorter, or when the pages
/// it lacks (holes, in a file left sparse) are more than its filesystem can
/// still give: touching such a page would raise SIGBUS.
fn check_backing(fd: std::os::fd::BorrowedFd<'_>, len: usize, what: &str) -> Result<()> {
    let stat = fstat(fd).map_err(|e| Error::os(format!("fstat {what}"), e))?;
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size < len as u64 {
        return Err(Error::corrupt(format!(
            "{what} is {size} bytes, shorter than the {len} to map"
        )));
    }
    let missing = (len as u64).saturating_sub(backed_bytes(&stat));
    if missing == 0 {
        return Ok(());
    }
    let room = FilesystemRoom::of(fd);
    if room.free.is_some_and(|free| free < missing) {
        return Err(Error::exhausted(
            Resource::Space,
            format!(
                "{what} lacks pages for {missing} of its {len} bytes and its filesystem {}: reading it would raise SIGBUS, so it is not mapped",
                room.describe()
            ),
        ));
    }
    Ok(())
}

/// Bytes of a file that have pages (tmpfs counts `st_blocks` in 512-byte units).
pub(crate) fn backed_bytes(stat: &nix::sys::stat::FileStat) -> u64 {
    u64::try_from(stat.st_blocks).unwrap_or(0) * 512
}

/// What a file's filesystem can still give.
struct FilesystemRoom {
    /// Bytes free; None for a filesystem without a size (memfds'), or unknown.
    free: Option<u64>,
    total: u64,
}

impl FilesystemRoom {
    fn of(fd: std::os::fd::BorrowedFd<'_>) -> FilesystemRoom {
        match fstatvfs(fd) {
            Ok(vfs) if vfs.blocks() > 0 => FilesystemRoom {
                free: Some(vfs.blocks_available() * vfs.fragment_size()),
                total: vfs.blocks() * vfs.fragment_size(),
            },
            _ => FilesystemRoom { free: None, total: 0 },
        }
    }

    fn describe(&self) -> String {
        match self.free {
            Some(free) => format!("has {free} bytes free of {}", self.total),
            None => "has no size limit".to_owned(),
        }
    }
}

/// Gives `len` bytes of `fd` (just sized by ftruncate) their pages now, so
/// that running out is this error, naming `what`, the size and what is
/// free, and never a SIGBUS at the first touch of a mapping.
pub(crate) fn back_with_pages(fd: &OwnedFd, len: usize, what: &str) -> Result<()> {
    let size = i64::try_from(len).map_err(|_| Error::invalid(format!("{what}: {len} bytes")))?;
    loop {
        match posix_fallocate(fd, 0, size) {
            Ok(()) => return Ok(()),
            Err(Errno::EINTR) => continue,
            Err(e @ (Errno::ENOSPC | Errno::ENOMEM)) => {
                let room = FilesystemRoom::of(fd.as_fd());
                return Err(match room.free {
                    Some(_) => Error::exhausted(
                        Resource::Space,
                        format!(
                            "no space for {what}: {len} bytes wanted, its filesystem {}",
                            room.describe()
                        ),
                    ),
                    None => Error::exhausted(
                        Resource::Memory,
                        format!("no memory for {what}: {len} bytes wanted ({})", e.desc()),
                    ),
                });
            }
            Err(e) => return Err(Error::os(format!("giving {what} its {len} bytes of pages"), e)),
        }
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
    back_with_pages(&memfd, len, what)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn unsealed(len: usize) -> OwnedFd {
        let fd = memfd_create("cuframes-test-region", MFdFlags::MFD_CLOEXEC).unwrap();
        ftruncate(&fd, len as i64).unwrap();
        fd
    }

    /// A file truncated under its mapping: the read that would have raised
    /// SIGBUS completes on zeros, and the region says what happened.
    #[test]
    fn a_file_that_shrinks_under_its_mapping_reads_zeros_and_says_so() {
        let fd = unsealed(8192);
        back_with_pages(&fd, 8192, "test file").unwrap();
        let region = MappedRegion::map(&fd, 8192, Access::ReadWrite, "test file").unwrap();
        // SAFETY: in bounds of a live read-write mapping.
        unsafe { region.as_ptr().add(4096).write_volatile(7) };
        assert!(!region.faulted());
        ftruncate(&fd, 0).unwrap();
        // SAFETY: in bounds; the page is gone, which is what is tested.
        let read = unsafe { region.as_ptr().add(4096).read_volatile() };
        assert_eq!(read, 0);
        assert!(region.faulted());
        // A region mapped afterwards is guarded afresh.
        ftruncate(&fd, 4096).unwrap();
        let again = MappedRegion::map(&fd, 4096, Access::ReadOnly, "test file").unwrap();
        assert!(!again.faulted());
    }

    /// Made regions have every page: nothing is left to fault in later.
    #[test]
    fn memfds_are_backed_when_made() {
        let (fd, _region) = sealed_memfd("cuframes-test-backed", 3 * 4096 + 5, "test memfd").unwrap();
        let stat = fstat(fd.as_fd()).unwrap();
        assert!(
            backed_bytes(&stat) >= 3 * 4096 + 5,
            "{} bytes backed",
            backed_bytes(&stat)
        );
    }

    /// A sparse memfd (as an older publisher sent) is mapped: its
    /// filesystem has no size limit to run into. One shorter than the
    /// mapping is refused.
    #[test]
    fn sparse_files_are_mapped_only_where_their_pages_can_be_had() {
        let fd = unsealed(8192);
        assert_eq!(backed_bytes(&fstat(fd.as_fd()).unwrap()), 0);
        MappedRegion::map(&fd, 8192, Access::ReadOnly, "sparse memfd").unwrap();
        let err = MappedRegion::map(&fd, 3 * 4096, Access::ReadOnly, "short memfd").unwrap_err();
        assert_eq!(err.kind(), crate::error::ErrorKind::Corrupt, "{err}");
        assert!(
            err.message().contains("8192 bytes, shorter than the 12288"),
            "{err}"
        );
    }
}
