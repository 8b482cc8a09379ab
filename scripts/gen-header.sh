#!/usr/bin/env bash
# Generates the C header from rust/cuframes-capi with cbindgen (pinned
# version, installed when missing). Writes include/cuframes.h, or the file
# given as the only argument (scripts/test.sh uses that to check that the
# checked-in header is not stale).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/cbindgen.sh

out=${1:-include/cuframes.h}
ensure_cbindgen
mkdir -p "$(dirname "$out")"
"$CBINDGEN" --quiet --config rust/cuframes-capi/cbindgen.toml --crate cuframes-capi \
    --output "$out" rust/cuframes-capi
echo "gen-header: wrote $out" >&2
