/* What waking N sleeping subscribers costs the publisher's thread, two ways:
 *
 *   eventfd  one eventfd per subscriber, each asleep in poll() on it and on a
 *            socket (what cuframes does: the socket is how a subscriber sees its
 *            publisher go); the waker writes 1 to each
 *   futex    one shared futex word for all, each asleep in FUTEX_WAIT; the waker
 *            bumps the word and makes one FUTEX_WAKE call
 *   pipe     one pipe for all, each subscriber asleep in epoll_wait on its read end
 *            (edge-triggered, never read) and on its socket; the waker writes one
 *            byte (a pipe's read end cannot be written, so no subscriber can ring it)
 *
 * Prints, per N, the waker's CPU time per round (CLOCK_THREAD_CPUTIME_ID around
 * the wake-up calls): median and p90 over the rounds. Each round waits until every
 * subscriber is back asleep before waking them, so every wake-up finds N sleepers.
 *
 *   cc -O2 -o wake-cost scripts/gpu/wake-cost.c && ./wake-cost [ROUNDS] [N...]
 *
 * Linux only; no GPU needed. Run it on the GPU machine beside the ring bench so its
 * figures come from that CPU (scripts/gpu-test.sh stages it as .gpu/tests/wake-cost).
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SUBS 64

struct shared {
    _Atomic uint32_t word;    /* the futex: the round number */
    _Atomic uint32_t asleep;  /* subscribers about to sleep this round */
    _Atomic uint32_t woken;   /* wake-ups seen, all rounds */
    _Atomic uint32_t stop;
};

static long futex(_Atomic uint32_t *addr, int op, uint32_t val) {
    return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void subscriber_eventfd(struct shared *sh, int efd, int sock) {
    struct pollfd fds[2] = {{.fd = efd, .events = POLLIN}, {.fd = sock, .events = POLLIN}};
    for (;;) {
        atomic_fetch_add(&sh->asleep, 1);
        if (poll(fds, 2, -1) < 0) die("poll");
        if (fds[1].revents) _exit(0); /* the waker went */
        uint64_t n;
        if (read(efd, &n, sizeof n) != sizeof n) die("read eventfd");
        atomic_fetch_add(&sh->woken, 1);
    }
}

static void subscriber_pipe(struct shared *sh, int rd, int sock) {
    int ep = epoll_create1(0);
    struct epoll_event bell = {.events = EPOLLIN | EPOLLET, .data.fd = rd};
    struct epoll_event gone = {.events = EPOLLIN, .data.fd = sock};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, rd, &bell) || epoll_ctl(ep, EPOLL_CTL_ADD, sock, &gone))
        die("epoll");
    for (;;) {
        atomic_fetch_add(&sh->asleep, 1);
        struct epoll_event ev[2];
        int n = epoll_wait(ep, ev, 2, -1);
        if (n < 0) die("epoll_wait");
        for (int i = 0; i < n; i++)
            if (ev[i].data.fd == sock) _exit(0);
        atomic_fetch_add(&sh->woken, 1);
    }
}

