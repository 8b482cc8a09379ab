//! The CUDA driver calls cuframes makes, through cudarc's raw bindings with
//! dynamic loading: no CUDA toolkit at build time, and a machine without a
//! driver gets a clear error instead of a crash (`available()` is checked
//! before any other call; cudarc panics when a symbol cannot be loaded).
//!
//! CUDA `unsafe` lives here and in its two neighbours that need other raw
//! calls: `vmm.rs` (virtual memory management: export, import, map) and
//! `copy_kernel.rs` (the copy kernel's module and launch). Every call runs with the right
//! context current (`ContextGuard`), because callers such as FFmpeg call from
//! threads where no context is current.

use std::ffi::CStr;
use std::sync::OnceLock;

use cudarc::driver::sys;

use crate::error::{Error, ErrorKind, Resource, Result};

pub(crate) use sys::{CUcontext, CUdeviceptr, CUevent, CUstream};

/// Whether a CUDA driver can be loaded and initialised with at least one
/// device; the reason when not. Computed once per process.
pub(crate) fn availability() -> &'static std::result::Result<(), String> {
    static STATE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    STATE.get_or_init(|| {
        // SAFETY: only tries to dlopen libcuda; no symbol is called.
        if !unsafe { sys::is_culib_present() } {
            return Err("no CUDA driver (libcuda.so could not be loaded)".into());
        }
        // SAFETY: the library is present (checked above); cuInit has no
        // preconditions and may be called any number of times.
        let result = unsafe { sys::cuInit(0) };
        check(result, "cuInit").map_err(|e| e.to_string())?;
        let mut count = 0;
        // SAFETY: cuInit succeeded; `count` is a valid out-pointer.
        let result = unsafe { sys::cuDeviceGetCount(&mut count) };
        check(result, "cuDeviceGetCount").map_err(|e| e.to_string())?;
        if count < 1 {
            return Err("the CUDA driver reports no device".into());
        }
        Ok(())
    })
}

/// `Ok` when CUDA is usable, else an `Unsupported` error saying why.
pub(crate) fn require() -> Result<()> {
    availability()
        .as_ref()
        .map(|_| ())
        .map_err(|why| Error::new(ErrorKind::Unsupported, format!("CUDA is not available: {why}")))
}

fn error_name(code: sys::CUresult) -> String {
    let mut name: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a pointer to a static string or leaves
    // it null for unknown codes; it needs no context.
    let known = unsafe { sys::cuGetErrorName(code, &mut name) } == sys::CUresult::CUDA_SUCCESS;
    if known && !name.is_null() {
        // SAFETY: the driver returned a pointer to a static NUL-terminated string.
        unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
    } else {
        format!("{code:?}")
    }
}

/// Turns a CUresult into a `Cuda` error naming the call.
/// Out of GPU memory, it is an `Exhausted` error with what the device has
/// free (of the current context's device, when one is current).
pub(crate) fn check(code: sys::CUresult, call: &str) -> Result<()> {
    match code {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
            let free = memory_info().map_or(String::new(), |(free, total)| {
                format!(" ({} free of {})", mib(free), mib(total))
            });
            Err(Error::exhausted(
                Resource::GpuMemory,
                format!(
                    "{call} failed: {}: {}{free}",
                    error_name(code),
                    Resource::GpuMemory.ran_out("this process")
                ),
            ))
        }
        _ => Err(Error::new(
            ErrorKind::Cuda,
            format!("{call} failed: {}", error_name(code)),
        )),
    }
}

/// Free and total bytes of the current context's device (`cuMemGetInfo`);
/// None without a current context.
pub(crate) fn memory_info() -> Option<(u64, u64)> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: valid out-pointers; without a current context it returns an
    // error code and writes nothing.
    let result = unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) };
    (result == sys::CUresult::CUDA_SUCCESS).then_some((free as u64, total as u64))
}

