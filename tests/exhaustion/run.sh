#!/usr/bin/env bash
# A host that runs short: /dev/shm full, descriptors at their limit, a header
# left without pages or shrunk by another process. What cuframes must do:
# name what ran out, on which side, with the limit, and never die of a signal.
#
#   tests/exhaustion/run.sh [TEST...]
#
# Each test runs in its own PID, IPC and mount namespaces with a small tmpfs
# on /dev/shm (a container's /dev/shm, made small to fill it quickly), as
# root; elsewhere every test is counted skipped. The CLI is CUFRAMES_BIN
# (target/debug/cuframes); FFMPEG, when it names a patched ffmpeg, adds the
# muxer's and the input device's cases (skipped otherwise). Prints
# "LABEL: N passed, N failed, N skipped" last.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/sockets.sh
LABEL=${EXHAUSTION_SUITE_LABEL:-Exhaustion}
CLI=$(realpath "${CUFRAMES_BIN:-target/debug/cuframes}")
FFMPEG=${FFMPEG:-}
[ -n "$FFMPEG" ] && FFMPEG=$(realpath "$FFMPEG")
SHM_SIZE=${SHM_SIZE:-1m}

# ---- inside a test's namespaces -------------------------------------------

# The test's own processes, each in its own group: killed at the end.
STARTED=()
# bgrun NAME CMD...: starts CMD in the background, output in NAME.out/.err.
bgrun() {
    local name=$1
    shift
    setsid "$@" >"$T/$name.out" 2>"$T/$name.err" &
    STARTED+=($!)
    BGPID=$!
}

