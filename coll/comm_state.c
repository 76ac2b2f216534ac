/* The collective layer's state of a communicator (coll/comm_state.h). */
#include "coll/comm_state.h"
#include "coll/diag/obs.h"
#include "coll/diag/record.h"
#include "coll/sched.h"
#include "coll/shm/shm.h"

#include <stdlib.h>

weft_status_t weft__coll_comm_create(struct weft_comm *comm)
{
    comm->coll = calloc(1, sizeof(*comm->coll));
    return comm->coll != NULL
               ? WEFT_OK
               : weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a communicator's collectives");
}

void weft__coll_comm_release(struct weft_comm *comm)
{
    /* operations still unfinished are cancelled first */
    weft__sched_cache_release(comm);
    weft__record_release(comm);
    weft__obs_comm_release(comm);
    weft__shm_release(comm->coll->shm);
    comm->coll->shm = NULL;
}

void weft__coll_comm_free(struct weft_comm *comm)
{
    free(comm->coll);
    comm->coll = NULL;
}
