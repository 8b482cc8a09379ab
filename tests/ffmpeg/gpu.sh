#!/usr/bin/env bash
# The FFmpeg half of the GPU proof (run by scripts/gpu-test.sh on the GPU machine):
# NVDEC/CUDA frames published in CUDA memory, read by another ffmpeg as CUDA frames
# (the mapped slots themselves), compared frame by frame (framemd5 after hwdownload)
# with a direct decode. Needs an NVIDIA GPU and driver; no CUDA toolkit.
#
#   tests/ffmpeg/gpu.sh [WORD...]     as tests/ffmpeg/run.sh
#
# With $OUT set, logs of the zero-copy evidence are copied there.
set -uo pipefail
cd "$(dirname "$0")/../.."

. tests/ffmpeg/lib.sh
SUMMARY_LABEL="ffmpeg $FFMPEG_LINE gpu tests"
OUT=${OUT:-}

if ! cuda_usable; then
    echo "no usable CUDA device:"
    sed 's/^/  /' "$WORK/cuda.err"
    result "a CUDA device is usable (every test needs one)" 0
    summary
    exit 1
fi

CLIP="$WORK/clip.mp4"
ff 120 -f lavfi -i "testsrc2=size=1920x1080:rate=30" -frames:v 300 -c:v libx264 \
    -preset ultrafast -pix_fmt yuv420p "$CLIP" 2>"$WORK/clip.err" || { show "$WORK/clip.err"; exit 1; }
NVDEC=(-hwaccel cuda -hwaccel_output_format cuda -i "$CLIP")
DOWN="hwdownload,format=nv12"

# pair NAME N REF... -- PUB... -- SUB...: a publisher ffmpeg (PUB, then -f cuframes
# strict_wait KEY) and a subscriber ffmpeg (SUB, where @KEY@ is the key) writing
# framemd5, compared with ffmpeg REF -f framemd5. Logs stay in $WORK/<name>.
pair() {
    local name=$1 n=$2 t=$SECONDS ok=1
    shift 2
    local ref=() pub=() sub=()
    while [ "$1" != -- ]; do ref+=("$1"); shift; done
    shift
    while [ "$1" != -- ]; do pub+=("$1"); shift; done
    shift
    newkey
    local a
    for a in "$@"; do sub+=("${a//@KEY@/$KEY}"); done
    PAIRDIR="$WORK/$(echo "$name" | tr -c 'a-z0-9\n' '_')"
    local d=$PAIRDIR
    mkdir -p "$d"
    ff 120 "${ref[@]}" -f framemd5 - >"$d/ref.md5" 2>"$d/ref.err" || { echo "  reference failed"; ok=0; }
    bg 120 /dev/null "$d/pub.err" -loglevel verbose "${pub[@]}" -f cuframes -policy strict_wait \
        -wait_subscribers 1 "$KEY"
    local p=$BGPID
    ff 120 "${sub[@]}" -f framemd5 - >"$d/sub.md5" 2>"$d/sub.err" || { echo "  subscriber failed"; ok=0; }
    waitrc $p || { echo "  publisher failed"; ok=0; }
    same_frames "$name" "$d/ref.md5" "$d/sub.md5" "$n" || ok=0
    [ $ok = 1 ] || show "$d/ref.err" "$d/pub.err" "$d/sub.err"
    PAIROK=$ok
    result "$name" $ok "($((SECONDS - t)) s)"
}

# The publisher chose CUDA memory, and the subscriber got CUDA frames that are the
# mapped slots (debug log: one address per ring slot, 16 by default).
zero_copy_evidence() {
    local d=$1 label=$2
    grep -q "CUDA memory" "$d/pub.err" || { echo "  publisher did not use CUDA memory"; return 1; }
    local slots
    slots=$(grep -o 'CUDA 0x[0-9a-f]*, the shared slot' "$d/sub.err" | awk '{ print $2 }' | sort -u | wc -l)
    local frames
    frames=$(grep -c 'CUDA 0x[0-9a-f]*, the shared slot' "$d/sub.err")
    echo "     $label: $frames CUDA frames handed out from $slots distinct slot addresses"
    [ -n "$OUT" ] && grep 'frame seq' "$d/sub.err" | head -n 12 >"$OUT/zero-copy-$label.txt"
    [ "$frames" -gt 0 ] && [ "$slots" -ge 1 ] && [ "$slots" -le 16 ]
}

selected nvdec && {
    pair "NVDEC -> cuframes (CUDA) -> hwdownload" 300 \
        -i "$CLIP" -pix_fmt nv12 -- \
        "${NVDEC[@]}" -- \
        -loglevel debug -f cuframes -i @KEY@ -vf "$DOWN"
    [ "$PAIROK" = 1 ] && { zero_copy_evidence "$PAIRDIR" nvdec || result "zero-copy: leases are the slots" 0; }
}

selected cuvid && pair "h264_cuvid -> cuframes (CUDA) -> hwdownload" 300 \
    -i "$CLIP" -pix_fmt nv12 -- \
    -hwaccel cuda -hwaccel_output_format cuda -c:v h264_cuvid -i "$CLIP" -- \
    -loglevel verbose -f cuframes -i @KEY@ -vf "$DOWN"

selected scale && pair "NVDEC -> cuframes -> scale_cuda -> hwdownload" 300 \
    "${NVDEC[@]}" -vf "scale_cuda=960:540,$DOWN" -- \
    "${NVDEC[@]}" -- \
    -f cuframes -i @KEY@ -vf "scale_cuda=960:540,$DOWN"

