/*
 * The UCX transport (pt2pt/ucx) between real processes (the ranks and how
 * they run: tests/pt2pt/ucx_ranks.h): ping-pong, tags matched in any order
 * and in order, two endpoint tables that never cross-match, size
 * mismatches, requests reused, sends completed at once, cancelled receives and sends, an all-to-all
 * of four ranks, and a killed peer. Every test runs with UCX's default transports and with
 * UCX_TLS=tcp.
 */
#include "tests/pt2pt/ucx_ranks.h"
#include "pt2pt/ucx/ucx_internal.h"

/* ------------------------------------------------------------ scenarios */

static uint64_t tag(uint32_t comm, uint32_t seq, uint32_t slot)
{
    return weft__tag_make(comm, seq, slot);
}

/* A receive from peer posted and polled for up to ns: 1 when it completed (its status in *st_p),
 * else 0 with the receive cancelled (*st_p left as it was). */
static int arrives(rank_t *r, int peer, uint64_t t, void *buf, size_t bytes, uint64_t ns,
                   weft_status_t *st_p)
{
    weft_p2p_req_t *req = post_recv(r, r->ep, peer, t, buf, bytes);
    uint64_t until = weft__time_ns() + ns;
    int done = 0;

    while (!done && weft__time_ns() < until) {
        ops->progress(r->ep);
        weft_status_t st = ops->test(r->ep, req, &done, NULL);

        if (done) {
            *st_p = st;
        }
    }
    if (!done) {
        ops->cancel(r->ep, req);
    }
    return done;
}

/* Ping-pong of 0, 1, 4 KiB + 1 and 8 MiB bytes (eager and rendezvous paths),
 * then a message of each rank to itself. */
static void sc_pingpong(rank_t *r)
{
    static const size_t sizes[] = {0, 1, 4097, 8 * MiB};
    int peer = 1 - r->rank;

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        unsigned char *buf = xmalloc(r, n);

        for (uint32_t it = 0; it < 3; it++) {
            uint64_t ping = 1000 + k * 10 + it, pong = 2000 + k * 10 + it;
            size_t at;

            if (r->rank == 0) {
                fill(buf, n, ping);
                send_ok(r, r->ep, peer, tag(1, it, (uint32_t)k), buf, n);
                memset(buf, 0, n);
                recv_ok(r, r->ep, peer, tag(1, it, 100 + (uint32_t)k), buf, n);
                at = first_diff(buf, n, pong);
                CHECK(r, at == SIZE_MAX, "pong of %zu bytes differs at byte %zu", n, at);
            } else {
                memset(buf, 0, n);
                recv_ok(r, r->ep, peer, tag(1, it, (uint32_t)k), buf, n);
                at = first_diff(buf, n, ping);
                CHECK(r, at == SIZE_MAX, "ping of %zu bytes differs at byte %zu", n, at);
                fill(buf, n, pong);
                send_ok(r, r->ep, peer, tag(1, it, 100 + (uint32_t)k), buf, n);
            }
        }
        free(buf);
    }
    /* and to itself */
    {
        unsigned char out[4097], in[4097];
        weft_p2p_req_t *rr = post_recv(r, r->ep, r->rank, tag(1, 7, 7), in, sizeof(in));

        fill(out, sizeof(out), 77 + (uint64_t)r->rank);
        send_ok(r, r->ep, r->rank, tag(1, 7, 7), out, sizeof(out));
        CHECK(r, wait_one(r, r->ep, rr) == WEFT_OK, "receive from itself: %s", weft_last_error());
        CHECK(r, memcmp(in, out, sizeof(in)) == 0, "message to itself corrupted");
    }
}

Test(ucx, pingpong_default, .timeout = 50)
{
    run(2, NULL, sc_pingpong);
}

Test(ucx, pingpong_tcp, .timeout = 50)
{
    run(2, "tcp", sc_pingpong);
}

/* 100 messages with distinct tags, all sent before any receive is posted,
 * received in reverse order. Sizes cross the eager/rendezvous thresholds. */
enum { NMSG = 100 };

static size_t reverse_size(int i)
{
    return i % 25 == 0 ? 100000 : 8 + (size_t)i * 97;
}

