/* The signature exchange of WEFT_CHECK_ARGS=1 (coll/diag/check.h). */
#include "coll/diag/check.h"

#include <stdio.h>
#include <string.h>

/* The slot of signature messages: algorithms number theirs from 0, and a
 * shared slot would still be safe (the check's messages are sent and
 * received first, and messages of one source and tag match in order). */
#define CHECK_SLOT WEFT_TAG_MAX_SLOT

typedef struct check {
    weft_sched_t *s;
    weft_coll_sig_t *sigs; /* [size], this rank's at [rank] */
    int *ranks;
} check_t;

static weft_status_t compare(void *state, int *peer_p)
{
    check_t *c = state;
    struct weft_comm *comm = weft__sched_comm(c->s);
    const weft_op_desc_t *desc = weft__sched_desc(c->s);
    char text[256];

    *peer_p = -1;
    for (int r = 0; r < comm->size; r++) {
        if (!weft__sig_equal(&c->sigs[r], &desc->sig)) {
            for (int q = 0; q < comm->size; q++) {
                c->ranks[q] = q;
            }
            if (weft__sig_describe(text, sizeof(text), c->sigs, c->ranks, comm->size) == 0) {
                snprintf(text, sizeof(text), "arguments differ from rank %d's", r);
            }
            *peer_p = r;
            return weft__error(WEFT_ERR_MISMATCH, "%s", text); /* the schedule adds the seq */
        }
    }
    return WEFT_OK;
}

int weft__check_build(weft_sched_t *s)
{
    struct weft_comm *comm = weft__sched_comm(s);
    const weft_op_desc_t *desc = weft__sched_desc(s);
    int n = comm->size, me = comm->rank, cmp;
    check_t *c = weft__sched_scratch(s, sizeof(*c));
    weft_coll_sig_t *sigs = weft__sched_scratch(s, (size_t)n * sizeof(*sigs));
    int *ranks = weft__sched_scratch(s, (size_t)n * sizeof(*ranks));

    if (c == NULL || sigs == NULL || ranks == NULL) {
        return -1;
    }
    c->s = s;
    c->sigs = sigs;
    c->ranks = ranks;
    sigs[me] = desc->sig;
    weft__sched_step(s, "argument check", 0);
    cmp = weft__sched_poll(s, compare, NULL, c);
    for (int r = 0; r < n; r++) {
        if (r != me) {
            weft__sched_send(s, r, CHECK_SLOT, &sigs[me], sizeof(sigs[me]));
            weft__sched_dep(s, weft__sched_recv(s, r, CHECK_SLOT, &sigs[r], sizeof(sigs[r])), cmp);
        }
    }
    return cmp;
}
