#!/usr/bin/env bash
# The GStreamer plugin (rust/gst-cuframes: cuframessink, cuframessrc) on host
# memory, against itself, the patched FFmpeg and the cuframes command.
#
#   tests/gstreamer/run.sh [TEST...]     only the tests whose names contain a word
#
# Builds the plugin and the CLI with cargo (debug), and installs GStreamer from
# apt (scripts/lib/gstreamer.sh) when it is missing and this runs as root. FFMPEG names the
# patched ffmpeg (default build/ffmpeg/bin/ffmpeg); the tests that need it are
# skipped without it. Every
# test runs in a process of its own with a private runtime directory
# (CUFRAMES_RUNTIME_DIR), its processes bounded by timeout(1) in process
# groups of their own, all killed at its end. Prints
# "GStreamer: N passed, N failed, N skipped" last; exits non-zero on a failure.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
LABEL=${GSTREAMER_SUITE_LABEL:-GStreamer}
PLUGIN_DIR=$ROOT/target/debug
CLI=$ROOT/target/debug/cuframes
. scripts/lib/gstreamer.sh
. tests/lib/sockets.sh

# ---- inside a test's process ------------------------------------------------

STARTED=()
# bgrun NAME LIMIT CMD...: CMD in the background, bounded, in its own process
# group; output in NAME.out / NAME.err; BGPID its group.
bgrun() {
    local name=$1 limit=$2
    shift 2
    setsid timeout -k 2 "$limit" "$@" >"$T/$name.out" 2>"$T/$name.err" &
    BGPID=$!
    STARTED+=("$BGPID")
}

# run NAME LIMIT CMD...: CMD in the foreground, bounded; RC its status.
run() {
    local name=$1 limit=$2
    shift 2
    timeout -k 2 "$limit" "$@" >"$T/$name.out" 2>"$T/$name.err"
    RC=$?
}

# fail DETAIL: the test fails, saying why (with the ends of its logs).
fail() {
    echo "FAIL: $*"
    local f
    for f in "$T"/*.err "$T"/*.out; do
        [ -s "$f" ] && [[ $f != *.raw ]] && { echo "--- $(basename "$f")"; tail -n 8 "$f" | cut -c1-300; }
    done
    exit 1
}

# says FILE TEXT...: FILE must contain every TEXT.
says() {
    local file=$1 text
    shift
    for text in "$@"; do
        grep -qF -- "$text" "$file" || fail "$(basename "$file") does not say '$text'"
    done
}

# said NAME TEXT...: NAME's output (stdout and stderr) must contain every TEXT.
said() {
    local name=$1
    shift
    cat "$T/$name.out" "$T/$name.err" >"$T/$name.all" 2>/dev/null
    says "$T/$name.all" "$@"
}

# waitrc PID: the exit status of a background job.
waitrc() {
    wait "$1" 2>/dev/null
}

# wait_socket KEY: until the publisher of KEY listens (10 s at most).
wait_socket() {
    socket_up "$1" 10 || fail "no socket for $1 after 10 s"
}


# same_bytes WHAT REF GOT: byte for byte, with the frame where they part.
same_bytes() {
    local what=$1 ref=$2 got=$3 frame=${4:-0}
    [ -s "$ref" ] || fail "$what: the reference is empty"
    if ! cmp -s "$ref" "$got"; then
        local at
        at=$(cmp "$ref" "$got" 2>&1 | head -n 1)
        fail "$what: $(stat -c %s "$got") bytes read, $(stat -c %s "$ref") expected; $at${frame:+ (frames of $frame bytes)}"
    fi
}

CAPS_NV12="video/x-raw,format=NV12,width=320,height=240,framerate=30/1"

# 1. Both elements load, with their properties.
test_inspect() {
    run inspect-sink 20 gst-inspect-1.0 cuframessink
    [ "$RC" -eq 0 ] || fail "gst-inspect-1.0 cuframessink exited $RC"
    said inspect-sink "cuframes publisher" "key " "ring-size" "policy" "drop-oldest" "strict-wait" \
        "ack-timeout" "startup-timeout" "wait-subscribers" "wait-timeout" "group" "v1-peers" "same-user" \
        "runtime-dir" "NV12" "P010_10LE" "A420" "MIT/X11"
    run inspect-src 20 gst-inspect-1.0 cuframessrc
    [ "$RC" -eq 0 ] || fail "gst-inspect-1.0 cuframessrc exited $RC"
    said inspect-src "cuframes subscriber" "key " "mode" "sequential" "latest" "wait-timeout" \
        "timeout" "reconnect" "subscriber-name" "runtime-dir" "stats" "received" "dropped" "copied"
    # The source's waits are the cuframes command's (which are the library's,
    # rust/cuframes-cli/tests/cli_help.rs): 30 s for a publisher, 5 s for a frame.
    run cli-help 20 "$CLI" subscribe --help
    local pair ours theirs
    for pair in wait-timeout:--wait-timeout timeout:--timeout; do
        theirs=$(awk -v p="${pair%%:*}" '$1 == p && $2 == ":" { found = 1 } found && /Default: / { sub(/.*Default: /, ""); print $1; exit }' "$T/inspect-src.out")
        ours=$(awk -v o="${pair#*:}" '$1 == o { found = 1 } found && /\[default: / { sub(/.*\[default: /, ""); sub(/\].*/, ""); print; exit }' "$T/cli-help.out")
        # GStreamer in ms ("30000"), the command in seconds ("30s").
        [ -n "$theirs" ] && [ -n "$ours" ] && [ "$theirs" = "$(( ${ours%s} * 1000 ))" ] ||
            fail "cuframessrc ${pair%%:*} defaults to '$theirs' ms, subscribe ${pair#*:} to '$ours'"
    done
}

