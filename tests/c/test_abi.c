/*
 * The ABI as it grows (docs/c-api.md, "ABI policy"): a program built against
 * an older header works with this library. This file is compiled against
 * tests/c/abi/cuframes-0.2.0.h, the frozen header of the first struct layout
 * that carries struct_size, not against include/cuframes.h (whose include
 * guard it shares, so common.h's #include <cuframes.h> adds nothing: keep
 * common.h and fixture.h to the 0.2.0 API), and linked with the library
 * being tested. Its configs are smaller than the library's since 0.3
 * appended log_callback and log_opaque: they work, with messages going to
 * the process's sink (test_capi's log_fields_past_an_old_struct_size sees
 * where those go).
 * Then structs that lack the first layout's fields: refused, untouched.
 * (A struct longer than the library's, from a newer header, is test_capi's
 * newer_header_structs.) Compiles as C99 and as C++.
 */
#define _POSIX_C_SOURCE 200809L

#include <stddef.h>

#include "abi/cuframes-0.2.0.h"
#include "fixture.h"

#define SENTINEL(type) ((type *)(uintptr_t)0x5EED0000u)

/* The frozen header is the first layout: on LP64 its sizes are these (the
 * library pins the same beside each struct, in its growable_layouts tests). A change here means the file was edited. */
static int test_frozen_header_is_the_first_layout(void) {
#if UINTPTR_MAX > 0xFFFFFFFFu
    CHECK(sizeof(cuframes_publisher_config) == 112);
    CHECK(sizeof(cuframes_subscriber_config) == 72);
    CHECK(sizeof(cuframes_stream_info) == 88);
    CHECK(sizeof(cuframes_slot) == 80);
    CHECK(sizeof(cuframes_frame_props) == 32);
    CHECK(sizeof(cuframes_subscriber_stats) == 64);
    CHECK(sizeof(cuframes_frame_info) == 176);
    CHECK(sizeof(cuframes_frame_layout) == 128);
    CHECK(sizeof(cuframes_key_info) == 160);
#endif
    CHECK(offsetof(cuframes_publisher_config, struct_size) == 0);
    return 0;
}

/* An old program, start to end: configs from the old header's _init, every
 * out-struct at the old size (the library writes that many bytes and says
 * so), frames published by copy and in place, with properties, received and
 * checked byte by byte. */
