# Sourced by scripts/package-wheel.sh and scripts/package-deb.sh: release builds
# of the crates for an old glibc, so that what they package runs on every
# distribution from that glibc on (manylinux_2_28: Debian 10, Ubuntu 18.10, RHEL 8).
#
# cargo-zigbuild links with zig, whose libc stubs carry the symbol versions of the
# glibc named in the target (x86_64-unknown-linux-gnu.2.28); both come from PyPI
# (cargo-zigbuild, ziglang), into build/venv-zig, with auditwheel to check wheels and
# setuptools to build them without reaching PyPI again (scripts/package-wheel.sh: so
# that scripts/gpu-test.sh stage works offline once the venv is there).
# 2.28 and not older: the library calls memfd_create (glibc 2.27) and fcntl64-era
# interfaces (2.28). Versions are pinned; the venv is remade when a pin changes.
ZIG_GLIBC=2.28
ZIG_ARCH=$(uname -m)
ZIG_TRIPLE=$ZIG_ARCH-unknown-linux-gnu
ZIG_TOOLS=(cargo-zigbuild==0.24.1 ziglang==0.17.1 auditwheel==6.8.2 setuptools==80.9.0)
ZIG_VENV=build/venv-zig

# ensure_zig_tools: the pinned tools in $ZIG_VENV, first on PATH.
ensure_zig_tools() {
    local python=${PYTHON:-python3} stamp=$ZIG_VENV/.pins
    if [ ! -x "$ZIG_VENV/bin/cargo-zigbuild" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${ZIG_TOOLS[*]}" ]; then
        echo "== $ZIG_VENV: ${ZIG_TOOLS[*]} (PyPI)" >&2
        rm -rf "$ZIG_VENV"
        "$python" -m venv "$ZIG_VENV" >&2 &&
            "$ZIG_VENV/bin/python" -m pip install -q --disable-pip-version-check "${ZIG_TOOLS[@]}" >&2 ||
            { echo "zigbuild: cannot install ${ZIG_TOOLS[*]} into $ZIG_VENV" >&2; return 1; }
        echo "${ZIG_TOOLS[*]}" >"$stamp"
    fi
    PATH=$PWD/$ZIG_VENV/bin:$PATH
    export PATH
}

# zig_build PACKAGE...: `cargo zigbuild --release` of those packages for glibc
# $ZIG_GLIBC; ZIG_OUT is where the artifacts are.
zig_build() {
    local args=() p
    for p in "$@"; do args+=(-p "$p"); done
    ensure_zig_tools || return 1
    echo "== cargo zigbuild --release --target $ZIG_TRIPLE.$ZIG_GLIBC ${args[*]}" >&2
    cargo zigbuild --release --locked --target "$ZIG_TRIPLE.$ZIG_GLIBC" "${args[@]}" >&2 || return 1
    ZIG_OUT=$(cd "${CARGO_TARGET_DIR:-target}/$ZIG_TRIPLE/release" && pwd)
}

# glibc_floor FILE...: the newest GLIBC_x.y symbol version the files need.
glibc_floor() {
    objdump -T "$@" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1
}