# 2. videotestsrc → cuframessink → ffmpeg, byte for byte.
test_gst_to_ffmpeg() {
    local key=gst2ff-$$
    run ref 30 "${GST[@]}" videotestsrc num-buffers=60 ! "$CAPS_NV12" ! filesink location="$T/ref.raw"
    bgrun pub 30 gst-launch-1.0 videotestsrc num-buffers=60 ! "$CAPS_NV12" ! \
        cuframessink key=$key wait-subscribers=1 policy=strict-wait
    local pub=$BGPID
    wait_socket $key
    run sub 30 "${FF[@]}" -f cuframes -i $key -f rawvideo "$T/sub.raw"
    [ "$RC" -eq 0 ] || fail "the ffmpeg subscriber exited $RC"
    waitrc $pub || fail "the GStreamer publisher exited $?"
    same_bytes "60 NV12 frames" "$T/ref.raw" "$T/sub.raw" 115200
    run gone 30 "${FF[@]}" -wait_timeout 0 -f cuframes -i $key -f framemd5 -
    [ "$RC" -ne 0 ] || fail "ffmpeg read a key whose publisher ended"
    [ -z "$(ls "$CUFRAMES_RUNTIME_DIR")" ] || fail "left in the runtime directory: $(ls "$CUFRAMES_RUNTIME_DIR")"
}

# 3. ffmpeg → cuframessrc, byte for byte.
test_ffmpeg_to_gst() {
    local key=ff2gst-$$
    run ref 30 "${FF[@]}" -f lavfi -i testsrc=size=320x240:rate=30 -frames:v 90 -pix_fmt nv12 -f rawvideo "$T/ref.raw"
    bgrun pub 30 "$FFMPEG" -nostdin -hide_banner -re -f lavfi -i testsrc=size=320x240:rate=30 -frames:v 90 \
        -pix_fmt nv12 -f cuframes -wait_subscribers 1 -policy strict_wait $key
    local pub=$BGPID
    run sub 30 gst-launch-1.0 cuframessrc key=$key wait-timeout=10000 ! filesink location="$T/sub.raw"
    [ "$RC" -eq 0 ] || fail "the GStreamer subscriber exited $RC"
    said sub "Got EOS"
    waitrc $pub || fail "the ffmpeg publisher exited $?"
    same_bytes "90 NV12 frames" "$T/ref.raw" "$T/sub.raw" 115200
}

# 4. One publisher (cuframessink), a GStreamer and an FFmpeg subscriber at once.
test_two_subscribers() {
    local key=two-$$
    run ref 30 "${GST[@]}" videotestsrc num-buffers=60 pattern=ball ! "$CAPS_NV12" ! filesink location="$T/ref.raw"
    bgrun pub 40 gst-launch-1.0 videotestsrc num-buffers=60 pattern=ball ! "$CAPS_NV12" ! \
        cuframessink key=$key wait-subscribers=2 policy=strict-wait
    local pub=$BGPID
    bgrun gstsub 40 gst-launch-1.0 cuframessrc key=$key wait-timeout=10000 ! filesink location="$T/gst.raw"
    local gstsub=$BGPID
    wait_socket $key
    bgrun ffsub 40 "$FFMPEG" -nostdin -hide_banner -loglevel error -f cuframes -i $key -f rawvideo "$T/ff.raw"
    local ffsub=$BGPID
    waitrc $gstsub || fail "the GStreamer subscriber exited $?"
    waitrc $ffsub || fail "the ffmpeg subscriber exited $?"
    waitrc $pub || fail "the publisher exited $?"
    same_bytes "GStreamer subscriber" "$T/ref.raw" "$T/gst.raw" 115200
    same_bytes "ffmpeg subscriber" "$T/ref.raw" "$T/ff.raw" 115200
}

