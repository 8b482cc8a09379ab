#!/usr/bin/env bash
# Session 21 run 4 (issue 12): the Rust CUDA tests at this commit; what cuframes
# subscribers at N=80 wait on (kernel wait channels and syscalls, sampled mid-start),
# with a ring of 8 and of 16.
set -u
cd "$(dirname "$0")/.."
R=/tmp/r24; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
OUT=$R timeout 200 bash scripts/gpu-test.sh run rust > $R/parts.txt 2>&1
echo "gpu-test rc=$?"; grep -hE "^== |: [0-9]+ passed|FAILED|panicked" $R/parts.txt | cut -c1-200 | head
FF=$PWD/.gpu/ffmpeg/bin/ffmpeg; export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
$FF -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 120 -c:v libx264 -preset ultrafast -b:v 6M -maxrate 6M -bufsize 12M -pix_fmt yuv420p -g 60 -y /tmp/clip120.mp4
B="python3 scripts/lib/bench_host.py --ffmpeg $FF --clip /tmp/clip120.mp4"
sample() { # after $1 s: where three subscribers and one publisher wait
  sleep $1
  for pid in $(pgrep -f "cuframes -timeout 30" | head -3) $(pgrep -f "wait_subscribers" | head -1); do
    echo "== pid $pid: $(tr '\0' ' ' < /proc/$pid/cmdline | cut -c1-120)"
    for t in /proc/$pid/task/*; do echo "$(cat $t/comm) wchan=$(cat $t/wchan) syscall=$(cut -d' ' -f1-3 $t/syscall)"; done
  done
}
for ring in 8 16; do
  [ $((SECONDS-start)) -gt 470 ] && break
  echo "== cuframes N=80 K=3 real time, ring $ring (at $((SECONDS-start)) s)"
  nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 1000 > $R/n80-ring$ring-memory.csv 2>&1 &
  smi=$!
  sample 25 > $R/n80-ring$ring-waits.txt 2>&1 &
  CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 100 $B --out $R/n80-ring$ring --approaches cuframes --streams 80 --consumers 3 --mode re --settle 8 --steady 10 --limit 75 --label ring$ring --pub-options "-ring_size $ring" > $R/n80-ring$ring.txt 2>&1
  kill $smi; wait
  grep -h "bench-host:" $R/n80-ring$ring.txt | tail -1 | cut -c1-300
  grep -h "wchan" $R/n80-ring$ring-waits.txt | sort | uniq -c | sort -rn | head -8
done
echo "all done at $((SECONDS-start)) s"
tar czf $OUT/r24.tgz -C $R .
