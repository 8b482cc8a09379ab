//! Test-only crash points: `CUFRAMES_TEST_ABORT_AT=<point>[:<n>]` makes the
//! process raise SIGKILL on itself the `n`-th time (default 1st) it reaches
//! `<point>`, so process tests can kill a publisher or subscriber at an exact
//! step of the handshake (`rust/cuframes-cli/tests/crash_matrix.rs`).
//!
//! The points (see `docs/reliability.md`):
//!
//! | Point | Side | Where |
//! |---|---|---|
//! | `sub-before-hello` | subscriber | connected, HELLO_REQ not sent |
//! | `sub-after-hello` | subscriber | HELLO_RESP received, SUBSCRIBE_REQ not sent |
//! | `sub-after-accept` | subscriber | SUBSCRIBE_RESP and descriptors received, no frame read |
//! | `sub-holding-lease` | subscriber | `next()` about to hand out a lease (never ACKed) |
//! | `pub-got-hello` | publisher | HELLO_REQ received, HELLO_RESP not sent |
//! | `pub-got-subscribe` | publisher | SUBSCRIBE_REQ received, SUBSCRIBE_RESP not sent |
//! | `pub-after-accept` | publisher | SUBSCRIBE_RESP and descriptors sent |
//! | `pub-mid-publish` | publisher | slot marked as being written, frame not committed |
//!
//! Unset (the normal case) it costs one load of a cached `None`. It can only
//! kill the process it is set for, which whoever sets its environment can
//! do anyway.
//!
//! `CUFRAMES_TEST_STALL_AT=<point>:<ms>` makes the process sleep that long
//! each time it reaches `<point>` instead: `sub-connected` (the end of
//! `Subscriber::connect`) then plays a consumer that is slow to start (its
//! first frames published meanwhile); `cuda-warm-up` (the start of the CUDA
//! context a subscriber makes while no publisher is there) plays a crowded
//! GPU, where that context takes long to make; `sub-context` (a handshake's
//! step between HELLO and SUBSCRIBE, where a subscriber of a CUDA publisher
//! makes its context) plays the same during a handshake, and stalls only the
//! first time it is reached, as a process makes its context once.
//!
//! `CUFRAMES_TEST_NO_STREAM_MEMOPS=1` makes a CUDA publisher in fd mode act as
//! on a GPU whose stream memory operations fail (D28): no fence array, a
//! synchronise before each frame is announced. The H200 supports them, so
//! only this reaches that path on a GPU. `CUFRAMES_TEST_NO_FD_SHARING=1`
//! makes the GPU look unable to share memory as file descriptors (as a MIG
//! instance or a GPU without VMM is): `cuda_share=fd` is refused, `auto`
//! falls back to IPC handles and says why. `CUFRAMES_TEST_NO_COPY_KERNEL=1`
//! makes a CUDA publisher copy every frame with the driver's copy calls, as
//! where its copy kernel does not load: the path before the kernel, for
//! tests and for benchmarks of the two side by side.
//! `CUFRAMES_TEST_FAIL_COPY_KERNEL_AT=<n>` makes a CUDA publisher's `n`-th
//! launch of its copy kernel one the driver refuses (a block larger than
//! any GPU allows), so the fallback to the copy calls runs on a GPU whose
//! launches never fail.

use std::sync::OnceLock;

/// Says once per process, through the library's log, which of these
/// switches are set: they are honoured in every build, because whoever can
/// set a process's environment can already kill it, slow it or LD_PRELOAD
/// it (none of them reaches past the process it is set for, D20), but a
/// production process that runs with one by accident should say so.
pub(crate) fn announce() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        for name in [
            ABORT_AT_ENV,
            STALL_AT_ENV,
            NO_STREAM_MEMOPS_ENV,
            NO_FD_SHARING_ENV,
            NO_COPY_KERNEL_ENV,
            FAIL_COPY_KERNEL_AT_ENV,
        ] {
            if let Ok(value) = std::env::var(name) {
                crate::log::warning!(
                    "{name}={value} is set: a test switch, which changes how this process behaves"
                );
            }
        }
    });
}
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable.
pub const ABORT_AT_ENV: &str = "CUFRAMES_TEST_ABORT_AT";

