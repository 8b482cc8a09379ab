/*
 * The C API in one process: statuses, configs, a publisher and subscribers
 * in host memory, every error path the contract names. Built against the
 * installed header and library only (pkg-config), as C99 and as C++.
 *
 * Usage: test_capi [TEST]   (every test, or the one named)
 */
#define _POSIX_C_SOURCE 200809L

#include <fcntl.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "fixture.h"

#ifndef CUFRAMES_EXPECTED_VERSION
#error "build with -DCUFRAMES_EXPECTED_VERSION=\"x.y.z\" (pkg-config --modversion cuframes)"
#endif

/* A pointer value no successful call would write: out-parameters of failed
 * calls must keep it. */
#define SENTINEL(type) ((type *)(uintptr_t)0x5EED0000u)

/* ---- helpers ------------------------------------------------------------ */

static int publish(cuframes_publisher *publisher, source_frame *source, uint64_t seq,
                   int64_t pts) {
    uint64_t got = 0;
    source_fill(source, seq);
    CHECK_OK(cuframes_publisher_publish(publisher, CUFRAMES_MEMORY_HOST, source->planes,
                                        source->pitches, source->plane_count, pts, &got));
    CHECK(got == seq);
    return 0;
}

/* ---- library-wide calls ------------------------------------------------- */

static int test_version_protocol_strerror(void) {
    static const struct {
        cuframes_status status;
        const char *text;
    } table[] = {
        {CUFRAMES_OK, "success"},
        {CUFRAMES_ERR_INVALID_ARGUMENT, "invalid argument"},
        {CUFRAMES_ERR_NOT_FOUND, "no such publisher"},
        {CUFRAMES_ERR_ALREADY_EXISTS, "key already published"},
        {CUFRAMES_ERR_PROTOCOL, "protocol error or version mismatch"},
        {CUFRAMES_ERR_FORMAT, "unsupported pixel format"},
        {CUFRAMES_ERR_TOO_MANY, "too many subscribers"},
        {CUFRAMES_ERR_TIMEOUT, "timed out"},
        {CUFRAMES_ERR_DISCONNECTED, "disconnected"},
        {CUFRAMES_ERR_OVERWRITTEN, "frame overwritten while leased"},
        {CUFRAMES_ERR_IO, "I/O error"},
        {CUFRAMES_ERR_CUDA, "CUDA error"},
        {CUFRAMES_ERR_UNSUPPORTED, "not supported"},
        {CUFRAMES_ERR_CORRUPT, "corrupt shared state"},
        {CUFRAMES_ERR_PERMISSION, "permission denied"},
        {CUFRAMES_ERR_INTERNAL, "internal error"},
        {CUFRAMES_ERR_EXHAUSTED, "a resource ran out"},
    };
    size_t i;
    CHECK(strcmp(cuframes_version(), CUFRAMES_EXPECTED_VERSION) == 0);
    CHECK(cuframes_protocol_version() == 1);
    for (i = 0; i < sizeof table / sizeof table[0]; i++) {
        CHECK(table[i].status == -(cuframes_status)i); /* 0, -1, ..., -16 */
        CHECK(strcmp(cuframes_strerror(table[i].status), table[i].text) == 0);
    }
    CHECK(strcmp(cuframes_strerror(-17), "unknown status") == 0);
    CHECK(strcmp(cuframes_strerror(1), "unknown status") == 0);
    CHECK(strcmp(cuframes_strerror(INT32_MIN), "unknown status") == 0);
    CHECK(CUFRAMES_MAX_PLANES == 4);
    return 0;
}

static int test_validate_key(void) {
    static const char *good[] = {"cam1", "a", "A-b_9", "---", "___"};
    static const char *bad[] = {"", "a/b", "a b", "a.b", "caf\xc3\xa9", "a\nb"};
    char long_key[65];
    size_t i;
    for (i = 0; i < sizeof good / sizeof good[0]; i++) {
        CHECK_OK(cuframes_validate_key(good[i]));
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(cuframes_validate_key(bad[i]), CUFRAMES_ERR_INVALID_ARGUMENT);
        CHECK_MESSAGE();
    }
    memset(long_key, 'k', 63);
    long_key[63] = '\0';
    CHECK_OK(cuframes_validate_key(long_key));
    long_key[63] = 'k';
    long_key[64] = '\0';
    CHECK_STATUS(cuframes_validate_key(long_key), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_validate_key(NULL), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "NULL") != NULL);
    return 0;
}

static int test_config_init_defaults(void) {
    cuframes_publisher_config p;
    cuframes_subscriber_config s;
    memset(&p, 0xAB, sizeof p);
    memset(&s, 0xAB, sizeof s);
    cuframes_publisher_config_init(&p);
    CHECK(p.struct_size == sizeof p && p.v1_peers == CUFRAMES_V1_PEERS_SAME_USER);
    CHECK(p.key == NULL && p.runtime_dir == NULL);
    CHECK(p.format == 0 && p.width == 0 && p.height == 0);
    CHECK(p.ring_size == CUFRAMES_DEFAULT_RING_SIZE && CUFRAMES_DEFAULT_RING_SIZE == 16);
    CHECK(CUFRAMES_MAX_RING_SIZE == 16);
    CHECK(p.policy == CUFRAMES_POLICY_DROP_OLDEST);
    CHECK(p.ack_timeout_ms == CUFRAMES_DEFAULT_ACK_TIMEOUT_MS && CUFRAMES_DEFAULT_ACK_TIMEOUT_MS == 1000);
    CHECK(p.memory == CUFRAMES_MEMORY_AUTO);
    CHECK(p.fps_num == 0 && p.fps_den == 0);
    CHECK(p.cuda_context == NULL && p.cuda_stream == NULL);
    CHECK(p.external_slots == NULL && p.group == NULL);
    CHECK(p.cuda_device == -1);
    CHECK(p.startup_timeout_ms == CUFRAMES_DEFAULT_STARTUP_TIMEOUT_MS && CUFRAMES_DEFAULT_STARTUP_TIMEOUT_MS == 10000);
    cuframes_subscriber_config_init(&s);
    CHECK(s.struct_size == sizeof s);
    CHECK(s.key == NULL && s.name == NULL && s.runtime_dir == NULL);
    CHECK(s.mode == CUFRAMES_MODE_SEQUENTIAL);
    CHECK(s.connect_timeout_ms == CUFRAMES_DEFAULT_CONNECT_TIMEOUT_MS && CUFRAMES_DEFAULT_CONNECT_TIMEOUT_MS == 30000);
    CHECK(s.cuda_context == NULL && s.cuda_stream == NULL);
    CHECK(s.cuda_device == -1);
    /* 0.3: copies of what the ring cannot spare, read ahead under DROP_OLDEST (D39). */
    CHECK(s.copy == CUFRAMES_COPY_AUTO);
    CHECK(s.read_ahead == CUFRAMES_DEFAULT_READ_AHEAD && CUFRAMES_DEFAULT_READ_AHEAD == 32);
    /* For the callers' own loops: how long to wait for a publisher, and for a frame. */
    CHECK(CUFRAMES_DEFAULT_WAIT_TIMEOUT_MS == 30000 && CUFRAMES_DEFAULT_FRAME_TIMEOUT_MS == 5000);
    CHECK(p.cuda_share == CUFRAMES_CUDA_SHARE_AUTO);
    cuframes_publisher_config_init(NULL); /* ignored */
    cuframes_subscriber_config_init(NULL);
    /* The exported calls behind them: a size that is no layout writes nothing. */
    memset(&p, 0xAB, sizeof p);
    CHECK_STATUS(cuframes_publisher_config_init_sized(&p, 8), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "smaller than the first layout") != NULL);
    CHECK(p.struct_size == 0xABABABABu);
    CHECK_STATUS(cuframes_subscriber_config_init_sized(NULL, sizeof s), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_OK(cuframes_publisher_config_init_sized(&p, sizeof p));
    CHECK(p.struct_size == sizeof p && p.ring_size == CUFRAMES_DEFAULT_RING_SIZE);
    return 0;
}

/* ---- publisher configs -------------------------------------------------- */

