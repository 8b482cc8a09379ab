//! The publisher: owns a key, the shared headers, the ring's slots and the
//! control thread; publishes frames per spec §5.
//!
//! `config` says how one is configured, `create` makes one, `waits` picks
//! the slot for the next frame and waits for ACKs, `headers` keeps the two
//! copies of the shared header, `registry` the subscribers, `control` the
//! control socket's thread; this file is the publishing API itself.

mod config;
mod control;
mod create;
mod headers;
mod registry;
mod waits;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nix::sys::eventfd::EventFd;

pub use config::{Policy, PublisherConfig, PublisherStats, V1Peers};
pub use registry::SubscriberInfo;

use self::control::{ControlStats, ControlThread};
use self::registry::Registry;
use crate::error::{Error, ErrorKind, Result};
use crate::format::FrameLayout;
use crate::memory::{DevicePlane, HostPlane, MemoryKind, PlanePtr, SlotPool};
use crate::props::FrameProps;
use crate::resources::{KeyClaim, KeyPaths};
use crate::shm::header::StreamInfo;
use crate::shm::side_area::SideArea;
use crate::side_data::{self, SIDE_DATA_CAPACITY};
use crate::wire::layout::{MAX_RING_SIZE, MAX_SUBSCRIBER_SLOTS, OWNERSHIP_EXTERNAL};

/// Row alignment of slots (CUDA's texture pitch alignment; also good for SIMD).
pub const PITCH_ALIGNMENT: usize = 256;

/// Where the next frame goes (see [`Publisher::acquire_slot`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotTarget {
    /// Ring slot index.
    pub index: usize,
    /// Start of each plane (pitches: [`Publisher::layout`]).
    pub planes: Vec<PlanePtr>,
}

/// Publishes frames under a key. Dropping it sends SHUTDOWN to every
/// subscriber and removes the key's socket and shared memory.
#[derive(Debug)]
pub struct Publisher {
    key: String,
    layout: FrameLayout,
    ring_size: usize,
    policy: Policy,
    ack_timeout: Duration,
    startup_timeout: Duration,
    /// The seq each slot holds (0: none yet), from our own bookkeeping.
    slot_seqs: [u64; MAX_RING_SIZE],
    pool: Box<dyn SlotPool>,
    registry: Arc<Registry>,
    control: ControlThread,
    control_stats: Arc<ControlStats>,
    next_seq: u64,
    /// Rung by subscribers with an ACK area after an ACK while we wait (D33).
    doorbell: EventFd,
    /// CLOCK_MONOTONIC ns after which a publish copies subscribers' reports.
    next_mirror_ns: u64,
    /// A slot handed out by `acquire_slot`, not yet committed.
    acquired: Option<usize>,
    /// The stream as subscribers see it (D18: EXTERNAL ownership here).
    info: StreamInfo,
    /// Properties given to every frame from now on (D29).
    props: Option<FrameProps>,
    /// The side-data area (D30) and the next frame's side data, encoded.
    side_area: SideArea,
    pending_side_data: Vec<u8>,
    stats: PublisherStats,
    claim: KeyClaim,
}

impl Publisher {
    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The stream as its subscribers see it: geometry, ring size, policy,
    /// ownership, memory and frame rate, as written in the shared header.
    pub fn info(&self) -> &StreamInfo {
        &self.info
    }

    /// Frame geometry (slot pitches included).
    pub fn layout(&self) -> &FrameLayout {
        &self.layout
    }

    /// CUDA memory: how the slots are shared (D27); None for host memory.
    pub fn cuda_share(&self) -> Option<crate::memory::CudaShare> {
        self.pool.cuda_share()
    }

    /// The properties every frame published from now on carries (colour
    /// description, aspect ratio, field order, key frame, duration: what a
    /// subscriber's encoder reads); None: none (D29).
    pub fn set_frame_props(&mut self, props: Option<FrameProps>) {
        self.props = props;
    }

