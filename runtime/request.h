/* Requests of nonblocking operations (weft_i<collective>). */
#ifndef WEFT_RUNTIME_REQUEST_H
#define WEFT_RUNTIME_REQUEST_H

#include "coll/sched.h"

/* A request for started schedule s (it waits for, or detaches, s); s NULL:
 * an operation with nothing to do, already complete. */
weft_status_t weft__request_new(weft_sched_t *s, weft_request_t *req_p);

/* The tail of every nonblocking entry point: `status` is what starting the
 * operation returned; on success *s (NULL: nothing to do) becomes *req_p. */
static inline weft_status_t weft__request_start(weft_status_t status, weft_sched_t *const *s,
                                                weft_request_t *req_p)
{
    return status == WEFT_OK ? weft__request_new(*s, req_p) : status;
}

/* The error of a nonblocking entry point called without a request. */
#define WEFT_REQ_NULL(call) weft__error(WEFT_ERR_INVALID_ARG, "%s: req is NULL", call)

#endif /* WEFT_RUNTIME_REQUEST_H */
