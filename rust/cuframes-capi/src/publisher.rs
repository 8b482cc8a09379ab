//! `cuframes_publisher`: owns a key and a ring of frame slots.
//!
//! Here with its config (`cuframes_publisher_config`: its defaults,
//! `CUFRAMES_MAX_RING_SIZE` and `CUFRAMES_DEFAULT_*`, and the checks
//! `_create` makes of it), the enumeration only it takes
//! (`cuframes_v1_peers`), and the slot of a zero-copy publish
//! (`cuframes_slot`). Zero-initialised config fields mean the same defaults,
//! except `key`, format and size, which have none; `_create` reads the config
//! by its `struct_size` (`sized.rs`).

use std::ffi::{c_char, c_void};
use std::mem::offset_of;
use std::time::Duration;

use cuframes::{
    CudaShareRequest, DevicePlane, HostPlane, MemoryRequest, PlaneLayout, PlanePtr, Policy, Publisher,
    PublisherConfig, Result, V1Peers,
};

use crate::error::{CUFRAMES_OK, cuframes_status, invalid};
use crate::ffi::{
    check_out, cuda_binding, optional_path, optional_str, required_str, try_mut, try_ref, try_slice,
    write_out,
};
use crate::frame::{cuframes_frame_props, cuframes_side_data_kind};
use crate::log::{ObjectLog, cuframes_log_callback, scoped};
use crate::sized::{self, Growable};
use crate::stream::{
    CUFRAMES_CUDA_SHARE_AUTO, CUFRAMES_CUDA_SHARE_FD, CUFRAMES_CUDA_SHARE_IPC, CUFRAMES_MAX_PLANES,
    CUFRAMES_MEMORY_AUTO, CUFRAMES_MEMORY_CUDA, CUFRAMES_MEMORY_HOST, CUFRAMES_POLICY_DROP_OLDEST,
    CUFRAMES_POLICY_STRICT_WAIT, cuframes_cuda_share, cuframes_format, cuframes_memory, cuframes_policy,
    cuframes_stream_info, format_from_c, memory_to_c, stream_info_to_c,
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

/// Which protocol-v1 subscribers a publisher admits (`CUFRAMES_V1_PEERS_*`;
/// docs/security.md): those that ACK in the shared header every one of them
/// can write (other implementations, cuframes before 0.3). They can never
/// change what cuframes subscribers read; among themselves they can.
pub type cuframes_v1_peers = u32;
/// Only this user's and root's (the default; 0 in a zeroed config).
pub const CUFRAMES_V1_PEERS_SAME_USER: cuframes_v1_peers = 0;
/// None: every subscriber ACKs in an area of its own.
pub const CUFRAMES_V1_PEERS_REFUSE: cuframes_v1_peers = 1;
/// Every admitted peer; with a group, the shared header becomes 0660.
pub const CUFRAMES_V1_PEERS_ALLOW: cuframes_v1_peers = 2;

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
    /// /run/cuframes, $XDG_RUNTIME_DIR/cuframes, `/tmp/cuframes-<uid>`.
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

// SAFETY: repr(C), `struct_size: u32` first, integer, raw-pointer and
// optional function-pointer fields (any bit pattern: NULL is None, anything
// else a function the caller vouches for), no tail padding
// (tests::growable_layouts).
unsafe impl Growable for cuframes_publisher_config {
    const NAME: &'static str = "cuframes_publisher_config";
    // 0.2.0; 0.3 appended log_callback and log_opaque.
    const SIZES: &'static [usize] = &[
        offset_of!(cuframes_publisher_config, log_callback),
        size_of::<cuframes_publisher_config>(),
    ];
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

fn memory_request_from_c(value: cuframes_memory, what: &str) -> Result<MemoryRequest> {
    match value {
        CUFRAMES_MEMORY_AUTO => Ok(MemoryRequest::Auto),
        CUFRAMES_MEMORY_HOST => Ok(MemoryRequest::Host),
        CUFRAMES_MEMORY_CUDA => Ok(MemoryRequest::Cuda),
        _ => Err(invalid(format!(
            "{what} {value} is not a cuframes_memory (0 AUTO, 1 HOST, 2 CUDA)"
        ))),
    }
}

fn cuda_share_from_c(value: cuframes_cuda_share, what: &str) -> Result<CudaShareRequest> {
    match value {
        CUFRAMES_CUDA_SHARE_AUTO => Ok(CudaShareRequest::Auto),
        CUFRAMES_CUDA_SHARE_FD => Ok(CudaShareRequest::Fd),
        CUFRAMES_CUDA_SHARE_IPC => Ok(CudaShareRequest::Ipc),
        _ => Err(invalid(format!(
            "{what} {value} is not a cuframes_cuda_share (0 AUTO, 1 FD, 2 IPC)"
        ))),
    }
}

fn v1_peers_from_c(value: cuframes_v1_peers, what: &str) -> Result<V1Peers> {
    match value {
        CUFRAMES_V1_PEERS_SAME_USER => Ok(V1Peers::SameUser),
        CUFRAMES_V1_PEERS_REFUSE => Ok(V1Peers::Refuse),
        CUFRAMES_V1_PEERS_ALLOW => Ok(V1Peers::Allow),
        _ => Err(invalid(format!(
            "{what} {value} is not a cuframes_v1_peers (0 SAME_USER, 1 REFUSE, 2 ALLOW)"
        ))),
    }
}

fn policy_from_c(value: cuframes_policy, what: &str) -> Result<Policy> {
    match value {
        CUFRAMES_POLICY_DROP_OLDEST => Ok(Policy::DropOldest),
        CUFRAMES_POLICY_STRICT_WAIT => Ok(Policy::StrictWait),
        _ => Err(invalid(format!(
            "{what} {value} is not a cuframes_policy (0 DROP_OLDEST, 1 STRICT_WAIT)"
        ))),
    }
}

/// A slot handed out by `cuframes_publisher_acquire_slot`: where to write
/// the next frame.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct cuframes_slot {
    /// `sizeof(cuframes_slot)`, set by the caller; the library sets it to
    /// the bytes it wrote (docs/c-api.md, "ABI policy").
    pub struct_size: u32,
    /// Ring slot index.
    pub index: u32,
    /// CUFRAMES_MEMORY_HOST (host pointers) or CUFRAMES_MEMORY_CUDA
    /// (CUdeviceptr values).
    pub memory: cuframes_memory,
    /// Planes of the format.
    pub plane_count: u32,
    /// Start of each plane.
    pub planes: [*mut c_void; CUFRAMES_MAX_PLANES],
    /// Bytes from one row to the next, per plane.
    pub pitches: [usize; CUFRAMES_MAX_PLANES],
}

