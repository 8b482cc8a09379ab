//! `cuframes exporter` and `cuframes health` against real publishers and
//! subscribers (host memory): figures that agree with what the library
//! itself counts, the HTTP endpoint, hostile files and headers, and scrapes
//! while publishers come and go. (A real Prometheus server scrapes it in
//! `scripts/test-monitoring.sh`.)

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::*;
use cuframes::{
    MemoryRequest, PixelFormat, Policy, Publisher, PublisherConfig, Subscriber, SubscriberConfig, pattern,
};

/// One sample: metric name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses Prometheus's text format strictly enough to catch a malformed
/// page: every non-comment line is `name{labels} value`.
fn parse(page: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in page.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line:?}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value: {line:?}"));
        let (name, labels) = match series.split_once('{') {
            None => (series.to_owned(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("unclosed labels: {line:?}"));
                let mut labels = BTreeMap::new();
                let mut chars = body.chars().peekable();
                while chars.peek().is_some() {
                    let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
                    assert_eq!(chars.next(), Some('"'), "{line:?}");
                    let mut value = String::new();
                    while let Some(c) = chars.next() {
                        match c {
                            '\\' => value.push(chars.next().expect("escape")),
                            '"' => break,
                            c => value.push(c),
                        }
                    }
                    labels.insert(key, value);
                    if chars.peek() == Some(&',') {
                        chars.next();
                    }
                }
                (name.to_owned(), labels)
            }
        };
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "metric name {name:?}"
        );
        samples.push((name, labels, value));
    }
    samples
}

/// The value of `name` for `key` (and `subscriber`, when given).
fn value(samples: &[Sample], name: &str, key: &str, subscriber: Option<&str>) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && l.get("key").map(String::as_str) == Some(key)
                && subscriber.is_none_or(|s| l.get("subscriber").map(String::as_str) == Some(s))
        })
        .map(|(_, _, v)| *v)
}

fn scrape(env: &TestEnv) -> Vec<Sample> {
    let out = env.run(&["exporter", "--once"]);
    out.assert_success();
    parse(&out.stdout)
}

fn host_publisher(env: &TestEnv, key: &str, policy: Policy, ring: usize) -> Publisher {
    let mut c = PublisherConfig::new(key, PixelFormat::Nv12, 64, 48);
    c.memory = MemoryRequest::Host;
    c.runtime_dir = Some(env.dir().to_owned());
    c.policy = policy;
    c.ring_size = ring;
    c.fps = Some((25, 1));
    Publisher::create(c).unwrap()
}

fn host_subscriber(env: &TestEnv, key: &str, name: &str) -> Subscriber {
    let mut c = SubscriberConfig::new(key);
    c.runtime_dir = Some(env.dir().to_owned());
    c.name = name.into();
    // The slots themselves, read when the test says (not the defaults, D39).
    c.copy = cuframes::CopyMode::Never;
    c.read_ahead = 0;
    Subscriber::connect(c).unwrap()
}

fn publish(p: &mut Publisher) {
    let layout = p.layout().clone();
    let n = p.next_seq() - 1;
    p.publish_with(n as i64, |planes| pattern::fill_frame(&layout, n, planes))
        .unwrap();
}

