/*
 * The loop transport (pt2pt/loop) through its ops table, and the thread
 * bootstrap (bootstrap/thread).
 *
 * Most tests drive several endpoints from one thread: the loop transport
 * only requires that a rank's receives, progress and tests happen on one
 * thread at a time.
 */
#include <criterion/criterion.h>

#include "bootstrap/thread/thread.h"
#include "pt2pt/loop/loop.h"
#include "tests/harness.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const weft_pt2pt_ops_t *const ops = &weft__loop_ops;

typedef struct world {
    weft_loop_world_t *lw;
    int nranks;
    void *ep[16];
} world_t;

static void world_open(world_t *w, int nranks, uint64_t seed, uint64_t max_delay_ns)
{
    weft_loop_opts_t opts = {.nranks = nranks, .seed = seed, .max_delay_ns = max_delay_ns};

    cr_assert_leq(nranks, 16);
    memset(w, 0, sizeof(*w));
    w->nranks = nranks;
    cr_assert_eq(weft__loop_world_create(&opts, &w->lw), WEFT_OK, "%s", weft_last_error());
    for (int r = 0; r < nranks; r++) {
        cr_assert_eq(weft__loop_ep_create(w->lw, r, &w->ep[r]), WEFT_OK, "%s", weft_last_error());
    }
}

static void world_close(world_t *w)
{
    for (int r = 0; r < w->nranks; r++) {
        ops->ep_release(w->ep[r]);
    }
    weft__loop_world_release(w->lw);
}

static void send_ok(world_t *w, int from, int to, uint64_t tag, const void *buf, size_t bytes)
{
    weft_p2p_req_t *req = NULL;
    int done = 0;
    weft_status_t st = ops->isend(w->ep[from], to, buf, bytes, WEFT_MEM_HOST, tag, &req);

    cr_assert_eq(st, WEFT_OK, "isend %d->%d: %s", from, to, weft_last_error());
    cr_assert_not_null(req);
    /* loop sends are eager: complete at once */
    cr_assert_eq(ops->test(w->ep[from], req, &done, NULL), WEFT_OK);
    cr_assert_eq(done, 1);
}

static weft_p2p_req_t *recv_post(world_t *w, int at, int from, uint64_t tag, void *buf,
                                 size_t bytes)
{
    weft_p2p_req_t *req = NULL;
    weft_status_t st = ops->irecv(w->ep[at], from, buf, bytes, WEFT_MEM_HOST, tag, &req);

    cr_assert_eq(st, WEFT_OK, "irecv at %d from %d: %s", at, from, weft_last_error());
    cr_assert_not_null(req);
    return req;
}

/* Progress `at` until every request in reqs is done (they are freed and set
 * to NULL); statuses go to st. Fails after 5 s. */
static void wait_all(world_t *w, int at, weft_p2p_req_t **reqs, weft_status_t *st, int n)
{
    uint64_t deadline = weft__time_ns() + 5000000000ull;
    int left = n;

    while (left > 0) {
        ops->progress(w->ep[at]);
        for (int i = 0; i < n; i++) {
            int done = 0;
            weft_status_t s;

            if (reqs[i] == NULL) {
                continue;
            }
            s = ops->test(w->ep[at], reqs[i], &done, NULL);
            if (done) {
                reqs[i] = NULL;
                if (st != NULL) {
                    st[i] = s;
                }
                left--;
            }
        }
        if (left > 0) {
            cr_assert_lt(weft__time_ns(), deadline, "%d of %d receives never completed", left, n);
            ops->idle_wait(w->ep[at], 1000000);
        }
    }
}

static weft_status_t wait_one(world_t *w, int at, weft_p2p_req_t *req)
{
    weft_status_t st = WEFT_ERR_INTERNAL;

    wait_all(w, at, &req, &st, 1);
    return st;
}

/* Is req still pending after progress? (it stays valid either way unless done) */
static int pending(world_t *w, int at, weft_p2p_req_t **req)
{
    int done = 0;
    weft_status_t st;

    ops->progress(w->ep[at]);
    st = ops->test(w->ep[at], *req, &done, NULL);
    if (done) {
        *req = NULL;
        return 0;
    }
    cr_assert_eq(st, WEFT_INPROGRESS);
    return 1;
}