selected filter && pair "NVDEC -> cuframes source filter -> hwdownload" 300 \
    -i "$CLIP" -pix_fmt nv12 -- \
    "${NVDEC[@]}" -- \
    -filter_complex "cuframes=key=@KEY@,$DOWN"

selected copy && pair "NVDEC -> cuframes -> copy=always (device copy)" 300 \
    -i "$CLIP" -pix_fmt nv12 -- \
    "${NVDEC[@]}" -- \
    -copy always -f cuframes -i @KEY@ -vf "$DOWN"

selected hwupload && pair "hwupload_cuda frames -> cuframes (CUDA)" 100 \
    -f lavfi -i "testsrc2=size=1280x720:rate=25" -frames:v 100 -pix_fmt nv12 -- \
    -f lavfi -i "testsrc2=size=1280x720:rate=25" -frames:v 100 -vf "format=nv12,hwupload_cuda" -- \
    -f cuframes -i @KEY@ -vf "$DOWN"

selected host && pair "NVDEC -> cuframes memory=host (downloaded)" 300 \
    -i "$CLIP" -pix_fmt nv12 -- \
    "${NVDEC[@]}" -memory host -- \
    -f cuframes -i @KEY@

# Two subscribers of one CUDA publisher at once: one on the slots, one copying.
test_two() {
    local d="$WORK/two" t=$SECONDS ok=1
    mkdir -p "$d"
    newkey
    ff 120 -i "$CLIP" -pix_fmt nv12 -f framemd5 - >"$d/ref.md5" 2>"$d/ref.err"
    bg 120 /dev/null "$d/pub.err" "${NVDEC[@]}" -f cuframes -policy strict_wait -wait_subscribers 2 "$KEY"
    local p=$BGPID
    bg 120 "$d/a.md5" "$d/a.err" -f cuframes -i "$KEY" -vf "$DOWN" -f framemd5 -
    local a=$BGPID
    ff 120 -copy always -f cuframes -i "$KEY" -vf "$DOWN" -f framemd5 - >"$d/b.md5" 2>"$d/b.err" || ok=0
    waitrc $a || ok=0
    waitrc $p || ok=0
    same_frames "lease" "$d/ref.md5" "$d/a.md5" 300 || ok=0
    same_frames "copy" "$d/ref.md5" "$d/b.md5" 300 || ok=0
    [ $ok = 1 ] || show "$d/pub.err" "$d/a.err" "$d/b.err"
    result "two CUDA subscribers at once" $ok "($((SECONDS - t)) s)"
}
selected two && test_two

# kill -9 of a CUDA publisher: the subscriber with reconnect resumes on a new one.
test_reconnect() {
    local d="$WORK/reconnect" t=$SECONDS ok=1
    mkdir -p "$d"
    newkey
    bg 60 /dev/null "$d/pub1.err" -re "${NVDEC[@]}" -f cuframes "$KEY"
    local p1=$BGPID
    wait_published || ok=0
    bg 60 "$d/sub.md5" "$d/sub.err" -f cuframes -reconnect 1 -reconnect_timeout 5 -i "$KEY" \
        -vf "$DOWN" -flush_packets 1 -f framemd5 -
    local s=$BGPID
    wait_for "frames of the first publisher" 30 has_frames "$d/sub.md5" 10 || ok=0
    kill -KILL -- "-$p1"
    wait_for "the subscriber to wait for a new publisher" 10 logged "$d/sub.err" "went away; waiting up to" ||
        ok=0
    bg 60 /dev/null "$d/pub2.err" "${NVDEC[@]}" -frames:v 60 -f cuframes -policy strict_wait \
        -wait_subscribers 1 "$KEY"
    local p2=$BGPID
    waitrc $p2
    waitrc $s || { echo "  subscriber failed"; ok=0; }
    local n
    n=$(md5s "$d/sub.md5" | wc -l)
    grep -q "Resumed" "$d/sub.err" || { echo "  no resume logged"; ok=0; }
    [ "$n" -gt 60 ] || { echo "  only $n frames"; ok=0; }
    [ $ok = 1 ] || show "$d/sub.err" "$d/pub2.err"
    result "kill -9 CUDA publisher: reconnect resumes" $ok "($n frames, $((SECONDS - t)) s)"
}
selected reconnect && test_reconnect

# Subscribers started before their publisher make their CUDA context while they wait,
# and that time does not count against their timeout (the input device and the source
# filter, `-wait_timeout 2`, the warm-up held 4 s longer, the NVDEC publisher 3 s later);
# the warmed context then imports the CUDA slots, frame-exact.
test_warm_wait() {
    local d="$WORK/warmwait" t=$SECONDS ok=1 name
    mkdir -p "$d"
    newkey
    ff 120 -i "$CLIP" -pix_fmt nv12 -f framemd5 - >"$d/ref.md5" 2>"$d/ref.err"
    local -A src=([dev]="-f cuframes -wait_timeout 2 -i $KEY -vf $DOWN"
        [filter]="-filter_complex cuframes=key=$KEY:wait_timeout=2,$DOWN")
    local pids=()
    for name in dev filter; do
        # shellcheck disable=SC2086 # the source's words
        CUFRAMES_TEST_STALL_AT=cuda-warm-up:4000 bg 120 "$d/$name.md5" "$d/$name.err" \
            -loglevel debug ${src[$name]} -f framemd5 -
        pids+=("$BGPID")
    done
    sleep 3
    for name in 0 1; do
        kill -0 "${pids[$name]}" 2>/dev/null || { echo "  subscriber $name gave up while making its context"; ok=0; }
    done
    bg 120 /dev/null "$d/pub.err" "${NVDEC[@]}" -f cuframes -policy strict_wait -wait_subscribers 2 "$KEY"
    local p=$BGPID
    waitrc "${pids[0]}" || { echo "  the input device failed"; ok=0; }
    waitrc "${pids[1]}" || { echo "  the source filter failed"; ok=0; }
    waitrc $p || { echo "  publisher failed"; ok=0; }
    same_frames "input device" "$d/ref.md5" "$d/dev.md5" 300 || ok=0
    same_frames "source filter" "$d/ref.md5" "$d/filter.md5" 300 || ok=0
    # The filter's frames went through hwdownload, which takes CUDA frames only.
    grep -q 'CUDA 0x[0-9a-f]*, the shared slot' "$d/dev.err" ||
        { echo "  input device: no CUDA frames from the shared slots"; ok=0; }
    [ $ok = 1 ] || show "$d/pub.err" "$d/dev.err" "$d/filter.err"
    result "subscribers first: the CUDA warm-up is left out of the timeout, then the slots import" $ok \
        "(input device and source filter, $((SECONDS - t)) s)"
}
selected warmwait && test_warm_wait

