/* The collective layer's state of a communicator (coll/comm_state.h). */
#include "coll/comm_state.h"
#include "coll/coll.h"
#include "coll/diag/obs.h"
#include "coll/diag/record.h"
#include "coll/sched.h"
#include "coll/shm/shm.h"

#include <stdlib.h>
#include <string.h>

weft_status_t weft__coll_comm_create(struct weft_comm *comm)
{
    comm->coll = calloc(1, sizeof(*comm->coll));
    if (comm->coll == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a communicator's collectives");
    }
    comm->coll->reproducible = weft__coll_config.reproducible != 0;
    return WEFT_OK;
}

void weft__coll_set_reproducible(struct weft_comm *comm, int on)
{
    comm->coll->reproducible = on != 0;
    memset(comm->coll->last_choice, 0, sizeof(comm->coll->last_choice));
    memset(comm->coll->line, 0, sizeof(comm->coll->line));
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
