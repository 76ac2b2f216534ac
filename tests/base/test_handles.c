/*
 * Handles (base/handle.h) and the public objects behind them: a destroyed
 * object's handle is refused as "destroyed" after its slot is reused by a
 * new object, a value of no table is refused without being dereferenced,
 * tables grow past one chunk, and communicators and requests are freed when
 * destroyed (their handles still recognised).
 */
#include <criterion/criterion.h>

#include "base/handle.h"
#include "comm/comm.h"

#include <stdlib.h>
#include <string.h>

static weft_handle_table_t table = WEFT_HANDLE_TABLE_INIT("widget", 0x5a);

Test(handles, add_get_remove_and_stale)
{
    int a, b;
    void *ha, *hb, *obj = NULL;

    cr_assert_eq(weft__handle_add(&table, &a, &ha), WEFT_OK);
    cr_assert_eq(weft__handle_get(&table, ha), &a);
    cr_assert_eq(weft__handle_lookup(&table, ha, "w", &obj), WEFT_OK);
    cr_assert_eq(obj, &a);
    cr_assert_eq(weft__handle_remove(&table, ha), &a);
    cr_assert_null(weft__handle_get(&table, ha));
    cr_assert_null(weft__handle_remove(&table, ha), "removed twice");
    /* the slot is reused under a new generation: the old handle stays dead */
    cr_assert_eq(weft__handle_add(&table, &b, &hb), WEFT_OK);
    cr_assert_neq(ha, hb);
    cr_assert_eq((uintptr_t)ha & 0xffffffu, (uintptr_t)hb & 0xffffffu, "the freed slot is reused");
    cr_assert_null(weft__handle_get(&table, ha));
    cr_assert_eq(weft__handle_get(&table, hb), &b);
    obj = NULL;
    cr_assert_eq(weft__handle_lookup(&table, ha, "w", &obj), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "w was destroyed"), "%s", weft_last_error());
    cr_assert_null(obj, "nothing written on failure");
    cr_assert_eq(weft__handle_remove(&table, hb), &b);
    cr_assert_eq(weft__handle_live(&table), 0);
}

Test(handles, values_of_no_table)
{
    int x;
    void *h, *obj = NULL;
    weft_handle_table_t other = WEFT_HANDLE_TABLE_INIT("gadget", 0x5b);
    const void *bad[] = {&x, (void *)1, (void *)(uintptr_t)0x5a00000000000000ull,
                         (void *)(uintptr_t)0x5a00000000fffffful, (void *)(uintptr_t)-1};

    cr_assert_eq(weft__handle_lookup(&table, NULL, "w", &obj), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "w is NULL"), "%s", weft_last_error());
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(weft__handle_lookup(&table, bad[i], "w", &obj), WEFT_ERR_INVALID_ARG);
        cr_assert_not_null(strstr(weft_last_error(), "w is not a weft widget"), "%p: %s", bad[i],
                           weft_last_error());
    }
    /* a live handle of another table, and a generation never handed out */
    cr_assert_eq(weft__handle_add(&other, &x, &h), WEFT_OK);
    cr_assert_eq(weft__handle_lookup(&table, h, "w", &obj), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "not a weft widget"), "%s", weft_last_error());
    cr_assert_eq(weft__handle_add(&table, &x, &h), WEFT_OK);
    void *future = (void *)((uintptr_t)h + (5ull << 24));

    cr_assert_eq(weft__handle_lookup(&table, future, "w", &obj), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "not a weft widget"), "%s", weft_last_error());
    cr_assert_null(obj);
    cr_assert_eq(weft__handle_remove(&table, h), &x);
}

Test(handles, many_live_and_reused)
{
    enum { N = 3000 }; /* three chunks */
    static int objs[N];
    static void *h[N];

    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            cr_assert_eq(weft__handle_add(&table, &objs[i], &h[i]), WEFT_OK);
        }
        for (int i = 0; i < N; i++) {
            cr_assert_eq(weft__handle_get(&table, h[i]), &objs[i], "round %d object %d", round, i);
        }
        for (int i = 0; i < N; i += 2) {
            cr_assert_eq(weft__handle_remove(&table, h[i]), &objs[i]);
        }
        for (int i = 0; i < N; i++) {
            cr_assert_eq(weft__handle_get(&table, h[i]), i % 2 ? &objs[i] : NULL);
        }
        for (int i = 1; i < N; i += 2) {
            cr_assert_eq(weft__handle_remove(&table, h[i]), &objs[i]);
        }
        cr_assert_eq(weft__handle_live(&table), 0);
    }
    /* slots are reused: the table did not grow past what was live at once */
    cr_assert_leq(table.nslots, 4 * WEFT_HANDLE_CHUNK, "%u slots", table.nslots);
}