static int test_publisher_bad_config(void) {
    char key[64];
    cuframes_publisher_config config;
    cuframes_publisher *publisher;
    cuframes_stream_info info;
    int i;
    unique_key(key, sizeof key, "badcfg");
    for (i = 0; i < 9; i++) {
        cuframes_status want = CUFRAMES_ERR_INVALID_ARGUMENT;
        const char *mentions = "";
        publisher_config(&config, key, CUFRAMES_FORMAT_NV12, 33, 17);
        switch (i) {
        case 0: config.key = NULL; mentions = "config.key is NULL"; break;
        case 1: config.key = "bad key!"; mentions = "bad key!"; break;
        case 2: config.ring_size = 17; mentions = "ring size 17"; break;
        case 3: config.format = 99; mentions = "config.format 99"; break;
        case 4: config.memory = 7; mentions = "config.memory 7"; break;
        case 5: config.width = 0; mentions = "0x17"; break;
        case 6: config.policy = 2; mentions = "config.policy 2"; break;
        case 7:
            config.memory = CUFRAMES_MEMORY_CUDA;
            want = CUFRAMES_ERR_UNSUPPORTED;
            mentions = "CUDA";
            break;
        case 8: config.cuda_device = -2; mentions = "config.cuda_device -2"; break;
        }
        publisher = SENTINEL(cuframes_publisher);
        CHECK_STATUS(cuframes_publisher_create(&config, &publisher), want);
        CHECK(publisher == SENTINEL(cuframes_publisher));
        CHECK_MESSAGE();
        if (strstr(cuframes_last_error(), mentions) == NULL) {
            fprintf(stderr, "case %d: last error \"%s\" does not mention \"%s\"\n", i,
                    cuframes_last_error(), mentions);
            return 1;
        }
    }
    publisher = SENTINEL(cuframes_publisher);
    CHECK_STATUS(cuframes_publisher_create(NULL, &publisher), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(publisher == SENTINEL(cuframes_publisher));
    CHECK_MESSAGE();

    /* ring_size 0 is the default (16), as are 0 ms ACK timeouts. */
    publisher_config(&config, key, CUFRAMES_FORMAT_YUV420P, 33, 17);
    config.ring_size = 0;
    config.ack_timeout_ms = 0;
    config.fps_num = 25;
    config.fps_den = 1;
    CHECK_OK(cuframes_publisher_create(&config, &publisher));
    memset(&info, 0, sizeof info);
    CHECK_OK(cuframes_publisher_get_info(publisher, SIZED(info)));
    CHECK(info.ring_size == CUFRAMES_DEFAULT_RING_SIZE && info.policy == CUFRAMES_POLICY_DROP_OLDEST);
    CHECK(info.memory == CUFRAMES_MEMORY_HOST && info.format == CUFRAMES_FORMAT_YUV420P);
    CHECK(info.width == 33 && info.height == 17 && info.plane_count == 3);
    CHECK(info.fps_num == 25 && info.fps_den == 1);
    CHECK(info.pitches[0] >= 33 && info.pitches[1] >= 17 && info.pitches[3] == 0);
    CHECK(info.frame_size >= info.pitches[0] * 17 + 2 * info.pitches[1] * 9);
    cuframes_publisher_destroy(publisher);
    cuframes_publisher_destroy(NULL); /* ignored */
    return 0;
}

/* ---- round trips -------------------------------------------------------- */

static int round_trip(cuframes_format format) {
    const uint32_t width = 33, height = 17;
    fixture f;
    cuframes_stream_info pinfo, sinfo;
    cuframes_subscriber_stats stats;
    source_frame source;
    uint64_t seq;

    fixture_init(&f, "round", format, width, height);
    f.pconfig.fps_num = 30000;
    f.pconfig.fps_den = 1001;
    f.sconfig.name = "c-round-trip";
    TRY(fixture_start(&f));
    CHECK(cuframes_publisher_subscriber_count(f.publisher) == 1);

    memset(&pinfo, 0, sizeof pinfo);
    memset(&sinfo, 0xCC, sizeof sinfo);
    CHECK_OK(cuframes_publisher_get_info(f.publisher, SIZED(pinfo)));
    CHECK_OK(cuframes_subscriber_get_info(f.subscriber, SIZED(sinfo)));
    CHECK(pinfo.format == sinfo.format && pinfo.width == sinfo.width &&
          pinfo.height == sinfo.height && pinfo.ring_size == sinfo.ring_size &&
          pinfo.policy == sinfo.policy && pinfo.memory == sinfo.memory &&
          pinfo.fps_num == sinfo.fps_num && pinfo.fps_den == sinfo.fps_den &&
          pinfo.plane_count == sinfo.plane_count && pinfo.frame_size == sinfo.frame_size &&
          memcmp(pinfo.pitches, sinfo.pitches, sizeof pinfo.pitches) == 0);
    CHECK(sinfo.fps_num == 30000 && sinfo.fps_den == 1001 && sinfo.memory == CUFRAMES_MEMORY_HOST);

    CHECK(source_init(&source, format, width, height) == 0);
    CHECK(source.plane_count == pinfo.plane_count);
    for (seq = 1; seq <= 50; seq++) {
        cuframes_frame *frame = NULL;
        cuframes_frame_info info;
        int64_t pts = (int64_t)seq * 33366667 - 1000; /* negative for the first */
        if (publish(f.publisher, &source, seq, pts) != 0) {
            return 1;
        }
        CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &frame));
        memset(&info, 0, sizeof info);
        CHECK_OK(cuframes_frame_get_info(frame, SIZED(info)));
        CHECK(info.seq == seq);
        CHECK(info.pts_ns == pts);
        CHECK(info.publish_mono_ns != 0);
        if (verify_frame(&info, format, width, height) != 0) {
            return 1;
        }
        CHECK(memcmp(info.pitches, pinfo.pitches, sizeof info.pitches) == 0);
        CHECK_OK(cuframes_frame_is_intact(frame));
        CHECK_OK(cuframes_frame_release(frame));
    }
    source_free(&source);

    memset(&stats, 0xFF, sizeof stats);
    CHECK_OK(cuframes_subscriber_get_stats(f.subscriber, SIZED(stats)));
    CHECK(stats.received == 50 && stats.dropped == 0 && stats.overwritten == 0);
    CHECK(stats.publisher_shut_down == 0);
    CHECK_OK(cuframes_publisher_flush(f.publisher, 1000));
    fixture_teardown(&f);
    return 0;
}

static int test_round_trip_nv12(void) { return round_trip(CUFRAMES_FORMAT_NV12); }
static int test_round_trip_yuv420p(void) { return round_trip(CUFRAMES_FORMAT_YUV420P); }
static int test_round_trip_p010(void) { return round_trip(CUFRAMES_FORMAT_P010); }
static int test_round_trip_bgra(void) { return round_trip(CUFRAMES_FORMAT_BGRA); }
static int test_round_trip_p016(void) { return round_trip(CUFRAMES_FORMAT_P016); }
static int test_round_trip_yuv444p(void) { return round_trip(CUFRAMES_FORMAT_YUV444P); }
static int test_round_trip_yuv444p16(void) { return round_trip(CUFRAMES_FORMAT_YUV444P16); }
static int test_round_trip_packed_rgb(void) {
    return round_trip(CUFRAMES_FORMAT_RGBA) || round_trip(CUFRAMES_FORMAT_BGR0) || round_trip(CUFRAMES_FORMAT_RGB0);
}

/* The formats of FFmpeg 8.1/9.0's NVDEC and CUDA frames (D36), 11..22. */
static int test_round_trip_d36_formats(void) {
    static const cuframes_format formats[] = {
        CUFRAMES_FORMAT_P012,      CUFRAMES_FORMAT_NV16,         CUFRAMES_FORMAT_P210,
        CUFRAMES_FORMAT_P212,      CUFRAMES_FORMAT_P216,         CUFRAMES_FORMAT_YUV422P,
        CUFRAMES_FORMAT_YUV420P10, CUFRAMES_FORMAT_YUV422P10,    CUFRAMES_FORMAT_YUV444P10,
        CUFRAMES_FORMAT_YUV444P10MSB, CUFRAMES_FORMAT_YUV444P12MSB, CUFRAMES_FORMAT_YUVA420P,
    };
    size_t i;
    for (i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        CHECK(formats[i] == 11 + i);
        if (round_trip(formats[i]) != 0) {
            fprintf(stderr, "format %u\n", (unsigned)formats[i]);
            return 1;
        }
    }
    return 0;
}

