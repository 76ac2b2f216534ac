/*
 * Configuration: the types of the registry, the parsers of its values, and
 * the runtime module's settings. The registry itself (loading every table,
 * dumping them) lives in runtime/config.h, above the modules whose tables it
 * lists. Each module owns one table of entries
 * {name, default, help, parser, field offset} describing a struct of its
 * own; weft_init parses every table once, from the environment (WEFT_<NAME>)
 * over an optional file (WEFT_CONFIG_FILE, lines "NAME = value", '#'
 * comments) over the defaults. Nothing reads the environment after that.
 *
 * Threading: loaded and released under the init lock; read-only between.
 */
#ifndef WEFT_BASE_CONFIG_H
#define WEFT_BASE_CONFIG_H

#include "base/base.h"

/* Parse text into the field at dst; on failure return WEFT_ERR_INVALID_ARG
 * through weft__error() naming what was expected. */
typedef weft_status_t (*weft_config_parse_fn)(const char *text, void *dst);

typedef struct weft_config_entry {
    const char *name; /* without the WEFT_ prefix */
    const char *default_value;
    const char *help;
    weft_config_parse_fn parse;
    size_t offset; /* of the field in the module's config struct */
} weft_config_entry_t;

typedef struct weft_config_table {
    const char *module;
    const weft_config_entry_t *entries;
    size_t count;
    void *fields;        /* the module's config struct */
    const char **values; /* current text of each entry, owned by the registry */
} weft_config_table_t;

/* Parsers. Sizes accept k/m/g suffixes (powers of 1024); doubles accept
 * "inf"; bools accept 0/1/yes/no/on/off/true/false; strings are strdup'ed
 * and freed by weft__config_release(). */
weft_status_t weft__config_parse_int(const char *text, void *dst);
weft_status_t weft__config_parse_size(const char *text, void *dst);
/* A size, or "inf" (SIZE_MAX). */
weft_status_t weft__config_parse_size_inf(const char *text, void *dst);
weft_status_t weft__config_parse_double(const char *text, void *dst);
weft_status_t weft__config_parse_bool(const char *text, void *dst);
weft_status_t weft__config_parse_string(const char *text, void *dst);
weft_status_t weft__config_parse_log_level(const char *text, void *dst);
/* A string naming a directory: no control characters, short enough for a
 * file name under it. */
weft_status_t weft__config_parse_dump_dir(const char *text, void *dst);

/* "4k" -> 4096; "inf" -> SIZE_MAX when allow_inf. */
weft_status_t weft__parse_size(const char *text, int allow_inf, size_t *size_p);

/* The runtime module's own settings. */
typedef struct weft_runtime_config {
    int log_level;          /* weft_log_level_t */
    double timeout;         /* seconds; every wait's deadline */
    char *tune;             /* WEFT_TUNE rules, parsed by coll/select */
    char *bootstrap_addr;   /* where weft_get_unique_id listens ("" = automatic) */
    char *unique_id;        /* weft_comm_world: job id in text form ("" = none) */
    int rank;               /* weft_comm_world with unique_id: this process's rank */
    int nranks;             /* weft_comm_world with unique_id: the job's size */
    int ranks_per_node;     /* > 0: cut nodes into virtual nodes of this many ranks */
    char *dump_dir;         /* flight recorder JSON files go here ("" = none) */
    int dump_on_signal;     /* SIGUSR1 dumps the flight recorders */
    int cuda_device;        /* the CUDA device of a thread without a context (-1: by local rank) */
    size_t pinned_cache;    /* bytes of staging buffers kept for reuse (device/pinned.c) */
    size_t host_copy;       /* host copies from here take weft's vector loop (device/host) */
} weft_runtime_config_t;

/* Filled by the registry (runtime/config.c) at weft_init; read by every
 * layer (core's deadlines, the CUDA backend's timeout). */
extern weft_runtime_config_t weft__runtime_config;

#endif /* WEFT_BASE_CONFIG_H */
