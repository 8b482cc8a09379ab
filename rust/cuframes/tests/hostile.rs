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
use cuframes::protocol::{self, *};
use cuframes::{ErrorKind, Publisher, Subscriber, SubscriberMode};
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
        (
            any::<u32>(),
            name.clone(),
            any::<i32>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(v, name, dev, mode, ext_flags)| {
                Message::HelloReq(HelloReq {
                    proto_version: v,
                    name,
                    cuda_device: dev,
                    mode,
                    ext_flags,
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
                        early_fds: 0,
                        granted: 0,
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
        if let Ok(info) = protocol::validate_header(&header) {
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
        let ok = protocol::validate_header(&h).is_ok();
        let expected = match field {
            0 => (1..=16).contains(&value),
            1 | 2 => value <= 1,
            3 => value == 32,
            // The two-plane 4:2:0 formats have this geometry: NV12, P010, P016, P012.
            4 => matches!(value as u32, 1 | 3 | 5 | 11),
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
    assert!(protocol::validate_header(&h).is_ok());
    h
}

#[test]
fn a_single_plane_meta_must_say_pitch_uv_0() {
    let mut h = valid_header();
    h.meta.format = cuframes::PixelFormat::Bgra.wire();
    h.meta.pitch_y = 256;
    h.meta.bits_per_pixel = 32;
    h.meta.frame_size_bytes = 256 * 48;
    h.meta.pitch_uv = 0;
    assert!(protocol::validate_header(&h).is_ok());
    for pitch_uv in [1, 256, u32::MAX] {
        h.meta.pitch_uv = pitch_uv;
        let err = protocol::validate_header(&h).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
        assert!(
            err.to_string()
                .contains(&format!("pitch_uv must be 0, not {pitch_uv}")),
            "{err}"
        );
        let err = protocol::validate_meta(&h.meta).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "HELLO_RESP's meta alike: {err}");
    }
}

/// A format number past those this library knows (a newer publisher's,
/// D36) is refused with FORMAT, naming the number and saying the library is
/// too old for it; 0 is no format at all.
#[test]
fn a_format_of_a_newer_library_is_refused_by_number() {
    let mut h = valid_header();
    h.meta.format = 999;
    let err = protocol::validate_header(&h).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Format, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("pixel format 999 is unknown") && text.contains("knows formats 1..=22 and is too old"),
        "{text}"
    );
    h.meta.format = 0;
    let zero = protocol::validate_header(&h).unwrap_err().to_string();
    assert!(
        zero.contains("pixel format 0 is unknown: no format has that number"),
        "{zero}"
    );
}

/// A subscriber told of a format from the future in the handshake fails to
/// subscribe, with the same message.
#[test]
fn a_subscriber_refuses_a_hello_resp_with_a_newer_format() {
    let err = connect_through_a_liar("fmt999", |accept| accept.meta.format = 999);
    assert_eq!(err.kind(), ErrorKind::Format, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("pixel format 999") && text.contains("too old"),
        "{text}"
    );
}

/// Sends `bytes` on a fresh connection and keeps it open for a moment.
fn send_raw(socket: &std::path::Path, bytes: &[u8]) -> UnixStream {
    let mut s = UnixStream::connect(socket).unwrap();
    let _ = s.write_all(bytes);
    s
}

/// Junk peers (`junk_peers`, `ping_without_reading`) beside a publisher and
/// a good subscriber: frames keep flowing to it, none mismatched; a late
/// subscriber still gets in; the publisher rejects the junk.
#[test]
fn junk_peers_do_not_disturb_publishing_or_good_subscribers() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("junk");
    let mut cfg = config(&key, dir.path());
    cfg.handshake_timeout = Duration::from_millis(300);
    cfg.ring_size = 8;
    let publisher = Publisher::create(cfg).unwrap();
    let socket = publisher.paths().socket.clone();
    let good = subscribe(&key, dir.path(), "good");

    let stop = Arc::new(AtomicBool::new(false));
    let published = Arc::new(AtomicU64::new(0));
    let pub_thread = publish_counting(publisher, stop.clone(), published.clone());
    let reader = read_for_two_seconds(good);

    let hello = hello_req_v1();
    let junk_peers = junk_peers(&socket, &hello);
    let _pinger = ping_without_reading(&socket);

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

/// A thread publishing pattern frames every 0.5 ms until `stop`, counting
/// them in `published`; it hands the publisher back.
fn publish_counting(
    mut publisher: Publisher,
    stop: Arc<AtomicBool>,
    published: Arc<AtomicU64>,
) -> std::thread::JoinHandle<Publisher> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            publish_pattern(&mut publisher);
            published.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_micros(500));
        }
        publisher
    })
}

