//! Frame properties cross with every frame (D29), leased or copied.

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

/// Side data (D30) belongs to the one frame it was added for, crosses
/// byte for byte to leases and copies alike, and is then gone.
#[test]
fn side_data_crosses_with_its_frame_only() {
    use cuframes::{SIDE_DATA_CAPACITY, SideData, side_data_kind as kind};
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("side");
    let mut cfg = config(&key, dir.path());
    cfg.ring_size = 8; // the five frames stay in the ring until read
    let mut publisher = Publisher::create(cfg).unwrap();
    let mut slots = Subscriber::connect(subscriber_config(&key, dir.path(), "slots")).unwrap();
    let mut c = subscriber_config(&key, dir.path(), "copies");
    c.copy = CopyMode::Always;
    let mut copies = Subscriber::connect(c).unwrap();

    let cll = SideData {
        kind: kind::CONTENT_LIGHT_LEVEL,
        bytes: [1000u32.to_le_bytes(), 400u32.to_le_bytes()].concat(),
    };
    let cc = SideData {
        kind: kind::A53_CC,
        bytes: vec![0xFC, 0x94, 0x2C, 0xFC, 0x80, 0x80],
    };
    let sei = SideData {
        kind: kind::SEI_UNREGISTERED,
        bytes: (0..=255u8).cycle().take(700).collect(),
    };
    let future = SideData {
        kind: 0x7777,
        bytes: vec![],
    };
    let frames: Vec<Vec<SideData>> = vec![
        vec![cll.clone(), cc.clone()],
        vec![],
        vec![sei.clone(), future.clone(), cc.clone()],
    ];
    for entries in &frames {
        for e in entries {
            publisher.add_side_data(e.kind, &e.bytes).unwrap();
        }
        publish_pattern(&mut publisher);
    }
    // What does not fit is refused, the rest kept; cleared explicitly or by a frame.
    publisher
        .add_side_data(kind::SEI_UNREGISTERED, &vec![7; SIDE_DATA_CAPACITY - 24])
        .unwrap();
    let err = publisher.add_side_data(kind::A53_CC, &[1; 9]).unwrap_err();
    assert_eq!(err.kind(), cuframes::ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("does not fit"), "{err}");
    publisher.add_side_data(kind::A53_CC, &[1; 8]).unwrap();
    publish_pattern(&mut publisher);
    publisher.add_side_data(kind::A53_CC, &[2; 3]).unwrap();
    publisher.clear_side_data();
    publish_pattern(&mut publisher);
    assert!(publisher.add_side_data(0, &[1]).is_err(), "kind 0 is reserved");

    let full = vec![
        SideData {
            kind: kind::SEI_UNREGISTERED,
            bytes: vec![7; SIDE_DATA_CAPACITY - 24],
        },
        SideData {
            kind: kind::A53_CC,
            bytes: vec![1; 8],
        },
    ];
    let want: Vec<&[SideData]> = vec![&frames[0], &frames[1], &frames[2], &full, &[]];
    for sub in [&mut slots, &mut copies] {
        for (i, expected) in want.iter().enumerate() {
            let lease = sub.next(Some(Duration::from_secs(5))).unwrap();
            assert_eq!(lease.side_data(), *expected, "seq {} (frame {i})", lease.seq());
            assert!(lease_matches(&lease));
        }
        assert_eq!(sub.stats().side_data_rejected, 0);
    }
}

/// A length in the slot descriptor that runs past the side-data area (a
/// hostile or broken publisher) costs the frame its side data, nothing more.
#[test]
fn a_hostile_side_data_length_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("side-hostile");
    let mut cfg = config(&key, dir.path());
    cfg.ring_size = 8;
    let mut publisher = Publisher::create(cfg).unwrap();
    let mut sub = Subscriber::connect(subscriber_config(&key, dir.path(), "victim")).unwrap();
    publisher
        .add_side_data(cuframes::side_data_kind::A53_CC, &[0xFC, 0x80, 0x80])
        .unwrap();
    let seq = publish_pattern(&mut publisher);
    let slot = (seq % 8) as u64; // ring of 8: the frame's usual slot (D22)
    for (len, what) in [
        (u64::MAX, "huge"),
        (1 << 20, "past the area"),
        (5, "cuts an entry"),
    ] {
        // What subscribers read comes from the publisher's own copy (D33).
        write_publisher_copy(&key, 0x100 + slot * 192 + 0x88, len);
        let lease = sub.next(Some(Duration::from_secs(5))).unwrap();
        assert!(lease.side_data().is_empty(), "{what}");
        assert!(lease_matches(&lease), "{what}: the pixels still arrive");
        drop(lease);
        publisher
            .add_side_data(cuframes::side_data_kind::A53_CC, &[0xFC, 0x80, 0x80])
            .unwrap();
        let seq = publish_pattern(&mut publisher);
        assert_eq!(seq % 8, (slot + 1) % 8, "the next frame's slot");
        let lease = sub.next(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(
            lease.side_data().len(),
            1,
            "{what}: a good frame after it keeps its own"
        );
        drop(lease);
        publisher
            .add_side_data(cuframes::side_data_kind::A53_CC, &[0xFC, 0x80, 0x80])
            .unwrap();
        // Back to the hostile slot for the next round.
        while publish_pattern(&mut publisher) % 8 != slot {
            let _ = sub.next(Some(Duration::from_secs(5))).unwrap();
            publisher
                .add_side_data(cuframes::side_data_kind::A53_CC, &[0xFC, 0x80, 0x80])
                .unwrap();
        }
    }
    assert_eq!(sub.stats().side_data_rejected, 3);
}
