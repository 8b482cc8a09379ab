#!/usr/bin/env bash
# Builds FFmpeg 7.1.x with the cuframes patch series: build/ffmpeg/bin/ffmpeg.
#
#   scripts/build-ffmpeg.sh [--force]      build (no-op when up to date)
#   scripts/build-ffmpeg.sh --export-patches  rewrite ffmpeg-patches/ from build/src/ffmpeg
#
# 1. installs the Debian packages the build needs (when missing);
# 2. fetches the FFmpeg 7.1.x and nv-codec-headers source tarballs from Debian trixie
#    (a deb-src entry that reuses this machine's Debian mirror and key);
# 3. installs libcuframes (scripts/install.sh) into build/cuframes;
# 4. unpacks FFmpeg into build/src/ffmpeg, commits the pristine tree and applies
#    ffmpeg-patches/NNNN-*.patch with `git am` (any conflict fails the build);
# 5. configures a minimal FFmpeg (see CONFIGURE below) and installs it in build/ffmpeg.
#
# A stamp (hash of the patch series, this script and the cuframes library sources)
# makes a second run a no-op; --force rebuilds from scratch. Noisy output goes to
# build/build-ffmpeg.log; its tail is printed on failure.
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
# Everything that decides what the binary is: the patch series, this script, and the
# sources of libcuframes (it is linked into ffmpeg).
stamp_of() {
    {
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
PKGS=(nasm pkg-config make gcc g++ xz-utils clang libx264-dev git ca-certificates dpkg-dev)
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
say "  $(basename "$FFTAR"), $(basename "$NVTAR")"

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
GIT=(git -C "$TREE" -c user.name="cuframes developers" -c user.email=dev@cuframes.invalid
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
CONFIGURE=(
    --prefix="$PREFIX"
    --disable-autodetect --disable-everything --disable-doc
    --enable-gpl --enable-libx264
    --enable-ffnvcodec --enable-cuda --enable-cuda-llvm --enable-cuvid --enable-nvdec --enable-nvenc
    --enable-libcuframes
    --pkg-config-flags=--static
    --enable-decoder=h264,hevc,rawvideo,wrapped_avframe,h264_cuvid,hevc_cuvid
    --enable-hwaccel=h264_nvdec,hevc_nvdec
    --enable-encoder=libx264,h264_nvenc,hevc_nvenc,rawvideo,wrapped_avframe
    --enable-muxer=framemd5,md5,null,mp4,matroska,rawvideo,h264,hevc,cuframes
    --enable-demuxer=h264,hevc,mov,matroska,rawvideo
    --enable-indev=lavfi,cuframes
    --enable-parser=h264,hevc
    --enable-bsf=h264_mp4toannexb,hevc_mp4toannexb,extract_extradata
    --enable-protocol=file,pipe
    --enable-filter=testsrc,testsrc2,format,scale,null,nullsink,copy,setpts,trim,fps,split,select,thumbnail,reverse,tmix,realtime,showinfo,setparams,setsar,setfield,hwupload_cuda,hwdownload,scale_cuda,yadif_cuda,bwdif_cuda,thumbnail_cuda,cuframes
)
say "configuring…"
cd "$TREE"
quiet ./configure "${CONFIGURE[@]}"
grep -q '^CONFIG_LIBCUFRAMES=yes' ffbuild/config.mak || fail "configure did not enable libcuframes"
for c in CUFRAMES_MUXER CUFRAMES_INDEV CUFRAMES_FILTER; do
    grep -q "^CONFIG_$c=yes" ffbuild/config.mak || fail "configure did not enable $c"
done

say "building (2-3 min)…"
rm -rf "$PREFIX"
quiet make -j"$(nproc)"
quiet make install
cd "$ROOT"
"$PREFIX/bin/ffmpeg" -hide_banner -version >>"$LOG" 2>&1 || fail "$PREFIX/bin/ffmpeg does not run"
if ldd "$PREFIX/bin/ffmpeg" | grep -q cuframes; then
    fail "$PREFIX/bin/ffmpeg links libcuframes dynamically (expected the static library)"
fi
echo "$WANT" >"$STAMP"
say "done in $((SECONDS - START)) s: $PREFIX/bin/ffmpeg"
