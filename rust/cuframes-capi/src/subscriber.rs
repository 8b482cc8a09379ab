//! `cuframes_subscriber`: a connection to a publisher, handing out frames.

use std::time::Duration;

use cuframes::{ErrorKind, Subscriber};

use crate::config::cuframes_subscriber_config;
use crate::error::{CUFRAMES_OK, cuframes_status};
use crate::ffi::{check_out, try_mut, try_ref, write_out};
use crate::frame::cuframes_frame;
use crate::log::{ObjectLog, scoped};
use crate::sized;
use crate::types::{cuframes_stream_info, stream_info_to_c};

/// A subscriber (opaque). Made by `cuframes_subscriber_create`, freed by
/// `cuframes_subscriber_destroy`. Use it from one thread at a time; the
/// frames it hands out may go to other threads.
#[derive(Debug)]
pub struct cuframes_subscriber {
    inner: Subscriber,
    /// Its own log callback (config `log_callback`): receives what its calls
    /// and its read-ahead thread report, until it is destroyed.
    log: Option<ObjectLog>,
}

/// A subscriber's counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct cuframes_subscriber_stats {
    /// `sizeof(cuframes_subscriber_stats)`, set by the caller; the library
    /// sets it to the bytes it wrote (docs/c-api.md, "ABI policy").
    pub struct_size: u32,
    /// Frames handed out by `cuframes_subscriber_next`.
    pub received: u64,
    /// Frames published after joining that were never handed out (lapped or skipped).
    pub dropped: u64,
    /// Leases the publisher overwrote before they were released.
    pub overwritten: u64,
    /// 1 when the publisher sent SHUTDOWN (a clean end), else 0.
    pub publisher_shut_down: u32,
    /// Frames handed out as private copies (counted in `received`).
    pub copied: u64,
    /// Copies discarded because the publisher rewrote the slot while it was
    /// copied (DROP_OLDEST; counted in `dropped`).
    pub torn: u64,
    /// Frames read ahead and not yet handed out (0 without read-ahead).
    pub queued: u64,
}

/// Fills `config`, a struct of `size` bytes, with the defaults:
/// `struct_size` = `size`, key and name NULL, mode SEQUENTIAL,
/// connect_timeout_ms 30000, CUDA context and stream NULL, cuda_device -1,
/// runtime_dir NULL, copy NEVER, read_ahead 0, log_callback and log_opaque
/// NULL; bytes past the fields this
/// library knows (a newer header's) zero. Call it through the header's
/// `cuframes_subscriber_config_init(config)`, which passes `sizeof *config`.
/// `INVALID_ARGUMENT` (nothing written) for NULL or a `size` that is no
/// layout of the struct (docs/c-api.md, "ABI policy").
///
/// # Safety
///
/// `config` is NULL or points to `size` writable bytes (its old contents
/// are ignored).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_subscriber_config_init_sized(
    config: *mut cuframes_subscriber_config,
    size: usize,
) -> cuframes_status {
    ffi_boundary!("cuframes_subscriber_config_init_sized", {
        // SAFETY: NULL or `size` writable bytes, by the caller's contract.
        try_c!(unsafe { sized::init(config, size, "config", cuframes_subscriber_config::initial()) });
        CUFRAMES_OK
    })
}

