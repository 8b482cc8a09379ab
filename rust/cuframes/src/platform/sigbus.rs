//! Contains SIGBUS to the mapping that raised it.
//!
//! A shared mapping of a tmpfs file raises SIGBUS when a page is touched
//! that the file no longer has (another process truncated it) or cannot get
//! (`/dev/shm` is full and the page was a hole). Mappings are checked when
//! made (`region.rs`), but a peer that can write the file can still shrink
//! it later. Every mapped region registers its address range here; when
//! SIGBUS hits inside one, the handler puts private zero pages over the
//! whole range, marks it faulted and returns, so the faulting read or write
//! completes on the zero pages and the owner of the region reports a clear
//! error on that key at its next check. SIGBUS anywhere else goes to the
//! handler that was there before (Rust's own, Python's faulthandler, the
//! default), as if this one did not exist.

use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Ranges guarded at once: a subscriber maps four regions, an inspector
/// one at a time; past this many a region is mapped unguarded.
const GUARDS: usize = 1024;

struct Guard {
    start: AtomicUsize,
    end: AtomicUsize,
    faulted: AtomicBool,
}

impl Guard {
    const fn new() -> Guard {
        Guard {
            start: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            faulted: AtomicBool::new(false),
        }
    }
}

static TABLE: [Guard; GUARDS] = [const { Guard::new() }; GUARDS];
static INSTALL: Once = Once::new();
/// The handler before ours (written once, before ours is installed).
static mut PREVIOUS: Option<libc::sigaction> = None;

/// A registered range; unregisters on drop.
#[derive(Debug)]
pub(crate) struct Guarded {
    index: Option<usize>,
}

impl Guarded {
    /// Registers `[start, start + len)`. The handler is installed on the
    /// first call.
    pub(crate) fn register(start: *mut u8, len: usize) -> Guarded {
        INSTALL.call_once(install);
        let start = start as usize;
        let index = TABLE.iter().position(|g| {
            g.start
                .compare_exchange(0, start, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        });
        if let Some(i) = index {
            TABLE[i].faulted.store(false, Ordering::Relaxed);
            TABLE[i].end.store(start + len, Ordering::Release);
        }
        Guarded { index }
    }

    /// A guard of nothing (what a dropped region holds).
    pub(crate) fn none() -> Guarded {
        Guarded { index: None }
    }

    /// Whether a SIGBUS hit the range: its pages are now private zeros.
    pub(crate) fn faulted(&self) -> bool {
        self.index
            .is_some_and(|i| TABLE[i].faulted.load(Ordering::Acquire))
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Some(i) = self.index {
            TABLE[i].end.store(0, Ordering::Release);
            TABLE[i].start.store(0, Ordering::Release);
        }
    }
}

fn install() {
    // SAFETY: sigaction with a zeroed struct filled field by field; the
    // handler only touches atomics, mmap and the previous action, all
    // async-signal-safe. PREVIOUS is written here once, before the handler
    // that reads it can run.
    unsafe {
        let mut ours: libc::sigaction = std::mem::zeroed();
        ours.sa_sigaction = on_sigbus as *const () as usize;
        ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
        libc::sigemptyset(&mut ours.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
            return;
        }
        PREVIOUS = Some(previous);
        libc::sigaction(libc::SIGBUS, &ours, std::ptr::null_mut());
    }
}

extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    for guard in &TABLE {
        let start = guard.start.load(Ordering::Acquire);
        let end = guard.end.load(Ordering::Acquire);
        if start != 0 && (start..end).contains(&addr) {
            // SAFETY: [start, end) is a live mapping this library made
            // (registered until just before its munmap); replacing it with
            // anonymous pages of the same size keeps every pointer into it
            // valid.
            let replaced = unsafe {
                libc::mmap(
                    start as *mut libc::c_void,
                    end - start,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if replaced != libc::MAP_FAILED {
                guard.faulted.store(true, Ordering::Release);
                return;
            }
        }
    }
    pass_on(signal, info, context);
}

/// Hands a SIGBUS that is not ours to the handler before ours; with none
/// (or "ignore", which cannot end a fault), restores the default so that
/// the faulting instruction, run again, ends the process as it would have.
fn pass_on(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: PREVIOUS was written before this handler was installed and
    // never after; the previous handler is called as it asked to be
    // (SA_SIGINFO or not), which is what the kernel would have done.
    unsafe {
        let previous = (*std::ptr::addr_of!(PREVIOUS)).as_ref();
        match previous.map(|p| (p.sa_sigaction, p.sa_flags)) {
            Some((handler, flags)) if handler != libc::SIG_DFL && handler != libc::SIG_IGN => {
                if flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(handler);
                    f(signal, info, context);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
                    f(signal);
                }
            }
            _ => {
                libc::signal(libc::SIGBUS, libc::SIG_DFL);
            }
        }
    }
}
