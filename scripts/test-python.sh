#!/usr/bin/env bash
# The Python bindings (python/) as a user gets them: installs libcuframes into a
# scratch prefix with scripts/install.sh (found through LD_LIBRARY_PATH, as the
# README says), builds the cuframes CLI the tests drive, makes a virtualenv
# (build/venv-python, kept between runs), `pip install ./python numpy pytest`,
# and runs python/tests with the installed package (host memory; the CUDA tests
# skip without a GPU, PyTorch or CuPy). Needs python3 with venv and PyPI (or a
# pip cache/mirror). Prints "Python: ok" or "Python: FAILED" last.
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
        echo "Python: FAILED (no venv)"
        exit 1
    fi
fi
echo "== pip install ./python numpy pytest"
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy pytest
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps ./python

export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CUFRAMES_BIN=$cli
unset CUFRAMES_LIBRARY
# From outside the source tree, so the installed package is the one imported.
(cd /tmp && "$OLDPWD/$venv/bin/python" -c \
    'import cuframes, sys; print("cuframes", cuframes.__version__, "from", cuframes.__file__, "with", cuframes.library_path)
sys.exit("test-python.sh: imported the source tree, not the installed package" if "site-packages" not in cuframes.__file__ else 0)')

echo "== ctypes structs against cuframes.h (sizeof, compiled by cc)"
sizes_c=$target/python-test/sizes.c
cat >"$sizes_c" <<'C'
#include <stdio.h>
#include <cuframes.h>
int main(void) {
    printf("PublisherConfig %zu\nSubscriberConfig %zu\nStreamInfo %zu\nSlot %zu\nSubscriberStats %zu\nFrameInfo %zu\n",
           sizeof(cuframes_publisher_config), sizeof(cuframes_subscriber_config),
           sizeof(cuframes_stream_info), sizeof(cuframes_slot), sizeof(cuframes_subscriber_stats),
           sizeof(cuframes_frame_info));
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
    echo "Python: FAILED (ctypes layout)"
    exit 1
fi

echo "== pytest python/tests"
if "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider python/tests; then
    echo "Python: ok"
else
    echo "Python: FAILED"
    exit 1
fi