/// Connects to the publisher of `config->key` and completes the handshake
/// (bounded by `connect_timeout_ms`). On success `*subscriber_out` is the
/// new handle; on failure it is left untouched (`NOT_FOUND`: no publisher
/// for the key; `TOO_MANY`: the publisher serves 31 subscribers already;
/// `PROTOCOL`: a version mismatch). After `NOT_FOUND` the library makes the
/// device's primary CUDA context in the background, for the next try (no
/// context in `config`, a CUDA driver present; `CUFRAMES_CUDA_WARMUP=0` in
/// the environment turns it off), and lets go of it once connected; while
/// it is being made, `cuframes_subscriber_warming_up` is true.
///
/// # Safety
///
/// `config` is NULL or points to a valid `cuframes_subscriber_config` of
/// `struct_size` bytes whose strings are NULL or NUL-terminated;
/// `subscriber_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_subscriber_create(
    config: *const cuframes_subscriber_config,
    subscriber_out: *mut *mut cuframes_subscriber,
) -> cuframes_status {
    ffi_boundary!("cuframes_subscriber_create", {
        // SAFETY: NULL or a valid config of struct_size bytes (contract).
        let config =
            try_c!(unsafe { sized::read_in(config, "config", cuframes_subscriber_config::initial()) });
        try_c!(check_out(subscriber_out, "subscriber_out"));
        // SAFETY: the config's strings are NULL or NUL-terminated (contract).
        let mut rust = try_c!(unsafe { config.checked() });
        let log = config.object_log();
        rust.logger = log.as_ref().map(ObjectLog::logger);
        let inner = try_c!(Subscriber::connect(rust));
        let handle = Box::into_raw(Box::new(cuframes_subscriber { inner, log }));
        // SAFETY: checked above; writable by the caller's contract.
        unsafe { write_out(subscriber_out, handle) };
        CUFRAMES_OK
    })
}

/// Starts making, in the background, the CUDA context a subscriber with
/// `config` would map CUDA frames in (the device's primary context), as
/// `cuframes_subscriber_create` does when it finds no publisher: for a caller
/// that waits for a publisher without subscribing yet (one that looks the key
/// up first). Nothing happens when `config->cuda_context` is set, without a
/// CUDA driver, or with `CUFRAMES_CUDA_WARMUP=0`; the next successful
/// `cuframes_subscriber_create` lets go of it. `INVALID_ARGUMENT` for a NULL
/// or malformed config.
///
/// # Safety
///
/// `config` is NULL or points to a valid `cuframes_subscriber_config` of
/// `struct_size` bytes whose strings are NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_subscriber_warm_up(
    config: *const cuframes_subscriber_config,
) -> cuframes_status {
    ffi_boundary!("cuframes_subscriber_warm_up", {
        // SAFETY: NULL or a valid config of struct_size bytes (contract).
        let config =
            try_c!(unsafe { sized::read_in(config, "config", cuframes_subscriber_config::initial()) });
        // SAFETY: the config's strings are NULL or NUL-terminated (contract).
        let rust = try_c!(unsafe { config.checked() });
        Subscriber::warm_up(&rust);
        CUFRAMES_OK
    })
}

/// Whether this process is still making the CUDA context that a
/// `cuframes_subscriber_create` which found no publisher (or
/// `cuframes_subscriber_warm_up`) began. A caller
/// that retries until a deadline should not count this time against its
/// wait for a publisher: on a GPU where many processes start at once the
/// publisher makes its own context in the same queue of the driver and
/// cannot appear sooner (48 processes started at once on an H200 had theirs after 9.5 s).
#[unsafe(no_mangle)]
pub extern "C" fn cuframes_subscriber_warming_up() -> bool {
    ffi_boundary!("cuframes_subscriber_warming_up", fallback = false, {
        Subscriber::warming_up()
    })
}

/// The stream's geometry and settings, as the publisher announced them.
///
/// # Safety
///
/// `subscriber` is NULL or a live handle; `info_out` is NULL or a writable
/// struct of `struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_subscriber_get_info(
    subscriber: *const cuframes_subscriber,
    info_out: *mut cuframes_stream_info,
) -> cuframes_status {
    ffi_boundary!("cuframes_subscriber_get_info", {
        // SAFETY: NULL or a live handle, by the caller's contract.
        let subscriber = try_c!(unsafe { try_ref(subscriber, "subscriber") });
        // SAFETY: NULL or a writable struct of struct_size bytes (contract).
        let size = try_c!(unsafe { sized::out_size(info_out, "info_out") });
        let info = try_c!(stream_info_to_c(subscriber.inner.info()).ok_or_else(|| {
            cuframes::Error::new(
                ErrorKind::Corrupt,
                format!(
                    "policy {} of '{}' is unknown",
                    subscriber.inner.info().policy,
                    subscriber.inner.key()
                ),
            )
        }));
        // SAFETY: checked above; writable by the caller's contract.
        unsafe { sized::write_out(info_out, size, info) };
        CUFRAMES_OK
    })
}

