#!/usr/bin/env python3
"""How many processes can hold a CUDA context on this GPU at once, and what one costs.

    python3 scripts/gpu/context-ceiling.py [--max N] [--step K] [--stack-size B]

--stack-size sets the context's CU_LIMIT_STACK_SIZE (bytes per GPU thread) right
after it is made, to see how much of a context's memory is its local-memory
reservation (the stack times every thread the GPU can hold at once).

Starts processes K at a time; each retains the device's primary context and
allocates 1 MiB (what any CUDA consumer does first), says so, and waits. Stops at
the first process that fails (its CUDA error is printed) or at --max. Prints the
device memory in use before and after, per process, from nvidia-smi. Answers issue
12's question: at N=24, K=3 a third of the subscriber ffmpegs failed at
cuDevicePrimaryCtxRetain with CUDA_ERROR_OUT_OF_MEMORY.
"""

import argparse
import ctypes
import subprocess
import sys
import time

CHILD = r"""
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
def check(what, rc):
    if rc != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(rc, ctypes.byref(name))
        print(f"FAIL {what}: {rc} {name.value.decode() if name.value else '?'}", flush=True)
        sys.exit(1)
check("cuInit", cuda.cuInit(0))
dev = ctypes.c_int()
check("cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(dev), 0))
ctx = ctypes.c_void_p()
check("cuDevicePrimaryCtxRetain", cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
check("cuCtxSetCurrent", cuda.cuCtxSetCurrent(ctx))
STACK = int(sys.argv[1])
if STACK >= 0:
    check("cuCtxSetLimit", cuda.cuCtxSetLimit(0, ctypes.c_size_t(STACK)))
got = ctypes.c_size_t()
check("cuCtxGetLimit", cuda.cuCtxGetLimit(ctypes.byref(got), 0))
ptr = ctypes.c_uint64()
check("cuMemAlloc", cuda.cuMemAlloc_v2(ctypes.byref(ptr), 1 << 20))
print(f"OK stack={got.value}", flush=True)
sys.stdin.read()
"""


def used_mib():
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, check=False).stdout.strip().splitlines()
    used, total = (int(x) for x in out[0].split(","))
    return used, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=160)
    ap.add_argument("--step", type=int, default=16)
    ap.add_argument("--stack-size", type=int, default=-1,
                    help="CU_LIMIT_STACK_SIZE to set in each context (default: leave it)")
    args = ap.parse_args()
    before, total = used_mib()
    print(f"device memory in use before: {before} MiB of {total} MiB")
    procs = []
    failed = None
    t0 = time.monotonic()
    while len(procs) < args.max and failed is None:
        batch = [subprocess.Popen([sys.executable, "-c", CHILD, str(args.stack_size)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
                 for _ in range(min(args.step, args.max - len(procs)))]
        for p in batch:
            line = p.stdout.readline().strip()
            if line.startswith("OK"):
                if not procs:
                    print(f"first process: {line}")
                procs.append(p)
            else:
                failed = failed or line or f"exit {p.wait()}"
                p.kill()
        used, _ = used_mib()
        per = (used - before) / max(len(procs), 1)
        print(f"{len(procs):4d} processes with a context: {used} MiB in use "
              f"({per:.0f} MiB each), {time.monotonic() - t0:.1f} s", flush=True)
    if failed:
        print(f"first failure after {len(procs)} contexts: {failed}")
    else:
        print(f"no failure up to --max {args.max}")
    for p in procs:
        p.stdin.close()
    for p in procs:
        p.wait()


if __name__ == "__main__":
    main()
