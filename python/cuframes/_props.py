"""Frame properties: what an encoder reads from a frame besides its pixels."""

from __future__ import annotations

import ctypes
import enum
from typing import NamedTuple, Optional, Tuple

from . import _lib
from ._errors import invalid

_KEY_FRAME, _INTERLACED, _TOP_FIELD_FIRST = 1, 2, 4


class FrameProps(NamedTuple):
    """Colour description, aspect ratio, field order, key frame and duration
    of a frame, in FFmpeg's numbering (H.273 code points for primaries,
    transfer and matrix; ``AVColorRange``: 0 unspecified, 1 limited, 2 full;
    ``AVChromaLocation``; ``AVPictureType``), passed through uninterpreted."""

    color_range: int = 0
    color_primaries: int = 2
    color_trc: int = 2
    colorspace: int = 2
    chroma_location: int = 0
    pict_type: int = 0
    key_frame: bool = False
    interlaced: bool = False
    top_field_first: bool = False
    sample_aspect_ratio: Tuple[int, int] = (0, 1)
    duration_ns: int = 0


def to_c(props: FrameProps) -> _lib.FrameProps:
    if not isinstance(props, FrameProps):
        raise invalid("props must be a cuframes.FrameProps or None, not %r" % (props,))
    raw = _lib.FrameProps()
    for name in ("color_range", "color_primaries", "color_trc", "colorspace", "chroma_location", "pict_type"):
        value = getattr(props, name)
        if not isinstance(value, int) or not 0 <= value <= 255:
            raise invalid("props.%s must be an int in 0..255, not %r" % (name, value))
        setattr(raw, name, value)
    raw.flags = ((_KEY_FRAME if props.key_frame else 0) | (_INTERLACED if props.interlaced else 0)
                 | (_TOP_FIELD_FIRST if props.top_field_first else 0))
    sar = props.sample_aspect_ratio
    if len(sar) != 2 or not all(isinstance(v, int) and 0 <= v < 2**32 for v in sar):
        raise invalid("props.sample_aspect_ratio must be two ints in 0..2**32-1, not %r" % (sar,))
    raw.sar_num, raw.sar_den = sar
    raw.duration_ns = int(props.duration_ns)
    return raw


def from_c(raw: _lib.FrameProps) -> FrameProps:
    return FrameProps(raw.color_range, raw.color_primaries, raw.color_trc, raw.colorspace, raw.chroma_location,
                      raw.pict_type, bool(raw.flags & _KEY_FRAME), bool(raw.flags & _INTERLACED),
                      bool(raw.flags & _TOP_FIELD_FIRST), (raw.sar_num, raw.sar_den), raw.duration_ns)


def frame_props(lib: ctypes.CDLL, handle: int) -> Optional[FrameProps]:
    raw = _lib.FrameProps()
    status = lib.cuframes_frame_get_props(handle, ctypes.byref(raw))
    if status == 1:
        return from_c(raw)
    if status == 0:
        return None
    _lib.check(status)
    return None


class SideDataKind(enum.IntEnum):
    """Kinds of frame side data (payload layouts: docs/protocol-notes.md, D30).
    Other values 1..65535 pass through uninterpreted."""

    MASTERING_DISPLAY = 1
    CONTENT_LIGHT_LEVEL = 2
    A53_CC = 3
    SEI_UNREGISTERED = 4
    S12M_TIMECODE = 5
    HDR10_PLUS = 6


#: Bytes of side data one frame carries at most (8 per entry included).
SIDE_DATA_CAPACITY = 4096


class SideData(NamedTuple):
    """One entry of a frame's side data: its kind (a ``SideDataKind`` where
    known, else the plain int) and its payload."""

    kind: int
    data: bytes


def frame_side_data(lib: ctypes.CDLL, handle: int) -> Tuple[SideData, ...]:
    entries = []
    kind = ctypes.c_uint32()
    data = ctypes.POINTER(ctypes.c_uint8)()
    size = ctypes.c_size_t()
    while True:
        status = lib.cuframes_frame_get_side_data(handle, len(entries), ctypes.byref(kind), ctypes.byref(data),
                                                  ctypes.byref(size))
        if status == 0:
            return tuple(entries)
        if status != 1:
            _lib.check(status)
        payload = ctypes.string_at(data, size.value) if size.value else b""
        try:
            k: int = SideDataKind(kind.value)
        except ValueError:
            k = kind.value
        entries.append(SideData(k, payload))
