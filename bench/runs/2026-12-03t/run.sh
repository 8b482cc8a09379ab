#!/usr/bin/env bash
# Session 20 run 4: the ring-16 fd fix (CUDA test), then N=16 K=4 with a ring of 16.
set -u
cd "$(dirname "$0")/.."
R=/tmp/r20; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
FF=$PWD/.gpu/ffmpeg/bin/ffmpeg; export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
CUFRAMES_BIN=$PWD/.gpu/bin/cuframes timeout 60 .gpu/tests/cuda --ignored --test-threads=1 rings_of_one_and_sixteen cuda_frames_reach_two > $R/cuda-rings.log 2>&1
echo "cuda rc=$?"; grep -E "^test |test result" $R/cuda-rings.log
echo "at $((SECONDS-start)) s"
$FF -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 60 -c:v libx264 -preset ultrafast -b:v 6M -maxrate 6M -bufsize 12M -pix_fmt yuv420p -g 60 -y /tmp/clip60.mp4
B="python3 scripts/lib/bench_host.py --ffmpeg $FF --clip /tmp/clip60.mp4"
timeout 75 $B --out $R/ring16 --streams 16 --consumers 4 --approaches cuframes --pub-options "-ring_size 16" --label ring16 --steady 8 --limit 55 > $R/ring16.txt 2>&1
grep -h "bench-host:" $R/ring16.txt | tail -2
echo "all done at $((SECONDS-start)) s"
tar czf $OUT/r20.tgz -C $R .
