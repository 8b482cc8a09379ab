#!/usr/bin/env bash
# cuframessink ! cuframessrc side by side with GStreamer's own cudaipcsink !
# cudaipcsrc (gst-plugins-bad nvcodec: ipc-mode legacy with io-mode copy and import,
# and ipc-mode mmap), in one run on the GPU machine.
#
#   scripts/gpu/gst-bench.sh stage   here: builds the probe (scripts/gpu/gst-bench-probe.c,
#                                    against bookworm's GStreamer) into $STAGE/tests
#   scripts/gpu/gst-bench.sh run     there, from the repository root, with the stage of
#                                    tests/gstreamer/gpu.sh (GStreamer 1.26, the plugin,
#                                    FFmpeg for the clips, the copy counter): every case;
#                                    the table on stdout and in $OUT/gst-bench/table.md,
#                                    the raw logs in $OUT/gst-bench/logs.tar.xz
#
# Cases, each with 1 and 4 consumers (GST_BENCH_CONSUMERS), every consumer
# "SRC ! identity name=probe ! fakesink sync=false", timed by gst-bench-probe:
#   decoder  filesrc ! h264parse ! nvh264dec ! SINK, 1080p and 4K NV12: both bound by
#            the decoder; the copy counter (CUPTI) runs in a second, 1080p pass
#   fast     one frame already on the GPU pushed as fast as the sink takes it, for
#            FAST_SECONDS (2): each consumer's steady rate
#   slow     a 30 fps stream, one consumer taking 15 fps (who loses frames, who is told)
#   restart  the producer killed (-9) and started again (who carries on)
# STAGE names another folder than .gpu. GST_BENCH_HOST=1 runs the cases that need no
# GPU (fast, slow, restart) on host memory with this machine's GStreamer and the plugin
# in $GST_PLUGIN_PATH, cuframes only: the script's own check (tests/gstreamer/run.sh),
# with GST_BENCH_PROBE (the probe), GST_BENCH_RAW (the raw folder), FAST_SIZES and
# GST_BENCH_CONSUMERS to keep it short.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
STAGE=${STAGE:-.gpu}
PROBE=${GST_BENCH_PROBE:-$PWD/$STAGE/tests/gst-bench-probe}

if [ "${1:-}" = stage ]; then
    mkdir -p "$(dirname "$PROBE")"
    # shellcheck disable=SC2046 # pkg-config output is a list of flags
    cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$PROBE" scripts/gpu/gst-bench-probe.c \
        $(pkg-config --cflags --libs gstreamer-1.0 gstreamer-base-1.0)
    exit
fi
[ "${1:-}" = run ] || { echo "usage: scripts/gpu/gst-bench.sh stage | run" >&2; exit 2; }

HOST=${GST_BENCH_HOST:-0}
if [ "$HOST" = 1 ]; then
    TRANSPORTS=cuframes
else
    . scripts/gpu/gstreamer.sh env
    . scripts/lib/cupti.sh
    TRANSPORTS="cuframes cudaipc-copy cudaipc-import cudaipc-mmap"
fi
RESULTS=${OUT:-/tmp}/gst-bench
RAW=${GST_BENCH_RAW:-/tmp/gst-bench-raw}
CLIPS=/tmp/gst-bench-clips
rm -rf "$RAW" && mkdir -p "$RESULTS" "$RAW" "$CLIPS"
export CUFRAMES_RUNTIME_DIR=$RAW/runtime
mkdir -p "$CUFRAMES_RUNTIME_DIR"
CONSUMERS=${GST_BENCH_CONSUMERS:-1 4}
COUNTER=$PWD/$STAGE/lib/memcpy-count.so
CUPTI=$([ "$HOST" = 1 ] || find_cupti)

ff() {
    LD_LIBRARY_PATH=$PWD/$STAGE/ffmpeg/lib "$PWD/$STAGE/ffmpeg/bin/ffmpeg" -hide_banner -nostdin -loglevel error "$@"
}

clip() { # NAME SIZE FRAMES: an H.264 elementary stream of testsrc2
    [ -s "$CLIPS/$1.h264" ] || ff -f lavfi -i "testsrc2=size=$2:rate=30" -frames:v "$3" -c:v libx264 \
        -preset ultrafast -pix_fmt yuv420p -bsf:v h264_mp4toannexb -f h264 -y "$CLIPS/$1.h264"
}

