/*
 * Requests: a handle on a started schedule. Testing or waiting progresses
 * every unfinished operation of the request's communicator; freeing an
 * unfinished request detaches its schedule, which completes on its own
 * during later progress of that communicator (or is cancelled when the
 * communicator is destroyed).
 */
#include "runtime/request.h"

#include <stdlib.h>

#define WEFT_REQUEST_MAGIC 0x72657175u /* "requ" */

struct weft_request {
    uint32_t magic;
    weft_sched_t *s; /* NULL once finished and released */
    weft_status_t status;
};

weft_status_t weft__request_new(weft_sched_t *s, weft_request_t *req_p)
{
    weft_request_t req = calloc(1, sizeof(*req));

    if (req == NULL) {
        if (s != NULL) {
            weft__sched_detach(s);
        }
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a request");
    }
    req->magic = WEFT_REQUEST_MAGIC;
    req->s = s;
    req->status = s != NULL ? WEFT_INPROGRESS : WEFT_OK;
    *req_p = req;
    return WEFT_OK;
}

static weft_status_t check(weft_request_t req, const char *call)
{
    if (req == NULL || req->magic != WEFT_REQUEST_MAGIC) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: req is %s", call,
                           req == NULL ? "NULL" : "not a live weft request");
    }
    return WEFT_OK;
}

/* The schedule finished: keep its status, give it back. */
static void settle(weft_request_t req, weft_status_t status)
{
    req->status = status;
    weft__sched_destroy(req->s);
    req->s = NULL;
}

WEFT_EXPORT weft_status_t weft_test(weft_request_t req, int *done_p)
{
    weft_status_t status = check(req, "weft_test");

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

WEFT_EXPORT weft_status_t weft_wait(weft_request_t req)
{
    weft_status_t status = check(req, "weft_wait");

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
        weft_status_t status = check(reqs[i], "weft_waitall");

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

WEFT_EXPORT weft_status_t weft_request_free(weft_request_t req)
{
    weft_status_t status = check(req, "weft_request_free");

    if (status != WEFT_OK) {
        return status;
    }
    if (req->s != NULL) {
        weft__sched_detach(req->s);
    }
    req->magic = 0;
    free(req);
    return WEFT_OK;
}
