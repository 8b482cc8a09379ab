//! A stream's description, the same for its publisher, its subscribers and
//! the keys listing: `cuframes_stream_info` and the enumerations it carries
//! (pixel format, memory, full-ring policy, CUDA sharing: plain integers, so
//! an unknown value from C is an error and never undefined behaviour). The
//! plain types every object that describes frames shares (publisher,
//! subscriber, frame, layout, keys); it owns no C object and no export.

use cuframes::{CudaShare, MemoryKind, PixelFormat, Policy, Result, StreamInfo};

use crate::error::invalid;
use crate::sized::Growable;

/// Pixel format of a stream (`CUFRAMES_FORMAT_*`; the wire numbers).
pub type cuframes_format = u32;
/// 8-bit 4:2:0, Y plane then interleaved UV plane (NVDEC's native output).
pub const CUFRAMES_FORMAT_NV12: cuframes_format = 1;
/// 8-bit 4:2:0, three planes Y, U, V.
pub const CUFRAMES_FORMAT_YUV420P: cuframes_format = 2;
/// 10-bit 4:2:0 in 16-bit little-endian samples (value in the high 10 bits),
/// Y plane then interleaved UV plane.
pub const CUFRAMES_FORMAT_P010: cuframes_format = 3;
/// 8-bit packed B, G, R, A; one plane.
pub const CUFRAMES_FORMAT_BGRA: cuframes_format = 4;
/// 16-bit 4:2:0 (LE, full 16 bits), Y plane then interleaved UV plane.
pub const CUFRAMES_FORMAT_P016: cuframes_format = 5;
/// 8-bit 4:4:4, three full-size planes Y, U, V.
pub const CUFRAMES_FORMAT_YUV444P: cuframes_format = 6;
/// 16-bit 4:4:4 (LE), three full-size planes Y, U, V.
pub const CUFRAMES_FORMAT_YUV444P16: cuframes_format = 7;
/// 8-bit packed R, G, B, A; one plane.
pub const CUFRAMES_FORMAT_RGBA: cuframes_format = 8;
/// 8-bit packed B, G, R, padding; one plane.
pub const CUFRAMES_FORMAT_BGR0: cuframes_format = 9;
/// 8-bit packed R, G, B, padding; one plane.
pub const CUFRAMES_FORMAT_RGB0: cuframes_format = 10;
/// 12-bit 4:2:0 in 16-bit LE samples (value in the high 12 bits, low 4
/// zero), Y plane then interleaved UV plane (FFmpeg's `p012le`).
pub const CUFRAMES_FORMAT_P012: cuframes_format = 11;
/// 8-bit 4:2:2, Y plane then interleaved UV plane of full height (`nv16`).
pub const CUFRAMES_FORMAT_NV16: cuframes_format = 12;
/// 10-bit 4:2:2 in 16-bit LE samples (value in the high 10 bits), Y plane
/// then interleaved UV plane of full height (`p210le`).
pub const CUFRAMES_FORMAT_P210: cuframes_format = 13;
/// 12-bit 4:2:2 in 16-bit LE samples (value in the high 12 bits), as P210
/// (`p212le`).
pub const CUFRAMES_FORMAT_P212: cuframes_format = 14;
/// 16-bit 4:2:2 (LE, full 16 bits), as P210 (`p216le`).
pub const CUFRAMES_FORMAT_P216: cuframes_format = 15;
/// 8-bit 4:2:2, three planes Y, U, V; U and V half width, full height
/// (`yuv422p`).
pub const CUFRAMES_FORMAT_YUV422P: cuframes_format = 16;
/// 10-bit 4:2:0 in 16-bit LE samples (value in the LOW 10 bits), three
/// planes Y, U, V (`yuv420p10le`).
pub const CUFRAMES_FORMAT_YUV420P10: cuframes_format = 17;
/// 10-bit 4:2:2 in 16-bit LE samples (value in the low 10 bits), three
/// planes Y, U, V (`yuv422p10le`).
pub const CUFRAMES_FORMAT_YUV422P10: cuframes_format = 18;
/// 10-bit 4:4:4 in 16-bit LE samples (value in the low 10 bits), three
/// full-size planes (`yuv444p10le`).
pub const CUFRAMES_FORMAT_YUV444P10: cuframes_format = 19;
/// 10-bit 4:4:4 in 16-bit LE samples (value in the HIGH 10 bits, low 6
/// zero), three full-size planes (`yuv444p10msble`).
pub const CUFRAMES_FORMAT_YUV444P10MSB: cuframes_format = 20;
/// 12-bit 4:4:4 in 16-bit LE samples (value in the high 12 bits, low 4
/// zero), three full-size planes (`yuv444p12msble`).
pub const CUFRAMES_FORMAT_YUV444P12MSB: cuframes_format = 21;
/// 8-bit 4:2:0 with alpha: four planes Y, U, V, A; A full size, at Y's pitch
/// (`yuva420p`).
pub const CUFRAMES_FORMAT_YUVA420P: cuframes_format = 22;

