# Python bindings: a pure-Python package over libweft.so (ctypes), nothing
# to build. tests/python/test_python.sh runs its tests from the source tree
# against the library in the build tree.
python_package = \
	bindings/python/pyproject.toml bindings/python/setup.py bindings/python/README.md \
	bindings/python/weft/__init__.py bindings/python/weft/_lib.py \
	bindings/python/weft/_buffer.py bindings/python/weft/comm.py \
	bindings/python/weft/bench.py
python_tests = \
	tests/python/conftest.py tests/python/test_unit.py tests/python/test_collectives.py \
	tests/python/test_errors.py tests/python/test_buffers.py tests/python/test_mpi4py.py

TESTS += tests/python/test_python.sh
EXTRA_DIST += $(python_package) $(python_tests) tests/python/test_python.sh
