//! The source's implementation: a cuframes `Subscriber`, looked for once at
//! `start()` and, when no publisher is there yet, waited for in `create()`
//! (the streaming thread, where `unlock()` stops the wait: a pipeline going
//! down or gst-launch's Ctrl-C is not held up by it); each frame copied out of
//! its slot into a new system-memory buffer, the slot released right after.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cuframes::{
    CopyMode, CudaBinding, ErrorKind, FrameLease, MemoryKind, PlanePtr, StreamInfo, Subscriber,
    SubscriberConfig, SubscriberStats,
};
use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::prelude::*;
use gst_base::subclass::base_src::CreateSuccess;
use gst_base::subclass::prelude::*;
use gst_video::prelude::*;

use crate::cuda::{DeviceFrame, ElementCuda, SharedContext, Stream};
use crate::gstcuda::GstCuda;
use crate::settings::{ModeProp, describe, millis};

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "cuframessrc",
        gst::DebugColorFlags::empty(),
        Some("cuframes subscriber source"),
    )
});

/// Reference timestamps on every buffer: the publisher's own PTS (the stream's
/// time base), and when it published the frame (CLOCK_MONOTONIC, the clock
/// every process on the host shares: publish-to-arrival latency).
static PUBLISHER_PTS: LazyLock<gst::Caps> =
    LazyLock::new(|| gst::Caps::new_empty_simple("timestamp/x-cuframes-pts"));
static PUBLISHED_AT: LazyLock<gst::Caps> =
    LazyLock::new(|| gst::Caps::new_empty_simple("timestamp/x-cuframes-published"));

// Defaults: the library's (`cuframes::defaults`), as `cuframes subscribe` and
// the FFmpeg input device have them (protocol notes D39).
const DEFAULT_WAIT_TIMEOUT_MS: i64 = cuframes::defaults::WAIT_FOR_PUBLISHER.as_millis() as i64;
const DEFAULT_TIMEOUT_MS: i64 = cuframes::defaults::FRAME_TIMEOUT.as_millis() as i64;
const DEFAULT_RECONNECT: bool = false;
/// How often a wait looks whether the element is being stopped or flushed.
const SLICE: Duration = Duration::from_millis(20);
/// Loss warnings on the bus: at most one per this long.
const LOSS_WARNING_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
struct Settings {
    key: Option<String>,
    name: Option<String>,
    mode: ModeProp,
    wait_timeout_ms: i64,
    timeout_ms: i64,
    reconnect: bool,
    runtime_dir: Option<String>,
    cuda_device_id: i32,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            key: None,
            name: None,
            mode: ModeProp::default(),
            wait_timeout_ms: DEFAULT_WAIT_TIMEOUT_MS,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            reconnect: DEFAULT_RECONNECT,
            runtime_dir: None,
            cuda_device_id: -1,
        }
    }
}

impl Settings {
    fn key(&self) -> &str {
        self.key.as_deref().unwrap_or_default()
    }

    /// The subscriber's config; with `cuda`, bound to GStreamer's CUDA
    /// context and the stream the frames are handed out on.
    fn subscriber_config(&self, cuda: Option<CudaBinding>) -> SubscriberConfig {
        let mut config = SubscriberConfig::new(self.key());
        if let Some(name) = &self.name {
            config.name = name.clone();
        }
        config.mode = self.mode.into();
        config.runtime_dir = self.runtime_dir.as_ref().map(PathBuf::from);
        // No read-ahead thread (the library's default is 32): GStreamer's
        // own queues downstream (queue, queue2, a sink's buffering) hold
        // what a slow pipeline has not taken yet, and this element's task
        // takes each frame as soon as it is published.
        config.read_ahead = 0;
        config.copy = match cuda {
            // Host memory is copied into a GStreamer buffer at once and the
            // slot released: no private copy.
            None => CopyMode::Never,
            // CUDA frames go downstream in their slots, held as long as
            // downstream holds the buffer: the input device's rule, private
            // copies of what the ring cannot spare.
            Some(_) => CopyMode::Auto,
        };
        // CUDA frames are mapped in GStreamer's context, given once a CUDA
        // publisher is seen: the library's warm-up (the primary context,
        // made while no publisher is there) would be a second context.
        config.cuda_warm_up = false;
        config.cuda = cuda;
        config
    }
}

/// Counts across every publisher followed, for `stats` and the EOS summary.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    /// Of the subscribers before the current one.
    earlier: SubscriberStats,
    /// Of the current one.
    current: SubscriberStats,
    /// Frames lost as the leases and torn copies told.
    lost: u64,
    /// Buffers pushed.
    pushed: u64,
    /// Times a publisher was followed after it went.
    reconnects: u64,
}

impl Counts {
    fn structure(&self) -> gst::Structure {
        let (e, c) = (self.earlier, self.current);
        gst::Structure::builder("cuframes-stats")
            .field("received", e.received + c.received)
            .field(
                "dropped",
                (e.dropped + c.dropped + e.overwritten + c.overwritten).max(self.lost),
            )
            .field("copied", e.copied + c.copied)
            .field("pushed", self.pushed)
            .field("reconnects", self.reconnects)
            .build()
    }

