/*
 * The algorithm registry (coll/registry.c): every row complete and
 * consistent, the rows of a collective together and found by name, layouts
 * that keep shared-memory algorithms out where they cannot run, and the
 * WEFT_TUNE errors that name what the registry has. (The docs table is
 * checked against it by tests/coll/test_algorithms_doc.sh.)
 */
#include <criterion/criterion.h>

#include <math.h>

#include "coll/coll.h"
#include "coll/cost.h"
#include "tests/harness.h"

#include <string.h>

/* No character that would break weft_info --algorithms or the Markdown table. */
static void expect_plain(const char *what, const weft_coll_algo_t *a, const char *text)
{
    cr_assert_not_null(text, "%s/%s: no %s", weft__coll_kind_name(a->kind), a->name, what);
    cr_assert_gt(strlen(text), 0, "%s/%s: empty %s", weft__coll_kind_name(a->kind), a->name, what);
    cr_assert_null(strpbrk(text, "\t\n|"), "%s/%s: %s '%s' holds a tab, newline or '|'",
                   weft__coll_kind_name(a->kind), a->name, what, text);
}

Test(registry, rows_are_complete)
{
    cr_assert_gt(weft__coll_nalgos, 0);
    for (int i = 0; i < weft__coll_nalgos; i++) {
        const weft_coll_algo_t *a = &weft__coll_algos[i];

        cr_assert_lt((unsigned)a->kind, WEFT_COLL_KIND_COUNT, "row %d: bad collective", i);
        expect_plain("name", a, a->name);
        expect_plain("file", a, a->file);
        expect_plain("model", a, a->model);
        expect_plain("description", a, a->desc);
        cr_assert_not_null(a->build, "%s: no builder", a->name);
        cr_assert_not_null(a->cost, "%s: no cost model", a->name);
        cr_assert_eq(strncmp(a->file, "coll/", 5), 0, "%s: file %s", a->name, a->file);
        if (a->flags & WEFT_COLL_POW2_ONLY) {
            const weft_coll_algo_t *o;

            cr_assert_not_null(a->otherwise, "%s: what runs on other rank counts?", a->name);
            o = weft__coll_find(a->kind, a->otherwise);
            cr_assert_not_null(o, "%s: otherwise '%s' is not registered", a->name, a->otherwise);
            cr_assert_eq(o->flags & WEFT_COLL_POW2_ONLY, 0, "%s: %s needs 2^k ranks too", a->name,
                         o->name);
        } else {
            cr_assert_null(a->otherwise, "%s: otherwise without WEFT_COLL_POW2_ONLY", a->name);
        }
        cr_assert_eq((a->flags & WEFT_COLL_POW2_FOLD) && (a->flags & WEFT_COLL_POW2_ONLY), 0,
                     "%s: fold or hand over, not both", a->name);
    }
}

Test(registry, rows_of_a_collective_together)
{
    for (int k = 0; k < WEFT_COLL_KIND_COUNT; k++) {
        int n, total = 0, flat = 0;
        const weft_coll_algo_t *rows = weft__coll_algos_of((weft_coll_kind_t)k, &n);

        for (int i = 0; i < weft__coll_nalgos; i++) {
            total += weft__coll_algos[i].kind == (weft_coll_kind_t)k;
        }
        cr_assert_eq(n, total, "%s: %d rows found, %d in the table", weft__coll_kind_name(k), n,
                     total);
        cr_assert_gt(n, 0, "%s has no algorithm", weft__coll_kind_name(k));
        for (int i = 0; i < n; i++) {
            cr_assert_eq(rows[i].kind, (weft_coll_kind_t)k, "%s: row %d is of %s",
                         weft__coll_kind_name(k), i, weft__coll_kind_name(rows[i].kind));
            cr_assert_eq(weft__coll_find((weft_coll_kind_t)k, rows[i].name), &rows[i],
                         "%s/%s: its name is taken twice", weft__coll_kind_name(k), rows[i].name);
            flat += rows[i].layout == WEFT_COLL_LAYOUT_ANY;
        }
        /* what shared-memory algorithms and hierarchical rails fall back to */
        cr_assert_gt(flat, 0, "%s: no algorithm runs everywhere", weft__coll_kind_name(k));
    }
    cr_assert_null(weft__coll_find(WEFT_COLL_ALLREDUCE, "bruck"));
    cr_assert_null(weft__coll_find(WEFT_COLL_ALLTOALLV, "shm")); /* per-peer counts: none */
    cr_assert_not_null(weft__coll_find(WEFT_COLL_GATHER, "shm"));
    cr_assert_null(weft__coll_algos_of(WEFT_COLL_KIND_COUNT, &(int){0}));
}