static int test_old_header_moves_frames(void) {
    const uint32_t width = 64, height = 48;
    fixture f;
    cuframes_stream_info pinfo, sinfo;
    cuframes_frame_props props, got;
    cuframes_subscriber_stats stats;
    cuframes_frame_layout layout;
    cuframes_key_info keys[8];
    cuframes_slot slot;
    source_frame source;
    size_t count = 0;
    uint64_t seq;
    uint32_t p;

    memset(&f, 0xAB, sizeof f); /* the checks below see what _init wrote */
    fixture_init(&f, "old", CUFRAMES_FORMAT_NV12, width, height);
    CHECK(f.pconfig.struct_size == sizeof f.pconfig);
    /* 0.3 made the library's default ring 16 (as the muxer's): old programs get it too. */
    CHECK(f.pconfig.ring_size == 16 && f.pconfig.cuda_device == -1 && f.pconfig.reserved == 0);
    CHECK(f.sconfig.struct_size == sizeof f.sconfig);
    {
        /* 0.3 made copy AUTO and a read-ahead of 32 the subscriber's defaults
         * (the command's and FFmpeg's): old programs get them too. (The
         * fixture asks for the slots themselves.) */
        cuframes_subscriber_config s;
        memset(&s, 0xAB, sizeof s);
        cuframes_subscriber_config_init(&s);
        CHECK(s.struct_size == sizeof s && s.copy == CUFRAMES_COPY_AUTO && s.read_ahead == 32);
        CHECK(s.connect_timeout_ms == 30000);
    }
    f.pconfig.ring_size = 8; /* the 6 frames wait in the ring until read */
    f.pconfig.fps_num = 25;
    f.pconfig.fps_den = 1;
    f.sconfig.name = "c-abi-0.2.0";
    TRY(fixture_start(&f));

    memset(&pinfo, 0xEE, sizeof pinfo);
    memset(&sinfo, 0xEE, sizeof sinfo);
    CHECK_OK(cuframes_publisher_get_info(f.publisher, SIZED(pinfo)));
    CHECK_OK(cuframes_subscriber_get_info(f.subscriber, SIZED(sinfo)));
    CHECK(pinfo.struct_size == sizeof pinfo && sinfo.struct_size == sizeof sinfo);
    CHECK(sinfo.width == width && sinfo.height == height && sinfo.format == CUFRAMES_FORMAT_NV12);
    CHECK(sinfo.fps_num == 25 && sinfo.fps_den == 1 && sinfo.memory == CUFRAMES_MEMORY_HOST);
    CHECK(sinfo.plane_count == 2 && sinfo.frame_size == pinfo.frame_size && sinfo.reserved == 0);

    CHECK_OK(cuframes_frame_layout_get(CUFRAMES_FORMAT_NV12, width, height, SIZED(layout)));
    CHECK(layout.struct_size == sizeof layout && layout.frame_size == pinfo.frame_size);

    memset(&props, 0, sizeof props);
    props.color_range = 2;
    props.flags = CUFRAMES_PROPS_KEY_FRAME;
    props.sar_num = 16;
    props.sar_den = 15;
    props.duration_ns = 40000000;
    CHECK_OK(cuframes_publisher_set_frame_props(f.publisher, SIZED(props)));

    /* Frames 1-5 by copy, frame 6 written in place. */
    CHECK(source_init(&source, CUFRAMES_FORMAT_NV12, width, height) == 0);
    for (seq = 1; seq <= 5; seq++) {
        uint64_t got_seq = 0;
        source_fill(&source, seq);
        CHECK_OK(cuframes_publisher_publish(f.publisher, CUFRAMES_MEMORY_HOST, source.planes,
                                            source.pitches, source.plane_count,
                                            (int64_t)seq * 40, &got_seq));
        CHECK(got_seq == seq);
    }
    memset(&slot, 0xEE, sizeof slot);
    CHECK_OK(cuframes_publisher_acquire_slot(f.publisher, SIZED(slot)));
    CHECK(slot.struct_size == sizeof slot && slot.plane_count == 2);
    for (p = 0; p < slot.plane_count; p++) {
        size_t row, column;
        for (row = 0; row < source.geometry[p].rows; row++) {
            uint8_t *line = (uint8_t *)slot.planes[p] + row * slot.pitches[p];
            for (column = 0; column < source.geometry[p].row_bytes; column++) {
                line[column] = pattern_byte(6, p, row, column);
            }
        }
    }
    CHECK_OK(cuframes_publisher_commit_slot(f.publisher, 240, &seq));
    CHECK(seq == 6);
    source_free(&source);

    for (seq = 1; seq <= 6; seq++) {
        cuframes_frame *frame = NULL;
        cuframes_frame_info info;
        CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &frame));
        memset(&info, 0xEE, sizeof info);
        CHECK_OK(cuframes_frame_get_info(frame, SIZED(info)));
        CHECK(info.struct_size == sizeof info);
        CHECK(info.seq == seq && info.pts_ns == (int64_t)seq * 40 && info.lost_before == 0);
        if (verify_frame(&info, CUFRAMES_FORMAT_NV12, width, height) != 0) {
            return 1;
        }
        memset(&got, 0xEE, sizeof got);
        CHECK(cuframes_frame_get_props(frame, SIZED(got)) == 1);
        CHECK(got.struct_size == sizeof got && got.color_range == 2 && got.sar_num == 16 &&
              got.sar_den == 15 && got.duration_ns == 40000000 &&
              got.flags == CUFRAMES_PROPS_KEY_FRAME);
        CHECK_OK(cuframes_frame_release(frame));
    }

    memset(&stats, 0xEE, sizeof stats);
    CHECK_OK(cuframes_subscriber_get_stats(f.subscriber, SIZED(stats)));
    CHECK(stats.struct_size == sizeof stats && stats.received == 6 && stats.dropped == 0);

    keys[0].struct_size = sizeof keys[0];
    CHECK_OK(cuframes_list_keys(runtime_dir(), keys, 8, &count));
    CHECK(count >= 1 && count <= 8);
    for (size_t i = 0; i < count; i++) {
        CHECK(keys[i].struct_size == sizeof keys[i]);
        CHECK(keys[i].info.struct_size == sizeof keys[i].info);
    }

    fixture_teardown(&f);
    return 0;
}

/* Structs lacking fields of the first layout (struct_size says where they
 * end), or with no struct_size at all: refused with a message, nothing
 * written. */
