"""The few CUDA driver calls the bindings make themselves (ctypes over libcuda).

libcuframes orders a subscriber's stream after each publish (it waits on the
publisher's interprocess event before handing a frame out). What the C API
leaves to its caller is done here: ordering *other* streams after a frame
(``Frame.wait``), synchronising the streams a frame was used on before its
slot is released, and finding the device a context belongs to. libcuda is
loaded only when CUDA frames are seen, so host-memory users never need it.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Optional

from ._errors import ERR_CUDA, ERR_UNSUPPORTED, CudaError, UnsupportedError

CU_EVENT_DISABLE_TIMING = 0x2
CU_STREAM_LEGACY = 1
CU_STREAM_PER_THREAD = 2

_lock = threading.Lock()
_driver: Optional[ctypes.CDLL] = None
_load_error: Optional[str] = None

_v = ctypes.c_void_p
_PROTOTYPES = {
    "cuInit": [ctypes.c_uint],
    "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuCtxGetCurrent": [ctypes.POINTER(_v)],
    "cuCtxPushCurrent_v2": [_v],
    "cuCtxPopCurrent_v2": [ctypes.POINTER(_v)],
    "cuCtxGetDevice": [ctypes.POINTER(ctypes.c_int)],
    "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(_v), ctypes.c_int],
    "cuDevicePrimaryCtxRelease_v2": [ctypes.c_int],
    "cuEventCreate": [ctypes.POINTER(_v), ctypes.c_uint],
    "cuEventRecord": [_v, _v],
    "cuEventSynchronize": [_v],
    "cuEventDestroy_v2": [_v],
    "cuStreamWaitEvent": [_v, _v, ctypes.c_uint],
    "cuStreamSynchronize": [_v],
}


def driver() -> ctypes.CDLL:
    """libcuda, initialised; UnsupportedError when there is no CUDA driver."""
    global _driver, _load_error
    with _lock:
        if _driver is not None:
            return _driver
        if _load_error is None:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
                for name, argtypes in _PROTOTYPES.items():
                    fn = getattr(lib, name)
                    fn.restype = ctypes.c_int
                    fn.argtypes = argtypes
                result = lib.cuInit(0)
                if result != 0:
                    raise OSError("cuInit failed: %s" % _describe(lib, result))
                _driver = lib
                return lib
            except (OSError, AttributeError) as e:
                _load_error = str(e)
        raise UnsupportedError(ERR_UNSUPPORTED, "no usable CUDA driver (libcuda.so.1): %s" % _load_error)


def _describe(lib: ctypes.CDLL, result: int) -> str:
    name = ctypes.c_char_p()
    text = ctypes.c_char_p()
    try:
        lib.cuGetErrorName(result, ctypes.byref(name))
        lib.cuGetErrorString(result, ctypes.byref(text))
    except Exception:  # pragma: no cover
        pass
    return "%s (%d): %s" % (
        (name.value or b"CUDA_ERROR").decode(),
        result,
        (text.value or b"").decode(),
    )


def check(result: int, what: str) -> None:
    if result != 0:
        raise CudaError(ERR_CUDA, "%s: %s" % (what, _describe(driver(), result)))


def stream_handle(stream: Any) -> int:
    """A CUstream handle (int) for ``stream``: an int, a PyTorch stream
    (``.cuda_stream``), a CuPy stream (``.ptr``), anything with
    ``__cuda_stream__``, or None (the legacy default stream, 0)."""
    if stream is None:
        return 0
    if isinstance(stream, bool):
        raise TypeError("a CUDA stream, not a bool")
    if isinstance(stream, int):
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        return int(value[1])
    if isinstance(stream, ctypes.c_void_p):
        return stream.value or 0
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        value = getattr(stream, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    raise TypeError(
        "cannot tell the CUstream of %r: pass an int handle, a torch.cuda.Stream, a cupy Stream "
        "or an object with __cuda_stream__" % (stream,)
    )


def context_handle(context: Any) -> int:
    """A CUcontext handle (int) from an int, a ctypes pointer or None (0)."""
    if context is None:
        return 0
    if isinstance(context, int):
        return context
    if isinstance(context, ctypes.c_void_p):
        return context.value or 0
    raise TypeError("cuda_context must be an int CUcontext handle")


class Context:
    """A CUDA context to run driver calls in (``with ctx: ...`` pushes it).

    ``resolve`` picks the context the way libcuframes does for the same
    arguments, so the bindings' own calls run in the context the library
    mapped the frames in.
    """

    def __init__(self, handle: int, device: int, retained_ordinal: Optional[int]) -> None:
        self.handle = handle
        self.device = device
        self._retained = retained_ordinal

    @classmethod
    def resolve(cls, explicit: int, ordinal: int) -> "Context":
        lib = driver()
        if explicit:
            given = cls(explicit, 0, None)
            with given:
                given.device = _current_device()
            return given
        current = _v()
        check(lib.cuCtxGetCurrent(ctypes.byref(current)), "cuCtxGetCurrent")
        if current.value and ordinal < 0:
            return cls(current.value, _current_device(), None)
        dev = ctypes.c_int()
        check(lib.cuDeviceGet(ctypes.byref(dev), max(ordinal, 0)), "cuDeviceGet")
        ctx = _v()
        check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev.value), "cuDevicePrimaryCtxRetain")
        out = cls(ctx.value or 0, 0, dev.value)
        with out:
            out.device = _current_device()
        return out

    def __enter__(self) -> "Context":
        check(driver().cuCtxPushCurrent_v2(_v(self.handle)), "cuCtxPushCurrent")
        return self

    def __exit__(self, *exc: Any) -> None:
        popped = _v()
        driver().cuCtxPopCurrent_v2(ctypes.byref(popped))

    def close(self) -> None:
        if self._retained is not None and _driver is not None:
            _driver.cuDevicePrimaryCtxRelease_v2(self._retained)
            self._retained = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    # Streams and events, in this context.

    def event_after(self, stream: int) -> int:
        """A new event recorded on ``stream`` (destroy with ``destroy_event``)."""
        lib = driver()
        with self:
            event = _v()
            check(lib.cuEventCreate(ctypes.byref(event), CU_EVENT_DISABLE_TIMING), "cuEventCreate")
            result = lib.cuEventRecord(event, _v(stream))
            if result != 0:
                lib.cuEventDestroy_v2(event)
                check(result, "cuEventRecord")
        return event.value or 0

    def stream_wait(self, stream: int, event: int) -> None:
        with self:
            check(driver().cuStreamWaitEvent(_v(stream), _v(event), 0), "cuStreamWaitEvent")

    def event_synchronize(self, event: int) -> None:
        with self:
            check(driver().cuEventSynchronize(_v(event)), "cuEventSynchronize")

    def stream_synchronize(self, stream: int) -> None:
        with self:
            check(driver().cuStreamSynchronize(_v(stream)), "cuStreamSynchronize")

    def destroy_event(self, event: int) -> None:
        with self:
            driver().cuEventDestroy_v2(_v(event))


def _current_device() -> int:
    dev = ctypes.c_int()
    check(driver().cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
    return dev.value
