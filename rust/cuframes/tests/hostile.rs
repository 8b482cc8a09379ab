//! Hostile input: property tests over the TLV decoder and header validation,
//! and peers that send junk while the publisher keeps serving good ones.

mod common;

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use cuframes::wire::*;
use cuframes::{ErrorKind, Publisher, shm};
use proptest::prelude::*;

fn arb_message() -> impl Strategy<Value = Message> {
    let name = "[a-zA-Z0-9 _é-]{0,10}".prop_filter("≤ 31 bytes", |s| s.len() <= 31);
    let meta = (any::<[u32; 6]>(), any::<u64>(), any::<[u32; 3]>()).prop_map(|(a, size, ext)| FrameMeta {
        format: a[0],
        width: a[1],
        height: a[2],
        pitch_y: a[3],
        pitch_uv: a[4],
        bits_per_pixel: a[5],
        frame_size_bytes: size,
        memory_kind: ext[0],
        fps_num: ext[1],
        fps_den: ext[2],
        device_uuid: [0; 16],
        reserved: [0; 4],
    });
    prop_oneof![
        (any::<u32>(), name.clone(), any::<i32>(), any::<u32>()).prop_map(|(v, name, dev, mode)| {
            Message::HelloReq(HelloReq {
                proto_version: v,
                name,
                cuda_device: dev,
                mode,
            })
        }),
        (any::<u32>(), any::<u32>(), any::<u32>(), meta, "/[a-z0-9-]{1,60}").prop_map(
            |(v, ring, own, meta, path)| {
                Message::HelloResp(HelloResp {
                    result: 0,
                    proto_version: v,
                    accept: Some(HelloAccept {
                        ring_size: ring,
                        ownership_mode: own,
                        meta,
                        shm_path: path,
                    }),
                })
            }
        ),
        (i32::MIN..0, any::<u32>()).prop_map(|(result, v)| Message::HelloResp(HelloResp {
            result,
            proto_version: v,
            accept: None
        })),
        any::<u32>().prop_map(|v| Message::SubscribeReq { proto_version: v }),
        (i32::MIN..=0, any::<u32>(), any::<u64>()).prop_map(|(result, bit, seq)| {
            Message::SubscribeResp(SubscribeResp {
                result,
                assigned_bit: bit,
                initial_seq: seq,
            })
        }),
        any::<u32>().prop_map(|reason| Message::Unsubscribe { reason }),
        any::<u32>().prop_map(|purpose| Message::EventFd { purpose }),
        any::<u32>().prop_map(|reason| Message::Shutdown { reason }),
        any::<u64>().prop_map(|nonce| Message::Ping { nonce }),
        any::<u64>().prop_map(|nonce| Message::Pong { nonce }),
        (any::<i32>(), ".{0,200}").prop_map(|(code, message)| Message::Error { code, message }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Arbitrary bytes: never a panic; a decoded message re-encodes to a
    /// message that decodes to itself and takes no more bytes than given.
    #[test]
    fn decoder_survives_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(Some((msg, used))) = Message::decode(&bytes) {
            prop_assert!(used <= bytes.len());
            let again = msg.encode().unwrap();
            prop_assert_eq!(Message::decode(&again).unwrap().unwrap().0, msg);
        }
    }

    /// Arbitrary payloads behind every valid type and a plausible length.
    #[test]
    fn decoder_survives_arbitrary_payloads(
        kind in prop::sample::select(vec![0x01u32, 0x02, 0x03, 0x04, 0x10, 0x20, 0x30, 0xF0, 0xF1, 0xFE]),
        payload in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut bytes = kind.to_le_bytes().to_vec();
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&payload);
        match Message::decode(&bytes) {
            Ok(Some((msg, used))) => {
                prop_assert_eq!(used, bytes.len());
                prop_assert_eq!(msg.type_id(), kind);
            }
            Ok(None) => prop_assert!(false, "a complete frame is never 'need more'"),
            Err(e) => prop_assert_eq!(e.kind(), ErrorKind::Protocol),
        }
    }

    #[test]
    fn valid_messages_round_trip(msg in arb_message()) {
        let bytes = msg.encode().unwrap();
        let (back, used) = Message::decode(&bytes).unwrap().unwrap();
        prop_assert_eq!(back, msg);
        prop_assert_eq!(used, bytes.len());
    }

    /// Arbitrary header bytes: validation never panics, and what it accepts
    /// is in range and self-consistent.
    #[test]
    fn header_validation_survives_arbitrary_bytes(
        bytes in proptest::collection::vec(any::<u8>(), HEADER_SIZE..=HEADER_SIZE),
        fix_magic in any::<bool>(),
    ) {
        let mut header = SharedHeader::from_bytes(bytes.as_slice().try_into().unwrap());
        if fix_magic {
            header.magic = MAGIC;
            header.proto_version = 1;
            header.max_subscribers = 32;
        }
        if let Ok(info) = shm::validate_header(&header) {
            prop_assert!((1..=16).contains(&info.ring_size));
            prop_assert_eq!(info.layout.size() as u64, header.meta.frame_size_bytes);
            prop_assert!(info.layout.width() >= 1 && info.layout.width() <= 16384);
        }
    }

    /// One field of a valid header set to an arbitrary value: accepted only
    /// when the value is in range.
    #[test]
    fn header_validation_checks_each_field(field in 0usize..9, value in any::<u64>()) {
        let mut h = valid_header();
        match field {
            0 => h.ring_size = value,
            1 => h.policy = value,
            2 => h.ownership_mode = value,
            3 => h.max_subscribers = value,
            4 => h.meta.format = value as u32,
            5 => h.meta.width = value as u32,
            6 => h.meta.pitch_y = value as u32,
            7 => h.meta.frame_size_bytes = value,
            _ => h.meta.memory_kind = value as u32,
        }
        let ok = shm::validate_header(&h).is_ok();
        let expected = match field {
            0 => (1..=16).contains(&value),
            1 | 2 => value <= 1,
            3 => value == 32,
            4 => value as u32 == 1,
            5 => value as u32 == 64,
            6 => value as u32 == 256,
            7 => value == 256 * 72,
            _ => value as u32 <= 1,
        };
        prop_assert_eq!(ok, expected);
    }
}

