"""The library's messages (a fallback it took, a file it skipped, stale state
it removed) in Python's ``logging``: the ``"cuframes"`` logger, from the
moment the package is imported.

``log_to_python(False)`` sends them back to standard error (``cuframes:
<message>``, the library's default), ``log_to_python()`` here again;
``set_log_level`` says how much the library produces at all.
"""

from __future__ import annotations

import atexit
import logging
from typing import Any, Union

from . import _lib
from ._errors import invalid

logger = logging.getLogger("cuframes")

# cuframes_log_level -> logging level.
_LEVELS = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}


def _forward(_opaque: Any, level: int, message: bytes) -> None:
    # Called by libcuframes from any thread; an exception must not reach C.
    try:
        logger.log(_LEVELS.get(level, logging.WARNING), "%s", message.decode("utf-8", "replace"))
    except Exception:  # pragma: no cover - a handler that raises
        pass


# C holds this object's address while it is registered: a module global, so
# it is never collected.
_CALLBACK = _lib.LOG_CALLBACK(_forward)
_NULL = _lib.LOG_CALLBACK()  # NULL: the library's default, standard error


def log_to_python(enabled: bool = True) -> None:
    """Routes libcuframes' messages to ``logging.getLogger("cuframes")``
    (the default), or with ``False`` back to standard error. Once this
    returns, the previous sink gets no more messages."""
    _lib.check(_lib.lib.cuframes_set_log_callback(_CALLBACK if enabled else _NULL, None))


def set_log_level(level: Union[int, str]) -> None:
    """The least important messages libcuframes produces: a ``logging``
    level (``logging.DEBUG``) or its name (``"debug"``, ``"info"``, the
    default, ``"warning"``, ``"error"``). Messages below it are never made,
    whatever the ``"cuframes"`` logger's own level."""
    if isinstance(level, str):
        named = logging.getLevelName(level.upper())
        if not isinstance(named, int):
            raise invalid("unknown log level %r (debug, info, warning or error)" % level)
        level = named
    if isinstance(level, bool) or not isinstance(level, int):
        raise invalid("log level must be a logging level or its name, not %r" % (level,))
    if level <= logging.DEBUG:
        code = 3
    elif level <= logging.INFO:
        code = 2
    elif level <= logging.WARNING:
        code = 1
    else:
        code = 0
    _lib.check(_lib.lib.cuframes_set_log_level(code))


def _at_exit() -> None:
    # Library threads may still run while the interpreter shuts down: they
    # must not call into it then.
    _lib.lib.cuframes_set_log_callback(_NULL, None)


log_to_python()
atexit.register(_at_exit)
