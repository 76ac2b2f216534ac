/*
 * libFuzzer target: the WEFT_CONFIG_FILE reader (weft__config_load). Each
 * input is the whole file, put in a memory file that WEFT_CONFIG_FILE names
 * (/proc/self/fd/N), so the real path runs: the line reader, the name check
 * and every variable's parser. The WEFT_* environment is cleared first so
 * that only the file speaks. A refused file must say why.
 */
#include "runtime/config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern char **environ;

static int memfd = -1;

static void setup(void)
{
    char path[64];

    /* drop every WEFT_ variable (unsetenv shifts environ: restart each time) */
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; *e != NULL; e++) {
            if (strncmp(*e, "WEFT_", 5) == 0) {
                char name[256];
                size_t n = strcspn(*e, "=");

                snprintf(name, sizeof(name), "%.*s", (int)n, *e);
                unsetenv(name);
                again = 1;
                break;
            }
        }
    }
    memfd = memfd_create("weft_config", 0);
    if (memfd < 0) {
        perror("memfd_create");
        abort();
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
    setenv("WEFT_CONFIG_FILE", path, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    weft_status_t status;

    if (memfd < 0) {
        setup();
    }
    if (ftruncate(memfd, 0) != 0 || pwrite(memfd, data, size, 0) != (ssize_t)size) {
        abort();
    }
    status = weft__config_load();
    if (status != WEFT_OK && weft_last_error()[0] == '\0') {
        abort();
    }
    weft__config_release();
    return 0;
}
