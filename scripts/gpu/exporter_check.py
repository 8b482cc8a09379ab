#!/usr/bin/env python3
"""Holds what `cuframes exporter` said of each stream and subscriber against the
subscribers' own summaries (scripts/gpu/exporter-host.sh; tested on fixtures by
scripts/test-monitoring.sh).

    exporter_check.py WORK N K FRAMES FPS INTERVAL RING

WORK holds pages/*.prom (one `exporter --once` page every INTERVAL seconds, in order)
and sub<s>-<c>.json (the last line: `cuframes subscribe --json`'s summary) for keys
ex1..exN and subscribers c1..cK; FRAMES were published per key at the nominal FPS into
a ring of RING slots.

The allowance is fixed by the nominal frame rate and the scrape interval, never by the
exporter's own rate estimate (which read thousands of frames a second on 30 fps
streams in run 2026-12-04b and let 7,609 frames of difference pass out of 1,200):

    allowance = ceil(FPS * 2 * INTERVAL) + RING

A subscriber's last page came at most one interval, plus the time to run the exporter
(at most one more interval: checked below), before it left, and the frames left in the
ring when its publisher ended may never be copied into its record. For 30 fps, a page
every 0.5 s and a ring of 16: 46 frames.

Per subscriber, at its last page: received (behind its summary by 0..allowance),
frames lost (dropped and overwritten: the summary's `dropped` counts both) and copies,
each no more than the summary says and at most the allowance fewer; the `report` label
`publisher`. Per key: frames published within the allowance of FRAMES and never more.
Prints one line per subscriber and a last line; exits 1 when any disagrees.
"""
import glob
import json
import math
import re
import sys

LINE = re.compile(r'^(\w+)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def pages(work):
    """Each page's samples: [(name, labels, value)]."""
    for page in sorted(glob.glob(f"{work}/pages/*.prom")):
        samples = []
        for text in open(page):
            m = LINE.match(text.strip())
            if m:
                samples.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
        yield page, samples


def main(argv):
    if len(argv) != 8:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    work, n, k, frames = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    fps, interval, ring = float(argv[5]), float(argv[6]), int(argv[7])
    allowance = math.ceil(fps * 2 * interval) + ring
    published = {}  # key -> most published seen
    last = {}       # (key, subscriber) -> its figures at the last page it was in
    slow = []       # pages whose scrape took longer than an interval
    count = 0
    for page, samples in pages(work):
        count += 1
        seen = {}
        for name, labels, value in samples:
            key, sub = labels.get("key"), labels.get("subscriber")
            if name == "cuframes_exporter_scrape_duration_seconds" and value > interval:
                slow.append(f"{page}: {value:.3f} s")
            if name == "cuframes_frames_published_total":
                published[key] = max(published.get(key, 0), value)
            if sub is None or not name.startswith("cuframes_subscriber_"):
                continue
            got = seen.setdefault((key, sub), {"lost": 0.0, "report": labels.get("report")})
            if name == "cuframes_subscriber_frames_received_total":
                got["received"] = value
            elif name == "cuframes_subscriber_frames_copied_total":
                got["copied"] = value
            elif name == "cuframes_subscriber_frames_lost_total":
                got["lost"] += value
        last.update(seen)
    bad = 0
    for s in slow:
        print(f"FAILED a scrape took longer than the {interval} s interval the allowance assumes: {s}")
        bad += 1
    for s in range(1, n + 1):
        key = f"ex{s}"
        seen = published.get(key, 0)
        if not frames - allowance <= seen <= frames:
            print(f"FAILED {key}: the exporter saw {seen:.0f} frames published of {frames} "
                  f"(at most {allowance} fewer, never more)")
            bad += 1
        for c in range(1, k + 1):
            name = f"{key} c{c}"
            try:
                with open(f"{work}/sub{s}-{c}.json") as f:
                    summary = json.loads(f.read().strip().splitlines()[-1])
            except (OSError, ValueError, IndexError) as e:
                print(f"FAILED {name}: no summary ({e})")
                bad += 1
                continue
            got = last.get((key, f"c{c}"))
            if got is None or "received" not in got:
                print(f"FAILED {name}: never in a page")
                bad += 1
                continue
            problems = []
            for what, ours, theirs in (
                ("received", got["received"], summary["frames"]),
                ("lost", got["lost"], summary["dropped"]),
                ("copied", got.get("copied", 0.0), summary["copied"]),
            ):
                behind = theirs - ours
                if not 0 <= behind <= allowance:
                    problems.append(f"{what} {ours:.0f} against its own {theirs} ({behind:.0f} behind, allowed 0..{allowance})")
            if got["report"] != "publisher":
                problems.append(f"report {got['report']} (expected publisher)")
            if summary.get("mismatched", 0):
                problems.append(f"{summary['mismatched']} frames mismatched")
            line = (f"{name}: summary {summary['frames']} received, {summary['dropped']} lost, "
                    f"{summary['copied']} copied; exporter {got['received']:.0f}, {got['lost']:.0f}, "
                    f"{got.get('copied', 0.0):.0f} at its last page ({summary['frames'] - got['received']:.0f} "
                    f"behind, allowed {allowance}), report {got['report']}")
            if problems:
                print(f"FAILED {line}: " + "; ".join(problems))
                bad += 1
            else:
                print(f"ok     {line}")
    print(f"exporter beside {n} x {k}: {count} pages; allowance {allowance} frames "
          f"({fps:g} fps, a page every {interval:g} s, ring {ring}); "
          f"{'all agree' if not bad else f'{bad} disagree'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
