#!/usr/bin/env bash
# Session 20 run 2 (issue 12): N=16 K=3/K=4 in the steady state with a long clip
# (hold = shuffleframes, and thumbnail_cuda as the GPU-bound variant), then the
# real-time capacity at K=3 with CUDA_DEVICE_MAX_CONNECTIONS=1 (context ceiling lifted).
set -u
cd "$(dirname "$0")/.."
R=/tmp/r18; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
FF=$PWD/.gpu/ffmpeg/bin/ffmpeg; export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,utilization.gpu --format=csv > $R/machine.txt 2>&1
$FF -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 120 -c:v libx264 -preset ultrafast -b:v 6M -maxrate 6M -bufsize 12M -pix_fmt yuv420p -g 60 -y /tmp/clip120.mp4
echo "clip at $((SECONDS-start)) s"
B="python3 scripts/lib/bench_host.py --ffmpeg $FF --clip /tmp/clip120.mp4"
echo "== N=16, K=3 and K=4 (hold), fast, 10 s steady"
timeout 200 $B --out $R/fast --streams 16 --consumers 3,4 --approaches cuframes,direct --steady 10 --limit 60 > $R/fast.txt 2>&1
grep -h "bench-host:" $R/fast.txt | tail -5
echo "at $((SECONDS-start)) s"
echo "== N=16, K=4 with thumbnail_cuda=8 as the fourth, fast, 10 s steady"
timeout 100 $B --out $R/thumb --streams 16 --consumers 4 --consumer-order null,scale,cpu,thumb --approaches cuframes,direct --steady 10 --limit 60 > $R/thumb.txt 2>&1
grep -h "bench-host:" $R/thumb.txt | tail -3
echo "at $((SECONDS-start)) s"
echo "== capacity K=3 real time, CUDA_DEVICE_MAX_CONNECTIONS=1, 10 s steady"
left=$((575 - (SECONDS-start)))
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout $left $B --out $R/capacity --capacity 24,32,40,48 --steady 10 --limit 80 --label 1conn > $R/capacity.txt 2>&1
grep -h "bench-host:" $R/capacity.txt | tail -9
echo "all done at $((SECONDS-start)) s"
tar czf $OUT/r18.tgz -C $R .
