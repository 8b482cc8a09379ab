//! Checking received frames against the pattern, with the CPU time of
//! whole-frame checks booked apart (they are not the transport's cost).

use cudarc::driver::CudaSlice;
use cuframes::Result;

use super::{Setup, Tally};
use crate::clock::thread_cpu_ns;
use crate::frames::Depth;

/// Runs `check` (a whole-frame check) and books its CPU time apart.
pub fn timed<T>(tally: &mut Tally, depth: Depth, check: impl FnOnce() -> T) -> T {
    if depth != Depth::Whole {
        return check();
    }
    let before = thread_cpu_ns();
    let out = check();
    tally.verify_cpu += thread_cpu_ns().saturating_sub(before);
    out
}

/// Checks a packed frame: in `host`, or (CUDA) copied back from `device`
/// through `check_buf`.
pub fn check_packed(
    s: &mut Setup,
    tally: &mut Tally,
    seq: u64,
    host: &[u8],
    device: Option<&CudaSlice<u8>>,
    check_buf: &mut Vec<u8>,
) -> Result<()> {
    let Some(depth) = s.checker.depth(seq) else {
        return Ok(());
    };
    let g = &s.geometry;
    let geometry = |p: usize| (g.packed[p].row_bytes, g.packed[p].rows);
    let planes = g.packed.len();
    match (&s.gpu, device) {
        // Device frames: only whole-frame checks.
        (Some(_), Some(_)) if depth == Depth::Rows => Ok(()),
        (Some(gpu), Some(device)) => timed(tally, depth, || -> Result<()> {
            check_buf.resize(g.packed_size, 0);
            gpu.download(device, check_buf)?;
            let frame = check_buf.as_slice();
            s.checker.check(
                seq,
                depth,
                planes,
                geometry,
                |p| g.packed_plane(frame, p),
                || true,
            );
            Ok(())
        }),
        _ => {
            timed(tally, depth, || {
                s.checker
                    .check(seq, depth, planes, geometry, |p| g.packed_plane(host, p), || true)
            });
            Ok(())
        }
    }
}
