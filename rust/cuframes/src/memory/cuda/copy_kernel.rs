//! The publisher's copy of a frame into a slot as one launch of a small copy
//! kernel, all planes at once, instead of one driver copy call per plane.
//! Queuing a launch costs the CPU ~3.3 µs where a linear copy call costs
//! ~6.3 µs and a 1080p frame's two 2D calls ~8 µs, and the GPU moves a 4K
//! frame sooner (run 2026-12-06e in bench/runs/README.md, docs/benchmarks.md).
//!
//! The kernel is PTX, compiled by the driver at the first frame a pool may
//! copy with it (the driver caches the result on disk). The pool decides
//! which frames it may copy (`pool/copies.rs`): a kernel that reads memory its
//! context cannot reach ends that context, so only sources the driver says
//! this context's kernels can read go through it.

use std::ffi::{CString, c_void};

use cudarc::driver::sys;

use super::driver::{CUdeviceptr, CUstream, check, device_attribute};
use crate::error::Result;

/// Planes one launch copies; a frame with more goes through the copy calls.
pub(crate) const MAX_PLANES: usize = 4;

/// Bytes one thread moves: one 128-bit load and store.
const UNIT: usize = 16;

const THREADS_PER_BLOCK: u32 = 256;

/// Enough blocks to keep every SM busy; each thread loops over the rest.
const BLOCKS_PER_SM: u32 = 8;

/// At most this many units a plane, so the kernel's 32-bit index and its
/// stride never wrap (2^31 units is 32 GiB, no frame's plane).
const MAX_UNITS: u64 = 1 << 31;

const ENTRY: &str = "copy_planes";

/// One plane of a launch: `rows` rows of `units` 16-byte units from `src`
/// (pitch `src_pitch`) to `dst` (pitch `dst_pitch`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct KernelPlane {
    dst: u64,
    src: u64,
    dst_pitch: u64,
    src_pitch: u64,
    units: u32,
    rows: u32,
}

impl KernelPlane {
    /// The plane, or None where the kernel cannot copy it: an address,
    /// pitch or row length that is not a multiple of 16 bytes, or a plane
    /// too large for its index.
    pub(crate) fn new(
        dst: CUdeviceptr,
        src: CUdeviceptr,
        dst_pitch: usize,
        src_pitch: usize,
        row_bytes: usize,
        rows: usize,
    ) -> Option<KernelPlane> {
        let aligned = [dst as usize, src as usize, dst_pitch, src_pitch, row_bytes]
            .iter()
            .all(|v| v % UNIT == 0);
        let units = row_bytes / UNIT;
        if !aligned || (units as u64).checked_mul(rows as u64)? > MAX_UNITS {
            return None;
        }
        Some(KernelPlane {
            dst,
            src,
            dst_pitch: dst_pitch as u64,
            src_pitch: src_pitch as u64,
            units: units as u32,
            rows: rows as u32,
        })
    }

    fn units_total(&self) -> u64 {
        u64::from(self.units) * u64::from(self.rows)
    }
}

/// The kernel, loaded in one context.
#[derive(Debug)]
pub(crate) struct CopyKernel {
    module: sys::CUmodule,
    function: sys::CUfunction,
    max_blocks: u32,
}

// SAFETY: module and function handles are process-wide and usable from any
// thread with their context current, which every caller makes it.
unsafe impl Send for CopyKernel {}
// SAFETY: as above; shared references only pass the handles to the driver.
unsafe impl Sync for CopyKernel {}

impl CopyKernel {
    /// Compiles and loads the kernel in the current context, on `device`.
    pub(crate) fn load(device: sys::CUdevice) -> Result<CopyKernel> {
        let sms = device_attribute(
            device,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            "MULTIPROCESSOR_COUNT",
        )?;
        let ptx = CString::new(ptx()).expect("the PTX has no NUL");
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: a context is current; the image is a NUL-terminated PTX
        // string that lives through the call; valid out-pointer.
        let result = unsafe { sys::cuModuleLoadData(&mut module, ptx.as_ptr().cast()) };
        check(result, "cuModuleLoadData(copy kernel)")?;
        let name = CString::new(ENTRY).expect("no NUL");
        let mut function: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: `module` was loaded just above; NUL-terminated name.
        let result = unsafe { sys::cuModuleGetFunction(&mut function, module, name.as_ptr()) };
        if let Err(e) = check(result, "cuModuleGetFunction(copy kernel)") {
            // SAFETY: loaded above, unloaded once.
            let _ = unsafe { sys::cuModuleUnload(module) };
            return Err(e);
        }
        Ok(CopyKernel {
            module,
            function,
            max_blocks: (sms.max(1) as u32) * BLOCKS_PER_SM,
        })
    }

