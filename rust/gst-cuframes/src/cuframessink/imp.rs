//! The sink's implementation: a cuframes `Publisher` made from the
//! negotiated caps, each buffer copied row by row into the next slot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cuframes::{CudaBinding, DevicePlane, ErrorKind, MemoryRequest, PixelFormat, Publisher, PublisherConfig};
use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::subclass::prelude::*;
use gst_video::prelude::*;

use crate::cuda::{DeviceFrame, ElementCuda};
use crate::gstcuda::GstCuda;
use crate::settings::{CudaShareProp, PolicyProp, V1PeersProp, describe};

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "cuframessink",
        gst::DebugColorFlags::empty(),
        Some("cuframes publisher sink"),
    )
});

// Defaults: the FFmpeg muxer's and `cuframes publish`'s.
const DEFAULT_RING_SIZE: u32 = cuframes::defaults::RING_SIZE as u32;
const DEFAULT_ACK_TIMEOUT_MS: u32 = cuframes::defaults::ACK_TIMEOUT.as_millis() as u32;
const DEFAULT_STARTUP_TIMEOUT_MS: u32 = cuframes::defaults::STARTUP_TIMEOUT.as_millis() as u32;
const DEFAULT_WAIT_SUBSCRIBERS: u32 = 0;
const DEFAULT_WAIT_TIMEOUT_MS: u32 = 30_000;
/// The least time the end of a stream waits for subscribers to take the
/// last frame, as the muxer and the CLI wait: max(ack-timeout, 1 s).
const END_OF_STREAM_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
struct Settings {
    key: Option<String>,
    ring_size: u32,
    policy: PolicyProp,
    ack_timeout_ms: u32,
    startup_timeout_ms: u32,
    wait_subscribers: u32,
    wait_timeout_ms: u32,
    group: Option<String>,
    v1_peers: V1PeersProp,
    runtime_dir: Option<String>,
    cuda_device_id: i32,
    cuda_share: CudaShareProp,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            key: None,
            ring_size: DEFAULT_RING_SIZE,
            policy: PolicyProp::default(),
            ack_timeout_ms: DEFAULT_ACK_TIMEOUT_MS,
            startup_timeout_ms: DEFAULT_STARTUP_TIMEOUT_MS,
            wait_subscribers: DEFAULT_WAIT_SUBSCRIBERS,
            wait_timeout_ms: DEFAULT_WAIT_TIMEOUT_MS,
            group: None,
            v1_peers: V1PeersProp::default(),
            runtime_dir: None,
            cuda_device_id: -1,
            cuda_share: CudaShareProp::default(),
        }
    }
}

/// What a stream needs once started.
#[derive(Debug, Default)]
struct State {
    /// The settings as they were at `start()`.
    settings: Settings,
    /// The publisher, made at `set_caps()`.
    publisher: Option<Publisher>,
    /// The negotiated caps as GStreamer and cuframes see them.
    info: Option<gst_video::VideoInfo>,
    /// Whether `wait-subscribers` was satisfied (once per publisher).
    subscribers_joined: bool,
    /// PTS for buffers without one: the previous one plus a frame.
    next_pts_ns: i64,
    /// The caps are CUDA memory: frames are copied device to device.
    cuda: bool,
}

/// The element.
#[derive(Debug, Default)]
pub struct CuframesSink {
    settings: Mutex<Settings>,
    state: Mutex<State>,
    /// The CUDA context, shared with the neighbours (`gst.cuda.context`).
    cuda: Mutex<ElementCuda>,
    /// Set by `unlock()` (flushing, going down): waits give up.
    unlocked: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CuframesSink {
    /// The publisher's key, for messages.
    fn key(&self) -> String {
        lock(&self.settings).key.clone().unwrap_or_default()
    }

    /// A buffer of CUDA memory: its planes copied device to device into the
    /// next slot, after the stream that wrote them.
    fn render_cuda(
        &self,
        state: &mut State,
        buffer: &gst::Buffer,
        info: &gst_video::VideoInfo,
    ) -> Result<gst::FlowSuccess, gst::FlowError> {
        let cuda = GstCuda::get().map_err(|_| gst::FlowError::NotNegotiated)?;
        let frame = match DeviceFrame::map(cuda, buffer.as_ref(), info, false) {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                gst::element_imp_error!(
                    self,
                    gst::StreamError::Format,
                    ("the caps say CUDA memory but the buffer is not")
                );
                return Err(gst::FlowError::Error);
            }
            Err(m) => {
                gst::element_imp_error!(self, gst::StreamError::Format, ("{}", m));
                return Err(gst::FlowError::Error);
            }
        };
        let publisher = state.publisher.as_mut().expect("checked by render");
        let planes: Vec<DevicePlane> = (0..publisher.layout().planes().len())
            .map(|p| {
                let (ptr, pitch) = frame.plane(p);
                DevicePlane { ptr, pitch }
            })
            .collect();
        let (pts_ns, frame_ns) = pts_of(state, buffer, info);
        let publisher = state.publisher.as_mut().expect("checked by render");
        let published = publisher.publish_device(&planes, pts_ns);
        drop(frame);
        self.published(state, published, pts_ns, frame_ns)
    }

