//! The few GstCuda calls the elements make, bound by hand and looked up at
//! run time.
//!
//! Why by hand: the crates.io `gstreamer-cuda` crates are empty placeholders.
//! Why at run time: GstCuda is unstable API that changed between 1.22 and
//! 1.24 (`gst_cuda_allocator_alloc` gained a stream argument, so the same
//! symbol takes other arguments), wrapping foreign device memory came only in
//! 1.24, and a plugin that linked `libgstcuda-1.0` would not load at all on a
//! system without it, host memory included. So nothing here is linked:
//! [`GstCuda::get`] opens the library once, and each call is present or not.
//! The calls used are the same on 1.22-1.28 unless marked "1.24".

use std::ffi::{c_int, c_uint, c_void};
use std::sync::OnceLock;

use gst::ffi::{GstContext, GstElement, GstMemory, GstQuery};
use gst::glib::ffi::{GDestroyNotify, gboolean, gpointer};
use gst_video::ffi::GstVideoInfo;

/// `GstCudaContext *`, a GstObject.
pub type ContextPtr = *mut gst::ffi::GstObject;
/// `GstCudaStream *` (1.24), a mini object.
pub type StreamPtr = *mut c_void;
/// `CUdeviceptr`.
pub type DevicePtr = u64;

/// `GST_MAP_CUDA`: map the device memory, not a host copy.
pub const MAP_CUDA: c_uint = gst::ffi::GST_MAP_FLAG_LAST << 1;
/// `GST_CAPS_FEATURE_MEMORY_CUDA_MEMORY`.
pub const CAPS_FEATURE_CUDA_MEMORY: &str = "memory:CUDAMemory";

type AllocWrapped = unsafe extern "C" fn(
    allocator: *mut c_void,
    context: ContextPtr,
    stream: StreamPtr,
    info: *const GstVideoInfo,
    dev_ptr: DevicePtr,
    user_data: gpointer,
    notify: GDestroyNotify,
) -> *mut GstMemory;

/// The resolved calls.
#[derive(Debug)]
pub struct GstCuda {
    _library: libloading::Library,
    pub context_get_handle: unsafe extern "C" fn(ctx: ContextPtr) -> *mut c_void,
    pub is_cuda_memory: unsafe extern "C" fn(mem: *mut GstMemory) -> gboolean,
    pub buffer_pool_new: unsafe extern "C" fn(ctx: ContextPtr) -> *mut gst::ffi::GstBufferPool,
    pub ensure_element_context:
        unsafe extern "C" fn(element: *mut GstElement, device_id: c_int, ctx: *mut ContextPtr) -> gboolean,
    pub handle_set_context: unsafe extern "C" fn(
        element: *mut GstElement,
        context: *mut GstContext,
        device_id: c_int,
        ctx: *mut ContextPtr,
    ) -> gboolean,
    pub handle_context_query:
        unsafe extern "C" fn(element: *mut GstElement, query: *mut GstQuery, ctx: ContextPtr) -> gboolean,
    pub memory_init_once: unsafe extern "C" fn(),
    /// 1.24: device memory of our own, freed by `notify`, as GstCudaMemory.
    pub allocator_alloc_wrapped: Option<AllocWrapped>,
    /// 1.24: the CUstream of a GstCudaStream.
    pub stream_get_handle: Option<unsafe extern "C" fn(stream: StreamPtr) -> *mut c_void>,
    /// 1.24: waits for what a GstCudaMemory's stream has queued.
    pub memory_sync: Option<unsafe extern "C" fn(mem: *mut GstMemory)>,
    /// 1.24: a new (non-blocking) stream of a context.
    pub stream_new: Option<unsafe extern "C" fn(ctx: ContextPtr) -> StreamPtr>,
    /// 1.24: drops a stream reference.
    pub stream_unref: Option<unsafe extern "C" fn(stream: StreamPtr)>,
}

