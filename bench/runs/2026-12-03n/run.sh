#!/usr/bin/env bash
# Session 19 run 3 (H200): every tests/ffmpeg/gpu.sh part and the demo at the commit
# in commit.txt (the input device's debug line restored).
set -u
cd "$(dirname "$0")/.."
R=/tmp/r14; rm -rf $R; mkdir -p $R
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
OUT=$R timeout 400 bash scripts/gpu-test.sh run ffmpeg demo > $R/parts.txt 2>&1
echo "gpu-test rc=$?"
grep -hE "^== |^ok|^FAIL|^skip|^xfail|passed|failed|FAILED|frames" $R/parts.txt | head -60
echo "all done at $((SECONDS-start)) s"
rm -f $R/*.mp4 $R/*/*.mp4
tar czf $OUT/r14.tgz -C $R .
