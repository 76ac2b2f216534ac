/*
 * The node's shared-memory segment (coll/shm/segment.c) and the paths
 * around it, on in-process ranks:
 *
 *  - the segment leaves no name in /dev/shm once every local rank mapped it
 *    (names are "/weft-<pid>-<random>"), while every rank keeps a mapping
 *    of the deleted file; destroying the communicators unmaps them;
 *  - slot sizes: rounded down to whole pages, at least one page, capped so
 *    that a node's slots stay within 64 MiB;
 *  - WEFT_SHM=no: no segment, no mapping, and every collective still right,
 *    also where WEFT_TUNE names "shm" or "hier";
 *  - "shm" forced on virtual nodes (WEFT_RANKS_PER_NODE), where a node holds
 *    only part of the communicator, and "hier" forced on one node: the
 *    selection drops the rule and the results are right;
 *  - hundreds of ranks on one node: the reductions that combine every local
 *    rank's slot at once;
 *  - after a crash: the name of a segment whose creator was killed before it
 *    unlinked it is removed by the next setup, and only such names (not a
 *    live process's, another user's, another pid namespace's);
 *  - fields read from shared memory: segment headers whose sizes disagree
 *    with the file (an overflowing slot size among them), or a file of
 *    another user, are refused with nothing mapped; a pid whose process
 *    start time is not the one a rank published counts as a dead rank.
 *
 * Every collective the shared-memory algorithms implement is checked
 * against a reference computed here from inputs that are deterministic per
 * (call, rank, element); int32 sums and maxima are exact in any order.
 */
#include <criterion/criterion.h>

#include <math.h>
#include "runtime/comm.h"

#include "coll/coll.h"
#include "coll/cost.h"
#include "coll/diag/record.h"
#include "coll/shm/shm.h"
#include "base/proc.h"
#include "runtime/config.h"
#include "runtime/thread_world.h"
#include "tests/coll/check.h"
#include "tests/coll/device_data.h"
#include "tests/harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_NAMES 16
#define NAME_CHARS 128

/* ------------------------------------------------ segments of this process */

/* Prefix of this process's segment names in /dev/shm (shm_open drops the '/'). */
static void seg_prefix(char *buf, size_t cap)
{
    snprintf(buf, cap, "weft-%ld-", (long)getpid());
}

/* Entries of /dev/shm that this process created; -1 when it cannot be
 * listed. (Called from rank threads too: no Criterion assertion here.) */
static int dev_shm_count(void)
{
    char prefix[64];
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int n = 0;

    if (d == NULL) {
        return -1;
    }
    seg_prefix(prefix, sizeof(prefix));
    while ((e = readdir(d)) != NULL) {
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    }
    closedir(d);
    return n;
}

typedef struct mappings {
    int total;   /* mappings of this process's segments */
    int deleted; /* of them, of files no longer in /dev/shm */
    int nnames;  /* distinct segments */
    char names[MAX_NAMES][NAME_CHARS];
} mappings_t;

/* This process's mappings of its own segments, from /proc/self/maps. */
static int read_mappings(mappings_t *m)
{
    char prefix[96], line[512];
    FILE *f = fopen("/proc/self/maps", "r");

    memset(m, 0, sizeof(*m));
    if (f == NULL) {
        return -1;
    }
    snprintf(prefix, sizeof(prefix), "/dev/shm/weft-%ld-", (long)getpid());
    while (fgets(line, sizeof(line), f) != NULL) {
        char *path = strstr(line, prefix), *end;
        int known = 0;

        if (path == NULL) {
            continue;
        }
        m->total++;
        m->deleted += strstr(path, " (deleted)") != NULL;
        end = path + strcspn(path, " \n");
        *end = '\0';
        for (int i = 0; i < m->nnames; i++) {
            known |= strcmp(m->names[i], path) == 0;
        }
        if (!known && m->nnames < MAX_NAMES) {
            snprintf(m->names[m->nnames++], NAME_CHARS, "%s", path);
        }
    }
    fclose(f);
    return 0;
}

/* --------------------------------------------------------- shared state */

typedef struct shared {
    int nranks;
    pthread_barrier_t barrier;
    atomic_long checked;
    atomic_int with_shm;   /* ranks whose communicator had a segment */
    atomic_int with_nodes; /* ranks that saw several nodes */
    /* segment_lifetime: what rank 0 saw while every rank was inside */
    int seen_dev_shm[3];
    mappings_t seen[3];
    size_t slot_bytes;
    int local_size;
} shared_t;

static void shared_init(shared_t *sh, int p)
{
    memset(sh, 0, sizeof(*sh));
    sh->nranks = p;
    pthread_barrier_init(&sh->barrier, NULL, (unsigned)p);
}

static void shared_done(shared_t *sh)
{
    pthread_barrier_destroy(&sh->barrier);
}

static void run_world(shared_t *sh, int p, uint64_t seed, weft_thread_rank_fn fn)
{
    weft_thread_world_opts_t opts = {.nranks = p, .seed = seed};

    cr_assert_eq(weft__thread_world_run(&opts, fn, sh), WEFT_OK, "thread world of %d ranks: %s", p,
                 weft_last_error());
    cr_assert_eq(harness_fail_count(), 0, "p=%d, %d ranks per node: %d failure(s); first: %s", p,
                 weft__runtime_config.ranks_per_node, harness_fail_count(),
                 harness_fail_message(0));
}

/* ------------------------------------------------------- the collectives */

/* element i of rank r's input to call k: small, so sums are exact */
static int32_t val(int k, int r, size_t i)
{
    return (int32_t)(check_mix(((uint64_t)k << 40) ^ ((uint64_t)r << 24) ^ i) % 2001) - 1000;
}

static int32_t reduced(weft_op_t op, int k, int p, size_t i)
{
    int32_t acc = val(k, 0, i);

    for (int r = 1; r < p; r++) {
        int32_t v = val(k, r, i);

        acc = op == WEFT_MAX ? (v > acc ? v : acc) : acc + v;
    }
    return acc;
}

static int32_t *alloc32(size_t n)
{
    int32_t *b = malloc((n + 1) * sizeof(int32_t));

    if (b == NULL) {
        fprintf(stderr, "test out of memory\n");
        abort();
    }
    for (size_t i = 0; i <= n; i++) {
        b[i] = INT32_MIN + 7; /* never a result; b[n] is a guard */
    }
    return b;
}

/* Irregular counts (zeros among them) for the v variants. */
static size_t vcount(int k, int q, size_t n)
{
    uint64_t h = check_mix((uint64_t)k * 977 + (uint64_t)q);

    return h % 4 == 0 ? 0 : (size_t)(h >> 8) % (2 * n + 1);
}

/* The checker's view of call k's data (tests/coll/check.h). */
typedef struct data_ctx {
    int k, p;
    weft_op_t op;
} data_ctx_t;

static void data_value(const void *ctx, int q, size_t i, void *dst)
{
    int32_t v = val(((const data_ctx_t *)ctx)->k, q, i);

    memcpy(dst, &v, 4);
}

static void data_reduced(const void *ctx, size_t i, void *dst)
{
    const data_ctx_t *x = ctx;
    int32_t v = reduced(x->op, x->k, x->p, i);

    memcpy(dst, &v, 4);
}

/* The calls of run_collectives, in order; roots and layouts below. */
static const struct {
    weft_coll_kind_t kind;
    weft_op_t op;
} shm_calls[] = {
    {WEFT_COLL_ALLREDUCE, WEFT_SUM},  {WEFT_COLL_REDUCE_SCATTER, WEFT_MAX},
    {WEFT_COLL_ALLGATHER, WEFT_SUM},  {WEFT_COLL_BCAST, WEFT_SUM},
    {WEFT_COLL_REDUCE, WEFT_SUM},     {WEFT_COLL_BARRIER, WEFT_SUM},
    {WEFT_COLL_ALLGATHERV, WEFT_SUM}, {WEFT_COLL_REDUCE_SCATTER_V, WEFT_SUM},
};

/* One call k of n elements on comm, checked: the result, the gaps and the
 * guard after every buffer, the send buffer unchanged. 0, or -1 once a
 * failure is recorded. */
static int run_one(weft_comm_t comm, int rank, int p, size_t n, int c, int k)
{
    static const int32_t fill_elem = INT32_MIN + 7; /* never a result */
    const weft_coll_kind_t kind = shm_calls[c].kind;
    const data_ctx_t x = {k, p, shm_calls[c].op};
    const check_data_t data = {4, data_value, data_reduced, &fill_elem, &x};
    size_t *counts = calloc((size_t)p, sizeof(size_t));
    size_t *displs = calloc((size_t)p, sizeof(size_t));
    check_shape_t shape = {
        .kind = kind, .p = p, .rank = rank, .n = n, .counts = counts, .displs = displs};
    size_t sext = 0, rext = 0;
    int32_t *in = NULL, *out = NULL;
    weft_status_t st;
    char msg[256];
    int rc = -1;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            char msg_[320];                                                                        \
            snprintf(msg_, sizeof(msg_), __VA_ARGS__);                                             \
            HARNESS_FAIL("%s count %zu (call %d) on rank %d of %d: %s",                            \
                         weft__coll_kind_name(kind), n, k, rank, p, msg_);                         \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

    CHECK(counts != NULL && displs != NULL, "out of memory");
    shape.root = kind == WEFT_COLL_BCAST ? (int)(n % (size_t)p) : (int)((n + 1) % (size_t)p);
    if (kind == WEFT_COLL_ALLGATHERV) {
        /* blocks in reverse rank order, one element of gap after each */
        for (int q = p - 1; q >= 0; q--) {
            counts[q] = vcount(k, q, n);
            displs[q] = shape.rext;
            shape.rext += counts[q] + 1;
        }
    } else if (kind == WEFT_COLL_REDUCE_SCATTER_V) {
        for (int q = 0; q < p; q++) {
            counts[q] = vcount(k, q, n);
        }
    }
    /* the buffers MPI gives this rank (bcast: one, the root's data at the
     * root), each with a guard element after it */
    if (check_has(&shape, CHECK_SEND) && kind != WEFT_COLL_BCAST) {
        sext = check_extent(&shape, CHECK_SEND);
        in = alloc32(sext);
        check_image(&shape, CHECK_SEND, &data, in);
    }
    if (check_has(&shape, CHECK_RECV)) {
        rext = check_extent(&shape, CHECK_RECV);
        out = alloc32(rext);
        if (kind == WEFT_COLL_BCAST && rank == shape.root) {
            check_image(&shape, CHECK_SEND, &data, out);
        }
    }
    st = check_call(&shape, CHECK_BLOCKING, in, out, WEFT_INT32, shm_calls[c].op, comm, NULL);
    CHECK(st == WEFT_OK, "%s (%s)", weft_status_string(st), weft_last_error());
    CHECK(out == NULL || check_diff(&shape, CHECK_RECV, &data, out, msg, sizeof(msg)) < 0, "%s",
          msg);
    CHECK(out == NULL || out[rext] == fill_elem, "wrote past the result");
    CHECK(in == NULL || check_diff(&shape, CHECK_SEND, &data, in, msg, sizeof(msg)) < 0,
          "sendbuf changed: %s", msg);
    CHECK(in == NULL || in[sext] == fill_elem, "wrote past the sendbuf");
    rc = 0;
out:
#undef CHECK
    free(in);
    free(out);
    free(counts);
    free(displs);
    return rc;
}

/*
 * allreduce, reduce_scatter, allgather, bcast, reduce, barrier, allgatherv
 * and reduce_scatter_v of n elements on comm, each checked; k0 numbers the
 * first call (the same on every rank).
 */
static void run_collectives(shared_t *sh, weft_comm_t comm, size_t n, int k0)
{
    int rank, p;

    weft_comm_rank(comm, &rank);
    weft_comm_size(comm, &p);
    for (int c = 0; c < (int)(sizeof(shm_calls) / sizeof(shm_calls[0])); c++) {
        if (run_one(comm, rank, p, n, c, k0 + c) != 0) {
            return;
        }
    }
    atomic_fetch_add(&sh->checked, 1);
}

/* counts: one element, one page and a bit (several rounds with one-page
 * slots), and zero */
static const size_t test_counts[] = {1, 1031, 0, 5003};
#define NCOUNTS ((int)(sizeof(test_counts) / sizeof(test_counts[0])))

static void collectives_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;

    (void)rank;
    atomic_fetch_add(&sh->with_shm, weft__comm_of(comm)->coll->shm != NULL);
    atomic_fetch_add(&sh->with_nodes,
                     weft__comm_of(comm)->node != NULL && weft__comm_of(comm)->node->nnodes > 1);
    for (int c = 0; c < NCOUNTS && harness_fail_count() == 0; c++) {
        run_collectives(sh, comm, test_counts[c], c * 16);
    }
}

/* WEFT_TUNE rules that force algo for every collective that has it. */
static void force_all(const char *algo)
{
    static const char *const kinds[] = {"allreduce", "reduce_scatter", "reduce_scatter_v",
                                        "allgather", "allgatherv",     "bcast",
                                        "reduce",    "barrier"};
    char rules[512] = "";
    size_t len = 0;

    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        weft_coll_kind_t kind;

        for (kind = 0; kind < WEFT_COLL_KIND_COUNT; kind++) {
            if (strcmp(weft__coll_kind_name(kind), kinds[i]) == 0) {
                break;
            }
        }
        if (weft__coll_find(kind, algo) != NULL) {
            len += (size_t)snprintf(rules + len, sizeof(rules) - len, "%s%s:0-inf:%s",
                                    len ? "," : "", kinds[i], algo);
        }
    }
    cr_assert_eq(weft__coll_tune_load(rules), WEFT_OK, "%s: %s", rules, weft_last_error());
}

