#!/usr/bin/env bash
# On the GPU machine (scripts/gpu-test.sh run startup): start-up and publish cost
# (issue 27), written under $OUT. STEPS picks (default all, in this order):
#   ring    `cuframes bench --memory cuda`, 4K NV12, ring 8: 1 and 8 subscribers,
#           then 1 subscriber under the call tracer: the publisher's driver calls
#           per frame (ring-calls.txt)
#   copycost  the driver alone: the CPU a 4K frame's copy call costs, 2D against 1D and
#           others (scripts/gpu/copy-call-cost.py, copy-call-cost.txt)
#   phases  scripts/bench-host.sh N=16 K=2 on a 1200-frame 1080p clip, both
#           approaches, under the call tracer: start-up by phase per role and the
#           driver calls that took longest (bench-host-phases/summary.md)
#   job     the whole job without the tracer: N=16 K=2 on the 1200-frame clip,
#           REPEAT rounds (default 2), order alternated, the subscribers with
#           FFmpeg's default timeouts (bench-host-job/)
#   long    the same on the 4800-frame clip, and K=3 on the 1200-frame one
#   lean    the job step with CUDA_DEVICE_MAX_CONNECTIONS=1 for the subscribers
#           only (one hardware queue each: all an ffmpeg subscriber uses)
#   phaseslean  the phases step with CUDA_DEVICE_MAX_CONNECTIONS=1 for the subscribers only
#   leanlong  the 4800-frame clip with CUDA_DEVICE_MAX_CONNECTIONS=1 for the subscribers
#   leank3  K=3 on the 1200-frame clip, the same
#   join    a subscriber joining a live stream against a decoder starting on it:
#           16 live publishers, then 32 subscribers and 32 decoders started at once
#           (scripts/gpu/join-live.py), REPEAT rounds, with the driver's defaults
#           and with one hardware queue in the subscribers (join-live*/join.md)
#   joinphases  the same, one round each, under the call tracer
#   crowd   80 streams x 3 consumers (320 processes), cuframes only, default
#           timeouts, one round (bench-host-crowd/)
#   crowdlean the same with CUDA_DEVICE_MAX_CONNECTIONS=1 for the subscribers
#   chain   one 4K stream: NVDEC -> null against NVDEC -> cuframes -> null,
#           through the input device and through the source filter
#           (scripts/bench-ffmpeg.sh 4k, direct, cuframes and filter)
#   churn   the driver alone: 48 processes make a context at once and end, with
#           and without destroying it (scripts/gpu/context-churn.py)
#   scan    the driver alone, by CUDA_DEVICE_MAX_CONNECTIONS: 32 and 48 processes
#           with the default; 48 with 1, 2 and 4 queues; 48 of which 32 have 1;
#           48 setting 1 after cuInit (churn-scan.txt)
#   memory  the driver alone: GPU memory a context takes, 48 at once, by
#           connections (default, 1) and stack (default, 0) (churn-memory.txt)
#   variants  the job step with what a user can set: CUDA_DEVICE_MAX_CONNECTIONS=1,
#           and CUDA MPS (a private control daemon for these processes only)
#   longmps the 4800-frame clip, both approaches, every process an MPS client: does
#           running the processes' kernels side by side lift the steady state?
# Needs CUFRAMES_BIN, FFMPEG and CALLS (scripts/gpu/cuda-calls.c built), CUFRAMES_CUPTI.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${CUFRAMES_BIN:?set CUFRAMES_BIN to the staged cuframes CLI}"
: "${FFMPEG:?set FFMPEG to the staged patched ffmpeg}"
: "${CALLS:?set CALLS to the staged cuda-calls.so}"
out=${OUT:?set OUT}
steps=${STEPS:-ring copycost phases job long phaseslean lean leanlong leank3 join joinphases crowd crowdlean chain churn scan memory variants longmps}
repeat=${REPEAT:-2}
clips=${CLIP_DIR:-$out/clips}
mkdir -p "$clips"
export CUFRAMES_RUNTIME_DIR
CUFRAMES_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-startup-run.XXXXXX")
failed=0
step() { case " $steps " in *" $1 "*) echo "== $1 ($(date -u +%T))" ;; *) return 1 ;; esac; }
fail() { echo "startup: $* FAILED"; failed=$((failed + 1)); }

