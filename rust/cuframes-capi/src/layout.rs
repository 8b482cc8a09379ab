//! Frame geometry before there is a publisher: what an EXTERNAL-ownership
//! caller needs to allocate its own slots.

use crate::error::{CUFRAMES_OK, cuframes_status};
use crate::sized::{self, Growable};
use crate::stream::{CUFRAMES_MAX_PLANES, cuframes_format, format_from_c};

/// Where each plane lies in one slot, as a publisher lays it out (pitches
/// aligned to 256 bytes, planes back to back).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct cuframes_frame_layout {
    /// `sizeof(cuframes_frame_layout)`, set by the caller; the library sets
    /// it to the bytes it wrote (docs/c-api.md, "ABI policy").
    pub struct_size: u32,
    /// Planes of the format (1..=CUFRAMES_MAX_PLANES).
    pub plane_count: u32,
    /// Byte offset of each plane from the slot's start; 0 past plane_count.
    pub offsets: [usize; CUFRAMES_MAX_PLANES],
    /// Bytes from one row to the next, per plane.
    pub pitches: [usize; CUFRAMES_MAX_PLANES],
    /// Bytes of picture per row, per plane.
    pub row_bytes: [usize; CUFRAMES_MAX_PLANES],
    /// Rows, per plane.
    pub rows: [u32; CUFRAMES_MAX_PLANES],
    /// Bytes of one frame: the least each slot must hold.
    pub frame_size: usize,
}

// SAFETY: repr(C), `struct_size: u32` first, integer fields only, no tail
// padding (tests::growable_layouts).
unsafe impl Growable for cuframes_frame_layout {
    const NAME: &'static str = "cuframes_frame_layout";
    // One published layout so far: struct_size is new in 0.2.0.
    const SIZES: &'static [usize] = &[size_of::<cuframes_frame_layout>()];
}

/// The slot layout a publisher of `format`, `width` x `height` uses:
/// allocate each EXTERNAL slot (`cuframes_publisher_config.external_slots`)
/// with at least `frame_size` bytes and write planes at these offsets and
/// pitches. `INVALID_ARGUMENT` for an unknown format or a size out of range.
///
/// # Safety
///
/// `layout_out` is NULL or a writable struct of `struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_frame_layout_get(
    format: cuframes_format,
    width: u32,
    height: u32,
    layout_out: *mut cuframes_frame_layout,
) -> cuframes_status {
    ffi_boundary!("cuframes_frame_layout_get", {
        // SAFETY: NULL or a writable struct of struct_size bytes (contract).
        let size = try_c!(unsafe { sized::out_size(layout_out, "layout_out") });
        let format = try_c!(format_from_c(format, "format"));
        let layout = try_c!(cuframes::FrameLayout::aligned(
            format,
            width,
            height,
            cuframes::PITCH_ALIGNMENT
        ));
        let mut out = cuframes_frame_layout {
            plane_count: layout.planes().len() as u32,
            frame_size: layout.size(),
            ..Default::default()
        };
        for (index, plane) in layout.planes().iter().enumerate() {
            out.offsets[index] = plane.offset;
            out.pitches[index] = plane.pitch;
            out.row_bytes[index] = plane.row_bytes;
            out.rows[index] = plane.rows as u32;
        }
        // SAFETY: checked above; writable by the caller's contract.
        unsafe { sized::write_out(layout_out, size, out) };
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
        assert_growable::<cuframes_frame_layout>(
            offset_of!(cuframes_frame_layout, struct_size),
            offset_of!(cuframes_frame_layout, frame_size) + size_of::<usize>(),
        );
        // The first layout on LP64 (x86_64, aarch64): it never changes
        // (tests/c/abi/cuframes-0.2.0.h has it too).
        #[cfg(target_pointer_width = "64")]
        assert_eq!(<cuframes_frame_layout as Growable>::SIZES[0], 128);
    }
}
