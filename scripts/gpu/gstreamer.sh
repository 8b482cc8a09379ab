#!/usr/bin/env bash
# GStreamer for the GPU machine, which has none: Debian trixie's 1.26 (zero copy), or
# with GST_LINE=1.22 Debian bookworm's 1.22 (the plugin's copying CUDA path).
#
#   scripts/gpu/gstreamer.sh stage   here (Debian 12): that line's GStreamer (core, base,
#                                    the nvcodec plugin, gst-launch and gst-inspect, and
#                                    the libraries they load besides glibc and
#                                    libstdc++), the packages pinned in
#                                    gstreamer-LINE.sha256 beside this script, into
#                                    $STAGE/gstreamer-LINE.tar.xz
#   scripts/gpu/gstreamer.sh pin     here: downloads the current versions of the same
#                                    packages and rewrites the pinned list
#   . scripts/gpu/gstreamer.sh env   there, from the repository root: unpacks it into
#                                    /tmp/gstreamer-LINE and sets LD_LIBRARY_PATH, PATH
#                                    and GST_* for this shell
# STAGE names another folder than .gpu.
#
# The packages are fetched with a private apt configuration (this machine's sources
# and lists are untouched) naming the line's Debian release on the mirror this machine
# already uses; each must match its sha256 in the pinned list, or staging stops and says
# which. Trixie's need glibc 2.38 (the GPU machine's Ubuntu 24.04 has 2.39; this machine,
# 2.36, cannot run them), so the libraries to keep are found by reading ELF headers, not
# by ldd.
GST_LINE=${GST_LINE:-1.26}

# There: unpack and point GStreamer at it (sourced).
env_there() {
    local dir=/tmp/gstreamer-$GST_LINE stage=${STAGE:-.gpu}
    [ -d "$dir" ] || tar -C /tmp -xJf "$stage/gstreamer-$GST_LINE.tar.xz"
    export PATH=$dir/bin:$PATH
    export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export GST_PLUGIN_SYSTEM_PATH_1_0=$dir/plugins
    export GST_PLUGIN_PATH_1_0=$PWD/$stage/lib/gstreamer
    export GST_PLUGIN_SCANNER_1_0=$dir/libexec/gst-plugin-scanner
    export GST_REGISTRY_1_0=/tmp/gstreamer-$GST_LINE-registry.bin
    # nvcodec compiles its kernels with NVRTC: the GPU machine has CUDA 13's.
    export GST_CUDA_NVRTC_LIBNAME=${GST_CUDA_NVRTC_LIBNAME:-libnvrtc.so.13}
}

if [ "${1:-}" = env ]; then
    env_there
    return 0 2>/dev/null || exit 0
fi

set -euo pipefail
cd "$(dirname "$0")/../.."
pinned=scripts/gpu/gstreamer-$GST_LINE.sha256
STAGE=${STAGE:-.gpu}
# What the GPU tests load: the tools, and these plugins.
plugins=(coreelements nvcodec videotestsrc videoconvertscale app videoparsersbad)
# The same packages on both releases, but for trixie's 64-bit time_t names.
packages=(gstreamer1.0-tools libgstreamer1.0-0 libgstreamer-plugins-base1.0-0 gstreamer1.0-plugins-base
    libgstreamer-plugins-bad1.0-0 gstreamer1.0-plugins-bad libgstreamer-gl1.0-0
    libffi8 libpcre2-8-0 libmount1 libblkid1 libselinux1 zlib1g libgudev-1.0-0 libudev1
    libcap2 libdrm2 libgbm1 libexpat1 libatomic1 libgl1 libglx0 libglvnd0 libegl1 libwayland-client0
    libwayland-cursor0 libwayland-egl1 libx11-6 libx11-xcb1 libxcb1 libxau6 libxdmcp6)
case $GST_LINE in
1.26) suite=trixie packages+=(liborc-0.4-0t64 libglib2.0-0t64) ;;
1.22) suite=bookworm packages+=(liborc-0.4-0 libglib2.0-0 libbsd0 libmd0 libdw1 libelf1 libunwind8 liblzma5 libbz2-1.0 libzstd1 libwayland-server0) ;;
*) echo "gstreamer.sh: GST_LINE is 1.26 or 1.22, not '$GST_LINE'" >&2; exit 2 ;;
esac

