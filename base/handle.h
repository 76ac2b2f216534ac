/*
 * Handles: what the public API gives the application for an object it
 * destroys (a communicator, a request, an emu stream). A handle is not a
 * pointer: it packs a slot of a table, the slot's generation and the table's
 * tag into a pointer-sized value,
 *
 *     bit 63      56 55                  24 23                 0
 *        +----------+----------------------+--------------------+
 *        |   tag    |      generation      |    slot index + 1  |
 *        +----------+----------------------+--------------------+
 *
 * so that a destroyed object's memory is freed and its slot reused (under a
 * new generation) while its old handle is still recognised and refused: the
 * generation no longer matches. The tag tells a request from a communicator;
 * a value of no table (a stray pointer, a handle of another kind) is
 * refused without being dereferenced. A slot's generation wraps after 2^32
 * reuses; 2^24 - 1 objects of one kind can be live at once.
 *
 * Threading: add and remove take the table's lock; lookup takes none (the
 * slots of a table never move or go away, and a slot is read atomically).
 * Looking an object up while another thread removes it is the caller's race,
 * as using an MPI communicator while freeing it is.
 */
#ifndef WEFT_BASE_HANDLE_H
#define WEFT_BASE_HANDLE_H

#include "base/base.h"

#include <pthread.h>
#include <stdatomic.h>

#define WEFT_HANDLE_CHUNK 1024u /* slots allocated at once */
#define WEFT_HANDLE_CHUNKS 16383u /* (2^24 - 1) / WEFT_HANDLE_CHUNK, rounded down */

typedef struct weft_handle_slot {
    _Atomic uint32_t gen;  /* the generation of the slot's current (or next) object */
    uint32_t next_free;    /* index + 1 of the next free slot, 0: none */
    void *_Atomic obj;     /* NULL while free */
} weft_handle_slot_t;

typedef struct weft_handle_table {
    const char *kind; /* "communicator": what an error calls a handle */
    uint8_t tag;      /* the top byte of every handle of this table (non-zero) */
    pthread_mutex_t lock;
    uint32_t nslots;    /* slots made so far */
    uint32_t free_head; /* index + 1 of the first free slot, 0: none */
    uint32_t live;      /* objects in the table */
    weft_handle_slot_t *_Atomic chunks[WEFT_HANDLE_CHUNKS];
} weft_handle_table_t;

#define WEFT_HANDLE_TABLE_INIT(kind_, tag_)                                                        \
    {                                                                                              \
        .kind = (kind_), .tag = (tag_), .lock = PTHREAD_MUTEX_INITIALIZER                          \
    }

/* Put obj (not NULL) in the table; its handle in *handle_p. NO_MEMORY when
 * the table is full or a chunk of slots cannot be allocated. */
weft_status_t weft__handle_add(weft_handle_table_t *t, void *obj, void **handle_p);

/* Take handle's object out (its slot is reused under the next generation);
 * returns the object, or NULL when handle is not live in t. */
void *weft__handle_remove(weft_handle_table_t *t, const void *handle);

/* The object of a live handle, or NULL (any other value, never dereferenced). */
static inline void *weft__handle_get(weft_handle_table_t *t, const void *handle)
{
    uintptr_t v = (uintptr_t)handle;
    uint32_t index = (uint32_t)(v & 0xffffffu);

    if (WEFT_UNLIKELY((uint8_t)(v >> 56) != t->tag || index == 0)) {
        return NULL;
    }
    index--;
    weft_handle_slot_t *chunk =
        index / WEFT_HANDLE_CHUNK < WEFT_HANDLE_CHUNKS
            ? atomic_load_explicit(&t->chunks[index / WEFT_HANDLE_CHUNK], memory_order_acquire)
            : NULL;

    if (WEFT_UNLIKELY(chunk == NULL)) {
        return NULL;
    }
    weft_handle_slot_t *s = &chunk[index % WEFT_HANDLE_CHUNK];
    void *obj = atomic_load_explicit(&s->obj, memory_order_acquire);

    return atomic_load_explicit(&s->gen, memory_order_relaxed) == (uint32_t)(v >> 24) ? obj : NULL;
}

/*
 * The object of handle in *obj_p, or WEFT_ERR_INVALID_ARG with a message
 * naming `what`: "<what> is NULL", "<what> was destroyed" (a handle of this
 * table whose object is gone), "<what> is not a weft <kind>".
 */
weft_status_t weft__handle_lookup(weft_handle_table_t *t, const void *handle, const char *what,
                                  void **obj_p);

/* 1 when handle is one t handed out whose object is gone (0 for a live
 * handle and for any value t never handed out). */
int weft__handle_stale(weft_handle_table_t *t, const void *handle);

/* Objects now in the table. */
uint32_t weft__handle_live(weft_handle_table_t *t);

#endif /* WEFT_BASE_HANDLE_H */