/* YUVA420P's alpha plane, the size of Y, lies at Y's pitch after V. */
static int test_yuva420p_alpha_takes_pitch_y(void) {
    cuframes_frame_layout layout;
    CHECK_OK(cuframes_frame_layout_get(CUFRAMES_FORMAT_YUVA420P, 300, 17, SIZED(layout)));
    CHECK(layout.plane_count == 4);
    CHECK(layout.pitches[0] == 512 && layout.pitches[3] == 512);
    CHECK(layout.pitches[1] == 256 && layout.pitches[2] == 256);
    CHECK(layout.row_bytes[3] == 300 && layout.rows[3] == 17 && layout.rows[1] == 9);
    CHECK(layout.offsets[3] == 512 * 17 + 2 * 256 * 9);
    CHECK(layout.frame_size == 2 * 512 * 17 + 2 * 256 * 9);
    return 0;
}

/* ---- waiting, overwrites, lifetimes ------------------------------------- */

static int test_next_timeout_on_empty_ring(void) {
    fixture f;
    cuframes_frame *frame = SENTINEL(cuframes_frame);
    fixture_init(&f, "empty", CUFRAMES_FORMAT_NV12, 33, 17);
    TRY(fixture_start(&f));
    CHECK_STATUS(cuframes_subscriber_next(f.subscriber, 0, &frame), CUFRAMES_ERR_TIMEOUT);
    CHECK(frame == SENTINEL(cuframes_frame));
    CHECK(strstr(cuframes_last_error(), "no frame") != NULL);
    CHECK_STATUS(cuframes_subscriber_next(f.subscriber, 20, &frame), CUFRAMES_ERR_TIMEOUT);
    CHECK(frame == SENTINEL(cuframes_frame));
    CHECK_STATUS(cuframes_publisher_wait_subscribers(f.publisher, 2, 20), CUFRAMES_ERR_TIMEOUT);
    CHECK_OK(cuframes_publisher_wait_subscribers(f.publisher, 1, 1000));
    CHECK_STATUS(cuframes_publisher_wait_subscribers(f.publisher, 32, 0),
                 CUFRAMES_ERR_INVALID_ARGUMENT);
    fixture_teardown(&f);
    return 0;
}

static int test_drop_oldest_overwrite_is_reported(void) {
    fixture f;
    cuframes_frame *held = NULL;
    cuframes_frame *next = NULL;
    cuframes_frame_info info;
    cuframes_subscriber_stats stats;
    source_frame source;
    fixture_init(&f, "overwrite", CUFRAMES_FORMAT_NV12, 33, 17);
    f.pconfig.ring_size = 2;
    TRY(fixture_start(&f));
    CHECK(source_init(&source, CUFRAMES_FORMAT_NV12, 33, 17) == 0);

    if (publish(f.publisher, &source, 1, 100) != 0) return 1;
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &held));
    CHECK_OK(cuframes_frame_is_intact(held));
    CHECK(cuframes_frame_is_copy(held) == 0);
    /* Seq 3 spares the held seq 1 and replaces the unread seq 2 (D22). */
    if (publish(f.publisher, &source, 2, 200) != 0) return 1;
    if (publish(f.publisher, &source, 3, 300) != 0) return 1;
    CHECK_OK(cuframes_frame_is_intact(held));
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &next));
    CHECK_OK(cuframes_frame_get_info(next, SIZED(info)));
    CHECK(info.seq == 3 && info.pts_ns == 300);
    if (verify_frame(&info, CUFRAMES_FORMAT_NV12, 33, 17) != 0) return 1;
    /* Both slots held now: seq 4 overwrites the oldest, seq 1. */
    if (publish(f.publisher, &source, 4, 400) != 0) return 1;
    CHECK_STATUS(cuframes_frame_is_intact(held), CUFRAMES_ERR_OVERWRITTEN);
    CHECK(strstr(cuframes_last_error(), "frame seq 1") != NULL);
    memset(&info, 0, sizeof info);
    CHECK_OK(cuframes_frame_get_info(held, SIZED(info))); /* still answers, data may be torn */
    CHECK(info.seq == 1);
    CHECK_STATUS(cuframes_frame_release(held), CUFRAMES_ERR_OVERWRITTEN);
    CHECK(strstr(cuframes_last_error(), "lapped the ring") != NULL);
    CHECK_OK(cuframes_frame_is_intact(next));
    CHECK_OK(cuframes_frame_release(next));

    /* The subscriber goes on with seq 4. */
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &next));
    CHECK_OK(cuframes_frame_get_info(next, SIZED(info)));
    CHECK(info.seq == 4);
    if (verify_frame(&info, CUFRAMES_FORMAT_NV12, 33, 17) != 0) return 1;
    CHECK_OK(cuframes_frame_release(next));
    CHECK_OK(cuframes_subscriber_get_stats(f.subscriber, SIZED(stats)));
    CHECK(stats.received == 3 && stats.overwritten == 1 && stats.dropped == 1);
    source_free(&source);
    fixture_teardown(&f);
    return 0;
}

/* CUFRAMES_COPY_AUTO: a consumer holds more frames than the ring has, under
 * STRICT_WAIT, and the publisher never waits for it: beyond the slots it can
 * spare, frames are private copies. */
static int test_auto_copy_holds_more_than_the_ring(void) {
    enum { FRAMES = 12 };
    fixture f;
    cuframes_frame *held[FRAMES];
    cuframes_frame_info info;
    cuframes_subscriber_stats stats;
    source_frame source;
    int slots = 0;
    fixture_init(&f, "holdmany", CUFRAMES_FORMAT_NV12, 64, 32);
    f.pconfig.ring_size = 3;
    f.pconfig.policy = CUFRAMES_POLICY_STRICT_WAIT;
    f.pconfig.ack_timeout_ms = 200;
    f.pconfig.startup_timeout_ms = 200;
    TRY(fixture_create_publisher(&f));
    f.sconfig.copy = 7;
    CHECK_STATUS(cuframes_subscriber_create(&f.sconfig, &f.subscriber), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "cuframes_copy_mode") != NULL);
    CHECK(f.subscriber == NULL);
    f.sconfig.copy = CUFRAMES_COPY_AUTO;
    TRY(fixture_create_subscriber(&f));
    CHECK(source_init(&source, CUFRAMES_FORMAT_NV12, 64, 32) == 0);
    for (int i = 0; i < FRAMES; i++) {
        if (publish(f.publisher, &source, (uint64_t)i + 1, i * 10) != 0) return 1;
        CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &held[i]));
        CHECK_OK(cuframes_frame_get_info(held[i], SIZED(info)));
        CHECK(info.seq == (uint64_t)i + 1);
        slots += cuframes_frame_is_copy(held[i]) == 0;
    }
    CHECK(slots == 2); /* ring - ring / 2 slots held (one stays free), then copies */
    for (int i = 0; i < FRAMES; i++) {
        CHECK_OK(cuframes_frame_get_info(held[i], SIZED(info)));
        if (verify_frame(&info, CUFRAMES_FORMAT_NV12, 64, 32) != 0) return 1;
        CHECK_OK(cuframes_frame_release(held[i]));
    }
    CHECK_OK(cuframes_subscriber_get_stats(f.subscriber, SIZED(stats)));
    CHECK(stats.received == FRAMES && stats.copied == FRAMES - 2 && stats.dropped == 0);
    CHECK(cuframes_publisher_subscriber_count(f.publisher) == 1); /* never dropped */
    CHECK_STATUS(cuframes_frame_is_copy(NULL), CUFRAMES_ERR_INVALID_ARGUMENT);
    source_free(&source);
    fixture_teardown(&f);
    return 0;
}

static int test_frame_outlives_subscriber(void) {
    fixture f;
    cuframes_frame *first = NULL;
    cuframes_frame *second = NULL;
    cuframes_frame_info info;
    source_frame source;
    fixture_init(&f, "outlive", CUFRAMES_FORMAT_YUV420P, 33, 17);
    TRY(fixture_start(&f));
    CHECK(source_init(&source, CUFRAMES_FORMAT_YUV420P, 33, 17) == 0);
    if (publish(f.publisher, &source, 1, 1) != 0) return 1;
    if (publish(f.publisher, &source, 2, 2) != 0) return 1;
    source_free(&source);
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &first));
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &second));

    fixture_destroy_subscriber(&f);
    memset(&info, 0, sizeof info);
    CHECK_OK(cuframes_frame_get_info(first, SIZED(info)));
    if (verify_frame(&info, CUFRAMES_FORMAT_YUV420P, 33, 17) != 0) return 1;
    CHECK_OK(cuframes_frame_release(first));

    /* Even the publisher may go: the memory stays mapped until the release. */
    fixture_destroy_publisher(&f);
    CHECK_OK(cuframes_frame_get_info(second, SIZED(info)));
    CHECK(info.seq == 2);
    if (verify_frame(&info, CUFRAMES_FORMAT_YUV420P, 33, 17) != 0) return 1;
    CHECK_OK(cuframes_frame_is_intact(second));
    CHECK_OK(cuframes_frame_release(second));
    return 0;
}

