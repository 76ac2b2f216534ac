/*
 * libFuzzer target: the TCP bootstrap root's frame parser (tcp_serve.c:
 * conn_read, conn_header and the handlers of HELLO, ALLGATHER, BARRIER,
 * ABORT and RELEASE), which reads whatever connects to its port. Each input
 * starts a fresh root on 127.0.0.1 (weft__tcp_id_create), is sent on one
 * connection, which is then shut for writing, and the root's replies are
 * read to the end of the stream; then the root is released and joined.
 *
 * The input is a sequence of frames, each a 40-byte header (layout in
 * bootstrap/tcp/tcp.h) and the payload its length field announces (cut at
 * the end of the input). The harness writes the job's random token into
 * every header, since nothing could guess it; with a wrong token the root
 * only drops the connection. Checks: the root closes the connection within
 * 10 s, every whole frame it sends decodes, and it is joined afterwards.
 */
#include "bootstrap/tcp/tcp_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPLY_DEADLINE_NS (10 * SEC_NS)

/* Read the root's replies to the end of the stream; abort on a hang or on
 * a reply that does not decode. */
static void read_replies(int fd, const unsigned char *token)
{
    uint64_t deadline = weft__time_ns() + REPLY_DEADLINE_NS;
    unsigned char hdr[HDR_BYTES];
    size_t hdr_got = 0;
    uint64_t skip = 0; /* payload bytes of the current frame still to come */

    for (;;) {
        unsigned char buf[4096];
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&pfd, 1, weft__tcp_timeout_ms(deadline)) == 0) {
            fprintf(stderr, "fuzz_tcp_frames: the root kept the connection open\n");
            abort();
        }
        n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR) {
            continue; /* libFuzzer's SIGALRM */
        }
        if (n <= 0) {
            return; /* end of stream, or reset by the root */
        }
        for (ssize_t i = 0; i < n;) {
            if (skip > 0) {
                size_t k = (size_t)(n - i) < skip ? (size_t)(n - i) : (size_t)skip;

                skip -= k;
                i += (ssize_t)k;
                continue;
            }
            hdr[hdr_got++] = buf[i++];
            if (hdr_got == HDR_BYTES) {
                frame_t f;
                const char *why = weft__tcp_hdr_decode(hdr, token, &f);

                if (why != NULL) {
                    fprintf(stderr, "fuzz_tcp_frames: the root sent a bad frame: %s\n", why);
                    abort();
                }
                skip = f.len;
                hdr_got = 0;
            }
        }
    }
}

/* connect() that survives libFuzzer's SIGALRM: an interrupted connect goes
 * on in the background. */
static int connect_to(int fd, const struct sockaddr *sa, socklen_t len)
{
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    socklen_t errlen = sizeof(int);
    int err = 0;

    if (connect(fd, sa, len) == 0) {
        return 0;
    }
    if (errno != EINTR) {
        return -1;
    }
    while (poll(&pfd, 1, 10000) < 0 && errno == EINTR) {
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &errlen) != 0 || err != 0) {
        errno = err != 0 ? err : errno;
        return -1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    weft_tcp_id_t id;
    struct sockaddr_storage ss;
    socklen_t sslen;
    unsigned char token[TOKEN_BYTES];
    unsigned char *msg;
    root_t *root;
    size_t pos = 0, sent = 0;
    int fd;

    weft__log_level = WEFT_LOG_ERROR;
    if (weft__tcp_id_create("127.0.0.1", &id) != WEFT_OK ||
        weft__tcp_id_decode(&id, &ss, &sslen, token) != WEFT_OK ||
        (root = weft__tcp_root_attach(token, 0)) == NULL) {
        fprintf(stderr, "fuzz_tcp_frames: cannot start a root: %s\n", weft_last_error());
        abort();
    }
    msg = malloc(size > 0 ? size : 1);
    if (msg == NULL) {
        abort();
    }
    memcpy(msg, data, size);
    while (pos + HDR_BYTES <= size) {
        uint64_t len = weft__tcp_get64(msg + pos + 16);

        memcpy(msg + pos + 24, token, TOKEN_BYTES);
        pos += HDR_BYTES;
        pos += len < size - pos ? (size_t)len : size - pos;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect_to(fd, (struct sockaddr *)&ss, sslen) != 0) {
        perror("fuzz_tcp_frames: connect");
        abort();
    }
    while (sent < size) {
        ssize_t n = send(fd, msg + sent, size - sent, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break; /* the root closed on a bad frame: fine */
        }
        sent += (size_t)n;
    }
    shutdown(fd, SHUT_WR);
    read_replies(fd, token);
    close(fd);
    free(msg);
    weft__tcp_root_detach(root, WEFT_OK, "");
    return 0;
}
