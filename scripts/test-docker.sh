#!/usr/bin/env bash
# The Docker image, built and run for real (host memory; no GPU, no registry needed).
#
#   scripts/test-docker.sh
#
# 1. Docker: installs docker.io and debootstrap when missing (apt, as root) and starts
#    `dockerd --bridge=none --iptables=false --ip-forward=false` when no daemon answers (log:
#    build/test-docker/dockerd.log; stopped at the end only if started here);
# 2. stand-ins for the base images (docker/standin/build.sh; reused once built);
# 3. `docker build --network host` of the Dockerfile from them, as image cuframes-ci
#    (FFmpeg's objects come from build/ccache, which .dockerignore lets into the context:
#    run scripts/build-ffmpeg.sh first, as scripts/test.sh does, or it compiles them all);
# 4. containers with --network none that share nothing but a named volume on
#    /run/cuframes (each has its own PID, IPC and network namespace), run as non-root
#    users of one group:
#    a. one publisher and two subscribers: every frame framemd5-exact against a
#       direct decode of the same source;
#    b. the publisher killed (docker kill) and restarted (docker start): the
#       subscribers (-reconnect 1) follow it and get the new publisher's frames;
#    c. a subscriber without the volume fails, in bounded time, with a clear message;
#    d. the GStreamer plugin: a gst-launch-1.0 publisher (filesrc ! cuframessink), a
#       gst-launch-1.0 subscriber (cuframessrc ! filesink) and an ffmpeg one, each in
#       its own container: both byte for byte what the publisher read (fails without
#       the plugin: gst-launch-1.0 has no such element then);
#    the image's labels name its licences, and it carries the licence texts;
# 5. the Debian packages (build/deb, made by scripts/package-deb.sh when missing)
#    installed with apt into a clean container from the bookworm stand-in (gcc,
#    libc6-dev and pkgconf beside them, nothing else of ours), then used there with no
#    network:
#    e. apt installs them, and the command, its completion and the library are where
#       the packages put them;
#    f. `cuframes publish` and `cuframes subscribe --verify` of the package: every
#       frame verified;
#    g. the C API tests (tests/c/test_capi.c, test_two_process.c) built with
#       `pkg-config cuframes` against the package, shared and static, and run.
#
# Prints ok/FAILED for each check, how long each phase took, and
# "docker tests: N passed, N failed, N skipped"; exits non-zero on a failure. Only
# where Docker cannot be installed or started is everything skipped, with the reason,
# and the exit status 0. Logs: build/test-docker/.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
ROOT=$PWD
LOG_DIR=$ROOT/build/test-docker
IMAGE=${CUFRAMES_TEST_IMAGE:-cuframes-ci}
PREFIX=cuframes-test-$$
VOLUME=$PREFIX-run
# Users: the publisher and the first subscriber have the shared group as their primary
# group, the second subscriber only as a supplementary one.
GID=1500
PUB_USER=(--user "1001:$GID")
SUB1_USER=(--user "1002:$GID")
SUB2_USER=(--user 1003:1003 --group-add "$GID")
VOL=(-v "$VOLUME:/run/cuframes")
FF=(ffmpeg -nostdin -hide_banner -nostats)

CHECK_BUILD="image build (Dockerfile, stand-in bases)"
CHECK_FRAMES="a. publisher + 2 subscriber containers: frames exact"
CHECK_RESTART="b. publisher killed, restarted: subscribers follow"
CHECK_ISOLATED="c. subscriber without the volume: clear error"
CHECK_GSTREAMER="d. GStreamer: cuframessink -> cuframessrc, ffmpeg"
CHECK_LABELS="image labels, licence texts and environment"
CHECK_DEB_INSTALL="e. the .debs installed in a clean container"
CHECK_DEB_CLI="f. publish | subscribe --verify from the .deb"
CHECK_DEB_C="g. C tests built with pkg-config cuframes"
LATER_CHECKS=("$CHECK_FRAMES" "$CHECK_RESTART" "$CHECK_ISOLATED" "$CHECK_GSTREAMER" "$CHECK_LABELS"
    "$CHECK_DEB_INSTALL" "$CHECK_DEB_CLI" "$CHECK_DEB_C")

