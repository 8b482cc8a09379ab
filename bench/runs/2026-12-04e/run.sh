# On the GPU machine, from the repository root, with .gpu/pack.tar.xz carried (the
# staged .gpu/ of `GPU_FFMPEG_LINES=7.1 scripts/gpu-test.sh stage`, plus
# .gpu/before/cuframes built at c6d12ee). Part 1: Rust CUDA tests and every backend,
# the C CUDA tests, the CUDA crash matrix, the Python CUDA tests from the wheel, and
# the ring before (c6d12ee) and after.
set -o pipefail
export OUT
tar -xJf .gpu/pack.tar.xz
cp .gpu/commit.txt "$OUT/commit.txt"
scripts/gpu-test.sh run rust c crash python >"$OUT/parts.log" 2>&1
echo "parts exit $?" >>"$OUT/parts.log"
timeout 150 scripts/gpu/ring-before-after.sh .gpu/before/cuframes .gpu/bin/cuframes 2 >"$OUT/ring.txt" 2>&1
cd "$OUT" && tar -czf logs.tgz --remove-files ./*.log.* ./*-*.log python.log c-cuda.log 2>/dev/null
ls -la "$OUT"