static int test_flush_waits_for_held_frames(void) {
    fixture f;
    cuframes_frame *frame = NULL;
    source_frame source;
    fixture_init(&f, "flush", CUFRAMES_FORMAT_BGRA, 16, 8);
    TRY(fixture_start(&f));
    CHECK(source_init(&source, CUFRAMES_FORMAT_BGRA, 16, 8) == 0);
    if (publish(f.publisher, &source, 1, 0) != 0) return 1;
    source_free(&source);
    CHECK_STATUS(cuframes_publisher_flush(f.publisher, 20), CUFRAMES_ERR_TIMEOUT);
    CHECK(strstr(cuframes_last_error(), "still hold frames") != NULL);
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &frame));
    CHECK_OK(cuframes_frame_release(frame));
    CHECK_OK(cuframes_publisher_flush(f.publisher, 1000));
    fixture_teardown(&f);
    return 0;
}

/* wait_delivered: done once the newest frame is taken, even while it is
 * held; the held frame stays readable after the publisher is gone. */
static int test_wait_delivered_needs_take_not_release(void) {
    fixture f;
    cuframes_frame *first = NULL;
    cuframes_frame *second = NULL;
    cuframes_frame_info info;
    source_frame source;
    fixture_init(&f, "delivered", CUFRAMES_FORMAT_BGRA, 16, 8);
    f.pconfig.policy = CUFRAMES_POLICY_STRICT_WAIT;
    TRY(fixture_start(&f));
    CHECK(source_init(&source, CUFRAMES_FORMAT_BGRA, 16, 8) == 0);
    if (publish(f.publisher, &source, 1, 0) != 0) return 1;
    if (publish(f.publisher, &source, 2, 0) != 0) return 1;
    source_free(&source);
    CHECK_STATUS(cuframes_publisher_wait_delivered(f.publisher, 20), CUFRAMES_ERR_TIMEOUT);
    CHECK(strstr(cuframes_last_error(), "have not taken frame 2") != NULL);
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &first));
    CHECK_STATUS(cuframes_publisher_wait_delivered(f.publisher, 20), CUFRAMES_ERR_TIMEOUT);
    CHECK_OK(cuframes_frame_release(first));
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &second));
    CHECK_OK(cuframes_publisher_wait_delivered(f.publisher, 1000));
    CHECK_STATUS(cuframes_publisher_flush(f.publisher, 20), CUFRAMES_ERR_TIMEOUT);
    fixture_destroy_publisher(&f);
    CHECK_OK(cuframes_frame_get_info(second, SIZED(info)));
    CHECK(info.seq == 2);
    CHECK(verify_frame(&info, CUFRAMES_FORMAT_BGRA, 16, 8) == 0);
    CHECK_STATUS(cuframes_subscriber_next(f.subscriber, 1000, &first), CUFRAMES_ERR_DISCONNECTED);
    CHECK_OK(cuframes_frame_release(second));
    fixture_teardown(&f);
    return 0;
}

static int test_latest_mode_skips_to_the_newest(void) {
    fixture f;
    cuframes_frame *frame = NULL;
    cuframes_frame_info info;
    cuframes_subscriber_stats stats;
    source_frame source;
    uint64_t seq;
    fixture_init(&f, "latest", CUFRAMES_FORMAT_NV12, 33, 17);
    f.sconfig.mode = CUFRAMES_MODE_LATEST;
    TRY(fixture_start(&f));
    CHECK(source_init(&source, CUFRAMES_FORMAT_NV12, 33, 17) == 0);
    for (seq = 1; seq <= 3; seq++) {
        if (publish(f.publisher, &source, seq, (int64_t)seq) != 0) return 1;
    }
    source_free(&source);
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &frame));
    CHECK_OK(cuframes_frame_get_info(frame, SIZED(info)));
    CHECK(info.seq == 3);
    if (verify_frame(&info, CUFRAMES_FORMAT_NV12, 33, 17) != 0) return 1;
    CHECK_OK(cuframes_frame_release(frame));
    CHECK_OK(cuframes_subscriber_get_stats(f.subscriber, SIZED(stats)));
    CHECK(stats.received == 1 && stats.dropped == 2);
    fixture_teardown(&f);
    return 0;
}

static int test_publish_argument_errors(void) {
    fixture f;
    source_frame source;
    size_t short_pitches[CUFRAMES_MAX_PLANES];
    uint64_t seq = 777;
    fixture_init(&f, "pubargs", CUFRAMES_FORMAT_NV12, 33, 17);
    TRY(fixture_create_publisher(&f));
    CHECK(source_init(&source, CUFRAMES_FORMAT_NV12, 33, 17) == 0);
    source_fill(&source, 1);

    /* Host pointers passed as device pointers: no CUDA here (UNSUPPORTED),
     * or the driver refuses them (CUDA). */
    {
        cuframes_status status = cuframes_publisher_publish(
            f.publisher, CUFRAMES_MEMORY_CUDA, source.planes, source.pitches, 2, 0, &seq);
        CHECK(status == CUFRAMES_ERR_UNSUPPORTED || status == CUFRAMES_ERR_CUDA);
        CHECK(strstr(cuframes_last_error(), "CUDA") != NULL || strstr(cuframes_last_error(), "cu") != NULL);
    }
    CHECK_STATUS(cuframes_publisher_publish(f.publisher, 5, source.planes, source.pitches, 2, 0, &seq),
                 CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_publisher_publish(f.publisher, CUFRAMES_MEMORY_HOST, source.planes,
                                            source.pitches, 3, 0, &seq),
                 CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_publisher_publish(f.publisher, CUFRAMES_MEMORY_HOST, NULL, source.pitches,
                                            2, 0, &seq),
                 CUFRAMES_ERR_INVALID_ARGUMENT);
    memcpy(short_pitches, source.pitches, sizeof short_pitches);
    short_pitches[1] = 10; /* shorter than the UV row of 34 bytes */
    CHECK_STATUS(cuframes_publisher_publish(f.publisher, CUFRAMES_MEMORY_HOST, source.planes,
                                            short_pitches, 2, 0, &seq),
                 CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "pitches[1]") != NULL);
    CHECK(seq == 777);
    /* seq_out may be NULL. */
    CHECK_OK(cuframes_publisher_publish(f.publisher, CUFRAMES_MEMORY_HOST, source.planes,
                                        source.pitches, 2, 0, NULL));
    CHECK_OK(cuframes_publisher_publish(f.publisher, CUFRAMES_MEMORY_HOST, source.planes,
                                        source.pitches, 2, 0, &seq));
    CHECK(seq == 2);
    source_free(&source);
    fixture_teardown(&f);
    return 0;
}

static int test_acquire_commit_in_place(void) {
    fixture f;
    cuframes_stream_info info;
    cuframes_slot slot;
    cuframes_frame *frame = NULL;
    cuframes_frame_info frame_info;
    plane_geometry planes[CUFRAMES_MAX_PLANES];
    uint64_t seq = 0;
    uint32_t p, count;
    size_t row, column;
    fixture_init(&f, "inplace", CUFRAMES_FORMAT_YUV420P, 33, 17);
    TRY(fixture_start(&f));
    CHECK_OK(cuframes_publisher_get_info(f.publisher, SIZED(info)));
    CHECK_STATUS(cuframes_publisher_commit_slot(f.publisher, 0, &seq), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(seq == 0);
    CHECK_OK(cuframes_publisher_acquire_slot(f.publisher, SIZED(slot)));
    CHECK(slot.index == 1 && slot.memory == CUFRAMES_MEMORY_HOST && slot.plane_count == 3);
    CHECK_STATUS(cuframes_publisher_acquire_slot(f.publisher, SIZED(slot)), CUFRAMES_ERR_INVALID_ARGUMENT);
    count = geometry(CUFRAMES_FORMAT_YUV420P, 33, 17, planes);
    for (p = 0; p < count; p++) {
        CHECK(slot.planes[p] != NULL && slot.pitches[p] == info.pitches[p]);
        for (row = 0; row < planes[p].rows; row++) {
            uint8_t *line = (uint8_t *)slot.planes[p] + row * slot.pitches[p];
            for (column = 0; column < planes[p].row_bytes; column++) {
                line[column] = pattern_byte(1, p, row, column);
            }
        }
    }
    CHECK_OK(cuframes_publisher_commit_slot(f.publisher, 99, &seq));
    CHECK(seq == 1);
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &frame));
    CHECK_OK(cuframes_frame_get_info(frame, SIZED(frame_info)));
    CHECK(frame_info.seq == 1 && frame_info.pts_ns == 99);
    CHECK(verify_frame(&frame_info, CUFRAMES_FORMAT_YUV420P, 33, 17) == 0);
    CHECK_OK(cuframes_frame_release(frame));
    fixture_teardown(&f);
    return 0;
}

