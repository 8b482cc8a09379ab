"""Builds the wheel with libcuframes inside it, so that one `pip install`
is all a user does (pyproject.toml holds the metadata).

From a source checkout (../Cargo.toml beside this directory) the build runs
`cargo build --release -p cuframes-capi` and puts the shared library into
the package as `cuframes/libcuframes.so.0.2`, where the bindings look first.
Building needs a Rust toolchain (cargo); installing the wheel needs nothing.
`CUFRAMES_WHEEL_LIBRARY=/path/to/libcuframes.so.0.2` bundles a library built
elsewhere instead, and `CUFRAMES_WHEEL_LIBRARY=none` builds a pure-Python
package that finds an installed libcuframes at run time.

The wheel is tagged for this platform only (`py3-none-linux_<arch>`): the
library is linked against this machine's glibc, so no manylinux tag is
claimed. Python versions do not matter (ctypes, no extension module).
`scripts/package-wheel.sh` makes the wheel users install: it builds the
library against glibc 2.28 (cargo zigbuild), bundles it with
CUFRAMES_WHEEL_LIBRARY, names the platform with
`CUFRAMES_WHEEL_PLAT=manylinux_2_28_<arch>`, and has `auditwheel show`
confirm the claim.
"""

import glob
import os
import shutil
import subprocess
import sysconfig

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70.1 (pyproject.toml asks for 77)
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# The SONAME (rust/cuframes-capi/build.rs), the name cuframes/_lib.py looks for.
LIBRARY = "libcuframes.so.0.2"


def _library_to_bundle():
    """The libcuframes to put into the package, or None for none."""
    chosen = os.environ.get("CUFRAMES_WHEEL_LIBRARY")
    if chosen == "none":
        return None
    if chosen:
        if not os.path.isfile(chosen):
            raise SystemExit("CUFRAMES_WHEEL_LIBRARY=%s: no such file" % chosen)
        return chosen
    manifest = os.path.join(REPO, "Cargo.toml")
    if not os.path.isfile(manifest):
        raise SystemExit(
            "cuframes: no Rust workspace at %s to build libcuframes from; set "
            "CUFRAMES_WHEEL_LIBRARY to a built libcuframes.so.0.2 (or to 'none')" % REPO
        )
    cargo = shutil.which("cargo")
    if not cargo:
        raise SystemExit(
            "cuframes: building the wheel compiles libcuframes and needs a Rust "
            "toolchain (https://rustup.rs); or set CUFRAMES_WHEEL_LIBRARY"
        )
    print("cuframes: cargo build --release --locked -p cuframes-capi")
    subprocess.run(
        [cargo, "build", "--release", "--locked", "-p", "cuframes-capi", "--manifest-path", manifest],
        check=True,
    )
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    if not os.path.isabs(target):
        target = os.path.join(REPO, target)
    return os.path.join(target, "release", "libcuframes_capi.so")


def _bundles() -> bool:
    return os.environ.get("CUFRAMES_WHEEL_LIBRARY") != "none"


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        library = _library_to_bundle()
        # A library left in the build tree by an earlier version would be
        # bundled beside this one (and found first): only this one goes in.
        for stale in glob.glob(os.path.join(self.build_lib, "cuframes", "libcuframes.so*")):
            os.remove(stale)
        if library:
            dest = os.path.join(self.build_lib, "cuframes", LIBRARY)
            self.copy_file(library, dest)
            # The release build keeps debug info (12 MB); the wheel need not.
            strip = shutil.which("strip")
            if strip:
                subprocess.run([strip, "--strip-unneeded", dest], check=True)


class PlatformDistribution(Distribution):
    """Not pure Python when it carries the library: platlib, a platform tag."""

    def has_ext_modules(self):
        return _bundles()


class PlatformWheel(bdist_wheel):
    def get_tag(self):
        if not _bundles():
            return super().get_tag()
        plat = os.environ.get("CUFRAMES_WHEEL_PLAT")
        if plat:
            # Only a library built for it may claim it: package-wheel.sh
            # checks the claim with `auditwheel show`.
            return "py3", "none", plat
        return "py3", "none", sysconfig.get_platform().replace("-", "_").replace(".", "_")


setup(distclass=PlatformDistribution, cmdclass={"build_py": BuildWithLibrary, "bdist_wheel": PlatformWheel})
