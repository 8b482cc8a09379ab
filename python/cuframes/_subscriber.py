"""Subscriber: connect to a key, receive leased frames."""

from __future__ import annotations

import ctypes
import threading
import time
from fractions import Fraction
from typing import Any, Iterator, NamedTuple, Optional, Tuple, Union

from . import _cuda, _lib
from ._errors import (
    ERR_DISCONNECTED,
    ERR_NOT_FOUND,
    ERR_TIMEOUT,
    ClosedError,
    CuframesError,
    invalid,
)
from ._formats import FORMAT_NAMES, MEMORY_NAMES, POLICY_NAMES, geometry, mode_code
from ._frame import MEMORY_CUDA, CudaBinding, Frame, Lease

_DEFAULT: Any = object()
# Longest single wait in C: Ctrl-C (KeyboardInterrupt) is seen between waits.
_SLICE_MS = 250


class StreamInfo(NamedTuple):
    """A stream's geometry and settings."""

    format: str
    width: int
    height: int
    ring_size: int
    policy: str
    memory: str
    fps: Optional[Fraction]
    plane_count: int
    pitches: Tuple[int, ...]
    frame_size: int
    #: CUDA memory: how the slots are shared, ``"fd"`` or ``"ipc"``; None for host memory.
    cuda_share: Optional[str] = None


class SubscriberStats(NamedTuple):
    """A subscriber's counters: frames handed out (``received``, of which
    ``copied`` were private copies), frames published after joining that
    were never handed out (``dropped``, of which ``torn`` copies the
    publisher overwrote while they were made), frames overwritten while
    held (``overwritten``), frames read ahead and not handed out yet
    (``queued``)."""

    received: int
    dropped: int
    overwritten: int
    publisher_shut_down: bool
    copied: int = 0
    torn: int = 0
    queued: int = 0

_COPY_MODES = {"never": 0, "auto": 1, "always": 2}
_CUDA_SHARE_NAMES = {1: "fd", 2: "ipc"}


def stream_info(raw: _lib.StreamInfo) -> StreamInfo:
    fps = Fraction(raw.fps_num, raw.fps_den) if raw.fps_num and raw.fps_den else None
    return StreamInfo(
        FORMAT_NAMES.get(raw.format, str(raw.format)),
        raw.width,
        raw.height,
        raw.ring_size,
        POLICY_NAMES.get(raw.policy, str(raw.policy)),
        MEMORY_NAMES.get(raw.memory, str(raw.memory)),
        fps,
        raw.plane_count,
        tuple(raw.pitches[i] for i in range(raw.plane_count)),
        raw.frame_size,
        _CUDA_SHARE_NAMES.get(raw.cuda_share),
    )


def _ms(seconds: Optional[float], what: str, allow_none: bool) -> Optional[int]:
    if seconds is None:
        if allow_none:
            return None
        raise invalid("%s must be a number of seconds" % what)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise invalid("%s must be a number of seconds >= 0, not %r" % (what, seconds))
    return int(round(seconds * 1000))


