#!/usr/bin/env python3
"""The tables of scripts/gpu/gst-bench.sh, from its raw folder (one folder per case:
`case` = "TRANSPORT CONSUMERS", producer.log and consumer-N.log of gst-bench-probe,
*.count of the copy counter, gpumem.csv of nvidia-smi).

    gst-bench-report.py RAW_DIR      markdown on stdout
"""

import re
import statistics
import sys
from pathlib import Path

WARM_UP = 10  # buffers left out of latency, as the probe leaves them out of CPU


class Log:
    """One gst-bench-probe log: buffer lines, bus messages, the end line."""

    def __init__(self, path):
        self.buffers, self.messages, self.end = [], [], {}
        if not path.exists():
            return
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("buf "):
                self.buffers.append([int(v) for v in line.split()[1:]])
            elif line.startswith("msg "):
                self.messages.append(line[4:])
            elif line.startswith("end "):
                self.end = {k: int(v) for k, v in (f.split("=") for f in line.split()[1:])}

    @property
    def frames(self):
        return self.end.get("frames", len(self.buffers))

    def per_frame_us(self, key):
        n = self.end.get("steady_frames", 0)
        return self.end.get(key, 0) / n / 1000 if n else None

    def fps(self):
        n, wall = self.end.get("steady_frames", 0), self.end.get("steady_wall_ns", 0)
        return n / wall * 1e9 if n and wall else None


def latencies(producer, consumers, transport):
    """Producer-probe to consumer-probe, per frame, in ms (warm-up left out)."""
    base, latency = producer.end.get("base_ns", 0), producer.end.get("latency_ns", 0)
    sent = {}
    for mono, pts, running, _, _ in producer.buffers[WARM_UP:]:
        key = pts if transport == "cuframes" else running + base + latency
        sent[key] = mono
    out = []
    for consumer in consumers:
        cbase = consumer.end.get("base_ns", 0)
        for mono, pts, _, cf_pts, _ in consumer.buffers:
            key = cf_pts if transport == "cuframes" else pts + cbase
            if key in sent:
                out.append((mono - sent[key]) / 1e6)
    return out


def counted(path):
    """One counter file (scripts/gpu/memcpy-count.c; a line per process): the copies,
    the CUDA contexts made (None: not told) and who made each, or None when the
    counter failed."""
    copies, contexts, makers = 0, None, []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("memcpy-count "):
            if "error=" in line:
                return None
            copies += sum(int(n) for n in re.findall(r"(?:HtoD|DtoH|DtoD|PtoP|other)=(\d+)/", line))
            made = re.search(r" contexts=(\d+)", line)
            if made:
                contexts = (contexts or 0) + int(made.group(1))
        elif line.startswith("context-made "):
            makers.append(line.split(" by: ", 1)[-1])
    return copies, contexts, makers


def counts(folder, frames):
    """The copy counter's figures of a case: GPU copies per produced frame
    (producer, all consumers), CUDA contexts made (producer, each consumer) and
    who made them ({role: [callers]}); None when a process was not counted."""
    producer = folder / "producer.count"
    consumer_files = sorted(folder.glob("consumer-*.count"))
    if not producer.exists() or not frames:
        return None
    p = counted(producer)
    c = [counted(f) for f in consumer_files]
    if p is None or None in c:
        return None
    makers = {"producer": p[2]}
    makers.update({f.stem: x[2] for f, x in zip(consumer_files, c)})
    return {
        "copies": (p[0] / frames, sum(x[0] for x in c) / frames),
        "contexts": (p[1], [x[1] for x in c]),
        "makers": makers,
    }


def gpu_memory(folder, producer_pid, consumer_pids):
    """MiB at most held, as nvidia-smi sampled it: (the producer, the largest
    consumer), each None when not seen."""
    peak = {}
    path = folder / "gpumem.csv"
    if path.exists():
        for line in path.read_text().splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                pid, used = int(parts[0]), int(parts[1])
                peak[pid] = max(peak.get(pid, 0), used)
    seen = [peak[p] for p in consumer_pids if p in peak]
    return peak.get(producer_pid), max(seen) if seen else None


def load(folder):
    transport, n = (folder / "case").read_text().split()
    producer = Log(folder / "producer.log")
    consumers = [Log(folder / f"consumer-{i}.log") for i in range(1, int(n) + 1)]
    return transport, int(n), producer, consumers


def fmt(value, spec="{:.0f}", none="–"):
    return none if value is None else spec.format(value)


