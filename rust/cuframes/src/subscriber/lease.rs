//! Frame leases: a handle on one published frame in its slot, valid until
//! released; releasing ACKs it (spec §5 subscriber steps 4-5).

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, ErrorKind, Result};
use crate::format::FrameLayout;
use crate::memory::{LocalFrame, MemoryKind, PlanePtr, SlotMapping};
use crate::props::FrameProps;
use crate::shm::ack_area::AckArea;
use crate::shm::header::ShmHeader;
use crate::shm::side_area::SideArea;
use crate::side_data::SideData;
use crate::wire::layout::MAX_RING_SIZE;

/// What a subscriber and its leases share: the mapped header and slots,
/// and the private buffers of copied frames. Kept alive by every
/// outstanding lease, so mappings are closed only after the last frame
/// handed out is released.
#[derive(Debug)]
pub(crate) struct Ring {
    /// Shared with copy completions that ACK from a driver thread.
    pub header: Arc<ShmHeader>,
    pub mapping: Box<dyn SlotMapping>,
    pub layout: FrameLayout,
    pub memory: MemoryKind,
    pub ring_size: usize,
    pub bit: u32,
    pub overwritten: AtomicU64,
    /// Private buffers not in use (D25).
    pub spare: Mutex<Vec<LocalFrame>>,
    /// The side-data area (D30); None from publishers without one.
    pub side: Option<SideArea>,
    /// Our own ACK area and the publisher's doorbell (D33); None from
    /// publishers that did not grant one: then we ACK in the shared header,
    /// as protocol v1 says.
    pub acks: Option<PrivateAcks>,
    /// Leases of each slot handed out and not yet released (not copies).
    pub held_here: [AtomicU32; MAX_RING_SIZE],
}

/// Where a subscriber with its own ACK area releases frames (D33).
#[derive(Debug)]
pub(crate) struct PrivateAcks {
    pub area: AckArea,
    pub doorbell: OwnedFd,
}

impl Ring {
    /// ACKs `seq` in `slot` if the slot still holds it (true: it did, so
    /// what was read from it is intact).
    pub(crate) fn ack(&self, slot: usize, seq: u64) -> bool {
        let Some(acks) = &self.acks else {
            return self.header.ack(slot, seq, self.bit);
        };
        if self.header.seq_after_read(slot) != seq {
            return false;
        }
        acks.area.release(slot, seq);
        if self.header.publisher_waits() {
            let _ = nix::unistd::write(&acks.doorbell, &1u64.to_ne_bytes());
        }
        true
    }

    /// From now on `seq` is held until released (D22, D25).
    pub(crate) fn note_taken(&self, seq: u64) {
        match &self.acks {
            Some(acks) => acks.area.note_taken(seq),
            None => self.header.note_taken(self.bit, seq),
        }
    }

    /// How many slots subscribers hold once we hold the frame we just took
    /// from `slot` (D25): those the publisher saw others hold at its last
    /// publish or wait (D33), and ours as we know them now; or, from a
    /// publisher that did not grant an ACK area, as read from every
    /// subscriber's words in the shared header (ours included: we marked
    /// the frame taken).
    pub(crate) fn held_slots(&self, slot: usize) -> usize {
        if self.acks.is_none() {
            return self.header.held_slots(self.ring_size);
        }
        let others = !(1u64 << self.bit);
        (0..self.ring_size)
            .filter(|&s| {
                s == slot
                    || self.held_here[s].load(Ordering::Relaxed) > 0
                    || self.header.slot_holders(s).load(Ordering::Acquire) & others != 0
            })
            .count()
    }

    /// Reports our counts where the tools read them: our ACK area (the
    /// publisher copies them into the headers), or our record in the
    /// shared header (the frames lost, for `cuframes top`).
    pub(crate) fn report(&self, received: u64, dropped: u64, copied: u64) {
        let overwritten = self.overwritten.load(Ordering::Relaxed);
        match &self.acks {
            Some(acks) => acks.area.report(received, dropped, overwritten, copied),
            None => self.header.show_dropped(self.bit, dropped + overwritten),
        }
    }

