//! State shared by the publishing thread and the control thread: which
//! subscriber bits are active, their wake-up eventfds and sockets, and which
//! subscribers each slot's frame waits on.
//!
//! The publisher's own copy is the truth; the header's `subscriber_bitmap`
//! and subscriber slots are a mirror for readers (subscribers can write the
//! header, so it is never read back).

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::channel::send_on;
use crate::error::{Error, ErrorKind, Result};
use crate::platform::clock;
use crate::shm::header::ShmHeader;
use crate::wire::layout::{
    FIRST_SUBSCRIBER_BIT, LAST_SUBSCRIBER_BIT, MAX_RING_SIZE, MAX_SUBSCRIBER_SLOTS, SUBSCRIBER_ACTIVE,
    SubscriberSlot,
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
}

/// Guarded by the registry mutex.
#[derive(Debug)]
pub(crate) struct Table {
    pub subs: [Option<ActiveSubscriber>; MAX_SUBSCRIBER_SLOTS],
    /// For each slot, the bits that must ACK its current frame before it is
    /// overwritten (STRICT_WAIT): the active set when it was published.
    pub required: [u32; MAX_RING_SIZE],
}

/// What the two threads share.
#[derive(Debug)]
pub(crate) struct Registry {
    pub key: String,
    pub header: ShmHeader,
    active: AtomicU32,
    /// The last seq published (0: none). The header's `global_seq` says the
    /// same, but subscribers can write the header: admission reads this.
    published: AtomicU64,
    table: Mutex<Table>,
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
    pub(crate) fn new(key: &str, header: ShmHeader) -> Registry {
        Registry {
            key: key.to_owned(),
            header,
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
    /// header and returns (bit, wake-up fd to send, initial_seq). Done under
    /// the lock that `commit` publishes under, so frames after
    /// `initial_seq` wait for this subscriber and frames up to it do not.
    pub(crate) fn admit(
        &self,
        conn: u64,
        name: &str,
        pid: u32,
        sock: &UnixStream,
    ) -> Result<(u32, OwnedFd, u64)> {
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
        let slot = SubscriberSlot {
            state: SUBSCRIBER_ACTIVE,
            consumer_pid: pid as u64,
            last_seen_seq: initial_seq,
            last_ack_ns: clock::realtime_ns(),
            consumer_name: SubscriberSlot::encode_name(name),
            reserved: [0; 64],
        };
        self.header
            .store_bytes(ShmHeader::subscriber_offset(bit as usize), slot.as_bytes());
        table.subs[bit as usize] = Some(ActiveSubscriber {
            conn,
            name: name.to_owned(),
            pid,
            wake,
            sock,
            admitted: Instant::now(),
        });
        let active = self.active.fetch_or(mask, Ordering::AcqRel) | mask;
        self.header
            .subscriber_bitmap()
            .store(active as u64, Ordering::Release);
        Ok((bit, wake_for_peer, initial_seq))
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
        self.header
            .subscriber_bitmap()
            .store(active as u64, Ordering::Release);
        self.header.store_bytes(
            ShmHeader::subscriber_offset(index),
            SubscriberSlot::free().as_bytes(),
        );
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
