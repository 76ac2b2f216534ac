/*
 * The communicator constructors that are collective over a parent
 * intracommunicator: MPI makes the communicator, then weft__mpi_derive
 * splits its weft communicator from the parent's (one more collective over
 * the parent, the same on every rank). Communicators made otherwise
 * (MPI_Comm_create_group, MPI_Comm_idup, MPI_Intercomm_merge, dynamic
 * processes) have no weft communicator: their collectives go to MPI.
 */
#include "bindings/mpi/weft_mpi_internal.h"

static int derived(int rc, MPI_Comm parent, MPI_Comm *newc)
{
    if (rc == MPI_SUCCESS && newc != NULL) {
        weft__mpi_derive(parent, *newc);
    }
    return rc;
}

WEFT_MPI_EXPORT int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    return derived(PMPI_Comm_dup(comm, newcomm), comm, newcomm);
}

WEFT_MPI_EXPORT int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    return derived(PMPI_Comm_dup_with_info(comm, info, newcomm), comm, newcomm);
}

WEFT_MPI_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    return derived(PMPI_Comm_split(comm, color, key, newcomm), comm, newcomm);
}

WEFT_MPI_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info,
                                        MPI_Comm *newcomm)
{
    return derived(PMPI_Comm_split_type(comm, type, key, info, newcomm), comm, newcomm);
}

WEFT_MPI_EXPORT int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    return derived(PMPI_Comm_create(comm, group, newcomm), comm, newcomm);
}

WEFT_MPI_EXPORT int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[],
                                    int reorder, MPI_Comm *newcomm)
{
    return derived(PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm), comm, newcomm);
}

WEFT_MPI_EXPORT int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm)
{
    return derived(PMPI_Cart_sub(comm, remain_dims, newcomm), comm, newcomm);
}

WEFT_MPI_EXPORT int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[],
                                     const int edges[], int reorder, MPI_Comm *newcomm)
{
    return derived(PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm), comm, newcomm);
}

WEFT_MPI_EXPORT int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[],
                                                   const int sourceweights[], int outdegree,
                                                   const int destinations[],
                                                   const int destweights[], MPI_Info info,
                                                   int reorder, MPI_Comm *newcomm)
{
    return derived(PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights,
                                                   outdegree, destinations, destweights, info,
                                                   reorder, newcomm),
                   comm, newcomm);
}

WEFT_MPI_EXPORT int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[],
                                          const int degrees[], const int destinations[],
                                          const int weights[], MPI_Info info, int reorder,
                                          MPI_Comm *newcomm)
{
    return derived(PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info,
                                          reorder, newcomm),
                   comm, newcomm);
}