/// The next frame, waiting up to `timeout_ms` (< 0: forever; 0: only look).
/// On success `*frame_out` is a leased frame: read it, then give it back
/// with `cuframes_frame_release` (from any thread). `TIMEOUT`: nothing came.
/// `DISCONNECTED`: the publisher shut down (stats.publisher_shut_down = 1),
/// died, or dropped this subscriber; every later call says the same.
///
/// # Safety
///
/// `subscriber` is NULL or a live handle used by this thread alone;
/// `frame_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_subscriber_next(
    subscriber: *mut cuframes_subscriber,
    timeout_ms: i32,
    frame_out: *mut *mut cuframes_frame,
) -> cuframes_status {
    ffi_boundary!("cuframes_subscriber_next", {
        // SAFETY: NULL or a live handle used by this thread alone (contract).
        let subscriber = try_c!(unsafe { try_mut(subscriber, "subscriber") });
        try_c!(check_out(frame_out, "frame_out"));
        let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        let lease = try_c!(scoped(subscriber.log.as_ref(), || subscriber.inner.next(timeout)));
        let frame = cuframes_frame::into_raw(lease);
        // SAFETY: checked above; writable by the caller's contract.
        unsafe { write_out(frame_out, frame) };
        CUFRAMES_OK
    })
}

/// The subscriber's counters.
///
/// # Safety
///
/// `subscriber` is NULL or a live handle; `stats_out` is NULL or a writable
/// struct of `struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_subscriber_get_stats(
    subscriber: *const cuframes_subscriber,
    stats_out: *mut cuframes_subscriber_stats,
) -> cuframes_status {
    ffi_boundary!("cuframes_subscriber_get_stats", {
        // SAFETY: NULL or a live handle, by the caller's contract.
        let subscriber = try_c!(unsafe { try_ref(subscriber, "subscriber") });
        // SAFETY: NULL or a writable struct of struct_size bytes (contract).
        let size = try_c!(unsafe { sized::out_size(stats_out, "stats_out") });
        let stats = subscriber.inner.stats();
        let out = cuframes_subscriber_stats {
            struct_size: size_of::<cuframes_subscriber_stats>() as u32,
            received: stats.received,
            dropped: stats.dropped,
            overwritten: stats.overwritten,
            publisher_shut_down: subscriber.inner.publisher_shut_down().into(),
            copied: stats.copied,
            torn: stats.torn,
            queued: subscriber.inner.queued() as u64,
        };
        // SAFETY: checked above; writable by the caller's contract.
        unsafe { sized::write_out(stats_out, size, out) };
        CUFRAMES_OK
    })
}

/// Leaves the publisher (UNSUBSCRIBE) and frees the handle. NULL is ignored.
/// Frames it handed out stay valid until each is released. Once this
/// returns, the subscriber's `log_callback` is not called again (messages
/// about its frames go to the process's sink).
///
/// # Safety
///
/// `subscriber` is NULL or a live handle, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_subscriber_destroy(subscriber: *mut cuframes_subscriber) {
    ffi_boundary!("cuframes_subscriber_destroy", fallback = (), {
        if !subscriber.is_null() {
            // SAFETY: made by Box::into_raw in cuframes_subscriber_create and
            // given back exactly once (contract).
            let cuframes_subscriber { inner, log } = *unsafe { Box::from_raw(subscriber) };
            // Its end (the read-ahead thread joined) still reports to its
            // callback; dropping `log` then retires the callback.
            scoped(log.as_ref(), || drop(inner));
            drop(log);
        }
    })
}