Test(registry, collective_names)
{
    for (int k = 0; k < WEFT_COLL_KIND_COUNT; k++) {
        weft_coll_kind_t got = WEFT_COLL_KIND_COUNT;

        cr_assert_eq(weft__coll_kind_parse(weft__coll_kind_name(k), &got), WEFT_OK);
        cr_assert_eq(got, (weft_coll_kind_t)k);
    }
    cr_assert_eq(weft__coll_kind_parse("allreducex", &(weft_coll_kind_t){0}), WEFT_ERR_INVALID_ARG);
    cr_assert_eq(weft__coll_kind_parse("", &(weft_coll_kind_t){0}), WEFT_ERR_INVALID_ARG);
    cr_assert_str_eq(weft__coll_kind_name(WEFT_COLL_KIND_COUNT), "unknown");
}

Test(registry, constraints_in_words)
{
    static const struct {
        weft_coll_kind_t kind;
        const char *name, *want;
    } cases[] = {
        {WEFT_COLL_ALLREDUCE, "ring", "any p"},
        {WEFT_COLL_ALLREDUCE, "rabenseifner", "p not 2^k: fold"},
        {WEFT_COLL_REDUCE_SCATTER, "recursive_halving", "p not 2^k: runs ring"},
        {WEFT_COLL_ALLGATHER, "recursive_doubling", "p not 2^k: runs bruck"},
        {WEFT_COLL_ALLTOALL, "pairwise", "in place: input staged in scratch"},
        {WEFT_COLL_BARRIER, "shm", "one node with shared memory"},
        {WEFT_COLL_BCAST, "hier", "several nodes of equal rank counts"},
    };
    char buf[256], tiny[8];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const weft_coll_algo_t *a = weft__coll_find(cases[i].kind, cases[i].name);

        cr_assert_not_null(a, "%s is not registered", cases[i].name);
        cr_assert_str_eq(weft__coll_algo_constraints(a, buf, sizeof(buf)), cases[i].want);
    }
    /* a short buffer truncates, never overflows */
    weft__coll_algo_constraints(weft__coll_find(WEFT_COLL_BCAST, "hier"), tiny, sizeof(tiny));
    cr_assert_eq(strlen(tiny), sizeof(tiny) - 1);
}

static void init_clean(void)
{
    harness_set_env("WEFT_TUNE", NULL);
    harness_set_env("WEFT_SHM", NULL);
    cr_assert_eq(weft_init(), WEFT_OK, "%s", weft_last_error());
}

static void fini(void)
{
    weft_finalize();
}

/* Where the ranks are decides what is offered: the layout of the row; and
 * the mode: the ordered rows only in the reproducible one, and there the
 * reductions only on them. */
Test(registry, layouts_decide_where_rows_run, .init = init_clean, .fini = fini)
{
    weft_cost_params_t one, nodes, none;

    for (int mode = 0; mode < 2; mode++) {
        weft__cost_defaults(&none); /* one node, no shared memory */
        none.reproducible = mode;
        one = none;
        one.shm = 1;
        one.local = 4;
        nodes = one;
        nodes.nodes = 2;
        nodes.local = 2;
        for (int i = 0; i < weft__coll_nalgos; i++) {
            const weft_coll_algo_t *a = &weft__coll_algos[i];
            int in_mode =
                (a->flags & WEFT_COLL_ORDERED) ? mode : !mode || !weft__coll_kind_reduces(a->kind);
            int any = a->layout == WEFT_COLL_LAYOUT_ANY && in_mode;

            cr_assert_eq(weft__cost_fits(a, &none, 4), any, "%s/%s without shared memory, mode %d",
                         weft__coll_kind_name(a->kind), a->name, mode);
            cr_assert_eq(weft__cost_fits(a, &one, 4),
                         any || (in_mode && a->layout == WEFT_COLL_LAYOUT_ONE_NODE),
                         "%s/%s on one node of 4, mode %d", weft__coll_kind_name(a->kind), a->name,
                         mode);
            cr_assert_eq(weft__cost_fits(a, &nodes, 4),
                         any || (in_mode && a->layout == WEFT_COLL_LAYOUT_NODES),
                         "%s/%s on 2 nodes of 2, mode %d", weft__coll_kind_name(a->kind), a->name,
                         mode);
            cr_assert_eq(weft__cost_predict(a, &none, 1 << 20, 4) >= 0, any);
            cr_assert_eq(weft__cost_predict(a, &none, 1 << 20, 1), 0, "one rank costs nothing");
            if (weft__cost_fits(a, &one, 4)) {
                cr_assert_gt(weft__cost_predict(a, &one, 1 << 20, 4), 0, "%s/%s",
                             weft__coll_kind_name(a->kind), a->name);
            }
            if (weft__cost_fits(a, &nodes, 4)) {
                cr_assert_gt(weft__cost_predict(a, &nodes, 1 << 20, 4), 0, "%s/%s",
                             weft__coll_kind_name(a->kind), a->name);
            }
        }
    }
}

