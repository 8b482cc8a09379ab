"""Publisher: own a key, publish frames from NumPy or CUDA arrays/tensors."""

from __future__ import annotations

import ctypes
import threading
import time
from fractions import Fraction
from typing import Any, List, Optional, Sequence, Tuple, Union

from . import _cuda, _lib, _props
from ._props import FrameProps
from ._arrays import CUDA, Source, plane_pitch, source_of, split_frame
from ._errors import ClosedError, invalid
from ._formats import format_code, geometry, memory_code, policy_code
from ._frame import MEMORY_CUDA, CudaBinding, Plane, _Owner
from ._subscriber import StreamInfo, _ms, stream_info


class _PublisherHandle(_Owner):
    """The publisher handle; slot exports keep it (and its memory) alive."""

    what = "publisher"

    def __init__(self, handle: int, key: str) -> None:
        super().__init__()
        self.handle = handle
        self.key = key
        self.read_only = False

    def describe(self) -> str:
        return "publisher of '%s'" % self.key

    def _finish(self) -> None:
        handle, self.handle = self.handle, 0
        if handle:
            _lib.lib.cuframes_publisher_destroy(handle)

    def __del__(self) -> None:
        try:
            if self._alive:
                self._alive = False
                self._finish()
        except Exception:  # pragma: no cover
            pass


class _SlotOwner(_Owner):
    """An acquired slot: its planes are writable until it is committed."""

    what = "slot"

    def __init__(self, publisher: _PublisherHandle, index: int, memory: int, cuda: Optional[CudaBinding]) -> None:
        super().__init__()
        publisher.retain()
        self._publisher: Optional[_PublisherHandle] = publisher
        self.index = index
        self.memory = memory
        self.cuda = cuda
        self.read_only = False
        self.streams: List[int] = []

    def describe(self) -> str:
        return "slot %d" % self.index

    def use_on(self, stream: int) -> None:
        # The consumer writes on ``stream``; the commit orders the
        # publisher's stream after it.
        if self.cuda is not None and not self.cuda.same_stream(stream) and stream not in self.streams:
            self.streams.append(stream)

    def _finish(self) -> None:
        publisher, self._publisher = self._publisher, None
        if publisher is not None:
            publisher.unref()


class Slot:
    """A slot acquired for zero-copy publishing (``Publisher.slot()``).

    Write the frame into ``slot.planes`` (``numpy.asarray(plane)[...] = ...``
    for host memory; ``torch.from_dlpack(plane).copy_(src)`` or a kernel
    for CUDA memory), then ``commit()``; as a context manager the slot is
    committed when the block ends without an exception. CUDA writes must be
    on the publisher's stream, or on a stream handed to DLPack
    (``from_dlpack`` does) or to ``slot.wait_for(stream)``: the commit
    orders the publisher's stream after those. Arrays made from the planes
    must not be used after the commit.
    """

    def __init__(self, publisher: "Publisher", owner: _SlotOwner, raw: _lib.Slot) -> None:
        self._publisher = publisher
        self._owner = owner
        self.index = raw.index
        self.planes: Tuple[Plane, ...] = tuple(
            Plane(owner, i, publisher._geometry[i], raw.planes[i] or 0, raw.pitches[i]) for i in range(raw.plane_count)
        )
        self.seq: Optional[int] = None

    def __repr__(self) -> str:
        return "<cuframes.Slot %d%s>" % (self.index, " committed seq=%d" % self.seq if self.seq else "")

    def wait_for(self, stream: Any) -> None:
        """Declares that the frame is written on ``stream`` (CUDA): the commit
        orders the publisher's stream after the work queued there."""
        self._owner.check_open()
        self._owner.use_on(_cuda.stream_handle(stream))

    def commit(self, pts_ns: Optional[int] = None) -> int:
        """Publishes the slot; returns its seq. ``pts_ns`` default: CLOCK_MONOTONIC now."""
        return self._publisher._commit(self, pts_ns)

    def __enter__(self) -> "Slot":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None and self.seq is None:
            self.commit()


