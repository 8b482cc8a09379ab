//! One subscriber's ACK area (D33): a page of memory that only this
//! subscriber and its publisher map, where the subscriber releases frames
//! (per slot, the newest seq released), says what it took, and reports its
//! own counts. Nobody else can write it, so no other peer can release a
//! slot for it or speak in its name; what it writes there is its own word
//! about itself, which the publisher reads as untrusted and lets decide
//! nothing about anyone else.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::platform::clock;
use crate::platform::region::{Access, MappedRegion, resizeless_memfd, sealed_size};
use crate::wire::layout::{ACK_AREA_SIZE, MAX_RING_SIZE, offsets};

/// A mapped ACK area (either side).
#[derive(Debug)]
pub(crate) struct AckArea {
    region: MappedRegion,
}

/// A subscriber's own counts, as it reports them in its area.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AckReport {
    pub last_seen_seq: u64,
    pub last_ack_ns: u64,
    pub received: u64,
    pub dropped: u64,
    pub overwritten: u64,
    pub copied: u64,
}

impl AckArea {
    /// The publisher's new area for subscriber connection `conn` of `key`:
    /// sealed against resizing (a peer cannot make the publisher's reads
    /// fault), writable by the one subscriber it is sent to.
    pub(crate) fn create(key: &str, conn: u64) -> Result<(AckArea, OwnedFd)> {
        let what = format!("ACK area of subscriber {conn} of '{key}'");
        let (fd, region) = resizeless_memfd(&format!("cuframes-{key}-acks-{conn}"), ACK_AREA_SIZE, &what)?;
        Ok((AckArea { region }, fd))
    }

    /// The subscriber's view of the area its publisher sent: a memfd sealed
    /// against shrinking, a page or more.
    pub(crate) fn open(fd: &OwnedFd, key: &str) -> Result<AckArea> {
        let what = format!("ACK area from the publisher of '{key}'");
        let size = sealed_size(fd, &what)?;
        if size < ACK_AREA_SIZE as u64 {
            return Err(Error::corrupt(format!(
                "{what} is {size} bytes, less than {ACK_AREA_SIZE}"
            )));
        }
        let region = MappedRegion::map(fd, ACK_AREA_SIZE, Access::ReadWrite, &what)?;
        Ok(AckArea { region })
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.region.len());
        // SAFETY: the offset is 8-aligned inside the page-aligned mapping
        // (checked above), which lives as long as &self; AtomicU64 has u64's
        // layout; the other process touches these bytes only through atomics.
        unsafe { AtomicU64::from_ptr(self.region.as_ptr().add(offset).cast()) }
    }

    // ------------------------------------------------------- subscriber

    /// Releases `seq` from `slot` (SeqCst: pairs with the publisher's
    /// `publisher_waiting` store before it looks, so one of the two sees
    /// the other) and records the ACK.
    pub(crate) fn release(&self, slot: usize, seq: u64) {
        assert!(slot < MAX_RING_SIZE);
        self.word(offsets::ack_released(slot))
            .fetch_max(seq, Ordering::SeqCst);
        self.word(offsets::ACK_LAST_SEEN)
            .fetch_max(seq, Ordering::Relaxed);
        self.word(offsets::ACK_LAST_ACK)
            .store(clock::realtime_ns() as u64, Ordering::Relaxed);
    }

    /// Records that `seq` was taken: held from now on until released.
    pub(crate) fn note_taken(&self, seq: u64) {
        self.word(offsets::ACK_TAKEN).fetch_max(seq, Ordering::SeqCst);
    }

    /// Writes this subscriber's counts.
    pub(crate) fn report(&self, received: u64, dropped: u64, overwritten: u64, copied: u64) {
        for (offset, value) in [
            (offsets::ACK_RECEIVED, received),
            (offsets::ACK_DROPPED, dropped),
            (offsets::ACK_OVERWRITTEN, overwritten),
            (offsets::ACK_COPIED, copied),
        ] {
            self.word(offset).store(value, Ordering::Relaxed);
        }
    }

    // -------------------------------------------------------- publisher

    /// The newest seq the subscriber says it released from `slot`.
    pub(crate) fn released(&self, slot: usize) -> u64 {
        assert!(slot < MAX_RING_SIZE);
        self.word(offsets::ack_released(slot)).load(Ordering::SeqCst)
    }

    /// The newest seq the subscriber says it took.
    pub(crate) fn taken(&self) -> u64 {
        self.word(offsets::ACK_TAKEN).load(Ordering::SeqCst)
    }

    /// What the subscriber reports of itself (untrusted).
    pub(crate) fn reported(&self) -> AckReport {
        let load = |offset| self.word(offset).load(Ordering::Relaxed);
        AckReport {
            last_seen_seq: load(offsets::ACK_LAST_SEEN),
            last_ack_ns: load(offsets::ACK_LAST_ACK),
            received: load(offsets::ACK_RECEIVED),
            dropped: load(offsets::ACK_DROPPED),
            overwritten: load(offsets::ACK_OVERWRITTEN),
            copied: load(offsets::ACK_COPIED),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_publisher_reads_what_its_subscriber_wrote() {
        let (publisher, fd) = AckArea::create("t", 1).unwrap();
        let subscriber = AckArea::open(&fd, "t").unwrap();
        subscriber.note_taken(7);
        subscriber.release(3, 7);
        subscriber.release(3, 5); // a late, older release changes nothing
        subscriber.report(10, 2, 1, 4);
        assert_eq!(publisher.released(3), 7);
        assert_eq!(publisher.released(2), 0);
        assert_eq!(publisher.taken(), 7);
        let r = publisher.reported();
        assert_eq!(
            (r.last_seen_seq, r.received, r.dropped, r.overwritten, r.copied),
            (7, 10, 2, 1, 4)
        );
        assert!(r.last_ack_ns > 0);
    }

    #[test]
    fn an_area_that_is_too_small_or_unsealed_is_refused() {
        let (small, _mapping) = resizeless_memfd("t", 64, "small").unwrap();
        assert!(AckArea::open(&small, "t").is_err());
        let plain: OwnedFd = tempfile::tempfile().unwrap().into();
        assert!(AckArea::open(&plain, "t").is_err());
    }
}
