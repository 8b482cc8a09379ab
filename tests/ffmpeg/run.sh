#!/usr/bin/env bash
# End-to-end tests of the patched FFmpeg (host memory; no GPU needed).
#
#   tests/ffmpeg/run.sh            uses build/ffmpeg/bin/ffmpeg (scripts/build-ffmpeg.sh:
#                                  the default line, 9.0)
#   FFMPEG=build/ffmpeg-7.1/bin/ffmpeg tests/ffmpeg/run.sh
#                                  another build (scripts/build-ffmpeg.sh --ffmpeg 7.1);
#                                  FFMPEG_SUITE_LABEL="ffmpeg 7.1 tests" names the summary
#   tests/ffmpeg/run.sh e2e kill   only the tests whose names contain one of the words
#
# Publishers and subscribers are separate ffmpeg processes; frames are compared by
# the per-frame MD5 column of -f framemd5 against the same source read directly.
# Every process runs under timeout(1) in its own process group, and every group is
# killed on exit. Prints one line per test and "ffmpeg tests: N passed, M failed,
# K skipped" (FFMPEG_SUITE_LABEL in place of "ffmpeg tests" when set).
set -uo pipefail
cd "$(dirname "$0")/../.."

. tests/ffmpeg/lib.sh

# ---------------------------------------------------------------- a. help
# same_defaults WHAT FFMPEG_HELP CLI_HELP OPTION:--FLAG...: each FFmpeg option's
# "(default X)" is the command's "[default: X]" (FFmpeg prints durations in seconds,
# "1"; the command with a unit, "1s"); says each that differs.
same_defaults() {
    local what=$1 theirs_help=$2 ours_help=$3 pair theirs ours status=0
    shift 3
    for pair in "$@"; do
        theirs=$(grep -E "^ +-?${pair%%:*} " <<<"$theirs_help" | sed -nE 's/.*\(default ([^)]*)\).*/\1/p')
        ours=$(awk -v o="${pair#*:}" '$1 == o { found = 1 } found && /\[default: / { sub(/.*\[default: /, ""); sub(/\].*/, ""); print; exit }' <<<"$ours_help")
        if [ -z "$theirs" ] || [ "$theirs" != "${ours%s}" ]; then
            echo "  $what -${pair%%:*}: FFmpeg's default is '$theirs', the command's '$ours'"
            status=1
        fi
    done
    return $status
}

