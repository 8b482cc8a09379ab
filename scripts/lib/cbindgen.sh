# Sourced by scripts: makes the pinned cbindgen available as $CBINDGEN.
# Installed with `cargo install` into ~/.cargo/bin (skipped when that
# version is already there). The version is pinned because the checked-in
# header must be byte-identical to what this version generates.
CBINDGEN_VERSION=0.29.2

ensure_cbindgen() {
    local bin
    for bin in "$(command -v cbindgen 2>/dev/null || true)" "${CARGO_HOME:-$HOME/.cargo}/bin/cbindgen"; do
        if [ -n "$bin" ] && [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "cbindgen $CBINDGEN_VERSION" ]; then
            CBINDGEN=$bin
            return 0
        fi
    done
    echo "== installing cbindgen $CBINDGEN_VERSION (cargo install, once)" >&2
    cargo install cbindgen --version "$CBINDGEN_VERSION" --locked >&2
    CBINDGEN="${CARGO_HOME:-$HOME/.cargo}/bin/cbindgen"
}