// SAFETY: repr(C), `struct_size: u32` first, integer and raw-pointer fields
// only, no tail padding (tests::growable_layouts).
unsafe impl Growable for cuframes_slot {
    const NAME: &'static str = "cuframes_slot";
    // One published layout so far: struct_size is new in 0.2.0.
    const SIZES: &'static [usize] = &[size_of::<cuframes_slot>()];
}

/// A publisher (opaque). Made by `cuframes_publisher_create`, freed by
/// `cuframes_publisher_destroy`. Use it from one thread at a time.
#[derive(Debug)]
pub struct cuframes_publisher {
    inner: Publisher,
    /// Its own log callback (config `log_callback`): receives what its calls
    /// and its control thread report, until it is destroyed.
    log: Option<ObjectLog>,
}

/// Fills `config`, a struct of `size` bytes, with the defaults:
/// `struct_size` = `size`, key, format, size NULL/0 (to be set), ring_size
/// CUFRAMES_DEFAULT_RING_SIZE, policy DROP_OLDEST, ack_timeout_ms
/// CUFRAMES_DEFAULT_ACK_TIMEOUT_MS, memory AUTO, fps 0/0, CUDA context and
/// stream NULL, runtime_dir NULL, external_slots NULL, group NULL,
/// cuda_device -1, startup_timeout_ms CUFRAMES_DEFAULT_STARTUP_TIMEOUT_MS, cuda_share AUTO,
/// v1_peers SAME_USER, log_callback and log_opaque NULL; bytes
/// past the fields this library knows (a newer header's) zero. Call it
/// through the header's `cuframes_publisher_config_init(config)`, which
/// passes `sizeof *config`. `INVALID_ARGUMENT` (nothing written) for NULL or
/// a `size` that is no layout of the struct (docs/c-api.md, "ABI policy").
///
/// # Safety
///
/// `config` is NULL or points to `size` writable bytes (its old contents
/// are ignored).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_config_init_sized(
    config: *mut cuframes_publisher_config,
    size: usize,
) -> cuframes_status {
    ffi_boundary!("cuframes_publisher_config_init_sized", {
        // SAFETY: NULL or `size` writable bytes, by the caller's contract.
        try_c!(unsafe { sized::init(config, size, "config", cuframes_publisher_config::initial()) });
        CUFRAMES_OK
    })
}

