# Traces (WEFT_TRACE) and counters (WEFT_STATS, weft_stats) of finished operations.
libweft_core_la_SOURCES += coll/diag/obs.h coll/diag/obs.c coll/diag/file.h coll/diag/file.c \
	coll/diag/trace.c coll/diag/stats.c

CRITERION_TESTS += tests/coll/test_trace
tests_coll_test_trace_SOURCES = tests/coll/test_trace.c
tests_coll_test_trace_CFLAGS = $(test_cflags) -DWEFT_TOP_SRCDIR='"$(abs_top_srcdir)"' \
	-DWEFT_TOP_BUILDDIR='"$(abs_top_builddir)"'
tests_coll_test_trace_LDADD = $(test_ldadd)
EXTRA_DIST += tests/coll/trace_check.py tools/weft_trace_merge.py

# weft_info --stats: a self-test of the collectives printed through weft_stats.
tools_weft_info_SOURCES += tools/info_stats.c
EXTRA_DIST += benchmarks/obs_cost.sh