/// A thread reading `good` for 2 s, every read a success: returns the
/// frames that matched, the intact ones that did not, and its stats.
fn read_for_two_seconds(
    mut good: Subscriber,
) -> std::thread::JoinHandle<(u64, u64, cuframes::SubscriberStats)> {
    std::thread::spawn(move || {
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
    })
}

/// An encoded protocol-v1 HELLO_REQ.
fn hello_req_v1() -> Vec<u8> {
    Message::HelloReq(HelloReq {
        proto_version: 1,
        name: "x".into(),
        cuda_device: -1,
        mode: 0,
        ext_flags: 0,
    })
    .encode()
    .unwrap()
}

/// Peers that send the publisher junk (HTTP, bad types, an oversized
/// message, truncated and trailing bytes, descriptors) or nothing at all
/// (a flood of idle connections); those still open, to hold until the end.
fn junk_peers(socket: &std::path::Path, hello: &[u8]) -> Vec<UnixStream> {
    let mut oversized = vec![0x01, 0, 0, 0];
    oversized.extend_from_slice(&5000u32.to_le_bytes());
    oversized.resize(8 + 5000, 0x41);
    let mut junk_peers = vec![
        send_raw(socket, b"GET / HTTP/1.1\r\nHost: cuframes\r\n\r\n"),
        send_raw(socket, &[0xFF; 64]),
        send_raw(socket, &oversized),
        send_raw(socket, &hello[..hello.len() - 3]), // truncated, then silence
        send_raw(socket, &[0x99, 0, 0, 0, 0, 0, 0, 0]),
        send_raw(socket, &[hello, &[0u8; 40][..]].concat()),
        send_raw(socket, &[hello, hello].concat()),
    ];
    // Truncated, then the peer closes mid-message.
    drop(send_raw(socket, &hello[..10]));
    // Descriptors pushed at the publisher are refused.
    junk_peers.push(push_descriptors(socket, hello));
    // A flood of idle connections beyond the pending limit.
    for _ in 0..100 {
        if let Ok(s) = UnixStream::connect(socket) {
            junk_peers.push(s);
        }
    }
    junk_peers
}

/// A peer that sends `hello` with 16 descriptors attached.
fn push_descriptors(socket: &std::path::Path, hello: &[u8]) -> UnixStream {
    let s = UnixStream::connect(socket).unwrap();
    let fds: Vec<i32> = (0..16).map(|_| s.as_raw_fd()).collect();
    let _ = nix::sys::socket::sendmsg::<nix::sys::socket::UnixAddr>(
        s.as_raw_fd(),
        &[std::io::IoSlice::new(hello)],
        &[nix::sys::socket::ControlMessage::ScmRights(&fds)],
        nix::sys::socket::MsgFlags::empty(),
        None,
    );
    s
}

/// A peer that pings without ever reading the answers.
fn ping_without_reading(socket: &std::path::Path) -> UnixStream {
    let pinger = UnixStream::connect(socket).unwrap();
    let pings: Vec<u8> = (0..20_000u64)
        .flat_map(|n| Message::Ping { nonce: n }.encode().unwrap())
        .collect();
    pinger.set_nonblocking(true).unwrap();
    let _ = (&pinger).write(&pings);
    pinger
}

