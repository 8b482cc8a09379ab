/*
 * Two processes: the child publishes 500 frames under STRICT_WAIT once a
 * subscriber is there; the parent subscribes and verifies every frame, then
 * sees the clean shutdown. Both must exit 0. Built against the installed
 * header and library only, as C99 and as C++.
 */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include "fixture.h"

#define FRAMES 500
#define WIDTH 320
#define HEIGHT 180
#define FORMAT CUFRAMES_FORMAT_NV12

static void sleep_ms(long ms) {
    struct timespec pause;
    pause.tv_sec = ms / 1000;
    pause.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&pause, NULL);
}

/* The child: publish FRAMES frames, wait until they were all released, leave. */
static int publisher_main(const char *key) {
    cuframes_publisher_config config;
    cuframes_publisher *publisher = NULL;
    source_frame source;
    uint64_t seq;
    publisher_config(&config, key, FORMAT, WIDTH, HEIGHT);
    config.ring_size = 4;
    config.policy = CUFRAMES_POLICY_STRICT_WAIT;
    config.ack_timeout_ms = 5000;
    config.fps_num = 60;
    config.fps_den = 1;
    CHECK_OK(cuframes_publisher_create(&config, &publisher));
    CHECK_OK(cuframes_publisher_wait_subscribers(publisher, 1, 10000));
    CHECK(source_init(&source, FORMAT, WIDTH, HEIGHT) == 0);
    for (seq = 1; seq <= FRAMES; seq++) {
        uint64_t got = 0;
        source_fill(&source, seq);
        CHECK_OK(cuframes_publisher_publish(publisher, CUFRAMES_MEMORY_HOST, source.planes,
                                            source.pitches, source.plane_count,
                                            (int64_t)seq * 1000, &got));
        CHECK(got == seq);
    }
    source_free(&source);
    CHECK_OK(cuframes_publisher_flush(publisher, 10000));
    CHECK(cuframes_publisher_subscriber_count(publisher) == 1);
    cuframes_publisher_destroy(publisher);
    return 0;
}

/* The parent: subscribe (retrying until the child's publisher exists),
 * verify every frame, then see DISCONNECTED with a clean shutdown. */
static int subscriber_main(const char *key) {
    cuframes_subscriber_config config;
    cuframes_subscriber *subscriber = NULL;
    cuframes_subscriber_stats stats;
    cuframes_frame *frame = NULL;
    cuframes_stream_info info;
    cuframes_status status;
    uint64_t seq;
    int tries;
    subscriber_config(&config, key);
    config.name = "c-two-process";
    for (tries = 0;; tries++) {
        status = cuframes_subscriber_create(&config, &subscriber);
        if (status != CUFRAMES_ERR_NOT_FOUND || tries >= 1000) {
            break;
        }
        sleep_ms(10);
    }
    CHECK_OK(status);
    CHECK_OK(cuframes_subscriber_get_info(subscriber, SIZED(info)));
    CHECK(info.policy == CUFRAMES_POLICY_STRICT_WAIT && info.ring_size == 4);
    CHECK(info.width == WIDTH && info.height == HEIGHT && info.format == FORMAT);
    CHECK(info.fps_num == 60 && info.fps_den == 1);
    for (seq = 1; seq <= FRAMES; seq++) {
        cuframes_frame_info frame_info;
        CHECK_OK(cuframes_subscriber_next(subscriber, 10000, &frame));
        memset(&frame_info, 0, sizeof frame_info);
        CHECK_OK(cuframes_frame_get_info(frame, SIZED(frame_info)));
        CHECK(frame_info.seq == seq);
        CHECK(frame_info.pts_ns == (int64_t)seq * 1000);
        if (verify_frame(&frame_info, FORMAT, WIDTH, HEIGHT) != 0) {
            return 1;
        }
        CHECK_OK(cuframes_frame_release(frame));
    }
    CHECK_STATUS(cuframes_subscriber_next(subscriber, 10000, &frame), CUFRAMES_ERR_DISCONNECTED);
    CHECK_OK(cuframes_subscriber_get_stats(subscriber, SIZED(stats)));
    CHECK(stats.received == FRAMES && stats.dropped == 0 && stats.overwritten == 0);
    CHECK(stats.publisher_shut_down == 1);
    cuframes_subscriber_destroy(subscriber);
    return 0;
}

static int test_fork_strict_wait_500_frames(void) {
    char key[64];
    pid_t child;
    int child_status = 0;
    int parent_result;
    unique_key(key, sizeof key, "fork");
    runtime_dir(); /* made before the fork: both sides use it */
    fflush(stdout);
    fflush(stderr);
    child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        int result = publisher_main(key);
        fflush(stdout);
        fflush(stderr);
        _exit(result == 0 ? 0 : 1);
    }
    parent_result = subscriber_main(key);
    if (parent_result != 0) {
        kill(child, SIGTERM);
    }
    CHECK(waitpid(child, &child_status, 0) == child);
    CHECK(parent_result == 0);
    if (!WIFEXITED(child_status) || WEXITSTATUS(child_status) != 0) {
        fprintf(stderr, "publisher process ended with status 0x%x\n", child_status);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    static const test_case tests[] = {
        {"fork_strict_wait_500_frames", test_fork_strict_wait_500_frames},
    };
    int status = run_tests(tests, sizeof tests / sizeof tests[0], argc, argv);
    remove_runtime_dir();
    return status;
}