static void init(void)
{
    setenv("WEFT_LOG_LEVEL", "error", 1);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
    weft__coll_config.shm_slot = 4096;
    weft__coll_config.shm_small = 64;
}

/* --------------------------------------------------- 1. segment lifetime */

/* Rank 0 looks at /dev/shm and the mappings while every rank is inside:
 * [0] with the world only, [1] with the world and both halves of a split,
 * [2] after the halves are destroyed. */
static void lifetime_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    weft_comm_t half = NULL;

    atomic_fetch_add(&sh->with_shm, weft__comm_of(comm)->coll->shm != NULL);
    if (rank == 0 && weft__comm_of(comm)->coll->shm != NULL) {
        sh->slot_bytes = weft__comm_of(comm)->coll->shm->slot_bytes;
        sh->local_size = weft__comm_of(comm)->coll->shm->L;
    }
    pthread_barrier_wait(&sh->barrier);
    if (rank == 0) {
        sh->seen_dev_shm[0] = dev_shm_count();
        read_mappings(&sh->seen[0]);
    }
    pthread_barrier_wait(&sh->barrier);
    /* the segment works without its name */
    run_collectives(sh, comm, 1031, 1);
    if (weft_comm_split(comm, rank < sh->nranks / 2, rank, &half) != WEFT_OK) {
        HARNESS_FAIL("rank %d: split: %s", rank, weft_last_error());
        half = NULL; /* the others still meet this rank at every barrier */
    }
    atomic_fetch_add(&sh->with_shm, half != NULL && weft__comm_of(half)->coll->shm != NULL);
    pthread_barrier_wait(&sh->barrier);
    if (rank == 0) {
        sh->seen_dev_shm[1] = dev_shm_count();
        read_mappings(&sh->seen[1]);
    }
    pthread_barrier_wait(&sh->barrier);
    if (half != NULL) {
        run_collectives(sh, half, 1031, 101);
        run_collectives(sh, comm, 5003, 201);
        weft_comm_destroy(half);
    }
    pthread_barrier_wait(&sh->barrier);
    if (rank == 0) {
        sh->seen_dev_shm[2] = dev_shm_count();
        read_mappings(&sh->seen[2]);
    }
    pthread_barrier_wait(&sh->barrier);
}

static void expect_mappings(const mappings_t *m, int total, int segments, const char *when)
{
    cr_assert_eq(m->total, total, "%s: %d mappings of this process's segments, want %d", when,
                 m->total, total);
    cr_assert_eq(m->deleted, total, "%s: %d of %d mappings are of files still in /dev/shm", when,
                 total - m->deleted, total);
    cr_assert_eq(m->nnames, segments, "%s: %d distinct segments, want %d", when, m->nnames,
                 segments);
}

/*
 * A world of 4 ranks on one node, then on two virtual nodes of 2: no name
 * in /dev/shm at any point while the ranks run; one mapping per rank and
 * segment (the world's, then the halves'); none after the world is gone.
 */
Test(segment, unlinked_once_mapped_and_unmapped_at_destroy, .timeout = 60)
{
    mappings_t m;

    init();
    cr_assert_eq(read_mappings(&m), 0, "cannot read /proc/self/maps");
    cr_assert_eq(dev_shm_count(), 0, "this new process already has names in /dev/shm");
    cr_assert_eq(m.total, 0);
    for (int rpn = 0; rpn <= 2; rpn += 2) {
        const char *layout = rpn ? "2 nodes of 2" : "one node of 4";
        shared_t sh;

        weft__runtime_config.ranks_per_node = rpn;
        shared_init(&sh, 4);
        run_world(&sh, 4, 1, lifetime_body);
        /* world and both halves on every rank */
        cr_assert_eq(atomic_load(&sh.with_shm), 8, "%s: %d of 8 communicators had a segment",
                     layout, atomic_load(&sh.with_shm));
        cr_assert_eq(atomic_load(&sh.checked), 3 * 4, "%s: %ld of 12 rank checks passed", layout,
                     atomic_load(&sh.checked));
        for (int i = 0; i < 3; i++) {
            cr_assert_eq(sh.seen_dev_shm[i], 0,
                         "%s: /dev/shm held %d of this process's segments while its ranks ran "
                         "(point %d)",
                         layout, sh.seen_dev_shm[i], i);
        }
        /* one node of 4: world 4 mappings of 1 segment; halves 2 x 2 more.
         * 2 nodes of 2: world 2 segments of 2; the halves are the nodes */
        expect_mappings(&sh.seen[0], 4, rpn ? 2 : 1, "with the world");
        expect_mappings(&sh.seen[1], 8, rpn ? 4 : 3, "with the world and its halves");
        expect_mappings(&sh.seen[2], 4, rpn ? 2 : 1, "after the halves were destroyed");
        cr_assert_eq(sh.local_size, rpn ? 2 : 4);
        cr_assert_eq(sh.slot_bytes, 4096);
        shared_done(&sh);
        cr_assert_eq(read_mappings(&m), 0);
        cr_assert_eq(m.total, 0, "%s: %d mappings left after the world ended", layout, m.total);
        cr_assert_eq(dev_shm_count(), 0, "%s: names left in /dev/shm", layout);
    }
    weft_finalize();
}

/* ---------------------------------------------------------- 2. slot sizes */

static void slot_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;

    atomic_fetch_add(&sh->with_shm, weft__comm_of(comm)->coll->shm != NULL);
    if (rank == 0 && weft__comm_of(comm)->coll->shm != NULL) {
        sh->slot_bytes = weft__comm_of(comm)->coll->shm->slot_bytes;
        sh->local_size = weft__comm_of(comm)->coll->shm->L;
    }
    run_collectives(sh, comm, 5003, 7);
}

Test(segment, slot_sizes, .timeout = 60)
{
    static const struct {
        size_t asked;
        int p;
        size_t want;
    } cases[] = {
        {4096, 3, 4096},                           /* one page */
        {5000, 3, 4096},                           /* rounded down to pages */
        {100, 2, 4096},                            /* at least one page */
        {(size_t)64 << 20, 4, (size_t)8 << 20},    /* 2 x 4 slots within 64 MiB */
        {(size_t)1 << 20, 5, (size_t)1 << 20},     /* 10 MiB in all: as asked */
        {(size_t)64 << 20, 6, (size_t)5460 << 10}, /* 64 MiB / 12, in whole pages */
    };

    init();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        shared_t sh;

        weft__coll_config.shm_slot = cases[i].asked;
        shared_init(&sh, cases[i].p);
        run_world(&sh, cases[i].p, 3, slot_body);
        cr_assert_eq(atomic_load(&sh.with_shm), cases[i].p);
        cr_assert_eq(sh.local_size, cases[i].p);
        cr_assert_eq(sh.slot_bytes, cases[i].want,
                     "WEFT_SHM_SLOT=%zu, %d ranks: slots of %zu bytes", cases[i].asked, cases[i].p,
                     sh.slot_bytes);
        cr_assert_eq(atomic_load(&sh.checked), cases[i].p);
        shared_done(&sh);
    }
    weft_finalize();
}

/* One flag handoff through the segment, measured between local ranks 0
 * and 1 (weft__cost_measure_shm_alpha, which a communicator between
 * processes runs with its alpha measurement): the cost model takes the
 * agreed value where alpha is measured, the configured
 * WEFT_COST_SHM_ALPHA_US where not (in-process communicators measure
 * nothing: the test measures and agrees as world.c does). */
static const char *selected(weft_comm_t comm, weft_coll_kind_t kind, size_t bytes);

typedef struct handoff_shared {
    shared_t sh;
    double handoff[2], shm_alpha_unmeasured[2], shm_alpha[2];
    double oversub_alpha[2], oversub_shm_alpha[2]; /* more ranks than cores */
    const char *small_allreduce_unmeasured[2], *small_allreduce[2];
} handoff_shared_t;

static void handoff_body(weft_comm_t comm, int rank, void *arg)
{
    handoff_shared_t *hs = arg;
    struct weft_comm *c = weft__comm_of(comm);
    weft_cost_params_t params;

    /* both ranks start it together (as world.c's agreed measurement runs right after a
     * collective): a rank that returns from the communicator's creation late on a loaded machine
     * would be given up on after 100 ms */
    pthread_barrier_wait(&hs->sh.barrier);
    hs->handoff[rank] = weft__cost_measure_shm_alpha(c);
    weft__cost_params(c, &params); /* nothing measured: the configured handoff */
    hs->shm_alpha_unmeasured[rank] = params.shm_alpha;
    hs->small_allreduce_unmeasured[rank] = selected(comm, WEFT_COLL_ALLREDUCE, 8);
    pthread_barrier_wait(&hs->sh.barrier);
    c->coll->cost_alpha = 2e-6;
    c->coll->cost_beta = 1.0 / 8e9;
    c->coll->cost_gamma = 1.0 / 5e9;
    c->coll->cost_shm_alpha = fmax(hs->handoff[0], hs->handoff[1]); /* the agreement */
    c->coll->cost_measured = 1;
    weft__cost_params(c, &params);
    hs->shm_alpha[rank] = params.shm_alpha;
    hs->small_allreduce[rank] = selected(comm, WEFT_COLL_ALLREDUCE, 8);
    pthread_barrier_wait(&hs->sh.barrier); /* the test's settings below are the process's */
    if (rank == 0) {
        weft__coll_config.cost_oversub_us = 40;
        weft__coll_config.cost_oversub_shm_us = 3;
    }
    pthread_barrier_wait(&hs->sh.barrier);
    c->oversubscribed = c->oversubscribed_any = 1; /* the model reads the latter */
    weft__cost_params(c, &params);
    hs->oversub_alpha[rank] = params.alpha;
    hs->oversub_shm_alpha[rank] = params.shm_alpha;
    c->oversubscribed = c->oversubscribed_any = 0;
    collectives_body(comm, rank, &hs->sh);
}

Test(segment, handoff_measured, .timeout = 60)
{
    handoff_shared_t hs = {0};

    init();
    weft__coll_config.cost_shm_alpha_us = 50; /* slower than any point-to-point message */
    shared_init(&hs.sh, 2);
    run_world(&hs.sh, 2, 11, handoff_body);
    cr_assert_eq(atomic_load(&hs.sh.with_shm), 2);
    /* local rank 0 answers; a loaded machine measures slow handoffs: any
     * time below the measurement's 100 ms give-up */
    cr_expect(hs.handoff[0] > 0 && hs.handoff[0] < 0.1, "handoff %g s measured", hs.handoff[0]);
    cr_expect_eq(hs.handoff[1], 0, "local rank 1 answered %g s", hs.handoff[1]);
    for (int r = 0; r < 2; r++) {
        cr_expect(fabs(hs.shm_alpha_unmeasured[r] - 50e-6) < 1e-12,
                  "rank %d: without a measured alpha the configured 50 us, not %g s", r,
                  hs.shm_alpha_unmeasured[r]);
        cr_expect_str_neq(hs.small_allreduce_unmeasured[r], "shm",
                          "a 50 us handoff against a 2 us message");
        cr_expect_eq(hs.shm_alpha[r], hs.handoff[0], "rank %d: the cost model's %g s", r,
                     hs.shm_alpha[r]);
        if (hs.handoff[0] < 1e-6) { /* below the 2 us of a message */
            cr_expect_str_eq(hs.small_allreduce[r], "shm");
        }
        /* more ranks than cores: WEFT_COST_OVERSUB_US on messages, WEFT_COST_OVERSUB_SHM_US
         * on the segment's handoffs */
        cr_expect(fabs(hs.oversub_alpha[r] - 42e-6) < 1e-12, "rank %d: alpha %g s, not 42 us", r,
                  hs.oversub_alpha[r]);
        cr_expect(fabs(hs.oversub_shm_alpha[r] - (hs.shm_alpha[r] + 3e-6)) < 1e-12,
                  "rank %d: handoff %g s, not the model's %g s + 3 us", r, hs.oversub_shm_alpha[r],
                  hs.shm_alpha[r]);
    }
    shared_done(&hs.sh);
    weft_finalize();
}

/* How far a rank that reads nobody's data runs ahead of one that has not started: a bcast
 * root, a reduce's or a gather's sender (its data out, the root's to take), a scatter's root.
 * Rounds whose data fits the control lines take WEFT_SHM_LINE_DEPTH of them (the runner
 * finishes that many calls alone), slot rounds two; and no further, or the runner would
 * overwrite what the other has yet to read. */
typedef enum { AHEAD_BCAST, AHEAD_REDUCE, AHEAD_GATHER, AHEAD_SCATTER } ahead_kind_t;

typedef struct ahead_shared {
    shared_t sh;
    ahead_kind_t kind;      /* every one rooted at rank 0 */
    atomic_int runner_done; /* calls the runner has finished */
} ahead_shared_t;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One call of the kind, count elements per rank (a block of gather and scatter), rooted at
 * rank 0, inputs val(k, rank, i) (the root's scatter vector: element i of block q is
 * val(k, 0, q * count + i)); the root's result (every rank's of bcast and scatter) checked. */
