//! Enumerations (plain integers, so an unknown value from C is an error and
//! never undefined behaviour) and the info structs shared by publisher and
//! subscriber.

use std::ffi::c_void;

use cuframes::{
    CopyMode, CudaShare, CudaShareRequest, MemoryKind, MemoryRequest, PixelFormat, Policy, Result,
    StreamInfo, SubscriberMode, V1Peers,
};

use crate::error::invalid;

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

/// Which frames a subscriber receives (`CUFRAMES_MODE_*`).
pub type cuframes_subscriber_mode = u32;
/// Every frame, in order; frames the ring lost are counted as dropped.
pub const CUFRAMES_MODE_SEQUENTIAL: cuframes_subscriber_mode = 0;
/// Always the newest frame; older unread frames are skipped and counted as dropped.
pub const CUFRAMES_MODE_LATEST: cuframes_subscriber_mode = 1;

/// Whether a subscriber hands out the shared slots or private copies
/// (`CUFRAMES_COPY_*`; docs/c-api.md, "Holding frames").
pub type cuframes_copy_mode = u32;
/// Always the shared slot itself. Holding frames holds slots: under
/// STRICT_WAIT the publisher waits once none is free, and drops the
/// subscriber after its ACK timeout; under DROP_OLDEST a held frame may be
/// overwritten (`cuframes_frame_is_intact`).
pub const CUFRAMES_COPY_NEVER: cuframes_copy_mode = 0;
/// The shared slot while holding it leaves half the ring (at least one
/// slot) free of holds, else a private copy (the slot released at once);
/// under DROP_OLDEST always a copy. Never stalls the publisher, never tears
/// a frame.
pub const CUFRAMES_COPY_AUTO: cuframes_copy_mode = 1;
/// Always a private copy; the slot is released at once.
pub const CUFRAMES_COPY_ALWAYS: cuframes_copy_mode = 2;

/// Kinds of frame side data (`CUFRAMES_SIDE_DATA_*`; docs/c-api.md, "Side
/// data"; payloads in docs/protocol-notes.md, D30). Other values 1..65535
/// pass through uninterpreted.
pub type cuframes_side_data_kind = u32;
/// HDR mastering display colour volume: ten (i32 num, i32 den) rationals —
/// primaries R, G, B (x, y), white point (x, y), min and max luminance —
/// then i32 has_primaries, i32 has_luminance; 88 bytes, little-endian.
pub const CUFRAMES_SIDE_DATA_MASTERING_DISPLAY: cuframes_side_data_kind = 1;
/// Content light level: u32 MaxCLL, u32 MaxFALL (cd/m²); 8 bytes.
pub const CUFRAMES_SIDE_DATA_CONTENT_LIGHT_LEVEL: cuframes_side_data_kind = 2;
/// ATSC A/53 closed captions: cc_data triplets.
pub const CUFRAMES_SIDE_DATA_A53_CC: cuframes_side_data_kind = 3;
/// User-data-unregistered SEI: 16-byte UUID, then the user data.
pub const CUFRAMES_SIDE_DATA_SEI_UNREGISTERED: cuframes_side_data_kind = 4;
/// SMPTE 12-M timecodes: u32 count (1..3), then the u32 timecodes; 16 bytes.
pub const CUFRAMES_SIDE_DATA_S12M_TIMECODE: cuframes_side_data_kind = 5;
/// HDR10+ dynamic metadata as its ITU-T T.35 message (SMPTE ST 2094-40).
pub const CUFRAMES_SIDE_DATA_HDR10_PLUS: cuframes_side_data_kind = 6;
/// Bytes of side data one frame carries at most (8 per entry included).
pub const CUFRAMES_SIDE_DATA_CAPACITY: u32 = 4096;

const _: () = {
    use cuframes::side_data_kind as k;
    assert!(CUFRAMES_SIDE_DATA_MASTERING_DISPLAY == k::MASTERING_DISPLAY as u32);
    assert!(CUFRAMES_SIDE_DATA_CONTENT_LIGHT_LEVEL == k::CONTENT_LIGHT_LEVEL as u32);
    assert!(CUFRAMES_SIDE_DATA_A53_CC == k::A53_CC as u32);
    assert!(CUFRAMES_SIDE_DATA_SEI_UNREGISTERED == k::SEI_UNREGISTERED as u32);
    assert!(CUFRAMES_SIDE_DATA_S12M_TIMECODE == k::S12M_TIMECODE as u32);
    assert!(CUFRAMES_SIDE_DATA_HDR10_PLUS == k::HDR10_PLUS as u32);
    assert!(CUFRAMES_SIDE_DATA_CAPACITY as usize == cuframes::SIDE_DATA_CAPACITY);
};

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