/* WEFT_REPRODUCIBLE: every reduction selects its ordered row, whatever
 * WEFT_TUNE says; the other collectives select as before. */
Test(registry, reproducible_mode_selects_the_ordered_rows, .init = init_clean, .fini = fini)
{
    const weft_coll_kind_t reductions[] = {WEFT_COLL_ALLREDUCE, WEFT_COLL_REDUCE,
                                           WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_REDUCE_SCATTER_V};
    const weft_coll_algo_t *allgather = weft__coll_select(WEFT_COLL_ALLGATHER, 1 << 20, 8);

    cr_assert_eq(weft__coll_tune_load("allreduce:0-inf:ring,reduce:0-inf:binomial"), WEFT_OK);
    cr_assert_str_eq(weft__coll_select(WEFT_COLL_ALLREDUCE, 64, 8)->name, "ring");
    weft__coll_config.reproducible = 1;
    for (size_t k = 0; k < sizeof(reductions) / sizeof(reductions[0]); k++) {
        for (size_t bytes = 8; bytes <= (64u << 20); bytes *= 16) {
            const weft_coll_algo_t *a = weft__coll_select(reductions[k], bytes, 8);

            cr_assert_str_eq(a->name, "ordered", "%s of %zu bytes: %s",
                             weft__coll_kind_name(reductions[k]), bytes, a->name);
        }
    }
    cr_assert_eq(weft__coll_select(WEFT_COLL_ALLGATHER, 1 << 20, 8), allgather);
    weft__coll_config.reproducible = 0;
    for (size_t k = 0; k < sizeof(reductions) / sizeof(reductions[0]); k++) {
        cr_assert_str_neq(weft__coll_select(reductions[k], 1 << 20, 8)->name, "ordered",
                          "%s: an ordered row offered outside the mode",
                          weft__coll_kind_name(reductions[k]));
    }
    weft__coll_tune_release();
}

/* WEFT_TUNE names rows of the registry; an error lists what there is. */
Test(registry, tune_errors_name_the_choices, .init = init_clean, .fini = fini)
{
    cr_assert_eq(weft__coll_tune_load("allreduce:0-inf:bruck"), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "allreduce has no algorithm 'bruck'"), "%s",
                       weft_last_error());
    cr_assert_not_null(
        strstr(weft_last_error(), "recursive_doubling, rabenseifner, ring, shm, hier"), "%s",
        weft_last_error());
    cr_assert_eq(weft__coll_tune_load("allreduc:0-inf:ring"), WEFT_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(weft_last_error(), "unknown collective 'allreduc'"), "%s",
                       weft_last_error());
    cr_assert_not_null(strstr(weft_last_error(), "allreduce, reduce_scatter, allgather"), "%s",
                       weft_last_error());
    /* every row can be named */
    for (int i = 0; i < weft__coll_nalgos; i++) {
        const weft_coll_algo_t *a = &weft__coll_algos[i];
        char rule[128];

        snprintf(rule, sizeof(rule), "%s:0-inf:%s", weft__coll_kind_name(a->kind), a->name);
        cr_assert_eq(weft__coll_tune_load(rule), WEFT_OK, "%s: %s", rule, weft_last_error());
        cr_assert_eq(weft__coll_tune_match(a->kind, 100), a, "%s", rule);
    }
    weft__coll_tune_release();
}