    /// The outcome of one publish.
    fn published(
        &self,
        state: &mut State,
        published: cuframes::Result<u64>,
        pts_ns: i64,
        frame_ns: i64,
    ) -> Result<gst::FlowSuccess, gst::FlowError> {
        match published {
            Ok(seq) => {
                gst::trace!(CAT, imp = self, "published seq {seq} pts {pts_ns} ns");
                state.next_pts_ns = pts_ns.saturating_add(frame_ns);
                Ok(gst::FlowSuccess::Ok)
            }
            Err(e) => {
                gst::element_imp_error!(self, gst::ResourceError::Write, ("cannot publish a frame: {}", e));
                Err(gst::FlowError::Error)
            }
        }
    }

    /// Makes the publisher for `info` (after dropping any previous one).
    fn create_publisher(
        &self,
        state: &mut State,
        info: &gst_video::VideoInfo,
        cuda: bool,
    ) -> Result<(), gst::ErrorMessage> {
        let s = &state.settings;
        let key = s.key.clone().unwrap_or_default();
        let format: PixelFormat = crate::formats::from_gst(info.format()).ok_or_else(|| {
            gst::error_msg!(
                gst::CoreError::Negotiation,
                ("cuframes has no format like {}", info.format())
            )
        })?;
        let mut config = PublisherConfig::new(key.clone(), format, info.width(), info.height());
        config.ring_size = s.ring_size as usize;
        config.policy = s.policy.into();
        config.ack_timeout = Duration::from_millis(u64::from(s.ack_timeout_ms));
        config.startup_timeout = Duration::from_millis(u64::from(s.startup_timeout_ms));
        config.memory = MemoryRequest::Host;
        if cuda {
            // Slots in the GPU memory of the context upstream shares; the
            // frames are copied into them device to device.
            let handle = ElementCuda::ensure(&self.cuda, self.obj().upcast_ref(), s.cuda_device_id)
                .map_err(|e| gst::error_msg!(gst::ResourceError::Settings, ("CUDA memory: {}", e)))?;
            config.memory = MemoryRequest::Cuda;
            config.cuda_share = s.cuda_share.into();
            config.cuda = Some(CudaBinding {
                context: handle,
                stream: 0,
            });
        }
        state.cuda = cuda;
        config.group = s.group.clone();
        config.v1_peers = s.v1_peers.into();
        config.runtime_dir = s.runtime_dir.clone().map(Into::into);
        let fps = info.fps();
        config.fps = (fps.numer() > 0 && fps.denom() > 0).then(|| (fps.numer() as u32, fps.denom() as u32));
        // The old publisher goes first: a new one on the same key needs it.
        state.publisher = None;
        let publisher = Publisher::create(config).map_err(|e| {
            let kind = match e.kind() {
                ErrorKind::InvalidArgument | ErrorKind::Format => gst::ResourceError::Settings,
                ErrorKind::AlreadyExists | ErrorKind::Permission => gst::ResourceError::Busy,
                ErrorKind::Exhausted => gst::ResourceError::NoSpaceLeft,
                _ => gst::ResourceError::OpenWrite,
            };
            gst::error_msg!(kind, ("cannot publish '{}': {}", key, e))
        })?;
        gst::info!(
            CAT,
            imp = self,
            "publishing '{}': {} {}x{}, ring {}, {}, {} memory (socket {})",
            key,
            format,
            info.width(),
            info.height(),
            publisher.ring_size(),
            publisher.policy().name(),
            publisher.memory().name(),
            publisher.paths().socket.display()
        );
        state.publisher = Some(publisher);
        state.info = Some(info.clone());
        state.subscribers_joined = state.settings.wait_subscribers == 0;
        Ok(())
    }

