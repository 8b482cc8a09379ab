#!/usr/bin/env bash
# Session 19 run 4 (H200): the Rust CUDA tests (D28's fallback among them) and the C
# API CUDA tests at the commit in commit.txt; the containers part of gpu.sh (4K added) with the scripts of this tree.
set -u
cd "$(dirname "$0")/.."
R=/tmp/r15; rm -rf $R; mkdir -p $R
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
OUT=$R timeout 240 bash scripts/gpu-test.sh run rust c > $R/parts.txt 2>&1
OUT=$R FFMPEG_TESTS="containers" timeout 150 bash scripts/gpu-test.sh run ffmpeg > $R/ffmpeg-parts.txt 2>&1
grep -hE "^ok|^FAIL|passed" $R/ffmpeg-parts.txt
echo "gpu-test rc=$?"
grep -hE "^== |^ok|^FAIL|^skip|test |test result|passed|failed|FAILED" $R/parts.txt | head -60
grep -h "stream memory operations" $R/*.log | head -3
echo "all done at $((SECONDS-start)) s"
tar czf $OUT/r15.tgz -C $R .
