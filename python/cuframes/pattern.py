"""The test pattern of ``cuframes publish`` / ``cuframes subscribe --verify``
(rust/cuframes/src/pattern.rs), with NumPy.

Byte ``x`` of row ``y`` of plane ``p`` in frame ``f`` (frame index = seq - 1)::

    8-bit formats:                  (x + 3*y + 7*f + 61*p) mod 256
    16-bit LE samples, s = x // 2:  ((s + 3*y + 7*f + 61*p) mod 2**d) << k
      p010, p210, yuv444p10msb:         d = 10, k = 6 (high bits)
      p012, p212, yuv444p12msb:         d = 12, k = 4 (high bits)
      yuv420p10, yuv422p10, yuv444p10:  d = 10, k = 0 (low bits)
      p016, p216, yuv444p16:            d = 16, k = 0

Only the picture bytes of each row are defined, not pitch padding.
"""

from __future__ import annotations

from typing import Any, List

from ._formats import SAMPLE_BITS, format_code, geometry


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:  # pragma: no cover
        raise ImportError("cuframes.pattern needs NumPy (pip install numpy)") from None
    return numpy


def plane_rows(format: str, frame: int, plane: int, rows: int, row_bytes: int) -> Any:
    """Plane ``plane`` of frame ``frame`` as a ``(rows, row_bytes)`` uint8 array."""
    np = _numpy()
    y = np.arange(rows, dtype=np.int64)[:, None]
    base = 3 * y + 7 * frame + 61 * plane
    sixteen = SAMPLE_BITS.get(format_code(format))
    if sixteen:
        depth, shift = sixteen
        modulus = 1 << depth
        s = np.arange(row_bytes // 2, dtype=np.int64)[None, :]
        samples = (((s + base) % modulus) << shift).astype("<u2")
        return samples.view(np.uint8).reshape(rows, row_bytes)
    x = np.arange(row_bytes, dtype=np.int64)[None, :]
    return ((x + base) % 256).astype(np.uint8)


def planes(format: str, width: int, height: int, frame: int) -> List[Any]:
    """Every plane of frame ``frame`` as arrays of the planes' shapes
    (``Plane.shape``; uint16 for the 16-bit formats), ready for ``Publisher.publish``."""
    np = _numpy()
    out = []
    for p, geo in enumerate(geometry(format_code(format), width, height)):
        raw = plane_rows(format, frame, p, geo.rows, geo.row_bytes)
        out.append(np.ascontiguousarray(raw).view(np.dtype(geo.typestr)).reshape(geo.shape))
    return out


def check_plane(format: str, frame: int, plane: int, array: Any) -> bool:
    """Whether a plane (anything NumPy reads: a host ``Plane``, an array of
    its shape or of shape (rows, row_bytes)) holds the pattern."""
    np = _numpy()
    a = np.asarray(array)
    rows = a.shape[0]
    row_bytes = a.dtype.itemsize
    for d in a.shape[1:]:
        row_bytes *= d
    raw = np.lib.stride_tricks.as_strided(a, shape=(rows, row_bytes // a.dtype.itemsize), strides=(a.strides[0], a.dtype.itemsize))
    raw = raw.view(np.uint8) if a.dtype.itemsize == 1 else np.ascontiguousarray(raw).view(np.uint8)
    return bool(np.array_equal(raw, plane_rows(format, frame, plane, rows, row_bytes)))


def check_frame(frame: Any) -> bool:
    """Whether a host :class:`cuframes.Frame` holds the pattern for its seq."""
    return all(check_plane(frame.format, frame.seq - 1, p, plane) for p, plane in enumerate(frame.planes))
