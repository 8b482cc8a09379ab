#!/usr/bin/env python3
"""Time a subscriber's start against a live publisher (GPU machine, issue 13).

    CUFRAMES_LIBRARY=.gpu/lib/libcuframes.so PYTHONPATH=python \
        python3 scripts/gpu/import-time.py KEY LABEL [ROUNDS] [--fresh-context]

Each round connects to KEY (socket, handshake, header, and for CUDA memory
every slot imported and mapped before SUBSCRIBE, D23: cuIpcOpenMemHandle, or
cuMemImportFromShareableHandle + cuMemMap for fd sharing), reads one frame,
and closes (unmapping). One warm-up round first, so the library is loaded
before timing. The script holds device 0's primary context (when libcuda is
there) for the whole run, so a round does not make and destroy the context the
slots are mapped in (~100 ms on the H200, what a new process pays once);
--fresh-context measures that too. Prints one line:

    LABEL: connect ms p50 (min-max), first frame ms p50 (min-max), N rounds

Against a host-memory publisher the same rounds give the cost without CUDA
imports; the difference is the import time.
"""
import ctypes
import statistics
import sys
import time

import cuframes


def one_round(key):
    t0 = time.perf_counter()
    with cuframes.Subscriber(key, timeout=5.0, mode="latest") as sub:
        t1 = time.perf_counter()
        sub.next().close()
        t2 = time.perf_counter()
    return (t1 - t0) * 1e3, (t2 - t0) * 1e3


def summary(values):
    return "%.2f (%.2f-%.2f)" % (statistics.median(values), min(values), max(values))


def hold_primary_context():
    """Device 0's primary context, current on this thread, kept for the run."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return  # host memory only
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    for call, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(dev), 0)),
                       ("cuDevicePrimaryCtxRetain", (ctypes.byref(ctx), dev)), ("cuCtxSetCurrent", (ctx,))):
        code = getattr(cu, call)(*args)
        if code != 0:
            raise SystemExit("import-time: %s failed: CUresult %d" % (call, code))


def main():
    args = [a for a in sys.argv[1:] if a != "--fresh-context"]
    if len(args) < 2:
        raise SystemExit(__doc__)
    key, label = args[0], args[1]
    rounds = int(args[2]) if len(args) > 2 else 20
    if "--fresh-context" not in sys.argv:
        hold_primary_context()
    one_round(key)
    connect, whole = [], []
    for _ in range(rounds):
        c, w = one_round(key)
        connect.append(c)
        whole.append(w)
    print("%s: connect ms %s, first frame ms %s, %d rounds" % (label, summary(connect), summary(whole), rounds))


if __name__ == "__main__":
    main()
