#!/usr/bin/env bash
# The ring benchmark of two builds side by side on the GPU machine, alternated
# round by round: `cuframes bench --memory cuda`, 4K NV12, ring 8, 1 and 8
# subscribers.
#
#   scripts/gpu/ring-before-after.sh BEFORE_BINARY AFTER_BINARY [ROUNDS]
set -euo pipefail
before=${1:?usage: ring-before-after.sh BEFORE AFTER [ROUNDS]}
after=${2:?usage: ring-before-after.sh BEFORE AFTER [ROUNDS]}
rounds=${3:-2}
export CUFRAMES_RUNTIME_DIR=${CUFRAMES_RUNTIME_DIR:-$(mktemp -d)}
for r in $(seq 1 "$rounds"); do
    for which in before after; do
        bin=$before
        [ "$which" = after ] && bin=$after
        for subs in 1 8; do
            json=$("$bin" bench --memory cuda --size 3840x2160 --format nv12 --ring 8 --subscribers "$subs" \
                --frames 5000 --transports cuframes --verify none --json 2>/dev/null) || { echo "round $r $which subs=$subs: FAILED"; continue; }
            python3 -c 'import json,sys
d = json.loads(sys.argv[1])[0]
kernel = d.get("publisher_kernel_copies")
print("round %s %-6s subs=%s: fps %.0f p50 %.1f us p99 %.1f us publisher %.1f us/frame subscriber %.1f us/frame%s" % (
    sys.argv[2], sys.argv[3], sys.argv[4], d["fps"], d["p50_us"], d["p99_us"],
    d["publisher_cpu_us_per_frame"], d["subscriber_cpu_us_per_frame"],
    "" if kernel is None else " kernel copies %d" % kernel))' "$json" "$r" "$which" "$subs"
        done
    done
done
