//! The library's messages (warnings about a fallback it took, a file it
//! skipped, stale state it removed) as C sees them: a process-wide callback
//! (`cuframes_set_log_callback`), a level filter (`cuframes_set_log_level`),
//! and a callback per publisher or subscriber (`log_callback` in its
//! config). Standard error (`cuframes: <message>`) when none is set.
//!
//! The contract (docs/c-api.md, "Logging"): callbacks may be called from
//! any thread, concurrently; an object's callback is never called once that
//! object's `_destroy` has returned, and the process's previous callback
//! never once `cuframes_set_log_callback` has returned. Both are kept by a
//! lock each callback is called under: replacing or retiring a callback
//! takes it exclusively, so it waits for the calls in progress, and every
//! later message finds the new sink. A logger that outlives its object (in
//! a frame, say) then sends to the process's sink instead.

use std::ffi::{CString, c_char, c_void};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use cuframes::log::{Level, Logger};

use crate::error::{CUFRAMES_OK, cuframes_status, invalid};

/// How much a message matters (`CUFRAMES_LOG_*`; the numbers never change).
pub type cuframes_log_level = u32;
/// Something failed; the call that failed reports it too.
pub const CUFRAMES_LOG_ERROR: cuframes_log_level = 0;
/// It worked, but not the way asked or expected (a fallback, a skipped file).
pub const CUFRAMES_LOG_WARNING: cuframes_log_level = 1;
/// Worth knowing once (what was chosen). The default maximum level.
pub const CUFRAMES_LOG_INFO: cuframes_log_level = 2;
/// Detail for debugging.
pub const CUFRAMES_LOG_DEBUG: cuframes_log_level = 3;

const _: () = {
    assert!(CUFRAMES_LOG_ERROR == Level::Error as u32);
    assert!(CUFRAMES_LOG_WARNING == Level::Warning as u32);
    assert!(CUFRAMES_LOG_INFO == Level::Info as u32);
    assert!(CUFRAMES_LOG_DEBUG == Level::Debug as u32);
};

/// A sink for the library's messages: called with the `opaque` pointer it
/// was registered with, the level, and the message: one line, NUL-terminated,
/// without a trailing newline, valid only during the call. May be called
/// from any thread, concurrently; must not call cuframes functions.
pub type cuframes_log_callback =
    Option<unsafe extern "C" fn(opaque: *mut c_void, level: cuframes_log_level, message: *const c_char)>;

/// A caller's callback and its opaque pointer.
#[derive(Clone, Copy, Debug)]
struct Callback {
    function: unsafe extern "C" fn(*mut c_void, cuframes_log_level, *const c_char),
    opaque: *mut c_void,
}

// SAFETY: the C API's contract is that a callback may be called from any
// thread, concurrently, with its opaque pointer; the library never
// dereferences `opaque`, it only hands it back.
unsafe impl Send for Callback {}
// SAFETY: as for Send: sharing a Callback only lets threads call it.
unsafe impl Sync for Callback {}

impl Callback {
    fn new(function: cuframes_log_callback, opaque: *mut c_void) -> Option<Callback> {
        function.map(|function| Callback { function, opaque })
    }

    fn call(&self, level: Level, message: &str) {
        let text = CString::new(one_line(message)).unwrap_or_default();
        // SAFETY: a callback the caller registered for this (contract: any
        // thread, concurrently); the string is NUL-terminated and outlives
        // the call, as the contract promises and no longer.
        unsafe { (self.function)(self.opaque, level as cuframes_log_level, text.as_ptr()) }
    }
}

/// The message as the contract promises it: one line (line breaks become
/// spaces), no NUL inside (U+FFFD instead), no trailing newline.
fn one_line(message: &str) -> String {
    message
        .trim_end_matches(['\n', '\r'])
        .replace(['\n', '\r'], " ")
        .replace('\0', "\u{FFFD}")
}

