#!/usr/bin/env bash
# Session 21 run 2 (issue 12) at the commit in commit.txt: lean contexts (no stack
# reservation) and the muxer's ring of 16 by default. C and FFmpeg GPU suites;
# cuframes' real-time capacity at K=3 beyond 64 streams.
set -u
cd "$(dirname "$0")/.."
R=/tmp/r22; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
OUT=$R timeout 200 bash scripts/gpu-test.sh run c ffmpeg > $R/parts.txt 2>&1
echo "gpu-test rc=$?"; grep -hE "^== |: [0-9]+ passed|^FAIL|^not ok|stack of" $R/parts.txt $R/c-cuda.log | cut -c1-200 | head -30
echo "at $((SECONDS-start)) s"
FF=$PWD/.gpu/ffmpeg/bin/ffmpeg; export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,utilization.gpu --format=csv > $R/machine.txt 2>&1
$FF -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 120 -c:v libx264 -preset ultrafast -b:v 6M -maxrate 6M -bufsize 12M -pix_fmt yuv420p -g 60 -y /tmp/clip120.mp4
B="python3 scripts/lib/bench_host.py --ffmpeg $FF --clip /tmp/clip120.mp4"
echo "== capacity K=3 real time, cuframes, CUDA_DEVICE_MAX_CONNECTIONS=1"
left=$((575 - (SECONDS-start)))
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout $left $B --out $R/capacity --approaches cuframes --capacity 72,80,88 --settle 8 --steady 20 --limit 100 --label 1conn > $R/capacity.txt 2>&1
grep -h "bench-host:" $R/capacity.txt | tail -4 | cut -c1-300
echo "all done at $((SECONDS-start)) s"
tar czf $OUT/r22.tgz -C $R .