# The driver calls in tracer files DIR/calls-*.txt, per process: count, total,
# per frame (FRAMES), longest.
calls_table() {
    python3 - "$1" "$2" <<'PY'
import glob, os, sys
frames = int(sys.argv[2])
for path in sorted(glob.glob(os.path.join(sys.argv[1], "calls-*.txt"))):
    lines = open(path).read().splitlines()
    print("## " + lines[0])
    rows = []
    for line in lines[1:]:
        name, *kv = line.split()
        f = dict(x.split("=", 1) for x in kv)
        rows.append((int(f["total_us"]), name, int(f["count"]), int(f["max_us"])))
    print("%-44s %9s %8s %10s %12s %8s" % ("call", "count", "per frame", "total ms", "us per frame", "max us"))
    for total, name, count, longest in sorted(rows, reverse=True)[:20]:
        print("%-44s %9d %8.2f %10.1f %12.2f %8d" % (name, count, count / frames, total / 1000,
                                                     total / frames, longest))
PY
}

ring=(--memory cuda --format nv12 --size 3840x2160 --ring 8 --policy strict_wait --frames 60000
    --transports cuframes --verify-every 0)
if step ring; then
    for subs in 1 8; do
        timeout 300 "$CUFRAMES_BIN" bench "${ring[@]}" --subscribers $subs >"$out/ring-$subs.txt" 2>&1 ||
            fail "ring, $subs subscriber(s)"
        tail -n 4 "$out/ring-$subs.txt"
    done
    mkdir -p "$out/ring-calls"
    CUDA_INJECTION64_PATH=$CALLS CUFRAMES_CALLS_DIR=$out/ring-calls timeout 300 "$CUFRAMES_BIN" bench \
        "${ring[@]}" --subscribers 1 >"$out/ring-traced.txt" 2>&1 || fail "ring under the tracer"
    tail -n 4 "$out/ring-traced.txt"
    calls_table "$out/ring-calls" 60000 >"$out/ring-calls.txt"
    head -n 50 "$out/ring-calls.txt"
fi
if step copycost; then
    timeout 300 python3 scripts/gpu/copy-call-cost.py >"$out/copy-call-cost.txt" 2>&1 || fail "copy call cost"
    cat "$out/copy-call-cost.txt"
fi