    /// Attaches side data (HDR metadata, captions, SEI, timecodes: see
    /// [`crate::side_data_kind`]) to the next frame published; it is cleared
    /// once that frame is out (D30). A frame carries at most
    /// [`crate::SIDE_DATA_CAPACITY`] bytes of it (8 per entry included);
    /// what would not fit is refused with INVALID_ARGUMENT, the rest kept.
    pub fn add_side_data(&mut self, kind: u16, bytes: &[u8]) -> Result<()> {
        side_data::append(&mut self.pending_side_data, kind, bytes, SIDE_DATA_CAPACITY)
    }

    /// Drops the side data added for the next frame.
    pub fn clear_side_data(&mut self) {
        self.pending_side_data.clear();
    }

    /// Where the slots live.
    pub fn memory(&self) -> MemoryKind {
        self.pool.kind()
    }

    /// The ring size.
    pub fn ring_size(&self) -> usize {
        self.ring_size
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Paths of the key's resources.
    pub fn paths(&self) -> &KeyPaths {
        self.claim.paths()
    }

    /// Counters.
    pub fn stats(&self) -> PublisherStats {
        PublisherStats {
            rejected_connections: self.control_stats.rejected.load(Ordering::Relaxed),
            kernel_copies: self.pool.kernel_copies(),
            ..self.stats
        }
    }

    /// Seq the next publish will get (published seqs are 1, 2, 3, …).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Number of active subscribers.
    pub fn subscriber_count(&self) -> usize {
        self.registry.active().count_ones() as usize
    }

    /// The active subscribers.
    pub fn subscribers(&self) -> Vec<SubscriberInfo> {
        self.registry.subscribers()
    }

    /// Waits until at least `count` subscribers are active.
    pub fn wait_for_subscribers(&self, count: usize, timeout: Duration) -> Result<()> {
        if count > MAX_SUBSCRIBER_SLOTS - 1 {
            return Err(Error::invalid(format!(
                "cannot wait for {count} subscribers (at most 31)"
            )));
        }
        let deadline = Instant::now() + timeout;
        while self.subscriber_count() < count {
            if Instant::now() >= deadline {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "'{}': {} of {count} subscribers after {} ms",
                        self.key,
                        self.subscriber_count(),
                        timeout.as_millis()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Publishes a frame copied from host planes; returns its seq.
    /// Not under EXTERNAL ownership (see [`Publisher::acquire_slot`]).
    pub fn publish(&mut self, planes: &[HostPlane<'_>], pts_ns: i64) -> Result<u64> {
        self.refuse_copy_into_external()?;
        let slot = self.begin();
        self.pool.write_host(slot, self.next_seq, &self.layout, planes)?;
        Ok(self.commit(slot, pts_ns))
    }

    /// Publishes a frame copied from CUDA device planes (in the caller's
    /// context, ordered on its stream); returns its seq. Host memory
    /// downloads the frame first. Not under EXTERNAL ownership (see
    /// [`Publisher::acquire_slot`]).
    pub fn publish_device(&mut self, planes: &[DevicePlane], pts_ns: i64) -> Result<u64> {
        self.refuse_copy_into_external()?;
        let slot = self.begin();
        self.pool
            .write_device(slot, self.next_seq, &self.layout, planes)?;
        Ok(self.commit(slot, pts_ns))
    }

    /// D18: the library never copies into the caller's buffers; under
    /// EXTERNAL ownership frames are written by the caller and published
    /// with `acquire_slot` / `commit_slot`. Checked before a slot is picked,
    /// so a refused call changes nothing.
    fn refuse_copy_into_external(&self) -> Result<()> {
        if self.info.ownership_mode == OWNERSHIP_EXTERNAL {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "'{}' publishes the caller's own buffers (EXTERNAL ownership), which the library never copies into: write the frame into the slot from acquire_slot and call commit_slot",
                    self.key
                ),
            ));
        }
        Ok(())
    }

    /// Zero-copy publish, step 1: the slot the next frame goes to (after the
    /// STRICT_WAIT wait), with the address of each plane — device pointers
    /// for CUDA memory (the caller's own buffers under EXTERNAL ownership),
    /// host pointers for host memory. Write the frame there, then call
    /// [`Publisher::commit_slot`].
    pub fn acquire_slot(&mut self) -> Result<SlotTarget> {
        if let Some(index) = self.acquired {
            return Err(Error::invalid(format!(
                "slot {index} was acquired and not committed yet"
            )));
        }
        let index = self.begin();
        self.acquired = Some(index);
        let planes = (0..self.layout.planes().len())
            .map(|p| self.pool.slot_plane(index, &self.layout, p))
            .collect();
        Ok(SlotTarget { index, planes })
    }

    /// Zero-copy publish, step 2: publishes what was written into the slot
    /// from [`Publisher::acquire_slot`] (CUDA: work queued on the caller's
    /// stream before this call is ordered before every subscriber's read).
    pub fn commit_slot(&mut self, pts_ns: i64) -> Result<u64> {
        let index = self
            .acquired
            .take()
            .ok_or_else(|| Error::invalid("commit_slot without acquire_slot"))?;
        self.pool.written_in_place(index, self.next_seq)?;
        Ok(self.commit(index, pts_ns))
    }

    /// Publishes a frame written in place: `fill` gets the slot's planes
    /// (each `pitch × rows` bytes, see [`Publisher::layout`]). Host memory
    /// only; returns the seq.
    pub fn publish_with(&mut self, pts_ns: i64, fill: impl FnOnce(&mut [&mut [u8]])) -> Result<u64> {
        if self.pool.kind() != MemoryKind::Host {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "publish_with needs host memory; use publish() for other memory",
            ));
        }
        let slot = self.begin();
        let layout = self.layout.clone();
        let mut planes = self
            .pool
            .planes_mut(slot, &layout)
            .expect("host memory is host-addressable");
        fill(&mut planes);
        Ok(self.commit(slot, pts_ns))
    }

