#!/usr/bin/env bash
# The Python bindings (python/) as users get them: the manylinux wheel that
# scripts/package-wheel.sh makes (libcuframes built for glibc 2.28 inside it,
# auditwheel's verdict checked) is installed into a fresh virtualenv with pip,
# with numpy and pytest from PyPI and nothing else, and the test suite runs from
# that venv with no Rust toolchain on PATH (cargo and rustc are not found there)
# against the installed package and its bundled library (host memory; the CUDA
# tests skip without a GPU, PyTorch or CuPy). Also: a wheel that claims more
# than its library allows is refused; `pip wheel ./python` from source (cargo)
# still builds, tagged for this machine only. The headers for the ctypes layout
# check come from scripts/install.sh into a scratch prefix; the tests' cuframes
# CLI is the cargo build's. Needs python3 with venv and PyPI (or a pip cache).
# Prints "Python: N passed, N failed, N skipped" last (pytest's counts, the
# checks around it counted as tests too), with pytest's reasons for what it
# skipped above it; exits non-zero on a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
prefix=$PWD/target/python-test/prefix
target=${CARGO_TARGET_DIR:-target}
checks=0
check_failed() { # WHAT: a check around pytest failed; the suite ends here
    echo "FAILED $1"
    echo "Python: $checks passed, 1 failed, 0 skipped ($1)"
    exit 1
}
passed_check() {
    checks=$((checks + 1))
    echo "ok     $1"
}

echo "== scripts/install.sh --prefix $prefix"
scripts/install.sh --prefix "$prefix" >/dev/null
echo "== cargo build -p cuframes-cli"
cargo build --locked -p cuframes-cli
cli=$(cd "$target/debug" && pwd)/cuframes

if ! "$python" -m venv --help >/dev/null 2>&1; then
    echo "test-python.sh: '$python -m venv' is missing (Debian/Ubuntu: apt-get install python3-venv)" >&2
    echo "Python: 0 passed, 1 failed, 0 skipped (no venv)"
    exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "== scripts/package-wheel.sh: the manylinux wheel"
wheel=$(scripts/package-wheel.sh --out "$work/dist" | tail -n 1) || check_failed "scripts/package-wheel.sh"
case $(basename "$wheel") in
    cuframes-*-py3-none-manylinux_2_28_*.whl) ;;
    *) check_failed "the wheel is $(basename "$wheel"), not manylinux_2_28" ;;
esac
passed_check "$(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB): auditwheel show confirms manylinux_2_28"

# A library linked against this machine's glibc cannot be sold as manylinux_2_28.
cargo build -q --locked -p cuframes-capi
floor=$(objdump -T "$target/debug/libcuframes_capi.so" | grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -n 1)
if [ "$(printf '%s\n' "$floor" GLIBC_2.28 | sort -V | tail -n 1)" = GLIBC_2.28 ]; then
    echo "skip   a false manylinux claim is refused (this machine's glibc build needs only $floor)"
    false_claim=skipped
elif scripts/package-wheel.sh --out "$work/false" --library "$target/debug/libcuframes_capi.so" >"$work/false.log" 2>&1 ||
    ! grep -q "auditwheel does not confirm manylinux_2_28" "$work/false.log"; then
    tail -n 5 "$work/false.log"
    check_failed "a wheel whose library needs $floor was not refused"
else
    passed_check "a wheel whose library needs $floor is refused as manylinux_2_28"
fi

echo "== a fresh venv: pip install the wheel, numpy, pytest (no Rust toolchain used)"
venv=$work/venv
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel" numpy pytest
# The PATH the tests run with: the venv and the system's programs, no Rust toolchain.
clean_path=$venv/bin:/usr/local/bin:/usr/bin:/bin
for tool in cargo rustc; do
    if found=$(env PATH="$clean_path" sh -c "command -v $tool"); then
        check_failed "$tool is on the tests' PATH ($found): it must not be"
    fi
done
run_clean() { (cd /tmp && env -u LD_LIBRARY_PATH -u CUFRAMES_LIBRARY -u PYTHONPATH PATH="$clean_path" "$@"); }
run_clean env CUFRAMES_RUNTIME_DIR="$work" python -c '
import cuframes
from cuframes import pattern
assert "site-packages/cuframes/libcuframes.so" in cuframes.library_path, cuframes.library_path
assert "site-packages" in cuframes.__file__, cuframes.__file__
with cuframes.Publisher("wheel", "nv12", 64, 48, memory="host") as pub, cuframes.Subscriber("wheel", timeout=5) as sub:
    pub.publish(pattern.planes("nv12", 64, 48, 0))
    with sub.next() as f:
        assert all(pattern.check_plane("nv12", 0, i, p) for i, p in enumerate(f.planes))
print("   cuframes", cuframes.__version__, "from", cuframes.__file__, "with", cuframes.library_path)' ||
    check_failed "the wheel in a fresh venv: a frame round trip"
passed_check "the installed wheel, no cargo or rustc on PATH: a frame round trip with its own library"

echo "== pip wheel ./python: from source (cargo), tagged for this machine only"
if ! "$venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps ./python -w "$work/source" >"$work/source.log" 2>&1; then
    tail -n 20 "$work/source.log"
    check_failed "pip wheel ./python"
fi
source_wheel=$(ls "$work"/source/cuframes-*.whl)
case $(basename "$source_wheel") in
    *-py3-none-linux_*.whl) passed_check "from source: $(basename "$source_wheel") (no manylinux claim)" ;;
    *) check_failed "the source build is tagged $(basename "$source_wheel")" ;;
esac

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
if ! "${sizes_c%.c}" | run_clean python -c '
import ctypes, sys
from cuframes import _lib
bad = [line for line in sys.stdin.read().split("\n") if line
       and ctypes.sizeof(getattr(_lib, line.split()[0])) != int(line.split()[1])]
for line in bad:
    name, size = line.split()
    print("ctypes %s is %d bytes, cuframes.h says %s" % (name, ctypes.sizeof(getattr(_lib, name)), size))
sys.exit(1 if bad else 0)'; then
    check_failed "ctypes layout"
fi
passed_check "ctypes structs of the installed package match cuframes.h"

echo "== pytest python/tests, from the fresh venv, no Rust toolchain on PATH"
report=$work/pytest.xml
rc=0
run_clean env CUFRAMES_BIN="$cli" python -m pytest -q -rs -p no:cacheprovider --junitxml="$report" \
    "$PWD/python/tests" || rc=$?
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
    check_failed "pytest exited $rc with no report"
fi
read -r passed failed skipped <<<"$counts"
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1 # pytest failed outside any test (collection, usage)
fi
echo "Python: $((passed + checks)) passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
