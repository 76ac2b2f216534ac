/*
 * The interposer's lifetime: MPI_Init/MPI_Init_thread start weft and make
 * the weft communicators of MPI_COMM_WORLD and MPI_COMM_SELF; the
 * communicator constructors (comm.c) split one from the parent's for every
 * new intracommunicator. Each is cached in an MPI attribute whose delete
 * callback (run by MPI_Comm_free, or by MPI_Finalize here) releases it.
 * MPI_Finalize prints the statistics (WEFT_MPI_STATS=1) and stops weft
 * before MPI stops.
 *
 * The world's weft communicator is made with a unique id broadcast by PMPI
 * (no launcher involved). The others are split from their parent's, never
 * made with another unique id: weft numbers communicators so that split
 * ones never match each other's messages, while every communicator made by
 * weft_comm_init_rank has the same number (0) and shares the process's
 * transport, so two of them between the same processes could. After each,
 * every rank agrees by a PMPI allreduce whether all of them got one:
 * either all serve on it or none.
 */
#include "bindings/mpi/weft_mpi_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pthread_mutex_t weft__mpi_lock = PTHREAD_MUTEX_INITIALIZER;
int weft__mpi_multiple;
atomic_int weft__mpi_state; /* 0 before MPI_Init, 1 serving, 2 off, 3 finalizing */
static int stats_on;
static int comm_keyval = MPI_KEYVAL_INVALID;
static atomic_long served;
static atomic_long forwarded[WEFT__MPI_WHY_COUNT];
static atomic_long comms_made, comms_released;

/* The communicator whose entry the last check found, where one thread calls MPI at a time
 * (not MPI_THREAD_MULTIPLE): calls on it again skip MPI's attribute lookup (a hash table in Open
 * MPI). delete_attr forgets it, so a handle MPI reuses for another communicator is looked up. */
static MPI_Comm last_comm = MPI_COMM_NULL;
static weft__mpi_comm_t *last_entry;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static weft__mpi_comm_t *registry;

static const char *const reason_name[WEFT__MPI_WHY_COUNT] = {
    [WEFT__MPI_SERVE] = "served",
#define WEFT__MPI_REASON_TEXT(name, text) [WEFT__MPI_WHY_##name] = text,
    WEFT_MPI_REASON_MAP(WEFT__MPI_REASON_TEXT)
#undef WEFT__MPI_REASON_TEXT
};

int weft__mpi_gate(void)
{
    int state = atomic_load_explicit(&weft__mpi_state, memory_order_acquire);

    if (state == 1) {
        return 1;
    }
    weft__mpi_count_forward(state == 2 ? WEFT__MPI_WHY_OFF : WEFT__MPI_WHY_NOT_INIT);
    return 0;
}

void weft__mpi_count_forward(weft__mpi_why_t why)
{
    atomic_fetch_add_explicit(&forwarded[why], 1, memory_order_relaxed);
}

