//! The contract's rules at the Rust level: defaults, bad configs (status,
//! message, untouched out-parameters), frames that outlive their
//! subscriber and move between threads, and disconnection.

mod common;

use std::ffi::CString;
use std::ptr::null_mut;

use common::*;
use cuframes_capi::*;

fn sentinel<T>() -> *mut T {
    0x5EED_0000usize as *mut T
}

#[test]
fn config_init_defaults() {
    let key = CString::new("k").unwrap();
    let dir = CString::new("/nonexistent").unwrap();
    let p = publisher_config(&key, &dir, 0);
    assert_eq!(
        (p.ring_size, p.policy, p.ack_timeout_ms),
        (
            CUFRAMES_DEFAULT_RING_SIZE,
            CUFRAMES_POLICY_DROP_OLDEST,
            CUFRAMES_DEFAULT_ACK_TIMEOUT_MS
        )
    );
    assert_eq!((p.fps_num, p.fps_den), (0, 0));
    assert!(p.cuda_context.is_null() && p.cuda_stream.is_null());
    assert_eq!(
        p.cuda_device, -1,
        "init: the current context, as before the field"
    );
    let mut fresh = publisher_config(&key, &dir, 0);
    // SAFETY: a valid config to overwrite.
    let status =
        unsafe { cuframes_publisher_config_init_sized(&mut fresh, size_of::<cuframes_publisher_config>()) };
    assert_eq!(status, CUFRAMES_OK);
    assert_eq!(fresh.struct_size as usize, size_of::<cuframes_publisher_config>());
    assert!(fresh.key.is_null() && fresh.runtime_dir.is_null());
    assert_eq!(
        (fresh.format, fresh.width, fresh.height, fresh.memory),
        (0, 0, 0, CUFRAMES_MEMORY_AUTO)
    );
    let s = initialised_subscriber_config(&key, &dir);
    assert_eq!(
        (s.mode, s.connect_timeout_ms, s.cuda_device),
        (CUFRAMES_MODE_SEQUENTIAL, CUFRAMES_DEFAULT_CONNECT_TIMEOUT_MS, -1)
    );
    assert_eq!(CUFRAMES_DEFAULT_CONNECT_TIMEOUT_MS, 30000);
    assert_eq!(
        (s.copy, s.read_ahead),
        (CUFRAMES_COPY_AUTO, CUFRAMES_DEFAULT_READ_AHEAD),
        "0.3: copy auto and a read-ahead of 32, as the command and FFmpeg (D39)"
    );
    assert_eq!(CUFRAMES_DEFAULT_READ_AHEAD, 32);
    assert!(s.name.is_null() && s.cuda_context.is_null() && s.cuda_stream.is_null());
}

#[test]
fn bad_publisher_configs_leave_the_out_parameter_alone() {
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let key = unique_key("badcfg");
    let bad_key = CString::new("no/slash").unwrap();
    for (name, edit, want, mentions) in BAD_PUBLISHER_CONFIGS {
        let mut config = publisher_config(&key, &dir_c, CUFRAMES_FORMAT_NV12);
        edit(&mut config, &bad_key);
        let mut publisher: *mut cuframes_publisher = sentinel();
        // SAFETY: a valid config whose strings outlive the call.
        let status = unsafe { cuframes_publisher_create(&config, &mut publisher) };
        assert_eq!(status, want, "{name}: {}", last_error());
        assert_eq!(publisher, sentinel(), "{name}: out-parameter written");
        assert!(
            last_error().contains(mentions),
            "{name}: {:?} lacks {mentions:?}",
            last_error()
        );
    }
    host_defaults_fill_in(&key, &dir_c);
}

/// An edit that spoils a good config (given a bad key to point it at).
type Edit = fn(&mut cuframes_publisher_config, &CString);

