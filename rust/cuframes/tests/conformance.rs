//! Conformance with protocol v1: the shared header byte by byte as a live
//! publisher writes it, every control message against golden bytes written
//! by hand from the spec's tables (§3) and the project's extensions
//! (`docs/protocol-notes.md`), and the spec §7 cases. Struct sizes and field
//! offsets (§2, §7 test_layout.c) are asserted at compile time in
//! `rust/cuframes/src/wire/layout.rs`, so they are not repeated here.

mod common;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use common::*;
use cuframes::inspect::ReportWriter;
use cuframes::protocol::{self, *};
use cuframes::{ErrorKind, MemoryKind, PixelFormat, Policy, Publisher};

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
fn zero(b: &[u8], range: std::ops::Range<usize>) -> bool {
    b[range].iter().all(|&x| x == 0)
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

    // The subscriber ACKed in its own area (D33), byte for byte; the
    // publisher copies what it reports into the header's record within
    // 250 ms.
    let area = ack_area_of(&key);
    assert_eq!(area.len(), 4096, "ACK area: one page");
    let slot_of_1 = 1; // seq 1 lives in slot 1 % ring 4
    for slot in 0..16 {
        let released = u64_at(&area, slot * 8);
        assert_eq!(
            released,
            if slot == slot_of_1 { 1 } else { 0 },
            "released[{slot}]"
        );
    }
    assert_eq!(u64_at(&area, 0x80), 1, "taken");
    assert_eq!(u64_at(&area, 0x88), 1, "last_seen_seq");
    assert!(u64_at(&area, 0x90) > 0, "last_ack_ns");
    assert_eq!(u64_at(&area, 0x98), 1, "received");
    assert_eq!(
        (u64_at(&area, 0xA0), u64_at(&area, 0xA8), u64_at(&area, 0xB0)),
        (0, 0, 0),
        "dropped, overwritten, copied"
    );
    assert!(zero(&area, 0xB8..4096), "ACK area reserved");
    let record = 0xD00 + sub.bit() as usize * 128;
    assert!(
        eventually(Duration::from_secs(2), || {
            let b = std::fs::read(format!("/dev/shm/cuframes-{key}")).unwrap();
            u64_at(&b, record + 0x10) == 1 && u64_at(&b, record + 0x48) == 1
        }),
        "the publisher mirrors the subscriber's report"
    );

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
    assert_eq!(
        u32_at(&b, 0xD8),
        0,
        "extension ack_futex: only protocol-v1 subscribers bump it"
    );
    assert_eq!(u32_at(&b, 0xDC), 0, "extension publisher_waiting: not waiting");
    assert!(
        zero(&b, 0xE0..0x100),
        "a zero word and the publisher's counters (none waited yet)"
    );
    // Slots at 0x100, 192 bytes each; seq s lives in slot s % ring.
    for seq in 1..=3u64 {
        let s = 0x100 + (seq as usize % 4) * 192;
        assert_eq!(u64_at(&b, s), seq, "slot seq");
        assert_eq!(u64_at(&b, s + 0x08), ((seq - 1) * 1000), "pts_ns");
        assert_eq!(
            u64_at(&b, s + 0x10),
            0,
            "ack_bitmap of seq {seq}: cuframes subscribers ACK in their own areas"
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
    // D35: its received, copied and overwritten counts, and that the
    // publisher copied them from its ACK area (1).
    assert_eq!(
        (
            u64_at(&b, s + 0x50),
            u64_at(&b, s + 0x58),
            u64_at(&b, s + 0x60),
            u64_at(&b, s + 0x68)
        ),
        (1, 0, 0, 1),
        "received, copied, overwritten, report source (extension)"
    );
    // D35: the seq published when it joined (none yet).
    assert_eq!(u64_at(&b, s + 0x70), 0, "joined seq (extension)");
    assert!(zero(&b, s + 0x78..s + 0x80), "reserved");
    assert!(
        zero(&b, 0xD00..0xD00 + 128),
        "bit 0 is the sentinel and never used"
    );
}

/// One message written out by hand: its bytes as the spec's tables lay them
/// out, the value they mean, and where its reserved bytes are (offsets in
/// the whole message, header included).
struct Golden {
    what: &'static str,
    bytes: Vec<u8>,
    message: Message,
    reserved: std::ops::Range<usize>,
}

/// The fields of a message, in order, each a byte string.
fn fields(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// A GPU's UUID (16 bytes) for the frame meta's `device_uuid`.
const UUID: [u8; 16] = [
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F,
];

/// The frame meta of the accepted HELLO_RESP below: 1920x1080 NV12, and
/// every extension set (memory kind, frame rate, device UUID).
fn golden_meta() -> FrameMeta {
    let mut meta = FrameMeta::zeroed();
    meta.format = PixelFormat::Nv12.wire();
    meta.width = 1920;
    meta.height = 1080;
    meta.pitch_y = 2048;
    meta.pitch_uv = 2048;
    meta.bits_per_pixel = 12;
    meta.frame_size_bytes = 2048 * 1080 + 2048 * 540;
    meta.memory_kind = MEMORY_KIND_CUDA_FD;
    meta.fps_num = 30000;
    meta.fps_den = 1001;
    meta.device_uuid = UUID;
    meta
}

/// Every control message (spec §3.2's types), most in more than one form,
/// as golden bytes. Numbers are little-endian (spec header); each line is
/// one field of the spec's table for that message, or of the TLV header
/// (§3.1: type u32, payload_length u32).
fn goldens() -> Vec<Golden> {
    let zeros8: &[u8] = &[0; 8];
    let zeros12: &[u8] = &[0; 12];
    let mut all = vec![
        // §3.3 HELLO_REQ: proto_version, consumer_name_len, consumer_name,
        // cuda_device (i32), mode, reserved 12 (its first word: ext_flags,
        // notes D27).
        Golden {
            what: "HELLO_REQ, a named CUDA subscriber in LATEST mode, v1 handshake",
            bytes: fields(&[
                &[0x01, 0, 0, 0], // HELLO_REQ
                &[37, 0, 0, 0],   // 4 + 4 + 9 + 4 + 4 + 12
                &[1, 0, 0, 0],    // proto_version 1
                &[9, 0, 0, 0],    // consumer_name_len
                b"encoder-0",     // consumer_name, no terminator
                &[0, 0, 0, 0],    // cuda_device 0
                &[1, 0, 0, 0],    // mode 1 = LATEST (notes: subscriber modes)
                &[0, 0, 0, 0],    // ext_flags 0: a v1 subscriber
                zeros8,           // reserved
            ]),
            message: Message::HelloReq(HelloReq {
                proto_version: 1,
                name: "encoder-0".into(),
                cuda_device: 0,
                mode: 1,
                ext_flags: 0,
            }),
            reserved: 37..45,
        },
        Golden {
            what: "HELLO_REQ, a host subscriber that asks for early descriptors",
            bytes: fields(&[
                &[0x01, 0, 0, 0],
                &[30, 0, 0, 0],            // 4 + 4 + 2 + 4 + 4 + 12
                &[1, 0, 0, 0],             // proto_version 1
                &[2, 0, 0, 0],             // consumer_name_len
                b"ab",                     // consumer_name
                &[0xFF, 0xFF, 0xFF, 0xFF], // cuda_device -1 (none)
                &[0, 0, 0, 0],             // mode 0 = SEQUENTIAL
                &[1, 0, 0, 0],             // ext_flags: EARLY_FDS (D27)
                zeros8,                    // reserved
            ]),
            message: Message::HelloReq(HelloReq {
                proto_version: 1,
                name: "ab".into(),
                cuda_device: -1,
                mode: 0,
                ext_flags: cuframes::protocol::hello_flags::EARLY_FDS,
            }),
            reserved: 30..38,
        },
        Golden {
            what: "HELLO_REQ, no name",
            bytes: fields(&[
                &[0x01, 0, 0, 0],
                &[28, 0, 0, 0], // 4 + 4 + 0 + 4 + 4 + 12
                &[1, 0, 0, 0],
                &[0, 0, 0, 0], // consumer_name_len 0
                &[3, 0, 0, 0], // cuda_device 3
                &[0, 0, 0, 0],
                &[0, 0, 0, 0],
                zeros8,
            ]),
            message: Message::HelloReq(HelloReq {
                proto_version: 1,
                name: String::new(),
                cuda_device: 3,
                mode: 0,
                ext_flags: 0,
            }),
            reserved: 28..36,
        },
        // §3.4 HELLO_RESP: result, proto_version_actual, ring_size,
        // ownership_mode, frame_meta (§2.1, 64 bytes), shm_path_len,
        // shm_path, reserved 12 (its first word: early_fds, notes D27).
        Golden {
            what: "HELLO_RESP, accepted",
            bytes: fields(&[
                &[0x02, 0, 0, 0],
                &[110, 0, 0, 0], // 4 + 4 + 4 + 4 + 64 + 4 + 14 + 12
                &[0, 0, 0, 0],   // result 0
                &[1, 0, 0, 0],   // proto_version_actual 1
                &[4, 0, 0, 0],   // ring_size 4
                &[1, 0, 0, 0],   // ownership_mode 1 = EXTERNAL
                // frame_meta, §2.1:
                &[1, 0, 0, 0],                      // 0x00 format 1 = NV12
                &[0x80, 0x07, 0, 0],                // 0x04 width 1920
                &[0x38, 0x04, 0, 0],                // 0x08 height 1080
                &[0x00, 0x08, 0, 0],                // 0x0C pitch_y 2048
                &[0x00, 0x08, 0, 0],                // 0x10 pitch_uv 2048
                &[12, 0, 0, 0],                     // 0x14 bits_per_pixel 12
                &[0x00, 0xA0, 0x32, 0, 0, 0, 0, 0], // 0x18 frame_size_bytes 3317760
                &[2, 0, 0, 0],                      // 0x20 memory_kind 2 = CUDA fd (extension)
                &[0x30, 0x75, 0, 0],                // 0x24 fps_num 30000 (extension)
                &[0xE9, 0x03, 0, 0],                // 0x28 fps_den 1001 (extension)
                &UUID,                              // 0x2C device_uuid (extension)
                &[0, 0, 0, 0],                      // 0x3C reserved
                &[14, 0, 0, 0],                     // shm_path_len
                b"/cuframes-cam1",                  // shm_path
                &[3, 0, 0, 0],                      // early_fds 3 (extension): EVENT_FDs before SUBSCRIBE
                &[2, 0, 0, 0],                      // granted: PRIVATE_ACKS (extension, D33)
                &[0, 0, 0, 0],                      // reserved
            ]),
            message: Message::HelloResp(HelloResp {
                result: 0,
                proto_version: 1,
                accept: Some(HelloAccept {
                    ring_size: 4,
                    ownership_mode: 1,
                    meta: golden_meta(),
                    shm_path: "/cuframes-cam1".into(),
                    early_fds: 3,
                    granted: 2,
                }),
            }),
            reserved: 114..118,
        },
        // §3.4 "at result < 0 the payload may be shorter (result + reserved)";
        // notes D3, E4: the first reserved word is the publisher's version.
        Golden {
            what: "HELLO_RESP, refused: version mismatch",
            bytes: fields(&[
                &[0x02, 0, 0, 0],
                &[16, 0, 0, 0],            // 4 + 12
                &[0xFC, 0xFF, 0xFF, 0xFF], // result -4 = PROTOCOL
                &[1, 0, 0, 0],             // publisher's version 1 (E4)
                zeros8,                    // reserved
            ]),
            message: Message::HelloResp(HelloResp {
                result: ErrorKind::Protocol.code(),
                proto_version: 1,
                accept: None,
            }),
            reserved: 16..24,
        },
        Golden {
            what: "HELLO_RESP, refused: a bad mode",
            bytes: fields(&[
                &[0x02, 0, 0, 0],
                &[16, 0, 0, 0],
                &[0xFF, 0xFF, 0xFF, 0xFF], // result -1 = INVALID_ARGUMENT
                &[1, 0, 0, 0],
                zeros8,
            ]),
            message: Message::HelloResp(HelloResp {
                result: ErrorKind::InvalidArgument.code(),
                proto_version: 1,
                accept: None,
            }),
            reserved: 16..24,
        },
        // §3.5 SUBSCRIBE_REQ: proto_version, reserved 12.
        Golden {
            what: "SUBSCRIBE_REQ",
            bytes: fields(&[&[0x03, 0, 0, 0], &[16, 0, 0, 0], &[1, 0, 0, 0], zeros12]),
            message: Message::SubscribeReq { proto_version: 1 },
            reserved: 12..24,
        },
        // §3.6 SUBSCRIBE_RESP: result, assigned_bit, initial_seq (8 bytes:
        // notes D2), reserved 12.
        Golden {
            what: "SUBSCRIBE_RESP, bit assigned",
            bytes: fields(&[
                &[0x04, 0, 0, 0],
                &[28, 0, 0, 0],            // 4 + 4 + 8 + 12
                &[0, 0, 0, 0],             // result 0
                &[31, 0, 0, 0],            // assigned_bit 31
                &[8, 7, 6, 5, 4, 3, 2, 1], // initial_seq 0x0102030405060708
                zeros12,
            ]),
            message: Message::SubscribeResp(SubscribeResp {
                result: 0,
                assigned_bit: 31,
                initial_seq: 0x0102_0304_0506_0708,
            }),
            reserved: 24..36,
        },
        Golden {
            what: "SUBSCRIBE_RESP, refused: too many",
            bytes: fields(&[
                &[0x04, 0, 0, 0],
                &[28, 0, 0, 0],
                &[0xFA, 0xFF, 0xFF, 0xFF], // result -6 = TOO_MANY
                &[0, 0, 0, 0],             // no bit
                &[0; 8],
                zeros12,
            ]),
            message: Message::SubscribeResp(SubscribeResp {
                result: ErrorKind::TooMany.code(),
                assigned_bit: 0,
                initial_seq: 0,
            }),
            reserved: 24..36,
        },
        // UNSUBSCRIBE (spec: no table; notes D9): reason, reserved 12.
        Golden {
            what: "UNSUBSCRIBE",
            bytes: fields(&[&[0x10, 0, 0, 0], &[16, 0, 0, 0], &[0, 0, 0, 0], zeros12]),
            message: Message::Unsubscribe { reason: 0 },
            reserved: 12..24,
        },
        // PING, PONG (notes D9): nonce u64, reserved 8.
        Golden {
            what: "PING",
            bytes: fields(&[
                &[0xF0, 0, 0, 0],
                &[16, 0, 0, 0],
                &[0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01], // nonce
                zeros8,
            ]),
            message: Message::Ping {
                nonce: 0x0123_4567_89AB_CDEF,
            },
            reserved: 16..24,
        },
        Golden {
            what: "PONG",
            bytes: fields(&[
                &[0xF1, 0, 0, 0],
                &[16, 0, 0, 0],
                &[7, 0, 0, 0, 0, 0, 0, 0],
                zeros8,
            ]),
            message: Message::Pong { nonce: 7 },
            reserved: 16..24,
        },
        // §3.9 ERROR: error_code, message_len, message (UTF-8), reserved 12.
        Golden {
            what: "ERROR, with a message",
            bytes: fields(&[
                &[0xFE, 0, 0, 0],
                &[35, 0, 0, 0],            // 4 + 4 + 15 + 12
                &[0xF9, 0xFF, 0xFF, 0xFF], // error_code -7 = TIMEOUT
                &[15, 0, 0, 0],            // message_len (bytes)
                b"ack timeout ",
                &[0xE2, 0x8F, 0xB1], // U+23F1 in UTF-8
                zeros12,
            ]),
            message: Message::Error {
                code: ErrorKind::Timeout.code(),
                message: "ack timeout ⏱".into(),
            },
            reserved: 31..43,
        },
        Golden {
            what: "ERROR, empty",
            bytes: fields(&[
                &[0xFE, 0, 0, 0],
                &[20, 0, 0, 0],
                &[0xF2, 0xFF, 0xFF, 0xFF], // error_code -14 = PERMISSION
                &[0, 0, 0, 0],
                zeros12,
            ]),
            message: Message::Error {
                code: ErrorKind::Permission.code(),
                message: String::new(),
            },
            reserved: 16..28,
        },
    ];
    // §3.7 EVENT_FD: fd_purpose, reserved 12; purposes from the spec (1)
    // and the notes (2, 3, 4, 0x100 + n).
    for (what, purpose, wire) in [
        ("EVENT_FD, wake-up eventfd", fd_purpose::WAKEUP, [1, 0, 0, 0]),
        ("EVENT_FD, host slot memory", fd_purpose::HOST_SLOTS, [2, 0, 0, 0]),
        ("EVENT_FD, the shared header", fd_purpose::HEADER, [3, 0, 0, 0]),
        ("EVENT_FD, CUDA fences", fd_purpose::CUDA_FENCES, [4, 0, 0, 0]),
        (
            "EVENT_FD, CUDA slot 5",
            fd_purpose::CUDA_SLOT_0 + 5,
            [0x05, 0x01, 0, 0],
        ),
    ] {
        all.push(Golden {
            what,
            bytes: fields(&[&[0x20, 0, 0, 0], &[16, 0, 0, 0], &wire, zeros12]),
            message: Message::EventFd { purpose },
            reserved: 12..24,
        });
    }
    // §3.8 SHUTDOWN: reason (0 normal, 1 error, 2 upgrade), reserved 12.
    for (what, reason) in [
        ("SHUTDOWN, normal", shutdown_reason::NORMAL),
        ("SHUTDOWN, error", shutdown_reason::ERROR),
        ("SHUTDOWN, upgrade", shutdown_reason::UPGRADE),
    ] {
        let wire = [[0u8, 0, 0, 0], [1, 0, 0, 0], [2, 0, 0, 0]][reason as usize];
        all.push(Golden {
            what,
            bytes: fields(&[&[0x30, 0, 0, 0], &[16, 0, 0, 0], &wire, zeros12]),
            message: Message::Shutdown { reason },
            reserved: 12..24,
        });
    }
    all
}

#[test]
fn goldens_cover_every_message_type() {
    let mut seen: Vec<u32> = goldens().iter().map(|g| g.message.type_id()).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(
        seen,
        [0x01, 0x02, 0x03, 0x04, 0x10, 0x20, 0x30, 0xF0, 0xF1, 0xFE],
        "spec §3.2"
    );
    for g in goldens() {
        assert!(
            g.reserved.end == g.bytes.len(),
            "{}: reserved bytes come last",
            g.what
        );
        assert!(
            zero(&g.bytes, g.reserved.clone()),
            "{}: reserved bytes are zero",
            g.what
        );
    }
}

#[test]
fn every_message_encodes_to_its_golden_bytes() {
    for g in goldens() {
        assert_eq!(g.message.encode().unwrap(), g.bytes, "{}", g.what);
    }
}

#[test]
fn every_golden_decodes_to_its_message() {
    for g in goldens() {
        let (back, used) = Message::decode(&g.bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", g.what))
            .unwrap_or_else(|| panic!("{}: needs more bytes", g.what));
        assert_eq!(back, g.message, "{}", g.what);
        assert_eq!(used, g.bytes.len(), "{}", g.what);
        // Any strict prefix is "need more", never an error or a message.
        for cut in 0..g.bytes.len() {
            assert!(
                Message::decode(&g.bytes[..cut]).unwrap().is_none(),
                "{} cut {cut}",
                g.what
            );
        }
        // Two messages back to back: the first, and no more than its bytes.
        let mut two = g.bytes.clone();
        two.extend_from_slice(&g.bytes);
        let (first, used) = Message::decode(&two).unwrap().unwrap();
        assert_eq!((first, used), (g.message.clone(), g.bytes.len()), "{}", g.what);
    }
}

/// Spec §6.3: reserved fields are written as zero and ignored on read.
#[test]
fn reserved_bytes_are_ignored_on_read() {
    for g in goldens() {
        let mut bytes = g.bytes.clone();
        bytes[g.reserved.clone()].fill(0xA5);
        let (back, _) = Message::decode(&bytes).unwrap().unwrap();
        assert_eq!(back, g.message, "{}", g.what);
    }
}

/// The golden bytes of `what`.
fn golden(what: &str) -> Vec<u8> {
    goldens()
        .into_iter()
        .find(|g| g.what == what)
        .unwrap_or_else(|| panic!("no golden {what:?}"))
        .bytes
}

/// Notes D12: strict decoding.
#[test]
fn strict_lengths_and_limits() {
    // payload_length > 4096 is refused from the header alone.
    let mut big = vec![0x01, 0, 0, 0];
    big.extend_from_slice(&4097u32.to_le_bytes());
    assert_eq!(Message::decode(&big).unwrap_err().kind(), ErrorKind::Protocol);
    // A fixed-size message with one byte too many or too few.
    for delta in [-1i32, 1] {
        let mut bytes = golden("SUBSCRIBE_REQ");
        let len = (16 + delta) as usize;
        bytes.resize(8 + len, 0);
        bytes[4..8].copy_from_slice(&(len as u32).to_le_bytes());
        assert_eq!(Message::decode(&bytes).unwrap_err().kind(), ErrorKind::Protocol);
    }
    // Unknown types, and a type number the spec skips.
    let mut unknown = vec![0x99, 0, 0, 0, 0, 0, 0, 0];
    assert!(Message::decode(&unknown).is_err());
    unknown[0] = 0x05;
    assert!(Message::decode(&unknown).is_err());
    // Names: 32 bytes, invalid UTF-8, NUL inside, a length past the payload.
    let too_long = Message::HelloReq(HelloReq {
        proto_version: 1,
        name: "n".repeat(32),
        cuda_device: 0,
        mode: 0,
        ext_flags: 0,
    });
    assert_eq!(too_long.encode().unwrap_err().kind(), ErrorKind::InvalidArgument);
    let good = golden("HELLO_REQ, a host subscriber that asks for early descriptors");
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
    let mut positive = golden("SUBSCRIBE_RESP, bit assigned");
    positive[8] = 1;
    assert!(Message::decode(&positive).is_err());
    let mut positive = golden("HELLO_RESP, refused: version mismatch");
    positive[8..12].copy_from_slice(&1i32.to_le_bytes());
    assert!(Message::decode(&positive).is_err());
    // An accepted HELLO_RESP cut to the refusal's length.
    let mut short = golden("HELLO_RESP, accepted")[..24].to_vec();
    short[4..8].copy_from_slice(&16u32.to_le_bytes());
    assert!(Message::decode(&short).is_err());
    // ERROR whose message_len does not match its payload.
    let mut error = golden("ERROR, with a message");
    error[12] = 16;
    assert!(Message::decode(&error).is_err());
}

/// The bytes of the ACK area of `key` (publisher and subscriber are both
/// in this process and map the same memfd), read through /proc/self/mem at
/// the mapping /proc/self/maps names.
fn ack_area_of(key: &str) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let name = format!("/memfd:cuframes-{key}-acks-");
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps
        .lines()
        .find(|l| l.contains(&name))
        .unwrap_or_else(|| panic!("no ACK area of {key} is mapped here"));
    let start = u64::from_str_radix(line.split('-').next().unwrap(), 16).unwrap();
    let mut bytes = vec![0u8; 4096];
    std::fs::File::open("/proc/self/mem")
        .unwrap()
        .read_exact_at(&mut bytes, start)
        .unwrap();
    bytes
}

fn raw_connect(publisher: &Publisher) -> UnixStream {
    let s = UnixStream::connect(&publisher.paths().socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s
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
        "D3: socket closed after the refusal"
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

/// D8: extensions live in reserved bytes. A v1 reader that ignores
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
    let info = protocol::validate_header(&live).unwrap();
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
    let info = protocol::validate_header(&v1).unwrap();
    assert_eq!(
        info.memory,
        MemoryKind::Cuda,
        "memory_kind 0 = CUDA, the spec's only memory"
    );
    assert_eq!(info.fps, None);
    assert_eq!(info.layout.size() as u64, v1.meta.frame_size_bytes);
    assert_eq!(Policy::from_wire(v1.policy), Some(Policy::DropOldest));
}

/// D35: the publisher's counters and a subscriber's report, as monitoring
/// reads them from the named header without subscribing.
#[test]
fn counters_reach_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("counters");
    let mut publisher = Publisher::create(strict(&key, dir.path(), 2, Duration::from_millis(300))).unwrap();
    let mut slow = subscribe(&key, dir.path(), "slow");
    let mut held = Vec::new();
    for _ in 0..2 {
        publish_pattern(&mut publisher);
        held.push(slow.next(SECOND).unwrap());
    }
    // Both slots held: the next publish waits, then drops the subscriber.
    publish_pattern(&mut publisher);
    drop(held);
    let inspection = cuframes::inspect::inspect(&key, Some(dir.path())).unwrap();
    let counters = inspection.publisher_counters().unwrap();
    assert_eq!(counters.ack_waits, 1, "{counters:?}");
    assert!(counters.ack_wait_ns >= 300_000_000, "{counters:?}");
    assert_eq!(counters.ack_timeouts, 1, "{counters:?}");
    assert_eq!(counters, {
        let s = publisher.stats();
        cuframes::inspect::PublisherCounters {
            ack_waits: s.ack_waits,
            ack_wait_ns: s.ack_wait_ns,
            ack_timeouts: s.ack_timeouts,
        }
    });

    let mut sub = subscribe(&key, dir.path(), "reporter");
    for _ in 0..3 {
        publish_pattern(&mut publisher);
        sub.next(SECOND).unwrap().release().unwrap();
    }
    assert!(
        eventually(Duration::from_secs(2), || {
            cuframes::inspect::inspect(&key, Some(dir.path()))
                .unwrap()
                .subscribers()
                .iter()
                .any(|s| s.name == "reporter" && s.received == 3 && s.report == ReportWriter::Publisher)
        }),
        "the subscriber's report reaches its record"
    );
}