/// Creates a publisher: claims the key (recovering what a dead publisher
/// left), creates the ring and starts serving subscribers. On success
/// `*publisher_out` is the new handle; on failure it is left untouched and
/// `cuframes_last_error()` says why (`ALREADY_EXISTS`: a live publisher owns
/// the key; `INVALID_ARGUMENT`: a bad field; `UNSUPPORTED`: CUDA memory in a
/// build without the CUDA backend).
///
/// # Safety
///
/// `config` is NULL or points to a valid `cuframes_publisher_config` of
/// `struct_size` bytes whose strings are NULL or NUL-terminated;
/// `publisher_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_create(
    config: *const cuframes_publisher_config,
    publisher_out: *mut *mut cuframes_publisher,
) -> cuframes_status {
    ffi_boundary!("cuframes_publisher_create", {
        // SAFETY: NULL or a valid config of struct_size bytes (contract).
        let config =
            try_c!(unsafe { sized::read_in(config, "config", cuframes_publisher_config::initial()) });
        try_c!(check_out(publisher_out, "publisher_out"));
        // SAFETY: the config's strings are NULL or NUL-terminated (contract).
        let mut rust = try_c!(unsafe { config.checked() });
        let log = config.object_log();
        rust.logger = log.as_ref().map(ObjectLog::logger);
        let inner = try_c!(Publisher::create(rust));
        let handle = Box::into_raw(Box::new(cuframes_publisher { inner, log }));
        // SAFETY: checked above; writable by the caller's contract.
        unsafe { write_out(publisher_out, handle) };
        CUFRAMES_OK
    })
}

/// The stream's geometry and settings, as subscribers see them.
///
/// # Safety
///
/// `publisher` is NULL or a live handle; `info_out` is NULL or a writable
/// struct of `struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_get_info(
    publisher: *const cuframes_publisher,
    info_out: *mut cuframes_stream_info,
) -> cuframes_status {
    ffi_boundary!("cuframes_publisher_get_info", {
        // SAFETY: NULL or a live handle, by the caller's contract.
        let publisher = try_c!(unsafe { try_ref(publisher, "publisher") });
        // SAFETY: NULL or a writable struct of struct_size bytes (contract).
        let size = try_c!(unsafe { sized::out_size(info_out, "info_out") });
        let info = stream_info_to_c(publisher.inner.info()).expect("our own policy is known");
        // SAFETY: checked above; writable by the caller's contract.
        unsafe { sized::write_out(info_out, size, info) };
        CUFRAMES_OK
    })
}

/// Waits until at least `count` (0..=31) subscribers are connected, up to
/// `timeout_ms`; `TIMEOUT` when fewer came.
///
/// # Safety
///
/// `publisher` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_wait_subscribers(
    publisher: *mut cuframes_publisher,
    count: u32,
    timeout_ms: u32,
) -> cuframes_status {
    ffi_boundary!("cuframes_publisher_wait_subscribers", {
        // SAFETY: NULL or a live handle, by the caller's contract.
        let publisher = try_c!(unsafe { try_ref(publisher.cast_const(), "publisher") });
        scoped(publisher.log.as_ref(), || {
            try_c!(
                publisher
                    .inner
                    .wait_for_subscribers(count as usize, Duration::from_millis(timeout_ms.into()))
            );
            CUFRAMES_OK
        })
    })
}

