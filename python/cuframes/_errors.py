"""Exceptions: one class per cuframes status, all subclasses of CuframesError."""

from __future__ import annotations

from typing import Dict, Optional, Type

# The C API's status numbers (cuframes.h, docs/c-api.md); they never change.
OK = 0
ERR_INVALID_ARGUMENT = -1
ERR_NOT_FOUND = -2
ERR_ALREADY_EXISTS = -3
ERR_PROTOCOL = -4
ERR_FORMAT = -5
ERR_TOO_MANY = -6
ERR_TIMEOUT = -7
ERR_DISCONNECTED = -8
ERR_OVERWRITTEN = -9
ERR_IO = -10
ERR_CUDA = -11
ERR_UNSUPPORTED = -12
ERR_CORRUPT = -13
ERR_PERMISSION = -14
ERR_INTERNAL = -15
ERR_EXHAUSTED = -16

STATUS_NAMES: Dict[int, str] = {
    OK: "CUFRAMES_OK",
    ERR_INVALID_ARGUMENT: "CUFRAMES_ERR_INVALID_ARGUMENT",
    ERR_NOT_FOUND: "CUFRAMES_ERR_NOT_FOUND",
    ERR_ALREADY_EXISTS: "CUFRAMES_ERR_ALREADY_EXISTS",
    ERR_PROTOCOL: "CUFRAMES_ERR_PROTOCOL",
    ERR_FORMAT: "CUFRAMES_ERR_FORMAT",
    ERR_TOO_MANY: "CUFRAMES_ERR_TOO_MANY",
    ERR_TIMEOUT: "CUFRAMES_ERR_TIMEOUT",
    ERR_DISCONNECTED: "CUFRAMES_ERR_DISCONNECTED",
    ERR_OVERWRITTEN: "CUFRAMES_ERR_OVERWRITTEN",
    ERR_IO: "CUFRAMES_ERR_IO",
    ERR_CUDA: "CUFRAMES_ERR_CUDA",
    ERR_UNSUPPORTED: "CUFRAMES_ERR_UNSUPPORTED",
    ERR_CORRUPT: "CUFRAMES_ERR_CORRUPT",
    ERR_PERMISSION: "CUFRAMES_ERR_PERMISSION",
    ERR_INTERNAL: "CUFRAMES_ERR_INTERNAL",
    ERR_EXHAUSTED: "CUFRAMES_ERR_EXHAUSTED",
}


class CuframesError(Exception):
    """A cuframes call failed.

    ``status`` is the C API's status (a negative ``CUFRAMES_ERR_*`` number,
    see ``status_name``), ``message`` the detailed text (for library calls:
    ``cuframes_last_error()``, e.g. "no publisher for key 'cam1'").
    Subclasses name the status (``NotFoundError``, ``TimeoutError_`` ...); a
    few also derive from the matching built-in exception (``ValueError``,
    ``TimeoutError``, ``ConnectionError``) so generic handlers catch them.
    """

    status: int
    message: str

    def __init__(self, status: int, message: str = "", description: Optional[str] = None) -> None:
        self.status = status
        self.message = message or (description or "")
        self.description = description or STATUS_NAMES.get(status, "unknown status")
        super().__init__(status, self.message)

    @property
    def status_name(self) -> str:
        """The status as its C name, e.g. ``"CUFRAMES_ERR_NOT_FOUND"``."""
        return STATUS_NAMES.get(self.status, "CUFRAMES_STATUS_%d" % self.status)

    def __str__(self) -> str:
        return "%s [%s]" % (self.message or self.description, self.status_name)

    def __reduce__(self):  # picklable (e.g. across multiprocessing)
        return (_rebuild, (type(self), self.status, self.message, self.description))


def _rebuild(cls, status, message, description):
    return cls(status, message, description)


class InvalidArgumentError(CuframesError, ValueError):
    """CUFRAMES_ERR_INVALID_ARGUMENT: a bad argument (key, size, shape, dtype, option)."""


