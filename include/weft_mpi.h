/*
 * weft_mpi: MPI programs on weft's collectives (libweft_mpi.so).
 *
 * libweft_mpi.so is a PMPI interposer: preloaded (LD_PRELOAD) or linked
 * before libmpi, it serves MPI's collectives with weft where it can and
 * passes every other call to the MPI library unchanged. This header is for
 * programs that also call weft directly.
 */
#ifndef WEFT_MPI_H
#define WEFT_MPI_H

#include <mpi.h>
#include <weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The weft communicator of an MPI intracommunicator: the one the
 * interposer uses for comm, made on first use (collective over comm: every
 * rank of comm calls it, or a collective the interposer serves, at the
 * same point). Returns MPI_SUCCESS and sets *comm_p, or an MPI error class
 * (MPI_ERR_COMM for MPI_COMM_NULL or an intercommunicator, MPI_ERR_ARG for
 * a NULL comm_p, MPI_ERR_OTHER when weft is off (WEFT_MPI=off) or could not
 * connect the ranks); *comm_p is written only on success.
 *
 * The interposer owns the weft communicator: do not destroy it; it is
 * destroyed when comm is freed (MPI_Comm_free) or at MPI_Finalize. A weft
 * communicator is driven by one thread at a time: do not use it while
 * another thread runs an MPI collective on comm.
 */
int weft_comm_from_mpi(MPI_Comm comm, weft_comm_t *comm_p);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_MPI_H */