static void ahead_call(ahead_kind_t kind, weft_comm_t comm, int rank, size_t count, int k,
                       int32_t *buf, int32_t *out)
{
    static const char *const names[] = {"bcast", "reduce", "gather", "scatter"};
    const size_t in = kind == AHEAD_SCATTER && rank == 0 ? 2 * count : count;
    const size_t result = kind == AHEAD_GATHER ? 2 * count : count;
    const int checked = rank == 0 || kind == AHEAD_BCAST || kind == AHEAD_SCATTER;
    weft_status_t st = WEFT_OK;

    for (size_t i = 0; i < in; i++) {
        buf[i] = kind == AHEAD_BCAST && rank != 0 ? 0 : val(k, rank, i);
    }
    switch (kind) {
    case AHEAD_BCAST:
        st = weft_bcast(buf, count, WEFT_INT32, 0, comm);
        memcpy(out, buf, count * sizeof(*buf));
        break;
    case AHEAD_REDUCE:
        st = weft_reduce(buf, out, count, WEFT_INT32, WEFT_SUM, 0, comm);
        break;
    case AHEAD_GATHER:
        st = weft_gather(buf, out, count, WEFT_INT32, 0, comm);
        break;
    case AHEAD_SCATTER:
        st = weft_scatter(buf, out, count, WEFT_INT32, 0, comm);
        break;
    }
    EXPECT(st == WEFT_OK, "%s %d: %s", names[kind], k, weft_last_error());
    for (size_t i = 0; i < result && checked; i++) {
        int32_t want = kind == AHEAD_REDUCE    ? val(k, 0, i) + val(k, 1, i)
                       : kind == AHEAD_GATHER  ? val(k, (int)(i / count), i % count)
                       : kind == AHEAD_SCATTER ? val(k, 0, (size_t)rank * count + i)
                                               : val(k, 0, i);

        EXPECT(out[i] == want, "rank %d, %s %d, element %zu: %d, want %d", rank, names[kind], k, i,
               out[i], want);
    }
}

static void ahead_phase(ahead_shared_t *as, weft_comm_t comm, int rank, size_t count, int ahead,
                        int k0)
{
    const int calls = ahead + 3;
    const int runner = as->kind == AHEAD_REDUCE || as->kind == AHEAD_GATHER ? 1 : 0;
    int32_t *buf = alloc32(2 * count), *out = alloc32(2 * count);

    pthread_barrier_wait(&as->sh.barrier);
    atomic_store(&as->runner_done, 0);
    pthread_barrier_wait(&as->sh.barrier);
    if (rank != runner) {
        double deadline = now_s() + 10;

        while (atomic_load(&as->runner_done) < ahead && now_s() < deadline) {
            usleep(1000);
        }
        usleep(50000); /* time for a runner that may run further to do so */
        EXPECT(atomic_load(&as->runner_done) == ahead,
               "%zu-element calls of kind %d: rank %d finished %d before rank %d started, not %d",
               count, (int)as->kind, runner, atomic_load(&as->runner_done), rank, ahead);
    }
    for (int k = 0; k < calls; k++) {
        ahead_call(as->kind, comm, rank, count, k0 + k, buf, out);
        if (rank == runner) {
            atomic_fetch_add(&as->runner_done, 1);
        }
    }
    free(buf);
    free(out);
}

static void ahead_body(weft_comm_t comm, int rank, void *arg)
{
    ahead_shared_t *as = arg;

    atomic_fetch_add(&as->sh.with_shm, weft__comm_of(comm)->coll->shm != NULL);
    ahead_phase(as, comm, rank, 2, WEFT_SHM_LINE_DEPTH, 100); /* 8 bytes: in the lines */
    /* 12 bytes: in the wide lines (a scatter's pieces: in the slots) */
    ahead_phase(as, comm, rank, 3, as->kind == AHEAD_SCATTER ? 2 : WEFT_SHM_LINE_DEPTH, 200);
    ahead_phase(as, comm, rank, 13, 2, 300); /* 52 bytes: in the slots */
}

static void run_ahead(ahead_kind_t kind)
{
    ahead_shared_t as = {.kind = kind};

    init();
    force_all("shm");
    shared_init(&as.sh, 2);
    atomic_init(&as.runner_done, 0);
    run_world(&as.sh, 2, 5, ahead_body);
    cr_assert_eq(atomic_load(&as.sh.with_shm), 2);
    shared_done(&as.sh);
    weft_finalize();
}

Test(rounds, bcast_root_runs_ahead_by_the_buffers_depth, .timeout = 60)
{
    run_ahead(AHEAD_BCAST);
}

/* A reduce's sender does not wait for the root to arrive: it runs ahead as a bcast root. */
Test(rounds, reduce_sender_runs_ahead_by_the_buffers_depth, .timeout = 60)
{
    run_ahead(AHEAD_REDUCE);
}

Test(rounds, gather_sender_runs_ahead_by_the_buffers_depth, .timeout = 60)
{
    run_ahead(AHEAD_GATHER);
}

/* A scatter's root of two local ranks: the other's piece of up to 8 bytes in its control line. */
Test(rounds, scatter_root_runs_ahead_by_the_buffers_depth, .timeout = 60)
{
    run_ahead(AHEAD_SCATTER);
}

/* -------------------------------------------------------- 3. WEFT_SHM=no */

static void no_shm_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    mappings_t m;

    collectives_body(comm, rank, arg);
    pthread_barrier_wait(&sh->barrier);
    if (rank == 0 && (read_mappings(&m) != 0 || m.total != 0)) {
        HARNESS_FAIL("WEFT_SHM=no, yet %d segment mappings", m.total);
    }
}

/* Rank counts 1..9 on one node and on nodes of 2, with the default
 * selection and with "shm" and "hier" forced: no segment anywhere. */
Test(shm_off, no_segment_and_every_collective_right, .timeout = 120)
{
    static const char *const forced[] = {NULL, "shm", "hier"};
    long checked = 0;

    setenv("WEFT_SHM", "no", 1);
    init();
    cr_assert_eq(weft__coll_config.shm, 0, "WEFT_SHM=no was not read");
    for (size_t f = 0; f < sizeof(forced) / sizeof(forced[0]); f++) {
        if (forced[f] != NULL) {
            force_all(forced[f]);
        }
        for (int rpn = 0; rpn <= 2; rpn += 2) {
            weft__runtime_config.ranks_per_node = rpn;
            for (int p = 1; p <= 9; p++) {
                shared_t sh;

                shared_init(&sh, p);
                run_world(&sh, p, (uint64_t)p, no_shm_body);
                cr_assert_eq(atomic_load(&sh.with_shm), 0, "WEFT_SHM=no, p=%d: %d segments", p,
                             atomic_load(&sh.with_shm));
                cr_assert_eq(atomic_load(&sh.with_nodes), rpn && p > rpn ? p : 0);
                cr_assert_eq(atomic_load(&sh.checked), (long)NCOUNTS * p);
                checked += atomic_load(&sh.checked);
                shared_done(&sh);
            }
        }
    }
    cr_assert_eq(dev_shm_count(), 0);
    fprintf(stderr, "WEFT_SHM=no: %ld rank checks of 8 collectives\n", checked);
    weft__coll_tune_release();
    weft_finalize();
    unsetenv("WEFT_SHM");
}

/* -------------------------------------- 4. forced where it cannot run */

/* The algorithm the selection takes for kind on comm (WEFT_TUNE included). */
static const char *selected(weft_comm_t comm, weft_coll_kind_t kind, size_t bytes)
{
    weft_cost_params_t params;
    const weft_coll_algo_t *a;

    weft__cost_params(weft__comm_of(comm), &params);
    a = weft__coll_choose(kind, bytes, weft__comm_of(comm)->size, &params, NULL);
    return a != NULL ? a->name : "(none)";
}

typedef struct forced_shared {
    shared_t sh;
    const char *algo;
} forced_shared_t;

static void forced_body(weft_comm_t comm, int rank, void *arg)
{
    forced_shared_t *fs = arg;
    shared_t *sh = &fs->sh;
    static const weft_coll_kind_t kinds[] = {WEFT_COLL_ALLREDUCE,      WEFT_COLL_BCAST,
                                             WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_ALLGATHER,
                                             WEFT_COLL_REDUCE,         WEFT_COLL_BARRIER};

    /* where the forced algorithm cannot run the rule is dropped: the
     * selection names something else for every kind and size */
    for (size_t i = 0; weft__comm_of(comm)->size > 1 && i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        for (size_t bytes = 4; bytes <= ((size_t)1 << 20); bytes *= 64) {
            const char *name = selected(comm, kinds[i], bytes);

            if (strcmp(name, fs->algo) == 0) {
                HARNESS_FAIL("rank %d of %d: %s of %zu bytes selects %s where it cannot run", rank,
                             weft__comm_of(comm)->size, weft__coll_kind_name(kinds[i]), bytes,
                             name);
                return;
            }
        }
    }
    collectives_body(comm, rank, sh);
}

static void run_forced(const char *algo, int rpn, const int *ps, int nps)
{
    force_all(algo);
    weft__runtime_config.ranks_per_node = rpn;
    for (int i = 0; i < nps; i++) {
        int p = ps[i], uniform = rpn == 0 || p % rpn == 0 || p < rpn;
        forced_shared_t fs = {.algo = algo};

        shared_init(&fs.sh, p);
        run_world(&fs.sh, p, (uint64_t)p + 100, forced_body);
        /* the segments exist (on every uniform layout), the rules are
         * dropped anyway */
        if (p > 1) {
            cr_assert_eq(atomic_load(&fs.sh.with_shm), uniform && rpn != 1 ? p : 0,
                         "%s forced, p=%d, %d per node: %d ranks had shared memory", algo, p, rpn,
                         atomic_load(&fs.sh.with_shm));
            cr_assert_eq(atomic_load(&fs.sh.with_nodes), rpn > 0 && rpn < p ? p : 0);
        }
        cr_assert_eq(atomic_load(&fs.sh.checked), (long)NCOUNTS * p);
        shared_done(&fs.sh);
    }
    weft__coll_tune_release();
}

/* "shm" on several nodes: 2 x 2, 3 x 2, 2 x 3 (uniform: each node has its
 * segment) and 2 + 1, 2 + 2 + 1, 3 + 2 (not uniform: none). */
Test(forced, shm_on_several_nodes_falls_back, .timeout = 120)
{
    static const int p2[] = {3, 4, 5, 6}, p3[] = {5, 6};

    init();
    run_forced("shm", 2, p2, 4);
    run_forced("shm", 3, p3, 2);
    weft_finalize();
}

/* "hier" on one node of p, and on nodes of one rank each. */
Test(forced, hier_on_one_node_falls_back, .timeout = 120)
{
    static const int ps[] = {2, 3, 4, 7};

    init();
    run_forced("hier", 0, ps, 4);
    run_forced("hier", 1, ps, 4);
    weft_finalize();
}

/* p = 1: every rule is kept (nothing to choose between) and the builders
 * fall back themselves. */
static void single_body(weft_comm_t comm, int rank, void *arg)
{
    if (weft__comm_of(comm)->coll->shm != NULL ||
        strcmp(selected(comm, WEFT_COLL_ALLREDUCE, 4096), "shm") != 0) {
        HARNESS_FAIL("one rank: segment %p, allreduce selects %s",
                     (void *)weft__comm_of(comm)->coll->shm,
                     selected(comm, WEFT_COLL_ALLREDUCE, 4096));
        return;
    }
    collectives_body(comm, rank, arg);
}

Test(forced, one_rank_builders_fall_back, .timeout = 30)
{
    shared_t sh;

    init();
    force_all("shm");
    shared_init(&sh, 1);
    run_world(&sh, 1, 1, single_body);
    cr_assert_eq(atomic_load(&sh.checked), NCOUNTS);
    shared_done(&sh);
    weft__coll_tune_release();
    weft_finalize();
}

/* ------------------------------------------ 5. many ranks on one node */

/* Reductions that combine every local rank's slot at once: allreduce of
 * one element (one phase) and of 1031 (two phases), reduce to the last
 * rank, reduce_scatter of 2 per rank. */
static void many_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    const int p = sh->nranks;
    static const size_t counts[] = {1, 1031};
    int32_t *in = alloc32(1031 * 2), *out = alloc32(1031);
    weft_status_t st;

    atomic_fetch_add(&sh->with_shm, weft__comm_of(comm)->coll->shm != NULL);
    for (size_t c = 0; c < 2; c++) {
        size_t n = counts[c];

        for (size_t i = 0; i < n; i++) {
            in[i] = val((int)c, rank, i);
        }
        st = weft_allreduce(in, out, n, WEFT_INT32, WEFT_SUM, comm);
        for (size_t i = 0; st == WEFT_OK && i < n; i++) {
            if (out[i] != reduced(WEFT_SUM, (int)c, p, i)) {
                HARNESS_FAIL("allreduce p=%d count %zu rank %d: element %zu is %d, want %d", p, n,
                             rank, i, out[i], reduced(WEFT_SUM, (int)c, p, i));
                goto out;
            }
        }
        if (st == WEFT_OK) {
            st = weft_reduce(in, rank == p - 1 ? out : NULL, n, WEFT_INT32, WEFT_MAX, p - 1, comm);
        }
        for (size_t i = 0; st == WEFT_OK && rank == p - 1 && i < n; i++) {
            if (out[i] != reduced(WEFT_MAX, (int)c, p, i)) {
                HARNESS_FAIL("reduce p=%d count %zu: element %zu is %d, want %d", p, n, i, out[i],
                             reduced(WEFT_MAX, (int)c, p, i));
                goto out;
            }
        }
        if (st != WEFT_OK) {
            HARNESS_FAIL("p=%d count %zu rank %d: %s (%s)", p, n, rank, weft_status_string(st),
                         weft_last_error());
            goto out;
        }
    }
    free(in);
    in = alloc32(2 * (size_t)p);
    for (size_t i = 0; i < 2 * (size_t)p; i++) {
        in[i] = val(7, rank, i);
    }
    st = weft_reduce_scatter(in, out, 2, WEFT_INT32, WEFT_SUM, comm);
    if (st != WEFT_OK) {
        HARNESS_FAIL("reduce_scatter p=%d rank %d: %s (%s)", p, rank, weft_status_string(st),
                     weft_last_error());
        goto out;
    }
    for (size_t i = 0; i < 2; i++) {
        if (out[i] != reduced(WEFT_SUM, 7, p, 2 * (size_t)rank + i)) {
            HARNESS_FAIL("reduce_scatter p=%d rank %d: element %zu is %d, want %d", p, rank, i,
                         out[i], reduced(WEFT_SUM, 7, p, 2 * (size_t)rank + i));
            goto out;
        }
    }
    atomic_fetch_add(&sh->checked, 1);
