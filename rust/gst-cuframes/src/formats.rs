//! cuframes pixel formats ↔ GStreamer video formats.
//!
//! Only the pairs whose planes, sample sizes, subsampling and bit positions
//! are the same byte for byte are listed (the unit tests check each against
//! GStreamer's own format description). cuframes formats GStreamer has no
//! exact twin for: P210, P212, P216 (GStreamer 1.22 has no 16-bit 4:2:2
//! semi-planar format), YUV444P10MSB and YUV444P12MSB (GStreamer's Y444_10LE
//! and Y444_12LE keep the value in the low bits).

use cuframes::PixelFormat;
use gst_video::VideoFormat;

/// Every pair, in cuframes' wire order.
pub const PAIRS: [(PixelFormat, VideoFormat); 17] = [
    (PixelFormat::Nv12, VideoFormat::Nv12),
    (PixelFormat::Yuv420p, VideoFormat::I420),
    (PixelFormat::P010, VideoFormat::P01010le),
    (PixelFormat::Bgra, VideoFormat::Bgra),
    (PixelFormat::P016, VideoFormat::P016Le),
    (PixelFormat::Yuv444p, VideoFormat::Y444),
    (PixelFormat::Yuv444p16, VideoFormat::Y44416le),
    (PixelFormat::Rgba, VideoFormat::Rgba),
    (PixelFormat::Bgr0, VideoFormat::Bgrx),
    (PixelFormat::Rgb0, VideoFormat::Rgbx),
    (PixelFormat::P012, VideoFormat::P012Le),
    (PixelFormat::Nv16, VideoFormat::Nv16),
    (PixelFormat::Yuv422p, VideoFormat::Y42b),
    (PixelFormat::Yuv420p10, VideoFormat::I42010le),
    (PixelFormat::Yuv422p10, VideoFormat::I42210le),
    (PixelFormat::Yuv444p10, VideoFormat::Y44410le),
    (PixelFormat::Yuva420p, VideoFormat::A420),
];

/// The GStreamer format of a cuframes format, if it has one.
pub fn to_gst(format: PixelFormat) -> Option<VideoFormat> {
    PAIRS.iter().find(|(c, _)| *c == format).map(|&(_, g)| g)
}

/// The cuframes format of a GStreamer format, if it has one.
pub fn from_gst(format: VideoFormat) -> Option<PixelFormat> {
    PAIRS.iter().find(|(_, g)| *g == format).map(|&(c, _)| c)
}

/// The caps both elements accept or produce: `video/x-raw` in every format
/// of [`PAIRS`], any size cuframes takes, any frame rate; in CUDA memory
/// (`memory:CUDAMemory`, first: preferred) and in system memory.
pub fn template_caps() -> gst::Caps {
    let mut caps = raw_caps(Some(crate::gstcuda::CAPS_FEATURE_CUDA_MEMORY));
    caps.merge(raw_caps(None));
    caps
}

/// `video/x-raw` in every format of [`PAIRS`], with `feature` if any.
pub fn raw_caps(feature: Option<&str>) -> gst::Caps {
    let max = cuframes::format::MAX_DIMENSION as i32;
    let mut caps = gst_video::VideoCapsBuilder::new()
        .format_list(PAIRS.iter().map(|&(_, g)| g))
        .width_range(1..=max)
        .height_range(1..=max)
        .framerate_range(gst::Fraction::new(0, 1)..=gst::Fraction::new(i32::MAX, 1))
        .build();
    if let Some(feature) = feature {
        caps.get_mut()
            .expect("new caps are writable")
            .set_features_simple(Some(gst::CapsFeatures::new([feature])));
    }
    caps
}