/// Which protocol-v1 subscribers a publisher admits (`CUFRAMES_V1_PEERS_*`;
/// docs/security.md): those that ACK in the shared header every one of them
/// can write (other implementations, cuframes before 0.3). They can never
/// change what cuframes subscribers read; among themselves they can.
pub type cuframes_v1_peers = u32;
/// Only this user's and root's (the default; 0 in a zeroed config).
pub const CUFRAMES_V1_PEERS_SAME_USER: cuframes_v1_peers = 0;
/// None: every subscriber ACKs in an area of its own.
pub const CUFRAMES_V1_PEERS_REFUSE: cuframes_v1_peers = 1;
/// Every admitted peer; with a group, the shared header becomes 0660.
pub const CUFRAMES_V1_PEERS_ALLOW: cuframes_v1_peers = 2;

/// `cuframes_frame_props.flags`: a key frame.
pub const CUFRAMES_PROPS_KEY_FRAME: u8 = 1;
/// `cuframes_frame_props.flags`: interlaced content.
pub const CUFRAMES_PROPS_INTERLACED: u8 = 2;
/// `cuframes_frame_props.flags`: interlaced, top field first.
pub const CUFRAMES_PROPS_TOP_FIELD_FIRST: u8 = 4;

/// What a frame carries besides its pixels (docs/c-api.md, "Frame
/// properties"): FFmpeg's numbering throughout (H.273 code points for
/// primaries, transfer and matrix; `AVColorRange`, `AVChromaLocation`,
/// `AVPictureType`), passed through uninterpreted.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct cuframes_frame_props {
    /// `sizeof(cuframes_frame_props)`, set by the caller, in and out
    /// (docs/c-api.md, "ABI policy").
    pub struct_size: u32,
    /// 0 unspecified, 1 limited, 2 full.
    pub color_range: u8,
    /// H.273 colour primaries (2 unspecified).
    pub color_primaries: u8,
    /// H.273 transfer characteristics (2 unspecified).
    pub color_trc: u8,
    /// H.273 matrix coefficients (2 unspecified).
    pub colorspace: u8,
    /// `AVChromaLocation` (0 unspecified).
    pub chroma_location: u8,
    /// `AVPictureType` (0 none).
    pub pict_type: u8,
    /// `CUFRAMES_PROPS_*` bits.
    pub flags: u8,
    /// Zero.
    pub reserved: u8,
    /// Sample aspect ratio; 0/0 or 0/1 unknown.
    pub sar_num: u32,
    /// Sample aspect ratio denominator.
    pub sar_den: u32,
    /// Display duration in ns; 0 unknown.
    pub duration_ns: i64,
}

impl cuframes_frame_props {
    pub(crate) fn from_props(p: cuframes::FrameProps) -> cuframes_frame_props {
        cuframes_frame_props {
            struct_size: size_of::<cuframes_frame_props>() as u32,
            color_range: p.color_range,
            color_primaries: p.color_primaries,
            color_trc: p.color_trc,
            colorspace: p.colorspace,
            chroma_location: p.chroma_location,
            pict_type: p.pict_type,
            flags: if p.key_frame { CUFRAMES_PROPS_KEY_FRAME } else { 0 }
                | if p.interlaced {
                    CUFRAMES_PROPS_INTERLACED
                } else {
                    0
                }
                | if p.top_field_first {
                    CUFRAMES_PROPS_TOP_FIELD_FIRST
                } else {
                    0
                },
            reserved: 0,
            sar_num: p.sample_aspect_ratio.0,
            sar_den: p.sample_aspect_ratio.1,
            duration_ns: p.duration_ns,
        }
    }

    pub(crate) fn to_props(self) -> Result<cuframes::FrameProps> {
        let known = CUFRAMES_PROPS_KEY_FRAME | CUFRAMES_PROPS_INTERLACED | CUFRAMES_PROPS_TOP_FIELD_FIRST;
        if self.flags & !known != 0 || self.reserved != 0 {
            return Err(invalid(format!(
                "props.flags 0x{:02x} has unknown bits, or props.reserved is not 0",
                self.flags
            )));
        }
        Ok(cuframes::FrameProps {
            color_range: self.color_range,
            color_primaries: self.color_primaries,
            color_trc: self.color_trc,
            colorspace: self.colorspace,
            chroma_location: self.chroma_location,
            pict_type: self.pict_type,
            key_frame: self.flags & CUFRAMES_PROPS_KEY_FRAME != 0,
            interlaced: self.flags & CUFRAMES_PROPS_INTERLACED != 0,
            top_field_first: self.flags & CUFRAMES_PROPS_TOP_FIELD_FIRST != 0,
            sample_aspect_ratio: (self.sar_num, self.sar_den),
            duration_ns: self.duration_ns,
        })
    }
}

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

pub(crate) fn memory_request_from_c(value: cuframes_memory, what: &str) -> Result<MemoryRequest> {
    match value {
        CUFRAMES_MEMORY_AUTO => Ok(MemoryRequest::Auto),
        CUFRAMES_MEMORY_HOST => Ok(MemoryRequest::Host),
        CUFRAMES_MEMORY_CUDA => Ok(MemoryRequest::Cuda),
        _ => Err(invalid(format!(
            "{what} {value} is not a cuframes_memory (0 AUTO, 1 HOST, 2 CUDA)"
        ))),
    }
}