sink_of() { # TRANSPORT KEY CONSUMERS
    case $1 in
    cuframes) echo "cuframessink name=sink key=$2 sync=${SYNC:-false} policy=${POLICY:-strict-wait} wait-subscribers=$3" ;;
    cudaipc-mmap) echo "cudaipcsink name=sink address=$RAW/$2.ipc ipc-mode=mmap sync=${SYNC:-false}" ;;
    cudaipc-*) echo "cudaipcsink name=sink address=$RAW/$2.ipc ipc-mode=legacy sync=${SYNC:-false}" ;;
    esac
}

src_of() { # TRANSPORT KEY
    case $1 in
    cuframes) echo "cuframessrc key=$2 wait-timeout=20000 ${SRC_EXTRA:-}" ;;
    cudaipc-copy) echo "cudaipcsrc address=$RAW/$2.ipc io-mode=copy connection-timeout=20" ;;
    cudaipc-import) echo "cudaipcsrc address=$RAW/$2.ipc io-mode=import connection-timeout=20" ;;
    cudaipc-mmap) echo "cudaipcsrc address=$RAW/$2.ipc connection-timeout=20" ;;
    esac
}

counted() { # ROLE DIR command...: with COUNT=1, under the copy counter
    local role=$1 dir=$2
    shift 2
    if [ "${COUNT:-0}" = 1 ]; then
        CUDA_INJECTION64_PATH=$COUNTER CUFRAMES_CUPTI=$CUPTI CUFRAMES_MEMCPY_LOG=$dir/$role.count "$@"
    else
        "$@"
    fi
}

# run_case NAME TRANSPORT CONSUMERS SOURCE...: consumers first (both kinds wait for
# their producer), then the producer; GPU memory sampled meanwhile.
run_case() {
    local name=$1 transport=$2 n=$3 dir=$RAW/$1 key pids=() i
    shift 3
    mkdir -p "$dir"
    key=$(echo "$name" | tr -c 'a-z0-9\n' -)
    echo "$transport $n" >"$dir/case"
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 200 >"$dir/gpumem.csv" 2>/dev/null &
    local sampler=$!
    for i in $(seq "$n"); do
        # shellcheck disable=SC2046 # the element descriptions are lists of words
        counted consumer-$i "$dir" timeout 40 "$PROBE" "$dir/consumer-$i.log" $(src_of "$transport" "$key") ! \
            ${CONSUMER_FILTER:-} identity name=probe ! fakesink name=sink sync=false >"$dir/consumer-$i.err" 2>&1 &
        pids+=($!)
    done
    sleep 0.5
    # shellcheck disable=SC2046
    GST_BENCH_SECONDS=${PRODUCER_SECONDS:-0} counted producer "$dir" timeout 40 "$PROBE" "$dir/producer.log" "$@" ! identity name=probe ! \
        $(sink_of "$transport" "$key" "$n") >"$dir/producer.err" 2>&1
    for i in "${pids[@]}"; do wait "$i"; done
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    echo "  $name: $(tail -n 1 "$dir/producer.log" 2>/dev/null | cut -d' ' -f3), consumers:" \
        "$(for i in $(seq "$n"); do tail -n 1 "$dir/consumer-$i.log" 2>/dev/null | cut -d' ' -f3; done | tr '\n' ' ')"
}

