//! The ring protocol over the shared header: which slot a frame goes to, the
//! seqlock that detects overwrites, ACKs, holds, and the ACK futex. The
//! memory orderings of the ring live here; the publisher and the subscriber
//! call these and never touch the slot words themselves.
//!
//! Writer (publisher), per frame (spec §5, D11, D22):
//! 1. [`choose_slot`] picks a slot no subscriber still needs;
//! 2. [`ShmHeader::mark_writing`]: `slot.seq = SEQ_INVALID`, Release fence;
//! 3. the frame is written;
//! 4. [`ShmHeader::publish_slot`]: slot fields, `slot.seq = s` (Release),
//!    `global_seq = s` (Release).
//!
//! Reader (subscriber): `global_seq` (Acquire), [`ShmHeader::find_slot`]
//! (`slot.seq == s`, Acquire), read, [`ShmHeader::seq_after_read`] (Acquire
//! fence, then the load): unchanged means the read was intact. Releasing a
//! frame is [`ShmHeader::ack`], which also wakes a publisher that sleeps on
//! the ACK futex (D24).

use std::sync::atomic::{Ordering, fence};
use std::time::Duration;

use super::futex;
use super::header::ShmHeader;
use crate::platform::clock;
use crate::wire::layout::{FIRST_SUBSCRIBER_BIT, LAST_SUBSCRIBER_BIT, SEQ_INVALID, offsets};

/// Longest single futex sleep of a waiting publisher: subscribers of older
/// versions ACK without waking it, so it looks again at least this often.
const MAX_FUTEX_SLEEP: Duration = Duration::from_millis(2);

impl ShmHeader {
    // ------------------------------------------------------------- writer

    /// Seqlock writer step 1: readers of the slot's old frame will see it
    /// change.
    pub(crate) fn mark_writing(&self, slot: usize) {
        self.slot_field(slot, offsets::SLOT_SEQ)
            .store(SEQ_INVALID, Ordering::Relaxed);
        fence(Ordering::Release);
    }

    /// Seqlock writer step 2 (spec §5 steps 3-4): the slot's fields, its seq
    /// and `global_seq`, the last two with Release.
    pub(crate) fn publish_slot(
        &self,
        slot: usize,
        seq: u64,
        pts_ns: i64,
        written: u64,
        props: [u64; 3],
        side_data_len: u64,
    ) {
        self.slot_field(slot, offsets::SLOT_PTS)
            .store(pts_ns as u64, Ordering::Relaxed);
        self.slot_field(slot, offsets::SLOT_SIDE_DATA)
            .store(side_data_len, Ordering::Relaxed);
        for (i, word) in props.into_iter().enumerate() {
            self.slot_field(slot, offsets::SLOT_PROPS + 8 * i)
                .store(word, Ordering::Relaxed);
        }
        self.slot_field(slot, offsets::SLOT_ACK)
            .store(0, Ordering::Relaxed);
        self.slot_field(slot, offsets::SLOT_WRITTEN)
            .store(written, Ordering::Relaxed);
        self.slot_field(slot, offsets::SLOT_PUBLISH_MONO)
            .store(clock::monotonic_ns(), Ordering::Relaxed);
        self.slot_field(slot, offsets::SLOT_SEQ)
            .store(seq, Ordering::Release);
        self.global_seq().store(seq, Ordering::Release);
    }

    /// The subscriber bits that ACKed slot `slot`'s frame.
    pub(crate) fn acked(&self, slot: usize) -> u32 {
        self.slot_field(slot, offsets::SLOT_ACK).load(Ordering::SeqCst) as u32
    }

    /// The newest seq subscriber `bit` says it took (extension; untrusted).
    pub(crate) fn taken_by(&self, bit: usize) -> u64 {
        self.subscriber_field(bit, offsets::SUB_LAST_TAKEN)
            .load(Ordering::SeqCst)
    }

    /// Step 1 of a publisher's sleep: announces it and returns the futex
    /// value to sleep on. The caller re-checks its condition after this and
    /// calls [`ShmHeader::sleep_for_ack`] only when it still must wait.
    pub(crate) fn ack_ticket(&self) -> u32 {
        self.u32_at(offsets::PUBLISHER_WAITING).store(1, Ordering::SeqCst);
        self.u32_at(offsets::ACK_FUTEX).load(Ordering::SeqCst)
    }

