//! Conformance with protocol v1: the shared header byte by byte as a live
//! publisher writes it, every message's encoding, and the spec §7 cases.

mod common;

use std::io::{Read, Write};
use std::mem::{offset_of, size_of};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use common::*;
use cuframes::wire::*;
use cuframes::{ErrorKind, MemoryKind, PixelFormat, Policy, Publisher, shm};

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
fn zero(b: &[u8], range: std::ops::Range<usize>) -> bool {
    b[range].iter().all(|&x| x == 0)
}

#[test]
fn struct_sizes_and_offsets_match_the_spec_tables() {
    assert_eq!(size_of::<FrameMeta>(), 64);
    assert_eq!(size_of::<SlotDescriptor>(), 192);
    assert_eq!(size_of::<SubscriberSlot>(), 128);
    assert_eq!(size_of::<SharedHeader>(), 0x1D00);
    assert_eq!(HEADER_SIZE, 7424);
    let header = [
        (offset_of!(SharedHeader, magic), 0x0000),
        (offset_of!(SharedHeader, proto_version), 0x0004),
        (offset_of!(SharedHeader, lib_version_major), 0x0008),
        (offset_of!(SharedHeader, lib_version_minor), 0x000C),
        (offset_of!(SharedHeader, lib_version_patch), 0x0010),
        (offset_of!(SharedHeader, reserved_a), 0x0014),
        (offset_of!(SharedHeader, producer_pid), 0x0018),
        (offset_of!(SharedHeader, ring_size), 0x0020),
        (offset_of!(SharedHeader, ownership_mode), 0x0028),
        (offset_of!(SharedHeader, policy), 0x0030),
        (offset_of!(SharedHeader, max_subscribers), 0x0038),
        (offset_of!(SharedHeader, meta), 0x0040),
        (offset_of!(SharedHeader, ipc_event_handle), 0x0080),
        (offset_of!(SharedHeader, global_seq), 0x00C0),
        (offset_of!(SharedHeader, subscriber_bitmap), 0x00C8),
        (offset_of!(SharedHeader, shutdown_flag), 0x00D0),
        (offset_of!(SharedHeader, ack_futex), 0x00D8),
        (offset_of!(SharedHeader, publisher_waiting), 0x00DC),
        (offset_of!(SharedHeader, reserved_b), 0x00E0),
        (offset_of!(SharedHeader, slots), 0x0100),
        (offset_of!(SharedHeader, subscribers), 0x0D00),
    ];
    for (i, (actual, spec)) in header.into_iter().enumerate() {
        assert_eq!(actual, spec, "header field #{i}");
    }
    assert_eq!(offset_of!(SlotDescriptor, cuda_ptr_external), 0x60);
    assert_eq!(offset_of!(SlotDescriptor, reserved_b), 0x90);
    assert_eq!(offset_of!(SubscriberSlot, consumer_name), 0x20);
    assert_eq!(offset_of!(SubscriberSlot, reserved), 0x40);
}