static int test_structs_lacking_fields_are_refused(void) {
    char key[64];
    cuframes_publisher_config pconfig, before;
    cuframes_subscriber_config sconfig;
    cuframes_publisher *publisher = SENTINEL(cuframes_publisher);
    cuframes_subscriber *subscriber = SENTINEL(cuframes_subscriber);
    cuframes_publisher *live = NULL;
    cuframes_stream_info info, untouched;
    unique_key(key, sizeof key, "short");

    /* A config that ends before `group` (the fields 0.1 appended after it
     * are missing). */
    publisher_config(&pconfig, key, CUFRAMES_FORMAT_NV12, 32, 16);
    pconfig.struct_size = (uint32_t)offsetof(cuframes_publisher_config, group);
    CHECK_STATUS(cuframes_publisher_create(&pconfig, &publisher), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(publisher == SENTINEL(cuframes_publisher));
    CHECK(strstr(cuframes_last_error(), "smaller than the first layout of cuframes_publisher_config") != NULL);

    /* Zero-initialised, no _init: struct_size 0. */
    before = pconfig;
    memset(&pconfig, 0, sizeof pconfig);
    pconfig.key = before.key;
    pconfig.format = before.format;
    pconfig.width = before.width;
    pconfig.height = before.height;
    pconfig.memory = before.memory;
    pconfig.runtime_dir = before.runtime_dir;
    CHECK_STATUS(cuframes_publisher_create(&pconfig, &publisher), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "config->struct_size is 0") != NULL);
    CHECK(publisher == SENTINEL(cuframes_publisher));

    /* _init_sized for a struct shorter than the first layout writes nothing. */
    memset(&sconfig, 0x5A, sizeof sconfig);
    CHECK_STATUS(cuframes_subscriber_config_init_sized(&sconfig, offsetof(cuframes_subscriber_config, copy)),
                 CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(sconfig.struct_size == 0x5A5A5A5Au);
    subscriber_config(&sconfig, key);
    sconfig.struct_size = (uint32_t)offsetof(cuframes_subscriber_config, copy);
    CHECK_STATUS(cuframes_subscriber_create(&sconfig, &subscriber), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(subscriber == SENTINEL(cuframes_subscriber));

    /* An out-struct that ends before `cuda_share`: refused before any work. */
    pconfig.struct_size = sizeof pconfig;
    CHECK_OK(cuframes_publisher_create(&pconfig, &live));
    memset(&info, 0x5A, sizeof info);
    info.struct_size = (uint32_t)offsetof(cuframes_stream_info, cuda_share);
    memcpy(&untouched, &info, sizeof info);
    CHECK_STATUS(cuframes_publisher_get_info(live, &info), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(memcmp(&info, &untouched, sizeof info) == 0);
    CHECK(strstr(cuframes_last_error(), "info_out->struct_size") != NULL);
    cuframes_publisher_destroy(live);

#if UINTPTR_MAX > 0xFFFFFFFFu && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    {
        /* A 0.1 program's config (no struct_size: the key pointer first)
         * that reached this library despite the SONAME: its first 4 bytes,
         * the low half of the pointer, are no size and it is refused. The
         * key is placed where that half is above 4096 bytes. */
        typedef struct legacy_publisher_config {
            const char *key;
            cuframes_format format;
            uint32_t width, height, ring_size;
            cuframes_policy policy;
            uint32_t ack_timeout_ms;
            cuframes_memory memory;
            uint32_t fps_num, fps_den;
            void *cuda_context, *cuda_stream;
            const char *runtime_dir;
            const uint64_t *external_slots;
            const char *group;
            int32_t cuda_device;
            uint32_t startup_timeout_ms;
            cuframes_cuda_share cuda_share;
        } legacy_publisher_config;
        static char buffer[8192];
        char *legacy_key = buffer;
        legacy_publisher_config legacy;
        if (((uintptr_t)legacy_key & 0xFFFFFFFFu) <= 4096u) {
            legacy_key += 4097;
        }
        strcpy(legacy_key, key);
        memset(&legacy, 0, sizeof legacy);
        legacy.key = legacy_key;
        legacy.format = CUFRAMES_FORMAT_NV12;
        legacy.width = 32;
        legacy.height = 16;
        legacy.memory = CUFRAMES_MEMORY_HOST;
        legacy.runtime_dir = runtime_dir();
        CHECK_STATUS(cuframes_publisher_create((const cuframes_publisher_config *)(const void *)&legacy,
                                               &publisher),
                     CUFRAMES_ERR_INVALID_ARGUMENT);
        CHECK(publisher == SENTINEL(cuframes_publisher));
        CHECK(strstr(cuframes_last_error(), "larger than any cuframes struct") != NULL);
    }
#endif
    return 0;
}

int main(int argc, char **argv) {
    static const test_case tests[] = {
        {"frozen_header_is_the_first_layout", test_frozen_header_is_the_first_layout},
        {"old_header_moves_frames", test_old_header_moves_frames},
        {"structs_lacking_fields_are_refused", test_structs_lacking_fields_are_refused},
    };
    int status = run_tests(tests, sizeof tests / sizeof tests[0], argc, argv);
    remove_runtime_dir();
    return status;
}