void weft__mpi_count_served(void)
{
    if (weft__mpi_multiple) {
        atomic_fetch_add_explicit(&served, 1, memory_order_relaxed);
    } else { /* one thread calls MPI at a time: no locked add */
        atomic_store_explicit(&served, atomic_load_explicit(&served, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    }
}

int weft__mpi_error_class(weft_status_t status)
{
    switch (status) {
    case WEFT_OK:
        return MPI_SUCCESS;
    case WEFT_ERR_INVALID_ARG:
        return MPI_ERR_ARG;
    case WEFT_ERR_NO_MEMORY:
        return MPI_ERR_NO_MEM;
    case WEFT_ERR_UNSUPPORTED:
        return MPI_ERR_UNSUPPORTED_OPERATION;
    case WEFT_ERR_MISMATCH:
        return MPI_ERR_TRUNCATE;
    case WEFT_ERR_INTERNAL:
        return MPI_ERR_INTERN;
    default: /* transport, timeout, peer failed, aborted, bootstrap, device */
        return MPI_ERR_OTHER;
    }
}

int weft__mpi_raise(weft__mpi_comm_t *e, const char *call, weft_status_t status)
{
    int cls = weft__mpi_error_class(status);

    /* the handler may abort: say what weft saw first */
    fprintf(stderr, "weft_mpi: %s failed in weft: %s (%s)\n", call, weft_status_string(status),
            weft_last_error());
    if (!atomic_load(&e->mcomm_freed)) {
        PMPI_Comm_call_errhandler(e->mcomm, cls);
    }
    return cls;
}

static void registry_add(weft__mpi_comm_t *e)
{
    pthread_mutex_lock(&registry_lock);
    e->next = registry;
    registry = e;
    pthread_mutex_unlock(&registry_lock);
}

static void registry_remove(weft__mpi_comm_t *e)
{
    pthread_mutex_lock(&registry_lock);
    for (weft__mpi_comm_t **p = &registry; *p != NULL; p = &(*p)->next) {
        if (*p == e) {
            *p = e->next;
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
}

void weft__mpi_comm_put(weft__mpi_comm_t *e)
{
    if (atomic_fetch_sub(&e->refs, 1) != 1) {
        return;
    }
    if (e->wc != NULL) {
        pthread_mutex_lock(&weft__mpi_lock);
        weft_comm_destroy(e->wc);
        pthread_mutex_unlock(&weft__mpi_lock);
        atomic_fetch_add(&comms_released, 1);
    }
    free(e);
}

/* MPI_Comm_free (or MPI_Finalize) deletes the attribute: release the weft
 * communicator once no request of it is left. */
static int delete_attr(MPI_Comm comm, int keyval, void *value, void *extra)
{
    weft__mpi_comm_t *e = value;

    (void)comm, (void)keyval, (void)extra;
    atomic_store(&e->mcomm_freed, 1);
    if (e == last_entry) {
        last_comm = MPI_COMM_NULL;
        last_entry = NULL;
    }
    registry_remove(e);
    weft__mpi_comm_put(e);
    return MPI_SUCCESS;
}

/* Cache wc (NULL: some rank has none, never served) as comm's attribute. */
static weft__mpi_comm_t *attach(MPI_Comm comm, weft_comm_t wc, int size, int rank)
{
    weft__mpi_comm_t *e = calloc(1, sizeof(*e));

    if (e == NULL) {
        if (wc != NULL) {
            weft_comm_destroy(wc);
        }
        return NULL;
    }
    if (wc != NULL) {
        atomic_fetch_add(&comms_made, 1);
    }
    e->wc = wc;
    e->mcomm = comm;
    e->rank = rank;
    e->size = size;
    atomic_init(&e->refs, 1);
    if (PMPI_Comm_set_attr(comm, comm_keyval, e) != MPI_SUCCESS) {
        weft__mpi_comm_put(e);
        return NULL;
    }
    registry_add(e);
    return e;
}

/* Every rank of comm got its weft communicator (ok), or none keeps one. */
static int agree(int ok, MPI_Comm comm)
{
    int all_ok = 0;

    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    return all_ok;
}

/* MPI_COMM_WORLD's: a unique id from rank 0, broadcast by PMPI. */
static void make_world(int size, int rank)
{
    struct {
        weft_unique_id_t id;
        int ok;
    } msg;
    weft_comm_t wc = NULL;
    int ok;

    memset(&msg, 0, sizeof(msg));
    if (rank == 0) {
        msg.ok = weft_get_unique_id(&msg.id) == WEFT_OK;
    }
    PMPI_Bcast(&msg, (int)sizeof(msg), MPI_BYTE, 0, MPI_COMM_WORLD);
    ok = msg.ok;
    if (ok && weft_comm_init_rank(size, &msg.id, rank, &wc) != WEFT_OK) {
        fprintf(stderr, "weft_mpi: rank %d of %d: no weft communicator: %s\n", rank, size,
                weft_last_error());
        wc = NULL;
        ok = 0;
    }
    if (!agree(ok, MPI_COMM_WORLD) && wc != NULL) {
        weft_comm_destroy(wc);
        wc = NULL;
    }
    attach(MPI_COMM_WORLD, wc, size, rank);
}

void weft__mpi_derive(MPI_Comm parent, MPI_Comm newc)
{
    weft__mpi_comm_t *pe = NULL;
    weft_comm_t wc = NULL;
    weft_status_t status;
    int flag = 0, inter = 0, color = -1, key = 0, size = 0, zero = 0, ok;
    MPI_Group pg, ng;

    if (atomic_load(&weft__mpi_state) != 1 || parent == MPI_COMM_NULL ||
        PMPI_Comm_get_attr(parent, comm_keyval, &pe, &flag) != MPI_SUCCESS || !flag ||
        pe->wc == NULL) {
        return; /* the same on every rank of parent: no weft communicator to split */
    }
    if (newc != MPI_COMM_NULL && PMPI_Comm_test_inter(newc, &inter) == MPI_SUCCESS && !inter) {
        /* one color per new communicator: its rank 0's rank in parent */
        PMPI_Comm_rank(newc, &key);
        PMPI_Comm_size(newc, &size);
        PMPI_Comm_group(parent, &pg);
        PMPI_Comm_group(newc, &ng);
        PMPI_Group_translate_ranks(ng, 1, &zero, pg, &color);
        PMPI_Group_free(&ng);
        PMPI_Group_free(&pg);
    }
    pthread_mutex_lock(&weft__mpi_lock);
    status = weft_comm_split(pe->wc, color < 0 ? -1 : color, key, &wc);
    pthread_mutex_unlock(&weft__mpi_lock);
    ok = status == WEFT_OK && (color < 0 || wc != NULL);
    if (status != WEFT_OK) {
        fprintf(stderr, "weft_mpi: no weft communicator for a new MPI communicator: %s\n",
                weft_last_error());
    }
    if (!agree(ok, parent) && wc != NULL) {
        weft_comm_destroy(wc);
        wc = NULL;
    }
    if (color >= 0) {
        attach(newc, wc, size, key);
    } else if (wc != NULL) {
        weft_comm_destroy(wc);
    }
}

weft__mpi_why_t weft__mpi_comm_check(MPI_Comm comm, int *size_p, int *rank_p,
                                     weft__mpi_comm_t **e_p)
{
    weft__mpi_comm_t *e;
    int flag = 0, inter = 0;

    if (e_p != NULL) {
        *e_p = NULL;
    }
    if (comm == MPI_COMM_NULL) {
        return WEFT__MPI_WHY_ARGS;
    }
    if (comm == last_comm && !weft__mpi_multiple) {
        e = last_entry;
        flag = 1;
    } else if (PMPI_Comm_get_attr(comm, comm_keyval, &e, &flag) != MPI_SUCCESS) {
        flag = 0;
    } else if (flag && !weft__mpi_multiple) {
        last_comm = comm;
        last_entry = e;
    }
    if (flag) {
        *size_p = e->size;
        *rank_p = e->rank;
        if (e_p != NULL) {
            *e_p = e;
        }
        return WEFT__MPI_SERVE;
    }
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) {
        return WEFT__MPI_WHY_ARGS;
    }
    if (inter) {
        return WEFT__MPI_WHY_INTERCOMM;
    }
    PMPI_Comm_size(comm, size_p);
    PMPI_Comm_rank(comm, rank_p);
    return WEFT__MPI_SERVE;
}

weft__mpi_why_t weft__mpi_comm_get(MPI_Comm comm, weft__mpi_comm_t **e_p)
{
    weft__mpi_comm_t *e = NULL;
    int flag = 0;

    if (PMPI_Comm_get_attr(comm, comm_keyval, &e, &flag) != MPI_SUCCESS) {
        return WEFT__MPI_WHY_ARGS;
    }
    if (!flag || e->wc == NULL) {
        return WEFT__MPI_WHY_NO_COMM;
    }
    atomic_fetch_add(&e->refs, 1);
    *e_p = e;
    return WEFT__MPI_SERVE;
}

WEFT_MPI_EXPORT int weft_comm_from_mpi(MPI_Comm comm, weft_comm_t *comm_p)
{
    weft__mpi_comm_t *e;
    int size, rank;
    weft__mpi_why_t why;

    if (comm_p == NULL) {
        return MPI_ERR_ARG;
    }
    if (comm == MPI_COMM_NULL) {
        return MPI_ERR_COMM;
    }
    if (atomic_load(&weft__mpi_state) != 1) {
        return MPI_ERR_OTHER;
    }
    why = weft__mpi_comm_check(comm, &size, &rank, NULL);
    if (why != WEFT__MPI_SERVE) {
        return MPI_ERR_COMM;
    }
    if (weft__mpi_comm_get(comm, &e) != WEFT__MPI_SERVE) {
        return MPI_ERR_OTHER;
    }
    *comm_p = e->wc;
    weft__mpi_comm_put(e); /* the attribute keeps it until MPI_Comm_free */
    return MPI_SUCCESS;
}

/* A boolean of weft's configuration (WEFT_MPI, WEFT_MPI_STATS: listed by
 * weft_info -c, read by weft_init from the environment or WEFT_CONFIG_FILE). */
static int setting(const char *name)
{
    char value[8];

    return weft_config_get(name, value, sizeof(value)) == WEFT_OK && strcmp(value, "1") == 0;
}

/* After PMPI_Init succeeded: start weft and the world's communicator. */
static void setup(int provided)
{
    int ok, started, all_ok = 0, size, rank;

    weft__mpi_multiple = provided == MPI_THREAD_MULTIPLE;
    started = weft_init() == WEFT_OK;
    stats_on = started && setting("MPI_STATS");
    if (started && !setting("MPI")) {
        weft_finalize();
        atomic_store(&weft__mpi_state, 2);
        return;
    }
    weft__mpi_dtype_setup();
    ok = started && PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_attr, &comm_keyval,
                                            NULL) == MPI_SUCCESS;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (rank == 0) {
            fprintf(stderr,
                    "weft_mpi: weft did not start on every rank (%s): every call goes "
                    "to MPI\n",
                    ok ? "on another rank" : weft_last_error());
        }
        if (started) {
            weft_finalize();
        }
        atomic_store(&weft__mpi_state, 2);
        return;
    }
    /* every rank is here: the world's communicator and this process's */
    atomic_store(&weft__mpi_state, 1);
    make_world(size, rank);
    weft__mpi_derive(MPI_COMM_WORLD, MPI_COMM_SELF);
}

WEFT_MPI_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);

    if (rc == MPI_SUCCESS) {
        setup(MPI_THREAD_SINGLE);
    }
    return rc;
}