static void sc_reverse(rank_t *r)
{
    unsigned char *bufs[NMSG];
    weft_p2p_req_t *reqs[NMSG];
    weft_status_t st[NMSG];

    for (int i = 0; i < NMSG; i++) {
        bufs[i] = xmalloc(r, reverse_size(i));
    }
    if (r->rank == 0) {
        for (int i = 0; i < NMSG; i++) {
            fill(bufs[i], reverse_size(i), 7000 + (uint64_t)i);
            reqs[i] = post_send(r, r->ep, 1, tag(3, 9, (uint32_t)i), bufs[i], reverse_size(i));
        }
        barrier(r);
        wait_all(r, r->ep, reqs, st, NMSG);
        for (int i = 0; i < NMSG; i++) {
            CHECK(r, st[i] == WEFT_OK, "send %d: %s", i, weft_status_string(st[i]));
        }
    } else {
        barrier(r); /* the eager messages are waiting, unexpected */
        for (int i = NMSG - 1; i >= 0; i--) {
            memset(bufs[i], 0, reverse_size(i));
            reqs[i] = post_recv(r, r->ep, 0, tag(3, 9, (uint32_t)i), bufs[i], reverse_size(i));
        }
        wait_all(r, r->ep, reqs, st, NMSG);
        for (int i = 0; i < NMSG; i++) {
            size_t at = first_diff(bufs[i], reverse_size(i), 7000 + (uint64_t)i);

            CHECK(r, st[i] == WEFT_OK, "receive %d: %s", i, weft_status_string(st[i]));
            CHECK(r, at == SIZE_MAX, "message %d (%zu bytes) differs at byte %zu", i,
                  reverse_size(i), at);
        }
    }
    for (int i = 0; i < NMSG; i++) {
        free(bufs[i]);
    }
}

Test(ucx, distinct_tags_reverse_order_default, .timeout = 50)
{
    run(2, NULL, sc_reverse);
}

Test(ucx, distinct_tags_reverse_order_tcp, .timeout = 50)
{
    run(2, "tcp", sc_reverse);
}

/* Same source and tag: receive k gets message k (non-overtaking), for
 * receives posted before and after the messages arrive, eager and
 * rendezvous mixed. */
enum { NSAME = 64 };

static size_t same_size(int k)
{
    return k % 4 == 3 ? 40000 : 16;
}

static void sc_same_tag(rank_t *r)
{
    unsigned char *bufs[NSAME];
    weft_p2p_req_t *reqs[NSAME];
    weft_status_t st[NSAME];

    for (int k = 0; k < NSAME; k++) {
        bufs[k] = xmalloc(r, same_size(k));
        memset(bufs[k], 0, same_size(k));
    }
    if (r->rank == 0) {
        barrier(r);
        for (int k = 0; k < NSAME; k++) {
            fill(bufs[k], same_size(k), 500 + (uint64_t)k);
            reqs[k] = post_send(r, r->ep, 1, tag(4, 1, 1), bufs[k], same_size(k));
        }
        wait_all(r, r->ep, reqs, st, NSAME);
        for (int k = 0; k < NSAME; k++) {
            CHECK(r, st[k] == WEFT_OK, "send %d: %s", k, weft_status_string(st[k]));
        }
    } else {
        for (int k = 0; k < NSAME / 2; k++) {
            reqs[k] = post_recv(r, r->ep, 0, tag(4, 1, 1), bufs[k], same_size(k));
        }
        barrier(r);
        usleep(20000); /* let the second half arrive unexpected */
        ops->progress(r->ep);
        for (int k = NSAME / 2; k < NSAME; k++) {
            reqs[k] = post_recv(r, r->ep, 0, tag(4, 1, 1), bufs[k], same_size(k));
        }
        wait_all(r, r->ep, reqs, st, NSAME);
        for (int k = 0; k < NSAME; k++) {
            size_t at = first_diff(bufs[k], same_size(k), 500 + (uint64_t)k);

            CHECK(r, st[k] == WEFT_OK, "receive %d: %s", k, weft_status_string(st[k]));
            CHECK(r, at == SIZE_MAX, "receive %d did not get message %d (differs at %zu)", k, k,
                  at);
        }
    }
    for (int k = 0; k < NSAME; k++) {
        free(bufs[k]);
    }
}

Test(ucx, same_tag_in_order_default, .timeout = 50)
{
    run(2, NULL, sc_same_tag);
}

Test(ucx, same_tag_in_order_tcp, .timeout = 50)
{
    run(2, "tcp", sc_same_tag);
}

