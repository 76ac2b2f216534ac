/* Node maps (comm/node.h). */
#include "comm/node.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

uint64_t weft__node_key(void)
{
    char buf[256 + 64] = "";
    FILE *f;

    gethostname(buf, 256);
    buf[255] = '\0';
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        size_t n = strlen(buf);

        if (fgets(buf + n, (int)(sizeof(buf) - n), f) == NULL) {
            buf[n] = '\0';
        }
        fclose(f);
    }
    return fnv1a(0xcbf29ce484222325ull, buf, strlen(buf));
}

void weft__machine_info(weft_machine_info_t *info)
{
    char buf[64] = "";
    cpu_set_t set;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

    memset(info, 0, sizeof(*info));
    if (f != NULL && fgets(buf, (int)sizeof(buf), f) != NULL) {
        info->key = fnv1a(0xcbf29ce484222325ull, buf, strlen(buf));
    } else {
        info->key = weft__node_key();
    }
    if (f != NULL) {
        fclose(f);
    }
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (int c = 0; c < WEFT_CPU_WORDS * 64 && c < CPU_SETSIZE; c++) {
            if (CPU_ISSET(c, &set)) {
                info->cpus[c / 64] |= 1ull << (c % 64);
            }
        }
    } else {
        long n = sysconf(_SC_NPROCESSORS_ONLN);

        for (long c = 0; c < n && c < WEFT_CPU_WORDS * 64; c++) {
            info->cpus[c / 64] |= 1ull << (c % 64);
        }
    }
}

static const weft_machine_info_t *info_at(const weft_machine_info_t *all, size_t stride, int r)
{
    return (const weft_machine_info_t *)((const char *)all + (size_t)r * stride);
}

/* cpus |= m's CPUs; returns how many cpus holds then */
static int add_cpus(uint64_t *cpus, const weft_machine_info_t *m)
{
    int n = 0;

    for (int w = 0; w < WEFT_CPU_WORDS; w++) {
        cpus[w] |= m->cpus[w];
        n += __builtin_popcountll(cpus[w]);
    }
    return n;
}

int weft__machine_oversubscribed(const weft_machine_info_t *all, size_t stride, int size, int rank)
{
    const weft_machine_info_t *mine = info_at(all, stride, rank);
    uint64_t cpus[WEFT_CPU_WORDS] = {0};
    int ranks = 0, ncpus = 0;

    for (int r = 0; r < size; r++) {
        if (info_at(all, stride, r)->key == mine->key) {
            ranks++;
            ncpus = add_cpus(cpus, info_at(all, stride, r));
        }
    }
    return ranks > ncpus;
}

typedef struct keyed {
    uint64_t key;
    int rank;
} keyed_t;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed_t *x = a, *y = b;

    return x->key != y->key ? (x->key < y->key ? -1 : 1) : 0;
}

int weft__machines_oversubscribed_any(const weft_machine_info_t *all, size_t stride, int size)
{
    keyed_t *k = malloc((size_t)(size > 0 ? size : 1) * sizeof(*k));
    int any = 0;

    if (k == NULL) {
        return -1;
    }
    for (int r = 0; r < size; r++) {
        k[r].key = info_at(all, stride, r)->key;
        k[r].rank = r;
    }
    qsort(k, (size_t)size, sizeof(*k), cmp_keyed);
    /* a machine's ranks are together now: the union of their masks against their count */
    for (int i = 0, j; i < size && !any; i = j) {
        uint64_t cpus[WEFT_CPU_WORDS] = {0};
        int ncpus = 0;

        for (j = i; j < size && k[j].key == k[i].key; j++) {
            ncpus = add_cpus(cpus, info_at(all, stride, k[j].rank));
        }
        any = j - i > ncpus;
    }
    free(k);
    return any;
}

void weft__node_map_free(weft_node_map_t *map)
{
    if (map == NULL) {
        return;
    }
    free(map->node_of);
    free(map->local_of);
    free(map->local_ranks);
    free(map->rail);
    free(map->rank_at);
    free(map->keys);
    free(map);
}

