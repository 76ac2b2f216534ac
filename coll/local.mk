# The algorithm registry (coll/registry.c) and its unit test.
CRITERION_TESTS += tests/coll/test_registry
tests_coll_test_registry_SOURCES = tests/coll/test_registry.c
tests_coll_test_registry_CFLAGS = $(test_cflags)
tests_coll_test_registry_LDADD = $(test_ldadd)
