//! Checked conversions of what C hands in: pointers to objects and strings
//! (and a config's CUDA handles). Each turns NULL (and a misaligned pointer)
//! into `INVALID_ARGUMENT` naming the argument, so exports never dereference
//! one.

use std::ffi::{CStr, c_char, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use cuframes::{CudaBinding, Result};

use crate::error::invalid;

/// `&T` from a caller's pointer; `what` names the argument in the error.
///
/// # Safety
///
/// `ptr` is NULL or points to a valid `T` that is not mutated for `'a`.
pub(crate) unsafe fn try_ref<'a, T>(ptr: *const T, what: &str) -> Result<&'a T> {
    check(ptr, what)?;
    // SAFETY: non-NULL and aligned (checked); valid for 'a by the caller's contract.
    Ok(unsafe { &*ptr })
}

/// `&mut T` from a caller's pointer.
///
/// # Safety
///
/// `ptr` is NULL or points to a valid `T` that nothing else accesses for `'a`.
pub(crate) unsafe fn try_mut<'a, T>(ptr: *mut T, what: &str) -> Result<&'a mut T> {
    check(ptr, what)?;
    // SAFETY: non-NULL and aligned (checked); exclusive for 'a by the caller's contract.
    Ok(unsafe { &mut *ptr })
}

/// `&[T]` of `len` elements from a caller's pointer.
///
/// # Safety
///
/// `ptr` is NULL or points to `len` valid `T`s that are not mutated for `'a`.
pub(crate) unsafe fn try_slice<'a, T>(ptr: *const T, len: usize, what: &str) -> Result<&'a [T]> {
    check(ptr, what)?;
    // SAFETY: non-NULL and aligned (checked); `len` valid elements for 'a by
    // the caller's contract (so their size fits isize as well).
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Checks an out-parameter before any work is done, so a call that cannot
/// report its result fails without side effects.
pub(crate) fn check_out<T>(ptr: *mut T, what: &str) -> Result<()> {
    check(ptr, what)
}

/// Writes a result through an out-parameter checked with [`check_out`].
///
/// # Safety
///
/// `ptr` passed [`check_out`] and points to writable memory for a `T` (its
/// old contents, initialised or not, are overwritten without being dropped).
pub(crate) unsafe fn write_out<T>(ptr: *mut T, value: T) {
    debug_assert!(!ptr.is_null() && ptr.is_aligned());
    // SAFETY: non-NULL, aligned and writable by the caller's contract; the
    // write does not read or drop the old (C-owned) value.
    unsafe { ptr.write(value) }
}

fn check<T>(ptr: *const T, what: &str) -> Result<()> {
    if ptr.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    if !ptr.is_aligned() {
        return Err(invalid(format!(
            "{what} ({ptr:p}) is not aligned to {} bytes",
            std::mem::align_of::<T>()
        )));
    }
    Ok(())
}

/// A C string, NULL allowed.
///
/// # Safety
///
/// `ptr` is NULL or points to a NUL-terminated string that stays unchanged for `'a`.
pub(crate) unsafe fn opt_cstr<'a>(ptr: *const c_char) -> Option<&'a CStr> {
    if ptr.is_null() {
        None
    } else {
        // SAFETY: non-NULL; NUL-terminated and stable for 'a by the caller's contract.
        Some(unsafe { CStr::from_ptr(ptr) })
    }
}

/// A required UTF-8 C string.
///
/// # Safety
///
/// As for [`opt_cstr`].
pub(crate) unsafe fn required_str<'a>(ptr: *const c_char, what: &str) -> Result<&'a str> {
    // SAFETY: forwarded from this function's contract.
    let text = unsafe { opt_cstr(ptr) }.ok_or_else(|| invalid(format!("{what} is NULL")))?;
    text.to_str()
        .map_err(|_| invalid(format!("{what} {text:?} is not UTF-8")))
}

/// An optional UTF-8 C string.
///
/// # Safety
///
/// As for [`opt_cstr`].
pub(crate) unsafe fn optional_str<'a>(ptr: *const c_char, what: &str) -> Result<Option<&'a str>> {
    // SAFETY: forwarded from this function's contract.
    match unsafe { opt_cstr(ptr) } {
        None => Ok(None),
        Some(text) => text
            .to_str()
            .map(Some)
            .map_err(|_| invalid(format!("{what} {text:?} is not UTF-8"))),
    }
}

/// An optional path (any bytes but NUL).
///
/// # Safety
///
/// As for [`opt_cstr`].
pub(crate) unsafe fn optional_path(ptr: *const c_char) -> Option<PathBuf> {
    // SAFETY: forwarded from this function's contract.
    unsafe { opt_cstr(ptr) }.map(|text| PathBuf::from(std::ffi::OsStr::from_bytes(text.to_bytes())))
}

/// A config's CUDA context and stream (`CUcontext`, `CUstream`; NULL = the
/// current context, the default stream): None when both are NULL.
pub(crate) fn cuda_binding(context: *mut c_void, stream: *mut c_void) -> Option<CudaBinding> {
    (!context.is_null() || !stream.is_null()).then_some(CudaBinding {
        context: context as usize,
        stream: stream as usize,
    })
}