    /// The current subscriber is replaced: its counts become earlier ones.
    fn retire(&mut self) {
        let (e, c) = (&mut self.earlier, self.current);
        e.received += c.received;
        e.dropped += c.dropped;
        e.overwritten += c.overwritten;
        e.copied += c.copied;
        e.torn += c.torn;
        self.current = SubscriberStats::default();
    }
}

/// How CUDA frames leave the element.
#[derive(Debug)]
enum CudaOut {
    /// In their slots, wrapped (GStreamer 1.24 and later), on this stream.
    Wrapped(Stream),
    /// Copied into buffers of GStreamer's CUDA pool (1.22); the pool is
    /// made for the caps.
    Copied(Option<gst::BufferPool>),
}

#[derive(Debug, Default)]
struct State {
    settings: Settings,
    subscriber: Option<Subscriber>,
    /// The stream and its caps as pushed.
    info: Option<gst_video::VideoInfo>,
    stream: Option<StreamInfo>,
    /// Set while the first publisher is still waited for: since when (the
    /// element's start).
    first_wait: Option<Instant>,
    /// Frames lost since the last warning on the bus.
    unreported_loss: u64,
    last_loss_warning: Option<Instant>,
}

/// The element.
#[derive(Debug, Default)]
pub struct CuframesSrc {
    settings: Mutex<Settings>,
    state: Mutex<State>,
    /// The CUDA context, shared with the neighbours (`gst.cuda.context`).
    cuda: Mutex<ElementCuda>,
    /// How CUDA frames leave, once a publisher of CUDA memory was found.
    cuda_out: Mutex<Option<CudaOut>>,
    counts: Mutex<Counts>,
    /// Set by `unlock()` (flushing, going down): waits give up.
    unlocked: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why no subscriber came.
enum ConnectError {
    /// The element is being stopped or flushed.
    Cancelled,
    /// The publisher's slots are CUDA memory, which cannot be read here
    /// (why).
    Cuda(String),
    /// What the library said.
    Library(cuframes::Error),
}

/// The caps of `info`, in CUDA memory or system memory.
fn stream_caps(info: &gst_video::VideoInfo, cuda: bool) -> Option<gst::Caps> {
    let mut caps = info.to_caps().ok()?;
    if cuda {
        caps.get_mut()
            .expect("new caps are writable")
            .set_features_simple(Some(gst::CapsFeatures::new([
                crate::gstcuda::CAPS_FEATURE_CUDA_MEMORY,
            ])));
    }
    Some(caps)
}

/// The caps of a stream: format, size, frame rate.
fn video_info(stream: &StreamInfo) -> Result<gst_video::VideoInfo, String> {
    let layout = &stream.layout;
    let format = crate::formats::to_gst(layout.format()).ok_or_else(|| {
        format!(
            "the publisher's format {} has no GStreamer twin (see docs/gstreamer.md)",
            layout.format()
        )
    })?;
    let fps = match stream.fps {
        Some((n, d)) if n > 0 && d > 0 => gst::Fraction::new(
            i32::try_from(n).map_err(|_| "frame rate out of range")?,
            i32::try_from(d).map_err(|_| "frame rate out of range")?,
        ),
        _ => gst::Fraction::new(0, 1),
    };
    gst_video::VideoInfo::builder(format, layout.width(), layout.height())
        .fps(fps)
        .build()
        .map_err(|e| {
            format!(
                "no video info for {format} {}x{}: {e}",
                layout.width(),
                layout.height()
            )
        })
}

impl CuframesSrc {
    fn cancelled(&self) -> bool {
        self.unlocked.load(Ordering::SeqCst)
    }

    /// Connects, retrying while there is no publisher (or a dead one's
    /// leftovers) until `wait` passed (None: forever), not counting the time
    /// the library spends making a CUDA context meanwhile. Publishers of
    /// CUDA memory are refused: this element reads host memory only so far.
    fn connect(
        &self,
        settings: &Settings,
        wait: Option<Duration>,
        cancellable: bool,
    ) -> Result<Subscriber, ConnectError> {
        let runtime_dir = settings.runtime_dir.as_ref().map(PathBuf::from);
        let mut deadline = wait.map(|w| Instant::now() + w);
        let mut pause = Duration::from_millis(10);
        let mut binding = None;
        loop {
            if cancellable && self.cancelled() {
                return Err(ConnectError::Cancelled);
            }
            // A CUDA publisher is read in GStreamer's CUDA context: made
            // (or taken from a neighbour) before connecting, which maps the
            // slots in it.
            if binding.is_none()
                && let Ok(seen) = cuframes::inspect::inspect_within(
                    settings.key(),
                    runtime_dir.as_deref(),
                    Duration::from_millis(200),
                )
                && seen.status.live
                && seen.info.as_ref().is_ok_and(|i| i.memory == MemoryKind::Cuda)
            {
                binding = Some(self.cuda_binding(settings)?);
            }
            let result = Subscriber::connect(settings.subscriber_config(binding));
            if Subscriber::warming_up() {
                deadline = wait.map(|w| Instant::now() + w);
            }
            match result {
                // It became a CUDA publisher since it was looked at: again,
                // in GStreamer's context.
                Ok(sub) if sub.info().memory == MemoryKind::Cuda && binding.is_none() => {
                    drop(sub);
                    binding = Some(self.cuda_binding(settings)?);
                }
                Ok(sub) => return Ok(sub),
                Err(e)
                    if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Disconnected)
                        && deadline.is_none_or(|d| Instant::now() + pause < d) =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                Err(e) => return Err(ConnectError::Library(e)),
            }
        }
    }

