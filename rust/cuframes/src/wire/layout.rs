//! Byte-exact shared-memory layout of protocol v1 (spec §2, design D1).
//!
//! The structs are `#[repr(C)]` plain data: every field is an integer or a
//! byte array, so any bit pattern is a valid value (shared memory written by
//! another process is read into them as untrusted data and validated after).
//! Every offset of the spec's tables is asserted at compile time below.
//! Extensions live in bytes the spec reserves (§6.3); each is named here and
//! documented in `docs/protocol-notes.md`.

use std::mem::{offset_of, size_of};

#[cfg(target_endian = "big")]
compile_error!("cuframes protocol v1 is little-endian only (spec header)");

/// `magic` of the shared header.
pub const MAGIC: u32 = 0xCC7C_1DCC;
/// The wire protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// Largest ring (`slots[]` always has this many entries; D1).
pub const MAX_RING_SIZE: usize = 16;
/// Subscriber slots in the header (`max_subscribers`, fixed in v1).
pub const MAX_SUBSCRIBER_SLOTS: usize = 32;
/// Assignable subscriber bits are 1..=31; bit 0 is the spec's sentinel.
pub const FIRST_SUBSCRIBER_BIT: u32 = 1;
/// Highest assignable subscriber bit.
pub const LAST_SUBSCRIBER_BIT: u32 = 31;
/// `slot.seq` value meaning "no frame" or "being rewritten".
pub const SEQ_INVALID: u64 = u64::MAX;
/// Bytes of a subscriber name, without the terminating zero.
pub const MAX_NAME_BYTES: usize = 31;

/// `ownership_mode`: the library owns the slots and copies frames in.
pub const OWNERSHIP_LIBRARY: u64 = 0;
/// `ownership_mode`: the caller's own buffers are the slots.
pub const OWNERSHIP_EXTERNAL: u64 = 1;

/// `policy`: overwrite the oldest slot without waiting.
pub const POLICY_DROP_OLDEST: u64 = 0;
/// `policy`: wait for every active subscriber's ACK before overwriting.
pub const POLICY_STRICT_WAIT: u64 = 1;

/// Subscriber slot `state` values (spec §2.3).
pub const SUBSCRIBER_FREE: u64 = 0;
/// The bit is being handed out.
pub const SUBSCRIBER_CONNECTING: u64 = 1;
/// The subscriber receives frames.
pub const SUBSCRIBER_ACTIVE: u64 = 2;
/// The subscriber is being removed.
pub const SUBSCRIBER_DRAINING: u64 = 3;

/// Extension `memory_kind` (frame meta 0x20): frames are CUDA device memory.
pub const MEMORY_KIND_CUDA: u32 = 0;
/// Extension `memory_kind` (frame meta 0x20): frames are host shared memory.
pub const MEMORY_KIND_HOST: u32 = 1;
/// Extension `memory_kind` (frame meta 0x20, D27): frames are CUDA
/// device memory shared as file descriptors (VMM), not IPC handles. A
/// distinct value so that subscribers that only know IPC handles refuse the
/// stream ("unknown memory kind") instead of failing in the driver.
pub const MEMORY_KIND_CUDA_FD: u32 = 2;

/// Frame meta, 64 bytes (spec §2.1).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMeta {
    /// `cuframes_format_t` (see [`crate::PixelFormat`]).
    pub format: u32,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Bytes per row of plane 0.
    pub pitch_y: u32,
    /// Bytes per row of the chroma plane(s); 0 when there is none.
    pub pitch_uv: u32,
    /// Informative.
    pub bits_per_pixel: u32,
    /// Bytes of one whole frame.
    pub frame_size_bytes: u64,
    /// Extension (spec: reserved): `MEMORY_KIND_CUDA`, `MEMORY_KIND_HOST` or
    /// `MEMORY_KIND_CUDA_FD` (D27).
    /// Zero, as a v1 writer leaves it, means CUDA.
    pub memory_kind: u32,
    /// Extension (spec: reserved): frame rate numerator, 0 = unknown.
    pub fps_num: u32,
    /// Extension (spec: reserved): frame rate denominator, 0 = unknown.
    pub fps_den: u32,
    /// Extension (spec: reserved): UUID of the GPU holding the slots (CUDA
    /// memory); zero = unknown or host memory.
    pub device_uuid: [u8; 16],
    /// Reserved, zero.
    pub reserved: [u8; 4],
}

