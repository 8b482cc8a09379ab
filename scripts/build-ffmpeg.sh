#!/usr/bin/env bash
# Builds FFmpeg with the cuframes patch series, on one of three FFmpeg lines:
# build/ffmpeg-LINE/bin/ffmpeg (build/ffmpeg is the default line's, 9.0).
#
#   scripts/build-ffmpeg.sh [--ffmpeg 9.0|8.1|7.1] [--force]
#                              build one line (default: CUFRAMES_FFMPEG_LINE, else 9.0,
#                              the newest); a no-op when up to date; --force rebuilds,
#                              through build/ccache (rm -rf build/ccache first for a
#                              build from nothing)
#   scripts/build-ffmpeg.sh --export-patches [--ffmpeg LINE]
#                              rewrite the line's patches from build/src/ffmpeg-LINE:
#                              9.0 the upstream series ffmpeg-patches/NNNN-*.patch,
#                              8.1 and 7.1 what differs there, ffmpeg-patches/LINE/
#                              (export the upstream series first: ffmpeg-patches/README.md)
#
# 1. installs the Debian packages the build needs (when missing);
# 2. fetches the line's FFmpeg and nv-codec-headers source tarballs from Debian (deb-src
#    entries that reuse this machine's Debian mirror and key: forky for 9.0, sid for 8.1,
#    trixie for 7.1 and nv-codec-headers), selecting the Debian version whose upstream
#    part is the pinned one, and checks them against the pin (LINES below: version and
#    sha256 of each tarball): another release fails the build, naming both;
# 3. installs libcuframes (scripts/install.sh) into build/cuframes-LINE;
# 4. unpacks FFmpeg into build/src/ffmpeg-LINE, commits the pristine tree and applies the
#    series: on 9.0 `git am` of ffmpeg-patches/NNNN-*.patch; on an older line, patch by
#    patch, the files of the upstream patch that apply there unchanged, then
#    ffmpeg-patches/LINE/NNNN-*.patch (any conflict fails the build);
# 5. configures FFmpeg with its defaults (every internal component) and the external
#    libraries chosen below (see CONFIGURE), the same on every line, builds it through
#    ccache and installs it in build/ffmpeg-LINE; checks that what users and tests need
#    is in the binary (NEEDED, with the per-line differences named in NEEDED_LINES).
#
# A stamp per line, build/ffmpeg-LINE.stamp (hash of the line's pins, the patch series
# and the line's patches, this script and the cuframes library sources), makes a
# second run a no-op; --force rebuilds from scratch. Noisy output goes to
# build/build-ffmpeg-LINE.log; its tail is printed on failure.
#
# ccache: compiled objects are kept in build/ccache, one cache for all lines (keyed by
# what each compilation reads, so a hit is always the object the compiler would make).
# A rebuild after a change to the patches or to libcuframes recompiles only what
# changed, and the Docker build reuses the host's cache: .dockerignore lets build/ccache
# into the context (ffmpeg-patches/README.md, "Build time and the cache").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build
SRC=$BUILD/src

# The FFmpeg lines. Each is pinned to the pristine upstream tarball (Debian's orig
# tarball, not Debian's patched tree) of one release, in the Debian suite that ships it:
#   LINE  VERSION  SUITE   SHA256 of ffmpeg_VERSION.orig.tar.xz
# When a suite moves to another point release, the build fails rather than build
# untested sources: apply and test the series on the new release, then update the line
# here and in ffmpeg-patches/README.md ("Upstream"). The first line is the newest: the
# upstream series (ffmpeg-patches/NNNN-*.patch) is written against it, and it is the
# default.
LINES=(
    "9.0 9.0.2 forky  8c3850283eb25fa026482078a04051e0be17347b09ef81a0849bec15a96e002e"
    "8.1 8.1.2 sid    464beb5e7bf0c311e68b45ae2f04e9cc2af88851abb4082231742a74d97b524c"
    "7.1 7.1.5 trixie de668509caf9e35e3cd162473441fdb29538c6d96ed080292b3cf9e6fc5d558f"
)
NEWEST=${LINES[0]%% *}
# nv-codec-headers, the same for every line (NVENC needs SDK >= 11.1 on 9.0), from trixie.
NVCODEC_VERSION=12.1.14.0
NVCODEC_SUITE=trixie
NVCODEC_SHA256=0ca1a0c85b149646fa6ce4d600584507fdccf5a23d58e668d8701e89cee0c3fb

