#!/usr/bin/env bash
# The main job: a transcode through cuframes between two ffmpeg processes.
#
#   ffmpeg #1  decodes a clip and publishes its frames:   -f cuframes KEY
#   ffmpeg #2  subscribes to KEY and encodes them:         -f cuframes -i KEY -c:v ...
#
# With an NVIDIA GPU (NVDEC) the frames stay in GPU memory (CUDA IPC, no copy);
# without one they go through host shared memory. Builds libcuframes and the patched
# FFmpeg first (scripts/build-ffmpeg.sh; 8-20 minutes on 2 cores the first time),
# then checks that every frame arrived: the subscriber's frames are compared one by
# one (framemd5) with a direct decode of the same clip.
set -euo pipefail
cd "$(dirname "$0")/.."

frames=${FRAMES:-300}
size=${SIZE:-1280x720}

if [ -n "${FFMPEG:-}" ]; then
    ffmpeg=$FFMPEG # a patched ffmpeg built elsewhere (e.g. carried to a GPU machine)
else
    scripts/build-ffmpeg.sh
    ffmpeg=build/ffmpeg/bin/ffmpeg
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-demo.XXXXXX")
export CUFRAMES_RUNTIME_DIR="$work/run"
mkdir -p "$CUFRAMES_RUNTIME_DIR"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
key="demo-$$"
ff() { "$ffmpeg" -nostdin -hide_banner -loglevel error "$@"; }

echo "== making a test clip: $frames frames of $size H.264"
ff -f lavfi -i "testsrc2=size=$size:rate=30" -frames:v "$frames" -c:v libx264 -preset ultrafast \
    -pix_fmt yuv420p "$work/in.mp4"

decode=(-i "$work/in.mp4")
encoder=(-c:v libx264 -preset veryfast)
download=()
reference=(-pix_fmt yuv420p)
if ff -init_hw_device cuda=gpu -f lavfi -i testsrc2=size=64x64 -frames:v 1 -f null - 2>/dev/null; then
    echo "== CUDA device found: NVDEC decodes, frames stay in GPU memory"
    decode=(-hwaccel cuda -hwaccel_output_format cuda -i "$work/in.mp4")
    download=(-vf hwdownload,format=nv12)
    reference=(-pix_fmt nv12)
    if ff -init_hw_device cuda=gpu -f lavfi -i testsrc2=size=256x256 -frames:v 1 -c:v h264_nvenc \
        -f null - 2>/dev/null; then
        encoder=(-c:v h264_nvenc)
    else
        echo "   (no NVENC here: the subscriber downloads the frames for libx264)"
        encoder=(-vf hwdownload,format=nv12 -c:v libx264 -preset veryfast)
    fi
else
    echo "== no CUDA device: frames go through host shared memory"
fi

echo "== ffmpeg #1: decode and publish as '$key'"
"$ffmpeg" -nostdin -hide_banner -nostats -loglevel info "${decode[@]}" \
    -f cuframes -policy strict_wait -wait_subscribers 2 "$key" 2>"$work/publisher.log" &
publisher=$!

echo "== ffmpeg #2: subscribe to '$key' and encode ($(printf '%s ' "${encoder[@]}"))"
"$ffmpeg" -nostdin -hide_banner -loglevel warning -f cuframes -i "$key" "${encoder[@]}" \
    -y "$work/out.mp4" &
encode=$!
echo "== ffmpeg #3: subscribe to '$key' and checksum every frame"
"$ffmpeg" -nostdin -hide_banner -loglevel warning -f cuframes -i "$key" "${download[@]}" \
    -f framemd5 "$work/got.md5" &
check=$!

status=0
wait "$encode" || status=1
wait "$check" || status=1
wait "$publisher" || status=1
grep -h "^\[cuframes @" "$work/publisher.log" | sed 's/^/   publisher: /' || true

ff -i "$work/in.mp4" "${reference[@]}" -f framemd5 "$work/want.md5"
md5s() { grep -v '^#' "$1" | awk -F', *' '{ print $6 }'; }
got=$(md5s "$work/got.md5" | wc -l)
encoded=$(ff -i "$work/out.mp4" -f framemd5 - | grep -vc '^#')
if [ "$status" -ne 0 ] || ! cmp -s <(md5s "$work/want.md5") <(md5s "$work/got.md5"); then
    echo "demo: FAILED ($got of $frames frames identical to a direct decode; exit status $status)" >&2
    exit 1
fi
echo "demo: $frames of $frames frames reached both subscribers, identical to a direct decode;"
echo "      the transcode through cuframes wrote $encoded frames"
