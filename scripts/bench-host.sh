#!/usr/bin/env bash
# The transcoding-host benchmark: N streams x K consumers through cuframes against
# each consumer decoding the stream itself. See scripts/lib/bench_host.py --help.
#
#   scripts/bench-host.sh [options]              on the GPU machine (NVDEC, CUDA frames)
#   scripts/bench-host.sh --memory host [...]    anywhere (CPU decode, host memory)
#
# Common runs (results in OUT/summary.md and OUT/runs.jsonl):
#   scripts/bench-host.sh --streams 8,16 --consumers 1,2,3,4 --repeat 2          as fast as possible
#   scripts/bench-host.sh --mode re --streams 8 --consumers 3                    real time
#   scripts/bench-host.sh --capacity 8,12,16,20,24,32                            largest real-time N at K=3
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/lib/bench_host.py --ffmpeg "${FFMPEG:-build/ffmpeg/bin/ffmpeg}" "$@"