# 5. A key nobody publishes: an error naming it, at once or after wait-timeout; by
# default the source waits for a publisher that comes later.
test_missing_key() {
    local t0=$SECONDS
    run sub 20 gst-launch-1.0 cuframessrc key=nosuchkey-$$ wait-timeout=0 ! fakesink
    [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] || fail "exited $RC (124: it hung)"
    said sub "no publisher for key 'nosuchkey-$$'" "wait-timeout"
    [ $((SECONDS - t0)) -le 5 ] || fail "took $((SECONDS - t0)) s to fail"
    t0=$SECONDS
    run wait 20 gst-launch-1.0 cuframessrc key=nosuchkey-$$ wait-timeout=1500 ! fakesink
    [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] || fail "with wait-timeout: exited $RC"
    said wait "nosuchkey-$$" "waited 1500 ms"
    [ $((SECONDS - t0)) -le 6 ] || fail "wait-timeout=1500 took $((SECONDS - t0)) s"
    run nokey 20 gst-launch-1.0 cuframessrc ! fakesink
    [ "$RC" -ne 0 ] || fail "a source without a key started"
    said nokey "no key: set the key property"
    run badkey 20 gst-launch-1.0 cuframessrc key=no/such ! fakesink
    [ "$RC" -ne 0 ] || fail "a source with a bad key started"
    said badkey "no/such"
    # The default wait (30 s): started 2 s before its publisher, it reads it.
    local key=late-$$
    bgrun late 40 gst-launch-1.0 cuframessrc key=$key num-buffers=10 ! fakesink
    local late=$BGPID
    sleep 2
    kill -0 $late 2>/dev/null || fail "with the default wait-timeout, it did not wait 2 s for a publisher"
    bgrun latepub 30 "$CLI" publish $key --memory host --size 64x48 --fps 30 --frames 10 --wait-subscribers 1 --quiet
    waitrc $late || fail "the source started before its publisher exited $?"
    said late "Got EOS"
}

# 6. What cannot be published: a format cuframes lacks, a key taken, no key.
test_unsupported_caps() {
    local key=caps-$$
    run yuy2 20 gst-launch-1.0 videotestsrc num-buffers=5 ! video/x-raw,format=YUY2,width=64,height=48 ! \
        cuframessink key=$key
    [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] || fail "YUY2: exited $RC"
    grep -qE "not-negotiated|not negotiated|could not link" "$T/yuy2.err" "$T/yuy2.out" ||
        fail "YUY2: no negotiation error"
    [ ! -e "$CUFRAMES_RUNTIME_DIR/$key.sock" ] || fail "YUY2: a socket was left"
    run nokey 20 gst-launch-1.0 videotestsrc num-buffers=5 ! cuframessink
    [ "$RC" -ne 0 ] || fail "a sink without a key ran"
    said nokey "no key: set the key property"
    bgrun cli 30 "$CLI" publish $key --memory host --size 64x48 --fps 30
    local cli=$BGPID
    wait_socket $key
    run taken 20 gst-launch-1.0 videotestsrc num-buffers=5 ! video/x-raw,format=NV12,width=64,height=48 ! \
        cuframessink key=$key
    [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] || fail "a taken key: exited $RC"
    said taken "cannot publish '$key'"
    kill -TERM -- -$cli 2>/dev/null
    waitrc $cli
}