/* Two endpoint tables in each process: A (comm 1) with the ranks in process
 * order, B (comm 2) with them reversed, like a split. Messages of B sent
 * first do not match A's receives posted first, and both tables share the
 * one UCP endpoint to the other process. */
static void sc_two_tables(rank_t *r)
{
    shared_t *sh = r->sh;
    unsigned char addrs[2][ADDR_MAX];
    size_t lens[2] = {sh->addr_len[1], sh->addr_len[0]};
    int brank = 1 - r->rank; /* this process's rank in B */
    uint64_t a = 0, b = 0, va = 0xaaaa0001, vb = 0xbbbb0002;
    weft_p2p_req_t *ra, *rb, *sa, *sb;
    weft_status_t st;
    void *epb;

    memcpy(addrs[0], sh->addr[1], ADDR_MAX);
    memcpy(addrs[1], sh->addr[0], ADDR_MAX);
    st = weft__ucx_ep_create(r->ctx, brank, 2, addrs, ADDR_MAX, lens, &epb);
    CHECK(r, st == WEFT_OK, "table B: %s", weft_last_error());
    if (r->rank == 0) {
        /* process 1 is rank 1 in A and rank 0 in B */
        sb = post_send(r, epb, 0, tag(2, 0, 0), &vb, sizeof(vb));
        sa = post_send(r, r->ep, 1, tag(1, 0, 0), &va, sizeof(va));
        CHECK(r, wait_one(r, epb, sb) == WEFT_OK, "send on B: %s", weft_last_error());
        CHECK(r, wait_one(r, r->ep, sa) == WEFT_OK, "send on A: %s", weft_last_error());
    } else {
        /* process 0 is rank 0 in A and rank 1 in B */
        ra = post_recv(r, r->ep, 0, tag(1, 0, 0), &a, sizeof(a));
        rb = post_recv(r, epb, 1, tag(2, 0, 0), &b, sizeof(b));
        CHECK(r, wait_one(r, r->ep, ra) == WEFT_OK, "receive on A: %s", weft_last_error());
        CHECK(r, wait_one(r, epb, rb) == WEFT_OK, "receive on B: %s", weft_last_error());
        CHECK(r, a == va && b == vb, "A got %#llx, B got %#llx", (unsigned long long)a,
              (unsigned long long)b);
    }
    CHECK(r, weft__ucx_context_num_eps(r->ctx) == 1, "%zu UCP endpoints for one peer",
          weft__ucx_context_num_eps(r->ctx));
    barrier(r);
    ops->ep_release(epb);
}

Test(ucx, two_tables_do_not_cross_match_default, .timeout = 50)
{
    run(2, NULL, sc_two_tables);
}

Test(ucx, two_tables_do_not_cross_match_tcp, .timeout = 50)
{
    run(2, "tcp", sc_two_tables);
}

/* A receive of another size than the message completes with MISMATCH, for
 * larger and smaller messages, eager and rendezvous; the next message on the
 * same pair still arrives intact. */
static void sc_mismatch(rank_t *r)
{
    static const size_t sent[] = {100, 50, 64 * 1024, 16 * 1024};
    static const size_t posted[] = {50, 100, 32 * 1024, 64 * 1024};
    enum { N = sizeof(sent) / sizeof(sent[0]) };
    unsigned char *bufs[N];
    weft_p2p_req_t *reqs[N];
    weft_status_t st[N];
    uint64_t v = 0;

    for (int i = 0; i < N; i++) {
        bufs[i] = xmalloc(r, sent[i] > posted[i] ? sent[i] : posted[i]);
    }
    if (r->rank == 0) {
        for (int i = 0; i < N; i++) {
            fill(bufs[i], sent[i], 300 + (uint64_t)i);
            reqs[i] = post_send(r, r->ep, 1, tag(5, 0, (uint32_t)i), bufs[i], sent[i]);
        }
        wait_all(r, r->ep, reqs, st, N);
        v = 0x1234567890abcdefull;
        send_ok(r, r->ep, 1, tag(5, 0, 99), &v, sizeof(v));
    } else {
        for (int i = 0; i < N; i++) {
            reqs[i] = post_recv(r, r->ep, 0, tag(5, 0, (uint32_t)i), bufs[i], posted[i]);
        }
        wait_all(r, r->ep, reqs, st, N);
        for (int i = 0; i < N; i++) {
            CHECK(r, st[i] == WEFT_ERR_MISMATCH,
                  "message of %zu bytes into a receive of %zu: %s, want mismatch", sent[i],
                  posted[i], weft_status_string(st[i]));
        }
        recv_ok(r, r->ep, 0, tag(5, 0, 99), &v, sizeof(v));
        CHECK(r, v == 0x1234567890abcdefull, "after the mismatches got %#llx",
              (unsigned long long)v);
    }
    for (int i = 0; i < N; i++) {
        free(bufs[i]);
    }
}

