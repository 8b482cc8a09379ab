"""Reading what a caller publishes: NumPy (or any buffer), CUDA arrays
(``__cuda_array_interface__``) and DLPack producers, with checks."""

from __future__ import annotations

import ctypes
from typing import Any, Callable, List, Optional, Sequence, Tuple

from . import _dlpack
from ._errors import invalid
from ._formats import PlaneGeometry

HOST = 1
CUDA = 2


class Source:
    """One array's memory: where, what shape, how to let go of it."""

    def __init__(
        self,
        ptr: int,
        shape: Tuple[int, ...],
        strides: Tuple[int, ...],
        itemsize: int,
        kind: str,
        memory: int,
        device: Optional[int] = None,
        stream: Optional[int] = None,
        keep: Any = None,
        close: Optional[Callable[[], None]] = None,
        read_only: bool = False,
    ) -> None:
        self.ptr = ptr
        self.shape = shape
        self.strides = strides
        self.itemsize = itemsize
        self.kind = kind
        self.memory = memory
        self.device = device
        self.stream = stream  # CUDA: the producer's stream to wait on (CAI v3)
        self.keep = keep
        self._close = close
        self.read_only = read_only

    @property
    def nbytes(self) -> int:
        n = self.itemsize
        for d in self.shape:
            n *= d
        return n

    def c_contiguous(self) -> bool:
        step = self.itemsize
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != step:
                return False
            step *= n
        return True

    def describe(self) -> str:
        dtype = {"u": "uint", "i": "int", "f": "float"}.get(self.kind, self.kind) + str(8 * self.itemsize)
        return "%s %s array of shape %s" % ("CUDA" if self.memory == CUDA else "host", dtype, self.shape)

    def close(self) -> None:
        close, self._close = self._close, None
        self.keep = None
        if close is not None:
            close()


def _from_interface(desc: dict, memory: int, keep: Any) -> Source:
    typestr = desc["typestr"]
    kind, itemsize = typestr[1], int(typestr[2:])
    if typestr[0] == ">" and itemsize > 1:
        raise invalid("big-endian data (%s) cannot be published" % typestr)
    shape = tuple(int(d) for d in desc["shape"])
    strides = desc.get("strides")
    data = desc.get("data")
    if not isinstance(data, tuple):
        raise invalid("array interface without a data pointer")
    if strides is None:
        out = Source(data[0], shape, (), itemsize, kind, memory, keep=keep, read_only=bool(data[1]))
        out.strides = _dlpack._c_strides(shape, itemsize)
    else:
        out = Source(data[0], shape, tuple(int(s) for s in strides), itemsize, kind, memory, keep=keep, read_only=bool(data[1]))
    if memory == CUDA:
        stream = desc.get("stream")
        out.stream = int(stream) if stream is not None else None
    return out


def _dlpack_kind(code: int) -> str:
    return {_dlpack.KDL_UINT: "u", _dlpack.KDL_INT: "i", 2: "f"}.get(code, "?%d" % code)


