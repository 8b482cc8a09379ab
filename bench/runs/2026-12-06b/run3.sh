#!/usr/bin/env bash
# GPU call 3 at the staged commit: gpu.sh (warmwait with wait_timeout), then K = 3 with one
# queue per subscriber and 80 x 3 with one queue in every process, the subscribers at the
# FFmpeg components' default timeouts (wait_timeout 30 s, timeout 5 s).
set -u
R=$OUT
cat .gpu/commit.txt
t0=$SECONDS
export OUT=/tmp/gpuout3a
rm -rf "$OUT"; mkdir -p "$OUT"
scripts/gpu-test.sh run ffmpeg >"$OUT/run.txt" 2>&1
grep -E '^(ok|FAIL|skip|xfail)|tests:|gpu-test:' "$OUT/run.txt"
echo "gpu.sh took $((SECONDS - t0)) s"
export OUT=/tmp/gpuout3b
rm -rf "$OUT"; mkdir -p "$OUT"
STEPS=leank3 REPEAT=${REPEAT:-2} timeout 240 scripts/gpu-test.sh run startup >"$OUT/run.txt" 2>&1
grep -v '^ *$' "$OUT/startup.log" | tail -n 12
export OUT=/tmp/gpuout3c
rm -rf "$OUT"; mkdir -p "$OUT"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    CUDA_DEVICE_MAX_CONNECTIONS=1 STEPS=crowd REPEAT=1 timeout 200 scripts/gpu-test.sh run startup >"$OUT/run.txt" 2>&1
    grep -v '^ *$' "$OUT/startup.log" | tail -n 6
else
    echo "not an H200: 80 x 3 skipped (its memory figures are the H200's)"
fi
for d in /tmp/gpuout3b /tmp/gpuout3c; do rm -rf "$d/clips"; find "$d" -path '*/logs/*' -name '*.log' -delete 2>/dev/null; done
tar czf "$R/run3.tgz" --exclude="*.mkv" --exclude="*.mp4" --exclude="*.h264" --exclude="*.hevc" -C /tmp gpuout3a gpuout3b gpuout3c 2>/dev/null
cp /tmp/gpuout3a/machine.txt "$R/" 2>/dev/null
echo "total $((SECONDS - t0)) s"
