/*
 * The communicator core: checks, health, failures and the notices that carry
 * them to every rank, deadlines. What the layers above keep (shared memory,
 * the flight recorder) is reached through comm->up (comm/comm.h).
 */
#include "comm/comm.h"
#include "base/config.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

weft_handle_table_t weft__comm_handles = WEFT_HANDLE_TABLE_INIT("communicator", 0xc0);

weft_status_t weft__comm_check(weft_comm_t handle, const char *what, struct weft_comm **comm_p)
{
    return weft__handle_lookup(&weft__comm_handles, handle, what, (void **)comm_p);
}

/*
 * Failure notices travel on a sequence number of their own (no collective
 * takes it), from each rank to the next in a ring: rank r listens only to
 * r - 1, and tells r + 1 once, when it fails (by itself or by a notice), so a
 * failure anywhere reaches every rank with one message per rank.
 */
static weft_status_t fail_from(struct weft_comm *comm, weft_status_t status, int origin);

static uint64_t notice_tag(struct weft_comm *comm)
{
    return weft__tag_make(comm->id, WEFT_TAG_SEQ_NOTICE, 0);
}

static void notice_post(struct weft_comm *comm)
{
    if (comm->notice_posted) {
        return; /* posting failed once, or the notice arrived: not again */
    }
    comm->notice_posted = 1;
    if (comm->p2p->irecv(comm->p2p_ep, (comm->rank + comm->size - 1) % comm->size, &comm->notice_in,
                         sizeof(comm->notice_in), WEFT_MEM_HOST, notice_tag(comm),
                         &comm->notice_recv) != WEFT_OK) {
        comm->notice_recv = NULL;
    }
}

/* Record the failure a notice from the left neighbour carries: 1 when one came. */
static int notice_arrived(struct weft_comm *comm)
{
    int done = 0;
    weft_status_t status = comm->p2p->test(comm->p2p_ep, comm->notice_recv, &done, NULL);
    struct weft_comm_notice *n = &comm->notice_in;

    if (!done) {
        return 0;
    }
    comm->notice_recv = NULL;
    if (status != WEFT_OK || n->status >= 0 || n->origin < 0 || n->origin >= comm->size) {
        return 0; /* the transport failed: its own errors report that */
    }
    n->text[sizeof(n->text) - 1] = '\0';
    weft__error((weft_status_t)n->status, "rank %d reported: %s", (int)n->origin, n->text);
    fail_from(comm, (weft_status_t)n->status, (int)n->origin);
    return 1;
}

void weft__comm_notice_release(struct weft_comm *comm)
{
    int done = 0;

    if (comm->notice_recv != NULL) {
        comm->p2p->cancel(comm->p2p_ep, comm->notice_recv);
        comm->notice_recv = NULL;
    }
    if (comm->notice_send != NULL) {
        /* a notice is a few hundred bytes: give it a moment to leave */
        for (int i = 0; i < 1000 && !done; i++) {
            comm->p2p->progress(comm->p2p_ep);
            if (comm->p2p->test(comm->p2p_ep, comm->notice_send, &done, NULL) != WEFT_OK) {
                done = 1;
            }
        }
        if (!done) {
            comm->p2p->cancel(comm->p2p_ep, comm->notice_send);
        }
        comm->notice_send = NULL;
    }
}