test_help() {
    local ok=1 what opt out
    for what in "muxer=cuframes:key ring_size policy drop_oldest strict_wait ack_timeout startup_timeout memory auto host cuda cuda_share fd ipc wait_subscribers wait_timeout runtime_dir group v1_peers same_user refuse allow" \
                "demuxer=cuframes:name timeout reconnect reconnect_timeout reconnect_max copy always never read_ahead mode sequential latest runtime_dir" \
                "filter=cuframes:key name timeout copy always never read_ahead mode sequential latest runtime_dir"; do
        if ! out=$(ff 20 -h "${what%%:*}" 2>&1); then
            echo "  ffmpeg -h ${what%%:*} failed"
            ok=0
            continue
        fi
        for opt in ${what#*:}; do
            if ! grep -Eq "^ +-?$opt +[^ ]" <<<"$out"; then
                echo "  ffmpeg -h ${what%%:*}: no option '$opt'"
                ok=0
            fi
        done
    done
    result "help: muxer, demuxer, filter options" "$ok"
    # The muxer's defaults are the cuframes command's (which are the library's,
    # rust/cuframes-cli/tests/cli_help.rs): ring, and the strict-wait times.
    ok=1
    same_defaults "muxer" "$(ff 20 -h muxer=cuframes 2>&1)" "$("$CUFRAMES_CLI" publish --help)" \
        ring_size:--ring ack_timeout:--ack-timeout startup_timeout:--startup-timeout || ok=0
    result "help: the muxer's defaults are the command's (ring 16, ACK 1 s, start-up 10 s)" "$ok"
    # The input device's and the source filter's defaults are `cuframes subscribe`'s
    # (the library's, D39): copy, read-ahead, the waits for a publisher and a frame.
    ok=1
    local kind subscriber
    subscriber=$("$CUFRAMES_CLI" subscribe --help)
    for kind in demuxer filter; do
        same_defaults "$kind" "$(ff 20 -h $kind=cuframes 2>&1)" "$subscriber" \
            copy:--copy read_ahead:--read-ahead wait_timeout:--wait-timeout timeout:--timeout || ok=0
    done
    result "help: the input device's and the filter's defaults are subscribe's (copy auto, read-ahead 32, 30 s, 5 s)" "$ok"
}

# ---------------------------------------------------------------- b. end to end
# e2e FMT SIZE: 100 frames of testsrc2 through cuframes, MD5s as read directly.
e2e() {
    local fmt=$1 size=$2 n=100 t=$SECONDS
    local d="$WORK/e2e-$fmt-$size"
    if ! has_pix_fmt "$fmt"; then
        skipped "e2e: $fmt $size" "(FFmpeg $FFMPEG_LINE has no $fmt)"
        return
    fi
    mkdir -p "$d"
    newkey
    ff 60 -f lavfi -i "testsrc2=size=$size:rate=25" -frames:v $n -pix_fmt "$fmt" \
        -f framemd5 - >"$d/ref.md5" 2>"$d/ref.err"
    bg 60 /dev/null "$d/pub.err" -f lavfi -i "testsrc2=size=$size:rate=25" -frames:v $n \
        -pix_fmt "$fmt" -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local pub=$BGPID
    ff 60 -f cuframes -i "$KEY" -f framemd5 - >"$d/sub.md5" 2>"$d/sub.err"
    local rc=$?
    waitrc $pub
    local prc=$?
    local ok=1
    [ $rc = 0 ] || { echo "  subscriber exited $rc"; ok=0; }
    [ $prc = 0 ] || { echo "  publisher exited $prc"; ok=0; }
    same_frames "$fmt $size" "$d/ref.md5" "$d/sub.md5" $n || ok=0
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err"
    result "e2e: $fmt $size, $n frames" $ok "($((SECONDS - t)) s)"
}

# ---------------------------------------------------------------- c. filter
test_filter() {
    local d="$WORK/filter" n=60 t=$SECONDS ok=1
    mkdir -p "$d"
    newkey
    ff 60 -f lavfi -i "testsrc2=size=640x360:rate=25" -frames:v $n -pix_fmt nv12 \
        -f framemd5 "$d/ref.md5" 2>"$d/ref.err"
    bg 60 /dev/null "$d/pub.err" -f lavfi -i "testsrc2=size=640x360:rate=25" -frames:v $n \
        -pix_fmt nv12 -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local pub=$BGPID
    ff 60 -filter_complex "cuframes=key=$KEY" -f framemd5 "$d/sub.md5" 2>"$d/sub.err" ||
        { echo "  subscriber failed"; ok=0; }
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    same_frames "filter" "$d/ref.md5" "$d/sub.md5" $n || ok=0
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err"
    result "filter: cuframes=key=K ends at EOF" $ok "($((SECONDS - t)) s)"
}

# ---------------------------------------------------------------- d. two subscribers
test_two_subscribers() {
    local d="$WORK/two" n=100 t=$SECONDS ok=1
    mkdir -p "$d"
    newkey
    ff 60 -f lavfi -i "testsrc2=size=1280x720:rate=25" -frames:v $n -pix_fmt yuv420p \
        -f framemd5 "$d/ref.md5" 2>"$d/ref.err"
    bg 60 /dev/null "$d/pub.err" -f lavfi -i "testsrc2=size=1280x720:rate=25" -frames:v $n \
        -pix_fmt yuv420p -f cuframes -policy strict_wait -wait_subscribers 2 "$KEY"
    local pub=$BGPID
    bg 60 /dev/null "$d/sub1.err" -f cuframes -name first -i "$KEY" -f framemd5 "$d/sub1.md5"
    local s1=$BGPID
    bg 60 /dev/null "$d/sub2.err" -f cuframes -name second -copy always -i "$KEY" -f framemd5 "$d/sub2.md5"
    local s2=$BGPID
    waitrc $s1 || { echo "  subscriber 1 failed"; ok=0; }
    waitrc $s2 || { echo "  subscriber 2 failed"; ok=0; }
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    same_frames "subscriber 1" "$d/ref.md5" "$d/sub1.md5" $n || ok=0
    same_frames "subscriber 2" "$d/ref.md5" "$d/sub2.md5" $n || ok=0
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub1.err" "$d/sub2.err"
    result "two subscribers at once (lease and copy)" $ok "($((SECONDS - t)) s)"
}

# ---------------------------------------------------------------- e. H.264 file
H264=""
make_h264() {
    [ -n "$H264" ] && return 0
    H264="$WORK/clip.mp4"
    ff 120 -f lavfi -i "testsrc2=size=640x360:rate=30" -frames:v 120 -c:v libx264 \
        -preset ultrafast -pix_fmt yuv420p "$H264" 2>"$WORK/clip.err" ||
        { show "$WORK/clip.err"; H264=""; return 1; }
}

test_h264() {
    local d="$WORK/h264" t=$SECONDS ok=1
    mkdir -p "$d"
    make_h264 || { result "h264: decoded mp4 through cuframes" 0 "(cannot make the clip)"; return; }
    newkey
    ff 60 -i "$H264" -f framemd5 "$d/ref.md5" 2>"$d/ref.err"
    bg 60 /dev/null "$d/pub.err" -i "$H264" -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local pub=$BGPID
    ff 60 -f cuframes -i "$KEY" -f framemd5 "$d/sub.md5" 2>"$d/sub.err" ||
        { echo "  subscriber failed"; ok=0; }
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    same_frames "h264" "$d/ref.md5" "$d/sub.md5" 120 || ok=0
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err"
    result "h264: decoded mp4 through cuframes" $ok "($((SECONDS - t)) s)"
}

# ---------------------------------------------------------------- f. transcode
test_transcode() {
    local d="$WORK/transcode" t=$SECONDS ok=1
    mkdir -p "$d"
    make_h264 || { result "transcode: decode | cuframes | libx264" 0 "(cannot make the clip)"; return; }
    newkey
    bg 60 /dev/null "$d/pub.err" -i "$H264" -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local pub=$BGPID
    ff 60 -xerror -f cuframes -i "$KEY" -c:v libx264 -preset ultrafast "$d/out.mp4" 2>"$d/sub.err" ||
        { echo "  subscriber (encoder) failed"; ok=0; }
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    ff 60 -xerror -i "$H264" -f framemd5 "$d/in.md5" 2>"$d/in.err" || ok=0
    ff 60 -xerror -i "$d/out.mp4" -f framemd5 "$d/out.md5" 2>"$d/out.err" ||
        { echo "  the transcoded file does not decode"; ok=0; }
    local nin nout
    nin=$(md5s "$d/in.md5" | wc -l)
    nout=$(md5s "$d/out.md5" 2>/dev/null | wc -l)
    [ "$nout" = "$nin" ] && [ "$nin" = 120 ] || { echo "  $nout frames out, $nin in"; ok=0; }
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err" "$d/out.err"
    result "transcode: decode | cuframes | libx264" $ok "($nout of $nin frames, $((SECONDS - t)) s)"
}

# ---------------------------------------------------------------- g. publisher killed
# A live publisher (-re) that runs until killed.
live_publisher() {
    bg 60 /dev/null "$1" -re -f lavfi -i "testsrc2=size=320x240:rate=25" -pix_fmt yuv420p \
        -f cuframes "$KEY"
}

FIRST_RUN_FRAMES=0
test_kill() {
    local d="$WORK/kill" t ok=1
    mkdir -p "$d"
    newkey
    live_publisher "$d/pub.err"
    local pub=$BGPID
    wait_published || { echo "  the publisher did not start"; ok=0; }
    bg 30 /dev/null "$d/sub.err" -xerror -f cuframes -i "$KEY" -flush_packets 1 -f framemd5 "$d/sub.md5"
    local sub=$BGPID
    wait_for "frames before the kill" 20 has_frames "$d/sub.md5" 10 || ok=0
    local ffpid
    ffpid=$(child_of $pub)
    t=$(date +%s%N)
    kill -KILL "$ffpid"
    waitrc $sub
    local rc=$?
    local ms=$((($(date +%s%N) - t) / 1000000))
    waitrc $pub
    FIRST_RUN_FRAMES=$(md5s "$d/sub.md5" | wc -l)
    [ $rc != 0 ] && [ $rc != 124 ] && [ $rc != 137 ] || { echo "  subscriber exited $rc (expected an error)"; ok=0; }
    [ $ms -le 2000 ] || { echo "  subscriber took $ms ms to notice"; ok=0; }
    local msgs
    msgs=$(grep -c "publisher of '$KEY' went away" "$d/sub.err")
    [ "$msgs" = 1 ] || { echo "  expected one message naming the key, got $msgs"; ok=0; }
    [ "$FIRST_RUN_FRAMES" -gt 0 ] || { echo "  no frame before the kill"; ok=0; }
    [ $ok = 1 ] || show "$d/sub.err"
    result "kill -9 publisher: subscriber fails" $ok "(exit $rc after $ms ms, $FIRST_RUN_FRAMES frames)"
    [ $ok = 1 ] && echo "     $(grep "went away" "$d/sub.err" | head -n 1)"
}

# The cuframes CLI, for publishers that start in milliseconds.
CUFRAMES_CLI=${CUFRAMES_BIN:-target/debug/cuframes}
# cli_publisher ERR ARGS...: `cuframes publish KEY` (yuv420p 320x240, 25 fps) in the
# background, in its own process group (BGPID).
cli_publisher() {
    local err=$1
    shift
    setsid timeout -k 2 60 "$CUFRAMES_CLI" publish "$KEY" --memory host --format yuv420p \
        --size 320x240 --fps 25 --quiet "$@" >/dev/null 2>"$err" &
    BGPID=$!
    GROUPS_STARTED+=("$BGPID")
}
md5_count() { grep -vc '^#' "$1" 2>/dev/null; }
# count_md5 FILE MD5: COUNT = how many frames of a framemd5 file have that MD5
# (shell builtins only: no process is started).
count_md5() {
    local line
    COUNT=0
    while IFS= read -r line; do
        [ "${line:0:1}" = "#" ] && continue
        line=${line##*,}
        [ "${line// /}" = "$2" ] && COUNT=$((COUNT + 1))
    done <"$1"
}
# nap SECONDS: sleep without starting a process (read times out on a pipe that
# this shell holds both ends of).
nap() {
    [ -n "${NAP_FD:-}" ] || exec {NAP_FD}<> <(:)
    read -rt "$1" -u "$NAP_FD" || :
}
# subscribed: the live publisher of KEY has a subscriber (as `cuframes ls` reads it).
subscribed() {
    local row
    row=$("$CUFRAMES_CLI" ls --json 2>/dev/null | grep -o "{[^{}]*\"key\":\"$KEY\"[^{}]*}")
    grep -q '"state":"live"' <<<"$row" && grep -q '"subscribers":[1-9]' <<<"$row"
}
# joined_or_gone PID: the subscriber (process group PID) is in, or has exited.
joined_or_gone() {
    subscribed || ! kill -0 "$1" 2>/dev/null
}

# returning_publisher N ERR: like a publisher that comes back to KEY after the
# subscriber started waiting for it: 0.3 s later, when the subscriber looks at its
# slowest (every 100 ms) -- the scenario of issue 6, not a synchronisation -- the CLI's
# test pattern, N frames, strict_wait, held until the subscriber is in. RESUME_MS:
# from its new socket in the runtime directory to its first frame (seq 1: the MD5
# FIRST, then seen in OUT once more than before) in the subscriber's output, looked
# at with shell builtins only (a loop of forks on a loaded machine would be what it
# measures); -1 if not within 5 s. BGPID: the publisher.
returning_publisher() {
    local n=$1 err=$2 sock="$CUFRAMES_RUNTIME_DIR/$KEY.sock" t0 deadline seen
    sleep 0.3
    count_md5 "$OUT_MD5" "$FIRST"
    seen=$COUNT
    rm -f "$WORK/gone.sock"
    ln "$sock" "$WORK/gone.sock" 2>/dev/null # the last publisher's, if it left it behind
    cli_publisher "$err" --frames "$n" --policy strict-wait --wait-subscribers 1
    deadline=$((${EPOCHREALTIME/./} + 20000000))
    until { [ -S "$sock" ] && ! [ "$sock" -ef "$WORK/gone.sock" ]; } || [ "${EPOCHREALTIME/./}" -gt $deadline ]; do
        nap 0.002
    done
    t0=${EPOCHREALTIME/./}
    deadline=$((t0 + 5000000))
    RESUME_MS=-1
    until [ "${EPOCHREALTIME/./}" -gt $deadline ]; do
        count_md5 "$OUT_MD5" "$FIRST"
        if [ "$COUNT" -gt "$seen" ]; then
            RESUME_MS=$(((${EPOCHREALTIME/./} - t0) / 1000))
            break
        fi
        nap 0.002
    done
}

# kill -9 of a publisher, and a new one on the key: the subscriber (reconnect=1)
# resumes with the new one's first frame. Both publishers are the CLI's test
# pattern (a frame's bytes follow from its seq), strict_wait, and hold their first
# frame until the subscriber is in: no frame is lost to a race, and the second
# publisher's frames are the first one's again from seq 1, so where they start in
# the output is known. Every wait is for something observable (frames written,
# the subscriber's log lines), never a fixed sleep; the pause before a publisher
# returns sets the scene.
test_reconnect() {
    local d="$WORK/reconnect" t=$SECONDS ok=1 n1=50 n2=50 i
    mkdir -p "$d"
    newkey
    # The resume time is bounded (issue 6): above the machine's other work where allowed.
    raise_priority
    cli_publisher "$d/pub1.err" --policy strict-wait --wait-subscribers 1
    local pub1=$BGPID
    wait_published || { echo "  the publisher did not start"; ok=0; }
    bg 40 /dev/null "$d/sub.err" -xerror -f cuframes -reconnect 1 -reconnect_timeout 1.5 \
        -i "$KEY" -flush_packets 1 -f framemd5 "$d/sub.md5"
    local sub=$BGPID
    wait_for "$n1 frames of the first publisher" 20 has_frames "$d/sub.md5" $n1 || ok=0
    kill -KILL -- "-$pub1"
    waitrc $pub1
    wait_for "the subscriber to wait for a new publisher" 10 logged "$d/sub.err" "went away; waiting up to" ||
        ok=0
    OUT_MD5=$d/sub.md5
    FIRST=$(md5s "$d/sub.md5" | head -n 1)
    returning_publisher $n2 "$d/pub2.err"
    local ms=$RESUME_MS samples=$RESUME_MS extra=0
    waitrc $BGPID || { echo "  the second publisher failed"; show "$d/pub2.err"; ok=0; }
    # Issue 6: resumed within 200 ms of the publisher's return (its new socket to its
    # first frame written by the subscriber). A wall-clock bound on a machine that may
    # be busy with other work: the best of up to three returns (the subscriber follows
    # each within its reconnect_timeout) must meet it, and every one is shown.
    for i in 3 4; do
        [ "$ms" -ge 0 ] && [ "$ms" -lt 200 ] && break
        # The last one flushed and shut down; the subscriber waits for another.
        wait_for "the subscriber to follow shutdown $((i - 2))" 10 \
            logged_times "$d/sub.err" "shut down; waiting up to" $((i - 2)) || ok=0
        returning_publisher 5 "$d/pub$i.err"
        extra=$((extra + 1))
        samples="$samples, $RESUME_MS"
        [ "$RESUME_MS" -ge 0 ] && { [ "$ms" -lt 0 ] || [ "$RESUME_MS" -lt "$ms" ]; } && ms=$RESUME_MS
        waitrc $BGPID || { echo "  publisher $i failed"; show "$d/pub$i.err"; ok=0; }
    done
    restore_priority
    waitrc $sub
    local rc=$?
    [ $rc = 0 ] || { echo "  subscriber exited $rc"; ok=0; }
    # The output: the first publisher's frames from seq 1, then the second's, seq
    # 1..n2, then those of any further returns, seq 1..5 each.
    md5s "$d/sub.md5" >"$d/got"
    local n before
    n=$(wc -l <"$d/got")
    before=$(grep -nxF -- "$FIRST" "$d/got" | sed -n '2s/:.*//p')
    before=$((${before:-1} - 1))
    [ "$before" -ge $n1 ] || { echo "  the second publisher's first frame not found after the first one's $n1"; ok=0; }
    [ "$n" = $((before + n2 + 5 * extra)) ] ||
        { echo "  $n frames: expected the first publisher's $before, $n2 and $extra x 5"; ok=0; }
    cmp -s <(sed -n "1,${n2}p" "$d/got") <(sed -n "$((before + 1)),$((before + n2))p" "$d/got") ||
        { echo "  the second publisher's frames are not seq 1..$n2 in order"; ok=0; }
    for i in $(seq $extra); do
        cmp -s <(sed -n "1,5p" "$d/got") <(sed -n "$((before + n2 + 5 * i - 4)),$((before + n2 + 5 * i))p" "$d/got") ||
            { echo "  return $((i + 2)): not seq 1..5 in order"; ok=0; }
    done
    grep -q "Resumed '$KEY'" "$d/sub.err" || { echo "  no 'Resumed' message"; ok=0; }
    [ "$ms" -ge 0 ] && [ "$ms" -lt 200 ] || { echo "  resumed after $samples ms (limit 200)"; ok=0; }
    [ $ok = 1 ] || show "$d/sub.err"
    result "kill -9 publisher: reconnect=1 resumes" $ok \
        "($before + $n2 frames, first new frame $ms ms after the return; returns measured: $samples ms)"
}

# A publisher that dies right after each start: the subscriber pauses longer
# each time (100, 200 ms, ...) and gives up after reconnect_max.
test_crash_loop() {
    local d="$WORK/crashloop" ok=1 i
    mkdir -p "$d"
    newkey
    cli_publisher "$d/pub0.err"
    local pub=$BGPID
    wait_published || { echo "  the publisher did not start"; ok=0; }
    bg 40 /dev/null "$d/sub.err" -xerror -f cuframes -reconnect 1 -reconnect_timeout 3 -reconnect_max 2 \
        -i "$KEY" -f null -
    local sub=$BGPID
    # Each publisher dies once the subscriber is in (well within the 2 s that make
    # it a quick failure); the next one starts at once.
    for i in 1 2 3 4 5; do
        wait_for "the subscriber to join publisher $i" 10 joined_or_gone "$sub" || break
        kill -KILL -- "-$pub" 2>/dev/null
        waitrc $pub
        kill -0 "$sub" 2>/dev/null || break
        cli_publisher "$d/pub$i.err"
        pub=$BGPID
    done
    waitrc $sub
    local rc=$?
    kill -KILL -- "-$pub" 2>/dev/null
    [ $rc != 0 ] && [ $rc != 124 ] || { echo "  subscriber exit $rc (want an error, not a timeout)"; ok=0; }
    grep -q "pausing 100 ms" "$d/sub.err" || { echo "  no first pause (100 ms)"; ok=0; }
    grep -q "pausing 200 ms" "$d/sub.err" || { echo "  no doubled pause (200 ms)"; ok=0; }
    grep -q "giving up (reconnect_max 2)" "$d/sub.err" || { echo "  did not give up"; ok=0; }
    [ $ok = 1 ] || show "$d/sub.err"
    result "crash-looping publisher: backoff, then give up" $ok "(exit $rc)"
    [ $ok = 1 ] && echo "     $(grep "giving up" "$d/sub.err" | head -n 1 | sed 's/^\[[^]]*\] //')"
}

# ---------------------------------------------------------------- h. errors
# Without a GPU: every CUDA device hidden (CUDA_VISIBLE_DEVICES=-1) where there is one.
test_cuda_memory() {
    local d="$WORK/cuda" ok=1
    mkdir -p "$d"
    newkey
    CUDA_VISIBLE_DEVICES=-1 ff 30 -f lavfi -i "testsrc2=size=320x240:rate=25" -frames:v 5 -pix_fmt nv12 \
        -f cuframes -memory cuda "$KEY" 2>"$d/err"
    local rc=$?
    [ $rc != 0 ] && [ $rc != 124 ] || { echo "  exit $rc"; ok=0; }
    grep -qi cuda "$d/err" || { echo "  no message about CUDA"; ok=0; }
    [ $ok = 1 ] || show "$d/err"
    result "memory=cuda without a GPU: clear error" $ok "(exit $rc)"
    [ $ok = 1 ] && echo "     $(grep -i cuda "$d/err" | grep -v '^ ' | head -n 1)"
}

test_errors() {
    local d="$WORK/errors" ok=1 rc
    mkdir -p "$d"
    newkey
    ff 30 -f lavfi -i "testsrc2=size=320x240:rate=25" -frames:v 5 -pix_fmt yuv410p \
        -f cuframes "$KEY" 2>"$d/fmt.err"
    rc=$?
    [ $rc != 0 ] && grep -q "Unsupported pixel format yuv410p; cuframes takes nv12, " "$d/fmt.err" ||
        { echo "  yuv410p: exit $rc"; show "$d/fmt.err"; ok=0; }
    ff 30 -f cuframes -wait_timeout 300ms -i "$KEY" -f null - 2>"$d/nopub.err"
    rc=$?
    [ $rc != 0 ] && grep -q "Cannot subscribe to '$KEY'" "$d/nopub.err" ||
        { echo "  no publisher: exit $rc"; show "$d/nopub.err"; ok=0; }
    ff 30 -f lavfi -i "testsrc2=size=320x240:rate=25" -frames:v 5 -pix_fmt nv12 \
        -f cuframes "bad/key" 2>"$d/key.err"
    rc=$?
    [ $rc != 0 ] && grep -qi "key" "$d/key.err" ||
        { echo "  bad key: exit $rc"; show "$d/key.err"; ok=0; }
    # A socket at the key that is no publisher (it accepts, then closes): the wait ends
    # with what went wrong, not "no publisher".
    newkey
    python3 - "$CUFRAMES_RUNTIME_DIR/$KEY.sock" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
s.settimeout(20)
try:
    while True:
        s.accept()[0].close()
except OSError:
    pass
PY
    local fake=$! tries=0
    while [ ! -S "$CUFRAMES_RUNTIME_DIR/$KEY.sock" ] && [ $tries -lt 200 ]; do sleep 0.05; tries=$((tries + 1)); done
    ff 30 -f cuframes -wait_timeout 300ms -i "$KEY" -f null - 2>"$d/fake.err"
    rc=$?
    kill $fake 2>/dev/null; wait $fake 2>/dev/null
    [ $rc != 0 ] && grep -q "Cannot subscribe to '$KEY' within 0.3 s: " "$d/fake.err" &&
        ! grep -q "no publisher within" "$d/fake.err" ||
        { echo "  a socket that is no publisher: exit $rc"; show "$d/fake.err"; ok=0; }
    result "errors: pixel format, no publisher, bad key, a socket that is no publisher" $ok
}


# ---------------------------------------------------------------- timeouts are durations
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# failed_cleanly RC: ffmpeg exited with an error of its own (its exit status is the
# AVERROR's low byte: 234 EINVAL, 146 ETIMEDOUT, 254 ENOENT), not 0, not killed by
# timeout(1) (124, 137), not by a crash (SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGSEGV).
failed_cleanly() {
    case $1 in 0|124|132|134|135|136|137|139) return 1 ;; esac
}

# expire NAME LIMIT_S WANT_MS PATTERN ARGS...: ffmpeg ARGS must fail (not be killed by
# timeout(1)) within WANT_MS x [0.8, 3] (+ 2 s for ffmpeg's start on a busy host), and
# say PATTERN. Sets OK=0 when it does not, and TOOK to the milliseconds it took.
expire() {
    local name=$1 limit=$2 want=$3 pattern=$4 t rc took
    shift 4
    t=$(now_ms)
    ff "$limit" "$@" 2>"$d/$name.err"
    rc=$?
    took=$(($(now_ms) - t))
    TOOK=$took
    if ! failed_cleanly $rc; then
        echo "  $name: exit $rc (want an error)"; show "$d/$name.err"; OK=0; return
    fi
    if [ $took -lt $((want * 8 / 10)) ] || [ $took -gt $((want * 3 + 2000)) ]; then
        echo "  $name: failed after $took ms (want about $want ms)"; OK=0
    fi
    grep -q -- "$pattern" "$d/$name.err" ||
        { echo "  $name: no message '$pattern'"; show "$d/$name.err"; OK=0; }
    echo "     $name: $took ms: $(grep -- "$pattern" "$d/$name.err" | head -n 1 | sed 's/^\[[^]]*\] //')"
}

# malformed NAME ARGS...: ffmpeg ARGS fails with FFmpeg's own option error (not a crash).
malformed() {
    local name=$1 rc
    shift
    ff 20 "$@" 2>"$d/$name.err"
    rc=$?
    if ! failed_cleanly $rc; then
        echo "  $name: exit $rc (want an option error)"; show "$d/$name.err"; OK=0; return
    fi
    # FFmpeg 7.1: 'option value "abc"'; from 8.0: '"timeout" option value "abc"'.
    grep -Eq "Unable to parse (\"[a-z_]+\" )?option value \"abc\" as duration" "$d/$name.err" ||
        { echo "  $name: no option error"; show "$d/$name.err"; OK=0; }
}

# Timeouts are AV_OPT_TYPE_DURATION: seconds by default ("1" is 1 s, not 1 ms or
# 1000 s), units accepted ("500ms"), and garbage refused by the option parser.
test_durations() {
    local d="$WORK/durations" t=$SECONDS
    OK=1
    mkdir -p "$d"
    newkey
    expire dev-1 20 1000 "Cannot subscribe to '$KEY' (no publisher within 1 s)" \
        -f cuframes -wait_timeout 1 -i "$KEY" -f null -
    expire dev-500ms 20 500 "Cannot subscribe to '$KEY' (no publisher within 0.5 s)" \
        -f cuframes -wait_timeout 500ms -i "$KEY" -f null -
    expire filter-1 20 1000 "Cannot subscribe to '$KEY' (no publisher within 1 s)" \
        -filter_complex "cuframes=key=$KEY:wait_timeout=1" -f null -
    expire filter-250ms 20 250 "Cannot subscribe to '$KEY' (no publisher within 0.25 s)" \
        -filter_complex "cuframes=key=$KEY:wait_timeout=250ms" -f null -
    expire mux-wait 20 500 "Only 0 of 1 subscriber(s) joined '$KEY' within 0.5 s" \
        -f lavfi -i "testsrc2=size=64x48:rate=25" -frames:v 5 -pix_fmt nv12 \
        -f cuframes -wait_subscribers 1 -wait_timeout 500ms -ack_timeout 0.2 \
        -startup_timeout 00:00:01 "$KEY"
    malformed dev-abc -f cuframes -timeout abc -i "$KEY" -f null -
    malformed dev-wait-abc -f cuframes -wait_timeout abc -i "$KEY" -f null -
    malformed filter-abc -filter_complex "cuframes=key=$KEY:timeout=abc" -f null -
    malformed filter-wait-abc -filter_complex "cuframes=key=$KEY:wait_timeout=abc" -f null -
    malformed mux-abc -f lavfi -i "testsrc2=size=64x48:rate=25" -frames:v 5 -pix_fmt nv12 \
        -f cuframes -ack_timeout abc "$KEY"
    result "timeouts: 1 = 1 s, 500ms, abc refused" $OK "($((SECONDS - t)) s)"
}

# ---------------------------------------------------------------- i. start-up and held frames
# SRC N: the clip the tests below publish (testsrc2, yuv420p, 320x240).
held_source() { echo "testsrc2=size=320x240:rate=25"; }

# held_publisher DIR N: N frames of it under strict_wait on a ring of 4, with short
# timeouts (a subscriber that holds the ring is dropped fast); BGPID is its group.
held_publisher() {
    bg 60 /dev/null "$1/pub.err" -f lavfi -i "$(held_source)" -frames:v "$2" -pix_fmt yuv420p \
        -f cuframes -policy strict_wait -ack_timeout 300ms -startup_timeout 300ms -ring_size 4 \
        -wait_subscribers 1 "$KEY"
}

# Subscribers slower to start than the ACK timeout (a 1.5 s stall after they
# subscribed, ACK timeout 200 ms) are not dropped and lose nothing.
test_slow_start() {
    local d="$WORK/slowstart" n=60 t=$SECONDS ok=1
    mkdir -p "$d"
    newkey
    ff 60 -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p -f framemd5 "$d/ref.md5" 2>"$d/ref.err"
    bg 60 /dev/null "$d/pub.err" -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p \
        -f cuframes -policy strict_wait -ack_timeout 200ms -wait_subscribers 2 "$KEY"
    local pub=$BGPID
    CUFRAMES_TEST_STALL_AT=sub-connected:1500 bg 60 /dev/null "$d/sub1.err" -xerror \
        -f cuframes -i "$KEY" -f framemd5 "$d/sub1.md5"
    local s1=$BGPID
    CUFRAMES_TEST_STALL_AT=sub-connected:1500 bg 60 /dev/null "$d/sub2.err" -xerror \
        -filter_complex "cuframes=key=$KEY" -f framemd5 "$d/sub2.md5"
    local s2=$BGPID
    waitrc $s1 || { echo "  subscriber 1 failed"; ok=0; }
    waitrc $s2 || { echo "  subscriber 2 (filter) failed"; ok=0; }
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    same_frames "subscriber 1" "$d/ref.md5" "$d/sub1.md5" $n || ok=0
    same_frames "subscriber 2" "$d/ref.md5" "$d/sub2.md5" $n || ok=0
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub1.err" "$d/sub2.err"
    result "slow start: 1.5 s stall, ACK timeout 200 ms" $ok "($((SECONDS - t)) s)"
}

# A subscriber slower between HELLO and SUBSCRIBE than its publisher's handshake
# timeout (on a crowded GPU: making its CUDA context; here the test hook's 2 s stall,
# first handshake only) is closed by the publisher; libcuframes connects again at once
# (D23), within the same call, so that a wait_timeout shorter than the stall (as a
# 30 s one was shorter than the contexts of run 2026-12-07a) does not end it. The
# input device and the source filter both get every frame, each says so once with
# the publisher's reason, and a third subscriber without the stall is the reference.
# The CLI publishes with a 1 s handshake timeout.
test_slow_subscribe() {
    local d="$WORK/slowsub" n=40 t=$SECONDS ok=1
    mkdir -p "$d"
    newkey
    cli_publisher "$d/pub.err" --frames $n --policy strict-wait --wait-subscribers 3 --handshake-timeout 1s
    local pub=$BGPID
    wait_published || { echo "  the publisher did not start"; ok=0; }
    bg 60 /dev/null "$d/ref.err" -xerror -f cuframes -i "$KEY" -f framemd5 "$d/ref.md5"
    local ref=$BGPID
    CUFRAMES_TEST_STALL_AT=sub-context:2000 bg 60 /dev/null "$d/dev.err" -xerror \
        -f cuframes -wait_timeout 1 -i "$KEY" -f framemd5 "$d/dev.md5"
    local dev=$BGPID
    CUFRAMES_TEST_STALL_AT=sub-context:2000 bg 60 /dev/null "$d/filter.err" -xerror \
        -filter_complex "cuframes=key=$KEY:wait_timeout=1" -f framemd5 "$d/filter.md5"
    local filter=$BGPID
    waitrc $ref || { echo "  the reference subscriber failed"; ok=0; }
    waitrc $dev || { echo "  the input device failed"; ok=0; }
    waitrc $filter || { echo "  the source filter failed"; ok=0; }
    waitrc $pub || { echo "  the publisher failed"; ok=0; }
    slow_subscribers_agree "$d" $n || ok=0
    ! logged "$d/ref.err" "connecting again" || { echo "  the reference connected again"; ok=0; }
    [ $ok = 1 ] || show "$d/pub.err" "$d/ref.err" "$d/dev.err" "$d/filter.err"
    result "slow subscribe: handshake closed, connects again" $ok "($((SECONDS - t)) s)"
}

# While a subscriber makes its CUDA context (libcuframes begins it at the first miss;
# a crowded GPU is played by a 6 s stall of that warm-up, which on a machine without
# a driver then ends), its wait for a publisher does not count: with a 1 s wait_timeout,
# the input device and the source filter (which looks the key up first) both still
# find a publisher that comes 2 s later, frame-exact. With the warm-up off, the same
# waits give up at 1 s.
test_warm_wait() {
    local d="$WORK/warmwait" n=30 t=$SECONDS ok=1 name
    mkdir -p "$d"
    newkey
    local -A src=([dev]="-f cuframes -wait_timeout 1 -i $KEY" [filter]="-filter_complex cuframes=key=$KEY:wait_timeout=1")
    for name in dev filter; do
        # shellcheck disable=SC2086 # the source's words
        if CUFRAMES_CUDA_WARMUP=0 CUFRAMES_TEST_STALL_AT=cuda-warm-up:6000 \
            ff 20 ${src[$name]} -f null - 2>"$d/off-$name.err"; then
            echo "  $name: with the warm-up off, a 1 s timeout did not give up"
            ok=0
        fi
        grep -qF "Cannot subscribe to '$KEY' (no publisher within 1 s)" "$d/off-$name.err" ||
            { echo "  $name: with the warm-up off, no 'no publisher within 1 s'"; ok=0; }
    done
    ff 60 -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p -f framemd5 "$d/ref.md5" 2>"$d/ref.err"
    local pids=()
    for name in dev filter; do
        # shellcheck disable=SC2086
        CUFRAMES_TEST_STALL_AT=cuda-warm-up:6000 bg 60 /dev/null "$d/$name.err" -xerror \
            ${src[$name]} -f framemd5 "$d/$name.md5"
        pids+=("$BGPID")
    done
    sleep 2
    for name in 0 1; do
        kill -0 "${pids[$name]}" 2>/dev/null || { echo "  subscriber $name gave up while making its context"; ok=0; }
    done
    bg 60 /dev/null "$d/pub.err" -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p \
        -f cuframes -policy strict_wait -wait_subscribers 2 "$KEY"
    local pub=$BGPID
    waitrc "${pids[0]}" || { echo "  the input device failed"; ok=0; }
    waitrc "${pids[1]}" || { echo "  the source filter failed"; ok=0; }
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    same_frames "input device" "$d/ref.md5" "$d/dev.md5" $n || ok=0
    same_frames "source filter" "$d/ref.md5" "$d/filter.md5" $n || ok=0
    [ $ok = 1 ] || show "$d/off-dev.err" "$d/off-filter.err" "$d/pub.err" "$d/dev.err" "$d/filter.err"
    result "the wait for a publisher leaves out the CUDA warm-up: wait_timeout 1 s, publisher 2 s later" $ok \
        "(input device and source filter, $((SECONDS - t)) s)"
}

# The wait for a publisher covers its first frame; `timeout` bounds each frame
# after it. (a) A publisher that holds its first frame until its third subscriber
# joins, 2 s after the first two (timeout 1 s, default wait_timeout): all three
# get every frame. (b) With wait_timeout 1 s too, the held first frame ends the
# wait after ~1 s, saying so; the input device then fails to open, an error exit
# even without -xerror. (c) Once frames came, a publisher that stops
# (SIGSTOP) ends the wait after timeout (1 s), not wait_timeout (30 s).
test_start_waits() {
    local d="$WORK/startwaits" n=30 t=$SECONDS ok=1 name pub
    OK=1
    mkdir -p "$d"
    newkey
    ff 60 -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p -f framemd5 "$d/ref.md5" 2>"$d/ref.err"
    bg 60 /dev/null "$d/pub.err" -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p \
        -f cuframes -policy strict_wait -wait_subscribers 3 -wait_timeout 20 "$KEY"
    pub=$BGPID
    wait_published || ok=0
    local -A src=([dev]="-f cuframes -timeout 1 -i $KEY" [filter]="-filter_complex cuframes=key=$KEY:timeout=1"
        [late]="-f cuframes -i $KEY")
    local -A pids=()
    for name in dev filter late; do
        # shellcheck disable=SC2086 # the source's words
        bg 60 /dev/null "$d/$name.err" -v verbose -xerror ${src[$name]} -f framemd5 "$d/$name.md5"
        pids[$name]=$BGPID
        [ $name = filter ] || continue
        wait_for "the first two to subscribe" 20 logged "$d/dev.err" "Subscribed to '$KEY'" || ok=0
        wait_for "the filter to subscribe" 20 logged "$d/filter.err" "Subscribed to '$KEY'" || ok=0
        sleep 2
    done
    for name in dev filter late; do
        waitrc "${pids[$name]}" || { echo "  $name failed"; ok=0; }
        same_frames "$name" "$d/ref.md5" "$d/$name.md5" $n || ok=0
    done
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    [ $ok = 1 ] || show "$d/pub.err" "$d/dev.err" "$d/filter.err" "$d/late.err"
    OK=$ok

    newkey
    bg 60 /dev/null "$d/hold.err" -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p \
        -f cuframes -policy strict_wait -wait_subscribers 2 -wait_timeout 20 "$KEY"
    pub=$BGPID
    wait_published || OK=0
    expire first-dev 20 1000 "No first frame from '$KEY' within 1 s of subscribing" \
        -xerror -f cuframes -wait_timeout 1 -timeout 1 -i "$KEY" -f null -
    expire first-filter 20 1000 "No first frame from '$KEY' within 1 s of subscribing" \
        -xerror -filter_complex "cuframes=key=$KEY:wait_timeout=1:timeout=1" -f null -
    # The input device waits for the first frame while it opens: the open fails at the
    # deadline, counted from subscribing, and ffmpeg exits with an error without
    # -xerror, saying so once. (Once, ffmpeg's probing gave up on it and the demuxer
    # asked again: twice the wait, 6 s here, and ffmpeg exited 0.)
    expire probe-dev 20 3000 "No first frame from '$KEY' within 3 s of subscribing" \
        -f cuframes -wait_timeout 3 -timeout 3 -i "$KEY" -f null -
    [ "$TOOK" -lt 5000 ] || { echo "  probe-dev: $TOOK ms, about twice the wait (want about 3000)"; OK=0; }
    local said
    said=$(grep -c "No first frame from" "$d/probe-dev.err")
    [ "$said" = 1 ] || { echo "  probe-dev: the missing first frame was reported $said times (want once)"; OK=0; }
    kill -KILL -- "-$pub" 2>/dev/null
    waitrc $pub

    newkey
    bg 60 /dev/null "$d/live.err" -re -f lavfi -i "testsrc2=size=160x120:rate=25" -pix_fmt nv12 \
        -f cuframes "$KEY"
    pub=$BGPID
    wait_published || OK=0
    local -A each=([dev]="-f cuframes -timeout 1 -i $KEY" [filter]="-filter_complex cuframes=key=$KEY:timeout=1")
    for name in dev filter; do
        # shellcheck disable=SC2086 # the source's words
        bg 60 /dev/null "$d/stop-$name.err" -xerror ${each[$name]} -progress "$d/stop-$name.progress" -f null -
        pids[$name]=$BGPID
    done
    for name in dev filter; do
        wait_for "frames in the $name" 20 logged_re "$d/stop-$name.progress" '^frame=[1-9]' || OK=0
    done
    kill -STOP "$(child_of "$pub")"
    local stopped rc took
    stopped=$(now_ms)
    for name in dev filter; do
        waitrc "${pids[$name]}"
        rc=$? took=$(($(now_ms) - stopped))
        failed_cleanly $rc || { echo "  stop-$name: exit $rc (want an error)"; OK=0; }
        [ $took -le 5000 ] || { echo "  stop-$name: ended $took ms after the publisher stopped (want ~1 s)"; OK=0; }
        grep -qF "No frame from '$KEY' for 1 s" "$d/stop-$name.err" ||
            { echo "  stop-$name: no 'No frame from ... for 1 s'"; show "$d/stop-$name.err"; OK=0; }
        echo "     stop-$name: ended $took ms after the publisher stopped"
    done
    kill -KILL -- "-$pub" 2>/dev/null
    waitrc $pub
    result "start waits: the first frame as long as the publisher" $OK "($((SECONDS - t)) s)"
}

# held FILTER NAME: a subscriber whose graph holds many frames (reverse: all
# of them; tmix: 8) under strict_wait with a ring of 4 gets exactly what the
# same graph makes of a direct decode, and the publisher never stalls.
held() {
    local filter=$1 name=$2 n=60 t=$SECONDS ok=1
    local d="$WORK/held-$name"
    mkdir -p "$d"
    newkey
    # trim first: reverse ends only at the end of its (otherwise endless) input.
    ff 60 -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p -vf "trim=end_frame=$n,$filter" \
        -f framemd5 "$d/ref.md5" 2>"$d/ref.err"
    held_publisher "$d" $n
    local pub=$BGPID
    ff 60 -xerror -loglevel debug -f cuframes -i "$KEY" -vf "$filter" -f framemd5 "$d/sub.md5" 2>"$d/sub.err" ||
        { echo "  subscriber failed"; ok=0; }
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    same_frames "$name" "$d/ref.md5" "$d/sub.md5" $n || ok=0
    # copy=auto: the shared slots while the ring can spare them, then private
    # copies; the device's debug line says which each frame is.
    local slots copies
    slots=$(grep -c "frame seq [0-9]* pts [0-9-]*: host 0x[0-9a-f]*, the shared slot" "$d/sub.err")
    copies=$(grep -c "frame seq [0-9]* pts [0-9-]*: host 0x[0-9a-f]*, private copy" "$d/sub.err")
    [ "$slots" -ge 1 ] && [ "$copies" -ge 1 ] && [ $((slots + copies)) = $n ] ||
        { echo "  $slots shared slots + $copies private copies logged, expected both and $n in all"; ok=0; }
    grep -q "dropped by publisher" "$d/sub.err" && { echo "  the subscriber was dropped"; ok=0; }
    # Mostly copies: the end of the input says so and what keeps them zero-copy.
    local hint="'$KEY': $copies of $n frames were private copies: this graph holds more frames than the publisher's ring of 4 can spare"
    if [ $((copies * 2)) -gt $n ]; then
        grep -qF "$hint" "$d/sub.err" || { echo "  no hint that most frames were copies"; ok=0; }
    else
        grep -q "were private copies:" "$d/sub.err" && { echo "  a copies hint with $copies of $n copies"; ok=0; }
    fi
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err"
    result "held frames: -vf $filter, ring 4" $ok "($slots shared slots, $copies copies, $((SECONDS - t)) s)"
}

# The source filter under the same hold: frame-exact, and its end says that most
# frames were copies (it shares the input device's code for both).
test_held_filter() {
    local d="$WORK/held-filter" n=60 t=$SECONDS ok=1
    mkdir -p "$d"
    newkey
    ff 60 -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p -vf "tmix=frames=8" \
        -f framemd5 "$d/ref.md5" 2>"$d/ref.err"
    held_publisher "$d" $n
    local pub=$BGPID
    ff 60 -filter_complex "cuframes=key=$KEY,tmix=frames=8" -f framemd5 "$d/sub.md5" 2>"$d/sub.err" ||
        { echo "  subscriber failed"; ok=0; }
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    same_frames "filter tmix" "$d/ref.md5" "$d/sub.md5" $n || ok=0
    grep -q "'$KEY': [0-9]* of $n frames were private copies: this graph holds more frames than the publisher's ring of 4" \
        "$d/sub.err" || { echo "  no hint that most frames were copies"; ok=0; }
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err"
    result "held frames: cuframes filter + tmix=frames=8, ring 4" $ok "($((SECONDS - t)) s)"
}

# The same with copy=never: the graph holds every slot and the publisher
# drops the subscriber after its timeout. (Shows the test above is not
# vacuous, and what copy=never risks.)
test_held_never() {
    local d="$WORK/held-never" n=60 t=$SECONDS ok=1
    mkdir -p "$d"
    newkey
    held_publisher "$d" $n
    local pub=$BGPID
    ff 60 -xerror -f cuframes -copy never -i "$KEY" -vf reverse -f framemd5 "$d/sub.md5" 2>"$d/sub.err"
    local rc=$?
    waitrc $pub
    [ $rc != 0 ] && [ $rc != 124 ] || { echo "  subscriber exit $rc (expected an error)"; ok=0; }
    grep -q "dropped by publisher of '$KEY': no ACK" "$d/sub.err" ||
        { echo "  no message that the publisher dropped it"; ok=0; }
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err"
    result "held frames: copy=never holding the ring is dropped" $ok "(exit $rc, $((SECONDS - t)) s)"
}

# Many publishers and subscribers started at once, with CPU hogs beside them:
# default options but strict_wait, every output frame-exact.
test_many_at_once() {
    local d="$WORK/many" n=100 t=$SECONDS ok=1 p i
    local streams=3
    mkdir -p "$d"
    ff 60 -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p -f framemd5 "$d/ref.md5" 2>"$d/ref.err"
    ff 60 -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p -vf tmix=frames=8 \
        -f framemd5 "$d/ref-tmix.md5" 2>"$d/ref-tmix.err"
    local hogs=()
    for i in 1 2; do
        # Started outside job control (no "Killed" notice when they are stopped).
        hogs+=("$(setsid timeout 60 sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!)")
        GROUPS_STARTED+=("${hogs[-1]}")
    done
    local pubs=() subs=() keys=()
    for p in $(seq $streams); do
        newkey
        keys+=("$KEY")
        bg 90 /dev/null "$d/pub$p.err" -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p \
            -f cuframes -policy strict_wait -wait_subscribers 2 "$KEY"
        pubs+=($BGPID)
    done
    for p in $(seq $streams); do
        bg 90 /dev/null "$d/sub$p-a.err" -xerror -f cuframes -timeout 20 -i "${keys[$((p - 1))]}" \
            -f framemd5 "$d/sub$p-a.md5"
        subs+=($BGPID)
        bg 90 /dev/null "$d/sub$p-b.err" -xerror -f cuframes -timeout 20 -i "${keys[$((p - 1))]}" \
            -vf tmix=frames=8 -f framemd5 "$d/sub$p-b.md5"
        subs+=($BGPID)
    done
    for i in "${subs[@]}" "${pubs[@]}"; do
        waitrc "$i" || { echo "  a process failed (group $i)"; ok=0; }
    done
    for i in "${hogs[@]}"; do kill -KILL -- "-$i" 2>/dev/null; done
    for p in $(seq $streams); do
        same_frames "stream $p" "$d/ref.md5" "$d/sub$p-a.md5" $n || ok=0
        same_frames "stream $p tmix" "$d/ref-tmix.md5" "$d/sub$p-b.md5" $n || ok=0
    done
    [ $ok = 1 ] || show "$d"/pub*.err "$d"/sub*.err
    result "many at once: $streams publishers x 2, CPU hogs" $ok "($((SECONDS - t)) s)"
}

# The transcoding-host benchmark's harness on host memory (scripts/bench-host.sh):
# 2 streams x 4 consumers both ways, in real time, ended after 2 s of steady state.
# Its results must be whole: a steady window, every consumer's rate, CPU net of the
# driver's thread, no failure, nothing lost, and the run ended by the harness.
test_bench_host() {
    local d="$WORK/bench-host" t=$SECONDS ok=1
    mkdir -p "$d"
    if ! FFMPEG="$FFMPEG" timeout 120 bash scripts/bench-host.sh --memory host --mode re \
        --streams 2 --consumers 4 --size 320x240 --seconds 60 --settle 1 --steady 2 \
        --limit 60 --out "$d" >"$d/out.txt" 2>&1; then
        echo "  bench-host failed"; ok=0
    fi
    python3 - "$d/runs.jsonl" >"$d/check.txt" 2>&1 <<'PY' || ok=0
import json, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
assert sorted(r["approach"] for r in runs) == ["cuframes", "direct"], runs
for r in runs:
    st = r["steady"]
    assert st, "%s: no steady window" % r["approach"]
    assert not r["failures"] and r["processes_reporting_loss"] == 0, r
    assert r["stopped_after_steady_s"] == 2, r
    assert sorted(st["consumer_fps"]) == ["cpu", "hold", "null", "scale"], st
    assert all(v > 0 for v in st["consumer_fps"].values()), st
    assert st["slowest_stream_fps"] and st["slowest_stream_fps"] > 0, st
    assert st["cpu_ms_per_consumer_frame_net_of_driver"] is not None, st
    assert r["real_time"] in (True, False), r
PY
    [ $ok = 1 ] || show "$d/out.txt" "$d/check.txt"
    result "bench-host harness: 2 streams x 4 consumers, host memory" $ok "($((SECONDS - t)) s)"
}

# The whole-job comparison (issue 27) on host memory, as fast as possible to the
# clip's end: every process finishes, and every consumer's frames through cuframes
# equal the same consumer's decoding for itself (--verify, per-frame MD5s). Results,
# not timings, are asserted. The check itself must catch a changed frame.
test_bench_host_job() {
    local d="$WORK/bench-host-job" t=$SECONDS ok=1
    mkdir -p "$d"
    if ! FFMPEG="$FFMPEG" timeout 120 bash scripts/bench-host.sh --memory host --verify \
        --streams 2 --consumers 4 --size 320x240 --seconds 4 --limit 60 --out "$d" >"$d/out.txt" 2>&1; then
        echo "  bench-host --verify failed"; ok=0
    fi
    python3 - "$d" >"$d/check.txt" 2>&1 <<'PY' || ok=0
import glob, json, os, sys
sys.path.insert(0, "scripts/lib")
import bench_host
out = sys.argv[1]
runs = [json.loads(line) for line in open(os.path.join(out, "runs.jsonl"))]
assert sorted(r["approach"] for r in runs) == ["cuframes", "direct"], runs
for r in runs:
    assert not r["failures"] and r["processes_reporting_loss"] == 0, r
    assert r["frames_exact"] is True, r
    assert r["processes"] == (10 if r["approach"] == "cuframes" else 8), r
    assert r["wall_s"] > 0 and r["cpu_s"] > 0 and r["job_consumer_fps"] > 0, r
    assert r["failure_causes"] == {}, r
summary = open(os.path.join(out, "summary.md")).read()
assert "Whole job" in summary and "| yes |" in summary, summary
assert "Failures by cause" not in summary, summary
# Failures group by cause whatever their key, numbers and addresses.
cause = bench_host.failure_cause("x\n[in#0/cuframes @ 0x5a] Cannot subscribe to 'k-1' (no publisher within 5 s): gone")
assert cause == bench_host.failure_cause("[in#0/cuframes @ 0x7b] Cannot subscribe to 'k-22' (no publisher within 9 s): gone"), cause
assert cause.startswith("Cannot subscribe to 'KEY' (no publisher"), cause
table = bench_host.failure_table([{"approach": "cuframes", "streams": 2, "consumers": 4,
                                   "failure_causes": {"sub: " + cause: 3}}])
assert any(l.startswith("| cuframes | 2 | 4 | 3 | sub: Cannot subscribe") for l in table), table
# A consumer whose frame differs must fail the comparison.
class A: pass
a = A()
a.verify_dir, a.order = os.path.join(out, "frames"), bench_host.ORDER
path = bench_host.md5_path(a.verify_dir, "cuframes", 1, "scale")
lines = open(path).read().splitlines()
lines[-1] = lines[-1][:-1] + ("0" if lines[-1][-1] != "0" else "1")
open(path, "w").write("\n".join(lines) + "\n")
exact, report = bench_host.verify_frames(a, 2, 4)
assert not exact and any("stream 1 scale" in l and "differs" in l for l in report), report
PY
    [ $ok = 1 ] || show "$d/out.txt" "$d/check.txt"
    result "bench-host whole job: 2 streams x 4 consumers to the end, frames exact" $ok "($((SECONDS - t)) s)"
}

# The join measurement's harness on host memory (scripts/gpu/join-live.py): 2 live
# publishers, then 4 subscribers and 4 decoders at once. Every joiner must report a
# first output, by role, and the ratio; a run whose publishers cannot start must fail.
# Then run 2026-12-07a's failure at FFmpeg's defaults: subscribers 33 s between HELLO
# and SUBSCRIBE (the test hook; there, their CUDA contexts) outlast the muxer's 30 s
# handshake bound and their own 30 s wait_timeout; each must connect again, get
# frames, and be counted.
test_join_live() {
    local d="$WORK/join-live" t=$SECONDS ok=1
    mkdir -p "$d"
    if ! timeout 120 python3 scripts/gpu/join-live.py --ffmpeg "$FFMPEG" --memory host \
        --clip "$d/clip.mp4" --size 320x240 --seconds 20 --streams 2 --consumers 2 --after 1 \
        --repeat 1 --out "$d/ok" >"$d/out.txt" 2>&1; then
        echo "  join-live failed"; ok=0
    fi
    python3 - "$d/ok/join.jsonl" >"$d/check.txt" 2>&1 <<'PY' || ok=0
import json, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
assert len(runs) == 1, runs
r = runs[0]
assert r["error"] is None and r["without_output"] == [], r
# No stall here, so no subscriber's handshake was closed.
assert r["connected_again"] == [], r
for role in ("sub", "dec"):
    got = r["roles"][role]
    assert got["processes"] == 4 and got["with_output"] == 4, r
    assert 0 < got["first_output_ms"]["median"] <= got["first_output_ms"]["max"], r
assert r["sub_over_dec"] > 0 and r["publishers_live_s"] > 0, r
PY
    if ! timeout 150 python3 scripts/gpu/join-live.py --ffmpeg "$FFMPEG" --memory host \
        --clip "$d/clip-60s.mp4" --size 320x240 --seconds 60 --streams 1 --consumers 2 --after 1 \
        --repeat 1 --sub-env CUFRAMES_TEST_STALL_AT=sub-context:33000 --out "$d/slow" >"$d/slow.txt" 2>&1; then
        echo "  join-live with subscribers slower than the handshake bound failed"; ok=0
    fi
    python3 - "$d/slow/join.jsonl" >>"$d/check.txt" 2>&1 <<'PY' || ok=0
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["error"] is None and r["without_output"] == [], r
assert r["roles"]["sub"]["with_output"] == 2 and r["roles"]["sub"]["first_output_ms"]["median"] >= 33000, r
assert len(r["connected_again"]) == 2, r
PY
    # A clip that is no video: the publishers end at once, and the run says so and fails.
    echo "not a video" >"$d/bad.mp4"
    if timeout 60 python3 scripts/gpu/join-live.py --ffmpeg "$FFMPEG" --memory host \
        --clip "$d/bad.mp4" --streams 1 --consumers 1 --repeat 1 --out "$d/bad" >"$d/bad.txt" 2>&1 ||
        ! grep -q "a publisher ended before the joiners started" "$d/bad.txt"; then
        echo "  join-live without publishers did not fail as it should"; ok=0
    fi
    [ $ok = 1 ] || show "$d/out.txt" "$d/check.txt" "$d/slow.txt" "$d/bad.txt"
    result "join-live harness: 2 live streams, 4 subscribers and 4 decoders join; 2 past the handshake bound connect again" $ok "($((SECONDS - t)) s)"
}

# drop_oldest, real time: a subscriber that is still starting (libx264, and a
# 300 ms stall after it subscribed) when the first frames come loses none of
# them (read-ahead). The publisher is the CLI, paced from its first frame: an
# ffmpeg -re publisher that waited for subscribers publishes its backlog in a
# burst, which a drop_oldest ring of 4 cannot absorb (docs/ffmpeg.md).
test_drop_oldest_start() {
    local d="$WORK/dropstart" n=50 t=$SECONDS ok=1
    mkdir -p "$d"
    newkey
    cli_publisher "$d/pub.err" --frames $n --wait-subscribers 1 --ring 4
    local pub=$BGPID
    wait_published || { echo "  the publisher did not start"; ok=0; }
    CUFRAMES_TEST_STALL_AT=sub-connected:300 ff 60 -xerror -f cuframes -i "$KEY" \
        -c:v libx264 -preset ultrafast "$d/out.mp4" 2>"$d/sub.err" || { echo "  subscriber failed"; ok=0; }
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    ff 60 -i "$d/out.mp4" -f framemd5 "$d/out.md5" 2>"$d/out.err" || ok=0
    local got
    got=$(md5s "$d/out.md5" | wc -l)
    [ "$got" = $n ] || { echo "  $got of $n frames in the output"; ok=0; }
    grep -q "Lost" "$d/sub.err" && { echo "  frames were lost"; ok=0; }
    # The control: without read-ahead the same start loses frames, and says so.
    newkey
    cli_publisher "$d/pub0.err" --frames $n --wait-subscribers 1 --ring 4
    pub=$BGPID
    wait_published || { echo "  the publisher did not start"; ok=0; }
    CUFRAMES_TEST_STALL_AT=sub-connected:300 ff 60 -xerror -f cuframes -read_ahead 0 -i "$KEY" \
        -f framemd5 "$d/sub0.md5" 2>"$d/sub0.err" || { echo "  control subscriber failed"; ok=0; }
    waitrc $pub || { echo "  control publisher failed"; ok=0; }
    local control
    control=$(md5s "$d/sub0.md5" | wc -l)
    [ "$control" -lt $n ] && grep -q "Lost" "$d/sub0.err" ||
        { echo "  without read-ahead: $control of $n frames and no loss reported"; ok=0; }
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err" "$d/sub0.err"
    result "drop_oldest: a slow starter loses nothing" $ok "($got of $n frames; $control without read-ahead, $((SECONDS - t)) s)"
}

# drop_oldest with a consumer slower than real time: what it loses is said
# at the first loss and summed up at the end, and received + lost = published.
test_loss_is_reported() {
    local d="$WORK/loss" n=50 t=$SECONDS ok=1
    mkdir -p "$d"
    newkey
    bg 60 /dev/null "$d/pub.err" -re -f lavfi -i "$(held_source)" -frames:v $n -pix_fmt yuv420p \
        -f cuframes -wait_subscribers 1 "$KEY"
    local pub=$BGPID
    ff 60 -f cuframes -read_ahead 0 -thread_queue_size 1 -i "$KEY" -vf realtime=speed=0.3 \
        -f framemd5 "$d/sub.md5" 2>"$d/sub.err" || { echo "  subscriber failed"; ok=0; }
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    local got lost
    got=$(md5s "$d/sub.md5" | wc -l)
    grep -q "Lost [0-9]* frame(s) of '$KEY' before frame" "$d/sub.err" || { echo "  no warning at the first loss"; ok=0; }
    lost=$(sed -n "s/.*'$KEY': [0-9]* frames received (.*), \([0-9]*\) lost.*/\1/p" "$d/sub.err" | tail -n 1)
    [ -n "$lost" ] && [ "$lost" -gt 0 ] || { echo "  no summary of the loss"; ok=0; }
    [ -n "$lost" ] && [ $((got + lost)) = $n ] || { echo "  $got received + ${lost:-?} lost != $n"; ok=0; }
    # Under drop_oldest every frame is a copy by design: no advice about the ring.
    grep -q "were private copies:" "$d/sub.err" && { echo "  a copies hint under drop_oldest"; ok=0; }
    [ $ok = 1 ] || show "$d/sub.err"
    result "drop_oldest: loss is reported" $ok "($got received, ${lost:-?} lost)"
    [ $ok = 1 ] && echo "     $(grep "Lost" "$d/sub.err" | head -n 1 | sed 's/^\[[^]]*\] //' | cut -c1-150)…"
}

# ---------------------------------------------------------------- frame properties
# props NAME VF: what an encoder reads from a frame besides its pixels (colour
# description, sample aspect ratio, field order, duration) arrives at the subscriber
# as a direct read of the same source gives it: showinfo's lines compared field by
# field, and the stream an encoder (libx264) writes from the subscriber is tagged
# as one written from the source (ffprobe).
props() {
    local name=$1 vf=$2 n=10 t=$SECONDS ok=1
    local d="$WORK/props-$name"
    mkdir -p "$d"
    local src=(-f lavfi -i "testsrc2=size=320x240:rate=25" -frames:v $n -vf "$vf" -pix_fmt yuv420p)
    ff 60 "${src[@]}" -vf "$vf,format=yuv420p,showinfo" -f null - 2>"$d/ref.err" || ok=0
    ff 60 "${src[@]}" -c:v libx264 -preset ultrafast -y "$d/ref.mp4" 2>"$d/ref-enc.err" || ok=0
    newkey
    bg 60 /dev/null "$d/pub.err" "${src[@]}" -f cuframes -policy strict_wait -wait_subscribers 2 "$KEY"
    local pub=$BGPID
    bg 60 /dev/null "$d/enc.err" -f cuframes -i "$KEY" -c:v libx264 -preset ultrafast -y "$d/sub.mp4"
    local enc=$BGPID
    ff 60 -f cuframes -i "$KEY" -vf showinfo -f null - 2>"$d/sub.err" || { echo "  subscriber failed"; ok=0; }
    waitrc $enc || { echo "  encoding subscriber failed"; ok=0; }
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    # Per frame: colour line, and of the frame line the fields an encoder reads.
    local fields='s/.* n: *\([0-9]*\) .*duration_time:\([^ ]*\) .*fmt:\([^ ]*\) cl:\([^ ]*\) sar:\([^ ]*\) s:\([^ ]*\) i:\([^ ]*\) .*/n=\1 dur=\2 fmt=\3 cl=\4 sar=\5 s=\6 i=\7/p'
    # The first n frames: from FFmpeg 8 on, the reference's filters run a frame or two
    # ahead of -frames:v (showinfo prints frame n there too), the publisher sends n.
    for side in ref sub; do
        { sed -n "$fields" "$d/$side.err" | head -n $n; grep -o 'color_range:.*' "$d/$side.err" | head -n $n; } >"$d/$side.props"
    done
    if [ "$(wc -l <"$d/ref.props")" -lt $n ] || ! diff -u "$d/ref.props" "$d/sub.props" >"$d/props.diff"; then
        echo "  frame properties differ (direct read vs subscriber):"
        head -n 12 "$d/props.diff" | sed 's/^/    /'
        ok=0
    fi
    local probe="${FFMPEG%ffmpeg}ffprobe" keys=color_range,color_space,color_primaries,color_transfer,sample_aspect_ratio,field_order
    if [ -x "$probe" ]; then
        "$probe" -v error -select_streams v:0 -show_entries "stream=$keys" -of compact "$d/ref.mp4" >"$d/ref.tags" 2>&1
        "$probe" -v error -select_streams v:0 -show_entries "stream=$keys" -of compact "$d/sub.mp4" >"$d/sub.tags" 2>&1
        if ! diff -q "$d/ref.tags" "$d/sub.tags" >/dev/null; then
            echo "  the encoded stream is tagged differently: $(cat "$d/ref.tags") vs $(cat "$d/sub.tags")"
            ok=0
        fi
    else
        echo "  (no ffprobe beside $FFMPEG: encoded tags not compared)"
    fi
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err"
    result "props: $name" $ok "($(head -c 120 "$d/sub.tags" 2>/dev/null), $((SECONDS - t)) s)"
}

# ---------------------------------------------------------------- side data
# side_data NAME CLIP WANT: the side data a decoder attaches to the frames of CLIP
# (HDR mastering display, content light level, user-data SEI, A/53 captions; WANT
# names one that must be there, or the test proves nothing) reaches the subscriber
# as a direct decode gives it: showinfo's side-data lines, frame by frame. And an
# encoder (libx264) fed by the subscriber writes the same metadata into its stream
# as one fed by the decoder (ffprobe, first frame).
side_data() {
    local name=$1 clip=$2 want=$3 t=$SECONDS ok=1
    local d="$WORK/side-$name"
    mkdir -p "$d"
    ff 60 -i "$clip" -vf showinfo -f null - 2>"$d/ref.err" || { echo "  direct decode failed"; ok=0; }
    ff 60 -i "$clip" -c:v libx264 -preset ultrafast -y "$d/ref.mkv" 2>"$d/ref-enc.err" || ok=0
    newkey
    bg 60 /dev/null "$d/pub.err" -i "$clip" -f cuframes -policy strict_wait -wait_subscribers 2 "$KEY"
    local pub=$BGPID
    bg 60 /dev/null "$d/enc.err" -f cuframes -i "$KEY" -c:v libx264 -preset ultrafast -y "$d/sub.mkv"
    local enc=$BGPID
    ff 60 -f cuframes -i "$KEY" -vf showinfo -f null - 2>"$d/sub.err" || { echo "  subscriber failed"; ok=0; }
    waitrc $enc || { echo "  encoding subscriber failed"; ok=0; }
    waitrc $pub || { echo "  publisher failed"; ok=0; }
    local side
    for side in ref sub; do
        sed -n 's/.* n: *\([0-9]*\) .*/frame \1/p; s/.*\(side data - .*\|UUID=.*\|User Data=.*\)/  \1/p' \
            "$d/$side.err" >"$d/$side.sd"
    done
    if ! grep -q "$want" "$d/ref.sd"; then
        echo "  the direct decode shows no '$want' side data: the test would prove nothing"
        ok=0
    elif ! diff -u "$d/ref.sd" "$d/sub.sd" >"$d/sd.diff"; then
        echo "  side data differ (direct decode vs subscriber):"
        head -n 12 "$d/sd.diff" | sed 's/^/    /'
        ok=0
    fi
    local probe="${FFMPEG%ffmpeg}ffprobe"
    if [ -x "$probe" ]; then
        for side in ref sub; do
            "$probe" -v error -select_streams v:0 -read_intervals '%+#1' -show_frames \
                -show_entries frame=color_range,color_space,color_primaries,color_transfer:side_data \
                "$d/$side.mkv" 2>&1 | grep -v '^User Data\|^UUID' >"$d/$side.probe"
        done
        if ! diff -u "$d/ref.probe" "$d/sub.probe" >"$d/probe.diff"; then
            echo "  the encoded streams differ in their metadata:"
            head -n 12 "$d/probe.diff" | sed 's/^/    /'
            ok=0
        fi
    else
        echo "  (no ffprobe beside $FFMPEG: encoded side data not compared)"
    fi
    [ $ok = 1 ] || show "$d/pub.err" "$d/sub.err"
    result "side data: $name" $ok "($(grep -c 'side data' "$d/sub.sd") entries on $(grep -c '^frame' "$d/sub.sd") frames, $((SECONDS - t)) s)"
}

test_side_data() {
    local d="$WORK/side-clips"
    mkdir -p "$d"
    local src=(-f lavfi -i "testsrc2=size=320x240:rate=25" -frames:v 10)
    # HDR10: x264 writes mastering-display and content-light SEI (and its own
    # user-data SEI on the first frame).
    if ff 60 "${src[@]}" -c:v libx264 -preset ultrafast -pix_fmt yuv420p -color_range tv \
        -colorspace bt2020nc -color_primaries bt2020 -color_trc smpte2084 \
        -x264-params "mastering-display=G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,1):cll=1000,400" \
        -y "$d/hdr10.mkv" 2>"$d/hdr10.err"; then
        side_data hdr10-mastering-cll "$d/hdr10.mkv" "Mastering display"
    else
        show "$d/hdr10.err"
        result "side data: hdr10-mastering-cll (making the clip)" 0
    fi
    # A/53 captions, a different pair per frame.
    if ff 60 "${src[@]}" -c:v libx264 -preset ultrafast -pix_fmt yuv420p -bsf:v h264_mp4toannexb \
        -f h264 -y "$d/plain.h264" 2>"$d/cc.err" &&
        python3 tests/ffmpeg/a53-captions.py "$d/plain.h264" "$d/cc.h264" >>"$d/cc.err" 2>&1; then
        side_data a53-captions "$d/cc.h264" "A53"
    else
        show "$d/cc.err"
        result "side data: a53-captions (making the clip)" 0
    fi
}

# ---------------------------------------------------------------- sources
# `ffmpeg -sources cuframes` lists the live keys with their stream.
test_sources() {
    local d="$WORK/sources" ok=1
    mkdir -p "$d"
    newkey
    bg 30 /dev/null "$d/pub.err" -re -f lavfi -i "testsrc2=size=160x120:rate=25" -t 20 -pix_fmt yuv444p \
        -f cuframes "$KEY"
    local pub=$BGPID
    wait_published || ok=0
    ff 20 -sources cuframes >"$d/sources.txt" 2>&1 || { echo "  ffmpeg -sources failed"; ok=0; }
    grep -q "^  *$KEY \[yuv444p 160x120, host memory" "$d/sources.txt" ||
        { echo "  $KEY not listed:"; sed 's/^/    /' "$d/sources.txt"; ok=0; }
    kill -TERM -- "-$pub" 2>/dev/null
    waitrc $pub
    result "ffmpeg -sources cuframes lists live keys" $ok
}

# ---------------------------------------------------------------- interrupts
# sigint_ends NAME PGID ERR WAITING SIGNALS: once ERR says WAITING (the ffmpeg of
# process group PGID is waiting), SIGNALS SIGINTs (100 ms apart) end that ffmpeg
# within 1 s of the last. Sets OK=0 when not.
sigint_ends() {
    local name=$1 pgid=$2 err=$3 waiting=$4 signals=$5 pid t ms i
    if ! wait_for "$name to wait" 20 logged "$err" "$waiting"; then
        show "$err"; OK=0; return
    fi
    nap 0.5  # well into the wait, not at its start
    pid=$(child_of "$pgid")
    for i in $(seq "$signals"); do
        [ "$i" = 1 ] || nap 0.1
        t=$(now_ms)
        kill -INT "$pid" 2>/dev/null
    done
    while kill -0 "$pid" 2>/dev/null && [ $(($(now_ms) - t)) -lt 5000 ]; do nap 0.01; done
    ms=$(($(now_ms) - t))
    echo "     $name: ended $ms ms after SIGINT $signals"
    [ "$ms" -lt 1000 ] || { echo "  $name: still running $ms ms after SIGINT"; show "$err"; OK=0; }
    ! grep -q "Assertion\|Aborted" "$err" || { echo "  $name: crashed"; show "$err"; OK=0; }
}

# With wait_timeout=-1 and timeout=-1, the input device's waits end on ffmpeg's interrupt callback:
# at the first SIGINT while ffmpeg opens its inputs (no publisher yet), at the
# second once it transcodes (ffmpeg's rule for every input: the first lets
# inputs finish what they read).
test_interrupt() {
    local d="$WORK/interrupt" t=$SECONDS pub dev
    OK=1
    mkdir -p "$d"
    newkey
    bg 60 /dev/null "$d/dev-nopub.err" -v verbose -f cuframes -wait_timeout -1 -i "$KEY" -f null -
    sigint_ends "no publisher" $BGPID "$d/dev-nopub.err" "Waiting for a publisher of '$KEY'" 1
    # A publisher that stops sending: SIGSTOP, so that it neither ends nor sends.
    bg 60 /dev/null "$d/pub.err" -re -f lavfi -i "testsrc2=size=160x120:rate=25" -pix_fmt nv12 \
        -f cuframes "$KEY"
    pub=$BGPID
    wait_published || OK=0
    bg 60 /dev/null "$d/dev-noframe.err" -v verbose -f cuframes -wait_timeout -1 -timeout -1 \
        -i "$KEY" -f null -
    dev=$BGPID
    wait_for "the device to subscribe" 20 logged "$d/dev-noframe.err" "Subscribed to '$KEY'" || OK=0
    kill -STOP "$(child_of "$pub")"
    sigint_ends "no frame" $dev "$d/dev-noframe.err" "Subscribed to '$KEY'" 2
    kill -KILL -- "-$pub" "-$dev" 2>/dev/null
    result "interrupt: the device's waits end on SIGINT" $OK "($((SECONDS - t)) s)"
}

# ---------------------------------------------------------------- the library's messages
# libcuframes' messages about a component's objects are av_log lines of that component
# (so -loglevel and -report apply), never the library's own "cuframes: ..." on stderr.
# Deterministic ones: the warning that a CUFRAMES_TEST_* switch is set, which the
# publisher and the subscriber give when they are created.
routed() {
    local name=$1 err=$2 context=$3
    grep -Eq "^\[$context @ 0x[0-9a-f]+\] CUFRAMES_TEST_STALL_AT=pub-none:0 is set" "$err" ||
        { echo "  $name: no av_log line of [$context @ ...] with the library's warning"; show "$err"; OK=0; }
    ! grep -q "^cuframes: " "$err" ||
        { echo "  $name: the library wrote to stderr itself"; show "$err"; OK=0; }
}
test_log_routing() {
    local d="$WORK/log" t=$SECONDS pub
    OK=1
    mkdir -p "$d"
    newkey
    export CUFRAMES_TEST_STALL_AT=pub-none:0  # a point no code reaches: only the warning
    bg 60 /dev/null "$d/pub.err" -re -f lavfi -i "testsrc2=size=160x120:rate=25" -t 10 \
        -pix_fmt nv12 -f cuframes "$KEY"
    pub=$BGPID
    wait_published || OK=0
    ff 20 -f cuframes -i "$KEY" -frames:v 3 -f null - 2>"$d/dev.err"
    ff 20 -filter_complex "cuframes=key=$KEY" -frames:v 3 -f null - 2>"$d/filter.err"
    ff 20 -loglevel error -f cuframes -i "$KEY" -frames:v 3 -f null - 2>"$d/quiet.err"
    unset CUFRAMES_TEST_STALL_AT
    kill -TERM -- "-$pub" 2>/dev/null
    waitrc $pub
    routed muxer "$d/pub.err" "cuframes"
    routed device "$d/dev.err" "(in#0|cuframes)"
    routed filter "$d/filter.err" "Parsed_cuframes_0"
    ! grep -q "CUFRAMES_TEST_STALL_AT" "$d/quiet.err" ||
        { echo "  -loglevel error still shows the warning"; show "$d/quiet.err"; OK=0; }
    result "log: library messages are av_log lines" $OK "($((SECONDS - t)) s)"
}

# ---------------------------------------------------------------- mixed FFmpeg lines
# FFMPEG_OTHER: the ffmpeg of another FFmpeg line (scripts/build-ffmpeg.sh --ffmpeg
# 7.1). A publisher of either line hands frames to a subscriber of the other, byte for
# byte: formats one line lacks are read as the format with the same bytes (D36), so the
# MD5s (of the bytes) are those of the publisher's own framemd5.
mixed() {
    local from=$1 to=$2 fmt=$3 n=30 d
    d="$WORK/mixed-$fmt-$(basename "$(dirname "$(dirname "$from")")")"
    mkdir -p "$d"
    if ! FFMPEG=$from has_pix_fmt "$fmt"; then
        MIXED_SKIPPED+=" $fmt (FFmpeg $("$from" -hide_banner -version | sed -nE '1s/^ffmpeg version n?([0-9]+\.[0-9]+).*/\1/p'))"
        return
    fi
    newkey
    FFMPEG=$from ff 60 -f lavfi -i "testsrc2=size=642x362:rate=25" -frames:v $n -pix_fmt "$fmt" \
        -f framemd5 - >"$d/ref.md5" 2>"$d/ref.err"
    FFMPEG=$from bg 60 /dev/null "$d/pub.err" -f lavfi -i "testsrc2=size=642x362:rate=25" \
        -frames:v $n -pix_fmt "$fmt" -f cuframes -policy strict_wait -wait_subscribers 1 "$KEY"
    local pub=$BGPID
    FFMPEG=$to ff 60 -f cuframes -i "$KEY" -f framemd5 - >"$d/sub.md5" 2>"$d/sub.err" ||
        { echo "  $fmt: subscriber failed"; show "$d/sub.err"; OK=0; }
    waitrc $pub || { echo "  $fmt: publisher failed"; show "$d/pub.err"; OK=0; }
    same_frames "$fmt" "$d/ref.md5" "$d/sub.md5" $n || OK=0
}
test_mixed_lines() {
    local t=$SECONDS other fmt
    if [ -z "${FFMPEG_OTHER:-}" ]; then
        skipped "mixed lines: both ways, frame-exact" "(FFMPEG_OTHER is not set)"
        return
    fi
    other=$(cd "$(dirname "$FFMPEG_OTHER")" && pwd)/$(basename "$FFMPEG_OTHER")
    OK=1
    MIXED_SKIPPED=
    for fmt in nv12 yuv420p p010le p016le yuv444p yuv444p16le bgra p012le yuv444p10msble \
               yuv444p12msble yuv420p10le; do
        mixed "$FFMPEG" "$other" "$fmt"
        mixed "$other" "$FFMPEG" "$fmt"
    done
    result "mixed lines: $FFMPEG_LINE <-> $(FFMPEG=$other; "$FFMPEG" -hide_banner -version |
        sed -nE '1s/^ffmpeg version n?([0-9]+\.[0-9]+).*/\1/p')" $OK \
        "($((SECONDS - t)) s${MIXED_SKIPPED:+; publisher lacks:$MIXED_SKIPPED})"
}

