"""Pixel formats, policies, memory kinds and modes: names <-> C numbers, plane geometry."""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Tuple, Union

from ._errors import invalid

FORMATS: Dict[str, int] = {"nv12": 1, "yuv420p": 2, "p010": 3, "bgra": 4, "p016": 5, "yuv444p": 6,
                           "yuv444p16": 7, "rgba": 8, "bgr0": 9, "rgb0": 10}
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


_PLANES: Dict[int, List[PlaneSpec]] = {
    1: [PlaneSpec("Y", 1, 1, 1, 1), PlaneSpec("UV", 2, 2, 2, 1)],
    2: [PlaneSpec("Y", 1, 1, 1, 1), PlaneSpec("U", 2, 2, 1, 1), PlaneSpec("V", 2, 2, 1, 1)],
    3: [PlaneSpec("Y", 1, 1, 1, 2), PlaneSpec("UV", 2, 2, 2, 2)],
    4: [PlaneSpec("BGRA", 1, 1, 4, 1)],
    5: [PlaneSpec("Y", 1, 1, 1, 2), PlaneSpec("UV", 2, 2, 2, 2)],
    6: [PlaneSpec("Y", 1, 1, 1, 1), PlaneSpec("U", 1, 1, 1, 1), PlaneSpec("V", 1, 1, 1, 1)],
    7: [PlaneSpec("Y", 1, 1, 1, 2), PlaneSpec("U", 1, 1, 1, 2), PlaneSpec("V", 1, 1, 1, 2)],
    8: [PlaneSpec("RGBA", 1, 1, 4, 1)],
    9: [PlaneSpec("BGR0", 1, 1, 4, 1)],
    10: [PlaneSpec("RGB0", 1, 1, 4, 1)],
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
    return _lookup(FORMATS, value, "pixel format")


def memory_code(value: Union[str, int]) -> int:
    return _lookup(MEMORY, value, "memory")


def policy_code(value: Union[str, int]) -> int:
    return _lookup(POLICIES, value, "policy")


def mode_code(value: Union[str, int]) -> int:
    return _lookup(MODES, value, "mode")