    /// What a subscriber of a CUDA publisher is bound to: GStreamer's CUDA
    /// context (a neighbour's, or a new one) and, where frames can be
    /// handed out in place (1.24), a stream of our own they are ordered on.
    fn cuda_binding(&self, settings: &Settings) -> Result<CudaBinding, ConnectError> {
        let cuda = GstCuda::get().map_err(|why| ConnectError::Cuda(why.to_owned()))?;
        let handle = ElementCuda::ensure(&self.cuda, self.obj().upcast_ref(), settings.cuda_device_id)
            .map_err(ConnectError::Cuda)?;
        let shared = lock(&self.cuda);
        let context = shared
            .context()
            .ok_or_else(|| ConnectError::Cuda("no CUDA context".to_owned()))?;
        let mut out = lock(&self.cuda_out);
        let mut copies = false;
        let stream = match out.as_ref() {
            Some(CudaOut::Wrapped(stream)) => stream.handle(cuda),
            Some(CudaOut::Copied(_)) => 0,
            None => match crate::cuda::new_stream(cuda, context) {
                Some((stream, handle)) if cuda.wraps() => {
                    *out = Some(CudaOut::Wrapped(stream));
                    handle
                }
                _ => {
                    *out = Some(CudaOut::Copied(None));
                    copies = true;
                    0
                }
            },
        };
        drop((out, shared));
        if copies {
            gst::element_imp_info!(
                self,
                gst::ResourceError::Settings,
                ("GStreamer before 1.24 cannot hand out CUDA memory it did not allocate: each frame is \
                     copied into GStreamer's CUDA memory (zero-copy needs GStreamer 1.24)")
            );
        }
        Ok(CudaBinding {
            context: handle,
            stream,
        })
    }

    /// A CUDA frame as a buffer: wrapped in place (1.24), or copied into
    /// a buffer of GStreamer's CUDA pool (1.22).
    fn cuda_buffer(&self, lease: FrameLease, info: &gst_video::VideoInfo) -> Result<gst::Buffer, String> {
        let cuda = GstCuda::get().map_err(str::to_owned)?;
        let shared = lock(&self.cuda);
        let context: &SharedContext = shared.context().ok_or("no CUDA context")?;
        let mut out = lock(&self.cuda_out);
        match out.as_mut().ok_or("no CUDA output chosen")? {
            CudaOut::Wrapped(stream) => {
                // The zero-copy evidence, at debug level only (not on the
                // frame path otherwise): what downstream maps is the slot.
                let debug = (CAT.threshold() >= gst::DebugLevel::Debug)
                    .then(|| (lease.seq(), lease.slot(), lease.is_copy(), lease.plane(0).ptr));
                let buffer = crate::cuda::wrap_lease(cuda, context, stream, lease, info.format())?;
                if let Some((seq, slot, copy, PlanePtr::Device(address))) = debug {
                    let mapped = DeviceFrame::map(cuda, buffer.as_ref(), info, false)?.map(|f| f.plane(0).0);
                    gst::debug!(
                        CAT,
                        imp = self,
                        "frame seq {seq} in {} {slot} at {address:#x}: downstream maps {}",
                        if copy { "private copy of slot" } else { "slot" },
                        mapped.map_or("no CUDA memory".to_owned(), |m| format!("{m:#x}"))
                    );
                }
                Ok(buffer)
            }
            CudaOut::Copied(pool) => {
                if pool.is_none() {
                    let caps = info.to_caps().map_err(|e| format!("no caps: {e}"))?;
                    let mut caps = caps;
                    caps.get_mut()
                        .expect("new caps are writable")
                        .set_features_simple(Some(gst::CapsFeatures::new([
                            crate::gstcuda::CAPS_FEATURE_CUDA_MEMORY,
                        ])));
                    *pool = Some(context.buffer_pool(cuda, &caps, info.size())?);
                }
                let pool = pool.as_ref().expect("made above");
                let buffer = pool
                    .acquire_buffer(None)
                    .map_err(|e| format!("no buffer from GStreamer's CUDA pool: {e}"))?;
                let frame = DeviceFrame::map(cuda, buffer.as_ref(), info, true)?
                    .ok_or("GStreamer's CUDA pool gave a buffer that is not CUDA memory")?;
                crate::cuda::copy_lease(cuda, context, &lease, &frame)?;
                drop(frame);
                Ok(buffer)
            }
        }
    }