static weft_status_t fail_from(struct weft_comm *comm, weft_status_t status, int origin)
{
    int right = (comm->rank + 1) % comm->size;
    struct weft_comm_notice *n = &comm->notice_out;

    if (comm->failed != WEFT_OK || !weft__status_breaks_comm(status) || comm->handle == NULL) {
        return status;
    }
    comm->failed = status;
    snprintf(comm->failed_msg, sizeof(comm->failed_msg), "%s", weft__error_detail());
    /* timeouts and dead peers are logged where they are found (as errors);
     * a rank that learns of a failure from a peer's notice says so, as a
     * warning: the flight recorder's dump that follows on every rank then
     * comes with its reason, also on the ranks whose own deadline had not
     * yet passed */
    weft__log(origin >= 0                   ? WEFT_LOG_WARN
              : status == WEFT_ERR_MISMATCH ? WEFT_LOG_ERROR
                                            : WEFT_LOG_INFO,
              "communicator %u failed: %s", comm->id, comm->failed_msg);
    if (status != WEFT_ERR_ABORTED && comm->size > 1 && right != origin) {
        /* aborting is local; the right neighbour knows already */
        n->status = (int32_t)status;
        n->origin = (int32_t)(origin >= 0 ? origin : comm->rank);
        snprintf(n->text, sizeof(n->text), "%s",
                 origin >= 0 ? comm->notice_in.text : comm->failed_msg);
        if (comm->p2p->isend(comm->p2p_ep, right, n, sizeof(*n), WEFT_MEM_HOST, notice_tag(comm),
                             &comm->notice_send) != WEFT_OK) {
            comm->notice_send = NULL;
        }
    }
    /* after the notice: the layers above dump what this rank ran, and a
     * file takes time the other ranks should not wait for */
    if (comm->up != NULL && comm->up->failed != NULL) {
        comm->up->failed(comm, status);
    }
    return status;
}

weft_status_t weft__comm_fail(struct weft_comm *comm, weft_status_t status)
{
    return fail_from(comm, status, -1);
}

weft_status_t weft__comm_health(struct weft_comm *comm)
{
    int failed;

    if (comm->up != NULL && comm->up->poll != NULL) {
        comm->up->poll(comm);
    }
    if (WEFT_UNLIKELY(comm->failed != WEFT_OK)) {
        return weft__error(comm->failed, "communicator failed earlier: %s", comm->failed_msg);
    }
    if (WEFT_UNLIKELY(comm->notice_recv == NULL) && comm->size > 1) {
        notice_post(comm);
    }
    if (comm->notice_recv != NULL && notice_arrived(comm)) {
        return weft__error(comm->failed, "communicator failed: %s", comm->failed_msg);
    }
    if (atomic_load_explicit(&comm->aborted, memory_order_relaxed)) {
        return weft__error(WEFT_ERR_ABORTED, "communicator aborted by weft_comm_abort");
    }
    /* a dead peer breaks the communicator wherever it is seen first (the
     * notice tells the others, the layers above dump) */
    if (comm->boot->failed_rank != NULL &&
        (failed = comm->boot->failed_rank(comm->boot_ctx)) >= 0) {
        return fail_from(comm,
                         weft__error(WEFT_ERR_PEER_FAILED, "rank %d failed (its process is gone)",
                                     failed),
                         -1);
    }
    if (comm->up != NULL && comm->up->health != NULL) {
        weft_status_t status = comm->up->health(comm);

        return status == WEFT_OK ? WEFT_OK : fail_from(comm, status, -1);
    }
    return WEFT_OK;
}

int weft__usable_cores(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        return CPU_COUNT(&set);
    }
    return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

/* now_ns + t seconds (UINT64_MAX for inf or more than 1e9 s) */
static uint64_t deadline_after(double t, uint64_t now_ns)
{
    if (isinf(t) || t > 1e9) {
        return UINT64_MAX;
    }
    return now_ns + (uint64_t)(t * 1e9);
}

uint64_t weft__deadline_ns(void)
{
    return deadline_after(weft__runtime_config.timeout, weft__time_ns());
}

uint64_t weft__comm_deadline_from(const struct weft_comm *comm, uint64_t now_ns)
{
    return deadline_after(comm->timeout_s > 0 ? comm->timeout_s : weft__runtime_config.timeout,
                          now_ns);
}

uint64_t weft__comm_deadline_ns(const struct weft_comm *comm)
{
    return weft__comm_deadline_from(comm, weft__time_ns());
}

int weft__comm_world_rank(struct weft_comm *comm, int rank)
{
    while (comm->parent != NULL && rank >= 0) {
        if (comm->p2p_ep == NULL || rank >= comm->size) {
            return -1;
        }
        rank = comm->parent_rank[rank];
        comm = comm->parent;
    }
    return rank;
}