# A subscriber slower between HELLO and SUBSCRIBE than the publisher's handshake bound
# (the test hook's 2 s stall after the slots are mapped, first handshake only, against
# the CLI's 1 s --handshake-timeout) connects again at once, its CUDA context kept
# (D23): the input device and the source filter, with a 1 s wait_timeout, get every
# frame as CUDA frames, equal to a third subscriber's without the stall.
test_slow_subscribe() {
    local d="$WORK/slowsub" n=60 t=$SECONDS ok=1 name
    local cli=${CUFRAMES_BIN:-target/release/cuframes}
    mkdir -p "$d"
    [ -x "$cli" ] || { result "slow subscribe on CUDA: connects again, context kept" 0 "(no cuframes CLI at $cli: set CUFRAMES_BIN)"; return; }
    newkey
    setsid timeout -k 2 120 "$cli" publish "$KEY" --memory cuda --format nv12 --size 1280x720 --fps 30 \
        --frames $n --policy strict-wait --wait-subscribers 3 --handshake-timeout 1s --quiet >/dev/null 2>"$d/pub.err" &
    local p=$!
    GROUPS_STARTED+=("$p")
    # The stalled ones wait 1 s at most: for a publisher that is there.
    wait_published || { echo "  the publisher did not start within 5 s"; ok=0; }
    bg 120 "$d/ref.md5" "$d/ref.err" -f cuframes -i "$KEY" -vf "$DOWN" -f framemd5 -
    local pids=("$BGPID")
    local -A src=([dev]="-f cuframes -wait_timeout 1 -i $KEY -vf $DOWN"
        [filter]="-filter_complex cuframes=key=$KEY:wait_timeout=1,$DOWN")
    for name in dev filter; do
        # shellcheck disable=SC2086 # the source's words
        CUFRAMES_TEST_STALL_AT=sub-context:2000 bg 120 "$d/$name.md5" "$d/$name.err" \
            ${src[$name]} -f framemd5 -
        pids+=("$BGPID")
    done
    waitrc "${pids[0]}" || { echo "  the reference subscriber failed"; ok=0; }
    waitrc "${pids[1]}" || { echo "  the input device failed"; ok=0; }
    waitrc "${pids[2]}" || { echo "  the source filter failed"; ok=0; }
    waitrc $p || { echo "  publisher failed"; ok=0; }
    slow_subscribers_agree "$d" $n || ok=0
    [ $ok = 1 ] || show "$d/pub.err" "$d/ref.err" "$d/dev.err" "$d/filter.err"
    result "slow subscribe on CUDA: connects again, context kept" $ok \
        "(input device and source filter, $((SECONDS - t)) s)"
}
selected slowsub && test_slow_subscribe

# Containers (issue 13) are namespaces: each process below runs in its own PID,
# IPC and mount namespaces with its own tmpfs on /dev/shm, sharing only the
# runtime directory with the others, as containers that share one volume.
# ibg LIMIT OUT ERR ARGS...: bg, isolated so.
ibg() {
    local limit=$1 out=$2 err=$3
    shift 3
    setsid timeout -k 2 "$limit" unshare --pid --ipc --mount --fork --mount-proc --kill-child -- \
        sh -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$0" "$@"' \
        "$FFMPEG" -nostdin -hide_banner -nostats "$@" >"$out" 2>"$err" &
    BGPID=$!
    GROUPS_STARTED+=("$BGPID")
}