    /// Holds the first frame until `wait-subscribers` subscribers joined.
    fn wait_for_subscribers(&self, state: &mut State) -> Result<(), gst::FlowError> {
        let wanted = state.settings.wait_subscribers as usize;
        let wait = Duration::from_millis(u64::from(state.settings.wait_timeout_ms));
        let publisher = state.publisher.as_ref().ok_or(gst::FlowError::NotNegotiated)?;
        gst::info!(CAT, imp = self, "waiting for {wanted} subscriber(s)");
        let deadline = Instant::now() + wait;
        loop {
            if self.unlocked.load(Ordering::SeqCst) {
                return Err(gst::FlowError::Flushing);
            }
            match publisher.wait_for_subscribers(wanted, Duration::from_millis(20)) {
                Ok(()) => break,
                Err(e) if e.kind() == ErrorKind::Timeout && Instant::now() < deadline => {}
                Err(e) if e.kind() == ErrorKind::Timeout => {
                    gst::element_imp_error!(
                        self,
                        gst::ResourceError::Busy,
                        (
                            "only {} of {} subscriber(s) joined '{}' within {}",
                            publisher.subscriber_count(),
                            wanted,
                            publisher.key(),
                            describe(Some(wait))
                        )
                    );
                    return Err(gst::FlowError::Error);
                }
                Err(e) => {
                    gst::element_imp_error!(self, gst::ResourceError::Failed, ("{}", e));
                    return Err(gst::FlowError::Error);
                }
            }
        }
        state.subscribers_joined = true;
        Ok(())
    }
}

/// A buffer's PTS in ns (none: the previous one plus a frame), and one
/// frame's duration at the negotiated rate (0: unknown).
fn pts_of(state: &State, buffer: &gst::Buffer, info: &gst_video::VideoInfo) -> (i64, i64) {
    let fps = info.fps();
    let frame_ns = match fps.numer() {
        n if n > 0 => 1_000_000_000 * i64::from(fps.denom()) / i64::from(n),
        _ => 0,
    };
    let pts_ns = buffer.pts().map_or(state.next_pts_ns, |t| {
        i64::try_from(t.nseconds()).unwrap_or(i64::MAX)
    });
    (pts_ns, frame_ns)
}

#[glib::object_subclass]
impl ObjectSubclass for CuframesSink {
    const NAME: &'static str = "GstCuframesSink";
    type Type = super::CuframesSink;
    type ParentType = gst_base::BaseSink;
}

impl ObjectImpl for CuframesSink {
    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
            vec![
                glib::ParamSpecString::builder("key")
                    .nick("Key")
                    .blurb("Key to publish under (required): 1-63 characters from a-z A-Z 0-9 _ -")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("ring-size")
                    .nick("Ring size")
                    .blurb("Slots in the ring; 16 leaves room for the frames consumers' queues and encoders hold")
                    .minimum(1)
                    .maximum(16)
                    .default_value(DEFAULT_RING_SIZE)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("policy", PolicyProp::default())
                    .nick("Policy")
                    .blurb("What to do when the ring is full")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("ack-timeout")
                    .nick("ACK timeout (ms)")
                    .blurb(
                        "Under strict-wait, how long (ms) a subscriber may hold up the ring before it is dropped; \
                         also the least time the end of the stream waits for subscribers to take the last frame",
                    )
                    .default_value(DEFAULT_ACK_TIMEOUT_MS)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("startup-timeout")
                    .nick("Startup timeout (ms)")
                    .blurb(
                        "Under strict-wait, the same for a subscriber that joined less than this long (ms) ago, \
                         while its consumer is still starting",
                    )
                    .default_value(DEFAULT_STARTUP_TIMEOUT_MS)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("wait-subscribers")
                    .nick("Wait for subscribers")
                    .blurb("Hold the first frame until this many subscribers are active (0-31)")
                    .maximum(cuframes::protocol::LAST_SUBSCRIBER_BIT)
                    .default_value(DEFAULT_WAIT_SUBSCRIBERS)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("wait-timeout")
                    .nick("Wait timeout (ms)")
                    .blurb("How long (ms) wait-subscribers waits before the element fails")
                    .default_value(DEFAULT_WAIT_TIMEOUT_MS)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("group")
                    .nick("Group")
                    .blurb(
                        "A group (name or number) whose members may subscribe besides this user and root \
                         (socket 0660, shared memory 0640); none: this user only (0600)",
                    )
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("v1-peers", V1PeersProp::default())
                    .nick("Protocol-v1 peers")
                    .blurb(
                        "Which subscribers speaking plain protocol v1 (ACKing in shared memory all of them \
                         can write) to admit; see cuframes' docs/security.md",
                    )
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
                        "CUDA memory: the device whose context to use when no neighbour shares one \
                         (gst.cuda.context); -1: any",
                    )
                    .minimum(-1)
                    .default_value(-1)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("cuda-share", CudaShareProp::default())
                    .nick("CUDA sharing")
                    .blurb("CUDA memory: how the slots are shared with subscribers")
                    .mutable_ready()
                    .build(),
            ]
        });
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        let mut s = lock(&self.settings);
        match pspec.name() {
            "key" => s.key = value.get().expect("type checked upstream"),
            "ring-size" => s.ring_size = value.get().expect("type checked upstream"),
            "policy" => s.policy = value.get().expect("type checked upstream"),
            "ack-timeout" => s.ack_timeout_ms = value.get().expect("type checked upstream"),
            "startup-timeout" => s.startup_timeout_ms = value.get().expect("type checked upstream"),
            "wait-subscribers" => s.wait_subscribers = value.get().expect("type checked upstream"),
            "wait-timeout" => s.wait_timeout_ms = value.get().expect("type checked upstream"),
            "group" => s.group = value.get().expect("type checked upstream"),
            "v1-peers" => s.v1_peers = value.get().expect("type checked upstream"),
            "runtime-dir" => s.runtime_dir = value.get().expect("type checked upstream"),
            "cuda-device-id" => s.cuda_device_id = value.get().expect("type checked upstream"),
            "cuda-share" => s.cuda_share = value.get().expect("type checked upstream"),
            other => unreachable!("no property {other}"),
        }
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        let s = lock(&self.settings);
        match pspec.name() {
            "key" => s.key.to_value(),
            "ring-size" => s.ring_size.to_value(),
            "policy" => s.policy.to_value(),
            "ack-timeout" => s.ack_timeout_ms.to_value(),
            "startup-timeout" => s.startup_timeout_ms.to_value(),
            "wait-subscribers" => s.wait_subscribers.to_value(),
            "wait-timeout" => s.wait_timeout_ms.to_value(),
            "group" => s.group.to_value(),
            "v1-peers" => s.v1_peers.to_value(),
            "runtime-dir" => s.runtime_dir.to_value(),
            "cuda-device-id" => s.cuda_device_id.to_value(),
            "cuda-share" => s.cuda_share.to_value(),
            other => unreachable!("no property {other}"),
        }
    }
}