/// Slot descriptor, 192 bytes (spec §2.2).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotDescriptor {
    /// Published seq of the frame in this slot; `SEQ_INVALID` = none/being written.
    pub seq: u64,
    /// Presentation timestamp in nanoseconds, from the publisher's caller.
    pub pts_ns: i64,
    /// Bit i set = subscriber i ACKed this slot's frame.
    pub ack_bitmap: u64,
    /// Bytes written for diagnostics.
    pub written_bytes: u64,
    /// Memory handle: `cudaIpcMemHandle_t` (CUDA, ipc); the allocation's size
    /// (LE u64) for CUDA slots shared as fds (D27); for host memory,
    /// the slot's byte offset (LE u64) and length (LE u64) in the shared pool.
    pub mem_handle: [u8; 64],
    /// EXTERNAL ownership: the original pointer (informative).
    pub cuda_ptr_external: [u8; 32],
    /// Extension (spec: reserved_a): CLOCK_MONOTONIC ns when the frame was
    /// published, for publish→receive latency; 0 = unknown.
    pub publish_mono_ns: u64,
    /// Extension (spec: rest of reserved_a; D30): bytes of side data
    /// of this slot's frame in the side-data area; 0 = none.
    pub side_data_len: u64,
    /// Extension (spec: reserved_b): three words of frame properties at 0x90
    /// (D29); at 0xA8, in the publisher's sealed copy only, the subscriber
    /// bits holding the frame (D33); the rest reserved, zero.
    pub reserved_b: [u8; 48],
}

/// Subscriber slot, 128 bytes (spec §2.3).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscriberSlot {
    /// `SUBSCRIBER_FREE` … `SUBSCRIBER_DRAINING`.
    pub state: u64,
    /// The subscriber's pid as seen by the publisher (SO_PEERCRED).
    pub consumer_pid: u64,
    /// Highest seq the subscriber ACKed.
    pub last_seen_seq: u64,
    /// CLOCK_REALTIME ns of the last ACK.
    pub last_ack_ns: i64,
    /// Name, zero-terminated, at most 31 bytes.
    pub consumer_name: [u8; 32],
    /// Extension (spec: reserved): `dropped` at 0x40 and `last_taken_seq` at
    /// 0x48 (D22, D25); `received` 0x50, `copied` 0x58, `overwritten` 0x60,
    /// the report's source 0x68 and the seq published when it joined 0x70
    /// (D35); the rest zero.
    pub reserved: [u8; 64],
}

