//! The frames the publisher sends: `pool` packed pattern frames, made once
//! before measuring, in host memory or (`--memory cuda`) device memory.

use cudarc::driver::CudaSlice;
use cuframes::{DevicePlane, HostPlane, MemoryKind, Result};

use crate::frames::Geometry;
use crate::gpu::Gpu;
use crate::plan::Plan;

pub enum Source {
    Host(Vec<Vec<u8>>),
    Cuda {
        gpu: Gpu,
        frames: Vec<CudaSlice<u8>>,
        /// Host staging for the baselines' device → host copy.
        staging: Vec<u8>,
    },
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Host(frames) => write!(f, "Source::Host({} frames)", frames.len()),
            Source::Cuda { frames, .. } => write!(f, "Source::Cuda({} frames)", frames.len()),
        }
    }
}

impl Source {
    pub fn make(plan: &Plan) -> Result<Source> {
        let gpu = match plan.memory {
            MemoryKind::Cuda => Some(Gpu::open()?),
            MemoryKind::Host => None,
        };
        let host: Vec<Vec<u8>> = (0..plan.pool()).map(|i| plan.geometry.make_packed(i)).collect();
        match gpu {
            None => Ok(Source::Host(host)),
            Some(gpu) => {
                let frames = host.iter().map(|f| gpu.upload(f)).collect::<Result<Vec<_>>>()?;
                Ok(Source::Cuda {
                    gpu,
                    frames,
                    staging: vec![0; plan.geometry.packed_size],
                })
            }
        }
    }
}

/// The planes of packed host `frame`, as a publish takes them.
pub fn host_planes<'a>(g: &Geometry, frame: &'a [u8]) -> Vec<HostPlane<'a>> {
    g.packed
        .iter()
        .map(|p| HostPlane {
            data: &frame[p.offset..],
            pitch: p.row_bytes,
        })
        .collect()
}

/// The planes of packed device `frame`, as a device publish takes them.
pub fn device_planes(g: &Geometry, gpu: &Gpu, frame: &CudaSlice<u8>) -> Vec<DevicePlane> {
    let base = gpu.ptr(frame);
    g.packed
        .iter()
        .map(|p| DevicePlane {
            ptr: base + p.offset as u64,
            pitch: p.row_bytes,
        })
        .collect()
}
