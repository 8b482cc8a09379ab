#!/usr/bin/env bash
# What watching costs: the exporter's scrape time over many keys, then with
# publishers that never answer beside them, and the ring benchmark with and without a
# scrape every second beside it (host memory).
#
#   scripts/bench-exporter.sh [KEYS] [SUBSCRIBERS_PER_KEY] [ROUNDS]   (default 64 4 5)
#   WEDGED="10 100" (default): the counts of wedged publishers to scrape beside the
#   keys: each a listening socket that never answers, its lock held, no /dev/shm entry
#   (the layout where the exporter asks for headers over the socket); RING=0 skips the
#   ring benchmark.
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
for wedged in ${WEDGED-10 100}; do
    # Holds $wedged listening sockets (never accepted) and their locks until killed.
    python3 - "$CUFRAMES_RUNTIME_DIR" "wx$$-$wedged" "$wedged" <<'PY' &
import fcntl, os, signal, socket, sys
where, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
held = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.bind(f"{where}/{prefix}-{i}.sock")
    s.listen(64)
    lock = open(f"{where}/{prefix}-{i}.lock", "w")
    fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    held += [s, lock]
open(f"{where}/{prefix}.ready", "w").close()
signal.sigwait([signal.SIGTERM])
for i in range(n):
    for ext in ("sock", "lock"):
        os.unlink(f"{where}/{prefix}-{i}.{ext}")
os.unlink(f"{where}/{prefix}.ready")
PY
    holder=$!
    while [ ! -e "$CUFRAMES_RUNTIME_DIR/wx$$-$wedged.ready" ]; do
        kill -0 "$holder" 2>/dev/null || { echo "bench-exporter: the wedged publishers did not start" >&2; exit 1; }
        sleep 0.05
    done
    echo "== scrape time with $wedged publishers that never answer beside the keys, $rounds rounds"
    for r in $(seq 1 "$rounds"); do
        start=$(date +%s.%N)
        "$bin" exporter --once >"$work/page.prom"
        end=$(date +%s.%N)
        printf 'round %d: %.3f s whole process; %s up, %s unreadable, %s scrape errors\n' "$r" \
            "$(echo "$end - $start" | bc)" \
            "$(awk '/^cuframes_publisher_up\{/{n+=$2} END{print n}' "$work/page.prom")" \
            "$(awk '/^cuframes_key_unreadable\{/{n+=$2} END{print n}' "$work/page.prom")" \
            "$(awk '/^cuframes_exporter_scrape_errors_total /{print $2}' "$work/page.prom")"
    done
    kill "$holder"; wait "$holder" 2>/dev/null || true
done
[ "${RING:-1}" = 0 ] && exit 0
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