static void shuffle(int *a, int n, uint64_t seed)
{
    uint64_t s = seed * 2654435761u + 1;

    for (int i = n - 1; i > 0; i--) {
        int j = (int)(harness_xorshift(&s) % (uint64_t)(i + 1));
        int t = a[i];

        a[i] = a[j];
        a[j] = t;
    }
}

/* ------------------------------------------------------------ matching */

/* Messages with distinct tags match by tag, for receives posted before or
 * after the messages land, in any posting order. */
Test(loop, match_by_tag_any_landing_order)
{
    enum { N = 24 };

    for (uint64_t seed = 0; seed <= 12; seed++) {
        for (int post_first = 0; post_first < 2; post_first++) {
            world_t w;
            int order[N];
            uint32_t got[N];
            weft_p2p_req_t *reqs[N];
            weft_status_t st[N];

            world_open(&w, 3, seed, 0);
            for (int i = 0; i < N; i++) {
                order[i] = i;
                got[i] = 0xdeadbeef;
            }
            shuffle(order, N, seed + 100);
            if (post_first) {
                for (int i = 0; i < N; i++) {
                    int t = order[i];

                    reqs[t] = recv_post(&w, 1, t % 2 == 0 ? 0 : 2, 1000 + (uint64_t)t, &got[t],
                                        sizeof(got[t]));
                }
            }
            for (int t = 0; t < N; t++) {
                uint32_t v = 0xa0000000u + (uint32_t)t * 7919u;

                send_ok(&w, t % 2 == 0 ? 0 : 2, 1, 1000 + (uint64_t)t, &v, sizeof(v));
            }
            if (!post_first) {
                ops->progress(w.ep[1]); /* everything lands as unexpected */
                for (int i = 0; i < N; i++) {
                    int t = order[i];

                    reqs[t] = recv_post(&w, 1, t % 2 == 0 ? 0 : 2, 1000 + (uint64_t)t, &got[t],
                                        sizeof(got[t]));
                }
            }
            wait_all(&w, 1, reqs, st, N);
            for (int t = 0; t < N; t++) {
                cr_assert_eq(st[t], WEFT_OK);
                cr_assert_eq(got[t], 0xa0000000u + (uint32_t)t * 7919u,
                             "seed %llu post_first %d tag %d got %#x", (unsigned long long)seed,
                             post_first, t, got[t]);
            }
            world_close(&w);
        }
    }
}

/* The source is part of the match: the same tag from two ranks goes to the
 * receive naming each rank. */
Test(loop, match_by_source)
{
    world_t w;
    uint64_t a = 0, b = 0;
    uint64_t va = 111, vb = 222;
    weft_p2p_req_t *ra, *rb;

    world_open(&w, 3, 5, 0);
    rb = recv_post(&w, 0, 2, 7, &b, sizeof(b));
    send_ok(&w, 1, 0, 7, &va, sizeof(va));
    ra = recv_post(&w, 0, 1, 7, &a, sizeof(a));
    send_ok(&w, 2, 0, 7, &vb, sizeof(vb));
    cr_assert_eq(wait_one(&w, 0, ra), WEFT_OK);
    cr_assert_eq(wait_one(&w, 0, rb), WEFT_OK);
    cr_assert_eq(a, 111);
    cr_assert_eq(b, 222);
    world_close(&w);
}

/* Non-overtaking: same source and tag keep their send order whatever the
 * landing order of the other traffic. */
