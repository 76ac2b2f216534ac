"""Builds weft_torch, the torch.distributed backend, against the torch of the
running Python (pip install --no-build-isolation ./bindings/torch).

weft is found, in this order, through:
  WEFT_INCLUDE_DIR and WEFT_LIBRARY_DIR   the folders of weft.h and libweft.so
  WEFT_PREFIX                             an install prefix (include/, lib/)
  pkg-config weft                         an installed weft
  ../..                                   this source tree, built in place
The extension records the library's folder as its run path.
"""

import os
import shlex
import subprocess

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))


def find_weft():
    inc, lib = os.environ.get("WEFT_INCLUDE_DIR"), os.environ.get("WEFT_LIBRARY_DIR")
    if inc and lib:
        return inc, lib
    prefix = os.environ.get("WEFT_PREFIX")
    if prefix:
        return os.path.join(prefix, "include"), os.path.join(prefix, "lib")
    try:
        out = subprocess.run(["pkg-config", "--cflags-only-I", "--libs-only-L", "weft"],
                             check=True, capture_output=True, text=True).stdout
        words = shlex.split(out)
        incs = [w[2:] for w in words if w.startswith("-I")]
        libs = [w[2:] for w in words if w.startswith("-L")]
        if libs:
            return (incs[0] if incs else "/usr/include"), libs[0]
    except (OSError, subprocess.CalledProcessError):
        pass
    top = os.path.dirname(os.path.dirname(here))
    if os.path.exists(os.path.join(top, ".libs", "libweft.so")):
        return os.path.join(top, "include"), os.path.join(top, ".libs")
    raise SystemExit("weft_torch: libweft not found: build weft (bash tools/build.sh), install it "
                     "(pkg-config weft), or set WEFT_PREFIX or WEFT_INCLUDE_DIR and "
                     "WEFT_LIBRARY_DIR")


include_dir, library_dir = find_weft()

setup(
    name="weft_torch",
    version="0.1.0",
    description="weft as a torch.distributed backend",
    packages=["weft_torch"],
    ext_modules=[
        CppExtension(
            "weft_torch._C",
            sources=["csrc/module.cpp", "csrc/process_group.cpp", "csrc/collectives.cpp",
                     "csrc/types.cpp", "csrc/device.cpp"],
            include_dirs=[include_dir],
            library_dirs=[library_dir],
            libraries=["weft"],
            extra_compile_args=["-O2", "-Wall"],
            extra_link_args=["-Wl,-rpath," + library_dir],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
