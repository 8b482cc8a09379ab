#!/usr/bin/env bash
# Builds the C library (release) and installs it under a prefix:
#   PREFIX/include/cuframes.h
#   PREFIX/lib/libcuframes.a
#   PREFIX/lib/libcuframes.so.X.Y.Z, libcuframes.so.X (SONAME; 0.Y before 1.0), libcuframes.so
#   PREFIX/lib/pkgconfig/cuframes.pc
# Usage: scripts/install.sh --prefix DIR
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    echo "usage: scripts/install.sh --prefix DIR" >&2
    exit 2
}

prefix=
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || usage; prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        -h|--help) usage ;;
        *) echo "install.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
[ -n "$prefix" ] || usage
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)

cargo build --release --locked -p cuframes-capi
target=${CARGO_TARGET_DIR:-target}/release

# The package version, e.g. 0.1.0 (pkgid ends in "#0.1.0" or "#name@0.1.0").
id=$(cargo pkgid --locked -p cuframes-capi)
version=${id##*#}
version=${version##*@}
# The SONAME's series, as rust/cuframes-capi/build.rs sets it: the major
# version, or 0.minor before 1.0 (Cargo's rule: 0.1 and 0.2 are incompatible).
major=${version%%.*}
if [ "$major" = 0 ]; then
    minor=${version#*.}
    series=0.${minor%%.*}
else
    series=$major
fi

install -d "$prefix/include" "$prefix/lib/pkgconfig"
install -m 0644 include/cuframes.h "$prefix/include/cuframes.h"
install -m 0644 "$target/libcuframes_capi.a" "$prefix/lib/libcuframes.a"
install -m 0755 "$target/libcuframes_capi.so" "$prefix/lib/libcuframes.so.$version"
ln -sfn "libcuframes.so.$version" "$prefix/lib/libcuframes.so.$series"
ln -sfn "libcuframes.so.$series" "$prefix/lib/libcuframes.so"
sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" \
    rust/cuframes-capi/cuframes.pc.in >"$prefix/lib/pkgconfig/cuframes.pc"
chmod 0644 "$prefix/lib/pkgconfig/cuframes.pc"

echo "installed cuframes $version (C API) into $prefix:"
echo "  include/cuframes.h  lib/libcuframes.a  lib/libcuframes.so.$version (+ .so.$series, .so)  lib/pkgconfig/cuframes.pc"
