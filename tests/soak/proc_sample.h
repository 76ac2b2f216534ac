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
    long anon_kib, shmem_kib; /* of rss: anonymous pages (heap, arenas), shared memory */
    int fds;
    int maps;
} sample_t;

/* VmRSS, RssAnon and RssShmem of /proc/self/status, KiB (-1: unreadable). */
static inline long proc_rss_kib_parts(long *anon_p, long *shmem_p)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1, v;

    *anon_p = *shmem_p = -1;
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmRSS: %ld kB", &v) == 1) {
            kib = v;
        } else if (sscanf(line, "RssAnon: %ld kB", &v) == 1) {
            *anon_p = v;
        } else if (sscanf(line, "RssShmem: %ld kB", &v) == 1) {
            *shmem_p = v;
        }
    }
    fclose(f);
    return kib;
}

static inline long proc_rss_kib(void)
{
    long anon, shmem;

    return proc_rss_kib_parts(&anon, &shmem);
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
    sample_t s;

    s.rss_kib = proc_rss_kib_parts(&s.anon_kib, &s.shmem_kib);
    s.fds = proc_count_fds();
    s.maps = proc_count_maps();
    return s;
}

#endif /* WEFT_TESTS_SOAK_PROC_SAMPLE_H */