/// Bad publisher configs: the case's name, the edit that makes it, the
/// status `cuframes_publisher_create` answers, and what its last error
/// mentions.
const BAD_PUBLISHER_CONFIGS: [(&str, Edit, cuframes_status, &str); 12] = [
    (
        "NULL key",
        |c, _| c.key = std::ptr::null(),
        CUFRAMES_ERR_INVALID_ARGUMENT,
        "config.key is NULL",
    ),
    (
        "bad key",
        |c, k| c.key = k.as_ptr(),
        CUFRAMES_ERR_INVALID_ARGUMENT,
        "invalid key \"no/slash\"",
    ),
    (
        "ring 17",
        |c, _| c.ring_size = 17,
        CUFRAMES_ERR_INVALID_ARGUMENT,
        "ring size 17",
    ),
    (
        "format 0",
        |c, _| c.format = 0,
        CUFRAMES_ERR_INVALID_ARGUMENT,
        "config.format is not set",
    ),
    (
        "format 99",
        |c, _| c.format = 99,
        CUFRAMES_ERR_INVALID_ARGUMENT,
        "config.format 99",
    ),
    (
        "memory 7",
        |c, _| c.memory = 7,
        CUFRAMES_ERR_INVALID_ARGUMENT,
        "config.memory 7",
    ),
    (
        "policy 2",
        |c, _| c.policy = 2,
        CUFRAMES_ERR_INVALID_ARGUMENT,
        "config.policy 2",
    ),
    (
        "width 0",
        |c, _| c.width = 0,
        CUFRAMES_ERR_INVALID_ARGUMENT,
        "frame size 0x17",
    ),
    (
        "fps 30/0",
        |c, _| c.fps_num = 30,
        CUFRAMES_ERR_INVALID_ARGUMENT,
        "30/0",
    ),
    (
        "CUDA",
        |c, _| c.memory = CUFRAMES_MEMORY_CUDA,
        CUFRAMES_ERR_UNSUPPORTED,
        "CUDA",
    ),
    (
        "cuda_device -2",
        |c, _| c.cuda_device = -2,
        CUFRAMES_ERR_INVALID_ARGUMENT,
        "config.cuda_device -2",
    ),
    (
        "cuda_device INT32_MIN",
        |c, _| c.cuda_device = i32::MIN,
        CUFRAMES_ERR_INVALID_ARGUMENT,
        "config.cuda_device -2147483648",
    ),
];

/// ring_size 0 means the default, 16; a device ordinal is no concern of
/// host memory; an ACK timeout of 0 and a rate of 30000/1001 are taken:
/// the publisher created reports them, and the 33x17 NV12 layout.
fn host_defaults_fill_in(key: &CString, dir_c: &CString) {
    let mut config = publisher_config(key, dir_c, CUFRAMES_FORMAT_NV12);
    config.ring_size = 0;
    config.cuda_device = 3;
    config.ack_timeout_ms = 0;
    config.fps_num = 30000;
    config.fps_den = 1001;
    let publisher = create_publisher(&config);
    let mut info = sized::<cuframes_stream_info>();
    // SAFETY: a live handle and a valid out-pointer.
    unsafe {
        assert_eq!(cuframes_publisher_get_info(publisher, &mut info), CUFRAMES_OK);
        cuframes_publisher_destroy(publisher);
    }
    assert_eq!(
        (info.ring_size, info.memory, info.plane_count),
        (CUFRAMES_DEFAULT_RING_SIZE, CUFRAMES_MEMORY_HOST, 2)
    );
    assert_eq!((info.fps_num, info.fps_den), (30000, 1001));
    assert_eq!(
        (info.width, info.height, info.format),
        (33, 17, CUFRAMES_FORMAT_NV12)
    );
    assert_eq!(info.pitches, [256, 256, 0, 0]);
    assert_eq!(info.frame_size, 256 * 17 + 256 * 9);
}

#[test]
fn bad_subscriber_configs_leave_the_out_parameter_alone() {
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let key = unique_key("missing");
    let long_name = CString::new("n".repeat(32)).unwrap();
    let bad_key = CString::new("").unwrap();
    let cases: Vec<(&str, cuframes_subscriber_config, cuframes_status, String)> = vec![
        (
            "missing key",
            subscriber_config(&key, &dir_c),
            CUFRAMES_ERR_NOT_FOUND,
            { format!("no publisher for key '{}'", key.to_str().unwrap()) },
        ),
        (
            "empty key",
            subscriber_config(&bad_key, &dir_c),
            CUFRAMES_ERR_INVALID_ARGUMENT,
            "invalid key".into(),
        ),
        (
            "mode 2",
            cuframes_subscriber_config {
                mode: 2,
                ..subscriber_config(&key, &dir_c)
            },
            CUFRAMES_ERR_INVALID_ARGUMENT,
            "config.mode 2".into(),
        ),
        (
            "long name",
            cuframes_subscriber_config {
                name: long_name.as_ptr(),
                ..subscriber_config(&key, &dir_c)
            },
            CUFRAMES_ERR_INVALID_ARGUMENT,
            "32 bytes".into(),
        ),
    ];
    for (name, config, want, mentions) in cases {
        let mut subscriber: *mut cuframes_subscriber = sentinel();
        // SAFETY: a valid config whose strings outlive the call.
        let status = unsafe { cuframes_subscriber_create(&config, &mut subscriber) };
        assert_eq!(status, want, "{name}: {}", last_error());
        assert_eq!(subscriber, sentinel(), "{name}: out-parameter written");
        assert!(
            last_error().contains(&mentions),
            "{name}: {:?} lacks {mentions:?}",
            last_error()
        );
    }
}