mkdir -p "$LOG_DIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-test-docker.XXXXXX")
T0=$SECONDS
PASSED=0
FAILED=0
SKIPPED=0
DOCKERD_PID=
CONTAINERS=()

say() { echo "test-docker: $*"; }
result() {
    local name=$1 ok=$2
    shift 2
    if [ "$ok" = 1 ]; then
        PASSED=$((PASSED + 1))
        printf 'ok     %-52s %s\n' "$name" "$*"
    else
        FAILED=$((FAILED + 1))
        printf 'FAILED %-52s %s\n' "$name" "$*"
    fi
}
skipped() {
    SKIPPED=$((SKIPPED + 1))
    printf 'skip   %-52s %s\n' "$1" "$2"
}
summary() {
    say "took $((SECONDS - T0)) s"
    echo "docker tests: $PASSED passed, $FAILED failed, $SKIPPED skipped"
}
# Docker is not to be had here: every check is skipped, and that is not a failure.
skip_all() {
    local check
    say "skipping every check: $1"
    for check in "$CHECK_BUILD" "${LATER_CHECKS[@]}"; do
        skipped "$check" "($1)"
    done
    summary
    exit 0
}
# show FILE...: the tail of logs, after a failure.
show() {
    local f
    for f in "$@"; do
        [ -s "$f" ] || continue
        echo "  --- $(basename "$f") (last lines)"
        tail -n 20 "$f" | sed 's/^/  | /'
    done
}
phase_took() { say "$1 took $((SECONDS - $2)) s"; }

