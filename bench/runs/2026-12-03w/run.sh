#!/usr/bin/env bash
# Session 21 run 3 (issue 12): direct's real-time capacity at K=3 (52, 56); why cuframes
# at N=80 never subscribed (verbose logs, GPU memory timeline); N=16 K=4 paired, twice.
set -u
cd "$(dirname "$0")/.."
R=/tmp/r23; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
OUT=$R FFMPEG_TESTS=nvdec timeout 60 bash scripts/gpu-test.sh run ffmpeg > $R/parts.txt 2>&1
echo "gpu-test rc=$?"; grep -hE ": [0-9]+ passed|^FAIL|^ok|distinct" $R/parts.txt | cut -c1-160 | head
FF=$PWD/.gpu/ffmpeg/bin/ffmpeg; export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
$FF -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 120 -c:v libx264 -preset ultrafast -b:v 6M -maxrate 6M -bufsize 12M -pix_fmt yuv420p -g 60 -y /tmp/clip120.mp4
B="python3 scripts/lib/bench_host.py --ffmpeg $FF --clip /tmp/clip120.mp4"
echo "== capacity K=3 real time, direct, CUDA_DEVICE_MAX_CONNECTIONS=1 (at $((SECONDS-start)) s)"
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 200 $B --out $R/capacity --approaches direct --capacity 52,56 --settle 8 --steady 20 --limit 90 --label 1conn > $R/capacity.txt 2>&1
grep -h "bench-host:" $R/capacity.txt | tail -2 | cut -c1-300
echo "== cuframes N=80 K=3 real time, verbose, memory timeline (at $((SECONDS-start)) s)"
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 1000 > $R/n80-memory.csv 2>&1 &
smi=$!
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 100 $B --out $R/n80 --approaches cuframes --streams 80 --consumers 3 --mode re --settle 8 --steady 10 --limit 70 --label 1conn-verbose --keep-logs --sub-options "-loglevel verbose" --pub-options "-loglevel verbose" > $R/n80.txt 2>&1
kill $smi
grep -h "bench-host:" $R/n80.txt | tail -1 | cut -c1-300
echo "== N=16 K=4 fast, defaults, paired, twice (at $((SECONDS-start)) s)"
left=$((580 - (SECONDS-start)))
timeout $left $B --out $R/k4 --streams 16 --consumers 4 --repeat 2 --steady 10 --limit 50 --label k4 > $R/k4.txt 2>&1
grep -h "bench-host:" $R/k4.txt | tail -4 | cut -c1-300
echo "all done at $((SECONDS-start)) s"
tar czf $OUT/r23.tgz -C $R .