/// The shared header: the whole `/dev/shm/cuframes-<key>` object, 7424 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedHeader {
    /// `MAGIC`, stored last at creation.
    pub magic: u32,
    /// `PROTOCOL_VERSION`.
    pub proto_version: u32,
    /// Library version, informative.
    pub lib_version_major: u32,
    /// Library version, informative.
    pub lib_version_minor: u32,
    /// Library version, informative.
    pub lib_version_patch: u32,
    /// Reserved, zero.
    pub reserved_a: u32,
    /// Publisher pid (secondary liveness hint; D6).
    pub producer_pid: u64,
    /// Live slots, 1..=16.
    pub ring_size: u64,
    /// `OWNERSHIP_LIBRARY` or `OWNERSHIP_EXTERNAL`.
    pub ownership_mode: u64,
    /// `POLICY_DROP_OLDEST` or `POLICY_STRICT_WAIT`.
    pub policy: u64,
    /// 32 in v1.
    pub max_subscribers: u64,
    /// Geometry of every frame.
    pub meta: FrameMeta,
    /// `cudaIpcEventHandle_t` (CUDA, ipc); for CUDA slots shared as fds, a
    /// flags word (bit 0: the fence array is kept) and the fence array's size
    /// (D28); zero for host memory.
    pub ipc_event_handle: [u8; 64],
    /// Latest published seq (0 = nothing yet).
    pub global_seq: u64,
    /// Bit i set = subscriber i active.
    pub subscriber_bitmap: u64,
    /// 1 once the publisher shuts down.
    pub shutdown_flag: u64,
    /// Extension (spec: reserved_b): a futex word subscribers bump after
    /// every ACK, so a STRICT_WAIT publisher sleeps instead of polling.
    pub ack_futex: u32,
    /// Extension (spec: reserved_b): non-zero while the publisher sleeps on
    /// `ack_futex` (subscribers wake it only then).
    pub publisher_waiting: u32,
    /// Extension (rest of spec reserved_b): zero at 0x0E0; the publisher's `ack_waits` 0x0E8,
    /// `ack_wait_ns` 0x0F0 and `ack_timeouts` 0x0F8 (D35).
    pub reserved_b: [u8; 32],
    /// Always 16 descriptors; `ring_size` are live (D1).
    pub slots: [SlotDescriptor; MAX_RING_SIZE],
    /// Indexed by subscriber bit.
    pub subscribers: [SubscriberSlot; MAX_SUBSCRIBER_SLOTS],
}

/// Size of the shared object (0x1D00).
pub const HEADER_SIZE: usize = size_of::<SharedHeader>();

/// Extension (D33): one subscriber's ACK area, a memfd of
/// [`ACK_AREA_SIZE`] bytes that only it and its publisher map. Written by
/// the subscriber alone (atomic u64 words); the publisher reads it as that
/// subscriber's word about itself, never about anyone else.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckRecord {
    /// Per slot: the newest seq released from it (atomic max).
    pub released: [u64; MAX_RING_SIZE],
    /// The newest seq taken (leased or copied), atomic max (as D22's
    /// `last_taken_seq`).
    pub taken: u64,
    /// The newest seq ACKed (as the subscriber record's `last_seen_seq`).
    pub last_seen_seq: u64,
    /// CLOCK_REALTIME ns of the last ACK.
    pub last_ack_ns: u64,
    /// The subscriber's own counts so far: frames handed out, lost on the
    /// way (dropped), overwritten while leased, and handed out as copies.
    pub received: u64,
    pub dropped: u64,
    pub overwritten: u64,
    pub copied: u64,
    /// Zero.
    pub reserved: [u64; 9],
}

/// A subscriber record's counts were written by the subscriber itself
/// (protocol v1, or nothing: 0).
pub const REPORT_BY_SUBSCRIBER: u64 = 0;
/// A subscriber record's counts were copied by the publisher from the
/// subscriber's own ACK area, bounded by what it could have seen (D33, D35).
pub const REPORT_FROM_ACK_AREA: u64 = 1;

/// Bytes of an ACK area's memfd (a page; the record is at its start).
pub const ACK_AREA_SIZE: usize = 4096;

const _: () = {
    assert!(size_of::<AckRecord>() == 0x100);
    assert!(offset_of!(AckRecord, released) == 0x00);
    assert!(offset_of!(AckRecord, taken) == 0x80);
    assert!(offset_of!(AckRecord, last_seen_seq) == 0x88);
    assert!(offset_of!(AckRecord, last_ack_ns) == 0x90);
    assert!(offset_of!(AckRecord, received) == 0x98);
    assert!(offset_of!(AckRecord, dropped) == 0xA0);
    assert!(offset_of!(AckRecord, overwritten) == 0xA8);
    assert!(offset_of!(AckRecord, copied) == 0xB0);
    assert!(size_of::<AckRecord>() <= ACK_AREA_SIZE);
};