/* ---- keys and peers ----------------------------------------------------- */

/* Making the CUDA context ahead of a subscription: a bad config is refused; a
 * good one starts it (here, without a driver, the attempt ends at once), and
 * warming_up turns false once it is over, also when it failed (a failed attempt
 * is not made again, so a caller that waits while it runs is not held forever). */
static int test_warm_up(void) {
    char key[64];
    cuframes_subscriber_config sconfig;
    unique_key(key, sizeof key, "warm");
    subscriber_config(&sconfig, key);
    CHECK_STATUS(cuframes_subscriber_warm_up(NULL), CUFRAMES_ERR_INVALID_ARGUMENT);
    sconfig.mode = 9;
    CHECK_STATUS(cuframes_subscriber_warm_up(&sconfig), CUFRAMES_ERR_INVALID_ARGUMENT);
    sconfig.mode = CUFRAMES_MODE_SEQUENTIAL;
    for (int round = 0; round < 2; round++) {
        CHECK_STATUS(cuframes_subscriber_warm_up(&sconfig), CUFRAMES_OK);
        int waited_ms = 0;
        while (cuframes_subscriber_warming_up() && waited_ms < 30000) {
            struct timespec pause = {0, 10 * 1000 * 1000};
            nanosleep(&pause, NULL);
            waited_ms += 10;
        }
        CHECK(!cuframes_subscriber_warming_up());
    }
    return 0;
}

static int test_missing_key_is_not_found(void) {
    char key[64];
    cuframes_subscriber_config sconfig;
    cuframes_subscriber *subscriber = SENTINEL(cuframes_subscriber);
    unique_key(key, sizeof key, "missing");
    subscriber_config(&sconfig, key);
    CHECK_STATUS(cuframes_subscriber_create(&sconfig, &subscriber), CUFRAMES_ERR_NOT_FOUND);
    CHECK(subscriber == SENTINEL(cuframes_subscriber));
    CHECK(strstr(cuframes_last_error(), key) != NULL);
    sconfig.key = NULL;
    CHECK_STATUS(cuframes_subscriber_create(&sconfig, &subscriber), CUFRAMES_ERR_INVALID_ARGUMENT);
    sconfig.key = key;
    sconfig.mode = 9;
    CHECK_STATUS(cuframes_subscriber_create(&sconfig, &subscriber), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(subscriber == SENTINEL(cuframes_subscriber));
    return 0;
}

static int test_publisher_destroy_disconnects(void) {
    fixture f;
    cuframes_frame *frame = SENTINEL(cuframes_frame);
    cuframes_subscriber_stats stats;
    cuframes_subscriber *refused = SENTINEL(cuframes_subscriber);
    fixture_init(&f, "bye", CUFRAMES_FORMAT_NV12, 33, 17);
    TRY(fixture_start(&f));
    fixture_destroy_publisher(&f);
    CHECK_STATUS(cuframes_subscriber_next(f.subscriber, 2000, &frame), CUFRAMES_ERR_DISCONNECTED);
    CHECK(frame == SENTINEL(cuframes_frame));
    CHECK(strstr(cuframes_last_error(), "shut down") != NULL);
    CHECK_STATUS(cuframes_subscriber_next(f.subscriber, -1, &frame), CUFRAMES_ERR_DISCONNECTED);
    memset(&stats, 0, sizeof stats);
    CHECK_OK(cuframes_subscriber_get_stats(f.subscriber, SIZED(stats)));
    CHECK(stats.publisher_shut_down == 1);
    fixture_destroy_subscriber(&f);
    /* The key is free again. */
    CHECK_STATUS(cuframes_subscriber_create(&f.sconfig, &refused), CUFRAMES_ERR_NOT_FOUND);
    TRY(fixture_create_publisher(&f));
    fixture_teardown(&f);
    return 0;
}

static int test_second_publisher_already_exists(void) {
    fixture f;
    cuframes_publisher *second = SENTINEL(cuframes_publisher);
    fixture_init(&f, "twice", CUFRAMES_FORMAT_NV12, 33, 17);
    TRY(fixture_create_publisher(&f));
    CHECK_STATUS(cuframes_publisher_create(&f.pconfig, &second), CUFRAMES_ERR_ALREADY_EXISTS);
    CHECK(second == SENTINEL(cuframes_publisher));
    CHECK(strstr(cuframes_last_error(), f.key) != NULL);
    fixture_teardown(&f);
    return 0;
}

static int test_32nd_subscriber_is_too_many(void) {
    fixture f;
    cuframes_subscriber *subscribers[31];
    cuframes_subscriber *extra = SENTINEL(cuframes_subscriber);
    int i;
    fixture_init(&f, "many", CUFRAMES_FORMAT_NV12, 33, 17);
    TRY(fixture_create_publisher(&f));
    for (i = 0; i < 31; i++) {
        CHECK_OK(cuframes_subscriber_create(&f.sconfig, &subscribers[i]));
    }
    CHECK(cuframes_publisher_subscriber_count(f.publisher) == 31);
    CHECK_STATUS(cuframes_subscriber_create(&f.sconfig, &extra), CUFRAMES_ERR_TOO_MANY);
    CHECK(extra == SENTINEL(cuframes_subscriber));
    CHECK(strstr(cuframes_last_error(), "too many subscribers") != NULL);
    for (i = 0; i < 31; i++) {
        cuframes_subscriber_destroy(subscribers[i]);
    }
    fixture_teardown(&f);
    return 0;
}

static int test_null_handles(void) {
    cuframes_stream_info info;
    cuframes_subscriber_stats stats;
    cuframes_frame_info frame_info;
    cuframes_frame *frame = SENTINEL(cuframes_frame);
    uint64_t seq = 5;
    CHECK_STATUS(cuframes_publisher_get_info(NULL, SIZED(info)), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "publisher is NULL") != NULL);
    CHECK_STATUS(cuframes_publisher_wait_subscribers(NULL, 0, 0), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_publisher_publish(NULL, CUFRAMES_MEMORY_HOST, NULL, NULL, 0, 0, &seq),
                 CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(seq == 5);
    CHECK_STATUS(cuframes_publisher_flush(NULL, 0), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_publisher_wait_delivered(NULL, 0), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(cuframes_publisher_subscriber_count(NULL) == 0);
    CHECK_STATUS(cuframes_subscriber_get_info(NULL, SIZED(info)), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_subscriber_next(NULL, 0, &frame), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(frame == SENTINEL(cuframes_frame));
    CHECK_STATUS(cuframes_subscriber_get_stats(NULL, SIZED(stats)), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_frame_get_info(NULL, SIZED(frame_info)), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_frame_is_intact(NULL), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_frame_release(NULL), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "frame is NULL") != NULL);
    cuframes_publisher_destroy(NULL);
    cuframes_subscriber_destroy(NULL);
    return 0;
}

/* Frame properties cross with each frame; NULL sets none; bad flags are refused. */
static int test_frame_props(void) {
    fixture f;
    cuframes_frame *frame = NULL;
    cuframes_frame_props hdr10, got, bad;
    source_frame source;
    memset(&hdr10, 0, sizeof hdr10);
    hdr10.color_range = 1;
    hdr10.color_primaries = 9;
    hdr10.color_trc = 16;
    hdr10.colorspace = 9;
    hdr10.chroma_location = 3;
    hdr10.flags = CUFRAMES_PROPS_KEY_FRAME;
    hdr10.sar_num = 1;
    hdr10.sar_den = 1;
    hdr10.duration_ns = 40000000;
    fixture_init(&f, "props", CUFRAMES_FORMAT_NV12, 33, 17);
    TRY(fixture_start(&f));
    CHECK(source_init(&source, CUFRAMES_FORMAT_NV12, 33, 17) == 0);

    CHECK_OK(cuframes_publisher_set_frame_props(f.publisher, SIZED(hdr10)));
    if (publish(f.publisher, &source, 1, 100) != 0) return 1;
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &frame));
    memset(&got, 0xff, sizeof got);
    CHECK(cuframes_frame_get_props(frame, SIZED(got)) == 1);
    CHECK(got.struct_size == sizeof got); /* the bytes written: all */
    CHECK(got.color_range == 1 && got.color_primaries == 9 && got.color_trc == 16 &&
          got.colorspace == 9 && got.chroma_location == 3 && got.pict_type == 0 &&
          got.flags == CUFRAMES_PROPS_KEY_FRAME && got.reserved == 0);
    CHECK(got.sar_num == 1 && got.sar_den == 1 && got.duration_ns == 40000000);
    CHECK_STATUS(cuframes_frame_get_props(frame, NULL), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_OK(cuframes_frame_release(frame));

    CHECK_OK(cuframes_publisher_set_frame_props(f.publisher, NULL));
    if (publish(f.publisher, &source, 2, 200) != 0) return 1;
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &frame));
    memset(&got, 0xab, sizeof got);
    CHECK(cuframes_frame_get_props(frame, SIZED(got)) == 0);
    CHECK(got.color_range == 0xab); /* untouched */
    CHECK_OK(cuframes_frame_release(frame));

    bad = hdr10;
    bad.flags = 0x80;
    CHECK_STATUS(cuframes_publisher_set_frame_props(f.publisher, SIZED(bad)), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "unknown bits") != NULL);
    CHECK_STATUS(cuframes_publisher_set_frame_props(NULL, SIZED(hdr10)), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_frame_get_props(NULL, SIZED(got)), CUFRAMES_ERR_INVALID_ARGUMENT);
    source_free(&source);
    fixture_teardown(&f);
    return 0;
}

