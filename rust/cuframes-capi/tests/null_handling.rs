//! NULL (and junk) from C: every export answers INVALID_ARGUMENT with a
//! message naming the argument, or ignores NULL where the contract says so,
//! and never writes an out-parameter of a failed call.

mod common;

use std::ffi::{CStr, c_void};
use std::ptr::{null, null_mut};

use common::*;
use cuframes_capi::*;

/// A pointer value no successful call would write (out-params must keep it).
fn sentinel<T>() -> *mut T {
    0x5EED_0000usize as *mut T
}

fn assert_invalid(status: cuframes_status, mentions: &str) {
    assert_eq!(status, CUFRAMES_ERR_INVALID_ARGUMENT, "{}", last_error());
    let message = last_error();
    assert!(
        message.contains(mentions),
        "last error {message:?} should mention {mentions:?}"
    );
}

#[test]
fn calls_without_pointers_never_fail() {
    // SAFETY: static strings, never NULL.
    let version = unsafe { CStr::from_ptr(cuframes_version()) };
    assert_eq!(version.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    assert_eq!(cuframes_protocol_version(), 1);
    for status in [-17, -1000, 1, i32::MIN, i32::MAX] {
        // SAFETY: never NULL, static.
        let text = unsafe { CStr::from_ptr(cuframes_strerror(status)) };
        assert_eq!(text.to_str().unwrap(), "unknown status");
    }
    // SAFETY: as above.
    let ok = unsafe { CStr::from_ptr(cuframes_strerror(CUFRAMES_OK)) };
    assert_eq!(ok.to_str().unwrap(), "success");
}

#[test]
fn null_keys_and_configs() {
    // SAFETY: NULL is allowed by every contract below.
    unsafe {
        assert_invalid(cuframes_validate_key(null()), "key is NULL");
        assert_invalid(
            cuframes_publisher_config_init_sized(null_mut(), size_of::<cuframes_publisher_config>()),
            "config is NULL",
        );
        assert_invalid(
            cuframes_subscriber_config_init_sized(null_mut(), size_of::<cuframes_subscriber_config>()),
            "config is NULL",
        );

        let mut publisher: *mut cuframes_publisher = sentinel();
        assert_invalid(
            cuframes_publisher_create(null(), &mut publisher),
            "config is NULL",
        );
        assert_eq!(publisher, sentinel());
        let mut subscriber: *mut cuframes_subscriber = sentinel();
        assert_invalid(
            cuframes_subscriber_create(null(), &mut subscriber),
            "config is NULL",
        );
        assert_eq!(subscriber, sentinel());
    }
}

#[test]
fn null_out_pointers_fail_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let key = unique_key("nullout");
    let config = publisher_config(&key, &dir_c, CUFRAMES_FORMAT_NV12);
    // SAFETY: valid config; NULL out-pointers are allowed by the contract.
    unsafe {
        assert_invalid(
            cuframes_publisher_create(&config, null_mut()),
            "publisher_out is NULL",
        );
    }
    // No publisher was made: the key is still free.
    let publisher = create_publisher(&config);
    let sub_config = subscriber_config(&key, &dir_c);
    // SAFETY: as above.
    unsafe {
        assert_invalid(
            cuframes_subscriber_create(&sub_config, null_mut()),
            "subscriber_out is NULL",
        );
        assert_eq!(
            cuframes_publisher_subscriber_count(publisher),
            0,
            "no subscriber was left behind"
        );
        assert_invalid(
            cuframes_publisher_get_info(publisher, null_mut()),
            "info_out is NULL",
        );
    }
    let subscriber = create_subscriber(&sub_config);
    let seq = publish_filled(publisher, 7, 0);
    assert_eq!(seq, 1);
    // SAFETY: live handles; NULL out-pointers.
    unsafe {
        assert_invalid(
            cuframes_subscriber_get_info(subscriber, null_mut()),
            "info_out is NULL",
        );
        assert_invalid(
            cuframes_subscriber_get_stats(subscriber, null_mut()),
            "stats_out is NULL",
        );
        assert_invalid(
            cuframes_subscriber_next(subscriber, 0, null_mut()),
            "frame_out is NULL",
        );
        // The frame was not consumed by the failed call.
        let mut frame = null_mut();
        assert_eq!(
            cuframes_subscriber_next(subscriber, 1000, &mut frame),
            CUFRAMES_OK
        );
        assert_invalid(cuframes_frame_get_info(frame, null_mut()), "info_out is NULL");
        let mut info = sized::<cuframes_frame_info>();
        assert_eq!(cuframes_frame_get_info(frame, &mut info), CUFRAMES_OK);
        assert_eq!(info.seq, 1);
        assert_eq!(cuframes_frame_release(frame), CUFRAMES_OK);
        // seq_out may be NULL.
        let planes = [null::<c_void>(); 2];
        let pitches = [64usize; 2];
        assert_invalid(
            cuframes_publisher_publish(
                publisher,
                CUFRAMES_MEMORY_HOST,
                planes.as_ptr(),
                pitches.as_ptr(),
                2,
                0,
                null_mut(),
            ),
            "planes[0] is NULL",
        );
        cuframes_subscriber_destroy(subscriber);
        cuframes_publisher_destroy(publisher);
    }
}