Test(loop, same_tag_in_send_order)
{
    enum { N = 50 };

    for (uint64_t seed = 1; seed <= 20; seed++) {
        for (int mode = 0; mode < 3; mode++) {
            /* mode 0: receives posted first; 1: after landing; 2: half and half */
            world_t w;
            uint32_t got0[N], got2[N], other[N];
            weft_p2p_req_t *reqs[3 * N];
            weft_status_t st[3 * N];
            int posted = 0;

            world_open(&w, 3, seed, 0);
            memset(got0, 0xff, sizeof(got0));
            memset(got2, 0xff, sizeof(got2));
            memset(other, 0xff, sizeof(other));
            if (mode == 0) {
                for (int i = 0; i < N; i++) {
                    reqs[posted++] = recv_post(&w, 1, 0, 42, &got0[i], 4);
                    reqs[posted++] = recv_post(&w, 1, 2, 42, &got2[i], 4);
                }
            }
            for (int i = 0; i < N; i++) {
                uint32_t v0 = (uint32_t)i, v2 = 1000u + (uint32_t)i, vo = 5000u + (uint32_t)i;

                /* interleave distinct tags so the random landing has choices */
                send_ok(&w, 0, 1, 42, &v0, 4);
                send_ok(&w, 0, 1, 100 + (uint64_t)i, &vo, 4);
                send_ok(&w, 2, 1, 42, &v2, 4);
                if (mode == 2 && i == N / 2) {
                    ops->progress(w.ep[1]);
                }
            }
            if (mode != 0) {
                ops->progress(w.ep[1]);
                for (int i = 0; i < N; i++) {
                    reqs[posted++] = recv_post(&w, 1, 0, 42, &got0[i], 4);
                    reqs[posted++] = recv_post(&w, 1, 2, 42, &got2[i], 4);
                }
            }
            for (int i = N - 1; i >= 0; i--) {
                reqs[posted++] = recv_post(&w, 1, 0, 100 + (uint64_t)i, &other[i], 4);
            }
            wait_all(&w, 1, reqs, st, posted);
            for (int i = 0; i < posted; i++) {
                cr_assert_eq(st[i], WEFT_OK);
            }
            for (int i = 0; i < N; i++) {
                cr_assert_eq(got0[i], (uint32_t)i,
                             "seed %llu mode %d: receive %d from rank 0 "
                             "got message %u",
                             (unsigned long long)seed, mode, i, got0[i]);
                cr_assert_eq(got2[i], 1000u + (uint32_t)i,
                             "seed %llu mode %d: receive %d from "
                             "rank 2 got message %u",
                             (unsigned long long)seed, mode, i, got2[i]);
                cr_assert_eq(other[i], 5000u + (uint32_t)i);
            }
            world_close(&w);
        }
    }
}

Test(loop, receive_before_and_after_send)
{
    world_t w;
    char msg[] = "hello, loop";
    char a[sizeof(msg)], b[sizeof(msg)];
    weft_p2p_req_t *req;

    world_open(&w, 2, 9, 0);
    /* posted before: stays pending until the message is sent */
    memset(a, 0, sizeof(a));
    req = recv_post(&w, 1, 0, 3, a, sizeof(a));
    cr_assert(pending(&w, 1, &req), "receive completed without a message");
    cr_assert(pending(&w, 1, &req));
    send_ok(&w, 0, 1, 3, msg, sizeof(msg));
    cr_assert_eq(wait_one(&w, 1, req), WEFT_OK);
    cr_assert_str_eq(a, msg);
    /* posted after the message landed */
    memset(b, 0, sizeof(b));
    send_ok(&w, 0, 1, 4, msg, sizeof(msg));
    ops->progress(w.ep[1]);
    ops->progress(w.ep[1]);
    req = recv_post(&w, 1, 0, 4, b, sizeof(b));
    cr_assert_eq(wait_one(&w, 1, req), WEFT_OK);
    cr_assert_str_eq(b, msg);
    /* posted after the send, before any progress */
    memset(b, 0, sizeof(b));
    send_ok(&w, 0, 1, 5, msg, sizeof(msg));
    req = recv_post(&w, 1, 0, 5, b, sizeof(b));
    cr_assert_eq(wait_one(&w, 1, req), WEFT_OK);
    cr_assert_str_eq(b, msg);
    world_close(&w);
}

Test(loop, send_copies_payload_at_once)
{
    world_t w;
    uint64_t v = 0x1122334455667788ull, got = 0;
    weft_p2p_req_t *req;

    world_open(&w, 2, 0, 0);
    send_ok(&w, 0, 1, 1, &v, sizeof(v));
    v = 0; /* the buffer is free once isend returned */
    req = recv_post(&w, 1, 0, 1, &got, sizeof(got));
    cr_assert_eq(wait_one(&w, 1, req), WEFT_OK);
    cr_assert_eq(got, 0x1122334455667788ull);
    world_close(&w);
}

Test(loop, zero_bytes_and_self)
{
    world_t w;
    weft_p2p_req_t *req;
    int32_t v = 77, got = 0;

    world_open(&w, 2, 4, 0);
    send_ok(&w, 0, 1, 9, NULL, 0);
    req = recv_post(&w, 1, 0, 9, NULL, 0);
    cr_assert_eq(wait_one(&w, 1, req), WEFT_OK);
    /* a rank may send to itself */
    send_ok(&w, 1, 1, 10, &v, sizeof(v));
    req = recv_post(&w, 1, 1, 10, &got, sizeof(got));
    cr_assert_eq(wait_one(&w, 1, req), WEFT_OK);
    cr_assert_eq(got, 77);
    world_close(&w);
}