test_containers() {
    local d="$WORK/containers" t=$SECONDS ok=1
    mkdir -p "$d"
    if ! unshare --pid --ipc --mount --fork --mount-proc -- sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>"$d/unshare.err"; then
        skipped "containers (sibling namespaces)" "unshare failed: $(head -c 200 "$d/unshare.err")"
        return
    fi
    ff 120 "${NVDEC[@]}" -vf "$DOWN" -f framemd5 - >"$d/ref.md5" 2>"$d/ref.err" || ok=0
    ff 120 "${NVDEC[@]}" -vf "scale_cuda=960:540,$DOWN" -f framemd5 - >"$d/ref-scale.md5" 2>"$d/ref-scale.err" || ok=0
    # NVDEC publisher and two CUDA subscribers (one through scale_cuda), default options.
    newkey
    ibg 120 /dev/null "$d/pub.err" -loglevel verbose "${NVDEC[@]}" -f cuframes -policy strict_wait \
        -wait_subscribers 2 "$KEY"
    local p=$BGPID
    ibg 120 "$d/a.md5" "$d/a.err" -f cuframes -timeout 30 -i "$KEY" -vf "$DOWN" -f framemd5 -
    local a=$BGPID
    ibg 120 "$d/b.md5" "$d/b.err" -f cuframes -timeout 30 -i "$KEY" -vf "scale_cuda=960:540,$DOWN" -f framemd5 -
    local b=$BGPID
    waitrc $a || { echo "  subscriber (download) failed"; ok=0; }
    waitrc $b || { echo "  subscriber (scale_cuda) failed"; ok=0; }
    waitrc $p || { echo "  publisher failed"; ok=0; }
    same_frames "download" "$d/ref.md5" "$d/a.md5" 300 || ok=0
    same_frames "scale_cuda" "$d/ref-scale.md5" "$d/b.md5" 300 || ok=0
    grep -q "CUDA memory shared as file descriptors" "$d/pub.err" || { echo "  the publisher did not share fds"; ok=0; }
    [ -n "$OUT" ] && mkdir -p "$OUT/containers" && cp "$d"/pub.err "$d"/a.err "$d"/b.err "$OUT/containers/" 2>/dev/null
    [ $ok = 1 ] || show "$d/pub.err" "$d/a.err" "$d/b.err"
    result "containers: NVDEC -> 2 CUDA subscribers, volume only" $ok "($((SECONDS - t)) s)"

    # 4K: a 90-frame clip through the same two containers, framemd5-exact.
    t=$SECONDS ok=1
    local clip4k="$d/clip-4k.mp4"
    ff 120 -f lavfi -i "testsrc2=size=3840x2160:rate=30" -frames:v 90 -c:v libx264 -preset ultrafast \
        -pix_fmt yuv420p "$clip4k" 2>"$d/clip-4k.err" || ok=0
    ff 120 -hwaccel cuda -hwaccel_output_format cuda -i "$clip4k" -vf "$DOWN" -f framemd5 - \
        >"$d/ref-4k.md5" 2>"$d/ref-4k.err" || ok=0
    newkey
    ibg 120 /dev/null "$d/pub-4k.err" -loglevel verbose -hwaccel cuda -hwaccel_output_format cuda -i "$clip4k" \
        -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local p4=$BGPID
    ibg 120 "$d/sub-4k.md5" "$d/sub-4k.err" -f cuframes -timeout 30 -i "$KEY" -vf "$DOWN" -f framemd5 -
    local s4=$BGPID
    waitrc $s4 || { echo "  4K subscriber failed"; ok=0; }
    waitrc $p4 || { echo "  4K publisher failed"; ok=0; }
    same_frames "4K" "$d/ref-4k.md5" "$d/sub-4k.md5" 90 || ok=0
    grep -q "CUDA memory shared as file descriptors" "$d/pub-4k.err" || { echo "  the publisher did not share fds"; ok=0; }
    [ $ok = 1 ] || show "$d/pub-4k.err" "$d/sub-4k.err"
    result "containers: NVDEC 4K -> CUDA subscriber, volume only" $ok "($((SECONDS - t)) s)"

    # kill -9 of the isolated publisher: the isolated subscriber follows a new one.
    t=$SECONDS ok=1
    newkey
    ibg 60 /dev/null "$d/pub1.err" -re "${NVDEC[@]}" -f cuframes "$KEY"
    local p1=$BGPID
    wait_published || ok=0
    ibg 60 "$d/r.md5" "$d/r.err" -f cuframes -reconnect 1 -reconnect_timeout 10 -i "$KEY" -vf "$DOWN" \
        -flush_packets 1 -f framemd5 -
    local s=$BGPID
    wait_for "frames of the first publisher" 30 has_frames "$d/r.md5" 10 || ok=0
    kill -KILL -- "-$p1"
    wait_for "the subscriber to wait for a new publisher" 10 logged "$d/r.err" "went away; waiting up to" ||
        ok=0
    ibg 60 /dev/null "$d/pub2.err" "${NVDEC[@]}" -frames:v 60 -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local p2=$BGPID
    waitrc $p2 || { echo "  second publisher failed"; ok=0; }
    waitrc $s || { echo "  subscriber failed"; ok=0; }
    local n
    n=$(md5s "$d/r.md5" | wc -l)
    grep -q "Resumed" "$d/r.err" || { echo "  no resume logged"; ok=0; }
    [ "$n" -gt 60 ] || { echo "  only $n frames"; ok=0; }
    [ $ok = 1 ] || show "$d/r.err" "$d/pub2.err"
    result "containers: kill -9 publisher, subscriber follows" $ok "($n frames, $((SECONDS - t)) s)"

    # cuda_share=ipc between containers: a clear error, not the driver's code.
    t=$SECONDS ok=1
    newkey
    ibg 60 /dev/null "$d/ipc-pub.err" -re "${NVDEC[@]}" -f cuframes -cuda_share ipc "$KEY"
    local pi=$BGPID
    wait_published || ok=0
    ibg 60 /dev/null "$d/ipc-sub.err" -f cuframes -timeout 10 -i "$KEY" -f null -
    local si=$BGPID
    if waitrc $si; then echo "  the subscriber of an ipc publisher in another namespace succeeded?"; ok=0; fi
    kill -KILL -- "-$pi" 2>/dev/null
    grep -q "another PID namespace" "$d/ipc-sub.err" || { echo "  no clear error"; ok=0; }
    grep -h "another PID namespace" "$d/ipc-sub.err" | head -n 1 | cut -c1-300 | sed 's/^/     /'
    [ $ok = 1 ] || show "$d/ipc-sub.err"
    result "containers: cuda_share=ipc fails clearly" $ok "($((SECONDS - t)) s)"
}
selected containers && test_containers

