//! CUDA memory in and out of the elements, with the CUDA context shared the
//! way GStreamer's own CUDA elements share it (`gst.cuda.context`: asked of
//! the neighbours and the application, else made and announced).
//!
//! - The source hands out each frame in its slot, wrapped as GstCudaMemory
//!   whose free releases the lease (GStreamer 1.24 and later), ordered on a
//!   GstCudaStream of its own that downstream elements wait on; on 1.22, which
//!   cannot wrap foreign memory, it copies each frame into a buffer of
//!   GStreamer's CUDA buffer pool instead.
//! - The sink reads the device pointers of the GstCudaMemory it is given,
//!   after the stream that wrote them (1.24: `gst_cuda_memory_sync`), and the
//!   publisher copies them device to device into its slot.

use std::mem::MaybeUninit;
use std::ptr;

use cuframes::{FrameLease, PlanePtr};
use gst::glib::translate::{FromGlibPtrFull, ToGlibPtr};
use gst::prelude::*;
use std::sync::{Mutex, MutexGuard};

use crate::gstcuda::{ContextPtr, GstCuda, MAP_CUDA, StreamPtr};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A reference to a GstCudaContext, dropped with it.
#[derive(Debug)]
pub struct SharedContext(ContextPtr);

// SAFETY: GstCudaContext is a GstObject: its reference count is atomic and
// its calls may come from any thread.
unsafe impl Send for SharedContext {}
// SAFETY: as above; nothing here mutates it.
unsafe impl Sync for SharedContext {}

impl Drop for SharedContext {
    fn drop(&mut self) {
        // SAFETY: we own one reference, given up once.
        unsafe { gst::ffi::gst_object_unref(self.0.cast()) };
    }
}

impl SharedContext {
    /// A new buffer pool of GStreamer's CUDA memory in this context,
    /// configured for `caps` (CUDA memory) of `size`-byte frames.
    pub fn buffer_pool(
        &self,
        cuda: &GstCuda,
        caps: &gst::Caps,
        size: usize,
    ) -> Result<gst::BufferPool, String> {
        // SAFETY: a live context; the pool comes with one reference, ours.
        let pool: gst::BufferPool =
            unsafe { gst::BufferPool::from_glib_full((cuda.buffer_pool_new)(self.0)) };
        let mut config = pool.config();
        config.set_params(
            Some(caps),
            u32::try_from(size).map_err(|_| "frame too large")?,
            2,
            0,
        );
        pool.set_config(config)
            .map_err(|e| format!("GStreamer's CUDA pool refused {caps}: {e}"))?;
        pool.set_active(true)
            .map_err(|e| format!("GStreamer's CUDA pool did not start: {e}"))?;
        Ok(pool)
    }

    /// The `CUcontext`, for the cuframes library's `CudaBinding`.
    pub fn handle(&self, cuda: &GstCuda) -> usize {
        // SAFETY: a live context (we hold a reference).
        unsafe { (cuda.context_get_handle)(self.0) as usize }
    }
}

/// A GstCudaStream of our own (1.24), dropped with it.
#[derive(Debug)]
pub struct Stream(StreamPtr);

// SAFETY: a GstMiniObject with an atomic reference count; the stream is used
// by the driver, which is thread-safe.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    /// The `CUstream`.
    pub fn handle(&self, cuda: &GstCuda) -> usize {
        match cuda.stream_get_handle {
            // SAFETY: a live stream (we hold a reference).
            Some(get) => unsafe { get(self.0) as usize },
            None => 0,
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Ok(cuda) = GstCuda::get()
            && let Some(unref) = cuda.stream_unref
        {
            // SAFETY: we own one reference, given up once.
            unsafe { unref(self.0) };
        }
    }
}

/// What an element holds of CUDA: the shared context once there is one.
#[derive(Debug, Default)]
pub struct ElementCuda {
    context: Option<SharedContext>,
}

impl ElementCuda {
    /// Makes sure `shared` has a context for `element` on `device_id` (-1:
    /// any): the one a neighbour or the application shares, else a new one,
    /// announced; returns its `CUcontext`. The lock is not held while
    /// GStreamer asks around: it calls back into the element's
    /// `set_context` and answers queries, which take it.
    pub fn ensure(
        shared: &Mutex<ElementCuda>,
        element: &gst::Element,
        device_id: i32,
    ) -> Result<usize, String> {
        let cuda = GstCuda::get().map_err(str::to_owned)?;
        if let Some(context) = &lock(shared).context {
            return Ok(context.handle(cuda));
        }
        let mut ptr = ptr::null_mut();
        // SAFETY: a live element; `ptr` receives a context with a reference
        // that is ours.
        let ok = unsafe { (cuda.ensure_element_context)(element.as_ptr(), device_id, &mut ptr) };
        if ok == 0 || ptr.is_null() {
            return Err(format!("no CUDA context for device {device_id}"));
        }
        let found = SharedContext(ptr);
        let mut held = lock(shared);
        // A context given meanwhile (set_context) stays; `found` is dropped.
        let context = held.context.get_or_insert(found);
        Ok(context.handle(cuda))
    }

