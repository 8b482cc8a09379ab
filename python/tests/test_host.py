"""Host-memory tests of the Python bindings (run in CI, no GPU needed)."""

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import cuframes
from cuframes import _dlpack, pattern

FORMATS = ["nv12", "yuv420p", "p010", "bgra", "p016", "yuv444p", "yuv444p16", "rgba", "bgr0", "rgb0",
           "p012", "nv16", "p210", "p212", "p216", "yuv422p", "yuv420p10", "yuv422p10", "yuv444p10",
           "yuv444p10msb", "yuv444p12msb", "yuva420p"]


def inspect(cli, key):
    out = subprocess.run([cli, "inspect", key, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def last_seen(cli, key, name):
    """The last seq subscriber `name` ACKed, as the shared header says: the
    publisher copies it there from the subscriber's own ACK area every 250 ms
    (and at each publish), so wait a little longer than that first."""
    time.sleep(0.3)
    for sub in inspect(cli, key)["subscriber_slots"]:
        if sub["name"] == name:
            return sub["last_seen_seq"]
    raise AssertionError("subscriber %s not in the header" % name)


def host_publisher(key, fmt="nv12", width=64, height=48, **kw):
    kw.setdefault("memory", "host")
    return cuframes.Publisher(key, fmt, width, height, **kw)


# --- the CLI's pattern, read in Python ---------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_publisher_pattern_verified_in_python(cli, key, fmt):
    frames = 24
    proc = subprocess.Popen(
        [cli, "publish", key, "--memory", "host", "--format", fmt, "--size", "322x182", "--fps", "0",
         "--frames", str(frames), "--policy", "strict-wait", "--wait-subscribers", "1", "--quiet"]
    )
    try:
        seqs = []
        with cuframes.Subscriber(key, timeout=10, wait_publisher=10, name="py-verify") as sub:
            assert sub.info.format == fmt and (sub.info.width, sub.info.height) == (322, 182)
            assert sub.info.memory == "host" and sub.info.policy == "strict_wait"
            for frame in sub:  # ends at the publisher's clean shutdown
                assert frame.memory == "host" and frame.format == fmt
                assert pattern.check_frame(frame), "frame %d does not hold the pattern" % frame.seq
                for plane, geo in zip(frame.planes, cuframes._formats.geometry(
                        cuframes._formats.format_code(fmt), 322, 182)):
                    assert plane.shape == geo.shape
                    assert np.asarray(plane).shape == geo.shape
                seqs.append(frame.seq)
            assert sub.stats.publisher_shut_down
            assert sub.stats.received == frames and sub.stats.dropped == 0
        assert seqs == list(range(1, frames + 1))
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def kill_running(*procs):
    """Kills and reaps the processes (None: not started) a test left running."""
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()


def test_wait_publisher_does_not_count_the_cuda_warm_up(cli, key):
    """wait_publisher does not count the time this process spends making its
    CUDA context while no publisher is there (a crowded GPU, played by a
    warm-up stalled for 6 s; without a GPU it then finds no driver): a
    publisher that comes 2 s later, past the 1 s wait, is still found. The
    switch is read once per process, so the subscriber is a process of its own."""
    script = ("import sys, cuframes\n"
              "with cuframes.Subscriber(sys.argv[1], timeout=10, wait_publisher=1) as sub:\n"
              "    print(sub.info.width, sub.next().seq)\n")
    package = os.path.dirname(os.path.dirname(os.path.abspath(cuframes.__file__)))
    env = dict(os.environ, CUFRAMES_TEST_STALL_AT="cuda-warm-up:6000",
               PYTHONPATH=os.pathsep.join(filter(None, [package, os.environ.get("PYTHONPATH")])))
    sub = subprocess.Popen([sys.executable, "-c", script, key], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    proc = None
    try:
        time.sleep(2)
        assert sub.poll() is None, "gave up while making its context: %s" % (sub.communicate()[1],)
        proc = subprocess.Popen(
            [cli, "publish", key, "--memory", "host", "--size", "64x48", "--fps", "0", "--frames", "3",
             "--policy", "strict-wait", "--wait-subscribers", "1", "--quiet"])
        out, err = sub.communicate(timeout=20)
        assert sub.returncode == 0, err
        assert out.split() == ["64", "1"], out
        assert proc.wait(timeout=10) == 0
    finally:
        kill_running(sub, proc)


def test_first_frame_is_waited_for_as_long_as_the_publisher(cli, key):
    """A publisher that holds its first frame until its second subscriber
    joins, 1.5 s after the first: the first next() waits as long as
    wait_publisher (10 s), not timeout (0.3 s); an explicit timeout is kept."""
    proc = subprocess.Popen(
        [cli, "publish", key, "--memory", "host", "--size", "64x48", "--fps", "0", "--frames", "3",
         "--policy", "strict-wait", "--wait-subscribers", "2", "--quiet"])
    other = None
    try:
        with cuframes.Subscriber(key, timeout=0.3, wait_publisher=10) as sub:
            with pytest.raises(cuframes.TimeoutError_):
                sub.next(timeout=0.2)
            other = subprocess.Popen(
                ["sh", "-c", 'sleep 1.5; exec "$0" subscribe "$1" --frames 0 --wait-timeout 10s --json',
                 cli, key], stdout=subprocess.DEVNULL)
            started = time.monotonic()
            with sub.next() as frame:
                assert frame.seq == 1
            assert time.monotonic() - started >= 1.0
            assert [f.seq for f in sub] == [2, 3]
        assert proc.wait(timeout=10) == 0
        assert other.wait(timeout=10) == 0
    finally:
        kill_running(proc, other)


def test_pattern_check_catches_a_wrong_frame(cli, key):
    proc = subprocess.Popen(
        [cli, "publish", key, "--memory", "host", "--size", "64x48", "--fps", "0", "--frames", "2",
         "--policy", "strict-wait", "--wait-subscribers", "1", "--quiet"]
    )
    try:
        with cuframes.Subscriber(key, timeout=10, wait_publisher=10) as sub:
            with sub.next() as frame:
                assert pattern.check_frame(frame)
                assert not pattern.check_plane(frame.format, frame.seq, 0, frame.planes[0])  # other frame
                assert not pattern.check_plane(frame.format, frame.seq - 1, 1, frame.planes[0])  # other plane
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- Python publisher, verified by `cuframes subscribe --verify` -----------


def run_cli_subscriber(cli, key, frames):
    return subprocess.Popen(
        [cli, "subscribe", key, "--frames", str(frames), "--verify", "--json", "--timeout", "10s",
         "--name", "cli-verify"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish_cli_subscriber(proc):
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, "cuframes subscribe failed: %s %s" % (out, err)
    return json.loads(out.strip().splitlines()[-1])




@pytest.mark.parametrize("fmt", FORMATS)
def test_python_publisher_verified_by_cli(cli, key, fmt):
    frames = 20
    width, height = 322, 182
    with host_publisher(key, fmt, width, height, policy="strict_wait", ack_timeout=5.0, fps=30) as pub:
        assert pub.info.fps == 30
        proc = run_cli_subscriber(cli, key, frames)
        pub.wait_subscribers(1, timeout=10)
        for i in range(frames):
            assert pub.publish(pattern.planes(fmt, width, height, i), pts_ns=i) == i + 1
        pub.flush(timeout=10)
        report = finish_cli_subscriber(proc)
    assert report["verified"] == frames and report["mismatched"] == 0, report
    assert report["format"] == fmt and report["memory"] == "host"


def test_python_publisher_other_inputs_verified_by_cli(cli, key):
    """A single contiguous NV12 array, strided planes, the zero-copy slot path
    and plain bytes all publish the same pattern."""
    width, height = 64, 48
    frames = 8
    with host_publisher(key, "nv12", width, height, policy="strict_wait", ack_timeout=5.0) as pub:
        proc = run_cli_subscriber(cli, key, frames)
        pub.wait_subscribers(1, timeout=10)
        for i in range(frames):
            y, uv = pattern.planes("nv12", width, height, i)
            kind = i % 4
            if kind == 0:  # one (h * 3 / 2, w) array
                pub.publish(np.concatenate([y, uv.reshape(height // 2, width)]))
            elif kind == 1:  # planes inside wider buffers: a row stride of 100
                by = np.zeros((height, 100), np.uint8)
                buv = np.zeros((height // 2, 100), np.uint8)
                by[:, :width] = y
                buv[:, :width] = uv.reshape(height // 2, width)
                pub.publish([by[:, :width], buv[:, :width]])
            elif kind == 2:  # written in place into the slot
                with pub.slot() as slot:
                    assert slot.planes[0].memory == "host"
                    np.asarray(slot.planes[0])[...] = y
                    np.asarray(slot.planes[1])[...] = uv
                assert slot.seq == i + 1
            else:  # bytes, as a reader of raw video would have them
                pub.publish(np.concatenate([y.ravel(), uv.ravel()]).tobytes())
        pub.flush(timeout=10)
        report = finish_cli_subscriber(proc)
    assert report["verified"] == frames and report["mismatched"] == 0, report


# --- lease release -----------------------------------------------------------


def strict_pair(key, ring=2):
    pub = host_publisher(key, policy="strict_wait", ring=ring, ack_timeout=5.0)
    sub = cuframes.Subscriber(key, timeout=5, name="py-lease")
    return pub, sub


def publish_one(pub, i):
    return pub.publish(pattern.planes("nv12", 64, 48, i))


def test_close_releases_the_lease(cli, key):
    pub, sub = strict_pair(key)
    with pub, sub:
        publish_one(pub, 0)
        frame = sub.next()
        assert last_seen(cli, key, "py-lease") == 0
        frame.close()
        assert last_seen(cli, key, "py-lease") == 1
        frame.close()  # idempotent
        publish_one(pub, 1)
        with sub.next() as frame2:
            assert frame2.seq == 2
        assert last_seen(cli, key, "py-lease") == 2


def test_gc_releases_the_lease(cli, key):
    pub, sub = strict_pair(key)
    with pub, sub:
        publish_one(pub, 0)
        frame = sub.next()
        planes = frame.planes  # planes not exported do not hold the lease
        assert last_seen(cli, key, "py-lease") == 0
        del frame, planes
        gc.collect()
        assert last_seen(cli, key, "py-lease") == 1


def test_strict_wait_does_not_stall_after_close(key):
    # ring of 1: the next publish must wait for our ACK of the only slot.
    pub, sub = strict_pair(key, ring=1)
    with pub, sub:
        publish_one(pub, 0)
        sub.next().close()
        start = time.monotonic()
        publish_one(pub, 1)
        assert time.monotonic() - start < 2.0, "publish waited for a released frame"
        assert pub.subscriber_count == 1
        with sub.next() as frame:
            assert frame.seq == 2 and pattern.check_frame(frame)


def test_exports_keep_the_lease(cli, key):
    pub, sub = strict_pair(key)
    with pub, sub:
        publish_one(pub, 0)
        frame = sub.next()
        y = np.from_dlpack(frame.planes[0])  # DLPack
        uv = np.asarray(frame.planes[1])  # __array_interface__
        mv = frame.planes[0].memoryview()  # buffer
        expected_y = np.array(y)
        frame.close()
        assert last_seen(cli, key, "py-lease") == 0, "released while arrays still view the slot"
        del y
        gc.collect()
        assert last_seen(cli, key, "py-lease") == 0
        del uv
        gc.collect()
        assert last_seen(cli, key, "py-lease") == 0
        assert bytes(mv[:64]) == expected_y[0].tobytes()
        del mv
        gc.collect()
        assert last_seen(cli, key, "py-lease") == 1
        assert _dlpack.live_exports() == 0


def test_iteration_closes_the_previous_frame(cli, key):
    pub, sub = strict_pair(key, ring=4)
    with pub, sub:
        for i in range(3):
            publish_one(pub, i)
        it = iter(sub)
        first = next(it)
        assert last_seen(cli, key, "py-lease") == 0
        second = next(it)
        assert first.closed and not second.closed
        assert last_seen(cli, key, "py-lease") == 1


def test_unconsumed_capsule_releases(cli, key):
    pub, sub = strict_pair(key)
    with pub, sub:
        publish_one(pub, 0)
        frame = sub.next()
        capsule = frame.planes[0].__dlpack__()  # legacy "dltensor", never consumed
        frame.close()
        assert last_seen(cli, key, "py-lease") == 0
        del capsule
        gc.collect()
        assert last_seen(cli, key, "py-lease") == 1
        assert _dlpack.live_exports() == 0


# --- DLPack and the array interfaces ---------------------------------------


def test_numpy_from_dlpack_shares_memory(key):
    pub = host_publisher(key, "p010", 80, 40)
    # The slots themselves (the default, copy="auto", copies under drop_oldest).
    sub = cuframes.Subscriber(key, timeout=5, copy="never", read_ahead=0)
    with pub, sub:
        pub.publish(pattern.planes("p010", 80, 40, 0))
        with sub.next() as frame:
            assert frame.planes[0].__dlpack_device__() == (1, 0)
            for plane in frame.planes:
                arr = np.from_dlpack(plane)
                assert arr.ctypes.data == plane.ptr  # the slot itself, no copy
                assert arr.dtype == np.uint16 and arr.shape == plane.shape
                assert arr.strides == plane.strides
                assert not arr.flags.writeable  # subscribers map slots read-only
                view = np.asarray(plane)
                assert view.ctypes.data == plane.ptr and not view.flags.writeable
                assert np.array_equal(arr, view)
            assert pattern.check_frame(frame)
            y = np.from_dlpack(frame.planes[0])
            # Sample 3 of row 2 of frame 0, plane 0: ((3 + 6) % 1024) << 6.
            assert int(y[2, 3]) == 9 << 6


def test_legacy_and_versioned_capsules(key):
    pub = host_publisher(key)
    sub = cuframes.Subscriber(key, timeout=5)
    with pub, sub:
        publish_one(pub, 0)
        with sub.next() as frame:
            legacy = frame.planes[0].__dlpack__()
            versioned = frame.planes[0].__dlpack__(max_version=(1, 0))
            assert "dltensor" in repr(legacy) and "dltensor_versioned" not in repr(legacy)
            assert "dltensor_versioned" in repr(versioned)
            with pytest.raises(BufferError):
                frame.planes[0].__dlpack__(copy=True)
            with pytest.raises(BufferError):
                frame.planes[0].__dlpack__(dl_device=(2, 0))
            del legacy, versioned
            # A consumer of the legacy capsule (NumPy takes it when the
            # producer ignores max_version).
            plane = frame.planes[0]

            class LegacyOnly:
                def __dlpack__(self, stream=None, **kw):
                    return plane.__dlpack__(stream=stream)

                def __dlpack_device__(self):
                    return plane.__dlpack_device__()

            arr = np.from_dlpack(LegacyOnly())
            assert arr.ctypes.data == plane.ptr and np.array_equal(arr, np.asarray(plane))
            del arr
        gc.collect()
        assert _dlpack.live_exports() == 0


def test_cuda_interfaces_absent_on_host_planes(key):
    pub = host_publisher(key)
    sub = cuframes.Subscriber(key, timeout=5)
    with pub, sub:
        publish_one(pub, 0)
        with sub.next() as frame:
            assert not hasattr(frame.planes[0], "__cuda_array_interface__")
            assert hasattr(frame.planes[0], "__array_interface__")
            frame.wait()  # nothing to wait for in host memory


# --- errors -----------------------------------------------------------------


def test_no_publisher():
    start = time.monotonic()
    with pytest.raises(cuframes.NotFoundError) as info:
        cuframes.Subscriber("py-nobody-here", wait_publisher=0)
    assert time.monotonic() - start < 3, "looked once"
    err = info.value
    assert err.status == -2 and err.status_name == "CUFRAMES_ERR_NOT_FOUND"
    assert "py-nobody-here" in err.message
    assert isinstance(err, cuframes.CuframesError) and isinstance(err, LookupError)


@pytest.mark.parametrize("bad", ["", "has space", "slash/key", "x" * 64, "ünï"])
def test_bad_key(bad):
    assert not cuframes.validate_key(bad)
    with pytest.raises(cuframes.InvalidArgumentError) as info:
        cuframes.Subscriber(bad)
    assert info.value.status == -1 and isinstance(info.value, ValueError)
    with pytest.raises(cuframes.InvalidArgumentError):
        cuframes.Publisher(bad, "nv12", 64, 48, memory="host")


def test_bad_arguments(key):
    with pytest.raises(cuframes.InvalidArgumentError, match="pixel format"):
        cuframes.Publisher(key, "rgb24", 64, 48, memory="host")
    with pytest.raises(cuframes.InvalidArgumentError, match="policy"):
        cuframes.Publisher(key, "nv12", 64, 48, memory="host", policy="maybe")
    with pytest.raises(cuframes.InvalidArgumentError, match="width"):
        cuframes.Publisher(key, "nv12", 0, 48, memory="host")
    with pytest.raises(cuframes.InvalidArgumentError):
        cuframes.Publisher(key, "nv12", 64, 48, memory="host", ring=17)  # checked by the library
    with pytest.raises(cuframes.InvalidArgumentError, match="mode"):
        cuframes.Subscriber(key, mode="newest")
    with pytest.raises(cuframes.InvalidArgumentError, match="NUL"):
        cuframes.Subscriber("a\0b")


def test_running_out_of_descriptors_is_an_exhausted_error(key):
    # In a child: its descriptors are all taken but a few, then a publisher
    # is made, which needs more.
    script = """
import os, resource, sys, cuframes
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
taken = []
try:
    while True:
        taken.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
os.close(taken.pop())
try:
    cuframes.Publisher(sys.argv[1], "nv12", 64, 48, memory="host")
except cuframes.ExhaustedError as e:
    print(e.status, e.status_name, e.message)
"""
    out = subprocess.run([sys.executable, "-c", script, key], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("-16 CUFRAMES_ERR_EXHAUSTED "), out.stdout + out.stderr
    assert "this process has no descriptor left (limit 64)" in out.stdout, out.stdout


def test_defaults_are_the_librarys():
    # Python spells its defaults in its signature; they must be the C API's
    # (which are the library's: a compile-time check there).
    import ctypes
    import inspect as pyinspect

    from cuframes import _lib

    config = _lib.PublisherConfig()
    _lib.check(_lib.lib.cuframes_publisher_config_init_sized(ctypes.byref(config), ctypes.sizeof(config)))
    params = pyinspect.signature(cuframes.Publisher.__init__).parameters
    assert params["ring"].default == config.ring_size == 16
    assert round(params["ack_timeout"].default * 1000) == config.ack_timeout_ms
    assert round(params["startup_timeout"].default * 1000) == config.startup_timeout_ms
    assert params["policy"].default == "drop_oldest" and config.policy == 0
    assert params["memory"].default == "auto" and config.memory == 0


def _header_defines():
    # The CUFRAMES_DEFAULT_* numbers of the repository's cuframes.h (the
    # waits the C API leaves to its callers have no value at run time).
    import re

    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "cuframes.h")
    with open(header) as f:
        text = f.read()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^#define (CUFRAMES_DEFAULT_\w+) (\d+)$", text, re.M)}


def test_subscriber_defaults_are_the_librarys():
    # The subscriber's, likewise (D39): copy auto, read-ahead 32, connect 30 s,
    # and the waits the C API leaves to its callers: a publisher 30 s, a frame 5 s.
    import ctypes
    import inspect as pyinspect

    from cuframes import _lib
    from cuframes._subscriber import _COPY_MODES

    config = _lib.SubscriberConfig()
    _lib.check(_lib.lib.cuframes_subscriber_config_init_sized(ctypes.byref(config), ctypes.sizeof(config)))
    defines = _header_defines()
    params = pyinspect.signature(cuframes.Subscriber.__init__).parameters
    assert params["copy"].default == "auto" and _COPY_MODES["auto"] == config.copy
    assert params["read_ahead"].default == config.read_ahead == defines["CUFRAMES_DEFAULT_READ_AHEAD"] == 32
    assert round(params["connect_timeout"].default * 1000) == config.connect_timeout_ms
    assert config.connect_timeout_ms == defines["CUFRAMES_DEFAULT_CONNECT_TIMEOUT_MS"] == 30000
    assert round(params["wait_publisher"].default * 1000) == defines["CUFRAMES_DEFAULT_WAIT_TIMEOUT_MS"] == 30000
    assert round(params["timeout"].default * 1000) == defines["CUFRAMES_DEFAULT_FRAME_TIMEOUT_MS"] == 5000
    assert params["mode"].default == "sequential" and config.mode == 0


def test_subscriber_waits_for_a_publisher_by_default(key):
    # Services started together come up in any order: a subscriber made
    # before its publisher connects once the publisher is there.
    def publish_later():
        time.sleep(1.5)
        with host_publisher(key) as pub:
            pub.wait_subscribers(1, timeout=20)
            publish_one(pub, 0)
            time.sleep(1)

    late = threading.Thread(target=publish_later)
    late.start()
    try:
        start = time.monotonic()
        with cuframes.Subscriber(key) as sub:
            assert time.monotonic() - start >= 1.0, "it waited"
            with sub.next() as frame:
                assert frame.seq == 1
    finally:
        late.join()


def test_key_already_published(key):
    with host_publisher(key):
        with pytest.raises(cuframes.AlreadyExistsError) as info:
            host_publisher(key)
        assert info.value.status == -3


def test_wrong_shapes_and_dtypes(key):
    with host_publisher(key, "nv12", 64, 48) as pub:
        y, uv = pattern.planes("nv12", 64, 48, 0)
        cases = [
            ([y], "2 planes"),
            ([y, uv, uv], "2 planes"),
            ([y.astype(np.uint16), uv], "expected uint8"),
            ([y.astype(np.float32), uv], "expected uint8"),
            ([y[:-1], uv], "plane 0 .Y."),
            ([y, uv[:, :-1]], "plane 1 .UV."),
            ([y[:, ::2].repeat(2, axis=1)[:, ::1][:, :32], uv], "plane 0"),
            ([np.asfortranarray(y), uv], "contiguous"),
            ([y[::-1], uv], "row stride"),
            (y, "back to back"),
            ([["not", "numbers"], uv], "cannot publish|not an array|plane 0"),
        ]
        for frame, message in cases:
            with pytest.raises(cuframes.InvalidArgumentError, match=message):
                pub.publish(frame)
        assert pub.publish([y, uv]) == 1  # nothing above was published


def test_closed_frame_access(key):
    pub = host_publisher(key)
    sub = cuframes.Subscriber(key, timeout=5)
    with pub, sub:
        publish_one(pub, 0)
        frame = sub.next()
        plane = frame.planes[0]
        frame.close()
        assert frame.closed
        for action in (
            lambda: frame.planes,
            lambda: frame[0],
            lambda: frame.is_intact(),
            lambda: frame.wait(),
            lambda: plane.__dlpack__(),
            lambda: plane.__array_interface__,
            lambda: plane.memoryview(),
            lambda: np.from_dlpack(plane),
        ):
            with pytest.raises(cuframes.ClosedError) as info:
                action()
            assert info.value.status == -1 and isinstance(info.value, ValueError)
        with pytest.raises(cuframes.ClosedError):
            with frame:
                pass


def test_closed_subscriber_and_publisher(key):
    pub = host_publisher(key)
    sub = cuframes.Subscriber(key, timeout=5)
    sub.close()
    sub.close()
    with pytest.raises(cuframes.ClosedError):
        sub.next()
    with pytest.raises(cuframes.ClosedError):
        sub.stats
    pub.close()
    with pytest.raises(cuframes.ClosedError):
        publish_one(pub, 0)
    assert pub.closed and sub.closed


def test_timeout(key):
    # wait_publisher=0: the first frame is waited for as long as the publisher.
    with host_publisher(key), cuframes.Subscriber(key, timeout=0.2, wait_publisher=0) as sub:
        start = time.monotonic()
        with pytest.raises(cuframes.TimeoutError_) as info:
            sub.next()
        assert 0.15 < time.monotonic() - start < 3
        assert info.value.status == -7 and isinstance(info.value, TimeoutError)
        with pytest.raises(TimeoutError):
            sub.next(timeout=0)


def test_clean_shutdown_ends_iteration(key):
    pub = host_publisher(key)
    sub = cuframes.Subscriber(key, timeout=5)
    for i in range(3):
        publish_one(pub, i)
    got = []
    for frame in sub:
        got.append(frame.seq)
        if frame.seq == 3:
            pub.close()
    assert got == [1, 2, 3] and sub.stats.publisher_shut_down
    with pytest.raises(cuframes.DisconnectedError):
        sub.next()
    sub.close()


def test_killed_publisher_is_an_error(cli, key):
    proc = subprocess.Popen([cli, "publish", key, "--memory", "host", "--size", "64x48", "--fps", "50", "--quiet"])
    try:
        with cuframes.Subscriber(key, timeout=5, wait_publisher=10) as sub:
            with sub.next() as frame:
                assert pattern.check_frame(frame)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            with pytest.raises(cuframes.DisconnectedError) as info:
                for frame in sub:
                    pass
            assert info.value.status == -8 and not sub.stats.publisher_shut_down
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run([cli, "cleanup", key], capture_output=True)


def test_library_not_found_message(tmp_path):
    env = dict(os.environ, CUFRAMES_LIBRARY=str(tmp_path / "nope.so"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run([sys.executable, "-c", "import cuframes"], env=env, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "LibraryNotFoundError" in proc.stderr and "CUFRAMES_LIBRARY" in proc.stderr
    assert issubclass(cuframes.LibraryNotFoundError, ImportError)


def test_error_pickles():
    import pickle

    err = cuframes.NotFoundError(-2, "no publisher for key 'x'")
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is cuframes.NotFoundError and again.status == -2 and again.message == err.message


def test_latest_mode_and_stats(key):
    pub = host_publisher(key, ring=4)
    sub = cuframes.Subscriber(key, timeout=5, mode="latest")
    with pub, sub:
        for i in range(3):
            publish_one(pub, i)
        with sub.next() as frame:
            assert frame.seq == 3 and pattern.check_frame(frame)
        stats = sub.stats
        assert stats.received == 1 and stats.dropped == 2


def test_reading_foreign_capsules():
    """The parser publish() uses for CUDA DLPack producers, on host capsules."""
    a = np.arange(48 * 64, dtype=np.uint16).reshape(48, 64)[:, :40]
    for capsule in (a.__dlpack__(), a.__dlpack__(max_version=(1, 0))):
        imported = _dlpack.Imported(capsule)
        assert imported.data == a.ctypes.data
        assert imported.shape == (48, 40) and imported.strides_bytes == a.strides
        assert (imported.code, imported.bits, imported.itemsize) == (_dlpack.KDL_UINT, 16, 2)
        assert imported.device_type == _dlpack.KDL_CPU
        imported.close()
        imported.close()  # the deleter runs once
        assert "used_dltensor" in repr(capsule)


# --- holding frames: copies and read-ahead -----------------------------------


def test_auto_copy_lets_python_hold_more_frames_than_the_ring(key):
    pub = host_publisher(key, ring=3, policy="strict_wait", ack_timeout=0.2, startup_timeout=0.2)
    sub = cuframes.Subscriber(key, timeout=5, copy="auto")
    with pub, sub:
        held = []
        for i in range(10):
            publish_one(pub, i)  # would wait out the ACK timeout if the ring were held
            held.append(sub.next())
        assert [f.seq for f in held] == list(range(1, 11))
        assert sum(not f.is_copy for f in held) == 2, "ring - ring // 2 slots held (one stays free), the rest copies"
        assert all(pattern.check_frame(f) for f in held)
        assert pub.subscriber_count == 1, "never dropped"
        for f in held:
            f.close()
        stats = sub.stats
        assert (stats.received, stats.copied, stats.dropped) == (10, 8, 0)


def test_copy_always_and_never(key):
    pub = host_publisher(key, ring=2)
    with pub, cuframes.Subscriber(key, timeout=5, copy="always") as copies, cuframes.Subscriber(
        key, timeout=5, copy="never"
    ) as slots:
        publish_one(pub, 0)
        with copies.next() as a, slots.next() as b:
            assert a.is_copy and not b.is_copy
            assert a.planes[0].ptr != b.planes[0].ptr
            assert pattern.check_frame(a) and pattern.check_frame(b)


def test_read_ahead_keeps_a_late_reader_from_losing_frames(key):
    pub = host_publisher(key, ring=2)
    with pub, cuframes.Subscriber(key, timeout=5, copy="auto", read_ahead=16) as sub:
        for i in range(8):
            publish_one(pub, i)  # four times the ring before anyone reads
            time.sleep(0.02)
        seqs = []
        for _ in range(8):
            with sub.next() as frame:
                assert pattern.check_frame(frame)
                seqs.append(frame.seq)
        assert seqs == list(range(1, 9))
        assert sub.stats.dropped == 0 and sub.stats.queued == 0


def test_copy_and_read_ahead_arguments(key):
    with pytest.raises(cuframes.InvalidArgumentError, match="copy"):
        cuframes.Subscriber(key, copy="sometimes")
    with pytest.raises(cuframes.InvalidArgumentError, match="read_ahead"):
        cuframes.Subscriber(key, read_ahead=-1)


# --- frame properties ----------------------------------------------------------


def test_side_data_crosses_with_its_frame(key):
    cll = cuframes.SideData(cuframes.SideDataKind.CONTENT_LIGHT_LEVEL, (1000).to_bytes(4, "little") + (400).to_bytes(4, "little"))
    cc = cuframes.SideData(cuframes.SideDataKind.A53_CC, bytes([0xFC, 0x94, 0x2C]))
    other = cuframes.SideData(4242, b"")
    with host_publisher(key, ring=4) as pub, cuframes.Subscriber(key, timeout=5) as sub:
        for entry in (cll, cc, other):
            pub.add_side_data(entry.kind, entry.data)
        publish_one(pub, 0)
        publish_one(pub, 1)
        with sub.next() as f:
            assert f.side_data == (cll, cc, other)
            assert isinstance(f.side_data[0].kind, cuframes.SideDataKind)
        with sub.next() as f:
            assert f.side_data == ()
        with pytest.raises(cuframes.InvalidArgumentError, match="does not fit"):
            pub.add_side_data(cuframes.SideDataKind.SEI_UNREGISTERED, bytes(cuframes.SIDE_DATA_CAPACITY))
        for bad in (0, 65536, "3"):
            with pytest.raises(cuframes.InvalidArgumentError):
                pub.add_side_data(bad, b"x")


def test_frame_props_cross_with_each_frame(key):
    hdr10 = cuframes.FrameProps(color_range=1, color_primaries=9, color_trc=16, colorspace=9, chroma_location=3,
                                key_frame=True, sample_aspect_ratio=(1, 1), duration_ns=40_000_000)
    with host_publisher(key, ring=4) as pub, cuframes.Subscriber(key, timeout=5) as sub:
        publish_one(pub, 0)
        pub.set_frame_props(hdr10)
        publish_one(pub, 1)
        pub.set_frame_props(None)
        publish_one(pub, 2)
        got = []
        for _ in range(3):
            with sub.next() as f:
                got.append(f.props)
        assert got == [None, hdr10, None]
        with pytest.raises(cuframes.InvalidArgumentError):
            pub.set_frame_props(hdr10._replace(color_trc=300))
        with pytest.raises(cuframes.InvalidArgumentError):
            pub.set_frame_props({"color_trc": 16})


# --- struct_size (docs/c-api.md, "ABI policy") -----------------------------------


def test_ctypes_structs_carry_their_size(key):
    import ctypes

    from cuframes import _lib

    for struct in (_lib.PublisherConfig, _lib.SubscriberConfig, _lib.StreamInfo, _lib.Slot, _lib.SubscriberStats,
                   _lib.FrameInfo, _lib.FrameProps):
        assert struct().struct_size == ctypes.sizeof(struct), struct.__name__
    config = _lib.PublisherConfig()
    _lib.check(_lib.lib.cuframes_publisher_config_init_sized(ctypes.byref(config), ctypes.sizeof(config)))
    assert config.struct_size == ctypes.sizeof(config) and config.ring_size == 16
    with host_publisher(key) as pub:
        # The library writes struct_size back: the bytes it filled.
        raw = _lib.StreamInfo()
        _lib.check(_lib.lib.cuframes_publisher_get_info(pub._live(), ctypes.byref(raw)))
        assert raw.struct_size == ctypes.sizeof(raw) and raw.width == 64
        raw.struct_size = 0  # not set: refused, with the fix in the message
        status = _lib.lib.cuframes_publisher_get_info(pub._live(), ctypes.byref(raw))
        with pytest.raises(cuframes.InvalidArgumentError, match="struct_size is 0"):
            _lib.check(status)


# --- the format table ------------------------------------------------------------


def test_format_table_is_the_library_s():
    """Every wire number 1..22 under its name, FFmpeg's spelling accepted, and
    each plane's geometry (at an odd size) what libcuframes lays out."""
    import ctypes

    from cuframes import _formats, _lib

    assert [cuframes.FORMATS[name] for name in FORMATS] == list(range(1, 23))

    class Layout(ctypes.Structure):  # cuframes_frame_layout
        _fields_ = [("struct_size", ctypes.c_uint32), ("plane_count", ctypes.c_uint32),
                    ("offsets", ctypes.c_size_t * 4), ("pitches", ctypes.c_size_t * 4),
                    ("row_bytes", ctypes.c_size_t * 4), ("rows", ctypes.c_uint32 * 4),
                    ("frame_size", ctypes.c_size_t)]

    get = _lib.lib.cuframes_frame_layout_get
    get.argtypes = [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(Layout)]
    get.restype = ctypes.c_int32
    for name, code in cuframes.FORMATS.items():
        layout = Layout(struct_size=ctypes.sizeof(Layout))
        _lib.check(get(code, 33, 17, ctypes.byref(layout)))
        planes = _formats.geometry(code, 33, 17)
        assert layout.plane_count == len(planes), name
        for p, geo in enumerate(planes):
            assert (layout.row_bytes[p], layout.rows[p]) == (geo.row_bytes, geo.rows), (name, p)
    for ffmpeg, ours in [("p010le", "p010"), ("P012LE", "p012"), ("yuv420p10le", "yuv420p10"),
                         ("yuv444p10msble", "yuv444p10msb"), ("nv16", "nv16")]:
        assert _formats.format_code(ffmpeg) == cuframes.FORMATS[ours]
    with pytest.raises(cuframes.InvalidArgumentError):
        _formats.format_code("yuva420ple")


@pytest.mark.parametrize("fmt, dtype, bits, shift", [
    ("p012", "uint16", 12, 4), ("yuv444p10msb", "uint16", 10, 6), ("yuv444p12msb", "uint16", 12, 4),
    ("yuv420p10", "uint16", 10, 0), ("yuv422p10", "uint16", 10, 0), ("yuv444p10", "uint16", 10, 0),
    ("p210", "uint16", 10, 6), ("p216", "uint16", 16, 0), ("nv16", "uint8", 8, 0),
])
def test_pattern_samples_keep_to_the_format_s_bits(fmt, dtype, bits, shift):
    significant = ((1 << bits) - 1) << shift
    unused = (0xFFFF if dtype == "uint16" else 0xFF) & ~significant
    seen = 0
    for plane in pattern.planes(fmt, 4096, 8, 5):  # rows of 2048 samples or more: every 8-12 bit value
        assert plane.dtype == np.dtype(dtype), fmt
        values = plane.astype(np.uint32)
        assert not np.any(values & unused), "%s sets bits outside its %d << %d" % (fmt, bits, shift)
        seen |= int(np.bitwise_or.reduce(values, axis=None))
    if bits <= 12:
        assert seen == significant, fmt


def test_yuva420p_planes(key):
    with host_publisher(key, "yuva420p", 33, 17) as pub:
        with cuframes.Subscriber(key, timeout=10) as sub:
            pub.publish(pattern.planes("yuva420p", 33, 17, 0))
            with sub.next() as frame:
                assert [p.shape for p in frame.planes] == [(17, 33), (9, 17), (9, 17), (17, 33)]
                assert frame.planes[3].pitch == frame.planes[0].pitch  # the alpha plane takes pitch_y
                assert pattern.check_frame(frame)


# --- the library's messages in logging --------------------------------------------


def plant_stale_socket(runtime_dir, key):
    """What a crashed publisher of ``key`` leaves: a socket nobody listens on.
    The next publisher removes it, with a warning."""
    import socket

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.path.join(runtime_dir, key + ".sock"))
    s.close()


def test_library_warnings_reach_logging(caplog, runtime_dir, key):
    import logging

    plant_stale_socket(runtime_dir, key)
    with caplog.at_level(logging.INFO, logger="cuframes"):
        with host_publisher(key):
            pass
    said = [r for r in caplog.records if r.name == "cuframes"]
    assert len(said) == 1, said
    assert said[0].levelno == logging.WARNING
    assert said[0].getMessage().startswith("key '%s': removed what a publisher that is gone left behind: " % key)
    assert os.path.join(runtime_dir, key + ".sock") in said[0].getMessage()


def test_library_log_level_and_stderr(caplog, capfd, runtime_dir, key):
    import logging

    try:
        cuframes.set_log_level("error")
        plant_stale_socket(runtime_dir, key)
        with caplog.at_level(logging.DEBUG, logger="cuframes"):
            host_publisher(key).close()
        assert not [r for r in caplog.records if r.name == "cuframes"]
    finally:
        cuframes.set_log_level(logging.INFO)
    with pytest.raises(cuframes.InvalidArgumentError):
        cuframes.set_log_level("loud")

    capfd.readouterr()
    cuframes.log_to_python(False)
    try:
        plant_stale_socket(runtime_dir, key)
        host_publisher(key).close()
        err = capfd.readouterr().err
    finally:
        cuframes.log_to_python()
    assert "cuframes: key '%s': removed what a publisher that is gone left behind" % key in err
    plant_stale_socket(runtime_dir, key)
    with caplog.at_level(logging.WARNING, logger="cuframes"):
        host_publisher(key).close()
    assert [r for r in caplog.records if r.name == "cuframes"], "back in logging"