/// Where a callback is kept: read-locked while it is called, so taking it
/// for writing waits for every call in progress.
type Slot = RwLock<Option<Callback>>;

fn read(slot: &Slot) -> RwLockReadGuard<'_, Option<Callback>> {
    slot.read().unwrap_or_else(|p| p.into_inner())
}

fn replace(slot: &Slot, callback: Option<Callback>) {
    *slot.write().unwrap_or_else(|p| p.into_inner()) = callback;
}

/// The process's callback (`cuframes_set_log_callback`).
static PROCESS: Slot = RwLock::new(None);

/// The core's process logger while a C callback is set: forwards to it,
/// or, when a concurrent `cuframes_set_log_callback(NULL, ...)` got there
/// first, to standard error.
fn process_logger() -> Logger {
    Logger::new(|level, message| match &*read(&PROCESS) {
        Some(callback) => callback.call(level, message),
        None => cuframes::log::to_stderr(message),
    })
}

/// One object's callback (`log_callback` of its config), given to the core
/// as the object's logger and retired when the handle is dropped.
#[derive(Debug)]
pub(crate) struct ObjectLog {
    logger: Logger,
    slot: Arc<Slot>,
}

impl ObjectLog {
    /// None when the config names no callback: the object's messages go to
    /// the process's sink.
    pub(crate) fn new(function: cuframes_log_callback, opaque: *mut c_void) -> Option<ObjectLog> {
        let slot = Arc::new(RwLock::new(Some(Callback::new(function, opaque)?)));
        let theirs = slot.clone();
        let logger = Logger::new(move |level, message| {
            let callback = read(&theirs);
            match &*callback {
                Some(callback) => callback.call(level, message),
                None => {
                    drop(callback);
                    cuframes::log::emit_to_process(level, message)
                }
            }
        });
        Some(ObjectLog { logger, slot })
    }

    /// The logger for the core's config.
    pub(crate) fn logger(&self) -> Logger {
        self.logger.clone()
    }
}

impl Drop for ObjectLog {
    /// Retires the callback: waits for calls in progress; a clone of the
    /// logger that is still about (in a frame, say) sends to the process's
    /// sink from now on.
    fn drop(&mut self) {
        replace(&self.slot, None);
    }
}

/// Runs `body` with the object's callback receiving the messages this
/// thread produces meanwhile (every call on a publisher or subscriber).
pub(crate) fn scoped<T>(log: Option<&ObjectLog>, body: impl FnOnce() -> T) -> T {
    cuframes::log::with_logger(log.map(|l| &l.logger), body)
}

/// Sets the process's sink for the library's messages: `callback` with
/// `opaque`, or, for NULL, standard error (`cuframes: <message>`, the
/// default). Messages of a publisher or subscriber whose config names its
/// own `log_callback` go there instead. Once this returns, the previous
/// callback is not called again (calls in progress on other threads have
/// returned). Always `CUFRAMES_OK`.
///
/// # Safety
///
/// `callback` is NULL or a function that may be called as
/// `cuframes_log_callback` says, from any thread, until it is replaced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_set_log_callback(
    callback: cuframes_log_callback,
    opaque: *mut c_void,
) -> cuframes_status {
    ffi_boundary!("cuframes_set_log_callback", {
        let callback = Callback::new(callback, opaque);
        if callback.is_some() {
            replace(&PROCESS, callback);
            cuframes::log::set_logger(Some(process_logger()));
        } else {
            cuframes::log::set_logger(None);
            replace(&PROCESS, None);
        }
        CUFRAMES_OK
    })
}

