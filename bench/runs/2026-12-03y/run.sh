#!/usr/bin/env bash
# Session 21 run 5 (issue 12): cuframes N=80 K=3 in real time once start-up may take
# longer than 30 s (subscribers -timeout 90, publishers -wait_timeout 90): is the
# cliff at N=80 only start-up on the driver's lock, or also the steady state?
set -u
cd "$(dirname "$0")/.."
R=/tmp/r25; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
FF=$PWD/.gpu/ffmpeg/bin/ffmpeg; export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
$FF -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 180 -c:v libx264 -preset ultrafast -b:v 6M -maxrate 6M -bufsize 12M -pix_fmt yuv420p -g 60 -y /tmp/clip180.mp4
B="python3 scripts/lib/bench_host.py --ffmpeg $FF --clip /tmp/clip180.mp4"
echo "== cuframes N=80 K=3 real time, 90 s start-up timeouts (at $((SECONDS-start)) s)"
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 1000 > $R/n80-memory.csv 2>&1 &
smi=$!
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 190 $B --out $R/n80 --approaches cuframes --streams 80 --consumers 3 --mode re --settle 8 --steady 20 --limit 170 --label timeout90 --sub-options "-timeout 90" --pub-options "-wait_timeout 90" > $R/n80.txt 2>&1
kill $smi
grep -h "bench-host:" $R/n80.txt | tail -1 | cut -c1-400
echo "all done at $((SECONDS-start)) s"
tar czf $OUT/r25.tgz -C $R .
