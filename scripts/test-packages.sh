#!/usr/bin/env bash
# The Debian packages as built (scripts/package-deb.sh), checked on this machine:
#
#   scripts/test-packages.sh
#
# 1. the four packages build (libcuframes0.2, libcuframes-dev, cuframes,
#    gstreamer1.0-cuframes);
# 2. lintian finds nothing, every tag shown (-I -E --pedantic; two overrides, each
#    with its reason in the package); lintian is installed when missing (apt, as
#    root), and skipped only where it cannot be;
# 3. the glibc floor: no binary needs a GLIBC_ version above 2.28, and each package's
#    Depends says libc6 (>= the floor its binaries need);
# 4. what each package holds: the SONAME and its links, the header, static library
#    and a pkg-config file whose paths are the package's, the manual pages (one per
#    command) and the bash and zsh completions of the command, every package's
#    copyright and changelog; the library's shlibs, symbols and ldconfig trigger; the
#    GStreamer plugin in GStreamer's plugin directory, and gst-inspect-1.0 loads it
#    from there;
# 5. a bad argument to package-deb.sh is refused.
# Installing and using them in a clean container is scripts/test-docker.sh's check d.
# Prints "Packages: N passed, N failed, N skipped" last; exits non-zero on a failure.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/lib/zigbuild.sh

passed=0
failed=0
skipped=0
ok() {
    passed=$((passed + 1))
    printf 'ok     %s\n' "$*"
}
bad() {
    failed=$((failed + 1))
    printf 'FAILED %s\n' "$*"
}
skip() {
    skipped=$((skipped + 1))
    printf 'skip   %s\n' "$*"
}
summary() {
    echo "Packages: $passed passed, $failed failed, $skipped skipped"
    [ "$failed" -eq 0 ]
    exit
}
log=build/test-packages
mkdir -p "$log"
T0=$SECONDS

# ---------------------------------------------------------------- 1. build
t=$SECONDS
if ! scripts/package-deb.sh >"$log/package-deb.out" 2>"$log/package-deb.err"; then
    tail -n 20 "$log/package-deb.err" | sed 's/^/  | /'
    bad "scripts/package-deb.sh builds the packages"
    skip "lintian (no packages)"
    skip "glibc floor (no packages)"
    skip "package contents (no packages)"
    summary
fi
mapfile -t debs < <(grep '\.deb$' "$log/package-deb.out")
floor_line=$(grep '^glibc floor:' "$log/package-deb.out")
ok "scripts/package-deb.sh builds ${#debs[@]} packages ($((SECONDS - t)) s): $(for d in "${debs[@]}"; do printf '%s (%s KiB) ' "$(basename "$d")" "$(($(stat -c %s "$d") / 1024))"; done)"
echo "       $floor_line"
deb_of() { printf '%s\n' "${debs[@]}" | grep "/$1_"; }

# ---------------------------------------------------------------- 2. lintian
t=$SECONDS
if ! command -v lintian >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing lintian (apt-get; log $log/apt.log)"
    { apt-get install -y -q --no-install-recommends lintian ||
        { apt-get update -q && apt-get install -y -q --no-install-recommends lintian; }; } \
        >"$log/apt.log" 2>&1
fi
if ! command -v lintian >/dev/null; then
    skip "lintian (not installed and not installable here: see $log/apt.log)"
