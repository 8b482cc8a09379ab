//! Logging at the C boundary (docs/c-api.md, "Logging"): an object's
//! callback gets its messages and never one after its `_destroy`; a config
//! of the 0.2.0 size (no log fields) sends them to the process's sink. The
//! warning used: a publisher removing a stale socket it found at its key.
//! Every test here changes the process's sink: they take turns.

mod common;

use std::ffi::{CStr, CString, c_char, c_void};
use std::marker::PhantomData;
use std::mem::offset_of;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use common::*;
use cuframes_capi::*;

static TURNS: Mutex<()> = Mutex::new(());

fn take_turn() -> MutexGuard<'static, ()> {
    TURNS.lock().unwrap_or_else(|p| p.into_inner())
}

/// What one callback saw; its address is the callback's opaque.
#[derive(Default)]
struct Seen {
    messages: Mutex<Vec<(cuframes_log_level, String)>>,
    /// Set once its object is destroyed: a call after that fails the test.
    destroyed: AtomicBool,
    called_after_destroy: AtomicBool,
}

impl Seen {
    fn opaque(&self) -> *mut c_void {
        (self as *const Seen).cast_mut().cast()
    }

    fn messages(&self) -> Vec<(cuframes_log_level, String)> {
        self.messages.lock().unwrap().clone()
    }
}

unsafe extern "C" fn record(opaque: *mut c_void, level: cuframes_log_level, message: *const c_char) {
    // SAFETY: the tests register a `Seen` that outlives its registration,
    // and the library passes a NUL-terminated message.
    let (seen, message) = unsafe { (&*opaque.cast::<Seen>(), CStr::from_ptr(message)) };
    if seen.destroyed.load(Ordering::SeqCst) {
        seen.called_after_destroy.store(true, Ordering::SeqCst);
    }
    let message = message.to_string_lossy().into_owned();
    seen.messages.lock().unwrap().push((level, message));
}

/// Leaves what a crashed publisher of `key` leaves in `dir`: a socket that
/// nobody listens on. The next publisher removes it, with a warning.
fn plant_stale_socket(dir: &Path, key: &CString) {
    drop(UnixListener::bind(dir.join(format!("{}.sock", key.to_str().unwrap()))).unwrap());
}

fn is_stale_warning((level, message): &(cuframes_log_level, String), key: &CString) -> bool {
    *level == CUFRAMES_LOG_WARNING
        && message.contains(&format!(
            "key '{}': removed what a publisher",
            key.to_str().unwrap()
        ))
}

/// Sets the process's sink to `seen` for the life of the guard.
struct ProcessSink<'a>(PhantomData<&'a Seen>);

impl<'a> ProcessSink<'a> {
    fn set(seen: &'a Seen) -> ProcessSink<'a> {
        // SAFETY: `record` takes a Seen, which outlives the registration
        // (Drop unregisters).
        let status = unsafe { cuframes_set_log_callback(Some(record), seen.opaque()) };
        assert_eq!(status, CUFRAMES_OK);
        ProcessSink(PhantomData)
    }
}

impl Drop for ProcessSink<'_> {
    fn drop(&mut self) {
        // SAFETY: NULL restores standard error.
        let status = unsafe { cuframes_set_log_callback(None, std::ptr::null_mut()) };
        assert_eq!(status, CUFRAMES_OK);
    }
}