    /// Step 2: sleeps until an ACK after `ticket` (or `timeout`, capped so
    /// that ACKs of subscribers that do not wake are seen too).
    pub(crate) fn sleep_for_ack(&self, ticket: u32, timeout: Duration) {
        futex::wait(
            self.u32_at(offsets::ACK_FUTEX),
            ticket,
            timeout.min(MAX_FUTEX_SLEEP),
        );
    }

    /// The publisher stopped waiting: ACKs need not wake it.
    pub(crate) fn stop_waiting_for_acks(&self) {
        self.u32_at(offsets::PUBLISHER_WAITING).store(0, Ordering::SeqCst);
    }

    // ------------------------------------------------------------- reader

    /// The slot holding `seq`, if one does (D22: usually
    /// `seq mod ring_size`, else wherever the publisher put it).
    pub(crate) fn find_slot(&self, seq: u64, ring_size: usize) -> Option<usize> {
        let preferred = (seq % ring_size as u64) as usize;
        std::iter::once(preferred)
            .chain((0..ring_size).filter(|&s| s != preferred))
            .find(|&slot| self.slot_seq(slot) == seq)
    }

    /// The newest frame in the ring, if any: a bound for `global_seq`, which
    /// any subscriber can overwrite (D14).
    pub(crate) fn newest_in_ring(&self, ring_size: usize) -> Option<u64> {
        (0..ring_size)
            .map(|slot| self.slot_seq(slot))
            .filter(|&seq| seq != SEQ_INVALID)
            .max()
    }

    /// The oldest frame still in the ring that is `from` or newer.
    pub(crate) fn oldest_from(&self, from: u64, ring_size: usize) -> Option<u64> {
        (0..ring_size)
            .map(|slot| self.slot_seq(slot))
            .filter(|&seq| seq != SEQ_INVALID && seq >= from)
            .min()
    }

    /// The seq slot `slot` holds now (Acquire), `SEQ_INVALID` while it is
    /// being written.
    pub(crate) fn slot_seq(&self, slot: usize) -> u64 {
        self.slot_field(slot, offsets::SLOT_SEQ).load(Ordering::Acquire)
    }

    /// `global_seq` (Acquire; pairs with the publisher's Release). Any
    /// subscriber can write it: a bound, never a promise (D14).
    pub(crate) fn published_seq(&self) -> u64 {
        self.global_seq().load(Ordering::Acquire)
    }

    /// Slot `slot`'s `pts_ns` and `publish_mono_ns`, read between the seq
    /// and `seq_after_read` like the other fields.
    pub(crate) fn pts_and_publish_time(&self, slot: usize) -> (i64, u64) {
        (
            self.slot_field(slot, offsets::SLOT_PTS).load(Ordering::Relaxed) as i64,
            self.slot_field(slot, offsets::SLOT_PUBLISH_MONO)
                .load(Ordering::Relaxed),
        )
    }

    /// The frame-property words of slot `slot` (D29), read between
    /// the seq and `seq_after_read` like the other fields.
    pub(crate) fn props_words(&self, slot: usize) -> [u64; 3] {
        [0, 1, 2].map(|i| {
            self.slot_field(slot, offsets::SLOT_PROPS + 8 * i)
                .load(Ordering::Relaxed)
        })
    }

    /// Bytes of slot `slot`'s side data (D30; untrusted), read
    /// between the seq and `seq_after_read` like the other fields.
    pub(crate) fn side_data_len(&self, slot: usize) -> u64 {
        self.slot_field(slot, offsets::SLOT_SIDE_DATA)
            .load(Ordering::Relaxed)
    }

    /// The seq now in slot `slot`, read after the frame data (seqlock
    /// reader: Acquire fence, then the load).
    pub(crate) fn seq_after_read(&self, slot: usize) -> u64 {
        fence(Ordering::Acquire);
        self.slot_field(slot, offsets::SLOT_SEQ).load(Ordering::Relaxed)
    }

