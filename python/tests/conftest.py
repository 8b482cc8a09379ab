"""Shared fixtures: a private runtime directory, unique keys, the cuframes CLI."""

import os
import shutil
import sys
import tempfile
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

try:  # the installed package, else the source tree (PYTHONPATH-free runs)
    __import__("cuframes")
except ImportError as e:
    if type(e).__name__ == "LibraryNotFoundError":
        raise
    sys.path.insert(0, os.path.dirname(HERE))


def find_cli():
    """The `cuframes` command: $CUFRAMES_BIN, else a Cargo build in the repository."""
    explicit = os.environ.get("CUFRAMES_BIN")
    if explicit:
        return explicit
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    for profile in ("debug", "release"):
        path = os.path.join(target, profile, "cuframes")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return shutil.which("cuframes")


@pytest.fixture(autouse=True)
def runtime_dir(monkeypatch):
    path = tempfile.mkdtemp(prefix="cuframes-py-")
    monkeypatch.setenv("CUFRAMES_RUNTIME_DIR", path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def key():
    return "py-" + uuid.uuid4().hex[:12]


@pytest.fixture
def cli():
    path = find_cli()
    if not path:
        pytest.skip("the cuframes CLI is not built (cargo build -p cuframes-cli, or set CUFRAMES_BIN)")
    return path