    /// The message for a connection that failed.
    fn connect_error(
        &self,
        settings: &Settings,
        wait: Option<Duration>,
        e: ConnectError,
    ) -> gst::ErrorMessage {
        let key = settings.key();
        match e {
            ConnectError::Cancelled => {
                gst::error_msg!(gst::ResourceError::Busy, ("stopped while connecting"))
            }
            ConnectError::Cuda(why) => gst::error_msg!(
                gst::ResourceError::OpenRead,
                (
                    "the publisher of '{}' shares CUDA memory, which cannot be read here: {} (or publish with \
                     -memory host)",
                    key,
                    why
                )
            ),
            ConnectError::Library(e) if e.kind() == ErrorKind::NotFound => gst::error_msg!(
                gst::ResourceError::NotFound,
                (
                    "{} (waited {}; wait-timeout sets how long, in ms)",
                    e,
                    describe(wait)
                )
            ),
            ConnectError::Library(e) => {
                gst::error_msg!(
                    gst::ResourceError::OpenRead,
                    ("cannot subscribe to '{}': {}", key, e)
                )
            }
        }
    }

    /// Takes `sub` as the current subscriber; returns the caps to push when
    /// the stream differs from the one before.
    fn adopt(&self, state: &mut State, sub: Subscriber) -> Result<Option<gst::Caps>, gst::ErrorMessage> {
        let stream = sub.info().clone();
        let info = video_info(&stream).map_err(|m| gst::error_msg!(gst::StreamError::Format, ("{}", m)))?;
        let changed = state.info.as_ref() != Some(&info);
        gst::info!(
            CAT,
            imp = self,
            "subscribed to '{}' as bit {}: {} {}x{}, ring {}, {} memory",
            sub.key(),
            sub.bit(),
            stream.layout.format(),
            stream.layout.width(),
            stream.layout.height(),
            stream.ring_size,
            stream.memory.name()
        );
        let cuda = stream.memory == MemoryKind::Cuda;
        let changed = changed || state.stream.as_ref().is_none_or(|s| s.memory != stream.memory);
        state.subscriber = Some(sub);
        state.stream = Some(stream);
        let caps = stream_caps(&info, cuda)
            .ok_or_else(|| gst::error_msg!(gst::CoreError::Negotiation, ("no caps for the stream")))?;
        state.info = Some(info);
        Ok(changed.then_some(caps))
    }

    /// Copies the leased frame into a new buffer.
    fn copy_out(&self, lease: &FrameLease, info: &gst_video::VideoInfo) -> Result<gst::Buffer, String> {
        let layout = lease.layout();
        let mut buffer = gst::Buffer::with_size(info.size()).map_err(|e| format!("no buffer: {e}"))?;
        {
            let buf = buffer.get_mut().expect("a new buffer is writable");
            let mut frame = gst_video::VideoFrameRef::from_buffer_ref_writable(buf, info)
                .map_err(|_| "cannot map the buffer as a video frame".to_owned())?;
            for (p, plane) in layout.planes().iter().enumerate() {
                let src = lease
                    .host_plane(p)
                    .ok_or_else(|| "the frame is not in host memory".to_owned())?;
                let stride = usize::try_from(frame.plane_stride()[p]).unwrap_or(0);
                let dst = frame
                    .plane_data_mut(p as u32)
                    .map_err(|e| format!("plane {p} of the buffer: {e}"))?;
                let needed = stride * (plane.rows - 1) + plane.row_bytes;
                if stride < plane.row_bytes || dst.len() < needed {
                    return Err(format!(
                        "plane {p} of the buffer is too small ({} bytes at stride {stride}, {} rows of {} wanted)",
                        dst.len(),
                        plane.rows,
                        plane.row_bytes
                    ));
                }
                for row in 0..plane.rows {
                    dst[row * stride..row * stride + plane.row_bytes]
                        .copy_from_slice(&src[row * plane.pitch..row * plane.pitch + plane.row_bytes]);
                }
            }
        }
        Ok(buffer)
    }

    /// Counts `lost` frames; warns on the bus at most once a second.
    fn note_loss(&self, state: &mut State, lost: u64) {
        if lost == 0 {
            return;
        }
        lock(&self.counts).lost += lost;
        state.unreported_loss += lost;
        // mode=latest skips frames by design: counted, not warned about.
        let due = state.settings.mode == ModeProp::Sequential
            && state
                .last_loss_warning
                .is_none_or(|t| t.elapsed() >= LOSS_WARNING_EVERY);
        if due {
            let total = lock(&self.counts).lost;
            gst::element_imp_warning!(
                self,
                gst::StreamError::Failed,
                (
                    "'{}': {} frame(s) lost ({} in all): the pipeline is slower than the publisher \
                     (use mode=latest, or policy=strict-wait on the publisher)",
                    state.settings.key(),
                    state.unreported_loss,
                    total
                )
            );
            state.unreported_loss = 0;
            state.last_loss_warning = Some(Instant::now());
        }
    }

