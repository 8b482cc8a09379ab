//! Pixel formats and plane geometry.
//!
//! A frame is its planes laid out back to back: plane 0 at offset 0, plane
//! p+1 right after plane p's `pitch × rows` bytes. Publisher and subscriber
//! both derive this layout from the frame meta (format, width, height,
//! pitch_y, pitch_uv), so nothing but those five numbers crosses the wire.

use crate::error::{Error, ErrorKind, Result};

/// Largest width or height accepted (a bound for untrusted headers, too).
pub const MAX_DIMENSION: u32 = 16384;

/// Pixel formats, with stable wire numbers (frame meta `format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum PixelFormat {
    /// 8-bit 4:2:0, Y plane then interleaved UV plane (NVDEC's native output).
    Nv12 = 1,
    /// 8-bit 4:2:0, three planes Y, U, V (U and V share `pitch_uv`).
    Yuv420p = 2,
    /// 10-bit 4:2:0 in 16-bit little-endian samples (value in the high 10
    /// bits), Y plane then interleaved UV plane.
    P010 = 3,
    /// 8-bit packed B, G, R, A.
    Bgra = 4,
    /// 16-bit 4:2:0 (LE samples, full 16 bits), Y plane then interleaved UV
    /// plane (NVDEC's 12-bit output).
    P016 = 5,
    /// 8-bit 4:4:4, three full-size planes Y, U, V (NVDEC's 4:4:4 output).
    Yuv444p = 6,
    /// 16-bit 4:4:4 (LE samples), three full-size planes (NVDEC's 10/12-bit
    /// 4:4:4 output).
    Yuv444p16 = 7,
    /// 8-bit packed R, G, B, A (FFmpeg's CUDA frames `bgr32`).
    Rgba = 8,
    /// 8-bit packed B, G, R, padding (FFmpeg's CUDA frames `0rgb32`).
    Bgr0 = 9,
    /// 8-bit packed R, G, B, padding (FFmpeg's CUDA frames `0bgr32`).
    Rgb0 = 10,
    /// 12-bit 4:2:0 in 16-bit LE samples (value in the high 12 bits, the
    /// low 4 zero), Y plane then interleaved UV plane (NVDEC's 12-bit output
    /// from FFmpeg 8.1 on; 7.1 called the same bytes P016).
    P012 = 11,
    /// 8-bit 4:2:2, Y plane then interleaved UV plane of full height.
    Nv16 = 12,
    /// 10-bit 4:2:2 in 16-bit LE samples (value in the high 10 bits), Y
    /// plane then interleaved UV plane of full height.
    P210 = 13,
    /// 12-bit 4:2:2 in 16-bit LE samples (value in the high 12 bits), as P210.
    P212 = 14,
    /// 16-bit 4:2:2 (LE samples, full 16 bits), as P210.
    P216 = 15,
    /// 8-bit 4:2:2, three planes Y, U, V (U and V half width, full height;
    /// they share `pitch_uv`).
    Yuv422p = 16,
    /// 10-bit 4:2:0 in 16-bit LE samples (value in the LOW 10 bits), three
    /// planes Y, U, V.
    Yuv420p10 = 17,
    /// 10-bit 4:2:2 in 16-bit LE samples (value in the low 10 bits), three
    /// planes Y, U, V.
    Yuv422p10 = 18,
    /// 10-bit 4:4:4 in 16-bit LE samples (value in the low 10 bits), three
    /// full-size planes.
    Yuv444p10 = 19,
    /// 10-bit 4:4:4 in 16-bit LE samples (value in the HIGH 10 bits, the low
    /// 6 zero), three full-size planes (NVDEC's 10-bit 4:4:4 output from
    /// FFmpeg 8.1 on; 7.1 called the same bytes YUV444P16).
    Yuv444p10Msb = 20,
    /// 12-bit 4:4:4 in 16-bit LE samples (value in the high 12 bits), three
    /// full-size planes (NVDEC's 12-bit 4:4:4 output from FFmpeg 8.1 on).
    Yuv444p12Msb = 21,
    /// 8-bit 4:2:0 with alpha: four planes Y, U, V, A (A full size like Y,
    /// and like Y at `pitch_y`).
    Yuva420p = 22,
}

