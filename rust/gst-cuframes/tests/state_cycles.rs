//! PLAYING ↔ NULL, 100 times, of a publishing and a subscribing pipeline:
//! every cycle moves frames, no error, no descriptor left behind, no key
//! left in the runtime directory.

mod common;

use std::time::{Duration, Instant};

use gst::prelude::*;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd").count()
}

/// Fails on an error message on the pipeline's bus.
fn no_error(pipeline: &gst::Element, what: &str, cycle: usize) {
    let bus = pipeline.bus().expect("a pipeline has a bus");
    while let Some(message) = bus.pop() {
        if let gst::MessageView::Error(e) = message.view() {
            panic!("cycle {cycle}: {what}: {} ({:?})", e.error(), e.debug());
        }
    }
}

fn pushed(src: &gst::Element) -> u64 {
    src.property::<gst::Structure>("stats")
        .get::<u64>("pushed")
        .unwrap_or(0)
}

#[test]
fn playing_null_100_times() {
    let (dir, key) = common::start("cycles");
    let publisher = gst::parse::launch(&format!(
        "videotestsrc is-live=true ! video/x-raw,format=NV12,width=64,height=48,framerate=100/1 \
         ! cuframessink key={key} runtime-dir={}",
        dir.display()
    ))
    .unwrap();
    let subscriber = gst::parse::launch(&format!(
        "cuframessrc name=src key={key} runtime-dir={} wait-timeout=5000 ! fakesink sync=false",
        dir.display()
    ))
    .unwrap();
    let src = subscriber
        .downcast_ref::<gst::Bin>()
        .unwrap()
        .by_name("src")
        .unwrap();

    let cycle = |n: usize| {
        publisher.set_state(gst::State::Playing).unwrap();
        // Connects in start() when the publisher is there, else in create().
        subscriber
            .set_state(gst::State::Playing)
            .unwrap_or_else(|e| panic!("cycle {n}: subscriber to PLAYING: {e}"));
        let deadline = Instant::now() + Duration::from_secs(5);
        while pushed(&src) < 2 {
            assert!(Instant::now() < deadline, "cycle {n}: no frame within 5 s");
            std::thread::sleep(Duration::from_millis(2));
        }
        no_error(&publisher, "publisher", n);
        no_error(&subscriber, "subscriber", n);
        // Either side goes first: a subscriber leaving a publisher, or a
        // publisher ending under its subscriber (which then ends too).
        if n.is_multiple_of(2) {
            subscriber.set_state(gst::State::Null).unwrap();
            publisher.set_state(gst::State::Null).unwrap();
        } else {
            publisher.set_state(gst::State::Null).unwrap();
            std::thread::sleep(Duration::from_millis(5));
            subscriber.set_state(gst::State::Null).unwrap();
        }
        no_error(&publisher, "publisher", n);
        no_error(&subscriber, "subscriber", n);
    };

    // The first cycle opens what stays open (GStreamer's own threads and
    // descriptors); the other 99 must not add to it.
    cycle(0);
    let before = open_fds();
    let started = Instant::now();
    for n in 1..100 {
        cycle(n);
    }
    let after = open_fds();
    eprintln!(
        "100 cycles in {:.1} s; descriptors {before} → {after}",
        started.elapsed().as_secs_f64()
    );
    assert!(after <= before, "descriptors grew from {before} to {after}");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left in the runtime directory: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
