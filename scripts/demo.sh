#!/usr/bin/env bash
# The main job in host memory: one publisher, two subscribers verifying every
# frame, in three processes. Builds the CLI first.
set -euo pipefail
cd "$(dirname "$0")/.."

frames=${FRAMES:-300}
size=${SIZE:-1280x720}
format=${FORMAT:-nv12}
key="demo-$$"

cargo build --release --locked -p cuframes-cli
bin=target/release/cuframes

"$bin" publish "$key" --memory host --format "$format" --size "$size" --fps 60 \
    --frames "$frames" --policy strict-wait --wait-subscribers 2 &
publisher=$!
trap 'kill $publisher 2>/dev/null || true' EXIT

"$bin" subscribe "$key" --verify --frames "$frames" --name first --json >"/tmp/$key-a.json" &
first=$!
"$bin" subscribe "$key" --verify --frames "$frames" --name second --json >"/tmp/$key-b.json" &
second=$!
sleep 1
echo "== cuframes ls (while running)"
"$bin" ls
echo "== cuframes inspect $key"
"$bin" inspect "$key" || true

status=0
wait "$first" || status=1
wait "$second" || status=1
wait "$publisher" || status=1
trap - EXIT
echo "== subscriber results"
cat "/tmp/$key-a.json" "/tmp/$key-b.json"
rm -f "/tmp/$key-a.json" "/tmp/$key-b.json"
if [ "$status" -ne 0 ]; then
    echo "demo: FAILED" >&2
    exit 1
fi
echo "demo: $frames frames of $format $size reached both subscribers, every one verified"
