"""Frames and planes: leased slots exposed as arrays with no copy."""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Dict, Iterator, Optional, Set, Tuple

from . import _cuda, _dlpack
from ._errors import ClosedError
from ._formats import FORMAT_NAMES, MEMORY_NAMES, PlaneGeometry
from ._props import FrameProps, SideData, frame_props, frame_side_data

MEMORY_HOST = 1
MEMORY_CUDA = 2


class CudaBinding:
    """A subscriber's or publisher's CUDA side, as the bindings see it: the
    context the library used, its device, and the stream it orders work on."""

    def __init__(self, context: "_cuda.Context", stream: int) -> None:
        self.context = context
        self.stream = stream  # CUstream handle; 0 = the legacy default stream

    @property
    def device(self) -> int:
        return self.context.device

    def same_stream(self, stream: int) -> bool:
        # 0 (NULL) and 1 (CU_STREAM_LEGACY) are both the legacy default stream.
        def norm(s: int) -> int:
            return 1 if s in (0, 1) else s

        return norm(stream) == norm(self.stream)

    @property
    def interface_stream(self) -> int:
        """The stream as ``__cuda_array_interface__`` / DLPack number it (0 is not allowed there)."""
        return 1 if self.stream == 0 else self.stream


class _Owner:
    """What planes hang on: a reference count over a resource (a frame's
    lease, a publisher's slot) that is given back when the last holder
    (the Frame, a pinned plane, a DLPack capsule) lets go."""

    what = "object"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refs = 1
        self._alive = True
        self.closed = False  # closed by its user: no new exports
        self.memory = MEMORY_HOST
        self.cuda: Optional[CudaBinding] = None
        self.read_only = True

    def check_open(self) -> None:
        if self.closed or not self._alive:
            raise ClosedError(-1, "%s is closed" % self.describe(), "invalid argument")

    def describe(self) -> str:
        return self.what

    def retain(self) -> None:
        with self._lock:
            if not self._alive:
                raise ClosedError(-1, "%s is closed" % self.describe(), "invalid argument")
            self._refs += 1

    def unref(self) -> None:
        with self._lock:
            if not self._alive:
                return
            self._refs -= 1
            if self._refs > 0:
                return
            self._alive = False
        self._finish()

    def _finish(self) -> None:  # pragma: no cover - overridden
        pass

    # CUDA ordering hooks: a consumer will read/write on ``stream``.
    def use_on(self, stream: int) -> None:
        pass


class Lease(_Owner):
    """One leased frame (``cuframes_frame``); released when the Frame is
    closed and every export of its planes is gone."""

    what = "frame"

    def __init__(self, lib: Any, handle: int, seq: int, memory: int, cuda: Optional[CudaBinding], sync_on_release: bool) -> None:
        super().__init__()
        self._lib = lib
        self.handle = handle
        self.seq = seq
        self.memory = memory
        self.cuda = cuda
        self.sync_on_release = sync_on_release
        self.streams: Set[int] = set()
        self._event = 0

    def describe(self) -> str:
        return "frame seq %d" % self.seq

    def ready_event(self) -> int:
        """An event recorded on the subscriber's stream after this frame's
        wait: work ordered after it sees the whole frame."""
        assert self.cuda is not None
        with self._lock:
            if not self._event:
                self._event = self.cuda.context.event_after(self.cuda.stream)
            return self._event

    def wait_on(self, stream: int) -> None:
        """Orders ``stream`` after the frame (no host wait)."""
        if self.cuda is None:
            return
        with self._lock:
            self.streams.add(stream)
        if not self.cuda.same_stream(stream):
            self.cuda.context.stream_wait(stream, self.ready_event())

    def use_on(self, stream: int) -> None:
        self.wait_on(stream)

    def is_intact(self) -> bool:
        with self._lock:
            if not self._alive:
                raise ClosedError(-1, "%s is released" % self.describe(), "invalid argument")
            return self._lib.cuframes_frame_is_intact(self.handle) == 0

    def is_copy(self) -> bool:
        with self._lock:
            if not self._alive:
                raise ClosedError(-1, "%s is released" % self.describe(), "invalid argument")
            return self._lib.cuframes_frame_is_copy(self.handle) == 1

    def props(self) -> Any:
        with self._lock:
            if not self._alive:
                raise ClosedError(-1, "%s is released" % self.describe(), "invalid argument")
            return frame_props(self._lib, self.handle)

    def side_data(self) -> Any:
        with self._lock:
            if not self._alive:
                raise ClosedError(-1, "%s is released" % self.describe(), "invalid argument")
            return frame_side_data(self._lib, self.handle)

    def _finish(self) -> None:
        handle, self.handle = self.handle, 0
        cuda = self.cuda
        try:
            if cuda is not None:
                if self.sync_on_release:
                    # What consumers queued on the frame must have run before
                    # the publisher may overwrite the slot.
                    for stream in {cuda.stream} | self.streams:
                        try:
                            cuda.context.stream_synchronize(stream)
                        except Exception:
                            pass
                if self._event:
                    cuda.context.destroy_event(self._event)
                    self._event = 0
        finally:
            if handle:
                # OVERWRITTEN is counted in the subscriber's stats.
                self._lib.cuframes_frame_release(handle)

    def __del__(self) -> None:
        try:
            if self._alive:
                self._alive = False
                self._finish()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


