/*
 * The CUDA path of the C API, as a C program sees it. The CUDA driver is
 * loaded with dlopen (this file needs no CUDA headers to build), so the same
 * binary runs everywhere:
 *   - with a GPU: publishers in CUDA memory (device planes copied device to
 *     device; EXTERNAL slots published without a copy; host slots filled
 *     from device planes), read by a subscriber in a forked process that
 *     maps the slots and checks every byte; a context the library starts
 *     reserves no per-thread stack, one the caller made keeps its own;
 *   - without one: asking for CUDA memory fails with a status and a
 *     message, and AUTO falls back to host memory.
 * Forks happen before any CUDA call in either process (CUDA does not
 * survive fork). Compiles as C99 and as C++.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include "fixture.h"

#define FRAMES 60
#define WIDTH 1280
#define HEIGHT 720
#define RING 4
#define FORMAT CUFRAMES_FORMAT_NV12

/* ---- the few driver calls the tests make, loaded at run time ---------- */

typedef int cu_result; /* CUresult: 0 = CUDA_SUCCESS */
typedef int cu_device;
typedef void *cu_context;
typedef unsigned long long cu_deviceptr;

static struct cuda_driver {
    void *library;
    cu_result (*init)(unsigned int);
    cu_result (*device_get_count)(int *);
    cu_result (*device_get)(cu_device *, int);
    cu_result (*primary_ctx_retain)(cu_context *, cu_device);
    cu_result (*ctx_set_current)(cu_context);
    cu_result (*ctx_synchronize)(void);
    cu_result (*mem_alloc)(cu_deviceptr *, size_t);
    cu_result (*mem_free)(cu_deviceptr);
    cu_result (*memcpy_htod)(cu_deviceptr, const void *, size_t);
    cu_result (*memcpy_dtoh)(void *, cu_deviceptr, size_t);
    cu_result (*mem_get_address_range)(cu_deviceptr *, size_t *, cu_deviceptr);
    cu_result (*ctx_get_limit)(size_t *, int);
} cu;

/* Loads the symbol or fails the load (casting through a union keeps
 * -pedantic quiet about object-to-function pointer conversion). */
#define LOAD(field, name)                                                                  \
    do {                                                                                   \
        union {                                                                            \
            void *object;                                                                  \
            __typeof__(cu.field) function;                                                 \
        } symbol_;                                                                         \
        symbol_.object = dlsym(cu.library, name);                                          \
        if (symbol_.object == NULL) {                                                      \
            fprintf(stderr, "libcuda.so.1 lacks %s\n", name);                              \
            return 0;                                                                      \
        }                                                                                  \
        cu.field = symbol_.function;                                                       \
    } while (0)

/* 1 when a CUDA driver and at least one device are usable. Initialises the
 * driver in this process: call it only after any fork. */
