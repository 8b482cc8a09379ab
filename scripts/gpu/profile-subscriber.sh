#!/usr/bin/env bash
# On the GPU machine: where a subscriber ffmpeg's CPU goes. NVDEC publishes a
# 1080p clip (-f cuframes, strict_wait); a subscriber ffmpeg reads it into -f null
# with copy=never (the slots themselves) and with copy=always (device copy, slot
# released at once), and, when strace is there, once under `strace -c -f`
# (system calls by count and time). CPU per frame of the subscriber alone, from
# the clip played once and twice (the difference is the steady state).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${FFMPEG:?set FFMPEG to the staged patched ffmpeg}"
out=${OUT:-$(mktemp -d)}
work=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-profile.XXXXXX")
export CUFRAMES_RUNTIME_DIR=$work/run
mkdir -p "$CUFRAMES_RUNTIME_DIR"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
ff() { "$FFMPEG" -nostdin -hide_banner -nostats -loglevel error "$@"; }
ff -f lavfi -i testsrc2=size=1920x1080:rate=30 -frames:v 1200 -c:v libx264 -preset ultrafast \
    -pix_fmt yuv420p "$work/c1.mp4"
ff -stream_loop 1 -i "$work/c1.mp4" -c copy "$work/c2.mp4"
echo "tools: $(command -v strace perf ltrace 2>/dev/null | tr '\n' ' ')"
sub_cpu() { # CLIP COPY [PREFIX...]: the subscriber's user+sys seconds
    local clip=$1 copy=$2 key="prof-$RANDOM"
    shift 2
    ff -hwaccel cuda -hwaccel_output_format cuda -i "$clip" -f cuframes -policy strict_wait \
        -wait_subscribers 1 "$key" &
    local pub=$!
    local t
    t=$( { TIMEFORMAT='%U %S'; time "$@" "$FFMPEG" -nostdin -hide_banner -nostats -loglevel error \
        -f cuframes -copy "$copy" -i "$key" -f null - >/dev/null 2>"$work/sub.err"; } 2>&1 )
    wait $pub
    echo "$t" | awk '{ printf "%.3f", $1 + $2 }'
}
for copy in never always; do
    one=$(sub_cpu "$work/c1.mp4" $copy)
    two=$(sub_cpu "$work/c2.mp4" $copy)
    echo "subscriber copy=$copy: 1200 frames $one s CPU, 2400 frames $two s CPU," \
        "steady $(awk "BEGIN { printf \"%.1f\", 1e6 * ($two - $one) / 1200 }") us/frame"
done
if command -v strace >/dev/null; then
    sub_cpu "$work/c2.mp4" never strace -c -f -o "$out/strace-subscriber.txt" >/dev/null
    echo "strace -c -f of a 2400-frame subscriber (copy=never), top entries:"
    head -n 25 "$out/strace-subscriber.txt"
fi
