#!/usr/bin/env bash
# FFmpeg pipelines side by side on an NVIDIA GPU (run on the GPU machine, e.g. by
# scripts/gpu-test.sh run bench): the same H.264 clip through
#   (a) direct   one ffmpeg: NVDEC -> null
#   (b) cuframes NVDEC -> -f cuframes KEY | second ffmpeg -f cuframes -i KEY -> null
#   (c) pipe     NVDEC -> hwdownload -> rawvideo pipe -> second ffmpeg -> hwupload_cuda -> null
#   (d) fan-out  as (b) with 4 subscriber processes
#   (e) isolated as (b), each process in its own PID, IPC and mount namespaces
#                with its own /dev/shm, sharing only the runtime directory: two
#                containers (CUDA slots shared as fds); needs root and unshare
#   (f) filter   as (b), the second ffmpeg reading through the source filter
#                (-filter_complex cuframes=key=KEY: no demuxer, no decoder)
# at 1080p and 4K. Reports, per pipeline, frames/s over the whole run (wall clock
# from the first process start to the last exit) and CPU time per frame of all its
# processes together (user + system), the median of REPEAT runs, and the ratios
# the targets in docs/benchmarks.md are stated in. Each pipeline also runs on the
# clip played twice (-stream_loop, no re-encode): the difference between the two
# runs is the steady state, without process and CUDA start-up (which cost a
# fixed ~0.2-0.5 s of CPU per process, whatever the clip's length).
#
#   FFMPEG=path/to/patched/ffmpeg scripts/bench-ffmpeg.sh [SIZE...]
#     SIZE: 1080p 4k (default both); env FRAMES (1200), REPEAT (3), OUT (results dir),
#     MODE cuda (default) or host (software decode, host memory: the CPU variant),
#     PIPELINES (default "direct cuframes pipe fanout4"; add "isolated" for (e), "filter" for (f);
#     direct is always run, the ratios are to it)
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
# isolate CMD...: CMD in new PID, IPC and mount namespaces with a tmpfs of its own
# on /dev/shm (as a container that shares only a volume); `time` still counts
# its CPU (unshare waits for it).
isolate() {
    # shellcheck disable=SC2016 # $0 and $@ are the inner shell's
    unshare --pid --ipc --mount --fork --mount-proc --kill-child -- \
        sh -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$0" "$@"' "$@"
}
run_cuframes() { # CLIP SUBSCRIBERS [isolate|filter]
    local clip=$1 n=$2 key="bench-$$-$RANDOM" t0 t1 i pids=() names=(pub.cpu) wrap=() src
    [ "${3:-}" = isolate ] && wrap=(isolate)
    src=(-f cuframes -i "$key")
    [ "${3:-}" = filter ] && src=(-filter_complex "cuframes=key=$key")
    t0=$(now)
    # shellcheck disable=SC2046
    timed pub "${wrap[@]}" "$ffmpeg" -nostdin -hide_banner -nostats $(decode "$clip") -f cuframes \
        -policy strict_wait -wait_subscribers "$n" "$key" &
    local pub=$!
    for i in $(seq 1 "$n"); do
        timed "sub$i" "${wrap[@]}" "$ffmpeg" -nostdin -hide_banner -nostats "${src[@]}" -f null - &
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

pipelines=(direct)
for p in ${PIPELINES:-cuframes pipe fanout4}; do
    case $p in
    direct) ;;
    cuframes | pipe | fanout4 | isolated | filter) pipelines+=("$p") ;;
    *) echo "bench-ffmpeg: unknown pipeline $p (direct cuframes pipe fanout4 isolated filter)" >&2; exit 2 ;;
    esac
done
has() { [[ " ${pipelines[*]} " == *" $1 "* ]]; }
if has isolated && ! isolate true 2>"$work/unshare.err"; then
    echo "bench-ffmpeg: the isolated pipeline needs root and unshare: $(head -c 200 "$work/unshare.err")" >&2
    exit 1
fi

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

