/* Configuration registry: loading and dumping of every module's table (the
 * parsers are in base/config_parse.c). */
#include "runtime/config.h"
#include "pt2pt/ucx/ucx.h"

#include "coll/coll.h"
#include "coll/diag/obs.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const weft_config_entry_t runtime_entries[] = {
    {"LOG_LEVEL", "warn", "log verbosity: error, warn, info, debug or trace",
     weft__config_parse_log_level, offsetof(weft_runtime_config_t, log_level)},
    {"TIMEOUT", "300",
     "deadline in seconds of every blocking wait (a collective, a bootstrap exchange); "
     "on expiry the call returns WEFT_ERR_TIMEOUT and logs what it waited for; inf disables it",
     weft__config_parse_double, offsetof(weft_runtime_config_t, timeout)},
    {"TUNE", "",
     "algorithm overrides, comma separated collective:lo-hi:algorithm rules with sizes in "
     "bytes (k, m, g suffixes; hi may be inf), e.g. "
     "allreduce:0-4k:recursive_doubling,allreduce:4k-inf:ring",
     weft__config_parse_string, offsetof(weft_runtime_config_t, tune)},
    {"BOOTSTRAP_ADDR", "",
     "address or interface weft_get_unique_id listens on; empty: the first up non-loopback "
     "IPv4 interface, else 127.0.0.1; the unspecified addresses 0.0.0.0 and :: are refused",
     weft__config_parse_string, offsetof(weft_runtime_config_t, bootstrap_addr)},
    {"UNIQUE_ID", "",
     "weft_comm_world outside mpirun/srun: the job's unique id in text form "
     "(weft_unique_id_to_string), with WEFT_RANK and WEFT_NRANKS",
     weft__config_parse_string, offsetof(weft_runtime_config_t, unique_id)},
    {"RANK", "-1", "this process's rank, with WEFT_UNIQUE_ID", weft__config_parse_int,
     offsetof(weft_runtime_config_t, rank)},
    {"NRANKS", "-1", "the job's number of ranks, with WEFT_UNIQUE_ID", weft__config_parse_int,
     offsetof(weft_runtime_config_t, nranks)},
    {"RANKS_PER_NODE", "0",
     "cut every node into virtual nodes of this many consecutive local ranks (0: real nodes); "
     "for testing hierarchical collectives on one machine",
     weft__config_parse_int, offsetof(weft_runtime_config_t, ranks_per_node)},
    {"DUMP_DIR", "",
     "directory where every rank writes its communicators' flight recorders as JSON "
     "(weft-comm<id>-rank<r>-world<w>.json, read by tools/weft_doctor) when a communicator "
     "times out, loses a peer or sees mismatched arguments, on weft_comm_dump, and on SIGUSR1 "
     "with WEFT_DUMP_ON_SIGNAL; empty: no files",
     weft__config_parse_dump_dir, offsetof(weft_runtime_config_t, dump_dir)},
    {"DUMP_ON_SIGNAL", "no",
     "SIGUSR1 makes every rank dump its communicators' flight recorders (to the log, and to "
     "WEFT_DUMP_DIR when set); a rank blocked in a collective dumps within milliseconds, a rank "
     "outside weft at its next call",
     weft__config_parse_bool, offsetof(weft_runtime_config_t, dump_on_signal)},
    {"CUDA_DEVICE", "-1",
     "the CUDA device weft takes when the thread of its first CUDA call has no current "
     "context (with one, the context's device); -1: the process's local rank (LOCAL_RANK, "
     "OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID, MV2_COMM_WORLD_LOCAL_RANK, "
     "the first one set) modulo the number of devices, device 0 without one",
     weft__config_parse_int, offsetof(weft_runtime_config_t, cuda_device)},
    {"PINNED_CACHE", "256m",
     "bytes of pinned host memory (device buffers staged through the host) and of device "
     "scratch (copies of buffers the device cannot share) kept for reuse once an operation is "
     "done; more is handed back to the driver, but only at a moment when no stream-ordered "
     "operation of that device is pending (freeing while a stream waits can deadlock CUDA)",
     weft__config_parse_size, offsetof(weft_runtime_config_t, pinned_cache)},
    {"HOST_COPY", "2k",
     "copies of host memory (the shared-memory rounds' copies into and out of the node "
     "segment, staging, in-place copies) from this many bytes run weft's own loop of vector "
     "loads and stores where the CPU has AVX2, below it the C library's memcpy; inf: memcpy "
     "always (glibc's `rep movsb` of 2 KiB-512 KiB ran at 2-3 GB/s instead of 35-90 on an AMD "
     "EPYC wherever the destination lay 1-63 bytes ahead of the source modulo 4 KiB)",
     weft__config_parse_size_inf, offsetof(weft_runtime_config_t, host_copy)},
};

static const char *runtime_values[sizeof(runtime_entries) / sizeof(runtime_entries[0])];

