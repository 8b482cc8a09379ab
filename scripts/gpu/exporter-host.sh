#!/usr/bin/env bash
# On the GPU machine: `cuframes exporter` beside a transcoding host in CUDA memory —
# N NVDEC publishers (ffmpeg, -f cuframes) with K subscribers each (`cuframes
# subscribe`, CUDA memory) — scraped every half second (`exporter --once`, each page
# kept); at the end, what it said of each stream and subscriber (received, lost,
# copied, who wrote it) is held against the subscribers' own summaries and the
# publishers' frame count, within a fixed allowance (scripts/gpu/exporter_check.py).
#
#   FFMPEG=... CUFRAMES_BIN=... scripts/gpu/exporter-host.sh [N] [K] [FRAMES]   (16 3 1200)
#   HWACCEL= ... (empty): software decode into host memory, to try it without a GPU
set -uo pipefail
: "${FFMPEG:?the staged ffmpeg}" "${CUFRAMES_BIN:?the staged cuframes}"
n=${1:-16}
k=${2:-3}
frames=${3:-1200}
out=${OUT:-$(mktemp -d)}
work=$(mktemp -d)
export CUFRAMES_RUNTIME_DIR=$work/rt
mkdir -p "$CUFRAMES_RUNTIME_DIR" "$work/pages"
clip=$work/clip.mp4
"$FFMPEG" -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=30 \
    -frames:v "$frames" -c:v libx264 -preset ultrafast -pix_fmt yuv420p -y "$clip" || { echo "no clip"; exit 1; }
pids=()
for s in $(seq 1 "$n"); do
    # shellcheck disable=SC2086 # HWACCEL is a list of options ("" on a machine without a GPU)
    "$FFMPEG" -nostdin -hide_banner -loglevel error -re ${HWACCEL--hwaccel cuda -hwaccel_output_format cuda} -i "$clip" \
        -f cuframes -policy strict_wait -wait_subscribers "$k" -wait_timeout 90 "ex$s" \
        2>"$work/pub$s.err" &
    pids+=($!)
done
sleep 1
for s in $(seq 1 "$n"); do
    for c in $(seq 1 "$k"); do
        "$CUFRAMES_BIN" subscribe "ex$s" --frames 0 --name "c$c" --wait-timeout 60s --timeout 30s --json \
            >"$work/sub$s-$c.json" 2>"$work/sub$s-$c.err" &
        pids+=($!)
    done
done
# One page every 500 ms, each kept.
(
    i=0
    while :; do
        "$CUFRAMES_BIN" exporter --once >"$work/pages/p$(printf %05d $i).prom" 2>/dev/null
        i=$((i + 1))
        sleep 0.5
    done
) &
scraper=$!
for p in "${pids[@]}"; do wait "$p"; done
kill "$scraper" 2>/dev/null
wait "$scraper" 2>/dev/null
# Held against the subscribers' summaries with a fixed allowance: the nominal 30 fps,
# a page every 0.5 s, the muxer's ring of 16 (scripts/gpu/exporter_check.py says why).
python3 "$(dirname "$0")/exporter_check.py" "$work" "$n" "$k" "$frames" 30 0.5 16 | tee "$out/exporter-host.txt"
status=${PIPESTATUS[0]}
rm -rf "$work"
exit $status
