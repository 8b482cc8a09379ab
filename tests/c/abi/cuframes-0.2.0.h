/*
 * FROZEN: include/cuframes.h of cuframes 0.2.0 (libcuframes.so.0.2), the
 * first header whose structs carry struct_size, with its comments removed
 * (gcc -fpreprocessed -dD -E -P -x c include/cuframes.h). Never edit or
 * regenerate it: it stands for the programs built against that header.
 * tests/c/test_abi.c is compiled against it and linked with the library of
 * today, so the structs of every later header must stay readable in this
 * layout (docs/c-api.md, "ABI policy").
 */
#ifndef CUFRAMES_H
#define CUFRAMES_H
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#define CUFRAMES_PROPS_KEY_FRAME 1
#define CUFRAMES_PROPS_INTERLACED 2
#define CUFRAMES_PROPS_TOP_FIELD_FIRST 4
#define CUFRAMES_MAX_PLANES 4
#define CUFRAMES_KEY_BYTES 64
typedef struct cuframes_frame cuframes_frame;
typedef struct cuframes_publisher cuframes_publisher;
typedef struct cuframes_subscriber cuframes_subscriber;
typedef int32_t cuframes_status;
typedef uint32_t cuframes_format;
typedef struct cuframes_frame_layout {
    uint32_t struct_size;
    uint32_t plane_count;
    size_t offsets[CUFRAMES_MAX_PLANES];
    size_t pitches[CUFRAMES_MAX_PLANES];
    size_t row_bytes[CUFRAMES_MAX_PLANES];
    uint32_t rows[CUFRAMES_MAX_PLANES];
    size_t frame_size;
} cuframes_frame_layout;
typedef uint32_t cuframes_policy;
typedef uint32_t cuframes_memory;
typedef uint32_t cuframes_cuda_share;
typedef struct cuframes_publisher_config {
    uint32_t struct_size;
    const char *key;
    cuframes_format format;
    uint32_t width;
    uint32_t height;
    uint32_t ring_size;
    cuframes_policy policy;
    uint32_t ack_timeout_ms;
    cuframes_memory memory;
    uint32_t fps_num;
    uint32_t fps_den;
    void *cuda_context;
    void *cuda_stream;
    const char *runtime_dir;
    const uint64_t *external_slots;
    const char *group;
    int32_t cuda_device;
    uint32_t startup_timeout_ms;
    cuframes_cuda_share cuda_share;
    uint32_t reserved;
} cuframes_publisher_config;
typedef struct cuframes_stream_info {
    uint32_t struct_size;
    cuframes_format format;
    uint32_t width;
    uint32_t height;
    uint32_t ring_size;
    cuframes_policy policy;
    cuframes_memory memory;
    uint32_t fps_num;
    uint32_t fps_den;
    uint32_t plane_count;
    size_t pitches[CUFRAMES_MAX_PLANES];
    size_t frame_size;
    cuframes_cuda_share cuda_share;
    uint32_t reserved;
} cuframes_stream_info;
typedef struct cuframes_slot {
    uint32_t struct_size;
    uint32_t index;
    cuframes_memory memory;
    uint32_t plane_count;
    void *planes[CUFRAMES_MAX_PLANES];
    size_t pitches[CUFRAMES_MAX_PLANES];
} cuframes_slot;
typedef struct cuframes_frame_props {
    uint32_t struct_size;
    uint8_t color_range;
    uint8_t color_primaries;
    uint8_t color_trc;
    uint8_t colorspace;
    uint8_t chroma_location;
    uint8_t pict_type;
    uint8_t flags;
    uint8_t reserved;
    uint32_t sar_num;
    uint32_t sar_den;
    int64_t duration_ns;
} cuframes_frame_props;
typedef uint32_t cuframes_subscriber_mode;
typedef uint32_t cuframes_copy_mode;
typedef struct cuframes_subscriber_config {
    uint32_t struct_size;
    const char *key;
    const char *name;
    cuframes_subscriber_mode mode;
    uint32_t connect_timeout_ms;
    void *cuda_context;
    void *cuda_stream;
    int32_t cuda_device;
    const char *runtime_dir;
    cuframes_copy_mode copy;
    uint32_t read_ahead;
} cuframes_subscriber_config;
typedef struct cuframes_subscriber_stats {
    uint32_t struct_size;
    uint64_t received;
    uint64_t dropped;
    uint64_t overwritten;
    uint32_t publisher_shut_down;
    uint64_t copied;
    uint64_t torn;
    uint64_t queued;
} cuframes_subscriber_stats;
typedef struct cuframes_frame_info {
    uint32_t struct_size;
    uint64_t seq;
    int64_t pts_ns;
    uint64_t publish_mono_ns;
    cuframes_format format;
    uint32_t width;
    uint32_t height;
    cuframes_memory memory;
    uint32_t plane_count;
    const void *planes[CUFRAMES_MAX_PLANES];
    size_t pitches[CUFRAMES_MAX_PLANES];
    size_t row_bytes[CUFRAMES_MAX_PLANES];
    uint32_t rows[CUFRAMES_MAX_PLANES];
    uint64_t lost_before;
} cuframes_frame_info;
typedef struct cuframes_key_info {
    uint32_t struct_size;
    char key[CUFRAMES_KEY_BYTES];
    struct cuframes_stream_info info;
} cuframes_key_info;
#define CUFRAMES_OK 0
#define CUFRAMES_ERR_INVALID_ARGUMENT -1
#define CUFRAMES_ERR_NOT_FOUND -2
#define CUFRAMES_ERR_ALREADY_EXISTS -3
#define CUFRAMES_ERR_PROTOCOL -4
#define CUFRAMES_ERR_FORMAT -5
#define CUFRAMES_ERR_TOO_MANY -6
#define CUFRAMES_ERR_TIMEOUT -7
#define CUFRAMES_ERR_DISCONNECTED -8
#define CUFRAMES_ERR_OVERWRITTEN -9
#define CUFRAMES_ERR_IO -10
#define CUFRAMES_ERR_CUDA -11
#define CUFRAMES_ERR_UNSUPPORTED -12
#define CUFRAMES_ERR_CORRUPT -13
#define CUFRAMES_ERR_PERMISSION -14
#define CUFRAMES_ERR_INTERNAL -15
#define CUFRAMES_FORMAT_NV12 1
#define CUFRAMES_FORMAT_YUV420P 2
#define CUFRAMES_FORMAT_P010 3
#define CUFRAMES_FORMAT_BGRA 4
#define CUFRAMES_FORMAT_P016 5
#define CUFRAMES_FORMAT_YUV444P 6
#define CUFRAMES_FORMAT_YUV444P16 7
#define CUFRAMES_FORMAT_RGBA 8
#define CUFRAMES_FORMAT_BGR0 9
#define CUFRAMES_FORMAT_RGB0 10
#define CUFRAMES_MEMORY_AUTO 0
#define CUFRAMES_MEMORY_HOST 1
#define CUFRAMES_MEMORY_CUDA 2
#define CUFRAMES_POLICY_DROP_OLDEST 0
#define CUFRAMES_POLICY_STRICT_WAIT 1
#define CUFRAMES_MODE_SEQUENTIAL 0
#define CUFRAMES_MODE_LATEST 1
#define CUFRAMES_COPY_NEVER 0
#define CUFRAMES_COPY_AUTO 1
#define CUFRAMES_COPY_ALWAYS 2
#define CUFRAMES_CUDA_SHARE_AUTO 0
#define CUFRAMES_CUDA_SHARE_FD 1
#define CUFRAMES_CUDA_SHARE_IPC 2
#ifdef __cplusplus
extern "C" {
#endif
const char *cuframes_strerror(cuframes_status status);
const char *cuframes_last_error(void);
const char *cuframes_version(void);
uint32_t cuframes_protocol_version(void);
cuframes_status cuframes_validate_key(const char *key);
cuframes_status cuframes_frame_layout_get(cuframes_format format,
                                          uint32_t width,
                                          uint32_t height,
                                          struct cuframes_frame_layout *layout_out);
cuframes_status cuframes_publisher_config_init_sized(struct cuframes_publisher_config *config,
                                                     size_t size);
cuframes_status cuframes_publisher_create(const struct cuframes_publisher_config *config,
                                          struct cuframes_publisher **publisher_out);
cuframes_status cuframes_publisher_get_info(const struct cuframes_publisher *publisher,
                                            struct cuframes_stream_info *info_out);
cuframes_status cuframes_publisher_wait_subscribers(struct cuframes_publisher *publisher,
                                                    uint32_t count,
                                                    uint32_t timeout_ms);
cuframes_status cuframes_publisher_publish(struct cuframes_publisher *publisher,
                                           cuframes_memory source,
                                           const void *const *planes,
                                           const size_t *pitches,
                                           uint32_t plane_count,
                                           int64_t pts_ns,
                                           uint64_t *seq_out);
cuframes_status cuframes_publisher_acquire_slot(struct cuframes_publisher *publisher,
                                                struct cuframes_slot *slot_out);
cuframes_status cuframes_publisher_commit_slot(struct cuframes_publisher *publisher,
                                               int64_t pts_ns,
                                               uint64_t *seq_out);
cuframes_status cuframes_publisher_flush(struct cuframes_publisher *publisher, uint32_t timeout_ms);
cuframes_status cuframes_publisher_wait_delivered(struct cuframes_publisher *publisher,
                                                  uint32_t timeout_ms);
cuframes_status cuframes_publisher_set_frame_props(struct cuframes_publisher *publisher,
                                                   const struct cuframes_frame_props *props);
uint32_t cuframes_publisher_subscriber_count(const struct cuframes_publisher *publisher);
void cuframes_publisher_destroy(struct cuframes_publisher *publisher);
cuframes_status cuframes_subscriber_config_init_sized(struct cuframes_subscriber_config *config,
                                                      size_t size);
cuframes_status cuframes_subscriber_create(const struct cuframes_subscriber_config *config,
                                           struct cuframes_subscriber **subscriber_out);
cuframes_status cuframes_subscriber_get_info(const struct cuframes_subscriber *subscriber,
                                             struct cuframes_stream_info *info_out);
cuframes_status cuframes_subscriber_next(struct cuframes_subscriber *subscriber,
                                         int32_t timeout_ms,
                                         struct cuframes_frame **frame_out);
cuframes_status cuframes_subscriber_get_stats(const struct cuframes_subscriber *subscriber,
                                              struct cuframes_subscriber_stats *stats_out);
void cuframes_subscriber_destroy(struct cuframes_subscriber *subscriber);
cuframes_status cuframes_frame_get_info(const struct cuframes_frame *frame,
                                        struct cuframes_frame_info *info_out);
cuframes_status cuframes_frame_is_intact(const struct cuframes_frame *frame);
cuframes_status cuframes_frame_is_copy(const struct cuframes_frame *frame);
cuframes_status cuframes_frame_get_props(const struct cuframes_frame *frame,
                                         struct cuframes_frame_props *props_out);
cuframes_status cuframes_frame_release(struct cuframes_frame *frame);
cuframes_status cuframes_list_keys(const char *runtime_dir,
                                   struct cuframes_key_info *entries,
                                   size_t capacity,
                                   size_t *count_out);
#ifdef __cplusplus
}
#endif
static inline void cuframes_publisher_config_init(cuframes_publisher_config *config) {
    (void)cuframes_publisher_config_init_sized(config, sizeof *config);
}
static inline void cuframes_subscriber_config_init(cuframes_subscriber_config *config) {
    (void)cuframes_subscriber_config_init_sized(config, sizeof *config);
}
#endif