    /// The end of the stream: the losses summed up on the bus.
    fn summarise(&self, state: &State) {
        let counts = *lock(&self.counts);
        let s = counts.structure();
        let dropped = s.get::<u64>("dropped").unwrap_or(0);
        let received = s.get::<u64>("received").unwrap_or(0);
        if dropped > 0 && state.settings.mode == ModeProp::Sequential {
            gst::element_imp_warning!(
                self,
                gst::StreamError::Failed,
                (
                    "'{}' ended: {} frames received, {} lost",
                    state.settings.key(),
                    received,
                    dropped
                )
            );
        } else {
            gst::info!(
                CAT,
                imp = self,
                "'{}' ended: {} frames received, {} lost, {} copied",
                state.settings.key(),
                received,
                dropped,
                s.get::<u64>("copied").unwrap_or(0)
            );
        }
    }

    /// Connects to a publisher within `wait` and takes it as the current
    /// one; its caps go downstream when the stream differs, and the pipeline
    /// is told to ask for the latency again. The state's lock is not held
    /// while waiting, nor while the caps go downstream: queries (caps,
    /// latency) come back to this element meanwhile. Ok(Err): no publisher.
    fn subscribe_next(
        &self,
        settings: &Settings,
        wait: Option<Duration>,
    ) -> Result<Result<(), ConnectError>, gst::FlowError> {
        let sub = match self.connect(settings, wait, true) {
            Ok(sub) => sub,
            Err(e) => return Ok(Err(e)),
        };
        let caps = {
            let mut state = lock(&self.state);
            state.first_wait = None;
            self.adopt(&mut state, sub).map_err(|m| {
                self.post_error_message(m);
                gst::FlowError::Error
            })?
        };
        if let Some(caps) = caps {
            gst::info!(
                CAT,
                imp = self,
                "the publisher of '{}' has caps {caps}",
                settings.key()
            );
            self.obj().set_caps(&caps).map_err(|_| {
                gst::element_imp_error!(
                    self,
                    gst::CoreError::Negotiation,
                    (
                        "downstream refused the caps of the publisher of '{}': {}",
                        settings.key(),
                        caps
                    )
                );
                gst::FlowError::NotNegotiated
            })?;
            let _ = self
                .obj()
                .post_message(gst::message::Latency::builder().src(&*self.obj()).build());
        }
        Ok(Ok(()))
    }

    /// Follows the next publisher on the key (after a crash, or after a
    /// clean end with `reconnect`), waiting up to `wait-timeout` without
    /// the state's lock. Ok(false): none came.
    fn follow(&self) -> Result<bool, gst::FlowError> {
        let (settings, old) = {
            let mut state = lock(&self.state);
            (state.settings.clone(), state.subscriber.take())
        };
        if let Some(old) = old {
            let mut counts = lock(&self.counts);
            counts.current = old.stats();
            counts.retire();
        }
        let wait = millis(settings.wait_timeout_ms);
        match self.subscribe_next(&settings, wait)? {
            Ok(()) => {
                lock(&self.counts).reconnects += 1;
                Ok(true)
            }
            Err(ConnectError::Cancelled) => Err(gst::FlowError::Flushing),
            Err(ConnectError::Library(e))
                if e.kind() == ErrorKind::NotFound || e.kind() == ErrorKind::Disconnected =>
            {
                Ok(false)
            }
            Err(e) => {
                self.post_error_message(self.connect_error(&settings, wait, e));
                Err(gst::FlowError::Error)
            }
        }
    }

    /// Waits for the first publisher when start() found none, up to
    /// `wait-timeout` from the start, in the streaming thread: `unlock()`
    /// ends the wait (Flushing).
    fn first_publisher(&self) -> Result<(), gst::FlowError> {
        let (settings, since) = {
            let state = lock(&self.state);
            match state.first_wait {
                Some(since) => (state.settings.clone(), since),
                None => return Ok(()),
            }
        };
        let wait = millis(settings.wait_timeout_ms);
        let left = wait.map(|w| w.saturating_sub(since.elapsed()));
        match self.subscribe_next(&settings, left)? {
            Ok(()) => Ok(()),
            Err(ConnectError::Cancelled) => Err(gst::FlowError::Flushing),
            Err(e) => {
                self.post_error_message(self.connect_error(&settings, wait, e));
                Err(gst::FlowError::Error)
            }
        }
    }

    /// The running time now on the pipeline clock.
    fn running_time_now(&self) -> Option<gst::ClockTime> {
        let obj = self.obj();
        let clock = obj.clock()?;
        let base = obj.base_time()?;
        clock.time().checked_sub(base)
    }

