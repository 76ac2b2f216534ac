/*
 * What the soak programs watch of their own process (tests/soak/soak.c and
 * mpi_churn.c): resident memory, open descriptors, mappings. -1 when /proc
 * cannot be read.
 */
#ifndef WEFT_TESTS_SOAK_PROC_SAMPLE_H
#define WEFT_TESTS_SOAK_PROC_SAMPLE_H

#include <dirent.h>
#include <stdio.h>

typedef struct sample {
    long rss_kib;
    int fds;
    int maps;
} sample_t;

static inline long proc_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) {
            break;
        }
    }
    fclose(f);
    return kib;
}

static inline int proc_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

static inline int proc_count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    int n = 0, c;

    if (f == NULL) {
        return -1;
    }
    while ((c = fgetc(f)) != EOF) {
        n += c == '\n';
    }
    fclose(f);
    return n;
}

static inline sample_t proc_sample(void)
{
    sample_t s = {.rss_kib = proc_rss_kib(), .fds = proc_count_fds(), .maps = proc_count_maps()};

    return s;
}

#endif /* WEFT_TESTS_SOAK_PROC_SAMPLE_H */
