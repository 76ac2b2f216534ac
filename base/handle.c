/* Handle tables (base/handle.h): slots in chunks that never move, a free
 * list of slots, generations that tell a destroyed object's handle apart. */
#include "base/handle.h"

#include <stdlib.h>

_Static_assert(sizeof(void *) == 8, "weft's handles need 64-bit pointers");

static void *encode(const weft_handle_table_t *t, uint32_t index, uint32_t gen)
{
    return (void *)(((uintptr_t)t->tag << 56) | ((uintptr_t)gen << 24) | (uintptr_t)(index + 1));
}

static weft_handle_slot_t *slot_of(weft_handle_table_t *t, uint32_t index)
{
    return &atomic_load_explicit(&t->chunks[index / WEFT_HANDLE_CHUNK],
                                 memory_order_relaxed)[index % WEFT_HANDLE_CHUNK];
}

weft_status_t weft__handle_add(weft_handle_table_t *t, void *obj, void **handle_p)
{
    uint32_t index;

    pthread_mutex_lock(&t->lock);
    if (t->free_head != 0) {
        index = t->free_head - 1;
        t->free_head = slot_of(t, index)->next_free;
    } else {
        if (t->nslots == WEFT_HANDLE_CHUNKS * WEFT_HANDLE_CHUNK) {
            pthread_mutex_unlock(&t->lock);
            return weft__error(WEFT_ERR_NO_MEMORY, "too many live %ss (%u)", t->kind, t->live);
        }
        index = t->nslots;
        if (index % WEFT_HANDLE_CHUNK == 0) {
            weft_handle_slot_t *chunk = calloc(WEFT_HANDLE_CHUNK, sizeof(*chunk));

            if (chunk == NULL) {
                pthread_mutex_unlock(&t->lock);
                return weft__error(WEFT_ERR_NO_MEMORY, "cannot allocate %s handles", t->kind);
            }
            atomic_store_explicit(&t->chunks[index / WEFT_HANDLE_CHUNK], chunk,
                                  memory_order_release);
        }
        t->nslots++;
    }
    weft_handle_slot_t *s = slot_of(t, index);

    s->next_free = 0;
    atomic_store_explicit(&s->obj, obj, memory_order_release);
    t->live++;
    *handle_p = encode(t, index, atomic_load_explicit(&s->gen, memory_order_relaxed));
    pthread_mutex_unlock(&t->lock);
    return WEFT_OK;
}

void *weft__handle_remove(weft_handle_table_t *t, const void *handle)
{
    pthread_mutex_lock(&t->lock);
    void *obj = weft__handle_get(t, handle);

    if (obj != NULL) {
        uint32_t index = (uint32_t)((uintptr_t)handle & 0xffffffu) - 1;
        weft_handle_slot_t *s = slot_of(t, index);

        /* the old handle stops matching before the slot can be reused */
        atomic_fetch_add_explicit(&s->gen, 1, memory_order_relaxed);
        atomic_store_explicit(&s->obj, NULL, memory_order_release);
        s->next_free = t->free_head;
        t->free_head = index + 1;
        t->live--;
    }
    pthread_mutex_unlock(&t->lock);
    return obj;
}

int weft__handle_stale(weft_handle_table_t *t, const void *handle)
{
    uintptr_t v = (uintptr_t)handle;
    uint32_t index = (uint32_t)(v & 0xffffffu);
    int stale = 0;

    if ((uint8_t)(v >> 56) != t->tag || index == 0) {
        return 0;
    }
    /* a slot that was handed out, at a generation it had and no longer has */
    pthread_mutex_lock(&t->lock);
    if (index <= t->nslots) {
        uint32_t gen = atomic_load_explicit(&slot_of(t, index - 1)->gen, memory_order_relaxed);

        stale = (uint32_t)(v >> 24) - gen >= 0x80000000u;
    }
    pthread_mutex_unlock(&t->lock);
    return stale;
}

weft_status_t weft__handle_lookup(weft_handle_table_t *t, const void *handle, const char *what,
                                  void **obj_p)
{
    void *obj = weft__handle_get(t, handle);

    if (WEFT_UNLIKELY(obj == NULL)) {
        if (handle == NULL) {
            return weft__error(WEFT_ERR_INVALID_ARG, "%s is NULL", what);
        }
        if (weft__handle_stale(t, handle)) {
            return weft__error(WEFT_ERR_INVALID_ARG, "%s was destroyed", what);
        }
        return weft__error(WEFT_ERR_INVALID_ARG, "%s is not a weft %s", what, t->kind);
    }
    *obj_p = obj;
    return WEFT_OK;
}

uint32_t weft__handle_live(weft_handle_table_t *t)
{
    pthread_mutex_lock(&t->lock);
    uint32_t live = t->live;

    pthread_mutex_unlock(&t->lock);
    return live;
}
