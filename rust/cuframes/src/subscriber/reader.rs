//! Reading frames from the ring: the fast path, the eventfd sleep, the
//! control socket, and the frames lost on the way.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags};

use super::lease::{FrameLease, Ring};
use super::{CopyMode, SubscriberMode, SubscriberStats};
use crate::channel::{Channel, poll_fds};
use crate::error::{Error, ErrorKind, Result};
use crate::memory::LocalFrame;
use crate::platform::clock;
use crate::props::FrameProps;
use crate::shm::header::StreamInfo;
use crate::side_data;
use crate::wire::layout::SEQ_INVALID;
use crate::wire::message::Message;

/// The reading side of a subscription: the ring, the control socket, the
/// wake-up eventfd and what was read so far.
#[derive(Debug)]
pub(super) struct Reader {
    pub(super) key: String,
    pub(super) ring: Arc<Ring>,
    pub(super) info: StreamInfo,
    pub(super) chan: Channel,
    pub(super) wake: OwnedFd,
    pub(super) mode: SubscriberMode,
    pub(super) initial_seq: u64,
    pub(super) next_seq: u64,
    pub(super) received: u64,
    pub(super) dropped: u64,
    pub(super) copied: u64,
    pub(super) torn: u64,
    pub(super) side_data_rejected: u64,
    /// That private copies could not be had was said (once).
    pub(super) copies_refused_told: bool,
    /// `dropped` when the last frame was handed out.
    pub(super) dropped_before_last: u64,
    pub(super) copy: CopyMode,
    pub(super) strict: bool,
    pub(super) disconnected: Option<Error>,
    pub(super) shut_down: bool,
    /// The control socket was seen readable: read it before the next frame.
    pub(super) control_pending: bool,
    /// CLOCK_MONOTONIC ns after which the socket is read even when frames
    /// keep coming (and poll is never reached).
    pub(super) control_due_ns: u64,
}

/// Under STRICT_WAIT with `CopyMode::Auto`: how many slots subscribers may
/// hold, all together, before further frames become copies. Half the ring
/// (rounded down, at least one slot) stays free, so the publisher runs ahead of the consumers'
/// round trip instead of in lockstep with it (a consumer holding 8 frames
/// on a ring of 8 halved the throughput of 16 streams on the H200, D25).
fn leasable(ring_size: usize) -> usize {
    ring_size - (ring_size / 2).max(1)
}

/// While frames keep coming, the control socket is still read this often
/// (a SHUTDOWN or ERROR is noticed at most this late).
const CONTROL_CHECK_NS: u64 = 1_000_000;

impl Reader {
    /// Counters.
    pub(super) fn stats(&self) -> SubscriberStats {
        SubscriberStats {
            received: self.received,
            dropped: self.dropped,
            overwritten: self.ring.overwritten.load(Ordering::Relaxed),
            copied: self.copied,
            torn: self.torn,
            side_data_rejected: self.side_data_rejected,
        }
    }

