//! Listing the live keys of a runtime directory (`cuframes_list_keys`), for
//! device lists such as `ffmpeg -sources cuframes`.

use std::ffi::{c_char, c_void};
use std::mem::offset_of;

use crate::error::{CUFRAMES_OK, cuframes_status};
use crate::ffi::{check_out, optional_path};
use crate::log::{ObjectLog, cuframes_log_callback};
use crate::sized::{self, Growable};
use crate::stream::{cuframes_stream_info, stream_info_to_c};

/// Bytes of `cuframes_key_info.key`: a 63-byte key and its NUL.
pub const CUFRAMES_KEY_BYTES: usize = 64;

/// One key with a live publisher.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuframes_key_info {
    /// `sizeof(cuframes_key_info)`: set it in the first entry passed to
    /// `cuframes_list_keys` (the size of every entry); the library sets it in
    /// each entry to the bytes it wrote (docs/c-api.md, "ABI policy"). The
    /// struct grows only through `info`, its last field.
    pub struct_size: u32,
    /// The key, NUL-terminated.
    pub key: [c_char; CUFRAMES_KEY_BYTES],
    /// Its stream as a subscriber would see it; all zero but `struct_size`
    /// when the shared header could not be read (its fields validated, like
    /// a subscriber's).
    pub info: cuframes_stream_info,
}

/// `cuframes_key_info` ends with a `cuframes_stream_info` and grows only
/// through it: its layouts are the stream info's, after the key.
const KEY_INFO_SIZES: [usize; <cuframes_stream_info as Growable>::SIZES.len()] = {
    let stream = <cuframes_stream_info as Growable>::SIZES;
    let mut sizes = [0; <cuframes_stream_info as Growable>::SIZES.len()];
    let mut i = 0;
    while i < sizes.len() {
        sizes[i] = offset_of!(cuframes_key_info, info) + stream[i];
        i += 1;
    }
    sizes
};

// SAFETY: repr(C), `struct_size: u32` first, a byte array and a
// cuframes_stream_info (itself Growable), no tail padding
// (tests::growable_layouts).
unsafe impl Growable for cuframes_key_info {
    const NAME: &'static str = "cuframes_key_info";
    const SIZES: &'static [usize] = &KEY_INFO_SIZES;
}

/// The keys with a live publisher whose socket is in `runtime_dir` (NULL: as a
/// subscriber looks, `$CUFRAMES_RUNTIME_DIR`, /run/cuframes, ...): the first
/// `capacity` into `entries` (NULL when `capacity` is 0), and how many there
/// are in `*count_out`, which can exceed `capacity` (call again with more
/// room). Reads each key's shared header, asking its publisher over the
/// socket when /dev/shm is another container's. `entries[0].struct_size`
/// (`sizeof(cuframes_key_info)`) is the size of every entry. `INVALID_ARGUMENT`
/// for a NULL `count_out`, or NULL `entries` (or a bad
/// `entries[0].struct_size`) with a non-zero `capacity`.
///
/// # Safety
///
/// `runtime_dir` NULL or a NUL-terminated string; `entries` NULL or
/// writable for `capacity` entries of `entries[0].struct_size` bytes;
/// `count_out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_list_keys(
    runtime_dir: *const c_char,
    entries: *mut cuframes_key_info,
    capacity: usize,
    count_out: *mut usize,
) -> cuframes_status {
    ffi_boundary!("cuframes_list_keys", {
        // SAFETY: the same contract.
        unsafe { list_keys(runtime_dir, entries, capacity, count_out) }
    })
}

/// `cuframes_list_keys`, with the messages of this call (names skipped, with
/// the reason) going to `log_callback` with `log_opaque` rather than to the
/// process's sink; NULL `log_callback`: the process's sink. The callback is
/// called only on this thread, before this returns.
///
/// # Safety
///
/// As `cuframes_list_keys`; `log_callback` NULL or a function that may be
/// called as `cuframes_log_callback` says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_list_keys_logged(
    runtime_dir: *const c_char,
    entries: *mut cuframes_key_info,
    capacity: usize,
    count_out: *mut usize,
    log_callback: cuframes_log_callback,
    log_opaque: *mut c_void,
) -> cuframes_status {
    ffi_boundary!("cuframes_list_keys_logged", {
        let log = ObjectLog::new(log_callback, log_opaque);
        // SAFETY: the contract of cuframes_list_keys, the caller's.
        crate::log::scoped(log.as_ref(), || unsafe {
            list_keys(runtime_dir, entries, capacity, count_out)
        })
    })
}

/// The body of both listings.
///
/// # Safety
///
/// As `cuframes_list_keys`.
unsafe fn list_keys(
    runtime_dir: *const c_char,
    entries: *mut cuframes_key_info,
    capacity: usize,
    count_out: *mut usize,
) -> cuframes_status {
    try_c!(check_out(count_out, "count_out"));
    let stride = if capacity > 0 {
        // SAFETY: NULL or writable entries of struct_size bytes (contract).
        try_c!(unsafe { sized::out_size(entries, "entries") })
    } else {
        0
    };
    // SAFETY: NULL or a NUL-terminated string, by the caller's contract.
    let dir = unsafe { optional_path(runtime_dir) };
    let mut count = 0usize;
    for key in cuframes::list_keys(dir.as_deref()) {
        let Ok(found) = cuframes::inspect::inspect(&key, dir.as_deref()) else {
            continue;
        };
        // Live, and reachable here: its socket is in this runtime
        // directory (a /dev/shm name alone may be another directory's).
        if !found.status.live || !found.status.has_socket {
            continue;
        }
        if count < capacity {
            let mut entry = cuframes_key_info {
                struct_size: size_of::<cuframes_key_info>() as u32,
                key: [0; CUFRAMES_KEY_BYTES],
                info: cuframes_stream_info {
                    struct_size: size_of::<cuframes_stream_info>() as u32,
                    ..Default::default()
                },
            };
            for (dst, &b) in entry
                .key
                .iter_mut()
                .zip(key.as_bytes().iter().take(CUFRAMES_KEY_BYTES - 1))
            {
                *dst = b as c_char;
            }
            if let Some(info) = found.info.as_ref().ok().and_then(stream_info_to_c) {
                entry.info = info;
            }
            // The nested info: as much of it as the entry holds (all of
            // it while key_info grows only through info).
            let written = stride.min(size_of::<cuframes_key_info>());
            entry.info.struct_size = (written - offset_of!(cuframes_key_info, info)) as u32;
            // SAFETY: entries holds `capacity` writable entries of
            // `stride` bytes each (contract).
            unsafe { sized::write_bytes_of(entries.cast::<u8>().add(count * stride), stride, entry) };
        }
        count += 1;
    }
    // SAFETY: checked above; writable by the caller's contract.
    unsafe { count_out.write(count) };
    CUFRAMES_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sized::assert_growable;

    #[test]
    fn growable_layouts() {
        assert_growable::<cuframes_key_info>(
            offset_of!(cuframes_key_info, struct_size),
            offset_of!(cuframes_key_info, info) + size_of::<cuframes_stream_info>(),
        );
        // The first layout on LP64 (x86_64, aarch64): it never changes
        // (tests/c/abi/cuframes-0.2.0.h has it too).
        #[cfg(target_pointer_width = "64")]
        assert_eq!(<cuframes_key_info as Growable>::SIZES[0], 160);
    }
}