Test(ucx, size_mismatch_default, .timeout = 50)
{
    run(2, NULL, sc_mismatch);
}

Test(ucx, size_mismatch_tcp, .timeout = 50)
{
    run(2, "tcp", sc_mismatch);
}

/* Finished requests return to the context's pool and serve the next posts: three rounds of the
 * 100 reverse-order messages (more in flight than the pool keeps), each followed by a receive
 * that fails (a size mismatch) and one that must not inherit anything from it; the pool never
 * holds more than its bound and is in use after each round. */
static void sc_reuse(rank_t *r)
{
    for (uint32_t round = 0; round < 3; round++) {
        uint64_t v = 0x0123456789abcdefull + round, big[4] = {0};
        weft_p2p_req_t *req;

        sc_reverse(r);
        if (r->rank == 0) {
            send_ok(r, r->ep, 1, tag(6, round, 1), big, sizeof(big));
            send_ok(r, r->ep, 1, tag(6, round, 2), &v, sizeof(v));
        } else {
            req = post_recv(r, r->ep, 0, tag(6, round, 1), &v, sizeof(v));
            CHECK(r, wait_one(r, r->ep, req) == WEFT_ERR_MISMATCH,
                  "round %u: a 32-byte message into an 8-byte receive: %s, want mismatch", round,
                  weft_last_error());
            v = 0;
            recv_ok(r, r->ep, 0, tag(6, round, 2), &v, sizeof(v));
            CHECK(r, v == 0x0123456789abcdefull + round, "round %u: after the mismatch got %#llx",
                  round, (unsigned long long)v);
        }
        CHECK(r, r->ctx->req_pooled > 0 && r->ctx->req_pooled <= 64,
              "round %u: %u requests pooled, want 1-64", round, r->ctx->req_pooled);
        barrier(r);
    }
}

Test(ucx, requests_reused_default, .timeout = 50)
{
    run(2, NULL, sc_reuse);
}

Test(ucx, requests_reused_tcp, .timeout = 50)
{
    run(2, "tcp", sc_reuse);
}

/* send_now: before the endpoint exists it sends nothing (WEFT_INPROGRESS); then a short message
 * goes at once, and one UCX cannot send at once (64 KiB, one fragment) is refused with nothing
 * sent, and so is every size from there on without another try, and a fragmented one (8 MiB) or
 * one in emu memory (both staged); the refused message, sent with isend, arrives once. Bad
 * arguments are isend's errors. */