pub(crate) fn cuda_share_from_c(value: cuframes_cuda_share, what: &str) -> Result<CudaShareRequest> {
    match value {
        CUFRAMES_CUDA_SHARE_AUTO => Ok(CudaShareRequest::Auto),
        CUFRAMES_CUDA_SHARE_FD => Ok(CudaShareRequest::Fd),
        CUFRAMES_CUDA_SHARE_IPC => Ok(CudaShareRequest::Ipc),
        _ => Err(invalid(format!(
            "{what} {value} is not a cuframes_cuda_share (0 AUTO, 1 FD, 2 IPC)"
        ))),
    }
}

pub(crate) fn v1_peers_from_c(value: cuframes_v1_peers, what: &str) -> Result<V1Peers> {
    match value {
        CUFRAMES_V1_PEERS_SAME_USER => Ok(V1Peers::SameUser),
        CUFRAMES_V1_PEERS_REFUSE => Ok(V1Peers::Refuse),
        CUFRAMES_V1_PEERS_ALLOW => Ok(V1Peers::Allow),
        _ => Err(invalid(format!(
            "{what} {value} is not a cuframes_v1_peers (0 SAME_USER, 1 REFUSE, 2 ALLOW)"
        ))),
    }
}

pub(crate) fn memory_to_c(memory: MemoryKind) -> cuframes_memory {
    match memory {
        MemoryKind::Host => CUFRAMES_MEMORY_HOST,
        MemoryKind::Cuda => CUFRAMES_MEMORY_CUDA,
    }
}

pub(crate) fn policy_from_c(value: cuframes_policy, what: &str) -> Result<Policy> {
    match value {
        CUFRAMES_POLICY_DROP_OLDEST => Ok(Policy::DropOldest),
        CUFRAMES_POLICY_STRICT_WAIT => Ok(Policy::StrictWait),
        _ => Err(invalid(format!(
            "{what} {value} is not a cuframes_policy (0 DROP_OLDEST, 1 STRICT_WAIT)"
        ))),
    }
}

pub(crate) fn policy_to_c(policy: Policy) -> cuframes_policy {
    match policy {
        Policy::DropOldest => CUFRAMES_POLICY_DROP_OLDEST,
        Policy::StrictWait => CUFRAMES_POLICY_STRICT_WAIT,
    }
}

pub(crate) fn mode_from_c(value: cuframes_subscriber_mode, what: &str) -> Result<SubscriberMode> {
    match value {
        CUFRAMES_MODE_SEQUENTIAL => Ok(SubscriberMode::Sequential),
        CUFRAMES_MODE_LATEST => Ok(SubscriberMode::Latest),
        _ => Err(invalid(format!(
            "{what} {value} is not a cuframes_subscriber_mode (0 SEQUENTIAL, 1 LATEST)"
        ))),
    }
}

pub(crate) fn copy_from_c(value: cuframes_copy_mode, what: &str) -> Result<CopyMode> {
    match value {
        CUFRAMES_COPY_NEVER => Ok(CopyMode::Never),
        CUFRAMES_COPY_AUTO => Ok(CopyMode::Auto),
        CUFRAMES_COPY_ALWAYS => Ok(CopyMode::Always),
        _ => Err(invalid(format!(
            "{what} {value} is not a cuframes_copy_mode (0 NEVER, 1 AUTO, 2 ALWAYS)"
        ))),
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
    use super::*;

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
        assert!(memory_request_from_c(3, "m").is_err());
        assert!(policy_from_c(2, "p").is_err());
        assert!(mode_from_c(2, "m").is_err());
        assert_eq!(copy_from_c(CUFRAMES_COPY_AUTO, "c").unwrap(), CopyMode::Auto);
        assert_eq!(copy_from_c(CUFRAMES_COPY_ALWAYS, "c").unwrap(), CopyMode::Always);
        assert!(copy_from_c(3, "c").is_err());
        assert_eq!(policy_to_c(policy_from_c(1, "p").unwrap()), 1);
        assert_eq!(mode_from_c(1, "m").unwrap(), SubscriberMode::Latest);
        assert!(
            PixelFormat::ALL
                .iter()
                .all(|f| f.plane_count() <= CUFRAMES_MAX_PLANES)
        );
    }
}

/// A slot handed out by `cuframes_publisher_acquire_slot`: where to write
/// the next frame.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuframes_slot {
    /// `sizeof(cuframes_slot)`, set by the caller; the library sets it to
    /// the bytes it wrote (docs/c-api.md, "ABI policy").
    pub struct_size: u32,
    /// Ring slot index.
    pub index: u32,
    /// CUFRAMES_MEMORY_HOST (host pointers) or CUFRAMES_MEMORY_CUDA
    /// (CUdeviceptr values).
    pub memory: cuframes_memory,
    /// Planes of the format.
    pub plane_count: u32,
    /// Start of each plane.
    pub planes: [*mut c_void; CUFRAMES_MAX_PLANES],
    /// Bytes from one row to the next, per plane.
    pub pitches: [usize; CUFRAMES_MAX_PLANES],
}
