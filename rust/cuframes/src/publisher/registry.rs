//! State shared by the publishing thread and the control thread: which
//! subscriber bits are active, their wake-up eventfds and sockets, and which
//! subscribers each slot's frame waits on.
//!
//! The publisher's own copy is the truth; the header's `subscriber_bitmap`
//! and subscriber slots are a mirror for readers (subscribers can write the
//! named header, so it is never read back). What a subscriber says of
//! itself — its releases and taken seq, in its ACK area (D33), or in the
//! named header for v1 subscribers — is read only as its own word.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use nix::sys::eventfd::{EfdFlags, EventFd};

use super::headers::Headers;
use crate::channel::send_on;
use crate::error::{Error, ErrorKind, Result};
use crate::platform::clock;
use crate::shm::ack_area::AckArea;
use crate::wire::layout::{
    FIRST_SUBSCRIBER_BIT, LAST_SUBSCRIBER_BIT, MAX_RING_SIZE, MAX_SUBSCRIBER_SLOTS, REPORT_FROM_ACK_AREA,
    SUBSCRIBER_ACTIVE, SubscriberSlot, offsets,
};
use crate::wire::message::Message;

/// One active subscriber.
#[derive(Debug)]
pub(crate) struct ActiveSubscriber {
    /// Connection id, unique for the publisher's life (bits are reused).
    pub conn: u64,
    pub name: String,
    pub pid: u32,
    pub wake: EventFd,
    pub sock: UnixStream,
    /// When it joined (its start-up time runs from here; D23).
    pub admitted: Instant,
    /// The seq published when it joined.
    pub initial_seq: u64,
    /// Its own ACK area (D33); None for a protocol-v1 subscriber, which
    /// ACKs in the named header.
    pub acks: Option<AckArea>,
}

/// Guarded by the registry mutex.
#[derive(Debug)]
pub(crate) struct Table {
    pub subs: [Option<ActiveSubscriber>; MAX_SUBSCRIBER_SLOTS],
    /// For each slot, the bits that must ACK its current frame before it is
    /// overwritten (STRICT_WAIT): the active set when it was published.
    pub required: [u32; MAX_RING_SIZE],
}

impl Table {
    /// Of the bits `asked`, those that released frame `seq` in slot `slot`: each subscriber
    /// by its own word (its ACK area; a v1 subscriber's bit in the named
    /// header's `ack_bitmap`, which is reset with every publish).
    pub(crate) fn released(&self, slot: usize, seq: u64, headers: &Headers, asked: u32) -> u32 {
        if asked == 0 {
            return 0;
        }
        let v1_bits = headers.named.acked(slot);
        let mut bits = 0;
        let mut left = asked;
        while left != 0 {
            let bit = left.trailing_zeros();
            left &= left - 1;
            let mask = 1u32 << bit;
            match &self.subs[bit as usize] {
                Some(ActiveSubscriber { acks: Some(area), .. }) if area.released(slot) >= seq => bits |= mask,
                Some(ActiveSubscriber { acks: None, .. }) => bits |= v1_bits & mask,
                _ => {}
            }
        }
        bits
    }

    /// The newest seq subscriber `bit` says it took (0: none, or unknown).
    pub(crate) fn taken(&self, bit: usize, headers: &Headers) -> u64 {
        match &self.subs[bit] {
            Some(ActiveSubscriber { acks: Some(area), .. }) => area.taken(),
            Some(ActiveSubscriber { acks: None, .. }) => headers.named.taken_by(bit),
            None => 0,
        }
    }

    /// Bits of subscribers with an ACK area.
    pub(crate) fn private_bits(&self) -> u32 {
        self.subs.iter().enumerate().fold(0, |bits, (bit, sub)| {
            bits | (sub.as_ref().is_some_and(|s| s.acks.is_some()) as u32) << bit
        })
    }
}

