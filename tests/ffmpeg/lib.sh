# Helpers shared by the FFmpeg end-to-end tests (sourced by run.sh and gpu.sh from the
# repository root). Sets FFMPEG, WORK, CUFRAMES_RUNTIME_DIR, FILTER (the words given on
# the command line) and an EXIT trap that kills every process group started with bg.

FFMPEG=${FFMPEG:-build/ffmpeg/bin/ffmpeg}
if [ ! -x "$FFMPEG" ]; then
    echo "$0: $FFMPEG not found; run scripts/build-ffmpeg.sh first" >&2
    exit 1
fi
FFMPEG=$(cd "$(dirname "$FFMPEG")" && pwd)/$(basename "$FFMPEG")
FILTER=("$@")
# The FFmpeg line of the binary, e.g. 9.0 ("ffmpeg version 9.0.2 ...").
FFMPEG_LINE=$("$FFMPEG" -hide_banner -version 2>/dev/null |
    sed -nE '1s/^ffmpeg version n?([0-9]+\.[0-9]+).*/\1/p')

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-ffmpeg-tests.XXXXXX")
export CUFRAMES_RUNTIME_DIR="$WORK/run"
mkdir -p "$CUFRAMES_RUNTIME_DIR"
GROUPS_STARTED=()
KEYS=()