def source_of(obj: Any, dlpack_stream: int) -> Source:
    """The memory of ``obj``: a CUDA array (``__cuda_array_interface__`` or
    a CUDA DLPack producer) or a host array (NumPy and anything NumPy
    accepts, or a buffer)."""
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_interface(cai, CUDA, obj)
    dev = None
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        try:
            dev = tuple(obj.__dlpack_device__())
        except Exception:
            dev = None
    if dev is not None and dev[0] in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED):
        imported = _dlpack.Imported(obj.__dlpack__(stream=dlpack_stream))
        return Source(
            imported.data,
            imported.shape,
            imported.strides_bytes,
            imported.itemsize,
            _dlpack_kind(imported.code),
            CUDA,
            device=imported.device_id,
            keep=obj,
            close=imported.close,
        )
    aif = getattr(obj, "__array_interface__", None)
    if isinstance(aif, dict) and isinstance(aif.get("data"), tuple):
        return _from_interface(aif, HOST, obj)
    try:
        import numpy  # optional
    except ImportError:
        numpy = None  # type: ignore[assignment]
    if numpy is not None:
        try:
            if isinstance(obj, (bytes, bytearray, memoryview)):
                arr = numpy.frombuffer(obj, numpy.uint8)  # bytes of raw video: no copy
            else:
                arr = numpy.asarray(obj)
        except Exception as e:
            raise invalid("cannot publish %s: %s" % (type(obj).__name__, e)) from None
        if arr.dtype.hasobject:
            raise invalid("cannot publish %s: not an array of numbers" % type(obj).__name__)
        return _from_interface(arr.__array_interface__, HOST, arr)
    try:
        view = memoryview(obj)
    except TypeError:
        raise invalid(
            "cannot publish %s: expected an array (NumPy, buffer, __cuda_array_interface__ or DLPack)"
            % type(obj).__name__
        ) from None
    if not view.c_contiguous:
        raise invalid("a buffer without NumPy must be C-contiguous")
    if view.readonly:
        data = bytearray(view)  # a copy: ctypes cannot address read-only buffers
        view = memoryview(data)
    raw = (ctypes.c_char * view.nbytes).from_buffer(view.cast("B"))
    fmt = view.format.lstrip("@=<")
    kind = "u" if fmt in ("B", "H", "I", "L", "Q") else "i" if fmt in ("b", "h", "i", "l", "q") else "?"
    shape = tuple(view.shape or (view.nbytes // view.itemsize,))
    return Source(
        ctypes.addressof(raw),
        shape,
        _dlpack._c_strides(shape, view.itemsize),
        view.itemsize,
        kind,
        HOST,
        keep=(raw, view, obj),
    )


def plane_pitch(src: Source, index: int, geo: PlaneGeometry, what: str) -> int:
    """Checks ``src`` is plane ``index`` (rows of ``row_bytes``, the right
    sample size, rows contiguous inside) and returns its pitch."""
    label = "plane %d (%s) of %s" % (index, geo.name, what)
    if src.kind not in ("u", "i") or src.itemsize != geo.itemsize:
        raise invalid("%s: got a %s; expected %s samples" % (label, src.describe(), geo.dtype_name))
    shape, strides = src.shape, src.strides
    expected = "shape %s or (%d, %d) %s" % (geo.shape, geo.rows, geo.row_bytes // geo.itemsize, geo.dtype_name)
    inner = 1
    for d in shape[1:]:
        inner *= d
    if len(shape) < 2 or shape[0] != geo.rows or inner * src.itemsize != geo.row_bytes:
        raise invalid("%s: got a %s; expected %s" % (label, src.describe(), expected))
    step = src.itemsize
    for n, s in zip(reversed(shape[1:]), reversed(strides[1:])):
        if n != 1 and s != step:
            raise invalid("%s: the samples of each row must be contiguous (strides %s)" % (label, strides))
        step *= n
    pitch = strides[0] if geo.rows > 1 else geo.row_bytes
    if pitch < geo.row_bytes:
        raise invalid(
            "%s: row stride %d is shorter than a row (%d bytes); negative or overlapping rows cannot be published"
            % (label, pitch, geo.row_bytes)
        )
    return pitch


def split_frame(src: Source, geometries: Sequence[PlaneGeometry], what: str) -> List[Tuple[int, int]]:
    """One contiguous array holding every plane back to back (rows of
    ``row_bytes``, no padding): the (pointer, pitch) of each plane."""
    sizes = [g.rows * g.row_bytes for g in geometries]
    if not src.c_contiguous() or src.nbytes != sum(sizes) or src.kind not in ("u", "i"):
        layout = " + ".join("%s %dx%d" % (g.name, g.rows, g.row_bytes) for g in geometries)
        example = ""
        if len({g.row_bytes for g in geometries}) == 1:
            example = ", e.g. shape (%d, %d) uint8" % (sum(g.rows for g in geometries), geometries[0].row_bytes)
        raise invalid(
            "%s: a single array must be C-contiguous and hold every plane back to back "
            "(rows x bytes: %s = %d bytes%s); got a %s. Or pass one array per plane."
            % (what, layout, sum(sizes), example, src.describe())
        )
    out = []
    offset = 0
    for g, size in zip(geometries, sizes):
        out.append((src.ptr + offset, g.row_bytes))
        offset += size
    return out
