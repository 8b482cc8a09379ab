#!/usr/bin/env bash
# On the GPU machine: the Python bindings' CUDA tests (python/tests/test_cuda.py)
# with the machine's own python3 (NumPy, PyTorch and/or CuPy; no network).
#
#   CUFRAMES_WHEEL=$PWD/.gpu/wheel/cuframes-*.whl CUFRAMES_BIN=$PWD/.gpu/bin/cuframes \
#       scripts/gpu/python.sh
#
# With CUFRAMES_WHEEL (the manylinux wheel gpu-test.sh stages) the package is
# installed from the wheel into a scratch directory (pip install --no-index --target,
# or unpacked with Python's zipfile where there is no pip) and tested from there with
# the library the wheel carries; CUFRAMES_LIBRARY is ignored then. Without it, the
# package is used from the source tree (PYTHONPATH) with CUFRAMES_LIBRARY.
#
# Writes $OUT/python-cuda.log when $OUT is set. Prints
# "python-cuda: N passed, M failed, K skipped" last; exits 1 on a failure, or
# when nothing ran at all (no CUDA-capable PyTorch or CuPy) unless
# ALLOW_ALL_SKIPPED=1.
set -uo pipefail
cd "$(dirname "$0")/../.."

: "${CUFRAMES_BIN:?set CUFRAMES_BIN to the staged cuframes CLI}"
export CUFRAMES_BIN
CUFRAMES_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-pycuda.XXXXXX")
export CUFRAMES_RUNTIME_DIR
installed=
trap 'rm -rf "$CUFRAMES_RUNTIME_DIR" ${installed:+"$installed"}' EXIT
log=${OUT:+$OUT/python-cuda.log}
log=${log:-$(mktemp "${TMPDIR:-/tmp}/python-cuda.XXXXXX.log")}
if [ -n "${CUFRAMES_WHEEL:-}" ]; then
    [ -f "$CUFRAMES_WHEEL" ] || { echo "python-cuda: FAILED (no wheel $CUFRAMES_WHEEL)"; exit 1; }
    installed=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-wheel.XXXXXX")
    if python3 -m pip --version >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --target "$installed" "$CUFRAMES_WHEEL" ||
            { echo "python-cuda: FAILED (pip install $CUFRAMES_WHEEL)"; exit 1; }
    else
        python3 -m zipfile -e "$CUFRAMES_WHEEL" "$installed" ||
            { echo "python-cuda: FAILED (unpacking $CUFRAMES_WHEEL)"; exit 1; }
    fi
    unset CUFRAMES_LIBRARY
    export PYTHONPATH=$installed${PYTHONPATH:+:$PYTHONPATH}
    echo "cuframes from the wheel $(basename "$CUFRAMES_WHEEL"), installed in $installed" | tee "$log"
    python3 -c 'import cuframes, sys
print("library", cuframes.library_path)
sys.exit(0 if cuframes.library_path.startswith(sys.argv[1]) else "not the library the wheel carries")' "$installed" 2>&1 |
        tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "python-cuda: FAILED (the wheel's library was not used)"; exit 1; }
else
    : "${CUFRAMES_LIBRARY:?set CUFRAMES_WHEEL to the staged wheel, or CUFRAMES_LIBRARY to the staged libcuframes.so}"
    export CUFRAMES_LIBRARY
    export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
    : >"$log"
fi

python3 - <<'PY' 2>&1 | tee -a "$log"
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