cleanup() {
    local g
    for g in "${GROUPS_STARTED[@]}"; do
        kill -KILL -- "-$g" 2>/dev/null
    done
    wait 2>/dev/null
    for g in "${KEYS[@]}"; do
        rm -f "/dev/shm/cuframes-$g"
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PASSED=0
FAILED=0
T0=$SECONDS

# A key no other run uses.
KEYN=0
newkey() {
    KEYN=$((KEYN + 1))
    KEY="fft-$$-$KEYN"
    KEYS+=("$KEY")
}

# ff LIMIT ARGS...: ffmpeg in the foreground, bounded.
ff() {
    local limit=$1
    shift
    timeout -k 2 "$limit" "$FFMPEG" -nostdin -hide_banner -nostats "$@"
}

# bg LIMIT OUT ERR ARGS...: ffmpeg in the background, in its own process group
# (BGPID = the group, whose leader is timeout(1)).
bg() {
    local limit=$1 out=$2 err=$3
    shift 3
    setsid timeout -k 2 "$limit" "$FFMPEG" -nostdin -hide_banner -nostats "$@" >"$out" 2>"$err" &
    BGPID=$!
    GROUPS_STARTED+=("$BGPID")
}

# waitrc PID: exit status of a background job (bounded by its timeout(1)).
waitrc() {
    wait "$1" 2>/dev/null
}

# The MD5 column of a framemd5 file, one line per frame.
md5s() {
    grep -v '^#' "$1" | awk -F', *' '{ print $6 }'
}

# result NAME OK DETAIL...
result() {
    local name=$1 ok=$2
    shift 2
    if [ "$ok" = 1 ]; then
        PASSED=$((PASSED + 1))
        printf 'ok   %-44s %s\n' "$name" "$*"
    else
        FAILED=$((FAILED + 1))
        printf 'FAIL %-44s %s\n' "$name" "$*"
    fi
}

# show FILE...: the tail of logs, after a failure.
show() {
    local f
    for f in "$@"; do
        [ -s "$f" ] || continue
        echo "  --- $(basename "$f") (last lines)"
        tail -n 25 "$f" | sed 's/^/  | /'
    done
}

selected() {
    local w
    [ ${#FILTER[@]} -eq 0 ] && return 0
    for w in "${FILTER[@]}"; do
        case $1 in *"$w"*) return 0 ;; esac
    done
    return 1
}

# same_frames NAME REF GOT [N]: both framemd5 files have the same MD5 column (and N lines).
same_frames() {
    local name=$1 ref=$2 got=$3 want=${4:-}
    local nref ngot
    nref=$(md5s "$ref" | wc -l)
    ngot=$(md5s "$got" | wc -l)
    if [ -n "$want" ] && [ "$ngot" != "$want" ]; then
        echo "  $name: $ngot frames, expected $want"
        return 1
    fi
    if ! cmp -s <(md5s "$ref") <(md5s "$got"); then
        echo "  $name: frame MD5s differ from the reference ($ngot frames vs $nref)"
        diff <(md5s "$ref") <(md5s "$got") | head -n 6 | sed 's/^/  /'
        return 1
    fi
    [ "$ngot" -gt 0 ]
}

# slow_subscribers_agree DIR N: the checks of both slowsub tests (run.sh, gpu.sh):
# DIR/ref.md5 holds N frames, DIR/dev.md5 and DIR/filter.md5 the same ones, and
# dev.err and filter.err each say once that they connected again, with the
# publisher's reason. Says what differs; fails if anything does.
slow_subscribers_agree() {
    local d=$1 n=$2 rc=0 name count
    count=$(md5s "$d/ref.md5" 2>/dev/null | wc -l)
    [ "$count" = "$n" ] || { echo "  the reference got $count frames, not $n"; rc=1; }
    same_frames "input device" "$d/ref.md5" "$d/dev.md5" "$n" || rc=1
    same_frames "source filter" "$d/ref.md5" "$d/filter.md5" "$n" || rc=1
    for name in dev filter; do
        count=$(grep -c "connecting again" "$d/$name.err")
        [ "$count" = 1 ] || { echo "  $name: said 'connecting again' $count times, not once"; rc=1; }
        logged "$d/$name.err" "handshake not completed in time" ||
            { echo "  $name: the publisher's reason is not in its log"; rc=1; }
    done
    return $rc
}

# The ffmpeg under a timeout(1) group leader.
child_of() {
    ps -o pid= --ppid "$1" | tr -d ' ' | head -n 1
}

# Waits (bounded) until KEY has a live publisher.
wait_published() {
    local i
    for i in $(seq 100); do
        [ -S "$CUFRAMES_RUNTIME_DIR/$KEY.sock" ] && return 0
        sleep 0.05
    done
    return 1
}

# wait_for WHAT SECONDS COMMAND...: polls COMMAND (every 10 ms) until it succeeds:
# the way to wait for something another process does (never a bare sleep). Fails
# after SECONDS, saying what it waited for.
wait_for() {
    local what=$1 limit=$2 start
    shift 2
    start=$(date +%s%N)
    until "$@"; do
        if [ $((($(date +%s%N) - start) / 1000000000)) -ge "$limit" ]; then
            echo "  waited $limit s for $what in vain"
            return 1
        fi
        sleep 0.01
    done
}

# has_pix_fmt NAME: this ffmpeg knows the pixel format NAME.
has_pix_fmt() {
    "$FFMPEG" -hide_banner -pix_fmts 2>/dev/null | awk -v f="$1" '$2 == f { found = 1 } END { exit !found }'
}

# has_frames FILE N: a framemd5 file holds at least N frames.
has_frames() {
    local n
    n=$(grep -vc '^#' "$1" 2>/dev/null)
    [ "${n:-0}" -ge "$2" ]
}

# logged FILE TEXT: a log holds TEXT (fixed string).
logged() {
    grep -qF -- "$2" "$1" 2>/dev/null
}

# logged_re FILE REGEX: the file (which may not exist yet) has a line matching REGEX.
logged_re() {
    grep -qE -- "$2" "$1" 2>/dev/null
}

# logged_times FILE TEXT N: a log holds TEXT on at least N lines.
logged_times() {
    local n
    n=$(grep -cF -- "$2" "$1" 2>/dev/null)
    [ "${n:-0}" -ge "$3" ]
}

# raise_priority / restore_priority: the processes this shell starts in between run
# 10 nice levels above it, where that is allowed (root), so that a latency bound
# measures the product and not the other work of a loaded machine.
raise_priority() {
    NICE_BEFORE=$(ps -o ni= -p $$ | tr -d ' ')
    renice -n $((NICE_BEFORE - 10)) -p $$ >/dev/null 2>&1 || NICE_BEFORE=""
}
restore_priority() {
    [ -z "${NICE_BEFORE:-}" ] || renice -n "$NICE_BEFORE" -p $$ >/dev/null 2>&1
}

# skipped NAME WHY: a test that could not run its subject here.
SKIPPED=0
skipped() {
    SKIPPED=$((SKIPPED + 1))
    printf 'skip %-44s %s\n' "$1" "$2"
}

# expected_failure NAME DETAIL: a test whose subject failed the way this machine
# is known to make it fail (the H200 has no NVENC): neither a pass nor a failure.
EXPECTED=0
expected_failure() {
    EXPECTED=$((EXPECTED + 1))
    printf 'xfail %-43s %s\n' "$1" "$2"
}

# cuda_usable: whether ffmpeg can open a CUDA device here (errors in $WORK/cuda.err).
cuda_usable() {
    "$FFMPEG" -nostdin -hide_banner -loglevel error -init_hw_device cuda=gpu \
        -f lavfi -i testsrc2=size=64x64 -frames:v 1 -f null - 2>"$WORK/cuda.err"
}

# summary: the closing lines ("LABEL: N passed, N failed, N skipped", and the
# expected failures apart when there are any); the exit status of the run. LABEL is
# FFMPEG_SUITE_LABEL from the environment (scripts/test.sh runs the suite once per
# FFmpeg line: "ffmpeg 9.0 tests", "ffmpeg 7.1 tests"), else the script's own.
summary() {
    local label=${FFMPEG_SUITE_LABEL:-${SUMMARY_LABEL:-ffmpeg tests}}
    echo "$label took $((SECONDS - T0)) s"
    local line="$label: $PASSED passed, $FAILED failed, $SKIPPED skipped"
    [ "$EXPECTED" -gt 0 ] && line="$line, $EXPECTED expected failure(s)"
    echo "$line"
    [ "$FAILED" = 0 ]
}
