#!/usr/bin/env bash
# Builds FFmpeg 7.1.x with the cuframes patch series: build/ffmpeg/bin/ffmpeg.
#
#   scripts/build-ffmpeg.sh [--force]      build (no-op when up to date; --force rebuilds,
#                                          through build/ccache: rm -rf build/ccache first
#                                          for a build from nothing)
#   scripts/build-ffmpeg.sh --export-patches  rewrite ffmpeg-patches/ from build/src/ffmpeg
#
# 1. installs the Debian packages the build needs (when missing);
# 2. fetches the FFmpeg 7.1.x and nv-codec-headers source tarballs from Debian trixie
#    (a deb-src entry that reuses this machine's Debian mirror and key) and checks them
#    against the pinned upstream (FFMPEG_VERSION, FFMPEG_SHA256, NVCODEC_VERSION,
#    NVCODEC_SHA256 below): another release fails the build, naming both;
# 3. installs libcuframes (scripts/install.sh) into build/cuframes;
# 4. unpacks FFmpeg into build/src/ffmpeg, commits the pristine tree and applies
#    ffmpeg-patches/NNNN-*.patch with `git am` (any conflict fails the build);
# 5. configures FFmpeg with its defaults (every internal component) and the external
#    libraries chosen below (see CONFIGURE), builds it through ccache and installs it
#    in build/ffmpeg; checks that what users and tests need is in the binary (NEEDED).
#
# A stamp (hash of the patch series, this script, the pinned upstream and the cuframes
# library sources)
# makes a second run a no-op; --force rebuilds from scratch. Noisy output goes to
# build/build-ffmpeg.log; its tail is printed on failure.
#
# ccache: compiled objects are kept in build/ccache (keyed by what each compilation
# reads, so a hit is always the object the compiler would make). A rebuild after a
# change to the patches or to libcuframes recompiles only what changed, and the Docker
# build reuses the host's cache: .dockerignore lets build/ccache into the context
# (ffmpeg-patches/README.md, "Build time and the cache").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build
SRC=$BUILD/src
TREE=$SRC/ffmpeg
PREFIX=$BUILD/ffmpeg
NVPREFIX=$BUILD/nvcodec
CFPREFIX=$BUILD/cuframes
LOG=$BUILD/build-ffmpeg.log
STAMP=$BUILD/ffmpeg.stamp
SUITE=trixie
# The upstream the patch series is written and tested against: Debian trixie's
# orig tarballs (the pristine upstream sources, not Debian's patched tree). When
# trixie moves to another point release, the build fails here rather than build
# untested sources: apply and test the series on the new release, then update these
# four values and ffmpeg-patches/README.md ("Upstream").
FFMPEG_VERSION=7.1.5
FFMPEG_SHA256=de668509caf9e35e3cd162473441fdb29538c6d96ed080292b3cf9e6fc5d558f
NVCODEC_VERSION=12.1.14.0
NVCODEC_SHA256=0ca1a0c85b149646fa6ce4d600584507fdccf5a23d58e668d8701e89cee0c3fb
APT_SOURCES=/etc/apt/sources.list.d/cuframes-$SUITE-src.sources

FORCE=0
EXPORT=0
for arg in "$@"; do
    case $arg in
        --force) FORCE=1 ;;
        --export-patches) EXPORT=1 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        *) echo "build-ffmpeg: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

say() { echo "build-ffmpeg: $*"; }
fail() {
    echo "build-ffmpeg: error: $*" >&2
    if [ -s "$LOG" ]; then
        echo "build-ffmpeg: last lines of $LOG:" >&2
        tail -n 40 "$LOG" >&2
    fi
    exit 1
}
# Runs a command with its output in the log; fails with the log's tail.
quiet() {
    echo "+ $*" >>"$LOG"
    "$@" >>"$LOG" 2>&1 || fail "failed: $*"
}

mkdir -p "$BUILD"
START=$SECONDS

