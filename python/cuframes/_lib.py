"""Finding and loading libcuframes, and the C API's declarations in ctypes.

The structs below mirror include/cuframes.h field by field (the header is the
contract, docs/c-api.md); ``_check_layout`` compares their sizes with the
values the header implies on this platform. Each begins with ``struct_size``,
which a new instance sets to its ``ctypes.sizeof`` (docs/c-api.md, "ABI
policy"), as a C caller does with ``sizeof``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import shutil
import subprocess
from typing import List, Optional, Tuple

from ._errors import OK, LibraryNotFoundError, error_for

MAX_PLANES = 4

# The SONAME of the library series these bindings are for
# (rust/cuframes-capi/build.rs; python/setup.py bundles it under this name).
SONAME = "libcuframes.so.0.2"

c_status = ctypes.c_int32
c_format = ctypes.c_uint32
c_memory = ctypes.c_uint32
c_policy = ctypes.c_uint32
c_mode = ctypes.c_uint32
c_log_level = ctypes.c_uint32

# cuframes_log_callback: (opaque, level, message) -> void.
LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, c_log_level, ctypes.c_char_p)


class _Sized(ctypes.Structure):
    """A struct of the C API: ``struct_size`` is set on creation."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.struct_size = ctypes.sizeof(self)


class PublisherConfig(_Sized):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("key", ctypes.c_char_p),
        ("format", c_format),
        ("width", ctypes.c_uint32),
        ("height", ctypes.c_uint32),
        ("ring_size", ctypes.c_uint32),
        ("policy", c_policy),
        ("ack_timeout_ms", ctypes.c_uint32),
        ("memory", c_memory),
        ("fps_num", ctypes.c_uint32),
        ("fps_den", ctypes.c_uint32),
        ("cuda_context", ctypes.c_void_p),
        ("cuda_stream", ctypes.c_void_p),
        ("runtime_dir", ctypes.c_char_p),
        ("external_slots", ctypes.POINTER(ctypes.c_uint64)),
        ("group", ctypes.c_char_p),
        ("cuda_device", ctypes.c_int32),
        ("startup_timeout_ms", ctypes.c_uint32),
        ("cuda_share", ctypes.c_uint32),
        ("v1_peers", ctypes.c_uint32),
        ("log_callback", LOG_CALLBACK),
        ("log_opaque", ctypes.c_void_p),
    ]


class StreamInfo(_Sized):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("format", c_format),
        ("width", ctypes.c_uint32),
        ("height", ctypes.c_uint32),
        ("ring_size", ctypes.c_uint32),
        ("policy", c_policy),
        ("memory", c_memory),
        ("fps_num", ctypes.c_uint32),
        ("fps_den", ctypes.c_uint32),
        ("plane_count", ctypes.c_uint32),
        ("pitches", ctypes.c_size_t * MAX_PLANES),
        ("frame_size", ctypes.c_size_t),
        ("cuda_share", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
    ]


class Slot(_Sized):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("index", ctypes.c_uint32),
        ("memory", c_memory),
        ("plane_count", ctypes.c_uint32),
        ("planes", ctypes.c_void_p * MAX_PLANES),
        ("pitches", ctypes.c_size_t * MAX_PLANES),
    ]


class SubscriberConfig(_Sized):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("key", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("mode", c_mode),
        ("connect_timeout_ms", ctypes.c_uint32),
        ("cuda_context", ctypes.c_void_p),
        ("cuda_stream", ctypes.c_void_p),
        ("cuda_device", ctypes.c_int32),
        ("runtime_dir", ctypes.c_char_p),
        ("copy", ctypes.c_uint32),
        ("read_ahead", ctypes.c_uint32),
        ("log_callback", LOG_CALLBACK),
        ("log_opaque", ctypes.c_void_p),
    ]


class SubscriberStats(_Sized):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("received", ctypes.c_uint64),
        ("dropped", ctypes.c_uint64),
        ("overwritten", ctypes.c_uint64),
        ("publisher_shut_down", ctypes.c_uint32),
        ("copied", ctypes.c_uint64),
        ("torn", ctypes.c_uint64),
        ("queued", ctypes.c_uint64),
    ]


class FrameProps(_Sized):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("color_range", ctypes.c_uint8),
        ("color_primaries", ctypes.c_uint8),
        ("color_trc", ctypes.c_uint8),
        ("colorspace", ctypes.c_uint8),
        ("chroma_location", ctypes.c_uint8),
        ("pict_type", ctypes.c_uint8),
        ("flags", ctypes.c_uint8),
        ("reserved", ctypes.c_uint8),
        ("sar_num", ctypes.c_uint32),
        ("sar_den", ctypes.c_uint32),
        ("duration_ns", ctypes.c_int64),
    ]


