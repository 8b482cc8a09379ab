"""DLPack, in ctypes: capsules that hand a plane to NumPy, PyTorch, CuPy
... with no copy, and reading the capsules other libraries give us.

Exports keep the frame's lease: each capsule's manager context holds a
reference that its deleter drops, so a tensor made with ``from_dlpack``
keeps the slot leased until the tensor is freed. Both capsule kinds of the
DLPack spec are made: the legacy ``"dltensor"`` (``DLManagedTensor``) and,
for consumers that pass ``max_version >= (1, 0)``, ``"dltensor_versioned"``
(``DLManagedTensorVersioned``, with the read-only flag for host frames).
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13
KDL_INT = 0
KDL_UINT = 1
FLAG_READ_ONLY = 1 << 0

LEGACY_NAME = b"dltensor"
LEGACY_USED = b"used_dltensor"
VERSIONED_NAME = b"dltensor_versioned"
VERSIONED_USED = b"used_dltensor_versioned"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER),
]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# Live exports, by manager_ctx key: the ctypes structs (their memory is what
# the consumer holds), the shape and stride arrays, and the release callback.
_exports: Dict[int, Tuple[Any, Any, Any, Callable[[], None]]] = {}
_exports_lock = threading.Lock()
_keys = itertools.count(1)


def _finish(address: int, versioned: bool) -> None:
    """Runs a managed tensor's deleter once (from its address)."""
    struct = DLManagedTensorVersioned if versioned else DLManagedTensor
    key = struct.from_address(address).manager_ctx
    with _exports_lock:
        entry = _exports.pop(key or 0, None)
    if entry is not None:
        entry[3]()


def _legacy_deleter(address: Optional[int]) -> None:
    try:
        if address:
            _finish(address, False)
    except Exception:  # pragma: no cover - must not raise into C
        pass


def _versioned_deleter(address: Optional[int]) -> None:
    try:
        if address:
            _finish(address, True)
    except Exception:  # pragma: no cover
        pass


# Kept for the life of the module: C holds pointers to them.
_LEGACY_DELETER = DELETER(_legacy_deleter)
_VERSIONED_DELETER = DELETER(_versioned_deleter)

CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _capsule_destructor(capsule: Optional[int]) -> None:
    # A capsule no consumer took (still named "dltensor[_versioned]"): the
    # producer runs the deleter (DLPack spec). A consumed one was renamed
    # "used_..." and its consumer calls the deleter.
    try:
        if not capsule:
            return
        for name, versioned in ((LEGACY_NAME, False), (VERSIONED_NAME, True)):
            if _api.PyCapsule_IsValid(capsule, name):
                address = _api.PyCapsule_GetPointer(capsule, name)
                if address:
                    _finish(address, versioned)
                return
    except Exception:  # pragma: no cover
        pass


_CAPSULE_DESTRUCTOR = CAPSULE_DESTRUCTOR(_capsule_destructor)
_DESTRUCTOR_ADDRESS = ctypes.cast(_CAPSULE_DESTRUCTOR, ctypes.c_void_p).value


def export(
    data: int,
    device_type: int,
    device_id: int,
    shape: Sequence[int],
    strides_elements: Sequence[int],
    itemsize: int,
    read_only: bool,
    versioned: bool,
    on_delete: Callable[[], None],
) -> Any:
    """A DLPack capsule over ``data``; ``on_delete`` runs once when the
    consumer (or an unconsumed capsule's destructor) lets go."""
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * ndim)(*shape)
    strides_arr = (ctypes.c_int64 * ndim)(*strides_elements)
    key = next(_keys)
    if versioned:
        managed: Any = DLManagedTensorVersioned()
        managed.version = DLPackVersion(1, 0)
        managed.deleter = _VERSIONED_DELETER
        managed.flags = FLAG_READ_ONLY if read_only else 0
        name = VERSIONED_NAME
    else:
        managed = DLManagedTensor()
        managed.deleter = _LEGACY_DELETER
        name = LEGACY_NAME
    managed.manager_ctx = key
    tensor = managed.dl_tensor
    tensor.data = data
    tensor.device = DLDevice(device_type, device_id)
    tensor.ndim = ndim
    tensor.dtype = DLDataType(KDL_UINT, itemsize * 8, 1)
    tensor.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    tensor.byte_offset = 0
    with _exports_lock:
        _exports[key] = (managed, shape_arr, strides_arr, on_delete)
    try:
        return _api.PyCapsule_New(ctypes.addressof(managed), name, _DESTRUCTOR_ADDRESS)
    except BaseException:
        with _exports_lock:
            _exports.pop(key, None)
        on_delete()
        raise


def live_exports() -> int:
    """How many capsules (consumed or not) still hold a frame (for tests)."""
    with _exports_lock:
        return len(_exports)


class Imported:
    """What a foreign ``__dlpack__`` capsule describes; ``close()`` hands it
    back (calls its deleter) exactly once."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule
        self._address = 0
        self._versioned = False
        address = ctypes.c_void_p(id(capsule))
        if _api.PyCapsule_IsValid(address, VERSIONED_NAME):
            self._versioned = True
            self._address = _api.PyCapsule_GetPointer(address, VERSIONED_NAME)
            managed: Any = DLManagedTensorVersioned.from_address(self._address)
            if managed.version.major != 1:
                self.close()
                raise BufferError("DLPack major version %d is not supported" % managed.version.major)
            self.read_only = bool(managed.flags & FLAG_READ_ONLY)
            _api.PyCapsule_SetName(address, VERSIONED_USED)
        elif _api.PyCapsule_IsValid(address, LEGACY_NAME):
            self._address = _api.PyCapsule_GetPointer(address, LEGACY_NAME)
            managed = DLManagedTensor.from_address(self._address)
            self.read_only = False
            _api.PyCapsule_SetName(address, LEGACY_USED)
        else:
            raise BufferError("__dlpack__ did not return a 'dltensor' capsule")
        self._managed = managed
        tensor = managed.dl_tensor
        self.device_type = tensor.device.device_type
        self.device_id = tensor.device.device_id
        self.ndim = tensor.ndim
        self.shape = tuple(tensor.shape[i] for i in range(self.ndim))
        self.code = tensor.dtype.code
        self.bits = tensor.dtype.bits
        self.lanes = tensor.dtype.lanes
        self.itemsize = (self.bits * self.lanes + 7) // 8
        if tensor.strides:
            self.strides_bytes: Tuple[int, ...] = tuple(tensor.strides[i] * self.itemsize for i in range(self.ndim))
        else:
            self.strides_bytes = _c_strides(self.shape, self.itemsize)
        self.data = (tensor.data or 0) + tensor.byte_offset

    def close(self) -> None:
        if self._address:
            address, self._address = self._address, 0
            managed = self._managed
            deleter = managed.deleter
            if deleter:
                deleter(address)
        self._capsule = None


def _c_strides(shape: Sequence[int], itemsize: int) -> Tuple[int, ...]:
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))
