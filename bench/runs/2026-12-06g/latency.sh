#!/usr/bin/env bash
# GPU-side handover latency (--cuda-sync: the subscriber waits for its stream, so the
# wait on the publisher's fence counts), ad57c50 (fence by cuStreamWriteValue64) against
# HEAD (fence by the copy kernel), alternated, 1 subscriber, paced.
export CUFRAMES_RUNTIME_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name --format=csv,noheader
for r in 1 2 3; do
    for which in ad57c50 head; do
        bin=.gpu/bin/cuframes; [ $which = ad57c50 ] && bin=.gpu/bin/cuframes-ad57c50
        for spec in "3840x2160 2000 6000" "3840x2160 20000 20000" "1920x1080 5000 10000" "1920x1080 30000 30000"; do
            set -- $spec
            timeout 60 $bin bench --memory cuda --size $1 --format nv12 --ring 8 --frames $3 --transports cuframes \
                --subscribers 1 --fps $2 --cuda-sync --verify none --json 2>/dev/null | python3 -c 'import json,sys
d = json.load(sys.stdin)[0]
print(sys.argv[1], "fps %.0f p50 %.1f p99 %.1f max %s us publisher %.1f subscriber %.1f us/frame" % (d["fps"], d["p50_us"], d["p99_us"], d.get("max_us"), d["publisher_cpu_us_per_frame"], d["subscriber_cpu_us_per_frame"]))' "round $r $which $1 fps=$2:"
        done
    done
done
