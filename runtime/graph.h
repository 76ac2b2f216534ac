/*
 * Capture of stream-ordered work into graphs (runtime/graph.c): the hooks
 * of the calls that queue work on a stream.
 */
#ifndef WEFT_RUNTIME_GRAPH_H
#define WEFT_RUNTIME_GRAPH_H

#include "coll/coll.h"

struct weft_comm;

/* 1 while stream captures (cheap when no stream does). */
int weft__graph_capturing(void *stream);
/* Record a checked call in stream's graph instead of queueing it. */
weft_status_t weft__graph_record_copy(void *stream, void *dst, const void *src, size_t bytes,
                                      const char *call);
weft_status_t weft__graph_record_coll(void *stream, struct weft_comm *comm,
                                      const weft_coll_args_t *args, const char *call);
weft_status_t weft__graph_record_p2p(void *stream, struct weft_comm *comm, int is_send, void *buf,
                                     size_t count, weft_dtype_t dtype, int peer, int tag,
                                     const char *call);
/* A group's sends and receives on one communicator (parts: malloc'd, owned by
 * the graph once recorded), launched between weft_group_start and end. */
struct weft_p2p_part;
weft_status_t weft__graph_record_group(void *stream, struct weft_comm *comm,
                                       struct weft_p2p_part *parts, int nparts, const char *call);
/* The checks of weft_memcpy_async (call names the caller): the stream's table in *dev_p. */
struct weft_device_ops;
weft_status_t weft__memcpy_check(void *dst, const void *src, size_t bytes, void *stream,
                                 const char *call, const struct weft_device_ops **dev_p);
/* A stream being destroyed: its capture, if any, is dropped. */
void weft__graph_stream_gone(void *stream);

#endif /* WEFT_RUNTIME_GRAPH_H */
