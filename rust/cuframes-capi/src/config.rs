//! Publisher and subscriber configs: C structs the library initialises
//! (`cuframes_*_config_init`, which sets `struct_size`) and the caller then
//! edits. Zero-initialised fields mean the same defaults, except `key` (and
//! the publisher's format and size, which have none). `_create` reads them
//! by `struct_size` (`sized.rs`).

use std::ffi::{c_char, c_void};
use std::time::Duration;

use cuframes::{CudaBinding, PublisherConfig, Result, SubscriberConfig};

use crate::error::invalid;
use crate::ffi::{optional_path, optional_str, required_str};
use crate::log::{ObjectLog, cuframes_log_callback};
use crate::types::{
    CUFRAMES_COPY_NEVER, CUFRAMES_CUDA_SHARE_AUTO, CUFRAMES_MEMORY_AUTO, CUFRAMES_MODE_SEQUENTIAL,
    CUFRAMES_POLICY_DROP_OLDEST, CUFRAMES_V1_PEERS_SAME_USER, copy_from_c, cuda_share_from_c,
    cuframes_copy_mode, cuframes_cuda_share, cuframes_format, cuframes_memory, cuframes_policy,
    cuframes_subscriber_mode, cuframes_v1_peers, format_from_c, memory_request_from_c, mode_from_c,
    policy_from_c, v1_peers_from_c,
};

/// The most slots a ring has (the shared header has room for 16).
pub const CUFRAMES_MAX_RING_SIZE: u32 = 16;
/// Slots in the ring by default (also when `ring_size` is 0): the library's
/// default, `cuframes::defaults::RING_SIZE`.
pub const CUFRAMES_DEFAULT_RING_SIZE: u32 = 16;
/// Strict-wait's ACK timeout by default (also when `ack_timeout_ms` is 0), ms.
pub const CUFRAMES_DEFAULT_ACK_TIMEOUT_MS: u32 = 1000;
/// Strict-wait's start-up time by default (also when `startup_timeout_ms` is 0), ms.
pub const CUFRAMES_DEFAULT_STARTUP_TIMEOUT_MS: u32 = 10000;
// The header's numbers are literals (cbindgen writes them out); they are the
// library's, or this does not build.
const _: () = assert!(CUFRAMES_MAX_RING_SIZE as usize == cuframes::protocol::MAX_RING_SIZE);
const _: () = assert!(CUFRAMES_DEFAULT_RING_SIZE as usize == cuframes::defaults::RING_SIZE);
const _: () = assert!(CUFRAMES_DEFAULT_ACK_TIMEOUT_MS as u128 == cuframes::defaults::ACK_TIMEOUT.as_millis());
const _: () =
    assert!(CUFRAMES_DEFAULT_STARTUP_TIMEOUT_MS as u128 == cuframes::defaults::STARTUP_TIMEOUT.as_millis());
/// Handshake bound used when `connect_timeout_ms` is 0.
const DEFAULT_CONNECT_TIMEOUT_MS: u32 = 30000;