/// Publishes one frame: copies plane `i` (`planes[i]`, `pitches[i]` bytes
/// from row to row, for `i < plane_count`) into the next slot and wakes the
/// subscribers. `plane_count` must be the format's plane count; each plane
/// must hold its rows (see `cuframes_frame_info.rows` / `row_bytes`, the
/// same for a publisher's stream): at least `pitches[i] * (rows - 1) +
/// row_bytes` readable bytes. Under STRICT_WAIT it may first wait up to the
/// ACK timeout for slow subscribers (and drop them). `UNSUPPORTED` under
/// EXTERNAL ownership: the library never copies into the caller's buffers
/// (use `cuframes_publisher_acquire_slot` / `_commit_slot`).
///
/// `source` says what the pointers are: `CUFRAMES_MEMORY_HOST` (host
/// memory) or `CUFRAMES_MEMORY_CUDA` (`CUdeviceptr` values cast to
/// pointers, in the publisher's CUDA context: copied device to device into
/// CUDA slots on the publisher's stream, or downloaded into host slots).
/// On success `*seq_out` (when not NULL) is the frame's seq: 1, 2, 3, ...
///
/// # Safety
///
/// `publisher` is NULL or a live handle; `planes` and `pitches` are NULL or
/// point to `plane_count` elements; each host plane is readable as said
/// above; `seq_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_publish(
    publisher: *mut cuframes_publisher,
    source: cuframes_memory,
    planes: *const *const c_void,
    pitches: *const usize,
    plane_count: u32,
    pts_ns: i64,
    seq_out: *mut u64,
) -> cuframes_status {
    ffi_boundary!("cuframes_publisher_publish", {
        // SAFETY: NULL or a live handle used by this thread alone (contract).
        let publisher = try_c!(unsafe { try_mut(publisher, "publisher") });
        if !seq_out.is_null() {
            try_c!(check_out(seq_out, "seq_out"));
        }
        let seq = try_c!(scoped(publisher.log.as_ref(), || match source {
            CUFRAMES_MEMORY_HOST => {
                // SAFETY: the pointers' contract is this function's.
                let host = unsafe { host_planes(&publisher.inner, planes, pitches, plane_count) }?;
                publisher.inner.publish(&host, pts_ns)
            }
            CUFRAMES_MEMORY_CUDA => {
                // SAFETY: the pointers' contract is this function's.
                let device = unsafe { device_planes(&publisher.inner, planes, pitches, plane_count) }?;
                publisher.inner.publish_device(&device, pts_ns)
            }
            other => Err(invalid(format!(
                "source {other} is not CUFRAMES_MEMORY_HOST (1) or CUFRAMES_MEMORY_CUDA (2)"
            ))),
        }));
        if !seq_out.is_null() {
            // SAFETY: non-NULL and aligned (checked); writable by the caller's contract.
            unsafe { write_out(seq_out, seq) };
        }
        CUFRAMES_OK
    })
}

/// The caller's planes, checked against the publisher's layout: non-NULL,
/// one per plane, each pitch at least a row. Yields (pointer, pitch, plane).
///
/// # Safety
///
/// `planes` and `pitches` are NULL or point to `plane_count` elements.
unsafe fn checked_planes(
    publisher: &Publisher,
    planes: *const *const c_void,
    pitches: *const usize,
    plane_count: u32,
) -> Result<Vec<(*const c_void, usize, PlaneLayout)>> {
    let layout = publisher.layout();
    let want = layout.planes().len();
    if plane_count as usize != want {
        return Err(invalid(format!(
            "plane_count {plane_count}: a {} frame has {want} plane(s)",
            layout.format()
        )));
    }
    debug_assert!(want <= CUFRAMES_MAX_PLANES);
    // SAFETY: NULL or `plane_count` (= `want`) elements, by the caller's contract.
    let planes = unsafe { try_slice(planes, want, "planes") }?;
    // SAFETY: as above.
    let pitches = unsafe { try_slice(pitches, want, "pitches") }?;
    let mut out = Vec::with_capacity(want);
    for (index, ((&ptr, &pitch), &plane)) in planes.iter().zip(pitches).zip(layout.planes()).enumerate() {
        if ptr.is_null() {
            return Err(invalid(format!("planes[{index}] is NULL")));
        }
        if pitch < plane.row_bytes {
            return Err(invalid(format!(
                "pitches[{index}] {pitch} is shorter than the plane's row of {} bytes",
                plane.row_bytes
            )));
        }
        out.push((ptr, pitch, plane));
    }
    Ok(out)
}