    /// Tells the publisher (and other subscribers) that subscriber `bit`
    /// took `seq`: from now on it holds the frame until it ACKs it.
    pub(crate) fn note_taken(&self, bit: u32, seq: u64) {
        self.subscriber_field(bit as usize, offsets::SUB_LAST_TAKEN)
            .fetch_max(seq, Ordering::SeqCst);
    }

    /// ACKs `seq` for subscriber `bit` if slot `slot` still holds it (spec
    /// §5 subscriber steps 4-5), and wakes a publisher waiting for ACKs.
    /// True when the frame was still there after everything read from it
    /// (the read was intact).
    pub(crate) fn ack(&self, slot: usize, seq: u64, bit: u32) -> bool {
        self.ack_with(slot, seq, bit, || {})
    }

    /// [`ShmHeader::ack`], with `between` run after the check and before the
    /// bit is set (tests put the publisher's rewrite there).
    ///
    /// The check (`slot.seq`) and the set (`ack_bitmap`) are two words, so
    /// no single atomic covers both: the publisher can rewrite the slot
    /// between them (DROP_OLDEST; or STRICT_WAIT once it gave up on this
    /// subscriber), and its `ack_bitmap = 0` for the new frame may come
    /// before our `fetch_or`, which would then ACK a frame this bit never
    /// read (under STRICT_WAIT, when the bit was handed to a new subscriber,
    /// a frame that subscriber loses). So after the `fetch_or` the seq is
    /// loaded again (SeqCst): the publisher stores `seq = SEQ_INVALID`
    /// before its Release fence and the bitmap reset after it, so a
    /// `fetch_or` that came after the reset sees that store (the fence
    /// synchronises with the RMW) and the load cannot return `seq` any more.
    /// Still `seq`: the bit landed on this frame's word. Changed: the bit
    /// landed either on the old word (cleared by the reset since) or on the
    /// new frame's, and it is taken back (`fetch_and`) when this `fetch_or`
    /// set it. What is left is a window of a few instructions, between the
    /// `fetch_or` and the `fetch_and`, in which the publisher could read the
    /// stray bit, or another holder of the same bit could ACK the new frame
    /// and lose that ACK (the publisher then waits for it again); the
    /// unguarded version left the stray bit for the whole life of the frame.
    /// The return value stays the check's: the frame was intact after the
    /// read whichever word the bit hit.
    fn ack_with(&self, slot: usize, seq: u64, bit: u32, between: impl FnOnce()) -> bool {
        if self.seq_after_read(slot) != seq {
            return false;
        }
        between();
        let mask = 1u64 << bit;
        let word = self.slot_field(slot, offsets::SLOT_ACK);
        let before = word.fetch_or(mask, Ordering::SeqCst);
        if self.slot_field(slot, offsets::SLOT_SEQ).load(Ordering::SeqCst) != seq && before & mask == 0 {
            word.fetch_and(!mask, Ordering::SeqCst);
        }
        let index = bit as usize;
        self.subscriber_field(index, offsets::SUB_LAST_SEEN)
            .fetch_max(seq, Ordering::Relaxed);
        self.subscriber_field(index, offsets::SUB_LAST_ACK)
            .store(clock::realtime_ns() as u64, Ordering::Relaxed);
        self.u32_at(offsets::ACK_FUTEX).fetch_add(1, Ordering::SeqCst);
        if self.u32_at(offsets::PUBLISHER_WAITING).load(Ordering::SeqCst) != 0 {
            futex::wake_all(self.u32_at(offsets::ACK_FUTEX));
        }
        true
    }

    /// Extension (for `cuframes top`): the frames subscriber `bit` lost so
    /// far, in its own subscriber slot.
    pub(crate) fn show_dropped(&self, bit: u32, lost: u64) {
        self.subscriber_field(bit as usize, offsets::SUB_DROPPED)
            .store(lost, Ordering::Relaxed);
    }