// SAFETY: function pointers into a library that stays loaded for the
// process's life (held in a static); calling them is what needs care.
unsafe impl Send for GstCuda {}
// SAFETY: as above; the struct is never mutated after it is made.
unsafe impl Sync for GstCuda {}

/// The library's file name (the Debian and upstream SONAME).
const LIBRARY: &str = "libgstcuda-1.0.so.0";

impl GstCuda {
    /// The calls, or why there are none (no libgstcuda, or one without a
    /// 1.22 call): asked once per process.
    pub fn get() -> Result<&'static GstCuda, &'static str> {
        static CUDA: OnceLock<Result<GstCuda, String>> = OnceLock::new();
        CUDA.get_or_init(Self::load).as_ref().map_err(String::as_str)
    }

    /// Whether memory like GStreamer's own CUDA elements can be wrapped in
    /// place (1.24 and later), so frames reach them without a copy.
    pub fn wraps(&self) -> bool {
        self.allocator_alloc_wrapped.is_some()
            && self.stream_new.is_some()
            && self.stream_get_handle.is_some()
    }

    fn load() -> Result<GstCuda, String> {
        // SAFETY: loading GStreamer's own library runs only its constructors,
        // which GStreamer's plugins rely on being safe to run in any process.
        let library = unsafe { libloading::Library::new(LIBRARY) }.map_err(|e| {
            format!("{LIBRARY} could not be loaded ({e}); CUDA memory needs gst-plugins-bad's CUDA library")
        })?;
        /// A call that must be there (1.22 and later).
        fn required<T: Copy>(library: &libloading::Library, name: &str) -> Result<T, String> {
            // SAFETY: the type is this module's declaration of that symbol,
            // taken from GStreamer's headers for every version it names.
            unsafe { library.get::<T>(name.as_bytes()) }
                .map(|symbol| *symbol)
                .map_err(|_| format!("{LIBRARY} has no {name}: GStreamer 1.22 or later is needed"))
        }
        /// A call of 1.24 and later.
        fn optional<T: Copy>(library: &libloading::Library, name: &str) -> Option<T> {
            // SAFETY: as in `required`.
            unsafe { library.get::<T>(name.as_bytes()) }
                .ok()
                .map(|symbol| *symbol)
        }
        let load_driver: unsafe extern "C" fn() -> gboolean = required(&library, "gst_cuda_load_library")?;
        // GstCuda calls the driver through a table it fills here; nvcodec's
        // plugin fills it when it loads, but a pipeline without nvcodec's
        // elements (cuframessrc ! fakesink) would call into an empty table.
        // SAFETY: no arguments; idempotent (GStreamer loads once).
        if unsafe { load_driver() } == 0 {
            return Err(
                "GStreamer could not load the CUDA driver (libcuda.so.1): no CUDA memory here".to_owned(),
            );
        }
        let cuda = GstCuda {
            context_get_handle: required(&library, "gst_cuda_context_get_handle")?,
            is_cuda_memory: required(&library, "gst_is_cuda_memory")?,
            buffer_pool_new: required(&library, "gst_cuda_buffer_pool_new")?,
            ensure_element_context: required(&library, "gst_cuda_ensure_element_context")?,
            handle_set_context: required(&library, "gst_cuda_handle_set_context")?,
            handle_context_query: required(&library, "gst_cuda_handle_context_query")?,
            memory_init_once: required(&library, "gst_cuda_memory_init_once")?,
            allocator_alloc_wrapped: optional(&library, "gst_cuda_allocator_alloc_wrapped"),
            stream_get_handle: optional(&library, "gst_cuda_stream_get_handle"),
            memory_sync: optional(&library, "gst_cuda_memory_sync"),
            stream_new: optional(&library, "gst_cuda_stream_new"),
            stream_unref: optional(&library, "gst_cuda_stream_unref"),
            _library: library,
        };
        // SAFETY: registers the allocator type; idempotent, no arguments.
        unsafe { (cuda.memory_init_once)() };
        Ok(cuda)
    }
}
