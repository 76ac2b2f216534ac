/*
 * What the communicator core calls back in the collective layer
 * (core/comm.h): core keeps the health and failure state of a communicator
 * but not what this layer attaches to it (the node's shared-memory segment,
 * the flight recorder), so it asks through this table.
 */
#include "coll/coll.h"
#include "coll/diag/record.h"
#include "coll/shm/shm.h"

static weft_status_t health(weft_comm_t comm)
{
    return comm->shm != NULL ? weft__shm_health(comm->shm) : WEFT_OK;
}

/* Timeouts and dead peers: what this rank ran and what it is stuck in, for
 * the diagnosis next to the other ranks' dumps. */
static void failed(weft_comm_t comm)
{
    weft__record_dump(comm, NULL, 1);
}

const weft_comm_upcalls_t weft__coll_upcalls = {
    .health = health,
    .failed = failed,
};
