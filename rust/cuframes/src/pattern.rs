//! The deterministic test pattern of `cuframes publish` / `subscribe --verify`.
//!
//! Byte `x` of row `y` of plane `p` in frame `f` (frame index = seq − 1):
//!
//! ```text
//! 8-bit formats (nv12, yuv420p, yuv444p, bgra, rgba, bgr0, rgb0):
//!                                       (x + 3·y + 7·f + 61·p) mod 256
//! p010 (16-bit LE samples, s = x / 2):  ((s + 3·y + 7·f + 61·p) mod 1024) << 6
//! p016, yuv444p16 (16-bit LE samples):  (s + 3·y + 7·f + 61·p) mod 65536
//! ```
//!
//! Only the picture bytes of each row (`row_bytes`) are defined; pitch
//! padding is not. Cheap to make and check, different in every frame, plane
//! and row, so a stale, torn or misplaced plane is caught.

use crate::format::{FrameLayout, PixelFormat};

/// Wrapping: values are taken mod 256, 1024 or 65536 (divisors of 2^64), and a
/// seq read from a scribbled header may be anything.
fn row_base(frame: u64, plane: usize, y: usize) -> u64 {
    (3 * y as u64)
        .wrapping_add(frame.wrapping_mul(7))
        .wrapping_add(61 * plane as u64)
}

/// 16-bit formats: (modulus, left shift) of a sample's value.
fn sixteen_bit(format: PixelFormat) -> Option<(u64, u32)> {
    match format {
        PixelFormat::P010 => Some((1024, 6)),
        PixelFormat::P016 | PixelFormat::Yuv444p16 => Some((65536, 0)),
        _ => None,
    }
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
