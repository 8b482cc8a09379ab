"""cuframes: zero-copy sharing of decoded video frames between processes.

Python bindings over libcuframes (the C API, ``cuframes.h``) with ctypes: no
compiler or build step, only the shared library (``scripts/install.sh``).

::

    import cuframes, torch

    with cuframes.Subscriber("cam1") as sub:
        for frame in sub:
            y = torch.from_dlpack(frame.planes[0])   # a view of the frame on the GPU
            ...

    pub = cuframes.Publisher("cam2", "nv12", 1920, 1080, memory="cuda")
    pub.publish([y_tensor, uv_tensor])

The library is found through ``CUFRAMES_LIBRARY`` (a path), a copy in this
package's directory, the dynamic linker (``LD_LIBRARY_PATH``, ldconfig),
``pkg-config cuframes``, a source checkout's ``target/`` or
``/usr/local/lib`` and ``/opt/cuframes/lib``; ``LibraryNotFoundError`` (an
``ImportError``) lists what was tried.

The library's messages go to ``logging.getLogger("cuframes")``;
``cuframes.log_to_python(False)`` sends them to standard error instead.
"""

from ._errors import (
    AlreadyExistsError,
    ClosedError,
    CorruptError,
    CudaError,
    CuframesError,
    DisconnectedError,
    ExhaustedError,
    FormatError,
    InternalError,
    InvalidArgumentError,
    IOError_,
    LibraryNotFoundError,
    NotFoundError,
    OverwrittenError,
    PermissionError_,
    ProtocolError,
    TimeoutError_,
    TooManyError,
    UnsupportedError,
)
from ._lib import library_path, version as library_version
from ._log import log_to_python, set_log_level
from ._formats import FORMATS
from ._frame import Frame, Plane
from ._subscriber import StreamInfo, Subscriber, SubscriberStats
from ._publisher import Publisher, Slot
from ._props import SIDE_DATA_CAPACITY, FrameProps, SideData, SideDataKind

__version__ = "0.2.0"

PROTOCOL_VERSION = 1


def validate_key(key: str) -> bool:
    """Whether ``key`` is a valid key (``^[a-zA-Z0-9_-]{1,63}$``)."""
    from . import _lib

    try:
        data = _lib.encode(key, "key")
    except InvalidArgumentError:
        return False
    return _lib.lib.cuframes_validate_key(data) == 0


__all__ = [
    "AlreadyExistsError",
    "ClosedError",
    "CorruptError",
    "CudaError",
    "CuframesError",
    "DisconnectedError",
    "FORMATS",
    "ExhaustedError",
    "FormatError",
    "Frame",
    "FrameProps",
    "SIDE_DATA_CAPACITY",
    "SideData",
    "SideDataKind",
    "IOError_",
    "InternalError",
    "InvalidArgumentError",
    "LibraryNotFoundError",
    "NotFoundError",
    "OverwrittenError",
    "PROTOCOL_VERSION",
    "PermissionError_",
    "Plane",
    "ProtocolError",
    "Publisher",
    "Slot",
    "StreamInfo",
    "Subscriber",
    "SubscriberStats",
    "TimeoutError_",
    "TooManyError",
    "UnsupportedError",
    "library_path",
    "library_version",
    "log_to_python",
    "set_log_level",
    "validate_key",
]
