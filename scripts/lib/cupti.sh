# shellcheck shell=bash
# find_cupti: the path of a CUPTI library on this machine (the CUDA toolkit's or
# PyTorch's wheel's, whichever is there), or nothing. The copy counter
# (scripts/gpu/memcpy-count.c) opens it through $CUFRAMES_CUPTI.
find_cupti() {
    local found
    found=$(find /usr/local/cuda* /usr/lib /opt /usr/local/lib -name 'libcupti.so*' 2>/dev/null | sort -r | head -n 1)
    if [ -z "$found" ]; then
        found=$(python3 - <<'PY' 2>/dev/null
import glob, site
hits = [h for p in site.getsitepackages() for h in glob.glob(p + "/nvidia/*/lib/libcupti.so*")]
print(sorted(hits)[-1] if hits else "")
PY
)
    fi
    echo "$found"
}