/// What the two threads share.
#[derive(Debug)]
pub(crate) struct Registry {
    pub key: String,
    pub headers: Headers,
    active: AtomicU32,
    /// The last seq published (0: none). The header's `global_seq` says the
    /// same, but subscribers can write the header: admission reads this.
    published: AtomicU64,
    table: Mutex<Table>,
}

/// What admission hands the control thread to send.
#[derive(Debug)]
pub(crate) struct Admitted {
    pub bit: u32,
    pub wake: OwnedFd,
    pub initial_seq: u64,
    /// The ACK area (D33), for subscribers that asked.
    pub acks: Option<OwnedFd>,
}

/// A subscriber as reported to callers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriberInfo {
    /// Assigned bit, 1..=31.
    pub bit: u32,
    /// Name from HELLO_REQ.
    pub name: String,
    /// Pid from SO_PEERCRED (0 if unknown).
    pub pid: u32,
}

impl Registry {
    pub(crate) fn new(key: &str, headers: Headers) -> Registry {
        Registry {
            key: key.to_owned(),
            headers,
            active: AtomicU32::new(0),
            published: AtomicU64::new(0),
            table: Mutex::new(Table {
                subs: std::array::from_fn(|_| None),
                required: [0; MAX_RING_SIZE],
            }),
        }
    }

    /// The table, surviving a panic in another holder (its data stays
    /// consistent: every update is a few plain stores).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Bits of the active subscribers.
    pub(crate) fn active(&self) -> u32 {
        self.active.load(Ordering::Acquire)
    }