host() { # NAME SECONDS ARGS...: scripts/bench-host.sh into $out/NAME
    local name=$1 seconds=$2
    shift 2
    FFMPEG=$FFMPEG timeout 580 bash scripts/bench-host.sh --size 1920x1080 --seconds "$seconds" \
        --clip "$clips/clip-1080p-${seconds}s.mp4" --limit 200 --out "$out/$name" "$@" \
        >"$out/$name.log" 2>&1 || fail "$name"
    grep -E "^bench-host: (cuframes|direct)" "$out/$name.log"
    grep -A6 "^Whole job" "$out/$name/summary.md"
}
# under_mps NAME SECONDS ARGS...: host, with every process of both approaches a client of
# a private MPS control daemon (its own pipe and log directories, so no other process is).
under_mps() {
    local mps
    mps=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-mps.XXXXXX")
    export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d; then
        host "$@"
        echo quit | nvidia-cuda-mps-control
        cp -r "$CUDA_MPS_LOG_DIRECTORY" "$out/$1-mps-log" 2>/dev/null
    else
        fail "$1: MPS (no nvidia-cuda-mps-control, or it did not start)"
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
# The clips bench-host makes (libx264, testsrc2): 40 s and 160 s at 30 fps.
if step phases; then
    host bench-host-phases 40 --streams 16 --consumers 2 --calls "$CALLS" --keep-logs
    grep -A40 "^Start-up by phase" "$out/bench-host-phases/summary.md"
fi
if step job; then
    host bench-host-job 40 --streams 16 --consumers 2 --repeat "$repeat" --sub-timeout default
fi
if step long; then
    host bench-host-long 160 --streams 16 --consumers 2 --repeat "$repeat" --sub-timeout default
    host bench-host-k3 40 --streams 16 --consumers 3 --repeat "$repeat" --sub-timeout default
fi
# One hardware queue in the subscribers only, FFmpeg's default timeouts.
lean=(--sub-timeout default --sub-env CUDA_DEVICE_MAX_CONNECTIONS=1 --label lean)
if step phaseslean; then
    host bench-host-phases-lean 40 --streams 16 --consumers 2 --calls "$CALLS" --keep-logs "${lean[@]}"
    grep -A40 "^Start-up by phase" "$out/bench-host-phases-lean/summary.md"
fi
if step lean; then
    host bench-host-lean 40 --streams 16 --consumers 2 --repeat "$repeat" "${lean[@]}"
fi
if step leanlong; then
    host bench-host-long-lean 160 --streams 16 --consumers 2 --repeat "$repeat" "${lean[@]}"
fi
if step leank3; then
    host bench-host-k3-lean 40 --streams 16 --consumers 3 --repeat "$repeat" "${lean[@]}"
fi
join() { # NAME ARGS...: scripts/gpu/join-live.py into $out/NAME
    local name=$1
    shift
    timeout 300 python3 scripts/gpu/join-live.py --ffmpeg "$FFMPEG" --clip "$clips/clip-1080p-40s.mp4" \
        --seconds 40 --streams 16 --consumers 2 --out "$out/$name" "$@" >"$out/$name.log" 2>&1 || fail "$name"
    cat "$out/$name/join.md"
}
if step join; then
    join join-live --repeat "$repeat"
    join join-live-lean --repeat "$repeat" --sub-env CUDA_DEVICE_MAX_CONNECTIONS=1
fi
if step joinphases; then
    join join-live-phases --repeat 1 --calls "$CALLS"
    join join-live-phases-lean --repeat 1 --calls "$CALLS" --sub-env CUDA_DEVICE_MAX_CONNECTIONS=1
fi
if step crowd; then
    host bench-host-crowd 40 --streams 80 --consumers 3 --approaches cuframes --sub-timeout default --limit 400
fi
if step crowdlean; then
    host bench-host-crowd-lean 40 --streams 80 --consumers 3 --approaches cuframes --limit 400 "${lean[@]}"
fi
if step chain; then
    mkdir -p "$out/chain"
    FFMPEG=$FFMPEG OUT=$out/chain REPEAT=$repeat PIPELINES="cuframes filter" timeout 580 \
        bash scripts/bench-ffmpeg.sh 4k >"$out/chain.log" 2>&1 || fail chain
    tail -n 20 "$out/chain.log"
fi
if step churn; then
    for kind in primary create; do
        for end in destroy exit; do
            timeout 150 python3 scripts/gpu/context-churn.py --processes 48 --kind $kind --end $end \
                >>"$out/churn.txt" 2>&1 || fail "churn $kind $end"
        done
    done
    cat "$out/churn.txt"
fi
if step scan; then
    scan() { timeout 150 python3 scripts/gpu/context-churn.py --end exit "$@" >>"$out/churn-scan.txt" 2>&1 ||
        fail "scan $*"; }
    scan --processes 32
    scan --processes 48
    for c in 1 2 4; do scan --processes 48 --connections $c; done
    scan --processes 48 --connections 1 --lean 32
    scan --processes 48 --connections 1 --after-init
    cat "$out/churn-scan.txt"
fi
if step memory; then
    mem() { timeout 150 python3 scripts/gpu/context-churn.py --processes 48 --end exit "$@" \
        >>"$out/churn-memory.txt" 2>&1 || fail "memory $*"; }
    mem
    mem --stack 0
    mem --connections 1
    mem --connections 1 --stack 0
    cat "$out/churn-memory.txt"
fi
if step variants; then
    CUDA_DEVICE_MAX_CONNECTIONS=1 host bench-host-maxconn1 40 --streams 16 --consumers 2 --label maxconn1
    under_mps bench-host-mps 40 --streams 16 --consumers 2 --label mps
fi
if step longmps; then
    under_mps bench-host-long-mps 160 --streams 16 --consumers 2 --repeat "$repeat" --sub-timeout default --label mps
fi
rm -rf "$CUFRAMES_RUNTIME_DIR"
# Everything in one file: the device tool brings back a limited number of files.
packed=$(mktemp "${TMPDIR:-/tmp}/cuframes-startup.XXXXXX")
tar -C "$out" -cJf "$packed" --exclude=./clips --exclude=./results.tar.xz . && mv "$packed" "$out/results.tar.xz"
echo "startup: $failed failed step(s)"
[ "$failed" -eq 0 ]
