/*
 * The configuration registry: every module's table (base/config.h) loaded
 * once by weft_init, released by the last weft_finalize, dumped by
 * weft_info -c. It lists the tables of the layers below it, so it lives at
 * the top; what the layers below read is in base/config.h.
 *
 * Threading: loaded and released under the init lock; read-only between.
 */
#ifndef WEFT_RUNTIME_CONFIG_H
#define WEFT_RUNTIME_CONFIG_H

#include "base/config.h"

#include <stdio.h>

weft_status_t weft__config_load(void);
void weft__config_release(void);
/* weft_config_get (runtime/init.c checks weft_init was called). */
weft_status_t weft__config_get(const char *name, char *buf, size_t len);
/* Print every variable: name, default, current value, help. */
void weft__config_dump(FILE *stream);

#endif /* WEFT_RUNTIME_CONFIG_H */
