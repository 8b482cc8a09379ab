#!/usr/bin/env bash
# GPU calls at the staged commit (issue 27: the copy kernel writes the fd-mode fence
# itself, one driver call a frame; 3fa8058, then reverted in 5b96c0b). .gpu/bin/cuframes-ad57c50 is the CLI of ad57c50
# (the kernel, then cuStreamWriteValue64 for the fence), copied in beside the staged one.
#   ring    the 4K ring: ad57c50 against HEAD alternated (1 and 8 subscribers), paced
#           at 60,000 and 40,000 fps; then every frame checked on the host (--verify
#           full) behind the kernel's fence, fd and IPC, 1 and 8 subscribers; the
#           FFmpeg muxer under the CUDA call tracer (stream writes a frame)
#   suite   crash matrix, backends, Rust CUDA, C, Python
#   ffmpeg  tests/ffmpeg/gpu.sh
#   host    the busy host, the kernel against the copy calls, then tests/ffmpeg/gpu.sh
#   chain   the 4K chain (scripts/bench-ffmpeg.sh 4k), the kernel then the copy calls
#   final   at the revert (5b96c0b): the Rust GPU tests; the ring of the three builds
#   startup STEPS="leanlong" of scripts/gpu/startup.sh, REPEAT=2: the 4800-frame clip, one
#           hardware queue in the subscribers only (the Docker image's setting)
set -u
R=$OUT
cat .gpu/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
before=.gpu/bin/cuframes-ad57c50
after=.gpu/bin/cuframes
export CUFRAMES_RUNTIME_DIR=$(mktemp -d)
bench_line() {
    python3 -c 'import json,sys
d = json.load(sys.stdin)[0]
print(sys.argv[1], "fps %.0f p50 %.1f us p99 %.1f us slot waits %s publisher %.1f us/frame subscriber %.1f us/frame kernel copies %s verified %s mismatched %s dropped %s error %s" % (
      d["fps"], d["p50_us"], d["p99_us"], d.get("publisher_slot_waits"), d["publisher_cpu_us_per_frame"], d["subscriber_cpu_us_per_frame"],
      d.get("publisher_kernel_copies"), d.get("verified"), d.get("mismatched"), d.get("dropped"), d.get("error")))' "$1"
}
case $1 in
ring)
    {
        scripts/gpu/ring-before-after.sh "$before" "$after" 3
        for r in 1 2; do
            for which in before after; do
                bin=$before; [ $which = after ] && bin=$after
                for fps in 60000 40000; do
                    timeout 60 "$bin" bench --memory cuda --size 3840x2160 --format nv12 --ring 8 --frames 20000 \
                        --transports cuframes --subscribers 1 --fps $fps --verify none --json 2>/dev/null |
                        bench_line "paced round $r $which --fps $fps:"
                done
            done
        done
        echo "== every frame checked on the host, HEAD"
        for share in fd ipc; do
            for subs in 1 8; do
                timeout 120 "$after" bench --memory cuda --size 3840x2160 --format nv12 --ring 8 --frames 3000 \
                    --transports cuframes --subscribers $subs --cuda-share $share --verify full --json 2>/dev/null |
                    bench_line "verify full 4K $share subs=$subs:"
            done
            timeout 120 "$after" bench --memory cuda --size 1920x1080 --format nv12 --ring 4 --frames 10000 \
                --transports cuframes --subscribers 2 --cuda-share $share --verify full --json 2>/dev/null |
                bench_line "verify full 1080p ring 4 $share subs=2:"
        done
    } >"$R/ring.txt" 2>&1
    cat "$R/ring.txt"
    # Which calls FFmpeg's muxer makes a frame: NVDEC -> cuframes, 120 frames, the tracer.
    FF=.gpu/ffmpeg/bin/ffmpeg
    export LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib
    cupti=$(find /usr/local/cuda* /usr/lib /opt /usr/local/lib -name 'libcupti.so*' 2>/dev/null | sort -r | head -n 1)
    [ -n "$cupti" ] || cupti=$(python3 -c 'import glob, site
h = [x for p in site.getsitepackages() for x in glob.glob(p + "/nvidia/*/lib/libcupti.so*")]
print(sorted(h)[-1] if h else "")')
    echo "cupti: $cupti"
    for size in 1920x1080 3840x2160; do
        clip=/tmp/clip-$size.mp4
        "$FF" -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=$size:rate=30 -t 4 \
            -c:v libx264 -preset ultrafast -pix_fmt yuv420p -y "$clip"
        d=$R/trace-$size; mkdir -p "$d"
        CUDA_INJECTION64_PATH=$PWD/.gpu/lib/cuda-calls.so CUFRAMES_CALLS_DIR=$d CUFRAMES_CUPTI=$cupti \
            timeout 60 "$FF" -nostdin -hide_banner -loglevel error -hwaccel cuda -hwaccel_output_format cuda \
            -i "$clip" -f cuframes -policy drop_oldest "k-$size"
        echo "== $size: rc=$?"
        grep -hE "^(cuda-calls|cuLaunchKernel|cuMemcpy|cuStreamWriteValue|cuStreamWaitValue|cuModuleLoadData|cuEventRecord)" "$d"/calls-*.txt |
            cut -d' ' -f1-4
    done ;;
suite)
    export OUT=/tmp/gpuout8a; rm -rf "$OUT"; mkdir -p "$OUT"
    timeout 560 scripts/gpu-test.sh run rust c crash python >"$OUT/run.txt" 2>&1
    echo "rc=$?"
    grep -E '^(ok|FAIL|skip|xfail)|passed|failed|gpu-test:' "$OUT/run.txt" | tail -n 40
    grep -h -E "by the kernel|forged address" "$OUT"/*.log | head -n 20
    tar czf "$R/suite.tgz" -C /tmp gpuout8a ;;
ffmpeg)
    export OUT=/tmp/gpuout8b; rm -rf "$OUT"; mkdir -p "$OUT"
    timeout 400 scripts/gpu-test.sh run ffmpeg >"$OUT/run.txt" 2>&1
    echo "ffmpeg rc=$?"
    grep -E '^(ok|FAIL|skip|xfail)|passed|failed|took' "$OUT/ffmpeg-gpu.log" | tail -n 40
    tar czf "$R/ffmpeg.tgz" -C /tmp gpuout8b ;;
host)
    # The busy host: N=16 K=2 on the 1200-frame clip, the kernel (its fence) against the
    # copy calls (CUFRAMES_TEST_NO_COPY_KERNEL=1: copy calls and cuStreamWriteValue64),
    # alternated, then ffmpeg's own GPU tests.
    export OUT=/tmp/gpuout8c; rm -rf "$OUT"; mkdir -p "$OUT/clips"
    FF=$PWD/.gpu/ffmpeg/bin/ffmpeg
    for round in 1 2; do
        for which in kernel calls; do
            env=(); [ $which = calls ] && env=(CUFRAMES_TEST_NO_COPY_KERNEL=1)
            name=job-$which-$round
            approaches=(--approaches cuframes); [ $name = job-kernel-1 ] && approaches=()
            env "${env[@]}" LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib FFMPEG=$FF timeout 200 bash scripts/bench-host.sh "${approaches[@]}" --size 1920x1080 --seconds 40 \
                --clip "$OUT/clips/clip-1080p-40s.mp4" --limit 200 --out "$OUT/$name" --streams 16 --consumers 2 --sub-timeout default --label $which \
                >"$OUT/$name.log" 2>&1
            echo "$name rc=$?"
            grep -E "^bench-host: (cuframes|direct)" "$OUT/$name.log"
            grep -A6 "^Whole job" "$OUT/$name/summary.md"
        done
    done
    echo "took $((SECONDS - t0)) s"
    find "$OUT" -path '*/logs/*' -name '*.log' -size +200k -delete 2>/dev/null; rm -rf "$OUT/clips"
    tar czf "$R/host.tgz" --exclude="*.mkv" --exclude="*.mp4" --exclude="*.h264" --exclude="*.hevc" -C /tmp gpuout8c
    export OUT=/tmp/gpuout8b; rm -rf "$OUT"; mkdir -p "$OUT"
    timeout $((590 - SECONDS + t0)) scripts/gpu-test.sh run ffmpeg >"$OUT/run.txt" 2>&1
    echo "ffmpeg rc=$?"
    grep -E '^(ok|FAIL|skip|xfail)|passed|failed|took' "$OUT/ffmpeg-gpu.log" | tail -n 40
    tar czf "$R/ffmpeg.tgz" -C /tmp gpuout8b ;;
chain)
    # The 4K chain (NVDEC -> cuframes -> null against NVDEC -> null), the kernel (its
    # fence) then the copy calls, twice each.
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
final)
    # At the revert: the Rust GPU tests, then the 4K ring at full rate, 1 subscriber, of
    # ad57c50, 3fa8058 (the kernel's fence) and the staged HEAD, alternated.
    export OUT=/tmp/gpuout8e; rm -rf "$OUT"; mkdir -p "$OUT"
    timeout 300 scripts/gpu-test.sh run rust >"$OUT/run.txt" 2>&1
    echo "rust rc=$?"
    grep -E 'passed|failed|by the kernel|forged' "$OUT/run.txt" "$OUT"/rust-*.log | tail -n 24
    tar czf "$R/final.tgz" -C /tmp gpuout8e
    for r in 1 2; do
        for which in ad57c50 3fa8058 head; do
            bin=.gpu/bin/cuframes; [ $which != head ] && bin=.gpu/bin/cuframes-$which
            timeout 60 "$bin" bench --memory cuda --size 3840x2160 --format nv12 --ring 8 --frames 20000 \
                --transports cuframes --subscribers 1 --verify none --json 2>/dev/null |
                bench_line "full rate round $r $which:"
        done
    done | tee "$R/ring-final.txt" ;;
startup)
    export OUT=/tmp/gpuout8d; rm -rf "$OUT"; mkdir -p "$OUT"
    STEPS="${STEPS:-leanlong}" REPEAT=2 timeout 400 scripts/gpu-test.sh run startup >"$OUT/run.txt" 2>&1
    echo "startup rc=$?"
    grep -v '^ *$' "$OUT/startup.log" | tail -n 60
    find "$OUT" -path '*/logs/*' -name '*.log' -size +200k -delete 2>/dev/null; rm -rf "$OUT/clips"
    tar czf "$R/startup.tgz" --exclude="*.mkv" --exclude="*.mp4" --exclude="*.h264" --exclude="*.hevc" -C /tmp gpuout8d ;;
esac
echo "took $((SECONDS - t0)) s"
