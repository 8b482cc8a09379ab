//! Where the next frame goes and the waits for ACKs: slot choice (D22),
//! the strict-wait sleep on the futex or the doorbell (D24, D33), dropping
//! late subscribers (D23), and flush / wait_delivered.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use super::registry::Table;
use super::{Policy, Publisher};
use crate::error::{Error, ErrorKind, Result};
use crate::shm::ring::{SlotState, choose_slot};
use crate::wire::layout::MAX_SUBSCRIBER_SLOTS;
use crate::wire::message::Message;

impl Publisher {
    /// Waits until every active subscriber has released every frame still
    /// in the ring (or left), e.g. before destroying a publisher whose last
    /// frames must arrive. Subscribers are not dropped on timeout.
    pub fn flush(&self, timeout: Duration) -> Result<()> {
        self.wait_until_none(timeout, Self::owing_acks, |pending| {
            format!("{pending} subscriber(s) still hold frames")
        })
    }

    /// Waits until every active subscriber has taken the newest frame (it
    /// may still hold it), released every frame, or left: then shutting down
    /// loses no frame for it, as leases stay readable after the publisher is
    /// gone. Unlike [`Publisher::flush`] this does not wait for a consumer
    /// that keeps its last frame until it sees the end of the stream (FFmpeg
    /// does). A subscriber that never writes the taken seq (extension, see
    /// docs/protocol-notes.md) is waited for as by `flush`.
    pub fn wait_delivered(&self, timeout: Duration) -> Result<()> {
        let newest = self.next_seq - 1;
        let not_taken = |p: &Self| {
            let owing = p.owing_acks();
            let table = p.registry.lock();
            (0..32usize)
                .filter(|&bit| owing & (1 << bit) != 0)
                .filter(|&bit| table.taken(bit, &p.registry.headers) < newest)
                .fold(0u32, |acc, bit| acc | (1 << bit))
        };
        self.wait_until_none(timeout, not_taken, |pending| {
            format!("{pending} subscriber(s) have not taken frame {newest}")
        })
    }

    /// Subscribers that still owe an ACK for some frame in the ring.
    fn owing_acks(&self) -> u32 {
        (0..self.ring_size).fold(0, |acc, slot| acc | self.missing_acks(slot))
    }

