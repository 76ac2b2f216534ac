/*
 * weft_info: what this build of weft is and how it is configured.
 *   weft_info        version and build configuration
 *   weft_info -c     every configuration variable: default, current value, help
 */
#include "weft_config.h"

#include "coll/coll.h"
#include "runtime/config.h"

#include <stdio.h>
#include <string.h>
#include <ucp/api/ucp.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: weft_info [-c] [-h]\n"
               "  -c  print every configuration variable with its default, value and help\n");
}

int main(int argc, char **argv)
{
    int dump_config = 0;
    weft_status_t status;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-c") == 0) {
            dump_config = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "weft_info: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    status = weft_init();
    if (status != WEFT_OK) {
        fprintf(stderr, "weft_info: weft_init failed: %s\n", weft_last_error());
        return 1;
    }
    if (dump_config) {
        weft__config_dump(stdout);
    } else {
        printf("weft %d.%d.%d\n", WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);
        printf("  cuda:         %s\n", WEFT_BUILD_CUDA);
        printf("  ucx headers:  %d.%d (library %s)\n", UCP_API_MAJOR, UCP_API_MINOR,
               ucp_get_version_string());
        printf("  memory types: host\n");
        printf("  transports:   loop (in-process)\n");
        printf("  algorithms:  ");
        for (int k = 0; k < WEFT_COLL_KIND_COUNT; k++) {
            printf(" %s", weft__coll_kind_name((weft_coll_kind_t)k));
        }
        printf(" (see WEFT_TUNE in weft_info -c)\n");
    }
    weft_finalize();
    return 0;
}