// Spec §2.1
const _: () = {
    assert!(size_of::<FrameMeta>() == 64);
    assert!(offset_of!(FrameMeta, format) == 0x00);
    assert!(offset_of!(FrameMeta, width) == 0x04);
    assert!(offset_of!(FrameMeta, height) == 0x08);
    assert!(offset_of!(FrameMeta, pitch_y) == 0x0C);
    assert!(offset_of!(FrameMeta, pitch_uv) == 0x10);
    assert!(offset_of!(FrameMeta, bits_per_pixel) == 0x14);
    assert!(offset_of!(FrameMeta, frame_size_bytes) == 0x18);
    assert!(offset_of!(FrameMeta, memory_kind) == 0x20);
    assert!(offset_of!(FrameMeta, fps_num) == 0x24);
    assert!(offset_of!(FrameMeta, fps_den) == 0x28);
    assert!(offset_of!(FrameMeta, device_uuid) == 0x2C);
    assert!(offset_of!(FrameMeta, reserved) == 0x3C);
};

// Spec §2.2
const _: () = {
    assert!(size_of::<SlotDescriptor>() == 192);
    assert!(offset_of!(SlotDescriptor, seq) == 0x00);
    assert!(offset_of!(SlotDescriptor, pts_ns) == 0x08);
    assert!(offset_of!(SlotDescriptor, ack_bitmap) == 0x10);
    assert!(offset_of!(SlotDescriptor, written_bytes) == 0x18);
    assert!(offset_of!(SlotDescriptor, mem_handle) == 0x20);
    assert!(offset_of!(SlotDescriptor, cuda_ptr_external) == 0x60);
    assert!(offset_of!(SlotDescriptor, publish_mono_ns) == 0x80);
    assert!(offset_of!(SlotDescriptor, side_data_len) == 0x88);
    assert!(offset_of!(SlotDescriptor, reserved_b) == 0x90);
};

// Spec §2.3
const _: () = {
    assert!(size_of::<SubscriberSlot>() == 128);
    assert!(offset_of!(SubscriberSlot, state) == 0x00);
    assert!(offset_of!(SubscriberSlot, consumer_pid) == 0x08);
    assert!(offset_of!(SubscriberSlot, last_seen_seq) == 0x10);
    assert!(offset_of!(SubscriberSlot, last_ack_ns) == 0x18);
    assert!(offset_of!(SubscriberSlot, consumer_name) == 0x20);
    assert!(offset_of!(SubscriberSlot, reserved) == 0x40);
};

// Spec §2 and D1
const _: () = {
    assert!(offset_of!(SharedHeader, magic) == 0x0000);
    assert!(offset_of!(SharedHeader, proto_version) == 0x0004);
    assert!(offset_of!(SharedHeader, lib_version_major) == 0x0008);
    assert!(offset_of!(SharedHeader, lib_version_minor) == 0x000C);
    assert!(offset_of!(SharedHeader, lib_version_patch) == 0x0010);
    assert!(offset_of!(SharedHeader, reserved_a) == 0x0014);
    assert!(offset_of!(SharedHeader, producer_pid) == 0x0018);
    assert!(offset_of!(SharedHeader, ring_size) == 0x0020);
    assert!(offset_of!(SharedHeader, ownership_mode) == 0x0028);
    assert!(offset_of!(SharedHeader, policy) == 0x0030);
    assert!(offset_of!(SharedHeader, max_subscribers) == 0x0038);
    assert!(offset_of!(SharedHeader, meta) == 0x0040);
    assert!(offset_of!(SharedHeader, ipc_event_handle) == 0x0080);
    assert!(offset_of!(SharedHeader, global_seq) == 0x00C0);
    assert!(offset_of!(SharedHeader, subscriber_bitmap) == 0x00C8);
    assert!(offset_of!(SharedHeader, shutdown_flag) == 0x00D0);
    assert!(offset_of!(SharedHeader, ack_futex) == 0x00D8);
    assert!(offset_of!(SharedHeader, publisher_waiting) == 0x00DC);
    assert!(offset_of!(SharedHeader, reserved_b) == 0x00E0);
    assert!(offset_of!(SharedHeader, slots) == 0x0100);
    assert!(offset_of!(SharedHeader, subscribers) == 0x0D00);
    assert!(size_of::<SharedHeader>() == 0x1D00);
    assert!(align_of::<SharedHeader>() == 8);
};

