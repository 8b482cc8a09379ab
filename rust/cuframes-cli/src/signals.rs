//! SIGINT/SIGTERM become a flag, so a killed publisher still shuts down
//! cleanly (SHUTDOWN to subscribers, socket and shared memory removed).
//!
//! The signals are blocked in every thread and taken by one waiter thread
//! with sigwait: no async-signal handler, no unsafe.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{SigSet, Signal};

/// Set once SIGINT or SIGTERM arrived.
#[derive(Clone, Debug)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Call before any other thread starts (threads inherit the mask).
pub fn install() -> StopFlag {
    let flag = StopFlag(Arc::new(AtomicBool::new(false)));
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    if set.thread_block().is_err() {
        return flag; // default handling stays: the process dies on the signal
    }
    let waiter = flag.clone();
    let _ = std::thread::Builder::new().name("signals".into()).spawn(move || {
        if set.wait().is_ok() {
            waiter.0.store(true, Ordering::Relaxed);
        }
    });
    flag
}
