//! `struct_size` at the C boundary (docs/c-api.md, "ABI policy"): sizes of
//! 0, too small and absurd are refused with a message and no side effect; a
//! struct from a newer header (longer) is read by its known prefix, its
//! unknown tail must be zero, and out-structs get this library's bytes only,
//! `struct_size` saying how many. (The configs' older, shorter layout, of
//! 0.2.0, is `logging.rs`'s; `sized.rs` tests the path on a toy struct.)

mod common;

use std::ffi::CString;
use std::mem::offset_of;
use std::ptr::null_mut;

use common::*;
use cuframes_capi::*;

fn sentinel<T>() -> *mut T {
    0x5EED_0000usize as *mut T
}

fn assert_refused(status: cuframes_status, mentions: &str) {
    assert_eq!(status, CUFRAMES_ERR_INVALID_ARGUMENT, "{}", last_error());
    assert!(
        last_error().contains(mentions),
        "last error {:?} lacks {mentions:?}",
        last_error()
    );
}

/// A struct as a newer header declares it: this library's, then more.
#[repr(C)]
#[derive(Clone, Copy)]
struct Newer<T> {
    known: T,
    future: [u64; 2],
}

impl<T: Copy> Newer<T> {
    /// Zeroed, `struct_size` set to the newer (longer) size.
    fn sized() -> Newer<T> {
        let mut newer = Newer {
            known: sized::<T>(),
            future: [0; 2],
        };
        set_struct_size(&mut newer, size_of::<Newer<T>>());
        newer
    }
}

fn set_struct_size<T>(value: &mut T, size: usize) {
    // SAFETY: the API's structs (and Newer<_>) begin with struct_size: u32.
    unsafe { (value as *mut T).cast::<u32>().write(size as u32) }
}

fn struct_size_of<T>(value: &T) -> u32 {
    // SAFETY: the API's structs begin with struct_size: u32.
    unsafe { (value as *const T).cast::<u32>().read() }
}

#[test]
fn publisher_config_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let key = unique_key("psize");
    let first = size_of::<cuframes_publisher_config>();
    for (size, mentions) in [
        (
            0,
            "config->struct_size is 0: set it to sizeof(cuframes_publisher_config)",
        ),
        (
            // A config lacking the fields from `group` on (those 0.1 appended).
            offset_of!(cuframes_publisher_config, group),
            "smaller than the first layout of cuframes_publisher_config",
        ),
        (3, "smaller than the first layout"),
        (4097, "larger than any cuframes struct"),
    ] {
        let mut config = publisher_config(&key, &dir_c, CUFRAMES_FORMAT_NV12);
        config.struct_size = size as u32;
        let mut publisher: *mut cuframes_publisher = sentinel();
        // SAFETY: a valid config (the sizes past it are refused unread).
        let status = unsafe { cuframes_publisher_create(&config, &mut publisher) };
        assert_refused(status, mentions);
        assert_eq!(publisher, sentinel(), "{size}: out-parameter written");
    }
    // v1_peers (once a reserved zero) takes only its three values.
    let mut config = publisher_config(&key, &dir_c, CUFRAMES_FORMAT_NV12);
    config.v1_peers = 7;
    let mut publisher: *mut cuframes_publisher = sentinel();
    // SAFETY: a valid config.
    assert_refused(
        unsafe { cuframes_publisher_create(&config, &mut publisher) },
        "config.v1_peers 7",
    );

    // A newer header's config: init zeroes the tail this library does not
    // know and records the longer size; create reads the known prefix.
    let mut newer = Newer::<cuframes_publisher_config> {
        known: sized(),
        future: [u64::MAX; 2],
    };
    // SAFETY: writable for the size given.
    let status = unsafe {
        cuframes_publisher_config_init_sized(&mut newer.known, size_of::<Newer<cuframes_publisher_config>>())
    };
    assert_eq!(status, CUFRAMES_OK);
    assert_eq!(newer.known.struct_size as usize, first + 16);
    assert_eq!(newer.future, [0, 0], "init zeroes the unknown tail");
    assert_eq!(newer.known.ring_size, CUFRAMES_DEFAULT_RING_SIZE);
    newer.known.key = key.as_ptr();
    newer.known.runtime_dir = dir_c.as_ptr();
    newer.known.format = CUFRAMES_FORMAT_NV12;
    newer.known.width = 33;
    newer.known.height = 17;
    newer.known.memory = CUFRAMES_MEMORY_HOST;
    // A field of the newer header set: refused, never ignored.
    newer.future[1] = 1 << 16;
    let mut publisher: *mut cuframes_publisher = sentinel();
    // SAFETY: a config of struct_size readable bytes.
    let status = unsafe { cuframes_publisher_create(&newer.known, &mut publisher) };
    assert_refused(
        status,
        &format!(
            "config sets byte {} of its {}: past the {first} bytes of cuframes_publisher_config",
            first + 10,
            first + 16
        ),
    );
    assert!(last_error().contains("newer cuframes.h"), "{}", last_error());
    assert_eq!(publisher, sentinel());
    newer.future = [0, 0];
    // SAFETY: as above.
    let status = unsafe { cuframes_publisher_create(&newer.known, &mut publisher) };
    assert_eq!(status, CUFRAMES_OK, "{}", last_error());

    // Its stream info, into a newer (longer) struct: this library's bytes,
    // struct_size saying how many, the tail untouched.
    let mut info = Newer::<cuframes_stream_info>::sized();
    info.future = [0xABAB_ABAB_ABAB_ABAB; 2];
    // SAFETY: a live handle; a struct of struct_size writable bytes.
    let status = unsafe { cuframes_publisher_get_info(publisher, &mut info.known) };
    assert_eq!(status, CUFRAMES_OK, "{}", last_error());
    assert_eq!(info.known.struct_size as usize, size_of::<cuframes_stream_info>());
    assert_eq!((info.known.width, info.known.height), (33, 17));
    assert_eq!(info.known.reserved, 0);
    assert_eq!(info.future, [0xABAB_ABAB_ABAB_ABAB; 2]);
    // SAFETY: a live handle.
    unsafe { cuframes_publisher_destroy(publisher) };
}

