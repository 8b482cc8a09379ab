//! The library's own messages: warnings about a fallback it took, a file it
//! skipped, a peer it closed. They go to one sink: the logger of the object
//! whose call (or thread) produced them when its config names one, else the
//! process's logger ([`set_logger`]), else standard error as
//! `cuframes: <message>`. Hosts route them into their own logs this way
//! (FFmpeg's `av_log`, Python's `logging`, the CLI's `--log-format json`),
//! so `-loglevel` and `-report` see them. Never on a frame's hot path.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, RwLock};

/// How much a message matters (the C API's `cuframes_log_level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Something failed; the call reports it too.
    Error = 0,
    /// Worked, but not the way asked or expected (a fallback, a skipped file).
    Warning = 1,
    /// Worth knowing once (what was chosen).
    Info = 2,
    /// Detail for debugging.
    Debug = 3,
}

impl Level {
    /// "error", "warning", "info" or "debug".
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    /// The level for a C API number.
    pub fn from_number(n: u32) -> Option<Level> {
        [Level::Error, Level::Warning, Level::Info, Level::Debug]
            .into_iter()
            .find(|l| *l as u32 == n)
    }
}

/// A sink for messages: called with the level and one line of text (no
/// trailing newline), from whichever thread produced it.
#[derive(Clone)]
pub struct Logger(Arc<Sink>);

type Sink = dyn Fn(Level, &str) + Send + Sync;

impl Logger {
    /// A logger calling `sink`.
    pub fn new(sink: impl Fn(Level, &str) + Send + Sync + 'static) -> Logger {
        Logger(Arc::new(sink))
    }

    /// Passes one message to the sink.
    pub fn log(&self, level: Level, message: &str) {
        (self.0)(level, message)
    }
}

impl std::fmt::Debug for Logger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Logger")
    }
}

static GLOBAL: RwLock<Option<Logger>> = RwLock::new(None);
/// Messages above this level are not produced at all (default: Info).
static MAX_LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

thread_local! {
    static SCOPED: RefCell<Vec<Logger>> = const { RefCell::new(Vec::new()) };
}

/// Sets the process's logger (None: back to standard error).
pub fn set_logger(logger: Option<Logger>) {
    *GLOBAL.write().unwrap_or_else(|p| p.into_inner()) = logger;
}

/// Messages less important than `level` are dropped before formatting.
pub fn set_max_level(level: Level) {
    MAX_LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Whether a message of `level` would go anywhere.
pub fn enabled(level: Level) -> bool {
    level as u8 <= MAX_LEVEL.load(Ordering::Relaxed)
}

/// Runs `f` with `logger` (when given) receiving the messages this thread
/// produces meanwhile: an object's own logger for the length of its call.
pub fn with_logger<T>(logger: Option<&Logger>, f: impl FnOnce() -> T) -> T {
    let Some(logger) = logger else {
        return f();
    };
    SCOPED.with(|s| s.borrow_mut().push(logger.clone()));
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            SCOPED.with(|s| {
                s.borrow_mut().pop();
            });
        }
    }
    let _pop = Pop;
    f()
}

/// Sends one message to the sink in effect on this thread.
pub fn emit(level: Level, message: &str) {
    if !enabled(level) {
        return;
    }
    if let Some(scoped) = SCOPED.with(|s| s.borrow().last().cloned()) {
        return scoped.log(level, message);
    }
    emit_to_process(level, message);
}

/// Sends one message to the process's logger, or standard error, past any
/// object's: for an object's logger that outlived its object (a C caller's
/// callback may not be called once the object is destroyed).
pub fn emit_to_process(level: Level, message: &str) {
    let global = GLOBAL.read().unwrap_or_else(|p| p.into_inner()).clone();
    match global {
        Some(logger) => logger.log(level, message),
        None => to_stderr(message),
    }
}

/// The default sink: `cuframes: <message>` on standard error.
pub fn to_stderr(message: &str) {
    eprintln!("cuframes: {message}");
}

/// `warning!("...", args)`: a warning through [`emit`].
macro_rules! warning {
    ($($arg:tt)*) => {
        if $crate::log::enabled($crate::log::Level::Warning) {
            $crate::log::emit($crate::log::Level::Warning, &format!($($arg)*));
        }
    };
}
pub(crate) use warning;

/// `debug!("...", args)`: detail through [`emit`].
macro_rules! debug {
    ($($arg:tt)*) => {
        if $crate::log::enabled($crate::log::Level::Debug) {
            $crate::log::emit($crate::log::Level::Debug, &format!($($arg)*));
        }
    };
}
pub(crate) use debug;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn scoped_loggers_nest_and_fall_back() {
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let outer_seen = seen.clone();
        let outer =
            Logger::new(move |l, m| outer_seen.lock().unwrap().push(format!("outer {} {m}", l.name())));
        let inner_seen = seen.clone();
        let inner =
            Logger::new(move |l, m| inner_seen.lock().unwrap().push(format!("inner {} {m}", l.name())));
        with_logger(Some(&outer), || {
            warning!("one {}", 1);
            with_logger(Some(&inner), || warning!("two"));
            with_logger(None, || warning!("three"));
            emit(Level::Debug, "dropped: above the maximum level");
        });
        assert_eq!(
            *seen.lock().unwrap(),
            ["outer warning one 1", "inner warning two", "outer warning three"]
        );
    }

    #[test]
    fn levels_have_stable_numbers() {
        for (n, level) in [Level::Error, Level::Warning, Level::Info, Level::Debug]
            .into_iter()
            .enumerate()
        {
            assert_eq!(Level::from_number(n as u32), Some(level));
        }
        assert_eq!(Level::from_number(4), None);
    }
}
