//! Status codes, their fixed descriptions, and the per-thread last-error
//! message.
//!
//! A status is `cuframes::ErrorKind`'s stable code (protocol notes, "Error
//! codes"), or 0 for success. The detailed message of the last failed call
//! lives in thread-local storage: `cuframes_last_error` hands out a pointer
//! into it, valid until the next cuframes call on that thread.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char};

use cuframes::{Error, ErrorKind};

/// Result of every call that can fail: `CUFRAMES_OK` (0) or a negative
/// `CUFRAMES_ERR_*` code. The numbers never change.
pub type cuframes_status = i32;

/// Success.
pub const CUFRAMES_OK: cuframes_status = 0;
/// A caller's argument is invalid (NULL pointer, bad key, size, format, option).
pub const CUFRAMES_ERR_INVALID_ARGUMENT: cuframes_status = -1;
/// No publisher exists for the key.
pub const CUFRAMES_ERR_NOT_FOUND: cuframes_status = -2;
/// A live publisher already owns the key.
pub const CUFRAMES_ERR_ALREADY_EXISTS: cuframes_status = -3;
/// Protocol violation or version mismatch.
pub const CUFRAMES_ERR_PROTOCOL: cuframes_status = -4;
/// Pixel format unknown or not supported by this operation.
pub const CUFRAMES_ERR_FORMAT: cuframes_status = -5;
/// The publisher already serves the maximum number of subscribers (31).
pub const CUFRAMES_ERR_TOO_MANY: cuframes_status = -6;
/// A wait ran out of time.
pub const CUFRAMES_ERR_TIMEOUT: cuframes_status = -7;
/// The peer went away (publisher shutdown or crash, subscriber dropped).
pub const CUFRAMES_ERR_DISCONNECTED: cuframes_status = -8;
/// A leased frame was overwritten by the publisher before it was released.
pub const CUFRAMES_ERR_OVERWRITTEN: cuframes_status = -9;
/// An operating-system call failed.
pub const CUFRAMES_ERR_IO: cuframes_status = -10;
/// A CUDA driver call failed.
pub const CUFRAMES_ERR_CUDA: cuframes_status = -11;
/// The operation or backend is not available in this build or on this machine.
pub const CUFRAMES_ERR_UNSUPPORTED: cuframes_status = -12;
/// Shared memory or a message from a peer holds values that cannot be trusted.
pub const CUFRAMES_ERR_CORRUPT: cuframes_status = -13;
/// Access denied by the operating system.
pub const CUFRAMES_ERR_PERMISSION: cuframes_status = -14;
/// An internal invariant broke (a bug), e.g. a panic caught at the boundary.
pub const CUFRAMES_ERR_INTERNAL: cuframes_status = -15;
/// A resource ran out: file descriptors, memory, space in /dev/shm, GPU
/// memory; the last-error message says which, on which side, and the limit.
pub const CUFRAMES_ERR_EXHAUSTED: cuframes_status = -16;

/// The status for an error kind: its stable code.
pub(crate) fn status_of(kind: ErrorKind) -> cuframes_status {
    kind.code()
}

/// The fixed, NUL-terminated description of a status (`cuframes_strerror`).
/// Each text equals `ErrorKind::describe` (a test keeps them in step).
pub(crate) fn describe(status: cuframes_status) -> &'static CStr {
    match status {
        CUFRAMES_OK => c"success",
        CUFRAMES_ERR_INVALID_ARGUMENT => c"invalid argument",
        CUFRAMES_ERR_NOT_FOUND => c"no such publisher",
        CUFRAMES_ERR_ALREADY_EXISTS => c"key already published",
        CUFRAMES_ERR_PROTOCOL => c"protocol error or version mismatch",
        CUFRAMES_ERR_FORMAT => c"unsupported pixel format",
        CUFRAMES_ERR_TOO_MANY => c"too many subscribers",
        CUFRAMES_ERR_TIMEOUT => c"timed out",
        CUFRAMES_ERR_DISCONNECTED => c"disconnected",
        CUFRAMES_ERR_OVERWRITTEN => c"frame overwritten while leased",
        CUFRAMES_ERR_IO => c"I/O error",
        CUFRAMES_ERR_CUDA => c"CUDA error",
        CUFRAMES_ERR_UNSUPPORTED => c"not supported",
        CUFRAMES_ERR_CORRUPT => c"corrupt shared state",
        CUFRAMES_ERR_PERMISSION => c"permission denied",
        CUFRAMES_ERR_INTERNAL => c"internal error",
        CUFRAMES_ERR_EXHAUSTED => c"a resource ran out",
        _ => c"unknown status",
    }
}