/// Bytes in MiB, for messages.
pub(crate) fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes.div_ceil(1 << 20))
}

/// Fails at once, with the numbers, when the current context's device has
/// less free memory than `needed` bytes for `what`: better than a ring
/// half allocated, or a driver error without them.
pub(crate) fn require_free_memory(needed: u64, what: &str) -> Result<()> {
    match memory_info() {
        Some((free, _)) if free < needed => Err(Error::exhausted(
            Resource::GpuMemory,
            format!("the GPU has {} free, {what} needs {}", mib(free), mib(needed)),
        )),
        _ => Ok(()),
    }
}

/// A context made current for the guard's lifetime (push/pop, so the
/// caller's own current context is restored).
pub(crate) struct ContextGuard(());

impl ContextGuard {
    pub(crate) fn push(ctx: CUcontext) -> Result<ContextGuard> {
        // SAFETY: ctx is a live context owned by this backend or the caller
        // (its lifetime is the backend's); pushing has no other precondition.
        let result = unsafe { sys::cuCtxPushCurrent_v2(ctx) };
        check(result, "cuCtxPushCurrent")?;
        Ok(ContextGuard(()))
    }
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        let mut popped: CUcontext = std::ptr::null_mut();
        // SAFETY: pops the context this guard pushed.
        let _ = unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
    }
}

/// The context to use: the caller's, else the current one, else device
/// `ordinal`'s primary context (retained; released by `Context::drop`).
#[derive(Debug)]
pub(crate) struct Context {
    pub ctx: CUcontext,
    pub device: sys::CUdevice,
    retained_primary: bool,
}

// SAFETY: a CUcontext is a process-wide handle usable from any thread once
// made current; this type only hands it to driver calls under ContextGuard.
unsafe impl Send for Context {}
// SAFETY: as above, shared references only read the handle.
unsafe impl Sync for Context {}

impl Context {
    pub(crate) fn resolve(explicit: usize, ordinal: i32) -> Result<Context> {
        require()?;
        if explicit != 0 {
            let ctx = explicit as CUcontext;
            let _guard = ContextGuard::push(ctx)?;
            return Ok(Context {
                ctx,
                device: current_device()?,
                retained_primary: false,
            });
        }
        let mut current: CUcontext = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the driver is initialised (require()).
        let result = unsafe { sys::cuCtxGetCurrent(&mut current) };
        check(result, "cuCtxGetCurrent")?;
        if !current.is_null() && ordinal < 0 {
            return Ok(Context {
                ctx: current,
                device: current_device()?,
                retained_primary: false,
            });
        }
        let mut device: sys::CUdevice = 0;
        // SAFETY: valid out-pointer; an out-of-range ordinal is an error code.
        let result = unsafe { sys::cuDeviceGet(&mut device, ordinal.max(0)) };
        check(result, "cuDeviceGet")?;
        // A primary context not yet in use gets FFmpeg's flags (blocking
        // sync), so FFmpeg's hwcontext_cuda can share it (its primary_ctx
        // option refuses an active one with other flags).
        let (mut flags, mut active) = (0u32, 0i32);
        // SAFETY: valid device and out-pointers.
        let result = unsafe { sys::cuDevicePrimaryCtxGetState(device, &mut flags, &mut active) };
        check(result, "cuDevicePrimaryCtxGetState")?;
        if active == 0 {
            let blocking = sys::CUctx_flags::CU_CTX_SCHED_BLOCKING_SYNC as u32;
            // SAFETY: valid device; setting flags of an inactive primary context.
            let result = unsafe { sys::cuDevicePrimaryCtxSetFlags_v2(device, blocking) };
            check(result, "cuDevicePrimaryCtxSetFlags")?;
        }
        let mut ctx: CUcontext = std::ptr::null_mut();
        // SAFETY: `device` came from cuDeviceGet; valid out-pointer.
        let result = unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, device) };
        check(result, "cuDevicePrimaryCtxRetain")?;
        let context = Context {
            ctx,
            device,
            retained_primary: true,
        };
        if active == 0 {
            context.reserve_no_stack()?;
        }
        Ok(context)
    }

    /// A context this library starts reserves no per-thread stack up front.
    /// At CUDA's default (1 KiB for every thread the GPU can hold) that
    /// reservation is half a context's memory: 264 of 525 MiB on an H200,
    /// which bounds how many processes fit on one GPU. The driver grows the
    /// stack for any kernel launch that needs more, so nothing fails for it.
    /// Contexts the caller made are left as they are.
    fn reserve_no_stack(&self) -> Result<()> {
        let _guard = self.enter()?;
        // SAFETY: the context is current (guard); 0 asks for the smallest
        // stack the driver allows.
        let result = unsafe { sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_STACK_SIZE, 0) };
        check(result, "cuCtxSetLimit(CU_LIMIT_STACK_SIZE)")
    }

    pub(crate) fn enter(&self) -> Result<ContextGuard> {
        ContextGuard::push(self.ctx)
    }

    /// The device's 16-byte UUID (stable across processes, unlike ordinals).
    pub(crate) fn device_uuid(&self) -> Result<[u8; 16]> {
        device_uuid(self.device)
    }

    /// Whether the device can share events between processes.
    pub(crate) fn ipc_events_supported(&self) -> Result<bool> {
        let mut value = 0;
        // SAFETY: valid device and out-pointer.
        let result = unsafe {
            sys::cuDeviceGetAttribute(
                &mut value,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED,
                self.device,
            )
        };
        check(result, "cuDeviceGetAttribute(IPC_EVENT_SUPPORTED)")?;
        Ok(value != 0)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if self.retained_primary {
            // SAFETY: balances the cuDevicePrimaryCtxRetain in resolve().
            let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
        }
    }
}

