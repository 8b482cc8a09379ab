//! Every format at odd sizes (33x17, 1x1), GStreamer to GStreamer through
//! cuframes: the picture bytes of every frame as videotestsrc made them.
//! Padding is not compared: GStreamer leaves it unwritten.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use gst::prelude::*;
use gst_video::prelude::*;

/// The picture bytes of a frame, plane by plane, row by row.
fn picture(buffer: &gst::BufferRef, info: &gst_video::VideoInfo) -> Vec<u8> {
    let frame = gst_video::VideoFrameRef::from_buffer_ref_readable(buffer, info).unwrap();
    let finfo = info.format_info();
    let mut out = Vec::new();
    for p in 0..info.n_planes() {
        let comp = (0..finfo.n_components())
            .find(|&c| finfo.plane()[c as usize] == p)
            .unwrap();
        let rows = finfo.scale_height(comp as u8, info.height()) as usize;
        let row_bytes = finfo.scale_width(comp as u8, info.width()) as usize
            * finfo.pixel_stride()[comp as usize] as usize;
        let stride = frame.plane_stride()[p as usize] as usize;
        let data = frame.plane_data(p).unwrap();
        for r in 0..rows {
            out.extend_from_slice(&data[r * stride..r * stride + row_bytes]);
        }
    }
    out
}

/// Runs `pipeline` (with a fakesink named `out`) to EOS; the pictures it got.
fn frames_of(pipeline: &gst::Element) -> Arc<Mutex<Vec<Vec<u8>>>> {
    let frames = Arc::new(Mutex::new(Vec::new()));
    let sink = pipeline
        .downcast_ref::<gst::Bin>()
        .unwrap()
        .by_name("out")
        .unwrap();
    sink.set_property("signal-handoffs", true);
    let got = frames.clone();
    sink.connect("handoff", false, move |args| {
        let buffer = args[1].get::<gst::Buffer>().unwrap();
        let pad = args[2].get::<gst::Pad>().unwrap();
        let info = gst_video::VideoInfo::from_caps(&pad.current_caps().unwrap()).unwrap();
        got.lock().unwrap().push(picture(&buffer, &info));
        None
    });
    frames
}

fn wait_eos(pipeline: &gst::Element, what: &str) {
    let bus = pipeline.bus().unwrap();
    let message = bus
        .timed_pop_filtered(
            gst::ClockTime::from_seconds(20),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        )
        .unwrap_or_else(|| panic!("{what}: no EOS within 20 s"));
    if let gst::MessageView::Error(e) = message.view() {
        panic!("{what}: {} ({:?})", e.error(), e.debug());
    }
}

#[test]
fn every_format_at_odd_sizes() {
    let (dir, key_base) = common::start("odd");
    let mut checked = 0;
    for (n, (cf, gf)) in gstcuframes::formats::PAIRS.into_iter().enumerate() {
        for (w, h) in [(33, 17), (1, 1)] {
            let caps = format!("video/x-raw,format={gf},width={w},height={h},framerate=25/1");
            let what = format!("{cf} ({gf}) {w}x{h}");
            let source = format!("videotestsrc num-buffers=5 pattern=smpte ! {caps}");
            let reference = gst::parse::launch(&format!("{source} ! fakesink name=out")).unwrap();
            let want = frames_of(&reference);
            reference.set_state(gst::State::Playing).unwrap();
            wait_eos(&reference, &what);
            reference.set_state(gst::State::Null).unwrap();

            let key = format!("{key_base}-{n}-{w}");
            let publisher = gst::parse::launch(&format!(
                "{source} ! cuframessink key={key} runtime-dir={} wait-subscribers=1 policy=strict-wait",
                dir.display()
            ))
            .unwrap();
            let subscriber = gst::parse::launch(&format!(
                "cuframessrc key={key} runtime-dir={} wait-timeout=5000 ! fakesink name=out",
                dir.display()
            ))
            .unwrap();
            let got = frames_of(&subscriber);
            publisher.set_state(gst::State::Playing).unwrap();
            subscriber.set_state(gst::State::Playing).unwrap();
            wait_eos(&publisher, &what);
            publisher.set_state(gst::State::Null).unwrap();
            wait_eos(&subscriber, &what);
            subscriber.set_state(gst::State::Null).unwrap();
            std::thread::sleep(Duration::from_millis(1));

            let (want, got) = (want.lock().unwrap(), got.lock().unwrap());
            assert_eq!(want.len(), 5, "{what}: reference frames");
            assert_eq!(got.len(), want.len(), "{what}: frames through cuframes");
            for (i, (a, b)) in want.iter().zip(got.iter()).enumerate() {
                assert!(a == b, "{what}: frame {i} differs");
            }
            checked += 1;
        }
    }
    eprintln!(
        "{} formats at odd sizes (33x17, 1x1) byte for byte: {checked} streams",
        gstcuframes::formats::PAIRS.len()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