Test(loop, full_64_bit_tags)
{
    world_t w;
    uint64_t tags[] = {0, 1, UINT64_MAX, UINT64_MAX - 1, 1ull << 63, 1ull << 32, 0xffffffffull};
    enum { N = sizeof(tags) / sizeof(tags[0]) };
    uint64_t got[N];
    weft_p2p_req_t *reqs[N];
    weft_status_t st[N];

    world_open(&w, 2, 11, 0);
    for (int i = 0; i < N; i++) {
        got[i] = 0;
        reqs[i] = recv_post(&w, 1, 0, tags[i], &got[i], 8);
    }
    for (int i = N - 1; i >= 0; i--) {
        send_ok(&w, 0, 1, tags[i], &tags[i], 8);
    }
    wait_all(&w, 1, reqs, st, N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(st[i], WEFT_OK);
        cr_assert_eq(got[i], tags[i], "tag %#llx", (unsigned long long)tags[i]);
    }
    world_close(&w);
}

/* ------------------------------------------------------------ mismatch */

Test(loop, size_mismatch)
{
    world_t w;
    uint64_t big[2] = {1, 2};
    uint32_t small = 0;
    weft_p2p_req_t *req;
    weft_status_t st;

    for (int post_first = 0; post_first < 2; post_first++) {
        world_open(&w, 2, 3, 0);
        /* message larger than the receive */
        small = 0xcafef00d;
        req = post_first ? recv_post(&w, 1, 0, 8, &small, sizeof(small)) : NULL;
        send_ok(&w, 0, 1, 8, big, sizeof(big));
        if (!post_first) {
            ops->progress(w.ep[1]);
            req = recv_post(&w, 1, 0, 8, &small, sizeof(small));
        }
        st = wait_one(&w, 1, req);
        cr_assert_eq(st, WEFT_ERR_MISMATCH, "larger message: status %d", st);
        cr_assert_not_null(strstr(weft_last_error(), "16"), "%s", weft_last_error());
        cr_assert_eq(small, 0xcafef00d, "a mismatched message was copied into the receive");
        /* message smaller than the receive */
        req = post_first ? recv_post(&w, 1, 0, 9, big, sizeof(big)) : NULL;
        send_ok(&w, 0, 1, 9, &small, sizeof(small));
        if (!post_first) {
            ops->progress(w.ep[1]);
            req = recv_post(&w, 1, 0, 9, big, sizeof(big));
        }
        st = wait_one(&w, 1, req);
        cr_assert_eq(st, WEFT_ERR_MISMATCH, "smaller message: status %d", st);
        /* the mismatched message is consumed: a later one with the same tag matches */
        small = 5;
        send_ok(&w, 0, 1, 9, &small, sizeof(small));
        small = 0;
        req = recv_post(&w, 1, 0, 9, &small, sizeof(small));
        cr_assert_eq(wait_one(&w, 1, req), WEFT_OK);
        cr_assert_eq(small, 5);
        world_close(&w);
    }
}

/* -------------------------------------------------------------- cancel */

Test(loop, cancel_posted_receive)
{
    for (int when = 0; when < 2; when++) {
        /* when 0: cancel before the send; 1: after the send, before it landed */
        world_t w;
        uint32_t first = 0x01010101, second = 0x02020202;
        uint32_t v = 0xabcd1234;
        weft_p2p_req_t *req;

        world_open(&w, 2, 17, 0);
        req = recv_post(&w, 1, 0, 33, &first, sizeof(first));
        if (when == 1) {
            send_ok(&w, 0, 1, 33, &v, sizeof(v));
        }
        ops->cancel(w.ep[1], req);
        if (when == 0) {
            send_ok(&w, 0, 1, 33, &v, sizeof(v));
        }
        for (int i = 0; i < 10; i++) {
            ops->progress(w.ep[1]);
        }
        cr_assert_eq(first, 0x01010101u, "when %d: cancelled receive's buffer was written", when);
        /* the message is still there for a new receive */
        req = recv_post(&w, 1, 0, 33, &second, sizeof(second));
        cr_assert_eq(wait_one(&w, 1, req), WEFT_OK);
        cr_assert_eq(second, 0xabcd1234u);
        cr_assert_eq(first, 0x01010101u);
        world_close(&w);
    }
}

