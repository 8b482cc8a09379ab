#!/usr/bin/env bash
# Session 20 run 1 (issue 12): what bounds K=4 — each consumer's own rate, the
# hold consumer's GPU-wide scaling, the CUDA-context ceiling with one connection.
set -u
cd "$(dirname "$0")/.."
R=/tmp/r17; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
FF=$PWD/.gpu/ffmpeg/bin/ffmpeg; export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,utilization.gpu --format=csv > $R/machine.txt 2>&1
B="python3 scripts/lib/bench_host.py --ffmpeg $FF --clip $R/clip.mp4 --seconds 20"
$FF -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 20 -c:v libx264 -preset ultrafast -b:v 6M -maxrate 6M -bufsize 12M -pix_fmt yuv420p -g 60 -y $R/clip.mp4
echo "clip at $((SECONDS-start)) s"
echo "== one consumer's own scaling (direct)"
timeout 120 $B --out $R/scaling --approaches direct --consumers 1 --consumer-order hold --streams 1,16 --limit 50 > $R/scaling-hold.txt 2>&1
grep -h "bench-host: direct" $R/scaling-hold.txt
timeout 60 $B --out $R/scaling --approaches direct --consumers 1 --consumer-order null --streams 16 --limit 40 > $R/scaling-null.txt 2>&1
grep -h "bench-host: direct" $R/scaling-null.txt
echo "at $((SECONDS-start)) s"
echo "== context ceiling, CUDA_DEVICE_MAX_CONNECTIONS=1"
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 90 python3 scripts/gpu/context-ceiling.py --max 256 --step 32 > $R/ceiling-1conn.txt 2>&1
tail -6 $R/ceiling-1conn.txt
echo "at $((SECONDS-start)) s"
echo "== N=16, K=3 and K=4, fast"
left=$((560 - (SECONDS-start)))
timeout $left $B --out $R/k34 --streams 16 --consumers 3,4 --approaches cuframes,direct --limit 70 > $R/k34.txt 2>&1
grep -h "bench-host:" $R/k34.txt | tail -6
echo "all done at $((SECONDS-start)) s"
rm -f $R/clip.mp4
tar czf $OUT/r17.tgz -C $R .