# 7. The publisher restarts: cuframessrc follows it (new caps too) and every
# frame of both arrives. a) a clean end with reconnect=true; b) a kill -9
# (followed whatever reconnect says).
test_publisher_restart() {
    local key=restart-$$
    run ref1 30 "${FF[@]}" -f lavfi -i testsrc=size=320x240:rate=30 -frames:v 30 -pix_fmt nv12 -f rawvideo "$T/ref1.raw"
    run ref2 30 "${FF[@]}" -f lavfi -i testsrc2=size=160x120:rate=30 -frames:v 30 -pix_fmt nv12 -f rawvideo "$T/ref2.raw"
    bgrun sub 60 gst-launch-1.0 cuframessrc key=$key wait-timeout=3000 reconnect=true ! \
        filesink location="$T/sub.raw"
    local sub=$BGPID
    sleep 0.3
    run pub1 30 "${FF[@]}" -f lavfi -i testsrc=size=320x240:rate=30 -frames:v 30 -pix_fmt nv12 \
        -f cuframes -wait_subscribers 1 -policy strict_wait $key
    [ "$RC" -eq 0 ] || fail "the first publisher exited $RC"
    run pub2 30 "${FF[@]}" -f lavfi -i testsrc2=size=160x120:rate=30 -frames:v 30 -pix_fmt nv12 \
        -f cuframes -wait_subscribers 1 -policy strict_wait $key
    [ "$RC" -eq 0 ] || fail "the second publisher exited $RC"
    # No third publisher: after wait-timeout, the end of the stream.
    waitrc $sub || fail "the subscriber exited $?"
    cat "$T/ref1.raw" "$T/ref2.raw" >"$T/ref.raw"
    same_bytes "both publishers' frames" "$T/ref.raw" "$T/sub.raw"

    # b) kill -9 of the first publisher mid-stream, then a second one.
    key=restart-kill-$$
    bgrun ksub 60 gst-launch-1.0 cuframessrc key=$key wait-timeout=10000 ! filesink location="$T/ksub.raw"
    local ksub=$BGPID
    sleep 0.3
    bgrun kpub1 30 "$FFMPEG" -nostdin -hide_banner -re -f lavfi -i testsrc=size=320x240:rate=30 -frames:v 300 \
        -pix_fmt nv12 -f cuframes -wait_subscribers 1 -policy strict_wait $key
    local kpub1=$BGPID
    sleep 1.5
    kill -KILL -- -$kpub1
    waitrc $kpub1
    run kpub2 30 "${FF[@]}" -f lavfi -i testsrc2=size=160x120:rate=30 -frames:v 30 -pix_fmt nv12 \
        -f cuframes -wait_subscribers 1 -policy strict_wait $key
    [ "$RC" -eq 0 ] || fail "the publisher after the killed one exited $RC"
    waitrc $ksub || fail "the subscriber of a killed publisher exited $?"
    said ksub "went away" "Got EOS"
    # Its tail is the second publisher's 30 frames; before them, whole
    # frames of the first one, in order from its first.
    local size2 total first
    size2=$(stat -c %s "$T/ref2.raw")
    total=$(stat -c %s "$T/ksub.raw")
    first=$((total - size2))
    [ "$first" -gt 0 ] && [ $((first % 115200)) -eq 0 ] || fail "killed restart: $total bytes read"
    tail -c "$size2" "$T/ksub.raw" >"$T/ktail.raw"
    same_bytes "second publisher's frames" "$T/ref2.raw" "$T/ktail.raw"
    run kref1 30 "${FF[@]}" -f lavfi -i testsrc=size=320x240:rate=30 -frames:v $((first / 115200)) -pix_fmt nv12 \
        -f rawvideo "$T/kref1.raw"
    head -c "$first" "$T/ksub.raw" >"$T/khead.raw"
    same_bytes "killed publisher's $((first / 115200)) frames" "$T/kref1.raw" "$T/khead.raw" 115200
}

# 8. kill -9: of the GStreamer publisher (its subscriber ends with an error,
# no hang); of the GStreamer subscriber (the publisher goes on).
test_kill() {
    local key=kill-$$
    bgrun pub 60 gst-launch-1.0 videotestsrc is-live=true ! "$CAPS_NV12" ! cuframessink key=$key
    local pub=$BGPID
    wait_socket $key
    bgrun sub 60 gst-launch-1.0 cuframessrc key=$key wait-timeout=500 ! fakesink
    local sub=$BGPID
    sleep 1
    kill -KILL -- -$pub
    waitrc $pub
    local t0=$SECONDS
    waitrc $sub
    local rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -lt 128 ] || fail "the subscriber of a killed publisher exited $rc"
    [ $((SECONDS - t0)) -le 5 ] || fail "the subscriber took $((SECONDS - t0)) s to end"
    said sub "went away" "none came back within 500 ms"

    key=kill-sub-$$
    bgrun pub2 60 gst-launch-1.0 videotestsrc num-buffers=90 is-live=true ! "$CAPS_NV12" ! \
        cuframessink key=$key wait-subscribers=1 policy=strict-wait ack-timeout=2000
    local pub2=$BGPID
    wait_socket $key
    bgrun sub2 60 gst-launch-1.0 cuframessrc key=$key ! fakesink
    local sub2=$BGPID
    sleep 1
    kill -KILL -- -$sub2
    waitrc $sub2
    bgrun cli 60 "$CLI" subscribe $key --json --wait-timeout 5s
    local cli=$BGPID
    t0=$SECONDS
    waitrc $pub2 || fail "the publisher of a killed subscriber exited $?"
    [ $((SECONDS - t0)) -le 10 ] || fail "the publisher took $((SECONDS - t0)) s to end"
    waitrc $cli || fail "a subscriber joining after the kill exited $?"
    grep -qE '"frames":[1-9]' "$T/cli.out" || fail "a subscriber joining after the kill got no frame"
}

