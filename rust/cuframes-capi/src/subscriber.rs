//! `cuframes_subscriber`: a connection to a publisher, handing out frames.
//!
//! Here with its config (`cuframes_subscriber_config`: its defaults,
//! `CUFRAMES_DEFAULT_*` of the subscriber's options, and the checks
//! `_create` makes of it), the enumerations only it takes
//! (`cuframes_subscriber_mode`, `cuframes_copy_mode`), and its counters
//! (`cuframes_subscriber_stats`). Zero-initialised config fields mean the
//! same defaults, except `key`, and `copy` and `read_ahead`, whose 0 keeps
//! its meaning (NEVER; no read-ahead thread); `_create` reads the config by
//! its `struct_size` (`sized.rs`).

use std::ffi::{c_char, c_void};
use std::mem::offset_of;
use std::time::Duration;

use cuframes::protocol::MAX_NAME_BYTES;
use cuframes::{CopyMode, ErrorKind, Result, Subscriber, SubscriberConfig, SubscriberMode};

use crate::error::{CUFRAMES_OK, cuframes_status, invalid};
use crate::ffi::{
    check_out, cuda_binding, optional_path, optional_str, required_str, try_mut, try_ref, write_out,
};
use crate::frame::cuframes_frame;
use crate::log::{ObjectLog, cuframes_log_callback, scoped};
use crate::sized::{self, Growable};
use crate::stream::{cuframes_stream_info, stream_info_to_c};

/// Which frames a subscriber receives (`CUFRAMES_MODE_*`).
pub type cuframes_subscriber_mode = u32;
/// Every frame, in order; frames the ring lost are counted as dropped.
pub const CUFRAMES_MODE_SEQUENTIAL: cuframes_subscriber_mode = 0;
/// Always the newest frame; older unread frames are skipped and counted as dropped.
pub const CUFRAMES_MODE_LATEST: cuframes_subscriber_mode = 1;

/// Whether a subscriber hands out the shared slots or private copies
/// (`CUFRAMES_COPY_*`; docs/c-api.md, "Holding frames").
pub type cuframes_copy_mode = u32;
/// Always the shared slot itself. Holding frames holds slots: under
/// STRICT_WAIT the publisher waits once none is free, and drops the
/// subscriber after its ACK timeout; under DROP_OLDEST a held frame may be
/// overwritten (`cuframes_frame_is_intact`).
pub const CUFRAMES_COPY_NEVER: cuframes_copy_mode = 0;
/// The shared slot while holding it leaves half the ring (at least one
/// slot) free of holds, else a private copy (the slot released at once);
/// under DROP_OLDEST always a copy. Never stalls the publisher, never tears
/// a frame.
pub const CUFRAMES_COPY_AUTO: cuframes_copy_mode = 1;
/// Always a private copy; the slot is released at once.
pub const CUFRAMES_COPY_ALWAYS: cuframes_copy_mode = 2;

/// Frames queued by the read-ahead thread by default (`read_ahead` after
/// `cuframes_subscriber_config_init`; 0 still means no thread): the
/// library's default, `cuframes::defaults::READ_AHEAD`.
pub const CUFRAMES_DEFAULT_READ_AHEAD: u32 = 32;
/// Bound on the handshake by default (also when `connect_timeout_ms` is 0), ms.
pub const CUFRAMES_DEFAULT_CONNECT_TIMEOUT_MS: u32 = 30000;
/// How long a subscriber waits for a publisher of its key to appear, ms: for
/// callers that retry `cuframes_subscriber_create` while it returns
/// `NOT_FOUND` (the library looks once), as the FFmpeg components, Python and
/// `cuframes subscribe` do.
pub const CUFRAMES_DEFAULT_WAIT_TIMEOUT_MS: u32 = 30000;
/// How long a subscriber waits for a frame by default, ms: for the
/// `timeout_ms` callers give `cuframes_subscriber_next`, as the FFmpeg
/// components, Python and `cuframes subscribe` do.
pub const CUFRAMES_DEFAULT_FRAME_TIMEOUT_MS: u32 = 5000;
// The header's numbers are literals (cbindgen writes them out); they are the
// library's, or this does not build.
const _: () = assert!(CUFRAMES_DEFAULT_READ_AHEAD as usize == cuframes::defaults::READ_AHEAD);
const _: () =
    assert!(CUFRAMES_DEFAULT_CONNECT_TIMEOUT_MS as u128 == cuframes::defaults::CONNECT_TIMEOUT.as_millis());
