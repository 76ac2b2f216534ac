# The soak (issue 14): tests/soak/soak.c between processes on weft's public
# API, tests/soak/mpi_churn.c through the interposer under mpirun. Built by
# make check but not run by it: tools/soak.sh runs them (about a minute,
# longer with a number of seconds) and tools/test.sh runs that after make
# check, with a shorter leak-checked run.
check_PROGRAMS += tests/soak/soak
tests_soak_soak_SOURCES = tests/soak/soak.c tests/soak/soak.h tests/soak/soak_ops.c \
	tests/soak/proc_sample.h
# the harness resets the environment from the configuration registry (internal)
tests_soak_soak_LDADD = tests/libweft_harness.la libweft_core.la
if HAVE_MPI
check_PROGRAMS += tests/soak/mpi_churn
tests_soak_mpi_churn_SOURCES = tests/soak/mpi_churn.c tests/soak/proc_sample.h
tests_soak_mpi_churn_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_soak_mpi_churn_LDADD = $(MPI_LIBS)
endif