# A busy host (issue 12): 8 NVDEC publishers x 2 CUDA subscribers, all started at
# once with default options (strict_wait so that every frame must arrive); one
# subscriber of each stream downloads every frame, the other runs a filter that
# holds frames (yadif_cuda: 3, thumbnail_cuda: 100) on the ring of 4. Every output
# is frame-exact against the same filters on a direct decode; nobody is dropped.
test_many() {
    local d="$WORK/many" t=$SECONDS ok=1 n=${MANY_STREAMS:-8} i
    mkdir -p "$d"
    local holders=("yadif_cuda" "thumbnail_cuda")
    ff 120 "${NVDEC[@]}" -vf "$DOWN" -f framemd5 - >"$d/ref-a.md5" 2>"$d/ref-a.err" || ok=0
    for i in 0 1; do
        ff 120 "${NVDEC[@]}" -vf "${holders[$i]},$DOWN" -f framemd5 - >"$d/ref-$i.md5" 2>"$d/ref-$i.err" || ok=0
    done
    local pids=() keys=()
    for i in $(seq 0 $((n - 1))); do
        newkey
        keys+=("$KEY")
        bg 180 /dev/null "$d/pub$i.err" "${NVDEC[@]}" -f cuframes -policy strict_wait -wait_subscribers 2 "$KEY"
        pids+=($BGPID)
        bg 180 "$d/sub$i-a.md5" "$d/sub$i-a.err" -xerror -f cuframes -i "$KEY" -vf "$DOWN" -f framemd5 -
        pids+=($BGPID)
        bg 180 "$d/sub$i-b.md5" "$d/sub$i-b.err" -xerror -loglevel verbose -f cuframes -i "$KEY" \
            -vf "${holders[$((i % 2))]},$DOWN" -f framemd5 -
        pids+=($BGPID)
    done
    local failed=0
    for i in "${pids[@]}"; do waitrc "$i" || failed=$((failed + 1)); done
    [ $failed = 0 ] || { echo "  $failed of ${#pids[@]} processes failed"; ok=0; }
    for i in $(seq 0 $((n - 1))); do
        same_frames "stream $i download" "$d/ref-a.md5" "$d/sub$i-a.md5" 300 || ok=0
        same_frames "stream $i ${holders[$((i % 2))]}" "$d/ref-$((i % 2)).md5" "$d/sub$i-b.md5" || ok=0
    done
    local dropped
    dropped=$(cat "$d"/sub*.err | grep -c "dropped by publisher\|Lost [0-9]")
    [ "$dropped" = 0 ] || { echo "  $dropped subscribers dropped or losing frames"; ok=0; }
    local copies
    copies=$(cat "$d"/sub*-b.err | sed -n 's/.*(\([0-9]*\) as private copies).*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
    [ -n "$OUT" ] && mkdir -p "$OUT/many" && cp "$d"/pub0.err "$d"/sub0-*.err "$d"/sub1-*.err "$OUT/many/" 2>/dev/null
    [ $ok = 1 ] || show "$d/pub0.err" "$d/sub0-a.err" "$d/sub0-b.err" "$d/sub1-b.err"
    result "busy host: $n NVDEC publishers x 2 (yadif_cuda, thumbnail_cuda) at once" $ok \
        "($((3 * n)) processes, $copies frames copied by the holding subscribers, $((SECONDS - t)) s)"
}
selected many && test_many


# PCIe traffic (nvidia-smi dmon, MB/s device->host = txpci) while NVDEC frames go
# through cuframes to a subscriber that keeps them on the GPU (scale_cuda, null), and
# while one downloads them: the zero-copy run must move next to nothing to the host.
pcie_run() {
    local name=$1
    shift
    local d="$WORK/pcie-$name"
    mkdir -p "$d"
    newkey
    nvidia-smi dmon -s t -d 1 >"$d/dmon.txt" 2>&1 &
    local mon=$!
    sleep 1
    bg 120 /dev/null "$d/pub.err" "${LONG[@]}" -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local p=$BGPID
    ff 120 -f cuframes -i "$KEY" "$@" -f null - 2>"$d/sub.err"
    waitrc $p
    kill $mon 2>/dev/null
    wait $mon 2>/dev/null
    [ -n "$OUT" ] && cp "$d/dmon.txt" "$OUT/pcie-$name.txt"
    # mean txpci over the busy seconds (column 3: gpu, rxpci, txpci)
    awk '!/^#/ && $3 ~ /^[0-9]+$/ { n++; s += $3 } END { if (n) printf "%d", s / n; else print "NA" }' "$d/dmon.txt"
}
test_pcie() {
    LONG=(-hwaccel cuda -hwaccel_output_format cuda -i "$WORK/long.mp4")
    ff 120 -f lavfi -i "testsrc2=size=1920x1080:rate=30" -frames:v 1500 -c:v libx264 -preset ultrafast \
        -pix_fmt yuv420p "$WORK/long.mp4" 2>"$WORK/long.err" || {
        show "$WORK/long.err"
        result "PCIe: the zero-copy path moves no frames to the host" 0 "(cannot make the clip)"
        return 0
    }
    local zero down
    zero=$(pcie_run zero-copy -vf "scale_cuda=960:540")
    down=$(pcie_run download -vf "hwdownload,format=nv12")
    echo "     PCIe device->host (txpci, MB/s mean): zero-copy subscriber $zero, downloading subscriber $down"
    if [ "$zero" = NA ] || [ "$down" = NA ]; then
        skipped "PCIe: the zero-copy path moves no frames to the host" "(nvidia-smi dmon gives no PCIe counters here)"
        return 0
    fi
    result "PCIe: the zero-copy path moves no frames to the host" \
        $([ $((zero * 10)) -lt "$down" ] && echo 1 || echo 0) "($zero vs $down MB/s)"
}

# No device-to-host copy on the zero-copy path, counted: CUPTI's activity records
# of every memory copy, by direction, in each process (scripts/gpu/memcpy-count.c,
# loaded by the driver through CUDA_INJECTION64_PATH). The same count on a
# subscriber that downloads its frames shows the counter sees such copies.
# Without the counter library: nsys when present, else PCIe traffic.
counted() { # LOG, command...: runs the command with the copy counter injected
    local log=$1
    shift
    CUDA_INJECTION64_PATH=$MEMCPY_COUNTER CUFRAMES_MEMCPY_LOG=$log "$@"
}
copies() { # LOG DIRECTION: "count/bytes" of the last process logged, or the error
    awk -v want="$2" '/^memcpy-count/ { line = $0 } END {
        if (line == "") { print "none"; exit }
        n = split(line, f, " ")
        for (i = 1; i <= n; i++) { split(f[i], kv, "="); if (kv[1] == want || kv[1] == "error") { print kv[2]; exit } }
        print "none" }' "$1"
}
copy_run() { # NAME FILTER: NVDEC publisher -> cuframes -> subscriber -vf FILTER -f null
    local d="$WORK/copies-$1"
    mkdir -p "$d"
    rm -f "$d/pub.count" "$d/sub.count"
    newkey
    export CUDA_INJECTION64_PATH=$MEMCPY_COUNTER CUFRAMES_MEMCPY_LOG=$d/pub.count
    bg 120 /dev/null "$d/pub.err" "${NVDEC[@]}" -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local p=$BGPID
    export CUFRAMES_MEMCPY_LOG=$d/sub.count
    ff 120 -f cuframes -i "$KEY" -vf "$2" -f null - 2>"$d/sub.err" || show "$d/sub.err"
    unset CUDA_INJECTION64_PATH CUFRAMES_MEMCPY_LOG
    waitrc $p
    if [ -n "$OUT" ]; then
        cat "$d/pub.count" "$d/sub.count" >"$OUT/memcpy-$1.txt" 2>&1
    fi
}
test_trace() {
    local d="$WORK/trace"
    mkdir -p "$d"
    if [ -n "${MEMCPY_COUNTER:-}" ] && [ -r "$MEMCPY_COUNTER" ]; then
        copy_run zero-copy "scale_cuda=960:540"
        copy_run download "$DOWN"
        local zero_sub zero_pub down_sub frame_bytes
        zero_sub=$(copies "$WORK/copies-zero-copy/sub.count" DtoH)
        zero_pub=$(copies "$WORK/copies-zero-copy/pub.count" DtoH)
        down_sub=$(copies "$WORK/copies-download/sub.count" DtoH)
        echo "     copies device->host (count/bytes): zero-copy subscriber $zero_sub, its publisher $zero_pub," \
            "downloading subscriber $down_sub"
        echo "     all directions: $(cat "$WORK/copies-zero-copy/sub.count" "$WORK/copies-zero-copy/pub.count" \
            "$WORK/copies-download/sub.count" 2>/dev/null | tr '\n' ';')"
        case "$zero_sub$zero_pub$down_sub" in
        *none* | *[a-zA-Z]*)
            echo "     (the copy counter did not report; see memcpy-*.txt)"
            result "counter: no device-to-host copy on the zero-copy path" 0 "(no count)"
            return 0
            ;;
        esac
        # 300 NV12 1080p frames downloaded: at least 300 copies of >= 3 MB each.
        frame_bytes=$((1920 * 1080 * 3 / 2))
        local ok=1
        [ "${zero_sub%%/*}" = 0 ] || ok=0
        [ "${zero_pub%%/*}" = 0 ] || ok=0
        [ "${down_sub##*/}" -ge $((300 * frame_bytes)) ] || { echo "  the counter missed the downloads"; ok=0; }
        result "counter: no device-to-host copy on the zero-copy path" $ok \
            "(subscriber $zero_sub, publisher $zero_pub; downloading subscriber $down_sub)"
        return 0
    fi
    if ! command -v nsys >/dev/null 2>&1; then
        echo "     trace: no copy counter and no nsys on this machine; measuring PCIe traffic instead"
        test_pcie
        return 0
    fi
    newkey
    bg 120 /dev/null "$d/pub.err" "${NVDEC[@]}" -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local p=$BGPID
    timeout 120 nsys profile -t cuda --stats=true -o "$d/sub" -f true \
        "$FFMPEG" -nostdin -hide_banner -f cuframes -i "$KEY" -vf "scale_cuda=960:540" -f null - \
        >"$d/nsys.txt" 2>&1
    waitrc $p
    [ -n "$OUT" ] && cp "$d/nsys.txt" "$OUT/nsys-subscriber.txt"
    local dtoh
    dtoh=$(grep -c "Device-to-Host" "$d/nsys.txt")
    result "trace: no device-to-host copy in the subscriber" $([ "$dtoh" = 0 ] && echo 1 || echo 0) \
        "(nsys lines naming Device-to-Host: $dtoh)"
}
selected trace && test_trace

