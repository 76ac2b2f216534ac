/*
 * Emu memory: every allocation is a memfd mapped shared, so another process
 * of the node can map the same pages (IPC) through /proc/<pid>/fd/<fd>.
 * Allocations are kept sorted by address for weft__emu_owns, which every
 * collective asks about its buffers: a range check against the lowest and
 * highest address ever handed out answers host pointers without a lock.
 *
 * Freed allocations stay reserved (the pages are replaced by an
 * inaccessible mapping and the range is remembered), so a pointer into
 * freed emu memory is recognised as such instead of being taken for host
 * memory, the way a freed CUDA pointer is not host memory either.
 */
#include "device/emu/emu.h"

#include "base/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define IPC_MAGIC 0x656d7531u /* "emu1" */
#define MEMFD_NAME "weft-emu"

typedef struct emu_alloc {
    uintptr_t base;
    size_t size; /* mapped bytes (whole pages) */
    int fd;        /* -1 once freed */
    uint64_t id;   /* unique in this process: imports are cached by (pid, start, id) */
    int shareable; /* ipc_export allowed (see weft__emu_alloc_unshareable) */
} emu_alloc_t;

typedef weft_emu_ipc_handle_t ipc_handle_t;

typedef struct emu_import {
    int pid;
    uint64_t start;
    uint64_t id;
    void *base;
    size_t size;
    int refs;
} emu_import_t;

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static emu_alloc_t *allocs; /* sorted by base */
static int nallocs, cap_allocs;
/* The bases of the last WEFT_EMU_FREED_KEPT freed allocations, oldest at
 * freed_head: their entries stay in allocs, so that a use soon after the
 * free is refused by name ("freed"). Older entries are dropped, so the table
 * stays bounded in a long job (every freed allocation's entry used to stay,
 * and the table grew by 32 bytes an allocation: 4 MiB in minutes of the
 * soak). Every freed range stays reserved (PROT_NONE, no memory behind it),
 * so a late use faults instead of reading another allocation; only address
 * space is spent, not resident memory. */
static uintptr_t freed_ring[WEFT_EMU_FREED_KEPT];
static int freed_head, nfreed;
/* the next allocation's id; the ids handed out so far are weft__emu_epoch */
static atomic_uint_fast64_t next_id = 1;
static atomic_uintptr_t lowest = UINTPTR_MAX, highest = 0;

static pthread_mutex_t import_lock = PTHREAD_MUTEX_INITIALIZER;
static emu_import_t *imports;
static int nimports, cap_imports;
static atomic_uint_fast64_t imports_total;

_Static_assert(sizeof(ipc_handle_t) == WEFT_EMU_IPC_HANDLE_SIZE, "emu ipc handle size");

/* Index of the allocation holding p, or -1. Caller holds the lock. */
static int find(uintptr_t p)
{
    int lo = 0, hi = nallocs - 1;

    while (lo <= hi) {
        int mid = (lo + hi) / 2;

        if (p < allocs[mid].base) {
            hi = mid - 1;
        } else if (p >= allocs[mid].base + allocs[mid].size) {
            lo = mid + 1;
        } else {
            return mid;
        }
    }
    return -1;
}

int weft__emu_owns(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    int i, how = 0;

    if (p < atomic_load_explicit(&lowest, memory_order_relaxed) ||
        p >= atomic_load_explicit(&highest, memory_order_relaxed)) {
        return 0;
    }
    pthread_rwlock_rdlock(&lock);
    if ((i = find(p)) >= 0) {
        how = allocs[i].fd >= 0 ? 1 : -1;
    }
    pthread_rwlock_unlock(&lock);
    return how;
}

uint64_t weft__emu_epoch(void)
{
    return atomic_load_explicit(&next_id, memory_order_acquire);
}

