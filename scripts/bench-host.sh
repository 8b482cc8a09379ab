#!/usr/bin/env bash
# The transcoding-host benchmark: N streams x K consumers through cuframes against
# each consumer decoding the stream itself. See scripts/lib/bench_host.py --help.
#
#   scripts/bench-host.sh [options]              on the GPU machine (NVDEC, CUDA frames)
#   scripts/bench-host.sh --memory host [...]    anywhere (CPU decode, host memory)
#
# A run's --out directory is its record: bench/runs/add-run.sh archives it (bench/runs/README.md).
#
# Common runs (results in OUT/summary.md and OUT/runs.jsonl; a long clip and
# --steady S end each run S seconds into its steady state instead of at the clip's end):
#   scripts/bench-host.sh --streams 8,16 --consumers 1,2,3,4 --repeat 2          as fast as possible
#   scripts/bench-host.sh --seconds 120 --steady 10 --streams 16 --consumers 3,4 the same, measured for 10 s
#   scripts/bench-host.sh --mode re --streams 8 --consumers 3                    real time
#   CUDA_DEVICE_MAX_CONNECTIONS=1 scripts/bench-host.sh --seconds 120 --settle 8 --steady 20 \
#       --capacity 24,32,40,48,56,64                                             largest real-time N at K=3
#   scripts/bench-host.sh --approaches direct --consumers 1 --consumer-order thumb --streams 1,16
#                                                                                one consumer's own scaling
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/lib/bench_host.py --ffmpeg "${FFMPEG:-build/ffmpeg/bin/ffmpeg}" "$@"
