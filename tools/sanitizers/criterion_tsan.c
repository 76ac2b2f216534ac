/*
 * Preloaded into Criterion test programs built with ThreadSanitizer (by
 * tools/sanitize.sh tsan), never linked into weft.
 *
 * Criterion's BoxFort maps its inheritable arena at a random 16 MiB-aligned
 * address it draws with rand_r() between 0x200000000000 and 0x600000000000,
 * and gives up after 10 draws that hit mapped pages. Under TSan nearly all
 * of that range is TSan's shadow or reserved memory, so Criterion aborts
 * with "Could not initialize inheritable arena" (Criterion issue #274).
 * This rand_r() keeps the draws inside 0x550000000000-0x568000000000, the
 * application range TSan leaves to position-independent programs.
 */
#include <stdlib.h>

int rand_r(unsigned int *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    /* BoxFort: base = 0x200000000000 + (r & 0x3fffff) * 16 MiB */
    return (int)(0x352000u + (*seed >> 8) % 0x14000u);
}