# 8b. A pipeline slower than the publisher (drop-oldest): the losses are
# warned about on the bus as they happen and summed up at the end; with
# mode=latest they are not warned about (skipping is what it asked for).
test_losses() {
    local key=loss-$$
    bgrun pub 30 "$CLI" publish $key --memory host --size 64x48 --fps 200 --frames 300 --wait-subscribers 1 --quiet
    local pub=$BGPID
    run sub 30 gst-launch-1.0 cuframessrc key=$key wait-timeout=5000 ! identity sleep-time=20000 ! fakesink
    [ "$RC" -eq 0 ] || fail "the slow subscriber exited $RC"
    waitrc $pub || fail "the publisher exited $?"
    said sub "frame(s) lost" "'$key' ended:" "Got EOS"
    grep -qE "ended: [0-9]+ frames received, [1-9][0-9]* lost" "$T/sub.all" || fail "no count of the losses at the end"
    key=latest-$$
    bgrun pub2 30 "$CLI" publish $key --memory host --size 64x48 --fps 200 --frames 300 --wait-subscribers 1 --quiet
    pub=$BGPID
    run latest 30 gst-launch-1.0 cuframessrc key=$key wait-timeout=5000 mode=latest ! identity sleep-time=20000 ! fakesink
    [ "$RC" -eq 0 ] || fail "the slow mode=latest subscriber exited $RC"
    waitrc $pub || fail "the second publisher exited $?"
    said latest "Got EOS"
    ! grep -q "lost" "$T/latest.all" || fail "mode=latest warned about skipped frames"
}

# 9. PLAYING ↔ NULL 100 times, descriptors counted (a Rust test).
test_state_cycles() {
    run cycles 300 cargo test -q -p gst-cuframes --test state_cycles -- --nocapture
    [ "$RC" -eq 0 ] || fail "cargo test --test state_cycles exited $RC"
    said cycles "100 cycles"
    grep -h "cycles in" "$T/cycles.err" | sed 's/^/     /'
}

# 10. Every format both ways: ffmpeg → cuframessrc byte for byte at 320x240,
# and cuframessink → cuframessrc at 40x18 (GStreamer's strides and cuframes'
# 256-byte pitches differ; rows without padding, since GStreamer leaves its
# padding bytes unwritten and they differ from run to run). Odd sizes (33x17)
# are the Rust test odd_sizes, which compares the picture bytes only.
FORMATS=(NV12:nv12 I420:yuv420p P010_10LE:p010le BGRA:bgra P016_LE:p016le Y444:yuv444p
    Y444_16LE:yuv444p16le RGBA:rgba BGRx:bgr0 RGBx:rgb0 P012_LE:p012le NV16:nv16 Y42B:yuv422p
    I420_10LE:yuv420p10le I422_10LE:yuv422p10le Y444_10LE:yuv444p10le A420:yuva420p)