static weft_config_table_t runtime_table = {
    "runtime", runtime_entries, sizeof(runtime_entries) / sizeof(runtime_entries[0]),
    &weft__runtime_config, runtime_values};

/* The MPI interposer's settings (bindings/mpi, a library of its own that
 * reads them with weft_config_get after weft_init): here, so that they are
 * parsed, checked and listed like every other. */
typedef struct weft_mpi_config {
    int serve; /* WEFT_MPI */
    int stats; /* WEFT_MPI_STATS */
} weft_mpi_config_t;

static weft_mpi_config_t mpi_config;

static const weft_config_entry_t mpi_entries[] = {
    {"MPI", "yes",
     "libweft_mpi.so (the PMPI interposer) serves MPI collectives with weft; no: it forwards "
     "every call to the MPI library",
     weft__config_parse_bool, offsetof(weft_mpi_config_t, serve)},
    {"MPI_STATS", "no",
     "libweft_mpi.so: rank 0 prints at MPI_Finalize how many calls weft served, how many went "
     "to MPI and why, and the weft communicators made and released",
     weft__config_parse_bool, offsetof(weft_mpi_config_t, stats)},
};

static const char *mpi_values[sizeof(mpi_entries) / sizeof(mpi_entries[0])];

static weft_config_table_t mpi_table = {"mpi", mpi_entries,
                                        sizeof(mpi_entries) / sizeof(mpi_entries[0]),
                                        &mpi_config, mpi_values};

/* Every module's table, in the order weft_info -c prints them. */
static weft_config_table_t *const tables[] = {&runtime_table, &weft__coll_config_table,
                                              &weft__ucx_config_table, &weft__obs_config_table,
                                              &mpi_table};

#define NUM_TABLES (sizeof(tables) / sizeof(tables[0]))

/* Values from WEFT_CONFIG_FILE: a malloc'ed array of "NAME=value" strings. */
typedef struct file_values {
    char **names;
    char **values;
    size_t count;
} file_values_t;

static void file_values_free(file_values_t *fv)
{
    for (size_t i = 0; i < fv->count; i++) {
        free(fv->names[i]);
        free(fv->values[i]);
    }
    free(fv->names);
    free(fv->values);
}

static char *trim(char *s)
{
    char *e;

    while (isspace((unsigned char)*s)) {
        s++;
    }
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) {
        *--e = '\0';
    }
    return s;
}

static weft_status_t file_values_read(const char *path, file_values_t *fv)
{
    char line[4096];
    int lineno = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "WEFT_CONFIG_FILE '%s' cannot be opened: %s",
                           path, strerror(errno));
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *s, *eq, *name, *value;
        char **nn, **nv;

        lineno++;
        /* a longer line would be read as two, its tail as a setting of its own */
        if (strchr(line, '\n') == NULL && !feof(f)) {
            int c = getc(f);

            if (c != '\n' && c != EOF) {
                fclose(f);
                return weft__error(WEFT_ERR_INVALID_ARG,
                                   "%s: line %d is longer than %zu characters", path, lineno,
                                   sizeof(line) - 1);
            }
        }
        s = trim(line);
        if (*s == '\0' || *s == '#') {
            continue;
        }
        eq = strchr(s, '=');
        if (eq == NULL) {
            fclose(f);
            return weft__error(WEFT_ERR_INVALID_ARG, "%s:%d: expected NAME = value", path,
                               lineno);
        }
        *eq = '\0';
        name = trim(s);
        value = trim(eq + 1);
        if (strncmp(name, "WEFT_", 5) == 0) {
            name += 5;
        }
        nn = realloc(fv->names, (fv->count + 1) * sizeof(*nn));
        if (nn != NULL) {
            fv->names = nn;
        }
        nv = realloc(fv->values, (fv->count + 1) * sizeof(*nv));
        if (nv != NULL) {
            fv->values = nv;
        }
        if (nn == NULL || nv == NULL) {
            fclose(f);
            return weft__error(WEFT_ERR_NO_MEMORY, "reading %s", path);
        }
        fv->names[fv->count] = strdup(name);
        fv->values[fv->count] = strdup(value);
        fv->count++;
        if (fv->names[fv->count - 1] == NULL || fv->values[fv->count - 1] == NULL) {
            fclose(f);
            return weft__error(WEFT_ERR_NO_MEMORY, "reading %s", path);
        }
    }
    fclose(f);
    return WEFT_OK;
}

static int entry_known(const char *name)
{
    for (size_t t = 0; t < NUM_TABLES; t++) {
        for (size_t i = 0; i < tables[t]->count; i++) {
            if (strcmp(tables[t]->entries[i].name, name) == 0) {
                return 1;
            }
        }
    }
    return 0;
}