results=()
table="| mode | size | pipeline | processes | fps | CPU ms/frame | fps vs (a) | CPU vs (a) | steady fps | steady CPU ms/frame | steady fps vs (a) | steady CPU vs (a) |
|---|---|---|---|---|---|---|---|---|---|---|---|"
for size in "${sizes[@]}"; do
    case $size in
    1080p) dims=1920x1080 ;;
    4k) dims=3840x2160 ;;
    *) echo "bench-ffmpeg: unknown size $size (1080p or 4k)" >&2; exit 2 ;;
    esac
    clip="$work/clip-$size.mp4"
    echo "== $size: making a $frames-frame H.264 clip ($dims, libx264) and its double" >&2
    ff -f lavfi -i "testsrc2=size=$dims:rate=30" -frames:v "$frames" -c:v libx264 -preset ultrafast \
        -pix_fmt yuv420p "$clip"
    ff -stream_loop 1 -i "$clip" -c copy "$work/clip2-$size.mp4"
    declare -A fps=() cpu=() sfps=() scpu=()
    for pipeline in "${pipelines[@]}"; do
        declare -A wall_of=() cpu_of_len=()
        for len in 1 2; do
            run_clip=$clip
            [ "$len" = 2 ] && run_clip="$work/clip2-$size.mp4"
            walls=()
            cpus=()
            for r in $(seq 1 "$repeat"); do
                case $pipeline in
                direct) line=$(run_direct "$run_clip") ;;
                cuframes) line=$(run_cuframes "$run_clip" 1) ;;
                pipe) line=$(run_pipe "$run_clip" "$dims") ;;
                fanout4) line=$(run_cuframes "$run_clip" 4) ;;
                isolated) line=$(run_cuframes "$run_clip" 1 isolate) ;;
                filter) line=$(run_cuframes "$run_clip" 1 filter) ;;
                esac
                read -r wall cpus_s <<<"$line"
                walls+=("$wall")
                cpus+=("$cpus_s")
                echo "   $size $pipeline $((len * frames)) frames, run $r: ${wall} s wall, ${cpus_s} s CPU" >&2
            done
            wall_of[$len]=$(printf '%s\n' "${walls[@]}" | median)
            cpu_of_len[$len]=$(printf '%s\n' "${cpus[@]}" | median)
        done
        # Whole run of $frames frames (start-up included), and steady state: the
        # second $frames frames alone (the double clip minus the single one).
        fps[$pipeline]=$(calc "$frames / ${wall_of[1]}" 1)
        cpu[$pipeline]=$(calc "1000 * ${cpu_of_len[1]} / $frames")
        sfps[$pipeline]=$(calc "$frames / (${wall_of[2]} - ${wall_of[1]})" 1)
        scpu[$pipeline]=$(calc "1000 * (${cpu_of_len[2]} - ${cpu_of_len[1]}) / $frames")
        unset wall_of cpu_of_len
    done
    for pipeline in "${pipelines[@]}"; do
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
        isolated) label="(e) $dec -> cuframes -> ffmpeg, sibling namespaces"; procs=2 ;;
        filter) label="(f) $dec -> cuframes -> ffmpeg (source filter)"; procs=2 ;;
        esac
        fr=$(calc "${fps[$pipeline]} / ${fps[direct]}")
        cr=$(calc "${cpu[$pipeline]} / ${cpu[direct]}")
        sfr=$(calc "${sfps[$pipeline]} / ${sfps[direct]}")
        scr=$(calc "${scpu[$pipeline]} / ${scpu[direct]}")
        table+="
| $mode | $size | $label | $procs | ${fps[$pipeline]} | ${cpu[$pipeline]} | $fr | $cr | ${sfps[$pipeline]} | ${scpu[$pipeline]} | $sfr | $scr |"
        results+=("{\"mode\":\"$mode\",\"size\":\"$size\",\"pipeline\":\"$pipeline\",\"processes\":$procs,\"frames\":$frames,\"fps\":${fps[$pipeline]},\"cpu_ms_per_frame\":${cpu[$pipeline]},\"fps_ratio_to_direct\":$fr,\"cpu_ratio_to_direct\":$cr,\"steady_fps\":${sfps[$pipeline]},\"steady_cpu_ms_per_frame\":${scpu[$pipeline]},\"steady_fps_ratio_to_direct\":$sfr,\"steady_cpu_ratio_to_direct\":$scr}")
    done
    if has cuframes && has pipe && has fanout4; then
        echo "   $size whole run: (b)/(a) fps $(calc "${fps[cuframes]} / ${fps[direct]}")," \
            "(b)/(c) fps $(calc "${fps[cuframes]} / ${fps[pipe]}")," \
            "(b)/(c) CPU $(calc "${cpu[cuframes]} / ${cpu[pipe]}" 4)," \
            "(d)/(a) fps $(calc "${fps[fanout4]} / ${fps[direct]}")" >&2
        echo "   $size steady state: (b)/(a) fps $(calc "${sfps[cuframes]} / ${sfps[direct]}")," \
            "(b)/(c) fps $(calc "${sfps[cuframes]} / ${sfps[pipe]}")," \
            "(b)/(a) CPU $(calc "${scpu[cuframes]} / ${scpu[direct]}")," \
            "(b)/(c) CPU $(calc "${scpu[cuframes]} / ${scpu[pipe]}" 4)," \
            "(d)/(a) fps $(calc "${sfps[fanout4]} / ${sfps[direct]}")" >&2
    fi
    if has cuframes && has isolated; then
        echo "   $size (e)/(b): fps $(calc "${fps[isolated]} / ${fps[cuframes]}")," \
            "steady fps $(calc "${sfps[isolated]} / ${sfps[cuframes]}")," \
            "steady CPU $(calc "${scpu[isolated]} / ${scpu[cuframes]}")" >&2
    fi
    unset fps cpu sfps scpu
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