class Plane:
    """One plane of a frame (or of a publisher's slot), in shared memory.

    Attributes: ``ptr`` (host address or CUdeviceptr), ``pitch`` (bytes
    from row to row), ``rows``, ``row_bytes``, ``shape``, ``strides`` (bytes),
    ``dtype`` (``"uint8"`` or ``"uint16"``), ``memory`` (``"host"`` or
    ``"cuda"``), ``device`` (CUDA ordinal or None).

    Zero-copy views:

    * host memory: ``__array_interface__`` (``numpy.asarray(plane)``),
      DLPack (``numpy.from_dlpack(plane)``) and ``plane.memoryview()`` (the
      bytes, for code without NumPy); frames from a subscriber are read-only;
    * CUDA memory: ``__cuda_array_interface__`` (``cupy.asarray``,
      ``torch.as_tensor``, Numba) and DLPack (``torch.from_dlpack(plane)``,
      ``cupy.from_dlpack``).

    Arrays and tensors made this way keep the frame leased until they are
    freed, even after ``Frame.close()``. The shape is ``(rows, columns)`` or
    ``(rows, columns, channels)`` (NV12/P010 UV: 2 channels, BGRA: 4).
    """

    def __init__(self, owner: _Owner, index: int, geometry: PlaneGeometry, ptr: int, pitch: int) -> None:
        self._owner = owner
        self._pinned = False
        self.index = index
        self.name = geometry.name
        self.geometry = geometry
        self.ptr = ptr
        self.pitch = pitch
        self.rows = geometry.rows
        self.row_bytes = geometry.row_bytes
        self.itemsize = geometry.itemsize
        self.shape: Tuple[int, ...] = geometry.shape
        if geometry.channels == 1:
            self.strides: Tuple[int, ...] = (pitch, geometry.itemsize)
        else:
            self.strides = (pitch, geometry.channels * geometry.itemsize, geometry.itemsize)
        self.dtype = geometry.dtype_name
        self.memory = MEMORY_NAMES[owner.memory]
        self.device: Optional[int] = owner.cuda.device if owner.cuda is not None else None

    def __repr__(self) -> str:
        return "<cuframes.Plane %s %s %s shape=%s pitch=%d ptr=0x%x>" % (
            self.name,
            self.memory,
            self.dtype,
            self.shape,
            self.pitch,
            self.ptr,
        )

    @property
    def nbytes(self) -> int:
        """Bytes the plane spans: ``pitch * (rows - 1) + row_bytes``."""
        return self.pitch * (self.rows - 1) + self.row_bytes

    def _pin(self) -> None:
        """Keeps the owner alive as long as this plane object (numpy and
        CUDA-array consumers hold the object that gave them the interface)."""
        self._owner.check_open()
        if not self._pinned:
            self._owner.retain()
            self._pinned = True

    def __del__(self) -> None:
        if getattr(self, "_pinned", False):
            self._pinned = False
            try:
                self._owner.unref()
            except Exception:  # pragma: no cover
                pass

    # Host memory.

    @property
    def __array_interface__(self) -> Dict[str, Any]:
        if self._owner.memory != MEMORY_HOST:
            raise AttributeError("a CUDA plane has no __array_interface__ (use __cuda_array_interface__ or DLPack)")
        self._pin()
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": self.geometry.typestr,
            "strides": self.strides,
            "data": (self.ptr, self._owner.read_only),
        }

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        # Reached only when __array_interface__ is absent: a CUDA plane.
        raise TypeError(
            "%r is in CUDA memory: use torch.from_dlpack(plane), cupy.asarray(plane) or copy it to the host yourself"
            % (self,)
        )

    def memoryview(self) -> memoryview:
        """The plane's bytes (``nbytes`` long, 1-D, format ``B``) with no
        copy, read-only for subscribed frames. Keeps the frame leased while
        the memoryview (or anything made from it) lives. Host memory only."""
        if self._owner.memory != MEMORY_HOST:
            raise TypeError("%r is in CUDA memory, not host memory" % (self,))
        self._owner.check_open()
        holder = _Pin(self._owner)
        array_type: Any = type("_PlaneBytes", (ctypes.c_ubyte * self.nbytes,), {})
        buf = array_type.from_address(self.ptr)
        buf._pin = holder  # type: ignore[attr-defined]
        view = memoryview(buf).cast("B")
        return view.toreadonly() if self._owner.read_only else view

    # CUDA memory.

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        if self._owner.memory != MEMORY_CUDA or self._owner.cuda is None:
            raise AttributeError("a host plane has no __cuda_array_interface__ (use __array_interface__ or DLPack)")
        self._pin()
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": self.geometry.typestr,
            "strides": self.strides,
            "data": (self.ptr, False),
            # Work ordered after this stream sees the frame (the subscriber's stream).
            "stream": self._owner.cuda.interface_stream,
        }

    # DLPack.

    def __dlpack_device__(self) -> Tuple[int, int]:
        if self._owner.memory == MEMORY_CUDA and self._owner.cuda is not None:
            return (_dlpack.KDL_CUDA, self._owner.cuda.device)
        return (_dlpack.KDL_CPU, 0)

    def __dlpack__(
        self,
        stream: Optional[int] = None,
        *,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any:
        """A DLPack capsule over the plane (no copy).

        ``stream`` (CUDA): the consumer's stream; the frame is ordered before
        it on the GPU (None or 1: the legacy default stream, 2: per-thread
        default, -1: no ordering). The stream is also synchronised before
        the slot is released. ``copy=True`` is refused (BufferError): the
        point is sharing; copy with the consumer if needed.
        """
        owner = self._owner
        owner.check_open()
        if copy:
            raise BufferError("cuframes planes are shared memory and are not copied; copy=True is not supported")
        device = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError("the plane is on DLPack device %s, not %s" % (device, tuple(dl_device)))
        if owner.memory == MEMORY_CUDA and stream != -1:
            handle = _cuda.CU_STREAM_LEGACY if stream is None else _cuda.stream_handle(stream)
            owner.use_on(handle)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        owner.retain()
        released: list = []

        def on_delete() -> None:
            if not released:
                released.append(True)
                owner.unref()

        itemsize = self.itemsize
        return _dlpack.export(
            self.ptr,
            device[0],
            device[1],
            self.shape,
            [s // itemsize for s in self.strides],
            itemsize,
            read_only=owner.read_only and owner.memory == MEMORY_HOST,
            versioned=versioned,
            on_delete=on_delete,
        )


class _Pin:
    """One reference on an owner, dropped when this object dies."""

    def __init__(self, owner: _Owner) -> None:
        owner.retain()
        self._owner: Optional[_Owner] = owner

    def __del__(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None:
            try:
                owner.unref()
            except Exception:  # pragma: no cover
                pass


class Frame:
    """A frame leased from a subscriber: its metadata and planes.

    The slot stays leased (the publisher will not reuse it under
    ``strict_wait``) until the frame is closed — ``frame.close()``, the end
    of a ``with frame:`` block, the next step of a ``for frame in
    subscriber`` loop, or garbage collection — *and* every array, tensor
    or DLPack capsule made from its planes is freed.

    CUDA frames are ready on the subscriber's stream (``cuda_stream``,
    default: the legacy default stream, which PyTorch and CuPy use by
    default). For work on another stream call ``frame.wait(stream)`` first
    (``torch.from_dlpack`` and ``cupy.from_dlpack`` do it for their current
    stream through DLPack's ``stream`` argument). Before the slot is given
    back, the subscriber's stream and every stream passed to ``wait`` or
    DLPack are synchronised, so queued kernels never read a reused slot
    (``Subscriber(sync_on_release=False)`` turns that off).
    """

    def __init__(self, lease: Lease, info: Any, geometries: Any) -> None:
        self._lease = lease
        self.seq: int = info.seq
        self.pts_ns: int = info.pts_ns
        self.publish_mono_ns: int = info.publish_mono_ns
        #: Frames published since the previous frame (or since subscribing)
        #: that this subscriber never received: lapped, skipped or torn.
        self.lost_before: int = info.lost_before
        #: What the publisher said about the frame besides its pixels
        #: (``cuframes.FrameProps``: colour description, aspect ratio, field
        #: order, key frame, duration), or None when it said nothing.
        self.props: Optional[FrameProps] = lease.props()
        #: The frame's side data (``cuframes.SideData`` entries: HDR metadata,
        #: captions, SEI, timecodes), in the order the publisher added them.
        self.side_data: Tuple[SideData, ...] = lease.side_data()
        self.format: str = FORMAT_NAMES.get(info.format, str(info.format))
        self.width: int = info.width
        self.height: int = info.height
        self.memory: str = MEMORY_NAMES.get(info.memory, str(info.memory))
        self.device: Optional[int] = lease.cuda.device if lease.cuda is not None else None
        self._planes: Optional[Tuple[Plane, ...]] = tuple(
            Plane(lease, i, geometries[i], info.planes[i] or 0, info.pitches[i]) for i in range(info.plane_count)
        )
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return "<cuframes.Frame seq=%d %s %dx%d %s %s>" % (self.seq, self.format, self.width, self.height, self.memory, state)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check(self) -> None:
        if self._closed:
            raise ClosedError(-1, "frame seq %d is closed" % self.seq, "invalid argument")

    @property
    def planes(self) -> Tuple[Plane, ...]:
        """The planes: Y, UV (nv12, nv16, p010, p012, p016, p210, p212, p216); Y, U, V (the yuv4xxp
        formats); Y, U, V, A (yuva420p); one packed plane (bgra, rgba, bgr0, rgb0)."""
        self._check()
        assert self._planes is not None
        return self._planes

    def __getitem__(self, index: int) -> Plane:
        return self.planes[index]

    def __len__(self) -> int:
        return len(self.planes)

    def __iter__(self) -> Iterator[Plane]:
        return iter(self.planes)

    def is_intact(self) -> bool:
        """False once the publisher started to overwrite the slot
        (``drop_oldest``): what was read since may be torn."""
        self._check()
        return self._lease.is_intact()

    @property
    def is_copy(self) -> bool:
        """True for a private copy (its slot was released when it was made:
        holding it holds nothing of the publisher's), False for the shared
        slot itself."""
        self._check()
        return self._lease.is_copy()

    def wait(self, stream: Any = None) -> None:
        """Orders CUDA work after this frame.

        ``stream`` given (an int CUstream, a ``torch.cuda.Stream``, a CuPy
        stream): that stream waits for the frame on the GPU (the host does
        not block), and it is synchronised before the slot is released.
        ``stream=None``: the host blocks until the frame is in the slot.
        Host-memory frames: does nothing.
        """
        self._check()
        lease = self._lease
        if lease.cuda is None:
            return
        if stream is None:
            lease.cuda.context.event_synchronize(lease.ready_event())
        else:
            lease.wait_on(_cuda.stream_handle(stream))

    def close(self) -> None:
        """Gives the frame back (ACK) once no export of its planes is left.
        Idempotent. Reading the Frame or its Plane objects afterwards raises
        ``ClosedError``; arrays and tensors made earlier stay valid."""
        if self._closed:
            return
        self._closed = True
        self._planes = None
        self._lease.closed = True
        self._lease.unref()

    release = close

    def __enter__(self) -> "Frame":
        self._check()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover
            pass


OnDelete = Callable[[], None]
