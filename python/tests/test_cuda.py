"""CUDA-memory tests of the Python bindings (need a GPU, PyTorch and/or CuPy).

Under pytest they are skipped where no GPU, PyTorch or CuPy is usable. They
also run without pytest (the GPU machine may lack it)::

    CUFRAMES_LIBRARY=.../libcuframes.so CUFRAMES_BIN=.../cuframes \
        PYTHONPATH=python python3 python/tests/test_cuda.py

which prints one line per test and ``python-cuda: N passed, M failed, K skipped``.
"""

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
try:
    import cuframes  # noqa: F401
except ImportError as e:
    if type(e).__name__ == "LibraryNotFoundError":
        raise
    sys.path.insert(0, os.path.dirname(HERE))
    import cuframes

from cuframes import _dlpack, pattern  # noqa: E402

import numpy as np  # noqa: E402

try:
    import pytest
except ImportError:  # standalone run
    pytest = None

WIDTH, HEIGHT = 1920, 1080


class Skipped(Exception):
    pass


def skip(reason):
    if pytest is not None:
        pytest.skip(reason)
    raise Skipped(reason)


def need_torch():
    try:
        import torch
    except ImportError:
        skip("PyTorch is not installed")
    if not torch.cuda.is_available():
        skip("PyTorch sees no CUDA device")
    return torch


def need_cupy():
    try:
        import cupy
    except ImportError:
        skip("CuPy is not installed")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            skip("CuPy sees no CUDA device")
    except Exception as e:  # no driver
        skip("CuPy cannot use CUDA: %s" % e)
    return cupy


def need_cli():
    explicit = os.environ.get("CUFRAMES_BIN")
    if explicit:
        return explicit
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    for profile in ("release", "debug"):
        path = os.path.join(target, profile, "cuframes")
        if os.path.isfile(path):
            return path
    found = shutil.which("cuframes")
    if not found:
        skip("the cuframes CLI is not built (set CUFRAMES_BIN)")
    return found