/// Whether the calling thread has a current CUDA context (false without a
/// usable driver).
pub(crate) fn has_current_context() -> bool {
    if require().is_err() {
        return false;
    }
    let mut current: CUcontext = std::ptr::null_mut();
    // SAFETY: the driver is initialised (require()); valid out-pointer.
    let result = unsafe { sys::cuCtxGetCurrent(&mut current) };
    result == sys::CUresult::CUDA_SUCCESS && !current.is_null()
}

/// How many devices the driver shows this process (`CUDA_VISIBLE_DEVICES`).
pub(crate) fn device_count() -> Result<i32> {
    require()?;
    let mut count = 0;
    // SAFETY: the driver is initialised (require()); valid out-pointer.
    let result = unsafe { sys::cuDeviceGetCount(&mut count) };
    check(result, "cuDeviceGetCount")?;
    Ok(count)
}

/// The device handle of ordinal `ordinal` (0..device_count()).
pub(crate) fn device_get(ordinal: i32) -> Result<sys::CUdevice> {
    let mut device: sys::CUdevice = 0;
    // SAFETY: valid out-pointer; an out-of-range ordinal is an error code.
    let result = unsafe { sys::cuDeviceGet(&mut device, ordinal) };
    check(result, "cuDeviceGet")?;
    Ok(device)
}

/// A device's 16-byte UUID (the bytes of nvidia-smi's `GPU-…` UUID).
pub(crate) fn device_uuid(device: sys::CUdevice) -> Result<[u8; 16]> {
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: `device` came from the driver; valid out-pointer.
    let result = unsafe { sys::cuDeviceGetUuid(&mut uuid, device) };
    check(result, "cuDeviceGetUuid")?;
    Ok(uuid.bytes.map(|b| b as u8))
}