fn valid_header() -> SharedHeader {
    let mut h = SharedHeader::zeroed();
    h.magic = MAGIC;
    h.proto_version = 1;
    h.ring_size = 4;
    h.max_subscribers = 32;
    h.meta = FrameMeta {
        format: 1,
        width: 64,
        height: 48,
        pitch_y: 256,
        pitch_uv: 256,
        bits_per_pixel: 12,
        frame_size_bytes: 256 * 72,
        memory_kind: 1,
        fps_num: 0,
        fps_den: 0,
        device_uuid: [0; 16],
        reserved: [0; 4],
    };
    assert!(shm::validate_header(&h).is_ok());
    h
}

/// Sends `bytes` on a fresh connection and keeps it open for a moment.
fn send_raw(socket: &std::path::Path, bytes: &[u8]) -> UnixStream {
    let mut s = UnixStream::connect(socket).unwrap();
    let _ = s.write_all(bytes);
    s
}

#[test]
fn junk_peers_do_not_disturb_publishing_or_good_subscribers() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("junk");
    let mut cfg = config(&key, dir.path());
    cfg.handshake_timeout = Duration::from_millis(300);
    cfg.ring_size = 8;
    let mut publisher = Publisher::create(cfg).unwrap();
    let socket = publisher.paths().socket.clone();
    let mut good = subscribe(&key, dir.path(), "good");

    let stop = Arc::new(AtomicBool::new(false));
    let published = Arc::new(AtomicU64::new(0));
    let (stop2, published2) = (stop.clone(), published.clone());
    let pub_thread = std::thread::spawn(move || {
        while !stop2.load(Ordering::Relaxed) {
            publish_pattern(&mut publisher);
            published2.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_micros(500));
        }
        publisher
    });
    let reader = std::thread::spawn(move || {
        let (mut ok, mut bad) = (0u64, 0u64);
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            let lease = good.next(SECOND).expect("good subscriber keeps receiving");
            if lease_matches(&lease) {
                ok += 1;
            } else if lease.is_intact() {
                bad += 1;
            }
        }
        (ok, bad, good.stats())
    });

    let hello = Message::HelloReq(HelloReq {
        proto_version: 1,
        name: "x".into(),
        cuda_device: -1,
        mode: 0,
    })
    .encode()
    .unwrap();
    let mut oversized = vec![0x01, 0, 0, 0];
    oversized.extend_from_slice(&5000u32.to_le_bytes());
    oversized.resize(8 + 5000, 0x41);
    let mut junk_peers = vec![
        send_raw(&socket, b"GET / HTTP/1.1\r\nHost: cuframes\r\n\r\n"),
        send_raw(&socket, &[0xFF; 64]),
        send_raw(&socket, &oversized),
        send_raw(&socket, &hello[..hello.len() - 3]), // truncated, then silence
        send_raw(&socket, &[0x99, 0, 0, 0, 0, 0, 0, 0]),
        send_raw(&socket, &[&hello[..], &[0u8; 40][..]].concat()),
        send_raw(&socket, &[&hello[..], &hello[..]].concat()),
    ];
    // Truncated, then the peer closes mid-message.
    drop(send_raw(&socket, &hello[..10]));
    // Descriptors pushed at the publisher are refused.
    {
        let s = UnixStream::connect(&socket).unwrap();
        let fds: Vec<i32> = (0..16).map(|_| s.as_raw_fd()).collect();
        let _ = nix::sys::socket::sendmsg::<nix::sys::socket::UnixAddr>(
            s.as_raw_fd(),
            &[std::io::IoSlice::new(&hello)],
            &[nix::sys::socket::ControlMessage::ScmRights(&fds)],
            nix::sys::socket::MsgFlags::empty(),
            None,
        );
        junk_peers.push(s);
    }
    // A flood of idle connections beyond the pending limit.
    for _ in 0..100 {
        if let Ok(s) = UnixStream::connect(&socket) {
            junk_peers.push(s);
        }
    }
    // A peer that pings without ever reading the answers.
    let pinger = UnixStream::connect(&socket).unwrap();
    let pings: Vec<u8> = (0..20_000u64)
        .flat_map(|n| Message::Ping { nonce: n }.encode().unwrap())
        .collect();
    pinger.set_nonblocking(true).unwrap();
    let _ = (&pinger).write(&pings);

    let (ok, bad, stats) = reader.join().unwrap();
    // After all of that a new subscriber still gets in.
    let mut late = subscribe(&key, dir.path(), "late");
    let lease = late.next(SECOND).unwrap();
    assert!(lease_matches(&lease));
    drop(lease);
    stop.store(true, Ordering::Relaxed);
    let publisher = pub_thread.join().unwrap();
    drop(junk_peers);

    assert_eq!(bad, 0, "no mismatched frame");
    assert!(ok > 500, "frames kept flowing to the good subscriber: {ok}");
    assert_eq!(stats.overwritten, 0);
    assert!(published.load(Ordering::Relaxed) > 500);
    assert!(
        publisher.stats().rejected_connections >= 10,
        "{:?}",
        publisher.stats()
    );
}
