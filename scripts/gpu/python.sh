#!/usr/bin/env bash
# On the GPU machine: the Python bindings' CUDA tests (python/tests/test_cuda.py)
# against a staged libcuframes and cuframes CLI, with the machine's own python3
# (NumPy, PyTorch and/or CuPy; no pip, no network: the package is used from the
# source tree through PYTHONPATH, no installation).
#
#   CUFRAMES_LIBRARY=$PWD/.gpu/lib/libcuframes.so CUFRAMES_BIN=$PWD/.gpu/bin/cuframes \
#       scripts/gpu/python.sh
#
# Writes $OUT/python-cuda.log when $OUT is set. Prints
# "python-cuda: N passed, M failed, K skipped" last; exits 1 on a failure, or
# when nothing ran at all (no CUDA-capable PyTorch or CuPy) unless
# ALLOW_ALL_SKIPPED=1.
set -uo pipefail
cd "$(dirname "$0")/../.."

: "${CUFRAMES_LIBRARY:?set CUFRAMES_LIBRARY to the staged libcuframes.so}"
: "${CUFRAMES_BIN:?set CUFRAMES_BIN to the staged cuframes CLI}"
export CUFRAMES_LIBRARY CUFRAMES_BIN
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
CUFRAMES_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-pycuda.XXXXXX")
export CUFRAMES_RUNTIME_DIR
trap 'rm -rf "$CUFRAMES_RUNTIME_DIR"' EXIT
log=${OUT:+$OUT/python-cuda.log}
log=${log:-$(mktemp "${TMPDIR:-/tmp}/python-cuda.XXXXXX.log")}

python3 - <<'PY' 2>&1 | tee "$log"
import importlib
for name in ("numpy", "torch", "cupy"):
    try:
        m = importlib.import_module(name)
        extra = ""
        if name == "torch":
            extra = " cuda=%s %s" % (m.version.cuda, m.cuda.get_device_name(0) if m.cuda.is_available() else "no device")
        print("%s %s%s" % (name, m.__version__, extra))
    except Exception as e:
        print("%s: not usable (%s)" % (name, e))
PY
python3 python/tests/test_cuda.py 2>&1 | tee -a "$log"
status=${PIPESTATUS[0]}
summary=$(grep '^python-cuda:' "$log" | tail -n 1)
if [ "$status" -ne 0 ] || [ -z "$summary" ]; then
    echo "python-cuda: FAILED (status $status)"
    exit 1
fi
case "$summary" in
*" 0 passed"*)
    if [ "${ALLOW_ALL_SKIPPED:-0}" != 1 ]; then
        echo "python-cuda: nothing ran (every test skipped)"
        exit 1
    fi
    ;;
esac
exit 0
