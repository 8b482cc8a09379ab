//! The frames every transport carries, and how subscribers check them.
//!
//! The publisher makes `pool` distinct frames of the test pattern once
//! (pattern frame index 0..pool) and cycles through them: frame `i` (seq
//! `i + 1`) is pattern frame `i mod pool`. The pool is 17 frames where memory
//! allows (17 is prime and above the largest ring, so a stale slot, lapped
//! by the ring, never looks right), fewer for very large frames.
//!
//! Outside the ring's slots frames are *packed*: planes back to back, rows
//! without padding, as `ffmpeg -f rawvideo pipe:` writes them.

use cuframes::{FrameLayout, PITCH_ALIGNMENT, PixelFormat, Result, pattern};

/// The largest pool kept, and the memory it may take.
const MAX_POOL: u64 = 17;
const POOL_BYTES: usize = 1 << 30;

/// One plane of a packed frame.
#[derive(Clone, Copy, Debug)]
pub struct PackedPlane {
    pub offset: usize,
    pub row_bytes: usize,
    pub rows: usize,
}

/// Frame geometry: the ring's pitched layout and the packed one.
#[derive(Clone, Debug)]
pub struct Geometry {
    pub layout: FrameLayout,
    pub packed: Vec<PackedPlane>,
    pub packed_size: usize,
}

impl Geometry {
    pub fn new(format: PixelFormat, width: u32, height: u32) -> Result<Geometry> {
        let layout = FrameLayout::aligned(format, width, height, PITCH_ALIGNMENT)?;
        let mut offset = 0;
        let packed = layout
            .planes()
            .iter()
            .map(|p| {
                let plane = PackedPlane {
                    offset,
                    row_bytes: p.row_bytes,
                    rows: p.rows,
                };
                offset += p.row_bytes * p.rows;
                plane
            })
            .collect();
        Ok(Geometry {
            layout,
            packed,
            packed_size: offset,
        })
    }

    /// Distinct frames the publisher cycles through.
    pub fn pool_len(&self) -> u64 {
        (POOL_BYTES / self.packed_size.max(1)).clamp(2, MAX_POOL as usize) as u64
    }

    /// Packed pattern frame `index`.
    pub fn make_packed(&self, index: u64) -> Vec<u8> {
        let mut bytes = vec![0u8; self.packed_size];
        let format = self.layout.format();
        for (p, plane) in self.packed.iter().enumerate() {
            for y in 0..plane.rows {
                let start = plane.offset + y * plane.row_bytes;
                pattern::fill_row(format, index, p, y, &mut bytes[start..start + plane.row_bytes]);
            }
        }
        bytes
    }

    /// Plane `p` of a packed frame: (bytes from its first row, pitch).
    pub fn packed_plane<'a>(&self, frame: &'a [u8], p: usize) -> (&'a [u8], usize) {
        let plane = self.packed[p];
        (
            &frame[plane.offset..plane.offset + plane.row_bytes * plane.rows],
            plane.row_bytes,
        )
    }
}

/// How much of each frame subscribers check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    None,
    /// First, middle and last row of every plane of every frame (host
    /// memory), and every plane whole every `every`th frame (0 = never).
    Sample {
        every: u64,
    },
    Full,
}

impl Verify {
    pub fn parse(text: &str, every: u64) -> std::result::Result<Verify, String> {
        match text {
            "none" => Ok(Verify::None),
            "sample" => Ok(Verify::Sample { every }),
            "full" => Ok(Verify::Full),
            other => Err(format!("bad --verify '{other}': use sample, full or none")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Verify::None => "none",
            Verify::Sample { .. } => "sample",
            Verify::Full => "full",
        }
    }

    /// What is checked, in words (stated in the report).
    pub fn describe(self, device: bool, pool: u64) -> String {
        let what = match (self, device) {
            (Verify::None, _) => return "nothing verified".into(),
            (Verify::Full, false) => "every byte of every frame".to_owned(),
            (Verify::Full, true) => "every byte of every frame, copied back to the host".to_owned(),
            (Verify::Sample { every }, false) => {
                let mut s = "first, middle and last row of every plane of every frame".to_owned();
                if every > 0 {
                    s += &format!(", every byte of every {every}th frame");
                }
                s
            }
            (Verify::Sample { every: 0 }, true) => {
                return "nothing verified (device frames are not read by the CPU; use --verify-every N or --verify full)".into();
            }
            (Verify::Sample { every }, true) => {
                format!(
                    "every byte of every {every}th frame, copied back to the host (device frames are not read by the CPU otherwise)"
                )
            }
        };
        format!("{what}, against the test pattern ({pool} distinct frames, frame i = pattern i mod {pool})")
    }
}

/// How deeply one frame is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    Rows,
    Whole,
}

