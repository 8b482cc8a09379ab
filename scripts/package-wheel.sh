#!/usr/bin/env bash
# The Python wheel users install: `pip install cuframes-*.whl` needs no toolchain
# and no libcuframes, on any Linux with glibc 2.28 or newer.
#
#   scripts/package-wheel.sh [--out DIR] [--library FILE]    (default build/dist)
#
# libcuframes is built against glibc 2.28 (cargo zigbuild, scripts/lib/zigbuild.sh:
# the tools come from PyPI), bundled into the wheel by python/setup.py, and the wheel
# tagged manylinux_2_28_<arch>; `auditwheel show` must agree, or this fails. Prints
# the wheel's path last. --library bundles that libcuframes instead of building one
# (its claim is checked the same way). Needs python3 with venv, cargo, and PyPI (or
# a pip cache) the first time, to fill build/venv-zig; after that, no network.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/zigbuild.sh

out=build/dist
library=
usage() { echo "usage: scripts/package-wheel.sh [--out DIR] [--library FILE]" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
        --library) [ $# -ge 2 ] || usage; library=$(realpath "$2"); [ -f "$library" ] || { echo "package-wheel.sh: no library $2" >&2; exit 2; }; shift 2 ;;
        -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "package-wheel.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

if [ -z "$library" ]; then
    zig_build cuframes-capi
    library=$ZIG_OUT/libcuframes_capi.so
else
    ensure_zig_tools
fi
echo "== libcuframes for glibc $ZIG_GLIBC: needs GLIBC_$(glibc_floor "$library") at most" >&2
plat=manylinux_${ZIG_GLIBC/./_}_$ZIG_ARCH

mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "== pip wheel ./python ($plat)" >&2
# With the venv's own setuptools (no build isolation, which would fetch setuptools from
# PyPI at every build): offline once the venv is there.
CUFRAMES_WHEEL_LIBRARY=$library CUFRAMES_WHEEL_PLAT=$plat \
    "$ZIG_VENV/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation \
    ./python -w "$work" >&2
wheel=$(ls "$work"/cuframes-*.whl)
# auditwheel names the most compatible tag the wheel's libraries allow.
report=$("$ZIG_VENV/bin/auditwheel" show "$wheel" 2>&1) || { echo "$report" >&2; exit 1; }
if ! grep -q "consistent with the following platform tag: \"$plat\"" <<<"$(tr '\n' ' ' <<<"$report" | tr -s ' ')"; then
    echo "$report" >&2
    echo "package-wheel.sh: auditwheel does not confirm $plat for $(basename "$wheel")" >&2
    exit 1
fi
echo "== auditwheel show: $(basename "$wheel") is consistent with $plat" >&2
rm -f "$out"/cuframes-*.whl
mv "$wheel" "$out/"
echo "$out/$(basename "$wheel")"
