/* Point-to-point operations as schedules (runtime/p2p.c). */
#ifndef WEFT_RUNTIME_P2P_H
#define WEFT_RUNTIME_P2P_H

#include "coll/sched.h"

/* Build and start the one-task schedule of a checked send or receive. */
weft_status_t weft__p2p_start(const char *call, int is_send, void *buf, size_t count,
                              weft_dtype_t dtype, int peer, int tag, struct weft_comm *comm,
                              weft_sched_t **sched_p);

#endif /* WEFT_RUNTIME_P2P_H */