    /// The buffer for a leased frame: wrapped (CUDA) or copied (host), with
    /// its timestamps. None: the frame was overwritten while copied (lost).
    fn buffer_of(&self, state: &mut State, lease: FrameLease) -> Result<Option<gst::Buffer>, gst::FlowError> {
        let lost = lease.lost_before();
        let info = state.info.clone().ok_or(gst::FlowError::NotNegotiated)?;
        let (seq, pts_ns, published_ns) = (lease.seq(), lease.pts_ns(), lease.publish_mono_ns());
        let (copied, intact) = if lease.memory() == MemoryKind::Cuda {
            // Held by the buffer until downstream frees it.
            (self.cuda_buffer(lease, &info), true)
        } else {
            let copied = self.copy_out(&lease, &info);
            let intact = lease.is_intact();
            // Released right after the copy.
            let _ = lease.release();
            (copied, intact)
        };
        self.note_loss(state, lost);
        let mut buffer = match copied {
            Ok(buffer) if intact => buffer,
            Ok(_) => {
                // Overwritten while copied (drop-oldest): lost.
                self.note_loss(state, 1);
                return Ok(None);
            }
            Err(m) => {
                gst::element_imp_error!(self, gst::StreamError::Failed, ("{}", m));
                return Err(gst::FlowError::Error);
            }
        };
        let buf = buffer.get_mut().expect("a new buffer is writable");
        buf.set_pts(self.running_time_now());
        let fps = info.fps();
        if fps.numer() > 0 {
            buf.set_duration(gst::ClockTime::SECOND.mul_div_floor(fps.denom() as u64, fps.numer() as u64));
        }
        buf.set_offset(seq);
        if let Ok(pts) = u64::try_from(pts_ns) {
            gst::ReferenceTimestampMeta::add(buf, &PUBLISHER_PTS, gst::ClockTime::from_nseconds(pts), None);
        }
        gst::ReferenceTimestampMeta::add(
            buf,
            &PUBLISHED_AT,
            gst::ClockTime::from_nseconds(published_ns),
            None,
        );
        lock(&self.counts).pushed += 1;
        gst::trace!(CAT, imp = self, "frame seq {seq}");
        Ok(Some(buffer))
    }

    /// The publisher went away (`error`) or, `shut_down`, ended: the end of
    /// the stream, or the next publisher followed (waited for without the
    /// state's lock, which is given back taken again).
    fn publisher_gone<'a>(
        &'a self,
        state: MutexGuard<'a, State>,
        error: &cuframes::Error,
        shut_down: bool,
    ) -> Result<MutexGuard<'a, State>, gst::FlowError> {
        let key = state.settings.key().to_owned();
        if shut_down && !state.settings.reconnect {
            gst::info!(CAT, imp = self, "'{key}' shut down: end of stream");
            self.summarise(&state);
            return Err(gst::FlowError::Eos);
        }
        gst::info!(
            CAT,
            imp = self,
            "'{key}' {}: following the next publisher",
            if shut_down { "shut down" } else { "went away" }
        );
        if !shut_down {
            gst::element_imp_warning!(
                self,
                gst::ResourceError::Read,
                (
                    "the publisher of '{}' went away ({}); waiting for the next one",
                    key,
                    error
                )
            );
        }
        drop(state);
        let followed = self.follow();
        let state = lock(&self.state);
        if followed? {
            return Ok(state);
        }
        if shut_down {
            self.summarise(&state);
            return Err(gst::FlowError::Eos);
        }
        gst::element_imp_error!(
            self,
            gst::ResourceError::Read,
            (
                "the publisher of '{}' went away ({}) and none came back within {} (wait-timeout)",
                key,
                error,
                describe(millis(state.settings.wait_timeout_ms))
            )
        );
        Err(gst::FlowError::Error)
    }
}

#[glib::object_subclass]
impl ObjectSubclass for CuframesSrc {
    const NAME: &'static str = "GstCuframesSrc";
    type Type = super::CuframesSrc;
    type ParentType = gst_base::PushSrc;
}