out:
    free(in);
    free(out);
}

/* A rank waiting for a late peer: where ranks outnumber cores every empty poll yields the core,
 * from the first (the late rank may need it), and none busy-polls; where each rank has a core,
 * the wait busy-polls first (WEFT_SPIN_US). Blocking barriers (the shared-memory rounds the call
 * drives) and nonblocking ones (weft_wait: the schedule engine), rank 1 late by 20 ms each. */
typedef struct waits_shared {
    shared_t sh;
    uint64_t busy[2][2], yields[2][2]; /* rank 0's, [oversubscribed][blocking 0, nonblocking 1] */
} waits_shared_t;

static void waits_body(weft_comm_t comm, int rank, void *arg)
{
    waits_shared_t *ws = arg;
    struct weft_comm *c = weft__comm_of(comm);

    for (int over = 0; over < 2; over++) {
        for (int form = 0; form < 2; form++) {
            uint64_t busy0 = c->coll->busy_polls, yields0 = c->coll->yield_polls;
            weft_request_t req = NULL;
            weft_status_t st;

            c->oversubscribed = over;
            pthread_barrier_wait(&ws->sh.barrier);
            if (rank == 1) {
                struct timespec late = {0, 20000000};

                nanosleep(&late, NULL);
            }
            st = form == 0 ? weft_barrier(comm) : weft_ibarrier(comm, &req);
            if (st == WEFT_OK && form == 1) {
                st = weft_wait(req);
            }
            EXPECT(st == WEFT_OK, "rank %d, %s barrier: %s", rank,
                   form == 0 ? "blocking" : "nonblocking", weft_last_error());
            if (rank == 0) {
                ws->busy[over][form] = c->coll->busy_polls - busy0;
                ws->yields[over][form] = c->coll->yield_polls - yields0;
            }
        }
    }
    c->oversubscribed = 0;
}

Test(segment, waits_yield_from_the_first_poll_where_ranks_outnumber_cores, .timeout = 60)
{
    waits_shared_t ws = {0};

    init();
    shared_init(&ws.sh, 2);
    run_world(&ws.sh, 2, 22, waits_body);
    for (int form = 0; form < 2; form++) {
        const char *what = form == 0 ? "blocking" : "nonblocking";

        cr_expect_gt(ws.busy[0][form], 0, "%s, a core each: no busy-polling first", what);
        cr_expect_eq(ws.busy[1][form], 0, "%s, ranks outnumbering cores: %llu busy polls", what,
                     (unsigned long long)ws.busy[1][form]);
        cr_expect_gt(ws.yields[1][form], 0, "%s, ranks outnumbering cores: no yield", what);
    }
    shared_done(&ws.sh);
    weft_finalize();
}

/* The barrier where ranks outnumber cores: local rank 0 releases the others (round_barrier),
 * unless the operation before was a barrier too. Rank 0 starts a nonblocking barrier, polls it
 * once and leaves it alone while the others start theirs and poll them: released by
 * rank 0 (ranks outnumbering cores, an allreduce before) they do not end before it polls again;
 * without the release they end while it is away: with a core each, and right after another
 * barrier. Rank 0 is away until each other rank ended or polled RELEASE_POLLS times after all of
 * them had started (each then had its chance to end: a time window instead fails where a busy
 * machine leaves a thread unscheduled through it), at most 10 s. Then blocking barriers, the form
 * on some ranks only (the ranks disagree: they must still meet), every other one after an
 * allreduce (the others are flat on every rank), none leaving before every rank arrived. */
enum { RELEASE_FLAT, RELEASE_AFTER_ALLREDUCE, RELEASE_AFTER_BARRIER, RELEASE_CASES };

enum { RELEASE_POLLS = 2000 };

typedef struct release_shared {
    shared_t sh;
    atomic_int ended_early[RELEASE_CASES]; /* others that ended while rank 0 was away */
    atomic_int arrived;
    atomic_int started; /* others whose barrier of this case started */
    atomic_int settled; /* others that ended or polled RELEASE_POLLS times after all started */
    atomic_int back;    /* rank 0 is back */
} release_shared_t;

static void release_allreduce(weft_comm_t comm, int rank)
{
    int32_t one = 1, sum = 0;

    EXPECT(weft_allreduce(&one, &sum, 1, WEFT_INT32, WEFT_SUM, comm) == WEFT_OK,
           "rank %d: allreduce: %s", rank, weft_last_error());
}

static void release_body(weft_comm_t comm, int rank, void *arg)
{
    release_shared_t *rs = arg;
    struct weft_comm *c = weft__comm_of(comm);
    int p = rs->sh.nranks;

    for (int cs = 0; cs < RELEASE_CASES; cs++) {
        weft_request_t req = NULL;
        weft_status_t st;
        int done = 0;

        c->oversubscribed = cs != RELEASE_FLAT;
        if (cs == RELEASE_AFTER_ALLREDUCE) {
            release_allreduce(comm, rank);
        }
        if (rank == 0) { /* its arrival published, the others not in yet */
            atomic_store(&rs->started, 0);
            atomic_store(&rs->settled, 0);
            atomic_store(&rs->back, 0);
            EXPECT(weft_ibarrier(comm, &req) == WEFT_OK && weft_test(req, &done) == WEFT_OK,
                   "rank 0: %s", weft_last_error());
            EXPECT(!done, "rank 0's barrier ended alone");
        }
        pthread_barrier_wait(&rs->sh.barrier);
        if (rank == 0) {
            struct timespec nap = {0, 1000000};
            double until = harness_now_s() + 10;

            while (atomic_load(&rs->settled) < p - 1 && harness_now_s() < until) {
                nanosleep(&nap, NULL);
            }
            atomic_store(&rs->back, 1);
            pthread_barrier_wait(&rs->sh.barrier);
        } else {
            int polls = 0, settled = 0;

            EXPECT(weft_ibarrier(comm, &req) == WEFT_OK, "rank %d: %s", rank, weft_last_error());
            atomic_fetch_add(&rs->started, 1);
            while (!done && !atomic_load(&rs->back)) {
                st = weft_test(req, &done);
                EXPECT(st == WEFT_OK, "rank %d: %s", rank, weft_last_error());
                polls += atomic_load(&rs->started) == p - 1;
                if (!settled && (done || polls == RELEASE_POLLS)) {
                    settled = 1;
                    atomic_fetch_add(&rs->settled, 1);
                }
            }
            atomic_fetch_add(&rs->ended_early[cs], done);
            pthread_barrier_wait(&rs->sh.barrier);
        }
        if (!done) {
            st = weft_wait(req);
            EXPECT(st == WEFT_OK, "rank %d, case %d: %s", rank, cs, weft_last_error());
        }
    }
    for (int k = 0; k < 200; k++) {
        c->oversubscribed = (k / 2 + rank) % 3 != 0; /* every pattern of forms, in turn */
        if (k % 2 == 0) {
            release_allreduce(comm, rank);
        }
        atomic_fetch_add(&rs->arrived, 1);
        EXPECT(weft_barrier(comm) == WEFT_OK, "rank %d, barrier %d: %s", rank, k,
               weft_last_error());
        EXPECT(atomic_load(&rs->arrived) >= (k + 1) * p, "rank %d left barrier %d with %d of %d in",
               rank, k, atomic_load(&rs->arrived) - k * p, p);
    }
    c->oversubscribed = 0;
}

Test(segment, barrier_released_by_local_rank_0_where_ranks_outnumber_cores, .timeout = 60)
{
    for (int p = 2; p <= 4; p++) {
        release_shared_t rs = {0};

        init();
        shared_init(&rs.sh, p);
        run_world(&rs.sh, p, 25, release_body);
        cr_expect_eq(atomic_load(&rs.ended_early[RELEASE_FLAT]), p - 1,
                     "p=%d, no release: %d of %d ranks ended while rank 0 was away", p,
                     atomic_load(&rs.ended_early[RELEASE_FLAT]), p - 1);
        cr_expect_eq(atomic_load(&rs.ended_early[RELEASE_AFTER_ALLREDUCE]), 0,
                     "p=%d, released by rank 0: %d ranks ended while it was away", p,
                     atomic_load(&rs.ended_early[RELEASE_AFTER_ALLREDUCE]));
        cr_expect_eq(atomic_load(&rs.ended_early[RELEASE_AFTER_BARRIER]), p - 1,
                     "p=%d, right after a barrier: %d of %d ranks ended while rank 0 was away", p,
                     atomic_load(&rs.ended_early[RELEASE_AFTER_BARRIER]), p - 1);
        shared_done(&rs.sh);
        weft_finalize();
    }
}

/* The flight recorder's times of operations run on the segment without a schedule: one that
 * waited for a late peer (rank 1, 60 ms) ends when it ended, read from the clock, the first call
 * (weft__shm_run) and the second (the same allreduce: the line path) alike; one that did not wait
 * (its end taken for its start: no second clock read) still ends DONE. */
typedef struct record_shared {
    shared_t sh;
    uint64_t elapsed_ns[3]; /* rank 0's last record: [late peer, late peer again, prompt] */
    int state[3];
    uint64_t line_runs; /* rank 0's */
} record_shared_t;

static void last_record(const weft_record_view_t *v, void *arg)
{
    ((uint64_t *)arg)[0] = v->end_ns - v->start_ns;
    ((uint64_t *)arg)[1] = (uint64_t)v->state;
}

static void record_body(weft_comm_t comm, int rank, void *arg)
{
    record_shared_t *rs = arg;
    float in[2] = {1, 2}, out[2];

    for (int call = 0; call < 3; call++) {
        int late = call < 2;
        weft_status_t st;

        pthread_barrier_wait(&rs->sh.barrier);
        if (rank == 1 && late) {
            struct timespec ts = {0, 60000000};

            nanosleep(&ts, NULL);
        }
        st = weft_allreduce(in, out, 2, WEFT_FLOAT32, WEFT_SUM, comm);
        EXPECT(st == WEFT_OK, "rank %d: %s", rank, weft_last_error());
        if (rank == 0) {
            uint64_t got[2] = {0, 0};

            weft__record_visit(weft__comm_of(comm), last_record, got);
            rs->elapsed_ns[call] = got[0];
            rs->state[call] = (int)got[1];
            rs->line_runs = weft__comm_of(comm)->coll->line_runs;
        }
    }
}

Test(segment, recorded_times_of_operations_without_a_schedule, .timeout = 60)
{
    record_shared_t rs = {0};

    init();
    shared_init(&rs.sh, 2);
    run_world(&rs.sh, 2, 23, record_body);
    for (int call = 0; call < 2; call++) {
        cr_expect_geq(rs.elapsed_ns[call], 30000000u,
                      "call %d waited 60 ms for its peer, recorded %.3f ms", call,
                      (double)rs.elapsed_ns[call] / 1e6);
        cr_expect_eq(rs.state[call], WEFT_RECORD_DONE, "call %d, late peer: state %d", call,
                     rs.state[call]);
    }
    cr_expect_eq(rs.state[2], WEFT_RECORD_DONE, "prompt peer: state %d", rs.state[2]);
    cr_expect_lt(rs.elapsed_ns[2], 30000000u, "prompt peer: recorded %.3f ms",
                 (double)rs.elapsed_ns[2] / 1e6);
    cr_expect_eq(rs.line_runs, 2, "%llu of the last 2 calls took the line path",
                 (unsigned long long)rs.line_runs);
    shared_done(&rs.sh);
    weft_finalize();
}

/* Allreduces whose data fits the control line (up to 8 bytes of host memory) or a wide line (up
 * to WEFT_SHM_WIDE_BYTES), repeated: from the second call of a count, dtype and op on they take
 * the line path
 * (weft__coll_line_allreduce), with every call's own result, for every dtype and op of the
 * device tests' table, in place and not, a barrier between two of them; AVG never takes it, a
 * new count leaves it until that count ran once, and so does memory of another type (emu). */
typedef struct line_shared {
    shared_t sh;
    uint64_t runs[2]; /* rank 0: line runs of the emu calls, and of the calls after them */
} line_shared_t;

enum { LINE_CALLS = 4 };

