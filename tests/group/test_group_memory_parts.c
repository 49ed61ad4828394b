/*
 * test_group_memory_parts.c - where a layer group's bytes go, white-box:
 * for window-scorer groups at the bench shapes (8 and 32 heads, shares
 * 512 and 2,048, recent 32, obs 16, kernel 7, floor 0.2, slack 64) it
 * splits pb_kvcache_group_size into each head's parts (by the window
 * scorer's layout at head_capacity: ring, pos[], scores[], the rest) and
 * the group's own scratch (the candidate lists, one head's positions and
 * scores, the peek's work), and fails unless the parts add up to it
 * exactly. It prints the split beside the separate instances' bytes
 * (pb_kvcache_size at capacity share + slack) and the bytes a store of
 * layer_total + H * slack columns would take by the same per-column costs
 * (docs/head_adaptive.md, "Speed", the memory bullet, quotes this).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "head_group_internal.h"
#include "instance_internal.h"
#include "window_internal.h"

enum { SLACK = 64 };

static pb_kvcache_config head_config(pb_scorer scorer, uint32_t share) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.share = share;
    c.recent_window = 32u;
    c.obs_window = 16u;
    c.pool_kernel = 7u;
    c.scorer = scorer;
    return c;
}

static double mb(size_t b) { return (double)b / 1e6; }

static size_t size_at(pb_kvcache_config c, size_t capacity) {
    c.share = (uint32_t)capacity;
    c.capacity = (uint32_t)capacity;
    size_t b = 0;
    assert_int_equal(pb_kvcache_size(&c, &b), PB_OK);
    return b;
}

static void split_one(pb_scorer scorer, uint32_t heads, uint32_t share) {
    const pb_kvcache_config c = head_config(scorer, share);
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = heads;
    p.floor_permille = 200u;
    p.slack = SLACK;
    pb_kvcache_group_plan_info info = {.struct_size = sizeof info};
    assert_int_equal(pb_kvcache_group_plan(&c, &p, &info), PB_OK);
    size_t group = 0;
    assert_int_equal(pb_kvcache_group_size(&c, &p, &group), PB_OK);

    /* One head, as the group creates it: share and capacity at
     * head_capacity; the window scorer's split by its layout. */
    const size_t cap = info.head_capacity;
    pb_kvcache_config hc = c;
    hc.share = info.head_capacity;
    hc.capacity = info.head_capacity;
    const size_t head = size_at(c, cap);
    size_t ring = 0, cols = head;
    if (scorer == PB_SCORER_WINDOW) {
        pb__config cfg;
        assert_int_equal(pb__config_load(&hc, &cfg), PB_OK);
        pb__layout l;
        assert_int_equal(pb__window_layout_of(&cfg, &l), PB_OK);
        assert_int_equal(head, l.total);
        ring = l.off_scores - l.off_ring;
        cols = (l.off_ring - l.off_pos) + (l.off_alive - l.off_scores);
    }
    const size_t rest = head - ring - cols; /* state, holes, lazy room,
                                               per-call scratch, align */

    /* The group's own parts, in make_layout's order (head_group.c). */
    const size_t record = pb__lines(sizeof(pb_kvcache_group)) +
                          pb__lines(heads * sizeof(pb_kvcache *)) +
                          3u * pb__lines(heads * sizeof(size_t));
    const size_t one_head = pb__lines(cap * sizeof(uint32_t)) +
                            pb__lines(cap * sizeof(double));
    const size_t cand = pb__lines((size_t)heads * cap *
                                  sizeof(pb__group_entry));
    const size_t peek = pb__lines(pb__peek_work_bound(&hc));
    const size_t heads_bytes = (size_t)heads * pb__lines(head);
    /* The exactness this split rests on: nothing is left unaccounted (the
     * group's block asks for no alignment room: head_group.c). */
    assert_int_equal(group, record + one_head + cand + peek + heads_bytes);

    /* The separate instances, as bench_model_shape sizes them. */
    const size_t sep_cap = (size_t)share + SLACK;
    const size_t sep = size_at(c, sep_cap);
    const size_t separate = (size_t)heads * sep;

    /* A projection, not an allocation the library makes: the heads' state
     * as one store of layer_total + H * slack columns, plus a line of 16
     * columns and a cheap evict's 64 victims per head (run ends, holes,
     * lazy cells), at a head's cost per column (the slope of
     * pb_kvcache_size between sep_cap and head_capacity) and its fixed
     * cost per head; then the group's scratch either as today's lists
     * and one-head arrays over the store (the held total never exceeds
     * it) or as a merge without lists (H leaves, the chosen positions in
     * the caller's victims buffer) that keeps only the window peek's work
     * for the largest head. */
    const size_t per_col = (head - sep) / (cap - sep_cap);
    const size_t fixed = sep - per_col * sep_cap;
    const size_t store = (size_t)info.layer_total + (size_t)heads * SLACK +
                         (size_t)heads * (16u + 64u);
    const size_t p_heads = store * per_col + (size_t)heads * fixed;
    const size_t p_lists =
        store * (sizeof(pb__group_entry) + sizeof(uint32_t) +
                 sizeof(double)) + store * sizeof(double) + record;
    const size_t p_leaves =
        (scorer == PB_SCORER_WINDOW ? info.head_max * sizeof(double) : 0u) +
        record + (size_t)heads * 64u;
    const double r_sep = (double)separate;

    printf("| %s | %u x %u | %zu | %.2f | %u x %.3f | %u x %.3f | "
           "%u x %.3f | %.3f | %.3f | %.3f | %.2f | %.2fx | %zu + %zu/col "
           "| %.2f (%.2fx) | %.2f (%.2fx) |\n",
           scorer == PB_SCORER_WINDOW ? "window" : "cumulative", heads,
           share, cap, mb(group), heads, mb(ring), heads, mb(cols), heads,
           mb(rest), mb(cand), mb(one_head), mb(peek + record), mb(separate),
           (double)group / r_sep, fixed, per_col, mb(p_heads + p_lists),
           (double)(p_heads + p_lists) / r_sep, mb(p_heads + p_leaves),
           (double)(p_heads + p_leaves) / r_sep);
}

static void parts_add_up(void **state) {
    (void)state;
    printf("| scorer | H x S | head capacity | group MB | ring MB | "
           "pos + scores MB | rest MB | candidate lists MB | one-head "
           "arrays MB | peek work + record MB | separate MB | ratio | head "
           "bytes | store, lists MB (ratio) | store, leaves MB (ratio) |\n");
    const pb_scorer scorers[2] = {PB_SCORER_WINDOW, PB_SCORER_CUMULATIVE};
    for (int s = 0; s < 2; s++) {
        split_one(scorers[s], 8u, 512u);
        split_one(scorers[s], 8u, 2048u);
        split_one(scorers[s], 32u, 512u);
        split_one(scorers[s], 32u, 2048u);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(parts_add_up)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
