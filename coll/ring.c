/* Fragment geometry of the ring phases. */
#include "coll/ring.h"

void weft__ring_init(weft_ring_t *ring, const weft_coll_args_t *a, size_t total)
{
    size_t max_block = weft__block_count(total, a->size, 0); /* block 0 is a largest one */
    size_t frag_elems = weft__coll_config.ring_frag_size / a->esize;
    size_t nfrag;

    if (frag_elems == 0) {
        frag_elems = 1;
    }
    nfrag = (max_block + frag_elems - 1) / frag_elems;
    /* both phases together must fit the message slots of one operation */
    if (a->size > 1 && nfrag > WEFT_TAG_MAX_SLOT / (2 * (size_t)(a->size - 1))) {
        nfrag = WEFT_TAG_MAX_SLOT / (2 * (size_t)(a->size - 1));
    }
    ring->rank = a->rank;
    ring->size = a->size;
    ring->total = total;
    ring->esize = a->esize;
    ring->nfrag = nfrag > 0 ? (int)nfrag : 1;
    ring->frag_stride = weft__block_count(max_block, ring->nfrag, 0);
}