/// Reads a live publisher's shared memory as raw bytes and checks every
/// field at its spec offset, and that reserved bytes are zero.
#[test]
fn live_header_is_byte_exact() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("bytes");
    let mut cfg = strict(&key, dir.path(), 4, Duration::from_secs(2));
    cfg.fps = Some((30000, 1001));
    let mut publisher = Publisher::create(cfg).unwrap();
    let sub = subscribe(&key, dir.path(), "conformance");
    let mut sub = sub;
    for _ in 0..3 {
        publish_pattern(&mut publisher);
    }
    let lease = sub.next(SECOND).unwrap();
    assert_eq!(lease.seq(), 1);
    lease.release().unwrap();

    let b = std::fs::read(format!("/dev/shm/cuframes-{key}")).unwrap();
    assert_eq!(b.len(), 7424);
    assert_eq!(
        &b[0..4],
        &[0xCC, 0x1D, 0x7C, 0xCC],
        "magic 0xCC7C1DCC little-endian"
    );
    assert_eq!(u32_at(&b, 0x04), 1, "proto_version");
    let (major, minor, patch) = cuframes::library_version();
    assert_eq!(
        (u32_at(&b, 0x08), u32_at(&b, 0x0C), u32_at(&b, 0x10)),
        (major, minor, patch)
    );
    assert!(zero(&b, 0x14..0x18), "reserved_a");
    assert_eq!(u64_at(&b, 0x18), std::process::id() as u64, "producer_pid");
    assert_eq!(u64_at(&b, 0x20), 4, "ring_size");
    assert_eq!(u64_at(&b, 0x28), OWNERSHIP_LIBRARY, "ownership_mode");
    assert_eq!(u64_at(&b, 0x30), POLICY_STRICT_WAIT, "policy");
    assert_eq!(u64_at(&b, 0x38), 32, "max_subscribers");
    // Frame meta at 0x40 (§2.1): 64x48 NV12, pitches aligned to 256.
    assert_eq!(u32_at(&b, 0x40), PixelFormat::Nv12.wire());
    assert_eq!(u32_at(&b, 0x44), 64);
    assert_eq!(u32_at(&b, 0x48), 48);
    assert_eq!(u32_at(&b, 0x4C), 256, "pitch_y");
    assert_eq!(u32_at(&b, 0x50), 256, "pitch_uv");
    assert_eq!(u32_at(&b, 0x54), 12, "bits_per_pixel");
    assert_eq!(u64_at(&b, 0x58), 256 * 48 + 256 * 24, "frame_size_bytes");
    assert_eq!(u32_at(&b, 0x60), MEMORY_KIND_HOST, "extension memory_kind");
    assert_eq!(
        (u32_at(&b, 0x64), u32_at(&b, 0x68)),
        (30000, 1001),
        "extension fps"
    );
    assert!(zero(&b, 0x6C..0x80), "meta reserved");
    assert!(zero(&b, 0x80..0xC0), "ipc_event_handle (host memory has none)");
    assert_eq!(u64_at(&b, 0xC0), 3, "global_seq");
    let bit = sub.bit() as usize;
    assert_eq!(u64_at(&b, 0xC8), 1 << bit, "subscriber_bitmap");
    assert_eq!(u64_at(&b, 0xD0), 0, "shutdown_flag");
    assert_eq!(u32_at(&b, 0xD8), 1, "extension ack_futex: bumped by the one ACK");
    assert_eq!(u32_at(&b, 0xDC), 0, "extension publisher_waiting: not waiting");
    assert!(zero(&b, 0xE0..0x100), "reserved_b");
    // Slots at 0x100, 192 bytes each; seq s lives in slot s % ring.
    for seq in 1..=3u64 {
        let s = 0x100 + (seq as usize % 4) * 192;
        assert_eq!(u64_at(&b, s), seq, "slot seq");
        assert_eq!(u64_at(&b, s + 0x08), ((seq - 1) * 1000), "pts_ns");
        let acked = u64_at(&b, s + 0x10);
        assert_eq!(
            acked,
            if seq == 1 { 1 << bit } else { 0 },
            "ack_bitmap of seq {seq}"
        );
        assert_eq!(u64_at(&b, s + 0x18), 256 * 72, "written_bytes");
        let stride = (256 * 72usize).next_multiple_of(4096) as u64;
        assert_eq!(u64_at(&b, s + 0x20), (seq % 4) * stride, "host handle: offset");
        assert_eq!(u64_at(&b, s + 0x28), stride, "host handle: length");
        assert!(
            zero(&b, s + 0x30..s + 0x80),
            "rest of handle and cuda_ptr_external"
        );
        assert_ne!(u64_at(&b, s + 0x80), 0, "extension publish_mono_ns");
        assert!(zero(&b, s + 0x88..s + 0xC0), "slot reserved");
    }
    let unused = 0x100;
    assert_eq!(u64_at(&b, unused), SEQ_INVALID, "slot 0 not yet published");
    for k in 4..16 {
        let s = 0x100 + k * 192;
        assert_eq!(u64_at(&b, s), SEQ_INVALID, "dead slot {k} seq");
        assert!(zero(&b, s + 8..s + 192), "dead slot {k}");
    }
    // Subscriber slot at 0xD00 + bit*128.
    let s = 0xD00 + bit * 128;
    assert_eq!(u64_at(&b, s), SUBSCRIBER_ACTIVE, "state");
    assert_eq!(
        u64_at(&b, s + 0x08),
        std::process::id() as u64,
        "consumer_pid (SO_PEERCRED)"
    );
    assert_eq!(u64_at(&b, s + 0x10), 1, "last_seen_seq");
    assert!(u64_at(&b, s + 0x18) > 0, "last_ack_ns");
    assert_eq!(&b[s + 0x20..s + 0x2B], b"conformance");
    assert!(zero(&b, s + 0x2B..s + 0x40), "name terminator");
    // Extensions in reserved: frames lost (0x40) and the newest seq taken (0x48).
    assert_eq!(u64_at(&b, s + 0x40), 0, "dropped (extension)");
    assert_eq!(
        u64_at(&b, s + 0x48),
        1,
        "last_taken_seq (extension): frame 1 was taken"
    );
    assert!(zero(&b, s + 0x50..s + 0x80), "reserved");
    assert!(
        zero(&b, 0xD00..0xD00 + 128),
        "bit 0 is the sentinel and never used"
    );
}