/// How one plane relates to the frame's width and height.
#[derive(Clone, Copy, Debug)]
struct PlaneShape {
    /// Horizontal subsampling (1 or 2): columns = ceil(width / x_sub).
    x_sub: u32,
    /// Vertical subsampling (1 or 2): rows = ceil(height / y_sub).
    y_sub: u32,
    /// Bytes per column (e.g. 2 for NV12's interleaved UV pair).
    bytes_per_column: u32,
}

const LUMA8: PlaneShape = PlaneShape {
    x_sub: 1,
    y_sub: 1,
    bytes_per_column: 1,
};
const CHROMA8: PlaneShape = PlaneShape {
    x_sub: 2,
    y_sub: 2,
    bytes_per_column: 1,
};
const UV8: PlaneShape = PlaneShape {
    x_sub: 2,
    y_sub: 2,
    bytes_per_column: 2,
};
const LUMA16: PlaneShape = PlaneShape {
    x_sub: 1,
    y_sub: 1,
    bytes_per_column: 2,
};
const UV16: PlaneShape = PlaneShape {
    x_sub: 2,
    y_sub: 2,
    bytes_per_column: 4,
};
const PACKED32: PlaneShape = PlaneShape {
    x_sub: 1,
    y_sub: 1,
    bytes_per_column: 4,
};
const CHROMA8_422: PlaneShape = PlaneShape {
    x_sub: 2,
    y_sub: 1,
    bytes_per_column: 1,
};
const UV8_422: PlaneShape = PlaneShape {
    x_sub: 2,
    y_sub: 1,
    bytes_per_column: 2,
};
const CHROMA16: PlaneShape = PlaneShape {
    x_sub: 2,
    y_sub: 2,
    bytes_per_column: 2,
};
const CHROMA16_422: PlaneShape = PlaneShape {
    x_sub: 2,
    y_sub: 1,
    bytes_per_column: 2,
};
const UV16_422: PlaneShape = PlaneShape {
    x_sub: 2,
    y_sub: 1,
    bytes_per_column: 4,
};

/// Whether plane `index` is laid out at `pitch_y` (else `pitch_uv`): the
/// wire carries two pitches, so plane 0 (Y, or the packed plane) and plane 3
/// (alpha, the size of Y) take `pitch_y`, the chroma planes 1 and 2
/// `pitch_uv` (protocol §2.6, D36).
fn uses_pitch_y(index: usize) -> bool {
    index == 0 || index == 3
}

impl PixelFormat {
    /// Every supported format, in wire order.
    pub const ALL: [PixelFormat; 22] = [
        PixelFormat::Nv12,
        PixelFormat::Yuv420p,
        PixelFormat::P010,
        PixelFormat::Bgra,
        PixelFormat::P016,
        PixelFormat::Yuv444p,
        PixelFormat::Yuv444p16,
        PixelFormat::Rgba,
        PixelFormat::Bgr0,
        PixelFormat::Rgb0,
        PixelFormat::P012,
        PixelFormat::Nv16,
        PixelFormat::P210,
        PixelFormat::P212,
        PixelFormat::P216,
        PixelFormat::Yuv422p,
        PixelFormat::Yuv420p10,
        PixelFormat::Yuv422p10,
        PixelFormat::Yuv444p10,
        PixelFormat::Yuv444p10Msb,
        PixelFormat::Yuv444p12Msb,
        PixelFormat::Yuva420p,
    ];

    /// The format for a wire number.
    pub fn from_wire(value: u32) -> Option<PixelFormat> {
        Self::ALL.into_iter().find(|f| f.wire() == value)
    }

    /// The highest wire number this library knows: a larger one is a format
    /// added after it.
    pub fn max_wire() -> u32 {
        Self::ALL.map(PixelFormat::wire).into_iter().max().unwrap_or(0)
    }

    /// The wire number.
    pub fn wire(self) -> u32 {
        self as u32
    }

