/* Private temporaries renamed into place (coll/diag/file.h). */
#include "coll/diag/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRIES 4 /* creations tried before giving up (a collision is 2^-64) */

static int random_hex(char *out)
{
    unsigned char rnd[8];
    size_t got = 0;

    while (got < sizeof(rnd)) {
        ssize_t n = getrandom(rnd + got, sizeof(rnd) - got, 0);

        if (n < 0 && errno != EINTR) {
            return -1;
        }
        got += n > 0 ? (size_t)n : 0;
    }
    for (size_t i = 0; i < sizeof(rnd); i++) {
        out[2 * i] = "0123456789abcdef"[rnd[i] >> 4];
        out[2 * i + 1] = "0123456789abcdef"[rnd[i] & 15];
    }
    out[2 * sizeof(rnd)] = '\0';
    return 0;
}

FILE *weft__diag_file_create(const char *path, char *tmp, size_t len)
{
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash != NULL ? (size_t)(slash - path) + 1 : 0;
    char hex[17];
    int err = EEXIST;

    if (strlen(path) + 32 > len) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    for (int i = 0; i < TRIES && err == EEXIST; i++) {
        FILE *f;
        int fd;

        if (random_hex(hex) != 0) {
            return NULL;
        }
        memcpy(tmp, path, dir_len);
        strcpy(tmp + dir_len, ".");
        strcat(tmp + dir_len, path + dir_len);
        strcat(tmp + dir_len, ".");
        strcat(tmp + dir_len, hex);
        strcat(tmp + dir_len, ".tmp");
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            err = errno;
            continue;
        }
        if ((f = fdopen(fd, "w")) != NULL) {
            return f;
        }
        err = errno;
        close(fd);
        unlink(tmp);
        break;
    }
    errno = err;
    return NULL;
}

int weft__diag_file_commit(FILE *f, const char *tmp, const char *path)
{
    int err = 0;

    errno = 0;
    if (fflush(f) != 0 || ferror(f)) {
        err = errno != 0 ? errno : EIO;
    }
    if (fclose(f) != 0 && err == 0) {
        err = errno;
    }
    if (err == 0 && rename(tmp, path) != 0) {
        err = errno;
    }
    if (err != 0) {
        unlink(tmp);
        errno = err;
        return -1;
    }
    return 0;
}

void weft__diag_file_discard(FILE *f, const char *tmp)
{
    int err = errno;

    fclose(f);
    unlink(tmp);
    errno = err;
}