# ---------------------------------------------------------------- NVDEC formats
# Every format NVDEC outputs crosses frame-exact: HEVC 10/12-bit 4:2:0 (p010, p016)
# and 4:4:4 at 8, 10 and 12 bits (yuv444p, yuv444p16), compared with a direct NVDEC
# decode downloaded the same way. The clips need libx265 (scripts/gpu/make-clips.sh,
# staged in $CLIPS).
CLIPS=${CLIPS:-}
nvdec_format() {
    local clip=$1 fmt=$2
    if [ ! -f "$CLIPS/$clip" ]; then
        skipped "NVDEC $clip -> $fmt" "no clip (\$CLIPS; scripts/gpu/make-clips.sh)"
        return
    fi
    pair "NVDEC $clip ($fmt) -> cuframes -> hwdownload" 60 \
        -hwaccel cuda -hwaccel_output_format cuda -i "$CLIPS/$clip" -vf "hwdownload,format=$fmt" -- \
        -hwaccel cuda -hwaccel_output_format cuda -i "$CLIPS/$clip" -- \
        -f cuframes -i @KEY@ -vf "hwdownload,format=$fmt"
}
# nvdec_fmt LINE CLIP: the format NVDEC gives for CLIP in FFmpeg LINE (8.0 changed
# 12-bit 4:2:0 and 10/12-bit 4:4:4 to formats that say where the bits are).
nvdec_fmt() {
    case $1:$2 in
        *:hevc-420-10.mkv) echo p010le ;;
        7.*:hevc-420-12.mkv) echo p016le ;;
        *:hevc-420-12.mkv) echo p012le ;;
        *:hevc-444-8.mkv) echo yuv444p ;;
        7.*:hevc-444-1?.mkv) echo yuv444p16le ;;
        *:hevc-444-10.mkv) echo yuv444p10msble ;;
        *:hevc-444-12.mkv) echo yuv444p12msble ;;
    esac
}
# read_fmt LINE FMT: the format a subscriber of LINE reads FMT as (protocol notes
# D36: FFmpeg 7.1's CUDA frames lack p012 and the MSB formats: the same bytes as
# p016le and yuv444p16le).
read_fmt() {
    case $1:$2 in
        7.*:p012le) echo p016le ;;
        7.*:yuv444p1?msble) echo yuv444p16le ;;
        *) echo "$2" ;;
    esac
}
selected formats && {
    for clip in hevc-420-10.mkv hevc-420-12.mkv hevc-444-8.mkv hevc-444-10.mkv hevc-444-12.mkv; do
        nvdec_format "$clip" "$(nvdec_fmt "$FFMPEG_LINE" "$clip")"
    done
}

