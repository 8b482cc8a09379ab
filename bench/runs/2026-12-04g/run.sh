# On the GPU machine, as 2026-12-04e/run.sh. Part 3, the two failures of e and f
# again after their fixes: the Rust CUDA tests (and every backend), and the frame
# property tests on FFmpeg 9.0 and 7.1 with the re-made HDR10 clip.
set -o pipefail
export OUT
tar -xJf .gpu/pack.tar.xz
cp .gpu/commit.txt "$OUT/commit.txt"
FFMPEG_TESTS="props formats" scripts/gpu-test.sh run rust ffmpeg ffmpeg-7.1 >"$OUT/parts.log" 2>&1
echo "parts exit $?" >>"$OUT/parts.log"
cd "$OUT" && mkdir -p more && mv ./*.log ./*.txt ./*.list ./*.skipped more/ 2>/dev/null; mv more/parts.log more/commit.txt . 2>/dev/null
tar -czf logs.tgz --remove-files more 2>/dev/null
ls -la "$OUT"
