//! The live shared header (`/dev/shm/cuframes-<key>`): creation, opening,
//! atomic field access, snapshots and validation of untrusted contents.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::mman::{shm_open, shm_unlink};
use nix::sys::stat::{Mode, fstat};
use nix::unistd::ftruncate;

use crate::error::{Error, ErrorKind, Result};
use crate::format::{FrameLayout, PixelFormat};
use crate::platform::names;
use crate::platform::region::{Access, MappedRegion};
use crate::wire::layout::{
    FrameMeta, HEADER_SIZE, MAGIC, MAX_RING_SIZE, MAX_SUBSCRIBER_SLOTS, OWNERSHIP_EXTERNAL,
    OWNERSHIP_LIBRARY, POLICY_DROP_OLDEST, POLICY_STRICT_WAIT, PROTOCOL_VERSION, SharedHeader, offsets,
};
use crate::wire::{CudaShare, MemoryKind};

/// What a shared-header name holds (see [`ShmHeader::at_name`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtName {
    Absent,
    Live,
    Stale,
}

/// A mapped shared header.
#[derive(Debug)]
pub(crate) struct ShmHeader {
    region: MappedRegion,
    /// The creator keeps the object open with an OFD lock on it: the mark
    /// of a live owner that `owner_alive` tests.
    _owner_lock: Option<OwnedFd>,
    /// The object's owner (fstat when opened).
    owner_uid: u32,
    /// Its mode lets its group or others write it (fstat when opened): a
    /// named header of a publisher with `v1_peers=allow` and a group (0660),
    /// which that group's protocol-v1 subscribers write (D33).
    others_write: bool,
}

impl ShmHeader {
    /// Creates the object `name` (O_EXCL, mode 0600; with `group`, that
    /// group and 0640, or 0660 when `group_writes`: for protocol-v1
    /// subscribers of that group, who ACK in it), writes `initial` with the
    /// magic stored last (Release), and maps it read-write.
    pub(crate) fn create(
        name: &str,
        initial: &SharedHeader,
        group: Option<u32>,
        group_writes: bool,
    ) -> Result<ShmHeader> {
        let fd = shm_open(
            name,
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR | OFlag::O_CLOEXEC,
            Mode::S_IRUSR | Mode::S_IWUSR,
        )
        .map_err(|e| match e {
            Errno::EEXIST => Error::new(
                ErrorKind::AlreadyExists,
                format!("shared memory {name} already exists"),
            ),
            e => Error::os(format!("shm_open {name}"), e),
        })?;
        let created = crate::platform::lock::try_lock_exclusive(&fd, name)
            .and_then(|locked| {
                locked.then_some(()).ok_or_else(|| {
                    Error::new(
                        ErrorKind::AlreadyExists,
                        format!("{name} is locked by another process"),
                    )
                })
            })
            .and_then(|()| match group {
                None => Ok(()),
                Some(gid) => nix::unistd::fchown(&fd, None, Some(crate::platform::access::gid(gid)))
                    .map_err(|e| Error::os(format!("giving {name} to group {gid}"), e)),
            })
            .and_then(|()| {
                let mode = match (group, group_writes) {
                    (None, _) => Mode::S_IRUSR | Mode::S_IWUSR,
                    (Some(_), false) => Mode::S_IRUSR | Mode::S_IWUSR | Mode::S_IRGRP,
                    (Some(_), true) => Mode::S_IRUSR | Mode::S_IWUSR | Mode::S_IRGRP | Mode::S_IWGRP,
                };
                nix::sys::stat::fchmod(&fd, mode).map_err(|e| Error::os(format!("fchmod {name}"), e))
            })
            .and_then(|()| {
                ftruncate(&fd, HEADER_SIZE as i64).map_err(|e| Error::os(format!("ftruncate {name}"), e))
            })
            .and_then(|()| {
                let path = names::shm_path(name);
                crate::platform::region::back_with_pages(&fd, HEADER_SIZE, &path.display().to_string())
            })
            .and_then(|()| MappedRegion::map(&fd, HEADER_SIZE, Access::ReadWrite, name));
        let region = match created {
            Ok(region) => region,
            Err(e) => {
                let _ = shm_unlink(name);
                return Err(e);
            }
        };
        let header = ShmHeader {
            region,
            _owner_lock: Some(fd),
            owner_uid: nix::unistd::geteuid().as_raw(),
            others_write: group_writes && group.is_some(),
        };
        // Everything but the magic first, then the magic with Release: an
        // opener that sees the magic sees a complete header.
        let mut body = *initial;
        body.magic = 0;
        header.store_bytes(0, body.as_bytes());
        header.magic().store(MAGIC, Ordering::Release);
        Ok(header)
    }

