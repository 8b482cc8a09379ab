//! CUDA virtual memory management (VMM) driver calls: allocations shared as
//! POSIX file descriptors (D27), and the stream memory operations
//! that order a subscriber's reads after the publisher's writes without an
//! interprocess event (D28).
//!
//! Unlike legacy CUDA IPC handles, an exported fd names the allocation
//! itself, not an address in the exporting process, so it can be imported
//! from another PID (and IPC) namespace: containers that share only a volume.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use cudarc::driver::sys;

use super::driver::{CUdeviceptr, CUstream, check, device_attribute};
use crate::error::{Error, ErrorKind, Result};

type Handle = sys::CUmemGenericAllocationHandle;

/// Why `device` cannot share memory as file descriptors, or None when it can.
pub(crate) fn fd_sharing_unsupported(device: sys::CUdevice) -> Result<Option<String>> {
    use sys::CUdevice_attribute::*;
    if crate::testhook::fd_sharing_disabled() {
        return Ok(Some(format!(
            "the GPU cannot export memory as file descriptors (simulated by {})",
            crate::testhook::NO_FD_SHARING_ENV
        )));
    }
    if device_attribute(
        device,
        CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
        "VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED",
    )? == 0
    {
        return Ok(Some(
            "the GPU or driver has no virtual memory management (CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED is 0)".into(),
        ));
    }
    if device_attribute(
        device,
        CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
        "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED",
    )? == 0
    {
        return Ok(Some(
            "the GPU or driver cannot export memory as file descriptors (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED is 0; MIG instances and some virtualised GPUs cannot)".into(),
        ));
    }
    Ok(None)
}

fn allocation_prop(device: sys::CUdevice) -> sys::CUmemAllocationProp {
    // SAFETY: a plain C struct for which all-zero is a valid value (the
    // fields not set below mean "default").
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop
}

/// `len` rounded up to the device's allocation granularity.
pub(crate) fn rounded_size(device: sys::CUdevice, len: usize) -> Result<usize> {
    let prop = allocation_prop(device);
    let mut granularity = 0usize;
    // SAFETY: valid prop and out-pointer.
    let result = unsafe {
        sys::cuMemGetAllocationGranularity(
            &mut granularity,
            &prop,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
        )
    };
    check(result, "cuMemGetAllocationGranularity")?;
    let granularity = granularity.max(1);
    len.div_ceil(granularity)
        .checked_mul(granularity)
        .ok_or_else(|| Error::invalid(format!("a slot of {len} bytes is too large")))
}

/// Memory mapped in this process: an address range with one allocation
/// mapped over it, readable and writable from `device`. Freed by `unmap`.
#[derive(Debug)]
pub(crate) struct Mapped {
    pub ptr: CUdeviceptr,
    pub size: usize,
}

/// Reserves an address range for `handle` (`size` bytes), maps it and makes
/// it accessible from `device`. The handle stays the caller's.
fn map(handle: Handle, size: usize, device: sys::CUdevice) -> Result<Mapped> {
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: valid out-pointer; size is a multiple of the granularity
    // (the caller's), no fixed address, no flags.
    let result = unsafe { sys::cuMemAddressReserve(&mut ptr, size, 0, 0, 0) };
    check(result, "cuMemAddressReserve")?;
    // SAFETY: maps the whole allocation at offset 0 over the range just reserved.
    let result = unsafe { sys::cuMemMap(ptr, size, 0, handle, 0) };
    if let Err(e) = check(result, "cuMemMap") {
        // SAFETY: frees the range reserved above (nothing mapped in it).
        let _ = unsafe { sys::cuMemAddressFree(ptr, size) };
        return Err(e);
    }
    let access = sys::CUmemAccessDesc {
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: device,
        },
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: the range is mapped (above); one valid descriptor.
    let result = unsafe { sys::cuMemSetAccess(ptr, size, &access, 1) };
    let mapped = Mapped { ptr, size };
    if let Err(e) = check(result, "cuMemSetAccess") {
        unmap(&mapped);
        return Err(e);
    }
    Ok(mapped)
}

/// Unmaps and frees the address range (the allocation goes when every
/// mapping and handle of it, in every process, is gone).
pub(crate) fn unmap(mapped: &Mapped) {
    // SAFETY: the range was reserved and mapped by `map`, and is released once.
    unsafe {
        let _ = sys::cuMemUnmap(mapped.ptr, mapped.size);
        let _ = sys::cuMemAddressFree(mapped.ptr, mapped.size);
    }
}