#[test]
fn subscriber_config_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let key = unique_key("ssize");
    let publisher = create_publisher(&publisher_config(&key, &dir_c, CUFRAMES_FORMAT_NV12));
    for (size, mentions) in [
        (0, "config->struct_size is 0"),
        (
            offset_of!(cuframes_subscriber_config, copy),
            "smaller than the first layout",
        ),
    ] {
        let mut config = subscriber_config(&key, &dir_c);
        config.struct_size = size as u32;
        let mut subscriber: *mut cuframes_subscriber = sentinel();
        // SAFETY: a valid config.
        let status = unsafe { cuframes_subscriber_create(&config, &mut subscriber) };
        assert_refused(status, mentions);
        assert_eq!(subscriber, sentinel());
    }
    let mut newer = Newer::<cuframes_subscriber_config> {
        known: sized(),
        future: [7; 2],
    };
    // SAFETY: writable for the size given.
    let status = unsafe {
        cuframes_subscriber_config_init_sized(
            &mut newer.known,
            size_of::<Newer<cuframes_subscriber_config>>(),
        )
    };
    assert_eq!(status, CUFRAMES_OK);
    assert_eq!(newer.future, [0, 0]);
    newer.known.key = key.as_ptr();
    newer.known.runtime_dir = dir_c.as_ptr();
    newer.future[0] = 5;
    let mut subscriber: *mut cuframes_subscriber = sentinel();
    // SAFETY: a config of struct_size readable bytes.
    let status = unsafe { cuframes_subscriber_create(&newer.known, &mut subscriber) };
    assert_refused(status, "newer cuframes.h");
    newer.future[0] = 0;
    let subscriber = create_subscriber(&newer.known);
    // SAFETY: live handles.
    unsafe {
        cuframes_subscriber_destroy(subscriber);
        cuframes_publisher_destroy(publisher);
    }
}

