# bindings/mpi/: libweft_mpi.so, the PMPI interposer, and its header. Built
# when configure found Open MPI. Its tests are in tests/local.mk.
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
endif
