/*
 * Dissemination barrier (Hensgen, Finkel, Manber).
 *
 * Idea: in round k rank r sends an empty message to r + 2^k and waits for
 * one from r - 2^k (mod p), and it starts round k + 1 only once the
 * messages of rounds 0..k arrived (they may land in any order). After ceil(log2 p) rounds every
 * rank has heard, through a chain of messages, from every rank, so no rank leaves before all have
 * arrived. Works for any p, no fold needed.
 *
 *   round:  0          1          2        (p = 5, arrows from rank 0)
 *           0 -> 1     0 -> 2     0 -> 4
 *
 * Cost: ceil(log2 p) alpha; no data.
 */
#include "coll/rooted.h"

weft_status_t weft__barrier_dissemination(weft_sched_t *s, const weft_coll_args_t *a)
{
    const int p = a->size, r = a->rank;
    /* messages carry no bytes; the buffer only has to be a valid address */
    char *token = weft__sched_scratch(s, 1);
    int recvs[32]; /* one per round: ceil(log2 p) <= 31 */
    int round = 0;

    for (int dist = 1; dist < p; dist *= 2, round++) {
        int send;

        weft__sched_step(s, "dissemination", round);
        send = weft__sched_send(s, (r + dist) % p, (uint32_t)round, token, 0);
        recvs[round] = weft__sched_recv(s, (r - dist + p) % p, (uint32_t)round, token, 0);
        /* a round starts once every earlier round's message arrived (they
         * may arrive out of order) */
        for (int k = 0; k < round; k++) {
            weft__sched_dep(s, recvs[k], send);
        }
        if (dist > p / 2) {
            break; /* dist *= 2 would overflow for p near INT_MAX */
        }
    }
    return WEFT_OK;
}