    /// Lower-case name, as the CLI spells it: FFmpeg's pix_fmt name without
    /// its byte-order suffix (`p010` for `p010le`).
    pub fn name(self) -> &'static str {
        match self {
            PixelFormat::Nv12 => "nv12",
            PixelFormat::Yuv420p => "yuv420p",
            PixelFormat::P010 => "p010",
            PixelFormat::Bgra => "bgra",
            PixelFormat::P016 => "p016",
            PixelFormat::Yuv444p => "yuv444p",
            PixelFormat::Yuv444p16 => "yuv444p16",
            PixelFormat::Rgba => "rgba",
            PixelFormat::Bgr0 => "bgr0",
            PixelFormat::Rgb0 => "rgb0",
            PixelFormat::P012 => "p012",
            PixelFormat::Nv16 => "nv16",
            PixelFormat::P210 => "p210",
            PixelFormat::P212 => "p212",
            PixelFormat::P216 => "p216",
            PixelFormat::Yuv422p => "yuv422p",
            PixelFormat::Yuv420p10 => "yuv420p10",
            PixelFormat::Yuv422p10 => "yuv422p10",
            PixelFormat::Yuv444p10 => "yuv444p10",
            PixelFormat::Yuv444p10Msb => "yuv444p10msb",
            PixelFormat::Yuv444p12Msb => "yuv444p12msb",
            PixelFormat::Yuva420p => "yuva420p",
        }
    }

    /// FFmpeg's pix_fmt name (`av_get_pix_fmt_name`): [`PixelFormat::name`],
    /// with `le` appended for the formats of 16-bit samples.
    pub fn ffmpeg_name(self) -> String {
        match self.bytes_per_sample() {
            2 => format!("{}le", self.name()),
            _ => self.name().to_owned(),
        }
    }

    /// Every name, comma-separated (for messages).
    pub fn names() -> String {
        Self::ALL.map(PixelFormat::name).join(", ")
    }

    /// Parses a name as printed by [`PixelFormat::name`] or FFmpeg's
    /// ([`PixelFormat::ffmpeg_name`]), case-insensitive.
    pub fn parse(name: &str) -> Result<PixelFormat> {
        Self::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name) || f.ffmpeg_name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Format,
                    format!("unknown pixel format '{name}' (known: {})", Self::names()),
                )
            })
    }

    /// Informative bits per pixel (frame meta `bits_per_pixel`): the bits a
    /// pixel takes in memory, the unused bits of 16-bit samples included.
    pub fn bits_per_pixel(self) -> u32 {
        self.shapes()
            .iter()
            .map(|s| 8 * s.bytes_per_column / (s.x_sub * s.y_sub))
            .sum()
    }

    /// Number of planes.
    pub fn plane_count(self) -> usize {
        self.shapes().len()
    }

    /// Bytes per sample (1 for 8-bit formats, 2 for the 16-bit ones, 1 per
    /// channel of the packed RGB formats).
    pub fn bytes_per_sample(self) -> usize {
        match self.bit_depth() {
            8 => 1,
            _ => 2,
        }
    }

    /// Significant bits of a sample: 8, 10, 12 or 16.
    pub fn bit_depth(self) -> u32 {
        match self {
            PixelFormat::P010
            | PixelFormat::P210
            | PixelFormat::Yuv420p10
            | PixelFormat::Yuv422p10
            | PixelFormat::Yuv444p10
            | PixelFormat::Yuv444p10Msb => 10,
            PixelFormat::P012 | PixelFormat::P212 | PixelFormat::Yuv444p12Msb => 12,
            PixelFormat::P016 | PixelFormat::P216 | PixelFormat::Yuv444p16 => 16,
            PixelFormat::Nv12
            | PixelFormat::Yuv420p
            | PixelFormat::Bgra
            | PixelFormat::Yuv444p
            | PixelFormat::Rgba
            | PixelFormat::Bgr0
            | PixelFormat::Rgb0
            | PixelFormat::Nv16
            | PixelFormat::Yuv422p
            | PixelFormat::Yuva420p => 8,
        }
    }

    /// Where the significant bits sit in a 16-bit sample, as a left shift:
    /// 16 − [`bit_depth`](Self::bit_depth) for the formats that keep them in
    /// the high bits (P010, P012, P210, P212, YUV444P10MSB, YUV444P12MSB:
    /// the low bits are zero), 0 for those that keep them in the low bits
    /// (YUV420P10, YUV422P10, YUV444P10: the high bits are zero), for the
    /// full 16-bit formats and for the 8-bit ones.
    pub fn sample_shift(self) -> u32 {
        match self {
            PixelFormat::P010
            | PixelFormat::P012
            | PixelFormat::P210
            | PixelFormat::P212
            | PixelFormat::Yuv444p10Msb
            | PixelFormat::Yuv444p12Msb => 16 - self.bit_depth(),
            _ => 0,
        }
    }

    fn shapes(self) -> &'static [PlaneShape] {
        match self {
            PixelFormat::Nv12 => &[LUMA8, UV8],
            PixelFormat::Yuv420p => &[LUMA8, CHROMA8, CHROMA8],
            PixelFormat::P010 | PixelFormat::P012 | PixelFormat::P016 => &[LUMA16, UV16],
            PixelFormat::Bgra | PixelFormat::Rgba | PixelFormat::Bgr0 | PixelFormat::Rgb0 => &[PACKED32],
            PixelFormat::Yuv444p => &[LUMA8, LUMA8, LUMA8],
            PixelFormat::Yuv444p16
            | PixelFormat::Yuv444p10
            | PixelFormat::Yuv444p10Msb
            | PixelFormat::Yuv444p12Msb => &[LUMA16, LUMA16, LUMA16],
            PixelFormat::Nv16 => &[LUMA8, UV8_422],
            PixelFormat::P210 | PixelFormat::P212 | PixelFormat::P216 => &[LUMA16, UV16_422],
            PixelFormat::Yuv422p => &[LUMA8, CHROMA8_422, CHROMA8_422],
            PixelFormat::Yuv420p10 => &[LUMA16, CHROMA16, CHROMA16],
            PixelFormat::Yuv422p10 => &[LUMA16, CHROMA16_422, CHROMA16_422],
            PixelFormat::Yuva420p => &[LUMA8, CHROMA8, CHROMA8, LUMA8],
        }
    }
}

