//! Frame leases: a handle on one published frame in its slot, valid until
//! released; releasing ACKs it (spec §5 subscriber steps 4-5).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::clock;
use crate::error::{Error, ErrorKind, Result};
use crate::format::FrameLayout;
use crate::memory::{MemoryKind, PlanePtr, SlotMapping};
use crate::shm::header::ShmHeader;
use crate::wire::layout::offsets;

/// What a subscriber and its leases share: the mapped header and slots.
/// Kept alive by every outstanding lease, so mappings are closed only after
/// the last frame handed out is released.
#[derive(Debug)]
pub(crate) struct Ring {
    pub header: ShmHeader,
    pub mapping: Box<dyn SlotMapping>,
    pub layout: FrameLayout,
    pub memory: MemoryKind,
    pub ring_size: usize,
    pub bit: u32,
    pub overwritten: AtomicU64,
}

impl Ring {
    pub(crate) fn slot_of(&self, seq: u64) -> usize {
        (seq % self.ring_size as u64) as usize
    }

    /// The seq now in slot `slot`, read after the frame data (seqlock
    /// reader side: Acquire fence, then the load).
    pub(crate) fn seq_after_read(&self, slot: usize) -> u64 {
        fence(Ordering::Acquire);
        self.header
            .slot_field(slot, offsets::SLOT_SEQ)
            .load(Ordering::Relaxed)
    }

    /// ACKs `seq` in its slot if the slot still holds it.
    pub(crate) fn ack(&self, seq: u64) -> bool {
        let slot = self.slot_of(seq);
        if self.seq_after_read(slot) != seq {
            return false;
        }
        self.header
            .slot_field(slot, offsets::SLOT_ACK)
            .fetch_or(1u64 << self.bit, Ordering::Release);
        let bit = self.bit as usize;
        self.header
            .subscriber_field(bit, offsets::SUB_LAST_SEEN)
            .fetch_max(seq, Ordering::Relaxed);
        self.header
            .subscriber_field(bit, offsets::SUB_LAST_ACK)
            .store(clock::realtime_ns() as u64, Ordering::Relaxed);
        true
    }
}

/// One frame, leased from its slot. Release it (or drop it) as soon as the
/// frame is consumed: under STRICT_WAIT the publisher waits for it, under
/// DROP_OLDEST it may be overwritten, which [`FrameLease::is_intact`] and
/// [`FrameLease::release`] report.
#[derive(Debug)]
pub struct FrameLease {
    ring: Arc<Ring>,
    seq: u64,
    slot: usize,
    pts_ns: i64,
    publish_mono_ns: u64,
    released: bool,
}

/// One plane of a leased frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaneView {
    /// Where the plane starts.
    pub ptr: PlanePtr,
    /// Bytes from one row to the next.
    pub pitch: usize,
    /// Bytes of picture per row.
    pub row_bytes: usize,
    /// Rows.
    pub rows: usize,
}

impl FrameLease {
    pub(crate) fn new(ring: Arc<Ring>, seq: u64, pts_ns: i64, publish_mono_ns: u64) -> FrameLease {
        let slot = ring.slot_of(seq);
        FrameLease {
            ring,
            seq,
            slot,
            pts_ns,
            publish_mono_ns,
            released: false,
        }
    }

    /// The frame's seq (1 for the publisher's first frame).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The ring slot holding it.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Presentation timestamp (ns) given by the publisher's caller.
    pub fn pts_ns(&self) -> i64 {
        self.pts_ns
    }

    /// CLOCK_MONOTONIC ns when it was published (0 if the publisher did not
    /// say).
    pub fn publish_mono_ns(&self) -> u64 {
        self.publish_mono_ns
    }

    /// Frame geometry.
    pub fn layout(&self) -> &FrameLayout {
        &self.ring.layout
    }

    /// Where the frame lives.
    pub fn memory(&self) -> MemoryKind {
        self.ring.memory
    }

    /// Plane `index` (pointer, pitch, row bytes, rows).
    pub fn plane(&self, index: usize) -> PlaneView {
        let p = self.ring.layout.planes()[index];
        PlaneView {
            ptr: self.ring.mapping.plane(self.slot, index),
            pitch: p.pitch,
            row_bytes: p.row_bytes,
            rows: p.rows,
        }
    }

    /// Plane `index` as bytes (`pitch × (rows-1) + row_bytes` long) when the
    /// frame is in host memory. Under DROP_OLDEST the publisher may rewrite
    /// them while you read: check [`FrameLease::is_intact`] after reading.
    pub fn host_plane(&self, index: usize) -> Option<&[u8]> {
        let view = self.plane(index);
        match view.ptr {
            PlanePtr::Host(ptr) => {
                let len = view.pitch * (view.rows - 1) + view.row_bytes;
                // SAFETY: the mapping holds the whole slot (checked when it
                // was opened), it lives as long as the Ring this lease keeps,
                // and it is mapped read-only here; the publisher is the only
                // writer (bytes may change under DROP_OLDEST, which
                // is_intact() detects; any byte value is a valid u8).
                Some(unsafe { std::slice::from_raw_parts(ptr, len) })
            }
            PlanePtr::Device(_) => None,
        }
    }

    /// Copies plane `index` into `dst` (resized to `pitch × (rows-1) +
    /// row_bytes`, at the layout's pitch), from host or device memory; for
    /// CUDA frames the copy is ordered after the publish and waited for.
    pub fn read_plane(&self, index: usize, dst: &mut Vec<u8>) -> Result<()> {
        let p = self.ring.layout.planes()[index];
        dst.resize(p.pitch * (p.rows - 1) + p.row_bytes, 0);
        self.ring
            .mapping
            .read_plane(self.slot, index, &self.ring.layout, dst)
    }

    /// Whether the slot still holds this frame (false once the publisher
    /// started to overwrite it).
    pub fn is_intact(&self) -> bool {
        self.ring.seq_after_read(self.slot) == self.seq
    }

    /// Releases the frame and ACKs it. `Overwritten` when the publisher
    /// overwrote it while leased: whatever was read from it may be torn.
    pub fn release(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        if self.released {
            return Ok(());
        }
        self.released = true;
        if self.ring.ack(self.seq) {
            Ok(())
        } else {
            self.ring.overwritten.fetch_add(1, Ordering::Relaxed);
            Err(Error::new(
                ErrorKind::Overwritten,
                format!(
                    "frame seq {} in slot {} was overwritten while leased (the publisher lapped the ring)",
                    self.seq, self.slot
                ),
            ))
        }
    }
}

impl Drop for FrameLease {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
