//! Helpers for the C API tests: C strings, unique keys, a private runtime
//! directory, and small wrappers that turn statuses into assertions.
#![allow(dead_code)]

use std::ffi::{CStr, CString};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use cuframes_capi::*;

/// A key unique to this process and call (shm names are global).
pub fn unique_key(tag: &str) -> CString {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    CString::new(format!(
        "capi{}-{tag}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
    .unwrap()
}

pub fn cstring(path: &Path) -> CString {
    CString::new(path.to_str().unwrap()).unwrap()
}

/// This thread's last error, copied.
pub fn last_error() -> String {
    // SAFETY: never NULL; valid until the next cuframes call on this thread.
    unsafe { CStr::from_ptr(cuframes_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// One of the API's structs, zeroed but for `struct_size`: what a C caller
/// passes for an out-parameter (`info.struct_size = sizeof info`).
pub fn sized<T: Copy>() -> T {
    // SAFETY: the API's structs hold integers, raw pointers and optional
    // function pointers only (all zero is valid) and begin with `struct_size: u32`.
    unsafe {
        let mut value = std::mem::zeroed::<T>();
        (&raw mut value).cast::<u32>().write(size_of::<T>() as u32);
        value
    }
}

/// A host-memory publisher config; the strings must outlive its use.
pub fn publisher_config(key: &CString, dir: &CString, format: cuframes_format) -> cuframes_publisher_config {
    let mut config = std::mem::MaybeUninit::<cuframes_publisher_config>::uninit();
    // SAFETY: config_init writes a whole config into the pointed-to memory.
    let mut config = unsafe {
        let status =
            cuframes_publisher_config_init_sized(config.as_mut_ptr(), size_of::<cuframes_publisher_config>());
        assert_eq!(status, CUFRAMES_OK);
        config.assume_init()
    };
    config.key = key.as_ptr();
    config.runtime_dir = dir.as_ptr();
    config.format = format;
    config.width = 33;
    config.height = 17;
    config.memory = CUFRAMES_MEMORY_HOST;
    config
}

/// A subscriber config from `_init` for `key` in `dir`, reading the shared
/// slots without a read-ahead thread: these tests are about the slots
/// (copies and read-ahead, the defaults since 0.3, are asked for by the
/// tests of them).
pub fn subscriber_config(key: &CString, dir: &CString) -> cuframes_subscriber_config {
    cuframes_subscriber_config {
        copy: CUFRAMES_COPY_NEVER,
        read_ahead: 0,
        ..initialised_subscriber_config(key, dir)
    }
}

/// A subscriber config from `_init` for `key` in `dir`, nothing else set.
pub fn initialised_subscriber_config(key: &CString, dir: &CString) -> cuframes_subscriber_config {
    let mut config = std::mem::MaybeUninit::<cuframes_subscriber_config>::uninit();
    // SAFETY: config_init writes a whole config into the pointed-to memory.
    let mut config = unsafe {
        let status = cuframes_subscriber_config_init_sized(
            config.as_mut_ptr(),
            size_of::<cuframes_subscriber_config>(),
        );
        assert_eq!(status, CUFRAMES_OK);
        config.assume_init()
    };
    config.key = key.as_ptr();
    config.runtime_dir = dir.as_ptr();
    config
}

pub fn create_publisher(config: &cuframes_publisher_config) -> *mut cuframes_publisher {
    let mut publisher = std::ptr::null_mut();
    // SAFETY: a valid config whose strings outlive the call; a valid out-pointer.
    let status = unsafe { cuframes_publisher_create(config, &mut publisher) };
    assert_eq!(status, CUFRAMES_OK, "publisher_create: {}", last_error());
    assert!(!publisher.is_null());
    publisher
}

pub fn create_subscriber(config: &cuframes_subscriber_config) -> *mut cuframes_subscriber {
    let mut subscriber = std::ptr::null_mut();
    // SAFETY: as above.
    let status = unsafe { cuframes_subscriber_create(config, &mut subscriber) };
    assert_eq!(status, CUFRAMES_OK, "subscriber_create: {}", last_error());
    subscriber
}

/// Publishes one frame of `fill` bytes from buffers with a pitch wider
/// than the rows; returns its seq.
pub fn publish_filled(publisher: *mut cuframes_publisher, fill: u8, pts: i64) -> u64 {
    let mut info = sized::<cuframes_stream_info>();
    // SAFETY: a live handle and a valid out-pointer.
    let status = unsafe { cuframes_publisher_get_info(publisher, &mut info) };
    assert_eq!(status, CUFRAMES_OK);
    let count = info.plane_count as usize;
    let buffers: Vec<Vec<u8>> = (0..count).map(|_| vec![fill; 128 * 64]).collect();
    let planes: Vec<*const std::ffi::c_void> = buffers.iter().map(|b| b.as_ptr().cast()).collect();
    let pitches = vec![128usize; count];
    let mut seq = 0u64;
    // SAFETY: `count` planes of 128 × 64 bytes each, enough for 33x17 at pitch 128.
    let status = unsafe {
        cuframes_publisher_publish(
            publisher,
            CUFRAMES_MEMORY_HOST,
            planes.as_ptr(),
            pitches.as_ptr(),
            count as u32,
            pts,
            &mut seq,
        )
    };
    assert_eq!(status, CUFRAMES_OK, "publish: {}", last_error());
    seq
}
