#!/usr/bin/env bash
# The GPU proof, in two halves.
#
#   scripts/gpu-test.sh stage   here (no GPU needed): release build, then stage
#                               binaries, test programs and a test clip into
#                               .gpu/ (git-ignored, kept under 64 MiB)
#   scripts/gpu-test.sh run [PART...]
#                               on the GPU machine, from the repository root,
#                               with the staged .gpu/ beside it: runs the GPU
#                               tests (PARTs: rust lib c crash ffmpeg demo python gstreamer
#                               bench gst-bench ring profile host startup, and ffmpeg-LINE for
#                               a line staged with GPU_FFMPEG_LINES; default all but bench,
#                               gst-bench, ring, profile, host, startup), logs under $OUT;
#                               GST_TESTS picks tests of tests/gstreamer/gpu.sh, FFMPEG_TESTS picks
#                               words of tests/ffmpeg/gpu.sh, BENCH_HOST_ARGS the
#                               arguments of scripts/bench-host.sh (part host)
#
# The GPU machine has no Rust toolchain and no network, so everything it runs
# is built and staged here. What $OUT holds after a run is its record: put it in a
# folder named for the run's id with a README naming the commit, then
# bench/runs/add-run.sh archives it and prints its row for the index,
# bench/runs/README.md (what docs/gpu-validation.md and docs/benchmarks.md link to).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/capabilities.sh
. scripts/lib/cupti.sh  # find_cupti: CUPTI for the copy counter
stage=.gpu

# release_test_binary PACKAGE TARGET CARGO_ARGS...: builds the release test
# binary of PACKAGE's TARGET (CARGO_ARGS: --test NAME or --lib) and prints its path.
release_test_binary() {
    local package=$1 target=$2
    shift 2
    cargo test --release --locked -p "$package" "$@" --no-run --message-format=json 2>/dev/null |
        TEST="$target" python3 -c 'import json,os,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == os.environ["TEST"] and m.get("executable"):
        print(m["executable"])'
}