WEFT_MPI_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);

    if (rc == MPI_SUCCESS) {
        setup(*provided);
    }
    return rc;
}

static void print_stats(void)
{
    char reasons[512];
    size_t len = 0;
    long total = 0;

    reasons[0] = '\0';
    for (int w = 1; w < WEFT__MPI_WHY_COUNT; w++) {
        long n = atomic_load(&forwarded[w]);

        if (n > 0 && len < sizeof(reasons)) {
            len += (size_t)snprintf(reasons + len, sizeof(reasons) - len, "%s%s=%ld",
                                    total > 0 ? ", " : "", reason_name[w], n);
        }
        total += n;
    }
    printf("weft_mpi: served %ld calls, forwarded %ld (reasons: %s); weft communicators made "
           "%ld, released %ld\n",
           atomic_load(&served), total, total > 0 ? reasons : "none", atomic_load(&comms_made),
           atomic_load(&comms_released));
    fflush(stdout);
}

/*
 * Every rank reaches MPI_Finalize before any stops weft, as Open MPI's own MPI_Finalize fences
 * before its teardown: stopping weft (unmapping the segments and UCX's pools, closing its
 * endpoints) is milliseconds of work, and where ranks outnumber cores a rank still in its last
 * collective waited that long for a core. np 4 on 2 cores, 1000 MPI_Barrier calls timed per
 * rank, then MPI_Reduce and MPI_Finalize: the late ranks' last barrier took 2.1-5.0 ms (a
 * 1000-call average of 5.0-8.6 us, against 2.4-3.7 us for the others); with this barrier
 * 0.1 ms at most. A weft barrier on the world's communicator, whose failure (a rank gone) only
 * ends the wait: the teardown goes on. Returns the seconds it waited (-1: no barrier), which the
 * statistics print.
 */
