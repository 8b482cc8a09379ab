"""Pixel formats, policies, memory kinds and modes: names <-> C numbers, plane geometry."""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Tuple, Union

from ._errors import invalid

# The library's names (FFmpeg's pix_fmt names without the "le" of the 16-bit
# formats) and wire numbers; FFMPEG_NAMES below takes FFmpeg's spelling too.
FORMATS: Dict[str, int] = {"nv12": 1, "yuv420p": 2, "p010": 3, "bgra": 4, "p016": 5, "yuv444p": 6,
                           "yuv444p16": 7, "rgba": 8, "bgr0": 9, "rgb0": 10, "p012": 11, "nv16": 12,
                           "p210": 13, "p212": 14, "p216": 15, "yuv422p": 16, "yuv420p10": 17,
                           "yuv422p10": 18, "yuv444p10": 19, "yuv444p10msb": 20, "yuv444p12msb": 21,
                           "yuva420p": 22}
FORMAT_NAMES: Dict[int, str] = {v: k for k, v in FORMATS.items()}
MEMORY: Dict[str, int] = {"auto": 0, "host": 1, "cuda": 2}
MEMORY_NAMES: Dict[int, str] = {1: "host", 2: "cuda", 0: "auto"}
POLICIES: Dict[str, int] = {"drop_oldest": 0, "strict_wait": 1}
POLICY_NAMES: Dict[int, str] = {v: k for k, v in POLICIES.items()}
MODES: Dict[str, int] = {"sequential": 0, "latest": 1}


class PlaneSpec(NamedTuple):
    """How one plane of a format relates to the frame's size."""

    name: str
    x_sub: int
    y_sub: int
    channels: int
    itemsize: int


_Y8, _Y16 = PlaneSpec("Y", 1, 1, 1, 1), PlaneSpec("Y", 1, 1, 1, 2)


def _yuv(x_sub: int, y_sub: int, itemsize: int) -> List[PlaneSpec]:
    """Three planes Y, U, V with chroma subsampled by x_sub, y_sub."""
    return [PlaneSpec("Y", 1, 1, 1, itemsize), PlaneSpec("U", x_sub, y_sub, 1, itemsize),
            PlaneSpec("V", x_sub, y_sub, 1, itemsize)]


_PLANES: Dict[int, List[PlaneSpec]] = {
    1: [_Y8, PlaneSpec("UV", 2, 2, 2, 1)],
    2: _yuv(2, 2, 1),
    3: [_Y16, PlaneSpec("UV", 2, 2, 2, 2)],
    4: [PlaneSpec("BGRA", 1, 1, 4, 1)],
    5: [_Y16, PlaneSpec("UV", 2, 2, 2, 2)],
    6: _yuv(1, 1, 1),
    7: _yuv(1, 1, 2),
    8: [PlaneSpec("RGBA", 1, 1, 4, 1)],
    9: [PlaneSpec("BGR0", 1, 1, 4, 1)],
    10: [PlaneSpec("RGB0", 1, 1, 4, 1)],
    11: [_Y16, PlaneSpec("UV", 2, 2, 2, 2)],
    12: [_Y8, PlaneSpec("UV", 2, 1, 2, 1)],
    13: [_Y16, PlaneSpec("UV", 2, 1, 2, 2)],
    14: [_Y16, PlaneSpec("UV", 2, 1, 2, 2)],
    15: [_Y16, PlaneSpec("UV", 2, 1, 2, 2)],
    16: _yuv(2, 1, 1),
    17: _yuv(2, 2, 2),
    18: _yuv(2, 1, 2),
    19: _yuv(1, 1, 2),
    20: _yuv(1, 1, 2),
    21: _yuv(1, 1, 2),
    22: _yuv(2, 2, 1) + [PlaneSpec("A", 1, 1, 1, 1)],
}

# FFmpeg's pix_fmt names where they differ from ours: "le" after the 16-bit formats.
FFMPEG_NAMES: Dict[str, int] = {name + "le": code for name, code in FORMATS.items() if _PLANES[code][0].itemsize == 2}

# 16-bit formats: (significant bits, left shift) of a sample. The shift puts
# the bits high (P010 and the "msb" formats: low bits zero); 0 keeps them low
# (yuv420p10, yuv422p10, yuv444p10: high bits zero).
SAMPLE_BITS: Dict[int, Tuple[int, int]] = {
    3: (10, 6), 5: (16, 0), 7: (16, 0), 11: (12, 4), 13: (10, 6), 14: (12, 4), 15: (16, 0),
    17: (10, 0), 18: (10, 0), 19: (10, 0), 20: (10, 6), 21: (12, 4),
}


class PlaneGeometry(NamedTuple):
    """One plane of a frame: its array shape and bytes."""

    name: str
    rows: int
    columns: int
    channels: int
    itemsize: int

    @property
    def row_bytes(self) -> int:
        return self.columns * self.channels * self.itemsize

    @property
    def shape(self) -> Tuple[int, ...]:
        if self.channels == 1:
            return (self.rows, self.columns)
        return (self.rows, self.columns, self.channels)

    @property
    def typestr(self) -> str:
        return "|u1" if self.itemsize == 1 else "<u%d" % self.itemsize

    @property
    def dtype_name(self) -> str:
        return "uint%d" % (8 * self.itemsize)


def geometry(format_code: int, width: int, height: int) -> List[PlaneGeometry]:
    """Every plane's geometry for a format and size (as libcuframes lays them out)."""
    return [
        PlaneGeometry(
            spec.name,
            -(-height // spec.y_sub),
            -(-width // spec.x_sub),
            spec.channels,
            spec.itemsize,
        )
        for spec in _PLANES[format_code]
    ]


def _lookup(table: Dict[str, int], value: Union[str, int], what: str) -> int:
    if isinstance(value, bool):
        raise invalid("%s must be a name, not a bool" % what)
    if isinstance(value, int):
        if value in table.values():
            return value
        raise invalid("unknown %s %d (known: %s)" % (what, value, ", ".join(table)))
    if isinstance(value, str):
        key = value.lower().replace("-", "_")
        if key in table:
            return table[key]
        raise invalid("unknown %s '%s' (known: %s)" % (what, value, ", ".join(table)))
    raise invalid("%s must be a str, not %s" % (what, type(value).__name__))


def format_code(value: Union[str, int]) -> int:
    """A format's wire number, from our name, FFmpeg's (``"p010le"``) or the number."""
    if isinstance(value, str) and value.lower() in FFMPEG_NAMES:
        return FFMPEG_NAMES[value.lower()]
    return _lookup(FORMATS, value, "pixel format")


def memory_code(value: Union[str, int]) -> int:
    return _lookup(MEMORY, value, "memory")


def policy_code(value: Union[str, int]) -> int:
    return _lookup(POLICIES, value, "policy")


def mode_code(value: Union[str, int]) -> int:
    return _lookup(MODES, value, "mode")