stage() {
    rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/tests" "$stage/lib"
    cargo build --release --locked -p cuframes-cli
    install -m 0755 target/release/cuframes "$stage/bin/cuframes"
    # The ignored GPU tests, as release test binaries.
    local test_name
    for test_name in cuda crash_matrix backends; do
        install -m 0755 "$(release_test_binary cuframes-cli "$test_name" --test "$test_name")" \
            "$stage/tests/$test_name"
    done
    # The library's: its suite over every backend (every_backend) and its unit
    # tests (lib_units), whose ignored tests are the CUDA ones.
    install -m 0755 "$(release_test_binary cuframes every_backend --test every_backend)" "$stage/tests/every_backend"
    install -m 0755 "$(release_test_binary cuframes cuframes --lib)" "$stage/tests/lib_units"
    # The C API: the shared library (for Python) and the CUDA C test, linked
    # statically so it needs nothing staged beside it.
    local prefix=$PWD/target/gpu-stage-prefix
    rm -rf "$prefix"
    scripts/install.sh --prefix "$prefix" >/dev/null
    cp -L "$prefix/lib/libcuframes.so.0.2" "$stage/lib/libcuframes.so.0.2"
    ln -sf libcuframes.so.0.2 "$stage/lib/libcuframes.so"
    # shellcheck disable=SC2046 # pkg-config output is a list of flags
    cc -std=c99 -O2 -Wall -Wextra -Werror -pedantic -I"$prefix/include" tests/c/test_cuda.c \
        -o "$stage/tests/test_cuda" "$prefix/lib/libcuframes.a" \
        $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --static --libs-only-l cuframes | sed 's/-lcuframes//')
    # The manylinux wheel users install (scripts/package-wheel.sh; offline once
    # build/venv-zig is there): the Python CUDA tests run from it, with its own bundled
    # library, and fail without it.
    scripts/package-wheel.sh --out "$stage/wheel" >/dev/null
    compgen -G "$stage/wheel/cuframes-*.whl" >/dev/null || { echo "gpu-test: no wheel staged" >&2; exit 1; }
    # The copy counter injected into CUDA processes (no CUDA headers needed).
    cc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$stage/lib/memcpy-count.so" scripts/gpu/memcpy-count.c -ldl
    # The driver-call tracer (start-up phases, calls per frame; scripts/gpu/startup.sh).
    cc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$stage/lib/cuda-calls.so" scripts/gpu/cuda-calls.c -ldl
    # The GStreamer plugin, the benchmark's probe, and GStreamer itself for each line of
    # GPU_GSTREAMER_LINES (default "1.26 1.22": zero copy, and 1.22's copying path).
    cargo build --release --locked -p gst-cuframes
    install -D -m 0644 target/release/libgstcuframes.so "$stage/lib/gstreamer/libgstcuframes.so"
    strip "$stage/lib/gstreamer/libgstcuframes.so"
    STAGE=$stage scripts/gpu/gst-bench.sh stage
    local gst_line
    for gst_line in ${GPU_GSTREAMER_LINES-1.26 1.22}; do
        GST_LINE=$gst_line STAGE=$stage scripts/gpu/gstreamer.sh stage
    done
    # What waking N subscribers costs the publisher, per eventfd and per shared futex.
    cc -O2 -Wall -Wextra -Werror -o "$stage/tests/wake-cost" scripts/gpu/wake-cost.c
    strip "$stage/bin/cuframes" "$stage/tests/cuda" "$stage/tests/crash_matrix" "$stage/tests/backends" \
        "$stage/tests/every_backend" "$stage/tests/lib_units" "$stage/tests/test_cuda" "$stage/tests/wake-cost" \
        "$stage/lib/libcuframes.so.0.2"
    # The patched FFmpeg (libcuframes linked in) and the libraries it loads besides
    # glibc's, which the GPU machine's image may lack: libx264, libsrt, GnuTLS and
    # theirs (scripts/build-ffmpeg.sh), libstdc++ (libsrt's) as new as they need.
    scripts/build-ffmpeg.sh
    mkdir -p "$stage/ffmpeg/bin" "$stage/ffmpeg/lib"
    install -m 0755 build/ffmpeg/bin/ffmpeg "$stage/ffmpeg/bin/ffmpeg"
    strip "$stage/ffmpeg/bin/ffmpeg"
    # Other FFmpeg lines besides the default (GPU_FFMPEG_LINES="7.1"): .gpu/ffmpeg-LINE,
    # tested by the part ffmpeg-LINE and in the mixed-line tests.
    local line
    for line in ${GPU_FFMPEG_LINES:-}; do
        scripts/build-ffmpeg.sh --ffmpeg "$line"
        mkdir -p "$stage/ffmpeg-$line/bin"
        install -m 0755 "build/ffmpeg-$line/bin/ffmpeg" "$stage/ffmpeg-$line/bin/ffmpeg"
        strip "$stage/ffmpeg-$line/bin/ffmpeg"
    done
    ldd build/ffmpeg/bin/ffmpeg | awk '$3 ~ /^\// { print $3 }' |
        grep -Ev '/(libc|libm|libdl|librt|libpthread|libresolv|ld-linux[^/]*)\.so' |
        xargs -r cp -L -t "$stage/ffmpeg/lib/"
    compgen -G "$stage/ffmpeg/lib/libx264.so.*" >/dev/null || { echo "gpu-test: libx264 not staged" >&2; exit 1; }
    # HEVC clips (10/12-bit, 4:4:4, HDR10) our FFmpeg cannot make (no libx265):
    # Debian's ffmpeg makes them, installed here when missing (else the GPU format
    # tests skip).
    if ! grep -q libx265 <<<"$(ffmpeg -hide_banner -encoders 2>/dev/null)"; then
        if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ffmpeg >/dev/null
        else
            echo "gpu-test: no ffmpeg with libx265 here (apt-get install ffmpeg): the GPU format tests will skip" >&2
        fi
    fi
    scripts/gpu/make-clips.sh "$stage/clips"
    # FFmpeg is most of the stage: carried as an archive (about a third), unpacked by run.
    local builds=(ffmpeg)
    for line in ${GPU_FFMPEG_LINES:-}; do builds+=("ffmpeg-$line"); done
    tar -C "$stage" -cJf "$stage/ffmpeg.tar.xz" "${builds[@]}"
    (cd "$stage" && rm -rf "${builds[@]}")
    local bytes
    bytes=$(du -sb "$stage" | cut -f1)
    echo "gpu-test: $stage holds $((bytes / 1048576)) MiB"
    if [ "$bytes" -gt $((64 * 1048576)) ]; then
        echo "gpu-test: over the 64 MiB one device call carries: stage fewer lines (GPU_FFMPEG_LINES, GPU_GSTREAMER_LINES)" >&2
        exit 1
    fi
}


failures=0
# part NAME LOG command...: runs one part, logs it under $OUT, counts a failure.
part() {
    local name=$1 log=$OUT/$2
    shift 2
    echo "== $name"
    if "$@" >"$log" 2>&1; then
        echo "$name: ok"
    else
        echo "$name: FAILED"
        failures=$((failures + 1))
    fi
    tail -n 40 "$log"
}

