//! `cuframes_frame`: one leased frame. It keeps its ring mapped, so it may
//! outlive its subscriber, and it may be released from any thread.
//!
//! Here with what a frame carries besides its pixels, which a publisher
//! attaches and a frame hands out: its side data (`cuframes_side_data_kind`)
//! and its properties (`cuframes_frame_props`).

use std::ffi::c_void;

use cuframes::{ErrorKind, FrameLease, PlanePtr, Result};

use crate::error::{CUFRAMES_OK, cuframes_status, invalid};
use crate::ffi::{check_out, try_ref, write_out};
use crate::sized::{self, Growable};
use crate::stream::{CUFRAMES_MAX_PLANES, cuframes_format, cuframes_memory, format_to_c, memory_to_c};

/// A leased frame (opaque), from `cuframes_subscriber_next`; give it back
/// with `cuframes_frame_release`.
#[derive(Debug)]
pub struct cuframes_frame {
    lease: FrameLease,
}

// A frame is handed between threads by C callers: the lease must be Send.
const _: () = {
    const fn send<T: Send>() {}
    send::<cuframes_frame>()
};

impl cuframes_frame {
    pub(crate) fn into_raw(lease: FrameLease) -> *mut cuframes_frame {
        Box::into_raw(Box::new(cuframes_frame { lease }))
    }
}

/// Where a leased frame is and what it holds.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuframes_frame_info {
    /// `sizeof(cuframes_frame_info)`, set by the caller; the library sets it
    /// to the bytes it wrote (docs/c-api.md, "ABI policy").
    pub struct_size: u32,
    /// 1 for the publisher's first frame, then 2, 3, ...
    pub seq: u64,
    /// Presentation timestamp (ns) the publisher gave.
    pub pts_ns: i64,
    /// CLOCK_MONOTONIC (ns) at publish; 0 = unknown.
    pub publish_mono_ns: u64,
    /// Pixel format.
    pub format: cuframes_format,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// HOST: `planes` are host pointers; CUDA: `CUdeviceptr` values.
    pub memory: cuframes_memory,
    /// Planes in use (the arrays' tail is zero).
    pub plane_count: u32,
    /// Start of each plane, readable until the frame is released.
    pub planes: [*const c_void; CUFRAMES_MAX_PLANES],
    /// Bytes from one row to the next, per plane.
    pub pitches: [usize; CUFRAMES_MAX_PLANES],
    /// Bytes of picture per row, per plane.
    pub row_bytes: [usize; CUFRAMES_MAX_PLANES],
    /// Rows, per plane.
    pub rows: [u32; CUFRAMES_MAX_PLANES],
    /// Frames published after the previous frame this subscriber handed
    /// out (or after it joined) that it never handed out: lapped by the
    /// publisher (DROP_OLDEST), skipped (LATEST), or torn while copied.
    pub lost_before: u64,
}

// SAFETY: repr(C), `struct_size: u32` first, integer and raw-pointer fields
// only, no tail padding (tests::growable_layouts).
unsafe impl Growable for cuframes_frame_info {
    const NAME: &'static str = "cuframes_frame_info";
    // One published layout so far: struct_size is new in 0.2.0.
    const SIZES: &'static [usize] = &[size_of::<cuframes_frame_info>()];
}

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

// SAFETY: repr(C), `struct_size: u32` first, integer fields only, no tail
// padding (tests::growable_layouts).
unsafe impl Growable for cuframes_frame_props {
    const NAME: &'static str = "cuframes_frame_props";
    // One published layout so far: struct_size is new in 0.2.0.
    const SIZES: &'static [usize] = &[size_of::<cuframes_frame_props>()];
}

