#!/usr/bin/env bash
# Debian packages of cuframes, as operators install them (apt install ./*.deb):
#
#   libcuframes0.2   the shared library, /usr/lib/<triplet>/libcuframes.so.0.2
#                    (the package is named for its SONAME, as Debian policy 8.1 asks:
#                    rust/cuframes-capi/build.rs names the SONAME after the
#                    compatible series, 0.2, so a 0.3 is a new package that installs
#                    beside this one)
#   libcuframes-dev  cuframes.h, libcuframes.a, the libcuframes.so link, cuframes.pc
#   cuframes         the cuframes command, its manual pages, bash and zsh completions
#   gstreamer1.0-cuframes
#                    the GStreamer elements cuframessrc and cuframessink, in GStreamer's
#                    plugin directory (GStreamer 1.22 or newer)
#
#   scripts/package-deb.sh [--out DIR]      (default build/deb)
#
# Built with dpkg-deb from a release build against glibc 2.28 (cargo zigbuild,
# scripts/lib/zigbuild.sh), so they install on Debian 10+ and Ubuntu 18.10+ (the
# glibc floor is read from the binaries with objdump and written into Depends:
# libc6 (>= FLOOR)). Each package has its copyright file (DEP-5, MIT or Apache-2.0)
# and changelog; the library a shlibs file, a symbols file and the ldconfig trigger.
# Prints the packages' paths last, after "glibc floor: X".
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/zigbuild.sh

out=build/deb
while [ $# -gt 0 ]; do
    case $1 in
        --out) [ $# -ge 2 ] || { echo "usage: scripts/package-deb.sh [--out DIR]" >&2; exit 2; }; out=$2; shift 2 ;;
        -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "package-deb.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
for tool in dpkg-deb dpkg-architecture objdump strip gzip; do
    command -v "$tool" >/dev/null || { echo "package-deb.sh: $tool not found (apt-get install dpkg-dev binutils)" >&2; exit 1; }
done

zig_build cuframes-capi cuframes-cli
main_out=$ZIG_OUT
# The GStreamer plugin links the system's GStreamer (its -sys crates ask pkg-config):
# zig finds those libraries only when told where, and the flag that tells it would
# rebuild the other packages, so the plugin has a target directory of its own.
. scripts/lib/gstreamer.sh
ensure_gstreamer
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}/zig-gstreamer RUSTFLAGS="-L native=/usr/lib/$triplet" \
    zig_build gst-cuframes