/* Side data goes with the one frame it was added to, byte for byte and in order. */
static int test_side_data(void) {
    fixture f;
    cuframes_frame *frame = NULL;
    source_frame source;
    static const uint8_t cll[8] = {0xe8, 0x03, 0, 0, 0x90, 0x01, 0, 0}; /* 1000, 400 */
    static const uint8_t cc[6] = {0xfc, 0x94, 0x2c, 0xfc, 0x80, 0x80};
    static uint8_t big[CUFRAMES_SIDE_DATA_CAPACITY];
    cuframes_side_data_kind kind = 0;
    const uint8_t *data = NULL;
    size_t size = 0;
    fixture_init(&f, "side", CUFRAMES_FORMAT_NV12, 33, 17);
    TRY(fixture_start(&f));
    CHECK(source_init(&source, CUFRAMES_FORMAT_NV12, 33, 17) == 0);

    CHECK_OK(cuframes_publisher_add_side_data(f.publisher, CUFRAMES_SIDE_DATA_CONTENT_LIGHT_LEVEL, cll, sizeof cll));
    CHECK_OK(cuframes_publisher_add_side_data(f.publisher, CUFRAMES_SIDE_DATA_A53_CC, cc, sizeof cc));
    CHECK_OK(cuframes_publisher_add_side_data(f.publisher, 4242, NULL, 0));
    if (publish(f.publisher, &source, 1, 100) != 0) return 1;
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &frame));
    CHECK(cuframes_frame_get_side_data(frame, 0, &kind, &data, &size) == 1);
    CHECK(kind == CUFRAMES_SIDE_DATA_CONTENT_LIGHT_LEVEL && size == sizeof cll && memcmp(data, cll, size) == 0);
    CHECK(cuframes_frame_get_side_data(frame, 1, &kind, &data, &size) == 1);
    CHECK(kind == CUFRAMES_SIDE_DATA_A53_CC && size == sizeof cc && memcmp(data, cc, size) == 0);
    CHECK(cuframes_frame_get_side_data(frame, 2, &kind, &data, &size) == 1);
    CHECK(kind == 4242 && size == 0);
    kind = 77;
    CHECK(cuframes_frame_get_side_data(frame, 3, &kind, &data, &size) == 0);
    CHECK(kind == 77); /* untouched */
    CHECK_STATUS(cuframes_frame_get_side_data(frame, 0, NULL, &data, &size), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_OK(cuframes_frame_release(frame));

    /* The next frame has none of it. */
    if (publish(f.publisher, &source, 2, 200) != 0) return 1;
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 1000, &frame));
    CHECK(cuframes_frame_get_side_data(frame, 0, &kind, &data, &size) == 0);
    CHECK_OK(cuframes_frame_release(frame));

    /* Too much, kind 0, kinds above 16 bits, NULL data with a size, NULL handle. */
    CHECK_STATUS(cuframes_publisher_add_side_data(f.publisher, CUFRAMES_SIDE_DATA_SEI_UNREGISTERED, big, sizeof big),
                 CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "does not fit") != NULL);
    CHECK_STATUS(cuframes_publisher_add_side_data(f.publisher, 0, cc, sizeof cc), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_publisher_add_side_data(f.publisher, 65536, cc, sizeof cc), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_publisher_add_side_data(f.publisher, 3, NULL, 4), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_publisher_add_side_data(NULL, 3, cc, sizeof cc), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_frame_get_side_data(NULL, 0, &kind, &data, &size), CUFRAMES_ERR_INVALID_ARGUMENT);
    source_free(&source);
    fixture_teardown(&f);
    return 0;
}

/* cuframes_list_keys finds a live publisher with its stream; sizes and errors. */
static int test_list_keys(void) {
    fixture f;
    cuframes_key_info entries[64];
    size_t count = 0, found = 0;
    fixture_init(&f, "listed", CUFRAMES_FORMAT_YUV444P, 48, 32);
    TRY(fixture_create_publisher(&f));
    entries[0].struct_size = sizeof entries[0]; /* the size of every entry */
    CHECK_OK(cuframes_list_keys(runtime_dir(), entries, 64, &count));
    CHECK(count >= 1 && count <= 64);
    for (size_t i = 0; i < count; i++) {
        if (strcmp(entries[i].key, f.key) == 0) {
            found++;
            CHECK(entries[i].info.format == CUFRAMES_FORMAT_YUV444P);
            CHECK(entries[i].info.width == 48 && entries[i].info.height == 32);
            CHECK(entries[i].info.memory == CUFRAMES_MEMORY_HOST);
            CHECK(entries[i].struct_size == sizeof entries[i]);
            CHECK(entries[i].info.struct_size == sizeof entries[i].info);
        }
    }
    CHECK(found == 1);
    count = 0;
    CHECK_OK(cuframes_list_keys(runtime_dir(), NULL, 0, &count)); /* counting only */
    CHECK(count >= 1);
    CHECK_STATUS(cuframes_list_keys(runtime_dir(), NULL, 4, &count), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_list_keys(runtime_dir(), entries, 64, NULL), CUFRAMES_ERR_INVALID_ARGUMENT);
    entries[0].struct_size = 0; /* not set: refused */
    CHECK_STATUS(cuframes_list_keys(runtime_dir(), entries, 64, &count), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "entries->struct_size is 0") != NULL);
    entries[0].struct_size = sizeof entries[0];
    fixture_destroy_publisher(&f);
    count = 99;
    CHECK_OK(cuframes_list_keys(runtime_dir(), entries, 64, &count));
    for (size_t i = 0; i < count; i++)
        CHECK(strcmp(entries[i].key, f.key) != 0); /* gone with its publisher */
    return 0;
}

/* A program built against a newer header, whose structs are longer than
 * this library's (docs/c-api.md, "ABI policy"): _init zeroes the tail it does
 * not know, _create reads the known prefix and refuses a tail that is set,
 * out-structs get this library's bytes (struct_size says how many) and keep
 * their tail. */
typedef struct newer_publisher_config {
    cuframes_publisher_config known;
    uint64_t added[2];
} newer_publisher_config;

typedef struct newer_stream_info {
    cuframes_stream_info known;
    uint64_t added[2];
} newer_stream_info;

