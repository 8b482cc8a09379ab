//! CUDA for `--memory cuda`, through cudarc's safe API (dynamically loaded:
//! builds without a GPU or toolkit). Every entry point checks first that a
//! driver and a device are usable, so a machine without a GPU gets a clear
//! error instead of cudarc's panic on a missing library.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use cuframes::{Error, ErrorKind, Result};

/// Device 0's primary context, bound to the calling thread, and its
/// default (legacy) stream: the context and stream the cuframes library
/// uses when given none, so device pointers and ordering agree.
#[derive(Debug)]
pub struct Gpu {
    _ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
}

fn cuda_error(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::new(ErrorKind::Cuda, format!("{what}: {e:?}"))
}

impl Gpu {
    pub fn open() -> Result<Gpu> {
        if let Some(why) = cuframes::cuda_unavailable_reason() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("--memory cuda: CUDA is not available: {why}"),
            ));
        }
        let ctx = CudaContext::new(0).map_err(|e| cuda_error("creating a CUDA context on device 0", e))?;
        let stream = ctx.default_stream();
        Ok(Gpu { _ctx: ctx, stream })
    }

    /// A device copy of `bytes`.
    pub fn upload(&self, bytes: &[u8]) -> Result<CudaSlice<u8>> {
        let slice = self
            .stream
            .clone_htod(bytes)
            .map_err(|e| cuda_error("cuMemcpyHtoD", e))?;
        self.sync()?;
        Ok(slice)
    }

    /// `len` bytes of device memory.
    pub fn alloc(&self, len: usize) -> Result<CudaSlice<u8>> {
        self.stream
            .alloc_zeros::<u8>(len)
            .map_err(|e| cuda_error("cuMemAlloc", e))
    }

    /// Host → device into `dst` (returns once `src` may be reused).
    pub fn upload_into(&self, src: &[u8], dst: &mut CudaSlice<u8>) -> Result<()> {
        self.stream
            .memcpy_htod(src, dst)
            .map_err(|e| cuda_error("cuMemcpyHtoD", e))
    }

    /// Device → host, complete on return.
    pub fn download(&self, src: &CudaSlice<u8>, dst: &mut [u8]) -> Result<()> {
        self.stream
            .memcpy_dtoh(src, dst)
            .map_err(|e| cuda_error("cuMemcpyDtoH", e))?;
        self.sync()
    }

    /// Waits for everything queued on the stream.
    pub fn sync(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| cuda_error("cuStreamSynchronize", e))
    }

    /// Frames/s of `count` device-to-device copies of `frames` (round robin)
    /// into one scratch buffer, with nothing else going on: the GPU's bound
    /// on a publish that copies each frame into a slot.
    pub fn copy_rate(&self, frames: &[CudaSlice<u8>], count: usize) -> Result<f64> {
        let Some(first) = frames.first() else {
            return Ok(0.0);
        };
        let mut scratch = self.alloc(first.len())?;
        let copy = |src: &CudaSlice<u8>, dst: &mut CudaSlice<u8>| {
            self.stream
                .memcpy_dtod(src, dst)
                .map_err(|e| cuda_error("cuMemcpyDtoDAsync", e))
        };
        copy(first, &mut scratch)?;
        self.sync()?;
        let started = Instant::now();
        for i in 0..count {
            copy(&frames[i % frames.len()], &mut scratch)?;
        }
        self.sync()?;
        Ok(count as f64 / started.elapsed().as_secs_f64())
    }

    /// The `CUdeviceptr` of `slice`.
    pub fn ptr(&self, slice: &CudaSlice<u8>) -> u64 {
        slice.device_ptr(&self.stream).0
    }
}
