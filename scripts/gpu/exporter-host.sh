#!/usr/bin/env bash
# On the GPU machine: `cuframes exporter` beside a transcoding host in CUDA memory —
# N NVDEC publishers (ffmpeg, -f cuframes) with K subscribers each (`cuframes
# subscribe`, CUDA memory) — scraped every half second into a textfile; at the end,
# what it said of each stream and subscriber is held against the subscribers' own
# summaries and the publishers' frame count.
#
#   FFMPEG=... CUFRAMES_BIN=... scripts/gpu/exporter-host.sh [N] [K] [FRAMES]   (16 3 1200)
#   HWACCEL= ... (empty): software decode into host memory, to try it without a GPU
set -uo pipefail
: "${FFMPEG:?the staged ffmpeg}" "${CUFRAMES_BIN:?the staged cuframes}"
n=${1:-16}
k=${2:-3}
frames=${3:-1200}
out=${OUT:-$(mktemp -d)}
work=$(mktemp -d)
export CUFRAMES_RUNTIME_DIR=$work/rt
mkdir -p "$CUFRAMES_RUNTIME_DIR" "$work/pages"
clip=$work/clip.mp4
"$FFMPEG" -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=30 \
    -frames:v "$frames" -c:v libx264 -preset ultrafast -pix_fmt yuv420p -y "$clip" || { echo "no clip"; exit 1; }
pids=()
for s in $(seq 1 "$n"); do
    # shellcheck disable=SC2086 # HWACCEL is a list of options ("" on a machine without a GPU)
    "$FFMPEG" -nostdin -hide_banner -loglevel error -re ${HWACCEL--hwaccel cuda -hwaccel_output_format cuda} -i "$clip" \
        -f cuframes -policy strict_wait -wait_subscribers "$k" -wait_timeout 90 "ex$s" \
        2>"$work/pub$s.err" &
    pids+=($!)
done
sleep 1
for s in $(seq 1 "$n"); do
    for c in $(seq 1 "$k"); do
        "$CUFRAMES_BIN" subscribe "ex$s" --frames 0 --name "c$c" --wait-timeout 60s --timeout 30s --json \
            >"$work/sub$s-$c.json" 2>"$work/sub$s-$c.err" &
        pids+=($!)
    done
done
# One page every 500 ms, each kept.
(
    i=0
    while :; do
        "$CUFRAMES_BIN" exporter --once >"$work/pages/p$(printf %05d $i).prom" 2>/dev/null
        i=$((i + 1))
        sleep 0.5
    done
) &
scraper=$!
for p in "${pids[@]}"; do wait "$p"; done
kill "$scraper" 2>/dev/null
wait "$scraper" 2>/dev/null
python3 - "$work" "$n" "$k" "$frames" <<'PY' | tee "$out/exporter-host.txt"
import glob, json, os, re, sys
work, n, k, frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
line = re.compile(r'^(\w+)\{(.*)\} (\S+)$')
last = {}      # (key, subscriber) -> (page, received, lost)
published = {} # key -> max published seen
fps = {}
for page in sorted(glob.glob(f"{work}/pages/*.prom")):
    for text in open(page):
        m = line.match(text.strip())
        if not m:
            continue
        name, labels, value = m.group(1), dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2))), float(m.group(3))
        key = labels.get("key")
        if name == "cuframes_frames_published_total":
            published[key] = max(published.get(key, 0), value)
        if name == "cuframes_frames_per_second":
            fps.setdefault(key, []).append(value)
        if name == "cuframes_subscriber_frames_received_total":
            last[(key, labels["subscriber"])] = (page, value, labels.get("report"))
bad = 0
for s in range(1, n + 1):
    key = f"ex{s}"
    rates = fps.get(key) or [30.0]
    slack = max(rates) * 1.5 + 16  # one scrape (0.5 s, plus the scrape itself) and the ring
    if published.get(key, 0) < frames - slack:
        print(f"FAILED {key}: the exporter saw {published.get(key)} of {frames} frames published (allowed {slack:.0f} fewer)")
        bad += 1
    for c in range(1, k + 1):
        try:
            summary = json.loads(open(f"{work}/sub{s}-{c}.json").read().strip().splitlines()[-1])
        except Exception as e:
            print(f"FAILED {key} c{c}: no summary ({e})"); bad += 1; continue
        got = last.get((key, f"c{c}"))
        if got is None:
            print(f"FAILED {key} c{c}: never in a page"); bad += 1; continue
        page, received, report = got
        # The last page it was in is at most one scrape before it left.
        behind = summary["frames"] - received
        ok = 0 <= behind <= slack and report == "publisher" and summary["dropped"] == 0
        print(f"{'ok    ' if ok else 'FAILED'} {key} c{c}: summary {summary['frames']} received, exporter {received:.0f} "
              f"at its last page ({behind:.0f} behind, allowed {slack:.0f}), report {report}, dropped {summary['dropped']}")
        bad += 0 if ok else 1
print(f"exporter beside {n} x {k}: {len(glob.glob(work + '/pages/*.prom'))} pages; {'all agree' if not bad else f'{bad} disagree'}")
sys.exit(1 if bad else 0)
PY
status=$?
rm -rf "$work"
exit $status
