#!/usr/bin/env bash
# FFmpeg pipelines side by side on an NVIDIA GPU (run on the GPU machine, e.g. by
# scripts/gpu-test.sh run bench): the same H.264 clip through
#   (a) direct   one ffmpeg: NVDEC -> null
#   (b) cuframes NVDEC -> -f cuframes KEY | second ffmpeg -f cuframes -i KEY -> null
#   (c) pipe     NVDEC -> hwdownload -> rawvideo pipe -> second ffmpeg -> hwupload_cuda -> null
#   (d) fan-out  as (b) with 4 subscriber processes
# at 1080p and 4K. Reports, per pipeline, frames/s over the whole run (wall clock
# from the first process start to the last exit) and CPU time per frame of all its
# processes together (user + system), the median of REPEAT runs, and the ratios
# the targets in docs/benchmarks.md are stated in.
#
#   FFMPEG=path/to/patched/ffmpeg scripts/bench-ffmpeg.sh [SIZE...]
#     SIZE: 1080p 4k (default both); env FRAMES (1200), REPEAT (3), OUT (results dir),
#     MODE cuda (default) or host (software decode, host memory: the CPU variant)
set -euo pipefail
cd "$(dirname "$0")/.."

ffmpeg=${FFMPEG:-build/ffmpeg/bin/ffmpeg}
frames=${FRAMES:-1200}
repeat=${REPEAT:-3}
out=${OUT:-}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1080p 4k)
if [ ! -x "$ffmpeg" ]; then
    echo "bench-ffmpeg: $ffmpeg not found (set FFMPEG or run scripts/build-ffmpeg.sh)" >&2
    exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-bench-ffmpeg.XXXXXX")
export CUFRAMES_RUNTIME_DIR="$work/run"
mkdir -p "$CUFRAMES_RUNTIME_DIR"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
ff() { "$ffmpeg" -nostdin -hide_banner -nostats -loglevel error "$@"; }
mode=${MODE:-cuda}
case $mode in
cuda)
    if ! ff -init_hw_device cuda=gpu -f lavfi -i testsrc2=size=64x64 -frames:v 1 -f null - 2>"$work/cuda.err"; then
        echo "bench-ffmpeg: no usable CUDA device (MODE=host runs the CPU variant):" >&2
        cat "$work/cuda.err" >&2
        exit 1
    fi
    ;;
host) ;;
*) echo "bench-ffmpeg: MODE is cuda or host, not $mode" >&2; exit 2 ;;
esac
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.${2:-3}f\", $1 }"; }

# timed NAME CMD...: runs CMD with its stderr in $work/NAME.err and its CPU
# seconds (user + system, children included) in $work/NAME.cpu.
timed() {
    local name=$1
    shift
    (
        TIMEFORMAT='%U %S'
        { time "$@" 2>"$work/$name.err" >/dev/null; } 2>"$work/$name.time"
    )
    local rc=$?
    awk '{ print $1 + $2 }' "$work/$name.time" >"$work/$name.cpu"
    return $rc
}
cpu_of() { # NAME...: summed CPU seconds
    cat "${@/#/$work/}" | awk '{ s += $1 } END { printf "%.3f", s }'
}
fail_with() { # NAME: shows a failed process's log
    echo "bench-ffmpeg: $1 failed:" >&2
    tail -n 20 "$work/$1.err" >&2
    exit 1
}

# MODE=cuda: NVDEC into GPU memory, pipe = hwdownload ... hwupload_cuda.
# MODE=host: software decode into host memory, pipe = plain rawvideo.
decode() {
    if [ "$mode" = cuda ]; then
        echo -hwaccel cuda -hwaccel_output_format cuda -i "$1"
    else
        echo -i "$1"
    fi
}
if [ "$mode" = cuda ]; then
    download=(-vf hwdownload,format=nv12)
    upload=(-init_hw_device cuda=gpu -filter_hw_device gpu)
    upload_filter=(-vf hwupload_cuda)
    raw_format=nv12
else
    download=()
    upload=()
    upload_filter=()
    raw_format=yuv420p
fi

