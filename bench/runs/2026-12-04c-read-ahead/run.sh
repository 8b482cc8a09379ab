#!/usr/bin/env bash
# Does the input device need libcuframes' read-ahead thread beside ffmpeg's own
# demuxer thread and -thread_queue_size? A drop_oldest publisher (the CLI's test
# pattern, 1280x720 yuv420p, 30 fps, ring 16, the muxer's default) starts publishing
# when its subscriber joins; the subscriber, an ffmpeg encoding with libx264, loses
# the frames the ring overwrites before ffmpeg reads them. Frames lost per run:
#   read_ahead 32 (the default)  vs  read_ahead 0 with -thread_queue_size 8 and 64.
# Usage: run.sh FFMPEG CUFRAMES_CLI RUNS
set -u
FF=$1 CLI=$2 RUNS=${3:-5} SIZE=${SIZE:-1280x720} FPS=${FPS:-30} RING=${RING:-16} FRAMES=${FRAMES:-150}
export CUFRAMES_RUNTIME_DIR=$(mktemp -d)
trap 'rm -rf "$CUFRAMES_RUNTIME_DIR"' EXIT
one() {  # one NAME DEVICE-OPTIONS...: frames lost at start
    local name=$1 key=ra-$$-$RANDOM
    shift
    "$CLI" publish "$key" --memory host --format yuv420p --size "$SIZE" --fps "$FPS" \
        --frames "$FRAMES" --ring "$RING" --policy drop_oldest --wait-subscribers 1 --quiet 2>/dev/null &
    local pub=$!
    for _ in $(seq 200); do [ -S "$CUFRAMES_RUNTIME_DIR/$key.sock" ] && break; sleep 0.01; done
    "$FF" -nostdin -hide_banner -nostats -v verbose -f cuframes "$@" -i "$key" -c:v libx264 -preset veryfast \
        -f null - 2>"$CUFRAMES_RUNTIME_DIR/sub.err"
    wait $pub
    local lost
    lost=$(sed -nE "s/.*frames received \(([0-9]+) as private copies\), ([0-9]+) lost.*/\2/p" \
        "$CUFRAMES_RUNTIME_DIR/sub.err" | tail -n 1)
    echo "$name ${lost:-?}"
}
for i in $(seq "$RUNS"); do
    one "read_ahead=32" -read_ahead 32
    one "read_ahead=0,thread_queue_size=8" -read_ahead 0 -thread_queue_size 8
    one "read_ahead=0,thread_queue_size=64" -read_ahead 0 -thread_queue_size 64
done | awk '{ n[$1]++; s[$1] += $2; if ($2 > m[$1]) m[$1] = $2; v[$1] = v[$1] " " $2 }
            END { for (k in n) printf "%-36s runs %d, lost per run:%s (mean %.1f, max %d)\n", k, n[k], v[k], s[k] / n[k], m[k] }'
