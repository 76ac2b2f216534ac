# libweft_mpi.so: the PMPI interposer (bindings/mpi), its header, its tests
# and its benchmark. Built when configure found Open MPI.
if HAVE_MPI
lib_LTLIBRARIES += libweft_mpi.la
include_HEADERS += include/weft_mpi.h
libweft_mpi_la_SOURCES = \
	bindings/mpi/weft_mpi_internal.h bindings/mpi/state.c bindings/mpi/dtype.c \
	bindings/mpi/serve.c bindings/mpi/request.c bindings/mpi/coll.c bindings/mpi/coll_move.c \
	bindings/mpi/comm.c
libweft_mpi_la_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
libweft_mpi_la_LIBADD = libweft.la $(MPI_LIBS)
libweft_mpi_la_LDFLAGS = -version-info 0:0:0 -no-undefined

check_PROGRAMS += tests/bindings/test_mpi_coll
tests_bindings_test_mpi_coll_SOURCES = tests/bindings/test_mpi_coll.c
tests_bindings_test_mpi_coll_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_bindings_test_mpi_coll_LDADD = $(MPI_LIBS)

check_PROGRAMS += tests/bindings/test_mpi_device
tests_bindings_test_mpi_device_SOURCES = tests/bindings/test_mpi_device.c
tests_bindings_test_mpi_device_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_bindings_test_mpi_device_LDADD = libweft.la $(MPI_LIBS)

noinst_PROGRAMS += benchmarks/weft_mpi_allreduce
benchmarks_weft_mpi_allreduce_SOURCES = benchmarks/mpi_allreduce.c
benchmarks_weft_mpi_allreduce_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
benchmarks_weft_mpi_allreduce_LDADD = $(MPI_LIBS)

tools_weft_info_CPPFLAGS = $(AM_CPPFLAGS) \
	-DWEFT_INFO_MPI_BINDINGS='"built ($(libdir)/libweft_mpi.so)"'
else
tools_weft_info_CPPFLAGS = $(AM_CPPFLAGS) \
	-DWEFT_INFO_MPI_BINDINGS='"not built (Open MPI not found by configure)"'
endif
TESTS += tests/bindings/test_mpi_interpose.sh
EXTRA_DIST += tests/bindings/test_mpi_interpose.sh tests/bindings/hpccinf.txt \
	tests/bindings/mpi4py_check.py benchmarks/mpi_interpose.sh
