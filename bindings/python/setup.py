"""Installs the weft package and records where libweft was when it was built,
so that an installed package finds the library without WEFT_LIBRARY
(README: Finding libweft). Recorded in weft/_found.py, in this order:

  WEFT_LIBRARY_DIR at build time       a folder holding libweft.so
  the source tree the package is in    <top>/.libs/libweft.so after a build
  pkg-config weft                      an installed weft's libdir

Metadata is in pyproject.toml.
"""

import os
import subprocess

from setuptools import setup
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


class BuildPyRecordingLibweft(build_py):
    def run(self):
        super().run()
        path = os.path.join(self.build_lib, "weft", "_found.py")
        with open(path, "w") as f:
            f.write('"""Where libweft was when this package was built (setup.py)."""\n')
            f.write("LIBRARIES = %r\n" % (found_libraries(),))


setup(cmdclass={"build_py": BuildPyRecordingLibweft})