# --export-patches: rewrite ffmpeg-patches/ from the commits on top of the pristine
# tree in build/src/ffmpeg (after changing FFmpeg there: commit, export, rebuild).
if [ "$EXPORT" = 1 ]; then
    git -C "$TREE" rev-parse -q --verify pristine >/dev/null ||
        { echo "build-ffmpeg: error: no FFmpeg tree in $TREE (run a build first)" >&2; exit 1; }
    rm -f ffmpeg-patches/[0-9][0-9][0-9][0-9]-*.patch
    git -C "$TREE" format-patch -q --zero-commit --no-signature -o "$ROOT/ffmpeg-patches" pristine
    ls ffmpeg-patches/[0-9][0-9][0-9][0-9]-*.patch
    exit 0
fi

# ---------------------------------------------------------------- stamp
# Everything that decides what the binary is: the pinned upstream, the patch series,
# this script, and the sources of libcuframes (it is linked into ffmpeg).
stamp_of() {
    {
        echo "ffmpeg $FFMPEG_VERSION $FFMPEG_SHA256 nv-codec-headers $NVCODEC_VERSION $NVCODEC_SHA256"
        sha256sum scripts/build-ffmpeg.sh
        for f in ffmpeg-patches/*.patch; do
            [ -f "$f" ] && sha256sum "$f"
        done
        for f in Cargo.toml Cargo.lock include/cuframes.h scripts/install.sh; do
            [ -f "$f" ] && sha256sum "$f"
        done
        for d in rust/cuframes rust/cuframes-capi; do
            [ -d "$d" ] && find "$d" -type f -not -path '*/target/*' -print0
        done | LC_ALL=C sort -z | xargs -0r sha256sum
        true
    } | sha256sum | cut -d' ' -f1
}
WANT=$(stamp_of)
if [ "$FORCE" = 0 ] && [ -x "$PREFIX/bin/ffmpeg" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    say "up to date: $PREFIX/bin/ffmpeg (--force rebuilds)"
    exit 0
fi
rm -f "$STAMP"
: >"$LOG"

# ---------------------------------------------------------------- packages
# The external libraries (see CONFIGURE): libx264, GnuTLS (https, tls), libsrt built
# against GnuTLS, zlib. libunistring-dev: gnutls.pc names -lunistring in Libs.private,
# which --pkg-config-flags=--static puts on configure's link test.
PKGS=(nasm pkg-config make gcc g++ xz-utils clang ccache git ca-certificates dpkg-dev
      libx264-dev libgnutls28-dev libunistring-dev libsrt-gnutls-dev zlib1g-dev)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
APT_UPDATED=0
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}…"
    quiet apt-get update -q
    APT_UPDATED=1
    DEBIAN_FRONTEND=noninteractive quiet apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# ---------------------------------------------------------------- sources
# A deb-src entry for trixie that reuses the URI and Signed-By of the machine's
# Debian entry (deb822 debian.sources, else a one-line sources.list entry).
debian_uri_and_key() {
    local f=/etc/apt/sources.list.d/debian.sources
    if [ -f "$f" ]; then
        # First stanza whose URIs end in /debian (not debian-security).
        awk '
            BEGIN { RS = ""; FS = "\n" }
            {
                uri = ""; key = ""
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/)      { uri = $i; sub(/^URIs:[ \t]*/, "", uri); split(uri, u, /[ \t]+/); uri = u[1] }
                    if ($i ~ /^Signed-By:/) { key = $i; sub(/^Signed-By:[ \t]*/, "", key) }
                }
                if (uri ~ /\/debian\/?$/ && key != "") { print uri " " key; exit }
            }' "$f"
        return
    fi
    if [ -f /etc/apt/sources.list ]; then
        # deb [signed-by=KEY] URI suite ...
        awk '$1 == "deb" {
                key = ""; uri = ""
                for (i = 2; i <= NF; i++) {
                    if ($i ~ /^\[?signed-by=/) { key = $i; sub(/^\[?signed-by=/, "", key); sub(/\]$/, "", key) }
                    else if ($i ~ /^[a-z+]+:\/\//) { uri = $i; break }
                }
                if (uri ~ /\/debian\/?$/) { if (key == "") key = "/usr/share/keyrings/debian-archive-keyring.gpg"; print uri " " key; exit }
            }' /etc/apt/sources.list
    fi
}

