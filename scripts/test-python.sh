#!/usr/bin/env bash
# The Python bindings (python/) as a user gets them: `pip install ./python`
# builds a wheel that carries libcuframes (python/setup.py runs cargo), and
# that wheel is installed into a fresh virtualenv and used with nothing else
# installed; then the test suite runs in build/venv-python (kept between
# runs, `pip install ./python numpy pytest`) against the bundled library
# (host memory; the CUDA tests skip without a GPU, PyTorch or CuPy). The
# headers for the ctypes layout check come from scripts/install.sh into a
# scratch prefix. Needs python3 with venv and PyPI (or a pip cache/mirror).
# Prints "Python: N passed, N failed, N skipped" last (pytest's counts, the
# fresh-venv and ctypes checks counted as two more tests), with pytest's
# reasons for what it skipped above it; exits non-zero on a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=build/venv-python
prefix=$PWD/target/python-test/prefix
target=${CARGO_TARGET_DIR:-target}

echo "== scripts/install.sh --prefix $prefix"
scripts/install.sh --prefix "$prefix" >/dev/null
echo "== cargo build -p cuframes-cli"
cargo build --locked -p cuframes-cli
cli=$(cd "$target/debug" && pwd)/cuframes

if [ ! -x "$venv/bin/python" ]; then
    echo "== $python -m venv $venv"
    if ! "$python" -m venv "$venv"; then
        echo "test-python.sh: '$python -m venv' failed (Debian/Ubuntu: apt-get install python3-venv)" >&2
        echo "Python: 0 passed, 1 failed, 0 skipped (no venv)"
        exit 1
    fi
fi
echo "== pip wheel ./python, installed into a fresh venv: one pip install, nothing else"
wheels=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-wheel.XXXXXX")
trap 'rm -rf "$wheels"' EXIT
"$venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps ./python -w "$wheels/dist"
wheel=$(ls "$wheels"/dist/cuframes-*.whl)
echo "   $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB"
"$python" -m venv "$wheels/venv"
"$wheels/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel" numpy
(cd /tmp && env -u LD_LIBRARY_PATH -u CUFRAMES_LIBRARY CUFRAMES_RUNTIME_DIR="$wheels" "$wheels/venv/bin/python" -c '
import cuframes
from cuframes import pattern
assert "site-packages/cuframes/libcuframes.so" in cuframes.library_path, cuframes.library_path
with cuframes.Publisher("wheel", "nv12", 64, 48, memory="host") as pub, cuframes.Subscriber("wheel", timeout=5) as sub:
    pub.publish(pattern.planes("nv12", 64, 48, 0))
    with sub.next() as f:
        assert all(pattern.check_plane("nv12", 0, i, p) for i, p in enumerate(f.planes))
print("   fresh venv: library", cuframes.library_path, "- a frame round trip ok")') || {
    echo "Python: 0 passed, 1 failed, 0 skipped (the wheel in a fresh venv)"
    exit 1
}
checks=1 # the wheel in a fresh venv

echo "== pip install ./python numpy pytest"
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy pytest
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps ./python

export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CUFRAMES_BIN=$cli
unset CUFRAMES_LIBRARY
# From outside the source tree, so the installed package is the one imported.
(cd /tmp && "$OLDPWD/$venv/bin/python" -c \
    'import cuframes, sys; print("cuframes", cuframes.__version__, "from", cuframes.__file__, "with", cuframes.library_path)
sys.exit("test-python.sh: imported the source tree, not the installed package" if "site-packages" not in cuframes.__file__
         else "test-python.sh: the installed package does not carry libcuframes" if "site-packages" not in cuframes.library_path else 0)')

echo "== ctypes structs against cuframes.h (sizeof, compiled by cc)"
sizes_c=$target/python-test/sizes.c
cat >"$sizes_c" <<'C'
#include <stdio.h>
#include <cuframes.h>
int main(void) {
    printf("PublisherConfig %zu\nSubscriberConfig %zu\nStreamInfo %zu\nSlot %zu\nSubscriberStats %zu\nFrameInfo %zu\nFrameProps %zu\n",
           sizeof(cuframes_publisher_config), sizeof(cuframes_subscriber_config),
           sizeof(cuframes_stream_info), sizeof(cuframes_slot), sizeof(cuframes_subscriber_stats),
           sizeof(cuframes_frame_info), sizeof(cuframes_frame_props));
    return 0;
}
C
cc -I"$prefix/include" "$sizes_c" -o "${sizes_c%.c}"
if ! "${sizes_c%.c}" | "$venv/bin/python" -c '
import ctypes, sys
from cuframes import _lib
bad = [line for line in sys.stdin.read().split("\n") if line
       and ctypes.sizeof(getattr(_lib, line.split()[0])) != int(line.split()[1])]
for line in bad:
    name, size = line.split()
    print("ctypes %s is %d bytes, cuframes.h says %s" % (name, ctypes.sizeof(getattr(_lib, name)), size))
sys.exit(1 if bad else 0)'; then
    echo "Python: $checks passed, 1 failed, 0 skipped (ctypes layout)"
    exit 1
fi
checks=$((checks + 1))

echo "== pytest python/tests"
report=$wheels/pytest.xml
rc=0
"$venv/bin/python" -m pytest -q -rs -p no:cacheprovider --junitxml="$report" python/tests || rc=$?
# The counts from pytest's JUnit report: tests, failures, errors, skipped.
if ! counts=$("$venv/bin/python" - "$report" <<'PY'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
n = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
failed = n["failures"] + n["errors"]
print(n["tests"] - failed - n["skipped"], failed, n["skipped"])
PY
); then
    echo "Python: $checks passed, 1 failed, 0 skipped (pytest exited $rc with no report)"
    exit 1
fi
read -r passed failed skipped <<<"$counts"
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1 # pytest failed outside any test (collection, usage)
fi
echo "Python: $((passed + checks)) passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
