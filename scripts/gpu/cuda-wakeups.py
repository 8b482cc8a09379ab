#!/usr/bin/env python3
"""What a CUDA process's driver threads cost while other processes use the GPU.

Issue 12's profile found the driver's `cuda-EvtHandlr` thread dominating the CPU
of every ffmpeg on a busy GPU, subscribers and decoders alike. This probe asks
whether that cost follows a process's own work or the GPU's load, and whether
the context's scheduling flag changes it. Each probe process makes the device's
primary context with one flag and, for a fixed time, does one kind of work:

  idle    nothing (a context held open)
  query   30 times a second: cuEventRecord + cuEventQuery (a subscriber's
          per-frame calls when the publish is already done)
  sync    30 times a second: a 1 MiB device copy and cuStreamSynchronize
          (a consumer that waits for its GPU work)

It runs every flag x work pair at once, first on an otherwise idle GPU, then
beside LOAD ffmpeg NVDEC decodes, and prints per probe the CPU time and context
switches of each thread, summed by thread name. The decoders play in real time
(-re, 30 fps each), as a transcoding host's streams do. Needs libcuda and, for the
load, an ffmpeg with NVDEC ($FFMPEG) and a clip ($CLIP, made when missing).

usage: cuda-wakeups.py [--seconds S] [--load N] [--out FILE]
"""

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

FLAGS = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}
WORK = ("idle", "query", "sync")
TICK = os.sysconf("SC_CLK_TCK")


def threads_of(pid="self"):
    """{thread name: [cpu seconds, voluntary, involuntary switches]} summed."""
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/stat") as f:
                stat = f.read()
            with open(f"{base}/{tid}/status") as f:
                status = dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        entry = out.setdefault(name, [0.0, 0, 0])
        entry[0] += cpu
        entry[1] += int(status["voluntary_ctxt_switches"])
        entry[2] += int(status["nonvoluntary_ctxt_switches"])
    return out


def check(code, call):
    if code != 0:
        raise SystemExit(f"{call} failed: CUresult {code}")


def probe(flag, work, seconds):
    cu = ctypes.CDLL("libcuda.so.1")
    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cu.cuDevicePrimaryCtxSetFlags_v2(dev, FLAGS[flag]), "cuDevicePrimaryCtxSetFlags")
    ctx = ctypes.c_void_p()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    stream = ctypes.c_void_p()
    check(cu.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")
    event = ctypes.c_void_p()
    check(cu.cuEventCreate(ctypes.byref(event), 2), "cuEventCreate")  # disable timing
    a, b = ctypes.c_uint64(), ctypes.c_uint64()
    check(cu.cuMemAlloc_v2(ctypes.byref(a), 1 << 20), "cuMemAlloc")
    check(cu.cuMemAlloc_v2(ctypes.byref(b), 1 << 20), "cuMemAlloc")
    before = threads_of()
    start = time.monotonic()
    ticks = 0
    while time.monotonic() - start < seconds:
        if work == "query":
            check(cu.cuEventRecord(event, stream), "cuEventRecord")
            cu.cuEventQuery(event)
        elif work == "sync":
            check(cu.cuMemcpyDtoDAsync_v2(b, a, ctypes.c_size_t(1 << 20), stream), "cuMemcpyDtoDAsync")
            check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
        ticks += 1
        time.sleep(1 / 30)
    after = threads_of()
    diff = {}
    for name, (cpu, vol, invol) in after.items():
        was = before.get(name, [0.0, 0, 0])
        diff[name] = {"cpu_s": round(cpu - was[0], 3), "ctxsw": (vol - was[1]) + (invol - was[2])}
    print(json.dumps({"flag": flag, "work": work, "ticks": ticks, "threads": diff}))


def make_clip(ffmpeg, clip):
    if os.path.exists(clip):
        return
    subprocess.run(
        [ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=1920x1080:r=30", "-t", "40",
         "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "6M", "-pix_fmt", "yuv420p", clip],
        check=True)


def round_of(seconds, load, ffmpeg, clip):
    decoders = []
    if load:
        make_clip(ffmpeg, clip)
        # As bench-host's direct decoders (a clip long enough to outlast the probes).
        cmd = [ffmpeg, "-nostdin", "-v", "error", "-hwaccel", "cuda", "-hwaccel_output_format", "cuda",
               "-re", "-i", clip, "-f", "null", "-"]
        decoders = [subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True) for _ in range(load)]
        time.sleep(4)  # past the decoders' start-up
        failed = [d for d in decoders if d.poll() is not None]
        if failed:
            raise SystemExit(f"{len(failed)} of {load} load decoders ended early: {failed[0].stderr.read()[-500:]}")
    probes = [
        subprocess.Popen([sys.executable, __file__, "--probe", flag, work, str(seconds)],
                         stdout=subprocess.PIPE, text=True)
        for flag in FLAGS for work in WORK
    ]
    results = []
    for p in probes:
        out, _ = p.communicate()
        if p.returncode == 0 and out.strip():
            results.append(json.loads(out))
    for d in decoders:
        d.terminate()
    for d in decoders:
        d.communicate()
    return results


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--probe":
        probe(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--load", type=int, default=16)
    parser.add_argument("--out")
    args = parser.parse_args()
    ffmpeg = os.environ.get("FFMPEG", "ffmpeg")
    clip = os.environ.get("CLIP", "/tmp/cuda-wakeups-clip-40s.mp4")
    report = {}
    for load in (0, args.load):
        report[f"load={load}"] = round_of(args.seconds, load, ffmpeg, clip)
    print(f"{'load':>7} {'flag':>9} {'work':>6} {'all cpu s':>9} {'EvtHandlr cpu s':>15} {'EvtHandlr ctxsw/s':>17}")
    for key, results in report.items():
        for r in results:
            evt = r["threads"].get("cuda-EvtHandlr", {"cpu_s": 0, "ctxsw": 0})
            total = sum(t["cpu_s"] for t in r["threads"].values())
            print(f"{key:>7} {r['flag']:>9} {r['work']:>6} {total:9.2f} {evt['cpu_s']:15.2f} "
                  f"{evt['ctxsw'] / args.seconds:17.0f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
