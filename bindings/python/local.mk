# Python bindings: a Python package over libweft.so (ctypes) with one
# compiled module (weft/_core.c, the blocking calls on numpy arrays) that
# pip builds (setup.py); make builds nothing here. tests/python/test_python.sh
# builds the package with pip into its scratch folder and runs its tests with
# it and from the source tree, against the library in the build tree.
python_package = \
	bindings/python/pyproject.toml bindings/python/setup.py bindings/python/README.md \
	bindings/python/weft/__init__.py bindings/python/weft/_lib.py \
	bindings/python/weft/_buffer.py bindings/python/weft/comm.py \
	bindings/python/weft/bench.py bindings/python/weft/_core.c
python_tests = \
	tests/python/conftest.py tests/python/test_unit.py tests/python/test_collectives.py \
	tests/python/test_errors.py tests/python/test_buffers.py tests/python/test_mpi4py.py \
	tests/python/test_core.py

# tests/python/test_python.sh is in the mpirun scripts' row (Makefile.am)
EXTRA_DIST += $(python_package) $(python_tests) tests/python/test_python.sh
