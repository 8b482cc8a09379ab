//! The handshake and subscriber lifecycle (spec §4), key ownership and
//! stale-resource recovery (spec §1). Joining late and a publisher shut down
//! with frames out run over every memory backend: `every_backend/lifecycle.rs`.

mod common;

use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use cuframes::protocol::{HelloReq, Message};
use cuframes::{ErrorKind, Publisher, Subscriber, SubscriberMode};

fn hello(mode: u32) -> Vec<u8> {
    Message::HelloReq(HelloReq {
        proto_version: 1,
        name: "raw".into(),
        cuda_device: -1,
        mode,
        ext_flags: 0,
    })
    .encode()
    .unwrap()
}

fn raw(publisher: &Publisher) -> UnixStream {
    let s = UnixStream::connect(&publisher.paths().socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s
}

#[test]
fn thirty_one_subscribers_then_too_many() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("many");
    let publisher = Publisher::create(config(&key, dir.path())).unwrap();
    let subs: Vec<Subscriber> = (0..31)
        .map(|i| subscribe(&key, dir.path(), &format!("s{i}")))
        .collect();
    let mut bits: Vec<u32> = subs.iter().map(|s| s.bit()).collect();
    bits.sort();
    assert_eq!(
        bits,
        (1..=31).collect::<Vec<_>>(),
        "bits 1..=31, bit 0 never assigned"
    );
    assert_eq!(publisher.subscriber_count(), 31);
    let err = Subscriber::connect(subscriber_config(&key, dir.path(), "32nd")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooMany);
    assert!(err.to_string().contains("too many subscribers"), "{err}");
    assert_eq!(publisher.subscriber_count(), 31, "the refused one holds nothing");
    drop(subs);
    assert!(eventually(Duration::from_secs(2), || publisher
        .subscriber_count()
        == 0));
}

#[test]
fn unsubscribe_frees_the_bit_for_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("unsub");
    let publisher = Publisher::create(config(&key, dir.path())).unwrap();
    let a = subscribe(&key, dir.path(), "a");
    let b = subscribe(&key, dir.path(), "b");
    assert_eq!((a.bit(), b.bit()), (1, 2));
    drop(a); // sends UNSUBSCRIBE
    assert!(eventually(Duration::from_secs(1), || publisher
        .subscriber_count()
        == 1));
    let names: Vec<String> = publisher.subscribers().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["b"]);
    let c = subscribe(&key, dir.path(), "c");
    assert_eq!(c.bit(), 1, "lowest free bit is reused");
}

#[test]
fn socket_eof_frees_the_bit_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("eof");
    let publisher = Publisher::create(config(&key, dir.path())).unwrap();
    let mut s = raw(&publisher);
    s.write_all(&hello(0)).unwrap();
    assert!(matches!(read_message(&mut s), Some(Message::HelloResp(r)) if r.result == 0));
    s.write_all(&Message::SubscribeReq { proto_version: 1 }.encode().unwrap())
        .unwrap();
    assert!(
        matches!(read_message(&mut s), Some(Message::SubscribeResp(r)) if r.result == 0 && r.assigned_bit == 1)
    );
    assert_eq!(publisher.subscriber_count(), 1);
    drop(s); // no UNSUBSCRIBE: just EOF
    let start = Instant::now();
    assert!(eventually(Duration::from_secs(1), || publisher
        .subscriber_count()
        == 0));
    assert!(start.elapsed() < Duration::from_millis(500));
}

#[test]
fn unknown_mode_and_wrong_subscribe_version_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("mode");
    let publisher = Publisher::create(config(&key, dir.path())).unwrap();
    let mut s = raw(&publisher);
    s.write_all(&hello(7)).unwrap();
    assert!(
        matches!(read_message(&mut s), Some(Message::HelloResp(r)) if r.result == ErrorKind::InvalidArgument.code())
    );
    assert!(read_message(&mut s).is_none(), "closed after refusal");

    let mut s = raw(&publisher);
    s.write_all(&hello(0)).unwrap();
    assert!(matches!(read_message(&mut s), Some(Message::HelloResp(r)) if r.result == 0));
    s.write_all(&Message::SubscribeReq { proto_version: 2 }.encode().unwrap())
        .unwrap();
    assert!(
        matches!(read_message(&mut s), Some(Message::SubscribeResp(r)) if r.result == ErrorKind::Protocol.code())
    );
    assert_eq!(publisher.subscriber_count(), 0);
}