impl FrameMeta {
    /// The 64 wire bytes (HELLO_RESP embeds the meta; LE, like shared memory).
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut out = [0u8; 64];
        out[0x00..0x04].copy_from_slice(&self.format.to_le_bytes());
        out[0x04..0x08].copy_from_slice(&self.width.to_le_bytes());
        out[0x08..0x0C].copy_from_slice(&self.height.to_le_bytes());
        out[0x0C..0x10].copy_from_slice(&self.pitch_y.to_le_bytes());
        out[0x10..0x14].copy_from_slice(&self.pitch_uv.to_le_bytes());
        out[0x14..0x18].copy_from_slice(&self.bits_per_pixel.to_le_bytes());
        out[0x18..0x20].copy_from_slice(&self.frame_size_bytes.to_le_bytes());
        out[0x20..0x24].copy_from_slice(&self.memory_kind.to_le_bytes());
        out[0x24..0x28].copy_from_slice(&self.fps_num.to_le_bytes());
        out[0x28..0x2C].copy_from_slice(&self.fps_den.to_le_bytes());
        out[0x2C..0x3C].copy_from_slice(&self.device_uuid);
        out[0x3C..0x40].copy_from_slice(&self.reserved);
        out
    }

    /// Parses 64 wire bytes. Every bit pattern parses; validation is separate.
    pub fn from_bytes(b: &[u8; 64]) -> FrameMeta {
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        FrameMeta {
            format: u32_at(0x00),
            width: u32_at(0x04),
            height: u32_at(0x08),
            pitch_y: u32_at(0x0C),
            pitch_uv: u32_at(0x10),
            bits_per_pixel: u32_at(0x14),
            frame_size_bytes: u64::from_le_bytes(b[0x18..0x20].try_into().expect("8 bytes")),
            memory_kind: u32_at(0x20),
            fps_num: u32_at(0x24),
            fps_den: u32_at(0x28),
            device_uuid: b[0x2C..0x3C].try_into().expect("16 bytes"),
            reserved: b[0x3C..0x40].try_into().expect("4 bytes"),
        }
    }

    /// A meta with every field zero.
    pub const fn zeroed() -> FrameMeta {
        FrameMeta {
            format: 0,
            width: 0,
            height: 0,
            pitch_y: 0,
            pitch_uv: 0,
            bits_per_pixel: 0,
            frame_size_bytes: 0,
            memory_kind: 0,
            fps_num: 0,
            fps_den: 0,
            device_uuid: [0; 16],
            reserved: [0; 4],
        }
    }
}

impl SlotDescriptor {
    /// An empty slot: `seq = SEQ_INVALID`, everything else zero.
    pub const fn empty() -> SlotDescriptor {
        SlotDescriptor {
            seq: SEQ_INVALID,
            pts_ns: 0,
            ack_bitmap: 0,
            written_bytes: 0,
            mem_handle: [0; 64],
            cuda_ptr_external: [0; 32],
            publish_mono_ns: 0,
            side_data_len: 0,
            reserved_b: [0; 48],
        }
    }
}

impl SubscriberSlot {
    /// A free slot.
    pub const fn free() -> SubscriberSlot {
        SubscriberSlot {
            state: SUBSCRIBER_FREE,
            consumer_pid: 0,
            last_seen_seq: 0,
            last_ack_ns: 0,
            consumer_name: [0; 32],
            reserved: [0; 64],
        }
    }