feed() { # SIZE: one NV12 frame made on the CPU and uploaded once, for appsrc name=feed
    local w=${1%x*} h=${1#*x} upload="cudaupload name=upload ! video/x-raw(memory:CUDAMemory)"
    [ "$HOST" = 1 ] && upload="identity name=upload"
    export GST_BENCH_FEED="videotestsrc num-buffers=1 ! video/x-raw,format=NV12,width=$w,height=$h,framerate=30/1 ! $upload ! appsink name=frame"
}

decoder_cases() { # both bound by nvh264dec; then the copies counted (1080p)
    echo "== decoder: nvh264dec ! SINK"
    for size in 1080p 4k; do
        for n in $CONSUMERS; do
            for t in $TRANSPORTS; do
                run_case "decoder-$size-$n-$t" "$t" "$n" filesrc location="$CLIPS/$size.h264" ! h264parse ! nvh264dec ! \
                    "video/x-raw(memory:CUDAMemory)"
            done
        done
    done
    echo "== decoder, counting copies (1080p)"
    for n in $CONSUMERS; do
        for t in $TRANSPORTS; do
            COUNT=1 run_case "copies-1080p-$n-$t" "$t" "$n" filesrc location="$CLIPS/1080p.h264" ! h264parse ! \
                nvh264dec ! "video/x-raw(memory:CUDAMemory)"
        done
    done
}

if [ "$HOST" = 1 ]; then
    echo "GStreamer $(gst-inspect-1.0 --version | sed -n 2p); host memory, no GPU"
    gst-inspect-1.0 cuframessrc >/dev/null || exit 1
else
    echo "GStreamer $(gst-inspect-1.0 --version | sed -n 2p); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
    gst-inspect-1.0 cuframessrc >/dev/null && gst-inspect-1.0 cudaipcsink >/dev/null || exit 1
    clip 1080p 1920x1080 300 && clip 4k 3840x2160 120 || exit 1
    decoder_cases
fi
echo "== fast: frames already on the GPU, as fast as taken, for ${FAST_SECONDS:-2} s"
for size in ${FAST_SIZES:-1920x1080 3840x2160}; do
    feed $size
    for n in $CONSUMERS; do
        for t in $TRANSPORTS; do
            PRODUCER_SECONDS=${FAST_SECONDS:-2} GST_BENCH_FEED_COUNT=1000000000 \
                run_case "fast-${size#*x}p-$n-$t" "$t" "$n" appsrc name=feed
        done
    done
done

echo "== slow: a 30 fps stream, a consumer taking 15 fps"
feed 1920x1080
slow=(cuframes-drop-oldest cuframes-strict-wait)
[ "$HOST" = 1 ] || slow+=(cudaipc-copy cudaipc-import cudaipc-mmap)
for t in "${slow[@]}"; do
    policy=${t#cuframes-}
    POLICY=$policy SYNC=true CONSUMER_FILTER="identity sleep-time=66666 !" GST_BENCH_FEED_COUNT=90 \
        run_case "slow-$t" "${t%%-[ds]*}" 1 appsrc name=feed
done

echo "== restart: the producer killed after 2 s, another started at 3 s"
restart=(cuframes)
[ "$HOST" = 1 ] || restart+=(cudaipc-copy cudaipc-mmap)
for t in "${restart[@]}"; do
    dir=$RAW/restart-$t key=restart-$t
    mkdir -p "$dir"
    echo "$t 1" >"$dir/case"
    # shellcheck disable=SC2046
    GST_BENCH_SECONDS=8 timeout 60 "$PROBE" "$dir/consumer-1.log" $(SRC_EXTRA="reconnect=true" src_of "$t" "$key") ! \
        identity name=probe ! fakesink name=sink sync=false >"$dir/consumer-1.err" 2>&1 &
    consumer=$!
    sleep 0.5
    for run in 1 2; do
        # shellcheck disable=SC2046
        GST_BENCH_FEED_COUNT=150 timeout 60 "$PROBE" "$dir/producer-$run.log" appsrc name=feed ! identity name=probe ! \
            $(POLICY=drop-oldest SYNC=true sink_of "$t" "$key" 0) >"$dir/producer-$run.err" 2>&1 &
        if [ $run = 1 ]; then
            sleep 2
            pkill -9 -f "$dir/producer-1.log"
            sleep 1
            python3 -c 'import time; print(time.monotonic_ns())' >"$dir/restarted"
        fi
    done
    wait
    echo "  restart-$t: consumer $(tail -n 1 "$dir/consumer-1.log" | cut -d' ' -f3)"
done

python3 scripts/gpu/gst-bench-report.py "$RAW" | tee "$RESULTS/table.md"
# The fast cases log tens of thousands of buffers a second: their end lines are kept.
for log in "$RAW"/fast-*/*.log; do
    [ -f "$log" ] && sed -i '/^buf /d' "$log"
done
tar -C "$RAW" --exclude=runtime -cJf "$RESULTS/logs.tar.xz" .