impl std::fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One plane's place in a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaneLayout {
    /// Byte offset of the plane from the frame start.
    pub offset: usize,
    /// Bytes from one row to the next.
    pub pitch: usize,
    /// Bytes of picture in a row (≤ pitch).
    pub row_bytes: usize,
    /// Number of rows.
    pub rows: usize,
}

/// The complete geometry of a frame: format, size and every plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameLayout {
    format: PixelFormat,
    width: u32,
    height: u32,
    planes: Vec<PlaneLayout>,
    size: usize,
}

fn check_dimensions(width: u32, height: u32) -> Result<()> {
    if width == 0 || height == 0 || width > MAX_DIMENSION || height > MAX_DIMENSION {
        return Err(Error::invalid(format!(
            "frame size {width}x{height} is out of range (1..={MAX_DIMENSION} each way)"
        )));
    }
    Ok(())
}

impl FrameLayout {
    /// The layout with the given pitches: `pitch_y` for plane 0 and the alpha
    /// plane 3, `pitch_uv` for the chroma planes 1 and 2. Fails when a pitch is shorter than its row, when
    /// a single-plane format has a `pitch_uv` other than 0 (protocol §2.6: the
    /// field is 0 there; a meta that says otherwise is refused, not read two
    /// ways), or when the frame would not fit in memory.
    pub fn with_pitches(
        format: PixelFormat,
        width: u32,
        height: u32,
        pitch_y: usize,
        pitch_uv: usize,
    ) -> Result<FrameLayout> {
        check_dimensions(width, height)?;
        if format.plane_count() == 1 && pitch_uv != 0 {
            return Err(Error::invalid(format!(
                "{format} has one plane: pitch_uv must be 0, not {pitch_uv}"
            )));
        }
        let mut planes = Vec::with_capacity(format.plane_count());
        let mut offset = 0usize;
        for (index, shape) in format.shapes().iter().enumerate() {
            let columns = width.div_ceil(shape.x_sub) as usize;
            let row_bytes = columns * shape.bytes_per_column as usize;
            let rows = height.div_ceil(shape.y_sub) as usize;
            let pitch = if uses_pitch_y(index) { pitch_y } else { pitch_uv };
            if pitch < row_bytes {
                return Err(Error::invalid(format!(
                    "{format} {width}x{height}: plane {index} pitch {pitch} is shorter than its row ({row_bytes} bytes)"
                )));
            }
            planes.push(PlaneLayout {
                offset,
                pitch,
                row_bytes,
                rows,
            });
            offset = pitch
                .checked_mul(rows)
                .and_then(|bytes| bytes.checked_add(offset))
                .filter(|&end| end <= isize::MAX as usize)
                .ok_or_else(|| Error::invalid("frame size overflows"))?;
        }
        Ok(FrameLayout {
            format,
            width,
            height,
            planes,
            size: offset,
        })
    }