weft_status_t weft__config_load(void)
{
    file_values_t fv = {0};
    const char *path = getenv("WEFT_CONFIG_FILE");
    weft_status_t status = WEFT_OK;

    if (path != NULL && *path != '\0') {
        WEFT_CHECK_GOTO(file_values_read(path, &fv), out);
        for (size_t i = 0; i < fv.count; i++) {
            if (!entry_known(fv.names[i])) {
                status = weft__error(WEFT_ERR_INVALID_ARG, "%s: unknown variable WEFT_%s", path,
                                     fv.names[i]);
                goto out;
            }
        }
    }
    for (size_t t = 0; t < NUM_TABLES; t++) {
        weft_config_table_t *tab = tables[t];

        for (size_t i = 0; i < tab->count; i++) {
            const weft_config_entry_t *e = &tab->entries[i];
            char envname[128];
            const char *value = e->default_value;
            const char *source = "default";

            for (size_t k = 0; k < fv.count; k++) {
                if (strcmp(fv.names[k], e->name) == 0) {
                    value = fv.values[k];
                    source = path;
                }
            }
            snprintf(envname, sizeof(envname), "WEFT_%s", e->name);
            if (getenv(envname) != NULL) {
                value = getenv(envname);
                source = "environment";
            }
            status = e->parse(value, (char *)tab->fields + e->offset);
            if (status != WEFT_OK) {
                char detail[256];

                snprintf(detail, sizeof(detail), "%s", weft_last_error());
                status = weft__error(status, "%s (from %s): %s", envname, source, detail);
                goto out;
            }
            free((void *)tab->values[i]);
            tab->values[i] = strdup(value);
            if (tab->values[i] == NULL) {
                status = weft__error(WEFT_ERR_NO_MEMORY, "cannot copy configuration value");
                goto out;
            }
        }
    }
    weft__log_level = (weft_log_level_t)weft__runtime_config.log_level;
out:
    file_values_free(&fv);
    if (status != WEFT_OK) {
        weft__config_release();
    }
    return status;
}

void weft__config_release(void)
{
    free(weft__runtime_config.tune);
    free(weft__runtime_config.bootstrap_addr);
    free(weft__runtime_config.unique_id);
    free(weft__runtime_config.dump_dir);
    weft__runtime_config.dump_dir = NULL;
    weft__runtime_config.tune = NULL;
    weft__runtime_config.bootstrap_addr = NULL;
    weft__runtime_config.unique_id = NULL;
    for (size_t t = 0; t < NUM_TABLES; t++) {
        for (size_t i = 0; i < tables[t]->count; i++) {
            free((void *)tables[t]->values[i]);
            tables[t]->values[i] = NULL;
        }
    }
}

weft_status_t weft__config_get(const char *name, char *buf, size_t len)
{
    const char *key = name != NULL && strncmp(name, "WEFT_", 5) == 0 ? name + 5 : name;

    if (name == NULL || buf == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_config_get: %s is NULL",
                           name == NULL ? "name" : "buf");
    }
    for (size_t t = 0; t < NUM_TABLES; t++) {
        for (size_t i = 0; i < tables[t]->count; i++) {
            const weft_config_entry_t *e = &tables[t]->entries[i];
            const char *text = tables[t]->values[i];
            int flag;

            if (strcmp(e->name, key) != 0) {
                continue;
            }
            /* loaded, so it parses; a boolean reads as 1 or 0 */
            if (e->parse == weft__config_parse_bool && text != NULL &&
                weft__config_parse_bool(text, &flag) == WEFT_OK) {
                text = flag ? "1" : "0";
            }
            if (text == NULL || strlen(text) >= len) {
                return weft__error(WEFT_ERR_INVALID_ARG,
                                   "weft_config_get: WEFT_%s's value does not fit in %zu bytes",
                                   key, len);
            }
            memcpy(buf, text, strlen(text) + 1);
            return WEFT_OK;
        }
    }
    return weft__error(WEFT_ERR_INVALID_ARG, "weft_config_get: no variable WEFT_%s", key);
}

/* Variables whose value is a secret: whoever reads it can join the job (take
 * an absent rank's place, abort it), so weft__config_dump does not print it. */
static int is_secret(const weft_config_entry_t *e)
{
    return strcmp(e->name, "UNIQUE_ID") == 0;
}

void weft__config_dump(FILE *stream)
{
    for (size_t t = 0; t < NUM_TABLES; t++) {
        const weft_config_table_t *tab = tables[t];

        fprintf(stream, "# module %s\n", tab->module);
        for (size_t i = 0; i < tab->count; i++) {
            const weft_config_entry_t *e = &tab->entries[i];

            const char *value = tab->values[i] ? tab->values[i] : e->default_value;

            if (is_secret(e) && *value != '\0') {
                /* a comment, so that the dump still reads as a configuration file */
                fprintf(stream,
                        "#\n# %s\n# default: '%s'\n# WEFT_%s is set (%zu characters), not "
                        "shown: it holds the job's secret token\n",
                        e->help, e->default_value, e->name, strlen(value));
                continue;
            }
            fprintf(stream, "#\n# %s\n# default: '%s'\nWEFT_%s=%s\n", e->help, e->default_value,
                    e->name, value);
        }
        fprintf(stream, "\n");
    }
}