class Publisher:
    """Publishes frames under ``key``: a ring of ``ring`` slots in ``memory``.

    ::

        pub = cuframes.Publisher("cam1", "nv12", 1920, 1080, memory="cuda")
        pub.publish([y, uv])        # torch/CuPy CUDA tensors or NumPy arrays

    ``ring``: slots, 1 to 16 (default 16, the library's: consumers such as
    encoders hold frames, and the ring leaves room for them);
    ``format``: a name of ``cuframes.FORMATS`` (``"nv12"``, ``"p010"``, ``"yuv444p10msb"``, ...;
    FFmpeg's ``"p010le"`` spelling too);
    ``memory``: ``"auto"`` (CUDA when a driver and device are usable),
    ``"host"`` or ``"cuda"``; ``policy``: ``"drop_oldest"`` (never wait)
    or ``"strict_wait"`` (wait up to ``ack_timeout`` seconds for every
    subscriber's release; ``startup_timeout`` for a subscriber in its first
    seconds, while its consumer is still starting); ``fps``: advertised rate (a number, Fraction or
    (num, den)). CUDA: ``cuda_context`` (CUcontext handle; default the
    current context, else device 0's primary context — PyTorch's and CuPy's)
    and ``cuda_stream`` (copies are queued there; default: the legacy
    default stream). ``runtime_dir``: where the key's socket goes.
    ``group``: a group (name or number) whose members may subscribe besides
    this user and root (socket 0660, shared header 0640); default: this
    user only.
    ``cuda_share``: how CUDA slots are shared, ``"fd"`` (file descriptors
    over the socket: subscribers in other containers need only the runtime
    directory), ``"ipc"`` (CUDA IPC handles, for protocol-v1 subscribers,
    who must share this PID namespace) or ``"auto"`` (fd where supported).
    """

    def __init__(
        self,
        key: str,
        format: Union[str, int],
        width: int,
        height: int,
        *,
        ring: int = 16,
        policy: Union[str, int] = "drop_oldest",
        memory: Union[str, int] = "auto",
        ack_timeout: float = 1.0,
        startup_timeout: float = 10.0,
        fps: Any = None,
        cuda_context: Any = None,
        cuda_stream: Any = None,
        runtime_dir: Optional[str] = None,
        group: Optional[str] = None,
        cuda_share: str = "auto",
    ) -> None:
        self._owner: Optional[_PublisherHandle] = None
        self._lock = threading.Lock()
        self._slot: Optional[Slot] = None
        self.key = key
        config = _lib.PublisherConfig()
        _lib.check(_lib.lib.cuframes_publisher_config_init_sized(ctypes.byref(config), ctypes.sizeof(config)))
        keep = [
            _lib.encode(key, "key"),
            _lib.encode(runtime_dir, "runtime_dir"),
            _lib.encode(None if group is None else str(group), "group"),
        ]
        config.key, config.runtime_dir, config.group = keep
        config.format = format_code(format)
        for name, value in (("width", width), ("height", height), ("ring", ring)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise invalid("%s must be a positive int, not %r" % (name, value))
        config.width, config.height, config.ring_size = width, height, ring
        config.policy = policy_code(policy)
        config.memory = memory_code(memory)
        shares = {"auto": 0, "fd": 1, "ipc": 2}
        if cuda_share not in shares:
            raise invalid("cuda_share must be 'auto', 'fd' or 'ipc', not %r" % (cuda_share,))
        config.cuda_share = shares[cuda_share]
        config.ack_timeout_ms = max(1, _ms(ack_timeout, "ack_timeout", False) or 0)
        config.startup_timeout_ms = max(1, _ms(startup_timeout, "startup_timeout", False) or 0)
        if fps is not None:
            if isinstance(fps, tuple):
                num, den = fps
            else:
                frac = Fraction(fps).limit_denominator(1001000)
                num, den = frac.numerator, frac.denominator
            if num <= 0 or den <= 0:
                raise invalid("fps must be positive")
            config.fps_num, config.fps_den = num, den
        context = _cuda.context_handle(cuda_context)
        self._stream = _cuda.stream_handle(cuda_stream)
        config.cuda_context = context or None
        config.cuda_stream = self._stream or None
        handle = _lib.handle()
        _lib.check(_lib.lib.cuframes_publisher_create(ctypes.byref(config), ctypes.byref(handle)))
        self._owner = _PublisherHandle(handle.value or 0, key)
        raw = _lib.StreamInfo()
        _lib.check(_lib.lib.cuframes_publisher_get_info(handle.value, ctypes.byref(raw)))
        self.info: StreamInfo = stream_info(raw)
        self._geometry = geometry(raw.format, raw.width, raw.height)
        self._what = "%s %dx%d" % (self.info.format, width, height)
        self._cuda: Optional[CudaBinding] = None
        if raw.memory == MEMORY_CUDA:
            try:
                self._cuda = CudaBinding(_cuda.Context.resolve(context, -1), self._stream)
            except BaseException:
                self.close()
                raise
        self._owner.memory = raw.memory
        self._owner.cuda = self._cuda

    def __repr__(self) -> str:
        state = "closed" if self.closed else "%s %s" % (self._what, self.info.memory)
        return "<cuframes.Publisher %r %s>" % (self.key, state)

    @property
    def closed(self) -> bool:
        return self._owner is None or self._owner.closed

    def _live(self) -> int:
        if self._owner is None or self._owner.closed:
            raise ClosedError(-1, "publisher of '%s' is closed" % self.key, "invalid argument")
        return self._owner.handle

    @property
    def device(self) -> Optional[int]:
        """CUDA device ordinal of the ring (None for host memory)."""
        return self._cuda.device if self._cuda is not None else None

    @property
    def subscriber_count(self) -> int:
        """Subscribers connected now."""
        return int(_lib.lib.cuframes_publisher_subscriber_count(self._live()))

    def wait_subscribers(self, count: int = 1, timeout: float = 30.0) -> None:
        """Waits until ``count`` subscribers are connected (``TimeoutError_`` after ``timeout`` s)."""
        with self._lock:
            _lib.check(_lib.lib.cuframes_publisher_wait_subscribers(self._live(), count, _ms(timeout, "timeout", False)))

    def flush(self, timeout: float = 1.0) -> None:
        """Waits until every subscriber released every frame in the ring (or
        left); call before ``close()`` when the last frames must arrive."""
        with self._lock:
            _lib.check(_lib.lib.cuframes_publisher_flush(self._live(), _ms(timeout, "timeout", False)))

    def _sources(self, frame: Any) -> Tuple[List[Source], List[Tuple[int, int]]]:
        geos = self._geometry
        dl_stream = self._cuda.interface_stream if self._cuda is not None else 1
        if isinstance(frame, (list, tuple)):
            if len(frame) != len(geos):
                raise invalid(
                    "%s has %d planes (%s); got %d arrays"
                    % (self._what, len(geos), ", ".join(g.name for g in geos), len(frame))
                )
            sources: List[Source] = []
            try:
                for item in frame:
                    sources.append(source_of(item, dl_stream))
                planes = [(s.ptr, plane_pitch(s, i, geos[i], self._what)) for i, s in enumerate(sources)]
            except BaseException:
                for s in sources:
                    s.close()
                raise
            return sources, planes
        src = source_of(frame, dl_stream)
        try:
            if len(geos) == 1 and len(src.shape) >= 2:
                planes = [(src.ptr, plane_pitch(src, 0, geos[0], self._what))]
            else:
                planes = split_frame(src, geos, self._what)
        except BaseException:
            src.close()
            raise
        return [src], planes

    def set_frame_props(self, props: Optional[FrameProps]) -> None:
        """The properties (``cuframes.FrameProps``: colour description, aspect
        ratio, field order, key frame, duration) every frame published from
        now on carries; None: none."""
        raw = None if props is None else ctypes.byref(_props.to_c(props))
        with self._lock:
            _lib.check(_lib.lib.cuframes_publisher_set_frame_props(self._live(), raw))

    def add_side_data(self, kind: int, data: bytes) -> None:
        """Attaches side data (``cuframes.SideDataKind``: HDR mastering display,
        content light level, HDR10+, A/53 captions, user-data SEI, timecodes)
        to the next frame published; it is cleared once that frame is out.
        A frame carries at most ``cuframes.SIDE_DATA_CAPACITY`` bytes of it
        (8 per entry included): more raises InvalidArgumentError, the entries
        added before are kept."""
        if not isinstance(kind, int) or not 1 <= int(kind) <= 65535:
            raise invalid("side data kind must be an int in 1..65535, not %r" % (kind,))
        payload = bytes(data)
        with self._lock:
            _lib.check(_lib.lib.cuframes_publisher_add_side_data(self._live(), int(kind), payload, len(payload)))

    def publish(self, frame: Union[Any, Sequence[Any]], pts_ns: Optional[int] = None) -> int:
        """Copies a frame into the next slot and wakes the subscribers; returns its seq.

        ``frame``: one array per plane (a list or tuple: nv12 ``[y, uv]``,
        yuv420p ``[y, u, v]``, p010 ``[y, uv]``, bgra ``[bgra]``), or one
        array — for bgra the plane, for the others every plane back to back
        with no padding (nv12: shape ``(height * 3 // 2, width)`` uint8); a
        1-D array or ``bytes`` is always read as planes back to back.
        A plane has shape ``(rows, columns[, channels])`` or
        ``(rows, row_bytes // itemsize)``, uint8 (uint16 for the 16-bit formats), rows
        contiguous inside, any row stride. NumPy/buffers are host memory;
        objects with ``__cuda_array_interface__`` or a CUDA ``__dlpack__``
        (PyTorch, CuPy, Numba, ...) are device memory, copied device to
        device on the publisher's stream (``__dlpack__(stream=...)`` is
        asked for that stream, so the producer's pending writes come
        first). Keep a CUDA source unchanged until that stream reached the
        copy. ``pts_ns`` default: CLOCK_MONOTONIC now. Under
        ``strict_wait`` this may wait up to ``ack_timeout`` for slow
        subscribers.
        """
        if pts_ns is None:
            pts_ns = time.monotonic_ns()
        with self._lock:
            handle = self._live()
            if self._slot is not None:
                raise invalid("slot %d is acquired and not committed; commit it first" % self._slot.index)
            sources, planes = self._sources(frame)
            try:
                kinds = {s.memory for s in sources}
                if len(kinds) != 1:
                    raise invalid("the planes of a frame must all be in host memory or all in CUDA memory")
                memory = kinds.pop()
                if memory == CUDA:
                    self._order_cuda_sources(sources)
                n = len(planes)
                ptrs = (ctypes.c_void_p * n)(*[p for p, _ in planes])
                pitches = (ctypes.c_size_t * n)(*[pitch for _, pitch in planes])
                seq = ctypes.c_uint64()
                _lib.check(
                    _lib.lib.cuframes_publisher_publish(
                        handle, memory, ptrs, pitches, n, int(pts_ns), ctypes.byref(seq)
                    )
                )
                return seq.value
            finally:
                for s in sources:
                    s.close()

    def _order_cuda_sources(self, sources: List[Source]) -> None:
        cuda = self._cuda
        for s in sources:
            if cuda is not None and s.device is not None and s.device != cuda.device:
                raise invalid(
                    "a CUDA source on device %d cannot be published into the ring on device %d"
                    % (s.device, cuda.device)
                )
        if cuda is None:
            return
        # __cuda_array_interface__ v3: the producer's stream; order ours after it.
        for stream in {s.stream for s in sources if s.stream is not None}:
            if not cuda.same_stream(stream):
                event = cuda.context.event_after(stream)
                try:
                    cuda.context.stream_wait(cuda.stream, event)
                finally:
                    cuda.context.destroy_event(event)

    def slot(self) -> Slot:
        """The slot the next frame goes to, to write in place (zero copy).
        See :class:`Slot`; the same slot is returned until it is committed.
        Under ``strict_wait`` this may first wait for slow subscribers."""
        with self._lock:
            handle = self._live()
            if self._slot is not None:
                return self._slot
            raw = _lib.Slot()
            _lib.check(_lib.lib.cuframes_publisher_acquire_slot(handle, ctypes.byref(raw)))
            assert self._owner is not None
            owner = _SlotOwner(self._owner, raw.index, raw.memory, self._cuda)
            self._slot = Slot(self, owner, raw)
            return self._slot

    def _commit(self, slot: Slot, pts_ns: Optional[int]) -> int:
        if pts_ns is None:
            pts_ns = time.monotonic_ns()
        with self._lock:
            handle = self._live()
            if self._slot is not slot:
                raise invalid("this slot was committed already")
            owner = slot._owner
            cuda = self._cuda
            if cuda is not None:
                for stream in owner.streams:
                    event = cuda.context.event_after(stream)
                    try:
                        cuda.context.stream_wait(cuda.stream, event)
                    finally:
                        cuda.context.destroy_event(event)
            seq = ctypes.c_uint64()
            _lib.check(_lib.lib.cuframes_publisher_commit_slot(handle, int(pts_ns), ctypes.byref(seq)))
            self._slot = None
            slot.seq = seq.value
            owner.closed = True
            owner.unref()
            return seq.value

    def close(self) -> None:
        """Shuts down: subscribers see the end of the stream; the key's
        socket and shared memory are removed. Frames subscribers still hold
        stay readable until they release them."""
        owner, self._owner = self._owner, None
        if owner is not None and not owner.closed:
            owner.closed = True
            slot, self._slot = self._slot, None
            if slot is not None:
                slot._owner.closed = True
                slot._owner.unref()
            owner.unref()

    def __enter__(self) -> "Publisher":
        self._live()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover
            pass