    /// How many live slots hold a frame that some active subscriber took and
    /// has not released (D25). Read from subscriber-written words:
    /// a lie only changes how often the liar's neighbours copy.
    pub(crate) fn held_slots(&self, ring_size: usize) -> usize {
        let active = self.subscriber_bitmap().load(Ordering::SeqCst) as u32;
        let bits = || (FIRST_SUBSCRIBER_BIT..=LAST_SUBSCRIBER_BIT).filter(|bit| active & (1 << bit) != 0);
        // Read once per call, not once per slot (no allocation: this runs per frame).
        let mut taken = [0u64; 32];
        for bit in bits() {
            taken[bit as usize] = self.taken_by(bit as usize);
        }
        (0..ring_size)
            .filter(|&slot| {
                let seq = self.slot_field(slot, offsets::SLOT_SEQ).load(Ordering::SeqCst);
                if seq == SEQ_INVALID {
                    return false;
                }
                let acked = self.acked(slot);
                bits().any(|bit| taken[bit as usize] >= seq && acked & (1 << bit) == 0)
            })
            .count()
    }
}

/// What the publisher knows of one slot when it picks where the next frame
/// goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotState {
    /// The seq it holds (0: never written).
    pub seq: u64,
    /// Subscriber bits that must still ACK it, minus those given up on.
    pub owing: u32,
    /// Subscribers that say they took it and hold it (only asked for
    /// drop-oldest).
    pub holders: u32,
}

