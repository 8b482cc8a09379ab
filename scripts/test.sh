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
echo "== cargo test"
cargo test --workspace --locked
echo "== C API tests (scripts/test-c.sh)"
scripts/test-c.sh
echo "== Python bindings (scripts/test-python.sh)"
scripts/test-python.sh
echo "== FFmpeg end to end (scripts/build-ffmpeg.sh, tests/ffmpeg/run.sh)"; scripts/build-ffmpeg.sh; tests/ffmpeg/run.sh
echo "== Kubernetes and Compose manifests (scripts/test-manifests.sh)"; scripts/test-manifests.sh
echo "== The Docker image: containers sharing only a volume (scripts/test-docker.sh)"; scripts/test-docker.sh
