# shellcheck shell=bash
# What this machine can run of the capability-gated Rust tests, and libtest's
# counts (sourced by scripts/test-rust.sh and scripts/gpu-test.sh).
#
# A Rust test that needs something a machine may lack is #[ignore]d with the
# reason and sits in a module named for each thing it needs (see
# rust/cuframes-cli/tests/common/mod.rs):
#
#   needs_gpu         an NVIDIA GPU
#   needs_two_gpus    two of them
#   needs_root        root, and setpriv able to run the cuframes binary as nobody
#   needs_namespaces  root, and unshare making PID, IPC and mount namespaces
#                     with a private /dev/shm
#
# The runners pass --include-ignored (or --ignored) and one `--skip MARKER::`
# per capability missing here, and count the tests so left out as skipped,
# with the reason. A plain `cargo test` lists every one of them as ignored.

# shellcheck disable=SC2034 # used by the scripts that source this
CAPABILITY_MARKERS=(needs_gpu needs_two_gpus needs_root needs_namespaces)

# gpu_count: NVIDIA GPUs nvidia-smi lists (0 without a driver).
gpu_count() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true
    else
        echo 0
    fi
}

# capability_missing MARKER [CUFRAMES_BINARY]: prints why this machine lacks
# what MARKER's tests need and succeeds; fails (prints nothing) when it has it.
capability_missing() {
    local marker=$1 binary=${2:-} n err
    case $marker in
    needs_gpu)
        n=$(gpu_count)
        [ "$n" -ge 1 ] && return 1
        echo "no NVIDIA GPU here (nvidia-smi lists none): scripts/gpu-test.sh runs them on the GPU machine"
        ;;
    needs_two_gpus)
        n=$(gpu_count)
        [ "$n" -ge 2 ] && return 1
        echo "needs two NVIDIA GPUs; $n here"
        ;;
    needs_root)
        if [ "$(id -u)" -ne 0 ]; then
            echo "needs root (runs subscribers as nobody, chowns files)"
        elif ! command -v setpriv >/dev/null 2>&1; then
            echo "needs setpriv (util-linux)"
        elif [ -n "$binary" ] && ! setpriv --reuid=65534 --regid=65534 --clear-groups \
            "$binary" --version >/dev/null 2>&1; then
            echo "nobody cannot execute $binary (a directory above it is private?)"
        else
            return 1
        fi
        ;;
    needs_namespaces)
        if [ "$(id -u)" -ne 0 ]; then
            echo "needs root (unshare and mount)"
        elif ! command -v unshare >/dev/null 2>&1; then
            echo "needs unshare (util-linux)"
        elif ! err=$(unshare --pid --ipc --mount --fork --mount-proc -- \
            sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>&1); then
            echo "unshare failed: $(echo "$err" | head -c 200)"
        else
            return 1
        fi
        ;;
    *)
        echo "unknown capability $marker"
        ;;
    esac
    return 0
}

# libtest_counts LOG: "PASSED FAILED" summed over the "test result:" lines of
# libtest output in LOG.
libtest_counts() {
    awk '/^test result: / {
        for (i = 1; i <= NF; i++) {
            if ($(i + 1) ~ /^passed;?$/) p += $i
            if ($(i + 1) ~ /^failed;?$/) f += $i
        }
    } END { printf "%d %d\n", p, f }' "$1"
}

# skipped_tests LIST MARKER...: of the test names in LIST (libtest --list
# output, "name: test"), those whose path holds one of the MARKERs, as
# "MARKER NAME" (the first marker that matches).
skipped_tests() {
    local list=$1
    shift
    awk -v markers="$*" 'BEGIN { n = split(markers, m, " ") }
        / test$/ {
            name = $0
            sub(/: test$/, "", name)
            for (i = 1; i <= n; i++) {
                if (index("::" name, "::" m[i] "::")) { print m[i], name; break }
            }
        }' "$list"
}
