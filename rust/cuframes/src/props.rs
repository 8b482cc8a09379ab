//! Frame properties (D29): what an encoder reads from a frame
//! besides its pixels — colour description, sample aspect ratio, field
//! order, key frame and picture type, duration — carried per frame in the
//! slot descriptor's reserved bytes, so a subscriber can stand in for the
//! decoder.
//!
//! Colour values are the ITU-T H.273 code points FFmpeg's enums use
//! (`AVColorPrimaries`, `AVColorTransferCharacteristic`, `AVColorSpace`;
//! 2 = unspecified), the range is FFmpeg's (`AVColorRange`: 0 unspecified,
//! 1 limited, 2 full), chroma location `AVChromaLocation`, picture type
//! `AVPictureType`. They are passed through, not interpreted: a value
//! this library does not know still crosses.

/// Properties of one frame. `Default` is "unknown" everywhere.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameProps {
    /// 0 unspecified, 1 limited (TV), 2 full (PC).
    pub color_range: u8,
    /// H.273 colour primaries (1 BT.709, 9 BT.2020, 2 unspecified, ...).
    pub color_primaries: u8,
    /// H.273 transfer characteristics (1 BT.709, 16 PQ, 18 HLG, ...).
    pub color_trc: u8,
    /// H.273 matrix coefficients (1 BT.709, 5/6 BT.601, 9 BT.2020 NCL, ...).
    pub colorspace: u8,
    /// 0 unspecified, 1 left (MPEG-2/4), 2 center, 3 top-left, ...
    pub chroma_location: u8,
    /// 0 none, 1 I, 2 P, 3 B, ... (where the source knew it).
    pub pict_type: u8,
    /// A key frame (an IDR/I frame where the source said so).
    pub key_frame: bool,
    /// Interlaced content.
    pub interlaced: bool,
    /// Interlaced, top field first.
    pub top_field_first: bool,
    /// Sample aspect ratio (num, den); (0, 1) or (0, 0) = unknown.
    pub sample_aspect_ratio: (u32, u32),
    /// How long the frame is shown, in nanoseconds; 0 = unknown.
    pub duration_ns: i64,
}

const PRESENT: u8 = 1;
const KEY_FRAME: u8 = 2;
const INTERLACED: u8 = 4;
const TOP_FIELD_FIRST: u8 = 8;

impl FrameProps {
    /// The three slot-descriptor words (D29): colour bytes and
    /// flags; SAR; duration.
    pub(crate) fn to_words(self) -> [u64; 3] {
        let flags = PRESENT
            | if self.key_frame { KEY_FRAME } else { 0 }
            | if self.interlaced { INTERLACED } else { 0 }
            | if self.top_field_first { TOP_FIELD_FIRST } else { 0 };
        let bytes = [
            self.color_range,
            self.color_primaries,
            self.color_trc,
            self.colorspace,
            self.chroma_location,
            self.pict_type,
            flags,
            0,
        ];
        let (num, den) = self.sample_aspect_ratio;
        [
            u64::from_le_bytes(bytes),
            num as u64 | (den as u64) << 32,
            self.duration_ns as u64,
        ]
    }

    /// The properties in three words; None when the publisher wrote none
    /// (protocol-v1 publishers, callers that set none). Untrusted input:
    /// every value is a plain number passed on.
    pub(crate) fn from_words(words: [u64; 3]) -> Option<FrameProps> {
        let b = words[0].to_le_bytes();
        let flags = b[6];
        if flags & PRESENT == 0 {
            return None;
        }
        Some(FrameProps {
            color_range: b[0],
            color_primaries: b[1],
            color_trc: b[2],
            colorspace: b[3],
            chroma_location: b[4],
            pict_type: b[5],
            key_frame: flags & KEY_FRAME != 0,
            interlaced: flags & INTERLACED != 0,
            top_field_first: flags & TOP_FIELD_FIRST != 0,
            sample_aspect_ratio: (words[1] as u32, (words[1] >> 32) as u32),
            duration_ns: words[2] as i64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nothing_written_is_no_properties() {
        assert_eq!(FrameProps::from_words([0, 0, 0]), None);
        assert_eq!(FrameProps::from_words([!(1u64 << 48), 7, 9]), None);
    }

    proptest! {
        #[test]
        fn every_value_crosses(range: u8, prim: u8, trc: u8, csp: u8, loc: u8, pict: u8,
                               key: bool, il: bool, tff: bool, num: u32, den: u32, dur: i64) {
            let props = FrameProps {
                color_range: range, color_primaries: prim, color_trc: trc, colorspace: csp,
                chroma_location: loc, pict_type: pict, key_frame: key, interlaced: il,
                top_field_first: tff, sample_aspect_ratio: (num, den), duration_ns: dur,
            };
            prop_assert_eq!(FrameProps::from_words(props.to_words()), Some(props));
        }
    }
}