impl ObjectImpl for CuframesSrc {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
            vec![
                glib::ParamSpecString::builder("key")
                    .nick("Key")
                    .blurb("Key of the publisher to read (required)")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("subscriber-name")
                    .nick("Subscriber name")
                    .blurb("Name the publisher and `cuframes inspect` show (at most 31 bytes; none: sub-<pid>)")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("mode", ModeProp::default())
                    .nick("Mode")
                    .blurb("Which frames to read")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecInt64::builder("wait-timeout")
                    .nick("Wait timeout (ms)")
                    .blurb(
                        "How long (ms) to wait for a publisher of the key at start (services come up in any \
                         order), and for the next one when it dies (or, with reconnect, ends); 0: look once; \
                         -1: forever",
                    )
                    .minimum(-1)
                    .default_value(DEFAULT_WAIT_TIMEOUT_MS)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecInt64::builder("timeout")
                    .nick("Frame timeout (ms)")
                    .blurb(
                        "After this long (ms) without a frame from a publisher still there, warn on the bus \
                         and keep waiting; -1: never warn",
                    )
                    .minimum(-1)
                    .default_value(DEFAULT_TIMEOUT_MS)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecBoolean::builder("reconnect")
                    .nick("Reconnect")
                    .blurb(
                        "After the publisher ended cleanly, follow the next one on the key (waiting up to \
                         wait-timeout; none: end of stream). A publisher that dies is always followed",
                    )
                    .default_value(DEFAULT_RECONNECT)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("runtime-dir")
                    .nick("Runtime directory")
                    .blurb(
                        "Directory of the key's socket instead of $CUFRAMES_RUNTIME_DIR, /run/cuframes, …",
                    )
                    .mutable_ready()
                    .build(),
                glib::ParamSpecInt::builder("cuda-device-id")
                    .nick("CUDA device")
                    .blurb(
                        "A publisher of CUDA memory: the device whose context to use when no neighbour shares one \
                         (gst.cuda.context); -1: any",
                    )
                    .minimum(-1)
                    .default_value(-1)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecBoxed::builder::<gst::Structure>("stats")
                    .nick("Statistics")
                    .blurb(
                        "Counts so far: received and copied (the library's), dropped (frames lost), pushed \
                         (buffers), reconnects",
                    )
                    .read_only()
                    .build(),
            ]
        });
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        let mut s = lock(&self.settings);
        match pspec.name() {
            "key" => s.key = value.get().expect("type checked upstream"),
            "subscriber-name" => s.name = value.get().expect("type checked upstream"),
            "mode" => s.mode = value.get().expect("type checked upstream"),
            "wait-timeout" => s.wait_timeout_ms = value.get().expect("type checked upstream"),
            "timeout" => s.timeout_ms = value.get().expect("type checked upstream"),
            "reconnect" => s.reconnect = value.get().expect("type checked upstream"),
            "runtime-dir" => s.runtime_dir = value.get().expect("type checked upstream"),
            "cuda-device-id" => s.cuda_device_id = value.get().expect("type checked upstream"),
            other => unreachable!("no writable property {other}"),
        }
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        if pspec.name() == "stats" {
            return lock(&self.counts).structure().to_value();
        }
        let s = lock(&self.settings);
        match pspec.name() {
            "key" => s.key.to_value(),
            "subscriber-name" => s.name.to_value(),
            "mode" => s.mode.to_value(),
            "wait-timeout" => s.wait_timeout_ms.to_value(),
            "timeout" => s.timeout_ms.to_value(),
            "reconnect" => s.reconnect.to_value(),
            "runtime-dir" => s.runtime_dir.to_value(),
            "cuda-device-id" => s.cuda_device_id.to_value(),
            other => unreachable!("no property {other}"),
        }
    }

    fn constructed(&self) {
        self.parent_constructed();
        let obj = self.obj();
        obj.set_live(true);
        obj.set_format(gst::Format::Time);
    }
}

impl GstObjectImpl for CuframesSrc {}

impl ElementImpl for CuframesSrc {
    fn set_context(&self, context: &gst::Context) {
        let device = lock(&self.settings).cuda_device_id;
        lock(&self.cuda).set_context(self.obj().upcast_ref(), context, device);
        self.parent_set_context(context);
    }

    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            gst::subclass::ElementMetadata::new(
                "cuframes subscriber",
                "Source/Video",
                "Reads the raw video frames another process publishes under a cuframes key, in host shared \
                 memory or CUDA memory: FFmpeg's -f cuframes KEY, cuframessink, Python, the cuframes CLI",
                "The cuframes authors",
            )
        });
        Some(&*METADATA)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(|| {
            vec![
                gst::PadTemplate::new(
                    "src",
                    gst::PadDirection::Src,
                    gst::PadPresence::Always,
                    &crate::formats::template_caps(),
                )
                .expect("valid pad template"),
            ]
        });
        TEMPLATES.as_ref()
    }
}