/// A device's name ("NVIDIA H200"), or "?" when the driver does not say.
pub(crate) fn device_name(device: sys::CUdevice) -> String {
    let mut name = [0 as std::ffi::c_char; 256];
    // SAFETY: `device` came from the driver; the buffer holds `len` bytes
    // and the driver writes a NUL-terminated string of at most that many.
    let result = unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device) };
    if result != sys::CUresult::CUDA_SUCCESS {
        return "?".into();
    }
    let last = name.len() - 1;
    name[last] = 0; // never trust the terminator
    // SAFETY: NUL-terminated within the buffer (set just above at the latest).
    unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Whether contexts on `device` can access memory on `peer` directly
/// (`cuDeviceCanAccessPeer`).
pub(crate) fn can_access_peer(device: sys::CUdevice, peer: sys::CUdevice) -> Result<bool> {
    let mut can = 0;
    // SAFETY: both devices came from the driver; valid out-pointer.
    let result = unsafe { sys::cuDeviceCanAccessPeer(&mut can, device, peer) };
    check(result, "cuDeviceCanAccessPeer")?;
    Ok(can != 0)
}

/// A device attribute's value; `name` names it in the error.
pub(crate) fn device_attribute(
    device: sys::CUdevice,
    attribute: sys::CUdevice_attribute,
    name: &str,
) -> Result<i32> {
    let mut value = 0;
    // SAFETY: valid device ordinal handle and out-pointer; an unknown
    // attribute on an old driver is an error code.
    let result = unsafe { sys::cuDeviceGetAttribute(&mut value, attribute, device) };
    check(result, &format!("cuDeviceGetAttribute({name})"))?;
    Ok(value)
}

fn current_device() -> Result<sys::CUdevice> {
    let mut device: sys::CUdevice = 0;
    // SAFETY: a context is current (callers push one first); valid out-pointer.
    let result = unsafe { sys::cuCtxGetDevice(&mut device) };
    check(result, "cuCtxGetDevice")?;
    Ok(device)
}

/// Device memory, freed on drop (with its context current).
#[derive(Debug)]
pub(crate) struct DeviceAlloc {
    pub ptr: CUdeviceptr,
}

pub(crate) fn alloc(len: usize) -> Result<DeviceAlloc> {
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: a context is current (callers hold a ContextGuard); valid out-pointer.
    let result = unsafe { sys::cuMemAlloc_v2(&mut ptr, len) };
    check(result, "cuMemAlloc")?;
    Ok(DeviceAlloc { ptr })
}

/// Frees an allocation; the caller makes its context current.
pub(crate) fn free(alloc: &DeviceAlloc) {
    // SAFETY: ptr came from cuMemAlloc and is freed once (owner's Drop).
    let _ = unsafe { sys::cuMemFree_v2(alloc.ptr) };
}

/// (base, size) of the allocation holding `ptr`.
pub(crate) fn allocation_range(ptr: CUdeviceptr) -> Result<(CUdeviceptr, usize)> {
    let (mut base, mut size): (CUdeviceptr, usize) = (0, 0);
    // SAFETY: a context is current; valid out-pointers; an unknown pointer
    // is an error code.
    let result = unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) };
    check(result, "cuMemGetAddressRange")?;
    Ok((base, size))
}

/// The allocation holding a device pointer, and whether kernels of a
/// given context can read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Allocation {
    pub base: CUdeviceptr,
    pub size: usize,
    /// Readable by that context's kernels at the same address: allocated in
    /// (or registered with) that context, or of no context with read access
    /// granted to its device. A kernel reading memory it cannot reach is a
    /// sticky error that ends the context, where a copy call that cannot
    /// reach it returns an error code.
    pub kernel_readable: bool,
}

impl Allocation {
    /// Whether `start..end` lies within it.
    pub(crate) fn holds(&self, start: CUdeviceptr, end: CUdeviceptr) -> bool {
        start >= self.base && start <= end && end <= self.base + self.size as CUdeviceptr
    }
}

