//! Library-wide calls: versions and key validation.

use std::ffi::{CStr, c_char};

use crate::error::{CUFRAMES_OK, cuframes_status};
use crate::ffi::required_str;

const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
    Ok(version) => version,
    Err(_) => panic!("the package version contains a NUL byte"),
};

/// The library's version, e.g. "0.2.0" (a static string, never NULL).
#[unsafe(no_mangle)]
pub extern "C" fn cuframes_version() -> *const c_char {
    ffi_boundary!("cuframes_version", fallback = VERSION.as_ptr(), {
        VERSION.as_ptr()
    })
}

/// The wire protocol version this library speaks (1).
#[unsafe(no_mangle)]
pub extern "C" fn cuframes_protocol_version() -> u32 {
    ffi_boundary!("cuframes_protocol_version", fallback = 0, {
        cuframes::protocol_version()
    })
}

/// `CUFRAMES_OK` when `key` matches `^[a-zA-Z0-9_-]{1,63}$`, else
/// `CUFRAMES_ERR_INVALID_ARGUMENT` (also for NULL).
///
/// # Safety
///
/// `key` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_validate_key(key: *const c_char) -> cuframes_status {
    ffi_boundary!("cuframes_validate_key", {
        // SAFETY: NULL or NUL-terminated, by the caller's contract.
        let key = try_c!(unsafe { required_str(key, "key") });
        try_c!(cuframes::validate_key(key));
        CUFRAMES_OK
    })
}