/// What the exporter says of a key and its subscriber is what the
/// publisher and the subscriber count themselves.
#[test]
fn figures_agree_with_the_library_counts() {
    let env = TestEnv::new();
    let key = env.key("ex-agree");
    let mut publisher = host_publisher(&env, &key, Policy::DropOldest, 4);
    let mut sub = host_subscriber(&env, &key, "reader");
    for _ in 0..10 {
        publish(&mut publisher);
        sub.next(Some(Duration::from_secs(1))).unwrap().release().unwrap();
    }
    for _ in 0..6 {
        publish(&mut publisher); // not read: the reader lags 6, 2 of them lapped
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(400)); // the publisher's copy of the report
    let m = scrape(&env);
    assert_eq!(value(&m, "cuframes_publisher_up", &key, None), Some(1.0));
    assert_eq!(
        value(&m, "cuframes_frames_published_total", &key, None),
        Some(16.0)
    );
    assert_eq!(value(&m, "cuframes_ring_slots", &key, None), Some(4.0));
    assert_eq!(value(&m, "cuframes_subscribers", &key, None), Some(1.0));
    assert_eq!(
        value(&m, "cuframes_nominal_frames_per_second", &key, None),
        Some(25.0)
    );
    let fps = value(&m, "cuframes_frames_per_second", &key, None).expect("a rate from the ring");
    assert!(fps > 50.0, "frames 2 ms apart: {fps}");
    let got = |name| value(&m, name, &key, Some("reader"));
    assert_eq!(
        got("cuframes_subscriber_frames_received_total"),
        Some(sub.stats().received as f64)
    );
    assert_eq!(got("cuframes_subscriber_lag_frames"), Some(6.0));
    let info = m
        .iter()
        .find(|(n, l, _)| n == "cuframes_subscriber_frames_received_total" && l.get("key") == Some(&key))
        .unwrap();
    assert_eq!(
        info.1["report"], "publisher",
        "the publisher's bounded copy of the report, in a header only its user writes"
    );
    // Now the reader takes what is left: 2 lapped frames count as lost.
    while sub.next(Some(Duration::from_millis(50))).is_ok() {}
    publish(&mut publisher);
    std::thread::sleep(Duration::from_millis(400));
    let m = scrape(&env);
    let lost: f64 = m
        .iter()
        .filter(|(n, l, _)| n == "cuframes_subscriber_frames_lost_total" && l.get("key") == Some(&key))
        .map(|(_, _, v)| v)
        .sum();
    assert_eq!(lost, sub.stats().dropped as f64, "{:?}", sub.stats());
    assert!(lost >= 2.0);
    let stale = value(&m, "cuframes_key_stale", &key, None);
    assert_eq!(stale, Some(0.0));
}

/// A strict-wait publisher's waits and the subscriber it dropped.
#[test]
fn waits_and_drops_are_counted() {
    let env = TestEnv::new();
    let key = env.key("ex-drops");
    let mut c = PublisherConfig::new(&key, PixelFormat::Nv12, 64, 48);
    c.memory = MemoryRequest::Host;
    c.runtime_dir = Some(env.dir().to_owned());
    c.policy = Policy::StrictWait;
    c.ring_size = 2;
    c.ack_timeout = Duration::from_millis(200);
    c.startup_timeout = Duration::from_millis(200);
    let mut publisher = Publisher::create(c).unwrap();
    let mut stuck = host_subscriber(&env, &key, "stuck");
    let mut held = Vec::new();
    for _ in 0..2 {
        publish(&mut publisher);
        held.push(stuck.next(Some(Duration::from_secs(1))).unwrap());
    }
    publish(&mut publisher); // waits 200 ms, drops "stuck"
    let m = scrape(&env);
    assert_eq!(value(&m, "cuframes_slot_waits_total", &key, None), Some(1.0));
    assert!(value(&m, "cuframes_slot_wait_seconds_total", &key, None).unwrap() >= 0.2);
    assert_eq!(
        value(&m, "cuframes_subscribers_dropped_total", &key, None),
        Some(1.0)
    );
    assert_eq!(value(&m, "cuframes_subscribers", &key, None), Some(0.0));
    drop(held);
}