#[test]
fn null_handles() {
    let mut info = sized::<cuframes_stream_info>();
    let mut stats = sized::<cuframes_subscriber_stats>();
    // SAFETY: NULL handles are allowed by every contract below; the
    // out-pointers are valid.
    unsafe {
        assert_invalid(
            cuframes_publisher_get_info(null(), &mut info),
            "publisher is NULL",
        );
        assert_invalid(
            cuframes_publisher_wait_subscribers(null_mut(), 0, 0),
            "publisher is NULL",
        );
        let mut seq = 99u64;
        assert_invalid(
            cuframes_publisher_publish(null_mut(), CUFRAMES_MEMORY_HOST, null(), null(), 0, 0, &mut seq),
            "publisher is NULL",
        );
        assert_eq!(seq, 99);
        assert_invalid(cuframes_publisher_flush(null_mut(), 0), "publisher is NULL");
        assert_eq!(cuframes_publisher_subscriber_count(null()), 0);
        assert!(last_error().contains("publisher is NULL"));
        cuframes_publisher_destroy(null_mut());

        assert_invalid(
            cuframes_subscriber_get_info(null(), &mut info),
            "subscriber is NULL",
        );
        let mut frame: *mut cuframes_frame = sentinel();
        assert_invalid(
            cuframes_subscriber_next(null_mut(), 0, &mut frame),
            "subscriber is NULL",
        );
        assert_eq!(frame, sentinel());
        assert_invalid(
            cuframes_subscriber_get_stats(null(), &mut stats),
            "subscriber is NULL",
        );
        cuframes_subscriber_destroy(null_mut());

        let mut frame_info = sized::<cuframes_frame_info>();
        assert_invalid(cuframes_frame_get_info(null(), &mut frame_info), "frame is NULL");
        assert_invalid(cuframes_frame_is_intact(null()), "frame is NULL");
        assert_invalid(cuframes_frame_release(null_mut()), "frame is NULL");
    }
    assert_eq!(
        info,
        sized::<cuframes_stream_info>(),
        "out-params of failed calls are untouched"
    );
    assert_eq!(stats, sized::<cuframes_subscriber_stats>());
}

#[test]
fn null_publish_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let key = unique_key("arrays");
    let publisher = create_publisher(&publisher_config(&key, &dir_c, CUFRAMES_FORMAT_NV12));
    let buffer = vec![0u8; 64 * 17];
    let planes = [buffer.as_ptr().cast::<c_void>(); 2];
    let pitches = [64usize; 2];
    let mut seq = 77u64;
    // SAFETY: a live handle; each array is NULL or holds 2 elements; every
    // plane has 64 × 17 readable bytes.
    unsafe {
        let publish = |planes: *const *const c_void, pitches: *const usize, count: u32, seq: &mut u64| {
            cuframes_publisher_publish(publisher, CUFRAMES_MEMORY_HOST, planes, pitches, count, 5, seq)
        };
        assert_invalid(publish(null(), pitches.as_ptr(), 2, &mut seq), "planes is NULL");
        assert_invalid(publish(planes.as_ptr(), null(), 2, &mut seq), "pitches is NULL");
        assert_invalid(
            publish(planes.as_ptr(), pitches.as_ptr(), 1, &mut seq),
            "plane_count 1",
        );
        assert_invalid(
            publish(planes.as_ptr(), pitches.as_ptr(), 3, &mut seq),
            "plane_count 3",
        );
        let short = [32usize, 64];
        assert_invalid(
            publish(planes.as_ptr(), short.as_ptr(), 2, &mut seq),
            "pitches[0] 32",
        );
        assert_eq!(seq, 77, "seq_out is untouched on failure");
        let bad_source =
            cuframes_publisher_publish(publisher, 9, planes.as_ptr(), pitches.as_ptr(), 2, 5, &mut seq);
        assert_invalid(bad_source, "source 9");
        let auto = cuframes_publisher_publish(
            publisher,
            CUFRAMES_MEMORY_AUTO,
            planes.as_ptr(),
            pitches.as_ptr(),
            2,
            5,
            &mut seq,
        );
        assert_invalid(auto, "source 0");
        let cuda = cuframes_publisher_publish(
            publisher,
            CUFRAMES_MEMORY_CUDA,
            planes.as_ptr(),
            pitches.as_ptr(),
            2,
            5,
            &mut seq,
        );
        // Host pointers posing as device pointers: refused without CUDA
        // (UNSUPPORTED), or by the driver where there is one (CUDA).
        if cuframes::cuda_available() {
            assert_eq!(cuda, cuframes_capi::CUFRAMES_ERR_CUDA, "{}", last_error());
        } else {
            assert_eq!(cuda, CUFRAMES_ERR_UNSUPPORTED);
            assert!(
                last_error().starts_with("CUDA is not available"),
                "{}",
                last_error()
            );
        }
        assert_eq!(seq, 77);
        assert_eq!(
            publish(planes.as_ptr(), pitches.as_ptr(), 2, &mut seq),
            CUFRAMES_OK
        );
        assert_eq!(seq, 1, "failed publishes used no seq");
        cuframes_publisher_destroy(publisher);
    }
}
