# benchmarks/: weft_bench (an MPI program: weft against the MPI library in
# the same job, built when configure found Open MPI), the in-process and
# reduction-loop benchmarks, MPI_Allreduce through the interposer, and the
# scripts that run them.
noinst_PROGRAMS += benchmarks/weft_reduce_bench benchmarks/weft_thread_bench
benchmarks_weft_reduce_bench_SOURCES = benchmarks/reduce_bench.c
benchmarks_weft_reduce_bench_LDADD = libweft_core.la
benchmarks_weft_thread_bench_SOURCES = benchmarks/thread_bench.c
benchmarks_weft_thread_bench_LDADD = libweft_core.la

if HAVE_MPI
bin_PROGRAMS += benchmarks/weft_bench
benchmarks_weft_bench_SOURCES = benchmarks/weft_bench.c benchmarks/weft_bench.h \
	benchmarks/bench_check.c benchmarks/bench_copy.c
benchmarks_weft_bench_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
benchmarks_weft_bench_LDADD = libweft.la $(MPI_LIBS)

noinst_PROGRAMS += benchmarks/weft_mpi_allreduce
benchmarks_weft_mpi_allreduce_SOURCES = benchmarks/mpi_allreduce.c
benchmarks_weft_mpi_allreduce_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
benchmarks_weft_mpi_allreduce_LDADD = $(MPI_LIBS)
endif
EXTRA_DIST += benchmarks/vs_mpi.sh benchmarks/obs_cost.sh benchmarks/mpi_interpose.sh benchmarks/twohost.sh