FORCE=0
EXPORT=0
LINE=${CUFRAMES_FFMPEG_LINE:-$NEWEST}
while [ $# -gt 0 ]; do
    case $1 in
        --force) FORCE=1 ;;
        --export-patches) EXPORT=1 ;;
        --ffmpeg) [ $# -ge 2 ] || { echo "build-ffmpeg: --ffmpeg needs a line (${LINES[*]%% *})" >&2; exit 2; }
                  LINE=$2; shift ;;
        --ffmpeg=*) LINE=${1#--ffmpeg=} ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        *) echo "build-ffmpeg: unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done
FFMPEG_VERSION=
for l in "${LINES[@]}"; do
    read -r name version suite sha <<<"$l"
    if [ "$name" = "$LINE" ]; then
        FFMPEG_VERSION=$version FFMPEG_SUITE=$suite FFMPEG_SHA256=$sha
    fi
done
[ -n "$FFMPEG_VERSION" ] ||
    { echo "build-ffmpeg: unknown FFmpeg line '$LINE' (one of: ${LINES[*]%% *})" >&2; exit 2; }

TREE=$SRC/ffmpeg-$LINE
PREFIX=$BUILD/ffmpeg-$LINE
NVPREFIX=$BUILD/nvcodec-$LINE
CFPREFIX=$BUILD/cuframes-$LINE
LOG=$BUILD/build-ffmpeg-$LINE.log
STAMP=$BUILD/ffmpeg-$LINE.stamp
# The per-line patches: what differs on this line from the upstream series.
LINE_PATCHES=ffmpeg-patches/$LINE

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

# ---------------------------------------------------------------- the series
# The upstream series (against the newest line) and this line's patches, what differs
# on it: ffmpeg-patches/LINE/NNNN-*.patch has the number and name of upstream patch N.
UPSTREAM=()
for p in ffmpeg-patches/[0-9][0-9][0-9][0-9]-*.patch; do
    [ -e "$p" ] && UPSTREAM+=("$p")
done
[ ${#UPSTREAM[@]} -gt 0 ] || fail "no patches in ffmpeg-patches/"
# line_patch_of UPSTREAM_PATCH: this line's patch for it, if any.
line_patch_of() {
    local n
    n=$(basename "$1")
    n=${n%%-*}
    local found=("$LINE_PATCHES/$n"-*.patch)
    [ -e "${found[0]}" ] || return 0
    [ ${#found[@]} = 1 ] || fail "more than one patch numbered $n in $LINE_PATCHES/: ${found[*]}"
    echo "${found[0]}"
}
# A per-line patch whose number no upstream patch has is left over: fail, naming it.
check_line_patches() {
    local p n
    for p in "$LINE_PATCHES"/*.patch; do
        [ -e "$p" ] || continue
        n=$(basename "$p")
        n=${n%%-*}
        [ -e "$(echo ffmpeg-patches/"$n"-*.patch | cut -d' ' -f1)" ] ||
            fail "$p: no upstream patch ffmpeg-patches/$n-*.patch (remove it, or export the line again)"
    done
}
# files_of PATCH: the files a patch touches, in its order.
files_of() {
    sed -n 's#^diff --git a/.* b/\(.*\)$#\1#p' "$1"
}
# apply_upstream_part GIT_OPTION PATCH: step (a) on an older line: each file of an
# upstream patch that applies unchanged to the tree (--index) or the index (--cached) is
# applied; the others are left to the line's patch. New files always apply, so the C
# code of the components comes from the upstream series alone. Prints the files left.
apply_upstream_part() {
    local where=$1 patch=$2 f
    while IFS= read -r f; do
        if "${GIT[@]}" apply "$where" --check --whitespace=nowarn --include="$f" "$ROOT/$patch" 2>/dev/null; then
            "${GIT[@]}" apply "$where" --whitespace=nowarn --include="$f" "$ROOT/$patch" ||
                fail "$patch: $f passed git apply --check but did not apply"
        else
            echo "$f"
        fi
    done < <(files_of "$patch")
}
# mail_field FILE FIELD: a field of git mailinfo's output (Author, Email, Subject, Date).
mail_field() {
    sed -n "s/^$2: //p" "$1" | head -n1
}
GIT=(git -C "$TREE" -c user.name="Seed aca38df2 maintainers" -c user.email=maintainers@users.noreply.a-seed-aca38df2.example
     -c commit.gpgsign=false -c core.autocrlf=false -c diff.noprefix=false -c diff.mnemonicPrefix=false)

# --export-patches: rewrite the line's patches from the commits on top of the pristine
# tree in build/src/ffmpeg-LINE (after changing FFmpeg there: commit, export, rebuild).
# The newest line writes the upstream series; an older line, for each commit c_N, the
# difference between c_N and what the upstream patch N alone makes of c_{N-1} (its
# files that apply there unchanged): export the upstream series first.
export_newest() {
    rm -f ffmpeg-patches/[0-9][0-9][0-9][0-9]-*.patch
    "${GIT[@]}" format-patch -q --zero-commit --no-signature -o "$ROOT/ffmpeg-patches" pristine
    ls ffmpeg-patches/[0-9][0-9][0-9][0-9]-*.patch
}
export_line() {
    local commits prev i c p subject files out written=() total=${#UPSTREAM[@]}
    mapfile -t commits < <("${GIT[@]}" rev-list --reverse pristine..HEAD)
    [ ${#commits[@]} = "$total" ] ||
        fail "$TREE has ${#commits[@]} commits on pristine, the upstream series $total patches (export the upstream series first, then rebuild this line)"
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-export.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT  # global: the trap runs after the function returned
    mkdir -p "$LINE_PATCHES"
    prev=$("${GIT[@]}" rev-parse pristine)
    for i in "${!UPSTREAM[@]}"; do
        p=${UPSTREAM[$i]}
        c=${commits[$i]}
        git mailinfo "$tmp/msg" "$tmp/body" <"$p" >"$tmp/info"
        subject=$(mail_field "$tmp/info" Subject)
        [ "$("${GIT[@]}" log -1 --format=%s "$c")" = "$subject" ] ||
            fail "commit $((i + 1)) of $TREE is '$("${GIT[@]}" log -1 --format=%s "$c")', upstream patch $p is '$subject'"
        # T_N: c_{N-1} and step (a) of upstream patch N, in a temporary index.
        export GIT_INDEX_FILE=$tmp/index
        "${GIT[@]}" read-tree "$prev"
        apply_upstream_part --cached "$p" >/dev/null
        local tn
        tn=$("${GIT[@]}" write-tree)
        unset GIT_INDEX_FILE
        out=$LINE_PATCHES/$(basename "$p")
        local diff=(diff --no-color --no-ext-diff --no-renames --src-prefix=a/ --dst-prefix=b/ "$tn" "$c")
        if "${GIT[@]}" "${diff[@]}" --quiet; then
            rm -f "$out"
            prev=$c
            continue
        fi
        files=$("${GIT[@]}" "${diff[@]}" --name-only | paste -sd' ')
        {
            echo "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001"
            "${GIT[@]}" log -1 --format="From: %an <%ae>%nDate: %aD" "$c"
            echo "Subject: [PATCH $((i + 1))/$total] $subject (FFmpeg $LINE)"
            echo
            echo "Adapts upstream patch $((i + 1))/$total to FFmpeg $LINE: ${files// /, } (the rest of it applies unchanged)."
            echo "---"
            "${GIT[@]}" "${diff[@]}" --stat=72
            echo
            "${GIT[@]}" "${diff[@]}" --binary
        } >"$out"
        written+=("$out")
        prev=$c
    done
    # Stale per-line patches: any not written now.
    for p in "$LINE_PATCHES"/*.patch; do
        [ -e "$p" ] || continue
        [[ " ${written[*]} " == *" $p "* ]] || rm -f "$p"
    done
    rmdir "$LINE_PATCHES" 2>/dev/null || true
    if [ ${#written[@]} -gt 0 ]; then
        wc -l "${written[@]}"
    else
        say "nothing differs on FFmpeg $LINE: no $LINE_PATCHES/"
    fi
}
if [ "$EXPORT" = 1 ]; then
    LOG=/dev/null
    "${GIT[@]}" rev-parse -q --verify pristine >/dev/null 2>&1 ||
        fail "no FFmpeg tree in $TREE (run scripts/build-ffmpeg.sh --ffmpeg $LINE first)"
    [ -z "$("${GIT[@]}" status --porcelain --untracked-files=no)" ] ||
        fail "$TREE has uncommitted changes: commit them (on the patch they belong to) first"
    if [ "$LINE" = "$NEWEST" ]; then
        export_newest
    else
        export_line
    fi
    exit 0
fi

# ---------------------------------------------------------------- stamp
# Everything that decides what the binary is: the line and every pin, the upstream
# series and the line's patches, this script, and the sources of libcuframes (it is
# linked into ffmpeg).
stamp_of() {
    {
        echo "line $LINE: ffmpeg $FFMPEG_VERSION $FFMPEG_SHA256 nv-codec-headers $NVCODEC_VERSION $NVCODEC_SHA256"
        printf 'pin %s\n' "${LINES[@]}"
        sha256sum scripts/build-ffmpeg.sh
        for f in ffmpeg-patches/*.patch "$LINE_PATCHES"/*.patch; do
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
# build/ffmpeg is the default (newest) line's prefix, for the scripts, tests and the
# Dockerfile that use build/ffmpeg/bin/ffmpeg; a real directory there is from the
# single-line layout of before and is replaced.
link_default() {
    [ "$LINE" = "$NEWEST" ] || return 0
    [ -L "$BUILD/ffmpeg" ] || rm -rf "$BUILD/ffmpeg"
    ln -sfn "ffmpeg-$LINE" "$BUILD/ffmpeg"
    rm -f "$BUILD/ffmpeg.stamp"
}
check_line_patches
WANT=$(stamp_of)
if [ "$FORCE" = 0 ] && [ -x "$PREFIX/bin/ffmpeg" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    link_default
    say "up to date: FFmpeg $LINE, $PREFIX/bin/ffmpeg (--force rebuilds)"
    exit 0
fi
rm -f "$STAMP"
: >"$LOG"
say "FFmpeg $LINE ($FFMPEG_VERSION): building into $PREFIX (log: $LOG)"

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
# deb-src entries for the line's suite and nv-codec-headers' (cuframes-SUITE-src.sources)
# that reuse the URI and Signed-By of the machine's Debian entry (deb822
# debian.sources, else a one-line sources.list entry). They say Check-Valid-Until: no:
# testing's and unstable's Release files expire within a week, and a mirror snapshot
# older than that (as the CI machines' is) would fail `apt-get update` for forky and
# sid; the signature is still checked, and all these entries serve is orig tarballs
# that must match the pinned sha256 (a stale index can only make the fetch fail).
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

# src_version PACKAGE UPSTREAM_VERSION: the Debian version (EPOCH:UPSTREAM-REVISION)
# of the source package whose upstream part is the pinned one, the newest if several;
# nothing (and no failure) when apt knows none, as before the first apt-get update
# with the deb-src entries (apt-cache then exits 100).
src_version() {
    { apt-cache showsrc --only-source "$1" 2>/dev/null || true; } | awk -v want="$2" '
        /^Version:/ { v = $2; u = v; sub(/^[0-9]+:/, "", u); sub(/-[^-]*$/, "", u); if (u == want) print v }' |
        sort -V | tail -n1
}
# listed_versions PACKAGE: what the configured suites offer, for the error message.
listed_versions() {
    { apt-cache showsrc --only-source "$1" 2>/dev/null || true; } | awk '/^Version:/ { print $2 }' | sort -uV | paste -sd' '
}

fetch_sources() {
    local uri key suite entry file changed=0
    read -r uri key < <(debian_uri_and_key) || true
    [ -n "${uri:-}" ] && [ -n "${key:-}" ] ||
        fail "no Debian entry with a URI and Signed-By in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
    for suite in $(printf '%s\n' "$FFMPEG_SUITE" "$NVCODEC_SUITE" | sort -u); do
        file=/etc/apt/sources.list.d/cuframes-$suite-src.sources
        entry=$(printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\nCheck-Valid-Until: no\n' "$uri" "$suite" "$key")
        if [ ! -f "$file" ] || [ "$(cat "$file")" != "$entry" ]; then
            printf '%s\n' "$entry" >"$file"
            changed=1
        fi
    done
    # The versions, by the upstream part: `ffmpeg/sid` would pick sid's newest (9.0),
    # not the 8.1 it still lists.
    FFDEB=$(src_version ffmpeg "$FFMPEG_VERSION")
    NVDEB=$(src_version nv-codec-headers "$NVCODEC_VERSION")
    if [ "$changed" = 1 ] || { [ "$APT_UPDATED" = 0 ] && { [ -z "$FFDEB" ] || [ -z "$NVDEB" ]; }; }; then
        quiet apt-get update -q
        FFDEB=$(src_version ffmpeg "$FFMPEG_VERSION")
        NVDEB=$(src_version nv-codec-headers "$NVCODEC_VERSION")
    fi
    [ -n "$FFDEB" ] || fail "Debian lists no ffmpeg source $FFMPEG_VERSION (FFmpeg $LINE, suite $FFMPEG_SUITE) any more; it lists: $(listed_versions ffmpeg)
The patch series is tested against the pinned release. To move to another, apply
and test the series on it, then update LINES at the top of $0 and
ffmpeg-patches/README.md (\"Upstream\")."
    [ -n "$NVDEB" ] || fail "Debian lists no nv-codec-headers source $NVCODEC_VERSION any more; it lists: $(listed_versions nv-codec-headers)"
    DL=$SRC/dl-$LINE
    rm -rf "$DL"
    mkdir -p "$DL"
    (cd "$DL" && quiet apt-get source -q --tar-only "ffmpeg=$FFDEB" "nv-codec-headers=$NVDEB")
}

say "FFmpeg $LINE: fetching ffmpeg $FFMPEG_VERSION and nv-codec-headers $NVCODEC_VERSION (Debian source)…"
fetch_sources
FFTAR=$(find "$DL" -maxdepth 1 -name "ffmpeg_$FFMPEG_VERSION.orig.tar.*" -not -name '*.asc' | head -n1)
NVTAR=$(find "$DL" -maxdepth 1 -name 'nv-codec-headers_*.orig.tar.*' -not -name '*.asc' | head -n1)
[ -n "$FFTAR" ] || fail "apt-get source ffmpeg=$FFDEB gave no ffmpeg_$FFMPEG_VERSION.orig.tar.* in $DL"
[ -n "$NVTAR" ] || fail "apt-get source nv-codec-headers=$NVDEB gave no nv-codec-headers_*.orig.tar.* in $DL"
# check_pin NAME TARBALL WANT_VERSION WANT_SHA256: the tarball is the pinned release.
check_pin() {
    local name=$1 tar=$2 want_version=$3 want_sha=$4 version sha
    version=$(basename "$tar")
    version=${version#"${name}_"}
    version=${version%%.orig.tar.*}
    sha=$(sha256sum "$tar" | cut -d' ' -f1)
    [ "$version" = "$want_version" ] && [ "$sha" = "$want_sha" ] && return 0
    fail "Debian's $name source is not the pinned one:
  expected: $name $want_version, sha256 $want_sha
  found:    $name $version, sha256 $sha ($(basename "$tar"))
The patch series is tested against the pinned release. To move to the one found,
apply and test the series on it, then update the pin at the top of $0
and ffmpeg-patches/README.md (\"Upstream\")."
}
check_pin ffmpeg "$FFTAR" "$FFMPEG_VERSION" "$FFMPEG_SHA256"
check_pin nv-codec-headers "$NVTAR" "$NVCODEC_VERSION" "$NVCODEC_SHA256"
say "  $(basename "$FFTAR") (Debian $FFDEB), $(basename "$NVTAR") (Debian $NVDEB): the pinned releases"

# ---------------------------------------------------------------- nv-codec-headers
rm -rf "$SRC/nv-codec-headers-$LINE" "$NVPREFIX"
mkdir -p "$SRC/nv-codec-headers-$LINE"
quiet tar -xf "$NVTAR" -C "$SRC/nv-codec-headers-$LINE" --strip-components=1
quiet make -C "$SRC/nv-codec-headers-$LINE" PREFIX="$NVPREFIX" install

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
rm -rf "$TREE"
mkdir -p "$TREE"
quiet tar -xf "$FFTAR" -C "$TREE" --strip-components=1
FFVERSION=$(cat "$TREE/VERSION" 2>/dev/null || echo unknown)
case $FFVERSION in "$LINE"|"$LINE".*) ;; *) fail "$(basename "$FFTAR") is FFmpeg $FFVERSION, not $LINE.x" ;; esac
quiet "${GIT[@]}" init -q
# Build outputs stay out of `git status` in the tree.
printf '%s\n' '*.o' '*.d' '*.a' '*.pc' '*.version' '*.ptx' '*.ptx.c' '*_list.c' \
    /config.* /config_components.h /.version /ffbuild/ /ffmpeg /ffmpeg_g /ffprobe \
    /ffprobe_g /doc/config.texi /doc/examples/pc-uninstalled/ \
    /libavutil/avconfig.h /libavutil/ffversion.h >>"$TREE/.git/info/exclude"
quiet "${GIT[@]}" add -A -f .
quiet "${GIT[@]}" commit -q -m "FFmpeg $FFVERSION (pristine $(basename "$FFTAR"))"
quiet "${GIT[@]}" tag pristine
if [ "$LINE" = "$NEWEST" ]; then
    # The upstream series is written against this line: git am, as FFmpeg's
    # maintainers apply it.
    say "applying ffmpeg-patches/ to $(basename "$FFTAR")…"
    for p in "${UPSTREAM[@]}"; do
        echo "+ git am $p" >>"$LOG"
        if ! "${GIT[@]}" am -q --whitespace=nowarn "$ROOT/$p" >>"$LOG" 2>&1; then
            "${GIT[@]}" am --show-current-patch=diff >/dev/null 2>&1 || true
            fail "patch $p does not apply to $(basename "$FFTAR") (tree left in $TREE, mid-am)"
        fi
    done
else
    # An older line: for each upstream patch, (a) the files of it that apply unchanged
    # here, (b) this line's patch for it, which must apply, (c) a commit with the
    # upstream patch's author, date and message. No fuzz, no three-way merge.
    say "applying ffmpeg-patches/ and $LINE_PATCHES/ to $(basename "$FFTAR")…"
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-apply.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    for p in "${UPSTREAM[@]}"; do
        echo "+ upstream part of $p" >>"$LOG"
        apply_upstream_part --index "$p" >"$tmp/left" || exit 1
        left=$(paste -sd' ' "$tmp/left")
        lp=$(line_patch_of "$p")
        if [ -n "$lp" ]; then
            echo "+ git apply --index $lp (upstream files left: ${left:-none})" >>"$LOG"
            "${GIT[@]}" apply --index --whitespace=nowarn "$ROOT/$lp" >>"$LOG" 2>&1 ||
                fail "patch $lp does not apply on top of the upstream part of $p (tree left in $TREE, that part staged)"
        elif [ -n "$left" ]; then
            # The build fails later (configure, a missing registration) unless the line
            # needs none of it; say which, for whoever writes the line's patch.
            say "  $p: $left do not apply on FFmpeg $LINE and $LINE_PATCHES/ has no patch for it"
        fi
        git mailinfo "$tmp/msg" "$tmp/body" <"$p" >"$tmp/info"
        { mail_field "$tmp/info" Subject; if [ -s "$tmp/msg" ]; then echo; cat "$tmp/msg"; fi; } >"$tmp/commit"
        GIT_AUTHOR_NAME=$(mail_field "$tmp/info" Author) GIT_AUTHOR_EMAIL=$(mail_field "$tmp/info" Email) \
            GIT_AUTHOR_DATE=$(mail_field "$tmp/info" Date) quiet "${GIT[@]}" commit -q -F "$tmp/commit"
    done
fi

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
# for a symbolized build/src/ffmpeg-LINE/ffmpeg_g).
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
# The NEEDED names that are not on every line, with the lines that have them and why.
# Every other name must be on every line: a name FFmpeg renamed or removed fails the
# build until it is listed here (or replaced in NEEDED).
#   protocol:hls   the old HLS protocol handler (hls+http://...), removed in FFmpeg 8.0
#                  ("Remove the old HLS protocol handler"); the hls demuxer, on every
#                  line, is what reads HLS (http:// URLs of .m3u8 playlists)
declare -A NEEDED_LINES=(
    [protocol:hls]="7.1"
)
# config_has KIND NAME CONFIG: configure enabled it (in ffbuild/config.mak).
config_has() {
    local suffix=${1^^}
    # Input devices (lavfi, v4l2, cuframes) are listed with the demuxers.
    [ "$1" = demuxer ] && suffix="(DEMUXER|INDEV)"
    grep -Eq "^CONFIG_${3^^}_${suffix}=yes" ffbuild/config.mak
}
say "configuring FFmpeg $FFVERSION…"
cd "$TREE"
# ccache answers for gcc, g++ and clang through its masquerade directory (configure's
# own test compilations included). The settings make a hit independent of where the
# tree is (/src in the Docker build) and of the compiler binary's timestamps; the
# locale is part of every key (it changes the compiler's messages), so it is fixed
# too: a Docker build has none set. One cache serves every line (an object is keyed by
# its sources, so the lines do not mix); 500 MB holds about 3 builds of each line from
# nothing.
export CCACHE_DIR=$BUILD/ccache CCACHE_BASEDIR=$ROOT CCACHE_COMPILERCHECK=content CCACHE_MAXSIZE=500M
export LANG=C.UTF-8
unset LC_ALL LC_CTYPE LC_MESSAGES
[ -x /usr/lib/ccache/gcc ] || fail "ccache is installed but /usr/lib/ccache/gcc is missing"
export PATH=/usr/lib/ccache:$PATH
T_CONFIGURE=$SECONDS
quiet ./configure "${CONFIGURE[@]}"
T_CONFIGURE=$((SECONDS - T_CONFIGURE))
grep -q '^CONFIG_LIBCUFRAMES=yes' ffbuild/config.mak || fail "configure did not enable libcuframes"
missing=()
HERE=()
for need in "${NEEDED[@]}"; do
    IFS=: read -r kind name config <<<"$need"
    config=${config:-$name}
    lines=${NEEDED_LINES[$need]:-}
    if [ -n "$lines" ] && [[ " $lines " != *" $LINE "* ]]; then
        # Not on this line, as NEEDED_LINES says; that it is really absent keeps the
        # list honest.
        ! config_has "$kind" "$name" "$config" ||
            fail "NEEDED_LINES says $need is on FFmpeg $lines only, but $LINE has it: add $LINE there"
        say "  $need: not on FFmpeg $LINE (NEEDED_LINES: on $lines only)"
        continue
    fi
    HERE+=("$need")
    config_has "$kind" "$name" "$config" || missing+=("$need")
done
[ ${#missing[@]} -eq 0 ] ||
    fail "configure left out ${missing[*]} (see ffbuild/config.log in $TREE for the dependency that failed; a component renamed or removed on FFmpeg $LINE goes in NEEDED_LINES)"

say "building (2 cores: 10-25 min with nothing in build/ccache, 2-5 min with it warm)…"
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
if grep -q cuframes <<<"$(ldd "$FF")"; then
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
for need in "${HERE[@]}"; do
    IFS=: read -r kind name _ <<<"$need"
    # ffmpeg has no list of parsers: the configuration's word is all there is.
    [ "$kind" = parser ] && continue
    listed "$kind" "$name" || missing+=("$need")
done
[ ${#missing[@]} -eq 0 ] || fail "$FF does not list ${missing[*]}"
say "ccache: $hits of $((hits + misses)) compilations from build/ccache"
echo "$WANT" >"$STAMP"
link_default
say "FFmpeg $LINE done in $((SECONDS - START)) s (configure $T_CONFIGURE s, make $T_MAKE s): $PREFIX/bin/ffmpeg"