/// Every out-struct: 0 and too small are refused before any work (the
/// struct untouched), a newer struct gets this library's bytes.
#[test]
fn out_struct_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let key = unique_key("osize");
    let publisher = create_publisher(&publisher_config(&key, &dir_c, CUFRAMES_FORMAT_NV12));
    let subscriber = create_subscriber(&subscriber_config(&key, &dir_c));
    let props_in = cuframes_frame_props {
        color_range: 2,
        sar_num: 4,
        sar_den: 3,
        ..sized()
    };
    // SAFETY: a live handle; a props struct of struct_size bytes.
    let status = unsafe { cuframes_publisher_set_frame_props(publisher, &props_in) };
    assert_eq!(status, CUFRAMES_OK);
    publish_filled(publisher, 0x11, 1);
    let mut frame = null_mut();
    // SAFETY: live handle, valid out-pointer.
    let status = unsafe { cuframes_subscriber_next(subscriber, 1000, &mut frame) };
    assert_eq!(status, CUFRAMES_OK);

    /// Runs `call` on a struct of each bad size (refused, its bytes
    /// untouched), then on a newer struct (this library's bytes, the tail
    /// untouched). `call` gets a pointer to a struct of at least
    /// struct_size writable bytes, or one refused before any access.
    fn check<T: Copy>(name: &str, call: impl Fn(*mut T) -> cuframes_status) -> T {
        for (size, mentions) in [
            (0usize, "struct_size is 0"),
            (4, "smaller than the first layout"),
            (size_of::<T>() - 8, "smaller than the first layout"),
            (100_000, "larger than any cuframes struct"),
        ] {
            // 512 bytes of a pattern, aligned for any struct of the API.
            let mut buffer = [0x5A5A_5A5A_5A5A_5A5Au64; 64];
            assert!(size_of::<T>() <= size_of_val(&buffer));
            // SAFETY: the buffer's first 4 bytes are struct_size's place.
            unsafe { buffer.as_mut_ptr().cast::<u32>().write(size as u32) };
            let before = buffer;
            assert_refused(call(buffer.as_mut_ptr().cast::<T>()), mentions);
            assert_eq!(buffer, before, "{name}: written though refused");
        }
        let mut newer = Newer::<T>::sized();
        newer.future = [0xCDCD_CDCD_CDCD_CDCD; 2];
        assert_eq!(call(&mut newer.known), CUFRAMES_OK, "{name}: {}", last_error());
        assert_eq!(
            struct_size_of(&newer.known) as usize,
            size_of::<T>(),
            "{name}: struct_size written"
        );
        assert_eq!(newer.future, [0xCDCD_CDCD_CDCD_CDCD; 2], "{name}: tail written");
        newer.known
    }

    let info = check::<cuframes_stream_info>("stream_info", |out| {
        // SAFETY: a live handle; `out` as check() says.
        unsafe { cuframes_subscriber_get_info(subscriber, out) }
    });
    assert_eq!(info.plane_count, 2);
    let frame_info = check::<cuframes_frame_info>("frame_info", |out| {
        // SAFETY: a live frame; `out` as check() says.
        unsafe { cuframes_frame_get_info(frame, out) }
    });
    assert_eq!(frame_info.seq, 1);
    let stats = check::<cuframes_subscriber_stats>("stats", |out| {
        // SAFETY: a live handle; `out` as check() says.
        unsafe { cuframes_subscriber_get_stats(subscriber, out) }
    });
    assert_eq!(stats.received, 1);
    let props = check::<cuframes_frame_props>("frame_props", |out| {
        // SAFETY: a live frame; `out` as check() says.
        let got = unsafe { cuframes_frame_get_props(frame, out) };
        if got == 1 { CUFRAMES_OK } else { got }
    });
    assert_eq!((props.color_range, props.sar_num, props.sar_den), (2, 4, 3));
    let layout = check::<cuframes_frame_layout>("frame_layout", |out| {
        // SAFETY: `out` as check() says.
        unsafe { cuframes_frame_layout_get(CUFRAMES_FORMAT_NV12, 64, 32, out) }
    });
    assert_eq!(layout.plane_count, 2);
    let slot = check::<cuframes_slot>("slot", |out| {
        // SAFETY: a live handle; `out` as check() says.
        let status = unsafe { cuframes_publisher_acquire_slot(publisher, out) };
        if status == CUFRAMES_OK {
            // Give the slot back for the next acquire.
            // SAFETY: a live handle.
            let committed = unsafe { cuframes_publisher_commit_slot(publisher, 2, null_mut()) };
            assert_eq!(committed, CUFRAMES_OK);
        }
        status
    });
    assert_eq!(slot.plane_count, 2);

    // Frame props in: the same checks as configs.
    let mut bad = props_in;
    bad.struct_size = 0;
    // SAFETY: as above.
    assert_refused(
        unsafe { cuframes_publisher_set_frame_props(publisher, &bad) },
        "props->struct_size is 0",
    );
    let mut newer = Newer::<cuframes_frame_props>::sized();
    newer.known.sar_num = 1;
    newer.known.sar_den = 1;
    newer.future[1] = 3;
    // SAFETY: as above.
    assert_refused(
        unsafe { cuframes_publisher_set_frame_props(publisher, &newer.known) },
        "newer cuframes.h",
    );
    newer.future[1] = 0;
    // SAFETY: as above.
    let status = unsafe { cuframes_publisher_set_frame_props(publisher, &newer.known) };
    assert_eq!(status, CUFRAMES_OK);

    // SAFETY: live handles and frame.
    unsafe {
        assert_eq!(cuframes_frame_release(frame), CUFRAMES_OK);
        cuframes_subscriber_destroy(subscriber);
        cuframes_publisher_destroy(publisher);
    }
}

