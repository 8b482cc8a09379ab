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

impl PixelFormat {
    /// Every supported format.
    pub const ALL: [PixelFormat; 10] = [
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
    ];

    /// The format for a wire number.
    pub fn from_wire(value: u32) -> Option<PixelFormat> {
        Self::ALL.into_iter().find(|f| f.wire() == value)
    }

    /// The wire number.
    pub fn wire(self) -> u32 {
        self as u32
    }

    /// Lower-case name, as the CLI spells it (and FFmpeg's pix_fmt name).
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
        }
    }

    /// Every name, comma-separated (for messages).
    pub fn names() -> String {
        Self::ALL.map(PixelFormat::name).join(", ")
    }

    /// Parses a name as printed by [`PixelFormat::name`] (case-insensitive).
    pub fn parse(name: &str) -> Result<PixelFormat> {
        Self::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Format,
                    format!("unknown pixel format '{name}' (known: {})", Self::names()),
                )
            })
    }

    /// Informative bits per pixel (frame meta `bits_per_pixel`).
    pub fn bits_per_pixel(self) -> u32 {
        match self {
            PixelFormat::Nv12 | PixelFormat::Yuv420p => 12,
            PixelFormat::P010 | PixelFormat::P016 | PixelFormat::Yuv444p => 24,
            PixelFormat::Yuv444p16 => 48,
            PixelFormat::Bgra | PixelFormat::Rgba | PixelFormat::Bgr0 | PixelFormat::Rgb0 => 32,
        }
    }

    /// Number of planes.
    pub fn plane_count(self) -> usize {
        self.shapes().len()
    }

    /// Bytes per sample (1 for 8-bit formats, 2 for the 16-bit ones, 1 per
    /// channel of the packed RGB formats).
    pub fn bytes_per_sample(self) -> usize {
        match self {
            PixelFormat::P010 | PixelFormat::P016 | PixelFormat::Yuv444p16 => 2,
            _ => 1,
        }
    }

    fn shapes(self) -> &'static [PlaneShape] {
        match self {
            PixelFormat::Nv12 => &[LUMA8, UV8],
            PixelFormat::Yuv420p => &[LUMA8, CHROMA8, CHROMA8],
            PixelFormat::P010 | PixelFormat::P016 => &[LUMA16, UV16],
            PixelFormat::Bgra | PixelFormat::Rgba | PixelFormat::Bgr0 | PixelFormat::Rgb0 => &[PACKED32],
            PixelFormat::Yuv444p => &[LUMA8, LUMA8, LUMA8],
            PixelFormat::Yuv444p16 => &[LUMA16, LUMA16, LUMA16],
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
    /// The layout with the given pitches: `pitch_y` for plane 0, `pitch_uv`
    /// for the chroma planes. Fails when a pitch is shorter than its row, when
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
            let pitch = if index == 0 { pitch_y } else { pitch_uv };
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
    /// power of two).
    pub fn aligned(format: PixelFormat, width: u32, height: u32, align: usize) -> Result<FrameLayout> {
        check_dimensions(width, height)?;
        assert!(align.is_power_of_two(), "alignment must be a power of two");
        let rows_of = |index: usize| {
            let shape = format.shapes()[index];
            (width.div_ceil(shape.x_sub) * shape.bytes_per_column) as usize
        };
        let pitch_y = rows_of(0).next_multiple_of(align);
        let pitch_uv = if format.plane_count() > 1 {
            rows_of(1).next_multiple_of(align)
        } else {
            0
        };
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
        assert_eq!(PixelFormat::from_wire(11), None);
        for f in PixelFormat::ALL {
            assert_eq!(PixelFormat::from_wire(f.wire()), Some(f));
            assert_eq!(PixelFormat::parse(f.name()).unwrap(), f);
        }
        assert_eq!(PixelFormat::parse("NV12").unwrap(), PixelFormat::Nv12);
        assert_eq!(PixelFormat::parse("rgb24").unwrap_err().kind(), ErrorKind::Format);
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