/* The defaults on nodes of local ranks each with shared memory. */
static void hier_params(weft_cost_params_t *c, int nodes, int local)
{
    weft__cost_defaults(c);
    c->shm = 1;
    c->nodes = nodes;
    c->local = local;
}

/* The hierarchical allreduce's, bcast's, allgather's, reduce_scatter's and reduce's two forms:
 * with auto the model takes the leader form (one rail carries the whole vector) for small vectors
 * and the sliced one for large, and its prediction is that form's; a size or inf decides alone;
 * the other collectives (gather) have one form. 4 nodes of 8 ranks, the defaults, more ranks than
 * cores (where the L rails of a node wait for each other; with a core per rank the bcast's leader
 * form still saves a shared-memory step).
 */
Test(registry, hier_leader_forms, .init = init_clean, .fini = fini)
{
    const weft_coll_kind_t kinds[] = {WEFT_COLL_ALLREDUCE, WEFT_COLL_BCAST, WEFT_COLL_ALLGATHER,
                                      WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_REDUCE};
    weft_cost_params_t c, cores;

    hier_params(&c, 4, 8);
    cores = c;
    c.oversubscribed = 1;
    cr_assert(weft__cost_hier_leader(&cores, WEFT_COLL_BCAST, 8), "bcast of 8 B: sliced");
    cr_assert_eq(weft__coll_config.hier_leader, WEFT_HIER_LEADER_AUTO);
    cr_assert_not(weft__cost_hier_leader(&c, WEFT_COLL_GATHER, 8), "gather has one form");
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        const weft_coll_algo_t *hier = weft__coll_find(kinds[k], "hier");
        const char *name = weft__coll_kind_name(kinds[k]);
        double small, large;

        weft__coll_config.hier_leader = WEFT_HIER_LEADER_AUTO;
        cr_assert(weft__cost_hier_leader(&c, kinds[k], 8), "%s of 8 bytes: sliced", name);
        cr_assert_not(weft__cost_hier_leader(&c, kinds[k], 64 << 20), "%s of 64 MiB: leader", name);
        small = weft__cost_predict(hier, &c, 8, 32);
        large = weft__cost_predict(hier, &c, 64 << 20, 32);
        weft__coll_config.hier_leader = SIZE_MAX;
        cr_assert(weft__cost_hier_leader(&c, kinds[k], 64 << 20), "%s: inf, not leader", name);
        cr_assert_eq(weft__cost_predict(hier, &c, 8, 32), small, "%s: the leader form at 8 B",
                     name);
        cr_assert_gt(weft__cost_predict(hier, &c, 64 << 20, 32), large,
                     "%s: the leader form at 64 MiB predicted no slower than the sliced one", name);
        weft__coll_config.hier_leader = 0;
        cr_assert_not(weft__cost_hier_leader(&c, kinds[k], 8), "%s: 0, still leader", name);
        cr_assert_gt(weft__cost_predict(hier, &c, 8, 32), small,
                     "%s: the sliced form at 8 B predicted no slower than the leader one", name);
        cr_assert_eq(weft__cost_predict(hier, &c, 64 << 20, 32), large);
        weft__coll_config.hier_leader = 4096;
        cr_assert(weft__cost_hier_leader(&c, kinds[k], 4096));
        cr_assert_not(weft__cost_hier_leader(&c, kinds[k], 4097));
    }
    weft__coll_config.hier_leader = WEFT_HIER_LEADER_AUTO;
}

/* The pipelined hierarchical allreduce: with auto the model cuts a large vector into chunks of at
 * least WEFT_HIER_PIPELINE_MIN_CHUNK bytes where the ranks have a core each (the node's shm work
 * then runs beside the rails'), and predicts it faster than one piece; a vector too small for two
 * chunks, or ranks outnumbering the cores, one piece; a size decides alone (larger vectors, at
 * most WEFT_HIER_PIPELINE_MAX_CHUNKS chunks in the prediction), 0 never. */