Test(loop, cancel_one_of_several)
{
    world_t w;
    uint32_t a = 0, b = 0, c = 0, v;
    weft_p2p_req_t *ra, *rb, *rc;

    world_open(&w, 2, 23, 0);
    ra = recv_post(&w, 1, 0, 1, &a, 4);
    rb = recv_post(&w, 1, 0, 1, &b, 4);
    rc = recv_post(&w, 1, 0, 1, &c, 4);
    ops->cancel(w.ep[1], rb);
    for (v = 1; v <= 2; v++) {
        send_ok(&w, 0, 1, 1, &v, 4);
    }
    cr_assert_eq(wait_one(&w, 1, ra), WEFT_OK);
    cr_assert_eq(wait_one(&w, 1, rc), WEFT_OK);
    cr_assert_eq(a, 1);
    cr_assert_eq(b, 0, "cancelled receive written");
    cr_assert_eq(c, 2);
    world_close(&w);
}

/* ----------------------------------------------------------- idle_wait */

Test(loop, idle_wait_times_out)
{
    world_t w;
    uint64_t t0, dt;

    world_open(&w, 2, 0, 0);
    t0 = weft__time_ns();
    ops->idle_wait(w.ep[0], 50000000); /* 50 ms */
    dt = weft__time_ns() - t0;
    cr_assert_lt(dt, 500000000ull, "idle_wait(50 ms) took %llu ns", (unsigned long long)dt);
    t0 = weft__time_ns();
    ops->idle_wait(w.ep[0], 0);
    dt = weft__time_ns() - t0;
    cr_assert_lt(dt, 100000000ull, "idle_wait(0) took %llu ns", (unsigned long long)dt);
    /* a message that already waits makes it return at once */
    {
        uint32_t v = 1;
        weft_p2p_req_t *req;

        send_ok(&w, 1, 0, 2, &v, 4);
        t0 = weft__time_ns();
        ops->idle_wait(w.ep[0], 5000000000ull);
        dt = weft__time_ns() - t0;
        cr_assert_lt(dt, 500000000ull, "idle_wait with a message pending took %llu ns",
                     (unsigned long long)dt);
        req = recv_post(&w, 0, 1, 2, &v, 4);
        cr_assert_eq(wait_one(&w, 0, req), WEFT_OK);
    }
    world_close(&w);
}

typedef struct late_sender {
    world_t *w;
    uint64_t delay_ns;
    uint64_t sent_at;
} late_sender_t;

static void *late_send(void *arg)
{
    late_sender_t *ls = arg;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ls->delay_ns};
    uint32_t v = 0x5eed;
    weft_p2p_req_t *req;
    int done;

    nanosleep(&ts, NULL);
    ls->sent_at = weft__time_ns();
    if (ops->isend(ls->w->ep[1], 0, &v, 4, WEFT_MEM_HOST, 77, &req) == WEFT_OK) {
        ops->test(ls->w->ep[1], req, &done, NULL);
    }
    return NULL;
}

Test(loop, idle_wait_wakes_on_send)
{
    world_t w;
    late_sender_t ls = {.w = &w, .delay_ns = 100000000}; /* 100 ms */
    pthread_t t;
    uint64_t t0, woke;
    uint32_t got = 0;
    weft_p2p_req_t *req;

    world_open(&w, 2, 0, 0);
    req = recv_post(&w, 0, 1, 77, &got, 4);
    cr_assert(pending(&w, 0, &req));
    cr_assert_eq(pthread_create(&t, NULL, late_send, &ls), 0);
    t0 = weft__time_ns();
    /* may return early (spuriously); wait until the send happened */
    do {
        ops->idle_wait(w.ep[0], 10000000000ull); /* 10 s */
        woke = weft__time_ns();
    } while (ls.sent_at == 0 && woke - t0 < 10000000000ull);
    pthread_join(t, NULL);
    cr_assert_neq(ls.sent_at, 0);
    cr_assert_lt(woke - t0, 2000000000ull, "idle_wait slept %llu ns past a send",
                 (unsigned long long)(woke - t0));
    cr_assert_eq(wait_one(&w, 0, req), WEFT_OK);
    cr_assert_eq(got, 0x5eed);
    world_close(&w);
}

/* -------------------------------------------------------------- delays */

