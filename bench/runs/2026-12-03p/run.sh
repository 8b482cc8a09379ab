#!/usr/bin/env bash
# Session 19 run 5 (H200): the Rust CUDA tests at the commit in commit.txt (the
# simulated GPU without fd sharing among them).
set -u
cd "$(dirname "$0")/.."
R=/tmp/r16; rm -rf $R; mkdir -p $R
cp .stage/commit.txt $R/commit.txt
OUT=$R timeout 200 bash scripts/gpu-test.sh run rust > $R/parts.txt 2>&1
echo "gpu-test rc=$?"
grep -hE "^== |^test |test result|passed|failed|FAILED|panicked" $R/parts.txt | cut -c1-300 | head -40
tar czf $OUT/r16.tgz -C $R .