test_formats() {
    local pair gf af n=0 key
    for pair in "${FORMATS[@]}"; do
        gf=${pair%%:*} af=${pair#*:}
        n=$((n + 1))
        key=fmt-$$-$n
        run ref-$gf 30 "${FF[@]}" -f lavfi -i testsrc2=size=320x240:rate=25 -frames:v 10 -pix_fmt $af -f rawvideo "$T/ref-$gf.raw"
        bgrun pub-$gf 30 "$FFMPEG" -nostdin -hide_banner -f lavfi -i testsrc2=size=320x240:rate=25 -frames:v 10 \
            -pix_fmt $af -f cuframes -wait_subscribers 1 -policy strict_wait $key
        local pub=$BGPID
        run sub-$gf 30 gst-launch-1.0 cuframessrc key=$key wait-timeout=10000 ! video/x-raw,format=$gf ! \
            filesink location="$T/sub-$gf.raw"
        [ "$RC" -eq 0 ] || fail "$gf from ffmpeg: the subscriber exited $RC"
        waitrc $pub || fail "$gf from ffmpeg: the publisher exited $?"
        same_bytes "$gf from ffmpeg $af" "$T/ref-$gf.raw" "$T/sub-$gf.raw"

        key=fmt-gst-$$-$n
        local caps="video/x-raw,format=$gf,width=40,height=18,framerate=25/1"
        run gref-$gf 30 "${GST[@]}" videotestsrc num-buffers=10 pattern=smpte ! "$caps" ! filesink location="$T/gref-$gf.raw"
        bgrun gpub-$gf 30 gst-launch-1.0 videotestsrc num-buffers=10 pattern=smpte ! "$caps" ! \
            cuframessink key=$key wait-subscribers=1 policy=strict-wait
        pub=$BGPID
        wait_socket $key
        run gsub-$gf 30 gst-launch-1.0 cuframessrc key=$key ! filesink location="$T/gsub-$gf.raw"
        [ "$RC" -eq 0 ] || fail "$gf 40x18 GStreamer to GStreamer: the subscriber exited $RC"
        waitrc $pub || fail "$gf 40x18: the publisher exited $?"
        same_bytes "$gf 40x18 GStreamer to GStreamer" "$T/gref-$gf.raw" "$T/gsub-$gf.raw"
    done
}

# 11. Every format at odd sizes, GStreamer to GStreamer, in one process (a Rust test).
test_odd_sizes() {
    run odd 300 cargo test -q -p gst-cuframes --test odd_sizes -- --nocapture
    [ "$RC" -eq 0 ] || fail "cargo test --test odd_sizes exited $RC"
    said odd "formats at odd sizes"
    grep -h "formats at odd sizes" "$T/odd.err" | sed 's/^/     /'
}

# 12. A CUDA publisher is refused by cuframessrc with a clear error (needs a GPU).
# A CUDA publisher (the CLI's pattern) read in CUDA memory and downloaded, byte for
# byte as the same pattern read from a host publisher. Needs a GPU and GStreamer's
# CUDA elements (cudadownload); skipped without.
test_cuda_frames() {
    local memory
    for memory in cuda host; do
        local key=pattern-$memory-$$
        bgrun pub-$memory 30 "$CLI" publish $key --memory $memory --size 320x240 --fps 0 --frames 30 \
            --policy strict-wait --wait-subscribers 1
        wait_socket $key
        local chain=()
        [ $memory = cuda ] && chain=(! cudadownload)
        run sub-$memory 30 "${GST[@]}" cuframessrc key=$key num-buffers=30 "${chain[@]}" ! \
            video/x-raw,format=NV12 ! filesink location="$T/$memory.raw"
        [ "$RC" -eq 0 ] || fail "the $memory subscriber exited $RC"
    done
    same_bytes "30 pattern frames, CUDA and host" "$T/host.raw" "$T/cuda.raw" 115200
}

# 13. The benchmark's tools on host memory (scripts/gpu/gst-bench.sh runs them on the
# GPU): the probe times every buffer on both sides, cuframessrc's reference
# timestamps match each consumer buffer to the producer's, the report counts it all.
# bench_probe: the benchmark's probe, built as gst-bench.sh stages it, once; its path.
bench_probe() {
    [ -x "$T/gst-bench-probe" ] ||
        GST_BENCH_PROBE=$T/gst-bench-probe scripts/gpu/gst-bench.sh stage 2>"$T/cc.err" || return 1
    echo "$T/gst-bench-probe"
}

test_bench_probe() {
    local probe raw=$T/raw/decoder-1080p-1-cuframes key=bench-$$
    probe=$(bench_probe) || fail "the probe does not build: $(cat "$T/cc.err")"
    mkdir -p "$raw"
    echo "cuframes 1" >"$raw/case"
    bgrun sub 30 "$probe" "$raw/consumer-1.log" cuframessrc key=$key wait-timeout=10000 ! identity name=probe ! \
        fakesink name=sink sync=false
    local sub=$BGPID
    run pub 30 "$probe" "$raw/producer.log" videotestsrc num-buffers=60 ! video/x-raw,format=NV12,width=64,height=48 ! \
        identity name=probe ! cuframessink name=sink key=$key sync=false policy=strict-wait wait-subscribers=1
    [ "$RC" -eq 0 ] || fail "the producer exited $RC"
    wait "$sub" || fail "the consumer failed"
    says "$raw/producer.log" "end pid=" "frames=60 "
    says "$raw/consumer-1.log" "end pid=" "frames=60 "
    # Every consumer buffer carries the publisher's PTS (not -1).
    [ "$(awk '$1 == "buf" && $5 >= 0' "$raw/consumer-1.log" | wc -l)" = 60 ] || fail "buffers without the publisher's PTS"
    # What the GPU run adds, made up here: nvidia-smi's samples (pid, MiB) and the
    # copy counter's lines (scripts/gpu/memcpy-count.c), read by the report.
    local ppid cpid counts=$T/raw/copies-1080p-1-cuframes
    ppid=$(sed -n 's/^end pid=\([0-9]*\) .*/\1/p' "$raw/producer.log")
    cpid=$(sed -n 's/^end pid=\([0-9]*\) .*/\1/p' "$raw/consumer-1.log")
    printf '%s, 1000\n%s, 686\n%s, 1140\n' "$ppid" "$cpid" "$ppid" >"$raw/gpumem.csv"
    mkdir -p "$counts"
    printf '%s\n' "memcpy-count pid=$ppid HtoD=0/0 DtoH=0/0 DtoD=120/1000 PtoP=0/0 other=0/0 contexts=2" \
        "context-made pid=$ppid n=1 by: libgstcuda-1.0.so.0(gst_cuda_context_new+0x10) [0x1]" \
        "context-made pid=$ppid n=2 by: libgstcuframes.so(+0x99) [0x2]" >"$counts/producer.count"
    echo "memcpy-count pid=$cpid HtoD=0/0 DtoH=0/0 DtoD=0/0 PtoP=0/0 other=0/0 contexts=1" >"$counts/consumer-1.count"
    python3 scripts/gpu/gst-bench-report.py "$T/raw" >"$T/table.md" || fail "the report failed"
    # 60 produced, 60 received, and a latency from the frames matched (not "–");
    # each process's peak memory, copies per frame, contexts and who made them.
    local row
    row=$(grep -E '^\| 1080p \| 1 \| cuframes \| 60 \| 60 \|' "$T/table.md")
    [ -n "$row" ] && ! grep -qE '\| – / – \|' <<<"$row" || fail "the report's row: $(grep cuframes "$T/table.md")"
    grep -qF '| 1140 / 686 | 2.00 + 0.00 | 2 / 1 |' <<<"$row" || fail "memory, copies, contexts: $row"
    grep -qF 'producer, context 2: `libgstcuframes.so(+0x99) [0x2]`' "$T/table.md" ||
        fail "who made the contexts: $(grep context "$T/table.md")"
}

# 13b. The benchmark script itself, on host memory (GST_BENCH_HOST=1: its fast, slow
# and restart cases, cuframes only): what its tables say of each.
test_bench_script() {
    local probe table
    probe=$(bench_probe) || fail "the probe does not build: $(cat "$T/cc.err")"
    run bench 120 env GST_BENCH_HOST=1 GST_BENCH_PROBE="$probe" GST_BENCH_RAW="$T/bench-raw" OUT="$T/bench-out" \
        GST_BENCH_CONSUMERS=1 FAST_SIZES=320x240 scripts/gpu/gst-bench.sh run
    [ "$RC" -eq 0 ] || fail "gst-bench.sh run exited $RC"
    table=$T/bench-out/gst-bench/table.md
    # Fast: every frame produced reached the consumer, at a rate.
    grep -qE '^\| 240p \| 1 \| cuframes \| ([0-9]+) \| [0-9]+ \| \1 \| [0-9]+ \|$' "$table" ||
        fail "fast: $(grep '^| 240p' "$table")"
    # Slow: drop-oldest loses frames and says so; strict-wait loses none.
    grep -qE '^\| cuframes-drop-oldest \| 90 \| [0-9]+ \| [1-9][0-9]* \| .*lost' "$table" ||
        fail "slow, drop-oldest: $(grep drop-oldest "$table")"
    grep -qE '^\| cuframes-strict-wait \| 90 \| 90 \| 0 \|' "$table" || fail "slow, strict-wait: $(grep strict-wait "$table")"
    # Restart: frames before the kill and after the new producer, and the consumer was told.
    grep -qE '^\| cuframes \| [1-9][0-9]* \| [1-9][0-9]* \| [0-9.]+ \| .*went away' "$table" ||
        fail "restart: $(grep -A3 'killed' "$table" | tail -n 1)"
}

# 14. Ctrl-C while the source waits for its first publisher (the default 30 s):
# the wait is in the streaming thread, not the state change to PAUSED, so
# gst-launch handles it at once (-e: an EOS, then NULL) and exits 0. (A wait in
# the state change: gst-launch either did not act on Ctrl-C until it was over,
# or, before it installs its handler, was killed by it.)
test_interrupt_wait() {
    bgrun wait 20 gst-launch-1.0 -e cuframessrc key=nobody-$$ ! fakesink
    local group=$BGPID gst i
    sleep 1
    gst=$(pgrep -P $group gst-launch-1.0)
    [ -n "$gst" ] || fail "gst-launch-1.0 did not wait for a publisher"
    kill -INT $gst
    # 3 s at most (it waited out the 30 s before).
    for i in $(seq 30); do
        kill -0 $group 2>/dev/null || break
        sleep 0.1
    done
    ! kill -0 $group 2>/dev/null || fail "still running 3 s after Ctrl-C"
    waitrc $group
    local rc=$?
    [ $rc -eq 0 ] || fail "exited $rc after Ctrl-C (0: an orderly stop; 130: killed by it)"
    said wait "handling interrupt"
}

inside() {
    FF=("$FFMPEG" -nostdin -hide_banner -nostats -loglevel error)
    GST=(gst-launch-1.0 -q)
    T=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-gstreamer.XXXXXX")
    export CUFRAMES_RUNTIME_DIR="$T/run"
    mkdir -p "$CUFRAMES_RUNTIME_DIR"
    export GST_PLUGIN_PATH=$PLUGIN_DIR
    # A registry of our own: the plugin is scanned afresh, nothing shared.
    export GST_REGISTRY=$T/registry.bin
    trap 'for g in "${STARTED[@]}"; do kill -KILL -- "-$g" 2>/dev/null; done; wait 2>/dev/null; rm -f /dev/shm/cuframes-*-$$ /dev/shm/cuframes-*-$$-*; rm -rf "$T"' EXIT
    "$1"
    echo PASS
}

if [ "${1:-}" = --inside ]; then
    FFMPEG=$2 CLI=$3
    inside "$4"
    exit 0
fi

# ---- the runner ---------------------------------------------------------------

TESTS=(test_inspect test_gst_to_ffmpeg test_ffmpeg_to_gst test_two_subscribers test_missing_key
    test_unsupported_caps test_publisher_restart test_kill test_losses test_state_cycles test_formats test_odd_sizes test_cuda_frames
    test_bench_probe test_bench_script test_interrupt_wait)
NEEDS_FFMPEG=" test_gst_to_ffmpeg test_ffmpeg_to_gst test_two_subscribers test_publisher_restart test_formats "

selected() {
    [ ${#SELECTED[@]} -eq 0 ] && return 0
    local w
    for w in "${SELECTED[@]}"; do [[ $1 == *"$w"* ]] && return 0; done
    return 1
}

# The patched ffmpeg: FFMPEG, else build/ffmpeg/bin/ffmpeg (scripts/build-ffmpeg.sh).
find_ffmpeg() {
    local f
    for f in ${FFMPEG:-} build/ffmpeg/bin/ffmpeg; do
        [ -x "$f" ] && grep -q "cuframes muxer" <<<"$("$f" -hide_banner -h muxer=cuframes 2>/dev/null)" &&
            { realpath "$f"; return; }
    done
}

SELECTED=("$@")
why_not=""
if ! ensure_gstreamer; then
    why_not="GStreamer is not installed (apt-get install ${GSTREAMER_PACKAGES[*]})"
elif ! command -v cargo >/dev/null; then
    why_not="no cargo to build the plugin"
elif ! cargo build -q -p gst-cuframes -p cuframes-cli; then
    echo "FAIL cargo build -p gst-cuframes -p cuframes-cli"
    echo "$LABEL: 0 passed, 1 failed, 0 skipped"
    exit 1
elif [ ! -f "$PLUGIN_DIR/libgstcuframes.so" ]; then
    why_not="no plugin at $PLUGIN_DIR/libgstcuframes.so"
fi
FFMPEG_FOUND=$(find_ffmpeg)
CUDA_NOTE=""
if [ -z "$why_not" ] && selected test_cuda_frames; then
    probe=$(mktemp -d)
    CUFRAMES_RUNTIME_DIR=$probe timeout 20 "$CLI" publish cuda-probe-$$ --memory cuda --size 64x48 --frames 1 \
        --quiet >/dev/null 2>"$probe/err" || CUDA_NOTE="no CUDA publisher here: $(tail -n 1 "$probe/err" | cut -c1-120)"
    rm -rf "$probe"
fi

passed=0 failed=0 skipped=0
for name in "${TESTS[@]}"; do
    selected "$name" || continue
    reason=$why_not
    if [ -z "$reason" ] && [[ $NEEDS_FFMPEG == *" $name "* ]] && [ -z "$FFMPEG_FOUND" ]; then
        reason="no patched ffmpeg (FFMPEG, build/ffmpeg/bin/ffmpeg; scripts/build-ffmpeg.sh)"
    fi
    if [ -z "$reason" ] && [ "$name" = test_cuda_frames ] && [ -n "$CUDA_NOTE" ]; then
        reason=$CUDA_NOTE
    fi
    if [ -n "$reason" ]; then
        echo "SKIP $name: $reason"
        skipped=$((skipped + 1))
        continue
    fi
    started=$SECONDS
    out=$(bash "$0" --inside "$FFMPEG_FOUND" "$CLI" "$name" 2>&1)
    if grep -qx PASS <<<"$out"; then
        echo "ok   $name ($((SECONDS - started)) s)"
        grep '^     ' <<<"$out"
        passed=$((passed + 1))
    else
        echo "FAIL $name ($((SECONDS - started)) s)"
        sed 's/^/     /' <<<"$out"
        failed=$((failed + 1))
    fi
done
echo "$LABEL: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
