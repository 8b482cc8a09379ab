/*
 * gst-bench-probe: runs one GStreamer pipeline (gst-launch syntax) and logs every
 * buffer that leaves the element named "probe", for scripts/gpu/gst-bench.sh.
 *
 *   gst-bench-probe LOG PIPELINE...      (GST_BENCH_SECONDS=N: EOS after N s)
 *
 * A pipeline with "appsrc name=feed" needs GST_BENCH_FEED (a pipeline ending in
 * "cudaupload name=upload ! appsink name=frame"); with GST_BENCH_FEED_COUNT=N it is
 * given that pipeline's first frame N times as fast as it takes them (new
 * timestamps, the same GPU memory): frames already on the GPU, so what is measured
 * is the transport. Both pipelines share the feed's CUDA context, as elements of
 * one pipeline would.
 *
 * LOG gets one line per buffer, all times in ns:
 *   buf MONO PTS RUNNING CUFRAMES_PTS CUFRAMES_PUBLISHED
 * MONO is CLOCK_MONOTONIC when the buffer passed (the clock every process on the
 * host shares, and GStreamer's system clock); RUNNING the PTS as running time.
 * CUFRAMES_* are cuframessrc's reference timestamps (the publisher's PTS; when it
 * published), -1 when absent. Then one line for each warning and error on the
 * bus, and last:
 *   end pid=P frames=N cpu_ns=C wall_ns=W warnings=K errors=E base_ns=B latency_ns=L
 *       steady_frames=F steady_cpu_ns=SC steady_wall_ns=SW
 * C is this process's CPU time (user + system), W the time from PLAYING to the
 * end, B the pipeline's base time, L the latency of the element named "sink";
 * the steady_ figures count from the 10th buffer to the last (no start-up).
 * RUNNING + B + L is a frame's time on the system clock, which cudaipcsink sends
 * with each frame and cudaipcsrc gives back as PTS + its own base time (the
 * base time is only known once PLAYING, after the first buffer: hence at the end).
 * So a producer's line and a consumer's line of the same frame share a key, that
 * time (cudaipc) or the PTS (cuframes), and their MONOs give the latency.
 * Exit status 0 after EOS, 1 after an error.
 *
 * Built against any GStreamer >= 1.14 (reference timestamp metas).
 */
#include <gst/base/gstbasesink.h>
#include <gst/gst.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    GstElement *appsrc;
    GstSample *frame;
    guint64 count;
} Feed;

typedef struct {
    FILE *log;
    GstElement *pipeline;
    GstElement *sink;
    GstCaps *pts_ref;
    GstCaps *published_ref;
    guint64 frames;
    gint64 cpu_at_warm, mono_at_warm, cpu_last, mono_last;
} Probe;

#define WARM_UP_FRAMES 10