# fail DETAIL: the test fails, saying why (with the files to look at).
fail() {
    echo "FAIL: $*"
    local f
    for f in "$T"/*.err; do
        [ -s "$f" ] && { echo "--- $(basename "$f")"; tail -n 8 "$f"; }
    done
    exit 1
}

# no_signal NAME RC: a process must end by itself, not of a signal.
no_signal() {
    [ "$2" -lt 128 ] || fail "$1 died of signal $(($2 - 128)) (exit $2)"
}

# says FILE TEXT...: FILE must contain every TEXT.
says() {
    local file=$1 text
    shift
    for text in "$@"; do
        grep -qF -- "$text" "$file" || fail "$(basename "$file") does not say '$text'"
    done
}

# fill_shm: /dev/shm full to the last page.
fill_shm() {
    dd if=/dev/zero of=/dev/shm/filler bs=4k 2>/dev/null
    [ "$(df --output=avail /dev/shm | tail -n 1)" -eq 0 ] || fail "/dev/shm could not be filled"
}

# wait_socket KEY: until the publisher of KEY listens (5 s at most).
wait_socket() {
    socket_up "$1" 5 || fail "no socket for $1 after 5 s"
}

# cli LIMIT NAME ARGS...: the CLI in the foreground, bounded; RC its status.
cli() {
    local limit=$1 name=$2
    shift 2
    timeout -k 1 "$limit" "$CLI" "$@" >"$T/$name.out" 2>"$T/$name.err"
    RC=$?
    no_signal "$name" "$RC"
}

# The publisher dies of nothing when /dev/shm is full: it says how much it
# wanted and how much was free, and leaves no name behind.
test_full_before_publish() {
    fill_shm
    cli 10 publish publish k --memory host --size 64x64 --frames 3
    [ "$RC" -eq 1 ] || fail "publish exited $RC, not 1"
    says "$T/publish.err" "no space for /dev/shm/cuframes-k: 7424 bytes wanted" "has 0 bytes free"
    [ ! -e /dev/shm/cuframes-k ] || fail "/dev/shm/cuframes-k was left behind"
    [ -z "$(ls "$CUFRAMES_RUNTIME_DIR")" ] || fail "left in the runtime directory: $(ls "$CUFRAMES_RUNTIME_DIR")"
}

# /dev/shm fills up while a publisher runs: it goes on, its subscribers (one
# joining after it filled) get every frame, and a second publisher is told.
test_full_while_running() {
    bgrun publisher "$CLI" publish k --memory host --size 64x64 --fps 100 --frames 300 \
        --policy strict-wait --wait-subscribers 1
    local publisher=$BGPID
    wait_socket k
    bgrun early "$CLI" subscribe k --json --verify --frames 300 --wait-timeout 5s
    local early=$BGPID
    sleep 0.3
    fill_shm
    cli 10 second publish k2 --memory host --size 64x64 --frames 3
    [ "$RC" -eq 1 ] || fail "the second publisher exited $RC, not 1"
    says "$T/second.err" "no space for /dev/shm/cuframes-k2"
    bgrun late "$CLI" subscribe k --json --frames 20 --wait-timeout 5s
    local late=$BGPID
    wait "$early"
    local rc=$?
    no_signal early "$rc"
    [ "$rc" -eq 0 ] || fail "the first subscriber exited $rc"
    says "$T/early.out" '"frames":300' '"verified":300' '"mismatched":0'
    wait "$late" || fail "the subscriber that joined a full /dev/shm failed"
    says "$T/late.out" '"frames":20'
    wait "$publisher" || fail "the publisher exited $?"
}

# A header without pages (a publisher that died creating it, or an older
# cuframes that found /dev/shm full) on a full /dev/shm: every tool reports it
# and goes on, none maps it, cleanup removes it.
test_sparse_header() {
    truncate -s 7424 /dev/shm/cuframes-sp
    fill_shm
    cli 10 ls ls
    [ "$RC" -eq 0 ] || fail "ls exited $RC"
    says "$T/ls.err" "sp:" "is sparse: 0 of its 7424 bytes have pages"
    cli 10 ls-json ls --json
    [ "$RC" -eq 0 ] || fail "ls --json exited $RC"
    says "$T/ls-json.out" '"invalid":' 'sparse'
    cli 10 inspect inspect sp
    [ "$RC" -eq 1 ] || fail "inspect exited $RC, not 1"
    says "$T/inspect.err" "is sparse" "cuframes cleanup"
    cli 10 health health sp
    [ "$RC" -eq 1 ] || fail "health exited $RC, not 1"
    cli 10 top top --once --interval 50ms
    [ "$RC" -eq 0 ] || fail "top --once exited $RC"
    says "$T/top.out" "1 key(s) skipped, unreadable:" "sp: " "is sparse"
    cli 10 exporter exporter --once
    [ "$RC" -eq 0 ] || fail "exporter --once exited $RC"
    says "$T/exporter.out" "cuframes_keys_unreadable 1" 'cuframes_key_unreadable{key="sp"} 1'
    cli 10 subscribe subscribe sp --frames 1 --wait-timeout 500ms
    [ "$RC" -ne 0 ] || fail "a subscriber of a sparse header succeeded"
    cli 10 cleanup cleanup
    [ "$RC" -eq 0 ] || fail "cleanup exited $RC"
    [ ! -e /dev/shm/cuframes-sp ] || fail "cleanup left /dev/shm/cuframes-sp"
}

# scrape PORT FILE: one page from a running exporter.
scrape() {
    python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
        "http://127.0.0.1:$1/metrics" >"$2" 2>"$2.err" || fail "scrape failed: $(cat "$2.err")"
}

# A running exporter meets a sparse header and a live key on a full /dev/shm:
# it skips the one, saying why once, counts it, and serves the other.
test_running_exporter() {
    bgrun publisher "$CLI" publish live --memory host --size 64x64 --fps 50 --frames 1000
    local publisher=$BGPID
    wait_socket live
    local port=$((20000 + RANDOM % 20000))
    bgrun exporter "$CLI" exporter --listen "127.0.0.1:$port"
    local exporter=$BGPID i
    for i in $(seq 100); do
        grep -q "serving" "$T/exporter.err" && break
        sleep 0.05
    done
    truncate -s 7424 /dev/shm/cuframes-sp
    fill_shm
    scrape "$port" "$T/page1"
    scrape "$port" "$T/page2"
    kill -0 "$exporter" 2>/dev/null || fail "the exporter died"
    says "$T/page2" "cuframes_keys_unreadable 1" 'cuframes_publisher_up{key="live"} 1'
    [ "$(grep -c "exporter skips key 'sp'" "$T/exporter.err")" -eq 1 ] ||
        fail "the exporter did not say once why it skips 'sp'"
    kill "$publisher"
}

# Another process truncates a live key's header (a peer that may write it,
# or a broken one): the publisher, its subscribers and the tools go on; the
# publisher says what happened once.
test_header_shrunk_under_publisher() {
    bgrun publisher "$CLI" publish k --memory host --size 64x64 --fps 100 --frames 300 \
        --policy strict-wait --wait-subscribers 1
    local publisher=$BGPID
    wait_socket k
    bgrun subscriber "$CLI" subscribe k --json --verify --frames 300 --wait-timeout 5s
    local subscriber=$BGPID
    sleep 0.5
    truncate -s 0 /dev/shm/cuframes-k
    sleep 0.2
    cli 10 ls ls
    [ "$RC" -eq 0 ] || fail "ls exited $RC"
    cli 10 inspect inspect k
    wait "$subscriber"
    local rc=$?
    no_signal subscriber "$rc"
    [ "$rc" -eq 0 ] || fail "the subscriber exited $rc"
    says "$T/subscriber.out" '"frames":300' '"verified":300'
    wait "$publisher"
    rc=$?
    no_signal publisher "$rc"
    [ "$rc" -eq 0 ] || fail "the publisher exited $rc"
    says "$T/publisher.err" "/dev/shm/cuframes-k shrank under its publisher"
}

# storm KEY N FRAMES REFUSAL: N subscribers of KEY at once, each for FRAMES
# frames; each that is not served must say REFUSAL. Sets served and refused.
storm() {
    local key=$1 n=$2 frames=$3 refusal=$4 i rc subs=()
    for i in $(seq "$n"); do
        bgrun "sub$i" "$CLI" subscribe "$key" --json --frames "$frames" --wait-timeout 5s
        subs+=("$BGPID")
    done
    served=0 refused=0
    for i in $(seq "$n"); do
        wait "${subs[$((i - 1))]}"
        rc=$?
        no_signal "sub$i" "$rc"
        if [ "$rc" -eq 0 ]; then
            served=$((served + 1))
        else
            says "$T/sub$i.err" "$refusal"
            refused=$((refused + 1))
        fi
    done
}

# A publisher with 40 descriptors and 36 subscribers arriving at once: it
# takes what it can, says once that it ran out (with the limit), tells every
# other one why, and serves on.
test_publisher_out_of_descriptors() {
    bgrun publisher bash -c "ulimit -n 40 && exec '$CLI' publish fdl --memory host --size 64x64 --fps 50 --frames 250"
    local publisher=$BGPID
    wait_socket fdl
    storm fdl 36 5 "publisher of 'fdl': the publisher has no descriptor left (limit 40)"
    [ "$served" -ge 1 ] && [ "$refused" -ge 1 ] || fail "$served served, $refused refused"
    kill -0 "$publisher" 2>/dev/null || fail "the publisher died"
    [ "$(grep -c "no descriptor left (limit 40)" "$T/publisher.err")" -eq 1 ] ||
        fail "the publisher did not say once that it ran out of descriptors"
    bgrun after "$CLI" subscribe fdl --json --frames 5 --wait-timeout 5s
    wait "$BGPID" || fail "a subscriber after the storm was not served"
    wait "$publisher" || fail "the publisher exited $?"
}

# A publisher left without a single free descriptor (its limit lowered to
# what it holds): it cannot even accept, yet the newcomer is told why, with
# the limit, through the descriptor it keeps in reserve.
test_publisher_cannot_accept() {
    bgrun publisher "$CLI" publish full --memory host --size 64x64 --fps 50 --frames 0
    local publisher=$BGPID
    wait_socket full
    local pid
    pid=$(pgrep -f "publish full" | head -n 1)
    local held
    held=$(ls "/proc/$pid/fd" | wc -l)
    prlimit --pid "$pid" --nofile="$held:" || fail "prlimit failed"
    cli 10 subscriber subscribe full --frames 5 --wait-timeout 2s
    [ "$RC" -eq 1 ] || fail "the subscriber exited $RC, not 1"
    says "$T/subscriber.err" "publisher of 'full': the publisher has no descriptor left (limit $held)"
    says "$T/publisher.err" "accepting a subscriber: this process has no descriptor left (limit $held)"
    kill -0 "$publisher" 2>/dev/null || fail "the publisher died"
    prlimit --pid "$pid" --nofile=1024: || fail "prlimit could not raise the limit again"
    cli 10 next subscribe full --json --frames 5 --wait-timeout 5s
    [ "$RC" -eq 0 ] || fail "a subscriber after the limit was raised exited $RC"
    kill "$publisher"
}

# 33 subscribers of one publisher: the 31 slots taken, the other two are
# told, the publisher says so once and serves on.
test_subscriber_slots() {
    bgrun publisher "$CLI" publish slots --memory host --size 64x64 --fps 50 --frames 0
    local publisher=$BGPID
    wait_socket slots
    storm slots 33 250 "too many subscribers: publisher of 'slots' serves its maximum of 31"
    [ "$served" -eq 31 ] && [ "$refused" -eq 2 ] || fail "$served served, $refused refused"
    [ "$(grep -c "cannot take more subscribers: too many subscribers" "$T/publisher.err")" -eq 1 ] ||
        fail "the publisher did not say once that its subscriber slots ran out"
    kill -0 "$publisher" 2>/dev/null || fail "the publisher died"
    kill "$publisher"
}

# A subscriber with 6 descriptors: its own limit, not the publisher, is named.
test_subscriber_out_of_descriptors() {
    bgrun publisher "$CLI" publish lowfd --memory host --size 64x64 --fps 50 --frames 500
    local publisher=$BGPID
    wait_socket lowfd
    timeout -k 1 10 bash -c "ulimit -n 6 && exec '$CLI' subscribe lowfd --frames 5 --wait-timeout 2s" \
        >"$T/subscriber.out" 2>"$T/subscriber.err"
    RC=$?
    no_signal subscriber "$RC"
    [ "$RC" -eq 1 ] || fail "the subscriber exited $RC, not 1"
    says "$T/subscriber.err" "this process has no descriptor left (limit 6)"
    bgrun next "$CLI" subscribe lowfd --json --frames 5 --wait-timeout 5s
    wait "$BGPID" || fail "the next subscriber was not served"
    kill "$publisher"
}

# Memory for mappings (an address-space limit makes mmap fail as a memory
# cgroup would, without the OOM killer): a publisher whose 4K ring does not
# fit fails and leaves nothing; a subscriber that cannot map the slots fails,
# naming its own memory, and the publisher serves the next one.
test_out_of_memory() {
    timeout -k 1 10 bash -c "ulimit -v 150000 && exec '$CLI' publish vm --memory host --size 3840x2160 --ring 16 --frames 2" \
        >"$T/publish.out" 2>"$T/publish.err"
    RC=$?
    no_signal publish "$RC"
    [ "$RC" -eq 1 ] || fail "the publisher exited $RC, not 1"
    says "$T/publish.err" "mmap host slot memory of 'vm' (199098368 bytes): this process is out of memory"
    [ ! -e /dev/shm/cuframes-vm ] || fail "/dev/shm/cuframes-vm was left behind"
    bgrun publisher "$CLI" publish vm --memory host --size 3840x2160 --ring 16 --fps 20 --frames 0
    local publisher=$BGPID
    wait_socket vm
    timeout -k 1 10 bash -c "ulimit -v 150000 && exec '$CLI' subscribe vm --frames 5 --wait-timeout 2s" \
        >"$T/subscriber.out" 2>"$T/subscriber.err"
    RC=$?
    no_signal subscriber "$RC"
    [ "$RC" -eq 1 ] || fail "the subscriber exited $RC, not 1"
    says "$T/subscriber.err" "mmap host slot memory (199098368 bytes): this process is out of memory"
    cli 20 next subscribe vm --json --frames 5 --wait-timeout 5s
    [ "$RC" -eq 0 ] || fail "the next subscriber exited $RC"
    kill -0 "$publisher" 2>/dev/null || fail "the publisher died"
    kill "$publisher"
}

# ff NAME LIMIT ARGS...: the patched ffmpeg, bounded; RC its exit code. ffmpeg
# exits with codes above 128 of its own (an AVERROR's low byte), so whether a
# signal ended it is asked of Python's subprocess (a negative code).
ff() {
    local name=$1 limit=$2
    shift 2
    RC=$(python3 - "$T/$name" "$limit" "$FFMPEG" -nostdin -hide_banner -nostats "$@" <<'PY'
import subprocess, sys
base, limit, command = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
with open(base + ".out", "w") as out, open(base + ".err", "w") as err:
    try:
        print(subprocess.run(command, stdout=out, stderr=err, timeout=limit).returncode)
    except subprocess.TimeoutExpired:
        print("timeout")
PY
)
    [ "$RC" != timeout ] || fail "$name did not end within $limit s"
    [ "$RC" -ge 0 ] || fail "$name died of signal $((-RC))"
}

# The publishing ffmpeg (the muxer) on a full /dev/shm: a clear error, no crash.
test_ffmpeg_muxer_full() {
    fill_shm
    ff muxer 20 -f lavfi -i testsrc=size=64x64:rate=25 -frames:v 10 -pix_fmt nv12 -f cuframes k
    [ "$RC" -ne 0 ] || fail "the muxer succeeded on a full /dev/shm"
    says "$T/muxer.err" "no space for /dev/shm/cuframes-k: 7424 bytes wanted"
    [ ! -e /dev/shm/cuframes-k ] || fail "/dev/shm/cuframes-k was left behind"
}

# A publishing ffmpeg, /dev/shm filling under it, and an ffmpeg subscriber
# (the input device) that joins after: every frame arrives.
test_ffmpeg_full_while_running() {
    bgrun muxer "$FFMPEG" -nostdin -hide_banner -nostats -re -f lavfi -i testsrc=size=64x64:rate=50 \
        -frames:v 150 -pix_fmt nv12 -f cuframes -wait_subscribers 1 -policy strict_wait k
    local muxer=$BGPID
    wait_socket k
    fill_shm
    ff device 20 -f cuframes -wait_timeout 5 -i k -f framemd5 "$T/device.md5"
    [ "$RC" -eq 0 ] || fail "the input device exited $RC"
    [ "$(grep -vc '^#' "$T/device.md5")" -ge 100 ] || fail "the input device got $(grep -vc '^#' "$T/device.md5") frames"
    wait "$muxer" || fail "the muxer exited $?"
}

# The input device on a sparse header: an error, no crash.
test_ffmpeg_device_sparse() {
    truncate -s 7424 /dev/shm/cuframes-sp
    fill_shm
    ff device 20 -f cuframes -wait_timeout 1 -i sp -frames:v 1 -f null -
    [ "$RC" -ne 0 ] || fail "the input device read a sparse header"
}

inside() {
    local name=$1
    mount -t tmpfs -o "size=$SHM_SIZE,mode=1777" tmpfs /dev/shm || fail "cannot mount a tmpfs on /dev/shm"
    T=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-exhaustion.XXXXXX")
    export CUFRAMES_RUNTIME_DIR="$T/run"
    mkdir -p "$CUFRAMES_RUNTIME_DIR"
    trap 'for g in "${STARTED[@]}"; do kill -KILL -- "-$g" 2>/dev/null; done; rm -rf "$T"' EXIT
    "$name"
    echo "PASS"
}

if [ "${1:-}" = --inside ]; then
    inside "$2"
    exit 0
fi

# ---- the runner ------------------------------------------------------------

CLI_TESTS=(test_full_before_publish test_full_while_running test_sparse_header test_running_exporter
    test_header_shrunk_under_publisher test_publisher_out_of_descriptors test_publisher_cannot_accept test_subscriber_slots
    test_subscriber_out_of_descriptors test_out_of_memory)
FFMPEG_TESTS=(test_ffmpeg_muxer_full test_ffmpeg_full_while_running test_ffmpeg_device_sparse)

can_isolate() {
    [ "$(id -u)" -eq 0 ] || { echo "needs root (unshare, mount)"; return 1; }
    unshare --pid --ipc --mount --fork --mount-proc sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>/dev/null ||
        { echo "unshare cannot make a mount namespace here"; return 1; }
    [ -x "$CLI" ] || { echo "no CLI at $CLI (cargo build first)"; return 1; }
}

selected() {
    [ ${#SELECTED[@]} -eq 0 ] && return 0
    local w
    for w in "${SELECTED[@]}"; do [[ $1 == *"$w"* ]] && return 0; done
    return 1
}

SELECTED=("$@")
passed=0 failed=0 skipped=0
why_not=$(can_isolate)
for name in "${CLI_TESTS[@]}" "${FFMPEG_TESTS[@]}"; do
    selected "$name" || continue
    reason=$why_not
    if [ -z "$reason" ] && [[ $name == test_ffmpeg_* ]] && [ ! -x "$FFMPEG" ]; then
        reason="no patched ffmpeg (FFMPEG)"
    fi
    if [ -n "$reason" ]; then
        echo "SKIP $name: $reason"
        skipped=$((skipped + 1))
        continue
    fi
    started=$SECONDS
    out=$(FFMPEG="$FFMPEG" CUFRAMES_BIN="$CLI" unshare --pid --ipc --mount --fork --mount-proc --kill-child \
        bash "$0" --inside "$name" 2>&1)
    if grep -qx PASS <<<"$out"; then
        echo "ok   $name ($((SECONDS - started)) s)"
        passed=$((passed + 1))
    else
        echo "FAIL $name ($((SECONDS - started)) s)"
        sed 's/^/     /' <<<"$out"
        failed=$((failed + 1))
    fi
done
echo "$LABEL: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