/// The allocation holding `ptr`, its kernels' view judged for `ctx` (context
/// current); None where the driver knows no allocation there (host memory,
/// a freed or forged address). One driver call.
pub(crate) fn allocation_of(ptr: CUdeviceptr, ctx: CUcontext) -> Option<Allocation> {
    use sys::CUpointer_attribute::*;
    let mut attributes = [
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        CU_POINTER_ATTRIBUTE_CONTEXT,
        CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
    ];
    let (mut base, mut size, mut owner, mut device_ptr): (CUdeviceptr, usize, CUcontext, CUdeviceptr) =
        (0, 0, std::ptr::null_mut(), 0);
    let mut data: [*mut std::ffi::c_void; 4] = [
        (&raw mut base).cast(),
        (&raw mut size).cast(),
        (&raw mut owner).cast(),
        (&raw mut device_ptr).cast(),
    ];
    // SAFETY: a context is current; each data pointer points to a live
    // variable of the attribute's type (CUdeviceptr, size_t, CUcontext,
    // CUdeviceptr), four of each array. An address the driver does not
    // know leaves the defaults (zeros) and returns success.
    let result = unsafe {
        sys::cuPointerGetAttributes(
            attributes.len() as u32,
            attributes.as_mut_ptr(),
            data.as_mut_ptr(),
            ptr,
        )
    };
    if result == sys::CUresult::CUDA_SUCCESS && size > 0 {
        // Memory of no context (a stream-ordered pool, shown on the GPU; by
        // the same rule VMM mappings, not shown) is readable where the driver
        // grants this context's device access to it.
        let ours = if owner.is_null() {
            device_access_readable(ptr)
        } else {
            owner == ctx
        };
        return Some(Allocation {
            base,
            size,
            kernel_readable: ours && device_ptr == ptr,
        });
    }
    // Should the driver refuse one of the attributes for some memory, its
    // range still serves a copy call, never the kernel.
    allocation_range(ptr).ok().map(|(base, size)| Allocation {
        base,
        size,
        kernel_readable: false,
    })
}

/// Whether the current context's device may read the memory at `ptr`
/// (`CU_POINTER_ATTRIBUTE_ACCESS_FLAGS`: read or read-write).
fn device_access_readable(ptr: CUdeviceptr) -> bool {
    // Wider than the attribute's 4-byte enum, zeroed: the value reads the
    // same whatever width the driver writes.
    let mut flags: u64 = 0;
    // SAFETY: a context is current; `flags` is a live, zeroed 8-byte
    // variable, at least the attribute's size.
    let result = unsafe {
        sys::cuPointerGetAttribute(
            (&raw mut flags).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_ACCESS_FLAGS,
            ptr,
        )
    };
    let read = sys::CUDA_POINTER_ATTRIBUTE_ACCESS_FLAGS::CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ as u64;
    result == sys::CUresult::CUDA_SUCCESS && flags & read != 0
}

/// The IPC handle of an allocation's base.
pub(crate) fn ipc_mem_handle(ptr: CUdeviceptr) -> Result<[u8; 64]> {
    let mut handle = sys::CUipcMemHandle { reserved: [0; 64] };
    // SAFETY: ptr is the base of a cuMemAlloc allocation; valid out-pointer.
    let result = unsafe { sys::cuIpcGetMemHandle(&mut handle, ptr) };
    check(result, "cuIpcGetMemHandle")?;
    Ok(handle.reserved.map(|b| b as u8))
}

/// Opens another process's allocation in the current context; close with
/// `ipc_close`. On another device than the allocation's, the driver enables
/// peer access (CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, the only flag; callers
/// check `can_access_peer` first); on the same device the flag does nothing.
pub(crate) fn ipc_open(handle: &[u8; 64]) -> Result<CUdeviceptr> {
    let handle = sys::CUipcMemHandle {
        reserved: handle.map(|b| b as std::ffi::c_char),
    };
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: a context is current; the handle is an opaque blob the driver
    // validates (a forged one is an error code, not UB); valid out-pointer.
    let result = unsafe {
        sys::cuIpcOpenMemHandle_v2(
            &mut ptr,
            handle,
            sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32,
        )
    };
    check(result, "cuIpcOpenMemHandle")?;
    Ok(ptr)
}