/// Where frames live, or which memory a publisher asks for (`CUFRAMES_MEMORY_*`).
pub type cuframes_memory = u32;
/// CUDA when a driver and device are usable, host memory otherwise (requests only).
pub const CUFRAMES_MEMORY_AUTO: cuframes_memory = 0;
/// Host shared memory.
pub const CUFRAMES_MEMORY_HOST: cuframes_memory = 1;
/// CUDA device memory.
pub const CUFRAMES_MEMORY_CUDA: cuframes_memory = 2;

/// What a publisher does when the ring is full (`CUFRAMES_POLICY_*`).
pub type cuframes_policy = u32;
/// Overwrite the oldest slot; slow subscribers lose frames (and learn it).
pub const CUFRAMES_POLICY_DROP_OLDEST: cuframes_policy = 0;
/// Wait for every subscriber's release, up to the ACK timeout; a subscriber
/// that misses it is dropped.
pub const CUFRAMES_POLICY_STRICT_WAIT: cuframes_policy = 1;

/// How CUDA slots are shared between processes (`CUFRAMES_CUDA_SHARE_*`;
/// docs/c-api.md, "Containers").
pub type cuframes_cuda_share = u32;
/// Requests: FD where the GPU and driver support it, else IPC. In stream
/// info: the frames are not in CUDA memory.
pub const CUFRAMES_CUDA_SHARE_AUTO: cuframes_cuda_share = 0;
/// Slots exported as file descriptors and sent over the control socket:
/// subscribers in other containers need only the runtime directory.
pub const CUFRAMES_CUDA_SHARE_FD: cuframes_cuda_share = 1;
/// Legacy CUDA IPC handles (what protocol-v1 subscribers read): subscribers
/// must share the publisher's PID namespace.
pub const CUFRAMES_CUDA_SHARE_IPC: cuframes_cuda_share = 2;

/// Most planes a frame has (the size of the per-plane arrays).
pub const CUFRAMES_MAX_PLANES: usize = 4;

/// A stream's geometry and settings, from `cuframes_publisher_get_info` or
/// `cuframes_subscriber_get_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct cuframes_stream_info {
    /// `sizeof(cuframes_stream_info)`, set by the caller; the library sets
    /// it to the bytes it wrote (docs/c-api.md, "ABI policy").
    pub struct_size: u32,
    /// Pixel format.
    pub format: cuframes_format,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Slots in the ring.
    pub ring_size: u32,
    /// Full-ring policy.
    pub policy: cuframes_policy,
    /// HOST or CUDA: where frames live.
    pub memory: cuframes_memory,
    /// Frame rate numerator; 0/0 = unknown.
    pub fps_num: u32,
    /// Frame rate denominator; 0/0 = unknown.
    pub fps_den: u32,
    /// Planes per frame (1..=CUFRAMES_MAX_PLANES).
    pub plane_count: u32,
    /// Bytes from one row to the next in the ring's slots, per plane; 0 past plane_count.
    pub pitches: [usize; CUFRAMES_MAX_PLANES],
    /// Bytes of one frame in a slot (all planes).
    pub frame_size: usize,
    /// CUDA memory: how its slots are shared (FD or IPC); AUTO (0) for host
    /// memory.
    pub cuda_share: cuframes_cuda_share,
    /// Zero.
    pub reserved: u32,
}

// SAFETY: repr(C), `struct_size: u32` first, integer fields only, no tail
// padding (tests::growable_layouts).
unsafe impl Growable for cuframes_stream_info {
    const NAME: &'static str = "cuframes_stream_info";
    // One published layout so far: struct_size is new in 0.2.0.
    const SIZES: &'static [usize] = &[size_of::<cuframes_stream_info>()];
}