    /// The name up to its first zero byte, lossily decoded (it is untrusted).
    pub fn name_lossy(&self) -> String {
        let end = self
            .consumer_name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.consumer_name.len());
        String::from_utf8_lossy(&self.consumer_name[..end]).into_owned()
    }

    /// The slot's bytes as they lie in shared memory.
    pub fn as_bytes(&self) -> &[u8; size_of::<SubscriberSlot>()] {
        // SAFETY: SubscriberSlot is repr(C), 128 bytes of integers and byte
        // arrays with no padding (layout asserts), so every byte is
        // initialised and an alignment-1 view is valid.
        unsafe { &*(self as *const SubscriberSlot as *const [u8; size_of::<SubscriberSlot>()]) }
    }

    /// Encodes a name (≤ 31 bytes, checked by the caller) zero-terminated.
    pub fn encode_name(name: &str) -> [u8; 32] {
        let mut out = [0u8; 32];
        let bytes = name.as_bytes();
        let n = bytes.len().min(MAX_NAME_BYTES);
        out[..n].copy_from_slice(&bytes[..n]);
        out
    }
}

impl SharedHeader {
    /// A header with every field zero except empty slots and free subscribers.
    pub const fn zeroed() -> SharedHeader {
        SharedHeader {
            magic: 0,
            proto_version: 0,
            lib_version_major: 0,
            lib_version_minor: 0,
            lib_version_patch: 0,
            reserved_a: 0,
            producer_pid: 0,
            ring_size: 0,
            ownership_mode: 0,
            policy: 0,
            max_subscribers: 0,
            meta: FrameMeta::zeroed(),
            ipc_event_handle: [0; 64],
            global_seq: 0,
            subscriber_bitmap: 0,
            shutdown_flag: 0,
            ack_futex: 0,
            publisher_waiting: 0,
            reserved_b: [0; 32],
            slots: [SlotDescriptor::empty(); MAX_RING_SIZE],
            subscribers: [SubscriberSlot::free(); MAX_SUBSCRIBER_SLOTS],
        }
    }

    /// The header's bytes as they lie in shared memory.
    pub fn as_bytes(&self) -> &[u8; HEADER_SIZE] {
        // SAFETY: SharedHeader is repr(C), HEADER_SIZE bytes, made only of
        // integers and byte arrays with no padding (asserted above: every
        // field offset is the previous field's end), so all its bytes are
        // initialised and any alignment-1 view of them is valid.
        unsafe { &*(self as *const SharedHeader as *const [u8; HEADER_SIZE]) }
    }

    /// A header from raw bytes (any bit pattern is a valid value).
    pub fn from_bytes(bytes: &[u8; HEADER_SIZE]) -> SharedHeader {
        // SAFETY: every field is an integer or byte array, so any bit pattern
        // is a valid SharedHeader; read_unaligned copes with the source's
        // alignment of 1.
        unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const SharedHeader) }
    }
}

/// Offsets used by the atomic accessors of the live mapping.
pub(crate) mod offsets {
    use super::*;

