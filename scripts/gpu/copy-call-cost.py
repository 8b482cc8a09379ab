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
  kernel   one cuLaunchKernel of a linear copy kernel (PTX, 16 bytes a thread, grid-stride)
  planes   one cuLaunchKernel of a pitched copy kernel of up to 4 planes (one plane here)
  planes-2 the same kernel, luma and chroma as two planes in one launch

each in two ways: `ring` (before slot i is written again, the CPU waits for the
event recorded after its last fence: the publisher's wait for the slot to be ACKed,
with the GPU as the only reader), `free` (a sync every RING frames only) and
`paced` (as `ring`, at --fps frames a second, the CPU spinning between frames, so its
CPU column counts the spin: read the calls' times).
Prints per mode: frames a second, process CPU us a frame, the copy call's
median and p99 us (wall, around the call) and the fence write's median. Needs
libcuda, nothing else.

usage: copy-call-cost.py [--frames N] [--size WxH] [--ring N] [--rounds N] [--fps N]
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

# dst[i] = src[i] for i < n, 16 bytes each, grid-stride.
COPY_PTX = b"""
.version 6.0
.target sm_50
.address_size 64
.visible .entry copy16(.param .u64 dst, .param .u64 src, .param .u64 n)
{
    .reg .pred %p;
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [dst];
    ld.param.u64 %rd2, [src];
    ld.param.u64 %rd3, [n];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    cvt.u64.u32 %rd4, %r1;
    cvt.u64.u32 %rd5, %r2;
    cvt.u64.u32 %rd6, %r3;
    cvt.u64.u32 %rd7, %r4;
    mul.lo.u64 %rd8, %rd4, %rd5;
    add.u64 %rd8, %rd8, %rd6;
    mul.lo.u64 %rd9, %rd7, %rd5;
LOOP:
    setp.ge.u64 %p, %rd8, %rd3;
    @%p bra DONE;
    shl.b64 %rd10, %rd8, 4;
    add.u64 %rd11, %rd2, %rd10;
    ld.global.nc.v4.u32 {%r0, %r5, %r6, %r7}, [%rd11];
    add.u64 %rd11, %rd1, %rd10;
    st.global.v4.u32 [%rd11], {%r0, %r5, %r6, %r7};
    add.u64 %rd8, %rd8, %rd9;
    bra LOOP;
DONE:
    ret;
}
"""


def planes_ptx(planes=4):
    """A kernel copying up to `planes` pitched planes, 16 bytes a thread, grid-stride
    over each plane's rows x units; a plane of 0 rows is skipped."""
    params = ",\n".join(
        f"  .param .u64 d{k}, .param .u64 s{k}, .param .u64 dp{k}, .param .u64 sp{k}, .param .u32 u{k}, .param .u32 r{k}"
        for k in range(planes))
    body = "".join(f"""
    ld.param.u64 %rd1, [d{k}];
    ld.param.u64 %rd2, [s{k}];
    ld.param.u64 %rd3, [dp{k}];
    ld.param.u64 %rd4, [sp{k}];
    ld.param.u32 %r7, [u{k}];
    ld.param.u32 %r8, [r{k}];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mul.lo.u32 %r9, %r7, %r8;
    mov.u32 %r10, %r5;
L{k}:
    setp.ge.u32 %p, %r10, %r9;
    @%p bra E{k};
    div.u32 %r11, %r10, %r7;
    mul.lo.u32 %r12, %r11, %r7;
    sub.u32 %r12, %r10, %r12;
    cvt.u64.u32 %rd5, %r11;
    cvt.u64.u32 %rd6, %r12;
    shl.b64 %rd6, %rd6, 4;
    mad.lo.u64 %rd7, %rd5, %rd4, %rd2;
    add.u64 %rd7, %rd7, %rd6;
    ld.global.nc.v4.u32 {{%r0, %r13, %r14, %r15}}, [%rd7];
    mad.lo.u64 %rd8, %rd5, %rd3, %rd1;
    add.u64 %rd8, %rd8, %rd6;
    st.global.v4.u32 [%rd8], {{%r0, %r13, %r14, %r15}};
    add.u32 %r10, %r10, %r6;
    bra L{k};
E{k}:""" for k in range(planes))
    return f""".version 6.0
.target sm_50
.address_size 64
.visible .entry copy_planes(
{params})
{{
    .reg .pred %p;
    .reg .b32 %r<16>;
    .reg .b64 %rd<9>;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mad.lo.u32 %r5, %r1, %r2, %r3;
    mul.lo.u32 %r6, %r4, %r2;{body}
    ret;
}}
""".encode()


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
    ap.add_argument("--fps", type=float, default=40000)
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
    pattern = bytes((i * 7 + i // 251) & 0xFF for i in range(frame))
    check(cuda.cuMemcpyHtoD_v2(ctypes.c_uint64(src), pattern, ctypes.c_size_t(frame)), "cuMemcpyHtoD")
    src_pad = alloc(pad_pitch * rows)
    slots = [alloc(frame) for _ in range(args.ring)]
    fences = alloc(8 * args.ring)
    events = []
    for _ in range(args.ring):
        ev = ctypes.c_void_p()
        check(cuda.cuEventCreate(ctypes.byref(ev), 2 | 1), "cuEventCreate")  # no timing, blocking
        events.append(ev)
    luma = width * height
    module, kernel = ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(COPY_PTX + b"\0")), "cuModuleLoadData")
    check(cuda.cuModuleGetFunction(ctypes.byref(kernel), module, b"copy16"), "cuModuleGetFunction")
    sms = ctypes.c_int()
    check(cuda.cuDeviceGetAttribute(ctypes.byref(sms), 16, dev), "cuDeviceGetAttribute")  # SM count
    assert frame % 16 == 0, "the kernel copies 16 bytes a thread"
    units = frame // 16
    threads = 256
    blocks = min(sms.value * 8, (units + threads - 1) // threads)
    planes_mod, planes_fn = ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(planes_mod), ctypes.c_char_p(planes_ptx() + b"\0")), "cuModuleLoadData planes")
    check(cuda.cuModuleGetFunction(ctypes.byref(planes_fn), planes_mod, b"copy_planes"), "cuModuleGetFunction planes")
    assert width % 16 == 0, "the kernel copies 16 bytes a thread"

    def plane_args(planes):
        vals = []
        for k in range(4):
            d, sp_, rows_ = planes[k] if k < len(planes) else (0, 0, 0)
            vals += [ctypes.c_uint64(d), ctypes.c_uint64(sp_), ctypes.c_uint64(width), ctypes.c_uint64(width),
                     ctypes.c_uint32(width // 16), ctypes.c_uint32(rows_)]
        ptrs = (ctypes.c_void_p * len(vals))(*(ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals))
        return vals, ptrs
    pargs = {
        "planes": [plane_args([(s, src, rows)]) for s in slots],
        "planes-2": [plane_args([(s, src, height), (s + luma, src + luma, height // 2)]) for s in slots],
    }
    planes_blocks = min(sms.value * 8, (width // 16 * rows + threads - 1) // threads)
    # Argument blocks per slot, made once (as a library would keep them).
    kargs = []
    for s in slots:
        vals = (ctypes.c_uint64(s), ctypes.c_uint64(src), ctypes.c_uint64(units))
        ptrs = (ctypes.c_void_p * 3)(*(ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals))
        kargs.append((vals, ptrs))
    fence_calls = []

    def queue(mode, i):
        dst = slots[i % args.ring]
        t = time.perf_counter_ns()
        if mode == "1d":
            r = cuda.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(dst), ctypes.c_uint64(src), ctypes.c_size_t(frame), stream)
        elif mode == "kernel":
            r = cuda.cuLaunchKernel(kernel, blocks, 1, 1, threads, 1, 1, 0, stream, kargs[i % args.ring][1], None)
        elif mode in pargs:
            r = cuda.cuLaunchKernel(planes_fn, planes_blocks, 1, 1, threads, 1, 1, 0, stream,
                                    pargs[mode][i % args.ring][1], None)
        else:
            r = 0
            for copy in plans[mode][i % args.ring]:
                r = r or cuda.cuMemcpy2DAsync_v2(ctypes.byref(copy), stream)
        took = time.perf_counter_ns() - t
        check(r, mode)
        t = time.perf_counter_ns()
        check(cuda.cuStreamWriteValue64_v2(stream, ctypes.c_uint64(fences + 8 * (i % args.ring)), ctypes.c_uint64(i), 0),
              "cuStreamWriteValue64")
        fence_calls.append(time.perf_counter_ns() - t)
        return took

    # The 2D modes' copies per slot, made once.
    plans = {
        "2d": [(copy_2d(src, width, s, width, width, rows),) for s in slots],
        "2d-pad": [(copy_2d(src_pad, pad_pitch, s, width, width, rows),) for s in slots],
        "2d-2": [(copy_2d(src, width, s, width, width, height),
                  copy_2d(src + luma, width, s + luma, width, width, height // 2)) for s in slots],
    }

    print(f"{args.size} NV12 ({frame / 1e6:.1f} MB), ring {args.ring}, {args.frames} frames a run")
    print(f"kernel: {blocks} blocks of {threads} threads ({sms.value} SMs)")
    print(f"{'mode':8} {'pacing':6} {'fps':>9} {'CPU us/frame':>13} {'call p50 us':>12} {'call p99 us':>12} {'fence p50 us':>13}")
    for _ in range(args.rounds):
        for pacing in ("ring", "paced", "free"):
            for mode in ("2d", "1d", "kernel", "planes", "planes-2", "2d-pad", "2d-2"):
                kernel_mode = mode in ("kernel", "planes", "planes-2")
                if kernel_mode:  # zeroed first, so the check below sees only this mode's writes
                    for s in slots:
                        check(cuda.cuMemsetD8_v2(ctypes.c_uint64(s), 0, ctypes.c_size_t(frame)), "cuMemsetD8")
                for i in range(args.ring):  # warm
                    queue(mode, i)
                check(cuda.cuStreamSynchronize(stream), "cuStreamSynchronize")
                calls = []
                fence_calls.clear()
                cpu0, wall0 = time.process_time(), time.perf_counter()
                for i in range(args.frames):
                    if pacing == "paced":
                        due = wall0 + i / args.fps
                        while time.perf_counter() < due:
                            pass
                    if pacing != "free" and i >= args.ring:
                        check(cuda.cuEventSynchronize(events[i % args.ring]), "cuEventSynchronize")
                    calls.append(queue(mode, i))
                    if pacing != "free":
                        check(cuda.cuEventRecord(events[i % args.ring], stream), "cuEventRecord")
                    elif i % args.ring == args.ring - 1:
                        check(cuda.cuStreamSynchronize(stream), "cuStreamSynchronize")
                check(cuda.cuStreamSynchronize(stream), "cuStreamSynchronize")
                wall = time.perf_counter() - wall0
                cpu = time.process_time() - cpu0
                calls.sort()
                if kernel_mode:  # the kernel's copy is the bytes, or its times mean nothing
                    out = ctypes.create_string_buffer(frame)
                    for s in slots:
                        check(cuda.cuMemcpyDtoH_v2(out, ctypes.c_uint64(s), ctypes.c_size_t(frame)), "cuMemcpyDtoH")
                        if out.raw != pattern:
                            raise SystemExit(f"{mode}: a slot differs from the source")
                print(f"{mode:8} {pacing:6} {args.frames / wall:9.0f} {cpu / args.frames * 1e6:13.2f} "
                      f"{statistics.median(calls) / 1e3:12.2f} {calls[len(calls) * 99 // 100] / 1e3:12.2f} "
                      f"{statistics.median(fence_calls) / 1e3:13.2f}",
                      flush=True)


if __name__ == "__main__":
    main()
