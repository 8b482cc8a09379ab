#!/usr/bin/env bash
# Runs every check and test of the project. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "test.sh: cargo not found; install a Rust toolchain (rustup) first" >&2
    exit 1
fi
for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
        rustup component add "$component"
    fi
done

# The GStreamer plugin's crate builds against the system's GStreamer: installed
# before clippy builds the workspace.
. scripts/lib/gstreamer.sh
ensure_gstreamer
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== include/cuframes.h matches the Rust sources (cbindgen)"
generated=$(mktemp "${TMPDIR:-/tmp}/cuframes-h.XXXXXX")
trap 'rm -f "$generated"' EXIT
scripts/gen-header.sh "$generated"
if ! diff -u include/cuframes.h "$generated"; then
    echo "test.sh: include/cuframes.h is stale; run scripts/gen-header.sh and commit the result" >&2
    exit 1
fi
# The test suites. Each ends with "LABEL: N passed, N failed, N skipped" (a test
# that could not run its subject here is skipped, never passed); every suite
# runs even when an earlier one failed, and the totals come last.
logs=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-test.XXXXXX")
trap 'rm -f "$generated"; rm -rf "$logs"' EXIT
summaries=()
all_passed=0
all_failed=0
all_skipped=0
# suite LABEL TITLE COMMAND...: runs one suite and keeps its summary line.
suite() {
    local label=$1 title=$2 log
    shift 2
    log=$logs/${#summaries[@]}.log
    echo "== $title"
    local status=0
    { "$@" 2>&1 | tee "$log"; status=${PIPESTATUS[0]}; } || true
    local line p=0 f=0 s=0
    # The label as a literal in the pattern ("ffmpeg 9.0 tests": the dot is no wildcard).
    line=$(grep -E "^$(sed 's/[][\.*^$+?(){}|/]/\\&/g' <<<"$label"): [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped" "$log" | tail -n 1 || true)
    if [ -n "$line" ]; then
        read -r p f s <<<"$(sed -E 's/^[^:]*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/' <<<"$line")"
        if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
            f=1
            line="$line; but it exited $status"
        fi
    else
        f=1
        line="$label: no summary line; exited $status"
    fi
    summaries+=("$line")
    all_passed=$((all_passed + p))
    all_failed=$((all_failed + f))
    all_skipped=$((all_skipped + s))
}
# ffmpeg_suite LINE [BUILD OPTIONS]: the patched FFmpeg of one line, built and tested.
ffmpeg_suite() {
    local line=$1
    shift
    local label="ffmpeg $line tests"
    scripts/build-ffmpeg.sh --ffmpeg "$line" "$@" || {
        echo "$label: 0 passed, 1 failed, 0 skipped (scripts/build-ffmpeg.sh --ffmpeg $line failed)"
        return 1
    }
    # The other line's ffmpeg, when built, for the mixed-line hand-over tests.
    local other=()
    [ "$line" != 9.0 ] && [ -x build/ffmpeg-9.0/bin/ffmpeg ] && other=(FFMPEG_OTHER=build/ffmpeg-9.0/bin/ffmpeg)
    env "${other[@]}" FFMPEG=build/ffmpeg-$line/bin/ffmpeg FFMPEG_SUITE_LABEL="$label" tests/ffmpeg/run.sh
}

suite Rust "cargo test (scripts/test-rust.sh)" scripts/test-rust.sh
suite C-API "C API tests (scripts/test-c.sh)" scripts/test-c.sh
suite Python "Python bindings (scripts/test-python.sh)" scripts/test-python.sh
suite Docs "Links in the README and docs, licences in the manifests (scripts/test-docs.sh)" scripts/test-docs.sh
# FFmpeg on the default line (9.0, the one the Docker image ships) and on 7.1, the
# line distributions carry (8.1: scripts/test-ffmpeg-lines.sh; docs/testing.md).
suite "ffmpeg 9.0 tests" "FFmpeg 9.0 end to end (scripts/build-ffmpeg.sh --ffmpeg 9.0, tests/ffmpeg/run.sh)" ffmpeg_suite 9.0
suite "ffmpeg 7.1 tests" "FFmpeg 7.1 end to end (scripts/build-ffmpeg.sh --ffmpeg 7.1, tests/ffmpeg/run.sh)" ffmpeg_suite 7.1
# A host that runs short (/dev/shm full, descriptors at their limit), with the
# FFmpeg 9.0 muxer and input device where that line was built.
suite Exhaustion "Running out of /dev/shm and descriptors (tests/exhaustion/run.sh)" \
    env FFMPEG="$([ -x build/ffmpeg-9.0/bin/ffmpeg ] && echo build/ffmpeg-9.0/bin/ffmpeg)" tests/exhaustion/run.sh
suite GStreamer "The GStreamer elements on host memory, with FFmpeg 9.0 (tests/gstreamer/run.sh)" \
    env FFMPEG="$([ -x build/ffmpeg-9.0/bin/ffmpeg ] && echo build/ffmpeg-9.0/bin/ffmpeg)" tests/gstreamer/run.sh
suite Monitoring "The exporter scraped by a real Prometheus, alerts and dashboard (scripts/test-monitoring.sh)" scripts/test-monitoring.sh
suite Manifests "Kubernetes and Compose manifests (scripts/test-manifests.sh)" scripts/test-manifests.sh
suite Packages "The Debian packages: build, lintian, glibc floor, contents (scripts/test-packages.sh)" scripts/test-packages.sh
suite "docker tests" "The Docker image: containers sharing only a volume (scripts/test-docker.sh)" scripts/test-docker.sh

echo "== Totals"
printf '%s\n' "${summaries[@]}"
echo "All: $all_passed passed, $all_failed failed, $all_skipped skipped"
[ "$all_failed" -eq 0 ]