# A private apt: the release's binary packages on the mirror of this machine's Debian source.
private_apt() {
    work=$1
    local mirror
    mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
    [ -n "$mirror" ] || { echo "gstreamer.sh: no Debian mirror in this machine's apt sources" >&2; exit 1; }
    mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
    # The release, its point updates and its security updates.
    local key=/usr/share/keyrings/debian-archive-keyring.gpg
    printf 'deb [signed-by=%s] %s\n' "$key" "$mirror $suite main" "$key" "$mirror $suite-updates main" \
        "$key" "${mirror%/debian}/debian-security $suite-security main" >"$work/sources.list"
    APT=(-o "Dir::Etc::sourcelist=$work/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$work/lists"
        -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
    apt-get "${APT[@]}" update -qq
}

download() {
    (cd "$work/debs" && apt-get "${APT[@]}" download -qq "$@")
}

pin() {
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    private_apt "$work"
    download "${packages[@]}"
    (cd "$work/debs" && sha256sum ./*.deb | sed 's| \./| |') | sort -k 2 >"$pinned"
    echo "gstreamer.sh: pinned $(wc -l <"$pinned") packages in $pinned"
}

stage() {
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    private_apt "$work"
    # Exactly the pinned versions: package=version from each file name.
    local wanted=() file
    while read -r _ file; do
        local name=${file%%_*} rest=${file#*_}
        wanted+=("$name=$(sed 's/%3a/:/' <<<"${rest%_*}")")
    done <"$pinned"
    download "${wanted[@]}" || {
        echo "gstreamer.sh: a pinned package is no longer on the mirror (a $suite point release replaced it): run 'GST_LINE=$GST_LINE scripts/gpu/gstreamer.sh pin' and commit the list" >&2
        exit 1
    }
    (cd "$work/debs" && sha256sum --quiet -c "$OLDPWD/$pinned") || {
        echo "gstreamer.sh: a downloaded package does not match $pinned" >&2
        exit 1
    }
    local tree=$work/tree out=$work/gstreamer
    mkdir -p "$tree" "$out/bin" "$out/lib" "$out/plugins" "$out/libexec"
    for file in "$work"/debs/*.deb; do dpkg-deb -x "$file" "$tree"; done
    local arch=x86_64-linux-gnu
    cp "$tree/usr/bin/gst-launch-1.0" "$tree/usr/bin/gst-inspect-1.0" "$out/bin/"
    cp "$tree/usr/lib/$arch/gstreamer1.0/gstreamer-1.0/gst-plugin-scanner" "$out/libexec/"
    local roots=("$out"/bin/* "$out/libexec/gst-plugin-scanner") p
    for p in "${plugins[@]}"; do
        cp "$tree/usr/lib/$arch/gstreamer-1.0/libgst$p.so" "$out/plugins/"
        roots+=("$out/plugins/libgst$p.so")
    done
    # Every library the roots load, found in the packages, less glibc's and libstdc++.
    python3 - "$tree" "$out/lib" "${roots[@]}" <<'PY'
import os, re, shutil, subprocess, sys
tree, dest, roots = sys.argv[1], sys.argv[2], sys.argv[3:]
dirs = [tree + "/usr/lib/x86_64-linux-gnu", tree + "/lib/x86_64-linux-gnu"]
system = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libresolv.so.2",
          "ld-linux-x86-64.so.2", "libstdc++.so.6", "libgcc_s.so.1"}
def needed(path):
    out = subprocess.run(["objdump", "-p", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"NEEDED\s+(\S+)", out)
seen, todo, missing = set(), list(roots), set()
while todo:
    for name in needed(todo.pop()):
        if name in system or name in seen:
            continue
        found = next((os.path.join(d, name) for d in dirs if os.path.exists(os.path.join(d, name))), None)
        if found is None:
            missing.add(name)
            continue
        seen.add(name)
        shutil.copy(os.path.realpath(found), os.path.join(dest, name))
        todo.append(found)
if missing:
    sys.exit("gstreamer.sh: no pinned package has " + ", ".join(sorted(missing)) + ": add it to packages and pin again")
print("gstreamer.sh: %d libraries" % len(seen))
PY
    strip --strip-unneeded "$out"/lib/* "$out"/plugins/* "$out"/bin/* "$out"/libexec/* 2>/dev/null || true
    mkdir -p "$STAGE"
    mv "$out" "$work/gstreamer-$GST_LINE"
    tar -C "$work" -cJf "$STAGE/gstreamer-$GST_LINE.tar.xz" "gstreamer-$GST_LINE"
    echo "gstreamer.sh: $STAGE/gstreamer-$GST_LINE.tar.xz, $(du -h "$STAGE/gstreamer-$GST_LINE.tar.xz" | cut -f1) ($(du -sh "$work/gstreamer-$GST_LINE" | cut -f1) unpacked)"
}

case ${1:-} in
stage) stage ;;
pin) pin ;;
*)
    echo "usage: scripts/gpu/gstreamer.sh stage | pin | env (sourced, on the GPU machine)" >&2
    exit 2
    ;;
esac
