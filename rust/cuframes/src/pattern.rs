//! The deterministic test pattern of `cuframes publish` / `subscribe --verify`.
//!
//! Byte `x` of row `y` of plane `p` in frame `f` (frame index = seq − 1):
//!
//! ```text
//! 8-bit formats (nv12, nv16, yuv420p, yuv422p, yuv444p, yuva420p, bgra,
//! rgba, bgr0, rgb0):                    (x + 3·y + 7·f + 61·p) mod 256
//! 16-bit LE samples, s = x / 2, d significant bits shifted left by k:
//!                                       ((s + 3·y + 7·f + 61·p) mod 2^d) << k
//!   p010, p210, yuv444p10msb            d = 10, k = 6 (high bits)
//!   p012, p212, yuv444p12msb            d = 12, k = 4 (high bits)
//!   yuv420p10, yuv422p10, yuv444p10     d = 10, k = 0 (low bits)
//!   p016, p216, yuv444p16               d = 16, k = 0
//! ```
//!
//! So every sample is one the format can hold (its unused bits zero), and a
//! frame written in one 16-bit format fails the check of another.
//!
//! Only the picture bytes of each row (`row_bytes`) are defined; pitch
//! padding is not. Cheap to make and check, different in every frame, plane
//! and row, so a stale, torn or misplaced plane is caught.

use crate::format::{FrameLayout, PixelFormat};

/// Wrapping: values are taken mod 256 or 2^depth (divisors of 2^64), and a
/// seq read from a scribbled header may be anything.
fn row_base(frame: u64, plane: usize, y: usize) -> u64 {
    (3 * y as u64)
        .wrapping_add(frame.wrapping_mul(7))
        .wrapping_add(61 * plane as u64)
}

/// 16-bit formats: (modulus, left shift) of a sample's value.
fn sixteen_bit(format: PixelFormat) -> Option<(u64, u32)> {
    (format.bytes_per_sample() == 2).then(|| (1u64 << format.bit_depth(), format.sample_shift()))
}

/// Writes row `y` of plane `plane` of frame `frame` into `row` (`row_bytes` long).
pub fn fill_row(format: PixelFormat, frame: u64, plane: usize, y: usize, row: &mut [u8]) {
    let base = row_base(frame, plane, y);
    if let Some((modulus, shift)) = sixteen_bit(format) {
        for (s, sample) in row.chunks_exact_mut(2).enumerate() {
            let v = ((base.wrapping_add(s as u64) % modulus) << shift) as u16;
            sample.copy_from_slice(&v.to_le_bytes());
        }
    } else {
        let mut v = (base % 256) as u8;
        for byte in row.iter_mut() {
            *byte = v;
            v = v.wrapping_add(1);
        }
    }
}

/// Whether `row` is row `y` of plane `plane` of frame `frame`.
pub fn check_row(format: PixelFormat, frame: u64, plane: usize, y: usize, row: &[u8]) -> bool {
    let base = row_base(frame, plane, y);
    if let Some((modulus, shift)) = sixteen_bit(format) {
        row.chunks_exact(2).enumerate().all(|(s, sample)| {
            let v = ((base.wrapping_add(s as u64) % modulus) << shift) as u16;
            sample == v.to_le_bytes()
        })
    } else {
        let mut v = (base % 256) as u8;
        row.iter().all(|&byte| {
            let ok = byte == v;
            v = v.wrapping_add(1);
            ok
        })
    }
}

/// Fills every plane of a frame laid out as `layout`; `planes[p]` holds
/// plane p at the layout's pitch.
pub fn fill_frame(layout: &FrameLayout, frame: u64, planes: &mut [&mut [u8]]) {
    for (p, (plane, dst)) in layout.planes().iter().zip(planes.iter_mut()).enumerate() {
        for y in 0..plane.rows {
            let start = y * plane.pitch;
            fill_row(
                layout.format(),
                frame,
                p,
                y,
                &mut dst[start..start + plane.row_bytes],
            );
        }
    }
}

