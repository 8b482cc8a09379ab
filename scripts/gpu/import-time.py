#!/usr/bin/env python3
"""Time a subscriber's start against a live publisher (GPU machine, issue 13).

    CUFRAMES_LIBRARY=.gpu/lib/libcuframes.so PYTHONPATH=python \
        python3 scripts/gpu/import-time.py KEY LABEL [ROUNDS]

Each round connects to KEY (socket, handshake, header, and for CUDA memory
every slot imported and mapped before SUBSCRIBE, D23: cuIpcOpenMemHandle, or
cuMemImportFromShareableHandle + cuMemMap for fd sharing), reads one frame,
and closes (unmapping). One warm-up round first, so the CUDA context and the
library are loaded before timing. Prints one line:

    LABEL: connect ms p50 (min-max), first frame ms p50 (min-max), N rounds

Against a host-memory publisher the same rounds give the cost without CUDA
imports; the difference is the import time.
"""
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


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    key, label = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    one_round(key)
    connect, whole = [], []
    for _ in range(rounds):
        c, w = one_round(key)
        connect.append(c)
        whole.append(w)
    print("%s: connect ms %s, first frame ms %s, %d rounds" % (label, summary(connect), summary(whole), rounds))


if __name__ == "__main__":
    main()