/// Every `cuframes_format` with its C name, in wire order.
const FORMAT_NAMES: [(cuframes_format, &str); 22] = [
    (CUFRAMES_FORMAT_NV12, "NV12"),
    (CUFRAMES_FORMAT_YUV420P, "YUV420P"),
    (CUFRAMES_FORMAT_P010, "P010"),
    (CUFRAMES_FORMAT_BGRA, "BGRA"),
    (CUFRAMES_FORMAT_P016, "P016"),
    (CUFRAMES_FORMAT_YUV444P, "YUV444P"),
    (CUFRAMES_FORMAT_YUV444P16, "YUV444P16"),
    (CUFRAMES_FORMAT_RGBA, "RGBA"),
    (CUFRAMES_FORMAT_BGR0, "BGR0"),
    (CUFRAMES_FORMAT_RGB0, "RGB0"),
    (CUFRAMES_FORMAT_P012, "P012"),
    (CUFRAMES_FORMAT_NV16, "NV16"),
    (CUFRAMES_FORMAT_P210, "P210"),
    (CUFRAMES_FORMAT_P212, "P212"),
    (CUFRAMES_FORMAT_P216, "P216"),
    (CUFRAMES_FORMAT_YUV422P, "YUV422P"),
    (CUFRAMES_FORMAT_YUV420P10, "YUV420P10"),
    (CUFRAMES_FORMAT_YUV422P10, "YUV422P10"),
    (CUFRAMES_FORMAT_YUV444P10, "YUV444P10"),
    (CUFRAMES_FORMAT_YUV444P10MSB, "YUV444P10MSB"),
    (CUFRAMES_FORMAT_YUV444P12MSB, "YUV444P12MSB"),
    (CUFRAMES_FORMAT_YUVA420P, "YUVA420P"),
];

pub(crate) fn format_from_c(value: cuframes_format, what: &str) -> Result<PixelFormat> {
    let known = || {
        FORMAT_NAMES
            .map(|(number, name)| format!("{number} {name}"))
            .join(", ")
    };
    if value == 0 {
        return Err(invalid(format!(
            "{what} is not set (a CUFRAMES_FORMAT_*: {})",
            known()
        )));
    }
    PixelFormat::from_wire(value).ok_or_else(|| {
        // A number past ours is a newer cuframes.h's format.
        let newer = if value > PixelFormat::max_wire() {
            format!(
                "; a newer cuframes.h's format needs a newer libcuframes than this one ({})",
                env!("CARGO_PKG_VERSION")
            )
        } else {
            String::new()
        };
        invalid(format!(
            "{what} {value} is not a cuframes_format ({}){newer}",
            known()
        ))
    })
}

pub(crate) fn format_to_c(format: PixelFormat) -> cuframes_format {
    format.wire()
}

pub(crate) fn memory_to_c(memory: MemoryKind) -> cuframes_memory {
    match memory {
        MemoryKind::Host => CUFRAMES_MEMORY_HOST,
        MemoryKind::Cuda => CUFRAMES_MEMORY_CUDA,
    }
}

pub(crate) fn policy_to_c(policy: Policy) -> cuframes_policy {
    match policy {
        Policy::DropOldest => CUFRAMES_POLICY_DROP_OLDEST,
        Policy::StrictWait => CUFRAMES_POLICY_STRICT_WAIT,
    }
}