# Mixed FFmpeg lines on the GPU (FFMPEG_OTHER: another line's ffmpeg): NVDEC frames
# published by one line's ffmpeg in CUDA memory, read as CUDA frames by the other's,
# both ways, frame-exact (MD5 of the bytes) against the publisher's own decode.
test_mixed_gpu() {
    local other=$1 t=$SECONDS ok=1 clip from to pubfmt subfmt d
    local other_line
    other_line=$("$other" -hide_banner -version | sed -nE '1s/^ffmpeg version n?([0-9]+\.[0-9]+).*/\1/p')
    for clip in hevc-420-10.mkv hevc-420-12.mkv hevc-444-10.mkv hevc-444-12.mkv; do
        [ -f "$CLIPS/$clip" ] || { skipped "mixed lines: $clip" "no clip"; continue; }
        for from in this other; do
            local pub_ff=$FFMPEG pub_line=$FFMPEG_LINE sub_ff=$other sub_line=$other_line
            [ $from = other ] && { pub_ff=$other; pub_line=$other_line; sub_ff=$FFMPEG; sub_line=$FFMPEG_LINE; }
            pubfmt=$(nvdec_fmt "$pub_line" "$clip")
            subfmt=$(read_fmt "$sub_line" "$pubfmt")
            newkey
            d="$WORK/mixed-$clip-$pub_line"
            mkdir -p "$d"
            FFMPEG=$pub_ff ff 120 -hwaccel cuda -hwaccel_output_format cuda -i "$CLIPS/$clip" \
                -vf "hwdownload,format=$pubfmt" -f framemd5 - >"$d/ref.md5" 2>"$d/ref.err"
            FFMPEG=$pub_ff bg 120 /dev/null "$d/pub.err" -hwaccel cuda -hwaccel_output_format cuda \
                -i "$CLIPS/$clip" -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
            local p=$BGPID
            FFMPEG=$sub_ff ff 120 -v verbose -f cuframes -i "$KEY" -vf "hwdownload,format=$subfmt" \
                -f framemd5 - >"$d/sub.md5" 2>"$d/sub.err" || { echo "  $clip $pub_line -> $sub_line: subscriber failed"; ok=0; }
            waitrc $p || { echo "  $clip $pub_line -> $sub_line: publisher failed"; ok=0; }
            if same_frames "$clip $pub_line ($pubfmt) -> $sub_line ($subfmt)" "$d/ref.md5" "$d/sub.md5" 60; then
                echo "     $clip: $pub_line $pubfmt -> $sub_line $subfmt, 60 frames exact"
            else
                ok=0; show "$d/pub.err" "$d/sub.err"
            fi
        done
    done
    result "mixed lines on the GPU: $FFMPEG_LINE <-> $other_line" $ok "($((SECONDS - t)) s)"
}
selected mixed && {
    if [ -n "${FFMPEG_OTHER:-}" ]; then
        test_mixed_gpu "$(cd "$(dirname "$FFMPEG_OTHER")" && pwd)/$(basename "$FFMPEG_OTHER")"
    else
        skipped "mixed lines on the GPU" "(FFMPEG_OTHER is not set)"
    fi
}

