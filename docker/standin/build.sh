#!/usr/bin/env bash
# Builds local stand-ins for the Dockerfile's two base images, for machines that
# reach package mirrors but no container registry (CI):
#
#   cuframes-standin/bookworm:minbase-HASH       for debian:bookworm-slim (RUNTIME_IMAGE):
#       `debootstrap --variant=minbase bookworm`, slimmed as the official -slim images
#       are (no docs, man pages or locales; apt lists removed), `docker import`ed;
#   cuframes-standin/rust:VERSION-bookworm-HASH  for rust:VERSION-bookworm (RUST_IMAGE):
#       the above, the build tools of buildpack-deps that the cuframes build uses, the
#       host's extra CA certificates, and this machine's own Rust toolchain laid out as
#       in the official image (rust.Dockerfile). VERSION is the version of the toolchain
#       it holds (`rustc -V`), which need not be the Dockerfile's default (ARG
#       RUST_IMAGE=rust:WANT-bookworm): the toolchain is STANDIN_RUST_TOOLCHAIN (a rustup
#       toolchain name), else an installed rustup toolchain of version WANT (WANT.x;
#       `rustup toolchain install WANT` makes CI build with exactly the default's Rust),
#       else the one rustc runs here; one older than WANT is refused.
#
#   docker/standin/build.sh [--log-dir DIR]
#
# Prints RUNTIME_IMAGE=TAG and RUST_IMAGE=TAG on stdout (progress goes to stderr).
# HASH is a hash of what went into the image, so a second run reuses it; older tags
# of the same name are removed. STANDIN_REBUILD=1 rebuilds both. Needs root (debootstrap),
# debootstrap, a Docker daemon and rustup. The Debian mirror is the one this machine's
# apt uses (read from /etc/apt at run time), or STANDIN_MIRROR / STANDIN_SECURITY_MIRROR.
set -euo pipefail
shopt -s inherit_errexit  # the images are made in $(...): a failure there must stop it
cd "$(dirname "$0")/../.."
ROOT=$PWD
HERE=$ROOT/docker/standin
SUITE=bookworm
LOG_DIR=$ROOT/build/test-docker

while [ $# -gt 0 ]; do
    case $1 in
        --log-dir) [ $# -ge 2 ] || { echo "standin: --log-dir needs a directory" >&2; exit 2; }
                   LOG_DIR=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        *) echo "standin: unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
done
mkdir -p "$LOG_DIR"
LOG_DIR=$(cd "$LOG_DIR" && pwd)

say() { echo "standin: $*" >&2; }
fail() { echo "standin: error: $*" >&2; exit 1; }
# Runs a command with its output in LOG; fails with the log's tail.
logged() {
    local log=$1
    shift
    echo "+ $*" >>"$log"
    if ! "$@" >>"$log" 2>&1; then
        echo "standin: error: failed: $*; last lines of $log:" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
}
short_hash() { sha256sum | cut -c1-12; }
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }
# Removes the other tags of REPO (older stand-ins), so they do not pile up.
prune_other_tags() {
    local repo=$1 keep=$2 tag
    docker image ls "$repo" --format '{{.Repository}}:{{.Tag}}' | while read -r tag; do
        [ "$tag" = "$keep" ] || docker rmi "$tag" >/dev/null 2>&1 || true
    done
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-standin.XXXXXX")
cleanup() {
    # debootstrap mounts proc and sys in the root it makes; never delete through a mount.
    local m
    if [ -d "$WORK/rootfs" ]; then
        awk -v r="$WORK/rootfs/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r |
            while read -r m; do umount -l "$m" 2>/dev/null || true; done
    fi
    rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT

# ---------------------------------------------------------------- the Debian mirror
# "URI" of the first deb entry whose path is /debian (or /debian-security with
# `security`), from deb822 .sources files and one-line .list files.
apt_mirror() {
    local want='/debian/?$'
    [ "${1:-}" = security ] && want='/debian-security/?$'
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v want="$want" '
            BEGIN { RS = ""; FS = "\n" }
            {
                deb = 0; n = 0
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^Types:/ && $i ~ /[ \t]deb([ \t]|$)/) deb = 1
                    if ($i ~ /^URIs:/) { line = $i; sub(/^URIs:[ \t]*/, "", line); n = split(line, uris, /[ \t]+/) }
                    if ($i ~ /^Enabled:[ \t]*no/) deb = 0
                }
                for (j = 1; deb && j <= n; j++) if (uris[j] ~ want) { print uris[j]; exit }
            }' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk -v want="$want" '$1 == "deb" {
                for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) { if ($i ~ want) print $i; break }
            }' "$f"
    done
}

