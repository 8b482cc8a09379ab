#!/usr/bin/env bash
# GPU smoke tests of the patched FFmpeg: CUDA frames (NVDEC, hwupload_cuda) given to
# the cuframes muxer, CUDA filters after the input device, a memory=cuda publisher.
# Needs an NVIDIA GPU and driver; no CUDA toolkit. The muxer downloads CUDA frames to
# host memory: the input device and filter read host memory only, so far.
#
#   tests/ffmpeg/gpu.sh [WORD...]     as tests/ffmpeg/run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."

. tests/ffmpeg/lib.sh
SUMMARY_LABEL="ffmpeg gpu tests"

if ! "$FFMPEG" -hide_banner -loglevel error -init_hw_device cuda=gpu -f lavfi -i nullsrc=s=64x64 \
        -frames:v 1 -f null - 2>"$WORK/cuda.err"; then
    echo "no usable CUDA device:"
    sed 's/^/  /' "$WORK/cuda.err"
    summary
    exit 1
fi

CLIP="$WORK/clip.mp4"
ff 120 -f lavfi -i "testsrc2=size=1280x720:rate=30" -frames:v 150 -c:v libx264 \
    -preset ultrafast -pix_fmt yuv420p "$CLIP" 2>"$WORK/clip.err" || { show "$WORK/clip.err"; exit 1; }

# gpu_pair NAME N REF_ARGS -- PUB_ARGS: the publisher ffmpeg (PUB_ARGS, then -f cuframes)
# against a subscriber's framemd5; the reference is ffmpeg REF_ARGS -f framemd5.
gpu_pair() {
    local name=$1 n=$2 t=$SECONDS ok=1
    shift 2
    local ref=() pub=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do ref+=("$1"); shift; done
    shift
    pub=("$@")
    local d="$WORK/$(echo "$name" | tr -c 'a-z0-9\n' '_')"
    mkdir -p "$d"
    newkey
    ff 120 "${ref[@]}" -f framemd5 - >"$d/ref.md5" 2>"$d/ref.err" || { echo "  reference failed"; ok=0; }
    bg 120 /dev/null "$d/pub.err" "${pub[@]}" -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local p=$BGPID
    ff 120 -f cuframes -i "$KEY" -f framemd5 - >"$d/sub.md5" 2>"$d/sub.err" ||
        { echo "  subscriber failed"; ok=0; }
    waitrc $p || { echo "  publisher failed"; ok=0; }
    same_frames "$name" "$d/ref.md5" "$d/sub.md5" "$n" || ok=0
    [ $ok = 1 ] || show "$d/ref.err" "$d/pub.err" "$d/sub.err"
    result "$name" $ok "($((SECONDS - t)) s)"
}

selected hwupload && gpu_pair "hwupload_cuda frames into the muxer" 100 \
    -f lavfi -i "testsrc2=size=1280x720:rate=25" -frames:v 100 -pix_fmt nv12 -- \
    -f lavfi -i "testsrc2=size=1280x720:rate=25" -frames:v 100 -vf "format=nv12,hwupload_cuda"

selected nvdec && gpu_pair "NVDEC (hwaccel cuda) frames into the muxer" 150 \
    -i "$CLIP" -pix_fmt nv12 -- \
    -hwaccel cuda -hwaccel_output_format cuda -i "$CLIP"

selected cuvid && gpu_pair "h264_cuvid frames into the muxer" 150 \
    -i "$CLIP" -pix_fmt nv12 -- \
    -hwaccel cuda -hwaccel_output_format cuda -c:v h264_cuvid -i "$CLIP"

# Subscriber side: frames from the input device through CUDA filters.
test_cuda_filters() {
    local d="$WORK/filters" t=$SECONDS ok=1
    mkdir -p "$d"
    newkey
    bg 120 /dev/null "$d/pub.err" -i "$CLIP" -pix_fmt nv12 -f cuframes -policy strict_wait \
        -wait_subscribers 1 "$KEY"
    local p=$BGPID
    ff 120 -init_hw_device cuda=gpu -filter_hw_device gpu -f cuframes -i "$KEY" \
        -vf "hwupload_cuda,scale_cuda=640:360,hwdownload,format=nv12" -f framemd5 - \
        >"$d/sub.md5" 2>"$d/sub.err" || { echo "  subscriber failed"; ok=0; }
    waitrc $p || { echo "  publisher failed"; ok=0; }
    local n
    n=$(md5s "$d/sub.md5" | wc -l)
    [ "$n" = 150 ] || { echo "  $n frames"; ok=0; }
    grep -q "640x360" "$d/sub.md5" || { echo "  not scaled"; ok=0; }
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err"
    result "input device -> hwupload_cuda,scale_cuda" $ok "($n frames, $((SECONDS - t)) s)"
}
selected filters && test_cuda_filters

test_cuda_memory() {
    local d="$WORK/cuda" ok=1 rc prc
    mkdir -p "$d"
    newkey
    bg 60 /dev/null "$d/pub.err" -re -hwaccel cuda -hwaccel_output_format cuda -i "$CLIP" \
        -f cuframes -memory cuda "$KEY"
    local p=$BGPID
    wait_published || { echo "  the publisher did not start"; ok=0; }
    ff 60 -xerror -f cuframes -i "$KEY" -f null - 2>"$d/sub.err"
    rc=$?
    waitrc $p
    prc=$?
    [ $prc = 0 ] || { echo "  the memory=cuda publisher exited $prc"; ok=0; }
    [ $rc != 0 ] && [ $rc != 124 ] && grep -q "CUDA memory" "$d/sub.err" ||
        { echo "  subscriber: exit $rc, no clear message"; ok=0; }
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err"
    result "memory=cuda publisher; input device refuses it clearly" $ok "(exit $rc)"
    [ $ok = 1 ] && echo "     $(grep -i "CUDA memory" "$d/sub.err" | head -n 1)"
}
selected memory && test_cuda_memory

test_nvenc() {
    local d="$WORK/nvenc" ok=1
    mkdir -p "$d"
    newkey
    bg 60 /dev/null "$d/pub.err" -i "$CLIP" -pix_fmt nv12 -f cuframes -policy strict_wait \
        -wait_subscribers 1 "$KEY"
    local p=$BGPID
    ff 60 -xerror -f cuframes -i "$KEY" -c:v h264_nvenc "$d/out.mp4" 2>"$d/sub.err"
    local rc=$?
    waitrc $p
    if [ $rc = 0 ]; then
        result "input device -> h264_nvenc" 1
    else
        echo "     h264_nvenc is not available here (exit $rc): $(grep -i "nvenc\|encoder" "$d/sub.err" | tail -n 1)"
    fi
}
selected nvenc && test_nvenc

summary
