#!/usr/bin/env bash
# The GStreamer elements on CUDA memory, on the GPU machine (which has no GStreamer
# and no Rust): Debian trixie's GStreamer 1.26 from .gpu/gstreamer.tar.xz
# (scripts/gpu/gstreamer.sh stage), the plugin and the CLI built here and staged as
# .gpu/lib/gstreamer/libgstcuframes.so and .gpu/bin/cuframes (STAGE names another
# folder than .gpu).
#
#   tests/gstreamer/gpu.sh [TEST...]   from the repository root; logs under $OUT (or a
#                                      temporary folder)
#
# Prints "GStreamer GPU: N passed, N failed, N skipped" last.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
STAGE=${STAGE:-.gpu}
. scripts/gpu/gstreamer.sh env
CLI=$PWD/$STAGE/bin/cuframes
LOGS=${OUT:-$(mktemp -d)}/gstreamer
mkdir -p "$LOGS"
export CUFRAMES_RUNTIME_DIR=$(mktemp -d)
CAPS="video/x-raw,format=NV12,width=640,height=360,framerate=30/1"
FRAME=$((640 * 360 * 3 / 2))
passed=0 failed=0 skipped=0

# check NAME COMMAND...: one test; its output in $LOGS/NAME.log.
check() {
    local name=$1
    shift
    [ ${#SELECTED[@]} -eq 0 ] || [[ " ${SELECTED[*]} " == *" $name "* ]] || return 0
    if "$@" >"$LOGS/$name.log" 2>&1; then
        echo "ok   $name"
        passed=$((passed + 1))
    else
        echo "FAIL $name"
        tail -n 15 "$LOGS/$name.log" | sed 's/^/     /'
        failed=$((failed + 1))
    fi
}

wait_socket() {
    local i
    for i in $(seq 200); do
        [ -S "$CUFRAMES_RUNTIME_DIR/$1.sock" ] && return 0
        sleep 0.05
    done
    echo "no socket for $1"
    return 1
}

same() { # WHAT A B: byte for byte, and not empty
    cmp "$2" "$3" && [ -s "$2" ] && echo "$1: $(($(stat -c %s "$2") / FRAME)) frames byte for byte"
}

# GStreamer 1.26 loads the plugin (built against 1.22) and has its CUDA elements.
t_loads() {
    gst-inspect-1.0 --version
    gst-inspect-1.0 cuframessrc | grep -E "memory:CUDAMemory|cuda-device-id"
    gst-inspect-1.0 cuframessink | grep -E "memory:CUDAMemory|cuda-share"
    gst-inspect-1.0 nvcodec | grep -E "cudaupload|cudadownload|cudaipcsink|cudaipcsrc|nvh264dec"
}

# A CUDA publisher read in CUDA memory (wrapped in place on 1.26) and downloaded: the
# same bytes as the same frames from a host publisher.
t_cuda_publisher() {
    local memory
    for memory in cuda host; do
        timeout 30 "$CLI" publish pat-$memory --memory $memory --size 640x360 --fps 0 --frames 60 \
            --policy strict-wait --wait-subscribers 1 &
        wait_socket pat-$memory || return 1
        local chain=()
        [ $memory = cuda ] && chain=(! cudadownload)
        GST_DEBUG=cuframessrc:5 timeout 60 gst-launch-1.0 cuframessrc key=pat-$memory num-buffers=60 \
            "${chain[@]}" ! video/x-raw,format=NV12 ! filesink location="$LOGS/$memory.raw" \
            2>"$LOGS/src-$memory.debug" || return 1
        wait
    done
    grep -m1 "cuda memory" "$LOGS/src-cuda.debug"
    same "CUDA publisher, GStreamer subscriber" "$LOGS/host.raw" "$LOGS/cuda.raw"
}

# videotestsrc ! cudaupload ! cuframessink (CUDA memory in, device to device) read
# back by cuframessrc in CUDA memory: videotestsrc's bytes.
t_cuda_sink() {
    timeout 30 gst-launch-1.0 -q videotestsrc num-buffers=60 ! "$CAPS" ! filesink location="$LOGS/ref.raw" || return 1
    timeout 60 gst-launch-1.0 videotestsrc num-buffers=60 ! "$CAPS" ! cudaupload ! \
        "video/x-raw(memory:CUDAMemory),format=NV12" ! cuframessink key=up wait-subscribers=1 policy=strict-wait &
    wait_socket up || return 1
    "$CLI" inspect up | grep -i "memory" | head -n 3
    timeout 60 gst-launch-1.0 cuframessrc key=up num-buffers=60 ! cudadownload ! video/x-raw,format=NV12 ! \
        filesink location="$LOGS/up.raw" || return 1
    wait
    same "GStreamer CUDA publisher, GStreamer subscriber" "$LOGS/ref.raw" "$LOGS/up.raw"
}

# NVDEC in GStreamer (nvh264dec, CUDA memory) published, read by the CLI's subscriber
# (it counts and hashes nothing of a clip: frames and losses only).
t_nvh264dec() {
    local clip
    clip=$STAGE/clips/h264-a53cc.h264
    [ -f "$clip" ] || { echo "no H.264 clip staged ($clip)"; return 1; }
    timeout 60 gst-launch-1.0 filesrc location="$clip" ! h264parse ! nvh264dec ! \
        cuframessink key=dec wait-subscribers=1 policy=strict-wait &
    wait_socket dec || return 1
    timeout 60 "$CLI" subscribe dec --json --wait-timeout 10s
    wait
}

SELECTED=("$@")
check loads t_loads
check cuda_publisher t_cuda_publisher
check cuda_sink t_cuda_sink
check nvh264dec t_nvh264dec
echo "GStreamer GPU: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