/// The caller's device planes (CUdeviceptr values cast to pointers).
///
/// # Safety
///
/// As for [`checked_planes`].
unsafe fn device_planes(
    publisher: &Publisher,
    planes: *const *const c_void,
    pitches: *const usize,
    plane_count: u32,
) -> Result<Vec<DevicePlane>> {
    // SAFETY: this function's contract is checked_planes'.
    let checked = unsafe { checked_planes(publisher, planes, pitches, plane_count) }?;
    Ok(checked
        .into_iter()
        .map(|(ptr, pitch, _)| DevicePlane {
            ptr: ptr as usize as u64,
            pitch,
        })
        .collect())
}

/// The caller's host planes as slices, each `pitch × (rows-1) + row_bytes`
/// long for the publisher's layout.
///
/// # Safety
///
/// As for `cuframes_publisher_publish`'s `planes`, `pitches` and `plane_count`:
/// each host plane readable for its length.
unsafe fn host_planes<'a>(
    publisher: &Publisher,
    planes: *const *const c_void,
    pitches: *const usize,
    plane_count: u32,
) -> Result<Vec<HostPlane<'a>>> {
    // SAFETY: this function's contract includes checked_planes'.
    let checked = unsafe { checked_planes(publisher, planes, pitches, plane_count) }?;
    checked
        .into_iter()
        .enumerate()
        .map(|(index, (ptr, pitch, plane))| {
            let len = pitch
                .checked_mul(plane.rows - 1)
                .and_then(|bytes| bytes.checked_add(plane.row_bytes))
                .filter(|&len| len <= isize::MAX as usize)
                .ok_or_else(|| {
                    invalid(format!(
                        "pitches[{index}] {pitch}: the plane would not fit in memory"
                    ))
                })?;
            // SAFETY: the caller guarantees `len` readable bytes at `ptr` for
            // the call (contract); u8 has no alignment or validity requirement.
            let data = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
            Ok(HostPlane { data, pitch })
        })
        .collect()
}

/// Zero-copy publish, step 1: the slot the next frame goes to (after any
/// STRICT_WAIT wait), with each plane's address in `slot_out->planes`
/// (CUdeviceptr values for CUDA memory — the caller's own buffers under
/// EXTERNAL ownership — host pointers for host memory) and pitches. Write
/// the frame there (CUDA: on the publisher's stream, or synchronised before
/// the commit), then call `cuframes_publisher_commit_slot`.
///
/// # Safety
///
/// `publisher` is NULL or a live handle; `slot_out` is NULL or a writable
/// struct of `struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_acquire_slot(
    publisher: *mut cuframes_publisher,
    slot_out: *mut cuframes_slot,
) -> cuframes_status {
    ffi_boundary!("cuframes_publisher_acquire_slot", {
        // SAFETY: NULL or a live handle used by this thread alone (contract).
        let publisher = try_c!(unsafe { try_mut(publisher, "publisher") });
        // SAFETY: NULL or a writable struct of struct_size bytes (contract).
        let size = try_c!(unsafe { sized::out_size(slot_out, "slot_out") });
        let target = try_c!(scoped(publisher.log.as_ref(), || publisher.inner.acquire_slot()));
        let layout = publisher.inner.layout();
        let mut slot = cuframes_slot {
            struct_size: size_of::<cuframes_slot>() as u32,
            index: target.index as u32,
            memory: memory_to_c(publisher.inner.memory()),
            plane_count: target.planes.len() as u32,
            planes: [std::ptr::null_mut(); CUFRAMES_MAX_PLANES],
            pitches: [0; CUFRAMES_MAX_PLANES],
        };
        for (index, (ptr, plane)) in target.planes.iter().zip(layout.planes()).enumerate() {
            slot.planes[index] = match *ptr {
                PlanePtr::Host(p) => p.cast_mut().cast::<c_void>(),
                PlanePtr::Device(address) => address as usize as *mut c_void,
            };
            slot.pitches[index] = plane.pitch;
        }
        // SAFETY: checked above; writable by the caller's contract.
        unsafe { sized::write_out(slot_out, size, slot) };
        CUFRAMES_OK
    })
}