# ---------------------------------------------------------------- bookworm (runtime base)
base_image() {
    local key tag
    # The recipe is this function (and the one it calls): other edits here keep the image.
    key=$( { declare -f base_image apt_mirror; echo "$SUITE $(dpkg --print-architecture)"; } | short_hash)
    tag=cuframes-standin/bookworm:minbase-$key
    if [ "${STANDIN_REBUILD:-0}" != 1 ] && image_exists "$tag"; then
        say "reusing $tag"
        echo "$tag"
        return
    fi
    local mirror security
    mirror=${STANDIN_MIRROR:-$(apt_mirror | head -n1)}
    security=${STANDIN_SECURITY_MIRROR:-$(apt_mirror security | head -n1)}
    [ -n "$mirror" ] || fail "no Debian mirror in /etc/apt (set STANDIN_MIRROR)"
    command -v debootstrap >/dev/null || fail "debootstrap is not installed (apt-get install debootstrap)"
    local log=$LOG_DIR/standin-bookworm.log rootfs=$WORK/rootfs keyring=()
    : >"$log"
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] &&
        keyring=(--keyring=/usr/share/keyrings/debian-archive-keyring.gpg)
    say "debootstrap --variant=minbase $SUITE (log: $log)…"
    logged "$log" debootstrap --variant=minbase "${keyring[@]}" "$SUITE" "$rootfs" "$mirror"

    say "slimming it as debian:$SUITE-slim…"
    # The official images' apt sources (deb822), with this machine's mirror.
    rm -f "$rootfs/etc/apt/sources.list"
    {
        printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\n' "$mirror" "$SUITE" "$SUITE"
        printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
        if [ -n "$security" ]; then
            printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\n' "$security" "$SUITE"
            printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
        fi
    } >"$rootfs/etc/apt/sources.list.d/debian.sources"
    # What debuerreotype's slimify does for the -slim images: dpkg leaves out
    # documentation, man pages and translations from now on; those already there go.
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
EOF
    find "$rootfs/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
    find "$rootfs/usr/share/locale" -mindepth 1 -not -type d -not -name locale.alias -delete
    rm -rf "$rootfs"/usr/share/{groff,info,linda,lintian,man}/*
    find "$rootfs/usr/share/doc" "$rootfs/usr/share/locale" -mindepth 1 -type d -empty -delete
    # apt as in the official images: no package cache kept, no translations fetched;
    # services never started by package scripts.
    cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
    printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
    chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
    # Host leftovers (Docker provides its own hostname and resolv.conf) and caches.
    rm -f "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf"
    rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/var/log/{apt/*,bootstrap.log,dpkg.log,alternatives.log}

    say "docker import $tag…"
    tar -C "$rootfs" --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . |
        logged "$log" docker import \
            --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'CMD ["bash"]' - "$tag"
    rm -rf --one-file-system "$rootfs"
    prune_other_tags cuframes-standin/bookworm "$tag"
    echo "$tag"
}

# ---------------------------------------------------------------- rust (build base)
# The Rust version of the Dockerfile's default build image (ARG RUST_IMAGE=rust:1.92-bookworm).
dockerfile_rust() {
    sed -n 's/^ARG RUST_IMAGE=rust:\([0-9][0-9.]*\)-bookworm$/\1/p' "$ROOT/Dockerfile"
}
# rust_toolchain WANT: the rustup toolchain the stand-in is made of, as the script's
# header says; empty for the one rustc runs here.
rust_toolchain() {
    if [ -n "${STANDIN_RUST_TOOLCHAIN:-}" ]; then
        echo "$STANDIN_RUST_TOOLCHAIN"
        return
    fi
    rustup toolchain list | awk '{ print $1 }' | grep -E "^${1//./\\.}(\.[0-9]+)?-" | sort -V | tail -n 1 || true
}
# rs CMD...: a Rust tool of that toolchain.
rs() {
    if [ -n "$RUST_TOOLCHAIN" ]; then
        rustup run "$RUST_TOOLCHAIN" "$@"
    else
        "$@"
    fi
}

rust_image() {
    local base=$1
    if ! command -v rustc >/dev/null || ! command -v rustup >/dev/null; then
        fail "no Rust toolchain here (rustup, rustc): the rust stand-in is made from it"
    fi
    local want
    want=$(dockerfile_rust)
    [ -n "$want" ] || fail "no 'ARG RUST_IMAGE=rust:VERSION-bookworm' in $ROOT/Dockerfile"
    RUST_TOOLCHAIN=$(rust_toolchain "$want")
    rs rustc -V >/dev/null 2>&1 || fail "no Rust toolchain '${RUST_TOOLCHAIN:-rustc}' here (rustup toolchain list)"
    local sysroot version host rustup_bin f
    sysroot=$(readlink -f "$(rs rustc --print sysroot)")
    version=$(rs rustc -V | awk '{ print $2 }')
    host=$(rs rustc -vV | sed -n 's/^host: //p')
    # The stand-in says which Rust it holds; it must be able to build what the
    # Dockerfile's default can.
    [ "$(printf '%s\n' "$want" "${version%%-*}" | sort -V | head -n 1)" = "$want" ] ||
        fail "Rust $version here is older than the Dockerfile's rust:$want-bookworm (rustup toolchain install $want, or STANDIN_RUST_TOOLCHAIN)"
    say "Rust $version${RUST_TOOLCHAIN:+ (toolchain $RUST_TOOLCHAIN)}; the Dockerfile's default: rust:$want-bookworm"
    rustup_bin=$(readlink -f "$(command -v rustup)")
    local toolchain=$version-$host
    local extra_ca=()
    for f in /usr/local/share/ca-certificates/*.crt; do
        [ -f "$f" ] && extra_ca+=("$f")
    done
    local key tag
    key=$( {
        docker image inspect -f '{{.Id}}' "$base"
        declare -f rust_image
        cat "$HERE/rust.Dockerfile"
        rs rustc -vV
        rs cargo -V
        sha256sum "$rustup_bin" | cut -d' ' -f1
        [ ${#extra_ca[@]} -eq 0 ] || cat "${extra_ca[@]}"
    } | short_hash)
    tag=cuframes-standin/rust:$version-$SUITE-$key
    if [ "${STANDIN_REBUILD:-0}" != 1 ] && image_exists "$tag"; then
        say "reusing $tag"
        echo "$tag"
        return
    fi
    local log=$LOG_DIR/standin-rust.log ctx=$WORK/rust-context stage=$WORK/rust-root
    : >"$log"
    say "staging Rust $toolchain from $sysroot…"
    mkdir -p "$ctx/ca-certificates" "$stage/usr/local/rustup/toolchains" "$stage/usr/local/cargo/bin"
    [ ${#extra_ca[@]} -eq 0 ] || cp "${extra_ca[@]}" "$ctx/ca-certificates/"
    # Hard links where possible (same file system, nothing written through them);
    # the documentation (800 MB, not in the official image's minimal profile) stays out.
    local dest=$stage/usr/local/rustup/toolchains/$toolchain
    if ! cp -al "$sysroot" "$dest" 2>/dev/null; then
        rm -rf "$dest"
        mkdir -p "$dest"
        tar -C "$sysroot" --exclude=./share/doc -cf - . | tar -C "$dest" -xf -
    fi
    rm -rf "$dest/share/doc"
    printf 'version = "12"\ndefault_toolchain = "%s"\nprofile = "minimal"\n' "$toolchain" \
        >"$stage/usr/local/rustup/settings.toml"
    cp -l "$rustup_bin" "$stage/usr/local/cargo/bin/rustup" 2>/dev/null ||
        cp "$rustup_bin" "$stage/usr/local/cargo/bin/rustup"
    # rustup dispatches on the name it is called by; the official image has these proxies.
    local proxy
    for proxy in cargo cargo-clippy cargo-fmt clippy-driver rustc rustdoc rustfmt \
        rust-gdb rust-gdbgui rust-lldb; do
        ln -s rustup "$stage/usr/local/cargo/bin/$proxy"
    done
    # Modes as after the official image's `chmod -R a+w $RUSTUP_HOME $CARGO_HOME`.
    tar -C "$stage" --owner=0 --group=0 --numeric-owner --mode=a+w -cf "$ctx/rust.tar" usr
    rm -rf "$stage"
    say "docker build $tag (log: $log)…"
    logged "$log" docker build --network host -f "$HERE/rust.Dockerfile" \
        --build-arg BASE="$base" --build-arg RUST_VERSION="$version" -t "$tag" "$ctx"
    rm -rf "$ctx"
    prune_other_tags cuframes-standin/rust "$tag"
    echo "$tag"
}

docker info >/dev/null 2>&1 || fail "no Docker daemon answers"
# The classic builder: it takes FROM images from the local image store, and needs
# neither a registry nor the buildx plugin.
export DOCKER_BUILDKIT=0
BASE=$(base_image)
RUST=$(rust_image "$BASE")
echo "RUNTIME_IMAGE=$BASE"
echo "RUST_IMAGE=$RUST"