    /// A private buffer: a spare one, else a new one.
    pub(crate) fn local_buffer(&self) -> Result<LocalFrame> {
        let spare = self.spare.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match spare {
            Some(frame) => Ok(frame),
            None => self.mapping.new_local(&self.layout),
        }
    }

    /// Puts a private buffer back for the next copy.
    pub(crate) fn give_back(&self, frame: LocalFrame) {
        self.spare.lock().unwrap_or_else(|p| p.into_inner()).push(frame);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        let spare = std::mem::take(self.spare.get_mut().unwrap_or_else(|p| p.into_inner()));
        for frame in spare {
            self.mapping.free_local(frame);
        }
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
    /// Frames lost between the previous frame handed out and this one.
    lost_before: u64,
    /// A private copy (the slot was released when it was made).
    copy: Option<LocalFrame>,
    /// Read with the slot's other fields (D29).
    pub(super) props: Option<FrameProps>,
    /// Likewise (D30).
    pub(super) side_data: Vec<SideData>,
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
    pub(crate) fn new(
        ring: Arc<Ring>,
        slot: usize,
        lost_before: u64,
        seq: u64,
        pts_ns: i64,
        publish_mono_ns: u64,
        copy: Option<LocalFrame>,
    ) -> FrameLease {
        if copy.is_none() {
            ring.held_here[slot].fetch_add(1, Ordering::Relaxed);
        }
        FrameLease {
            ring,
            seq,
            slot,
            pts_ns,
            publish_mono_ns,
            lost_before,
            copy,
            props: None,
            side_data: Vec::new(),
            released: false,
        }
    }

    /// What the publisher said about this frame besides its pixels (colour
    /// description, aspect ratio, field order, key frame, duration); None
    /// when it said nothing (D29).
    pub fn props(&self) -> Option<FrameProps> {
        self.props
    }

    /// The frame's side data (HDR metadata, captions, SEI, timecodes), as the
    /// publisher attached it (D30). Empty when it attached none, or
    /// when what it wrote was malformed (counted in
    /// [`crate::SubscriberStats::side_data_rejected`]).
    pub fn side_data(&self) -> &[SideData] {
        &self.side_data
    }

    /// Frames published after the previous frame this subscriber handed out
    /// (or after it joined) that it never handed out: lapped by the
    /// publisher, skipped (LATEST), or overwritten while being copied.
    pub fn lost_before(&self) -> u64 {
        self.lost_before
    }

    /// Whether the frame is a private copy (its slot was released at once;
    /// D25) rather than the shared slot itself.
    pub fn is_copy(&self) -> bool {
        self.copy.is_some()
    }

    /// The frame's seq (1 for the publisher's first frame).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The ring slot holding it (for a copy: the slot it was copied from).
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
            ptr: match &self.copy {
                Some(copy) => copy.plane(&self.ring.layout, index),
                None => self.ring.mapping.plane(self.slot, index),
            },
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
                // was opened) and a private copy the whole frame; both live
                // as long as this lease (the Ring it keeps, its own copy).
                // The slot is mapped read-only here and the publisher is its
                // only writer (bytes may change under DROP_OLDEST, which
                // is_intact() detects; any byte value is a valid u8); a
                // copy is written only before it is handed out.
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
        match &self.copy {
            Some(copy) => self
                .ring
                .mapping
                .read_local_plane(copy, index, &self.ring.layout, dst),
            None => self
                .ring
                .mapping
                .read_plane(self.slot, index, &self.ring.layout, dst),
        }
    }

    /// Whether the slot still holds this frame (false once the publisher
    /// started to overwrite it).
    pub fn is_intact(&self) -> bool {
        self.copy.is_some() || self.ring.header.seq_after_read(self.slot) == self.seq
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
        if let Some(mut copy) = self.copy.take() {
            let recycled = self.ring.mapping.recycle(&mut copy);
            match recycled {
                Ok(()) => self.ring.give_back(copy),
                Err(_) => self.ring.mapping.free_local(copy),
            }
            return recycled;
        }
        self.ring.held_here[self.slot].fetch_sub(1, Ordering::Relaxed);
        if self.ring.ack(self.slot, self.seq) {
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