/// Zero-copy publish, step 2: publishes the slot from
/// `cuframes_publisher_acquire_slot` with `pts_ns`; `*seq_out` (when not
/// NULL) is its seq. `INVALID_ARGUMENT` without a preceding acquire.
///
/// # Safety
///
/// `publisher` is NULL or a live handle; `seq_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_commit_slot(
    publisher: *mut cuframes_publisher,
    pts_ns: i64,
    seq_out: *mut u64,
) -> cuframes_status {
    ffi_boundary!("cuframes_publisher_commit_slot", {
        // SAFETY: NULL or a live handle used by this thread alone (contract).
        let publisher = try_c!(unsafe { try_mut(publisher, "publisher") });
        if !seq_out.is_null() {
            try_c!(check_out(seq_out, "seq_out"));
        }
        let seq = try_c!(scoped(publisher.log.as_ref(), || publisher
            .inner
            .commit_slot(pts_ns)));
        if !seq_out.is_null() {
            // SAFETY: non-NULL and aligned (checked); writable by the caller's contract.
            unsafe { write_out(seq_out, seq) };
        }
        CUFRAMES_OK
    })
}

/// Waits until every subscriber released every frame still in the ring (or
/// left), up to `timeout_ms`: call it before destroying a publisher whose
/// last frames must arrive. `TIMEOUT` when some are still held.
///
/// # Safety
///
/// `publisher` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_flush(
    publisher: *mut cuframes_publisher,
    timeout_ms: u32,
) -> cuframes_status {
    ffi_boundary!("cuframes_publisher_flush", {
        // SAFETY: NULL or a live handle, by the caller's contract.
        let publisher = try_c!(unsafe { try_ref(publisher.cast_const(), "publisher") });
        let timeout = Duration::from_millis(timeout_ms.into());
        try_c!(scoped(publisher.log.as_ref(), || publisher.inner.flush(timeout)));
        CUFRAMES_OK
    })
}

/// Waits until every subscriber has taken the newest frame (it may still
/// hold it), released every frame, or left, up to `timeout_ms`: call it
/// before destroying a publisher whose last frames must arrive when the
/// subscribers keep their last frame until the stream ends (FFmpeg does).
/// Their leases stay readable after the publisher is destroyed. `TIMEOUT`
/// when some have not taken it.
///
/// # Safety
///
/// `publisher` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_wait_delivered(
    publisher: *mut cuframes_publisher,
    timeout_ms: u32,
) -> cuframes_status {
    ffi_boundary!("cuframes_publisher_wait_delivered", {
        // SAFETY: NULL or a live handle, by the caller's contract.
        let publisher = try_c!(unsafe { try_ref(publisher.cast_const(), "publisher") });
        let timeout = Duration::from_millis(timeout_ms.into());
        try_c!(scoped(publisher.log.as_ref(), || publisher
            .inner
            .wait_delivered(timeout)));
        CUFRAMES_OK
    })
}

/// Sets the properties every frame published from now on carries (colour
/// description, aspect ratio, field order, key frame, duration; docs/c-api.md,
/// "Frame properties"); NULL: none. `INVALID_ARGUMENT` for unknown flag bits.
///
/// # Safety
///
/// `publisher` is NULL or a live handle; `props` NULL or a readable struct
/// of `struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_set_frame_props(
    publisher: *mut cuframes_publisher,
    props: *const cuframes_frame_props,
) -> cuframes_status {
    ffi_boundary!("cuframes_publisher_set_frame_props", {
        // SAFETY: NULL or a live handle, by the caller's contract.
        let publisher = try_c!(unsafe { try_mut(publisher, "publisher") });
        let props = if props.is_null() {
            None
        } else {
            // SAFETY: a readable struct of struct_size bytes, by the caller's contract.
            let props = try_c!(unsafe { sized::read_in(props, "props", cuframes_frame_props::default()) });
            Some(try_c!(props.to_props()))
        };
        scoped(publisher.log.as_ref(), || publisher.inner.set_frame_props(props));
        CUFRAMES_OK
    })
}