    /// Polls `pending` (a subscriber bitmask) until it is empty, or fails
    /// with TIMEOUT and `what(count)` after `timeout`.
    fn wait_until_none(
        &self,
        timeout: Duration,
        pending: impl Fn(&Self) -> u32,
        what: impl Fn(u32) -> String,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut backoff = Backoff::new();
        loop {
            let left = pending(self);
            if left == 0 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!(
                        "'{}': {} after {} ms",
                        self.key,
                        what(left.count_ones()),
                        timeout.as_millis()
                    ),
                ));
            }
            backoff.wait();
        }
    }

    /// Bits that still owe an ACK for slot `slot`'s current frame.
    fn missing_acks(&self, slot: usize) -> u32 {
        self.owing(&self.registry.lock(), slot)
    }

    /// [`Publisher::missing_acks`] with the table locked.
    pub(super) fn owing(&self, table: &Table, slot: usize) -> u32 {
        let need = table.required[slot] & self.registry.active();
        need & !table.released(slot, self.slot_seqs[slot], &self.registry.headers, need)
    }

    /// D4, D22, D23: the slot for the next frame. Under STRICT_WAIT,
    /// when every slot is still owed an ACK, sleeps until one is free; a
    /// subscriber that holds up the ring longer than its time (the ACK
    /// timeout, or the start-up timeout while it is new) is dropped.
    pub(super) fn next_slot(&mut self) -> usize {
        let preferred = (self.next_seq % self.ring_size as u64) as usize;
        let strict = self.policy == Policy::StrictWait;
        let mut waiting_since: Option<Instant> = None;
        let mut doorbell = Doorbell::default();
        loop {
            let expired = waiting_since.map_or(0, |since| self.expired(since));
            let states = self.slot_states(expired, !strict);
            if let Some(slot) = choose_slot(&states, preferred, strict) {
                if let Some(since) = waiting_since {
                    self.registry.headers.stop_waiting_for_acks();
                    self.stats.ack_waits += 1;
                    self.stats.ack_wait_ns += since.elapsed().as_nanos() as u64;
                    self.show_counters();
                }
                let late = self.missing_acks(slot) & expired;
                if late != 0 {
                    self.drop_late(slot, late);
                }
                return slot;
            }
            let since = *waiting_since.get_or_insert_with(Instant::now);
            doorbell.progress(states.iter().map(|s| s.owing.count_ones()).sum());
            if strict {
                self.show_holders(&self.registry.lock());
            }
            let ticket = self.registry.headers.ack_ticket();
            // An ACK between the look above and the ticket changed nothing
            // the ticket would show: look once more before sleeping.
            if choose_slot(&self.slot_states(self.expired(since), false), preferred, true).is_none() {
                self.sleep_for_ack(ticket, &mut doorbell);
            }
        }
    }

    /// D25 with D33: who took each slot's frame and still holds it,
    /// counted here from each one's own words and stored in the sealed
    /// header for subscribers' copy decisions: at each publish and at each
    /// look while waiting for a slot. A subscriber that says it took
    /// nothing while it releases nothing hides its own holds only, as a slow
    /// subscriber that has not read them does honestly.
    pub(super) fn show_holders(&self, table: &Table) {
        let active = self.registry.active();
        let mut taken = [0u64; MAX_SUBSCRIBER_SLOTS];
        for bit in (1..32usize).filter(|&bit| active & (1 << bit) != 0) {
            taken[bit] = table.taken(bit, &self.registry.headers);
        }
        for slot in 0..self.ring_size {
            let (seq, owing) = (self.slot_seqs[slot], self.owing(table, slot));
            let holders = (1..32usize)
                .filter(|&bit| seq != 0 && owing & (1 << bit) != 0 && taken[bit] >= seq)
                .fold(0u32, |acc, bit| acc | (1 << bit));
            self.registry.headers.set_holders(slot, holders);
        }
    }

    /// Sleeps until an ACK may have freed a slot, at most 2 ms (v1
    /// subscribers of older versions ACK without waking anyone): on the
    /// named header's futex when only v1 subscribers are connected, else on
    /// the doorbell, which any subscriber with an ACK area can ring — after
    /// rings that freed nothing it pauses first, so that a peer ringing in
    /// a loop costs the publisher at most one look per millisecond.
    fn sleep_for_ack(&self, ticket: u32, doorbell: &mut Doorbell) {
        const MOST: Duration = Duration::from_millis(2);
        if self.registry.lock().private_bits() == 0 {
            self.registry.headers.sleep_for_ack(ticket, MOST);
            return;
        }
        if let Some(pause) = doorbell.pause() {
            std::thread::sleep(pause);
        }
        if crate::channel::wait_readable(self.doorbell.as_fd(), Some(MOST)).unwrap_or(false) {
            let _ = self.doorbell.read();
            doorbell.rang();
        }
    }

    /// The slots as the choice sees them: what each holds, who still owes
    /// it an ACK (minus `given_up`), and (for drop-oldest) who holds it.
    fn slot_states(&self, given_up: u32, want_held: bool) -> Vec<SlotState> {
        let table = self.registry.lock();
        let active = self.registry.active();
        let mut taken = [0u64; MAX_SUBSCRIBER_SLOTS];
        if want_held {
            for bit in (1..32usize).filter(|&bit| active & (1 << bit) != 0) {
                taken[bit] = table.taken(bit, &self.registry.headers);
            }
        }
        (0..self.ring_size)
            .map(|slot| {
                let seq = self.slot_seqs[slot];
                let owing = self.owing(&table, slot);
                let holders = if want_held {
                    (1..32usize)
                        .filter(|&bit| owing & (1 << bit) != 0 && taken[bit] >= seq)
                        .fold(0u32, |acc, bit| acc | (1 << bit))
                } else {
                    0
                };
                SlotState {
                    seq,
                    owing: owing & !given_up,
                    holders,
                }
            })
            .collect()
    }

    /// Subscribers whose time to free a slot ran out, waiting since `since`:
    /// the ACK timeout, or the start-up timeout from their joining while
    /// that is later (D23).
    fn expired(&self, since: Instant) -> u32 {
        let now = Instant::now();
        let steady = since + self.ack_timeout;
        self.registry
            .admitted()
            .into_iter()
            .filter(|&(_, admitted)| now >= steady.max(admitted + self.startup_timeout))
            .fold(0, |acc, (bit, _)| acc | (1 << bit))
    }

    /// The counters, where monitoring reads them (D35).
    fn show_counters(&self) {
        let s = &self.stats;
        self.registry
            .headers
            .set_counters(s.ack_waits, s.ack_wait_ns, s.ack_timeouts);
    }

    /// Drops the subscribers `late` that still owe slot `slot`'s frame.
    fn drop_late(&mut self, slot: usize, late: u32) {
        let seq = self.slot_seqs[slot];
        let notice = Message::Error {
            code: ErrorKind::Timeout.code(),
            message: format!(
                "dropped by publisher of '{}': no ACK for seq {seq} within {} ms (strict-wait; {} ms while starting)",
                self.key,
                self.ack_timeout.as_millis(),
                self.startup_timeout.max(self.ack_timeout).as_millis()
            ),
        };
        for bit in (0..32).filter(|b| late & (1 << b) != 0) {
            if self.registry.remove(bit, None, Some(&notice)) {
                self.stats.ack_timeouts += 1;
                self.show_counters();
            }
        }
    }
}

/// Spin briefly, then sleep with growing pauses (≤ 200 µs): ACK waits are
/// short under normal load and must not burn a core when a subscriber lags.
struct Backoff {
    round: u32,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff { round: 0 }
    }

    fn wait(&mut self) {
        self.round += 1;
        if self.round <= 64 {
            std::hint::spin_loop();
        } else if self.round <= 128 {
            std::thread::yield_now();
        } else {
            let micros = (self.round - 128).min(200) as u64;
            std::thread::sleep(Duration::from_micros(micros));
        }
    }
}

/// Subscriber wake-ups a waiting publisher got from its doorbell that freed
/// nothing (owed ACKs did not go down), and the pause they earn.
#[derive(Debug, Default)]
struct Doorbell {
    owed: Option<u32>,
    rang: bool,
    idle_rings: u32,
}

impl Doorbell {
    /// The ACKs still owed now (after a wake-up, or before the first sleep).
    fn progress(&mut self, owed: u32) {
        let freed_some = self.owed.is_some_and(|before| owed < before);
        if freed_some {
            self.idle_rings = 0;
        } else if self.rang {
            self.idle_rings += 1;
        }
        self.owed = Some(owed);
        self.rang = false;
    }

    fn rang(&mut self) {
        self.rang = true;
    }

    /// 10 µs after the first ring that freed nothing, doubling to 1 ms.
    fn pause(&self) -> Option<Duration> {
        (self.idle_rings > 0).then(|| Duration::from_micros((10u64 << self.idle_rings.min(7)).min(1000)))
    }
}