/// How to create a publisher. Initialise with `cuframes_publisher_config_init`,
/// then set at least `key`, `format`, `width` and `height`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuframes_publisher_config {
    /// `sizeof(cuframes_publisher_config)` of the caller's header, set by
    /// `cuframes_publisher_config_init` (docs/c-api.md, "ABI policy").
    pub struct_size: u32,
    /// The key, `^[a-zA-Z0-9_-]{1,63}$`. Required.
    pub key: *const c_char,
    /// Pixel format (`CUFRAMES_FORMAT_*`). Required.
    pub format: cuframes_format,
    /// Width in pixels (1..=16384). Required.
    pub width: u32,
    /// Height in pixels (1..=16384). Required.
    pub height: u32,
    /// Slots in the ring, 1..=CUFRAMES_MAX_RING_SIZE (16); init: CUFRAMES_DEFAULT_RING_SIZE (16; 0 = the same).
    pub ring_size: u32,
    /// Full-ring policy; init: CUFRAMES_POLICY_DROP_OLDEST.
    pub policy: cuframes_policy,
    /// STRICT_WAIT: how long a subscriber may hold up the ring (no slot free
    /// for the next frame) before it is dropped; init: 1000 (0 = 1000).
    pub ack_timeout_ms: u32,
    /// Memory to put frames in; init: CUFRAMES_MEMORY_AUTO.
    pub memory: cuframes_memory,
    /// Frame rate numerator, advertised to subscribers; 0/0 = unknown.
    pub fps_num: u32,
    /// Frame rate denominator; 0/0 = unknown.
    pub fps_den: u32,
    /// CUcontext; NULL = the current one (CUDA memory only).
    pub cuda_context: *mut c_void,
    /// CUstream; NULL = the default stream (CUDA memory only).
    pub cuda_stream: *mut c_void,
    /// Directory for the key's socket and lock; NULL = $CUFRAMES_RUNTIME_DIR,
    /// /run/cuframes, $XDG_RUNTIME_DIR/cuframes, /tmp/cuframes-<uid>.
    pub runtime_dir: *const c_char,
    /// EXTERNAL ownership: NULL, or `ring_size` CUdeviceptr values, the
    /// caller's own buffers to use as the slots (each the base of its own
    /// cuMemAlloc allocation of at least one frame, laid out with the
    /// pitches `cuframes_publisher_get_info` reports). Publish into them
    /// with `cuframes_publisher_acquire_slot` / `_commit_slot`. CUDA only.
    pub external_slots: *const u64,
    /// A group (name or number) whose members may subscribe besides this
    /// user and root: the socket becomes 0660 and the shared header 0640
    /// with that group (0660 with `CUFRAMES_V1_PEERS_ALLOW`). NULL (init):
    /// 0600, this user and root only.
    pub group: *const c_char,
    /// CUDA memory without `cuda_context`: the device whose primary context
    /// holds the slots. init: -1 = the current context, else device 0;
    /// n >= 0: device n's primary context (even when another context is
    /// current); below -1: INVALID_ARGUMENT. Ignored with `cuda_context`
    /// set, and for host memory. A zero-initialised config (no
    /// `cuframes_publisher_config_init`) means device 0: set -1 there to
    /// keep the current context.
    pub cuda_device: i32,
    /// STRICT_WAIT: how long after joining a subscriber may hold up the
    /// ring while its consumer is still starting (its CUDA context, filters,
    /// encoder); the ACK timeout applies once this has passed. init: 10000
    /// (0 = 10000).
    pub startup_timeout_ms: u32,
    /// CUDA memory: how the slots are shared with subscribers; init:
    /// CUFRAMES_CUDA_SHARE_AUTO (FD where supported, else IPC). FD where
    /// unsupported is UNSUPPORTED at create; ignored for host memory.
    pub cuda_share: cuframes_cuda_share,
    /// Which protocol-v1 subscribers are admitted (docs/security.md); init
    /// and 0: CUFRAMES_V1_PEERS_SAME_USER. (This was a reserved zero before
    /// 0.3, so older callers get the default.)
    pub v1_peers: cuframes_v1_peers,
    /// Where this publisher's messages go (from its calls and its control
    /// thread), with `log_opaque`; never called once
    /// `cuframes_publisher_destroy` has returned. init: NULL = the process's
    /// sink (`cuframes_set_log_callback`). New in 0.3: older callers'
    /// smaller struct_size means NULL.
    pub log_callback: cuframes_log_callback,
    /// Passed to `log_callback` as it is.
    pub log_opaque: *mut c_void,
}

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
    /// NULL = "sub-<pid>".
    pub name: *const c_char,
    /// Frame selection; init: CUFRAMES_MODE_SEQUENTIAL.
    pub mode: cuframes_subscriber_mode,
    /// Bound on the whole handshake (CUDA memory: making the CUDA context
    /// and mapping the slots included); init: 30000 (0 = 30000).
    pub connect_timeout_ms: u32,
    /// CUcontext frames are mapped in (CUDA memory only); NULL = current.
    pub cuda_context: *mut c_void,
    /// CUstream waits are ordered on (CUDA memory only); NULL = default.
    pub cuda_stream: *mut c_void,
    /// CUDA device ordinal told to the publisher; init: -1 (none).
    pub cuda_device: i32,
    /// Where to find the key's socket; as for the publisher.
    pub runtime_dir: *const c_char,
    /// Shared slots or private copies; init: CUFRAMES_COPY_NEVER.
    pub copy: cuframes_copy_mode,
    /// Read-ahead, under DROP_OLDEST: a library thread takes frames as they
    /// are published and queues up to this many for
    /// `cuframes_subscriber_next`, so a consumer that is starting or briefly
    /// slow loses nothing (use it with CUFRAMES_COPY_AUTO). init: 0 = no
    /// thread. Ignored under STRICT_WAIT (the publisher waits instead).
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

fn cuda_binding(context: *mut c_void, stream: *mut c_void) -> Option<CudaBinding> {
    (!context.is_null() || !stream.is_null()).then_some(CudaBinding {
        context: context as usize,
        stream: stream as usize,
    })
}

