#!/usr/bin/env bash
# GPU call at the staged commit (issue 27):
#   1. the driver alone: a 4K frame's copy by copy call against by kernel launch
#      (scripts/gpu/copy-call-cost.py), with the driver's default queues and with one
#   2. H200 only: STEPS="phaseslean leanlong": start-up by phase and the 4800-frame
#      clip with one hardware queue in the subscribers only (REPEAT=2)
set -u
R=$OUT
cat .gpu/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
timeout 120 python3 scripts/gpu/copy-call-cost.py --frames 10000 --rounds 2 >"$R/copy-call-cost.txt" 2>&1
echo "copycost rc=$?"; cat "$R/copy-call-cost.txt"
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 120 python3 scripts/gpu/copy-call-cost.py --frames 10000 --rounds 2 \
    >"$R/copy-call-cost-1queue.txt" 2>&1
echo "copycost 1 queue rc=$?"
echo "took $((SECONDS - t0)) s"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    export OUT=/tmp/gpuout6; rm -rf "$OUT"; mkdir -p "$OUT"
    STEPS="phaseslean leanlong" REPEAT=2 timeout 420 scripts/gpu-test.sh run startup >"$OUT/run.txt" 2>&1
    echo "startup rc=$?"
    grep -v '^ *$' "$OUT/startup.log" | tail -n 60
    find "$OUT" -path '*/logs/*' -name '*.log' -size +200k -delete 2>/dev/null; rm -rf "$OUT/clips"
    tar czf "$R/startup.tgz" --exclude="*.mkv" --exclude="*.mp4" --exclude="*.h264" --exclude="*.hevc" -C /tmp gpuout6
else
    echo "not an H200: the start-up steps skipped"
fi
echo "took $((SECONDS - t0)) s"