fn one_of_each() -> Vec<Message> {
    let mut meta = FrameMeta::zeroed();
    meta.format = 1;
    meta.width = 1920;
    meta.height = 1080;
    meta.pitch_y = 2048;
    meta.pitch_uv = 2048;
    meta.frame_size_bytes = 2048 * 1620;
    vec![
        Message::HelloReq(HelloReq {
            proto_version: 1,
            name: "encoder-0".into(),
            cuda_device: 0,
            mode: 1,
            ext_flags: 0,
        }),
        Message::HelloResp(HelloResp {
            result: 0,
            proto_version: 1,
            accept: Some(HelloAccept {
                ring_size: 4,
                ownership_mode: 0,
                meta,
                shm_path: "/cuframes-cam1".into(),
                early_fds: 0,
            }),
        }),
        Message::HelloResp(HelloResp {
            result: ErrorKind::Protocol.code(),
            proto_version: 1,
            accept: None,
        }),
        Message::SubscribeReq { proto_version: 1 },
        Message::SubscribeResp(SubscribeResp {
            result: 0,
            assigned_bit: 31,
            initial_seq: u64::MAX - 1,
        }),
        Message::Unsubscribe { reason: 0 },
        Message::EventFd {
            purpose: fd_purpose::WAKEUP,
        },
        Message::Shutdown {
            reason: shutdown_reason::UPGRADE,
        },
        Message::Ping { nonce: 0xDEAD_BEEF },
        Message::Pong { nonce: 7 },
        Message::Error {
            code: ErrorKind::Timeout.code(),
            message: "ack timeout ⏱".into(),
        },
    ]
}

#[test]
fn every_message_round_trips() {
    for msg in one_of_each() {
        let bytes = msg.encode().unwrap();
        assert_eq!(u32_at(&bytes, 0), msg.type_id());
        assert_eq!(u32_at(&bytes, 4) as usize, bytes.len() - 8, "{}", msg.name());
        let (back, used) = Message::decode(&bytes).unwrap().unwrap();
        assert_eq!(back, msg);
        assert_eq!(used, bytes.len());
        // Any strict prefix is "need more", never an error or a message.
        for cut in 0..bytes.len() {
            assert!(
                Message::decode(&bytes[..cut]).unwrap().is_none(),
                "{} cut {cut}",
                msg.name()
            );
        }
    }
}

