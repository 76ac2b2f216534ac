# Device tests: the emu accelerator, every collective on emu buffers
# (blocking, nonblocking, stream-ordered) among in-process ranks, stream
# ordering and errors of _enqueue, and emu collectives between processes.
device_tests = \
	tests/device/test_emu \
	tests/coll/test_device \
	tests/coll/test_device_stream \
	tests/coll/test_device_errors \
	tests/device/test_emu_procs
check_PROGRAMS += $(device_tests)
TESTS += $(device_tests)
tests_device_test_emu_SOURCES = tests/device/test_emu.c
tests_device_test_emu_CFLAGS = $(test_cflags)
tests_device_test_emu_LDADD = $(test_ldadd)
tests_coll_test_device_SOURCES = tests/coll/test_device.c tests/coll/device_cases.c \
	tests/coll/check.h tests/coll/check.c \
	tests/coll/device_cases.h tests/coll/device_data.c tests/coll/device_data.h
tests_coll_test_device_CFLAGS = $(test_cflags)
tests_coll_test_device_LDADD = $(test_ldadd)
tests_coll_test_device_stream_SOURCES = tests/coll/test_device_stream.c \
	tests/coll/device_world.h tests/coll/device_data.c tests/coll/device_data.h
tests_coll_test_device_stream_CFLAGS = $(test_cflags)
tests_coll_test_device_stream_LDADD = $(test_ldadd)
tests_coll_test_device_errors_SOURCES = tests/coll/test_device_errors.c \
	tests/coll/device_world.h tests/coll/device_data.c tests/coll/device_data.h
tests_coll_test_device_errors_CFLAGS = $(test_cflags)
tests_coll_test_device_errors_LDADD = $(test_ldadd)
tests_device_test_emu_procs_SOURCES = tests/device/test_emu_procs.c tests/coll/device_cases.c \
	tests/coll/check.h tests/coll/check.c \
	tests/coll/device_cases.h tests/coll/device_data.c tests/coll/device_data.h
tests_device_test_emu_procs_CFLAGS = $(test_cflags)
tests_device_test_emu_procs_LDADD = $(test_ldadd)
# emu collectives under mpirun (weft_bench -d emu, --enqueue)
TESTS += tests/mpi/test_device_mpirun.sh
EXTRA_DIST += tests/mpi/test_device_mpirun.sh
