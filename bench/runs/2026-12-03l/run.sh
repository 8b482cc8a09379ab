#!/usr/bin/env bash
# Session 19 run 1 (H200): issue 13's measurements not yet taken (import time fd vs
# ipc, apart and across namespaces; the FFmpeg 4K chain across sibling namespaces
# against one namespace), then every tests/ffmpeg/gpu.sh part with the full-config
# FFmpeg (captions through NVDEC among them). Binaries: see commit.txt.
set -u
cd "$(dirname "$0")/.."
R=/tmp/r12; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1
start=$SECONDS
cp .stage/commit.txt $R/commit.txt
git log -1 --format='scripts of %h' >> $R/commit.txt 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,utilization.gpu --format=csv > $R/machine.txt 2>&1
FF=$PWD/.gpu/ffmpeg/bin/ffmpeg; export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
$FF -hide_banner -version | head -3 >> $R/machine.txt 2>&1
$FF -hide_banner -buildconf >> $R/machine.txt 2>&1
ISO=(unshare --pid --ipc --mount --fork --mount-proc --kill-child -- \
     sh -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$0" "$@"')
export CUFRAMES_RUNTIME_DIR=/tmp/r12-run; mkdir -p $CUFRAMES_RUNTIME_DIR
export CUFRAMES_LIBRARY=$PWD/.gpu/lib/libcuframes.so PYTHONPATH=$PWD/python
echo "== ffmpeg gpu.sh props (captions through NVDEC among them)"
OUT=$R FFMPEG_TESTS="props" timeout 120 bash scripts/gpu-test.sh run ffmpeg > $R/ffmpeg-props.txt 2>&1
echo "rc=$?"; grep -hE "^ok|^FAIL|^skip|passed" $R/ffmpeg-props.txt | head
grep -c "A/53" $R/props-h264-a53cc.h264.txt 2>/dev/null
echo "at $((SECONDS-start)) s"
echo "== import time" | tee -a $R/import-time.txt
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
echo "at $((SECONDS-start)) s"
echo "== 4K chain: one namespace vs sibling namespaces"
FFMPEG=$FF OUT=$R PIPELINES="cuframes isolated" REPEAT=2 timeout 240 bash scripts/bench-ffmpeg.sh 4k > $R/bench-chain.txt 2>&1
echo "rc=$?"; grep -E "^\||\(e\)/\(b\)|FAIL|failed" $R/bench-chain.txt | head -20
echo "at $((SECONDS-start)) s"
echo "== copy latency beside other contexts"
FFMPEG=$FF timeout 90 python3 scripts/gpu/copy-latency.py --seconds 8 --load 16 --busy 48 --out $R/copy-latency.json > $R/copy-latency.txt 2>&1
echo "rc=$?"; tail -5 $R/copy-latency.txt
echo "at $((SECONDS-start)) s"
echo "== ffmpeg gpu.sh, every other part"
left=$((560 - (SECONDS-start)))
OUT=$R FFMPEG_TESTS="nvdec cuvid scale filter copy hwupload host two reconnect containers many trace formats nvenc" \
  timeout $left bash scripts/gpu-test.sh run ffmpeg > $R/ffmpeg-parts.txt 2>&1
echo "rc=$?"; grep -hE "^ok|^FAIL|^skip|^xfail|passed|expected" $R/ffmpeg-parts.txt | head -70
echo "all done at $((SECONDS-start)) s"
rm -f $R/*.mp4
tar czf $OUT/r12.tgz -C $R .