static int cuda_usable(void) {
    int devices = 0;
    if (cu.library == NULL) {
        cu.library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (cu.library == NULL) {
            return 0;
        }
    }
    LOAD(init, "cuInit");
    LOAD(device_get_count, "cuDeviceGetCount");
    LOAD(device_get, "cuDeviceGet");
    LOAD(primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    LOAD(ctx_set_current, "cuCtxSetCurrent");
    LOAD(ctx_synchronize, "cuCtxSynchronize");
    LOAD(mem_alloc, "cuMemAlloc_v2");
    LOAD(mem_free, "cuMemFree_v2");
    LOAD(memcpy_htod, "cuMemcpyHtoD_v2");
    LOAD(memcpy_dtoh, "cuMemcpyDtoH_v2");
    LOAD(mem_get_address_range, "cuMemGetAddressRange_v2");
    LOAD(ctx_get_limit, "cuCtxGetLimit");
    return cu.init(0) == 0 && cu.device_get_count(&devices) == 0 && devices > 0;
}

#define CHECK_CU(expr)                                                                     \
    do {                                                                                   \
        cu_result r_ = (expr);                                                             \
        if (r_ != 0) {                                                                     \
            fprintf(stderr, "%s:%d: %s: CUresult %d\n", __FILE__, __LINE__, #expr, r_);    \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

/* Device 0's primary context, current on this thread. */
static int bind_device0(void) {
    cu_device device;
    cu_context context;
    CHECK_CU(cu.device_get(&device, 0));
    CHECK_CU(cu.primary_ctx_retain(&context, device));
    CHECK_CU(cu.ctx_set_current(context));
    return 0;
}

/* Whether this process has a GPU: decided once, in the parent before any
 * fork, by a probe child (so the parent itself never initialises CUDA
 * before forking). */
static int have_gpu = -1;

static int probe_gpu(void) {
    pid_t child = fork();
    int status = 0;
    if (child == 0) {
        _exit(cuda_usable() ? 0 : 1);
    }
    if (child < 0 || waitpid(child, &status, 0) != child) {
        return 0;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ---- helpers ---------------------------------------------------------- */

/* Reads a device plane back and checks it against the pattern of `seq`. */
static int verify_device_plane(cu_deviceptr plane, size_t pitch, size_t row_bytes, size_t rows,
                               uint64_t seq, uint32_t index) {
    size_t bytes = pitch * (rows - 1) + row_bytes;
    uint8_t *host = (uint8_t *)malloc(bytes);
    size_t row, column;
    CHECK(host != NULL);
    if (cu.memcpy_dtoh(host, plane, bytes) != 0) {
        free(host);
        CHECK(!"cuMemcpyDtoH of a leased plane");
    }
    for (row = 0; row < rows; row++) {
        for (column = 0; column < row_bytes; column++) {
            uint8_t got = host[row * pitch + column];
            if (got != pattern_byte(seq, index, row, column)) {
                fprintf(stderr, "seq %llu plane %u row %zu column %zu: %u, want %u\n",
                        (unsigned long long)seq, index, row, column, got,
                        pattern_byte(seq, index, row, column));
                free(host);
                return 1;
            }
        }
    }
    free(host);
    return 0;
}

/* The subscriber side, run in a forked child: reads FRAMES frames, checks
 * each one's bytes and (CUDA memory) that its planes are inside at most
 * RING device allocations: the mapped slots, not per-frame copies. */
static int subscriber_main(const char *key, cuframes_memory want_memory) {
    cuframes_subscriber_config config;
    cuframes_subscriber *subscriber = NULL;
    cuframes_frame *frame = NULL;
    cuframes_status status;
    cu_deviceptr bases[RING + 1];
    size_t base_count = 0;
    uint64_t want_seq;
    int tries;
    CHECK(cuda_usable());
    CHECK(bind_device0() == 0);
    subscriber_config(&config, key);
    config.name = "c-cuda";
    config.cuda_device = 0;
    for (tries = 0;; tries++) {
        status = cuframes_subscriber_create(&config, &subscriber);
        if (status == CUFRAMES_OK || tries > 200) {
            break;
        }
        {
            struct timespec pause = {0, 20000000L};
            nanosleep(&pause, NULL);
        }
    }
    CHECK_OK(status);
    for (want_seq = 1; want_seq <= FRAMES; want_seq++) {
        cuframes_frame_info info;
        uint32_t p;
        CHECK_OK(cuframes_subscriber_next(subscriber, 10000, &frame));
        CHECK_OK(cuframes_frame_get_info(frame, SIZED(info)));
        CHECK(info.seq == want_seq);
        CHECK(info.memory == want_memory);
        if (want_memory == CUFRAMES_MEMORY_HOST) {
            CHECK(verify_frame(&info, FORMAT, WIDTH, HEIGHT) == 0);
        } else {
            cu_deviceptr base = 0;
            size_t size = 0;
            size_t i;
            for (p = 0; p < info.plane_count; p++) {
                CHECK(verify_device_plane((cu_deviceptr)(uintptr_t)info.planes[p], info.pitches[p],
                                          info.row_bytes[p], info.rows[p], info.seq, p) == 0);
            }
            CHECK_CU(cu.mem_get_address_range(&base, &size, (cu_deviceptr)(uintptr_t)info.planes[0]));
            for (i = 0; i < base_count && bases[i] != base; i++) {
            }
            if (i == base_count) {
                CHECK(base_count < RING);
                bases[base_count++] = base;
            }
        }
        CHECK_OK(cuframes_frame_is_intact(frame));
        CHECK_OK(cuframes_frame_release(frame));
    }
    CHECK_STATUS(cuframes_subscriber_next(subscriber, 10000, &frame), CUFRAMES_ERR_DISCONNECTED);
    cuframes_subscriber_destroy(subscriber);
    if (want_memory == CUFRAMES_MEMORY_CUDA) {
        printf("        subscriber: %d frames in %zu mapped slot allocations\n", FRAMES, base_count);
    }
    return 0;
}

/* Forks the subscriber (before the caller touches CUDA). */
static pid_t start_subscriber(const char *key, cuframes_memory want_memory) {
    pid_t child;
    fflush(stdout);
    fflush(stderr);
    child = fork();
    if (child == 0) {
        int result = subscriber_main(key, want_memory);
        fflush(stdout); /* _exit does not flush */
        _exit(result);
    }
    return child;
}

static int wait_child(pid_t child) {
    int status = 0;
    CHECK(child > 0);
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return 0;
}

static void config_for(cuframes_publisher_config *config, const char *key, cuframes_memory memory) {
    publisher_config(config, key, FORMAT, WIDTH, HEIGHT);
    config->ring_size = RING;
    config->policy = CUFRAMES_POLICY_STRICT_WAIT;
    config->ack_timeout_ms = 5000;
    config->memory = memory;
}

/* A source frame in device memory: the host pattern uploaded plane by
 * plane, with source_frame's odd pitches. */
typedef struct device_source {
    source_frame host;
    cu_deviceptr planes[CUFRAMES_MAX_PLANES];
    const void *plane_ptrs[CUFRAMES_MAX_PLANES];
} device_source;

static int device_source_init(device_source *source) {
    uint32_t p;
    memset(source, 0, sizeof *source);
    CHECK(source_init(&source->host, FORMAT, WIDTH, HEIGHT) == 0);
    for (p = 0; p < source->host.plane_count; p++) {
        CHECK_CU(cu.mem_alloc(&source->planes[p], source->host.pitches[p] * source->host.geometry[p].rows));
        source->plane_ptrs[p] = (const void *)(uintptr_t)source->planes[p];
    }
    return 0;
}

static int device_source_fill(device_source *source, uint64_t seq) {
    uint32_t p;
    source_fill(&source->host, seq);
    for (p = 0; p < source->host.plane_count; p++) {
        CHECK_CU(cu.memcpy_htod(source->planes[p], source->host.data[p],
                                source->host.pitches[p] * source->host.geometry[p].rows));
    }
    return 0;
}

static void device_source_free(device_source *source) {
    uint32_t p;
    for (p = 0; p < source->host.plane_count; p++) {
        cu.mem_free(source->planes[p]);
    }
    source_free(&source->host);
}

/* Publishes FRAMES frames from device planes into a ring of `memory`. */
static int publish_from_device(cuframes_memory memory) {
    char key[64];
    cuframes_publisher_config config;
    cuframes_publisher *publisher = NULL;
    cuframes_stream_info info;
    device_source source;
    uint64_t seq;
    pid_t child;
    unique_key(key, sizeof key, memory == CUFRAMES_MEMORY_CUDA ? "d2d" : "d2h");
    child = start_subscriber(key, memory);
    CHECK(cuda_usable());
    CHECK(bind_device0() == 0);
    config_for(&config, key, memory);
    CHECK_OK(cuframes_publisher_create(&config, &publisher));
    CHECK_OK(cuframes_publisher_get_info(publisher, SIZED(info)));
    CHECK(info.memory == memory);
    CHECK_OK(cuframes_publisher_wait_subscribers(publisher, 1, 20000));
    CHECK(device_source_init(&source) == 0);
    for (seq = 1; seq <= FRAMES; seq++) {
        uint64_t got = 0;
        CHECK(device_source_fill(&source, seq) == 0);
        CHECK_OK(cuframes_publisher_publish(publisher, CUFRAMES_MEMORY_CUDA, source.plane_ptrs,
                                            source.host.pitches, source.host.plane_count,
                                            (int64_t)seq, &got));
        CHECK(got == seq);
    }
    CHECK_OK(cuframes_publisher_flush(publisher, 10000));
    cuframes_publisher_destroy(publisher);
    device_source_free(&source);
    return wait_child(child);
}

/* Runs a test body in a child process of its own: once a process has
 * initialised CUDA, neither it nor its forks may fork into CUDA again. */
static int isolated(int (*body)(void)) {
    pid_t child;
    fflush(stdout);
    fflush(stderr);
    child = fork();
    if (child == 0) {
        int result = body();
        fflush(stdout); /* _exit does not flush */
        _exit(result);
    }
    return wait_child(child);
}

/* ---- the tests -------------------------------------------------------- */

static int publish_into_cuda(void) {
    return publish_from_device(CUFRAMES_MEMORY_CUDA);
}

static int publish_into_host(void) {
    return publish_from_device(CUFRAMES_MEMORY_HOST);
}

static int test_device_planes_into_cuda_slots(void) {
    if (!have_gpu) {
        SKIP("no usable GPU");
    }
    return isolated(publish_into_cuda);
}

static int test_device_planes_into_host_slots(void) {
    if (!have_gpu) {
        SKIP("no usable GPU");
    }
    return isolated(publish_into_host);
}

/* EXTERNAL ownership: the caller's own allocations are the slots; each
 * acquired slot is one of them and the frame is written there directly. */
static int external_slots_body(void);

static int test_external_slots_without_a_copy(void) {
    if (!have_gpu) {
        SKIP("no usable GPU");
    }
    return isolated(external_slots_body);
}

static int external_slots_body(void) {
    char key[64];
    cuframes_frame_layout layout;
    cuframes_publisher_config config;
    cuframes_publisher *publisher = NULL;
    cu_deviceptr buffers[RING];
    uint64_t slots[RING];
    source_frame host;
    uint64_t seq;
    pid_t child;
    int i;
    unique_key(key, sizeof key, "external");
    child = start_subscriber(key, CUFRAMES_MEMORY_CUDA);
    CHECK(cuda_usable());
    CHECK(bind_device0() == 0);
    CHECK_OK(cuframes_frame_layout_get(FORMAT, WIDTH, HEIGHT, SIZED(layout)));
    for (i = 0; i < RING; i++) {
        CHECK_CU(cu.mem_alloc(&buffers[i], layout.frame_size));
        slots[i] = buffers[i];
    }
    config_for(&config, key, CUFRAMES_MEMORY_CUDA);
    config.external_slots = slots;
    CHECK_OK(cuframes_publisher_create(&config, &publisher));
    CHECK_OK(cuframes_publisher_wait_subscribers(publisher, 1, 20000));
    CHECK(source_init(&host, FORMAT, WIDTH, HEIGHT) == 0);
    /* D18: the library never copies into the caller's buffers. */
    CHECK_STATUS(cuframes_publisher_publish(publisher, CUFRAMES_MEMORY_HOST, host.planes,
                                            host.pitches, host.plane_count, 0, NULL),
                 CUFRAMES_ERR_UNSUPPORTED);
    for (seq = 1; seq <= FRAMES; seq++) {
        cuframes_slot slot;
        uint32_t p;
        uint64_t got = 0;
        CHECK_OK(cuframes_publisher_acquire_slot(publisher, SIZED(slot)));
        CHECK(slot.memory == CUFRAMES_MEMORY_CUDA && slot.index < RING);
        CHECK((uintptr_t)slot.planes[0] == buffers[slot.index]);
        source_fill(&host, seq);
        for (p = 0; p < slot.plane_count; p++) {
            size_t row;
            CHECK(slot.pitches[p] == layout.pitches[p]);
            CHECK((uintptr_t)slot.planes[p] == buffers[slot.index] + layout.offsets[p]);
            for (row = 0; row < layout.rows[p]; row++) {
                CHECK_CU(cu.memcpy_htod((cu_deviceptr)(uintptr_t)slot.planes[p] + row * slot.pitches[p],
                                        host.data[p] + row * host.pitches[p], layout.row_bytes[p]));
            }
        }
        CHECK_OK(cuframes_publisher_commit_slot(publisher, (int64_t)seq, &got));
        CHECK(got == seq);
    }
    CHECK_STATUS(cuframes_publisher_commit_slot(publisher, 0, NULL), CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_OK(cuframes_publisher_flush(publisher, 10000));
    cuframes_publisher_destroy(publisher);
    source_free(&host);
    CHECK(wait_child(child) == 0);
    for (i = 0; i < RING; i++) {
        CHECK_CU(cu.mem_free(buffers[i]));
    }
    return 0;
}

/* The per-thread stack of the current context (CU_LIMIT_STACK_SIZE = 0). */
static int current_stack(size_t *bytes) {
    CHECK_CU(cu.ctx_get_limit(bytes, 0));
    return 0;
}

/* A context the library starts itself reserves no per-thread stack (half a
 * context's memory at CUDA's default); one the caller made is left alone. */
static int stack_of_library_context_body(void);
static int stack_of_callers_context_body(void);

static int test_library_context_reserves_no_stack(void) {
    if (!have_gpu) {
        SKIP("no usable GPU");
    }
    CHECK(isolated(stack_of_library_context_body) == 0);
    return isolated(stack_of_callers_context_body);
}

static int stack_of_library_context_body(void) {
    char key[64];
    cuframes_publisher_config config;
    cuframes_publisher *publisher = NULL;
    size_t stack = 1;
    CHECK(cuda_usable());
    config_for(&config, unique_key(key, sizeof key, "lean"), CUFRAMES_MEMORY_CUDA);
    config.cuda_device = 0; /* no context current: the library starts device 0's */
    CHECK_OK(cuframes_publisher_create(&config, &publisher));
    CHECK(bind_device0() == 0); /* the same primary context, retained once more */
    CHECK(current_stack(&stack) == 0);
    printf("        stack of the library's context: %zu bytes a thread\n", stack);
    CHECK(stack < 1024); /* CUDA's default; 0 on an H200, the driver may round up elsewhere */
    cuframes_publisher_destroy(publisher);
    return 0;
}

static int stack_of_callers_context_body(void) {
    char key[64];
    cuframes_publisher_config config;
    cuframes_publisher *publisher = NULL;
    size_t before = 0, after = 0;
    CHECK(cuda_usable());
    CHECK(bind_device0() == 0); /* the caller's context, at CUDA's default */
    CHECK(current_stack(&before) == 0);
    config_for(&config, unique_key(key, sizeof key, "callers"), CUFRAMES_MEMORY_CUDA);
    config.cuda_device = 0;
    CHECK_OK(cuframes_publisher_create(&config, &publisher));
    CHECK(current_stack(&after) == 0);
    printf("        stack of the caller's context: %zu bytes a thread, before and after\n",
           after);
    CHECK(before > 0 && after == before);
    cuframes_publisher_destroy(publisher);
    return 0;
}

/* AUTO: CUDA with a GPU, host memory without; CUDA without a GPU: a clear
 * failure, never a crash. */
static int memory_choice_body(void);

static int test_memory_choice(void) {
    return isolated(memory_choice_body);
}

static int memory_choice_body(void) {
    char key[64];
    cuframes_publisher_config config;
    cuframes_publisher *publisher = NULL;
    cuframes_stream_info info;
    if (have_gpu) {
        CHECK(cuda_usable());
        CHECK(bind_device0() == 0);
    }
    config_for(&config, unique_key(key, sizeof key, "auto"), CUFRAMES_MEMORY_AUTO);
    CHECK_OK(cuframes_publisher_create(&config, &publisher));
    CHECK_OK(cuframes_publisher_get_info(publisher, SIZED(info)));
    CHECK(info.memory == (have_gpu ? CUFRAMES_MEMORY_CUDA : CUFRAMES_MEMORY_HOST));
    cuframes_publisher_destroy(publisher);
    publisher = NULL;
    config_for(&config, unique_key(key, sizeof key, "cuda"), CUFRAMES_MEMORY_CUDA);
    if (have_gpu) {
        CHECK_OK(cuframes_publisher_create(&config, &publisher));
        cuframes_publisher_destroy(publisher);
    } else {
        cuframes_status status = cuframes_publisher_create(&config, &publisher);
        CHECK(status != CUFRAMES_OK);
        CHECK(publisher == NULL);
        CHECK_MESSAGE();
        printf("        no GPU: CUDA memory refused: %s: %s\n", cuframes_strerror(status),
               cuframes_last_error());
    }
    return 0;
}

/* The layout call: plane offsets and pitches a caller can allocate by. */
static int test_frame_layout(void) {
    cuframes_frame_layout layout;
    CHECK_OK(cuframes_frame_layout_get(CUFRAMES_FORMAT_NV12, 1920, 1080, SIZED(layout)));
    CHECK(layout.plane_count == 2);
    CHECK(layout.pitches[0] == 2048 && layout.pitches[1] == 2048);
    CHECK(layout.offsets[0] == 0 && layout.offsets[1] == 2048u * 1080u);
    CHECK(layout.rows[0] == 1080 && layout.rows[1] == 540);
    CHECK(layout.row_bytes[1] == 1920);
    CHECK(layout.frame_size == 2048u * 1080u + 2048u * 540u);
    CHECK(layout.offsets[2] == 0 && layout.pitches[3] == 0);
    memset(&layout, 0x5A, sizeof layout);
    CHECK_STATUS(cuframes_frame_layout_get(CUFRAMES_FORMAT_NV12, 0, 1080, SIZED(layout)),
                 CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE();
    CHECK(layout.plane_count == 0x5A5A5A5Au); /* untouched on failure */
    CHECK_STATUS(cuframes_frame_layout_get((cuframes_format)99, 64, 64, SIZED(layout)),
                 CUFRAMES_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(cuframes_frame_layout_get(CUFRAMES_FORMAT_NV12, 64, 64, NULL),
                 CUFRAMES_ERR_INVALID_ARGUMENT);
    return 0;
}

int main(int argc, char **argv) {
    static const test_case tests[] = {
        {"frame_layout", test_frame_layout},
        {"device_planes_into_cuda_slots", test_device_planes_into_cuda_slots},
        {"device_planes_into_host_slots", test_device_planes_into_host_slots},
        {"external_slots_without_a_copy", test_external_slots_without_a_copy},
        {"memory_choice", test_memory_choice},
        {"library_context_reserves_no_stack", test_library_context_reserves_no_stack},
    };
    int result;
    signal(SIGPIPE, SIG_IGN);
    runtime_dir(); /* made before any fork, so every process shares it */
    have_gpu = probe_gpu();
    printf("CUDA: %s\n", have_gpu ? "a GPU is usable: testing the CUDA path"
                                  : "no usable GPU: testing the fallbacks only");
    result = run_tests(tests, sizeof tests / sizeof tests[0], argc, argv);
    remove_runtime_dir();
    return result;
}