/// Whether `caps` (fixed) are in CUDA memory.
pub fn is_cuda(caps: &gst::CapsRef) -> bool {
    caps.features(0)
        .is_some_and(|f| f.contains(crate::gstcuda::CAPS_FEATURE_CUDA_MEMORY))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What cuframes says of each component (Y/R, U/G, V/B, A): its plane,
    /// its byte offset within a pixel group of that plane and the bytes
    /// from one sample to the next in a row.
    fn cuframes_components(format: PixelFormat) -> Vec<(u32, u32, i32)> {
        let s = format.bytes_per_sample() as u32;
        let si = s as i32;
        match format {
            // Y plane, then U and V interleaved in plane 1.
            PixelFormat::Nv12
            | PixelFormat::Nv16
            | PixelFormat::P010
            | PixelFormat::P012
            | PixelFormat::P016 => vec![(0, 0, si), (1, 0, 2 * si), (1, s, 2 * si)],
            // Y, U, V (and A) planes.
            PixelFormat::Yuv420p
            | PixelFormat::Yuv444p
            | PixelFormat::Yuv444p16
            | PixelFormat::Yuv422p
            | PixelFormat::Yuv420p10
            | PixelFormat::Yuv422p10
            | PixelFormat::Yuv444p10 => vec![(0, 0, si), (1, 0, si), (2, 0, si)],
            PixelFormat::Yuva420p => vec![(0, 0, 1), (1, 0, 1), (2, 0, 1), (3, 0, 1)],
            // Packed: byte offsets of R, G, B (and A).
            PixelFormat::Rgba => vec![(0, 0, 4), (0, 1, 4), (0, 2, 4), (0, 3, 4)],
            PixelFormat::Bgra => vec![(0, 2, 4), (0, 1, 4), (0, 0, 4), (0, 3, 4)],
            PixelFormat::Rgb0 => vec![(0, 0, 4), (0, 1, 4), (0, 2, 4)],
            PixelFormat::Bgr0 => vec![(0, 2, 4), (0, 1, 4), (0, 0, 4)],
            other => panic!("{other} has no GStreamer twin"),
        }
    }

    #[test]
    fn pairs_match_byte_for_byte() {
        gst::init().unwrap();
        for (cf, gf) in PAIRS {
            let info = gst_video::VideoFormatInfo::from_format(gf);
            assert_eq!(info.n_planes() as usize, cf.plane_count(), "{cf} vs {gf}: planes");
            let want = cuframes_components(cf);
            assert_eq!(
                info.n_components() as usize,
                want.len(),
                "{cf} vs {gf}: components"
            );
            for (c, &(plane, offset, pstride)) in want.iter().enumerate() {
                assert_eq!(info.plane()[c], plane, "{cf} vs {gf}: plane of component {c}");
                // (poffset is not compared: GStreamer 1.22 says 1 for the V
                // sample of P010/P012/P016, whose unpackers read it at byte 2;
                // `samples_land_where_cuframes_puts_them` checks real bytes.)
                let _ = offset;
                assert_eq!(
                    info.pixel_stride()[c],
                    pstride,
                    "{cf} vs {gf}: pixel stride of component {c}"
                );
                assert_eq!(
                    info.depth()[c],
                    cf.bit_depth(),
                    "{cf} vs {gf}: depth of component {c}"
                );
                // GStreamer's shift counts from the sample's low bit, as cuframes'.
                assert_eq!(
                    info.shift()[c],
                    cf.sample_shift(),
                    "{cf} vs {gf}: shift of component {c}"
                );
            }
            if cf.bytes_per_sample() == 2 {
                assert!(info.is_le(), "{gf} is little-endian");
            }
        }
    }

    /// Bytes laid out the cuframes way, unpacked by GStreamer's own
    /// unpacker: every component of pixels 0 and 1 of row 0 must come out
    /// as the sample cuframes put there.
    #[test]
    fn samples_land_where_cuframes_puts_them() {
        gst::init().unwrap();
        for (cf, gf) in PAIRS {
            let (w, h) = (2u32, 2u32);
            let layout = cuframes::FrameLayout::aligned(cf, w, h, 1).unwrap();
            let planes: Vec<Vec<u8>> = layout
                .planes()
                .iter()
                .enumerate()
                .map(|(p, pl)| {
                    (0..pl.pitch * pl.rows)
                        .map(|k| (p * 64 + k * 7 + 13) as u8)
                        .collect()
                })
                .collect();
            let strides: Vec<i32> = layout.planes().iter().map(|p| p.pitch as i32).collect();
            let info = gst_video::VideoFormatInfo::from_format(gf);
            let wide = cf.bytes_per_sample() == 2;
            let out_px = if wide { 8 } else { 4 };
            let mut out = vec![0u8; out_px * w as usize];
            let src: Vec<&[u8]> = planes.iter().map(Vec::as_slice).collect();
            info.unpack(
                gst_video::VideoPackFlags::TRUNCATE_RANGE,
                &mut out,
                &src,
                &strides,
                0,
                0,
                w as i32,
            );
            for x in 0..w as usize {
                for (c, &(plane, offset, pstride)) in cuframes_components(cf).iter().enumerate() {
                    let pl = layout.planes()[plane as usize];
                    let samples = pl.row_bytes / pstride as usize;
                    let column = x * samples / w as usize;
                    let at = offset as usize + column * pstride as usize;
                    let raw = if wide {
                        u16::from_le_bytes([planes[plane as usize][at], planes[plane as usize][at + 1]])
                            as u32
                    } else {
                        planes[plane as usize][at] as u32
                    };
                    let depth = cf.bit_depth();
                    let value = (raw >> cf.sample_shift()) & ((1u32 << depth) - 1);
                    // ARGB / AYUV (or their 64-bit forms): alpha first.
                    let slot = if c == 3 { 0 } else { c + 1 };
                    let got = if wide {
                        let i = x * 8 + slot * 2;
                        u16::from_ne_bytes([out[i], out[i + 1]]) as u32 >> (16 - depth)
                    } else {
                        out[x * 4 + slot] as u32
                    };
                    assert_eq!(got, value, "{cf} vs {gf}: pixel {x} component {c}");
                }
            }
        }
    }

    #[test]
    fn plane_geometry_matches() {
        gst::init().unwrap();
        // Odd sizes too: chroma rounds up on both sides.
        for (cf, gf) in PAIRS {
            for (w, h) in [(320, 240), (33, 17), (1, 1)] {
                let layout = cuframes::FrameLayout::aligned(cf, w, h, 1).unwrap();
                let info = gst_video::VideoInfo::builder(gf, w, h).build().unwrap();
                let finfo = info.format_info();
                for (p, plane) in layout.planes().iter().enumerate() {
                    let comp = (0..finfo.n_components())
                        .find(|&c| finfo.plane()[c as usize] == p as u32)
                        .unwrap();
                    let rows = finfo.scale_height(comp as u8, h) as usize;
                    let cols = finfo.scale_width(comp as u8, w) as usize;
                    assert_eq!(rows, plane.rows, "{cf} {w}x{h}: rows of plane {p}");
                    let row_bytes = cols * finfo.pixel_stride()[comp as usize] as usize;
                    assert_eq!(row_bytes, plane.row_bytes, "{cf} {w}x{h}: row bytes of plane {p}");
                    assert!(info.stride()[p] as usize >= plane.row_bytes);
                }
            }
        }
    }

    #[test]
    fn round_trip() {
        for (cf, gf) in PAIRS {
            assert_eq!(to_gst(cf), Some(gf));
            assert_eq!(from_gst(gf), Some(cf));
        }
        for missing in [
            PixelFormat::P210,
            PixelFormat::P212,
            PixelFormat::P216,
            PixelFormat::Yuv444p10Msb,
            PixelFormat::Yuv444p12Msb,
        ] {
            assert_eq!(to_gst(missing), None);
        }
        assert_eq!(from_gst(VideoFormat::Yuy2), None);
    }
}