    /// Admits a subscriber: takes the lowest free bit, mirrors it in the
    /// headers and returns the bit, the wake-up fd to send, initial_seq and,
    /// with `private_acks`, its ACK area's fd to send (D33). Done under
    /// the lock that `commit` publishes under, so frames after
    /// `initial_seq` wait for this subscriber and frames up to it do not.
    pub(crate) fn admit(
        &self,
        conn: u64,
        name: &str,
        pid: u32,
        sock: &UnixStream,
        private_acks: bool,
    ) -> Result<Admitted> {
        let (acks, acks_fd) = match private_acks {
            true => {
                let (area, fd) = AckArea::create(&self.key, conn)?;
                (Some(area), Some(fd))
            }
            false => (None, None),
        };
        let wake = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| Error::os("eventfd", e))?;
        let wake_for_peer = wake
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Error::io("dup eventfd", &e))?;
        let sock = sock
            .try_clone()
            .map_err(|e| Error::io("dup subscriber socket", &e))?;
        let mut table = self.lock();
        let bit = (FIRST_SUBSCRIBER_BIT..=LAST_SUBSCRIBER_BIT)
            .find(|&b| table.subs[b as usize].is_none())
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::TooMany,
                    format!(
                        "too many subscribers: publisher of '{}' already serves {}",
                        self.key,
                        LAST_SUBSCRIBER_BIT - FIRST_SUBSCRIBER_BIT + 1
                    ),
                )
            })?;
        let mask = 1u32 << bit;
        // A new subscriber owes nothing for frames published before it.
        for need in table.required.iter_mut() {
            *need &= !mask;
        }
        let initial_seq = self.published.load(Ordering::Acquire);
        let mut slot = SubscriberSlot {
            state: SUBSCRIBER_ACTIVE,
            consumer_pid: pid as u64,
            last_seen_seq: initial_seq,
            last_ack_ns: clock::realtime_ns(),
            consumer_name: SubscriberSlot::encode_name(name),
            reserved: [0; 64],
        };
        // Where readers bound its counts from (D35).
        let joined = offsets::SUB_JOINED - offsets::SUB_DROPPED;
        slot.reserved[joined..joined + 8].copy_from_slice(&initial_seq.to_le_bytes());
        self.headers.store_subscriber(bit as usize, slot.as_bytes());
        table.subs[bit as usize] = Some(ActiveSubscriber {
            conn,
            name: name.to_owned(),
            pid,
            wake,
            sock,
            admitted: Instant::now(),
            initial_seq,
            acks,
        });
        let active = self.active.fetch_or(mask, Ordering::AcqRel) | mask;
        self.headers.set_subscriber_bitmap(active);
        Ok(Admitted {
            bit,
            wake: wake_for_peer,
            initial_seq,
            acks: acks_fd,
        })
    }

    /// [`Registry::mirror_reports_locked`], taking the lock.
    pub(crate) fn mirror_reports(&self) {
        self.mirror_reports_locked(&self.lock());
    }

    /// Copies what each subscriber with an ACK area reports of itself into
    /// its record in both headers, where `cuframes inspect`, `top` and
    /// monitoring read it (and protocol v1 puts it), bounded by what it
    /// could have seen: no seq past the last published, no more frames
    /// lost than were published since it joined. Called with each publish
    /// and, between publishes, by the control thread.
    pub(crate) fn mirror_reports_locked(&self, table: &Table) {
        let published = self.published.load(Ordering::Acquire);
        for (bit, sub) in table.subs.iter().enumerate() {
            let Some(ActiveSubscriber {
                acks: Some(area),
                initial_seq,
                ..
            }) = sub
            else {
                continue;
            };
            let r = area.reported();
            let since_join = published.saturating_sub(*initial_seq);
            let received = r.received.min(since_join);
            let lost = r.dropped.saturating_add(r.overwritten).min(since_join);
            for (word, value) in [
                (offsets::SUB_LAST_SEEN, r.last_seen_seq.min(published)),
                (offsets::SUB_LAST_ACK, r.last_ack_ns),
                (offsets::SUB_DROPPED, lost),
                (offsets::SUB_LAST_TAKEN, area.taken().min(published)),
                (offsets::SUB_RECEIVED, received),
                (offsets::SUB_COPIED, r.copied.min(received)),
                (offsets::SUB_OVERWRITTEN, r.overwritten.min(lost)),
                (offsets::SUB_REPORT, REPORT_FROM_ACK_AREA),
            ] {
                self.headers.store_subscriber_word(bit, word, value);
            }
        }
    }

    /// Removes the subscriber at `bit` if it is connection `conn` (any
    /// connection when None), sending `notice` first (best effort) and
    /// shutting its socket so the control thread sees it close. Returns
    /// whether one was removed.
    pub(crate) fn remove(&self, bit: u32, conn: Option<u64>, notice: Option<&Message>) -> bool {
        let mut table = self.lock();
        let index = bit as usize;
        let matches = table.subs[index]
            .as_ref()
            .is_some_and(|s| conn.is_none_or(|c| c == s.conn));
        if !matches {
            return false;
        }
        let sub = table.subs[index].take().expect("checked above");
        let mask = 1u32 << bit;
        let active = self.active.fetch_and(!mask, Ordering::AcqRel) & !mask;
        self.headers.set_subscriber_bitmap(active);
        self.headers
            .store_subscriber(index, SubscriberSlot::free().as_bytes());
        drop(table);
        if let Some(msg) = notice {
            let _ = send_on(&sub.sock, &sub.name, msg, None);
        }
        let _ = sub.sock.shutdown(std::net::Shutdown::Both);
        true
    }

    /// Records `seq` as published; call with the table locked (admission
    /// reads it under the same lock).
    pub(crate) fn set_published(&self, seq: u64) {
        self.published.store(seq, Ordering::Release);
    }

    /// Bit and joining time of every active subscriber.
    pub(crate) fn admitted(&self) -> Vec<(u32, Instant)> {
        let table = self.lock();
        (0..MAX_SUBSCRIBER_SLOTS)
            .filter_map(|bit| table.subs[bit].as_ref().map(|s| (bit as u32, s.admitted)))
            .collect()
    }

    /// The active subscribers.
    pub(crate) fn subscribers(&self) -> Vec<SubscriberInfo> {
        let table = self.lock();
        table
            .subs
            .iter()
            .enumerate()
            .filter_map(|(bit, s)| {
                s.as_ref().map(|s| SubscriberInfo {
                    bit: bit as u32,
                    name: s.name.clone(),
                    pid: s.pid,
                })
            })
            .collect()
    }
}
