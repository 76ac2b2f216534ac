/*
 * Thread bootstrap: ranks that are threads of one process meet in a shared
 * structure (for tests and in-process benchmarks).
 */
#ifndef WEFT_BOOTSTRAP_THREAD_H
#define WEFT_BOOTSTRAP_THREAD_H

#include "bootstrap/bootstrap.h"

typedef struct weft_thread_boot_world weft_thread_boot_world_t;

extern const weft_bootstrap_ops_t weft__thread_boot_ops;

weft_status_t weft__thread_boot_world_create(int nranks, weft_thread_boot_world_t **world_p);
/* Drop the creator's reference; the world lives until its last context is released. */
void weft__thread_boot_world_release(weft_thread_boot_world_t *world);
weft_status_t weft__thread_boot_ctx_create(weft_thread_boot_world_t *world, int rank,
                                           void **ctx_p);

#endif /* WEFT_BOOTSTRAP_THREAD_H */