weft_status_t weft__node_map_create(const uint64_t *keys, int size, int rank, int ranks_per_node,
                                    weft_node_map_t **map_p)
{
    weft_node_map_t *m = calloc(1, sizeof(*m));
    int *count = NULL; /* ranks seen so far per node */

    if (m == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "node map of %d ranks", size);
    }
    m->size = size;
    m->node_of = malloc(sizeof(int) * (size_t)size);
    m->local_of = malloc(sizeof(int) * (size_t)size);
    m->keys = malloc(sizeof(uint64_t) * (size_t)size);
    count = calloc((size_t)size, sizeof(int));
    if (m->node_of == NULL || m->local_of == NULL || m->keys == NULL || count == NULL) {
        goto nomem;
    }
    /* virtual keys first: the k-th group of ranks_per_node ranks of a host */
    for (int r = 0; r < size; r++) {
        int before = 0;

        m->keys[r] = keys[r];
        if (ranks_per_node > 0) {
            uint64_t group;

            for (int q = 0; q < r; q++) {
                before += keys[q] == keys[r];
            }
            group = (uint64_t)(before / ranks_per_node);
            m->keys[r] = fnv1a(keys[r], &group, sizeof(group));
        }
    }
    for (int r = 0; r < size; r++) {
        int n = -1;

        /* the node of r: that of the first earlier rank with the same key */
        for (int q = 0; q < r && n < 0; q++) {
            if (m->keys[q] == m->keys[r]) {
                n = m->node_of[q];
            }
        }
        if (n < 0) {
            n = m->nnodes++;
        }
        m->node_of[r] = n;
        m->local_of[r] = count[n]++;
    }
    m->node = m->node_of[rank];
    m->local_rank = m->local_of[rank];
    m->local_size = count[m->node];
    m->uniform = 1;
    for (int n = 0; n < m->nnodes; n++) {
        m->uniform &= count[n] == m->local_size;
        m->max_local = count[n] > m->max_local ? count[n] : m->max_local;
    }
    m->local_ranks = malloc(sizeof(int) * (size_t)m->local_size);
    m->rail = malloc(sizeof(int) * (size_t)m->nnodes);
    m->rank_at = malloc(sizeof(int) * (size_t)m->nnodes * (size_t)m->max_local);
    if (m->local_ranks == NULL || m->rail == NULL || m->rank_at == NULL) {
        goto nomem;
    }
    for (int i = 0; i < m->nnodes * m->max_local; i++) {
        m->rank_at[i] = -1;
    }
    for (int n = 0; n < m->nnodes; n++) {
        m->rail[n] = -1; /* no rank with this local rank there (not uniform) */
    }
    for (int r = 0; r < size; r++) {
        if (m->node_of[r] == m->node) {
            m->local_ranks[m->local_of[r]] = r;
        }
        if (m->local_of[r] == m->local_rank) {
            m->rail[m->node_of[r]] = r;
        }
        m->rank_at[m->node_of[r] * m->max_local + m->local_of[r]] = r;
    }
    m->node_major = m->uniform;
    for (int r = 0; r < size; r++) {
        m->node_major &= m->node_of[r] * m->local_size + m->local_of[r] == r;
    }
    free(count);
    *map_p = m;
    return WEFT_OK;

nomem:
    free(count);
    weft__node_map_free(m);
    return weft__error(WEFT_ERR_NO_MEMORY, "node map of %d ranks", size);
}

weft_status_t weft__node_map_sub(const weft_node_map_t *parent, const int *members, int n, int rank,
                                 weft_node_map_t **map_p)
{
    uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)(n > 0 ? n : 1));
    weft_status_t status;

    if (keys == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "node map of %d ranks", n);
    }
    for (int i = 0; i < n; i++) {
        keys[i] = parent->keys[members[i]];
    }
    status = weft__node_map_create(keys, n, rank, 0, map_p);
    free(keys);
    return status;
}