def span(values, spec="{:.0f}"):
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    return spec.format(lo) if spec.format(lo) == spec.format(hi) else f"{spec.format(lo)}–{spec.format(hi)}"


def decoder_table(raw):
    print("### Fed by nvh264dec (both bound by the decoder)\n")
    print("| size | consumers | transport | produced | received per consumer | producer CPU µs/frame "
          "| consumer CPU µs/frame | latency p50 / p99 ms | GPU MiB: producer / consumer "
          "| GPU copies per frame (producer + consumers) | CUDA contexts made: producer / consumer |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    makers = {}
    for folder in sorted(raw.glob("decoder-*")):
        transport, n, producer, consumers = load(folder)
        size = folder.name.split("-")[1]
        lat = latencies(producer, consumers, transport)
        p50 = statistics.median(lat) if lat else None
        p99 = statistics.quantiles(lat, n=100)[98] if len(lat) >= 100 else None
        memory = gpu_memory(folder, producer.end.get("pid"), [c.end.get("pid") for c in consumers])
        figures = counts(raw / f"copies-1080p-{n}-{transport}", producer.frames) if size == "1080p" else None
        copies = "–" if figures is None else "{:.2f} + {:.2f}".format(*figures["copies"])
        contexts = "–"
        if figures is not None:
            made_p, made_c = figures["contexts"]
            contexts = f"{fmt(made_p)} / {span(made_c)}"
            makers[f"{n} × {transport}"] = figures["makers"]
        print(f"| {size} | {n} | {transport} | {producer.frames} | {span([c.frames for c in consumers])} "
              f"| {fmt(producer.per_frame_us('steady_cpu_ns'))} "
              f"| {span([c.per_frame_us('steady_cpu_ns') for c in consumers])} "
              f"| {fmt(p50, '{:.2f}')} / {fmt(p99, '{:.2f}')} | {fmt(memory[0])} / {fmt(memory[1])} "
              f"| {copies} | {contexts} |")
    print()
    if makers:
        print("Who made each CUDA context (1080p; the calling frames, innermost first):\n")
        for case, roles in makers.items():
            for role, callers in roles.items():
                for i, by in enumerate(callers, 1):
                    print(f"- {case}, {role}, context {i}: `{by[:400]}`")
        print()


def fast_table(raw):
    print("### Fed faster than any consumer takes (one frame on the GPU, pushed as fast as taken)\n")
    print("| size | consumers | transport | produced | producer fps | received per consumer | fps per consumer |")
    print("|---|---|---|---|---|---|---|")
    for folder in sorted(raw.glob("fast-*")):
        transport, n, producer, consumers = load(folder)
        size = folder.name.split("-")[1]
        print(f"| {size} | {n} | {transport} | {producer.frames} | {fmt(producer.fps())} "
              f"| {span([c.frames for c in consumers])} | {span([c.fps() for c in consumers])} |")
    print()


def told(log):
    text = "; ".join(sorted(set(m for m in log.messages)))
    return text[:160] + ("…" if len(text) > 160 else "") if text else "nothing"


def slow_table(raw):
    print("### A consumer 2× slower than the stream (30 fps, the consumer takes 15)\n")
    print("| transport | produced | received | lost | what the consumer was told |")
    print("|---|---|---|---|---|")
    for folder in sorted(raw.glob("slow-*")):
        transport, _, producer, consumers = load(folder)
        c = consumers[0]
        name = folder.name[len("slow-"):]
        print(f"| {name} | {producer.frames} | {c.frames} | {producer.frames - c.frames} | {told(c)} |")
    print()


def restart_table(raw):
    print("### The producer killed (-9) after 2 s, another started at 3 s (consumer stopped at 8 s)\n")
    print("| transport | consumer frames before the kill | after the restart | consumer ran (s) | told |")
    print("|---|---|---|---|---|")
    for folder in sorted(raw.glob("restart-*")):
        transport = (folder / "case").read_text().split()[0]
        c = Log(folder / "consumer-1.log")
        restarted = int((folder / "restarted").read_text()) if (folder / "restarted").exists() else None
        after = sum(1 for b in c.buffers if restarted is not None and b[0] >= restarted)
        print(f"| {transport} | {c.frames - after} | {after} | {fmt(c.end.get('wall_ns', 0) / 1e9, '{:.1f}')} "
              f"| {told(c)} |")
    print()


def main():
    raw = Path(sys.argv[1])
    decoder_table(raw)
    fast_table(raw)
    slow_table(raw)
    restart_table(raw)


if __name__ == "__main__":
    main()