static void sc_send_now(rank_t *r)
{
    enum { BIG = 8 * MiB, MID = 64 * 1024 };
    unsigned char *big = xmalloc(r, BIG);
    uint64_t v = 42, w = 0;

    if (r->rank == 0) {
        const ucx_peer_t *peer = ((const ucx_comm_t *)r->ep)->peers[1];

        CHECK(r,
              ops->send_now(r->ep, 1, &v, sizeof(v), WEFT_MEM_HOST, tag(4, 0, 0)) ==
                  WEFT_INPROGRESS,
              "send_now before the peer is connected: not WEFT_INPROGRESS");
        send_ok(r, r->ep, 1, tag(4, 0, 1), &v, sizeof(v)); /* connects */
        for (uint64_t k = 0; k < 3; k++) {
            v = 100 + k;
            CHECK(r,
                  ops->send_now(r->ep, 1, &v, sizeof(v), WEFT_MEM_HOST, tag(4, 1, (uint32_t)k)) ==
                      WEFT_OK,
                  "send_now of 8 bytes %llu: %s", (unsigned long long)k, weft_last_error());
        }
        fill(big, MID, 9);
        CHECK(r, ops->send_now(r->ep, 1, big, MID, WEFT_MEM_HOST, tag(4, 2, 0)) == WEFT_INPROGRESS,
              "send_now of 64 KiB: not WEFT_INPROGRESS");
        CHECK(r, peer->now_ok >= sizeof(v) && peer->now_no == MID,
              "the peer's send_now sizes: %zu sent at once, %zu refused, want 64 KiB", peer->now_ok,
              peer->now_no);
        CHECK(r,
              ops->send_now(r->ep, 1, big, MID + 1, WEFT_MEM_HOST, tag(4, 2, 0)) ==
                      WEFT_INPROGRESS &&
                  ops->send_now(r->ep, 1, big, BIG, WEFT_MEM_HOST, tag(4, 2, 0)) == WEFT_INPROGRESS,
              "send_now above the refused size: not refused");
        CHECK(r, peer->now_no == MID, "a size above the refused one was tried: %zu", peer->now_no);
        send_ok(r, r->ep, 1, tag(4, 2, 0), big, MID);
        CHECK(r,
              ops->send_now(r->ep, 2, &v, sizeof(v), WEFT_MEM_HOST, tag(4, 3, 0)) ==
                  WEFT_ERR_INVALID_ARG,
              "send_now to rank 2 of 2: not WEFT_ERR_INVALID_ARG");
        CHECK(r,
              ops->send_now(r->ep, 1, &v, sizeof(v), WEFT_MEM_HOST, tag(4, 3, 0) | 1) ==
                  WEFT_ERR_INVALID_ARG,
              "send_now with the source bits set: not WEFT_ERR_INVALID_ARG");
        /* memory UCX cannot carry is staged: isend's path, not an error */
        CHECK(r,
              ops->send_now(r->ep, 1, &v, sizeof(v), WEFT_MEM_EMU, tag(4, 3, 0)) == WEFT_INPROGRESS,
              "send_now of emu memory: not WEFT_INPROGRESS");
        barrier(r);
    } else {
        weft_status_t st = WEFT_INPROGRESS;

        recv_ok(r, r->ep, 0, tag(4, 0, 1), &w, sizeof(w));
        CHECK(r, w == 42, "the connecting message: %llu", (unsigned long long)w);
        for (uint64_t k = 0; k < 3; k++) {
            recv_ok(r, r->ep, 0, tag(4, 1, (uint32_t)k), &w, sizeof(w));
            CHECK(r, w == 100 + k, "message %llu sent at once: %llu", (unsigned long long)k,
                  (unsigned long long)w);
        }
        memset(big, 0, MID);
        recv_ok(r, r->ep, 0, tag(4, 2, 0), big, MID);
        CHECK(r, first_diff(big, MID, 9) == SIZE_MAX, "the 64 KiB message differs");
        /* the refused tries sent nothing: no second message with that tag */
        CHECK(r, !arrives(r, 0, tag(4, 2, 0), big, BIG, 200000000ull, &st),
              "a refused send_now sent its message");
        /* nor did the one before the endpoint existed */
        CHECK(r, !arrives(r, 0, tag(4, 0, 0), &w, sizeof(w), 200000000ull, &st),
              "send_now before the connection sent its message");
        barrier(r);
    }
    free(big);
}

Test(ucx, send_now_default, .timeout = 50)
{
    run(2, NULL, sc_send_now);
}

Test(ucx, send_now_tcp, .timeout = 50)
{
    run(2, "tcp", sc_send_now);
}

/* A cancelled receive never writes its buffer and matches nothing: the
 * messages sent after the cancel go to the receives posted after it. */
static void sc_cancel(rank_t *r)
{
    enum { BIG = 1 * MiB, SMALL = 64 };
    unsigned char *big = xmalloc(r, BIG), *small = xmalloc(r, SMALL);

    if (r->rank == 0) {
        barrier(r); /* the receives were posted and cancelled */
        fill(small, SMALL, 41);
        fill(big, BIG, 42);
        send_ok(r, r->ep, 1, tag(6, 0, 1), small, SMALL);
        send_ok(r, r->ep, 1, tag(6, 0, 2), big, BIG);
        barrier(r);
    } else {
        unsigned char *old_small = xmalloc(r, SMALL), *old_big = xmalloc(r, BIG);
        weft_p2p_req_t *rs, *rb;
        uint64_t t;

        memset(old_small, 0xab, SMALL);
        memset(old_big, 0xcd, BIG);
        rs = post_recv(r, r->ep, 0, tag(6, 0, 1), old_small, SMALL);
        rb = post_recv(r, r->ep, 0, tag(6, 0, 2), old_big, BIG);
        ops->progress(r->ep);
        t = weft__time_ns();
        ops->cancel(r->ep, rs);
        ops->cancel(r->ep, rb);
        CHECK(r, weft__time_ns() - t < 100000000ull, "cancelling unmatched receives took %.3f s",
              (double)(weft__time_ns() - t) / 1e9);
        barrier(r);
        recv_ok(r, r->ep, 0, tag(6, 0, 1), small, SMALL);
        recv_ok(r, r->ep, 0, tag(6, 0, 2), big, BIG);
        barrier(r);
        CHECK(r, first_diff(small, SMALL, 41) == SIZE_MAX, "small message corrupted");
        CHECK(r, first_diff(big, BIG, 42) == SIZE_MAX, "big message corrupted");
        for (size_t i = 0; i < SMALL; i++) {
            CHECK(r, old_small[i] == 0xab, "cancelled buffer written at byte %zu", i);
        }
        for (size_t i = 0; i < BIG; i++) {
            CHECK(r, old_big[i] == 0xcd, "cancelled 1 MiB buffer written at byte %zu", i);
        }
        free(old_small);
        free(old_big);
    }
    free(big);
    free(small);
}