/// D22: the slot for the next frame. `preferred` (seq mod ring
/// size) when nobody owes it; else the oldest slot nobody owes. Under
/// STRICT_WAIT nothing else will do (None: wait); under DROP_OLDEST the
/// oldest slot nobody is holding, else — every slot held — the oldest of
/// those held only by the subscribers that hold the most slots: a holder
/// loses its frames before anyone else loses one, and a subscriber that
/// claims to hold every slot (its own word, D33) cannot make the
/// publisher take a frame from one that holds a few.
pub(crate) fn choose_slot(slots: &[SlotState], preferred: usize, strict: bool) -> Option<usize> {
    let oldest = |ok: &dyn Fn(&SlotState) -> bool| {
        (0..slots.len())
            .filter(|&i| ok(&slots[i]))
            .min_by_key(|&i| slots[i].seq)
    };
    if slots[preferred].owing == 0 {
        return Some(preferred);
    }
    if let Some(free) = oldest(&|s| s.owing == 0) {
        return Some(free);
    }
    if strict {
        return None;
    }
    if let Some(unheld) = oldest(&|s| s.holders == 0) {
        return Some(unheld);
    }
    let mut held = [0usize; 32];
    for s in slots {
        for (bit, count) in held.iter_mut().enumerate() {
            *count += (s.holders >> bit & 1) as usize;
        }
    }
    let most = held.iter().copied().max().unwrap_or(0);
    // Holders of fewer slots than the greediest, per slot: the fewer, the better.
    let others = |s: &SlotState| {
        (0..32)
            .filter(|&b| s.holders >> b & 1 == 1 && held[b] < most)
            .count()
    };
    (0..slots.len()).min_by_key(|&i| (others(&slots[i]), slots[i].seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::wire::layout::SharedHeader;

    /// A header of our own, unlinked on drop.
    struct Scratch(ShmHeader, String);

    impl Scratch {
        fn new(what: &str) -> Scratch {
            let name = format!("/cuframes-test-ring-{what}-{}", std::process::id());
            let _ = ShmHeader::unlink(&name);
            let header = ShmHeader::create(&name, &SharedHeader::zeroed(), None, false).expect("create");
            Scratch(header, name)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = ShmHeader::unlink(&self.1);
        }
    }

    /// The publisher's two steps, as `Publisher::publish` runs them.
    fn publish(header: &ShmHeader, slot: usize, seq: u64) {
        header.mark_writing(slot);
        header.publish_slot(slot, seq, 0, 0, [0; 3], 0);
    }

    #[test]
    fn an_ack_lands_on_the_frame_it_was_checked_against() {
        let Scratch(header, _name) = &Scratch::new("ack");
        publish(header, 0, 1);
        assert!(header.ack(0, 1, 3));
        assert_eq!(header.acked(0), 1 << 3);
        assert!(header.ack(0, 1, 3), "twice changes nothing");
        assert_eq!(header.acked(0), 1 << 3);
        publish(header, 0, 2);
        assert!(!header.ack(0, 1, 5), "gone before the check: no ACK");
        assert_eq!(header.acked(0), 0);
    }

    #[test]
    fn a_rewrite_between_the_check_and_the_set_does_not_ack_the_new_frame() {
        // Subscriber bit 3 released seq 1 in slot 0; the publisher (drop
        // oldest, or strict wait after giving up on bit 3) rewrote the slot
        // with seq 5 after the check. A check-then-fetch_or leaves bit 3 on
        // seq 5, which bit 3 never read.
        let Scratch(header, _name) = &Scratch::new("race");
        publish(header, 0, 1);
        assert!(
            header.ack_with(0, 1, 3, || publish(header, 0, 5)),
            "the read was intact"
        );
        assert_eq!(header.acked(0) & (1 << 3), 0, "seq 5 is not ACKed by bit 3");
        // Another subscriber's ACK of the new frame is left alone.
        publish(header, 0, 6);
        assert!(header.ack_with(0, 1 + 5, 4, || {}));
        assert!(header.ack_with(0, 6, 3, || {
            publish(header, 0, 9);
            assert!(header.ack(0, 9, 4));
        }));
        assert_eq!(
            header.acked(0),
            1 << 4,
            "bit 4's ACK of seq 9 stays, bit 3's is taken back"
        );
    }

    fn state(seq: u64, owing: u32, held: bool) -> SlotState {
        SlotState {
            seq,
            owing,
            holders: if held { owing } else { 0 },
        }
    }

    #[test]
    fn a_subscriber_claiming_every_slot_loses_its_own_frames_first() {
        // Bit 2 claims all four slots; bit 3 holds slot 1 (seq 5) only.
        let claims = |seq, holders| SlotState {
            seq,
            owing: holders,
            holders,
        };
        let slots = [
            claims(6, 1 << 2),
            claims(5, 1 << 2 | 1 << 3),
            claims(7, 1 << 2),
            claims(8, 1 << 2),
        ];
        assert_eq!(
            choose_slot(&slots, 1, false),
            Some(0),
            "the oldest held by bit 2 alone"
        );
        // Both hold everything: the oldest.
        let all = [claims(6, 12), claims(5, 12)];
        assert_eq!(choose_slot(&all, 0, false), Some(1));
    }

    #[test]
    fn the_preferred_slot_when_nobody_owes_it() {
        let slots = [
            state(4, 0, false),
            state(1, 0, false),
            state(2, 2, true),
            state(3, 0, false),
        ];
        assert_eq!(choose_slot(&slots, 1, true), Some(1));
        assert_eq!(choose_slot(&slots, 0, false), Some(0));
    }

    #[test]
    fn a_held_preferred_slot_gives_way_to_the_oldest_free_one() {
        // Slot 1 (seq 5) is held; 3 (seq 4) and 0 (seq 8) are free.
        let slots = [
            state(8, 0, false),
            state(5, 2, true),
            state(6, 2, false),
            state(4, 0, false),
        ];
        assert_eq!(choose_slot(&slots, 1, true), Some(3));
        assert_eq!(choose_slot(&slots, 1, false), Some(3));
    }

    #[test]
    fn strict_wait_waits_when_every_slot_is_owed() {
        let slots = [
            state(4, 2, false),
            state(5, 2, true),
            state(6, 4, false),
            state(7, 2, false),
        ];
        assert_eq!(choose_slot(&slots, 0, true), None);
    }

    #[test]
    fn drop_oldest_spares_held_slots_then_overwrites_the_oldest() {
        let slots = [
            state(4, 2, true),
            state(5, 2, false),
            state(6, 4, false),
            state(7, 2, true),
        ];
        assert_eq!(choose_slot(&slots, 0, false), Some(1), "oldest not held");
        let all_held = [state(4, 2, true), state(5, 2, true)];
        assert_eq!(choose_slot(&all_held, 1, false), Some(0), "oldest of all");
    }

    #[test]
    fn never_written_slots_count_as_oldest() {
        let slots = [state(0, 0, false), state(1, 2, true), state(0, 0, false)];
        assert_eq!(choose_slot(&slots, 1, true), Some(0));
    }
}