    /// The next frame, waiting up to `timeout` (None = forever).
    ///
    /// `Timeout` when nothing came; `Disconnected` once the publisher shut
    /// down, died, or dropped us (and on every call after). After a SHUTDOWN
    /// the frames it published that are still in the ring come first.
    pub(super) fn next(&mut self, timeout: Option<Duration>) -> Result<FrameLease> {
        let deadline = timeout.map(|t| Instant::now() + t);
        if let Some(disconnected) = self.disconnected.clone() {
            return self.drain(disconnected);
        }
        loop {
            // Fast path, a frame is waiting: no system call but the ones
            // the frame needs. The socket is read when poll saw it readable,
            // before sleeping, and every CONTROL_CHECK_NS while frames flow.
            if (self.control_pending || clock::monotonic_ns() >= self.control_due_ns)
                && let Err(disconnected) = self.poll_control()
            {
                return self.drain(disconnected);
            }
            if let Some(lease) = self.take()? {
                self.show_dropped();
                return Ok(lease);
            }
            // About to sleep: drain the wake-up counter, then look again, so
            // a publish after the look leaves it readable for the poll below.
            // The socket is not read here: poll watches it, and a message
            // that came meanwhile wakes it at once (one system call a frame
            // fewer for a subscriber that sleeps between frames).
            let mut counter = [0u8; 8];
            let _ = nix::unistd::read(&self.wake, &mut counter);
            let taken = self.take()?;
            self.show_dropped();
            if let Some(lease) = taken {
                return Ok(lease);
            }
            let left = match deadline {
                None => None,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(super::no_frame(&self.key, timeout));
                    }
                    Some(left)
                }
            };
            let mut fds = [
                PollFd::new(self.wake.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.chan.socket().as_fd(), PollFlags::POLLIN),
            ];
            poll_fds(&mut fds, left)?;
            self.control_pending = fds[1].revents().is_some_and(|r| !r.is_empty());
        }
    }

    /// Once disconnected: a publisher that shut down (SHUTDOWN) left the
    /// frames it published complete in the ring, and a consumer slower than
    /// it would lose them silently, so they are delivered first (a ring of
    /// 16 holds half a second of video). After a crash or a drop, what is in
    /// the ring is not trusted: the disconnection is returned at once.
    fn drain(&mut self, disconnected: Error) -> Result<FrameLease> {
        if self.shut_down
            && let Some(lease) = self.take()?
        {
            self.show_dropped();
            return Ok(lease);
        }
        Err(disconnected)
    }

    /// Handles what the publisher sent on the socket; remembers and returns
    /// a disconnection.
    fn poll_control(&mut self) -> Result<()> {
        if let Some(e) = &self.disconnected {
            return Err(e.clone());
        }
        self.control_pending = false;
        self.control_due_ns = clock::monotonic_ns() + CONTROL_CHECK_NS;
        if self.ring.header.lost_pages() {
            let lost = Error::corrupt(format!(
                "shared memory of '{}' shrank under this subscriber (a process that may write it truncated it): it can no longer be read",
                self.key
            ));
            self.disconnected = Some(lost.clone());
            return Err(lost);
        }
        loop {
            let result = self.chan.try_recv();
            let err = match result {
                Ok(None) => return Ok(()),
                Ok(Some(r)) => match r.msg {
                    Message::Ping { nonce } => {
                        let _ = self.chan.send(&Message::Pong { nonce });
                        continue;
                    }
                    Message::Pong { .. } | Message::EventFd { .. } => continue,
                    Message::Shutdown { reason } => {
                        self.shut_down = true;
                        Error::new(
                            ErrorKind::Disconnected,
                            format!(
                                "disconnected: publisher of '{}' shut down (reason {reason})",
                                self.key
                            ),
                        )
                    }
                    Message::Error { code, message } => Error::new(
                        ErrorKind::Disconnected,
                        format!(
                            "disconnected: publisher of '{}' reported {}: {message}",
                            self.key,
                            ErrorKind::from_code(code).describe()
                        ),
                    ),
                    other => Error::new(
                        ErrorKind::Disconnected,
                        format!(
                            "disconnected: publisher of '{}' sent unexpected {}",
                            self.key,
                            other.name()
                        ),
                    ),
                },
                Err(e) if e.kind() == ErrorKind::Disconnected => Error::new(
                    ErrorKind::Disconnected,
                    format!(
                        "disconnected: publisher of '{}' went away (socket closed)",
                        self.key
                    ),
                ),
                Err(e) => Error::new(
                    ErrorKind::Disconnected,
                    format!("disconnected from '{}': {e}", self.key),
                ),
            };
            self.disconnected = Some(err.clone());
            return Err(err);
        }
    }

    /// The next deliverable frame, if any; counts what was lost on the way.
    fn take(&mut self) -> Result<Option<FrameLease>> {
        let ring = self.ring.clone();
        let header = &ring.header;
        let global = header.published_seq();
        if global == SEQ_INVALID || global < self.next_seq {
            return Ok(None);
        }
        // Any subscriber can write global_seq: where we would skip or count
        // frames lost on its word, believe it no further than the newest
        // frame actually in the ring (D14), or a forged value would
        // send us past every frame the publisher will ever publish.
        let bounded = || global.min(header.newest_in_ring(ring.ring_size).unwrap_or(0));
        let skip_to = (self.mode == SubscriberMode::Latest && global > self.next_seq).then(bounded);
        if let Some(global) = skip_to.filter(|&newest| newest > self.next_seq) {
            self.skip_to_newest(&ring, global);
        }
        while self.next_seq <= global {
            let seq = self.next_seq;
            let Some(slot) = header.find_slot(seq, ring.ring_size) else {
                let newest = bounded();
                if newest < seq {
                    return Ok(None); // not published yet: global_seq was forged
                }
                self.lost(&ring, seq, newest);
                continue;
            };
            self.next_seq += 1;
            // Taken from here on, until ACKed: the publisher and other
            // subscribers count the slot as held (D25).
            ring.note_taken(seq);
            let words = FrameWords::read(&ring, slot);
            if header.seq_after_read(slot) != seq {
                self.dropped += 1;
                continue;
            }
            let copy = match self.read_or_copy(&ring, slot, seq)? {
                Taken::InSlot => None,
                Taken::Copied(buffer) => Some(buffer),
                Taken::Torn => continue,
            };
            return Ok(Some(self.hand_out(&ring, slot, seq, words, copy)));
        }
        Ok(None)
    }

    /// LATEST mode: on to `newest`, the frames before it dropped.
    fn skip_to_newest(&mut self, ring: &Ring, newest: u64) {
        // Skipped frames are ACKed: under STRICT_WAIT no one waits for them.
        for slot in 0..ring.ring_size {
            let seq = ring.header.slot_seq(slot);
            if (self.next_seq..newest).contains(&seq) {
                ring.ack(slot, seq);
            }
        }
        self.dropped += newest - self.next_seq;
        self.next_seq = newest;
    }

    /// Frame `seq`, published (`newest` is the newest in the ring), is in no
    /// slot: lost, and the frames up to the next one still there.
    fn lost(&mut self, ring: &Ring, seq: u64, newest: u64) {
        // Overwritten, or being rewritten: lost. Go on from the
        // oldest frame still in the ring.
        let next = ring
            .header
            .oldest_from(seq + 1, ring.ring_size)
            .map_or(newest + 1, |oldest| oldest.min(newest + 1));
        self.dropped += next - seq;
        self.next_seq = next;
    }

    /// Frame `seq` of `slot`, taken: read where it is (the slot prepared
    /// for reading), or copied into a private buffer and ACKed at once (as
    /// `self.copy` says; a copy the publisher overwrote meanwhile is lost).
    fn read_or_copy(&mut self, ring: &Ring, slot: usize, seq: u64) -> Result<Taken> {
        let copy = match self.copy {
            CopyMode::Never => None,
            CopyMode::Always => Some(()),
            CopyMode::Auto => {
                (!self.strict || ring.held_slots(slot) > leasable(ring.ring_size)).then_some(())
            }
        };
        let buffer = match copy {
            None => None,
            Some(()) => self.private_buffer(ring)?,
        };
        match buffer {
            None => {
                ring.mapping.prepare(slot, seq)?;
                Ok(Taken::InSlot)
            }
            Some(mut buffer) => {
                let copied = ring.mapping.copy_out(slot, seq, &ring.layout, &mut buffer);
                let intact = copied.is_ok() && ring.header.seq_after_read(slot) == seq;
                ring.ack(slot, seq);
                if let Err(e) = copied {
                    ring.mapping.free_local(buffer);
                    return Err(e);
                }
                if !intact {
                    ring.give_back(buffer);
                    self.torn += 1;
                    self.dropped += 1;
                    return Ok(Taken::Torn);
                }
                self.copied += 1;
                Ok(Taken::Copied(buffer))
            }
        }
    }

    /// Frame `seq` of `slot` handed out: its lease, with what was lost
    /// before it, its properties and its side data.
    fn hand_out(
        &mut self,
        ring: &Arc<Ring>,
        slot: usize,
        seq: u64,
        words: FrameWords,
        copy: Option<LocalFrame>,
    ) -> FrameLease {
        self.received += 1;
        let lost_before = self.dropped - self.dropped_before_last;
        self.dropped_before_last = self.dropped;
        crate::testhook::abort_at("sub-holding-lease");
        let mut lease = FrameLease::new(
            ring.clone(),
            slot,
            lost_before,
            seq,
            words.pts,
            words.published,
            copy,
        );
        lease.props = words.props;
        match words.side_bytes.as_deref().map(side_data::decode) {
            Some(Some(entries)) => lease.side_data = entries,
            _ => self.side_data_rejected += 1,
        }
        lease
    }

    /// A private buffer for a copy; with `copy=auto`, None when there is no
    /// memory for one: the frame is then handed out in its slot (zero-copy,
    /// as without copies), and that is said once.
    fn private_buffer(&mut self, ring: &Ring) -> Result<Option<LocalFrame>> {
        match ring.local_buffer() {
            Ok(buffer) => Ok(Some(buffer)),
            Err(e) if self.copy == CopyMode::Auto && e.kind() == ErrorKind::Exhausted => {
                if !self.copies_refused_told {
                    self.copies_refused_told = true;
                    crate::log::warning!(
                        "subscriber of '{}': no memory for a private copy ({e}); frames stay in the publisher's slots (zero-copy) until there is",
                        self.key
                    );
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Extension: our counts so far, where the tools read them.
    fn show_dropped(&self) {
        self.ring.report(self.received, self.dropped, self.copied);
    }
}

/// What the header says of a frame besides its bytes, read after the
/// frame is taken and before the check that its slot still holds it.
struct FrameWords {
    pts: i64,
    published: u64,
    props: Option<FrameProps>,
    side_bytes: Option<Vec<u8>>,
}

impl FrameWords {
    fn read(ring: &Ring, slot: usize) -> FrameWords {
        let header = &ring.header;
        let (pts, published) = header.pts_and_publish_time(slot);
        let props = FrameProps::from_words(header.props_words(slot));
        let side_len = header.side_data_len(slot);
        let side_bytes = match (&ring.side, side_len) {
            (_, 0) | (None, _) => Some(Vec::new()),
            (Some(area), len) => area.read(slot, len),
        };
        FrameWords {
            pts,
            published,
            props,
            side_bytes,
        }
    }
}

/// A frame taken: read in its slot, copied out, or torn while copied.
enum Taken {
    InSlot,
    Copied(LocalFrame),
    Torn,
}

impl Drop for Reader {
    fn drop(&mut self) {
        if self.disconnected.is_none() {
            let _ = self.chan.send(&Message::Unsubscribe { reason: 0 });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::leasable;

    #[test]
    fn half_the_ring_and_at_least_one_slot_stay_free_for_the_publisher() {
        assert_eq!(leasable(1), 0);
        assert_eq!(leasable(2), 1);
        assert_eq!(leasable(3), 2);
        assert_eq!(leasable(4), 2);
        assert_eq!(leasable(8), 4);
        assert_eq!(leasable(9), 5);
    }
}