/// Checks plane `p` (bytes at the layout's pitch) of frame `frame`.
pub fn check_plane(layout: &FrameLayout, frame: u64, p: usize, bytes: &[u8]) -> bool {
    let plane = layout.planes()[p];
    (0..plane.rows).all(|y| {
        let start = y * plane.pitch;
        bytes
            .get(start..start + plane.row_bytes)
            .is_some_and(|row| check_row(layout.format(), frame, p, y, row))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_values() {
        let mut row = [0u8; 4];
        fill_row(PixelFormat::Nv12, 2, 1, 5, &mut row);
        // 3*5 + 7*2 + 61*1 = 90
        assert_eq!(row, [90, 91, 92, 93]);
        let mut wrap = [0u8; 3];
        fill_row(PixelFormat::Yuv420p, 0, 0, 85, &mut wrap);
        assert_eq!(wrap, [255, 0, 1]);
        let mut p010 = [0u8; 4];
        fill_row(PixelFormat::P010, 0, 0, 341, &mut p010);
        // 3*341 = 1023 → samples 1023, 0
        assert_eq!(p010, [0xC0, 0xFF, 0x00, 0x00]);
        // 4095 then 0 in the high 12 bits; the same in the low 10 bits: 1023, 0.
        let mut p012 = [0u8; 4];
        fill_row(PixelFormat::P012, 0, 0, 1365, &mut p012);
        assert_eq!(p012, [0xF0, 0xFF, 0x00, 0x00]);
        let mut low = [0u8; 4];
        fill_row(PixelFormat::Yuv420p10, 0, 0, 341, &mut low);
        assert_eq!(low, [0xFF, 0x03, 0x00, 0x00]);
    }

    /// Every sample holds only the bits its format has: MSB formats keep
    /// the low bits zero, LOW-bit formats stay below 2^depth.
    #[test]
    fn samples_respect_each_format_s_bits() {
        for format in PixelFormat::ALL.into_iter().filter(|f| f.bytes_per_sample() == 2) {
            let unused = !(((1u32 << format.bit_depth()) - 1) << format.sample_shift()) & 0xFFFF;
            // A row of 65536 samples runs through every value once.
            let mut row = vec![0u8; 2 << 16];
            fill_row(format, 3, 1, 7, &mut row);
            let mut seen = 0u32;
            for sample in row.chunks_exact(2) {
                let v = u32::from(u16::from_le_bytes([sample[0], sample[1]]));
                assert_eq!(v & unused, 0, "{format}: {v:#06x} sets unused bits");
                seen |= v;
            }
            assert_eq!(
                seen,
                !unused & 0xFFFF,
                "{format}: every significant bit is exercised"
            );
        }
    }

    /// The same bytes are not the pattern of a format whose samples sit elsewhere.
    #[test]
    fn a_frame_of_one_16_bit_format_fails_another_s_check() {
        let mut row = [0u8; 64];
        fill_row(PixelFormat::P012, 4, 0, 2, &mut row);
        assert!(check_row(PixelFormat::P012, 4, 0, 2, &row));
        for other in [PixelFormat::P010, PixelFormat::P016, PixelFormat::Yuv420p10] {
            assert!(!check_row(other, 4, 0, 2, &row), "{other}");
        }
    }

    #[test]
    fn every_format_round_trips_and_detects_changes() {
        for format in PixelFormat::ALL {
            let layout = FrameLayout::aligned(format, 37, 21, 64).unwrap();
            let mut storage: Vec<Vec<u8>> = layout
                .planes()
                .iter()
                .map(|p| vec![0; p.pitch * p.rows])
                .collect();
            let mut planes: Vec<&mut [u8]> = storage.iter_mut().map(|v| v.as_mut_slice()).collect();
            fill_frame(&layout, 9, &mut planes);
            for (p, plane) in storage.iter().enumerate() {
                assert!(check_plane(&layout, 9, p, plane), "{format} plane {p}");
                assert!(
                    !check_plane(&layout, 10, p, plane),
                    "{format} plane {p} other frame"
                );
            }
            storage[0][5] ^= 0x40;
            assert!(!check_plane(&layout, 9, 0, &storage[0]), "{format} flipped bit");
        }
    }
}
