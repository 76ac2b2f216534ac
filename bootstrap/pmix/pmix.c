/* PMIx bootstrap: Put/Commit/Fence/Get. PMIx codes are translated here only. */
#include "bootstrap/pmix/pmix.h"

#include <pmix.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pmix_ctx {
    pmix_proc_t self;
    int size;
    unsigned exchange; /* allgathers done: names each one's key */
} pmix_ctx_t;

static pthread_mutex_t pmix_lock = PTHREAD_MUTEX_INITIALIZER;
static int pmix_refs;
static pmix_proc_t pmix_self;

int weft__pmix_launched(void)
{
    return getenv("PMIX_NAMESPACE") != NULL && getenv("PMIX_RANK") != NULL;
}

static weft_status_t pmix_error(pmix_status_t rc, const char *what)
{
    weft_status_t status = rc == PMIX_ERR_TIMEOUT ? WEFT_ERR_TIMEOUT : WEFT_ERR_BOOTSTRAP;

    return weft__error(status, "PMIx %s failed: %s", what, PMIx_Error_string(rc));
}

/* Seconds left before deadline_ns, at least 1 (PMIx takes whole seconds; 0 means forever). */
static int timeout_seconds(uint64_t deadline_ns)
{
    uint64_t now = weft__time_ns();

    if (deadline_ns == UINT64_MAX) {
        return 0;
    }
    if (deadline_ns <= now + 1000000000ull) {
        return 1;
    }
    return (int)((deadline_ns - now) / 1000000000ull);
}

weft_status_t weft__pmix_boot_create(void **ctx_p, int *rank_p, int *size_p)
{
    pmix_ctx_t *ctx = calloc(1, sizeof(*ctx));
    pmix_proc_t wildcard;
    pmix_value_t *val = NULL;
    pmix_status_t rc;
    weft_status_t status = WEFT_OK;

    if (ctx == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate a PMIx context");
    }
    pthread_mutex_lock(&pmix_lock);
    if (pmix_refs == 0) {
        rc = PMIx_Init(&pmix_self, NULL, 0);
        if (rc != PMIX_SUCCESS) {
            status = pmix_error(rc, "init");
        }
    }
    if (status == WEFT_OK) {
        pmix_refs++;
    }
    pthread_mutex_unlock(&pmix_lock);
    if (status != WEFT_OK) {
        free(ctx);
        return status;
    }
    ctx->self = pmix_self;
    PMIX_PROC_CONSTRUCT(&wildcard);
    PMIX_LOAD_PROCID(&wildcard, pmix_self.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Get(&wildcard, PMIX_JOB_SIZE, NULL, 0, &val);
    if (rc != PMIX_SUCCESS || val == NULL || val->type != PMIX_UINT32) {
        status = pmix_error(rc == PMIX_SUCCESS ? PMIX_ERR_BAD_PARAM : rc, "get of the job size");
        if (val != NULL) {
            PMIX_VALUE_RELEASE(val);
        }
        weft__pmix_boot_ops.release(ctx);
        return status;
    }
    ctx->size = (int)val->data.uint32;
    PMIX_VALUE_RELEASE(val);
    *rank_p = (int)pmix_self.rank;
    *size_p = ctx->size;
    *ctx_p = ctx;
    return WEFT_OK;
}

static weft_status_t fence(pmix_ctx_t *ctx, int collect, uint64_t deadline_ns)
{
    pmix_info_t info[2];
    pmix_proc_t wildcard;
    bool flag = true;
    int seconds = timeout_seconds(deadline_ns);
    size_t ninfo = 0;
    pmix_status_t rc;

    PMIX_PROC_CONSTRUCT(&wildcard);
    PMIX_LOAD_PROCID(&wildcard, ctx->self.nspace, PMIX_RANK_WILDCARD);
    if (collect) {
        PMIX_INFO_LOAD(&info[ninfo], PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
        ninfo++;
    }
    if (seconds > 0) {
        PMIX_INFO_LOAD(&info[ninfo], PMIX_TIMEOUT, &seconds, PMIX_INT);
        ninfo++;
    }
    rc = PMIx_Fence(&wildcard, 1, ninfo ? info : NULL, ninfo);
    for (size_t i = 0; i < ninfo; i++) {
        PMIX_INFO_DESTRUCT(&info[i]);
    }
    return rc == PMIX_SUCCESS ? WEFT_OK : pmix_error(rc, "fence");
}

static weft_status_t pmix_allgather(void *ctx_, const void *blob, void *blobs, size_t bytes,
                                    uint64_t deadline_ns)
{
    pmix_ctx_t *ctx = ctx_;
    char key[PMIX_MAX_KEYLEN + 1];
    pmix_value_t value;
    weft_status_t status;
    pmix_status_t rc;

    snprintf(key, sizeof(key), "weft.ag.%u", ctx->exchange++);
    PMIX_VALUE_CONSTRUCT(&value);
    value.type = PMIX_BYTE_OBJECT;
    value.data.bo.bytes = (char *)blob;
    value.data.bo.size = bytes;
    rc = PMIx_Put(PMIX_GLOBAL, key, &value);
    if (rc == PMIX_SUCCESS) {
        rc = PMIx_Commit();
    }
    if (rc != PMIX_SUCCESS) {
        return pmix_error(rc, "put/commit");
    }
    status = fence(ctx, 1, deadline_ns);
    for (int r = 0; status == WEFT_OK && r < ctx->size; r++) {
        pmix_proc_t peer;
        pmix_value_t *got = NULL;

        PMIX_PROC_CONSTRUCT(&peer);
        PMIX_LOAD_PROCID(&peer, ctx->self.nspace, (pmix_rank_t)r);
        rc = PMIx_Get(&peer, key, NULL, 0, &got);
        if (rc != PMIX_SUCCESS) {
            status = pmix_error(rc, "get");
        } else if (got->type != PMIX_BYTE_OBJECT || got->data.bo.size != bytes) {
            status = weft__error(WEFT_ERR_BOOTSTRAP,
                                 "PMIx allgather: rank %d published %zu bytes, expected %zu", r,
                                 got->type == PMIX_BYTE_OBJECT ? got->data.bo.size : 0, bytes);
        } else {
            memcpy((char *)blobs + (size_t)r * bytes, got->data.bo.bytes, bytes);
        }
        if (got != NULL) {
            PMIX_VALUE_RELEASE(got);
        }
    }
    return status;
}

static weft_status_t pmix_barrier(void *ctx, uint64_t deadline_ns)
{
    return fence(ctx, 0, deadline_ns);
}

static void pmix_release(void *ctx)
{
    pthread_mutex_lock(&pmix_lock);
    if (--pmix_refs == 0) {
        PMIx_Finalize(NULL, 0);
    }
    pthread_mutex_unlock(&pmix_lock);
    free(ctx);
}

const weft_bootstrap_ops_t weft__pmix_boot_ops = {
    .name = "pmix",
    .allgather = pmix_allgather,
    .barrier = pmix_barrier,
    .release = pmix_release,
};