Test(ucx, cancel_posted_receive_default, .timeout = 50)
{
    run(2, NULL, sc_cancel);
}

Test(ucx, cancel_posted_receive_tcp, .timeout = 50)
{
    run(2, "tcp", sc_cancel);
}

/* A send nobody receives cannot be withdrawn by UCX: cancel waits a bounded
 * time, then closes the connection, which purges the send. The buffer is
 * freed right after the cancel, and the receive posted for it later gets no
 * data; later sends report the closed connection. */
static void sc_cancel_send(rank_t *r)
{
    enum { BIG = 8 * MiB };

    if (r->rank == 0) {
        unsigned char *big = xmalloc(r, BIG);
        weft_p2p_req_t *rb;
        weft_status_t st;
        uint64_t v = 1, t;

        fill(big, BIG, 5);
        rb = post_send(r, r->ep, 1, tag(9, 0, 1), big, BIG);
        ops->progress(r->ep);
        t = weft__time_ns();
        ops->cancel(r->ep, rb);
        t = weft__time_ns() - t;
        free(big); /* an 8 MiB block goes back to the kernel: a late read would fault */
        CHECK(r, t < 3000000000ull, "cancelling a pending send took %.3f s", (double)t / 1e9);
        st = wait_one(r, r->ep, post_send(r, r->ep, 1, tag(9, 0, 2), &v, sizeof(v)));
        CHECK(r, st == WEFT_ERR_TRANSPORT, "send after the withdrawal: %s, want transport error",
              weft_status_string(st));
        barrier(r);
        barrier(r);
    } else {
        unsigned char *big = xmalloc(r, BIG);
        weft_status_t st = WEFT_INPROGRESS;

        memset(big, 0x5a, BIG);
        barrier(r); /* the send was cancelled */
        arrives(r, 0, tag(9, 0, 1), big, BIG, 300000000ull, &st);
        CHECK(r, st != WEFT_OK, "the cancelled send was delivered");
        for (size_t i = 0; i < BIG; i++) {
            CHECK(r, big[i] == 0x5a, "data of the cancelled send arrived at byte %zu", i);
        }
        barrier(r);
        free(big);
    }
}

Test(ucx, cancel_pending_send_default, .timeout = 50)
{
    run(2, NULL, sc_cancel_send);
}

Test(ucx, cancel_pending_send_tcp, .timeout = 50)
{
    run(2, "tcp", sc_cancel_send);
}

/* Four ranks on two cores, every pair exchanging 256 KiB both ways, five
 * rounds: needs idle_wait to give the CPU away rather than spin. */