# rust_part NAME LOG TEST_BINARY SELECT ARGS...: one of the staged Rust test
# binaries as a part, SELECT (--ignored or --include-ignored) less the tests
# that need what this machine lacks (--skip needs_X::, see
# scripts/lib/capabilities.sh), which are counted as skipped with the reason;
# prints "NAME: N passed, N failed, N skipped".
rust_part() {
    local name=$1 log=$2 binary=$3 select=$4
    shift 4
    local missing=() skips=() reasons=() marker reason
    for marker in "${CAPABILITY_MARKERS[@]}"; do
        if reason=$(capability_missing "$marker" "$PWD/$stage/bin/cuframes"); then
            missing+=("$marker")
            skips+=(--skip "$marker::")
            reasons+=("$marker: $reason")
        fi
    done
    part "$name" "$log" env CUFRAMES_BIN="$PWD/$stage/bin/cuframes" "$binary" "$select" "${skips[@]}" "$@"
    local passed failed skipped=0
    read -r passed failed < <(libtest_counts "$OUT/$log")
    if [ ${#missing[@]} -gt 0 ]; then
        "$binary" --list "$select" >"$OUT/$log.list" 2>/dev/null || true
        skipped=$(skipped_tests "$OUT/$log.list" "${missing[@]}" | tee "$OUT/$log.skipped" | wc -l)
        for reason in "${reasons[@]}"; do
            marker=${reason%%:*}
            local n
            n=$(grep -c "^$marker " "$OUT/$log.skipped" || true)
            [ "$n" -gt 0 ] && echo "skipped $n ($reason)"
        done
    fi
    echo "$name: $passed passed, $failed failed, $skipped skipped"
}

# python_part: the Python CUDA tests from the wheel stage() built, the one users
# install. No wheel staged (or more than one) fails the part: falling back to the plain
# library would test something users do not install.
python_part() {
    local wheels=()
    mapfile -t wheels < <(compgen -G "$PWD/$stage/wheel/cuframes-*.whl")
    if [ ${#wheels[@]} -ne 1 ]; then
        echo "== Python CUDA tests"
        echo "Python CUDA tests: FAILED (${#wheels[@]} wheels in $stage/wheel, expected one: scripts/gpu-test.sh stage builds it)"
        failures=$((failures + 1))
        return
    fi
    part "Python CUDA tests" python.log env CUFRAMES_BIN="$PWD/$stage/bin/cuframes" \
        CUFRAMES_WHEEL="${wheels[0]}" bash scripts/gpu/python.sh
}

# Parts: rust lib c crash ffmpeg demo python gstreamer bench gst-bench ring profile (default: all but
# bench, gst-bench, ring and profile; ring = the `cuframes bench` runs of bench without the FFmpeg pipelines).
run() {
    : "${OUT:?run needs \$OUT}"
    if [ ! -x "$stage/ffmpeg/bin/ffmpeg" ] && [ -f "$stage/ffmpeg.tar.xz" ]; then
        tar -C "$stage" -xJf "$stage/ffmpeg.tar.xz"
    fi
    local parts=("$@")
    [ ${#parts[@]} -gt 0 ] || parts=(rust lib c crash ffmpeg demo python gstreamer)
    {
        date -u
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
        nvidia-smi || true
    } >"$OUT/machine.txt" 2>&1
    local ffenv=(env LD_LIBRARY_PATH="$PWD/$stage/ffmpeg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    local cupti
    cupti=$(find_cupti)
    echo "CUPTI for the copy counter: ${cupti:-none found}"
    local want
    for want in "${parts[@]}"; do
        case $want in
        rust) rust_part "Rust CUDA tests" rust-cuda.log "$stage/tests/cuda" --ignored --test-threads=1 --nocapture
            rust_part "Every backend (host, CUDA fd, CUDA ipc)" rust-backends.log "$stage/tests/backends" \
                --include-ignored --test-threads=1 ;;
        lib) rust_part "Library suite on CUDA fd and CUDA ipc" lib-every-backend.log "$stage/tests/every_backend" \
                --ignored --test-threads=1
            rust_part "Library CUDA unit tests" lib-units.log "$stage/tests/lib_units" --ignored --test-threads=1 ;;
        c) part "C API CUDA tests" c-cuda.log "$stage/tests/test_cuda" ;;
        crash) rust_part "CUDA crash matrix" cuda-crash.log "$stage/tests/crash_matrix" --ignored \
            --test-threads=1 --nocapture ;;
        ffmpeg-*) local line=${want#ffmpeg-}
            [ -x "$stage/ffmpeg-$line/bin/ffmpeg" ] || { echo "gpu-test: no FFmpeg $line staged (GPU_FFMPEG_LINES)" >&2; failures=$((failures + 1)); continue; }
            part "FFmpeg $line GPU tests" "ffmpeg-gpu-$line.log" "${ffenv[@]}" FFMPEG="$stage/ffmpeg-$line/bin/ffmpeg" \
            FFMPEG_OTHER="$stage/ffmpeg/bin/ffmpeg" \
            MEMCPY_COUNTER="$PWD/$stage/lib/memcpy-count.so" CUFRAMES_CUPTI="$cupti" CLIPS="$PWD/$stage/clips" \
            CUFRAMES_BIN="$PWD/$stage/bin/cuframes" tests/ffmpeg/gpu.sh ${FFMPEG_TESTS:-} ;;
        ffmpeg) part "FFmpeg GPU tests" ffmpeg-gpu.log "${ffenv[@]}" FFMPEG="$stage/ffmpeg/bin/ffmpeg" \
            FFMPEG_OTHER="$(compgen -G "$stage/ffmpeg-*/bin/ffmpeg" | head -n 1)" \
            MEMCPY_COUNTER="$PWD/$stage/lib/memcpy-count.so" CUFRAMES_CUPTI="$cupti" CLIPS="$PWD/$stage/clips" \
            CUFRAMES_BIN="$PWD/$stage/bin/cuframes" tests/ffmpeg/gpu.sh ${FFMPEG_TESTS:-} ;;
        demo) part "scripts/demo.sh (the main job, GPU branch)" demo.log "${ffenv[@]}" \
            FFMPEG="$PWD/$stage/ffmpeg/bin/ffmpeg" scripts/demo.sh ;;
        python) python_part ;;
        gstreamer) local archive gst_line
            for archive in "$stage"/gstreamer-*.tar.xz; do
                [ -e "$archive" ] || { echo "gpu-test: no GStreamer staged (GPU_GSTREAMER_LINES)" >&2; failures=$((failures + 1)); break; }
                gst_line=${archive##*/gstreamer-}
                gst_line=${gst_line%.tar.xz}
                part "GStreamer $gst_line GPU tests" "gstreamer-$gst_line.log" env GST_LINE="$gst_line" STAGE="$stage" \
                    bash tests/gstreamer/gpu.sh ${GST_TESTS:-}
            done ;;
        gst-bench) part "GStreamer benchmark (against cudaipcsink/src)" gst-bench.log env STAGE="$stage" \
            bash scripts/gpu/gst-bench.sh run ;;
        profile) part "Subscriber CPU profile" profile.log "${ffenv[@]}" FFMPEG="$PWD/$stage/ffmpeg/bin/ffmpeg" \
            bash scripts/gpu/profile-subscriber.sh ;;
        host) part "Transcoding-host benchmark (scripts/bench-host.sh ${BENCH_HOST_ARGS:-})" bench-host.log \
            "${ffenv[@]}" FFMPEG="$PWD/$stage/ffmpeg/bin/ffmpeg" \
            bash scripts/bench-host.sh --out "$OUT/bench-host" ${BENCH_HOST_ARGS:-} ;;
        startup) part "Start-up and publish cost (scripts/gpu/startup.sh ${STEPS:-})" startup.log "${ffenv[@]}" \
            FFMPEG="$PWD/$stage/ffmpeg/bin/ffmpeg" CUFRAMES_BIN="$PWD/$stage/bin/cuframes" \
            CALLS="$PWD/$stage/lib/cuda-calls.so" CUFRAMES_CUPTI="$cupti" bash scripts/gpu/startup.sh ;;
        bench | ring) part "Benchmarks ($want)" bench.log "${ffenv[@]}" FFMPEG="$PWD/$stage/ffmpeg/bin/ffmpeg" \
            CUFRAMES_BIN="$PWD/$stage/bin/cuframes" bash scripts/gpu/bench.sh "$want" ;;
        *) echo "gpu-test: unknown part $want" >&2; failures=$((failures + 1)) ;;
        esac
    done
    echo "gpu-test: $failures failed part(s)"
    [ "$failures" -eq 0 ]
}

case "${1:-}" in
stage) stage ;;
run) shift; run "$@" ;;
*)
    echo "usage: scripts/gpu-test.sh stage|run" >&2
    exit 2
    ;;
esac
