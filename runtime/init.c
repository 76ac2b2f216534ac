/*
 * weft_init / weft_finalize: reference counted under one lock. The first
 * weft_init reads the configuration and the tuning rules; the last
 * weft_finalize releases them.
 */
#include "runtime/init.h"
#include "device/device.h"
#include "runtime/enqueue.h"

#include "coll/coll.h"
#include "coll/diag/dump.h"
#include "coll/diag/obs.h"
#include "runtime/comm.h"
#include "runtime/config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int init_count;

/* The flight recorder's files and signal (coll/diag/dump.h): a directory
 * that cannot take them is worth a warning now, not only when a job hangs. */
static void dump_setup(void)
{
    const char *dir = weft__runtime_config.dump_dir;
    struct stat st;

    if (dir != NULL && *dir != '\0') {
        const char *why = NULL;

        if (stat(dir, &st) != 0 || (S_ISDIR(st.st_mode) && access(dir, W_OK | X_OK) != 0)) {
            why = strerror(errno);
        } else if (!S_ISDIR(st.st_mode)) {
            why = "not a directory";
        }
        if (why != NULL) {
            weft__log_warn("WEFT_DUMP_DIR '%s' cannot take flight recorder dumps (%s): none "
                           "will be written until it can",
                           dir, why);
        }
    }
    weft__dump_configure(dir);
    if (weft__runtime_config.dump_on_signal) {
        char saved[512];

        snprintf(saved, sizeof(saved), "%s", weft_last_error());
        weft__dump_signal_install(); /* it warns when it cannot; weft_init goes on */
        weft__error_restore(saved);
    }
}

WEFT_EXPORT weft_status_t weft_init(void)
{
    weft_status_t status = WEFT_OK;

    weft__error_clear();
    pthread_mutex_lock(&init_lock);
    if (atomic_load(&init_count) == 0) {
        status = weft__config_load();
        if (status == WEFT_OK) {
            status = weft__coll_tune_load(weft__runtime_config.tune);
            if (status != WEFT_OK) {
                weft__config_release();
            } else {
                weft__obs_init();
            }
        }
        /* the CUDA backend (when built): the driver opened, no context yet,
         * so that collectives recognise CUDA buffers from the first call */
        weft__device_init();
        if (status == WEFT_OK) {
            dump_setup();
        }
    }
    if (status == WEFT_OK) {
        atomic_fetch_add(&init_count, 1);
    }
    pthread_mutex_unlock(&init_lock);
    if (status != WEFT_OK) {
        weft__log_error("weft_init: %s", weft_last_error());
    }
    return status;
}

WEFT_EXPORT weft_status_t weft_finalize(void)
{
    weft_status_t status = WEFT_OK;

    pthread_mutex_lock(&init_lock);
    if (atomic_load(&init_count) == 0) {
        status = weft__error(WEFT_ERR_NOT_INITIALIZED, "weft_finalize without weft_init");
    } else if (atomic_fetch_sub(&init_count, 1) == 1) {
        weft__enqueue_shutdown();
        weft__dump_signal_remove();
        weft__dump_configure(NULL);
        weft__obs_finalize();
        weft__coll_tune_release();
        weft__config_release();
    }
    pthread_mutex_unlock(&init_lock);
    return status;
}

WEFT_EXPORT weft_status_t weft_config_get(const char *name, char *buf, size_t len)
{
    weft_status_t status = weft__check_initialized("weft_config_get");

    return status != WEFT_OK ? status : weft__config_get(name, buf, len);
}

weft_status_t weft__check_initialized(const char *call)
{
    if (atomic_load(&init_count) == 0) {
        return weft__error(WEFT_ERR_NOT_INITIALIZED, "%s called before weft_init", call);
    }
    return WEFT_OK;
}
