/*
 * PMIx bootstrap: for processes launched by mpirun or srun. Rank and size
 * come from the launcher; allgather is Put + Commit + Fence(collect) + Get,
 * barrier a Fence. PMIx is initialised once per process (reference counted).
 *
 * Threading: one thread drives a context; PMIx itself is thread-safe.
 */
#ifndef WEFT_BOOTSTRAP_PMIX_H
#define WEFT_BOOTSTRAP_PMIX_H

#include "bootstrap/bootstrap.h"

extern const weft_bootstrap_ops_t weft__pmix_boot_ops;

/* 1 when the environment says a PMIx server launched this process. */
int weft__pmix_launched(void);
weft_status_t weft__pmix_boot_create(void **ctx_p, int *rank_p, int *size_p);

#endif /* WEFT_BOOTSTRAP_PMIX_H */