def fresh_key():
    if not os.environ.get("CUFRAMES_RUNTIME_DIR"):
        os.environ["CUFRAMES_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="cuframes-pycuda-")
    return "pycuda-" + uuid.uuid4().hex[:10]


def cli_publisher(cli, key, frames, fmt="nv12", ring=4):
    return subprocess.Popen(
        [cli, "publish", key, "--memory", "cuda", "--format", fmt, "--size", "%dx%d" % (WIDTH, HEIGHT),
         "--fps", "0", "--frames", str(frames), "--ring", str(ring), "--policy", "strict-wait",
         "--wait-subscribers", "1", "--quiet"]
    )


def cli_subscriber(cli, key, frames):
    return subprocess.Popen(
        [cli, "subscribe", key, "--frames", str(frames), "--verify", "--json", "--timeout", "20s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc):
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, "cuframes subscribe failed (%s): %s %s" % (proc.returncode, out, err)
    return json.loads(out.strip().splitlines()[-1])


def stop(proc):
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def last_seen(cli, key, name):
    out = subprocess.run([cli, "inspect", key, "--json"], check=True, capture_output=True, text=True).stdout
    for sub in json.loads(out)["subscriber_slots"]:
        if sub["name"] == name:
            return sub["last_seen_seq"]
    raise AssertionError("subscriber %s not in the header" % name)


# --- subscribing: the slot itself, as a tensor ----------------------------


def test_torch_from_dlpack_is_the_mapped_slot():
    torch = need_torch()
    cli = need_cli()
    key = fresh_key()
    frames = 40
    proc = cli_publisher(cli, key, frames)
    try:
        addresses = set()
        checked = 0
        # The slots themselves (the default, copy="auto", copies under drop_oldest).
        with cuframes.Subscriber(key, timeout=20, wait_publisher=20, cuda_device=0, copy="never", read_ahead=0) as sub:
            assert sub.info.memory == "cuda" and sub.device == 0
            for frame in sub:
                assert frame.memory == "cuda" and frame.device == 0
                for p, plane in enumerate(frame.planes):
                    assert plane.__dlpack_device__() == (2, 0)
                    t = torch.from_dlpack(plane)
                    assert t.is_cuda and t.dtype == torch.uint8
                    assert t.data_ptr() == plane.ptr, "from_dlpack copied the plane"
                    assert tuple(t.shape) == plane.shape
                    assert tuple(s * t.element_size() for s in t.stride()) == plane.strides
                    if frame.seq % 10 == 1:  # the contents, on a few frames
                        assert pattern.check_plane("nv12", frame.seq - 1, p, t.cpu().numpy()), (
                            "frame %d plane %d differs from the pattern" % (frame.seq, p)
                        )
                        checked += 1
                    # __cuda_array_interface__ gives the same memory.
                    u = torch.as_tensor(plane, device="cuda")
                    assert u.data_ptr() == plane.ptr
                addresses.add(frame.planes[0].ptr)
                with pytest.raises(TypeError) if pytest else _raises(TypeError):
                    np.asarray(frame.planes[0])
                del t, u  # or the last frame stays leased after the loop
            stats = sub.stats
        assert stats.received == frames and stats.dropped == 0, stats
        assert 1 <= len(addresses) <= 4, "more slot addresses than slots: %s" % addresses
        assert checked == 8
        assert proc.wait(timeout=20) == 0
    finally:
        stop(proc)


ISOLATE = ["unshare", "--pid", "--ipc", "--mount", "--fork", "--mount-proc", "--kill-child", "--", "sh", "-c",
           'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$0" "$@"']

ISOLATED_SUBSCRIBER = """
import json, sys, torch, cuframes
from cuframes import pattern
key, frames = sys.argv[1], int(sys.argv[2])
checked = 0
with cuframes.Subscriber(key, timeout=20, wait_publisher=20, cuda_device=0, copy="never", read_ahead=0) as sub:
    for frame in sub:
        for p, plane in enumerate(frame.planes):
            t = torch.from_dlpack(plane)
            assert t.data_ptr() == plane.ptr, "from_dlpack copied the plane"
            if frame.seq % 10 == 1:
                assert pattern.check_plane("nv12", frame.seq - 1, p, t.cpu().numpy()), (frame.seq, p)
                checked += 1
        del t
    stats = sub.stats
print(json.dumps({"received": stats.received, "dropped": stats.dropped, "checked": checked,
                  "cuda_share": sub.info.cuda_share}))
"""


def test_torch_subscriber_in_another_container():
    """Publisher and a PyTorch subscriber in sibling PID/IPC/mount namespaces,
    each with its own /dev/shm, sharing only the runtime directory."""
    need_torch()
    cli = need_cli()
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        skip("needs root and unshare")
    key = fresh_key()
    frames = 40
    pub = subprocess.Popen(ISOLATE + [cli, "publish", key, "--memory", "cuda", "--size", "%dx%d" % (WIDTH, HEIGHT),
                                      "--fps", "0", "--frames", str(frames), "--policy", "strict-wait",
                                      "--wait-subscribers", "1", "--quiet"])
    try:
        sub = subprocess.run(ISOLATE + [sys.executable, "-c", ISOLATED_SUBSCRIBER, key, str(frames)],
                             capture_output=True, text=True, timeout=90)
        assert sub.returncode == 0, "isolated subscriber failed: %s %s" % (sub.stdout, sub.stderr)
        result = json.loads(sub.stdout.strip().splitlines()[-1])
        assert result == {"received": frames, "dropped": 0, "checked": 8, "cuda_share": "fd"}, result
        assert pub.wait(timeout=20) == 0
    finally:
        stop(pub)


class _raises:
    def __init__(self, kind):
        self.kind = kind

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            raise AssertionError("%s was not raised" % self.kind.__name__)
        return issubclass(kind, self.kind)


def test_cupy_cuda_array_interface_is_the_mapped_slot():
    cupy = need_cupy()
    cli = need_cli()
    key = fresh_key()
    frames = 12
    proc = cli_publisher(cli, key, frames, fmt="p010")
    try:
        with cuframes.Subscriber(key, timeout=20, wait_publisher=20, cuda_device=0, copy="never", read_ahead=0) as sub:
            for frame in sub:
                for p, plane in enumerate(frame.planes):
                    cai = plane.__cuda_array_interface__
                    assert cai["data"][0] == plane.ptr and cai["typestr"] == "<u2"
                    a = cupy.asarray(plane)
                    assert a.data.ptr == plane.ptr, "cupy.asarray copied the plane"
                    assert a.shape == plane.shape and a.strides == plane.strides
                    b = cupy.from_dlpack(plane)
                    assert b.data.ptr == plane.ptr
                    assert pattern.check_plane("p010", frame.seq - 1, p, cupy.asnumpy(a))
                    del a, b
        assert proc.wait(timeout=20) == 0
    finally:
        stop(proc)


def test_tensor_keeps_the_lease_and_release_waits_for_the_stream():
    torch = need_torch()
    cli = need_cli()
    key = fresh_key()
    # CUDA IPC handles cannot be opened by the process that made them: the
    # publisher is another process. It fills the ring, then waits (up to 20 s)
    # for this subscriber's release of frame 1.
    proc = subprocess.Popen(
        [cli, "publish", key, "--memory", "cuda", "--size", "%dx%d" % (WIDTH, HEIGHT), "--fps", "0",
         "--frames", "0", "--policy", "strict-wait", "--ack-timeout", "20s", "--wait-subscribers", "1",
         "--quiet"]
    )
    try:
        with cuframes.Subscriber(
            key, timeout=20, wait_publisher=20, cuda_device=0, name="py-cuda-lease", copy="never"
        ) as sub:
            frame = sub.next()
            assert frame.seq == 1
            side = torch.cuda.Stream()
            frame.wait(side)  # the side stream waits for the frame on the GPU
            with torch.cuda.stream(side):
                t = torch.from_dlpack(frame.planes[0])  # DLPack gets the side stream too
                total = t.to(torch.int64).sum()
            assert t.data_ptr() == frame.planes[0].ptr
            frame.close()
            time.sleep(0.2)
            assert last_seen(cli, key, "py-cuda-lease") == 0, "released while a tensor views the slot"
            side.synchronize()
            (y,) = pattern.planes("nv12", WIDTH, HEIGHT, 0)[:1]
            assert int(total) == int(y.astype(np.int64).sum())
            del t
            gc.collect()
            assert last_seen(cli, key, "py-cuda-lease") == 1
            assert _dlpack.live_exports() == 0
            with sub.next() as frame2:  # the publisher goes on
                assert frame2.seq == 2
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                stop(proc)


# --- publishing from tensors ------------------------------------------------


def test_torch_publisher_verified_by_cli():
    torch = need_torch()
    cli = need_cli()
    key = fresh_key()
    frames = 30
    with cuframes.Publisher(key, "nv12", WIDTH, HEIGHT, memory="cuda", policy="strict_wait", ack_timeout=10.0) as pub:
        assert pub.info.memory == "cuda"
        proc = cli_subscriber(cli, key, frames)
        try:
            pub.wait_subscribers(1, timeout=20)
            for i in range(frames):
                y, uv = (torch.from_numpy(a).cuda() for a in pattern.planes("nv12", WIDTH, HEIGHT, i))
                kind = i % 3
                if kind == 0:  # plane tensors, (h, w) and (h/2, w/2, 2)
                    seq = pub.publish([y, uv])
                elif kind == 1:  # one (h * 3 / 2, w) tensor, through DLPack only
                    whole = torch.cat([y, uv.reshape(HEIGHT // 2, WIDTH)])
                    seq = pub.publish(_DLPackOnly(whole))
                else:  # written in place into the CUDA slot by torch
                    with pub.slot() as slot:
                        torch.from_dlpack(slot.planes[0]).copy_(y)
                        torch.from_dlpack(slot.planes[1]).copy_(uv)
                        assert slot.planes[0].memory == "cuda"
                    seq = slot.seq
                assert seq == i + 1
            pub.flush(timeout=20)
            report = finish(proc)
        finally:
            stop(proc)
    assert report["verified"] == frames and report["mismatched"] == 0, report
    assert report["memory"] == "cuda", report


class _DLPackOnly:
    """A CUDA producer known only through DLPack (no __cuda_array_interface__)."""

    def __init__(self, tensor):
        self._t = tensor

    def __dlpack__(self, **kw):
        return self._t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_cupy_publisher_verified_by_cli():
    cupy = need_cupy()
    cli = need_cli()
    key = fresh_key()
    frames = 10
    with cuframes.Publisher(key, "bgra", 640, 360, memory="cuda", policy="strict_wait", ack_timeout=10.0) as pub:
        proc = cli_subscriber(cli, key, frames)
        try:
            pub.wait_subscribers(1, timeout=20)
            for i in range(frames):
                (bgra,) = pattern.planes("bgra", 640, 360, i)
                pub.publish(cupy.asarray(bgra))
            pub.flush(timeout=20)
            report = finish(proc)
        finally:
            stop(proc)
    assert report["verified"] == frames and report["mismatched"] == 0, report


def test_cuda_shape_errors():
    torch = need_torch()
    key = fresh_key()
    with cuframes.Publisher(key, "nv12", 64, 48, memory="cuda") as pub:
        y = torch.zeros((48, 64), dtype=torch.uint8, device="cuda")
        uv = torch.zeros((24, 32, 2), dtype=torch.uint8, device="cuda")
        for frame, message in (
            ([y.to(torch.int16), uv], "expected uint8"),
            ([y[:, :32], uv], "plane 0"),
            ([y, uv.cpu()], "all be in host memory or all in CUDA memory"),
            ([y.t().contiguous().t(), uv], "contiguous"),
        ):
            try:
                pub.publish(frame)
            except cuframes.InvalidArgumentError as e:
                assert __import__("re").search(message, str(e)), str(e)
            else:
                raise AssertionError("no error for %s" % message)
        assert pub.publish([y, uv]) == 1


def main():
    tests = [(name, fn) for name, fn in sorted(globals().items()) if name.startswith("test_") and callable(fn)]
    passed = failed = skipped = 0
    for name, fn in tests:
        start = time.monotonic()
        try:
            fn()
        except Skipped as e:
            skipped += 1
            print("SKIP %s: %s" % (name, e))
            continue
        except BaseException as e:
            if pytest is not None and isinstance(e, pytest.skip.Exception):
                skipped += 1
                print("SKIP %s: %s" % (name, e))
                continue
            failed += 1
            print("FAIL %s" % name)
            traceback.print_exc()
            continue
        passed += 1
        print("ok   %s (%.1f s)" % (name, time.monotonic() - start))
    print("python-cuda: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
