/*
 * Two jobs made from two unique ids between the same two processes, driven
 * at once by two threads of each: their communicators share each process's
 * UCX worker, so they must not match each other's messages. Each thread
 * runs allreduces whose data names its job; a message of the other job
 * would show as a wrong element or a size mismatch.
 */
#include <criterion/criterion.h>

#include <weft.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 200

typedef struct job {
    weft_unique_id_t id;
    int rank; /* this process's rank in the job */
    int job;  /* 0 or 1 */
    char error[256];
} job_t;

static void *run_job(void *arg)
{
    job_t *j = arg;
    weft_comm_t comm;
    weft_status_t st = weft_comm_init_rank(2, &j->id, j->rank, &comm);

    if (st != WEFT_OK) {
        snprintf(j->error, sizeof(j->error), "job %d: init_rank: %s", j->job, weft_last_error());
        return NULL;
    }
    for (int r = 0; r < ROUNDS && j->error[0] == '\0'; r++) {
        /* the same sizes in both jobs: only the communicator tells them apart */
        size_t n = 1 + (size_t)(r % 7) * 1000;
        int64_t *buf = malloc(n * sizeof(int64_t));

        for (size_t i = 0; i < n; i++) {
            buf[i] = (int64_t)j->job * 1000000 + j->rank * 1000 + (int64_t)(i % 100);
        }
        st = weft_allreduce(WEFT_IN_PLACE, buf, n, WEFT_INT64, WEFT_SUM, comm);
        for (size_t i = 0; i < n && st == WEFT_OK; i++) {
            int64_t want = (int64_t)j->job * 2000000 + 1000 + 2 * (int64_t)(i % 100);

            if (buf[i] != want) {
                snprintf(j->error, sizeof(j->error), "job %d round %d: [%zu] = %lld, want %lld",
                         j->job, r, i, (long long)buf[i], (long long)want);
                break;
            }
        }
        if (st != WEFT_OK) {
            snprintf(j->error, sizeof(j->error), "job %d round %d: %s", j->job, r,
                     weft_last_error());
        }
        free(buf);
    }
    weft_comm_destroy(comm);
    return NULL;
}

/* Both jobs in this process; 0 when both were right, else 1 (message on stderr). */
static int run_both(job_t jobs[2])
{
    pthread_t t[2];
    int bad = 0;

    for (int k = 0; k < 2; k++) {
        pthread_create(&t[k], NULL, run_job, &jobs[k]);
    }
    for (int k = 0; k < 2; k++) {
        pthread_join(t[k], NULL);
        if (jobs[k].error[0] != '\0') {
            fprintf(stderr, "test_comm_ids (pid %d): %s\n", (int)getpid(), jobs[k].error);
            bad = 1;
        }
    }
    return bad;
}

Test(comm_ids, two_jobs_between_two_processes, .timeout = 120)
{
    int to_child[2];
    job_t jobs[2] = {{.job = 0}, {.job = 1}};
    weft_unique_id_t other;
    pid_t pid;
    int status, bad;

    setenv("WEFT_TIMEOUT", "60", 1);
    setenv("WEFT_SHM", "no", 1); /* point-to-point over UCX, where the tags meet */
    cr_assert_eq(pipe(to_child), 0);
    /* fork before either process touches weft (a fork after
     * weft_get_unique_id can hang in UCX); the parent starts both jobs and
     * is rank 0 of both, so the two jobs' messages between the processes
     * carry the same source ranks, sequence numbers and sizes */
    pid = fork();
    cr_assert_geq(pid, 0);
    cr_assert_eq(weft_init(), WEFT_OK, "weft_init: %s", weft_last_error());
    if (pid == 0) {
        for (int k = 0; k < 2; k++) {
            if (read(to_child[0], &jobs[k].id, sizeof(other)) != sizeof(other)) {
                _exit(2);
            }
            jobs[k].rank = 1;
        }
        bad = run_both(jobs);
        weft_finalize();
        _exit(bad);
    }
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(weft_get_unique_id(&jobs[k].id), WEFT_OK, "%s", weft_last_error());
        cr_assert_eq(write(to_child[1], &jobs[k].id, sizeof(other)), (ssize_t)sizeof(other));
        jobs[k].rank = 0;
    }
    bad = run_both(jobs);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    weft_finalize();
    cr_assert_eq(bad, 0, "this process's jobs failed (see stderr)");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the other process's jobs failed");
}