static weft_status_t insert(uintptr_t base, size_t size, int fd, int shareable)
{
    int at = 0;

    if (nallocs == cap_allocs) {
        int ncap = cap_allocs ? 2 * cap_allocs : 64;
        emu_alloc_t *n = realloc(allocs, (size_t)ncap * sizeof(*n));

        if (n == NULL) {
            return weft__error(WEFT_ERR_NO_MEMORY, "emu: allocation table");
        }
        allocs = n;
        cap_allocs = ncap;
    }
    while (at < nallocs && allocs[at].base < base) {
        at++;
    }
    memmove(&allocs[at + 1], &allocs[at], (size_t)(nallocs - at) * sizeof(*allocs));
    allocs[at] = (emu_alloc_t){.base = base,
                               .size = size,
                               .fd = fd,
                               .id = atomic_fetch_add(&next_id, 1),
                               .shareable = shareable};
    nallocs++;
    if (base < atomic_load(&lowest)) {
        atomic_store(&lowest, base);
    }
    if (base + size > atomic_load(&highest)) {
        atomic_store(&highest, base + size);
    }
    return WEFT_OK;
}

static weft_status_t emu_alloc(size_t bytes, int shareable, void **ptr_p)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = bytes == 0 ? page : (bytes + page - 1) / page * page;
    weft_status_t status;
    void *p;
    int fd;

    if (bytes > SIZE_MAX - page) {
        return weft__error(WEFT_ERR_INVALID_ARG, "emu: cannot allocate %zu bytes", bytes);
    }
    fd = memfd_create(MEMFD_NAME, MFD_CLOEXEC);
    if (fd < 0) {
        return weft__error(WEFT_ERR_NO_MEMORY, "emu: memfd_create: %s", strerror(errno));
    }
    if (ftruncate(fd, (off_t)size) != 0) {
        status = weft__error(WEFT_ERR_NO_MEMORY, "emu: cannot size %zu bytes: %s", size,
                             strerror(errno));
        close(fd);
        return status;
    }
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        status = weft__error(WEFT_ERR_NO_MEMORY, "emu: cannot map %zu bytes: %s", size,
                             strerror(errno));
        close(fd);
        return status;
    }
    pthread_rwlock_wrlock(&lock);
    status = insert((uintptr_t)p, size, fd, shareable);
    pthread_rwlock_unlock(&lock);
    if (status != WEFT_OK) {
        munmap(p, size);
        close(fd);
        return status;
    }
    *ptr_p = p;
    return WEFT_OK;
}

weft_status_t weft__emu_alloc(size_t bytes, void **ptr_p)
{
    return emu_alloc(bytes, 1, ptr_p);
}

weft_status_t weft__emu_alloc_unshareable(size_t bytes, void **ptr_p)
{
    return emu_alloc(bytes, 0, ptr_p);
}

int weft__emu_ipc_capable(const void *ptr)
{
    int i, capable = 0;

    pthread_rwlock_rdlock(&lock);
    if ((i = find((uintptr_t)ptr)) >= 0) {
        capable = allocs[i].fd >= 0 && allocs[i].shareable;
    }
    pthread_rwlock_unlock(&lock);
    return capable;
}

/* Forget the oldest freed allocation: drop its entry (its range stays
 * reserved). Lock held (write). */
static void release_oldest_freed(void)
{
    uintptr_t base = freed_ring[freed_head];
    int i = find(base);

    freed_head = (freed_head + 1) % WEFT_EMU_FREED_KEPT;
    nfreed--;
    if (i < 0 || allocs[i].base != base || allocs[i].fd >= 0) {
        return; /* not a freed entry (cannot happen: entries leave only here) */
    }
    memmove(&allocs[i], &allocs[i + 1], (size_t)(nallocs - i - 1) * sizeof(*allocs));
    nallocs--;
}

int weft__emu_table_entries(void)
{
    int n;

    pthread_rwlock_rdlock(&lock);
    n = nallocs;
    pthread_rwlock_unlock(&lock);
    return n;
}

