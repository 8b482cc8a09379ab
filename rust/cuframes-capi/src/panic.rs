//! The panic boundary: no Rust panic ever unwinds into C.
//!
//! Every export's body runs inside [`ffi_boundary!`], which catches a panic
//! with `catch_unwind`, records `"internal error in <function>: <panic
//! message>"` as the thread's last error and returns a fallback:
//!
//! - calls that return a `cuframes_status`: `CUFRAMES_ERR_INTERNAL` (the default);
//! - `cuframes_version`, `cuframes_strerror`, `cuframes_last_error`: a static string;
//! - `cuframes_protocol_version`, `cuframes_publisher_subscriber_count`: 0;
//! - `cuframes_subscriber_warming_up`: false;
//! - `void` calls (`_destroy`): nothing.
//!
//! A handle whose call panicked may be left in an inconsistent state; it is
//! still safe to destroy. (The release profile keeps `panic = "unwind"`; a
//! build with `panic = "abort"` would abort instead.)

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::set_last_error;

/// Runs an export's body behind the panic boundary.
///
/// `ffi_boundary!("name", { body })` returns the body's `cuframes_status`,
/// or `CUFRAMES_ERR_INTERNAL` on a panic; `ffi_boundary!("name", fallback =
/// value, { body })` returns `value` on a panic. Early exits from the body
/// (`return`, [`try_c!`]) leave the body's closure, not the export.
macro_rules! ffi_boundary {
    ($name:literal, $body:block) => {
        ffi_boundary!($name, fallback = $crate::error::CUFRAMES_ERR_INTERNAL, $body)
    };
    ($name:literal, fallback = $fallback:expr, $body:block) => {{
        let outcome = $crate::panic::catch(move || $body);
        match outcome {
            Ok(value) => value,
            Err(payload) => {
                $crate::panic::record($name, payload);
                $fallback
            }
        }
    }};
}

/// Unwraps a `cuframes::Result` inside an [`ffi_boundary!`] body, or returns
/// its status from the body after recording the message as last error.
macro_rules! try_c {
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(error) => return $crate::error::fail(error),
        }
    };
}

/// `catch_unwind` for export bodies. The bodies only touch state reached
/// through the caller's pointers; after a panic, that state is at worst
/// inconsistent, never unsound to drop, hence `AssertUnwindSafe`.
pub(crate) fn catch<R>(body: impl FnOnce() -> R) -> Result<R, Box<dyn Any + Send>> {
    catch_unwind(AssertUnwindSafe(body))
}

/// Records a caught panic as the thread's last error and disposes of its
/// payload (whose own `Drop` may panic again: that is caught too).
pub(crate) fn record(function: &str, payload: Box<dyn Any + Send>) {
    let detail = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic with a non-string payload".to_owned());
    set_last_error(&format!("internal error in {function}: {detail}"));
    let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
}

#[cfg(test)]
mod tests {
    use std::ffi::{CStr, c_char};

    use crate::error::{CUFRAMES_ERR_INTERNAL, CUFRAMES_ERR_TIMEOUT, CUFRAMES_OK, cuframes_status};

    fn last_error() -> String {
        // SAFETY: cuframes_last_error never returns NULL, and the string
        // stays valid until the next cuframes call on this thread.
        unsafe { CStr::from_ptr(crate::error::cuframes_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    fn status_body(panic: bool) -> cuframes_status {
        ffi_boundary!("status_body", {
            if panic {
                panic!("boom {}", 42);
            }
            CUFRAMES_OK
        })
    }

    #[test]
    fn a_panic_becomes_internal_with_a_message() {
        assert_eq!(status_body(false), CUFRAMES_OK);
        assert_eq!(status_body(true), CUFRAMES_ERR_INTERNAL);
        assert_eq!(last_error(), "internal error in status_body: boom 42");
    }

    #[test]
    fn fallbacks_for_calls_without_status() {
        let pointer: *const c_char = ffi_boundary!("pointer", fallback = std::ptr::null(), {
            panic!("static str payload");
        });
        assert!(pointer.is_null());
        assert_eq!(last_error(), "internal error in pointer: static str payload");
        let count: u32 = ffi_boundary!("count", fallback = 0, { std::panic::panic_any(7u8) });
        assert_eq!(count, 0);
        assert_eq!(
            last_error(),
            "internal error in count: panic with a non-string payload"
        );
        let unit: () = ffi_boundary!("unit", fallback = (), {
            let v: Vec<u8> = Vec::new();
            let _ = v[3];
        });
        assert_eq!(unit, ());
        assert!(last_error().starts_with("internal error in unit: index out of bounds"));
    }

    #[test]
    fn try_c_returns_the_status_and_sets_the_message() {
        let status = ffi_boundary!("try", {
            try_c!(Err::<(), _>(cuframes::Error::new(
                cuframes::ErrorKind::Timeout,
                "nothing came"
            )));
            CUFRAMES_OK
        });
        assert_eq!(status, CUFRAMES_ERR_TIMEOUT);
        assert_eq!(last_error(), "nothing came");
    }

    #[test]
    fn a_panicking_payload_drop_is_contained() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("drop bomb");
            }
        }
        let status = ffi_boundary!("bomb", { std::panic::panic_any(Bomb) });
        assert_eq!(status, CUFRAMES_ERR_INTERNAL);
    }

    /// Every `extern "C"` function of the crate runs behind the boundary.
    #[test]
    fn every_export_uses_the_boundary() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut exports = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let source = std::fs::read_to_string(&path).unwrap();
            // Not the tests' own C callbacks.
            let source = source.split("\n#[cfg(test)]").next().unwrap();
            let pieces: Vec<&str> = source.split("extern \"C\" fn ").collect();
            for piece in &pieces[1..] {
                let name = piece.split('(').next().unwrap();
                // The function's body: up to the next item at column 0.
                let body = piece.split("\n}\n").next().unwrap();
                assert!(
                    body.contains(&format!("ffi_boundary!(\"{name}\"")),
                    "{}: {name} does not run behind ffi_boundary!(\"{name}\", ...)",
                    path.display()
                );
                exports += 1;
            }
        }
        assert_eq!(exports, 37, "the C API has 37 functions (include/cuframes.h)");
    }
}
