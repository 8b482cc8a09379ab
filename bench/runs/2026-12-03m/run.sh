#!/usr/bin/env bash
# Session 19 run 2 (H200): the merged HEAD (durations, the reviewed FFmpeg series,
# the core's layers, one crash matrix over memory kind): import time apart, then
# every GPU part of scripts/gpu-test.sh. Binaries and scripts: commit.txt.
set -u
cd "$(dirname "$0")/.."
R=/tmp/r13; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
ISO=(unshare --pid --ipc --mount --fork --mount-proc --kill-child -- \
     sh -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$0" "$@"')
export CUFRAMES_LIBRARY=$PWD/.gpu/lib/libcuframes.so PYTHONPATH=$PWD/python
(
export CUFRAMES_RUNTIME_DIR=/tmp/r13-run; mkdir -p $CUFRAMES_RUNTIME_DIR
echo "== import time (context held)" | tee -a $R/import-time.txt
for mode in host fd ipc fd-isolated; do
  key=imp-$mode; pubw=(); subw=()
  case $mode in
    host) args=(--memory host) ;;
    fd) args=(--memory cuda --cuda-share fd) ;;
    ipc) args=(--memory cuda --cuda-share ipc) ;;
    fd-isolated) args=(--memory cuda --cuda-share fd); pubw=("${ISO[@]}"); subw=("${ISO[@]}") ;;
  esac
  setsid "${pubw[@]}" .gpu/bin/cuframes publish "${args[@]}" --size 3840x2160 --fps 0 -q $key > $R/pub-$mode.err 2>&1 &
  p=$!
  sleep 2
  timeout 60 "${subw[@]}" python3 scripts/gpu/import-time.py $key "$mode 4K nv12 ring 4" 20 2>&1 | tee -a $R/import-time.txt
  kill -TERM -- -$p 2>/dev/null; kill $p 2>/dev/null; wait $p 2>/dev/null
done
)
echo "at $((SECONDS-start)) s"
left=$((570 - (SECONDS-start)))
OUT=$R timeout $left bash scripts/gpu-test.sh run > $R/parts.txt 2>&1
echo "gpu-test rc=$?"
grep -hE "^== |^ok|^FAIL|^skip|^xfail|test result|passed|failed|FAILED" $R/parts.txt | head -90
echo "all done at $((SECONDS-start)) s"
rm -f $R/*.mp4 $R/*/*.mp4
tar czf $OUT/r13.tgz -C $R .