static double finalize_barrier(void)
{
    weft__mpi_comm_t *e;
    weft_status_t status;
    double t0;
    int size, rank;

    if (weft__mpi_comm_check(MPI_COMM_WORLD, &size, &rank, &e) != WEFT__MPI_SERVE || e == NULL ||
        e->wc == NULL) {
        return -1;
    }
    t0 = PMPI_Wtime();
    status = weft_barrier(e->wc);
    if (status != WEFT_OK) {
        fprintf(stderr,
                "weft_mpi: MPI_Finalize: the barrier before stopping weft failed: %s (%s)\n",
                weft_status_string(status), weft_last_error());
        return -1;
    }
    return PMPI_Wtime() - t0;
}

WEFT_MPI_EXPORT int MPI_Finalize(void)
{
    int state = atomic_load(&weft__mpi_state), rank = 0;
    double waited = -1;

    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (state == 1) {
        atomic_store(&weft__mpi_state, 3); /* forward from now on */
        weft__mpi_request_drain();
        waited = finalize_barrier();
    }
    if (stats_on && rank == 0) {
        print_stats();
        if (waited >= 0) {
            printf("weft_mpi: MPI_Finalize waited %.3f s for every rank to reach it\n", waited);
            fflush(stdout);
        }
    }
    if (state == 1) {
        for (;;) {
            weft__mpi_comm_t *e;

            pthread_mutex_lock(&registry_lock);
            e = registry;
            pthread_mutex_unlock(&registry_lock);
            if (e == NULL) {
                break;
            }
            /* runs delete_attr, which takes e off the registry */
            if (PMPI_Comm_delete_attr(e->mcomm, comm_keyval) != MPI_SUCCESS) {
                registry_remove(e);
            }
        }
        PMPI_Comm_free_keyval(&comm_keyval);
        weft_finalize();
    }
    return PMPI_Finalize();
}