static void sc_alltoall(rank_t *r)
{
    enum { BYTES = 256 * 1024, ROUNDS = 5 };
    int n = r->nranks;
    unsigned char *sbuf[MAX_RANKS], *rbuf[MAX_RANKS];
    weft_p2p_req_t *reqs[2 * MAX_RANKS];
    weft_status_t st[2 * MAX_RANKS];

    for (int p = 0; p < n; p++) {
        sbuf[p] = xmalloc(r, BYTES);
        rbuf[p] = xmalloc(r, BYTES);
    }
    for (uint32_t round = 0; round < ROUNDS; round++) {
        int k = 0;

        for (int p = 0; p < n; p++) {
            if (p == r->rank) {
                continue;
            }
            memset(rbuf[p], 0, BYTES);
            reqs[k++] = post_recv(r, r->ep, p, tag(7, round, 0), rbuf[p], BYTES);
        }
        for (int p = 0; p < n; p++) {
            if (p == r->rank) {
                continue;
            }
            fill(sbuf[p], BYTES, round * 100 + (uint64_t)r->rank * 10 + (uint64_t)p);
            reqs[k++] = post_send(r, r->ep, p, tag(7, round, 0), sbuf[p], BYTES);
        }
        wait_all(r, r->ep, reqs, st, k);
        for (int i = 0; i < k; i++) {
            CHECK(r, st[i] == WEFT_OK, "round %u request %d: %s", round, i,
                  weft_status_string(st[i]));
        }
        for (int p = 0; p < n; p++) {
            size_t at;

            if (p == r->rank) {
                continue;
            }
            at = first_diff(rbuf[p], BYTES, round * 100 + (uint64_t)p * 10 + (uint64_t)r->rank);
            CHECK(r, at == SIZE_MAX, "round %u: data from %d differs at byte %zu", round, p, at);
        }
    }
    for (int p = 0; p < n; p++) {
        free(sbuf[p]);
        free(rbuf[p]);
    }
}

Test(ucx, four_ranks_alltoall_default, .timeout = 50)
{
    run(4, NULL, sc_alltoall);
}

Test(ucx, four_ranks_alltoall_tcp, .timeout = 50)
{
    run(4, "tcp", sc_alltoall);
}

/*
 * A peer SIGKILLed mid-run. Rank 0 (survivor) has a receive from rank 1
 * (victim) pending, and an 8 MiB send to it that the victim never receives,
 * when it kills the victim. Both must complete with PEER_FAILED in bounded
 * time, and so must a send and a receive posted afterwards; rank 2
 * (bystander) still exchanges messages with rank 0.
 *
 * recv_only: before the kill, rank 0 has only ever received from the victim
 * (it is monitored through the endpoint its receive created); otherwise the
 * two exchanged messages both ways.
 */
static void peer_killed(rank_t *r, int recv_only)
{
    enum { VICTIM = 1, BYSTANDER = 2, BIG = 8 * MiB };
    uint64_t v = 0, w = 0;

    if (r->rank == VICTIM) {
        v = 77;
        send_ok(r, r->ep, 0, tag(8, 0, 0), &v, sizeof(v));
        if (!recv_only) {
            recv_ok(r, r->ep, 0, tag(8, 0, 1), &v, sizeof(v));
        }
        barrier(r);
        for (;;) {
            pause(); /* until killed */
        }
    }
    if (r->rank == BYSTANDER) {
        barrier(r);
        recv_ok(r, r->ep, 0, tag(8, 1, 0), &v, sizeof(v));
        CHECK(r, v == 99, "bystander got %llu", (unsigned long long)v);
        v = 100;
        send_ok(r, r->ep, 0, tag(8, 1, 1), &v, sizeof(v));
        return;
    }

    /* the survivor */
    {
        unsigned char *big = xmalloc(r, BIG);
        weft_p2p_req_t *pending[2];
        weft_status_t st[2];
        uint64_t t0;
        double detect;

        recv_ok(r, r->ep, VICTIM, tag(8, 0, 0), &v, sizeof(v));
        CHECK(r, v == 77, "got %llu from the victim", (unsigned long long)v);
        if (!recv_only) {
            send_ok(r, r->ep, VICTIM, tag(8, 0, 1), &v, sizeof(v));
        }
        barrier(r);
        pending[0] = post_recv(r, r->ep, VICTIM, tag(8, 2, 0), &w, sizeof(w));
        pending[1] = recv_only ? NULL : post_send(r, r->ep, VICTIM, tag(8, 2, 1), big, BIG);
        ops->progress(r->ep);

        atomic_fetch_sub(&r->sh->barrier.quorum, 1);
        r->sh->killed[VICTIM] = 1;
        t0 = weft__time_ns();
        CHECK(r, kill(r->sh->pids[VICTIM], SIGKILL) == 0, "cannot kill the victim");

        wait_all(r, r->ep, pending, st, recv_only ? 1 : 2);
        detect = (double)(weft__time_ns() - t0) / 1e9;
        r->sh->detect_s = detect;
        CHECK(r, st[0] == WEFT_ERR_PEER_FAILED, "pending receive: %s, want peer failed",
              weft_status_string(st[0]));
        CHECK(r, recv_only || st[1] == WEFT_ERR_PEER_FAILED, "pending send: %s, want peer failed",
              weft_status_string(st[1]));
        CHECK(r, detect < DETECT_LIMIT_S, "detection took %.1f s", detect);

        st[0] = wait_one(r, r->ep, post_send(r, r->ep, VICTIM, tag(8, 3, 0), &v, sizeof(v)));
        CHECK(r, st[0] == WEFT_ERR_PEER_FAILED, "later send: %s, want peer failed",
              weft_status_string(st[0]));
        CHECK(r, strstr(weft_last_error(), "rank 1") != NULL, "the error does not name rank 1: %s",
              weft_last_error());
        st[0] = wait_one(r, r->ep, post_recv(r, r->ep, VICTIM, tag(8, 3, 1), &w, sizeof(w)));
        CHECK(r, st[0] == WEFT_ERR_PEER_FAILED, "later receive: %s, want peer failed",
              weft_status_string(st[0]));

        v = 99;
        send_ok(r, r->ep, BYSTANDER, tag(8, 1, 0), &v, sizeof(v));
        recv_ok(r, r->ep, BYSTANDER, tag(8, 1, 1), &v, sizeof(v));
        CHECK(r, v == 100, "survivor got %llu from the bystander", (unsigned long long)v);
        free(big);
    }
}