static void line_body(weft_comm_t comm, int rank, void *arg)
{
    line_shared_t *ls = arg;
    struct weft_comm *c = weft__comm_of(comm);
    int p = ls->sh.nranks;
    uint64_t in[WEFT_SHM_WIDE_BYTES / 8 + 1], out[WEFT_SHM_WIDE_BYTES / 8 + 1];
    void *emu;

    for (int ci = 0; ci < dd_ncombos; ci++) {
        weft_dtype_t dt = dd_combos[ci].dtype;
        weft_op_t op = dd_combos[ci].op;
        size_t es = weft_dtype_size(dt);
        /* the control line's sizes, then the wide line's: 3 elements, and its largest */
        size_t ns[8], nn = 0;

        for (size_t n = 1; n * es <= sizeof(uint64_t); n *= 2) {
            ns[nn++] = n;
        }
        ns[nn++] = 3;
        ns[nn++] = WEFT_SHM_WIDE_BYTES / es;
        for (size_t i = 0; i < nn; i++) {
            size_t n = ns[i];

            for (int in_place = 0; in_place < 2; in_place++) {
                uint64_t before = c->coll->line[WEFT_COLL_ALLREDUCE].runs, runs, want;

                for (int k = 0; k < LINE_CALLS; k++) {
                    void *res = in_place ? (void *)in : (void *)out;
                    weft_status_t st;
                    long bad;

                    memset(out, 0x5a, sizeof(out));
                    dd_fill(ci, rank, (size_t)k * 8, n, in);
                    st =
                        weft_allreduce(in_place ? WEFT_IN_PLACE : (void *)in, res, n, dt, op, comm);
                    EXPECT(st == WEFT_OK, "rank %d, %s %s n %zu call %d: %s", rank,
                           weft_dtype_name(dt), weft_op_name(op), n, k, weft_last_error());
                    bad = dd_check_reduced(ci, p, (size_t)k * 8, n, res);
                    EXPECT(bad < 0, "rank %d, %s %s n %zu%s call %d: element %ld wrong", rank,
                           weft_dtype_name(dt), weft_op_name(op), n, in_place ? " in place" : "", k,
                           bad);
                    if (k == 1) { /* another collective between two calls leaves the line */
                        EXPECT(weft_barrier(comm) == WEFT_OK, "rank %d: barrier: %s", rank,
                               weft_last_error());
                    }
                }
                runs = c->coll->line[WEFT_COLL_ALLREDUCE].runs - before;
                /* in place repeats the count, dtype and op of the calls before it */
                want = op == WEFT_AVG ? 0 : in_place ? LINE_CALLS : LINE_CALLS - 1;
                EXPECT(runs == want, "rank %d, %s %s n %zu%s: %llu line runs, want %llu", rank,
                       weft_dtype_name(dt), weft_op_name(op), n, in_place ? " in place" : "",
                       (unsigned long long)runs, (unsigned long long)want);
            }
        }
    }
    /* the line is an int32 sum of 2 (the table's first row): emu buffers of that shape take
     * the full path, and host buffers after them the line again */
    emu = dd_alloc(1, 8);
    EXPECT(emu != NULL, "rank %d: emu memory: %s", rank, weft_last_error());
    if (emu == NULL) {
        return;
    }
    for (int host = 0; host < 2; host++) {
        uint64_t before;

        for (int k = 0; k < 2; k++) { /* the shape once, to set the line */
            dd_fill(0, rank, 0, 2, in);
            EXPECT(weft_allreduce(in, out, 2, WEFT_INT32, WEFT_SUM, comm) == WEFT_OK, "rank %d: %s",
                   rank, weft_last_error());
        }
        before = c->coll->line_runs;
        for (int k = 0; k < 3; k++) {
            void *buf = host ? (void *)out : emu;

            dd_fill(0, rank, 0, 2, buf); /* emu memory is the host's, to tests */
            EXPECT(weft_allreduce(WEFT_IN_PLACE, buf, 2, WEFT_INT32, WEFT_SUM, comm) == WEFT_OK,
                   "rank %d: %s", rank, weft_last_error());
            EXPECT(dd_check_reduced(0, p, 0, 2, buf) < 0, "rank %d, %s: wrong result", rank,
                   host ? "host" : "emu");
        }
        if (rank == 0) {
            ls->runs[host] = c->coll->line_runs - before;
        }
    }
    dd_free(emu);
}

Test(segment, line_allreduce_of_every_dtype_and_op, .timeout = 120)
{
    for (int p = 2; p <= 4; p++) {
        line_shared_t ls = {0};

        init();
        shared_init(&ls.sh, p);
        run_world(&ls.sh, p, 24, line_body);
        cr_expect_eq(ls.runs[0], 0, "p=%d: %llu emu allreduces took the line path", p,
                     (unsigned long long)ls.runs[0]);
        cr_expect_eq(ls.runs[1], 3, "p=%d: %llu of 3 host allreduces took the line path", p,
                     (unsigned long long)ls.runs[1]);
        shared_done(&ls.sh);
        weft_finalize();
    }
}

/* Bcasts and allgathers whose data (a rank's block) fits the control line, a wide line or (up to
 * 16 KiB) one round of the slots, repeated: from the second call of a shape on (count, dtype,
 * root) they take the line path (weft__coll_line), with every call's own data, from every root,
 * in place and not, at 1-8 bytes (the control line), 12 and WEFT_SHM_WIDE_BYTES (a wide line),
 * 52, 256, 1028 and 16384 (the slots, 64 KiB here); 4 bytes more than 16 KiB never takes it;
 * nothing past a result is written. */
/* LINE_SLOTS: the largest data a rank that takes the line path through the slots (coll/shm/ops.c
 * LINE_SLOT_BYTES); LINE_MAX just past it */
enum { LINE_SLOTS = 16384, LINE_MAX = LINE_SLOTS + 4, LINE_GUARD = 16 };

static unsigned char line_byte(int rank, int k, size_t i)
{
    return (unsigned char)(rank * 37 + k * 11 + (int)i * 3 + 1);
}

/* The sizes the line tests run: the control line's, a wide line's, the slots', and just past the
 * largest. */
static const size_t line_sizes[] = {1,  2,   4,    8,          12,      WEFT_SHM_WIDE_BYTES,
                                    52, 256, 1028, LINE_SLOTS, LINE_MAX};
#define LINE_NSIZES (sizeof(line_sizes) / sizeof(line_sizes[0]))

/* 1-byte elements for the odd sizes, 4-byte ones else: the dtype is part of the shape */
static weft_dtype_t line_dtype(size_t n)
{
    return n % 4 ? WEFT_UINT8 : WEFT_INT32;
}

static void line_copy_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    struct weft_comm *c = weft__comm_of(comm);
    const int p = sh->nranks;
    unsigned char buf[LINE_MAX + LINE_GUARD], all[4 * LINE_MAX + LINE_GUARD], mine[LINE_MAX];

    for (size_t si = 0; si < LINE_NSIZES; si++) {
        const size_t n = line_sizes[si];
        const int line = n <= LINE_SLOTS;
        const weft_dtype_t dt = line_dtype(n);
        const size_t count = n / weft_dtype_size(dt);

        for (int root = 0; root < p; root++) {
            uint64_t before = c->coll->line_runs;

            for (int k = 0; k < LINE_CALLS; k++) {
                /* nobody runs ahead: a root may start a call while the others still read
                 * its lines of three calls back, and take the full path then (the count below) */
                pthread_barrier_wait(&sh->barrier);
                memset(buf, 0xee, sizeof(buf));
                for (size_t i = 0; rank == root && i < n; i++) {
                    buf[i] = line_byte(root, k, i);
                }
                EXPECT(weft_bcast(buf, count, dt, root, comm) == WEFT_OK,
                       "rank %d, bcast of %zu bytes from %d, call %d: %s", rank, n, root, k,
                       weft_last_error());
                for (size_t i = 0; i < n + LINE_GUARD; i++) {
                    unsigned char want = i < n ? line_byte(root, k, i) : 0xee;

                    EXPECT(buf[i] == want,
                           "rank %d, bcast of %zu bytes from %d, call %d: byte "
                           "%zu is %#x, want %#x",
                           rank, n, root, k, i, buf[i], want);
                }
            }
            EXPECT(c->coll->line_runs - before == (line ? LINE_CALLS - 1 : 0),
                   "rank %d, bcast of %zu bytes from %d: %llu line runs", rank, n, root,
                   (unsigned long long)(c->coll->line_runs - before));
        }
        for (int in_place = 0; in_place < 2; in_place++) {
            uint64_t before = c->coll->line_runs, want;

            for (int k = 0; k < LINE_CALLS; k++) {
                pthread_barrier_wait(&sh->barrier);
                memset(all, 0xee, sizeof(all));
                for (size_t i = 0; i < n; i++) {
                    mine[i] = line_byte(rank, k, i);
                    if (in_place) {
                        all[(size_t)rank * n + i] = mine[i];
                    }
                }
                EXPECT(weft_allgather(in_place ? WEFT_IN_PLACE : (void *)mine, all, count, dt,
                                      comm) == WEFT_OK,
                       "rank %d, allgather of %zu bytes%s, call %d: %s", rank, n,
                       in_place ? " in place" : "", k, weft_last_error());
                for (size_t i = 0; i < (size_t)p * n + LINE_GUARD; i++) {
                    unsigned char w = i < (size_t)p * n ? line_byte((int)(i / n), k, i % n) : 0xee;

                    EXPECT(all[i] == w,
                           "rank %d, allgather of %zu bytes%s, call %d: byte %zu is "
                           "%#x, want %#x",
                           rank, n, in_place ? " in place" : "", k, i, all[i], w);
                }
            }
            /* in place repeats the shape of the calls before it */
            want = !line ? 0 : in_place ? LINE_CALLS : LINE_CALLS - 1;
            EXPECT(c->coll->line_runs - before == want,
                   "rank %d, allgather of %zu bytes%s: %llu line runs, want %llu", rank, n,
                   in_place ? " in place" : "", (unsigned long long)(c->coll->line_runs - before),
                   (unsigned long long)want);
        }
    }
}

/* A line test's body at 2, 3 and 4 ranks. */
static void run_line_worlds(uint64_t seed, weft_thread_rank_fn fn)
{
    for (int p = 2; p <= 4; p++) {
        shared_t sh;

        init();
        weft__coll_config.shm_slot = 64 << 10; /* a share of LINE_SLOTS a rank (scatter) */
        shared_init(&sh, p);
        run_world(&sh, p, seed, fn);
        shared_done(&sh);
        weft_finalize();
    }
}

/* The same for reduce (a sum: uint8 wraps) and gather, from every root. */
static void line_rooted_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    struct weft_comm *c = weft__comm_of(comm);
    const int p = sh->nranks;
    unsigned char mine[LINE_MAX], res[4 * LINE_MAX + LINE_GUARD];

    for (size_t si = 0; si < LINE_NSIZES; si++) {
        const size_t n = line_sizes[si];
        const int line = n <= LINE_SLOTS;
        const weft_dtype_t dt = line_dtype(n);
        const size_t count = n / weft_dtype_size(dt);

        for (int root = 0; root < p; root++) {
            uint64_t before = c->coll->line_runs;

            for (int k = 0; k < LINE_CALLS; k++) {
                pthread_barrier_wait(&sh->barrier);
                for (size_t i = 0; i < n; i++) {
                    mine[i] = line_byte(rank, k, i);
                }
                memset(res, 0xee, sizeof(res));
                EXPECT(weft_reduce(mine, res, count, dt, WEFT_SUM, root, comm) == WEFT_OK,
                       "rank %d, reduce of %zu bytes to %d, call %d: %s", rank, n, root, k,
                       weft_last_error());
                for (size_t e = 0; rank == root && e < count; e++) {
                    uint32_t want = 0, got = 0;

                    for (int q = 0; q < p; q++) {
                        uint32_t v = 0;

                        for (size_t j = 0; j < weft_dtype_size(dt); j++) { /* little endian */
                            v |= (uint32_t)line_byte(q, k, e * weft_dtype_size(dt) + j) << (8 * j);
                        }
                        want += v;
                    }
                    memcpy(&got, res + e * weft_dtype_size(dt), weft_dtype_size(dt));
                    want &= dt == WEFT_UINT8 ? 0xffu : 0xffffffffu;
                    EXPECT(got == want,
                           "rank %d, reduce of %zu bytes to %d, call %d: element %zu "
                           "is %u, want %u",
                           rank, n, root, k, e, got, want);
                }
                for (size_t i = rank == root ? n : 0; i < n + LINE_GUARD; i++) {
                    EXPECT(res[i] == 0xee,
                           "rank %d, reduce of %zu bytes to %d, call %d: byte %zu "
                           "written",
                           rank, n, root, k, i);
                }
                memset(res, 0xee, sizeof(res));
                EXPECT(weft_gather(mine, res, count, dt, root, comm) == WEFT_OK,
                       "rank %d, gather of %zu bytes to %d, call %d: %s", rank, n, root, k,
                       weft_last_error());
                for (size_t i = 0; i < (size_t)p * n + LINE_GUARD; i++) {
                    unsigned char w = rank == root && i < (size_t)p * n
                                          ? line_byte((int)(i / n), k, i % n)
                                          : 0xee;

                    EXPECT(res[i] == w,
                           "rank %d, gather of %zu bytes to %d, call %d: byte %zu "
                           "is %#x, want %#x",
                           rank, n, root, k, i, res[i], w);
                }
            }
            /* the two alternate: each kind's line entry is its own; a reduce above WEFT_SHM_SMALL
             * takes two phases, never the line path */
            EXPECT(c->coll->line_runs - before ==
                       (uint64_t)((line ? LINE_CALLS - 1 : 0) +
                                  (line && n <= weft__coll_config.shm_small ? LINE_CALLS - 1 : 0)),
                   "rank %d, reduce and gather of %zu bytes to %d: %llu line runs", rank, n, root,
                   (unsigned long long)(c->coll->line_runs - before));
        }
    }
}

Test(segment, line_reduce_and_gather, .timeout = 120)
{
    run_line_worlds(27, line_rooted_body);
}

/* The same for scatter and alltoall, whose pieces for the others fit a writer's control line
 * (8 bytes: two ranks up to 8-byte blocks, four up to 2) or its slot (a share of it per rank,
 * blocks up to 16 KiB), from every root, in place and not; a block of 16388 bytes never takes
 * it. */