Test(registry, hier_pipeline_chunks, .init = init_clean, .fini = fini)
{
    const weft_coll_algo_t *ar = weft__coll_find(WEFT_COLL_ALLREDUCE, "hier");
    const double big = 64 << 20;
    weft_cost_params_t c, over;
    double piped, one;
    size_t chunk;

    hier_params(&c, 4, 8);
    over = c;
    over.oversubscribed = 1;
    cr_assert_eq(weft__coll_config.hier_pipeline, WEFT_HIER_PIPELINE_AUTO);
    chunk = weft__cost_hier_pipeline(&c, WEFT_COLL_ALLREDUCE, big);
    cr_assert_geq(chunk, WEFT_HIER_PIPELINE_MIN_CHUNK, "64 MiB in chunks of %zu bytes", chunk);
    cr_assert_leq(big / (double)chunk, WEFT_HIER_PIPELINE_MAX_CHUNKS);
    cr_assert_eq(
        weft__cost_hier_pipeline(&c, WEFT_COLL_ALLREDUCE, 2 * WEFT_HIER_PIPELINE_MIN_CHUNK - 1), 0,
        "two chunks of less than the least");
    cr_assert_eq(weft__cost_hier_pipeline(&over, WEFT_COLL_ALLREDUCE, big), 0,
                 "pipelined where ranks outnumber cores");
    piped = weft__cost_predict(ar, &c, (size_t)big, 32);
    weft__coll_config.hier_pipeline = 0;
    cr_assert_eq(weft__cost_hier_pipeline(&c, WEFT_COLL_ALLREDUCE, big), 0);
    one = weft__cost_predict(ar, &c, (size_t)big, 32);
    cr_assert_lt(piped, one, "pipelined %g s, one piece %g s", piped, one);
    weft__coll_config.hier_pipeline = 1 << 20;
    cr_assert_eq(weft__cost_hier_pipeline(&c, WEFT_COLL_ALLREDUCE, big), (size_t)1 << 20);
    cr_assert_eq(weft__cost_hier_pipeline(&over, WEFT_COLL_ALLREDUCE, big), (size_t)1 << 20,
                 "a size decides alone");
    cr_assert_eq(weft__cost_hier_pipeline(&c, WEFT_COLL_ALLREDUCE, 1 << 20), 0,
                 "1 MiB in chunks of 1 MiB: one piece");
    piped = weft__cost_predict(ar, &over, (size_t)big, 32);
    weft__coll_config.hier_pipeline = 0;
    one = weft__cost_predict(ar, &over, (size_t)big, 32);
    cr_assert_gt(piped, one,
                 "ranks outnumbering cores: 64 chunks predicted no slower (%g s) than "
                 "one piece (%g s)",
                 piped, one);
    weft__coll_config.hier_pipeline = WEFT_HIER_PIPELINE_AUTO;
}

/* The pipelined hierarchical bcast, reduce, allgather and reduce_scatter: with auto, a large vector
 * in chunks predicted faster than one piece where the ranks have a core each, one piece where they
 * outnumber the cores; the collectives without a pipelined form (alltoall, gather) never in chunks,
 * whatever WEFT_HIER_PIPELINE says. */
Test(registry, hier_pipeline_other_kinds, .init = init_clean, .fini = fini)
{
    const weft_coll_kind_t kinds[] = {WEFT_COLL_BCAST, WEFT_COLL_REDUCE, WEFT_COLL_ALLGATHER,
                                      WEFT_COLL_REDUCE_SCATTER};
    const double big = 64 << 20;
    weft_cost_params_t c, over;

    hier_params(&c, 4, 8);
    over = c;
    over.oversubscribed = 1;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        const weft_coll_algo_t *algo = weft__coll_find(kinds[i], "hier");
        const char *name = weft__coll_kind_name(kinds[i]);
        size_t chunk;
        double piped, one;

        cr_assert_not_null(algo);
        chunk = weft__cost_hier_pipeline(&c, kinds[i], big);
        cr_assert_geq(chunk, WEFT_HIER_PIPELINE_MIN_CHUNK, "%s: 64 MiB in chunks of %zu bytes",
                      name, chunk);
        cr_assert_leq(big / (double)chunk, WEFT_HIER_PIPELINE_MAX_CHUNKS, "%s", name);
        cr_assert_eq(weft__cost_hier_pipeline(&over, kinds[i], big), 0,
                     "%s pipelined where ranks outnumber cores", name);
        piped = weft__cost_predict(algo, &c, (size_t)big, 32);
        weft__coll_config.hier_pipeline = 0;
        one = weft__cost_predict(algo, &c, (size_t)big, 32);
        cr_assert_lt(piped, one, "%s: pipelined %g s, one piece %g s", name, piped, one);
        weft__coll_config.hier_pipeline = WEFT_HIER_PIPELINE_AUTO;
    }
    weft__coll_config.hier_pipeline = 1 << 20;
    cr_assert_eq(weft__cost_hier_pipeline(&c, WEFT_COLL_BCAST, big), (size_t)1 << 20);
    cr_assert_eq(weft__cost_hier_pipeline(&c, WEFT_COLL_ALLTOALL, big), 0);
    cr_assert_eq(weft__cost_hier_pipeline(&c, WEFT_COLL_GATHER, big), 0);
    weft__coll_config.hier_pipeline = WEFT_HIER_PIPELINE_AUTO;
    cr_assert_eq(weft__cost_hier_pipeline(&c, WEFT_COLL_ALLTOALL, big), 0);
}