class NotFoundError(CuframesError, LookupError):
    """CUFRAMES_ERR_NOT_FOUND: no publisher exists for the key."""


class AlreadyExistsError(CuframesError):
    """CUFRAMES_ERR_ALREADY_EXISTS: a live publisher already owns the key."""


class ProtocolError(CuframesError):
    """CUFRAMES_ERR_PROTOCOL: protocol violation or version mismatch."""


class FormatError(CuframesError, ValueError):
    """CUFRAMES_ERR_FORMAT: pixel format unknown or not supported here."""


class TooManyError(CuframesError):
    """CUFRAMES_ERR_TOO_MANY: the publisher already serves 31 subscribers."""


class TimeoutError_(CuframesError, TimeoutError):
    """CUFRAMES_ERR_TIMEOUT: a wait ran out of time (also a built-in ``TimeoutError``)."""


class DisconnectedError(CuframesError, ConnectionError):
    """CUFRAMES_ERR_DISCONNECTED: the publisher died or dropped this subscriber
    (a clean publisher shutdown ends iteration instead)."""


class OverwrittenError(CuframesError):
    """CUFRAMES_ERR_OVERWRITTEN: a leased frame was overwritten (DROP_OLDEST lapped it)."""


class IOError_(CuframesError):
    """CUFRAMES_ERR_IO: an operating-system call failed."""


class CudaError(CuframesError):
    """CUFRAMES_ERR_CUDA: a CUDA driver call failed."""


class UnsupportedError(CuframesError):
    """CUFRAMES_ERR_UNSUPPORTED: not available in this build or on this machine."""


class CorruptError(CuframesError):
    """CUFRAMES_ERR_CORRUPT: shared state from a peer cannot be trusted."""


class PermissionError_(CuframesError, PermissionError):
    """CUFRAMES_ERR_PERMISSION: access denied by the operating system."""


class InternalError(CuframesError):
    """CUFRAMES_ERR_INTERNAL: a bug inside the library (a caught panic)."""


class ExhaustedError(CuframesError):
    """CUFRAMES_ERR_EXHAUSTED: a resource ran out (descriptors, memory, space
    in /dev/shm, GPU memory); the message says which, on which side, and the
    limit."""


class ClosedError(InvalidArgumentError):
    """Use of a frame, publisher or subscriber after ``close()``
    (status CUFRAMES_ERR_INVALID_ARGUMENT, also a ``ValueError`` like I/O on a
    closed file)."""


class LibraryNotFoundError(ImportError):
    """libcuframes could not be loaded; the message lists where it looked."""


_BY_STATUS: Dict[int, Type[CuframesError]] = {
    ERR_INVALID_ARGUMENT: InvalidArgumentError,
    ERR_NOT_FOUND: NotFoundError,
    ERR_ALREADY_EXISTS: AlreadyExistsError,
    ERR_PROTOCOL: ProtocolError,
    ERR_FORMAT: FormatError,
    ERR_TOO_MANY: TooManyError,
    ERR_TIMEOUT: TimeoutError_,
    ERR_DISCONNECTED: DisconnectedError,
    ERR_OVERWRITTEN: OverwrittenError,
    ERR_IO: IOError_,
    ERR_CUDA: CudaError,
    ERR_UNSUPPORTED: UnsupportedError,
    ERR_CORRUPT: CorruptError,
    ERR_PERMISSION: PermissionError_,
    ERR_INTERNAL: InternalError,
    ERR_EXHAUSTED: ExhaustedError,
}


def error_for(status: int, message: str, description: Optional[str] = None) -> CuframesError:
    """The exception for ``status`` (its subclass, or CuframesError for an unknown number)."""
    return _BY_STATUS.get(status, CuframesError)(status, message, description)


def invalid(message: str) -> InvalidArgumentError:
    """A Python-side argument check failed (status CUFRAMES_ERR_INVALID_ARGUMENT)."""
    return InvalidArgumentError(ERR_INVALID_ARGUMENT, message, "invalid argument")
