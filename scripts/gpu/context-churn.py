#!/usr/bin/env python3
"""How the CUDA driver serialises contexts when many processes start and end at
once (issue 27, docs/benchmarks.md): N processes started together each make a
context (cuInit, cuDevicePrimaryCtxRetain or cuCtxCreate), wait until all have
one, then end, destroying it first or leaving it to process exit.

  context-churn.py [--processes 48] [--end destroy|exit] [--kind primary|create]

Prints, in seconds from the start: when the last context was made, each
process's creation time (median, max), and when the last process had exited.
Uses libcuda through ctypes: runs wherever the driver is, nothing else needed.
"""

import argparse
import ctypes
import multiprocessing as mp
import os
import statistics
import sys
import time


def child(kind, end, barrier, results):
    cuda = ctypes.CDLL("libcuda.so.1")
    t0 = time.monotonic()
    assert cuda.cuInit(0) == 0
    t_init = time.monotonic()
    dev = ctypes.c_int()
    assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    ctx = ctypes.c_void_p()
    if kind == "primary":
        assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
        assert cuda.cuCtxSetCurrent(ctx) == 0
    else:
        assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 4, dev) == 0  # blocking sync, as FFmpeg
    free = ctypes.c_void_p()
    assert cuda.cuMemAlloc_v2(ctypes.byref(free), 1 << 20) == 0  # the context is in use
    t_ctx = time.monotonic()
    results.put((os.getpid(), t_init - t0, t_ctx - t0, time.time()))
    barrier.wait()
    if end == "destroy":
        t = time.monotonic()
        if kind == "primary":
            cuda.cuDevicePrimaryCtxRelease_v2(dev)
        else:
            cuda.cuCtxDestroy_v2(ctx)
        results.put((os.getpid(), "destroy", time.monotonic() - t, time.time()))
    # os._exit skips the queue's flush: wait for it, so no result is lost.
    results.close()
    results.join_thread()
    os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, default=48)
    ap.add_argument("--end", choices=["destroy", "exit"], default="destroy")
    ap.add_argument("--kind", choices=["primary", "create"], default="primary")
    a = ap.parse_args()
    mp.set_start_method("spawn")
    barrier = mp.Barrier(a.processes)
    results = mp.Queue()
    start = time.time()
    procs = [mp.Process(target=child, args=(a.kind, a.end, barrier, results)) for _ in range(a.processes)]
    for p in procs:
        p.start()
    made, destroys = [], []
    for _ in range(a.processes * (2 if a.end == "destroy" else 1)):
        pid, x, y, at = results.get(timeout=120)
        if x == "destroy":
            destroys.append(y)
        else:
            made.append((x, y, at - start))
    for p in procs:
        p.join()
    ended = time.time() - start
    creation = [y - x for x, y, _ in made]
    print("context-churn: %d processes, %s contexts, end by %s: last context made at %.2f s; "
          "creation (after cuInit) median %.3f s, max %.3f s; cuInit median %.3f s; %s"
          "all exited at %.2f s" % (
              a.processes, a.kind, a.end, max(at for _, _, at in made), statistics.median(creation),
              max(creation), statistics.median(x for x, _, _ in made),
              "destroy median %.3f s, max %.3f s; " % (statistics.median(destroys), max(destroys))
              if destroys else "", ended))
    return 0


if __name__ == "__main__":
    sys.exit(main())
