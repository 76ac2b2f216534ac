/* The test harness (tests/harness.h). */
#include "tests/harness.h"

#include "runtime/config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double harness_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void harness_sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void *harness_shared(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) {
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

int harness_set_env(const char *name, const char *value)
{
    return value != NULL ? setenv(name, value, 1) : unsetenv(name);
}

int harness_reset_env(const char *keep)
{
    char *text = NULL, *line, *save = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    if (f == NULL) {
        return -1;
    }
    /* the registry's own listing: one "WEFT_<NAME>=value" line per entry */
    weft__config_dump(f);
    if (fclose(f) != 0) {
        free(text);
        return -1;
    }
    unsetenv("WEFT_CONFIG_FILE");
    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        /* "WEFT_<NAME>=value", or a setting whose value the dump keeps to
         * itself: "# WEFT_<NAME> is set (...)" */
        char *end;

        if (strncmp(line, "# WEFT_", 7) == 0 && (end = strstr(line, " is set (")) != NULL) {
            line += 2;
        } else if (strncmp(line, "WEFT_", 5) != 0 || (end = strchr(line, '=')) == NULL) {
            continue;
        }
        *end = '\0';
        if (keep == NULL || strcmp(line, keep) != 0) {
            unsetenv(line);
        }
    }
    free(text);
    return 0;
}

size_t harness_append(char *buf, size_t cap, size_t len, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (cap == 0) {
        return 0;
    }
    if (len >= cap - 1) {
        return cap - 1;
    }
    va_start(ap, fmt);
    n = vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        buf[len] = '\0';
        return len;
    }
    len += (size_t)n;
    return len < cap - 1 ? len : cap - 1;
}

int harness_fork(harness_procs_t *p, int first, int n, harness_child_fn fn, void *arg)
{
    pid_t parent = getpid();

    memset(p, 0, sizeof(*p));
    if (n < 0 || n > HARNESS_MAX_PROCS || first < 0) {
        errno = EINVAL;
        return -1;
    }
    p->n = n;
    fflush(NULL);
    for (int r = first; r < n; r++) {
        pid_t pid = fork();

        if (pid == 0) {
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
                _exit(3);
            }
            _exit(fn(r, arg));
        }
        if (pid < 0) {
            int err = errno;

            harness_kill(p);
            harness_reap(p, 0);
            errno = err;
            return -1;
        }
        p->pid[r] = pid;
    }
    return 0;
}

int harness_poll(harness_procs_t *p)
{
    int left = 0;

    for (int r = 0; r < p->n; r++) {
        if (p->pid[r] <= 0 || p->state[r] != HARNESS_RUNNING) {
            continue;
        }
        if (waitpid(p->pid[r], &p->wstatus[r], WNOHANG) == p->pid[r]) {
            p->state[r] = HARNESS_EXITED;
        } else {
            left++;
        }
    }
    return left;
}

void harness_kill(harness_procs_t *p)
{
    for (int r = 0; r < p->n; r++) {
        if (p->pid[r] > 0 && p->state[r] == HARNESS_RUNNING) {
            kill(p->pid[r], SIGKILL);
        }
    }
}

int harness_reap(harness_procs_t *p, double deadline)
{
    int killed = 0;

    while (harness_poll(p) > 0 && harness_now_s() < deadline) {
        harness_sleep_s(0.002);
    }
    harness_kill(p);
    for (int r = 0; r < p->n; r++) {
        if (p->pid[r] > 0 && p->state[r] == HARNESS_RUNNING) {
            waitpid(p->pid[r], &p->wstatus[r], 0);
            p->state[r] = HARNESS_KILLED;
            killed++;
        }
    }
    return killed;
}

int harness_exited_ok(const harness_procs_t *p, int r)
{
    return p->state[r] == HARNESS_EXITED && WIFEXITED(p->wstatus[r]) &&
           WEXITSTATUS(p->wstatus[r]) == 0;
}

void harness_barrier_init(harness_barrier_t *b, int quorum)
{
    atomic_init(&b->arrived, 0);
    atomic_init(&b->generation, 0);
    atomic_init(&b->quorum, quorum);
}

int harness_barrier_wait(harness_barrier_t *b, double deadline, int (*idle)(void *arg), void *arg)
{
    int gen = atomic_load(&b->generation);

    if (atomic_fetch_add(&b->arrived, 1) + 1 == atomic_load(&b->quorum)) {
        atomic_store(&b->arrived, 0);
        atomic_fetch_add(&b->generation, 1);
        return 0;
    }
    while (atomic_load(&b->generation) == gen) {
        if ((idle != NULL && idle(arg) != 0) || harness_now_s() >= deadline) {
            return -1;
        }
        usleep(50);
    }
    return 0;
}

/* ------------------------------------------------------- failure log */

static struct {
    pthread_mutex_t lock;
    int count;
    char kept[HARNESS_FAILS_KEPT][HARNESS_FAIL_CHARS];
} fails = {.lock = PTHREAD_MUTEX_INITIALIZER};

void harness_fail(int line, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&fails.lock);
    if (fails.count < HARNESS_FAILS_KEPT) {
        char *msg = fails.kept[fails.count];
        int n = snprintf(msg, HARNESS_FAIL_CHARS, "line %d: ", line);

        va_start(ap, fmt);
        vsnprintf(msg + n, HARNESS_FAIL_CHARS - (size_t)n, fmt, ap);
        va_end(ap);
    }
    fails.count++;
    pthread_mutex_unlock(&fails.lock);
}

int harness_fail_count(void)
{
    int n;

    pthread_mutex_lock(&fails.lock);
    n = fails.count;
    pthread_mutex_unlock(&fails.lock);
    return n;
}

const char *harness_fail_message(int i)
{
    return i >= 0 && i < HARNESS_FAILS_KEPT ? fails.kept[i] : "";
}