thread_local! {
    /// The message of the last failed call on this thread ("" when none).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `message` as this thread's last error. Interior NUL bytes (a
/// caller's string quoted in a message) become U+FFFD.
pub(crate) fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', "\u{FFFD}")).unwrap_or_default();
    // During thread teardown the slot may be gone; the message is then lost.
    let _ = LAST_ERROR.try_with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            *slot = text;
        }
    });
}

/// Records `error` as this thread's last error and returns its status.
pub(crate) fn fail(error: Error) -> cuframes_status {
    set_last_error(error.message());
    status_of(error.kind())
}

/// An `INVALID_ARGUMENT` error.
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}

/// A pointer to this thread's last-error message; it stays valid until the
/// message is replaced, i.e. until the next failing cuframes call on this
/// thread (documented as "the next cuframes call").
fn last_error_ptr() -> *const c_char {
    LAST_ERROR
        .try_with(|slot| slot.try_borrow().map(|s| s.as_ptr()).unwrap_or(c"".as_ptr()))
        .unwrap_or(c"".as_ptr())
}

/// A fixed English description of `status` ("invalid argument", "timed out",
/// ...); "unknown status" for a number that is not a status. Never NULL; the
/// string is static.
#[unsafe(no_mangle)]
pub extern "C" fn cuframes_strerror(status: cuframes_status) -> *const c_char {
    ffi_boundary!("cuframes_strerror", fallback = c"internal error".as_ptr(), {
        describe(status).as_ptr()
    })
}

/// The detailed message of the last failed cuframes call on the calling
/// thread (e.g. "no publisher for key 'cam1'"), or "" when no call on this
/// thread has failed yet. Successful calls leave it as it is.
///
/// The string lives in thread-local storage: it is valid until the next
/// cuframes call on the same thread (copy it to keep it), and each thread
/// sees only its own failures. Never NULL.
#[unsafe(no_mangle)]
pub extern "C" fn cuframes_last_error() -> *const c_char {
    ffi_boundary!("cuframes_last_error", fallback = c"".as_ptr(), {
        last_error_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_the_error_kind_codes() {
        let table = [
            (CUFRAMES_ERR_INVALID_ARGUMENT, ErrorKind::InvalidArgument),
            (CUFRAMES_ERR_NOT_FOUND, ErrorKind::NotFound),
            (CUFRAMES_ERR_ALREADY_EXISTS, ErrorKind::AlreadyExists),
            (CUFRAMES_ERR_PROTOCOL, ErrorKind::Protocol),
            (CUFRAMES_ERR_FORMAT, ErrorKind::Format),
            (CUFRAMES_ERR_TOO_MANY, ErrorKind::TooMany),
            (CUFRAMES_ERR_TIMEOUT, ErrorKind::Timeout),
            (CUFRAMES_ERR_DISCONNECTED, ErrorKind::Disconnected),
            (CUFRAMES_ERR_OVERWRITTEN, ErrorKind::Overwritten),
            (CUFRAMES_ERR_IO, ErrorKind::Io),
            (CUFRAMES_ERR_CUDA, ErrorKind::Cuda),
            (CUFRAMES_ERR_UNSUPPORTED, ErrorKind::Unsupported),
            (CUFRAMES_ERR_CORRUPT, ErrorKind::Corrupt),
            (CUFRAMES_ERR_PERMISSION, ErrorKind::Permission),
            (CUFRAMES_ERR_INTERNAL, ErrorKind::Internal),
            (CUFRAMES_ERR_EXHAUSTED, ErrorKind::Exhausted),
        ];
        assert_eq!(table.len(), ErrorKind::ALL.len());
        for (status, kind) in table {
            assert_eq!(status, status_of(kind));
            assert_eq!(describe(status).to_str().unwrap(), kind.describe());
        }
        assert_eq!(describe(CUFRAMES_OK).to_str().unwrap(), "success");
        assert_eq!(describe(-17).to_str().unwrap(), "unknown status");
        assert_eq!(describe(1).to_str().unwrap(), "unknown status");
    }

    #[test]
    fn last_error_is_per_thread_and_nul_safe() {
        set_last_error("first\0second");
        // SAFETY: the pointer is valid until the next cuframes call here.
        let text = unsafe { CStr::from_ptr(cuframes_last_error()) };
        assert_eq!(text.to_str().unwrap(), "first\u{FFFD}second");
        std::thread::spawn(|| {
            // SAFETY: as above, on this thread.
            let other = unsafe { CStr::from_ptr(cuframes_last_error()) };
            assert_eq!(other.to_bytes(), b"");
        })
        .join()
        .unwrap();
    }
}
