/*
 * What the communicator core calls back in the collective layer
 * (comm/comm.h): core keeps the health and failure state of a communicator
 * but not what this layer attaches to it (the node's shared-memory segment,
 * the flight recorder), so it asks through this table.
 */
#include "coll/coll.h"
#include "coll/comm_state.h"
#include "coll/diag/dump.h"
#include "coll/diag/obs.h"
#include "coll/diag/record.h"
#include "coll/shm/shm.h"

static weft_status_t health(struct weft_comm *comm)
{
    return comm->coll->shm != NULL ? weft__shm_health(comm->coll->shm, comm->coll->at_entry)
                                   : WEFT_OK;
}

/* SIGUSR1 asked every communicator for a dump (coll/diag/dump.h). */
static void poll(struct weft_comm *comm)
{
    if (WEFT_UNLIKELY(weft__dump_requested(comm))) {
        weft__record_dump(comm, NULL, 1);
        weft__dump_event(comm, WEFT_DUMP_SIGNAL, WEFT_OK);
    }
}

/* Timeouts and dead peers: what this rank ran and what it is stuck in, in
 * the log, for the diagnosis next to the other ranks' dumps; and the JSON
 * file under WEFT_DUMP_DIR for the failures it is written for. */
static void failed(struct weft_comm *comm, weft_status_t status)
{
    if (status == WEFT_ERR_TIMEOUT || status == WEFT_ERR_PEER_FAILED) {
        weft__record_dump(comm, NULL, 1);
    }
    if (weft__dump_reason(status) != NULL) {
        weft__dump_event(comm, weft__dump_reason(status), status);
    }
    weft__obs_comm_failed(comm); /* its trace, now */
}

const weft_comm_upcalls_t weft__coll_upcalls = {
    .poll = poll,
    .health = health,
    .failed = failed,
};
