#!/usr/bin/env bash
# What watching costs: the exporter's scrape time over many keys, and the ring
# benchmark with and without a scrape every second beside it (host memory).
#
#   scripts/bench-exporter.sh [KEYS] [SUBSCRIBERS_PER_KEY] [ROUNDS]   (default 64 4 5)
#
# Prints the figures; docs/benchmarks.md ("Monitoring") keeps them with the
# machine they ran on. A benchmark, not a test: it asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-64}
per=${2:-4}
rounds=${3:-5}
cargo build -q --release --locked -p cuframes-cli
bin=$PWD/target/release/cuframes
work=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-bench-exporter.XXXXXX")
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
export CUFRAMES_RUNTIME_DIR=$work/rt
mkdir -p "$CUFRAMES_RUNTIME_DIR"

echo "== $keys publishers (64x48 NV12, 30 fps, host memory) x $per subscribers"
for k in $(seq 1 "$keys"); do
    "$bin" publish "bx$$-$k" --memory host --size 64x48 --fps 30 --frames 0 --quiet >/dev/null 2>&1 &
    pids+=($!)
done
sleep 1
for k in $(seq 1 "$keys"); do
    for s in $(seq 1 "$per"); do
        "$bin" subscribe "bx$$-$k" --frames 0 --name "s$s" --wait-timeout 10s >/dev/null 2>&1 &
        pids+=($!)
    done
done
sleep 5
echo "== scrape time (cuframes exporter --once), $rounds rounds"
for r in $(seq 1 "$rounds"); do
    start=$(date +%s.%N)
    "$bin" exporter --once >"$work/page.prom"
    end=$(date +%s.%N)
    own=$(awk '/^cuframes_exporter_scrape_duration_seconds /{print $2}' "$work/page.prom")
    subs=$(awk '/^cuframes_subscribers\{/{n+=$2} END{print n}' "$work/page.prom")
    printf 'round %d: %.3f s whole process, %.3f s scraping (its own figure); %s keys, %s subscribers seen\n' \
        "$r" "$(echo "$end - $start" | bc)" "$own" \
        "$(awk '/^cuframes_exporter_keys /{print $2}' "$work/page.prom")" "$subs"
done
echo "== the ring (cuframes bench, 64x48 and 1920x1080, 1 subscriber, ~5 s a run) without and with a scrape"
echo "   of all $keys keys every second (the keys keep running beside both)"
bench() {
    "$bin" bench --memory host --size "$1" --ring 8 --subscribers 1 --frames "$2" --transports cuframes \
        --verify none --json 2>/dev/null |
        python3 -c 'import json,sys; d=json.load(sys.stdin)[0]; print("fps %.0f p50 %.1f us p99 %.1f us publisher %.2f us/frame" % (d["fps"], d["p50_us"], d["p99_us"], d["publisher_cpu_us_per_frame"]))'
}
for size_frames in "64x48 1000000" "1920x1080 12000"; do
    set -- $size_frames
    for r in $(seq 1 "$rounds"); do
        echo "$1 without: $(bench "$1" "$2")"
        ( while :; do "$bin" exporter --once >/dev/null; sleep 1; done ) &
        scraper=$!
        echo "$1 with:    $(bench "$1" "$2")"
        kill "$scraper"; wait "$scraper" 2>/dev/null || true
    done
done