/// A subscriber's checks and their counts.
#[derive(Debug)]
pub struct Checker {
    format: PixelFormat,
    verify: Verify,
    pool: u64,
    pub verified: u64,
    pub mismatched: u64,
    pub whole_frames: u64,
    /// Frames overwritten while they were read: not judged.
    pub torn: u64,
}

impl Checker {
    pub fn new(format: PixelFormat, verify: Verify, pool: u64) -> Checker {
        Checker {
            format,
            verify,
            pool: pool.max(1),
            verified: 0,
            mismatched: 0,
            whole_frames: 0,
            torn: 0,
        }
    }

    /// How deeply frame `seq` is checked (None: not at all).
    pub fn depth(&self, seq: u64) -> Option<Depth> {
        match self.verify {
            Verify::None => None,
            Verify::Full => Some(Depth::Whole),
            Verify::Sample { every } if every > 0 && seq.is_multiple_of(every) => Some(Depth::Whole),
            Verify::Sample { .. } => Some(Depth::Rows),
        }
    }

    /// Checks frame `seq` with planes given by `plane(p) -> (bytes, pitch)`;
    /// `rows(p)` gives (row_bytes, rows). `intact`: the frame was not
    /// overwritten while read (otherwise it is counted as torn, not judged).
    pub fn check<'a>(
        &mut self,
        seq: u64,
        depth: Depth,
        planes: usize,
        geometry: impl Fn(usize) -> (usize, usize),
        plane: impl Fn(usize) -> (&'a [u8], usize),
        intact: impl FnOnce() -> bool,
    ) {
        let index = (seq - 1) % self.pool;
        let mut ok = true;
        for p in 0..planes {
            let (row_bytes, rows) = geometry(p);
            let (bytes, pitch) = plane(p);
            let mut check = |y: usize| {
                let start = y * pitch;
                bytes
                    .get(start..start + row_bytes)
                    .is_some_and(|row| pattern::check_row(self.format, index, p, y, row))
            };
            ok &= match depth {
                Depth::Whole => (0..rows).all(&mut check),
                Depth::Rows => [0, rows / 2, rows - 1].into_iter().all(&mut check),
            };
        }
        if depth == Depth::Whole {
            self.whole_frames += 1;
        }
        if !intact() {
            self.torn += 1;
        } else if ok {
            self.verified += 1;
        } else {
            self.mismatched += 1;
            if self.mismatched <= 3 {
                eprintln!("cuframes bench: frame seq {seq} does not match pattern frame {index}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_frames_check_and_catch_errors() {
        for format in PixelFormat::ALL {
            let g = Geometry::new(format, 37, 21).unwrap();
            let pool = g.pool_len();
            assert_eq!(pool, 17);
            let frame = g.make_packed(5);
            let n = g.packed.len();
            let mut c = Checker::new(format, Verify::Full, pool);
            let rows = |p: usize| (g.packed[p].row_bytes, g.packed[p].rows);
            c.check(6, Depth::Whole, n, rows, |p| g.packed_plane(&frame, p), || true);
            assert_eq!((c.verified, c.mismatched), (1, 0), "{format}");
            // seq 7 is pattern frame 6: mismatch
            c.check(7, Depth::Rows, n, rows, |p| g.packed_plane(&frame, p), || true);
            assert_eq!(c.mismatched, 1, "{format}");
            // the same frame 17 later is the same pattern frame
            c.check(
                6 + 17,
                Depth::Rows,
                n,
                rows,
                |p| g.packed_plane(&frame, p),
                || true,
            );
            assert_eq!(c.verified, 2, "{format}");
            // torn frames are not judged
            c.check(7, Depth::Rows, n, rows, |p| g.packed_plane(&frame, p), || false);
            assert_eq!((c.mismatched, c.torn), (1, 1), "{format}");
            let mut bad = frame.clone();
            let last = bad.len() - 1;
            bad[last] ^= 1;
            c.check(6, Depth::Whole, n, rows, |p| g.packed_plane(&bad, p), || true);
            assert_eq!(c.mismatched, 2, "{format} last byte");
        }
    }

    #[test]
    fn depth_follows_the_mode() {
        let c = Checker::new(PixelFormat::Nv12, Verify::Sample { every: 10 }, 17);
        assert_eq!(c.depth(9), Some(Depth::Rows));
        assert_eq!(c.depth(10), Some(Depth::Whole));
        let c = Checker::new(PixelFormat::Nv12, Verify::None, 17);
        assert_eq!(c.depth(10), None);
        let g = Geometry::new(PixelFormat::Bgra, 3840, 2160).unwrap();
        assert_eq!(g.pool_len(), 17);
        let g = Geometry::new(PixelFormat::Bgra, 16384, 16384).unwrap();
        assert_eq!(g.pool_len(), 2);
    }
}