    /// The layout with every pitch its row rounded up to `align` bytes (a
    /// power of two): each of the two pitches the longest row of the planes
    /// that use it.
    pub fn aligned(format: PixelFormat, width: u32, height: u32, align: usize) -> Result<FrameLayout> {
        check_dimensions(width, height)?;
        assert!(align.is_power_of_two(), "alignment must be a power of two");
        let longest_row = |of_pitch_y: bool| {
            format
                .shapes()
                .iter()
                .enumerate()
                .filter(|(index, _)| uses_pitch_y(*index) == of_pitch_y)
                .map(|(_, shape)| (width.div_ceil(shape.x_sub) * shape.bytes_per_column) as usize)
                .max()
        };
        let pitch_y = longest_row(true).unwrap_or(0).next_multiple_of(align);
        let pitch_uv = longest_row(false).map_or(0, |row| row.next_multiple_of(align));
        FrameLayout::with_pitches(format, width, height, pitch_y, pitch_uv)
    }

    /// The pixel format.
    pub fn format(&self) -> PixelFormat {
        self.format
    }

    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// Every plane, in order.
    pub fn planes(&self) -> &[PlaneLayout] {
        &self.planes
    }

    /// Plane 0's pitch (frame meta `pitch_y`).
    pub fn pitch_y(&self) -> usize {
        self.planes[0].pitch
    }

    /// The chroma pitch (frame meta `pitch_uv`), 0 for single-plane formats.
    pub fn pitch_uv(&self) -> usize {
        self.planes.get(1).map_or(0, |p| p.pitch)
    }

