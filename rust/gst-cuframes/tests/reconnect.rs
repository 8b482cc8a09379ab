//! cuframessrc with `reconnect=true` while its publisher is gone: the
//! element answers queries (latency, caps) during the wait for the next
//! publisher, and follows one of another size through a converter that
//! renegotiates.

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use gst::prelude::*;

fn publisher(key: &str, dir: &std::path::Path, width: u32, height: u32) -> gst::Element {
    let pipeline = gst::parse::launch(&format!(
        "videotestsrc is-live=true ! video/x-raw,format=NV12,width={width},height={height},framerate=100/1 \
         ! cuframessink key={key} runtime-dir={}",
        dir.display()
    ))
    .unwrap();
    pipeline.set_state(gst::State::Playing).unwrap();
    pipeline
}

fn pushed(src: &gst::Element) -> u64 {
    src.property::<gst::Structure>("stats")
        .get::<u64>("pushed")
        .unwrap_or(0)
}

/// Waits until `what` holds, failing on an error on `pipeline`'s bus.
fn wait_until(pipeline: &gst::Element, what: &str, mut done: impl FnMut() -> bool) {
    let bus = pipeline.bus().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        if let Some(message) = bus.pop_filtered(&[gst::MessageType::Error])
            && let gst::MessageView::Error(e) = message.view()
        {
            panic!("{what}: {} ({:?})", e.error(), e.debug());
        }
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `query` on another thread; how long it took, failing after 2 s.
fn answered_within(what: &str, query: impl FnOnce() -> bool + Send + 'static) -> Duration {
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let answered = query();
        let _ = tx.send(answered);
    });
    match rx.recv_timeout(Duration::from_secs(2)) {
        Ok(answered) => {
            assert!(answered, "{what}: not answered");
            started.elapsed()
        }
        Err(_) => panic!("{what}: no answer within 2 s while the source waits for a publisher"),
    }
}

#[test]
fn queries_are_answered_while_waiting_for_the_next_publisher() {
    let (dir, key) = common::start("reconnect");

    let first = publisher(&key, &dir, 64, 48);
    let subscriber = gst::parse::launch(&format!(
        "cuframessrc name=src key={key} runtime-dir={} wait-timeout=10000 reconnect=true \
         ! videoconvert ! video/x-raw,format=I420 ! fakesink name=out sync=false",
        dir.display()
    ))
    .unwrap();
    let bin = subscriber.downcast_ref::<gst::Bin>().unwrap();
    let src = bin.by_name("src").unwrap();
    let out_pad = bin.by_name("out").unwrap().static_pad("sink").unwrap();
    subscriber.set_state(gst::State::Playing).unwrap();
    wait_until(&subscriber, "frames of the first publisher", || pushed(&src) >= 5);

    // The publisher ends; the source waits for the next one (10 s).
    first.set_state(gst::State::Null).unwrap();
    drop(first);
    // What was read ahead still goes out: waiting means no frame for 300 ms.
    let mut before = pushed(&src);
    wait_until(&subscriber, "the end of the first publisher's frames", || {
        std::thread::sleep(Duration::from_millis(300));
        let now = pushed(&src);
        std::mem::replace(&mut before, now) == now
    });

    let s = src.clone();
    let took = answered_within("a latency query", move || {
        s.query(&mut gst::query::Latency::new())
    });
    let pad = src.static_pad("src").unwrap();
    let took_caps = answered_within("a caps query", move || !pad.query_caps(None).is_empty());
    println!("while waiting: latency query {took:?}, caps query {took_caps:?}");

    // A publisher of another size: new caps through the converter.
    let second = publisher(&key, &dir, 80, 60);
    wait_until(&subscriber, "frames of the second publisher", || {
        pushed(&src) >= before + 5
            && out_pad.current_caps().is_some_and(|c| {
                c.structure(0)
                    .is_some_and(|s| s.get::<i32>("width") == Ok(80) && s.get::<i32>("height") == Ok(60))
            })
    });
    let stats = src.property::<gst::Structure>("stats");
    assert_eq!(stats.get::<u64>("reconnects").unwrap(), 1, "{stats}");

    subscriber.set_state(gst::State::Null).unwrap();
    second.set_state(gst::State::Null).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
