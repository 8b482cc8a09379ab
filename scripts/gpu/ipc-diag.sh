#!/usr/bin/env bash
# Diagnoses CUDA IPC between processes on the GPU machine (ptrace rules).
cd "$(dirname "$0")/../.."
B=$PWD/.gpu/bin/cuframes
export CUFRAMES_RUNTIME_DIR=$(mktemp -d)
echo "yama ptrace_scope: $(cat /proc/sys/kernel/yama/ptrace_scope 2>&1)"
try() {
    "$B" publish "$1" --memory cuda --size 640x360 --frames 300 --fps 100 -q &
    local p=$!
    sleep 1.5
    timeout 20 "$B" subscribe "$1" --verify --frames 20 --json
    echo "sibling subscriber rc=$?"
    python3 .gpu/ipc-diag.py "$1" 2>&1 | tail -5
    kill $p; wait $p
}
try diag1
if [ -w /proc/sys/kernel/yama/ptrace_scope ]; then
    old=$(cat /proc/sys/kernel/yama/ptrace_scope)
    echo 0 >/proc/sys/kernel/yama/ptrace_scope && echo "yama ptrace_scope now 0"
    timeout 20 "$B" publish diag2 --memory cuda --size 640x360 --frames 300 --fps 100 -q &
    p=$!; sleep 1.5
    timeout 20 "$B" subscribe diag2 --verify --frames 20 --json; echo "sibling subscriber (yama 0) rc=$?"
    kill $p; wait $p
    echo "$old" >/proc/sys/kernel/yama/ptrace_scope
fi
