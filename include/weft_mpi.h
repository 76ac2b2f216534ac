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
 * interposer uses for comm. MPI_COMM_WORLD and MPI_COMM_SELF have one from
 * MPI_Init; a communicator made by MPI_Comm_dup, MPI_Comm_dup_with_info,
 * MPI_Comm_split, MPI_Comm_split_type, MPI_Comm_create, MPI_Cart_create,
 * MPI_Cart_sub, MPI_Graph_create or MPI_Dist_graph_create(_adjacent) from
 * one that has one gets one when it is made. Returns MPI_SUCCESS and sets
 * *comm_p, or an MPI error class (MPI_ERR_ARG for a NULL comm_p,
 * MPI_ERR_COMM for MPI_COMM_NULL or an intercommunicator, MPI_ERR_OTHER
 * when weft is off (WEFT_MPI=off), could not connect the ranks, or comm was
 * made another way); *comm_p is written only on success. Not collective.
 *
 * The interposer owns the weft communicator: do not destroy it; it is
 * destroyed when comm is freed (MPI_Comm_free) or at MPI_Finalize. Every
 * such weft communicator shares one transport: drive them from one thread
 * at a time, and not while another thread is in an MPI collective.
 */
int weft_comm_from_mpi(MPI_Comm comm, weft_comm_t *comm_p);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_MPI_H */