/// The frame's seq, timestamps, geometry and plane pointers. Under
/// DROP_OLDEST the publisher may overwrite the frame while it is read: check
/// `cuframes_frame_is_intact` (or the status of `cuframes_frame_release`)
/// after reading.
///
/// # Safety
///
/// `frame` is NULL or a live frame; `info_out` is NULL or a writable struct
/// of `struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_frame_get_info(
    frame: *const cuframes_frame,
    info_out: *mut cuframes_frame_info,
) -> cuframes_status {
    ffi_boundary!("cuframes_frame_get_info", {
        // SAFETY: NULL or a live frame, by the caller's contract.
        let frame = try_c!(unsafe { try_ref(frame, "frame") });
        // SAFETY: NULL or a writable struct of struct_size bytes (contract).
        let size = try_c!(unsafe { sized::out_size(info_out, "info_out") });
        let lease = &frame.lease;
        let layout = lease.layout();
        let mut info = cuframes_frame_info {
            struct_size: size_of::<cuframes_frame_info>() as u32,
            seq: lease.seq(),
            pts_ns: lease.pts_ns(),
            publish_mono_ns: lease.publish_mono_ns(),
            format: format_to_c(layout.format()),
            width: layout.width(),
            height: layout.height(),
            memory: memory_to_c(lease.memory()),
            plane_count: layout.planes().len() as u32,
            planes: [std::ptr::null(); CUFRAMES_MAX_PLANES],
            pitches: [0; CUFRAMES_MAX_PLANES],
            row_bytes: [0; CUFRAMES_MAX_PLANES],
            rows: [0; CUFRAMES_MAX_PLANES],
            lost_before: lease.lost_before(),
        };
        for index in 0..layout.planes().len().min(CUFRAMES_MAX_PLANES) {
            let view = lease.plane(index);
            info.planes[index] = match view.ptr {
                PlanePtr::Host(ptr) => ptr.cast::<c_void>(),
                PlanePtr::Device(address) => address as usize as *const c_void,
            };
            info.pitches[index] = view.pitch;
            info.row_bytes[index] = view.row_bytes;
            info.rows[index] = view.rows as u32;
        }
        // SAFETY: checked above; writable by the caller's contract.
        unsafe { sized::write_out(info_out, size, info) };
        CUFRAMES_OK
    })
}

/// `CUFRAMES_OK` while the slot still holds this frame,
/// `CUFRAMES_ERR_OVERWRITTEN` once the publisher started to overwrite it
/// (DROP_OLDEST): what was read may then be torn.
///
/// # Safety
///
/// `frame` is NULL or a live frame.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_frame_is_intact(frame: *const cuframes_frame) -> cuframes_status {
    ffi_boundary!("cuframes_frame_is_intact", {
        // SAFETY: NULL or a live frame, by the caller's contract.
        let frame = try_c!(unsafe { try_ref(frame, "frame") });
        if frame.lease.is_intact() {
            CUFRAMES_OK
        } else {
            crate::error::fail(cuframes::Error::new(
                ErrorKind::Overwritten,
                format!(
                    "frame seq {} in slot {} was overwritten while leased",
                    frame.lease.seq(),
                    frame.lease.slot()
                ),
            ))
        }
    })
}

/// 1 when the frame is a private copy (its slot was released when the copy
/// was made: holding it holds nothing of the publisher's), 0 when it is the
/// shared slot itself, `CUFRAMES_ERR_INVALID_ARGUMENT` for NULL. A CUDA copy
/// is device memory of the subscriber's context; releasing it lets later
/// copies reuse it after the work queued on the subscriber's stream so far,
/// so it needs no synchronisation before the release (a shared slot does:
/// docs/c-api.md).
///
/// # Safety
///
/// `frame` is NULL or a live frame.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_frame_is_copy(frame: *const cuframes_frame) -> cuframes_status {
    ffi_boundary!("cuframes_frame_is_copy", {
        // SAFETY: NULL or a live frame, by the caller's contract.
        let frame = try_c!(unsafe { try_ref(frame, "frame") });
        frame.lease.is_copy().into()
    })
}