    /// Picks the next slot (waiting for one under STRICT_WAIT) and marks
    /// it invalid so readers of its old frame see the overwrite.
    fn begin(&mut self) -> usize {
        let slot = self.next_slot();
        self.registry.headers.mark_writing(slot);
        crate::testhook::abort_at("pub-mid-publish");
        slot
    }

    /// Spec §5 steps 3-5: slot fields, slot seq, global seq (Release), wake-ups.
    fn commit(&mut self, slot: usize, pts_ns: i64) -> u64 {
        let seq = self.next_seq;
        let mut table = self.registry.lock();
        table.required[slot] = self.registry.active();
        self.slot_seqs[slot] = seq;
        let headers = &self.registry.headers;
        if self.policy == Policy::StrictWait {
            self.show_holders(&table);
        }
        let props = self.props.map_or([0; 3], FrameProps::to_words);
        self.side_area.write(slot, &self.pending_side_data);
        let side_len = self.pending_side_data.len() as u64;
        headers.publish_slot(slot, seq, pts_ns, self.layout.size() as u64, props, side_len);
        self.pending_side_data.clear();
        self.registry.set_published(seq);
        // What subscribers report of themselves, for the tools: at most
        // once a millisecond (and by the control thread between publishes).
        let now = crate::platform::clock::monotonic_ns();
        if now >= self.next_mirror_ns {
            self.registry.mirror_reports_locked(&table);
            self.next_mirror_ns = now + 1_000_000;
        }
        for sub in table.subs.iter().flatten() {
            let _ = sub.wake.write(1);
        }
        drop(table);
        self.next_seq += 1;
        self.stats.published += 1;
        seq
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.registry.headers.mark_shutdown();
        self.control.stop();
        // `claim` (dropped after this) unlinks socket, shared header and lock.
    }
}
