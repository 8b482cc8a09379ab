//! Futex wait and wake on a word of shared memory: how a STRICT_WAIT
//! publisher sleeps until a subscriber in another process ACKs, without
//! polling (D24). Shared (not `FUTEX_PRIVATE`) futexes key on the
//! mapped page, so they work across processes and namespaces that map the
//! same object.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `word` holds `expected`, at most `timeout`. Returns at
/// once when it holds something else; spurious wake-ups are possible, so
/// callers re-check their condition.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a live, 4-byte aligned u32 (an AtomicU32) for the
    // duration of the call; the kernel only reads it and compares it with
    // `expected`; `ts` outlives the call. Errors (EAGAIN: the value changed,
    // ETIMEDOUT, EINTR) all mean "re-check", which every caller does.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes every process sleeping on `word`.
pub(crate) fn wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a live, 4-byte aligned u32; FUTEX_WAKE does not
    // access memory beyond using the address as a key.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    use super::*;

    #[test]
    fn a_changed_word_returns_at_once_and_a_wake_ends_a_wait() {
        let word = Arc::new(AtomicU32::new(7));
        let started = Instant::now();
        wait(&word, 6, Duration::from_secs(5));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "value differed: no sleep"
        );

        let other = word.clone();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.store(8, Ordering::SeqCst);
            wake_all(&other);
        });
        let started = Instant::now();
        while word.load(Ordering::SeqCst) == 7 {
            wait(&word, 7, Duration::from_secs(5));
        }
        waker.join().unwrap();
        assert!(started.elapsed() < Duration::from_secs(4), "woken, not timed out");
    }

    #[test]
    fn the_timeout_bounds_a_wait() {
        let word = AtomicU32::new(1);
        let started = Instant::now();
        wait(&word, 1, Duration::from_millis(20));
        assert!(started.elapsed() >= Duration::from_millis(15));
    }
}