/// The frame's properties (colour description, aspect ratio, field order,
/// key frame, duration): 1 and `props_out` written when the publisher gave
/// them, 0 when it gave none (`props_out` untouched), negative on error.
///
/// # Safety
///
/// `frame` is NULL or a live frame; `props_out` NULL or a writable struct
/// of `struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_frame_get_props(
    frame: *const cuframes_frame,
    props_out: *mut cuframes_frame_props,
) -> cuframes_status {
    ffi_boundary!("cuframes_frame_get_props", {
        // SAFETY: NULL or a live frame, by the caller's contract.
        let frame = try_c!(unsafe { try_ref(frame, "frame") });
        // SAFETY: NULL or a writable struct of struct_size bytes (contract).
        let size = try_c!(unsafe { sized::out_size(props_out, "props_out") });
        match frame.lease.props() {
            Some(props) => {
                // SAFETY: checked above; writable by the caller's contract.
                unsafe { sized::write_out(props_out, size, cuframes_frame_props::from_props(props)) };
                1
            }
            None => 0,
        }
    })
}

/// Entry `index` of the frame's side data (`CUFRAMES_SIDE_DATA_*`, in the
/// order the publisher added them): 1 and the out-parameters written, 0
/// when the frame has no entry `index` (out-parameters untouched), negative
/// on error. `*data_out` stays valid until the frame is released. Iterate
/// from index 0 until 0 is returned.
///
/// # Safety
///
/// `frame` is NULL or a live frame; the out-parameters NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_frame_get_side_data(
    frame: *const cuframes_frame,
    index: usize,
    kind_out: *mut cuframes_side_data_kind,
    data_out: *mut *const u8,
    size_out: *mut usize,
) -> cuframes_status {
    ffi_boundary!("cuframes_frame_get_side_data", {
        // SAFETY: NULL or a live frame, by the caller's contract.
        let frame = try_c!(unsafe { try_ref(frame, "frame") });
        try_c!(check_out(kind_out, "kind_out"));
        try_c!(check_out(data_out, "data_out"));
        try_c!(check_out(size_out, "size_out"));
        match frame.lease.side_data().get(index) {
            Some(entry) => {
                // SAFETY: checked above; writable by the caller's contract.
                unsafe {
                    write_out(kind_out, cuframes_side_data_kind::from(entry.kind));
                    write_out(data_out, entry.bytes.as_ptr());
                    write_out(size_out, entry.bytes.len());
                }
                1
            }
            None => 0,
        }
    })
}

/// Releases (ACKs) the frame and frees the handle, from any thread, also
/// after its subscriber was destroyed. `CUFRAMES_ERR_OVERWRITTEN` when the
/// publisher overwrote the frame while it was held (the handle is freed
/// all the same). `INVALID_ARGUMENT` for NULL.
///
/// # Safety
///
/// `frame` is NULL or a live frame, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_frame_release(frame: *mut cuframes_frame) -> cuframes_status {
    ffi_boundary!("cuframes_frame_release", {
        // SAFETY: NULL or a live frame, by the caller's contract.
        try_c!(unsafe { try_ref(frame.cast_const(), "frame") });
        // SAFETY: made by Box::into_raw in cuframes_subscriber_next and given
        // back exactly once (contract).
        let frame = unsafe { Box::from_raw(frame) };
        try_c!(frame.lease.release());
        CUFRAMES_OK
    })
}

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use super::*;
    use crate::sized::assert_growable;

    #[test]
    fn growable_layouts() {
        assert_growable::<cuframes_frame_info>(
            offset_of!(cuframes_frame_info, struct_size),
            offset_of!(cuframes_frame_info, lost_before) + size_of::<u64>(),
        );
        assert_growable::<cuframes_frame_props>(
            offset_of!(cuframes_frame_props, struct_size),
            offset_of!(cuframes_frame_props, duration_ns) + size_of::<i64>(),
        );
        // The first layouts on LP64 (x86_64, aarch64): they never change
        // (tests/c/abi/cuframes-0.2.0.h has them too).
        #[cfg(target_pointer_width = "64")]
        {
            assert_eq!(<cuframes_frame_info as Growable>::SIZES[0], 176);
            assert_eq!(<cuframes_frame_props as Growable>::SIZES[0], 32);
        }
    }
}