#[test]
fn second_publisher_and_failed_next_keep_out_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let key = unique_key("twice");
    let config = publisher_config(&key, &dir_c, CUFRAMES_FORMAT_YUV420P);
    let publisher = create_publisher(&config);
    let mut second: *mut cuframes_publisher = sentinel();
    // SAFETY: valid config and out-pointer.
    let status = unsafe { cuframes_publisher_create(&config, &mut second) };
    assert_eq!(status, CUFRAMES_ERR_ALREADY_EXISTS, "{}", last_error());
    assert_eq!(second, sentinel());

    let subscriber = create_subscriber(&subscriber_config(&key, &dir_c));
    let mut frame: *mut cuframes_frame = sentinel();
    // SAFETY: live handles, valid out-pointers.
    unsafe {
        assert_eq!(
            cuframes_subscriber_next(subscriber, 0, &mut frame),
            CUFRAMES_ERR_TIMEOUT
        );
        assert_eq!(frame, sentinel());
        assert!(last_error().contains("no frame"), "{}", last_error());
        cuframes_publisher_destroy(publisher);
        assert_eq!(
            cuframes_subscriber_next(subscriber, 1000, &mut frame),
            CUFRAMES_ERR_DISCONNECTED
        );
        assert_eq!(frame, sentinel());
        assert!(last_error().contains("shut down"), "{}", last_error());
        let mut stats = sized::<cuframes_subscriber_stats>();
        assert_eq!(cuframes_subscriber_get_stats(subscriber, &mut stats), CUFRAMES_OK);
        assert_eq!(stats.publisher_shut_down, 1);
        cuframes_subscriber_destroy(subscriber);
    }
}

#[test]
fn frames_outlive_their_subscriber_and_cross_threads() {
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let key = unique_key("outlive");
    let publisher = create_publisher(&publisher_config(&key, &dir_c, CUFRAMES_FORMAT_NV12));
    let subscriber = create_subscriber(&subscriber_config(&key, &dir_c));
    publish_filled(publisher, 0xAB, 11);
    publish_filled(publisher, 0xCD, 22);
    let mut frames = [null_mut::<cuframes_frame>(); 2];
    // SAFETY: live handles, valid out-pointers.
    unsafe {
        for frame in &mut frames {
            assert_eq!(cuframes_subscriber_next(subscriber, 1000, frame), CUFRAMES_OK);
        }
        cuframes_subscriber_destroy(subscriber);
    }
    // Frames are Send in Rust, but here they travel as C does: as addresses.
    let addresses = frames.map(|f| f as usize);
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for (address, fill) in addresses.into_iter().zip([0xABu8, 0xCD]) {
            let frame = address as *mut cuframes_frame;
            // SAFETY: live frames handed to this thread alone; the plane
            // pointers are readable for `row_bytes` until release.
            unsafe {
                let mut info = sized::<cuframes_frame_info>();
                assert_eq!(cuframes_frame_get_info(frame, &mut info), CUFRAMES_OK);
                let row = std::slice::from_raw_parts(info.planes[0].cast::<u8>(), info.row_bytes[0]);
                assert!(row.iter().all(|&b| b == fill));
                assert_eq!(cuframes_frame_is_intact(frame), CUFRAMES_OK);
                assert_eq!(cuframes_frame_release(frame), CUFRAMES_OK);
                seen.push((info.seq, info.pts_ns));
            }
        }
        seen
    });
    assert_eq!(handle.join().unwrap(), vec![(1, 11), (2, 22)]);
    // SAFETY: a live handle.
    unsafe { cuframes_publisher_destroy(publisher) };
}