/// A shareable allocation of the publisher: mapped here, exported once.
#[derive(Debug)]
pub(crate) struct Exported {
    pub mapped: Mapped,
    /// The allocation exported as a file descriptor (close-on-exec);
    /// duplicated for each subscriber by sending it.
    pub fd: OwnedFd,
}

/// Allocates `len` bytes (rounded up to the granularity) on `device`,
/// mapped in the current context and exported as a file descriptor.
pub(crate) fn alloc_exported(device: sys::CUdevice, len: usize) -> Result<Exported> {
    let size = rounded_size(device, len)?;
    let prop = allocation_prop(device);
    let mut handle: Handle = 0;
    // SAFETY: valid out-pointer and prop; flags must be 0.
    let result = unsafe { sys::cuMemCreate(&mut handle, size, &prop, 0) };
    check(result, "cuMemCreate")?;
    let exported = map(handle, size, device).and_then(|mapped| {
        let mut raw: std::ffi::c_int = -1;
        // SAFETY: the handle was created with the POSIX fd handle type; the
        // driver writes an int fd to the out-pointer.
        let result = unsafe {
            sys::cuMemExportToShareableHandle(
                (&mut raw as *mut std::ffi::c_int).cast(),
                handle,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        };
        match check(result, "cuMemExportToShareableHandle") {
            Ok(()) if raw >= 0 => Ok(Exported {
                mapped,
                // SAFETY: the driver returned a new descriptor that nothing else owns.
                fd: unsafe { OwnedFd::from_raw_fd(raw) },
            }),
            Ok(()) => {
                unmap(&mapped);
                Err(Error::new(
                    ErrorKind::Cuda,
                    "cuMemExportToShareableHandle returned no descriptor",
                ))
            }
            Err(e) => {
                unmap(&mapped);
                Err(e)
            }
        }
    });
    // The mapping (and the exported fd) keep the allocation alive.
    // SAFETY: releases the handle created above, once.
    let _ = unsafe { sys::cuMemRelease(handle) };
    exported
}

/// Imports an allocation of another process from its file descriptor and
/// maps `size` bytes of it in the current context, accessible from `device`.
/// `size` comes from the (untrusted) publisher: the driver refuses a size
/// larger than the allocation.
pub(crate) fn import(fd: &OwnedFd, size: usize, device: sys::CUdevice) -> Result<Mapped> {
    let mut handle: Handle = 0;
    // SAFETY: for POSIX fds the driver takes the descriptor's value cast to a
    // pointer; it does not take ownership (we close ours on drop). A
    // descriptor that is not a CUDA allocation is an error code.
    let result = unsafe {
        sys::cuMemImportFromShareableHandle(
            &mut handle,
            fd.as_raw_fd() as isize as *mut std::ffi::c_void,
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        )
    };
    check(result, "cuMemImportFromShareableHandle")?;
    let mapped = map(handle, size, device);
    // SAFETY: releases the imported handle, once; the mapping keeps the memory.
    let _ = unsafe { sys::cuMemRelease(handle) };
    mapped
}

/// Queues on `stream`: write `value` to the 8-byte word at `ptr` once the
/// work queued before it is done (with a memory barrier: what that work
/// wrote is visible to whoever sees the value).
pub(crate) fn stream_write_u64(stream: CUstream, ptr: CUdeviceptr, value: u64) -> Result<()> {
    // SAFETY: ptr is an 8-byte-aligned word of a live mapping; flags 0
    // (default: with a memory barrier).
    let result = unsafe { sys::cuStreamWriteValue64_v2(stream, ptr, value, 0) };
    check(result, "cuStreamWriteValue64")
}

/// Queues on `stream`: wait until the 8-byte word at `ptr` is ≥ `value`.
pub(crate) fn stream_wait_u64(stream: CUstream, ptr: CUdeviceptr, value: u64) -> Result<()> {
    // SAFETY: ptr is an 8-byte-aligned word of a live mapping.
    let result = unsafe {
        sys::cuStreamWaitValue64_v2(
            stream,
            ptr,
            value,
            sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
        )
    };
    check(result, "cuStreamWaitValue64")
}

/// Sets `len` bytes at `ptr` to zero and waits (a new fence array).
pub(crate) fn zero(ptr: CUdeviceptr, len: usize) -> Result<()> {
    // SAFETY: [ptr, ptr+len) lies in a live mapping of the current context.
    let result = unsafe { sys::cuMemsetD8_v2(ptr, 0, len) };
    check(result, "cuMemsetD8")?;
    // cuMemsetD8 is ordered on the legacy default stream only: wait for it
    // before other streams write the words.
    // SAFETY: the null stream is the current context's legacy default stream.
    let result = unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) };
    check(result, "cuStreamSynchronize")
}