/// Messages less important than `max_level` are not produced at all, for
/// every sink (init: `CUFRAMES_LOG_INFO`). `INVALID_ARGUMENT` for a number
/// that is no `cuframes_log_level`.
#[unsafe(no_mangle)]
pub extern "C" fn cuframes_set_log_level(max_level: cuframes_log_level) -> cuframes_status {
    ffi_boundary!("cuframes_set_log_level", {
        let level = try_c!(Level::from_number(max_level).ok_or_else(|| invalid(format!(
            "log level {max_level} is not a cuframes_log_level (0 ERROR, 1 WARNING, 2 INFO, 3 DEBUG)"
        ))));
        cuframes::log::set_max_level(level);
        CUFRAMES_OK
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Barrier, Mutex};
    use std::time::Duration;

    use super::*;

    /// What a test callback saw; its address is the callback's opaque.
    #[derive(Default)]
    struct Seen {
        messages: Mutex<Vec<(cuframes_log_level, String)>>,
        /// When set, the callback waits here twice: once on entering, once
        /// before it returns.
        hold: Option<Barrier>,
        returned: AtomicUsize,
    }

    unsafe extern "C" fn record(opaque: *mut c_void, level: cuframes_log_level, message: *const c_char) {
        // SAFETY: every test passes a live `Seen` as opaque, and the library
        // a NUL-terminated message.
        let (seen, text) = unsafe { (&*opaque.cast::<Seen>(), CStr::from_ptr(message)) };
        if let Some(hold) = &seen.hold {
            hold.wait();
            hold.wait();
        }
        let text = text.to_string_lossy().into_owned();
        seen.messages.lock().unwrap().push((level, text));
        seen.returned.fetch_add(1, Ordering::SeqCst);
    }

    fn opaque(seen: &Seen) -> *mut c_void {
        (seen as *const Seen).cast_mut().cast()
    }

    #[test]
    fn messages_arrive_as_one_line() {
        let seen = Seen::default();
        let log = ObjectLog::new(Some(record), opaque(&seen)).unwrap();
        log.logger().log(Level::Warning, "two\nlines\0 and a NUL\n");
        assert_eq!(
            *seen.messages.lock().unwrap(),
            [(CUFRAMES_LOG_WARNING, "two lines\u{FFFD} and a NUL".to_owned())]
        );
        assert!(ObjectLog::new(None, opaque(&seen)).is_none());
    }

    /// A logger kept past its object's end (as a frame could keep one)
    /// never reaches the object's callback again.
    #[test]
    fn a_retired_callback_is_not_called() {
        let seen = Seen::default();
        let log = ObjectLog::new(Some(record), opaque(&seen)).unwrap();
        let kept = log.logger();
        kept.log(Level::Warning, "before");
        drop(log);
        kept.log(Level::Warning, "after: to the process's sink");
        assert_eq!(
            *seen.messages.lock().unwrap(),
            [(CUFRAMES_LOG_WARNING, "before".to_owned())]
        );
    }

    /// Retiring waits for a call in progress on another thread: when the
    /// drop returns, the callback has returned.
    #[test]
    fn retiring_waits_for_a_call_in_progress() {
        let seen = Seen {
            hold: Some(Barrier::new(2)),
            ..Seen::default()
        };
        let log = ObjectLog::new(Some(record), opaque(&seen)).unwrap();
        let kept = log.logger();
        std::thread::scope(|s| {
            s.spawn(|| kept.log(Level::Info, "in progress"));
            let hold = seen.hold.as_ref().unwrap();
            hold.wait(); // the call has begun
            let retire = s.spawn(move || drop(log));
            std::thread::sleep(Duration::from_millis(50));
            assert!(!retire.is_finished(), "retiring must wait for the call");
            hold.wait(); // let the call return
            retire.join().unwrap();
            assert_eq!(seen.returned.load(Ordering::SeqCst), 1);
        });
    }

    #[test]
    fn levels_are_checked() {
        assert_eq!(
            cuframes_set_log_level(4),
            crate::error::CUFRAMES_ERR_INVALID_ARGUMENT
        );
        assert_eq!(cuframes_set_log_level(CUFRAMES_LOG_INFO), CUFRAMES_OK);
    }
}
