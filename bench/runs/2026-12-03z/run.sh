#!/usr/bin/env bash
# Session 21 run 6 (issue 12): direct's real-time capacity at K=3 between 48 and 52: N=50.
set -u
cd "$(dirname "$0")/.."
R=/tmp/r26; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
FF=$PWD/.gpu/ffmpeg/bin/ffmpeg; export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
$FF -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 90 -c:v libx264 -preset ultrafast -b:v 6M -maxrate 6M -bufsize 12M -pix_fmt yuv420p -g 60 -y /tmp/clip90.mp4
B="python3 scripts/lib/bench_host.py --ffmpeg $FF --clip /tmp/clip90.mp4"
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 100 $B --out $R/capacity --approaches direct --capacity 50 --settle 8 --steady 20 --limit 80 --label 1conn > $R/capacity.txt 2>&1
grep -h "bench-host:" $R/capacity.txt | tail -1 | cut -c1-300
echo "all done at $((SECONDS-start)) s"
tar czf $OUT/r26.tgz -C $R .
