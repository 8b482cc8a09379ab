# On the GPU machine, as 2026-12-04e/run.sh. Part 2: tests/ffmpeg/gpu.sh in full on
# FFmpeg 9.0 (with the mixed-line tests against 7.1) and on 7.1 (against 9.0),
# scripts/demo.sh, and the exporter beside 16 NVDEC publishers x 3 CUDA subscribers.
set -o pipefail
export OUT
tar -xJf .gpu/pack.tar.xz
cp .gpu/commit.txt "$OUT/commit.txt"
scripts/gpu-test.sh run ffmpeg ffmpeg-7.1 demo >"$OUT/parts.log" 2>&1
echo "parts exit $?" >>"$OUT/parts.log"
LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib FFMPEG=$PWD/.gpu/ffmpeg/bin/ffmpeg CUFRAMES_BIN=$PWD/.gpu/bin/cuframes \
    timeout 240 scripts/gpu/exporter-host.sh 16 3 1200 >"$OUT/exporter-host.txt" 2>&1
echo "exporter-host exit $?" >>"$OUT/exporter-host.txt"
cd "$OUT" && mkdir -p more && mv ./*.log ./*.txt more/ 2>/dev/null; mv more/parts.log more/exporter-host.txt more/commit.txt . 2>/dev/null
tar -czf logs.tgz --remove-files more 2>/dev/null
ls -la "$OUT"