static gint64 mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (gint64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static gint64 cpu_ns(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return ((gint64)usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000000000 +
           ((gint64)usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1000;
}

static gint64 reference(GstBuffer *buffer, GstCaps *caps) {
    GstReferenceTimestampMeta *meta = gst_buffer_get_reference_timestamp_meta(buffer, caps);
    return meta ? (gint64)meta->timestamp : -1;
}

/* The buffer's PTS as running time. */
static gint64 running_time(GstPad *pad, GstBuffer *buffer) {
    GstEvent *event = gst_pad_get_sticky_event(pad, GST_EVENT_SEGMENT, 0);
    const GstSegment *segment = NULL;
    gint64 result = -1;
    if (!event || !GST_BUFFER_PTS_IS_VALID(buffer)) {
        if (event)
            gst_event_unref(event);
        return -1;
    }
    gst_event_parse_segment(event, &segment);
    guint64 running = gst_segment_to_running_time(segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buffer));
    if (GST_CLOCK_TIME_IS_VALID(running))
        result = (gint64)running;
    gst_event_unref(event);
    return result;
}

static GstPadProbeReturn on_buffer(GstPad *pad, GstPadProbeInfo *info, gpointer data) {
    Probe *p = data;
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    gint64 now = mono_ns();
    gint64 pts = GST_BUFFER_PTS_IS_VALID(buffer) ? (gint64)GST_BUFFER_PTS(buffer) : -1;
    fprintf(p->log, "buf %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT
                    " %" G_GINT64_FORMAT "\n",
            now, pts, running_time(pad, buffer), reference(buffer, p->pts_ref),
            reference(buffer, p->published_ref));
    p->frames++;
    p->cpu_last = cpu_ns();
    p->mono_last = now;
    if (p->frames == WARM_UP_FRAMES) {
        p->cpu_at_warm = p->cpu_last;
        p->mono_at_warm = now;
    }
    return GST_PAD_PROBE_OK;
}

static gboolean send_eos(gpointer pipeline) {
    gst_element_send_event(GST_ELEMENT(pipeline), gst_event_new_eos());
    return G_SOURCE_REMOVE;
}

/* The feed's first frame, and its CUDA context set on `pipeline`. */
static GstSample *feed_frame(const char *description, GstElement *pipeline) {
    GError *error = NULL;
    GstElement *feed = gst_parse_launch(description, &error);
    if (!feed) {
        fprintf(stderr, "gst-bench-probe: feed: %s\n", error ? error->message : "no pipeline");
        return NULL;
    }
    GstElement *appsink = gst_bin_get_by_name(GST_BIN(feed), "frame");
    GstElement *upload = gst_bin_get_by_name(GST_BIN(feed), "upload");
    if (!appsink || !upload) {
        fprintf(stderr, "gst-bench-probe: the feed needs cudaupload name=upload ! appsink name=frame\n");
        return NULL;
    }
    gst_element_set_state(feed, GST_STATE_PLAYING);
    GstSample *sample = NULL;
    g_signal_emit_by_name(appsink, "pull-sample", &sample);
    GstQuery *query = gst_query_new_context("gst.cuda.context");
    GstPad *pad = gst_element_get_static_pad(upload, "src");
    if (gst_pad_query(pad, query)) {
        GstContext *context = NULL;
        gst_query_parse_context(query, &context);
        if (context)
            gst_element_set_context(pipeline, context);
    } else {
        fprintf(stderr, "gst-bench-probe: cudaupload shared no CUDA context\n");
    }
    gst_query_unref(query);
    gst_object_unref(pad);
    /* The feed stays PLAYING: the frame's memory is its pool's. */
    return sample;
}

static gpointer push_frames(gpointer data) {
    Feed *feed = data;
    GstBuffer *frame = gst_sample_get_buffer(feed->frame);
    GstClockTime duration = GST_BUFFER_DURATION_IS_VALID(frame) ? GST_BUFFER_DURATION(frame) : GST_SECOND / 30;
    for (guint64 i = 0; i < feed->count; i++) {
        GstBuffer *buffer = gst_buffer_copy(frame); /* shares the memory */
        GST_BUFFER_PTS(buffer) = i * duration;
        GST_BUFFER_DTS(buffer) = GST_CLOCK_TIME_NONE;
        GST_BUFFER_DURATION(buffer) = duration;
        GstFlowReturn ret = GST_FLOW_OK;
        g_signal_emit_by_name(feed->appsrc, "push-buffer", buffer, &ret);
        gst_buffer_unref(buffer);
        if (ret != GST_FLOW_OK)
            break;
    }
    GstFlowReturn ret;
    g_signal_emit_by_name(feed->appsrc, "end-of-stream", &ret);
    return NULL;
}

static void log_message(FILE *log, GstMessage *msg, const char *kind) {
    GError *error = NULL;
    gchar *debug = NULL;
    if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR)
        gst_message_parse_error(msg, &error, &debug);
    else
        gst_message_parse_warning(msg, &error, &debug);
    fprintf(log, "msg %s %s: %s\n", kind, GST_OBJECT_NAME(GST_MESSAGE_SRC(msg)), error ? error->message : "?");
    g_clear_error(&error);
    g_free(debug);
}

int main(int argc, char **argv) {
    gst_init(&argc, &argv);
    if (argc < 3) {
        fprintf(stderr, "usage: gst-bench-probe LOG PIPELINE...\n");
        return 2;
    }
    Probe p = {0};
    p.log = fopen(argv[1], "w");
    if (!p.log) {
        perror(argv[1]);
        return 2;
    }
    GError *error = NULL;
    p.pipeline = gst_parse_launchv((const gchar **)&argv[2], &error);
    if (!p.pipeline) {
        fprintf(stderr, "gst-bench-probe: %s\n", error ? error->message : "no pipeline");
        return 2;
    }
    GstElement *probe = gst_bin_get_by_name(GST_BIN(p.pipeline), "probe");
    if (!probe) {
        fprintf(stderr, "gst-bench-probe: no element named probe\n");
        return 2;
    }
    p.sink = gst_bin_get_by_name(GST_BIN(p.pipeline), "sink");
    p.pts_ref = gst_caps_new_empty_simple("timestamp/x-cuframes-pts");
    p.published_ref = gst_caps_new_empty_simple("timestamp/x-cuframes-published");
    GstPad *pad = gst_element_get_static_pad(probe, "src");
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, on_buffer, &p, NULL);

    Feed feed = {0};
    const char *feed_description = getenv("GST_BENCH_FEED");
    feed.appsrc = gst_bin_get_by_name(GST_BIN(p.pipeline), "feed");
    if (feed.appsrc) {
        feed.frame = feed_description ? feed_frame(feed_description, p.pipeline) : NULL;
        if (!feed.frame) {
            fprintf(stderr, "gst-bench-probe: appsrc name=feed needs a frame from GST_BENCH_FEED\n");
            return 2;
        }
        const char *count = getenv("GST_BENCH_FEED_COUNT");
        feed.count = count ? g_ascii_strtoull(count, NULL, 10) : 300;
        g_object_set(feed.appsrc, "caps", gst_sample_get_caps(feed.frame), "format", GST_FORMAT_TIME, "block",
                     TRUE, "max-bytes", (guint64)1, NULL);
        g_thread_new("feed", push_frames, &feed);
    }

    const char *seconds = getenv("GST_BENCH_SECONDS");
    if (seconds && atoi(seconds) > 0)
        g_timeout_add_seconds((guint)atoi(seconds), send_eos, p.pipeline);

    gint64 start = mono_ns();
    gst_element_set_state(p.pipeline, GST_STATE_PLAYING);
    GstBus *bus = gst_element_get_bus(p.pipeline);
    int warnings = 0, errors = 0;
    for (gboolean done = FALSE; !done;) {
        /* A short wait so the EOS timer (on the default main context) runs. */
        while (g_main_context_iteration(NULL, FALSE))
            ;
        GstMessage *msg = gst_bus_timed_pop_filtered(bus, 50 * GST_MSECOND,
                                                     GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_WARNING);
        if (!msg)
            continue;
        switch (GST_MESSAGE_TYPE(msg)) {
        case GST_MESSAGE_WARNING:
            warnings++;
            log_message(p.log, msg, "warning");
            break;
        case GST_MESSAGE_ERROR:
            errors++;
            log_message(p.log, msg, "error");
            done = TRUE;
            break;
        default:
            done = TRUE;
            break;
        }
        gst_message_unref(msg);
    }
    gint64 wall = mono_ns() - start;
    guint64 base = gst_element_get_base_time(p.pipeline);
    guint64 latency = p.sink && GST_IS_BASE_SINK(p.sink) ? gst_base_sink_get_latency(GST_BASE_SINK(p.sink)) : 0;
    gst_element_set_state(p.pipeline, GST_STATE_NULL);
    gboolean warm = p.frames > WARM_UP_FRAMES;
    fprintf(p.log,
            "end pid=%d frames=%" G_GUINT64_FORMAT " cpu_ns=%" G_GINT64_FORMAT " wall_ns=%" G_GINT64_FORMAT
            " warnings=%d errors=%d base_ns=%" G_GUINT64_FORMAT " latency_ns=%" G_GUINT64_FORMAT
            " steady_frames=%" G_GUINT64_FORMAT " steady_cpu_ns=%" G_GINT64_FORMAT " steady_wall_ns=%" G_GINT64_FORMAT
            "\n",
            (int)getpid(), p.frames, cpu_ns(), wall, warnings, errors, base, latency,
            warm ? p.frames - WARM_UP_FRAMES : 0, warm ? p.cpu_last - p.cpu_at_warm : 0,
            warm ? p.mono_last - p.mono_at_warm : 0);
    fclose(p.log);
    return errors ? 1 : 0;
}
