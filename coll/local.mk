# The algorithm registry (coll/registry.c): its unit test, and the check
# that the table of docs/algorithms.md is the registry as
# `weft_info --algorithms` prints it (tools/check_algorithms.py).
CRITERION_TESTS += tests/coll/test_registry
tests_coll_test_registry_SOURCES = tests/coll/test_registry.c
tests_coll_test_registry_CFLAGS = $(test_cflags)
tests_coll_test_registry_LDADD = $(test_ldadd)

TESTS += tests/coll/test_algorithms_doc.sh
EXTRA_DIST += tools/check_algorithms.py tests/coll/test_algorithms_doc.sh
