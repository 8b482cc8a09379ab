//! The side-data area (D30): one sealed memfd holding, for each of the
//! 16 possible slots, the encoded side data of the frame in that slot.
//!
//! The publisher writes a slot's area between marking the slot and committing
//! its seq, and puts the byte count in the slot descriptor; a subscriber
//! reads it between the seq and its re-check, like the other slot fields: a
//! torn read is discarded with the frame. Both sides use relaxed atomic word
//! accesses (the bytes race by design; the seqlock orders them). Subscribers
//! get the memfd before SUBSCRIBE (EVENT_FD purpose 5) and map it read-only.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::platform::region::{Access, MappedRegion, sealed_memfd, sealed_size};
use crate::side_data::SIDE_DATA_CAPACITY;
use crate::wire::layout::MAX_RING_SIZE;

/// The side-data area of one stream.
#[derive(Debug)]
pub(crate) struct SideArea {
    region: MappedRegion,
    /// Bytes per slot (a multiple of 8).
    per_slot: usize,
}

impl SideArea {
    /// The publisher's area: `SIDE_DATA_CAPACITY` bytes per slot, sealed
    /// against resizing, and against writes through any other mapping where
    /// the kernel can (F_SEAL_FUTURE_WRITE).
    pub(crate) fn create(key: &str) -> Result<(SideArea, OwnedFd)> {
        let what = format!("side-data area of '{key}'");
        let total = SIDE_DATA_CAPACITY * MAX_RING_SIZE;
        let (memfd, region) = sealed_memfd(&format!("cuframes-{key}-side-data"), total, &what)?;
        Ok((
            SideArea {
                region,
                per_slot: SIDE_DATA_CAPACITY,
            },
            memfd,
        ))
    }

    /// A subscriber's view of the area its publisher sent. Untrusted: it must
    /// be a memfd sealed against shrinking, with room for 16 slots.
    pub(crate) fn open(fd: &OwnedFd, key: &str) -> Result<SideArea> {
        let what = format!("side-data area of '{key}'");
        let size = sealed_size(fd, &what)?;
        let per_slot = (usize::try_from(size).unwrap_or(0) / MAX_RING_SIZE) / 8 * 8;
        if per_slot == 0 || per_slot > 1 << 20 {
            return Err(Error::corrupt(format!(
                "{what} is {size} bytes: not 16 slots of 8 bytes to 1 MiB"
            )));
        }
        let region = MappedRegion::map(fd, per_slot * MAX_RING_SIZE, Access::ReadOnly, &what)?;
        Ok(SideArea { region, per_slot })
    }

    fn word(&self, slot: usize, index: usize) -> &AtomicU64 {
        assert!(slot < MAX_RING_SIZE && index * 8 < self.per_slot);
        // SAFETY: slot < 16 and index * 8 < per_slot keep the word inside the
        // mapping of 16 * per_slot bytes; per_slot is a multiple of 8 and the
        // mapping page-aligned, so the word is 8-aligned; it lives as long as
        // &self; AtomicU64 has u64's layout; other processes touch these bytes
        // only through atomics too.
        unsafe { AtomicU64::from_ptr(self.region.as_ptr().add(slot * self.per_slot + index * 8).cast()) }
    }

    /// Writes the encoded side data of slot `slot`'s next frame (the caller
    /// checked it fits `SIDE_DATA_CAPACITY`; its length is a multiple of 8).
    pub(crate) fn write(&self, slot: usize, encoded: &[u8]) {
        debug_assert!(encoded.len() <= self.per_slot && encoded.len().is_multiple_of(8));
        for (i, word) in encoded.chunks_exact(8).enumerate() {
            let value = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            self.word(slot, i).store(value, Ordering::Relaxed);
        }
    }

    /// The `len` bytes of slot `slot`'s side data; None when `len` (read from
    /// the slot descriptor, untrusted) does not fit the area.
    pub(crate) fn read(&self, slot: usize, len: u64) -> Option<Vec<u8>> {
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= self.per_slot && slot < MAX_RING_SIZE)?;
        let mut bytes = Vec::with_capacity(len.next_multiple_of(8));
        for i in 0..len.div_ceil(8) {
            bytes.extend_from_slice(&self.word(slot, i).load(Ordering::Relaxed).to_le_bytes());
        }
        bytes.truncate(len);
        Some(bytes)
    }
}
