# Operation signatures and argument checks (coll/check/).
libweft_core_la_SOURCES += coll/check/sig.h coll/check/sig.c coll/check/check.h coll/check/check.c

CRITERION_TESTS += tests/runtime/test_mismatch
tests_runtime_test_mismatch_SOURCES = tests/runtime/test_mismatch.c
tests_runtime_test_mismatch_CFLAGS = $(test_cflags)
tests_runtime_test_mismatch_LDADD = $(test_ldadd)