impl GstObjectImpl for CuframesSink {}

impl ElementImpl for CuframesSink {
    fn set_context(&self, context: &gst::Context) {
        let device = lock(&self.settings).cuda_device_id;
        lock(&self.cuda).set_context(self.obj().upcast_ref(), context, device);
        self.parent_set_context(context);
    }

    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            gst::subclass::ElementMetadata::new(
                "cuframes publisher",
                "Sink/Video",
                "Publishes raw video frames under a cuframes key (host shared memory) for other processes \
                 on this host to read: FFmpeg's -f cuframes -i KEY, cuframessrc, Python, the cuframes CLI",
                "The cuframes authors",
            )
        });
        Some(&*METADATA)
    }

    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(|| {
            vec![
                gst::PadTemplate::new(
                    "sink",
                    gst::PadDirection::Sink,
                    gst::PadPresence::Always,
                    &crate::formats::template_caps(),
                )
                .expect("valid pad template"),
            ]
        });
        TEMPLATES.as_ref()
    }
}

impl BaseSinkImpl for CuframesSink {
    fn start(&self) -> Result<(), gst::ErrorMessage> {
        let settings = lock(&self.settings).clone();
        let key = settings.key.clone().unwrap_or_default();
        if key.is_empty() {
            return Err(gst::error_msg!(
                gst::ResourceError::NotFound,
                ("no key: set the key property to the key to publish under")
            ));
        }
        cuframes::validate_key(&key).map_err(|e| gst::error_msg!(gst::ResourceError::Settings, ("{}", e)))?;
        *lock(&self.state) = State {
            settings,
            ..State::default()
        };
        gst::debug!(CAT, imp = self, "started for '{key}'");
        Ok(())
    }

    fn stop(&self) -> Result<(), gst::ErrorMessage> {
        // Dropping the publisher sends SHUTDOWN to its subscribers (they end
        // after the frames still in the ring) and removes the key.
        let mut state = lock(&self.state);
        lock(&self.cuda).clear();
        if let Some(publisher) = state.publisher.take() {
            gst::info!(
                CAT,
                imp = self,
                "'{}' done: {} frames published",
                publisher.key(),
                publisher.stats().published
            );
        }
        *state = State::default();
        Ok(())
    }