fetch_sources() {
    local uri key
    read -r uri key < <(debian_uri_and_key) || true
    [ -n "${uri:-}" ] && [ -n "${key:-}" ] ||
        fail "no Debian entry with a URI and Signed-By in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
    local entry
    entry=$(printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' "$uri" "$SUITE" "$key")
    if [ ! -f "$APT_SOURCES" ] || [ "$(cat "$APT_SOURCES")" != "$entry" ]; then
        printf '%s\n' "$entry" >"$APT_SOURCES"
        APT_UPDATED=0
    fi
    if [ "$APT_UPDATED" = 0 ] || ! apt-cache showsrc "ffmpeg/$SUITE" >/dev/null 2>&1; then
        quiet apt-get update -q
    fi
    rm -rf "$SRC"
    mkdir -p "$SRC"
    (cd "$SRC" && quiet apt-get source -q --tar-only "ffmpeg/$SUITE" "nv-codec-headers/$SUITE")
}

say "fetching FFmpeg 7.1.x and nv-codec-headers (Debian $SUITE source)…"
fetch_sources
FFTAR=$(find "$SRC" -maxdepth 1 -name 'ffmpeg_7.1*.orig.tar.*' -not -name '*.asc' | head -n1)
NVTAR=$(find "$SRC" -maxdepth 1 -name 'nv-codec-headers_*.orig.tar.*' -not -name '*.asc' | head -n1)
[ -n "$FFTAR" ] || fail "no ffmpeg_7.1*.orig.tar.* in $SRC (is $SUITE's ffmpeg still 7.1.x?)"
[ -n "$NVTAR" ] || fail "no nv-codec-headers_*.orig.tar.* in $SRC"
# check_pin NAME TARBALL WANT_VERSION WANT_SHA256: the tarball is the pinned release.
check_pin() {
    local name=$1 tar=$2 want_version=$3 want_sha=$4 version sha
    version=$(basename "$tar")
    version=${version#"${name}_"}
    version=${version%%.orig.tar.*}
    sha=$(sha256sum "$tar" | cut -d' ' -f1)
    [ "$version" = "$want_version" ] && [ "$sha" = "$want_sha" ] && return 0
    fail "$SUITE's $name source is not the pinned one:
  expected: $name $want_version, sha256 $want_sha
  found:    $name $version, sha256 $sha ($(basename "$tar"))
The patch series is tested against the pinned release. To move to the one found,
apply and test the series on it, then update the pin at the top of $0
and ffmpeg-patches/README.md (\"Upstream\")."
}
check_pin ffmpeg "$FFTAR" "$FFMPEG_VERSION" "$FFMPEG_SHA256"
check_pin nv-codec-headers "$NVTAR" "$NVCODEC_VERSION" "$NVCODEC_SHA256"
say "  $(basename "$FFTAR"), $(basename "$NVTAR") (the pinned releases)"

# ---------------------------------------------------------------- nv-codec-headers
rm -rf "$SRC/nv-codec-headers" "$NVPREFIX"
mkdir -p "$SRC/nv-codec-headers"
quiet tar -xf "$NVTAR" -C "$SRC/nv-codec-headers" --strip-components=1
quiet make -C "$SRC/nv-codec-headers" PREFIX="$NVPREFIX" install

# ---------------------------------------------------------------- libcuframes
[ -x scripts/install.sh ] || fail "scripts/install.sh is missing (libcuframes cannot be installed)"
say "installing libcuframes into $CFPREFIX…"
rm -rf "$CFPREFIX"
quiet scripts/install.sh --prefix "$CFPREFIX"
[ -f "$CFPREFIX/lib/pkgconfig/cuframes.pc" ] || fail "scripts/install.sh did not install lib/pkgconfig/cuframes.pc"
[ -f "$CFPREFIX/lib/libcuframes.a" ] || fail "scripts/install.sh did not install lib/libcuframes.a"
# ffmpeg links libcuframes statically (see ffmpeg-patches/README.md): this prefix is
# private to the FFmpeg build, and without the shared library in it the linker takes
# libcuframes.a for -lcuframes (configure adds Libs.private with --pkg-config-flags=--static).
rm -f "$CFPREFIX"/lib/libcuframes.so*

# ---------------------------------------------------------------- FFmpeg tree
say "applying ffmpeg-patches/ to $(basename "$FFTAR")…"
rm -rf "$TREE"
mkdir -p "$TREE"
quiet tar -xf "$FFTAR" -C "$TREE" --strip-components=1
GIT=(git -C "$TREE" -c user.name="Seed aca38df2 maintainers" -c user.email=maintainers@users.noreply.a-seed-aca38df2.example
     -c commit.gpgsign=false -c core.autocrlf=false)
FFVERSION=$(cat "$TREE/VERSION" 2>/dev/null || echo 7.1)
case $FFVERSION in 7.1|7.1.*) ;; *) fail "$(basename "$FFTAR") is FFmpeg $FFVERSION, not 7.1.x" ;; esac
quiet "${GIT[@]}" init -q
# Build outputs stay out of `git status` in the tree.
printf '%s\n' '*.o' '*.d' '*.a' '*.pc' '*.version' '*.ptx' '*.ptx.c' '*_list.c' \
    /config.* /config_components.h /.version /ffbuild/ /ffmpeg /ffmpeg_g /ffprobe \
    /ffprobe_g /doc/config.texi /doc/examples/pc-uninstalled/ \
    /libavutil/avconfig.h /libavutil/ffversion.h >>"$TREE/.git/info/exclude"
quiet "${GIT[@]}" add -A -f .
quiet "${GIT[@]}" commit -q -m "FFmpeg $FFVERSION (pristine $(basename "$FFTAR"))"
quiet "${GIT[@]}" tag pristine
for p in ffmpeg-patches/[0-9][0-9][0-9][0-9]-*.patch; do
    [ -e "$p" ] || continue
    echo "+ git am $p" >>"$LOG"
    if ! "${GIT[@]}" am -q --whitespace=nowarn "$ROOT/$p" >>"$LOG" 2>&1; then
        "${GIT[@]}" am --show-current-patch=diff >/dev/null 2>&1 || true
        fail "patch $p does not apply to $(basename "$FFTAR") (tree left in $TREE, mid-am)"
    fi
done

# ---------------------------------------------------------------- configure
export PKG_CONFIG_PATH="$NVPREFIX/lib/pkgconfig:$CFPREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# FFmpeg's defaults: every internal decoder, encoder, muxer, demuxer, parser, bitstream
# filter, protocol, device and filter (network input and output, HLS, RTSP, MPEG-TS,
# the aac encoder, audio decoders, split/scale/fps/...). External libraries are never
# picked up from whatever the build machine has installed (--disable-autodetect); each
# one is enabled here on purpose:
#   libx264                  the software H.264 encoder (GPL, hence --enable-gpl)
#   ffnvcodec cuda cuda-llvm cuvid nvdec nvenc
#                            NVDEC/NVENC and the CUDA filters (scale_cuda, yadif_cuda,
#                            bwdif_cuda, overlay_cuda, thumbnail_cuda...), compiled by
#                            clang: no CUDA toolkit at build time, the driver at run time
#   libcuframes              the muxer, input device and filter of ffmpeg-patches/
#   gnutls                   https and tls (HLS and HTTP sources behind TLS). Not
#                            OpenSSL: OpenSSL 3 would need --enable-version3 (GPLv3);
#                            libgnutls30 is in debian:bookworm-slim already (apt uses it)
#   libsrt                   srt:// input and output (cameras, contribution links):
#                            Debian's libsrt1.5-gnutls, about 1 MB, on the same GnuTLS
#   zlib                     PNG (thumbnails), compressed MP4/Matroska headers, gzip
#                            over HTTP; libz is in every Debian image
#   iconv                    subtitle character sets (-sub_charenc): glibc's, no library
# Left out on purpose: the documentation (needs texinfo; nobody reads it here), ffplay
# (SDL; a player), debug information (-g costs about 40% more compile time and 6 times
# the object size, for programs that `make install` strips anyway; drop --disable-debug
# for a symbolized build/src/ffmpeg/ffmpeg_g).
#
# The prefix is the image's /opt/ffmpeg wherever this runs, and `make install`
# is told where to put the files: configure writes the prefix into config.h, which
# nearly every file includes, and a path that differs between this machine and the
# Docker build (/src) would make every ccache lookup miss.
CONFIGURE=(
    --prefix=/opt/ffmpeg
    --disable-autodetect --disable-doc --disable-ffplay --disable-debug
    --enable-gpl --enable-libx264
    --enable-ffnvcodec --enable-cuda --enable-cuda-llvm --enable-cuvid --enable-nvdec --enable-nvenc
    --enable-libcuframes
    --enable-gnutls --enable-libsrt --enable-zlib --enable-iconv
    --pkg-config-flags=--static
)
# What the tests and a transcoding host need, as KIND:NAME (NAME as ffmpeg lists it;
# KIND:NAME:CONFIG where configure's name differs). Checked in the configuration
# before the build (a missing dependency disables a component silently) and in the
# built ffmpeg's own lists after it.
NEEDED=(
    protocol:file protocol:pipe protocol:tcp protocol:udp protocol:rtp protocol:http
    protocol:https protocol:tls protocol:hls protocol:srt:libsrt protocol:rtmp
    demuxer:mov demuxer:matroska demuxer:mpegts demuxer:hls demuxer:flv demuxer:rtsp
    demuxer:sdp demuxer:rtp demuxer:h264 demuxer:hevc demuxer:aac demuxer:rawvideo
    muxer:mp4 muxer:mov muxer:matroska muxer:mpegts muxer:hls muxer:segment muxer:flv
    muxer:rtsp muxer:rtp muxer:rawvideo muxer:h264 muxer:adts muxer:image2
    muxer:framemd5 muxer:null muxer:cuframes
    demuxer:cuframes demuxer:lavfi demuxer:v4l2
    decoder:h264 decoder:hevc decoder:aac decoder:mp2 decoder:mp3 decoder:ac3
    decoder:opus decoder:pcm_s16le decoder:h264_cuvid decoder:hevc_cuvid
    encoder:libx264 encoder:h264_nvenc encoder:hevc_nvenc encoder:aac encoder:mp2
    encoder:png encoder:mjpeg encoder:rawvideo
    parser:h264 parser:hevc parser:aac
    bsf:h264_mp4toannexb bsf:hevc_mp4toannexb bsf:aac_adtstoasc bsf:extract_extradata
    filter:split filter:scale filter:fps filter:showinfo filter:format filter:setpts
    filter:select filter:shuffleframes filter:thumbnail
    filter:hwupload_cuda filter:hwdownload filter:hwmap filter:scale_cuda
    filter:yadif_cuda filter:bwdif_cuda filter:overlay_cuda filter:thumbnail_cuda
    filter:asplit filter:aresample filter:cuframes
)
say "configuring…"
cd "$TREE"
# ccache answers for gcc, g++ and clang through its masquerade directory (configure's
# own test compilations included). The settings make a hit independent of where the
# tree is (/src in the Docker build) and of the compiler binary's timestamps; the
# locale is part of every key (it changes the compiler's messages), so it is fixed
# too: a Docker build has none set. 250 MB holds about 6 builds from nothing.
export CCACHE_DIR=$BUILD/ccache CCACHE_BASEDIR=$ROOT CCACHE_COMPILERCHECK=content CCACHE_MAXSIZE=250M
export LANG=C.UTF-8
unset LC_ALL LC_CTYPE LC_MESSAGES
[ -x /usr/lib/ccache/gcc ] || fail "ccache is installed but /usr/lib/ccache/gcc is missing"
export PATH=/usr/lib/ccache:$PATH
T_CONFIGURE=$SECONDS
quiet ./configure "${CONFIGURE[@]}"
T_CONFIGURE=$((SECONDS - T_CONFIGURE))
grep -q '^CONFIG_LIBCUFRAMES=yes' ffbuild/config.mak || fail "configure did not enable libcuframes"
missing=()
for need in "${NEEDED[@]}"; do
    IFS=: read -r kind name config <<<"$need"
    config=${config:-$name}
    suffix=${kind^^}
    # Input devices (lavfi, v4l2, cuframes) are listed with the demuxers.
    [ "$kind" = demuxer ] && suffix="(DEMUXER|INDEV)"
    grep -Eq "^CONFIG_${config^^}_${suffix}=yes" ffbuild/config.mak || missing+=("$need")
done
[ ${#missing[@]} -eq 0 ] ||
    fail "configure left out ${missing[*]} (see ffbuild/config.log in $TREE for the dependency that failed)"

say "building (2 cores: 8-22 min with nothing in build/ccache, 2-5 min with it warm)…"
rm -rf "$PREFIX"
ccache -z >/dev/null
T_MAKE=$SECONDS
quiet make -j"$(nproc)"
T_MAKE=$((SECONDS - T_MAKE))
# Installed where this build keeps it (the Makefile's paths follow `prefix`), and the
# pkg-config files, written by configure with /opt/ffmpeg, say so too.
quiet make install prefix="$PREFIX"
sed -i -E "s#^(prefix|libdir|includedir)=/opt/ffmpeg#\1=$PREFIX#" "$PREFIX"/lib/pkgconfig/*.pc
! grep -q /opt/ffmpeg "$PREFIX"/lib/pkgconfig/*.pc || fail "$PREFIX/lib/pkgconfig/*.pc still name /opt/ffmpeg"
read -r hits misses < <(ccache --print-stats |
    awk '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { h += $2 }
         $1 == "cache_miss" { m += $2 } END { print h + 0, m + 0 }')
cd "$ROOT"
FF=$PREFIX/bin/ffmpeg
"$FF" -hide_banner -version >>"$LOG" 2>&1 || fail "$FF does not run"
if ldd "$FF" | grep -q cuframes; then
    fail "$FF links libcuframes dynamically (expected the static library)"
fi
# The binary's own lists (ffmpeg -protocols, -muxers, ...). NAME is the first word of
# a line (protocols, bitstream filters), the second (codecs, filters: after one word
# of flags), or the word at column 6 (formats: flags that may contain spaces, then
# "mov,mp4,m4a,..." lists).
listed() {
    local kind=$1 name=$2 opt=-${1}s
    [ "$kind" = protocol ] && opt=-protocols
    "$FF" -hide_banner "$opt" 2>/dev/null | awk -v kind="$kind" -v name="$name" '
        {
            if (kind == "protocol" || kind == "bsf") w = $1
            else if (kind == "muxer" || kind == "demuxer") { split(substr($0, 6), f, " "); w = f[1] }
            else w = $2
            k = split(w, names, ",")
            for (i = 1; i <= k; i++) if (names[i] == name) found = 1
        }
        END { exit !found }'
}
missing=()
for need in "${NEEDED[@]}"; do
    IFS=: read -r kind name _ <<<"$need"
    # ffmpeg has no list of parsers: the configuration's word is all there is.
    [ "$kind" = parser ] && continue
    listed "$kind" "$name" || missing+=("$need")
done
[ ${#missing[@]} -eq 0 ] || fail "$FF does not list ${missing[*]}"
say "ccache: $hits of $((hits + misses)) compilations from build/ccache"
echo "$WANT" >"$STAMP"
say "done in $((SECONDS - START)) s (configure $T_CONFIGURE s, make $T_MAKE s): $PREFIX/bin/ffmpeg"
