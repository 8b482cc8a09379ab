/*
 * A CUDA injection library that counts every memory copy a process makes,
 * by direction, through CUPTI's activity API: the counter behind the GPU
 * script's "no device-to-host copy on the zero-copy path" check.
 *
 *   CUDA_INJECTION64_PATH=/path/memcpy-count.so CUFRAMES_MEMCPY_LOG=file cmd ...
 *
 * The driver loads this library at cuInit and calls InitializeInjection.
 * libcupti is opened at run time ($CUFRAMES_CUPTI, then the usual toolkit
 * places), so this file builds with a plain C compiler and no CUDA headers.
 * At exit it appends one line to $CUFRAMES_MEMCPY_LOG (stderr when unset):
 *   memcpy-count pid=P HtoD=N/BYTES DtoH=N/BYTES DtoD=N/BYTES PtoP=N/BYTES other=N/BYTES contexts=C
 * or "memcpy-count pid=P error=..." when CUPTI could not be set up, so a
 * missing counter is never read as "no copies". C counts the CUDA contexts the
 * process made (CUPTI's resource callback; a primary context counts when first
 * retained); for each of the first few, one more line names who made it:
 *   context-made pid=P n=I by: FRAME < FRAME < ...
 * the calling frames as backtrace_symbols(3) gives them (library(symbol+offset)),
 * innermost first, the driver's and this library's own left out.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The few CUPTI declarations used (cupti_activity.h, stable since CUDA 10). */
enum {
    ACTIVITY_KIND_MEMCPY = 1,
    ACTIVITY_KIND_MEMCPY2 = 22, /* peer to peer */
    MEMCPY_KIND_HTOD = 1,
    MEMCPY_KIND_DTOH = 2,
    MEMCPY_KIND_DTOD = 8,
    MEMCPY_KIND_PTOP = 10,
};

/* The head every memcpy record version shares: kind, then copyKind,
 * srcKind, dstKind, flags, then bytes. */
typedef struct memcpy_record_head {
    uint32_t kind;
    uint8_t copy_kind;
    uint8_t src_kind;
    uint8_t dst_kind;
    uint8_t flags;
    uint64_t bytes;
} memcpy_record_head;

typedef void (*buffer_requested_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*buffer_completed_fn)(void *context, uint32_t stream, uint8_t *buffer, size_t size,
                                    size_t valid);

/* The callback API's few declarations (cupti_callbacks.h). */
enum {
    CB_DOMAIN_RESOURCE = 3,
    CBID_RESOURCE_CONTEXT_CREATED = 1,
};
typedef void (*callback_fn)(void *userdata, uint32_t domain, uint32_t cbid, const void *data);

static struct {
    int (*register_callbacks)(buffer_requested_fn, buffer_completed_fn);
    int (*enable)(uint32_t kind);
    int (*next_record)(uint8_t *buffer, size_t valid, void **record);
    int (*flush_all)(uint32_t flag);
    int (*subscribe)(void **subscriber, callback_fn callback, void *userdata);
    int (*enable_callback)(uint32_t enable, void *subscriber, uint32_t domain, uint32_t cbid);
} cupti;

/* Contexts made, and who made the first few (one line each, kept for the report). */
#define TRACED_CONTEXTS 8
#define TRACE_FRAMES 24
static unsigned contexts;
static char *made_by[TRACED_CONTEXTS];
static int contexts_error;

enum { HTOD, DTOH, DTOD, PTOP, OTHER, DIRECTIONS };
static const char *const direction_names[DIRECTIONS] = {"HtoD", "DtoH", "DtoD", "PtoP", "other"};
static unsigned long long counts[DIRECTIONS];
static unsigned long long bytes[DIRECTIONS];
static char setup_error[160];

#define BUFFER_SIZE (1u << 20)

static void buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    /* CUPTI wants 8-byte alignment */
    *buffer = (uint8_t *)aligned_alloc(8, BUFFER_SIZE);
    *size = *buffer != NULL ? BUFFER_SIZE : 0;
    *max_records = 0;
}

static void buffer_completed(void *context, uint32_t stream, uint8_t *buffer, size_t size,
                             size_t valid) {
    void *record = NULL;
    (void)context;
    (void)stream;
    (void)size;
    while (cupti.next_record(buffer, valid, &record) == 0) {
        const memcpy_record_head *head = (const memcpy_record_head *)record;
        int direction;
        if (head->kind != ACTIVITY_KIND_MEMCPY && head->kind != ACTIVITY_KIND_MEMCPY2) {
            continue;
        }
        switch (head->copy_kind) {
        case MEMCPY_KIND_HTOD: direction = HTOD; break;
        case MEMCPY_KIND_DTOH: direction = DTOH; break;
        case MEMCPY_KIND_DTOD: direction = DTOD; break;
        case MEMCPY_KIND_PTOP: direction = PTOP; break;
        default: direction = OTHER; break;
        }
        counts[direction]++;
        bytes[direction] += head->bytes;
    }
    free(buffer);
}