    /// `ElementImpl::set_context`: takes a context the application or a
    /// neighbour gives.
    pub fn set_context(&mut self, element: &gst::Element, context: &gst::Context, device_id: i32) {
        let Ok(cuda) = GstCuda::get() else { return };
        let mut ptr = self.context.as_ref().map_or(ptr::null_mut(), |c| c.0);
        // SAFETY: live element and context; `ptr` as in `ensure`.
        unsafe {
            (cuda.handle_set_context)(element.as_ptr(), context.as_ptr().cast_mut(), device_id, &mut ptr)
        };
        if self.context.is_none() && !ptr.is_null() {
            self.context = Some(SharedContext(ptr));
        }
    }

    /// A context query of a neighbour: answered with ours, if we have one.
    pub fn answer_query(&self, element: &gst::Element, query: &mut gst::QueryRef) -> bool {
        let (Ok(cuda), Some(context)) = (GstCuda::get(), &self.context) else {
            return false;
        };
        // SAFETY: live element, query and context.
        unsafe { (cuda.handle_context_query)(element.as_ptr(), query.as_mut_ptr(), context.0) != 0 }
    }

    /// The context, once there is one.
    pub fn context(&self) -> Option<&SharedContext> {
        self.context.as_ref()
    }

    /// Drops the context (at stop).
    pub fn clear(&mut self) {
        self.context = None;
    }
}

/// A new stream on `context` (1.24), for the frames the source hands out.
pub fn new_stream(cuda: &GstCuda, context: &SharedContext) -> Option<(Stream, usize)> {
    let (new, handle) = (cuda.stream_new?, cuda.stream_get_handle?);
    // SAFETY: a live context; the stream is ours until dropped.
    let stream = unsafe { new(context.0) };
    if stream.is_null() {
        return None;
    }
    // SAFETY: a live stream.
    let cu_stream = unsafe { handle(stream) } as usize;
    Some((Stream(stream), cu_stream))
}

/// The device address of each plane of `lease`, in the layout's order.
fn device_planes(lease: &FrameLease) -> Result<Vec<(u64, usize)>, String> {
    (0..lease.layout().planes().len())
        .map(|p| {
            let view = lease.plane(p);
            match view.ptr {
                PlanePtr::Device(address) => Ok((address, view.pitch)),
                PlanePtr::Host(_) => Err("the frame is not in CUDA memory".to_owned()),
            }
        })
        .collect()
}

/// Hands `lease` out in place, as GstCudaMemory whose free releases it
/// (1.24 and later); the frame's writes are ordered on `stream`.
pub fn wrap_lease(
    cuda: &GstCuda,
    context: &SharedContext,
    stream: &Stream,
    lease: FrameLease,
    format: gst_video::VideoFormat,
) -> Result<gst::Buffer, String> {
    let alloc_wrapped = cuda
        .allocator_alloc_wrapped
        .ok_or("GStreamer cannot wrap memory before 1.24")?;
    let planes = device_planes(&lease)?;
    let base = planes[0].0;
    let layout = lease.layout().clone();
    let mut offsets = Vec::with_capacity(planes.len());
    let mut strides = Vec::with_capacity(planes.len());
    let mut end = 0usize;
    for (plane, (address, pitch)) in layout.planes().iter().zip(&planes) {
        let offset = address
            .checked_sub(base)
            .ok_or("the frame's planes are not in ascending order in one allocation")?
            as usize;
        offsets.push(offset);
        strides.push(i32::try_from(*pitch).map_err(|_| "pitch out of range")?);
        end = end.max(offset + pitch * (plane.rows - 1) + plane.row_bytes);
    }
    let info = gst_video::VideoInfo::builder(format, layout.width(), layout.height())
        .offset(&offsets)
        .stride(&strides)
        .size(end)
        .build()
        .map_err(|e| format!("no video info for the slot: {e}"))?;
    let lease = Box::into_raw(Box::new(lease));
    let info_ptr: *const gst_video::ffi::GstVideoInfo = info.to_glib_none().0;
    // SAFETY: a live context and stream; `info` describes exactly the
    // memory at `base`, which stays mapped while the lease lives; the lease
    // is released by `release_lease` when GStreamer frees the memory.
    let memory = unsafe {
        alloc_wrapped(
            ptr::null_mut(),
            context.0,
            stream.0,
            info_ptr,
            base,
            lease.cast(),
            Some(release_lease),
        )
    };
    if memory.is_null() {
        // SAFETY: not handed to GStreamer: ours to drop.
        drop(unsafe { Box::from_raw(lease) });
        return Err("GStreamer could not wrap the slot as CUDA memory".to_owned());
    }
    let mut buffer = gst::Buffer::new();
    {
        let buffer = buffer.get_mut().expect("a new buffer is writable");
        // SAFETY: alloc_wrapped returned a new memory we own.
        buffer.append_memory(unsafe { gst::Memory::from_glib_full(memory) });
        gst_video::VideoMeta::add_full(
            buffer,
            gst_video::VideoFrameFlags::empty(),
            format,
            layout.width(),
            layout.height(),
            &offsets,
            &strides,
        )
        .map_err(|e| format!("no video meta: {e}"))?;
    }
    Ok(buffer)
}