#[test]
fn out_of_order_messages_are_protocol_errors() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("order");
    let publisher = Publisher::create(config(&key, dir.path())).unwrap();
    for first in [
        Message::SubscribeReq { proto_version: 1 },
        Message::Unsubscribe { reason: 0 },
        Message::Shutdown { reason: 0 },
        Message::EventFd { purpose: 1 },
    ] {
        let mut s = raw(&publisher);
        s.write_all(&first.encode().unwrap()).unwrap();
        match read_message(&mut s) {
            Some(Message::Error { code, message }) => {
                assert_eq!(code, ErrorKind::Protocol.code(), "{}", first.name());
                let why = if matches!(first, Message::EventFd { .. }) {
                    "carried no descriptor"
                } else {
                    "expected HELLO_REQ"
                };
                assert!(message.contains(why), "{message}");
            }
            other => panic!("{}: expected ERROR, got {other:?}", first.name()),
        }
        assert!(read_message(&mut s).is_none());
    }
    assert_eq!(publisher.subscriber_count(), 0);
}

#[test]
fn ping_is_answered_in_every_phase() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("ping");
    let publisher = Publisher::create(config(&key, dir.path())).unwrap();
    let mut s = raw(&publisher);
    let ping = |s: &mut UnixStream, nonce: u64| {
        s.write_all(&Message::Ping { nonce }.encode().unwrap()).unwrap();
        assert_eq!(read_message(s), Some(Message::Pong { nonce }));
    };
    ping(&mut s, 1);
    s.write_all(&hello(0)).unwrap();
    assert!(matches!(read_message(&mut s), Some(Message::HelloResp(_))));
    ping(&mut s, 2);
    s.write_all(&Message::SubscribeReq { proto_version: 1 }.encode().unwrap())
        .unwrap();
    assert!(matches!(read_message(&mut s), Some(Message::SubscribeResp(_))));
    // Two EVENT_FDs follow (wake-up and host slots); their descriptors are
    // dropped by this plain read.
    assert!(matches!(
        read_message(&mut s),
        Some(Message::EventFd { purpose: 1 })
    ));
    assert!(matches!(
        read_message(&mut s),
        Some(Message::EventFd { purpose: 2 })
    ));
    ping(&mut s, 3);
    assert_eq!(publisher.subscriber_count(), 1);
}

#[test]
fn stalled_handshake_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("stall");
    let mut cfg = config(&key, dir.path());
    cfg.handshake_timeout = Duration::from_millis(150);
    let publisher = Publisher::create(cfg).unwrap();
    let mut s = raw(&publisher);
    let start = Instant::now();
    match read_message(&mut s) {
        Some(Message::Error { code, .. }) => assert_eq!(code, ErrorKind::Timeout.code()),
        other => panic!("expected ERROR(TIMEOUT), got {other:?}"),
    }
    assert!(read_message(&mut s).is_none());
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(140) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!(publisher.stats().rejected_connections, 1);
}

#[test]
fn a_live_key_cannot_be_published_twice() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("twice");
    let first = Publisher::create(config(&key, dir.path())).unwrap();
    let err = Publisher::create(config(&key, dir.path())).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert!(
        err.to_string().contains(&format!("pid {}", std::process::id())),
        "{err}"
    );
    drop(first);
    Publisher::create(config(&key, dir.path())).expect("free again after destroy");
}