static void line_pieces_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    struct weft_comm *c = weft__comm_of(comm);
    const int p = sh->nranks;
    static const size_t sizes[] = {1, 2, 4, 8, 12, 52, 256, 1028, LINE_SLOTS, LINE_MAX};
    const size_t share = c->coll->shm->slot_bytes / (size_t)p;
    unsigned char *in = malloc(4 * LINE_MAX + LINE_GUARD), *out = malloc(4 * LINE_MAX + LINE_GUARD);

    EXPECT(in != NULL && out != NULL, "rank %d: no memory", rank);
    EXPECT(share >= LINE_SLOTS, "rank %d: a slot of %zu bytes: the test wants 64 KiB", rank,
           c->coll->shm->slot_bytes);
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]) && in != NULL && out != NULL; si++) {
        const size_t n = sizes[si];
        const int line = n * (size_t)(p - 1) <= sizeof(uint64_t) || (n <= LINE_SLOTS && n <= share);

        for (int root = 0; root < p; root++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                uint64_t before = c->coll->line_runs, want;

                for (int k = 0; k < LINE_CALLS; k++) {
                    unsigned char *res = in_place && rank == root ? in + (size_t)root * n : out;

                    pthread_barrier_wait(&sh->barrier);
                    for (size_t i = 0; i < (size_t)p * n; i++) {
                        in[i] = line_byte(rank, k, i);
                    }
                    memset(out, 0xee, 4 * LINE_MAX + LINE_GUARD);
                    /* in place: the root's own block of sendbuf is its recvbuf */
                    EXPECT(weft_scatter(in, res, n, WEFT_UINT8, root, comm) == WEFT_OK,
                           "rank %d, scatter of %zu bytes from %d%s, call %d: %s", rank, n, root,
                           in_place ? " in place" : "", k, weft_last_error());
                    for (size_t i = 0; i < n; i++) {
                        unsigned char w = line_byte(root, k, (size_t)rank * n + i);

                        EXPECT(res[i] == w,
                               "rank %d, scatter of %zu bytes from %d%s, call %d: "
                               "byte %zu is %#x, want %#x",
                               rank, n, root, in_place ? " in place" : "", k, i, res[i], w);
                    }
                    for (size_t i = res == out ? n : 0; i < n + LINE_GUARD; i++) {
                        EXPECT(out[i] == 0xee,
                               "rank %d, scatter of %zu bytes from %d, call %d: "
                               "byte %zu written",
                               rank, n, root, k, i);
                    }
                }
                /* in place at the root only: the shape is the same */
                want = !line ? 0 : in_place ? LINE_CALLS : LINE_CALLS - 1;
                EXPECT(c->coll->line_runs - before == want,
                       "rank %d, scatter of %zu bytes from %d%s: %llu line runs, want %llu", rank,
                       n, root, in_place ? " in place" : "",
                       (unsigned long long)(c->coll->line_runs - before), (unsigned long long)want);
            }
        }
        for (int in_place = 0; in_place < 2; in_place++) {
            uint64_t before = c->coll->line_runs, want;

            for (int k = 0; k < LINE_CALLS; k++) {
                unsigned char *res = in_place ? in : out;

                pthread_barrier_wait(&sh->barrier);
                for (size_t i = 0; i < (size_t)p * n; i++) {
                    in[i] = line_byte(rank, k, i);
                }
                memset(out, 0xee, 4 * LINE_MAX + LINE_GUARD);
                EXPECT(weft_alltoall(in_place ? WEFT_IN_PLACE : (void *)in, res, n, WEFT_UINT8,
                                     comm) == WEFT_OK,
                       "rank %d, alltoall of %zu bytes%s, call %d: %s", rank, n,
                       in_place ? " in place" : "", k, weft_last_error());
                for (size_t i = 0; i < (size_t)p * n; i++) {
                    unsigned char w = line_byte((int)(i / n), k, (size_t)rank * n + i % n);

                    EXPECT(res[i] == w,
                           "rank %d, alltoall of %zu bytes%s, call %d: byte %zu is "
                           "%#x, want %#x",
                           rank, n, in_place ? " in place" : "", k, i, res[i], w);
                }
                for (size_t i = in_place ? 0 : (size_t)p * n; i < (size_t)p * n + LINE_GUARD; i++) {
                    EXPECT(out[i] == 0xee,
                           "rank %d, alltoall of %zu bytes, call %d: byte %zu "
                           "written",
                           rank, n, k, i);
                }
            }
            want = !line ? 0 : in_place ? LINE_CALLS : LINE_CALLS - 1;
            EXPECT(c->coll->line_runs - before == want,
                   "rank %d, alltoall of %zu bytes%s: %llu line runs, want %llu", rank, n,
                   in_place ? " in place" : "", (unsigned long long)(c->coll->line_runs - before),
                   (unsigned long long)want);
        }
    }
    free(in);
    free(out);
}

/* The same for reduce_scatter, whose blocks go through the slots: a sum (uint8 wraps) of blocks
 * up to 16 KiB, in place and not; 16388 bytes never takes the line path. */
enum { RS_MAX = LINE_MAX };

static void line_rs_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    struct weft_comm *c = weft__comm_of(comm);
    const int p = sh->nranks;
    static const size_t sizes[] = {1, 4, 12, WEFT_SHM_WIDE_BYTES, 256, 1028, LINE_SLOTS, RS_MAX};
    unsigned char *in = malloc(4 * RS_MAX + LINE_GUARD), *out = malloc(RS_MAX + LINE_GUARD);

    EXPECT(in != NULL && out != NULL, "rank %d: no memory", rank);
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]) && in != NULL && out != NULL; si++) {
        const size_t n = sizes[si];
        const weft_dtype_t dt = line_dtype(n);
        const size_t es = weft_dtype_size(dt), count = n / es;

        for (int in_place = 0; in_place < 2; in_place++) {
            uint64_t before = c->coll->line[WEFT_COLL_REDUCE_SCATTER].runs, want;

            for (int k = 0; k < LINE_CALLS; k++) {
                unsigned char *res = in_place ? in : out;

                pthread_barrier_wait(&sh->barrier);
                for (size_t i = 0; i < (size_t)p * n; i++) {
                    in[i] = line_byte(rank, k, i);
                }
                memset(in + (size_t)p * n, 0xee, LINE_GUARD);
                memset(out, 0xee, RS_MAX + LINE_GUARD);
                EXPECT(weft_reduce_scatter(in_place ? WEFT_IN_PLACE : (void *)in, res, count, dt,
                                           WEFT_SUM, comm) == WEFT_OK,
                       "rank %d, reduce_scatter of %zu bytes%s, call %d: %s", rank, n,
                       in_place ? " in place" : "", k, weft_last_error());
                for (size_t e = 0; e < count; e++) {
                    uint32_t want_e = 0, got = 0;

                    for (int q = 0; q < p; q++) {
                        uint32_t v = 0;

                        for (size_t j = 0; j < es; j++) { /* little endian */
                            v |= (uint32_t)line_byte(q, k, (size_t)rank * n + e * es + j)
                                 << (8 * j);
                        }
                        want_e += v;
                    }
                    memcpy(&got, res + e * es, es);
                    want_e &= es == 1 ? 0xffu : 0xffffffffu;
                    EXPECT(got == want_e,
                           "rank %d, reduce_scatter of %zu bytes%s, call %d: "
                           "element %zu is %u, want %u",
                           rank, n, in_place ? " in place" : "", k, e, got, want_e);
                }
                for (size_t i = in_place ? 0 : n; i < n + LINE_GUARD; i++) {
                    EXPECT(out[i] == 0xee,
                           "rank %d, reduce_scatter of %zu bytes, call %d: byte "
                           "%zu written",
                           rank, n, k, i);
                }
            }
            want = n > LINE_SLOTS ? 0 : in_place ? LINE_CALLS : LINE_CALLS - 1;
            EXPECT(c->coll->line[WEFT_COLL_REDUCE_SCATTER].runs - before == want,
                   "rank %d, reduce_scatter of %zu bytes%s: %llu line runs, want %llu", rank, n,
                   in_place ? " in place" : "",
                   (unsigned long long)(c->coll->line[WEFT_COLL_REDUCE_SCATTER].runs - before),
                   (unsigned long long)want);
        }
    }
    free(in);
    free(out);
}

Test(segment, line_reduce_scatter, .timeout = 120)
{
    run_line_worlds(30, line_rs_body);
}

Test(segment, line_scatter_and_alltoall, .timeout = 120)
{
    run_line_worlds(28, line_pieces_body);
}

/* Barriers on the line path (from the second on), flat and, where ranks outnumber cores, the
 * release form (a barrier after another collective): nobody leaves one before every rank
 * reached it. */
typedef struct line_barrier_shared {
    shared_t sh;
    atomic_int arrivals;
} line_barrier_shared_t;

enum { LINE_BARRIERS = 12 };

static void line_barrier_body(weft_comm_t comm, int rank, void *arg)
{
    line_barrier_shared_t *ls = arg;
    struct weft_comm *c = weft__comm_of(comm);
    const int p = ls->sh.nranks;
    uint64_t before = c->coll->line_runs;
    int between = 0;

    for (int k = 0; k < LINE_BARRIERS; k++) {
        int32_t v = 1;

        if (rank == k % p) { /* one rank late each time */
            struct timespec ts = {0, 2000000};

            nanosleep(&ts, NULL);
        }
        atomic_fetch_add(&ls->arrivals, 1);
        EXPECT(weft_barrier(comm) == WEFT_OK, "rank %d, barrier %d: %s", rank, k,
               weft_last_error());
        EXPECT(atomic_load(&ls->arrivals) >= p * (k + 1),
               "rank %d left barrier %d when %d of %d ranks had reached it", rank, k,
               atomic_load(&ls->arrivals) - p * k, p);
        if (k % 3 == 2) { /* the next barrier follows another collective */
            EXPECT(weft_allreduce(WEFT_IN_PLACE, &v, 1, WEFT_INT32, WEFT_SUM, comm) == WEFT_OK &&
                       v == p,
                   "rank %d: allreduce between barriers: %s", rank, weft_last_error());
            between++;
        }
    }
    /* every barrier but the first, every allreduce but the first */
    EXPECT(c->coll->line_runs - before == (uint64_t)(LINE_BARRIERS - 1 + between - 1),
           "rank %d: %llu line runs of %d barriers and %d allreduces", rank,
           (unsigned long long)(c->coll->line_runs - before), LINE_BARRIERS, between);
}

Test(segment, line_barrier, .timeout = 60)
{
    for (int p = 2; p <= 4; p++) {
        line_barrier_shared_t ls = {0};

        init();
        shared_init(&ls.sh, p);
        run_world(&ls.sh, p, 29, line_barrier_body);
        shared_done(&ls.sh);
        weft_finalize();
    }
}

/* A blocking call that repeats the last one of its kind, buffers and all, skips its argument
 * checks (weft__coll_line_again) from its third run on, each result its own: in place after not in
 * place on the same result buffer runs from its own data (the source kept from before holds other
 * values), an emu allocation between two calls has the next one checked again, a bad argument
 * with the same buffers is refused with nothing written, and an abort is seen by every call after
 * it. */
enum { AGAIN_CALLS = 6 };

static void again_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;
    struct weft_comm *c = weft__comm_of(comm);
    const int p = sh->nranks;
    int32_t in[2], out[2];
    uint64_t before = c->coll->line_again;
    void *emu;

    /* the first call sets the line, the second keeps its buffers */
    for (int k = 0; k < AGAIN_CALLS; k++) {
        in[0] = rank + k;
        in[1] = 100 * k;
        out[0] = out[1] = -7;
        EXPECT(weft_allreduce(in, out, 2, WEFT_INT32, WEFT_SUM, comm) == WEFT_OK,
               "rank %d, call %d: %s", rank, k, weft_last_error());
        EXPECT(out[0] == p * (p - 1) / 2 + p * k && out[1] == p * 100 * k,
               "rank %d, call %d: %d %d", rank, k, out[0], out[1]);
    }
    EXPECT(c->coll->line_again - before == AGAIN_CALLS - 2, "rank %d: %llu of %d calls again", rank,
           (unsigned long long)(c->coll->line_again - before), AGAIN_CALLS);
    for (int emu_first = 0; emu_first < 2; emu_first++) {
        emu = NULL;
        if (emu_first) { /* device memory allocated since the last call */
            emu = dd_alloc(1, 8);
            EXPECT(emu != NULL, "rank %d: emu memory: %s", rank, weft_last_error());
        }
        before = c->coll->line_again;
        for (int k = 0; k < 3; k++) {
            in[0] = in[1] = 1000;
            out[0] = rank + 1;
            out[1] = k;
            EXPECT(weft_allreduce(WEFT_IN_PLACE, out, 2, WEFT_INT32, WEFT_SUM, comm) == WEFT_OK,
                   "rank %d, in place %d: %s", rank, k, weft_last_error());
            EXPECT(out[0] == p * (p + 1) / 2 && out[1] == p * k, "rank %d, in place %d: %d %d",
                   rank, k, out[0], out[1]);
        }
        /* the first in place call is checked (other buffers as passed), and so is the first
         * after the allocation */
        EXPECT(c->coll->line_again - before == 2, "rank %d%s: %llu of 3 in place calls again", rank,
               emu_first ? ", after an emu allocation" : "",
               (unsigned long long)(c->coll->line_again - before));
        dd_free(emu);
    }
    out[0] = out[1] = 5;
    EXPECT(weft_allreduce(WEFT_IN_PLACE, out, 2, WEFT_INT32, (weft_op_t)WEFT_OP_COUNT, comm) ==
                   WEFT_ERR_INVALID_ARG &&
               out[0] == 5 && out[1] == 5,
           "rank %d: a bad op with the same buffers: %s", rank, weft_last_error());
    pthread_barrier_wait(&sh->barrier); /* nobody still reads a peer's line */
    EXPECT(weft_comm_abort(comm) == WEFT_OK, "rank %d: abort: %s", rank, weft_last_error());
    for (int k = 0; k < 3; k++) {
        EXPECT(weft_allreduce(WEFT_IN_PLACE, out, 2, WEFT_INT32, WEFT_SUM, comm) ==
                   WEFT_ERR_ABORTED,
               "rank %d, call %d after the abort: %s", rank, k, weft_last_error());
    }
}