# ---------------------------------------------------------------- frame properties
# What NVDEC reports for each frame besides its pixels (colour description, aspect
# ratio, field order, duration, side data: HDR mastering display, content light level,
# user-data SEI) arrives at a CUDA subscriber unchanged: showinfo's lines of a direct
# NVDEC decode and of the subscriber, compared line by line.
props_of() {
    local fields='s/.* n: *\([0-9]*\) .*duration_time:\([^ ]*\) .*fmt:\([^ ]*\) cl:\([^ ]*\) sar:\([^ ]*\) s:\([^ ]*\) i:\([^ ]*\) .*/n=\1 dur=\2 fmt=\3 cl=\4 sar=\5 s=\6 i=\7/p'
    # Durations to the millisecond: Matroska stores 33 ms where the publisher's
    # frame rate gives 33.333 ms.
    { sed -n "$fields" "$1" | awk '{ sub(/^dur=/, "", $2); $2 = sprintf("dur=%.3f", $2); print }'; grep -o 'color_range:.*\|side data - .*\|UUID=.*\|User Data=.*' "$1"; } >"$2"
}
nvdec_props() {
    local clip=$1 fmt=$2 t=$SECONDS ok=1
    local d="$WORK/props-$clip"
    if [ ! -f "$CLIPS/$clip" ]; then
        skipped "props: NVDEC $clip" "no clip (\$CLIPS; scripts/gpu/make-clips.sh)"
        return
    fi
    mkdir -p "$d"
    # showinfo cannot read CUDA frames; hwdownload keeps properties and side data.
    ff 60 -hwaccel cuda -hwaccel_output_format cuda -i "$CLIPS/$clip" -vf "hwdownload,format=$fmt,showinfo" -f null - \
        2>"$d/ref.err" || { echo "  direct decode failed"; ok=0; }
    newkey
    bg 60 /dev/null "$d/pub.err" -hwaccel cuda -hwaccel_output_format cuda -i "$CLIPS/$clip" \
        -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local p=$BGPID
    ff 60 -f cuframes -i "$KEY" -vf "hwdownload,format=$fmt,showinfo" -f null - 2>"$d/sub.err" ||
        { echo "  subscriber failed"; ok=0; }
    waitrc $p || { echo "  publisher failed"; ok=0; }
    props_of "$d/ref.err" "$d/ref.props"
    props_of "$d/sub.err" "$d/sub.props"
    if [ "$(wc -l <"$d/ref.props")" -lt 60 ] || ! diff -u "$d/ref.props" "$d/sub.props" >"$d/props.diff"; then
        echo "  frame properties differ (NVDEC direct vs CUDA subscriber):"
        head -n 12 "$d/props.diff" | sed 's/^/    /'
        ok=0
    fi
    [ -n "$OUT" ] && cp "$d/sub.props" "$OUT/props-$clip.txt"
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err"
    result "props: NVDEC $clip -> CUDA subscriber" $ok \
        "($(grep -m1 -o 'color_range:.*' "$d/sub.props" | cut -c1-90), $(grep -c 'side data' "$d/sub.props") side data lines, $((SECONDS - t)) s)"
}
selected props && {
    nvdec_props h264-bt709-tv.mkv nv12
    nvdec_props h264-bt601-pc.mkv nv12
    nvdec_props hevc-hdr10.mkv p010le
    nvdec_props h264-a53cc.h264 nv12
}

# h264_nvenc fed from the input device: the H200 has no NVENC, so the encoder's own
# error is the expected end (counted apart, as an expected failure, not a pass); the
# frames must have reached it (else it is a failure).
test_nvenc() {
    local d="$WORK/nvenc" ok=1
    mkdir -p "$d"
    newkey
    bg 60 /dev/null "$d/pub.err" "${NVDEC[@]}" -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local p=$BGPID
    ff 60 -loglevel verbose -f cuframes -i "$KEY" -c:v h264_nvenc -y "$d/out.mp4" 2>"$d/sub.err"
    local rc=$?
    kill -KILL -- "-$p" 2>/dev/null
    waitrc $p
    [ -n "$OUT" ] && cp "$d/sub.err" "$OUT/nvenc-subscriber.txt"
    if [ $rc = 0 ]; then
        result "input device -> h264_nvenc (encoded!)" 1 "$(ls -la "$d/out.mp4" | awk '{ print $5 }') bytes"
    else
        # The frames reached the encoder (it took our CUDA frames context) and
        # the failure is NVENC's own.
        local why
        why=$(grep -o "OpenEncodeSessionEx failed.*\|No capable devices found.*\|No NVENC capable devices found.*" "$d/sub.err" | head -n 1)
        grep -q "Using input frames context (format cuda) with h264_nvenc" "$d/sub.err" || {
            echo "  the encoder did not receive CUDA frames from the input device"
            ok=0
        }
        [ -n "$why" ] || { echo "  no NVENC error message"; ok=0; }
        if [ $ok = 1 ]; then
            expected_failure "input device -> h264_nvenc" "(exit $rc, NVENC's own error: $why)"
        else
            show "$d/sub.err"
            result "input device -> h264_nvenc: NVENC's own error" 0 "(exit $rc)"
        fi
    fi
}
selected nvenc && test_nvenc

summary
