//! Frame properties cross with every frame (decision 29), leased or copied.

mod common;

use std::time::Duration;

use common::*;
use cuframes::{CopyMode, FrameProps, Publisher, Subscriber};

fn hdr10() -> FrameProps {
    FrameProps {
        color_range: 1,     // limited
        color_primaries: 9, // BT.2020
        color_trc: 16,      // PQ
        colorspace: 9,      // BT.2020 non-constant
        chroma_location: 3, // top-left
        pict_type: 1,
        key_frame: true,
        interlaced: false,
        top_field_first: false,
        sample_aspect_ratio: (1, 1),
        duration_ns: 41_708_333,
    }
}

#[test]
fn each_frame_carries_the_properties_it_was_published_with() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("props");
    let mut publisher = Publisher::create(config(&key, dir.path())).unwrap();
    let mut slots = Subscriber::connect(subscriber_config(&key, dir.path(), "slots")).unwrap();
    let mut c = subscriber_config(&key, dir.path(), "copies");
    c.copy = CopyMode::Always;
    let mut copies = Subscriber::connect(c).unwrap();

    publish_pattern(&mut publisher); // none set yet
    let full_bt601 = FrameProps {
        color_range: 2,
        color_primaries: 6,
        color_trc: 6,
        colorspace: 6,
        interlaced: true,
        top_field_first: true,
        sample_aspect_ratio: (16, 15),
        pict_type: 2,
        ..FrameProps::default()
    };
    publisher.set_frame_props(Some(hdr10()));
    publish_pattern(&mut publisher);
    publisher.set_frame_props(Some(full_bt601));
    publish_pattern(&mut publisher);
    publisher.set_frame_props(None);
    publish_pattern(&mut publisher);

    let want = [None, Some(hdr10()), Some(full_bt601), None];
    for sub in [&mut slots, &mut copies] {
        for (i, expected) in want.iter().enumerate() {
            let lease = sub.next(Some(Duration::from_secs(5))).unwrap();
            assert_eq!(lease.seq(), i as u64 + 1);
            assert_eq!(lease.props(), *expected, "seq {}", lease.seq());
            assert!(lease_matches(&lease));
        }
    }
}
