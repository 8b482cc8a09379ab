//! Read-ahead (D26): a thread takes every frame as soon as it is
//! published and queues it, up to a bound, so a consumer that is still
//! starting or briefly slow loses nothing under DROP_OLDEST. With
//! [`CopyMode::Auto`](super::CopyMode) the queued frames are private copies
//! under DROP_OLDEST, so the ring is never held by the queue.
//!
//! When the queue is full the thread stops taking frames: the ring then
//! laps (DROP_OLDEST; the losses are counted when it resumes) or the
//! publisher waits (STRICT_WAIT), as for any slow subscriber.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::SubscriberStats;
use super::lease::FrameLease;
use super::reader::Reader;
use crate::error::{Error, ErrorKind, Result};
use crate::log::Logger;

/// How long the thread waits for a frame before it looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
struct Queue {
    frames: VecDeque<FrameLease>,
    /// Why reading ended (then every later `next` returns it).
    end: Option<Error>,
    stop: bool,
    stats: SubscriberStats,
    shut_down: bool,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when a frame or the end is queued, and when space is made.
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The reading thread and its queue.
#[derive(Debug)]
pub(super) struct ReadAhead {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Reader>>,
    key: String,
}

impl ReadAhead {
    /// Moves `reader` into a thread that queues up to `depth` frames; what
    /// the thread reports goes to the subscriber's `logger`.
    pub(super) fn start(mut reader: Reader, depth: usize, logger: Option<Logger>) -> Result<ReadAhead> {
        let shared = Arc::new(Shared::default());
        let key = reader.key.clone();
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("cuframes-read".into())
            .spawn(move || {
                crate::log::with_logger(logger.as_ref(), || run(&mut reader, &theirs, depth.max(1)));
                reader
            })
            .map_err(|e| Error::io("starting the read-ahead thread", &e))?;
        Ok(ReadAhead {
            shared,
            thread: Some(thread),
            key,
        })
    }

    /// The oldest queued frame, waiting up to `timeout` (None = forever).
    pub(super) fn next(&self, timeout: Option<Duration>) -> Result<FrameLease> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut queue = self.shared.lock();
        loop {
            if let Some(frame) = queue.frames.pop_front() {
                self.shared.changed.notify_all();
                return Ok(frame);
            }
            if let Some(e) = &queue.end {
                return Err(e.clone());
            }
            queue = match deadline {
                None => self.shared.changed.wait(queue).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(super::no_frame(&self.key, timeout));
                    }
                    self.shared
                        .changed
                        .wait_timeout(queue, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }

    /// Counters as of the last frame queued.
    pub(super) fn stats(&self) -> SubscriberStats {
        self.shared.lock().stats
    }

    /// Whether the publisher announced its shutdown.
    pub(super) fn publisher_shut_down(&self) -> bool {
        self.shared.lock().shut_down
    }

    /// Frames queued and not yet handed out.
    pub(super) fn queued(&self) -> usize {
        self.shared.lock().frames.len()
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        {
            let mut queue = self.shared.lock();
            queue.stop = true;
            queue.frames.clear(); // released: their slots go back at once
        }
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            // The reader is dropped here too: it sends UNSUBSCRIBE.
            let _ = thread.join();
        }
    }
}

fn run(reader: &mut Reader, shared: &Shared, depth: usize) {
    loop {
        {
            let mut queue = shared.lock();
            while queue.frames.len() >= depth && !queue.stop {
                queue = shared.changed.wait(queue).unwrap_or_else(|p| p.into_inner());
            }
            if queue.stop {
                return;
            }
        }
        let result = reader.next(Some(POLL));
        let mut queue = shared.lock();
        queue.stats = reader.stats();
        match result {
            Ok(frame) => queue.frames.push_back(frame),
            Err(e) if e.kind() == ErrorKind::Timeout => continue,
            Err(e) => {
                queue.shut_down = reader.shut_down;
                queue.end = Some(e);
                shared.changed.notify_all();
                return;
            }
        }
        drop(queue);
        shared.changed.notify_all();
    }
}