struct Target {
    point: String,
    nth: u64,
    reached: AtomicU64,
}

fn target() -> Option<&'static Target> {
    static TARGET: OnceLock<Option<Target>> = OnceLock::new();
    TARGET
        .get_or_init(|| {
            let value = std::env::var(ABORT_AT_ENV).ok()?;
            let (point, nth) = match value.split_once(':') {
                Some((p, n)) => (p, n.parse().ok()?),
                None => (value.as_str(), 1),
            };
            Some(Target {
                point: point.to_owned(),
                nth,
                reached: AtomicU64::new(0),
            })
        })
        .as_ref()
}

/// The environment variable of stalls.
pub const STALL_AT_ENV: &str = "CUFRAMES_TEST_STALL_AT";

fn stall() -> Option<&'static (String, std::time::Duration)> {
    static STALL: OnceLock<Option<(String, std::time::Duration)>> = OnceLock::new();
    STALL
        .get_or_init(|| {
            let value = std::env::var(STALL_AT_ENV).ok()?;
            let (point, ms) = value.split_once(':')?;
            Some((
                point.to_owned(),
                std::time::Duration::from_millis(ms.parse().ok()?),
            ))
        })
        .as_ref()
}

/// Sleeps when `point` is the configured stall point.
pub(crate) fn stall_at(point: &str) {
    if let Some((at, pause)) = stall()
        && at == point
    {
        std::thread::sleep(*pause);
    }
}

/// As [`stall_at`], but only the first time this process reaches `point`.
pub(crate) fn stall_at_first(point: &str) {
    static STALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if stall().is_some_and(|(at, _)| at == point) && !STALLED.swap(true, Ordering::SeqCst) {
        stall_at(point);
    }
}

/// Raises SIGKILL when `point` is the configured point, the n-th time.
pub(crate) fn abort_at(point: &str) {
    if let Some(t) = target()
        && t.point == point
        && t.reached.fetch_add(1, Ordering::Relaxed) + 1 == t.nth
    {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}

/// The environment variable that disables stream memory operations.
pub const NO_STREAM_MEMOPS_ENV: &str = "CUFRAMES_TEST_NO_STREAM_MEMOPS";

/// True when a test asks CUDA publishers to act as if stream memory
/// operations failed.
pub(crate) fn stream_memops_disabled() -> bool {
    static DISABLED: OnceLock<bool> = OnceLock::new();
    *DISABLED.get_or_init(|| std::env::var(NO_STREAM_MEMOPS_ENV).is_ok_and(|v| v == "1"))
}

/// The environment variable that makes fd sharing look unsupported.
pub const NO_FD_SHARING_ENV: &str = "CUFRAMES_TEST_NO_FD_SHARING";

/// True when a test asks CUDA publishers to act as if the GPU could not
/// export memory as file descriptors.
pub(crate) fn fd_sharing_disabled() -> bool {
    static DISABLED: OnceLock<bool> = OnceLock::new();
    *DISABLED.get_or_init(|| std::env::var(NO_FD_SHARING_ENV).is_ok_and(|v| v == "1"))
}

/// The environment variable that keeps the copy kernel unloaded.
pub const NO_COPY_KERNEL_ENV: &str = "CUFRAMES_TEST_NO_COPY_KERNEL";

/// True when a test asks CUDA publishers to copy with the driver's copy
/// calls only.
pub(crate) fn copy_kernel_disabled() -> bool {
    static DISABLED: OnceLock<bool> = OnceLock::new();
    *DISABLED.get_or_init(|| std::env::var(NO_COPY_KERNEL_ENV).is_ok_and(|v| v == "1"))
}

/// The environment variable that makes one launch of the copy kernel fail.
pub const FAIL_COPY_KERNEL_AT_ENV: &str = "CUFRAMES_TEST_FAIL_COPY_KERNEL_AT";

/// Which launch (from 1) of a publisher's copy kernel a test asks to be one
/// the driver refuses, if any.
pub(crate) fn copy_kernel_launch_to_fail() -> Option<u64> {
    std::env::var(FAIL_COPY_KERNEL_AT_ENV).ok()?.parse().ok()
}
