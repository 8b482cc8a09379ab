//! Frame side data (D30): the variable-size metadata an encoder passes
//! on with a frame — HDR mastering display and content light level, dynamic
//! HDR (HDR10+), A/53 closed captions, user-data SEI, SMPTE timecodes.
//!
//! Each frame carries a list of entries, each a kind and bytes. The kinds
//! and their payloads are defined in `docs/protocol-notes.md` (D30); this
//! library passes every payload through without interpreting it, and a kind
//! it does not know crosses too. On the wire (the slot's side-data area) an
//! entry is `u16 kind, u16 zero, u32 length, payload`, padded with zeros to
//! a multiple of 8 bytes.

use crate::error::{Error, Result};

/// Side-data kinds (`cuframes_side_data_kind_t`). Payloads, little-endian:
pub mod kind {
    /// HDR mastering display colour volume: ten rationals (i32 numerator, i32
    /// denominator) — display primaries R, G, B as (x, y), white point (x, y),
    /// min and max luminance — then i32 has_primaries, i32 has_luminance
    /// (88 bytes; FFmpeg's `AVMasteringDisplayMetadata`).
    pub const MASTERING_DISPLAY: u16 = 1;
    /// Content light level: u32 MaxCLL, u32 MaxFALL in cd/m² (8 bytes).
    pub const CONTENT_LIGHT_LEVEL: u16 = 2;
    /// ATSC A/53 closed captions: `cc_data` triplets as in the SEI.
    pub const A53_CC: u16 = 3;
    /// User-data-unregistered SEI: 16-byte UUID, then the user data.
    pub const SEI_UNREGISTERED: u16 = 4;
    /// SMPTE 12-M timecodes: u32 count (1..=3), then that many u32 timecodes
    /// as FFmpeg's `AV_FRAME_DATA_S12M_TIMECODE` stores them (16 bytes).
    pub const S12M_TIMECODE: u16 = 5;
    /// HDR10+ dynamic metadata as the ITU-T T.35 message (SMPTE ST 2094-40).
    pub const HDR10_PLUS: u16 = 6;
}

/// One entry of a frame's side data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SideData {
    /// A [`kind`] value (others pass through uninterpreted).
    pub kind: u16,
    /// The payload.
    pub bytes: Vec<u8>,
}

/// Bytes of side data one frame can carry, entry headers and padding included.
pub const SIDE_DATA_CAPACITY: usize = 4096;

const ENTRY_HEADER: usize = 8;

fn padded(len: usize) -> usize {
    len.next_multiple_of(8)
}

/// Appends one entry to `encoded` (the wire form of a frame's side data),
/// refusing what would not fit in `capacity` bytes.
pub(crate) fn append(encoded: &mut Vec<u8>, kind: u16, bytes: &[u8], capacity: usize) -> Result<()> {
    if kind == 0 {
        return Err(Error::invalid("side data kind 0 is reserved"));
    }
    let need = ENTRY_HEADER + padded(bytes.len());
    let length = u32::try_from(bytes.len())
        .ok()
        .filter(|_| encoded.len() + need <= capacity);
    let Some(length) = length else {
        return Err(Error::invalid(format!(
            "side data of kind {kind} ({} bytes) does not fit: a frame carries at most {capacity} bytes of side data and has {} left",
            bytes.len(),
            capacity.saturating_sub(encoded.len() + ENTRY_HEADER)
        )));
    };
    encoded.extend_from_slice(&kind.to_le_bytes());
    encoded.extend_from_slice(&[0, 0]);
    encoded.extend_from_slice(&length.to_le_bytes());
    encoded.extend_from_slice(bytes);
    encoded.resize(encoded.len() + padded(bytes.len()) - bytes.len(), 0);
    Ok(())
}

/// The entries of a frame's side data. Untrusted input (the publisher wrote
/// it): None when an entry's length runs past the end or a kind is 0.
pub(crate) fn decode(mut bytes: &[u8]) -> Option<Vec<SideData>> {
    let mut entries = Vec::new();
    while !bytes.is_empty() {
        let header: &[u8; ENTRY_HEADER] = bytes.get(..ENTRY_HEADER)?.try_into().ok()?;
        let kind = u16::from_le_bytes([header[0], header[1]]);
        let length = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
        let body = bytes.get(ENTRY_HEADER..)?;
        if kind == 0 || length > body.len() {
            return None;
        }
        entries.push(SideData {
            kind,
            bytes: body[..length].to_vec(),
        });
        bytes = &body[padded(length).min(body.len())..];
    }
    Some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_wire_form_is_kind_length_payload_padded() {
        let mut encoded = Vec::new();
        append(
            &mut encoded,
            kind::CONTENT_LIGHT_LEVEL,
            &[0xE8, 3, 0, 0, 0x90, 1, 0, 0],
            64,
        )
        .unwrap();
        append(&mut encoded, kind::A53_CC, &[0xFC, 0x80, 0x80], 64).unwrap();
        assert_eq!(
            encoded,
            [
                2, 0, 0, 0, 8, 0, 0, 0, 0xE8, 3, 0, 0, 0x90, 1, 0, 0, // CLL 1000, 400
                3, 0, 0, 0, 3, 0, 0, 0, 0xFC, 0x80, 0x80, 0, 0, 0, 0, 0, // one cc triplet
            ]
        );
    }

    #[test]
    fn what_does_not_fit_is_refused_and_leaves_the_rest() {
        let mut encoded = Vec::new();
        append(&mut encoded, 9, &[1; 40], 64).unwrap();
        let err = append(&mut encoded, 9, &[1; 17], 64).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
        assert_eq!(encoded.len(), 48);
        assert!(append(&mut encoded, 0, &[], 64).is_err(), "kind 0 is reserved");
    }

    #[test]
    fn hostile_lengths_are_refused() {
        assert_eq!(decode(&[]), Some(vec![]));
        assert_eq!(decode(&[1, 0, 0, 0, 9, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]), None);
        assert_eq!(decode(&[1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]), None);
        assert_eq!(decode(&[0, 0, 0, 0, 0, 0, 0, 0]), None, "kind 0");
        assert_eq!(decode(&[1, 0, 0, 0]), None, "a short header");
    }

    proptest! {
        #[test]
        fn entries_cross_unchanged(entries in proptest::collection::vec((1u16.., proptest::collection::vec(any::<u8>(), 0..200)), 0..12)) {
            let mut encoded = Vec::new();
            let mut kept = Vec::new();
            for (kind, bytes) in entries {
                if append(&mut encoded, kind, &bytes, SIDE_DATA_CAPACITY).is_ok() {
                    kept.push(SideData { kind, bytes });
                }
            }
            prop_assert!(encoded.len() <= SIDE_DATA_CAPACITY);
            prop_assert_eq!(decode(&encoded), Some(kept));
        }

        #[test]
        fn any_bytes_decode_or_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&bytes);
        }
    }
}
