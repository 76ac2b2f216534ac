# Diagnosis: operation signatures, argument checks, the flight recorder (coll/diag/).
libweft_core_la_SOURCES += coll/diag/sig.h coll/diag/sig.c coll/diag/check.h coll/diag/check.c \
	coll/diag/record.h coll/diag/record.c

CRITERION_TESTS += tests/runtime/test_mismatch
tests_runtime_test_mismatch_SOURCES = tests/runtime/test_mismatch.c
tests_runtime_test_mismatch_CFLAGS = $(test_cflags)
tests_runtime_test_mismatch_LDADD = $(test_ldadd)