Test(loop, delays_deliver_everything)
{
    enum { R = 4, N = 30 };
    world_t w;
    uint32_t got[R][R][N];
    weft_p2p_req_t *reqs[R * R * N];
    weft_status_t st[R * R * N];
    uint64_t t0;

    for (uint64_t seed = 1; seed <= 3; seed++) {
        int n = 0;

        world_open(&w, R, seed, 2000000); /* delays below 2 ms */
        memset(got, 0, sizeof(got));
        t0 = weft__time_ns();
        for (int to = 0; to < R; to++) {
            for (int from = 0; from < R; from++) {
                for (int i = 0; i < N; i++) {
                    uint32_t v = (uint32_t)(to * 1000000 + from * 1000 + i + 1);

                    /* half the messages share a tag per pair: order must hold */
                    send_ok(&w, from, to, i % 2 ? 500 : 600 + (uint64_t)i, &v, 4);
                }
            }
        }
        /* receives posted while most messages are still delayed in flight */
        for (int to = 0; to < R; to++) {
            for (int from = 0; from < R; from++) {
                for (int i = 0; i < N; i++) {
                    reqs[n] = recv_post(&w, to, from, i % 2 ? 500 : 600 + (uint64_t)i,
                                        &got[to][from][i], 4);
                    n++;
                }
            }
        }
        for (int to = 0; to < R; to++) {
            wait_all(&w, to, reqs + to * R * N, st + to * R * N, R * N);
        }
        for (int to = 0; to < R; to++) {
            for (int from = 0; from < R; from++) {
                for (int i = 0; i < N; i++) {
                    cr_assert_eq(st[(to * R + from) * N + i], WEFT_OK);
                    cr_assert_eq(got[to][from][i], (uint32_t)(to * 1000000 + from * 1000 + i + 1),
                                 "seed %llu %d->%d #%d got %u", (unsigned long long)seed, from, to,
                                 i, got[to][from][i]);
                }
            }
        }
        cr_assert_lt(weft__time_ns() - t0, 3000000000ull);
        world_close(&w);
    }
}

Test(loop, delayed_message_lands_late)
{
    world_t w;
    uint32_t v = 9, got = 0;
    weft_p2p_req_t *req;
    int landed_early = 0;

    /* delays up to 200 ms; with 8 messages at least one lands after 10 ms */
    world_open(&w, 2, 12345, 200000000);
    for (uint64_t tag = 0; tag < 8; tag++) {
        send_ok(&w, 0, 1, tag, &v, 4);
    }
    for (uint64_t tag = 0; tag < 8; tag++) {
        req = recv_post(&w, 1, 0, tag, &got, 4);
        if (!pending(&w, 1, &req)) {
            landed_early++;
            continue;
        }
        cr_assert_eq(wait_one(&w, 1, req), WEFT_OK);
        cr_assert_eq(got, 9);
    }
    cr_assert_lt(landed_early, 8, "no message was delayed");
    world_close(&w);
}

/* ------------------------------------------------------------- errors */

