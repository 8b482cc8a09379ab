# The GStreamer packages the workspace builds against (rust/gst-cuframes: the -sys
# crates ask pkg-config) and its tests run (gst-launch-1.0, videotestsrc): Debian
# bookworm's 1.22. Sourced by scripts/test.sh (before clippy builds the workspace)
# and tests/gstreamer/run.sh.
GSTREAMER_PACKAGES=(libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev gstreamer1.0-tools
    gstreamer1.0-plugins-base gstreamer1.0-plugins-good)

# gstreamer_missing: the packages not installed, one per line.
gstreamer_missing() {
    local p
    for p in "${GSTREAMER_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
    done
}

# ensure_gstreamer: installs what is missing (as root, with apt); fails saying what
# is missing where it cannot.
ensure_gstreamer() {
    local missing
    mapfile -t missing < <(gstreamer_missing)
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "== installing GStreamer (${missing[*]})"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}"; } >/dev/null 2>&1 && return 0
    fi
    echo "GStreamer packages missing: ${missing[*]} (apt-get install them)" >&2
    return 1
}
