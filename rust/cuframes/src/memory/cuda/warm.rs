//! A subscriber that finds no publisher yet makes its CUDA context while it
//! waits (issue 27, docs/benchmarks.md "Start-up by phase").
//!
//! Making a context is the longest step of a CUDA process's start, and the
//! driver serialises it across the machine: when 48 processes start at once
//! each waits seconds for it. A subscriber learns that the publisher's frames
//! are CUDA memory only from the handshake, which needs the publisher; making
//! its context only then put every subscriber's context after its publisher's
//! whole start. So the first connect that finds no publisher starts retaining
//! the device's primary context on a thread of its own, and the connect that
//! succeeds lets go of that reference: the mapping holds its own by then (the
//! retain is quick once the context exists), and for a host-memory publisher
//! the context goes away again. `CUFRAMES_CUDA_WARMUP=0` turns it off.
//!
//! While it is being made, [`warming_up`] is true: a caller that retries until
//! a deadline does not count that time against its wait for a publisher, which
//! makes its context in the same queue of the driver and cannot appear sooner
//! (48 processes started at once on an H200 had theirs after 9.5 s).

use std::sync::{Arc, Mutex, MutexGuard};

use super::driver::{self, Context};

/// The environment variable that turns the warm-up off ("0").
pub const WARMUP_ENV: &str = "CUFRAMES_CUDA_WARMUP";

/// A value made once on a background thread and dropped when released,
/// whether it was made by then or not. When it cannot be made (no driver,
/// no memory), it is not tried again: every later wait would start a thread
/// that fails, and callers that wait while one runs would never time out.
pub(crate) struct Warm<T: Send + 'static> {
    state: Arc<Mutex<State<T>>>,
}

enum State<T> {
    Idle,
    Making { wanted: bool },
    Made(T),
    Failed,
}

impl<T: Send + 'static> Warm<T> {
    pub(crate) fn new() -> Warm<T> {
        Warm {
            state: Arc::new(Mutex::new(State::Idle)),
        }
    }

    fn lock(state: &Mutex<State<T>>) -> MutexGuard<'_, State<T>> {
        state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts making the value unless it is made or being made (then it is
    /// wanted again). Returns whether a thread was started.
    pub(crate) fn start(&self, make: impl FnOnce() -> Option<T> + Send + 'static) -> bool {
        let mut state = Self::lock(&self.state);
        match &mut *state {
            State::Idle => {}
            State::Making { wanted } => {
                *wanted = true;
                return false;
            }
            State::Made(_) | State::Failed => return false,
        }
        *state = State::Making { wanted: true };
        drop(state);
        let shared = Arc::clone(&self.state);
        let started = std::thread::Builder::new()
            .name("cuframes-warm".into())
            .spawn(move || {
                let made = make();
                let mut state = Self::lock(&shared);
                match (&*state, made) {
                    (State::Making { wanted: true }, Some(value)) => *state = State::Made(value),
                    (_, None) => *state = State::Failed,
                    (_, unwanted) => {
                        *state = State::Idle;
                        drop(state);
                        drop(unwanted);
                    }
                }
            });
        if started.is_err() {
            *Self::lock(&self.state) = State::Idle;
        }
        started.is_ok()
    }

    /// Lets go of the value: dropped on a thread of its own when made (the
    /// last reference to a context takes long to drop), dropped as soon as
    /// it is made otherwise.
    pub(crate) fn release(&self) {
        let mut state = Self::lock(&self.state);
        if matches!(*state, State::Failed) {
            return; // stays failed: never tried again
        }
        match std::mem::replace(&mut *state, State::Idle) {
            State::Idle | State::Failed => {}
            State::Making { .. } => *state = State::Making { wanted: false },
            State::Made(value) => {
                drop(state);
                if let Err(e) = std::thread::Builder::new()
                    .name("cuframes-warm".into())
                    .spawn(move || drop(value))
                {
                    // No thread: dropped here, the caller waits for it.
                    crate::log::debug!("no thread to release the warm CUDA context on ({e})");
                }
            }
        }
    }

    /// Whether a thread is making the value.
    fn is_making(&self) -> bool {
        matches!(*Self::lock(&self.state), State::Making { .. })
    }

    #[cfg(test)]
    fn is_made(&self) -> bool {
        matches!(*Self::lock(&self.state), State::Made(_))
    }
}

fn primary() -> &'static Warm<Context> {
    static WARM: std::sync::OnceLock<Warm<Context>> = std::sync::OnceLock::new();
    WARM.get_or_init(Warm::new)
}

