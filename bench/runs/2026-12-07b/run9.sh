#!/usr/bin/env bash
# GPU calls at the staged commit (.gpu/commit.txt: 55c34de, the second handshake after a slow
# context, join-live phases after exit); scripts from the tree at the call.
#   all      scripts/gpu-test.sh run $PARTS (default rust crash ffmpeg: the C API, Python and
#            the demo are as at their last GPU run, 06g), then the 4K ring
#            of HEAD, 1 subscriber, at full rate and paced at 40,000 fps, two rounds
#   quick    gpu-test.sh run ${PARTS:-rust crash}, then one round of startup.sh step join
#   minimal  gpu-test.sh run rust, then one join-live.py round with the driver's defaults
#            (LEANLONG=1 adds one round of startup.sh step leanlong within LIMIT, 190 s)
#   startup  STEPS (default "join leanlong") of scripts/gpu/startup.sh, REPEAT=2, within
#            LIMIT seconds (default 560): a subscriber joining a live stream against a
#            decoder starting on it (join-live.py), then the 4800-frame clip with one
#            hardware queue in the subscribers only
set -u
R=$OUT
cat .gpu/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
export CUFRAMES_RUNTIME_DIR=$(mktemp -d)
bench_line() {
    python3 -c 'import json,sys
d = json.load(sys.stdin)[0]
print(sys.argv[1], "fps %.0f p50 %.1f us p99 %.1f us slot waits %s publisher %.1f us/frame subscriber %.1f us/frame kernel copies %s dropped %s error %s" % (
      d["fps"], d["p50_us"], d["p99_us"], d.get("publisher_slot_waits"), d["publisher_cpu_us_per_frame"], d["subscriber_cpu_us_per_frame"],
      d.get("publisher_kernel_copies"), d.get("dropped"), d.get("error")))' "$1"
}
case $1 in
all)
    export OUT=/tmp/gpuout9a; rm -rf "$OUT"; mkdir -p "$OUT"
    timeout 470 scripts/gpu-test.sh run ${PARTS:-rust crash ffmpeg} >"$OUT/run.txt" 2>&1
    echo "gpu-test rc=$?"
    grep -E ': (ok|FAILED)$|passed|failed|skipped [0-9]|gpu-test:' "$OUT/run.txt" | tail -n 40
    grep -E '^(ok|FAIL|skip|xfail)|took' "$OUT/ffmpeg-gpu.log" | tail -n 40
    tar czf "$R/all.tgz" -C /tmp gpuout9a
    for r in 1 2; do
        for fps in 0 40000; do
            pace=(); [ $fps != 0 ] && pace=(--fps $fps)
            timeout 30 .gpu/bin/cuframes bench --memory cuda --size 3840x2160 --format nv12 --ring 8 --frames 20000 \
                --transports cuframes --subscribers 1 "${pace[@]}" --verify none --json 2>/dev/null |
                bench_line "round $r --fps $fps:"
        done
    done | tee "$R/ring.txt" ;;
quick)
    export OUT=/tmp/gpuout9a; rm -rf "$OUT"; mkdir -p "$OUT"
    timeout 300 scripts/gpu-test.sh run ${PARTS:-rust crash} >"$OUT/run.txt" 2>&1
    echo "gpu-test rc=$? at $((SECONDS - t0)) s"
    grep -E ': (ok|FAILED)$|test result|gpu-test:' "$OUT/run.txt" | tail -n 30
    grep -E 'slow_to_subscribe|connects again' "$OUT"/*.log | head
    tar czf "$R/all.tgz" -C /tmp gpuout9a
    export OUT=/tmp/gpuout9b; rm -rf "$OUT"; mkdir -p "$OUT"
    STEPS=join REPEAT=1 timeout "${LIMIT:-230}" scripts/gpu-test.sh run startup >"$OUT/run.txt" 2>&1
    echo "startup rc=$?"
    grep -v '^ *$' "$OUT/startup.log" | tail -n 40
    find "$OUT" -path '*/logs/*' -name '*.log' -size +200k -delete 2>/dev/null; rm -rf "$OUT/clips"
    tar czf "$R/startup.tgz" --exclude="*.mkv" --exclude="*.mp4" --exclude="*.h264" --exclude="*.hevc" -C /tmp gpuout9b ;;
minimal)
    export OUT=/tmp/gpuout9a; rm -rf "$OUT"; mkdir -p "$OUT"
    timeout 140 scripts/gpu-test.sh run rust >"$OUT/run.txt" 2>&1
    echo "gpu-test rust rc=$? at $((SECONDS - t0)) s"
    grep -E 'test result|gpu-test:|FAILED|panicked' "$OUT/run.txt" | tail -n 20
    grep -h -E 'slow_to_subscribe' "$OUT"/*.log | head
    tar czf "$R/rust.tgz" -C /tmp gpuout9a
    J=/tmp/gpuout9j; rm -rf "$J"; mkdir -p "$J/clips"
    LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib timeout 120 python3 scripts/gpu/join-live.py --ffmpeg "$PWD/.gpu/ffmpeg/bin/ffmpeg" \
        --clip "$J/clips/clip-1080p-40s.mp4" --seconds 40 --streams 16 --consumers 2 --repeat 1 --out "$J/join-live" >"$J/join-live.log" 2>&1
    echo "join-live (driver defaults) rc=$? at $((SECONDS - t0)) s"
    cat "$J/join-live/join.md"; tail -n 5 "$J/join-live.log"
    rm -rf "$J/clips"; tar czf "$R/join.tgz" -C /tmp gpuout9j
    [ "${LEANLONG:-0}" = 1 ] || { echo "took $((SECONDS - t0)) s"; exit 0; }
    export OUT=/tmp/gpuout9b; rm -rf "$OUT"; mkdir -p "$OUT"
    STEPS=leanlong REPEAT=1 timeout "${LIMIT:-190}" scripts/gpu-test.sh run startup >"$OUT/run.txt" 2>&1
    echo "leanlong rc=$?"
    grep -v '^ *$' "$OUT/startup.log" | tail -n 30
    find "$OUT" -path '*/logs/*' -name '*.log' -size +200k -delete 2>/dev/null; rm -rf "$OUT/clips"
    tar czf "$R/startup.tgz" --exclude="*.mkv" --exclude="*.mp4" --exclude="*.h264" --exclude="*.hevc" -C /tmp gpuout9b ;;
startup)
    export OUT=/tmp/gpuout9b; rm -rf "$OUT"; mkdir -p "$OUT"
    STEPS="${STEPS:-join leanlong}" REPEAT=2 timeout "${LIMIT:-560}" scripts/gpu-test.sh run startup >"$OUT/run.txt" 2>&1
    echo "startup rc=$?"
    grep -v '^ *$' "$OUT/startup.log" | tail -n 80
    find "$OUT" -path '*/logs/*' -name '*.log' -size +200k -delete 2>/dev/null; rm -rf "$OUT/clips"
    tar czf "$R/startup.tgz" --exclude="*.mkv" --exclude="*.mp4" --exclude="*.h264" --exclude="*.hevc" -C /tmp gpuout9b ;;
esac
echo "took $((SECONDS - t0)) s"
