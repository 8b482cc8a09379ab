#!/usr/bin/env bash
# GPU calls at the staged commit (issue 27: the publisher's copy as one kernel launch).
#   suite   crash matrix, backends, Rust CUDA (the kernel's own tests), C, Python
#   ffmpeg  tests/ffmpeg/gpu.sh; NVDEC -> cuframes at 1080p and 4K with the library's
#           debug log (which copy the muxer's publisher used); the ring, copy calls
#           (CUFRAMES_TEST_NO_COPY_KERNEL=1) against the kernel, full rate and paced
#   host    bench-host N=16 K=2 on the 1200-frame clip, the kernel against the copy
#           calls on a busy host; H200 only: STEPS="phaseslean leanlong"
set -u
R=$OUT
cat .gpu/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
calls=.gpu/bin/cuframes-calls
printf '#!/bin/sh\nCUFRAMES_TEST_NO_COPY_KERNEL=1 exec "$(dirname "$0")/cuframes" "$@"\n' >"$calls"
chmod +x "$calls"
case $1 in
suite)
    export OUT=/tmp/gpuout7a; rm -rf "$OUT"; mkdir -p "$OUT"
    timeout 560 scripts/gpu-test.sh run rust c crash python >"$OUT/run.txt" 2>&1
    echo "rc=$?"
    grep -E '^(ok|FAIL|skip|xfail)|passed|failed|gpu-test:|by the kernel|forged' "$OUT/run.txt" | tail -n 40
    grep -h -E "by the kernel|forged address" "$OUT"/*.log | head -n 20
    tar czf "$R/suite.tgz" -C /tmp gpuout7a ;;
ffmpeg)
    export OUT=/tmp/gpuout7b; rm -rf "$OUT"; mkdir -p "$OUT"
    timeout 200 scripts/gpu-test.sh run rust >"$OUT/run-rust.txt" 2>&1
    echo "rust rc=$?"
    grep -E 'passed|failed|by the kernel|forged' "$OUT/run-rust.txt" "$OUT"/rust-*.log | tail -n 20
    timeout 300 scripts/gpu-test.sh run ffmpeg >"$OUT/run.txt" 2>&1
    echo "ffmpeg rc=$?"
    grep -E '^(ok|FAIL|skip|xfail)|passed|failed|took' "$OUT/ffmpeg-gpu.log" | tail -n 40
    FF=.gpu/ffmpeg/bin/ffmpeg
    export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib CUFRAMES_RUNTIME_DIR=$(mktemp -d)
    for size in 1920x1080 3840x2160; do
        clip=/tmp/clip-$size.mp4
        "$FF" -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=$size:rate=30 -t 2 \
            -c:v libx264 -preset ultrafast -pix_fmt yuv420p -y "$clip"
        echo "== NVDEC -> cuframes muxer, $clip, library debug log"
        timeout 60 "$FF" -nostdin -hide_banner -loglevel debug -hwaccel cuda -hwaccel_output_format cuda \
            -i "$clip" -frames:v 60 -f cuframes -policy drop_oldest k7 2>&1 | grep -iE "copy kernel|copy calls|error" | head -n 5
    done
    {
        scripts/gpu/ring-before-after.sh "$calls" .gpu/bin/cuframes 3
        for r in 1 2; do
            for which in calls kernel; do
                bin=.gpu/bin/cuframes; [ $which = calls ] && bin=$calls
                for fps in 40000 20000; do
                    echo "== paced round $r, $which, 1 subscriber, --fps $fps"
                    timeout 60 "$bin" bench --memory cuda --size 3840x2160 --format nv12 --ring 8 --frames 20000 \
                        --transports cuframes --subscribers 1 --fps $fps --verify none --json 2>/dev/null | python3 -c 'import json,sys
d = json.load(sys.stdin)[0]
print("fps %.0f p50 %.1f us p99 %.1f us publisher %.1f us/frame subscriber %.1f us/frame kernel copies %s" % (d["fps"],
      d["p50_us"], d["p99_us"], d["publisher_cpu_us_per_frame"], d["subscriber_cpu_us_per_frame"], d.get("publisher_kernel_copies")))'
                done
            done
        done
        echo "== 1080p ring, copies checked"
        for which in calls kernel; do
            bin=.gpu/bin/cuframes; [ $which = calls ] && bin=$calls
            timeout 60 "$bin" bench --memory cuda --size 1920x1080 --format nv12 --ring 8 --frames 5000 \
                --transports cuframes --subscribers 1 --json 2>/dev/null | python3 -c 'import json,sys
d = json.load(sys.stdin)[0]
print(sys.argv[1], "fps %.0f publisher %.1f us/frame kernel copies %s verified %s mismatched %s error %s" % (d["fps"],
      d["publisher_cpu_us_per_frame"], d.get("publisher_kernel_copies"), d.get("verified"), d.get("mismatched"), d.get("error")))' $which
        done
    } >"$R/ring.txt" 2>&1
    cat "$R/ring.txt"
    tar czf "$R/ffmpeg.tgz" -C /tmp gpuout7b ;;
host)
    export OUT=/tmp/gpuout7c; rm -rf "$OUT"; mkdir -p "$OUT"
    FF=$PWD/.gpu/ffmpeg/bin/ffmpeg
    export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
    mkdir -p "$OUT/clips"
    for round in 1 2; do
        for which in kernel calls; do
            env=(); [ $which = calls ] && env=(CUFRAMES_TEST_NO_COPY_KERNEL=1)
            name=job-$which-$round
            approaches=(--approaches cuframes); [ $name = job-kernel-1 ] && approaches=()
            env "${env[@]}" FFMPEG=$FF timeout 200 bash scripts/bench-host.sh "${approaches[@]}" --size 1920x1080 --seconds 40 \
                --clip "$OUT/clips/clip-1080p-40s.mp4" --limit 200 --out "$OUT/$name" --streams 16 --consumers 2 --sub-timeout default --label $which \
                >"$OUT/$name.log" 2>&1
            echo "$name rc=$?"
            grep -E "^bench-host: (cuframes|direct)" "$OUT/$name.log"
            grep -A6 "^Whole job" "$OUT/$name/summary.md"
        done
    done
    echo "took $((SECONDS - t0)) s"
    find "$OUT" -path '*/logs/*' -name '*.log' -size +200k -delete 2>/dev/null
    tar czf "$R/host.tgz" --exclude="*.mkv" --exclude="*.mp4" --exclude="*.h264" --exclude="*.hevc" -C /tmp gpuout7c ;;
chain)
    # The 4K chain (NVDEC -> cuframes -> null against NVDEC -> null), the kernel then the calls.
    FF=$PWD/.gpu/ffmpeg/bin/ffmpeg
    export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
    for which in kernel calls; do
        env=(); [ $which = calls ] && env=(CUFRAMES_TEST_NO_COPY_KERNEL=1)
        mkdir -p "$R/chain-$which"
        env "${env[@]}" FFMPEG=$FF OUT=$R/chain-$which REPEAT=2 PIPELINES="cuframes" timeout 280 \
            bash scripts/bench-ffmpeg.sh 4k >"$R/chain-$which.log" 2>&1
        echo "== chain, $which: rc=$?"
        tail -n 12 "$R/chain-$which.log"
    done ;;
trace)
    # Which copy the FFmpeg muxer's publisher queued: NVDEC -> cuframes, 120 frames,
    # under the CUDA call tracer, with the kernel and with the copy calls.
    FF=.gpu/ffmpeg/bin/ffmpeg
    export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib CUFRAMES_RUNTIME_DIR=$(mktemp -d)
    cupti=$(find /usr/local/cuda* /usr/lib /opt /usr/local/lib -name 'libcupti.so*' 2>/dev/null | sort -r | head -n 1)
    [ -n "$cupti" ] || cupti=$(python3 -c 'import glob, site
h = [x for p in site.getsitepackages() for x in glob.glob(p + "/nvidia/*/lib/libcupti.so*")]
print(sorted(h)[-1] if h else "")')
    echo "cupti: $cupti"
    for size in 1920x1080 3840x2160; do
        clip=/tmp/clip-$size.mp4
        "$FF" -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=$size:rate=30 -t 4 \
            -c:v libx264 -preset ultrafast -pix_fmt yuv420p -y "$clip"
        for which in kernel calls; do
            d=$R/trace-$size-$which; mkdir -p "$d"
            env=(); [ $which = calls ] && env=(CUFRAMES_TEST_NO_COPY_KERNEL=1)
            env "${env[@]}" CUDA_INJECTION64_PATH=$PWD/.gpu/lib/cuda-calls.so CUFRAMES_CALLS_DIR=$d CUFRAMES_CUPTI=$cupti \
                timeout 60 "$FF" -nostdin -hide_banner -loglevel error -hwaccel cuda -hwaccel_output_format cuda \
                -i "$clip" -f cuframes -policy drop_oldest "k-$size-$which"
            echo "== $size, $which: rc=$?"
            grep -hE "^(cuframes|cuda-calls|cuLaunchKernel|cuMemcpy|cuModuleLoadData|cuPointerGetAttribute|cuMemGetAddressRange)" "$d"/calls-*.txt |
                cut -d' ' -f1-4
        done
    done ;;
startup)
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
        export OUT=/tmp/gpuout7d; rm -rf "$OUT"; mkdir -p "$OUT"
        STEPS="phaseslean leanlong" REPEAT=2 timeout 560 scripts/gpu-test.sh run startup >"$OUT/run.txt" 2>&1
        echo "startup rc=$?"
        grep -v '^ *$' "$OUT/startup.log" | tail -n 60
        find "$OUT" -path '*/logs/*' -name '*.log' -size +200k -delete 2>/dev/null; rm -rf "$OUT/clips"
        tar czf "$R/startup.tgz" --exclude="*.mkv" --exclude="*.mp4" --exclude="*.h264" --exclude="*.hevc" -C /tmp gpuout7d
    else
        echo "not an H200: the start-up steps skipped"
    fi ;;
esac
echo "took $((SECONDS - t0)) s"
