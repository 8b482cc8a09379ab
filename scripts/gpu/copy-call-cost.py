#!/usr/bin/env python3
"""What one frame's copy into a ring slot costs the CPU, by the driver call that makes it.

Issue 27: the ring's publisher spends ~21 us of CPU a 4K frame, ~15 us of it inside
cuMemcpy2DAsync (bench/runs/2026-12-04i/ring-calls.txt). This asks the driver alone
(no cuframes) whether another way to queue the same bytes costs less: a frame of
WIDTHxHEIGHT NV12 whose rows are back to back (pitch = width, as a slot's and FFmpeg's
CUDA frames are at 3840) is copied into a ring of RING slots, each copy followed by a
64-bit fence write (cuStreamWriteValue64), as the publisher does, by

  2d       one cuMemcpy2DAsync of all rows (what the publisher queues now)
  2d-pad   the same from a source with a wider pitch (copied row by row on the GPU)
  1d       one cuMemcpyDtoDAsync of the whole block
  2d-2     two cuMemcpy2DAsync, luma then chroma (the publisher before 807ea62)

each in two ways: `ring` (before slot i is written again, the CPU waits for the
event recorded after its last fence: the publisher's wait for the slot to be ACKed,
with the GPU as the only reader) and `free` (a sync every RING frames only).
Prints per mode: frames a second, process CPU us a frame, and the copy call's
median and p99 us (wall, around the call). Needs libcuda, nothing else.

usage: copy-call-cost.py [--frames N] [--size WxH] [--ring N] [--rounds N]
"""

import argparse
import ctypes
import statistics
import time

CU_MEMORYTYPE_DEVICE = 2


class Memcpy2D(ctypes.Structure):
    _fields_ = [
        ("srcXInBytes", ctypes.c_size_t),
        ("srcY", ctypes.c_size_t),
        ("srcMemoryType", ctypes.c_int),
        ("srcHost", ctypes.c_void_p),
        ("srcDevice", ctypes.c_uint64),
        ("srcArray", ctypes.c_void_p),
        ("srcPitch", ctypes.c_size_t),
        ("dstXInBytes", ctypes.c_size_t),
        ("dstY", ctypes.c_size_t),
        ("dstMemoryType", ctypes.c_int),
        ("dstHost", ctypes.c_void_p),
        ("dstDevice", ctypes.c_uint64),
        ("dstArray", ctypes.c_void_p),
        ("dstPitch", ctypes.c_size_t),
        ("WidthInBytes", ctypes.c_size_t),
        ("Height", ctypes.c_size_t),
    ]


cuda = ctypes.CDLL("libcuda.so.1")


def check(code, call):
    if code != 0:
        raise SystemExit(f"{call} failed: CUresult {code}")


def alloc(size):
    ptr = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)), "cuMemAlloc")
    return ptr.value


def copy_2d(src, src_pitch, dst, dst_pitch, row_bytes, rows):
    c = Memcpy2D()
    c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE
    c.srcDevice, c.srcPitch = src, src_pitch
    c.dstDevice, c.dstPitch = dst, dst_pitch
    c.WidthInBytes, c.Height = row_bytes, rows
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--size", default="3840x2160")
    ap.add_argument("--ring", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    rows = height * 3 // 2
    frame = width * rows

    check(cuda.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cuda.cuDevicePrimaryCtxSetFlags_v2(dev, 4), "cuDevicePrimaryCtxSetFlags")  # blocking sync
    ctx = ctypes.c_void_p()
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    stream = ctypes.c_void_p()
    check(cuda.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")
    pad_pitch = (width + 511) // 512 * 512 + 512
    src = alloc(frame)
    src_pad = alloc(pad_pitch * rows)
    slots = [alloc(frame) for _ in range(args.ring)]
    fences = alloc(8 * args.ring)
    events = []
    for _ in range(args.ring):
        ev = ctypes.c_void_p()
        check(cuda.cuEventCreate(ctypes.byref(ev), 2 | 1), "cuEventCreate")  # no timing, blocking
        events.append(ev)
    luma = width * height

    def queue(mode, i):
        dst = slots[i % args.ring]
        t = time.perf_counter_ns()
        if mode == "1d":
            r = cuda.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(dst), ctypes.c_uint64(src), ctypes.c_size_t(frame), stream)
        else:
            r = 0
            for copy in plans[mode][i % args.ring]:
                r = r or cuda.cuMemcpy2DAsync_v2(ctypes.byref(copy), stream)
        took = time.perf_counter_ns() - t
        check(r, mode)
        check(cuda.cuStreamWriteValue64_v2(stream, ctypes.c_uint64(fences + 8 * (i % args.ring)), ctypes.c_uint64(i), 0),
              "cuStreamWriteValue64")
        return took

    # The 2D modes' copies per slot, made once.
    plans = {
        "2d": [(copy_2d(src, width, s, width, width, rows),) for s in slots],
        "2d-pad": [(copy_2d(src_pad, pad_pitch, s, width, width, rows),) for s in slots],
        "2d-2": [(copy_2d(src, width, s, width, width, height),
                  copy_2d(src + luma, width, s + luma, width, width, height // 2)) for s in slots],
    }

    print(f"{args.size} NV12 ({frame / 1e6:.1f} MB), ring {args.ring}, {args.frames} frames a run")
    print(f"{'mode':8} {'pacing':6} {'fps':>9} {'CPU us/frame':>13} {'call p50 us':>12} {'call p99 us':>12}")
    for _ in range(args.rounds):
        for pacing in ("ring", "free"):
            for mode in ("2d", "1d", "2d-pad", "2d-2"):
                for i in range(args.ring):  # warm
                    queue(mode, i)
                check(cuda.cuStreamSynchronize(stream), "cuStreamSynchronize")
                calls = []
                cpu0, wall0 = time.process_time(), time.perf_counter()
                for i in range(args.frames):
                    if pacing == "ring" and i >= args.ring:
                        check(cuda.cuEventSynchronize(events[i % args.ring]), "cuEventSynchronize")
                    calls.append(queue(mode, i))
                    if pacing == "ring":
                        check(cuda.cuEventRecord(events[i % args.ring], stream), "cuEventRecord")
                    elif i % args.ring == args.ring - 1:
                        check(cuda.cuStreamSynchronize(stream), "cuStreamSynchronize")
                check(cuda.cuStreamSynchronize(stream), "cuStreamSynchronize")
                wall = time.perf_counter() - wall0
                cpu = time.process_time() - cpu0
                calls.sort()
                print(f"{mode:8} {pacing:6} {args.frames / wall:9.0f} {cpu / args.frames * 1e6:13.2f} "
                      f"{statistics.median(calls) / 1e3:12.2f} {calls[len(calls) * 99 // 100] / 1e3:12.2f}",
                      flush=True)


if __name__ == "__main__":
    main()