weft_status_t weft__emu_free(void *ptr)
{
    weft_status_t status = WEFT_OK;
    int i;

    pthread_rwlock_wrlock(&lock);
    i = find((uintptr_t)ptr);
    if (i < 0 || allocs[i].base != (uintptr_t)ptr || allocs[i].fd < 0) {
        status = weft__error(WEFT_ERR_INVALID_ARG,
                             "weft_mem_free: %p is not the start of a live emu allocation%s",
                             ptr, i >= 0 && allocs[i].fd < 0 ? " (it was freed already)" : "");
    } else {
        /* keep the range reserved and inaccessible: a later use faults or is refused */
        void *p = mmap(ptr, allocs[i].size, PROT_NONE,
                       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

        if (p == MAP_FAILED) {
            munmap(ptr, allocs[i].size);
        }
        close(allocs[i].fd);
        allocs[i].fd = -1;
        if (nfreed == WEFT_EMU_FREED_KEPT) {
            release_oldest_freed(); /* after which i may have moved: not used again */
        }
        freed_ring[(freed_head + nfreed) % WEFT_EMU_FREED_KEPT] = (uintptr_t)ptr;
        nfreed++;
    }
    pthread_rwlock_unlock(&lock);
    return status;
}

weft_status_t weft__emu_ipc_export(const void *ptr, void *handle)
{
    ipc_handle_t h = {
        .magic = IPC_MAGIC, .pid = (int32_t)getpid(), .start = weft__proc_start_time(getpid())};
    int i;

    pthread_rwlock_rdlock(&lock);
    i = find((uintptr_t)ptr);
    if (i >= 0 && allocs[i].fd >= 0 && !allocs[i].shareable) {
        pthread_rwlock_unlock(&lock);
        return weft__error(WEFT_ERR_UNSUPPORTED,
                           "emu ipc: %p is in an allocation that cannot be shared with another "
                           "process",
                           ptr);
    }
    if (i >= 0 && allocs[i].fd >= 0) {
        h.fd = allocs[i].fd;
        h.id = allocs[i].id;
        h.size = allocs[i].size;
        h.offset = (uintptr_t)ptr - allocs[i].base;
    }
    pthread_rwlock_unlock(&lock);
    if (h.size == 0) {
        return weft__error(WEFT_ERR_INVALID_ARG, "emu ipc: %p is not live emu memory", ptr);
    }
    memcpy(handle, &h, sizeof(h));
    return WEFT_OK;
}

/* Same process: the pointer itself (no mapping to close). */
static weft_status_t import_local(const ipc_handle_t *h, void **ptr_p)
{
    int i;
    void *p = NULL;

    pthread_rwlock_rdlock(&lock);
    for (i = 0; i < nallocs; i++) {
        if (allocs[i].id == h->id && allocs[i].fd >= 0) {
            p = (char *)allocs[i].base + h->offset;
        }
    }
    pthread_rwlock_unlock(&lock);
    if (p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "emu ipc: allocation %llu was freed",
                           (unsigned long long)h->id);
    }
    *ptr_p = p;
    return WEFT_OK;
}

/*
 * Whether fd, opened from path (/proc/<pid>/fd/<fd> of h), may be mapped for
 * h: the pid was still the exporter when it was opened (its start time
 * matches after the open, so the fd is the exporter's: a pid given to a new
 * process would show a later start time), the file is an emu allocation's
 * memfd of this user, and it holds h->size bytes (a mapping past its end
 * would fault on use).
 */