/* The hierarchical alltoall across two nodes of two ranks where ranks outnumber cores: chosen at
 * every size, each node's blocks for a rail together up to WEFT_HIER_ALLTOALL bytes per rank,
 * the node's own blocks through shared memory and the rest straight to their ranks above (so
 * the prediction jumps there); 0 and inf choose one form everywhere. */
Test(registry, hier_alltoall_forms, .init = init_clean, .fini = fini)
{
    const weft_coll_algo_t *hier = weft__coll_find(WEFT_COLL_ALLTOALL, "hier");
    const size_t edge = (size_t)128 << 10;
    weft_cost_params_t c;
    double below, above;

    hier_params(&c, 2, 2);
    c.alpha += weft__coll_config.cost_oversub_us * 1e-6;
    c.shm_alpha += weft__coll_config.cost_oversub_shm_us * 1e-6;
    c.oversubscribed = 1;
    cr_assert_eq(weft__coll_config.hier_alltoall, edge);
    cr_assert_eq(weft__coll_choose(WEFT_COLL_ALLTOALL, 64, 4, &c, NULL), hier, "64 B");
    cr_assert_eq(weft__coll_choose(WEFT_COLL_ALLTOALL, 32 << 10, 4, &c, NULL), hier, "32 KiB");
    cr_assert_eq(weft__coll_choose(WEFT_COLL_ALLTOALL, 16 << 20, 4, &c, NULL), hier, "16 MiB");
    below = weft__cost_predict(hier, &c, edge, 4);
    above = weft__cost_predict(hier, &c, edge + 1, 4);
    weft__coll_config.hier_alltoall = SIZE_MAX;
    cr_assert(fabs(weft__cost_predict(hier, &c, edge + 1, 4) - above) > 1e-12,
              "inf: the form for small blocks above %zu bytes too", edge);
    weft__coll_config.hier_alltoall = 0;
    cr_assert_neq(weft__cost_predict(hier, &c, edge, 4), below, "0: the form for large blocks");
    weft__coll_config.hier_alltoall = edge;
}

/* Where ranks outnumber cores the sliced forms pay their rail phase's latency once per local
 * rank: a hierarchical allgather costs more, and the allreduce takes its leader form for larger
 * vectors than with a core per rank. */
Test(registry, hier_rails_share_cores, .init = init_clean, .fini = fini)
{
    const weft_coll_algo_t *ag = weft__coll_find(WEFT_COLL_ALLGATHER, "hier");
    weft_cost_params_t c, over;
    size_t bytes, upto[2] = {0, 0};

    hier_params(&c, 2, 4);
    over = c;
    over.oversubscribed = 1;
    cr_assert_gt(weft__cost_predict(ag, &over, 4096, 8), weft__cost_predict(ag, &c, 4096, 8));
    for (int o = 0; o < 2; o++) {
        for (bytes = 8; bytes <= (64u << 20); bytes *= 2) {
            if (weft__cost_hier_leader(o ? &over : &c, WEFT_COLL_ALLREDUCE, (double)bytes)) {
                upto[o] = bytes;
            }
        }
    }
    cr_assert_gt(upto[1], upto[0], "leader form up to %zu bytes oversubscribed, %zu not", upto[1],
                 upto[0]);
}
