#!/usr/bin/env python3
"""How long one small GPU operation takes to come back while other processes use the GPU.

Issue 12's K = 4 case (a consumer that holds 8 frames, so the library copies
each frame device to device before it ACKs the slot) ran at ~38 fps per stream
with 5 of 16 cores busy: latency, not CPU. Every frame there waits for GPU work
of another process (the publisher's decode, then the subscriber's copy) before
the next can move. Without MPS each process has its own CUDA context, and the
GPU time-slices between contexts; this probe measures what that costs one wait.

A probe process makes the primary context with blocking sync (as FFmpeg and
libcuframes do), then 30 times a second copies a 1080p NV12 frame (3 MB) device
to device and synchronises its stream, timing submit -> back. Rounds:

  idle       the probes alone
  decode     beside LOAD ffmpeg NVDEC decodes as fast as possible
  decode+N   the same plus N more contexts doing the probe's work (subscribers)

Prints per round the p50, p90, p99 and max of the wait in microseconds over all
probes. Needs libcuda; the decode rounds need an ffmpeg with NVDEC ($FFMPEG; a
clip is made at $CLIP when missing).

usage: copy-latency.py [--seconds S] [--load N] [--busy N] [--probes N] [--out FILE]
"""

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

FRAME = 1920 * 1080 * 3 // 2


def check(code, call):
    if code != 0:
        raise SystemExit(f"{call} failed: CUresult {code}")


def probe(seconds, quiet):
    cu = ctypes.CDLL("libcuda.so.1")
    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cu.cuDevicePrimaryCtxSetFlags_v2(dev, 4), "cuDevicePrimaryCtxSetFlags")  # blocking sync
    ctx = ctypes.c_void_p()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    stream = ctypes.c_void_p()
    check(cu.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")
    a, b = ctypes.c_uint64(), ctypes.c_uint64()
    check(cu.cuMemAlloc_v2(ctypes.byref(a), FRAME), "cuMemAlloc")
    check(cu.cuMemAlloc_v2(ctypes.byref(b), FRAME), "cuMemAlloc")
    waits = []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        t0 = time.perf_counter_ns()
        check(cu.cuMemcpyDtoDAsync_v2(b, a, ctypes.c_size_t(FRAME), stream), "cuMemcpyDtoDAsync")
        check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
        waits.append((time.perf_counter_ns() - t0) / 1000)
        time.sleep(1 / 30)
    if not quiet:
        print(json.dumps(waits[5:]))  # the first waits include lazy set-up


def make_clip(ffmpeg, clip):
    if os.path.exists(clip):
        return
    subprocess.run(
        [ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=1920x1080:r=30", "-t", "40",
         "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "6M", "-pix_fmt", "yuv420p", clip],
        check=True)


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def round_of(args, load, busy, ffmpeg, clip):
    decoders, others = [], []
    if load:
        make_clip(ffmpeg, clip)
        cmd = [ffmpeg, "-nostdin", "-v", "error", "-hwaccel", "cuda", "-hwaccel_output_format", "cuda",
               "-stream_loop", "-1", "-i", clip, "-f", "null", "-"]
        decoders = [subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True) for _ in range(load)]
    others = [subprocess.Popen([sys.executable, __file__, "--probe", str(args.seconds + 6), "quiet"])
              for _ in range(busy)]
    if load or busy:
        time.sleep(4)  # past their start-up
        failed = [d for d in decoders if d.poll() is not None]
        if failed:
            raise SystemExit(f"{len(failed)} of {load} load decoders ended early: {failed[0].stderr.read()[-500:]}")
    probes = [subprocess.Popen([sys.executable, __file__, "--probe", str(args.seconds), "report"],
                               stdout=subprocess.PIPE, text=True) for _ in range(args.probes)]
    waits = []
    for p in probes:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit("a probe failed")
        waits += json.loads(out)
    for d in decoders + others:
        d.terminate()
    for d in decoders + others:
        d.communicate()
    return {"load": load, "busy": busy, "n": len(waits),
            "p50_us": round(pct(waits, 50), 1), "p90_us": round(pct(waits, 90), 1),
            "p99_us": round(pct(waits, 99), 1), "max_us": round(max(waits), 1)}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--probe":
        probe(float(sys.argv[2]), sys.argv[3] == "quiet")
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--load", type=int, default=16)
    parser.add_argument("--busy", type=int, default=48)
    parser.add_argument("--probes", type=int, default=4)
    parser.add_argument("--out")
    args = parser.parse_args()
    ffmpeg = os.environ.get("FFMPEG", "ffmpeg")
    clip = os.environ.get("CLIP", "/tmp/copy-latency-clip-40s.mp4")
    rounds = [round_of(args, 0, 0, ffmpeg, clip), round_of(args, args.load, 0, ffmpeg, clip),
              round_of(args, args.load, args.busy, ffmpeg, clip)]
    print(f"{'decoders':>8} {'busy ctx':>8} {'waits':>6} {'p50 us':>8} {'p90 us':>8} {'p99 us':>8} {'max us':>8}")
    for r in rounds:
        print(f"{r['load']:>8} {r['busy']:>8} {r['n']:>6} {r['p50_us']:>8} {r['p90_us']:>8} {r['p99_us']:>8} {r['max_us']:>8}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rounds, f, indent=1)


if __name__ == "__main__":
    main()
