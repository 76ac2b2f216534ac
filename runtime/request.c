/*
 * Requests: a handle on a started schedule. Testing or waiting progresses
 * every unfinished operation of the request's communicator; freeing an
 * unfinished request detaches its schedule, which completes on its own
 * during later progress of that communicator (or is cancelled when the
 * communicator is destroyed). A request pins its communicator's memory
 * (runtime/comm.h) until its schedule is given back, so that waiting on it
 * after the communicator was destroyed reads what the schedule left (the
 * error it was cancelled with), never freed memory.
 */
#include "runtime/request.h"
#include "runtime/comm.h"

#include <stdio.h>
#include <stdlib.h>

struct weft_request {
    weft_request_t handle;
    weft_sched_t *s; /* NULL once finished and released */
    weft_status_t status;
    int source; /* a finished receive: its message's sender (-1: none) */
};

static weft_handle_table_t requests = WEFT_HANDLE_TABLE_INIT("request", 0xa0);

weft_status_t weft__request_new(weft_sched_t *s, weft_request_t *req_p)
{
    struct weft_request *req = calloc(1, sizeof(*req));
    weft_status_t status = req != NULL ? weft__handle_add(&requests, req, (void **)&req->handle)
                                       : weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a request");

    if (status != WEFT_OK) {
        free(req);
        if (s != NULL) {
            weft__sched_detach(s);
        }
        return status;
    }
    req->s = s;
    req->status = s != NULL ? WEFT_INPROGRESS : WEFT_OK;
    req->source = -1;
    if (s != NULL) {
        weft__comm_pin(weft__sched_comm(s));
    }
    *req_p = req->handle;
    return WEFT_OK;
}

static weft_status_t check(weft_request_t handle, const char *call, struct weft_request **req_p)
{
    char what[48];

    *req_p = weft__handle_get(&requests, handle);
    if (*req_p != NULL) {
        return WEFT_OK;
    }
    snprintf(what, sizeof(what), "%s: req", call); /* formatted for the message only */
    return weft__handle_lookup(&requests, handle, what, (void **)req_p);
}

/* Give the schedule back (finished, or detached to finish on its own) and
 * the communicator's memory with it. */
static void release_sched(struct weft_request *req, int detach)
{
    struct weft_comm *comm = weft__sched_comm(req->s);

    if (detach) {
        weft__sched_detach(req->s);
    } else {
        weft__sched_destroy(req->s);
    }
    req->s = NULL;
    weft__comm_unpin(comm);
}

/* The schedule finished: keep its status, give it back. */
static void settle(struct weft_request *req, weft_status_t status)
{
    req->status = status;
    req->source = status == WEFT_OK ? weft__sched_source(req->s) : -1;
    release_sched(req, 0);
}

WEFT_EXPORT weft_status_t weft_test(weft_request_t handle, int *done_p)
{
    struct weft_request *req;
    weft_status_t status = check(handle, "weft_test", &req);

    if (status != WEFT_OK) {
        return status;
    }
    if (done_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_test: done is NULL");
    }
    if (req->s != NULL && weft__sched_test(req->s, &status)) {
        settle(req, status);
    }
    *done_p = req->s == NULL;
    return req->s == NULL ? req->status : WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_wait(weft_request_t handle)
{
    struct weft_request *req;
    weft_status_t status = check(handle, "weft_wait", &req);

    if (status != WEFT_OK) {
        return status;
    }
    if (req->s != NULL) {
        settle(req, weft__sched_wait(req->s));
    }
    return req->status;
}

WEFT_EXPORT weft_status_t weft_waitall(int n, weft_request_t *reqs)
{
    weft_status_t first = WEFT_OK;

    if (n < 0 || (n > 0 && reqs == NULL)) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_waitall: %s",
                           n < 0 ? "n is negative" : "reqs is NULL");
    }
    for (int i = 0; i < n; i++) {
        struct weft_request *req;
        weft_status_t status = check(reqs[i], "weft_waitall", &req);

        if (status != WEFT_OK) {
            return weft__error(status, "weft_waitall: reqs[%d] is not a live request", i);
        }
    }
    for (int i = 0; i < n; i++) {
        weft_status_t status = weft_wait(reqs[i]);

        first = first == WEFT_OK ? status : first;
    }
    return first;
}

WEFT_EXPORT weft_status_t weft_request_source(weft_request_t handle, int *source_p)
{
    struct weft_request *req;
    weft_status_t status = check(handle, "weft_request_source", &req);

    if (status != WEFT_OK) {
        return status;
    }
    if (source_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_request_source: source is NULL");
    }
    if (req->s != NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "weft_request_source: the request is not complete (weft_test or "
                           "weft_wait it first)");
    }
    if (req->source < 0) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "weft_request_source: not a receive that completed with a message "
                           "(status of the request: %s)",
                           weft_status_name(req->status));
    }
    *source_p = req->source;
    return WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_request_free(weft_request_t handle)
{
    struct weft_request *req;
    weft_status_t status = check(handle, "weft_request_free", &req);

    if (status != WEFT_OK) {
        return status;
    }
    if (req->s != NULL) {
        release_sched(req, 1);
    }
    weft__handle_remove(&requests, handle);
    free(req);
    return WEFT_OK;
}