# ---------------------------------------------------------------- UDP ingest to HLS
# A transcoding host: an MPEG-TS with H.264 and AAC arrives over UDP (127.0.0.1 only);
# one ffmpeg ingests it, publishes the decoded video to cuframes and remuxes the audio
# into a file; subscribers encode the video to HLS and checksum it.
#
# UDP may drop datagrams, but on the loopback only when the receiving socket's buffer
# is full. The receiver is bound before anything is sent, the sender is paced (-re,
# about 110 kB/s), and ffmpeg's UDP reader thread drains the socket into a FIFO
# (fifo_size: 28672 TS packets, 5 MB) that holds the whole clip (about 440 kB) even
# while the rest of the ingest waits for its subscribers. So nothing is lost, even with the CPU busy,
# and the checks are exact: every video frame MD5 as a direct decode of the clip,
# 100 frames in the HLS segments, every audio packet as in the clip. A datagram that
# is lost anyway fails the test, and says whether the kernel counted it
# (RcvbufErrors) or the FIFO overran.

# free_udp_port: a UDP port that nothing on this machine has bound.
free_udp_port() {
    local port hex
    while :; do
        port=$((20000 + RANDOM % 40000))
        hex=$(printf ':%04X ' "$port")
        grep -q "$hex" /proc/net/udp /proc/net/udp6 2>/dev/null || { echo "$port"; return; }
    done
}
# udp_bound PORT: whether a socket is bound to 127.0.0.1:PORT (0100007F in /proc/net/udp).
udp_bound() { grep -q "$(printf ' 0100007F:%04X ' "$1")" /proc/net/udp; }
# Datagrams the kernel dropped for full receive buffers, all sockets.
rcvbuf_errors() { awk '$1 == "Udp:" && !h { for (i = 2; i <= NF; i++) c[$i] = i; h = 1; next }
                       $1 == "Udp:" { print $c["RcvbufErrors"] }' /proc/net/snmp; }

test_udp_ingest() {
    local d="$WORK/udp" n=100 t=$SECONDS ok=1
    mkdir -p "$d/hls"
    newkey
    # The clip: 4 s of H.264 (a keyframe every second, for 1 s HLS segments) and AAC.
    ff 60 -f lavfi -i "testsrc2=size=320x240:rate=25" -f lavfi -i "sine=frequency=440:sample_rate=48000" \
        -frames:v $n -t 4 -c:v libx264 -preset ultrafast -g 25 -pix_fmt yuv420p -c:a aac -b:a 64k \
        -f mpegts "$d/clip.ts" 2>"$d/clip.err" || {
        show "$d/clip.err"
        result "udp ingest: TS over UDP, cuframes, HLS out" 0 "(cannot make the clip)"
        return
    }
    ff 60 -i "$d/clip.ts" -map 0:v -f framemd5 "$d/ref.md5" 2>"$d/ref.err"
    ff 60 -i "$d/clip.ts" -map 0:a -c copy -f framemd5 "$d/ref-audio.md5" 2>"$d/ref-audio.err"
    local port drops0
    port=$(free_udp_port)
    drops0=$(rcvbuf_errors)
    # The ingest: bound to 127.0.0.1 alone (localaddr); ends 5 s after the last datagram
    # (timeout, in µs: UDP has no end of stream).
    bg 90 /dev/null "$d/ingest.err" \
        -i "udp://127.0.0.1:$port?localaddr=127.0.0.1&timeout=5000000&fifo_size=28672" \
        -map 0:v -f cuframes -policy strict_wait -wait_subscribers 2 "$KEY" \
        -map 0:a -c:a copy -f mpegts "$d/audio.ts"
    local ingest=$BGPID i
    for i in $(seq 200); do
        udp_bound "$port" && break
        sleep 0.05
    done
    udp_bound "$port" || { echo "  the ingest did not bind 127.0.0.1:$port"; ok=0; }
    bg 90 /dev/null "$d/hls.err" -xerror -f cuframes -timeout 30 -i "$KEY" \
        -c:v libx264 -preset ultrafast -g 25 -f hls -hls_time 1 -hls_list_size 0 \
        -hls_segment_filename "$d/hls/seg%03d.ts" "$d/hls/out.m3u8"
    local hls=$BGPID
    bg 90 /dev/null "$d/md5.err" -xerror -f cuframes -timeout 30 -i "$KEY" -f framemd5 "$d/sub.md5"
    local sub=$BGPID
    # The sender: the clip as it is, at its own pace, in 1316-byte datagrams (7 TS packets).
    ff 60 -re -i "$d/clip.ts" -map 0 -c copy -f mpegts \
        "udp://127.0.0.1:$port?localaddr=127.0.0.1&pkt_size=1316" 2>"$d/send.err" ||
        { echo "  the sender failed"; ok=0; }
    waitrc $ingest || { echo "  the ingest failed"; ok=0; }
    waitrc $hls || { echo "  the HLS subscriber failed"; ok=0; }
    waitrc $sub || { echo "  the framemd5 subscriber failed"; ok=0; }
    local drops=$(($(rcvbuf_errors) - drops0))
    # Video through UDP and cuframes: every frame, exact.
    same_frames "video" "$d/ref.md5" "$d/sub.md5" $n || ok=0
    # HLS: a finished playlist, every segment it lists on disk, all frames decodable.
    local segs=0 seg frames=0
    if grep -q '^#EXT-X-ENDLIST' "$d/hls/out.m3u8" 2>/dev/null; then
        while read -r seg; do
            segs=$((segs + 1))
            [ -s "$d/hls/$seg" ] || { echo "  the playlist lists $seg, which is missing"; ok=0; }
        done < <(grep -v '^#' "$d/hls/out.m3u8")
        [ $segs -ge 3 ] || { echo "  $segs segments (4 s in 1 s segments: expected 3 or more)"; ok=0; }
        ff 60 -xerror -i "$d/hls/out.m3u8" -map 0:v -f framemd5 "$d/hls.md5" 2>"$d/hls-dec.err" ||
            { echo "  the HLS stream does not decode"; show "$d/hls-dec.err"; ok=0; }
        frames=$(md5s "$d/hls.md5" 2>/dev/null | wc -l)
        [ "$frames" = $n ] || { echo "  $frames frames in the HLS segments, expected $n"; ok=0; }
    else
        echo "  no finished playlist (out.m3u8 without #EXT-X-ENDLIST)"
        ok=0
    fi
    # Audio, remuxed by the ingest: AAC, every packet as sent, and it decodes.
    local apk=0
    if ff 30 -i "$d/audio.ts" -map 0:a -c copy -f framemd5 "$d/audio.md5" 2>"$d/audio.err"; then
        apk=$(md5s "$d/audio.md5" | wc -l)
        grep -q '^#codec_id 0: aac' "$d/audio.md5" || { echo "  audio.ts: no AAC stream"; ok=0; }
        cmp -s <(md5s "$d/ref-audio.md5") <(md5s "$d/audio.md5") ||
            { echo "  audio.ts: $apk packets differ from the clip's $(md5s "$d/ref-audio.md5" | wc -l)"; ok=0; }
        [ "$apk" -gt 0 ] || ok=0
        ff 30 -xerror -i "$d/audio.ts" -map 0:a -f null - 2>"$d/audio-dec.err" ||
            { echo "  audio.ts does not decode"; show "$d/audio-dec.err"; ok=0; }
    else
        echo "  audio.ts has no audio stream"
        ok=0
    fi
    if [ $ok = 0 ]; then
        [ "$drops" -gt 0 ] &&
            echo "  the kernel dropped $drops UDP datagram(s) meanwhile (RcvbufErrors, all sockets)"
        grep -h "overrun" "$d/ingest.err" | head -n 2 | sed 's/^/  /'
        show "$d/send.err" "$d/ingest.err" "$d/hls.err" "$d/md5.err"
    fi
    result "udp ingest: TS over UDP, cuframes, HLS out" $ok \
        "($frames frames in $segs segments, $apk audio packets, $((SECONDS - t)) s)"
}

# ---------------------------------------------------------------- run
selected help && test_help
selected sources && test_sources
selected e2e && {
    e2e nv12 1280x720
    e2e yuv420p 1280x720
    e2e nv12 642x362
    e2e yuv420p 642x362
    e2e p010le 642x362
    e2e bgra 320x240
    e2e p016le 642x362
    e2e yuv444p 642x362
    e2e yuv444p16le 642x362
    e2e rgba 320x240
    e2e bgr0 320x240
    e2e rgb0 320x240
    # FFmpeg 8.1 and 9.0's NVDEC formats, and the rest CUDA frames may carry.
    e2e p012le 642x362
    e2e nv16 642x362
    e2e p210le 642x362
    e2e p212le 642x362
    e2e p216le 642x362
    e2e yuv422p 642x362
    e2e yuv420p10le 642x362
    e2e yuv422p10le 642x362
    e2e yuv444p10le 642x362
    e2e yuv444p10msble 642x362
    e2e yuv444p12msble 642x362
    e2e yuva420p 642x362
}
selected filter && test_filter
selected interrupt && test_interrupt
selected log && test_log_routing
selected mixed && test_mixed_lines
selected two && test_two_subscribers
selected h264 && test_h264
selected transcode && test_transcode
selected kill && test_kill
selected reconnect && test_reconnect
selected crashloop && test_crash_loop
selected cuda && test_cuda_memory
selected errors && test_errors
selected durations && test_durations
selected slowstart && test_slow_start
selected slowsub && test_slow_subscribe
selected warmwait && test_warm_wait
selected startwaits && test_start_waits
selected held && {
    held reverse reverse
    held tmix=frames=8 tmix
    test_held_filter
    test_held_never
}
selected many && test_many_at_once
selected benchhost && test_bench_host
selected benchhostjob && test_bench_host_job
selected joinlive && test_join_live
selected dropstart && test_drop_oldest_start
selected loss && test_loss_is_reported
selected sidedata && test_side_data
selected udp && test_udp_ingest
selected props && {
    props sdr-bt709-limited "setparams=range=tv:color_primaries=bt709:color_trc=bt709:colorspace=bt709"
    props bt601-full "setparams=range=pc:color_primaries=smpte170m:color_trc=smpte170m:colorspace=smpte170m,setsar=sar=16/15"
    props hdr10-pq "setparams=range=tv:color_primaries=bt2020:color_trc=smpte2084:colorspace=bt2020nc"
    props interlaced-tff "setparams=field_mode=tff:range=tv:colorspace=bt470bg,setsar=sar=12/11"
}

summary
