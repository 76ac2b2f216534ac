# tests/device/: the emu accelerator, every collective on emu buffers
# (blocking, nonblocking, stream-ordered) among in-process ranks, stream
# ordering and errors of _enqueue, emu collectives between processes, and the
# CUDA backend's tests where configure found nvcc.
device_tests = \
	tests/device/test_emu \
	tests/coll/test_device \
	tests/coll/test_device_stream \
	tests/coll/test_device_graph \
	tests/coll/test_device_errors \
	tests/device/test_emu_procs
check_PROGRAMS += $(device_tests)
TESTS += $(device_tests) tests/device/test_reduce_bench.sh
EXTRA_DIST += tests/device/test_reduce_bench.sh
device_data = tests/coll/device_data.h tests/coll/device_data.c
device_cases = tests/coll/device_cases.h tests/coll/device_cases.c $(coll_check) $(device_data)
tests_coll_test_device_SOURCES = tests/coll/test_device.c $(device_cases)
tests_device_test_emu_procs_SOURCES = tests/device/test_emu_procs.c $(device_cases)
tests_coll_test_device_stream_SOURCES = tests/coll/test_device_stream.c tests/coll/device_world.h \
	$(device_data)
tests_coll_test_device_graph_SOURCES = tests/coll/test_device_graph.c tests/coll/device_world.h \
	$(device_data)
tests_coll_test_device_errors_SOURCES = tests/coll/test_device_errors.c tests/coll/device_world.h \
	$(device_data)

EXTRA_DIST += tests/device/test_cuda.c tests/device/cuda_probe.c tests/device/cuda_kernel_host.cu \
	tests/device/fake_cuda.c tests/device/cuda_fake_check.c tests/device/test_gpu_bundle.sh
CLEANFILES += tests/device/cuda_kernel_host
if HAVE_CUDA
check_PROGRAMS += tests/device/test_cuda tests/device/cuda_probe tests/device/cuda_fake_check
TESTS += tests/device/test_cuda tests/device/test_gpu_bundle.sh
tests_device_test_cuda_SOURCES = tests/device/test_cuda.c
tests_device_test_cuda_CPPFLAGS = $(AM_CPPFLAGS) -I$(CUDA_HOME)/include \
	-DWEFT_TEST_CUDA_HOME='"$(CUDA_HOME)"'
tests_device_test_cuda_LDADD = $(LDADD) -ldl
tests_device_cuda_probe_SOURCES = tests/device/cuda_probe.c
tests_device_cuda_probe_LDADD = libweft_core.la
# the host side of the table against a libcuda.so.1 stand-in (test_cuda runs it)
tests_device_cuda_fake_check_SOURCES = tests/device/cuda_fake_check.c
tests_device_cuda_fake_check_CPPFLAGS = $(AM_CPPFLAGS) -I$(CUDA_HOME)/include
tests_device_cuda_fake_check_LDADD = libweft_core.la -ldl
check_LTLIBRARIES += tests/device/libfake_cuda.la
tests_device_libfake_cuda_la_SOURCES = tests/device/fake_cuda.c
tests_device_libfake_cuda_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(CUDA_HOME)/include
tests_device_libfake_cuda_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere

# the kernels' thread bodies run on the CPU (nvcc, host code only)
check_SCRIPTS += tests/device/cuda_kernel_host
TESTS += tests/device/cuda_kernel_host
tests/device/cuda_kernel_host: $(srcdir)/tests/device/cuda_kernel_host.cu $(cuda_kernel_deps) \
		$(srcdir)/tests/harness_rng.h
	@$(MKDIR_P) tests/device
	$(AM_V_GEN)$(NVCC) -std=c++17 -O2 -fmad=false -Werror all-warnings -Xcompiler -Wall,-Wextra \
		-I$(top_srcdir) -o $@ $(srcdir)/tests/device/cuda_kernel_host.cu
endif