/// The C view of a stream's description ([`StreamInfo`], the same on both
/// sides); None when its policy is none this library knows (a header that
/// passed validation always has one).
pub(crate) fn stream_info_to_c(info: &StreamInfo) -> Option<cuframes_stream_info> {
    let policy = Policy::from_wire(info.policy)?;
    let planes = info.layout.planes();
    let mut pitches = [0usize; CUFRAMES_MAX_PLANES];
    for (out, plane) in pitches.iter_mut().zip(planes) {
        *out = plane.pitch;
    }
    let (fps_num, fps_den) = info.fps.unwrap_or((0, 0));
    Some(cuframes_stream_info {
        struct_size: size_of::<cuframes_stream_info>() as u32,
        format: format_to_c(info.layout.format()),
        width: info.layout.width(),
        height: info.layout.height(),
        ring_size: info.ring_size as u32,
        policy: policy_to_c(policy),
        memory: memory_to_c(info.memory),
        fps_num,
        fps_den,
        plane_count: planes.len() as u32,
        pitches,
        frame_size: info.layout.size(),
        cuda_share: match info.cuda_share() {
            None => CUFRAMES_CUDA_SHARE_AUTO,
            Some(CudaShare::Fd) => CUFRAMES_CUDA_SHARE_FD,
            Some(CudaShare::Ipc) => CUFRAMES_CUDA_SHARE_IPC,
        },
        reserved: 0,
    })
}

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use super::*;
    use crate::sized::assert_growable;

    #[test]
    fn enumerations_match_the_contract() {
        for format in PixelFormat::ALL {
            assert_eq!(format_from_c(format_to_c(format), "f").unwrap(), format);
        }
        assert_eq!(format_to_c(PixelFormat::Nv12), CUFRAMES_FORMAT_NV12);
        assert_eq!(format_to_c(PixelFormat::Yuv420p), CUFRAMES_FORMAT_YUV420P);
        assert_eq!(format_to_c(PixelFormat::P010), CUFRAMES_FORMAT_P010);
        assert_eq!(format_to_c(PixelFormat::Bgra), CUFRAMES_FORMAT_BGRA);
        assert!(format_from_c(0, "f").is_err());
        assert_eq!(format_to_c(PixelFormat::P016), CUFRAMES_FORMAT_P016);
        assert_eq!(format_to_c(PixelFormat::Yuv444p), CUFRAMES_FORMAT_YUV444P);
        assert_eq!(format_to_c(PixelFormat::Yuv444p16), CUFRAMES_FORMAT_YUV444P16);
        assert_eq!(format_to_c(PixelFormat::Rgba), CUFRAMES_FORMAT_RGBA);
        assert_eq!(format_to_c(PixelFormat::Bgr0), CUFRAMES_FORMAT_BGR0);
        assert_eq!(format_to_c(PixelFormat::Rgb0), CUFRAMES_FORMAT_RGB0);
        // Every format has its constant, under the library's name.
        assert_eq!(FORMAT_NAMES.len(), PixelFormat::ALL.len());
        for ((number, name), format) in FORMAT_NAMES.into_iter().zip(PixelFormat::ALL) {
            assert_eq!(format_to_c(format), number);
            assert_eq!(name.to_ascii_lowercase(), format.name());
        }
        assert_eq!(format_to_c(PixelFormat::P012), CUFRAMES_FORMAT_P012);
        assert_eq!(format_to_c(PixelFormat::Nv16), CUFRAMES_FORMAT_NV16);
        assert_eq!(format_to_c(PixelFormat::P210), CUFRAMES_FORMAT_P210);
        assert_eq!(format_to_c(PixelFormat::P212), CUFRAMES_FORMAT_P212);
        assert_eq!(format_to_c(PixelFormat::P216), CUFRAMES_FORMAT_P216);
        assert_eq!(format_to_c(PixelFormat::Yuv422p), CUFRAMES_FORMAT_YUV422P);
        assert_eq!(format_to_c(PixelFormat::Yuv420p10), CUFRAMES_FORMAT_YUV420P10);
        assert_eq!(format_to_c(PixelFormat::Yuv422p10), CUFRAMES_FORMAT_YUV422P10);
        assert_eq!(format_to_c(PixelFormat::Yuv444p10), CUFRAMES_FORMAT_YUV444P10);
        assert_eq!(
            format_to_c(PixelFormat::Yuv444p10Msb),
            CUFRAMES_FORMAT_YUV444P10MSB
        );
        assert_eq!(
            format_to_c(PixelFormat::Yuv444p12Msb),
            CUFRAMES_FORMAT_YUV444P12MSB
        );
        assert_eq!(format_to_c(PixelFormat::Yuva420p), CUFRAMES_FORMAT_YUVA420P);
        let newer = format_from_c(23, "f").unwrap_err().to_string();
        assert!(
            newer.contains("f 23 is not a cuframes_format (1 NV12, ") && newer.contains("22 YUVA420P)"),
            "{newer}"
        );
        assert!(newer.contains("needs a newer libcuframes"), "{newer}");
        assert!(
            PixelFormat::ALL
                .iter()
                .all(|f| f.plane_count() <= CUFRAMES_MAX_PLANES)
        );
    }

    #[test]
    fn growable_layouts() {
        assert_growable::<cuframes_stream_info>(
            offset_of!(cuframes_stream_info, struct_size),
            offset_of!(cuframes_stream_info, reserved) + size_of::<u32>(),
        );
        // The first layout on LP64 (x86_64, aarch64): it never changes
        // (tests/c/abi/cuframes-0.2.0.h has it too).
        #[cfg(target_pointer_width = "64")]
        assert_eq!(<cuframes_stream_info as Growable>::SIZES[0], 88);
    }
}