pub(crate) fn ipc_close(ptr: CUdeviceptr) {
    // SAFETY: ptr came from cuIpcOpenMemHandle and is closed once.
    let _ = unsafe { sys::cuIpcCloseMemHandle(ptr) };
}

/// An interprocess event (`CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING`).
pub(crate) fn ipc_event_create() -> Result<(CUevent, [u8; 64])> {
    let mut event: CUevent = std::ptr::null_mut();
    let flags =
        sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32 | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
    // SAFETY: a context is current; valid out-pointer.
    let result = unsafe { sys::cuEventCreate(&mut event, flags) };
    check(result, "cuEventCreate")?;
    let mut handle = sys::CUipcEventHandle { reserved: [0; 64] };
    // SAFETY: event was created interprocess just above.
    let result = unsafe { sys::cuIpcGetEventHandle(&mut handle, event) };
    if let Err(e) = check(result, "cuIpcGetEventHandle") {
        event_destroy(event);
        return Err(e);
    }
    Ok((event, handle.reserved.map(|b| b as u8)))
}

pub(crate) fn ipc_event_open(handle: &[u8; 64]) -> Result<CUevent> {
    let handle = sys::CUipcEventHandle {
        reserved: handle.map(|b| b as std::ffi::c_char),
    };
    let mut event: CUevent = std::ptr::null_mut();
    // SAFETY: a context is current; the driver validates the blob.
    let result = unsafe { sys::cuIpcOpenEventHandle(&mut event, handle) };
    check(result, "cuIpcOpenEventHandle")?;
    Ok(event)
}

pub(crate) fn event_destroy(event: CUevent) {
    // SAFETY: event came from cuEventCreate/cuIpcOpenEventHandle, destroyed once.
    let _ = unsafe { sys::cuEventDestroy_v2(event) };
}

pub(crate) fn event_record(event: CUevent, stream: CUstream) -> Result<()> {
    // SAFETY: live event and stream (or null = default stream) of the current context.
    let result = unsafe { sys::cuEventRecord(event, stream) };
    check(result, "cuEventRecord")
}

pub(crate) fn stream_wait_event(stream: CUstream, event: CUevent) -> Result<()> {
    // SAFETY: live stream (or null) and event; flags must be 0.
    let result = unsafe { sys::cuStreamWaitEvent(stream, event, 0) };
    check(result, "cuStreamWaitEvent")
}

pub(crate) fn stream_synchronize(stream: CUstream) -> Result<()> {
    // SAFETY: live stream or null (default stream).
    let result = unsafe { sys::cuStreamSynchronize(stream) };
    check(result, "cuStreamSynchronize")
}

/// Where one side of a 2D copy is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mem {
    Host(*const u8),
    HostMut(*mut u8),
    Device(CUdeviceptr),
}

/// `rows` rows of `row_bytes` from `src` (pitch `src_pitch`) to `dst`
/// (pitch `dst_pitch`), queued on `stream`. The caller guarantees both
/// regions are valid for the copy (host memory stays valid until the stream
/// reaches it; callers synchronise before releasing host buffers).
pub(crate) fn copy_2d(
    src: Mem,
    src_pitch: usize,
    dst: Mem,
    dst_pitch: usize,
    row_bytes: usize,
    rows: usize,
    stream: CUstream,
) -> Result<()> {
    let host = sys::CUmemorytype::CU_MEMORYTYPE_HOST;
    let device = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
    let (src_type, src_host, src_device) = match src {
        Mem::Host(p) => (host, p.cast::<std::ffi::c_void>(), 0),
        Mem::HostMut(p) => (host, p.cast_const().cast::<std::ffi::c_void>(), 0),
        Mem::Device(d) => (device, std::ptr::null(), d),
    };
    let (dst_type, dst_host, dst_device) = match dst {
        Mem::Host(_) => {
            return Err(Error::new(
                ErrorKind::Internal,
                "copy destination is read-only host memory",
            ));
        }
        Mem::HostMut(p) => (host, p.cast::<std::ffi::c_void>(), 0),
        Mem::Device(d) => (device, std::ptr::null_mut(), d),
    };
    let copy = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: src_type,
        srcHost: src_host,
        srcDevice: src_device,
        srcArray: std::ptr::null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: dst_type,
        dstHost: dst_host,
        dstDevice: dst_device,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: row_bytes,
        Height: rows,
    };
    // SAFETY: the struct describes regions the caller guarantees valid (see
    // the doc comment); the driver checks pitches and memory types.
    let result = unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream) };
    check(result, "cuMemcpy2DAsync")
}