/// `cuframes health`: 0 while a publisher publishes, 1 with a reason
/// otherwise; with `--subscriber`, that subscriber's lag.
#[test]
fn health_says_why() {
    let env = TestEnv::new();
    let key = env.key("ex-health");
    let out = env.run(&["health", &key]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(out.stdout.contains("no live publisher"), "{out}");
    let mut publisher = host_publisher(&env, &key, Policy::DropOldest, 4);
    let out = env.run(&["health", &key]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(out.stdout.contains("no frame yet"), "{out}");
    let mut sub = host_subscriber(&env, &key, "watched");
    publish(&mut publisher);
    sub.next(Some(Duration::from_secs(1))).unwrap().release().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    env.run(&["health", &key, "--max-age", "5"]).assert_success();
    env.run(&["health", &key, "--max-age", "5", "--subscriber", "watched"])
        .assert_success();
    let out = env.run(&["health", &key, "--max-age", "5", "--subscriber", "nobody"]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    for _ in 0..5 {
        publish(&mut publisher);
    }
    std::thread::sleep(Duration::from_millis(300));
    let out = env.run(&[
        "health",
        &key,
        "--max-age",
        "5",
        "--subscriber",
        "watched",
        "--max-lag",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(out.stdout.contains("5 frames behind"), "{out}");
    std::thread::sleep(Duration::from_millis(1100));
    let out = env.run(&["health", &key, "--max-age", "1"]);
    assert_eq!(out.status.code(), Some(1), "{out}");
    assert!(out.stdout.contains("last frame"), "{out}");
    env.run(&["health", &key, "--max-age", "0"])
        .assert_error(&["--max-age"]);
}

/// GET /metrics over HTTP, /healthz, and what else a client may send.
#[test]
fn the_http_endpoint_answers_and_refuses() {
    let env = TestEnv::new();
    let key = env.key("ex-http");
    let mut publisher = host_publisher(&env, &key, Policy::DropOldest, 4);
    publish(&mut publisher);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let exporter = env.spawn("exporter", &["exporter", "--listen", &listen]);
    let get = |request: &str| -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut conn = loop {
            match std::net::TcpStream::connect(&listen) {
                Ok(c) => break c,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("exporter not listening: {e}"),
            }
        };
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        conn.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = conn.read_to_string(&mut answer);
        answer
    };
    let answer = get("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.contains("text/plain; version=0.0.4"), "{answer}");
    let body = answer.split_once("\r\n\r\n").unwrap().1;
    assert_eq!(
        value(&parse(body), "cuframes_frames_published_total", &key, None),
        Some(1.0)
    );
    assert!(get("GET /healthz HTTP/1.0\r\n\r\n").ends_with("ok\n"));
    assert!(get("GET /nope HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(get("POST /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 405"));
    assert!(get("\u{0}\u{1}garbage\r\n\r\n").starts_with("HTTP/1.1 405"));
    // Clients that connect and say nothing, or send half a request, hold
    // up no one: each is served by its own thread (they used to be served
    // one at a time, each costing the others up to 2 s).
    let mut silent = Vec::new();
    for n in 0..5 {
        let mut conn = std::net::TcpStream::connect(&listen).unwrap();
        if n % 2 == 1 {
            conn.write_all(b"GET /metr").unwrap();
        }
        silent.push(conn);
    }
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    assert!(get("GET /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 200"));
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?} behind 5 silent clients",
        started.elapsed()
    );
    drop(silent);
    drop(exporter);
}

/// Files planted at cuframes' names and a header scribbled over never hang
/// or crash the exporter; every page it writes parses.
#[test]
fn hostile_files_and_headers_are_survived() {
    use std::os::unix::fs::FileExt;
    let env = TestEnv::new();
    let fifo = env.key("ex-fifo");
    let junk = env.key("ex-junk");
    let fifo_path = shm_path(&fifo);
    nix::unistd::mkfifo(&fifo_path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    std::fs::write(shm_path(&junk), b"junk").unwrap();
    let key = env.key("ex-scribbled");
    let mut publisher = host_publisher(&env, &key, Policy::DropOldest, 4);
    publish(&mut publisher);
    let header = std::fs::OpenOptions::new()
        .write(true)
        .open(shm_path(&key))
        .unwrap();
    for (offset, value) in [
        (0x20u64, 99u64),
        (0x40, u64::MAX),
        (0xD00 + 128 * 3, 2),
        (0xD00 + 128 * 3 + 0x20, u64::MAX),
    ] {
        header.write_all_at(&value.to_le_bytes(), offset).unwrap();
        let started = Instant::now();
        let out = env.run(&["exporter", "--once"]);
        out.assert_success();
        assert!(started.elapsed() < Duration::from_secs(10));
        parse(&out.stdout);
        assert!(!out.stdout.contains(&fifo), "the FIFO is no key: {out}");
    }
    // The runtime directory: at a key's socket and lock names, what no
    // publisher puts there. None is a key but the stale lock's.
    let dir = env.dir();
    let mode = nix::sys::stat::Mode::from_bits_truncate(0o600);
    let planted: Vec<String> = (0..7).map(|n| env.key(&format!("ex-rt{n}"))).collect();
    let at = |n: usize, ext: &str| dir.join(format!("{}.{ext}", planted[n]));
    nix::unistd::mkfifo(&at(0, "sock"), mode).unwrap();
    nix::unistd::mkfifo(&at(1, "lock"), mode).unwrap();
    std::fs::create_dir(at(2, "sock")).unwrap();
    std::fs::create_dir(at(3, "lock")).unwrap();
    std::fs::write(at(4, "sock"), b"not a socket").unwrap();
    std::os::unix::fs::symlink("/dev/zero", at(5, "sock")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", at(5, "lock")).unwrap();
    std::fs::write(at(6, "lock"), b"").unwrap(); // a dead publisher's lock
    let started = Instant::now();
    let out = env.run(&["exporter", "--once"]);
    out.assert_success();
    assert!(started.elapsed() < Duration::from_secs(10));
    let m = parse(&out.stdout);
    for key in &planted[..6] {
        assert!(!out.stdout.contains(key.as_str()), "{key} is no key: {out}");
    }
    assert_eq!(value(&m, "cuframes_key_stale", &planted[6], None), Some(1.0));
    assert_eq!(value(&m, "cuframes_publisher_up", &planted[6], None), Some(0.0));
    assert_eq!(value(&m, "cuframes_key_unreadable", &planted[6], None), Some(0.0));
    // The scribbled header does not validate: an error, not up.
    assert_eq!(value(&m, "cuframes_publisher_up", &key, None), Some(0.0));
    assert_eq!(value(&m, "cuframes_key_unreadable", &key, None), Some(1.0));
    let _ = std::fs::remove_file(&fifo_path);
    let _ = std::fs::remove_file(shm_path(&junk));
}

/// Scrapes while publishers are created and destroyed: every page parses,
/// and a key is either up with its stream described or not there as live.
#[test]
fn scrapes_during_start_up_and_shutdown_are_consistent() {
    let env = TestEnv::new();
    let keys: Vec<String> = (0..4).map(|n| env.key(&format!("ex-churn{n}"))).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (stop, keys, dir) = (stop.clone(), keys.clone(), env.dir().to_owned());
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for key in &keys {
                    let mut c = PublisherConfig::new(key, PixelFormat::Nv12, 64, 48);
                    c.memory = MemoryRequest::Host;
                    c.runtime_dir = Some(dir.clone());
                    if let Ok(mut p) = Publisher::create(c) {
                        publish(&mut p);
                    }
                }
                rounds += 1;
            }
            rounds
        })
    };
    for _ in 0..20 {
        let m = scrape(&env);
        for key in &keys {
            if value(&m, "cuframes_publisher_up", key, None) == Some(1.0)
                && value(&m, "cuframes_frames_published_total", key, None).is_some()
            {
                assert!(
                    m.iter()
                        .any(|(n, l, _)| n == "cuframes_stream_info" && l.get("key") == Some(key)),
                    "{key} is described"
                );
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(churn.join().unwrap() > 0);
}

/// `--log-format json`: every line on standard error is one JSON object
/// with time, level, key, event, message and fields, the library's own
/// warnings (here: a FIFO planted under a key's name) and the
/// exporter's start-up line included.
#[test]
fn json_logs_are_one_object_per_line() {
    let env = TestEnv::new();
    let key = env.key("ex-json");
    // Waiting past a second for a publisher says so, then fails (before the
    // FIFO below is planted: the exporter tests beside this one see it).
    let failed = env.run(&[
        "--log-format",
        "json",
        "subscribe",
        "no-such-key-here",
        "--wait-timeout",
        "2s",
    ]);
    let planted = env.key("ex-json-fifo");
    nix::unistd::mkfifo(
        &shm_path(&planted),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let published = env.run(&[
        "--log-format",
        "json",
        "publish",
        &key,
        "--memory",
        "host",
        "--size",
        "64x48",
        "--fps",
        "200",
        "--frames",
        "5",
    ]);
    let listed = env.run(&["--log-format", "json", "ls"]);
    let (exported, listen) = run_json_exporter(&env);
    let _ = std::fs::remove_file(shm_path(&planted));
    published.assert_success();
    assert!(
        !exported.stderr.is_empty(),
        "the exporter says nothing: {exported}"
    );
    let events = json_events(&[&published, &listed, &failed, &exported]);
    assert_json_events(&events, &key, &listen);
}

/// One JSON log line: its event, its level, and the whole object.
type Event = (String, String, serde_json::Value);

/// The exporter's own lines, its start-up line included: it runs with
/// `--log-format json` until it answers /healthz, then gets SIGTERM.
/// Returns what it wrote and where it listened.
fn run_json_exporter(env: &TestEnv) -> (Finished, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let exporter = env.spawn(
        "exporter",
        &["--log-format", "json", "exporter", "--listen", &listen],
    );
    // An answer: it serves only after saying where.
    wait_until(Duration::from_secs(10), "the exporter to answer", || {
        std::net::TcpStream::connect(&listen).is_ok_and(|mut conn| {
            let mut answer = String::new();
            conn.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").is_ok()
                && conn.read_to_string(&mut answer).is_ok()
                && answer.ends_with("ok\n")
        })
    });
    exporter.signal(nix::sys::signal::Signal::SIGTERM);
    (exporter.wait(Duration::from_secs(5)), listen)
}

/// Every line on the standard error of `outs`, each checked to be one JSON
/// object with time (UTC), level, key, event, message and fields.
fn json_events(outs: &[&Finished]) -> Vec<Event> {
    let mut events = Vec::new();
    for out in outs {
        for line in out.stderr_lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
            for field in ["time", "level", "key", "event", "message", "fields"] {
                assert!(v.get(field).is_some(), "{field} missing: {line}");
            }
            assert!(v["time"].as_str().unwrap().ends_with('Z'), "{line}");
            events.push((
                v["event"].as_str().unwrap().to_owned(),
                v["level"].as_str().unwrap().to_owned(),
                v.clone(),
            ));
        }
    }
    events
}

/// The first event named `event` (panics, listing them all, when none is).
fn find<'a>(events: &'a [Event], event: &str) -> &'a Event {
    events
        .iter()
        .find(|(e, _, _)| e == event)
        .unwrap_or_else(|| panic!("no {event}: {events:?}"))
}

/// What the commands of `json_logs_are_one_object_per_line` said: the
/// publisher's start and end, the library's FIFO warning, the failed
/// subscribe's wait and error, where the exporter serves.
fn assert_json_events(events: &[Event], key: &str, listen: &str) {
    assert_eq!(find(events, "publishing").2["key"], key);
    assert_eq!(find(events, "published").2["fields"]["frames"], 5);
    let warning = find(events, "library");
    assert_eq!(warning.1, "warning");
    assert!(
        warning.2["message"].as_str().unwrap().contains("FIFO"),
        "{:?}",
        warning.2
    );
    assert_eq!(find(events, "error").2["fields"]["kind"], "NotFound");
    let waiting = find(events, "waiting");
    assert_eq!(
        (
            waiting.1.as_str(),
            &waiting.2["key"],
            &waiting.2["fields"]["wait_s"]
        ),
        (
            "info",
            &serde_json::json!("no-such-key-here"),
            &serde_json::json!(2.0)
        ),
        "{:?}",
        waiting.2
    );
    assert_eq!(
        waiting.2["message"],
        "waiting up to 2 s for a publisher of 'no-such-key-here' (--wait-timeout)"
    );
    assert_eq!(find(events, "serving").2["fields"]["listen"], listen);
}

/// The `policy` label is spelled as `ls`, `inspect` and `top` print it.
#[test]
fn the_policy_label_is_spelled_as_the_cli_prints_it() {
    let env = TestEnv::new();
    let key = env.key("ex-policy");
    let mut publisher = host_publisher(&env, &key, Policy::DropOldest, 4);
    publish(&mut publisher);
    let m = scrape(&env);
    let info = m
        .iter()
        .find(|(n, l, _)| n == "cuframes_stream_info" && l.get("key") == Some(&key))
        .expect("the stream is described");
    let listed = env.run(&["ls", "--json"]);
    listed.assert_success();
    let row = listed.json();
    let row = row
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key.as_str())
        .expect("ls lists the key")
        .clone();
    assert_eq!(info.1["policy"], row["policy"].as_str().unwrap());
    assert_eq!(info.1["policy"], "drop_oldest");
}

/// `--textfile`: the temporary file beside the page is opened exclusively
/// and never through a link; a FIFO or a symlink planted at its name is
/// refused, naming it (a FIFO used to hang the exporter for good), and a
/// stale temporary regular file of ours is replaced.
#[test]
fn textfile_refuses_what_is_planted_at_its_temporary_name() {
    let env = TestEnv::new();
    let out_dir = tempfile::tempdir().unwrap();
    let page = out_dir.path().join("cuframes.prom");
    let tmp = out_dir.path().join("cuframes.prom.tmp");
    let page_arg = page.to_str().unwrap();
    // A FIFO.
    nix::unistd::mkfifo(&tmp, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut exporter = env.spawn(
        "exporter",
        &["exporter", "--textfile", page_arg, "--interval", "1s"],
    );
    let out = exporter
        .wait_within(Duration::from_secs(5))
        .unwrap_or_else(|out| panic!("hung on a FIFO at the temporary name: {out}"));
    let message = out.assert_error(&["FIFO", tmp.to_str().unwrap()]);
    assert!(!page.exists(), "{message}");
    std::fs::remove_file(&tmp).unwrap();
    // A symlink to a file the exporter must not write.
    let victim = out_dir.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, &tmp).unwrap();
    let mut exporter = env.spawn(
        "exporter",
        &["exporter", "--textfile", page_arg, "--interval", "1s"],
    );
    let out = exporter
        .wait_within(Duration::from_secs(5))
        .unwrap_or_else(|out| panic!("still running: {out}"));
    out.assert_error(&["symbolic link", tmp.to_str().unwrap()]);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(!page.exists());
    std::fs::remove_file(&tmp).unwrap();
    // A stale temporary file of ours (an exporter killed mid-write).
    std::fs::write(&tmp, b"half a page").unwrap();
    let exporter = env.spawn(
        "exporter",
        &["exporter", "--textfile", page_arg, "--interval", "1s"],
    );
    wait_until(Duration::from_secs(5), "the page", || page.exists());
    exporter.signal(nix::sys::signal::Signal::SIGTERM);
    exporter.wait(Duration::from_secs(5)).assert_success();
    let text = std::fs::read_to_string(&page).unwrap();
    parse(&text);
    assert!(text.contains("cuframes_exporter_keys"), "{text}");
    assert!(!tmp.exists(), "the temporary file was renamed");
}

/// Binds a listening socket at `key`'s socket name that never answers, and
/// holds its lock: a publisher wedged before it serves anyone, in the layout
/// where the exporter asks for the header over the socket (no /dev/shm entry).
fn wedged_publisher(env: &TestEnv, key: &str) -> (std::os::unix::net::UnixListener, std::fs::File) {
    let listener = std::os::unix::net::UnixListener::bind(env.socket(key)).unwrap();
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(env.lock(key))
        .unwrap();
    let request = nix::libc::flock {
        l_type: nix::libc::F_WRLCK as i16,
        l_whence: nix::libc::SEEK_SET as i16,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    nix::fcntl::fcntl(&lock, nix::fcntl::FcntlArg::F_OFD_SETLK(&request)).expect("OFD lock");
    (listener, lock)
}

/// Ten publishers that accept no HELLO beside a real one: the scrape still
/// ends in well under Prometheus's 10 s timeout, the real key is up, and
/// the wedged ones are errors, not up.
#[test]
fn wedged_publishers_do_not_stall_a_scrape() {
    let env = TestEnv::new();
    let key = env.key("ex-alive");
    let mut publisher = host_publisher(&env, &key, Policy::DropOldest, 4);
    publish(&mut publisher);
    let wedged: Vec<String> = (0..10).map(|n| env.key(&format!("ex-wedged{n}"))).collect();
    let _held: Vec<_> = wedged.iter().map(|k| wedged_publisher(&env, k)).collect();
    let started = Instant::now();
    let out = env.run(&["exporter", "--once"]);
    let took = started.elapsed();
    out.assert_success();
    assert!(took < Duration::from_secs(5), "a scrape took {took:?}");
    let m = parse(&out.stdout);
    assert_eq!(value(&m, "cuframes_publisher_up", &key, None), Some(1.0));
    assert_eq!(value(&m, "cuframes_key_unreadable", &key, None), Some(0.0));
    for k in &wedged {
        assert_eq!(value(&m, "cuframes_publisher_up", k, None), Some(0.0), "{k}");
        assert_eq!(value(&m, "cuframes_key_unreadable", k, None), Some(1.0), "{k}");
    }
    let errors = m
        .iter()
        .find(|(n, _, _)| n == "cuframes_exporter_scrape_errors_total")
        .map(|(_, _, v)| *v);
    assert_eq!(errors, Some(10.0));
}

/// Counts in a subscriber's record of the named header that a writer of
/// that header set to 2^62 come out bounded by what the subscriber could
/// have seen (exporter, top), and a record in a header protocol-v1 peers
/// can write is not labelled as the publisher's.
#[test]
fn forged_counts_are_clamped_and_labelled_by_who_could_write_them() {
    let env = TestEnv::new();
    let key = env.key("ex-forged");
    let (publisher, sub) = an_honest_subscriber_of_five(&env, &key);
    std::thread::sleep(Duration::from_millis(300));
    let m = scrape(&env);
    let labels = subscriber_labels(&m, &key);
    assert_eq!(
        labels["report"], "publisher",
        "only the publisher's user writes a 0600 header"
    );
    // A writer of the named header sets every count of the honest record to
    // 2^62, over and over (the publisher copies the true report back every
    // 250 ms).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let forger = forge_the_honest_record(shm_path(&key), stop.clone());
    std::thread::sleep(Duration::from_millis(20));
    let m = scrape(&env);
    let top = env.run(&["top", "--once", "--json", "--interval", "100ms"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    forger.join().unwrap();
    assert_counts_clamped(&m, &top, &key);
    drop(sub);
    drop(publisher);
    a_header_v1_peers_may_write_is_labelled_so(&env);
}

/// A drop-oldest publisher of `key` that published 3 frames, then 5 to a
/// subscriber "honest" that took and released each.
fn an_honest_subscriber_of_five(env: &TestEnv, key: &str) -> (Publisher, Subscriber) {
    let mut publisher = host_publisher(env, key, Policy::DropOldest, 4);
    for _ in 0..3 {
        publish(&mut publisher); // before the subscriber joins
    }
    let mut sub = host_subscriber(env, key, "honest");
    for _ in 0..5 {
        publish(&mut publisher);
        sub.next(Some(Duration::from_secs(1))).unwrap().release().unwrap();
    }
    (publisher, sub)
}

/// The labels of `key`'s subscriber's figures in a scrape.
fn subscriber_labels(m: &[Sample], key: &str) -> BTreeMap<String, String> {
    m.iter()
        .find(|(n, l, _)| {
            n == "cuframes_subscriber_frames_received_total" && l.get("key").map(String::as_str) == Some(key)
        })
        .expect("the subscriber's figures")
        .1
        .clone()
}

/// A thread writing 2^62 over every count of subscriber record 1 of the
/// header at `path`, every 0.2 ms until `stop`.
fn forge_the_honest_record(
    path: std::path::PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    use std::os::unix::fs::FileExt;
    std::thread::spawn(move || {
        let header = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        // Subscriber record 1 (0xD00 + 128 bytes a record): dropped
        // 0x40, last_taken_seq 0x48, received 0x50, copied 0x58,
        // overwritten 0x60 (docs/protocol-notes.md, D35).
        let record = 0xD00 + 128u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            for word in [0x40, 0x48, 0x50, 0x58, 0x60] {
                header
                    .write_all_at(&(1u64 << 62).to_le_bytes(), record + word)
                    .unwrap();
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    })
}

/// The forged counts, as the exporter (`m`) and `top` give them, are
/// bounded by the 5 frames published since the subscriber joined.
fn assert_counts_clamped(m: &[Sample], top: &Finished, key: &str) {
    // 8 published, 5 of them since the subscriber joined.
    for (_, l, v) in m.iter().filter(|(n, l, _)| {
        n.starts_with("cuframes_subscriber_frames_") && l.get("key").map(String::as_str) == Some(key)
    }) {
        assert!(
            *v <= 5.0,
            "{l:?} {v}: more than the 5 frames published since it joined"
        );
    }
    let copied = value(m, "cuframes_frames_copied_total", key, None).unwrap();
    assert!(copied <= 5.0, "copies {copied}");
    top.assert_success();
    let rows = top.json();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .expect("top lists the key");
    for s in row["subscriber_slots"].as_array().expect("subscriber slots") {
        assert!(s["dropped"].as_u64().unwrap() <= 5, "top: {s}");
    }
}

/// A header the group's protocol-v1 peers may write (v1_peers=allow with
/// a group: 0660): nothing read from it is the publisher's word alone.
fn a_header_v1_peers_may_write_is_labelled_so(env: &TestEnv) {
    let key = env.key("ex-v1-writable");
    let mut c = PublisherConfig::new(&key, PixelFormat::Nv12, 64, 48);
    c.memory = MemoryRequest::Host;
    c.runtime_dir = Some(env.dir().to_owned());
    c.group = Some(nix::unistd::getegid().as_raw().to_string());
    c.v1_peers = cuframes::V1Peers::Allow;
    let mut publisher = Publisher::create(c).unwrap();
    let mut sub = host_subscriber(env, &key, "honest");
    publish(&mut publisher);
    sub.next(Some(Duration::from_secs(1))).unwrap().release().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let m = scrape(env);
    let labels = subscriber_labels(&m, &key);
    assert_eq!(labels["report"], "v1_peers", "a 0660 header: {labels:?}");
}
