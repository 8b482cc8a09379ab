//! The `shm-copy` baseline: a plain shared-memory ring of packed frames in
//! a file under /dev/shm. The publisher copies each frame in, each
//! subscriber copies it out. Per slot a seqlock (seq = u64::MAX while being
//! written) catches overwrites; per subscriber a `done` seq lets the
//! publisher wait under strict-wait. Wake-ups are one byte per frame on a
//! pipe (each subscriber's stdin), written without blocking.
//!
//! Layout: one 4096-byte control page, then `ring` slots of `stride` bytes.
//!
//! | offset | what |
//! |---|---|
//! | 0 | global seq (last published, 0 = none) |
//! | 64 + 8k | slot k: seq |
//! | 256 + 8k | slot k: CLOCK_MONOTONIC ns when published (after the copy) |
//! | 512 + 8k | slot k: CLOCK_MONOTONIC ns when the publisher started the frame |
//! | 1024 + 8i | subscriber i: last seq copied out (or skipped) |

use std::fs::{File, OpenOptions};
use std::num::NonZeroUsize;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering, fence};

use cuframes::{Error, ErrorKind, Result};
use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};

const PAGE: usize = 4096;
const SLOT_SEQ: usize = 64;
const SLOT_MONO: usize = 256;
const SLOT_START: usize = 512;
const SUB_DONE: usize = 1024;
/// Slots and subscribers the control page has room for.
pub const MAX_RING: usize = 16;
pub const MAX_SUBSCRIBERS: usize = 32;
/// "Being written".
pub const WRITING: u64 = u64::MAX;

/// A mapping of the ring.
#[derive(Debug)]
pub struct ShmRing {
    ptr: NonNull<u8>,
    len: usize,
    ring: usize,
    stride: usize,
    frame_bytes: usize,
    /// Unlinked on drop (the creator's).
    owned_path: Option<PathBuf>,
}

fn io(what: String, e: std::io::Error) -> Error {
    Error::io(what, &e)
}

impl ShmRing {
    fn total(ring: usize, frame_bytes: usize) -> (usize, usize) {
        let stride = frame_bytes.next_multiple_of(PAGE);
        (stride, PAGE + stride * ring)
    }

    /// Creates `path` (which must not exist) for `ring` slots of `frame_bytes`.
    pub fn create(path: &Path, ring: usize, frame_bytes: usize) -> Result<ShmRing> {
        if ring == 0 || ring > MAX_RING {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("shm-copy ring of {ring} slots (1-{MAX_RING})"),
            ));
        }
        let (_, total) = Self::total(ring, frame_bytes);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| io(format!("creating {}", path.display()), e))?;
        let sized = file
            .set_len(total as u64)
            .map_err(|e| io(format!("sizing {}", path.display()), e));
        if let Err(e) = sized {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        let mut ring_map = Self::map(&file, path, ring, frame_bytes, total).inspect_err(|_| {
            let _ = std::fs::remove_file(path);
        })?;
        ring_map.owned_path = Some(path.to_owned());
        Ok(ring_map)
    }

    /// Opens a ring another process (the bench that started this one)
    /// created: as the library opens its names in /dev/shm (never blocking
    /// or following a link, a regular file checked with fstat), and only a
    /// file of this user's.
    pub fn open(path: &Path, ring: usize, frame_bytes: usize) -> Result<ShmRing> {
        use std::os::unix::fs::MetadataExt;
        let (file, meta) = cuframes::open_shared_file(path, true)?;
        let me = nix::unistd::geteuid().as_raw();
        if meta.uid() != me {
            return Err(Error::new(
                ErrorKind::Permission,
                format!(
                    "{} belongs to uid {}, not to this user (uid {me}): not a ring this bench made",
                    path.display(),
                    meta.uid()
                ),
            ));
        }
        let (_, total) = Self::total(ring, frame_bytes);
        let len = meta.len();
        if ring == 0 || ring > MAX_RING || len < total as u64 {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "{} is {len} bytes, not a ring of {ring} x {frame_bytes}",
                    path.display()
                ),
            ));
        }
        Self::map(&file, path, ring, frame_bytes, total)
    }

    fn map(file: &File, path: &Path, ring: usize, frame_bytes: usize, total: usize) -> Result<ShmRing> {
        let (stride, _) = Self::total(ring, frame_bytes);
        let length = NonZeroUsize::new(total).expect("the control page is never empty");
        // SAFETY: a fresh shared mapping placed by the kernel (no address
        // given) aliases no Rust object; the file is at least `total` bytes
        // (the creator sized it before mapping, `open` checked it), so no
        // access within the mapping raises SIGBUS.
        let ptr = unsafe {
            mmap(
                None,
                length,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                file,
                0,
            )
        }
        .map_err(|e| Error::os(format!("mmap {}", path.display()), e))?;
        Ok(ShmRing {
            ptr: ptr.cast(),
            len: total,
            ring,
            stride,
            frame_bytes,
            owned_path: None,
        })
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset + 8 <= PAGE && offset.is_multiple_of(8));
        // SAFETY: the offset lies in the control page of a live mapping
        // (debug-asserted; every caller passes a constant layout offset),
        // is 8-byte aligned (the mapping is page-aligned), and the control
        // page is only ever accessed through atomics, by every process.
        unsafe { &*self.ptr.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    pub fn ring(&self) -> usize {
        self.ring
    }

    pub fn global(&self) -> &AtomicU64 {
        self.word(0)
    }

    pub fn slot_seq(&self, slot: usize) -> &AtomicU64 {
        self.word(SLOT_SEQ + 8 * (slot % MAX_RING))
    }

    pub fn slot_published(&self, slot: usize) -> &AtomicU64 {
        self.word(SLOT_MONO + 8 * (slot % MAX_RING))
    }

    pub fn slot_started(&self, slot: usize) -> &AtomicU64 {
        self.word(SLOT_START + 8 * (slot % MAX_RING))
    }

    pub fn done(&self, subscriber: usize) -> &AtomicU64 {
        self.word(SUB_DONE + 8 * (subscriber % MAX_SUBSCRIBERS))
    }

    fn slot_ptr(&self, slot: usize) -> *mut u8 {
        assert!(slot < self.ring);
        // SAFETY: slot < ring, so the slot lies inside the mapping.
        unsafe { self.ptr.as_ptr().add(PAGE + slot * self.stride) }
    }

    /// Publisher: slot `slot`'s bytes for writing. Only the publisher
    /// writes slots; subscribers copy them out and detect overwrites with
    /// the slot's seq.
    pub fn slot_mut(&mut self, slot: usize) -> &mut [u8] {
        let ptr = self.slot_ptr(slot);
        // SAFETY: `frame_bytes` bytes from a slot start lie inside the
        // mapping; `&mut self` makes this the only reference this process
        // hands out. Other processes only read these bytes (a torn read is
        // detected by the seqlock and never judged).
        unsafe { std::slice::from_raw_parts_mut(ptr, self.frame_bytes) }
    }

    /// Subscriber: slot `slot`'s bytes. Under drop-oldest the publisher may
    /// rewrite them while they are read: check the slot's seq afterwards.
    pub fn slot(&self, slot: usize) -> &[u8] {
        let ptr = self.slot_ptr(slot);
        // SAFETY: inside the mapping (see slot_mut); any byte value is a
        // valid u8, and a concurrent rewrite is caught by the seqlock.
        unsafe { std::slice::from_raw_parts(ptr, self.frame_bytes) }
    }

    /// Publisher, before writing slot `slot`: marks it "being written".
    pub fn begin(&self, slot: usize) {
        self.slot_seq(slot).store(WRITING, Ordering::Relaxed);
        fence(Ordering::Release);
    }

    /// Publisher, after writing: publishes `seq` in `slot`.
    pub fn commit(&self, slot: usize, seq: u64, started_ns: u64, published_ns: u64) {
        self.slot_started(slot).store(started_ns, Ordering::Relaxed);
        self.slot_published(slot).store(published_ns, Ordering::Relaxed);
        self.slot_seq(slot).store(seq, Ordering::Release);
        self.global().store(seq, Ordering::Release);
    }

    /// Subscriber, after reading: the seq now in `slot` (seqlock check).
    pub fn seq_after_read(&self, slot: usize) -> u64 {
        fence(Ordering::Acquire);
        self.slot_seq(slot).load(Ordering::Relaxed)
    }

    /// The lowest `done` seq of the first `subscribers` subscribers.
    pub fn min_done(&self, subscribers: usize) -> u64 {
        (0..subscribers)
            .map(|i| self.done(i).load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX)
    }
}