#[test]
fn an_object_s_callback_is_not_called_after_its_destroy() {
    let _turn = take_turn();
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let key = unique_key("logobj");
    let process = Seen::default();
    let _sink = ProcessSink::set(&process);

    plant_stale_socket(dir.path(), &key);
    let publisher_seen = Seen::default();
    let mut pconfig = publisher_config(&key, &dir_c, CUFRAMES_FORMAT_NV12);
    pconfig.log_callback = Some(record);
    pconfig.log_opaque = publisher_seen.opaque();
    let publisher = create_publisher(&pconfig);
    let said = publisher_seen.messages();
    assert!(said.len() == 1 && is_stale_warning(&said[0], &key), "{said:?}");
    assert!(
        process.messages().is_empty(),
        "the object's own callback got it: {:?}",
        process.messages()
    );

    // A subscriber with a callback of its own, and read-ahead (a thread of its).
    let subscriber_seen = Seen::default();
    let mut sconfig = subscriber_config(&key, &dir_c);
    sconfig.read_ahead = 4;
    sconfig.copy = CUFRAMES_COPY_NEVER;
    sconfig.log_callback = Some(record);
    sconfig.log_opaque = subscriber_seen.opaque();
    let subscriber = create_subscriber(&sconfig);
    publish_filled(publisher, 7, 1);
    let mut frame = std::ptr::null_mut();
    // SAFETY: a live handle, a valid out-pointer.
    let status = unsafe { cuframes_subscriber_next(subscriber, 2000, &mut frame) };
    assert_eq!(status, CUFRAMES_OK);

    // SAFETY: a live handle, not used again.
    unsafe { cuframes_subscriber_destroy(subscriber) };
    subscriber_seen.destroyed.store(true, Ordering::SeqCst);
    publish_filled(publisher, 8, 2);
    // SAFETY: a live frame, released after its subscriber is gone.
    let status = unsafe { cuframes_frame_release(frame) };
    assert_eq!(status, CUFRAMES_OK);
    // SAFETY: a live handle, not used again.
    unsafe { cuframes_publisher_destroy(publisher) };
    publisher_seen.destroyed.store(true, Ordering::SeqCst);
    assert!(!subscriber_seen.called_after_destroy.load(Ordering::SeqCst));
    assert!(!publisher_seen.called_after_destroy.load(Ordering::SeqCst));
}

/// A program built against 0.2.0's header passes the smaller config: the
/// bytes where log_callback now lies are not its, and are never read.
#[test]
fn a_config_of_the_0_2_0_size_logs_to_the_process_sink() {
    let _turn = take_turn();
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let key = unique_key("logold");
    let process = Seen::default();
    let _sink = ProcessSink::set(&process);
    let not_read = Seen::default();

    plant_stale_socket(dir.path(), &key);
    let mut config = publisher_config(&key, &dir_c, CUFRAMES_FORMAT_NV12);
    config.struct_size = offset_of!(cuframes_publisher_config, log_callback) as u32;
    assert_eq!(config.struct_size, 112, "0.2.0's size on LP64");
    config.log_callback = Some(record);
    config.log_opaque = not_read.opaque();
    let publisher = create_publisher(&config);
    assert!(not_read.messages().is_empty(), "{:?}", not_read.messages());
    let said = process.messages();
    assert!(said.iter().any(|m| is_stale_warning(m, &key)), "{said:?}");

    // Between the two layouts: no struct of any header.
    let mut subscriber = subscriber_config(&key, &dir_c);
    subscriber.struct_size = offset_of!(cuframes_subscriber_config, log_opaque) as u32;
    let mut handle: *mut cuframes_subscriber = std::ptr::null_mut();
    // SAFETY: a valid config; the size is refused before anything is read past it.
    let status = unsafe { cuframes_subscriber_create(&subscriber, &mut handle) };
    assert_eq!(status, CUFRAMES_ERR_INVALID_ARGUMENT);
    assert!(
        last_error().contains("not the size of a published layout"),
        "{}",
        last_error()
    );
    // SAFETY: a live handle, not used again.
    unsafe { cuframes_publisher_destroy(publisher) };
}

/// The level filter holds for every sink; an unknown level is refused.
#[test]
fn the_level_filter_suppresses() {
    let _turn = take_turn();
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let key = unique_key("loglevel");
    let process = Seen::default();
    let _sink = ProcessSink::set(&process);
    assert_eq!(cuframes_set_log_level(CUFRAMES_LOG_ERROR), CUFRAMES_OK);
    plant_stale_socket(dir.path(), &key);
    let publisher = create_publisher(&publisher_config(&key, &dir_c, CUFRAMES_FORMAT_NV12));
    assert_eq!(cuframes_set_log_level(CUFRAMES_LOG_INFO), CUFRAMES_OK);
    assert!(process.messages().is_empty(), "{:?}", process.messages());
    assert_eq!(cuframes_set_log_level(4), CUFRAMES_ERR_INVALID_ARGUMENT);
    assert!(last_error().contains("log level 4"), "{}", last_error());
    // SAFETY: a live handle, not used again.
    unsafe { cuframes_publisher_destroy(publisher) };
}
