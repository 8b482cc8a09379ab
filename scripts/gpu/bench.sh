#!/usr/bin/env bash
# On the GPU machine (scripts/gpu-test.sh run bench): the GPU numbers of
# docs/benchmarks.md, written under $OUT.
#   1. the ring alone: `cuframes bench --memory cuda`, 4K NV12, 1 subscriber,
#      100,000 frames (ready = event wait queued; without whole-frame checks;
#      then ready = bytes on the device)
#   2. cuframes vs pipe vs shm-copy with CUDA frames: 4K 1 subscriber (with the
#      latency plot) and 1080p 4 subscribers
#   3. the FFmpeg pipelines: scripts/bench-ffmpeg.sh (1080p and 4K); not with
#      the argument `ring`
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${CUFRAMES_BIN:?set CUFRAMES_BIN to the staged cuframes CLI}"
: "${FFMPEG:?set FFMPEG to the staged patched ffmpeg}"
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/cuframes-gpu-bench.XXXXXX")}
export CUFRAMES_RUNTIME_DIR
CUFRAMES_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-gpu-bench-run.XXXXXX")
work=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-gpu-bench-work.XXXXXX")
failed=0
bench() { # NAME ARGS...: one cuframes bench run, appended to $out/bench-cuframes.txt
    local name=$1
    shift
    echo "== cuframes bench $*"
    {
        echo "## $name: cuframes bench $*"
        if timeout 300 "$CUFRAMES_BIN" bench "$@" --json 2>"$work/err"; then
            :
        else
            echo "FAILED:"
            failed=$((failed + 1))
        fi
        tail -n 20 "$work/err"
    } >>"$out/bench-cuframes.txt"
    tail -n 22 "$out/bench-cuframes.txt"
}
ring=(--memory cuda --format nv12 --size 3840x2160 --subscribers 1 --ring 4 --policy strict_wait
    --frames 100000 --transports cuframes --verify-every 1000)
bench ring-4k "${ring[@]}"
# The same without the whole-frame checks: each one (a 12 MB copy back to the host
# and a compare, ~20 ms) stalls the ring, so this is the ring's own rate.
bench ring-4k-unverified "${ring[@]}" --verify-every 0
bench ring-4k-cuda-sync "${ring[@]}" --cuda-sync
bench transports-4k --memory cuda --size 3840x2160 --subscribers 1 --frames 2000 \
    --plot "$out/latency-cuda-4k.svg"
bench transports-1080p-4sub --memory cuda --size 1920x1080 --subscribers 4 --frames 2000
if [ "${1:-bench}" = ring ]; then
    echo "== (ring only: FFmpeg pipelines skipped)"
elif echo "== scripts/bench-ffmpeg.sh (MODE=cuda)" && ! FFMPEG=$FFMPEG OUT=$out REPEAT=${REPEAT:-2} timeout 560 scripts/bench-ffmpeg.sh; then
    echo "bench-ffmpeg FAILED"
    failed=$((failed + 1))
fi
rm -rf "$CUFRAMES_RUNTIME_DIR" "$work"
echo "gpu bench: $failed failed run(s)"
[ "$failed" -eq 0 ]
