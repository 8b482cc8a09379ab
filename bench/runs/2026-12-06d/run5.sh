#!/usr/bin/env bash
# The publisher's driver calls a frame, under the call tracer: the 4K ring, 1 subscriber,
# at full rate and paced at 40,000 and 20,000 fps (20,000 frames each).
set -u
cat .gpu/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export CUFRAMES_RUNTIME_DIR=$(mktemp -d)
for fps in 0 40000 20000; do
    d=$OUT/calls-fps$fps; mkdir -p "$d"
    echo "== --fps $fps"
    CUDA_INJECTION64_PATH=$PWD/.gpu/lib/cuda-calls.so CUFRAMES_CALLS_DIR=$d timeout 120 .gpu/bin/cuframes bench \
        --memory cuda --format nv12 --size 3840x2160 --ring 8 --policy strict_wait --frames 20000 \
        --transports cuframes --verify none --subscribers 1 --fps $fps 2>&1 | grep -E "^cuframes "
done
tar czf $OUT/calls.tgz -C $OUT calls-fps0 calls-fps40000 calls-fps20000
