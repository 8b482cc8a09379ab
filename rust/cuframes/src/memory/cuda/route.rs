//! Which way a subscriber reaches the publisher's GPU memory (D21):
//! on its own device (as always), over peer access from another device, or
//! not at all. The decision is pure ([`route`], [`locate`]); [`plan`] asks
//! the driver only through [`Devices`], so every branch is tested without a
//! GPU, and only when the publisher's GPU is known and not the subscriber's
//! (the same-device path makes no driver call beyond today's).

use crate::error::{Error, ErrorKind, Result};

/// A UUID of all zeros: a publisher that did not say (another
/// implementation, or an older writer of the frame meta).
pub(crate) const UNKNOWN_UUID: [u8; 16] = [0; 16];

/// Where the publisher's GPU is among this process's devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Located {
    /// The publisher did not name its GPU (zero UUID).
    Unknown,
    /// The subscriber's own device (same UUID).
    Same,
    /// This process's device ordinal.
    At(i32),
    /// No device of this process has that UUID (hidden by
    /// `CUDA_VISIBLE_DEVICES`, or another machine's GPU).
    Missing,
}

/// How the subscriber opens the publisher's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// In the subscriber's context as always: same device, or the
    /// publisher's device is unknown (the driver decides, as before).
    Local,
    /// In the subscriber's context, reading the publisher's device (this
    /// ordinal) over peer access.
    Peer { publisher: i32 },
    /// Another device that the subscriber's cannot access: refused.
    CannotPeer { publisher: i32 },
    /// The publisher's device is not visible here: refused.
    NotVisible,
}

/// The decision: `subscriber` is the subscriber's device ordinal,
/// `publisher` where the publisher's GPU is, `can_peer` whether the
/// subscriber's device can access the publisher's (only looked at for
/// another device).
pub(crate) fn route(subscriber: i32, publisher: Located, can_peer: bool) -> Route {
    match publisher {
        Located::Unknown | Located::Same => Route::Local,
        Located::At(p) if p == subscriber => Route::Local,
        Located::At(p) if can_peer => Route::Peer { publisher: p },
        Located::At(p) => Route::CannotPeer { publisher: p },
        Located::Missing => Route::NotVisible,
    }
}

/// Finds `publisher_uuid` among this process's devices, given as
/// (ordinal, UUID) pairs; `subscriber_uuid` is the subscriber's device.
pub(crate) fn locate(
    publisher_uuid: [u8; 16],
    subscriber_uuid: [u8; 16],
    devices: impl IntoIterator<Item = (i32, [u8; 16])>,
) -> Located {
    if publisher_uuid == UNKNOWN_UUID {
        return Located::Unknown;
    }
    if publisher_uuid == subscriber_uuid {
        return Located::Same;
    }
    devices
        .into_iter()
        .find(|&(_, uuid)| uuid == publisher_uuid)
        .map_or(Located::Missing, |(ordinal, _)| Located::At(ordinal))
}

/// The driver calls the plan needs (a fake in the tests). Devices are the
/// driver's `CUdevice` handles.
pub(crate) trait Devices {
    fn count(&self) -> Result<i32>;
    fn get(&self, ordinal: i32) -> Result<i32>;
    fn uuid(&self, device: i32) -> Result<[u8; 16]>;
    fn name(&self, device: i32) -> String;
    fn can_access_peer(&self, device: i32, peer: i32) -> Result<bool>;
}

/// A device as error messages name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Described {
    pub ordinal: Option<i32>,
    pub name: String,
    pub uuid: [u8; 16],
}

impl std::fmt::Display for Described {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ordinal {
            Some(ordinal) => write!(f, "device {ordinal} ({}, {})", self.name, uuid_text(&self.uuid)),
            None => write!(f, "a device ({}, {})", self.name, uuid_text(&self.uuid)),
        }
    }
}

/// nvidia-smi's spelling: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub(crate) fn uuid_text(uuid: &[u8; 16]) -> String {
    let hex = |range: std::ops::Range<usize>| -> String {
        uuid[range].iter().map(|b| format!("{b:02x}")).collect()
    };
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex(0..4),
        hex(4..6),
        hex(6..8),
        hex(8..10),
        hex(10..16)
    )
}

/// The refusal for a route that cannot work.
pub(crate) fn refusal(route: Route, subscriber: &Described, publisher: &Described) -> Option<Error> {
    let message = match route {
        Route::Local | Route::Peer { .. } => return None,
        Route::CannotPeer { publisher: ordinal } => format!(
            "the publisher's frames are on {publisher}, which this subscriber's CUDA context on {subscriber} cannot reach: the two GPUs cannot peer (cuDeviceCanAccessPeer is 0; ordinals as this process numbers them). Subscribe on the publisher's GPU (cuda_device {ordinal}, or a CUDA context on it); copying frames to host memory (FFmpeg's copy mode) maps them on this GPU first, so it is no workaround across GPUs that cannot peer yet"
        ),
        Route::NotVisible => format!(
            "the publisher's frames are on a GPU ({}) that this process cannot see (CUDA_VISIBLE_DEVICES?); this subscriber's CUDA context is on {subscriber}. Make the publisher's GPU visible and subscribe on it (or on a GPU that can peer with it)",
            uuid_text(&publisher.uuid)
        ),
    };
    Some(Error::new(ErrorKind::Unsupported, message))
}

