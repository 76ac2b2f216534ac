# The layers below the collectives: base/ (errors, logging, time, dtypes,
# configuration values) and comm/ (the communicator core), with the check that
# keeps every dependency pointing down (docs/layers.md).
libweft_core_la_SOURCES += base/config.h base/config_parse.c comm/comm.h comm/comm.c \
	coll/upcalls.c

TESTS += tests/layers/test_layers.sh
EXTRA_DIST += tools/check_layers.py tests/layers/test_layers.sh

# The multi-process test harness (tests/harness.h), linked into every test.
check_LTLIBRARIES += tests/libweft_harness.la
tests_libweft_harness_la_SOURCES = tests/harness.h tests/harness_rng.h tests/harness.c
CRITERION_TESTS += tests/test_harness
tests_test_harness_SOURCES = tests/test_harness.c
tests_test_harness_CFLAGS = $(test_cflags)
tests_test_harness_LDADD = $(test_ldadd)

# Files split from larger ones, one concept each.
libweft_core_la_SOURCES += coll/sched_impl.h coll/sched_engine.c coll/shm/op.h coll/shm/single_copy.c \
	bootstrap/tcp/tcp_root.h bootstrap/tcp/tcp_serve.c
tests_runtime_test_multiproc_SOURCES += tests/runtime/test_multiproc_shm.c \
	tests/runtime/multiproc.h tests/runtime/multiproc_job.c
tests_device_test_reduce_SOURCES += tests/device/reduce_ref.h tests/device/reduce_ref.c
tests_pt2pt_test_ucx_SOURCES += tests/pt2pt/ucx_ranks.h tests/pt2pt/ucx_ranks.c
tests_runtime_test_runtime_SOURCES += tests/runtime/test_runtime_config.c \
	tests/runtime/runtime_env.h tests/runtime/runtime_env.c
if HAVE_MPI
benchmarks_weft_bench_SOURCES += benchmarks/weft_bench.h benchmarks/bench_check.c \
	benchmarks/bench_copy.c
endif
