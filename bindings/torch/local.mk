# bindings/torch/: weft_torch, the torch.distributed backend (a torch C++
# extension, built by setuptools against the torch it runs with, not by make).
# tests/torch/test_torch.sh builds it in the build tree and runs its tests.
torch_package = \
	bindings/torch/setup.py bindings/torch/pyproject.toml bindings/torch/README.md \
	bindings/torch/weft_torch/__init__.py bindings/torch/weft_torch/bench.py \
	bindings/torch/csrc/module.cpp bindings/torch/csrc/process_group.hpp \
	bindings/torch/csrc/process_group.cpp bindings/torch/csrc/collectives.cpp \
	bindings/torch/csrc/types.hpp \
	bindings/torch/csrc/types.cpp bindings/torch/csrc/device.hpp bindings/torch/csrc/device.cpp

# tests/torch/test_torch.sh: second in TESTS (Makefile.am)
EXTRA_DIST += $(torch_package) tests/torch/test_torch.sh tests/torch/common.py \
	tests/torch/test_backend.py tests/torch/test_collectives.py tests/torch/test_ddp.py \
	tests/torch/test_device.py \
	tools/torch_env.sh tools/torch_suite.sh tests/torch/build_ext.sh tests/torch/torch_suite.py

clean-local: clean-torch-ext
clean-torch-ext:
	rm -rf tests/torch/ext tests/torch/.build.lock torch-suite.log
.PHONY: clean-torch-ext
