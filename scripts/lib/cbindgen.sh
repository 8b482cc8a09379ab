# Sourced by scripts: makes the pinned cbindgen available as $CBINDGEN.
# Installed with `cargo install` into cargo's bin directory (~/.cargo/bin)
# once; skipped when that version is already there. The version is pinned
# because the checked-in header must be byte-identical to what it generates.
CBINDGEN_VERSION=0.29.2

ensure_cbindgen() {
    local root=${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}
    local bin
    for bin in "$root/bin/cbindgen" "$(command -v cbindgen 2>/dev/null || true)"; do
        if [ -n "$bin" ] && [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "cbindgen $CBINDGEN_VERSION" ]; then
            CBINDGEN=$bin
            return 0
        fi
    done
    echo "== installing cbindgen $CBINDGEN_VERSION (cargo install, once)" >&2
    cargo install cbindgen --version "$CBINDGEN_VERSION" --locked >&2
    CBINDGEN=$root/bin/cbindgen
}
