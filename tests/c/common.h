/*
 * Helpers for the C API tests: a tiny test runner, status checks that print
 * cuframes_last_error(), a private runtime directory, unique keys, plane
 * geometry and a test pattern. Uses only <cuframes.h> and POSIX; compiles as
 * C99 and as C++.
 */
#ifndef CUFRAMES_TEST_COMMON_H
#define CUFRAMES_TEST_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuframes.h>

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s (last error: \"%s\")\n", __FILE__,    \
                    __LINE__, #cond, cuframes_last_error());                               \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

#define CHECK_STATUS(expr, want)                                                           \
    do {                                                                                   \
        cuframes_status got_ = (expr);                                                     \
        if (got_ != (want)) {                                                              \
            fprintf(stderr, "%s:%d: %s returned %d (%s), want %d (%s); last error: \"%s\"\n", \
                    __FILE__, __LINE__, #expr, (int)got_, cuframes_strerror(got_),         \
                    (int)(want), cuframes_strerror(want), cuframes_last_error());          \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, CUFRAMES_OK)

/* A struct to pass to the library, its struct_size set to this header's
 * sizeof (docs/c-api.md, "ABI policy"): `cuframes_frame_get_info(f, SIZED(info))`. */
#define SIZED(var) ((var).struct_size = (uint32_t)sizeof(var), &(var))

/* A failed call must leave a message. */
#define CHECK_MESSAGE()                                                                    \
    CHECK(cuframes_last_error() != NULL && cuframes_last_error()[0] != '\0')

typedef int (*test_fn)(void);

typedef struct test_case {
    const char *name;
    test_fn run;
} test_case;

/* What a test returns when this machine cannot run its subject (no GPU,
 * say): counted as skipped, never as passed. Automake's code for it. */
#define TEST_SKIPPED 77

/* Returns TEST_SKIPPED from the test, saying why. */
#define SKIP(why)                                                                          \
    do {                                                                                   \
        printf("        skipped: %s\n", (why));                                            \
        return TEST_SKIPPED;                                                               \
    } while (0)

/* Runs every test (or the one named by argv[1]); prints one line each and
 * a summary "N passed, M failed, K skipped"; returns the exit status. */
static inline int run_tests(const test_case *tests, size_t count, int argc, char **argv) {
    int passed = 0;
    int failed = 0;
    int skipped = 0;
    size_t i;
    for (i = 0; i < count; i++) {
        int result;
        if (argc > 1 && strcmp(argv[1], tests[i].name) != 0) {
            continue;
        }
        fflush(stdout);
        result = tests[i].run();
        if (result == 0) {
            printf("ok      %s\n", tests[i].name);
            passed++;
        } else if (result == TEST_SKIPPED) {
            printf("skip    %s\n", tests[i].name);
            skipped++;
        } else {
            printf("FAILED  %s\n", tests[i].name);
            failed++;
        }
        fflush(stdout);
    }
    if (passed + failed + skipped == 0) {
        fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "(none)");
        return 2;
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed == 0 ? 0 : 1;
}

/* The private runtime directory (mkdtemp), made once per process. */
static char test_runtime_dir[64];

static inline const char *runtime_dir(void) {
    if (test_runtime_dir[0] == '\0') {
        strcpy(test_runtime_dir, "/tmp/cuframes-ctest-XXXXXX");
        if (mkdtemp(test_runtime_dir) == NULL) {
            perror("mkdtemp");
            exit(2);
        }
    }
    return test_runtime_dir;
}

/* Removes the runtime directory's leftovers (sockets and locks are removed by
 * the publishers; this is for a test that failed half-way). */
static inline void remove_runtime_dir(void) {
    if (test_runtime_dir[0] != '\0') {
        char command[128];
        snprintf(command, sizeof command, "rm -rf '%s'", test_runtime_dir);
        if (system(command) != 0) {
            fprintf(stderr, "could not remove %s\n", test_runtime_dir);
        }
    }
}

/* A key unique to this process and call: shm names are global. */
static inline const char *unique_key(char *buffer, size_t size, const char *tag) {
    static int next = 0;
    snprintf(buffer, size, "c%ld-%s-%d", (long)getpid(), tag, next++);
    return buffer;
}

/* Bytes per row and rows of each plane, as the caller of the library knows
 * them for its format; returns the plane count. */
typedef struct plane_geometry {
    size_t row_bytes;
    size_t rows;
} plane_geometry;

static inline uint32_t geometry(cuframes_format format, uint32_t width, uint32_t height,
                         plane_geometry *planes) {
    size_t cw = (width + 1) / 2;
    size_t ch = (height + 1) / 2;
    switch (format) {
    case CUFRAMES_FORMAT_NV12:
        planes[0].row_bytes = width, planes[0].rows = height;
        planes[1].row_bytes = 2 * cw, planes[1].rows = ch;
        return 2;
    case CUFRAMES_FORMAT_YUV420P:
        planes[0].row_bytes = width, planes[0].rows = height;
        planes[1].row_bytes = cw, planes[1].rows = ch;
        planes[2].row_bytes = cw, planes[2].rows = ch;
        return 3;
    case CUFRAMES_FORMAT_P010:
        planes[0].row_bytes = 2 * (size_t)width, planes[0].rows = height;
        planes[1].row_bytes = 4 * cw, planes[1].rows = ch;
        return 2;
    case CUFRAMES_FORMAT_BGRA:
    case CUFRAMES_FORMAT_RGBA:
    case CUFRAMES_FORMAT_BGR0:
    case CUFRAMES_FORMAT_RGB0:
        planes[0].row_bytes = 4 * (size_t)width, planes[0].rows = height;
        return 1;
    case CUFRAMES_FORMAT_P016:
        planes[0].row_bytes = 2 * (size_t)width, planes[0].rows = height;
        planes[1].row_bytes = 4 * cw, planes[1].rows = ch;
        return 2;
    case CUFRAMES_FORMAT_YUV444P:
    case CUFRAMES_FORMAT_YUV444P16: {
        size_t bytes = format == CUFRAMES_FORMAT_YUV444P ? 1 : 2;
        for (int p = 0; p < 3; p++)
            planes[p].row_bytes = bytes * width, planes[p].rows = height;
        return 3;
    }
#ifdef CUFRAMES_FORMAT_YUVA420P /* the formats of 0.3 (D36); not in tests/c/abi's header */
    case CUFRAMES_FORMAT_P012:
        planes[0].row_bytes = 2 * (size_t)width, planes[0].rows = height;
        planes[1].row_bytes = 4 * cw, planes[1].rows = ch;
        return 2;
    case CUFRAMES_FORMAT_NV16:
        planes[0].row_bytes = width, planes[0].rows = height;
        planes[1].row_bytes = 2 * cw, planes[1].rows = height;
        return 2;
    case CUFRAMES_FORMAT_P210:
    case CUFRAMES_FORMAT_P212:
    case CUFRAMES_FORMAT_P216:
        planes[0].row_bytes = 2 * (size_t)width, planes[0].rows = height;
        planes[1].row_bytes = 4 * cw, planes[1].rows = height;
        return 2;
    case CUFRAMES_FORMAT_YUV422P:
    case CUFRAMES_FORMAT_YUV420P10:
    case CUFRAMES_FORMAT_YUV422P10: {
        size_t bytes = format == CUFRAMES_FORMAT_YUV422P ? 1 : 2;
        size_t chroma_rows = format == CUFRAMES_FORMAT_YUV420P10 ? ch : height;
        planes[0].row_bytes = bytes * width, planes[0].rows = height;
        for (int p = 1; p < 3; p++)
            planes[p].row_bytes = bytes * cw, planes[p].rows = chroma_rows;
        return 3;
    }
    case CUFRAMES_FORMAT_YUV444P10:
    case CUFRAMES_FORMAT_YUV444P10MSB:
    case CUFRAMES_FORMAT_YUV444P12MSB:
        for (int p = 0; p < 3; p++)
            planes[p].row_bytes = 2 * (size_t)width, planes[p].rows = height;
        return 3;
    case CUFRAMES_FORMAT_YUVA420P:
        planes[0].row_bytes = width, planes[0].rows = height;
        planes[1].row_bytes = cw, planes[1].rows = ch;
        planes[2].row_bytes = cw, planes[2].rows = ch;
        planes[3].row_bytes = width, planes[3].rows = height;
        return 4;
#endif
    default:
        return 0;
    }
}

/* The test pattern: a byte for frame seq, plane, row and column. */
static inline uint8_t pattern_byte(uint64_t seq, uint32_t plane, size_t row, size_t column) {
    return (uint8_t)(seq * 13u + plane * 71u + row * 7u + column * 3u);
}

/* Source frame buffers in C memory, with a pitch wider than the rows. */
typedef struct source_frame {
    uint32_t plane_count;
    plane_geometry geometry[CUFRAMES_MAX_PLANES];
    uint8_t *data[CUFRAMES_MAX_PLANES];
    const void *planes[CUFRAMES_MAX_PLANES];
    size_t pitches[CUFRAMES_MAX_PLANES];
} source_frame;

static inline int source_init(source_frame *frame, cuframes_format format, uint32_t width,
                       uint32_t height) {
    uint32_t p;
    memset(frame, 0, sizeof *frame);
    frame->plane_count = geometry(format, width, height, frame->geometry);
    for (p = 0; p < frame->plane_count; p++) {
        size_t pitch = frame->geometry[p].row_bytes + 13 + p; /* odd padding */
        frame->pitches[p] = pitch;
        frame->data[p] = (uint8_t *)malloc(pitch * frame->geometry[p].rows);
        if (frame->data[p] == NULL) {
            return 1;
        }
        memset(frame->data[p], 0xEE, pitch * frame->geometry[p].rows);
        frame->planes[p] = frame->data[p];
    }
    return frame->plane_count == 0;
}

/* Writes the pattern of frame `seq` (padding keeps 0xEE). */
static inline void source_fill(source_frame *frame, uint64_t seq) {
    uint32_t p;
    size_t row, column;
    for (p = 0; p < frame->plane_count; p++) {
        for (row = 0; row < frame->geometry[p].rows; row++) {
            uint8_t *line = frame->data[p] + row * frame->pitches[p];
            for (column = 0; column < frame->geometry[p].row_bytes; column++) {
                line[column] = pattern_byte(seq, p, row, column);
            }
        }
    }
}

static inline void source_free(source_frame *frame) {
    uint32_t p;
    for (p = 0; p < CUFRAMES_MAX_PLANES; p++) {
        free(frame->data[p]);
        frame->data[p] = NULL;
    }
}

/* Checks a received frame against the pattern of its seq, row by row, and
 * its geometry against what the publisher's caller knows. */
static inline int verify_frame(const cuframes_frame_info *info, cuframes_format format, uint32_t width,
                        uint32_t height) {
    plane_geometry want[CUFRAMES_MAX_PLANES];
    uint32_t p;
    size_t row, column;
    uint32_t count = geometry(format, width, height, want);
    CHECK(info->format == format && info->width == width && info->height == height);
    CHECK(info->memory == CUFRAMES_MEMORY_HOST);
    CHECK(info->plane_count == count);
    for (p = 0; p < count; p++) {
        CHECK(info->planes[p] != NULL);
        CHECK(info->row_bytes[p] == want[p].row_bytes);
        CHECK(info->rows[p] == want[p].rows);
        CHECK(info->pitches[p] >= info->row_bytes[p]);
        for (row = 0; row < want[p].rows; row++) {
            const uint8_t *line = (const uint8_t *)info->planes[p] + row * info->pitches[p];
            for (column = 0; column < want[p].row_bytes; column++) {
                if (line[column] != pattern_byte(info->seq, p, row, column)) {
                    fprintf(stderr, "seq %llu plane %u row %zu column %zu: %u, want %u\n",
                            (unsigned long long)info->seq, p, row, column, line[column],
                            pattern_byte(info->seq, p, row, column));
                    return 1;
                }
            }
        }
    }
    for (; p < CUFRAMES_MAX_PLANES; p++) {
        CHECK(info->planes[p] == NULL && info->pitches[p] == 0 && info->rows[p] == 0);
    }
    return 0;
}

#endif /* CUFRAMES_TEST_COMMON_H */