    fn set_caps(&self, caps: &gst::Caps) -> Result<(), gst::LoggableError> {
        let info = gst_video::VideoInfo::from_caps(caps)
            .map_err(|_| gst::loggable_error!(CAT, "cannot read caps {}", caps))?;
        let mut state = lock(&self.state);
        if let (Some(old), Some(_)) = (&state.info, &state.publisher)
            && state.cuda == crate::formats::is_cuda(caps)
            && old.format() == info.format()
            && old.width() == info.width()
            && old.height() == info.height()
            && old.fps() == info.fps()
        {
            // Same frames (only strides or colorimetry may differ): keep
            // the publisher and its subscribers.
            state.info = Some(info);
            return Ok(());
        }
        if let Err(message) = self.create_publisher(&mut state, &info, crate::formats::is_cuda(caps)) {
            drop(state);
            self.post_error_message(message);
            return Err(gst::loggable_error!(CAT, "no publisher for caps {}", caps));
        }
        Ok(())
    }

    fn query(&self, query: &mut gst::QueryRef) -> bool {
        if query.type_() == gst::QueryType::Context
            && lock(&self.cuda).answer_query(self.obj().upcast_ref(), query)
        {
            return true;
        }
        BaseSinkImplExt::parent_query(self, query)
    }

    fn propose_allocation(&self, query: &mut gst::query::Allocation) -> Result<(), gst::LoggableError> {
        // Any strides and plane offsets: the copy goes row by row.
        query.add_allocation_meta::<gst_video::VideoMeta>(None);
        self.parent_propose_allocation(query)
    }

    fn render(&self, buffer: &gst::Buffer) -> Result<gst::FlowSuccess, gst::FlowError> {
        let mut state = lock(&self.state);
        if state.publisher.is_none() {
            gst::element_imp_error!(
                self,
                gst::CoreError::Negotiation,
                ("no caps before the first buffer")
            );
            return Err(gst::FlowError::NotNegotiated);
        }
        if !state.subscribers_joined {
            self.wait_for_subscribers(&mut state)?;
        }
        let info = state.info.clone().ok_or(gst::FlowError::NotNegotiated)?;
        if state.cuda {
            return self.render_cuda(&mut state, buffer, &info);
        }
        let frame =
            gst_video::VideoFrameRef::from_buffer_ref_readable(buffer.as_ref(), &info).map_err(|_| {
                gst::element_imp_error!(
                    self,
                    gst::StreamError::Format,
                    ("cannot map the buffer as a video frame")
                );
                gst::FlowError::Error
            })?;
        let publisher = state.publisher.as_mut().expect("checked above");
        let layout = publisher.layout().clone();
        // Every plane's rows, checked before the slot is taken.
        let mut sources = Vec::with_capacity(layout.planes().len());
        for (p, plane) in layout.planes().iter().enumerate() {
            let stride = usize::try_from(frame.plane_stride()[p]).unwrap_or(0);
            let data = frame.plane_data(p as u32).unwrap_or(&[]);
            let needed = stride * (plane.rows - 1) + plane.row_bytes;
            if stride < plane.row_bytes || data.len() < needed {
                gst::element_imp_error!(
                    self,
                    gst::StreamError::Format,
                    (
                        "plane {} of the buffer is too small: {} bytes at stride {}, {} rows of {} bytes wanted",
                        p,
                        data.len(),
                        stride,
                        plane.rows,
                        plane.row_bytes
                    )
                );
                return Err(gst::FlowError::Error);
            }
            sources.push((data, stride));
        }
        let (pts_ns, frame_ns) = pts_of(&state, buffer, &info);
        let publisher = state.publisher.as_mut().expect("checked above");
        let published = publisher.publish_with(pts_ns, |slots| {
            for ((slot, (data, stride)), plane) in slots.iter_mut().zip(&sources).zip(layout.planes()) {
                for row in 0..plane.rows {
                    let from = &data[row * stride..row * stride + plane.row_bytes];
                    slot[row * plane.pitch..row * plane.pitch + plane.row_bytes].copy_from_slice(from);
                }
            }
        });
        drop(frame);
        self.published(&mut state, published, pts_ns, frame_ns)
    }

    fn event(&self, event: gst::Event) -> bool {
        if let gst::EventView::Eos(_) = event.view() {
            // The muxer's rule for the end of a stream: wait until every
            // subscriber has taken the last frame, at most
            // max(ack-timeout, 1 s); the publisher goes at stop().
            let state = lock(&self.state);
            if let Some(publisher) = &state.publisher {
                let wait =
                    Duration::from_millis(u64::from(state.settings.ack_timeout_ms)).max(END_OF_STREAM_WAIT);
                if let Err(e) = publisher.wait_delivered(wait) {
                    gst::debug!(CAT, imp = self, "end of stream of '{}': {}", self.key(), e);
                }
            }
        }
        self.parent_event(event)
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
