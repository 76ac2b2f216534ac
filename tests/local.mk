# tests/: the test harness and every test of make check; tests/mpi/,
# tests/device/, tests/soak/ and tests/fuzz/ have their own local.mk.
#
# A Criterion test is one line: its program name (its source is the name with
# .c, it links LDADD of Makefile.am); a _SOURCES line only where it has more
# files. The order of TESTS is Makefile.am's.
# tests/coll/test_algorithms: third in TESTS (Makefile.am)
check_PROGRAMS += tests/coll/test_algorithms
CRITERION_TESTS += tests/runtime/test_runtime
CRITERION_TESTS += tests/runtime/test_args
CRITERION_TESTS += tests/device/test_reduce
CRITERION_TESTS += tests/pt2pt/test_loop
CRITERION_TESTS += tests/coll/test_sched
CRITERION_TESTS += tests/bootstrap/test_tcp
CRITERION_TESTS += tests/runtime/test_split
CRITERION_TESTS += tests/pt2pt/test_ucx
CRITERION_TESTS += tests/runtime/test_p2p
CRITERION_TESTS += tests/coll/test_reproducible
CRITERION_TESTS += tests/runtime/test_topo
CRITERION_TESTS += tests/runtime/test_comm_ids
CRITERION_TESTS += tests/base/test_handles
CRITERION_TESTS += tests/test_harness
CRITERION_TESTS += tests/coll/test_registry
CRITERION_TESTS += tests/runtime/test_mismatch
CRITERION_TESTS += tests/diag/test_dump
CRITERION_TESTS += tests/coll/test_trace
# The longer suites, shortest first: last in TESTS (Makefile.am)
slow_tests = tests/coll/test_shm tests/coll/test_stress tests/coll/test_rooted \
	tests/runtime/test_multiproc tests/coll/test_exchange
check_PROGRAMS += $(CRITERION_TESTS) $(slow_tests)
TESTS += $(CRITERION_TESTS)

# the table-driven checker of every collective's result (tests/coll/check.h)
coll_check = tests/coll/check.h tests/coll/check.c
tests_coll_test_algorithms_SOURCES = tests/coll/test_algorithms.c $(coll_check)
tests_coll_test_rooted_SOURCES = tests/coll/test_rooted.c $(coll_check)
tests_coll_test_exchange_SOURCES = tests/coll/test_exchange.c $(coll_check)
tests_coll_test_shm_SOURCES = tests/coll/test_shm.c $(coll_check) tests/coll/device_data.c \
	tests/coll/device_data.h
tests_coll_test_reproducible_SOURCES = tests/coll/test_reproducible.c $(coll_check)
tests_runtime_test_runtime_SOURCES = tests/runtime/test_runtime.c \
	tests/runtime/test_runtime_config.c tests/runtime/runtime_env.h tests/runtime/runtime_env.c
tests_runtime_test_multiproc_SOURCES = tests/runtime/test_multiproc.c \
	tests/runtime/test_multiproc_shm.c tests/runtime/multiproc.h tests/runtime/multiproc_job.c
tests_device_test_reduce_SOURCES = tests/device/test_reduce.c \
	tests/device/reduce_ref.h tests/device/reduce_ref.c
tests_pt2pt_test_ucx_SOURCES = tests/pt2pt/test_ucx.c tests/pt2pt/ucx_ranks.h tests/pt2pt/ucx_ranks.c
# test_trace runs tools/weft_trace_merge.py and tests/coll/trace_check.py
tests_coll_test_trace_CPPFLAGS = $(AM_CPPFLAGS) -DWEFT_TOP_SRCDIR='"$(abs_top_srcdir)"' \
	-DWEFT_TOP_BUILDDIR='"$(abs_top_builddir)"'

# The multi-process test harness (tests/harness.h), linked into every test.
check_LTLIBRARIES += tests/libweft_harness.la
tests_libweft_harness_la_SOURCES = tests/harness.h tests/harness_rng.h tests/harness.c

# The dump files and weft_doctor end to end: ranks under mpirun that hang,
# disagree or block (tests/diag/diag_app), then the doctor on their dumps.
check_PROGRAMS += tests/diag/diag_app
tests_diag_diag_app_LDADD = libweft_core.la

# The MPI interposer (libweft_mpi.so): collectives and device buffers through
# MPI calls, then real MPI programs (OSU-style, mpi4py's suite, hpcc).
if HAVE_MPI
check_PROGRAMS += tests/bindings/test_mpi_coll tests/bindings/test_mpi_device
tests_bindings_test_mpi_coll_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_bindings_test_mpi_coll_LDADD = $(MPI_LIBS)
tests_bindings_test_mpi_device_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_bindings_test_mpi_device_LDADD = libweft.la $(MPI_LIBS)
endif

# The scripts: an installed weft through pkg-config, the layering and
# algorithm-table checks of docs/; the doctor and the interposer run mpirun
# (in TESTS with the mpirun scripts, Makefile.am).
test_scripts = tests/install/test_pkgconfig.sh tests/layers/test_layers.sh \
	tests/coll/test_algorithms_doc.sh tests/runtime/test_info_explain.sh
TESTS += $(test_scripts)
EXTRA_DIST += $(test_scripts) tests/diag/test_doctor.sh tests/bindings/test_mpi_interpose.sh tests/install/hello.c tests/runtime/topo_3pkg.xml \
	tests/coll/trace_check.py tests/bindings/hpccinf.txt tests/bindings/mpi4py_check.py
