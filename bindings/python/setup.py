"""Installs the weft package and records where libweft was when it was built,
so that an installed package finds the library without WEFT_LIBRARY
(README: Finding libweft). Recorded in weft/_found.py, in this order:

  WEFT_LIBRARY_DIR at build time       a folder holding libweft.so
  the source tree the package is in    <top>/.libs/libweft.so after a build
  pkg-config weft                      an installed weft's libdir

It also builds weft._core (weft/_core.c), the compiled path of the blocking
calls on numpy arrays, against weft.h found in this order: WEFT_INCLUDE_DIR,
the source tree (<top>/include), pkg-config weft's includedir. It needs a C
compiler and Python's headers (Debian: python3-dev). WEFT_PYTHON_EXT=0 at
build time leaves it out (the package then calls libweft through ctypes
only, several microseconds slower per call).

Metadata is in pyproject.toml.
"""

import os
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

here = os.path.dirname(os.path.abspath(__file__))


def found_libraries():
    found = []
    env = os.environ.get("WEFT_LIBRARY_DIR")
    if env:
        found.append(os.path.join(os.path.abspath(env), "libweft.so"))
    tree = os.path.join(os.path.dirname(os.path.dirname(here)), ".libs", "libweft.so")
    if os.path.exists(tree):
        found.append(tree)
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "weft"], check=True,
                                capture_output=True, text=True).stdout.strip()
        if libdir:
            found.append(os.path.join(libdir, "libweft.so.0"))
    except (OSError, subprocess.CalledProcessError):
        pass
    return [p for i, p in enumerate(found) if p not in found[:i]]


def found_include_dir():
    candidates = []
    env = os.environ.get("WEFT_INCLUDE_DIR")
    if env:
        candidates.append(os.path.abspath(env))
    candidates.append(os.path.join(os.path.dirname(os.path.dirname(here)), "include"))
    try:
        inc = subprocess.run(["pkg-config", "--variable=includedir", "weft"], check=True,
                             capture_output=True, text=True).stdout.strip()
        if inc:
            candidates.append(inc)
    except (OSError, subprocess.CalledProcessError):
        pass
    for d in candidates:
        if os.path.exists(os.path.join(d, "weft.h")):
            return d
    raise SystemExit("weft: setup.py cannot find weft.h (tried %s); set WEFT_INCLUDE_DIR, or "
                     "WEFT_PYTHON_EXT=0 to build without the compiled module"
                     % ", ".join(candidates))


def extensions():
    if os.environ.get("WEFT_PYTHON_EXT", "1") == "0":
        return []
    return [Extension("weft._core", sources=["weft/_core.c"], include_dirs=[found_include_dir()],
                      extra_compile_args=["-std=gnu11", "-O2"])]


class BuildPyRecordingLibweft(build_py):
    def run(self):
        super().run()
        path = os.path.join(self.build_lib, "weft", "_found.py")
        with open(path, "w") as f:
            f.write('"""Where libweft was when this package was built (setup.py)."""\n')
            f.write("LIBRARIES = %r\n" % (found_libraries(),))


setup(cmdclass={"build_py": BuildPyRecordingLibweft}, ext_modules=extensions())