/// Attaches side data (`CUFRAMES_SIDE_DATA_*`: HDR mastering display and
/// content light level, HDR10+, A/53 captions, user-data SEI, timecodes) to
/// the next frame published; it is cleared once that frame is out. `data`
/// may be NULL when `size` is 0. `INVALID_ARGUMENT` for kind 0 or above
/// 65535, and when the frame's side data would exceed
/// `CUFRAMES_SIDE_DATA_CAPACITY` bytes (8 per entry included; the entries
/// added before are kept).
///
/// # Safety
///
/// `publisher` is NULL or a live handle; `data` NULL or `size` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_add_side_data(
    publisher: *mut cuframes_publisher,
    kind: cuframes_side_data_kind,
    data: *const u8,
    size: usize,
) -> cuframes_status {
    ffi_boundary!("cuframes_publisher_add_side_data", {
        // SAFETY: NULL or a live handle, by the caller's contract.
        let publisher = try_c!(unsafe { try_mut(publisher, "publisher") });
        let bytes: &[u8] = if size == 0 {
            &[]
        } else {
            // SAFETY: non-NULL is checked by try_slice; `size` readable bytes
            // by the caller's contract.
            try_c!(unsafe { try_slice(data, size, "data") })
        };
        let kind =
            try_c!(u16::try_from(kind).map_err(|_| invalid(format!("side data kind {kind} is above 65535"))));
        try_c!(scoped(publisher.log.as_ref(), || publisher
            .inner
            .add_side_data(kind, bytes)));
        CUFRAMES_OK
    })
}

/// The number of connected subscribers; 0 for a NULL handle (and on an
/// internal error).
///
/// # Safety
///
/// `publisher` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_subscriber_count(publisher: *const cuframes_publisher) -> u32 {
    ffi_boundary!("cuframes_publisher_subscriber_count", fallback = 0, {
        // SAFETY: NULL or a live handle, by the caller's contract.
        match unsafe { try_ref(publisher, "publisher") } {
            Ok(publisher) => publisher.inner.subscriber_count() as u32,
            Err(error) => {
                crate::error::fail(error);
                0
            }
        }
    })
}

/// Shuts the publisher down: subscribers get SHUTDOWN (their next
/// `cuframes_subscriber_next` returns `DISCONNECTED`), the key's socket and
/// shared memory are removed, and the handle is freed. NULL is ignored.
/// Frames still leased by subscribers stay readable until released. Once
/// this returns, the publisher's `log_callback` is not called again.
///
/// # Safety
///
/// `publisher` is NULL or a live handle, not used again afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuframes_publisher_destroy(publisher: *mut cuframes_publisher) {
    ffi_boundary!("cuframes_publisher_destroy", fallback = (), {
        if !publisher.is_null() {
            // SAFETY: made by Box::into_raw in cuframes_publisher_create and
            // given back exactly once (contract).
            let cuframes_publisher { inner, log } = *unsafe { Box::from_raw(publisher) };
            // Its shutdown (the control thread joined) still reports to its
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
    use crate::stream::policy_to_c;

    #[test]
    fn enumerations_match_the_contract() {
        assert!(memory_request_from_c(3, "m").is_err());
        assert!(policy_from_c(2, "p").is_err());
        assert_eq!(policy_to_c(policy_from_c(1, "p").unwrap()), 1);
        assert!(cuda_share_from_c(3, "s").is_err());
        assert!(v1_peers_from_c(3, "v").is_err());
    }

    #[test]
    fn growable_layouts() {
        assert_growable::<cuframes_publisher_config>(
            offset_of!(cuframes_publisher_config, struct_size),
            offset_of!(cuframes_publisher_config, log_opaque) + size_of::<*mut c_void>(),
        );
        assert_growable::<cuframes_slot>(
            offset_of!(cuframes_slot, struct_size),
            offset_of!(cuframes_slot, pitches) + size_of::<[usize; CUFRAMES_MAX_PLANES]>(),
        );
        // The sizes on LP64 (x86_64, aarch64): the first layouts never change
        // (tests/c/abi/cuframes-0.2.0.h has them too); 0.3 appended the
        // config's log_callback and log_opaque.
        #[cfg(target_pointer_width = "64")]
        {
            assert_eq!(<cuframes_publisher_config as Growable>::SIZES[0], 112);
            assert_eq!(<cuframes_slot as Growable>::SIZES[0], 80);
            assert_eq!(size_of::<cuframes_publisher_config>(), 128);
        }
    }
}
