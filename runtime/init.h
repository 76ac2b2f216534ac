/* Library lifetime (weft_init / weft_finalize). */
#ifndef WEFT_RUNTIME_INIT_H
#define WEFT_RUNTIME_INIT_H

#include "base/base.h"

/* WEFT_OK when weft_init has been called (and not undone); otherwise an
 * error naming the call that needs it. */
weft_status_t weft__check_initialized(const char *call);

#endif /* WEFT_RUNTIME_INIT_H */
