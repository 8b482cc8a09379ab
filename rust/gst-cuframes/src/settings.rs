//! What both elements share: their enum property types and small helpers.

use std::time::Duration;

use gst::glib;

/// The sink's `policy` (cuframes' [`cuframes::Policy`]).
#[derive(Debug, Default, Eq, PartialEq, Hash, Clone, Copy, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstCuframesPolicy")]
pub enum PolicyProp {
    /// Never wait.
    #[default]
    #[enum_value(
        name = "Never wait: overwrite the oldest slot; slow subscribers lose frames and are told",
        nick = "drop-oldest"
    )]
    DropOldest = 0,
    /// Wait for every subscriber.
    #[enum_value(
        name = "Wait until every subscriber released a slot before reusing it, up to ack-timeout",
        nick = "strict-wait"
    )]
    StrictWait = 1,
}

impl From<PolicyProp> for cuframes::Policy {
    fn from(p: PolicyProp) -> cuframes::Policy {
        match p {
            PolicyProp::DropOldest => cuframes::Policy::DropOldest,
            PolicyProp::StrictWait => cuframes::Policy::StrictWait,
        }
    }
}

/// The sink's `v1-peers` (cuframes' [`cuframes::V1Peers`]).
#[derive(Debug, Default, Eq, PartialEq, Hash, Clone, Copy, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstCuframesV1Peers")]
pub enum V1PeersProp {
    /// None.
    #[enum_value(
        name = "None: every subscriber must ACK in an area of its own",
        nick = "refuse"
    )]
    Refuse = 0,
    /// This user's and root's.
    #[default]
    #[enum_value(
        name = "Only this user's and root's, who could write the shared memory anyway",
        nick = "same-user"
    )]
    SameUser = 1,
    /// Every admitted one.
    #[enum_value(
        name = "Every admitted peer (with group, the shared memory becomes 0660)",
        nick = "allow"
    )]
    Allow = 2,
}

impl From<V1PeersProp> for cuframes::V1Peers {
    fn from(v: V1PeersProp) -> cuframes::V1Peers {
        match v {
            V1PeersProp::Refuse => cuframes::V1Peers::Refuse,
            V1PeersProp::SameUser => cuframes::V1Peers::SameUser,
            V1PeersProp::Allow => cuframes::V1Peers::Allow,
        }
    }
}

/// The sink's `cuda-share` (cuframes' [`cuframes::CudaShareRequest`]).
#[derive(Debug, Default, Eq, PartialEq, Hash, Clone, Copy, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstCuframesCudaShare")]
pub enum CudaShareProp {
    /// File descriptors where the GPU can, else IPC handles.
    #[default]
    #[enum_value(
        name = "File descriptors where the GPU can share them (they cross containers), else CUDA IPC handles",
        nick = "auto"
    )]
    Auto = 0,
    /// File descriptors, or fail.
    #[enum_value(name = "File descriptors (VMM), or fail", nick = "fd")]
    Fd = 1,
    /// IPC handles.
    #[enum_value(
        name = "CUDA IPC handles (protocol v1; subscribers must share this PID namespace)",
        nick = "ipc"
    )]
    Ipc = 2,
}

impl From<CudaShareProp> for cuframes::CudaShareRequest {
    fn from(c: CudaShareProp) -> cuframes::CudaShareRequest {
        match c {
            CudaShareProp::Auto => cuframes::CudaShareRequest::Auto,
            CudaShareProp::Fd => cuframes::CudaShareRequest::Fd,
            CudaShareProp::Ipc => cuframes::CudaShareRequest::Ipc,
        }
    }
}

/// The source's `mode` (cuframes' [`cuframes::SubscriberMode`]).
#[derive(Debug, Default, Eq, PartialEq, Hash, Clone, Copy, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstCuframesMode")]
pub enum ModeProp {
    /// Every frame.
    #[default]
    #[enum_value(name = "Every frame, in order", nick = "sequential")]
    Sequential = 0,
    /// The newest.
    #[enum_value(name = "Always the newest frame, skipping older ones", nick = "latest")]
    Latest = 1,
}

impl From<ModeProp> for cuframes::SubscriberMode {
    fn from(m: ModeProp) -> cuframes::SubscriberMode {
        match m {
            ModeProp::Sequential => cuframes::SubscriberMode::Sequential,
            ModeProp::Latest => cuframes::SubscriberMode::Latest,
        }
    }
}

/// A millisecond property as a duration; negative: None (forever).
pub fn millis(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// A duration for messages: "5 s", "250 ms", "forever".
pub fn describe(wait: Option<Duration>) -> String {
    match wait {
        None => "forever".into(),
        Some(d) if d.subsec_millis() == 0 => format!("{} s", d.as_secs()),
        Some(d) => format!("{} ms", d.as_millis()),
    }
}