    /// The publisher's copy that only it can write (D33): a memfd holding
    /// `initial` (the magic stored last, as in [`ShmHeader::create`]),
    /// sealed against resizing and against every later writable mapping,
    /// and mapped read-write here. The descriptor goes to subscribers, who
    /// can only read it. Warns when the kernel cannot seal writes (Linux
    /// before 5.1): subscribers could then write it.
    pub(crate) fn create_sealed(key: &str, initial: &SharedHeader) -> Result<(ShmHeader, OwnedFd)> {
        let what = format!("the publisher's copy of the header of '{key}'");
        let (fd, region) =
            crate::platform::region::sealed_memfd(&format!("cuframes-{key}-header"), HEADER_SIZE, &what)?;
        if !crate::platform::region::writes_sealed(&fd) {
            crate::log::warning!(
                "this kernel cannot seal {what} against writes (F_SEAL_FUTURE_WRITE, Linux 5.1): subscribers of '{key}' could change what the others read"
            );
        }
        let header = ShmHeader {
            region,
            _owner_lock: None,
            owner_uid: nix::unistd::geteuid().as_raw(),
            others_write: false,
        };
        let mut body = *initial;
        body.magic = 0;
        header.store_bytes(0, body.as_bytes());
        header.magic().store(MAGIC, Ordering::Release);
        Ok((header, fd))
    }

    /// Opens an existing object read-write (subscribers write ACKs).
    pub(crate) fn open(name: &str) -> Result<ShmHeader> {
        Self::open_with(name, Access::ReadWrite)
    }

    /// Opens an existing object read-only (inspection).
    pub(crate) fn open_read_only(name: &str) -> Result<ShmHeader> {
        Self::open_with(name, Access::ReadOnly)
    }

    fn open_with(name: &str, access: Access) -> Result<ShmHeader> {
        let path = names::shm_path(name);
        let (file, _) =
            names::open_regular(&path, access == Access::ReadWrite).map_err(|e| match e.kind() {
                ErrorKind::NotFound => Error::new(
                    ErrorKind::NotFound,
                    format!("shared memory {name} does not exist"),
                ),
                _ => e,
            })?;
        Self::from_fd(&OwnedFd::from(file), access, name)
    }

    /// A new read-write descriptor of our own object `name`, to send to a
    /// subscriber (D27): a separate open file description, so the
    /// creator's lock stays on the creator's alone.
    pub(crate) fn open_for_sharing(name: &str) -> Result<OwnedFd> {
        shm_open(
            name,
            OFlag::O_RDWR | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|e| Error::os(format!("shm_open {name} (to send it to subscribers)"), e))
    }

    /// Maps an existing header object of the right size (`what` names it in
    /// errors): one opened by name, or one its publisher sent over the
    /// control socket. The contents are untrusted either way; the owner of
    /// one sent by the publisher needs no check.
    pub(crate) fn from_fd(fd: &OwnedFd, access: Access, what: &str) -> Result<ShmHeader> {
        let stat = fstat(fd.as_fd()).map_err(|e| Error::os(format!("fstat {what}"), e))?;
        if stat.st_mode & nix::libc::S_IFMT != nix::libc::S_IFREG {
            return Err(Error::corrupt(format!(
                "shared memory {what} is not a regular file"
            )));
        }
        if stat.st_size != HEADER_SIZE as i64 {
            return Err(Error::corrupt(format!(
                "shared memory {what} is {} bytes; protocol v1 requires {HEADER_SIZE}",
                stat.st_size
            )));
        }
        // Every publisher writes its whole header before the magic: one
        // without pages is what a publisher that died creating it, or could
        // not get the space (an older cuframes), left. Reading it would take
        // pages /dev/shm may not have (SIGBUS), so it is never mapped.
        let backed = crate::platform::region::backed_bytes(&stat);
        if backed < HEADER_SIZE as u64 {
            return Err(Error::corrupt(format!(
                "shared memory {what} is sparse: {backed} of its {HEADER_SIZE} bytes have pages (left by a publisher that died creating it or found /dev/shm full; `cuframes cleanup` removes it)"
            )));
        }
        let region = MappedRegion::map(fd, HEADER_SIZE, access, what)?;
        Ok(ShmHeader {
            region,
            _owner_lock: None,
            owner_uid: stat.st_uid,
            others_write: stat.st_mode & 0o022 != 0,
        })
    }

