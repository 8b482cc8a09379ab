#!/usr/bin/env python3
"""How the CUDA driver serialises contexts when many processes start and end at
once (issue 27, docs/benchmarks.md): N processes started together each make a
context (cuInit, cuDevicePrimaryCtxRetain or cuCtxCreate), wait until all have
one, then end, destroying it first or leaving it to process exit.

  context-churn.py [--processes 48] [--end destroy|exit] [--kind primary|create]
                   [--connections C [--lean M] [--after-init]] [--stack BYTES]

--connections C sets CUDA_DEVICE_MAX_CONNECTIONS=C in M of the processes (--lean,
default all; the others keep the driver's default): what one hardware queue per
context saves, and what it saves when only some processes (a host's subscribers)
set it. --after-init sets it after cuInit, just before the context is made: whether
the driver reads it per context or once per process.

Prints, in seconds from the start: when the last context was made, each
process's creation time (median, max), the GPU memory in use while all contexts
exist, and when the last process had exited.
Uses libcuda through ctypes: runs wherever the driver is, nothing else needed.
"""

import argparse
import ctypes
import multiprocessing as mp
import os
import statistics
import sys
import time


def child(kind, end, connections, after_init, stack, barrier, measured, results):
    if connections and not after_init:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = str(connections)
    cuda = ctypes.CDLL("libcuda.so.1")
    t0 = time.monotonic()
    assert cuda.cuInit(0) == 0
    t_init = time.monotonic()
    if connections and after_init:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = str(connections)
    dev = ctypes.c_int()
    assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    ctx = ctypes.c_void_p()
    if kind == "primary":
        assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
        assert cuda.cuCtxSetCurrent(ctx) == 0
    else:
        assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 4, dev) == 0  # blocking sync, as FFmpeg
    if stack is not None:  # as libcuframes does for a context it starts (D31)
        assert cuda.cuCtxSetLimit(0, ctypes.c_size_t(stack)) == 0  # CU_LIMIT_STACK_SIZE
    free = ctypes.c_void_p()
    assert cuda.cuMemAlloc_v2(ctypes.byref(free), 1 << 20) == 0  # the context is in use
    t_ctx = time.monotonic()
    results.put((os.getpid(), t_init - t0, t_ctx - t0, time.time(), bool(connections)))
    barrier.wait()
    # Every context is alive until all have read the device's free memory.
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
    results.put((os.getpid(), "memory", total.value - free.value, time.time()))
    measured.wait()
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
    ap.add_argument("--connections", type=int, default=0, help="CUDA_DEVICE_MAX_CONNECTIONS of the lean processes")
    ap.add_argument("--lean", type=int, default=None, help="how many processes set it (default all)")
    ap.add_argument("--after-init", action="store_true", help="set it after cuInit")
    ap.add_argument("--stack", type=int, default=None, help="cuCtxSetLimit(CU_LIMIT_STACK_SIZE) once made")
    a = ap.parse_args()
    lean = a.processes if a.lean is None else a.lean
    if a.connections < 0 or not 0 <= lean <= a.processes:
        ap.error("--connections must be >= 0 and --lean within 0..--processes")
    mp.set_start_method("spawn")
    barrier, measured = mp.Barrier(a.processes), mp.Barrier(a.processes)
    results = mp.Queue()
    start = time.time()
    procs = [mp.Process(target=child, args=(a.kind, a.end, a.connections if i < lean else 0, a.after_init,
                                            a.stack, barrier, measured, results)) for i in range(a.processes)]
    for p in procs:
        p.start()
    made, destroys, used = [], [], []
    for _ in range(a.processes * (3 if a.end == "destroy" else 2)):
        pid, x, y, at, *rest = results.get(timeout=120)
        if x == "destroy":
            destroys.append(y)
        elif x == "memory":
            used.append(y)
        else:
            made.append((x, y, at - start, rest[0]))
    for p in procs:
        p.join()
    ended = time.time() - start
    creation = [y - x for x, y, _, _ in made]
    setting = "" if a.stack is None else " (stack %d bytes)" % a.stack
    if a.connections:
        setting += " (CUDA_DEVICE_MAX_CONNECTIONS=%d in %d of them%s)" % (
            a.connections, lean, ", set after cuInit" if a.after_init else "")
    groups = ""
    if 0 < lean < a.processes:
        for name, want in (("lean", True), ("default", False)):
            group = [(y - x, at) for x, y, at, is_lean in made if is_lean == want]
            groups += "%s: creation median %.3f s, last made at %.2f s; " % (
                name, statistics.median(c for c, _ in group), max(at for _, at in group))
    print("context-churn: %d processes%s, %s contexts, end by %s: last context made at %.2f s; "
          "creation (after cuInit) median %.3f s, max %.3f s; cuInit median %.3f s; %s%s"
          "GPU memory in use with all contexts made %.0f MiB (%.0f MiB a context, the rest of the GPU "
          "idle); all exited at %.2f s" % (
              a.processes, setting, a.kind, a.end, max(at for _, _, at, _ in made), statistics.median(creation),
              max(creation), statistics.median(x for x, _, _, _ in made), groups,
              "destroy median %.3f s, max %.3f s; " % (statistics.median(destroys), max(destroys))
              if destroys else "", max(used) / 2**20, max(used) / 2**20 / a.processes, ended))
    return 0


if __name__ == "__main__":
    sys.exit(main())