static void subscriber_futex(struct shared *sh) {
    for (;;) {
        uint32_t seen = atomic_load(&sh->word);
        atomic_fetch_add(&sh->asleep, 1);
        while (atomic_load(&sh->word) == seen && !atomic_load(&sh->stop))
            futex(&sh->word, FUTEX_WAIT, seen);
        if (atomic_load(&sh->stop)) _exit(0);
        atomic_fetch_add(&sh->woken, 1);
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Waits until `field` reaches `want`, then a little longer so the last one to
 * count itself is inside its sleeping syscall. */
static void await_count(_Atomic uint32_t *field, uint32_t want) {
    while (atomic_load(field) < want) sched_yield();
    struct timespec settle = {0, 200000};
    nanosleep(&settle, NULL);
}

enum mode { EVENTFD, FUTEX, PIPE };
static const char *const mode_name[] = {"eventfd", "futex", "pipe"};

static void measure(int subs, enum mode mode, int rounds) {
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) die("mmap");
    memset(sh, 0, sizeof *sh);
    int efd[MAX_SUBS], sock[MAX_SUBS][2], bell[2];
    pid_t pid[MAX_SUBS];
    if (mode == PIPE && pipe2(bell, O_NONBLOCK) < 0) die("pipe");
    for (int i = 0; i < subs; i++) {
        if (mode == EVENTFD && (efd[i] = eventfd(0, 0)) < 0) die("eventfd");
        if (mode != FUTEX && socketpair(AF_UNIX, SOCK_STREAM, 0, sock[i]) < 0) die("socketpair");
        pid[i] = fork();
        if (pid[i] < 0) die("fork");
        if (pid[i] == 0) {
            if (mode == FUTEX) subscriber_futex(sh);
            for (int j = 0; j <= i; j++) close(sock[j][0]); /* EOF reaches each one alone */
            if (mode == PIPE) subscriber_pipe(sh, bell[0], sock[i][1]);
            subscriber_eventfd(sh, efd[i], sock[i][1]);
        }
        if (mode != FUTEX) close(sock[i][1]);
    }
    uint64_t *cost = calloc((size_t)rounds, sizeof *cost);
    if (!cost) die("calloc");
    for (int r = 0; r < rounds; r++) {
        await_count(&sh->asleep, (uint32_t)(subs * (r + 1)));
        uint64_t t0 = thread_cpu_ns();
        if (mode == FUTEX) {
            atomic_fetch_add(&sh->word, 1);
            futex(&sh->word, FUTEX_WAKE, INT32_MAX);
        } else if (mode == PIPE) {
            char byte = 1, sink[4096];
            if (write(bell[1], &byte, 1) != 1) { /* full: empty it, then ring */
                while (read(bell[0], sink, sizeof sink) > 0) {}
                if (write(bell[1], &byte, 1) != 1) die("write pipe");
            }
        } else {
            uint64_t one = 1;
            for (int i = 0; i < subs; i++)
                if (write(efd[i], &one, sizeof one) != sizeof one) die("write eventfd");
        }
        cost[r] = thread_cpu_ns() - t0;
        while (atomic_load(&sh->woken) < (uint32_t)(subs * (r + 1))) sched_yield();
    }
    atomic_store(&sh->stop, 1);
    if (mode == FUTEX) {
        atomic_fetch_add(&sh->word, 1);
        futex(&sh->word, FUTEX_WAKE, INT32_MAX);
    } else {
        for (int i = 0; i < subs; i++) close(sock[i][0]);
    }
    if (mode == PIPE) close(bell[0]), close(bell[1]);
    for (int i = 0; i < subs; i++) waitpid(pid[i], NULL, 0);
    qsort(cost, (size_t)rounds, sizeof *cost, cmp_u64);
    printf("%-8s %3d subscribers: waker CPU per wake-up  median %6.2f us  p90 %6.2f us  (%d rounds)\n",
           mode_name[mode], subs, cost[rounds / 2] / 1000.0,
           cost[rounds * 9 / 10] / 1000.0, rounds);
    free(cost);
    munmap(sh, sizeof *sh);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 2000;
    int counts[MAX_SUBS], n = 0;
    for (int i = 2; i < argc && n < MAX_SUBS; i++) counts[n++] = atoi(argv[i]);
    if (n == 0) {
        int dflt[] = {1, 2, 4, 8, 16};
        n = 5;
        memcpy(counts, dflt, sizeof dflt);
    }
    if (rounds < 10) {
        fprintf(stderr, "wake-cost: at least 10 rounds\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < n; i++) {
        if (counts[i] < 1 || counts[i] > MAX_SUBS) {
            fprintf(stderr, "wake-cost: 1 to %d subscribers, not %d\n", MAX_SUBS, counts[i]);
            return 2;
        }
        measure(counts[i], EVENTFD, rounds);
        measure(counts[i], FUTEX, rounds);
        measure(counts[i], PIPE, rounds);
    }
    return 0;
}
