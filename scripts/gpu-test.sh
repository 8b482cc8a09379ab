#!/usr/bin/env bash
# The GPU proof, in two halves.
#
#   scripts/gpu-test.sh stage   here (no GPU needed): release build, then stage
#                               binaries, test programs and a test clip into
#                               .gpu/ (git-ignored, kept under 64 MiB)
#   scripts/gpu-test.sh run     on the GPU machine, from the repository root,
#                               with the staged .gpu/ beside it: runs every GPU
#                               test and writes logs and a summary under $OUT
#
# The GPU machine has no Rust toolchain and no network, so everything it runs
# is built and staged here.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=.gpu

stage() {
    rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/tests"
    cargo build --release --locked -p cuframes-cli
    install -m 0755 target/release/cuframes "$stage/bin/cuframes"
    # The ignored GPU tests, as a release test binary.
    local test_bin
    test_bin=$(cargo test --release --locked -p cuframes-cli --test cuda --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "cuda" and m.get("executable"):
        print(m["executable"])')
    install -m 0755 "$test_bin" "$stage/tests/cuda"
    strip "$stage/bin/cuframes" "$stage/tests/cuda"
    # The patched FFmpeg (libcuframes linked in) and the one library it needs that
    # the GPU machine's image may lack.
    scripts/build-ffmpeg.sh
    mkdir -p "$stage/ffmpeg/bin" "$stage/ffmpeg/lib"
    install -m 0755 build/ffmpeg/bin/ffmpeg "$stage/ffmpeg/bin/ffmpeg"
    strip "$stage/ffmpeg/bin/ffmpeg"
    cp -L "$(ldd build/ffmpeg/bin/ffmpeg | awk '/libx264/ { print $3 }')" "$stage/ffmpeg/lib/"
    du -sh "$stage"
}

run() {
    : "${OUT:?run needs \$OUT}"
    local failures=0
    {
        date -u
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
        nvidia-smi || true
    } >"$OUT/machine.txt" 2>&1
    echo "== Rust CUDA tests"
    if CUFRAMES_BIN="$PWD/$stage/bin/cuframes" "$stage/tests/cuda" --ignored --test-threads=1 --nocapture \
        >"$OUT/rust-cuda.log" 2>&1; then
        echo "rust cuda tests: ok"
    else
        echo "rust cuda tests: FAILED"
        failures=$((failures + 1))
    fi
    tail -n 30 "$OUT/rust-cuda.log"
    echo "== FFmpeg GPU tests"
    if LD_LIBRARY_PATH="$PWD/$stage/ffmpeg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        FFMPEG="$stage/ffmpeg/bin/ffmpeg" tests/ffmpeg/gpu.sh >"$OUT/ffmpeg-gpu.log" 2>&1; then
        echo "ffmpeg gpu tests: ok"
    else
        echo "ffmpeg gpu tests: FAILED"
        failures=$((failures + 1))
    fi
    cat "$OUT/ffmpeg-gpu.log"
    echo "== scripts/demo.sh (the main job, GPU branch)"
    if LD_LIBRARY_PATH="$PWD/$stage/ffmpeg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        FFMPEG="$PWD/$stage/ffmpeg/bin/ffmpeg" scripts/demo.sh >"$OUT/demo.log" 2>&1; then
        echo "demo: ok"
    else
        echo "demo: FAILED"
        failures=$((failures + 1))
    fi
    cat "$OUT/demo.log"
    echo "gpu-test: $failures failed part(s)"
    [ "$failures" -eq 0 ]
}

case "${1:-}" in
stage) stage ;;
run) run ;;
*)
    echo "usage: scripts/gpu-test.sh stage|run" >&2
    exit 2
    ;;
esac