impl Drop for ShmRing {
    fn drop(&mut self) {
        // SAFETY: ptr/len come from the successful mmap in `map`; no slice
        // handed out outlives `self` (they borrow it).
        let _ = unsafe { munmap(self.ptr.cast(), self.len) };
        if let Some(path) = &self.owned_path {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_mappings_share_seqs_and_bytes() {
        let path = PathBuf::from(format!("/dev/shm/cuframes-bench-test-{}", std::process::id()));
        let mut a = ShmRing::create(&path, 3, 5000).unwrap();
        let b = ShmRing::open(&path, 3, 5000).unwrap();
        a.begin(1);
        assert_eq!(b.slot_seq(1).load(Ordering::Acquire), WRITING);
        a.slot_mut(1)[4999] = 7;
        a.commit(1, 4, 10, 20);
        assert_eq!(b.global().load(Ordering::Acquire), 4);
        assert_eq!(b.slot(1)[4999], 7);
        assert_eq!(b.seq_after_read(1), 4);
        assert_eq!(b.slot_started(1).load(Ordering::Relaxed), 10);
        b.done(1).store(4, Ordering::Release);
        assert_eq!(a.min_done(2), 0);
        a.done(0).store(9, Ordering::Release);
        assert_eq!(a.min_done(2), 4);
        assert!(ShmRing::open(&path, 4, 5000).is_err(), "too small for 4 slots");
        drop(b);
        drop(a);
        assert!(!path.exists(), "the creator unlinks the file");
    }

    /// What is planted at a ring's name is refused at once, naming the
    /// path and what is there: a FIFO is not opened, a link not followed
    /// (one to a large enough file used to be mapped as the ring), a file
    /// every user may write not used.
    #[test]
    fn a_planted_name_is_refused_without_blocking() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
        let link = dir.path().join("link");
        let target = dir.path().join("target");
        std::fs::write(&target, vec![0u8; 3 * PAGE]).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let open = dir.path().join("world-writable");
        std::fs::write(&open, vec![0u8; 3 * PAGE]).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
        for (path, what) in [
            (fifo, "FIFO"),
            (link, "symbolic link"),
            (open, "every user may write"),
        ] {
            let p = path.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(ShmRing::open(&p, 1, 100).map(|_| ()).map_err(|e| e.to_string()));
            });
            let result = rx
                .recv_timeout(std::time::Duration::from_secs(5))
                .unwrap_or_else(|_| panic!("opening {} hung", path.display()));
            let err = result.unwrap_err();
            assert!(
                err.contains(&format!("{} is a", path.display())) && err.contains(what),
                "{err}"
            );
        }
    }
}