class FrameInfo(_Sized):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("seq", ctypes.c_uint64),
        ("pts_ns", ctypes.c_int64),
        ("publish_mono_ns", ctypes.c_uint64),
        ("format", c_format),
        ("width", ctypes.c_uint32),
        ("height", ctypes.c_uint32),
        ("memory", c_memory),
        ("plane_count", ctypes.c_uint32),
        ("planes", ctypes.c_void_p * MAX_PLANES),
        ("pitches", ctypes.c_size_t * MAX_PLANES),
        ("row_bytes", ctypes.c_size_t * MAX_PLANES),
        ("rows", ctypes.c_uint32 * MAX_PLANES),
        ("lost_before", ctypes.c_uint64),
    ]


# Opaque handles are plain void pointers.
handle = ctypes.c_void_p
_P = ctypes.POINTER

# name: (restype, argtypes)
_PROTOTYPES = {
    "cuframes_strerror": (ctypes.c_char_p, [c_status]),
    "cuframes_last_error": (ctypes.c_char_p, []),
    "cuframes_version": (ctypes.c_char_p, []),
    "cuframes_protocol_version": (ctypes.c_uint32, []),
    "cuframes_validate_key": (c_status, [ctypes.c_char_p]),
    "cuframes_set_log_callback": (c_status, [LOG_CALLBACK, ctypes.c_void_p]),
    "cuframes_set_log_level": (c_status, [c_log_level]),
    "cuframes_publisher_config_init_sized": (c_status, [_P(PublisherConfig), ctypes.c_size_t]),
    "cuframes_publisher_create": (c_status, [_P(PublisherConfig), _P(handle)]),
    "cuframes_publisher_get_info": (c_status, [handle, _P(StreamInfo)]),
    "cuframes_publisher_wait_subscribers": (c_status, [handle, ctypes.c_uint32, ctypes.c_uint32]),
    "cuframes_publisher_publish": (
        c_status,
        [
            handle,
            c_memory,
            _P(ctypes.c_void_p),
            _P(ctypes.c_size_t),
            ctypes.c_uint32,
            ctypes.c_int64,
            _P(ctypes.c_uint64),
        ],
    ),
    "cuframes_publisher_acquire_slot": (c_status, [handle, _P(Slot)]),
    "cuframes_publisher_commit_slot": (c_status, [handle, ctypes.c_int64, _P(ctypes.c_uint64)]),
    "cuframes_publisher_flush": (c_status, [handle, ctypes.c_uint32]),
    "cuframes_publisher_subscriber_count": (ctypes.c_uint32, [handle]),
    "cuframes_publisher_destroy": (None, [handle]),
    "cuframes_subscriber_config_init_sized": (c_status, [_P(SubscriberConfig), ctypes.c_size_t]),
    "cuframes_subscriber_create": (c_status, [_P(SubscriberConfig), _P(handle)]),
    "cuframes_subscriber_warming_up": (ctypes.c_bool, []),
    "cuframes_subscriber_get_info": (c_status, [handle, _P(StreamInfo)]),
    "cuframes_subscriber_next": (c_status, [handle, ctypes.c_int32, _P(handle)]),
    "cuframes_subscriber_get_stats": (c_status, [handle, _P(SubscriberStats)]),
    "cuframes_subscriber_destroy": (None, [handle]),
    "cuframes_frame_get_info": (c_status, [handle, _P(FrameInfo)]),
    "cuframes_frame_is_intact": (c_status, [handle]),
    "cuframes_frame_is_copy": (c_status, [handle]),
    "cuframes_frame_get_props": (c_status, [handle, _P(FrameProps)]),
    "cuframes_publisher_set_frame_props": (c_status, [handle, _P(FrameProps)]),
    "cuframes_frame_get_side_data": (c_status, [handle, ctypes.c_size_t, _P(ctypes.c_uint32),
                                                _P(_P(ctypes.c_uint8)), _P(ctypes.c_size_t)]),
    "cuframes_publisher_add_side_data": (c_status, [handle, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t]),
    "cuframes_frame_release": (c_status, [handle]),
}

SUPPORTED_PROTOCOL = 1


