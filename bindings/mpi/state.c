/*
 * The interposer's lifetime: MPI_Init/MPI_Init_thread start weft and make
 * the weft communicator of MPI_COMM_WORLD; other communicators get theirs
 * on first use, cached in an MPI attribute whose delete callback (run by
 * MPI_Comm_free, or by MPI_Finalize here) releases it; MPI_Finalize prints
 * the statistics (WEFT_MPI_STATS=1) and stops weft before MPI stops.
 *
 * A weft communicator is made with a unique id broadcast by PMPI over the
 * MPI communicator (no launcher involved), then every rank agrees by a
 * PMPI allreduce whether all of them got one: either all serve or none.
 */
#include "bindings/mpi/weft_mpi_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

atomic_int weft__mpi_state; /* 0 before MPI_Init, 1 serving, 2 off, 3 finalizing */
static int stats_on;
static int comm_keyval = MPI_KEYVAL_INVALID;
static atomic_long served;
static atomic_long forwarded[WEFT__MPI_WHY_COUNT];
static atomic_long comms_made, comms_released;

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
    atomic_fetch_add_explicit(&served, 1, memory_order_relaxed);
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
        weft_comm_destroy(e->wc);
        atomic_fetch_add(&comms_released, 1);
    }
    pthread_mutex_destroy(&e->lock);
    free(e);
}

/* MPI_Comm_free (or MPI_Finalize) deletes the attribute: release the weft
 * communicator once no request of it is left. */
static int delete_attr(MPI_Comm comm, int keyval, void *value, void *extra)
{
    weft__mpi_comm_t *e = value;

    (void)comm, (void)keyval, (void)extra;
    atomic_store(&e->mcomm_freed, 1);
    registry_remove(e);
    weft__mpi_comm_put(e);
    return MPI_SUCCESS;
}

/* Collective over comm: a weft communicator of the same ranks, or an entry
 * with wc == NULL when some rank could not make one. */
static weft__mpi_comm_t *make_entry(MPI_Comm comm, int size, int rank)
{
    struct {
        weft_unique_id_t id;
        int ok;
    } msg;
    weft__mpi_comm_t *e = calloc(1, sizeof(*e));
    int ok, all_ok = 0;

    memset(&msg, 0, sizeof(msg));
    if (rank == 0) {
        msg.ok = e != NULL && weft_get_unique_id(&msg.id) == WEFT_OK;
    }
    PMPI_Bcast(&msg, (int)sizeof(msg), MPI_BYTE, 0, comm);
    ok = msg.ok && e != NULL;
    if (ok && weft_comm_init_rank(size, &msg.id, rank, &e->wc) != WEFT_OK) {
        fprintf(stderr, "weft_mpi: rank %d of %d: no weft communicator: %s\n", rank, size,
                weft_last_error());
        e->wc = NULL;
        ok = 0;
    }
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (e == NULL) {
        return NULL;
    }
    if (!all_ok && e->wc != NULL) {
        weft_comm_destroy(e->wc);
        e->wc = NULL;
    }
    if (e->wc != NULL) {
        atomic_fetch_add(&comms_made, 1);
    }
    e->mcomm = comm;
    e->rank = rank;
    e->size = size;
    atomic_init(&e->refs, 1);
    pthread_mutex_init(&e->lock, NULL);
    if (PMPI_Comm_set_attr(comm, comm_keyval, e) != MPI_SUCCESS) {
        weft__mpi_comm_put(e);
        return NULL;
    }
    registry_add(e);
    return e;
}

weft__mpi_why_t weft__mpi_comm_check(MPI_Comm comm, int *size_p, int *rank_p)
{
    weft__mpi_comm_t *e;
    int flag = 0, inter = 0;

    if (comm == MPI_COMM_NULL) {
        return WEFT__MPI_WHY_ARGS;
    }
    if (PMPI_Comm_get_attr(comm, comm_keyval, &e, &flag) == MPI_SUCCESS && flag) {
        *size_p = e->size;
        *rank_p = e->rank;
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
    int flag = 0, size, rank;

    if (PMPI_Comm_get_attr(comm, comm_keyval, &e, &flag) != MPI_SUCCESS) {
        return WEFT__MPI_WHY_ARGS;
    }
    if (!flag) {
        /* weft__mpi_comm_check ran first: an intracommunicator */
        PMPI_Comm_size(comm, &size);
        PMPI_Comm_rank(comm, &rank);
        e = make_entry(comm, size, rank);
    }
    if (e == NULL || e->wc == NULL) {
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
    why = weft__mpi_comm_check(comm, &size, &rank);
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

static int env_off(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0 || strcmp(v, "no") == 0);
}

static int env_on(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && (strcmp(v, "1") == 0 || strcmp(v, "on") == 0 || strcmp(v, "yes") == 0);
}

/* After PMPI_Init succeeded: start weft and the world's communicator. */
static void setup(void)
{
    int ok, all_ok = 0, size, rank;

    stats_on = env_on("WEFT_MPI_STATS");
    if (env_off("WEFT_MPI")) {
        atomic_store(&weft__mpi_state, 2);
        return;
    }
    weft__mpi_dtype_setup();
    ok = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_attr, &comm_keyval, NULL) ==
         MPI_SUCCESS;
    ok = ok && weft_init() == WEFT_OK;
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
        if (ok) {
            weft_finalize();
        }
        atomic_store(&weft__mpi_state, 2);
        return;
    }
    /* every rank is here: the world's communicator, made now */
    atomic_store(&weft__mpi_state, 1);
    if (make_entry(MPI_COMM_WORLD, size, rank) == NULL) {
        atomic_store(&weft__mpi_state, 2);
    }
}

WEFT_MPI_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);

    if (rc == MPI_SUCCESS) {
        setup();
    }
    return rc;
}

WEFT_MPI_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);

    if (rc == MPI_SUCCESS) {
        setup();
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

WEFT_MPI_EXPORT int MPI_Finalize(void)
{
    int state = atomic_load(&weft__mpi_state), rank = 0;

    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (stats_on && rank == 0) {
        print_stats();
    }
    if (state == 1) {
        atomic_store(&weft__mpi_state, 3); /* forward from now on */
        weft__mpi_request_drain();
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