const _: () =
    assert!(CUFRAMES_DEFAULT_WAIT_TIMEOUT_MS as u128 == cuframes::defaults::WAIT_FOR_PUBLISHER.as_millis());
const _: () =
    assert!(CUFRAMES_DEFAULT_FRAME_TIMEOUT_MS as u128 == cuframes::defaults::FRAME_TIMEOUT.as_millis());

/// How to subscribe. Initialise with `cuframes_subscriber_config_init`, then
/// set at least `key`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuframes_subscriber_config {
    /// `sizeof(cuframes_subscriber_config)` of the caller's header, set by
    /// `cuframes_subscriber_config_init` (docs/c-api.md, "ABI policy").
    pub struct_size: u32,
    /// The publisher's key. Required.
    pub key: *const c_char,
    /// Shown to the publisher and by `cuframes inspect`, at most 31 bytes;
    /// NULL = `"sub-<pid>"`.
    pub name: *const c_char,
    /// Frame selection; init: CUFRAMES_MODE_SEQUENTIAL.
    pub mode: cuframes_subscriber_mode,
    /// Bound on the whole handshake (CUDA memory: making the CUDA context
    /// and mapping the slots included); init:
    /// CUFRAMES_DEFAULT_CONNECT_TIMEOUT_MS (30000; 0 = the same).
    pub connect_timeout_ms: u32,
    /// CUcontext frames are mapped in (CUDA memory only); NULL = current.
    pub cuda_context: *mut c_void,
    /// CUstream waits are ordered on (CUDA memory only); NULL = default.
    pub cuda_stream: *mut c_void,
    /// CUDA device ordinal told to the publisher; init: -1 (none).
    pub cuda_device: i32,
    /// Where to find the key's socket; as for the publisher.
    pub runtime_dir: *const c_char,
    /// Shared slots or private copies; init: CUFRAMES_COPY_AUTO (before
    /// 0.3: NEVER; 0, a zeroed config's, is NEVER).
    pub copy: cuframes_copy_mode,
    /// Read-ahead, under DROP_OLDEST: a library thread takes frames as they
    /// are published and queues up to this many for
    /// `cuframes_subscriber_next`, so a consumer that is starting or briefly
    /// slow loses nothing (use it with CUFRAMES_COPY_AUTO). init:
    /// CUFRAMES_DEFAULT_READ_AHEAD (32; before 0.3: 0); 0 = no thread.
    /// Ignored under STRICT_WAIT (the publisher waits instead) and in
    /// CUFRAMES_MODE_LATEST (it asks for the newest frame).
    pub read_ahead: u32,
    /// Where this subscriber's messages go (from its calls and its
    /// read-ahead thread), with `log_opaque`; never called once
    /// `cuframes_subscriber_destroy` has returned (messages of its frames go
    /// to the process's sink). init: NULL = the process's sink. New in 0.3:
    /// older callers' smaller struct_size means NULL.
    pub log_callback: cuframes_log_callback,
    /// Passed to `log_callback` as it is.
    pub log_opaque: *mut c_void,
}

// SAFETY: repr(C), `struct_size: u32` first, integer, raw-pointer and
// optional function-pointer fields (any bit pattern: NULL is None, anything
// else a function the caller vouches for), no tail padding
// (tests::growable_layouts).
unsafe impl Growable for cuframes_subscriber_config {
    const NAME: &'static str = "cuframes_subscriber_config";
    // 0.2.0; 0.3 appended log_callback and log_opaque.
    const SIZES: &'static [usize] = &[
        offset_of!(cuframes_subscriber_config, log_callback),
        size_of::<cuframes_subscriber_config>(),
    ];
}