static int test_newer_header_structs(void) {
    char key[64];
    newer_publisher_config config;
    newer_stream_info info;
    cuframes_publisher *publisher = SENTINEL(cuframes_publisher);
    unique_key(key, sizeof key, "newer");
    memset(&config, 0xAB, sizeof config);
    CHECK_OK(cuframes_publisher_config_init_sized(&config.known, sizeof config));
    CHECK(config.known.struct_size == sizeof config);
    CHECK(config.added[0] == 0 && config.added[1] == 0); /* zeroed: unknown here */
    CHECK(config.known.ring_size == CUFRAMES_DEFAULT_RING_SIZE && config.known.v1_peers == CUFRAMES_V1_PEERS_SAME_USER);
    config.known.key = key;
    config.known.format = CUFRAMES_FORMAT_NV12;
    config.known.width = 32;
    config.known.height = 16;
    config.known.memory = CUFRAMES_MEMORY_HOST;
    config.known.runtime_dir = runtime_dir();
    config.added[1] = 1; /* a newer field set: refused, never ignored */
    CHECK_STATUS(cuframes_publisher_create(&config.known, &publisher), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "newer cuframes.h") != NULL);
    CHECK(publisher == SENTINEL(cuframes_publisher));
    config.known.v1_peers = 7; /* not a cuframes_v1_peers */
    config.added[1] = 0;
    CHECK_STATUS(cuframes_publisher_create(&config.known, &publisher), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "config.v1_peers") != NULL);
    config.known.v1_peers = CUFRAMES_V1_PEERS_SAME_USER;
    CHECK_OK(cuframes_publisher_create(&config.known, &publisher));

    memset(&info, 0xCD, sizeof info);
    info.known.struct_size = sizeof info;
    CHECK_OK(cuframes_publisher_get_info(publisher, &info.known));
    CHECK(info.known.struct_size == sizeof info.known); /* the bytes written */
    CHECK(info.known.width == 32 && info.known.height == 16 && info.known.reserved == 0);
    CHECK(info.added[0] == 0xCDCDCDCDCDCDCDCDull && info.added[1] == 0xCDCDCDCDCDCDCDCDull);
    info.known.struct_size = 5000; /* not a size: refused */
    CHECK_STATUS(cuframes_publisher_get_info(publisher, &info.known), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "larger than any cuframes struct") != NULL);
    cuframes_publisher_destroy(publisher);
    return 0;
}

/* ---- logging ------------------------------------------------------------ */

/* What one log callback saw (static: a sink that outlived a failed test must
 * not point into a dead stack frame). */
typedef struct log_record {
    int calls;
    int destroyed;     /* set once its object is destroyed */
    int after_destroy; /* calls that came after that */
    cuframes_log_level last_level;
    char last[1024];
    char all[4096]; /* every message, one per line, as long as they fit */
} log_record;

static log_record process_log, publisher_log, subscriber_log;

static void record_log(void *opaque, cuframes_log_level level, const char *message) {
    log_record *record = (log_record *)opaque;
    if (record->destroyed) {
        record->after_destroy++;
    }
    record->calls++;
    record->last_level = level;
    snprintf(record->last, sizeof record->last, "%s", message);
    strncat(record->all, message, sizeof record->all - strlen(record->all) - 2);
    strcat(record->all, "\n");
}

/* Every record empty, the process's sink on process_log, level INFO. */
static int log_setup(void) {
    memset(&process_log, 0, sizeof process_log);
    memset(&publisher_log, 0, sizeof publisher_log);
    memset(&subscriber_log, 0, sizeof subscriber_log);
    CHECK_OK(cuframes_set_log_level(CUFRAMES_LOG_INFO));
    CHECK_OK(cuframes_set_log_callback(record_log, &process_log));
    return 0;
}

/* Back to the defaults: standard error, level INFO. */
static void log_teardown(void) {
    (void)cuframes_set_log_callback(NULL, NULL);
    (void)cuframes_set_log_level(CUFRAMES_LOG_INFO);
}

/* What a crashed publisher of `key` leaves: a socket nobody listens on. The
 * next publisher of the key removes it, warning "key '<key>': removed what a
 * publisher that is gone left behind: <path>". */
static int plant_stale_socket(const char *key) {
    struct sockaddr_un address;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    snprintf(address.sun_path, sizeof address.sun_path, "%s/%s.sock", runtime_dir(), key);
    CHECK(bind(fd, (struct sockaddr *)&address, sizeof address) == 0);
    close(fd);
    return 0;
}

/* Whether `record` got exactly the stale-socket warning about `key`. */
static int got_stale_warning(const log_record *record, const char *key) {
    char want[128];
    snprintf(want, sizeof want, "key '%s': removed what a publisher that is gone left behind", key);
    CHECK(record->calls == 1 && record->last_level == CUFRAMES_LOG_WARNING);
    CHECK(strstr(record->last, want) != NULL && strstr(record->last, ".sock") != NULL);
    CHECK(strchr(record->last, '\n') == NULL);
    return 0;
}

/* A publisher's own callback gets the warning of its creation, with its
 * level; the process's sink gets nothing of it. */
static int test_log_callback_per_object(void) {
    fixture f;
    TRY(log_setup());
    fixture_init(&f, "logobj", CUFRAMES_FORMAT_NV12, 33, 17);
    f.pconfig.log_callback = record_log;
    f.pconfig.log_opaque = &publisher_log;
    TRY(plant_stale_socket(f.key));
    TRY(fixture_create_publisher(&f));
    TRY(got_stale_warning(&publisher_log, f.key));
    CHECK(process_log.calls == 0);
    fixture_teardown(&f);
    log_teardown();
    return 0;
}

/* Objects without a callback of their own, and library-wide calls, report
 * to the process's sink: the same warning, and cuframes_list_keys skipping a
 * regular file where a socket belongs. */
static int test_log_callback_process(void) {
    fixture f;
    char path[256];
    cuframes_key_info keys[8];
    size_t count = 0;
    FILE *junk;
    TRY(log_setup());
    fixture_init(&f, "logproc", CUFRAMES_FORMAT_NV12, 33, 17);
    TRY(plant_stale_socket(f.key));
    TRY(fixture_create_publisher(&f));
    TRY(got_stale_warning(&process_log, f.key));
    fixture_teardown(&f);

    memset(&process_log, 0, sizeof process_log);
    snprintf(path, sizeof path, "%s/c-junk-%ld.sock", runtime_dir(), (long)getpid());
    junk = fopen(path, "w");
    CHECK(junk != NULL);
    fclose(junk);
    keys[0].struct_size = sizeof keys[0];
    CHECK_OK(cuframes_list_keys(runtime_dir(), keys, 8, &count));
    remove(path);
    /* (Other names in /dev/shm, anyone's, may be skipped too.) */
    CHECK(strstr(process_log.all, "not listed: ") != NULL && strstr(process_log.all, path) != NULL);
    log_teardown();
    return 0;
}

/* cuframes_list_keys_logged: the listing's messages go to the callback of
 * the call, not to the process's sink; a NULL callback means that sink. */
static int test_list_keys_logged(void) {
    char path[256];
    cuframes_key_info keys[8];
    size_t count = 0;
    FILE *junk;
    TRY(log_setup());
    snprintf(path, sizeof path, "%s/c-junk2-%ld.sock", runtime_dir(), (long)getpid());
    junk = fopen(path, "w");
    CHECK(junk != NULL);
    fclose(junk);
    keys[0].struct_size = sizeof keys[0];
    CHECK_OK(cuframes_list_keys_logged(runtime_dir(), keys, 8, &count, record_log, &subscriber_log));
    CHECK(strstr(subscriber_log.all, "not listed: ") != NULL && strstr(subscriber_log.all, path) != NULL);
    CHECK(subscriber_log.last_level == CUFRAMES_LOG_WARNING);
    CHECK(strstr(process_log.all, path) == NULL);
    CHECK_OK(cuframes_list_keys_logged(runtime_dir(), keys, 8, &count, NULL, NULL));
    CHECK(strstr(process_log.all, "not listed: ") != NULL && strstr(process_log.all, path) != NULL);
    CHECK_STATUS(cuframes_list_keys_logged(runtime_dir(), keys, 8, NULL, record_log, &subscriber_log),
                 CUFRAMES_ERR_INVALID_ARGUMENT);
    remove(path);
    log_teardown();
    return 0;
}