Test(segment, line_repeats_skip_the_checks, .timeout = 60)
{
    for (int p = 2; p <= 3; p++) {
        shared_t sh;

        init();
        shared_init(&sh, p);
        run_world(&sh, p, 31, again_body);
        shared_done(&sh);
        weft_finalize();
    }
}

Test(segment, line_bcast_and_allgather, .timeout = 120)
{
    run_line_worlds(25, line_copy_body);
}

/* Which allreduces read the peers' buffers by process_vm_readv by default (WEFT_SHM_CMA=auto):
 * where the node's reads were measured at least half as fast as copies of the same size, timed
 * in turn with them (shm->cma_fast, set
 * here both ways after the measurement), from 1 MiB to below WEFT_SHM_STREAM (8 MiB), not where
 * ranks outnumber cores; and allgathers from a 64 KiB result, alltoalls from 16 KiB blocks
 * (WEFT_SHM_CMA_ALLGATHER, WEFT_SHM_CMA_ALLTOALL auto). Where the reads were slow, none. */
typedef struct cma_default_shared {
    shared_t sh;
    int fast; /* the value every rank gives shm->cma_fast */
    int had_cma[2], measured_fast[2];
    double copy_gbs[2], cma_gbs[2], cma_copy_gbs[2];
    uint64_t read[2][10]; /* bytes read by process_vm_readv in each call below */
} cma_default_shared_t;

/* The measurement's result, then the one the test takes. */
static int cma_default_start(cma_default_shared_t *cs, struct weft_comm *c, int rank)
{
    if (c->coll->shm == NULL) {
        return 0;
    }
    cs->had_cma[rank] = c->coll->shm->cma;
    cs->measured_fast[rank] = c->coll->shm->cma_fast;
    cs->copy_gbs[rank] = c->coll->shm->copy_gbs;
    cs->cma_gbs[rank] = c->coll->shm->cma_gbs;
    cs->cma_copy_gbs[rank] = c->coll->shm->cma_copy_gbs;
    c->coll->shm->cma_fast = cs->fast;
    return 1;
}

/* What every test of the defaults checks of the measurement. */
static void cma_default_check(const cma_default_shared_t *cs)
{
    for (int r = 0; r < 2; r++) {
        cr_assert(cs->had_cma[r], "rank %d: in-process ranks may always read each other", r);
        cr_expect(cs->cma_gbs[r] > 0 && cs->copy_gbs[r] > 0 && cs->cma_copy_gbs[r] > 0,
                  "rank %d: rates %g, %g and %g GB/s", r, cs->cma_gbs[r], cs->copy_gbs[r],
                  cs->cma_copy_gbs[r]);
        cr_expect_eq(cs->measured_fast[r], 2 * cs->cma_gbs[r] >= cs->cma_copy_gbs[r],
                     "rank %d: single-copy reads %g GB/s, copies of the same size %g GB/s: fast %d",
                     r, cs->cma_gbs[r], cs->cma_copy_gbs[r], cs->measured_fast[r]);
    }
    cr_expect(cs->cma_gbs[0] == cs->cma_gbs[1] && cs->cma_copy_gbs[0] == cs->cma_copy_gbs[1] &&
                  cs->measured_fast[0] == cs->measured_fast[1],
              "the ranks agree on the measurement");
}

static void cma_default_body(weft_comm_t comm, int rank, void *arg)
{
    static const size_t sizes[] = {512u << 10, 1u << 20, 4u << 20, 8u << 20, 1u << 20};
    cma_default_shared_t *cs = arg;
    struct weft_comm *c = weft__comm_of(comm);
    float *buf = malloc(8u << 20), *out = malloc(8u << 20);

    if (buf == NULL || out == NULL || !cma_default_start(cs, c, rank)) {
        HARNESS_FAIL("rank %d: no memory or no segment", rank);
        free(buf);
        free(out);
        return;
    }
    for (int k = 0; k < 5; k++) {
        size_t n = sizes[k] / sizeof(float);
        uint64_t before = c->coll->shm->cma_bytes;
        int bad = 0;

        c->oversubscribed = k == 4; /* the last call: more ranks than cores */
        for (size_t i = 0; i < n; i++) {
            buf[i] = (float)(val(k, rank, i));
        }
        EXPECT(weft_allreduce(buf, out, n, WEFT_FLOAT32, WEFT_SUM, comm) == WEFT_OK,
               "rank %d: allreduce of %zu bytes: %s", rank, sizes[k], weft_last_error());
        for (size_t i = 0; i < n && !bad; i++) {
            bad = out[i] != (float)(val(k, 0, i) + val(k, 1, i));
        }
        EXPECT(!bad, "rank %d: allreduce of %zu bytes: wrong result", rank, sizes[k]);
        cs->read[rank][k] = c->coll->shm->cma_bytes - before;
    }
    c->oversubscribed = 0;
    /* allgathers of 32 and 64 KiB results, alltoalls of 8 and 16 KiB blocks */
    for (int k = 5; k < 9; k++) {
        size_t bytes = (k == 5 || k == 7 ? 16u << 10 : 32u << 10) / (k < 7 ? 1 : 2);
        size_t n = bytes / sizeof(float);
        uint64_t before = c->coll->shm->cma_bytes;
        int bad = 0;

        for (size_t i = 0; i < 2 * n; i++) {
            buf[i] = (float)val(k, rank, i);
        }
        EXPECT((k < 7 ? weft_allgather(buf, out, n, WEFT_FLOAT32, comm)
                      : weft_alltoall(buf, out, n, WEFT_FLOAT32, comm)) == WEFT_OK,
               "rank %d: call %d: %s", rank, k, weft_last_error());
        for (int q = 0; q < 2 && !bad; q++) {
            for (size_t i = 0; i < n && !bad; i++) {
                bad = out[(size_t)q * n + i] !=
                      (float)(k < 7 ? val(k, q, i) : val(k, q, (size_t)rank * n + i));
            }
        }
        EXPECT(!bad, "rank %d: call %d: wrong result", rank, k);
        cs->read[rank][k] = c->coll->shm->cma_bytes - before;
    }
    free(buf);
    free(out);
}

Test(segment, single_copy_allreduce_by_default, .timeout = 60)
{
    for (int fast = 1; fast >= 0; fast--) {
        cma_default_shared_t cs = {.fast = fast};

        init();
        cr_assert_eq(weft__coll_tune_load("allreduce:0-inf:shm,allgather:0-inf:shm,"
                                          "alltoall:0-inf:shm"),
                     WEFT_OK, "%s", weft_last_error());
        cr_assert_eq(weft__coll_config.shm_cma, WEFT_SHM_CMA_AUTO, "the default WEFT_SHM_CMA");
        cr_assert_eq(weft__coll_config.shm_cma_allgather, WEFT_CONFIG_AUTO);
        cr_assert_eq(weft__coll_config.shm_cma_alltoall, WEFT_CONFIG_AUTO);
        cr_assert_eq(weft__coll_config.shm_stream, (size_t)8 << 20, "the default WEFT_SHM_STREAM");
        shared_init(&cs.sh, 2);
        run_world(&cs.sh, 2, 21, cma_default_body);
        cma_default_check(&cs);
        for (int r = 0; r < 2; r++) {
            cr_expect_eq(cs.read[r][0], 0, "rank %d: 512 KiB staged, not read (%llu bytes)", r,
                         (unsigned long long)cs.read[r][0]);
            cr_expect_eq(cs.read[r][1] > 0, fast, "rank %d, fast %d: 1 MiB: %llu bytes read", r,
                         fast, (unsigned long long)cs.read[r][1]);
            cr_expect_eq(cs.read[r][2] > 0, fast, "rank %d, fast %d: 4 MiB: %llu bytes read", r,
                         fast, (unsigned long long)cs.read[r][2]);
            cr_expect_eq(cs.read[r][3], 0, "rank %d: 8 MiB (WEFT_SHM_STREAM) staged, not read", r);
            cr_expect_eq(cs.read[r][4], 0, "rank %d: 1 MiB with more ranks than cores staged", r);
            cr_expect_eq(cs.read[r][5], 0, "rank %d: allgather of 32 KiB staged", r);
            cr_expect_eq(cs.read[r][6], fast ? (uint64_t)32 << 10 : 0,
                         "rank %d, fast %d: allgather of 64 KiB: %llu bytes read", r, fast,
                         (unsigned long long)cs.read[r][6]);
            cr_expect_eq(cs.read[r][7], 0, "rank %d: alltoall of 8 KiB blocks staged", r);
            cr_expect_eq(cs.read[r][8], fast ? (uint64_t)16 << 10 : 0,
                         "rank %d, fast %d: alltoall of 16 KiB blocks: %llu bytes read", r, fast,
                         (unsigned long long)cs.read[r][8]);
        }
        shared_done(&cs.sh);
        weft_finalize();
    }
}

/* Which bcasts read the root's buffer by process_vm_readv by default (WEFT_SHM_CMA_COPY=auto):
 * from 32 KiB up, not where ranks outnumber cores. The readers count what they read; the root
 * reads nothing. Then scatters and a gather of blocks of 16 and 32 KiB: from 32 KiB a block,
 * every rank reads its block of the root's buffer (scatter), the root the others' (gather). */
static void cma_bcast_default_body(weft_comm_t comm, int rank, void *arg)
{
    static const size_t sizes[] = {16u << 10, 32u << 10, 1u << 20, 16u << 20, 1u << 20};
    cma_default_shared_t *cs = arg;
    struct weft_comm *c = weft__comm_of(comm);
    int32_t *buf = malloc(16u << 20);

    if (buf == NULL || !cma_default_start(cs, c, rank)) {
        HARNESS_FAIL("rank %d: no memory or no segment", rank);
        free(buf);
        return;
    }
    for (int k = 0; k < 5; k++) {
        size_t n = sizes[k] / sizeof(int32_t);
        uint64_t before = c->coll->shm->cma_bytes;
        int bad = 0;

        c->oversubscribed = k == 4; /* the last call: more ranks than cores */
        for (size_t i = 0; i < n; i++) {
            buf[i] = rank == 0 ? val(k, 0, i) : 0;
        }
        EXPECT(weft_bcast(buf, n, WEFT_INT32, 0, comm) == WEFT_OK,
               "rank %d: bcast of %zu bytes: %s", rank, sizes[k], weft_last_error());
        for (size_t i = 0; i < n && !bad; i++) {
            bad = buf[i] != val(k, 0, i);
        }
        EXPECT(!bad, "rank %d: bcast of %zu bytes: wrong result", rank, sizes[k]);
        cs->read[rank][k] = c->coll->shm->cma_bytes - before;
    }
    c->oversubscribed = 0;
    for (int k = 5; k < 8; k++) {
        size_t n = (k == 5 ? 16u << 10 : 32u << 10) / sizeof(int32_t);
        uint64_t before = c->coll->shm->cma_bytes;
        int32_t *whole = buf + n; /* the root's (scatter) or its result (gather): 2 blocks */
        int bad = 0;

        for (size_t i = 0; i < 2 * n; i++) {
            whole[i] = val(k, 0, i);
        }
        for (size_t i = 0; i < n; i++) {
            buf[i] = k == 7 ? val(k, rank, i) : 0;
        }
        EXPECT((k == 7 ? weft_gather(buf, whole, n, WEFT_INT32, 0, comm)
                       : weft_scatter(whole, buf, n, WEFT_INT32, 0, comm)) == WEFT_OK,
               "rank %d: call %d: %s", rank, k, weft_last_error());
        for (size_t i = 0; i < n && !bad && (k < 7 || rank == 0); i++) {
            bad = k == 7 ? whole[i] != val(k, 0, i) || whole[n + i] != val(k, 1, i)
                         : buf[i] != val(k, 0, (size_t)rank * n + i);
        }
        EXPECT(!bad, "rank %d: call %d: wrong result", rank, k);
        cs->read[rank][k] = c->coll->shm->cma_bytes - before;
    }
    free(buf);
}

Test(segment, single_copy_bcast_gather_scatter_by_default, .timeout = 60)
{
    for (int fast = 1; fast >= 0; fast--) {
        cma_default_shared_t cs = {.fast = fast};
        const uint64_t on = (uint64_t)fast; /* what a read where auto reads reads: all or 0 */

        init();
        cr_assert_eq(weft__coll_tune_load("bcast:0-inf:shm,scatter:0-inf:shm,gather:0-inf:shm"),
                     WEFT_OK, "%s", weft_last_error());
        cr_assert_eq(weft__coll_config.shm_cma_copy, WEFT_SHM_CMA_COPY_AUTO,
                     "the default WEFT_SHM_CMA_COPY");
        shared_init(&cs.sh, 2);
        run_world(&cs.sh, 2, 22, cma_bcast_default_body);
        cma_default_check(&cs);
        for (int k = 0; k < 5; k++) {
            cr_expect_eq(cs.read[0][k], 0, "call %d: the root read %llu bytes", k,
                         (unsigned long long)cs.read[0][k]);
        }
        cr_expect_eq(cs.read[1][0], 0, "16 KiB staged, not read (%llu bytes)",
                     (unsigned long long)cs.read[1][0]);
        cr_expect_eq(cs.read[1][1], on * (32 << 10), "fast %d: 32 KiB read from the root", fast);
        cr_expect_eq(cs.read[1][2], on * (1 << 20), "fast %d: 1 MiB read from the root", fast);
        cr_expect_eq(cs.read[1][3], on * (16 << 20), "fast %d: 16 MiB read from the root", fast);
        cr_expect_eq(cs.read[1][4], 0, "1 MiB with more ranks than cores staged (%llu bytes)",
                     (unsigned long long)cs.read[1][4]);
        for (int r = 0; r < 2; r++) {
            cr_expect_eq(cs.read[r][5], 0, "rank %d: scatter of 16 KiB blocks staged (%llu bytes)",
                         r, (unsigned long long)cs.read[r][5]);
        }
        cr_expect_eq(cs.read[0][6], 0, "scatter of 32 KiB blocks: the root reads nothing");
        cr_expect_eq(cs.read[1][6], on * (32 << 10), "fast %d: scatter: rank 1's 32 KiB block",
                     fast);
        cr_expect_eq(cs.read[0][7], on * (32 << 10), "fast %d: gather: rank 1's 32 KiB", fast);
        cr_expect_eq(cs.read[1][7], 0, "gather of 32 KiB blocks: rank 1 reads nothing");
        shared_done(&cs.sh);
        weft_finalize();
    }
}