/// A subscriber found no publisher: makes device `ordinal`'s primary context
/// in the background (a negative ordinal: device 0, unless this thread has a
/// current context, which the mapping would use instead). Nothing happens
/// without a CUDA driver, or with `CUFRAMES_CUDA_WARMUP=0`.
pub(crate) fn start_while_waiting(ordinal: i32) {
    if std::env::var_os(WARMUP_ENV).is_some_and(|v| v == "0") {
        return;
    }
    if ordinal < 0 && driver::has_current_context() {
        return;
    }
    if primary().start(move || {
        // A test plays a context that takes long to make (a crowded GPU).
        crate::testhook::stall_at("cuda-warm-up");
        driver::require().ok()?;
        Context::resolve(0, ordinal.max(0)).ok()
    }) {
        crate::log::debug!(
            "no publisher yet: making the CUDA context of device {} meanwhile",
            ordinal.max(0)
        );
    }
}

/// Whether this process is making the context a subscriber that found no
/// publisher began.
pub(crate) fn warming_up() -> bool {
    primary().is_making()
}

/// A subscriber connected: the warm reference is no longer needed.
pub(crate) fn settle() {
    primary().release();
}

/// One more reference to the context a mapping of `binding` and `ordinal`
/// uses (as `CudaMapping::open` resolves it), taken while that mapping
/// still holds it, so that the context outlives the mapping: quick, since
/// it exists. None without a driver.
pub(crate) fn hold(binding: Option<crate::CudaBinding>, ordinal: i32) -> Option<Context> {
    Context::resolve(binding.unwrap_or_default().context, ordinal).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    /// Counts its drops.
    struct Token(Arc<AtomicUsize>);
    impl Drop for Token {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn eventually(what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn made_once_then_released() {
        let warm = Warm::new();
        let drops = Arc::new(AtomicUsize::new(0));
        let made = Arc::new(AtomicUsize::new(0));
        let (d, m) = (drops.clone(), made.clone());
        assert!(warm.start(move || {
            m.fetch_add(1, Ordering::SeqCst);
            Some(Token(d))
        }));
        eventually("made", || warm.is_made());
        // Started again while made: nothing new.
        assert!(!warm.start(|| panic!("made twice")));
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        warm.release();
        eventually("dropped after release", || drops.load(Ordering::SeqCst) == 1);
        assert!(!warm.is_made());
    }

    #[test]
    fn released_while_being_made_is_dropped_when_made() {
        let warm = Warm::new();
        let drops = Arc::new(AtomicUsize::new(0));
        let (go, wait) = mpsc::channel::<()>();
        let d = drops.clone();
        assert!(warm.start(move || {
            wait.recv().unwrap();
            Some(Token(d))
        }));
        assert!(warm.is_making());
        warm.release();
        // Unwanted now, but still being made: callers still wait on it.
        assert!(warm.is_making());
        go.send(()).unwrap();
        eventually("dropped once made", || drops.load(Ordering::SeqCst) == 1);
        assert!(!warm.is_making());
        assert!(!warm.is_made());
        // Idle again: a later wait makes it anew.
        let d = drops.clone();
        assert!(warm.start(move || Some(Token(d))));
        eventually("made anew", || warm.is_made());
    }

    #[test]
    fn wanted_again_while_being_made_is_kept() {
        let warm = Warm::new();
        let drops = Arc::new(AtomicUsize::new(0));
        let (go, wait) = mpsc::channel::<()>();
        let d = drops.clone();
        assert!(warm.start(move || {
            wait.recv().unwrap();
            Some(Token(d))
        }));
        warm.release();
        assert!(!warm.start(|| panic!("a second thread")));
        go.send(()).unwrap();
        eventually("kept", || warm.is_made());
        assert!(!warm.is_making());
        assert_eq!(drops.load(Ordering::SeqCst), 0);
    }

    /// Not made (no driver): never tried again, and not waited on.
    #[test]
    fn nothing_made_is_not_tried_again() {
        let warm: Warm<Token> = Warm::new();
        assert!(warm.start(|| None));
        eventually("failed", || matches!(*Warm::lock(&warm.state), State::Failed));
        assert!(!warm.is_making());
        assert!(!warm.start(|| panic!("tried again")));
        warm.release();
        assert!(!warm.start(|| panic!("tried again after a release")));
        assert!(!warm.is_making());
    }
}