impl cuframes_publisher_config {
    pub(crate) fn initial() -> cuframes_publisher_config {
        cuframes_publisher_config {
            struct_size: size_of::<cuframes_publisher_config>() as u32,
            key: std::ptr::null(),
            format: 0,
            width: 0,
            height: 0,
            ring_size: CUFRAMES_DEFAULT_RING_SIZE,
            policy: CUFRAMES_POLICY_DROP_OLDEST,
            ack_timeout_ms: CUFRAMES_DEFAULT_ACK_TIMEOUT_MS,
            memory: CUFRAMES_MEMORY_AUTO,
            fps_num: 0,
            fps_den: 0,
            cuda_context: std::ptr::null_mut(),
            cuda_stream: std::ptr::null_mut(),
            runtime_dir: std::ptr::null(),
            external_slots: std::ptr::null(),
            group: std::ptr::null(),
            cuda_device: -1,
            startup_timeout_ms: CUFRAMES_DEFAULT_STARTUP_TIMEOUT_MS,
            cuda_share: CUFRAMES_CUDA_SHARE_AUTO,
            v1_peers: CUFRAMES_V1_PEERS_SAME_USER,
            log_callback: None,
            log_opaque: std::ptr::null_mut(),
        }
    }

    /// This publisher's own log callback, if it names one.
    pub(crate) fn object_log(&self) -> Option<ObjectLog> {
        ObjectLog::new(self.log_callback, self.log_opaque)
    }

    /// The library's config, after checking every field.
    ///
    /// # Safety
    ///
    /// `key`, `runtime_dir` and `group` are NULL or NUL-terminated strings.
    pub(crate) unsafe fn checked(&self) -> Result<PublisherConfig> {
        // SAFETY: by this function's contract.
        let key = unsafe { required_str(self.key, "config.key") }?;
        cuframes::validate_key(key)?;
        let format = format_from_c(self.format, "config.format")?;
        let mut config = PublisherConfig::new(key, format, self.width, self.height);
        config.v1_peers = v1_peers_from_c(self.v1_peers, "config.v1_peers")?;
        config.ring_size = match self.ring_size {
            0 => CUFRAMES_DEFAULT_RING_SIZE,
            n => n,
        } as usize;
        config.policy = policy_from_c(self.policy, "config.policy")?;
        config.ack_timeout = Duration::from_millis(match self.ack_timeout_ms {
            0 => CUFRAMES_DEFAULT_ACK_TIMEOUT_MS,
            ms => ms,
        } as u64);
        config.startup_timeout = Duration::from_millis(match self.startup_timeout_ms {
            0 => CUFRAMES_DEFAULT_STARTUP_TIMEOUT_MS,
            ms => ms,
        } as u64);
        config.memory = memory_request_from_c(self.memory, "config.memory")?;
        config.cuda_share = cuda_share_from_c(self.cuda_share, "config.cuda_share")?;
        config.fps = match (self.fps_num, self.fps_den) {
            (0, 0) => None,
            (num, den) if num == 0 || den == 0 => {
                return Err(invalid(format!(
                    "config.fps_num/fps_den {num}/{den}: set both (or both to 0 for unknown)"
                )));
            }
            rate => Some(rate),
        };
        config.cuda = cuda_binding(self.cuda_context, self.cuda_stream);
        if self.cuda_device < -1 {
            return Err(invalid(format!(
                "config.cuda_device {} is no device ordinal (-1 = the current context, else device 0)",
                self.cuda_device
            )));
        }
        config.cuda_device = self.cuda_device;
        // SAFETY: by this function's contract.
        config.runtime_dir = unsafe { optional_path(self.runtime_dir) };
        if !self.external_slots.is_null() {
            // SAFETY: non-NULL external_slots holds ring_size values (contract);
            // ring_size is checked against 1..=MAX_RING_SIZE by
            // Publisher::create, and a larger value would be refused there
            // after reading at most that many.
            let slots = unsafe {
                std::slice::from_raw_parts(
                    self.external_slots,
                    config.ring_size.min(CUFRAMES_MAX_RING_SIZE as usize),
                )
            };
            config.external_slots = Some(slots.to_vec());
        }
        // SAFETY: by this function's contract.
        config.group = unsafe { optional_str(self.group, "config.group") }?.map(str::to_owned);
        Ok(config)
    }
}

impl cuframes_subscriber_config {
    pub(crate) fn initial() -> cuframes_subscriber_config {
        cuframes_subscriber_config {
            struct_size: size_of::<cuframes_subscriber_config>() as u32,
            key: std::ptr::null(),
            name: std::ptr::null(),
            mode: CUFRAMES_MODE_SEQUENTIAL,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            cuda_context: std::ptr::null_mut(),
            cuda_stream: std::ptr::null_mut(),
            cuda_device: -1,
            runtime_dir: std::ptr::null(),
            copy: CUFRAMES_COPY_NEVER,
            read_ahead: 0,
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
            if name.len() > 31 {
                return Err(invalid(format!(
                    "config.name {name:?} is {} bytes; at most 31",
                    name.len()
                )));
            }
            config.name = name.to_owned();
        }
        config.mode = mode_from_c(self.mode, "config.mode")?;
        config.connect_timeout = Duration::from_millis(match self.connect_timeout_ms {
            0 => DEFAULT_CONNECT_TIMEOUT_MS,
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