/* The frames of a backtrace that are not the driver's, CUPTI's or ours, joined. */
static char *callers(void) {
    void *frames[TRACE_FRAMES];
    int n = backtrace(frames, TRACE_FRAMES);
    char **symbols = backtrace_symbols(frames, n);
    size_t size = 1, used = 0;
    char *out;
    int i;
    if (symbols == NULL) {
        return NULL;
    }
    for (i = 0; i < n; i++) {
        size += strlen(symbols[i]) + 3;
    }
    out = malloc(size);
    if (out != NULL) {
        out[0] = '\0';
        for (i = 0; i < n; i++) {
            if (strstr(symbols[i], "libcuda.so") != NULL || strstr(symbols[i], "libcupti") != NULL ||
                strstr(symbols[i], "memcpy-count") != NULL) {
                continue;
            }
            used += (size_t)snprintf(out + used, size - used, "%s%s", used > 0 ? " < " : "", symbols[i]);
        }
    }
    free(symbols);
    return out;
}

static void on_callback(void *userdata, uint32_t domain, uint32_t cbid, const void *data) {
    (void)userdata;
    (void)data;
    if (domain == CB_DOMAIN_RESOURCE && cbid == CBID_RESOURCE_CONTEXT_CREATED) {
        /* Threads may make contexts at once: each takes its own number. */
        unsigned n = __atomic_fetch_add(&contexts, 1, __ATOMIC_SEQ_CST);
        if (n < TRACED_CONTEXTS) {
            made_by[n] = callers();
        }
    }
}

static void report(void) {
    const char *path = getenv("CUFRAMES_MEMCPY_LOG");
    FILE *out = path != NULL ? fopen(path, "a") : NULL;
    int i;
    if (setup_error[0] == '\0') {
        cupti.flush_all(1); /* CUPTI_ACTIVITY_FLAG_FLUSH_FORCED */
    }
    if (out == NULL) {
        out = stderr;
    }
    fprintf(out, "memcpy-count pid=%d", (int)getpid());
    if (setup_error[0] != '\0') {
        fprintf(out, " error=%s\n", setup_error);
    } else {
        for (i = 0; i < DIRECTIONS; i++) {
            fprintf(out, " %s=%llu/%llu", direction_names[i], counts[i], bytes[i]);
        }
        if (contexts_error) {
            fprintf(out, " contexts=unknown\n");
        } else {
            fprintf(out, " contexts=%u\n", __atomic_load_n(&contexts, __ATOMIC_SEQ_CST));
        }
        for (i = 0; i < TRACED_CONTEXTS && (unsigned)i < __atomic_load_n(&contexts, __ATOMIC_SEQ_CST); i++) {
            fprintf(out, "context-made pid=%d n=%d by: %s\n", (int)getpid(), i + 1,
                    made_by[i] != NULL ? made_by[i] : "(no backtrace)");
        }
    }
    if (out != stderr) {
        fclose(out);
    }
}

static void *open_cupti(void) {
    static const char *const candidates[] = {
        "libcupti.so",
        "libcupti.so.13",
        "libcupti.so.12",
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
        "/usr/local/cuda/lib64/libcupti.so",
        "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so",
    };
    const char *chosen = getenv("CUFRAMES_CUPTI");
    void *library = NULL;
    size_t i;
    if (chosen != NULL) {
        return dlopen(chosen, RTLD_NOW | RTLD_LOCAL);
    }
    for (i = 0; library == NULL && i < sizeof candidates / sizeof candidates[0]; i++) {
        library = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
    }
    return library;
}

#define SYMBOL(field, name)                                                                 \
    do {                                                                                    \
        void *address_ = dlsym(library, name);                                              \
        if (address_ == NULL) {                                                             \
            snprintf(setup_error, sizeof setup_error, "libcupti lacks %s", name);          \
            return 1;                                                                       \
        }                                                                                   \
        memcpy(&cupti.field, &address_, sizeof address_);                                   \
    } while (0)

/* Called by the CUDA driver once, at cuInit. */
int InitializeInjection(void) {
    void *library = open_cupti();
    int status;
    atexit(report);
    if (library == NULL) {
        snprintf(setup_error, sizeof setup_error, "no libcupti (set CUFRAMES_CUPTI)");
        return 1;
    }
    SYMBOL(register_callbacks, "cuptiActivityRegisterCallbacks");
    SYMBOL(enable, "cuptiActivityEnable");
    SYMBOL(next_record, "cuptiActivityGetNextRecord");
    SYMBOL(flush_all, "cuptiActivityFlushAll");
    status = cupti.register_callbacks(buffer_requested, buffer_completed);
    if (status == 0) {
        status = cupti.enable(ACTIVITY_KIND_MEMCPY);
    }
    if (status == 0) {
        status = cupti.enable(ACTIVITY_KIND_MEMCPY2);
    }
    if (status != 0) {
        snprintf(setup_error, sizeof setup_error, "CUPTI status %d", status);
        return 1;
    }
    /* Contexts: optional, said as unknown when CUPTI will not tell. */
    {
        void *subscriber = NULL;
        void *subscribe = dlsym(library, "cuptiSubscribe");
        void *enable_callback = dlsym(library, "cuptiEnableCallback");
        memcpy(&cupti.subscribe, &subscribe, sizeof subscribe);
        memcpy(&cupti.enable_callback, &enable_callback, sizeof enable_callback);
        contexts_error = cupti.subscribe == NULL || cupti.enable_callback == NULL ||
                         cupti.subscribe(&subscriber, on_callback, NULL) != 0 ||
                         cupti.enable_callback(1, subscriber, CB_DOMAIN_RESOURCE, CBID_RESOURCE_CONTEXT_CREATED) != 0;
    }
    return 1;
}
