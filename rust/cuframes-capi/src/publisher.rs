//! `cuframes_publisher`: owns a key and a ring of frame slots.

use std::ffi::c_void;
use std::time::Duration;

use cuframes::{DevicePlane, HostPlane, PlaneLayout, PlanePtr, Publisher, Result};

use crate::config::cuframes_publisher_config;
use crate::error::{CUFRAMES_OK, cuframes_status, invalid};
use crate::ffi::{check_out, try_mut, try_ref, try_slice, write_out};
use crate::log::{ObjectLog, scoped};
use crate::sized;
use crate::types::{
    CUFRAMES_MAX_PLANES, CUFRAMES_MEMORY_CUDA, CUFRAMES_MEMORY_HOST, cuframes_frame_props, cuframes_memory,
    cuframes_side_data_kind, cuframes_slot, cuframes_stream_info, memory_to_c, stream_info_to_c,
};

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
/// 4, policy DROP_OLDEST, ack_timeout_ms 1000, memory AUTO, fps 0/0, CUDA
/// context and stream NULL, runtime_dir NULL, external_slots NULL, group
/// NULL, cuda_device -1, startup_timeout_ms 10000, cuda_share AUTO,
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