/// Cases for the extra property tests: `CUFRAMES_PROPTEST_CASES` (default 5000).
fn extra_cases() -> u32 {
    std::env::var("CUFRAMES_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(extra_cases()))]

    /// A stream of valid messages cut at arbitrary points (as reads return
    /// them) decodes to the same messages in order, none lost or invented.
    #[test]
    fn stream_decoding_is_independent_of_read_boundaries(
        msgs in proptest::collection::vec(arb_message(), 1..8),
        cuts in proptest::collection::vec(1usize..64, 0..40),
    ) {
        let stream: Vec<u8> = msgs.iter().flat_map(|m| m.encode().unwrap()).collect();
        let (mut buf, mut got, mut at) = (Vec::new(), Vec::new(), 0usize);
        for cut in cuts.iter().copied().chain(std::iter::repeat(64)) {
            if at >= stream.len() {
                break;
            }
            let end = (at + cut).min(stream.len());
            buf.extend_from_slice(&stream[at..end]);
            at = end;
            while let Some((msg, used)) = Message::decode(&buf).unwrap() {
                buf.drain(..used);
                got.push(msg);
            }
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(got, msgs);
    }

    /// A valid message with a few bytes changed: never a panic; anything
    /// accepted is a message that round-trips.
    #[test]
    fn mutated_messages_never_panic(
        msg in arb_message(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..5),
    ) {
        let mut bytes = msg.encode().unwrap();
        for (at, value) in flips {
            let i = at % bytes.len();
            bytes[i] = value;
        }
        if let Ok(Some((back, used))) = Message::decode(&bytes) {
            prop_assert!(used <= bytes.len());
            let again = back.encode().unwrap();
            prop_assert_eq!(Message::decode(&again).unwrap().unwrap().0, back);
        }
    }

    /// Arbitrary geometry: a layout is accepted only when every plane lies
    /// inside `size` and its rows fit their pitch.
    #[test]
    fn accepted_layouts_are_in_bounds(
        format in 0u32..6, width in any::<u32>(), height in any::<u32>(),
        pitch_y in any::<u32>(), pitch_uv in any::<u32>(), small in any::<bool>(),
    ) {
        let (width, height) = if small { (width % 300, height % 300) } else { (width, height) };
        let (pitch_y, pitch_uv) = if small { (pitch_y % 2048, pitch_uv % 2048) } else { (pitch_y, pitch_uv) };
        let Some(format) = cuframes::PixelFormat::from_wire(format) else { return Ok(()); };
        if let Ok(layout) = cuframes::FrameLayout::with_pitches(format, width, height, pitch_y as usize, pitch_uv as usize) {
            prop_assert!((1..=16384).contains(&width) && (1..=16384).contains(&height));
            for p in layout.planes() {
                prop_assert!(p.row_bytes <= p.pitch);
                prop_assert!(p.offset + p.pitch * p.rows <= layout.size());
            }
        }
    }
}

/// A tiny deterministic PRNG (xorshift64*), so failures replay.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The key's shared header as a plain file, for a hostile writer.
fn open_header_file(key: &str) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/dev/shm/cuframes-{key}"))
        .expect("open the shared header")
}

/// Spec §2 offsets (subscriber slots at 0x0D00, D1).
mod offsets {
    pub const GLOBAL_SEQ: usize = 0xC0;
    pub const SUBSCRIBER_BITMAP: usize = 0xC8;
    pub const SLOT_ACK: usize = 0x10;
    pub const fn slot(index: usize) -> usize {
        0x100 + index * 192
    }
    pub const fn subscriber(bit: usize) -> usize {
        0xD00 + bit * 128
    }
}

fn write_u64(file: &std::fs::File, offset: usize, value: u64) {
    use std::os::unix::fs::FileExt;
    file.write_all_at(&value.to_le_bytes(), offset as u64).unwrap();
}

/// Anything a subscriber can write where the publisher keeps its
/// bookkeeping — every ACK bit, the subscriber bitmap, forged ACTIVE
/// subscriber slots, a forged global_seq — neither stalls a strict-wait
/// publisher nor changes whom it waits for, and a later subscriber still
/// starts at the real seq.
#[test]
fn forged_bookkeeping_is_ignored_by_the_publisher() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("forge");
    let mut publisher = Publisher::create(strict(&key, dir.path(), 4, Duration::from_secs(5))).unwrap();
    let file = open_header_file(&key);
    for _ in 0..10 {
        publish_pattern(&mut publisher);
    }
    // Forged subscribers that will never ACK: bitmap, slots, zeroed ACKs.
    write_u64(&file, offsets::SUBSCRIBER_BITMAP, u64::MAX);
    for bit in 0..32 {
        write_u64(&file, offsets::subscriber(bit), SUBSCRIBER_ACTIVE);
        write_u64(&file, offsets::subscriber(bit) + 8, 1);
    }
    for slot in 0..16 {
        write_u64(&file, offsets::slot(slot) + offsets::SLOT_ACK, 0);
    }
    let started = Instant::now();
    for _ in 0..100 {
        publish_pattern(&mut publisher);
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "forged subscribers stalled the publisher: {:?}",
        started.elapsed()
    );
    assert_eq!(publisher.subscriber_count(), 0);

    // A real subscriber, then forged ACKs in every bit: the publisher must
    // still wait for the real subscriber's own release... which it cannot
    // tell from a forged one (one shared bitmap, spec §5): what it must not
    // do is wait for anyone else. Here: the subscriber reads and releases.
    write_u64(&file, offsets::GLOBAL_SEQ, 1 << 60);
    let mut sub = subscribe(&key, dir.path(), "real");
    assert_eq!(
        sub.initial_seq(),
        110,
        "initial_seq comes from the publisher, not the header"
    );
    publish_pattern(&mut publisher);
    let lease = sub.next(SECOND).unwrap();
    assert_eq!(lease.seq(), 111);
    assert!(lease_matches(&lease));
    lease.release().unwrap();
    assert_eq!(publisher.stats().ack_timeouts, 0);
}