Test(loop, out_of_range_peer)
{
    world_t w;
    weft_p2p_req_t *req = (weft_p2p_req_t *)(uintptr_t)0x1;
    uint32_t v = 0;
    weft_loop_opts_t bad = {.nranks = 0};
    weft_loop_world_t *lw = (weft_loop_world_t *)(uintptr_t)0x2;
    void *ep = (void *)(uintptr_t)0x3;

    world_open(&w, 3, 1, 0);
    cr_assert_eq(ops->isend(w.ep[0], 3, &v, 4, WEFT_MEM_HOST, 1, &req), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "3"), "%s", weft_last_error());
    cr_assert_eq(ops->isend(w.ep[0], -1, &v, 4, WEFT_MEM_HOST, 1, &req), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(ops->irecv(w.ep[0], 3, &v, 4, WEFT_MEM_HOST, 1, &req), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(ops->irecv(w.ep[0], -2, &v, 4, WEFT_MEM_HOST, 1, &req), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(ops->irecv(w.ep[0], 1000, &v, 4, WEFT_MEM_HOST, 1, &req), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(req, (weft_p2p_req_t *)(uintptr_t)0x1, "request written on failure");
    cr_assert_eq(weft__loop_ep_create(w.lw, 3, &ep), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft__loop_ep_create(w.lw, -1, &ep), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(ep, (void *)(uintptr_t)0x3);
    world_close(&w);
    cr_assert_eq(weft__loop_world_create(&bad, &lw), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(lw, (weft_loop_world_t *)(uintptr_t)0x2);
}

Test(loop, release_with_pending_receives_and_messages)
{
    world_t w;
    uint32_t v = 1, buf = 0;

    /* unexpected and in-flight messages and a posted receive are all freed by release */
    world_open(&w, 2, 2, 0);
    send_ok(&w, 0, 1, 1, &v, 4);
    ops->progress(w.ep[1]);
    send_ok(&w, 0, 1, 2, &v, 4);
    recv_post(&w, 1, 0, 99, &buf, 4);
    world_close(&w);
    cr_assert_eq(buf, 0);
}

/* --------------------------------------------------- thread bootstrap */

enum { BOOT_RANKS = 8, BOOT_ITERS = 100 };

typedef struct boot_rank {
    pthread_t thread;
    void *ctx;
    int rank;
    int errors;
    char first_error[256];
} boot_rank_t;

static size_t blob_bytes(int iter)
{
    return 8 + (size_t)(iter % 7) * 12; /* sizes change: the shared buffer grows */
}

static unsigned char blob_byte(int rank, int iter, size_t i)
{
    return (unsigned char)(rank * 31 + iter * 7 + (int)i * 13 + 1);
}

static void *boot_rank_main(void *arg)
{
    boot_rank_t *br = arg;
    unsigned char mine[128], all[128 * BOOT_RANKS];

    for (int iter = 0; iter < BOOT_ITERS; iter++) {
        size_t bytes = blob_bytes(iter);
        weft_status_t st;

        for (size_t i = 0; i < bytes; i++) {
            mine[i] = blob_byte(br->rank, iter, i);
        }
        memset(all, 0xee, sizeof(all));
        st = weft__thread_boot_ops.allgather(br->ctx, mine, all, bytes,
                                             weft__time_ns() + 10000000000ull);
        if (st != WEFT_OK) {
            if (br->errors++ == 0) {
                snprintf(br->first_error, sizeof(br->first_error), "iter %d: %s", iter,
                         weft_last_error());
            }
            return NULL;
        }
        for (int r = 0; r < BOOT_RANKS; r++) {
            for (size_t i = 0; i < bytes; i++) {
                if (all[(size_t)r * bytes + i] != blob_byte(r, iter, i) && br->errors++ == 0) {
                    snprintf(br->first_error, sizeof(br->first_error),
                             "iter %d: rank %d's byte %zu of rank %d's blob is %u, expected %u",
                             iter, br->rank, i, r, all[(size_t)r * bytes + i],
                             blob_byte(r, iter, i));
                }
            }
        }
        /* nothing written past size * bytes */
        for (size_t i = (size_t)BOOT_RANKS * bytes; i < sizeof(all); i++) {
            if (all[i] != 0xee && br->errors++ == 0) {
                snprintf(br->first_error, sizeof(br->first_error),
                         "iter %d: byte %zu past the blobs written", iter, i);
            }
        }
        if (iter % 10 == 9 &&
            weft__thread_boot_ops.barrier(br->ctx, weft__time_ns() + 10000000000ull) != WEFT_OK &&
            br->errors++ == 0) {
            snprintf(br->first_error, sizeof(br->first_error), "barrier: %s", weft_last_error());
        }
    }
    return NULL;
}

Test(thread_boot, allgather_repeated)
{
    weft_thread_boot_world_t *bw;
    boot_rank_t ranks[BOOT_RANKS];

    cr_assert_eq(weft__thread_boot_world_create(BOOT_RANKS, &bw), WEFT_OK);
    for (int r = 0; r < BOOT_RANKS; r++) {
        memset(&ranks[r], 0, sizeof(ranks[r]));
        ranks[r].rank = r;
        cr_assert_eq(weft__thread_boot_ctx_create(bw, r, &ranks[r].ctx), WEFT_OK);
    }
    weft__thread_boot_world_release(bw); /* the contexts keep it alive */
    for (int r = 0; r < BOOT_RANKS; r++) {
        cr_assert_eq(pthread_create(&ranks[r].thread, NULL, boot_rank_main, &ranks[r]), 0);
    }
    for (int r = 0; r < BOOT_RANKS; r++) {
        pthread_join(ranks[r].thread, NULL);
    }
    for (int r = 0; r < BOOT_RANKS; r++) {
        cr_assert_eq(ranks[r].errors, 0, "rank %d: %d errors, first: %s", r, ranks[r].errors,
                     ranks[r].first_error);
        weft__thread_boot_ops.release(ranks[r].ctx);
    }
}

Test(thread_boot, barrier_deadline_in_past)
{
    weft_thread_boot_world_t *bw;
    void *ctx0, *ctx1;
    uint64_t t0, dt;
    weft_status_t st;

    cr_assert_eq(weft__thread_boot_world_create(2, &bw), WEFT_OK);
    cr_assert_eq(weft__thread_boot_ctx_create(bw, 0, &ctx0), WEFT_OK);
    cr_assert_eq(weft__thread_boot_ctx_create(bw, 1, &ctx1), WEFT_OK);
    t0 = weft__time_ns();
    st = weft__thread_boot_ops.barrier(ctx0, t0 - 1);
    dt = weft__time_ns() - t0;
    cr_assert_eq(st, WEFT_ERR_TIMEOUT, "status %d", st);
    cr_assert_lt(dt, 500000000ull, "took %llu ns", (unsigned long long)dt);
    cr_assert_not_null(strstr(weft_last_error(), "1 of 2"), "%s", weft_last_error());
    weft__thread_boot_ops.release(ctx0);
    weft__thread_boot_ops.release(ctx1);
    weft__thread_boot_world_release(bw);
}

Test(thread_boot, barrier_deadline_expires)
{
    weft_thread_boot_world_t *bw;
    void *ctx0, *ctx1;
    uint64_t t0, dt;
    unsigned char blob = 1, blobs[2];

    cr_assert_eq(weft__thread_boot_world_create(2, &bw), WEFT_OK);
    cr_assert_eq(weft__thread_boot_ctx_create(bw, 0, &ctx0), WEFT_OK);
    cr_assert_eq(weft__thread_boot_ctx_create(bw, 1, &ctx1), WEFT_OK);
    t0 = weft__time_ns();
    cr_assert_eq(weft__thread_boot_ops.barrier(ctx0, t0 + 100000000), WEFT_ERR_TIMEOUT);
    dt = weft__time_ns() - t0;
    cr_assert_geq(dt, 100000000ull, "returned before the deadline (%llu ns)",
                  (unsigned long long)dt);
    cr_assert_lt(dt, 2000000000ull, "took %llu ns", (unsigned long long)dt);
    weft__thread_boot_ops.release(ctx0);
    weft__thread_boot_ops.release(ctx1);
    weft__thread_boot_world_release(bw);

    /* allgather times out the same way */
    cr_assert_eq(weft__thread_boot_world_create(2, &bw), WEFT_OK);
    cr_assert_eq(weft__thread_boot_ctx_create(bw, 1, &ctx1), WEFT_OK);
    weft__thread_boot_world_release(bw);
    blobs[0] = blobs[1] = 0x77;
    cr_assert_eq(weft__thread_boot_ops.allgather(ctx1, &blob, blobs, 1, weft__time_ns() - 1),
                 WEFT_ERR_TIMEOUT);
    cr_assert_eq(blobs[0], 0x77);
    cr_assert_eq(blobs[1], 0x77);
    weft__thread_boot_ops.release(ctx1);
}

Test(thread_boot, single_rank_and_bad_rank)
{
    weft_thread_boot_world_t *bw;
    void *ctx = (void *)(uintptr_t)0x9;
    uint32_t v = 0xfeed, all = 0;

    cr_assert_eq(weft__thread_boot_world_create(0, &bw), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft__thread_boot_world_create(1, &bw), WEFT_OK);
    cr_assert_eq(weft__thread_boot_ctx_create(bw, 1, &ctx), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft__thread_boot_ctx_create(bw, -1, &ctx), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(ctx, (void *)(uintptr_t)0x9);
    cr_assert_eq(weft__thread_boot_ctx_create(bw, 0, &ctx), WEFT_OK);
    /* one rank never waits, even with a deadline in the past */
    cr_assert_eq(weft__thread_boot_ops.barrier(ctx, 0), WEFT_OK);
    cr_assert_eq(weft__thread_boot_ops.allgather(ctx, &v, &all, 4, 0), WEFT_OK);
    cr_assert_eq(all, 0xfeed);
    weft__thread_boot_ops.release(ctx);
    weft__thread_boot_world_release(bw);
}