/// The route from the subscriber's device (`CUdevice` and UUID) to the
/// publisher's GPU, or the UNSUPPORTED error that names both. With the
/// publisher's UUID unknown or the subscriber's own, no driver call is made.
pub(crate) fn plan(
    devices: &impl Devices,
    subscriber: i32,
    subscriber_uuid: [u8; 16],
    publisher_uuid: [u8; 16],
) -> Result<Route> {
    match locate(publisher_uuid, subscriber_uuid, []) {
        Located::Unknown | Located::Same => return Ok(Route::Local),
        Located::At(_) | Located::Missing => {}
    }
    let mut local = Vec::new(); // (ordinal, CUdevice, uuid)
    for ordinal in 0..devices.count()? {
        let device = devices.get(ordinal)?;
        local.push((ordinal, device, devices.uuid(device)?));
    }
    let located = locate(
        publisher_uuid,
        subscriber_uuid,
        local.iter().map(|&(ordinal, _, uuid)| (ordinal, uuid)),
    );
    let ours = local.iter().find(|&&(_, device, _)| device == subscriber);
    let subscriber_ordinal = ours.map_or(subscriber, |&(ordinal, _, _)| ordinal);
    let publisher_device = match located {
        Located::At(p) => local
            .iter()
            .find(|&&(ordinal, _, _)| ordinal == p)
            .map(|&(_, d, _)| d),
        _ => None,
    };
    let can_peer = match publisher_device {
        Some(peer) if peer != subscriber => devices.can_access_peer(subscriber, peer)?,
        _ => false,
    };
    let decided = route(subscriber_ordinal, located, can_peer);
    let described_subscriber = Described {
        ordinal: ours.map(|&(ordinal, _, _)| ordinal),
        name: devices.name(subscriber),
        uuid: subscriber_uuid,
    };
    let described_publisher = Described {
        ordinal: match located {
            Located::At(p) => Some(p),
            _ => None,
        },
        name: publisher_device.map_or_else(|| "not visible".into(), |d| devices.name(d)),
        uuid: publisher_uuid,
    };
    match refusal(decided, &described_subscriber, &described_publisher) {
        Some(error) => Err(error),
        None => Ok(decided),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn uuid(n: u8) -> [u8; 16] {
        let mut u = [0xa0; 16];
        u[15] = n;
        u
    }

    #[test]
    fn route_branches() {
        assert_eq!(route(0, Located::Unknown, false), Route::Local);
        assert_eq!(route(0, Located::Unknown, true), Route::Local);
        assert_eq!(route(1, Located::Same, false), Route::Local);
        assert_eq!(route(1, Located::At(1), false), Route::Local);
        assert_eq!(route(1, Located::At(0), true), Route::Peer { publisher: 0 });
        assert_eq!(
            route(1, Located::At(0), false),
            Route::CannotPeer { publisher: 0 }
        );
        assert_eq!(route(0, Located::Missing, true), Route::NotVisible);
        assert_eq!(route(0, Located::Missing, false), Route::NotVisible);
    }

    #[test]
    fn locate_by_uuid() {
        let devices = [(0, uuid(1)), (1, uuid(2)), (2, uuid(3))];
        assert_eq!(locate(UNKNOWN_UUID, uuid(1), devices), Located::Unknown);
        assert_eq!(locate(uuid(2), uuid(2), devices), Located::Same);
        assert_eq!(locate(uuid(3), uuid(1), devices), Located::At(2));
        assert_eq!(locate(uuid(9), uuid(1), devices), Located::Missing);
        assert_eq!(locate(uuid(9), uuid(1), []), Located::Missing);
    }

    #[test]
    fn uuid_is_spelled_like_nvidia_smi() {
        let u = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
        ];
        assert_eq!(uuid_text(&u), "GPU-12345678-9abc-def0-0123-456789abcdef");
    }

    /// Devices `uuids` (CUdevice handles 10, 11, … for ordinals 0, 1, …),
    /// `peers` the (device, peer) handle pairs that can access each other;
    /// counts driver calls.
    struct Fake {
        uuids: Vec<[u8; 16]>,
        peers: Vec<(i32, i32)>,
        calls: Cell<usize>,
    }

    impl Fake {
        fn new(uuids: &[[u8; 16]], peers: &[(i32, i32)]) -> Fake {
            Fake {
                uuids: uuids.to_vec(),
                peers: peers.to_vec(),
                calls: Cell::new(0),
            }
        }
        fn call(&self) {
            self.calls.set(self.calls.get() + 1);
        }
    }

    impl Devices for Fake {
        fn count(&self) -> Result<i32> {
            self.call();
            Ok(self.uuids.len() as i32)
        }
        fn get(&self, ordinal: i32) -> Result<i32> {
            self.call();
            Ok(10 + ordinal)
        }
        fn uuid(&self, device: i32) -> Result<[u8; 16]> {
            self.call();
            Ok(self.uuids[(device - 10) as usize])
        }
        fn name(&self, device: i32) -> String {
            format!("Fake GPU {}", device - 10)
        }
        fn can_access_peer(&self, device: i32, peer: i32) -> Result<bool> {
            self.call();
            assert_ne!(device, peer, "never asked for the same device");
            Ok(self.peers.contains(&(device, peer)))
        }
    }

    #[test]
    fn same_device_and_unknown_make_no_driver_call() {
        let fake = Fake::new(&[uuid(1), uuid(2)], &[]);
        assert_eq!(plan(&fake, 10, uuid(1), uuid(1)).unwrap(), Route::Local);
        assert_eq!(plan(&fake, 11, uuid(2), UNKNOWN_UUID).unwrap(), Route::Local);
        assert_eq!(fake.calls.get(), 0);
    }

    #[test]
    fn another_device_that_can_peer() {
        let fake = Fake::new(&[uuid(1), uuid(2)], &[(11, 10)]);
        assert_eq!(
            plan(&fake, 11, uuid(2), uuid(1)).unwrap(),
            Route::Peer { publisher: 0 }
        );
        // Peer access is asked in the subscriber's direction only.
        let fake = Fake::new(&[uuid(1), uuid(2)], &[(10, 11)]);
        assert!(plan(&fake, 11, uuid(2), uuid(1)).is_err());
    }

    #[test]
    fn another_device_that_cannot_peer_names_both() {
        let fake = Fake::new(&[uuid(1), uuid(2)], &[]);
        let e = plan(&fake, 10, uuid(1), uuid(2)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        let text = e.to_string();
        eprintln!("{text}");
        for phrase in [
            "device 1 (Fake GPU 1, GPU-a0a0a0a0-a0a0-a0a0-a0a0-a0a0a0a0a002)",
            "cuda_device 1",
            "device 0 (Fake GPU 0, GPU-a0a0a0a0-a0a0-a0a0-a0a0-a0a0a0a0a001)",
            "cannot peer",
            "Subscribe on the publisher's GPU",
            "copy mode",
        ] {
            assert!(text.contains(phrase), "{text:?} lacks {phrase:?}");
        }
    }

    #[test]
    fn publisher_gpu_not_visible() {
        let fake = Fake::new(&[uuid(1)], &[]);
        let e = plan(&fake, 10, uuid(1), uuid(7)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        let text = e.to_string();
        eprintln!("{text}");
        for phrase in [
            "GPU-a0a0a0a0-a0a0-a0a0-a0a0-a0a0a0a0a007",
            "cannot see",
            "CUDA_VISIBLE_DEVICES",
            "device 0 (Fake GPU 0, GPU-a0a0a0a0-a0a0-a0a0-a0a0-a0a0a0a0a001)",
        ] {
            assert!(text.contains(phrase), "{text:?} lacks {phrase:?}");
        }
    }

    #[test]
    fn ordinals_come_from_the_driver_not_the_handles() {
        // Three devices; the subscriber is on ordinal 2 (handle 12), the
        // publisher on ordinal 1 (handle 11).
        let fake = Fake::new(&[uuid(1), uuid(2), uuid(3)], &[(12, 11)]);
        assert_eq!(
            plan(&fake, 12, uuid(3), uuid(2)).unwrap(),
            Route::Peer { publisher: 1 }
        );
    }

    #[test]
    fn driver_errors_propagate() {
        struct Broken;
        impl Devices for Broken {
            fn count(&self) -> Result<i32> {
                Err(Error::new(ErrorKind::Cuda, "cuDeviceGetCount failed: X"))
            }
            fn get(&self, _: i32) -> Result<i32> {
                unreachable!()
            }
            fn uuid(&self, _: i32) -> Result<[u8; 16]> {
                unreachable!()
            }
            fn name(&self, _: i32) -> String {
                unreachable!()
            }
            fn can_access_peer(&self, _: i32, _: i32) -> Result<bool> {
                unreachable!()
            }
        }
        let e = plan(&Broken, 0, uuid(1), uuid(2)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cuda);
        // …but not on the same-device path, which never asks.
        assert_eq!(plan(&Broken, 0, uuid(1), uuid(1)).unwrap(), Route::Local);
    }
}