impl cuframes_subscriber_config {
    pub(crate) fn initial() -> cuframes_subscriber_config {
        cuframes_subscriber_config {
            struct_size: size_of::<cuframes_subscriber_config>() as u32,
            key: std::ptr::null(),
            name: std::ptr::null(),
            mode: CUFRAMES_MODE_SEQUENTIAL,
            connect_timeout_ms: CUFRAMES_DEFAULT_CONNECT_TIMEOUT_MS,
            cuda_context: std::ptr::null_mut(),
            cuda_stream: std::ptr::null_mut(),
            cuda_device: -1,
            runtime_dir: std::ptr::null(),
            copy: copy_to_c(cuframes::defaults::COPY),
            read_ahead: CUFRAMES_DEFAULT_READ_AHEAD,
            log_callback: None,
            log_opaque: std::ptr::null_mut(),
        }
    }

    /// This subscriber's own log callback, if it names one.
    pub(crate) fn object_log(&self) -> Option<ObjectLog> {
        ObjectLog::new(self.log_callback, self.log_opaque)
    }

    /// The library's config, after checking every field.
    ///
    /// # Safety
    ///
    /// `key`, `name` and `runtime_dir` are NULL or NUL-terminated strings.
    pub(crate) unsafe fn checked(&self) -> Result<SubscriberConfig> {
        // SAFETY: by this function's contract.
        let key = unsafe { required_str(self.key, "config.key") }?;
        cuframes::validate_key(key)?;
        let mut config = SubscriberConfig::new(key);
        // SAFETY: by this function's contract.
        if let Some(name) = unsafe { optional_str(self.name, "config.name") }? {
            if name.len() > MAX_NAME_BYTES {
                return Err(invalid(format!(
                    "config.name {name:?} is {} bytes; at most {MAX_NAME_BYTES}",
                    name.len()
                )));
            }
            config.name = name.to_owned();
        }
        config.mode = mode_from_c(self.mode, "config.mode")?;
        config.connect_timeout = Duration::from_millis(match self.connect_timeout_ms {
            0 => CUFRAMES_DEFAULT_CONNECT_TIMEOUT_MS,
            ms => ms,
        } as u64);
        config.cuda = cuda_binding(self.cuda_context, self.cuda_stream);
        config.cuda_device = self.cuda_device;
        // SAFETY: by this function's contract.
        config.runtime_dir = unsafe { optional_path(self.runtime_dir) };
        config.copy = copy_from_c(self.copy, "config.copy")?;
        config.read_ahead = self.read_ahead as usize;
        Ok(config)
    }
}

fn mode_from_c(value: cuframes_subscriber_mode, what: &str) -> Result<SubscriberMode> {
    match value {
        CUFRAMES_MODE_SEQUENTIAL => Ok(SubscriberMode::Sequential),
        CUFRAMES_MODE_LATEST => Ok(SubscriberMode::Latest),
        _ => Err(invalid(format!(
            "{what} {value} is not a cuframes_subscriber_mode (0 SEQUENTIAL, 1 LATEST)"
        ))),
    }
}

/// The C name of a copy mode (the library's default, in `_config_init`).
const fn copy_to_c(copy: CopyMode) -> cuframes_copy_mode {
    match copy {
        CopyMode::Never => CUFRAMES_COPY_NEVER,
        CopyMode::Auto => CUFRAMES_COPY_AUTO,
        CopyMode::Always => CUFRAMES_COPY_ALWAYS,
    }
}

fn copy_from_c(value: cuframes_copy_mode, what: &str) -> Result<CopyMode> {
    match value {
        CUFRAMES_COPY_NEVER => Ok(CopyMode::Never),
        CUFRAMES_COPY_AUTO => Ok(CopyMode::Auto),
        CUFRAMES_COPY_ALWAYS => Ok(CopyMode::Always),
        _ => Err(invalid(format!(
            "{what} {value} is not a cuframes_copy_mode (0 NEVER, 1 AUTO, 2 ALWAYS)"
        ))),
    }
}

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

