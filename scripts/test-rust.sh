#!/usr/bin/env bash
# The Rust tests (cargo test --workspace), with honest accounting.
#
#   scripts/test-rust.sh [CARGO TEST ARGS...]
#
# Tests that need what a machine may lack are #[ignore]d and sit in modules
# named for it (needs_gpu, needs_two_gpus, needs_root, needs_namespaces; see
# scripts/lib/capabilities.sh). This runs every test this machine can run
# (--include-ignored, one --skip per missing capability) and counts the rest
# as skipped, with the reason; GPU tests, where there is a GPU, in a second
# pass one at a time. Prints "Rust: N passed, N failed, N skipped" last;
# exits non-zero on a failure.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/lib/capabilities.sh

target=${CARGO_TARGET_DIR:-target}
work=$target/test-rust
mkdir -p "$work"
cargo=(cargo test --workspace --locked --no-fail-fast "$@")

echo "== ${cargo[*]} --no-run"
if ! "${cargo[@]}" --no-run; then
    echo "Rust: 0 passed, 1 failed, 0 skipped (the tests did not build)"
    exit 1
fi

# What is missing here, and why.
missing=()
declare -A why
for marker in "${CAPABILITY_MARKERS[@]}"; do
    if reason=$(capability_missing "$marker" "$PWD/$target/debug/cuframes"); then
        missing+=("$marker")
        why[$marker]=$reason
    fi
done
skips=()
for marker in "${missing[@]}"; do skips+=(--skip "$marker::"); done

status=0
# Pass 1: everything but the GPU tests.
host_skips=("${skips[@]}")
[ -n "${why[needs_gpu]:-}" ] || host_skips+=(--skip needs_gpu::)
echo "== ${cargo[*]} -- --include-ignored ${host_skips[*]}"
"${cargo[@]}" -- --include-ignored "${host_skips[@]}" 2>&1 | tee "$work/host.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
read -r passed failed < <(libtest_counts "$work/host.log")

# Pass 2, where there is a GPU: the GPU tests, one at a time.
if [ -z "${why[needs_gpu]:-}" ]; then
    echo "== ${cargo[*]} -- --ignored needs_gpu:: --test-threads=1 ${skips[*]}"
    "${cargo[@]}" -- --ignored needs_gpu:: --test-threads=1 "${skips[@]}" 2>&1 | tee "$work/gpu.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    read -r p f < <(libtest_counts "$work/gpu.log")
    passed=$((passed + p))
    failed=$((failed + f))
fi

# Skipped: the tests whose names hold a missing capability.
skipped=0
if [ ${#missing[@]} -gt 0 ]; then
    if ! "${cargo[@]}" --tests -- --list --include-ignored 2>"$work/list.err" >"$work/list.txt"; then
        cat "$work/list.err"
        echo "test-rust: could not list the tests to count the skipped ones"
        status=1
    fi
    skipped_tests "$work/list.txt" "${missing[@]}" >"$work/skipped.txt"
    skipped=$(wc -l <"$work/skipped.txt")
fi

# A run that failed without a failed test (a crash, a build step) is a failure.
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1
    echo "test-rust: cargo test failed outside any test (see above)"
fi
for marker in "${missing[@]}"; do
    n=$(grep -c "^$marker " "$work/skipped.txt" || true)
    [ "$n" -gt 0 ] && echo "skipped $n ($marker): ${why[$marker]}"
done
echo "Rust: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