/* Below the maximum level nothing is produced, for any sink. */
static int test_log_level_filters(void) {
    fixture f;
    TRY(log_setup());
    CHECK_OK(cuframes_set_log_level(CUFRAMES_LOG_ERROR));
    fixture_init(&f, "loglevel", CUFRAMES_FORMAT_NV12, 33, 17);
    f.pconfig.log_callback = record_log;
    f.pconfig.log_opaque = &publisher_log;
    TRY(plant_stale_socket(f.key));
    TRY(fixture_create_publisher(&f));
    CHECK(publisher_log.calls == 0 && process_log.calls == 0);
    fixture_teardown(&f);
    CHECK_STATUS(cuframes_set_log_level(4), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "log level 4") != NULL);
    CHECK(CUFRAMES_LOG_ERROR == 0 && CUFRAMES_LOG_WARNING == 1 && CUFRAMES_LOG_INFO == 2 &&
          CUFRAMES_LOG_DEBUG == 3);
    log_teardown();
    return 0;
}

/* NULL restores the default: "cuframes: <message>" on standard error. */
static int test_log_null_restores_stderr(void) {
    fixture f;
    char path[] = "/tmp/cuframes-ctest-stderr-XXXXXX";
    char text[2048];
    char want[160];
    ssize_t length;
    int saved, capture;
    TRY(log_setup());
    CHECK_OK(cuframes_set_log_callback(NULL, NULL));
    fixture_init(&f, "logstderr", CUFRAMES_FORMAT_NV12, 33, 17);
    TRY(plant_stale_socket(f.key));
    capture = mkstemp(path);
    CHECK(capture >= 0);
    fflush(stderr);
    saved = dup(STDERR_FILENO);
    CHECK(saved >= 0 && dup2(capture, STDERR_FILENO) >= 0);
    {
        cuframes_status status = cuframes_publisher_create(&f.pconfig, &f.publisher);
        dup2(saved, STDERR_FILENO);
        close(saved);
        CHECK_OK(status);
    }
    length = pread(capture, text, sizeof text - 1, 0);
    close(capture);
    unlink(path);
    CHECK(length > 0);
    text[length] = '\0';
    snprintf(want, sizeof want, "cuframes: key '%s': removed what a publisher that is gone left behind", f.key);
    CHECK(strstr(text, want) != NULL);
    CHECK(process_log.calls == 0);
    fixture_teardown(&f);
    log_teardown();
    return 0;
}

/* An object's callback is never called once its _destroy has returned: a
 * frame released after its subscriber is gone, a publisher destroyed with
 * a frame still held (read-ahead: a library thread of the subscriber's). */
static int test_log_callback_not_after_destroy(void) {
    fixture f;
    cuframes_frame *frame = NULL;
    source_frame source;
    TRY(log_setup());
    fixture_init(&f, "logdestroy", CUFRAMES_FORMAT_NV12, 33, 17);
    f.pconfig.log_callback = record_log;
    f.pconfig.log_opaque = &publisher_log;
    f.sconfig.log_callback = record_log;
    f.sconfig.log_opaque = &subscriber_log;
    f.sconfig.read_ahead = 4;
    TRY(plant_stale_socket(f.key));
    TRY(fixture_start(&f));
    TRY(got_stale_warning(&publisher_log, f.key));
    CHECK(source_init(&source, CUFRAMES_FORMAT_NV12, 33, 17) == 0);
    if (publish(f.publisher, &source, 1, 0) != 0) {
        return 1;
    }
    CHECK_OK(cuframes_subscriber_next(f.subscriber, 2000, &frame));
    fixture_destroy_subscriber(&f);
    subscriber_log.destroyed = 1;
    if (publish(f.publisher, &source, 2, 1) != 0) {
        return 1;
    }
    CHECK(cuframes_frame_release(frame) == CUFRAMES_OK);
    fixture_destroy_publisher(&f);
    publisher_log.destroyed = 1;
    source_free(&source);
    CHECK(subscriber_log.after_destroy == 0 && publisher_log.after_destroy == 0);
    log_teardown();
    return 0;
}

/* A config of 0.2.0's size (an older program's: no log fields) is read
 * without them: the bytes past its struct_size, where log_callback lies in
 * this header, are not read; its messages go to the process's sink. */
static int test_log_fields_past_an_old_struct_size(void) {
    fixture f;
    const size_t old_size = offsetof(cuframes_publisher_config, log_callback);
    TRY(log_setup());
    fixture_init(&f, "logold", CUFRAMES_FORMAT_NV12, 33, 17);
    CHECK_OK(cuframes_publisher_config_init_sized(&f.pconfig, old_size));
    CHECK(f.pconfig.struct_size == old_size);
#if UINTPTR_MAX > 0xFFFFFFFFu
    CHECK(old_size == 112);
#endif
    f.pconfig.key = f.key;
    f.pconfig.format = CUFRAMES_FORMAT_NV12;
    f.pconfig.width = 33;
    f.pconfig.height = 17;
    f.pconfig.memory = CUFRAMES_MEMORY_HOST;
    f.pconfig.runtime_dir = runtime_dir();
    f.pconfig.log_callback = record_log; /* past struct_size: not this program's field */
    f.pconfig.log_opaque = &publisher_log;
    TRY(plant_stale_socket(f.key));
    TRY(fixture_create_publisher(&f));
    CHECK(publisher_log.calls == 0);
    TRY(got_stale_warning(&process_log, f.key));
    /* Between the two layouts: no header's struct. */
    f.sconfig.struct_size = (uint32_t)offsetof(cuframes_subscriber_config, log_opaque);
    CHECK_STATUS(cuframes_subscriber_create(&f.sconfig, &f.subscriber), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK(strstr(cuframes_last_error(), "not the size of a published layout") != NULL);
    fixture_teardown(&f);
    log_teardown();
    return 0;
}

int main(int argc, char **argv) {
    static const test_case tests[] = {
        {"version_protocol_strerror", test_version_protocol_strerror},
        {"validate_key", test_validate_key},
        {"config_init_defaults", test_config_init_defaults},
        {"publisher_bad_config", test_publisher_bad_config},
        {"round_trip_nv12", test_round_trip_nv12},
        {"round_trip_yuv420p", test_round_trip_yuv420p},
        {"round_trip_p010", test_round_trip_p010},
        {"round_trip_bgra", test_round_trip_bgra},
        {"round_trip_p016", test_round_trip_p016},
        {"round_trip_yuv444p", test_round_trip_yuv444p},
        {"round_trip_yuv444p16", test_round_trip_yuv444p16},
        {"round_trip_packed_rgb", test_round_trip_packed_rgb},
        {"round_trip_d36_formats", test_round_trip_d36_formats},
        {"yuva420p_alpha_takes_pitch_y", test_yuva420p_alpha_takes_pitch_y},
        {"next_timeout_on_empty_ring", test_next_timeout_on_empty_ring},
        {"drop_oldest_overwrite_is_reported", test_drop_oldest_overwrite_is_reported},
        {"auto_copy_holds_more_than_the_ring", test_auto_copy_holds_more_than_the_ring},
        {"frame_props", test_frame_props},
        {"side_data", test_side_data},
        {"list_keys", test_list_keys},
        {"frame_outlives_subscriber", test_frame_outlives_subscriber},
        {"flush_waits_for_held_frames", test_flush_waits_for_held_frames},
        {"wait_delivered_needs_take_not_release", test_wait_delivered_needs_take_not_release},
        {"latest_mode_skips_to_the_newest", test_latest_mode_skips_to_the_newest},
        {"publish_argument_errors", test_publish_argument_errors},
        {"acquire_commit_in_place", test_acquire_commit_in_place},
        {"missing_key_is_not_found", test_missing_key_is_not_found},
        {"warm_up", test_warm_up},
        {"publisher_destroy_disconnects", test_publisher_destroy_disconnects},
        {"second_publisher_already_exists", test_second_publisher_already_exists},
        {"32nd_subscriber_is_too_many", test_32nd_subscriber_is_too_many},
        {"null_handles", test_null_handles},
        {"newer_header_structs", test_newer_header_structs},
        {"log_callback_per_object", test_log_callback_per_object},
        {"log_callback_process", test_log_callback_process},
        {"list_keys_logged", test_list_keys_logged},
        {"log_level_filters", test_log_level_filters},
        {"log_null_restores_stderr", test_log_null_restores_stderr},
        {"log_callback_not_after_destroy", test_log_callback_not_after_destroy},
        {"log_fields_past_an_old_struct_size", test_log_fields_past_an_old_struct_size},
    };
    int status = run_tests(tests, sizeof tests / sizeof tests[0], argc, argv);
    remove_runtime_dir();
    return status;
}