// SAFETY: repr(C), `struct_size: u32` first, integer fields only, no tail
// padding (tests::growable_layouts).
unsafe impl Growable for cuframes_subscriber_stats {
    const NAME: &'static str = "cuframes_subscriber_stats";
    // One published layout so far: struct_size is new in 0.2.0.
    const SIZES: &'static [usize] = &[size_of::<cuframes_subscriber_stats>()];
}

/// Fills `config`, a struct of `size` bytes, with the defaults:
/// `struct_size` = `size`, key and name NULL, mode SEQUENTIAL,
/// connect_timeout_ms CUFRAMES_DEFAULT_CONNECT_TIMEOUT_MS, CUDA context and
/// stream NULL, cuda_device -1, runtime_dir NULL, copy AUTO, read_ahead
/// CUFRAMES_DEFAULT_READ_AHEAD, log_callback and log_opaque
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

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use super::*;
    use crate::sized::assert_growable;

    #[test]
    fn enumerations_match_the_contract() {
        assert!(mode_from_c(2, "m").is_err());
        assert_eq!(copy_from_c(CUFRAMES_COPY_AUTO, "c").unwrap(), CopyMode::Auto);
        assert_eq!(copy_from_c(CUFRAMES_COPY_ALWAYS, "c").unwrap(), CopyMode::Always);
        assert!(copy_from_c(3, "c").is_err());
        assert_eq!(mode_from_c(1, "m").unwrap(), SubscriberMode::Latest);
    }

    /// An initialised config, and one whose copy, read-ahead and connect
    /// timeout are 0, are what the library makes of them.
    #[test]
    fn initialised_configs_take_the_librarys_defaults() {
        let key = c"k";
        let library = SubscriberConfig::new("k");
        let config = cuframes_subscriber_config {
            key: key.as_ptr(),
            ..cuframes_subscriber_config::initial()
        };
        // SAFETY: key is a NUL-terminated string, name and runtime_dir NULL.
        let checked = unsafe { config.checked() }.unwrap();
        assert_eq!(
            (checked.copy, checked.read_ahead, checked.connect_timeout),
            (library.copy, library.read_ahead, library.connect_timeout)
        );
        assert_eq!((config.copy, config.read_ahead), (CUFRAMES_COPY_AUTO, 32));
        let zeroed = cuframes_subscriber_config {
            copy: 0,
            read_ahead: 0,
            connect_timeout_ms: 0,
            ..config
        };
        // SAFETY: as above.
        let checked = unsafe { zeroed.checked() }.unwrap();
        assert_eq!(
            (checked.copy, checked.read_ahead, checked.connect_timeout),
            (CopyMode::Never, 0, library.connect_timeout)
        );
    }

    #[test]
    fn growable_layouts() {
        assert_growable::<cuframes_subscriber_config>(
            offset_of!(cuframes_subscriber_config, struct_size),
            offset_of!(cuframes_subscriber_config, log_opaque) + size_of::<*mut c_void>(),
        );
        assert_growable::<cuframes_subscriber_stats>(
            offset_of!(cuframes_subscriber_stats, struct_size),
            offset_of!(cuframes_subscriber_stats, queued) + size_of::<u64>(),
        );
        // The sizes on LP64 (x86_64, aarch64): the first layouts never change
        // (tests/c/abi/cuframes-0.2.0.h has them too); 0.3 appended the
        // config's log_callback and log_opaque.
        #[cfg(target_pointer_width = "64")]
        {
            assert_eq!(<cuframes_subscriber_config as Growable>::SIZES[0], 72);
            assert_eq!(<cuframes_subscriber_stats as Growable>::SIZES[0], 64);
            assert_eq!(size_of::<cuframes_subscriber_config>(), 88);
        }
    }
}