cleanup() {
    set +e
    if [ ${#CONTAINERS[@]} -gt 0 ]; then
        docker rm -f "${CONTAINERS[@]}" >/dev/null 2>&1
    fi
    docker volume rm -f "$VOLUME" >/dev/null 2>&1
    if [ -n "$DOCKERD_PID" ]; then
        say "stopping the dockerd started here (pid $DOCKERD_PID)"
        kill -TERM "$DOCKERD_PID" 2>/dev/null
        for _ in $(seq 60); do
            kill -0 "$DOCKERD_PID" 2>/dev/null || break
            sleep 0.5
        done
        kill -KILL "$DOCKERD_PID" 2>/dev/null
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- 1. Docker
docker_answers() { docker info >/dev/null 2>&1; }

phase=$SECONDS
if ! docker_answers; then
    [ "$(id -u)" = 0 ] || skip_all "no Docker daemon answers and starting one needs root"
    missing=()
    command -v docker >/dev/null && command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    if [ ${#missing[@]} -gt 0 ]; then
        command -v apt-get >/dev/null || skip_all "no apt-get to install ${missing[*]}"
        say "installing ${missing[*]} (log: $LOG_DIR/apt.log)…"
        if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive \
                 apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$LOG_DIR/apt.log" 2>&1; then
            skip_all "cannot install ${missing[*]}: $(tail -n 1 "$LOG_DIR/apt.log")"
        fi
    fi
    # A daemon the package's scripts may have started counts as well.
    if ! docker_answers; then
        # A pid file left by a dockerd that died stops the next one from starting.
        if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
            rm -f /var/run/docker.pid
        fi
        # No bridge, no iptables rules, no IP forwarding: nothing on the host's network
        # changes, and containers run with --network none (builds with the host's).
        say "starting dockerd (log: $LOG_DIR/dockerd.log)…"
        dockerd --bridge=none --iptables=false --ip-forward=false >"$LOG_DIR/dockerd.log" 2>&1 &
        DOCKERD_PID=$!
        for _ in $(seq 120); do
            docker_answers && break
            kill -0 "$DOCKERD_PID" 2>/dev/null || break
            sleep 0.5
        done
        if ! docker_answers; then
            reason="dockerd did not start: $(tail -n 1 "$LOG_DIR/dockerd.log")"
            kill -KILL "$DOCKERD_PID" 2>/dev/null || true
            DOCKERD_PID=
            skip_all "$reason"
        fi
    fi
else
    # The stand-in root needs debootstrap even where a daemon already runs.
    if ! command -v debootstrap >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap \
            >"$LOG_DIR/apt.log" 2>&1 || true
    fi
fi
say "docker: $(docker version --format 'server {{.Server.Version}}, client {{.Client.Version}}')," \
    "storage $(docker info --format '{{.Driver}}')"
phase_took "docker (install, daemon)" "$phase"
# The classic builder: it takes the stand-ins from the local image store, and needs
# neither a registry nor the buildx plugin.
export DOCKER_BUILDKIT=0

# ---------------------------------------------------------------- 2. stand-ins
phase=$SECONDS
if ! standins=$(docker/standin/build.sh --log-dir "$LOG_DIR"); then
    result "$CHECK_BUILD" 0 "(the stand-in base images could not be built)"
    for check in "${LATER_CHECKS[@]}"; do skipped "$check" "(no image)"; done
    summary
    exit 1
fi
RUNTIME_IMAGE=$(sed -n 's/^RUNTIME_IMAGE=//p' <<<"$standins")
RUST_IMAGE=$(sed -n 's/^RUST_IMAGE=//p' <<<"$standins")
phase_took "stand-ins ($RUST_IMAGE, $RUNTIME_IMAGE)" "$phase"

# ---------------------------------------------------------------- 3. the image
phase=$SECONDS
say "docker build -t $IMAGE (log: $LOG_DIR/image-build.log)…"
# The build stage is tagged too ($IMAGE-build), so that the images a new build replaces
# can be removed below with all their layers (1.3 GB per change of the sources).
replaced=$(docker image inspect -f '{{.Id}}' "$IMAGE" "$IMAGE-build" 2>/dev/null || true)
build_image() {
    docker build --network host --build-arg RUST_IMAGE="$RUST_IMAGE" \
        --build-arg RUNTIME_IMAGE="$RUNTIME_IMAGE" "$@" . >>"$LOG_DIR/image-build.log" 2>&1
}
: >"$LOG_DIR/image-build.log"
if ! build_image --target build -t "$IMAGE-build" || ! build_image -t "$IMAGE"; then
    show "$LOG_DIR/image-build.log"
    result "$CHECK_BUILD" 0 "($((SECONDS - phase)) s)"
    for check in "${LATER_CHECKS[@]}"; do skipped "$check" "(no image)"; done
    summary
    exit 1
fi
current=$(docker image inspect -f '{{.Id}}' "$IMAGE" "$IMAGE-build")
for id in $replaced; do
    grep -qx "$id" <<<"$current" || docker rmi "$id" >/dev/null 2>&1 || true
done
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
base_size=$(docker image inspect -f '{{.Size}}' "$RUNTIME_IMAGE")
result "$CHECK_BUILD" 1 "($((SECONDS - phase)) s; $((size / 1000000)) MB," \
    "of which the base $((base_size / 1000000)) MB)"
# How much of FFmpeg came from build/ccache (the host's build, through the context),
# when FFmpeg was built at all (an unchanged context reuses every layer).
context=$(sed -n 's/^Sending build context to Docker daemon *//p' "$LOG_DIR/image-build.log" | head -n 1)
cached=$(sed -n 's/^build-ffmpeg: ccache: //p' "$LOG_DIR/image-build.log" | tail -n 1)
say "build context ${context:-?}${cached:+; FFmpeg: $cached}"
phase_took "image build" "$phase"

# ---------------------------------------------------------------- 4. containers
phase=$SECONDS

# start NAME ARGS...: a detached container $PREFIX-NAME without a network. A container
# that cannot be started is reported, and its check fails on its exit status.
start() {
    local name=$PREFIX-$1
    shift
    CONTAINERS+=("$name")
    docker run -d --name "$name" --network none "$@" >/dev/null ||
        echo "  docker run --name $name failed"
}
# finished NAME LIMIT: the exit status of container NAME, waited for at most LIMIT s
# (124: still running then, and killed).
finished() {
    local rc
    if rc=$(timeout "$2" docker wait "$PREFIX-$1"); then
        echo "$rc"
    else
        docker kill "$PREFIX-$1" >/dev/null 2>&1 || true
        echo 124
    fi
}
# logs NAME DIR: stdout and stderr of container NAME, into DIR/NAME.out and .err.
logs() { docker logs "$PREFIX-$1" >"$2/$1.out" 2>"$2/$1.err" || true; }
# finish DIR OK PUBLISHER SUBSCRIBER...: waits for the subscribers (120 s at most),
# then the publisher (60 s), their logs into DIR; fails when one did not exit 0. The
# publisher is stopped first when a subscriber failed (or OK is 0): it would wait out
# its -wait_timeout.
finish() {
    local d=$1 ok=$2 pub=$3 c rc
    shift 3
    for c in "$@"; do
        rc=$(finished "$c" 120)
        logs "$c" "$d"
        [ "$rc" = 0 ] || { echo "  $c exited $rc"; ok=0; }
    done
    [ "$ok" = 1 ] || docker kill "$PREFIX-$pub" >/dev/null 2>&1 || true
    rc=$(finished "$pub" 60)
    logs "$pub" "$d"
    [ "$rc" = 0 ] || { echo "  $pub exited $rc"; ok=0; }
    [ "$ok" = 1 ]
}
running() { [ "$(docker inspect -f '{{.State.Running}}' "$PREFIX-$1" 2>/dev/null)" = true ]; }
# Frames a running framemd5 subscriber has written so far.
frames_so_far() { docker logs "$PREFIX-$1" 2>/dev/null | grep -vc '^#' || true; }
# The MD5 column of a framemd5 file, one line per frame.
md5s() { { grep -v '^#' "$1" || true; } | awk -F', *' '{ print $6 }'; }
# reference DIR NAME SOURCE N: framemd5 of N frames of SOURCE decoded directly (nv12).
reference() {
    docker run --rm --network none "$IMAGE" "${FF[@]}" -f lavfi -i "$3" -frames:v "$4" \
        -pix_fmt nv12 -f framemd5 - >"$1/$2.md5" 2>"$1/$2.err"
}
# Each container must have its own IPC and PID namespace and no network: sharing
# one of them would let the frames through another way than the volume.
isolated() {
    local c modes
    for c in "$@"; do
        modes=$(docker inspect -f '{{.HostConfig.IpcMode}} {{.HostConfig.PidMode}} {{.HostConfig.NetworkMode}}' "$PREFIX-$c")
        case $modes in
            "private  none" | "shareable  none") ;;
            *) echo "  $c: ipc, pid, network modes '$modes' (want its own namespaces, no network)"
               return 1 ;;
        esac
    done
}

docker volume create "$VOLUME" >/dev/null

# a. frames through the volume alone, exact.
check_frames() {
    local d=$WORK/frames n=250 src="testsrc2=size=640x360:rate=25" ok=1 t=$SECONDS c
    mkdir -p "$d"
    reference "$d" ref "$src" $n || { echo "  the direct decode failed"; show "$d/ref.err"; ok=0; }
    start pub-a "${PUB_USER[@]}" "${VOL[@]}" "$IMAGE" "${FF[@]}" -f lavfi -i "$src" -frames:v $n \
        -pix_fmt nv12 -f cuframes -policy strict_wait -wait_subscribers 2 -group "$GID" cam1
    start sub1-a "${SUB1_USER[@]}" "${VOL[@]}" "$IMAGE" "${FF[@]}" -f cuframes -timeout 20 \
        -i cam1 -f framemd5 -
    start sub2-a "${SUB2_USER[@]}" "${VOL[@]}" "$IMAGE" "${FF[@]}" -f cuframes -timeout 20 \
        -i cam1 -f framemd5 -
    isolated pub-a sub1-a sub2-a || ok=0
    finish "$d" $ok pub-a sub1-a sub2-a || ok=0
    for c in sub1-a sub2-a; do
        if [ "$(md5s "$d/$c.out" | wc -l)" != $n ] || ! cmp -s <(md5s "$d/ref.md5") <(md5s "$d/$c.out"); then
            echo "  $c: $(md5s "$d/$c.out" | wc -l) frames, expected the $n of the direct decode"
            diff <(md5s "$d/ref.md5") <(md5s "$d/$c.out") | head -n 4 | sed 's/^/  /' || true
            ok=0
        fi
    done
    [ $ok = 1 ] || show "$d/pub-a.err" "$d/sub1-a.err" "$d/sub2-a.err"
    result "$CHECK_FRAMES" $ok "(2 x $n frames 640x360 nv12, $((SECONDS - t)) s)"
}

# b. kill -9 of the publisher's container, then the same container started again: each
# subscriber's frames are a prefix of the stream, then the whole stream once more.
check_restart() {
    local d=$WORK/restart n=100 src="testsrc2=size=320x240:rate=25" ok=1 t=$SECONDS c rc
    mkdir -p "$d"
    reference "$d" ref "$src" $n || { echo "  the direct decode failed"; show "$d/ref.err"; ok=0; }
    start pub-b "${PUB_USER[@]}" "${VOL[@]}" "$IMAGE" "${FF[@]}" -re -f lavfi -i "$src" -frames:v $n \
        -pix_fmt nv12 -f cuframes -policy strict_wait -wait_subscribers 2 -group "$GID" cam2
    local sub=(-f cuframes -reconnect 1 -reconnect_timeout 5 -timeout 20 -i cam2
               -flush_packets 1 -f framemd5 -)
    start sub1-b "${SUB1_USER[@]}" "${VOL[@]}" "$IMAGE" "${FF[@]}" "${sub[@]}"
    start sub2-b "${SUB2_USER[@]}" "${VOL[@]}" "$IMAGE" "${FF[@]}" "${sub[@]}"
    isolated pub-b sub1-b sub2-b || ok=0
    # Kill it mid-stream, once both subscribers have some of its frames.
    both_have_frames() { [ "$(frames_so_far sub1-b)" -ge 10 ] && [ "$(frames_so_far sub2-b)" -ge 10 ]; }
    for _ in $(seq 300); do
        both_have_frames && break
        if ! running sub1-b || ! running sub2-b; then break; fi
        sleep 0.1
    done
    if both_have_frames; then
        docker kill "$PREFIX-pub-b" >/dev/null || { echo "  docker kill failed"; ok=0; }
        rc=$(finished pub-b 30)
        [ "$rc" = 137 ] || { echo "  the killed publisher exited $rc (expected 137)"; ok=0; }
        docker start "$PREFIX-pub-b" >/dev/null || { echo "  docker start failed"; ok=0; }
    else
        echo "  the subscribers got no frames from the first publisher"
        ok=0
        docker kill "$PREFIX-pub-b" >/dev/null 2>&1 || true
    fi
    for c in sub1-b sub2-b pub-b; do
        rc=$(finished $c 120)
        logs $c "$d"
        [ "$rc" = 0 ] || { echo "  $c exited $rc"; ok=0; }
    done
    local detail=()
    for c in sub1-b sub2-b; do
        local got before
        got=$(md5s "$d/$c.out" | wc -l)
        before=$((got - n))
        if [ $before -lt 1 ] || [ $before -ge $n ] ||
            ! cmp -s <(md5s "$d/ref.md5" | head -n $before) <(md5s "$d/$c.out" | head -n $before) ||
            ! cmp -s <(md5s "$d/ref.md5") <(md5s "$d/$c.out" | tail -n $n); then
            echo "  $c: $got frames, expected 1-$((n - 1)) from the first run, then all $n of the second (in order)"
            ok=0
            detail+=("$c $got frames")
        else
            detail+=("$c $before+$n frames")
        fi
        grep -q "Resumed 'cam2'" "$d/$c.err" || { echo "  $c: no 'Resumed' message"; ok=0; }
    done
    [ $ok = 1 ] || show "$d/pub-b.err" "$d/sub1-b.err" "$d/sub2-b.err"
    result "$CHECK_RESTART" $ok "(${detail[0]}, ${detail[1]}; $((SECONDS - t)) s)"
    [ $ok = 1 ] && grep -h "went away\|Resumed" "$d/sub1-b.err" | sed 's/^\[[^]]*\] /     /'
    return 0
}

# c. a live publisher on the volume, and a subscriber that lacks the volume.
check_isolated() {
    local d=$WORK/isolated ok=1 rc
    mkdir -p "$d"
    start pub-c "${PUB_USER[@]}" "${VOL[@]}" "$IMAGE" cuframes publish cam3 --memory host \
        --size 320x240 --fps 25 --group "$GID" --quiet
    for _ in $(seq 100); do
        docker exec "$PREFIX-pub-c" test -S /run/cuframes/cam3.sock 2>/dev/null && break
        sleep 0.2
    done
    docker exec "$PREFIX-pub-c" test -S /run/cuframes/cam3.sock 2>/dev/null ||
        { echo "  the publisher did not start"; logs pub-c "$d"; show "$d/pub-c.err"; ok=0; }
    local t=$SECONDS
    rc=0
    timeout 60 docker run --rm --network none "${SUB1_USER[@]}" "$IMAGE" "${FF[@]}" \
        -f cuframes -wait_timeout 3 -i cam3 -f null - >"$d/sub.out" 2>"$d/sub.err" || rc=$?
    local took=$((SECONDS - t))
    if [ $rc = 0 ] || [ $rc = 124 ]; then
        echo "  the subscriber exited $rc (expected an error)"
        ok=0
    fi
    [ $took -le 30 ] || { echo "  it took $took s (limit 30)"; ok=0; }
    grep -q "no publisher for key 'cam3'" "$d/sub.err" || { echo "  no 'no publisher for key' message"; ok=0; }
    docker stop -t 5 "$PREFIX-pub-c" >/dev/null 2>&1 || true
    [ $ok = 1 ] || show "$d/sub.err"
    result "$CHECK_ISOLATED" $ok "(exit $rc after $took s)"
    [ $ok = 1 ] && grep -h "no publisher for key" "$d/sub.err" | sed 's/^\[[^]]*\] /     /'
    return 0
}

# d. The GStreamer plugin across containers: a GStreamer publisher of raw frames that
# ffmpeg made in its container (the image has no videotestsrc: no plugins-base), a
# GStreamer and an FFmpeg subscriber. Each output is taken out with `docker cp` and
# must be, byte for byte, what the publisher's filesrc read.
check_gstreamer() {
    local d=$WORK/gstreamer n=60 w=320 h=240 ok=1 t=$SECONDS c
    local frame=$((w * h * 3 / 2)) caps="video/x-raw,format=NV12,width=$w,height=$h,framerate=25/1"
    mkdir -p "$d"
    start pub-d "${PUB_USER[@]}" "${VOL[@]}" "$IMAGE" sh -c "
        ${FF[*]} -loglevel error -f lavfi -i testsrc2=size=${w}x$h:rate=25 -frames:v $n \
            -pix_fmt nv12 -f rawvideo /tmp/in.raw &&
        exec gst-launch-1.0 filesrc location=/tmp/in.raw blocksize=$frame ! '$caps' ! \
            cuframessink key=gst1 wait-subscribers=2 policy=strict-wait group=$GID"
    start sub1-d "${SUB1_USER[@]}" "${VOL[@]}" "$IMAGE" gst-launch-1.0 \
        cuframessrc key=gst1 wait-timeout=20000 ! filesink location=/tmp/out.raw
    start sub2-d "${SUB2_USER[@]}" "${VOL[@]}" "$IMAGE" "${FF[@]}" -f cuframes -timeout 20 \
        -i gst1 -f rawvideo /tmp/out.raw
    isolated pub-d sub1-d sub2-d || ok=0
    finish "$d" $ok pub-d sub1-d sub2-d || ok=0
    docker cp "$PREFIX-pub-d:/tmp/in.raw" "$d/in.raw" >/dev/null 2>&1 ||
        { echo "  the publisher's input is not there"; ok=0; }
    if [ -f "$d/in.raw" ] && [ "$(stat -c %s "$d/in.raw")" != $((n * frame)) ]; then
        echo "  the publisher's input is $(stat -c %s "$d/in.raw") bytes, not $n frames of $frame"
        ok=0
    fi
    for c in sub1-d sub2-d; do
        docker cp "$PREFIX-$c:/tmp/out.raw" "$d/$c.raw" >/dev/null 2>&1 || : >"$d/$c.raw"
        if ! cmp -s "$d/in.raw" "$d/$c.raw"; then
            local at
            at=$(cmp "$d/in.raw" "$d/$c.raw" 2>&1 | sed -n 's/.* differ: [a-z]* \([0-9]*\),.*/\1/p' || true)
            echo "  $c: $(($(stat -c %s "$d/$c.raw") / frame)) frames read, $n expected${at:+; they part in frame $(((at - 1) / frame))}"
            ok=0
        fi
    done
    [ $ok = 1 ] || show "$d/pub-d.err" "$d/pub-d.out" "$d/sub1-d.err" "$d/sub1-d.out" "$d/sub2-d.err"
    result "$CHECK_GSTREAMER" $ok "(2 x $n frames ${w}x$h NV12, $((SECONDS - t)) s)"
}

# The image says under which licences its parts are, and carries the texts.
check_labels() {
    local ok=1 licenses want="(MIT OR Apache-2.0) AND GPL-2.0-or-later"
    licenses=$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.licenses"}}' "$IMAGE")
    [ "$licenses" = "$want" ] || { echo "  org.opencontainers.image.licenses is '$licenses', want '$want'"; ok=0; }
    # GStreamer's Debian packages keep their copyright file (LGPL-2.1-or-later).
    docker run --rm --network none "$IMAGE" sh -c \
        'test -s /opt/cuframes/share/doc/cuframes/LICENSE-MIT && test -s /opt/cuframes/share/doc/cuframes/LICENSE-APACHE && test -s /usr/share/common-licenses/GPL-2 && test -s /usr/share/doc/libgstreamer1.0-0/copyright' ||
        { echo "  the licence texts are not in the image"; ok=0; }
    # One hardware queue per CUDA context unless the user asks for more (the Dockerfile
    # says why).
    local queues
    queues=$(docker run --rm --network none "$IMAGE" sh -c 'echo "$CUDA_DEVICE_MAX_CONNECTIONS"')
    [ "$queues" = 1 ] || { echo "  CUDA_DEVICE_MAX_CONNECTIONS in a container is '$queues', want 1"; ok=0; }
    result "$CHECK_LABELS" $ok "($licenses; CUDA_DEVICE_MAX_CONNECTIONS=1)"
}

# The script check_debs runs in the packages' container for its C check.
C_TESTS_IN_CONTAINER='
set -e
cd /tmp
version=$(pkg-config --modversion cuframes)
flags="-std=c99 -Wall -Wextra -Werror -pedantic -DCUFRAMES_EXPECTED_VERSION=\"$version\""
for t in test_capi test_two_process; do
    cc $flags $(pkg-config --cflags cuframes) /src/$t.c -o $t $(pkg-config --libs cuframes)
    readelf -d $t | grep -q "NEEDED.*\[libcuframes.so.0.2\]"
    ./$t
done
# Static: the archive and the private libraries pkg-config names, no libcuframes.so.
libdir=$(pkg-config --variable=libdir cuframes)
private=$(pkg-config --static --libs cuframes | sed "s/-lcuframes//")
cc $flags $(pkg-config --cflags cuframes) /src/test_capi.c -o test_capi-static "$libdir/libcuframes.a" $private
! readelf -d test_capi-static | grep -q libcuframes
./test_capi-static
'

# d-f. The .debs in a clean Debian container: installed by apt (at build time, with
# the host's network), then used with none.
check_debs() {
    local d=$WORK/debs ok=1 t=$SECONDS image=$IMAGE-debs rc debs
    mkdir -p "$d/context"
    if ! ls build/deb/*.deb >/dev/null 2>&1; then
        say "no build/deb/*.deb: scripts/package-deb.sh (log: $LOG_DIR/package-deb.log)…"
        scripts/package-deb.sh >"$LOG_DIR/package-deb.log" 2>&1 || { show "$LOG_DIR/package-deb.log"; ok=0; }
    fi
    debs=$(cd build/deb 2>/dev/null && ls -- *.deb 2>/dev/null | tr '\n' ' ')
    if [ $ok = 1 ] && [ -n "$debs" ]; then
        cp build/deb/*.deb "$d/context/"
        # The compiler first (a layer that stays cached), then only our packages.
        cat >"$d/context/Dockerfile" <<EOF
FROM $RUNTIME_IMAGE
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev pkgconf \\
 && rm -rf /var/lib/apt/lists/*
COPY *.deb /tmp/debs/
RUN apt-get update && apt-get install -y --no-install-recommends /tmp/debs/*.deb \\
 && rm -rf /var/lib/apt/lists/* /tmp/debs
EOF
        local replaced
        replaced=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
        if ! docker build --network host -t "$image" "$d/context" >"$LOG_DIR/debs-build.log" 2>&1; then
            show "$LOG_DIR/debs-build.log"
            ok=0
        elif [ -n "$replaced" ] && [ "$replaced" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
            docker rmi "$replaced" >/dev/null 2>&1 || true
        fi
    else
        ok=0
    fi
    if [ $ok = 1 ]; then
        docker run --rm --network none "$image" bash -c '
            set -e
            test "$(dpkg-query -W -f "\${Status}\n" libcuframes0.2 libcuframes-dev cuframes | grep -c "install ok installed")" = 3
            test "$(command -v cuframes)" = /usr/bin/cuframes
            cuframes --version
            ldconfig -p | grep -Eq "libcuframes.so.0.2 .*=> (/usr)?/lib/"
            source /usr/share/bash-completion/completions/cuframes && complete -p cuframes >/dev/null
            test -s /usr/share/zsh/vendor-completions/_cuframes
            pkg-config --modversion cuframes' >"$d/install.out" 2>"$d/install.err" || ok=0
    fi
    [ $ok = 1 ] || show "$d/install.out" "$d/install.err"
    result "$CHECK_DEB_INSTALL" $ok "(${debs:-no packages}; $(head -n 1 "$d/install.out" 2>/dev/null); $((SECONDS - t)) s)"
    if [ $ok != 1 ]; then
        skipped "$CHECK_DEB_CLI" "(the packages are not installed)"
        skipped "$CHECK_DEB_C" "(the packages are not installed)"
        return 0
    fi

    local n=300 cli_ok=1 verified
    t=$SECONDS
    rc=0
    timeout 120 docker run --rm --network none "$image" bash -c "
        cuframes publish deb1 --memory host --size 320x240 --fps 0 --frames $n --policy strict_wait \
            --wait-subscribers 1 --quiet &
        cuframes subscribe deb1 --verify --frames 0 --wait-timeout 20s --json
        wait \$!" >"$d/cli.out" 2>"$d/cli.err" || rc=$?
    [ $rc = 0 ] || { echo "  exit $rc"; cli_ok=0; }
    verified=$(tail -n 1 "$d/cli.out" | grep -o '"verified":[0-9]*' | cut -d: -f2)
    [ "${verified:-0}" = $n ] || { echo "  verified ${verified:-none} of $n"; cli_ok=0; }
    grep -q '"mismatched":0' "$d/cli.out" || cli_ok=0
    [ $cli_ok = 1 ] || show "$d/cli.out" "$d/cli.err"
    result "$CHECK_DEB_CLI" $cli_ok "($n of $n frames verified; $((SECONDS - t)) s)"

    # The project's C tests, built the way a user builds against the package.
    local c_ok=1 runs
    t=$SECONDS
    rc=0
    timeout 300 docker run --rm --network none -v "$ROOT/tests/c:/src:ro" "$image" \
        bash -c "$C_TESTS_IN_CONTAINER" >"$d/c.out" 2>"$d/c.err" || rc=$?
    runs=$(grep -cE '^[0-9]+ passed, 0 failed, [0-9]+ skipped$' "$d/c.out" || true)
    [ $rc = 0 ] || { echo "  exit $rc"; c_ok=0; }
    [ "$runs" = 3 ] || { echo "  $runs of 3 test programs passed"; c_ok=0; }
    [ $c_ok = 1 ] || show "$d/c.out" "$d/c.err"
    result "$CHECK_DEB_C" $c_ok "(test_capi and test_two_process shared, test_capi static: $(grep -E '^[0-9]+ passed' "$d/c.out" | tr '\n' ';' | sed 's/;$//'); $((SECONDS - t)) s)"
    return 0
}

check_frames
check_restart
check_isolated
check_gstreamer
check_labels
check_debs
phase_took "tests" "$phase"
summary
[ "$FAILED" = 0 ]