gst_out=$ZIG_OUT
ZIG_OUT=$main_out
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
id=$(cargo pkgid --locked -p cuframes-capi)
version=${id##*[#@]}
major=${version%%.*}
if [ "$major" = 0 ]; then
    minor=${version#*.}
    series=0.${minor%%.*}
else
    series=$major
fi
debversion=$version-1
libpkg=libcuframes$series
soname=libcuframes.so.$series
maintainer=${DEB_MAINTAINER:-The cuframes developers <cuframes@users.noreply.github.com>}
homepage=https://github.com/cuframes/cuframes
# Reproducible: every date and mtime is the commit's (or SOURCE_DATE_EPOCH's).
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH=$epoch

actual_soname=$(objdump -p "$ZIG_OUT/libcuframes_capi.so" | awk '$1 == "SONAME" { print $2 }')
[ "$actual_soname" = "$soname" ] ||
    { echo "package-deb.sh: the library's SONAME is '$actual_soname', expected $soname" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/stage
lib=$stage/lib/usr/lib/$triplet
dev=$stage/dev
cli=$stage/cli
gst=$stage/gst
install -d "$lib" "$dev/usr/include" "$dev/usr/lib/$triplet/pkgconfig" "$gst/usr/lib/$triplet/gstreamer-1.0" \
    "$cli/usr/bin" "$cli/usr/share/man/man1" "$cli/usr/share/bash-completion/completions" \
    "$cli/usr/share/zsh/vendor-completions"

# The library: stripped, 0644 (Debian's shared libraries are not executable).
install -m 0644 "$ZIG_OUT/libcuframes_capi.so" "$lib/libcuframes.so.$version"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$lib/libcuframes.so.$version"
ln -s "libcuframes.so.$version" "$lib/$soname"
# -dev: header, static library (debug info dropped), the link to build against, cuframes.pc.
install -m 0644 include/cuframes.h "$dev/usr/include/cuframes.h"
install -m 0644 "$ZIG_OUT/libcuframes_capi.a" "$dev/usr/lib/$triplet/libcuframes.a"
strip --strip-debug --remove-section=.comment "$dev/usr/lib/$triplet/libcuframes.a"
ln -s "$soname" "$dev/usr/lib/$triplet/libcuframes.so"
sed -e "s|@PREFIX@|/usr|g" -e "s|@VERSION@|$version|g" \
    -e "s|^libdir=.*|libdir=\${exec_prefix}/lib/$triplet|" \
    rust/cuframes-capi/cuframes.pc.in >"$dev/usr/lib/$triplet/pkgconfig/cuframes.pc"
chmod 0644 "$dev/usr/lib/$triplet/pkgconfig/cuframes.pc"
# The command, its pages and completions (made by the command itself).
install -m 0755 "$ZIG_OUT/cuframes" "$cli/usr/bin/cuframes"
strip --strip-all --remove-section=.comment --remove-section=.note "$cli/usr/bin/cuframes"
"$cli/usr/bin/cuframes" manpage --dir "$cli/usr/share/man/man1"
gzip -9n "$cli"/usr/share/man/man1/*.1
"$cli/usr/bin/cuframes" completions bash >"$cli/usr/share/bash-completion/completions/cuframes"
"$cli/usr/bin/cuframes" completions zsh >"$cli/usr/share/zsh/vendor-completions/_cuframes"
chmod 0644 "$cli"/usr/share/bash-completion/completions/cuframes "$cli"/usr/share/zsh/vendor-completions/_cuframes

# The plugin, where GStreamer looks for plugins (0644, as Debian's are).
plugin=$gst/usr/lib/$triplet/gstreamer-1.0/libgstcuframes.so
install -m 0644 "$gst_out/libgstcuframes.so" "$plugin"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$plugin"

floor_lib=$(glibc_floor "$lib/libcuframes.so.$version")
floor_gst=$(glibc_floor "$plugin")
floor_cli=$(glibc_floor "$cli/usr/bin/cuframes")
floor=$(printf '%s\n' "$floor_lib" "$floor_cli" | sort -V | tail -n 1)
# libgcc_s, where the binaries need it (zig's link does not).
needs_gcc() { objdump -p "$1" | awk '$1 == "NEEDED" { print $2 }' | grep -qx 'libgcc_s.so.1'; }
libdeps="libc6 (>= $floor_lib)"
clideps="libc6 (>= $floor_cli)"
needs_gcc "$lib/libcuframes.so.$version" && libdeps="$libdeps, libgcc-s1"
needs_gcc "$cli/usr/bin/cuframes" && clideps="$clideps, libgcc-s1"
gstdeps="libc6 (>= $floor_gst), libglib2.0-0 (>= 2.74), libgstreamer1.0-0 (>= 1.22), libgstreamer-plugins-base1.0-0 (>= 1.22)"
needs_gcc "$plugin" && gstdeps="$gstdeps, libgcc-s1"

date_rfc=$(date -u -R -d "@$epoch")
year=$(date -u +%Y -d "@$epoch")
# doc PKG ROOT [OVERRIDE...]: /usr/share/doc/PKG/copyright and changelog.Debian.gz;
# lintian overrides, each with the reason above it.
doc() {
    local pkg=$1 root=$2 d=$2/usr/share/doc/$1
    shift 2
    install -d "$d" "$root/usr/share/lintian/overrides"
    {
        echo "# Not a package for Debian's archive (built by scripts/package-deb.sh), so"
        echo "# there is no ITP bug for its first changelog entry to close."
        echo "$pkg: initial-upload-closes-no-bugs"
        local tag
        for tag in "$@"; do
            case $tag in
                hardening-no-fortify-functions)
                    echo "# Rust: the code calls no fortifiable libc function through C headers, so"
                    echo "# _FORTIFY_SOURCE has nothing to wrap (RELRO, BIND_NOW, PIE and the stack"
                    echo "# protector checks pass)." ;;
            esac
            echo "$pkg: $tag"
        done
    } >"$root/usr/share/lintian/overrides/$pkg"
    chmod 0644 "$root/usr/share/lintian/overrides/$pkg"
    cat >"$d/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: cuframes
Upstream-Contact: $maintainer
Source: $homepage

Files: *
Copyright: $year The cuframes developers
License: MIT or Apache-2.0

License: MIT
$(sed -e 's/^$/./' -e 's/^/ /' LICENSE-MIT | tail -n +3)

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License"); you may not
 use this file except in compliance with the License. You may obtain a copy of
 the License at http://www.apache.org/licenses/LICENSE-2.0
 .
 On Debian systems, the complete text of the Apache License, Version 2.0 can be
 found in "/usr/share/common-licenses/Apache-2.0".
EOF
    cat >"$work/changelog" <<EOF
cuframes ($debversion) unstable; urgency=medium

  * Upstream release $version (see CHANGELOG.md in the sources), packaged by
    scripts/package-deb.sh.

 -- $maintainer  $date_rfc
EOF
    gzip -9nc "$work/changelog" >"$d/changelog.Debian.gz"
    chmod 0644 "$d/copyright" "$d/changelog.Debian.gz"
}

# control PKG ROOT SECTION DEPENDS SUMMARY [MULTIARCH] < DESCRIPTION
control() {
    local pkg=$1 root=$2 section=$3 depends=$4 summary=$5 multiarch=${6:-}
    install -d "$root/DEBIAN"
    {
        echo "Package: $pkg"
        echo "Source: cuframes"
        echo "Version: $debversion"
        echo "Architecture: $arch"
        [ -z "$multiarch" ] || echo "Multi-Arch: $multiarch"
        echo "Maintainer: $maintainer"
        echo "Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)"
        echo "Depends: $depends"
        echo "Section: $section"
        echo "Priority: optional"
        echo "Homepage: $homepage"
        echo "Description: $summary"
        sed -e 's/^$/./' -e 's/^/ /'
    } >"$root/DEBIAN/control"
}

doc "$libpkg" "$stage/lib" hardening-no-fortify-functions
doc libcuframes-dev "$dev"
doc cuframes "$cli" hardening-no-fortify-functions
doc gstreamer1.0-cuframes "$gst" hardening-no-fortify-functions
control "$libpkg" "$stage/lib" libs "$libdeps" \
    "zero-copy sharing of decoded video frames between processes" same <<'EOF'
libcuframes lets one process publish decoded video frames into a ring of
buffers, in CUDA device memory or in host shared memory, and any number of
other processes (an encoder, a model, a recorder) read the very same memory,
with no copy and no pipe. FFmpeg's cuframes muxer, input device and source
filter use it.

This package contains the shared library.
EOF
printf 'libcuframes %s %s (>= %s)\n' "$series" "$libpkg" "$version" >"$stage/lib/DEBIAN/shlibs"
{
    echo "$soname $libpkg #MINVER#"
    echo "* Build-Depends-Package: libcuframes-dev"
    objdump -T "$lib/libcuframes.so.$version" |
        awk '$4 == ".text" && $NF ~ /^cuframes_/ { print " " $NF "@Base " v }' v="$version" | sort
} >"$stage/lib/DEBIAN/symbols"
echo "activate-noawait ldconfig" >"$stage/lib/DEBIAN/triggers"
chmod 0644 "$stage/lib/DEBIAN/shlibs" "$stage/lib/DEBIAN/symbols" "$stage/lib/DEBIAN/triggers"
control libcuframes-dev "$dev" libdevel "$libpkg (= $debversion)" \
    "zero-copy sharing of decoded video frames - development files" same <<'EOF'
libcuframes lets one process publish decoded video frames into a ring of
buffers, in CUDA device memory or in host shared memory, and any number of
other processes read the very same memory, with no copy and no pipe.

This package contains the C header, the static library and the pkg-config
file: cc app.c $(pkg-config --cflags --libs cuframes).
EOF
control cuframes "$cli" video "$clideps" \
    "publish, read, inspect, monitor and benchmark shared video frame rings" <<'EOF'
The cuframes command publishes a test pattern under a key, subscribes to a
key and verifies every frame, lists and inspects the keys on a machine (live
or left by dead publishers), cleans up after dead publishers, shows every
publisher live (cuframes top), serves Prometheus metrics for every stream
and subscriber on the machine (cuframes exporter, or a file for
node_exporter's textfile collector), answers liveness and readiness probes
(cuframes health), and measures cuframes against a pipe and a shared-memory
copy (cuframes bench). Frames live in CUDA device memory or in host shared
memory.
EOF

control gstreamer1.0-cuframes "$gst" video "$gstdeps" \
    "GStreamer elements for cuframes shared video frames" same <<'EOF'
cuframessink publishes the raw video a GStreamer pipeline makes under a
cuframes key, and cuframessrc reads a key into a pipeline: frames an FFmpeg
NVDEC decode published reach GStreamer's analytics, and the reverse, without
a copy through the CPU. Frames live in host shared memory or CUDA memory
(video/x-raw(memory:CUDAMemory), with GStreamer's CUDA context shared).

The plugin is built for GStreamer 1.22 or newer and is licensed as the
cuframes crates: MIT OR Apache-2.0.
EOF

# Modes and owners as dpkg-deb wants them; every mtime the commit's.
find "$stage" -type d -exec chmod 0755 {} +
find "$stage" -exec touch -h -d "@$epoch" {} +
mkdir -p "$out"
rm -f "$out"/*.deb
debs=()
for part in lib dev cli gst; do
    (cd "$stage/$part" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
        xargs -0 md5sum >DEBIAN/md5sums)
    chmod 0644 "$stage/$part/DEBIAN/md5sums"
    touch -d "@$epoch" "$stage/$part/DEBIAN/md5sums"
    pkg=$(sed -n 's/^Package: //p' "$stage/$part/DEBIAN/control")
    deb=$out/${pkg}_${debversion}_$arch.deb
    dpkg-deb --root-owner-group -Zxz --build "$stage/$part" "$deb" >/dev/null
    debs+=("$deb")
done
floor=$(printf '%s\n' "$floor" "$floor_gst" | sort -V | tail -n 1)
echo "glibc floor: $floor (library GLIBC_$floor_lib, command GLIBC_$floor_cli, GStreamer plugin GLIBC_$floor_gst; built for $ZIG_GLIBC)"
printf '%s\n' "${debs[@]}"