/// A stream of the current context that does not wait for the legacy
/// default stream (`CU_STREAM_NON_BLOCKING`).
pub(crate) fn stream_create() -> Result<CUstream> {
    let mut stream: CUstream = std::ptr::null_mut();
    // SAFETY: a context is current; valid out-pointer.
    let result =
        unsafe { sys::cuStreamCreate(&mut stream, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32) };
    check(result, "cuStreamCreate")?;
    Ok(stream)
}

pub(crate) fn stream_destroy(stream: CUstream) {
    // SAFETY: stream came from cuStreamCreate and is destroyed once.
    let _ = unsafe { sys::cuStreamDestroy_v2(stream) };
}

/// A plain event (`CU_EVENT_DISABLE_TIMING`) of the current context.
pub(crate) fn event_create() -> Result<CUevent> {
    let mut event: CUevent = std::ptr::null_mut();
    // SAFETY: a context is current; valid out-pointer.
    let result =
        unsafe { sys::cuEventCreate(&mut event, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32) };
    check(result, "cuEventCreate")?;
    Ok(event)
}

/// Whether the work before `event`'s last record is done (no wait).
pub(crate) fn event_done(event: CUevent) -> Result<bool> {
    // SAFETY: live event of (or opened in) the current context.
    let result = unsafe { sys::cuEventQuery(event) };
    if result == sys::CUresult::CUDA_ERROR_NOT_READY {
        return Ok(false);
    }
    check(result, "cuEventQuery").map(|()| true)
}

/// A plain event that a CPU wait sleeps on (`CU_EVENT_BLOCKING_SYNC`)
/// instead of spinning.
pub(crate) fn event_create_blocking() -> Result<CUevent> {
    let mut event: CUevent = std::ptr::null_mut();
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
        | sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32;
    // SAFETY: a context is current; valid out-pointer.
    let result = unsafe { sys::cuEventCreate(&mut event, flags) };
    check(result, "cuEventCreate")?;
    Ok(event)
}

/// Waits for `event` on the CPU: a few looks first (a short copy is often
/// done by then), then the driver's wait, which sleeps for an event made by
/// `event_create_blocking` (polling with short sleeps instead cost ~20
/// context switches per frame on a loaded H200).
pub(crate) fn event_wait(event: CUevent) -> Result<()> {
    for _ in 0..32 {
        if event_done(event)? {
            return Ok(());
        }
        std::hint::spin_loop();
    }
    // SAFETY: live event of the current context.
    let result = unsafe { sys::cuEventSynchronize(event) };
    check(result, "cuEventSynchronize")
}

/// `len` bytes from device `src` to device `dst`, queued on `stream`.
pub(crate) fn copy_dtod(dst: CUdeviceptr, src: CUdeviceptr, len: usize, stream: CUstream) -> Result<()> {
    // SAFETY: both ranges are device memory of (or mapped into) the current
    // context, `len` bytes long (callers size them from the frame layout).
    let result = unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, len, stream) };
    check(result, "cuMemcpyDtoDAsync")
}