class Subscriber:
    """A subscription to the frames published under ``key``.

    ``Subscriber("cam1")`` connects (handshake bounded by
    ``connect_timeout``, 30 s); while no publisher exists yet it retries for
    up to ``wait_publisher`` seconds (30 by default: services started
    together come up in any order; 0: look once), not counting the time this
    process spends making its CUDA context meanwhile. Then::

        with cuframes.Subscriber("cam1", timeout=2.0) as sub:
            for frame in sub:                 # ends on a clean publisher shutdown
                y = torch.from_dlpack(frame.planes[0])  # CUDA frames: no copy

    Iteration yields :class:`Frame` objects and closes the previous frame
    when the next one is requested (keep data by exporting or copying it).
    ``next()`` returns one frame the caller closes. ``timeout`` is how long
    to wait for each frame (seconds, 5 by default; None: forever), the first one as long as
    ``wait_publisher`` if that is longer (a publisher started together with
    its subscribers may hold its first frame until all of them joined); when
    it runs out,
    ``cuframes.TimeoutError_`` (a ``TimeoutError``) is raised. When the
    publisher dies or drops this subscriber, ``DisconnectedError``.

    Options: ``name`` (shown by ``cuframes inspect``, <= 31 bytes),
    ``mode`` (``"sequential"``: every frame; ``"latest"``: always the
    newest), ``cuda_device`` (ordinal whose primary context maps CUDA
    frames, the one PyTorch and CuPy use; default: the current context,
    else device 0), ``cuda_context`` (a CUcontext handle instead),
    ``cuda_stream`` (the stream frames are ordered on; default: the legacy
    default stream), ``sync_on_release`` (synchronise the streams a CUDA
    frame was used on before giving the slot back; default True),
    ``runtime_dir`` (where the key's socket is), ``copy`` (``"auto"``, the
    default: the slot while holding it leaves the publisher a free slot,
    else a private copy, and always a copy under ``drop_oldest``;
    ``"never"``: frames are the shared slots; ``"always"``: private copies;
    see ``python/README.md``, "Holding frames"), ``read_ahead`` (a library
    thread queues up to this many frames as they are published, so a
    consumer that is starting or briefly slow loses nothing under
    ``drop_oldest``; 32 by default; 0: off; none with ``mode="latest"``).

    The defaults are the C API's and every other surface's (protocol notes
    D39; a test compares them with ``cuframes_subscriber_config_init`` and
    ``CUFRAMES_DEFAULT_*`` in ``cuframes.h``).
    """

    def __init__(
        self,
        key: str,
        *,
        name: Optional[str] = None,
        timeout: Optional[float] = 5.0,
        mode: Union[str, int] = "sequential",
        cuda_device: Optional[int] = None,
        cuda_context: Any = None,
        cuda_stream: Any = None,
        connect_timeout: float = 30.0,
        wait_publisher: float = 30.0,
        sync_on_release: bool = True,
        runtime_dir: Optional[str] = None,
        copy: str = "auto",
        read_ahead: int = 32,
    ) -> None:
        self._handle: Optional[int] = None
        self._lock = threading.Lock()
        self._last: Optional[Frame] = None
        self.key = key
        self.timeout = timeout
        _ms(timeout, "timeout", True)
        self.sync_on_release = bool(sync_on_release)
        config = _lib.SubscriberConfig()
        _lib.check(_lib.lib.cuframes_subscriber_config_init_sized(ctypes.byref(config), ctypes.sizeof(config)))
        keep = [_lib.encode(key, "key"), _lib.encode(name, "name"), _lib.encode(runtime_dir, "runtime_dir")]
        config.key, config.name, config.runtime_dir = keep
        config.mode = mode_code(mode)
        if copy not in _COPY_MODES:
            raise invalid("copy must be 'never', 'auto' or 'always', not %r" % (copy,))
        config.copy = _COPY_MODES[copy]
        if isinstance(read_ahead, bool) or not isinstance(read_ahead, int) or not 0 <= read_ahead < 2**32:
            raise invalid("read_ahead must be a number of frames >= 0, not %r" % (read_ahead,))
        config.read_ahead = read_ahead
        config.connect_timeout_ms = max(1, _ms(connect_timeout, "connect_timeout", False) or 0)
        if cuda_device is not None:
            if isinstance(cuda_device, bool) or not isinstance(cuda_device, int) or cuda_device < 0:
                raise invalid("cuda_device must be a device ordinal >= 0")
            config.cuda_device = cuda_device
        context = _cuda.context_handle(cuda_context)
        stream = _cuda.stream_handle(cuda_stream)
        config.cuda_context = context or None
        config.cuda_stream = stream or None
        handle = _lib.handle()
        wait = max(0.0, float(wait_publisher))
        self._first_timeout = None if timeout is None else max(float(timeout), wait)
        self._got_frame = False
        deadline = time.monotonic() + wait
        while True:
            status = _lib.lib.cuframes_subscriber_create(ctypes.byref(config), ctypes.byref(handle))
            if wait and _lib.lib.cuframes_subscriber_warming_up():
                # Making this process's CUDA context: the publisher, making its
                # own in the same queue of the driver, cannot come sooner.
                deadline = time.monotonic() + wait
            if status != ERR_NOT_FOUND or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        _lib.check(status)
        self._handle = handle.value or 0
        raw = _lib.StreamInfo()
        _lib.check(_lib.lib.cuframes_subscriber_get_info(self._handle, ctypes.byref(raw)))
        self.info: StreamInfo = stream_info(raw)
        self._geometry = geometry(raw.format, raw.width, raw.height)
        self._cuda: Optional[CudaBinding] = None
        if raw.memory == MEMORY_CUDA:
            try:
                ctx = _cuda.Context.resolve(context, cuda_device if cuda_device is not None else -1)
            except BaseException:
                self.close()
                raise
            self._cuda = CudaBinding(ctx, stream)

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else "%s %dx%d %s" % (
            self.info.format,
            self.info.width,
            self.info.height,
            self.info.memory,
        )
        return "<cuframes.Subscriber %r %s>" % (self.key, state)

    @property
    def closed(self) -> bool:
        return self._handle is None

    def _live(self) -> int:
        if self._handle is None:
            raise ClosedError(-1, "subscriber of '%s' is closed" % self.key, "invalid argument")
        return self._handle

    @property
    def device(self) -> Optional[int]:
        """CUDA device ordinal frames are mapped on (None for host memory)."""
        return self._cuda.device if self._cuda is not None else None

    @property
    def stats(self) -> SubscriberStats:
        """Frames received, dropped, overwritten, copied, torn, queued; whether
        the publisher shut down cleanly."""
        with self._lock:
            raw = _lib.SubscriberStats()
            _lib.check(_lib.lib.cuframes_subscriber_get_stats(self._live(), ctypes.byref(raw)))
        return SubscriberStats(
            raw.received,
            raw.dropped,
            raw.overwritten,
            bool(raw.publisher_shut_down),
            raw.copied,
            raw.torn,
            raw.queued,
        )

    def next(self, timeout: Optional[float] = _DEFAULT) -> Frame:
        """The next frame (per ``mode``), waiting up to ``timeout`` seconds
        (default: the subscriber's ``timeout``, for the first frame at least
        ``wait_publisher``; None: forever; 0: only look). Raises ``TimeoutError_`` when none came and
        ``DisconnectedError`` when the publisher is gone (also after a clean
        shutdown; ``stats.publisher_shut_down`` tells which)."""
        if timeout is _DEFAULT:
            timeout = self.timeout if self._got_frame else self._first_timeout
        total = _ms(timeout, "timeout", True)
        deadline = None if total is None else time.monotonic() + total / 1000.0
        frame_handle = _lib.handle()
        with self._lock:
            handle = self._live()
            while True:
                if deadline is None:
                    slice_ms = _SLICE_MS
                else:
                    left = int(max(0.0, deadline - time.monotonic()) * 1000)
                    slice_ms = min(_SLICE_MS, left)
                status = _lib.lib.cuframes_subscriber_next(handle, slice_ms, ctypes.byref(frame_handle))
                if status != ERR_TIMEOUT:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    break
            _lib.check(status)
            info = _lib.FrameInfo()
            status = _lib.lib.cuframes_frame_get_info(frame_handle.value, ctypes.byref(info))
            lease = Lease(_lib.lib, frame_handle.value or 0, info.seq, info.memory, self._cuda, self.sync_on_release)
            _lib.check(status)
            self._got_frame = True
        return Frame(lease, info, self._geometry)

    def __iter__(self) -> Iterator[Frame]:
        return self

    def __next__(self) -> Frame:
        last, self._last = self._last, None
        if last is not None:
            last.close()
        try:
            frame = self.next()
        except CuframesError as e:
            if e.status == ERR_DISCONNECTED and self._shut_down_cleanly():
                raise StopIteration from None
            raise
        self._last = frame
        return frame

    def _shut_down_cleanly(self) -> bool:
        try:
            return self.stats.publisher_shut_down
        except CuframesError:
            return False

    def close(self) -> None:
        """Leaves the publisher. Frames already received stay valid until closed."""
        last, self._last = self._last, None
        if last is not None:
            last.close()
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is not None:
            _lib.lib.cuframes_subscriber_destroy(handle)

    def __enter__(self) -> "Subscriber":
        self._live()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover
            pass