    pub const MAGIC: usize = offset_of!(SharedHeader, magic);
    pub const GLOBAL_SEQ: usize = offset_of!(SharedHeader, global_seq);
    pub const SUBSCRIBER_BITMAP: usize = offset_of!(SharedHeader, subscriber_bitmap);
    pub const SHUTDOWN_FLAG: usize = offset_of!(SharedHeader, shutdown_flag);
    /// Extension: the ACK futex word (u32).
    pub const ACK_FUTEX: usize = offset_of!(SharedHeader, ack_futex);
    /// Extension: the publisher-is-sleeping flag (u32).
    pub const PUBLISHER_WAITING: usize = offset_of!(SharedHeader, publisher_waiting);
    /// Extension (D35): the publisher's own counters, in both copies:
    /// strict-wait publishes that waited, ns spent waiting, subscribers
    /// dropped for their ACK timeout.
    pub const PUB_ACK_WAITS: usize = offset_of!(SharedHeader, reserved_b) + 8;
    pub const PUB_ACK_WAIT_NS: usize = offset_of!(SharedHeader, reserved_b) + 16;
    pub const PUB_ACK_TIMEOUTS: usize = offset_of!(SharedHeader, reserved_b) + 24;
    /// Extension (D35): more of a subscriber's report in its record (the
    /// publisher copies them from its ACK area, D33): frames received,
    /// copied, overwritten while leased, and who wrote the record's
    /// counts (`REPORT_*`).
    pub const SUB_RECEIVED: usize = offset_of!(SubscriberSlot, reserved) + 0x10;
    pub const SUB_COPIED: usize = offset_of!(SubscriberSlot, reserved) + 0x18;
    pub const SUB_OVERWRITTEN: usize = offset_of!(SubscriberSlot, reserved) + 0x20;
    pub const SUB_REPORT: usize = offset_of!(SubscriberSlot, reserved) + 0x28;
    /// Extension (D35): the seq published when the subscriber joined,
    /// written by the publisher at admission (what its counts are bounded
    /// by); 0 = not kept.
    pub const SUB_JOINED: usize = offset_of!(SubscriberSlot, reserved) + 0x30;

    /// ACK area words (D33).
    pub const fn ack_released(slot: usize) -> usize {
        offset_of!(AckRecord, released) + 8 * slot
    }
    pub const ACK_TAKEN: usize = offset_of!(AckRecord, taken);
    pub const ACK_LAST_SEEN: usize = offset_of!(AckRecord, last_seen_seq);
    pub const ACK_LAST_ACK: usize = offset_of!(AckRecord, last_ack_ns);
    pub const ACK_RECEIVED: usize = offset_of!(AckRecord, received);
    pub const ACK_DROPPED: usize = offset_of!(AckRecord, dropped);
    pub const ACK_OVERWRITTEN: usize = offset_of!(AckRecord, overwritten);
    pub const ACK_COPIED: usize = offset_of!(AckRecord, copied);

    pub const fn slot(index: usize) -> usize {
        offset_of!(SharedHeader, slots) + index * size_of::<SlotDescriptor>()
    }
    pub const SLOT_SEQ: usize = offset_of!(SlotDescriptor, seq);
    pub const SLOT_PTS: usize = offset_of!(SlotDescriptor, pts_ns);
    pub const SLOT_ACK: usize = offset_of!(SlotDescriptor, ack_bitmap);
    pub const SLOT_WRITTEN: usize = offset_of!(SlotDescriptor, written_bytes);
    pub const SLOT_PUBLISH_MONO: usize = offset_of!(SlotDescriptor, publish_mono_ns);
    /// Extension (D30): bytes of the frame's side data.
    pub const SLOT_SIDE_DATA: usize = offset_of!(SlotDescriptor, side_data_len);
    /// Extension (D29): three u64 words of frame properties.
    pub const SLOT_PROPS: usize = offset_of!(SlotDescriptor, reserved_b);
    /// Extension (D33): the subscriber bits that took the slot's frame and
    /// have not released it, as the publisher counts them (sealed copy only).
    pub const SLOT_HOLDERS: usize = offset_of!(SlotDescriptor, reserved_b) + 24;

    pub const fn subscriber(bit: usize) -> usize {
        offset_of!(SharedHeader, subscribers) + bit * size_of::<SubscriberSlot>()
    }
    pub const SUB_LAST_SEEN: usize = offset_of!(SubscriberSlot, last_seen_seq);
    pub const SUB_LAST_ACK: usize = offset_of!(SubscriberSlot, last_ack_ns);
    /// Extension: frames the subscriber lost (dropped + overwritten), written by it.
    pub const SUB_DROPPED: usize = offset_of!(SubscriberSlot, reserved);
    /// Extension: the newest seq the subscriber took (leased), written by it;
    /// 0 = not written (another implementation).
    pub const SUB_LAST_TAKEN: usize = offset_of!(SubscriberSlot, reserved) + 8;
}
