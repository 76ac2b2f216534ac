/*
 * What the runtime unit tests (test_runtime.c, test_runtime_config.c) share:
 * a clean environment, temporary config files, the redirected stderr, and
 * the check of a weft_init that must fail.
 */
#ifndef WEFT_TESTS_RUNTIME_RUNTIME_ENV_H
#define WEFT_TESTS_RUNTIME_RUNTIME_ENV_H

#include <stddef.h>

/* Remove every WEFT_* variable of the configuration registry that the
 * caller's shell might have set (harness_reset_env; a test's .init); the
 * second also redirects stderr. */
void clean_env(void);
void clean_env_redirect(void);
/* Write text to a fresh temporary file; the caller unlinks path. */
void write_temp(char *path, size_t cap, const char *text);
/* Everything written to the redirected stderr so far (never blocks). */
size_t read_stderr(char *buf, size_t cap);

/* Expect weft_init to fail with WEFT_ERR_INVALID_ARG and a message holding `what`;
 * the message stays in init_error. */
void expect_init_fails(const char *what);
extern char init_error[512];

#endif /* WEFT_TESTS_RUNTIME_RUNTIME_ENV_H */
