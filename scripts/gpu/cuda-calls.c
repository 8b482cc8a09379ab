/*
 * A CUDA injection library that times every CUDA driver API call a process
 * makes, through CUPTI's callback API: where a process's start-up goes
 * (cuInit, its context, imports, the first frame) and which calls wait on
 * the driver's machine-wide serialisation when many processes start at once
 * (their time balloons under load while their count stays the same).
 *
 *   CUDA_INJECTION64_PATH=/path/cuda-calls.so CUFRAMES_CALLS_DIR=dir cmd ...
 *
 * The driver loads this library at the first cuInit and calls
 * InitializeInjection. libcupti is opened at run time ($CUFRAMES_CUPTI, then
 * the usual toolkit places), so this file builds with a plain C compiler and
 * no CUDA headers. At exit it writes DIR/calls-PID.txt (stderr when unset):
 *
 *   cuda-calls pid=P inject_ns=T exit_ns=T     (CLOCK_REALTIME, ns)
 *   NAME count=N total_us=U max_us=U first_start_ns=T first_end_ns=T last_end_ns=T
 *
 * one line per function called, or "cuda-calls pid=P error=..." when CUPTI
 * could not be set up, so a missing trace is never read as "no calls".
 * The callbacks cost about a microsecond per call: profile with it, time
 * without it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The few CUPTI declarations used (cupti_callbacks.h, stable since CUDA 10). */
enum { API_ENTER = 0, API_EXIT = 1, DOMAIN_DRIVER_API = 1 };

typedef struct callback_data {
    int site; /* API_ENTER or API_EXIT */
    const char *function_name;
    const void *params;
    void *return_value;
    const char *symbol_name;
    void *context;
    uint32_t context_uid;
    uint64_t *correlation_data;
    uint32_t correlation_id;
} callback_data;

typedef void (*callback_fn)(void *userdata, int domain, uint32_t cbid, const void *data);

static struct {
    int (*subscribe)(void **subscriber, callback_fn callback, void *userdata);
    int (*enable_domain)(uint32_t enable, void *subscriber, int domain);
} cupti;

/* Indexed by callback id (driver API ids are well below this). */
#define MAX_CBID 4096

typedef struct call_stats {
    const char *name;
    uint64_t count;
    uint64_t total_ns;
    uint64_t max_ns;
    uint64_t first_start_ns;
    uint64_t first_end_ns;
    uint64_t last_end_ns;
} call_stats;

static call_stats calls[MAX_CBID];
static uint64_t inject_ns;
static char setup_error[160];

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Per-thread start times of the calls in progress (the driver may call back
 * into itself, so a small stack). */
#define DEPTH 8
static __thread uint64_t started[DEPTH];
static __thread int depth;

static void on_call(void *userdata, int domain, uint32_t cbid, const void *raw) {
    const callback_data *data = (const callback_data *)raw;
    call_stats *stats;
    uint64_t t = now_ns(), start, took, seen;
    (void)userdata;
    if (domain != DOMAIN_DRIVER_API || cbid >= MAX_CBID) {
        return;
    }
    if (data->site == API_ENTER) {
        if (depth < DEPTH) {
            started[depth] = t;
        }
        depth++;
        return;
    }
    if (depth == 0) {
        return;
    }
    depth--;
    if (depth >= DEPTH) {
        return;
    }
    start = started[depth];
    took = t - start;
    stats = &calls[cbid];
    __atomic_store_n(&stats->name, data->function_name, __ATOMIC_RELAXED);
    if (__atomic_fetch_add(&stats->count, 1, __ATOMIC_RELAXED) == 0) {
        stats->first_start_ns = start;
        stats->first_end_ns = t;
    }
    __atomic_fetch_add(&stats->total_ns, took, __ATOMIC_RELAXED);
    seen = __atomic_load_n(&stats->max_ns, __ATOMIC_RELAXED);
    while (took > seen &&
           !__atomic_compare_exchange_n(&stats->max_ns, &seen, took, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
    __atomic_store_n(&stats->last_end_ns, t, __ATOMIC_RELAXED);
}

static void report(void) {
    const char *dir = getenv("CUFRAMES_CALLS_DIR");
    char path[4096];
    FILE *out = NULL;
    int i;
    if (dir != NULL) {
        snprintf(path, sizeof path, "%s/calls-%d.txt", dir, (int)getpid());
        out = fopen(path, "w");
    }
    if (out == NULL) {
        out = stderr;
    }
    if (setup_error[0] != '\0') {
        fprintf(out, "cuda-calls pid=%d error=%s\n", (int)getpid(), setup_error);
    } else {
        fprintf(out, "cuda-calls pid=%d inject_ns=%llu exit_ns=%llu\n", (int)getpid(),
                (unsigned long long)inject_ns, (unsigned long long)now_ns());
        for (i = 0; i < MAX_CBID; i++) {
            const call_stats *s = &calls[i];
            if (s->count == 0 || s->name == NULL) {
                continue;
            }
            fprintf(out,
                    "%s count=%llu total_us=%llu max_us=%llu first_start_ns=%llu "
                    "first_end_ns=%llu last_end_ns=%llu\n",
                    s->name, (unsigned long long)s->count,
                    (unsigned long long)(s->total_ns / 1000),
                    (unsigned long long)(s->max_ns / 1000),
                    (unsigned long long)s->first_start_ns, (unsigned long long)s->first_end_ns,
                    (unsigned long long)s->last_end_ns);
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
    void *library, *subscriber = NULL;
    int status;
    inject_ns = now_ns();
    atexit(report);
    library = open_cupti();
    if (library == NULL) {
        snprintf(setup_error, sizeof setup_error, "no libcupti (set CUFRAMES_CUPTI)");
        return 1;
    }
    SYMBOL(subscribe, "cuptiSubscribe");
    SYMBOL(enable_domain, "cuptiEnableDomain");
    status = cupti.subscribe(&subscriber, on_call, NULL);
    if (status == 0) {
        status = cupti.enable_domain(1, subscriber, DOMAIN_DRIVER_API);
    }
    if (status != 0) {
        snprintf(setup_error, sizeof setup_error, "CUPTI status %d", status);
    }
    return 1;
}
