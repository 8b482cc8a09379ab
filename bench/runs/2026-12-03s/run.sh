#!/usr/bin/env bash
# Session 20 run 3 (issue 12): real-time capacity at K=3 with the context ceiling
# lifted (CUDA_DEVICE_MAX_CONNECTIONS=1), judged on the slowest stream after a
# settle; and K=4 with a ring of 16.
set -u
cd "$(dirname "$0")/.."
R=/tmp/r19; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
FF=$PWD/.gpu/ffmpeg/bin/ffmpeg; export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,utilization.gpu --format=csv > $R/machine.txt 2>&1
$FF -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 120 -c:v libx264 -preset ultrafast -b:v 6M -maxrate 6M -bufsize 12M -pix_fmt yuv420p -g 60 -y /tmp/clip120.mp4
echo "clip at $((SECONDS-start)) s"
B="python3 scripts/lib/bench_host.py --ffmpeg $FF --clip /tmp/clip120.mp4"
echo "== N=16 K=4 cuframes, ring 16, fast"
timeout 80 $B --out $R/ring16 --streams 16 --consumers 4 --approaches cuframes --pub-options "-ring_size 16" --label ring16 --steady 10 --limit 60 > $R/ring16.txt 2>&1
grep -h "bench-host:" $R/ring16.txt | tail -2
echo "at $((SECONDS-start)) s"
echo "== capacity K=3 real time, CUDA_DEVICE_MAX_CONNECTIONS=1, settle 8 s, 20 s steady"
left=$((570 - (SECONDS-start)))
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout $left $B --out $R/capacity --capacity 48,64,80 --settle 8 --steady 20 --limit 100 --label 1conn > $R/capacity.txt 2>&1
grep -h "bench-host:" $R/capacity.txt | tail -9
echo "all done at $((SECONDS-start)) s"
tar czf $OUT/r19.tgz -C $R .