unsafe extern "C" fn release_lease(data: gst::glib::ffi::gpointer) {
    // SAFETY: `data` is the Box made in `wrap_lease`, given back once.
    drop(unsafe { Box::from_raw(data.cast::<FrameLease>()) });
}

/// A mapped video frame of CUDA memory: each plane's device address and
/// stride, unmapped on drop.
pub struct DeviceFrame {
    frame: gst_video::ffi::GstVideoFrame,
}

impl DeviceFrame {
    /// Maps `buffer` (of `info`) for `flags` (GST_MAP_READ or WRITE) as
    /// device memory; None when it is not GstCudaMemory.
    pub fn map(
        cuda: &GstCuda,
        buffer: &gst::BufferRef,
        info: &gst_video::VideoInfo,
        write: bool,
    ) -> Result<Option<DeviceFrame>, String> {
        if buffer.n_memory() == 0 {
            return Err("an empty buffer".to_owned());
        }
        let memory = buffer.peek_memory(0);
        // SAFETY: a live memory of the buffer.
        if unsafe { (cuda.is_cuda_memory)(memory.as_mut_ptr()) } == 0 {
            return Ok(None);
        }
        if !write && let Some(sync) = cuda.memory_sync {
            // SAFETY: a live GstCudaMemory: waits for the stream that wrote it.
            unsafe { sync(memory.as_mut_ptr()) };
        }
        let access = if write {
            gst::ffi::GST_MAP_WRITE
        } else {
            gst::ffi::GST_MAP_READ
        };
        let mut frame = MaybeUninit::<gst_video::ffi::GstVideoFrame>::zeroed();
        // SAFETY: a live buffer and info; `frame` is written by the call and
        // unmapped on drop when it succeeds.
        let mapped = unsafe {
            gst_video::ffi::gst_video_frame_map(
                frame.as_mut_ptr(),
                info.to_glib_none().0 as *mut _,
                buffer.as_mut_ptr(),
                access | MAP_CUDA,
            )
        };
        if mapped == 0 {
            return Err("cannot map the buffer's CUDA memory".to_owned());
        }
        // SAFETY: initialised by the successful map.
        let frame = unsafe { frame.assume_init() };
        Ok(Some(DeviceFrame { frame }))
    }

    /// Plane `p`'s device address and stride.
    pub fn plane(&self, p: usize) -> (u64, usize) {
        (
            self.frame.data[p] as u64,
            usize::try_from(self.frame.info.stride[p]).unwrap_or(0),
        )
    }
}

impl Drop for DeviceFrame {
    fn drop(&mut self) {
        // SAFETY: mapped by `map`, unmapped once.
        unsafe { gst_video::ffi::gst_video_frame_unmap(&mut self.frame) };
    }
}

/// Copies `lease` device to device into `frame` (a buffer of GStreamer's
/// CUDA pool, mapped for writing), on the null stream of `context`'s
/// context, and waits for it: GStreamer 1.22's way, which cannot wrap.
pub fn copy_lease(
    cuda: &GstCuda,
    context: &SharedContext,
    lease: &FrameLease,
    frame: &DeviceFrame,
) -> Result<(), String> {
    use cudarc::driver::sys;
    let planes = device_planes(lease)?;
    let ctx = context.handle(cuda) as sys::CUcontext;
    // SAFETY: a live context, pushed and popped around the copies.
    let pushed = unsafe { sys::cuCtxPushCurrent_v2(ctx) };
    if pushed != sys::CUresult::CUDA_SUCCESS {
        return Err(format!("cuCtxPushCurrent failed: {pushed:?}"));
    }
    let mut result = sys::CUresult::CUDA_SUCCESS;
    for (p, (plane, (src, pitch))) in lease.layout().planes().iter().zip(&planes).enumerate() {
        let (dst, dst_pitch) = frame.plane(p);
        let copy = sys::CUDA_MEMCPY2D {
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcDevice: *src,
            srcPitch: *pitch,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstDevice: dst,
            dstPitch: dst_pitch,
            WidthInBytes: plane.row_bytes,
            Height: plane.rows,
            // SAFETY: the remaining fields are plain integers and pointers
            // for which zero means "unused".
            ..unsafe { std::mem::zeroed() }
        };
        // SAFETY: both ranges are device memory of this context, each at
        // least pitch × rows bytes (the slot's layout; the pool's frame).
        result = unsafe { sys::cuMemcpy2DAsync_v2(&copy, ptr::null_mut()) };
        if result != sys::CUresult::CUDA_SUCCESS {
            break;
        }
    }
    if result == sys::CUresult::CUDA_SUCCESS {
        // SAFETY: the null stream of the current context.
        result = unsafe { sys::cuStreamSynchronize(ptr::null_mut()) };
    }
    let mut popped: sys::CUcontext = ptr::null_mut();
    // SAFETY: pops what was pushed above.
    unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
    match result {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        e => Err(format!(
            "copying the frame into GStreamer's CUDA memory failed: {e:?}"
        )),
    }
}