static weft_status_t check_import(const ipc_handle_t *h, int fd, const char *path)
{
    char self[64], link[128];
    struct stat st;
    ssize_t n;

    if (h->start == 0 || weft__proc_start_time(h->pid) != h->start) {
        return weft__error(WEFT_ERR_DEVICE,
                           "emu ipc: the handle's process %d (start time %llu) is gone or not "
                           "the exporter: refused, nothing mapped",
                           (int)h->pid, (unsigned long long)h->start);
    }
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    n = readlink(self, link, sizeof(link) - 1);
    link[n > 0 ? n : 0] = '\0';
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        strncmp(link, "/memfd:" MEMFD_NAME, strlen("/memfd:" MEMFD_NAME)) != 0) {
        return weft__error(WEFT_ERR_DEVICE,
                           "emu ipc: %s is not emu memory (%s): refused, nothing mapped", path,
                           link[0] != '\0' ? link : "unknown file");
    }
    if (st.st_uid != geteuid()) {
        return weft__error(WEFT_ERR_DEVICE,
                           "emu ipc: %s belongs to user %ld, not this one (%ld): refused, "
                           "nothing mapped",
                           path, (long)st.st_uid, (long)geteuid());
    }
    if ((uint64_t)st.st_size < h->size) {
        return weft__error(WEFT_ERR_DEVICE,
                           "emu ipc: the handle's size %llu is larger than the allocation "
                           "(%lld bytes at %s): refused, nothing mapped",
                           (unsigned long long)h->size, (long long)st.st_size, path);
    }
    return WEFT_OK;
}

weft_status_t weft__emu_ipc_import(const void *handle, void **ptr_p)
{
    ipc_handle_t h;
    char path[64];
    weft_status_t status = WEFT_OK;
    void *base = NULL;
    int fd;

    memcpy(&h, handle, sizeof(h));
    if (h.magic != IPC_MAGIC || h.offset >= h.size || h.pid <= 0 || h.fd < 0 ||
        h.size > (uint64_t)SIZE_MAX / 2) {
        return weft__error(WEFT_ERR_INVALID_ARG, "emu ipc: not an emu memory handle");
    }
    if (h.pid == (int32_t)getpid()) {
        return import_local(&h, ptr_p);
    }
    pthread_mutex_lock(&import_lock);
    for (int i = 0; i < nimports; i++) {
        if (imports[i].pid == h.pid && imports[i].start == h.start && imports[i].id == h.id) {
            imports[i].refs++;
            base = imports[i].base;
            break;
        }
    }
    if (base == NULL) {
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            status = weft__error(WEFT_ERR_DEVICE, "emu ipc: cannot open %s: %s", path,
                                 strerror(errno));
            goto out;
        }
        status = check_import(&h, fd, path);
        if (status != WEFT_OK) {
            close(fd);
            goto out;
        }
        base = mmap(NULL, h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (base == MAP_FAILED) {
            base = NULL;
            status = weft__error(WEFT_ERR_DEVICE, "emu ipc: cannot map %s: %s", path,
                                 strerror(errno));
            goto out;
        }
        if (nimports == cap_imports) {
            int ncap = cap_imports ? 2 * cap_imports : 16;
            emu_import_t *n = realloc(imports, (size_t)ncap * sizeof(*n));

            if (n == NULL) {
                munmap(base, h.size);
                base = NULL;
                status = weft__error(WEFT_ERR_NO_MEMORY, "emu ipc: import table");
                goto out;
            }
            imports = n;
            cap_imports = ncap;
        }
        imports[nimports++] = (emu_import_t){
            .pid = h.pid, .start = h.start, .id = h.id, .base = base, .size = h.size, .refs = 1};
        atomic_fetch_add(&imports_total, 1);
    }
out:
    pthread_mutex_unlock(&import_lock);
    if (status == WEFT_OK) {
        *ptr_p = (char *)base + h.offset;
    }
    return status;
}

void weft__emu_ipc_close(void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;

    pthread_mutex_lock(&import_lock);
    for (int i = 0; i < nimports; i++) {
        uintptr_t b = (uintptr_t)imports[i].base;

        if (p >= b && p < b + imports[i].size) {
            if (--imports[i].refs == 0) {
                munmap(imports[i].base, imports[i].size);
                imports[i] = imports[--nimports];
            }
            break;
        }
    }
    pthread_mutex_unlock(&import_lock);
}

int weft__emu_ipc_imports_open(void)
{
    int n;

    pthread_mutex_lock(&import_lock);
    n = nimports;
    pthread_mutex_unlock(&import_lock);
    return n;
}

uint64_t weft__emu_ipc_imports_total(void)
{
    return atomic_load(&imports_total);
}
