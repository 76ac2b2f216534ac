# Diagnosis: operation signatures, argument checks, the flight recorder and
# its JSON dump (coll/diag/).
libweft_core_la_SOURCES += coll/diag/sig.h coll/diag/sig.c coll/diag/check.h coll/diag/check.c \
	coll/diag/record.h coll/diag/record.c coll/diag/dump.h coll/diag/dump.c

CRITERION_TESTS += tests/runtime/test_mismatch tests/diag/test_dump
tests_runtime_test_mismatch_SOURCES = tests/runtime/test_mismatch.c
tests_runtime_test_mismatch_CFLAGS = $(test_cflags)
tests_runtime_test_mismatch_LDADD = $(test_ldadd)
tests_diag_test_dump_SOURCES = tests/diag/test_dump.c
tests_diag_test_dump_CFLAGS = $(test_cflags)
tests_diag_test_dump_LDADD = $(test_ldadd)

# weft_doctor DIR: the diagnosis from every rank's dump (Python 3).
dist_bin_SCRIPTS = tools/weft_doctor

# The dump files and weft_doctor end to end: ranks under mpirun that hang,
# disagree or block (tests/diag/diag_app), then the doctor on their dumps.
check_PROGRAMS += tests/diag/diag_app
tests_diag_diag_app_SOURCES = tests/diag/diag_app.c
tests_diag_diag_app_LDADD = libweft_core.la
TESTS += tests/diag/test_doctor.sh
EXTRA_DIST += tests/diag/test_doctor.sh
