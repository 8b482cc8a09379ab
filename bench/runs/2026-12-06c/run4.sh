#!/usr/bin/env bash
# GPU call at the staged commit. Arg 1: crowd | suite.
#   crowd: 80 x 3 with one queue in every process at the FFmpeg components' default
#          timeouts (wait_timeout 30 s, timeout 5 s) -- H200 only
#   suite: rust (CUDA + backends), c, crash, python at HEAD
set -u
R=$OUT
cat .gpu/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
case $1 in
crowd)
    export OUT=/tmp/gpuout4a; rm -rf "$OUT"; mkdir -p "$OUT"
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
        CUDA_DEVICE_MAX_CONNECTIONS=1 STEPS=crowd REPEAT=1 timeout 400 scripts/gpu-test.sh run startup >"$OUT/run.txt" 2>&1
        echo "rc=$?"
        grep -v '^ *$' "$OUT/startup.log" | tail -n 8
        grep -rl -iE 'error|fail' "$OUT"/bench-host-crowd/*/logs 2>/dev/null | wc -l | sed 's/^/logs with error|fail: /'
    else
        echo "not an H200: 80 x 3 skipped"
    fi
    find "$OUT" -path '*/logs/*' -name '*.log' -size +200k -delete 2>/dev/null; rm -rf "$OUT/clips"
    tar czf "$R/crowd.tgz" --exclude="*.mkv" --exclude="*.mp4" --exclude="*.h264" --exclude="*.hevc" -C /tmp gpuout4a ;;
suite)
    export OUT=/tmp/gpuout4b; rm -rf "$OUT"; mkdir -p "$OUT"
    timeout 560 scripts/gpu-test.sh run rust c crash python >"$OUT/run.txt" 2>&1
    echo "rc=$?"
    grep -E '^(ok|FAIL|skip|xfail)|passed|failed|gpu-test:' "$OUT/run.txt" | tail -n 30
    tar czf "$R/suite.tgz" -C /tmp gpuout4b ;;
wake)
    # The publisher's CPU a frame at full rate and paced (the copy call waits for the GPU
    # at full rate), then what waking N subscribers costs, eventfd against one futex.
    for subs in 1 8; do
        for fps in 0 40000 20000; do
            echo "== ring 4K NV12, ring 8, $subs subscriber(s), --fps $fps"
            timeout 120 .gpu/bin/cuframes bench --memory cuda --size 3840x2160 --ring 8 --frames 20000 \
                --transports cuframes --subscribers $subs --fps $fps --verify none 2>&1 | tail -n 3
        done
    done
    timeout 120 .gpu/tests/wake-cost 3000 1 2 4 8 16 ;;
esac
echo "took $((SECONDS - t0)) s"
