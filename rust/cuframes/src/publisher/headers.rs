//! The publisher's two copies of the shared header (D33).
//!
//! - The **named** one, `/dev/shm/cuframes-<key>`, is protocol v1's: its
//!   lock marks the key live, listing tools read it, and subscribers that
//!   speak plain v1 map it read-write and ACK in it.
//! - The **sealed** one is a memfd only the publisher can write: cuframes
//!   subscribers get it instead and read every frame's seq, timestamps and
//!   properties from it, so no other subscriber can relabel a frame, move
//!   `global_seq` or otherwise change what they read.
//!
//! The publisher writes everything to both; it reads back only v1
//! subscribers' ACK bits and taken seqs, from the named one (their own word,
//! as untrusted as before).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::Result;
use crate::shm::header::ShmHeader;
use crate::wire::layout::SharedHeader;

/// Both copies.
#[derive(Debug)]
pub(crate) struct Headers {
    pub named: ShmHeader,
    pub sealed: ShmHeader,
    sealed_fd: OwnedFd,
    /// `/dev/shm/cuframes-<key>`, for messages.
    named_path: String,
    /// Whether the named copy's loss of pages was logged (once).
    named_lost_told: AtomicBool,
}

impl Headers {
    /// Creates both: the named one with `group` (0640, or 0660 when
    /// `group_writes`), the sealed one beside it.
    pub(crate) fn create(
        key: &str,
        shm_name: &str,
        initial: &SharedHeader,
        group: Option<u32>,
        group_writes: bool,
    ) -> Result<Headers> {
        let named = ShmHeader::create(shm_name, initial, group, group_writes)?;
        let (sealed, sealed_fd) = match ShmHeader::create_sealed(key, initial) {
            Ok(made) => made,
            Err(e) => {
                let _ = ShmHeader::unlink(shm_name);
                return Err(e);
            }
        };
        Ok(Headers {
            named,
            sealed,
            sealed_fd,
            named_path: crate::platform::names::shm_path(shm_name).display().to_string(),
            named_lost_told: AtomicBool::new(false),
        })
    }

    /// The sealed copy's descriptor, for cuframes subscribers.
    pub(crate) fn sealed_fd(&self) -> BorrowedFd<'_> {
        self.sealed_fd.as_fd()
    }

    fn both(&self) -> [&ShmHeader; 2] {
        [&self.sealed, &self.named]
    }

    /// Seqlock writer step 1 (see `shm::ring`), in both.
    pub(crate) fn mark_writing(&self, slot: usize) {
        for h in self.both() {
            h.mark_writing(slot);
        }
    }

    /// Seqlock writer step 2, in both: the sealed copy first, so a cuframes
    /// subscriber never sees a frame a v1 subscriber could not.
    pub(crate) fn publish_slot(
        &self,
        slot: usize,
        seq: u64,
        pts_ns: i64,
        written: u64,
        props: [u64; 3],
        side: u64,
    ) {
        for h in self.both() {
            h.publish_slot(slot, seq, pts_ns, written, props, side);
        }
        if self.named.lost_pages() && !self.named_lost_told.swap(true, Ordering::Relaxed) {
            crate::log::warning!(
                "{} shrank under its publisher (a process that may write it truncated it): protocol-v1 subscribers and tools that read it by name lose the stream; cuframes subscribers go on with the sealed copy",
                self.named_path
            );
        }
    }

    /// D25, D33: who holds slot `slot`'s frame, for subscribers' copy
    /// decisions (sealed copy only).
    pub(crate) fn set_holders(&self, slot: usize, holders: u32) {
        self.sealed
            .slot_holders(slot)
            .store(u64::from(holders), Ordering::Release);
    }

    /// The subscriber bitmap mirror, in both.
    pub(crate) fn set_subscriber_bitmap(&self, active: u32) {
        for h in self.both() {
            h.subscriber_bitmap().store(active as u64, Ordering::Release);
        }
    }

    /// Subscriber record `bit`, in both.
    pub(crate) fn store_subscriber(&self, bit: usize, record: &[u8]) {
        for h in self.both() {
            h.store_bytes(ShmHeader::subscriber_offset(bit), record);
        }
    }

    /// Word `word` (an `offsets::SUB_*`) of subscriber record `bit`, in
    /// both: tools read the named one, or the sealed one where /dev/shm is
    /// another container's (it comes over the socket).
    pub(crate) fn store_subscriber_word(&self, bit: usize, word: usize, value: u64) {
        for h in self.both() {
            h.store_bytes(ShmHeader::subscriber_offset(bit) + word, &value.to_le_bytes());
        }
    }

    /// The publisher's counters (D35), in both.
    pub(crate) fn set_counters(&self, ack_waits: u64, ack_wait_ns: u64, ack_timeouts: u64) {
        use crate::wire::layout::offsets;
        for h in self.both() {
            for (at, value) in [
                (offsets::PUB_ACK_WAITS, ack_waits),
                (offsets::PUB_ACK_WAIT_NS, ack_wait_ns),
                (offsets::PUB_ACK_TIMEOUTS, ack_timeouts),
            ] {
                h.store_bytes(at, &value.to_le_bytes());
            }
        }
    }

    /// `shutdown_flag`, in both.
    pub(crate) fn mark_shutdown(&self) {
        for h in self.both() {
            h.shutdown_flag().store(1, Ordering::Release);
        }
    }

    /// About to sleep for an ACK: announced in both (v1 subscribers wake
    /// the named copy's futex, cuframes subscribers ring the doorbell when
    /// the sealed copy says so); returns the futex ticket.
    pub(crate) fn ack_ticket(&self) -> u32 {
        self.sealed.ack_ticket();
        self.named.ack_ticket()
    }

    /// Sleeps on the named copy's futex (v1 subscribers' ACKs).
    pub(crate) fn sleep_for_ack(&self, ticket: u32, timeout: Duration) {
        self.named.sleep_for_ack(ticket, timeout);
    }

    /// No longer waiting, in both.
    pub(crate) fn stop_waiting_for_acks(&self) {
        for h in self.both() {
            h.stop_waiting_for_acks();
        }
    }
}