#[test]
fn golden_encodings_and_zero_reserved_bytes() {
    let sub_resp = Message::SubscribeResp(SubscribeResp {
        result: 0,
        assigned_bit: 3,
        initial_seq: 0x0102_0304_0506_0708,
    })
    .encode()
    .unwrap();
    let mut want = vec![0x04, 0, 0, 0, 28, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0];
    want.extend_from_slice(&[8, 7, 6, 5, 4, 3, 2, 1]);
    want.extend_from_slice(&[0; 12]);
    assert_eq!(sub_resp, want, "SUBSCRIBE_RESP: decision 2, 28-byte payload");

    let hello = Message::HelloReq(HelloReq {
        proto_version: 1,
        name: "ab".into(),
        cuda_device: -1,
        mode: 0,
        ext_flags: 0,
    })
    .encode()
    .unwrap();
    let mut want = vec![0x01, 0, 0, 0, 30, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, b'a', b'b'];
    want.extend_from_slice(&[0xFF; 4]);
    want.extend_from_slice(&[0; 4 + 12]);
    assert_eq!(hello, want);

    let refused = Message::HelloResp(HelloResp {
        result: -4,
        proto_version: 1,
        accept: None,
    })
    .encode()
    .unwrap();
    assert_eq!(
        refused.len(),
        8 + 16,
        "decision 3: short HELLO_RESP = result + reserved"
    );
    assert_eq!(i32::from_le_bytes(refused[8..12].try_into().unwrap()), -4);

    let ping = Message::Ping { nonce: 1 }.encode().unwrap();
    assert_eq!(ping.len(), 8 + 16);
    assert!(zero(&ping, 16..24));
    for fixed in [
        Message::SubscribeReq { proto_version: 1 },
        Message::Unsubscribe { reason: 0 },
        Message::EventFd { purpose: 1 },
        Message::Shutdown { reason: 1 },
    ] {
        let bytes = fixed.encode().unwrap();
        assert_eq!(bytes.len(), 8 + 16, "{}", fixed.name());
        assert!(zero(&bytes, 12..24), "{} reserved", fixed.name());
    }
}

#[test]
fn reserved_bytes_are_ignored_on_read() {
    for msg in one_of_each() {
        let mut bytes = msg.encode().unwrap();
        let n = bytes.len();
        // Every message ends in reserved bytes (8 or 12); set them. HELLO_REQ
        // and an accepting HELLO_RESP carry an extension in their first
        // reserved word (ext_flags, early_fds: decision 27), 8 remain.
        let short_refusal = matches!(&msg, Message::HelloResp(r) if r.accept.is_none());
        let extended = matches!(&msg, Message::HelloReq(_))
            || matches!(&msg, Message::HelloResp(r) if r.accept.is_some());
        let reserved =
            if matches!(msg, Message::Ping { .. } | Message::Pong { .. }) || short_refusal || extended {
                8
            } else {
                12
            };
        bytes[n - reserved..].fill(0xA5);
        let (back, _) = Message::decode(&bytes).unwrap().unwrap();
        assert_eq!(back, msg, "{}", msg.name());
    }
}

#[test]
fn strict_lengths_and_limits() {
    // payload_length > 4096 is refused from the header alone.
    let mut big = vec![0x01, 0, 0, 0];
    big.extend_from_slice(&4097u32.to_le_bytes());
    assert_eq!(Message::decode(&big).unwrap_err().kind(), ErrorKind::Protocol);
    // A fixed-size message with one byte too many or too few.
    for delta in [-1i32, 1] {
        let mut bytes = Message::SubscribeReq { proto_version: 1 }.encode().unwrap();
        let len = (16 + delta) as usize;
        bytes.resize(8 + len, 0);
        bytes[4..8].copy_from_slice(&(len as u32).to_le_bytes());
        assert_eq!(Message::decode(&bytes).unwrap_err().kind(), ErrorKind::Protocol);
    }
    // Unknown type.
    let mut unknown = vec![0x99, 0, 0, 0, 0, 0, 0, 0];
    assert!(Message::decode(&unknown).is_err());
    unknown[0] = 0x05;
    assert!(Message::decode(&unknown).is_err());
    // Names: 32 bytes, invalid UTF-8, NUL inside.
    let too_long = Message::HelloReq(HelloReq {
        proto_version: 1,
        name: "n".repeat(32),
        cuda_device: 0,
        mode: 0,
        ext_flags: 0,
    });
    assert_eq!(too_long.encode().unwrap_err().kind(), ErrorKind::InvalidArgument);
    let good = Message::HelloReq(HelloReq {
        proto_version: 1,
        name: "ab".into(),
        cuda_device: 0,
        mode: 0,
        ext_flags: 0,
    })
    .encode()
    .unwrap();
    let mut bad_utf8 = good.clone();
    bad_utf8[16] = 0xFF;
    assert!(Message::decode(&bad_utf8).is_err());
    let mut nul = good.clone();
    nul[17] = 0;
    assert!(Message::decode(&nul).is_err());
    let mut long_len = good.clone();
    long_len[12] = 32; // claims a 32-byte name
    assert!(Message::decode(&long_len).is_err());
    // Positive results are not in the protocol.
    let mut positive = Message::SubscribeResp(SubscribeResp {
        result: 0,
        assigned_bit: 1,
        initial_seq: 0,
    })
    .encode()
    .unwrap();
    positive[8] = 1;
    assert!(Message::decode(&positive).is_err());
}