/// `cuframes_list_keys`: entries[0].struct_size is every entry's size; a
/// newer header's longer entries are filled at their stride.
#[test]
fn list_keys_stride() {
    let dir = tempfile::tempdir().unwrap();
    let dir_c = cstring(dir.path());
    let keys: Vec<CString> = (0..2).map(|_| unique_key("stride")).collect();
    let publishers: Vec<_> = keys
        .iter()
        .map(|key| create_publisher(&publisher_config(key, &dir_c, CUFRAMES_FORMAT_NV12)))
        .collect();
    let mut count = 99usize;
    let mut entries = [Newer::<cuframes_key_info>::sized(); 4];
    for entry in &mut entries {
        entry.future = [0xEEEE_EEEE_EEEE_EEEE; 2];
    }
    entries[1].known.struct_size = 0; // only the first entry's counts
    // SAFETY: 4 entries of struct_size writable bytes each, a valid count.
    let status = unsafe { cuframes_list_keys(dir_c.as_ptr(), &mut entries[0].known, 4, &mut count) };
    assert_eq!(status, CUFRAMES_OK, "{}", last_error());
    assert_eq!(count, 2);
    for entry in &entries[..2] {
        assert_eq!(entry.known.struct_size as usize, size_of::<cuframes_key_info>());
        assert_eq!(
            entry.known.info.struct_size as usize,
            size_of::<cuframes_stream_info>()
        );
        assert_eq!((entry.known.info.width, entry.known.info.height), (33, 17));
        assert_eq!(entry.future, [0xEEEE_EEEE_EEEE_EEEE; 2]);
    }
    let mut names: Vec<String> = entries[..2]
        .iter()
        .map(|entry| {
            // SAFETY: NUL-terminated by the library.
            unsafe { std::ffi::CStr::from_ptr(entry.known.key.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    let mut want: Vec<String> = keys.iter().map(|k| k.to_string_lossy().into_owned()).collect();
    want.sort();
    assert_eq!(names, want);

    let mut small = sized::<cuframes_key_info>();
    small.struct_size = offset_of!(cuframes_key_info, info) as u32;
    count = 99;
    // SAFETY: one entry, a valid count.
    assert_refused(
        unsafe { cuframes_list_keys(dir_c.as_ptr(), &mut small, 1, &mut count) },
        "entries->struct_size",
    );
    assert_eq!(count, 99, "count_out untouched on failure");
    for publisher in publishers {
        // SAFETY: live handles.
        unsafe { cuframes_publisher_destroy(publisher) };
    }
}