    /// Total bytes of one frame (frame meta `frame_size_bytes`).
    pub fn size(&self) -> usize {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_numbers_are_stable() {
        assert_eq!(PixelFormat::Nv12.wire(), 1);
        assert_eq!(PixelFormat::Yuv420p.wire(), 2);
        assert_eq!(PixelFormat::P010.wire(), 3);
        assert_eq!(PixelFormat::Bgra.wire(), 4);
        assert_eq!(PixelFormat::from_wire(0), None);
        assert_eq!(PixelFormat::P016.wire(), 5);
        assert_eq!(PixelFormat::Rgb0.wire(), 10);
        for (wire, format) in [
            (11, PixelFormat::P012),
            (12, PixelFormat::Nv16),
            (13, PixelFormat::P210),
            (14, PixelFormat::P212),
            (15, PixelFormat::P216),
            (16, PixelFormat::Yuv422p),
            (17, PixelFormat::Yuv420p10),
            (18, PixelFormat::Yuv422p10),
            (19, PixelFormat::Yuv444p10),
            (20, PixelFormat::Yuv444p10Msb),
            (21, PixelFormat::Yuv444p12Msb),
            (22, PixelFormat::Yuva420p),
        ] {
            assert_eq!(format.wire(), wire, "{format}");
        }
        assert_eq!(PixelFormat::from_wire(23), None);
        assert_eq!(PixelFormat::max_wire(), 22);
        for (n, f) in PixelFormat::ALL.into_iter().enumerate() {
            assert_eq!(f.wire(), n as u32 + 1, "ALL is in wire order");
            assert_eq!(PixelFormat::from_wire(f.wire()), Some(f));
            assert_eq!(PixelFormat::parse(f.name()).unwrap(), f);
            assert_eq!(PixelFormat::parse(&f.ffmpeg_name()).unwrap(), f);
        }
        assert_eq!(PixelFormat::parse("NV12").unwrap(), PixelFormat::Nv12);
        assert_eq!(PixelFormat::parse("rgb24").unwrap_err().kind(), ErrorKind::Format);
    }

    #[test]
    fn ffmpeg_names() {
        for (format, name) in [
            (PixelFormat::Nv12, "nv12"),
            (PixelFormat::P010, "p010le"),
            (PixelFormat::Yuv444p16, "yuv444p16le"),
            (PixelFormat::P012, "p012le"),
            (PixelFormat::Nv16, "nv16"),
            (PixelFormat::P210, "p210le"),
            (PixelFormat::P212, "p212le"),
            (PixelFormat::P216, "p216le"),
            (PixelFormat::Yuv422p, "yuv422p"),
            (PixelFormat::Yuv420p10, "yuv420p10le"),
            (PixelFormat::Yuv422p10, "yuv422p10le"),
            (PixelFormat::Yuv444p10, "yuv444p10le"),
            (PixelFormat::Yuv444p10Msb, "yuv444p10msble"),
            (PixelFormat::Yuv444p12Msb, "yuv444p12msble"),
            (PixelFormat::Yuva420p, "yuva420p"),
        ] {
            assert_eq!(format.ffmpeg_name(), name);
        }
    }

    #[test]
    fn sample_bits() {
        // (format, bytes per sample, significant bits, left shift)
        for (format, bytes, depth, shift) in [
            (PixelFormat::Nv12, 1, 8, 0),
            (PixelFormat::P010, 2, 10, 6),
            (PixelFormat::P016, 2, 16, 0),
            (PixelFormat::Yuv444p16, 2, 16, 0),
            (PixelFormat::P012, 2, 12, 4),
            (PixelFormat::Nv16, 1, 8, 0),
            (PixelFormat::P210, 2, 10, 6),
            (PixelFormat::P212, 2, 12, 4),
            (PixelFormat::P216, 2, 16, 0),
            (PixelFormat::Yuv422p, 1, 8, 0),
            (PixelFormat::Yuv420p10, 2, 10, 0),
            (PixelFormat::Yuv422p10, 2, 10, 0),
            (PixelFormat::Yuv444p10, 2, 10, 0),
            (PixelFormat::Yuv444p10Msb, 2, 10, 6),
            (PixelFormat::Yuv444p12Msb, 2, 12, 4),
            (PixelFormat::Yuva420p, 1, 8, 0),
        ] {
            assert_eq!(format.bytes_per_sample(), bytes, "{format}");
            assert_eq!(format.bit_depth(), depth, "{format}");
            assert_eq!(format.sample_shift(), shift, "{format}");
        }
    }

    /// Every format added in D36 at an odd size: each plane's row bytes and
    /// rows, the two pitches at 64-byte alignment, and bits per pixel.
    #[test]
    fn d36_formats_geometry_at_odd_sizes() {
        let (w, h) = (33usize, 17usize);
        let (cw, ch) = (17usize, 9usize); // rounded up
        // Each plane's (row bytes, rows).
        type Planes = Vec<(usize, usize)>;
        let cases: [(PixelFormat, Planes, u32); 12] = [
            (PixelFormat::P012, vec![(2 * w, h), (4 * cw, ch)], 24),
            (PixelFormat::Nv16, vec![(w, h), (2 * cw, h)], 16),
            (PixelFormat::P210, vec![(2 * w, h), (4 * cw, h)], 32),
            (PixelFormat::P212, vec![(2 * w, h), (4 * cw, h)], 32),
            (PixelFormat::P216, vec![(2 * w, h), (4 * cw, h)], 32),
            (PixelFormat::Yuv422p, vec![(w, h), (cw, h), (cw, h)], 16),
            (
                PixelFormat::Yuv420p10,
                vec![(2 * w, h), (2 * cw, ch), (2 * cw, ch)],
                24,
            ),
            (
                PixelFormat::Yuv422p10,
                vec![(2 * w, h), (2 * cw, h), (2 * cw, h)],
                32,
            ),
            (PixelFormat::Yuv444p10, vec![(2 * w, h); 3], 48),
            (PixelFormat::Yuv444p10Msb, vec![(2 * w, h); 3], 48),
            (PixelFormat::Yuv444p12Msb, vec![(2 * w, h); 3], 48),
            (
                PixelFormat::Yuva420p,
                vec![(w, h), (cw, ch), (cw, ch), (w, h)],
                20,
            ),
        ];
        for (format, planes, bits) in cases {
            let l = FrameLayout::aligned(format, w as u32, h as u32, 64).unwrap();
            assert_eq!(format.bits_per_pixel(), bits, "{format}");
            assert_eq!(l.planes().len(), planes.len(), "{format}");
            let mut offset = 0;
            for (index, (plane, &(row_bytes, rows))) in l.planes().iter().zip(&planes).enumerate() {
                // Y and alpha at pitch_y, chroma at pitch_uv.
                let pitch = if index == 0 || index == 3 {
                    l.pitch_y()
                } else {
                    l.pitch_uv()
                };
                assert_eq!(
                    *plane,
                    PlaneLayout {
                        offset,
                        pitch,
                        row_bytes,
                        rows
                    },
                    "{format} plane {index}"
                );
                assert_eq!(pitch, row_bytes.next_multiple_of(64), "{format} plane {index}");
                offset += pitch * rows;
            }
            assert_eq!(l.size(), offset, "{format}");
        }
    }

    #[test]
    fn the_alpha_plane_takes_pitch_y() {
        let l = FrameLayout::with_pitches(PixelFormat::Yuva420p, 33, 17, 40, 20).unwrap();
        let pitches: Vec<usize> = l.planes().iter().map(|p| p.pitch).collect();
        assert_eq!(pitches, [40, 20, 20, 40]);
        assert_eq!(l.planes()[3].offset, 40 * 17 + 2 * 20 * 9);
        assert_eq!(l.size(), 2 * 40 * 17 + 2 * 20 * 9);
        let short = FrameLayout::with_pitches(PixelFormat::Yuva420p, 33, 17, 32, 20).unwrap_err();
        assert!(short.message().contains("plane 0 pitch 32"), "{short}");
        // 4:2:2 chroma has full height: half-height pitches are not enough rows.
        let l = FrameLayout::with_pitches(PixelFormat::Yuv422p, 33, 17, 33, 17).unwrap();
        assert_eq!(l.size(), 33 * 17 + 2 * 17 * 17);
    }

    #[test]
    fn nv12_geometry() {
        let l = FrameLayout::aligned(PixelFormat::Nv12, 1920, 1080, 128).unwrap();
        assert_eq!(l.planes().len(), 2);
        assert_eq!(
            l.planes()[0],
            PlaneLayout {
                offset: 0,
                pitch: 1920,
                row_bytes: 1920,
                rows: 1080
            }
        );
        assert_eq!(
            l.planes()[1],
            PlaneLayout {
                offset: 1920 * 1080,
                pitch: 1920,
                row_bytes: 1920,
                rows: 540
            }
        );
        assert_eq!(l.size(), 1920 * 1080 * 3 / 2);
    }

    #[test]
    fn odd_sizes_round_chroma_up() {
        let l = FrameLayout::aligned(PixelFormat::Yuv420p, 33, 17, 64).unwrap();
        assert_eq!(l.planes()[0].row_bytes, 33);
        assert_eq!(l.planes()[0].pitch, 64);
        assert_eq!(l.planes()[1].row_bytes, 17);
        assert_eq!(l.planes()[1].rows, 9);
        assert_eq!(l.planes()[2].offset, 64 * 17 + 64 * 9);
        assert_eq!(l.size(), 64 * 17 + 2 * 64 * 9);
        let nv12 = FrameLayout::aligned(PixelFormat::Nv12, 33, 17, 1).unwrap();
        assert_eq!(nv12.planes()[1].row_bytes, 34);
        assert_eq!(nv12.planes()[1].pitch, 34);
    }

    #[test]
    fn p010_and_bgra_geometry() {
        let p = FrameLayout::aligned(PixelFormat::P010, 100, 50, 64).unwrap();
        assert_eq!(p.planes()[0].row_bytes, 200);
        assert_eq!(p.planes()[0].pitch, 256);
        assert_eq!(p.planes()[1].row_bytes, 200);
        assert_eq!(p.planes()[1].rows, 25);
        let b = FrameLayout::aligned(PixelFormat::Bgra, 100, 50, 64).unwrap();
        assert_eq!(b.planes().len(), 1);
        assert_eq!(b.pitch_uv(), 0);
        assert_eq!(b.size(), 448 * 50);
    }

    #[test]
    fn bad_geometry_is_refused() {
        assert!(FrameLayout::aligned(PixelFormat::Nv12, 0, 10, 64).is_err());
        assert!(FrameLayout::aligned(PixelFormat::Nv12, 10, MAX_DIMENSION + 1, 64).is_err());
        let short = FrameLayout::with_pitches(PixelFormat::Nv12, 64, 64, 63, 64).unwrap_err();
        assert!(short.message().contains("plane 0 pitch 63"), "{short}");
        assert!(FrameLayout::with_pitches(PixelFormat::Nv12, 64, 64, 64, 10).is_err());
        assert!(FrameLayout::with_pitches(PixelFormat::Bgra, 64, 64, usize::MAX / 2, 0).is_err());
        let chroma = FrameLayout::with_pitches(PixelFormat::Bgra, 64, 64, 256, 256).unwrap_err();
        assert!(
            chroma.to_string().contains("pitch_uv must be 0, not 256"),
            "{chroma}"
        );
        assert!(FrameLayout::with_pitches(PixelFormat::Bgra, 64, 64, 256, 0).is_ok());
    }
}