/* More local ranks than a reduction combines in one device call many
 * times over (machines with hundreds of cores run that many ranks per
 * node): 255, 256, 300 and 520 ranks on one node. */
Test(segment, hundreds_of_local_ranks, .timeout = 120)
{
    static const int ps[] = {255, 256, 300, 520};

    init();
    cr_assert_eq(weft__coll_tune_load("allreduce:0-inf:shm,reduce:0-inf:shm,"
                                      "reduce_scatter:0-inf:shm"),
                 WEFT_OK, "%s", weft_last_error());
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        shared_t sh;

        shared_init(&sh, ps[i]);
        run_world(&sh, ps[i], 5, many_body);
        cr_assert_eq(atomic_load(&sh.with_shm), ps[i]);
        cr_assert_eq(atomic_load(&sh.checked), ps[i]);
        shared_done(&sh);
    }
    weft__coll_tune_release();
    weft_finalize();
}

/* ------------------------------------------------- 6. after a crash */

#define DEADLINE_S 20.0
#define NOBODY 65534

static uint64_t pid_ns(void)
{
    struct stat st;

    cr_assert_eq(stat("/proc/self/ns/pid", &st), 0, "no /proc/self/ns/pid");
    return (uint64_t)st.st_ino;
}

/* A segment name as a creator of pid (started at start, in namespace ns)
 * makes it (coll/shm/segment.c), for planting. */
static void creator_name(char *buf, size_t cap, long pid, uint64_t start, uint64_t ns, int k)
{
    snprintf(buf, cap, "/weft-%ld-%" PRIx64 "-%" PRIx64 "-%016x%016" PRIx64, pid, start, ns,
             0xabcd0000u + (unsigned)k, (uint64_t)0x1234567890abcdefull);
}

static int plant(const char *name, size_t bytes, int uid)
{
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);

    if (fd < 0) {
        return -1;
    }
    if (ftruncate(fd, (off_t)bytes) != 0 || (uid >= 0 && fchown(fd, (uid_t)uid, (gid_t)uid) != 0)) {
        close(fd);
        shm_unlink(name);
        return -1;
    }
    close(fd);
    return 0;
}

static int present(const char *name)
{
    char path[160];
    struct stat st;

    snprintf(path, sizeof(path), "/dev/shm%s", name);
    return lstat(path, &st) == 0;
}

/* A rank 0 killed between shm_open and shm_unlink: the child creates a
 * 1 MiB segment under its own name, as setup does, and SIGKILLs itself. */
static int killed_creator(int rank, void *arg)
{
    char *name = arg;
    int fd;

    (void)rank;
    creator_name(name, NAME_CHARS, (long)getpid(), weft__proc_start_time(getpid()), pid_ns(), 0);
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, 1 << 20) != 0) {
        _exit(10);
    }
    raise(SIGKILL);
    _exit(11);
}

static void two_ranks_body(weft_comm_t comm, int rank, void *arg)
{
    shared_t *sh = arg;

    (void)rank;
    atomic_fetch_add(&sh->with_shm, weft__comm_of(comm)->coll->shm != NULL);
}

/*
 * What a setup removes from /dev/shm: the name a killed creator left, and a
 * name whose pid now runs another process (a start time that is not its);
 * what it keeps: the name of a creator that runs, another pid namespace's,
 * another user's (run as root), a name not in the creator form.
 */
Test(segment, names_of_dead_creators_removed_at_setup, .timeout = 60)
{
    enum { KILLED, RECYCLED, LIVE, OTHER_NS, OTHER_USER, OTHER_FORM, N };
    static const char *what[N] = {"a killed creator's", "a recycled pid's",
                                  "a live creator's",   "another pid namespace's",
                                  "another user's",     "a name of another form"};
    static const int reaped[N] = {1, 1, 0, 0, 0, 0};
    char *names = harness_shared((size_t)N * NAME_CHARS);
    int planted[N] = {0}, left[N];
    long parent = (long)getppid();
    uint64_t parent_start = weft__proc_start_time((pid_t)parent), ns = pid_ns();
    harness_procs_t procs;
    shared_t sh;

    cr_assert_not_null(names);
    cr_assert_neq(parent_start, 0u, "no start time of the parent process in /proc");
    init();
    cr_assert_eq(harness_fork(&procs, 0, 1, killed_creator, names + KILLED * NAME_CHARS), 0,
                 "fork: %s", strerror(errno));
    cr_assert_eq(harness_reap(&procs, harness_now_s() + DEADLINE_S), 0, "the child did not end");
    cr_assert(WIFSIGNALED(procs.wstatus[0]) && WTERMSIG(procs.wstatus[0]) == SIGKILL,
              "the creating child did not die by SIGKILL (status %#x)", procs.wstatus[0]);
    planted[KILLED] = present(names + KILLED * NAME_CHARS);
    if (!planted[KILLED] && names[KILLED * NAME_CHARS] == '/') {
        /* another weft job's setup (make check runs tests at once) reaped it
         * already: the same name back, as the killed creator left it */
        planted[KILLED] = plant(names + KILLED * NAME_CHARS, 1 << 20, -1) == 0;
    }
    creator_name(names + RECYCLED * NAME_CHARS, NAME_CHARS, parent, parent_start + 1, ns, 1);
    creator_name(names + LIVE * NAME_CHARS, NAME_CHARS, parent, parent_start, ns, 2);
    creator_name(names + OTHER_NS * NAME_CHARS, NAME_CHARS, (long)procs.pid[0], 1, ns + 1, 3);
    creator_name(names + OTHER_USER * NAME_CHARS, NAME_CHARS, (long)procs.pid[0], 1, ns, 4);
    snprintf(names + OTHER_FORM * NAME_CHARS, NAME_CHARS, "/weft-%ld-%032x", (long)procs.pid[0],
             5u);
    for (int i = RECYCLED; i < N; i++) {
        if (i != OTHER_USER || geteuid() == 0) {
            planted[i] = plant(names + i * NAME_CHARS, 4096, i == OTHER_USER ? NOBODY : -1) == 0;
        }
    }
    /* the next job's setup */
    weft__runtime_config.ranks_per_node = 0;
    shared_init(&sh, 2);
    run_world(&sh, 2, 3, two_ranks_body);
    shared_done(&sh);
    for (int i = 0; i < N; i++) {
        left[i] = present(names + i * NAME_CHARS);
        if (left[i]) {
            shm_unlink(names + i * NAME_CHARS); /* clean up before any assertion */
        }
    }
    weft_finalize();
    cr_assert_eq(atomic_load(&sh.with_shm), 2, "the world had no segment");
    cr_assert(planted[KILLED], "the killed creator left no name to remove");
    for (int i = 0; i < N; i++) {
        if (!planted[i]) {
            cr_log_info("%s name was not planted (not root?)", what[i]);
            continue;
        }
        cr_assert_eq(left[i], !reaped[i], "%s name %s was %s by the setup", what[i],
                     names + i * NAME_CHARS, left[i] ? "left" : "removed");
    }
}

/* ------------------------------------- 7. fields read from shared memory */

#define HDR_MAGIC 0x7765667473686d31ull

/* A segment file of L = 2 local ranks: a header page, a control page, and
 * 4 slots of slot bytes (a well-formed one for the default arguments). */
typedef struct header_case {
    const char *what;
    uint64_t magic, local_size, slot_bytes, bytes;
    size_t file_bytes;
    int uid; /* chown the file to it (root only), -1: keep */
} header_case_t;

static int plant_segment(const char *name, const header_case_t *c)
{
    uint64_t h[4] = {c->magic, c->local_size, c->slot_bytes, c->bytes};
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    int ok;

    if (fd < 0) {
        return -1;
    }
    ok = ftruncate(fd, (off_t)c->file_bytes) == 0 && pwrite(fd, h, sizeof(h), 0) == sizeof(h) &&
         (c->uid < 0 || fchown(fd, (uid_t)c->uid, (gid_t)c->uid) == 0);
    close(fd);
    return ok ? 0 : -1;
}

Test(segment, corrupted_headers_refused_nothing_mapped, .timeout = 30)
{
    const size_t good = 2 * 4096 + 4 * 4096;
    const header_case_t cases[] = {
        {"well formed", HDR_MAGIC, 2, 4096, good, good, -1},
        /* 8192 + 4 * (2^62 + 1024) wraps to 12288, the file's size */
        {"slot size that overflows", HDR_MAGIC, 2, (1ull << 62) + 1024, 12288, 12288, -1},
        {"slot size of no whole pages", HDR_MAGIC, 2, 4097, 8192 + 4 * 4097, 8192 + 4 * 4097, -1},
        {"slot size 0", HDR_MAGIC, 2, 0, 8192, 8192, -1},
        {"bytes past the file", HDR_MAGIC, 2, 4096, (uint64_t)1 << 40, good, -1},
        {"slots past the file", HDR_MAGIC, 2, 1 << 20, good, good, -1},
        {"other local size", HDR_MAGIC, 3, 4096, good, good, -1},
        {"bad magic", HDR_MAGIC ^ 1, 2, 4096, good, good, -1},
        {"file smaller than the controls", HDR_MAGIC, 2, 0, 4096, 4096, -1},
        {"file of another user", HDR_MAGIC, 2, 4096, good, good, NOBODY},
    };
    char name[NAME_CHARS];
    mappings_t m;

    init();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const header_case_t *c = &cases[i];
        weft_shm_t *shm;

        if (c->uid >= 0 && geteuid() != 0) {
            cr_log_info("%s: not root, cannot make one", c->what);
            continue;
        }
        snprintf(name, sizeof(name), "/weft-%ld-header-%zu", (long)getpid(), i);
        cr_assert_eq(plant_segment(name, c), 0, "%s: cannot plant %s: %s", c->what, name,
                     strerror(errno));
        shm = weft__shm_attach(2, name);
        cr_assert_eq(read_mappings(&m), 0);
        shm_unlink(name);
        if (i == 0) {
            cr_assert_not_null(shm, "%s: refused: %s", c->what, weft_last_error());
            cr_assert_eq(shm->slot_bytes, 4096);
            cr_assert_eq(m.total, 1);
            weft__shm_release(shm);
            cr_assert_eq(read_mappings(&m), 0);
            cr_assert_eq(m.total, 0, "the well-formed segment is still mapped after release");
            continue;
        }
        if (shm != NULL) {
            weft__shm_release(shm);
        }
        cr_assert_null(shm, "%s: the segment was accepted (slot_bytes %zu)", c->what,
                       shm != NULL ? shm->slot_bytes : 0);
        cr_assert_not_null(strstr(weft_last_error(), "refused"), "%s: no clear error: %s", c->what,
                           weft_last_error());
        cr_assert_eq(m.total, 0, "%s: %d mappings left of a refused segment", c->what, m.total);
    }
    cr_assert_eq(dev_shm_count(), 0);
    weft_finalize();
}

/* The liveness check takes a pid for a rank's process only with the start
 * time the rank published beside it: a pid given to another process since
 * (here: the parent's pid with another start time) is a dead rank. */
Test(segment, recycled_pid_is_a_dead_rank, .timeout = 30)
{
    static const int ranks[2] = {0, 1};
    weft_shm_ctrl_t *ctrl = aligned_alloc(64, 2 * sizeof(*ctrl));
    pid_t parent = getppid();
    uint64_t start = weft__proc_start_time(parent);
    weft_shm_t shm = {.L = 2, .me = 0, .local_ranks = ranks, .dead_rank = -1};
    weft_status_t status;

    init();
    cr_assert_not_null(ctrl);
    cr_assert_neq(start, 0u, "no start time of the parent in /proc");
    memset(ctrl, 0, 2 * sizeof(*ctrl));
    shm.ctrl = ctrl;
    ctrl[0].pid = getpid();
    ctrl[0].start = weft__proc_start_time(getpid());
    ctrl[1].pid = parent;
    ctrl[1].start = start;
    cr_assert_eq(weft__shm_health(&shm, 1), WEFT_OK, "a live rank taken for dead: %s",
                 weft_last_error());
    ctrl[1].start = start + 1;
    shm.checked_ns = 0; /* due again, but a collective's start looks at the clock ... */
    cr_assert_eq(weft__shm_health(&shm, 1), WEFT_OK, "the 2nd call at entry read the clock");
    status = weft__shm_health(&shm, 0); /* ... on every 64th call only, a wait every time */
    cr_assert_eq(status, WEFT_ERR_PEER_FAILED, "a recycled pid taken for the rank's process: %s",
                 weft_status_string(status));
    cr_assert_not_null(strstr(weft_last_error(), "rank 1 failed"), "%s", weft_last_error());
    free(ctrl);
    weft_finalize();
}