/// A forged `global_seq` far ahead of the ring (any subscriber can write it)
/// neither sends another subscriber past the frames still to come nor
/// inflates its loss count (D14): it waits for the real next frame.
#[test]
fn a_forged_global_seq_does_not_strand_a_subscriber() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("forge-global");
    let mut publisher = Publisher::create(config(&key, dir.path())).unwrap();
    let file = open_header_file(&key);
    for mode in [SubscriberMode::Sequential, SubscriberMode::Latest] {
        let mut c = subscriber_config(&key, dir.path(), "victim");
        c.mode = mode;
        let mut victim = Subscriber::connect(c).unwrap();
        let next = publisher.next_seq();
        write_u64(&file, offsets::GLOBAL_SEQ, 1 << 60);
        let err = victim.next(Some(Duration::from_millis(50))).unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::Timeout,
            "{mode:?}: nothing was published: {err}"
        );
        publish_pattern(&mut publisher);
        let lease = victim.next(SECOND).unwrap();
        assert_eq!(lease.seq(), next, "{mode:?}: the real next frame");
        assert!(lease_matches(&lease));
        drop(lease);
        assert_eq!(victim.stats().dropped, 0, "{mode:?}: nothing lost");
    }
}

/// Random bytes scribbled over a live header while a strict-wait publisher
/// and subscribers run: no panic, no crash, only clean errors; the
/// publisher never waits longer than its ACK timeout; once the fixed part
/// is restored a new subscriber gets verified frames again.
#[test]
fn scribbling_over_a_live_header_is_survived() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("scribble");
    let ack_timeout = Duration::from_millis(200);
    let mut cfg = strict(&key, dir.path(), 4, ack_timeout);
    cfg.handshake_timeout = Duration::from_millis(500);
    let publisher = Publisher::create(cfg).unwrap();
    let file = open_header_file(&key);
    let mut pristine = vec![0u8; HEADER_SIZE];
    {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(&mut pristine, 0).unwrap();
    }

    let stop = Arc::new(AtomicBool::new(false));
    let slowest_us = Arc::new(AtomicU64::new(0));
    let pub_thread = publish_timed(publisher, stop.clone(), slowest_us.clone());
    let readers: Vec<_> = (0..3)
        .map(|n| read_reconnecting(format!("r{n}"), stop.clone(), key.clone(), dir.path().to_owned()))
        .collect();

    std::thread::sleep(Duration::from_millis(200));
    let writes = scribble(&file, Duration::from_millis(1500));
    // Restore the fixed part (what only the publisher writes at creation).
    {
        use std::os::unix::fs::FileExt;
        file.write_all_at(&pristine, 0).unwrap();
    }
    assert_frames_flow_again(&key, dir.path());

    stop.store(true, Ordering::Relaxed);
    let publisher = pub_thread.join().expect("the publisher never panics");
    let mut total = (0, 0, 0);
    for r in readers {
        let (f, e, c) = r.join().expect("subscribers never panic");
        total = (total.0 + f, total.1 + e, total.2 + c);
    }
    let slowest = Duration::from_micros(slowest_us.load(Ordering::Relaxed));
    eprintln!(
        "scribble: {writes} writes; readers {} frames, {} clean errors, {} connects; publisher {} frames, {} ACK timeouts, slowest publish {slowest:?}",
        total.0,
        total.1,
        total.2,
        publisher.next_seq() - 1,
        publisher.stats().ack_timeouts
    );
    assert!(
        slowest < ack_timeout + Duration::from_millis(500),
        "a publish took {slowest:?} (ACK timeout {ack_timeout:?})"
    );
    assert!(writes > 1000);
}