    /// Queues the copy of `planes` (1 to MAX_PLANES) on `stream`. The caller
    /// guarantees that every source range is readable by this context's
    /// kernels and every destination range is a slot of this context.
    pub(crate) fn launch(&self, planes: &[KernelPlane], stream: CUstream) -> Result<()> {
        self.launch_blocks_of(THREADS_PER_BLOCK, planes, stream)
    }

    /// A launch the driver refuses, as `launch` but with blocks of more
    /// threads than any GPU allows (1,024): for the test hook that plays a
    /// failed launch (`CUFRAMES_TEST_FAIL_COPY_KERNEL_AT`).
    pub(crate) fn launch_refused(&self, planes: &[KernelPlane], stream: CUstream) -> Result<()> {
        self.launch_blocks_of(THREADS_PER_BLOCK * 16, planes, stream)
    }

    fn launch_blocks_of(
        &self,
        threads_per_block: u32,
        planes: &[KernelPlane],
        stream: CUstream,
    ) -> Result<()> {
        assert!(
            (1..=MAX_PLANES).contains(&planes.len()),
            "1 to {MAX_PLANES} planes a launch"
        );
        let mut all = [KernelPlane::default(); MAX_PLANES];
        all[..planes.len()].copy_from_slice(planes);
        let most = planes.iter().map(KernelPlane::units_total).max().unwrap_or(0);
        let blocks = most
            .div_ceil(u64::from(threads_per_block))
            .clamp(1, u64::from(self.max_blocks)) as u32;
        // One pointer a parameter, in the kernel's order: d, s, dp, sp, u, r
        // for each plane (a plane of 0 rows copies nothing).
        let mut params = [std::ptr::null_mut::<c_void>(); 6 * MAX_PLANES];
        for (plane, slots) in all.iter_mut().zip(params.chunks_exact_mut(6)) {
            slots.copy_from_slice(&[
                (&raw mut plane.dst).cast::<c_void>(),
                (&raw mut plane.src).cast(),
                (&raw mut plane.dst_pitch).cast(),
                (&raw mut plane.src_pitch).cast(),
                (&raw mut plane.units).cast(),
                (&raw mut plane.rows).cast(),
            ]);
        }
        // SAFETY: `function` is the kernel of `ptx()`, whose parameters are
        // exactly the 24 above with their types (u64 x4, u32 x2 a plane),
        // each pointing into `all`, which outlives the call (the driver
        // copies the values when it queues the launch). The caller
        // guarantees the ranges (see above); stream is live or null.
        let result = unsafe {
            sys::cuLaunchKernel(
                self.function,
                blocks,
                1,
                1,
                threads_per_block,
                1,
                1,
                0,
                stream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check(result, "cuLaunchKernel(copy kernel)")
    }

    /// Unloads the module (its context current, no launch of it pending).
    pub(crate) fn unload(&self) {
        // SAFETY: loaded by `load`, unloaded once: by the pool's Drop, or by
        // `launch_copy` after a failed launch, which then marks the kernel
        // unavailable so Drop does not unload it again.
        let _ = unsafe { sys::cuModuleUnload(self.module) };
    }
}

/// The kernel's PTX. Each thread takes units `i, i + stride, …` of each
/// plane in turn (grid-stride): row `i / units`, unit `i % units`, a
/// non-coherent 128-bit load from the source and a store to the slot. PTX
/// 6.0 for sm_50 and later: the driver compiles it for the GPU at hand.
fn ptx() -> String {
    let mut params = Vec::with_capacity(MAX_PLANES);
    let mut body = String::new();
    for k in 0..MAX_PLANES {
        params.push(
            "  .param .u64 d~, .param .u64 s~, .param .u64 dp~, .param .u64 sp~, .param .u32 u~, .param .u32 r~"
                .replace('~', &k.to_string()),
        );
        body.push_str(&PLANE_PTX.replace('~', &k.to_string()));
    }
    format!(
        ".version 6.0\n.target sm_50\n.address_size 64\n.visible .entry {ENTRY}(\n{}\n)\n{{\n{PROLOGUE_PTX}{body}    ret;\n}}\n",
        params.join(",\n")
    )
}

/// %r5: this thread's first index; %r6: the stride (all threads).
const PROLOGUE_PTX: &str = "    .reg .pred %p;
    .reg .b32 %r<16>;
    .reg .b64 %rd<9>;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mad.lo.u32 %r5, %r1, %r2, %r3;
    mul.lo.u32 %r6, %r4, %r2;
";

/// One plane's loop, `~` its number.
const PLANE_PTX: &str = "    ld.param.u64 %rd1, [d~];
    ld.param.u64 %rd2, [s~];
    ld.param.u64 %rd3, [dp~];
    ld.param.u64 %rd4, [sp~];
    ld.param.u32 %r7, [u~];
    ld.param.u32 %r8, [r~];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mul.lo.u32 %r9, %r7, %r8;
    mov.u32 %r10, %r5;
LOOP~:
    setp.ge.u32 %p, %r10, %r9;
    @%p bra DONE~;
    div.u32 %r11, %r10, %r7;
    mul.lo.u32 %r12, %r11, %r7;
    sub.u32 %r12, %r10, %r12;
    cvt.u64.u32 %rd5, %r11;
    cvt.u64.u32 %rd6, %r12;
    shl.b64 %rd6, %rd6, 4;
    mad.lo.u64 %rd7, %rd5, %rd4, %rd2;
    add.u64 %rd7, %rd7, %rd6;
    ld.global.nc.v4.u32 {%r0, %r13, %r14, %r15}, [%rd7];
    mad.lo.u64 %rd8, %rd5, %rd3, %rd1;
    add.u64 %rd8, %rd8, %rd6;
    st.global.v4.u32 [%rd8], {%r0, %r13, %r14, %r15};
    add.u32 %r10, %r10, %r6;
    bra LOOP~;
DONE~:
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planes_the_kernel_cannot_copy_are_refused() {
        let ok = KernelPlane::new(0x1000, 0x2000, 4096, 3840, 3840, 2160).unwrap();
        assert_eq!((ok.units, ok.rows), (240, 2160));
        // Each of address, pitch and row length off a 16-byte multiple.
        assert!(KernelPlane::new(0x1008, 0x2000, 4096, 3840, 3840, 2160).is_none());
        assert!(KernelPlane::new(0x1000, 0x2004, 4096, 3840, 3840, 2160).is_none());
        assert!(KernelPlane::new(0x1000, 0x2000, 4100, 3840, 3840, 2160).is_none());
        assert!(KernelPlane::new(0x1000, 0x2000, 4096, 3844, 3840, 2160).is_none());
        assert!(KernelPlane::new(0x1000, 0x2000, 4096, 3840, 632, 2160).is_none());
        // A plane past the kernel's 32-bit index.
        assert!(KernelPlane::new(0, 0, 1 << 20, 1 << 20, 1 << 20, 1 << 20).is_none());
        assert!(KernelPlane::new(0, 0, 16, 16, 16, 1 << 31).is_some());
        assert!(KernelPlane::new(0, 0, 16, 16, 16, (1 << 31) + 1).is_none());
    }

    #[test]
    fn the_ptx_declares_every_plane_once() {
        let ptx = ptx();
        assert!(ptx.contains(".visible .entry copy_planes("));
        for k in 0..MAX_PLANES {
            for name in ["d", "s", "dp", "sp"] {
                assert_eq!(
                    ptx.matches(&format!(".param .u64 {name}{k},")).count(),
                    1,
                    "{name}{k}"
                );
            }
            assert_eq!(ptx.matches(&format!("LOOP{k}:")).count(), 1);
            assert_eq!(ptx.matches(&format!("DONE{k}:")).count(), 1);
        }
        assert!(!ptx.contains('~'));
        assert_eq!(ptx.matches("@%p bra DONE").count(), MAX_PLANES);
        // The last parameter has no comma after it.
        assert!(ptx.contains(&format!(".param .u32 r{}\n)", MAX_PLANES - 1)));
    }
}