    /// Whether anyone but its owner (and root) may write this object: its
    /// group or others have write permission. False for the publisher's
    /// sealed copy, which nobody else can write whatever its mode.
    pub(crate) fn others_can_write(&self) -> bool {
        self.others_write
    }

    /// Marks a header the publisher sent as its sealed copy (D33): a memfd
    /// sealed against every later writable mapping, whose mode says nothing.
    pub(crate) fn into_sealed_copy(mut self) -> ShmHeader {
        self.others_write = false;
        self
    }

    /// What is at the name `name`: nothing, a header a live creator holds
    /// the lock of, or one provably left by a dead publisher of this user
    /// (a regular file of ours, of a header's size or empty, unlocked).
    /// Anything else is refused, naming the path and what it is; nothing
    /// here blocks or follows a link.
    pub(crate) fn at_name(name: &str) -> Result<AtName> {
        let path = names::shm_path(name);
        let (file, meta) = match names::open_regular(&path, false) {
            Ok(opened) => opened,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(AtName::Absent),
            Err(e) => return Err(e),
        };
        if crate::platform::lock::is_locked_elsewhere(&file) {
            return Ok(AtName::Live);
        }
        if !names::owned_by_us(&meta) {
            return Err(names::foreign(
                &path,
                names::not_ours(&meta, " that no live publisher holds"),
            ));
        }
        if meta.len() != 0 && meta.len() != HEADER_SIZE as u64 {
            return Err(names::foreign(
                &path,
                format_args!(
                    "a regular file of {} bytes (a shared header is {HEADER_SIZE}), not a file cuframes made",
                    meta.len()
                ),
            ));
        }
        Ok(AtName::Stale)
    }

    /// Removes the object's name (mappings stay valid).
    pub(crate) fn unlink(name: &str) -> Result<bool> {
        match shm_unlink(name) {
            Ok(()) => Ok(true),
            Err(Errno::ENOENT) => Ok(false),
            Err(e) => Err(Error::os(format!("shm_unlink {name}"), e)),
        }
    }

    /// The uid owning the object.
    pub(crate) fn owner_uid(&self) -> u32 {
        self.owner_uid
    }

    fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        assert!(
            offset.is_multiple_of(8) && offset + 8 <= self.region.len(),
            "header offset {offset}"
        );
        // SAFETY: the offset is 8-aligned inside the mapping (checked above;
        // the mapping is page-aligned), the mapping lives as long as &self,
        // and AtomicU64 has u64's layout. Other processes touch these bytes
        // only through atomics too.
        unsafe { AtomicU64::from_ptr(self.region.as_ptr().add(offset).cast()) }
    }

    /// The u32 at `offset` (4-aligned, inside the header).
    pub(super) fn u32_at(&self, offset: usize) -> &AtomicU32 {
        assert!(
            offset.is_multiple_of(4) && offset + 4 <= self.region.len(),
            "header offset {offset}"
        );
        // SAFETY: the offset is 4-aligned inside the mapping (checked above;
        // the mapping is page-aligned), the mapping lives as long as &self,
        // and AtomicU32 has u32's layout. Other processes touch these bytes
        // only through atomics too.
        unsafe { AtomicU32::from_ptr(self.region.as_ptr().add(offset).cast()) }
    }

    fn magic(&self) -> &AtomicU32 {
        // SAFETY: offset 0 of a page-aligned mapping of HEADER_SIZE bytes,
        // valid for the lifetime of &self.
        unsafe { AtomicU32::from_ptr(self.region.as_ptr().add(offsets::MAGIC).cast()) }
    }

    /// Writes `bytes` at `offset` (both multiples of 8) with relaxed atomic
    /// word stores.
    pub(crate) fn store_bytes(&self, offset: usize, bytes: &[u8]) {
        assert!(bytes.len().is_multiple_of(8));
        for (i, word) in bytes.chunks_exact(8).enumerate() {
            let value = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            self.atomic_u64(offset + i * 8).store(value, Ordering::Relaxed);
        }
    }

    /// A copy of the whole header made with relaxed atomic word loads: a
    /// consistent value for every word, not for the header as a whole.
    pub(crate) fn snapshot(&self) -> SharedHeader {
        let mut bytes = [0u8; HEADER_SIZE];
        for (i, word) in bytes.chunks_exact_mut(8).enumerate() {
            word.copy_from_slice(&self.atomic_u64(i * 8).load(Ordering::Relaxed).to_le_bytes());
        }
        SharedHeader::from_bytes(&bytes)
    }

    /// Whether the object shrank or lost its pages under this mapping
    /// (another process truncated it): what was read since is zeros.
    pub(crate) fn lost_pages(&self) -> bool {
        self.region.faulted()
    }

    /// `magic` with Acquire: pairs with the Release at creation.
    pub(crate) fn load_magic(&self) -> u32 {
        self.magic().load(Ordering::Acquire)
    }

    pub(super) fn global_seq(&self) -> &AtomicU64 {
        self.atomic_u64(offsets::GLOBAL_SEQ)
    }

    pub(crate) fn subscriber_bitmap(&self) -> &AtomicU64 {
        self.atomic_u64(offsets::SUBSCRIBER_BITMAP)
    }

    pub(crate) fn shutdown_flag(&self) -> &AtomicU64 {
        self.atomic_u64(offsets::SHUTDOWN_FLAG)
    }

    /// Extension (D33): the subscriber bits that took slot `slot`'s frame
    /// and have not released it, as the publisher counted them (meaningful
    /// in its sealed copy only).
    pub(crate) fn slot_holders(&self, slot: usize) -> &AtomicU64 {
        self.slot_field(slot, offsets::SLOT_HOLDERS)
    }

    /// Whether the publisher says it waits for an ACK (SeqCst: pairs with
    /// a subscriber's release, see [`crate::shm::ack_area::AckArea::release`]).
    pub(crate) fn publisher_waits(&self) -> bool {
        self.u32_at(offsets::PUBLISHER_WAITING).load(Ordering::SeqCst) != 0
    }

    /// Slot `index`'s field at `field` (an `offsets::SLOT_*` constant).
    pub(super) fn slot_field(&self, index: usize, field: usize) -> &AtomicU64 {
        assert!(index < MAX_RING_SIZE);
        self.atomic_u64(offsets::slot(index) + field)
    }

    /// Subscriber slot `bit`'s field at `field` (an `offsets::SUB_*` constant).
    pub(super) fn subscriber_field(&self, bit: usize, field: usize) -> &AtomicU64 {
        assert!(bit < MAX_SUBSCRIBER_SLOTS);
        self.atomic_u64(offsets::subscriber(bit) + field)
    }

    /// Byte offset of subscriber slot `bit`, for `store_bytes`.
    pub(crate) fn subscriber_offset(bit: usize) -> usize {
        offsets::subscriber(bit)
    }
}

/// A header's fixed part, validated: every value in range and consistent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamInfo {
    /// Live slots.
    pub ring_size: usize,
    /// `POLICY_*`.
    pub policy: u64,
    /// `OWNERSHIP_*`.
    pub ownership_mode: u64,
    /// Frame geometry.
    pub layout: FrameLayout,
    /// Where frames live.
    pub memory: MemoryKind,
    /// The raw meta, as published.
    pub meta: FrameMeta,
    /// Frame rate, when the publisher gave one.
    pub fps: Option<(u32, u32)>,
    /// Publisher pid as written (informative).
    pub producer_pid: u64,
}