# Each run_* prints "WALL_S CPU_S".
run_direct() {
    local t0 t1
    t0=$(now)
    # shellcheck disable=SC2046
    timed direct "$ffmpeg" -nostdin -hide_banner -nostats $(decode "$1") -f null - || fail_with direct
    t1=$(now)
    echo "$(calc "$t1 - $t0") $(cpu_of direct.cpu)"
}
run_cuframes() { # CLIP SUBSCRIBERS
    local clip=$1 n=$2 key="bench-$$-$RANDOM" t0 t1 i pids=() names=(pub.cpu)
    t0=$(now)
    # shellcheck disable=SC2046
    timed pub "$ffmpeg" -nostdin -hide_banner -nostats $(decode "$clip") -f cuframes \
        -policy strict_wait -wait_subscribers "$n" "$key" &
    local pub=$!
    for i in $(seq 1 "$n"); do
        timed "sub$i" "$ffmpeg" -nostdin -hide_banner -nostats -f cuframes -i "$key" -f null - &
        pids+=($!)
        names+=("sub$i.cpu")
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || fail_with "sub$((i + 1))"
    done
    wait "$pub" || fail_with pub
    t1=$(now)
    echo "$(calc "$t1 - $t0") $(cpu_of "${names[@]}")"
}
run_pipe() { # CLIP WxH
    local t0 t1
    t0=$(now)
    (
        TIMEFORMAT='%U %S'
        # shellcheck disable=SC2046
        { time "$ffmpeg" -nostdin -hide_banner -nostats $(decode "$1") "${download[@]}" \
            -f rawvideo -y /dev/stdout 2>"$work/down.err"; } 2>"$work/down.time" |
            { time "$ffmpeg" -nostdin -hide_banner -nostats "${upload[@]}" \
                -f rawvideo -pix_fmt "$raw_format" -video_size "$2" -framerate 30 -i /dev/stdin "${upload_filter[@]}" \
                -f null - 2>"$work/up.err" >/dev/null; } 2>"$work/up.time"
    ) || fail_with up
    t1=$(now)
    awk '{ print $1 + $2 }' "$work/down.time" >"$work/down.cpu"
    awk '{ print $1 + $2 }' "$work/up.time" >"$work/up.cpu"
    echo "$(calc "$t1 - $t0") $(cpu_of down.cpu up.cpu)"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

results=()
table="| mode | size | pipeline | processes | fps | CPU ms/frame | fps vs (a) | CPU vs (a) |
|---|---|---|---|---|---|---|---|"
for size in "${sizes[@]}"; do
    case $size in
    1080p) dims=1920x1080 ;;
    4k) dims=3840x2160 ;;
    *) echo "bench-ffmpeg: unknown size $size (1080p or 4k)" >&2; exit 2 ;;
    esac
    clip="$work/clip-$size.mp4"
    echo "== $size: making a $frames-frame H.264 clip ($dims, libx264)" >&2
    ff -f lavfi -i "testsrc2=size=$dims:rate=30" -frames:v "$frames" -c:v libx264 -preset ultrafast \
        -pix_fmt yuv420p "$clip"
    declare -A fps=() cpu=()
    for pipeline in direct cuframes pipe fanout4; do
        walls=()
        cpus=()
        for r in $(seq 1 "$repeat"); do
            case $pipeline in
            direct) line=$(run_direct "$clip") ;;
            cuframes) line=$(run_cuframes "$clip" 1) ;;
            pipe) line=$(run_pipe "$clip" "$dims") ;;
            fanout4) line=$(run_cuframes "$clip" 4) ;;
            esac
            read -r wall cpus_s <<<"$line"
            walls+=("$wall")
            cpus+=("$cpus_s")
            echo "   $size $pipeline run $r: ${wall} s wall, ${cpus_s} s CPU" >&2
        done
        wall=$(printf '%s\n' "${walls[@]}" | median)
        cpu_s=$(printf '%s\n' "${cpus[@]}" | median)
        fps[$pipeline]=$(calc "$frames / $wall" 1)
        cpu[$pipeline]=$(calc "1000 * $cpu_s / $frames")
    done
    for pipeline in direct cuframes pipe fanout4; do
        dec=NVDEC
        pipe_label="hwdownload -> pipe -> hwupload"
        if [ "$mode" = host ]; then
            dec="decode"
            pipe_label="rawvideo pipe"
        fi
        case $pipeline in
        direct) label="(a) $dec -> null"; procs=1 ;;
        cuframes) label="(b) $dec -> cuframes -> ffmpeg"; procs=2 ;;
        pipe) label="(c) $dec -> $pipe_label -> ffmpeg"; procs=2 ;;
        fanout4) label="(d) $dec -> cuframes -> 4 x ffmpeg"; procs=5 ;;
        esac
        fr=$(calc "${fps[$pipeline]} / ${fps[direct]}")
        cr=$(calc "${cpu[$pipeline]} / ${cpu[direct]}")
        table+="
| $mode | $size | $label | $procs | ${fps[$pipeline]} | ${cpu[$pipeline]} | $fr | $cr |"
        results+=("{\"mode\":\"$mode\",\"size\":\"$size\",\"pipeline\":\"$pipeline\",\"processes\":$procs,\"frames\":$frames,\"fps\":${fps[$pipeline]},\"cpu_ms_per_frame\":${cpu[$pipeline]},\"fps_ratio_to_direct\":$fr,\"cpu_ratio_to_direct\":$cr}")
    done
    echo "   $size ratios: (b)/(a) fps $(calc "${fps[cuframes]} / ${fps[direct]}")," \
        "(b)/(c) fps $(calc "${fps[cuframes]} / ${fps[pipe]}")," \
        "(b)/(c) CPU $(calc "${cpu[cuframes]} / ${cpu[pipe]}" 4)," \
        "(d)/(a) fps $(calc "${fps[fanout4]} / ${fps[direct]}")" >&2
    unset fps cpu
done
json="[$(
    IFS=,
    echo "${results[*]}"
)]"
echo "$table"
echo "$json"
if [ -n "$out" ]; then
    echo "$table" >"$out/bench-ffmpeg.md"
    echo "$json" >"$out/bench-ffmpeg.json"
fi