/* A one-rank world's communicators: destroyed ones are freed and refused. */
Test(handles, communicators_and_requests)
{
    weft_comm_t world, a, b;
    weft_request_t req, req2;
    int v = -3, done = 0;
    float x = 2, y = 0;

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_comm_world(&world), WEFT_OK, "%s", weft_last_error());
    uint32_t live = weft__handle_live(&weft__comm_handles);

    cr_assert_eq(weft_comm_dup(world, &a), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft__handle_live(&weft__comm_handles), live + 1);
    cr_assert_eq(weft_comm_destroy(a), WEFT_OK);
    cr_assert_eq(weft__handle_live(&weft__comm_handles), live, "a destroyed comm leaves the table");
    cr_assert_eq(weft_comm_dup(world, &b), WEFT_OK, "%s", weft_last_error());
    cr_assert_neq(a, b);
    cr_assert_eq(weft_comm_rank(a, &v), WEFT_ERR_INVALID_ARG, "the stale handle of a reused slot");
    cr_assert_not_null(strstr(weft_last_error(), "destroyed"), "%s", weft_last_error());
    cr_assert_eq(v, -3);
    cr_assert_eq(weft_allreduce(&x, &y, 1, WEFT_FLOAT32, WEFT_SUM, a), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(y, 0);
    cr_assert_eq(weft_comm_rank(b, &v), WEFT_OK);
    cr_assert_eq(v, 0);
    /* requests: a freed one is refused, also once its slot is reused */
    cr_assert_eq(weft_iallreduce(&x, &y, 1, WEFT_FLOAT32, WEFT_SUM, b, &req), WEFT_OK);
    cr_assert_eq(weft_wait(req), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(y, 2);
    cr_assert_eq(weft_request_free(req), WEFT_OK);
    cr_assert_eq(weft_test(req, &done), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "weft_test: req was destroyed"), "%s",
                       weft_last_error());
    cr_assert_eq(weft_ibarrier(b, &req2), WEFT_OK);
    cr_assert_eq(weft_wait(req), WEFT_ERR_INVALID_ARG, "stale request of a reused slot");
    cr_assert_eq(weft_request_free(req), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft_wait(req2), WEFT_OK);
    /* a communicator handle is not a request, nor a request a communicator */
    cr_assert_eq(weft_wait((weft_request_t)(void *)b), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "not a weft request"), "%s", weft_last_error());
    cr_assert_eq(weft_comm_rank((weft_comm_t)(void *)req2, &v), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "not a weft communicator"), "%s",
                       weft_last_error());
    cr_assert_eq(weft_request_free(req2), WEFT_OK);
    cr_assert_eq(weft_comm_destroy(b), WEFT_OK);
    cr_assert_eq(weft_comm_destroy(world), WEFT_OK);
    cr_assert_eq(weft__handle_live(&weft__comm_handles), live - 1);
    cr_assert_eq(weft_finalize(), WEFT_OK);
    /* after weft_finalize too: handles are never handed out twice */
    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_comm_world(&a), WEFT_OK);
    cr_assert_neq(a, world);
    cr_assert_eq(weft_comm_destroy(world), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "destroyed"), "%s", weft_last_error());
    cr_assert_eq(weft_comm_destroy(a), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_OK);
}

/* Emu streams are handles too: a destroyed one is refused (and never taken
 * for a CUDA stream) after a new stream reuses its slot. */
Test(handles, emu_streams)
{
    weft_stream_t a, b;
    char *buf;

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_stream_create(WEFT_MEM_EMU, &a), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_stream_destroy(a), WEFT_OK);
    cr_assert_eq(weft_stream_create(WEFT_MEM_EMU, &b), WEFT_OK, "%s", weft_last_error());
    cr_assert_neq(a, b);
    cr_assert_eq(weft_stream_synchronize(a), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "emu stream that was destroyed"), "%s",
                       weft_last_error());
    cr_assert_eq(weft_stream_destroy(a), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft_mem_alloc(WEFT_MEM_EMU, 64, (void **)&buf), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_memcpy_async(buf, "0123456789", 10, a), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft_memcpy_async(buf, "0123456789", 10, b), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_stream_synchronize(b), WEFT_OK);
    cr_assert_eq(memcmp(buf, "0123456789", 10), 0);
    cr_assert_eq(weft_mem_free(buf), WEFT_OK);
    cr_assert_eq(weft_stream_destroy(b), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_OK);
}

/* Communicator ids wrap at 2^16 in tags: a split never takes the tag id of a
 * live communicator (here the world's and a long-lived dup's), nor one of
 * those released lately, however many were made before. */
Test(handles, communicator_ids_skip_live_ones_after_wrapping, .timeout = 120)
{
    weft_comm_t world, keep, d;
    uint32_t mask = (1u << WEFT_TAG_COMM_BITS) - 1, wid, kid, prev = 0;
    int wrapped = 0;

    cr_assert_eq(weft_init(), WEFT_OK);
    cr_assert_eq(weft_comm_world(&world), WEFT_OK, "%s", weft_last_error());
    cr_assert_eq(weft_comm_dup(world, &keep), WEFT_OK, "%s", weft_last_error());
    wid = weft__comm_of(world)->id & mask;
    kid = weft__comm_of(keep)->id & mask;
    for (uint32_t i = 0; i < (1u << WEFT_TAG_COMM_BITS) + 512; i++) {
        cr_assert_eq(weft_comm_dup(world, &d), WEFT_OK, "dup %u: %s", i, weft_last_error());
        uint32_t id = weft__comm_of(d)->id & mask;

        cr_assert_neq(id, wid, "dup %u took the world's tag id %u", i, wid);
        cr_assert_neq(id, kid, "dup %u took a live dup's tag id %u", i, kid);
        cr_assert(i == 0 || id != prev, "dup %u took the tag id just released", i);
        wrapped |= i > 0 && id < prev;
        prev = id;
        cr_assert_eq(weft_comm_destroy(d), WEFT_OK);
    }
    cr_assert(wrapped, "the ids never wrapped");
    cr_assert_eq(weft_comm_destroy(keep), WEFT_OK);
    cr_assert_eq(weft_comm_destroy(world), WEFT_OK);
    cr_assert_eq(weft_finalize(), WEFT_OK);
}