/// A thread publishing pattern frames (panicking on any error) every
/// 0.2 ms until `stop`, keeping the slowest publish in `slowest_us`; it
/// hands the publisher back.
fn publish_timed(
    mut publisher: Publisher,
    stop: Arc<AtomicBool>,
    slowest_us: Arc<AtomicU64>,
) -> std::thread::JoinHandle<Publisher> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            publish_pattern(&mut publisher); // panics on any error
            slowest_us.fetch_max(t.elapsed().as_micros() as u64, Ordering::Relaxed);
            std::thread::sleep(Duration::from_micros(200));
        }
        publisher
    })
}

/// A thread subscribing as `name` and reading until `stop`, connecting
/// again whenever it is dropped or refused; frames are judged, not
/// asserted (they may be forged). Returns frames, clean errors, connects.
fn read_reconnecting(
    name: String,
    stop: Arc<AtomicBool>,
    key: String,
    dir: std::path::PathBuf,
) -> std::thread::JoinHandle<(u64, u64, u64)> {
    std::thread::spawn(move || {
        let (mut frames, mut errors, mut connects) = (0u64, 0u64, 0u64);
        let mut sub = None;
        while !stop.load(Ordering::Relaxed) {
            let s = match sub.as_mut() {
                Some(s) => s,
                None => match cuframes::Subscriber::connect(subscriber_config(&key, &dir, &name)) {
                    Ok(s) => {
                        connects += 1;
                        sub.insert(s)
                    }
                    Err(_) => {
                        errors += 1;
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                },
            };
            match s.next(Some(Duration::from_millis(50))) {
                Ok(lease) => {
                    frames += 1;
                    let _ = lease_matches(&lease); // may be forged: judged, not asserted
                    let _ = lease.release();
                }
                Err(e) if e.kind() == ErrorKind::Timeout => errors += 1,
                Err(_) => {
                    errors += 1;
                    sub = None; // dropped or refused: connect again
                }
            }
        }
        (frames, errors, connects)
    })
}

/// Random bytes over the header for `how_long`: a tenth of the time every
/// byte at once, else one random, small, near-maximal or zero u64 at a
/// random aligned offset. Returns the number of writes.
fn scribble(file: &std::fs::File, how_long: Duration) -> u64 {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let scribble_until = Instant::now() + how_long;
    let mut writes = 0u64;
    while Instant::now() < scribble_until {
        let what = rng.next() % 10;
        if what == 0 {
            // Every byte at once.
            let bytes: Vec<u8> = (0..HEADER_SIZE / 8)
                .flat_map(|_| rng.next().to_le_bytes())
                .collect();
            use std::os::unix::fs::FileExt;
            file.write_all_at(&bytes, 0).unwrap();
        } else {
            let offset = (rng.next() as usize % (HEADER_SIZE / 8)) * 8;
            let value = match rng.next() % 4 {
                0 => rng.next(),
                1 => rng.next() % 64,
                2 => u64::MAX - rng.next() % 4,
                _ => 0,
            };
            write_u64(file, offset, value);
        }
        writes += 1;
        if writes.is_multiple_of(16) {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    writes
}

/// Once the header is restored a new subscriber gets in (within 3 s) and
/// verifies 20 frames (within 5 s).
fn assert_frames_flow_again(key: &str, dir: &std::path::Path) {
    let mut fresh = None;
    assert!(
        eventually(Duration::from_secs(3), || {
            fresh = cuframes::Subscriber::connect(subscriber_config(key, dir, "fresh")).ok();
            fresh.is_some()
        }),
        "a new subscriber gets in once the header is restored"
    );
    let mut fresh = fresh.unwrap();
    let mut verified = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while verified < 20 && Instant::now() < deadline {
        if let Ok(lease) = fresh.next(SECOND) {
            assert!(lease_matches(&lease), "seq {} after the restore", lease.seq());
            verified += 1;
        }
    }
    assert_eq!(verified, 20, "frames flow again after the restore");
    drop(fresh);
}

/// A publisher that relays a real one's HELLO_RESP to the subscriber after
/// `lie` changed it (asked without `EARLY_FDS`, so the subscriber opens the
/// real header by name and can compare), then hangs up. Returns the
/// subscriber's error.
fn connect_through_a_liar(tag: &str, lie: impl FnOnce(&mut HelloAccept) + Send + 'static) -> cuframes::Error {
    let real = tempfile::tempdir().unwrap();
    let liar = tempfile::tempdir().unwrap();
    let key = unique_key(tag);
    let _publisher = Publisher::create(config(&key, real.path())).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(liar.path().join(format!("{key}.sock"))).unwrap();
    let real_socket = real.path().join(format!("{key}.sock"));
    let relay = std::thread::spawn(move || {
        relay_hello_v1(&listener, &real_socket, |resp| {
            lie(resp.accept.as_mut().expect("accepted"))
        });
    });
    let err = Subscriber::connect(subscriber_config(&key, liar.path(), "s")).unwrap_err();
    relay.join().unwrap();
    err
}

#[test]
fn a_hello_resp_whose_ownership_disagrees_with_the_header_is_refused() {
    // The real header says LIBRARY (0); the liar says EXTERNAL (1), then junk.
    for (claim, tag) in [(OWNERSHIP_EXTERNAL as u32, "ownext"), (7, "ownjunk")] {
        let err = connect_through_a_liar(tag, move |accept| accept.ownership_mode = claim);
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("ownership_mode {claim} in HELLO_RESP"))
                && text.contains("shared memory says 0"),
            "names both values: {text}"
        );
    }
}

#[test]
fn a_truthful_relay_is_accepted() {
    // The same relay without a lie: the refusal above is the lie's doing.
    let real = connect_through_a_liar("ownok", |_| {});
    // The relay hangs up after HELLO_RESP: the subscriber gets past the
    // checks and fails later, on the closed socket, not on ownership.
    assert_eq!(real.kind(), ErrorKind::Disconnected, "{real}");
    assert!(!real.to_string().contains("ownership"), "{real}");
}

/// The most descriptors a real publisher sends before SUBSCRIBE: the header,
/// 16 slots (a ring of 16 shared as fds), the fence array and the side-data
/// area. Announcing that many is let through (the liar then hangs up); one
/// more is refused before any is read. Subscribers once refused 19, so no one
/// could subscribe to a CUDA ring of 16.
#[test]
fn early_descriptors_up_to_a_full_cuda_ring_are_accepted_and_no_more() {
    let full = connect_through_a_liar("early19", |accept| accept.early_fds = 19);
    assert_eq!(full.kind(), ErrorKind::Disconnected, "{full}");
    let over = connect_through_a_liar("early20", |accept| accept.early_fds = 20);
    assert_eq!(over.kind(), ErrorKind::Protocol, "{over}");
    assert!(
        over.to_string()
            .contains("announced 20 descriptors before SUBSCRIBE (at most 19)"),
        "{over}"
    );
}