else
    # Not as root (lintian warns about it): a copy the unprivileged user can read.
    copy=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-lintian.XXXXXX")
    cp "${debs[@]}" "$copy/"
    chmod -R a+rX "$copy"
    run=(lintian -I -E --pedantic --no-tag-display-limit)
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
        run=(setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME="$copy" "${run[@]}")
    fi
    "${run[@]}" "$copy"/*.deb >"$log/lintian.log" 2>&1
    rc=$?
    tags=$(grep -E '^[EWIPXC]: ' "$log/lintian.log" || true)
    if [ "$rc" -eq 0 ] && [ -z "$tags" ]; then
        ok "lintian $(lintian --version | awk '{ print $2 }') -I -E --pedantic: no tag ($((SECONDS - t)) s)"
    else
        sed 's/^/  | /' "$log/lintian.log" | head -n 40
        bad "lintian -I -E --pedantic (exit $rc)"
    fi
    rm -rf "$copy"
fi

# ---------------------------------------------------------------- 3. glibc floor
x=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-debx.XXXXXX")
trap 'rm -rf "$x"' EXIT
floor_ok=1
floor_detail=()
for deb in "${debs[@]}"; do
    pkg=$(dpkg-deb -f "$deb" Package)
    dpkg-deb -x "$deb" "$x/$pkg"
    depends=$(dpkg-deb -f "$deb" Depends)
    mapfile -t elves < <(find "$x/$pkg" -type f \( -name '*.so.*' -o -name '*.so' -o -path '*/bin/*' \))
    [ ${#elves[@]} -gt 0 ] || continue
    need=$(glibc_floor "${elves[@]}")
    if [ "$(printf '%s\n' "$need" "$ZIG_GLIBC" | sort -V | tail -n 1)" != "$ZIG_GLIBC" ]; then
        echo "  $pkg needs GLIBC_$need, above $ZIG_GLIBC"
        floor_ok=0
    fi
    if ! grep -q "libc6 (>= $need)" <<<"$depends"; then
        echo "  $pkg: Depends '$depends' does not say libc6 (>= $need)"
        floor_ok=0
    fi
    floor_detail+=("$pkg GLIBC_$need")
done
if [ $floor_ok = 1 ]; then
    ok "glibc floor $ZIG_GLIBC, in Depends: ${floor_detail[*]}"
else
    bad "glibc floor"
fi

# ---------------------------------------------------------------- 4. contents
contents_ok=1
want() { # PKG PATH...: each path is in the extracted package (file or link)
    local pkg=$1 p
    shift
    for p in "$@"; do
        [ -e "$x/$pkg/$p" ] || [ -L "$x/$pkg/$p" ] || { echo "  $pkg lacks $p"; contents_ok=0; }
    done
}
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libpkg=$(for d in "${debs[@]}"; do dpkg-deb -f "$d" Package; done | grep '^libcuframes[0-9]')
series=${libpkg#libcuframes}
libdir=usr/lib/$triplet
want "$libpkg" "$libdir/libcuframes.so.$series"
[ "$(readlink "$x/$libpkg/$libdir/libcuframes.so.$series")" = "$(basename "$x/$libpkg/$libdir"/libcuframes.so.$series.*)" ] ||
    { echo "  libcuframes.so.$series is not a link to the library"; contents_ok=0; }
soname=$(objdump -p "$x/$libpkg/$libdir"/libcuframes.so.$series.* | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = "libcuframes.so.$series" ] || { echo "  the SONAME is '$soname', the package $libpkg"; contents_ok=0; }
[ "$(stat -c %a "$x/$libpkg/$libdir"/libcuframes.so.$series.*)" = 644 ] || { echo "  the library is not 0644"; contents_ok=0; }
want libcuframes-dev usr/include/cuframes.h "$libdir/libcuframes.a" "$libdir/libcuframes.so" "$libdir/pkgconfig/cuframes.pc"
[ "$(readlink "$x/libcuframes-dev/$libdir/libcuframes.so")" = "libcuframes.so.$series" ] ||
    { echo "  libcuframes.so does not point at the SONAME"; contents_ok=0; }
pc=(env PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$x/libcuframes-dev/$libdir/pkgconfig" pkg-config)
if command -v pkg-config >/dev/null; then
    # The libdir is a default search path of the compiler: no -L (pkgconf drops it).
    libs=$("${pc[@]}" --libs cuframes | xargs)
    [ "$libs" = "-lcuframes" ] || [ "$libs" = "-L/$libdir -lcuframes" ] ||
        { echo "  cuframes.pc --libs: '$libs'"; contents_ok=0; }
    [ "$("${pc[@]}" --variable=libdir cuframes)" = "/$libdir" ] ||
        { echo "  cuframes.pc libdir: $("${pc[@]}" --variable=libdir cuframes)"; contents_ok=0; }
    "${pc[@]}" --validate cuframes 2>/dev/null || { echo "  cuframes.pc does not validate"; contents_ok=0; }
fi
grep -q '^License: MIT OR Apache-2.0$' "$x/libcuframes-dev/$libdir/pkgconfig/cuframes.pc" ||
    { echo "  cuframes.pc has no License: MIT OR Apache-2.0"; contents_ok=0; }
pages=(cuframes publish subscribe ls inspect cleanup bench top)
for page in "${pages[@]}"; do
    [ "$page" = cuframes ] && name=cuframes.1.gz || name=cuframes-$page.1.gz
    want cuframes "usr/share/man/man1/$name"
    [ -e "$x/cuframes/usr/share/man/man1/$name" ] &&
        { grep -q '^\.TH' <<<"$(gzip -dc "$x/cuframes/usr/share/man/man1/$name")" || { echo "  $name is no manual page"; contents_ok=0; }; }
done
want cuframes usr/bin/cuframes usr/share/bash-completion/completions/cuframes usr/share/zsh/vendor-completions/_cuframes
grep -q 'drop_oldest' "$x/cuframes/usr/share/bash-completion/completions/cuframes" 2>/dev/null ||
    { echo "  the bash completion lacks the policies"; contents_ok=0; }
for deb in "${debs[@]}"; do
    pkg=$(dpkg-deb -f "$deb" Package)
    want "$pkg" "usr/share/doc/$pkg/copyright" "usr/share/doc/$pkg/changelog.Debian.gz"
    grep -q '^License: MIT or Apache-2.0$' "$x/$pkg/usr/share/doc/$pkg/copyright" 2>/dev/null ||
        { echo "  $pkg: copyright does not say MIT or Apache-2.0"; contents_ok=0; }
done
control=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-debc.XXXXXX")
dpkg-deb -e "$(deb_of "$libpkg")" "$control"
grep -q "^libcuframes $series $libpkg (>= " "$control/shlibs" 2>/dev/null ||
    { echo "  shlibs: $(cat "$control/shlibs" 2>/dev/null)"; contents_ok=0; }
exported=$(objdump -T "$x/$libpkg/$libdir"/libcuframes.so.$series.* | awk '$4 == ".text" && $NF ~ /^cuframes_/' | wc -l)
listed=$(grep -c '^ cuframes_.*@Base ' "$control/symbols" 2>/dev/null || true)
{ [ "$exported" -gt 20 ] && [ "$exported" = "$listed" ]; } ||
    { echo "  symbols lists $listed of $exported exported functions"; contents_ok=0; }
grep -qx 'activate-noawait ldconfig' "$control/triggers" 2>/dev/null || { echo "  no ldconfig trigger"; contents_ok=0; }
plugin=$libdir/gstreamer-1.0/libgstcuframes.so
want gstreamer1.0-cuframes "$plugin"
if command -v gst-inspect-1.0 >/dev/null; then
    # Read all of the output before matching: `| grep -q` under pipefail fails
    # whenever grep exits before gst-inspect's last write (SIGPIPE, 141).
    inspected=$(GST_REGISTRY=$x/registry.bin GST_PLUGIN_PATH=$x/gstreamer1.0-cuframes/$libdir/gstreamer-1.0 \
        gst-inspect-1.0 cuframessrc 2>&1)
    grep -q "gstreamer1.0-cuframes/$plugin" <<<"$inspected" ||
        { echo "  gst-inspect-1.0 does not load the packaged plugin:"; sed -n 's/^/  | /; 1,12p' <<<"$inspected"; contents_ok=0; }
fi
rm -rf "$control"
if [ $contents_ok = 1 ]; then
    ok "contents: SONAME libcuframes.so.$series and links, header, libcuframes.a, cuframes.pc, ${#pages[@]} manual pages, bash and zsh completions, copyright, $listed symbols, ldconfig trigger, the GStreamer plugin (loaded by gst-inspect-1.0)"
else
    bad "package contents"
fi

# ---------------------------------------------------------------- 5. bad input
out=$(scripts/package-deb.sh --outt build 2>&1)
rc=$?
if [ $rc = 2 ] && grep -q "unknown argument '--outt'" <<<"$out"; then
    ok "package-deb.sh refuses an unknown argument (exit 2)"
else
    bad "package-deb.sh --outt: exit $rc: $out"
fi
out=$(scripts/package-deb.sh --out 2>&1)
rc=$?
if [ $rc = 2 ] && grep -q "usage:" <<<"$out"; then
    ok "package-deb.sh refuses --out without a directory (exit 2)"
else
    bad "package-deb.sh --out: exit $rc: $out"
fi

echo "test-packages: took $((SECONDS - T0)) s"
summary