fn raw_connect(publisher: &Publisher) -> UnixStream {
    let s = UnixStream::connect(&publisher.paths().socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s
}

fn read_message(s: &mut UnixStream) -> Option<Message> {
    let mut head = [0u8; 8];
    if s.read_exact(&mut head).is_err() {
        return None;
    }
    let len = u32_at(&head, 4) as usize;
    let mut buf = head.to_vec();
    buf.resize(8 + len, 0);
    s.read_exact(&mut buf[8..]).unwrap();
    Some(Message::decode(&buf).unwrap().unwrap().0)
}

/// Spec §7 test_handshake.c: HelloRespMismatchProto.
#[test]
fn hello_with_newer_protocol_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("mismatch");
    let publisher = Publisher::create(config(&key, dir.path())).unwrap();
    let mut s = raw_connect(&publisher);
    let hello = Message::HelloReq(HelloReq {
        proto_version: 2,
        name: "future".into(),
        cuda_device: -1,
        mode: 0,
        ext_flags: 0,
    });
    s.write_all(&hello.encode().unwrap()).unwrap();
    match read_message(&mut s) {
        Some(Message::HelloResp(r)) => {
            assert_eq!(r.result, ErrorKind::Protocol.code(), "ERR_PROTOCOL");
            assert_eq!(r.proto_version, 1);
            assert!(r.accept.is_none());
        }
        other => panic!("expected HELLO_RESP, got {other:?}"),
    }
    assert!(
        read_message(&mut s).is_none(),
        "decision 3: socket closed after the refusal"
    );
    assert_eq!(publisher.subscriber_count(), 0);
}

#[test]
fn older_protocol_is_refused_too() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("older");
    let publisher = Publisher::create(config(&key, dir.path())).unwrap();
    let mut s = raw_connect(&publisher);
    let hello = Message::HelloReq(HelloReq {
        proto_version: 0,
        name: String::new(),
        cuda_device: -1,
        mode: 0,
        ext_flags: 0,
    });
    s.write_all(&hello.encode().unwrap()).unwrap();
    assert!(
        matches!(read_message(&mut s), Some(Message::HelloResp(r)) if r.result == ErrorKind::Protocol.code())
    );
}

/// Decision 8: extensions live in reserved bytes. A v1 reader that ignores
/// them reads every spec field right, and a header written by a v1 writer
/// (extensions zero) validates, meaning CUDA memory and unknown frame rate.
#[test]
fn extensions_are_invisible_to_a_plain_v1_reader() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("ext");
    let mut cfg = config(&key, dir.path());
    cfg.fps = Some((25, 1));
    let _publisher = Publisher::create(cfg).unwrap();
    let bytes = std::fs::read(format!("/dev/shm/cuframes-{key}")).unwrap();
    let live = SharedHeader::from_bytes(bytes.as_slice().try_into().unwrap());
    let info = shm::validate_header(&live).unwrap();
    assert_eq!(info.memory, MemoryKind::Host);
    assert_eq!(info.fps, Some((25, 1)));

    let mut v1 = live;
    v1.meta.memory_kind = 0;
    v1.meta.fps_num = 0;
    v1.meta.fps_den = 0;
    for slot in v1.slots.iter_mut() {
        slot.publish_mono_ns = 0;
    }
    // Spec fields are unchanged by stripping the extensions.
    let (a, b) = (live.meta.to_bytes(), v1.meta.to_bytes());
    assert_eq!(a[..0x20], b[..0x20]);
    let info = shm::validate_header(&v1).unwrap();
    assert_eq!(
        info.memory,
        MemoryKind::Cuda,
        "memory_kind 0 = CUDA, the spec's only memory"
    );
    assert_eq!(info.fps, None);
    assert_eq!(info.layout.size() as u64, v1.meta.frame_size_bytes);
    assert_eq!(Policy::from_wire(v1.policy), Some(Policy::DropOldest));
}