impl StreamInfo {
    /// How CUDA slots are shared (D27); None for host memory.
    pub fn cuda_share(&self) -> Option<CudaShare> {
        CudaShare::from_wire(self.meta.memory_kind).filter(|_| self.memory == MemoryKind::Cuda)
    }
}

/// Checks the fixed part of a header read from shared memory, treating every
/// field as hostile: the magic, the version, ring size, subscriber count,
/// policy, ownership, memory kind and a frame geometry that adds up.
pub fn validate_header(h: &SharedHeader) -> Result<StreamInfo> {
    if h.magic != MAGIC {
        return Err(Error::corrupt(format!(
            "bad magic 0x{:08X} (want 0x{MAGIC:08X}): not a cuframes header or not initialised",
            h.magic
        )));
    }
    if h.proto_version != PROTOCOL_VERSION {
        return Err(Error::new(
            ErrorKind::Protocol,
            format!(
                "version mismatch: shared header is protocol v{}, this library speaks v{PROTOCOL_VERSION}",
                h.proto_version
            ),
        ));
    }
    if h.ring_size == 0 || h.ring_size > MAX_RING_SIZE as u64 {
        return Err(Error::corrupt(format!(
            "ring_size {} is outside 1..=16",
            h.ring_size
        )));
    }
    if h.max_subscribers != MAX_SUBSCRIBER_SLOTS as u64 {
        return Err(Error::corrupt(format!(
            "max_subscribers {} is not the v1 value {MAX_SUBSCRIBER_SLOTS}",
            h.max_subscribers
        )));
    }
    if h.policy != POLICY_DROP_OLDEST && h.policy != POLICY_STRICT_WAIT {
        return Err(Error::corrupt(format!("unknown policy {}", h.policy)));
    }
    if h.ownership_mode != OWNERSHIP_LIBRARY && h.ownership_mode != OWNERSHIP_EXTERNAL {
        return Err(Error::corrupt(format!(
            "unknown ownership_mode {}",
            h.ownership_mode
        )));
    }
    let (layout, memory) = validate_meta(&h.meta)?;
    let fps = (h.meta.fps_num != 0 && h.meta.fps_den != 0).then_some((h.meta.fps_num, h.meta.fps_den));
    Ok(StreamInfo {
        ring_size: h.ring_size as usize,
        policy: h.policy,
        ownership_mode: h.ownership_mode,
        layout,
        memory,
        meta: h.meta,
        fps,
        producer_pid: h.producer_pid,
    })
}

/// The FORMAT error for a wire format this library does not know: past the
/// highest it knows, a format added later (D36: numbers only grow), which a
/// newer library reads.
fn unknown_format(wire: u32) -> Error {
    let known = PixelFormat::max_wire();
    let why = if wire > known {
        format!(
            "this library (cuframes {}) knows formats 1..={known} and is too old for it: upgrade libcuframes",
            env!("CARGO_PKG_VERSION")
        )
    } else {
        "no format has that number".to_owned()
    };
    Error::new(
        ErrorKind::Format,
        format!("the publisher's pixel format {wire} is unknown: {why}"),
    )
}

/// Checks a frame meta (from shared memory or HELLO_RESP).
pub fn validate_meta(meta: &FrameMeta) -> Result<(FrameLayout, MemoryKind)> {
    let format = PixelFormat::from_wire(meta.format).ok_or_else(|| unknown_format(meta.format))?;
    let layout = FrameLayout::with_pitches(
        format,
        meta.width,
        meta.height,
        meta.pitch_y as usize,
        meta.pitch_uv as usize,
    )
    .map_err(|e| Error::corrupt(format!("frame meta: {e}")))?;
    if meta.frame_size_bytes != layout.size() as u64 {
        return Err(Error::corrupt(format!(
            "frame meta: frame_size_bytes {} disagrees with {format} {}x{} at pitches {}/{} ({} bytes)",
            meta.frame_size_bytes,
            meta.width,
            meta.height,
            meta.pitch_y,
            meta.pitch_uv,
            layout.size()
        )));
    }
    let memory = MemoryKind::from_wire(meta.memory_kind)
        .ok_or_else(|| Error::corrupt(format!("frame meta: unknown memory kind {}", meta.memory_kind)))?;
    Ok((layout, memory))
}