#[test]
fn stale_socket_and_shm_are_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("stale");
    // What a crashed publisher leaves: a socket nobody listens on and a
    // shared header of its size (here: zeros). Anything else at the name is
    // not provably its leftover, and is refused (trust.rs).
    let sock = dir.path().join(format!("{key}.sock"));
    drop(UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    std::fs::write(
        format!("/dev/shm/cuframes-{key}"),
        vec![0u8; cuframes::protocol::HEADER_SIZE],
    )
    .unwrap();
    let err = Subscriber::connect(subscriber_config(&key, dir.path(), "s")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(err.to_string().contains("stale"), "{err}");
    // The publisher says what it removed, to its own logger.
    let said: Arc<Mutex<Vec<(cuframes::log::Level, String)>>> = Arc::default();
    let mut with_logger = config(&key, dir.path());
    let theirs = said.clone();
    with_logger.logger = Some(cuframes::log::Logger::new(move |level, message| {
        theirs.lock().unwrap().push((level, message.to_owned()))
    }));
    let mut publisher = Publisher::create(with_logger).expect("stale resources recovered");
    let said = said.lock().unwrap().clone();
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0].0, cuframes::log::Level::Warning);
    assert!(
        said[0].1.contains(&format!(
            "key '{key}': removed what a publisher that is gone left behind"
        )) && said[0].1.contains(&sock.display().to_string())
            && said[0].1.contains(&format!("/dev/shm/cuframes-{key}")),
        "{said:?}"
    );
    let mut sub = subscribe(&key, dir.path(), "s");
    publish_pattern(&mut publisher);
    assert!(lease_matches(&sub.next(SECOND).unwrap()));
}

#[test]
fn a_foreign_live_socket_is_respected() {
    // A publisher of another implementation: accepts on the socket, takes no lock.
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("foreign");
    let _listener = UnixListener::bind(dir.path().join(format!("{key}.sock"))).unwrap();
    let err = Publisher::create(config(&key, dir.path())).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert!(dir.path().join(format!("{key}.sock")).exists(), "left alone");
}

#[test]
fn bad_configs_are_refused_with_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("cfg");
    type Mutation = fn(&mut cuframes::PublisherConfig);
    let cases: [(Mutation, &str); 9] = [
        (|c| c.ring_size = 0, "ring size 0"),
        (|c| c.ring_size = 17, "ring size 17"),
        (|c| c.width = 0, "out of range"),
        (|c| c.key = "a/b".into(), "invalid key"),
        (|c| c.fps = Some((30, 0)), "frame rate"),
        (
            |c| {
                c.policy = cuframes::Policy::StrictWait;
                c.ack_timeout = Duration::ZERO
            },
            "ACK timeout",
        ),
        (|c| c.memory = cuframes::MemoryRequest::Cuda, "CUDA"),
        (|c| c.cuda_device = -2, "cuda_device -2 is no device ordinal"),
        (|c| c.handshake_timeout = Duration::ZERO, "handshake timeout of 0"),
    ];
    for (mutate, phrase) in cases {
        let mut c = config(&key, dir.path());
        mutate(&mut c);
        let err = Publisher::create(c).unwrap_err();
        assert!(err.to_string().contains(phrase), "{err} (want {phrase})");
    }
    let mut bad_name = subscriber_config(&key, dir.path(), &"n".repeat(32));
    let _p = Publisher::create(config(&key, dir.path())).unwrap();
    assert_eq!(
        Subscriber::connect(bad_name.clone()).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    bad_name.name = "ok".into();
    bad_name.mode = SubscriberMode::Latest;
    Subscriber::connect(bad_name).unwrap();
}

#[test]
fn a_live_key_is_respected_across_runtime_directories() {
    // /dev/shm is global while sockets and locks are per runtime directory.
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let key = unique_key("dirs");
    let _first = Publisher::create(config(&key, one.path())).unwrap();
    let err = Publisher::create(config(&key, two.path())).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert!(err.to_string().contains("another runtime directory"), "{err}");
    assert!(
        !two.path().join(format!("{key}.lock")).exists(),
        "a refused claim leaves no lock file"
    );
    let status = cuframes::key_status(&key, Some(two.path())).unwrap();
    assert!(status.live, "the shared header's lock shows the owner is alive");
    assert_eq!(
        cuframes::cleanup_key(&key, Some(two.path())).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert!(std::path::Path::new(&format!("/dev/shm/cuframes-{key}")).exists());
}

#[test]
fn the_publisher_describes_its_stream_as_subscribers_see_it() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("info");
    let mut cfg = config(&key, dir.path());
    cfg.fps = Some((30000, 1001));
    let publisher = Publisher::create(cfg).unwrap();
    let info = publisher.info();
    assert_eq!(info.fps, Some((30000, 1001)));
    assert_eq!(info.ring_size, publisher.ring_size());
    assert_eq!(&info.layout, publisher.layout());
    assert_eq!(info.memory, publisher.memory());
    let sub = subscribe(&key, dir.path(), "s");
    assert_eq!(sub.info(), info, "one description, both sides");
}