impl BaseSrcImpl for CuframesSrc {
    fn start(&self) -> Result<(), gst::ErrorMessage> {
        let settings = lock(&self.settings).clone();
        if settings.key().is_empty() {
            return Err(gst::error_msg!(
                gst::ResourceError::NotFound,
                ("no key: set the key property to the key of the publisher to read")
            ));
        }
        cuframes::validate_key(settings.key())
            .map_err(|e| gst::error_msg!(gst::ResourceError::Settings, ("{}", e)))?;
        *lock(&self.counts) = Counts::default();
        let wait = millis(settings.wait_timeout_ms);
        let started = Instant::now();
        // One look here; the wait for a publisher not there yet is create()'s
        // (a wait in the state change would hold up a stop, and gst-launch's
        // Ctrl-C, until it is over). wait-timeout=0 fails here, at once.
        let first = match self.connect(&settings, Some(Duration::ZERO), false) {
            Ok(sub) => Some(sub),
            Err(ConnectError::Library(e))
                if wait != Some(Duration::ZERO)
                    && matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Disconnected) =>
            {
                gst::info!(
                    CAT,
                    imp = self,
                    "no publisher of '{}' yet: waiting up to {} for one",
                    settings.key(),
                    describe(wait)
                );
                None
            }
            Err(e) => return Err(self.connect_error(&settings, wait, e)),
        };
        let mut state = State {
            settings,
            ..State::default()
        };
        match first {
            Some(sub) => {
                self.adopt(&mut state, sub)?;
            }
            None => state.first_wait = Some(started),
        }
        *lock(&self.state) = state;
        Ok(())
    }

    fn stop(&self) -> Result<(), gst::ErrorMessage> {
        let mut state = lock(&self.state);
        // The stream and pool before the context they belong to.
        *lock(&self.cuda_out) = None;
        lock(&self.cuda).clear();
        if let Some(sub) = state.subscriber.take() {
            lock(&self.counts).current = sub.stats();
        }
        *state = State::default();
        Ok(())
    }

    fn is_seekable(&self) -> bool {
        false
    }

    fn negotiate(&self) -> Result<(), gst::LoggableError> {
        // Before the first publisher came there are no caps to offer:
        // create() sets them once it connected.
        if lock(&self.state).info.is_none() {
            gst::debug!(CAT, imp = self, "no stream yet: negotiating once connected");
            return Ok(());
        }
        self.parent_negotiate()
    }

    fn caps(&self, filter: Option<&gst::Caps>) -> Option<gst::Caps> {
        let state = lock(&self.state);
        let caps = match &state.info {
            Some(info) => stream_caps(
                info,
                state
                    .stream
                    .as_ref()
                    .is_some_and(|s| s.memory == MemoryKind::Cuda),
            )?,
            None => self.obj().src_pad().pad_template_caps(),
        };
        Some(match filter {
            Some(filter) => filter.intersect_with_mode(&caps, gst::CapsIntersectMode::First),
            None => caps,
        })
    }

    fn query(&self, query: &mut gst::QueryRef) -> bool {
        if query.type_() == gst::QueryType::Context
            && lock(&self.cuda).answer_query(self.obj().upcast_ref(), query)
        {
            return true;
        }
        if let gst::QueryViewMut::Latency(q) = query.view_mut() {
            // A frame arrives at most one frame after it was published.
            let state = lock(&self.state);
            let Some(info) = &state.info else {
                // No stream yet: live, its latency told (a latency message)
                // once connected.
                q.set(true, gst::ClockTime::ZERO, gst::ClockTime::NONE);
                return true;
            };
            let fps = info.fps();
            let min = if fps.numer() > 0 {
                gst::ClockTime::SECOND
                    .mul_div_floor(fps.denom() as u64, fps.numer() as u64)
                    .unwrap_or(gst::ClockTime::ZERO)
            } else {
                gst::ClockTime::ZERO
            };
            q.set(true, min, gst::ClockTime::NONE);
            return true;
        }
        BaseSrcImplExt::parent_query(self, query)
    }

    fn unlock(&self) -> Result<(), gst::ErrorMessage> {
        self.unlocked.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn unlock_stop(&self) -> Result<(), gst::ErrorMessage> {
        self.unlocked.store(false, Ordering::SeqCst);
        Ok(())
    }
}

impl PushSrcImpl for CuframesSrc {
    fn create(&self, _buffer: Option<&mut gst::BufferRef>) -> Result<CreateSuccess, gst::FlowError> {
        self.first_publisher()?;
        let mut state = lock(&self.state);
        let timeout = millis(state.settings.timeout_ms);
        let mut waiting_since = Instant::now();
        let mut stall_warned = false;
        loop {
            if self.cancelled() {
                return Err(gst::FlowError::Flushing);
            }
            let Some(sub) = state.subscriber.as_mut() else {
                return Err(gst::FlowError::Flushing);
            };
            let next = sub.next(Some(SLICE));
            let shut_down = sub.publisher_shut_down();
            lock(&self.counts).current = sub.stats();
            match next {
                Ok(lease) => {
                    if let Some(buffer) = self.buffer_of(&mut state, lease)? {
                        return Ok(CreateSuccess::NewBuffer(buffer));
                    }
                }
                Err(e) if e.kind() == ErrorKind::Timeout => {
                    if let Some(limit) = timeout
                        && !stall_warned
                        && waiting_since.elapsed() >= limit
                    {
                        gst::element_imp_warning!(
                            self,
                            gst::ResourceError::Read,
                            (
                                "no frame from '{}' for {}; the publisher is still there, waiting on",
                                state.settings.key(),
                                describe(Some(limit))
                            )
                        );
                        stall_warned = true;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Disconnected => {
                    state = self.publisher_gone(state, &e, shut_down)?;
                    waiting_since = Instant::now();
                    stall_warned = false;
                }
                Err(e) => {
                    gst::element_imp_error!(
                        self,
                        gst::ResourceError::Read,
                        ("cannot read from '{}': {}", state.settings.key(), e)
                    );
                    return Err(gst::FlowError::Error);
                }
            }
        }
    }
}