static void sc_peer_killed(rank_t *r)
{
    peer_killed(r, 0);
}

static void sc_peer_killed_recv_only(rank_t *r)
{
    peer_killed(r, 1);
}

/* The peer dies before this rank ever contacted it: the first send and
 * receive with it complete with PEER_FAILED. */
static void sc_dead_before_contact(rank_t *r)
{
    enum { VICTIM = 1, BYSTANDER = 2 };
    weft_p2p_req_t *reqs[2];
    weft_status_t st[2];
    uint64_t v = 1, w = 0, t0;

    if (r->rank == VICTIM) {
        barrier(r);
        for (;;) {
            pause(); /* until killed */
        }
    }
    if (r->rank == BYSTANDER) {
        barrier(r);
        return;
    }
    barrier(r);
    atomic_fetch_sub(&r->sh->barrier.quorum, 1);
    r->sh->killed[VICTIM] = 1;
    t0 = weft__time_ns();
    CHECK(r, kill(r->sh->pids[VICTIM], SIGKILL) == 0, "cannot kill the victim");
    usleep(100000);
    reqs[0] = post_recv(r, r->ep, VICTIM, tag(10, 0, 0), &w, sizeof(w));
    reqs[1] = post_send(r, r->ep, VICTIM, tag(10, 0, 1), &v, sizeof(v));
    wait_all(r, r->ep, reqs, st, 2);
    r->sh->detect_s = (double)(weft__time_ns() - t0) / 1e9;
    CHECK(r, st[0] == WEFT_ERR_PEER_FAILED && st[1] == WEFT_ERR_PEER_FAILED,
          "receive: %s, send: %s, want peer failed", weft_status_string(st[0]),
          weft_status_string(st[1]));
}

static void run_killed(const char *tls, scenario_fn fn, const char *what)
{
    shared_t *sh = run_ranks(3, tls, fn);
    double detect = sh->detect_s;

    ranks_done(sh);
    printf("ucx (%s transports): %s detected after %.3f s\n", tls ? tls : "default", what, detect);
    fflush(stdout);
    cr_assert_gt(detect, 0.0);
    cr_assert_lt(detect, DETECT_LIMIT_S);
}

Test(ucx, peer_killed_default, .timeout = 50)
{
    run_killed(NULL, sc_peer_killed, "SIGKILLed peer");
}

Test(ucx, peer_killed_tcp, .timeout = 50)
{
    run_killed("tcp", sc_peer_killed, "SIGKILLed peer");
}

Test(ucx, peer_killed_receive_only_default, .timeout = 50)
{
    run_killed(NULL, sc_peer_killed_recv_only, "SIGKILLed receive-only peer");
}

Test(ucx, peer_killed_receive_only_tcp, .timeout = 50)
{
    run_killed("tcp", sc_peer_killed_recv_only, "SIGKILLed receive-only peer");
}

Test(ucx, peer_dead_before_contact_default, .timeout = 50)
{
    run_killed(NULL, sc_dead_before_contact, "peer dead before first contact");
}

Test(ucx, peer_dead_before_contact_tcp, .timeout = 50)
{
    run_killed("tcp", sc_dead_before_contact, "peer dead before first contact");
}
