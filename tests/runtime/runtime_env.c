/* The environment helpers of the runtime unit tests (runtime_env.h). */
#include "tests/runtime/runtime_env.h"

#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <weft.h>

#include "tests/harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void clean_env(void)
{
    cr_assert_eq(harness_reset_env(NULL), 0, "cannot list the configuration registry");
}

void clean_env_redirect(void)
{
    clean_env();
    cr_redirect_stderr();
}

/* Write text to a fresh temporary file; the caller unlinks path. */
void write_temp(char *path, size_t cap, const char *text)
{
    int fd;
    size_t len = strlen(text);

    snprintf(path, cap, "/tmp/weft_test_config_XXXXXX");
    fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp failed");
    cr_assert_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
}

/* Everything written to the redirected stderr so far (never blocks). */
size_t read_stderr(char *buf, size_t cap)
{
    int fd = fileno(cr_get_redirected_stderr());
    size_t n = 0;
    ssize_t r;

    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    while (n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) > 0) {
        n += (size_t)r;
    }
    buf[n] = '\0';
    return n;
}

char init_error[512];

/* Expect weft_init to fail with WEFT_ERR_INVALID_ARG and a message holding `what`;
 * the message stays in init_error. */
void expect_init_fails(const char *what)
{
    weft_status_t st = weft_init();

    snprintf(init_error, sizeof(init_error), "%s", weft_last_error());
    cr_assert_eq(st, WEFT_ERR_INVALID_ARG, "weft_init returned %d (%s), expected INVALID_ARG", st,
                 weft_status_string(st));
    cr_assert_not_null(strstr(init_error, what), "error '%s' does not name '%s'", init_error, what);
    /* a failed init leaves the library uninitialized */
    cr_assert_eq(weft_finalize(), WEFT_ERR_NOT_INITIALIZED);
}