def _package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def _candidates() -> List[Tuple[str, str]]:
    """(how it was found, what to give dlopen), in the order tried."""
    out: List[Tuple[str, str]] = []
    here = _package_dir()
    # 1. A copy inside the package (a packager may put one there).
    for path in sorted(glob.glob(os.path.join(here, "libcuframes.so*"))):
        out.append(("package directory", path))
    # 2. The dynamic linker's own search: LD_LIBRARY_PATH, the ldconfig
    #    cache, /usr/lib ... (scripts/install.sh into a system prefix).
    out.append(("dynamic linker search (LD_LIBRARY_PATH, ldconfig)", SONAME))
    found = ctypes.util.find_library("cuframes")
    if found:
        out.append(("ctypes.util.find_library", found))
    # 3. pkg-config (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig after install.sh).
    if shutil.which("pkg-config"):
        try:
            libdir = subprocess.run(
                ["pkg-config", "--variable=libdir", "cuframes"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            libdir = ""
        if libdir:
            out.append(("pkg-config libdir", os.path.join(libdir, SONAME)))
    # 4. A source checkout (PYTHONPATH=python in the repository): the Cargo
    #    build of cuframes-capi.
    repo = os.path.dirname(os.path.dirname(here))
    if os.path.isfile(os.path.join(repo, "Cargo.toml")) and os.path.isdir(
        os.path.join(repo, "rust", "cuframes-capi")
    ):
        target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(repo, "target")
        if not os.path.isabs(target):
            target = os.path.join(repo, target)
        for profile in ("release", "debug"):
            out.append(
                ("source checkout (cargo build -p cuframes-capi)", os.path.join(target, profile, "libcuframes_capi.so"))
            )
    # 5. The prefixes the README uses.
    for prefix in ("/usr/local", "/opt/cuframes"):
        out.append(("prefix " + prefix, os.path.join(prefix, "lib", SONAME)))
    return out


def _load() -> Tuple[ctypes.CDLL, str]:
    explicit = os.environ.get("CUFRAMES_LIBRARY")
    if explicit:
        try:
            return ctypes.CDLL(explicit), explicit
        except OSError as e:
            raise LibraryNotFoundError(
                "cuframes: CUFRAMES_LIBRARY=%s could not be loaded: %s" % (explicit, e)
            ) from None
    tried = []
    for how, path in _candidates():
        if os.path.isabs(path) and not os.path.exists(path):
            tried.append("  %s: %s (absent)" % (how, path))
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("  %s: %s (%s)" % (how, path, e))
    raise LibraryNotFoundError(
        "cuframes: libcuframes (the C library this package wraps) was not found.\n"
        "Install it with `scripts/install.sh --prefix PREFIX` from the cuframes repository and\n"
        "make it findable: LD_LIBRARY_PATH=PREFIX/lib, PKG_CONFIG_PATH=PREFIX/lib/pkgconfig,\n"
        "a system prefix (then ldconfig), or CUFRAMES_LIBRARY=/path/to/libcuframes.so.\n"
        "Tried:\n" + "\n".join(tried)
    )


def _bind(lib: ctypes.CDLL, path: str) -> None:
    missing = []
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    if missing:
        raise LibraryNotFoundError(
            "cuframes: %s is not a usable libcuframes (missing %s)" % (path, ", ".join(missing))
        )
    proto = lib.cuframes_protocol_version()
    if proto != SUPPORTED_PROTOCOL:
        raise LibraryNotFoundError(
            "cuframes: %s speaks protocol %d; this package supports %d" % (path, proto, SUPPORTED_PROTOCOL)
        )


def _check_layout() -> None:
    # Sizes implied by cuframes.h on an LP64 platform (x86_64, aarch64).
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return
    expected = {
        PublisherConfig: 128,
        SubscriberConfig: 88,
        StreamInfo: 88,
        Slot: 80,
        SubscriberStats: 64,
        FrameInfo: 176,
        FrameProps: 32,
    }
    for struct, size in expected.items():
        if ctypes.sizeof(struct) != size:  # pragma: no cover - a binding bug
            raise ImportError("cuframes: ctypes layout of %s is %d bytes, expected %d"
                              % (struct.__name__, ctypes.sizeof(struct), size))


_check_layout()
lib, library_path = _load()
_bind(lib, library_path)


def last_error() -> str:
    """The calling thread's last error message (``cuframes_last_error()``)."""
    raw = lib.cuframes_last_error()
    return raw.decode("utf-8", "replace") if raw else ""


def check(status: int, what: Optional[str] = None) -> None:
    """Raises the exception for a failed status (message from cuframes_last_error)."""
    if status == OK:
        return
    message = last_error()
    description = lib.cuframes_strerror(status)
    description = description.decode("utf-8", "replace") if description else None
    if what and not message:
        message = "%s failed" % what
    raise error_for(status, message, description)


def encode(text: Optional[str], what: str) -> Optional[bytes]:
    """A str argument as NUL-free UTF-8 bytes for a C string (None stays None)."""
    if text is None:
        return None
    if isinstance(text, os.PathLike):
        text = os.fspath(text)
    if isinstance(text, bytes):
        data = text
    elif isinstance(text, str):
        data = text.encode("utf-8")
    else:
        from ._errors import invalid

        raise invalid("%s must be a str, not %s" % (what, type(text).__name__))
    if b"\0" in data:
        from ._errors import invalid

        raise invalid("%s must not contain NUL characters" % what)
    return data


def version() -> str:
    """The loaded libcuframes's version, e.g. ``"0.2.0"``."""
    return lib.cuframes_version().decode()

