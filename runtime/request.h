/* Requests of nonblocking operations (weft_i<collective>). */
#ifndef WEFT_RUNTIME_REQUEST_H
#define WEFT_RUNTIME_REQUEST_H

#include "coll/sched.h"

/* A request for started schedule s (it waits for, or detaches, s); s NULL:
 * an operation with nothing to do, already complete. */
weft_status_t weft__request_new(weft_sched_t *s, weft_request_t *req_p);

#endif /* WEFT_RUNTIME_REQUEST_H */
