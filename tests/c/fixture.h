/*
 * The set-up the C API tests share: a fresh key, configs for a host-memory
 * stream in the private runtime directory, the publisher and the subscriber
 * made from them, and their teardown. Header-only (static inline) like
 * common.h, so each test still builds as one file (scripts/test-c.sh, and
 * scripts/gpu-test.sh for test_cuda.c). Uses only the 0.2.0 API, as common.h
 * (test_abi.c builds against that header). Compiles as C99 and as C++.
 *
 *     fixture f;
 *     fixture_init(&f, "tag", CUFRAMES_FORMAT_NV12, 33, 17);
 *     f.pconfig.ring_size = 2;              (any change before the creation)
 *     TRY(fixture_start(&f));               (publisher, then subscriber)
 *     ... f.publisher, f.subscriber ...
 *     fixture_teardown(&f);
 *
 * A helper that fails has printed why (CHECK); TRY returns 1 from the test.
 */
#ifndef CUFRAMES_TEST_FIXTURE_H
#define CUFRAMES_TEST_FIXTURE_H

#include "common.h"

/* Returns 1 from the calling test when `expr`, a helper that printed why,
 * is not 0. */
#define TRY(expr)                                                                          \
    do {                                                                                   \
        if ((expr) != 0) {                                                                 \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

/* A publisher config from _init: `key`, the format and size, host memory,
 * the private runtime directory. */
static inline void publisher_config(cuframes_publisher_config *config, const char *key,
                                    cuframes_format format, uint32_t width, uint32_t height) {
    cuframes_publisher_config_init(config);
    config->key = key;
    config->format = format;
    config->width = width;
    config->height = height;
    config->memory = CUFRAMES_MEMORY_HOST;
    config->runtime_dir = runtime_dir();
}

/* A subscriber config from _init: `key`, the private runtime directory, and
 * the shared slots without a read-ahead thread (copy NEVER, read_ahead 0):
 * these tests are about the slots; copies and read-ahead, the defaults since
 * 0.3, are asked for by the tests of them. */
static inline void subscriber_config(cuframes_subscriber_config *config, const char *key) {
    cuframes_subscriber_config_init(config);
    config->key = key;
    config->runtime_dir = runtime_dir();
    config->copy = CUFRAMES_COPY_NEVER;
    config->read_ahead = 0;
}

/* One stream: its key, both configs, and the handles made from them (NULL
 * until made, and again once destroyed). */
typedef struct fixture {
    char key[64];
    cuframes_publisher_config pconfig;
    cuframes_subscriber_config sconfig;
    cuframes_publisher *publisher;
    cuframes_subscriber *subscriber;
} fixture;

/* A fresh key from `tag` and both configs for it; makes nothing. The
 * configs are written by _init only (bytes set before stay where _init
 * does not write). */
static inline void fixture_init(fixture *f, const char *tag, cuframes_format format, uint32_t width,
                                uint32_t height) {
    unique_key(f->key, sizeof f->key, tag);
    publisher_config(&f->pconfig, f->key, format, width, height);
    subscriber_config(&f->sconfig, f->key);
    f->publisher = NULL;
    f->subscriber = NULL;
}

/* The publisher, from f->pconfig. */
static inline int fixture_create_publisher(fixture *f) {
    CHECK_OK(cuframes_publisher_create(&f->pconfig, &f->publisher));
    return 0;
}

/* The subscriber, from f->sconfig. */
static inline int fixture_create_subscriber(fixture *f) {
    CHECK_OK(cuframes_subscriber_create(&f->sconfig, &f->subscriber));
    return 0;
}

/* The publisher, then the subscriber. */
static inline int fixture_start(fixture *f) {
    TRY(fixture_create_publisher(f));
    TRY(fixture_create_subscriber(f));
    return 0;
}

static inline void fixture_destroy_subscriber(fixture *f) {
    cuframes_subscriber_destroy(f->subscriber);
    f->subscriber = NULL;
}

static inline void fixture_destroy_publisher(fixture *f) {
    cuframes_publisher_destroy(f->publisher);
    f->publisher = NULL;
}

/* The subscriber, then the publisher (either may be gone already). */
static inline void fixture_teardown(fixture *f) {
    fixture_destroy_subscriber(f);
    fixture_destroy_publisher(f);
}

#endif /* CUFRAMES_TEST_FIXTURE_H */
